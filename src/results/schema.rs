/*!
Results: run.json's schema and anomalies.csv's columns, as the writer writes
them and every reader reads them: the same types, Serialize and Deserialize.

run.json has two stages. `RunStarted` is what it says from the moment a run
starts (verdict `incomplete`: the run is going, was killed, or could not
start). `RunResults` is the finished run: per-worker and total counts (the
interrupt judgement, the delivery judgement, and the final count as an
independent check of the overflow accounting), the delta and interrupt
latency distributions, and the verdict with its exit status. `verdict`
builds it from the engine's `RunRecord`; `results_dir` writes both stages
(atomically); `runfile` reads either back as a `RunDocument`;
`cli::console` renders it at the end of a run and `report` when read back.
`AnomalyRecord` is one anomaly, as run.json's list and anomalies.csv's rows
both hold it.

Older files read into the same types: fields a version did not have are
`#[serde(default)]` (schema 1 had no interrupt or delivery judgement, so
those counts read as zero there; `runfile` says so), and the anomaly
columns renamed in schema 3 keep their old names as aliases.

This file imports neither the engine nor clap (tests/architecture.rs checks
it): the schema can be read without knowing how a run is made.
*/

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::config::RunConfig;
use crate::domain::{CONFIDENCE, EXIT_CANNOT_TEST, StopReason};
use crate::fingerprint::{Fingerprint, PseudoNmi};

use crate::judge::{Anomaly, Sensitivity, StressTotals};
use crate::verdict::{Reason, Warning};

/// At most this many anomalies are kept in run.json (all are counted, and
/// anomalies.csv has every one).
pub const MAX_RECORDED_ANOMALIES: usize = 1_000;

pub use crate::verdict::counts::{Counts, DeltaStats, LatencyStats, Verdict, WorkerEntry};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolInfo {
    pub name: String,
    pub version: String,
    /// The git commit it was built from ("-dirty" with local changes;
    /// absent in files written before it was recorded here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

impl ToolInfo {
    /// This pmustress.
    pub fn this() -> ToolInfo {
        ToolInfo {
            name: env!("CARGO_PKG_NAME").to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            commit: Some(env!("PMUSTRESS_GIT_COMMIT").to_string()),
        }
    }

    /// "pmustress 0.1.0 (commit 9f32e73c2213)", as a report names it.
    pub fn describe(&self) -> String {
        match &self.commit {
            Some(c) => format!(
                "{} {} (commit {})",
                self.name,
                self.version,
                c.get(..12).unwrap_or(c)
            ),
            None => format!("{} {}", self.name, self.version),
        }
    }
}

/// A wall-clock time as run.json and the report write it: RFC 3339, UTC,
/// whole seconds ("2026-12-02T14:58:01Z").
pub fn utc_text(unix_s: u64) -> String {
    humantime::format_rfc3339_seconds(
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(unix_s),
    )
    .to_string()
}

/// One anomaly, as run.json's `anomalies` list and anomalies.csv's rows
/// both hold it: the columns are these fields, in this order, and nowhere
/// else (`anomaly_columns`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnomalyRecord {
    pub worker: usize,
    /// The last overflow signal before it (1-based; 0: none yet).
    pub signal_seq: u64,
    pub time_ns: u64,
    /// Interrupt kinds: `interrupt_gap` when there is one. Delivery kinds:
    /// how far past its interrupt the signal read.
    pub delta: u64,
    pub period: u64,
    pub skid: u64,
    /// `AnomalyKind::name` (older schemas' kinds read as written).
    pub kind: String,
    /// Overflows it concerns (run.json said `missed` before schema 3).
    #[serde(alias = "missed")]
    pub overflows_missed: u64,
    /// Of those, interrupts that never happened (`dropped` before).
    #[serde(alias = "dropped")]
    pub interrupts_dropped: u64,
    /// Overflows discarded on purpose among them.
    pub injected: u64,
    pub cpu_before: Option<u32>,
    pub cpu_after: u32,
    /// Since the migrator last moved this worker (`since_migration_ns`).
    #[serde(alias = "since_migration_ns")]
    pub ns_since_migration: Option<u64>,
    /// Interrupts (sample records) seen so far (`kernel_samples`).
    #[serde(alias = "kernel_samples")]
    pub kernel_samples_in_window: u64,
    /// The count between the two interrupts around it; for an injected
    /// drop, from the interrupt before it to the one discarded (schema 1:
    /// none).
    #[serde(default)]
    pub interrupt_gap: Option<u64>,
}

impl From<&Anomaly> for AnomalyRecord {
    fn from(a: &Anomaly) -> AnomalyRecord {
        AnomalyRecord {
            worker: a.worker,
            signal_seq: a.signal_seq,
            time_ns: a.time_ns,
            delta: a.delta,
            period: a.period,
            skid: a.skid,
            kind: a.kind.name().to_string(),
            overflows_missed: a.missed,
            interrupts_dropped: a.dropped,
            injected: a.injected,
            cpu_before: a.cpu_before,
            cpu_after: a.cpu_after,
            ns_since_migration: a.since_migration_ns,
            kernel_samples_in_window: a.kernel_samples,
            interrupt_gap: a.interrupt_gap,
        }
    }
}

impl AnomalyRecord {
    /// Where it happened, as the live line and `report` both print it:
    /// `cpu 3 -> 7` when it came on another CPU than the record before it,
    /// `cpu 7` on the same one, nothing when the CPU is unknown.
    pub fn cpus(&self) -> String {
        match self.cpu_before {
            Some(before) => format!("cpu {before} -> {}", self.cpu_after),
            None if self.cpu_after != u32::MAX => format!("cpu {}", self.cpu_after),
            None => String::new(),
        }
    }

    /// What `interrupt_gap` measures, in words: between the interrupts
    /// around it, or, for a drop we made, from the interrupt before it to
    /// the one we discarded (the judge books it there).
    pub fn gap_text(&self, gap: u64) -> String {
        if self.injected > 0 {
            format!("discarded {gap} after the interrupt before it")
        } else {
            format!("interrupts {gap} apart")
        }
    }
}

/// anomalies.csv's header: `AnomalyRecord`'s field names, as serde spells
/// them (so the header cannot drift from the rows).
pub fn anomaly_columns() -> Vec<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let _ = w.serialize(AnomalyRecord::default());
    let bytes = w.into_inner().unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    let header = text.lines().next().unwrap_or_default();
    header.split(',').map(str::to_string).collect()
}

/// run.json from the moment a run starts until it ends: verdict
/// `incomplete`, what was asked and how to judge its stream. If the run is
/// killed this is what stays; if it cannot start, `setup_failure` says why
/// (with exit status 125).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunStarted {
    pub schema_version: u32,
    /// Absent in files written before schema 3.
    #[serde(default)]
    pub tool: Option<ToolInfo>,
    pub verdict: Verdict,
    #[serde(default)]
    pub note: String,
    /// The exact command line.
    pub argv: Vec<String>,
    pub config: RunConfig,
    /// How to judge raw.csv.gz again, should the run never finish.
    #[serde(default)]
    pub judge: Option<crate::judge::JudgeConfig>,
    #[serde(default)]
    pub started_unix_s: Option<u64>,
    /// The same, as a date (`utc_text`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_utc: Option<String>,
    /// The machine, known before the run starts: a killed run still says
    /// where it ran (absent before schema 3).
    #[serde(default)]
    pub pseudo_nmi: Option<PseudoNmi>,
    #[serde(default)]
    pub fingerprint: serde_json::Value,
    /// Set only when the run could not start: 125, cannot test here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup_failure: Option<String>,
}

impl RunStarted {
    /// While the run goes on (and what a killed run leaves).
    pub fn going(
        cfg: &RunConfig,
        argv: &[String],
        machine: &Fingerprint,
        started_unix_s: u64,
    ) -> RunStarted {
        RunStarted {
            schema_version: crate::domain::RUN_SCHEMA_VERSION,
            tool: Some(ToolInfo::this()),
            verdict: Verdict::Incomplete,
            note:
                "the run has not finished (or was killed): see anomalies.csv and the histogram logs"
                    .to_string(),
            argv: argv.to_vec(),
            config: cfg.clone(),
            judge: Some(cfg.judge_config()),
            started_unix_s: Some(started_unix_s),
            started_utc: Some(utc_text(started_unix_s)),
            pseudo_nmi: Some(machine.pseudo_nmi().clone()),
            fingerprint: serde_json::to_value(machine).unwrap_or(serde_json::Value::Null),
            exit_status: None,
            setup_failure: None,
        }
    }

    /// The run could not start: 125, cannot test here, and why.
    pub fn never_started(
        cfg: &RunConfig,
        argv: &[String],
        machine: &Fingerprint,
        started_unix_s: u64,
        cause: String,
    ) -> RunStarted {
        RunStarted {
            note: "the run could not start: see setup_failure".to_string(),
            exit_status: Some(EXIT_CANNOT_TEST),
            setup_failure: Some(cause),
            ..RunStarted::going(cfg, argv, machine, started_unix_s)
        }
    }
}

/// run.json once the run has ended with a verdict.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunResults {
    pub schema_version: u32,
    pub tool: ToolInfo,
    /// The exact command line.
    pub argv: Vec<String>,
    /// When the run started (wall clock, seconds since 1970, UTC), and as
    /// a date: with --out the directory name says neither (absent in
    /// files written before they were recorded here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_unix_s: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_utc: Option<String>,
    /// CLOCK_MONOTONIC ns when measuring began (the clock of every
    /// `time_ns`): where a plot's time axis starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_monotonic_ns: Option<u64>,
    pub config: RunConfig,
    /// How the stream was judged: `pmustress replay` judges raw.csv.gz
    /// again with it (schema 1 had none).
    #[serde(default)]
    pub judge: Option<crate::judge::JudgeConfig>,
    /// The pseudo-NMI verdict with its evidence (also inside `fingerprint`).
    pub pseudo_nmi: PseudoNmi,
    /// The machine, as `pmustress env --json` prints it.
    pub fingerprint: serde_json::Value,
    pub elapsed_ns: u64,
    pub stop_reason: StopReason,
    /// True when --inject-drop-every discarded overflows on purpose: such a
    /// run proves the detector, never the machine.
    pub injected: bool,
    pub workers: Vec<WorkerEntry>,
    pub totals: Counts,
    /// Overflow signals and SIGIOs nobody could be charged with.
    pub stray_signals: (u64, u64),
    /// Overflow signals and SIGIOs a process sent, ignored (runs recorded
    /// before did not count them).
    #[serde(default)]
    pub foreign_signals: u64,
    /// Spans the controller was held off the CPU, the process stopped or
    /// frozen (runs recorded before did not measure them).
    #[serde(default)]
    pub held: crate::domain::Held,
    pub max_sample_rate_before: Option<u64>,
    pub max_sample_rate_after: Option<u64>,
    /// The first anomalies, in order (all are counted in totals).
    pub anomalies: Vec<AnomalyRecord>,
    pub anomalies_not_recorded: u64,
    /// Things a reader must know that do not change the verdict.
    #[serde(default)]
    pub warnings: Vec<Warning>,
    /// Why the verdict is inconclusive, if it is.
    #[serde(default)]
    pub inconclusive_because: Vec<Reason>,
    /// Files a failed write left short (cut back to their last complete
    /// line): what they hold is true but not everything.
    #[serde(default)]
    pub partial_files: Vec<String>,
    /// How hard the run pressed on the window where overflows are lost,
    /// and what its clean verdict may claim (runs recorded before did not
    /// measure it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stress: Option<StressSummary>,
    pub verdict: Verdict,
    pub exit_status: i32,
}

/// A run's stress per second and the sensitivity it bought.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StressSummary {
    /// Witnessed stops of the counting threads per second, all workers.
    pub stops_per_second: f64,
    /// The same per CPU of the run's CPU set.
    pub stops_per_cpu_per_second: f64,
    /// Moves the migrators made per second, and the share of them that
    /// stopped a running worker (None: no timed move).
    pub moves_per_second: f64,
    pub moves_that_stopped_fraction: Option<f64>,
    /// What zero drops in these stops rule out.
    pub sensitivity: Sensitivity,
}

impl StressSummary {
    pub fn new(
        stress: &StressTotals,
        dropped: u64,
        period: u64,
        cpus: usize,
        elapsed_ns: u64,
    ) -> StressSummary {
        let seconds = (elapsed_ns as f64 / 1e9).max(1e-9);
        let timed = stress.moves - stress.moves_untimed;
        StressSummary {
            stops_per_second: stress.stops as f64 / seconds,
            stops_per_cpu_per_second: stress.stops as f64 / seconds / cpus.max(1) as f64,
            moves_per_second: stress.moves as f64 / seconds,
            moves_that_stopped_fraction: (timed > 0)
                .then(|| stress.moves_that_stopped as f64 / timed as f64),
            sensitivity: Sensitivity::new(stress, dropped, period, CONFIDENCE),
        }
    }

    /// "N stops witnessed (X/s, Y per CPU per s); M moves ...": how hard
    /// the run pressed, for the summary and the report.
    pub fn describe(&self, t: &StressTotals) -> String {
        let mut s = format!(
            "{} stops witnessed ({:.0}/s, {:.0} per CPU per s); {} moves ({:.0}/s)",
            t.stops,
            self.stops_per_second,
            self.stops_per_cpu_per_second,
            t.moves,
            self.moves_per_second
        );
        if let Some(f) = self.moves_that_stopped_fraction {
            let _ = write!(s, ", {:.0}% of them stopped a running worker", f * 100.0);
        }
        if let Some(d) = self.sensitivity.near_due_density {
            let _ = write!(s, "; stops just past a due point: {d:.2}x an even spread");
        }
        s
    }

    /// "N stops; a driver losing ...": what zero drops in these stops rule
    /// out (the clean verdict's sentence).
    pub fn sensitivity_words(&self) -> String {
        let x = &self.sensitivity;
        let mut s = format!("{} stops", x.stops);
        if let (Some(w), Some(f)) = (x.window_events, x.window_fraction) {
            let _ = write!(
                s,
                "; a driver losing every overflow due within {} events ({}% of the period) before a stop would have lost one here with 99% probability",
                three_figures(w),
                three_figures(f * 100.0)
            );
        }
        if let Some(hi) = x.per_stop.ci_high_per_million {
            let _ = write!(
                s,
                "; dropped per stop below {}% (95%)",
                three_figures(hi / 1e4)
            );
        }
        s
    }
}

/// Three significant figures, never fewer than the whole number: a long
/// run's sensitivity is a fraction of an event (4.3 million stops at a
/// period of 100,000: 0.107 events, 0.000107% of the period), which fixed
/// decimals printed as "0 events (0.00%)", as if it ruled nothing out.
fn three_figures(x: f64) -> String {
    if !x.is_finite() || x <= 0.0 || x >= 100.0 {
        return format!("{x:.0}");
    }
    // 1 <= x < 10: two decimals; each tenth below it, one more.
    let decimals = (2.0 - x.log10().floor()).clamp(0.0, 15.0) as usize;
    format!("{x:.decimals$}")
}

impl RunResults {
    /// Results that could not all be saved (`why`): drops seen are real
    /// even if a file is short, and an interruption keeps its status;
    /// anything else cannot be trusted as clean. Once per reason.
    pub fn mark_unsaved(&mut self, why: String) {
        if !matches!(
            self.verdict,
            Verdict::Dropped | Verdict::SelfTestFailed | Verdict::Interrupted
        ) {
            self.verdict = Verdict::Inconclusive;
            self.exit_status = EXIT_CANNOT_TEST;
        }
        let why = Reason::Unsaved(why);
        if !self.inconclusive_because.contains(&why) {
            self.inconclusive_because.push(why);
        }
    }

    /// Names files a failed write left short; a verdict that was clean
    /// can no longer be trusted as such (125).
    pub fn mark_partial(&mut self, files: Vec<String>) {
        if self.verdict == Verdict::Clean {
            self.verdict = Verdict::Inconclusive;
            self.exit_status = EXIT_CANNOT_TEST;
        }
        self.inconclusive_because
            .push(Reason::PartialFiles(files.clone()));
        self.partial_files = files;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sensitivity_numbers_keep_three_figures() {
        assert_eq!(three_figures(1535.4), "1535");
        assert_eq!(three_figures(203.0), "203");
        assert_eq!(three_figures(1.5354), "1.54");
        assert_eq!(three_figures(10.0), "10.0");
        assert_eq!(three_figures(0.020_3), "0.0203");
        assert_eq!(three_figures(0.107_04), "0.107");
        assert_eq!(three_figures(0.000_107), "0.000107");
        assert_eq!(three_figures(0.0), "0");
    }

    /// The header written is the one recorded runs have (and older readers
    /// look columns up in).
    #[test]
    fn anomaly_columns_are_the_recorded_header() {
        let recorded = include_str!("../../tests/fixtures/qemu/nopnmi-migrate/anomalies.csv");
        assert_eq!(
            anomaly_columns().join(","),
            recorded.lines().next().unwrap()
        );
    }

    /// The judge leaves `cpu_before` empty when the CPU did not change:
    /// that reads as one CPU, not as a move from nowhere ("cpu  -> 1").
    #[test]
    fn an_anomaly_names_its_cpus_once() {
        let on = |cpu_before, cpu_after| {
            AnomalyRecord {
                cpu_before,
                cpu_after,
                ..AnomalyRecord::default()
            }
            .cpus()
        };
        assert_eq!(on(Some(3), 7), "cpu 3 -> 7");
        assert_eq!(on(None, 1), "cpu 1");
        assert_eq!(on(None, u32::MAX), "");
    }
}
