//! The put/get benchmark against redis (SET/GET): the in-memory key-value server a user would
//! pick instead, with the same keys, values and concurrency. Each connection is multiplexed, so
//! its `depth` requests in flight are pipelined as redis-benchmark's `-P` does.

use crate::{run_tasks, BenchError, BenchResult, BenchSpec, Operation};

fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError::Invalid(format!("redis: {e}"))
}

pub async fn run(spec: BenchSpec) -> Result<BenchResult, BenchError> {
    let client = redis::Client::open(spec.target.as_str()).map_err(err)?;
    let mut connections = Vec::with_capacity(spec.connections);
    for _ in 0..spec.connections {
        connections.push(client.get_multiplexed_async_connection().await.map_err(err)?);
    }
    let operation = spec.operation;
    let tasks = spec.connections * spec.depth;
    run_tasks(spec, tasks, move |task, key, value| {
        let mut c = connections[task % connections.len()].clone();
        async move {
            match operation {
                Operation::Put => redis::cmd("SET").arg(&key[..]).arg(&value[..]).query_async::<()>(&mut c).await.is_ok(),
                Operation::Get => matches!(redis::cmd("GET").arg(&key[..]).query_async::<Option<Vec<u8>>>(&mut c).await, Ok(Some(_))),
            }
        }
    })
    .await
}
