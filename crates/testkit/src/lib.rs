//! What the workspace's tests share. A test that aborts (a panic with `panic = "abort"`, a
//! signal, a timeout that kills the test binary) runs no destructor, so a child process it
//! started would run on beside whatever comes next: a drive holding a port, a simulator seed
//! minutes long in a test build, a FUSE mount. Children started through [`ends_with_test`]
//! are signalled by the kernel when the test's thread ends instead.

#![deny(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use std::os::unix::process::CommandExt;
use std::process::Command;

/// Has the kernel send `signal` to the child `command` starts when the thread that starts it
/// ends (`PR_SET_PDEATHSIG`: the parent is the thread, so start children from the test's own
/// thread, or from one that outlives them). SIGKILL for a child with nothing to clean up;
/// SIGTERM for one that stops children of its own or unmounts on the way out.
#[allow(unsafe_code, reason = "pre_exec is unsafe: the closure runs between fork and exec")]
pub fn ends_with_test(command: &mut Command, signal: libc::c_int) -> &mut Command {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: prctl, getppid and _exit are async-signal-safe, and the closure touches nothing
    // else (no allocation, no lock) between fork and exec.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, signal) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The test died before the signal was asked for: nobody is left to send it.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Stdio;

    #[test]
    fn a_child_started_so_runs_and_reports_as_any_other() {
        let out = ends_with_test(Command::new("sh").args(["-c", "echo started"]), libc::SIGKILL).stdout(Stdio::piped()).output().unwrap();
        assert!(out.status.success());
        assert_eq!(String::from_utf8_lossy(&out.stdout), "started\n");
    }

    #[test]
    fn a_child_dies_when_the_thread_that_started_it_ends() {
        // The child sleeps far longer than the test; its starting thread ends at once.
        let mut child = std::thread::spawn(|| ends_with_test(Command::new("sleep").arg("600"), libc::SIGKILL).spawn().unwrap()).join().unwrap();
        // A generous bound: the kernel signals the child as the thread exits.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if std::time::Instant::now() > until {
                child.kill().unwrap();
                panic!("the child outlived the thread that started it by 60 s");
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(libc::SIGKILL), "ended by the signal");
    }
}
