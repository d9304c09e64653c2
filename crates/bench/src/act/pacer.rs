//! Open-loop pacing, as ACT paces: operation `i` of a stream is due `i / rate` seconds after
//! the start, whatever happened to the operations before it, and its latency counts from that
//! due time. A slow operation therefore makes the ones queued behind it late, and their
//! lateness shows in the histograms instead of silently lowering the offered load
//! (coordinated omission). A stream that falls further behind than the max lag stops the test.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// When each operation of one stream is due.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Schedule {
    /// Operations per second; 0 means the stream is idle.
    pub rate: f64,
    /// Operations due at or after this offset are not run.
    pub duration: Duration,
}

impl Schedule {
    /// The offset from the start at which operation `index` is due, to the nanosecond.
    pub fn due(&self, index: u64) -> Option<Duration> {
        if self.rate <= 0.0 || !self.rate.is_finite() {
            return None;
        }
        // Whole seconds and the remainder separately: exact for any index a test reaches.
        let per_second = self.rate;
        let secs = (index as f64 / per_second).floor();
        let rest = index as f64 - secs * per_second;
        let due = Duration::from_secs(secs as u64) + Duration::from_nanos((rest * 1e9 / per_second).round() as u64);
        (due < self.duration).then_some(due)
    }

    /// How many operations fall within the duration.
    pub fn count(&self) -> u64 {
        if self.rate <= 0.0 || !self.rate.is_finite() {
            return 0;
        }
        (self.duration.as_secs_f64() * self.rate).ceil() as u64
    }
}

/// Time as the pacer sees it: real for runs, simulated for tests.
pub trait Clock: Sync {
    /// Time since the start.
    fn now(&self) -> Duration;
    fn sleep_until(&self, at: Duration);
}

/// The real clock, from a start instant.
pub struct RealClock {
    pub start: Instant,
}

impl Clock for RealClock {
    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    fn sleep_until(&self, at: Duration) {
        // thread::sleep wakes within tens of microseconds on Linux (an async timer rounds to
        // whole milliseconds, which would put every operation near ACT's first threshold).
        let now = self.now();
        if at > now {
            std::thread::sleep(at - now);
        }
    }
}

/// One operation handed to a worker.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tick {
    pub index: u64,
    /// When it was due, from the start.
    pub due: Duration,
    /// The worker was idle before the due time and slept until it (rather than starting late
    /// because its previous operation ran long).
    pub waited: bool,
}

/// Shared by the workers of one stream: they take operations in order from one counter.
pub struct Stream {
    pub schedule: Schedule,
    next: AtomicU64,
}

impl Stream {
    pub fn new(schedule: Schedule) -> Stream {
        Stream { schedule, next: AtomicU64::new(0) }
    }
}

/// The test-wide stop: the first reason wins.
#[derive(Default)]
pub struct Stop {
    stopped: AtomicBool,
    reason: Mutex<Option<String>>,
}

impl Stop {
    pub fn stop(&self, reason: String) {
        let mut r = self.reason.lock().unwrap_or_else(|e| e.into_inner());
        r.get_or_insert(reason);
        self.stopped.store(true, Ordering::Release);
    }

    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    pub fn reason(&self) -> Option<String> {
        self.reason.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// What a worker's operation may answer: go on, or stop the whole test with a reason (an I/O
/// error, say).
pub type OpResult = Result<(), String>;

/// A worker's loop: take the next operation, wait for its due time, check the lag, run it.
/// Returns when the stream's duration is over or the test stopped. `name` names the stream in
/// the stop reason ("reads can't keep up ...").
pub fn work(stream: &Stream, clock: &dyn Clock, stop: &Stop, max_lag: Option<Duration>, name: &str, mut op: impl FnMut(Tick) -> OpResult) {
    while !stop.is_stopped() {
        let index = stream.next.fetch_add(1, Ordering::Relaxed);
        let Some(due) = stream.schedule.due(index) else { return };
        let waited = clock.now() < due;
        clock.sleep_until(due);
        let lag = clock.now().saturating_sub(due);
        if let Some(max) = max_lag.filter(|m| lag > *m) {
            stop.stop(format!("{name} can't keep up: operation {index} started {:.1} s late (max lag {} s)", lag.as_secs_f64(), max.as_secs_f64()));
            return;
        }
        if let Err(reason) = op(Tick { index, due, waited }) {
            stop.stop(reason);
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A simulated clock for one thread: sleeping and working move it forward.
    struct FakeClock(Mutex<Cell<Duration>>);

    impl FakeClock {
        fn new() -> FakeClock {
            FakeClock(Mutex::new(Cell::new(Duration::ZERO)))
        }
        fn advance(&self, d: Duration) {
            let c = self.0.lock().unwrap();
            c.set(c.get() + d);
        }
    }

    impl Clock for FakeClock {
        fn now(&self) -> Duration {
            self.0.lock().unwrap().get()
        }
        fn sleep_until(&self, at: Duration) {
            let c = self.0.lock().unwrap();
            if at > c.get() {
                c.set(at);
            }
        }
    }

    #[test]
    fn due_times_are_exact_multiples_of_the_interval() {
        let s = Schedule { rate: 2000.0, duration: Duration::from_secs(3600) };
        assert_eq!(s.due(0), Some(Duration::ZERO));
        assert_eq!(s.due(1), Some(Duration::from_micros(500)));
        assert_eq!(s.due(2000), Some(Duration::from_secs(1)));
        assert_eq!(s.due(2000 * 3599 + 1), Some(Duration::from_secs(3599) + Duration::from_micros(500)));
        // A rate that does not divide a second: 23.53 large blocks per second.
        let s = Schedule { rate: 2000.0 / 85.0, duration: Duration::from_secs(60) };
        assert_eq!(s.due(2000), None, "due at 85 s, past the 60 s duration");
        assert_eq!(s.due(200), Some(Duration::from_millis(8500)));
        assert_eq!(s.count(), 1412, "ceil(60 x 23.53)");
        assert_eq!(Schedule { rate: 0.0, duration: Duration::from_secs(1) }.due(0), None);
    }

    #[test]
    fn an_idle_worker_starts_each_operation_on_time_and_latency_is_service_time() {
        let clock = FakeClock::new();
        let stream = Stream::new(Schedule { rate: 1000.0, duration: Duration::from_millis(100) });
        let stop = Stop::default();
        let mut starts = Vec::new();
        let mut latencies = Vec::new();
        work(&stream, &clock, &stop, Some(Duration::from_secs(10)), "reads", |t| {
            starts.push(clock.now());
            clock.advance(Duration::from_micros(300));
            latencies.push(clock.now() - t.due);
            Ok(())
        });
        assert_eq!(starts.len(), 100);
        assert!(starts.iter().enumerate().all(|(i, s)| *s == Duration::from_millis(i as u64)));
        assert!(latencies.iter().all(|l| *l == Duration::from_micros(300)));
        assert!(!stop.is_stopped());
    }

    #[test]
    fn a_stall_makes_the_operations_behind_it_late_and_their_lateness_counts() {
        // 1000/s, each operation 0.5 ms, except operation 10 which takes 20 ms: the next 20 or
        // so operations start late and their latency counts from their due time.
        let clock = FakeClock::new();
        let stream = Stream::new(Schedule { rate: 1000.0, duration: Duration::from_millis(100) });
        let stop = Stop::default();
        let mut latencies = Vec::new();
        work(&stream, &clock, &stop, None, "reads", |t| {
            clock.advance(if t.index == 10 { Duration::from_millis(20) } else { Duration::from_micros(500) });
            latencies.push((clock.now() - t.due).as_micros());
            Ok(())
        });
        assert_eq!(latencies[10], 20_000);
        // Operation 11 was due at 11 ms, starts at 30 ms, ends at 30.5 ms.
        assert_eq!(latencies[11], 19_500);
        // Each later one gains 0.5 ms on the schedule until it has caught up.
        assert_eq!(latencies[12], 19_000);
        assert_eq!(latencies[49], 500, "caught up after 39 operations x 0.5 ms");
        assert_eq!(latencies.len(), 100, "no operation skipped: the offered load stays the same");
    }

    #[test]
    fn falling_behind_by_more_than_the_max_lag_stops_the_test() {
        // Every operation takes 2 ms at 1000/s: operation i starts i ms late.
        let clock = FakeClock::new();
        let stream = Stream::new(Schedule { rate: 1000.0, duration: Duration::from_secs(10) });
        let stop = Stop::default();
        let mut ran = 0;
        work(&stream, &clock, &stop, Some(Duration::from_millis(50)), "large-block-writes", |_| {
            clock.advance(Duration::from_millis(2));
            ran += 1;
            Ok(())
        });
        // Operation i starts at 2i ms, i ms late: 51 is the first more than 50 ms late.
        assert_eq!(ran, 51);
        let reason = stop.reason().unwrap();
        assert!(reason.contains("large-block-writes can't keep up") && reason.contains("operation 51"), "{reason}");
    }

    #[test]
    fn an_operation_error_stops_the_test_with_its_reason() {
        let clock = FakeClock::new();
        let stream = Stream::new(Schedule { rate: 100.0, duration: Duration::from_secs(1) });
        let stop = Stop::default();
        work(&stream, &clock, &stop, None, "reads", |t| if t.index == 3 { Err("read failed".into()) } else { Ok(()) });
        assert_eq!(stop.reason().as_deref(), Some("read failed"));
    }

    #[test]
    fn real_threads_never_start_an_operation_before_it_is_due() {
        // 400 operations at 2000/s on 4 threads: each starts at or after its due time, every
        // one runs once, and the run ends no sooner than the last is due (199.5 ms). How late
        // they start depends on how busy the machine is, so no bound is put on it here: the
        // pacer's timing, lateness and lag are checked on the fake clock above.
        let clock = RealClock { start: Instant::now() };
        let stream = Stream::new(Schedule { rate: 2000.0, duration: Duration::from_millis(200) });
        let stop = Stop::default();
        let early = AtomicU64::new(0);
        let ran = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    work(&stream, &clock, &stop, None, "reads", |t| {
                        if clock.now() < t.due {
                            early.fetch_add(1, Ordering::Relaxed);
                        }
                        ran.fetch_add(1, Ordering::Relaxed);
                        Ok(())
                    })
                });
            }
        });
        assert_eq!(ran.load(Ordering::Relaxed), 400);
        assert_eq!(early.load(Ordering::Relaxed), 0, "operations started before their due time");
        assert!(clock.now() >= Duration::from_micros(199_500), "the run ended at {:?}, before its last operation was due", clock.now());
    }
}
