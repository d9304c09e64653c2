//! LevelDB and RocksDB in this process, through their own shared libraries: the paper's
//! "LevelDB servers" without a network, on the same disk and with the same keys, values and
//! concurrency as every other target (`leveldb:DIR`, `rocksdb:DIR`).
//!
//! Both libraries are loaded at run time (dlopen) through their C APIs, which RocksDB kept
//! call-compatible with LevelDB's: the names differ only in their prefix. Loading at run time
//! keeps Spindle's build free of a C++ toolchain and of these libraries: only a user who
//! benchmarks them needs them installed (Debian: `libleveldb1d`, `librocksdb7.8`). Each of the
//! `connections x depth` requests in flight is one thread calling the library, as a threaded
//! server would; both libraries are thread-safe and group concurrent synchronous writes.

#![allow(unsafe_code, reason = "every call into a library loaded at run time is foreign; every block says why it is sound")]

use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use libloading::Library;
use spindle_client::Synchronization;

use crate::{new_histogram, summarize, BenchError, BenchResult, BenchSpec, Operation, Window, Work};

/// Which library a target names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LsmKind {
    LevelDb,
    RocksDb,
    /// RocksDB with its integrated BlobDB: values of 4 KiB and more in blob files, written once
    /// at flush, with blob garbage collection (db_bench's `--enable_blob_files`).
    RocksDbBlob,
}

/// The value size from which `rocksdb-blob:` keeps values in blob files.
const ROCKSDB_MIN_BLOB_SIZE: u64 = 4096;

impl LsmKind {
    /// The target `leveldb:DIR`, `rocksdb:DIR` or `rocksdb-blob:DIR`, if `target` is one.
    pub fn parse(target: &str) -> Option<(LsmKind, &str)> {
        if let Some(dir) = target.strip_prefix("leveldb:") {
            return Some((LsmKind::LevelDb, dir));
        }
        if let Some(dir) = target.strip_prefix("rocksdb-blob:") {
            return Some((LsmKind::RocksDbBlob, dir));
        }
        target.strip_prefix("rocksdb:").map(|dir| (LsmKind::RocksDb, dir))
    }

    fn prefix(self) -> &'static str {
        match self {
            LsmKind::LevelDb => "leveldb",
            LsmKind::RocksDb | LsmKind::RocksDbBlob => "rocksdb",
        }
    }

    /// Shared-library names to try, newest first.
    fn sonames(self) -> &'static [&'static str] {
        match self {
            LsmKind::LevelDb => &["libleveldb.so.1d", "libleveldb.so.1", "libleveldb.so"],
            LsmKind::RocksDb | LsmKind::RocksDbBlob => &["librocksdb.so.9", "librocksdb.so.8", "librocksdb.so.7.8", "librocksdb.so"],
        }
    }

    fn package_hint(self) -> &'static str {
        match self {
            LsmKind::LevelDb => "on Debian: apt-get install libleveldb1d",
            LsmKind::RocksDb | LsmKind::RocksDbBlob => "on Debian: apt-get install librocksdb7.8",
        }
    }
}

type Opaque = *mut c_void;

/// The key a sync writes (synchronously, so the log is synced); scans skip it.
const SYNC_MARKER: &[u8] = b"\xffspindle-bench-sync";
type ErrPtr = *mut *mut c_char;

/// The C API functions the benchmark calls (identical signatures in both libraries).
struct Api {
    options_create: unsafe extern "C" fn() -> Opaque,
    options_destroy: unsafe extern "C" fn(Opaque),
    options_set_create_if_missing: unsafe extern "C" fn(Opaque, u8),
    open: unsafe extern "C" fn(Opaque, *const c_char, ErrPtr) -> Opaque,
    close: unsafe extern "C" fn(Opaque),
    put: unsafe extern "C" fn(Opaque, Opaque, *const c_char, usize, *const c_char, usize, ErrPtr),
    get: unsafe extern "C" fn(Opaque, Opaque, *const c_char, usize, *mut usize, ErrPtr) -> *mut c_char,
    free: unsafe extern "C" fn(*mut c_void),
    readoptions_create: unsafe extern "C" fn() -> Opaque,
    readoptions_destroy: unsafe extern "C" fn(Opaque),
    writeoptions_create: unsafe extern "C" fn() -> Opaque,
    writeoptions_destroy: unsafe extern "C" fn(Opaque),
    writeoptions_set_sync: unsafe extern "C" fn(Opaque, u8),
    create_iterator: unsafe extern "C" fn(Opaque, Opaque) -> Opaque,
    iter_seek: unsafe extern "C" fn(Opaque, *const c_char, usize),
    iter_valid: unsafe extern "C" fn(Opaque) -> u8,
    iter_key: unsafe extern "C" fn(Opaque, *mut usize) -> *const c_char,
    iter_next: unsafe extern "C" fn(Opaque),
    iter_destroy: unsafe extern "C" fn(Opaque),
}

/// An open database. The handles are owned here and freed in `Drop`; the libraries allow
/// concurrent calls on one database and one set of options from many threads.
pub struct LsmDb {
    kind: LsmKind,
    soname: &'static str,
    api: Api,
    db: Opaque,
    options: Opaque,
    read: Opaque,
    write_async: Opaque,
    write_sync: Opaque,
    _library: Library,
}

// SAFETY: LevelDB's and RocksDB's database and options objects are documented as safe for
// concurrent use from several threads without external synchronisation; nothing here mutates
// them after `open`.
unsafe impl Send for LsmDb {}
// SAFETY: as for Send: the handles may be used from several threads at once.
unsafe impl Sync for LsmDb {}

fn lib_err(kind: LsmKind, what: impl std::fmt::Display) -> BenchError {
    BenchError::Invalid(format!("{}: {what}", kind.prefix()))
}

/// Takes a C error string the library allocated, if any.
fn take_error(api: &Api, err: *mut c_char) -> Option<String> {
    if err.is_null() {
        return None;
    }
    // SAFETY: a non-null error is a NUL-terminated string the library malloc'ed for us.
    let message = unsafe { CStr::from_ptr(err) }.to_string_lossy().into_owned();
    // SAFETY: the string came from the library's malloc, was copied above and is freed once.
    unsafe { (api.free)(err.cast()) };
    Some(message)
}

/// Turns on RocksDB's integrated blob files, with their garbage collection, in `options`.
///
/// # Safety
/// `options` is a live `rocksdb_options_t` from `library`.
unsafe fn enable_blob_files(library: &Library, options: Opaque) -> Result<(), BenchError> {
    let kind = LsmKind::RocksDbBlob;
    let set_u8 = |name: &str| -> Result<unsafe extern "C" fn(Opaque, u8), BenchError> {
        // SAFETY: the C API declares these setters as (rocksdb_options_t*, unsigned char).
        unsafe { library.get::<unsafe extern "C" fn(Opaque, u8)>(format!("{name}\0").as_bytes()) }
            .map(|f| *f)
            .map_err(|e| lib_err(kind, format!("symbol {name}: {e} (a RocksDB with blob files is needed)")))
    };
    // SAFETY: declared as (rocksdb_options_t*, uint64_t) in the C API.
    let min_blob_size = unsafe { library.get::<unsafe extern "C" fn(Opaque, u64)>(b"rocksdb_options_set_min_blob_size\0") }
        .map(|f| *f)
        .map_err(|e| lib_err(kind, format!("symbol rocksdb_options_set_min_blob_size: {e}")))?;
    let (enable, gc) = (set_u8("rocksdb_options_set_enable_blob_files")?, set_u8("rocksdb_options_set_enable_blob_gc")?);
    // SAFETY: `options` is live (this function's contract); the setters only store the values.
    unsafe {
        enable(options, 1);
        min_blob_size(options, ROCKSDB_MIN_BLOB_SIZE);
        gc(options, 1);
    }
    Ok(())
}

impl LsmDb {
    /// Loads the library and opens (creating if missing) the database in `dir`.
    pub fn open(kind: LsmKind, dir: &str) -> Result<LsmDb, BenchError> {
        let (soname, library) = kind
            .sonames()
            .iter()
            // SAFETY: loading a system library runs its initialisers, which is what linking it would do.
            .find_map(|name| unsafe { Library::new(*name) }.ok().map(|l| (*name, l)))
            .ok_or_else(|| lib_err(kind, format!("shared library not found (tried {}); {}", kind.sonames().join(", "), kind.package_hint())))?;
        let api = load_api(&library, kind)?;
        std::fs::create_dir_all(dir).map_err(|e| lib_err(kind, format!("{dir}: {e}")))?;
        let path = CString::new(dir).map_err(|_| lib_err(kind, "directory name holds a NUL byte"))?;
        // SAFETY: every call below follows the C API's contract: objects come from the matching
        // create function, strings are NUL-terminated, errors are taken and freed.
        unsafe {
            let options = (api.options_create)();
            (api.options_set_create_if_missing)(options, 1);
            if kind == LsmKind::RocksDbBlob {
                enable_blob_files(&library, options)?;
            }
            let mut err: *mut c_char = std::ptr::null_mut();
            let db = (api.open)(options, path.as_ptr(), &mut err);
            if let Some(message) = take_error(&api, err) {
                (api.options_destroy)(options);
                return Err(lib_err(kind, format!("open {dir}: {message}")));
            }
            let read = (api.readoptions_create)();
            let write_async = (api.writeoptions_create)();
            let write_sync = (api.writeoptions_create)();
            (api.writeoptions_set_sync)(write_sync, 1);
            Ok(LsmDb { kind, soname, api, db, options, read, write_async, write_sync, _library: library })
        }
    }

    /// Stores `value` under `key`; `sync` writes the log to disk (fsync) before returning.
    pub fn put(&self, key: &[u8], value: &[u8], sync: bool) -> Result<(), String> {
        let options = if sync { self.write_sync } else { self.write_async };
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: key and value outlive the call; the library copies them.
        unsafe { (self.api.put)(self.db, options, key.as_ptr().cast(), key.len(), value.as_ptr().cast(), value.len(), &mut err) };
        take_error(&self.api, err).map_or(Ok(()), Err)
    }

    /// The value under `key`, if any.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let mut err: *mut c_char = std::ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: a non-null result is a malloc'ed buffer of `len` bytes that we copy and free.
        unsafe {
            let value = (self.api.get)(self.db, self.read, key.as_ptr().cast(), key.len(), &mut len, &mut err);
            if let Some(message) = take_error(&self.api, err) {
                return Err(message);
            }
            if value.is_null() {
                return Ok(None);
            }
            let copy = std::slice::from_raw_parts(value.cast::<u8>(), len).to_vec();
            (self.api.free)(value.cast());
            Ok(Some(copy))
        }
    }

    /// The library and options, for results files.
    pub fn describe(&self) -> serde_json::Value {
        serde_json::json!({"kind": self.kind.prefix(), "library": self.soname, "options": "library defaults, create_if_missing"})
    }

    /// Up to `count` keys from `start` (inclusive) upwards, in key order.
    pub fn keys_from(&self, start: &[u8], count: usize) -> Vec<Vec<u8>> {
        let mut keys = Vec::with_capacity(count.min(1024));
        // SAFETY: the iterator is created, used and destroyed here; a key pointer is valid
        // until the iterator moves, and is copied before it does.
        unsafe {
            let it = (self.api.create_iterator)(self.db, self.read);
            (self.api.iter_seek)(it, start.as_ptr().cast(), start.len());
            while keys.len() < count && (self.api.iter_valid)(it) != 0 {
                let mut len = 0usize;
                let key = (self.api.iter_key)(it, &mut len);
                let key = std::slice::from_raw_parts(key.cast::<u8>(), len);
                if key != SYNC_MARKER {
                    keys.push(key.to_vec());
                }
                (self.api.iter_next)(it);
            }
            (self.api.iter_destroy)(it);
        }
        keys
    }

    /// Makes every earlier write durable: a synchronous write syncs the whole log, which holds
    /// every earlier write (the libraries' equivalent of FLUSHALLDATA).
    pub fn sync(&self) -> Result<(), String> {
        self.put(SYNC_MARKER, b"", true)
    }
}

impl Drop for LsmDb {
    fn drop(&mut self) {
        // SAFETY: each handle was created by this library and is freed exactly once, the
        // database first (it may still refer to its options).
        unsafe {
            (self.api.close)(self.db);
            (self.api.writeoptions_destroy)(self.write_sync);
            (self.api.writeoptions_destroy)(self.write_async);
            (self.api.readoptions_destroy)(self.read);
            (self.api.options_destroy)(self.options);
        }
    }
}

fn load_api(library: &Library, kind: LsmKind) -> Result<Api, BenchError> {
    macro_rules! sym {
        ($name:literal) => {{
            let symbol = format!("{}_{}\0", kind.prefix(), $name);
            // SAFETY: the declared signature is the C API's for this symbol in both libraries.
            *unsafe { library.get(symbol.as_bytes()) }.map_err(|e| lib_err(kind, format!("symbol {}: {e}", symbol.trim_end_matches('\0'))))?
        }};
    }
    Ok(Api {
        options_create: sym!("options_create"),
        options_destroy: sym!("options_destroy"),
        options_set_create_if_missing: sym!("options_set_create_if_missing"),
        open: sym!("open"),
        close: sym!("close"),
        put: sym!("put"),
        get: sym!("get"),
        free: sym!("free"),
        readoptions_create: sym!("readoptions_create"),
        readoptions_destroy: sym!("readoptions_destroy"),
        writeoptions_create: sym!("writeoptions_create"),
        writeoptions_destroy: sym!("writeoptions_destroy"),
        writeoptions_set_sync: sym!("writeoptions_set_sync"),
        create_iterator: sym!("create_iterator"),
        iter_seek: sym!("iter_seek"),
        iter_valid: sym!("iter_valid"),
        iter_key: sym!("iter_key"),
        iter_next: sym!("iter_next"),
        iter_destroy: sym!("iter_destroy"),
    })
}

/// Runs `spec` against the library database in `dir`: `connections x depth` threads, each
/// taking the next item and calling the library, timed per operation. WRITETHROUGH and FLUSH
/// are synchronous writes; WRITEBACK is an asynchronous one; `flush_at_end` syncs the log inside
/// the timed window.
pub async fn run(kind: LsmKind, db: Arc<LsmDb>, spec: BenchSpec) -> Result<BenchResult, BenchError> {
    let threads = spec.connections * spec.depth;
    let sync = spec.sync != Synchronization::Writeback;
    let work = Arc::new(Work::new(spec.clone()));
    tokio::task::spawn_blocking(move || {
        let errors = Arc::new(AtomicU64::new(0));
        let window = Window::open();
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (db, work, errors) = (db.clone(), work.clone(), errors.clone());
                std::thread::spawn(move || {
                    let mut hist = new_histogram();
                    while let Some(key) = work.next_key() {
                        let t = Instant::now();
                        let ok = match work.spec.operation {
                            Operation::Put => db.put(&key, &work.value, sync).is_ok(),
                            Operation::Get => matches!(db.get(&key), Ok(Some(_))),
                        };
                        hist.saturating_record(t.elapsed().as_micros().max(1) as u64);
                        if !ok {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    hist
                })
            })
            .collect();
        let mut hist = new_histogram();
        for h in handles {
            let part = h.join().map_err(|_| lib_err(kind, "a benchmark thread panicked"))?;
            hist.add(part).map_err(|e| BenchError::Invalid(e.to_string()))?;
        }
        if work.spec.operation == Operation::Put && work.spec.flush_at_end {
            db.sync().map_err(|e| lib_err(kind, e))?;
        }
        Ok(summarize(work.spec.clone(), &hist, errors.load(Ordering::Relaxed), window.close()))
    })
    .await
    .map_err(|e| BenchError::Invalid(e.to_string()))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse() {
        assert_eq!(LsmKind::parse("leveldb:/tmp/x"), Some((LsmKind::LevelDb, "/tmp/x")));
        assert_eq!(LsmKind::parse("rocksdb:d"), Some((LsmKind::RocksDb, "d")));
        assert_eq!(LsmKind::parse("embedded:d"), None);
    }

    /// Both libraries store, return and sync, and a reopened database keeps what was synced.
    #[test]
    fn libraries_round_trip_and_persist() {
        for kind in [LsmKind::LevelDb, LsmKind::RocksDb] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().to_str().unwrap();
            {
                let db = LsmDb::open(kind, path).unwrap_or_else(|e| panic!("{e} (scripts/test.sh installs the library)"));
                db.put(b"k1", b"v1", true).unwrap();
                db.put(b"k2", &[7u8; 100_000], false).unwrap();
                db.sync().unwrap();
                assert_eq!(db.get(b"k1").unwrap().as_deref(), Some(&b"v1"[..]));
                assert_eq!(db.get(b"absent").unwrap(), None);
            }
            let db = LsmDb::open(kind, path).unwrap();
            assert_eq!(db.get(b"k2").unwrap().map(|v| v.len()), Some(100_000), "{kind:?}");
        }
    }

    #[test]
    fn a_second_open_of_the_same_directory_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_str().unwrap();
        let _first = LsmDb::open(LsmKind::LevelDb, path).unwrap();
        let second = LsmDb::open(LsmKind::LevelDb, path).err().expect("the lock holds");
        assert!(second.to_string().contains("leveldb: open"), "{second}");
    }
}
