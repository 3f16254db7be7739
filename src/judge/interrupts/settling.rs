/*!
How the judge settles the explanations it follows: those in the same state
merged (what they all claim kept, the rest ambiguous), a pending stop
resolved by the sample after it, and the stock driver's rules taken where
nothing refutes them.
*/

use super::InterruptJudge;
use super::drivers::{Drivers, Stop, StopKind};
use super::due::Due;
use super::hypotheses::{
    Hypothesis, MAX_HYPOTHESES, MAX_UNSETTLED_SAMPLES, Tally, combine, lose_at_stop, widest,
};
use super::totals::{InterruptEvent, InterruptEventKind};
use crate::domain::DriverRules;

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
                if h.due.lo > hi.min(seen) {
                    // The stop came before its due point: nothing was
                    // pending there.
                    out.push(h);
                    continue;
                }
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

impl InterruptJudge {
    /// Keeping only `hyps` would leave none of the stock driver's
    /// explanations where the stream still had some: a refutation of its
    /// rules (which only an exact sample may make).
    pub(super) fn refutes_stock(&self, hyps: &[Hypothesis]) -> bool {
        self.drivers.has(Drivers::STOCK) && !hyps.iter().any(|h| h.drivers.has(Drivers::STOCK))
    }
}
