//! The MD5 of many uploads at once. An S3 ETag is the MD5 of every byte uploaded, and one MD5
//! stream is a chain of dependent 64-byte blocks: about 600 MB/s on one core here, most of the
//! gateway's CPU on large PUTs. Independent streams fill SIMD lanes instead: eight 1 MiB
//! chunks of eight uploads hash about five times faster together than one after another
//! (md5-many's AVX2 kernels; `cargo bench -p spindle-s3 --bench etag_md5`).
//!
//! So uploads hand their chunks to one hashing thread and go on receiving. The thread gathers
//! chunks until it has [`MAX_LANES`], or an upload waits for one of them (it needs its state
//! to hand over its next chunk, or to finish), or [`LINGER`] has passed, and hashes them in
//! one pass. Uploads arriving at network speed thus hash together, and no upload waits for
//! chunks of others that have not arrived.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use md5_many::{Md5Many, Md5State};
use tokio::sync::oneshot;

/// The most chunks hashed in one pass: md5-many's widest AVX2 kernel interleaves two chains of
/// eight lanes.
pub const MAX_LANES: usize = 16;
/// The longest a chunk waits for others to share its pass when no upload waits for it.
pub const LINGER: Duration = Duration::from_millis(20);

enum Msg {
    /// One chunk of one upload, hashed after `state`, the upload's state so far.
    Job { state: Md5State, data: Bytes, done: oneshot::Sender<Md5State> },
    /// An upload waits for its chunk: hash what has gathered now.
    Waiting,
}

/// The hashing thread's inbox. The thread ends when this is dropped and the streams it handed
/// out are finished.
pub struct Md5Lanes {
    inbox: Option<mpsc::Sender<Msg>>,
}

impl Md5Lanes {
    /// Starts the hashing thread. If it cannot be started, every stream hashes inline.
    pub fn start() -> Self {
        let (tx, rx) = mpsc::channel();
        let engine = Md5Many::new();
        let started = std::thread::Builder::new().name("s3-md5".into()).spawn(move || hash_in_passes(engine, &rx));
        match started {
            Ok(_) => Md5Lanes { inbox: Some(tx) },
            Err(e) => {
                tracing::warn!("could not start the MD5 thread ({e}); uploads hash their own bytes");
                Md5Lanes { inbox: None }
            }
        }
    }

    /// No hashing thread: every stream hashes its own bytes as they come, on the caller's
    /// thread (where no other thread may run, as in the simulator).
    pub fn inline() -> Self {
        Md5Lanes { inbox: None }
    }

    /// The MD5 of one new upload.
    pub fn stream(&self) -> Md5Stream<'_> {
        Md5Stream { lanes: self, state: Md5State::new(), pending: None }
    }
}

/// A pass's chunks: one per upload (an upload hands over its next chunk only once it has the
/// state after the previous one).
struct Pass {
    states: Vec<Md5State>,
    data: Vec<Bytes>,
    done: Vec<oneshot::Sender<Md5State>>,
}

/// The hashing thread: gathers a pass (see the module's comment), hashes it, answers.
fn hash_in_passes(engine: Md5Many, inbox: &mpsc::Receiver<Msg>) {
    let mut pass = Pass { states: Vec::with_capacity(MAX_LANES), data: Vec::with_capacity(MAX_LANES), done: Vec::with_capacity(MAX_LANES) };
    loop {
        let mut deadline: Option<Instant> = None;
        let mut now_please = false;
        while pass.data.len() < MAX_LANES {
            // Once an upload waits, only what has already arrived joins the pass.
            let msg = match deadline {
                _ if now_please => inbox.try_recv().map_err(|e| match e {
                    mpsc::TryRecvError::Empty => mpsc::RecvTimeoutError::Timeout,
                    mpsc::TryRecvError::Disconnected => mpsc::RecvTimeoutError::Disconnected,
                }),
                None => inbox.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
                Some(at) => inbox.recv_timeout(at.saturating_duration_since(Instant::now())),
            };
            match msg {
                Ok(Msg::Job { state, data, done }) => {
                    pass.states.push(state);
                    pass.data.push(data);
                    pass.done.push(done);
                    deadline.get_or_insert_with(|| Instant::now() + LINGER);
                }
                // A wait for a chunk already answered: nothing to hurry.
                Ok(Msg::Waiting) => now_please |= !pass.data.is_empty(),
                Err(mpsc::RecvTimeoutError::Timeout) => break,
                Err(mpsc::RecvTimeoutError::Disconnected) if pass.data.is_empty() => return,
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        hash_pass(engine, &mut pass.states, &pass.data);
        for (done, state) in pass.done.drain(..).zip(pass.states.drain(..)) {
            // An upload that gave up meanwhile no longer waits for its state.
            let _ = done.send(state);
        }
        pass.data.clear();
    }
}

/// Appends `data[i]` to `states[i]`, in one pass of md5-many's SIMD kernels if there are
/// several. Those kernels run eight or sixteen lanes; with fewer chunks than that md5-many
/// takes a general path that is slower than hashing the chunks one by one (`cargo bench -p
/// spindle-s3 --bench etag_md5`, the three-chunk cases), so the empty lanes are filled with copies of the longest chunk,
/// hashed into states that are thrown away.
fn hash_pass(engine: Md5Many, states: &mut Vec<Md5State>, data: &[Bytes]) {
    let real = data.len();
    match real {
        0 => return,
        1 => {
            states[0].update(&data[0]);
            return;
        }
        _ => {}
    }
    let width = if real <= MAX_LANES / 2 { MAX_LANES / 2 } else { MAX_LANES };
    let longest = (0..real).max_by_key(|&i| data[i].len()).unwrap_or(0);
    let mut inputs: Vec<&[u8]> = data.iter().map(|d| &d[..]).collect();
    for _ in real..width {
        states.push(states[longest]);
        inputs.push(&data[longest]);
    }
    engine.update_many(states, &inputs);
    states.truncate(real);
}

/// A chunk handed to the thread and not yet hashed, with what is needed to hash it inline if
/// the thread is gone.
struct Pending {
    before: Md5State,
    data: Bytes,
    hashed: oneshot::Receiver<Md5State>,
}

/// The MD5 of one upload: chunks are hashed in the order given.
pub struct Md5Stream<'a> {
    lanes: &'a Md5Lanes,
    /// Every chunk given so far, except the pending one.
    state: Md5State,
    pending: Option<Pending>,
}

impl Md5Stream<'_> {
    /// Appends `data`: hands it to the hashing thread once the previous chunk is hashed, and
    /// returns without waiting for this one.
    pub async fn update(&mut self, data: Bytes) {
        self.settle().await;
        let Some(inbox) = &self.lanes.inbox else {
            self.state.update(&data);
            return;
        };
        let (done, hashed) = oneshot::channel();
        match inbox.send(Msg::Job { state: self.state, data: data.clone(), done }) {
            Ok(()) => self.pending = Some(Pending { before: self.state, data, hashed }),
            Err(_) => self.state.update(&data),
        }
    }

    /// The digest of every chunk given.
    pub async fn finalize(mut self) -> [u8; 16] {
        self.settle().await;
        self.state.finalize()
    }

    /// Waits for the pending chunk, if any, asking the thread not to linger over it; hashes
    /// it here if the thread is gone.
    async fn settle(&mut self) {
        let Some(Pending { before, data, mut hashed }) = self.pending.take() else { return };
        let answer = match hashed.try_recv() {
            Ok(state) => Ok(state),
            Err(oneshot::error::TryRecvError::Empty) => {
                if let Some(inbox) = &self.lanes.inbox {
                    let _ = inbox.send(Msg::Waiting);
                }
                hashed.await.map_err(drop)
            }
            Err(oneshot::error::TryRecvError::Closed) => Err(()),
        };
        self.state = answer.unwrap_or_else(|()| {
            let mut state = before;
            state.update(&data);
            state
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn reference(data: &[u8]) -> [u8; 16] {
        use s3s::crypto::Checksum as _;
        let mut h = s3s::crypto::Md5::new();
        h.update(data);
        h.finalize()
    }

    /// Splits `data` at the given cut points (taken modulo its length, sorted).
    fn pieces(data: &[u8], cuts: &[usize]) -> Vec<Bytes> {
        let mut at: Vec<usize> = cuts.iter().map(|c| if data.is_empty() { 0 } else { c % data.len() }).collect();
        at.sort_unstable();
        let mut out = Vec::new();
        let mut from = 0;
        for to in at.into_iter().chain([data.len()]) {
            out.push(Bytes::copy_from_slice(&data[from..to]));
            from = to;
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Uploads hashed side by side, their pieces interleaved in one thread's passes, get
        /// the MD5 each would alone.
        #[test]
        fn streams_hashed_together_get_their_own_md5(
            uploads in proptest::collection::vec((proptest::collection::vec(any::<u8>(), 0..5000), proptest::collection::vec(0usize..5000, 0..6)), 1..20),
        ) {
            let lanes = Md5Lanes::start();
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
            let digests: Vec<[u8; 16]> = rt.block_on(async {
                let each = uploads.iter().map(|(data, cuts)| {
                    let lanes = &lanes;
                    async move {
                        let mut md5 = lanes.stream();
                        for piece in pieces(data, cuts) {
                            md5.update(piece).await;
                            tokio::task::yield_now().await;
                        }
                        md5.finalize().await
                    }
                });
                futures_util::future::join_all(each).await
            });
            for ((data, _), digest) in uploads.iter().zip(digests) {
                prop_assert_eq!(digest, reference(data));
            }
        }
    }

    /// Every pass width, with chunks of different lengths and states holding partial blocks:
    /// each chunk lands in its own state, whatever the lanes filled in.
    #[test]
    fn passes_of_every_width_hash_each_chunk_into_its_own_state() {
        let engine = Md5Many::new();
        hash_pass(engine, &mut Vec::new(), &[]);
        for real in 1..=MAX_LANES {
            let heads: Vec<Vec<u8>> = (0..real).map(|i| vec![i as u8; i * 13]).collect();
            let data: Vec<Bytes> = (0..real).map(|i| Bytes::from((0..5000 + i * 997).map(|b| (b ^ i) as u8).collect::<Vec<u8>>())).collect();
            let mut states: Vec<Md5State> = heads.iter().map(|h| {
                let mut s = Md5State::new();
                s.update(h);
                s
            }).collect();
            hash_pass(engine, &mut states, &data);
            assert_eq!(states.len(), real);
            for i in 0..real {
                let whole = [&heads[i][..], &data[i][..]].concat();
                assert_eq!(states[i].finalize(), reference(&whole), "chunk {i} of a pass of {real}");
            }
        }
    }

    /// Pieces of 1 MiB, as uploads hand them over, from more uploads than there are lanes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn full_chunks_from_many_uploads() {
        let lanes = Md5Lanes::start();
        let data: Vec<Vec<u8>> = (0..MAX_LANES + 3).map(|i| (0..(3 << 20) + i * 7).map(|b| (b * 31 + i) as u8).collect()).collect();
        let each = data.iter().map(|d| {
            let lanes = &lanes;
            async move {
                let mut md5 = lanes.stream();
                for piece in d.chunks(1 << 20) {
                    md5.update(Bytes::copy_from_slice(piece)).await;
                }
                md5.finalize().await
            }
        });
        let digests = futures_util::future::join_all(each).await;
        for (d, digest) in data.iter().zip(digests) {
            assert_eq!(digest, reference(d));
        }
    }

    /// Without the thread (it could not start, or is gone), a stream hashes its own bytes.
    #[tokio::test]
    async fn without_the_thread_a_stream_hashes_inline() {
        let lanes = Md5Lanes { inbox: None };
        let mut md5 = lanes.stream();
        md5.update(Bytes::from_static(b"hello ")).await;
        md5.update(Bytes::from_static(b"world")).await;
        assert_eq!(md5.finalize().await, reference(b"hello world"));

        let (tx, rx) = mpsc::channel();
        drop(rx);
        let gone = Md5Lanes { inbox: Some(tx) };
        let mut md5 = gone.stream();
        md5.update(Bytes::from_static(b"hello world")).await;
        assert_eq!(md5.finalize().await, reference(b"hello world"));
    }

    /// A chunk dropped unhashed (the thread died with it) is hashed inline.
    #[tokio::test]
    async fn a_piece_the_thread_dropped_is_hashed_inline() {
        let (tx, rx) = mpsc::channel::<Msg>();
        let lanes = Md5Lanes { inbox: Some(tx) };
        let mut md5 = lanes.stream();
        md5.update(Bytes::from_static(b"hello ")).await;
        drop(rx.recv().unwrap());
        md5.update(Bytes::from_static(b"world")).await;
        drop(rx);
        assert_eq!(md5.finalize().await, reference(b"hello world"));
    }
}
