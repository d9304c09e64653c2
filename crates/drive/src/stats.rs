//! Counters since start, per request message type: how many requests and how many value bytes
//! moved (in and out), as GETLOG STATISTICS reports them.

use std::sync::atomic::{AtomicU64, Ordering};

use spindle_proto::MessageType;

/// Message types are small positive numbers; one slot per number keeps counting lock-free.
const SLOTS: usize = 64;

pub struct Statistics {
    counts: [AtomicU64; SLOTS],
    bytes: [AtomicU64; SLOTS],
}

impl Default for Statistics {
    fn default() -> Self {
        Statistics { counts: std::array::from_fn(|_| AtomicU64::new(0)), bytes: std::array::from_fn(|_| AtomicU64::new(0)) }
    }
}

impl Statistics {
    pub fn record(&self, request_type: i32, value_bytes: usize) {
        if let Ok(slot) = usize::try_from(request_type) {
            if slot < SLOTS {
                self.counts[slot].fetch_add(1, Ordering::Relaxed);
                self.bytes[slot].fetch_add(value_bytes as u64, Ordering::Relaxed);
            }
        }
    }

    /// (type, count, bytes) for every request type the protocol defines, seen or not.
    pub fn snapshot(&self) -> Vec<(MessageType, u64, u64)> {
        (0..SLOTS as i32)
            .filter(|t| t % 2 == 0)
            .filter_map(|t| MessageType::try_from(t).ok().map(|mt| (t, mt)))
            .map(|(t, mt)| {
                let slot = t as usize;
                (mt, self.counts[slot].load(Ordering::Relaxed), self.bytes[slot].load(Ordering::Relaxed))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_requests_and_bytes() {
        let s = Statistics::default();
        s.record(MessageType::Put as i32, 100);
        s.record(MessageType::Put as i32, 50);
        s.record(-1, 10);
        s.record(1000, 10);
        let snap = s.snapshot();
        let put = snap.iter().find(|(t, _, _)| *t == MessageType::Put).unwrap();
        assert_eq!((put.1, put.2), (2, 150));
        assert!(snap.iter().any(|(t, c, _)| *t == MessageType::Get && *c == 0));
        assert!(snap.iter().all(|(t, _, _)| (*t as i32) % 2 == 0));
    }
}
