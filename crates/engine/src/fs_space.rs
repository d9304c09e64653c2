//! How much room the filesystem under a store has: the engine waits for it before reopening a
//! database a full disk stopped, and the drive admits writes by it.

use std::path::Path;

/// (total bytes, bytes available to unprivileged users) of the filesystem holding `path`, or
/// `None` where it cannot be read.
#[allow(trivial_numeric_casts, reason = "the statvfs fields are u64 on 64-bit Linux but narrower elsewhere")]
pub fn statvfs(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs is plain old data; all-zero is a valid value to be overwritten.
    #[allow(unsafe_code, reason = "statvfs(3) has no safe wrapper in std")]
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c_path is a valid NUL-terminated string and st a properly sized out-parameter.
    #[allow(unsafe_code, reason = "statvfs(3) has no safe wrapper in std")]
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), &mut st) };
    if rc != 0 {
        return None;
    }
    let frsize = st.f_frsize as u64;
    Some((st.f_blocks as u64 * frsize, st.f_bavail as u64 * frsize))
}
