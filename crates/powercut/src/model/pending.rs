//! The operations a file has not synced, and what a cut keeps of them ([`CutMode`],
//! [`replay_pending`]).

use std::fmt;
use std::str::FromStr;

use rand::rngs::StdRng;
use rand::Rng;

use super::content::Content;

/// Granularity at which [`CutMode::Torn`] tears a write.
pub const SECTOR_SIZE: u64 = 512;

/// A change to a file's content issued since its last fsync.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PendingOp {
    /// `pwrite(data, offset)`.
    Write {
        /// Absolute file offset.
        offset: u64,
        /// The bytes written.
        data: Vec<u8>,
    },
    /// Truncate or extend: `ftruncate`, `O_TRUNC`, or `fallocate` (mode 0) beyond the end.
    SetLen {
        /// The new size.
        len: u64,
    },
}

impl PendingOp {
    /// Applies the operation to `content`.
    pub fn apply(&self, content: &mut Content) {
        match self {
            PendingOp::Write { offset, data } => content.write(*offset, data),
            PendingOp::SetLen { len } => content.set_len(*len),
        }
    }

    pub(super) fn data_len(&self) -> u64 {
        match self {
            PendingOp::Write { data, .. } => data.len() as u64,
            PendingOp::SetLen { .. } => 0,
        }
    }
}

/// What a power cut keeps of the operations not yet synced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CutMode {
    /// Nothing: all unsynced data is lost.
    Drop,
    /// An in-order prefix of each file's pending operations, the first one not kept whole torn
    /// at a 512-byte boundary (absolute offsets) if it is a write: interrupted write-back.
    Torn,
    /// Each pending operation kept with probability 1/2, applied in issue order: out-of-order
    /// write-back.
    Reorder,
}

impl fmt::Display for CutMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CutMode::Drop => "drop",
            CutMode::Torn => "torn",
            CutMode::Reorder => "reorder",
        })
    }
}

impl FromStr for CutMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "drop" => Ok(CutMode::Drop),
            "torn" => Ok(CutMode::Torn),
            "reorder" => Ok(CutMode::Reorder),
            other => Err(format!(
                "unknown cut mode {other:?} (drop, torn or reorder)"
            )),
        }
    }
}

/// What one file's replay kept and lost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayOutcome {
    /// Operations applied whole.
    pub ops_kept: usize,
    /// Operations lost (a torn write counts as lost).
    pub ops_discarded: usize,
    /// Written bytes not applied (including the lost part of a torn write).
    pub bytes_discarded: u64,
    /// Whether a write was torn.
    pub torn: bool,
}

/// The content a cut in `mode` leaves, given the durable content and the pending operations.
pub fn replay_pending(
    mode: CutMode,
    durable: &Content,
    pending: &[PendingOp],
    rng: &mut StdRng,
) -> (Content, ReplayOutcome) {
    let mut content = durable.clone();
    let mut out = ReplayOutcome::default();
    let total_bytes: u64 = pending.iter().map(PendingOp::data_len).sum();
    let mut kept_bytes = 0u64;
    match mode {
        CutMode::Drop => {}
        CutMode::Torn => {
            let k = rng.random_range(0..=pending.len());
            for op in &pending[..k] {
                op.apply(&mut content);
                kept_bytes += op.data_len();
            }
            out.ops_kept = k;
            if let Some(PendingOp::Write { offset, data }) = pending.get(k) {
                let end = offset + data.len() as u64;
                let first = (offset / SECTOR_SIZE + 1) * SECTOR_SIZE;
                let boundaries = if first < end {
                    (end - 1 - first) / SECTOR_SIZE + 1
                } else {
                    0
                };
                let pick = rng.random_range(0..=boundaries);
                if pick > 0 {
                    let keep = (first + (pick - 1) * SECTOR_SIZE - offset) as usize;
                    content.write(*offset, &data[..keep]);
                    kept_bytes += keep as u64;
                    out.torn = true;
                }
            }
        }
        CutMode::Reorder => {
            for op in pending {
                if rng.random_bool(0.5) {
                    op.apply(&mut content);
                    kept_bytes += op.data_len();
                    out.ops_kept += 1;
                }
            }
        }
    }
    out.ops_discarded = pending.len() - out.ops_kept;
    out.bytes_discarded = total_bytes - kept_bytes;
    (content, out)
}
