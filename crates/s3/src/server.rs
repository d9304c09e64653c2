//! The gateway's HTTP server and its sweeper.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use s3s::service::S3ServiceBuilder;
use tokio::net::TcpListener;

use crate::auth::Keys;
use crate::gateway::{self, Gateway};
use crate::kv::Kv;
use crate::objects::Core;
use crate::GatewayError;

/// How long a shutdown waits for requests in progress.
const DRAIN: Duration = Duration::from_secs(10);

pub struct Config {
    pub kv: Kv,
    pub keys: Keys,
    /// Unreferenced data is kept this long (`objects::Core::grace`).
    pub sweep_grace: Duration,
    pub sweep_interval: Duration,
}

/// Serves S3 on `listener` until `shutdown` resolves, then lets requests in progress finish.
pub async fn serve(listener: TcpListener, config: Config, shutdown: impl Future<Output = ()>) -> Result<(), GatewayError> {
    if config.keys.is_empty() {
        return Err(GatewayError::Invalid("the gateway needs at least one access key".into()));
    }
    let chunk = config.kv.max_value().await?;
    let core = Arc::new(Core { kv: config.kv, chunk, grace: config.sweep_grace, md5: crate::md5_lanes::Md5Lanes::start() });
    let sweeper = tokio::spawn(sweep_forever(core.clone(), config.sweep_interval));
    let service = {
        let mut b = S3ServiceBuilder::new(Gateway::new(core));
        b.set_auth(config.keys);
        b.build()
    };
    let http = ConnBuilder::new(TokioExecutor::new());
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let socket = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((socket, _)) => socket,
                Err(e) => {
                    // Out of descriptors and the like: pause rather than spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = socket.set_nodelay(true);
        let conn = http.serve_connection(TokioIo::new(socket), service.clone());
        let conn = graceful.watch(conn.into_owned());
        tokio::spawn(async move {
            let _ = conn.await;
        });
    }
    sweeper.abort();
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(DRAIN) => tracing::warn!("requests still running after {DRAIN:?}: stopped"),
    }
    Ok(())
}

async fn sweep_forever(core: Arc<Core>, every: Duration) {
    loop {
        tokio::time::sleep(every).await;
        match core.sweep().await {
            Ok((seen, deleted)) if seen > 0 => tracing::info!(intents = seen, chunks_deleted = deleted, "sweep"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "sweep failed"),
        }
        if let Err(e) = gateway::finish_stale_completions(&core).await {
            tracing::warn!(error = %e, "finishing stale completions failed");
        }
    }
}
