//! A scoped caller's view of the key space on a drive that hides out-of-scope keys
//! (`hide_out_of_scope_keys`, for drives shared by tenants). GETNEXT and GETPREVIOUS skip to
//! the nearest key the caller may read, and GETKEYRANGE fills its count with keys the caller
//! may range over, so whatever lies outside the caller's scopes answers exactly as nothing
//! would. By default the drive answers as the reference drive does: a neighbour the caller
//! may not read is NOT_AUTHORIZED, which tells a scoped caller that some key is there
//! (docs/security.md).
//!
//! A scope whose value sits at offset 0 is a key prefix, so it narrows the engine's scan to
//! that prefix's range. A scope at a later offset cannot narrow it: the keys are read in order
//! and filtered, at most [`FILTERED_SCAN_LIMIT`] per request, so such a tenant cannot make the
//! drive walk all of it; beyond the limit the answer holds what was found (possibly nothing).

use bytes::Bytes;
use spindle_engine::{Engine, KeyRange, Result as EngineResult};

use crate::security::{Caller, Permission};

/// Keys examined, at most, for the scopes that cannot narrow a scan (value at an offset > 0).
pub const FILTERED_SCAN_LIMIT: usize = 100_000;
/// Keys read per step of such a scan.
const SCAN_PAGE: usize = 1024;

/// Up to `query.max` keys of `query` that `caller` holds `permission` for, in the query's order.
pub fn visible_keys(engine: &dyn Engine, caller: &Caller, permission: Permission, query: &KeyRange) -> EngineResult<Vec<Bytes>> {
    let scopes = caller.scopes_for(permission);
    if scopes.iter().any(|s| s.value.is_empty()) {
        return engine.keys(query);
    }
    let mut found = Vec::new();
    let mut filtered = false;
    for scope in &scopes {
        if scope.offset == 0 {
            if let Some(narrowed) = within_prefix(query, &scope.value) {
                found.extend(engine.keys(&narrowed)?);
            }
        } else {
            filtered = true;
        }
    }
    if filtered {
        found.extend(filtered_scan(engine, query, |k| caller.may(permission, Some(k)))?);
    }
    found.sort();
    found.dedup();
    if query.reverse {
        found.reverse();
    }
    found.truncate(query.max);
    Ok(found)
}

/// The keys of `query` that pass `keep`, reading at most [`FILTERED_SCAN_LIMIT`] keys.
fn filtered_scan(engine: &dyn Engine, query: &KeyRange, keep: impl Fn(&[u8]) -> bool) -> EngineResult<Vec<Bytes>> {
    let mut kept = Vec::new();
    let mut page = KeyRange { max: SCAN_PAGE, ..query.clone() };
    let mut examined = 0;
    while kept.len() < query.max && examined < FILTERED_SCAN_LIMIT {
        let keys = engine.keys(&page)?;
        examined += keys.len();
        let Some(last) = keys.last().cloned() else { break };
        let exhausted = keys.len() < page.max;
        kept.extend(keys.into_iter().filter(|k| keep(k)));
        if exhausted {
            break;
        }
        // The next page starts after the last key read, on the side the scan moves to.
        if query.reverse {
            page.end = Some(last);
            page.end_inclusive = false;
        } else {
            page.start = last;
            page.start_inclusive = false;
        }
    }
    kept.truncate(query.max);
    Ok(kept)
}

/// `query` narrowed to the keys that start with `prefix`, or `None` if none can.
fn within_prefix(query: &KeyRange, prefix: &[u8]) -> Option<KeyRange> {
    let mut narrowed = query.clone();
    if prefix > &query.start[..] {
        narrowed.start = Bytes::copy_from_slice(prefix);
        narrowed.start_inclusive = true;
    }
    if let Some(prefix_end) = prefix_end(prefix) {
        let tighter = match &query.end {
            None => true,
            Some(end) => prefix_end[..] <= end[..],
        };
        if tighter {
            narrowed.end = Some(prefix_end);
            narrowed.end_inclusive = false;
        }
    }
    let empty = match &narrowed.end {
        None => false,
        Some(end) => narrowed.start > *end || (narrowed.start == *end && !(narrowed.start_inclusive && narrowed.end_inclusive)),
    };
    (!empty).then_some(narrowed)
}

/// The first key after every key that starts with `prefix` (`None`: there is none).
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Bytes> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end.into());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn range(start: &[u8], si: bool, end: Option<&[u8]>, ei: bool) -> KeyRange {
        KeyRange { start: Bytes::copy_from_slice(start), start_inclusive: si, end: end.map(Bytes::copy_from_slice), end_inclusive: ei, reverse: false, max: 100 }
    }

    #[test]
    fn prefix_ends() {
        assert_eq!(prefix_end(b"ab").as_deref(), Some(&b"ac"[..]));
        assert_eq!(prefix_end(b"a\xff").as_deref(), Some(&b"b"[..]));
        assert_eq!(prefix_end(b"ab\xff").as_deref(), Some(&b"ac"[..]));
        assert_eq!(prefix_end(b"\xff\xff"), None);
        assert_eq!(prefix_end(b"\xff"), None);
    }

    proptest! {
        /// A key is in the narrowed range exactly when it is in the query and has the prefix.
        #[test]
        fn narrowing_keeps_exactly_the_prefixed_keys_of_the_query(
            prefix in proptest::collection::vec(prop::sample::select(vec![0u8, 1, 0xfe, 0xff]), 1..3),
            start in proptest::collection::vec(prop::sample::select(vec![0u8, 1, 0xfe, 0xff]), 0..4),
            end in proptest::option::of(proptest::collection::vec(prop::sample::select(vec![0u8, 1, 0xfe, 0xff]), 0..4)),
            si in any::<bool>(), ei in any::<bool>(),
            key in proptest::collection::vec(prop::sample::select(vec![0u8, 1, 0xfe, 0xff]), 0..5),
        ) {
            let q = range(&start, si, end.as_deref(), ei);
            let expected = q.contains(&key) && key.starts_with(&prefix);
            let got = within_prefix(&q, &prefix).is_some_and(|n| n.contains(&key));
            prop_assert_eq!(got, expected);
        }
    }
}
