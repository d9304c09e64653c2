//! Reads that need the disk: the drive answers them from a blocking thread, out of order with
//! the connection's later reads, but never out of order with its later writes.

mod common;

use std::collections::HashMap;

use bytes::{Bytes, BytesMut};
use common::{signed_frame, status_of, RawConn, TestDrive, KEY};
use spindle_client::{MessageType, PutOptions, StatusCode, Synchronization};
use spindle_proto::pb::command::{Body, KeyValue};
use spindle_proto::pb::Command;

const KEYS: usize = 300;

fn key(i: usize) -> Vec<u8> {
    format!("cold-{i:05}").into_bytes()
}

/// Small values (in tables) and large ones (in blob files).
fn old_value(i: usize) -> Bytes {
    let len = if i.is_multiple_of(2) { 300 } else { 12_000 };
    Bytes::from((0..len).map(|n| (i as u8) ^ (n as u8)).collect::<Vec<u8>>())
}

fn new_value(i: usize) -> Bytes {
    Bytes::from(format!("rewritten {i}"))
}

fn reads_on_disk(log: &Bytes) -> u64 {
    let doc: serde_json::Value = serde_json::from_slice(log).unwrap();
    doc["reads_on_disk"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_that_needs_the_disk_sees_exactly_the_writes_sent_before_it() {
    // Small memtables put the data in tables and blob files, not in memory.
    let mut drive = TestDrive::with_config("memtable_bytes = 65536\n").await;
    {
        let client = drive.client().await;
        for i in 0..KEYS {
            let options = PutOptions { force: true, sync: Synchronization::Writeback, ..PutOptions::default() };
            client.put(&key(i), old_value(i), options).await.unwrap();
        }
        client.flush_all_data().await.unwrap();
    }
    // A fresh engine (empty block cache) over files that are only on disk.
    drive.restart().await;
    spindle_engine::testing::evict_page_cache(drive.data_dir()).unwrap();

    // Per key, pipelined on one connection: GET (cold), PUT of a new value, GET again.
    let mut raw = RawConn::connect(&drive.addr).await;
    let mut frames = BytesMut::new();
    let mut expect: HashMap<i64, (usize, &str)> = HashMap::new();
    for i in 0..KEYS {
        let kv = |extra: KeyValue| KeyValue { key: Some(Bytes::from(key(i))), ..extra };
        let get = Command { header: Some(raw.header(MessageType::Get)), body: Some(Body { key_value: Some(kv(KeyValue::default())), ..Body::default() }), status: None };
        let put_kv = KeyValue { force: Some(true), synchronization: Some(Synchronization::Writeback as i32), ..KeyValue::default() };
        let put = Command { header: Some(raw.header(MessageType::Put)), body: Some(Body { key_value: Some(kv(put_kv)), ..Body::default() }), status: None };
        let again = Command { header: Some(raw.header(MessageType::Get)), body: Some(Body { key_value: Some(kv(KeyValue::default())), ..Body::default() }), status: None };
        for (command, what, value) in [(get, "old", Bytes::new()), (put, "put", new_value(i)), (again, "new", Bytes::new())] {
            expect.insert(command.header.as_ref().unwrap().sequence.unwrap(), (i, what));
            signed_frame(&command, 1, KEY, &value, &mut frames);
        }
    }
    raw.send_bytes(&frames).await;

    let mut answered = 0;
    while answered < expect.len() {
        let (_, command, value) = raw.response().await.expect("an answer to every request");
        let ack = command.header.as_ref().unwrap().ack_sequence.unwrap();
        let (i, what) = expect[&ack];
        assert_eq!(status_of(&command), StatusCode::Success, "{what} of key {i}");
        match what {
            "old" => assert_eq!(value, old_value(i), "the first GET of key {i} must not see the PUT sent after it"),
            "new" => assert_eq!(value, new_value(i), "the second GET of key {i} must see the PUT sent before it"),
            _ => {}
        }
        answered += 1;
    }

    // The cold reads did go to the disk off the runtime (on a filesystem that can tell).
    let client = drive.client().await;
    let log = client.device_log(spindle_drive::DEVICE_LOG_ENGINE.as_bytes()).await.unwrap();
    assert!(reads_on_disk(&log) > 0, "no read was run on a blocking thread: {}", String::from_utf8_lossy(&log));
}
