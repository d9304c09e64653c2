//! The drive's identity and persistent settings (cluster version, ACL, PINs) in one small file.
//!
//! The file is a checksummed envelope around a protobuf (`MAGIC`, length, CRC-32C, payload),
//! replaced atomically: written to a temporary file, fsynced, renamed over the old one, and the
//! directory fsynced before the change is acknowledged. A crash or a power cut at any point
//! leaves the old settings or the new, never a mix.
//!
//! What is *not* there is never mistaken for factory settings: a damaged file, or a missing one
//! beside a store that holds data, stops the drive from starting (factory settings would let
//! identity 1 with the published default key read everything). Starting anyway is the
//! operator's explicit choice (`reset_settings`). The identity (serial number, world-wide name)
//! is created once, before the engine first creates its files, and an erase keeps it.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use prost::Message as _;
use spindle_engine::dirsync::sync_dir;
use spindle_proto::spindle::DriveState as Stored;

/// The settings file in the data directory.
pub const STATE_FILE: &str = "drive-state.pb";
/// Where releases before the checksummed settings kept the serial number: adopted once, then
/// removed, so an upgraded drive keeps its identity.
pub const LEGACY_SERIAL_FILE: &str = "serial-number";
/// First bytes of a checksummed settings file (version 1 of the envelope).
pub const MAGIC: &[u8; 8] = b"SPNDST01";
/// Magic, payload length (u32 LE), CRC-32C of the payload (u32 LE).
const HEADER_LEN: usize = 16;
/// Settings hold at most a few hundred identities; anything larger is damage, not settings.
pub const MAX_PAYLOAD_LEN: usize = 16 * 1024 * 1024;

/// Why the settings could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error(
        "{path} is damaged ({reason}); the drive does not start with factory settings in its place \
         (they would open it to the default identity). Restore the file, or start once with \
         --reset-settings to accept factory settings"
    )]
    Damaged { path: PathBuf, reason: String },
    #[error(
        "{path} is missing but the data directory holds a store ({store}): the drive's identity and \
         security settings are lost. Restore the file, or start once with --reset-settings to \
         accept factory settings and a new identity"
    )]
    Missing { path: PathBuf, store: PathBuf },
    #[error("drive settings: {0}")]
    Io(#[from] std::io::Error),
}

/// The drive's identity as clients see it in GETLOG CONFIGURATION.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub serial_number: Bytes,
    pub world_wide_name: Bytes,
}

impl Identity {
    /// A new random identity: 16 hex digits, and a world-wide name in Seagate's NAA-5 form.
    pub fn generate() -> Identity {
        let serial: String = (0..16).map(|_| format!("{:X}", rand::random::<u8>() % 16)).collect();
        Identity::from_serial(serial)
    }

    fn from_serial(serial: String) -> Identity {
        let wwn = format!("5000c50{}", serial.chars().take(9).collect::<String>());
        Identity { serial_number: Bytes::from(serial), world_wide_name: Bytes::from(wwn) }
    }

    fn of(stored: &Stored) -> Option<Identity> {
        match (&stored.serial_number, &stored.world_wide_name) {
            (Some(s), Some(w)) if !s.is_empty() && !w.is_empty() => {
                Some(Identity { serial_number: Bytes::from(s.clone()), world_wide_name: Bytes::from(w.clone()) })
            }
            _ => None,
        }
    }

    /// Writes the identity into `stored`.
    pub fn stamp(&self, stored: &mut Stored) {
        stored.serial_number = Some(String::from_utf8_lossy(&self.serial_number).into_owned());
        stored.world_wide_name = Some(String::from_utf8_lossy(&self.world_wide_name).into_owned());
    }
}

fn path(dir: &Path) -> PathBuf {
    dir.join(STATE_FILE)
}

/// The file's bytes for `state`.
pub fn encode(state: &Stored) -> Vec<u8> {
    let payload = state.encode_to_vec();
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc_fast::crc32_iscsi(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

/// Decodes a settings file. Files from releases before the envelope (a bare protobuf) are
/// taken when they decode and are not empty; the caller rewrites them in the new form.
pub fn decode(bytes: &[u8]) -> Result<Stored, String> {
    if bytes.is_empty() {
        return Err("the file is empty".into());
    }
    let Some(rest) = bytes.strip_prefix(&MAGIC[..]) else {
        if bytes.starts_with(&MAGIC[..6]) {
            return Err("unknown envelope version".into());
        }
        // Older files are what prost wrote: canonical, so they re-encode to the same bytes.
        return match Stored::decode(bytes) {
            Ok(stored) if stored.encode_to_vec() == bytes => Ok(stored),
            Ok(_) => Err("neither a checksummed nor an older settings file".into()),
            Err(e) => Err(format!("neither a checksummed nor an older settings file: {e}")),
        };
    };
    if rest.len() < HEADER_LEN - MAGIC.len() {
        return Err(format!("truncated header: {} bytes", bytes.len()));
    }
    let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
    let crc = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
    let payload = &rest[8..];
    if len > MAX_PAYLOAD_LEN {
        return Err(format!("implausible length {len}"));
    }
    if payload.len() != len {
        return Err(format!("length {} where the header says {len} (truncated or extended)", payload.len()));
    }
    if crc_fast::crc32_iscsi(payload) != crc {
        return Err("checksum mismatch".into());
    }
    Stored::decode(payload).map_err(|e| format!("checksum matches but the contents do not decode: {e}"))
}

/// The stored settings and whether they were in the checksummed envelope.
fn load_checked(dir: &Path) -> Result<Option<(Stored, bool)>, SettingsError> {
    match std::fs::read(path(dir)) {
        Ok(bytes) => match decode(&bytes) {
            Ok(stored) => Ok(Some((stored, bytes.starts_with(MAGIC)))),
            Err(reason) => Err(SettingsError::Damaged { path: path(dir), reason }),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Replaces the settings durably: the new file and its directory entry are on disk on return.
pub fn store(dir: &Path, state: &Stored) -> std::io::Result<()> {
    spindle_engine::dirsync::write_atomically(&path(dir), &encode(state), 0o666)?;
    sync_dir(dir)
}

/// Factory settings for a drive with `identity`: what a new drive and an erased one have.
pub fn factory(identity: &Identity) -> Stored {
    let mut stored = Stored::default();
    identity.stamp(&mut stored);
    stored
}

/// Opens the settings at start-up, creating them (with a new identity) on a new drive.
///
/// `store_dir` is where the engine keeps its files: if it exists, the drive has been started
/// before, so settings or an identity that cannot be found are lost, not new. Call this before
/// the engine first creates that directory. With `reset`, missing or damaged settings are
/// replaced by factory settings (keeping whatever identity can still be read) instead of
/// stopping the start. The returned note says what was adopted or replaced, for the log.
pub fn open(dir: &Path, store_dir: &Path, reset: bool) -> Result<(Stored, Identity, Option<String>), SettingsError> {
    let has_store = store_dir.try_exists()?;
    let legacy = legacy_serial(dir)?;
    let mut notes = Vec::new();
    let damaged = |reason: String| SettingsError::Damaged { path: path(dir), reason };
    let loaded = match load_checked(dir) {
        Ok(loaded) => loaded,
        Err(SettingsError::Damaged { path, reason }) if reset => {
            notes.push(format!("{} was damaged ({reason}): started with factory settings", path.display()));
            None
        }
        Err(e) => return Err(e),
    };
    let (mut stored, mut rewrite) = match loaded {
        // Settings that say an ACL was set but hold none would open the drive to the factory
        // identity: damage, whatever the checksum says.
        Some((stored, _)) if stored.acl_configured == Some(true) && stored.acl.is_empty() => {
            if !reset {
                return Err(damaged("it says an ACL was set but holds none".into()));
            }
            notes.push("the settings held an empty ACL: started with factory settings".into());
            (keep_identity(&stored), true)
        }
        Some((stored, checksummed)) => (stored, !checksummed),
        None if has_store && legacy.is_some() => {
            // A drive of an older release whose settings were never changed had no settings
            // file, only its serial number.
            notes.push("adopted the serial number of an older release; no settings had been stored".into());
            (Stored::default(), true)
        }
        None if has_store && !reset && notes.is_empty() => {
            return Err(SettingsError::Missing { path: path(dir), store: store_dir.into() })
        }
        None if has_store && notes.is_empty() => {
            notes.push("the settings were missing: started with factory settings".into());
            (Stored::default(), true)
        }
        None => (Stored::default(), true),
    };
    let identity = match (Identity::of(&stored), stored.serial_number.clone().filter(|s| !s.is_empty()), legacy.clone()) {
        (Some(identity), _, _) => identity,
        // The world-wide name is derived from the serial number: rebuild it as it was made.
        (None, Some(serial), _) | (None, None, Some(serial)) => Identity::from_serial(serial),
        (None, None, None) if !has_store => Identity::generate(),
        (None, None, None) if reset => {
            notes.push("the drive's identity was lost: it has a new serial number and world-wide name".into());
            Identity::generate()
        }
        (None, None, None) => return Err(damaged("it holds no identity, and no serial-number file of an older release is there".into())),
    };
    if Identity::of(&stored).as_ref() != Some(&identity) {
        identity.stamp(&mut stored);
        rewrite = true;
    }
    if rewrite {
        store(dir, &stored)?;
    }
    if legacy.is_some() {
        // Its serial number now lives in the settings (stored, durably).
        std::fs::remove_file(dir.join(LEGACY_SERIAL_FILE))?;
        sync_dir(dir)?;
    }
    Ok((stored, identity, (!notes.is_empty()).then(|| notes.join("; "))))
}

/// Factory settings, but with the identity `stored` holds, if any.
fn keep_identity(stored: &Stored) -> Stored {
    Stored { serial_number: stored.serial_number.clone(), world_wide_name: stored.world_wide_name.clone(), ..Stored::default() }
}

/// The serial number a release before the settings' identity kept in its own file, read as
/// that release read it (any non-empty text, trimmed).
fn legacy_serial(dir: &Path) -> Result<Option<String>, SettingsError> {
    match std::fs::read(dir.join(LEGACY_SERIAL_FILE)) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(s) if s.trim().is_empty() => Ok(None),
            Ok(s) => Ok(Some(s.trim().to_string())),
            Err(_) => Err(SettingsError::Damaged { path: dir.join(LEGACY_SERIAL_FILE), reason: "not UTF-8 text".into() }),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn load(dir: &Path) -> Result<Option<Stored>, SettingsError> {
        Ok(load_checked(dir)?.map(|(stored, _)| stored))
    }

    /// A temporary directory, removed when dropped (`.0` is its path, as the tests read it).
    struct Dir(PathBuf, #[allow(dead_code, reason = "kept only to remove the directory when dropped")] tempfile::TempDir);

    fn dir() -> Dir {
        let t = tempfile::tempdir().unwrap();
        Dir(t.path().to_path_buf(), t)
    }

    fn sample() -> Stored {
        let mut s = Stored { cluster_version: Some(7), lock_pin: Some(Bytes::from_static(b"1234")), ..Stored::default() };
        Identity::from_serial("ABCDEF0123456789".into()).stamp(&mut s);
        s
    }

    #[test]
    fn round_trips_and_a_new_drive_gets_an_identity_once() {
        let d = dir();
        let store_dir = d.0.join("engine");
        assert!(load(&d.0).unwrap().is_none());
        let (stored, first, note) = open(&d.0, &store_dir, false).unwrap();
        assert!(note.is_none());
        assert_eq!(stored, factory(&first));
        assert_eq!(first.serial_number.len(), 16);
        assert!(first.world_wide_name.starts_with(b"5000c50"));
        std::fs::create_dir(&store_dir).unwrap();
        let (_, again, _) = open(&d.0, &store_dir, false).unwrap();
        assert_eq!(again, first, "the identity is created once");
        store(&d.0, &sample()).unwrap();
        assert_eq!(load(&d.0).unwrap(), Some(sample()));
    }

    #[test]
    fn damage_is_refused_unless_reset_is_asked_for() {
        let d = dir();
        let store_dir = d.0.join("engine");
        std::fs::create_dir(&store_dir).unwrap();
        store(&d.0, &sample()).unwrap();
        let good = std::fs::read(path(&d.0)).unwrap();
        let mut flipped = good.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 0x01;
        for (what, bytes) in [("empty", vec![]), ("truncated", good[..good.len() - 3].to_vec()), ("flipped bit", flipped)] {
            std::fs::write(path(&d.0), &bytes).unwrap();
            assert!(matches!(open(&d.0, &store_dir, false), Err(SettingsError::Damaged { .. })), "{what}");
        }
        let (stored, identity, note) = open(&d.0, &store_dir, true).unwrap();
        assert!(note.unwrap().contains("damaged"));
        assert_eq!(stored, factory(&identity));
        assert_eq!(load(&d.0).unwrap(), Some(stored), "the reset is written");
    }

    #[test]
    fn missing_settings_beside_a_store_are_refused() {
        let d = dir();
        let store_dir = d.0.join("engine");
        std::fs::create_dir(&store_dir).unwrap();
        assert!(matches!(open(&d.0, &store_dir, false), Err(SettingsError::Missing { .. })));
        let (_, _, note) = open(&d.0, &store_dir, true).unwrap();
        assert!(note.unwrap().contains("identity was lost"));
    }

    #[test]
    fn an_older_drive_keeps_its_serial_number_and_settings() {
        let d = dir();
        let store_dir = d.0.join("engine");
        std::fs::create_dir(&store_dir).unwrap();
        std::fs::write(d.0.join(LEGACY_SERIAL_FILE), "0123456789ABCDEF").unwrap();
        let old = Stored { cluster_version: Some(3), ..Stored::default() };
        std::fs::write(path(&d.0), old.encode_to_vec()).unwrap();
        let (stored, identity, note) = open(&d.0, &store_dir, false).unwrap();
        assert!(note.is_none());
        assert_eq!(&identity.serial_number[..], b"0123456789ABCDEF");
        assert_eq!(stored.cluster_version, Some(3));
        assert!(!d.0.join(LEGACY_SERIAL_FILE).exists());
        assert!(std::fs::read(path(&d.0)).unwrap().starts_with(MAGIC), "rewritten checksummed");
        assert_eq!(open(&d.0, &store_dir, false).unwrap().1, identity);
        // A drive that never changed its settings had only the serial number file.
        let d = dir();
        std::fs::create_dir(d.0.join("engine")).unwrap();
        std::fs::write(d.0.join(LEGACY_SERIAL_FILE), "FEDCBA9876543210\n").unwrap();
        assert_eq!(&open(&d.0, &d.0.join("engine"), false).unwrap().1.serial_number[..], b"FEDCBA9876543210");
    }

    #[test]
    fn settings_that_would_open_the_drive_or_lose_its_identity_are_refused() {
        let d = dir();
        let store_dir = d.0.join("engine");
        std::fs::create_dir(&store_dir).unwrap();
        // An ACL said to be set, but empty: the factory identity would be in force.
        let mut hollow = sample();
        hollow.acl_configured = Some(true);
        store(&d.0, &hollow).unwrap();
        assert!(matches!(open(&d.0, &store_dir, false), Err(SettingsError::Damaged { .. })));
        let (stored, identity, _) = open(&d.0, &store_dir, true).unwrap();
        assert_eq!(&identity.serial_number[..], b"ABCDEF0123456789", "a reset keeps a readable identity");
        assert_eq!(stored, factory(&identity));
        // No identity in the file and no older serial-number file beside a store.
        store(&d.0, &Stored { cluster_version: Some(2), ..Stored::default() }).unwrap();
        assert!(matches!(open(&d.0, &store_dir, false), Err(SettingsError::Damaged { .. })));
        // A serial number without its world-wide name: the name is rebuilt, not a new identity.
        let mut half = sample();
        half.world_wide_name = None;
        store(&d.0, &half).unwrap();
        let (_, identity, _) = open(&d.0, &store_dir, false).unwrap();
        assert_eq!(identity, Identity::from_serial("ABCDEF0123456789".into()));
        // An older release took any text as a serial number; so does the adoption.
        let d = dir();
        std::fs::create_dir(d.0.join("engine")).unwrap();
        std::fs::write(d.0.join(LEGACY_SERIAL_FILE), "rack-7/slot-3 é\n").unwrap();
        let (_, identity, note) = open(&d.0, &d.0.join("engine"), false).unwrap();
        assert_eq!(&identity.serial_number[..], "rack-7/slot-3 é".as_bytes());
        assert!(note.unwrap().contains("older release"));
    }

    proptest! {
        #[test]
        fn decode_never_panics_and_any_corruption_of_a_file_is_caught(
            noise in proptest::collection::vec(any::<u8>(), 0..200),
            at in any::<prop::sample::Index>(),
            bit in 0u8..8,
        ) {
            let _ = decode(&noise);
            let good = encode(&sample());
            let mut bad = good.clone();
            let i = at.index(bad.len());
            bad[i] ^= 1 << bit;
            prop_assert!(decode(&bad).is_err(), "a flipped bit at {} was accepted", i);
            prop_assert_eq!(decode(&good).unwrap(), sample());
        }
    }
}
