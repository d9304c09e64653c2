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
        match &e {
            fjall::Error::Io(io) if io.raw_os_error() == Some(libc_enospc()) => Error::NoSpace,
            fjall::Error::Io(io) | fjall::Error::Storage(fjall::LsmError::Io(io))
                if io.kind() == std::io::ErrorKind::WouldBlock =>
            {
                Error::WouldBlock
            }
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
