/*!
The kernel's 2^32 count jumps (`wrap` takes them out of the counts):
the driver re-based at one of its next re-arms, so no due point is known
until a sample anchors the grid again.
*/

use super::InterruptJudge;
use super::due::Due;
use super::hypotheses::{Hypothesis, Tally, combine};
use super::totals::{InterruptEvent, InterruptEventKind};

impl InterruptJudge {
    /// The kernel's count jumped by 2^32 here (`wrap`; the counts from
    /// here are unwrapped). The driver's `period_left` dropped as far, so
    /// its next re-arm re-based: at the restart after the stop whose update
    /// wrapped, or in the next interrupt. Either way the grid is lost until
    /// the next sample anchors it; nothing is lost by the wrap itself.
    /// `count`: the record's count with the jump taken out, read after any
    /// stop before it.
    pub fn count_wrap(&mut self, time_ns: u64, cpu: u32, count: u64) {
        self.totals.count_wraps += 1;
        self.grid_uncertain = true;
        self.read_since_sample = None;
        self.raced_sample = None;
        self.note_at_last_sample(InterruptEventKind::CountWrap, time_ns, cpu, 0);
        if self.cfg.software || self.wrap_stops.is_some() {
            return;
        }
        // An overflow pending at a stop before the wrap: lost there, or
        // taken before it (what the hypotheses disagree on is ambiguous).
        let pending = std::mem::take(&mut self.hyps);
        let hyps = self.resolve_pending_stops(pending, count, |_| time_ns);
        let t = combine(hyps.into_iter().map(|h| h.tally).collect());
        self.commit(t);
        self.hyps = vec![Hypothesis {
            due: Due {
                lo: 0,
                hi: u64::MAX,
            },
            pending_stop: None,
            drivers: self.drivers,
            tally: Tally::default(),
        }];
        self.wrap_stops = Some(0);
    }

    /// The first sample after a count wrap, with `stops` recorded since: the
    /// grid is anchored on it as on an unexplained one (its due point at
    /// most a period back; or it re-based and the next is a period on).
    pub(super) fn anchor_after_wrap(
        &mut self,
        time_ns: u64,
        cpu: u32,
        count: u64,
        stops: u64,
        injected: bool,
    ) {
        let prev = self.prev_count;
        // Stops the witness missed (throttled, or in a ring gap) count too.
        let unwitnessed = std::mem::take(&mut self.stops_unwitnessed) || self.witness_throttled;
        let stops = stops + u64::from(unwitnessed);
        self.wrap_unknown_losses(time_ns, stops, prev, count.saturating_sub(1));
        if injected {
            self.totals.dropped += 1;
            self.events
                .push(InterruptEvent::of_sample(time_ns, cpu, count, prev, true)(
                    InterruptEventKind::Dropped,
                    None,
                ));
        } else {
            self.totals.after_count_wrap += 1;
        }
        self.totals.overflows += 1;
        self.anchor_on(count);
        self.prev_count = Some(count);
    }

    /// After a count wrap no due point is known: each of `stops` stops up to
    /// `until` may have lost an overflow, at most one per period counted
    /// since the last sample (the re-basing restart was after it). Counted
    /// ambiguous, never dropped.
    pub(super) fn wrap_unknown_losses(
        &mut self,
        time_ns: u64,
        stops: u64,
        since: Option<u64>,
        until: u64,
    ) {
        let p = self.cfg.period;
        let room = until.saturating_sub(since.unwrap_or(0)) / p;
        let n = stops.min(room);
        if n == 0 {
            return;
        }
        self.totals.ambiguous += n;
        self.totals.overflows += n;
        self.events.push(InterruptEvent {
            kind: InterruptEventKind::Ambiguous,
            time_ns,
            cpu: u32::MAX,
            count: until,
            prev_count: since,
            overflows: n,
            stop_count: None,
            lateness: None,
            injected: false,
        });
    }
}
