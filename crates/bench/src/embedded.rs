//! The put/get benchmark against Spindle's engine in this process: the same key orders, value
//! sizes and concurrency (`connections` x `depth` requests in flight), without protocol or
//! network, so a side-by-side run shows what those cost.

use std::sync::Arc;

use spindle_client::Synchronization;
use spindle_engine::{Check, Engine, Meta, WriteOp, WriteRequest};

use crate::{run_tasks, BenchError, BenchResult, BenchSpec, Operation};

pub async fn run(engine: Arc<dyn Engine>, spec: BenchSpec) -> Result<BenchResult, BenchError> {
    let (operation, sync) = (spec.operation, spec.sync != Synchronization::Writeback);
    let flush = spec.operation == Operation::Put && spec.flush_at_end;
    let tasks = spec.connections * spec.depth;
    let e = engine.clone();
    let mut result = run_tasks(spec, tasks, move |_, key, value| {
        let engine = e.clone();
        async move {
            match operation {
                Operation::Put => {
                    let (tx, rx) = tokio::sync::oneshot::channel();
                    engine.submit(WriteRequest {
                        op: WriteOp::Put { key, value, meta: Meta::default(), check: Check::Force },
                        sync,
                        on_applied: None,
                        on_done: Box::new(move |r| {
                            let _ = tx.send(r);
                        }),
                    });
                    matches!(rx.await, Ok(Ok(())))
                }
                Operation::Get => matches!(engine.get(&key), Ok(Some(_))),
            }
        }
    })
    .await?;
    if flush {
        // Inside the measurement, as FLUSHALLDATA is for a drive.
        let started = std::time::Instant::now();
        tokio::task::spawn_blocking(move || engine.sync())
            .await
            .map_err(|e| BenchError::Invalid(e.to_string()))?
            .map_err(|e| BenchError::Invalid(e.to_string()))?;
        let seconds = result.seconds + started.elapsed().as_secs_f64();
        result.ops_per_second = result.ops as f64 / seconds;
        result.megabytes_per_second = result.ops as f64 * result.spec.value_size as f64 / seconds / 1e6;
        result.seconds = seconds;
    }
    Ok(result)
}
