//! Rotations without downtime: the cluster's identity and HMAC key (`rotate-key`), and its
//! certificate authority (`rotate-ca`). Each is two steps, the new one admitted beside the
//! old, then the old dropped; between them the operator moves every process to the new one
//! (docs/deploy.md).

use spindle_cluster::ca::CA_NEXT_FILE;
use spindle_cluster::etcd_auth::EtcdAccess;
use spindle_cluster::credentials::Fingerprint;
use spindle_cluster::{provision, Control};

use crate::cluster_access::{over_tls, Etcd};

/// The step of a rotation (`rotate-key`, `rotate-ca`) to take.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum RotationStep {
    /// The new one beside the old: every drive takes both; the map admits both
    Begin,
    /// The new one alone: the old is refused everywhere; the map forgets it
    Finish,
}

/// `rotate-key begin|finish`: moves the cluster to a new identity and HMAC key without
/// stopping it. Between the steps, every process that reaches the drives is restarted, one at
/// a time, with the new `identity.json` (`identity.next.json` of the credentials directory).
pub async fn rotate_key(etcd: &Etcd, step: RotationStep, keep_factory_key: Option<String>) -> Result<(), Box<dyn std::error::Error>> {
    let control = etcd.control().await?;
    let (map, _) = control.load_map().await?;
    let creds = etcd.credentials_for(&map)?.ok_or("rotate-key is for a secured cluster")?;
    let timeout = std::time::Duration::from_secs(10);
    let next = match step {
        RotationStep::Begin => creds.begin_rotation()?,
        RotationStep::Finish => creds.next()?.ok_or("no rotation in progress: run `rotate-key begin` first")?,
    };
    let identities = match step {
        RotationStep::Begin => vec![(creds.identity, creds.hmac_key.clone()), (next.identity, next.hmac_key.clone())],
        RotationStep::Finish => vec![(next.identity, next.hmac_key.clone())],
    };
    for member in map.members.values() {
        provision::set_cluster_acl(&member.addr, &creds, &identities, keep_factory_key.clone(), timeout).await?;
        println!("{}: {}", member.id, match step { RotationStep::Begin => "takes both identities", RotationStep::Finish => "takes the new identity only" });
    }
    // The map admits the new identity (begin), then only it (finish).
    update_security(&control, |security| match step {
        RotationStep::Begin => security.next_identity = Some(next.identity),
        RotationStep::Finish => {
            security.identity = next.identity;
            security.next_identity = None;
        }
    })
    .await?;
    match step {
        RotationStep::Begin => println!(
            "rotation begun: new identity {} in {}; restart coordinators, gateways and clients one at a time with it as identity.json, then run `rotate-key finish`",
            next.identity,
            next.dir.join(spindle_cluster::credentials::NEXT_FILE).display()
        ),
        RotationStep::Finish => {
            creds.finish_rotation()?;
            println!("rotation finished: identity {} only; the old one is refused by every drive", next.identity);
        }
    }
    Ok(())
}

/// `rotate-ca begin|finish`: moves the cluster to a new certificate authority without
/// stopping it. `begin` makes the new CA and has the credentials' `ca.pem` trust both; the
/// operator hands that to every server and client and renews every certificate (`issue-cert`
/// issues from the new CA from then). `finish` checks that every drive, and etcd over https,
/// serves a certificate of the new CA, then retires the old one.
pub async fn rotate_ca(etcd: &Etcd, step: RotationStep) -> Result<(), Box<dyn std::error::Error>> {
    let control = etcd.control().await?;
    let (map, _) = control.load_map().await?;
    let creds = etcd.credentials_for(&map)?.ok_or("rotate-ca is for a secured cluster")?;
    let new_ca = match step {
        RotationStep::Begin => creds.begin_ca_rotation()?.fingerprint()?.ca_sha256,
        RotationStep::Finish => {
            let next = creds.next_ca()?.ok_or("no CA rotation in progress: run `rotate-ca begin` first")?;
            not_yet_renewed(&control, &creds, &etcd.etcd, &etcd.cluster, &next).await?;
            creds.fingerprint()?.ca_sha256
        }
    };
    // The map admits credentials of the new CA (begin), then only those (finish).
    update_security(&control, |security| match step {
        RotationStep::Begin => security.next_ca_sha256 = Some(new_ca.clone()),
        RotationStep::Finish => {
            security.ca_sha256 = new_ca.clone();
            security.next_ca_sha256 = None;
        }
    })
    .await?;
    match step {
        RotationStep::Begin => println!(
            "CA rotation begun: {} trusts the old CA and the new one. Give it to every server and client (their ca.pem, the drives' p2p_tls_trust, etcd's trusted CA files), renew every certificate with `issue-cert` (it issues from the new CA now), then run `rotate-ca finish`",
            creds.ca_path().display()
        ),
        RotationStep::Finish => {
            creds.finish_ca_rotation()?;
            println!("CA rotation finished: {} holds the new CA alone; give it to every server and client in place of the two-CA file", creds.ca_path().display());
        }
    }
    Ok(())
}

/// Refuses to finish a CA rotation while a drive of the map, or etcd over https, does not
/// serve a certificate the new CA alone verifies: once finished, nothing would trust it.
async fn not_yet_renewed(control: &Control, creds: &spindle_cluster::Credentials, endpoints: &str, cluster: &str, next_pem: &str) -> Result<(), Box<dyn std::error::Error>> {
    let (map, _) = control.load_map().await?;
    let timeout = std::time::Duration::from_secs(10);
    let config = spindle_client::ClientConfig { tls_trust: Some(creds.dir.join(CA_NEXT_FILE)), ..creds.client_config(timeout) };
    let mut behind = Vec::new();
    for member in map.members.values() {
        if let Err(e) = spindle_client::Client::connect(member.addr.as_str(), config.clone()).await {
            behind.push(format!("{} ({}): {e}", member.id, member.addr));
        }
    }
    if over_tls(endpoints) {
        let access = EtcdAccess { ca_pem: Some(next_pem.to_string()), user: creds.etcd_access(true)?.user };
        let reached = match Control::connect_with(endpoints, cluster, access).await {
            Ok(c) => c.load_map().await.map(drop),
            Err(e) => Err(e),
        };
        if let Err(e) = reached {
            behind.push(format!("etcd ({endpoints}): {e}"));
        }
    }
    if behind.is_empty() {
        return Ok(());
    }
    Err(format!(
        "not finished: these do not serve a certificate of the new CA yet (renew them with `issue-cert`, then run `rotate-ca finish` again): {}",
        behind.join("; ")
    )
    .into())
}

/// Changes what the map records of the cluster's credentials, against concurrent changes.
async fn update_security(control: &Control, change: impl Fn(&mut Fingerprint)) -> Result<(), Box<dyn std::error::Error>> {
    loop {
        let (mut map, revision) = control.load_map().await?;
        let Some(security) = map.security.as_mut() else { return Err("the cluster is no longer secured".into()) };
        change(security);
        if control.replace_map(revision, &map).await? {
            return Ok(());
        }
    }
}
