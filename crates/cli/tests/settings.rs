//! The drive's identity and settings on disk: created once, kept across restarts and erases,
//! and never silently replaced. A damaged or missing settings file stops the start (factory
//! settings would open the drive to the published default identity) unless the operator asks
//! for a reset.

mod common;

use std::process::{Command, Stdio};

use bytes::Bytes;
use common::TestDrive;
use spindle_client::{AclEntry, AclScope, Client, ClientConfig, PinOpType};

const SETTINGS: &str = "drive-state.pb";

async fn serial(drive: &TestDrive) -> (Bytes, Bytes) {
    let pair = common::sign_on_identity(&drive.client().await);
    assert!(!pair.0.is_empty() && !pair.1.is_empty());
    pair
}

/// Starts a drive on `data` that is expected to refuse; returns what it printed.
fn refused_start(data: &std::path::Path) -> String {
    let out = Command::new(common::spindle_bin())
        .args(["drive", "--port", "0", "--tls-port", "0", "--data"])
        .arg(data)
        .stdin(Stdio::null())
        .output()
        .expect("run spindle drive");
    assert!(!out.status.success(), "the drive started: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn admin_only_acl() -> Vec<spindle_proto::pb::command::security::Acl> {
    let all = ["READ", "WRITE", "DELETE", "RANGE", "SETUP", "P2POP", "GETLOG", "SECURITY", "POWER_MANAGEMENT"];
    let entry = AclEntry {
        identity: 7,
        key: "admin-secret".into(),
        scopes: vec![AclScope { offset: 0, value: String::new(), permissions: all.iter().map(|p| p.to_string()).collect(), tls_required: false }],
        max_priority: None,
    };
    vec![entry.to_proto().unwrap()]
}

async fn admin(drive: &TestDrive) -> Client {
    let config = ClientConfig {
        identity: 7,
        hmac_key: Bytes::from_static(b"admin-secret"),
        tls_trust: Some(drive.data_dir().join("tls/cert.pem")),
        ..ClientConfig::default()
    };
    Client::connect(drive.tls_addr.as_str(), config).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_survives_restarts_and_damaged_settings_never_open_the_drive() {
    let mut drive = TestDrive::start(&[]);
    let first = serial(&drive).await;
    drive.tls_client().await.set_acl(admin_only_acl()).await.unwrap();
    admin(&drive).await.put(b"payroll", Bytes::from_static(b"secret"), Default::default()).await.unwrap();
    drive.restart_after_kill();
    assert_eq!(serial(&drive).await, first, "the identity changed across a restart");
    assert!(drive.client().await.get(b"payroll").await.is_err(), "the factory identity is refused");
    drive.kill();

    let data = drive.data_dir().to_path_buf();
    let good = std::fs::read(data.join(SETTINGS)).unwrap();
    let mut flipped = good.clone();
    flipped[good.len() / 2] ^= 0x10;
    for (what, bytes) in [("empty", Vec::new()), ("truncated", good[..good.len() / 2].to_vec()), ("a flipped bit", flipped)] {
        std::fs::write(data.join(SETTINGS), &bytes).unwrap();
        let said = refused_start(&data);
        assert!(said.contains(SETTINGS) && said.contains("damaged"), "{what}: {said}");
    }
    std::fs::remove_file(data.join(SETTINGS)).unwrap();
    let said = refused_start(&data);
    assert!(said.contains("missing") && said.contains("identity"), "{said}");

    // Restored from a copy, the drive is itself again.
    std::fs::write(data.join(SETTINGS), &good).unwrap();
    drive.restart_after_kill();
    assert_eq!(serial(&drive).await, first);
    assert_eq!(&admin(&drive).await.get(b"payroll").await.unwrap().unwrap().value[..], b"secret");
    drive.kill();

    // The operator's explicit reset: factory settings, and (the identity being lost with
    // them) a new identity, both said in the drive's log.
    std::fs::write(data.join(SETTINGS), b"garbage").unwrap();
    let mut reset = TestDrive::start_in(&data, &["--reset-settings"]);
    let log = reset.client().await.get_log(&[spindle_client::LogType::Messages]).await.unwrap();
    let log = String::from_utf8_lossy(&log.messages.unwrap_or_default()).into_owned();
    assert!(log.contains("damaged"), "{log}");
    assert_ne!(serial(&reset).await, first);
    assert_eq!(&reset.client().await.get(b"payroll").await.unwrap().unwrap().value[..], b"secret", "data kept");
    reset.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erase_keeps_the_identity() {
    let mut drive = TestDrive::start(&[]);
    let first = serial(&drive).await;
    let c = drive.client().await;
    c.put(b"k", Bytes::from_static(b"v"), Default::default()).await.unwrap();
    let admin = drive.tls_client().await;
    admin.pin_operation(PinOpType::ErasePinop, b"").await.unwrap();
    assert_eq!(serial(&drive).await, first);
    assert!(drive.client().await.get(b"k").await.unwrap().is_none());
    drive.restart_after_kill();
    assert_eq!(serial(&drive).await, first, "an erase and a restart keep the identity");
}
