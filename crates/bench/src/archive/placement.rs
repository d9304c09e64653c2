//! Client-side placement: each file (all its chunks and its manifest) goes to one drive chosen
//! by a hash of the file's key, so N drives behave as N disks of one node, or as N nodes of
//! one disk, without any server-side coordination.

/// The drive (0..drives) that holds the file whose placement key is `key`: CRC32C of the key,
/// reduced by multiply-shift (fair for any drive count, unlike a modulo of a small range).
pub fn drive_for(key: &[u8], drives: usize) -> usize {
    let h = u64::from(crc_fast::crc32_iscsi(key));
    ((h * drives.max(1) as u64) >> 32) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::object::Layout;

    #[test]
    fn placement_is_deterministic_and_balanced() {
        let layout = Layout::new(0xfeed, 1, 1 << 20);
        for drives in [1, 2, 3, 4, 8] {
            let mut counts = vec![0u64; drives];
            let files = 20_000u64;
            for f in 0..files {
                let key = layout.placement_key(f);
                let d = drive_for(&key, drives);
                assert_eq!(d, drive_for(&key, drives), "same key, same drive");
                counts[d] += 1;
            }
            let expected = files as f64 / drives as f64;
            // Binomial spread: 4 standard deviations of the count per drive.
            let tolerance = 4.0 * (expected * (1.0 - 1.0 / drives as f64)).sqrt();
            assert!(counts.iter().all(|c| (*c as f64 - expected).abs() <= tolerance), "{drives} drives: {counts:?}");
        }
        // Chunk keys never decide placement: the file key does.
        assert_eq!(drive_for(b"arc/x/0000000001", 4), drive_for(b"arc/x/0000000001", 4));
    }
}
