/*!
The event source: what `--event` names, and what we ask the kernel to count.

`branches` (the default) means the retired-branch event of the CPU under test,
chosen from `cpu::core_model`, because branch counts are what rr and friends
program in practice. Generic hardware and raw events are there for comparison,
and the two software clocks let the whole pipeline run on machines with no PMU
(CI, VMs): they exercise signals, ring, migrator and classifier, but they do
not test the PMU, and every output says so.

Resolution is pure: it takes the platform as data (CPU identities and core
PMUs, read by the fingerprint) and returns what to open or why we cannot test.
*/

use std::fmt;
use std::str::FromStr;

use perf_event_open_sys::bindings as sys;
use serde::{Deserialize, Serialize};

use crate::fingerprint::cpu::{self, BranchEvent, CpuId};
use crate::fingerprint::{ArchFamily, Fingerprint, Pmu, PseudoNmiVerdict};

/// What the user asked for with `--event`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventSpec {
    Branches,
    Instructions,
    Cycles,
    /// perf's `rHEX`: a raw encoding for the core PMU.
    Raw(u64),
    TaskClock,
    CpuClock,
}

pub const EVENT_FORMS: &str =
    "branches, instructions, cycles, rHEX (e.g. r21), task-clock or cpu-clock";

impl FromStr for EventSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<EventSpec, String> {
        Ok(match s {
            "branches" | "branch-instructions" => EventSpec::Branches,
            "instructions" => EventSpec::Instructions,
            "cycles" | "cpu-cycles" => EventSpec::Cycles,
            "task-clock" => EventSpec::TaskClock,
            "cpu-clock" => EventSpec::CpuClock,
            _ => {
                let hex = s.strip_prefix('r').filter(|h| {
                    !h.is_empty() && h.len() <= 16 && h.bytes().all(|b| b.is_ascii_hexdigit())
                });
                match hex.and_then(|h| u64::from_str_radix(h, 16).ok()) {
                    Some(v) => EventSpec::Raw(v),
                    None => return Err(format!("expected {EVENT_FORMS}, got {s:?}")),
                }
            }
        })
    }
}

impl fmt::Display for EventSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EventSpec::Branches => f.write_str("branches"),
            EventSpec::Instructions => f.write_str("instructions"),
            EventSpec::Cycles => f.write_str("cycles"),
            EventSpec::Raw(v) => write!(f, "r{v:x}"),
            EventSpec::TaskClock => f.write_str("task-clock"),
            EventSpec::CpuClock => f.write_str("cpu-clock"),
        }
    }
}

impl EventSpec {
    /// Software clocks count ns from an hrtimer: no PMU involved.
    pub fn is_software(&self) -> bool {
        matches!(self, EventSpec::TaskClock | EventSpec::CpuClock)
    }

    /// The period used when `--period` is not given: about 1 ms of work.
    pub fn default_period(&self) -> u64 {
        if self.is_software() {
            1_000_000
        } else {
            100_000
        }
    }
}

/// What event resolution needs to know about the machine.
#[derive(Debug, Clone, Default)]
pub struct Platform {
    /// `uname -m`.
    pub arch: String,
    /// Identity of each CPU by number.
    pub cpus: Vec<(u32, CpuId)>,
    pub core_pmus: Vec<Pmu>,
    /// The PMU overflow interrupt is an ordinary IRQ, masked with
    /// interrupts (arm64 without pseudo-NMI, as the fingerprint shows it).
    /// False where it is an NMI (x86, pseudo-NMI) or unknown.
    pub pmu_irq_maskable: bool,
}

impl Platform {
    /// The parts of the fingerprint that event resolution uses.
    pub fn from_fingerprint(fp: &Fingerprint) -> Platform {
        Platform {
            arch: fp
                .kernel
                .arch
                .value
                .clone()
                .unwrap_or_else(|| std::env::consts::ARCH.to_string()),
            cpus: fp.cpus().to_vec(),
            core_pmus: fp.pmus().iter().filter(|p| p.is_core).cloned().collect(),
            pmu_irq_maskable: matches!(
                fp.pseudo_nmi().verdict,
                PseudoNmiVerdict::Disabled | PseudoNmiVerdict::NotBuilt
            ),
        }
    }
}

/// What to open, and how to describe and judge it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedEvent {
    pub spec: EventSpec,
    /// perf_event_attr.type and .config.
    pub type_id: u32,
    pub config: u64,
    /// Human description of the encoding and where it came from.
    pub description: String,
    pub software: bool,
    /// The core model the skid came from (hardware events).
    pub core: Option<String>,
    /// Default skid for this event on this CPU, before `--skid`.
    pub default_skid: Option<u64>,
    /// Default interrupt skid (see `CoreModel::interrupt_skid`); schema 1
    /// had none.
    #[serde(default)]
    pub default_interrupt_skid: Option<u64>,
    pub skid_unbounded: bool,
    /// PMU name, for messages about what it offers.
    pub pmu: Option<String>,
}

impl ResolvedEvent {
    /// An event this machine cannot count, as a refused run records it:
    /// the spec as asked, no encoding.
    pub fn unresolved(spec: EventSpec) -> ResolvedEvent {
        ResolvedEvent {
            description: format!("{spec} (not available here)"),
            software: spec.is_software(),
            spec,
            type_id: u32::MAX,
            config: 0,
            core: None,
            default_skid: None,
            default_interrupt_skid: None,
            skid_unbounded: false,
            pmu: None,
        }
    }
}

/// Why this machine cannot run the requested event (exit 125).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CannotTest(pub String);

/// Label printed next to software results everywhere.
pub const SOFTWARE_CAVEAT: &str = "software event: does not test the PMU";

pub fn resolve(
    spec: EventSpec,
    platform: &Platform,
    run_cpus: &[usize],
) -> Result<ResolvedEvent, CannotTest> {
    if spec.is_software() {
        let config = match spec {
            EventSpec::TaskClock => sys::PERF_COUNT_SW_TASK_CLOCK,
            _ => sys::PERF_COUNT_SW_CPU_CLOCK,
        };
        return Ok(ResolvedEvent {
            spec,
            type_id: sys::PERF_TYPE_SOFTWARE,
            config: config as u64,
            description: format!("{spec} (software hrtimer, ns; {SOFTWARE_CAVEAT})"),
            software: true,
            core: None,
            default_skid: None,
            default_interrupt_skid: None,
            skid_unbounded: false,
            pmu: None,
        });
    }
    let pmu = core_pmu_for(platform, run_cpus, spec)?;
    let models: Vec<cpu::CoreModel> = {
        let mut ids: Vec<&CpuId> = platform
            .cpus
            .iter()
            .filter(|(n, _)| run_cpus.contains(&(*n as usize)))
            .map(|(_, id)| id)
            .collect();
        ids.dedup();
        let mut models: Vec<_> = ids.into_iter().map(cpu::core_model).collect();
        models.dedup();
        models
    };
    if models.len() > 1 {
        let names: Vec<&str> = models.iter().map(|m| m.name.as_str()).collect();
        return Err(CannotTest(format!(
            "--cpus spans different cores ({}): their PMUs count differently; pick CPUs of one cluster with --cpus",
            names.join(", ")
        )));
    }
    let model = models
        .into_iter()
        .next()
        .unwrap_or_else(|| cpu::core_model(&CpuId::Unknown));
    let arm = ArchFamily::from_uname(&platform.arch) == ArchFamily::Arm64;
    let (type_id, config, what) = match spec {
        EventSpec::Branches => match model.branch_event {
            BranchEvent::Raw(code) => {
                if arm && !pmu.events.is_empty() && !pmu.events.iter().any(|e| e == "br_retired") {
                    return Err(CannotTest(format!(
                        "the {} PMU does not implement BR_RETIRED (0x21), so --event branches cannot count here; it offers: {}. Try --event cycles or rHEX",
                        pmu.name,
                        pmu.events.join(", ")
                    )));
                }
                let type_id = if arm { pmu.type_id } else { sys::PERF_TYPE_RAW };
                (
                    type_id,
                    code,
                    format!("raw {code:#x} (retired branches of {})", model.name),
                )
            }
            BranchEvent::Generic => (
                sys::PERF_TYPE_HARDWARE,
                sys::PERF_COUNT_HW_BRANCH_INSTRUCTIONS as u64,
                "PERF_COUNT_HW_BRANCH_INSTRUCTIONS".to_string(),
            ),
        },
        EventSpec::Instructions => (
            sys::PERF_TYPE_HARDWARE,
            sys::PERF_COUNT_HW_INSTRUCTIONS as u64,
            "PERF_COUNT_HW_INSTRUCTIONS".to_string(),
        ),
        EventSpec::Cycles => (
            sys::PERF_TYPE_HARDWARE,
            sys::PERF_COUNT_HW_CPU_CYCLES as u64,
            "PERF_COUNT_HW_CPU_CYCLES".to_string(),
        ),
        EventSpec::Raw(code) => {
            let type_id = if arm { pmu.type_id } else { sys::PERF_TYPE_RAW };
            (type_id, code, format!("raw {code:#x}"))
        }
        EventSpec::TaskClock | EventSpec::CpuClock => unreachable!("handled above"),
    };
    Ok(ResolvedEvent {
        spec,
        type_id,
        config,
        description: format!("{spec}: {what} on PMU {} (type {type_id})", pmu.name),
        software: false,
        core: Some(model.name.clone()),
        default_skid: Some(model.skid),
        default_interrupt_skid: Some(model.interrupt_skid),
        skid_unbounded: model.skid_unbounded,
        pmu: Some(pmu.name.clone()),
    })
}

/// The core PMU that covers every CPU of the run.
fn core_pmu_for<'a>(
    platform: &'a Platform,
    run_cpus: &[usize],
    spec: EventSpec,
) -> Result<&'a Pmu, CannotTest> {
    if platform.core_pmus.is_empty() {
        return Err(CannotTest(format!(
            "--event {spec} needs a hardware PMU, and this machine has none (no cpu or armv8 PMU under /sys/bus/event_source/devices; a VM without PMU passthrough?). Run --event task-clock to exercise the pipeline without a PMU"
        )));
    }
    platform
        .core_pmus
        .iter()
        .find(|p| match &p.cpus {
            None => true,
            Some(cpus) => run_cpus.iter().all(|c| cpus.contains(&(*c as u32))),
        })
        .ok_or_else(|| {
            let list: Vec<String> = platform
                .core_pmus
                .iter()
                .map(|p| format!("{} covers {:?}", p.name, p.cpus.clone().unwrap_or_default()))
                .collect();
            CannotTest(format!(
                "no single core PMU covers all of --cpus {run_cpus:?} ({}); pick CPUs of one cluster",
                list.join("; ")
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn core_pmu(name: &str, type_id: u32, cpus: Option<Vec<u32>>, events: &[&str]) -> Pmu {
        Pmu {
            name: name.into(),
            type_id,
            cpus,
            events: events.iter().map(|s| s.to_string()).collect(),
            is_core: true,
            caps: Default::default(),
            counters: None,
        }
    }

    fn arm_platform(events: &[&str]) -> Platform {
        Platform {
            arch: "aarch64".into(),
            cpus: vec![
                (0, CpuId::Arm { midr: 0x413fd0c1 }),
                (1, CpuId::Arm { midr: 0x413fd0c1 }),
            ],
            core_pmus: vec![core_pmu("armv8_pmuv3_0", 8, Some(vec![0, 1]), events)],
            pmu_irq_maskable: true,
        }
    }

    #[test]
    fn parses_every_form_and_rejects_junk() {
        assert_eq!("branches".parse(), Ok(EventSpec::Branches));
        assert_eq!("r5111c4".parse(), Ok(EventSpec::Raw(0x5111c4)));
        assert_eq!("task-clock".parse(), Ok(EventSpec::TaskClock));
        for bad in [
            "",
            "r",
            "rxyz",
            "r11111111111111111",
            "branch",
            "R21",
            "r-1",
        ] {
            let err = bad.parse::<EventSpec>().unwrap_err();
            assert!(err.contains("task-clock"), "{err}");
        }
        assert_eq!(EventSpec::Raw(0x21).to_string(), "r21");
    }

    #[test]
    fn arm_branches_is_raw_br_retired_on_the_core_pmu() {
        let ev = resolve(
            EventSpec::Branches,
            &arm_platform(&["br_retired", "cpu_cycles"]),
            &[0, 1],
        )
        .unwrap();
        assert_eq!((ev.type_id, ev.config), (8, 0x21));
        assert_eq!(ev.default_skid, Some(1000));
        assert_eq!(ev.core.as_deref(), Some("Neoverse-N1"));
    }

    #[test]
    fn arm_pmu_without_br_retired_lists_what_it_offers() {
        let err = resolve(
            EventSpec::Branches,
            &arm_platform(&["cpu_cycles", "stall_frontend"]),
            &[0],
        )
        .unwrap_err();
        assert!(err.0.contains("cpu_cycles, stall_frontend"), "{err}");
        // Cycles still resolve there.
        let ev = resolve(EventSpec::Cycles, &arm_platform(&["cpu_cycles"]), &[0]).unwrap();
        assert_eq!(ev.type_id, sys::PERF_TYPE_HARDWARE);
    }

    #[test]
    fn no_pmu_means_cannot_test_and_suggests_task_clock() {
        let p = Platform {
            arch: "x86_64".into(),
            ..Platform::default()
        };
        let err = resolve(EventSpec::Branches, &p, &[0]).unwrap_err();
        assert!(err.0.contains("--event task-clock"));
        assert!(resolve(EventSpec::TaskClock, &p, &[0]).unwrap().software);
    }

    #[test]
    fn intel_branches_use_the_raw_type() {
        let p = Platform {
            arch: "x86_64".into(),
            cpus: vec![(
                0,
                CpuId::X86 {
                    vendor: cpu::X86Vendor::Intel,
                    family: 6,
                    model: 0x55,
                    model_name: "Xeon".into(),
                },
            )],
            core_pmus: vec![core_pmu("cpu", 4, None, &[])],
            pmu_irq_maskable: false,
        };
        let ev = resolve(EventSpec::Branches, &p, &[0]).unwrap();
        assert_eq!(
            (ev.type_id, ev.config, ev.default_skid),
            (4, 0x5101c4, Some(100))
        );
    }

    #[test]
    fn heterogeneous_cpus_are_refused() {
        let mut p = arm_platform(&[]);
        p.cpus[1].1 = CpuId::Arm { midr: 0x414fd0b1 };
        let err = resolve(EventSpec::Branches, &p, &[0, 1]).unwrap_err();
        assert!(
            err.0.contains("Neoverse-N1") && err.0.contains("Cortex-A76"),
            "{err}"
        );
        p.core_pmus[0].cpus = Some(vec![0]);
        assert!(
            resolve(EventSpec::Cycles, &p, &[1])
                .unwrap_err()
                .0
                .contains("no single core PMU")
        );
    }
}
