/*!
`pmustress report`: one or more runs (`LoadedRun`) as text, markdown or
JSON. The text form fits a mailing list: at most 72 columns, no colour, the
command to reproduce, the machine, the pseudo-NMI verdict with its evidence,
rates with exact confidence intervals, a histogram of delta/period and the
first anomalies.
*/

use std::fmt::Write as _;

use hdrhistogram::Histogram;
use serde::Serialize;
use serde_json::Value;

use crate::domain::OutputFormat;
use crate::results::loaded::LoadedRun;
use crate::stats::Rate;

pub const WIDTH: usize = 72;

/// `text` with every control character but newline and tab written as
/// \u00XX, so nothing read from a run.json, anomalies.csv or a --root
/// tree can move the cursor, retitle the terminal or overwrite a line
/// (a carriage return) where it is printed. JSON stays valid: serde_json
/// escapes the ones below 0x20 itself, and \u007f is a JSON escape.
pub fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.contains(bad) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if bad(c) {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// "reproduce: <command>", wrapped only between arguments, each line but
/// the last ending in " \\": copied as it is, it is the command.
pub(crate) fn reproduce_lines(out: &mut String, argv: &[String]) {
    let mut line = String::from("reproduce:");
    for word in argv {
        if line.len() + 1 + word.len() + 2 > WIDTH && line.contains(' ') {
            let _ = writeln!(out, "{line} \\");
            line = String::from("   ");
        }
        line.push(' ');
        line.push_str(word);
    }
    let _ = writeln!(out, "{line}");
}

/// `text` on one line: a newline in it (in a directory's name or a
/// recorded hostname) written as `\n`. A raw one started a line of its
/// own that read as another row, or another run. The other control
/// characters are `escape_controls`'s, on the whole output.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains('\n') {
        text.replace('\n', "\\n").into()
    } else {
        text.into()
    }
}

pub fn wrap_into(out: &mut String, text: &str, indent: &str) {
    // Never at a hyphen: "--inject-drop-every" and "late-signal" are
    // names; only a word longer than the line is broken.
    let opts = textwrap::Options::new(WIDTH)
        .initial_indent(indent)
        .subsequent_indent("    ")
        .break_words(true)
        .word_splitter(textwrap::WordSplitter::NoHyphenation);
    for line in textwrap::wrap(&printable(text), opts) {
        let _ = writeln!(out, "{line}");
    }
}

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

fn histogram_block(out: &mut String, r: &LoadedRun, fence: bool) {
    let buckets = delta_period_buckets(&r.deltas, r.period());
    if buckets.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "delta/period, {} deltas (bars on a log scale):",
        r.deltas.len()
    );
    if fence {
        let _ = writeln!(out, "```");
    }
    let max = buckets.iter().map(|(_, n)| *n).max().unwrap_or(1) as f64;
    let bar_width = 40.0;
    for (label, n) in buckets {
        let len = ((n as f64 + 1.0).ln() / (max + 1.0).ln() * bar_width).ceil() as usize;
        let _ = writeln!(out, "  {label:>6} |{:<40} {n}", "#".repeat(len.max(1)));
    }
    if fence {
        let _ = writeln!(out, "```");
    }
}

pub(super) fn rate_cells(overflows: u64, dropped: u64) -> (String, String) {
    let rate = Rate::new(dropped, overflows, crate::domain::CONFIDENCE);
    match (
        rate.per_million,
        rate.ci_low_per_million,
        rate.ci_high_per_million,
    ) {
        (Some(pm), Some(lo), Some(hi)) => (format!("{pm:.3}"), format!("{lo:.3}..{hi:.3}")),
        _ => ("-".into(), "-".into()),
    }
}

/// One answer to the questions a report is read for: how many of what,
/// out of how many, as a rate with its exact interval.
pub struct Answer {
    pub label: &'static str,
    pub events: u64,
    pub trials: u64,
    /// What `trials` counts ("overflows", "stops", ...).
    pub of: &'static str,
}

/// The two questions maintainers ask of a lost-interrupt report, from a
/// run's totals: how often overflows are lost (per overflow, and per stop,
/// where the loss happens), and whether anything looks like a spurious or
/// duplicate overflow interrupt (sample records that fit no driver
/// behaviour; signals with no interrupt of their own). Rates come with
/// exact (Clopper-Pearson) intervals, the drops' and the spurious ones'
/// alike.
pub fn answers(t: &crate::results::schema::Counts) -> Vec<Answer> {
    let mut rows = vec![Answer {
        label: "dropped per overflow",
        events: t.dropped_interrupts,
        trials: t.accounted_overflows,
        of: "overflows",
    }];
    if let Some(x) = &t.stress {
        rows.push(Answer {
            label: "dropped per stop",
            events: t.dropped_interrupts,
            trials: x.stops,
            of: "stops",
        });
    }
    // Schema 1 judged no interrupts or deliveries (they read as zero):
    // rows of nothing are left out, not shown as "0 of 0".
    rows.extend(
        [
            Answer {
                label: "spurious interrupts",
                events: t.interrupts.unexplained,
                trials: t.interrupts.samples,
                of: "interrupts",
            },
            Answer {
                label: "unmatched signals",
                events: t.deliveries.unmatched,
                trials: t.deliveries.signals,
                of: "signals",
            },
        ]
        .into_iter()
        .filter(|a| a.trials > 0),
    );
    rows
}

/// A rate per million in as many digits as it needs: 38781, 5.23, 0.042.
fn per_million_short(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 1.0 || x == 0.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// "0.00 (0.00..1724)", or "-" without trials.
fn answer_rate(a: &Answer) -> String {
    rate_short(a.trials, a.events)
}

/// `events` per million `trials` with its exact 95% interval, in as many
/// digits as each needs: "0.00 (0.00..1724)"; "-" without trials.
pub(super) fn rate_short(trials: u64, events: u64) -> String {
    let rate = Rate::new(events, trials, crate::domain::CONFIDENCE);
    match (
        rate.per_million,
        rate.ci_low_per_million,
        rate.ci_high_per_million,
    ) {
        (Some(pm), Some(lo), Some(hi)) => format!(
            "{} ({}..{})",
            per_million_short(pm),
            per_million_short(lo),
            per_million_short(hi)
        ),
        _ => "-".to_string(),
    }
}

/// The answers as text lines of at most `WIDTH` columns: a heading, one
/// aligned row each, and what "spurious" and "unmatched" mean.
pub fn answers_text(out: &mut String, t: &crate::results::schema::Counts) {
    let _ = writeln!(
        out,
        "lost and spurious interrupts, per million (exact 95% interval):"
    );
    let rows = answers(t);
    let counts: Vec<String> = rows
        .iter()
        .map(|a| format!("{} of {} {}", a.events, a.trials, a.of))
        .collect();
    let count_width = counts.iter().map(String::len).max().unwrap_or(0);
    for (a, count) in rows.iter().zip(&counts) {
        let line = format!("{:<21} {count:<count_width$}  {}", a.label, answer_rate(a));
        wrap_into(out, &line, "  ");
    }
    wrap_into(
        out,
        "(spurious: sample records no driver behaviour explains, e.g. a second interrupt for one overflow)",
        "  ",
    );
}

/// The answers as a markdown table.
fn answers_markdown(out: &mut String, t: &crate::results::schema::Counts) {
    let _ = writeln!(out, "| | count | of | per million | exact 95% CI |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|");
    for a in answers(t) {
        let (pm, ci) = rate_cells(a.trials, a.events);
        let _ = writeln!(
            out,
            "| {} | {} | {} {} | {pm} | {ci} |",
            a.label, a.events, a.trials, a.of
        );
    }
    let _ = writeln!(
        out,
        "\nSpurious: sample records no driver behaviour explains (such as a second interrupt for one overflow); unmatched: signals with no interrupt of their own.\n"
    );
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

/// The `pmustress report` text or markdown.
pub fn report(runs: &[LoadedRun], format: OutputFormat, first_anomalies: usize) -> String {
    let md = format == OutputFormat::Markdown;
    let mut s = String::new();
    for r in runs {
        title_block(&mut s, r, md);
        run_facts(&mut s, r, md);
        outcome_facts(&mut s, r, md);
        if md {
            let _ = writeln!(s);
        }
        histogram_block(&mut s, r, md);
        anomalies_block(&mut s, r, md, first_anomalies);
        let _ = writeln!(s);
    }
    s
}

/// One fact a line: a list item in markdown, where lines of one
/// paragraph would run together when rendered.
fn fact(s: &mut String, md: bool, text: &str) {
    if md {
        wrap_into(s, text, "- ");
    } else {
        wrap_into(s, text, "");
    }
}

/// The run's heading (where, verdict, exit status) and its answers.
fn title_block(s: &mut String, r: &LoadedRun, md: bool) {
    let title = format!(
        "{} (verdict: {}, {})",
        r.dir.display(),
        r.verdict(),
        r.exit_text()
    );
    if md {
        let _ = writeln!(s, "### {}\n", printable(&title));
    } else {
        wrap_into(s, &format!("== {title}"), "");
    }
    // What the thread asked first: how often overflows are lost, and
    // whether any interrupt came that should not have.
    if let Some(t) = r.run.totals() {
        if md {
            answers_markdown(s, t);
        } else {
            answers_text(s, t);
        }
    }
}

/// What was run, where and how: what kind of run, when and with which
/// pmustress, the machine, the kernel, pseudo-NMI, the event, and the
/// command that reproduces it.
fn run_facts(s: &mut String, r: &LoadedRun, md: bool) {
    if r.run.is_self_test() {
        fact(
            s,
            md,
            "SELF-TEST: drops were injected on purpose (--inject-drop-every); this run proves the detector, not the machine.",
        );
    }
    if r.run.config().event.software {
        fact(s, md, "software event: does not test the PMU.");
    }
    fact(s, md, &provenance_line(r));
    fact(s, md, &format!("machine: {}", machine_line(r)));
    fact(s, md, &format!("kernel: {}", kernel_line(r)));
    let pnmi = r.run.pseudo_nmi();
    let verdict = pnmi.map_or("unknown", |p| p.verdict.as_str());
    fact(s, md, &format!("pseudo-NMI: {verdict}"));
    for e in pnmi.iter().flat_map(|p| &p.evidence).take(2) {
        wrap_into(s, &format!("evidence: {e}"), if md { "  - " } else { "  " });
    }
    let event = &r.run.config().event.description;
    let skid = r.run.config().skid;
    // Shown only where it differs (schema 1 had one skid for both).
    let interrupt_skid = r.run.config().interrupt_skid;
    let interrupt_skid = if interrupt_skid != skid {
        format!(", interrupt skid {interrupt_skid}")
    } else {
        String::new()
    };
    fact(
        s,
        md,
        &format!(
            "event: {event}; period {}, skid {skid}{interrupt_skid}",
            r.period(),
        ),
    );
    if md {
        let _ = writeln!(s, "\nreproduce:\n\n```\n{}\n```\n", r.command());
    } else {
        reproduce_lines(s, &r.command_words());
    }
}

/// How the run went: whether it started and finished, the stress it
/// applied, its anomaly windows, and every warning and reason it is
/// inconclusive.
fn outcome_facts(s: &mut String, r: &LoadedRun, md: bool) {
    if let Some(cause) = &r.run.setup_failure() {
        fact(s, md, &format!("the run could not start: {cause}"));
    } else if !r.run.finished() {
        fact(
            s,
            md,
            "the run did not finish (killed, or still running): no totals and no verdict; anomalies.csv and the histogram logs hold what it saw",
        );
    }
    if let Some(x) = r.run.results().and_then(|x| x.stress.as_ref())
        && let Some(t) = r.run.totals().and_then(|t| t.stress.as_ref())
    {
        fact(s, md, &format!("stress: {}", x.describe(t)));
        if r.dropped() == 0 {
            fact(
                s,
                md,
                &format!("sensitivity: no drop in {}", x.sensitivity_words()),
            );
        }
    }
    if let Some(t) = r.run.totals().as_ref().filter(|t| !t.anomalies.is_empty()) {
        let list: Vec<String> = t
            .anomalies
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        fact(s, md, &format!("anomaly windows: {}", list.join(", ")));
    }
    let warnings = r.run.warnings().iter().map(ToString::to_string);
    let reasons = r.run.inconclusive_because().iter().map(ToString::to_string);
    for w in warnings
        .chain(reasons)
        .chain(r.anomalies_note.iter().cloned())
    {
        fact(s, md, &format!("note: {w}"));
    }
}

/// The first `first_anomalies` anomalies, one line each.
fn anomalies_block(s: &mut String, r: &LoadedRun, md: bool, first_anomalies: usize) {
    if r.anomalies.is_empty() || first_anomalies == 0 {
        return;
    }
    let _ = writeln!(
        s,
        "first {} of {} anomalies:",
        first_anomalies.min(r.anomalies.len()),
        r.anomaly_count
    );
    if md {
        let _ = writeln!(s);
    }
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
        let line = format!(
            "worker {} #{}: delta {} {} ({} missed){cpus}{since}{gap}",
            a.worker, a.signal_seq, a.delta, a.kind, a.overflows_missed,
        );
        wrap_into(s, &line, if md { "- " } else { "  " });
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

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(escape_controls("a\tb\nc"), "a\tb\nc");
        assert_eq!(
            escape_controls("\u{1b}]0;x\u{7}\r\u{7f}\u{9b}"),
            "\\u001b]0;x\\u0007\\u000d\\u007f\\u009b"
        );
    }

    #[test]
    fn reproduce_wraps_between_words_only() {
        let long = format!("results/{}", "x".repeat(80));
        let argv: Vec<String> = [
            "pmustress",
            "run",
            "--event",
            "task-clock",
            "--duration",
            "10s",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([String::from("--out"), long.clone(), String::from("--raw")])
        .collect();
        let mut text = String::new();
        reproduce_lines(&mut text, &argv);
        assert_eq!(
            text,
            format!(
                "reproduce: pmustress run --event task-clock --duration 10s --out \\\n    {long} \\\n    --raw\n"
            )
        );
    }
}
