/*!
The explanations of the stream followed at once: what each has claimed,
how those in the same state merge, and what several of them claim
together (the certain part counted, the rest ambiguous).
*/

use super::InterruptJudge;
use super::due::Due;
use super::rules::Class;
use super::stops::{Stop, StopKind, lose_at_stop};
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
    pub(super) tally: Tally,
}

/// At most this many hypotheses are followed; more are merged as ambiguous.
const MAX_HYPOTHESES: usize = 16;

impl Tally {
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
        // (due, pending stop) -> the tallies of the hypotheses in that state.
        type Group = (Due, Option<(u64, u64)>, Vec<Tally>);
        let mut groups: Vec<Group> = Vec::new();
        for h in std::mem::take(&mut self.hyps) {
            match groups
                .iter_mut()
                .find(|g| g.0 == h.due && g.1 == h.pending_stop)
            {
                Some(g) => g.2.push(h.tally),
                None => groups.push((h.due, h.pending_stop, vec![h.tally])),
            }
        }
        let mut merged: Vec<Hypothesis> = groups
            .into_iter()
            .map(|(due, pending_stop, tallies)| Hypothesis {
                due,
                pending_stop,
                tally: combine(tallies),
            })
            .collect();
        if merged.len() > MAX_HYPOTHESES {
            // Too many explanations to follow: settle them as ambiguous and
            // follow the widest grid from here: one for the explanations
            // with an overflow pending at a stop (over the widest stop
            // range), one for the rest. Resolving the pending ones first
            // (lost there, or taken) needed the stop's upper end, which
            // counting kernel mode is known only at the next count read: the
            // grid after the loss became unknown, and a sample a period late
            // under it counted as neither a re-base nor a maybe.
            let (pending, settled): (Vec<Hypothesis>, Vec<Hypothesis>) =
                merged.into_iter().partition(|h| h.pending_stop.is_some());
            merged = [pending, settled]
                .into_iter()
                .filter(|group| !group.is_empty())
                .map(widest)
                .collect();
        }
        self.hyps = merged;
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
