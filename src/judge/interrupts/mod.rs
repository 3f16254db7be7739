/*!
Judging interrupts from the kernel's own records alone.

The driver arms each overflow on a grid: the next one is due a period after
the previous due point (`armpmu_event_set_period` / `x86_perf_event_set_period`,
rule 2), except when it finds the counter a whole period or more past the due
point, where it re-bases: the next is due a period after *now* (rule 1). An
overflow's interrupt writes one sample record whose count is where the
interrupt was taken, so a sample's lateness is its count minus its due point.
An overflow is lost only where the event is stopped while it is pending (the
stop clears the overflow flag): at a context switch, which the switch witness
records with the event's count, or at the final DISABLE, whose count we read.
The restart then applies the same two rules and ignores "overflowed", so the
lost overflow's period is consumed silently (`armpmu_start` in Linux's
drivers/perf/arm_pmu.c).

With the count at every stop (the context-switch witness, user-mode counting)
the replay of those rules is exact: one explanation of the stream. Where a
stop's count is only a lower bound (kernel mode is counted too, so the count
moves between the witness and the stop) or unknown (a time-only switch
record, a throttled witness), both "pending at the stop" and "not pending" are
followed as hypotheses. A sample refutes the hypotheses under which its count
is impossible, and hypotheses that reach the same state are merged: when they
disagree on what happened, the difference is counted `ambiguous`, never
guessed. A stream that no hypothesis explains is counted `unexplained` and the
grid is re-anchored: the run is then inconclusive, never silently judged.

Software clocks have no such grid (an hrtimer re-arms on time, and skips
periods when it fires late); their gaps are timer skips, never drops.

One file per concept: `rules` holds the driver's rules above as pure
functions on due ranges, and the others add to `InterruptJudge` what
their records need: `totals` (what the judgement counts and reports),
`due` (where the next overflow is due), `hypotheses` (the explanations
followed and what they claim), `settling` (merging them, resolving a
pending stop, taking the stock rules where nothing refutes them), `sample` (an interrupt's record), `stops`
(a context switch, our own reads, the final DISABLE), `unwitnessed`
(stops no record shows), `count_rate` (a time-only stop's count
bounded by the event's count rate, on the `clock` the records give), `reset` (reset mode's PERIOD), `throttle`,
`ring_gap` (LOST records) and `count_wrap` (the kernel's 2^32 count
jumps).
*/

mod clock;
mod count_rate;
mod count_wrap;
mod drivers;
mod due;
mod hypotheses;
mod reset;
mod ring_gap;
mod rules;
mod sample;
mod settling;
mod stops;
#[cfg(test)]
mod tests;
mod throttle;
mod totals;
mod unwitnessed;

use hdrhistogram::Histogram;

use self::drivers::Drivers;
use self::due::Due;
use self::hypotheses::{Hypothesis, Tally, combine};
use super::config::JudgeConfig;
use crate::domain::DriverRules;

pub use self::totals::{InterruptEvent, InterruptEventKind, InterruptTotals};

/// One event's interrupt judgement.
pub struct InterruptJudge {
    cfg: JudgeConfig,
    hyps: Vec<Hypothesis>,
    totals: InterruptTotals,
    /// Lateness of interrupts (events past the due point) where the due
    /// point is exact.
    latency: Histogram<u64>,
    prev_count: Option<u64>,
    /// Stops may have gone unrecorded since the last sample.
    stops_unwitnessed: bool,
    /// The switch witness is throttled: stops go unrecorded.
    witness_throttled: bool,
    /// A LOST record since the last sample.
    ring_gap: bool,
    /// After a count wrap, until the next sample anchors the grid again:
    /// the stops since that may have found an overflow pending (the driver
    /// re-based at one of its re-arms there, so no due point is known).
    wrap_stops: Option<u64>,
    /// The highest count a task-context read gave since the last sample
    /// (a stop's or a resume's witness, our own read).
    read_since_sample: Option<u64>,
    /// The last sample's count, when its interrupt may have raced a read
    /// of the count (`nmi_may_have_raced_a_read`).
    raced_sample: Option<u64>,
    /// Settled events not yet taken by the caller.
    events: Vec<InterruptEvent>,
    /// The records' times, for bounding time-only stops (`count_rate`).
    clock: clock::Clock,
    /// The drivers whose rules still explain the stream (`drivers`).
    drivers: Drivers,
    /// Samples since the explanations last agreed.
    unsettled_samples: u64,
    /// A ring gap or a count wrap was in the stream: the stock driver's
    /// rules may then leave a sample unexplained (a re-base in the gap, a
    /// grid the wrap erased), so no sample refutes them any more.
    grid_uncertain: bool,
    /// `--driver-rules auto` set the delivering driver aside (`assume_stock_if_auto`).
    stock_assumed: bool,
}

impl InterruptJudge {
    pub fn new(cfg: JudgeConfig) -> InterruptJudge {
        let drivers = match cfg.driver_rules {
            DriverRules::Stock => Drivers::STOCK,
            DriverRules::Delivering => Drivers::DELIVERING,
            DriverRules::Auto | DriverRules::Either => Drivers::BOTH,
        };
        InterruptJudge {
            cfg,
            hyps: vec![Hypothesis {
                // RESET then ENABLE: the first overflow is a period in.
                due: Due::exact(cfg.period),
                pending_stop: None,
                drivers,
                tally: Tally::default(),
            }],
            totals: InterruptTotals::default(),
            latency: crate::domain::histogram(),
            prev_count: None,
            stops_unwitnessed: false,
            witness_throttled: false,
            read_since_sample: None,
            raced_sample: None,
            ring_gap: false,
            wrap_stops: None,
            events: Vec::new(),
            clock: clock::Clock::default(),
            drivers,
            unsettled_samples: 0,
            grid_uncertain: false,
            stock_assumed: false,
        }
    }

    pub fn totals(&self) -> &InterruptTotals {
        &self.totals
    }

    pub fn latency(&self) -> &Histogram<u64> {
        &self.latency
    }

    /// Events settled since the last call, in order.
    pub fn take_events(&mut self, out: &mut Vec<InterruptEvent>) {
        out.append(&mut self.events);
    }

    /// Where the next overflow is due, when every explanation of the
    /// records so far puts it at one count (a software clock has no grid:
    /// a period past its last sample). Only for measuring where stops fall
    /// (`stress`), never for a verdict.
    pub fn due_point(&self) -> Option<u64> {
        if self.cfg.software {
            return self.prev_count.map(|c| c.saturating_add(self.cfg.period));
        }
        let first = self.hyps.first()?.due;
        (first.lo == first.hi && self.hyps.iter().all(|h| h.due == first)).then_some(first.lo)
    }

    /// Overflows accounted for so far (settled ones only).
    pub fn overflows(&self) -> u64 {
        self.totals.overflows
    }

    /// An event of no sample of its own (a throttle, a ring gap, a count
    /// wrap), placed at the last sample's count.
    fn note_at_last_sample(
        &mut self,
        kind: InterruptEventKind,
        time_ns: u64,
        cpu: u32,
        overflows: u64,
    ) {
        self.events.push(InterruptEvent {
            kind,
            time_ns,
            cpu,
            count: self.prev_count.unwrap_or(0),
            prev_count: self.prev_count,
            overflows,
            stop_count: None,
            lateness: None,
            injected: false,
        });
    }

    /// Merges hypotheses in the same state and commits what they all claim.
    fn commit_agreed(&mut self) {
        self.merge();
        self.note_refuted_drivers();
        if self.hyps.len() == 1 {
            let t = std::mem::take(&mut self.hyps[0].tally);
            self.commit(t);
        }
    }

    /// At the end: what the remaining hypotheses disagree on is ambiguous.
    fn commit_at_end(&mut self) {
        self.assume_stock_if_auto();
        let hyps = std::mem::take(&mut self.hyps);
        if !hyps.is_empty() {
            let t = combine(hyps.into_iter().map(|h| h.tally).collect());
            self.commit(t);
        }
        self.hyps = vec![Hypothesis {
            due: Due::exact(u64::MAX),
            pending_stop: None,
            drivers: self.drivers,
            tally: Tally::default(),
        }];
    }

    /// A driver none of whose explanations is left is refuted for the rest
    /// of the stream. (A sample no explanation fits refutes neither: the
    /// judge re-anchors with the drivers it had.)
    fn note_refuted_drivers(&mut self) {
        let alive = Drivers::of(self.hyps.iter().map(|h| h.drivers));
        if alive.is_empty() {
            return;
        }
        for (d, refuted) in [
            (Drivers::STOCK, &mut self.totals.stock_rules_refuted),
            (
                Drivers::DELIVERING,
                &mut self.totals.delivering_rules_refuted,
            ),
        ] {
            if self.drivers.has(d) && !alive.has(d) {
                *refuted += 1;
            }
        }
        self.drivers = alive;
    }

    fn commit(&mut self, t: Tally) {
        let tot = &mut self.totals;
        tot.on_time += t.on_time;
        tot.late += t.late;
        tot.rebased_in_handler += t.rebased_in_handler;
        tot.late_maybe_rebased += t.late_maybe_rebased;
        tot.dropped += t.dropped;
        tot.injected_found += t.injected;
        tot.rebased_at_restart += t.rebased_at_restart;
        tot.dropped_at_final_stop += t.dropped_at_final_stop;
        if self.stock_assumed {
            tot.dropped_assuming_stock += t.dropped_at_switch;
        }
        tot.ambiguous += t.ambiguous;
        tot.overflows += t.on_time + t.late + t.rebased_in_handler + t.dropped + t.ambiguous;
        for l in t.latencies {
            let _ = self.latency.record(l);
        }
        self.events.extend(t.events);
    }
}
