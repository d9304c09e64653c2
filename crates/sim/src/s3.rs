//! Simulated S3 gateways: the gateway's own operations (`spindle_s3::Embedded`: PutObject,
//! GetObject, DeleteObject and its sweeper) on hosts of their own, each over its own cluster
//! client and with its wall clock skewed by an offset drawn from the seed, crashing and
//! starting again at moments drawn from it. Objects are a few
//! chunks long and their bytes follow from a number unique in the run, so that a GET tells a
//! whole object from a mix of two or a cut one; each operation goes into the history as a
//! write or a read of that number (a delete writes "absent"). Once the cluster has settled,
//! every object must read whole, no record may reference data that is gone, and a sweep past
//! the grace must leave no data that no record references and no intent.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use s3s::dto::{
    AbortMultipartUploadInput, CompleteMultipartUploadInput, CompletedMultipartUpload, CompletedPart, CreateBucketInput, CreateMultipartUploadInput, DeleteObjectInput, ETag, ETagCondition, GetObjectInput,
    HeadBucketInput, PutObjectInput, PutObjectTaggingInput, StreamingBlob, Tag, Tagging, UploadPartInput,
};
use s3s::{S3ErrorCode, S3};
use spindle_cluster::history::{Event, Op};
use spindle_cluster::store::Store;
use spindle_s3::{Embedded, Kv};

use crate::workload::History;

/// The one bucket the gateways share.
pub(crate) const BUCKET: &str = "sim";
/// Objects' numbers in the history start here, above the key-value clients' keys.
pub const FIRST_OBJECT: u64 = 1 << 20;
/// Bytes per chunk: small, so that an object spans several.
const CHUNK: usize = 64;
/// An object is 8 bytes (its number) up to this many chunks.
const MOST_CHUNKS: usize = 8;
/// The least part of a multipart upload but the last (the embedded gateway's setting), and
/// the most parts an object is cut into.
const MIN_PART: usize = 40;
const MOST_PARTS: u64 = 4;
/// How long unreferenced data is kept, and how often each gateway sweeps.
pub const GRACE: Duration = Duration::from_secs(2);
const SWEEP_EVERY: Duration = Duration::from_millis(200);
/// Every this many sweeps, a gateway scans for orphaned data too, under the load and faults.
const SCAN_EVERY_SWEEPS: u64 = 10;
/// The largest skew of a gateway's wall clock, either way: beyond the grace, so that one
/// gateway's sweeper judges another's uploads by a clock seconds ahead.
pub const MOST_SKEW_MS: i64 = 5_000;

thread_local! {
    /// Each skewed host's offset, by its tokio runtime (every turmoil host has its own).
    static SKEWS: RefCell<HashMap<tokio::runtime::Id, i64>> = RefCell::new(HashMap::new());
    /// Data ids the run's orphan scans gave an intent: data a chunk write left behind after its
    /// data was collected (a hung drive's), or leaked by a defect; counted so that a run
    /// shows them rather than its sweeps quietly collecting them.
    static ORPHANS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The simulated wall clock in Unix milliseconds, skewed on a gateway's host by its offset.
pub fn wall_clock() -> u64 {
    let now = turmoil::since_epoch().map_or(0, |d| d.as_millis() as u64);
    let skew = tokio::runtime::Handle::try_current().ok().and_then(|h| SKEWS.with(|s| s.borrow().get(&h.id()).copied()));
    now.saturating_add_signed(skew.unwrap_or(0))
}

/// Forgets the skews and the orphan count of an earlier run on this thread.
pub fn reset_skews() {
    SKEWS.with(|s| s.borrow_mut().clear());
    ORPHANS.with(|o| o.set(0));
}

/// Orphaned data ids the run's scans have found so far.
pub fn orphans_found() -> u64 {
    ORPHANS.with(|o| o.get())
}

/// One orphan scan, its finds counted.
async fn scan(gateway: &Embedded) -> Result<(), String> {
    let scanned = gateway.scan_orphans(spindle_s3::SCAN_WINDOW).await.map_err(|e| format!("orphan scan: {e}"))?;
    ORPHANS.with(|o| o.set(o.get() + scanned.orphans));
    Ok(())
}

fn skew_this_host(ms: i64) {
    if let Ok(h) = tokio::runtime::Handle::try_current() {
        SKEWS.with(|s| s.borrow_mut().insert(h.id(), ms));
    }
}

/// A gateway's skew drawn from the run's seed.
pub fn skew_of(seed: u64, gateway: usize) -> i64 {
    StdRng::seed_from_u64(seed ^ 0x5ce3 ^ (gateway as u64) << 16).random_range(-MOST_SKEW_MS..=MOST_SKEW_MS)
}

pub(crate) fn object_name(object: u64) -> String {
    format!("object-{object}")
}

fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The whole body of the object numbered `n`: the number, then bytes that follow from it.
pub(crate) fn body_of(n: u64) -> Bytes {
    let len = 8 + (mix(n) % (MOST_CHUNKS * CHUNK - 7) as u64) as usize;
    let mut b = BytesMut::with_capacity(len);
    b.extend_from_slice(&n.to_be_bytes());
    b.extend((8..len).map(|i| mix(n ^ (i as u64) << 40) as u8));
    b.freeze()
}

/// The number of the object whose body `got` is, if it is one whole.
fn number_of(got: &[u8]) -> Result<u64, String> {
    let n = got.get(..8).and_then(|b| b.try_into().ok()).map(u64::from_be_bytes).ok_or_else(|| format!("a GET returned {} bytes, no object", got.len()))?;
    let whole = body_of(n);
    if got != &whole[..] {
        return Err(format!("a GET returned {} bytes starting as object {n:#x}, which has {}: not one whole object", got.len(), whole.len()));
    }
    Ok(n)
}

pub(crate) fn now_micros() -> u64 {
    crate::etcd::now().as_micros() as u64
}

/// The most times a gateway crashes in a run (with `Options::gateway_crashes`), how long each
/// of its lives lasts before that, and how long it stays down.
const MOST_CRASHES: u64 = 3;
const LIFE_MS: std::ops::Range<u64> = 300..4_000;
const DOWN_MS: std::ops::Range<u64> = 20..1_500;

/// What one gateway is: its history writer number, the objects it works on, its operations
/// and how many at a time, its seed and clock skew, and whether it crashes.
pub struct Plan {
    pub writer: u64,
    pub objects: u64,
    pub ops: u64,
    pub workers: u64,
    pub seed: u64,
    pub skew_ms: i64,
    pub crashes: bool,
    /// Some PUTs are multipart uploads.
    pub multipart: bool,
}

/// A gateway: creates the bucket if no other has, sweeps every `SWEEP_EVERY`, and runs the
/// plan's operations, its workers at a time. With crashes, a life of the gateway ends at a
/// moment drawn from the seed as a process's would: every request in flight and its sweeper
/// dropped wherever they stand (a write's outcome unknown), its cluster client with them;
/// after a while down it starts again over a new cluster client (`open_store`, given the
/// life's number) and goes on with the operations left. A GET that returns anything but a
/// whole object goes into `broken`; each crash goes into `crashed`.
pub async fn gateway<F, Fut>(open_store: F, history: Arc<History>, plan: Plan, broken: Arc<Mutex<Option<String>>>, crashed: Arc<Mutex<Vec<String>>>) -> Result<(), spindle_s3::GatewayError>
where
    F: Fn(u64) -> Fut,
    Fut: std::future::Future<Output = Store>,
{
    skew_this_host(plan.skew_ms);
    let workers = plan.workers.max(1);
    let states: Vec<Arc<Mutex<Worker>>> = (0..workers)
        .map(|w| {
            let left = plan.ops / workers + u64::from(w < plan.ops % workers);
            let rng = StdRng::seed_from_u64(plan.seed.wrapping_add(w.wrapping_mul(0x9e37_79b9)));
            Arc::new(Mutex::new(Worker { rng, writer: (plan.writer << 4) | w, n: 0, left }))
        })
        .collect();
    let mut lives = StdRng::seed_from_u64(plan.seed ^ 0xc4a5);
    for life in 0.. {
        // A new process: a cluster client and data ids of its own.
        let store = open_store(life).await;
        let gateway = Arc::new(open(store, plan.seed ^ mix(life)).await?);
        ensure_bucket(&gateway).await;
        let up = async {
            let runs = states.iter().map(|state| worker(gateway.clone(), history.clone(), plan.objects, plan.multipart, state.clone(), broken.clone()));
            futures_util::future::join_all(runs).await;
        };
        let sweeper = {
            let gateway = gateway.clone();
            tokio::spawn(async move {
                for pass in 1u64.. {
                    tokio::time::sleep(SWEEP_EVERY).await;
                    if pass % SCAN_EVERY_SWEEPS == 0 {
                        let _ = scan(&gateway).await;
                    }
                    let _ = gateway.sweep().await;
                }
            })
        };
        let ends = plan.crashes && life < MOST_CRASHES;
        let life_ms = lives.random_range(LIFE_MS);
        let down_ms = lives.random_range(DOWN_MS);
        let finished = if ends {
            // Biased: tokio's select otherwise polls its branches in an order of its own
            // random draw, and the run would not replay.
            tokio::select! {
                biased;
                () = up => true,
                () = tokio::time::sleep(Duration::from_millis(life_ms)) => false,
            }
        } else {
            up.await;
            true
        };
        sweeper.abort();
        if finished {
            return Ok(());
        }
        let left: u64 = states.iter().map(|s| s.lock().left).sum();
        crashed.lock().push(format!("{}: gateway writer {:#x} crashed ({left} operations left), down for {down_ms}ms", crate::etcd::now().as_millis(), plan.writer));
        drop(gateway);
        tokio::time::sleep(Duration::from_millis(down_ms)).await;
    }
    Ok(())
}

pub(crate) async fn ensure_bucket(gateway: &Embedded) {
    loop {
        let head = HeadBucketInput { bucket: BUCKET.into(), ..Default::default() };
        if gateway.s3().head_bucket(Embedded::admin_request(head)).await.is_ok() {
            return;
        }
        let create = CreateBucketInput { bucket: BUCKET.into(), ..Default::default() };
        let _ = gateway.s3().create_bucket(Embedded::admin_request(create)).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A gateway over `store`, drawing its data ids from `seed`. (The cluster's largest value is
/// a constant: opening asks no drive.)
pub(crate) async fn open(store: Store, seed: u64) -> Result<Embedded, spindle_s3::GatewayError> {
    Embedded::open(Kv::Cluster(store), CHUNK, MIN_PART as u64, GRACE, seed).await
}

/// One worker's course, kept across the gateway's crashes.
struct Worker {
    rng: StdRng,
    writer: u64,
    /// Values written so far.
    n: u64,
    /// Operations left.
    left: u64,
}

/// A write in flight: recorded with its return once it has one, and as of unknown outcome if
/// its future is dropped first (the gateway crashed under it).
struct Pending<'a> {
    history: &'a History,
    event: Option<Event>,
}

impl Pending<'_> {
    fn done(mut self, ok: bool) {
        if let Some(mut event) = self.event.take() {
            event.ret = ok.then(now_micros);
            self.history.record(event);
        }
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if let Some(event) = self.event.take() {
            self.history.record(event);
        }
    }
}

async fn worker(gateway: Arc<Embedded>, history: Arc<History>, objects: u64, multipart: bool, state: Arc<Mutex<Worker>>, broken: Arc<Mutex<Option<String>>>) {
    loop {
        let (object, choice, v) = {
            let mut w = state.lock();
            if w.left == 0 {
                return;
            }
            w.left -= 1;
            let object = w.rng.random_range(0..objects);
            let choice = w.rng.random_range(0..10);
            if choice <= 4 {
                w.n += 1;
            }
            (object, choice, (w.writer << 32) | w.n)
        };
        let key = FIRST_OBJECT + object;
        let call = now_micros();
        match choice {
            0..=4 => {
                let pending = Pending { history: &history, event: Some(Event { key, op: Op::Write(Some(v)), call, ret: None }) };
                let ok = if multipart && choice == 4 { put_in_parts(&gateway, object, v).await } else { put(&gateway, object, v).await };
                pending.done(ok);
            }
            5 => {
                let pending = Pending { history: &history, event: Some(Event { key, op: Op::Write(None), call, ret: None }) };
                pending.done(delete_or_error(&gateway, object).await.is_ok());
            }
            _ => match get(&gateway, object).await {
                Ok(Some(read)) => history.record(Event { key, op: Op::Read(read), call, ret: Some(now_micros()) }),
                Ok(None) => {}
                Err(wrong) => {
                    broken.lock().get_or_insert(wrong);
                }
            },
        }
    }
}

pub(crate) async fn put(gateway: &Embedded, object: u64, v: u64) -> bool {
    put_or_error(gateway, object, v).await.is_ok()
}

/// `put`, with the gateway's error.
pub(crate) async fn put_or_error(gateway: &Embedded, object: u64, v: u64) -> Result<(), s3s::S3Error> {
    put_if(gateway, object, v, None).await
}

/// A PutObject of object `v` as `object` on the condition given (If-Match, If-None-Match).
pub(crate) async fn put_if(gateway: &Embedded, object: u64, v: u64, condition: Option<PutCondition>) -> Result<(), s3s::S3Error> {
    let body = body_of(v);
    let len = body.len();
    let (if_match, if_none_match) = match condition {
        None => (None, None),
        Some(PutCondition::Match(etag)) => (Some(ETagCondition::ETag(ETag::Strong(etag))), None),
        Some(PutCondition::Absent) => (None, Some(ETagCondition::Any)),
    };
    let input = PutObjectInput {
        bucket: BUCKET.into(),
        key: object_name(object),
        content_length: Some(body.len() as i64),
        body: Some(StreamingBlob::from(s3s::Body::from(body))),
        if_match,
        if_none_match,
        ..Default::default()
    };
    let mut request = Embedded::admin_request(input);
    // As an HTTP client declares it (the gateway refuses a PUT that does not).
    request.headers.insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(len));
    gateway.s3().put_object(request).await.map(drop)
}

/// A multipart upload of object `v` as `object`: its body cut into up to `MOST_PARTS` parts
/// (where, drawn from `v`), uploaded one by one, then completed; aborted if a step fails.
async fn put_in_parts(gateway: &Embedded, object: u64, v: u64) -> bool {
    put_in_parts_or_error(gateway, object, v).await.is_ok()
}

/// `put_in_parts`, with the gateway's error (the first step's that failed).
pub(crate) async fn put_in_parts_or_error(gateway: &Embedded, object: u64, v: u64) -> Result<(), s3s::S3Error> {
    let body = body_of(v);
    let key = object_name(object);
    let create = CreateMultipartUploadInput { bucket: BUCKET.into(), key: key.clone(), ..Default::default() };
    let created = gateway.s3().create_multipart_upload(Embedded::admin_request(create)).await?;
    let upload = created.output.upload_id.ok_or_else(|| s3s::s3_error!(InternalError, "no upload id"))?;
    let mut cuts = vec![0];
    let mut rest = mix(v ^ 0x9a27);
    for _ in 1..MOST_PARTS {
        let at = cuts[cuts.len() - 1] + MIN_PART + (rest % (2 * MIN_PART as u64)) as usize;
        rest /= 2 * MIN_PART as u64;
        if at >= body.len() {
            break;
        }
        cuts.push(at);
    }
    cuts.push(body.len());
    let mut parts = Vec::new();
    for (i, w) in cuts.windows(2).enumerate() {
        let piece = body.slice(w[0]..w[1]);
        let len = piece.len();
        let number = i as i32 + 1;
        let input = UploadPartInput {
            bucket: BUCKET.into(),
            key: key.clone(),
            upload_id: upload.clone(),
            part_number: number,
            content_length: Some(len as i64),
            body: Some(StreamingBlob::from(s3s::Body::from(piece))),
            ..Default::default()
        };
        let mut request = Embedded::admin_request(input);
        request.headers.insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(len));
        match gateway.s3().upload_part(request).await {
            Ok(out) => parts.push(CompletedPart { e_tag: out.output.e_tag, part_number: Some(number), ..Default::default() }),
            Err(e) => {
                abort(gateway, &key, &upload).await;
                return Err(e);
            }
        }
    }
    let complete = CompleteMultipartUploadInput {
        bucket: BUCKET.into(),
        key: key.clone(),
        upload_id: upload.clone(),
        multipart_upload: Some(CompletedMultipartUpload { parts: Some(parts) }),
        ..Default::default()
    };
    gateway.s3().complete_multipart_upload(Embedded::admin_request(complete)).await.map(drop)
}

/// Aborts an upload (its parts left to the sweeper if the abort fails too).
async fn abort(gateway: &Embedded, key: &str, upload: &str) {
    let input = AbortMultipartUploadInput { bucket: BUCKET.into(), key: key.to_owned(), upload_id: upload.to_owned(), ..Default::default() };
    let _ = gateway.s3().abort_multipart_upload(Embedded::admin_request(input)).await;
}

/// A DeleteObject of `object`, with the gateway's error.
pub(crate) async fn delete_or_error(gateway: &Embedded, object: u64) -> Result<(), s3s::S3Error> {
    delete_if(gateway, object, None).await
}

/// A DeleteObject of `object`, If-Match `etag` when given.
pub(crate) async fn delete_if(gateway: &Embedded, object: u64, etag: Option<String>) -> Result<(), s3s::S3Error> {
    let if_match = etag.map(|t| ETagCondition::ETag(ETag::Strong(t)));
    let input = DeleteObjectInput { bucket: BUCKET.into(), key: object_name(object), if_match, ..Default::default() };
    gateway.s3().delete_object(Embedded::admin_request(input)).await.map(drop)
}

/// A PutObjectTagging of `object` with one tag of value `v`: its manifest rewritten in place.
pub(crate) async fn tag(gateway: &Embedded, object: u64, v: u64) -> Result<(), s3s::S3Error> {
    let tagging = Tagging { tag_set: vec![Tag { key: Some("n".into()), value: Some(v.to_string()) }] };
    let input = PutObjectTaggingInput::builder()
        .bucket(BUCKET.into())
        .key(object_name(object))
        .tagging(tagging)
        .build()
        .map_err(|e| s3s::s3_error!(InternalError, "a tagging request: {e}"))?;
    gateway.s3().put_object_tagging(Embedded::admin_request(input)).await.map(drop)
}

/// What a GET met.
enum Got {
    /// Object `n`, read whole, or no such key.
    Read(Option<u64>),
    /// No answer, or a body cut short (the data named, when a chunk of it was missing).
    Failed { missing: Option<String> },
}

/// A GET of `object`; `Err` for bytes that are no whole object, or for an object whose chunks
/// are gone while it is still the current one.
pub(crate) async fn get(gateway: &Embedded, object: u64) -> Result<Option<Option<u64>>, String> {
    match get_once(gateway, object).await? {
        Got::Read(n) => Ok(Some(n)),
        Got::Failed { missing: None } => Ok(None),
        // A reader may lose a replaced object's data to the sweeper (after the grace, by the
        // sweeping gateway's clock); the object read again must then be another one.
        Got::Failed { missing: Some(data) } => match get_once(gateway, object).await? {
            Got::Failed { missing: Some(again) } if again == data => Err(format!("object {object}: data {data}, which it still references, has lost chunks")),
            _ => Ok(None),
        },
    }
}

/// The data named by a gateway's "chunk N of data X is missing".
fn missing_in(text: &str) -> Option<String> {
    let (_, rest) = text.split_once(" of data ")?;
    rest.split_once(" is missing").map(|(data, _)| data.to_owned())
}

/// A PUT's condition.
pub(crate) enum PutCondition {
    /// If-Match: the object's ETag is this.
    Match(String),
    /// If-None-Match: *, no object there.
    Absent,
}

/// A GET of `object` read whole: its number and ETag, `None` for no such key.
pub(crate) async fn get_with_etag(gateway: &Embedded, object: u64) -> Result<Option<(u64, String)>, String> {
    let input = GetObjectInput { bucket: BUCKET.into(), key: object_name(object), ..Default::default() };
    let out = match gateway.s3().get_object(Embedded::admin_request(input)).await {
        Ok(out) => out.output,
        Err(e) if *e.code() == S3ErrorCode::NoSuchKey => return Ok(None),
        Err(e) => return Err(format!("object {object}: {e}")),
    };
    let etag = match out.e_tag {
        Some(ETag::Strong(t) | ETag::Weak(t)) => t,
        None => return Err(format!("object {object} read without an ETag")),
    };
    Ok(Some((number_read(out.body, || format!("object {object}")).await?, etag)))
}

/// The number of the object that version `id` of `object` holds, read whole.
pub(crate) async fn get_version(gateway: &Embedded, object: u64, id: &str) -> Result<u64, String> {
    let input = GetObjectInput { bucket: BUCKET.into(), key: object_name(object), version_id: Some(id.to_owned()), ..Default::default() };
    let out = gateway.s3().get_object(Embedded::admin_request(input)).await.map_err(|e| format!("version {id} of object {object}: {e}"))?.output;
    number_read(out.body, || format!("version {id} of object {object}")).await
}

/// The number of the object `body` holds, read whole; a failed read names `what` was read.
async fn number_read(body: Option<StreamingBlob>, what: impl Fn() -> String) -> Result<u64, String> {
    let mut got = BytesMut::new();
    if let Some(mut body) = body {
        while let Some(piece) = body.next().await {
            got.extend_from_slice(&piece.map_err(|e| format!("{}: {e}", what()))?);
        }
    }
    number_of(&got)
}

async fn get_once(gateway: &Embedded, object: u64) -> Result<Got, String> {
    let input = GetObjectInput { bucket: BUCKET.into(), key: object_name(object), ..Default::default() };
    let out = match gateway.s3().get_object(Embedded::admin_request(input)).await {
        Ok(out) => out.output,
        Err(e) if *e.code() == S3ErrorCode::NoSuchKey => return Ok(Got::Read(None)),
        Err(e) => return Ok(Got::Failed { missing: e.message().and_then(missing_in) }),
    };
    let mut got = BytesMut::new();
    if let Some(mut body) = out.body {
        while let Some(piece) = body.next().await {
            match piece {
                Ok(b) => got.extend_from_slice(&b),
                Err(e) => return Ok(Got::Failed { missing: missing_in(&e.to_string()) }),
            }
        }
    }
    number_of(&got).map(|n| Got::Read(Some(n)))
}

/// The checker's part once the cluster has settled: reads every object (into the history),
/// then, past the grace and every skew, sweeps and takes a census of the store's data.
pub async fn check_settled(store: Store, history: &History, objects: u64, seed: u64) -> Result<(), String> {
    let gateway = open(store, seed).await.map_err(|e| format!("a gateway over the settled cluster: {e}"))?;
    for object in 0..objects {
        let call = now_micros();
        match get(&gateway, object).await? {
            Some(read) => history.record(Event { key: FIRST_OBJECT + object, op: Op::Read(read), call, ret: Some(now_micros()) }),
            None => return Err(format!("a settled cluster failed to read object {object}")),
        }
    }
    let census = gateway.census().await.map_err(|e| format!("census: {e}"))?;
    if let Some(d) = census.missing().first() {
        let what = if census.in_parts.contains(d) { "an upload's part" } else { "an object" };
        return Err(format!("a record ({what}) references data {d:#x}, whose chunks are gone"));
    }
    // The checker's clock is the simulation's own: an intent stamped by a gateway whose clock
    // ran ahead is old by it once the grace and that skew have passed. An orphan scan gives
    // data nothing accounts for an intent (a chunk write that landed after its data was
    // collected); then a first pass starts this gateway's watch of every intent and finishes completions that crashed
    // (releasing their parts' data again: a new watch), a second, the grace later, collects
    // the rest, and a third, the grace after it, what the first released.
    tokio::time::sleep(GRACE + Duration::from_millis(MOST_SKEW_MS as u64)).await;
    scan(&gateway).await?;
    for pass in 0..3 {
        if pass > 0 {
            tokio::time::sleep(GRACE).await;
        }
        gateway.sweep().await.map_err(|e| format!("sweep: {e}"))?;
    }
    let census = gateway.census().await.map_err(|e| format!("census: {e}"))?;
    if let Some(d) = census.missing().first() {
        return Err(format!("after a sweep, a record references data {d:#x}, whose chunks are gone"));
    }
    if !census.unreferenced().is_empty() || !census.intents.is_empty() {
        return Err(format!(
            "a sweep past the grace left data no record references: {} data ids with chunks ({:x?}), {} intents",
            census.unreferenced().len(),
            census.unreferenced().iter().take(4).collect::<Vec<_>>(),
            census.intents.len()
        ));
    }
    Ok(())
}
