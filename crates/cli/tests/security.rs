//! Security settings where the `spindle` process itself is needed: settings that survive
//! SIGKILL or an ACL replaced during one, the process exiting on SHUTDOWN, `spindle admin`
//! run as a command, a start refused on a damaged settings file. ACLs, PINs and cluster
//! versions over the protocol are tested against an in-process drive in
//! `crates/drive/tests/security.rs`.

mod common;

use common::{admin_entry, entry, scope, set_acl, status, ALL_PERMISSIONS as ALL};

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::TestDrive;
use spindle_client::{Client, ClientConfig, PinOpType, PowerLevel, PutOptions, StatusCode};

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_levels_hibernate_and_shut_down() {
    let mut drive = TestDrive::start(&[]);
    let c = drive.client().await;
    c.put(b"kept", b("v"), PutOptions { sync: spindle_client::Synchronization::Writeback, ..PutOptions::default() }).await.unwrap();
    c.set_power_level(PowerLevel::Hibernate).await.unwrap();
    assert_eq!(status(c.get(b"kept").await), StatusCode::Hibernate);
    let log = drive.client().await;
    let config = log.sign_on().body.as_ref().unwrap().get_log.as_ref().unwrap().configuration.clone().unwrap();
    assert_eq!(config.current_power_level(), PowerLevel::Hibernate);
    c.set_power_level(PowerLevel::Operational).await.unwrap();
    assert!(c.get(b"kept").await.unwrap().is_some());
    c.set_power_level(PowerLevel::Shutdown).await.unwrap();
    // The process exits by itself, having made acknowledged writes durable.
    let deadline = Instant::now() + Duration::from_secs(20);
    while drive.is_running() {
        assert!(Instant::now() < deadline, "the drive did not shut down");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drive.restart_after_kill();
    assert!(drive.client().await.get(b"kept").await.unwrap().is_some());
}

#[test]
fn security_settings_survive_sigkill() {
    let rt = common::runtime();
    let mut drive = TestDrive::start(&[]);
    let cert = drive.data_dir().join("tls/cert.pem");
    let tls = |cluster_version| ClientConfig { identity: 7, hmac_key: b("seven"), cluster_version, tls_trust: Some(cert.clone()), ..ClientConfig::default() };
    rt.block_on(async {
        let admin = drive.tls_client().await;
        set_acl(&admin, vec![entry(7, "seven", vec![scope(0, "", &ALL, false)])]).await.unwrap();
        let seven = Client::connect(drive.tls_addr.as_str(), tls(0)).await.unwrap();
        seven.set_lock_pin(b"", b"lockpin").await.unwrap();
        seven.set_cluster_version(3).await.unwrap();
    });
    drive.restart_after_kill();
    rt.block_on(async {
        let seven = Client::connect(drive.tls_addr.as_str(), tls(3)).await.unwrap();
        // A drive with a lock PIN comes up locked.
        assert_eq!(status(seven.noop().await), StatusCode::DeviceLocked);
        seven.pin_operation(PinOpType::UnlockPinop, b"lockpin").await.unwrap();
        seven.noop().await.unwrap();
        let factory = Client::connect(drive.addr.as_str(), ClientConfig { cluster_version: 3, ..ClientConfig::default() }).await.unwrap();
        assert!(factory.noop().await.is_err(), "the factory identity came back");
    });
}

#[test]
fn the_admin_cli_drives_every_operation_over_tls() {
    let drive = TestDrive::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let acl = dir.path().join("acl.json");
    std::fs::write(
        &acl,
        r#"[{"identity": 1, "key": "asdfasdf", "scopes": [{"permissions": ["READ","WRITE","DELETE","RANGE","SETUP","P2POP","GETLOG","SECURITY","POWER_MANAGEMENT"]}]},
            {"identity": 5, "key": "five", "scopes": [{"offset": 0, "value": "five/", "permissions": ["READ"], "tls_required": true}], "max_priority": 5}]"#,
    )
    .unwrap();
    let cert = drive.data_dir().join("tls/cert.pem");
    let cert = cert.to_str().unwrap();
    let spindle = env!("CARGO_BIN_EXE_spindle");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(spindle).args(args).args(["--drive", &drive.tls_addr, "--tls-trust", cert]).output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
    };
    let (ok, out) = run(&["admin", "acl", "set", acl.to_str().unwrap()]);
    assert!(ok, "{out}");
    let (ok, out) = run(&["admin", "acl", "show"]);
    assert!(ok && out.contains("five/") && !out.contains("asdfasdf"), "{out}");
    assert!(run(&["admin", "pin", "lock", "--new", "4321"]).0);
    assert!(run(&["admin", "lock", "--pin", "4321"]).0);
    let (ok, out) = run(&["ping"]);
    assert!(!ok && out.contains("DEVICE_LOCKED"), "{out}");
    let (ok, out) = run(&["admin", "unlock", "--pin", "0000"]);
    assert!(!ok && out.contains("NOT_AUTHORIZED"), "{out}");
    assert!(run(&["admin", "unlock", "--pin", "4321"]).0);
    assert!(run(&["admin", "power", "hibernate"]).0);
    assert!(run(&["admin", "power", "operational"]).0);
    assert!(run(&["admin", "cluster-version", "2"]).0);
    let (ok, out) = run(&["ping"]);
    assert!(!ok && out.contains("VERSION_FAILURE"), "{out}");
    assert!(run(&["admin", "erase", "--cluster-version", "2"]).0);
    // Factory settings again: cluster version 0, identity 1, no ACL file needed.
    assert!(run(&["ping"]).0);
    // Security over plain TCP is refused with a clear message.
    let out = std::process::Command::new(spindle).args(["admin", "acl", "set", acl.to_str().unwrap(), "--drive", &drive.addr]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("only over TLS"));
}

#[test]
fn an_acl_replaced_during_a_crash_is_the_old_or_the_new_never_a_mix() {
    let rt = common::runtime();
    let mut drive = TestDrive::start(&[]);
    // Each version i: the admin plus identities 100+i and 200+i, both keyed "v{i}".
    let version = |i: i64| vec![admin_entry(), entry(100 + i, &format!("v{i}"), vec![scope(0, "", &["READ"], false)]), entry(200 + i, &format!("v{i}"), vec![scope(0, "", &["READ"], false)])];
    for attempt in 0..3u64 {
        let acknowledged = rt.block_on(async {
            let admin = drive.tls_client().await;
            let task = tokio::spawn(async move {
                let mut last = None;
                for i in 0..10_000i64 {
                    if set_acl(&admin, version(i)).await.is_err() {
                        break;
                    }
                    last = Some(i);
                }
                last
            });
            tokio::time::sleep(Duration::from_millis(150 + 100 * attempt)).await;
            drive.kill();
            task.await.unwrap()
        });
        drive.restart_after_kill();
        let acked = acknowledged.expect("no ACL change was acknowledged before the kill");
        rt.block_on(async {
            // Find the version in force: identity 100+i answers with key v{i}; so must 200+i.
            let mut found = None;
            for i in acked..=acked + 1 {
                let c = Client::connect(drive.addr.as_str(), ClientConfig { identity: 100 + i, hmac_key: b(&format!("v{i}")), ..ClientConfig::default() }).await.unwrap();
                if c.noop().await.is_ok() {
                    found = Some(i);
                }
            }
            let i = found.unwrap_or_else(|| panic!("attempt {attempt}: neither version {acked} nor {} is in force", acked + 1));
            let twin = Client::connect(drive.addr.as_str(), ClientConfig { identity: 200 + i, hmac_key: b(&format!("v{i}")), ..ClientConfig::default() }).await.unwrap();
            twin.noop().await.unwrap_or_else(|e| panic!("attempt {attempt}: a mix of ACL versions is in force: {e}"));
            let stale = Client::connect(drive.addr.as_str(), ClientConfig { identity: 100 + i - 1, hmac_key: b(&format!("v{}", i - 1)), ..ClientConfig::default() }).await.unwrap();
            assert!(i == 0 || stale.noop().await.is_err(), "attempt {attempt}: an older identity survived");
        });
    }
}

#[test]
fn a_damaged_settings_file_stops_the_drive_instead_of_reverting_to_factory_access() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("drive-state.pb"), b"\xff\xff\xff\xff").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_spindle"))
        .args(["drive", "--port", "0", "--tls-port", "0", "--data"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(!out.status.success(), "the drive started on a damaged settings file");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("drive-state.pb"), "{stderr}");
}

/// A renewed certificate written over the drive's files is served without a restart: here one
/// of another CA, so that which one is served shows. The connection opened before keeps
/// working; new handshakes get the new certificate within a generous bound of the drive's
/// check every two seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_tls_certificate_is_served_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (old_ca, new_ca) = (
        spindle_cluster::Credentials::generate(&dir.path().join("old"), "old").unwrap(),
        spindle_cluster::Credentials::generate(&dir.path().join("new"), "new").unwrap(),
    );
    let served = dir.path().join("served");
    let (cert, key) = old_ca.issue(&["127.0.0.1".into()], &served).unwrap();
    let drive = TestDrive::start(&["--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap()]);
    let trusting = |ca: &spindle_cluster::Credentials| ClientConfig { tls_trust: Some(ca.ca_path()), timeout: Duration::from_secs(10), ..ClientConfig::default() };
    let before = Client::connect(drive.tls_addr.as_str(), trusting(&old_ca)).await.unwrap();
    before.put(b"k", b("v"), PutOptions::default()).await.unwrap();
    assert!(Client::connect(drive.tls_addr.as_str(), trusting(&new_ca)).await.is_err());

    new_ca.issue(&["127.0.0.1".into()], &served).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Client::connect(drive.tls_addr.as_str(), trusting(&new_ca)).await.is_err() {
        assert!(Instant::now() < deadline, "the renewed certificate is not served");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(Client::connect(drive.tls_addr.as_str(), trusting(&old_ca)).await.is_err(), "the old certificate is still served");
    assert_eq!(before.get(b"k").await.unwrap().map(|e| e.value), Some(b("v")), "the connection opened before was dropped");
}
