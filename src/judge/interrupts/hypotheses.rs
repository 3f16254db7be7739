/*!
The explanations of the stream followed at once: what each has claimed,
how those in the same state merge, and what several of them claim
together (the certain part counted, the rest ambiguous).
*/

use super::drivers::{Drivers, Stop, StopKind};
use super::due::Due;
use super::rules::{Class, restart_after_loss};
use super::totals::{InterruptEvent, InterruptEventKind};

/// What one hypothesis has claimed since the hypotheses last agreed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Tally {
    pub(super) on_time: u64,
    pub(super) late: u64,
    pub(super) rebased_in_handler: u64,
    pub(super) late_maybe_rebased: u64,
    pub(super) dropped: u64,
    pub(super) rebased_at_restart: u64,
    pub(super) dropped_at_final_stop: u64,
    /// Of the dropped, those at a context switch (recorded or not): the
    /// ones a delivering driver would have taken late.
    pub(super) dropped_at_switch: u64,
    pub(super) ambiguous: u64,
    pub(super) injected: u64,
    pub(super) latencies: Vec<u64>,
    pub(super) events: Vec<InterruptEvent>,
}

/// One explanation of the stream so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Hypothesis {
    pub(super) due: Due,
    /// A stop found the overflow pending: lost, unless the next sample is
    /// its interrupt taken before the stop finished. (lo, hi) of the
    /// stop's count.
    pub(super) pending_stop: Option<(u64, u64)>,
    /// The drivers whose rules it follows (a pending stop: the stock
    /// driver's only).
    pub(super) drivers: Drivers,
    pub(super) tally: Tally,
}

/// At most this many hypotheses are followed; more are merged as ambiguous.
pub(super) const MAX_HYPOTHESES: usize = 16;

/// Samples the explanations of two drivers may disagree on before those in
/// the same state are merged as ambiguous: what they claimed is held until
/// then (a refutation comes within a few samples of a stop that found an
/// overflow pending; a stream where none does keeps the memory flat).
pub(super) const MAX_UNSETTLED_SAMPLES: u64 = 4_096;

impl Tally {
    /// The same drops claimed, certain and ambiguous: merging loses
    /// nothing a refutation could have settled.
    pub(super) fn claims_the_drops_of(&self, o: &Tally) -> bool {
        (self.dropped, self.ambiguous) == (o.dropped, o.ambiguous)
    }

    /// Books one sample; an injected one is a drop by our hand instead.
    pub(super) fn claim(
        &mut self,
        class: Class,
        injected: bool,
        event: impl Fn(InterruptEventKind, Option<u64>) -> InterruptEvent,
    ) {
        if injected {
            self.dropped += 1;
            self.injected += 1;
            self.events.push(event(InterruptEventKind::Dropped, None));
            return;
        }
        match class {
            Class::OnTime => self.on_time += 1,
            Class::Late => self.late += 1,
            Class::Rebased(lateness) => {
                self.rebased_in_handler += 1;
                self.latencies.push(lateness);
                self.events
                    .push(event(InterruptEventKind::RebasedInHandler, Some(lateness)));
            }
        }
    }
}

/// One hypothesis for a group: the widest grid (and stop range, if pending)
/// of them, with what they all claim.
pub(super) fn widest(group: Vec<Hypothesis>) -> Hypothesis {
    let lo = group.iter().map(|h| h.due.lo).min().unwrap_or(0);
    let hi = group.iter().map(|h| h.due.hi).max().unwrap_or(u64::MAX);
    let stops = group.iter().filter_map(|h| h.pending_stop);
    let pending_stop = stops.reduce(|(alo, ahi), (blo, bhi)| (alo.min(blo), ahi.max(bhi)));
    Hypothesis {
        due: Due { lo, hi },
        pending_stop,
        drivers: Drivers::of(group.iter().map(|h| h.drivers)),
        tally: combine(group.into_iter().map(|h| h.tally).collect()),
    }
}

/// The tallies of hypotheses that reached the same state: what they all
/// claim is kept, the drops some claim and others do not are ambiguous.
/// Every hypothesis books each sample as one interrupt, so they differ only
/// in drops and in which interrupts were a period late.
pub(super) fn combine(mut tallies: Vec<Tally>) -> Tally {
    if tallies.len() == 1 {
        return tallies.pop().expect("one tally");
    }
    let min = |f: fn(&Tally) -> u64| tallies.iter().map(f).min().unwrap_or(0);
    let max = |f: fn(&Tally) -> u64| tallies.iter().map(f).max().unwrap_or(0);
    let dropped = min(|t| t.dropped);
    let ambiguous = max(|t| t.dropped + t.ambiguous) - dropped;
    let rebased_in_handler = min(|t| t.rebased_in_handler);
    let late_maybe_rebased =
        max(|t| t.rebased_in_handler + t.late_maybe_rebased) - rebased_in_handler;
    let rebased_at_restart = min(|t| t.rebased_at_restart);
    let dropped_at_final_stop = min(|t| t.dropped_at_final_stop);
    let dropped_at_switch = min(|t| t.dropped_at_switch);
    let injected = min(|t| t.injected);
    // Keep the explanation with the fewest drops: its drops are certain in
    // number, and its interrupts are the samples.
    let best = tallies
        .iter()
        .position(|t| t.dropped == dropped)
        .unwrap_or(0);
    let mut t = tallies.swap_remove(best);
    // Interrupts a period late under it but not under every explanation
    // were late at least.
    let mut unsure_rebases = t.rebased_in_handler - rebased_in_handler;
    t.late += unsure_rebases;
    t.rebased_in_handler = rebased_in_handler;
    t.late_maybe_rebased = late_maybe_rebased;
    while unsure_rebases > 0 {
        match t
            .events
            .iter()
            .rposition(|e| e.kind == InterruptEventKind::RebasedInHandler)
        {
            Some(i) => {
                t.events.remove(i);
                unsure_rebases -= 1;
            }
            None => break,
        }
    }
    t.ambiguous = ambiguous;
    t.rebased_at_restart = rebased_at_restart;
    t.dropped_at_final_stop = dropped_at_final_stop;
    t.dropped_at_switch = dropped_at_switch;
    t.injected = injected;
    if ambiguous > 0 {
        let at = t.events.last().copied().or_else(|| {
            tallies
                .iter()
                .filter_map(|o| o.events.last().copied())
                .next()
        });
        if let Some(e) = at {
            t.events.push(InterruptEvent {
                kind: InterruptEventKind::Ambiguous,
                overflows: ambiguous,
                lateness: None,
                injected: false,
                ..e
            });
        }
    }
    t
}

/// The pending overflow of `stop` was lost: the restart re-arms by the
/// driver's rules from the stop's count.
pub(super) fn lose_at_stop(h: &mut Hypothesis, p: u64, stop: Stop, event: InterruptEvent) {
    h.tally.dropped += 1;
    h.tally.dropped_at_final_stop += u64::from(stop.kind == StopKind::Final);
    h.tally.dropped_at_switch += u64::from(stop.kind == StopKind::Switch);
    h.tally.events.push(event);
    if stop.kind != StopKind::Switch {
        // No re-arm rule runs on a lost overflow's behalf here, so no
        // re-base to count: the final DISABLE never restarts the event, and
        // PERIOD sets period_left to 0 before its restart (rule 2 from the
        // restart; `reset` sets the grid from there).
        h.due = h.due.plus(p);
        return;
    }
    let restart = restart_after_loss(h.due, stop.lo, stop.hi, p);
    h.tally.rebased_at_restart += u64::from(restart.rebased);
    h.due = restart.due;
}

/// `h` at a stop in [`lo`, `hi`] that its due point may have reached (at
/// or below `hi`): the explanation where the due point lay past the stop's
/// count goes to `out`, where there is one, and `h` keeps the due points
/// the stop reached. Returns the lowest count at which it was pending.
pub(super) fn split_at_stop(
    h: &mut Hypothesis,
    lo: u64,
    hi: u64,
    out: &mut Vec<Hypothesis>,
) -> u64 {
    if h.due.hi > lo {
        // Pending only if the due point was below the stop's count.
        let mut not_pending = h.clone();
        not_pending.due.lo = not_pending.due.lo.max(lo + 1);
        out.push(not_pending);
        h.due.hi = h.due.hi.min(hi);
    }
    lo.max(h.due.lo)
}
