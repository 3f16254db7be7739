/*!
Where an overflow is lost: a stop of the event while it is pending. A
context switch (the switch witness's record, its count exact or a lower
bound), our own reads that bound the stops before them, and the final
DISABLE.
*/

use super::InterruptJudge;
use super::drivers::{Drivers, Stop, StopKind};
use super::hypotheses::{Hypothesis, lose_at_stop, split_at_stop};
use super::totals::{InterruptEvent, InterruptEventKind};

impl InterruptJudge {
    /// The event was stopped (a context switch). `count`: its count there,
    /// when the witness could read it.
    pub fn stop(&mut self, time_ns: u64, cpu: u32, count: Option<u64>) {
        self.totals.stops += 1;
        if self.cfg.software {
            return;
        }
        self.note_time(time_ns);
        self.switched_out(time_ns);
        if self.ring_gap {
            // After a LOST record and before the next sample, an overflow
            // due by this stop may have had its sample in the gap: not a
            // drop to claim here. The next sample re-anchors past it (the
            // due points before it are record_lost, stops unknown).
            // Judging it as any stop claimed drops of overflows whose
            // samples the ring lost.
            if count.is_none() {
                self.totals.stops_without_count += 1;
            }
            return;
        }
        if let Some(stops) = &mut self.wrap_stops {
            // No due point is known after a wrap: judged at the next sample.
            // The restart that re-based was at or after the last sample, so
            // nothing was due before a period past it.
            let floor = self.prev_count.unwrap_or(0).saturating_add(self.cfg.period);
            if count.is_none_or(|c| c >= floor) {
                *stops += 1;
            }
            if count.is_none() {
                self.totals.stops_without_count += 1;
            }
            return;
        }
        // Stops the witness missed (it was throttled and is no more) came
        // before this one: judging them only at the next sample put them
        // after it, which cannot explain a loss between them.
        self.unwitnessed_stops(time_ns, cpu, count);
        let Some(count) = count else {
            self.totals.stops_without_count += 1;
            // Its time bounds its count where the count rate is bounded.
            let at_most = self.time_only_stop_at_most(time_ns);
            self.stop_unknown(time_ns, cpu, true, at_most);
            self.time_only_stop(time_ns);
            return;
        };
        self.note_read(count);
        // Counting kernel mode, the count moves on between the witness's
        // read and the stop itself; counting user mode only, it cannot.
        let stop = Stop {
            lo: count,
            hi: count.saturating_add(self.kernel_slack()),
            kind: StopKind::Switch,
        };
        self.stop_at(time_ns, cpu, stop);
    }

    /// How far past its witness's read a stop may be: counting kernel mode,
    /// up to the next count the records give (which then bounds it).
    pub(super) fn kernel_slack(&self) -> u64 {
        if self.cfg.include_kernel { u64::MAX } else { 0 }
    }

    fn note_read(&mut self, count: u64) {
        self.read_since_sample = Some(self.read_since_sample.map_or(count, |r| r.max(count)));
    }

    pub(super) fn stop_at(&mut self, time_ns: u64, cpu: u32, stop: Stop) {
        let p = self.cfg.period;
        let prev = self.prev_count;
        let event = |count| InterruptEvent {
            kind: InterruptEventKind::Dropped,
            time_ns,
            cpu,
            count,
            prev_count: prev,
            overflows: 1,
            stop_count: Some(stop.lo),
            lateness: None,
            injected: false,
        };
        let mut next = Vec::with_capacity(self.hyps.len() + 1);
        for mut h in std::mem::take(&mut self.hyps) {
            if let Some((lo, hi)) = h.pending_stop.take() {
                // Stopped again with no interrupt in between: the pending
                // overflow of the previous stop was lost there, at or below
                // this stop's count.
                let earlier = Stop {
                    lo,
                    hi: hi.min(stop.lo).max(lo),
                    kind: StopKind::Switch,
                };
                lose_at_stop(&mut h, p, earlier, event(lo));
            }
            if h.due.unknown() || h.due.lo > stop.hi {
                // Not due yet at the stop.
                next.push(h);
                continue;
            }
            if stop.kind == StopKind::Switch && h.drivers.has(Drivers::DELIVERING) {
                // A delivering driver keeps an overflow pending at a
                // context switch due where it was: its interrupt is the
                // first after the restart, whether it was pending or not.
                let mut kept = h.clone();
                kept.drivers = Drivers::DELIVERING;
                next.push(kept);
                if !h.drivers.has(Drivers::STOCK) {
                    continue;
                }
                h.drivers = Drivers::STOCK;
            }
            // Pending at the stop. Lost, unless its interrupt comes before
            // the stop clears it: the next sample says (a final stop has no
            // next sample, and a PERIOD's is counted from 0 again).
            let at = Stop {
                lo: split_at_stop(&mut h, stop.lo, stop.hi, &mut next),
                ..stop
            };
            if stop.kind == StopKind::Switch {
                h.pending_stop = Some((at.lo, at.hi));
            } else {
                lose_at_stop(&mut h, p, at, event(at.lo));
            }
            next.push(h);
        }
        self.hyps = next;
        self.commit_agreed();
    }

    /// Our own read of the count (a handler's read(2), the count at a reset's
    /// DISABLE): the thread ran again after any stop before it, so every
    /// such stop was at `count` or below. A hypothesis whose overflow was
    /// pending at one needs its due point at or below `count` too. (Counting
    /// kernel mode, a stop's count is otherwise bounded above only by the
    /// next count the records give: a held vCPU can run for many periods
    /// past the witness's read.)
    pub fn count_read(&mut self, count: u64) {
        if !self.cfg.software {
            self.note_read(count);
        }
        if self.cfg.software || self.hyps.iter().all(|h| h.pending_stop.is_none()) {
            return;
        }
        let before = self.hyps.len();
        let kept: Vec<Hypothesis> = self
            .hyps
            .iter()
            .filter(|h| h.pending_stop.is_none() || h.due.lo <= count)
            .cloned()
            .map(|mut h| {
                if let Some((lo, hi)) = h.pending_stop {
                    h.pending_stop = Some((lo, hi.min(count).max(lo)));
                    h.due.hi = h.due.hi.min(count);
                }
                h
            })
            .collect();
        if kept.is_empty() || self.refutes_stock(&kept) {
            // A read below every explanation's due point at a pending stop:
            // not ours to refute here; the next sample judges (and only a
            // sample refutes the stock driver).
            return;
        }
        self.hyps = kept;
        if self.hyps.len() < before {
            self.commit_agreed();
        }
    }

    /// The final DISABLE, after which the count was read: a stop whose
    /// count is exact.
    pub fn final_stop(&mut self, time_ns: u64, count: Option<u64>) {
        if !self.cfg.software
            && let Some(count) = count
        {
            if std::mem::take(&mut self.ring_gap) {
                // A LOST record since the last sample: the overflows due
                // by the end may have had their samples in the gap.
                self.ring_gap_up_to(time_ns, count, count);
            }
            if let Some(stops) = self.wrap_stops.take() {
                // The final DISABLE too may have found an overflow pending.
                self.wrap_unknown_losses(time_ns, stops + 1, self.prev_count, count);
                self.commit_at_end();
                return;
            }
            // Stops the witness missed since the last sample come first:
            // one may have lost the overflow this stop would find pending.
            self.unwitnessed_stops(time_ns, u32::MAX, Some(count));
            let stop = Stop {
                lo: count,
                hi: count,
                kind: StopKind::Final,
            };
            self.stop_at(time_ns, u32::MAX, stop);
        }
        self.commit_at_end();
    }
}
