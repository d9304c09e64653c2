//! A request's changes as fjall effects on the two keyspaces, staged until the whole request
//! passed the write rules (`crate::rules`).

use std::collections::HashMap;

use bytes::Bytes;

use super::store::{Known, Store};
use super::INLINE_VALUE_MAX;
use crate::record;
use crate::{Meta, Result};

/// One change to a keyspace.
pub(super) enum Effect {
    Insert { data: bool, key: Bytes, value: Bytes },
    Remove { data: bool, key: Bytes },
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
        let inline = value.len() <= INLINE_VALUE_MAX;
        let record = record::encode(&meta, inline.then_some(&value[..]))?;
        self.effects.push(Effect::Insert { data: false, key: key.clone(), value: record });
        if !inline {
            self.effects.push(Effect::Insert { data: true, key: key.clone(), value: value.clone() });
        } else if match &stored {
            Some(m) => m.in_data,
            None => forced && self.may_hold_value(key)?,
        } {
            // An earlier large value must not be left behind in the data keyspace.
            self.effects.push(Effect::Remove { data: true, key: key.clone() });
        }
        self.written.push((key.clone(), Some(Known { meta, in_data: !inline })));
        Ok(())
    }

    fn delete(&mut self, key: &Bytes, stored: Known) -> Result<()> {
        self.effects.push(Effect::Remove { data: false, key: key.clone() });
        if stored.in_data {
            self.effects.push(Effect::Remove { data: true, key: key.clone() });
        }
        self.written.push((key.clone(), None));
        Ok(())
    }
}

/// Adds staged `effects` to the group's fjall batch and what they leave to `group`.
pub(super) fn apply_staged(store: &Store, (effects, written): (Vec<Effect>, Vec<(Bytes, Option<Known>)>), batch: &mut fjall::OwnedWriteBatch, group: &mut HashMap<Bytes, Option<Known>>) {
    for effect in effects {
        match effect {
            Effect::Insert { data, key, value } => batch.insert(if data { &store.data } else { &store.meta }, key, value),
            Effect::Remove { data, key } => batch.remove(if data { &store.data } else { &store.meta }, key),
        }
    }
    group.extend(written);
}
