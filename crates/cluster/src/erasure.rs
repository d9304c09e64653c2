//! Erasure codes: a stripe of bytes cut into `data` shards and `parity` shards computed from
//! them (Reed-Solomon over GF(2^8), `reed-solomon-erasure` with its SIMD kernels), any `data` of which give the stripe
//! back. Each shard carries a header with its place in the stripe and a CRC-32C of its bytes,
//! so that a shard damaged on a drive (bit rot, a torn write) is found and treated as missing,
//! never decoded into wrong bytes.
//!
//! A shard on a drive: `SHARD_MAGIC` (4) | format (1) | data (1) | parity (1) | index (1) |
//! stripe length (u32 BE) | CRC-32C of the payload (u32 BE) | payload (`shard_len` bytes).

use bytes::{BufMut, Bytes, BytesMut};
use serde::{Deserialize, Serialize};

/// A drive's largest value (the protocol's published limit): a shard is one.
const MAX_VALUE_LEN: usize = spindle_proto::limits::MAX_VALUE_SIZE as usize;

/// Marks a value as an erasure-coded shard.
const SHARD_MAGIC: &[u8; 4] = b"SPEC";
/// The shard format this code writes and reads.
const SHARD_FORMAT: u8 = 1;
/// Bytes of a shard's header.
pub const SHARD_HEADER: usize = 16;
/// The largest shard payload: a shard is one drive value.
pub const MAX_SHARD: usize = MAX_VALUE_LEN - SHARD_HEADER;
/// Most data shards of a code, and most parity shards: wider stripes cost every read more
/// round trips than their overhead saves (Backblaze's 17+3 is about the widest in use).
pub const MAX_DATA: u8 = 32;
pub const MAX_PARITY: u8 = 16;

thread_local! {
    /// Each thread's coders by shape, kept: building one inverts a matrix.
    static CODERS: std::cell::RefCell<std::collections::HashMap<(u8, u8), std::rc::Rc<reed_solomon_erasure::galois_8::ReedSolomon>>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// A code: `data` shards hold the stripe, `parity` more are computed from them; any `data` of
/// the `data + parity` give the stripe back, so a stripe survives the loss of `parity` drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Code {
    pub data: u8,
    pub parity: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodeError {
    #[error("an erasure code is DATA+PARITY with 1 to {MAX_DATA} data and 1 to {MAX_PARITY} parity shards, not {0:?}")]
    Shape(String),
    #[error("a stripe of {len} bytes is larger than {max} ({data} shards of at most {MAX_SHARD} bytes)")]
    StripeTooLarge { len: usize, max: usize, data: u8 },
    #[error("shard {index}: {reason}")]
    BadShard { index: usize, reason: String },
    #[error("{have} good shards of a stripe that needs {need}")]
    TooFew { have: usize, need: usize },
    #[error("the code library refused: {0}")]
    Library(String),
}

impl std::str::FromStr for Code {
    type Err = CodeError;

    /// `4+2`: four data shards, two parity.
    fn from_str(s: &str) -> Result<Code, CodeError> {
        let shape = || CodeError::Shape(s.to_string());
        let (d, p) = s.split_once('+').ok_or_else(shape)?;
        let code = Code { data: d.trim().parse().map_err(|_| shape())?, parity: p.trim().parse().map_err(|_| shape())? };
        code.check().map_err(|_| shape())?;
        Ok(code)
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}+{}", self.data, self.parity)
    }
}

impl Code {
    pub fn check(&self) -> Result<(), CodeError> {
        if !(1..=MAX_DATA).contains(&self.data) || !(1..=MAX_PARITY).contains(&self.parity) {
            return Err(CodeError::Shape(self.to_string()));
        }
        Ok(())
    }

    /// Shards per stripe: the drives a stripe is spread over.
    pub fn width(&self) -> usize {
        usize::from(self.data) + usize::from(self.parity)
    }

    /// The largest stripe this code takes.
    pub fn max_stripe(&self) -> usize {
        usize::from(self.data) * MAX_SHARD
    }

    /// Raw bytes stored per byte of data (ignoring headers and padding).
    pub fn overhead(&self) -> f64 {
        self.width() as f64 / f64::from(self.data)
    }

    /// Payload bytes of each shard of a stripe of `len` bytes: an equal share, at least one
    /// (an empty stripe still has shards, so that its existence is recorded like any other).
    pub fn shard_len(&self, len: usize) -> usize {
        len.div_ceil(usize::from(self.data)).max(1)
    }

    /// The `width()` shards of `stripe`, header included, in index order (data first).
    pub fn encode(&self, stripe: &[u8]) -> Result<Vec<Bytes>, CodeError> {
        if stripe.len() > self.max_stripe() {
            return Err(CodeError::StripeTooLarge { len: stripe.len(), max: self.max_stripe(), data: self.data });
        }
        let shard = self.shard_len(stripe.len());
        let data = usize::from(self.data);
        // Whole shards straight from the stripe; only the shards past its end are padded.
        let full = (stripe.len() / shard).min(data);
        let mut tail = vec![0u8; (data - full) * shard];
        let rest = &stripe[full * shard..];
        tail[..rest.len()].copy_from_slice(rest);
        let originals: Vec<&[u8]> = stripe[..full * shard].chunks(shard).chain(tail.chunks(shard)).collect();
        let mut parity = vec![vec![0u8; shard]; usize::from(self.parity)];
        self.coder()?.encode_sep(&originals, &mut parity).map_err(|e| CodeError::Library(format!("{e:?}")))?;
        let out = originals.iter().copied().chain(parity.iter().map(Vec::as_slice)).enumerate().map(|(i, payload)| self.frame(i, stripe.len(), payload)).collect();
        Ok(out)
    }

    /// This thread's coder for this code.
    fn coder(&self) -> Result<std::rc::Rc<reed_solomon_erasure::galois_8::ReedSolomon>, CodeError> {
        CODERS.with_borrow_mut(|coders| {
            if let Some(c) = coders.get(&(self.data, self.parity)) {
                return Ok(c.clone());
            }
            let c = std::rc::Rc::new(reed_solomon_erasure::galois_8::ReedSolomon::new(usize::from(self.data), usize::from(self.parity)).map_err(|e| CodeError::Library(format!("{e:?}")))?);
            coders.insert((self.data, self.parity), c.clone());
            Ok(c)
        })
    }

    fn frame(&self, index: usize, stripe_len: usize, payload: &[u8]) -> Bytes {
        let mut b = BytesMut::with_capacity(SHARD_HEADER + payload.len());
        b.put_slice(SHARD_MAGIC);
        b.put_u8(SHARD_FORMAT);
        b.put_u8(self.data);
        b.put_u8(self.parity);
        b.put_u8(index as u8);
        b.put_u32(stripe_len as u32);
        b.put_u32(crc_fast::crc32_iscsi(payload));
        b.put_slice(payload);
        b.freeze()
    }

    /// The payload of shard `index` of a stripe of `stripe_len` bytes, if `value` is that shard
    /// whole: header, place and checksum all as this code wrote them.
    pub fn verify(&self, index: usize, stripe_len: usize, value: &Bytes) -> Result<Bytes, CodeError> {
        let bad = |reason: String| CodeError::BadShard { index, reason };
        if value.len() < SHARD_HEADER {
            return Err(bad(format!("{} bytes, shorter than a header", value.len())));
        }
        let h = &value[..SHARD_HEADER];
        if &h[..4] != SHARD_MAGIC || h[4] != SHARD_FORMAT {
            return Err(bad("not a shard of this format".into()));
        }
        if (h[5], h[6], usize::from(h[7])) != (self.data, self.parity, index) {
            return Err(bad(format!("written as shard {} of {}+{}", h[7], h[5], h[6])));
        }
        let len = u32::from_be_bytes([h[8], h[9], h[10], h[11]]) as usize;
        if len != stripe_len {
            return Err(bad(format!("of a stripe of {len} bytes, not {stripe_len}")));
        }
        let payload = value.slice(SHARD_HEADER..);
        if payload.len() != self.shard_len(stripe_len) {
            return Err(bad(format!("{} payload bytes, not {}", payload.len(), self.shard_len(stripe_len))));
        }
        let crc = u32::from_be_bytes([h[12], h[13], h[14], h[15]]);
        if crc_fast::crc32_iscsi(&payload) != crc {
            return Err(bad("checksum mismatch (the bytes changed on the drive)".into()));
        }
        Ok(payload)
    }

    /// The stripe of `stripe_len` bytes from verified payloads (`shards[i]`: shard `i`'s, if
    /// good). With every data shard there is nothing to decode, and nothing is copied: the
    /// stripe is those payloads, cut at its length.
    pub fn decode(&self, stripe_len: usize, shards: &[Option<Bytes>]) -> Result<Stripe, CodeError> {
        let data = usize::from(self.data);
        let have = shards.iter().filter(|s| s.is_some()).count();
        if have < data || shards.len() < data {
            return Err(CodeError::TooFew { have, need: data });
        }
        let pieces: Vec<Bytes> = if shards[..data].iter().all(Option::is_some) {
            shards[..data].iter().flatten().cloned().collect()
        } else {
            // The library rebuilds into owned buffers: the shards at hand are copied in (a
            // degraded read's cost, small beside the decode).
            let mut all: Vec<Option<Vec<u8>>> = (0..self.width()).map(|i| shards.get(i).cloned().flatten().map(|b| b.to_vec())).collect();
            self.coder()?.reconstruct_data(&mut all).map_err(|e| CodeError::Library(format!("{e:?}")))?;
            all.into_iter().take(data).map(|s| s.map(Bytes::from).ok_or(CodeError::TooFew { have, need: data })).collect::<Result<_, _>>()?
        };
        Ok(Stripe { pieces }.cut(stripe_len))
    }

    /// The whole shards (header included) at `positions` of a stripe of `stripe_len` bytes,
    /// from verified payloads (`shards[i]`: shard `i`'s, if good); `None` at the others. Only
    /// what those positions need is computed and framed: a repair writing one shard of a 4+2
    /// stripe decodes at most the data shards, encodes parity only if it writes some, and
    /// checksums one payload, where decoding the stripe and encoding it again copied and
    /// checksummed all six.
    pub fn rebuild(&self, stripe_len: usize, shards: &[Option<Bytes>], positions: &[usize]) -> Result<Vec<Option<Bytes>>, CodeError> {
        let data = usize::from(self.data);
        let have = shards.iter().filter(|s| s.is_some()).count();
        if have < data || shards.len() < data {
            return Err(CodeError::TooFew { have, need: data });
        }
        // The data payloads: those at hand, or all of them rebuilt into owned buffers (the
        // library's way) when one is missing.
        let rebuilt: Vec<Option<Vec<u8>>>;
        let originals: Vec<&[u8]> = if shards[..data].iter().all(Option::is_some) {
            shards[..data].iter().flatten().map(|b| &b[..]).collect()
        } else {
            let mut all: Vec<Option<Vec<u8>>> = (0..self.width()).map(|i| shards.get(i).cloned().flatten().map(|b| b.to_vec())).collect();
            self.coder()?.reconstruct_data(&mut all).map_err(|e| CodeError::Library(format!("{e:?}")))?;
            rebuilt = all;
            rebuilt[..data].iter().map(|s| s.as_deref().ok_or(CodeError::TooFew { have, need: data })).collect::<Result<_, _>>()?
        };
        let mut parity = Vec::new();
        if positions.iter().any(|&p| p >= data) {
            parity = vec![vec![0u8; self.shard_len(stripe_len)]; usize::from(self.parity)];
            self.coder()?.encode_sep(&originals, &mut parity).map_err(|e| CodeError::Library(format!("{e:?}")))?;
        }
        let mut out: Vec<Option<Bytes>> = vec![None; self.width()];
        for &p in positions {
            let payload = if p < data { originals.get(p).copied() } else { parity.get(p - data).map(Vec::as_slice) };
            let payload = payload.ok_or_else(|| CodeError::BadShard { index: p, reason: format!("not a position of {self}") })?;
            out[p] = Some(self.frame(p, stripe_len, payload));
        }
        Ok(out)
    }
}

/// A stripe's bytes as the pieces they came in: the data shards' payloads, not joined, so that
/// a read sends them on without copying them into one buffer first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stripe {
    pieces: Vec<Bytes>,
}

impl Stripe {
    pub fn len(&self) -> usize {
        self.pieces.iter().map(Bytes::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first `len` bytes (the shards' padding past the stripe's end cut off).
    fn cut(mut self, len: usize) -> Stripe {
        let mut left = len;
        for p in &mut self.pieces {
            p.truncate(left);
            left -= p.len();
        }
        self.pieces.retain(|p| !p.is_empty());
        self
    }

    /// Bytes `[lo, hi)` of the stripe (as far as it goes), as slices of its pieces.
    pub fn slice(&self, lo: usize, hi: usize) -> Vec<Bytes> {
        let mut out = Vec::new();
        let mut at = 0;
        for p in &self.pieces {
            let (from, to) = (lo.max(at), hi.min(at + p.len()));
            if from < to {
                out.push(p.slice(from - at..to - at));
            }
            at += p.len();
        }
        out
    }

    /// The stripe in one buffer: a copy, unless it is one piece.
    pub fn to_bytes(&self) -> Bytes {
        match self.pieces.as_slice() {
            [] => Bytes::new(),
            [one] => one.clone(),
            many => Bytes::from(many.concat()),
        }
    }
}

impl From<Bytes> for Stripe {
    fn from(b: Bytes) -> Stripe {
        Stripe { pieces: vec![b] }.cut(usize::MAX)
    }
}

/// The stripe length a shard's header names, if it looks like a shard at all (unchecked: a
/// repair takes the length most of a stripe's shards agree on, then checks each against it).
pub fn stripe_len_of(value: &[u8]) -> Option<usize> {
    let h = value.get(..SHARD_HEADER)?;
    (&h[..4] == SHARD_MAGIC).then(|| u32::from_be_bytes([h[8], h[9], h[10], h[11]]) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn payloads(code: &Code, shards: &[Bytes], len: usize) -> Vec<Option<Bytes>> {
        shards.iter().enumerate().map(|(i, s)| Some(code.verify(i, len, s).unwrap())).collect()
    }

    #[test]
    fn codes_parse_and_refuse_what_they_cannot_be() {
        assert_eq!("4+2".parse::<Code>().unwrap(), Code { data: 4, parity: 2 });
        assert_eq!(" 17 + 3 ".parse::<Code>().unwrap().to_string(), "17+3");
        for bad in ["4", "0+2", "4+0", "33+1", "4+17", "a+b", "4+2+1", ""] {
            assert!(bad.parse::<Code>().is_err(), "{bad} parsed");
        }
        assert!((Code { data: 4, parity: 2 }.overhead() - 1.5).abs() < 1e-9);
    }

    #[test]
    fn a_flipped_bit_is_found_and_the_stripe_still_reads_right() {
        let code = Code { data: 4, parity: 2 };
        let stripe: Vec<u8> = (0..1_000_003u32).map(|i| (i % 251) as u8).collect();
        let shards = code.encode(&stripe).unwrap();
        let mut damaged = shards[1].to_vec();
        damaged[SHARD_HEADER + 77] ^= 0x10;
        let damaged = Bytes::from(damaged);
        assert!(matches!(code.verify(1, stripe.len(), &damaged), Err(CodeError::BadShard { index: 1, .. })));
        // Put in another's place, or as part of another stripe: refused too.
        assert!(code.verify(2, stripe.len(), &shards[1]).is_err());
        assert!(code.verify(1, stripe.len() - 1, &shards[1]).is_err());
        let mut got = payloads(&code, &shards, stripe.len());
        got[1] = None;
        assert_eq!(code.decode(stripe.len(), &got).unwrap().to_bytes(), stripe);
    }

    #[test]
    fn more_losses_than_parity_is_an_error_never_bytes() {
        let code = Code { data: 4, parity: 2 };
        let shards = code.encode(b"hello, archive").unwrap();
        let mut got = payloads(&code, &shards, 14);
        got[0] = None;
        got[3] = None;
        got[5] = None;
        assert_eq!(code.decode(14, &got), Err(CodeError::TooFew { have: 3, need: 4 }));
        assert_eq!(code.rebuild(14, &got, &[0]), Err(CodeError::TooFew { have: 3, need: 4 }));
    }

    #[test]
    fn oversized_stripes_are_refused() {
        let code = Code { data: 2, parity: 1 };
        assert!(matches!(code.encode(&vec![0; code.max_stripe() + 1]), Err(CodeError::StripeTooLarge { .. })));
        let shards = code.encode(&vec![7; code.max_stripe()]).unwrap();
        assert!(shards.iter().all(|s| s.len() <= MAX_VALUE_LEN));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Any `data` of the shards give the stripe back, whatever it holds and wherever the
        /// losses fall; a repair rebuilds each lost shard byte for byte.
        #[test]
        fn any_data_shards_give_the_stripe_back(
            data in 1u8..8, parity in 1u8..4, stripe in proptest::collection::vec(any::<u8>(), 0..5000), lost_seed in any::<u64>(),
        ) {
            let code = Code { data, parity };
            let shards = code.encode(&stripe).unwrap();
            prop_assert_eq!(shards.len(), code.width());
            let mut got = payloads(&code, &shards, stripe.len());
            let mut lost = Vec::new();
            let mut s = lost_seed;
            for _ in 0..parity {
                let i = (s % code.width() as u64) as usize;
                s = s.rotate_left(17).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                got[i] = None;
                lost.push(i);
            }
            prop_assert_eq!(code.decode(stripe.len(), &got).unwrap().to_bytes(), Bytes::from(stripe.clone()));
            let again = code.encode(&code.decode(stripe.len(), &got).unwrap().to_bytes()).unwrap();
            let rebuilt = code.rebuild(stripe.len(), &got, &lost).unwrap();
            for (i, r) in rebuilt.iter().enumerate() {
                prop_assert_eq!(r.is_some(), lost.contains(&i));
            }
            for i in lost {
                prop_assert_eq!(&again[i], &shards[i]);
                prop_assert_eq!(rebuilt[i].as_ref(), Some(&shards[i]));
            }
            // Every position at once, from the data shards alone or with some of them lost.
            let every: Vec<usize> = (0..code.width()).collect();
            let all = code.rebuild(stripe.len(), &got, &every).unwrap();
            prop_assert_eq!(all.into_iter().flatten().collect::<Vec<_>>(), shards.clone());
        }

        /// A slice of a stripe in pieces is the same bytes as the slice of the stripe joined,
        /// for any cut into pieces and any range, past the end included.
        #[test]
        fn slices_of_pieces_are_slices_of_the_whole(bytes in proptest::collection::vec(any::<u8>(), 0..300), cuts in proptest::collection::vec(0usize..300, 0..6), lo in 0usize..320, hi in 0usize..320) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
            cuts.sort_unstable();
            let whole = Bytes::from(bytes.clone());
            let mut pieces = Vec::new();
            let mut at = 0;
            for c in cuts.into_iter().chain([bytes.len()]) {
                pieces.push(whole.slice(at..c));
                at = c;
            }
            let stripe = Stripe { pieces };
            prop_assert_eq!(stripe.len(), bytes.len());
            prop_assert_eq!(stripe.to_bytes(), whole.clone());
            let want: &[u8] = if lo < hi.min(bytes.len()) { &bytes[lo..hi.min(bytes.len())] } else { &[] };
            prop_assert_eq!(stripe.slice(lo, hi).concat(), want.to_vec());
            prop_assert_eq!(stripe.cut(lo).to_bytes(), whole.slice(..lo.min(bytes.len())));
        }

        /// A shard's decoder takes any bytes without panicking.
        #[test]
        fn verify_takes_any_bytes(value in proptest::collection::vec(any::<u8>(), 0..64), index in 0usize..8, len in 0usize..100) {
            let _ = Code { data: 4, parity: 2 }.verify(index, len, &Bytes::from(value));
        }
    }
}
