//! Write requests: what the single writer of an engine applies, in submission order.

use bytes::Bytes;

use crate::{Check, Meta, Result};

/// Called with the outcome of a write (or of a sync).
pub type Callback = Box<dyn FnOnce(Result<()>) + Send>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOp {
    Put { key: Bytes, value: Bytes, meta: Meta, check: Check },
    Delete { key: Bytes, check: Check },
    /// Writes nothing; with `sync`, completes once every earlier write is durable.
    Flush,
    /// Removes every entry (PIN erase). `secure` also rewrites the store so that no table or
    /// blob file holding the old data is left in the data directory.
    Erase { secure: bool },
    /// Puts and deletes applied atomically: all of them or, if one fails its check, none
    /// ([`crate::Error::BatchFailed`] names it). Checks see the batch's own earlier operations.
    Batch(Vec<WriteOp>),
}

pub struct WriteRequest {
    pub op: WriteOp,
    /// Acknowledge only once durable (WRITETHROUGH, FLUSH).
    pub sync: bool,
    /// The write is visible to readers (or failed).
    pub on_applied: Option<Callback>,
    /// The write is acknowledged: applied, and durable if `sync`.
    pub on_done: Callback,
}

impl WriteRequest {
    /// Answers the request with `result`: applied (or failed), then acknowledged.
    pub fn finish(mut self, result: Result<()>) {
        self.answer(result);
    }

    /// Answers the request now, if it has not been: its callbacks are replaced by ones that
    /// do nothing, so that dropping it later answers nothing twice.
    fn answer(&mut self, result: Result<()>) {
        if let Some(applied) = self.on_applied.take() {
            applied(result.clone());
        }
        let done = std::mem::replace(&mut self.on_done, Box::new(|_| {}));
        done(result);
    }
}

/// A request dropped without an answer (the writer thread panicked outside the code that
/// catches it, say, or its queue was dropped with requests in it) is answered with an error,
/// so that no client waits for ever. An answered request's callbacks do nothing by then.
impl Drop for WriteRequest {
    fn drop(&mut self) {
        let error = crate::Error::Stopped(
            "the engine's writer stopped before answering this write, which may or may not have been applied: restart the drive"
                .into(),
        );
        // Possibly while unwinding: a callback that panics must not abort the process.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.answer(Err(error))));
    }
}

impl WriteOp {
    /// The key a put or delete writes.
    pub fn key(&self) -> Option<&Bytes> {
        match self {
            WriteOp::Put { key, .. } | WriteOp::Delete { key, .. } => Some(key),
            WriteOp::Flush | WriteOp::Batch(_) | WriteOp::Erase { .. } => None,
        }
    }

    /// Bytes this operation adds to the store, for batching limits.
    pub fn footprint(&self) -> usize {
        match self {
            WriteOp::Put { key, value, meta, .. } => key.len() + value.len() + meta.version.len() + meta.tag.len(),
            WriteOp::Delete { key, .. } => key.len(),
            WriteOp::Flush | WriteOp::Erase { .. } => 0,
            WriteOp::Batch(ops) => ops.iter().map(WriteOp::footprint).sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request that records its answers.
    fn recorded(answers: &std::sync::mpsc::Sender<(&'static str, bool)>) -> WriteRequest {
        let (applied, done) = (answers.clone(), answers.clone());
        WriteRequest {
            op: WriteOp::Flush,
            sync: true,
            on_applied: Some(Box::new(move |r| { let _ = applied.send(("applied", r.is_ok())); })),
            on_done: Box::new(move |r| { let _ = done.send(("done", r.is_ok())); }),
        }
    }

    /// Review H8: a writer thread that panics outside the code that catches it (a reopening's
    /// assertion, `erase_stopped`, `wait_for_write_buffer`) used to drop its group with the
    /// callbacks unanswered, and the clients waited for ever. Dropping them now answers them.
    #[test]
    fn requests_dropped_by_a_panicking_writer_are_answered_with_an_error() {
        let (tx, rx) = std::sync::mpsc::channel();
        let group = vec![recorded(&tx), recorded(&tx)];
        drop(tx);
        let writer = std::thread::spawn(move || {
            let _group = group;
            panic!("injected: the writer dies holding its group");
        });
        assert!(writer.join().is_err());
        let answers: Vec<_> = rx.iter().collect();
        assert_eq!(answers, vec![("applied", false), ("done", false), ("applied", false), ("done", false)]);
    }

    /// An answered request is answered once: dropping it afterwards says nothing more.
    #[test]
    fn an_answered_request_is_answered_once() {
        let (tx, rx) = std::sync::mpsc::channel();
        recorded(&tx).finish(Ok(()));
        drop(tx);
        assert_eq!(rx.iter().collect::<Vec<_>>(), vec![("applied", true), ("done", true)]);
    }
}
