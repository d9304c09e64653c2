//! Atomic batches: puts and deletes sent without waiting (the drive holds them unanswered),
//! then applied all together by END_BATCH, or dropped by ABORT_BATCH.

use bytes::Bytes;
use spindle_proto::pb::command::Body;
use spindle_proto::{MessageType, StatusCode};

use crate::client::{delete_kv, put_kv};
use crate::{Client, ClientError, DeleteOptions, PutOptions};

/// An open batch. Dropped without [`Batch::commit`] or [`Batch::abort`] (an abandoned or
/// cancelled caller), it is aborted: the ABORT_BATCH goes out, unanswered, before anything
/// this client sends after the drop, so the drive frees the batch's slot before the
/// connection's next START_BATCH can ask for one. Left open, it would hold a device-wide slot
/// the client counts as free, and the connection's next START_BATCH could wait for it behind
/// its own queued requests.
pub struct Batch {
    client: Client,
    id: u32,
    sequences: Vec<i64>,
    /// Whether END_BATCH or ABORT_BATCH was sent.
    ended: bool,
    /// The connection's batch slot (`Client::start_batch`), given back when the batch ends.
    _slot: tokio::sync::OwnedSemaphorePermit,
}

impl Batch {
    pub(crate) fn new(client: Client, id: u32, slot: tokio::sync::OwnedSemaphorePermit) -> Self {
        Batch { client, id, sequences: Vec::new(), ended: false, _slot: slot }
    }

    /// The drive refused its START_BATCH: nothing to abort.
    pub(crate) fn not_opened(&mut self) {
        self.ended = true;
    }

    pub fn id(&self) -> u32 {
        self.id
    }

    /// Adds a put (its `sync` is ignored: a committed batch is durable).
    pub fn put(&mut self, key: &[u8], value: impl Into<Bytes>, options: PutOptions) -> Result<(), ClientError> {
        let body = Body { key_value: Some(put_kv(key, options)), ..Body::default() };
        let value: Bytes = value.into();
        let seq = self.client.send_unanswered(MessageType::Put, self.id, Some(body), &value)?;
        self.sequences.push(seq);
        Ok(())
    }

    pub fn delete(&mut self, key: &[u8], options: DeleteOptions) -> Result<(), ClientError> {
        let body = Body { key_value: Some(delete_kv(key, options)), ..Body::default() };
        let seq = self.client.send_unanswered(MessageType::Delete, self.id, Some(body), &[])?;
        self.sequences.push(seq);
        Ok(())
    }

    /// Applies every operation atomically and durably, or none. On failure the error names the
    /// operation (by position) that failed its check, if one did.
    pub async fn commit(mut self) -> Result<(), ClientError> {
        // Sent by the request's first poll, before it waits (`Client::request_with_header`).
        self.ended = true;
        let body = Body {
            batch: Some(spindle_proto::pb::command::Batch { count: Some(self.sequences.len() as i32), ..Default::default() }),
            ..Body::default()
        };
        let response = self.client.batch_request(MessageType::EndBatch, self.id, Some(body)).await?;
        if response.status() == StatusCode::Success {
            return Ok(());
        }
        let failed = response.body().batch.and_then(|b| b.failed_sequence);
        Err(ClientError::BatchFailed {
            code: response.status(),
            message: response.status_message(),
            failed_index: failed.and_then(|f| self.sequences.iter().position(|s| *s == f)),
        })
    }

    /// Drops every operation of the batch.
    pub async fn abort(mut self) -> Result<(), ClientError> {
        self.ended = true;
        self.client.batch_request(MessageType::AbortBatch, self.id, None).await?.into_result().map(drop)
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        if !self.ended {
            // A closed connection has dropped the batch already.
            let _ = self.client.send_unanswered(MessageType::AbortBatch, self.id, None, &[]);
        }
    }
}
