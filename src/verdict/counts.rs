/*!
A run's counts, as the verdict rule reads them and run.json records them:
the verdict, the per-worker and total counts, and their distributions.
*/

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::domain::SwitchWitness;
use crate::judge::{DeliveryTotals, InterruptTotals, StressTotals};
use crate::stats::Rate;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// No dropped interrupt, and every window could be judged.
    Clean,
    /// At least one overflow interrupt never happened.
    Dropped,
    /// We could not judge everything (our failure or a broken witness).
    Inconclusive,
    /// A self-test (`--inject-drop-every`) found exactly the drops it
    /// injected and nothing else: the detector works (exit 0).
    SelfTestPassed,
    /// A self-test found fewer drops than it injected, or more (exit 1).
    SelfTestFailed,
    /// Stopped by a signal (SIGINT, SIGTERM, SIGXCPU, ...): what
    /// was measured is complete but partial.
    Interrupted,
    /// No verdict: the run is still going, was killed (SIGKILL, a second
    /// Ctrl-C), or could not start (then run.json has `setup_failure`).
    Incomplete,
}

/// Delta distribution summary (events, or ns for software clocks).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
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

/// Counts for one worker or for the whole run. A count a schema did not
/// have reads as zero.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
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
    /// Anomaly windows by kind, by the kind's name (`AnomalyKind::name`; a
    /// kind an older schema had, such as schema 1's `late`, reads as written).
    pub anomalies: BTreeMap<String, u64>,
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
    /// Stops the kernel witnessed, the moves that made them, and where in
    /// the period they fell (runs recorded before did not count them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stress: Option<StressTotals>,
}

/// One worker's entry in run.json's `workers`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerEntry {
    pub worker: usize,
    pub final_count: Option<u64>,
    pub stalled: Option<String>,
    /// How this worker's event stops were witnessed (schema 1: none were).
    #[serde(default = "crate::domain::no_switch_witness")]
    pub switch_witness: SwitchWitness,
    /// Bytes of its sample ring's record area (schema 1 did not say).
    #[serde(default)]
    pub ring_bytes: usize,
    #[serde(flatten)]
    pub counts: Counts,
}
