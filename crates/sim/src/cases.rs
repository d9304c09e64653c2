//! Scripted cases: one course of operations (S3 or the store's) over a simulated cluster with
//! no fault but those a case makes, for states the seeded runs reach only by chance (each found
//! by a seed first).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use s3s::dto::{
    AbortMultipartUploadInput, BucketVersioningStatus, CompleteMultipartUploadInput, CompletedMultipartUpload, CompletedPart, CreateMultipartUploadInput, ListObjectVersionsInput,
    PutBucketVersioningInput, StreamingBlob, UploadPartInput, VersioningConfiguration,
};
use s3s::{S3ErrorCode, S3};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use spindle_cluster::history::{self, Event, Op};
use spindle_cluster::store::{Condition, Stalls, Store};
use spindle_s3::Embedded;

use crate::disk::Disk;
use crate::s3::PutCondition;
use crate::workload::History;
use crate::{add_coordinator, add_drives, align_task_ids, open_store, s3, set_up, etcd, SIM_EPOCH_SECS, TURNS};

/// The prefixes of the gateway's upload and part records: "s3\0" then the record kind
/// (crates/s3/src/layout.rs).
pub(crate) const UPLOAD: &[u8] = b"s3\0U";
pub(crate) const PART: &[u8] = b"s3\0P";
const DATA: &[u8] = b"s3\0D";
const INTENT: &[u8] = b"s3\0G";
/// The longest a case may run in simulated time.
const LONGEST_CASE: Duration = Duration::from_secs(600);

/// A multipart completion whose swap took effect though the completion failed (its commit
/// timed out: the upload is given back as it was, part records and all), then its object
/// replaced, which releases the data the parts name. The sweeper must keep that data while
/// the upload lasts: a retried completion makes the object whole again. The same state ended
/// by an abort leaves no data, record or intent behind. Found by `--s3 --seed 6 --ops 400`.
pub fn a_completion_failed_after_its_swap(seed: u64) -> Result<(), String> {
    scripted(seed, |store, gateway| async move {
        let retried = failed_after_swap(&store, &gateway, 0, 1, 2).await?;
        let aborted = failed_after_swap(&store, &gateway, 1, 3, 4).await?;
        sweep_past_grace(&gateway).await?;
        complete(&gateway, 0, &retried).await.map_err(|e| format!("the retried completion failed: {e}"))?;
        let abort = AbortMultipartUploadInput { bucket: s3::BUCKET.into(), key: s3::object_name(1), upload_id: aborted.0.clone(), ..Default::default() };
        gateway.s3().abort_multipart_upload(Embedded::admin_request(abort)).await.map_err(|e| format!("the abort failed: {e}"))?;
        for (object, v) in [(0, 1), (1, 4)] {
            match s3::get(&gateway, object).await? {
                Some(Some(n)) if n == v => {}
                other => return Err(format!("object {object} reads {other:?}, not value {v}")),
            }
        }
        sweep_past_grace(&gateway).await?;
        let census = gateway.census().await.map_err(|e| format!("census: {e}"))?;
        if !census.missing().is_empty() || !census.unreferenced().is_empty() || !census.intents.is_empty() {
            return Err(format!("after the sweeps: {census:?}"));
        }
        Ok(())
    })
}

/// A chunk that no intent or record accounts for, as a chunk write a hung drive took after its
/// upload's data was collected leaves: the orphan scan gives it an intent, the sweeper
/// collects it, and objects and uploads in progress keep theirs. Found by `--s3 --seed 17
/// --ops 400`.
pub fn an_orphaned_chunk(seed: u64) -> Result<(), String> {
    scripted(seed, |store, gateway| async move {
        if !s3::put(&gateway, 0, 1).await {
            return Err("object 0 was not stored".into());
        }
        // An upload's part whose data only its part record accounts for (the intent dropped
        // by the sweeper): not an orphan.
        let retried = failed_after_swap(&store, &gateway, 1, 2, 3).await?;
        sweep_past_grace(&gateway).await?;
        let orphan: u128 = 0x00c0_ffee_0000_0000_0000_0000_0000_0001;
        let chunk = [DATA, &orphan.to_be_bytes(), &3u32.to_be_bytes()].concat();
        store.put(&chunk, Bytes::from_static(b"late"), Condition::None).await.map_err(|e| format!("writing the chunk: {e}"))?;
        // A window of one id: every id is reached, each window judged on its own walk.
        let scanned = gateway.scan_orphans(1).await.map_err(|e| format!("scan: {e}"))?;
        if scanned.orphans != 1 {
            return Err(format!("the scan found {scanned:?}, not the one orphan"));
        }
        sweep_past_grace(&gateway).await?;
        let census = gateway.census().await.map_err(|e| format!("census: {e}"))?;
        if census.stored.contains(&orphan) || !census.missing().is_empty() || !census.intents.is_empty() {
            return Err(format!("after the scan and the sweeps: {census:?}"));
        }
        let again = gateway.scan_orphans(spindle_s3::SCAN_WINDOW).await.map_err(|e| format!("scan: {e}"))?;
        if again.orphans != 0 {
            return Err(format!("a second scan found {again:?}"));
        }
        complete(&gateway, 1, &retried).await.map_err(|e| format!("the retried completion failed: {e}"))?;
        for (object, v) in [(0, 1), (1, 2)] {
            match s3::get(&gateway, object).await? {
                Some(Some(n)) if n == v => {}
                other => return Err(format!("object {object} reads {other:?}, not value {v}")),
            }
        }
        Ok(())
    })
}

/// A completion whose part's data the sweeper has doomed (its chunks being deleted) refuses
/// it (InvalidPart) and leaves no object; the part uploaded again, the completion goes through,
/// and the doomed data is collected. A
/// completion whose claim on its part's intent loses a race with another writer of the intent
/// answers SlowDown and leaves no object; once the race is over, the completion retried makes
/// the object whole. The two ways `Core::claim` refuses data (crates/s3/src/intents.rs).
pub fn a_completion_meets_its_parts_data_taken(seed: u64) -> Result<(), String> {
    scripted(seed, |store, gateway| async move {
        let doomed_upload = upload_one_part(&gateway, 0, 1).await?;
        let intent = part_intent(&store, &doomed_upload.0).await?;
        store.put(&intent, intent_record(0, true), Condition::Absent).await.map_err(|e| format!("dooming the intent: {e}"))?;
        complete_fails(&gateway, 0, &doomed_upload, S3ErrorCode::InvalidPart).await?;
        match s3::get(&gateway, 0).await? {
            Some(None) => {}
            other => return Err(format!("object 0 reads {other:?} after its completion was refused, not no such key")),
        }
        // As the error says: the part uploaded again, and the completion goes through.
        let again = upload_part(&gateway, 0, &doomed_upload.0, 1).await?;
        complete(&gateway, 0, &(doomed_upload.0.clone(), again)).await.map_err(|e| format!("the completion after the part was uploaded again failed: {e}"))?;
        match s3::get(&gateway, 0).await? {
            Some(Some(1)) => {}
            other => return Err(format!("object 0 reads {other:?}, not value 1")),
        }
        sweep_past_grace(&gateway).await?;
        let census = gateway.census().await.map_err(|e| format!("census: {e}"))?;
        if census.stored.len() != 1 || census.stored != census.referenced || !census.intents.is_empty() {
            return Err(format!("after the completion and the sweeps: {census:?}"));
        }

        let raced_upload = upload_one_part(&gateway, 1, 2).await?;
        let intent = part_intent(&store, &raced_upload.0).await?;
        let value = intent_record(1, false);
        let racing = Arc::new(AtomicBool::new(true));
        let racer = tokio::spawn({
            let (store, racing) = (store.clone(), racing.clone());
            async move {
                while racing.load(Ordering::Relaxed) {
                    let _ = store.put(&intent, value.clone(), Condition::None).await;
                }
            }
        });
        let raced = complete_fails(&gateway, 1, &raced_upload, S3ErrorCode::SlowDown).await;
        racing.store(false, Ordering::Relaxed);
        racer.await.map_err(|e| format!("the racer: {e}"))?;
        raced?;
        match s3::get(&gateway, 1).await? {
            Some(None) => {}
            other => return Err(format!("object 1 reads {other:?} after its completion lost the race, not no such key")),
        }
        complete(&gateway, 1, &raced_upload).await.map_err(|e| format!("the retried completion failed: {e}"))?;
        match s3::get(&gateway, 1).await? {
            Some(Some(2)) => Ok(()),
            other => Err(format!("object 1 reads {other:?}, not value 2")),
        }
    })
}

/// A connection that lost a message: turmoil, like a path that drops packets or a peer that
/// lost power, never delivers what a partition dropped, so a connection that lost a segment
/// answers nothing more. The store must connect again rather than wait on it for good: with
/// the other replica cut off afterwards, writes and reads need the drive behind that connection.
/// Found by `--lossy --seed 27 --ops 400`, where the sweeper's connection to one drive hung and
/// left a replica behind for good.
pub fn a_connection_that_lost_a_message(seed: u64) -> Result<(), String> {
    scripted(seed, |store, _gateway| async move {
        let key = b"a key".to_vec();
        store.put(&key, Bytes::from_static(b"1"), Condition::None).await.map_err(|e| format!("the first put: {e}"))?;
        store.get(&key).await.map_err(|e| format!("the first get: {e}"))?;
        // Both of d0's connections lose what they carry while the partition lasts, and longer
        // than a request's timeout.
        turmoil::partition("script", "d0");
        store.put(&key, Bytes::from_static(b"2"), Condition::None).await.map_err(|e| format!("the put beside the partition: {e}"))?;
        store.get(&key).await.map_err(|e| format!("the get beside the partition: {e}"))?;
        tokio::time::sleep(CONNECTION_LOST_FOR).await;
        turmoil::repair("script", "d0");
        turmoil::partition("script", "d1");
        // A connection that broke while idle is found so by the first request that waits on
        // it in vain (an unknown outcome, as any timeout): later ones connect again.
        let mut failed = Vec::new();
        for v in 3..3 + ROUNDS_CUT_OFF {
            let value = Bytes::from(vec![b'0' + v]);
            let round = async {
                store.put(&key, value.clone(), Condition::None).await.map_err(|e| format!("put {v} with d1 cut off: {e}"))?;
                match store.get(&key).await.map_err(|e| format!("get {v} with d1 cut off: {e}"))? {
                    Some(got) if got.value == value => Ok(()),
                    other => Err(format!("read {other:?} after writing {value:?}")),
                }
            };
            if let Err(e) = round.await {
                failed.push(e);
            }
        }
        if failed.len() > LOST_CONNECTIONS_FOUND_IN {
            return Err(format!("{} of {ROUNDS_CUT_OFF} rounds failed with d1 cut off: {failed:?}", failed.len()));
        }
        turmoil::repair("script", "d1");
        Ok(())
    })
}

/// Longer than any request's timeout (the store's default is 5 s).
const CONNECTION_LOST_FOR: Duration = Duration::from_secs(12);
/// Rounds of a put and a get with d1 cut off.
const ROUNDS_CUT_OFF: u8 = 7;
/// Rounds that may fail while the store finds its connections to d0 lost: one per lane.
const LOST_CONNECTIONS_FOUND_IN: usize = 2;

/// Writers that race on one object, with no fault, while readers read it: PUTs, multipart
/// uploads and DELETEs drawn from the seed. None is conditional, so every PUT and upload
/// succeeds (retried, as an SDK retries, when the gateway answers SlowDown for a key too hot;
/// a DELETE may answer 503 when its race leaves its outcome unknowable); every
/// read is whole and the history linearizable; after the sweeps only the data of the object
/// left is stored (one data id, or one per part), no upload's, and no intent. A swap that
/// raced another may be chosen by a later writer's round, which then releases its data: the
/// raced writer, finding its data's intent changed, must read the object again (its swap took
/// effect) rather than report its data collected. Found by the gateway's suite
/// (tests/s3/test_behaviour.py, test_concurrent_overwrites_of_one_key).
pub fn racing_writers_of_one_object(seed: u64) -> Result<(), String> {
    racing_on_one_object(seed, false)
}

/// `racing_writers_of_one_object` with conditional writes among them (PUTs If-None-Match: *,
/// PUTs and DELETEs If-Match on the ETag a read just returned) and the object's tags rewritten
/// in place. Each conditional write succeeds, is refused (412, or 404 for an If-Match on an
/// object deleted since), or, having raced another write, answers 503 as of unknown outcome;
/// the history checker holds every one to its condition.
pub fn racing_conditional_writers_of_one_object(seed: u64) -> Result<(), String> {
    racing_on_one_object(seed, true)
}

fn racing_on_one_object(seed: u64, conditional: bool) -> Result<(), String> {
    scripted(seed, move |_store, gateway| async move {
        race_with_readers(&gateway, seed, conditional).await?;
        sweep_past_grace(&gateway).await?;
        let census = gateway.census().await.map_err(|e| format!("census: {e}"))?;
        if census.stored != census.referenced || !census.in_parts.is_empty() || !census.intents.is_empty() {
            return Err(format!("after the writes and the sweeps: {census:?}"));
        }
        Ok(())
    })
}

/// `racing_writers_of_one_object` in a bucket with versioning enabled: besides its checks,
/// every PUT and upload is one version of the object, kept exactly once, and every DELETE one
/// delete marker; one of them is the latest; and the sweeps leave every version's data.
pub fn racing_writers_of_one_versioned_object(seed: u64) -> Result<(), String> {
    scripted(seed, move |_store, gateway| async move {
        enable_versioning(&gateway).await?;
        let written = race_with_readers(&gateway, seed, false).await?;
        let input = ListObjectVersionsInput { bucket: s3::BUCKET.into(), ..Default::default() };
        let listed = gateway.s3().list_object_versions(Embedded::admin_request(input)).await.map_err(|e| format!("listing versions: {e}"))?.output;
        if listed.is_truncated == Some(true) {
            return Err("more versions than one page lists".into());
        }
        let (versions, markers) = (listed.versions.unwrap_or_default(), listed.delete_markers.unwrap_or_default());
        let mut kept = Vec::new();
        for v in &versions {
            let id = v.version_id.clone().ok_or("a version without an id")?;
            kept.push(s3::get_version(&gateway, 0, &id).await?);
        }
        kept.sort_unstable();
        let mut put: Vec<u64> = written.iter().filter_map(|w| *w).collect();
        put.sort_unstable();
        let deletes = written.iter().filter(|w| w.is_none()).count();
        if kept != put || markers.len() != deletes {
            return Err(format!("versions {kept:?} and {} markers, where the writes were {put:?} and {deletes} deletes", markers.len()));
        }
        let latest = versions.iter().filter(|v| v.is_latest == Some(true)).count() + markers.iter().filter(|m| m.is_latest == Some(true)).count();
        if latest != 1 {
            return Err(format!("{latest} versions are the latest"));
        }
        sweep_past_grace(&gateway).await?;
        let census = gateway.census().await.map_err(|e| format!("census: {e}"))?;
        if !census.missing().is_empty() || census.stored != census.referenced || !census.in_parts.is_empty() || !census.intents.is_empty() {
            return Err(format!("after the writes and the sweeps: {census:?}"));
        }
        Ok(())
    })
}

/// Versioning enabled on the case's bucket.
pub(crate) async fn enable_versioning(gateway: &Embedded) -> Result<(), String> {
    let configuration = VersioningConfiguration { status: Some(BucketVersioningStatus::from_static(BucketVersioningStatus::ENABLED)), ..Default::default() };
    let input = PutBucketVersioningInput::builder()
        .bucket(s3::BUCKET.into())
        .versioning_configuration(configuration)
        .build()
        .map_err(|e| format!("a versioning request: {e}"))?;
    gateway.s3().put_bucket_versioning(Embedded::admin_request(input)).await.map(drop).map_err(|e| format!("enabling versioning: {e}"))
}

/// The writers and readers of `racing_writers_of_one_object`, the reads checked whole and the
/// history linearizable; returns every write made, in no order (`None` for a DELETE).
async fn race_with_readers(gateway: &Arc<Embedded>, seed: u64, conditional: bool) -> Result<Vec<Option<u64>>, String> {
    let history = Arc::new(History::default());
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..RACING_READERS)
        .map(|_| {
            let (gateway, history, done) = (gateway.clone(), history.clone(), done.clone());
            tokio::spawn(async move {
                while !done.load(Ordering::Relaxed) {
                    let call = s3::now_micros();
                    if let Some(read) = s3::get(&gateway, 0).await? {
                        history.record(Event { key: s3::FIRST_OBJECT, op: Op::Read(read), call, ret: Some(s3::now_micros()) });
                    }
                }
                Ok::<(), String>(())
            })
        })
        .collect();
    let writers: Vec<_> = (0..RACING_WRITERS)
        .map(|w| {
            let (gateway, history) = (gateway.clone(), history.clone());
            tokio::spawn(async move { race_on_one_object(&gateway, &history, seed, w, conditional).await })
        })
        .collect();
    let mut failed = Vec::new();
    for w in writers {
        if let Err(e) = w.await.map_err(|e| format!("a writer: {e}"))? {
            failed.push(e);
        }
    }
    done.store(true, Ordering::Relaxed);
    for r in readers {
        r.await.map_err(|e| format!("a reader: {e}"))??;
    }
    if !failed.is_empty() {
        return Err(failed.join("; "));
    }
    let events = history.events.lock().clone();
    history::check(&events).map_err(|v| format!("not linearizable: {v}"))?;
    Ok(events
        .iter()
        .filter_map(|e| match e.op {
            Op::Write(w) => Some(w),
            _ => None,
        })
        .collect())
}

/// Writer `w`'s course in `racing_writers_of_one_object`, each write in the history.
async fn race_on_one_object(gateway: &Embedded, history: &History, seed: u64, w: u64, conditional: bool) -> Result<(), String> {
    let mut rng = StdRng::seed_from_u64(seed ^ (w << 32) ^ 0x000b_1ec7);
    for i in 0..RACING_WRITES {
        let v = 1 + w * RACING_WRITES + i;
        let what = rng.random_range(0..if conditional { 8 } else { 4 });
        if what == 7 {
            // Its tags rewritten: the object stays what it was (not in the history), its
            // manifest replaced in place. Refused when there is no object, or after a race.
            let _ = s3::tag(gateway, 0, v).await;
            continue;
        }
        // A read-modify-write (4) tries again from a new read when refused, as a client would.
        for _ in 0..if what == 4 { CAS_TRIES } else { 1 } {
            let call = s3::now_micros();
            // If-Match on the object a read just returned, or If-None-Match when there was none;
            // a conditional delete (6) If-Match on it, or nothing when there was none.
            let seen = match what {
                4 | 6 => Some(s3::get_with_etag(gateway, 0).await?),
                _ => None,
            };
            if what == 6 && seen == Some(None) {
                break;
            }
            let mut slowed = 0;
            let done = loop {
                let done = match (what, &seen) {
                    (0, _) => s3::delete_or_error(gateway, 0).await,
                    (6, Some(Some((_, etag)))) => s3::delete_if(gateway, 0, Some(etag.clone())).await,
                    (1, _) => s3::put_in_parts_or_error(gateway, 0, v).await,
                    (4, Some(Some((_, etag)))) => s3::put_if(gateway, 0, v, Some(PutCondition::Match(etag.clone()))).await,
                    (4 | 5, _) => s3::put_if(gateway, 0, v, Some(PutCondition::Absent)).await,
                    _ => s3::put_or_error(gateway, 0, v).await,
                };
                match done {
                    Err(e) if *e.code() == S3ErrorCode::SlowDown && slowed < SLOW_DOWN_RETRIES => slowed += 1,
                    done => break done,
                }
            };
            // What the write expected, if conditional: the object read, or none; and what it
            // writes.
            let expect = (what >= 4).then(|| seen.flatten().map(|(n, _)| n));
            let new = (what != 0 && what != 6).then_some(v);
            let (op, ret) = match (done, expect) {
                (Ok(()), None) => (Op::Write(new), Some(s3::now_micros())),
                (Ok(()), Some(expect)) => (Op::Cas { expect, new }, Some(s3::now_micros())),
                (Err(e), Some(expect)) if matches!(e.code(), S3ErrorCode::PreconditionFailed | S3ErrorCode::NoSuchKey) => {
                    history.record(Event { key: s3::FIRST_OBJECT, op: Op::Refused { expect }, call, ret: Some(s3::now_micros()) });
                    continue;
                }
                // A conditional write that raced another cannot say whether its condition held.
                (Err(e), Some(expect)) if *e.code() == S3ErrorCode::ServiceUnavailable => (Op::Cas { expect, new }, None),
                // Nor can a delete that raced more than one write (`Core::settle_removal`).
                (Err(e), None) if what == 0 && *e.code() == S3ErrorCode::ServiceUnavailable => (Op::Write(None), None),
                (Err(e), _) => return Err(format!("writer {w}'s write {i} ({what}) failed: {e}")),
            };
            history.record(Event { key: s3::FIRST_OBJECT, op, call, ret });
            break;
        }
    }
    Ok(())
}

/// Writers and readers of `racing_writers_of_one_object`, and the writes each writer makes.
const RACING_WRITERS: u64 = 8;
const RACING_READERS: usize = 2;
const RACING_WRITES: u64 = 5;
/// Reads and If-Match PUTs a read-modify-write makes at most while refused.
const CAS_TRIES: usize = 4;
/// Times a writer retries a write answered SlowDown (an SDK's default is 3 to 5).
const SLOW_DOWN_RETRIES: u32 = 4;

/// Object `object` completed from a one-part upload of value `first`, the upload and part
/// records then put back as a failed completion leaves them, and the object replaced by value
/// `second`. Returns the upload's id and its part.
async fn failed_after_swap(store: &Store, gateway: &Embedded, object: u64, first: u64, second: u64) -> Result<(String, CompletedPart), String> {
    let (upload, part) = upload_one_part(gateway, object, first).await?;
    let id = u128::from_str_radix(&upload, 16).map_err(|e| format!("upload id {upload}: {e}"))?;
    let uploads = uploads_of(object);
    let parts = [PART, &id.to_be_bytes()].concat();
    let kept = [records(store, &uploads).await?, records(store, &parts).await?].concat();
    complete(gateway, object, &(upload.clone(), part.clone())).await?;
    for (key, value) in kept {
        store.put(&key, value, Condition::Absent).await.map_err(|e| format!("putting a record back: {e}"))?;
    }
    if !s3::put(gateway, object, second).await {
        return Err(format!("object {object} was not replaced"));
    }
    Ok((upload, part))
}

/// The prefix of the upload records of `object` (crates/s3/src/layout.rs).
pub(crate) fn uploads_of(object: u64) -> Vec<u8> {
    [UPLOAD, format!("{{{}}}\0{}\0", s3::BUCKET, s3::object_name(object)).as_bytes()].concat()
}

/// The one record under `prefix`.
pub(crate) async fn records(store: &Store, prefix: &[u8]) -> Result<Vec<(Bytes, Bytes)>, String> {
    let end = [prefix, &[0xff; 8]].concat();
    let mut found = Vec::new();
    for key in store.range(prefix, Some(&end), 100).await.map_err(|e| e.to_string())? {
        if let Some(v) = store.get(&key).await.map_err(|e| e.to_string())? {
            found.push((key, v.value));
        }
    }
    match found.len() {
        1 => Ok(found),
        n => Err(format!("{n} records under {prefix:?} where one was expected")),
    }
}

/// The intent key of the data of upload `upload`'s one part, read from its part record (whose
/// segment names the data id as a JSON number: crates/s3/src/records.rs).
pub(crate) async fn part_intent(store: &Store, upload: &str) -> Result<Vec<u8>, String> {
    let id = u128::from_str_radix(upload, 16).map_err(|e| format!("upload id {upload}: {e}"))?;
    let (_, record) = records(store, &[PART, &id.to_be_bytes()].concat()).await?.remove(0);
    let text = String::from_utf8(record.to_vec()).map_err(|e| format!("part record: {e}"))?;
    let data: u128 = text
        .split_once("\"data\":")
        .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|digits| digits.parse().ok())
        .ok_or_else(|| format!("no data id in the part record {text}"))?;
    Ok([INTENT, &data.to_be_bytes()].concat())
}

/// An intent record for the part of `object`'s upload, as the gateway encodes one.
pub(crate) fn intent_record(object: u64, doomed: bool) -> Bytes {
    let owner = format!("{{\"bucket\":\"{}\",\"key\":\"{}\"}}", s3::BUCKET, s3::object_name(object));
    Bytes::from(format!("{{\"touched_ms\":{},\"owner\":{owner},\"doomed\":{doomed}}}", s3::wall_clock()))
}

/// A multipart upload of `object` begun and its one part, of value `value`, uploaded.
pub(crate) async fn upload_one_part(gateway: &Embedded, object: u64, value: u64) -> Result<(String, CompletedPart), String> {
    let create = CreateMultipartUploadInput { bucket: s3::BUCKET.into(), key: s3::object_name(object), ..Default::default() };
    let created = gateway.s3().create_multipart_upload(Embedded::admin_request(create)).await.map_err(|e| e.to_string())?;
    let upload = created.output.upload_id.ok_or("no upload id")?;
    let part = upload_part(gateway, object, &upload, value).await?;
    Ok((upload, part))
}

/// Part 1 of upload `upload` of `object`, of value `value`, uploaded.
pub(crate) async fn upload_part(gateway: &Embedded, object: u64, upload: &str, value: u64) -> Result<CompletedPart, String> {
    let body = s3::body_of(value);
    let len = body.len();
    let input = UploadPartInput {
        bucket: s3::BUCKET.into(),
        key: s3::object_name(object),
        upload_id: upload.to_owned(),
        part_number: 1,
        content_length: Some(len as i64),
        body: Some(StreamingBlob::from(s3s::Body::from(body))),
        ..Default::default()
    };
    let mut request = Embedded::admin_request(input);
    request.headers.insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(len));
    let uploaded = gateway.s3().upload_part(request).await.map_err(|e| format!("uploading a part: {e}"))?;
    Ok(CompletedPart { e_tag: uploaded.output.e_tag, part_number: Some(1), ..Default::default() })
}

pub(crate) async fn complete(gateway: &Embedded, object: u64, (upload, part): &(String, CompletedPart)) -> Result<(), String> {
    let input = CompleteMultipartUploadInput {
        bucket: s3::BUCKET.into(),
        key: s3::object_name(object),
        upload_id: upload.clone(),
        multipart_upload: Some(CompletedMultipartUpload { parts: Some(vec![part.clone()]) }),
        ..Default::default()
    };
    gateway.s3().complete_multipart_upload(Embedded::admin_request(input)).await.map(drop).map_err(|e| e.to_string())
}

/// A completion that must fail with `code`.
pub(crate) async fn complete_fails(gateway: &Embedded, object: u64, upload: &(String, CompletedPart), code: S3ErrorCode) -> Result<(), String> {
    let input = CompleteMultipartUploadInput {
        bucket: s3::BUCKET.into(),
        key: s3::object_name(object),
        upload_id: upload.0.clone(),
        multipart_upload: Some(CompletedMultipartUpload { parts: Some(vec![upload.1.clone()]) }),
        ..Default::default()
    };
    match gateway.s3().complete_multipart_upload(Embedded::admin_request(input)).await {
        Err(e) if *e.code() == code => Ok(()),
        Err(e) => Err(format!("the completion of object {object} failed with {e}, not {code:?}")),
        Ok(_) => Err(format!("the completion of object {object} succeeded, where it should fail with {code:?}")),
    }
}

/// Sweeps until every intent has been watched for the grace and judged.
pub(crate) async fn sweep_past_grace(gateway: &Embedded) -> Result<(), String> {
    for pass in 0..3 {
        if pass > 0 {
            tokio::time::sleep(s3::GRACE + Duration::from_millis(100)).await;
        }
        gateway.sweep().await.map_err(|e| format!("sweep: {e}"))?;
    }
    Ok(())
}

/// Runs `script` against one gateway over three drives and a coordinator, no fault.
pub(crate) fn scripted<F, Fut>(seed: u64, script: F) -> Result<(), String>
where
    F: FnOnce(Store, Arc<Embedded>) -> Fut + 'static,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    scripted_with_disks(seed, |store, gateway, _| script(store, gateway))
}

/// `scripted`, the script given the drives' disks too (d0, d1, d2), for the faults it makes.
pub(crate) fn scripted_with_disks<F, Fut>(seed: u64, script: F) -> Result<(), String>
where
    F: FnOnce(Store, Arc<Embedded>, Vec<Arc<Disk>>) -> Fut + 'static,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    scripted_with_stalls(seed, Stalls::default(), script)
}

/// `scripted_with_disks`, the store's writes stalled as `stalls` says.
pub(crate) fn scripted_with_stalls<F, Fut>(seed: u64, stalls: Stalls, script: F) -> Result<(), String>
where
    F: FnOnce(Store, Arc<Embedded>, Vec<Arc<Disk>>) -> Fut + 'static,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let _turn = TURNS.lock();
    align_task_ids();
    spindle_cluster::clock::set_wall_clock(s3::wall_clock);
    s3::reset_skews();
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut sim = turmoil::Builder::new()
        .rng_seed(seed)
        .epoch(std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(SIM_EPOCH_SECS))
        .simulation_duration(LONGEST_CASE)
        .tick_duration(Duration::from_millis(1))
        .build();
    let etcd = etcd::Etcd::new(seed);
    let (members, disks): (Vec<String>, Vec<Arc<Disk>>) = add_drives(&mut sim, dir.path(), 3).into_iter().unzip();
    add_coordinator(&mut sim, &etcd, "k0", 0, seed);
    let outcome: Arc<Mutex<Option<Result<(), String>>>> = Arc::default();
    let out = outcome.clone();
    sim.client("script", async move {
        set_up(&etcd, "script", &members).await?;
        let store = open_store(&etcd, "script", seed, stalls).await;
        let gateway = Arc::new(s3::open(store.clone(), seed).await?);
        s3::ensure_bucket(&gateway).await;
        *out.lock() = Some(script(store, gateway, disks).await);
        Ok(())
    });
    sim.run().map_err(|e| format!("simulation: {e}"))?;
    let outcome = outcome.lock().take();
    outcome.unwrap_or_else(|| Err("the script did not finish".into()))
}
