//! The gateway's view of the users: every valid access key with its user and opened secret,
//! read from the store at start, again every `REFRESH`, and again (at most every
//! `MISS_PAUSE`) when a request names a key it does not know, so that a user just added works
//! at once and a removed or expired key is refused within `REFRESH` on every gateway.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use s3s::auth::SecretKey;
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::{list, UserError, UsersKey};
use crate::objects::Core;
use crate::records;

/// A removed user's or an expired key's requests are refused within this.
pub const REFRESH: Duration = Duration::from_secs(5);
/// Unknown keys make the gateway read the users again at most this often: a flood of made-up
/// keys costs the store one read per pause, not one per request.
const MISS_PAUSE: Duration = Duration::from_millis(250);

/// Who a user is, as access decisions need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserId {
    pub name: String,
    pub id: String,
}

struct Known {
    user: Arc<UserId>,
    secret: SecretKey,
    expires_ms: Option<u64>,
}

pub struct Directory {
    core: Arc<Core>,
    key: UsersKey,
    view: RwLock<View>,
    /// Held by a reload: requests that miss at once share one read.
    reloading: Mutex<()>,
}

#[derive(Default)]
struct View {
    keys: HashMap<String, Known>,
    /// When the read these keys came from started.
    read_at: Option<Instant>,
}

impl Directory {
    pub fn new(core: Arc<Core>, key: UsersKey) -> Directory {
        Directory { core, key, view: RwLock::new(View::default()), reloading: Mutex::new(()) }
    }

    /// The user and secret of `access_key`, if it is a valid key of a user.
    pub async fn lookup(&self, access_key: &str) -> Result<Option<(Arc<UserId>, SecretKey)>, UserError> {
        let stale = self.view.read().read_at.is_none_or(|t| t.elapsed() >= REFRESH);
        if stale {
            self.reload(Duration::ZERO).await?;
        }
        if let Some(found) = self.known(access_key) {
            return Ok(Some(found));
        }
        self.reload(MISS_PAUSE).await?;
        Ok(self.known(access_key))
    }

    /// The user of a key already checked by a signature (no store read).
    pub fn user_of(&self, access_key: &str) -> Option<Arc<UserId>> {
        self.known(access_key).map(|(u, _)| u)
    }

    fn known(&self, access_key: &str) -> Option<(Arc<UserId>, SecretKey)> {
        let view = self.view.read();
        let k = view.keys.get(access_key)?;
        k.expires_ms.is_none_or(|t| records::now_ms() < t).then(|| (k.user.clone(), k.secret.clone()))
    }

    /// Reads every user again, at least `pause` after the last read (waiting out the rest of
    /// it: a key added just after a read is found, and misses at once share one read).
    async fn reload(&self, pause: Duration) -> Result<(), UserError> {
        let asked = Instant::now();
        let _reloading = self.reloading.lock().await;
        let last = self.view.read().read_at;
        if last.is_some_and(|t| t > asked) {
            // Read while this request waited for the lock: that read saw what it would.
            return Ok(());
        }
        if let Some(t) = last {
            tokio::time::sleep_until(t + pause).await;
        }
        let started = Instant::now();
        let now = records::now_ms();
        let mut keys = HashMap::new();
        for record in list(&self.core.kv).await? {
            let user = Arc::new(UserId { name: record.name.clone(), id: record.id.clone() });
            for k in record.keys.into_iter().filter(|k| k.valid_at(now)) {
                match self.key.open(&k.access_key, &k.sealed_secret) {
                    Ok(secret) => {
                        keys.insert(k.access_key, Known { user: user.clone(), secret: SecretKey::from(secret), expires_ms: k.expires_ms });
                    }
                    // A key sealed with another users key: that user cannot sign in here.
                    Err(e) => tracing::warn!(user = record.name, access_key = k.access_key, error = %e, "a user's key does not open"),
                }
            }
        }
        *self.view.write() = View { keys, read_at: Some(started) };
        Ok(())
    }
}
