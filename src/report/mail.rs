/*!
`pmustress compare --mail A B`: the whole body of a report to a mailing
list for an A/B (a kernel and a candidate fix, pseudo-NMI off and on): the
comparison, then each side's machines, kernels, pseudo-NMI verdicts, the
driver its records showed, its runs' verdicts and the commands that
reproduce them. Plain text of at most 72 columns, as `report` writes.
*/

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::domain::DriverRules;
use crate::report::compare::{Comparison, Group};
use crate::report::format::markup::{Markup, Report};
use crate::report::runs::{kernel_line, machine_line};
use crate::results::loaded::LoadedRun;

/// At most this many commands to reproduce per side; the rest are counted.
const MAX_COMMANDS: usize = 6;

/// The mail for an A/B: the comparison, then each side's runs.
pub struct Mail<'a> {
    pub a: &'a Group,
    pub b: &'a Group,
    pub runs_a: &'a [LoadedRun],
    pub runs_b: &'a [LoadedRun],
}

impl Report for Mail<'_> {
    fn write(&self, m: &mut dyn Markup) {
        Comparison {
            a: self.a,
            b: self.b,
        }
        .write(m);
        for (name, g, runs) in [("A", self.a, self.runs_a), ("B", self.b, self.runs_b)] {
            m.blank();
            m.fact(&format!("{name}: {}", g.label));
            side(m, runs);
        }
    }
}

/// Each distinct value of `f` over the runs, in first-seen order, with how
/// many runs had it.
fn distinct(runs: &[LoadedRun], f: impl Fn(&LoadedRun) -> String) -> Vec<(String, usize)> {
    let mut seen: Vec<(String, usize)> = Vec::new();
    for r in runs {
        let v = f(r);
        match seen.iter_mut().find(|(x, _)| *x == v) {
            Some((_, n)) => *n += 1,
            None => seen.push((v, 1)),
        }
    }
    seen
}

fn side(m: &mut dyn Markup, runs: &[LoadedRun]) {
    let many = |n: usize| {
        if runs.len() > 1 {
            format!(" ({n} of {} runs)", runs.len())
        } else {
            String::new()
        }
    };
    for (label, f) in [
        ("machine", machine_line as fn(&LoadedRun) -> String),
        ("kernel", kernel_line),
        ("pseudo-NMI", |r: &LoadedRun| {
            r.run
                .pseudo_nmi()
                .map_or("unknown".to_string(), |p| p.verdict.as_str().to_string())
        }),
    ] {
        for (v, n) in distinct(runs, f) {
            m.item(&format!("{label}: {v}{}", many(n)));
        }
    }
    m.item(&driver_line(runs));
    let mut verdicts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in runs {
        *verdicts.entry(r.verdict()).or_default() += 1;
    }
    let verdicts: Vec<String> = verdicts.iter().map(|(v, n)| format!("{n} {v}")).collect();
    m.item(&format!("verdicts: {}", verdicts.join(", ")));
    let commands = distinct(runs, LoadedRun::command);
    for r in commands
        .iter()
        .take(MAX_COMMANDS)
        .filter_map(|(c, _)| runs.iter().find(|r| r.command() == *c))
    {
        m.command(&r.command_words(), &r.command());
    }
    if commands.len() > MAX_COMMANDS {
        m.item(&format!(
            "and {} more commands (run.json)",
            commands.len() - MAX_COMMANDS
        ));
    }
}

/// Which driver behaviour at a stop the runs' records showed. The loss
/// at a context switch is the arm64 driver's without pseudo-NMI: a side
/// on a software event tested no driver, and one on another architecture
/// is told what its records ruled out, not the arm64 driver's story.
fn driver_line(runs: &[LoadedRun]) -> String {
    if runs.iter().all(|r| r.run.config().event.software) {
        return "driver: none tested (a software event, which does not test the PMU)".to_string();
    }
    let arm64 = runs.iter().any(|r| {
        r.fingerprint_str("/kernel/arch/value")
            .is_none_or(|a| a == "aarch64")
    });
    let (mut streams, mut stock, mut delivering, mut assumed) = (0u64, 0u64, 0u64, 0u64);
    let mut pinned = Vec::new();
    for r in runs {
        streams += r.run.config().workers as u64;
        if let Some(t) = r.run.totals() {
            stock += t.interrupts.stock_rules_refuted;
            delivering += t.interrupts.delivering_rules_refuted;
            assumed += t.interrupts.dropped_assuming_stock;
        }
        // Runs recorded before the judge knew another driver read as stock.
        let rules = r.run.judge().map_or(DriverRules::Stock, |j| j.driver_rules);
        if matches!(rules, DriverRules::Stock | DriverRules::Delivering) && !pinned.contains(&rules)
        {
            pinned.push(rules);
        }
    }
    let lost = "the stock driver loses an overflow pending at a context switch";
    let mut line = match (stock, delivering) {
        (0, 0) if !arm64 => "driver: no record refuted either the stock or a delivering driver's rules (the loss at a context switch they differ on is the arm64 driver's)".to_string(),
        (0, 0) if !pinned.is_empty() => format!(
            "driver: judged by the {} rules as given (--driver-rules, or recorded before pmustress knew both)",
            pinned
                .iter()
                .map(|r| match r {
                    DriverRules::Delivering => "delivering driver's",
                    _ => "stock driver's",
                })
                .collect::<Vec<_>>()
                .join(" and the ")
        ),
        (0, 0) => format!(
            "driver: no record refuted either ({lost}, a delivering one takes it late after the restart)"
        ),
        (0, d) => format!(
            "driver: stock ({lost}): a delivering driver's rules were refuted in {d} of {streams} streams"
        ),
        (s, 0) => format!(
            "driver: delivers an overflow overdue at a context switch late, after the restart: the stock driver's rules were refuted in {s} of {streams} streams"
        ),
        (s, d) => format!(
            "driver: the streams disagree: the stock driver's rules refuted in {s}, a delivering driver's in {d}, of {streams} streams"
        ),
    };
    if assumed > 0 {
        let _ = write!(
            line,
            "; {assumed} of the dropped rest on the stock driver's rules alone (a delivering driver would have taken them a period or more late)"
        );
    }
    line
}
