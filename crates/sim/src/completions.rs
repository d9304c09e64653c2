//! Completions of one multipart upload sent again while the first is still under way, as a
//! client whose first CompleteMultipartUpload timed out sends it again (an SDK retries), with
//! a PUT of the same key racing them. However the copies interleave, the upload becomes one
//! object once: every copy that succeeds answers the same version, a bucket with versioning
//! keeps exactly one version of it, and no two versions share data (deleting one leaves the
//! others whole).

use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use s3s::dto::{CompleteMultipartUploadInput, CompletedMultipartUpload, CompletedPart, DeleteObjectInput, ListObjectVersionsInput};
use s3s::{S3ErrorCode, S3};
use spindle_s3::Embedded;

use bytes::Bytes;
use spindle_cluster::store::{Condition, Store};

use crate::cases::{complete, complete_fails, enable_versioning, intent_record, part_intent, records, scripted, scripted_with_disks, sweep_past_grace, upload_one_part, upload_part, uploads_of, PART};
use crate::minority::first_replica;
use crate::s3;

/// Uploads completed one after another, each by several copies of its completion.
const UPLOADS: u64 = 6;
const COPIES: usize = 3;
/// The copies (and the racing PUT) start within this long of each other.
const SPREAD_MS: u64 = 120;
/// Times a copy is sent again when answered SlowDown, 503 or 500, as an SDK does, and the
/// wait before each.
const RESENDS: u32 = 6;
const RESEND_AFTER: Duration = Duration::from_millis(300);
/// The racing PUTs' values, above the uploads'.
const PUT_VALUES: u64 = 1_000;

/// `retried_completions` in a bucket without versioning: the key ends as one whole object,
/// and after the sweeps only its data is stored, with no intent and no upload's part left.
pub fn retried_completions_of_one_upload(seed: u64) -> Result<(), String> {
    retried_completions(seed, false)
}

/// `retried_completions` in a bucket with versioning: each upload is exactly one version,
/// which every copy that succeeded answered, each PUT another; with every other version
/// deleted and the data swept, the rest read whole.
pub fn retried_completions_of_one_versioned_upload(seed: u64) -> Result<(), String> {
    retried_completions(seed, true)
}

/// A completion in a bucket with versioning whose swap took effect though it answered 5xx
/// (the upload given back, noted as of unknown outcome: the records are put back so), then
/// its object replaced by a PUT, which keeps it as a version. The completion sent again must
/// answer that version rather than swap the upload in a second time.
pub fn a_versioned_completion_failed_after_its_swap(seed: u64) -> Result<(), String> {
    scripted(seed, move |store, gateway| async move {
        enable_versioning(&gateway).await?;
        let upload = upload_one_part(&gateway, 0, 1).await?;
        let id = u128::from_str_radix(&upload.0, 16).map_err(|e| format!("upload id {}: {e}", upload.0))?;
        let mut kept = records(&store, &uploads_of(0)).await?;
        let text = String::from_utf8(kept[0].1.to_vec()).map_err(|e| format!("upload record: {e}"))?;
        kept[0].1 = Bytes::from(format!("{{\"swap_unknown\":true,{}", &text[1..]));
        kept.extend(records(&store, &[PART, &id.to_be_bytes()].concat()).await?);
        let first = complete_resending(&gateway, &upload).await.map_err(|e| format!("the completion failed: {e}"))?;
        for (key, value) in kept {
            store.put(&key, value, Condition::Absent).await.map_err(|e| format!("putting a record back: {e}"))?;
        }
        s3::put_or_error(&gateway, 0, 2).await.map_err(|e| format!("the PUT failed: {e}"))?;
        let again = complete_resending(&gateway, &upload).await.map_err(|e| format!("the completion sent again failed: {e}"))?;
        if again != first {
            return Err(format!("the completion sent again answered version {again:?}, the first {first:?}"));
        }
        versions_each_once(&gateway, &[(1, first), (2, None)]).await?;
        let census = gateway.census().await.map_err(|e| format!("census: {e}"))?;
        if !census.missing().is_empty() || census.stored != census.referenced || !census.in_parts.is_empty() || !census.intents.is_empty() {
            return Err(format!("after the completions and the sweeps: {census:?}"));
        }
        Ok(())
    })
}

/// A completion whose mark on its upload's record reached one replica only, the two other
/// drives full (NO_SPACE): it fails, and whether its mark stands is unknown. Once the drives
/// have room again and a read chooses the mark, one replica out of the gateway's reach, the
/// mark must not hold the upload: a
/// completion sent again waited for it and answered SlowDown, and after the grace the
/// stale-completion cleanup would have aborted the upload. The gateway gives such a mark back
/// once it can settle the record, and the completion sent again makes the object.
pub fn a_completion_mark_left_on_one_replica(seed: u64) -> Result<(), String> {
    scripted_with_disks(seed, |store, gateway, disks| async move {
        let upload = upload_one_part(&gateway, 0, 1).await?;
        let (key, _) = records(&store, &uploads_of(0)).await?.remove(0);
        // The first replica in the map's order keeps the mark.
        let (kept, first) = first_replica(&store, &key).await?;
        let full: Vec<&Arc<crate::disk::Disk>> = (0..disks.len()).filter(|i| format!("d{i}") != kept).map(|i| &disks[i]).collect();
        // The two others have room for everything but the mark (the upload record with a
        // completing mark: a write of it refused NO_SPACE, as by a disk whose room is almost
        // gone), so that its round's promises go through and its accept stands on one.
        let refusal: crate::disk::Refusal = Arc::new(|_, value| marked(value));
        for disk in &full {
            disk.refuse_puts(Some(refusal.clone()));
        }
        let failed = complete(&gateway, 0, &upload).await;
        let since = tokio::time::Instant::now();
        let dkey = spindle_cluster::map::drive_key(store.map().partition_of(&key), &key);
        let on_first = first.get(&dkey).await.map_err(|e| format!("reading {kept}: {e}"))?.map(|e| e.value).unwrap_or_default();
        for disk in &full {
            disk.refuse_puts(None);
        }
        if failed.is_ok() {
            return Err("the completion succeeded with two of three drives full".into());
        }
        if !marked(&on_first) {
            return Err(format!("the failed completion's mark did not reach {kept} ({failed:?}): the case does not reach its state"));
        }
        // The last replica is cut off from the gateway for a while: no settle from every
        // replica can be made. A read of the two others chooses the mark (if the gateway has
        // not given it back already), and it must be gone well within the grace (simulated
        // time: the grace here is seconds, a deployment's minutes), no completion taking it over.
        let map = store.map();
        let cut = map.replicas_of(map.partition_of(&key)).last().cloned().ok_or("no replicas")?;
        turmoil::partition("script", cut.as_str());
        store.get(&key).await.map_err(|e| format!("reading the upload record: {e}"))?;
        mark_gone(&store, &key, since).await?;
        turmoil::repair("script", cut.as_str());
        completes_value_1(&gateway, &upload).await.map_err(|e| format!("the completion sent again: {e}"))?;
        sweep_past_grace(&gateway).await?;
        let census = gateway.census().await.map_err(|e| format!("census: {e}"))?;
        if !census.missing().is_empty() || census.stored != census.referenced || !census.in_parts.is_empty() || !census.intents.is_empty() {
            return Err(format!("after the completion and the sweeps: {census:?}"));
        }
        Ok(())
    })
}

/// A completion that took its upload and then failed (its part's data doomed by the sweeper:
/// InvalidPart), whose give-back of the upload no drive took (each refuses, NO_SPACE, a write
/// of the record without a mark). Its mark, its own and standing, must not hold the upload
/// once the drives take writes again: the gateway gives it back, and the part uploaded again
/// completes. Before, the mark stayed until the grace.
pub fn a_completion_give_back_refused(seed: u64) -> Result<(), String> {
    scripted_with_disks(seed, |store, gateway, disks| async move {
        let upload = upload_one_part(&gateway, 0, 1).await?;
        let intent = part_intent(&store, &upload.0).await?;
        store.put(&intent, intent_record(0, true), Condition::Absent).await.map_err(|e| format!("dooming the intent: {e}"))?;
        let (key, _) = records(&store, &uploads_of(0)).await?.remove(0);
        let dkey = spindle_cluster::map::drive_key(store.map().partition_of(&key), &key);
        // Each drive, once it took the mark, refuses the record without one.
        for disk in &disks {
            let (dkey, took_mark) = (dkey.clone(), Arc::new(std::sync::atomic::AtomicBool::new(false)));
            disk.refuse_puts(Some(Arc::new(move |k, value| {
                if k != dkey.as_ref() {
                    return false;
                }
                let mark = marked(value);
                if mark {
                    took_mark.store(true, std::sync::atomic::Ordering::Relaxed);
                }
                !mark && took_mark.load(std::sync::atomic::Ordering::Relaxed)
            })));
        }
        let failed = complete_fails(&gateway, 0, &upload, S3ErrorCode::InvalidPart).await;
        let since = tokio::time::Instant::now();
        for disk in &disks {
            disk.refuse_puts(None);
        }
        failed?;
        mark_gone(&store, &key, since).await?;
        let again = upload_part(&gateway, 0, &upload.0, 1).await?;
        completes_value_1(&gateway, &(upload.0.clone(), again)).await.map_err(|e| format!("the completion after the part was uploaded again: {e}"))
    })
}

/// Whether a stored upload record carries a completing mark (the field is left out of one
/// without: crates/s3/src/records.rs).
fn marked(value: &[u8]) -> bool {
    value.windows(12).any(|w| w == b"\"completing\"")
}

/// `upload` of object 0 completed, and object 0 then reading value 1.
async fn completes_value_1(gateway: &Embedded, upload: &(String, CompletedPart)) -> Result<(), String> {
    complete(gateway, 0, upload).await.map_err(|e| format!("failed: {e}"))?;
    match s3::get(gateway, 0).await? {
        Some(Some(1)) => Ok(()),
        other => Err(format!("object 0 reads {other:?}, not value 1")),
    }
}

/// Waits, reading the upload record at `key`, for its mark to go: within half the grace of
/// `since`, when the failed completion's answer came (simulated time: the grace here is
/// seconds, a deployment's minutes).
async fn mark_gone(store: &Store, key: &[u8], since: tokio::time::Instant) -> Result<(), String> {
    loop {
        let record = store.get(key).await.map_err(|e| format!("reading the upload record: {e}"))?.ok_or("the upload record is gone")?;
        if !marked(&record.value) {
            return Ok(());
        }
        if since.elapsed() >= s3::GRACE / 2 {
            return Err(format!("the failed completion's mark still holds the upload {:?} after it failed", since.elapsed()));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn retried_completions(seed: u64, versioned: bool) -> Result<(), String> {
    scripted(seed, move |_store, gateway| async move {
        if versioned {
            enable_versioning(&gateway).await?;
        }
        let mut rng = StdRng::seed_from_u64(seed ^ 0x0c0e_7e7e);
        // (value, version id) of every completion and PUT acknowledged.
        let mut acknowledged: Vec<(u64, Option<String>)> = Vec::new();
        for u in 0..UPLOADS {
            let value = 1 + u;
            let upload = Arc::new(upload_one_part(&gateway, 0, value).await?);
            let copies: Vec<_> = (0..COPIES)
                .map(|_| {
                    let (gateway, upload, after) = (gateway.clone(), upload.clone(), Duration::from_millis(rng.random_range(0..SPREAD_MS)));
                    tokio::spawn(async move {
                        tokio::time::sleep(after).await;
                        complete_resending(&gateway, &upload).await
                    })
                })
                .collect();
            let put = rng.random_bool(0.5).then(|| {
                let (gateway, after) = (gateway.clone(), Duration::from_millis(rng.random_range(0..SPREAD_MS)));
                tokio::spawn(async move {
                    tokio::time::sleep(after).await;
                    s3::put_or_error(&gateway, 0, PUT_VALUES + u).await
                })
            });
            let mut answered: Vec<Option<String>> = Vec::new();
            for c in copies {
                match c.await.map_err(|e| format!("a completion: {e}"))? {
                    Ok(version) => answered.push(version),
                    // A copy sent after the upload ended, its object replaced since.
                    Err(e) if *e.code() == S3ErrorCode::NoSuchUpload => {}
                    Err(e) => return Err(format!("a completion of upload {u} failed: {e}")),
                }
            }
            match answered.first() {
                None => return Err(format!("no completion of upload {u} succeeded")),
                Some(first) if answered.iter().any(|a| a != first) => return Err(format!("the completions of upload {u} answered versions {answered:?}")),
                Some(first) => acknowledged.push((value, first.clone())),
            }
            if let Some(put) = put {
                put.await.map_err(|e| format!("a PUT: {e}"))?.map_err(|e| format!("the PUT beside upload {u} failed: {e}"))?;
                acknowledged.push((PUT_VALUES + u, None));
            }
        }
        if versioned {
            versions_each_once(&gateway, &acknowledged).await?;
        } else if s3::get(&gateway, 0).await?.flatten().is_none() {
            return Err("the object does not read whole".into());
        }
        sweep_past_grace(&gateway).await?;
        let census = gateway.census().await.map_err(|e| format!("census: {e}"))?;
        if !census.missing().is_empty() || census.stored != census.referenced || !census.in_parts.is_empty() || !census.intents.is_empty() {
            return Err(format!("after the completions and the sweeps: {census:?}"));
        }
        Ok(())
    })
}

/// Every acknowledged write is one version, the completions' under the id they answered;
/// every other version deleted and the sweeps past, the others still read whole.
async fn versions_each_once(gateway: &Embedded, acknowledged: &[(u64, Option<String>)]) -> Result<(), String> {
    let input = ListObjectVersionsInput { bucket: s3::BUCKET.into(), ..Default::default() };
    let listed = gateway.s3().list_object_versions(Embedded::admin_request(input)).await.map_err(|e| format!("listing versions: {e}"))?.output;
    let mut versions: Vec<(u64, String)> = Vec::new();
    for v in listed.versions.unwrap_or_default() {
        let id = v.version_id.ok_or("a version without an id")?;
        versions.push((s3::get_version(gateway, 0, &id).await?, id));
    }
    let mut kept: Vec<u64> = versions.iter().map(|(n, _)| *n).collect();
    kept.sort_unstable();
    let mut written: Vec<u64> = acknowledged.iter().map(|(n, _)| *n).collect();
    written.sort_unstable();
    if kept != written {
        return Err(format!("versions of {kept:?}, where the acknowledged writes were {written:?}"));
    }
    for (n, answered) in acknowledged {
        if let Some(id) = answered {
            if !versions.iter().any(|(m, v)| m == n && v == id) {
                return Err(format!("upload {n} was answered as version {id}, which holds another object"));
            }
        }
    }
    for (_, id) in versions.iter().step_by(2) {
        let input = DeleteObjectInput { bucket: s3::BUCKET.into(), key: s3::object_name(0), version_id: Some(id.clone()), ..Default::default() };
        gateway.s3().delete_object(Embedded::admin_request(input)).await.map_err(|e| format!("deleting version {id}: {e}"))?;
    }
    sweep_past_grace(gateway).await?;
    for (n, id) in versions.iter().skip(1).step_by(2) {
        let read = s3::get_version(gateway, 0, id).await?;
        if read != *n {
            return Err(format!("version {id} reads {read}, not {n}"));
        }
    }
    Ok(())
}

/// A completion of `upload`'s one part, sent again while answered as of unknown outcome or
/// busy; the version it answered.
async fn complete_resending(gateway: &Embedded, (upload, part): &(String, CompletedPart)) -> Result<Option<String>, s3s::S3Error> {
    let mut sent = 0;
    loop {
        let input = CompleteMultipartUploadInput {
            bucket: s3::BUCKET.into(),
            key: s3::object_name(0),
            upload_id: upload.clone(),
            multipart_upload: Some(CompletedMultipartUpload { parts: Some(vec![part.clone()]) }),
            ..Default::default()
        };
        match gateway.s3().complete_multipart_upload(Embedded::admin_request(input)).await {
            Ok(out) => return Ok(out.output.version_id),
            Err(e) if sent < RESENDS && matches!(e.code(), S3ErrorCode::SlowDown | S3ErrorCode::ServiceUnavailable | S3ErrorCode::InternalError) => {
                sent += 1;
                tokio::time::sleep(RESEND_AFTER * sent).await;
            }
            Err(e) => return Err(e),
        }
    }
}
