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

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 1_000;

    /// `armpmu_event_set_period` as the driver writes it, at `count` with
    /// the overflow due at `due`: `left` is what is still to count, the
    /// counter is programmed to overflow `left` events from `count`. The
    /// next due point, and whether rule 1 (re-base) ran.
    fn set_period(due: u64, count: u64, period: u64) -> (u64, bool) {
        let period = i64::try_from(period).unwrap();
        let mut left = i64::try_from(due).unwrap() - i64::try_from(count).unwrap();
        let rebased = if left <= -period {
            left = period;
            true
        } else if left <= 0 {
            left += period;
            false
        } else {
            false
        };
        (count + u64::try_from(left).unwrap(), rebased)
    }

    fn due(lo: u64, hi: u64) -> Due {
        Due { lo, hi }
    }

    #[test]
    fn the_reference_follows_the_driver_rules() {
        // left = 0: rule 2, a period after the due point.
        assert_eq!(set_period(5_000, 5_000, P), (6_000, false));
        // left = -(period - 1): still rule 2.
        assert_eq!(set_period(5_000, 5_999, P), (6_000, false));
        // left = -period: rule 1, a period after the count.
        assert_eq!(set_period(5_000, 6_000, P), (7_000, true));
        assert_eq!(set_period(5_000, 7_234, P), (8_234, true));
    }

    #[test]
    fn a_loss_at_the_due_point_keeps_the_grid() {
        // The task stopped exactly at the due point (left = 0): rule 2.
        let r = restart_after_loss(Due::exact(5_000), 5_000, 5_000, P);
        assert_eq!(r.due, Due::exact(6_000));
        assert!(!r.rebased);
    }

    #[test]
    fn a_loss_less_than_a_period_past_keeps_the_grid() {
        let r = restart_after_loss(Due::exact(5_000), 5_999, 5_999, P);
        assert_eq!(r.due, Due::exact(6_000));
        assert!(!r.rebased);
    }

    #[test]
    fn a_loss_a_whole_period_past_re_bases_at_the_restart() {
        // left = -period: rule 1, the next is due a period after the stop.
        let r = restart_after_loss(Due::exact(5_000), 6_000, 6_000, P);
        assert_eq!(r.due, Due::exact(7_000));
        assert!(r.rebased);
        let r = restart_after_loss(Due::exact(5_000), 6_500, 6_500, P);
        assert_eq!(r.due, Due::exact(7_500));
        assert!(r.rebased);
    }

    #[test]
    fn a_loss_at_exact_counts_is_the_driver_s_restart() {
        for d in [1_000, 5_000, 123_457] {
            for stop in d..=d + 3 * P {
                let r = restart_after_loss(Due::exact(d), stop, stop, P);
                let (next, rebased) = set_period(d, stop, P);
                assert_eq!(
                    (r.due, r.rebased),
                    (Due::exact(next), rebased),
                    "{d} {stop}"
                );
            }
        }
    }

    #[test]
    fn a_loss_at_a_stop_known_to_a_range_covers_both_rules() {
        // Stopped somewhere in [5,500, 6,500]: rule 2 below 6,000 (next
        // 6,000), rule 1 from it (next a period past the stop, up to 7,500).
        let r = restart_after_loss(Due::exact(5_000), 5_500, 6_500, P);
        assert_eq!(r.due, due(6_000, 7_500));
        assert!(!r.rebased);
        for stop in 5_500..=6_500 {
            let (next, _) = set_period(5_000, stop, P);
            assert!(r.due.lo <= next && next <= r.due.hi, "{stop}: {next}");
        }
        // A due range, the stop below a period past all of it: rule 2 for
        // each due point, the grid kept.
        let r = restart_after_loss(due(5_000, 5_200), 5_100, 5_150, P);
        assert_eq!(r.due, due(6_000, 6_200));
        assert!(!r.rebased);
        // A period past every due point in range: rule 1 for each.
        let r = restart_after_loss(due(5_000, 5_200), 6_200, 6_300, P);
        assert_eq!(r.due, due(7_200, 7_300));
        assert!(r.rebased);
    }

    #[test]
    fn the_restart_after_period_is_a_period_past_the_reset() {
        // PERIOD sets period_left to 0: rule 2 from the restart.
        assert_eq!(restart_after_period(10_000, 0), Due::exact(10_000));
        assert_eq!(restart_after_period(10_000, 1_000), due(10_000, 11_000));
    }

    #[test]
    fn an_interrupt_within_the_skid_is_on_time_and_keeps_the_grid() {
        assert_eq!(
            rearm_in_handler(Due::exact(1_000), 1_010, P, 10),
            Handled::Kept {
                class: Class::OnTime,
                next: Due::exact(2_000),
                lateness: Some(10),
            }
        );
    }

    #[test]
    fn an_interrupt_past_the_skid_is_late_and_keeps_the_grid() {
        assert_eq!(
            rearm_in_handler(Due::exact(1_000), 1_011, P, 10),
            Handled::Kept {
                class: Class::Late,
                next: Due::exact(2_000),
                lateness: Some(11),
            }
        );
        // A period less one late: left = -(period - 1), still rule 2.
        assert_eq!(
            rearm_in_handler(Due::exact(1_000), 1_999, P, 10),
            Handled::Kept {
                class: Class::Late,
                next: Due::exact(2_000),
                lateness: Some(999),
            }
        );
    }

    #[test]
    fn an_interrupt_a_period_late_re_bases_in_the_handler() {
        // left = -period: rule 1, the next a period after the interrupt.
        assert_eq!(
            rearm_in_handler(Due::exact(1_000), 2_000, P, 10),
            Handled::Rebased {
                lateness: 1_000,
                next: Due::exact(3_000),
            }
        );
        assert_eq!(
            rearm_in_handler(Due::exact(1_000), 3_300, P, 10),
            Handled::Rebased {
                lateness: 2_300,
                next: Due::exact(4_300),
            }
        );
    }

    #[test]
    fn the_handler_at_exact_counts_is_the_driver_s_re_arm() {
        for d in [1_000, 7_777] {
            for count in d..=d + 3 * P {
                let (next, rebased) = set_period(d, count, P);
                let got = match rearm_in_handler(Due::exact(d), count, P, 10) {
                    Handled::Kept { next, lateness, .. } => {
                        assert_eq!(lateness, Some(count - d));
                        (next, false)
                    }
                    Handled::Rebased { lateness, next } => {
                        assert_eq!(lateness, count - d);
                        (next, true)
                    }
                    other => panic!("{d} {count}: {other:?}"),
                };
                assert_eq!(got, (Due::exact(next), rebased), "{d} {count}");
            }
        }
    }

    #[test]
    fn an_interrupt_against_a_due_range() {
        // Less than a period past every due point: the next due point is
        // a period past the due points at or below the count; on time by
        // the earliest lateness; no lateness to record.
        assert_eq!(
            rearm_in_handler(due(1_000, 1_100), 1_050, P, 10),
            Handled::Kept {
                class: Class::OnTime,
                next: due(2_000, 2_050),
                lateness: None,
            }
        );
        assert_eq!(
            rearm_in_handler(due(1_000, 1_100), 1_150, P, 10),
            Handled::Kept {
                class: Class::Late,
                next: due(2_000, 2_100),
                lateness: None,
            }
        );
        // A period past every due point: rule 1 whichever it was.
        assert_eq!(
            rearm_in_handler(due(1_000, 1_100), 2_100, P, 10),
            Handled::Rebased {
                lateness: 1_000,
                next: Due::exact(3_100),
            }
        );
        // Due at or below 1,200: a period late, rule 1 (next 3,200); due
        // in [1,201, 1,500]: rule 2 (next 2,201..2,500).
        assert_eq!(
            rearm_in_handler(due(1_000, 1_500), 2_200, P, 10),
            Handled::Either {
                lateness: 1_200,
                rebased: Due::exact(3_200),
                kept: due(2_201, 2_500),
            }
        );
        for d in 1_000..=1_500 {
            let (next, rebased) = set_period(d, 2_200, P);
            assert_eq!(rebased, d <= 1_200, "{d}");
            assert!(rebased || (2_201..=2_500).contains(&next), "{d}: {next}");
        }
    }

    #[test]
    fn an_interrupt_anchors_a_grid_moved_by_an_unknown_amount() {
        // Due somewhere from 4,000 on; at 5,000 the due point was in
        // [4,000, 5,000]. Rule 2 from (4,000, 5,000] puts the next in
        // [5,001, 6,000]; rule 1 from 4,000 (a period back) at 6,000.
        assert_eq!(
            rearm_in_handler(due(4_000, u64::MAX), 5_000, P, 10),
            Handled::Anchored {
                next: due(5_001, 6_000),
                maybe_lost: 2,
                may_rebase: true,
            }
        );
        for d in 4_000..=5_000 {
            let (next, rebased) = set_period(d, 5_000, P);
            assert_eq!(rebased, d == 4_000);
            assert!((5_001..=6_000).contains(&next), "{d}: {next}");
        }
        // Less than a period past the lowest due point: never rule 1.
        assert_eq!(
            rearm_in_handler(due(4_000, u64::MAX), 4_999, P, 10),
            Handled::Anchored {
                next: due(5_000, 5_999),
                maybe_lost: 1,
                may_rebase: false,
            }
        );
    }

    #[test]
    fn an_interrupt_below_its_due_point_fits_only_after_a_raced_read() {
        // The last interrupt at 5,000 re-based (next due 6,000) and may have
        // raced a read: the driver re-armed anywhere up to this interrupt.
        assert_eq!(
            rearm_after_raced_read(Due::exact(6_000), Some(5_000), 5_500, P),
            Some(due(5_001, 5_500))
        );
        // Not past the raced sample, not on the grid it re-based to, or no
        // race: no overflow was due.
        assert_eq!(
            rearm_after_raced_read(Due::exact(6_000), Some(5_000), 5_000, P),
            None
        );
        assert_eq!(
            rearm_after_raced_read(Due::exact(6_001), Some(5_000), 5_500, P),
            None
        );
        assert_eq!(
            rearm_after_raced_read(Due::exact(6_000), None, 5_500, P),
            None
        );
    }

    #[test]
    fn an_overflow_pending_at_a_stop_is_lost_unless_an_nmi_took_it() {
        let d = Due::exact(2_000);
        // The next interrupt at the stop's count, due before it: an NMI
        // took it before the stop cleared the overflow flag.
        assert_eq!(
            pending_at_stop(d, 2_050, 2_050, 2_050, false),
            AtStop::Taken
        );
        // An ordinary IRQ is masked from the witness's read to the stop.
        assert_eq!(pending_at_stop(d, 2_050, 2_050, 2_050, true), AtStop::Lost);
        // Past the stop, or below the due point: not the pending one.
        assert_eq!(pending_at_stop(d, 2_050, 2_050, 3_010, false), AtStop::Lost);
        assert_eq!(pending_at_stop(d, 2_050, 2_050, 1_999, false), AtStop::Lost);
        // The stop's count only a range: taken, or lost and this the next.
        assert_eq!(
            pending_at_stop(d, 2_050, 2_300, 2_100, false),
            AtStop::TakenOrLost
        );
    }
}
