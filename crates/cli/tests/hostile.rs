//! Hostile clients whose bound is the `spindle` process's resident memory (VmRSS, read from
//! /proc): a client that never reads its answers, error answers or large values, must not
//! grow the drive. Measured on the drive's own process, apart from the test's buffers; the
//! other hostile clients are tested against an in-process drive in
//! `crates/drive/tests/hostile.rs`.

mod common;

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use common::{get_body, signed_frame, RawConn, TestDrive, KEY};
use spindle_client::{MessageType, PutOptions, StatusCode};
use spindle_proto::pb::Command;

/// Resident memory of a process, from /proc.
fn vm_rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS in /proc/PID/status");
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

// Item 1: a client that sends requests and never reads its answers cannot make the drive hold
// them without bound, error answers included: a million NOOPs signed as an unknown identity
// (HMAC_FAILURE), with a wrong HMAC, or repeating one sequence number (INVALID_REQUEST), each
// on its own connection, leave the drive under 256 MiB resident.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unread_error_answers_do_not_grow_the_drive() {
    let drive = TestDrive::start(&[]);
    let attacks: [(&str, i64, &[u8]); 3] = [("unknown identity", 424_242, b"unknown"), ("wrong HMAC", 1, b"wrong key"), ("repeated sequence", 1, KEY)];
    let mut held = Vec::new();
    for (attack, identity, key) in attacks {
        let mut raw = RawConn::connect(&drive.addr).await;
        let h = raw.header(MessageType::Noop);
        let mut frame = BytesMut::new();
        signed_frame(&Command { header: Some(h), body: None, status: None }, identity, key, b"", &mut frame);
        let count = 1_000_000;
        let mut all = Vec::with_capacity(frame.len() * count);
        for _ in 0..count {
            all.extend_from_slice(&frame);
        }
        let written = raw.write_until_stalled(&all, Duration::from_secs(3)).await;
        let rss = vm_rss_bytes(drive.pid());
        eprintln!("{attack}: drive resident {} MiB after taking {written} of {} bytes of NOOPs", rss >> 20, all.len());
        assert!(rss < 256 * 1024 * 1024, "{attack}: drive at {} MiB resident after {written} bytes of unread NOOPs", rss >> 20);
        assert!(written < all.len(), "{attack}: the drive read all {count} NOOPs without its answers being read");
        // The connections stay open (unread) while the next attack runs.
        held.push(raw);
    }
    // Everyone else is still served.
    let c = drive.client().await;
    tokio::time::timeout(Duration::from_secs(5), c.noop()).await.unwrap().unwrap();
}

// Review item 5: answers count against the backlog when queued (and reads sent to the disk as
// soon as they are sent). A client pipelining GETs of a 1 MiB value and never reading leaves
// the drive's resident memory within a bound far under the 256 answers it used to gather
// before the backlog saw any. (Small memtables and a 1 MiB block cache: the values are in blob
// files, and each GET reads its value into a buffer of its own, as a drive whose cache does not
// hold it does, instead of sharing one buffer held in a memtable or the cache.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unread_large_answers_stay_within_the_backlog() {
    let drive = TestDrive::with_config("cache_bytes = 1048576\nmemtable_bytes = 65536\n");
    let c = drive.client().await;
    // Eight values of 1 MiB, read in turn: none stays in the cache.
    for i in 0..8u8 {
        c.put(format!("big{i}").as_bytes(), Bytes::from(vec![i; 1024 * 1024]), PutOptions::default()).await.unwrap();
    }
    for i in 0..16 {
        c.get(format!("big{}", i % 8).as_bytes()).await.unwrap();
    }
    let before = vm_rss_bytes(drive.pid());
    let mut greedy = RawConn::connect(&drive.addr).await;
    let mut frames = BytesMut::new();
    for i in 0..600 {
        let h = greedy.header(MessageType::Get);
        signed_frame(&Command { header: Some(h), body: get_body(&format!("big{}", i % 8)), status: None }, 1, KEY, b"", &mut frames);
    }
    greedy.write_until_stalled(&frames, Duration::from_secs(3)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = vm_rss_bytes(drive.pid());
    eprintln!("drive resident {} MiB before, {} MiB with the unread answers", before >> 20, after >> 20);
    // (The GETs were answered with their values: the bound is not that of failed requests.)
    let (_, first, value) = greedy.response().await.unwrap();
    assert_eq!((common::status_of(&first), value.len()), (StatusCode::Success, 1024 * 1024));
    assert!(after.saturating_sub(before) < 96 * 1024 * 1024, "unread 1 MiB answers grew the drive by {} MiB", (after - before) >> 20);
    drop(greedy);
}
