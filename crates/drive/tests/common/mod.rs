//! Test support: a drive started in this process (`spindle_drive::start`) on free loopback
//! ports with its own data directory, reached over real TCP (and TLS) by the Rust client. For
//! protocol behaviour; what needs the `spindle` process itself (SIGKILL, restarts, its memory)
//! is tested in `crates/cli/tests`.
#![allow(dead_code, reason = "each test binary includes this module and uses a different part of it")]

use std::path::{Path, PathBuf};

use spindle_client::{Client, ClientConfig};
use spindle_drive::{DriveConfig, RunningDrive};
use spindle_proto::StatusCode;

pub struct TestDrive {
    running: Option<RunningDrive>,
    pub addr: String,
    pub tls_addr: String,
    data: PathBuf,
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
        let data = dir.path().join("data");
        let mut config: DriveConfig = toml::from_str(toml).expect("a valid configuration");
        config.data_dir = data.clone();
        config.listen = std::net::Ipv4Addr::LOCALHOST.into();
        config.port = 0;
        config.tls_port = 0;
        let running = spindle_drive::start(config).await.expect("the drive starts");
        let (addr, tls_addr) = (running.local_addr.to_string(), running.tls_addr.to_string());
        TestDrive { running: Some(running), addr, tls_addr, data, _dir: dir }
    }

    pub fn data_dir(&self) -> &Path {
        &self.data
    }

    pub async fn client(&self) -> Client {
        Client::connect(self.addr.as_str(), ClientConfig::default()).await.expect("connect")
    }

    /// A client over TLS, trusting the certificate the drive generated.
    pub async fn tls_client(&self) -> Client {
        let config = ClientConfig { tls_trust: Some(self.data.join("tls/cert.pem")), ..ClientConfig::default() };
        Client::connect(self.tls_addr.as_str(), config).await.expect("connect over TLS")
    }

    /// Stops the drive (every acknowledged write made durable).
    pub async fn stop(mut self) {
        if let Some(running) = self.running.take() {
            running.shutdown().await.expect("the drive stops");
        }
    }
}

/// The status of a failed request, or SUCCESS.
pub fn status<T>(r: Result<T, spindle_client::ClientError>) -> StatusCode {
    match r {
        Ok(_) => StatusCode::Success,
        Err(e) => e.status().unwrap_or_else(|| panic!("no status: {e}")),
    }
}
