//! Tenants on one drive. By default a scoped caller's GETNEXT/GETPREVIOUS answers
//! NOT_AUTHORIZED when the neighbour is outside its scope, as the reference drive does (and
//! Seagate's tests expect): that tells the caller a key is there. With
//! `--hide-out-of-scope-keys` the drive answers every neighbour and range query exactly as a
//! drive holding only the caller's keys would.

mod common;

use common::status;

use bytes::Bytes;
use common::TestDrive;
use spindle_client::{AclEntry, AclScope, Client, ClientConfig, RangeQuery};
use spindle_proto::StatusCode;

const OTHERS: [&str; 7] = ["a", "payroll/alice", "payroll/bob", "secret/plan", "tenant1/x", "tenant2", "zzz"];
const MINE: [&str; 3] = ["tenant2/a", "tenant2/b", "tenant2/c"];

fn scope(offset: i64, value: &str, perms: &[&str]) -> AclScope {
    AclScope { offset, value: value.into(), permissions: perms.iter().map(|p| p.to_string()).collect(), tls_required: false }
}

/// Identity 2 reads and ranges over `tenant2/` (a prefix); identity 3 over keys with `/b`
/// at offset 7 (a scope that cannot narrow a scan).
async fn setup(drive: &TestDrive) -> (Client, Client) {
    let all = ["READ", "WRITE", "DELETE", "RANGE", "SETUP", "P2POP", "GETLOG", "SECURITY", "POWER_MANAGEMENT"];
    let acl = [
        AclEntry { identity: 1, key: "asdfasdf".into(), scopes: vec![scope(0, "", &all)], max_priority: None },
        AclEntry { identity: 2, key: "k2".into(), scopes: vec![scope(0, "tenant2/", &["READ", "RANGE"])], max_priority: None },
        AclEntry { identity: 3, key: "k3".into(), scopes: vec![scope(7, "/b", &["READ", "RANGE"])], max_priority: None },
    ];
    drive.tls_client().await.set_acl(acl.iter().map(|e| e.to_proto().unwrap()).collect()).await.unwrap();
    let admin = drive.client().await;
    for k in OTHERS.iter().chain(MINE.iter()) {
        admin.put(k.as_bytes(), Bytes::from(format!("value of {k}")), Default::default()).await.unwrap();
    }
    let connect = |identity: i64, key: &'static str| {
        let config = ClientConfig { identity, hmac_key: Bytes::from_static(key.as_bytes()), ..ClientConfig::default() };
        Client::connect(drive.addr.clone(), config)
    };
    (connect(2, "k2").await.unwrap(), connect(3, "k3").await.unwrap())
}

/// What GETNEXT/GETPREVIOUS of `probe` answer on a drive holding only `visible`.
fn expected(visible: &[&str], probe: &str, forward: bool) -> Option<String> {
    let mut keys: Vec<&str> = visible.to_vec();
    keys.sort();
    if forward {
        keys.iter().find(|k| **k > probe).map(|k| k.to_string())
    } else {
        keys.iter().rev().find(|k| **k < probe).map(|k| k.to_string())
    }
}

async fn neighbour(c: &Client, probe: &str, forward: bool) -> Result<Option<String>, StatusCode> {
    let r = if forward { c.get_next(probe.as_bytes()).await } else { c.get_previous(probe.as_bytes()).await };
    match r {
        Ok(Some(e)) => {
            assert_eq!(e.value, Bytes::from(format!("value of {}", String::from_utf8_lossy(&e.key))));
            Ok(Some(String::from_utf8(e.key.to_vec()).unwrap()))
        }
        Ok(None) => Ok(None),
        Err(e) => Err(e.status().unwrap_or(StatusCode::InternalError)),
    }
}

fn probes() -> Vec<String> {
    let mut p: Vec<String> = OTHERS.iter().chain(MINE.iter()).map(|k| k.to_string()).collect();
    for k in OTHERS.iter().chain(MINE.iter()) {
        p.push(format!("{k}0"));
        p.push(k[..k.len() - 1].to_string());
    }
    p.extend(["", "m", "tenant2/", "tenant2/bb", "\u{7f}"].map(String::from));
    p
}

fn all_range(max: i32) -> RangeQuery {
    RangeQuery { start: Bytes::new(), start_inclusive: true, end: Some(Bytes::from_static(b"\x7f")), end_inclusive: true, max_returned: max, reverse: false }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_a_scoped_neighbour_query_says_a_key_is_there() {
    let drive = TestDrive::start().await;
    let (tenant, _) = setup(&drive).await;
    // `zzz` lies after the tenant's last key: NOT_AUTHORIZED, not NOT_FOUND.
    assert_eq!(status(tenant.get_next(b"tenant2/c").await), StatusCode::NotAuthorized);
    assert_eq!(neighbour(&tenant, "tenant2/a", true).await, Ok(Some("tenant2/b".into())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hidden_out_of_scope_keys_answer_as_absent_ones() {
    let drive = TestDrive::with_config("hide_out_of_scope_keys = true").await;
    let (tenant, filtered) = setup(&drive).await;
    let theirs = ["payroll/bob", "tenant2/b"]; // identity 3: "/b" at offset 7
    for probe in probes() {
        for forward in [true, false] {
            assert_eq!(neighbour(&tenant, &probe, forward).await, Ok(expected(&MINE, &probe, forward)), "tenant {probe:?} {forward}");
            assert_eq!(neighbour(&filtered, &probe, forward).await, Ok(expected(&theirs, &probe, forward)), "offset scope {probe:?} {forward}");
        }
    }
    // Ranges count only what the caller may see: two keys asked, two of its keys answered.
    let keys = tenant.get_key_range(all_range(2)).await.unwrap();
    assert_eq!(keys, vec![Bytes::from_static(b"tenant2/a"), Bytes::from_static(b"tenant2/b")]);
    let reversed = tenant.get_key_range(RangeQuery { reverse: true, ..all_range(200) }).await.unwrap();
    assert_eq!(reversed, MINE.iter().rev().map(|k| Bytes::from(k.to_string())).collect::<Vec<_>>());
    let keys = filtered.get_key_range(all_range(5)).await.unwrap();
    assert_eq!(keys, theirs.iter().map(|k| Bytes::from(k.to_string())).collect::<Vec<_>>());
    // The unscoped admin sees everything, as before.
    assert_eq!(drive.client().await.get_key_range(all_range(200)).await.unwrap().len(), OTHERS.len() + MINE.len());
}
