//! The put/get benchmark against Spindle's engine in this process: the same key orders, value
//! sizes and concurrency (`connections` x `depth` requests in flight), without protocol or
//! network, so a side-by-side run shows what those cost.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use spindle_engine::{Check, Engine, Meta, WriteOp, WriteRequest};

use crate::{new_histogram, summarize, BenchError, BenchResult, BenchSpec, KeyOrder, Operation, Work};
use spindle_client::Synchronization;

pub async fn run(engine: Arc<dyn Engine>, spec: BenchSpec) -> Result<BenchResult, BenchError> {
    let mut order: Vec<u64> = (0..spec.count).collect();
    if spec.order == KeyOrder::Random {
        order.shuffle(&mut rand::rngs::StdRng::seed_from_u64(spec.seed));
    }
    let work = Arc::new(Work { order, next: Default::default(), value: Bytes::from(vec![0x5a; spec.value_size]), spec: spec.clone() });
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..spec.connections * spec.depth {
        let (engine, work) = (engine.clone(), work.clone());
        tasks.push(tokio::spawn(async move {
            let spec = &work.spec;
            let mut hist = new_histogram();
            let mut errors = 0u64;
            loop {
                let i = work.next.fetch_add(1, Ordering::Relaxed);
                if i >= spec.count {
                    return (hist, errors);
                }
                let key = Bytes::from(spec.key(work.order[i as usize]));
                let t = Instant::now();
                let ok = match spec.operation {
                    Operation::Put => {
                        let (tx, rx) = tokio::sync::oneshot::channel();
                        engine.submit(WriteRequest {
                            op: WriteOp::Put { key, value: work.value.clone(), meta: Meta::default(), check: Check::Force },
                            sync: spec.sync != Synchronization::Writeback,
                            on_applied: None,
                            on_done: Box::new(move |r| {
                                let _ = tx.send(r);
                            }),
                        });
                        matches!(rx.await, Ok(Ok(())))
                    }
                    Operation::Get => matches!(engine.get(&key), Ok(Some(_))),
                };
                hist.saturating_record(t.elapsed().as_micros().max(1) as u64);
                if !ok {
                    errors += 1;
                }
            }
        }));
    }
    let mut hist = new_histogram();
    let mut errors = 0;
    for t in tasks {
        let (h, e) = t.await.map_err(|e| BenchError::Invalid(e.to_string()))?;
        hist.add(h).map_err(|e| BenchError::Invalid(e.to_string()))?;
        errors += e;
    }
    if spec.operation == Operation::Put && spec.flush_at_end {
        let e = engine.clone();
        tokio::task::spawn_blocking(move || e.sync()).await.map_err(|e| BenchError::Invalid(e.to_string()))?.map_err(|e| BenchError::Invalid(e.to_string()))?;
    }
    Ok(summarize(spec, &hist, errors, started.elapsed()))
}
