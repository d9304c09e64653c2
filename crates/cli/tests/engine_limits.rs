//! Limits the drive is configured with must be ones its engine can keep (hardening issue,
//! item 14): fjall asserts that a key is at most 65,535 bytes, and a longer key that reached
//! it panicked the engine's writer thread, after which every write failed. Here, what needs
//! the `spindle` process: a limit over the engine's stops its start (exit status, stderr).
//! A key at the engine's limit, over the protocol: `crates/drive/tests/engine_limits.rs`.

mod common;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `spindle drive` with `toml` as its configuration and returns its exit status and
/// stderr, or panics if it starts listening instead of refusing.
fn refused_start(toml: &str) -> (std::process::ExitStatus, String) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("drive.toml");
    std::fs::write(&config, toml).unwrap();
    let mut child = common::dies_with_test(&mut Command::new(common::spindle_bin()))
        .args(["drive", "--port", "0", "--tls-port", "0", "--data"])
        .arg(dir.path().join("data"))
        .arg("--config")
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(20) {
            child.kill().unwrap();
            let mut out = String::new();
            child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
            panic!("the drive started with {toml:?}: {out}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    (status, stderr)
}

#[test]
fn a_key_limit_over_the_engines_is_refused_at_start() {
    let (status, stderr) = refused_start("[limits]\nmax_key_size = 70000\n");
    assert!(!status.success());
    assert!(stderr.contains("max_key_size") && stderr.contains("65535"), "{stderr}");
}
