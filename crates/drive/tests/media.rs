//! MEDIASCAN finds entries whose value no longer matches its tag; MEDIAOPTIMIZE compacts;
//! request timeouts give EXPIRED or SERVICE_BUSY.

mod common;

use bytes::Bytes;
use common::TestDrive;
use sha1::Digest;
use spindle_client::{Algorithm, MessageType, PutOptions, RangeQuery, StatusCode, Synchronization};

fn put_opts(tag: Vec<u8>, algorithm: Algorithm) -> PutOptions {
    PutOptions { tag: Bytes::from(tag), algorithm: Some(algorithm as i32), force: true, sync: Synchronization::Writeback, ..PutOptions::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn media_scan_reports_values_that_fail_their_tags() {
    let drive = TestDrive::start().await;
    let c = drive.client().await;
    let v = Bytes::from_static(b"payload");
    c.put(b"m/good-sha1", v.clone(), put_opts(sha1::Sha1::digest(&v).to_vec(), Algorithm::Sha1)).await.unwrap();
    c.put(b"m/bad-sha1", v.clone(), put_opts(vec![0u8; 20], Algorithm::Sha1)).await.unwrap();
    c.put(b"m/good-sha2", v.clone(), put_opts(sha2::Sha256::digest(&v).to_vec(), Algorithm::Sha2)).await.unwrap();
    c.put(b"m/bad-sha2", v.clone(), put_opts(vec![1u8; 32], Algorithm::Sha2)).await.unwrap();
    c.put(b"m/good-crc", v.clone(), put_opts(crc_fast::crc32_iscsi(&v).to_be_bytes().to_vec(), Algorithm::Crc32c)).await.unwrap();
    c.put(b"m/untagged", v.clone(), PutOptions::default()).await.unwrap();
    c.put(b"m/private", v.clone(), put_opts(vec![9u8; 5], Algorithm::Crc64)).await.unwrap();

    let all = RangeQuery::inclusive(Bytes::from_static(b"m/"), Bytes::from_static(b"m/~"), 200);
    let (bad, end) = c.media_scan(all.clone()).await.unwrap();
    assert_eq!(bad, vec![Bytes::from_static(b"m/bad-sha1"), Bytes::from_static(b"m/bad-sha2")]);
    assert_eq!(end, Some(Bytes::from_static(b"m/untagged")));
    // Paging: one failure per request, continuing after endKey.
    let (first, end) = c.media_scan(RangeQuery { max_returned: 1, ..all.clone() }).await.unwrap();
    assert_eq!(first, vec![Bytes::from_static(b"m/bad-sha1")]);
    let rest = RangeQuery { start: end.unwrap(), start_inclusive: false, max_returned: 1, ..all.clone() };
    assert_eq!(c.media_scan(rest).await.unwrap().0, vec![Bytes::from_static(b"m/bad-sha2")]);
    assert_eq!(c.media_scan(RangeQuery { max_returned: 201, ..all.clone() }).await.unwrap_err().status(), Some(StatusCode::InvalidRequest));

    c.media_optimize(all).await.unwrap();
    assert_eq!(c.get(b"m/good-sha1").await.unwrap().unwrap().value, v);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_expire_long_scans() {
    let drive = TestDrive::start().await;
    let c = drive.client().await;
    for i in 0..3000 {
        c.put(format!("t/{i:05}").as_bytes(), Bytes::from(vec![7u8; 2000]), PutOptions::forced(Synchronization::Writeback)).await.unwrap();
    }
    let header = spindle_proto::pb::command::Header {
        message_type: Some(MessageType::Mediascan as i32),
        connection_id: Some(c.connection_id()),
        cluster_version: Some(0),
        timeout: Some(1),
        ..Default::default()
    };
    let range = spindle_proto::pb::command::Range {
        start_key: Some(Bytes::from_static(b"t/")),
        end_key: Some(Bytes::from_static(b"t/~")),
        start_key_inclusive: Some(true),
        ..Default::default()
    };
    let body = spindle_proto::pb::command::Body { range: Some(range), ..Default::default() };
    let r = c.request_with_header(header, Some(body), Bytes::new()).await.unwrap();
    // 3000 entries cannot be read in 1 ms: either the scan ran out of time part-way, or the
    // request had already waited past its timeout.
    assert!(matches!(r.status(), StatusCode::Expired | StatusCode::ServiceBusy), "{:?}", r.status());
    if r.status() == StatusCode::Expired {
        assert!(r.body().range.unwrap().end_key.is_some());
    }
}

/// Large values live in the value log (`spindle_engine::value_log`): MEDIASCAN reads them
/// from there and finds one damaged on the medium, a GET of it answers PERM_DATA_ERROR, and
/// GETLOG's engine log reports the log's space amplification.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn media_scan_verifies_values_in_the_value_log() {
    let drive = TestDrive::start().await;
    let c = drive.client().await;
    let value = |i: u8| Bytes::from((0..200 * 1024).map(|n| (n % 251) as u8 ^ i).collect::<Vec<u8>>());
    for i in 0..4u8 {
        c.put(format!("v/{i}").as_bytes(), value(i), PutOptions::forced(Synchronization::Writethrough)).await.unwrap();
    }
    let segment = std::fs::read_dir(drive.data_dir().join("engine/values"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "vlog"))
        .expect("a value log segment");
    let bytes = std::fs::read(&segment).unwrap();
    // v/2's value starts right after its key in its record.
    let at = bytes.windows(3).position(|w| w == b"v/2").unwrap() + 3 + 5000;
    let file = std::fs::OpenOptions::new().write(true).open(&segment).unwrap();
    std::os::unix::fs::FileExt::write_at(&file, &[bytes[at] ^ 0xff], at as u64).unwrap();

    let all = RangeQuery::inclusive(Bytes::from_static(b"v/"), Bytes::from_static(b"v/~"), 200);
    let (bad, _) = c.media_scan(all).await.unwrap();
    assert_eq!(bad, vec![Bytes::from_static(b"v/2")]);
    assert_eq!(c.get(b"v/2").await.unwrap_err().status(), Some(StatusCode::PermDataError));
    assert_eq!(c.get(b"v/3").await.unwrap().unwrap().value, value(3));

    let log = c.device_log(spindle_drive::DEVICE_LOG_ENGINE.as_bytes()).await.unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&log).unwrap();
    let vlog = &doc["value_log"];
    assert!(vlog["live_bytes"].as_u64().unwrap() >= 4 * 200 * 1024, "{doc}");
    // Each value written once: the log on disk is the values plus record and segment heads.
    assert!((1.0..1.01).contains(&vlog["space_amplification"].as_f64().unwrap()), "{doc}");
}
