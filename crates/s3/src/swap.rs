//! The swap of an object's record (`Core::commit`, `Core::remove`): turns at it, the wait after
//! a lost one, and what a raced one tried (`raced.rs` settles it).
//!
//! Writes and deletes of one object through one gateway queue for its compare-and-swap rather
//! than race each other's: a hot key written by many clients of one gateway then never starves
//! one of them of its swap (tokio's mutex is first come, first served). Writes through other
//! gateways still race; a swap that lost backs off for a random while before it tries again
//! (`Turns::back_off`), so that they spread out.

use std::hash::{Hash, Hasher};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{Mutex, MutexGuard};

use crate::records::Manifest;

/// Queues objects share: a fixed table, its memory bounded whatever the keys; two objects
/// sharing one take turns, which costs nothing but a wait of one swap.
pub const TURNS: usize = 1024;
/// The longest a swap that lost waits before it tries again.
const LONGEST_BACK_OFF: Duration = Duration::from_millis(64);

/// A commit once its swap raced (`Core::commit`): the version the swap was made on, and every
/// manifest tried on it since with its encoding (any may yet be chosen by another's hand).
pub(crate) struct Raced {
    pub based: Option<Bytes>,
    /// The `Manifest::swap_id` of the manifest the swap was made on, if it had one.
    pub based_id: Option<u64>,
    pub tried: Vec<(Manifest, Bytes)>,
}

/// What reading the object again says of a raced swap (`Core::settle_race`).
pub(crate) enum Settled {
    /// This manifest of ours (its index in `Raced::tried`) took effect.
    Took(usize),
    /// The version the swap was made on is still there: tried again.
    TryAgain,
    /// Ours never took effect, and another write did: the write starts over above it.
    StartOver,
    /// Ours is not current, and no manifest tells whether it took effect
    /// (`Core::replaced_since` asks its data's intents).
    Unknown,
}

pub struct Turns(Box<[Mutex<()>]>);

impl Default for Turns {
    fn default() -> Self {
        Turns((0..TURNS).map(|_| Mutex::new(())).collect())
    }
}

impl Turns {
    /// Waits for the turn of the object stored under `object`. Held across one write's or one
    /// delete's whole swap, never while taking another turn.
    pub async fn take(&self, object: &[u8]) -> MutexGuard<'_, ()> {
        self.0[slot(object)].lock().await
    }

    /// The wait after the `lost`-th lost swap (from 1): random, up to a bound that doubles with
    /// each loss from 1 ms to `LONGEST_BACK_OFF`. `draw` is a uniform draw in [0, 1).
    pub fn back_off(lost: usize, draw: f64) -> Duration {
        let bound = Duration::from_millis(1u64 << lost.saturating_sub(1).min(16)).min(LONGEST_BACK_OFF);
        bound.mul_f64(draw)
    }
}

/// The queue of the object stored under `object`: SipHash with fixed keys, so the same on every
/// run (the simulator's replays).
fn slot(object: &[u8]) -> usize {
    let mut h = std::hash::DefaultHasher::new();
    object.hash(&mut h);
    (h.finish() % TURNS as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_off_grows_to_its_bound() {
        assert_eq!(Turns::back_off(1, 0.0), Duration::ZERO);
        assert_eq!(Turns::back_off(1, 0.5), Duration::from_micros(500));
        assert_eq!(Turns::back_off(4, 0.5), Duration::from_millis(4));
        assert_eq!(Turns::back_off(7, 0.999_999), Duration::from_millis(64).mul_f64(0.999_999));
        assert!(Turns::back_off(usize::MAX, 0.999_999) < LONGEST_BACK_OFF);
    }

    #[tokio::test]
    async fn writers_of_one_object_take_turns_in_arrival_order() {
        let turns = std::sync::Arc::new(Turns::default());
        let order = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
        let first = turns.take(b"hot").await;
        let mut waiting = Vec::new();
        for i in 0..8 {
            let (turns, order) = (turns.clone(), order.clone());
            waiting.push(tokio::spawn(async move {
                let _turn = turns.take(b"hot").await;
                order.lock().push(i);
            }));
            // Each waiter queued before the next is spawned.
            for _ in 0..8 {
                tokio::task::yield_now().await;
            }
        }
        // Another object is not held up by this one's queue (unless it shares its slot).
        let other = (0..).map(|i: u32| i.to_be_bytes()).find(|k| slot(k) != slot(b"hot")).unwrap();
        drop(turns.take(&other).await);
        assert!(order.lock().is_empty());
        drop(first);
        for w in waiting {
            w.await.unwrap();
        }
        assert_eq!(*order.lock(), (0..8).collect::<Vec<_>>());
    }

}
