/*!
What a reader must know that does not change the verdict: each `Warning`
with its numbers, and its words (`Display`), which run.json holds.
*/

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::words::{ordinal, plural};
use crate::domain::SwitchWitness;
use crate::judge::AnomalyKind;

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
    /// (`engine::limits`).
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

as_words!(Warning);

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
