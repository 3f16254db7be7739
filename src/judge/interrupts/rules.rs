/*!
The driver's rules, on the judge's due ranges, as pure functions.

Each overflow is re-armed by `armpmu_event_set_period` (x86:
`x86_perf_event_set_period`, the same rules). With `left` the events still
to count before the due point (the due point minus the count where the rule
runs):

1. `left <= -period`: the counter ran a whole period or more past the due
   point; the next overflow is due a period after the count (re-based: the
   grid moves).
2. Else `left <= 0`: the next overflow is due a period after the due point
   (the grid is kept).

The interrupt handler runs them at the count its sample records. A stop of
the event clears an overflow still pending, and the restart runs them at
the stop's count and ignores their "overflowed": the lost overflow's period
is consumed silently. Where the records give a due point or a stop's count
only as a range, these say what every count in it allows.
*/

use super::due::Due;

/// How a sample relates to its due point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
    OnTime,
    Late,
    /// A period or more late (by this much): the driver re-based.
    Rebased(u64),
}

/// Where the restart after a lost overflow puts the next due point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Restart {
    pub(super) due: Due,
    /// Rule 1 under every count in the ranges: the grid moved.
    pub(super) rebased: bool,
}

/// The overflow due in `due` was pending at a stop in [`stop_lo`,
/// `stop_hi`] and lost there: the restart re-arms from the stop's count.
pub(super) fn restart_after_loss(due: Due, stop_lo: u64, stop_hi: u64, p: u64) -> Restart {
    if stop_lo >= due.hi.saturating_add(p) {
        // Rule 1: a whole period past the due point; re-based.
        Restart {
            due: Due {
                lo: stop_lo.saturating_add(p),
                hi: stop_hi.saturating_add(p),
            },
            rebased: true,
        }
    } else if stop_hi < due.lo.saturating_add(p) {
        // Rule 2: the grid is kept.
        Restart {
            due: due.plus(p),
            rebased: false,
        }
    } else {
        // Rule 1 or 2 depending on where in [lo, hi] the stop was.
        Restart {
            due: Due {
                lo: due.lo.saturating_add(p),
                hi: stop_hi.saturating_add(p),
            },
            rebased: false,
        }
    }
}

/// Reset mode: PERIOD sets `period_left` to 0 and restarts the event, so
/// rule 2 makes the next overflow due a period after the restart, which is
/// at the reset (count 0) or up to `restart_slack` events after it.
pub(super) fn restart_after_period(p: u64, restart_slack: u64) -> Due {
    Due {
        lo: p,
        hi: p.saturating_add(restart_slack),
    }
}

/// An interrupt at `count` with its due point in `due` (at or below
/// `count`): how late it was and where the handler's re-arm puts the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Handled {
    /// The grid had moved by an unknown amount: this interrupt anchors it.
    Anchored {
        next: Due,
        /// Overflows a stop the witness missed may have lost on the way
        /// (the one the move itself proves lost is booked already).
        maybe_lost: u64,
        /// A period or more past the lowest due point it can have: maybe
        /// the driver's re-base in the handler.
        may_rebase: bool,
    },
    /// Less than a period late under every due point in range: rule 2.
    /// `lateness`: exact where the due point is.
    Kept {
        class: Class,
        next: Due,
        lateness: Option<u64>,
    },
    /// A period or more late under every due point in range: rule 1.
    Rebased { lateness: u64, next: Due },
    /// A period late under some due points in range (rule 1, by up to
    /// `lateness`), late under the others (rule 2): both followed.
    Either {
        lateness: u64,
        rebased: Due,
        kept: Due,
    },
}

/// The handler's re-arm for an interrupt at `count`, its due point in
/// `due` (`due.lo <= count`); `skid`: how late an interrupt may be taken
/// and be on time.
pub(super) fn rearm_in_handler(due: Due, count: u64, p: u64, skid: u64) -> Handled {
    let late_min = count.saturating_sub(due.hi);
    let late_max = count - due.lo;
    if due.unknown() {
        // The grid moved by an unknown amount (a restart re-based at a stop
        // we could not read): this interrupt anchors it. Its due point is in
        // [lo, count], less than a period back unless the driver re-based
        // again (then the next is due at count + p), so the next is due in
        // [max(lo, count - p + 1) + p, count + p]. (Anchoring at count + p
        // exactly took the interrupt for on time: a later interrupt taken
        // earlier past its due point then fit no hypothesis.)
        //
        // A grid moved at a stop the witness missed is one loss and a
        // re-base, or (rule 2 each time) one loss per grid point up to this
        // interrupt's: at most (count - lo) / p + 2 with lo two periods past
        // the first lost one. The loss booked is certain; the rest may have
        // been, so ambiguous.
        let maybe_lost = (count - due.lo) / p + 1;
        // A period or more past the lowest due point it can have, it may be
        // the driver's re-base in the handler (rule 1): its next due point,
        // count + p, is inside the range below either way, so no record
        // tells. Booked on time, maybe re-based: booked on time alone, those
        // re-bases fit no explanation's count (with no witness at all,
        // pseudo-NMI on: the driver re-based 48 times in the handler, the
        // judge had 45 as some explanation's).
        let may_rebase = count - due.lo >= p;
        let next = Due {
            lo: due.lo.max((count + 1).saturating_sub(p)).saturating_add(p),
            hi: count.saturating_add(p),
        };
        Handled::Anchored {
            next,
            maybe_lost,
            may_rebase,
        }
    } else if late_min >= p {
        Handled::Rebased {
            lateness: late_min,
            next: Due::exact(count.saturating_add(p)),
        }
    } else if late_max < p {
        let lateness = (due.lo == due.hi).then_some(late_max);
        // Its due point is at or before its count.
        let next = Due {
            lo: due.lo,
            hi: due.hi.min(count),
        }
        .plus(p);
        let class = if late_min > skid {
            Class::Late
        } else {
            Class::OnTime
        };
        Handled::Kept {
            class,
            next,
            lateness,
        }
    } else {
        // A period late under some due points in range, not under others:
        // follow both.
        Handled::Either {
            lateness: late_max,
            rebased: Due::exact(count.saturating_add(p)),
            kept: Due {
                lo: due.lo.max(count - p + 1),
                hi: due.hi,
            }
            .plus(p),
        }
    }
}

/// An interrupt at `count` below an explanation's due point `due`, the
/// last interrupt at `raced` where it may have raced a read of the count
/// (`nmi_may_have_raced_a_read`): the due point this interrupt had, or
/// `None` where under this explanation no overflow was due yet (it is
/// refuted).
pub(super) fn rearm_after_raced_read(
    due: Due,
    raced: Option<u64>,
    count: u64,
    p: u64,
) -> Option<Due> {
    match raced {
        // The last interrupt came a period or more late under this
        // explanation (the driver re-based from it), and may have raced a
        // read of the count: re-armed from below its sample's count,
        // anywhere up to this one.
        Some(at) if count > at && due == Due::exact(at.saturating_add(p)) => Some(Due {
            lo: at + 1,
            hi: count,
        }),
        _ => None,
    }
}

/// An overflow pending at a stop in [`stop_lo`, `stop_hi`], due in `due`,
/// and the next interrupt at `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AtStop {
    /// The stop cleared it: lost.
    Lost,
    /// This interrupt is the pending one, taken before the stop finished.
    Taken,
    /// Either: taken, or lost with this the next overflow's interrupt.
    TakenOrLost,
}

/// Whether the interrupt at `count` can be the overflow pending at the
/// stop. `irq_masked`: the PMU interrupt is an ordinary IRQ, which the
/// scheduler masks from the witness's read to the stop.
pub(super) fn pending_at_stop(
    due: Due,
    stop_lo: u64,
    stop_hi: u64,
    count: u64,
    irq_masked: bool,
) -> AtStop {
    if !(due.lo <= count && count <= stop_hi) || irq_masked {
        // Not taken before the stop finished (as an NMI would be; an
        // ordinary IRQ cannot be, the scheduler masks it from the witness's
        // read to the stop): the stop cleared it.
        AtStop::Lost
    } else if stop_lo < stop_hi {
        // Taken before the stop, or lost there and this is the next
        // overflow's interrupt: with the stop's count only a range, the next
        // due point after a loss (rule 2) can lie below the stop's upper
        // end, so both can fit: follow the loss too.
        AtStop::TakenOrLost
    } else {
        AtStop::Taken
    }
}

