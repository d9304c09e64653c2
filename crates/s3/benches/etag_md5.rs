//! The gateway's ETag hashing: 1 MiB chunks of eight uploads hashed one after another (one
//! stream at a time, as a single MD5 must be), in md5-many's SIMD lanes, and through the
//! gateway's hashing thread (`Md5Lanes`) from eight concurrent uploads of 8 MiB each; and
//! three chunks, fewer than the lanes, each way.
//!
//!   cargo bench -p spindle-s3 --bench etag_md5

use bytes::Bytes;
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use md5_many::{Md5Many, Md5State};
use spindle_s3::Md5Lanes;

const CHUNK: usize = 1 << 20;
const UPLOADS: usize = 8;

fn chunks() -> Vec<Bytes> {
    (0..UPLOADS).map(|i| Bytes::from((0..CHUNK).map(|b| (b * 31 + i) as u8).collect::<Vec<u8>>())).collect()
}

fn etag_md5(c: &mut Criterion) {
    let data = chunks();
    let mut g = c.benchmark_group("etag_md5");
    g.throughput(Throughput::Bytes((UPLOADS * CHUNK) as u64));
    g.bench_function("8 chunks, one stream after another", |b| {
        b.iter(|| {
            let mut states = [Md5State::new(); UPLOADS];
            for (s, d) in states.iter_mut().zip(&data) {
                s.update(d);
            }
            black_box(states)
        })
    });
    let engine = Md5Many::new();
    g.bench_function("8 chunks in SIMD lanes (update_many)", |b| {
        b.iter(|| {
            let mut states = [Md5State::new(); UPLOADS];
            let inputs: Vec<&[u8]> = data.iter().map(|d| &d[..]).collect();
            engine.update_many(&mut states, &inputs);
            black_box(states)
        })
    });
    // Fewer chunks than lanes: md5-many's general path, and the same chunks with the empty
    // lanes filled by copies (what the hashing thread does), against one after another.
    g.throughput(Throughput::Bytes((3 * CHUNK) as u64));
    g.bench_function("3 chunks, one stream after another", |b| {
        b.iter(|| {
            let mut states = [Md5State::new(); 3];
            for (s, d) in states.iter_mut().zip(&data) {
                s.update(d);
            }
            black_box(states)
        })
    });
    g.bench_function("3 chunks in SIMD lanes, 5 lanes empty (update_many)", |b| {
        b.iter(|| {
            let mut states = [Md5State::new(); 3];
            let inputs: Vec<&[u8]> = data[..3].iter().map(|d| &d[..]).collect();
            engine.update_many(&mut states, &inputs);
            black_box(states)
        })
    });
    g.bench_function("3 chunks in SIMD lanes, 5 lanes filled with copies", |b| {
        b.iter(|| {
            let mut states = [Md5State::new(); UPLOADS];
            let inputs: Vec<&[u8]> = (0..UPLOADS).map(|i| &data[i.min(2)][..]).collect();
            engine.update_many(&mut states, &inputs);
            black_box(states)
        })
    });
    let lanes = Md5Lanes::start();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    g.throughput(Throughput::Bytes((UPLOADS * CHUNK * 8) as u64));
    g.bench_function("8 uploads of 8 MiB through the hashing thread", |b| {
        b.iter(|| {
            rt.block_on(futures_util::future::join_all(data.iter().map(|d| {
                let lanes = &lanes;
                async move {
                    let mut md5 = lanes.stream();
                    for _ in 0..8 {
                        md5.update(d.clone()).await;
                    }
                    md5.finalize().await
                }
            })))
        })
    });
    g.finish();
}

criterion_group!(benches, etag_md5);
criterion_main!(benches);
