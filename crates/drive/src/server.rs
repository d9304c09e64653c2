//! Opening a drive: the engine, the persistent drive identity and the listener.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use spindle_engine::{Engine, FjallEngine, FjallOptions, MemEngine};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::connection::{ConnectionSlot, Transport};

use crate::config::{DriveConfig, EngineKind};
use crate::state::DriveState;
use crate::DriveError;

/// Folder in the data directory holding the engine's files.
const ENGINE_DIR: &str = "engine";

/// A drive that is accepting connections.
pub struct RunningDrive {
    pub local_addr: SocketAddr,
    pub tls_addr: SocketAddr,
    /// The Prometheus endpoint's address, when `metrics_port` is set.
    pub metrics_addr: Option<SocketAddr>,
    pub state: Arc<DriveState>,
    metrics: Option<spindle_metrics::Endpoint>,
    stop: watch::Sender<bool>,
    accept: Vec<JoinHandle<()>>,
}

impl RunningDrive {
    /// Resolves when a client asked the drive to shut down (SET_POWER_LEVEL SHUTDOWN).
    pub async fn shutdown_requested(&self) {
        self.state.shutdown.notified().await
    }

    /// Stops accepting, makes every acknowledged write durable and returns.
    pub async fn shutdown(self) -> Result<(), DriveError> {
        let _ = self.stop.send(true);
        if let Some(metrics) = self.metrics {
            metrics.stop().await;
        }
        for task in self.accept {
            let _ = task.await;
        }
        let engine = self.state.engine.clone();
        tokio::task::spawn_blocking(move || engine.sync())
            .await
            .map_err(|e| DriveError::Io(std::io::Error::other(e.to_string())))??;
        self.state.event("drive stopped".into());
        Ok(())
    }
}

pub async fn start(mut config: DriveConfig) -> Result<RunningDrive, DriveError> {
    config.validate()?;
    crate::memory::start();
    spindle_engine::dirsync::create_dir_all(&config.data_dir)?;
    // A reserve left at its default, fitted to a small filesystem (and said so).
    let reserve_note = match (config.engine, spindle_engine::fs_space::statvfs(&config.data_dir)) {
        (EngineKind::Fjall, Some((total, _))) => config.scale_reserve(total),
        _ => None,
    };
    if config.engine == EngineKind::Fjall && config.reserved_bytes == 0 {
        tracing::warn!("reserved_bytes = 0: the engine may meet a full disk itself, which stops its writes until space is freed");
    }
    // Before the engine creates its directory: a store without settings beside it means the
    // settings were lost, never that the drive is new.
    let (stored, identity, reset_note) =
        crate::persist::open(&config.data_dir, &config.data_dir.join(ENGINE_DIR), config.reset_settings)?;
    if let Some(note) = &reset_note {
        tracing::warn!("{note}");
    }
    let engine: Arc<dyn Engine> = match config.engine {
        EngineKind::Fjall => {
            let mut options = FjallOptions::new(config.data_dir.join(ENGINE_DIR));
            options.cache_size = config.cache_bytes;
            options.memtable_size = config.memtable_bytes;
            options.salvage_journal = config.salvage_journal;
            options.log_threshold = config.value_log_threshold_bytes as usize;
            options.gc_bytes_per_sec = config.gc_bytes_per_sec;
            options.log_cached_tail = config.value_log_cached_bytes;
            tokio::task::spawn_blocking(move || FjallEngine::open(options))
                .await
                .map_err(|e| DriveError::Io(std::io::Error::other(e.to_string())))??
        }
        EngineKind::Memory => MemEngine::new(),
    };
    let acceptor = crate::tls::acceptor(config.tls_cert.as_deref(), config.tls_key.as_deref(), &config.data_dir)?;
    let listener = TcpListener::bind((config.listen, config.port)).await?;
    let local_addr = listener.local_addr()?;
    let tls_listener = TcpListener::bind((config.listen, config.tls_port)).await?;
    let tls_addr = tls_listener.local_addr()?;
    let state = DriveState::new(config, engine, identity, local_addr.port(), tls_addr.port());
    restore(&state, stored)?;
    if let Some(note) = reset_note {
        state.event(note);
    }
    if let Some(note) = reserve_note {
        state.event(note);
    }
    state.event(format!("drive listening on {local_addr}, TLS on {tls_addr} ({:?} engine)", state.config.engine));
    let metrics = match state.config.metrics_port {
        Some(port) => {
            let mut registry = spindle_metrics::Registry::default();
            registry.register_collector(Box::new(crate::exporter::DriveCollector(state.clone())));
            let endpoint = spindle_metrics::serve(SocketAddr::new(state.config.listen, port), Arc::new(registry)).await?;
            state.event(format!("metrics on http://{}/metrics", endpoint.local_addr));
            Some(endpoint)
        }
        None => None,
    };
    let metrics_addr = metrics.as_ref().map(|m| m.local_addr);
    let (stop, stopped) = watch::channel(false);
    let accept = vec![
        tokio::spawn(accept_loop(listener, state.clone(), stopped.clone(), None)),
        tokio::spawn(accept_loop(tls_listener, state.clone(), stopped, Some(acceptor))),
    ];
    Ok(RunningDrive { local_addr, tls_addr, metrics_addr, state, metrics, stop, accept })
}

/// The settings a drive keeps beside its store, put back into a state just made: the ACL and
/// PINs (a drive with a lock PIN comes up locked, like a self-encrypting drive) and the
/// cluster version.
fn restore(state: &DriveState, stored: spindle_proto::spindle::DriveState) -> Result<(), DriveError> {
    let security = crate::security::Security::restore(
        stored.acl,
        stored.lock_pin.unwrap_or_default(),
        stored.erase_pin.unwrap_or_default(),
        state.config.limits.max_identity_count,
    )
    .map_err(|r| DriveError::Io(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("stored ACL: {r}"))))?;
    if !security.lock_pin.is_empty() {
        state.locked.store(true, Ordering::Release);
    }
    *state.security.write() = security;
    state.cluster_version.store(stored.cluster_version.unwrap_or(0), Ordering::Release);
    Ok(())
}

/// A drive over `engine` that listens nowhere: whoever embeds it (the simulator) hands it
/// connections through [`crate::connection::serve`] and its peer connections go through
/// `dialer`. Its settings are kept in `config.data_dir` as a started drive keeps them.
pub fn embedded(config: DriveConfig, engine: Arc<dyn Engine>, dialer: Option<spindle_client::Dialer>) -> Result<Arc<DriveState>, DriveError> {
    config.validate()?;
    spindle_engine::dirsync::create_dir_all(&config.data_dir)?;
    let (stored, identity, _) = crate::persist::open(&config.data_dir, &config.data_dir.join(ENGINE_DIR), false)?;
    let (port, tls_port) = (config.port, config.tls_port);
    let state = DriveState::with_dialer(config, engine, identity, port, tls_port, dialer);
    restore(&state, stored)?;
    Ok(state)
}

/// Longest a client may take to complete the TLS handshake.
const TLS_HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

async fn accept_loop(listener: TcpListener, state: Arc<DriveState>, mut stopped: watch::Receiver<bool>, tls: Option<TlsAcceptor>) {
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(conn) => conn,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stopped.changed() => return,
        };
        tokio::spawn(admit(stream, peer, state.clone(), tls.clone()));
    }
}

/// Admits a connection within maxConnections. The last `reserved_connections` slots are for
/// administrators: TLS connections only (SECURITY and PIN operations are accepted only over
/// TLS anyway) whose first frame must authenticate one (a request with a valid HMAC from an
/// identity holding SECURITY, naming this connection; or a PINOP with the right PIN), or the
/// connection is ended at that frame. What the reserve guarantees, and what it does not: plain
/// sockets can never take it, and a TLS client without credentials holds a reserved slot only
/// while it completes its handshake (`TLS_HANDSHAKE_TIMEOUT`) and until its first frame (which
/// must come within `unauthenticated_timeout_ms` of the accept, slots being scarce then). So
/// an attacker who opens TLS connections as fast as slots free up can still keep the reserve
/// busy; the reserve bounds how long each such connection lasts, it does not rate-limit them.
async fn admit(stream: TcpStream, peer: SocketAddr, state: Arc<DriveState>, tls: Option<TlsAcceptor>) {
    let _ = stream.set_nodelay(true);
    let max = state.config.limits.max_connections;
    let general = max - state.config.tls_reserved_connections();
    let allowed = if tls.is_some() { max } else { general };
    let open = state.open_connections.fetch_add(1, Ordering::AcqRel);
    let slot = if open >= general { ConnectionSlot::Reserved } else { ConnectionSlot::General };
    if open >= allowed {
        state.open_connections.fetch_sub(1, Ordering::AcqRel);
        state.event(format!("refused connection from {peer}: maxConnections {max} reached"));
        let reason = if allowed < max {
            format!("the drive already has maxConnections ({max}) connections, {} of them kept for TLS", max - allowed)
        } else {
            format!("the drive already has maxConnections ({max}) connections")
        };
        match tls {
            None => crate::connection::refuse(stream, &state, &reason).await,
            // A TLS client is refused inside TLS: a plaintext frame would reach its TLS stack as
            // a garbled record.
            Some(acceptor) => {
                let Ok(_turn) = state.tls_refusals.clone().try_acquire_owned() else { return };
                if let Ok(Ok(tls_stream)) = tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, spindle_tls::accept(&acceptor, stream)).await {
                    crate::connection::refuse(tls_stream, &state, &reason).await;
                }
            }
        }
        return;
    }
    match tls {
        None => crate::connection::serve(state.clone(), stream, peer, Transport::Plain).await,
        Some(acceptor) => match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, spindle_tls::accept(&acceptor, stream)).await {
            Ok(Ok(tls_stream)) => crate::connection::serve_in(state.clone(), tls_stream, peer, Transport::Tls, slot).await,
            Ok(Err(e)) => tracing::debug!(%peer, "TLS handshake failed: {e}"),
            Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
        },
    }
    state.open_connections.fetch_sub(1, Ordering::AcqRel);
}
