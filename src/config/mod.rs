/*!
What a run is asked to do, as data: `RunConfig` (one run, validated, as the
engine takes it and run.json records it) and `event` (what `--event` means
on this machine). `cli::validate` builds a `RunConfig` from the command line
and is the only place that checks one; the engine and the evidence only read
it. Nothing here makes a syscall.
*/

pub mod event;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::config::event::ResolvedEvent;
use crate::domain::{DriverRules, MigrateMode, RearmMode, SkidMeasure, SwitchWitness};
use crate::judge::JudgeConfig;

/// Bisect mode: how many overflows without a drop make a "good".
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Bisect {
    /// Dropped interrupts per overflow that a bad kernel shows.
    pub bad_rate: f64,
    /// Where the bad rate came from (--bad-rate, or the baseline run).
    pub bad_rate_source: String,
    pub confidence: f64,
    /// Overflows needed: zero drops in this many bound the rate below
    /// `bad_rate` at `confidence` (one-sided).
    pub overflows_needed: u64,
    /// Dropped interrupts per witnessed stop that the bad kernel showed
    /// (from a baseline that counted its stops).
    #[serde(default)]
    pub bad_rate_per_stop: Option<f64>,
    /// Witnessed stops needed: zero drops in this many bound the rate per
    /// stop below `bad_rate_per_stop` at `confidence`; without a per-stop
    /// rate, the stops every clean verdict needs.
    #[serde(default)]
    pub stops_needed: u64,
}

/// Everything a run needs, validated; recorded verbatim in the results and
/// read back from them. Fields newer than schema 1 read as their default
/// when absent (`runfile` sets a schema-1 interrupt skid to the skid, as it
/// was then).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunConfig {
    pub event: ResolvedEvent,
    pub period: u64,
    pub skid: u64,
    /// Where the skid came from: "--skid", the CPU table, or period/4.
    pub skid_source: String,
    /// How far past its overflow an interrupt (a sample's count) may land
    /// and still be on time: `--interrupt-skid` or `--skid` when given,
    /// else the larger of the CPU table's and the one measured before the
    /// run.
    #[serde(default)]
    pub interrupt_skid: u64,
    /// The interrupt skid measured on the event before the run, where it
    /// was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupt_skid_measured: Option<SkidMeasure>,
    /// Why it was not, where a hardware event's was to be measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupt_skid_not_measured: Option<String>,
    pub workers: usize,
    pub cpus: Vec<usize>,
    pub migrate: MigrateMode,
    pub migrate_interval_ns: u64,
    /// Migrator threads, each moving its share of the workers (runs
    /// recorded before had one).
    #[serde(default = "one_migrator")]
    pub migrators: usize,
    /// Move only workers that ran since their migrator last looked
    /// (`--move running`): a waiting worker's move stops nothing.
    #[serde(default)]
    pub move_running_only: bool,
    /// Seed of the random migration pattern, so it can be replayed.
    pub migrate_seed: u64,
    pub duration_ns: Option<u64>,
    pub interrupts_per_worker: Option<u64>,
    pub stop_after_anomalies: Option<u64>,
    /// Bisect mode: the plan, when asked for.
    #[serde(default)]
    pub bisect: Option<Bisect>,
    pub include_kernel: bool,
    /// The PMU interrupt is an ordinary IRQ (arm64 without pseudo-NMI): an
    /// overflow pending at a context switch is lost there, never taken
    /// before the stop.
    #[serde(default)]
    pub pmu_irq_maskable: bool,
    /// What the run asked for; each worker records what it got (schema 1
    /// had no witness).
    #[serde(default = "crate::domain::no_switch_witness")]
    pub switch_witness: SwitchWitness,
    /// `--max-count-rate`: events per second the event cannot exceed.
    #[serde(default)]
    pub max_count_rate: Option<u64>,
    /// `--driver-rules` (stock in runs recorded before).
    #[serde(default = "crate::domain::stock_driver_rules")]
    pub driver_rules: DriverRules,
    pub mode: RearmMode,
    pub inject_drop_every: Option<u64>,
    pub watchdog_ns: u64,
    /// Results directory (`--out`, or the default under results/, with a
    /// suffix if another run took that name first).
    pub out: PathBuf,
    /// Whether `out` came from `--out` (else it is a default name).
    #[serde(skip)]
    pub out_given: bool,
    pub raw: bool,
    /// `--replace`: an `--out` that holds a run may be overwritten.
    #[serde(default)]
    pub replace: bool,
    pub max_anomaly_lines: u64,
}

/// The stress a run makes unless told otherwise, by CPU count: chosen by
/// sweeps of the arm64 driver under QEMU (2 to 16 vCPUs, qemu/README.md
/// "Stress power"), as the settings that made the driver lose the most.
/// Two workers per CPU everywhere. On more than 2 CPUs one migrator per CPU
/// moving only running workers, back to back: a move of a waiting thread
/// stops nothing, and one migrator cannot keep up with more than a few
/// CPUs. On 2 CPUs one migrator moving any worker with a 50 us pause: there
/// a second migrator takes a CPU from the four workers, and the pause lets
/// a moved worker run (and count) before it is stopped again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StressDefaults {
    pub workers: usize,
    pub migrators: usize,
    pub move_which: crate::domain::MoveWhich,
    pub migrate_interval: std::time::Duration,
}

impl StressDefaults {
    pub fn for_cpus(cpus: usize) -> StressDefaults {
        use crate::domain::MoveWhich;
        let cpus = cpus.max(1);
        if cpus <= 2 {
            StressDefaults {
                workers: 2 * cpus,
                migrators: 1,
                move_which: MoveWhich::Any,
                migrate_interval: std::time::Duration::from_micros(50),
            }
        } else {
            StressDefaults {
                workers: 2 * cpus,
                migrators: cpus,
                move_which: MoveWhich::Running,
                migrate_interval: std::time::Duration::ZERO,
            }
        }
    }
}

fn one_migrator() -> usize {
    1
}

/// Taskset-style rendering of a run's CPU set (0-3,8).
pub fn format_cpus(cpus: &[usize]) -> String {
    let cpus: Vec<u32> = cpus.iter().map(|&c| c as u32).collect();
    crate::fingerprint::cpu::format_cpu_list(&cpus)
}

impl RunConfig {
    /// Takes the interrupt skid measured before the run (`measured`, or why
    /// it could not be): the judge's becomes the larger of it and the CPU
    /// table's, so a PMU that skids more than its table says is judged by
    /// what it does. A measure of a period of this run or more (a vCPU the
    /// host did not run, an emulator's timer) is kept as measured and
    /// judged as `period - 1`: the judge books an interrupt a period late
    /// or more by the driver's re-base whatever the skid, so below that
    /// every interrupt is on time.
    pub fn take_measured_interrupt_skid(&mut self, measured: Result<SkidMeasure, String>) {
        match measured {
            Ok(m) => {
                let on_time = m.max.min(self.period.saturating_sub(1));
                self.interrupt_skid = self.interrupt_skid.max(on_time);
                self.interrupt_skid_measured = Some(m);
            }
            Err(why) => self.interrupt_skid_not_measured = Some(why),
        }
    }

    /// The interrupt skid as the run's lines say it after the skid (shown
    /// where it differs from the skid or was measured): ", interrupt skid
    /// N" and, where it was measured, what the measure saw.
    pub fn interrupt_skid_words(&self) -> String {
        let n = self.interrupt_skid;
        match (
            &self.interrupt_skid_measured,
            &self.interrupt_skid_not_measured,
        ) {
            (Some(m), _) => {
                let missed = if m.missed > 0 {
                    format!(", {} without an interrupt", m.missed)
                } else {
                    String::new()
                };
                let capped = if m.max >= self.period {
                    ", a period of the run or more: on time up to a period"
                } else {
                    ""
                };
                format!(
                    ", interrupt skid {n} (measured before the run: {} overflows every {}, past due p50 {}, p99 {}, max {}{missed}{capped})",
                    m.overflows, m.period, m.p50, m.p99, m.max
                )
            }
            (None, Some(why)) => format!(", interrupt skid {n} (not measured: {why})"),
            (None, None) if n != self.skid => format!(", interrupt skid {n}"),
            (None, None) => String::new(),
        }
    }

    /// What the judge needs to know of this run (recorded in run.json, so
    /// `pmustress replay` judges its stream the same way).
    pub fn judge_config(&self) -> JudgeConfig {
        JudgeConfig {
            software: self.event.software,
            include_kernel: self.include_kernel,
            irq_masked_at_stops: self.pmu_irq_maskable && !self.event.software,
            inject_drop_every: self.inject_drop_every.unwrap_or(0),
            stops_unseen: self.switch_witness == crate::domain::SwitchWitness::None
                && !self.event.software,
            max_count_rate: self.max_count_rate.unwrap_or(0),
            driver_rules: self.driver_rules,
            stops_needed: crate::stats::trials_to_bound(
                crate::domain::MIN_EVIDENCE_RATE,
                crate::domain::CONFIDENCE,
            )
            .unwrap_or(u64::MAX),
            ..JudgeConfig::new(self.period, self.skid, self.interrupt_skid, self.mode)
        }
    }
}

#[cfg(test)]
mod stress_defaults_tests {
    use super::StressDefaults;
    use crate::domain::MoveWhich;
    use std::time::Duration;

    #[test]
    fn the_stress_defaults_follow_the_cpu_count() {
        let two = StressDefaults::for_cpus(2);
        assert_eq!(
            (
                two.workers,
                two.migrators,
                two.move_which,
                two.migrate_interval
            ),
            (4, 1, MoveWhich::Any, Duration::from_micros(50))
        );
        for cpus in [3, 4, 8, 16, 48] {
            let d = StressDefaults::for_cpus(cpus);
            assert_eq!(
                (d.workers, d.migrators, d.move_which, d.migrate_interval),
                (2 * cpus, cpus, MoveWhich::Running, Duration::ZERO),
                "{cpus} CPUs"
            );
        }
    }
}
