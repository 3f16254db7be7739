/*!
Results: what a run measured, summed up and judged, as one serde structure.

`RunResults::new` turns the raw `RunRecord` into per-worker and total counts,
the delta distribution, the three-way overflow accounting (final count /
period, kernel sample records, signals) and the verdict with its exit status.
It is written to `run.json` (atomically) and rendered by `report`.
*/

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::classify::AnomalyKind;
use crate::config::RunConfig;
use crate::fingerprint::{Fingerprint, PseudoNmi};
use crate::run::{RunRecord, StopReason, WorkerRecord};
use crate::stats::Rate;
use crate::timeline::{Anomaly, Mode};

pub const SCHEMA_VERSION: u32 = 1;

/// Exit statuses, for `git bisect run` among others.
pub const EXIT_CLEAN: i32 = 0;
pub const EXIT_DROPPED: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_CANNOT_TEST: i32 = 125;

/// Confidence of the intervals reported with rates.
pub const CONFIDENCE: f64 = 0.95;

/// At most this many anomalies are kept in run.json (all are counted, and
/// anomalies.csv has every one).
pub const MAX_RECORDED_ANOMALIES: usize = 1_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// No dropped interrupt, and every window could be judged.
    Clean,
    /// At least one overflow interrupt never happened.
    Dropped,
    /// We could not judge everything (our failure or a broken witness).
    Inconclusive,
    /// Stopped by SIGINT/SIGTERM: what was measured is complete but partial.
    Interrupted,
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

/// Counts for one worker or for the whole run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Counts {
    /// Overflow signals received.
    pub signals: u64,
    /// Plain-SIGIO fallbacks (signal queue full).
    pub sigio: u64,
    /// Kernel PERF_RECORD_SAMPLEs: interrupts the kernel handled.
    pub kernel_samples: u64,
    /// Final count / period: overflows that must have happened (free mode).
    pub implied_overflows: u64,
    /// Overflows accounted for by the judged windows.
    pub accounted_overflows: u64,
    /// Kernel samples after the last signal: in flight at stop.
    pub tail_samples: u64,
    /// Hardware, free mode: overflows after the last interrupt, which the
    /// final DISABLE left without one (at most 1 unless the end lost some).
    pub overflows_at_stop: u64,
    /// implied - accounted - tail - at stop: should be 0.
    pub unaccounted_overflows: i64,
    /// Hardware, free mode: interrupts a period or more late, after which
    /// the driver re-based the period.
    pub rebased_periods: u64,
    pub throttle_records: u64,
    pub unthrottle_records: u64,
    pub lost_records: u64,
    /// Windows judged ok.
    pub ok_windows: u64,
    /// Anomalous windows by kind.
    pub anomalies: BTreeMap<AnomalyKind, u64>,
    /// Overflows missed (k - 1 summed) by kind.
    pub missed_overflows: BTreeMap<AnomalyKind, u64>,
    pub dropped_interrupts: u64,
    pub injected: u64,
    pub migrations_requested: u64,
    pub migrations_failed: u64,
    /// se.nr_migrations growth, when the kernel exposes it.
    pub migrations_kernel: Option<u64>,
    /// Consecutive signals seen on different CPUs.
    pub cpu_changes: u64,
    pub wrong_thread_signals: u64,
    pub read_failures: u64,
    pub signal_ring_overflows: u64,
    pub garbled_kernel_bytes: u64,
    pub deltas: DeltaStats,
    /// Dropped interrupts per million overflows (accounted), with a 95%
    /// Clopper-Pearson interval.
    pub dropped_rate: Option<Rate>,
}

#[derive(Debug, Clone, Serialize)]
pub struct WorkerResult {
    pub worker: usize,
    pub final_count: Option<u64>,
    pub stalled: Option<String>,
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
    pub verdict: Verdict,
    pub exit_status: i32,
}

fn counts_of(w: &WorkerRecord, period: u64, mode: Mode) -> Counts {
    let t = &w.totals;
    let final_overflows = w.final_count.map_or(0, |c| c / period);
    let implied = match mode {
        Mode::Free => final_overflows,
        // The count restarts at every signal: only what is left after the
        // last one adds to what the windows account for.
        Mode::Reset => t.accounted_overflows + final_overflows,
    };
    // The samples' counts say which multiple of the period the last
    // interrupt served; what the final count passed beyond it had none.
    // Checking the rest against the windows' sum catches any gap counted
    // wrong, and a period the driver re-based.
    let at_stop = match (mode, t.last_sample_value, w.final_count) {
        (Mode::Free, Some(last), Some(end)) => {
            let g = t.grid_origin;
            (end.saturating_sub(g) / period).saturating_sub(last.saturating_sub(g) / period)
        }
        _ => 0,
    };
    Counts {
        signals: t.signals,
        sigio: t.sigio,
        kernel_samples: t.kernel_samples,
        implied_overflows: implied,
        accounted_overflows: t.accounted_overflows,
        tail_samples: t.tail_samples,
        overflows_at_stop: at_stop,
        rebased_periods: t.rebased,
        unaccounted_overflows: implied as i64
            - t.accounted_overflows as i64
            - t.tail_samples as i64
            - at_stop as i64,
        throttle_records: t.throttle_records,
        unthrottle_records: t.unthrottle_records,
        lost_records: t.lost_records,
        ok_windows: t.ok,
        anomalies: t
            .anomalies
            .iter()
            .copied()
            .filter(|(_, n)| *n > 0)
            .collect(),
        missed_overflows: t
            .missed_overflows
            .iter()
            .copied()
            .filter(|(_, n)| *n > 0)
            .collect(),
        dropped_interrupts: t.dropped_interrupts,
        injected: t.injected,
        migrations_requested: w.moves_requested,
        migrations_failed: w.moves_failed,
        migrations_kernel: w.kernel_migrations,
        cpu_changes: t.cpu_changes,
        wrong_thread_signals: t.wrong_thread,
        read_failures: t.read_failures,
        signal_ring_overflows: w.signal_ring_overflows,
        garbled_kernel_bytes: w.garbled_kernel_bytes as u64,
        deltas: DeltaStats::of(&w.histogram),
        dropped_rate: Some(Rate::new(
            t.dropped_interrupts,
            t.accounted_overflows,
            CONFIDENCE,
        )),
    }
}

fn add(total: &mut Counts, c: &Counts) {
    total.signals += c.signals;
    total.sigio += c.sigio;
    total.kernel_samples += c.kernel_samples;
    total.implied_overflows += c.implied_overflows;
    total.accounted_overflows += c.accounted_overflows;
    total.tail_samples += c.tail_samples;
    total.overflows_at_stop += c.overflows_at_stop;
    total.rebased_periods += c.rebased_periods;
    total.unaccounted_overflows += c.unaccounted_overflows;
    total.throttle_records += c.throttle_records;
    total.unthrottle_records += c.unthrottle_records;
    total.lost_records += c.lost_records;
    total.ok_windows += c.ok_windows;
    for (k, n) in &c.anomalies {
        *total.anomalies.entry(*k).or_default() += n;
    }
    for (k, n) in &c.missed_overflows {
        *total.missed_overflows.entry(*k).or_default() += n;
    }
    total.dropped_interrupts += c.dropped_interrupts;
    total.injected += c.injected;
    total.migrations_requested += c.migrations_requested;
    total.migrations_failed += c.migrations_failed;
    total.migrations_kernel = match (total.migrations_kernel, c.migrations_kernel) {
        (Some(a), Some(b)) => Some(a + b),
        (None, b) if total.signals == c.signals => b,
        _ => None,
    };
    total.cpu_changes += c.cpu_changes;
    total.wrong_thread_signals += c.wrong_thread_signals;
    total.read_failures += c.read_failures;
    total.signal_ring_overflows += c.signal_ring_overflows;
    total.garbled_kernel_bytes += c.garbled_kernel_bytes;
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
        let workers: Vec<WorkerResult> = record
            .workers
            .iter()
            .map(|w| {
                let counts = counts_of(w, cfg.period, cfg.mode);
                add(&mut totals, &counts);
                let _ = merged.add(&w.histogram);
                WorkerResult {
                    worker: w.totals.worker,
                    final_count: w.final_count,
                    stalled: w.stalled.clone(),
                    counts,
                }
            })
            .collect();
        totals.deltas = DeltaStats::of(&merged);
        totals.dropped_rate = Some(Rate::new(
            totals.dropped_interrupts,
            totals.accounted_overflows,
            CONFIDENCE,
        ));

        let mut warnings = Vec::new();
        if cfg.event.software {
            warnings.push(format!(
                "{}: it proves the pipeline (signals, rings, migrator, classifier), not the interrupt path of a PMU",
                crate::event::SOFTWARE_CAVEAT
            ));
        }
        if cfg.inject_drop_every.is_some() {
            warnings.push(format!(
                "self-test: every {}th overflow was discarded on purpose (--inject-drop-every); these results prove the detector, not the machine",
                cfg.inject_drop_every.unwrap_or(0)
            ));
        }
        let throttled = totals
            .anomalies
            .get(&AnomalyKind::Throttled)
            .copied()
            .unwrap_or(0);
        if totals.throttle_records > 0 || throttled > 0 {
            warnings.push(format!(
                "the kernel throttled the event: {} THROTTLE records, {throttled} windows judged throttled; raise perf_event_max_sample_rate or use a longer --period",
                totals.throttle_records
            ));
        }
        if let (Some(a), Some(b)) = (record.max_sample_rate.0, record.max_sample_rate.1)
            && b < a
        {
            warnings.push(format!(
                "the kernel lowered perf_event_max_sample_rate from {a} to {b} during the run (interrupts took too long)"
            ));
        }
        if totals.rebased_periods > 0 {
            warnings.push(format!(
                "{} interrupts came a period or more late and the driver re-based the period after them: counted late, not dropped; the final-count check cannot place the grid after them",
                totals.rebased_periods
            ));
        }
        if totals.sigio > 0 {
            warnings.push(format!(
                "the realtime signal queue overflowed {} times (plain SIGIO fallback): raise RLIMIT_SIGPENDING (ulimit -i)",
                totals.sigio
            ));
        }
        for kind in [
            AnomalyKind::Late,
            AnomalyKind::Early,
            AnomalyKind::SoftwareTimerSkip,
        ] {
            if let Some(n) = totals.anomalies.get(&kind) {
                warnings.push(format!("{n} windows {kind}: {}", kind.advice()));
            }
        }
        if cfg.migrate != crate::cli::MigrateMode::None && totals.migrations_requested == 0 {
            warnings.push("no migration happened: the migrator never moved a worker".to_string());
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
        let ours = [
            (
                totals.wrong_thread_signals,
                "overflow signals landed on the wrong thread",
            ),
            (totals.read_failures, "counter reads failed in the handler"),
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
        for kind in [AnomalyKind::WitnessLost, AnomalyKind::ToolError] {
            if let Some(n) = totals.anomalies.get(&kind) {
                inconclusive.push(format!("{n} windows {kind}: {}", kind.advice()));
            }
        }
        if totals.unaccounted_overflows != 0
            && cfg.mode == Mode::Free
            && !cfg.event.software
            && totals.rebased_periods == 0
        {
            inconclusive.push(format!(
                "{} overflows implied by the final counts are not accounted for by signals and kernel samples",
                totals.unaccounted_overflows
            ));
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
            verdict,
            exit_status,
        }
    }
}
