//! Group commit: callers that need durability register a callback; one thread runs a sync
//! for everyone registered so far, and callers arriving during that sync share the next one.
//! So N concurrent WRITETHROUGH writers cost about one fsync per round, not N.

use std::sync::Arc;
use std::thread;

use parking_lot::{Condvar, Mutex};

use crate::Result;

/// Called once the writes that preceded the registration are durable (or failed to be).
pub type DurableCallback = Box<dyn FnOnce(Result<()>) + Send>;

type SyncFn = Box<dyn Fn() -> Result<()> + Send + Sync>;

struct Shared {
    waiters: Mutex<Queue>,
    wake: Condvar,
}

#[derive(Default)]
struct Queue {
    callbacks: Vec<DurableCallback>,
    stopping: bool,
}

/// Handle to the syncing thread; dropping it lets the thread finish pending syncs and exit.
pub struct GroupCommit {
    shared: Arc<Shared>,
    thread: Option<thread::JoinHandle<()>>,
}

impl GroupCommit {
    pub fn start(name: &str, sync: SyncFn) -> std::io::Result<Self> {
        let shared = Arc::new(Shared { waiters: Mutex::new(Queue::default()), wake: Condvar::new() });
        let worker = shared.clone();
        let thread = thread::Builder::new().name(name.into()).spawn(move || run(&worker, &sync))?;
        Ok(GroupCommit { shared, thread: Some(thread) })
    }

    pub fn register(&self, done: DurableCallback) {
        let mut queue = self.shared.waiters.lock();
        queue.callbacks.push(done);
        self.shared.wake.notify_one();
    }
}

fn run(shared: &Shared, sync: &SyncFn) {
    loop {
        let batch = {
            let mut queue = shared.waiters.lock();
            while queue.callbacks.is_empty() && !queue.stopping {
                shared.wake.wait(&mut queue);
            }
            if queue.callbacks.is_empty() {
                return;
            }
            std::mem::take(&mut queue.callbacks)
        };
        // Every registered caller's writes returned before it registered, so one sync started
        // now covers all of them.
        let result = sync();
        for done in batch {
            done(result.clone());
        }
    }
}

impl Drop for GroupCommit {
    fn drop(&mut self) {
        self.shared.waiters.lock().stopping = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[test]
    fn concurrent_waiters_share_syncs() {
        let syncs = Arc::new(AtomicUsize::new(0));
        let counter = syncs.clone();
        let gc = Arc::new(
            GroupCommit::start(
                "test-sync",
                Box::new(move || {
                    counter.fetch_add(1, Ordering::SeqCst);
                    thread::sleep(Duration::from_millis(20));
                    Ok(())
                }),
            )
            .unwrap(),
        );
        let (tx, rx) = std::sync::mpsc::channel();
        for _ in 0..32 {
            let tx = tx.clone();
            gc.register(Box::new(move |r| tx.send(r).unwrap()));
        }
        for _ in 0..32 {
            rx.recv_timeout(Duration::from_secs(10)).unwrap().unwrap();
        }
        // The first registration may start a sync alone; everyone else shares at most one more.
        assert!(syncs.load(Ordering::SeqCst) <= 2, "{} syncs for 32 waiters", syncs.load(Ordering::SeqCst));
    }

    #[test]
    fn drop_finishes_pending_callbacks() {
        let gc = GroupCommit::start("test-sync", Box::new(|| Ok(()))).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        gc.register(Box::new(move |r| tx.send(r).unwrap()));
        drop(gc);
        assert_eq!(rx.recv().unwrap(), Ok(()));
    }
}
