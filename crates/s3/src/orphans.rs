//! The orphan scan: data with chunks that neither an intent nor a record accounts for. A chunk
//! write whose upload took it for failed (no quorum answered in time) can still reach a drive
//! that held it, after the upload discarded its data and the sweeper dropped the intent; no
//! intent then leads the sweeper to it. The scan walks the chunks by data id, asks for each
//! id's intent, then walks every record that references data; an id none accounts for gets an
//! intent of its own, naming no object, which the sweeper judges as any other: after the grace
//! and its own watch, by compare-and-swap (anything that takes the data over changes it first).
//!
//! Why the walk cannot take referenced data for an orphan: data gains a reference only through
//! its intent (an upload's, dropped after the swap that references it; a part's, claimed by
//! the completion), so an id whose chunk was seen had its intent until a record referenced it,
//! and the intents are asked after the chunks. The records are walked in an order that meets a
//! reference moving while the walk goes on (`Core::walk_references`). Only the replicated chunks are
//! scanned; stripes of erasure-coded and remote pools are not.

use std::collections::BTreeSet;

use bytes::Bytes;
use s3s::S3Result;

use crate::kv::{Cond, Durability, KvError};
use crate::layout::{self, DataId};
use crate::objects::{Core, PAGE};
use crate::records::Owner;
use crate::references::WalkError;

/// Data ids without an intent held at once (16 bytes each): a scan walks the chunks a window
/// of this many such ids at a time (most are objects' data, which records reference), and
/// reads every referencing record once per window, so a store of up to this many objects is
/// scanned with one walk of its records.
pub const SCAN_WINDOW: usize = 1 << 20;

/// What one scan found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Scanned {
    /// Data ids with chunks that the scan walked.
    pub data: u64,
    /// Of those, the ones given an intent for the sweeper.
    pub orphans: u64,
}

impl Core {
    /// One scan for orphaned data (module comment), over every data id, `window` ids without an
    /// intent at a time (`SCAN_WINDOW` in service).
    pub async fn scan_orphans(&self, window: usize) -> S3Result<Scanned> {
        let mut scanned = Scanned::default();
        let (mut from, end) = layout::all_chunks();
        loop {
            let (ids, next) = self.unaccounted(from, &end, window.max(1), &mut scanned).await?;
            if !ids.is_empty() && !self.take_orphans(ids, &mut scanned).await? {
                return Ok(scanned);
            }
            match next {
                Some(next) => from = next,
                None => return Ok(scanned),
            }
        }
    }

    /// Gives an intent to each id of `window` that no record references (`walk_references`);
    /// `false` when a record does not decode (it may reference anything: the scan stops, nothing taken).
    async fn take_orphans(&self, mut window: BTreeSet<DataId>, scanned: &mut Scanned) -> S3Result<bool> {
        match self.walk_references(|r| {
            window.remove(&r.data);
        }).await {
            Ok(()) => {}
            Err(WalkError::Store(e)) => return Err(e.into()),
            Err(WalkError::Undecodable(e)) => {
                tracing::warn!(error = %e, "orphan scan: a record does not decode; nothing taken for orphaned");
                return Ok(false);
            }
        }
        let nobody = Owner { bucket: String::new(), key: String::new(), part: None };
        for data in window {
            // Collected since its chunks were seen (a sweeper deletes the chunks, then the
            // intent): nothing is left to take.
            let (start, end) = layout::chunks(data);
            if self.kv.range(&start, &end, 1).await?.is_empty() {
                continue;
            }
            // Absent only: an intent written since the walk accounts for the data already.
            match self.store_intent_if(data, &nobody, Cond::Absent, Durability::Through).await {
                Ok(_) => {
                    scanned.orphans += 1;
                    tracing::info!(data = %format!("{data:032x}"), "orphaned data found; left to the sweeper");
                }
                Err(KvError::Mismatch) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(true)
    }

    /// Data ids with chunks and no intent from the chunk key `from` on, `window` of them, and
    /// where the walk goes on (none: the chunks' end). The walk skips from each id to
    /// the next, so it asks once per id, not once per chunk.
    async fn unaccounted(&self, mut from: Bytes, end: &Bytes, window: usize, scanned: &mut Scanned) -> S3Result<(BTreeSet<DataId>, Option<Bytes>)> {
        let mut found = BTreeSet::new();
        loop {
            let keys = self.kv.range(&from, end, PAGE).await?;
            let ids: BTreeSet<DataId> = keys.iter().filter_map(|k| layout::chunk_data(k)).collect();
            for &data in &ids {
                scanned.data += 1;
                if self.kv.get(&layout::intent(data)).await?.is_none() {
                    found.insert(data);
                    if found.len() >= window {
                        return Ok((found, data.checked_add(1).map(|d| layout::chunk(d, 0))));
                    }
                }
            }
            match ids.last() {
                Some(&last) if keys.len() == PAGE && last < DataId::MAX => from = layout::chunk(last + 1, 0),
                _ => return Ok((found, None)),
            }
        }
    }
}
