//! One certification run at one load: every stream's workers paced open-loop on their own
//! threads, the shared histograms snapshotted at each slice boundary and differenced into
//! slices, until the duration is over or a stream stops the test.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::ActError;
use super::histogram::{AtomicBuckets, Buckets, SliceStats};
use super::pacer::{work, Clock, OpResult, RealClock, Schedule, Stop, Stream};

/// A worker's operation, given the instant it was due; it records its own latency (from that
/// instant) into its stream's histogram, now or, for asynchronous requests, when they finish.
pub type Op = Box<dyn FnMut(Instant) -> OpResult + Send>;

/// One kind of operation at one rate, run by one worker per op.
pub struct StreamSpec {
    /// The histogram's name, as ACT prints it (`reads`, `large-block-writes`, ...).
    pub name: &'static str,
    /// Whether the pass/fail criteria apply to it.
    pub judged: bool,
    pub rate: f64,
    pub hist: Arc<AtomicBuckets>,
    pub ops: Vec<Op>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Timing {
    #[serde(serialize_with = "secs")]
    pub duration: Duration,
    #[serde(serialize_with = "secs")]
    pub slice: Duration,
    /// None: never stop for lag (ACT's max-lag-sec 0).
    #[serde(serialize_with = "opt_secs")]
    pub max_lag: Option<Duration>,
}

impl Timing {
    pub fn check(&self) -> Result<(), ActError> {
        if self.duration.is_zero() || self.slice.is_zero() {
            return Err(ActError::Config("duration and slice must be longer than zero".into()));
        }
        if self.duration.as_secs_f64() / self.slice.as_secs_f64() > SLICES_MAX as f64 {
            return Err(ActError::Config(format!("at most {SLICES_MAX} slices per run")));
        }
        Ok(())
    }
}

/// Bounds the slices kept per run (a day in one-second slices).
pub const SLICES_MAX: u64 = 86_400;

pub(crate) fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

fn opt_secs<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NamedStats {
    pub histogram: String,
    pub judged: bool,
    #[serde(flatten)]
    pub stats: SliceStats,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Slice {
    /// 1-based, as act_latency.py numbers them.
    pub index: usize,
    /// Seconds from the start to the end of the slice.
    pub end_secs: f64,
    pub histograms: Vec<NamedStats>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub slices: Vec<Slice>,
    /// Each histogram over the whole run.
    pub totals: Vec<NamedStats>,
    /// Per stream, how late idle workers woke for their operations' due times: the machine's
    /// scheduling noise, independent of the target (a worker still busy with its previous
    /// operation is not counted). Well under a millisecond on an idle machine; when not, the
    /// machine, not the target, was slow.
    pub wake_lateness: Vec<NamedStats>,
    pub stopped: Option<String>,
    pub seconds: f64,
}

/// How often the slicing thread looks at the stop flag while waiting for a boundary.
const STOP_POLL: Duration = Duration::from_millis(20);

/// Runs `streams` for `timing.duration`, calling `on_slice` as each slice completes. `drain`
/// runs after the workers have stopped and before the last snapshot: it waits for requests
/// still in flight, so their latencies land in the last slice.
pub fn run(streams: Vec<StreamSpec>, timing: Timing, drain: impl FnOnce(), mut on_slice: impl FnMut(&Slice)) -> Outcome {
    let stop = Stop::default();
    let clock = RealClock { start: Instant::now() };
    let start = clock.start;
    let shapes: Vec<(&'static str, bool, Arc<AtomicBuckets>)> = streams.iter().map(|s| (s.name, s.judged, s.hist.clone())).collect();
    let lateness: Vec<(&'static str, bool, Arc<AtomicBuckets>)> = streams.iter().map(|s| (s.name, false, Arc::new(AtomicBuckets::default()))).collect();
    let snapshot = || shapes.iter().map(|(_, _, h)| h.snapshot()).collect::<Vec<(Buckets, u64)>>();
    let mut slices = Vec::new();
    let zero: Vec<(Buckets, u64)> = shapes.iter().map(|_| (Buckets::default(), 0)).collect();
    std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for (spec, (_, _, late)) in streams.into_iter().zip(&lateness) {
            let stream = Arc::new(Stream::new(Schedule { rate: spec.rate, duration: timing.duration }));
            for op in spec.ops {
                let (stream, clock, stop, name, late) = (stream.clone(), &clock, &stop, spec.name, late.clone());
                let mut op = op;
                handles.push(scope.spawn(move || {
                    work(&stream, clock, stop, timing.max_lag, name, |t| {
                        if t.waited {
                            late.record(clock.now().saturating_sub(t.due));
                        }
                        op(start + t.due)
                    })
                }));
            }
        }
        let mut previous = zero.clone();
        let mut drain = Some(drain);
        for index in 1.. {
            let boundary = (timing.slice * index as u32).min(timing.duration);
            let last = boundary >= timing.duration;
            while !last && !stop.is_stopped() && clock.now() < boundary {
                std::thread::sleep((boundary - clock.now()).min(STOP_POLL));
            }
            let ending = last || stop.is_stopped();
            if ending {
                for h in handles.drain(..) {
                    if h.join().is_err() {
                        stop.stop("a worker thread panicked".into());
                    }
                }
                if let Some(d) = drain.take() {
                    d();
                }
            }
            // A stopped run's last slice ends when it stopped.
            let end = if stop.is_stopped() { clock.now() } else { boundary };
            let current = snapshot();
            let slice = Slice { index, end_secs: end.as_secs_f64(), histograms: named(&shapes, &current, &previous) };
            on_slice(&slice);
            slices.push(slice);
            previous = current;
            if ending {
                break;
            }
        }
    });
    let totals = named(&shapes, &snapshot(), &zero);
    let lateness_now: Vec<(Buckets, u64)> = lateness.iter().map(|(_, _, h)| h.snapshot()).collect();
    let wake_lateness = named(&lateness, &lateness_now, &zero);
    Outcome { slices, totals, wake_lateness, stopped: stop.reason(), seconds: start.elapsed().as_secs_f64() }
}

fn named(shapes: &[(&'static str, bool, Arc<AtomicBuckets>)], now: &[(Buckets, u64)], before: &[(Buckets, u64)]) -> Vec<NamedStats> {
    shapes
        .iter()
        .zip(now.iter().zip(before))
        .map(|((name, judged, _), ((b, e), (b0, e0)))| NamedStats { histogram: name.to_string(), judged: *judged, stats: SliceStats::of(&b.since(b0), e - e0) })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(name: &'static str, rate: f64, workers: usize, service: Duration) -> StreamSpec {
        let hist = Arc::new(AtomicBuckets::default());
        let ops = (0..workers)
            .map(|_| {
                let hist = hist.clone();
                Box::new(move |due: Instant| {
                    std::thread::sleep(service);
                    hist.record(due.elapsed());
                    Ok(())
                }) as Op
            })
            .collect();
        StreamSpec { name, judged: true, rate, hist, ops }
    }

    #[test]
    fn slices_partition_the_operations_of_a_run() {
        // 300 ops/s and 50 ops/s for 0.6 s in 0.2 s slices: 180 + 30 operations in 3 slices.
        let timing = Timing { duration: Duration::from_millis(600), slice: Duration::from_millis(200), max_lag: Some(Duration::from_secs(5)) };
        let mut seen = 0;
        let out = run(vec![stream("reads", 300.0, 2, Duration::ZERO), stream("large-block-writes", 50.0, 1, Duration::ZERO)], timing, || {}, |_| seen += 1);
        assert_eq!((out.slices.len(), seen), (3, 3));
        assert_eq!(out.stopped, None);
        assert_eq!((out.totals[0].stats.ops, out.totals[1].stats.ops), (180, 30));
        let sum: u64 = out.slices.iter().map(|s| s.histograms[0].stats.ops).sum();
        assert_eq!(sum, 180, "every operation is in exactly one slice");
        assert_eq!(out.slices.last().unwrap().end_secs, 0.6);
        // A wake-up is counted only for an operation its worker slept until: never more than
        // the stream's operations. (How many depends on how busy the machine is: a worker
        // that is late never sleeps.)
        for (woken, total) in out.wake_lateness.iter().zip(&out.totals) {
            assert!(woken.stats.ops <= total.stats.ops, "{} wake-ups for {} operations", woken.stats.ops, total.stats.ops);
        }
    }

    #[test]
    fn a_stream_that_cannot_keep_up_stops_the_run_early_with_a_partial_last_slice() {
        // One worker, 10 ms per operation, asked for 1000/s: it falls 50 ms behind within
        // about 55 ms.
        let timing = Timing { duration: Duration::from_secs(10), slice: Duration::from_secs(1), max_lag: Some(Duration::from_millis(50)) };
        let out = run(vec![stream("reads", 1000.0, 1, Duration::from_millis(10))], timing, || {}, |_| {});
        assert!(out.stopped.as_deref().unwrap_or("").contains("reads can't keep up"), "{:?}", out.stopped);
        assert_eq!(out.slices.len(), 1);
        assert!(out.seconds < 5.0, "stopped long before the 10 s duration: {}", out.seconds);
        // Every operation after the first was late by its predecessors' service time.
        assert!(out.totals[0].stats.over(8).unwrap() > 50.0);
    }
}
