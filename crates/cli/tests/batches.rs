//! Atomic batches under SIGKILL: a batch is on disk whole or not at all. This needs the
//! `spindle` process (killed and started again); the batches' protocol behaviour is tested
//! against an in-process drive in `crates/drive/tests/batches.rs`.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::TestDrive;
use spindle_client::{PutOptions, Synchronization};

fn forced() -> PutOptions {
    PutOptions::forced(Synchronization::Writeback)
}

#[test]
fn a_batch_survives_sigkill_whole_or_not_at_all() {
    let rt = common::runtime();
    let mut drive = TestDrive::start(&[]);
    let keys: Vec<String> = (0..6).map(|i| format!("crash{i}")).collect();
    for attempt in 0..3u64 {
        let committed = rt.block_on(async {
            let c = drive.client().await;
            let keys = keys.clone();
            let task = tokio::spawn(async move {
                let mut committed = None;
                for round in 0.. {
                    let Ok(mut batch) = c.start_batch().await else { break };
                    let value = Bytes::from(format!("{attempt}-{round}"));
                    for k in &keys {
                        if batch.put(k.as_bytes(), value.clone(), forced()).is_err() {
                            return committed;
                        }
                    }
                    match batch.commit().await {
                        Ok(()) => committed = Some(value),
                        Err(_) => break,
                    }
                }
                committed
            });
            tokio::time::sleep(Duration::from_millis(200 + 150 * attempt)).await;
            drive.kill();
            task.await.unwrap()
        });
        drive.restart_after_kill();
        rt.block_on(async {
            let c = drive.client().await;
            let mut values = Vec::new();
            for k in &keys {
                values.push(c.get(k.as_bytes()).await.unwrap().map(|e| e.value));
            }
            assert!(values.windows(2).all(|w| w[0] == w[1]), "attempt {attempt}: a batch was torn by the crash: {values:?}");
            if let Some(acked) = committed {
                // The last acknowledged batch (or a later one that also made it) is there.
                let stored = values[0].clone().expect("committed batch lost");
                let parse = |v: &Bytes| String::from_utf8(v.to_vec()).unwrap().split('-').map(|p| p.parse::<u64>().unwrap()).collect::<Vec<_>>();
                assert!(parse(&stored) >= parse(&acked), "attempt {attempt}: stored {stored:?} is older than acknowledged {acked:?}");
            }
        });
    }
}
