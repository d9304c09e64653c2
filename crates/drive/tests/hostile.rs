//! Hostile clients: clients that never read, that repeat, replay or guess, that open batches
//! or connections and go quiet, that ask for amplified answers. Each test names the attack and
//! checks the bound the drive keeps; all of them connect to 127.0.0.1 only and bound every
//! loop in count and time. (Attacks measured by the resident memory of the `spindle` process
//! are in `crates/cli/tests/hostile.rs`.)

mod common;

use common::{admin_entry, entry, get_body, put_body, scope, set_acl};

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use common::{signed_frame, RawConn, TestDrive, KEY};
use spindle_client::{ClientConfig, ClientError, LogType, MessageType, PinOpType, PutOptions, StatusCode, Synchronization};
use spindle_proto::pb::command::{Batch as BatchBody, Body, GetLog, KeyValue, Security};
use spindle_proto::pb::Command;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn batched(raw: &mut RawConn, kind: MessageType, id: u32) -> spindle_proto::pb::command::Header {
    let mut h = raw.header(kind);
    h.batch_id = Some(id);
    h
}

fn end_body(count: i32) -> Option<Body> {
    Some(Body { batch: Some(BatchBody { count: Some(count), ..BatchBody::default() }), ..Body::default() })
}

/// `"name": N` from the drive's engine device log.
async fn device_figure(c: &spindle_client::Client, name: &str) -> u64 {
    let log = c.device_log(b"com.spindle:engine").await.unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&log).unwrap();
    doc[name].as_u64().unwrap_or_else(|| panic!("no {name} in {doc}"))
}

/// Polls `device_figure(name)` until it equals `want` (up to 60 s); returns the last figure.
async fn wait_for_figure(c: &spindle_client::Client, name: &str, want: u64) -> u64 {
    let mut figure = device_figure(c, name).await;
    for _ in 0..240 {
        if figure == want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        figure = device_figure(c, name).await;
    }
    figure
}

// Item 18: a batched PUT whose value exceeds maxValueSize counts in its batch and fails it, as an
// oversized key does, instead of being answered on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversize_value_in_a_batch_is_counted_and_fails_the_batch() {
    let drive = TestDrive::start().await;
    let mut raw = RawConn::connect(&drive.addr).await;
    let h = batched(&mut raw, MessageType::StartBatch, 1);
    assert_eq!(raw.call(h, None, b"").await.0, StatusCode::Success);
    let h = batched(&mut raw, MessageType::Put, 1);
    let put_sequence = h.sequence.unwrap();
    let big = vec![0u8; 1024 * 1024 + 1];
    raw.send(&Command { header: Some(h), body: put_body("big"), status: None }, 1, KEY, &big).await;
    let h = batched(&mut raw, MessageType::EndBatch, 1);
    let (code, answer, _) = raw.call(h, end_body(1), b"").await;
    assert_eq!(code, StatusCode::InvalidBatch, "{:?}", answer.status);
    let batch = answer.body.unwrap().batch.unwrap();
    assert_eq!((batch.count, batch.sequence, batch.failed_sequence), (Some(1), vec![put_sequence], Some(put_sequence)));
}

// Item 19: what the reference client sends for setLockPin(null, null), a SECURITY message with
// no change, succeeds; NOT_AUTHORIZED answers say "permission denied".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_wordings_an_empty_security_message_and_permission_denied() {
    let drive = TestDrive::start().await;
    let admin = drive.tls_client().await;
    let empty = Body { security: Some(Box::new(Security::default())), ..Body::default() };
    let r = admin.request(MessageType::Security, Some(empty), Bytes::new()).await.unwrap();
    assert_eq!(r.status(), StatusCode::Success, "{}", r.status_message());

    set_acl(&admin, vec![admin_entry(), entry(2, "reader", vec![scope(0, "", &["READ"], false)])]).await.unwrap();
    let reader = drive.client_with(ClientConfig { identity: 2, hmac_key: b("reader"), ..ClientConfig::default() }).await.unwrap();
    let refused = reader.put(b"k", b("v"), PutOptions::default()).await.unwrap_err();
    assert_eq!(refused.status(), Some(StatusCode::NotAuthorized));
    assert!(refused.to_string().contains("permission denied"), "{refused}");
    let refused = reader.get_log(&[LogType::Limits]).await.unwrap_err();
    assert!(refused.to_string().contains("permission denied"), "{refused}");
}

// Item 5 (review item 3): the wrong-PIN back-off is drive-wide without a queue. After wrong
// PINs, PIN checks pause (100 ms doubling to 10 s); a PIN arriving meanwhile is answered
// NOT_AUTHORIZED at once, unchecked (a wrong PIN's own answer comes when its pause ends). Six
// connections guessing at once after five wrong PINs get at most two checks between them (one
// opens a 3.2 s pause), and eighteen more guesses are answered without waiting in line; the
// right PIN, sent once the pause is over, is then accepted. (With a queue, each guess was checked, one back-off after another,
// and the right PIN waited behind all of them.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pin_guesses_are_paused_drive_wide_not_queued() {
    let drive = TestDrive::start().await;
    let admin = drive.tls_client().await;
    admin.set_lock_pin(b"", b"73").await.unwrap();
    let mut guessers = Vec::new();
    for _ in 0..6 {
        guessers.push(std::sync::Arc::new(drive.tls_client().await));
    }
    // Five wrong PINs checked one after another (each answered when its pause ends).
    let mut checked = 0;
    for _ in 0..200 {
        let e = admin.pin_operation(PinOpType::LockPinop, b"0").await.unwrap_err();
        assert_eq!(e.status(), Some(StatusCode::NotAuthorized), "{e}");
        if !e.to_string().contains("paused") {
            checked += 1;
            if checked == 5 {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(checked, 5);
    let guess_all = |guessers: &Vec<std::sync::Arc<spindle_client::Client>>| {
        let tasks: Vec<_> = guessers
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let c = c.clone();
                tokio::spawn(async move { c.pin_operation(PinOpType::LockPinop, format!("{i}").as_bytes()).await.unwrap_err() })
            })
            .collect();
        tasks
    };
    let mut wrong = 0;
    for t in guess_all(&guessers) {
        let e = tokio::time::timeout(Duration::from_secs(30), t).await.unwrap().unwrap();
        assert_eq!(e.status(), Some(StatusCode::NotAuthorized), "{e}");
        wrong += !e.to_string().contains("paused") as usize;
    }
    assert!(wrong <= 2, "{wrong} of six parallel guesses were checked within one back-off pause");
    // Twenty more guesses, none of them waiting in a queue.
    let started = Instant::now();
    for _ in 0..3 {
        for t in guess_all(&guessers) {
            let e = tokio::time::timeout(Duration::from_secs(30), t).await.unwrap().unwrap();
            assert_eq!(e.status(), Some(StatusCode::NotAuthorized), "{e}");
        }
    }
    // The right PIN, once the pause is over, is accepted.
    let mut locked = false;
    for _ in 0..20 {
        match admin.pin_operation(PinOpType::LockPinop, b"73").await {
            Ok(()) => {
                locked = true;
                break;
            }
            Err(e) => {
                let text = e.to_string();
                assert!(text.contains("paused for"), "the right PIN refused: {text}");
                let ms: u64 = text.split("paused for ").nth(1).and_then(|t| t.split(' ').next()).and_then(|n| n.parse().ok()).unwrap();
                tokio::time::sleep(Duration::from_millis(ms + 20)).await;
            }
        }
    }
    assert!(locked, "the right PIN was never checked");
    assert!(started.elapsed() < Duration::from_secs(60), "took {:?}", started.elapsed());
    // A right PIN reset the count: the next check is at once.
    admin.pin_operation(PinOpType::UnlockPinop, b"73").await.unwrap();
}

// Item 4: a GETLOG repeating one type 400,000 times (an 800 KB request) gets the answer of one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_getlog_types_are_answered_once() {
    let drive = TestDrive::start().await;
    let mut raw = RawConn::connect(&drive.addr).await;
    let types = vec![LogType::Temperatures as i32; 400_000];
    let body = Body { get_log: Some(Box::new(GetLog { types, ..GetLog::default() })), ..Body::default() };
    let h = raw.header(MessageType::Getlog);
    raw.send(&Command { header: Some(h), body: Some(body), status: None }, 1, KEY, b"").await;
    let (message, value) = raw.read().await.expect("an answer");
    let len = message.command_bytes.as_ref().map_or(0, |c| c.len());
    assert!(len <= 1024 * 1024 && value.len() <= 1024 * 1024, "a {len}-byte answer");
    let answer: Command = prost::Message::decode(message.command_bytes.unwrap()).unwrap();
    assert_eq!(common::status_of(&answer), StatusCode::Success);
    assert_eq!(answer.body.unwrap().get_log.unwrap().types, vec![LogType::Temperatures as i32]);
}

// Item 4: a batch that has failed stops growing: 5,000 operations after its failure add nothing
// to the END_BATCH answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_batch_stops_recording_operations() {
    let drive = TestDrive::start().await;
    let mut raw = RawConn::connect(&drive.addr).await;
    let h = batched(&mut raw, MessageType::StartBatch, 3);
    assert_eq!(raw.call(h, None, b"").await.0, StatusCode::Success);
    let mut frames = BytesMut::new();
    let mut sequences = Vec::new();
    for i in 0..5_000 {
        let h = batched(&mut raw, MessageType::Put, 3);
        sequences.push(h.sequence.unwrap());
        signed_frame(&Command { header: Some(h), body: put_body(&format!("k{i}")), status: None }, 1, KEY, b"v", &mut frames);
    }
    raw.send_bytes(&frames).await;
    let h = batched(&mut raw, MessageType::EndBatch, 3);
    let (code, answer, _) = raw.call(h, end_body(5_000), b"").await;
    assert_eq!(code, StatusCode::InvalidBatch);
    let batch = answer.body.unwrap().batch.unwrap();
    // The 16th operation broke maxOperationCountPerBatch (15).
    assert_eq!(batch.failed_sequence, Some(sequences[15]));
    assert_eq!(batch.sequence, sequences[..16].to_vec());
}

// Item 4: open batches that make no progress time out, so five quiet clients cannot hold the
// drive's five batch slots.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_batches_time_out_and_free_their_slots() {
    let drive = TestDrive::with_config("batch_idle_timeout_ms = 1000\n").await;
    let mut quiet = Vec::new();
    for _ in 0..5 {
        let c = drive.client().await;
        let batch = c.start_batch().await.unwrap();
        quiet.push((c, batch));
    }
    let other = drive.client().await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let batch = other.start_batch().await.expect("a slot of an idle batch");
    batch.abort().await.unwrap();
    // The timed-out batches fail when their clients come back.
    // (The batch idle longest, the first, gave up its slot.)
    let (_c, mut late) = quiet.remove(0);
    late.put(b"late", b("x"), PutOptions::forced(Synchronization::Writeback)).unwrap();
    let failed = late.commit().await.unwrap_err();
    assert_eq!(failed.status(), Some(StatusCode::InvalidBatch), "{failed}");
    assert_eq!(other.get(b"late").await.unwrap(), None);
}

// Item 21: the batch slots of a connection its client has just closed are free for a
// START_BATCH on another connection at once (the drive may not yet have read the close).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_slots_of_a_just_closed_connection_are_taken_at_once() {
    let drive = TestDrive::start().await;
    let mut next = RawConn::connect(&drive.addr).await;
    for round in 0..20u32 {
        let mut holder = RawConn::connect(&drive.addr).await;
        for id in 0..5 {
            let h = batched(&mut holder, MessageType::StartBatch, id);
            assert_eq!(holder.call(h, None, b"").await.0, StatusCode::Success);
        }
        // The client closes with requests still on their way: the drive has not read the close
        // when the other connection's START_BATCH arrives.
        let mut noops = BytesMut::new();
        for _ in 0..100 {
            let h = holder.header(MessageType::Noop);
            signed_frame(&Command { header: Some(h), body: None, status: None }, 1, KEY, b"", &mut noops);
        }
        holder.send_bytes(&noops).await;
        holder.stream.shutdown().await.unwrap();
        let h = batched(&mut next, MessageType::StartBatch, 100 + round);
        let (code, answer, _) = next.call(h, None, b"").await;
        assert_eq!(code, StatusCode::Success, "round {round}: {:?}", answer.status);
        let h = batched(&mut next, MessageType::AbortBatch, 100 + round);
        assert_eq!(next.call(h, None, b"").await.0, StatusCode::Success);
    }
}

// Item 6: a request must carry the connection's id: one without it, captured and sent again on
// a fresh connection, is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_the_connection_id_is_refused() {
    let drive = TestDrive::start().await;
    let mut first = RawConn::connect(&drive.addr).await;
    let mut h = first.header(MessageType::Put);
    h.connection_id = None;
    let mut captured = BytesMut::new();
    signed_frame(&Command { header: Some(h), body: put_body("replayed"), status: None }, 1, KEY, b"v", &mut captured);
    first.send_bytes(&captured).await;
    let (_, answer, _) = first.response().await.unwrap();
    assert_eq!(common::status_of(&answer), StatusCode::InvalidRequest);
    let mut second = RawConn::connect(&drive.addr).await;
    second.send_bytes(&captured).await;
    let (_, answer, _) = second.response().await.unwrap();
    assert_eq!(common::status_of(&answer), StatusCode::InvalidRequest);
    assert_eq!(drive.client().await.get(b"replayed").await.unwrap(), None);
}

// Item 3: idle and half-written connections are closed; plain sockets cannot take the slots
// kept for administrators, nor can TLS clients without SECURITY; an over-limit TLS client is
// refused inside TLS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_slots_are_timed_out_and_kept_for_tls() {
    let drive = TestDrive::with_config(
        "unauthenticated_timeout_ms = 15000\nframe_timeout_ms = 1000\nreserved_connections = 4\n[limits]\nmax_connections = 40\n",
    )
    .await;
    // A half-written frame header is dropped after frame_timeout_ms.
    let mut half = tokio::net::TcpStream::connect(&drive.addr).await.unwrap();
    half.write_all(&[b'F', 0, 0]).await.unwrap();
    let started = Instant::now();
    let mut sink = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(20), half.read_to_end(&mut sink)).await;
    assert!(closed.is_ok(), "a half-written frame was still held after {:?}", started.elapsed());

    // Identity 2 may read and write but holds no SECURITY.
    let setup = drive.tls_client().await;
    set_acl(&setup, vec![admin_entry(), entry(2, "user", vec![scope(0, "", &["READ", "WRITE"], false)])]).await.unwrap();
    // (`setup` stays open, on a general slot: dropping it would race the drive reading the close.)

    // Idle plain sockets take every slot but the four kept for TLS (35 beside `setup`); the
    // rest are refused. From here, all steps up to the refused TLS client must fit in
    // unauthenticated_timeout_ms (15 s), counted from these sockets' accept.
    let mut idle = Vec::new();
    for _ in 0..50 {
        let mut s = tokio::net::TcpStream::connect(&drive.addr).await.unwrap();
        let mut buf = vec![0u8; 64 * 1024];
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf)).await.unwrap().unwrap();
        idle.push((s, buf[..n].to_vec()));
    }
    // A TLS client without SECURITY is sent away from the reserve at its first request...
    let user = ClientConfig { identity: 2, hmac_key: b("user"), tls_trust: Some(drive.data_dir().join("tls/cert.pem")), ..ClientConfig::default() };
    let user = spindle_client::Client::connect(drive.tls_addr.as_str(), user).await.unwrap();
    let sent_away = user.noop().await.unwrap_err();
    assert!(matches!(sent_away, ClientError::Terminated(_)), "{sent_away}");
    drop(user);
    // ...and a TLS administrator still gets in (retrying until the drive has freed the slot of
    // the connection it sent away).
    let config = ClientConfig { tls_trust: Some(drive.data_dir().join("tls/cert.pem")), ..ClientConfig::default() };
    let mut admin = None;
    for _ in 0..40 {
        if let Ok(c) = spindle_client::Client::connect(drive.tls_addr.as_str(), config.clone()).await {
            if c.noop().await.is_ok() {
                admin = Some(c);
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _admin = admin.expect("a TLS administrator got in");
    let plain = drive.client_with(ClientConfig::default()).await.err().expect("plain client over the limit refused");
    assert!(plain.to_string().contains("maxConnections"), "{plain}");
    // Fill the TLS slots; the next TLS client is told why, over TLS.
    let mut tls = Vec::new();
    for _ in 0..3 {
        tls.push(drive.tls_client().await);
    }
    let config = ClientConfig { tls_trust: Some(drive.data_dir().join("tls/cert.pem")), ..ClientConfig::default() };
    let refused = spindle_client::Client::connect(drive.tls_addr.as_str(), config).await.err().expect("TLS client over the limit refused");
    assert!(refused.to_string().contains("maxConnections"), "{refused}");

    // While slots are scarce (half of maxConnections or more taken), unauthenticated sockets
    // are closed after unauthenticated_timeout_ms of silence: a plain client gets in again.
    drop(tls);
    let deadline = Instant::now() + Duration::from_secs(60);
    let plain = loop {
        match drive.client_with(ClientConfig::default()).await {
            Ok(c) => break c,
            Err(e) => assert!(Instant::now() < deadline, "no plain slot freed: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    plain.noop().await.unwrap();
    // Those closed are the idle ones beyond half of maxConnections (20); the rest may stay.
    let mut still_open = 0;
    for (s, _) in &mut idle {
        let mut rest = Vec::new();
        if tokio::time::timeout(Duration::from_millis(100), s.read_to_end(&mut rest)).await.is_err() {
            still_open += 1;
        }
    }
    assert!(still_open <= 20, "{still_open} idle unauthenticated sockets still open");
}

// Item 2: a client that pipelines HIGHEST-priority GETs and never reads does not stop other
// clients' requests: its requests wait for its own socket without holding their priority.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unread_high_priority_client_does_not_freeze_the_drive() {
    let drive = TestDrive::start().await;
    let c = drive.client().await;
    // Answers of 8 KiB: the 256 that hold the connection's read permits stay under its answer
    // backlog, so the drive keeps reading the greedy client's GETs until they wait for permits.
    c.put(b"value", Bytes::from(vec![7u8; 8 * 1024]), PutOptions::default()).await.unwrap();
    let mut greedy = RawConn::connect(&drive.addr).await;
    let mut frames = BytesMut::new();
    for _ in 0..5_000 {
        let mut h = greedy.header(MessageType::Get);
        h.priority = Some(9);
        let body = Body { key_value: Some(KeyValue { key: Some(b("value")), ..KeyValue::default() }), ..Body::default() };
        signed_frame(&Command { header: Some(h), body: Some(body), status: None }, 1, KEY, b"", &mut frames);
    }
    let written = greedy.write_until_stalled(&frames, Duration::from_secs(3)).await;
    assert!(written > 0);
    for _ in 0..5 {
        let started = Instant::now();
        tokio::time::timeout(Duration::from_secs(10), c.noop()).await.expect("a NOOP answered while the greedy client is connected").unwrap();
        tokio::time::timeout(Duration::from_secs(10), c.put(b"other", b("x"), PutOptions::default()))
            .await
            .expect("a PUT answered while the greedy client is connected")
            .unwrap();
        eprintln!("NOOP + PUT beside the greedy client: {:?}", started.elapsed());
        assert!(started.elapsed() < Duration::from_secs(5), "NOOP + PUT took {:?}", started.elapsed());
    }
    drop(greedy);
}

// Review item 1: a client that pipelines GETs of a large value and never reads is closed once
// it has read nothing for idle_timeout_ms, and its connection slot is freed although its
// socket never takes the answers still queued (the writer is stopped after a short grace).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_is_closed_and_its_slot_freed() {
    let drive = TestDrive::with_config("idle_timeout_ms = 2000\n").await;
    let c = drive.client().await;
    c.put(b"big", Bytes::from(vec![5u8; 1024 * 1024]), PutOptions::default()).await.unwrap();
    let mut greedy = RawConn::connect(&drive.addr).await;
    let mut frames = BytesMut::new();
    for _ in 0..100 {
        let h = greedy.header(MessageType::Get);
        signed_frame(&Command { header: Some(h), body: get_body("big"), status: None }, 1, KEY, b"", &mut frames);
    }
    greedy.write_until_stalled(&frames, Duration::from_secs(3)).await;
    assert_eq!(device_figure(&c, "open_connections").await, 2);
    let open = wait_for_figure(&c, "open_connections", 1).await;
    assert_eq!(open, 1, "the non-reading client still holds its connection slot");
    drop(greedy);
}

// Review item 2: a reserved (administrators') slot is passed neither by a wrong PIN nor by a
// request with a valid HMAC that names another connection (a replayed frame): either ends
// the connection, so its client cannot go on with requests the reserve would refuse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_pin_or_a_replayed_frame_does_not_pass_the_reserve() {
    // 14 general slots, 2 reserved for TLS administrators.
    let drive = TestDrive::with_config("unauthenticated_timeout_ms = 60000\nreserved_connections = 2\n[limits]\nmax_connections = 16\n").await;
    let admin = drive.tls_client().await;
    admin.set_lock_pin(b"", b"73").await.unwrap();
    set_acl(&admin, vec![admin_entry(), entry(2, "user", vec![scope(0, "", &["READ", "WRITE"], false)])]).await.unwrap();
    // Plain sockets take the general slots left (13 beside `admin`).
    let mut plain = Vec::new();
    for _ in 0..20 {
        let mut s = tokio::net::TcpStream::connect(&drive.addr).await.unwrap();
        let mut buf = vec![0u8; 64 * 1024];
        let _ = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf)).await.unwrap();
        plain.push(s);
    }
    let tls = |identity: i64, key: &str| ClientConfig { identity, hmac_key: b(key), tls_trust: Some(drive.data_dir().join("tls/cert.pem")), ..ClientConfig::default() };
    // (a) A wrong PIN, then requests of an identity without SECURITY.
    let user = spindle_client::Client::connect(drive.tls_addr.as_str(), tls(2, "user")).await.unwrap();
    let wrong = user.pin_operation(PinOpType::LockPinop, b"00").await.unwrap_err();
    assert_eq!(wrong.status(), Some(StatusCode::NotAuthorized), "{wrong}");
    let after = user.noop().await;
    assert!(after.is_err(), "a wrong PIN let a reserved-slot connection go on");
    drop(user);
    // (c) A request signed by an administrator but naming another connection.
    let replayer = spindle_client::Client::connect(drive.tls_addr.as_str(), tls(1, "asdfasdf")).await.unwrap();
    let header = spindle_proto::pb::command::Header { cluster_version: Some(0), connection_id: Some(1), message_type: Some(MessageType::Noop as i32), ..Default::default() };
    let replayed = replayer.request_with_header(header, None, Bytes::new()).await;
    assert!(!matches!(&replayed, Ok(r) if r.status() == StatusCode::Success));
    let after = replayer.noop().await;
    assert!(after.is_err(), "a request naming another connection let a reserved-slot connection go on");
    drop(replayer);
    // An administrator still gets in on the reserve (once the drive has freed those slots).
    let mut ok = false;
    for _ in 0..40 {
        if let Ok(c) = spindle_client::Client::connect(drive.tls_addr.as_str(), tls(1, "asdfasdf")).await {
            if c.noop().await.is_ok() {
                ok = true;
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ok, "no administrator got in on the reserve");
    drop(plain);
}

// Review item 2 (b): the unauthenticated timeout counts from the accept: a client sending a
// frame with a bad HMAC every 300 ms is closed all the same once slots are scarce (here
// always: maxConnections 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_hmac_frames_do_not_keep_an_unauthenticated_socket() {
    let drive = TestDrive::with_config("unauthenticated_timeout_ms = 2000\n[limits]\nmax_connections = 2\n").await;
    let mut raw = RawConn::connect(&drive.addr).await;
    let started = Instant::now();
    let mut closed = false;
    for _ in 0..40 {
        let h = raw.header(MessageType::Noop);
        raw.send(&Command { header: Some(h), body: None, status: None }, 1, b"wrong key", b"").await;
        match tokio::time::timeout(Duration::from_secs(20), raw.response()).await.expect("an answer or a close") {
            None => {
                closed = true;
                break;
            }
            Some((_, c, _)) if common::status_of(&c) == StatusCode::ConnectionTerminated => {
                closed = true;
                break;
            }
            Some((_, c, _)) => assert_eq!(common::status_of(&c), StatusCode::HmacFailure),
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(closed, "bad-HMAC frames kept an unauthenticated socket open for {:?}", started.elapsed());
}

// Review item 4: when the drive takes a quiet batch's slot back for another client, the
// operations it buffered are dropped at once (not when its client returns), and its END_BATCH
// fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_back_batch_drops_its_operations_at_once() {
    let drive = TestDrive::with_config("batch_idle_timeout_ms = 500\n[limits]\nmax_batch_count_per_device = 2\n").await;
    let quiet = drive.client().await;
    let mut batches = Vec::new();
    for _ in 0..2 {
        let mut batch = quiet.start_batch().await.unwrap();
        for i in 0..10 {
            batch.put(format!("q{i}").as_bytes(), Bytes::from(vec![1u8; 64 * 1024]), PutOptions::forced(Synchronization::Writeback)).unwrap();
        }
        batches.push(batch);
    }
    let other = drive.client().await;
    assert_eq!(wait_for_figure(&other, "batched_operations", 20).await, 20);
    tokio::time::sleep(Duration::from_millis(800)).await;
    // Still held: nobody asked for a slot.
    assert_eq!(device_figure(&other, "batched_operations").await, 20);
    let first = other.start_batch().await.expect("the slot of the stalest batch");
    assert_eq!(device_figure(&other, "batched_operations").await, 10);
    let second = other.start_batch().await.expect("the slot of the other quiet batch");
    assert_eq!(device_figure(&other, "batched_operations").await, 0);
    for batch in batches {
        let failed = batch.commit().await.unwrap_err();
        assert_eq!(failed.status(), Some(StatusCode::InvalidBatch), "{failed}");
    }
    first.abort().await.unwrap();
    second.abort().await.unwrap();
    assert_eq!(other.get(b"q0").await.unwrap(), None);
}

// Review item 7: a batch whose slot nobody needed survives a pause longer than
// batch_idle_timeout_ms (an application pausing inside a batch on an idle drive).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_batch_on_an_idle_drive_still_commits() {
    let drive = TestDrive::with_config("batch_idle_timeout_ms = 300\n").await;
    let c = drive.client().await;
    let mut batch = c.start_batch().await.unwrap();
    batch.put(b"p1", b("1"), PutOptions::forced(Synchronization::Writeback)).unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    // Another client opens a batch while a slot is free: the paused one keeps its own.
    let other = drive.client().await;
    other.start_batch().await.unwrap().abort().await.unwrap();
    batch.put(b"p2", b("2"), PutOptions::forced(Synchronization::Writeback)).unwrap();
    batch.commit().await.expect("a paused batch nobody needed the slot of");
    assert_eq!(c.get(b"p2").await.unwrap().map(|e| e.value), Some(b("2")));
}

// Review item 8: idle_timeout_ms applies only while connection slots are scarce (the reference
// client does not reconnect), and a large frame may take its length at 64 KiB/s when that is
// longer than frame_timeout_ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quiet_clients_and_slow_large_frames_keep_their_connection() {
    let drive = TestDrive::with_config("idle_timeout_ms = 500\nframe_timeout_ms = 1000\n").await;
    let c = drive.client().await;
    c.noop().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    c.noop().await.expect("a quiet connection closed while slots are plentiful");

    // A 512 KiB PUT sent in 32 KiB pieces every 100 ms: about 1.6 s, within its 8 s.
    let mut raw = RawConn::connect(&drive.addr).await;
    let h = raw.header(MessageType::Put);
    let mut frame = BytesMut::new();
    signed_frame(&Command { header: Some(h), body: put_body("slow"), status: None }, 1, KEY, &vec![4u8; 512 * 1024], &mut frame);
    for piece in frame.chunks(32 * 1024) {
        raw.stream.write_all(piece).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, answer, _) = raw.response().await.expect("the slow frame answered, not cut off");
    assert_eq!(common::status_of(&answer), StatusCode::Success);
}

// Review, tests: a client that stops reading until the drive stops reading it, then reads its
// answers, gets every one of them and the rest of its requests taken (a lost wake-up of the
// backlog would leave it waiting).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_client_that_reads_again_gets_every_answer() {
    let drive = TestDrive::start().await;
    let c = drive.client().await;
    // Requests with 4,000-byte keys, so that 16 MB of them outgrow the sockets' buffers and
    // the drive, stopped by its backlog, leaves them unread.
    let key = "m".repeat(4000);
    c.put(key.as_bytes(), Bytes::from(vec![6u8; 16 * 1024]), PutOptions::default()).await.unwrap();
    let mut raw = RawConn::connect(&drive.addr).await;
    let count = 4_000;
    let mut frames = BytesMut::new();
    let mut sequences = Vec::new();
    for _ in 0..count {
        let h = raw.header(MessageType::Get);
        sequences.push(h.sequence.unwrap());
        signed_frame(&Command { header: Some(h), body: get_body(&key), status: None }, 1, KEY, b"", &mut frames);
    }
    // (`write` writes nothing when cancelled, so `written` is exact.)
    let mut written = 0;
    while written < frames.len() {
        match tokio::time::timeout(Duration::from_secs(2), raw.stream.write(&frames[written..])).await {
            Ok(Ok(n)) if n > 0 => written += n,
            _ => break,
        }
    }
    assert!(written < frames.len(), "the drive took every request without its answers being read");
    let mut rest = &frames[written..];
    for (i, expected) in sequences.iter().enumerate() {
        if !rest.is_empty() {
            if let Ok(n) = raw.stream.try_write(rest) {
                rest = &rest[n..];
            }
        }
        let (_, answer, value) = raw.response().await.unwrap_or_else(|| panic!("closed after {i} answers"));
        assert_eq!(answer.header.as_ref().and_then(|h| h.ack_sequence), Some(*expected));
        assert_eq!((common::status_of(&answer), value.len()), (StatusCode::Success, 16 * 1024));
    }
    assert!(rest.is_empty());
}

// Review, minor: an unknown GETLOG type is refused wherever it comes in the list (it was
// deduplicated with UTILIZATIONS and skipped).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn getlog_with_an_invalid_type_is_refused() {
    let drive = TestDrive::start().await;
    let mut raw = RawConn::connect(&drive.addr).await;
    let types = vec![LogType::Utilizations as i32, -1];
    let body = Body { get_log: Some(Box::new(GetLog { types, ..GetLog::default() })), ..Body::default() };
    let h = raw.header(MessageType::Getlog);
    assert_eq!(raw.call(h, Some(body), b"").await.0, StatusCode::InvalidRequest);
}

// Review item 6: waits that are not the drive's own work hold no priority. A HIGHER P2P push to
// a peer that accepts and never answers (p2p_timeout_ms 60 s), and a HIGHEST START_BATCH
// waiting for a batch slot another client holds, do not hold back a LOWEST put: it is
// answered before either of them (by order: both still wait when its answer arrives).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_for_a_peer_or_a_batch_slot_hold_no_priority() {
    use spindle_proto::pb::command::p2p_operation::{Operation, Peer as PeerProto};
    use spindle_proto::pb::command::P2pOperation;
    let drive = TestDrive::with_config("p2p_timeout_ms = 60000\n[limits]\nmax_batch_count_per_device = 1\n").await;
    let c = drive.client().await;
    c.put(b"k", b("v"), PutOptions::default()).await.unwrap();
    let stuck_peer = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let stuck_port = stuck_peer.local_addr().unwrap().port();
    let held = tokio::spawn(async move {
        let mut held = Vec::new();
        for _ in 0..16 {
            let Ok((socket, _)) = stuck_peer.accept().await else { break };
            held.push(socket);
        }
        std::future::pending::<()>().await;
    });
    let mut pusher = RawConn::connect(&drive.addr).await;
    let push = P2pOperation {
        peer: Some(PeerProto { hostname: Some("127.0.0.1".into()), port: Some(stuck_port as i32), tls: Some(false) }),
        operation: vec![Operation { key: Some(b("k")), force: Some(true), ..Operation::default() }],
        ..P2pOperation::default()
    };
    let h = spindle_proto::pb::command::Header { priority: Some(7), ..pusher.header(MessageType::Peer2peerpush) };
    let body = Some(Body { p2p_operation: Some(Box::new(push)), ..Body::default() });
    pusher.send(&Command { header: Some(h), body, status: None }, 1, KEY, b"").await;

    // Another client holds the only batch slot; a HIGHEST START_BATCH waits for it (2 s).
    let holder = drive.client().await;
    let _batch = holder.start_batch().await.unwrap();
    let mut starter = RawConn::connect(&drive.addr).await;
    let h = spindle_proto::pb::command::Header { priority: Some(9), batch_id: Some(77), ..starter.header(MessageType::StartBatch) };
    starter.send(&Command { header: Some(h), body: None, status: None }, 1, KEY, b"").await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    let mut low = RawConn::connect(&drive.addr).await;
    let h = spindle_proto::pb::command::Header { priority: Some(1), ..low.header(MessageType::Put) };
    let (code, _, _) = tokio::time::timeout(Duration::from_secs(30), low.call(h, put_body("lowest"), b"l")).await.expect("the LOWEST put answered");
    assert_eq!(code, StatusCode::Success);
    assert!(tokio::time::timeout(Duration::from_millis(10), pusher.response()).await.is_err(), "the push ended before the LOWEST put was answered");
    assert!(tokio::time::timeout(Duration::from_millis(10), starter.response()).await.is_err(), "the START_BATCH ended before the LOWEST put was answered");
    let (_, refused, _) = tokio::time::timeout(Duration::from_secs(30), starter.response()).await.unwrap().unwrap();
    assert_eq!(common::status_of(&refused), StatusCode::InvalidBatch);
    held.abort();
}
