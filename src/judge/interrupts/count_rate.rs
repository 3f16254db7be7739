/*!
A time-only stop's count, bounded by the event's count rate
(`--max-count-rate`).

`--switch-witness times` records when the event stopped, not at what count,
so "lost at the stop" and "not pending there, its interrupt came a period
late" fit the same samples wherever the stop was near the due point. The
records' times bound the stop's count once the event cannot count faster
than a known rate `r`: it counted at most `r * t` in `t` nanoseconds. So:

- counting user mode only, the stop was at most the last sample's count
  plus `r` times the time from that sample to the stop record (the stop
  record is written in the scheduler before the event stops, and neither
  moves the user-mode count): an overflow due past that was not pending
  there;
- without an NMI to take an overflow before the stop, the overflow the next
  sample answers was due past the last stop (pending there, it was lost and
  the restart re-armed past the stop; not pending, it was due past it), and
  the stop was at least the next sample's count less `r` times the time from
  the stop record to that sample: an explanation with that overflow due at
  or below that cannot be.

Where the records show the thread off its CPU (a switch-out, then its
switch-in: the same witness writes both), the event counted nothing in
between, counting user mode only: that time is not counted time. Counting
kernel mode, the event also counts between its restart and the switch-in
record and between the switch-out record and its stop, so only the whole
time bounds it.

Times are exact to the clock's tick only; the tick is taken as the greatest
common divisor of the records' time differences (16 ns under QEMU, whose
virtual timer ticks at 62.5 MHz), one tick added to every interval.

The bound is the user's claim, so it is checked between every two samples:
a count that rose faster counts `count_rate_exceeded`, as does a stop whose
bounds leave no explanation, and the verdict is then inconclusive.
*/

use super::InterruptJudge;
use super::clock::Off;
use super::drivers::Drivers;
use super::hypotheses::Hypothesis;

impl InterruptJudge {
    /// The most the event can count between two instants (each a time
    /// and the time off the CPU by then), if its rate is bounded: the time
    /// on the CPU, one tick added for each time measured.
    fn most_counted(&self, from: (u64, Off), to: (u64, Off)) -> Option<u64> {
        let rate = self.cfg.max_count_rate;
        if rate == 0 {
            return None;
        }
        let tick = u128::from(self.clock.tick_ns.max(1));
        let total = u128::from(to.0.saturating_sub(from.0));
        let span = if self.cfg.include_kernel {
            total + tick
        } else {
            let off = u128::from(to.1.ns.saturating_sub(from.1.ns));
            let measured = u128::from(to.1.intervals.saturating_sub(from.1.intervals));
            total.saturating_sub(off) + tick * (1 + measured)
        };
        let most = (u128::from(rate) * span).div_ceil(1_000_000_000);
        Some(u64::try_from(most).unwrap_or(u64::MAX))
    }

    /// The thread was switched in: the time since its switch-out was
    /// off the CPU.
    pub fn start(&mut self, time_ns: u64) {
        if self.cfg.software || self.cfg.max_count_rate == 0 {
            return;
        }
        self.note_time(time_ns);
        if let Some(out) = self.clock.switched_out_ns.take() {
            self.clock.off.ns += time_ns.saturating_sub(out);
            self.clock.off.intervals += 1;
        }
    }

    /// A record's time: the clock's tick follows every one (only needed
    /// where the rate is bounded).
    pub(super) fn note_time(&mut self, time_ns: u64) {
        if self.cfg.max_count_rate == 0 {
            return;
        }
        let c = &mut self.clock;
        match c.first_ns {
            None => c.first_ns = Some(time_ns),
            Some(first) => c.tick_ns = gcd(c.tick_ns, time_ns.abs_diff(first)),
        }
    }

    /// The highest count a time-only stop at `time_ns` can have had:
    /// counting user mode only, from the last sample.
    pub(super) fn time_only_stop_at_most(&self, time_ns: u64) -> Option<u64> {
        if self.cfg.include_kernel {
            // Kernel mode counts from the record to the stop itself.
            return None;
        }
        let (t, count, off) = self.clock.last_sample?;
        self.most_counted((t, off), (time_ns, self.clock.off))
            .map(|most| count.saturating_add(most))
    }

    /// A time-only stop at `time_ns`: the next sample bounds it from below.
    pub(super) fn time_only_stop(&mut self, time_ns: u64) {
        if self.cfg.max_count_rate > 0 && self.cfg.irq_masked_at_stops {
            self.clock.stop_since_sample = Some((time_ns, self.clock.off));
        }
    }

    /// A stop recorded at `time_ns`: off the CPU until its switch-in (a
    /// second stop before one leaves the first interval unmeasured).
    pub(super) fn switched_out(&mut self, time_ns: u64) {
        self.clock.switched_out_ns = Some(time_ns);
    }

    /// A sample at `count`, `time_ns`: checks the rate against the last
    /// sample, then refutes the explanations whose overflow was due at or
    /// below the last time-only stop's lowest count. Before the sample is
    /// judged.
    pub(super) fn sample_bounds_stops(&mut self, time_ns: u64, count: u64) {
        if self.cfg.max_count_rate == 0 {
            return;
        }
        let now = (time_ns, self.clock.off);
        if let Some((t, c, off)) = self.clock.last_sample
            && let Some(most) = self.most_counted((t, off), now)
            && count.saturating_sub(c) > most
        {
            self.totals.count_rate_exceeded += 1;
        }
        self.clock.last_sample = Some((time_ns, count, self.clock.off));
        let Some(stop) = self.clock.stop_since_sample.take() else {
            return;
        };
        let Some(most) = self.most_counted(stop, now) else {
            return;
        };
        let Some(floor) = count.checked_sub(most) else {
            return;
        };
        // Under the stock driver every explanation's next due point is past
        // the stop, so past `floor`. (A delivering driver's may still be
        // below it: an overflow pending at the stop, its interrupt this
        // sample.) A bound that would refute the stock driver's rules alone
        // is taken for a wrong bound: only a sample refutes a driver.
        let stock = |h: &Hypothesis| h.drivers.has(Drivers::STOCK);
        if self.hyps.iter().any(stock)
            && self
                .hyps
                .iter()
                .filter(|h| stock(h))
                .all(|h| h.due.hi <= floor)
        {
            self.totals.count_rate_exceeded += 1;
            return;
        }
        let mut changed = false;
        let mut next = Vec::with_capacity(self.hyps.len() + 1);
        for mut h in std::mem::take(&mut self.hyps) {
            if !stock(&h) || h.due.lo > floor {
                next.push(h);
                continue;
            }
            changed = true;
            if h.drivers.has(Drivers::DELIVERING) {
                let mut kept = h.clone();
                kept.drivers = Drivers::DELIVERING;
                next.push(kept);
            }
            if h.due.hi > floor {
                h.drivers = Drivers::STOCK;
                h.due.lo = floor + 1;
                next.push(h);
            }
        }
        self.hyps = next;
        if changed {
            self.commit_agreed();
        }
    }

    /// Reset mode: counts start again from 0.
    pub(super) fn forget_last_sample(&mut self) {
        self.clock.last_sample = None;
        self.forget_stop_since_sample();
    }

    /// The next sample may not be the first after the last time-only stop.
    pub(super) fn forget_stop_since_sample(&mut self) {
        self.clock.stop_since_sample = None;
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}
