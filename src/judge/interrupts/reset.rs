/*!
Reset mode: the handler's RESET and PERIOD, a stop of the event and a
restart a period from the reset.
*/

use super::InterruptJudge;
use super::drivers::{Stop, StopKind};
use super::rules::restart_after_period;

impl InterruptJudge {
    /// Reset mode: the handler read `read`, then reset the count. Its
    /// DISABLE (PERIOD, in runs recorded before) stops the event a few
    /// user-mode events after the read (a pending overflow is lost there
    /// like at any stop) and re-arms one period from the restart, which is
    /// a few events after the RESET. `at_stop`: the count at the DISABLE,
    /// where the handler read it (exact; counting kernel mode, the read is
    /// only a lower bound of it).
    pub fn reset(&mut self, time_ns: u64, read: u64, at_stop: Option<u64>) {
        let last_sample = self.prev_count.take();
        self.forget_last_sample();
        // The count starts again from 0: reads before say nothing of the
        // samples after.
        self.read_since_sample = None;
        self.raced_sample = None;
        if self.cfg.software {
            return;
        }
        let slack = self.cfg.handler_slack.saturating_add(self.kernel_slack());
        // Where the PERIOD stopped the event: [read, read + slack]. But a
        // sample since the last reset with a count within the slack was
        // taken after this RESET (RESET zeroes the count and leaves the
        // counter running; no due point is that low, the first is a period
        // past a restart), before the PERIOD: the judge re-anchored on its
        // count, which is from the reset, and so is the PERIOD's, at most
        // the slack. Judged at the read, the PERIOD found the re-anchored
        // due point long passed and claimed it lost.
        let (lo, hi) = match (at_stop, last_sample) {
            (Some(c), _) => (c, c),
            (None, Some(c)) if c <= slack && c < read => (c, slack),
            (None, _) => (read, read.saturating_add(slack)),
        };
        if let Some(c) = at_stop {
            // Every switch since the last sample stopped at or below it.
            self.count_read(c);
        }
        if let Some(stops) = self.wrap_stops.take() {
            // PERIOD sets period_left to 0: the wrap's damage ends here. The
            // stops since it, and the PERIOD's own, may each have lost an
            // overflow on the grid nobody knows.
            self.wrap_unknown_losses(time_ns, stops + 1, last_sample, hi);
        }
        if self.ring_gap {
            // A LOST record since the last sample: the overflows due by the
            // PERIOD may have had their samples in the gap (the PERIOD
            // re-arms after them anyway). The gap may also be after this
            // reset (the LOST comes at the next sample): it stays open.
            self.ring_gap_up_to(time_ns, hi, at_stop.unwrap_or(read));
        }
        // Stops the witness missed since the last sample come before the
        // PERIOD's: as at a sample (they were never considered without one).
        self.unwitnessed_stops(time_ns, u32::MAX, None);
        let stop = Stop {
            lo,
            hi,
            kind: StopKind::Period,
        };
        self.stop_at(time_ns, u32::MAX, stop);
        let p = self.cfg.period;
        let restart_slack = if self.cfg.restart_at_reset { 0 } else { slack };
        for h in &mut self.hyps {
            h.due = restart_after_period(p, restart_slack);
        }
        self.commit_agreed();
    }
}
