//! Test support: a real `spindle drive` process on a free loopback port with its own data
//! directory. A raw connection for sending hand-made frames, ACL entries to set and a Prometheus
//! scrape are the drive harness's (`raw.rs`, `acl.rs`, `prom.rs`: the one copy of each,
//! included here).
#![allow(dead_code, unused_imports, reason = "each test binary includes this module and uses a different part of it")]

#[path = "../../../drive/tests/common/acl.rs"]
mod acl;
#[path = "../../../drive/tests/common/prom.rs"]
mod prom;
#[path = "../../../drive/tests/common/raw.rs"]
mod raw;

pub use acl::*;
pub use prom::*;
pub use raw::*;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, Stdio};
use std::time::Duration;

use bytes::Bytes;
use spindle_client::{Client, ClientConfig};
use spindle_proto::StatusCode;

/// Makes a child die with the test process. A test that aborts (a stack overflow) or is
/// killed runs no destructor, and its drives, etcd members and coordinators would outlive it.
/// The signal follows the thread that spawned the child: every fixture here is started on
/// the test's own thread (a runtime's `block_on` runs there), which outlives it.
pub fn dies_with_test(command: &mut Process) -> &mut Process {
    signalled_when_test_dies(command, libc::SIGKILL)
}

/// As `dies_with_test`, with SIGTERM: for a child that stops children of its own on the way
/// out (`spindle cluster demo`).
pub fn stops_with_test(command: &mut Process) -> &mut Process {
    signalled_when_test_dies(command, libc::SIGTERM)
}

fn signalled_when_test_dies(command: &mut Process, signal: libc::c_int) -> &mut Process {
    spindle_testkit::ends_with_test(command, signal)
}

/// The `spindle` binary the tests run: this build's, or SPINDLE_BIN (a copy of the binary,
/// for long runs that must not pick up a rebuild).
pub fn spindle_bin() -> std::ffi::OsString {
    std::env::var_os("SPINDLE_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_spindle").into())
}

pub struct TestDrive {
    child: Option<Child>,
    pub addr: String,
    pub tls_addr: String,
    pub data: PathBuf,
    _dir: Option<tempfile::TempDir>,
    extra: Vec<String>,
    /// The ports to listen on: 0 (any) until a restart must keep the addresses.
    port: u16,
    tls_port: u16,
}

impl TestDrive {
    pub fn start(extra: &[&str]) -> TestDrive {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("data");
        let mut drive =
            TestDrive { child: None, addr: String::new(), tls_addr: String::new(), data, _dir: Some(dir), extra: extra.iter().map(|s| s.to_string()).collect(), port: 0, tls_port: 0 };
        drive.spawn();
        drive
    }

    /// A drive on an existing data directory (which the caller owns).
    pub fn start_in(data: &Path, extra: &[&str]) -> TestDrive {
        let mut drive = TestDrive {
            child: None,
            addr: String::new(),
            tls_addr: String::new(),
            data: data.to_path_buf(),
            _dir: None,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            port: 0,
            tls_port: 0,
        };
        drive.spawn();
        drive
    }

    /// A drive with a TOML config file holding `toml`.
    pub fn with_config(toml: &str) -> TestDrive {
        Self::configured(toml, None)
    }

    /// A drive with a TOML config file holding `toml`, keeping its data in `data` (which the
    /// caller owns: on a filesystem of its own, say).
    pub fn with_config_in(toml: &str, data: PathBuf) -> TestDrive {
        Self::configured(toml, Some(data))
    }

    fn configured(toml: &str, data: Option<PathBuf>) -> TestDrive {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("drive.toml");
        std::fs::write(&path, toml).unwrap();
        let data = data.unwrap_or_else(|| dir.path().join("data"));
        let mut drive = TestDrive {
            child: None,
            addr: String::new(),
            tls_addr: String::new(),
            data,
            _dir: Some(dir),
            extra: vec!["--config".into(), path.display().to_string()],
            port: 0,
            tls_port: 0,
        };
        drive.spawn();
        drive
    }

    fn spawn(&mut self) {
        let mut child = dies_with_test(&mut Process::new(spindle_bin()))
            .args(["drive", "--port", &self.port.to_string(), "--tls-port", &self.tls_port.to_string(), "--listen", "127.0.0.1", "--data"])
            .arg(&self.data)
            .args(&self.extra)
            .env("SPINDLE_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn spindle drive");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        // "spindle drive listening on 127.0.0.1:P tls 127.0.0.1:T (data in DIR)"
        let mut addrs = line.split_whitespace().filter(|w| w.starts_with("127.0.0.1:")).map(str::to_string);
        self.addr = addrs.next().unwrap_or_else(|| panic!("no address in {line:?}"));
        self.tls_addr = addrs.next().unwrap_or_else(|| panic!("no TLS address in {line:?}"));
        self.child = Some(child);
    }

    /// Kills the process with SIGKILL: no shutdown code runs.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }

    /// SIGKILL and start again on the same data directory (on a new port).
    pub fn restart_after_kill(&mut self) {
        self.kill();
        (self.port, self.tls_port) = (0, 0);
        self.spawn();
    }

    /// SIGKILL (if running) and start again on the same data directory and the same addresses
    /// (a cluster member keeps its address, plain or TLS).
    pub fn restart_same_port(&mut self) {
        self.kill();
        let port = |addr: &str| addr.rsplit(':').next().and_then(|p| p.parse().ok()).expect("a port");
        (self.port, self.tls_port) = (port(&self.addr), port(&self.tls_addr));
        self.spawn();
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    pub fn data_dir(&self) -> &Path {
        &self.data
    }

    /// A client over TLS, trusting the certificate the drive generated.
    pub async fn tls_client(&self) -> Client {
        let config = ClientConfig { tls_trust: Some(self.data.join("tls/cert.pem")), ..ClientConfig::default() };
        Client::connect(self.tls_addr.as_str(), config).await.expect("connect over TLS")
    }

    pub async fn client(&self) -> Client {
        Client::connect(self.addr.as_str(), ClientConfig::default()).await.expect("connect")
    }

    pub async fn client_with(&self, config: ClientConfig) -> Result<Client, spindle_client::ClientError> {
        Client::connect(self.addr.as_str(), config).await
    }
}

impl Drop for TestDrive {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The drive's identity as its sign-on tells it: serial number and world-wide name.
pub fn sign_on_identity(c: &Client) -> (Bytes, Bytes) {
    let config = c.sign_on().body.as_ref().unwrap().get_log.as_ref().unwrap().configuration.clone().unwrap();
    (Bytes::from(config.serial_number().to_vec()), Bytes::from(config.world_wide_name().to_vec()))
}

/// The status a client call ended with (SUCCESS for a result).
pub fn status<T>(r: Result<T, spindle_client::ClientError>) -> StatusCode {
    match r {
        Ok(_) => StatusCode::Success,
        Err(e) => e.status().unwrap_or_else(|| panic!("no status: {e}")),
    }
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// A throw-away `redis-server` on a free loopback port, persistence off; stopped on drop.
pub struct RedisServer {
    pub url: String,
    child: Child,
}

impl RedisServer {
    /// `None` when redis-server is not installed (scripts/test.sh installs it; a bare `cargo
    /// test` elsewhere skips what needs it).
    pub fn start() -> Option<RedisServer> {
        if Process::new("redis-server").arg("--version").output().is_err() {
            eprintln!("redis-server not installed: skipped");
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = dies_with_test(&mut Process::new("redis-server"))
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let server = RedisServer { url: format!("redis://127.0.0.1:{port}"), child };
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(server);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("redis-server did not start on port {port}");
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
