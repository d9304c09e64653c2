//! MEDIASCAN over a key range.
//!
//! A scan reads every entry in the range and checks its value against the CRC32C the engine
//! stored with it and, when the client stored an integrity tag with a known algorithm (SHA1,
//! SHA2, CRC32C), against that tag too. It answers the keys that fail, and in `endKey` the last
//! key it examined, so a client pages through a large range; a scan stops after
//! `MAX_SCANNED_PER_REQUEST` entries or when the request's timeout runs out (EXPIRED).
//!
//! A scan examines only the keys the caller holds RANGE for (`scope_view::visible_keys`,
//! as GETKEYRANGE on a drive that hides keys): a key outside its scopes is never its `endKey`,
//! so a scoped caller paging from `endKey` learns nothing of the keys beyond its scopes.

use std::time::Instant;

use bytes::Bytes;
use sha1::Digest;
use spindle_engine::{Entry, KeyRange};
use spindle_proto::pb::command::{Algorithm, Body, Range};
use spindle_proto::StatusCode;

use crate::reply::{engine_error, Reply};
use crate::security::{Caller, Permission};
use crate::state::DriveState;

/// How many times a scan halves the gap it skips over damaged metadata, to pass over as few
/// readable keys as it can (each is one probe of the store).
const DAMAGE_REFINE_STEPS: usize = 24;

/// Entries one MEDIASCAN request examines at most.
pub const MAX_SCANNED_PER_REQUEST: usize = 10_000;
/// Keys read per step of a scan.
const PAGE: usize = 200;

/// Whether the value still matches what was stored with it.
pub fn intact(entry: &Entry) -> bool {
    if crc_fast::crc32_iscsi(&entry.value) != entry.meta.value_crc {
        return false;
    }
    let tag = &entry.meta.tag;
    match entry.meta.algorithm.and_then(|a| Algorithm::try_from(a).ok()) {
        _ if tag.is_empty() => true,
        Some(Algorithm::Sha1) => sha1::Sha1::digest(&entry.value)[..] == tag[..],
        Some(Algorithm::Sha2) => match tag.len() {
            28 => sha2::Sha224::digest(&entry.value)[..] == tag[..],
            32 => sha2::Sha256::digest(&entry.value)[..] == tag[..],
            48 => sha2::Sha384::digest(&entry.value)[..] == tag[..],
            64 => sha2::Sha512::digest(&entry.value)[..] == tag[..],
            _ => false,
        },
        Some(Algorithm::Crc32c) => tag.len() == 4 && crc_fast::crc32_iscsi(&entry.value).to_be_bytes()[..] == tag[..],
        // Other algorithms (and private ones) are opaque to the drive.
        _ => true,
    }
}

fn query(range: &Range, max_keys: u32) -> Result<(KeyRange, usize), Reply> {
    let max = match range.max_returned {
        None => max_keys,
        Some(n) if n < 1 || n as u32 > max_keys => {
            return Err(Reply::error(StatusCode::InvalidRequest, format!("maxReturned must be 1..={max_keys}")));
        }
        Some(n) => n as u32,
    };
    Ok((
        KeyRange {
            start: range.start_key.clone().unwrap_or_default(),
            start_inclusive: range.start_key_inclusive.unwrap_or(false),
            end: range.end_key.clone(),
            end_inclusive: range.end_key_inclusive.unwrap_or(false),
            reverse: false,
            max: PAGE,
        },
        max as usize,
    ))
}

/// What a scan may still spend: every key examined and every probe of the store (a listing
/// retried with a smaller page, a start tried past damaged metadata) counts against
/// [`MAX_SCANNED_PER_REQUEST`], and the request's deadline bounds them all once the scan has
/// moved (at least one key examined, or one stretch of damage passed, so that a client
/// resuming with too short a timeout still gets somewhere).
struct Budget {
    deadline: Option<Instant>,
    work: usize,
    moved: bool,
}

impl Budget {
    fn spend(&mut self) {
        self.work += 1;
    }

    /// Whether the scan must stop now, and why (`true`: the deadline; `false`: the work cap).
    fn exhausted(&self) -> Option<bool> {
        if self.work >= MAX_SCANNED_PER_REQUEST {
            Some(false)
        } else if self.moved && self.deadline.is_some_and(|d| Instant::now() > d) {
            Some(true)
        } else {
            None
        }
    }
}

pub fn run(state: &DriveState, caller: &Caller, range: Range, deadline: Option<Instant>) -> Reply {
    let (mut q, max_failures) = match query(&range, state.config.limits.max_key_range_count) {
        Ok(q) => q,
        Err(r) => return r,
    };
    let mut failed = Vec::new();
    // What `endKey` answers: the last key examined, or the bound a scan resumed from past
    // damaged metadata when it examined nothing after it (a made-up key; see `past_damage`).
    let mut last: Option<Bytes> = None;
    let mut budget = Budget { deadline, work: 0, moved: false };
    let mut expired = false;
    let mut damaged = Vec::new();
    // Keys listed per step: a step that meets damaged metadata is retried with half as many,
    // to examine the keys before the damage; it grows back after each step that succeeds.
    let mut page = PAGE;
    'pages: loop {
        q.max = page;
        let keys = match crate::scope_view::visible_keys(state.engine.as_ref(), caller, Permission::Range, &q) {
            Ok(k) => k,
            // Damaged metadata: the keys it held cannot be listed, but the scan must not end
            // there with nothing said. It lists the keys before the damage in smaller steps,
            // then goes on from the nearest point past it and reports the span it could not read.
            Err(spindle_engine::Error::Corrupt { detail: cause, .. }) => {
                budget.spend();
                if let Some(deadline) = budget.exhausted() {
                    expired = deadline;
                    break 'pages;
                }
                if page > 1 {
                    page /= 2;
                    continue 'pages;
                }
                // Damage right after `q.start`: everything before it was examined.
                let from = q.start.clone();
                match past_damage(state, caller, &q, &from, &mut budget) {
                    Resume::At(resume) if resume > from => {
                        damaged.push(format!("after {} and before {} ({cause})", printable(&from), printable(&resume)));
                        q.start = resume.clone();
                        q.start_inclusive = true;
                        // A paging client resumes from here, should the scan stop before it
                        // examines a key past the damage.
                        last = Some(resume);
                        budget.moved = true;
                        page = PAGE;
                        continue 'pages;
                    }
                    Resume::Stopped(deadline) => {
                        damaged.push(format!("after {} (the scan stopped before it found the end of the damage; {cause})", printable(&from)));
                        expired = deadline;
                        break 'pages;
                    }
                    // No start past the damage is readable up to the end of the range (or,
                    // defensively, none moves forward): the rest of the range is reported
                    // and the scan ends with an endKey past it, so that a paging client is
                    // done rather than sent back into the damage.
                    Resume::At(_) | Resume::ToTheEnd => {
                        damaged.push(format!("after {} to the end of the range ({cause})", printable(&from)));
                        last = Some(end_of_range(state, &q));
                        break 'pages;
                    }
                }
            }
            Err(e) => return engine_error(e),
        };
        let full_page = keys.len() == page;
        page = (page * 2).min(PAGE);
        for key in keys {
            if let Some(deadline) = budget.exhausted() {
                expired = deadline;
                break 'pages;
            }
            match state.engine.get(&key) {
                Ok(Some(entry)) if intact(&entry) => {}
                Ok(None) => {} // deleted meanwhile
                Ok(Some(_)) | Err(_) => failed.push(key.clone()),
            }
            budget.spend();
            budget.moved = true;
            q.start = key.clone();
            q.start_inclusive = false;
            last = Some(key);
            if failed.len() >= max_failures {
                break 'pages;
            }
        }
        if !full_page {
            break;
        }
    }
    let body = Body { range: Some(Range { keys: failed, end_key: last, ..Range::default() }), ..Body::default() };
    let message = if damaged.is_empty() {
        String::new()
    } else {
        let message = format!("MEDIASCAN: damaged metadata, keys unreadable {}", damaged.join("; "));
        state.event(message.clone());
        message
    };
    if expired {
        return Reply { body: Some(Box::new(body)), ..Reply::error(StatusCode::Expired, "the scan ran out of time; endKey is the last key examined") };
    }
    Reply { message, ..Reply::ok(Some(body)) }
}

/// An `endKey` at or past the end of `q`: its end key (the caller's own), or, for a range
/// without one, a key after every key the drive can store. Made up: it reveals nothing.
fn end_of_range(state: &DriveState, q: &KeyRange) -> Bytes {
    match &q.end {
        Some(end) => end.clone(),
        None => Bytes::from(vec![u8::MAX; (state.config.limits.max_key_size as usize).max(1)]),
    }
}

/// Where a scan stopped by damaged metadata goes on.
enum Resume {
    /// From here (inclusive): the lowest start found from which keys can be listed again.
    At(Bytes),
    /// No start up to the end of the range can be listed.
    ToTheEnd,
    /// The budget ran out first (`true`: the deadline).
    Stopped(bool),
}

/// Where a scan of `q` stopped by damaged metadata after `from` can go on: the lowest start
/// found, by probing, from which the caller's keys can be listed again. Probes start after
/// ever shorter prefixes of `from`, then halve the gap between the damage and the first
/// readable start. The bound reported is a made-up key, never a stored one, so it reveals
/// nothing outside the caller's scopes. It is always above `from`; each probe is spent from
/// `budget`, and running out of it while refining gives the (looser) bound found so far.
fn past_damage(state: &DriveState, caller: &Caller, q: &KeyRange, from: &Bytes, budget: &mut Budget) -> Resume {
    let readable = |start: &Bytes, budget: &mut Budget| {
        budget.spend();
        let probe = KeyRange { start: start.clone(), start_inclusive: true, max: 1, ..q.clone() };
        crate::scope_view::visible_keys(state.engine.as_ref(), caller, Permission::Range, &probe).is_ok()
    };
    let shorter = (1..=from.len()).rev().filter_map(|len| from.get(..len).and_then(crate::scope_view::prefix_end));
    let first_bytes = (1..=u8::MAX).map(|b| Bytes::from(vec![b])).filter(|c| c > from);
    let mut hi = None;
    for candidate in shorter.chain(first_bytes) {
        if let Some(deadline) = budget.exhausted() {
            return Resume::Stopped(deadline);
        }
        if readable(&candidate, budget) {
            hi = Some(candidate);
            break;
        }
    }
    let Some(mut hi) = hi else { return Resume::ToTheEnd };
    let mut lo = from.clone();
    for _ in 0..DAMAGE_REFINE_STEPS {
        let mid = midpoint(&lo, &hi);
        if mid <= lo || mid >= hi || budget.exhausted().is_some() {
            break;
        }
        if readable(&mid, budget) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Resume::At(hi)
}

/// A key halfway between `a` and `b` in byte order (both read as fractions in base 256).
fn midpoint(a: &[u8], b: &[u8]) -> Bytes {
    let n = a.len().max(b.len()) + 1;
    let digits = |x: &[u8]| x.iter().copied().chain(std::iter::repeat(0)).take(n).collect::<Vec<u8>>();
    let (a, b) = (digits(a), digits(b));
    let mut sum = vec![0u16; n];
    let mut carry = 0u16;
    for ((s, x), y) in sum.iter_mut().zip(&a).zip(&b).rev() {
        let total = u16::from(*x) + u16::from(*y) + carry;
        *s = total & 0xff;
        carry = total >> 8;
    }
    let mut half = Vec::with_capacity(n);
    let mut rest = carry;
    for s in sum {
        let value = (rest << 8) | s;
        half.push((value / 2) as u8);
        rest = value % 2;
    }
    while half.last() == Some(&0) {
        half.pop();
    }
    half.into()
}

/// A key for a message: as text where it is printable, escaped otherwise.
fn printable(key: &[u8]) -> String {
    format!("\"{}\"", key.escape_ascii())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn midpoints_lie_between_their_ends() {
        let cases: [(&[u8], &[u8]); 4] = [(b"a", b"c"), (b"small/0001", b"small/0002"), (b"", b"\x01"), (b"ab\xff", b"ac")];
        for (a, b) in cases {
            let mid = midpoint(a, b);
            assert!(&mid[..] > a && &mid[..] < b, "{a:?} {mid:?} {b:?}");
        }
    }

    /// A store whose listings fail, as fjall's do over a damaged metadata block, when they
    /// reach one of `bad` (which is never listed itself).
    struct Damaged {
        inner: std::sync::Arc<spindle_engine::MemEngine>,
        bad: Vec<Bytes>,
    }

    impl spindle_engine::Engine for Damaged {
        fn get(&self, key: &[u8]) -> spindle_engine::Result<Option<Entry>> {
            self.inner.get(key)
        }
        fn get_meta(&self, key: &[u8]) -> spindle_engine::Result<Option<spindle_engine::Meta>> {
            self.inner.get_meta(key)
        }
        fn next(&self, key: &[u8]) -> spindle_engine::Result<Option<Entry>> {
            self.inner.next(key)
        }
        fn previous(&self, key: &[u8]) -> spindle_engine::Result<Option<Entry>> {
            self.inner.previous(key)
        }
        fn keys(&self, range: &KeyRange) -> spindle_engine::Result<Vec<Bytes>> {
            let mut found = Vec::new();
            for key in self.inner.keys(&KeyRange { max: usize::MAX, ..range.clone() })? {
                if found.len() == range.max {
                    break;
                }
                if self.bad.contains(&key) {
                    return Err(spindle_engine::Error::corrupt("checksum mismatch"));
                }
                found.push(key);
            }
            Ok(found)
        }
        fn submit(&self, request: spindle_engine::WriteRequest) {
            self.inner.submit(request);
        }
        fn compact(&self) -> spindle_engine::Result<()> {
            Ok(())
        }
        fn disk_usage(&self) -> u64 {
            0
        }
        fn approximate_len(&self) -> u64 {
            self.inner.approximate_len()
        }
    }

    /// Scans 300 keys with damaged metadata at `bad` (within one 200-key page of each other),
    /// on a thread of its own, failing after 20 s rather than hanging.
    fn scan_damaged(bad: &[&str], deadline: Option<Instant>) -> Reply {
        use spindle_engine::Engine as _;
        let inner = spindle_engine::MemEngine::new();
        for i in 0..300 {
            // Empty values: their CRC32C is 0, as in `Meta::default()`.
            inner.put(format!("k{i:03}").as_bytes(), Bytes::new(), spindle_engine::Meta::default(), spindle_engine::Check::Force).unwrap();
        }
        let engine = std::sync::Arc::new(Damaged { inner, bad: bad.iter().map(|k| Bytes::copy_from_slice(k.as_bytes())).collect() });
        let dir = std::env::temp_dir().join(format!("spindle-media-test-{}-{}", std::process::id(), bad.join("-")));
        let config = crate::config::DriveConfig { data_dir: dir.clone(), engine: crate::config::EngineKind::Memory, reserved_bytes: 0, ..Default::default() };
        let state = DriveState::new(config, engine, crate::persist::Identity::generate(), 0, 0);
        let identity = crate::security::Security::default().identity(spindle_proto::DEFAULT_IDENTITY).unwrap();
        let caller = Caller { identity, tls: false };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let range = Range { start_key: Some(Bytes::new()), start_key_inclusive: Some(true), end_key: Some(Bytes::from_static(b"zzzz")), ..Range::default() };
            drop(tx.send(run(&state, &caller, range, deadline)));
        });
        let reply = rx.recv_timeout(std::time::Duration::from_secs(20)).expect("the scan ended");
        let _ = std::fs::remove_dir_all(dir);
        reply
    }

    /// Two damaged blocks within one page: the scan used to resume at the same point for ever
    /// (review H1). It now examines every readable key, reports both spans and ends.
    #[test]
    fn a_scan_passes_two_damaged_blocks_in_one_page() {
        let reply = scan_damaged(&["k050", "k120"], None);
        assert_eq!(reply.status, StatusCode::Success, "{}", reply.message);
        assert_eq!(reply.message.matches("and before").count(), 2, "{}", reply.message);
        let range = reply.body.unwrap().range.unwrap();
        assert!(range.keys.is_empty(), "{:?}", range.keys);
        assert_eq!(range.end_key.as_deref(), Some(&b"k299"[..]));
    }

    /// Damage that runs to the end of the range ends the scan with an endKey past it (the
    /// range's own end), so a paging client is not sent back into the damage.
    #[test]
    fn damage_to_the_end_of_the_range_ends_the_scan() {
        let bad: Vec<String> = (250..300).map(|i| format!("k{i:03}")).collect();
        let bad: Vec<&str> = bad.iter().map(String::as_str).collect();
        let reply = scan_damaged(&bad, None);
        assert_eq!(reply.status, StatusCode::Success, "{}", reply.message);
        let end = reply.body.unwrap().range.unwrap().end_key.unwrap();
        assert!(end[..] > b"k299"[..], "{end:?}: {}", reply.message);
    }

    /// A scan whose deadline has passed still gets past the first damage (at least one step),
    /// then stops with EXPIRED and an endKey past the damage.
    #[test]
    fn an_expired_scan_still_moves_past_damage() {
        let reply = scan_damaged(&["k000"], Some(Instant::now()));
        assert_eq!(reply.status, StatusCode::Expired, "{}", reply.message);
        let end = reply.body.unwrap().range.unwrap().end_key.unwrap();
        assert!(end[..] > b"k000"[..], "{end:?}");
    }
}
