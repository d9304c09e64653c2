//! Limits the drive is configured with must be ones its engine can keep (hardening issue,
//! item 14): fjall asserts that a key is at most 65,535 bytes, and a longer key that reached
//! it panicked the engine's writer thread, after which every write failed. (A limit over the
//! engine's is refused at start, which needs the `spindle` process:
//! `crates/cli/tests/engine_limits.rs`.)

mod common;

use bytes::Bytes;
use common::TestDrive;
use spindle_client::PutOptions;

/// The engine's own limit is allowed, and a key that long is stored and read back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_at_the_engines_limit_is_stored() {
    let drive = TestDrive::with_config("[limits]\nmax_key_size = 65535\nmax_message_size = 2097152\n").await;
    let c = drive.client().await;
    let key = vec![b'k'; 65_535];
    c.put(&key, Bytes::from_static(b"long key"), PutOptions::default()).await.unwrap();
    assert_eq!(c.get(&key).await.unwrap().unwrap().value, Bytes::from_static(b"long key"));
    let too_long = vec![b'k'; 65_536];
    let refused = c.put(&too_long, Bytes::from_static(b"v"), PutOptions::default()).await.unwrap_err();
    assert_eq!(refused.status(), Some(spindle_client::StatusCode::InvalidRequest), "{refused}");
    c.put(b"after", Bytes::from_static(b"v"), PutOptions::default()).await.unwrap();
}
