/*!
The words every layer shares, and nothing else: the migration pattern, the
re-arm mode, the switch witness, the output format of the commands that read
results back, the exit statuses, the confidence of the reported intervals,
the run.json schema version and why a run stopped.

This module imports nothing of the crate, so any module may import it
without making a cycle. The flags' enums derive clap's `ValueEnum` here
rather than through a newtype in `cli`: their doc comments are the `--help`
text of the flags that take them, and the derive adds no crate import.
*/

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

/// run.json's `schema_version` (the fingerprint inside it has its own).
/// 1: delta-only judgement; 2: interrupts and deliveries judged apart,
/// `judge` settings; 3: the anomaly list uses anomalies.csv's column names,
/// `tool` in the incomplete stage too.
pub const RUN_SCHEMA_VERSION: u32 = 3;

/// The interrupt skid of a run's event, measured before the run as
/// `pmustress check`'s skid probe measures it: `overflows` overflows every
/// `period` events on the calling thread, counted in user mode only, so
/// that no interrupt waits on the kernel's masking; how far past its
/// overflow each interrupt came (p50, p99, max), and how many overflows
/// never interrupted (`missed`: a stop cleared them, or the PMU lost them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkidMeasure {
    pub overflows: u64,
    pub period: u64,
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
    pub missed: u64,
    pub throttles: u64,
}

/// Exit statuses, for `git bisect run` among others.
pub const EXIT_CLEAN: i32 = 0;
pub const EXIT_DROPPED: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_CANNOT_TEST: i32 = 125;

/// The largest value a run's histograms hold before they grow: 2^32 (a
/// delta or a lateness of 4.3 s of a software clock, or of 4.3 billion
/// events, tens of thousands of periods). hdrhistogram grows a histogram by
/// writing zeros over every new bucket, so one late interrupt after a
/// hold-up made each histogram it reached resident up to that magnitude for
/// the rest of the run: the steps a long run grew by. Sized up front (about
/// 180 KiB each at 3 significant figures) the run's memory is what it is
/// from the start; a larger value still grows it, once.
pub const HISTOGRAM_HIGH: u64 = 1 << 32;

/// A histogram of a run's counts at 3 significant figures, sized up to
/// `HISTOGRAM_HIGH` and growing beyond it.
pub fn histogram() -> hdrhistogram::Histogram<u64> {
    let mut h = hdrhistogram::Histogram::new_with_bounds(1, HISTOGRAM_HIGH, 3)
        .expect("1..2^32 at 3 significant figures is a valid histogram");
    h.auto(true);
    h
}

/// Confidence of the intervals reported with rates.
pub const CONFIDENCE: f64 = 0.95;

/// A run that saw no dropped interrupt is only "clean" if its overflows,
/// and its witnessed stops, each bound the dropped rate below this
/// (one-sided, at `CONFIDENCE`): zero drops in fewer than 299 overflows or
/// 299 stops say nothing, and the run is 125 "not enough overflows" or
/// "not enough stops" (in every mode, and in a replay of its stream).
pub const MIN_EVIDENCE_RATE: f64 = 0.01;

/// How the migrator moves workers between the CPUs of the set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MigrateMode {
    /// Pin each worker and never move it.
    None,
    /// Bounce each worker between two CPUs of the set.
    PingPong,
    /// Move each worker to the next CPU of the set in turn.
    RoundRobin,
    /// Move each worker to a random other CPU of the set.
    Random,
}

/// Which workers a migrator moves (`--move`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MoveWhich {
    /// Every worker in turn, running or waiting.
    Any,
    /// Only workers that ran user code since their migrator last looked:
    /// a waiting worker's move stops nothing.
    Running,
}

/// How event stops (context switches) are witnessed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SwitchWitness {
    /// counts, falling back to times where the kernel forbids counts (a
    /// software clock's judge needs no stops, but its stress is counted in
    /// them).
    Auto,
    /// A context-switch event in the overflow event's group samples the
    /// event's count at every switch-out: drops are then judged exactly
    /// (needs perf_event_paranoid <= 1 or CAP_PERFMON).
    Counts,
    /// PERF_RECORD_SWITCH: the time of every switch-out, not the count.
    Times,
    /// No witness: a gap across an unwitnessed stop may be ambiguous.
    None,
}

/// How the counter is re-armed between overflows (`--mode`): what the
/// worker does after each signal, and so which rules the judge replays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RearmMode {
    /// One fixed sample_period; deltas are differences of read() values.
    Free,
    /// rr-style: DISABLE, RESET, PERIOD, ENABLE after every signal; the read
    /// value is the delta.
    Reset,
}

/// What the judge takes the PMU driver to do with an overflow pending at a
/// context switch (`--driver-rules`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DriverRules {
    /// Lost there, its period consumed by the restart: every arm64 kernel
    /// to date.
    Stock,
    /// Delivered after the restart, late (a driver with the fix of
    /// qemu/patches/fix.patch); lost only at the last stop or a PERIOD.
    Delivering,
    /// Both followed; a driver the records refute drops out. Where they
    /// refute neither (reset mode's grid starts again at every reset; an
    /// interrupt skid that never varies), the stock driver's rules decide,
    /// and the drops only they claim are counted apart
    /// (`dropped_assuming_stock`).
    Auto,
    /// Both followed, as `auto`; where the records refute neither, what
    /// they explain differently is ambiguous.
    Either,
}

/// What runs recorded before the judge knew another driver were judged by.
pub fn stock_driver_rules() -> DriverRules {
    DriverRules::Stock
}

/// What results written before there were witnesses had.
pub fn no_switch_witness() -> SwitchWitness {
    SwitchWitness::None
}

/// How `report`, `compare` and `replay` print (`--format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Text,
    Markdown,
    Json,
}

/// What `report --group-by` and `compare --group-by` pool runs by: the
/// machine a fleet's runs differ in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GroupBy {
    /// The host's name (the fingerprint's kernel hostname).
    Host,
    /// DMI's product name: the instance type on EC2 ("c6g.12xlarge").
    InstanceType,
    /// The kernel release (`uname -r`).
    Kernel,
    /// The pseudo-NMI verdict (enabled, disabled, not-built, ...).
    PseudoNmi,
}

/// Spans in which the run's controller did not run at all for longer than
/// a watchdog allows a worker to be silent: the process was stopped
/// (SIGSTOP, a cgroup freezer) or the machine paused. The watchdog does
/// not count them against the workers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    pub times: u64,
    pub longest_ns: u64,
    pub total_ns: u64,
}

impl Held {
    pub fn add(&mut self, span_ns: u64) {
        self.times += 1;
        self.longest_ns = self.longest_ns.max(span_ns);
        self.total_ns += span_ns;
    }
}

/// Why the run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    Duration,
    Interrupts,
    Anomalies,
    /// A stop signal (the signal number): SIGINT, SIGTERM, SIGHUP,
    /// SIGQUIT, SIGPIPE, SIGXCPU, SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM,
    /// SIGPROF, or a SIGSEGV or SIGBUS a process sent.
    Signal(i32),
    /// Every worker stopped on its own (watchdog or setup).
    WorkersGone,
    /// Results could not be written any more (the reason).
    OutputFailed(String),
    /// Bisect mode: enough overflows without a drop.
    BisectGood,
    /// Bisect mode: the first dropped interrupt.
    BisectBad,
}
