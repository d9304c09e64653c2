use std::sync::Arc;

use rcgen::{CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::ServerName;
use tokio_rustls::TlsConnector;

use super::*;

/// A CA and a leaf for `localhost` signed by it: (the CA's DER, the leaf chain's PEM, its key's).
fn issued(ca_name: &str) -> (CertificateDer<'static>, String, String) {
    issued_with_ca_pem(ca_name).1
}

/// As `issued`, with the CA's certificate as PEM first.
fn issued_with_ca_pem(ca_name: &str) -> (String, (CertificateDer<'static>, String, String)) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name.push(rcgen::DnType::CommonName, ca_name);
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".to_string()]).unwrap().signed_by(&leaf_key, &issuer).unwrap();
    (ca_cert.pem(), (ca_cert.der().clone(), leaf.pem(), leaf_key.serialize_pem()))
}

fn write(files: &CertFiles, pair: &(CertificateDer<'static>, String, String)) {
    std::fs::write(&files.cert, &pair.1).unwrap();
    std::fs::write(&files.key, &pair.2).unwrap();
}

/// Whether a client trusting only `ca` completes a handshake with `acceptor`.
async fn trusted_by(acceptor: &TlsAcceptor, ca: &CertificateDer<'static>) -> bool {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider).with_safe_default_protocol_versions().unwrap().with_root_certificates(roots).with_no_client_auth();
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    let server = {
        let acceptor = acceptor.clone();
        tokio::spawn(async move { acceptor.accept(server_io).await.is_ok() })
    };
    // The client's side stays open until the server's handshake is over (TLS 1.3 sends its
    // tickets after the client is done).
    let client = TlsConnector::from(Arc::new(config)).connect(ServerName::try_from("localhost").unwrap(), client_io).await;
    let server = server.await.unwrap();
    client.is_ok() && server
}

/// A pair written over the files is served from the next check on; a pair that does not load
/// (a key of another certificate, a truncated file) leaves the one served as it was.
#[tokio::test(start_paused = true)]
async fn a_renewed_pair_is_served_without_a_restart_and_a_bad_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let files = CertFiles { cert: dir.path().join("cert.pem"), key: dir.path().join("key.pem") };
    let (first, second) = (issued("first"), issued("second"));
    write(&files, &first);
    let acceptor = acceptor(files.clone(), &[]).unwrap();
    assert!(trusted_by(&acceptor, &first.0).await);
    assert!(!trusted_by(&acceptor, &second.0).await);

    // A mismatched pair: the new certificate with the old key.
    std::fs::write(&files.cert, &second.1).unwrap();
    tokio::time::sleep(RELOAD_CHECK * 3).await;
    assert!(trusted_by(&acceptor, &first.0).await, "a mismatched pair replaced the served one");
    std::fs::write(&files.key, &second.2[..second.2.len() / 2]).unwrap();
    tokio::time::sleep(RELOAD_CHECK * 3).await;
    assert!(trusted_by(&acceptor, &first.0).await, "a truncated key replaced the served one");

    std::fs::write(&files.key, &second.2).unwrap();
    tokio::time::sleep(RELOAD_CHECK * 3).await;
    assert!(trusted_by(&acceptor, &second.0).await, "the renewed pair is not served");
    assert!(!trusted_by(&acceptor, &first.0).await);
}

#[test]
fn a_pair_that_does_not_load_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let files = CertFiles { cert: dir.path().join("cert.pem"), key: dir.path().join("key.pem") };
    assert!(matches!(files.load(), Err(TlsError::Certificate { path, .. }) if path == files.cert));
    let pair = issued("ca");
    std::fs::write(&files.cert, &pair.1).unwrap();
    assert!(matches!(files.load(), Err(TlsError::Key { path, .. }) if path == files.key));
    std::fs::write(&files.cert, "").unwrap();
    let e = files.load().err().unwrap().to_string();
    assert!(e.contains("no certificate"), "{e}");
}

/// AES-128-GCM first, TLS 1.3 before 1.2, and no suite of aws-lc's left out.
#[test]
fn suites_prefer_aes_128_and_keep_every_one() {
    let ours: Vec<_> = provider().cipher_suites.iter().map(|s| s.suite()).collect();
    assert_eq!(ours[0], rustls::CipherSuite::TLS13_AES_128_GCM_SHA256);
    assert!(ours.iter().position(|s| *s == rustls::CipherSuite::TLS13_AES_256_GCM_SHA384) < ours.iter().position(|s| *s == rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256));
    let mut all: Vec<_> = rustls::crypto::aws_lc_rs::default_provider().cipher_suites.iter().map(|s| s.suite()).collect();
    let mut sorted = ours.clone();
    all.sort_by_key(|s| u16::from(*s));
    sorted.sort_by_key(|s| u16::from(*s));
    assert_eq!(all, sorted);
}

/// A trust file that is missing or holds no certificate is refused, named.
#[test]
fn a_trust_file_without_a_certificate_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.pem");
    assert!(matches!(connector(&missing), Err(TlsError::Certificate { path, .. }) if path == missing));
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let e = connector(&empty).err().unwrap().to_string();
    assert!(e.contains("no certificate") && e.contains("empty.pem"), "{e}");
    let chain = dir.path().join("chain.pem");
    std::fs::write(&chain, issued("ca").1).unwrap();
    assert!(connector(&chain).is_ok());
}

/// A session opened through `connect` and `accept` (read through their buffer, sending up to
/// their limit) carries values larger than both, each way, byte for byte, while the other
/// side reads in small pieces.
#[tokio::test]
async fn buffered_sessions_carry_large_values_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let files = CertFiles { cert: dir.path().join("cert.pem"), key: dir.path().join("key.pem") };
    let (ca_pem, pair) = issued_with_ca_pem("Buffered CA");
    write(&files, &pair);
    std::fs::write(dir.path().join("ca.pem"), ca_pem).unwrap();
    let acceptor = acceptor(files, &[]).unwrap();
    let connector = connector(&dir.path().join("ca.pem")).unwrap();
    let value: Vec<u8> = (0..3 * SEND_BUFFER + 12_345).map(|i| (i * 31 % 251) as u8).collect();
    let (client_io, server_io) = tokio::io::duplex(8 * 1024);
    let server = {
        let value = value.clone();
        tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut s = accept(&acceptor, server_io).await.unwrap();
            let mut got = vec![0u8; value.len()];
            for chunk in got.chunks_mut(1000) {
                s.read_exact(chunk).await.unwrap();
            }
            assert!(got == value, "the server read other bytes");
            s.write_all(&value).await.unwrap();
            s.flush().await.unwrap();
        })
    };
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut c = connect(&connector, ServerName::try_from("localhost").unwrap(), client_io).await.unwrap();
    c.write_all(&value).await.unwrap();
    c.flush().await.unwrap();
    let mut back = vec![0u8; value.len()];
    c.read_exact(&mut back).await.unwrap();
    assert!(back == value, "the client read other bytes");
    server.await.unwrap();
}
