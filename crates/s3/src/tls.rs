//! HTTPS: the gateway's certificate and key from PEM files, taken again when the files change
//! (spindle-tls: a renewed certificate is served without a restart; handshakes in progress
//! keep the one they started with).

pub use spindle_tls::CertFiles;
use tokio_rustls::TlsAcceptor;

use crate::GatewayError;

/// The acceptor for `files`, offering HTTP/1.1 by ALPN (the only protocol served).
pub fn acceptor(files: CertFiles) -> Result<TlsAcceptor, GatewayError> {
    spindle_tls::acceptor(files, &[b"http/1.1"]).map_err(|e| GatewayError::Invalid(e.to_string()))
}
