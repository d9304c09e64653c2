//! `spindle`: run a drive, talk to one, benchmark one.

#![forbid(unsafe_code)]

// The bench lab's commands, built with the default `lab` feature, and the cluster's and the
// gateway's, with the default `cluster` feature; a drive built without them
// (`--no-default-features`) links none of their crates.
#[cfg(feature = "lab")]
mod act_cmds;
mod admin_cmds;
#[cfg(feature = "lab")]
mod archive_cmds;
#[cfg(feature = "lab")]
mod bench_cmds;
#[cfg(feature = "lab")]
mod bench_s3_cmds;
mod client_cmds;
#[cfg(feature = "cluster")]
mod cluster_access;
#[cfg(feature = "cluster")]
mod cluster_cmds;
#[cfg(feature = "cluster")]
mod cluster_pools;
#[cfg(feature = "cluster")]
mod cluster_demo;
#[cfg(feature = "cluster")]
mod cluster_rotate;
#[cfg(feature = "cluster")]
mod cluster_secure;
#[cfg(feature = "cluster")]
mod s3_cmds;
#[cfg(feature = "cluster")]
mod s3_users;
#[cfg(feature = "lab")]
mod json_file;
#[cfg(feature = "lab")]
mod plan_cmds;
#[cfg(feature = "cluster")]
mod settings_file;

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use serde::Serialize;
use spindle_drive::DriveConfig;

#[derive(Parser)]
#[command(name = "spindle", version)]
// A flag given twice takes its last value: the settings of a role's --config file come first
// (settings_file.rs), so the command line's own flags override them.
#[command(args_override_self = true)]
#[cfg_attr(feature = "lab", command(about = "A Kinetic key-value drive, its client and its bench lab"))]
#[cfg_attr(all(feature = "cluster", not(feature = "lab")), command(about = "A Kinetic key-value drive, its client and its cluster (built without the bench lab)"))]
#[cfg_attr(not(feature = "cluster"), command(about = "A Kinetic key-value drive and its client (built without the cluster and the bench lab)"))]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a drive.
    Drive(DriveArgs),
    #[command(flatten)]
    Client(client_cmds::ClientCommand),
    /// Measure a Kinetic endpoint.
    #[cfg(feature = "lab")]
    #[command(subcommand)]
    Bench(bench_cmds::BenchCommand),
    /// Many drives as one store: create, change, inspect and use a cluster; run its coordinator.
    #[cfg(feature = "cluster")]
    #[command(subcommand)]
    Cluster(cluster_cmds::ClusterCommand),
    /// Serve the S3 API over a cluster (--cluster etcd://...) or one drive (--drive HOST:PORT).
    #[cfg(feature = "cluster")]
    S3(Box<s3_cmds::S3Args>),
    /// Administer a drive: ACLs, PINs, lock/erase, cluster version, power (TLS for security).
    #[command(subcommand)]
    Admin(admin_cmds::AdminCommand),
    /// Design a storage tier: nodes and drives per node from a catalogue, by integer programming.
    #[cfg(feature = "lab")]
    Plan(plan_cmds::PlanArgs),
}

#[derive(Clone, Copy, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
enum EngineArg {
    Fjall,
    Memory,
}

/// The drive's flags, named as the configuration file's keys: serialized, the flags given become
/// the settings laid over the file's (`drive_config`). A flag not given is left out: `None`
/// because TOML has no null, `false` by `not_given`.
#[derive(clap::Args, Serialize)]
struct DriveArgs {
    /// Data directory [default: ./spindle-data]
    #[arg(long)]
    data: Option<PathBuf>,
    /// Plain TCP port (0: any free port) [default: 8123]
    #[arg(long)]
    port: Option<u16>,
    /// TLS port, reported to clients [default: 8443]
    #[arg(long)]
    tls_port: Option<u16>,
    /// Serve Prometheus metrics at http://LISTEN:PORT/metrics (0: any free port) [default: off]
    #[arg(long)]
    metrics_port: Option<u16>,
    /// Address to listen on [default: 127.0.0.1]
    #[arg(long)]
    listen: Option<std::net::IpAddr>,
    /// TOML file with settings and limits; flags override it.
    #[arg(long)]
    #[serde(skip)]
    config: Option<PathBuf>,
    /// Storage engine [default: fjall]
    #[arg(long, value_enum)]
    engine: Option<EngineArg>,
    /// Nominal capacity (a quota); default: the filesystem's size.
    #[arg(long)]
    capacity_bytes: Option<u64>,
    /// Free space kept back on the filesystem before writes get NO_SPACE.
    #[arg(long)]
    reserved_bytes: Option<u64>,
    /// PEM certificate chain for the TLS listener (default: a self-signed pair kept in DATA/tls)
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key for the TLS listener
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Certificates (PEM) trusted when this drive pushes to a peer over TLS: a secured
    /// cluster's ca.pem
    #[arg(long)]
    p2p_tls_trust: Option<PathBuf>,
    /// Start with factory settings (default identity, no PINs) if the stored settings are
    /// missing or damaged, instead of refusing to start; a lost identity is replaced by a new one.
    #[arg(long)]
    #[serde(skip_serializing_if = "not_given")]
    reset_settings: bool,
    /// Start even though a journal is damaged where it had been made durable: keep every intact
    /// batch, drop the damage and record what was dropped (in journal-salvage.log and GETLOG
    /// MESSAGES). Without it such a drive refuses to start.
    #[arg(long)]
    #[serde(skip_serializing_if = "not_given")]
    salvage_journal: bool,
    /// Multi-tenant drives: keys outside a caller's scopes answer as absent ones
    /// (GETNEXT/GETPREVIOUS skip them, GETKEYRANGE counts without them) instead of NOT_AUTHORIZED.
    #[arg(long)]
    #[serde(skip_serializing_if = "not_given")]
    hide_out_of_scope_keys: bool,
    /// For tools written against the reference simulator: merge a SECURITY message's ACL into
    /// the one in force (each entry replaces its identity's, the others stay) instead of
    /// replacing the whole list as the protocol says.
    #[arg(long)]
    #[serde(skip_serializing_if = "not_given")]
    merge_acls: bool,
}

/// A switch left off says nothing, so the file's setting stands.
fn not_given(switch: &bool) -> bool {
    !switch
}

/// The defaults, overridden by the `--config` file, overridden by the flags given.
fn drive_config(args: &DriveArgs) -> Result<DriveConfig, spindle_drive::ConfigError> {
    DriveConfig::load(args.config.as_deref(), args)
}

async fn run_drive(args: DriveArgs) -> Result<(), Box<dyn std::error::Error>> {
    let config = drive_config(&args)?;
    let data = config.data_dir.clone();
    let drive = spindle_drive::start(config).await?;
    // Scripts and tests wait for the first line (and read the port from it), often closing
    // the pipe after it: the lines go out in one write, and a stdout nobody reads any more
    // must not stop a drive that is serving.
    let mut banner = format!("spindle drive listening on {} tls {} (data in {})\n", drive.local_addr, drive.tls_addr, data.display());
    if let Some(addr) = drive.metrics_addr {
        banner.push_str(&format!("spindle drive metrics on http://{addr}/metrics\n"));
    }
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(banner.as_bytes()).and_then(|()| out.flush()) {
        tracing::warn!("stdout: {e}");
    }
    drop(out);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
        _ = drive.shutdown_requested() => {}
    }
    tracing::info!("stopping: making acknowledged writes durable");
    drive.shutdown().await?;
    Ok(())
}

/// jemalloc for the drive and the load generator alike (crates/drive/src/memory.rs says why).
#[global_allocator]
static GLOBAL: spindle_drive::memory::Allocator = spindle_drive::memory::ALLOCATOR;

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            // s3s logs every error answer, 404s included, at ERROR: the gateway logs each
            // request itself (request_log: server errors at warn, the rest at debug).
            tracing_subscriber::EnvFilter::try_from_env("SPINDLE_LOG").unwrap_or_else(|_| "spindle=info,spindle_drive=info,s3s=off,warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    #[cfg(feature = "cluster")]
    let argv = {
        use clap::CommandFactory;
        match settings_file::expand(std::env::args_os().collect(), &Cli::command()) {
            Ok(argv) => argv,
            Err(e) => {
                eprintln!("spindle: {e}");
                std::process::exit(2);
            }
        }
    };
    #[cfg(not(feature = "cluster"))]
    let argv = std::env::args_os();
    let cli = Cli::parse_from(argv);
    // Every command moves values of up to megabytes (a drive, the gateway's chunks, the
    // coordinator's rebuilt shards, the load generator): the drive's allocator settings keep
    // large buffers for reuse instead of faulting them in afresh, and its trimmer returns
    // memory above a limit.
    spindle_drive::memory::start();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    // Threads serving connections (default: one per core). The engine's writer and fjall's
    // background workers run beside them.
    if let Some(n) = std::env::var("SPINDLE_WORKER_THREADS").ok().and_then(|v| v.parse::<usize>().ok()).filter(|n| *n > 0) {
        builder.worker_threads(n);
    }
    let runtime = builder.enable_all().build().expect("tokio runtime");
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Drive(args) => run_drive(args).await,
            Command::Client(cmd) => client_cmds::run(cmd).await,
            #[cfg(feature = "lab")]
            Command::Bench(cmd) => bench_cmds::bench(cmd).await,
            Command::Admin(cmd) => admin_cmds::run(cmd).await,
            #[cfg(feature = "cluster")]
            Command::Cluster(cmd) => cluster_cmds::run(cmd).await,
            #[cfg(feature = "cluster")]
            Command::S3(args) => s3_cmds::run(*args).await,
            #[cfg(feature = "lab")]
            Command::Plan(args) => plan_cmds::run(args),
        }
    });
    if let Err(e) = result {
        eprintln!("spindle: {e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every subcommand's arguments are well formed (clap checks a command only when it is
    /// parsed: a name used twice, as a flattened group's flag and a command's own, would
    /// panic at run time).
    #[test]
    fn every_command_line_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    fn drive_args(args: &[&str]) -> DriveArgs {
        match Cli::try_parse_from(["spindle", "drive"].iter().chain(args)).unwrap().command {
            Command::Drive(args) => args,
            _ => unreachable!("parsed as `spindle drive`"),
        }
    }

    /// The example drive settings of the deployment guide (deploy/config/drive.toml) are ones
    /// the drive takes.
    #[test]
    fn the_deployment_example_drive_settings_load() {
        let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/config/drive.toml");
        let c = drive_config(&drive_args(&["--config", file])).unwrap();
        assert_eq!((c.port, c.tls_port, c.listen.to_string()), (8123, 8443, "10.0.1.11".to_string()));
        assert_eq!(c.p2p_tls_trust.as_deref(), Some(std::path::Path::new("/etc/spindle/cluster/ca.pem")));
        assert!(c.tls_cert.is_some() && c.tls_key.is_some());
    }

    /// The flags given override the file's keys; a flag or switch not given leaves the file's
    /// value (a switch left off is not `false`).
    #[test]
    fn flags_given_override_the_file_and_no_others() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("drive.toml");
        std::fs::write(&file, "port = 9000\ntls_port = 9443\nengine = \"memory\"\nmerge_acls = true\n[limits]\nmax_key_size = 100\n").unwrap();
        let file = file.to_str().unwrap();

        let c = drive_config(&drive_args(&["--config", file, "--port", "9001", "--hide-out-of-scope-keys"])).unwrap();
        assert_eq!((c.port, c.tls_port, c.engine), (9001, 9443, spindle_drive::EngineKind::Memory));
        assert!(c.hide_out_of_scope_keys && c.merge_acls && !c.reset_settings);
        assert_eq!(c.limits.max_key_size, 100);
        assert!(!c.reserved_bytes_configured);

        let c = drive_config(&drive_args(&["--config", file, "--engine", "fjall", "--reserved-bytes", "0", "--reset-settings"])).unwrap();
        assert_eq!((c.port, c.engine, c.reserved_bytes), (9000, spindle_drive::EngineKind::Fjall, 0));
        assert!(c.reserved_bytes_configured && c.reset_settings);

        let c = drive_config(&drive_args(&["--data", "/srv/spindle", "--listen", "0.0.0.0", "--capacity-bytes", "1000"])).unwrap();
        assert_eq!((c.data_dir, c.listen.to_string(), c.capacity_bytes), ("/srv/spindle".into(), "0.0.0.0".into(), Some(1000)));
    }
}

#[cfg(all(test, feature = "cluster"))]
mod settings_file_tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(argv: &[&str]) -> Result<Cli, String> {
        let argv = settings_file::expand(argv.iter().map(Into::into).collect(), &Cli::command()).map_err(|e| e.to_string())?;
        Cli::try_parse_from(argv).map_err(|e| e.to_string())
    }

    fn example(name: &str) -> String {
        format!("{}/../../deploy/config/{name}", env!("CARGO_MANIFEST_DIR"))
    }

    /// The deployment guide's coordinator settings load as the flags they name, and a flag
    /// given on the command line overrides its key.
    #[test]
    fn the_deployment_example_coordinator_settings_load() {
        let file = example("coordinator.toml");
        for (extra, cluster) in [(&[][..], "prod"), (&["--cluster", "other"][..], "other")] {
            let argv: Vec<&str> = ["spindle", "cluster", "coordinator", "--config", &file].into_iter().chain(extra.iter().copied()).collect();
            let Command::Cluster(cluster_cmds::ClusterCommand::Coordinator { etcd, down_after_ms, migrate_mib_s, metrics, .. }) = parse(&argv).unwrap().command else {
                panic!("parsed as another command");
            };
            assert_eq!(etcd.etcd, "https://10.0.1.1:2379,https://10.0.1.2:2379,https://10.0.1.3:2379");
            assert_eq!((etcd.cluster.as_str(), down_after_ms, migrate_mib_s), (cluster, 3000, 64.0));
            assert_eq!(etcd.credentials.as_deref(), Some(std::path::Path::new("/etc/spindle/cluster")));
            assert_eq!(metrics.map(|m| m.to_string()).as_deref(), Some("10.0.1.1:9200"));
        }
    }

    #[test]
    fn the_deployment_example_gateway_settings_load() {
        let file = example("s3.toml");
        let Command::S3(args) = parse(&["spindle", "s3", "--listen", "0.0.0.0:9100", "--config", &file]).unwrap().command else {
            panic!("parsed as another command");
        };
        assert_eq!(args.store.cluster.as_deref(), Some("etcds://10.0.1.1:2379,10.0.1.2:2379,10.0.1.3:2379"));
        assert_eq!((args.store.cluster_name.as_str(), args.listen.to_string().as_str()), ("prod", "0.0.0.0:9100"));
        assert_eq!(args.store.credentials.as_deref(), Some(std::path::Path::new("/etc/spindle/cluster")));
        assert_eq!(args.tls_cert.as_deref(), Some(std::path::Path::new("/etc/spindle/tls/s3/cert.pem")));
        assert_eq!(args.keys_file.as_deref(), Some(std::path::Path::new("/etc/spindle/s3-keys")));
    }

    /// A key that is no flag, a value of the wrong kind and a file that is not TOML are refused
    /// with the file's name and the key; a switch takes true or false.
    #[test]
    fn a_settings_file_that_does_not_fit_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        let path = file.to_str().unwrap();
        for (text, want) in [
            ("prob_ms = 5\n", "`prob_ms` is not a setting of `coordinator`"),
            ("config = \"x\"\n", "`config` is not a setting"),
            ("probe_ms = [1, 2]\n", "`probe_ms`: a array is not a flag's value"),
            ("json = \"yes\"\n", "`json` is a switch"),
            ("probe_ms = \n", path),
        ] {
            std::fs::write(&file, text).unwrap();
            let e = parse(&["spindle", "cluster", "coordinator", "--config", path]).err().unwrap_or_default();
            assert!(e.contains(want) && e.contains(path), "{text:?}: {e}");
        }
        std::fs::write(&file, "probe_ms = 250\njson = true\nlease-secs = 7\n").unwrap();
        let Command::Cluster(cluster_cmds::ClusterCommand::Coordinator { probe_ms, lease_secs, etcd, .. }) = parse(&["spindle", "cluster", "coordinator", &format!("--config={path}")]).unwrap().command else {
            panic!("parsed as another command");
        };
        assert_eq!((probe_ms, lease_secs, etcd.json), (250, 7, true));
        // Wrong values are clap's errors, as for flags.
        std::fs::write(&file, "probe_ms = -3\n").unwrap();
        assert!(parse(&["spindle", "cluster", "coordinator", "--config", path]).is_err());
        let missing = dir.path().join("none.toml");
        let e = parse(&["spindle", "s3", "--config", missing.to_str().unwrap()]).err().unwrap();
        assert!(e.contains("none.toml"), "{e}");
    }
}
