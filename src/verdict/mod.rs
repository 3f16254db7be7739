/*!
The verdict rule, in one place: `decide` is a pure function from a run's
totals and its settings to a verdict, the typed reasons it is inconclusive
and the typed warnings a reader must know. The run (`totals`), a replayed
stream (`replay`) and the readers (report, plot) all take their verdict
and their words from here.

The rule: a run stopped by a signal is `interrupted`; otherwise `dropped`
when the judge found an overflow whose interrupt never happened under
every explanation of the kernel's records; otherwise `inconclusive` when
anything could not be judged (a `Reason`); otherwise `clean`.

A reason or a warning is a variant with its numbers; its words are its
`Display`, and run.json holds those words (serde writes them as strings,
and reads any string back as `AsWritten`, so files written before stay
readable). Adding a reason is its variant, its `Display` arm and the line
of `reasons` that finds it.
*/

pub mod counts;

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::config::RunConfig;
use crate::domain::{
    CONFIDENCE, EXIT_CANNOT_TEST, EXIT_CLEAN, EXIT_DROPPED, MigrateMode, RearmMode, StopReason,
    SwitchWitness,
};
use crate::judge::{AnomalyKind, DeliveryTotals, InterruptTotals, JudgeConfig, StressTotals};
use crate::verdict::counts::{Counts, Verdict, WorkerEntry};

pub use crate::domain::MIN_EVIDENCE_RATE;

/// How many overflows with no drop make a run "clean": enough to bound the
/// dropped rate below `MIN_EVIDENCE_RATE` at `CONFIDENCE` (299).
pub fn overflows_needed() -> u64 {
    crate::stats::trials_to_bound(MIN_EVIDENCE_RATE, CONFIDENCE).unwrap_or(u64::MAX)
}

/// Interrupts a period or more late that land within the interrupt skid of
/// a grid point by chance: the expected number among the ambiguous.
pub fn coincidences(i: &InterruptTotals, interrupt_skid: u64, period: u64) -> f64 {
    i.rebased_in_handler as f64 * (2 * interrupt_skid + 1) as f64 / period as f64
}

/// What the rule needs of the run's configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    pub software: bool,
    pub mode: RearmMode,
    pub period: u64,
    pub inject_drop_every: Option<u64>,
    /// The migrator was asked to move workers.
    pub migrates: bool,
    /// Bisect mode: the overflows a "good" needs.
    pub bisect_overflows_needed: Option<u64>,
    /// Witnessed stops a clean verdict needs (0: a run recorded before
    /// stops were counted, whose verdict did not ask for any).
    pub stops_needed: u64,
    /// Bisect mode: the stops a "good" needs.
    pub bisect_stops_needed: Option<u64>,
    /// `--switch-witness` as asked (what the workers got is in `RunSide`).
    pub asked_witness: SwitchWitness,
    /// `--max-count-rate` was given: time-only stops have bounded counts.
    pub count_rate_bounded: bool,
}

impl Settings {
    pub fn of_run(cfg: &RunConfig) -> Settings {
        Settings {
            software: cfg.event.software,
            mode: cfg.mode,
            period: cfg.period,
            inject_drop_every: cfg.inject_drop_every,
            migrates: cfg.migrate != MigrateMode::None,
            bisect_overflows_needed: cfg.bisect.as_ref().map(|b| b.overflows_needed),
            stops_needed: cfg.judge_config().stops_needed,
            bisect_stops_needed: cfg.bisect.as_ref().map(|b| b.stops_needed),
            asked_witness: cfg.switch_witness,
            count_rate_bounded: cfg.max_count_rate.is_some(),
        }
    }

    /// A stream judged again: what its judge's settings say (nothing of
    /// the run around it).
    pub fn of_stream(cfg: &JudgeConfig) -> Settings {
        Settings {
            software: cfg.software,
            mode: cfg.mode,
            period: cfg.period,
            // A stream's judge discarded the same samples: a self-test
            // replays as one.
            inject_drop_every: (cfg.inject_drop_every > 0).then_some(cfg.inject_drop_every),
            migrates: false,
            bisect_overflows_needed: None,
            stops_needed: cfg.stops_needed,
            bisect_stops_needed: None,
            asked_witness: SwitchWitness::Counts,
            count_rate_bounded: cfg.max_count_rate > 0,
        }
    }
}

/// What only a run has, and a replayed stream has not: its threads, its
/// rings and signals, why it stopped.
#[derive(Debug, Clone, Copy)]
pub struct RunSide<'a> {
    pub workers: &'a [WorkerEntry],
    pub stop: &'a StopReason,
    /// Overflow signals nobody could be charged with, and SIGIOs likewise.
    pub stray_signals: (u64, u64),
    /// Overflow signals and SIGIOs a process sent (kill, sigqueue), ignored.
    pub foreign_signals: u64,
    /// Spans the run's controller was held off the CPU.
    pub held: crate::domain::Held,
    /// perf_event_max_sample_rate at start and end.
    pub max_sample_rate: (Option<u64>, Option<u64>),
    /// perf_event_paranoid when the run started (None: unreadable).
    pub perf_event_paranoid: Option<i64>,
}

/// What the verdict is decided from.
#[derive(Debug, Clone, Copy)]
pub struct Evidence<'a> {
    pub interrupts: &'a InterruptTotals,
    pub deliveries: &'a DeliveryTotals,
    pub expected_coincidences: f64,
    /// The stops the stream shows (None: a run recorded before they were
    /// counted).
    pub stress: Option<&'a StressTotals>,
    /// The run's own totals and circumstances; `None` for a bare stream.
    pub run: Option<(&'a Counts, RunSide<'a>)>,
}

impl<'a> Evidence<'a> {
    /// A judged stream alone.
    pub fn stream(
        interrupts: &'a InterruptTotals,
        deliveries: &'a DeliveryTotals,
        expected_coincidences: f64,
        stress: Option<&'a StressTotals>,
    ) -> Evidence<'a> {
        Evidence {
            interrupts,
            deliveries,
            expected_coincidences,
            stress,
            run: None,
        }
    }

    /// A whole run.
    pub fn run(totals: &'a Counts, side: RunSide<'a>) -> Evidence<'a> {
        Evidence {
            interrupts: &totals.interrupts,
            deliveries: &totals.deliveries,
            expected_coincidences: totals.expected_coincidences,
            stress: totals.stress.as_ref(),
            run: Some((totals, side)),
        }
    }
}

/// The verdict, its exit status, and what a reader must be told.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub verdict: Verdict,
    pub exit_status: i32,
    pub reasons: Vec<Reason>,
    pub warnings: Vec<Warning>,
}

/// The verdict rule.
pub fn decide(e: &Evidence, s: &Settings) -> Decision {
    let mut reasons = reasons(e, s);
    let stop = e.run.map(|(_, side)| side.stop);
    let (verdict, exit_status) = if s.inject_drop_every.is_some() {
        self_test_of(stop, e.interrupts, &mut reasons)
    } else {
        verdict_of(stop, certain_drops(e.interrupts), !reasons.is_empty())
    };
    Decision {
        verdict,
        exit_status,
        reasons,
        warnings: warnings(e, s),
    }
}

/// The drops no explanation of the records avoids. Those only the stock
/// driver's rules claim are not, where another worker's records refuted
/// those rules (`Reason::DriversDisagree`).
pub fn certain_drops(i: &InterruptTotals) -> u64 {
    if i.stock_rules_refuted > 0 {
        i.dropped - i.dropped_assuming_stock
    } else {
        i.dropped
    }
}

/// The rule's last step: interrupted, then dropped, then inconclusive,
/// then clean.
pub fn verdict_of(stop: Option<&StopReason>, dropped: u64, inconclusive: bool) -> (Verdict, i32) {
    match stop {
        Some(StopReason::Signal(sig)) => (Verdict::Interrupted, 128 + sig),
        _ if dropped > 0 => (Verdict::Dropped, EXIT_DROPPED),
        _ if inconclusive => (Verdict::Inconclusive, EXIT_CANNOT_TEST),
        _ => (Verdict::Clean, EXIT_CLEAN),
    }
}

/// A self-test's question: the drops it found, those it booked where it
/// discarded a sample and the injected are one number.
pub fn finds_exactly_the_injected(i: &InterruptTotals) -> bool {
    i.injected_found == i.injected && certain_drops(i) == i.injected
}

/// A stream's verdict with what the run around it adds: its
/// interruption, and reasons the stream does not give. A drop, or a
/// failed self-test, stands whatever the reasons; a pass needs none.
pub fn with_the_run(
    stream: Verdict,
    stop: Option<&StopReason>,
    inconclusive: bool,
) -> (Verdict, i32) {
    if let Some(StopReason::Signal(sig)) = stop {
        return (Verdict::Interrupted, 128 + sig);
    }
    match stream {
        Verdict::Dropped | Verdict::SelfTestFailed => (stream, EXIT_DROPPED),
        Verdict::Clean | Verdict::SelfTestPassed if !inconclusive => (stream, EXIT_CLEAN),
        _ => (Verdict::Inconclusive, EXIT_CANNOT_TEST),
    }
}

/// A self-test's rule: it asks whether the detector finds the drops it
/// was handed, not how rare drops are on this machine, so the reasons
/// that bound the machine's rate (too few overflows or stops) do not
/// apply. Interrupted as any run; failed when the drops found are not
/// exactly the injected ones (fewer: the detector missed some; more: the
/// kernel lost others, or the judge is wrong); inconclusive when nothing
/// was injected or the stream could not be judged; otherwise passed.
fn self_test_of(
    stop: Option<&StopReason>,
    i: &InterruptTotals,
    reasons: &mut Vec<Reason>,
) -> (Verdict, i32) {
    reasons.retain(|r| {
        !matches!(
            r,
            Reason::NotEnoughOverflows { .. }
                | Reason::NotEnoughStops { .. }
                | Reason::BisectTooFew { .. }
                | Reason::BisectTooFewStops { .. }
        )
    });
    if i.injected == 0 && i.dropped == 0 {
        reasons.push(Reason::NothingInjected);
    }
    match stop {
        Some(StopReason::Signal(sig)) => (Verdict::Interrupted, 128 + sig),
        _ if !finds_exactly_the_injected(i) => (Verdict::SelfTestFailed, EXIT_DROPPED),
        _ if !reasons.is_empty() => (Verdict::Inconclusive, EXIT_CANNOT_TEST),
        _ => (Verdict::SelfTestPassed, EXIT_CLEAN),
    }
}

/// Pooled runs: dropped if any dropped an interrupt, clean if every one
/// was clean, otherwise inconclusive.
pub fn pooled(dropped: u64, all_clean: bool) -> Verdict {
    if dropped > 0 {
        Verdict::Dropped
    } else if all_clean {
        Verdict::Clean
    } else {
        Verdict::Inconclusive
    }
}

/// Why a verdict is inconclusive.
#[derive(Debug, Clone, PartialEq)]
pub enum Reason {
    /// A worker stopped answering (the engine's words).
    Stalled(String),
    NoSignal,
    NotEnoughOverflows {
        measured: u64,
        needed: u64,
    },
    /// The loss happens at stops: zero drops in too few say nothing.
    NotEnoughStops {
        witnessed: u64,
        needed: u64,
    },
    Ambiguous {
        overflows: u64,
        expected_coincidences: f64,
    },
    Unexplained(u64),
    /// `--max-count-rate` did not hold.
    CountRateExceeded(u64),
    /// The streams of one kernel refuted different drivers' rules, or some
    /// refuted the stock driver's while drops elsewhere rest on them.
    DriversDisagree {
        stock_refuted: u64,
        delivering_refuted: u64,
        dropped_assuming_stock: u64,
    },
    LostRecords(u64),
    UnmatchedSignals(u64),
    WrongThread(u64),
    ReadFailures(u64),
    SignalRingFull(u64),
    GarbledKernelBytes(u64),
    StrayFd(u64),
    StraySigio(u64),
    /// Reset mode: observations judged out of time order.
    Reordered(u64),
    /// A bug of ours: the final count and the judge disagree.
    ImpliedOverflows {
        worker: usize,
        implied: u64,
        accounted: u64,
    },
    OutputFailed(String),
    BisectTooFew {
        measured: u64,
        needed: u64,
    },
    BisectTooFewStops {
        witnessed: u64,
        needed: u64,
    },
    /// Results that could not all be saved (the writer's words).
    Unsaved(String),
    /// Files a failed write left short.
    PartialFiles(Vec<String>),
    /// A self-test whose run was too short to discard any overflow.
    NothingInjected,
    /// Read back from run.json: the words as written.
    AsWritten(String),
}

impl Reason {
    /// Whether the judged stream alone gives it (a replay finds it again).
    pub fn from_stream(&self) -> bool {
        matches!(
            self,
            Reason::NotEnoughOverflows { .. }
                | Reason::NotEnoughStops { .. }
                | Reason::Ambiguous { .. }
                | Reason::Unexplained(_)
                | Reason::CountRateExceeded(_)
                | Reason::DriversDisagree { .. }
                | Reason::LostRecords(_)
                | Reason::UnmatchedSignals(_)
                | Reason::WrongThread(_)
                | Reason::ReadFailures(_)
        )
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Stalled(s) | Reason::Unsaved(s) | Reason::AsWritten(s) => f.write_str(s),
            Reason::NoSignal => f.write_str("no overflow signal was received at all"),
            Reason::NothingInjected => f.write_str(
                "the self-test discarded no overflow: each worker needs --inject-drop-every overflows for one; run longer or lower it",
            ),
            Reason::NotEnoughOverflows { measured, needed } => write!(
                f,
                "not enough overflows: {measured} measured, {needed} needed to bound the dropped rate below {MIN_EVIDENCE_RATE} at {:.0}% confidence; run longer",
                CONFIDENCE * 100.0
            ),
            Reason::NotEnoughStops { witnessed, needed } => write!(
                f,
                "not enough stops: {witnessed} witnessed, {needed} needed to bound the dropped rate per stop below {MIN_EVIDENCE_RATE} at {:.0}% confidence; overflows are lost where the kernel stops a counting thread, so move the workers more (the default --migrate and --migrators), run longer, or witness stops (--switch-witness counts or times)",
                CONFIDENCE * 100.0
            ),
            Reason::Ambiguous {
                overflows,
                expected_coincidences,
            } => write!(
                f,
                "{overflows} {} fit both a lost interrupt and one a period late (chance coincidences expected: {expected_coincidences:.2}); not counted as dropped",
                plural(*overflows, "overflow", "overflows"),
            ),
            Reason::Unexplained(n) => write!(
                f,
                "{n} kernel sample records fit no driver behaviour (see the unexplained anomalies)"
            ),
            Reason::CountRateExceeded(n) => write!(
                f,
                "{n} {} rose faster than --max-count-rate allows: the bound is wrong for this event, and what it decided of time-only stops cannot stand; run without it, or with the event's true bound",
                plural(*n, "count", "counts"),
            ),
            Reason::DriversDisagree {
                stock_refuted,
                delivering_refuted,
                dropped_assuming_stock,
            } => write!(
                f,
                "the workers' records disagree on the driver: the stock driver's rules (an overflow pending at a context switch is lost there) were refuted in {stock_refuted} {}, a delivering driver's in {delivering_refuted}, and {dropped_assuming_stock} {} only the stock driver's rules claim; one kernel has one driver",
                plural(*stock_refuted, "stream", "streams"),
                plural(*dropped_assuming_stock, "drop is one", "drops are ones"),
            ),
            Reason::LostRecords(n) => write!(
                f,
                "{n} kernel records were lost from the sample ring (LOST records)"
            ),
            Reason::UnmatchedSignals(n) => {
                write!(f, "{n} overflow signals had no interrupt of their own")
            }
            Reason::WrongThread(n) => write!(f, "{n} overflow signals landed on the wrong thread"),
            Reason::ReadFailures(n) => write!(f, "{n} counter reads failed in the handler"),
            Reason::SignalRingFull(n) => {
                write!(f, "{n} handler records were lost (signal ring full)")
            }
            Reason::GarbledKernelBytes(n) => {
                write!(f, "{n} bytes of the kernel sample ring could not be parsed")
            }
            Reason::StrayFd(n) => write!(f, "{n} overflow signals carried an unknown fd"),
            Reason::StraySigio(n) => write!(f, "{n} SIGIOs arrived on a non-worker thread"),
            Reason::Reordered(n) => write!(
                f,
                "{n} observations reached the judge out of time order, so resets may be misplaced"
            ),
            Reason::ImpliedOverflows {
                worker,
                implied,
                accounted,
            } => write!(
                f,
                "worker {worker}: the final count implies {implied} overflows but the judge accounted for {accounted} (a bug in pmustress: please report it with raw.csv.gz)"
            ),
            Reason::OutputFailed(e) => write!(
                f,
                "the run stopped early because results could not be written: {e}"
            ),
            Reason::BisectTooFew { measured, needed } => write!(
                f,
                "bisect: only {measured} of the {needed} overflows needed were measured, too few to call this kernel good"
            ),
            Reason::BisectTooFewStops { witnessed, needed } => write!(
                f,
                "bisect: only {witnessed} of the {needed} stops needed were witnessed, too few to call this kernel good"
            ),
            Reason::PartialFiles(files) => write!(
                f,
                "results could not all be written: {} cut back to the last complete line",
                files.join(", ")
            ),
        }
    }
}

/// `Warning::ForeignSignals` after its count.
const FOREIGN_SIGNALS: &str = "overflow signals or SIGIOs were sent by a process (kill, sigqueue), not by the kernel: ignored, never counted as overflows or signal-queue overflows";

/// `Warning::Held`'s words.
fn held_words(h: &crate::domain::Held) -> String {
    let s = |ns: u64| format!("{:.2} s", ns as f64 / 1e9);
    format!(
        "the run was held off the CPU {} time{}, {} in all, the longest {}: the process was stopped (SIGSTOP, a cgroup freezer), the machine paused, or the run starved; the watchdog did not count that time against the workers",
        h.times,
        if h.times == 1 { "" } else { "s" },
        s(h.total_ns),
        s(h.longest_ns)
    )
}

/// Something a reader must know that does not change the verdict.
#[derive(Debug, Clone, PartialEq)]
pub enum Warning {
    SoftwareEvent,
    /// Overflow signals or SIGIOs a process sent.
    ForeignSignals(u64),
    /// The run's controller was held off the CPU (stopped, frozen).
    Held(crate::domain::Held),
    SelfTest {
        every: u64,
    },
    Throttled(u64),
    SampleRateLowered {
        from: u64,
        to: u64,
    },
    RebasedInHandler(u64),
    CountWraps(u64),
    /// The stock driver's rules were refuted in this many streams: the
    /// kernel delivers an overflow overdue at a stop after the restart.
    DeliveringDriver(u64),
    /// Drops only the stock driver's rules claim (`--driver-rules auto`).
    DroppedAssumingStock(u64),
    LateInterrupts {
        p999: f64,
        suggested_period: u64,
    },
    SignalQueueOverflow(u64),
    LostRecords {
        lost: u64,
        unrecorded: u64,
    },
    Coalesced(u64),
    LateSignals(u64),
    TimerSkips(u64),
    NoMigration,
    /// Moves the kernel refused (a CPU taken offline or out of the cpuset
    /// mid-run): the verdict stands for what ran, but the workers moved
    /// less than asked.
    FailedMigrations {
        failed: u64,
        requested: u64,
    },
    /// Some worker's stops were witnessed without their counts, or not at
    /// all: how, whether that was asked for, and what the kernel allowed.
    StopsNotWitnessed {
        used: SwitchWitness,
        asked: SwitchWitness,
        paranoid: Option<i64>,
        /// `--max-count-rate` was given.
        rate_bounded: bool,
    },
    /// The results directory was moved or replaced while the run wrote it.
    ResultsMoved {
        to: String,
        from: String,
    },
    /// The realtime signal queue (`ulimit -i`) had room for every worker
    /// but not for the worst case: the check's words
    /// (`engine::sigqueue`).
    SignalQueueTight(String),
    /// Read back from run.json: the words as written.
    AsWritten(String),
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::ForeignSignals(n) => write!(f, "{n} {FOREIGN_SIGNALS}"),
            Warning::Held(h) => f.write_str(&held_words(h)),
            Warning::SoftwareEvent => write!(
                f,
                "{}: it proves the pipeline (signals, rings, migrator, judge), not the interrupt path of a PMU",
                crate::config::event::SOFTWARE_CAVEAT
            ),
            Warning::SelfTest { every } => write!(
                f,
                "self-test: every {} overflow interrupt was discarded on purpose (--inject-drop-every); these results prove the detector, not the machine",
                ordinal(*every)
            ),
            Warning::Throttled(n) => write!(
                f,
                "the kernel throttled the event {n} {} (THROTTLE records; no overflow is lost by it): raise perf_event_max_sample_rate or use a longer --period",
                plural(*n, "time", "times")
            ),
            Warning::SampleRateLowered { from, to } => write!(
                f,
                "the kernel lowered perf_event_max_sample_rate from {from} to {to} during the run (interrupts took too long)"
            ),
            Warning::RebasedInHandler(n) => write!(
                f,
                "{n} {} a period or more late, after which the driver re-based the period: late, not dropped",
                plural(*n, "interrupt came", "interrupts came")
            ),
            Warning::DeliveringDriver(n) => write!(
                f,
                "this kernel's driver delivers an overflow overdue at a context switch after the restart (the stock driver's rules, which lose it there, were refuted in {n} {}): judged by a delivering driver's rules, its late interrupts are late, not dropped",
                plural(*n, "stream", "streams")
            ),
            Warning::DroppedAssumingStock(n) => write!(
                f,
                "{n} of the dropped rest on the stock driver's rules (every arm64 kernel to date): a driver that delivers an overflow overdue at a stop after the restart would have taken {} a period or more late, and no record refuted one (--driver-rules either counts {} ambiguous)",
                plural(*n, "it", "them"),
                plural(*n, "it", "them")
            ),
            Warning::CountWraps(n) => write!(
                f,
                "the kernel's count of the event jumped by 2^32 {n} {} (its update raced the overflow NMI: a kernel bug of its own, see the count-wrap anomalies): counts read from the event are 2^32 too high from there; each time the driver re-based the period; not a lost interrupt",
                plural(*n, "time", "times")
            ),
            Warning::LateInterrupts {
                p999,
                suggested_period,
            } => write!(
                f,
                "interrupt latency p99.9 is {p999:.2} periods: late interrupts make losses harder to tell apart; use --period {suggested_period} or more (4 x the p99.9 latency)"
            ),
            Warning::SignalQueueOverflow(n) => write!(
                f,
                "the realtime signal queue overflowed {n} times (plain SIGIO fallback): raise RLIMIT_SIGPENDING (ulimit -i)"
            ),
            Warning::LostRecords { lost, unrecorded } => write!(
                f,
                "the kernel did not write {lost} records into the sample ring (LOST records): {unrecorded} signals had no sample"
            ),
            Warning::Coalesced(n) => write!(
                f,
                "the kernel merged the signals of {n} {} into later ones: every interrupt happened (its sample is there)",
                plural(*n, "interrupt", "interrupts")
            ),
            Warning::LateSignals(n) => write!(
                f,
                "{n} {} read a period or more after their interrupt: the thread did not run; not a lost interrupt",
                plural(*n, "signal was", "signals were"),
            ),
            Warning::TimerSkips(n) => write!(
                f,
                "{n} software-clock periods skipped: {}",
                AnomalyKind::SoftwareTimerSkip.advice()
            ),
            Warning::NoMigration => {
                f.write_str("no migration happened: the migrator never moved a worker")
            }
            Warning::FailedMigrations { failed, requested } => write!(
                f,
                "{failed} of {requested} migrations failed (sched_setaffinity refused them: a CPU went offline or left this process's cpuset?): the workers moved less than asked"
            ),
            Warning::ResultsMoved { to, from } => write!(
                f,
                "the results directory was moved or replaced while the run wrote it: these results are in {to}, not {from}"
            ),
            Warning::StopsNotWitnessed {
                used,
                asked,
                paranoid,
                rate_bounded,
            } => {
                let what = match (used, rate_bounded) {
                    (SwitchWitness::None, _) => {
                        "event stops were not witnessed (--switch-witness none): an overflow lost at a stop leaves the gap of an interrupt a period late, so such gaps stay ambiguous"
                    }
                    (_, true) => {
                        "event stops were witnessed without their counts (--switch-witness times), bounded by their times and --max-count-rate: a gap across a stop the bound leaves open stays ambiguous"
                    }
                    (_, false) => {
                        "event stops were witnessed without their counts (--switch-witness times): a gap across a stop may stay ambiguous (--max-count-rate, e.g. the CPU's highest frequency for cycles, lets the stops' times bound their counts)"
                    }
                };
                f.write_str(what)?;
                if *asked == SwitchWitness::Auto {
                    match paranoid {
                        Some(level) => write!(
                            f,
                            "; the kernel refused the count witness (perf_event_paranoid {level}, no CAP_PERFMON): for the exact verdict run as root or after `sudo sysctl kernel.perf_event_paranoid=1`"
                        ),
                        None => f.write_str(
                            "; the kernel refused the count witness: for the exact verdict run as root or after `sudo sysctl kernel.perf_event_paranoid=1`",
                        ),
                    }
                } else {
                    f.write_str(
                        "; for the exact verdict use --switch-witness counts (root, CAP_PERFMON or perf_event_paranoid <= 1)",
                    )
                }
            }
            Warning::SignalQueueTight(s) | Warning::AsWritten(s) => f.write_str(s),
        }
    }
}

/// run.json holds a reason and a warning as its words.
macro_rules! as_words {
    ($t:ty) => {
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$t, D::Error> {
                String::deserialize(d).map(<$t>::AsWritten)
            }
        }
    };
}

as_words!(Reason);
as_words!(Warning);

/// A count, and the reason it is when it is not zero.
type Counted = (u64, fn(u64) -> Reason);

fn reasons(e: &Evidence, s: &Settings) -> Vec<Reason> {
    let (i, d) = (e.interrupts, e.deliveries);
    let mut r = Vec::new();
    if let Some((t, side)) = e.run {
        r.extend(
            side.workers
                .iter()
                .filter_map(|w| w.stalled.clone())
                .map(Reason::Stalled),
        );
        if t.signals == 0 {
            r.push(Reason::NoSignal);
        }
    }
    let needed = overflows_needed();
    if i.dropped == 0 && i.overflows < needed {
        r.push(Reason::NotEnoughOverflows {
            measured: i.overflows,
            needed,
        });
    }
    let stops = e.stress.map_or(0, |x| x.stops);
    if i.dropped == 0 && stops < s.stops_needed {
        r.push(Reason::NotEnoughStops {
            witnessed: stops,
            needed: s.stops_needed,
        });
    }
    if i.ambiguous > 0 {
        r.push(Reason::Ambiguous {
            overflows: i.ambiguous,
            expected_coincidences: e.expected_coincidences,
        });
    }
    if i.stock_rules_refuted > 0 && (i.delivering_rules_refuted > 0 || i.dropped_assuming_stock > 0)
    {
        r.push(Reason::DriversDisagree {
            stock_refuted: i.stock_rules_refuted,
            delivering_refuted: i.delivering_rules_refuted,
            dropped_assuming_stock: i.dropped_assuming_stock,
        });
    }
    // A software clock loses no interrupt a hole could hide.
    let lost_records = if s.software { 0 } else { i.lost_records };
    let counted: [Counted; 6] = [
        (i.unexplained, Reason::Unexplained),
        (i.count_rate_exceeded, Reason::CountRateExceeded),
        (lost_records, Reason::LostRecords),
        (d.unmatched, Reason::UnmatchedSignals),
        (d.wrong_thread, Reason::WrongThread),
        (d.read_failures, Reason::ReadFailures),
    ];
    r.extend(
        counted
            .into_iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, f)| f(n)),
    );
    if let Some((t, side)) = e.run {
        r.extend(run_reasons(t, &side, s));
    }
    r
}

/// What the run around the stream makes inconclusive: our own failures,
/// a final count that disagrees with the judge, an early stop.
fn run_reasons(t: &Counts, side: &RunSide, s: &Settings) -> Vec<Reason> {
    let mut r = Vec::new();
    let ours: [Counted; 4] = [
        (t.signal_ring_overflows, Reason::SignalRingFull),
        (t.garbled_kernel_bytes, Reason::GarbledKernelBytes),
        (side.stray_signals.0, Reason::StrayFd),
        (side.stray_signals.1, Reason::StraySigio),
    ];
    r.extend(ours.into_iter().filter(|(n, _)| *n > 0).map(|(n, f)| f(n)));
    if s.mode == RearmMode::Reset && t.reordered_observations > 0 {
        r.push(Reason::Reordered(t.reordered_observations));
    }
    for w in side.workers {
        if let Some(implied) = w.counts.implied_overflows
            && implied != w.counts.accounted_overflows
        {
            r.push(Reason::ImpliedOverflows {
                worker: w.worker,
                implied,
                accounted: w.counts.accounted_overflows,
            });
        }
    }
    if let StopReason::OutputFailed(e) = side.stop {
        r.push(Reason::OutputFailed(e.clone()));
    }
    if let Some(needed) = s.bisect_overflows_needed
        && t.dropped_interrupts == 0
        && t.accounted_overflows < needed
    {
        r.push(Reason::BisectTooFew {
            measured: t.accounted_overflows,
            needed,
        });
    }
    let stops = t.stress.as_ref().map_or(0, |x| x.stops);
    if let Some(needed) = s.bisect_stops_needed
        && t.dropped_interrupts == 0
        && stops < needed
    {
        r.push(Reason::BisectTooFewStops {
            witnessed: stops,
            needed,
        });
    }
    r
}

fn warnings(e: &Evidence, s: &Settings) -> Vec<Warning> {
    let (i, d) = (e.interrupts, e.deliveries);
    let run = e.run;
    let mut w = Vec::new();
    if s.software {
        w.push(Warning::SoftwareEvent);
    }
    if let Some(every) = s.inject_drop_every {
        w.push(Warning::SelfTest { every });
    }
    if i.throttled > 0 {
        w.push(Warning::Throttled(i.throttled));
    }
    if let Some((_, side)) = run
        && side.foreign_signals > 0
    {
        w.push(Warning::ForeignSignals(side.foreign_signals));
    }
    if let Some((_, side)) = run
        && side.held.times > 0
    {
        w.push(Warning::Held(side.held));
    }
    if let Some((_, side)) = run
        && let (Some(from), Some(to)) = side.max_sample_rate
        && to < from
    {
        w.push(Warning::SampleRateLowered { from, to });
    }
    if i.rebased_in_handler > 0 {
        w.push(Warning::RebasedInHandler(i.rebased_in_handler));
    }
    if i.stock_rules_refuted > 0 {
        w.push(Warning::DeliveringDriver(i.stock_rules_refuted));
    }
    if i.dropped_assuming_stock > 0 {
        w.push(Warning::DroppedAssumingStock(i.dropped_assuming_stock));
    }
    if i.count_wraps > 0 {
        w.push(Warning::CountWraps(i.count_wraps));
    }
    if let Some((t, _)) = run
        && let Some(p999) = t.interrupt_latency.p999
        && p999 > 0.25
    {
        // Latency in a VM is time the vCPU did not run, not a fraction of
        // the period: at this period the p99.9 is a quarter of it.
        let suggested_period = (p999 * 4.0 * s.period as f64).ceil() as u64;
        w.push(Warning::LateInterrupts {
            p999,
            suggested_period,
        });
    }
    if d.sigio > 0 {
        w.push(Warning::SignalQueueOverflow(d.sigio));
    }
    if i.lost_records > 0 {
        w.push(Warning::LostRecords {
            lost: i.lost_records,
            unrecorded: d.unrecorded,
        });
    }
    if d.coalesced > 0 {
        w.push(Warning::Coalesced(d.coalesced));
    }
    if d.late_by_a_period > 0 {
        w.push(Warning::LateSignals(d.late_by_a_period));
    }
    if i.timer_skips > 0 {
        w.push(Warning::TimerSkips(i.timer_skips));
    }
    if let Some((t, side)) = run {
        if s.migrates && t.migrations_requested == 0 {
            w.push(Warning::NoMigration);
        }
        if t.migrations_failed > 0 {
            w.push(Warning::FailedMigrations {
                failed: t.migrations_failed,
                requested: t.migrations_requested,
            });
        }
        if !s.software
            && let Some(warning) = stops_not_witnessed(
                side.workers.iter().map(|w| w.switch_witness),
                s.asked_witness,
                side.perf_event_paranoid,
                s.count_rate_bounded,
            )
        {
            w.push(warning);
        }
    }
    w
}

/// Whether some worker's stops go without their counts (the weakest
/// witness any worker got), as the warning that says how to get them: the
/// run says it live once the workers have opened their events, and in its
/// results.
pub fn stops_not_witnessed(
    used: impl IntoIterator<Item = SwitchWitness>,
    asked: SwitchWitness,
    paranoid: Option<i64>,
    rate_bounded: bool,
) -> Option<Warning> {
    let used = used
        .into_iter()
        .filter(|&w| w != SwitchWitness::Counts)
        .min_by_key(|&w| w != SwitchWitness::None)?;
    Some(Warning::StopsNotWitnessed {
        used,
        asked,
        paranoid,
        rate_bounded,
    })
}

pub(crate) fn plural(n: u64, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 { one } else { many }
}

/// "every 97th", "every 2nd".
fn ordinal(n: u64) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, x) if x != 11 => "st",
        (2, x) if x != 12 => "nd",
        (3, x) if x != 13 => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

#[cfg(test)]
mod tests;
