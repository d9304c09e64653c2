//! What device mode may write to. A regular file is the user's test file. A block device is
//! overwritten from end to end, so it must be named with an explicit confirmation and must not
//! be in use: not mounted (itself or any partition), not swap, not held by device-mapper or
//! md. The checks read /proc and /sys only.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use super::ActError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TargetKind {
    File,
    BlockDevice,
}

/// Checks that `path` may be overwritten; `confirmed` is the user's `--yes-destroy-data`.
pub fn check_target(path: &Path, confirmed: bool) -> Result<TargetKind, ActError> {
    let meta = std::fs::metadata(path).map_err(|e| ActError::Io(format!("{}: {e}", path.display())))?;
    let kind = meta.file_type();
    if kind.is_file() {
        return Ok(TargetKind::File);
    }
    if !kind.is_block_device() {
        return Err(ActError::Refused(format!("{}: not a regular file or a block device", path.display())));
    }
    if !confirmed {
        return Err(ActError::Refused(format!(
            "{} is a block device: the test overwrites all of it; pass --yes-destroy-data to confirm",
            path.display()
        )));
    }
    if let Some(why) = device_in_use(meta.rdev()) {
        return Err(ActError::Refused(format!("{}: {why}; refusing to write to it", path.display())));
    }
    Ok(TargetKind::BlockDevice)
}

fn dev_name(rdev: u64) -> String {
    format!("{}:{}", libc::major(rdev), libc::minor(rdev))
}

/// Why the block device `rdev` (or one of its partitions) is in use, if it is.
pub fn device_in_use(rdev: u64) -> Option<String> {
    let name = dev_name(rdev);
    let sys = Path::new("/sys/dev/block").join(&name);
    // The device and its partitions, as "major:minor".
    let mut devices = vec![name];
    if let Ok(entries) = std::fs::read_dir(&sys) {
        for e in entries.flatten() {
            if e.path().join("partition").exists() {
                if let Ok(dev) = std::fs::read_to_string(e.path().join("dev")) {
                    devices.push(dev.trim().to_string());
                }
            }
        }
    }
    for dev in &devices {
        let holders = Path::new("/sys/dev/block").join(dev).join("holders");
        if std::fs::read_dir(&holders).map(|mut d| d.next().is_some()).unwrap_or(false) {
            return Some(format!("device {dev} is held by another device (device-mapper, md or LVM)"));
        }
    }
    // mountinfo's third field is the mounted filesystem's device number.
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    for line in mountinfo.lines() {
        let mut fields = line.split_whitespace();
        let (Some(dev), Some(point)) = (fields.nth(2), fields.nth(1)) else { continue };
        if devices.iter().any(|d| d == dev) {
            return Some(format!("device {dev} is mounted on {point}"));
        }
    }
    let swaps = std::fs::read_to_string("/proc/swaps").unwrap_or_default();
    for line in swaps.lines().skip(1) {
        let Some(path) = line.split_whitespace().next() else { continue };
        if let Ok(m) = std::fs::metadata(path) {
            if m.file_type().is_block_device() && devices.contains(&dev_name(m.rdev())) {
                return Some(format!("{path} is in use as swap"));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_under_the_root_filesystem_counts_as_in_use() {
        // The root filesystem is mounted from some device: whatever it is, its number must be
        // found in mountinfo. (Only reads /proc; nothing is opened for writing.)
        let dev = std::fs::metadata("/").unwrap().dev();
        let why = device_in_use(dev);
        assert!(why.as_deref().is_some_and(|w| w.contains("is mounted on")), "{why:?}");
    }

    #[test]
    fn regular_files_pass_and_other_kinds_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        assert_eq!(check_target(&file, false).unwrap(), TargetKind::File);
        assert!(matches!(check_target(dir.path(), true), Err(ActError::Refused(_))));
        assert!(matches!(check_target(&dir.path().join("missing"), true), Err(ActError::Io(_))));
    }

    #[test]
    fn a_block_device_needs_confirmation() {
        // Any block device the test machine has; without confirmation nothing else is checked.
        let Some(dev) = ["/dev/vda", "/dev/sda", "/dev/nvme0n1", "/dev/loop0"].into_iter().map(Path::new).find(|p| p.exists()) else {
            eprintln!("no block device to look at: skipped");
            return;
        };
        let err = check_target(dev, false).unwrap_err();
        assert!(err.to_string().contains("--yes-destroy-data"), "{err}");
    }
}
