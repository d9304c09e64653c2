//! Provisioning a drive for a secured cluster, over TLS and only through Kinetic: its
//! certificate must be issued by the cluster's CA (a drive serving another cluster's, or a
//! self-signed one, is refused before anything is sent), then, as the factory identity or an
//! administrator the operator names, its ACL is replaced by the cluster's identity (just the
//! permissions the cluster uses, usable only over TLS), the cluster's own administrator
//! (every permission, TLS only: what later changes the ACL, as a key rotation does), the
//! administrator if one was named, and the factory identity only if the operator keeps it;
//! the lock and erase PINs are set if given. A drive that already takes the cluster's
//! identity is left as it is.

use std::time::Duration;

use bytes::Bytes;
use spindle_client::{AclEntry, AclScope, Client, ClientConfig, ClientError, StatusCode};

use crate::credentials::Credentials;
use crate::{ClusterError, ProvisionError};

/// What the cluster's identity may do on its drives: data, ranges, fencing (SETUP: the
/// cluster version), pushes between drives and health logs; never SECURITY or power.
pub const CLUSTER_PERMISSIONS: [&str; 7] = ["READ", "WRITE", "DELETE", "RANGE", "SETUP", "P2POP", "GETLOG"];
/// Everything, for an administrator kept on the drive (over TLS only).
const ADMIN_PERMISSIONS: [&str; 9] = ["READ", "WRITE", "DELETE", "RANGE", "SETUP", "P2POP", "GETLOG", "SECURITY", "POWER_MANAGEMENT"];

/// Who provisions the drive, and what to leave on it.
#[derive(Debug, Clone)]
pub struct Provisioning {
    /// The identity that may change the drive's ACL: the factory identity 1 with its
    /// well-known key unless the operator names another.
    pub admin_identity: i64,
    pub admin_key: String,
    /// Keep the factory identity (1) on the drive; by default it is removed.
    pub keep_factory_identity: bool,
    /// PINs to set (the current ones given if the drive has any).
    pub lock_pin: Option<(String, String)>,
    pub erase_pin: Option<(String, String)>,
    pub timeout: Duration,
}

impl Default for Provisioning {
    fn default() -> Self {
        Provisioning {
            admin_identity: spindle_proto::DEFAULT_IDENTITY,
            admin_key: String::from_utf8_lossy(spindle_proto::DEFAULT_HMAC_KEY).into_owned(),
            keep_factory_identity: false,
            lock_pin: None,
            erase_pin: None,
            timeout: Duration::from_secs(10),
        }
    }
}

/// What provisioning found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Provisioned {
    /// The drive already took the cluster's identity: nothing changed.
    Already,
    /// The ACL was replaced (and the PINs set, if given).
    Done,
}

fn drive_error(addr: &str, e: ClientError) -> ClusterError {
    ClusterError::Drive { drive: addr.to_string(), source: e }
}

/// Whether a connection failed in the TLS handshake on the drive's certificate.
fn certificate_refused(e: &ClientError) -> bool {
    matches!(e, ClientError::Io(io) if io.to_string().contains("certificate") || io.to_string().contains("UnknownIssuer") || io.to_string().contains("NotValidForName"))
}

/// Whether a drive refused the identity (unknown, or a wrong key).
fn identity_refused(e: &ClientError) -> bool {
    // An unknown identity's request is answered without a signature it can check.
    matches!(e.status(), Some(StatusCode::HmacFailure | StatusCode::NotAuthorized)) || matches!(e, ClientError::Terminated(_) | ClientError::BadResponseHmac)
}

/// Connects to the drive's TLS port at `addr` as `identity`, trusting only the cluster's CA,
/// and checks the identity with a NOOP (a cluster-version refusal means it was accepted).
async fn sign_in(addr: &str, creds: &Credentials, identity: i64, key: &str, timeout: Duration) -> Result<Client, ClientError> {
    let config = ClientConfig { identity, hmac_key: Bytes::from(key.to_string()), cluster_version: 0, timeout, tls_trust: Some(creds.ca_path()), dialer: None };
    let client = tokio::time::timeout(timeout, Client::connect(addr, config)).await.map_err(|_| ClientError::Timeout(timeout))??;
    // Administration goes at the drive's cluster version (its sign-on tells it): a drive in
    // the cluster is fenced to the map's epoch.
    let client = client.at_cluster_version(crate::fence::drive_version(&client));
    match client.noop().await {
        Ok(()) => Ok(client),
        Err(e) if e.status() == Some(StatusCode::VersionFailure) => Ok(client),
        Err(e) => Err(e),
    }
}

/// Provisions the drive whose TLS port is `addr` for the cluster of `creds`.
pub async fn provision(addr: &str, cluster: &str, creds: &Credentials, how: &Provisioning) -> Result<Provisioned, ClusterError> {
    match sign_in(addr, creds, creds.identity, &creds.hmac_key, how.timeout).await {
        Ok(_) => return Ok(Provisioned::Already),
        Err(e) if certificate_refused(&e) => {
            return Err(ProvisionError::ForeignCertificate { addr: addr.to_string(), cluster: cluster.to_string(), source: e }.into())
        }
        Err(e) if identity_refused(&e) => {}
        Err(e) => return Err(drive_error(addr, e)),
    }
    let admin = match sign_in(addr, creds, how.admin_identity, &how.admin_key, how.timeout).await {
        Ok(c) => c,
        Err(e) if identity_refused(&e) => {
            return Err(ProvisionError::NoAdministrator { addr: addr.to_string(), cluster: cluster.to_string(), admin: how.admin_identity }.into())
        }
        Err(e) => return Err(drive_error(addr, e)),
    };
    let cluster_admin = creds.admin()?;
    let mut identities = vec![(creds.identity, creds.hmac_key.clone())];
    if let Some(next) = creds.next()? {
        identities.push((next.identity, next.hmac_key));
    }
    let named = (how.admin_identity != spindle_proto::DEFAULT_IDENTITY).then(|| (how.admin_identity, how.admin_key.clone()));
    let factory_key = if how.admin_identity == spindle_proto::DEFAULT_IDENTITY { how.admin_key.clone() } else { String::from_utf8_lossy(spindle_proto::DEFAULT_HMAC_KEY).into_owned() };
    let acl = acl(&identities, cluster_admin.into_iter().chain(named).collect(), how.keep_factory_identity.then_some(factory_key));
    // PINs first: the ACL change may remove the identity this connection signed in as.
    if let Some((old, new)) = &how.lock_pin {
        admin.set_lock_pin(old.as_bytes(), new.as_bytes()).await.map_err(|e| drive_error(addr, e))?;
    }
    if let Some((old, new)) = &how.erase_pin {
        admin.set_erase_pin(old.as_bytes(), new.as_bytes()).await.map_err(|e| drive_error(addr, e))?;
    }
    admin.set_acl(acl).await.map_err(|e| drive_error(addr, e))?;
    // The cluster's identity works now.
    sign_in(addr, creds, creds.identity, &creds.hmac_key, how.timeout).await.map_err(|e| drive_error(addr, e))?;
    Ok(Provisioned::Done)
}

/// A cluster drive's ACL: the cluster's `identities` (one, or two while a rotation runs) with
/// the data permissions, `admins` with every permission, all TLS-only; and the factory
/// identity (its key given) over any transport if kept.
pub fn acl(identities: &[(i64, String)], admins: Vec<(i64, String)>, factory: Option<String>) -> Vec<spindle_client::Acl> {
    let scope = |permissions: &[&str], tls_required: bool| AclScope { offset: 0, value: String::new(), permissions: permissions.iter().map(|p| p.to_string()).collect(), tls_required };
    let mut entries: Vec<AclEntry> = identities.iter().map(|(id, key)| AclEntry { identity: *id, key: key.clone(), scopes: vec![scope(&CLUSTER_PERMISSIONS, true)], max_priority: None }).collect();
    entries.extend(admins.into_iter().map(|(id, key)| AclEntry { identity: id, key, scopes: vec![scope(&ADMIN_PERMISSIONS, true)], max_priority: None }));
    if let Some(key) = factory {
        entries.push(AclEntry { identity: spindle_proto::DEFAULT_IDENTITY, key, scopes: vec![scope(&ADMIN_PERMISSIONS, false)], max_priority: None });
    }
    // Every permission name above is one the protocol knows.
    entries.iter().filter_map(|e| e.to_proto().ok()).collect()
}

/// Replaces a cluster drive's ACL, signed in over TLS as the cluster's administrator (a key
/// rotation's step): `identities` with the data permissions, the administrator kept, the
/// factory identity too if `factory` gives its key.
pub async fn set_cluster_acl(addr: &str, creds: &Credentials, identities: &[(i64, String)], factory: Option<String>, timeout: Duration) -> Result<(), ClusterError> {
    let (admin_id, admin_key) = creds.admin()?.ok_or_else(|| ProvisionError::NoClusterAdministrator { dir: creds.dir.clone() })?;
    let list = acl(identities, vec![(admin_id, admin_key.clone())], factory);
    let mut attempt = 1;
    loop {
        let admin = sign_in(addr, creds, admin_id, &admin_key, timeout).await.map_err(|e| drive_error(addr, e))?;
        match admin.set_acl(list.clone()).await {
            // A coordinator fenced the drive to a newer epoch between its sign-on and the
            // request (a drive just restarted is re-fenced): sign in again at the new one.
            Err(e) if e.status() == Some(StatusCode::VersionFailure) && attempt < SET_ACL_ATTEMPTS => attempt += 1,
            done => return done.map_err(|e| drive_error(addr, e)),
        }
    }
}

/// How often a step that meets a drive being fenced to a newer epoch signs in again: each
/// fencing moves the drive once, so a second attempt nearly always lands.
const SET_ACL_ATTEMPTS: u32 = 5;
