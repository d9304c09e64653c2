//! ACT's workload parameters and the rates it derives from them (aerospike/act
//! `cfg_storage.c`, restated in docs/methodology section 2.1): small record reads from the read
//! rate, and the large-block writes and defragmentation reads that the write rate causes once
//! records are packed into large blocks.

use serde::Serialize;

use super::ActError;

/// "1x" load: ACT's sample config for one device.
pub const READS_PER_SEC_1X: f64 = 2000.0;
pub const WRITES_PER_SEC_1X: f64 = 1000.0;
/// Records are stored in 16-byte units.
pub const RECORD_GRANULARITY_BYTES: u32 = 16;
/// ACT caps a record at 8 MiB and a large block at 8 MiB (a power of two).
pub const RECORD_BYTES_MAX: u32 = 8 << 20;
pub const LARGE_BLOCK_BYTES_MAX: u32 = 8 << 20;
/// Smallest large block accepted: below this a "large" block is no larger than a record read.
pub const LARGE_BLOCK_BYTES_MIN: u32 = 4096;

/// The load a certification run applies, in ACT's terms. Defaults are ACT 6.5's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Workload {
    pub record_bytes: u32,
    pub large_block_bytes: u32,
    /// Totals, as in ACT's config (one device here).
    pub read_reqs_per_sec: f64,
    pub write_reqs_per_sec: f64,
    pub replication_factor: u32,
    /// Each write also reads the record it updates this often (percent).
    pub update_pct: u32,
    /// Defragmentation rewrites blocks once they are this empty: write amplification
    /// 100 / (100 - lwm).
    pub defrag_lwm_pct: u32,
    /// No large-block reads for defragmentation (Aerospike 7's in-memory model).
    pub no_defrag_reads: bool,
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            record_bytes: 1536,
            large_block_bytes: 128 * 1024,
            read_reqs_per_sec: READS_PER_SEC_1X,
            write_reqs_per_sec: WRITES_PER_SEC_1X,
            replication_factor: 1,
            update_pct: 0,
            defrag_lwm_pct: 50,
            no_defrag_reads: false,
        }
    }
}

impl Workload {
    /// This workload at `rating` x ACT's 1x load (2000 reads/s + 1000 writes/s).
    pub fn at_rating(&self, rating: u32) -> Workload {
        Workload { read_reqs_per_sec: READS_PER_SEC_1X * rating as f64, write_reqs_per_sec: WRITES_PER_SEC_1X * rating as f64, ..self.clone() }
    }

    /// The derived rates, after checking the parameters as ACT does.
    pub fn rates(&self) -> Result<Rates, ActError> {
        let invalid = |what: String| Err(ActError::Config(what));
        if self.record_bytes == 0 || self.record_bytes > RECORD_BYTES_MAX {
            return invalid(format!("record size {} B: must be 1 B to {} B", self.record_bytes, RECORD_BYTES_MAX));
        }
        if !self.large_block_bytes.is_power_of_two() || !(LARGE_BLOCK_BYTES_MIN..=LARGE_BLOCK_BYTES_MAX).contains(&self.large_block_bytes) {
            return invalid(format!("large block {} B: must be a power of two from {LARGE_BLOCK_BYTES_MIN} B to {LARGE_BLOCK_BYTES_MAX} B", self.large_block_bytes));
        }
        if self.defrag_lwm_pct >= 100 {
            return invalid(format!("defrag low-water mark {}%: must be below 100", self.defrag_lwm_pct));
        }
        if self.replication_factor == 0 {
            return invalid("replication factor must be at least 1".into());
        }
        let rate_ok = |r: f64| r.is_finite() && r >= 0.0;
        if !rate_ok(self.read_reqs_per_sec) || !rate_ok(self.write_reqs_per_sec) {
            return invalid("request rates must be finite and not negative".into());
        }
        let stored_record_bytes = stored_record_bytes(self.record_bytes);
        let records_per_large_block = self.large_block_bytes / stored_record_bytes;
        if records_per_large_block == 0 {
            return invalid(format!("a {stored_record_bytes} B record does not fit a {} B large block", self.large_block_bytes));
        }
        let internal_reads_per_sec = self.read_reqs_per_sec + self.write_reqs_per_sec * self.update_pct as f64 / 100.0;
        let internal_writes_per_sec = self.replication_factor as f64 * self.write_reqs_per_sec;
        let original_large_block_writes_per_sec = internal_writes_per_sec / records_per_large_block as f64;
        let write_amplification = 100.0 / (100.0 - self.defrag_lwm_pct as f64);
        let large_block_writes_per_sec = original_large_block_writes_per_sec * write_amplification;
        let large_block_reads_per_sec = if self.no_defrag_reads { 0.0 } else { large_block_writes_per_sec };
        Ok(Rates {
            stored_record_bytes,
            records_per_large_block,
            internal_reads_per_sec,
            internal_writes_per_sec,
            original_large_block_writes_per_sec,
            write_amplification,
            large_block_writes_per_sec,
            large_block_reads_per_sec,
        })
    }
}

/// What ACT derives from a [`Workload`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rates {
    /// The record size rounded up to 16 B.
    pub stored_record_bytes: u32,
    /// Whole records per large block (integer division, as ACT).
    pub records_per_large_block: u32,
    /// Small record reads per second: reads plus the reads updates cause.
    pub internal_reads_per_sec: f64,
    /// Record writes per second: writes times the replication factor.
    pub internal_writes_per_sec: f64,
    /// Large blocks filled by new records per second, before defragmentation.
    pub original_large_block_writes_per_sec: f64,
    pub write_amplification: f64,
    pub large_block_writes_per_sec: f64,
    pub large_block_reads_per_sec: f64,
}

/// `record_bytes` rounded up to the 16-byte storage granularity.
pub fn stored_record_bytes(record_bytes: u32) -> u32 {
    record_bytes.div_ceil(RECORD_GRANULARITY_BYTES) * RECORD_GRANULARITY_BYTES
}

/// The size of one small read on a device whose smallest direct I/O is `min_op_bytes`: the
/// stored record rounded up to whole `min_op_bytes` units.
pub fn device_read_bytes(stored_record_bytes: u32, min_op_bytes: u32) -> u32 {
    stored_record_bytes.div_ceil(min_op_bytes) * min_op_bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 0.005
    }

    #[test]
    fn the_1x_defaults_give_acts_worked_example() {
        // 1000 writes/s of 1536 B records: 85 whole records per 128 KiB block, 11.76 blocks/s,
        // doubled by defragmentation at a 50% low-water mark: 23.53 large-block writes and
        // reads per second, beside 2000 small reads per second.
        let r = Workload::default().rates().unwrap();
        assert_eq!((r.stored_record_bytes, r.records_per_large_block), (1536, 85));
        assert!(close(r.original_large_block_writes_per_sec, 11.76), "{r:?}");
        assert_eq!(r.write_amplification, 2.0);
        assert!(close(r.large_block_writes_per_sec, 23.53) && close(r.large_block_reads_per_sec, 23.53), "{r:?}");
        assert_eq!((r.internal_reads_per_sec, r.internal_writes_per_sec), (2000.0, 1000.0));
        // About 3 MiB/s of large-block traffic each way.
        let mib = r.large_block_writes_per_sec * 131072.0 / (1 << 20) as f64;
        assert!((2.9..3.0).contains(&mib), "{mib}");
    }

    #[test]
    fn the_readme_example_rounds_1500_bytes_to_1504_and_divides_whole_records() {
        // The README quotes 22.95 blocks/s for 1500 B records, dividing by 131072/1504 = 87.15;
        // the code divides by whole records (87), which gives 22.99.
        let r = Workload { record_bytes: 1500, ..Workload::default() }.rates().unwrap();
        assert_eq!((r.stored_record_bytes, r.records_per_large_block), (1504, 87));
        assert!(close(r.large_block_writes_per_sec, 2000.0 / 87.0), "{r:?}");
        assert!((r.large_block_writes_per_sec - 22.95).abs() > 0.03, "integer division, not the README's rounding");
    }

    #[test]
    fn ratings_multiply_both_rates_and_the_block_rates_follow() {
        let base = Workload::default();
        let r3 = base.at_rating(3).rates().unwrap();
        assert_eq!((r3.internal_reads_per_sec, r3.internal_writes_per_sec), (6000.0, 3000.0));
        assert!(close(r3.large_block_writes_per_sec, 3.0 * 2000.0 / 85.0));
        let r6 = base.at_rating(6);
        assert_eq!((r6.read_reqs_per_sec, r6.write_reqs_per_sec), (12000.0, 6000.0));
    }

    #[test]
    fn update_replication_defrag_and_no_defrag_reads_change_what_acts_formulas_say() {
        let w = Workload { update_pct: 50, replication_factor: 2, defrag_lwm_pct: 75, no_defrag_reads: true, ..Workload::default() };
        let r = w.rates().unwrap();
        assert_eq!(r.internal_reads_per_sec, 2000.0 + 500.0);
        assert_eq!(r.internal_writes_per_sec, 2000.0);
        assert_eq!(r.write_amplification, 4.0);
        assert!(close(r.large_block_writes_per_sec, 2000.0 / 85.0 * 4.0));
        assert_eq!(r.large_block_reads_per_sec, 0.0);
    }

    #[test]
    fn record_sizes_round_to_16_bytes_then_to_the_devices_direct_io_unit() {
        assert_eq!((stored_record_bytes(1), stored_record_bytes(16), stored_record_bytes(17)), (16, 16, 32));
        assert_eq!(device_read_bytes(1536, 512), 1536);
        assert_eq!(device_read_bytes(1536, 4096), 4096);
        assert_eq!(device_read_bytes(1504, 512), 1536);
    }

    #[test]
    fn impossible_parameters_are_refused_not_divided_by() {
        for w in [
            Workload { record_bytes: 0, ..Workload::default() },
            Workload { record_bytes: RECORD_BYTES_MAX + 1, ..Workload::default() },
            Workload { large_block_bytes: 100_000, ..Workload::default() },
            Workload { large_block_bytes: 16 << 20, ..Workload::default() },
            Workload { record_bytes: 200_000, large_block_bytes: 128 * 1024, ..Workload::default() },
            Workload { defrag_lwm_pct: 100, ..Workload::default() },
            Workload { replication_factor: 0, ..Workload::default() },
            Workload { read_reqs_per_sec: f64::NAN, ..Workload::default() },
        ] {
            assert!(matches!(w.rates(), Err(ActError::Config(_))), "{w:?}");
        }
    }
}
