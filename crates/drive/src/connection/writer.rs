//! The writer task: signs and frames the answers, gathers them in the outbox and writes each
//! batch at once, returning their share of the backlog once written.

use std::sync::Arc;

use bytes::BytesMut;
use prost::Message as _;
use spindle_proto::{encode_message_head, Signature, StatusCode};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::answers::{Auth, Outgoing};
use crate::metrics::RequestMetrics;
use crate::outbox::{Backlog, Outbox};
use crate::state::DriveState;

/// Bytes of responses gathered before they are written (values of 1 KiB and more are
/// written from their own buffers and count too).
const WRITE_BUFFER: usize = 256 * 1024;

/// Appends the head of `o`'s frame (its value follows it on the wire); `scratch` holds the
/// encoded command while it is signed.
pub(super) fn encode_outgoing(o: &Outgoing, scratch: &mut Vec<u8>, out: &mut BytesMut) {
    scratch.clear();
    #[allow(clippy::expect_used, reason = "prost's encode fails only for a buffer that cannot grow; a Vec always can")]
    o.command.encode(scratch).expect("a Vec grows on demand");
    let hmac;
    let signature = match &o.auth {
        Auth::Hmac { identity, key } => {
            hmac = key.sign(scratch);
            Signature::Hmac { identity: *identity, hmac: Some(&hmac) }
        }
        Auth::Unsigned { identity } => Signature::Hmac { identity: *identity, hmac: None },
        Auth::Pin => Signature::Pin,
        Auth::Unsolicited => Signature::Unsolicited,
    };
    encode_message_head(signature, scratch, o.value.len() as u32, out);
}

pub(super) async fn write_loop<W: AsyncWrite + Unpin>(wr: W, rx: mpsc::UnboundedReceiver<Vec<Outgoing>>, backlog: Arc<Backlog>, state: Arc<DriveState>) {
    write_answers(wr, rx, &backlog, &state.metrics).await;
    // Whatever is still queued will never be written; a reader waiting for room must not wait.
    backlog.close();
}

async fn write_answers<W: AsyncWrite + Unpin>(mut wr: W, mut rx: mpsc::UnboundedReceiver<Vec<Outgoing>>, backlog: &Backlog, metrics: &RequestMetrics) {
    let mut outbox = Outbox::with_capacity(WRITE_BUFFER);
    let mut scratch = Vec::with_capacity(4096);
    // Charged bytes of the answers in the outbox, returned to the backlog once written.
    let mut gathered = 0;
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        while let Some(batch) = next {
            for o in batch {
                if let (Some(received), Some(header)) = (o.received, &o.command.header) {
                    let status = o.command.status.as_ref().and_then(|s| s.code).unwrap_or(StatusCode::Success as i32);
                    metrics.record(header.message_type.unwrap_or(-1), status, received.elapsed());
                }
                outbox.push(|out| encode_outgoing(&o, &mut scratch, out), &o.value);
                gathered += o.charged;
                drop(o);
                if outbox.len() >= WRITE_BUFFER {
                    if outbox.write_to(&mut wr).await.is_err() {
                        return;
                    }
                    backlog.remove(std::mem::take(&mut gathered));
                }
            }
            next = rx.try_recv().ok();
        }
        if (!outbox.is_empty() && outbox.write_to(&mut wr).await.is_err()) || wr.flush().await.is_err() {
            return;
        }
        backlog.remove(std::mem::take(&mut gathered));
    }
    let _ = wr.shutdown().await;
}
