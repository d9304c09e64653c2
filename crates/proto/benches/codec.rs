//! Per-message costs of the protocol path, each beside the straightforward way it replaced:
//! signing and framing a GET request, and reading a 4 KiB GET response (HMAC check plus decode).
//!
//!   cargo bench -p spindle-proto --bench codec

use bytes::{Bytes, BytesMut};
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use prost::Message as _;
use spindle_proto::hmac::HmacKey;
use spindle_proto::pb::command::{Body, Header, KeyValue, MessageType, Status};
use spindle_proto::pb::message::{AuthType, HmaCauth};
use spindle_proto::pb::{Command, Message};
use spindle_proto::{decode_command_head, encode_frame_head, encode_message_head, Signature, StatusCode, DEFAULT_HMAC_KEY};

fn get_request(sequence: i64) -> Command {
    Command {
        header: Some(Header {
            cluster_version: Some(0),
            connection_id: Some(1_700_000_000_000),
            sequence: Some(sequence),
            message_type: Some(MessageType::Get as i32),
            ..Header::default()
        }),
        body: Some(Body { key_value: Some(KeyValue { key: Some(Bytes::from_static(b"0000000000001234")), ..KeyValue::default() }), ..Body::default() }),
        status: None,
    }
}

fn get_response() -> Bytes {
    let command = Command {
        header: Some(Header { ack_sequence: Some(1234), connection_id: Some(1_700_000_000_000), message_type: Some(MessageType::GetResponse as i32), ..Header::default() }),
        body: Some(Body {
            key_value: Some(KeyValue {
                key: Some(Bytes::from_static(b"0000000000001234")),
                db_version: Some(Bytes::from_static(b"v1")),
                tag: Some(Bytes::from_static(&[7; 20])),
                algorithm: Some(1),
                ..KeyValue::default()
            }),
            ..Body::default()
        }),
        status: Some(Status { code: Some(StatusCode::Success as i32), ..Status::default() }),
    };
    Bytes::from(command.encode_to_vec())
}

fn encode(c: &mut Criterion) {
    let key = HmacKey::new(DEFAULT_HMAC_KEY);
    let command = get_request(1234);
    let mut out = BytesMut::with_capacity(1 << 20);
    let mut scratch = Vec::with_capacity(256);
    let mut group = c.benchmark_group("sign and frame a GET request");
    group.bench_function("Message struct through prost", |b| {
        b.iter(|| {
            out.clear();
            let command_bytes = Bytes::from(black_box(&command).encode_to_vec());
            let hmac = key.sign(&command_bytes);
            let message = Message {
                auth_type: Some(AuthType::Hmacauth as i32),
                hmac_auth: Some(HmaCauth { identity: Some(1), hmac: Some(Bytes::copy_from_slice(&hmac)) }),
                pin_auth: None,
                command_bytes: Some(command_bytes),
            };
            encode_frame_head(&message, 0, &mut out);
        })
    });
    group.bench_function("encode_message_head", |b| {
        b.iter(|| {
            out.clear();
            scratch.clear();
            black_box(&command).encode(&mut scratch).unwrap();
            let hmac = key.sign(&scratch);
            encode_message_head(Signature::Hmac { identity: 1, hmac: Some(&hmac) }, &scratch, 0, &mut out);
        })
    });
    group.finish();
}

fn decode(c: &mut Criterion) {
    let key = HmacKey::new(DEFAULT_HMAC_KEY);
    let bytes = get_response();
    let hmac = key.sign(&bytes);
    let mut group = c.benchmark_group("verify and read a GET response");
    group.bench_function("full Command decode", |b| {
        b.iter(|| {
            assert!(key.verify(black_box(&bytes), &hmac));
            let command = Command::decode(bytes.clone()).unwrap();
            black_box(command.header.and_then(|h| h.ack_sequence));
        })
    });
    group.bench_function("decode_command_head", |b| {
        b.iter(|| {
            assert!(key.verify(black_box(&bytes), &hmac));
            let (header, status) = decode_command_head(&bytes).unwrap();
            black_box((header.ack_sequence, status.and_then(|s| s.code)));
        })
    });
    group.bench_function("HMAC check alone", |b| b.iter(|| assert!(key.verify(black_box(&bytes), &hmac))));
    group.finish();
}

criterion_group!(benches, encode, decode);
criterion_main!(benches);
