//! Replays the fuzzers' corpora (fuzz/corpus, found by `cargo fuzz`) through the same
//! harnesses on the stable toolchain, so every input the fuzzer kept stays a regression test.

use std::path::PathBuf;

use bytes::Bytes;
use spindle_drive::fuzzing::{decode_frames, serve_raw, serve_signed_commands};

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    let mut inputs: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "empty corpus {}", dir.display());
    inputs
}

#[test]
fn frame_corpus_decodes_without_panics() {
    for input in corpus("frame") {
        decode_frames(&input);
    }
}

#[test]
fn meta_record_corpus_round_trips() {
    for input in corpus("meta_record") {
        if let Ok((meta, placement)) = spindle_engine::record::decode(Bytes::from(input.clone())) {
            assert_eq!(&spindle_engine::record::encode_placed(&meta, &placement).unwrap()[..], &input[..]);
        }
    }
}

#[test]
fn settings_corpus_decodes_without_panics_and_checksummed_files_round_trip() {
    let mut decoded = 0;
    for input in corpus("settings") {
        if let Ok(stored) = spindle_drive::persist::decode(&input) {
            decoded += 1;
            if input.starts_with(spindle_drive::persist::MAGIC) {
                assert_eq!(spindle_drive::persist::encode(&stored), input);
            }
        }
    }
    assert!(decoded > 0, "the corpus keeps at least one valid settings file");
}

#[test]
fn drive_raw_corpus_is_served_without_panics() {
    for input in corpus("drive_raw") {
        serve_raw(&input);
    }
}

#[test]
fn drive_commands_corpus_is_served_without_panics() {
    let (mut answered, mut succeeded) = (0, 0);
    for input in corpus("drive_commands") {
        let out = serve_signed_commands(&input);
        if !out.is_empty() {
            answered += 1;
        }
        succeeded += successful_answers(&out);
    }
    // Every connection at least gets the sign-on, and the harness's requests get past the
    // drive's checks (signature, connection id, sequence) to commands that succeed.
    assert!(answered > 0);
    assert!(succeeded > 0, "no request of the corpus succeeded: the harness no longer reaches command handling");
}

/// Answers (not the sign-on) with status SUCCESS in a drive's output.
fn successful_answers(out: &[u8]) -> usize {
    use prost::Message as _;
    let mut decoder = spindle_proto::FrameDecoder::new(1 << 24, 1 << 24);
    let mut buf = bytes::BytesMut::from(out);
    let mut n = 0;
    while let Ok(Some(frame)) = decoder.decode(&mut buf) {
        let Ok(command) = spindle_proto::pb::Command::decode(frame.message.command_bytes.unwrap_or_default()) else { continue };
        let answers = command.header.as_ref().is_some_and(|h| h.ack_sequence.is_some());
        let ok = command.status.as_ref().and_then(|s| s.code) == Some(spindle_proto::StatusCode::Success as i32);
        n += usize::from(answers && ok);
    }
    n
}
