//! The records that reference data, walked in one order: the orphan scan asks which data ids
//! nothing accounts for, and the census (a check of tests and the simulator) which data the
//! store still needs. One walk, so the two cannot come to disagree about what a reference is.

use crate::kv::{KvError, Pages};
use crate::layout::{self, DataId};
use crate::objects::{Core, PAGE};
use crate::records::{self, PartRecord, RecordError};

/// One record's reference to data.
#[derive(Debug, Clone, Copy)]
pub struct Reference {
    pub data: DataId,
    /// Bytes of the data the record names (an empty object names a data id with no chunks).
    pub size: u64,
    /// From an upload's part record, not from a version's manifest.
    pub in_part: bool,
    /// A manifest that places the data in an erasure-coded or remote pool's stripes, not in
    /// replicated chunks (a part record does not say; its upload's record does).
    pub pooled: bool,
}

/// Why a walk stopped.
#[derive(Debug, thiserror::Error)]
pub enum WalkError {
    #[error(transparent)]
    Store(#[from] KvError),
    /// A record that does not decode: it may reference anything.
    #[error(transparent)]
    Undecodable(#[from] RecordError),
}

impl From<WalkError> for crate::GatewayError {
    fn from(e: WalkError) -> Self {
        match e {
            WalkError::Store(e) => e.into(),
            WalkError::Undecodable(e) => e.into(),
        }
    }
}

impl Core {
    /// Hands `visit` every reference of every part record, then of the current versions, the
    /// kept versions and the current versions again: a version moves by being written at its
    /// new place before it leaves the old one, and a completion writes its manifest before it
    /// deletes its parts, so a reference that moves while the walk goes on is met at least once.
    pub async fn walk_references(&self, mut visit: impl FnMut(Reference)) -> Result<(), WalkError> {
        let mut parts = Pages::new(layout::all_parts(), PAGE);
        while let Some(keys) = parts.next(&self.kv).await? {
            for k in keys {
                if let Some(stored) = self.kv.get(&k).await? {
                    let s = records::decode::<PartRecord>("part", &stored.value)?.segment;
                    visit(Reference { data: s.data, size: s.size, in_part: true, pooled: false });
                }
            }
        }
        let [current, kept] = layout::manifests();
        for range in [current.clone(), kept, current] {
            let mut manifests = Pages::new(range, PAGE);
            while let Some(keys) = manifests.next(&self.kv).await? {
                for k in keys {
                    let Some(stored) = self.kv.get(&k).await? else { continue };
                    let m = records::decode_manifest(&stored.value)?;
                    let pooled = m.class.pool.is_some();
                    for s in &m.segments {
                        visit(Reference { data: s.data, size: s.size, in_part: false, pooled });
                    }
                }
            }
        }
        Ok(())
    }
}
