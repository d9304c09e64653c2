//! Request priorities: a request does not start while requests of a higher priority are
//! waiting or running on the drive ("all activity at a higher priority will execute before that
//! of lower priority traffic"). Requests of equal priority do not wait for each other, so a
//! drive whose clients never set priorities pays a handful of atomic loads per request.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// The protocol's priorities run from 1 (LOWEST) to 9 (HIGHEST); NORMAL is 5.
const LEVELS: usize = 10;
pub const NORMAL: i32 = 5;

fn level_of(priority: Option<i32>) -> usize {
    priority.unwrap_or(NORMAL).clamp(0, LEVELS as i32 - 1) as usize
}

#[derive(Default)]
pub struct PriorityGate {
    active: [AtomicU32; LEVELS],
    changed: Notify,
}

/// Held from arrival until the request has run (MEDIAOPTIMIZE, the drive's own bounded work
/// beside its connection, takes it along; a P2P push, which waits for a peer the client chose,
/// and waits for the client itself, such as for an in-flight permit or a batch slot, hold
/// none); releases lower priorities when dropped.
pub struct Ticket {
    gate: Arc<PriorityGate>,
    level: usize,
}

impl PriorityGate {
    fn higher_active(&self, level: usize) -> bool {
        self.active[level + 1..].iter().any(|c| c.load(Ordering::Acquire) > 0)
    }

    /// Whether a request of `priority` would wait in [`PriorityGate::enter`] now.
    pub fn would_wait(&self, priority: Option<i32>) -> bool {
        self.higher_active(level_of(priority))
    }

    /// Registers a request of `priority` and waits until no higher priority is active.
    pub async fn enter(self: &Arc<Self>, priority: Option<i32>) -> Ticket {
        let level = level_of(priority);
        self.active[level].fetch_add(1, Ordering::AcqRel);
        while self.higher_active(level) {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if !self.higher_active(level) {
                break;
            }
            changed.await;
        }
        Ticket { gate: self.clone(), level }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if self.gate.active[self.level].fetch_sub(1, Ordering::AcqRel) == 1 {
            self.gate.changed.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test]
    async fn lower_priorities_wait_for_higher_ones() {
        let gate = Arc::new(PriorityGate::default());
        let high = gate.enter(Some(9)).await;
        // Equal and higher priorities pass at once.
        drop(gate.enter(Some(9)).await);
        let low = tokio::spawn({
            let gate = gate.clone();
            async move {
                let _t = gate.enter(Some(1)).await;
            }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!low.is_finished(), "a LOWEST request ran while a HIGHEST one was active");
        drop(high);
        tokio::time::timeout(Duration::from_secs(5), low).await.expect("released").unwrap();
        // Nothing active: anything passes.
        drop(gate.enter(None).await);
    }
}
