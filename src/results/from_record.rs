/*!
A run's totals: from the engine's `RunRecord` to `RunResults`.

`RunResults::new` sums each worker's judgement into counts, adds them up,
and asks the verdict rule (`verdict::decide`) for the verdict, its
reasons and its warnings.
*/

use hdrhistogram::Histogram;

use crate::config::RunConfig;
use crate::domain::{CONFIDENCE, RUN_SCHEMA_VERSION, RearmMode};
use crate::engine::run::{RunRecord, WorkerOutcome};
use crate::fingerprint::Fingerprint;
use crate::judge::{Anomaly, InterruptTotals};
use crate::results::schema::{
    AnomalyRecord, Counts, DeltaStats, LatencyStats, RunResults, StressSummary, ToolInfo,
    WorkerEntry,
};
use crate::stats::Rate;
use crate::verdict::{Evidence, RunSide, Settings, coincidences, decide};

fn counts_of(w: &WorkerOutcome, cfg: &RunConfig) -> Counts {
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
        let workers: Vec<WorkerEntry> = record
            .workers
            .iter()
            .map(|w| {
                let counts = counts_of(w, cfg);
                add(&mut totals, &counts);
                let _ = merged.add(&w.histogram);
                let _ = latency.add(&w.latency);
                WorkerEntry {
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
        let side = RunSide {
            workers: &workers,
            stop: &record.stop_reason,
            stray_signals: record.stray_signals,
            foreign_signals: record.foreign_signals,
            held: record.held,
            max_sample_rate: record.max_sample_rate,
            perf_event_paranoid: fingerprint.knobs.perf_event_paranoid.value,
        };
        let decision = decide(&Evidence::run(&totals, side), &Settings::of_run(cfg));
        let stress = StressSummary::new(
            &totals.stress.clone().unwrap_or_default(),
            totals.dropped_interrupts,
            cfg.period,
            cfg.cpus.len(),
            record.elapsed_ns,
        );
        RunResults {
            schema_version: RUN_SCHEMA_VERSION,
            tool: ToolInfo::this(),
            argv,
            // Set by `ResultsDir::finish`, which knows when the run started.
            started_unix_s: None,
            started_utc: None,
            started_monotonic_ns: None,
            config: cfg.clone(),
            judge: Some(cfg.judge_config()),
            pseudo_nmi: fingerprint.pseudo_nmi().clone(),
            fingerprint: serde_json::to_value(fingerprint).unwrap_or(serde_json::Value::Null),
            elapsed_ns: record.elapsed_ns,
            stop_reason: record.stop_reason.clone(),
            injected: cfg.inject_drop_every.is_some(),
            workers,
            totals,
            stray_signals: record.stray_signals,
            foreign_signals: record.foreign_signals,
            held: record.held,
            max_sample_rate_before: record.max_sample_rate.0,
            max_sample_rate_after: record.max_sample_rate.1,
            anomalies: anomalies.iter().map(AnomalyRecord::from).collect(),
            anomalies_not_recorded,
            warnings: decision.warnings,
            inconclusive_because: decision.reasons,
            partial_files: Vec::new(),
            stress: Some(stress),
            verdict: decision.verdict,
            exit_status: decision.exit_status,
        }
    }
}
