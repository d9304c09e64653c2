use std::sync::Arc;

/// Engine errors. The drive maps each to a Kinetic status. Failures of the disk or of fjall
/// keep their source (shared, as one failure may answer a whole group of requests).
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    #[error("key not found")]
    NotFound,
    #[error("stored version does not match the expected version")]
    VersionMismatch,
    #[error("no space left on the device")]
    NoSpace,
    /// What was read back is not what was written (Kinetic's PERM_DATA_ERROR).
    #[error("stored record is corrupt: {detail}")]
    Corrupt {
        detail: String,
        #[source]
        source: Option<Arc<fjall::Error>>,
    },
    /// The operating system failed a file operation.
    #[error("storage I/O error: {0}")]
    Io(#[source] Arc<std::io::Error>),
    /// fjall failed for a reason of its own (not a full disk, not damage).
    #[error("storage engine error: {0}")]
    Storage(#[source] Arc<fjall::Error>),
    /// The store takes no more writes until the drive is restarted: a failure it cannot heal
    /// by itself (a failed sync, its writer panicking).
    #[error("the store is stopped: {0}")]
    Stopped(String),
    /// The engine broke one of its own rules (a request it should never have been given, its
    /// writer gone): a bug, never the disk or the client.
    #[error("engine fault: {0}")]
    Internal(&'static str),
    /// The request asks for something the engine cannot store (a key over
    /// [`crate::limits::KEY_SIZE_MAX`], say); nothing was done.
    #[error("invalid request: {0}")]
    Invalid(String),
    /// A read under [`crate::CachedReadsOnly`] needed the disk; nothing was read. Run it again
    /// without the guard, on a thread that may block.
    #[error("the read needs the disk")]
    WouldBlock,
    /// The store is not taking requests for a moment: it is being reopened after a storage
    /// failure. Nothing was done; retry.
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
    /// Operation `index` of a batch failed its check; nothing of the batch was applied.
    #[error("batch operation {index} failed: {cause}")]
    BatchFailed { index: usize, cause: Box<Error> },
}

impl Error {
    /// A storage failure stopped the database's writes; the writer reopens it once the disk
    /// has room (a failure a reopening cannot heal is answered `Stopped` by the writer).
    pub fn poisoned() -> Self {
        Error::Unavailable("a storage failure stopped writes; the store is reopened once the disk has room".into())
    }

    /// Corruption the engine found itself (a record that does not decode, a value missing).
    pub fn corrupt(detail: impl Into<String>) -> Self {
        Error::Corrupt { detail: detail.into(), source: None }
    }
}

/// Errors compare by kind and message: the sources they carry are not comparable.
impl PartialEq for Error {
    fn eq(&self, other: &Self) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other) && self.to_string() == other.to_string()
    }
}

pub type Result<T> = std::result::Result<T, Error>;

impl From<fjall::Error> for Error {
    fn from(e: fjall::Error) -> Self {
        use fjall::LsmError;
        match &e {
            // ENOSPC is a full disk wherever it surfaces: in the journal (`Io`) or in a flush or
            // compaction (`Storage(Io)`), which MEDIAOPTIMIZE runs.
            fjall::Error::Io(io) | fjall::Error::Storage(LsmError::Io(io)) if io.raw_os_error() == Some(libc_enospc()) => {
                Error::NoSpace
            }
            fjall::Error::Io(io) | fjall::Error::Storage(LsmError::Io(io)) if io.kind() == std::io::ErrorKind::WouldBlock => {
                Error::WouldBlock
            }
            // What was read back is not what was written: the data is damaged on the medium,
            // not the drive failing (Kinetic's PERM_DATA_ERROR, not INTERNAL_ERROR).
            fjall::Error::Storage(
                LsmError::ChecksumMismatch { .. }
                | LsmError::Decompress(_)
                | LsmError::InvalidTag(_)
                | LsmError::InvalidTrailer
                | LsmError::InvalidHeader(_)
                | LsmError::Utf8(_),
            )
            | fjall::Error::Decompress(_)
            | fjall::Error::InvalidTrailer
            | fjall::Error::InvalidTag(_) => Error::Corrupt { detail: e.to_string(), source: Some(Arc::new(e)) },
            fjall::Error::Poisoned => Error::poisoned(),
            _ => Error::Storage(Arc::new(e)),
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        if e.raw_os_error() == Some(libc_enospc()) {
            Error::NoSpace
        } else {
            Error::Io(Arc::new(e))
        }
    }
}

/// ENOSPC on every platform Spindle builds for (Linux, macOS, the BSDs).
const fn libc_enospc() -> i32 {
    28
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A compaction or flush that meets a full disk reports it through lsm-tree
    /// (`Storage(Io)`); it is a full disk all the same (hardening issue, item 15).
    #[test]
    fn enospc_from_a_compaction_is_no_space() {
        let enospc = || std::io::Error::from_raw_os_error(libc_enospc());
        assert_eq!(Error::from(fjall::Error::Storage(fjall::LsmError::Io(enospc()))), Error::NoSpace);
        assert_eq!(Error::from(fjall::Error::Io(enospc())), Error::NoSpace);
    }

    /// A block or blob that fails its checksum is damaged data (item 11).
    #[test]
    fn checksum_failures_are_corruption() {
        let mismatch = fjall::LsmError::ChecksumMismatch { got: lsm_tree::Checksum::from_raw(1), expected: lsm_tree::Checksum::from_raw(2) };
        let damaged = Error::from(fjall::Error::Storage(mismatch));
        assert!(matches!(damaged, Error::Corrupt { source: Some(_), .. }), "{damaged:?}");
        assert!(std::error::Error::source(&damaged).is_some(), "the fjall error is kept as the source");
        assert!(matches!(Error::from(fjall::Error::Storage(fjall::LsmError::InvalidHeader("Block"))), Error::Corrupt { .. }));
    }
}
