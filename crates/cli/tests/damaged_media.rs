//! Damaged media (hardening issue, item 11): what the drive answers when the bytes on its
//! disk are no longer the ones it wrote. Damage is made by flipping bytes in the engine's
//! files while the drive is stopped.

mod common;

use std::path::{Path, PathBuf};

use bytes::Bytes;
use common::TestDrive;
use spindle_client::{PutOptions, RangeQuery, StatusCode, Synchronization};

/// Small memtables, so that a few hundred KiB of puts are flushed to tables and blob files.
const SMALL_MEMTABLES: &str = "memtable_bytes = 65536\n";

fn small_key(i: usize) -> Vec<u8> {
    format!("small/{i:04}").into_bytes()
}
fn large_key(i: usize) -> Vec<u8> {
    format!("large/{i:04}").into_bytes()
}
fn small_value(i: usize) -> Bytes {
    Bytes::from(vec![(i % 251) as u8; 1000])
}
fn large_value(i: usize) -> Bytes {
    Bytes::from(vec![(i % 241) as u8; 16 * 1024])
}

/// Every file under `dir` whose parent folder is named `folder` (fjall: `tables`, `blobs`).
fn files_in(dir: &Path, folder: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_in(&path, folder));
        } else if path.parent().and_then(|p| p.file_name()).is_some_and(|n| n == folder) {
            found.push(path);
        }
    }
    found.sort();
    found
}

/// The tables holding the metadata records with their small values: the large ones. (fjall's
/// own keyspace of keyspace names, and the data keyspace's tables of blob pointers, are small.)
fn metadata_tables(tables: &[PathBuf]) -> Vec<PathBuf> {
    tables.iter().filter(|t| std::fs::metadata(t).unwrap().len() > 16 * 1024).cloned().collect()
}

/// Flips `len` bytes of `file` at `offset`.
fn flip(file: &Path, offset: u64, len: usize) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().read(true).write(true).open(file).unwrap();
    let mut bytes = vec![0u8; len];
    f.read_exact_at(&mut bytes, offset).unwrap();
    for b in &mut bytes {
        *b ^= 0xA5;
    }
    f.write_all_at(&bytes, offset).unwrap();
    f.sync_all().unwrap();
}

/// Puts small values (kept in the metadata tables) and large ones (in blob files), flushed
/// to tables, and stops the drive.
async fn filled_and_stopped(drive: &mut TestDrive, small: usize, large: usize) {
    let c = drive.client().await;
    let opts = PutOptions { force: true, sync: Synchronization::Writeback, ..PutOptions::default() };
    for i in 0..small {
        c.put(&small_key(i), small_value(i), opts.clone()).await.unwrap();
    }
    for i in 0..large {
        c.put(&large_key(i), large_value(i), opts.clone()).await.unwrap();
    }
    c.flush_all_data().await.unwrap();
    // The memtable flushes run on fjall's workers: give them a moment.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    drop(c);
    drive.kill();
}

/// Table blocks and blob values carry checksums; one that fails is damaged data,
/// PERM_DATA_ERROR, not the drive's own failure (INTERNAL_ERROR, as before the fix).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_tables_and_blob_files_answer_perm_data_error() {
    let mut drive = TestDrive::with_config(SMALL_MEMTABLES);
    filled_and_stopped(&mut drive, 400, 40).await;
    let engine = drive.data_dir().join("engine");
    let tables = files_in(&engine, "tables");
    let blobs = files_in(&engine, "blobs");
    assert!(!tables.is_empty() && !blobs.is_empty(), "tables {tables:?}, blobs {blobs:?}");
    // Inside the first data block of each table, inside the first value of each blob file.
    for file in metadata_tables(&tables).iter().chain(&blobs) {
        flip(file, 100, 8);
    }
    drive.restart_after_kill();
    let c = drive.client().await;
    let mut damaged = (0, 0);
    for (i, key) in (0..400).map(small_key).enumerate() {
        match c.get(&key).await {
            Ok(Some(e)) => assert_eq!(e.value, small_value(i)),
            Err(e) if e.status() == Some(StatusCode::PermDataError) => damaged.0 += 1,
            other => panic!("small {i}: {other:?}"),
        }
    }
    for (i, key) in (0..40).map(large_key).enumerate() {
        match c.get(&key).await {
            Ok(Some(e)) => assert_eq!(e.value, large_value(i)),
            Err(e) if e.status() == Some(StatusCode::PermDataError) => damaged.1 += 1,
            other => panic!("large {i}: {other:?}"),
        }
    }
    assert!(damaged.0 > 0 && damaged.1 > 0, "damaged (small, large): {damaged:?}");
}

/// A damaged metadata block used to make a whole MEDIASCAN fail with nothing flagged. The
/// scan now reports the span it could not read and goes on: a value after the damage that
/// fails its tag is still found, and the scan reaches the end of the range.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_reports_damaged_metadata_and_goes_on() {
    let mut drive = TestDrive::with_config(SMALL_MEMTABLES);
    {
        let c = drive.client().await;
        let bad_tag = PutOptions { tag: Bytes::from(vec![0u8; 20]), algorithm: Some(spindle_client::Algorithm::Sha1 as i32), ..PutOptions::default() };
        c.put(b"zz/bad-tag", Bytes::from_static(b"v"), bad_tag).await.unwrap();
    }
    filled_and_stopped(&mut drive, 400, 0).await;
    let tables = files_in(&drive.data_dir().join("engine"), "tables");
    // Every metadata table: compactions may have left some of the files unused.
    let damaged = metadata_tables(&tables);
    assert!(!damaged.is_empty());
    for table in &damaged {
        flip(table, 100, 8);
    }
    drive.restart_after_kill();
    let c = drive.client().await;
    let all = RangeQuery::inclusive(Bytes::new(), Bytes::from_static(b"zzzz"), 200);
    let (failed, end) = c.media_scan(all).await.unwrap();
    assert!(failed.contains(&Bytes::from_static(b"zz/bad-tag")), "{failed:?}");
    assert_eq!(end, Some(Bytes::from_static(b"zz/bad-tag")));
    let log = c.get_log(&[spindle_client::LogType::Messages]).await.unwrap();
    let log = String::from_utf8_lossy(&log.messages.unwrap_or_default()).into_owned();
    assert!(log.contains("damaged metadata"), "{log}");
}

/// The journal's first `.jnl` file in the drive's engine directory.
fn journal_of(data: &Path) -> PathBuf {
    let engine = data.join("engine");
    let mut journals: Vec<PathBuf> =
        std::fs::read_dir(&engine).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "jnl")).collect();
    journals.sort();
    journals.into_iter().next().expect("a journal")
}

/// Where a journal's records end (the zeros it is preallocated with follow).
fn used_length(file: &Path) -> u64 {
    let bytes = std::fs::read(file).unwrap();
    bytes.iter().rposition(|&b| b != 0).map_or(0, |last| last as u64 + 1)
}

/// 16 bytes flipped in the middle of a journal whose writes FLUSHALLDATA made durable used to
/// start the drive silently without half of them. It is corruption, not a crash: the drive
/// refuses to start, naming the file and offset; `--salvage-journal` starts it with every
/// intact batch (those after the damage too) and the drop recorded in GETLOG MESSAGES.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_damaged_where_it_was_synced_stops_the_start_until_salvaged() {
    const KEYS: usize = 3000;
    let mut drive = TestDrive::start(&[]);
    let c = drive.client().await;
    let opts = PutOptions { force: true, sync: Synchronization::Writeback, ..PutOptions::default() };
    for i in 0..KEYS {
        c.put(&small_key(i), small_value(i), opts.clone()).await.unwrap();
    }
    c.flush_all_data().await.unwrap();
    drop(c);
    // SIGKILL: what FLUSHALLDATA acknowledged is all the drive may count on.
    drive.kill();
    let data = drive.data_dir().to_path_buf();
    let journal = journal_of(&data);
    let middle = used_length(&journal) / 2;
    flip(&journal, middle, 16);

    let out = std::process::Command::new(common::spindle_bin())
        .args(["drive", "--port", "0", "--tls-port", "0", "--data"])
        .arg(&data)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run spindle drive");
    let printed = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the drive started on a damaged journal");
    let name = journal.file_name().unwrap().to_str().unwrap();
    assert!(printed.contains(name) && printed.contains("offset") && printed.contains("--salvage-journal"), "{printed}");

    let mut salvaged = TestDrive::start_in(&data, &["--salvage-journal"]);
    let c = salvaged.client().await;
    let mut found = 0;
    for i in 0..KEYS {
        if let Some(entry) = c.get(&small_key(i)).await.unwrap() {
            assert_eq!(entry.value, small_value(i), "key {i}");
            found += 1;
        }
    }
    // 16 bytes touch at most two one-put batches.
    assert!((KEYS - 2..KEYS).contains(&found), "{found} of {KEYS} keys after the salvage");
    let messages = c.get_log(&[spindle_client::LogType::Messages]).await.unwrap().messages.unwrap_or_default();
    let messages = String::from_utf8_lossy(&messages);
    assert!(messages.contains("salvaged") && messages.contains(name), "GETLOG MESSAGES: {messages}");
    drop(c);
    salvaged.kill();

    // Salvaged once: later starts need no option, and still tell what was dropped.
    let again = TestDrive::start_in(&data, &[]);
    let c = again.client().await;
    let messages = c.get_log(&[spindle_client::LogType::Messages]).await.unwrap().messages.unwrap_or_default();
    assert!(String::from_utf8_lossy(&messages).contains("salvaged"));
    assert!(c.get(&small_key(KEYS - 1)).await.unwrap().is_some());
}
