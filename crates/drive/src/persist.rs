//! The drive's persistent settings (cluster version, ACL, PINs) in one small protobuf file,
//! replaced atomically: written to a temporary file, fsynced, renamed over the old one, and the
//! directory fsynced. A crash at any point leaves the old settings or the new, never a mix.

use std::io::Write;
use std::path::{Path, PathBuf};

use prost::Message as _;
use spindle_proto::spindle::DriveState as Stored;

/// The settings file in the data directory.
pub const STATE_FILE: &str = "drive-state.pb";

fn path(dir: &Path) -> PathBuf {
    dir.join(STATE_FILE)
}

/// The stored settings, or the factory defaults when there are none yet.
pub fn load(dir: &Path) -> std::io::Result<Stored> {
    match std::fs::read(path(dir)) {
        Ok(bytes) => Stored::decode(&bytes[..]).map_err(|e| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {e}", path(dir).display()))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Stored::default()),
        Err(e) => Err(e),
    }
}

pub fn store(dir: &Path, state: &Stored) -> std::io::Result<()> {
    let target = path(dir);
    let tmp = target.with_extension("pb.tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&state.encode_to_vec())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, &target)?;
    std::fs::File::open(dir)?.sync_all()
}

/// Removes the settings (an erase returns the drive to factory settings).
pub fn clear(dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path(dir)) {
        Ok(()) => std::fs::File::open(dir)?.sync_all(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_defaults() {
        let dir = std::env::temp_dir().join(format!("spindle-persist-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(load(&dir).unwrap(), Stored::default());
        let s = Stored { cluster_version: Some(7), lock_pin: Some(bytes::Bytes::from_static(b"1234")), ..Stored::default() };
        store(&dir, &s).unwrap();
        assert_eq!(load(&dir).unwrap(), s);
        clear(&dir).unwrap();
        assert_eq!(load(&dir).unwrap(), Stored::default());
        std::fs::write(path(&dir), b"\xff\xff\xff").unwrap();
        assert!(load(&dir).is_err(), "a damaged file is an error, not factory settings");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
