//! Atomic batches over real TCP: commit, abort, version failures, every limit, foreign
//! commands, dropped connections and concurrent readers. (A batch under SIGKILL needs the
//! `spindle` process: `crates/cli/tests/batches.rs`.)

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{RawConn, TestDrive};
use spindle_client::{ClientError, DeleteOptions, MessageType, PutOptions, StatusCode, Synchronization};
use spindle_proto::pb::command::{Batch as BatchBody, Body, KeyValue};

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn forced() -> PutOptions {
    PutOptions::forced(Synchronization::Writeback)
}

fn failed_index(e: ClientError) -> (StatusCode, Option<usize>) {
    match e {
        ClientError::BatchFailed { code, failed_index, .. } => (code, failed_index),
        other => panic!("expected a failed batch, got {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_batches_apply_everything_and_aborted_ones_nothing() {
    let drive = TestDrive::start().await;
    let c = drive.client().await;
    c.put(b"gone", b("x"), PutOptions::default()).await.unwrap();

    let mut batch = c.start_batch().await.unwrap();
    batch.put(b"b1", b("one"), forced()).unwrap();
    batch.put(b"b2", b("two"), PutOptions { new_version: b("v2"), ..PutOptions::default() }).unwrap();
    batch.delete(b"gone", DeleteOptions { force: true, ..DeleteOptions::default() }).unwrap();
    // Nothing is visible before the commit, not even to the same connection.
    assert_eq!(c.get(b"b1").await.unwrap(), None);
    batch.commit().await.unwrap();
    assert_eq!(c.get(b"b1").await.unwrap().unwrap().value, b("one"));
    assert_eq!(c.get(b"b2").await.unwrap().unwrap().metadata.version, b("v2"));
    assert_eq!(c.get(b"gone").await.unwrap(), None);

    let mut batch = c.start_batch().await.unwrap();
    batch.put(b"never", b("x"), forced()).unwrap();
    batch.abort().await.unwrap();
    assert_eq!(c.get(b"never").await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_failed_check_fails_the_whole_batch() {
    let drive = TestDrive::start().await;
    let c = drive.client().await;
    c.put(b"v", b("x"), PutOptions { new_version: b("1"), ..PutOptions::default() }).await.unwrap();
    let mut batch = c.start_batch().await.unwrap();
    batch.put(b"f1", b("x"), forced()).unwrap();
    batch.put(b"v", b("y"), PutOptions { new_version: b("2"), db_version: b("9"), ..PutOptions::default() }).unwrap();
    batch.put(b"f2", b("x"), forced()).unwrap();
    let (code, index) = failed_index(batch.commit().await.unwrap_err());
    assert_eq!((code, index), (StatusCode::InvalidBatch, Some(1)));
    assert_eq!(c.get(b"f1").await.unwrap(), None);
    assert_eq!(c.get(b"v").await.unwrap().unwrap().metadata.version, b("1"));

    // A delete of a missing key, unforced, fails the batch too.
    let mut batch = c.start_batch().await.unwrap();
    batch.put(b"f3", b("x"), forced()).unwrap();
    batch.delete(b"missing", DeleteOptions::default()).unwrap();
    assert_eq!(failed_index(batch.commit().await.unwrap_err()).1, Some(1));
    assert_eq!(c.get(b"f3").await.unwrap(), None);

    // A check against the batch's own earlier write.
    let mut batch = c.start_batch().await.unwrap();
    batch.put(b"chain", b("1"), PutOptions { new_version: b("1"), ..PutOptions::default() }).unwrap();
    batch.put(b"chain", b("2"), PutOptions { new_version: b("2"), db_version: b("1"), ..PutOptions::default() }).unwrap();
    batch.commit().await.unwrap();
    assert_eq!(c.get(b"chain").await.unwrap().unwrap().value, b("2"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_limits_are_enforced() {
    let drive = TestDrive::with_config("[limits]\nmax_deletes_per_batch = 2\nmax_batch_size = 100000\n").await;
    let c = drive.client().await;
    let log = c.get_log(&[spindle_client::LogType::Limits]).await.unwrap().limits.unwrap();
    assert_eq!((log.max_operation_count_per_batch(), log.max_batch_count_per_device(), log.max_deletes_per_batch()), (15, 5, 2));

    // 16 operations: the 16th breaks maxOperationCountPerBatch.
    let mut batch = c.start_batch().await.unwrap();
    for i in 0..16 {
        batch.put(format!("op{i}").as_bytes(), b("x"), forced()).unwrap();
    }
    assert_eq!(failed_index(batch.commit().await.unwrap_err()), (StatusCode::InvalidBatch, Some(15)));
    assert_eq!(c.get(b"op0").await.unwrap(), None);

    // Three deletes with maxDeletesPerBatch 2.
    let mut batch = c.start_batch().await.unwrap();
    for i in 0..3 {
        batch.delete(format!("d{i}").as_bytes(), DeleteOptions { force: true, ..DeleteOptions::default() }).unwrap();
    }
    assert_eq!(failed_index(batch.commit().await.unwrap_err()).1, Some(2));

    // Over maxBatchSize bytes.
    let mut batch = c.start_batch().await.unwrap();
    batch.put(b"s1", Bytes::from(vec![0u8; 60_000]), forced()).unwrap();
    batch.put(b"s2", Bytes::from(vec![0u8; 60_000]), forced()).unwrap();
    assert_eq!(failed_index(batch.commit().await.unwrap_err()).1, Some(1));
    assert_eq!(c.get(b"s1").await.unwrap(), None);

    // maxBatchCountPerDevice counts batches of every connection.
    let other = drive.client().await;
    let mut open = Vec::new();
    for _ in 0..3 {
        open.push(c.start_batch().await.unwrap());
    }
    for _ in 0..2 {
        open.push(other.start_batch().await.unwrap());
    }
    assert_eq!(other.start_batch().await.err().unwrap().status(), Some(StatusCode::InvalidBatch));
    open.pop().unwrap().abort().await.unwrap();
    open.push(other.start_batch().await.unwrap());
    for batch in open {
        batch.commit().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_commands_and_bad_counts_fail_the_batch() {
    let drive = TestDrive::start().await;
    let mut raw = RawConn::connect(&drive.addr).await;
    let with_batch = |raw: &mut RawConn, kind: MessageType, id: u32| {
        let mut h = raw.header(kind);
        h.batch_id = Some(id);
        h
    };
    let put = |k: &str| Some(Body { key_value: Some(KeyValue { key: Some(b(k)), force: Some(true), synchronization: Some(2), ..KeyValue::default() }), ..Body::default() });
    let end = |count: i32| Some(Body { batch: Some(BatchBody { count: Some(count), ..BatchBody::default() }), ..Body::default() });

    // A GET inside a batch is refused and fails the batch.
    let h = with_batch(&mut raw, MessageType::StartBatch, 7);
    assert_eq!(raw.call(h, None, b"").await.0, StatusCode::Success);
    let h = with_batch(&mut raw, MessageType::Put, 7);
    raw.send(&spindle_proto::pb::Command { header: Some(h), body: put("in7"), status: None }, 1, common::KEY, b"v").await;
    let h = with_batch(&mut raw, MessageType::Get, 7);
    assert_eq!(raw.call(h, put("in7"), b"").await.0, StatusCode::InvalidBatch);
    let h = with_batch(&mut raw, MessageType::EndBatch, 7);
    let (code, c, _) = raw.call(h, end(1), b"").await;
    assert_eq!(code, StatusCode::InvalidBatch);
    assert!(c.body.unwrap().batch.unwrap().failed_sequence.is_some());

    // END_BATCH whose count differs from what arrived.
    let h = with_batch(&mut raw, MessageType::StartBatch, 8);
    assert_eq!(raw.call(h, None, b"").await.0, StatusCode::Success);
    let h = with_batch(&mut raw, MessageType::Put, 8);
    raw.send(&spindle_proto::pb::Command { header: Some(h), body: put("in8"), status: None }, 1, common::KEY, b"v").await;
    let h = with_batch(&mut raw, MessageType::EndBatch, 8);
    assert_eq!(raw.call(h, end(2), b"").await.0, StatusCode::InvalidBatch);

    // A batched PUT naming no open batch is answered INVALID_BATCH.
    let h = with_batch(&mut raw, MessageType::Put, 99);
    assert_eq!(raw.call(h, put("in99"), b"v").await.0, StatusCode::InvalidBatch);
    // END and ABORT of unknown batches.
    let h = with_batch(&mut raw, MessageType::EndBatch, 98);
    assert_eq!(raw.call(h, end(0), b"").await.0, StatusCode::InvalidBatch);
    let h = with_batch(&mut raw, MessageType::AbortBatch, 98);
    assert_eq!(raw.call(h, None, b"").await.0, StatusCode::InvalidBatch);
    // START_BATCH without a batchID.
    let h = raw.header(MessageType::StartBatch);
    assert_eq!(raw.call(h, None, b"").await.0, StatusCode::InvalidRequest);

    let c = drive.client().await;
    for k in ["in7", "in8", "in99"] {
        assert_eq!(c.get(k.as_bytes()).await.unwrap(), None, "{k}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_of_a_closed_connection_are_dropped_and_free_their_slots() {
    let drive = TestDrive::start().await;
    {
        let c = drive.client().await;
        let mut batches = Vec::new();
        for i in 0..5 {
            let mut batch = c.start_batch().await.unwrap();
            batch.put(format!("dropped{i}").as_bytes(), b("x"), forced()).unwrap();
            batches.push(batch);
        }
        c.noop().await.unwrap();
        drop(batches);
    }
    // The connection is gone: its five batches no longer count.
    let c = drive.client().await;
    let mut ok = false;
    for _ in 0..50 {
        match c.start_batch().await {
            Ok(batch) => {
                batch.abort().await.unwrap();
                ok = true;
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    assert!(ok, "batch slots of a closed connection were never freed");
    for i in 0..5 {
        assert_eq!(c.get(format!("dropped{i}").as_bytes()).await.unwrap(), None);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_never_see_half_a_batch() {
    let drive = TestDrive::start().await;
    let writer = drive.client().await;
    let reader = drive.client().await;
    let keys = ["h1", "h2", "h3", "h4"];
    let rounds = 150u32;
    let write = tokio::spawn(async move {
        for round in 0..rounds {
            let mut batch = writer.start_batch().await.unwrap();
            for k in keys {
                batch.put(k.as_bytes(), Bytes::from(round.to_string()), forced()).unwrap();
            }
            batch.commit().await.unwrap();
        }
    });
    let round_of = |v: Option<spindle_client::Entry>| v.map(|e| String::from_utf8(e.value.to_vec()).unwrap().parse::<u32>().unwrap());
    let mut checks = 0;
    while !write.is_finished() {
        // Written h1..h4 in one batch: reading h1 then h4, h4 can never be behind.
        let first = round_of(reader.get(b"h1").await.unwrap());
        let last = round_of(reader.get(b"h4").await.unwrap());
        assert!(last >= first, "saw h1 at {first:?} but h4 at {last:?}");
        checks += 1;
    }
    write.await.unwrap();
    assert!(checks > 0, "the reader never ran while batches were committed");
}

/// More batches at once on one connection than the drive lets be open: the client opens no
/// more than its `maxBatchCountPerDevice` at a time, so every one commits. A drive answers a
/// connection's requests in order; before, the sixth START_BATCH waited there for a slot
/// that only the END_BATCH queued behind it could free, and was refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_connection_opening_more_batches_than_the_drive_allows_commits_them_all() {
    let drive = TestDrive::start().await;
    let c = drive.client().await;
    let mut writes = tokio::task::JoinSet::new();
    for i in 0..20 {
        let c = c.clone();
        writes.spawn(async move {
            let mut batch = c.start_batch().await?;
            batch.put(format!("many{i}").as_bytes(), b("x"), forced())?;
            batch.commit().await
        });
    }
    while let Some(done) = writes.join_next().await {
        let done = done.unwrap();
        assert!(done.is_ok(), "a batch failed: {done:?}");
    }
    for i in 0..20 {
        assert!(c.get(format!("many{i}").as_bytes()).await.unwrap().is_some());
    }
}

/// A batch dropped without commit or abort (its caller gave up or was cancelled) is aborted
/// on the drive before the connection's next request: its device-wide slot is free again
/// for the batches the client, which counts the slot as given back, opens next. Before, the
/// drive kept it open until the connection closed; with every other slot then asked for on
/// the same connection, the last START_BATCH waited for it behind the END_BATCHes queued after
/// it, and was refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_dropped_open_frees_its_slot_on_the_drive() {
    let drive = TestDrive::start().await;
    let c = drive.client().await;
    let slots = spindle_proto::limits::MAX_BATCH_COUNT_PER_DEVICE;
    for round in 0..3 {
        let mut dropped = c.start_batch().await.unwrap();
        dropped.put(format!("dropped{round}").as_bytes(), b("never"), forced()).unwrap();
        drop(dropped);
        let mut open = Vec::new();
        for i in 0..slots {
            let mut batch = c.start_batch().await.unwrap();
            batch.put(format!("kept{round}-{i}").as_bytes(), b("x"), forced()).unwrap();
            open.push(batch);
        }
        for batch in open {
            batch.commit().await.unwrap();
        }
        assert!(c.get(format!("dropped{round}").as_bytes()).await.unwrap().is_none(), "a dropped batch's put was applied");
    }
}

/// A `start_batch` whose caller stops waiting once its START_BATCH went out (a timeout) aborts
/// the batch the drive opens for it: the client has given the slot back, so the drive must too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_batch_given_up_frees_its_slot_on_the_drive() {
    let drive = TestDrive::start().await;
    let c = drive.client().await;
    let slots = spindle_proto::limits::MAX_BATCH_COUNT_PER_DEVICE;
    // Polled once and dropped: the slot is free, so the START_BATCH goes out in that poll.
    // Its answer is rarely there already (a fast drive on another core); such a batch is
    // dropped open, which aborts it too, and another is given up in its place.
    let mut given_up = 0u32;
    for _ in 0..slots * 100 {
        use std::future::Future;
        let mut start = std::pin::pin!(c.start_batch());
        let polled = start.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop()));
        given_up += u32::from(polled.is_pending());
        if given_up == slots {
            break;
        }
    }
    assert_eq!(given_up, slots, "answered within one poll every time");
    let mut open = Vec::new();
    for i in 0..slots {
        let mut batch = c.start_batch().await.unwrap();
        batch.put(format!("after{i}").as_bytes(), b("x"), forced()).unwrap();
        open.push(batch);
    }
    for batch in open {
        batch.commit().await.unwrap();
    }
}

/// An END_BATCH or ABORT_BATCH refused for a cluster version the drive no longer takes ends
/// its batch: the client counts it ended. Before, a drive fenced to a new epoch while batches
/// were open (a cluster starting or flipping a move) kept their slots until the connection
/// closed or they had idled for `batch_idle_timeout_ms`, and the next START_BATCHes, every
/// slot held, waited 2 s and were refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_refused_for_its_cluster_version_frees_its_slot() {
    let drive = TestDrive::start().await;
    let c = drive.client().await;
    let slots = spindle_proto::limits::MAX_BATCH_COUNT_PER_DEVICE;
    c.set_cluster_version(5).await.unwrap();
    c.set_request_cluster_version(5);
    let mut open = Vec::new();
    for i in 0..slots {
        let mut batch = c.start_batch().await.unwrap();
        batch.put(format!("fenced{i}").as_bytes(), b("x"), forced()).unwrap();
        open.push(batch);
    }
    // Fenced to 6 by another connection, as a coordinator fences its drives.
    let fencer = drive.client().await;
    fencer.set_request_cluster_version(5);
    fencer.set_cluster_version(6).await.unwrap();
    for (i, batch) in open.into_iter().enumerate() {
        let refused = if i % 2 == 0 { batch.commit().await.map(drop) } else { batch.abort().await };
        let status = refused.expect_err("a batch ended at a cluster version the drive no longer takes").status();
        assert_eq!(status, Some(StatusCode::VersionFailure));
    }
    c.set_request_cluster_version(6);
    let mut again = Vec::new();
    for i in 0..slots {
        let mut batch = c.start_batch().await.unwrap();
        batch.put(format!("after{i}").as_bytes(), b("x"), forced()).unwrap();
        again.push(batch);
    }
    for batch in again {
        batch.commit().await.unwrap();
    }
    for i in 0..slots {
        assert!(c.get(format!("fenced{i}").as_bytes()).await.unwrap().is_none(), "a refused batch was applied");
    }
}
