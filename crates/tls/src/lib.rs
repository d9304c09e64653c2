//! TLS serving from a certificate chain and private key in PEM files, taken again when the
//! files change: a renewed certificate (or one from a new CA) is served to the next handshake
//! without a restart, while connections already open keep the one they started with. The
//! drive's TLS port and the S3 gateway's HTTPS listener both serve through [`acceptor`]; the
//! clients (the drive client, the S3 load generator) trust a PEM file through [`connector`].

#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use parking_lot::RwLock;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// aws-lc's suites with AES-128-GCM first (TLS 1.3, then 1.2). aws-lc rather than ring: its
/// AES-GCM uses AVX-512 where the CPU has it (ring's AVX2), which roughly halves what TLS
/// costs per byte (`spindle bench tls-floor`, docs/design/dependencies.md); it builds with a
/// C compiler alone. AES-128 first: about a third less CPU per byte than AES-256-GCM, and
/// what Go's TLS (MinIO's, etcd's) picks on CPUs with AES instructions. Both sides of the
/// cluster's connections are rustls, whose server takes the client's order: the drives' data
/// path is the bulk of the cluster's encryption.
fn provider() -> rustls::crypto::CryptoProvider {
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    let aes128 = |s: &rustls::SupportedCipherSuite| {
        matches!(
            s.suite(),
            rustls::CipherSuite::TLS13_AES_128_GCM_SHA256 | rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 | rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
        )
    };
    // A stable sort: TLS 1.3 suites stay before TLS 1.2 ones within each group.
    provider.cipher_suites.sort_by_key(|s| (s.version() != &rustls::version::TLS13, !aes128(s)));
    provider
}

/// How often the files are looked at for a change.
pub const RELOAD_CHECK: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("TLS certificate {path}: {message}")]
    Certificate { path: PathBuf, message: String },
    #[error("TLS private key {path}: {message}")]
    Key { path: PathBuf, message: String },
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// The certificate chain and private key files (PEM).
#[derive(Debug, Clone)]
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl CertFiles {
    /// What tells a changed file: its length and modification time, both files.
    fn stamp(&self) -> Option<[(u64, SystemTime); 2]> {
        let one = |p: &Path| std::fs::metadata(p).ok().and_then(|m| Some((m.len(), m.modified().ok()?)));
        Some([one(&self.cert)?, one(&self.key)?])
    }

    /// Reads and checks the pair: the key must be one rustls can sign with and match the
    /// certificate.
    pub fn load(&self) -> Result<Arc<CertifiedKey>, TlsError> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&self.cert)
            .and_then(|it| it.collect())
            .map_err(|e| TlsError::Certificate { path: self.cert.clone(), message: e.to_string() })?;
        if chain.is_empty() {
            return Err(TlsError::Certificate { path: self.cert.clone(), message: "no certificate in the file".into() });
        }
        let key = PrivateKeyDer::from_pem_file(&self.key).map_err(|e| TlsError::Key { path: self.key.clone(), message: e.to_string() })?;
        let certified = CertifiedKey::from_der(chain, key, &provider()).map_err(|e| TlsError::Key { path: self.key.clone(), message: e.to_string() })?;
        Ok(Arc::new(certified))
    }
}

/// The certificate handshakes are answered with, replaced when the files change.
#[derive(Debug)]
struct Current {
    key: RwLock<Arc<CertifiedKey>>,
}

impl ResolvesServerCert for Current {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.key.read().clone())
    }
}

/// The acceptor for `files` (TLS 1.3 and 1.2, offering `alpn`), and the task that reloads
/// them, which runs until the acceptor and every connection using it are gone. Must be called
/// inside a tokio runtime.
pub fn acceptor(files: CertFiles, alpn: &[&[u8]]) -> Result<TlsAcceptor, TlsError> {
    let current = Arc::new(Current { key: RwLock::new(files.load()?) });
    let mut config = ServerConfig::builder_with_provider(Arc::new(provider()))
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_no_client_auth()
        .with_cert_resolver(current.clone());
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    tokio::spawn(reload(files, Arc::downgrade(&current)));
    Ok(TlsAcceptor::from(Arc::new(config)))
}

async fn reload(files: CertFiles, watched: std::sync::Weak<Current>) {
    let mut seen = files.stamp();
    let mut refused = None;
    loop {
        tokio::time::sleep(RELOAD_CHECK).await;
        let Some(current) = watched.upgrade() else { return };
        let now = files.stamp();
        if now.is_none() || now == seen {
            continue;
        }
        // A renewal may be caught between writing the two files: a pair that does not load (or
        // match) is tried again at the next check, the old one served meanwhile.
        match files.load() {
            Ok(key) => {
                *current.key.write() = key;
                seen = now;
                tracing::info!(cert = %files.cert.display(), "TLS certificate reloaded");
            }
            Err(e) if refused != now => {
                tracing::warn!(error = %e, "TLS certificate changed but not loaded; the previous one is served");
                refused = now;
            }
            Err(_) => {}
        }
    }
}

/// A client that trusts the certificates in the PEM file `trust` (a CA, or a server's own
/// certificate) and no other.
pub fn connector(trust: &Path) -> Result<TlsConnector, TlsError> {
    let bad = |message: String| TlsError::Certificate { path: trust.to_path_buf(), message };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(trust).and_then(|it| it.collect()).map_err(|e| bad(e.to_string()))?;
    if certs.is_empty() {
        return Err(bad("no certificate in the file".into()));
    }
    let mut roots = rustls::RootCertStore::empty();
    for cert in certs {
        roots.add(cert).map_err(|e| bad(e.to_string()))?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(TlsConnector::from(Arc::new(config)))
}

/// Bytes read from the socket at a time under TLS. rustls asks its transport for 4 KiB per
/// read, so a 1 MiB value would take 256 receive calls; read through this buffer it takes 16.
pub const READ_BUFFER: usize = 64 * 1024;
/// Encrypted bytes a connection queues before writing them (rustls' limit, 64 KiB by
/// default): a 1 MiB value leaves in 4 socket writes rather than 16. The most a connection
/// holds in rustls for a reader that does not read.
pub const SEND_BUFFER: usize = 256 * 1024;

/// The transport under a TLS session: the socket, read through [`READ_BUFFER`].
pub type Buffered<S> = tokio::io::BufReader<S>;

/// Accepts a TLS session over `stream`, buffered for bulk transfers ([`READ_BUFFER`],
/// [`SEND_BUFFER`]).
pub async fn accept<S>(acceptor: &TlsAcceptor, stream: S) -> std::io::Result<tokio_rustls::server::TlsStream<Buffered<S>>>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut tls = acceptor.accept(tokio::io::BufReader::with_capacity(READ_BUFFER, stream)).await?;
    tls.get_mut().1.set_buffer_limit(Some(SEND_BUFFER));
    Ok(tls)
}

/// Opens a TLS session to `name` over `stream`, buffered as [`accept`] is.
pub async fn connect<S>(
    connector: &TlsConnector,
    name: rustls_pki_types::ServerName<'static>,
    stream: S,
) -> std::io::Result<tokio_rustls::client::TlsStream<Buffered<S>>>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut tls = connector.connect(name, tokio::io::BufReader::with_capacity(READ_BUFFER, stream)).await?;
    tls.get_mut().1.set_buffer_limit(Some(SEND_BUFFER));
    Ok(tls)
}

#[cfg(test)]
mod tests;
