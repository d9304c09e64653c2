//! The cluster's certificate authority: made with the credentials, issuing the certificates
//! drives (and the hosts' etcd members) serve, and replaced without downtime.
//!
//! A CA rotation has two steps. `begin` makes a new CA beside the old one (`ca.next.pem`,
//! `ca-key.next.pem`) and has `ca.pem` trust both, the old first; from then on certificates are
//! issued by the new CA. The operator hands the two-CA `ca.pem` to every server and client,
//! then renews every certificate. `finish`, once every drive serves a certificate of the new
//! CA, retires the old one: `ca.pem` and `ca-key.pem` become the new CA's, and the old CA is
//! kept as `ca.old.pem` and `ca-key.old.pem` for the record, trusted by nothing.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;

use crate::secret_file::{content, io_at, replace_file, write_secret};
use crate::{ClusterError, CredentialsError, SettingError};

/// The CA's certificate and its key in the credentials directory.
pub const CA_FILE: &str = "ca.pem";
pub const CA_KEY_FILE: &str = "ca-key.pem";

/// The CA a rotation moves to, while it runs.
pub const CA_NEXT_FILE: &str = "ca.next.pem";
pub const CA_KEY_NEXT_FILE: &str = "ca-key.next.pem";
/// The CA the last rotation retired.
pub const CA_OLD_FILE: &str = "ca.old.pem";
pub const CA_KEY_OLD_FILE: &str = "ca-key.old.pem";

/// Validity of a CA and of the certificates it issues (both renewed well before:
/// docs/deploy.md).
const CA_DAYS: i64 = 3650;
pub const DRIVE_DAYS: i64 = 825;

const PEM_END: &str = "-----END CERTIFICATE-----";

/// The certificates in PEM text, in order.
pub fn certificates(pem: &str) -> Result<Vec<CertificateDer<'static>>, rustls_pki_types::pem::Error> {
    CertificateDer::pem_slice_iter(pem.as_bytes()).collect()
}

/// SHA-256 of a certificate (DER), hex: how the map names a CA.
pub fn sha256_hex(der: &CertificateDer<'_>) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(der.as_ref()).iter().map(|b| format!("{b:02x}")).collect()
}

/// The PEM blocks of `pem` whose certificate is not `except`, as text.
fn blocks_except(pem: &str, except: &CertificateDer<'_>) -> String {
    let mut kept = String::new();
    for block in pem.split_inclusive(PEM_END) {
        let is_except = CertificateDer::from_pem_slice(block.as_bytes()).is_ok_and(|c| c == *except);
        if block.contains(PEM_END) && !is_except {
            kept.push_str(block.trim_start());
            kept.push('\n');
        }
    }
    kept
}

/// A new CA for `cluster`, its key written to `key_path` (a secret) and its certificate to
/// `cert_path`; returns the certificate (PEM). A rotation's CA carries `generation` in its name,
/// so that no chain can be built through the CA it replaces by name alone.
pub(crate) fn new_ca(cluster: &str, generation: Option<&str>, cert_path: &Path, key_path: &Path) -> Result<String, ClusterError> {
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(CredentialsError::Certificate)?;
    let mut name = DistinguishedName::new();
    name.push(DnType::OrganizationName, "Spindle");
    name.push(DnType::CommonName, match generation {
        None => format!("Spindle cluster {cluster} CA"),
        Some(g) => format!("Spindle cluster {cluster} CA {g}"),
    });
    params.distinguished_name = name;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    params.not_before = time::OffsetDateTime::now_utc();
    params.not_after = params.not_before + time::Duration::days(CA_DAYS);
    let key = KeyPair::generate().map_err(CredentialsError::Certificate)?;
    let cert = params.self_signed(&key).map_err(CredentialsError::Certificate)?;
    write_secret(key_path, &key.serialize_pem())?;
    std::fs::write(cert_path, cert.pem()).map_err(io_at(cert_path))?;
    Ok(cert.pem())
}

/// The cluster's CA as a credentials directory holds it.
pub struct Authority<'a> {
    pub dir: &'a Path,
    pub cluster: &'a str,
    /// What `ca.pem` holds: the CA, or the old and the new while a rotation runs.
    pub ca_pem: &'a str,
}

impl Authority<'_> {
    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn ca_path(&self) -> PathBuf {
        self.dir.join(CA_FILE)
    }

    /// The certificate of the CA a rotation in progress moves to (PEM), if one is.
    pub fn next_ca(&self) -> Result<Option<String>, ClusterError> {
        let path = self.file(CA_NEXT_FILE);
        match std::fs::read_to_string(&path) {
            Ok(pem) => Ok(Some(pem)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_at(&path)(e)),
        }
    }

    /// The CA that issues certificates now (its certificate as PEM, and its key): the new one
    /// while a rotation runs.
    fn issuing_ca(&self) -> Result<(String, KeyPair), ClusterError> {
        let (cert_pem, key_path) = match self.next_ca()? {
            Some(pem) => (pem, self.file(CA_KEY_NEXT_FILE)),
            None => (self.ca_pem.to_string(), self.file(CA_KEY_FILE)),
        };
        let key_pem = std::fs::read_to_string(&key_path).map_err(io_at(&key_path))?;
        let key = KeyPair::from_pem(&key_pem).map_err(|e| content(&key_path, e))?;
        Ok((cert_pem, key))
    }

    /// A certificate and key for a server reachable at `names` (IP addresses or DNS names),
    /// issued by the cluster's CA (the new one during a CA rotation; its key read from the
    /// credentials), written to `out` as `cert.pem` (the server's, then the CA's) and `key.pem`
    /// (mode 0600): a drive's `tls_cert` and `tls_key`.
    pub fn issue(&self, names: &[String], out: &Path) -> Result<(PathBuf, PathBuf), ClusterError> {
        if names.is_empty() {
            return Err(SettingError::CertificateNames { names: Vec::new(), reason: "a certificate needs at least one IP address or DNS name".into() }.into());
        }
        let (ca_pem, ca_key) = self.issuing_ca()?;
        let issuer = Issuer::from_ca_cert_pem(&ca_pem, ca_key).map_err(CredentialsError::Certificate)?;
        let mut params = CertificateParams::new(names.to_vec()).map_err(|e| SettingError::CertificateNames { names: names.to_vec(), reason: e.to_string() })?;
        let mut name = DistinguishedName::new();
        name.push(DnType::OrganizationName, "Spindle");
        name.push(DnType::CommonName, format!("Spindle drive {}", names[0]));
        params.distinguished_name = name;
        params.not_before = time::OffsetDateTime::now_utc();
        params.not_after = params.not_before + time::Duration::days(DRIVE_DAYS);
        // Client use too: a host's etcd member presents it to the others (peer TLS with
        // client-certificate authentication, as docs/deploy.md sets etcd up).
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth, rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate().map_err(CredentialsError::Certificate)?;
        let cert = params.signed_by(&key, &issuer).map_err(CredentialsError::Certificate)?;
        std::fs::create_dir_all(out).map_err(io_at(out))?;
        let (cert_path, key_path) = (out.join("cert.pem"), out.join("key.pem"));
        // The key first: a server that looks between the two writes finds a pair that does
        // not match and keeps serving its old one (spindle-tls).
        if key_path.exists() {
            std::fs::remove_file(&key_path).map_err(io_at(&key_path))?;
        }
        write_secret(&key_path, &key.serialize_pem())?;
        replace_file(&cert_path, &format!("{}{}", cert.pem(), ca_pem))?;
        Ok((cert_path, key_path))
    }

    /// Begins a CA rotation (or resumes one begun): a new CA, and `ca.pem` trusting the old
    /// and the new.
    pub fn begin_rotation(&self) -> Result<(), ClusterError> {
        let next = match self.next_ca()? {
            Some(pem) => pem,
            None => {
                // A key without its certificate is a begin cut short: made again.
                let key = self.file(CA_KEY_NEXT_FILE);
                if key.exists() {
                    std::fs::remove_file(&key).map_err(io_at(&key))?;
                }
                let generation = time::OffsetDateTime::now_utc().unix_timestamp().to_string();
                new_ca(self.cluster, Some(&generation), &self.file(CA_NEXT_FILE), &key)?
            }
        };
        let next_der = certificates(&next).map_err(|e| content(&self.file(CA_NEXT_FILE), e))?;
        let trusted = certificates(self.ca_pem).map_err(|e| content(&self.ca_path(), e))?;
        if !next_der.iter().all(|c| trusted.contains(c)) {
            replace_file(&self.ca_path(), &format!("{}{}", self.ca_pem, next))?;
        }
        Ok(())
    }

    /// Ends a CA rotation in the directory: the new CA becomes `ca.pem` and `ca-key.pem`
    /// alone, the old one `ca.old.pem` and `ca-key.old.pem`. Safe to run again after a crash.
    pub fn finish_rotation(&self) -> Result<(), ClusterError> {
        let Some(next) = self.next_ca()? else {
            return Err(content(&self.file(CA_NEXT_FILE), "no CA rotation in progress"));
        };
        let (key, next_key, old_key) = (self.file(CA_KEY_FILE), self.file(CA_KEY_NEXT_FILE), self.file(CA_KEY_OLD_FILE));
        if next_key.exists() {
            let next_der = certificates(&next).map_err(|e| content(&self.file(CA_NEXT_FILE), e))?;
            let old = next_der.iter().fold(self.ca_pem.to_string(), |pem, c| blocks_except(&pem, c));
            replace_file(&self.file(CA_OLD_FILE), &old)?;
            // A finish cut short between the two renames has no current key left to retire.
            if key.exists() {
                std::fs::rename(&key, &old_key).map_err(io_at(&key))?;
            }
            std::fs::rename(&next_key, &key).map_err(io_at(&next_key))?;
        }
        std::fs::rename(self.file(CA_NEXT_FILE), self.ca_path()).map_err(io_at(&self.ca_path()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Credentials;
    use rustls::client::danger::ServerCertVerifier;

    /// Whether a server presenting the chain in `cert` is trusted by the CAs in `trust`, as a
    /// client checks it.
    fn verifies(trust: &str, cert: &Path) -> bool {
        let chain: Vec<_> = CertificateDer::pem_file_iter(cert).unwrap().map(Result::unwrap).collect();
        let mut roots = rustls::RootCertStore::empty();
        for c in certificates(trust).unwrap() {
            roots.add(c).unwrap();
        }
        let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(std::sync::Arc::new(roots), provider).build().unwrap();
        let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
        verifier.verify_server_cert(&chain[0], &chain[1..], &name, &[], rustls_pki_types::UnixTime::now()).is_ok()
    }

    /// A CA rotation: while it runs, `ca.pem` trusts certificates of both CAs and new ones come
    /// from the new CA; begin and finish both resume; after it only the new CA is trusted and
    /// issues, and the map's fingerprint moves with it.
    #[test]
    fn the_ca_rotates_in_two_steps_each_safe_to_repeat() {
        let dir = tempfile::tempdir().unwrap();
        let creds = Credentials::generate(dir.path(), "prod").unwrap();
        let old_ca = creds.ca_pem.clone();
        let (before, _) = creds.issue(&["127.0.0.1".into()], &dir.path().join("before")).unwrap();
        assert!(creds.finish_ca_rotation().is_err(), "finish without begin");

        let during = creds.begin_ca_rotation().unwrap();
        let again = creds.begin_ca_rotation().unwrap();
        assert_eq!(during.ca_pem, again.ca_pem, "a begun rotation resumes");
        assert_eq!(certificates(&during.ca_pem).unwrap().len(), 2);
        let next_ca = during.next_ca().unwrap().unwrap();
        let (renewed, _) = during.issue(&["127.0.0.1".into()], &dir.path().join("renewed")).unwrap();
        assert!(verifies(&during.ca_pem, &before) && verifies(&during.ca_pem, &renewed), "both CAs trusted while it runs");
        assert!(verifies(&next_ca, &renewed) && !verifies(&next_ca, &before), "renewed certificates come from the new CA");
        // The map admits credentials on either side of the rotation while it runs.
        let map = crate::credentials::Fingerprint { next_ca_sha256: Some(during.fingerprint().unwrap().ca_sha256), ..creds.fingerprint().unwrap() };
        assert!(map.admits(&creds.fingerprint().unwrap()) && map.admits(&during.fingerprint().unwrap()));

        during.finish_ca_rotation().unwrap();
        assert!(during.finish_ca_rotation().is_err(), "nothing left to finish");
        let after = Credentials::load(dir.path()).unwrap();
        assert_eq!(after.ca_pem, next_ca);
        assert_eq!(std::fs::read_to_string(dir.path().join(CA_OLD_FILE)).unwrap().trim(), old_ca.trim());
        assert!(dir.path().join(CA_KEY_OLD_FILE).exists() && !dir.path().join(CA_KEY_NEXT_FILE).exists());
        assert!(!verifies(&after.ca_pem, &before), "the old CA is trusted no more");
        let (later, _) = after.issue(&["127.0.0.1".into()], &dir.path().join("later")).unwrap();
        assert!(verifies(&after.ca_pem, &later), "the new CA's key issues");
        assert_eq!(after.fingerprint().unwrap().ca_sha256, during.fingerprint().unwrap().ca_sha256);
        assert!(!after.fingerprint().unwrap().admits(&creds.fingerprint().unwrap()), "credentials of the old CA alone are refused");
    }

    /// A finish cut short between its renames (the old key retired, the new not yet in
    /// place) completes when run again.
    #[test]
    fn a_finish_cut_short_completes_when_run_again() {
        let dir = tempfile::tempdir().unwrap();
        let during = Credentials::generate(dir.path(), "prod").unwrap().begin_ca_rotation().unwrap();
        let next_ca = during.next_ca().unwrap().unwrap();
        std::fs::rename(dir.path().join(CA_KEY_FILE), dir.path().join(CA_KEY_OLD_FILE)).unwrap();
        during.finish_ca_rotation().unwrap();
        let after = Credentials::load(dir.path()).unwrap();
        assert_eq!(after.ca_pem, next_ca);
        let (cert, _) = after.issue(&["127.0.0.1".into()], &dir.path().join("d")).unwrap();
        assert!(verifies(&after.ca_pem, &cert));
    }
}
