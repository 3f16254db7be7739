/*!
Stops no record shows (the witness throttled, none at all, a switch
record without a count): lost or not there, the grid kept or moved.
*/

use super::InterruptJudge;
use super::drivers::{Drivers, Stop, StopKind};
use super::due::Due;
use super::hypotheses::lose_at_stop;
use super::totals::{InterruptEvent, InterruptEventKind};

impl InterruptJudge {
    /// Stops may have gone unrecorded (the witness was throttled, or there
    /// is none) since the last sample: one of unknown count. Its branches
    /// where an overflow was lost survive only where the next record's
    /// count fits the loss (a period or more past the due point).
    ///
    /// `by`: the count of the record that follows them, when known: they
    /// were at or below it, so no overflow due past it was lost there.
    pub(super) fn unwitnessed_stops(&mut self, time_ns: u64, cpu: u32, by: Option<u64>) {
        if std::mem::take(&mut self.stops_unwitnessed)
            || self.witness_throttled
            || self.cfg.stops_unseen
        {
            self.stop_unknown(time_ns, cpu, false, by);
        }
    }

    /// A stop of unknown count since the last sample: lost or not, with
    /// the grid kept or moved by an unknown amount.
    ///
    /// `after_pending`: a recorded stop of its own (after any earlier stop
    /// that found an overflow pending, with no sample between): that
    /// overflow was lost at the earlier stop, as in `stop_at`. Else (stops
    /// the witness missed since the last sample, in unknown order with a
    /// recorded one) it may also still be pending.
    pub(super) fn stop_unknown(
        &mut self,
        time_ns: u64,
        cpu: u32,
        after_pending: bool,
        by: Option<u64>,
    ) {
        let p = self.cfg.period;
        let prev = self.prev_count;
        let mut next = Vec::with_capacity(self.hyps.len() * 3);
        for mut h in std::mem::take(&mut self.hyps) {
            if let Some((lo, hi)) = h.pending_stop {
                // Skipping the hypothesis's unknown-stop branches while an
                // overflow was pending missed the losses of a second stop
                // before the next sample: the grid fell behind and a later
                // sample fit no hypothesis.
                if !after_pending {
                    next.push(h.clone());
                }
                h.pending_stop = None;
                let earlier = Stop {
                    lo,
                    hi,
                    kind: StopKind::Switch,
                };
                let event = InterruptEvent {
                    kind: InterruptEventKind::Dropped,
                    time_ns,
                    cpu,
                    count: lo,
                    prev_count: prev,
                    overflows: 1,
                    stop_count: Some(lo),
                    lateness: None,
                    injected: false,
                };
                lose_at_stop(&mut h, p, earlier, event);
            }
            // Not lost: under a delivering driver, whatever was pending.
            next.push(h.clone());
            if h.due.unknown() || by.is_some_and(|c| h.due.lo > c) {
                // Not due by the stop, which was at or below `by`.
                continue;
            }
            if !h.drivers.has(Drivers::STOCK) {
                continue;
            }
            h.drivers = Drivers::STOCK;
            let event = InterruptEvent {
                kind: InterruptEventKind::Dropped,
                time_ns,
                cpu,
                count: h.due.lo,
                prev_count: prev,
                overflows: 1,
                stop_count: None,
                lateness: None,
                injected: false,
            };
            let mut kept = h.clone();
            kept.tally.dropped += 1;
            kept.tally.dropped_at_switch += 1;
            kept.tally.events.push(event);
            kept.due = kept.due.plus(p);
            next.push(kept);
            // The grid moved by more than a period: a re-base at the
            // restart, or several stops that each lost an overflow on the
            // grid (rule 2 each time). Which one the records cannot say, so
            // no re-base is claimed here: with it counted, every
            // explanation left could claim a re-base that was two losses.
            let mut moved = h;
            moved.tally.dropped += 1;
            moved.tally.dropped_at_switch += 1;
            moved.tally.events.push(event);
            moved.due = Due {
                lo: moved.due.lo.saturating_add(2 * p),
                hi: u64::MAX,
            };
            if after_pending && let Some(at_most) = by {
                // One recorded stop, its count bounded: a re-base at its
                // restart put the next due point a period past the stop.
                moved.due.hi = at_most.saturating_add(p);
                if moved.due.hi < moved.due.lo {
                    continue;
                }
            }
            next.push(moved);
        }
        self.hyps = next;
        self.commit_agreed();
    }
}
