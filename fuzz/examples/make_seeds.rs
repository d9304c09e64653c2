//! Writes the seed corpus: valid frames, commands of every type and metadata records, so the
//! fuzzers start from inputs that reach deep into the decoders.
//! Run: `cargo run --manifest-path fuzz/Cargo.toml --example make_seeds`.

use bytes::{Bytes, BytesMut};
use prost::Message as _;
use spindle_drive::fuzzing::COMMAND_SEPARATOR;
use spindle_proto::pb::command::{get_log, Body, GetLog, Header, KeyValue, Range};
use spindle_proto::pb::message::{AuthType, HmaCauth};
use spindle_proto::pb::{Command, Message};
use spindle_proto::{encode_frame, MessageType};

fn command(seq: i64, kind: MessageType, body: Body) -> Vec<u8> {
    let header = Header { sequence: Some(seq), message_type: Some(kind as i32), cluster_version: Some(0), ..Header::default() };
    Command { header: Some(header), body: Some(body), status: None }.encode_to_vec()
}

fn kv(key: &str, version: &str) -> Body {
    Body {
        key_value: Some(KeyValue {
            key: Some(Bytes::copy_from_slice(key.as_bytes())),
            new_version: Some(Bytes::copy_from_slice(version.as_bytes())),
            tag: Some(Bytes::from_static(b"tag")),
            algorithm: Some(1),
            synchronization: Some(2),
            ..KeyValue::default()
        }),
        ..Body::default()
    }
}

fn main() -> std::io::Result<()> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let all_logs = GetLog { types: (0..=7).collect(), device: Some(get_log::Device { name: Some(Bytes::from_static(b"com.spindle:engine")) }), ..GetLog::default() };
    let range = Range { start_key: Some(Bytes::from_static(b"a")), end_key: Some(Bytes::from_static(b"z")), start_key_inclusive: Some(true), max_returned: Some(10), reverse: Some(true), ..Range::default() };
    let commands = vec![
        command(1, MessageType::Put, kv("alpha", "1")),
        command(2, MessageType::Get, kv("alpha", "")),
        command(3, MessageType::Getnext, kv("a", "")),
        command(4, MessageType::Getprevious, kv("z", "")),
        command(5, MessageType::Getversion, kv("alpha", "")),
        command(6, MessageType::Getkeyrange, Body { range: Some(range), ..Body::default() }),
        command(7, MessageType::Getlog, Body { get_log: Some(all_logs), ..Body::default() }),
        command(8, MessageType::Delete, kv("alpha", "1")),
        command(9, MessageType::Noop, Body::default()),
        command(10, MessageType::Flushalldata, Body::default()),
    ];
    let dir = root.join("drive_commands");
    std::fs::create_dir_all(&dir)?;
    for (i, c) in commands.iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{i}")), c)?;
    }
    std::fs::write(dir.join("seed-all"), commands.join(COMMAND_SEPARATOR))?;

    let mut frames = BytesMut::new();
    for c in &commands {
        let bytes = Bytes::from(c.clone());
        let hmac = spindle_proto::hmac::sign(spindle_proto::DEFAULT_HMAC_KEY, &bytes);
        let message = Message {
            auth_type: Some(AuthType::Hmacauth as i32),
            hmac_auth: Some(HmaCauth { identity: Some(1), hmac: Some(Bytes::copy_from_slice(&hmac)) }),
            pin_auth: None,
            command_bytes: Some(bytes),
        };
        encode_frame(&message, b"value", &mut frames);
    }
    for target in ["frame", "drive_raw"] {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("seed-session"), &frames)?;
    }

    let dir = root.join("meta_record");
    std::fs::create_dir_all(&dir)?;
    let meta = spindle_engine::Meta { version: Bytes::from_static(b"v1"), tag: Bytes::from_static(b"t"), algorithm: Some(2), value_len: 5, value_crc: 7 };
    std::fs::write(dir.join("seed-0"), spindle_engine::record::encode(&meta, None).unwrap())?;
    std::fs::write(dir.join("seed-1"), spindle_engine::record::encode(&spindle_engine::Meta::default(), None).unwrap())?;
    std::fs::write(dir.join("seed-2"), spindle_engine::record::encode(&meta, Some(b"small")).unwrap())?;
    Ok(())
}
