//! An in-memory engine with the same semantics as the on-disk one, for tests and for measuring
//! the protocol path without storage. Writes apply and complete at once.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::RwLock;

use crate::{Engine, Entry, KeyRange, Meta, Result, WriteOp, WriteRequest};

#[derive(Default)]
pub struct MemEngine {
    map: RwLock<BTreeMap<Bytes, (Meta, Bytes)>>,
}

impl MemEngine {
    pub fn new() -> Arc<Self> {
        Arc::new(MemEngine::default())
    }
}

impl MemEngine {
    fn apply(&self, op: &WriteOp) -> Result<()> {
        let mut map = self.map.write();
        if let WriteOp::Erase { .. } = op {
            map.clear();
            return Ok(());
        }
        let mut staging = MemStaging { map: &map, written: Vec::new() };
        crate::rules::stage(&mut staging, op)?;
        let written = staging.written;
        for (key, entry) in written {
            match entry {
                Some(entry) => map.insert(key, entry),
                None => map.remove(&key),
            };
        }
        Ok(())
    }
}

/// Changes decided against the map, applied only when the whole request passed.
struct MemStaging<'a> {
    map: &'a BTreeMap<Bytes, (Meta, Bytes)>,
    /// In order (`None`: deleted).
    written: Vec<(Bytes, Option<(Meta, Bytes)>)>,
}

impl crate::rules::Staging for MemStaging<'_> {
    type Stored = Meta;

    fn version(stored: &Meta) -> &[u8] {
        &stored.version
    }

    fn current(&mut self, key: &Bytes) -> Result<Option<Meta>> {
        Ok(match self.written.iter().rev().find(|(k, _)| k == key) {
            Some((_, entry)) => entry.as_ref().map(|(meta, _)| meta.clone()),
            None => self.map.get(key).map(|(meta, _)| meta.clone()),
        })
    }

    fn put(&mut self, key: &Bytes, value: &Bytes, meta: Meta, _stored: Option<Meta>, _forced: bool) -> Result<()> {
        self.written.push((key.clone(), Some((meta, value.clone()))));
        Ok(())
    }

    fn delete(&mut self, key: &Bytes, _stored: Meta) -> Result<()> {
        self.written.push((key.clone(), None));
        Ok(())
    }
}

fn entry(key: &Bytes, (meta, value): &(Meta, Bytes)) -> Entry {
    Entry { key: key.clone(), meta: meta.clone(), value: value.clone() }
}

impl Engine for MemEngine {
    fn get(&self, key: &[u8]) -> Result<Option<Entry>> {
        let map = self.map.read();
        Ok(map.get_key_value(key).map(|(k, v)| entry(k, v)))
    }

    fn get_meta(&self, key: &[u8]) -> Result<Option<Meta>> {
        Ok(self.map.read().get(key).map(|(m, _)| m.clone()))
    }

    fn next(&self, key: &[u8]) -> Result<Option<Entry>> {
        let map = self.map.read();
        let mut it = map.range::<[u8], _>((Bound::Excluded(key), Bound::Unbounded));
        Ok(it.next().map(|(k, v)| entry(k, v)))
    }

    fn previous(&self, key: &[u8]) -> Result<Option<Entry>> {
        let map = self.map.read();
        let mut it = map.range::<[u8], _>((Bound::Unbounded, Bound::Excluded(key)));
        Ok(it.next_back().map(|(k, v)| entry(k, v)))
    }

    fn keys(&self, range: &KeyRange) -> Result<Vec<Bytes>> {
        let Some(bounds) = range.bounds().filter(|_| range.max > 0) else { return Ok(Vec::new()) };
        let map = self.map.read();
        let it = map.range::<[u8], _>(bounds).map(|(k, _)| k.clone());
        Ok(if range.reverse { it.rev().take(range.max).collect() } else { it.take(range.max).collect() })
    }

    fn submit(&self, request: WriteRequest) {
        // The same keys as the on-disk engine accepts.
        let result = crate::limits::check_op(&request.op).and_then(|()| self.apply(&request.op));
        request.finish(result);
    }

    fn compact(&self) -> Result<()> {
        Ok(())
    }

    fn disk_usage(&self) -> u64 {
        0
    }

    fn approximate_len(&self) -> u64 {
        self.map.read().len() as u64
    }
}
