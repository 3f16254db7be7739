/*!
What the records of a generated stream decide, by the model's own reading of
them: where they place the due point, and whether they say if an overflow
was pending at a stop and how the restart re-armed. The model knows the
truth; these rules say only which parts of it the records pin down, from
the driver's rules and what each record carries (a stop's witness reads
the count at or before the stop; a later read is at or after it), never
from the judge's state.

An overflow the records decide was lost must be reported dropped; one they
leave open may be called either way, and every such place (a stop, a
PERIOD or the final DISABLE) is counted, which bounds the ambiguous.
*/

/// Where the records written so far place the current due point (of the
/// pending overflow, if any).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Known {
    /// In [lo, hi] (absolute counts): exact (lo == hi) from the start or a
    /// reset on, as long as every stop is recorded with its count and every
    /// record is written; within the handler slack after a reset by the
    /// handler before (its restart is anywhere in that slack).
    Due { lo: u64, hi: u64 },
    /// Not placed: a stop unrecorded or without its count, a ring gap, a
    /// throttle, a count wrap, or a question the records left open, since
    /// the last sample or reset (either places it again).
    Unknown,
}

impl Known {
    pub(super) fn exact(due: u64) -> Known {
        Known::Due { lo: due, hi: due }
    }

    /// How far the records leave the due point open, if they place it.
    pub(super) fn spread(self) -> Option<u64> {
        match self {
            Known::Due { lo, hi } => Some(hi - lo),
            Known::Unknown => None,
        }
    }

    /// After a sample written at count `c` (the pending overflow's
    /// interrupt): rule 2 keeps the grid (the next due a period on), rule 1
    /// re-bases at `c`. Whatever the due point was, the next is in
    /// (c, c + period]: rule 2 from a due point less than a period before
    /// `c`, or rule 1 at `c`.
    pub(super) fn after_sample(self, c: u64, period: u64) -> Known {
        match self {
            Known::Due { hi, .. } if c >= hi + period => Known::exact(c + period),
            Known::Due { lo, hi } if c < lo + period => Known::Due {
                lo: lo + period,
                hi: hi + period,
            },
            _ => Known::Due {
                lo: c + 1,
                hi: c + period,
            },
        }
    }
}

/// Where the records place a stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Seen {
    /// At this count: a witness's read counting user mode only (nothing
    /// counts in the switch path), the final count, a reset's DISABLE.
    At(u64),
    /// At or after this count, up to the next count read (a witness's
    /// read counting kernel mode: the switch path counts after it).
    From(u64),
    /// Somewhere in [lo, hi]: the PERIOD of the handler before, up to the
    /// handler slack after its read.
    Between(u64, u64),
    /// Not recorded, or recorded without its count.
    Unseen,
}

/// What the records say of a question about a stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Answer {
    Yes,
    No,
    /// Both fit, whatever comes later.
    Open,
    /// Answered by the next count read (`NextRead`).
    NextRead(NextRead),
}

/// "No" if the next count read is below `below` (or, a sample's, below
/// `sample_below`), else open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct NextRead {
    pub(super) below: u64,
    pub(super) sample_below: u64,
}

/// Was the overflow due in `known` pending when the event stopped (the due
/// point reached, its interrupt not yet taken: a sample taken before the
/// stop would be in the records and would have moved the due point on)?
pub(super) fn pending_at(known: Known, seen: Seen, period: u64) -> Answer {
    let Known::Due { lo, hi } = known else {
        return Answer::Open;
    };
    match seen {
        Seen::At(s) if s >= hi => Answer::Yes,
        Seen::At(s) if s < lo => Answer::No,
        Seen::From(w) if w >= hi => Answer::Yes,
        // The stop is at or below any later read: one below the due point
        // says it was not reached. If it was, the interrupt that follows
        // (its sample, less than a period past the due point, when the
        // overflow was not lost) is below where a lost one's successor
        // could be.
        Seen::From(_) => Answer::NextRead(NextRead {
            below: lo,
            sample_below: lo + period,
        }),
        Seen::Between(a, _) if a >= hi => Answer::Yes,
        Seen::Between(_, b) if b < lo => Answer::No,
        _ => Answer::Open,
    }
}

/// How the restart after a stop that lost the overflow due in `known`
/// re-armed: rule 1 (re-based: the stop a period or more past the due
/// point), "Yes", or rule 2, "No". With the stop at an exact count, the
/// due point after is `after_loss`'s.
pub(super) fn rebased_at_restart(known: Known, seen: Seen, period: u64) -> Answer {
    let Known::Due { lo, hi } = known else {
        return Answer::Open;
    };
    match seen {
        Seen::At(s) | Seen::From(s) if s >= hi + period => Answer::Yes,
        Seen::At(s) if s < lo + period => Answer::No,
        // Rule 2 if the stop was less than a period past every due point
        // the range holds: the next read bounds the stop.
        Seen::From(_) => Answer::NextRead(NextRead {
            below: lo + period,
            sample_below: lo + period,
        }),
        _ => Answer::Open,
    }
}

/// Where the records place the due point after a loss at a stop whose
/// re-arm they decided (`rebased`); `Unknown` when the stop's count is
/// not exact and it re-based.
pub(super) fn after_loss(known: Known, seen: Seen, rebased: bool, period: u64) -> Known {
    match (known, seen, rebased) {
        (Known::Due { .. }, Seen::At(s), true) => Known::exact(s + period),
        (Known::Due { lo, hi }, _, false) => Known::Due {
            lo: lo + period,
            hi: hi + period,
        },
        _ => Known::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 10_000;

    #[test]
    fn an_exact_stop_past_an_exact_due_point_found_it_pending() {
        let k = Known::exact(20_000);
        assert_eq!(pending_at(k, Seen::At(20_000), P), Answer::Yes);
        assert_eq!(pending_at(k, Seen::At(19_999), P), Answer::No);
        assert_eq!(
            pending_at(Known::Unknown, Seen::At(25_000), P),
            Answer::Open
        );
        assert_eq!(pending_at(k, Seen::Unseen, P), Answer::Open);
    }

    #[test]
    fn a_stop_inside_the_due_range_is_open() {
        let k = Known::Due {
            lo: 20_000,
            hi: 21_000,
        };
        assert_eq!(pending_at(k, Seen::At(20_500), P), Answer::Open);
        assert_eq!(pending_at(k, Seen::At(21_000), P), Answer::Yes);
        assert_eq!(pending_at(k, Seen::Between(19_000, 19_999), P), Answer::No);
        assert_eq!(
            pending_at(k, Seen::Between(19_000, 20_000), P),
            Answer::Open
        );
        assert_eq!(pending_at(k, Seen::Between(21_000, 22_000), P), Answer::Yes);
    }

    #[test]
    fn a_witness_below_the_due_point_waits_for_the_next_read() {
        let k = Known::exact(20_000);
        assert_eq!(pending_at(k, Seen::From(20_000), P), Answer::Yes);
        assert_eq!(
            pending_at(k, Seen::From(19_000), P),
            Answer::NextRead(NextRead {
                below: 20_000,
                sample_below: 30_000
            })
        );
    }

    #[test]
    fn the_restart_re_bases_a_period_past_the_due_point() {
        let k = Known::exact(20_000);
        assert_eq!(rebased_at_restart(k, Seen::At(30_000), P), Answer::Yes);
        assert_eq!(rebased_at_restart(k, Seen::At(29_999), P), Answer::No);
        assert_eq!(
            after_loss(k, Seen::At(30_000), true, P),
            Known::exact(40_000)
        );
        assert_eq!(
            after_loss(k, Seen::At(29_999), false, P),
            Known::exact(30_000)
        );
        let range = Known::Due {
            lo: 20_000,
            hi: 21_000,
        };
        assert_eq!(rebased_at_restart(range, Seen::At(30_500), P), Answer::Open);
        assert_eq!(rebased_at_restart(k, Seen::From(30_000), P), Answer::Yes);
        assert_eq!(after_loss(k, Seen::From(30_000), true, P), Known::Unknown);
    }

    #[test]
    fn a_sample_moves_the_due_point_by_the_rule_it_fits() {
        let k = Known::exact(20_000);
        assert_eq!(k.after_sample(20_500, P), Known::exact(30_000));
        assert_eq!(k.after_sample(30_000, P), Known::exact(40_000));
        let range = Known::Due {
            lo: 20_000,
            hi: 21_000,
        };
        let anchored = Known::Due {
            lo: 30_501,
            hi: 40_500,
        };
        assert_eq!(range.after_sample(30_500, P), anchored);
        assert_eq!(Known::Unknown.after_sample(30_500, P), anchored);
        // Anchored on a sample, a stop a period past it found the next
        // overflow pending; one before, open.
        assert_eq!(pending_at(anchored, Seen::At(40_500), P), Answer::Yes);
        assert_eq!(pending_at(anchored, Seen::At(40_499), P), Answer::Open);
        assert_eq!(range.after_sample(31_000, P), Known::exact(41_000));
        assert_eq!(range.spread(), Some(1_000));
    }
}
