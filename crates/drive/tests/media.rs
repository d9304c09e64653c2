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
    c.put(b"m/good-crc", v.clone(), put_opts(crc32c::crc32c(&v).to_be_bytes().to_vec(), Algorithm::Crc32c)).await.unwrap();
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
