/// Engine errors. The drive maps each to a Kinetic status.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    #[error("key not found")]
    NotFound,
    #[error("stored version does not match the expected version")]
    VersionMismatch,
    #[error("no space left on the device")]
    NoSpace,
    #[error("stored record is corrupt: {0}")]
    Corrupt(String),
    #[error("storage I/O error: {0}")]
    Io(String),
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
            | fjall::Error::InvalidTag(_) => Error::Corrupt(e.to_string()),
            fjall::Error::Poisoned => Error::Unavailable("a storage failure stopped writes; the store is reopened once the disk has room".into()),
            _ => Error::Io(e.to_string()),
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        if e.raw_os_error() == Some(libc_enospc()) {
            Error::NoSpace
        } else {
            Error::Io(e.to_string())
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
        assert!(matches!(Error::from(fjall::Error::Storage(mismatch)), Error::Corrupt(_)));
        assert!(matches!(Error::from(fjall::Error::Storage(fjall::LsmError::InvalidHeader("Block"))), Error::Corrupt(_)));
    }
}
