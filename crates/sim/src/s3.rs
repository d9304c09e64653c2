//! Simulated S3 gateways: the gateway's own operations (`spindle_s3::Embedded`: PutObject,
//! GetObject, DeleteObject and its sweeper) on hosts of their own, each over its own cluster
//! client and with its wall clock skewed by an offset drawn from the seed. Objects are a few
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
use s3s::dto::{CreateBucketInput, DeleteObjectInput, GetObjectInput, HeadBucketInput, PutObjectInput, StreamingBlob};
use s3s::{S3ErrorCode, S3};
use spindle_cluster::history::{Event, Op};
use spindle_cluster::store::Store;
use spindle_s3::{Embedded, Kv};

use crate::workload::History;

/// The one bucket the gateways share.
const BUCKET: &str = "sim";
/// Objects' numbers in the history start here, above the key-value clients' keys.
pub const FIRST_OBJECT: u64 = 1 << 20;
/// Bytes per chunk: small, so that an object spans several.
const CHUNK: usize = 64;
/// An object is 8 bytes (its number) up to this many chunks.
const MOST_CHUNKS: usize = 8;
/// How long unreferenced data is kept, and how often each gateway sweeps.
pub const GRACE: Duration = Duration::from_secs(2);
const SWEEP_EVERY: Duration = Duration::from_millis(200);
/// The largest skew of a gateway's wall clock, either way: beyond the grace, so that one
/// gateway's sweeper judges another's uploads by a clock seconds ahead.
pub const MOST_SKEW_MS: i64 = 5_000;

thread_local! {
    /// Each skewed host's offset, by its tokio runtime (every turmoil host has its own).
    static SKEWS: RefCell<HashMap<tokio::runtime::Id, i64>> = RefCell::new(HashMap::new());
}

/// The simulated wall clock in Unix milliseconds, skewed on a gateway's host by its offset.
pub fn wall_clock() -> u64 {
    let now = turmoil::since_epoch().map_or(0, |d| d.as_millis() as u64);
    let skew = tokio::runtime::Handle::try_current().ok().and_then(|h| SKEWS.with(|s| s.borrow().get(&h.id()).copied()));
    now.saturating_add_signed(skew.unwrap_or(0))
}

/// Forgets the skews of an earlier run on this thread.
pub fn reset_skews() {
    SKEWS.with(|s| s.borrow_mut().clear());
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

fn object_name(object: u64) -> String {
    format!("object-{object}")
}

fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The whole body of the object numbered `n`: the number, then bytes that follow from it.
fn body_of(n: u64) -> Bytes {
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

fn now_micros() -> u64 {
    crate::etcd::now().as_micros() as u64
}

/// A gateway over `store`: creates the bucket if no other has, sweeps every second, and runs
/// `ops` operations, `workers` at a time. A GET that returns anything but a whole object
/// goes into `broken`.
#[allow(clippy::too_many_arguments, reason = "one gateway's settings, each a plain value")]
pub async fn gateway(store: Store, history: Arc<History>, writer: u64, objects: u64, ops: u64, workers: u64, seed: u64, skew_ms: i64, broken: Arc<Mutex<Option<String>>>) -> Result<(), spindle_s3::GatewayError> {
    skew_this_host(skew_ms);
    let gateway = Arc::new(open(store, seed).await?);
    loop {
        let head = HeadBucketInput { bucket: BUCKET.into(), ..Default::default() };
        if gateway.s3().head_bucket(Embedded::admin_request(head)).await.is_ok() {
            break;
        }
        let create = CreateBucketInput { bucket: BUCKET.into(), ..Default::default() };
        let _ = gateway.s3().create_bucket(Embedded::admin_request(create)).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let sweeper = {
        let gateway = gateway.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(SWEEP_EVERY).await;
                let _ = gateway.sweep().await;
            }
        })
    };
    let workers = workers.max(1);
    let runs = (0..workers).map(|w| {
        let share = ops / workers + u64::from(w < ops % workers);
        worker(gateway.clone(), history.clone(), (writer << 4) | w, objects, share, seed.wrapping_add(w.wrapping_mul(0x9e37_79b9)), broken.clone())
    });
    futures_util::future::join_all(runs).await;
    sweeper.abort();
    Ok(())
}

/// A gateway over `store`, drawing its data ids from `seed`. (The cluster's largest value is
/// a constant: opening asks no drive.)
async fn open(store: Store, seed: u64) -> Result<Embedded, spindle_s3::GatewayError> {
    Embedded::open(Kv::Cluster(store), CHUNK, GRACE, seed).await
}

async fn worker(gateway: Arc<Embedded>, history: Arc<History>, writer: u64, objects: u64, ops: u64, seed: u64, broken: Arc<Mutex<Option<String>>>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut n = 0u64;
    for _ in 0..ops {
        let object = rng.random_range(0..objects);
        let key = FIRST_OBJECT + object;
        let call = now_micros();
        match rng.random_range(0..10) {
            0..=4 => {
                n += 1;
                let v = (writer << 32) | n;
                let ok = put(&gateway, object, v).await;
                history.record(Event { key, op: Op::Write(Some(v)), call, ret: ok.then(now_micros) });
            }
            5 => {
                let input = DeleteObjectInput { bucket: BUCKET.into(), key: object_name(object), ..Default::default() };
                let ok = gateway.s3().delete_object(Embedded::admin_request(input)).await.is_ok();
                history.record(Event { key, op: Op::Write(None), call, ret: ok.then(now_micros) });
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

async fn put(gateway: &Embedded, object: u64, v: u64) -> bool {
    let body = body_of(v);
    let len = body.len();
    let input = PutObjectInput {
        bucket: BUCKET.into(),
        key: object_name(object),
        content_length: Some(body.len() as i64),
        body: Some(StreamingBlob::from(s3s::Body::from(body))),
        ..Default::default()
    };
    let mut request = Embedded::admin_request(input);
    // As an HTTP client declares it (the gateway refuses a PUT that does not).
    request.headers.insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(len));
    gateway.s3().put_object(request).await.is_ok()
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
async fn get(gateway: &Embedded, object: u64) -> Result<Option<Option<u64>>, String> {
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
        return Err(format!("a record references data {d:#x}, whose chunks are gone"));
    }
    // The checker's clock is the simulation's own: an intent stamped by a gateway whose clock
    // ran ahead is old by it once the grace and that skew have passed. Then a first pass
    // starts this gateway's watch of every intent, and a second, the grace later, collects.
    tokio::time::sleep(GRACE + Duration::from_millis(MOST_SKEW_MS as u64)).await;
    gateway.sweep().await.map_err(|e| format!("sweep: {e}"))?;
    tokio::time::sleep(GRACE).await;
    gateway.sweep().await.map_err(|e| format!("sweep: {e}"))?;
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
