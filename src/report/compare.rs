/*!
`pmustress compare A B`: two groups of runs summed, their dropped rates with
exact intervals, and whether they differ (an exact test), as text, markdown
or JSON. A ratio means something only between like and like: the
comparison warns when the sides ran different settings, when a side holds
an interrupted, injected or software-event run, and when A and B are the
same runs; and it puts the sides' stress (stops and moves per second)
side by side, since the stress decides what zero drops are worth.
*/

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::report::answers::rate_cells;
use crate::report::format::markup::{Column, Markup, Report, Table, Width};
use crate::results::loaded::LoadedRun;

pub use crate::stats::rates_differ_p;

/// A group of runs summed: overflows and drops add.
pub struct Group {
    pub label: String,
    pub runs: usize,
    pub overflows: u64,
    pub dropped: u64,
    /// Witnessed stops, where every run counted them.
    pub stops: Option<u64>,
    pub injected: bool,
    /// Runs on a software event: they prove the pipeline, not the PMU.
    pub software_runs: usize,
    /// How hard the runs pressed, where every run counted its stops: the
    /// stress decides what a side's zero drops are worth.
    pub stress: Option<GroupStress>,
    /// Runs stopped by a signal: counted, but cut short.
    pub interrupted: usize,
    /// Each setting that decides how hard a run presses (event, period,
    /// mode, workers, migration, witness...), and the values its runs had.
    pub settings: BTreeMap<&'static str, BTreeSet<String>>,
    /// The runs' directories, resolved (to find A and B sharing runs).
    pub dirs: Vec<PathBuf>,
}

/// A group's stress: the kernel-witnessed stops and the migrators' moves,
/// summed over its runs, per second of their run time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GroupStress {
    pub stops: u64,
    pub seconds: f64,
    pub stops_per_second: f64,
    pub moves_per_second: f64,
    /// The share of timed moves that stopped a running worker (None: no
    /// timed move).
    pub moves_that_stopped_fraction: Option<f64>,
}

impl GroupStress {
    fn of(runs: &[LoadedRun]) -> Option<GroupStress> {
        let mut total = crate::judge::stress::StressTotals::default();
        let mut ns = 0u64;
        for r in runs {
            total.add(r.run.totals()?.stress.as_ref()?);
            ns = ns.saturating_add(r.run.elapsed_ns()?);
        }
        let seconds = ns as f64 / 1e9;
        let per_second = |n: u64| n as f64 / seconds.max(1e-9);
        let timed = total.moves - total.moves_untimed;
        Some(GroupStress {
            stops: total.stops,
            seconds,
            stops_per_second: per_second(total.stops),
            moves_per_second: per_second(total.moves),
            moves_that_stopped_fraction: (timed > 0)
                .then(|| total.moves_that_stopped as f64 / timed as f64),
        })
    }
}

/// A setting's value as run.json spells it ("ping-pong", "free").
fn spelled<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "?".to_string(),
    }
}

/// The settings of one run that a comparison must hold equal.
pub(crate) fn settings_of(r: &LoadedRun) -> Vec<(&'static str, String)> {
    let c = r.run.config();
    vec![
        ("event", c.event.description.clone()),
        ("period", c.period.to_string()),
        ("mode", spelled(&c.mode)),
        ("workers", c.workers.to_string()),
        ("CPUs", c.cpus.len().to_string()),
        ("migrate", spelled(&c.migrate)),
        (
            "migrate interval",
            format!("{} us", c.migrate_interval_ns / 1000),
        ),
        ("migrators", c.migrators.to_string()),
        ("switch witness", spelled(&c.switch_witness)),
        ("include kernel", c.include_kernel.to_string()),
    ]
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
            software_runs: runs
                .iter()
                .filter(|r| r.run.config().event.software)
                .count(),
            stress: GroupStress::of(runs),
            interrupted: runs
                .iter()
                .filter(|r| r.run.verdict() == crate::results::schema::Verdict::Interrupted)
                .count(),
            settings: {
                let mut m: BTreeMap<&'static str, BTreeSet<String>> = BTreeMap::new();
                for r in runs {
                    for (k, v) in settings_of(r) {
                        m.entry(k).or_default().insert(v);
                    }
                }
                m
            },
            dirs: runs
                .iter()
                .map(|r| std::fs::canonicalize(&r.dir).unwrap_or_else(|_| r.dir.clone()))
                .collect(),
            label,
        })
    }
}

/// What a reader of the ratio must know: settings that differ between the
/// sides, runs cut short or injected, runs on both sides.
pub fn warnings(a: &Group, b: &Group) -> Vec<String> {
    let mut w = Vec::new();
    let shared = a.dirs.iter().filter(|d| b.dirs.contains(d)).count();
    if shared > 0 {
        w.push(if shared == a.dirs.len() && shared == b.dirs.len() {
            "A and B are the same runs: the comparison says nothing".to_string()
        } else {
            format!("{shared} runs are on both sides: the sides are not independent")
        });
    }
    for (key, va) in &a.settings {
        let vb = b.settings.get(key);
        if vb != Some(va) {
            let list = |v: Option<&BTreeSet<String>>| {
                v.map_or("?".to_string(), |v| {
                    v.iter().cloned().collect::<Vec<_>>().join(" and ")
                })
            };
            w.push(format!(
                "different {key}: A {}, B {}",
                list(Some(va)),
                list(vb)
            ));
        }
    }
    for (name, g) in [("A", a), ("B", b)] {
        if g.interrupted > 0 {
            w.push(format!(
                "{name} holds {} interrupted {} (stopped by a signal, cut short)",
                g.interrupted,
                if g.interrupted == 1 { "run" } else { "runs" }
            ));
        }
        if g.injected {
            w.push(format!(
                "{name} holds injected self-test runs: their drops were made on purpose"
            ));
        }
        if g.software_runs > 0 {
            w.push(format!(
                "{name} holds {} {} on a software event, which does not test the PMU",
                g.software_runs,
                if g.software_runs == 1 { "run" } else { "runs" },
            ));
        }
    }
    w
}

/// Two groups compared: `pmustress compare`'s report. Text fits 72
/// columns (a rate of a million per million and its interval fit); JSON
/// is each side's numbers, the test and the warnings.
pub struct Comparison<'a> {
    pub a: &'a Group,
    pub b: &'a Group,
}

impl Serialize for Comparison<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (a, b) = (self.a, self.b);
        let side = |g: &Group| {
            serde_json::json!({
                "label": g.label, "runs": g.runs, "overflows": g.overflows,
                "dropped": g.dropped, "injected": g.injected,
                "software_runs": g.software_runs, "stress": g.stress,
                "rate": crate::stats::Rate::new(g.dropped, g.overflows, crate::domain::CONFIDENCE),
            })
        };
        serde_json::json!({
            "a": side(a), "b": side(b),
            "p_value": rates_differ_p(a.dropped, a.overflows, b.dropped, b.overflows),
            "test": "exact conditional binomial test, two-sided",
            "warnings": warnings(a, b),
        })
        .serialize(s)
    }
}

impl Report for Comparison<'_> {
    fn write(&self, m: &mut dyn Markup) {
        let (a, b) = (self.a, self.b);
        let warned = warnings(a, b);
        for w in &warned {
            m.warning(w);
        }
        if !warned.is_empty() {
            m.paragraph_end();
        }
        let mut rates = Table::new(vec![
            Column::left("", Width::Fixed(8)),
            Column::right("runs", Width::Fixed(5)),
            Column::right("overflows", Width::Fixed(12)),
            Column::right("dropped", Width::Fixed(8)),
            Column::right("per million", Width::Fixed(11)),
            Column::right("95% CI", Width::Fixed(23)),
        ]);
        for (name, g) in [("A", a), ("B", b)] {
            let (pm, ci) = rate_cells(g.overflows, g.dropped);
            rates.row(vec![
                name.to_string(),
                g.runs.to_string(),
                g.overflows.to_string(),
                g.dropped.to_string(),
                pm,
                ci,
            ]);
        }
        m.table(&rates);
        m.paragraph_end();
        m.fact(&format!("A: {}", a.label));
        m.fact(&format!("B: {}", b.label));
        m.fact(&format!("rate ratio A/B: {}", ratio(a, b)));
        match rates_differ_p(a.dropped, a.overflows, b.dropped, b.overflows) {
            Some(p) => {
                let verdict = if p < 0.05 {
                    "the rates differ (p < 0.05)"
                } else {
                    "no significant difference at p < 0.05"
                };
                m.fact(&format!(
                    "exact conditional binomial test, two-sided: p = {p:.3e}: {verdict}"
                ));
            }
            None => m.fact("no test: a side has no overflows"),
        }
        per_stop(m, a, b);
        stress_rows(m, a, b);
    }
}

fn ratio(a: &Group, b: &Group) -> String {
    let ra = a.dropped as f64 / a.overflows.max(1) as f64;
    let rb = b.dropped as f64 / b.overflows.max(1) as f64;
    if rb > 0.0 {
        format!("{:.3}", ra / rb)
    } else if ra > 0.0 {
        "infinite (B has no drops)".to_string()
    } else {
        "undefined (no drops in either)".to_string()
    }
}

/// The loss happens at stops: the same comparison per stop, where both
/// sides counted them (a side that stopped its threads more often would
/// lose more per overflow on the same kernel).
fn per_stop(m: &mut dyn Markup, a: &Group, b: &Group) {
    let (Some(sa), Some(sb)) = (a.stops, b.stops) else {
        return;
    };
    let mut table = Table::new(vec![
        Column::left("per stop", Width::Fixed(8)),
        // Under the rates table's runs and overflows columns.
        Column::right("stops", Width::Fixed(18)),
        Column::right("dropped", Width::Fixed(8)),
        Column::right("per million", Width::Fixed(11)),
        Column::right("95% CI", Width::Fixed(23)),
    ]);
    for (name, g, stops) in [("A", a, sa), ("B", b, sb)] {
        let (pm, ci) = rate_cells(stops, g.dropped);
        table.row(vec![
            name.to_string(),
            stops.to_string(),
            g.dropped.to_string(),
            pm,
            ci,
        ]);
    }
    m.paragraph_end();
    m.table(&table);
    m.paragraph_end();
    if let Some(p) = rates_differ_p(a.dropped, sa, b.dropped, sb) {
        m.fact(&format!(
            "per stop, exact conditional binomial test, two-sided: p = {p:.3e}"
        ));
    }
}

/// The two sides' stress side by side, where both counted it: stops the
/// kernel witnessed and moves per second of run time, and the share of
/// moves that stopped a running worker.
fn stress_rows(m: &mut dyn Markup, a: &Group, b: &Group) {
    let (Some(sa), Some(sb)) = (a.stress, b.stress) else {
        return;
    };
    let mut table = Table::new(vec![
        Column::left("stress", Width::Fixed(8)),
        Column::right("seconds", Width::Fixed(9)),
        Column::right("stops/s", Width::Fixed(12)),
        Column::right("moves/s", Width::Fixed(12)),
        Column::right("moves that stopped", Width::Fixed(20)),
    ]);
    for (name, g) in [("A", sa), ("B", sb)] {
        let stopped = g
            .moves_that_stopped_fraction
            .map_or("-".to_string(), |f| format!("{:.0}%", f * 100.0));
        table.row(vec![
            name.to_string(),
            format!("{:.1}", g.seconds),
            format!("{:.0}", g.stops_per_second),
            format!("{:.0}", g.moves_per_second),
            stopped,
        ]);
    }
    m.paragraph_end();
    m.table(&table);
}
