//! Test support: a drive started in this process (`spindle_drive::start`) on free loopback
//! ports with its own data directory, reached over real TCP (and TLS) by the Rust client or
//! by hand-made frames (`raw.rs`); ACL entries to set (`acl.rs`). For protocol behaviour;
//! what needs the `spindle` process itself (SIGKILL, restarts after a kill, its memory, its
//! command line) is tested in `crates/cli/tests`, whose harness includes `raw.rs` and `acl.rs`.
#![allow(dead_code, unused_imports, reason = "each test binary includes this module and uses a different part of it")]

mod acl;
mod prom;
mod raw;

pub use acl::*;
pub use prom::*;
pub use raw::*;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use spindle_client::{Client, ClientConfig, ClientError};
use spindle_drive::{DriveConfig, RunningDrive};
use spindle_proto::StatusCode;

pub struct TestDrive {
    running: Option<RunningDrive>,
    pub addr: String,
    pub tls_addr: String,
    config: DriveConfig,
    _dir: tempfile::TempDir,
}

impl TestDrive {
    /// A drive with the default settings.
    pub async fn start() -> TestDrive {
        TestDrive::with_config("").await
    }

    /// A drive with the settings of a configuration file holding `toml` (its data directory,
    /// address and ports are the test's).
    pub async fn with_config(toml: &str) -> TestDrive {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config: DriveConfig = toml::from_str(toml).expect("a valid configuration");
        config.data_dir = dir.path().join("data");
        config.listen = std::net::Ipv4Addr::LOCALHOST.into();
        config.port = 0;
        config.tls_port = 0;
        let running = spindle_drive::start(config.clone()).await.expect("the drive starts");
        let (addr, tls_addr) = (running.local_addr.to_string(), running.tls_addr.to_string());
        TestDrive { running: Some(running), addr, tls_addr, config, _dir: dir }
    }

    /// The Prometheus endpoint's address, when the settings gave `metrics_port`.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.running.as_ref().and_then(|r| r.metrics_addr)
    }

    pub fn data_dir(&self) -> &Path {
        &self.config.data_dir
    }

    pub async fn client(&self) -> Client {
        Client::connect(self.addr.as_str(), ClientConfig::default()).await.expect("connect")
    }

    pub async fn client_with(&self, config: ClientConfig) -> Result<Client, ClientError> {
        Client::connect(self.addr.as_str(), config).await
    }

    /// A client over TLS, trusting the certificate the drive generated.
    pub async fn tls_client(&self) -> Client {
        let config = ClientConfig { tls_trust: Some(self.cert()), ..ClientConfig::default() };
        Client::connect(self.tls_addr.as_str(), config).await.expect("connect over TLS")
    }

    /// The certificate the drive generated for its TLS port.
    pub fn cert(&self) -> PathBuf {
        self.data_dir().join("tls/cert.pem")
    }

    /// Stops the drive (every acknowledged write made durable) and starts it again on the same
    /// data directory and settings, on new ports: what survives a clean restart. Drop every
    /// client first: the old drive's connections hold its engine, whose lock the new one needs.
    /// (A restart after SIGKILL needs the process: `crates/cli/tests`.)
    pub async fn restart(&mut self) {
        let running = self.running.take().expect("a running drive");
        let state = std::sync::Arc::downgrade(&running.state);
        running.shutdown().await.expect("the drive stops");
        let deadline = Instant::now() + Duration::from_secs(20);
        while state.strong_count() > 0 {
            assert!(Instant::now() < deadline, "the stopped drive's connections still hold it: drop every client before a restart");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let running = spindle_drive::start(self.config.clone()).await.expect("the drive starts again");
        (self.addr, self.tls_addr) = (running.local_addr.to_string(), running.tls_addr.to_string());
        self.running = Some(running);
    }

    /// Stops the drive (every acknowledged write made durable).
    pub async fn stop(mut self) {
        if let Some(running) = self.running.take() {
            running.shutdown().await.expect("the drive stops");
        }
    }
}

/// The status of a failed request, or SUCCESS.
pub fn status<T>(r: Result<T, ClientError>) -> StatusCode {
    match r {
        Ok(_) => StatusCode::Success,
        Err(e) => e.status().unwrap_or_else(|| panic!("no status: {e}")),
    }
}
