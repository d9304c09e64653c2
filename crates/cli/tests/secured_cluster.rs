//! A secured cluster with real processes: `cluster init --credentials` makes its identity and
//! CA, drives serve certificates from `cluster issue-cert`, `add-drive` provisions each over
//! TLS (the factory identity removed, the cluster's identity TLS-only). Checked: a recorded
//! workload stays linearizable while a drive joins (its partitions pushed drive to drive over
//! TLS); etcd serves only over TLS and only the cluster's own user (`secure-etcd`), another
//! cluster's user seeing nothing of it; the factory identity, the cluster's identity over plain TCP, a command without the
//! credentials and one with another cluster's are all refused; a drive serving another
//! cluster's certificate is refused by add-drive; adding a provisioned drive again changes
//! nothing. Provisioning keeps the factory identity only when told, sets the PINs given and
//! takes an administrator the operator names.

mod common;
#[path = "common/cluster.rs"]
mod harness;

use std::path::Path;
use std::process::{Command as Process, Output};
use std::time::Duration;

use bytes::Bytes;
use common::{dies_with_test, runtime, spindle_bin, TestDrive};
use harness::*;
use spindle_client::{Client, ClientConfig, ClientError, PutOptions};
use spindle_cluster::{Control, Credentials, Store, StoreConfig};

const KEYS: u64 = 16;

fn spindle(args: &[&str], etcd: &str, credentials: Option<&Path>) -> Output {
    let mut c = Process::new(spindle_bin());
    c.args(args).args(["--etcd", etcd]).env_remove("SPINDLE_CREDENTIALS");
    if !args.contains(&"--cluster") {
        c.args(["--cluster", "secure"]);
    }
    if let Some(dir) = credentials {
        c.arg("--credentials").arg(dir);
    }
    c.output().unwrap()
}

fn ok(out: Output, what: &str) -> String {
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{what} failed: {text}");
    text
}

fn refused(out: Output, what: &str) -> String {
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success(), "{what} was not refused: {text}");
    text
}

/// A drive serving a certificate of `creds`' CA for 127.0.0.1, trusting it for pushes.
fn secured_drive(creds: &Credentials, dir: &Path) -> TestDrive {
    let (cert, key) = creds.issue(&["127.0.0.1".into()], dir).unwrap();
    let (cert, key, ca) = (cert.to_str().unwrap().to_owned(), key.to_str().unwrap().to_owned(), creds.ca_path().to_str().unwrap().to_owned());
    TestDrive::start(&["--tls-cert", &cert, "--tls-key", &key, "--p2p-tls-trust", &ca])
}

/// A one-member etcd serving `https://` with a certificate from `creds`' CA.
fn tls_etcd(dir: &Path, creds: &Credentials) -> (Proc, String) {
    let (cert, key) = creds.issue(&["127.0.0.1".into()], &dir.join("etcd-cert")).unwrap();
    let (client, peer) = (free_port(), free_port());
    let url = format!("https://127.0.0.1:{client}");
    let peer_url = format!("http://127.0.0.1:{peer}");
    let child = dies_with_test(&mut Process::new("etcd"))
        .args(["--name", "e0", "--data-dir"])
        .arg(dir.join("etcd"))
        .args(["--listen-client-urls", &url, "--advertise-client-urls", &url])
        .args(["--listen-peer-urls", &peer_url, "--initial-advertise-peer-urls", &peer_url, "--initial-cluster", &format!("e0={peer_url}")])
        .arg("--cert-file")
        .arg(cert)
        .arg("--key-file")
        .arg(key)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("etcd (Debian package etcd-server) must be installed");
    (Proc(Some(child)), url)
}

/// New credentials in DIR/creds and an etcd serving over TLS with a certificate of their
/// CA, enforcing users (`secure-etcd`): the cluster's own, and root.
fn secured_etcd(dir: &Path, rt: &tokio::runtime::Runtime) -> (Proc, String, std::path::PathBuf) {
    let creds_dir = dir.join("creds");
    ok(spindle(&["cluster", "new-credentials"], "", Some(&creds_dir)), "new-credentials");
    let creds = Credentials::load(&creds_dir).unwrap();
    let (etcd, url) = tls_etcd(dir, &creds);
    rt.block_on(until("etcd over TLS", Duration::from_secs(30), async || secured_control(&url, "secure", &creds).await.ok()));
    ok(spindle(&["cluster", "secure-etcd"], &url, Some(&creds_dir)), "secure-etcd");
    (etcd, url, creds_dir)
}

/// The cluster's etcd as its credentials reach it (TLS, its own user).
async fn secured_control(url: &str, cluster: &str, creds: &Credentials) -> Result<Control, spindle_cluster::ClusterError> {
    Control::connect_with(url, cluster, creds.etcd_access(true).unwrap()).await
}

#[test]
fn a_secured_cluster_is_closed_to_strangers_and_moves_data_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let (_etcd, url, creds_dir) = secured_etcd(dir.path(), &rt);
    let text = ok(spindle(&["cluster", "init", "--partitions", "16"], &url, Some(&creds_dir)), "init");
    assert!(text.contains("secured"), "{text}");
    let creds = Credentials::load(&creds_dir).unwrap();
    rt.block_on(async {
        let control = secured_control(&url, "secure", &creds).await.unwrap();
        let (map, _) = control.load_map().await.unwrap();
        assert_eq!(map.security, Some(creds.fingerprint().unwrap()));
        // The secrets are in the credentials, never in etcd.
        assert!(!serde_json::to_string(&map).unwrap().contains(&creds.hmac_key));
        // etcd refuses a client without a user, and another cluster's user sees nothing of
        // this cluster.
        let anonymous = spindle_cluster::control::EtcdAccess { ca_pem: Some(creds.ca_pem.clone()), user: None };
        let refused = match Control::connect_with(&url, "secure", anonymous).await {
            Ok(c) => c.load_map().await.is_err(),
            Err(_) => true,
        };
        assert!(refused, "etcd served a client without a user");
    });
    let other_dir = dir.path().join("other-creds");
    ok(spindle(&["cluster", "new-credentials", "--cluster", "other"], "", Some(&other_dir)), "other's credentials");
    std::fs::copy(creds_dir.join("ca.pem"), other_dir.join("ca.pem")).unwrap();
    let root: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(creds_dir.join("etcd-root.json")).unwrap()).unwrap();
    let out = Process::new(spindle_bin())
        .args(["cluster", "secure-etcd", "--etcd", &url, "--cluster", "other", "--credentials"])
        .arg(&other_dir)
        .env("SPINDLE_ETCD_ROOT_PASSWORD", root["password"].as_str().unwrap())
        .output()
        .unwrap();
    ok(out, "secure-etcd for another cluster");
    rt.block_on(async {
        let other = Credentials::load(&other_dir).unwrap();
        let refused = match secured_control(&url, "secure", &other).await {
            Ok(c) => c.load_map().await.is_err(),
            Err(_) => true,
        };
        assert!(refused, "another cluster's etcd user read this cluster's map");
    });
    // An identity that is not the cluster's, even with access to its etcd, is refused before
    // any drive is reached.
    let mixed = dir.path().join("mixed");
    std::fs::create_dir(&mixed).unwrap();
    std::fs::copy(other_dir.join("identity.json"), mixed.join("identity.json")).unwrap();
    for f in ["ca.pem", "etcd.json"] {
        std::fs::copy(creds_dir.join(f), mixed.join(f)).unwrap();
    }
    let text = refused(spindle(&["cluster", "get", "k"], &url, Some(&mixed)), "get with another identity");
    assert!(text.contains("not cluster \"secure\"'s credentials"), "{text}");
    let creds_arg = creds_dir.to_str().unwrap();
    let _coordinator = coordinator_with(&url, "secure", "c1", &["--credentials", creds_arg]);

    let drives: Vec<TestDrive> = (0..4).map(|i| secured_drive(&creds, &dir.path().join(format!("cert{i}")))).collect();
    for (i, d) in drives.iter().take(3).enumerate() {
        let text = ok(spindle(&["cluster", "add-drive", &format!("d{i}"), &d.tls_addr], &url, Some(&creds_dir)), "add-drive");
        assert!(text.contains("provisioned") && text.contains("factory identity removed"), "{text}");
    }
    // Again: already provisioned, nothing changes.
    let text = ok(spindle(&["cluster", "add-drive", "d0", &drives[0].tls_addr], &url, Some(&creds_dir)), "add-drive again");
    assert!(text.contains("already takes the cluster's identity"), "{text}");

    // A drive of another cluster (its certificate from another CA) is refused.
    let stranger = Credentials::generate(&dir.path().join("other"), "other").unwrap();
    let foreign = secured_drive(&stranger, &dir.path().join("foreign-cert"));
    let text = refused(spindle(&["cluster", "add-drive", "dx", &foreign.tls_addr], &url, Some(&creds_dir)), "add-drive of a foreign drive");
    assert!(text.contains("not issued by cluster \"secure\"'s CA"), "{text}");
    // Commands without the credentials, or with another cluster's, are refused.
    let text = refused(spindle(&["cluster", "get", "k"], &url, None), "get without credentials");
    assert!(text.contains("needs the cluster's credentials"), "{text}");
    // (Another cluster's credentials: its CA does not vouch for this etcd.)
    let text = refused(spindle(&["cluster", "get", "k"], &url, Some(&dir.path().join("other"))), "get with another cluster's credentials");
    assert!(text.contains("UnknownIssuer"), "{text}");

    rt.block_on(async {
        let control = secured_control(&url, "secure", &creds).await.unwrap();
        settled(&control).await;
        let config = || StoreConfig { client: creds.client_config(Duration::from_secs(5)), ..StoreConfig::default() };
        let mut stores = Vec::new();
        for _ in 0..3 {
            stores.push(Store::open(control.clone(), config()).await.unwrap());
        }
        stores[0].put(b"hello", Bytes::from_static(b"world"), spindle_cluster::Condition::None).await.unwrap();

        // The drives refuse strangers: the factory identity is gone, and the cluster's own
        // identity is refused over plain TCP.
        for d in &drives[..3] {
            let factory = Client::connect(d.addr.as_str(), ClientConfig::default()).await;
            let put = match factory {
                Ok(c) => c.put(b"x", Bytes::from_static(b"y"), PutOptions::default()).await.map(drop),
                Err(e) => Err(e),
            };
            assert!(put.is_err(), "drive {} took a write from the factory identity", d.addr);
            let plain = ClientConfig { tls_trust: None, ..creds.client_config(Duration::from_secs(5)) };
            let c = Client::connect(d.addr.as_str(), plain).await.unwrap();
            let got = c.get(b"anything").await;
            assert!(matches!(&got, Err(ClientError::Status { .. })), "drive {} served the cluster's identity over plain TCP: {got:?}", d.addr);
        }

        // A drive joins under a recorded workload: its partitions are pushed drive to drive
        // over TLS, and no acknowledged write is lost.
        let rec = Recorder::new();
        let work = Workload::mixed(&stores, 1, &rec, KEYS);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let out = tokio::task::spawn_blocking({
            let (url, creds_dir, addr) = (url.clone(), creds_dir.clone(), drives[3].tls_addr.clone());
            move || spindle(&["cluster", "add-drive", "d3", &addr], &url, Some(&creds_dir))
        })
        .await
        .unwrap();
        ok(out, "add-drive d3");
        let map = until("the new drive to hold partitions", Duration::from_secs(120), async || {
            let (map, _) = control.load_map().await.ok()?;
            let held = map.placement.iter().filter(|r| r.iter().any(|d| d == "d3")).count();
            (held > 0 && map.moving.is_empty()).then_some(map)
        })
        .await;
        work.stop().await;
        rec.check("secured-join");
        assert!(map.placement.iter().all(|r| r.len() == 3));
        assert_eq!(stores[0].get(b"hello").await.unwrap().map(|v| v.value), Some(Bytes::from_static(b"world")));
    });
}

/// A secured cluster "secure" in `dir`: etcd, `init --credentials` with `partitions`, a
/// coordinator, three drives with certificates of its CA, added (and so provisioned).
struct Secured {
    _etcd: Etcd,
    url: String,
    creds_dir: std::path::PathBuf,
    old: Credentials,
    coordinator: Proc,
    drives: Vec<TestDrive>,
}

fn secured_cluster(dir: &Path, rt: &tokio::runtime::Runtime, partitions: u32) -> Secured {
    let etcd = Etcd::start(dir, 1);
    let url = etcd.endpoints();
    rt.block_on(control(&url, "secure"));
    let creds_dir = dir.join("creds");
    ok(spindle(&["cluster", "init", "--partitions", &partitions.to_string()], &url, Some(&creds_dir)), "init");
    let old = Credentials::load(&creds_dir).unwrap();
    let coordinator = coordinator_with(&url, "secure", "c1", &["--credentials", creds_dir.to_str().unwrap()]);
    let drives: Vec<TestDrive> = (0..3).map(|i| secured_drive(&old, &dir.join(format!("cert{i}")))).collect();
    for (i, d) in drives.iter().enumerate() {
        ok(spindle(&["cluster", "add-drive", &format!("d{i}"), &d.tls_addr], &url, Some(&creds_dir)), "add-drive");
    }
    Secured { _etcd: etcd, url, creds_dir, old, coordinator, drives }
}

/// `rotate-key begin`, the processes moved to the new key one at a time, `rotate-key
/// finish`, all under a recorded workload: no operation fails, the history stays
/// linearizable, and the old key is refused by every drive afterwards.
#[test]
fn the_cluster_key_rotates_under_load_without_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let Secured { _etcd, url, creds_dir, old, coordinator: mut c1, drives } = secured_cluster(dir.path(), &rt, 16);
    let cli = |args: &'static [&'static str]| {
        let (url, creds_dir) = (url.clone(), creds_dir.clone());
        tokio::task::spawn_blocking(move || spindle(args, &url, Some(&creds_dir)))
    };
    rt.block_on(async {
        let control = control(&url, "secure").await;
        settled(&control).await;
        let config = |c: &Credentials| StoreConfig { client: c.client_config(Duration::from_secs(5)), ..StoreConfig::default() };
        let rec = Recorder::new();
        let mut before = Vec::new();
        for _ in 0..2 {
            before.push(Store::open(control.clone(), config(&old)).await.unwrap());
        }
        let first = Workload::mixed_from(&before, 1, &rec, KEYS, 0);
        tokio::time::sleep(Duration::from_millis(300)).await;

        let text = ok(cli(&["cluster", "rotate-key", "begin"]).await.unwrap(), "rotate-key begin");
        assert!(text.contains("rotation begun"), "{text}");
        // What the operator hands out: the new identity as identity.json, beside the CA.
        let next_dir = dir.path().join("next");
        std::fs::create_dir(&next_dir).unwrap();
        std::fs::copy(creds_dir.join("ca.pem"), next_dir.join("ca.pem")).unwrap();
        std::fs::copy(creds_dir.join("identity.next.json"), next_dir.join("identity.json")).unwrap();
        let new = Credentials::load(&next_dir).unwrap();
        assert_ne!(new.identity, old.identity);
        let mut after = Vec::new();
        for _ in 0..2 {
            after.push(Store::open(control.clone(), config(&new)).await.unwrap());
        }
        let second = Workload::mixed_from(&after, 1, &rec, KEYS, 2);
        // The coordinator moves to the new key: a second one starts with it, the first stops.
        let _c2 = coordinator_with(&url, "secure", "c2", &["--credentials", next_dir.to_str().unwrap()]);
        tokio::time::sleep(Duration::from_millis(300)).await;
        c1.kill();
        first.stop().await;

        let text = ok(cli(&["cluster", "rotate-key", "finish"]).await.unwrap(), "rotate-key finish");
        assert!(text.contains("rotation finished"), "{text}");
        tokio::time::sleep(Duration::from_millis(300)).await;
        second.stop().await;
        rec.check("key-rotation");
        assert_eq!(rec.errors(), (0, None), "operations failed during the rotation");

        // The old key is refused everywhere; the map admits only the new identity, and so do
        // the credentials directory's files.
        for d in &drives {
            let c = Client::connect(d.tls_addr.as_str(), old.client_config(Duration::from_secs(5))).await;
            let refused = match c {
                Ok(c) => c.get(b"k").await.is_err(),
                Err(_) => true,
            };
            assert!(refused, "drive {} still takes the old key", d.tls_addr);
        }
        let (map, _) = control.load_map().await.unwrap();
        let security = map.security.unwrap();
        assert_eq!((security.identity, security.next_identity), (new.identity, None));
        assert_eq!(Credentials::load(&creds_dir).unwrap().identity, new.identity);
        // The cluster goes on with the new key after the coordinator change.
        after[0].put(b"after-rotation", Bytes::from_static(b"v"), spindle_cluster::Condition::None).await.unwrap();
        assert!(after[1].get(b"after-rotation").await.unwrap().is_some());
    });
}

/// Provisioning does what the operator says and no more: the factory identity kept by the
/// explicit flag (and still usable over plain TCP), the PINs given set (a wrong one refused,
/// the right one locks and unlocks), and a drive whose factory identity was replaced by an
/// administrator the operator names: refused, with what to do, until that administrator is
/// named, then provisioned with it kept.
#[test]
fn provisioning_keeps_the_factory_identity_only_when_told_sets_the_pins_and_takes_a_named_administrator() {
    use spindle_cluster::provision::{acl, provision, Provisioned, Provisioning};
    use spindle_client::{PinOpType, StatusCode};
    let dir = tempfile::tempdir().unwrap();
    let creds = Credentials::generate(&dir.path().join("creds"), "prov").unwrap();
    let kept = secured_drive(&creds, &dir.path().join("kept"));
    let named = secured_drive(&creds, &dir.path().join("named"));
    runtime().block_on(async {
        let how = Provisioning { keep_factory_identity: true, lock_pin: Some((String::new(), "lock-1".into())), erase_pin: Some((String::new(), "erase-1".into())), ..Provisioning::default() };
        assert_eq!(provision(&kept.tls_addr, "prov", &creds, &how).await.unwrap(), Provisioned::Done);
        let factory = Client::connect(kept.addr.as_str(), ClientConfig::default()).await.unwrap();
        factory.put(b"factory", Bytes::from_static(b"kept"), PutOptions::default()).await.unwrap();
        let cluster = Client::connect(kept.tls_addr.as_str(), creds.client_config(Duration::from_secs(5))).await.unwrap();
        assert_eq!(cluster.get(b"factory").await.unwrap().map(|e| e.value), Some(Bytes::from_static(b"kept")));
        // The PINs: a wrong one is refused; the right lock PIN locks the drive and unlocks it.
        assert!(cluster.pin_operation(PinOpType::LockPinop, b"").await.is_err(), "locked without the PIN");
        assert!(cluster.pin_operation(PinOpType::ErasePinop, b"erase-2").await.is_err(), "erased with a wrong PIN");
        cluster.pin_operation(PinOpType::LockPinop, b"lock-1").await.unwrap();
        let locked = cluster.get(b"factory").await;
        assert_eq!(locked.as_ref().err().and_then(|e| e.status()), Some(StatusCode::DeviceLocked), "{locked:?}");
        cluster.pin_operation(PinOpType::UnlockPinop, b"lock-1").await.unwrap();
        assert!(cluster.get(b"factory").await.unwrap().is_some());

        // An operator replaced the factory identity with administrator 7 (TLS only).
        let factory = Client::connect(named.tls_addr.as_str(), ClientConfig { tls_trust: Some(creds.ca_path()), ..ClientConfig::default() }).await.unwrap();
        factory.set_acl(acl(&[], vec![(7, "admin-seven".into())], None)).await.unwrap();
        let e = provision(&named.tls_addr, "prov", &creds, &Provisioning::default()).await.unwrap_err().to_string();
        assert!(e.contains("--admin-identity"), "{e}");
        let how = Provisioning { admin_identity: 7, admin_key: "admin-seven".into(), ..Provisioning::default() };
        assert_eq!(provision(&named.tls_addr, "prov", &creds, &how).await.unwrap(), Provisioned::Done);
        let config = ClientConfig { identity: 7, hmac_key: Bytes::from_static(b"admin-seven"), tls_trust: Some(creds.ca_path()), ..ClientConfig::default() };
        let admin = Client::connect(named.tls_addr.as_str(), config).await.unwrap();
        admin.put(b"by-admin", Bytes::from_static(b"v"), PutOptions::default()).await.unwrap();
        let factory = Client::connect(named.addr.as_str(), ClientConfig::default()).await.unwrap();
        assert!(factory.get(b"by-admin").await.is_err(), "the factory identity came back");
        // Provisioned once, it is left as it is.
        assert_eq!(provision(&named.tls_addr, "prov", &creds, &how).await.unwrap(), Provisioned::Already);
    });
}

/// A rotation step that fails part way (a drive down) says which drive and changes nothing it
/// has not done; run again once the drive is back it completes, with the same new identity:
/// `begin` with one drive down, then `finish` with another down.
#[test]
fn a_key_rotation_step_that_fails_part_way_is_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let Secured { _etcd, url, creds_dir, old, coordinator: _c1, mut drives } = secured_cluster(dir.path(), &rt, 8);
    let control = rt.block_on(async {
        let control = control(&url, "secure").await;
        settled(&control).await;
        control
    });
    let takes = |d: &TestDrive, c: &Credentials| {
        rt.block_on(async {
            match Client::connect(d.tls_addr.as_str(), c.client_config(Duration::from_secs(5))).await {
                // At the drive's epoch (its sign-on says it): it is fenced to the map's.
                Ok(client) => {
                    let epoch = client.sign_on().header.as_ref().and_then(|h| h.cluster_version).unwrap_or(0);
                    client.at_cluster_version(epoch).get(b"k").await.is_ok()
                }
                Err(_) => false,
            }
        })
    };

    drives[2].kill();
    let text = refused(spindle(&["cluster", "rotate-key", "begin"], &url, Some(&creds_dir)), "begin with a drive down");
    assert!(text.contains(&drives[2].tls_addr), "the failure does not name the drive: {text}");
    let next = Credentials::load(&creds_dir).unwrap().next().unwrap().expect("identity.next.json kept for the next attempt");
    let (map, _) = rt.block_on(control.load_map()).unwrap();
    assert_eq!(map.security.as_ref().unwrap().next_identity, None, "the map admits the new identity before every drive takes it");
    drives[2].restart_same_port();
    let text = ok(spindle(&["cluster", "rotate-key", "begin"], &url, Some(&creds_dir)), "begin again");
    assert!(text.contains("rotation begun"), "{text}");
    assert_eq!(Credentials::load(&creds_dir).unwrap().next().unwrap().unwrap().identity, next.identity, "a second begin made another identity");
    for d in &drives {
        assert!(takes(d, &old) && takes(d, &next), "drive {} does not take both identities", d.tls_addr);
    }

    drives[1].kill();
    let text = refused(spindle(&["cluster", "rotate-key", "finish"], &url, Some(&creds_dir)), "finish with a drive down");
    assert!(text.contains(&drives[1].tls_addr), "the failure does not name the drive: {text}");
    assert_eq!(Credentials::load(&creds_dir).unwrap().identity, old.identity, "the files moved before every drive took the new identity");
    drives[1].restart_same_port();
    let text = ok(spindle(&["cluster", "rotate-key", "finish"], &url, Some(&creds_dir)), "finish again");
    assert!(text.contains("rotation finished"), "{text}");
    assert_eq!(Credentials::load(&creds_dir).unwrap().identity, next.identity);
    for d in &drives {
        assert!(takes(d, &next) && !takes(d, &old), "drive {} is not on the new identity only", d.tls_addr);
    }
    let (map, _) = rt.block_on(control.load_map()).unwrap();
    let security = map.security.unwrap();
    assert_eq!((security.identity, security.next_identity), (next.identity, None));
}

/// `rotate-ca begin`, every certificate renewed from the new CA (written over the files the
/// drives and etcd serve, taken without a restart), `rotate-ca finish`, all under a recorded
/// workload: no operation fails and the history stays linearizable. `finish` is refused,
/// naming what is behind, while a drive or etcd still serves the old CA's certificate.
/// Afterwards only the new CA is trusted: a client that trusts the old one alone is refused by
/// every drive, the map and the credentials name the new CA, commands work with the new
/// `ca.pem`, and a drive with a certificate of the new CA joins (partitions pushed to it over
/// TLS, checked against the new CA).
#[test]
fn the_cluster_ca_rotates_under_load_without_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let (_etcd, url, creds_dir) = secured_etcd(dir.path(), &rt);
    ok(spindle(&["cluster", "init", "--partitions", "16"], &url, Some(&creds_dir)), "init");
    let old = Credentials::load(&creds_dir).unwrap();
    let _c1 = coordinator_with(&url, "secure", "c1", &["--credentials", creds_dir.to_str().unwrap()]);
    let drives: Vec<TestDrive> = (0..3).map(|i| secured_drive(&old, &dir.path().join(format!("cert{i}")))).collect();
    for (i, d) in drives.iter().enumerate() {
        ok(spindle(&["cluster", "add-drive", &format!("d{i}"), &d.tls_addr], &url, Some(&creds_dir)), "add-drive");
    }
    let cli = |args: &'static [&'static str]| {
        let (url, creds_dir) = (url.clone(), creds_dir.clone());
        tokio::task::spawn_blocking(move || spindle(args, &url, Some(&creds_dir)))
    };
    let trusting = |file: &str| ClientConfig { tls_trust: Some(creds_dir.join(file)), ..old.client_config(Duration::from_secs(5)) };
    rt.block_on(async {
        let control = secured_control(&url, "secure", &old).await.unwrap();
        settled(&control).await;
        let rec = Recorder::new();
        let mut stores = Vec::new();
        for _ in 0..2 {
            stores.push(Store::open(control.clone(), StoreConfig { client: old.client_config(Duration::from_secs(5)), ..StoreConfig::default() }).await.unwrap());
        }
        let load = Workload::mixed_from(&stores, 1, &rec, KEYS, 0);
        tokio::time::sleep(Duration::from_millis(300)).await;

        let text = refused(cli(&["cluster", "rotate-ca", "finish"]).await.unwrap(), "finish before begin");
        assert!(text.contains("no CA rotation in progress"), "{text}");
        let text = ok(cli(&["cluster", "rotate-ca", "begin"]).await.unwrap(), "rotate-ca begin");
        assert!(text.contains("CA rotation begun"), "{text}");
        let during = Credentials::load(&creds_dir).unwrap();
        let text = refused(cli(&["cluster", "rotate-ca", "finish"]).await.unwrap(), "finish before any renewal");
        assert!(["d0", "d1", "d2", "etcd"].iter().all(|behind| text.contains(behind)), "{text}");

        // The drives' certificates renewed in place; each serves its new one within a few
        // seconds (the files are looked at every 2 s).
        for i in 0..3 {
            during.issue(&["127.0.0.1".into()], &dir.path().join(format!("cert{i}"))).unwrap();
        }
        for d in &drives {
            until("the drive to serve the new CA's certificate", Duration::from_secs(60), async || {
                Client::connect(d.tls_addr.as_str(), trusting("ca.next.pem")).await.ok()
            })
            .await;
        }
        let text = refused(cli(&["cluster", "rotate-ca", "finish"]).await.unwrap(), "finish with etcd not renewed");
        assert!(text.contains("etcd") && !text.contains("d0 ("), "{text}");
        during.issue(&["127.0.0.1".into()], &dir.path().join("etcd-cert")).unwrap();
        let text = ok(cli(&["cluster", "rotate-ca", "finish"]).await.unwrap(), "rotate-ca finish");
        assert!(text.contains("CA rotation finished"), "{text}");
        tokio::time::sleep(Duration::from_millis(300)).await;
        load.stop().await;
        rec.check("ca-rotation");
        assert_eq!(rec.errors(), (0, None), "operations failed during the CA rotation");

        // Only the new CA is trusted now.
        let after = Credentials::load(&creds_dir).unwrap();
        assert_eq!(after.ca_pem, std::fs::read_to_string(creds_dir.join("ca.pem")).unwrap());
        assert_ne!(after.fingerprint().unwrap().ca_sha256, old.fingerprint().unwrap().ca_sha256);
        for d in &drives {
            assert!(Client::connect(d.tls_addr.as_str(), trusting("ca.old.pem")).await.is_err(), "drive {} serves a certificate of the old CA", d.tls_addr);
        }
        let (map, _) = control.load_map().await.unwrap();
        let security = map.security.unwrap();
        assert_eq!((&security.ca_sha256, &security.next_ca_sha256), (&after.fingerprint().unwrap().ca_sha256, &None));
        ok(cli(&["cluster", "status"]).await.unwrap(), "status with the new CA alone");

        // A drive with a certificate of the new CA joins; the others push its partitions to it.
        let d3 = secured_drive(&after, &dir.path().join("cert3"));
        let addr = d3.tls_addr.clone();
        let out = tokio::task::spawn_blocking({
            let (url, creds_dir) = (url.clone(), creds_dir.clone());
            move || spindle(&["cluster", "add-drive", "d3", &addr], &url, Some(&creds_dir))
        });
        ok(out.await.unwrap(), "add-drive after the rotation");
        until("partitions to move to the new drive", Duration::from_secs(120), async || {
            let (map, _) = control.load_map().await.ok()?;
            (map.moving.is_empty() && map.placement.iter().any(|r| r.iter().any(|d| d == "d3"))).then_some(())
        })
        .await;
        let fresh = Store::open(secured_control(&url, "secure", &after).await.unwrap(), StoreConfig { client: after.client_config(Duration::from_secs(5)), ..StoreConfig::default() }).await.unwrap();
        fresh.put(b"after-ca-rotation", Bytes::from_static(b"v"), spindle_cluster::Condition::None).await.unwrap();
        assert!(fresh.get(b"after-ca-rotation").await.unwrap().is_some());
    });
}
