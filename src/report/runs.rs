/*!
`pmustress report`: one or more runs (`LoadedRun`) as text, markdown or
JSON. The text form fits a mailing list: at most 72 columns, no colour, the
command to reproduce, the machine, the pseudo-NMI verdict with its evidence,
rates with exact confidence intervals, a histogram of delta/period and the
first anomalies.
*/

use hdrhistogram::Histogram;
use serde::Serialize;
use serde_json::Value;

use crate::report::answers::answers;
use crate::report::format::markup::{Markup, Report};
use crate::results::loaded::LoadedRun;
use crate::stats::Rate;

pub(crate) fn machine_line(r: &LoadedRun) -> String {
    let fp = |p: &str| r.fingerprint_str(p);
    let mut parts = Vec::new();
    if let Some(v) = fp("/machine/dmi/sys_vendor/value") {
        parts.push(v.to_string());
    }
    if let Some(v) = fp("/machine/dmi/product_name/value") {
        parts.push(v.to_string());
    }
    if let Some(v) = fp("/machine/virtualization/platform") {
        parts.push(v.to_string());
    }
    let clusters = r
        .run
        .fingerprint()
        .pointer("/cpus/clusters")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for c in clusters {
        let name = c
            .pointer("/model/name")
            .and_then(Value::as_str)
            .unwrap_or("?");
        let cpus = c.pointer("/cpus").and_then(Value::as_str).unwrap_or("?");
        let midr = c
            .pointer("/id/midr")
            .and_then(Value::as_u64)
            .map(|m| format!(" MIDR {m:#010x}"))
            .unwrap_or_default();
        // x86 names only the vendor's line ("AMD EPYC"): family and
        // model say which generation, as /proc/cpuinfo numbers them.
        let family_model = match (
            c.pointer("/id/family").and_then(Value::as_u64),
            c.pointer("/id/model").and_then(Value::as_u64),
        ) {
            (Some(f), Some(m)) => format!(" family {f} model {m}"),
            _ => String::new(),
        };
        parts.push(format!("CPUs {cpus}: {name}{family_model}{midr}"));
    }
    parts.join(", ")
}

pub(crate) fn kernel_line(r: &LoadedRun) -> String {
    let fp = |p: &str| {
        r.fingerprint_str(&format!("/kernel{p}/value"))
            .unwrap_or("?")
    };
    format!(
        "Linux {} {} ({})",
        fp("/release"),
        fp("/arch"),
        fp("/version")
    )
}

/// Counts of delta/period in bins of 1/`per_period` of a period: bin `i`
/// holds the deltas that round to `i / per_period` periods, so each multiple
/// of the period is the centre of a bin. The last bin, at `max_multiple`,
/// also holds everything above. Empty when `period` is 0.
pub fn delta_period_bins(
    h: &Histogram<u64>,
    period: u64,
    per_period: usize,
    max_multiple: usize,
) -> Vec<u64> {
    if period == 0 {
        return Vec::new();
    }
    let last = per_period * max_multiple;
    let mut bins = vec![0u64; last + 1];
    for v in h.iter_recorded() {
        let q = (v.value_iterated_to() as f64 / period as f64 * per_period as f64).round();
        bins[(q as usize).min(last)] += v.count_at_value();
    }
    bins
}

/// delta/period in quarter-period buckets up to 4x, then everything above.
pub fn delta_period_buckets(h: &Histogram<u64>, period: u64) -> Vec<(String, u64)> {
    delta_period_bins(h, period, 4, 4)
        .into_iter()
        .enumerate()
        .filter(|(_, n)| *n > 0)
        .map(|(i, n)| {
            let label = if i == 16 {
                ">=4.00".to_string()
            } else {
                format!("{:.2}", i as f64 / 4.0)
            };
            (label, n)
        })
        .collect()
}

/// The histogram of delta/period, bars on a log scale.
fn histogram_block(m: &mut dyn Markup, r: &LoadedRun) {
    let buckets = delta_period_buckets(&r.deltas, r.period());
    if buckets.is_empty() {
        return;
    }
    let caption = format!(
        "delta/period, {} deltas (bars on a log scale):",
        r.deltas.len()
    );
    let max = buckets.iter().map(|(_, n)| *n).max().unwrap_or(1) as f64;
    let bar_width = 40.0;
    let lines: Vec<String> = buckets
        .into_iter()
        .map(|(label, n)| {
            let len = ((n as f64 + 1.0).ln() / (max + 1.0).ln() * bar_width).ceil() as usize;
            format!("  {label:>6} |{:<40} {n}", "#".repeat(len.max(1)))
        })
        .collect();
    m.chart(&caption, &lines);
}

/// "2026-12-02T14:58:01Z, 2.2 s, pmustress 0.1.0 (commit 9f32e73c2213)":
/// when, how long, and which pmustress, as far as run.json says.
fn provenance_line(r: &LoadedRun) -> String {
    let when = r.run.started_unix_s().map_or_else(
        || "date not recorded".to_string(),
        crate::results::schema::utc_text,
    );
    let secs = r
        .run
        .elapsed_ns()
        .map(|ns| format!(", {:.1} s", ns as f64 / 1e9))
        .unwrap_or_default();
    let tool = match r.run.tool() {
        Some(t) if t.commit.is_some() => t.describe(),
        Some(t) => format!("{} (commit not recorded)", t.describe()),
        None => "pmustress (version not recorded)".to_string(),
    };
    format!("run: {when}{secs}, {tool}")
}

/// `pmustress report`: one section per run (its heading and answers,
/// what was run and how it went, the histogram and the first anomalies);
/// in JSON, each run's summary.
pub struct RunsReport<'a> {
    pub runs: &'a [LoadedRun],
    /// How many anomalies to list per run.
    pub first_anomalies: usize,
}

impl Serialize for RunsReport<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.runs.iter().map(summary))
    }
}

impl Report for RunsReport<'_> {
    fn write(&self, m: &mut dyn Markup) {
        for r in self.runs {
            title_block(m, r);
            run_facts(m, r);
            outcome_facts(m, r);
            m.paragraph_end();
            histogram_block(m, r);
            anomalies_block(m, r, self.first_anomalies);
            m.blank();
        }
    }
}

/// The run's heading (where, verdict, exit status) and its answers.
fn title_block(m: &mut dyn Markup, r: &LoadedRun) {
    m.heading(&format!(
        "{} (verdict: {}, {})",
        r.dir.display(),
        r.verdict(),
        r.exit_text()
    ));
    // What the thread asked first: how often overflows are lost, and
    // whether any interrupt came that should not have.
    if let Some(t) = r.run.totals() {
        m.answers(&answers(t));
    }
}

/// What was run, where and how: what kind of run, when and with which
/// pmustress, the machine, the kernel, pseudo-NMI, the event, and the
/// command that reproduces it.
fn run_facts(m: &mut dyn Markup, r: &LoadedRun) {
    if r.run.is_self_test() {
        m.fact(
            "SELF-TEST: drops were injected on purpose (--inject-drop-every); this run proves the detector, not the machine.",
        );
    }
    if r.run.config().event.software {
        m.fact("software event: does not test the PMU.");
    }
    m.fact(&provenance_line(r));
    m.fact(&format!("machine: {}", machine_line(r)));
    m.fact(&format!("kernel: {}", kernel_line(r)));
    let pnmi = r.run.pseudo_nmi();
    let verdict = pnmi.map_or("unknown", |p| p.verdict.as_str());
    m.fact(&format!("pseudo-NMI: {verdict}"));
    for e in pnmi.iter().flat_map(|p| &p.evidence).take(2) {
        m.detail(&format!("evidence: {e}"));
    }
    let event = &r.run.config().event.description;
    let skid = r.run.config().skid;
    let interrupt_skid = r.run.config().interrupt_skid_words();
    m.fact(&format!(
        "event: {event}; period {}, skid {skid}{interrupt_skid}",
        r.period(),
    ));
    m.command(&r.command_words(), &r.command());
}

/// How the run went: whether it started and finished, the stress it
/// applied, its anomaly windows, and every warning and reason it is
/// inconclusive.
fn outcome_facts(m: &mut dyn Markup, r: &LoadedRun) {
    if let Some(cause) = &r.run.setup_failure() {
        m.fact(&format!("the run could not start: {cause}"));
    } else if !r.run.finished() {
        m.fact(
            "the run did not finish (killed, or still running): no totals and no verdict; anomalies.csv and the histogram logs hold what it saw",
        );
    }
    if let Some(x) = r.run.results().and_then(|x| x.stress.as_ref())
        && let Some(t) = r.run.totals().and_then(|t| t.stress.as_ref())
    {
        m.fact(&format!("stress: {}", x.describe(t)));
        if r.dropped() == 0 {
            m.fact(&format!(
                "sensitivity: no drop in {}",
                x.sensitivity_words()
            ));
        }
    }
    if let Some(t) = r.run.totals().as_ref().filter(|t| !t.anomalies.is_empty()) {
        let list: Vec<String> = t
            .anomalies
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        m.fact(&format!("anomaly windows: {}", list.join(", ")));
    }
    let warnings = r.run.warnings().iter().map(ToString::to_string);
    let reasons = r.run.inconclusive_because().iter().map(ToString::to_string);
    for w in warnings
        .chain(reasons)
        .chain(r.anomalies_note.iter().cloned())
    {
        m.fact(&format!("note: {w}"));
    }
}

/// The first `first_anomalies` anomalies, one line each.
fn anomalies_block(m: &mut dyn Markup, r: &LoadedRun, first_anomalies: usize) {
    if r.anomalies.is_empty() || first_anomalies == 0 {
        return;
    }
    m.line(&format!(
        "first {} of {} anomalies:",
        first_anomalies.min(r.anomalies.len()),
        r.anomaly_count
    ));
    m.paragraph_end();
    for a in r.anomalies.iter().take(first_anomalies) {
        let since = a
            .ns_since_migration
            .map(|ns| format!(", {} us after migration", ns / 1000))
            .unwrap_or_default();
        let gap = a
            .interrupt_gap
            .map(|g| format!(", {}", a.gap_text(g)))
            .unwrap_or_default();
        let cpus = a.cpus();
        let cpus = if cpus.is_empty() {
            cpus
        } else {
            format!(", {cpus}")
        };
        m.item(&format!(
            "worker {} #{}: delta {} {} ({} missed){cpus}{since}{gap}",
            a.worker, a.signal_seq, a.delta, a.kind, a.overflows_missed,
        ));
    }
}

/// The JSON form of a report: one object per run, its summary and, under
/// `run`, the whole run.json as read and checked (what scripts read instead
/// of parsing run.json themselves).
#[derive(Serialize)]
pub struct RunSummary<'a> {
    pub dir: String,
    pub verdict: String,
    /// None for a run that did not finish.
    pub exit_status: Option<i32>,
    pub injected: bool,
    pub pseudo_nmi: Option<crate::fingerprint::PseudoNmi>,
    pub command: String,
    /// None (with the rate) for a run that did not finish.
    pub overflows: Option<u64>,
    pub dropped: Option<u64>,
    pub rate: Option<Rate>,
    pub setup_failure: Option<String>,
    pub run: &'a crate::results::reader::RunDocument,
}

pub fn summary(r: &LoadedRun) -> RunSummary<'_> {
    RunSummary {
        dir: r.dir.display().to_string(),
        verdict: r.verdict().to_string(),
        exit_status: r.run.exit_status(),
        injected: r.run.is_self_test(),
        pseudo_nmi: r.run.pseudo_nmi().cloned(),
        command: r.command(),
        overflows: r.run.totals().as_ref().map(|t| t.accounted_overflows),
        dropped: r.run.totals().as_ref().map(|t| t.dropped_interrupts),
        rate: r.run.totals().as_ref().map(|t| {
            Rate::new(
                t.dropped_interrupts,
                t.accounted_overflows,
                crate::domain::CONFIDENCE,
            )
        }),
        setup_failure: r.run.setup_failure().map(str::to_string),
        run: &r.run,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_put_missed_overflows_at_multiples() {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for _ in 0..1000 {
            h.record(100_000).unwrap();
        }
        for _ in 0..7 {
            h.record(200_000).unwrap();
        }
        h.record(3_000_000).unwrap();
        let b = delta_period_buckets(&h, 100_000);
        assert_eq!(
            b,
            vec![
                ("1.00".to_string(), 1000),
                ("2.00".to_string(), 7),
                (">=4.00".to_string(), 1)
            ]
        );
    }
}
