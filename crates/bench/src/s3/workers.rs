//! The timed phase's workers: each on its own connection, PUT, GET, STAT or DELETE back to
//! back until the deadline, every operation recorded by type.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};

use super::client::{S3Conn, S3Error, S3Signer};
use super::recorder::Recorder;
use super::spec::{Kind, S3BenchSpec, S3Op};

/// Distinct error messages kept as samples.
const ERROR_SAMPLES_MAX: usize = 5;

/// What every worker shares.
pub(super) struct Shared {
    pub(super) signer: S3Signer,
    pub(super) spec: S3BenchSpec,
    /// Random bytes: an object is a slice of it.
    pub(super) data: Bytes,
    pub(super) prefix: String,
    /// GET and mixed: the keys that exist.
    pub(super) pool: Mutex<Vec<String>>,
}

impl Shared {
    pub(super) fn body(&self, rng: &mut impl Rng) -> Bytes {
        let size = self.spec.object_bytes as usize;
        let offset = rng.random_range(0..=self.data.len() - size);
        self.data.slice(offset..offset + size)
    }

    fn pick(&self, rng: &mut impl Rng) -> Option<String> {
        let pool = self.pool.lock();
        (!pool.is_empty()).then(|| pool[rng.random_range(0..pool.len())].clone())
    }
}

/// What a worker did.
pub(super) struct WorkerOut {
    pub(super) recorders: Vec<Recorder>,
    /// Keys it created (to delete afterwards).
    pub(super) created: Vec<String>,
    pub(super) samples: Vec<String>,
}

pub(super) fn note_error(samples: &mut Vec<String>, e: &dyn std::fmt::Display) {
    let text = e.to_string();
    if samples.len() < ERROR_SAMPLES_MAX && !samples.contains(&text) {
        samples.push(text);
    }
}

/// One worker of the timed phase: operations back to back until the deadline.
pub(super) async fn worker(shared: Arc<Shared>, id: usize, start: Instant, deadline: Instant) -> WorkerOut {
    let spec = &shared.spec;
    let mut rng = rand::rngs::StdRng::seed_from_u64(spec.seed.wrapping_mul(0x9E37_79B9).wrapping_add(id as u64 + 1));
    let mut conn = S3Conn::new(shared.signer.clone());
    let mut out = WorkerOut { recorders: Kind::ALL.iter().map(|_| Recorder::new()).collect(), created: Vec::new(), samples: Vec::new() };
    let mut n = 0u64;
    while Instant::now() < deadline {
        let kind = match spec.op {
            S3Op::Put => Kind::Put,
            S3Op::Get => Kind::Get,
            S3Op::Mixed => spec.mix.pick(rng.random_range(0..spec.mix.total())),
        };
        let from = start.elapsed().as_secs_f64();
        let result: Result<(u64, Option<Duration>), S3Error> = match kind {
            Kind::Put => {
                let key = format!("{}/w{id:03}/{n:09}", shared.prefix);
                n += 1;
                let r = conn.upload(&key, shared.body(&mut rng), spec.multipart_bytes).await;
                if r.is_ok() {
                    if spec.op == S3Op::Mixed {
                        shared.pool.lock().push(key.clone());
                    }
                    out.created.push(key);
                }
                r.map(|()| (spec.object_bytes, None))
            }
            Kind::Get | Kind::Stat => {
                let Some(key) = shared.pick(&mut rng) else { break };
                let r = if kind == Kind::Get {
                    conn.get_object(&key, None, |_| {}).await.map(|t| (t.bytes, Some(t.first_byte)))
                } else {
                    conn.head_object(&key).await.map(|_| (0, None))
                };
                // In the mixed workload a key may be deleted between the pick and the read:
                // not a server error, and not an operation either.
                if matches!(&r, Err(e) if e.status() == Some(super::client::StatusCode::NOT_FOUND)) && !shared.pool.lock().contains(&key) {
                    continue;
                }
                r
            }
            Kind::Delete => {
                let key = {
                    let mut pool = shared.pool.lock();
                    if pool.len() <= 1 {
                        continue;
                    }
                    let i = rng.random_range(0..pool.len());
                    pool.swap_remove(i)
                };
                conn.delete_object(&key).await.map(|()| (0, None))
            }
        };
        let to = start.elapsed().as_secs_f64();
        let rec = &mut out.recorders[kind as usize];
        match result {
            Ok((bytes, ttfb)) => rec.done(from, to, bytes, ttfb),
            Err(e) => {
                rec.errors += 1;
                note_error(&mut out.samples, &e);
            }
        }
    }
    out
}
