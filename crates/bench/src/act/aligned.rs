//! Buffers aligned for O_DIRECT: the kernel transfers straight between the device and user
//! memory, so the buffer address, the length and the file offset must all be multiples of the
//! device's logical block size. 4096 covers every block size ACT probes.

// std allocates with a chosen alignment only through the raw allocator.
#![allow(unsafe_code, reason = "an owned buffer over a raw aligned allocation; every block says why it is sound")]

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;

pub const DIRECT_IO_ALIGN: usize = 4096;

pub struct AlignedBuf {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: the buffer is owned memory with no shared state; moving it between threads is fine.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes (at least one) at a 4096-byte boundary.
    pub fn new(len: usize) -> AlignedBuf {
        let layout = Layout::from_size_align(len.max(1), DIRECT_IO_ALIGN).expect("a 4096-byte alignment is a valid layout for any length up to isize::MAX");
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, layout }
    }
}

impl std::ops::Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr points to layout.size() initialised (zeroed) bytes owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl std::ops::DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, and &mut self guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_zeroed_and_writable() {
        for len in [1, 512, 1536, 131072] {
            let mut b = AlignedBuf::new(len);
            assert_eq!(b.as_ptr() as usize % DIRECT_IO_ALIGN, 0);
            assert_eq!(b.len(), len);
            assert!(b.iter().all(|x| *x == 0));
            b[len - 1] = 7;
            assert_eq!(b[len - 1], 7);
        }
    }
}
