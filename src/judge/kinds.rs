/*!
The kinds of anomaly, in one place: what each means and what to do about it.

Interrupt kinds come from the kernel's records alone; delivery kinds from the
signals against them. Which totals make a run dropped or inconclusive is
the verdict rule's to say (`verdict`), not the kinds'.
*/

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnomalyKind {
    /// An overflow whose interrupt never happened.
    DroppedInterrupt,
    /// Dropped under one explanation of the stream, not under another.
    Ambiguous,
    /// An interrupt a period or more late: the driver re-based the period.
    LateInterrupt,
    Throttled,
    WitnessLost,
    SoftwareTimerSkip,
    CoalescedSignal,
    SignalQueueOverflow,
    /// A signal read a period or more after its interrupt.
    LateSignal,
    /// A signal with no interrupt of its own.
    UnmatchedSignal,
    /// Kernel records that fit no driver behaviour.
    Unexplained,
    /// The kernel's count jumped by 2^32: its update raced the overflow NMI.
    CountWrap,
    /// Our own failure (a counter read failed, a wrong-thread delivery):
    /// never a PMU verdict.
    ToolError,
}

impl AnomalyKind {
    pub const ALL: [AnomalyKind; 13] = [
        AnomalyKind::DroppedInterrupt,
        AnomalyKind::Ambiguous,
        AnomalyKind::LateInterrupt,
        AnomalyKind::Throttled,
        AnomalyKind::WitnessLost,
        AnomalyKind::SoftwareTimerSkip,
        AnomalyKind::CoalescedSignal,
        AnomalyKind::SignalQueueOverflow,
        AnomalyKind::LateSignal,
        AnomalyKind::UnmatchedSignal,
        AnomalyKind::Unexplained,
        AnomalyKind::CountWrap,
        AnomalyKind::ToolError,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            AnomalyKind::DroppedInterrupt => "dropped-interrupt",
            AnomalyKind::Ambiguous => "ambiguous",
            AnomalyKind::LateInterrupt => "late-interrupt",
            AnomalyKind::Throttled => "throttled",
            AnomalyKind::WitnessLost => "witness-lost",
            AnomalyKind::SoftwareTimerSkip => "software-timer-skip",
            AnomalyKind::CoalescedSignal => "coalesced-signal",
            AnomalyKind::SignalQueueOverflow => "signal-queue-overflow",
            AnomalyKind::LateSignal => "late-signal",
            AnomalyKind::UnmatchedSignal => "unmatched-signal",
            AnomalyKind::Unexplained => "unexplained",
            AnomalyKind::CountWrap => "count-wrap",
            AnomalyKind::ToolError => "tool-error",
        }
    }

    /// What a reader should do about it.
    pub fn advice(&self) -> &'static str {
        match self {
            AnomalyKind::DroppedInterrupt => {
                "the PMU interrupt for these overflows never happened: pending when the event was stopped, no kernel sample record"
            }
            AnomalyKind::Ambiguous => {
                "the kernel's records fit both a lost interrupt and one a period late: not counted as dropped; a longer --period makes late interrupts rarer"
            }
            AnomalyKind::LateInterrupt => {
                "an interrupt taken a period or more after its overflow (the driver re-based the period): not a lost interrupt; common in VMs whose vCPU does not run"
            }
            AnomalyKind::Throttled => {
                "the kernel throttled the event (perf_event_max_sample_rate): raise it or use a longer --period"
            }
            AnomalyKind::WitnessLost => {
                "the kernel's sample ring overflowed, so the overflows there cannot be judged: use a longer --period"
            }
            AnomalyKind::SoftwareTimerSkip => {
                "the software clock's hrtimer skipped periods: a property of software events, not a PMU fault"
            }
            AnomalyKind::CoalescedSignal => {
                "the kernel handled the overflow but merged its signal into a later one: not a PMU bug"
            }
            AnomalyKind::SignalQueueOverflow => {
                "the realtime signal queue was full (RLIMIT_SIGPENDING, ulimit -i): raise it or use fewer workers"
            }
            AnomalyKind::LateSignal => {
                "a signal read a period or more after its interrupt: the thread did not run; not a lost interrupt"
            }
            AnomalyKind::UnmatchedSignal => {
                "an overflow signal with no interrupt of its own: please report it"
            }
            AnomalyKind::Unexplained => {
                "kernel sample records that fit no driver behaviour pmustress models: please report it with raw.csv.gz"
            }
            AnomalyKind::CountWrap => {
                "the kernel's count of the event jumped by 2^32 (its update raced the overflow NMI): counts read there are 2^32 too high; the next re-arm re-based the period; not a lost interrupt"
            }
            AnomalyKind::ToolError => {
                "pmustress itself failed (a counter read, a wrong-thread delivery): please report it"
            }
        }
    }
}

impl fmt::Display for AnomalyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for AnomalyKind {
    type Err = String;

    fn from_str(s: &str) -> Result<AnomalyKind, String> {
        AnomalyKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| format!("unknown anomaly kind {s:?}"))
    }
}
