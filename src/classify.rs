/*!
The classifier: what one delta between two overflow signals means.

Two pure steps. `classify_delta` compares the delta d with the period P and
skid S: `ok` when |d - P| <= S, `missed(k-1)` when |d - kP| <= S for some
k >= 2, else `late` or `early`. `judge` then asks the kernel's witness for that
window (its sample records, throttle and lost records, plain-SIGIO fallbacks)
why overflows went unsignalled:

- a THROTTLE record explains them (`throttled`): the kernel stopped the
  event on purpose;
- a SIGIO fallback explains them (`signal-queue-overflow`) unless a sample
  record is missing that would make a drop (any on hardware, an injected one
  on a software clock): the queue was full, the interrupts happened;
- a LOST record means the witness itself is incomplete (`witness-lost`): we
  refuse to guess;
- k sample records for k overflows means every interrupt happened and only the
  signals merged (`coalesced-signal`): not a PMU bug;
- fewer sample records than overflows means interrupts never happened:
  `dropped-interrupt`, the bug we hunt. On a software clock the same gap is the
  hrtimer skipping periods (shared/software-events.md), so it is
  `software-timer-skip` unless we injected it ourselves.
*/

use serde::Serialize;
use std::fmt;

/// Where a delta falls relative to period and skid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeltaClass {
    Ok,
    /// `missed` overflows between the two signals (k - 1 for a delta of ~kP).
    Missed {
        missed: u64,
    },
    Late,
    Early,
}

pub fn classify_delta(delta: u64, period: u64, skid: u64) -> DeltaClass {
    debug_assert!(period > 0);
    if delta.abs_diff(period) <= skid {
        return DeltaClass::Ok;
    }
    let k = nearest_multiple(delta, period);
    // In u128: k * period may exceed u64 (a wrapped delta near u64::MAX),
    // and saturating would put it at distance 0 from such a delta.
    if k >= 2 && u128::from(delta).abs_diff(u128::from(k) * u128::from(period)) <= u128::from(skid)
    {
        DeltaClass::Missed { missed: k - 1 }
    } else if delta > period {
        DeltaClass::Late
    } else {
        DeltaClass::Early
    }
}

/// The multiple of the period nearest to `delta`, without overflow; ties go
/// up, which only matters when skid >= period/2 and then nothing is within
/// skid of it anyway.
pub fn nearest_multiple(delta: u64, period: u64) -> u64 {
    delta / period + u64::from(delta % period >= period - period / 2)
}

/// The kinds of anomaly a window can show. Only `DroppedInterrupt` makes a
/// run "bad".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnomalyKind {
    DroppedInterrupt,
    CoalescedSignal,
    Throttled,
    SignalQueueOverflow,
    WitnessLost,
    SoftwareTimerSkip,
    Late,
    Early,
    /// Our own failure in that window (a counter read failed): never a PMU verdict.
    ToolError,
}

impl AnomalyKind {
    pub const ALL: [AnomalyKind; 9] = [
        AnomalyKind::DroppedInterrupt,
        AnomalyKind::CoalescedSignal,
        AnomalyKind::Throttled,
        AnomalyKind::SignalQueueOverflow,
        AnomalyKind::WitnessLost,
        AnomalyKind::SoftwareTimerSkip,
        AnomalyKind::Late,
        AnomalyKind::Early,
        AnomalyKind::ToolError,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            AnomalyKind::DroppedInterrupt => "dropped-interrupt",
            AnomalyKind::CoalescedSignal => "coalesced-signal",
            AnomalyKind::Throttled => "throttled",
            AnomalyKind::SignalQueueOverflow => "signal-queue-overflow",
            AnomalyKind::WitnessLost => "witness-lost",
            AnomalyKind::SoftwareTimerSkip => "software-timer-skip",
            AnomalyKind::Late => "late",
            AnomalyKind::Early => "early",
            AnomalyKind::ToolError => "tool-error",
        }
    }

    /// What a reader should do about it.
    pub fn advice(&self) -> &'static str {
        match self {
            AnomalyKind::DroppedInterrupt => {
                "the PMU interrupt for these overflows never happened (no kernel sample record): a lost overflow interrupt"
            }
            AnomalyKind::CoalescedSignal => {
                "the kernel handled every overflow but merged their signals: not a PMU bug; a longer --period avoids it"
            }
            AnomalyKind::Throttled => {
                "the kernel throttled the event (perf_event_max_sample_rate): raise it or use a longer --period"
            }
            AnomalyKind::SignalQueueOverflow => {
                "the realtime signal queue was full (RLIMIT_SIGPENDING, ulimit -i): raise it or use fewer workers"
            }
            AnomalyKind::WitnessLost => {
                "the kernel's sample ring overflowed, so these windows cannot be judged: use a longer --period"
            }
            AnomalyKind::SoftwareTimerSkip => {
                "the software clock's hrtimer skipped periods: a property of software events, not a PMU fault"
            }
            AnomalyKind::Late => {
                "a signal read (or, on hardware, an interrupt taken) later than the skid allows, with every interrupt accounted for: not a lost interrupt; check --skid for this CPU"
            }
            AnomalyKind::Early => {
                "a delta shorter than period - skid, or a signal with no interrupt of its own: check --skid for this CPU"
            }
            AnomalyKind::ToolError => {
                "pmustress itself failed to read the counter in this window: please report it"
            }
        }
    }
}

impl fmt::Display for AnomalyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The kernel-side evidence gathered for one window between two signals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Witness {
    /// PERF_RECORD_SAMPLEs in the window: interrupts the kernel handled.
    pub kernel_samples: u64,
    /// A THROTTLE/UNTHROTTLE record in the window, or throttled at its start.
    pub throttled: bool,
    /// A LOST record in the window.
    pub records_lost: bool,
    /// Plain SIGIOs received in the window.
    pub sigio: u64,
    /// Overflows we discarded ourselves (`--inject-drop-every`).
    pub injected: u64,
    /// A counter read failed in this window.
    pub tool_error: bool,
}

/// The verdict on one window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Judgement {
    /// Overflows this window accounts for (1 when ok).
    pub overflows: u64,
    /// None when the window is ok.
    pub kind: Option<AnomalyKind>,
    /// Overflows that got no signal of their own (k - 1).
    pub missed: u64,
    /// Of those, overflows whose interrupt never happened (no sample record).
    pub dropped: u64,
}

pub fn judge(class: DeltaClass, delta: u64, period: u64, w: &Witness, software: bool) -> Judgement {
    let nearest = nearest_multiple(delta, period);
    let (overflows, missed) = match class {
        DeltaClass::Ok => (1, 0),
        DeltaClass::Missed { missed } => (missed + 1, missed),
        DeltaClass::Late | DeltaClass::Early => (nearest, nearest.saturating_sub(1)),
    };
    // Overflows whose interrupt never happened: the closing signal had its
    // interrupt, so at most `missed` can be absent. A late or early window
    // has no multiple to count against, but one we emptied on purpose is a
    // drop by construction (a software clock's jitter can push the merged
    // delta off a multiple).
    let absent = match class {
        DeltaClass::Missed { .. } => overflows
            .saturating_sub(w.kernel_samples.max(1))
            .min(missed),
        DeltaClass::Late | DeltaClass::Early => w.injected,
        DeltaClass::Ok => 0,
    };
    // What counts as dropped: on hardware every absent interrupt, unless the
    // kernel throttled (the stopped counter explains them) or the witness
    // itself lost records; on a software clock, whose timer skips periods on
    // its own, none. An overflow we discarded on purpose is a drop by
    // construction whatever the merged delta looks like: a software clock's
    // jitter can make it ok, late or early.
    let dropped = if software || w.throttled || w.records_lost {
        w.injected
    } else {
        absent.max(w.injected)
    };
    let explained = if w.tool_error {
        Some(AnomalyKind::ToolError)
    } else if w.sigio > 0 && class != DeltaClass::Ok && dropped == 0 {
        // A SIGIO fallback explains a missing signal, not a missing
        // interrupt: the kernel wrote the sample before it tried to queue
        // the signal, so an overflow with no sample was not one of them.
        Some(AnomalyKind::SignalQueueOverflow)
    } else if w.throttled && class != DeltaClass::Ok && dropped == 0 {
        Some(AnomalyKind::Throttled)
    } else {
        None
    };
    let mut j = Judgement {
        overflows,
        kind: explained,
        missed,
        dropped: 0,
    };
    if explained.is_some() {
        return j;
    }
    if dropped > 0 {
        j.kind = Some(AnomalyKind::DroppedInterrupt);
        j.dropped = dropped;
        j.missed = j.missed.max(dropped);
        j.overflows = j.overflows.max(1 + dropped);
        return j;
    }
    j.kind = match class {
        DeltaClass::Ok => None,
        DeltaClass::Late => Some(AnomalyKind::Late),
        DeltaClass::Early => Some(AnomalyKind::Early),
        DeltaClass::Missed { .. } if w.records_lost => Some(AnomalyKind::WitnessLost),
        DeltaClass::Missed { .. } if absent == 0 => Some(AnomalyKind::CoalescedSignal),
        // A software clock cannot lose a PMU interrupt.
        DeltaClass::Missed { .. } => Some(AnomalyKind::SoftwareTimerSkip),
    };
    j
}

/// What the kernel's sample records show for one window of a free-running
/// hardware counter, on the counter's own axis. The driver arms each
/// overflow a period after the previous one, so overflows sit on a grid of
/// multiples of the period, and every sample carries the count at its
/// interrupt: a sample within skid of grid point k that follows one at grid
/// point j means k - j - 1 overflows in between had no interrupt. That holds
/// however late or merged the signals were, which is why this, not the
/// signal delta, decides drops on hardware. (The arm64 bug keeps the grid:
/// the driver re-arms the lost overflow's successor on the next start.)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counted {
    /// Sample records (interrupts) with a count up to this window's read.
    pub samples: u64,
    /// Overflows inside sample gaps that nothing explains: lost interrupts.
    pub absent: u64,
    /// Overflows inside gaps that span a THROTTLE/UNTHROTTLE record.
    pub absent_throttled: u64,
    /// Overflows inside gaps that span a LOST record: maybe just unwritten.
    pub absent_unwitnessed: u64,
    /// An interrupt taken further past its overflow than the skid allows.
    pub late_interrupt: bool,
    /// Overflows passed by an interrupt a period or more late: they had no
    /// interrupt of their own, but nothing was lost (the driver re-based the
    /// period when the late one came).
    pub late_skipped: u64,
    /// The largest gap between two samples in the window.
    pub max_gap: u64,
    /// Interrupts that never got a signal of their own: the kernel merged
    /// their signals into a later one (the timeline matches signals to
    /// interrupts in order, as realtime signals queue).
    pub unsignalled: u64,
    /// Events between the interrupt this signal was matched to and the
    /// read; None for a signal with no interrupt left to match.
    pub lateness: Option<u64>,
}

/// Judges a counted window against the skid.
pub fn judge_counted(c: &Counted, w: &Witness, skid: u64) -> Judgement {
    let absent_all = c.absent + c.absent_throttled + c.absent_unwitnessed + c.late_skipped;
    let mut j = Judgement {
        overflows: c.samples + absent_all,
        kind: None,
        missed: absent_all + c.unsignalled,
        dropped: 0,
    };
    j.kind = if w.tool_error {
        Some(AnomalyKind::ToolError)
    } else if c.absent > 0 {
        // A SIGIO or a throttle elsewhere in the window explains nothing
        // about a gap with no interrupt in it.
        j.dropped = c.absent;
        Some(AnomalyKind::DroppedInterrupt)
    } else if c.absent_unwitnessed > 0 {
        Some(AnomalyKind::WitnessLost)
    } else if c.absent_throttled > 0 {
        Some(AnomalyKind::Throttled)
    } else if c.unsignalled > 0 && w.sigio > 0 {
        Some(AnomalyKind::SignalQueueOverflow)
    } else if c.unsignalled > 0 {
        Some(AnomalyKind::CoalescedSignal)
    } else {
        match c.lateness {
            // A signal with no interrupt of its own.
            None => Some(AnomalyKind::Early),
            Some(l) if l > skid || c.late_interrupt => Some(AnomalyKind::Late),
            Some(_) => None,
        }
    };
    j
}

#[cfg(test)]
mod tests {
    use super::*;
    use DeltaClass::*;

    const P: u64 = 10_000;
    const S: u64 = 1_000;

    #[test]
    fn boundaries_at_exactly_skid() {
        assert_eq!(classify_delta(P, P, S), Ok);
        assert_eq!(classify_delta(P + S, P, S), Ok);
        assert_eq!(classify_delta(P - S, P, S), Ok);
        assert_eq!(classify_delta(P + S + 1, P, S), Late);
        assert_eq!(classify_delta(P - S - 1, P, S), Early);
        assert_eq!(classify_delta(2 * P - S, P, S), Missed { missed: 1 });
        assert_eq!(classify_delta(2 * P + S, P, S), Missed { missed: 1 });
        assert_eq!(classify_delta(2 * P - S - 1, P, S), Late);
        assert_eq!(classify_delta(2 * P + S + 1, P, S), Late);
        assert_eq!(classify_delta(0, P, S), Early);
    }

    #[test]
    fn k_of_three_and_more() {
        assert_eq!(classify_delta(3 * P, P, S), Missed { missed: 2 });
        assert_eq!(classify_delta(3 * P - S, P, S), Missed { missed: 2 });
        assert_eq!(classify_delta(17 * P + 5, P, S), Missed { missed: 16 });
        assert_eq!(classify_delta(u64::MAX, P, S), Late);
    }

    /// Found by tests/properties.rs: a delta near u64::MAX (a counter that
    /// went backwards, wrapped) once matched a multiple that saturated at
    /// u64::MAX, and judge's rounding overflowed to a tiny multiple.
    #[test]
    fn deltas_near_u64_max_neither_saturate_nor_wrap() {
        let p = 2_076_096_020_610_053_565;
        // 9p > u64::MAX: u64::MAX is 0.88p below it, far outside skid 0.
        assert_eq!(classify_delta(u64::MAX, p, 0), Late);
        // ... but truly within skid of it when the skid is large enough.
        let nine_p = 9 * u128::from(p);
        let skid = (nine_p - u128::from(u64::MAX)) as u64;
        assert_eq!(classify_delta(u64::MAX, p, skid), Missed { missed: 8 });
        assert_eq!(nearest_multiple(u64::MAX, p), 9);
        let (d, p) = (13_011_647_662_642_403_699, 10_870_192_822_134_295_834);
        assert_eq!(nearest_multiple(d, p), 1);
        let j = judge(classify_delta(d, p, 0), d, p, &Witness::default(), false);
        assert_eq!((j.kind, j.overflows), (Some(AnomalyKind::Late), 1));
    }

    #[test]
    fn zero_skid_demands_exact_multiples() {
        assert_eq!(classify_delta(P, P, 0), Ok);
        assert_eq!(classify_delta(P + 1, P, 0), Late);
        assert_eq!(classify_delta(2 * P, P, 0), Missed { missed: 1 });
    }

    fn w(samples: u64) -> Witness {
        Witness {
            kernel_samples: samples,
            ..Witness::default()
        }
    }

    #[test]
    fn ok_window_accounts_one_overflow() {
        let j = judge(Ok, P, P, &w(1), false);
        assert_eq!((j.overflows, j.kind, j.missed, j.dropped), (1, None, 0, 0));
    }

    #[test]
    fn missing_samples_mean_dropped_interrupts_on_hardware() {
        let j = judge(Missed { missed: 1 }, 2 * P, P, &w(1), false);
        assert_eq!(
            (j.kind, j.overflows, j.missed, j.dropped),
            (Some(AnomalyKind::DroppedInterrupt), 2, 1, 1)
        );
        // k = 3 with one of two missing interrupts witnessed: one dropped.
        let j = judge(Missed { missed: 2 }, 3 * P, P, &w(2), false);
        assert_eq!(
            (j.kind, j.dropped),
            (Some(AnomalyKind::DroppedInterrupt), 1)
        );
        // A window with no sample at all still had the final interrupt.
        let j = judge(Missed { missed: 2 }, 3 * P, P, &w(0), false);
        assert_eq!(j.dropped, 2);
    }

    #[test]
    fn all_samples_present_mean_coalesced() {
        let j = judge(Missed { missed: 2 }, 3 * P, P, &w(3), false);
        assert_eq!(
            (j.kind, j.dropped, j.missed),
            (Some(AnomalyKind::CoalescedSignal), 0, 2)
        );
    }

    #[test]
    fn throttle_sigio_lost_and_tool_errors_are_never_drops() {
        let throttled = Witness {
            throttled: true,
            kernel_samples: 1,
            ..Witness::default()
        };
        assert_eq!(
            judge(Missed { missed: 1 }, 2 * P, P, &throttled, false).kind,
            Some(AnomalyKind::Throttled)
        );
        assert_eq!(
            judge(Late, 25_000, P, &throttled, false).kind,
            Some(AnomalyKind::Throttled)
        );
        // Throttling around an ok delta is not an anomaly.
        assert_eq!(judge(Ok, P, P, &throttled, false).kind, None);
        // Both overflows interrupted (two samples); one signal fell back.
        let sigio = Witness { sigio: 1, ..w(2) };
        assert_eq!(
            judge(Missed { missed: 1 }, 2 * P, P, &sigio, false).kind,
            Some(AnomalyKind::SignalQueueOverflow)
        );
        assert_eq!(
            judge(Late, 25_000, P, &sigio, false).kind,
            Some(AnomalyKind::SignalQueueOverflow)
        );
        let lost = Witness {
            records_lost: true,
            ..w(1)
        };
        let j = judge(Missed { missed: 1 }, 2 * P, P, &lost, false);
        assert_eq!((j.kind, j.dropped), (Some(AnomalyKind::WitnessLost), 0));
        let broken = Witness {
            tool_error: true,
            ..w(1)
        };
        assert_eq!(
            judge(Missed { missed: 1 }, 2 * P, P, &broken, false).kind,
            Some(AnomalyKind::ToolError)
        );
    }

    /// A SIGIO in the window must not hide an interrupt that never
    /// happened: the overflows it stood for have their sample records.
    #[test]
    fn sigio_does_not_explain_a_missing_sample() {
        // Three overflows, one signal, one SIGIO, two samples: the SIGIO'd
        // overflow and the signalled one; the third never interrupted.
        let sigio = Witness { sigio: 1, ..w(2) };
        let j = judge(Missed { missed: 2 }, 3 * P, P, &sigio, false);
        assert_eq!(
            (j.kind, j.missed, j.dropped),
            (Some(AnomalyKind::DroppedInterrupt), 2, 1)
        );
        // On a software clock a missing sample is the timer skipping, not a
        // drop, so the SIGIO is what the window shows.
        let j = judge(Missed { missed: 2 }, 3 * P, P, &sigio, true);
        assert_eq!(
            (j.kind, j.dropped),
            (Some(AnomalyKind::SignalQueueOverflow), 0)
        );
        // ... unless the missing sample is one we injected.
        let injected = Witness {
            injected: 1,
            ..sigio
        };
        let j = judge(Missed { missed: 2 }, 3 * P, P, &injected, true);
        assert_eq!(
            (j.kind, j.dropped),
            (Some(AnomalyKind::DroppedInterrupt), 1)
        );
    }

    #[test]
    fn software_gaps_are_timer_skips_unless_injected() {
        let j = judge(Missed { missed: 1 }, 2 * P, P, &w(1), true);
        assert_eq!(
            (j.kind, j.dropped),
            (Some(AnomalyKind::SoftwareTimerSkip), 0)
        );
        let injected = Witness {
            injected: 1,
            ..w(1)
        };
        let j = judge(Missed { missed: 1 }, 2 * P, P, &injected, true);
        assert_eq!(
            (j.kind, j.dropped),
            (Some(AnomalyKind::DroppedInterrupt), 1)
        );
        // Two absent, one of them ours: one dropped (ours), the window is
        // still reported as the stronger kind.
        let j = judge(Missed { missed: 2 }, 3 * P, P, &injected, true);
        assert_eq!(
            (j.kind, j.dropped),
            (Some(AnomalyKind::DroppedInterrupt), 1)
        );
    }

    #[test]
    fn an_injected_window_is_a_drop_even_when_jitter_makes_it_late() {
        let injected = Witness {
            injected: 1,
            ..w(1)
        };
        let j = judge(Late, 23_000, P, &injected, true);
        assert_eq!(
            (j.kind, j.dropped, j.missed),
            (Some(AnomalyKind::DroppedInterrupt), 1, 1)
        );
        // Without the injection the same window is just late.
        assert_eq!(
            judge(Late, 23_000, P, &w(1), true).kind,
            Some(AnomalyKind::Late)
        );
    }

    #[test]
    fn late_and_early_account_the_nearest_multiple() {
        let j = judge(Late, 25_100, P, &w(2), false);
        assert_eq!((j.kind, j.overflows), (Some(AnomalyKind::Late), 3));
        let j = judge(Early, 4_000, P, &w(0), false);
        assert_eq!(
            (j.kind, j.overflows, j.missed),
            (Some(AnomalyKind::Early), 0, 0)
        );
    }

    fn counted(samples: u64) -> Counted {
        Counted {
            samples,
            lateness: Some(10),
            ..Counted::default()
        }
    }

    #[test]
    fn counted_gaps_decide_drops_and_nothing_excuses_a_plain_gap() {
        let w = Witness::default();
        assert_eq!(judge_counted(&counted(1), &w, S).kind, None);
        let drop = Counted {
            absent: 1,
            absent_throttled: 2,
            unsignalled: 1,
            ..counted(1)
        };
        // A SIGIO and a throttled gap in the same window excuse only their
        // own overflows.
        let j = judge_counted(&drop, &Witness { sigio: 1, ..w }, S);
        assert_eq!(
            (j.kind, j.dropped, j.missed, j.overflows),
            (Some(AnomalyKind::DroppedInterrupt), 1, 4, 4)
        );
        let tool = Witness {
            tool_error: true,
            ..w
        };
        assert_eq!(
            judge_counted(&drop, &tool, S).kind,
            Some(AnomalyKind::ToolError)
        );
    }

    #[test]
    fn counted_explanations_in_order() {
        let w = Witness::default();
        let kind = |c: Counted, w: &Witness| judge_counted(&c, w, S).kind;
        let unwitnessed = Counted {
            absent_unwitnessed: 1,
            absent_throttled: 1,
            ..counted(1)
        };
        assert_eq!(kind(unwitnessed, &w), Some(AnomalyKind::WitnessLost));
        let throttled = Counted {
            absent_throttled: 1,
            ..counted(1)
        };
        assert_eq!(kind(throttled, &w), Some(AnomalyKind::Throttled));
        let merged = Counted {
            unsignalled: 2,
            ..counted(3)
        };
        assert_eq!(kind(merged, &w), Some(AnomalyKind::CoalescedSignal));
        let sigio = Witness { sigio: 1, ..w };
        assert_eq!(kind(merged, &sigio), Some(AnomalyKind::SignalQueueOverflow));
        // Signal-level: late read, late interrupt, a signal with no interrupt.
        let late = Counted {
            lateness: Some(S + 1),
            ..counted(1)
        };
        assert_eq!(kind(late, &w), Some(AnomalyKind::Late));
        let late_irq = Counted {
            late_interrupt: true,
            late_skipped: 2,
            ..counted(1)
        };
        let j = judge_counted(&late_irq, &w, S);
        assert_eq!(
            (j.kind, j.dropped, j.missed, j.overflows),
            (Some(AnomalyKind::Late), 0, 2, 3)
        );
        let orphan = Counted {
            lateness: None,
            ..counted(0)
        };
        assert_eq!(kind(orphan, &w), Some(AnomalyKind::Early));
    }

    /// Found under load: an injected signal that came right after its
    /// predecessor left a merged window that looked ok, or coalesced, and
    /// the self-test lost count. What we discarded is a drop regardless.
    #[test]
    fn an_injection_is_a_drop_whatever_the_merged_delta_looks_like() {
        let injected = Witness {
            injected: 1,
            ..w(1)
        };
        for software in [true, false] {
            let j = judge(Ok, P + 3, P, &injected, software);
            assert_eq!(
                (j.kind, j.dropped, j.missed, j.overflows),
                (Some(AnomalyKind::DroppedInterrupt), 1, 1, 2)
            );
            // Samples to spare (a merged signal elsewhere in the window).
            let extra = Witness {
                kernel_samples: 2,
                ..injected
            };
            let j = judge(Missed { missed: 1 }, 2 * P, P, &extra, software);
            assert_eq!(
                (j.kind, j.dropped),
                (Some(AnomalyKind::DroppedInterrupt), 1)
            );
        }
    }
}
