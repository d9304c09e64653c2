//! The TLS listener's identity: a certificate and key from the configuration (a renewed pair
//! written over the files is served without a restart: spindle-tls), or a self-signed pair
//! generated on first start and kept in the data directory (so clients that pinned it keep
//! working across restarts).

use std::path::{Path, PathBuf};

use spindle_tls::CertFiles;
use tokio_rustls::TlsAcceptor;

/// Where a generated pair is kept, inside the data directory.
pub const GENERATED_DIR: &str = "tls";

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error(transparent)]
    Files(#[from] spindle_tls::TlsError),
    #[error("generating a self-signed certificate: {0}")]
    Generate(String),
    #[error("TLS configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Builds the acceptor from `cert`/`key` PEM files, generating them under `data_dir` if unset.
/// Inside a tokio runtime (the files are watched for a renewal).
pub fn acceptor(cert: Option<&Path>, key: Option<&Path>, data_dir: &Path) -> Result<TlsAcceptor, TlsError> {
    let (cert_path, key_path) = match (cert, key) {
        (Some(c), Some(k)) => (c.to_path_buf(), k.to_path_buf()),
        (None, None) => generated_pair(data_dir)?,
        _ => return Err(TlsError::Config("tls_cert and tls_key must be given together".into())),
    };
    Ok(spindle_tls::acceptor(CertFiles { cert: cert_path, key: key_path }, &[])?)
}

fn generated_pair(data_dir: &Path) -> Result<(PathBuf, PathBuf), TlsError> {
    let dir = data_dir.join(GENERATED_DIR);
    let cert_path = dir.join("cert.pem");
    let key_path = dir.join("key.pem");
    if cert_path.exists() && key_path.exists() {
        return Ok((cert_path, key_path));
    }
    spindle_engine::dirsync::create_dir_all(&dir)?;
    let names = vec!["localhost".to_string(), "127.0.0.1".to_string(), "spindle-drive".to_string()];
    let generated = rcgen::generate_simple_self_signed(names).map_err(|e| TlsError::Generate(e.to_string()))?;
    spindle_engine::dirsync::write_atomically(&key_path, generated.signing_key.serialize_pem().as_bytes(), 0o600)?;
    spindle_engine::dirsync::write_atomically(&cert_path, generated.cert.pem().as_bytes(), 0o644)?;
    // Both names durable at once: clients pin this certificate, so a power cut must not take it.
    spindle_engine::dirsync::sync_dir(&dir)?;
    Ok((cert_path, key_path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn generates_once_and_reuses() {
        let dir = std::env::temp_dir().join(format!("spindle-tls-test-{}", std::process::id()));
        acceptor(None, None, &dir).unwrap();
        let first = std::fs::read(dir.join(GENERATED_DIR).join("cert.pem")).unwrap();
        acceptor(None, None, &dir).unwrap();
        assert_eq!(std::fs::read(dir.join(GENERATED_DIR).join("cert.pem")).unwrap(), first);
        assert!(matches!(acceptor(Some(&dir.join("nope.pem")), None, &dir), Err(TlsError::Config(_))));
        assert!(matches!(
            acceptor(Some(&dir.join("nope.pem")), Some(&dir.join("nope.key")), &dir),
            Err(TlsError::Files(spindle_tls::TlsError::Certificate { .. }))
        ));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
