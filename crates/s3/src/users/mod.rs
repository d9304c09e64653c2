//! S3 users: each a name, a canonical id and access keys of its own, kept in the store
//! (`layout::user`) with every secret key sealed by the users key (`seal`). The operator
//! manages them with `spindle s3 user` (these functions, over the store); gateways look keys
//! up through a `Directory` that re-reads the records within `REFRESH`.
//! The gateway's own keys (`--access-key`, `--keys-file`) are its administrators: they may do
//! everything, and no user record can stand for them.

mod directory;
mod seal;

use std::time::Duration;

use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};

use crate::kv::{Cond, Durability, Kv, KvError, Pages};
use crate::layout;
use crate::records::{self, RecordError};

pub use directory::{Directory, UserId, REFRESH};
pub use seal::UsersKey;

/// IAM's rule for user names: up to 64 of letters, digits and `+=,.@_-`.
pub const MAX_USER_NAME: usize = 64;
/// Characters of a generated access key, and of its secret.
const ACCESS_KEY_CHARS: usize = 20;
const SECRET_KEY_CHARS: usize = 40;
/// How long a rotated key keeps working beside its successor, unless told otherwise.
pub const ROTATION_OVERLAP: Duration = Duration::from_secs(24 * 3600);
/// Keys a user holds at most: a rotation beyond it retires the oldest at once, so that
/// rotations within one overlap cannot pile keys up.
pub const MAX_KEYS_PER_USER: usize = 4;

#[derive(Debug, thiserror::Error)]
pub enum UserError {
    #[error("a user named {0} already exists")]
    Exists(String),
    #[error("no user named {0}")]
    NoSuchUser(String),
    #[error("user {name} owns buckets ({}): delete them or give them to another owner first", buckets.join(", "))]
    OwnsBuckets { name: String, buckets: Vec<String> },
    #[error("{0:?} is not a user name: 1 to {MAX_USER_NAME} letters, digits and +=,.@_-")]
    BadName(String),
    #[error("users key file {0}")]
    KeyFile(String),
    #[error("users key: {0}")]
    Seal(&'static str),
    #[error("user {0} changed while it was being updated: try again")]
    Raced(String),
    #[error(transparent)]
    Store(#[from] KvError),
    #[error(transparent)]
    Record(#[from] RecordError),
}

/// A user as stored: no secret in the clear.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserRecord {
    pub name: String,
    /// The user's canonical id (64 hex digits), as ACL grants and owners name it: random, so a
    /// user made again under a removed user's name inherits none of its grants.
    pub id: String,
    pub created_ms: u64,
    pub keys: Vec<StoredKey>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredKey {
    pub access_key: String,
    /// The secret key sealed with the users key for this access key.
    pub sealed_secret: String,
    pub created_ms: u64,
    /// A rotated key works until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_ms: Option<u64>,
}

impl StoredKey {
    pub fn valid_at(&self, now_ms: u64) -> bool {
        self.expires_ms.is_none_or(|t| now_ms < t)
    }

    /// How long a rotated key still works (None: no end); zero once it has expired.
    pub fn left(&self) -> Option<Duration> {
        self.expires_ms.map(|t| Duration::from_millis(t.saturating_sub(records::now_ms())))
    }
}

impl UserRecord {
    /// The keys that still work.
    pub fn valid_keys(&self) -> impl Iterator<Item = &StoredKey> {
        let now = records::now_ms();
        self.keys.iter().filter(move |k| k.valid_at(now))
    }
}

/// A key pair just made: the only time its secret is shown.
#[derive(Debug, Clone)]
pub struct NewKey {
    pub user: String,
    pub access_key: String,
    pub secret_key: String,
}

pub fn check_name(name: &str) -> Result<(), UserError> {
    let ok = !name.is_empty() && name.len() <= MAX_USER_NAME && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"+=,.@_-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(UserError::BadName(name.to_owned()))
    }
}

fn random_text(alphabet: &[u8], n: usize) -> Result<String, UserError> {
    let mut bytes = vec![0u8; n];
    SystemRandom::new().fill(&mut bytes).map_err(|_| UserError::Seal("no randomness"))?;
    debug_assert!(256 % alphabet.len() == 0, "a byte modulo the alphabet's size is uniform only if it divides 256");
    Ok(bytes.iter().map(|b| alphabet[usize::from(*b) % alphabet.len()] as char).collect())
}

fn new_key(key: &UsersKey, user: &str) -> Result<(StoredKey, NewKey), UserError> {
    let access_key = format!("SPK{}", random_text(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", ACCESS_KEY_CHARS - 3)?);
    let secret_key = random_text(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", SECRET_KEY_CHARS)?;
    let stored = StoredKey { sealed_secret: key.seal(&access_key, &secret_key)?, access_key: access_key.clone(), created_ms: records::now_ms(), expires_ms: None };
    Ok((stored, NewKey { user: user.to_owned(), access_key, secret_key }))
}

/// Makes user `name` with one key pair.
pub async fn add(kv: &Kv, key: &UsersKey, name: &str) -> Result<NewKey, UserError> {
    check_name(name)?;
    let (stored, new) = new_key(key, name)?;
    let id = random_text(b"0123456789abcdef", 64)?;
    let record = UserRecord { name: name.to_owned(), id, created_ms: records::now_ms(), keys: vec![stored] };
    match kv.put(&layout::user(name), records::encode(&record), Cond::Absent, Durability::Through).await {
        Ok(_) => Ok(new),
        Err(KvError::Mismatch) => Err(UserError::Exists(name.to_owned())),
        Err(e) => Err(e.into()),
    }
}

/// Every user, by name.
pub async fn list(kv: &Kv) -> Result<Vec<UserRecord>, UserError> {
    let mut pages = Pages::new(layout::users(), crate::objects::PAGE);
    let mut users = Vec::new();
    while let Some(keys) = pages.next(kv).await? {
        for k in keys {
            if let Some(s) = kv.get(&k).await? {
                users.push(records::decode::<UserRecord>("user", &s.value)?);
            }
        }
    }
    Ok(users)
}

pub async fn get(kv: &Kv, name: &str) -> Result<(UserRecord, bytes::Bytes), UserError> {
    check_name(name)?;
    match kv.get(&layout::user(name)).await? {
        Some(s) => Ok((records::decode("user", &s.value)?, s.version)),
        None => Err(UserError::NoSuchUser(name.to_owned())),
    }
}

/// Removes user `name`, refused while it owns a bucket (its objects would have no owner).
pub async fn remove(kv: &Kv, name: &str) -> Result<(), UserError> {
    let (record, version) = get(kv, name).await?;
    let owned = buckets_owned_by(kv, &record.id).await?;
    if !owned.is_empty() {
        return Err(UserError::OwnsBuckets { name: name.to_owned(), buckets: owned });
    }
    match kv.delete(&layout::user(name), Cond::Version(version), Durability::Through).await {
        Ok(_) => Ok(()),
        Err(KvError::Mismatch) => Err(UserError::Raced(name.to_owned())),
        Err(e) => Err(e.into()),
    }
}

/// A new key pair for `name`; its keys so far keep working for `overlap` (rotation without
/// downtime: clients move to the new pair meanwhile), and keys already expired are dropped.
pub async fn rotate(kv: &Kv, key: &UsersKey, name: &str, overlap: Duration) -> Result<NewKey, UserError> {
    let (mut record, version) = get(kv, name).await?;
    let now = records::now_ms();
    let until = now.saturating_add(overlap.as_millis() as u64);
    record.keys.retain(|k| k.valid_at(now));
    for k in &mut record.keys {
        k.expires_ms = Some(k.expires_ms.map_or(until, |t| t.min(until)));
    }
    let (stored, new) = new_key(key, name)?;
    record.keys.push(stored);
    let excess = record.keys.len().saturating_sub(MAX_KEYS_PER_USER);
    record.keys.drain(..excess);
    match kv.put(&layout::user(name), records::encode(&record), Cond::Version(version), Durability::Through).await {
        Ok(_) => Ok(new),
        Err(KvError::Mismatch) => Err(UserError::Raced(name.to_owned())),
        Err(e) => Err(e.into()),
    }
}

/// The buckets whose owner is `id`.
pub async fn buckets_owned_by(kv: &Kv, id: &str) -> Result<Vec<String>, UserError> {
    let mut pages = Pages::new(layout::buckets(), crate::objects::PAGE);
    let mut owned = Vec::new();
    while let Some(keys) = pages.next(kv).await? {
        for k in &keys {
            let Some(name) = layout::bucket_name(k) else { continue };
            let Some(s) = kv.get(k).await? else { continue };
            let record: records::BucketRecord = records::decode("bucket", &s.value)?;
            if record.owner.as_deref() == Some(id) {
                owned.push(name.to_owned());
            }
        }
    }
    Ok(owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_names_follow_iam() {
        for good in ["alice", "a.b+c=d,e@f_g-h", &"x".repeat(MAX_USER_NAME)] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", "a b", "a/b", "ä", &"x".repeat(MAX_USER_NAME + 1)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_new_key_is_sealed_and_opens() {
        let (key, _) = UsersKey::generate().unwrap();
        let (stored, new) = new_key(&key, "alice").unwrap();
        assert_eq!(new.access_key.len(), ACCESS_KEY_CHARS);
        assert_eq!(new.secret_key.len(), SECRET_KEY_CHARS);
        assert!(!stored.sealed_secret.contains(&new.secret_key));
        assert_eq!(key.open(&new.access_key, &stored.sealed_secret).unwrap(), new.secret_key);
        assert!(stored.valid_at(u64::MAX));
        assert!(!StoredKey { expires_ms: Some(10), ..stored }.valid_at(10));
    }
}
