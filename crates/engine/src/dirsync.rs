//! Directory entries made durable. On Linux a file's fsync covers its contents, not the entry
//! that names it: after creating, renaming or removing a file or directory that a promise rests
//! on, the directory holding that entry must be fsynced too, or a power cut can take the entry
//! back (docs/design/storage.md, "Durability contract").

use std::path::Path;

/// Fsyncs the directory `dir`: the entries created, renamed or removed in it are durable.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Fsyncs the directory that holds `path`'s entry.
pub fn sync_parent(path: &Path) -> std::io::Result<()> {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => sync_dir(parent),
        _ => sync_dir(Path::new(".")),
    }
}

/// Replaces `path` with `bytes` in one step: a temporary file beside it (created with `mode`,
/// less the umask) is written and fsynced, then renamed over `path`. A crash leaves the old
/// contents or the new. The rename is durable once the caller syncs the directory.
pub fn write_atomically(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(mode).open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Creates `dir` and any missing parents, each one's entry durable before this returns.
pub fn create_dir_all(dir: &Path) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_dir_all(parent)?;
    }
    match std::fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => return Ok(()),
        Err(e) => return Err(e),
    }
    sync_dir(dir)?;
    sync_parent(dir)
}

#[cfg(test)]
mod tests {
    #[test]
    fn creates_nested_directories_and_accepts_existing_ones() {
        let base = std::env::temp_dir().join(format!("spindle-dirsync-{}", std::process::id()));
        let nested = base.join("a").join("b");
        super::create_dir_all(&nested).unwrap();
        assert!(nested.is_dir());
        super::create_dir_all(&nested).unwrap();
        super::sync_parent(&nested).unwrap();
        std::fs::remove_dir_all(base).unwrap();
    }
}
