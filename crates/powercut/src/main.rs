//! `powercut MOUNTPOINT [--size BYTES] [--threads N]`: mounts a power-cut file system and obeys
//! commands on stdin, one per line, answering one line each on stdout:
//!
//! - first, once mounted, it prints `ready <mountpoint>` (wait for it before using the mount);
//! - `cut drop|torn|reorder [SEED]` → `ok <report>` (a missing seed is taken from the clock
//!   and shown in the report);
//! - `stats` → `ok <stats>`;
//! - `quit` → `ok bye`, then unmounts and exits 0;
//! - anything else → `err <message>`.
//!
//! End of input (the parent closing stdin, or dying), SIGTERM, SIGINT and SIGHUP also unmount
//! and exit 0: a parent should close stdin (or send `quit`) to stop it, never SIGKILL it, which
//! would leave a dead mount ("Transport endpoint is not connected") behind.

// Unsafe only for the signal mask, allowed where it stands.
#![deny(unsafe_code)]

use std::io::{self, BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{SystemTime, UNIX_EPOCH};

use spindle_powercut::{CutMode, MountOptions, PowerCutFs};

enum Event {
    Line(String),
    Eof,
    Signal(i32),
}

/// Blocks SIGINT, SIGTERM and SIGHUP in this thread and every thread spawned after it, so that
/// only [`wait_signal`] receives them.
#[allow(unsafe_code, reason = "sigset_t and pthread_sigmask(3) have no safe wrapper in std")]
fn block_termination_signals() -> io::Result<libc::sigset_t> {
    // SAFETY: `set` is a plain sigset_t owned here, initialised by sigemptyset before use;
    // pthread_sigmask only changes the calling thread's signal mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, sig);
        }
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(set)
    }
}

fn wait_signal(set: &libc::sigset_t) -> i32 {
    let mut sig = 0;
    // SAFETY: `set` is an initialised sigset_t and `sig` a valid out-pointer.
    #[allow(unsafe_code, reason = "sigwait(3) has no safe wrapper in std")]
    let rc = unsafe { libc::sigwait(set, &mut sig) };
    if rc == 0 {
        sig
    } else {
        libc::SIGTERM
    }
}

struct Args {
    mountpoint: PathBuf,
    options: MountOptions,
}

fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args_os().skip(1);
    let mut mountpoint = None;
    let mut options = MountOptions::default();
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--size") => {
                let v = args
                    .next()
                    .and_then(|v| v.to_str().and_then(|s| s.parse().ok()));
                options.size_bytes = v.ok_or("--size needs a number of bytes")?;
            }
            Some("--threads") => {
                let v = args
                    .next()
                    .and_then(|v| v.to_str().and_then(|s| s.parse().ok()));
                options.threads = v.ok_or("--threads needs a number")?;
            }
            Some("-h" | "--help") => return Err(String::new()),
            _ if mountpoint.is_none() => mountpoint = Some(PathBuf::from(arg)),
            _ => return Err(format!("unexpected argument {arg:?}")),
        }
    }
    Ok(Args {
        mountpoint: mountpoint.ok_or("missing MOUNTPOINT")?,
        options,
    })
}

fn answer(fs: &mut PowerCutFs, line: &str) -> (String, bool) {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        ["cut", mode, rest @ ..] if rest.len() <= 1 => {
            let mode = match mode.parse::<CutMode>() {
                Ok(m) => m,
                Err(e) => return (format!("err {e}"), false),
            };
            let seed = match rest.first() {
                Some(s) => match s.parse::<u64>() {
                    Ok(seed) => seed,
                    Err(_) => return (format!("err bad seed {s:?}"), false),
                },
                None => SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64),
            };
            match fs.cut(mode, seed) {
                Ok(report) => (format!("ok {report}"), false),
                // The remount failed: nothing more can be done.
                Err(e) => (format!("err cut failed: {e}"), true),
            }
        }
        ["stats"] => (format!("ok {}", fs.stats()), false),
        ["quit"] => ("ok bye".to_owned(), true),
        [] => ("err empty command".to_owned(), false),
        _ => (
            format!("err unknown command {line:?} (cut drop|torn|reorder [SEED], stats, quit)"),
            false,
        ),
    }
}

fn main() -> ExitCode {
    // Before any other thread exists, so that all of them inherit the mask.
    let sigset = match block_termination_signals() {
        Ok(set) => set,
        Err(e) => {
            eprintln!("powercut: cannot block signals: {e}");
            return ExitCode::FAILURE;
        }
    };
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("powercut: {e}");
            }
            eprintln!("usage: powercut MOUNTPOINT [--size BYTES] [--threads N]");
            return ExitCode::from(2);
        }
    };
    let mut fs = match PowerCutFs::mount(&args.mountpoint, args.options) {
        Ok(fs) => fs,
        Err(e) => {
            eprintln!("powercut: cannot mount {}: {e}", args.mountpoint.display());
            return ExitCode::FAILURE;
        }
    };

    let (tx, rx) = mpsc::channel();
    let stdin_tx = tx.clone();
    std::thread::spawn(move || {
        for line in io::stdin().lock().lines() {
            match line {
                Ok(line) => {
                    if stdin_tx.send(Event::Line(line)).is_err() {
                        return;
                    }
                }
                Err(_) => break,
            }
        }
        let _ = stdin_tx.send(Event::Eof);
    });
    std::thread::spawn(move || loop {
        if tx.send(Event::Signal(wait_signal(&sigset))).is_err() {
            return;
        }
    });

    let mut stdout = io::stdout();
    let _ = writeln!(stdout, "ready {}", fs.mountpoint().display());
    let _ = stdout.flush();
    while let Ok(event) = rx.recv() {
        match event {
            Event::Line(line) => {
                let (reply, stop) = answer(&mut fs, line.trim());
                let _ = writeln!(stdout, "{reply}");
                let _ = stdout.flush();
                if stop {
                    break;
                }
            }
            Event::Eof => break,
            Event::Signal(sig) => {
                eprintln!("powercut: signal {sig}, unmounting");
                break;
            }
        }
    }
    match fs.unmount() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("powercut: {e}");
            ExitCode::FAILURE
        }
    }
}
