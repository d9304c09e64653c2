//! MEDIASCAN as a scoped identity (hardening issue, item 7): identity 2, with RANGE only on
//! `tenant2/`, recovered every key of the drive by repeating MEDIASCAN from the `endKey` it
//! was given, since `endKey` was the last key examined, in its scopes or not. A scoped
//! caller's scan now examines only its own keys.

mod common;

use bytes::Bytes;
use common::TestDrive;
use spindle_client::{AclEntry, AclScope, Client, ClientConfig, PutOptions, RangeQuery};

fn scope(offset: i64, value: &str, perms: &[&str]) -> AclScope {
    AclScope { offset, value: value.into(), permissions: perms.iter().map(|p| p.to_string()).collect(), tls_required: false }
}

/// Every key a caller can learn by paging MEDIASCAN from its `endKey`, with the damaged ones.
async fn page_through(c: &Client) -> (Vec<Bytes>, Vec<Bytes>) {
    let mut learned = Vec::new();
    let mut damaged = Vec::new();
    let mut from = Bytes::new();
    for _ in 0..100 {
        let q = RangeQuery { start: from.clone(), start_inclusive: from.is_empty(), max_returned: 1, ..RangeQuery::inclusive(Bytes::new(), Bytes::from_static(&[0xff; 4]), 1) };
        let (bad, end) = c.media_scan(q).await.unwrap();
        damaged.extend(bad);
        match end {
            Some(end) if end != from => {
                learned.push(end.clone());
                from = end;
            }
            _ => return (learned, damaged),
        }
    }
    panic!("100 scans and no end");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scoped_scan_reveals_no_key_outside_its_scopes() {
    let drive = TestDrive::start().await;
    let admin = drive.tls_client().await;
    let all = ["READ", "WRITE", "DELETE", "RANGE", "SETUP", "P2POP", "GETLOG", "SECURITY", "POWER_MANAGEMENT"];
    let acl = [
        AclEntry { identity: 1, key: "asdfasdf".into(), scopes: vec![scope(0, "", &all)], max_priority: None },
        AclEntry { identity: 2, key: "two".into(), scopes: vec![scope(0, "tenant2/", &["RANGE", "READ"])], max_priority: None },
        // A scope at an offset: keys whose bytes 2..4 are "t3".
        AclEntry { identity: 3, key: "three".into(), scopes: vec![scope(2, "t3", &["RANGE"])], max_priority: None },
    ];
    admin.set_acl(acl.iter().map(|e| e.to_proto().unwrap()).collect()).await.unwrap();
    let keys = ["a-secret", "payroll/alice", "payroll/bob", "secret/plans", "tenant1/x", "tenant2/a", "tenant2/b", "xxt3-y", "zzz"];
    for k in keys {
        admin.put(k.as_bytes(), Bytes::from_static(b"v"), PutOptions::default()).await.unwrap();
    }
    // A value that fails its tag, outside tenant 2's scope: never reported to it.
    let tagged = PutOptions { tag: Bytes::from(vec![0u8; 20]), algorithm: Some(spindle_client::Algorithm::Sha1 as i32), ..PutOptions::default() };
    admin.put(b"payroll/carol", Bytes::from_static(b"v"), tagged.clone()).await.unwrap();
    admin.put(b"tenant2/c", Bytes::from_static(b"v"), tagged).await.unwrap();

    let connect = |identity: i64, key: &'static str| {
        let addr = drive.addr.clone();
        async move { Client::connect(addr.as_str(), ClientConfig { identity, hmac_key: Bytes::from_static(key.as_bytes()), ..ClientConfig::default() }).await.unwrap() }
    };
    let (learned, damaged) = page_through(&connect(2, "two").await).await;
    assert!(learned.iter().all(|k| k.starts_with(b"tenant2/")), "tenant 2 learned {learned:?}");
    assert_eq!(learned.last(), Some(&Bytes::from_static(b"tenant2/c")));
    assert_eq!(damaged, vec![Bytes::from_static(b"tenant2/c")]);
    let (learned, damaged) = page_through(&connect(3, "three").await).await;
    assert_eq!(learned, vec![Bytes::from_static(b"xxt3-y")], "identity 3 learned {learned:?}");
    assert!(damaged.is_empty());
    // The unscoped administrator still scans everything, and hears of both damaged values.
    let (learned, damaged) = page_through(&admin).await;
    assert_eq!(learned.last(), Some(&Bytes::from_static(b"zzz")));
    assert_eq!(damaged, vec![Bytes::from_static(b"payroll/carol"), Bytes::from_static(b"tenant2/c")]);
}
