//! ACLs, PINs and cluster versions over real TCP and TLS. (What needs the `spindle` process
//! — SIGKILL, its exit on SHUTDOWN, `spindle admin`, its refusal to start on damaged settings
//! — is in `crates/cli/tests/security.rs`.)

mod common;

use common::{admin_entry, entry, scope, set_acl, status, ALL_PERMISSIONS as ALL};

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::TestDrive;
use spindle_client::{
    AclEntry, Client, ClientConfig, DeleteOptions, LogType, MessageType, Peer, PinOpType, PowerLevel, PutOptions, RangeQuery,
    StatusCode,
};

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

/// The status a NOOP signed as `identity` with `key` gets, read from the raw answer: for an
/// identity the drive does not know, or a wrong key, the answer is not signed with the caller's
/// key, so the client would refuse it before showing its status.
async fn noop_status(drive: &TestDrive, identity: i64, key: &str) -> StatusCode {
    let mut raw = common::RawConn::connect(&drive.addr).await;
    let command = spindle_proto::pb::Command { header: Some(raw.header(MessageType::Noop)), body: None, status: None };
    raw.send(&command, identity, key.as_bytes(), b"").await;
    let (_, answer, _) = raw.response().await.expect("an answer");
    common::status_of(&answer)
}

async fn as_identity(drive: &TestDrive, identity: i64, key: &str, tls: bool) -> Client {
    let config = ClientConfig {
        identity,
        hmac_key: b(key),
        tls_trust: tls.then(|| drive.data_dir().join("tls/cert.pem")),
        ..ClientConfig::default()
    };
    let addr = if tls { &drive.tls_addr } else { &drive.addr };
    Client::connect(addr.as_str(), config).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_permission_against_every_operation() {
    let drive = TestDrive::start().await;
    let admin = drive.tls_client().await;
    let port: u16 = drive.addr.rsplit(':').next().unwrap().parse().unwrap();
    let myself = Peer { host: "127.0.0.1".into(), port, tls: false };
    for granted in ALL {
        set_acl(&admin, vec![admin_entry(), entry(2, "k2", vec![scope(0, "", &[granted], false)])]).await.unwrap();
        let c = as_identity(&drive, 2, "k2", true).await;
        admin.put(b"t/a", b("v"), PutOptions::default()).await.unwrap();
        admin.put(b"t/b", b("v"), PutOptions::default()).await.unwrap();
        let results: Vec<(&str, &str, StatusCode)> = vec![
            ("GET", "READ", status(c.get(b"t/a").await)),
            ("GETVERSION", "READ", status(c.get_version(b"t/a").await)),
            ("GETNEXT", "READ", status(c.get_next(b"t/a").await)),
            ("GETPREVIOUS", "READ", status(c.get_previous(b"t/b").await)),
            ("GETKEYRANGE", "RANGE", status(c.get_key_range(RangeQuery::inclusive(b("t/"), b("t/z"), 10)).await)),
            ("MEDIASCAN", "RANGE", status(c.media_scan(RangeQuery::inclusive(b("t/"), b("t/z"), 10)).await)),
            ("MEDIAOPTIMIZE", "RANGE", status(c.media_optimize(RangeQuery::inclusive(b("t/"), b("t/z"), 10)).await)),
            ("PUT", "WRITE", status(c.put(b"t/c", b("v"), PutOptions::default()).await)),
            ("DELETE", "DELETE", status(c.delete(b"t/b", DeleteOptions { force: true, ..DeleteOptions::default() }).await)),
            ("FLUSHALLDATA", "WRITE", status(c.flush_all_data().await)),
            ("GETLOG", "GETLOG", status(c.get_log(&[LogType::Limits]).await)),
            ("SETUP", "SETUP", status(c.set_cluster_version(0).await)),
            ("PEER2PEERPUSH", "P2POP", status(c.push_to_peer(&myself, vec![]).await)),
            ("SET_POWER_LEVEL", "POWER_MANAGEMENT", status(c.set_power_level(PowerLevel::Operational).await)),
            ("SECURITY", "SECURITY", status(set_acl(&c, vec![admin_entry(), entry(2, "k2", vec![scope(0, "", &[granted], false)])]).await)),
        ];
        for (op, needs, got) in results {
            if needs == granted {
                assert_ne!(got, StatusCode::NotAuthorized, "{granted} should allow {op}");
            } else {
                assert_eq!(got, StatusCode::NotAuthorized, "{granted} alone must not allow {op}");
            }
        }
        // NOOP needs no permission at all.
        c.noop().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scopes_offsets_tls_only_scopes_and_priorities() {
    let drive = TestDrive::start().await;
    let admin = drive.tls_client().await;
    let tenant = entry(3, "k3", vec![scope(2, "ab", &["READ", "WRITE", "RANGE"], false), scope(0, "", &["WRITE"], true)]);
    let limited = AclEntry { max_priority: Some(3), ..entry(4, "k4", vec![scope(0, "", &["READ"], false)]) };
    set_acl(&admin, vec![admin_entry(), tenant, limited]).await.unwrap();
    for k in ["xxab1", "xxab2", "abxx", "yyab3"] {
        admin.put(k.as_bytes(), b("v"), PutOptions::default()).await.unwrap();
    }
    let plain = as_identity(&drive, 3, "k3", false).await;
    assert_eq!(status(plain.put(b"xxab9", b("v"), PutOptions::default()).await), StatusCode::Success);
    assert_eq!(status(plain.put(b"abxx", b("v"), PutOptions::default()).await), StatusCode::NotAuthorized);
    assert_eq!(status(plain.get(b"abxx").await), StatusCode::NotAuthorized);
    assert_eq!(status(plain.get(b"xxab1").await), StatusCode::Success);
    // Ranges reveal only keys inside the caller's scopes.
    let keys = plain.get_key_range(RangeQuery::inclusive(b("a"), b("z"), 100)).await.unwrap();
    assert_eq!(keys, vec![b("xxab1"), b("xxab2"), b("xxab9"), b("yyab3")]);
    // GETNEXT from "ab" would reveal "abxx": refused.
    assert_eq!(status(plain.get_next(b"a").await), StatusCode::NotAuthorized);
    // The TLS-only scope works over TLS.
    let tls = as_identity(&drive, 3, "k3", true).await;
    assert_eq!(status(tls.put(b"abxx", b("v2"), PutOptions::default()).await), StatusCode::Success);

    // maxPriority: a request above it is refused.
    let c4 = as_identity(&drive, 4, "k4", false).await;
    let mut header = spindle_proto::pb::command::Header {
        message_type: Some(MessageType::Noop as i32),
        connection_id: Some(c4.connection_id()),
        cluster_version: Some(0),
        priority: Some(PowerLevelPriority::HIGHEST),
        ..Default::default()
    };
    let r = c4.request_with_header(header, None, Bytes::new()).await.unwrap();
    assert_eq!(r.status(), StatusCode::NotAuthorized);
    header.priority = Some(PowerLevelPriority::LOWER);
    assert_eq!(c4.request_with_header(header, None, Bytes::new()).await.unwrap().status(), StatusCode::Success);
}

/// The protocol's Priority numbers.
struct PowerLevelPriority;
impl PowerLevelPriority {
    const LOWER: i32 = 3;
    const HIGHEST: i32 = 9;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acls_replace_validate_and_require_tls() {
    let drive = TestDrive::with_config("[limits]\nmax_identity_count = 3\n").await;
    let admin = drive.tls_client().await;
    // Over plain TCP: refused.
    let plain = drive.client().await;
    assert_eq!(status(set_acl(&plain, vec![admin_entry()]).await), StatusCode::InvalidRequest);

    let bad = |f: &dyn Fn(&mut spindle_client::Acl)| {
        let mut a = entry(2, "k", vec![scope(0, "", &["READ"], false)]).to_proto().unwrap();
        f(&mut a);
        a
    };
    let cases: Vec<(Vec<spindle_client::Acl>, StatusCode)> = vec![
        (vec![admin_entry().to_proto().unwrap(), admin_entry().to_proto().unwrap()], StatusCode::InvalidRequest),
        (vec![bad(&|a| a.key = Some(Bytes::new()))], StatusCode::InvalidRequest),
        (vec![bad(&|a| a.hmac_algorithm = Some(-1))], StatusCode::NoSuchHmacAlgorithm),
        (vec![bad(&|a| a.hmac_algorithm = Some(7))], StatusCode::NoSuchHmacAlgorithm),
        (vec![bad(&|a| a.scope[0].permission.clear())], StatusCode::InvalidRequest),
        ((1..=4).map(|i| bad(&|a| a.identity = Some(i))).collect(), StatusCode::InvalidRequest),
    ];
    for (acl, expected) in cases {
        assert_eq!(status(admin.set_acl(acl).await), expected);
    }
    // Nothing changed: the factory identity still works.
    drive.client().await.noop().await.unwrap();

    // A valid ACL replaces the list: identity 1 is gone, its old key no longer works.
    set_acl(&admin, vec![entry(9, "nine", vec![scope(0, "", &ALL, false)])]).await.unwrap();
    let old = drive.client().await;
    assert!(old.noop().await.is_err(), "the factory identity survived a replacement");
    let nine = as_identity(&drive, 9, "nine", false).await;
    nine.noop().await.unwrap();
    // A wrong key for a known identity.
    let wrong = Client::connect(drive.addr.as_str(), ClientConfig { identity: 9, hmac_key: b("nein"), ..ClientConfig::default() }).await.unwrap();
    assert!(wrong.noop().await.is_err());
}

/// Issue 15, item 20. Goal: an ACL replaces the list by default, as the protocol says, and a
/// drive started with `--merge-acls` merges it as the reference simulator does, so tools
/// written against the simulator keep identity 1 after adding others. Method: the same
/// SECURITY message (identity 2 alone) to a default drive and to a merging one, then requests
/// as identity 1 and 2; the merging drive is stopped and started again to show the merged
/// list is what was persisted (the settings are saved when the SECURITY message is applied,
/// not at shutdown; after SIGKILL: `crates/cli/tests/security.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acl_replaces_by_default_and_merges_with_merge_acls() {
    let replacing = TestDrive::start().await;
    set_acl(&replacing.tls_client().await, vec![entry(2, "two", vec![scope(0, "", &ALL, false)])]).await.unwrap();
    assert_eq!(noop_status(&replacing, 1, "asdfasdf").await, StatusCode::HmacFailure, "identity 1 survived a replacement");
    as_identity(&replacing, 2, "two", false).await.noop().await.unwrap();

    let mut merging = TestDrive::with_config("merge_acls = true\n").await;
    set_acl(&merging.tls_client().await, vec![entry(2, "two", vec![scope(0, "", &ALL, false)])]).await.unwrap();
    merging.client().await.noop().await.expect("identity 1 is kept by a merge");
    as_identity(&merging, 2, "two", false).await.noop().await.unwrap();
    merging.restart().await;
    merging.client().await.noop().await.expect("the merged ACL was persisted with identity 1");
    as_identity(&merging, 2, "two", false).await.noop().await.expect("the merged ACL was persisted with identity 2");
}

/// Goal: under `merge_acls` an entry for an identity already in the ACL replaces that
/// identity's entry whole (key and scopes), and the merged list is still held to
/// maxIdentityCount. Method: set identity 2 with one key and scope, then again with another
/// key and scope, and try both keys on both scopes; then add identities up to the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_merge_acls_an_entry_replaces_its_identitys_entry() {
    let drive = TestDrive::with_config("merge_acls = true\n[limits]\nmax_identity_count = 3\n").await;
    let admin = drive.tls_client().await;
    set_acl(&admin, vec![entry(2, "two", vec![scope(0, "a/", &["READ", "WRITE"], false)])]).await.unwrap();
    let first = as_identity(&drive, 2, "two", false).await;
    first.put(b"a/1", b("v"), PutOptions::default()).await.unwrap();
    assert_eq!(status(first.put(b"b/1", b("v"), PutOptions::default()).await), StatusCode::NotAuthorized);

    set_acl(&admin, vec![entry(2, "deux", vec![scope(0, "b/", &["READ", "WRITE"], false)])]).await.unwrap();
    assert_eq!(noop_status(&drive, 2, "two").await, StatusCode::HmacFailure, "the old key still works");
    let second = as_identity(&drive, 2, "deux", false).await;
    second.put(b"b/1", b("v"), PutOptions::default()).await.unwrap();
    assert_eq!(status(second.put(b"a/2", b("v"), PutOptions::default()).await), StatusCode::NotAuthorized, "the old scope still applies");
    admin.noop().await.expect("identity 1 is untouched");

    // Identities 1, 2 and 3 fill maxIdentityCount 3: a fourth is refused though the message
    // holds one entry, and nothing changes.
    set_acl(&admin, vec![entry(3, "three", vec![scope(0, "", &["READ"], false)])]).await.unwrap();
    assert_eq!(status(set_acl(&admin, vec![entry(4, "four", vec![scope(0, "", &["READ"], false)])]).await), StatusCode::InvalidRequest);
    assert_eq!(noop_status(&drive, 4, "four").await, StatusCode::HmacFailure);
    as_identity(&drive, 3, "three", false).await.noop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pins_lock_unlock_and_erase() {
    let drive = TestDrive::start().await;
    let admin = drive.tls_client().await;
    let plain = drive.client().await;
    plain.put(b"precious", b("data"), PutOptions::default()).await.unwrap();

    // PIN operations only over TLS.
    assert_eq!(status(plain.pin_operation(PinOpType::LockPinop, b"1234").await), StatusCode::InvalidRequest);
    // No lock PIN yet: locking is refused.
    assert_eq!(status(admin.pin_operation(PinOpType::LockPinop, b"1234").await), StatusCode::InvalidRequest);
    admin.set_lock_pin(b"", b"1234").await.unwrap();
    assert_eq!(status(admin.set_lock_pin(b"wrong", b"5678").await), StatusCode::NotAuthorized);
    admin.set_lock_pin(b"1234", b"5678").await.unwrap();
    assert_eq!(status(admin.set_lock_pin(b"5678", &[b'p'; 33]).await), StatusCode::InvalidRequest, "oversize PIN");

    assert_eq!(status(admin.pin_operation(PinOpType::LockPinop, b"1234").await), StatusCode::NotAuthorized);
    admin.pin_operation(PinOpType::LockPinop, b"5678").await.unwrap();
    assert_eq!(status(plain.get(b"precious").await), StatusCode::DeviceLocked);
    assert_eq!(status(admin.get_log(&[LogType::Limits]).await), StatusCode::DeviceLocked);
    admin.pin_operation(PinOpType::UnlockPinop, b"5678").await.unwrap();
    assert_eq!(status(admin.pin_operation(PinOpType::UnlockPinop, b"5678").await), StatusCode::DeviceAlreadyUnlocked);
    assert_eq!(plain.get(b"precious").await.unwrap().unwrap().value, b("data"));

    // Erase PIN, then an erase: data gone, settings back to the factory's.
    admin.set_erase_pin(b"", b"erase-me").await.unwrap();
    admin.set_cluster_version(0).await.unwrap();
    assert_eq!(status(admin.pin_operation(PinOpType::ErasePinop, b"nope").await), StatusCode::NotAuthorized);
    assert!(plain.get(b"precious").await.unwrap().is_some());
    admin.pin_operation(PinOpType::ErasePinop, b"erase-me").await.unwrap();
    assert_eq!(plain.get(b"precious").await.unwrap(), None);
    // Both PINs are cleared: no lock PIN, so locking is refused again; the erase PIN is open.
    assert_eq!(status(admin.pin_operation(PinOpType::LockPinop, b"5678").await), StatusCode::InvalidRequest);
    plain.put(b"again", Bytes::from(vec![1u8; 100_000]), PutOptions::default()).await.unwrap();
    admin.pin_operation(PinOpType::SecureErasePinop, b"").await.unwrap();
    assert_eq!(plain.get(b"again").await.unwrap(), None);
    plain.put(b"after", b("x"), PutOptions::default()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_pins_are_answered_ever_more_slowly() {
    let drive = TestDrive::start().await;
    let admin = drive.tls_client().await;
    admin.set_lock_pin(b"", b"right").await.unwrap();
    let started = Instant::now();
    for _ in 0..3 {
        assert_eq!(status(admin.pin_operation(PinOpType::LockPinop, b"guess").await), StatusCode::NotAuthorized);
    }
    // 100 + 200 + 400 ms of back-off at least.
    assert!(started.elapsed() >= Duration::from_millis(650), "three wrong PINs took only {:?}", started.elapsed());
    admin.pin_operation(PinOpType::LockPinop, b"right").await.unwrap();
    admin.pin_operation(PinOpType::UnlockPinop, b"right").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_version_fences_requests_and_firmware_is_refused() {
    let mut drive = TestDrive::start().await;
    let c = drive.client().await;
    c.set_cluster_version(5).await.unwrap();
    let e = c.noop().await.unwrap_err();
    assert_eq!(e.status(), Some(StatusCode::VersionFailure));
    let v5 = Client::connect(drive.addr.as_str(), ClientConfig { cluster_version: 5, ..ClientConfig::default() }).await.unwrap();
    assert_eq!(v5.sign_on().header.as_ref().unwrap().cluster_version, Some(5));
    v5.noop().await.unwrap();
    let setup = spindle_proto::pb::command::Setup { firmware_download: Some(true), ..Default::default() };
    let r = v5
        .request(MessageType::Setup, Some(spindle_proto::pb::command::Body { setup: Some(Box::new(setup)), ..Default::default() }), b("image"))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::InvalidRequest);
    // The cluster version was saved: it is in force after a restart.
    drop((c, v5));
    drive.restart().await;
    let v5 = Client::connect(drive.addr.as_str(), ClientConfig { cluster_version: 5, ..ClientConfig::default() }).await.unwrap();
    v5.noop().await.unwrap();
}
