//! Files of the credentials directory: secrets written readable by their owner only, public
//! files replaced whole, and errors that name the file.

use std::path::Path;

use crate::{ClusterError, CredentialsError};

/// What became of reading or writing `path`.
pub(crate) fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> ClusterError + '_ {
    move |source| CredentialsError::Io { path: path.to_path_buf(), source }.into()
}

/// `path` holds something other than it should (`what` says what is wrong).
pub(crate) fn content(path: &Path, what: impl std::fmt::Display) -> ClusterError {
    CredentialsError::Content { path: path.to_path_buf(), message: what.to_string() }.into()
}

/// Writes `text` to `path` readable by its owner only (a secret), refusing to replace a file.
pub(crate) fn write_secret(path: &Path, text: &str) -> Result<(), ClusterError> {
    write_new_secret_file(path, text.as_bytes()).map_err(io_at(path))
}

/// Writes `bytes` to a new file at `path`, readable by its owner only and synced; an existing
/// file is an error (a secret is never replaced by accident).
pub fn write_new_secret_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut f = options.open(path)?;
    f.write_all(bytes).and_then(|()| f.sync_all())
}

/// Writes `text` to `path` whole or not at all (a temporary file renamed over it).
pub(crate) fn replace_file(path: &Path, text: &str) -> Result<(), ClusterError> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path)).map_err(io_at(path))
}
