//! Objects over the key-value store: data written as chunks under a fresh data id, a manifest
//! written last to make it visible, and every chunk accounted for by an intent until a record
//! references it (docs/design/s3-gateway.md).
//!
//! The rule that keeps objects whole: chunks are deleted only by `collect`, and only after it
//! has seen, with the intent's version unchanged, that no manifest, part or upload in progress
//! references them. An upload in progress refreshes its intent; replaced data is collected no
//! sooner than the grace after its replacement, so a reader streaming the old object finishes.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use bytes::Bytes;
use futures_util::stream::{FuturesUnordered, Stream, StreamExt};
use s3s::dto::StreamingBlob;
use s3s::{s3_error, S3Error, S3ErrorCode, S3Result};

use crate::chunker::Chunker;
use crate::kv::{Cond, Durability, Kv, KvError};
use crate::layout::{self, DataId};
use crate::md5_lanes::{Md5Lanes, Md5Stream};
use crate::swap::{Duels, Raced, Settled};
use crate::records::{self, Manifest, Owner, Segment, Versioning};

/// Chunks of one upload in flight to the store at once: enough to keep every replica busy,
/// few enough that an upload holds a handful of chunks in memory.
pub const PARALLEL_CHUNKS: usize = 4;
/// Chunks a reader fetches ahead of the one it sends.
pub const PREFETCH_CHUNKS: usize = 4;
/// Keys a sweep or a deletion asks for at once.
pub const PAGE: usize = 200;
/// Intents written at once when an object with many segments is replaced.
pub const RELEASES_AT_ONCE: usize = 16;
/// Data ids drawn for an upload to a pool, at most, to find one whose group has every drive
/// up: a few dozen when two drives of a pool eight wide for a 4+2 code are down (1 group in
/// 28 has neither), each a hash.
const READY_DRAWS: usize = 4096;
/// Attempts to replace a manifest that other writers keep replacing under us.
pub(crate) const COMMIT_ATTEMPTS: usize = 32;

pub struct Core {
    pub kv: Kv,
    /// Bytes per chunk: the store's largest value.
    pub chunk: usize,
    /// The least size of a multipart upload's parts but the last (S3's 5 MiB; less only where
    /// the gateway is embedded, for objects of a few hundred bytes cut into parts).
    pub min_part: u64,
    /// How long unreferenced data is kept: the longest a reader may stream an object that was
    /// replaced, and the longest an upload may stall between two pieces of its body.
    pub grace: Duration,
    /// Hashes the uploads' bytes for their ETags, many uploads at once.
    pub md5: Md5Lanes,
    /// The storage classes offered besides STANDARD, and their pools.
    pub classes: crate::classes::StorageClasses,
    /// Where the stripes of objects outside STANDARD go: erasure-coded and remote pools.
    pub stripes: crate::stripes::Stripes,
    /// Draws data, upload and version ids: from the system's entropy, or from a seed (the
    /// simulator's replays).
    pub ids: parking_lot::Mutex<rand::rngs::StdRng>,
    /// The sweeper's own watch: each intent it met, by the version it met, and since when by
    /// this gateway's clock (`sweeper.rs`).
    pub watched: parking_lot::Mutex<std::collections::HashMap<DataId, (Bytes, Instant)>>,
    /// Room for the tasks that look for marks failed completions may have left
    /// (`gateway::room_for_left_marks`).
    pub marks_looked_for: Arc<tokio::sync::Semaphore>,
    /// Writes and deletes of one object through this gateway take turns at its swap.
    pub turns: crate::swap::Turns,
}

/// One chunk's write in flight.
type ChunkPut<'a> = Pin<Box<dyn std::future::Future<Output = Result<Bytes, KvError>> + Send + 'a>>;

/// Data a commit will reference, with its intent's owner and version.
pub struct Own {
    pub data: DataId,
    pub owner: Owner,
    pub intent: Bytes,
}

/// Data written by `write_data`, not yet referenced by any record.
pub struct Written {
    pub segment: Segment,
    pub md5: [u8; 16],
    pub checksum: s3s::dto::Checksum,
    /// The version of the data's intent: the commit refreshes it.
    pub intent: Bytes,
}

/// A request body that could not be read: cut short, or not what its signature covers.
fn body_error(e: &(dyn std::error::Error + 'static)) -> S3Error {
    // s3s's stream error type is private: its message names the mismatch.
    if e.to_string().contains("Sha256Mismatch") {
        let mut err = S3Error::with_message(S3ErrorCode::Custom("XAmzContentSHA256Mismatch".into()), "The provided 'x-amz-content-sha256' header does not match what was computed.");
        err.set_status_code(http::StatusCode::BAD_REQUEST);
        return err;
    }
    s3_error!(IncompleteBody, "reading the request body: {e}")
}

fn internal(e: impl std::fmt::Display) -> S3Error {
    s3_error!(InternalError, "{e}")
}

impl From<records::RecordError> for S3Error {
    fn from(e: records::RecordError) -> Self {
        internal(e)
    }
}

impl Core {
    /// Streams `body` into chunks of a new data id owned by `owner`. On failure the chunks
    /// written so far are deleted (or left to the sweeper if that fails too).
    /// `pool`: the erasure-coded pool the chunks go to, each a stripe (none: the key-value
    /// store's replicated chunks).
    pub async fn write_data(&self, owner: &Owner, body: StreamingBlob, mut hasher: s3s::checksum::ChecksumHasher, max: u64, pool: Option<&str>) -> S3Result<Written> {
        let data = self.new_data(pool);
        let mut version = self.put_intent(data, owner, None).await?;
        let mut md5 = self.md5.stream();
        let result = self.write_chunks(data, pool, owner, &mut version, body, &mut md5, &mut hasher, max).await;
        // (write_chunks waits for every chunk it sent, also when it fails: a chunk landing after
        // the discard below would be left unaccounted for.)
        match result {
            Ok(size) => {
                let segment = Segment { data, size, chunk: self.chunk as u32 };
                Ok(Written { segment, md5: md5.finalize().await, checksum: hasher.finalize(), intent: version })
            }
            Err(e) => {
                self.discard(data, owner).await;
                Err(e)
            }
        }
    }

    /// Where an object written with the storage class `asked` keeps its data.
    pub fn class_of(&self, asked: Option<&str>) -> S3Result<records::Class> {
        let (storage_class, pool) = self.classes.resolve(asked)?;
        Ok(records::Class { storage_class, pool })
    }

    /// Before a swap's next try: a random wait if its last try dueled (`Duels::wait`).
    pub(crate) async fn back_off(&self, duels: &mut Duels) {
        if let Some(wait) = duels.wait(self.draw()) {
            tokio::time::sleep(wait).await;
        }
    }

    /// A random number from the gateway's own source (the system's entropy, or a seed that
    /// replays): data ids, upload ids, version ids.
    pub fn draw<T>(&self) -> T
    where
        rand::distr::StandardUniform: rand::distr::Distribution<T>,
    {
        rand::Rng::random(&mut *self.ids.lock())
    }

    /// A fresh data id; in a pool, one whose placement group has every drive up if any group
    /// has (a down drive fails every stripe of its groups until it is replaced).
    fn new_data(&self, pool: Option<&str>) -> DataId {
        let draw = || layout::tagged_data(self.draw(), pool);
        match pool {
            Some(p) => self.stripes.ready_name(&self.kv, p, READY_DRAWS, || draw().to_be_bytes()).map_or_else(draw, u128::from_be_bytes),
            None => draw(),
        }
    }

    #[allow(clippy::too_many_arguments, reason = "one upload's state, threaded through its loop")]
    async fn write_chunks(
        &self,
        data: DataId,
        pool: Option<&str>,
        owner: &Owner,
        version: &mut Bytes,
        mut body: StreamingBlob,
        md5: &mut Md5Stream<'_>,
        hasher: &mut s3s::checksum::ChecksumHasher,
        max: u64,
    ) -> S3Result<u64> {
        let mut in_flight: FuturesUnordered<ChunkPut<'_>> = FuturesUnordered::new();
        let result = self.fill_chunks(data, pool, owner, version, &mut body, md5, hasher, max, &mut in_flight).await;
        // Every chunk sent has landed (or failed) before this returns.
        let mut landed = Ok(());
        while let Some(r) = in_flight.next().await {
            if let Err(e) = r {
                landed = Err(e);
            }
        }
        let size = result?;
        landed?;
        // Chunks go to a drive written back; they are durable before anything references them.
        self.kv.flush().await?;
        Ok(size)
    }

    #[allow(clippy::too_many_arguments, reason = "one upload's state, threaded through its loop")]
    async fn fill_chunks<'a>(
        &'a self,
        data: DataId,
        pool: Option<&'a str>,
        owner: &Owner,
        version: &mut Bytes,
        body: &mut StreamingBlob,
        md5: &mut Md5Stream<'_>,
        hasher: &mut s3s::checksum::ChecksumHasher,
        max: u64,
        in_flight: &mut FuturesUnordered<ChunkPut<'a>>,
    ) -> S3Result<u64> {
        let refresh_every = self.grace / 4;
        let mut refreshed = Instant::now();
        let mut chunks = Chunker::new(self.chunk);
        let mut size: u64 = 0;
        let mut index: u32 = 0;
        let mut done = false;
        while !done {
            match body.next().await {
                Some(Ok(piece)) => {
                    size += piece.len() as u64;
                    if size > max {
                        return Err(s3_error!(EntityTooLarge, "the object is larger than {max} bytes"));
                    }
                    hasher.update(&piece);
                    chunks.push(piece);
                }
                Some(Err(e)) => return Err(body_error(&*e)),
                None => done = true,
            }
            while let Some(value) = chunks.next_chunk(done) {
                md5.update(value.clone()).await;
                let at = index;
                index = index.checked_add(1).ok_or_else(|| s3_error!(EntityTooLarge))?;
                in_flight.push(match pool {
                    Some(pool) => Box::pin(async move { self.stripes.put(&self.kv, pool, &data.to_be_bytes(), at, value).await.map(|()| Bytes::new()) }),
                    None => Box::pin(async move { self.kv.put(&layout::chunk(data, at), value, Cond::Any, Durability::Lazy).await }),
                });
                while in_flight.len() >= PARALLEL_CHUNKS {
                    if let Some(r) = in_flight.next().await {
                        r?;
                    }
                }
            }
            if refreshed.elapsed() >= refresh_every {
                *version = self.refresh(data, owner, version).await?;
                refreshed = Instant::now();
            }
        }
        Ok(size)
    }

    /// Deletes the data of an upload that failed before any record referenced it. The intent
    /// is written again first: the sweeper may have taken it while the upload stalled.
    pub async fn discard(&self, data: DataId, owner: &Owner) {
        let marked = self.put_intent(data, owner, None).await;
        if let Err(e) = marked.map_err(S3Error::from).and(Ok(())) {
            tracing::warn!(data = %format!("{data:032x}"), error = %e, "an abandoned upload's data could not be marked");
            return;
        }
        if let Err(e) = self.collect(data, true).await {
            tracing::warn!(data = %format!("{data:032x}"), error = %e, "an abandoned upload's data is left to the sweeper");
        }
    }

    /// Makes `manifest` the object `bucket/key` if `check` accepts the object it replaces
    /// (compare-and-swap on the manifest, retried while other writers race). `own`: the data
    /// the manifest references with its intents, refreshed just before the swap (so data the
    /// sweeper took is never referenced) and dropped after it. The replaced object is kept as
    /// a version where `versioning` says so (`versions`), and its data released otherwise.
    /// Returns the manifest as committed (its time and version id set by `Core::stamp`).
    ///
    /// A swap that raced another (`KvError::Contended`: some replicas took it) is settled by
    /// reading the object again (`Core::settle_race`).
    /// A raced swap may be chosen by another writer's round, which then releases our data: an
    /// intent found changed after a race is settled by the same reading, and is the sweeper's
    /// doing only if the replaced version is still there.
    #[allow(clippy::too_many_arguments, reason = "one write's object, rules and data")]
    pub async fn commit(
        &self,
        bucket: &str,
        key: &str,
        manifest: &Manifest,
        check: impl Fn(Option<&Manifest>) -> S3Result<()>,
        mut own: Vec<Own>,
        versioning: Option<Versioning>,
    ) -> S3Result<Manifest> {
        let object = layout::object(bucket, key);
        let owner = Owner { bucket: bucket.to_owned(), key: key.to_owned(), part: None };
        let mut raced: Option<Raced> = None;
        // An intent refresh that failed after a race, until a reading settles it.
        let mut unrefreshed: Option<KvError> = None;
        let _turn = self.turn_for(&object, &mut own).await?;
        let outcome: S3Result<Manifest> = async {
            let mut duels = Duels::default();
            for _ in 0..COMMIT_ATTEMPTS {
                self.back_off(&mut duels).await;
                let current = self.kv.get(&object).await?;
                if let Some(r) = &raced {
                    match self.settle_race(bucket, key, r, current.as_ref(), versioning).await? {
                        Settled::Took(i) => return self.committed(bucket, key, r.tried[i].0.clone(), versioning).await,
                        Settled::TryAgain => {}
                        Settled::StartOver => raced = None,
                        Settled::Unknown => match self.replaced_since(&mut own).await? {
                            // Which try took effect the intents do not say; the tries differ in
                            // their swap ids alone, or in their time while versioning is suspended.
                            Some(true) => return self.committed(bucket, key, r.tried.last().map(|(m, _)| m.clone()).unwrap_or_default(), versioning).await,
                            Some(false) => raced = None,
                            None => return Err(s3_error!(ServiceUnavailable, "the write raced others and whether it took effect cannot be known; read the object")),
                        },
                    }
                }
                if let Some(e) = unrefreshed.take() {
                    return Err(self.refresh_error(e));
                }
                let old = match &current {
                    Some(s) => Some(records::decode_manifest(&s.value)?),
                    None => None,
                };
                check(old.as_ref())?;
                let newest = self.newest_time(bucket, key, old.as_ref(), versioning).await?;
                let mut ours = Core::stamp(manifest, newest, versioning, self.draw());
                (ours.swap_id, ours.replaces) = (Some(self.draw()), old.as_ref().and_then(|o| o.swap_id));
                let value = records::encode(&ours);
                let refreshed = self.refresh_own(&own, Durability::Lazy, true).await;
                for (o, v) in own.iter_mut().zip(refreshed) {
                    match v {
                        Ok(v) => o.intent = v,
                        Err(e @ (KvError::Mismatch | KvError::Contended(_))) if raced.is_some() => unrefreshed = unrefreshed.or(Some(e)),
                        Err(e) => return Err(self.refresh_error(e)),
                    }
                }
                if unrefreshed.is_some() {
                    continue;
                }
                match &old {
                    // Kept before it is replaced: a crash in between leaves a copy, never a loss.
                    Some(old) if Core::keeps(old, versioning) => self.keep(bucket, key, old).await?,
                    Some(old) => {
                        let gone: Vec<DataId> = old.segments.iter().map(|s| s.data).filter(|d| !ours.references(*d)).collect();
                        self.release_all(gone, &owner).await?;
                    }
                    None => {}
                }
                let based = current.as_ref().map(|s| s.version.clone());
                let cond = current.map_or(Cond::Absent, |s| Cond::Version(s.version));
                match self.kv.put(&object, value.clone(), cond, Durability::Through).await {
                    Ok(_) => {
                        // A failure, or a crash losing these written-back deletions, leaves an intent
                        // the sweeper drops, seeing the data referenced.
                        let mut drops = futures_util::stream::iter(own)
                            .map(|o| async move { self.kv.delete(&layout::intent(o.data), Cond::Version(o.intent), Durability::Lazy).await })
                            .buffer_unordered(RELEASES_AT_ONCE);
                        while drops.next().await.is_some() {}
                        return self.committed(bucket, key, ours, versioning).await;
                    }
                    Err(KvError::Mismatch) => continue,
                    Err(KvError::Contended(_)) => {
                        duels.dueled();
                        let based_id = old.as_ref().and_then(|o| o.swap_id);
                        raced.get_or_insert_with(|| Raced { based, based_id, tried: Vec::new() }).tried.push((ours, value));
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            Err(s3_error!(SlowDown, "the object was replaced {COMMIT_ATTEMPTS} times while this write tried to replace it"))
        }
        .await;
        match outcome {
            // A swap that raced and is not settled may yet be chosen: whatever failed since,
            // its outcome is unknown, and its data is left to the sweeper (`Gateway::abandon`).
            Err(e) if raced.is_some() && *e.code() != S3ErrorCode::ServiceUnavailable => {
                tracing::info!(error = %e, "a write failed after its swap raced; answered as of unknown outcome");
                Err(s3_error!(ServiceUnavailable, "the write raced others and whether it took effect cannot be known; read the object"))
            }
            outcome => outcome,
        }
    }

    /// After a commit: a null version written while versioning is suspended replaces the
    /// null version kept from before.
    async fn committed(&self, bucket: &str, key: &str, ours: Manifest, versioning: Option<Versioning>) -> S3Result<Manifest> {
        if versioning == Some(Versioning::Suspended) {
            self.drop_kept_null(bucket, key, ours.modified_ms).await?;
        }
        Ok(ours)
    }

    /// The bytes `[start, end)` of an object made of `segments`, fetched a few chunks ahead
    /// by a task of their own; dropping the stream (the client went away) stops the task.
    /// `pool`: the erasure-coded pool its data is in, if any.
    pub fn read(self: &Arc<Self>, pool: Option<String>, segments: Vec<Segment>, start: u64, end: u64) -> Body {
        let core = self.clone();
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let task = tokio::spawn(async move {
            let pieces = Pieces { segments, at: 0, seg: 0, chunk: 0, start, end };
            let pool = pool.as_deref();
            let mut chunks = futures_util::stream::iter(pieces)
                .map(|p| {
                    let core = core.clone();
                    async move { core.fetch(pool, p).await }
                })
                .buffered(PREFETCH_CHUNKS);
            while let Some(chunk) = chunks.next().await {
                let failed = chunk.is_err();
                if tx.send(chunk).await.is_err() || failed {
                    break;
                }
            }
        });
        Body { rx, task, ready: VecDeque::new() }
    }

    /// A piece's bytes: one slice of a chunk, or the slices of a stripe's data shards (sent on
    /// as they came, not joined).
    async fn fetch(&self, pool: Option<&str>, p: Piece) -> Result<Vec<Bytes>, std::io::Error> {
        if let Some(pool) = pool {
            let stripe = self.stripes.get(&self.kv, pool, &p.data.to_be_bytes(), p.index, p.len).await.map_err(std::io::Error::other)?;
            return Ok(stripe.slice(p.lo, p.hi));
        }
        let got = self.kv.get(&layout::chunk(p.data, p.index)).await.map_err(std::io::Error::other)?;
        let Some(stored) = got else {
            return Err(std::io::Error::other(format!("chunk {} of data {:032x} is missing", p.index, p.data)));
        };
        if stored.value.len() < p.hi {
            return Err(std::io::Error::other(format!("chunk {} of data {:032x} is short", p.index, p.data)));
        }
        Ok(vec![stored.value.slice(p.lo..p.hi)])
    }
}

/// An object's bytes as an HTTP body.
pub struct Body {
    /// A chunk's bytes, or a stripe's as its data shards came.
    rx: tokio::sync::mpsc::Receiver<Result<Vec<Bytes>, std::io::Error>>,
    task: tokio::task::JoinHandle<()>,
    /// Bytes received and not yet handed on: the first piece's, read before the answer's
    /// status was chosen (`ready`), and the rest of a stripe's pieces.
    ready: VecDeque<Bytes>,
}

impl Body {
    /// The body once its first piece is read: a store that cannot serve the object (too few
    /// of its drives up) is answered with an error status, not a 200 and a cut-off body.
    pub async fn ready(mut self) -> S3Result<Body> {
        match self.rx.recv().await {
            Some(Ok(pieces)) => self.ready.extend(pieces),
            Some(Err(e)) => {
                return Err(match e.into_inner().map(|inner| inner.downcast::<KvError>()) {
                    Some(Ok(kv)) => S3Error::from(*kv),
                    Some(Err(other)) => internal(other),
                    None => internal("reading the object"),
                })
            }
            None => {}
        }
        Ok(self)
    }
}

impl Stream for Body {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<Self::Item>> {
        loop {
            if let Some(piece) = self.ready.pop_front() {
                return std::task::Poll::Ready(Some(Ok(piece)));
            }
            match std::task::ready!(self.rx.poll_recv(cx)) {
                Some(Ok(pieces)) => self.ready.extend(pieces),
                Some(Err(e)) => return std::task::Poll::Ready(Some(Err(e))),
                None => return std::task::Poll::Ready(None),
            }
        }
    }
}

impl Drop for Body {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One chunk's share of a read: bytes `lo..hi` of chunk `index` of `data`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Piece {
    data: DataId,
    index: u32,
    lo: usize,
    hi: usize,
    /// The whole chunk's length.
    len: usize,
}

/// The pieces covering `[start, end)` of an object, in order, computed as they are needed (a
/// large object has millions of chunks).
struct Pieces {
    segments: Vec<Segment>,
    /// Object offset of segment `seg`'s first byte.
    at: u64,
    seg: usize,
    chunk: u64,
    start: u64,
    end: u64,
}

impl Iterator for Pieces {
    type Item = Piece;

    fn next(&mut self) -> Option<Piece> {
        // An empty range has no pieces (not one empty piece of the chunk it falls in).
        if self.start >= self.end {
            return None;
        }
        loop {
            let s = *self.segments.get(self.seg)?;
            if self.at >= self.end {
                return None;
            }
            if self.chunk >= s.chunks() {
                self.at += s.size;
                self.seg += 1;
                self.chunk = 0;
                continue;
            }
            let size = u64::from(s.chunk);
            let chunk_start = self.at + self.chunk * size;
            if chunk_start >= self.end {
                return None;
            }
            let chunk_end = (chunk_start + size).min(self.at + s.size);
            let index = self.chunk as u32;
            self.chunk += 1;
            if chunk_end <= self.start {
                // Skip whole chunks before the range without a loop per chunk.
                let skip = (self.start - chunk_start) / size;
                self.chunk = (index as u64 + skip.max(1)).min(s.chunks());
                continue;
            }
            let lo = self.start.max(chunk_start) - chunk_start;
            let hi = self.end.min(chunk_end) - chunk_start;
            return Some(Piece { data: s.data, index, lo: lo as usize, hi: hi as usize, len: (chunk_end - chunk_start) as usize });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The pieces of a range, as (data, index, lo, hi), the slow way: byte by byte.
    fn by_bytes(segments: &[Segment], start: u64, end: u64) -> Vec<(DataId, u32, usize, usize)> {
        let mut out: Vec<(DataId, u32, usize, usize)> = Vec::new();
        let mut at = 0;
        for s in segments {
            for i in 0..s.size {
                let pos = at + i;
                if pos >= start && pos < end {
                    let index = (i / u64::from(s.chunk)) as u32;
                    let off = (i % u64::from(s.chunk)) as usize;
                    match out.last_mut() {
                        Some(last) if last.0 == s.data && last.1 == index => last.3 = off + 1,
                        _ => out.push((s.data, index, off, off + 1)),
                    }
                }
            }
            at += s.size;
        }
        out
    }

    proptest! {
        #[test]
        fn pieces_cover_exactly_the_range(sizes in proptest::collection::vec((0u64..40, 1u32..9), 1..6), a in 0u64..200, b in 0u64..200) {
            let segments: Vec<Segment> = sizes.iter().enumerate().map(|(i, &(size, chunk))| Segment { data: i as u128, size, chunk }).collect();
            let total: u64 = segments.iter().map(|s| s.size).sum();
            let (start, end) = (a.min(b).min(total), a.max(b).min(total));
            let got: Vec<_> = Pieces { segments: segments.clone(), at: 0, seg: 0, chunk: 0, start, end }
                .map(|p| (p.data, p.index, p.lo, p.hi)).collect();
            prop_assert_eq!(got, by_bytes(&segments, start, end));
        }
    }
}
