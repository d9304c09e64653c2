//! An upload's body cut into chunks of one size (the last shorter), copying as little as it
//! can: a body frame that covers a whole chunk is sliced, not copied, and a chunk assembled
//! from smaller frames is copied once into a buffer of exactly its size (growing one as the
//! frames came copied each chunk again, about once more per byte).

use std::collections::VecDeque;

use bytes::{Buf, Bytes, BytesMut};

pub struct Chunker {
    chunk: usize,
    /// The chunk being assembled from frames smaller than it.
    buf: BytesMut,
    /// Whole chunks not yet taken.
    ready: VecDeque<Bytes>,
}

impl Chunker {
    pub fn new(chunk: usize) -> Chunker {
        Chunker { chunk: chunk.max(1), buf: BytesMut::new(), ready: VecDeque::new() }
    }

    /// Takes in the body's next frame.
    pub fn push(&mut self, mut piece: Bytes) {
        while !piece.is_empty() {
            if self.buf.is_empty() {
                if piece.len() >= self.chunk {
                    self.ready.push_back(piece.split_to(self.chunk));
                    continue;
                }
                if self.buf.capacity() < self.chunk {
                    self.buf = BytesMut::with_capacity(self.chunk);
                }
            }
            let n = piece.len().min(self.chunk - self.buf.len());
            self.buf.extend_from_slice(&piece[..n]);
            piece.advance(n);
            if self.buf.len() == self.chunk {
                self.ready.push_back(self.buf.split().freeze());
            }
        }
    }

    /// The next whole chunk; once the body has ended (`ended`), then the short last one.
    pub fn next_chunk(&mut self, ended: bool) -> Option<Bytes> {
        self.ready.pop_front().or_else(|| (ended && !self.buf.is_empty()).then(|| self.buf.split().freeze()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any frames give back the body, in chunks of the size, the last one shorter.
        #[test]
        fn frames_become_the_body_in_chunks(frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..12), chunk in 1usize..17) {
            let mut c = Chunker::new(chunk);
            let mut got: Vec<Bytes> = Vec::new();
            for f in &frames {
                c.push(Bytes::from(f.clone()));
                while let Some(b) = c.next_chunk(false) {
                    got.push(b);
                }
            }
            while let Some(b) = c.next_chunk(true) {
                got.push(b);
            }
            let body: Vec<u8> = frames.concat();
            prop_assert_eq!(got.concat(), body.clone());
            prop_assert_eq!(got.len(), body.len().div_ceil(chunk));
            for (i, b) in got.iter().enumerate() {
                if i + 1 < got.len() {
                    prop_assert_eq!(b.len(), chunk);
                } else {
                    prop_assert!(!b.is_empty() && b.len() <= chunk);
                }
            }
        }
    }

    #[test]
    fn a_frame_of_whole_chunks_is_sliced_not_copied() {
        let frame = Bytes::from(vec![7u8; 10]);
        let mut c = Chunker::new(4);
        c.push(frame.clone());
        let first = c.next_chunk(false).unwrap();
        assert_eq!(first.as_ptr(), frame.as_ptr());
        assert_eq!(c.next_chunk(false).unwrap().as_ptr(), frame[4..].as_ptr());
        assert_eq!(c.next_chunk(false), None);
        assert_eq!(c.next_chunk(true).unwrap(), Bytes::from(vec![7u8; 2]));
    }
}
