//! `spindle bench act`: the Aerospike Certification Tool's model of a database's storage load,
//! as a device certification (docs/methodology section 2). Device mode runs ACT's I/O pattern
//! on a file or block device with direct I/O; drive mode runs the same transaction rates as
//! GETs and PUTs against a Kinetic drive. Both pace open-loop, slice the run, report per slice
//! the percent of operations over 1 to 64 ms, judge the slices by ACT's criteria, and can step
//! the load up a ladder of ratings (1x = 2000 reads/s + 1000 writes/s) to find the highest
//! one that passes.
//!
//! Modules: `rates` (parameters and derived rates), `pacer` (open-loop scheduling), `run`
//! (one run: threads, slices), `histogram` (ACT's buckets), `criteria` (pass/fail),
//! `certify` (the ladder), `device` + `target_guard` + `aligned` (device mode), `drive`
//! (drive mode), `text` and `plot` (output).

mod aligned;
pub mod certify;
pub mod criteria;
pub mod device;
pub mod drive;
pub mod histogram;
pub mod pacer;
pub mod plot;
pub mod rates;
pub mod run;
pub mod target_guard;
pub mod text;

use std::sync::Arc;

use serde::Serialize;
use spindle_client::ClientError;

use crate::paper::Machine;
use certify::{certify, check_ladder};
use criteria::{judge, Criterion, Judged, Verdict, CRITERIA};
use device::{Device, DeviceInfo, DeviceSpec};
use drive::{Drive, DriveSpec, IoThread, Slots, DRAIN_TIMEOUT, IN_FLIGHT_MAX};
use rates::{Rates, Workload};
use run::{Outcome, Slice, Timing};

/// Version of the result document's layout.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum ActError {
    #[error("invalid ACT configuration: {0}")]
    Config(String),
    #[error("refused: {0}")]
    Refused(String),
    #[error("{0}")]
    Io(String),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("plot: {0}")]
    Plot(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Device,
    Drive,
}

/// What every certification takes besides its target.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// The 1x workload; each run multiplies its rates by the rating.
    pub workload: Workload,
    pub timing: Timing,
    pub ladder: Vec<u32>,
    pub seed: u64,
    /// Salt the space before the first run.
    pub prep: bool,
    /// After salting, wait this long before the first run: lets a device's burst allowance
    /// (a cloud or VM disk's token bucket) refill and a drive finish its compactions, so the
    /// first run does not pay for the preparation.
    #[serde(serialize_with = "run::secs")]
    pub settle: std::time::Duration,
}

impl Plan {
    fn check(&self) -> Result<(), ActError> {
        check_ladder(&self.ladder)?;
        self.timing.check()?;
        self.workload.rates().map(drop)
    }
}

/// One run at one rating.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub rating: u32,
    pub rates: Rates,
    pub outcome: Outcome,
    pub verdict: Verdict,
}

/// The result document: versioned, with the machine it ran on.
#[derive(Debug, Clone, Serialize)]
pub struct ActResults {
    pub schema_version: u32,
    pub mode: Mode,
    pub target: String,
    pub machine: Machine,
    pub plan: Plan,
    pub criteria: [Criterion; 3],
    pub device: Option<DeviceInfo>,
    pub drive: Option<DriveSpec>,
    pub prep_seconds: Option<f64>,
    pub runs: Vec<RunReport>,
    /// The highest rating that passed, if any.
    pub certified_rating: Option<u32>,
    /// False until the stepping finished (a partial document holds the runs so far).
    pub complete: bool,
}

/// What a certification reports while it goes.
pub enum Event<'a> {
    Prepared { seconds: f64 },
    RunStarted { rating: u32, rates: &'a Rates, histograms: &'a [&'static str] },
    Slice(&'a Slice),
    RunFinished { results: &'a ActResults },
}

/// After salting: the machine's dirty pages are written back now (sync(2)), so the first run
/// does not meet the preparation's write-back (a drive's salted data sits in the page cache
/// until the kernel flushes it, half a minute later, in the middle of a run); then the plan's
/// settling time passes.
fn settle(wait: std::time::Duration) {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    #[allow(unsafe_code, reason = "sync(2) has no safe wrapper in std")]
    unsafe { libc::sync() };
    std::thread::sleep(wait);
}

fn new_results(mode: Mode, target: String, plan: &Plan) -> ActResults {
    ActResults {
        schema_version: SCHEMA_VERSION,
        mode,
        target,
        machine: Machine::this(),
        plan: plan.clone(),
        criteria: CRITERIA,
        device: None,
        drive: None,
        prep_seconds: None,
        runs: Vec::new(),
        certified_rating: None,
        complete: false,
    }
}

fn finish_run(rating: u32, rates: Rates, outcome: Outcome) -> RunReport {
    let judged = outcome.slices.iter().flat_map(|s| s.histograms.iter().filter(|h| h.judged).map(move |h| Judged { slice: s.index, histogram: &h.histogram, stats: &h.stats }));
    let verdict = judge(judged, outcome.stopped.as_deref());
    RunReport { rating, rates, outcome, verdict }
}

/// Steps `plan.ladder` with `one_run(rating, rates, on_slice)`, reporting through `events`.
fn step(results: &mut ActResults, events: &mut dyn FnMut(Event<'_>), mut one_run: impl FnMut(&Rates, &mut dyn FnMut(&Slice)) -> Result<Outcome, ActError>, histograms: &[&'static str]) -> Result<(), ActError> {
    let ladder = results.plan.ladder.clone();
    let workload = results.plan.workload.clone();
    let (_, certified) = certify(
        &ladder,
        |rating| {
            let rates = workload.at_rating(rating).rates()?;
            events(Event::RunStarted { rating, rates: &rates, histograms });
            let outcome = one_run(&rates, &mut |s| events(Event::Slice(s)))?;
            let report = finish_run(rating, rates, outcome);
            let passed = report.verdict.passed;
            results.runs.push(report);
            events(Event::RunFinished { results });
            Ok::<bool, ActError>(passed)
        },
        |passed| *passed,
    )?;
    results.certified_rating = certified;
    results.complete = true;
    Ok(())
}

/// Device mode: opens (and with `plan.prep` salts) the device, then steps the ladder.
pub fn certify_device(spec: &DeviceSpec, plan: &Plan, events: &mut dyn FnMut(Event<'_>)) -> Result<ActResults, ActError> {
    plan.check()?;
    let device = Device::open(spec, &plan.workload)?;
    let mut results = new_results(Mode::Device, spec.path.display().to_string(), plan);
    results.device = Some(device.info.clone());
    if plan.prep {
        let seconds = device.prep(plan.seed, |_, _, _| {})?;
        settle(plan.settle);
        results.prep_seconds = Some(seconds);
        events(Event::Prepared { seconds });
    }
    let device = Arc::new(device);
    let (timing, seed, large) = (plan.timing, plan.seed, plan.workload.large_block_bytes);
    step(&mut results, events, |rates, on_slice| Ok(run::run(device.streams(rates, large, seed), timing, || {}, on_slice)), &["reads", "large-block-reads", "large-block-writes"])?;
    Ok(results)
}

/// Drive mode: connects (and with `plan.prep` puts every key), then steps the ladder. The
/// connections live on their own I/O thread; call from outside an async runtime (or inside
/// `block_in_place`).
pub fn certify_drive(spec: DriveSpec, plan: &Plan, events: &mut dyn FnMut(Event<'_>)) -> Result<ActResults, ActError> {
    plan.check()?;
    let io = IoThread::start()?;
    let (record_bytes, seed) = (plan.workload.record_bytes, plan.seed);
    let drive = Arc::new(io.run(Drive::connect(spec.clone(), record_bytes, seed))??);
    let mut results = new_results(Mode::Drive, spec.target.clone(), plan);
    results.drive = Some(spec);
    if plan.prep {
        let d = drive.clone();
        let seconds = io.run(async move { d.prep(seed).await })??;
        settle(plan.settle);
        results.prep_seconds = Some(seconds);
        events(Event::Prepared { seconds });
    }
    let timing = plan.timing;
    step(
        &mut results,
        events,
        |rates, on_slice| {
            let slots = Arc::new(Slots::new(IN_FLIGHT_MAX));
            let streams = drive.streams(rates, &io.handle, timing.max_lag, &slots, seed);
            let mut out = run::run(streams, timing, || {
                slots.drain(DRAIN_TIMEOUT);
            }, on_slice);
            if !slots.drain(std::time::Duration::ZERO) && out.stopped.is_none() {
                out.stopped = Some(format!("requests still unanswered {} s after the end", DRAIN_TIMEOUT.as_secs()));
            }
            Ok(out)
        },
        &["gets", "puts"],
    )?;
    Ok(results)
}
