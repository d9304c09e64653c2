//! Test support: a real `spindle drive` process on a free loopback port with its own data
//! directory, and a raw connection for sending hand-made frames.
#![allow(dead_code, reason = "each test binary includes this module and uses a different part of it")]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, Stdio};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use prost::Message as _;
use spindle_client::{Client, ClientConfig};
use spindle_proto::pb::command::{Body, Header};
use spindle_proto::pb::message::{AuthType, HmaCauth};
use spindle_proto::pb::{Command, Message};
use spindle_proto::{encode_frame, FrameDecoder, MessageType, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

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
}

impl TestDrive {
    pub fn start(extra: &[&str]) -> TestDrive {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("data");
        let mut drive =
            TestDrive { child: None, addr: String::new(), tls_addr: String::new(), data, _dir: Some(dir), extra: extra.iter().map(|s| s.to_string()).collect() };
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
        };
        drive.spawn();
        drive
    }

    fn spawn(&mut self) {
        let mut child = Process::new(spindle_bin())
            .args(["drive", "--port", "0", "--tls-port", "0", "--listen", "127.0.0.1", "--data"])
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

/// A connection that sends whatever frames a test builds.
pub struct RawConn {
    pub stream: TcpStream,
    decoder: FrameDecoder,
    buf: BytesMut,
    pub connection_id: i64,
    pub sign_on: Command,
    next_sequence: i64,
}

pub const KEY: &[u8] = spindle_proto::DEFAULT_HMAC_KEY;

impl RawConn {
    pub async fn connect(addr: &str) -> RawConn {
        let stream = TcpStream::connect(addr).await.unwrap();
        let mut conn = RawConn {
            stream,
            decoder: FrameDecoder::new(64 << 20, 64 << 20),
            buf: BytesMut::new(),
            connection_id: 0,
            sign_on: Command::default(),
            next_sequence: 1,
        };
        let first = conn.read().await.expect("sign-on");
        assert_eq!(first.0.auth_type, Some(AuthType::Unsolicitedstatus as i32));
        conn.sign_on = Command::decode(first.0.command_bytes.unwrap()).unwrap();
        conn.connection_id = conn.sign_on.header.as_ref().unwrap().connection_id.unwrap();
        conn
    }

    /// Next frame, or `None` once the drive closed the connection.
    pub async fn read(&mut self) -> Option<(Message, Bytes)> {
        loop {
            match self.decoder.decode(&mut self.buf) {
                Ok(Some(f)) => return Some((f.message, f.value)),
                Ok(None) => {}
                Err(e) => panic!("drive sent a bad frame: {e}"),
            }
            let n = tokio::time::timeout(Duration::from_secs(30), self.stream.read_buf(&mut self.buf))
                .await
                .expect("drive answered within 30 s");
            match n {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    }

    /// Reads the next response and decodes its command.
    pub async fn response(&mut self) -> Option<(Message, Command, Bytes)> {
        let (m, v) = self.read().await?;
        let c = Command::decode(m.command_bytes.clone().unwrap_or_default()).unwrap();
        Some((m, c, v))
    }

    pub async fn send_bytes(&mut self, bytes: &[u8]) {
        let _ = self.stream.write_all(bytes).await;
    }

    /// A well-formed header for `kind` with the next sequence.
    pub fn header(&mut self, kind: MessageType) -> Header {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        Header {
            cluster_version: Some(0),
            connection_id: Some(self.connection_id),
            sequence: Some(sequence),
            message_type: Some(kind as i32),
            ..Header::default()
        }
    }

    /// Signs `command` as `identity` with `key` and sends it with `value`.
    pub async fn send(&mut self, command: &Command, identity: i64, key: &[u8], value: &[u8]) {
        let mut out = BytesMut::new();
        signed_frame(command, identity, key, value, &mut out);
        self.send_bytes(&out).await;
    }

    /// Sends a default-identity request and returns the status of its answer.
    pub async fn call(&mut self, header: Header, body: Option<Body>, value: &[u8]) -> (StatusCode, Command, Bytes) {
        let command = Command { header: Some(header), body, status: None };
        self.send(&command, 1, KEY, value).await;
        let (_, c, v) = self.response().await.expect("a response");
        (status_of(&c), c, v)
    }
}

/// Appends the frame of `command` signed as `identity` with `key`, carrying `value`.
pub fn signed_frame(command: &Command, identity: i64, key: &[u8], value: &[u8], out: &mut BytesMut) {
    let command_bytes = Bytes::from(command.encode_to_vec());
    let hmac = spindle_proto::hmac::sign(key, &command_bytes);
    let message = Message {
        auth_type: Some(AuthType::Hmacauth as i32),
        hmac_auth: Some(HmaCauth { identity: Some(identity), hmac: Some(Bytes::copy_from_slice(&hmac)) }),
        pin_auth: None,
        command_bytes: Some(command_bytes),
    };
    encode_frame(&message, value, out);
}

/// The drive's identity as its sign-on tells it: serial number and world-wide name.
pub fn sign_on_identity(c: &Client) -> (Bytes, Bytes) {
    let config = c.sign_on().body.as_ref().unwrap().get_log.as_ref().unwrap().configuration.clone().unwrap();
    (Bytes::from(config.serial_number().to_vec()), Bytes::from(config.world_wide_name().to_vec()))
}

/// A forced WRITEBACK put of `key` (its value travels beside the command).
pub fn put_body(key: &str) -> Option<Body> {
    Some(Body {
        key_value: Some(spindle_proto::pb::command::KeyValue {
            key: Some(Bytes::copy_from_slice(key.as_bytes())),
            synchronization: Some(spindle_proto::Synchronization::Writeback as i32),
            force: Some(true),
            ..Default::default()
        }),
        ..Body::default()
    })
}

/// The status a client call ended with (SUCCESS for a result).
pub fn status<T>(r: Result<T, spindle_client::ClientError>) -> StatusCode {
    match r {
        Ok(_) => StatusCode::Success,
        Err(e) => e.status().unwrap_or_else(|| panic!("no status: {e}")),
    }
}

pub fn status_of(c: &Command) -> StatusCode {
    c.status.as_ref().and_then(|s| s.code).and_then(|s| StatusCode::try_from(s).ok()).unwrap_or(StatusCode::InvalidStatusCode)
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
        let child = Process::new("redis-server")
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
