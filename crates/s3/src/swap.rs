//! The swap of an object's record (`Core::commit`, `Core::remove`): turns at it, the wait after
//! a lost one, and what a raced one tried (`raced.rs` settles it).
//!
//! Writes and deletes of one object through one gateway queue for its compare-and-swap rather
//! than race each other's: a hot key written by many clients of one gateway then never starves
//! one of them of its swap (tokio's mutex is first come, first served). Writes through other
//! gateways still race. A swap that lost cleanly (`Mismatch`: another took the version) reads
//! again at once, as even a chance as the others'; one that dueled (`Contended`: replicas
//! split, perhaps nobody won) waits a random while first (`Duels`), so that duellists part.

use std::hash::{Hash, Hasher};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{Mutex, MutexGuard};

use crate::kv::KvError;
use crate::records::Manifest;

/// Queues objects share: a fixed table, its memory bounded whatever the keys; two objects
/// sharing one take turns, which costs nothing but a wait of one swap.
pub const TURNS: usize = 1024;
/// The longest a swap that dueled waits before it tries again.
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
}

/// The duels of one write's or one delete's swap: how many, and whether its last try was one.
#[derive(Default)]
pub struct Duels {
    count: usize,
    last: bool,
}

impl Duels {
    /// The last try dueled.
    pub fn dueled(&mut self) {
        self.count += 1;
        self.last = true;
    }

    /// How many tries dueled.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Before the next try: after a duel, a random wait (`draw` uniform in [0, 1)) up to a bound
    /// that doubles with each duel from 1 ms to `LONGEST_BACK_OFF`; none otherwise.
    pub fn wait(&mut self, draw: f64) -> Option<Duration> {
        if !std::mem::take(&mut self.last) {
            return None;
        }
        let bound = Duration::from_millis(1u64 << (self.count - 1).min(16)).min(LONGEST_BACK_OFF);
        Some(bound.mul_f64(draw))
    }
}

/// Makes `attempt` until it does not duel (`KvError::Contended`), or has dueled `most` times
/// (the last duel's error then), waiting after each duel as `Duels::wait` says (`draw`: uniform
/// in [0, 1), drawn before every try).
pub(crate) async fn past_duels<T, F>(most: usize, mut draw: impl FnMut() -> f64, mut attempt: impl FnMut() -> F) -> Result<T, KvError>
where
    F: std::future::Future<Output = Result<T, KvError>>,
{
    let mut duels = Duels::default();
    loop {
        if let Some(wait) = duels.wait(draw()) {
            tokio::time::sleep(wait).await;
        }
        match attempt().await {
            Err(KvError::Contended(_)) if duels.count() < most => duels.dueled(),
            done => return done,
        }
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
    fn only_a_duel_waits_and_its_bound_doubles_to_the_longest() {
        let mut duels = Duels::default();
        assert_eq!(duels.wait(0.5), None, "a first try, or one after a clean loss, does not wait");
        duels.dueled();
        assert_eq!(duels.wait(0.5), Some(Duration::from_micros(500)));
        assert_eq!(duels.wait(0.5), None, "one wait per duel");
        for _ in 0..3 {
            duels.dueled();
        }
        assert_eq!(duels.wait(0.5), Some(Duration::from_millis(4)));
        for _ in 0..100 {
            duels.dueled();
        }
        assert_eq!(duels.wait(0.999_999), Some(LONGEST_BACK_OFF.mul_f64(0.999_999)));
    }

    fn contended() -> KvError {
        KvError::Contended(spindle_cluster::ClusterError::AlreadyExists("a duel".into()))
    }

    /// `past_duels` over answers given in turn (the last again once they run out): the result,
    /// the tries made and the time waited.
    async fn tries(most: usize, answers: Vec<fn() -> Result<u8, KvError>>) -> (Result<u8, KvError>, usize, Duration) {
        let made = std::cell::Cell::new(0);
        let started = tokio::time::Instant::now();
        let done = past_duels(
            most,
            || 0.5,
            || {
                assert!(made.get() < 100, "tries without end");
                let answer = answers[made.get().min(answers.len() - 1)];
                made.set(made.get() + 1);
                async move { answer() }
            },
        )
        .await;
        (done, made.get(), started.elapsed())
    }

    /// The paused clock's timers fire on whole milliseconds: each of `waits` may round up.
    fn assert_waited(waited: Duration, exact: Duration, waits: u32) {
        assert!(waited >= exact && waited <= exact + Duration::from_millis(1) * waits, "waited {waited:?}, not {exact:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_dueling_try_is_made_again_after_a_wait_up_to_its_bound() {
        // Three duels, then done: waits of half of 1, 2 and 4 ms between the four tries.
        let (done, made, waited) = tries(8, vec![|| Err(contended()), || Err(contended()), || Err(contended()), || Ok(7)]).await;
        assert_eq!((done.ok(), made), (Some(7), 4));
        assert_waited(waited, Duration::from_micros(3_500), 3);
        // Always dueling: the bound's tries and one more, then the duel's error.
        let (done, made, waited) = tries(8, vec![|| Err(contended())]).await;
        assert!(matches!(done, Err(KvError::Contended(_))), "{done:?}");
        assert_eq!(made, 9);
        // 0.5 × (1 + 2 + 4 + 8 + 16 + 32 + 64 + 64) ms.
        assert_waited(waited, Duration::from_micros(95_500), 8);
        // A clean loss or any other failure is given back at once.
        let (done, made, waited) = tries(8, vec![|| Err(KvError::Mismatch)]).await;
        assert!(matches!(done, Err(KvError::Mismatch)), "{done:?}");
        assert_eq!((made, waited), (1, Duration::ZERO));
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
