//! Unit tests of sparse content: holes, truncation, copy-on-write.

use super::*;

#[test]
fn content_sparse_read_write_truncate() {
    let mut c = Content::new();
    c.set_len(64 << 20);
    assert_eq!(c.len(), 64 << 20);
    assert_eq!(c.resident_pages(), 0);
    assert_eq!(c.read(10 << 20, 8), vec![0; 8]);
    c.write(CHUNK_BYTES - 3, b"abcdef");
    assert_eq!(c.resident_pages(), 2);
    assert_eq!(c.read(CHUNK_BYTES - 4, 8), b"\0abcdef\0");
    c.set_len(CHUNK_BYTES - 1);
    assert_eq!(c.len(), CHUNK_BYTES - 1);
    assert_eq!(c.resident_pages(), 1);
    c.set_len(CHUNK_BYTES + 10);
    // The truncated tail reads as zeros once the file grows again.
    assert_eq!(c.read(CHUNK_BYTES - 4, 20), b"\0ab\0\0\0\0\0\0\0\0\0\0\0");
    c.set_len(0);
    assert_eq!(c.resident_pages(), 0);
    assert!(c.is_empty());
    assert!(c.read(0, 10).is_empty());
}

#[test]
fn content_truncate_mid_page_zeroes_tail() {
    let mut c = Content::from_bytes(&[7u8; 5000]);
    c.set_len(4100);
    c.set_len(5000);
    let v = c.to_vec();
    assert!(v[..4100].iter().all(|&b| b == 7));
    assert!(v[4100..].iter().all(|&b| b == 0));
}

#[test]
fn content_clone_is_copy_on_write() {
    let mut a = Content::from_bytes(&vec![1u8; 3 * PAGE_SIZE]);
    let b = a.clone();
    a.write(PAGE_SIZE as u64, &[2u8; 10]);
    assert_eq!(b.to_vec(), vec![1u8; 3 * PAGE_SIZE]);
    assert_eq!(
        a.read(PAGE_SIZE as u64 - 1, 12),
        [&[1u8][..], &[2u8; 10], &[1u8]].concat()
    );
    let mut pages = HashSet::new();
    a.page_ptrs(&mut pages);
    b.page_ptrs(&mut pages);
    // Only the written page was copied.
    assert_eq!(pages.len(), 4);
}
