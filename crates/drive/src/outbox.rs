//! What a connection has to send: the responses gathered for one vectored write, and the
//! backlog of answers not yet written, which bounds what a client that does not read can make
//! the drive hold. In the outbox, frame heads and small values are copied into one buffer;
//! larger values are sent from the buffers the engine returned them in, so a 4 KiB or 1 MiB
//! value reaches the socket without a copy in user space.

use std::io::IoSlice;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::Notify;

/// Values at least this large are written from their own buffer instead of being copied.
pub const SEPARATE_VALUE_MIN: usize = 1024;
/// Most slices handed to one `writev` (Linux allows 1024).
const MAX_SLICES: usize = 256;

#[derive(Debug)]
pub struct Outbox {
    inline: BytesMut,
    /// End of the inline bytes already covered by `parts`.
    marked: usize,
    parts: Vec<Part>,
    len: usize,
}

#[derive(Debug)]
enum Part {
    /// `inline[previous end..end]`.
    Inline { end: usize },
    Value(Bytes),
}

impl Outbox {
    pub fn with_capacity(inline: usize) -> Self {
        Outbox { inline: BytesMut::with_capacity(inline), marked: 0, parts: Vec::new(), len: 0 }
    }

    /// Bytes waiting to be written.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends one frame: its head, written by `encode_head`, then `value`.
    pub fn push(&mut self, encode_head: impl FnOnce(&mut BytesMut), value: &Bytes) {
        let before = self.inline.len();
        encode_head(&mut self.inline);
        let separate = value.len() >= SEPARATE_VALUE_MIN;
        if !separate {
            self.inline.extend_from_slice(value);
        }
        self.len += self.inline.len() - before;
        if separate {
            self.mark_inline();
            self.parts.push(Part::Value(value.clone()));
            self.len += value.len();
        }
    }

    fn mark_inline(&mut self) {
        if self.inline.len() > self.marked {
            self.marked = self.inline.len();
            self.parts.push(Part::Inline { end: self.marked });
        }
    }

    /// Writes everything gathered, in order, and empties the outbox.
    pub async fn write_to<W: AsyncWrite + Unpin>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.mark_inline();
        let mut start = 0;
        let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(self.parts.len());
        for part in &self.parts {
            match part {
                Part::Inline { end } => {
                    slices.push(IoSlice::new(&self.inline[start..*end]));
                    start = *end;
                }
                Part::Value(value) => slices.push(IoSlice::new(value)),
            }
        }
        for window in slices.chunks_mut(MAX_SLICES) {
            let mut pending = window;
            while !pending.is_empty() {
                let n = w.write_vectored(pending).await?;
                if n == 0 {
                    return Err(std::io::ErrorKind::WriteZero.into());
                }
                IoSlice::advance_slices(&mut pending, n);
            }
        }
        drop(slices);
        self.inline.clear();
        self.parts.clear();
        self.marked = 0;
        self.len = 0;
        Ok(())
    }
}

/// Bytes of answers a connection has queued and not yet written to its socket. The reader
/// stops taking requests while it is over its limit, so a client that sends and never reads
/// holds at most about the limit (plus the answers of requests already running) in the drive,
/// whatever its requests are answered with.
#[derive(Debug)]
pub struct Backlog {
    bytes: AtomicUsize,
    limit: usize,
    /// The socket is gone: nothing will drain the backlog any more.
    closed: AtomicBool,
    drained: Notify,
}

/// The socket's writer stopped while the reader waited for the backlog to drain.
#[derive(Debug)]
pub struct WriterGone;

impl Backlog {
    pub fn new(limit: usize) -> Self {
        Backlog { bytes: AtomicUsize::new(0), limit, closed: AtomicBool::new(false), drained: Notify::new() }
    }

    pub fn add(&self, bytes: usize) {
        self.bytes.fetch_add(bytes, Ordering::AcqRel);
    }

    /// `bytes` were written (or dropped with the socket).
    pub fn remove(&self, bytes: usize) {
        let before = self.bytes.fetch_sub(bytes, Ordering::AcqRel);
        if before > self.limit && before - bytes <= self.limit {
            self.drained.notify_waiters();
        }
    }

    pub fn is_full(&self) -> bool {
        self.bytes.load(Ordering::Acquire) > self.limit
    }

    /// Marks the writer gone and wakes a waiting reader.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.drained.notify_waiters();
    }

    /// Waits until the backlog is within its limit.
    pub async fn wait_for_room(&self) -> Result<(), WriterGone> {
        loop {
            let drained = self.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if self.closed.load(Ordering::Acquire) {
                return Err(WriterGone);
            }
            if !self.is_full() {
                return Ok(());
            }
            drained.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    /// A writer that accepts at most `step` bytes per call, so partial vectored writes happen.
    struct Trickle {
        out: Vec<u8>,
        step: usize,
    }

    impl AsyncWrite for Trickle {
        fn poll_write(mut self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
            let n = buf.len().min(self.step);
            self.out.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }

        fn poll_write_vectored(mut self: Pin<&mut Self>, _: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<std::io::Result<usize>> {
            let mut n = 0;
            for b in bufs {
                let take = b.len().min(self.step - n);
                self.out.extend_from_slice(&b[..take]);
                n += take;
                if n == self.step {
                    break;
                }
            }
            Poll::Ready(Ok(n))
        }

        fn is_write_vectored(&self) -> bool {
            true
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_full_backlog_holds_the_reader_until_drained_or_closed() {
        let backlog = std::sync::Arc::new(Backlog::new(100));
        backlog.add(150);
        assert!(backlog.is_full());
        let waiter = tokio::spawn({
            let backlog = backlog.clone();
            async move { backlog.wait_for_room().await.is_ok() }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        backlog.remove(60);
        assert!(tokio::time::timeout(std::time::Duration::from_secs(5), waiter).await.unwrap().unwrap());
        // A writer that stops wakes the reader with an error instead of leaving it waiting.
        backlog.add(100);
        let waiter = tokio::spawn({
            let backlog = backlog.clone();
            async move { backlog.wait_for_room().await.is_ok() }
        });
        backlog.close();
        assert!(!tokio::time::timeout(std::time::Duration::from_secs(5), waiter).await.unwrap().unwrap());
    }

    proptest! {
        #[test]
        fn writes_frames_in_order_byte_exactly(frames in proptest::collection::vec(
            (proptest::collection::vec(any::<u8>(), 0..40), 0..3000usize), 0..20),
            step in 1..5000usize, rounds in 1..3usize) {
            let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let mut outbox = Outbox::with_capacity(64);
            let mut w = Trickle { out: Vec::new(), step };
            let mut expected = Vec::new();
            for _ in 0..rounds {
                for (i, (head, value_len)) in frames.iter().enumerate() {
                    let value = Bytes::from(vec![i as u8; *value_len]);
                    outbox.push(|b| b.extend_from_slice(head), &value);
                    expected.extend_from_slice(head);
                    expected.extend_from_slice(&value);
                }
                prop_assert_eq!(outbox.len(), expected.len() - w.out.len());
                runtime.block_on(outbox.write_to(&mut w)).unwrap();
                prop_assert!(outbox.is_empty());
                prop_assert_eq!(&w.out, &expected);
            }
        }
    }
}
