//! One replica's part of a cluster operation: reading a key's tag, and storing a tagged entry
//! only if it is newer than what the replica holds ("store if newer", which Kinetic does not
//! have, built from its compare-and-swap put).

use bytes::Bytes;
use futures_util::future::try_join_all;
use spindle_client::{Client, ClientError, PutOptions, Synchronization};

use crate::tag::Tag;

/// Compare-and-swap rounds before a store gives up: each lost round means another writer
/// changed the entry in between, and the loop ends as soon as the entry is newer than ours.
const MAX_STORE_ROUNDS: usize = 32;

/// What a replica holds for a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    Absent,
    /// The raw version bytes and what they decode to: `None` for an entry written outside the
    /// cluster (ordered before every tag, so the cluster's writes replace it).
    Entry { version: Bytes, tag: Option<Tag> },
}

impl Held {
    pub fn tag(&self) -> Option<Tag> {
        match self {
            Held::Absent => None,
            Held::Entry { tag, .. } => *tag,
        }
    }

    pub(crate) fn version(&self) -> Bytes {
        match self {
            Held::Absent => Bytes::new(),
            Held::Entry { version, .. } => version.clone(),
        }
    }

    fn at_least(&self, tag: &Tag) -> bool {
        self.tag().is_some_and(|t| t >= *tag)
    }
}

pub async fn held(client: &Client, key: &[u8]) -> Result<Held, ClientError> {
    Ok(match client.get_metadata(key).await? {
        None => Held::Absent,
        Some(m) => Held::Entry { tag: Tag::decode(&m.version), version: m.version },
    })
}

/// The outcome of a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// The replica now holds our entry.
    Written,
    /// The replica already held this write or a newer one.
    Superseded,
}

/// Stores `value` under `tag` unless the replica holds the same or a newer write. `known`: what
/// the replica held when last read, if that was read (saves a round trip).
pub async fn store_if_newer(client: &Client, key: &[u8], value: Bytes, tag: Tag, known: Option<Held>) -> Result<Stored, ClientError> {
    let mut current = known;
    for _ in 0..MAX_STORE_ROUNDS {
        let now = match current.take() {
            Some(h) => h,
            None => held(client, key).await?,
        };
        if now.at_least(&tag) {
            return Ok(Stored::Superseded);
        }
        // Refused: the entry changed since it was read; read it again.
        if store_expecting(client, key, value.clone(), tag, &now).await? == Stored::Written {
            return Ok(Stored::Written);
        }
    }
    Err(ClientError::Protocol(format!("the entry changed under {MAX_STORE_ROUNDS} compare-and-swap rounds in a row")))
}

/// Stores `value` under `tag` only if the replica holds exactly `expected`: one
/// compare-and-swap, never repeated. `Stored::Superseded` when it held anything else (and
/// then nothing was written).
pub async fn store_expecting(client: &Client, key: &[u8], value: Bytes, tag: Tag, expected: &Held) -> Result<Stored, ClientError> {
    let options = PutOptions {
        db_version: expected.version(),
        new_version: tag.encode(),
        force: false,
        sync: Synchronization::Writethrough,
        ..PutOptions::default()
    };
    match client.put(key, value, options).await {
        Ok(()) => Ok(Stored::Written),
        Err(e) if e.is_version_mismatch() => Ok(Stored::Superseded),
        Err(e) => Err(e),
    }
}

/// What the replica holds for each of `keys` (requests pipelined on the connection).
pub async fn held_many(client: &Client, keys: &[Bytes]) -> Result<Vec<Held>, ClientError> {
    try_join_all(keys.iter().map(|k| held(client, k))).await
}

/// One entry of a batch store: drive key, stored value, tag.
pub type BatchEntry = (Bytes, Bytes, Tag);

/// Stores a batch's entries on one replica with one Kinetic batch, atomically: each entry
/// unless the replica holds the same or a newer write for its key (a newer write replaced
/// that key after the batch), all the others together or none. `known`: what the replica
/// held for each entry's key when last read, if that was read.
pub async fn store_batch_if_newer(client: &Client, entries: &[BatchEntry], known: Option<Vec<Held>>) -> Result<Stored, ClientError> {
    let keys: Vec<Bytes> = entries.iter().map(|(k, _, _)| k.clone()).collect();
    let mut current = known;
    for _ in 0..MAX_STORE_ROUNDS {
        let now = match current.take() {
            Some(h) if h.len() == entries.len() => h,
            _ => held_many(client, &keys).await?,
        };
        let due: Vec<(&BatchEntry, &Held)> = entries.iter().zip(&now).filter(|((_, _, tag), held)| !held.at_least(tag)).collect();
        if due.is_empty() {
            return Ok(Stored::Superseded);
        }
        let mut batch = client.start_batch().await?;
        for ((key, value, tag), held) in due {
            let options = PutOptions { db_version: held.version(), new_version: tag.encode(), force: false, ..PutOptions::default() };
            if let Err(e) = batch.put(key, value.clone(), options) {
                let _ = batch.abort().await;
                return Err(e);
            }
        }
        match batch.commit().await {
            Ok(()) => return Ok(Stored::Written),
            Err(e) if e.is_version_mismatch() => continue,
            Err(e) => return Err(e),
        }
    }
    Err(ClientError::Protocol(format!("the batch's entries changed under {MAX_STORE_ROUNDS} compare-and-swap rounds in a row")))
}
