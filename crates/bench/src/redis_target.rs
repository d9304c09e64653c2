//! The put/get benchmark against redis (SET/GET): the in-memory key-value server a user would
//! pick instead, with the same keys, values and concurrency. Each connection is multiplexed, so
//! its `depth` requests in flight are pipelined as redis-benchmark's `-P` does.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use crate::{new_histogram, summarize, BenchError, BenchResult, BenchSpec, KeyOrder, Operation, Work};

fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError::Invalid(format!("redis: {e}"))
}

pub async fn run(spec: BenchSpec) -> Result<BenchResult, BenchError> {
    let client = redis::Client::open(spec.target.as_str()).map_err(err)?;
    let mut connections = Vec::with_capacity(spec.connections);
    for _ in 0..spec.connections {
        connections.push(client.get_multiplexed_async_connection().await.map_err(err)?);
    }
    let mut order: Vec<u64> = (0..spec.count).collect();
    if spec.order == KeyOrder::Random {
        order.shuffle(&mut rand::rngs::StdRng::seed_from_u64(spec.seed));
    }
    let work = Arc::new(Work { order, next: Default::default(), value: Bytes::from(vec![0x5a; spec.value_size]), spec: spec.clone() });
    let started = Instant::now();
    let mut tasks = Vec::new();
    for connection in &connections {
        for _ in 0..spec.depth {
            let (mut c, work) = (connection.clone(), work.clone());
            tasks.push(tokio::spawn(async move {
                let spec = &work.spec;
                let mut hist = new_histogram();
                let mut errors = 0u64;
                loop {
                    let i = work.next.fetch_add(1, Ordering::Relaxed);
                    if i >= spec.count {
                        return (hist, errors);
                    }
                    let key = spec.key(work.order[i as usize]);
                    let t = Instant::now();
                    let ok = match spec.operation {
                        Operation::Put => redis::cmd("SET").arg(&key).arg(&work.value[..]).query_async::<()>(&mut c).await.is_ok(),
                        Operation::Get => matches!(redis::cmd("GET").arg(&key).query_async::<Option<Vec<u8>>>(&mut c).await, Ok(Some(_))),
                    };
                    hist.saturating_record(t.elapsed().as_micros().max(1) as u64);
                    if !ok {
                        errors += 1;
                    }
                }
            }));
        }
    }
    let mut hist = new_histogram();
    let mut errors = 0;
    for t in tasks {
        let (h, e) = t.await.map_err(err)?;
        hist.add(h).map_err(err)?;
        errors += e;
    }
    Ok(summarize(spec, &hist, errors, started.elapsed()))
}
