//! The secured cluster's commands: credentials at `init`, drive certificates
//! (`issue-cert`), and provisioning a drive before `add-drive` puts it in the map.

use std::path::Path;

use clap::Args;
use spindle_cluster::provision::{self, Provisioned, Provisioning};
use spindle_cluster::{ClusterMap, Credentials};

use crate::cluster_access::Etcd;

/// How `add-drive` provisions a drive of a secured cluster.
#[derive(Args, Clone)]
pub struct ProvisionArgs {
    /// The identity that may change the drive's ACL (the factory identity by default)
    #[arg(long, default_value_t = spindle_proto::DEFAULT_IDENTITY)]
    admin_identity: i64,
    /// That identity's HMAC key (the factory key by default)
    #[arg(long, env = "SPINDLE_ADMIN_KEY", hide_env_values = true)]
    admin_key: Option<String>,
    /// Keep the factory identity on the drive (by default it is removed)
    #[arg(long)]
    keep_factory_identity: bool,
    /// Set the drive's lock PIN
    #[arg(long, env = "SPINDLE_LOCK_PIN", hide_env_values = true)]
    lock_pin: Option<String>,
    /// Set the drive's erase PIN
    #[arg(long, env = "SPINDLE_ERASE_PIN", hide_env_values = true)]
    erase_pin: Option<String>,
    /// The drive's current lock PIN, if it has one
    #[arg(long, default_value = "", hide_default_value = true)]
    current_lock_pin: String,
    /// The drive's current erase PIN, if it has one
    #[arg(long, default_value = "", hide_default_value = true)]
    current_erase_pin: String,
}

/// `init --credentials DIR`: the credentials in DIR (made there if it holds none), recorded
/// in the map by their fingerprint.
pub fn secure_map(map: &mut ClusterMap, cluster: &str, dir: &Path) -> Result<String, Box<dyn std::error::Error>> {
    let (creds, made) = Credentials::load_or_generate(dir, cluster)?;
    if creds.cluster != cluster {
        return Err(format!("{}: credentials of cluster {:?}, not {cluster:?}", dir.display(), creds.cluster).into());
    }
    map.security = Some(creds.fingerprint()?);
    Ok(format!(
        "secured: drives are reached over TLS as identity {}, {} credentials in {} (identity.json and ca-key.pem are secrets)",
        creds.identity,
        if made { "new" } else { "existing" },
        dir.display()
    ))
}

/// `issue-cert`: a certificate for a drive, from the cluster's CA.
pub fn issue_cert(dir: Option<&Path>, names: &[String], out: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let dir = dir.ok_or("give the cluster's credentials directory (--credentials DIR), with its ca-key.pem")?;
    let creds = Credentials::load(dir)?;
    let (cert, key) = creds.issue(names, out)?;
    println!(
        "{} and {} for {}: a drive's tls_cert and tls_key (its p2p_tls_trust is {}), or an etcd member's --cert-file and --key-file",
        cert.display(),
        key.display(),
        names.join(", "),
        creds.ca_path().display()
    );
    Ok(())
}

/// Before a secured cluster's `add-drive`: provisions the drive at `addr` (its TLS port).
pub async fn provision_drive(etcd: &Etcd, map: &ClusterMap, addr: &str, how: &ProvisionArgs) -> Result<Option<String>, Box<dyn std::error::Error>> {
    let Some(creds) = etcd.credentials_for(map)? else { return Ok(None) };
    let defaults = Provisioning::default();
    let provisioning = Provisioning {
        admin_identity: how.admin_identity,
        admin_key: how.admin_key.clone().unwrap_or(defaults.admin_key.clone()),
        keep_factory_identity: how.keep_factory_identity,
        lock_pin: how.lock_pin.clone().map(|new| (how.current_lock_pin.clone(), new)),
        erase_pin: how.erase_pin.clone().map(|new| (how.current_erase_pin.clone(), new)),
        ..defaults
    };
    Ok(Some(match provision::provision(addr, &etcd.cluster, &creds, &provisioning).await? {
        Provisioned::Already => format!("{addr} already takes the cluster's identity"),
        Provisioned::Done => format!(
            "{addr} provisioned: the cluster's identity {} (TLS only){}",
            creds.identity,
            if how.keep_factory_identity { ", factory identity kept" } else { ", factory identity removed" }
        ),
    }))
}

/// `new-credentials`: a cluster's credentials, before anything else (an etcd secured with
/// them needs them before `init`).
pub fn new_credentials(dir: Option<&Path>, cluster: &str) -> Result<(), Box<dyn std::error::Error>> {
    let dir = dir.ok_or("give the directory to make the credentials in (--credentials DIR)")?;
    let creds = Credentials::generate(dir, cluster)?;
    println!("cluster {cluster:?}: identity {} and its CA in {} (identity.json and ca-key.pem are secrets)", creds.identity, dir.display());
    Ok(())
}

/// `secure-etcd`: the cluster's etcd user, with access to its prefix only, and authentication
/// enabled; the passwords kept in the credentials directory.
pub async fn secure_etcd(etcd: &Etcd, root_password: Option<String>) -> Result<(), Box<dyn std::error::Error>> {
    let dir = etcd.credentials.as_deref().ok_or("give the cluster's credentials directory (--credentials DIR)")?;
    let creds = Credentials::load(dir)?;
    if creds.cluster != etcd.cluster {
        return Err(format!("{}: credentials of cluster {:?}, not {:?}", dir.display(), creds.cluster, etcd.cluster).into());
    }
    let user = creds.secure_etcd(&etcd.etcd, crate::cluster_access::over_tls(&etcd.etcd), root_password).await?;
    println!("etcd enforces users now: cluster {:?} is etcd user {user:?}, allowed its prefix only (passwords in {})", etcd.cluster, dir.display());
    Ok(())
}
