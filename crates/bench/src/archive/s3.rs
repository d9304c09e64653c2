//! The archival workloads against an S3 endpoint: a file is one object (a single PUT, or a
//! multipart upload at or above the part size), written and read over HTTP by the same
//! generator as `spindle bench s3`.
//!
//! What differs from drives, on purpose: there is no migration-batch flush (an S3 PUT is
//! acknowledged once the server holds the object as durably as it is configured to), files are
//! written in file order with `workers` uploads in flight and no barrier between batches, and
//! the space the server uses is not known over S3 (rows report 0). Content and checks are the
//! drive path's: an object's bytes are the file's [`Layout::content`], a whole-file read is
//! checked against the file's CRC32C, a fragment (a ranged GET) against the bytes it should
//! hold. Expected checksums and fragments are computed before the clock starts.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use super::fileset::FileEntry;
use super::object::Layout;
use super::workload::{on_workers, Measured, ReadPick};
use crate::s3::client::{uses_multipart, S3Conn, S3Endpoint, S3Error, S3Signer};

/// The endpoint, and connections handed to workers (one each, kept between workloads).
#[derive(Clone)]
pub struct S3Files {
    signer: S3Signer,
    multipart_bytes: u64,
    conns: Arc<parking_lot::Mutex<Vec<S3Conn>>>,
}

impl S3Files {
    /// Checks the endpoint and creates the bucket.
    pub async fn connect(endpoint: &S3Endpoint, multipart_bytes: u64) -> Result<S3Files, S3Error> {
        let signer = S3Signer::new(endpoint)?;
        let mut conn = S3Conn::new(signer.clone());
        conn.create_bucket().await?;
        Ok(S3Files { signer, multipart_bytes, conns: Arc::new(parking_lot::Mutex::new(vec![conn])) })
    }

    fn take(&self) -> S3Conn {
        self.conns.lock().pop().unwrap_or_else(|| S3Conn::new(self.signer.clone()))
    }

    fn give(&self, conn: S3Conn) {
        self.conns.lock().push(conn);
    }

    /// A file's object key.
    pub fn key(layout: &Layout, file: u64) -> String {
        String::from_utf8_lossy(&layout.placement_key(file)).into_owned()
    }

    /// Uploads `files` in file order, `workers` at a time; timed.
    pub async fn sequential_write(&self, layout: &Layout, files: &[FileEntry], workers: usize) -> Measured {
        let started = Instant::now();
        let (me, l) = (self.clone(), layout.clone());
        let mut m = on_workers(files.to_vec(), workers, move |items, i| {
            let (me, l) = (me.clone(), l.clone());
            async move {
                let file = items[i];
                let mut m = Measured::default();
                let body = Bytes::from(l.content(file.id, file.size));
                let mut conn = me.take();
                let r = conn.upload(&S3Files::key(&l, file.id), body, me.multipart_bytes).await;
                me.give(conn);
                match r {
                    Ok(()) => {
                        m.files = 1;
                        m.bytes = file.size;
                        m.requests = requests_for(file.size, me.multipart_bytes);
                    }
                    Err(e) => m.fail(format!("writing file {}: {e}", file.id)),
                }
                m
            }
        })
        .await;
        m.seconds = started.elapsed().as_secs_f64();
        m
    }

    /// Reads every pick in order, `workers` at a time: whole objects checked against the
    /// file's checksum, fragments (ranged GETs) against the bytes they should hold.
    pub async fn random_read(&self, layout: &Layout, picks: Vec<ReadPick>, workers: usize) -> Measured {
        // What each read must return, worked out before the clock starts.
        let expected: Vec<(ReadPick, Expected)> = picks
            .into_iter()
            .map(|p| {
                let e = match p.fragment {
                    None => Expected::Crc(layout.manifest(p.file.id, p.file.size).crc32c),
                    Some((offset, len)) => Expected::Bytes(layout.fragment(p.file.id, p.file.size, offset, len)),
                };
                (p, e)
            })
            .collect();
        let started = Instant::now();
        let (me, l) = (self.clone(), layout.clone());
        let mut m = on_workers(expected, workers, move |items, i| {
            let (me, l) = (me.clone(), l.clone());
            async move {
                let (pick, expected) = &items[i];
                let mut m = Measured::default();
                let mut conn = me.take();
                let key = S3Files::key(&l, pick.file.id);
                let result = match (pick.fragment, expected) {
                    (None, Expected::Crc(crc)) => {
                        let mut digest = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
                        let fetched = conn.get_object(&key, None, |d| digest.update(d)).await;
                        let got = digest.finalize() as u32;
                        match fetched {
                            Ok(t) if t.bytes == pick.file.size && got == *crc => Ok(t.bytes),
                            Ok(t) => Err(format!("{} bytes with CRC32C {got:08x}, expected {} with {crc:08x}", t.bytes, pick.file.size)),
                            Err(e) => Err(e.to_string()),
                        }
                    }
                    (Some((offset, len)), Expected::Bytes(want)) => {
                        let mut body = Vec::with_capacity(len as usize);
                        match conn.get_object(&key, Some((offset, len)), |d| body.extend_from_slice(d)).await {
                            Ok(_) if body == *want => Ok(len),
                            Ok(_) => Err(format!("fragment {offset}+{len} holds other bytes ({} received)", body.len())),
                            Err(e) => Err(e.to_string()),
                        }
                    }
                    _ => Err("internal: pick and expectation disagree".to_string()),
                };
                me.give(conn);
                match result {
                    Ok(bytes) => {
                        m.files = 1;
                        m.bytes = bytes;
                        m.requests = 1;
                    }
                    Err(e) => m.fail(format!("reading file {}: {e}", pick.file.id)),
                }
                m
            }
        })
        .await;
        m.seconds = started.elapsed().as_secs_f64();
        m
    }

    /// Deletes the files' objects (untimed clean-up).
    pub async fn delete_files(&self, layout: &Layout, files: &[FileEntry], workers: usize) -> Measured {
        let (me, l) = (self.clone(), layout.clone());
        on_workers(files.to_vec(), workers, move |items, i| {
            let (me, l) = (me.clone(), l.clone());
            async move {
                let mut m = Measured::default();
                let mut conn = me.take();
                let r = conn.delete_object(&S3Files::key(&l, items[i].id)).await;
                me.give(conn);
                match r {
                    Ok(()) => m.files = 1,
                    Err(e) => m.fail(e),
                }
                m
            }
        })
        .await
    }
}

enum Expected {
    Crc(u32),
    Bytes(Vec<u8>),
}

/// HTTP requests an upload of `size` bytes takes: one PUT, or create + parts + complete.
pub fn requests_for(size: u64, multipart_bytes: u64) -> u64 {
    if uses_multipart(size, multipart_bytes) {
        size.div_ceil(multipart_bytes) + 2
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_count_the_multipart_round_trips() {
        assert_eq!(requests_for(0, 16 << 20), 1);
        assert_eq!(requests_for((16 << 20) - 1, 16 << 20), 1);
        assert_eq!(requests_for(16 << 20, 16 << 20), 3);
        assert_eq!(requests_for(64 << 20, 16 << 20), 6);
        assert_eq!(requests_for(64 << 20, 0), 1, "multipart off");
        let layout = Layout::new(0xabc, 1, 1 << 20);
        assert_eq!(S3Files::key(&layout, 7), "arc/0000000000000abc/0000000007");
    }
}
