//! One replica's part of a cluster operation, the replica acting as a Paxos acceptor for each
//! of its keys: reading what it holds, promising a ballot, and accepting a write under a
//! ballot. Kinetic has none of these; each is built from the drive's atomic compare-and-swap
//! on the entry's version, which holds the replica's `Stamp`.

use bytes::Bytes;
use futures_util::future::try_join_all;
use spindle_client::{Client, ClientError, PutOptions, Synchronization};

use crate::stamp::{Stamp, NOTHING};
use crate::tag::Tag;

/// Compare-and-swap rounds before a store gives up: each lost round means another writer
/// changed the entry in between, and the loop ends as soon as the entry is at or above ours.
const MAX_STORE_ROUNDS: usize = 32;

/// What a replica holds for a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    Absent,
    /// The raw version bytes and what they decode to: `None` for an entry written outside the
    /// cluster (ordered before every stamp, so the cluster's writes replace it).
    Entry { version: Bytes, stamp: Option<Stamp> },
}

impl Held {
    pub fn from_version(version: Bytes) -> Held {
        Held::Entry { stamp: Stamp::decode(&version), version }
    }

    pub fn stamp(&self) -> Option<Stamp> {
        match self {
            Held::Absent => None,
            Held::Entry { stamp, .. } => *stamp,
        }
    }

    /// The write held, if one was accepted (a promise on an empty key holds none).
    pub fn tag(&self) -> Option<Tag> {
        self.stamp().map(|s| s.identity).filter(|t| *t != NOTHING)
    }

    /// The order of what replicas accepted (`Stamp::order`).
    pub fn order(&self) -> Option<(Tag, Tag)> {
        self.stamp().filter(|s| s.identity != NOTHING).map(|s| s.order())
    }

    /// What the replica holds once it has promised `ballot` (what `promise` writes).
    pub fn promised(&self, ballot: Tag) -> Held {
        Held::from_version(self.acceptor().with_promise(ballot).encode())
    }

    /// What the replica stands at as an acceptor: nothing for an absent or foreign entry.
    fn acceptor(&self) -> Stamp {
        self.stamp().unwrap_or(Stamp::plain(NOTHING))
    }

    pub(crate) fn version(&self) -> Bytes {
        match self {
            Held::Absent => Bytes::new(),
            Held::Entry { version, .. } => version.clone(),
        }
    }

    /// Whether the replica holds the write `identity` accepted at `ballot` or later.
    pub fn holds(&self, identity: Tag, ballot: Tag) -> bool {
        self.stamp().is_some_and(|s| s.holds(identity, ballot))
    }
}

pub async fn held(client: &Client, key: &[u8]) -> Result<Held, ClientError> {
    Ok(match client.get_metadata(key).await? {
        None => Held::Absent,
        Some(m) => Held::from_version(m.version),
    })
}

/// What the replica holds for a key, with the value.
pub async fn held_with_value(client: &Client, key: &[u8]) -> Result<(Held, Bytes), ClientError> {
    Ok(match client.get(key).await? {
        None => (Held::Absent, Bytes::new()),
        Some(e) => (Held::from_version(e.metadata.version), e.value),
    })
}

/// A replica's answer to an accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// It took the write.
    Yes,
    /// It held the write already (another's write-back, or an earlier try).
    Held,
    /// It holds a newer write and never promised above the ballot (`Stamp::covers`): it
    /// counts as if it had taken the write before the newer one.
    Covered,
    /// It promised above the ballot: it will never take it.
    No,
}

impl Answer {
    /// Whether the answer counts toward the accept's quorum.
    pub fn counts(&self) -> bool {
        matches!(self, Answer::Yes | Answer::Held | Answer::Covered)
    }
}

/// The old name of an accept's outcome, kept for repair and tests: `Written` for `Yes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    Written,
    Superseded,
}

/// Accepts `value` as the write `identity` under `ballot`, unless the replica stands at or
/// above that ballot (`Covered` or `No`, nothing written). `Yes` too when it already holds
/// that write at that ballot or later. `known`: what the replica held when last read.
pub async fn accept(client: &Client, key: &[u8], value: Bytes, identity: Tag, ballot: Tag, known: Option<Held>) -> Result<Answer, ClientError> {
    Ok(match accept_unless(client, key, value, identity, ballot, known, None).await? {
        Accepted::Answered(a) => a,
        // Not met without `decided`: written over as any entry.
        Accepted::Met { .. } => Answer::No,
    })
}

/// An accept's outcome when batches it did not read are kept (`accept_unless`).
#[derive(Debug)]
pub enum Accepted {
    Answered(Answer),
    /// It met this entry of the batch `batch` for `key`, and wrote nothing.
    Met { key: Bytes, batch: Stamp },
}

/// `accept`, except that it writes nothing over an entry of a batch not in `decided` (those
/// its writer read on this replica, and those it decided since): `Accepted::Met`, and the
/// caller decides that batch first (`Store::accept_deciding`). `decided` `None` replaces
/// whatever its ballot admits, as `accept` does. `known` is only a guess of what the replica
/// holds, tried first.
pub async fn accept_unless(
    client: &Client,
    key: &[u8],
    value: Bytes,
    identity: Tag,
    ballot: Tag,
    known: Option<Held>,
    decided: Option<&[Tag]>,
) -> Result<Accepted, ClientError> {
    let mut current = known;
    for _ in 0..MAX_STORE_ROUNDS {
        let now = match current.take() {
            Some(h) => h,
            None => held(client, key).await?,
        };
        if now.holds(identity, ballot) {
            return Ok(Accepted::Answered(Answer::Held));
        }
        let acceptor = now.acceptor();
        if acceptor.covers(ballot) {
            return Ok(Accepted::Answered(Answer::Covered));
        }
        if !acceptor.admits(ballot) {
            return Ok(Accepted::Answered(Answer::No));
        }
        if let (Some(batch), Some(decided)) = (now.stamp().filter(|s| s.identity.is_batch()), decided) {
            if !decided.iter().any(|d| d.same_write(&batch.identity)) {
                return Ok(Accepted::Met { key: Bytes::copy_from_slice(key), batch });
            }
        }
        if put_expecting(client, key, value.clone(), &now, acceptor.accept(identity, ballot)).await? {
            return Ok(Accepted::Answered(Answer::Yes));
        }
    }
    Err(ClientError::Protocol(format!("the entry changed under {MAX_STORE_ROUNDS} compare-and-swap rounds in a row")))
}

/// Promises `ballot`: the replica will accept nothing below it. Returns what it held (and the
/// value) when it promised, or `None` when it stands at or above the ballot. `known`: what it
/// held, with the value, when last read.
pub async fn promise(client: &Client, key: &[u8], ballot: Tag, known: Option<(Held, Bytes)>) -> Result<Option<(Held, Bytes)>, ClientError> {
    let mut current = known;
    for _ in 0..MAX_STORE_ROUNDS {
        let (now, value) = match current.take() {
            Some(h) => h,
            None => held_with_value(client, key).await?,
        };
        let acceptor = now.acceptor();
        if !acceptor.may_promise(ballot) {
            return Ok(None);
        }
        // The entry keeps its value and write; only its version gains the promise.
        if put_expecting(client, key, value.clone(), &now, acceptor.with_promise(ballot)).await? {
            return Ok(Some((now, value)));
        }
    }
    Err(ClientError::Protocol(format!("the entry changed under {MAX_STORE_ROUNDS} compare-and-swap rounds in a row")))
}

/// One compare-and-swap: `value` under `stamp` if the replica holds exactly `expected`.
async fn put_expecting(client: &Client, key: &[u8], value: Bytes, expected: &Held, stamp: Stamp) -> Result<bool, ClientError> {
    let options = PutOptions {
        db_version: expected.version(),
        new_version: stamp.encode(),
        force: false,
        sync: Synchronization::Writethrough,
        ..PutOptions::default()
    };
    let result = client.put(key, value, options).await;
    tracing::trace!(conn = client.connection_id(), key = ?Bytes::copy_from_slice(key), expected = ?expected.stamp(), new = ?stamp, ok = result.is_ok(), "compare-and-swap");
    match result {
        Ok(()) => Ok(true),
        Err(e) if e.is_version_mismatch() => Ok(false),
        Err(e) => Err(e),
    }
}

/// Stores `value` under `tag` unless the replica stands at or above it (repair's copy: a
/// delayed accept of the write under its own ballot).
pub async fn store_if_newer(client: &Client, key: &[u8], value: Bytes, tag: Tag, known: Option<Held>) -> Result<Stored, ClientError> {
    Ok(match accept(client, key, value, tag, tag, known).await? {
        Answer::Yes => Stored::Written,
        Answer::Held | Answer::Covered | Answer::No => Stored::Superseded,
    })
}

/// Stores `value` under `stamp` only if the replica holds exactly `expected`: one
/// compare-and-swap, never repeated. `Stored::Superseded` when it held anything else (and
/// then nothing was written). The caller makes `stamp` keep `expected`'s promise.
pub async fn store_expecting(client: &Client, key: &[u8], value: Bytes, stamp: Stamp, expected: &Held) -> Result<Stored, ClientError> {
    Ok(if put_expecting(client, key, value, expected, stamp).await? { Stored::Written } else { Stored::Superseded })
}

/// What the replica holds for each of `keys` (requests pipelined on the connection).
pub async fn held_many(client: &Client, keys: &[Bytes]) -> Result<Vec<Held>, ClientError> {
    try_join_all(keys.iter().map(|k| held(client, k))).await
}

/// One entry of a batch store: drive key, stored value, the write's tag for that key.
pub type BatchEntry = (Bytes, Bytes, Tag);

/// Accepts a batch's entries on one replica under `ballot` with one Kinetic batch,
/// atomically: all of them, or none when the replica stands at or above the ballot for any
/// of its keys (`No`; `Covered` when it holds a newer write for every key it would not take
/// and never promised above the ballot for any). Keys already holding their entry are left
/// as they are. `known`: what the replica held for each entry's key when last read.
pub async fn accept_batch(client: &Client, entries: &[BatchEntry], ballot: Tag, known: Option<Vec<Held>>) -> Result<Answer, ClientError> {
    Ok(match accept_batch_unless(client, entries, ballot, known, None).await? {
        Accepted::Answered(a) => a,
        Accepted::Met { .. } => Answer::No,
    })
}

/// `accept_batch`, except that it writes nothing over an entry of another batch not in
/// `decided` (`accept_unless`).
pub async fn accept_batch_unless(client: &Client, entries: &[BatchEntry], ballot: Tag, known: Option<Vec<Held>>, decided: Option<&[Tag]>) -> Result<Accepted, ClientError> {
    let keys: Vec<Bytes> = entries.iter().map(|(k, _, _)| k.clone()).collect();
    let mut current = known;
    for _ in 0..MAX_STORE_ROUNDS {
        let now = match current.take() {
            Some(h) if h.len() == entries.len() => h,
            _ => held_many(client, &keys).await?,
        };
        if let Some(decided) = decided {
            let unread = entries.iter().zip(&now).find_map(|((key, _, tag), held)| {
                let batch = held.stamp().filter(|s| s.identity.is_batch() && !s.identity.same_write(tag) && !decided.iter().any(|d| d.same_write(&s.identity)))?;
                held.acceptor().admits(ballot).then(|| (key.clone(), batch))
            });
            if let Some((key, batch)) = unread {
                return Ok(Accepted::Met { key, batch });
            }
        }
        let due: Vec<(&BatchEntry, &Held)> = entries.iter().zip(&now).filter(|((_, _, tag), held)| !held.holds(*tag, ballot)).collect();
        if due.is_empty() {
            return Ok(Accepted::Answered(Answer::Held));
        }
        if due.iter().any(|(_, held)| !held.acceptor().admits(ballot)) {
            // A batch is one write: it counts as covered only where no key of it could be
            // taken alone, and no key promised above it.
            let covered = due.iter().all(|(_, held)| held.acceptor().covers(ballot));
            return Ok(Accepted::Answered(if covered { Answer::Covered } else { Answer::No }));
        }
        let mut batch = client.start_batch().await?;
        for ((key, value, tag), held) in due {
            let new = held.acceptor().accept(*tag, ballot).encode();
            let options = PutOptions { db_version: held.version(), new_version: new, force: false, ..PutOptions::default() };
            if let Err(e) = batch.put(key, value.clone(), options) {
                let _ = batch.abort().await;
                return Err(e);
            }
        }
        let result = batch.commit().await;
        tracing::trace!(conn = client.connection_id(), keys = ?keys, ?ballot, ok = result.is_ok(), "batch commit");
        match result {
            Ok(()) => return Ok(Accepted::Answered(Answer::Yes)),
            Err(e) if e.is_version_mismatch() => continue,
            Err(e) => return Err(e),
        }
    }
    Err(ClientError::Protocol(format!("the batch's entries changed under {MAX_STORE_ROUNDS} compare-and-swap rounds in a row")))
}

/// A batch written under its own tag (repair's copy, tests).
pub async fn store_batch_if_newer(client: &Client, entries: &[BatchEntry], known: Option<Vec<Held>>) -> Result<Stored, ClientError> {
    let Some((_, _, tag)) = entries.first() else { return Ok(Stored::Superseded) };
    Ok(match accept_batch(client, entries, *tag, known).await? {
        Answer::Yes => Stored::Written,
        Answer::Held | Answer::Covered | Answer::No => Stored::Superseded,
    })
}

/// What the replica holds for each of `keys`, with the values.
pub async fn held_many_with_values(client: &Client, keys: &[Bytes]) -> Result<Vec<(Held, Bytes)>, ClientError> {
    try_join_all(keys.iter().map(|k| held_with_value(client, k))).await
}

/// Promises `ballot` for every one of `keys` (pipelined); `None` when the replica stands at or
/// above it for any of them (the others may keep the promise: it only refuses lower ballots).
pub async fn promise_many(client: &Client, keys: &[Bytes], ballot: Tag, known: Option<Vec<(Held, Bytes)>>) -> Result<Option<Vec<(Held, Bytes)>>, ClientError> {
    let known: Vec<Option<(Held, Bytes)>> = match known {
        Some(k) if k.len() == keys.len() => k.into_iter().map(Some).collect(),
        _ => vec![None; keys.len()],
    };
    let answers = try_join_all(keys.iter().zip(known).map(|(k, known)| promise(client, k, ballot, known))).await?;
    Ok(answers.into_iter().collect())
}
