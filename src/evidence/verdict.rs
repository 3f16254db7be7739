/*!
The run's verdict: from the engine's `RunRecord` to `RunResults`.

`RunResults::new` sums each worker's judgement into counts, adds them up,
and applies the verdict rule: `dropped` when the judge found an overflow
whose interrupt never happened under every explanation of the kernel's
records; otherwise `inconclusive` when anything could not be judged
(ambiguous overflows, a broken witness, too few overflows, our own
failure); otherwise `clean`. A run stopped by a signal is `interrupted`.
*/

use hdrhistogram::Histogram;

use crate::config::RunConfig;
use crate::domain::{
    CONFIDENCE, EXIT_CANNOT_TEST, EXIT_CLEAN, EXIT_DROPPED, RearmMode, SCHEMA_VERSION, StopReason,
    SwitchWitness,
};
use crate::engine::run::{RunRecord, WorkerRecord};
use crate::evidence::results::{
    AnomalyRecord, Counts, DeltaStats, LatencyStats, RunResults, StressSummary, ToolInfo, Verdict,
    WorkerResult, coincidences, plural, stream_reasons, stress_reasons,
};
use crate::fingerprint::Fingerprint;
use crate::judge::stats::Rate;
use crate::judge::{Anomaly, AnomalyKind, InterruptTotals};

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
        anomalies: v
            .anomalies
            .iter()
            .map(|(k, n)| (k.name().to_string(), *n))
            .collect(),
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
        stress: Some(v.stress.clone()),
    }
}

fn expected_coincidences(i: &InterruptTotals, cfg: &RunConfig) -> f64 {
    coincidences(i, cfg.interrupt_skid, cfg.period)
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
        *total.anomalies.entry(k.clone()).or_default() += n;
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
    if let Some(stress) = &c.stress {
        total
            .stress
            .get_or_insert_with(Default::default)
            .add(stress);
    }
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
        let judge = cfg.judge_config();
        let stress = totals.stress.clone().unwrap_or_default();
        inconclusive.extend(stress_reasons(
            &stress,
            totals.dropped_interrupts,
            judge.stops_needed,
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
        if let Some(b) = &cfg.bisect
            && totals.dropped_interrupts == 0
            && stress.stops < b.stops_needed
        {
            inconclusive.push(format!(
                "bisect: only {} of the {} stops needed were witnessed, too few to call this kernel good",
                stress.stops, b.stops_needed
            ));
        }
        let stress = StressSummary::new(
            &stress,
            totals.dropped_interrupts,
            cfg.period,
            cfg.cpus.len(),
            record.elapsed_ns,
        );
        let (verdict, exit_status) = match record.stop_reason {
            StopReason::Signal(sig) => (Verdict::Interrupted, 128 + sig),
            _ if totals.dropped_interrupts > 0 => (Verdict::Dropped, EXIT_DROPPED),
            _ if !inconclusive.is_empty() => (Verdict::Inconclusive, EXIT_CANNOT_TEST),
            _ => (Verdict::Clean, EXIT_CLEAN),
        };
        RunResults {
            schema_version: SCHEMA_VERSION,
            tool: ToolInfo::this(),
            argv,
            config: cfg.clone(),
            judge: Some(judge),
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
            anomalies: anomalies.iter().map(AnomalyRecord::from).collect(),
            anomalies_not_recorded,
            warnings,
            inconclusive_because: inconclusive,
            partial_files: Vec::new(),
            stress: Some(stress),
            verdict,
            exit_status,
        }
    }
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
