/*!
LOST records: the samples and stops in a gap of the ring were never
written, so the due points passed there are `record_lost`, never
dropped.
*/

use super::InterruptJudge;
use super::totals::InterruptEventKind;

impl InterruptJudge {
    /// The ring lost `lost` records: samples or stops up to the next sample
    /// may be missing.
    pub fn lost(&mut self, time_ns: u64, lost: u64) {
        self.totals.lost_records += lost;
        self.ring_gap = true;
        self.grid_uncertain = true;
        self.note_at_last_sample(InterruptEventKind::RecordsLost, time_ns, u32::MAX, lost);
    }

    /// After a LOST record: samples (or stops) are missing up to `count`.
    /// The due points passed in the gap are counted `record_lost`, the grid
    /// kept, and stops in the gap taken as unknown.
    pub(super) fn reanchor_after_ring_gap(&mut self, time_ns: u64, count: u64) {
        if let Some(last) = count.checked_sub(self.cfg.period) {
            self.ring_gap_up_to(time_ns, last, count);
        }
        self.stops_unwitnessed = true;
        self.merge();
    }

    /// The due points up to `last` passed in a ring gap: `record_lost`
    /// (their samples, or the stops that lost them, may be in the gap), the
    /// grid kept.
    ///
    /// `seen`: a count read after every stop before the gap (the sample,
    /// read or stop that ends it).
    pub(super) fn ring_gap_up_to(&mut self, time_ns: u64, last: u64, seen: u64) {
        let p = self.cfg.period;
        // A stop before the gap found an overflow pending: lost there (the
        // restart re-arms from the stop's count by rule 1 or 2), or taken
        // before the stop with its sample in the gap (the grid kept). Only
        // the second was followed: after a restart that re-based, every due
        // point after the gap was off and a later sample fit no hypothesis.
        let pending = std::mem::take(&mut self.hyps);
        let hyps = self.resolve_pending_stops(pending, seen, |_| time_ns);
        let mut record_lost = 0;
        for mut h in hyps {
            if h.due.unknown() || last < h.due.lo {
                self.hyps.push(h);
                continue;
            }
            let mut k = (last - h.due.lo) / p + 1;
            record_lost = record_lost.max(k);
            // A due point above `last - (k - 1) * p` passed one grid point
            // fewer in the gap. Where the due point is a range (after a
            // reset, an unexplained sample, a stop whose count is a range)
            // the range is split there: advancing it all by k periods put
            // the next due point a period ahead of the truth when it lay in
            // the upper part, and a later sample fit no hypothesis.
            while k > 0 && h.due.hi > last - (k - 1) * p {
                let top = last - (k - 1) * p;
                let mut below = h.clone();
                below.due.hi = top;
                below.due = below.due.plus(k * p);
                self.hyps.push(below);
                h.due.lo = top + 1;
                k -= 1;
            }
            h.due = h.due.plus(k * p);
            self.hyps.push(h);
        }
        self.totals.record_lost += record_lost;
        self.totals.overflows += record_lost;
    }
}
