//! Harnesses shared by the fuzz targets (`fuzz/`) and the corpus replay tests, so that what
//! the fuzzer found keeps being checked by the ordinary test suite on a stable toolchain.

// Test support (doc-hidden): a harness that cannot set itself up fails the test it serves.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test support; a panic fails the test")]

use std::sync::{Arc, OnceLock};

use bytes::{Bytes, BytesMut};
use spindle_engine::MemEngine;
use spindle_proto::pb::message::{AuthType, HmaCauth};
use spindle_proto::pb::Message;
use spindle_proto::{encode_frame, DEFAULT_HMAC_KEY};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::config::{DriveConfig, EngineKind};
use crate::state::DriveState;

/// Separates the commands in a `drive_commands` input.
pub const COMMAND_SEPARATOR: &[u8] = b"\xfe\xed";

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime"))
}

fn state() -> Arc<DriveState> {
    static STATE: OnceLock<Arc<DriveState>> = OnceLock::new();
    STATE
        .get_or_init(|| {
            let dir = spindle_engine::testing::process_temp_dir("spindle-fuzz");
            let _ = std::fs::create_dir_all(&dir);
            let config = DriveConfig { data_dir: dir, engine: EngineKind::Memory, reserved_bytes: 0, ..DriveConfig::default() };
            DriveState::new(config, MemEngine::new(), crate::persist::Identity::generate(), 0, 0)
        })
        .clone()
}

/// Decodes `input` as a stream of frames until the first error, checking that every frame's
/// Command, where it decodes, has the same header and status through the decoder the load
/// generator uses (`decode_command_head`). Panics on a disagreement.
pub fn decode_frames(input: &[u8]) {
    let mut decoder = spindle_proto::FrameDecoder::new(1 << 20, 1 << 20);
    let mut buf = BytesMut::from(input);
    while let Ok(Some(frame)) = decoder.decode(&mut buf) {
        let bytes = frame.message.command_bytes.unwrap_or_default();
        let head = spindle_proto::decode_command_head(&bytes);
        if let Ok(command) = <spindle_proto::pb::Command as prost::Message>::decode(bytes) {
            let (header, status) = head.expect("the head of a decodable command decodes");
            assert_eq!(header, command.header.unwrap_or_default());
            assert_eq!(status, command.status);
        }
    }
}

/// One connection at a time: `serve_signed_commands` must know the id its connection gets.
static SERVING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Feeds raw bytes to one connection of an in-memory drive and reads whatever it answers.
pub fn serve_raw(input: &[u8]) -> Vec<u8> {
    let _one = SERVING.lock().unwrap_or_else(|e| e.into_inner());
    serve_raw_alone(input)
}

fn serve_raw_alone(input: &[u8]) -> Vec<u8> {
    let state = state();
    runtime().block_on(async move {
        let (mut client, server) = tokio::io::duplex(1 << 20);
        let served = tokio::spawn(crate::connection::serve(state, server, "127.0.0.1:1".parse().expect("address"), crate::connection::Transport::Plain));
        let _ = client.write_all(input).await;
        let _ = client.shutdown().await;
        let mut out = Vec::new();
        let _ = client.read_to_end(&mut out).await;
        served.await.expect("connection task must not panic");
        out
    })
}

/// Splits `input` into command byte strings, wraps each in a correctly signed frame (so the
/// fuzzer reaches command handling rather than dying at the HMAC), and serves them. A command
/// that decodes gets the connection's id in its header, as every real client sends it (the
/// drive refuses requests without it), so the fuzzer gets past that check too.
pub fn serve_signed_commands(input: &[u8]) -> Vec<u8> {
    let _one = SERVING.lock().unwrap_or_else(|e| e.into_inner());
    let connection_id = state().next_connection_id();
    let mut frames = BytesMut::new();
    let mut rest = input;
    loop {
        let (command, tail) = match rest.windows(COMMAND_SEPARATOR.len()).position(|w| w == COMMAND_SEPARATOR) {
            Some(i) => (&rest[..i], Some(&rest[i + COMMAND_SEPARATOR.len()..])),
            None => (rest, None),
        };
        // The last byte of each chunk chooses the value size, so PUTs carry values.
        let value_len = command.last().map(|b| *b as usize * 64).unwrap_or(0);
        let command_bytes = match <spindle_proto::pb::Command as prost::Message>::decode(command) {
            Ok(mut decoded) => {
                decoded.header.get_or_insert_with(Default::default).connection_id = Some(connection_id);
                Bytes::from(prost::Message::encode_to_vec(&decoded))
            }
            Err(_) => Bytes::copy_from_slice(command),
        };
        let hmac = spindle_proto::hmac::sign(DEFAULT_HMAC_KEY, &command_bytes);
        let message = Message {
            auth_type: Some(AuthType::Hmacauth as i32),
            hmac_auth: Some(HmaCauth { identity: Some(1), hmac: Some(Bytes::copy_from_slice(&hmac)) }),
            pin_auth: None,
            command_bytes: Some(command_bytes),
        };
        encode_frame(&message, &vec![0x42; value_len], &mut frames);
        match tail {
            Some(t) => rest = t,
            None => break,
        }
    }
    serve_raw_alone(&frames)
}
