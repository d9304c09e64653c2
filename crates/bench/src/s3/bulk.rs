//! Untimed work spread over connections: the prepared set's uploads, and the deletes that
//! clean a run up.

use std::sync::Arc;

use super::client::{S3Conn, S3Error, S3Signer};
use super::workers::note_error;

/// Runs `work(i)` for i in 0..count on `concurrency` tasks, each with its own connection.
pub(super) async fn on_connections<F, Fut>(signer: &S3Signer, count: u64, concurrency: usize, work: F) -> Vec<(u64, u64, Vec<String>)>
where
    F: Fn(u64, S3Conn) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = (S3Conn, Result<(), S3Error>)> + Send,
{
    let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let tasks: Vec<_> = (0..concurrency.max(1))
        .map(|_| {
            let (next, work) = (next.clone(), work.clone());
            let mut conn = S3Conn::new(signer.clone());
            tokio::spawn(async move {
                let (mut ok, mut failed, mut samples) = (0u64, 0u64, Vec::new());
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= count {
                        return (ok, failed, samples);
                    }
                    let (back, r) = work(i, conn).await;
                    conn = back;
                    match r {
                        Ok(()) => ok += 1,
                        Err(e) => {
                            failed += 1;
                            note_error(&mut samples, &e);
                        }
                    }
                }
            })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap_or_else(|e| (0, 1, vec![e.to_string()])));
    }
    out
}

/// Deletes `keys` with `concurrency` connections; returns (deleted, failed).
pub(super) async fn cleanup(signer: &S3Signer, keys: Vec<String>, concurrency: usize) -> (u64, u64) {
    let keys = Arc::new(keys);
    let k = keys.clone();
    let parts = on_connections(signer, keys.len() as u64, concurrency, move |i, mut conn| {
        let k = k.clone();
        async move {
            let r = conn.delete_object(&k[i as usize]).await;
            (conn, r)
        }
    })
    .await;
    (parts.iter().map(|p| p.0).sum(), parts.iter().map(|p| p.1).sum())
}
