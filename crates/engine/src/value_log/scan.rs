//! Segment scans: a segment read from the start, record by record, for a census or a
//! collection.

use std::fs::File;
use std::io::Read;

use bytes::Bytes;

use super::format::{self, RecordHead, SEGMENT_HEADER_LEN};
use super::ValueLog;
use crate::Result;

/// What a scan reads of each record.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// Headers, keys and values (a collection copies them).
    Values,
    /// Headers and keys only (a census): values are passed over unread, so the scan reads
    /// little more than a page per record of a log of large values, where reading it whole
    /// through the page cache cost a drive restarting after a while a full pass over its disk.
    Heads,
}

/// A heads-only scan's buffer: a record's header and key, and the small records near it.
const HEADS_BUFFER_BYTES: usize = 8 * 1024;
/// A collection's buffer: whole records at a time.
const VALUES_BUFFER_BYTES: usize = 1 << 20;

impl ValueLog {
    /// Reads segment `id` record by record, for a census or a collection.
    pub fn scan(&self, id: u32, reading: Reading) -> Result<Option<SegmentScan>> {
        let Some(file) = self.open_segment(id)? else { return Ok(None) };
        let len = file.metadata()?.len();
        let capacity = match reading {
            Reading::Values => VALUES_BUFFER_BYTES,
            Reading::Heads => {
                // No read-ahead: it would read the values passed over.
                super::sync::advise(&file, 0, 0, super::sync::Pages::Random);
                HEADS_BUFFER_BYTES
            }
        };
        let mut reader = std::io::BufReader::with_capacity(capacity, file);
        let mut header = [0u8; SEGMENT_HEADER_LEN as usize];
        let header_ok = reader.read_exact(&mut header).is_ok() && format::is_segment_header(&header, id);
        Ok(Some(SegmentScan { reader, at: SEGMENT_HEADER_LEN, len, damaged: !header_ok && len > 0, done: !header_ok }))
    }
}

/// A segment read from the start, one record at a time. It stops at the first record that
/// does not read whole: the end of the file, or damage ([`SegmentScan::damaged`]).
pub struct SegmentScan {
    reader: std::io::BufReader<File>,
    at: u64,
    len: u64,
    /// The scan stopped at bytes that are not an intact record, before the end of the file.
    pub damaged: bool,
    done: bool,
}

/// One record found by a scan: where, its key, its header; its value is read or skipped next.
pub struct ScannedRecord {
    pub offset: u64,
    pub key: Bytes,
    pub head: RecordHead,
}

impl SegmentScan {
    /// The next record's header and key, or `None` at the end (or damage). The caller then
    /// reads its value with [`Self::value`] or passes it with [`Self::skip`].
    pub fn next_record(&mut self) -> Result<Option<ScannedRecord>> {
        if self.done || self.at >= self.len {
            return Ok(None);
        }
        let mut fixed = [0u8; format::RECORD_HEAD_LEN];
        let stop = |scan: &mut Self| {
            scan.done = true;
            scan.damaged = true;
            Ok(None)
        };
        if self.reader.read_exact(&mut fixed).is_err() {
            return stop(self);
        }
        let Some((crc, head)) = format::decode_head(&fixed) else { return stop(self) };
        let mut key = vec![0u8; head.key_len];
        if self.reader.read_exact(&mut key).is_err() || !format::head_checks(crc, &head, &key) {
            return stop(self);
        }
        if self.at + head.record_len() > self.len {
            return stop(self);
        }
        let offset = self.at;
        self.at += head.record_len();
        Ok(Some(ScannedRecord { offset, key: key.into(), head }))
    }

    /// The value of the record [`Self::next_record`] returned, checked against its CRC.
    pub fn value(&mut self, record: &ScannedRecord) -> Result<Option<Bytes>> {
        let len = record.head.value_len as usize;
        // Read into capacity std fills without zeroing it first (as `read_fresh_at` in `read.rs`).
        let mut value = Vec::with_capacity(len);
        (&mut self.reader).take(len as u64).read_to_end(&mut value)?;
        if value.len() != len {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
        }
        if crc_fast::crc32_iscsi(&value) != record.head.value_crc {
            self.done = true;
            self.damaged = true;
            return Ok(None);
        }
        Ok(Some(value.into()))
    }

    /// Passes over the value of the record [`Self::next_record`] returned.
    pub fn skip(&mut self, record: &ScannedRecord) -> Result<()> {
        self.reader.seek_relative(i64::from(record.head.value_len))?;
        Ok(())
    }
}
