/*!
`pmustress compare A B`: two groups of runs summed, their dropped rates with
exact intervals, and whether they differ (an exact test).
*/

use std::fmt::Write as _;

use anyhow::{Context, Result};

use crate::evidence::loaded_run::LoadedRun;
use crate::evidence::report::{rate_cells, wrap_into};

pub use crate::judge::stats::rates_differ_p;

/// A group of runs summed: overflows and drops add.
pub struct Group {
    pub label: String,
    pub runs: usize,
    pub overflows: u64,
    pub dropped: u64,
    /// Witnessed stops, where every run counted them.
    pub stops: Option<u64>,
    pub injected: bool,
}

impl Group {
    /// Sums the runs; counts that add up past 2^64 are an error, never a
    /// wrapped number.
    pub fn of(label: String, runs: &[LoadedRun]) -> Result<Group> {
        let sum = |what: &str, count: fn(&LoadedRun) -> u64| {
            runs.iter()
                .try_fold(0u64, |sum, r| sum.checked_add(count(r)))
                .with_context(|| format!("{label}: the runs' {what} add up to more than 2^64 - 1"))
        };
        Ok(Group {
            runs: runs.len(),
            overflows: sum("overflows", LoadedRun::overflows)?,
            dropped: sum("dropped interrupts", LoadedRun::dropped)?,
            stops: runs
                .iter()
                .map(LoadedRun::stops)
                .try_fold(0u64, |sum, s| sum.checked_add(s?)),
            injected: runs.iter().any(|r| r.run.is_self_test()),
            label,
        })
    }
}

pub fn compare(a: &Group, b: &Group) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<10} {:>5} {:>12} {:>8} {:>11} {:>20}",
        "", "runs", "overflows", "dropped", "per million", "95% CI"
    );
    for (name, g) in [("A", a), ("B", b)] {
        let (pm, ci) = rate_cells(g.overflows, g.dropped);
        let _ = writeln!(
            s,
            "{name:<10} {:>5} {:>12} {:>8} {pm:>11} {ci:>20}",
            g.runs, g.overflows, g.dropped
        );
    }
    wrap_into(&mut s, &format!("A: {}", a.label), "");
    wrap_into(&mut s, &format!("B: {}", b.label), "");
    let ra = a.dropped as f64 / a.overflows.max(1) as f64;
    let rb = b.dropped as f64 / b.overflows.max(1) as f64;
    let ratio = if rb > 0.0 {
        format!("{:.3}", ra / rb)
    } else if ra > 0.0 {
        "infinite (B has no drops)".to_string()
    } else {
        "undefined (no drops in either)".to_string()
    };
    let _ = writeln!(s, "rate ratio A/B: {ratio}");
    match rates_differ_p(a.dropped, a.overflows, b.dropped, b.overflows) {
        Some(p) => {
            let verdict = if p < 0.05 {
                "the rates differ (p < 0.05)"
            } else {
                "no significant difference at p < 0.05"
            };
            wrap_into(
                &mut s,
                &format!("exact conditional binomial test, two-sided: p = {p:.3e}: {verdict}"),
                "",
            );
        }
        None => {
            let _ = writeln!(s, "no test: a side has no overflows");
        }
    }
    // The loss happens at stops: the same comparison per stop, where both
    // sides counted them (a side that stopped its threads more often
    // would lose more per overflow on the same kernel).
    if let (Some(sa), Some(sb)) = (a.stops, b.stops) {
        let _ = writeln!(
            s,
            "{:<10} {:>12} {:>8} {:>11} {:>20}",
            "per stop", "stops", "dropped", "per million", "95% CI"
        );
        for (name, g, stops) in [("A", a, sa), ("B", b, sb)] {
            let (pm, ci) = rate_cells(stops, g.dropped);
            let _ = writeln!(
                s,
                "{name:<10} {stops:>12} {:>8} {pm:>11} {ci:>20}",
                g.dropped
            );
        }
        if let Some(p) = rates_differ_p(a.dropped, sa, b.dropped, sb) {
            wrap_into(
                &mut s,
                &format!("per stop, exact conditional binomial test, two-sided: p = {p:.3e}"),
                "",
            );
        }
    }
    if a.injected || b.injected {
        wrap_into(&mut s, "note: a side contains injected self-test runs", "");
    }
    s
}
