//! The sweeper's side of `Core`: data that no record references any more (a replaced or
//! deleted object's, a crashed or abandoned upload's) is deleted once its intent is older than
//! the grace and this gateway has seen it unchanged for the grace, chunks first, then the
//! intent that accounts for them.

use std::collections::{BTreeSet, HashSet};

use bytes::Bytes;
use parking_lot::Mutex;
use futures_util::stream::{FuturesUnordered, StreamExt};
use s3s::S3Result;

use crate::kv::{Cond, Durability, KvError, Pages};
use crate::layout::{self, DataId};
use crate::objects::{Core, PAGE};
use crate::records::{self, Intent, Owner};

/// Data ids one sweep pass collects at once: each collect is a dozen round trips and a range
/// over every partition, mostly waiting.
const COLLECTS_AT_ONCE: usize = 8;

/// What one sweep pass remembers of its settles: the records settled, the groups of
/// replicas where a settle failed, and how much data that left for the next pass.
#[derive(Default)]
struct Settles {
    done: HashSet<Bytes>,
    failed: BTreeSet<u32>,
    skipped: u64,
}

impl Core {
    /// Whether the object's current record references `data` (an unreadable one is taken to:
    /// an operator may still repair it).
    async fn current_references(&self, owner: &Owner, data: DataId) -> S3Result<bool> {
        Ok(match self.kv.get(&layout::object(&owner.bucket, &owner.key)).await? {
            Some(s) => records::decode_manifest(&s.value).map_or(true, |m| m.references(data)),
            None => false,
        })
    }

    /// Whether any record still references `data`.
    async fn referenced(&self, owner: &Owner, data: DataId) -> S3Result<bool> {
        if self.current_references(owner, data).await? {
            return Ok(true);
        }
        // Kept versions of the key: an object's data stays as long as any version of it.
        let mut kept = Pages::new(layout::versions_of(&owner.bucket, &owner.key), PAGE);
        while let Some(keys) = kept.next(&self.kv).await? {
            for k in keys {
                if let Some(s) = self.kv.get(&k).await? {
                    if records::decode_manifest(&s.value).map_or(true, |m| m.references(data)) {
                        return Ok(true);
                    }
                }
            }
        }
        // Read again: a version moves between the current record and the kept ones by being
        // written at its new place before it leaves the old, so one of the three reads sees it.
        if self.current_references(owner, data).await? {
            return Ok(true);
        }
        if let Some((upload, number)) = owner.part {
            if self.kv.get(&layout::upload(&owner.bucket, &owner.key, upload)).await?.is_some() {
                if let Some(p) = self.kv.get(&layout::part(upload, number)).await? {
                    let part: records::PartRecord = records::decode("part", &p.value)?;
                    if part.segment.data == data {
                        return Ok(true);
                    }
                }
            }
            return Ok(false);
        }
        self.in_open_upload(owner, data).await
    }

    /// Whether a part of an upload of the owner's key still names `data`: the data of an
    /// object completed from an upload whose completion failed after its swap (its part
    /// records and upload left for a retry or for the stale-completion cleanup), released when
    /// that object was replaced. A retry of the completion may reference the data again; as
    /// for any other reference the intent goes, since however the upload ends it releases the
    /// data its object does not keep.
    async fn in_open_upload(&self, owner: &Owner, data: DataId) -> S3Result<bool> {
        let prefix = layout::upload_prefix(&owner.bucket);
        let mut uploads = Pages::new(layout::uploads_of(&owner.bucket, &owner.key), PAGE);
        while let Some(keys) = uploads.next(&self.kv).await? {
            for k in keys {
                let Some((_, id)) = layout::upload_of(&prefix, &k) else { continue };
                let mut parts = Pages::new(layout::parts(id, 0, u32::MAX), PAGE);
                while let Some(part_keys) = parts.next(&self.kv).await? {
                    for pk in part_keys {
                        let Some(p) = self.kv.get(&pk).await? else { continue };
                        let part: records::PartRecord = records::decode("part", &p.value)?;
                        if part.segment.data == data {
                            return Ok(true);
                        }
                    }
                }
            }
        }
        Ok(false)
    }

    /// The sweeper's step for one data id: drops the intent of referenced data, deletes the
    /// chunks of unreferenced data whose intent is older than the grace (any age with `now`),
    /// then its intent. Returns the chunks deleted.
    pub async fn collect(&self, data: DataId, now: bool) -> S3Result<u64> {
        self.collect_in(data, now, &Mutex::new(Settles::default())).await
    }

    /// `collect` within a pass, which settles each record at most once and, once a settle
    /// failed on a group of replicas (one did not answer), leaves the data whose records live
    /// there to the next pass.
    async fn collect_in(&self, data: DataId, now: bool, settles: &Mutex<Settles>) -> S3Result<u64> {
        let key = layout::intent(data);
        let Some(stored) = self.kv.get(&key).await? else { return Ok(0) };
        let intent: Intent = records::decode("intent", &stored.value)?;
        if !intent.doomed {
            let age = records::now_ms().saturating_sub(intent.touched_ms);
            if !now && (u128::from(age) < self.grace.as_millis() || !self.watched_for_grace(data, &stored.version)) {
                return Ok(0);
            }
            // A swap that references the data (of the object, or of a part's record) may stand
            // on a replica the reads below do not ask, and be chosen by a later read after the
            // chunks are gone: settled from every replica first, it is chosen now (and seen) or
            // can never be. Without every replica answering the data stays (the next pass
            // tries again, and a replica lost for good leaves the map when it is replaced).
            if intent.swapping {
                let mut records = vec![layout::object(&intent.owner.bucket, &intent.owner.key)];
                records.extend(intent.owner.part.map(|(upload, n)| layout::part(upload, n)));
                for record in records {
                    if !self.settle_once(record, settles).await? {
                        return Ok(0);
                    }
                }
            }
            if self.referenced(&intent.owner, data).await? {
                let _ = self.kv.delete(&key, Cond::Version(stored.version), Durability::Through).await;
                self.watched.lock().remove(&data);
                return Ok(0);
            }
            let doomed = Intent { doomed: true, ..intent };
            match self.kv.put(&key, records::encode(&doomed), Cond::Version(stored.version), Durability::Through).await {
                Ok(_) => {}
                // Refreshed meanwhile: an upload is alive after all.
                Err(KvError::Mismatch) => return Ok(0),
                Err(e) => return Err(e.into()),
            }
        }
        let (start, end) = layout::chunks(data);
        let mut deleted = 0;
        loop {
            let keys = self.kv.range(&start, &end, PAGE).await?;
            let last_page = keys.len() < PAGE;
            let mut deletes: FuturesUnordered<_> = keys.iter().map(|k| self.kv.delete(k, Cond::Any, Durability::Lazy)).collect();
            while let Some(r) = deletes.next().await {
                r?;
                deleted += 1;
            }
            // A short page was all there was (a range over every partition saved): a chunk an
            // upload still wrote after it lands on data now doomed, and is an orphan the
            // orphan scan takes (`orphans.rs`), as one landing after an empty page would be.
            if last_page {
                break;
            }
        }
        // Stripes in the erasure-coded and remote pools its id's tag names (a pool whose
        // drives are down, or a remote store that does not answer, holds up only the data
        // that may be in it).
        for pool in self.stripes.names(&self.kv).into_iter().filter(|p| layout::may_hold(p, data)) {
            deleted += self.stripes.delete_all(&self.kv, &pool, &data.to_be_bytes()).await?;
        }
        // The deletions are durable before the intent that accounts for the chunks goes.
        self.kv.flush().await?;
        self.kv.delete(&key, Cond::Any, Durability::Through).await?;
        self.watched.lock().remove(&data);
        Ok(deleted)
    }

    /// Settles `record` from every replica unless the pass did already; `false` (the data left
    /// for the next pass) where its group's replicas did not all answer in this pass.
    async fn settle_once(&self, record: Bytes, settles: &Mutex<Settles>) -> S3Result<bool> {
        let group = self.kv.group_of(&record);
        {
            let mut settles = settles.lock();
            if settles.done.contains(&record) {
                return Ok(true);
            }
            if group.is_some_and(|g| settles.failed.contains(&g)) {
                settles.skipped += 1;
                return Ok(false);
            }
        }
        // Two collects of the pass may settle one record at once: the same settle, twice.
        match self.kv.settle(&record).await {
            Ok(()) => {
                settles.lock().done.insert(record);
                Ok(true)
            }
            Err(e) => {
                settles.lock().failed.extend(group);
                Err(e.into())
            }
        }
    }

    /// Whether this gateway has seen the intent of `data` at `version`, unchanged, for the
    /// grace by its own clock. The intent's timestamp is another gateway's clock, which may run
    /// behind this one's by more than the grace: judged by it alone, an upload's intent
    /// refreshed just before its swap, or the release of data whose replacement has not landed
    /// yet, could be taken for an abandoned one.
    fn watched_for_grace(&self, data: DataId, version: &Bytes) -> bool {
        // Mutant: the sweeper trusts the clocks.
        if cfg!(feature = "mutant-intent") {
            return true;
        }
        let now = tokio::time::Instant::now();
        let mut watched = self.watched.lock();
        match watched.get(&data) {
            Some((seen, since)) if seen == version => now.duration_since(*since) >= self.grace,
            _ => {
                watched.insert(data, (version.clone(), now));
                false
            }
        }
    }

    /// One pass of the sweeper over every intent; returns (intents seen, chunks deleted).
    pub async fn sweep(&self) -> S3Result<(u64, u64)> {
        let mut pages = Pages::new(layout::intents(), PAGE);
        let (mut seen, mut deleted) = (0, 0);
        let mut met = HashSet::new();
        let settles = Mutex::new(Settles::default());
        while let Some(keys) = pages.next(&self.kv).await? {
            let page: Vec<DataId> = keys.iter().filter_map(|k| layout::intent_data(k)).collect();
            seen += page.len() as u64;
            met.extend(page.iter().copied());
            let settles = &settles;
            let mut collects = futures_util::stream::iter(page)
                .map(|data| async move { (data, self.collect_in(data, false, settles).await) })
                .buffer_unordered(COLLECTS_AT_ONCE);
            while let Some((data, collected)) = collects.next().await {
                match collected {
                    Ok(n) => deleted += n,
                    Err(e) => tracing::warn!(data = %format!("{data:032x}"), error = %e, "sweep: intent not collected"),
                }
            }
        }
        let settles = settles.into_inner();
        if settles.skipped > 0 {
            tracing::warn!(skipped = settles.skipped, groups = ?settles.failed, "sweep: data left to the next pass, its records not settled from every replica (one did not answer, or a write raced the settle)");
        }
        // What the store no longer holds is watched no more: the watch is as large as the
        // intents are many.
        self.watched.lock().retain(|d, _| met.contains(d));
        Ok((seen, deleted))
    }
}
