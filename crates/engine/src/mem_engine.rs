//! An in-memory engine with the same semantics as the on-disk one, for tests and for measuring
//! the protocol path without storage. Writes apply and complete at once.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::RwLock;

use crate::{Check, Engine, Entry, Error, KeyRange, Meta, Result, WriteOp, WriteRequest};

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
        if let WriteOp::Batch(ops) = op {
            // Apply to a copy of the touched entries; publish only if every operation passed.
            let mut scratch = MemEngine::default();
            {
                let mut copy = scratch.map.write();
                for op in ops {
                    if let Some(key) = op.key() {
                        if let Some(v) = map.get(key) {
                            copy.insert(key.clone(), v.clone());
                        }
                    }
                }
            }
            let mut touched = Vec::new();
            for (index, op) in ops.iter().enumerate() {
                if matches!(op, WriteOp::Batch(_) | WriteOp::Flush | WriteOp::Erase { .. }) {
                    return Err(Error::BatchFailed { index, cause: Box::new(Error::Io("only puts and deletes batch".into())) });
                }
                scratch.apply(op).map_err(|cause| Error::BatchFailed { index, cause: Box::new(cause) })?;
                touched.extend(op.key().cloned());
            }
            let copy = std::mem::take(&mut *scratch.map.get_mut());
            for key in touched {
                match copy.get(&key) {
                    Some(v) => map.insert(key, v.clone()),
                    None => map.remove(&key),
                };
            }
            return Ok(());
        }
        match op {
            WriteOp::Put { key, value, meta, check } => {
                let mut meta = meta.clone();
                meta.value_len = u32::try_from(value.len()).map_err(|_| Error::Io("value over 4 GiB".into()))?;
                meta.value_crc = crc32c::crc32c(value);
                if !check.passes(map.get(key).map(|(m, _)| &m.version[..])) {
                    return Err(Error::VersionMismatch);
                }
                map.insert(key.clone(), (meta, value.clone()));
                Ok(())
            }
            WriteOp::Delete { key, check } => match map.get(key) {
                None if *check == Check::Force => Ok(()),
                None => Err(Error::NotFound),
                Some((m, _)) if !check.passes(Some(&m.version)) => Err(Error::VersionMismatch),
                Some(_) => {
                    map.remove(key);
                    Ok(())
                }
            },
            WriteOp::Erase { .. } => {
                map.clear();
                Ok(())
            }
            WriteOp::Flush | WriteOp::Batch(_) => Ok(()),
        }
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
