//! A handful of futures polled together in the task that owns them, answers taken as they come.
//!
//! `FuturesUnordered` would do, but it wakes its own task and returns `Pending` whenever every
//! future it polled stayed pending (so as not to starve the executor). A replica request almost
//! always stays pending at its first poll, so every quorum paid a self-wake, which tokio's
//! multi-threaded scheduler treats as a yield: the task goes to the run queue and another
//! worker is woken to steal it (a futex wake, a context switch and a second poll per request).
//! A quorum's requests are few (one per replica), so polling each of them on every wake costs
//! less than that hop.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

pub struct Together<F> {
    futures: Vec<Pin<Box<F>>>,
}

impl<F: Future> Together<F> {
    pub fn new() -> Self {
        Together { futures: Vec::new() }
    }

    pub fn push(&mut self, future: F) {
        self.futures.push(Box::pin(future));
    }

    pub fn len(&self) -> usize {
        self.futures.len()
    }

    pub fn is_empty(&self) -> bool {
        self.futures.is_empty()
    }

    /// The next output of any future; `None` once none is left.
    pub async fn next(&mut self) -> Option<F::Output> {
        std::future::poll_fn(|cx| self.poll_next(cx)).await
    }

    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<F::Output>> {
        if self.futures.is_empty() {
            return Poll::Ready(None);
        }
        for i in 0..self.futures.len() {
            if let Poll::Ready(out) = self.futures[i].as_mut().poll(cx) {
                // The order of the rest does not matter: each is polled on every wake.
                drop(self.futures.swap_remove(i));
                return Poll::Ready(Some(out));
            }
        }
        Poll::Pending
    }
}

impl<F: Future> Default for Together<F> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn answers_come_as_they_complete_and_none_is_lost() {
        let mut t = Together::new();
        for ms in [30u64, 10, 20] {
            t.push(async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                ms
            });
        }
        assert_eq!(t.len(), 3);
        let mut got = Vec::new();
        while let Some(ms) = t.next().await {
            got.push(ms);
        }
        assert_eq!(got, vec![10, 20, 30]);
        assert!(t.is_empty());
        assert_eq!(t.next().await, None);
    }

    #[tokio::test]
    async fn a_future_pushed_while_others_wait_is_polled() {
        let (tx, rx) = tokio::sync::oneshot::channel::<u8>();
        let mut t: Together<Pin<Box<dyn Future<Output = u8> + Send>>> = Together::new();
        t.push(Box::pin(async move { rx.await.unwrap_or(0) }));
        t.push(Box::pin(async { 7 }));
        assert_eq!(t.next().await, Some(7));
        tx.send(9).unwrap();
        assert_eq!(t.next().await, Some(9));
    }

    /// The reason for this type: a pending future does not make its task wake itself.
    #[test]
    fn a_pending_future_does_not_wake_its_task() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        use std::task::Wake;
        struct Count(AtomicUsize);
        impl Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = std::task::Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let mut t = Together::new();
        t.push(std::future::pending::<()>());
        assert!(t.poll_next(&mut cx).is_pending());
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
    }
}
