//! [`PowerCutFs`]: the mounted file system a test drives.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use fuser::{Config, MountOption, SessionACL};
use parking_lot::Mutex;

use crate::fuse::PowerCutFuse;
use crate::model::{CutMode, CutReport, Model, StatFs, Stats, ROOT_INO};

/// How to mount.
#[derive(Clone, Debug)]
pub struct MountOptions {
    /// Capacity that statfs reports (free = capacity - sum of file sizes). Default 16 GiB.
    pub size_bytes: u64,
    /// FUSE session threads. Default 1 (requests are served in the order they arrive).
    pub threads: usize,
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            size_bytes: 16 << 30,
            threads: 1,
        }
    }
}

/// A mounted power-cut file system. Dropping it unmounts (lazily and by aborting the FUSE
/// connection if something still holds the mount), so no dead mount is left behind, even when
/// a test panics.
pub struct PowerCutFs {
    mountpoint: PathBuf,
    model: Arc<Mutex<Model>>,
    options: MountOptions,
    session: Option<fuser::BackgroundSession>,
    /// `major:minor` of the current mount, to tell it from anything else mounted there.
    device: Option<String>,
}

impl std::fmt::Debug for PowerCutFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PowerCutFs")
            .field("mountpoint", &self.mountpoint)
            .field("device", &self.device)
            .field("mounted", &self.session.is_some())
            .finish()
    }
}

impl PowerCutFs {
    /// Mounts an empty file system on `mountpoint` (an existing directory), served by a
    /// background thread. The root takes the mountpoint's mode and owner.
    pub fn mount(mountpoint: &Path, options: MountOptions) -> io::Result<PowerCutFs> {
        let mountpoint = mountpoint.canonicalize()?;
        let meta = fs::metadata(&mountpoint)?;
        if !meta.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "mountpoint is not a directory",
            ));
        }
        let mut model = Model::new(options.size_bytes);
        model.chmod(ROOT_INO, (meta.mode() & 0o7777) as u16)?;
        model.chown(ROOT_INO, Some(meta.uid()), Some(meta.gid()))?;
        let mut fs = PowerCutFs {
            mountpoint,
            model: Arc::new(Mutex::new(model)),
            options,
            session: None,
            device: None,
        };
        fs.start_session()?;
        Ok(fs)
    }

    /// The (canonical) mount point.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// Simulates a power cut: unmounts (the caller guarantees nothing has files open on the
    /// mount, e.g. the program under test was SIGKILLed and reaped; if something does, the
    /// unmount is forced and the report says so), applies [`Model::cut`], and mounts a fresh
    /// session on the same model at the same place, so no kernel cache (pages, dentries,
    /// attributes) survives the cut.
    pub fn cut(&mut self, mode: CutMode, seed: u64) -> io::Result<CutReport> {
        let forced = self.stop_session()?;
        let mut report = self.model.lock().cut(mode, seed);
        report.forced_unmount = forced;
        self.start_session()?;
        Ok(report)
    }

    /// Counters and sizes of the model.
    pub fn stats(&self) -> Stats {
        self.model.lock().stats()
    }

    /// Capacity and free space, as statfs reports them.
    pub fn statfs(&self) -> StatFs {
        self.model.lock().statfs()
    }

    /// Runs `f` on the model (for inspection). Do not touch the mount from inside `f`: the FUSE
    /// session needs the same lock and the call would deadlock.
    pub fn with_model<R>(&self, f: impl FnOnce(&mut Model) -> R) -> R {
        f(&mut self.model.lock())
    }

    /// Unmounts now, reporting failure (dropping does the same, silently).
    pub fn unmount(mut self) -> io::Result<()> {
        self.stop_session().map(|_| ())
    }

    fn start_session(&mut self) -> io::Result<()> {
        let epoch = self.model.lock().epoch();
        let fs = PowerCutFuse::new(self.model.clone(), epoch);
        let mut config = Config::default();
        config.mount_options = vec![
            MountOption::FSName("powercut".into()),
            MountOption::Subtype("powercut".into()),
            MountOption::NoAtime,
        ];
        // allow_other: the program under test may run as another user.
        config.acl = SessionACL::All;
        config.n_threads = Some(self.options.threads.max(1));
        let session = fuser::spawn_mount(fs, &self.mountpoint, &config)?;
        self.session = Some(session);
        self.device = mount_device(&self.mountpoint)?;
        Ok(())
    }

    /// Unmounts the current session, if any. Returns whether the unmount had to be forced.
    fn stop_session(&mut self) -> io::Result<bool> {
        let Some(session) = self.session.take() else {
            return Ok(false);
        };
        let device = self.device.take();
        // umount(2) then join the session thread. It fails (EBUSY) if something still holds
        // the mount; the session thread is then left to end on its own.
        let clean = session.umount_and_join().is_ok();
        let still_mounted = is_mounted_device(&self.mountpoint, device.as_deref())?;
        if !still_mounted {
            return Ok(false);
        }
        // Forced: abort the connection (pending and future requests fail) and detach lazily.
        if let Some(minor) = device.as_deref().and_then(|d| d.split(':').nth(1)) {
            let _ = fs::write(format!("/sys/fs/fuse/connections/{minor}/abort"), "1");
        }
        let _ = Command::new("umount")
            .arg("-l")
            .arg(&self.mountpoint)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if is_mounted_device(&self.mountpoint, device.as_deref())? {
            return Err(io::Error::other(format!(
                "could not unmount {} (clean unmount: {clean})",
                self.mountpoint.display()
            )));
        }
        Ok(true)
    }
}

impl Drop for PowerCutFs {
    fn drop(&mut self) {
        if let Err(e) = self.stop_session() {
            eprintln!("powercut: {e}");
        }
    }
}

/// Undoes the octal escapes (`\040` for space...) of a /proc/self/mountinfo path.
fn unescape_mountinfo(field: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let v = bytes[i + 1..i + 4]
                .iter()
                .fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
            out.push(v as u8);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// `(major:minor, mount point)` of every mount in /proc/self/mountinfo.
fn mounts() -> io::Result<Vec<(String, PathBuf)>> {
    let info = fs::read_to_string("/proc/self/mountinfo")?;
    Ok(info
        .lines()
        .filter_map(|line| {
            let mut fields = line.split(' ');
            let device = fields.nth(2)?;
            let point = fields.nth(1)?;
            Some((device.to_owned(), unescape_mountinfo(point)))
        })
        .collect())
}

fn mount_device(mountpoint: &Path) -> io::Result<Option<String>> {
    Ok(mounts()?
        .into_iter()
        .rev()
        .find(|(_, p)| p == mountpoint)
        .map(|(d, _)| d))
}

fn is_mounted_device(mountpoint: &Path, device: Option<&str>) -> io::Result<bool> {
    Ok(mounts()?
        .iter()
        .any(|(d, p)| p == mountpoint && device.is_none_or(|dev| dev == d)))
}

/// Whether /proc/self/mountinfo lists anything mounted on `path` (canonicalised if it exists).
pub fn is_mounted(path: &Path) -> io::Result<bool> {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    is_mounted_device(&path, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_unescape() {
        assert_eq!(
            unescape_mountinfo("/tmp/a\\040b\\134c"),
            PathBuf::from("/tmp/a b\\c")
        );
        assert_eq!(unescape_mountinfo("/plain"), PathBuf::from("/plain"));
        assert_eq!(unescape_mountinfo("/end\\04"), PathBuf::from("/end\\04"));
    }
}
