//! `--config FILE` for the roles whose settings are their flags (the coordinator, the S3
//! gateway): a TOML file whose keys are the flags' long names (`probe_ms` or `probe-ms`), each
//! read as the flag given with that value. The file's settings come first on the command line,
//! so a flag given there overrides the file (`args_override_self`), and both override the
//! environment. The drive has its own, richer file (limits; crates/drive/src/config.rs).

use std::ffi::OsString;
use std::path::Path;

use clap::{ArgAction, Command};

/// The commands that take such a file, by their path of subcommand names.
pub const ROLES: [&[&str]; 2] = [&["cluster", "coordinator"], &["s3"]];

/// The flag naming the file.
const FLAG: &str = "config";

/// A settings file that cannot be read or does not fit its command: named with the file.
#[derive(Debug)]
pub struct SettingsError(String);

impl std::fmt::Display for SettingsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SettingsError {}

/// `argv` with the settings of its `--config FILE` (if its command is one of `ROLES`) put
/// right after the command's name, as flags.
pub fn expand(argv: Vec<OsString>, cli: &Command) -> Result<Vec<OsString>, SettingsError> {
    let mut cli = cli.clone();
    // Global flags (etcd's) become every subcommand's own only once built.
    cli.build();
    let Some((depth, command)) = role_of(&argv, &cli) else { return Ok(argv) };
    let Some(file) = file_named(&argv[depth + 1..]) else { return Ok(argv) };
    let text = std::fs::read_to_string(&file).map_err(|e| SettingsError(format!("{}: {e}", file.display())))?;
    let flags = flags_of(&text, command).map_err(|e| SettingsError(format!("{}: {e}", file.display())))?;
    let mut out = argv[..=depth].to_vec();
    out.extend(flags);
    out.extend_from_slice(&argv[depth + 1..]);
    Ok(out)
}

/// How many names deep `argv` names one of `ROLES`, and that command.
fn role_of<'a>(argv: &[OsString], cli: &'a Command) -> Option<(usize, &'a Command)> {
    ROLES.iter().find_map(|path| {
        let given = argv.get(1..=path.len())?;
        if given.iter().zip(path.iter()).any(|(a, p)| a.to_str() != Some(*p)) {
            return None;
        }
        let mut command = cli;
        for name in *path {
            command = command.find_subcommand(name)?;
        }
        Some((path.len(), command))
    })
}

/// The file of `--config FILE` or `--config=FILE` among a command's arguments.
fn file_named(args: &[OsString]) -> Option<std::path::PathBuf> {
    let flag = format!("--{FLAG}");
    let mut args = args.iter();
    while let Some(a) = args.next() {
        let text = a.to_string_lossy();
        if text == "--" {
            return None;
        }
        if text == flag {
            return args.next().map(|f| Path::new(f).to_path_buf());
        }
        if let Some(f) = text.strip_prefix(&format!("{flag}=")) {
            return Some(f.into());
        }
    }
    None
}

/// The file's settings as the flags of `command`, in the file's order.
fn flags_of(text: &str, command: &Command) -> Result<Vec<OsString>, String> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| e.message().to_owned())?;
    let mut flags = Vec::new();
    for (key, value) in &table {
        let long = key.replace('_', "-");
        let arg = command
            .get_arguments()
            .find(|a| a.get_long() == Some(long.as_str()) && long != FLAG)
            .ok_or_else(|| format!("`{key}` is not a setting of `{}` (its settings are its flags)", command.get_name()))?;
        let switch = matches!(arg.get_action(), ArgAction::SetTrue);
        let values: Vec<&toml::Value> = match value {
            toml::Value::Array(items) if matches!(arg.get_action(), ArgAction::Append) => items.iter().collect(),
            v => vec![v],
        };
        for v in values {
            let text = match v {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Boolean(b) if switch => {
                    // A switch set to false says nothing (the default stands).
                    if *b {
                        flags.push(format!("--{long}").into());
                    }
                    continue;
                }
                toml::Value::Boolean(b) => b.to_string(),
                other => return Err(format!("`{key}`: a {} is not a flag's value", other.type_str())),
            };
            if switch {
                return Err(format!("`{key}` is a switch: true or false"));
            }
            flags.push(format!("--{long}").into());
            flags.push(text.into());
        }
    }
    Ok(flags)
}
