//! Peer-to-peer pushes that need the `spindle` process: a peer SIGKILLed mid-transfer and
//! started again, and the `spindle p2p push` command. The pushes' protocol behaviour is
//! tested against in-process drives in `crates/drive/tests/p2p.rs`.

mod common;

use bytes::Bytes;
use common::TestDrive;
use spindle_client::{Peer, PutOptions, PushOp, StatusCode};

fn peer_of(d: &TestDrive) -> Peer {
    let port = d.addr.rsplit(':').next().unwrap().parse().unwrap();
    Peer { host: "127.0.0.1".into(), port, tls: false }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_killed_mid_transfer_leaves_both_drives_consistent() {
    let a = TestDrive::start(&[]);
    let mut peer = TestDrive::start(&[]);
    let ca = a.client().await;
    let value = |i: u32| Bytes::from(vec![(i % 251) as u8; 512 * 1024]);
    let keys: Vec<String> = (0..60).map(|i| format!("big{i:02}")).collect();
    for (i, k) in keys.iter().enumerate() {
        ca.put(k.as_bytes(), value(i as u32), PutOptions::forced(spindle_client::Synchronization::Writeback)).await.unwrap();
    }
    let target = peer_of(&peer);
    let ops = keys.iter().map(|k| PushOp::copy(Bytes::from(k.clone()))).collect();
    let push = tokio::spawn({
        let ca = ca.clone();
        async move { ca.push_to_peer(&target, ops).await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(60)).await;
    peer.kill();
    match push.await.unwrap() {
        Ok(r) => {
            assert!(r.operations.iter().all(|o| matches!(o.status, StatusCode::Success | StatusCode::RemoteConnectionError)), "{r:?}");
        }
        Err(e) => assert_eq!(e.status(), Some(StatusCode::RemoteConnectionError), "{e}"),
    }
    // The source is intact; the peer holds whole entries or nothing after restarting.
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(ca.get(k.as_bytes()).await.unwrap().unwrap().value, value(i as u32));
    }
    peer.restart_after_kill();
    let cb = peer.client().await;
    for (i, k) in keys.iter().enumerate() {
        if let Some(e) = cb.get(k.as_bytes()).await.unwrap() {
            assert_eq!(e.value, value(i as u32), "{k} is torn on the peer");
        }
    }
    // And a new push to the restarted peer works (the broken pooled connection is not reused).
    let r = ca.push_to_peer(&peer_of(&peer), vec![PushOp::copy(Bytes::from_static(b"big00"))]).await.unwrap();
    assert_eq!(r.operations[0].status, StatusCode::Success);
}

#[test]
fn the_cli_pushes_key_lists_and_whole_ranges_in_pages() {
    let rt = common::runtime();
    let a = TestDrive::with_config("[limits]\nmax_key_range_count = 7\n");
    let peer = TestDrive::start(&[]);
    rt.block_on(async {
        let ca = a.client().await;
        // Versioned entries, and so are their copies at the peer, which an unforced push refuses to overwrite.
        let versioned = PutOptions { new_version: Bytes::from_static(b"1"), tag: Bytes::from_static(b"t"), algorithm: Some(1), force: true, ..PutOptions::default() };
        for i in 0..30 {
            ca.put(format!("r{i:02}").as_bytes(), Bytes::from(format!("v{i}")), versioned.clone()).await.unwrap();
        }
    });
    let spindle = env!("CARGO_BIN_EXE_spindle");
    let run = |args: &[&str]| std::process::Command::new(spindle).args(args).output().unwrap();
    let out = run(&["p2p", "push", "--from", &a.addr, "--to", &peer.addr, "--keys", "r00", "r01", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["pushed"], 2);

    // 25 keys r05..r29 in pages of 7, forced (r05 and r06 exist nowhere yet; overwrite anyway).
    let out = run(&["p2p", "push", "--from", &a.addr, "--to", &peer.addr, "--range", "r05", "r29", "--force", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["statuses"]["SUCCESS"], 25);

    // Unforced: new keys (r02..r04) are copied, versioned ones at the peer are refused; every
    // key is reported and the exit status says not everything was copied.
    let out = run(&["p2p", "push", "--from", &a.addr, "--to", &peer.addr, "--range", "r00", "r09"]);
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("VERSION_MISMATCH"), "{text}");

    rt.block_on(async {
        let cb = peer.client().await;
        let q = spindle_client::RangeQuery::inclusive(Bytes::from_static(b"r"), Bytes::from_static(b"s"), 200);
        assert_eq!(cb.get_key_range(q).await.unwrap().len(), 30);
    });
}
