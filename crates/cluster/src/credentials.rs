//! The cluster's own credentials: a Kinetic identity and HMAC key that every drive of the
//! cluster holds (installed by `provision`, usable only over TLS), and a certificate authority
//! whose certificates the drives serve and every connection to a drive is checked against.
//!
//! They live in a directory the operator keeps and hands out (never in etcd: the map records
//! only the identity's number and the CA certificate's SHA-256, to tell credentials of another
//! cluster):
//! - `identity.json` — `{"cluster": NAME, "identity": N, "hmac_key": "..."}`: the secret coordinators,
//!   gateways and clients need (mode 0600);
//! - `ca.pem` — the CA certificate (public: drives' `p2p_tls_trust`, clients' trust);
//! - `ca-key.pem` — the CA's private key (mode 0600): needed only to issue drive certificates
//!   (`issue`), so it can stay on the operator's machine.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use spindle_client::ClientConfig;

use crate::secret_file::{content, io_at, write_secret};
use crate::ClusterError;

pub const IDENTITY_FILE: &str = "identity.json";
pub use crate::ca::{CA_FILE, CA_KEY_FILE};
/// The cluster's administrator on its drives (SECURITY, for rotations): the operator's only.
pub const ADMIN_FILE: &str = "admin.json";
/// The identity a rotation moves to, and the one it left.
pub const NEXT_FILE: &str = "identity.next.json";
pub const OLD_FILE: &str = "identity.old.json";
/// The cluster's etcd user (`cluster secure-etcd`), and etcd's root, both secrets.
pub const ETCD_USER_FILE: &str = "etcd.json";
pub const ETCD_ROOT_FILE: &str = "etcd-root.json";
/// Cluster identities are drawn from here up: far from the factory identity 1 and the small
/// numbers operators give administrators.
const IDENTITY_BASE: i64 = 1 << 40;
/// Random bytes in an HMAC key (hex-encoded: Kinetic clients treat keys as text).
const HMAC_KEY_BYTES: usize = 32;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct EtcdUserFile {
    user: String,
    password: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct IdentityFile {
    cluster: String,
    identity: i64,
    hmac_key: String,
}

/// What the map records of the credentials: public, enough to tell another cluster's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    pub identity: i64,
    /// SHA-256 of the CA certificate (DER), hex.
    pub ca_sha256: String,
    /// During a key rotation (`rotate-key begin` .. `finish`): the identity it moves to, which
    /// the drives take as well.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_identity: Option<i64>,
    /// During a CA rotation (`rotate-ca begin` .. `finish`): the new CA's SHA-256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_ca_sha256: Option<String>,
}

impl Fingerprint {
    /// Whether credentials with fingerprint `theirs` are this cluster's (its CA or the one a
    /// CA rotation moves to, and its identity or the one a key rotation moves to).
    pub fn admits(&self, theirs: &Fingerprint) -> bool {
        let ca = self.ca_sha256 == theirs.ca_sha256 || self.next_ca_sha256.as_ref() == Some(&theirs.ca_sha256);
        ca && (theirs.identity == self.identity || Some(theirs.identity) == self.next_identity)
    }
}

/// A fresh identity number and HMAC key.
fn new_identity(cluster: &str) -> IdentityFile {
    let mut raw = [0u8; HMAC_KEY_BYTES];
    rand::rng().fill_bytes(&mut raw);
    IdentityFile { cluster: cluster.to_string(), identity: IDENTITY_BASE + i64::from(rand::random::<u32>()), hmac_key: raw.iter().map(|b| format!("{b:02x}")).collect() }
}

fn read_identity(path: &Path) -> Result<IdentityFile, ClusterError> {
    let text = std::fs::read_to_string(path).map_err(io_at(path))?;
    let file: IdentityFile = serde_json::from_str(&text).map_err(|e| content(path, e))?;
    if file.hmac_key.is_empty() {
        return Err(content(path, "no HMAC key"));
    }
    Ok(file)
}

fn write_identity(path: &Path, file: &IdentityFile) -> Result<(), ClusterError> {
    let text = serde_json::to_string_pretty(file).map_err(|e| content(path, e))?;
    write_secret(path, &text)
}

/// A cluster's credentials, as loaded from their directory.
#[derive(Clone)]
pub struct Credentials {
    pub dir: PathBuf,
    /// The cluster's name (its CA's name carries it).
    pub cluster: String,
    pub identity: i64,
    pub hmac_key: String,
    pub ca_pem: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key is never printed.
        f.debug_struct("Credentials").field("dir", &self.dir).field("cluster", &self.cluster).field("identity", &self.identity).finish_non_exhaustive()
    }
}

impl Credentials {
    /// New credentials for `cluster` in `dir` (created; existing files are never replaced).
    pub fn generate(dir: &Path, cluster: &str) -> Result<Credentials, ClusterError> {
        std::fs::create_dir_all(dir).map_err(io_at(dir))?;
        let file = new_identity(cluster);
        let mut admin = new_identity(cluster);
        while admin.identity == file.identity {
            admin = new_identity(cluster);
        }
        let ca_pem = crate::ca::new_ca(cluster, None, &dir.join(CA_FILE), &dir.join(CA_KEY_FILE))?;
        write_identity(&dir.join(IDENTITY_FILE), &file)?;
        write_identity(&dir.join(ADMIN_FILE), &admin)?;
        Ok(Credentials { dir: dir.to_path_buf(), cluster: cluster.to_string(), identity: file.identity, hmac_key: file.hmac_key, ca_pem })
    }

    /// The credentials in `dir`, made there if it holds none; `true` when made.
    pub fn load_or_generate(dir: &Path, cluster: &str) -> Result<(Credentials, bool), ClusterError> {
        if dir.join(IDENTITY_FILE).exists() {
            Ok((Credentials::load(dir)?, false))
        } else {
            Ok((Credentials::generate(dir, cluster)?, true))
        }
    }

    /// The credentials in `dir` (`identity.json` and `ca.pem`).
    pub fn load(dir: &Path) -> Result<Credentials, ClusterError> {
        let file = read_identity(&dir.join(IDENTITY_FILE))?;
        let ca = dir.join(CA_FILE);
        let ca_pem = std::fs::read_to_string(&ca).map_err(io_at(&ca))?;
        Ok(Credentials { dir: dir.to_path_buf(), cluster: file.cluster, identity: file.identity, hmac_key: file.hmac_key, ca_pem })
    }

    /// The cluster's administrator on its drives (identity, key), if this directory holds it.
    pub fn admin(&self) -> Result<Option<(i64, String)>, ClusterError> {
        let path = self.dir.join(ADMIN_FILE);
        if !path.exists() {
            return Ok(None);
        }
        let f = read_identity(&path)?;
        Ok(Some((f.identity, f.hmac_key)))
    }

    /// The identity a rotation in progress moves to, if any.
    pub fn next(&self) -> Result<Option<Credentials>, ClusterError> {
        let path = self.dir.join(NEXT_FILE);
        if !path.exists() {
            return Ok(None);
        }
        let f = read_identity(&path)?;
        Ok(Some(Credentials { identity: f.identity, hmac_key: f.hmac_key, ..self.clone() }))
    }

    /// Starts a key rotation: a new identity and key in `identity.next.json` (the one there
    /// already if a rotation was begun before).
    pub fn begin_rotation(&self) -> Result<Credentials, ClusterError> {
        if let Some(next) = self.next()? {
            return Ok(next);
        }
        let mut file = new_identity(&self.cluster);
        while file.identity == self.identity || self.admin()?.is_some_and(|(a, _)| a == file.identity) {
            file = new_identity(&self.cluster);
        }
        write_identity(&self.dir.join(NEXT_FILE), &file)?;
        Ok(Credentials { identity: file.identity, hmac_key: file.hmac_key, ..self.clone() })
    }

    /// Ends a rotation in the directory: the next identity becomes `identity.json`, the one
    /// it replaces `identity.old.json`.
    pub fn finish_rotation(&self) -> Result<(), ClusterError> {
        let (current, next, old) = (self.dir.join(IDENTITY_FILE), self.dir.join(NEXT_FILE), self.dir.join(OLD_FILE));
        if !next.exists() {
            return Err(content(&next, "no rotation in progress"));
        }
        std::fs::rename(&current, &old).map_err(io_at(&current))?;
        std::fs::rename(&next, &current).map_err(io_at(&next))
    }

    /// How to reach the cluster's etcd: as its user if `cluster secure-etcd` made one, and
    /// over TLS checked against the CA when `tls` (the endpoints are `https://`).
    pub fn etcd_access(&self, tls: bool) -> Result<crate::etcd_auth::EtcdAccess, ClusterError> {
        let path = self.dir.join(ETCD_USER_FILE);
        let user = match std::fs::read_to_string(&path) {
            Ok(text) => {
                let f: EtcdUserFile = serde_json::from_str(&text).map_err(|e| content(&path, e))?;
                Some((f.user, f.password))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io_at(&path)(e)),
        };
        Ok(crate::etcd_auth::EtcdAccess { ca_pem: tls.then(|| self.ca_pem.clone()), user })
    }

    /// Records an etcd user (`file`: `ETCD_USER_FILE` or `ETCD_ROOT_FILE`), readable by its
    /// owner only.
    pub fn save_etcd_user(&self, file: &str, user: &str, password: &str) -> Result<(), ClusterError> {
        let text = serde_json::to_string_pretty(&EtcdUserFile { user: user.into(), password: password.into() }).map_err(|e| content(&self.dir.join(file), e))?;
        let path = self.dir.join(file);
        if path.exists() {
            std::fs::remove_file(&path).map_err(io_at(&path))?;
        }
        write_secret(&path, &text)
    }

    /// Secures etcd for this cluster (`etcd_auth::secure`) and keeps the passwords here
    /// (`etcd.json`, `etcd-root.json`): `root_password` is etcd's root's if it enforces users
    /// already, else one is made. Returns the cluster's etcd user.
    pub async fn secure_etcd(&self, endpoints: &str, tls: bool, root_password: Option<String>) -> Result<String, ClusterError> {
        let root = root_password.unwrap_or_else(Credentials::new_password);
        let password = Credentials::new_password();
        crate::etcd_auth::secure(endpoints, tls.then(|| self.ca_pem.clone()), &self.cluster, &password, &root).await?;
        self.save_etcd_user(ETCD_ROOT_FILE, "root", &root)?;
        let user = crate::etcd_auth::user_of(&self.cluster);
        self.save_etcd_user(ETCD_USER_FILE, &user, &password)?;
        Ok(user)
    }

    /// A random password for an etcd user.
    pub fn new_password() -> String {
        let mut raw = [0u8; 24];
        rand::rng().fill_bytes(&mut raw);
        raw.iter().map(|b| format!("{b:02x}")).collect()
    }

    pub fn ca_path(&self) -> PathBuf {
        self.dir.join(CA_FILE)
    }

    /// What the map keeps of these credentials: the identity, and the newest CA they trust
    /// (the last in `ca.pem`: the one a CA rotation moves to, while it runs).
    pub fn fingerprint(&self) -> Result<Fingerprint, ClusterError> {
        let newest = crate::ca::certificates(&self.ca_pem).map_err(|e| content(&self.ca_path(), e))?.pop();
        let der = newest.ok_or_else(|| content(&self.ca_path(), "no certificate in the file"))?;
        Ok(Fingerprint { identity: self.identity, ca_sha256: crate::ca::sha256_hex(&der), next_identity: None, next_ca_sha256: None })
    }

    /// How the cluster connects to its drives: as its identity, over TLS, trusting its CA.
    pub fn client_config(&self, timeout: Duration) -> ClientConfig {
        ClientConfig {
            identity: self.identity,
            hmac_key: Bytes::from(self.hmac_key.clone()),
            cluster_version: 0,
            timeout,
            tls_trust: Some(self.ca_path()),
            dialer: None,
        }
    }

    /// The cluster's CA as these credentials hold it.
    fn authority(&self) -> crate::ca::Authority<'_> {
        crate::ca::Authority { dir: &self.dir, cluster: &self.cluster, ca_pem: &self.ca_pem }
    }

    /// A certificate and key for a server reachable at `names` (IP addresses or DNS names),
    /// from the cluster's CA (the new one during a CA rotation), written to `out` as
    /// `cert.pem` and `key.pem`: a drive's `tls_cert` and `tls_key` (`ca::Authority::issue`).
    pub fn issue(&self, names: &[String], out: &Path) -> Result<(PathBuf, PathBuf), ClusterError> {
        self.authority().issue(names, out)
    }

    /// The certificate of the CA a rotation in progress moves to (PEM), if one is.
    pub fn next_ca(&self) -> Result<Option<String>, ClusterError> {
        self.authority().next_ca()
    }

    /// Begins a CA rotation, or resumes one begun; returns the credentials as they are now
    /// (their `ca_pem` both CAs).
    pub fn begin_ca_rotation(&self) -> Result<Credentials, ClusterError> {
        self.authority().begin_rotation()?;
        Credentials::load(&self.dir)
    }

    /// Ends a CA rotation in the directory; safe to run again after a crash.
    pub fn finish_ca_rotation(&self) -> Result<(), ClusterError> {
        self.authority().finish_rotation()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Generated credentials load back, keep their secrets to their owner, and issue drive
    /// certificates that chain to the CA (checked by rustls as a client would).
    #[test]
    fn credentials_round_trip_and_issue_certificates_the_ca_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let made = Credentials::generate(dir.path(), "prod").unwrap();
        let loaded = Credentials::load(dir.path()).unwrap();
        assert_eq!((loaded.identity, &loaded.hmac_key, &loaded.cluster), (made.identity, &made.hmac_key, &made.cluster));
        assert_eq!(made.fingerprint().unwrap(), loaded.fingerprint().unwrap());
        assert!(!format!("{loaded:?}").contains(&loaded.hmac_key), "the key is never printed");
        #[cfg(unix)]
        for secret in [IDENTITY_FILE, CA_KEY_FILE, ADMIN_FILE] {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(secret)).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "{secret} is readable by others");
        }
        // A rotation: the next identity differs, is admitted beside the current one while it
        // runs, and replaces it when it ends.
        let next = loaded.begin_rotation().unwrap();
        assert_ne!(next.identity, loaded.identity);
        assert_eq!(loaded.begin_rotation().unwrap().identity, next.identity, "a begun rotation resumes");
        let during = Fingerprint { next_identity: Some(next.identity), ..loaded.fingerprint().unwrap() };
        assert!(during.admits(&loaded.fingerprint().unwrap()) && during.admits(&next.fingerprint().unwrap()));
        assert!(!loaded.fingerprint().unwrap().admits(&next.fingerprint().unwrap()));
        loaded.finish_rotation().unwrap();
        let after = Credentials::load(dir.path()).unwrap();
        assert_eq!((after.identity, &after.hmac_key), (next.identity, &next.hmac_key));
        assert!(after.next().unwrap().is_none());
        let loaded = after;
        // Generating again over existing credentials is refused, never overwriting.
        assert!(Credentials::generate(dir.path(), "prod").is_err());

        let out = dir.path().join("d1");
        let (cert, _key) = loaded.issue(&["127.0.0.1".into(), "drive1.example".into()], &out).unwrap();
        use rustls::client::danger::ServerCertVerifier;
        use rustls_pki_types::pem::PemObject;
        let chain: Vec<_> = rustls_pki_types::CertificateDer::pem_file_iter(&cert).unwrap().map(Result::unwrap).collect();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(rustls_pki_types::CertificateDer::from_pem_slice(loaded.ca_pem.as_bytes()).unwrap()).unwrap();
        let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(std::sync::Arc::new(roots), provider).build().unwrap();
        let now = rustls_pki_types::UnixTime::now();
        for name in ["127.0.0.1", "drive1.example"] {
            let name = rustls_pki_types::ServerName::try_from(name).unwrap();
            assert!(verifier.verify_server_cert(&chain[0], &chain[1..], &name, &[], now).is_ok(), "{name:?}");
        }
        let other = rustls_pki_types::ServerName::try_from("10.9.9.9").unwrap();
        assert!(verifier.verify_server_cert(&chain[0], &chain[1..], &other, &[], now).is_err());

        // Another cluster's CA does not verify this cluster's drives.
        let stranger = Credentials::generate(&dir.path().join("other"), "other").unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(rustls_pki_types::CertificateDer::from_pem_slice(stranger.ca_pem.as_bytes()).unwrap()).unwrap();
        let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(std::sync::Arc::new(roots), provider).build().unwrap();
        let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
        assert!(verifier.verify_server_cert(&chain[0], &chain[1..], &name, &[], now).is_err());
    }
}
