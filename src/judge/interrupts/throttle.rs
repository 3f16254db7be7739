/*!
THROTTLE and UNTHROTTLE records, of the overflow event (an interrupt
not handled) and of the switch witness (stops not recorded).
*/

use super::InterruptJudge;
use super::totals::InterruptEventKind;

impl InterruptJudge {
    pub fn throttle(&mut self, time_ns: u64, witness: bool) {
        if witness {
            self.totals.witness_throttled += 1;
            self.witness_throttled = true;
            return;
        }
        self.totals.throttled += 1;
        self.note_at_last_sample(InterruptEventKind::Throttled, time_ns, u32::MAX, 0);
    }

    pub fn unthrottle(&mut self, witness: bool) {
        if witness {
            // Stops while it was throttled are unknown up to the next sample.
            self.witness_throttled = false;
            self.stops_unwitnessed = true;
        } else {
            self.totals.unthrottled += 1;
            // Newer kernels (seen on 6.18) handle the first overflow after
            // an unthrottle without writing its sample: a gap follows.
            self.ring_gap = true;
        }
    }
}
