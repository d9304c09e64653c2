//! Peer-to-peer pushes between drives: copies, renames, version conflicts at the target,
//! pipelines of three drives, TLS to the peer, a peer that is down, pushes under the
//! requester's ACL. (A peer killed mid-transfer, and the `spindle p2p` command, need the
//! `spindle` process: `crates/cli/tests/p2p.rs`.)

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
    let (a, peer) = (TestDrive::start().await, TestDrive::start().await);
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
    let (a, peer) = (TestDrive::start().await, TestDrive::start().await);
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
    let (a, b_drive, c_drive) = (TestDrive::start().await, TestDrive::start().await, TestDrive::start().await);
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
    let peer = TestDrive::start().await;
    let cert = peer.data_dir().join("tls/cert.pem");
    let a = TestDrive::with_config(&format!("p2p_tls_trust = {:?}\n", cert.display().to_string())).await;
    let untrusting = TestDrive::start().await;
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
    let a = TestDrive::start().await;
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
async fn pushes_run_as_the_requesting_identity_under_its_acl() {
    use spindle_client::{AclEntry, AclScope, Client, ClientConfig};
    let (a, peer) = (TestDrive::start().await, TestDrive::start().await);
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
    let (a, peer) = (TestDrive::start().await, TestDrive::start().await);
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

/// A cluster fences both drives to a new cluster version between two pushes: the source's
/// pooled connection to the peer follows its own version, so the second push lands too (a
/// connection kept at the old version would be refused with VERSION_FAILURE).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushes_follow_the_drives_cluster_version_after_a_fence() {
    let (a, peer) = (TestDrive::start().await, TestDrive::start().await);
    let (ca, cb) = (a.client().await, peer.client().await);
    ca.put(b"k1", b("one"), versioned("v1")).await.unwrap();
    ca.put(b"k2", b("two"), versioned("v2")).await.unwrap();
    assert!(ca.push_to_peer(&peer_of(&peer), vec![PushOp::copy(b("k1"))]).await.unwrap().all_succeeded);
    for c in [&ca, &cb] {
        c.set_cluster_version(7).await.unwrap();
        c.set_request_cluster_version(7);
    }
    let result = ca.push_to_peer(&peer_of(&peer), vec![PushOp::copy(b("k2"))]).await.unwrap();
    assert_eq!(result.operations[0].status, StatusCode::Success, "{}", result.operations[0].message);
    assert_eq!(cb.get(b"k2").await.unwrap().unwrap().value, b("two"));
}
