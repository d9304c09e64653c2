//! The erasure code's speed on one core: a 1 MiB stripe (and the largest, 4 MiB less headers, at 4+2) encoded into its
//! shards (parity computed, each shard checksummed), decoded with every data shard (a healthy
//! read: checked and joined), and decoded with two data shards lost (a degraded read), for
//! 4+2 and 8+3. Throughput is of stripe bytes.
//!
//!   cargo bench -p spindle-cluster --bench erasure

use bytes::Bytes;
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use spindle_cluster::erasure::Code;

fn erasure(c: &mut Criterion) {
    for (code, len) in [("4+2", 1 << 20), ("4+2", 0), ("8+3", 1 << 20)] {
        let code: Code = code.parse().unwrap();
        // 0: the largest stripe the code takes (shards of a whole drive value).
        let len = if len == 0 { code.max_stripe() } else { len };
        let stripe: Vec<u8> = (0..len).map(|i| (i * 131 % 251) as u8).collect();
        let shards = code.encode(&stripe).unwrap();
        let payloads: Vec<Option<Bytes>> = shards.iter().enumerate().map(|(i, s)| Some(code.verify(i, len, s).unwrap())).collect();
        let mut degraded = payloads.clone();
        degraded[0] = None;
        degraded[1] = None;
        let mut g = c.benchmark_group(format!("erasure {code} {} KiB", len >> 10));
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_function("encode", |b| b.iter(|| black_box(code.encode(black_box(&stripe)).unwrap())));
        g.bench_function("verify and decode, healthy", |b| {
            b.iter(|| {
                let checked: Vec<Option<Bytes>> = shards.iter().take(usize::from(code.data)).enumerate().map(|(i, s)| Some(code.verify(i, len, s).unwrap())).collect();
                black_box(code.decode(len, &checked).unwrap())
            })
        });
        g.bench_function("decode, two data shards lost", |b| b.iter(|| black_box(code.decode(len, black_box(&degraded)).unwrap())));
        g.finish();
    }
}

criterion_group!(benches, erasure);
criterion_main!(benches);
