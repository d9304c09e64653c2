//! Opening batches and the requests that end them ([`crate::Batch`] adds their operations).

use bytes::Bytes;
use spindle_proto::pb::command::{Body, Header};
use spindle_proto::MessageType;

use super::{Client, Response};
use crate::ClientError;

impl Client {
    /// Opens a batch: puts and deletes added to it are applied atomically by
    /// [`crate::Batch::commit`], or not at all.
    pub async fn start_batch(&self) -> Result<crate::Batch, ClientError> {
        let slot = self.shared.batch_slots.clone().acquire_owned().await.map_err(|_| ClientError::Terminated("the connection's batch slots are closed".into()))?;
        let id = self.shared.next_batch_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Made before the START_BATCH goes out: a caller that stops waiting for the answer
        // drops it, and so aborts a batch the drive may have opened.
        let mut batch = crate::Batch::new(self.clone(), id, slot);
        match self.batch_request(MessageType::StartBatch, id, None).await?.into_result() {
            Ok(_) => Ok(batch),
            Err(refused) => {
                batch.not_opened();
                Err(refused)
            }
        }
    }

    pub(crate) async fn batch_request(&self, kind: MessageType, id: u32, body: Option<Body>) -> Result<Response, ClientError> {
        let header = Header {
            cluster_version: Some(self.cluster_version()),
            connection_id: Some(self.shared.connection_id),
            message_type: Some(kind as i32),
            batch_id: Some(id),
            ..Header::default()
        };
        self.request_with_header(header, body, Bytes::new()).await
    }
}
