//! Limits the drive is configured with must be ones its engine can keep (hardening issue,
//! item 14): fjall asserts that a key is at most 65,535 bytes, and a longer key that reached
//! it panicked the engine's writer thread, after which every write failed.

mod common;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::TestDrive;
use spindle_client::PutOptions;

/// Runs `spindle drive` with `toml` as its configuration and returns its exit status and
/// stderr, or panics if it starts listening instead of refusing.
fn refused_start(toml: &str) -> (std::process::ExitStatus, String) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("drive.toml");
    std::fs::write(&config, toml).unwrap();
    let mut child = Command::new(common::spindle_bin())
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

/// The engine's own limit is allowed, and a key that long is stored and read back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_at_the_engines_limit_is_stored() {
    let drive = TestDrive::with_config("[limits]\nmax_key_size = 65535\nmax_message_size = 2097152\n");
    let c = drive.client().await;
    let key = vec![b'k'; 65_535];
    c.put(&key, Bytes::from_static(b"long key"), PutOptions::default()).await.unwrap();
    assert_eq!(c.get(&key).await.unwrap().unwrap().value, Bytes::from_static(b"long key"));
    let too_long = vec![b'k'; 65_536];
    let refused = c.put(&too_long, Bytes::from_static(b"v"), PutOptions::default()).await.unwrap_err();
    assert_eq!(refused.status(), Some(spindle_client::StatusCode::InvalidRequest), "{refused}");
    c.put(b"after", Bytes::from_static(b"v"), PutOptions::default()).await.unwrap();
}
