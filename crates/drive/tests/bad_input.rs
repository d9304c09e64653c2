//! Hostile and broken clients: the drive answers with a clear status or closes that one
//! connection, stores nothing for a rejected request, keeps serving everyone else, and never
//! crashes. (What needs the `spindle` process — its memory, a disk that fills up under it and
//! a SIGKILL after — is in `crates/cli/tests/bad_input.rs`.)

mod common;

use common::put_body;

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use common::{signed_frame, status_of, RawConn, TestDrive, KEY};
use prost::Message as _;
use spindle_client::{ClientConfig, MessageType, PutOptions, StatusCode, Synchronization};
use spindle_proto::pb::command::Header;
use spindle_proto::pb::message::AuthType;
use spindle_proto::pb::{Command, Message};
use spindle_proto::{encode_frame, MAGIC};

/// The drive still answers a fresh client, and `key` was never stored. (A drive that
/// aborted or exited would take this test's process with it; one whose accept loop died
/// refuses the fresh client.)
async fn healthy_and_absent(drive: &TestDrive, keys: &[&str]) {
    let c = drive.client().await;
    c.noop().await.unwrap();
    for k in keys {
        assert_eq!(c.get(k.as_bytes()).await.unwrap(), None, "{k} was stored by a rejected request");
    }
}

/// Reads until the drive closes; returns the CONNECTION_TERMINATED notice if one came.
async fn closed_with_notice(raw: &mut RawConn) -> Option<String> {
    let mut notice = None;
    while let Some((m, c, _)) = raw.response().await {
        if m.auth_type == Some(AuthType::Unsolicitedstatus as i32) {
            assert_eq!(status_of(&c), StatusCode::ConnectionTerminated);
            notice = c.status.and_then(|s| s.status_message);
        }
    }
    notice
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_frames_close_only_their_connection() {
    let drive = TestDrive::start().await;
    let bystander = drive.client().await;

    // Wrong magic byte.
    let mut raw = RawConn::connect(&drive.addr).await;
    raw.send_bytes(b"G\0\0\0\x05\0\0\0\0hello").await;
    assert!(closed_with_notice(&mut raw).await.unwrap().contains("magic"));

    // A message length over the limit: refused from the header alone.
    let mut raw = RawConn::connect(&drive.addr).await;
    let mut frame = vec![MAGIC];
    frame.extend_from_slice(&(64u32 << 20).to_be_bytes());
    frame.extend_from_slice(&0u32.to_be_bytes());
    raw.send_bytes(&frame).await;
    assert!(closed_with_notice(&mut raw).await.unwrap().contains("exceeds"));

    // A value length far over the limit, and a negative one.
    for value_len in [i32::MAX as u32, u32::MAX] {
        let mut raw = RawConn::connect(&drive.addr).await;
        let mut frame = vec![MAGIC];
        frame.extend_from_slice(&10u32.to_be_bytes());
        frame.extend_from_slice(&value_len.to_be_bytes());
        raw.send_bytes(&frame).await;
        assert!(closed_with_notice(&mut raw).await.is_some());
    }

    // Garbage protobuf.
    let mut raw = RawConn::connect(&drive.addr).await;
    let mut frame = vec![MAGIC];
    frame.extend_from_slice(&4u32.to_be_bytes());
    frame.extend_from_slice(&0u32.to_be_bytes());
    frame.extend_from_slice(&[0xff, 0xff, 0xff, 0xff]);
    raw.send_bytes(&frame).await;
    assert!(closed_with_notice(&mut raw).await.unwrap().contains("undecodable"));

    // A message without an authType.
    let mut raw = RawConn::connect(&drive.addr).await;
    let mut out = BytesMut::new();
    encode_frame(&Message { command_bytes: Some(Bytes::from_static(b"")), ..Message::default() }, b"", &mut out);
    raw.send_bytes(&out).await;
    assert!(closed_with_notice(&mut raw).await.unwrap().contains("authType"));

    // Truncated in the middle of a frame, then hang up.
    let mut raw = RawConn::connect(&drive.addr).await;
    let header = raw.header(MessageType::Put);
    let command = Command { header: Some(header), body: put_body("truncated"), status: None };
    let mut full = BytesMut::new();
    let message = Message {
        auth_type: Some(AuthType::Hmacauth as i32),
        command_bytes: Some(command.encode_to_vec().into()),
        ..Message::default()
    };
    encode_frame(&message, b"value", &mut full);
    raw.send_bytes(&full[..full.len() - 3]).await;
    drop(raw);

    bystander.noop().await.unwrap();
    healthy_and_absent(&drive, &["truncated"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authentication_failures_get_hmac_failure() {
    let drive = TestDrive::start().await;
    let mut raw = RawConn::connect(&drive.addr).await;

    // Wrong key: HMAC_FAILURE, signed with the identity's real key.
    let header = raw.header(MessageType::Put);
    raw.send(&Command { header: Some(header), body: put_body("wrongkey"), status: None }, 1, b"not-the-key", b"v").await;
    let (m, c, _) = raw.response().await.unwrap();
    assert_eq!(status_of(&c), StatusCode::HmacFailure);
    assert!(spindle_proto::hmac::verify(KEY, m.command_bytes.as_ref().unwrap(), m.hmac_auth.unwrap().hmac.as_ref().unwrap()));

    // Unknown identity.
    let header = raw.header(MessageType::Put);
    raw.send(&Command { header: Some(header), body: put_body("stranger"), status: None }, 77, KEY, b"v").await;
    let (_, c, _) = raw.response().await.unwrap();
    assert_eq!(status_of(&c), StatusCode::HmacFailure);

    // The Rust client with a wrong key sees the failure too.
    let wrong = ClientConfig { hmac_key: Bytes::from_static(b"nope"), ..ClientConfig::default() };
    let c = drive.client_with(wrong).await.unwrap();
    assert!(c.put(b"client-wrong", Bytes::from_static(b"v"), PutOptions::default()).await.is_err());

    // The connection still works with the right key.
    let header = raw.header(MessageType::Noop);
    assert_eq!(raw.call(header, None, b"").await.0, StatusCode::Success);
    healthy_and_absent(&drive, &["wrongkey", "stranger", "client-wrong"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_problems_get_their_statuses() {
    let drive = TestDrive::start().await;
    let mut raw = RawConn::connect(&drive.addr).await;

    // No header at all.
    let (code, _, _) = raw.call(Header::default(), put_body("noheader"), b"v").await;
    assert_eq!(code, StatusCode::HeaderRequired);

    // Wrong cluster version: VERSION_FAILURE with the drive's version in the answer.
    let mut header = raw.header(MessageType::Put);
    header.cluster_version = Some(42);
    let (code, c, _) = raw.call(header, put_body("fenced"), b"v").await;
    assert_eq!(code, StatusCode::VersionFailure);
    assert_eq!(c.header.unwrap().cluster_version, Some(0));

    // Unknown and response message types.
    for t in [99, MessageType::GetResponse as i32, 14] {
        let mut header = raw.header(MessageType::Noop);
        header.message_type = Some(t);
        assert_eq!(raw.call(header, None, b"").await.0, StatusCode::InvalidRequest, "type {t}");
    }

    // A sequence that does not increase.
    let header = raw.header(MessageType::Noop);
    let mut replay = header;
    assert_eq!(raw.call(header, None, b"").await.0, StatusCode::Success);
    replay.message_type = Some(MessageType::Put as i32);
    assert_eq!(raw.call(replay, put_body("replayed"), b"v").await.0, StatusCode::InvalidRequest);

    // Someone else's connection id.
    let mut header = raw.header(MessageType::Put);
    header.connection_id = Some(raw.connection_id + 1000);
    assert_eq!(raw.call(header, put_body("otherconn"), b"v").await.0, StatusCode::InvalidRequest);

    // Invalid synchronization.
    let header = raw.header(MessageType::Put);
    let mut body = put_body("badsync").unwrap();
    body.key_value.as_mut().unwrap().synchronization = Some(-1);
    assert_eq!(raw.call(header, Some(body), b"v").await.0, StatusCode::InvalidRequest);

    // A value over the limit is skipped and answered, the connection stays in sync.
    let header = raw.header(MessageType::Put);
    let (code, c, _) = raw.call(header, put_body("huge"), &vec![0u8; 2 * 1024 * 1024]).await;
    assert_eq!(code, StatusCode::InvalidRequest);
    assert!(c.status.unwrap().status_message().contains("maxValueSize"));
    let header = raw.header(MessageType::Noop);
    assert_eq!(raw.call(header, None, b"").await.0, StatusCode::Success);

    healthy_and_absent(&drive, &["noheader", "fenced", "replayed", "otherconn", "badsync", "huge"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_connections_are_refused_cleanly() {
    let drive = TestDrive::with_config("[limits]\nmax_connections = 4\n").await;
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(drive.client().await);
    }
    let refused = drive.client_with(ClientConfig::default()).await;
    assert!(refused.is_err(), "a fifth connection was accepted");
    let err = refused.err().unwrap().to_string();
    assert!(err.contains("maxConnections"), "{err}");
    for c in &held {
        c.noop().await.unwrap();
    }
    drop(held);
    tokio::time::sleep(Duration::from_millis(200)).await;
    healthy_and_absent(&drive, &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_drive_answers_no_space_and_keeps_serving() {
    let drive = TestDrive::with_config("capacity_bytes = 4000000\n").await;
    let c = drive.client().await;
    let value = Bytes::from(vec![9u8; 512 * 1024]);
    let mut stored = 0;
    let mut refused = None;
    for i in 0..64 {
        match c.put(format!("fill{i}").as_bytes(), value.clone(), PutOptions::default()).await {
            Ok(()) => stored += 1,
            Err(e) => {
                refused = Some((i, e.status()));
                break;
            }
        }
    }
    let (at, status) = refused.expect("the quota was never reached");
    assert_eq!(status, Some(StatusCode::NoSpace));
    assert!(stored >= 2, "only {stored} values fit in the quota");
    assert_eq!(c.get(format!("fill{at}").as_bytes()).await.unwrap(), None);
    // What was acknowledged is intact, and deletes still work on a full drive.
    assert_eq!(c.get(b"fill0").await.unwrap().unwrap().value, value);
    assert!(c.delete(b"fill0", spindle_client::DeleteOptions::default()).await.unwrap());
    let log = c.get_log(&[spindle_client::LogType::Capacities]).await.unwrap();
    assert_eq!(log.capacity.unwrap().nominal_capacity_in_bytes(), 4_000_000);
    healthy_and_absent(&drive, &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_garbage_never_crashes_the_drive() {
    use rand::{Rng, SeedableRng};
    let drive = TestDrive::start().await;
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for round in 0..200 {
        let mut raw = RawConn::connect(&drive.addr).await;
        let mut bytes = BytesMut::new();
        // Half the rounds start with a plausible header so the body parsers are reached.
        if round % 2 == 0 {
            bytes.put_u8(MAGIC);
            bytes.put_u32(rng.random_range(0..64));
            bytes.put_u32(rng.random_range(0..64));
        }
        let len = rng.random_range(0..200);
        bytes.extend((0..len).map(|_| rng.random::<u8>()));
        raw.send_bytes(&bytes).await;
        drop(raw);
    }
    healthy_and_absent(&drive, &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overloaded_drive_answers_service_busy_and_stores_nothing_it_refused() {
    // A budget of one byte: a write is admitted only when no other is in flight.
    let drive = TestDrive::with_config("max_inflight_write_bytes = 1\n").await;
    let mut raw = RawConn::connect(&drive.addr).await;
    let value = vec![5u8; 64 * 1024];
    let mut burst = BytesMut::new();
    let mut keys = std::collections::HashMap::new();
    for i in 0..50 {
        let header = raw.header(MessageType::Put);
        keys.insert(header.sequence.unwrap(), format!("busy{i}"));
        let mut body = put_body(&format!("busy{i}")).unwrap();
        body.key_value.as_mut().unwrap().synchronization = Some(Synchronization::Writethrough as i32);
        let command = Command { header: Some(header), body: Some(body), status: None };
        signed_frame(&command, 1, KEY, &value, &mut burst);
    }
    raw.send_bytes(&burst).await;
    let (mut stored, mut busy) = (Vec::new(), Vec::new());
    for _ in 0..50 {
        let (_, c, _) = raw.response().await.expect("an answer to every request");
        let key = keys[&c.header.as_ref().unwrap().ack_sequence.unwrap()].clone();
        match status_of(&c) {
            StatusCode::Success => stored.push(key),
            StatusCode::ServiceBusy => busy.push(key),
            other => panic!("{key}: {other:?}"),
        }
    }
    assert!(!stored.is_empty(), "nothing was admitted");
    assert!(!busy.is_empty(), "50 pipelined WRITETHROUGH puts never overlapped");
    let c = drive.client().await;
    for k in &stored {
        assert_eq!(c.get(k.as_bytes()).await.unwrap().unwrap().value.len(), value.len(), "{k}");
    }
    let refused: Vec<&str> = busy.iter().map(String::as_str).collect();
    healthy_and_absent(&drive, &refused).await;
}
