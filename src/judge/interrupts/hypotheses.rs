/*!
The explanations of the stream followed at once: what each has claimed,
how those in the same state merge, and what several of them claim
together (the certain part counted, the rest ambiguous).
*/

use super::InterruptJudge;
use super::drivers::{Drivers, Stop, StopKind};
use super::due::Due;
use super::rules::{Class, restart_after_loss};
use super::totals::{InterruptEvent, InterruptEventKind};
use crate::domain::DriverRules;

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
const MAX_HYPOTHESES: usize = 16;

/// Samples the explanations of two drivers may disagree on before those in
/// the same state are merged as ambiguous: what they claimed is held until
/// then (a refutation comes within a few samples of a stop that found an
/// overflow pending; a stream where none does keeps the memory flat).
const MAX_UNSETTLED_SAMPLES: u64 = 4_096;

impl Tally {
    /// The same drops claimed, certain and ambiguous: merging loses
    /// nothing a refutation could have settled.
    fn claims_the_drops_of(&self, o: &Tally) -> bool {
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

impl InterruptJudge {
    pub(super) fn merge(&mut self) {
        if self.hyps.len() <= 1 {
            return;
        }
        if self.unsettled_samples > MAX_UNSETTLED_SAMPLES {
            self.assume_stock_if_auto();
        }
        // (due, pending stop, drivers) -> the tallies of the hypotheses in
        // that state: the records to come cannot tell them apart.
        type Group = (Due, Option<(u64, u64)>, Drivers, Vec<Tally>);
        let mut groups: Vec<Group> = Vec::new();
        for h in std::mem::take(&mut self.hyps) {
            match groups
                .iter_mut()
                .find(|g| g.0 == h.due && g.1 == h.pending_stop && g.2 == h.drivers)
            {
                Some(g) => g.3.push(h.tally),
                None => groups.push((h.due, h.pending_stop, h.drivers, vec![h.tally])),
            }
        }
        let mut merged: Vec<Hypothesis> = groups
            .into_iter()
            .map(|(due, pending_stop, drivers, tallies)| Hypothesis {
                due,
                pending_stop,
                drivers,
                tally: combine(tallies),
            })
            .collect();
        // The same state under different drivers' rules: one explanation
        // where they claim the same drops. Where they do not, both are kept
        // (each driver's explanations apart) until a sample refutes one
        // driver, which settles the drops of the other: merged at once,
        // the losses of a stock kernel before its first refutation of the
        // delivering driver stayed ambiguous. Unless they have disagreed
        // too long to keep (`MAX_UNSETTLED_SAMPLES`).
        let force = self.unsettled_samples > MAX_UNSETTLED_SAMPLES;
        let mut i = 0;
        while i < merged.len() {
            let same = (i + 1..merged.len()).find(|&k| {
                let (a, b) = (&merged[i], &merged[k]);
                a.due == b.due
                    && a.pending_stop == b.pending_stop
                    && (force || a.tally.claims_the_drops_of(&b.tally))
            });
            match same {
                Some(k) => {
                    let b = merged.swap_remove(k);
                    let a = &mut merged[i];
                    a.drivers = a.drivers.union(b.drivers);
                    a.tally = combine(vec![std::mem::take(&mut a.tally), b.tally]);
                }
                None => i += 1,
            }
        }
        if merged.len() > MAX_HYPOTHESES {
            // Too many explanations to follow: settle them as ambiguous and
            // follow the widest grid from here: one for the explanations
            // with an overflow pending at a stop (over the widest stop
            // range), one for the rest. Resolving the pending ones first
            // (lost there, or taken) needed the stop's upper end, which
            // counting kernel mode is known only at the next count read: the
            // grid after the loss became unknown, and a sample a period late
            // under it counted as neither a re-base nor a maybe. A
            // delivering driver's own explanations stay apart from the
            // stock driver's, so that a refutation of either still settles
            // the drops of the other.
            let (pending, settled): (Vec<Hypothesis>, Vec<Hypothesis>) =
                merged.into_iter().partition(|h| h.pending_stop.is_some());
            let (stock, delivering): (Vec<Hypothesis>, Vec<Hypothesis>) = settled
                .into_iter()
                .partition(|h| h.drivers.has(Drivers::STOCK));
            merged = [pending, stock, delivering]
                .into_iter()
                .filter(|group| !group.is_empty())
                .map(widest)
                .collect();
        }
        self.hyps = merged;
    }

    /// `--driver-rules auto`, where the records have not refuted either
    /// driver by the end or in `MAX_UNSETTLED_SAMPLES`: the stock driver's
    /// explanations are taken, and the drops they claim beyond what a
    /// delivering driver's would are counted apart.
    pub(super) fn assume_stock_if_auto(&mut self) {
        if self.cfg.driver_rules != DriverRules::Auto
            || !self.hyps.iter().any(|h| h.drivers.has(Drivers::STOCK))
            || self.hyps.iter().all(|h| h.drivers.has(Drivers::STOCK))
        {
            return;
        }
        let fewest = |hyps: &[Hypothesis]| hyps.iter().map(|h| h.tally.dropped).min().unwrap_or(0);
        let either = fewest(&self.hyps);
        self.hyps.retain(|h| h.drivers.has(Drivers::STOCK));
        // Set aside, not refuted.
        self.drivers = Drivers::of(self.hyps.iter().map(|h| h.drivers));
        if self.drivers.has(Drivers::DELIVERING) {
            // Still followed where it agrees with the stock driver's rules.
            self.totals.dropped_assuming_stock += fewest(&self.hyps) - either;
        } else {
            // From here every loss at a context switch committed rests on
            // the stock driver's rules alone (`commit`), those held since
            // the drivers last agreed included.
            self.stock_assumed = true;
        }
    }

    /// Each hypothesis with an overflow pending at a stop, followed both
    /// ways: lost there (the restart re-arms by rule 1 or 2), and taken
    /// before the stop finished (kept as it is, the pending state dropped),
    /// which only an NMI can be (not where the PMU interrupt is an ordinary
    /// IRQ, `irq_masked_at_stops`). `seen`: a count read after the stop
    /// (`u64::MAX`: none). `time_ns` dates the drop of the lost branch.
    pub(super) fn resolve_pending_stops(
        &self,
        hyps: Vec<Hypothesis>,
        seen: u64,
        time_ns: impl Fn(&Hypothesis) -> u64,
    ) -> Vec<Hypothesis> {
        let p = self.cfg.period;
        let mut out = Vec::with_capacity(hyps.len() * 2);
        for mut h in hyps {
            if let Some((lo, hi)) = h.pending_stop.take() {
                let mut lost = h.clone();
                let stop = Stop {
                    lo,
                    hi: hi.min(seen).max(lo),
                    kind: StopKind::Switch,
                };
                let event = InterruptEvent {
                    kind: InterruptEventKind::Dropped,
                    time_ns: time_ns(&lost),
                    cpu: u32::MAX,
                    count: lo,
                    prev_count: self.prev_count,
                    overflows: 1,
                    stop_count: Some(lo),
                    lateness: None,
                    injected: false,
                };
                lose_at_stop(&mut lost, p, stop, event);
                out.push(lost);
                if self.cfg.irq_masked_at_stops {
                    continue;
                }
            }
            out.push(h);
        }
        out
    }
}

/// One hypothesis for a group: the widest grid (and stop range, if pending)
/// of them, with what they all claim.
fn widest(group: Vec<Hypothesis>) -> Hypothesis {
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

impl InterruptJudge {
    /// Keeping only `hyps` would leave none of the stock driver's
    /// explanations where the stream still had some: a refutation of its
    /// rules (which only an exact sample may make).
    pub(super) fn refutes_stock(&self, hyps: &[Hypothesis]) -> bool {
        self.drivers.has(Drivers::STOCK) && !hyps.iter().any(|h| h.drivers.has(Drivers::STOCK))
    }
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
