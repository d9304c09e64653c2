//! Peer-to-peer pushes between real drive processes: copies, renames, version conflicts at
//! the target, pipelines of three drives, TLS to the peer, a peer that is down or dies
//! mid-transfer.

mod common;

use bytes::Bytes;
use common::TestDrive;
use spindle_client::{Peer, PutOptions, PushOp, StatusCode};

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn peer_of(d: &TestDrive) -> Peer {
    let port = d.addr.rsplit(':').next().unwrap().parse().unwrap();
    Peer { host: "127.0.0.1".into(), port, tls: false }
}

fn versioned(v: &str) -> PutOptions {
    PutOptions { new_version: b(v), tag: b("t"), algorithm: Some(1), force: true, ..PutOptions::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_copies_renames_and_reports_each_operation() {
    let (a, peer) = (TestDrive::start(&[]), TestDrive::start(&[]));
    let (ca, cb) = (a.client().await, peer.client().await);
    ca.put(b"k1", b("one"), versioned("v1")).await.unwrap();
    ca.put(b"k2", Bytes::from(vec![7u8; 1024 * 1024]), versioned("v2")).await.unwrap();

    let ops = vec![
        PushOp::copy(b("k1")),
        PushOp { new_key: Some(b("renamed")), ..PushOp::copy(b("k2")) },
        PushOp::copy(b("missing")),
    ];
    let result = ca.push_to_peer(&peer_of(&peer), ops).await.unwrap();
    let statuses: Vec<_> = result.operations.iter().map(|o| o.status).collect();
    assert_eq!(statuses, vec![StatusCode::Success, StatusCode::Success, StatusCode::NotFound]);
    assert!(!result.all_succeeded);

    let e = cb.get(b"k1").await.unwrap().unwrap();
    assert_eq!((e.value, e.metadata.version, e.metadata.tag, e.metadata.algorithm), (b("one"), b("v1"), b("t"), Some(1)));
    assert_eq!(cb.get(b"renamed").await.unwrap().unwrap().value.len(), 1024 * 1024);
    assert_eq!(cb.get(b"k2").await.unwrap(), None);
    // The source is untouched.
    assert_eq!(ca.get(b"k2").await.unwrap().unwrap().metadata.version, b("v2"));

    // Everything succeeding says so.
    let result = ca.push_to_peer(&peer_of(&peer), vec![PushOp::copy(b("k1"))]).await.unwrap();
    assert!(result.all_succeeded);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_are_checked_at_the_peer() {
    let (a, peer) = (TestDrive::start(&[]), TestDrive::start(&[]));
    let (ca, cb) = (a.client().await, peer.client().await);
    ca.put(b"k", b("new"), versioned("v2")).await.unwrap();
    cb.put(b"k", b("old"), versioned("v1")).await.unwrap();

    let op = |expected: Option<&str>, force| PushOp { key: b("k"), expected_version: expected.map(b), force, ..PushOp::default() };
    let r = ca.push_to_peer(&peer_of(&peer), vec![op(Some("v0"), false)]).await.unwrap();
    assert_eq!(r.operations[0].status, StatusCode::VersionMismatch);
    let r = ca.push_to_peer(&peer_of(&peer), vec![op(None, false)]).await.unwrap();
    assert_eq!(r.operations[0].status, StatusCode::VersionMismatch, "no expected version: the peer must not hold a versioned entry");
    assert_eq!(cb.get(b"k").await.unwrap().unwrap().value, b("old"));
    let r = ca.push_to_peer(&peer_of(&peer), vec![op(Some("v1"), false)]).await.unwrap();
    assert_eq!(r.operations[0].status, StatusCode::Success);
    let e = cb.get(b"k").await.unwrap().unwrap();
    assert_eq!((e.value, e.metadata.version), (b("new"), b("v2")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelines_of_three_drives_return_every_status() {
    let (a, b_drive, c_drive) = (TestDrive::start(&[]), TestDrive::start(&[]), TestDrive::start(&[]));
    let ca = a.client().await;
    ca.put(b"p", b("payload"), versioned("v7")).await.unwrap();
    // A -> B (as "p"), then B -> C (as "p" and a missing key).
    let onward = (peer_of(&c_drive), vec![PushOp::copy(b("p")), PushOp::copy(b("absent"))]);
    let op = PushOp { then: Some(onward), ..PushOp::copy(b("p")) };
    let r = ca.push_to_peer(&peer_of(&b_drive), vec![op]).await.unwrap();
    assert_eq!(r.operations[0].status, StatusCode::Success);
    let nested = r.operations[0].nested.as_ref().expect("the nested push's answer");
    assert_eq!(nested.operations.iter().map(|o| o.status).collect::<Vec<_>>(), vec![StatusCode::Success, StatusCode::NotFound]);
    assert!(!r.all_succeeded, "a nested failure shows at the top");
    let cc = c_drive.client().await;
    assert_eq!(cc.get(b"p").await.unwrap().unwrap().metadata.version, b("v7"));
    assert_eq!(b_drive.client().await.get(b"p").await.unwrap().unwrap().value, b("payload"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_over_tls_trusts_only_the_configured_certificate() {
    let peer = TestDrive::start(&[]);
    let cert = peer.data_dir().join("tls/cert.pem");
    let a = TestDrive::with_config(&format!("p2p_tls_trust = {:?}\n", cert.display().to_string()));
    let untrusting = TestDrive::start(&[]);
    let tls_port = peer.tls_addr.rsplit(':').next().unwrap().parse().unwrap();
    let tls_peer = Peer { host: "127.0.0.1".into(), port: tls_port, tls: true };

    let ca = a.client().await;
    ca.put(b"secret", b("s"), versioned("v1")).await.unwrap();
    let r = ca.push_to_peer(&tls_peer, vec![PushOp::copy(b("secret"))]).await.unwrap();
    assert_eq!(r.operations[0].status, StatusCode::Success);
    assert_eq!(peer.client().await.get(b"secret").await.unwrap().unwrap().value, b("s"));

    // A drive without p2p_tls_trust refuses to push over TLS.
    let cu = untrusting.client().await;
    cu.put(b"secret", b("s"), versioned("v1")).await.unwrap();
    let err = cu.push_to_peer(&tls_peer, vec![PushOp::copy(b("secret"))]).await.unwrap_err();
    assert_eq!(err.status(), Some(StatusCode::RemoteConnectionError));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_is_down_gives_remote_connection_error() {
    let a = TestDrive::start(&[]);
    let ca = a.client().await;
    ca.put(b"k", b("v"), versioned("1")).await.unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let err = ca.push_to_peer(&Peer { host: "127.0.0.1".into(), port, tls: false }, vec![PushOp::copy(b("k"))]).await.unwrap_err();
    assert_eq!(err.status(), Some(StatusCode::RemoteConnectionError));
    // The drive is fine and the request is answered promptly.
    ca.noop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_killed_mid_transfer_leaves_both_drives_consistent() {
    let a = TestDrive::start(&[]);
    let mut peer = TestDrive::start(&[]);
    let ca = a.client().await;
    let value = |i: u32| Bytes::from(vec![(i % 251) as u8; 512 * 1024]);
    let keys: Vec<String> = (0..60).map(|i| format!("big{i:02}")).collect();
    for (i, k) in keys.iter().enumerate() {
        ca.put(k.as_bytes(), value(i as u32), PutOptions::forced(spindle_client::Synchronization::Writeback)).await.unwrap();
    }
    let target = peer_of(&peer);
    let ops = keys.iter().map(|k| PushOp::copy(Bytes::from(k.clone()))).collect();
    let push = tokio::spawn({
        let ca = ca.clone();
        async move { ca.push_to_peer(&target, ops).await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(60)).await;
    peer.kill();
    match push.await.unwrap() {
        Ok(r) => {
            assert!(r.operations.iter().all(|o| matches!(o.status, StatusCode::Success | StatusCode::RemoteConnectionError)), "{r:?}");
        }
        Err(e) => assert_eq!(e.status(), Some(StatusCode::RemoteConnectionError), "{e}"),
    }
    // The source is intact; the peer holds whole entries or nothing after restarting.
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(ca.get(k.as_bytes()).await.unwrap().unwrap().value, value(i as u32));
    }
    peer.restart_after_kill();
    let cb = peer.client().await;
    for (i, k) in keys.iter().enumerate() {
        if let Some(e) = cb.get(k.as_bytes()).await.unwrap() {
            assert_eq!(e.value, value(i as u32), "{k} is torn on the peer");
        }
    }
    // And a new push to the restarted peer works (the broken pooled connection is not reused).
    let r = ca.push_to_peer(&peer_of(&peer), vec![PushOp::copy(b("big00"))]).await.unwrap();
    assert_eq!(r.operations[0].status, StatusCode::Success);
}

#[test]
fn the_cli_pushes_key_lists_and_whole_ranges_in_pages() {
    let rt = common::runtime();
    let a = TestDrive::with_config("[limits]\nmax_key_range_count = 7\n");
    let peer = TestDrive::start(&[]);
    rt.block_on(async {
        let ca = a.client().await;
        for i in 0..30 {
            ca.put(format!("r{i:02}").as_bytes(), Bytes::from(format!("v{i}")), versioned("1")).await.unwrap();
        }
    });
    let spindle = env!("CARGO_BIN_EXE_spindle");
    let run = |args: &[&str]| std::process::Command::new(spindle).args(args).output().unwrap();
    let out = run(&["p2p", "push", "--from", &a.addr, "--to", &peer.addr, "--keys", "r00", "r01", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["pushed"], 2);

    // 25 keys r05..r29 in pages of 7, forced (r05 and r06 exist nowhere yet; overwrite anyway).
    let out = run(&["p2p", "push", "--from", &a.addr, "--to", &peer.addr, "--range", "r05", "r29", "--force", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["statuses"]["SUCCESS"], 25);

    // Unforced: new keys (r02..r04) are copied, versioned ones at the peer are refused; every
    // key is reported and the exit status says not everything was copied.
    let out = run(&["p2p", "push", "--from", &a.addr, "--to", &peer.addr, "--range", "r00", "r09"]);
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("VERSION_MISMATCH"), "{text}");

    rt.block_on(async {
        let cb = peer.client().await;
        let q = spindle_client::RangeQuery::inclusive(b("r"), b("s"), 200);
        assert_eq!(cb.get_key_range(q).await.unwrap().len(), 30);
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushes_run_as_the_requesting_identity_under_its_acl() {
    use spindle_client::{AclEntry, AclScope, Client, ClientConfig};
    let (a, peer) = (TestDrive::start(&[]), TestDrive::start(&[]));
    let all = ["READ", "WRITE", "DELETE", "RANGE", "SETUP", "P2POP", "GETLOG", "SECURITY", "POWER_MANAGEMENT"];
    let acl = [
        AclEntry { identity: 1, key: "asdfasdf".into(), scopes: vec![AclScope { offset: 0, value: "".into(), permissions: all.iter().map(|p| p.to_string()).collect(), tls_required: false }], max_priority: None },
        AclEntry {
            identity: 6,
            key: "six".into(),
            scopes: vec![AclScope { offset: 0, value: "a/".into(), permissions: vec!["READ".into(), "WRITE".into(), "P2POP".into()], tls_required: false }],
            max_priority: None,
        },
    ];
    // Drives of one installation share their ACL.
    for d in [&a, &peer] {
        d.tls_client().await.set_acl(acl.iter().map(|e| e.to_proto().unwrap()).collect()).await.unwrap();
    }
    let admin = a.client().await;
    admin.put(b"a/1", b("x"), versioned("1")).await.unwrap();
    admin.put(b"b/1", b("y"), versioned("1")).await.unwrap();
    let six = Client::connect(a.addr.as_str(), ClientConfig { identity: 6, hmac_key: b("six"), ..ClientConfig::default() }).await.unwrap();
    let r = six.push_to_peer(&peer_of(&peer), vec![PushOp::copy(b("a/1")), PushOp::copy(b("b/1"))]).await.unwrap();
    assert_eq!(r.operations.iter().map(|o| o.status).collect::<Vec<_>>(), vec![StatusCode::Success, StatusCode::NotAuthorized]);
    let peer_admin = peer.client().await;
    assert!(peer_admin.get(b"a/1").await.unwrap().is_some());
    assert_eq!(peer_admin.get(b"b/1").await.unwrap(), None);
    // Renaming into a key the identity may not write at the peer is refused by the peer.
    let r = six.push_to_peer(&peer_of(&peer), vec![PushOp { new_key: Some(b("b/stolen")), ..PushOp::copy(b("a/1")) }]).await.unwrap();
    assert_eq!(r.operations[0].status, StatusCode::NotAuthorized);
}

/// A push pipelined right behind puts on the same connection copies what those puts wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_sees_the_writes_sent_before_it_on_its_connection() {
    use spindle_client::MessageType;
    use spindle_proto::pb::command::p2p_operation::{Operation, Peer as PeerProto};
    use spindle_proto::pb::command::{Body, KeyValue, P2pOperation};
    let (a, peer) = (TestDrive::start(&[]), TestDrive::start(&[]));
    let cb = peer.client().await;
    let port = peer_of(&peer).port as i32;
    let mut p = spindle_client::Pipeline::connect(&a.addr, spindle_client::ClientConfig::default()).await.unwrap();
    for round in 0..20 {
        let value = format!("round {round}");
        let put = KeyValue { key: Some(b("pushed")), force: Some(true), ..KeyValue::default() };
        p.queue(MessageType::Put, Some(Body { key_value: Some(put), ..Body::default() }), value.as_bytes());
        let op = Operation { key: Some(b("pushed")), force: Some(true), ..Operation::default() };
        let push = P2pOperation { peer: Some(PeerProto { hostname: Some("127.0.0.1".into()), port: Some(port), tls: Some(false) }), operation: vec![op], all_child_operations_succeeded: None };
        p.queue(MessageType::Peer2peerpush, Some(Body { p2p_operation: Some(Box::new(push)), ..Body::default() }), &[]);
        p.flush().await.unwrap();
        for _ in 0..2 {
            let (_, response) = p.recv().await.unwrap();
            assert_eq!(response.status(), StatusCode::Success, "round {round}");
        }
        assert_eq!(cb.get(b"pushed").await.unwrap().unwrap().value, b(&value), "round {round}");
    }
}
