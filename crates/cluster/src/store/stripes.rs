//! Stripes of erasure-coded pools: an object's stripes cut into shards, each shard one value
//! on one drive of the object's placement group (pool.rs, erasure.rs).
//!
//! Stripes are written once and never overwritten (a new object gets a new name), so a shard
//! needs no versions or quorums: a stripe is acknowledged once every one of its `data +
//! parity` shards is durable on its drive, so that any `parity` drives may then be lost. A
//! read asks `data` drives (data shards first, healthy drives first) and, for every shard
//! missing, damaged or unanswered, one more; with fewer than `data` good shards it fails,
//! naming what is missing, and never returns bytes it could not check.
//!
//! On a drive, shard `s` of stripe `i` of `object` in group `g` is the key
//! `g (4 bytes) | len(object) (2) | object | i (4) | s (1)`: one object's shards are one key
//! range, and no object's range holds another's.

use futures_util::future::join_all;
use spindle_client::{DeleteOptions, PutOptions, RangeQuery, Synchronization};

use super::*;
use crate::erasure::{Code, Stripe};
use crate::pool::Pool;
use crate::StripeError;

/// Bytes a shard's key adds to the object's name.
const STRIPE_KEY_EXTRA: usize = map::PARTITION_PREFIX_LEN + 2 + 4 + 1;
/// How long a drive that failed a shard's write or read is left out of new objects' groups,
/// unless it answers first: longer than the coordinator takes to mark a drive down.
const SHARD_MISS_FOR: Duration = Duration::from_secs(30);
/// How long a writer trusts its view of which drives are down.
const VIEW_FRESH_FOR: Duration = Duration::from_secs(2);
/// The longest object name a pool takes.
pub const MAX_OBJECT_NAME: usize = map::MAX_DRIVE_KEY - STRIPE_KEY_EXTRA;

/// Why one shard was not read.
enum Miss {
    Absent,
    Damaged(String),
    Unanswered(String),
}

impl Store {
    /// The largest stripe `pool` takes.
    pub fn stripe_capacity(&self, pool: &str) -> Result<usize, ClusterError> {
        Ok(self.map().pool(pool)?.code.max_stripe())
    }

    /// The first of up to `tries` names `draw` makes whose group in `pool` has every drive
    /// placed, none marked down or failing lately, if any: a writer choosing a name (a fresh data
    /// id) lands in a group whose drives all answer, so writes go on while a drive is down.
    pub fn ready_name<T: AsRef<[u8]>>(&self, pool: &str, tries: usize, mut draw: impl FnMut() -> T) -> Option<T> {
        self.keep_view_fresh();
        let map = self.map();
        let p = map.pool(pool).ok()?;
        let ready: Vec<bool> = {
            let down = self.inner.down.read();
            let suspects = self.inner.suspects.lock();
            let misses = self.inner.shard_misses.lock();
            let now = Instant::now();
            let fine = |d: &String| !down.contains(d) && suspects.get(d).is_none_or(|until| *until <= now) && misses.get(d).is_none_or(|until| *until <= now);
            (0..p.groups).map(|g| p.drives_of(g).len() == p.code.width() && p.drives_of(g).iter().all(fine)).collect()
        };
        if !ready.contains(&true) {
            return None;
        }
        (0..tries).map(|_| draw()).find(|name| ready[p.group_of(name.as_ref()) as usize])
    }

    /// Reads the map and the drives marked down again in the background when they are older
    /// than `VIEW_FRESH_FOR`: a writer choosing groups learns of a drive down (or back) from
    /// the coordinator within that, not only when the map changes.
    fn keep_view_fresh(&self) {
        use std::sync::atomic::Ordering;
        if self.inner.viewed.lock().elapsed() < VIEW_FRESH_FOR || self.inner.viewing.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.inner.viewing.store(false, Ordering::Release);
            return;
        };
        let store = self.clone();
        runtime.spawn(async move {
            if let Err(e) = store.refresh().await {
                tracing::debug!("refreshing the view: {e}");
                // Tried again after another VIEW_FRESH_FOR, not on every write meanwhile.
                *store.inner.viewed.lock() = Instant::now();
            }
            store.inner.viewing.store(false, Ordering::Release);
        });
    }

    /// Writes stripe `index` of `object` in `pool`: every shard durable on its drive.
    pub async fn put_stripe(&self, pool: &str, object: &[u8], index: u32, stripe: Bytes) -> Result<(), ClusterError> {
        Self::check_object(object)?;
        let name = pool;
        let code = self.map().pool(name)?.code;
        let shards = code.encode(&stripe).map_err(|source| StripeError::Code { pool: name.to_string(), source })?;
        let shards = &shards;
        self.with_map(|map| async move {
            let pool = map.pool(name).map_err(OpError::Failed)?;
            let (group, drives) = placed(name, pool, object).map_err(OpError::Failed)?;
            let writes = drives.iter().zip(shards).enumerate().map(|(s, (drive, shard))| {
                let key = shard_key(group, object, index, s as u8);
                let map = &map;
                async move {
                    let c = self.connection(map, drive, Lane::Writes).await.map_err(|e| OpError::from_client(drive, e))?;
                    let options = PutOptions { force: true, sync: Synchronization::Writethrough, ..PutOptions::default() };
                    c.put(&key, shard.clone(), options).await.map_err(|e| OpError::from_client(drive, e))
                }
            });
            let results = join_all(writes).await;
            let mut written = 0;
            let mut out_of_space = 0;
            let mut last_error = String::new();
            for (drive, r) in drives.iter().zip(results) {
                match r {
                    Ok(()) => {
                        written += 1;
                        self.answered(drive);
                    }
                    Err(OpError::StaleView) => return Err(OpError::StaleView),
                    Err(OpError::Failed(e)) => {
                        // A full drive answered: it is not one to ask last.
                        if e.is_full() {
                            out_of_space += 1;
                        } else {
                            self.missed(drive);
                        }
                        last_error = e.to_string();
                    }
                    Err(OpError::Changed | OpError::Undecided { .. }) => last_error = format!("{drive}: changed"),
                }
            }
            if written < drives.len() {
                let e = StripeError::Incomplete { pool: name.to_string(), stripe: index, written, width: drives.len(), out_of_space, last_error };
                return Err(OpError::Failed(e.into()));
            }
            Ok(())
        })
        .await
    }

    /// Reads stripe `index` of `object` in `pool`, `len` bytes long, rebuilding it from parity
    /// where shards are missing, damaged or their drives do not answer.
    pub async fn get_stripe(&self, pool: &str, object: &[u8], index: u32, len: usize) -> Result<Stripe, ClusterError> {
        Self::check_object(object)?;
        let name = pool;
        self.with_map(|map| async move {
            let pool = map.pool(name).map_err(OpError::Failed)?;
            let code = pool.code;
            let (group, drives) = placed(name, pool, object).map_err(OpError::Failed)?;
            let order = self.shard_order(code, drives);
            let mut next = order.iter().copied();
            let mut shards: Vec<Option<Bytes>> = vec![None; code.width()];
            let mut missing: Vec<String> = Vec::new();
            let mut good = 0;
            let need = usize::from(code.data);
            loop {
                let wave: Vec<usize> = next.by_ref().take(need - good).collect();
                if wave.is_empty() {
                    break;
                }
                // A shard whose position moves is read from the drive that held it until its
                // new drive has it.
                let holder = |s: usize| pool.pending.get(&group).and_then(|p| p.get(&(s as u8)));
                let reads = wave.iter().map(|&s| {
                    let map = &map;
                    let holder = holder(s);
                    async move {
                        match (self.read_shard(map, code, &drives[s], group, object, index, s, len).await, holder) {
                            (Err(Ok(Miss::Absent)), Some(old)) => self.read_shard(map, code, old, group, object, index, s, len).await,
                            (r, _) => r,
                        }
                    }
                });
                for (s, r) in wave.iter().zip(join_all(reads).await) {
                    match r {
                        Ok(payload) => {
                            shards[*s] = Some(payload);
                            good += 1;
                        }
                        Err(Ok(miss)) => missing.push(describe(*s, &drives[*s], miss)),
                        Err(Err(stale)) => return Err(stale),
                    }
                }
                if good == need {
                    break;
                }
            }
            if good < need {
                let e = StripeError::Lost { pool: name.to_string(), stripe: index, have: good, need, missing: missing.join("; ") };
                return Err(OpError::Failed(e.into()));
            }
            code.decode(len, &shards).map_err(|source| OpError::Failed(StripeError::Code { pool: name.to_string(), source }.into()))
        })
        .await
    }

    /// Deletes every shard of `object` in `pool` from the drives of its group; returns how many.
    pub async fn delete_stripes(&self, pool: &str, object: &[u8]) -> Result<u64, ClusterError> {
        Self::check_object(object)?;
        let name = pool;
        self.with_map(|map| async move {
            let pool = map.pool(name).map_err(OpError::Failed)?;
            let group = pool.group_of(object);
            // The group's drives, and those that held a position still being moved.
            let mut holders: Vec<&String> = pool.drives_of(group).iter().collect();
            for old in pool.pending.get(&group).into_iter().flat_map(|p| p.values()) {
                if !holders.contains(&old) && map.members.contains_key(old) {
                    holders.push(old);
                }
            }
            let deletes = holders.into_iter().map(|drive| self.delete_shards(&map, drive, group, object));
            let mut deleted = 0;
            for r in join_all(deletes).await {
                deleted += r?;
            }
            Ok(deleted)
        })
        .await
    }

    async fn delete_shards(&self, map: &Arc<ClusterMap>, drive: &str, group: u32, object: &[u8]) -> Result<u64, OpError> {
        let c = self.connection(map, drive, Lane::Writes).await.map_err(|e| OpError::from_client(drive, e))?;
        let (start, end) = object_range(group, object);
        let mut deleted = 0;
        loop {
            let query = RangeQuery { start: start.clone(), start_inclusive: true, end: Some(end.clone()), end_inclusive: true, max_returned: map::KEY_PAGE, reverse: false };
            let keys = c.get_key_range(query).await.map_err(|e| OpError::from_client(drive, e))?;
            if keys.is_empty() {
                return Ok(deleted);
            }
            let options = DeleteOptions { force: true, sync: Synchronization::Writethrough, ..DeleteOptions::default() };
            let gone = join_all(keys.iter().map(|k| c.delete(k, options.clone()))).await;
            for r in gone {
                r.map_err(|e| OpError::from_client(drive, e))?;
                deleted += 1;
            }
        }
    }

    /// One shard's verified payload; `Err(Ok(miss))` when it cannot serve, `Err(Err(_))` when
    /// the drive is at another view (the whole read starts again).
    #[allow(clippy::too_many_arguments, reason = "one shard's address")]
    async fn read_shard(&self, map: &Arc<ClusterMap>, code: Code, drive: &str, group: u32, object: &[u8], index: u32, shard: usize, len: usize) -> Result<Bytes, Result<Miss, OpError>> {
        let key = shard_key(group, object, index, shard as u8);
        let answer = match self.connection(map, drive, Lane::Reads).await {
            Ok(c) => c.get(&key).await,
            Err(e) => Err(e),
        };
        if answer.is_ok() {
            self.answered(drive);
        }
        match answer {
            Ok(Some(entry)) => code.verify(shard, len, &entry.value).map_err(|e| Ok(Miss::Damaged(e.to_string()))),
            Ok(None) => Err(Ok(Miss::Absent)),
            Err(e) => match OpError::from_client(drive, e) {
                OpError::StaleView => Err(Err(OpError::StaleView)),
                other => {
                    self.missed(drive);
                    Err(Ok(Miss::Unanswered(match other {
                        OpError::Failed(e) => e.to_string(),
                        _ => "no answer".into(),
                    })))
                }
            },
        }
    }

    /// A drive of a pool failed a shard's write or read: asked last, and left out of new
    /// objects' groups, for `SHARD_MISS_FOR`.
    fn missed(&self, drive: &str) {
        self.suspect(drive);
        self.inner.shard_misses.lock().insert(drive.to_string(), Instant::now() + SHARD_MISS_FOR);
    }

    fn answered(&self, drive: &str) {
        let mut misses = self.inner.shard_misses.lock();
        if !misses.is_empty() {
            misses.remove(drive);
        }
    }

    /// The shards to ask, in order: data shards on drives that answer well, then parity shards
    /// on such drives, then shards on drives marked down or failing lately.
    fn shard_order(&self, code: Code, drives: &[String]) -> Vec<usize> {
        let data = usize::from(code.data);
        let down = self.inner.down.read();
        let suspects = self.inner.suspects.lock();
        let misses = self.inner.shard_misses.lock();
        let now = Instant::now();
        let poor = |d: &String| down.contains(d) || suspects.get(d).is_some_and(|until| *until > now) || misses.get(d).is_some_and(|until| *until > now);
        let mut order: Vec<usize> = (0..drives.len()).collect();
        order.sort_by_key(|&s| (poor(&drives[s]), s >= data, s));
        order
    }

    fn check_object(object: &[u8]) -> Result<(), ClusterError> {
        if object.len() > MAX_OBJECT_NAME {
            return Err(ClusterError::KeyTooLong { len: object.len(), max: MAX_OBJECT_NAME });
        }
        Ok(())
    }
}

/// `object`'s group in `pool` and its drives, if placed.
fn placed<'a>(name: &str, pool: &'a Pool, object: &[u8]) -> Result<(u32, &'a [String]), ClusterError> {
    let group = pool.group_of(object);
    let drives = pool.drives_of(group);
    if drives.len() != pool.code.width() {
        return Err(StripeError::Unplaced { pool: name.to_string(), group, width: pool.code.width() }.into());
    }
    Ok((group, drives))
}

fn describe(shard: usize, drive: &str, miss: Miss) -> String {
    match miss {
        Miss::Absent => format!("shard {shard} absent on {drive}"),
        Miss::Damaged(why) => format!("shard {shard} on {drive} damaged ({why})"),
        Miss::Unanswered(why) => format!("shard {shard}: {drive} did not answer ({why})"),
    }
}

fn object_prefix(group: u32, object: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(object.len() + STRIPE_KEY_EXTRA);
    k.extend_from_slice(&group.to_be_bytes());
    k.extend_from_slice(&(object.len() as u16).to_be_bytes());
    k.extend_from_slice(object);
    k
}

/// Shard `shard` of stripe `index` of `object` on the drives of `group`.
pub fn shard_key(group: u32, object: &[u8], index: u32, shard: u8) -> Bytes {
    let mut k = object_prefix(group, object);
    k.extend_from_slice(&index.to_be_bytes());
    k.push(shard);
    Bytes::from(k)
}

/// The first and last possible shard keys of `object`.
fn object_range(group: u32, object: &[u8]) -> (Bytes, Bytes) {
    (shard_key(group, object, 0, 0), shard_key(group, object, u32::MAX, u8::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_objects_shards_are_one_range_holding_no_other_object() {
        let (start, end) = object_range(7, b"ab");
        let inside = shard_key(7, b"ab", 3, 5);
        assert!(start <= inside && inside <= end);
        // A longer name sharing the prefix, and another group, fall outside.
        for other in [shard_key(7, b"abc", 0, 0), shard_key(7, b"a", u32::MAX, 255), shard_key(8, b"ab", 0, 0), shard_key(6, b"ab", 9, 9)] {
            assert!(other < start || other > end, "{other:?}");
        }
        assert_eq!(shard_key(1, &[0; MAX_OBJECT_NAME], u32::MAX, 9).len(), map::MAX_DRIVE_KEY);
    }
}
