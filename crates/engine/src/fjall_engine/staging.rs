//! A request's changes as fjall effects on the two keyspaces, staged until the whole request
//! passed the write rules (`crate::rules`).

use std::collections::HashMap;

use bytes::Bytes;

use super::store::{Known, Store};
use super::INLINE_VALUE_MAX;
use crate::record;
use crate::value_log::{format::record_len, Pointer};
use crate::{Error, Meta, Result};

/// One change to a keyspace or the value log.
pub(super) enum Effect {
    Insert { data: bool, key: Bytes, value: Bytes },
    Remove { data: bool, key: Bytes },
    /// A value appended to the value log and its record, pointing to it, inserted.
    Logged { key: Bytes, value: Bytes, meta: Meta },
    /// A logged value no record will point to once this request is applied.
    Garbage { key: Bytes, pointer: Pointer, record_len: u64 },
}


/// The changes one request would make, kept aside until the whole request has passed its
/// checks (a failed batch must leave nothing in the group's fjall batch).
pub(super) struct Staged<'a> {
    store: &'a Store,
    /// What the group's earlier requests wrote.
    group: &'a HashMap<Bytes, Option<Known>>,
    effects: Vec<Effect>,
    /// Metadata after this request, in order (`None`: deleted).
    written: Vec<(Bytes, Option<Known>)>,
}

impl<'a> Staged<'a> {
    pub(super) fn new(store: &'a Store, group: &'a HashMap<Bytes, Option<Known>>) -> Self {
        Staged { store, group, effects: Vec::new(), written: Vec::new() }
    }

    /// What this request's earlier operations or the group's earlier requests left under
    /// `key` (`Some(None)`: deleted), if they touched it.
    pub(super) fn written_earlier(&self, key: &Bytes) -> Option<&Option<Known>> {
        self.written.iter().rev().find(|(k, _)| k == key).map(|(_, m)| m).or_else(|| self.group.get(key))
    }

    /// Whether the data keyspace may hold a value for `key`, for a forced small put, which has
    /// not read the key's record. The data keyspace's memtables and its tables' filters answer
    /// without reading a block: where values are small it holds few keys, and where a large
    /// value is overwritten by a small one the answer is a filter's "maybe" and a tombstone,
    /// not a lookup (a false "maybe" costs only a tombstone).
    pub(super) fn may_hold_value(&self, key: &Bytes) -> Result<bool> {
        match self.written_earlier(key) {
            Some(known) => Ok(known.as_ref().is_some_and(|m| m.in_data)),
            None => Ok(self.store.data.may_contain_key(key)?),
        }
    }

    /// The staged changes and the metadata they leave, to apply.
    pub(super) fn into_parts(self) -> (Vec<Effect>, Vec<(Bytes, Option<Known>)>) {
        (self.effects, self.written)
    }
}

impl crate::rules::Staging for Staged<'_> {
    type Stored = Known;

    fn version(stored: &Known) -> &[u8] {
        &stored.meta.version
    }

    /// The metadata `key` has after this request's earlier operations, the group's earlier
    /// requests, or in the store.
    fn current(&mut self, key: &Bytes) -> Result<Option<Known>> {
        match self.written_earlier(key) {
            Some(known) => Ok(known.clone()),
            None => self.store.stored(key),
        }
    }

    fn put(&mut self, key: &Bytes, value: &Bytes, meta: Meta, stored: Option<Known>, forced: bool) -> Result<()> {
        let logged = value.len() >= self.store.log_threshold;
        // A logged value is large enough that reading the key's record costs little beside
        // it, and tells exactly what this put replaces; a small forced put does not read
        // (the value log's census finds the garbage it leaves).
        let stored = if logged && forced { self.current(key)? } else { stored };
        let inline = value.len() <= INLINE_VALUE_MAX;
        // Before this put's own value is logged: a replaced value this request logged itself
        // is found where it was placed (`apply_staged`).
        if let Some(Known { logged: Some(pointer), meta: old, .. }) = &stored {
            self.effects.push(Effect::Garbage { key: key.clone(), pointer: *pointer, record_len: record_len(key.len(), old.value_len) });
        }
        if logged {
            self.effects.push(Effect::Logged { key: key.clone(), value: value.clone(), meta: meta.clone() });
        } else {
            let record = record::encode(&meta, inline.then_some(&value[..]))?;
            self.effects.push(Effect::Insert { data: false, key: key.clone(), value: record });
        }
        let in_data = !inline && !logged;
        if in_data {
            self.effects.push(Effect::Insert { data: true, key: key.clone(), value: value.clone() });
        } else if match &stored {
            Some(m) => m.in_data,
            None => forced && self.may_hold_value(key)?,
        } {
            // An earlier value must not be left behind in the data keyspace.
            self.effects.push(Effect::Remove { data: true, key: key.clone() });
        }
        // The pointer is known once the value is appended; until then the group sees a
        // logged value at no position, which only its own later requests read.
        self.written.push((key.clone(), Some(Known { meta, in_data, logged: logged.then_some(UNPLACED) })));
        Ok(())
    }

    fn delete(&mut self, key: &Bytes, stored: Known) -> Result<()> {
        self.effects.push(Effect::Remove { data: false, key: key.clone() });
        if stored.in_data {
            self.effects.push(Effect::Remove { data: true, key: key.clone() });
        }
        if let Some(pointer) = stored.logged {
            self.effects.push(Effect::Garbage { key: key.clone(), pointer, record_len: record_len(key.len(), stored.meta.value_len) });
        }
        self.written.push((key.clone(), None));
        Ok(())
    }
}

/// Where a group's own logged values are said to be until they are appended (see `put`).
const UNPLACED: Pointer = Pointer { segment: u32::MAX, offset: u64::MAX };

/// Adds staged `effects` to the group's fjall batch (appending logged values to the value
/// log first, and handing them to the OS) and what they leave to `group`. On an error nothing
/// of the request is in the batch, nor in the value log.
pub(super) fn apply_staged(
    store: &Store,
    (effects, written): (Vec<Effect>, Vec<(Bytes, Option<Known>)>),
    batch: &mut fjall::OwnedWriteBatch,
    group: &mut HashMap<Bytes, Option<Known>>,
) -> Result<()> {
    let mut changes = Vec::with_capacity(effects.len());
    let mut garbage = Vec::new();
    let mut placed: HashMap<Bytes, Pointer> = HashMap::new();
    {
        let mut appender = store.log.active.lock();
        let append = || -> Result<()> {
            for effect in effects {
                match effect {
                    Effect::Logged { key, value, meta } => {
                        let pointer = store.log.append(&mut appender, &key, &value, meta.value_crc)?;
                        placed.insert(key.clone(), pointer);
                        changes.push(Effect::Insert { data: false, value: record::encode_logged(&meta, pointer)?, key });
                    }
                    Effect::Garbage { key, pointer, record_len } => {
                        // A value this request appended and replaces is garbage where it was
                        // placed (its effect came before this one, and before the new value's).
                        let at = if pointer == UNPLACED { placed.get(&key).copied() } else { Some(pointer) };
                        garbage.extend(at.map(|p| (p, record_len)));
                    }
                    other => changes.push(other),
                }
            }
            // The request's values reach the OS before its records can reach the journal.
            match appender.as_mut() {
                Some(app) if !placed.is_empty() => store.log.flush(app),
                _ => Ok(()),
            }
        };
        if let Err(e) = append() {
            // What the request appended goes with it (`ValueLog::abandon`).
            if let Some(app) = appender.as_mut() {
                store.log.abandon(app);
            }
            return Err(e);
        }
    }
    for change in changes {
        match change {
            Effect::Insert { data, key, value } => batch.insert(if data { &store.data } else { &store.meta }, key, value),
            Effect::Remove { data, key } => batch.remove(if data { &store.data } else { &store.meta }, key),
            Effect::Logged { .. } | Effect::Garbage { .. } => return Err(Error::Internal("a value log effect left unapplied")),
        }
    }
    for (pointer, record_len) in garbage {
        store.log.garbage(pointer, record_len);
    }
    for (key, known) in written {
        let known = known.map(|mut k| {
            if k.logged == Some(UNPLACED) {
                k.logged = placed.get(&key).copied();
            }
            k
        });
        group.insert(key, known);
    }
    Ok(())
}
