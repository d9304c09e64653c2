//! `spindle cluster demo`: a whole cluster on loopback (etcd, drives, a coordinator), its
//! processes stopped however the demo ends.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use spindle_cluster::control::{HealthState, MemberChange};
use spindle_cluster::coordinator::{self, CoordinatorConfig};
use spindle_cluster::control::EtcdAccess;
use spindle_cluster::{ClusterMap, Control, Credentials, Member};

use crate::client_cmds::CmdResult;
use crate::cluster_access::{serve_metrics, stop_signal, wait_for};

/// A port free on loopback now (the OS picks; the listener is closed before it is used).
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Children of the demo, killed when it ends however it ends.
struct Children(Vec<std::process::Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            // SIGTERM first: drives make acknowledged writes durable on the way out.
            let _ = std::process::Command::new("kill").arg(c.id().to_string()).status();
        }
        for c in &mut self.0 {
            for _ in 0..100 {
                if matches!(c.try_wait(), Ok(Some(_))) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub async fn demo(drives: usize, data: &Path, check: bool, insecure: bool) -> CmdResult {
    if drives == 0 || drives > 64 {
        return Err("--drives must be 1..=64".into());
    }
    std::fs::create_dir_all(data)?;
    // Secured unless asked not to (or the folder holds an open demo from before): the
    // cluster's credentials and CA, etcd over TLS with the cluster's own user, drives with
    // certificates from the CA, provisioned (docs/design/secured-clusters.md).
    let creds_dir = data.join("credentials");
    let open_before = data.join("etcd").exists() && !creds_dir.exists();
    let creds = if insecure || open_before { None } else { Some(Credentials::load_or_generate(&creds_dir, "spindle")?.0) };
    let mut children = Children(Vec::new());
    // Ctrl-C and SIGTERM are listened for before anything starts: one that comes while the
    // cluster starts stops it too (its children killed on the way out), where the default
    // action would end the demo and leave etcd and the drives running.
    let stop = stop_signal();
    tokio::pin!(stop);
    let start = start(drives, data, &creds, &creds_dir, &mut children);
    let Started { control, coordinator, stop_tx, coordinator_metrics, outputs: _outputs } = tokio::select! {
        biased;
        () = &mut stop => return Ok(()),
        started = start => started?,
    };
    if !check {
        stop.await;
    } else {
        // Wait until every drive is up, then end: the check is that it came up.
        for _ in 0..200 {
            let health = control.health().await?;
            if health.values().filter(|h| h.state == HealthState::Up).count() == drives {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let _ = stop_tx.send(());
    let _ = coordinator.await;
    coordinator_metrics.stop().await;
    drop(children);
    Ok(())
}

/// What a started demo runs with until it stops.
struct Started {
    control: Control,
    coordinator: tokio::task::JoinHandle<Result<(), spindle_cluster::ClusterError>>,
    stop_tx: tokio::sync::oneshot::Sender<()>,
    coordinator_metrics: spindle_metrics::Endpoint,
    /// The drives' stdout, kept open: a drive writing to a closed stdout would fail.
    outputs: Vec<BufReader<std::process::ChildStdout>>,
}

/// Starts etcd, the drives (into `children`) and a coordinator, and waits until every
/// partition is placed.
async fn start(drives: usize, data: &Path, creds: &Option<Credentials>, creds_dir: &Path, children: &mut Children) -> Result<Started, Box<dyn std::error::Error>> {
    // etcd keeps its ports across demo runs on one folder (its data names its peer address).
    let ports_file = data.join("etcd-ports");
    let remembered_ports = std::fs::read_to_string(&ports_file).ok().and_then(|s| {
        let mut it = s.split_whitespace().map(|p| p.parse::<u16>().ok());
        Some((it.next()??, it.next()??))
    });
    let (client_port, peer_port) = match remembered_ports {
        Some(p) if data.join("etcd").exists() => p,
        _ => (free_port()?, free_port()?),
    };
    std::fs::write(&ports_file, format!("{client_port} {peer_port}\n"))?;
    let scheme = if creds.is_some() { "https" } else { "http" };
    let etcd_url = format!("{scheme}://127.0.0.1:{client_port}");
    let peer = format!("http://127.0.0.1:{peer_port}");
    let etcd_log = std::fs::File::create(data.join("etcd.log"))?;
    let mut etcd = std::process::Command::new("etcd");
    etcd.args(["--name", "demo", "--data-dir"])
        .arg(data.join("etcd"))
        .args(["--listen-client-urls", &etcd_url, "--advertise-client-urls", &etcd_url])
        .args(["--listen-peer-urls", &peer, "--initial-advertise-peer-urls", &peer])
        .args(["--initial-cluster", &format!("demo={peer}")]);
    if let Some(c) = &creds {
        let (cert, key) = c.issue(&["127.0.0.1".into()], &data.join("etcd-cert"))?;
        etcd.arg("--cert-file").arg(cert).arg("--key-file").arg(key);
    }
    children.0.push(etcd.stdout(Stdio::null()).stderr(etcd_log).spawn().map_err(|e| format!("starting etcd (Debian package etcd-server): {e}"))?);
    let access = match &creds {
        Some(c) => c.etcd_access(true)?,
        None => Default::default(),
    };
    let mut control = connect_when_up(&etcd_url, access.clone()).await?;
    if let Some(c) = creds.as_ref().filter(|_| access.user.is_none()) {
        // A fresh secured demo: the cluster's etcd user, then etcd enforces users.
        c.secure_etcd(&etcd_url, true, None).await?;
        control = connect_when_up(&etcd_url, c.etcd_access(true)?).await?;
    }
    let fresh = control.load_map().await.is_err();
    if fresh {
        let mut map = ClusterMap::new(64, 3.min(drives as u8), (3.min(drives as u8) / 2) + 1)?;
        if let Some(c) = &creds {
            map.security = Some(c.fingerprint()?);
        }
        control.init(&map).await?;
    }
    // A demo started again on its folder starts each drive at the address the map remembers.
    let remembered = control.load_map().await?.0;
    let exe = std::env::current_exe()?;
    let mut addrs = Vec::new();
    // Kept open: a drive writing to a closed stdout would fail.
    let mut outputs = Vec::new();
    let mut metrics_urls = Vec::new();
    for i in 0..drives {
        // The member's address is the drive's plain port, or its TLS port in a secured demo.
        let port = remembered.members.get(&format!("drive-{i}")).and_then(|m| m.addr.rsplit(':').next()?.parse::<u16>().ok()).unwrap_or(0);
        let (plain_port, tls_port) = if creds.is_some() { (0, port) } else { (port, 0) };
        let mut command = std::process::Command::new(&exe);
        command
            .args(["drive", "--port", &plain_port.to_string(), "--tls-port", &tls_port.to_string(), "--metrics-port", "0", "--data"])
            .arg(data.join(format!("drive-{i}")));
        if let Some(c) = &creds {
            let cert_dir = data.join(format!("drive-{i}-cert"));
            let (cert, key) = if cert_dir.join("cert.pem").exists() { (cert_dir.join("cert.pem"), cert_dir.join("key.pem")) } else { c.issue(&["127.0.0.1".into()], &cert_dir)? };
            command.arg("--tls-cert").arg(cert).arg("--tls-key").arg(key).arg("--p2p-tls-trust").arg(c.ca_path());
        }
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(data.join(format!("drive-{i}.log")))?)
            .spawn()?;
        let out = child.stdout.take().ok_or("drive stdout")?;
        children.0.push(child);
        let mut line = String::new();
        let mut out = BufReader::new(out);
        out.read_line(&mut line)?;
        // "spindle drive listening on ADDR tls TLS-ADDR (data in ...)"
        let word = if creds.is_some() { 6 } else { 4 };
        let addr = line.split_whitespace().nth(word).ok_or_else(|| format!("drive {i} did not start (see {}): {line:?}", data.join(format!("drive-{i}.log")).display()))?.to_string();
        if let Some(c) = &creds {
            spindle_cluster::provision::provision(&addr, "spindle", c, &Default::default()).await?;
        }
        // "spindle drive metrics on http://ADDR/metrics"
        let mut metrics_line = String::new();
        out.read_line(&mut metrics_line)?;
        metrics_urls.push(metrics_line.split_whitespace().nth(4).unwrap_or("none").to_string());
        outputs.push(out);
        addrs.push(addr);
    }
    let mut config = CoordinatorConfig { name: "demo-coordinator".into(), ..CoordinatorConfig::default() };
    if let Some(c) = &creds {
        config.client = c.client_config(config.client.timeout);
    }
    let coordinator_metrics = serve_metrics(&config, std::net::SocketAddr::from(([127, 0, 0, 1], 0))).await?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let coordinator = tokio::spawn(coordinator::run(control.clone(), config, async {
        let _ = stop_rx.await;
    }));
    // Drives get new ports at each start: the members' addresses follow.
    let (map, _) = control.load_map().await?;
    for (i, addr) in addrs.iter().enumerate() {
        let id = format!("drive-{i}");
        let known = map.members.get(&id);
        if known.is_some_and(|m| &m.addr == addr) {
            continue;
        }
        // A member known at another address takes the new one (an update, not a move).
        let member = Member { id: id.clone(), addr: addr.clone(), tls_port: None, capacity: 0, weight: 1.0, domain: None, leaving: false, pool: None };
        control.request_change(&MemberChange::Add(member)).await?;
        let a = addr.clone();
        wait_for(&control, |m| m.members.get(&id).is_some_and(|m| m.addr == a), Duration::from_secs(30)).await?;
    }
    // Ready once every partition is placed on as many drives as it can have.
    let full = |m: &ClusterMap| {
        let n = m.members.values().filter(|d| !d.leaving).count().min(usize::from(m.replicas));
        m.moving.is_empty() && m.placement.iter().all(|r| r.len() == n)
    };
    wait_for(&control, full, Duration::from_secs(60)).await?;
    println!("spindle cluster demo: {drives} drives, etcd at {etcd_url}, data in {}", data.display());
    println!("  export SPINDLE_ETCD={etcd_url}");
    match &creds {
        Some(_) => println!("  export SPINDLE_CREDENTIALS={}    # secured: TLS everywhere, the cluster's own identity and etcd user", creds_dir.display()),
        None => println!("  (not secured: drives take the factory identity over plain TCP, etcd serves anyone)"),
    }
    println!("  spindle cluster status;  spindle cluster put hello world;  spindle cluster get hello");
    println!("Prometheus metrics (docs/metrics.md): coordinator http://{}/metrics", coordinator_metrics.local_addr);
    for (i, url) in metrics_urls.iter().enumerate() {
        println!("  drive-{i} {url}");
    }
    println!("Ctrl-C stops the cluster.");
    std::io::stdout().flush()?;
    Ok(Started { control, coordinator, stop_tx, coordinator_metrics, outputs })
}

async fn connect_when_up(url: &str, access: EtcdAccess) -> Result<Control, Box<dyn std::error::Error>> {
    let mut last = String::new();
    for _ in 0..100 {
        match Control::connect_with(url, "spindle", access.clone()).await {
            Ok(c) => match c.coordinators().await {
                Ok(_) => return Ok(c),
                Err(e) => last = e.to_string(),
            },
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!("etcd at {url} did not come up: {last}").into())
}
