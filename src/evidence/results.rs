/*!
Results: what a run measured, summed up and judged, as one serde structure.

`RunResults::new` turns the raw `RunRecord` into per-worker and total counts
(the interrupt judgement, the delivery judgement, and the final count as an
independent check of the overflow accounting), the delta and interrupt
latency distributions, and the verdict with its exit status. It is written to
`run.json` (atomically) and rendered by `cli::console` at the end of a run
and by `report` when read back.

The verdict rule: `dropped` when the judge found an overflow whose interrupt
never happened under every explanation of the kernel's records; otherwise
`inconclusive` when anything could not be judged (ambiguous overflows, a
broken witness, our own failure); otherwise `clean`.
*/

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::config::RunConfig;
use crate::domain::{
    CONFIDENCE, EXIT_CANNOT_TEST, EXIT_CLEAN, EXIT_DROPPED, RearmMode, SCHEMA_VERSION,
    SwitchWitness,
};
use crate::engine::run::{RunRecord, StopReason, WorkerRecord};
use crate::fingerprint::{Fingerprint, PseudoNmi};
use crate::judge::stats::Rate;
use crate::judge::{Anomaly, AnomalyKind, DeliveryTotals, InterruptTotals};

/// A run that saw no dropped interrupt is only "clean" if its overflows
/// bound the dropped rate below this (one-sided, at `CONFIDENCE`): zero
/// drops in fewer than 299 overflows say nothing, and the run is 125 "not
/// enough overflows" (in every mode, and in a replay of its stream).
pub const MIN_EVIDENCE_RATE: f64 = 0.01;

/// At most this many anomalies are kept in run.json (all are counted, and
/// anomalies.csv has every one).
pub const MAX_RECORDED_ANOMALIES: usize = 1_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// No dropped interrupt, and every window could be judged.
    Clean,
    /// At least one overflow interrupt never happened.
    Dropped,
    /// We could not judge everything (our failure or a broken witness).
    Inconclusive,
    /// Stopped by a signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE): what
    /// was measured is complete but partial.
    Interrupted,
    /// No verdict: the run is still going, was killed (SIGKILL, a second
    /// Ctrl-C), or could not start (then run.json has `setup_failure`).
    Incomplete,
}

/// Delta distribution summary (events, or ns for software clocks).
#[derive(Debug, Clone, Default, Serialize)]
pub struct DeltaStats {
    pub count: u64,
    pub min: Option<u64>,
    pub p50: Option<u64>,
    pub p99: Option<u64>,
    pub p999: Option<u64>,
    pub max: Option<u64>,
}

impl DeltaStats {
    pub fn of(h: &Histogram<u64>) -> DeltaStats {
        if h.is_empty() {
            return DeltaStats::default();
        }
        DeltaStats {
            count: h.len(),
            min: Some(h.min()),
            p50: Some(h.value_at_quantile(0.5)),
            p99: Some(h.value_at_quantile(0.99)),
            p999: Some(h.value_at_quantile(0.999)),
            max: Some(h.max()),
        }
    }
}

/// Interrupt lateness: how far past its due point the interrupt was taken,
/// as a fraction of the period.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LatencyStats {
    pub count: u64,
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    pub p999: Option<f64>,
    pub max: Option<f64>,
}

impl LatencyStats {
    pub fn of(h: &Histogram<u64>, period: u64) -> LatencyStats {
        if h.is_empty() {
            return LatencyStats::default();
        }
        let f = |v: u64| Some(v as f64 / period as f64);
        LatencyStats {
            count: h.len(),
            p50: f(h.value_at_quantile(0.5)),
            p99: f(h.value_at_quantile(0.99)),
            p999: f(h.value_at_quantile(0.999)),
            max: f(h.max()),
        }
    }
}

/// Counts for one worker or for the whole run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Counts {
    /// Every overflow, judged from the kernel's records alone.
    pub interrupts: InterruptTotals,
    /// Every delivery, judged against the interrupts.
    pub deliveries: DeliveryTotals,
    /// Overflow signals received (= deliveries.signals).
    pub signals: u64,
    /// Plain-SIGIO fallbacks (= deliveries.sigio).
    pub sigio: u64,
    /// Kernel PERF_RECORD_SAMPLEs: interrupts the kernel handled
    /// (= interrupts.samples).
    pub kernel_samples: u64,
    /// Overflows accounted for (= interrupts.overflows).
    pub accounted_overflows: u64,
    /// Hardware, free mode, where the grid never moved and nothing is
    /// ambiguous: final count / period, which must equal the accounted
    /// overflows (an independent check of the judge's bookkeeping).
    pub implied_overflows: Option<u64>,
    /// Interrupts that never happened (= interrupts.dropped, injected ones
    /// included).
    pub dropped_interrupts: u64,
    pub injected: u64,
    /// Overflows dropped under one explanation and not under another.
    pub ambiguous: u64,
    /// How many interrupts a period or more late would land within the
    /// interrupt skid of a grid point by chance (re-bases x (2 x
    /// interrupt skid + 1) / period): the expected number of coincidences
    /// among the ambiguous.
    pub expected_coincidences: f64,
    /// Anomalies by kind.
    pub anomalies: BTreeMap<AnomalyKind, u64>,
    pub migrations_requested: u64,
    pub migrations_failed: u64,
    /// se.nr_migrations growth, when the kernel exposes it.
    pub migrations_kernel: Option<u64>,
    /// Consecutive signals seen on different CPUs.
    pub cpu_changes: u64,
    pub signal_ring_overflows: u64,
    pub garbled_kernel_bytes: u64,
    /// Observations that reached the judge after newer ones.
    pub reordered_observations: u64,
    pub deltas: DeltaStats,
    pub interrupt_latency: LatencyStats,
    /// Dropped interrupts per million overflows (accounted), with a 95%
    /// Clopper-Pearson interval.
    pub dropped_rate: Option<Rate>,
}

#[derive(Debug, Clone, Serialize)]
pub struct WorkerResult {
    pub worker: usize,
    pub final_count: Option<u64>,
    pub stalled: Option<String>,
    /// How this worker's event stops were witnessed.
    pub switch_witness: SwitchWitness,
    /// Bytes of its sample ring's record area.
    pub ring_bytes: usize,
    #[serde(flatten)]
    pub counts: Counts,
}

#[derive(Debug, Clone, Serialize)]
pub struct ToolInfo {
    pub name: &'static str,
    pub version: &'static str,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunResults {
    pub schema_version: u32,
    pub tool: ToolInfo,
    /// The exact command line.
    pub argv: Vec<String>,
    pub config: RunConfig,
    /// How the stream was judged: `pmustress replay` judges raw.csv.gz
    /// again with it.
    pub judge: crate::judge::JudgeConfig,
    /// The pseudo-NMI verdict with its evidence (also inside `fingerprint`).
    pub pseudo_nmi: PseudoNmi,
    /// The machine, as `pmustress env --json` prints it.
    pub fingerprint: serde_json::Value,
    pub elapsed_ns: u64,
    pub stop_reason: StopReason,
    /// True when --inject-drop-every discarded overflows on purpose: such a
    /// run proves the detector, never the machine.
    pub injected: bool,
    pub workers: Vec<WorkerResult>,
    pub totals: Counts,
    /// Overflow signals and SIGIOs nobody could be charged with.
    pub stray_signals: (u64, u64),
    pub max_sample_rate_before: Option<u64>,
    pub max_sample_rate_after: Option<u64>,
    /// The first anomalies, in order (all are counted in totals).
    pub anomalies: Vec<Anomaly>,
    pub anomalies_not_recorded: u64,
    /// Things a reader must know that do not change the verdict.
    pub warnings: Vec<String>,
    /// Why the verdict is inconclusive, if it is.
    pub inconclusive_because: Vec<String>,
    /// Files a failed write left short (cut back to their last complete
    /// line): what they hold is true but not everything.
    pub partial_files: Vec<String>,
    pub verdict: Verdict,
    pub exit_status: i32,
}

fn counts_of(w: &WorkerRecord, cfg: &RunConfig) -> Counts {
    let v = &w.verdict;
    let i = &v.interrupts;
    let d = &v.deliveries;
    let period = cfg.period;
    // Due points sit at multiples of the period until the grid moves: then
    // the final count says how many there were, independently of the judge.
    let grid_kept = i.rebased_in_handler == 0
        && i.rebased_at_restart == 0
        && i.ambiguous == 0
        && i.record_lost == 0
        && i.unexplained == 0
        && i.count_wraps == 0;
    let implied = match (cfg.mode, cfg.event.software, grid_kept, w.final_count) {
        (RearmMode::Free, false, true, Some(end)) => Some(end / period),
        _ => None,
    };
    Counts {
        interrupts: i.clone(),
        deliveries: d.clone(),
        signals: d.signals,
        sigio: d.sigio,
        kernel_samples: i.samples,
        accounted_overflows: i.overflows,
        implied_overflows: implied,
        dropped_interrupts: i.dropped,
        injected: i.injected,
        ambiguous: i.ambiguous,
        expected_coincidences: expected_coincidences(i, cfg),
        anomalies: v.anomalies.clone(),
        migrations_requested: w.moves_requested,
        migrations_failed: w.moves_failed,
        migrations_kernel: w.kernel_migrations,
        cpu_changes: v.cpu_changes,
        signal_ring_overflows: w.signal_ring_overflows,
        garbled_kernel_bytes: w.garbled_kernel_bytes as u64,
        reordered_observations: w.reordered,
        deltas: DeltaStats::of(&w.histogram),
        interrupt_latency: LatencyStats::of(&w.latency, period),
        dropped_rate: Some(Rate::new(i.dropped, i.overflows, CONFIDENCE)),
    }
}

fn expected_coincidences(i: &InterruptTotals, cfg: &RunConfig) -> f64 {
    coincidences(i, cfg.interrupt_skid, cfg.period)
}

/// Interrupts a period or more late that land within the interrupt skid of
/// a grid point by chance: the expected number among the ambiguous.
pub fn coincidences(i: &InterruptTotals, interrupt_skid: u64, period: u64) -> f64 {
    i.rebased_in_handler as f64 * (2 * interrupt_skid + 1) as f64 / period as f64
}

fn add(total: &mut Counts, c: &Counts) {
    total.interrupts.add(&c.interrupts);
    total.deliveries.add(&c.deliveries);
    total.signals += c.signals;
    total.sigio += c.sigio;
    total.kernel_samples += c.kernel_samples;
    total.accounted_overflows += c.accounted_overflows;
    total.implied_overflows = match (total.implied_overflows, c.implied_overflows) {
        (Some(a), Some(b)) => Some(a + b),
        _ => None,
    };
    total.dropped_interrupts += c.dropped_interrupts;
    total.injected += c.injected;
    total.ambiguous += c.ambiguous;
    total.expected_coincidences += c.expected_coincidences;
    for (k, n) in &c.anomalies {
        *total.anomalies.entry(*k).or_default() += n;
    }
    total.migrations_requested += c.migrations_requested;
    total.migrations_failed += c.migrations_failed;
    total.migrations_kernel = match (total.migrations_kernel, c.migrations_kernel) {
        (Some(a), Some(b)) => Some(a + b),
        (None, b) if total.signals == c.signals => b,
        _ => None,
    };
    total.cpu_changes += c.cpu_changes;
    total.signal_ring_overflows += c.signal_ring_overflows;
    total.garbled_kernel_bytes += c.garbled_kernel_bytes;
    total.reordered_observations += c.reordered_observations;
}

impl RunResults {
    pub fn new(
        cfg: &RunConfig,
        argv: Vec<String>,
        fingerprint: &Fingerprint,
        record: &RunRecord,
        anomalies: Vec<Anomaly>,
        anomalies_not_recorded: u64,
    ) -> RunResults {
        let mut totals = Counts::default();
        let mut merged = Histogram::<u64>::new(3).expect("valid precision");
        let mut latency = Histogram::<u64>::new(3).expect("valid precision");
        let workers: Vec<WorkerResult> = record
            .workers
            .iter()
            .map(|w| {
                let counts = counts_of(w, cfg);
                add(&mut totals, &counts);
                let _ = merged.add(&w.histogram);
                let _ = latency.add(&w.latency);
                WorkerResult {
                    worker: w.verdict.worker,
                    final_count: w.final_count,
                    stalled: w.stalled.clone(),
                    switch_witness: w.switch_witness,
                    ring_bytes: w.ring_bytes,
                    counts,
                }
            })
            .collect();
        totals.implied_overflows = workers
            .iter()
            .map(|w| w.counts.implied_overflows)
            .sum::<Option<u64>>()
            .filter(|_| !workers.is_empty());
        totals.deltas = DeltaStats::of(&merged);
        totals.interrupt_latency = LatencyStats::of(&latency, cfg.period);
        totals.dropped_rate = Some(Rate::new(
            totals.dropped_interrupts,
            totals.accounted_overflows,
            CONFIDENCE,
        ));
        let i = &totals.interrupts;
        let d = &totals.deliveries;

        let mut warnings = Vec::new();
        if cfg.event.software {
            warnings.push(format!(
                "{}: it proves the pipeline (signals, rings, migrator, judge), not the interrupt path of a PMU",
                crate::config::event::SOFTWARE_CAVEAT
            ));
        }
        if let Some(n) = cfg.inject_drop_every {
            warnings.push(format!(
                "self-test: every {} overflow interrupt was discarded on purpose (--inject-drop-every); these results prove the detector, not the machine",
                ordinal(n)
            ));
        }
        if i.throttled > 0 {
            warnings.push(format!(
                "the kernel throttled the event {} {} (THROTTLE records; no overflow is lost by it): raise perf_event_max_sample_rate or use a longer --period",
                i.throttled,
                plural(i.throttled, "time", "times")
            ));
        }
        if let (Some(a), Some(b)) = (record.max_sample_rate.0, record.max_sample_rate.1)
            && b < a
        {
            warnings.push(format!(
                "the kernel lowered perf_event_max_sample_rate from {a} to {b} during the run (interrupts took too long)"
            ));
        }
        if i.rebased_in_handler > 0 {
            warnings.push(format!(
                "{} {} a period or more late, after which the driver re-based the period: late, not dropped",
                i.rebased_in_handler,
                plural(i.rebased_in_handler, "interrupt came", "interrupts came")
            ));
        }
        if i.count_wraps > 0 {
            warnings.push(format!(
                "the kernel's count of the event jumped by 2^32 {} {} (its update raced the overflow NMI: a kernel bug of its own, see the count-wrap anomalies): counts read from the event are 2^32 too high from there; each time the driver re-based the period; not a lost interrupt",
                i.count_wraps,
                plural(i.count_wraps, "time", "times")
            ));
        }
        if let Some(p999) = totals.interrupt_latency.p999
            && p999 > 0.25
        {
            // Latency in a VM is time the vCPU did not run, not a fraction
            // of the period: at this period the p99.9 is a quarter of it.
            let suggested = (p999 * 4.0 * cfg.period as f64).ceil() as u64;
            warnings.push(format!(
                "interrupt latency p99.9 is {p999:.2} periods: late interrupts make losses harder to tell apart; use --period {suggested} or more (4 x the p99.9 latency)"
            ));
        }
        if d.sigio > 0 {
            warnings.push(format!(
                "the realtime signal queue overflowed {} times (plain SIGIO fallback): raise RLIMIT_SIGPENDING (ulimit -i)",
                d.sigio
            ));
        }
        if i.lost_records > 0 {
            warnings.push(format!(
                "the kernel did not write {} records into the sample ring (LOST records): {} signals had no sample",
                i.lost_records, d.unrecorded
            ));
        }
        if d.coalesced > 0 {
            warnings.push(format!(
                "the kernel merged the signals of {} {} into later ones: every interrupt happened (its sample is there)",
                d.coalesced,
                plural(d.coalesced, "interrupt", "interrupts")
            ));
        }
        if d.late_by_a_period > 0 {
            warnings.push(format!(
                "{} {} read a period or more after their interrupt: the thread did not run; not a lost interrupt",
                d.late_by_a_period,
                plural(d.late_by_a_period, "signal was", "signals were"),
            ));
        }
        if i.timer_skips > 0 {
            warnings.push(format!(
                "{} software-clock periods skipped: {}",
                i.timer_skips,
                AnomalyKind::SoftwareTimerSkip.advice()
            ));
        }
        if cfg.migrate != crate::domain::MigrateMode::None && totals.migrations_requested == 0 {
            warnings.push("no migration happened: the migrator never moved a worker".to_string());
        }
        if !cfg.event.software
            && workers
                .iter()
                .any(|w| w.switch_witness != SwitchWitness::Counts)
        {
            warnings.push(
                "event stops were not witnessed with their counts (--switch-witness counts needs perf_event_paranoid <= 1 or CAP_PERFMON): a gap across a stop may be ambiguous".to_string(),
            );
        }

        let mut inconclusive = Vec::new();
        for w in &workers {
            if let Some(s) = &w.stalled {
                inconclusive.push(s.clone());
            }
        }
        if totals.signals == 0 {
            inconclusive.push("no overflow signal was received at all".to_string());
        }
        inconclusive.extend(stream_reasons(
            i,
            d,
            totals.expected_coincidences,
            cfg.event.software,
        ));
        let ours = [
            (
                totals.signal_ring_overflows,
                "handler records were lost (signal ring full)",
            ),
            (
                totals.garbled_kernel_bytes,
                "bytes of the kernel sample ring could not be parsed",
            ),
            (
                record.stray_signals.0,
                "overflow signals carried an unknown fd",
            ),
            (
                record.stray_signals.1,
                "SIGIOs arrived on a non-worker thread",
            ),
        ];
        for (n, what) in ours {
            if n > 0 {
                inconclusive.push(format!("{n} {what}"));
            }
        }
        if cfg.mode == RearmMode::Reset && totals.reordered_observations > 0 {
            inconclusive.push(format!(
                "{} observations reached the judge out of time order, so resets may be misplaced",
                totals.reordered_observations
            ));
        }
        for w in &workers {
            if let Some(implied) = w.counts.implied_overflows
                && implied != w.counts.accounted_overflows
            {
                inconclusive.push(format!(
                    "worker {}: the final count implies {implied} overflows but the judge accounted for {} (a bug in pmustress: please report it with raw.csv.gz)",
                    w.worker, w.counts.accounted_overflows
                ));
            }
        }
        if let StopReason::OutputFailed(e) = &record.stop_reason {
            inconclusive.push(format!(
                "the run stopped early because results could not be written: {e}"
            ));
        }
        if let Some(b) = &cfg.bisect
            && totals.dropped_interrupts == 0
            && totals.accounted_overflows < b.overflows_needed
        {
            inconclusive.push(format!(
                "bisect: only {} of the {} overflows needed were measured, too few to call this kernel good",
                totals.accounted_overflows, b.overflows_needed
            ));
        }
        let (verdict, exit_status) = match record.stop_reason {
            StopReason::Signal(sig) => (Verdict::Interrupted, 128 + sig),
            _ if totals.dropped_interrupts > 0 => (Verdict::Dropped, EXIT_DROPPED),
            _ if !inconclusive.is_empty() => (Verdict::Inconclusive, EXIT_CANNOT_TEST),
            _ => (Verdict::Clean, EXIT_CLEAN),
        };
        RunResults {
            schema_version: SCHEMA_VERSION,
            tool: ToolInfo {
                name: env!("CARGO_PKG_NAME"),
                version: env!("CARGO_PKG_VERSION"),
            },
            argv,
            config: cfg.clone(),
            judge: cfg.judge_config(),
            pseudo_nmi: fingerprint.pseudo_nmi().clone(),
            fingerprint: serde_json::to_value(fingerprint).unwrap_or(serde_json::Value::Null),
            elapsed_ns: record.elapsed_ns,
            stop_reason: record.stop_reason.clone(),
            injected: cfg.inject_drop_every.is_some(),
            workers,
            totals,
            stray_signals: record.stray_signals,
            max_sample_rate_before: record.max_sample_rate.0,
            max_sample_rate_after: record.max_sample_rate.1,
            anomalies,
            anomalies_not_recorded,
            warnings,
            inconclusive_because: inconclusive,
            partial_files: Vec::new(),
            verdict,
            exit_status,
        }
    }

    /// Names files a failed write left short; a verdict that was clean
    /// can no longer be trusted as such (125).
    /// Results that could not all be saved (`why`): drops seen are real
    /// even if a file is short, and an interruption keeps its status;
    /// anything else cannot be trusted as clean. Once per reason.
    pub fn mark_unsaved(&mut self, why: String) {
        if !matches!(self.verdict, Verdict::Dropped | Verdict::Interrupted) {
            self.verdict = Verdict::Inconclusive;
            self.exit_status = EXIT_CANNOT_TEST;
        }
        if !self.inconclusive_because.contains(&why) {
            self.inconclusive_because.push(why);
        }
    }

    pub fn mark_partial(&mut self, files: Vec<String>) {
        if self.verdict == Verdict::Clean {
            self.verdict = Verdict::Inconclusive;
            self.exit_status = EXIT_CANNOT_TEST;
        }
        self.inconclusive_because.push(format!(
            "results could not all be written: {} cut back to the last complete line",
            files.join(", ")
        ));
        self.partial_files = files;
    }
}

/// How many overflows with no drop make a run "clean": enough to bound the
/// dropped rate below `MIN_EVIDENCE_RATE` at `CONFIDENCE` (299).
pub fn overflows_needed() -> u64 {
    crate::judge::stats::trials_to_bound(MIN_EVIDENCE_RATE, CONFIDENCE).unwrap_or(u64::MAX)
}

/// Why the judged stream itself makes a run inconclusive (the same words
/// for a run and for its replay).
pub fn stream_reasons(
    i: &InterruptTotals,
    d: &DeliveryTotals,
    expected_coincidences: f64,
    software: bool,
) -> Vec<String> {
    let mut reasons = Vec::new();
    let needed = overflows_needed();
    if i.dropped == 0 && i.overflows < needed {
        reasons.push(format!(
            "not enough overflows: {} measured, {needed} needed to bound the dropped rate below {MIN_EVIDENCE_RATE} at {:.0}% confidence; run longer",
            i.overflows,
            CONFIDENCE * 100.0
        ));
    }
    if i.ambiguous > 0 {
        reasons.push(format!(
            "{} {} fit both a lost interrupt and one a period late (chance coincidences expected: {:.2}); not counted as dropped",
            i.ambiguous,
            plural(i.ambiguous, "overflow", "overflows"),
            expected_coincidences
        ));
    }
    let counts = [
        (
            i.unexplained,
            "kernel sample records fit no driver behaviour (see the unexplained anomalies)",
        ),
        (
            // A software clock loses no interrupt a hole could hide.
            if software { 0 } else { i.lost_records },
            "kernel records were lost from the sample ring (LOST records)",
        ),
        (
            d.unmatched,
            "overflow signals had no interrupt of their own",
        ),
        (
            d.wrong_thread,
            "overflow signals landed on the wrong thread",
        ),
        (d.read_failures, "counter reads failed in the handler"),
    ];
    for (n, what) in counts {
        if n > 0 {
            reasons.push(format!("{n} {what}"));
        }
    }
    reasons
}

/// "every 97th", "every 2nd".
fn ordinal(n: u64) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, x) if x != 11 => "st",
        (2, x) if x != 12 => "nd",
        (3, x) if x != 13 => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

fn plural(n: u64, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 { one } else { many }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reasons(overflows: u64, dropped: u64) -> Vec<String> {
        let i = InterruptTotals {
            overflows,
            dropped,
            samples: overflows - dropped,
            on_time: overflows - dropped,
            ..InterruptTotals::default()
        };
        stream_reasons(&i, &DeliveryTotals::default(), 0.0, true)
    }

    /// 0.99^299 = 0.0495 <= 0.05 < 0.99^298: 299 overflows without a drop
    /// bound the rate below 1% at 95%, 298 do not.
    #[test]
    fn a_clean_verdict_needs_299_overflows() {
        assert_eq!(overflows_needed(), 299);
        assert_eq!(
            reasons(298, 0),
            [
                "not enough overflows: 298 measured, 299 needed to bound the dropped rate below 0.01 at 95% confidence; run longer"
            ]
        );
        assert!(reasons(299, 0).is_empty());
        // A drop is a drop however short the run.
        assert!(reasons(9, 1).is_empty());
    }
}
