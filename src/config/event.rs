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

/// What the user asked for with `--event`, in perf's syntax.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventSpec {
    Branches,
    Instructions,
    Cycles,
    /// perf's `rHEX` or `r0xHEX`: a raw encoding for the core PMU.
    Raw(u64),
    TaskClock,
    CpuClock,
    /// One of perf's other generic hardware events (`branch-misses`,
    /// `ref-cycles`...).
    Generic(GenericEvent),
    /// perf's `pmu/terms/` (`cpu/event=0xc4,umask=0x1/`,
    /// `armv8_pmuv3/br_retired/`): an event of a named PMU, resolved
    /// through its sysfs `events/` and `format/`.
    Pmu {
        pmu: String,
        terms: String,
    },
}

/// perf's generic hardware events beyond the three pmustress names itself
/// (`PERF_TYPE_HARDWARE`, `include/uapi/linux/perf_event.h`'s order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GenericEvent {
    CacheReferences,
    CacheMisses,
    BranchMisses,
    BusCycles,
    StalledCyclesFrontend,
    StalledCyclesBackend,
    RefCycles,
}

impl GenericEvent {
    /// perf's name, its aliases, and the config it opens.
    const TABLE: [(GenericEvent, &'static str, &'static str, u32); 7] = [
        (
            GenericEvent::CacheReferences,
            "cache-references",
            "",
            sys::PERF_COUNT_HW_CACHE_REFERENCES,
        ),
        (
            GenericEvent::CacheMisses,
            "cache-misses",
            "",
            sys::PERF_COUNT_HW_CACHE_MISSES,
        ),
        (
            GenericEvent::BranchMisses,
            "branch-misses",
            "",
            sys::PERF_COUNT_HW_BRANCH_MISSES,
        ),
        (
            GenericEvent::BusCycles,
            "bus-cycles",
            "",
            sys::PERF_COUNT_HW_BUS_CYCLES,
        ),
        (
            GenericEvent::StalledCyclesFrontend,
            "stalled-cycles-frontend",
            "idle-cycles-frontend",
            sys::PERF_COUNT_HW_STALLED_CYCLES_FRONTEND,
        ),
        (
            GenericEvent::StalledCyclesBackend,
            "stalled-cycles-backend",
            "idle-cycles-backend",
            sys::PERF_COUNT_HW_STALLED_CYCLES_BACKEND,
        ),
        (
            GenericEvent::RefCycles,
            "ref-cycles",
            "",
            sys::PERF_COUNT_HW_REF_CPU_CYCLES,
        ),
    ];

    fn named(name: &str) -> Option<GenericEvent> {
        Self::TABLE
            .iter()
            .find(|(_, n, alias, _)| name == *n || (!alias.is_empty() && name == *alias))
            .map(|row| row.0)
    }

    fn name(self) -> &'static str {
        Self::TABLE
            .iter()
            .find(|row| row.0 == self)
            .map_or("", |row| row.1)
    }

    fn config(self) -> u64 {
        Self::TABLE
            .iter()
            .find(|row| row.0 == self)
            .map_or(0, |row| row.3 as u64)
    }
}

pub const EVENT_FORMS: &str = "branches, instructions, cycles, another perf hardware name (e.g. branch-misses), rHEX (e.g. r21), PMU/TERMS/ (e.g. cpu/event=0xc4/), task-clock or cpu-clock, with perf's :u or :uk";

/// perf's event modifiers that pmustress takes: which privilege levels
/// are counted. Unlike perf, pmustress counts user mode only unless told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountedModes {
    /// `:u`, pmustress's default.
    User,
    /// `:uk` (or `:ku`): as `--include-kernel`.
    UserAndKernel,
}

/// `--event` as typed: the event, and its modifier if one was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventArg {
    pub spec: EventSpec,
    pub modes: Option<CountedModes>,
}

impl FromStr for EventArg {
    type Err = String;

    fn from_str(s: &str) -> Result<EventArg, String> {
        // perf puts modifiers after a colon, or right after a PMU form's
        // closing slash (`cpu/branches/u`).
        let (event, modifier) = match (s.find('/'), s.rfind('/')) {
            (Some(open), Some(close)) if close > open && close + 1 < s.len() => {
                let rest = &s[close + 1..];
                (&s[..=close], Some(rest.strip_prefix(':').unwrap_or(rest)))
            }
            (Some(_), _) => (s, None),
            (None, _) => match s.split_once(':') {
                Some((event, m)) => (event, Some(m)),
                None => (s, None),
            },
        };
        let modes = match modifier {
            None => None,
            Some("u") => Some(CountedModes::User),
            Some("uk" | "ku") => Some(CountedModes::UserAndKernel),
            Some("k") => {
                return Err(format!(
                    "{s:?} counts kernel mode only, and the workers overflow on their own user-mode loop: expected :u (user mode, the default) or :uk (user and kernel, as --include-kernel)"
                ));
            }
            Some(m) => {
                return Err(format!(
                    "modifier :{m} in {s:?} is not one pmustress takes: expected :u (user mode, the default) or :uk (user and kernel, as --include-kernel)"
                ));
            }
        };
        Ok(EventArg {
            spec: event.parse()?,
            modes,
        })
    }
}

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
                if let Some(g) = GenericEvent::named(s) {
                    return Ok(EventSpec::Generic(g));
                }
                if let Some(pmu_form) = pmu_form(s) {
                    return pmu_form;
                }
                let hex = s
                    .strip_prefix('r')
                    .map(|h| h.strip_prefix("0x").unwrap_or(h))
                    .filter(|h| {
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

/// `pmu/terms/`: None where `s` is not of that shape; an error where it is
/// but its terms cannot be read.
fn pmu_form(s: &str) -> Option<Result<EventSpec, String>> {
    let inner = s.strip_suffix('/')?;
    let (pmu, terms) = inner.split_once('/')?;
    let valid_name = |n: &str| {
        !n.is_empty()
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
    };
    if !valid_name(pmu) {
        return Some(Err(format!(
            "PMU name {pmu:?} in {s:?}: expected PMU/TERMS/ as perf writes it, e.g. cpu/event=0xc4/"
        )));
    }
    for term in terms.split(',') {
        let (key, value) = term.split_once('=').unwrap_or((term, "1"));
        if !valid_name(key) || parse_term_value(value).is_none() {
            return Some(Err(format!(
                "term {term:?} in {s:?}: expected NAME or NAME=VALUE (decimal or 0x hex), comma-separated, e.g. cpu/event=0xc4,umask=0x1/"
            )));
        }
    }
    Some(Ok(EventSpec::Pmu {
        pmu: pmu.to_string(),
        terms: terms.to_string(),
    }))
}

fn parse_term_value(v: &str) -> Option<u64> {
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
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
            EventSpec::Generic(g) => f.write_str(g.name()),
            EventSpec::Pmu { pmu, terms } => write!(f, "{pmu}/{terms}/"),
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
            description: format!("{spec} (software hrtimer, ns; {SOFTWARE_CAVEAT})"),
            spec,
            type_id: sys::PERF_TYPE_SOFTWARE,
            config: config as u64,
            software: true,
            core: None,
            default_skid: None,
            default_interrupt_skid: None,
            skid_unbounded: false,
            pmu: None,
        });
    }
    let pmu = core_pmu_for(platform, run_cpus, &spec)?;
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
    let (type_id, config, what) = match &spec {
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
            (type_id, *code, format!("raw {code:#x}"))
        }
        EventSpec::Generic(g) => (
            sys::PERF_TYPE_HARDWARE,
            g.config(),
            format!("perf's generic hardware event {}", g.name()),
        ),
        EventSpec::Pmu { terms, .. } => match encode_terms(pmu, terms)? {
            Encoded::Config(config) => (pmu.type_id, config, format!("config {config:#x}")),
            Encoded::Hardware(config, name) => (
                sys::PERF_TYPE_HARDWARE,
                config,
                format!("perf's generic hardware event {name}"),
            ),
        },
        EventSpec::TaskClock | EventSpec::CpuClock => unreachable!("handled above"),
    };
    Ok(ResolvedEvent {
        description: format!("{spec}: {what} on PMU {} (type {type_id})", pmu.name),
        spec,
        type_id,
        config,
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
    spec: &EventSpec,
) -> Result<&'a Pmu, CannotTest> {
    if platform.core_pmus.is_empty() {
        return Err(CannotTest(format!(
            "--event {spec} needs a hardware PMU, and this machine has none (no cpu or armv8 PMU under /sys/bus/event_source/devices; a VM without PMU passthrough?). Run --event task-clock to exercise the pipeline without a PMU"
        )));
    }
    // perf's PMU names match a PMU of that name or with a numeric suffix
    // (`armv8_pmuv3` is `armv8_pmuv3_0`).
    let named = |p: &Pmu| match spec {
        EventSpec::Pmu { pmu, .. } => {
            p.name == *pmu
                || p.name
                    .strip_prefix(pmu.as_str())
                    .and_then(|r| r.strip_prefix('_'))
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        }
        _ => true,
    };
    if !platform.core_pmus.iter().any(named) {
        let names: Vec<&str> = platform.core_pmus.iter().map(|p| p.name.as_str()).collect();
        return Err(CannotTest(format!(
            "--event {spec}: no core PMU of that name here (core PMUs: {}); pmustress samples a core PMU's event",
            names.join(", ")
        )));
    }
    platform
        .core_pmus
        .iter()
        .filter(|p| named(p))
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

/// What perf's `pmu/terms/` opens.
#[derive(Debug, PartialEq, Eq)]
enum Encoded {
    /// The PMU's own type, with this config.
    Config(u64),
    /// A generic hardware event (`cpu/cycles/`): its config and perf's name.
    Hardware(u64, &'static str),
}

/// `terms` as perf encodes them on `pmu`: each term a `format/` field
/// (`event=0xc4`, a bare field is 1), `config=`, or an event `events/`
/// names (whose own terms are applied); a perf hardware name alone
/// (`cpu/cycles/`) is that generic event.
fn encode_terms(pmu: &Pmu, terms: &str) -> Result<Encoded, CannotTest> {
    let mut config = 0u64;
    let all: Vec<&str> = terms.split(',').collect();
    if let [only] = all[..]
        && !pmu.event_terms.contains_key(only)
        && let Ok(spec) = only.parse::<EventSpec>()
    {
        let hardware = match spec {
            EventSpec::Cycles => Some((sys::PERF_COUNT_HW_CPU_CYCLES, "cycles")),
            EventSpec::Instructions => Some((sys::PERF_COUNT_HW_INSTRUCTIONS, "instructions")),
            EventSpec::Branches => Some((sys::PERF_COUNT_HW_BRANCH_INSTRUCTIONS, "branches")),
            EventSpec::Generic(g) => Some((g.config() as u32, g.name())),
            _ => None,
        };
        if let Some((config, name)) = hardware {
            return Ok(Encoded::Hardware(config as u64, name));
        }
    }
    for term in all {
        let (key, value) = term.split_once('=').unwrap_or((term, "1"));
        let value = parse_term_value(value).unwrap_or(0);
        if let (Some(alias), false) = (pmu.event_terms.get(key), term.contains('=')) {
            // An event sysfs names: its own terms, which are format fields.
            for inner in alias.split(',').map(str::trim) {
                let (k, v) = inner.split_once('=').unwrap_or((inner, "1"));
                let v = parse_term_value(v).ok_or_else(|| {
                    CannotTest(format!(
                        "{}/events/{key} reads {alias:?}: cannot encode it",
                        pmu.name
                    ))
                })?;
                set_field(pmu, &mut config, k, v)?;
            }
        } else {
            set_field(pmu, &mut config, key, value)?;
        }
    }
    Ok(Encoded::Config(config))
}

/// Puts `value` into the bits `format/key` names (`config:0-7,32-35`: the
/// value's low bits first), or the whole config for `config=`.
fn set_field(pmu: &Pmu, config: &mut u64, key: &str, value: u64) -> Result<(), CannotTest> {
    let spec = match key {
        "config" => "config:0-63",
        _ => pmu.formats.get(key).map(String::as_str).ok_or_else(|| {
            let fields: Vec<&str> = pmu.formats.keys().map(String::as_str).collect();
            CannotTest(format!(
                "the {} PMU has no format field or event named {key:?} (fields: {}; events: {})",
                pmu.name,
                fields.join(", "),
                pmu.events.join(", ")
            ))
        })?,
    };
    let (register, ranges) = spec.split_once(':').unwrap_or((spec, ""));
    if register != "config" {
        if value == 0 {
            return Ok(());
        }
        return Err(CannotTest(format!(
            "{key} is a field of {register} ({}/format/{key}: {spec}); pmustress opens config only",
            pmu.name
        )));
    }
    let mut rest = value;
    for range in ranges.split(',') {
        let (lo, hi) = range.split_once('-').unwrap_or((range, range));
        let (Ok(lo), Ok(hi)) = (lo.trim().parse::<u32>(), hi.trim().parse::<u32>()) else {
            return Err(CannotTest(format!(
                "{}/format/{key} reads {spec:?}: cannot encode it",
                pmu.name
            )));
        };
        if lo > hi || hi > 63 {
            return Err(CannotTest(format!(
                "{}/format/{key} reads {spec:?}: cannot encode it",
                pmu.name
            )));
        }
        let width = hi - lo + 1;
        let mask = if width == 64 {
            u64::MAX
        } else {
            (1u64 << width) - 1
        };
        *config |= (rest & mask) << lo;
        rest = if width == 64 { 0 } else { rest >> width };
    }
    if rest != 0 {
        return Err(CannotTest(format!(
            "{key}={value:#x} does not fit {}/format/{key} ({spec})",
            pmu.name
        )));
    }
    Ok(())
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
            event_terms: Default::default(),
            formats: Default::default(),
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

    /// The x86 `cpu` PMU's sysfs files as an Intel kernel writes them.
    fn intel_cpu_pmu() -> Pmu {
        let mut pmu = core_pmu(
            "cpu",
            4,
            None,
            &[
                "branch-instructions",
                "cpu-cycles",
                "ref-cycles",
                "mem-loads",
            ],
        );
        pmu.event_terms = [
            ("branch-instructions", "event=0xc4"),
            ("cpu-cycles", "event=0x3c"),
            ("ref-cycles", "event=0x00,umask=0x03"),
            ("mem-loads", "event=0xcd,umask=0x1,ldlat=3"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into();
        pmu.formats = [
            ("event", "config:0-7"),
            ("umask", "config:8-15"),
            ("edge", "config:18"),
            ("inv", "config:23"),
            ("cmask", "config:24-31"),
            ("in_tx_cp", "config:33"),
            ("ldlat", "config1:0-15"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into();
        pmu
    }

    fn intel_platform() -> Platform {
        Platform {
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
            core_pmus: vec![intel_cpu_pmu()],
            pmu_irq_maskable: false,
        }
    }

    #[test]
    fn perf_spellings_parse_with_their_modifiers() {
        let arg = |s: &str| s.parse::<EventArg>();
        assert_eq!(
            arg("instructions:u").unwrap().modes,
            Some(CountedModes::User)
        );
        assert_eq!(
            arg("cycles:uk").unwrap().modes,
            Some(CountedModes::UserAndKernel)
        );
        assert_eq!(arg("cycles").unwrap().modes, None);
        assert_eq!(arg("r0x21").unwrap().spec, EventSpec::Raw(0x21));
        assert_eq!(
            arg("branch-misses").unwrap().spec,
            EventSpec::Generic(GenericEvent::BranchMisses)
        );
        assert_eq!(
            arg("ref-cycles").unwrap().spec,
            EventSpec::Generic(GenericEvent::RefCycles)
        );
        let pmu = arg("cpu/event=0xc4,umask=0x1/u").unwrap();
        assert_eq!(
            (pmu.spec.clone(), pmu.modes),
            (
                EventSpec::Pmu {
                    pmu: "cpu".into(),
                    terms: "event=0xc4,umask=0x1".into()
                },
                Some(CountedModes::User)
            )
        );
        assert_eq!(
            arg("armv8_pmuv3/br_retired/:uk").unwrap().modes,
            Some(CountedModes::UserAndKernel)
        );
        for (bad, says) in [
            ("instructions:k", "kernel mode only"),
            ("instructions:pp", "modifier :pp"),
            ("cpu//", "term \"\""),
            ("cpu/event=zz/", "term \"event=zz\""),
            ("/event=1/", "PMU name"),
        ] {
            let err = arg(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
        // Every spelling prints as one that parses back to it.
        for s in [
            "cpu/event=0xc4,umask=0x1/",
            "branch-misses",
            "idle-cycles-frontend",
            "r0x1c4",
        ] {
            let spec = s.parse::<EventSpec>().unwrap();
            assert_eq!(spec.to_string().parse::<EventSpec>(), Ok(spec), "{s}");
        }
    }

    #[test]
    fn a_pmu_event_is_encoded_through_sysfs_format_and_events() {
        let p = intel_platform();
        let open = |s: &str| {
            let ev = resolve(s.parse().unwrap(), &p, &[0])?;
            Ok::<_, CannotTest>((ev.type_id, ev.config))
        };
        assert_eq!(open("cpu/event=0xc4,umask=0x1/").unwrap(), (4, 0x1c4));
        assert_eq!(
            open("cpu/event=0xc4,umask=0x1,edge,cmask=2/").unwrap(),
            (4, 0x0204_01c4)
        );
        assert_eq!(open("cpu/ref-cycles/").unwrap(), (4, 0x300));
        assert_eq!(open("cpu/config=0x5101c4/").unwrap(), (4, 0x5101c4));
        assert_eq!(
            open("cpu/in_tx_cp=1,event=0xc4/").unwrap(),
            (4, (1 << 33) | 0xc4)
        );
        // A perf hardware name inside a PMU form is that generic event.
        assert_eq!(
            open("cpu/branches/").unwrap(),
            (
                sys::PERF_TYPE_HARDWARE,
                sys::PERF_COUNT_HW_BRANCH_INSTRUCTIONS as u64
            )
        );
        assert_eq!(
            open("ref-cycles").unwrap(),
            (
                sys::PERF_TYPE_HARDWARE,
                sys::PERF_COUNT_HW_REF_CPU_CYCLES as u64
            )
        );
        for (bad, says) in [
            (
                "cpu/event=0x1c4/",
                "does not fit cpu/format/event (config:0-7)",
            ),
            ("cpu/mem-loads/", "ldlat is a field of config1"),
            ("cpu/nosuch=1/", "no format field or event named \"nosuch\""),
            (
                "armv8_pmuv3/br_retired/",
                "no core PMU of that name here (core PMUs: cpu)",
            ),
        ] {
            let err = open(bad).unwrap_err();
            assert!(err.0.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn an_arm_pmu_name_matches_its_numbered_pmu() {
        let mut p = arm_platform(&["br_retired", "cpu_cycles"]);
        p.core_pmus[0].event_terms = [
            ("br_retired", "event=0x0021"),
            ("cpu_cycles", "event=0x0011"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into();
        p.core_pmus[0].formats = [
            ("event".to_string(), "config:0-15".to_string()),
            ("long".to_string(), "config1:0".to_string()),
        ]
        .into();
        let ev = resolve("armv8_pmuv3/br_retired/".parse().unwrap(), &p, &[0, 1]).unwrap();
        assert_eq!(
            (ev.type_id, ev.config, ev.default_skid),
            (8, 0x21, Some(1000))
        );
        let ev = resolve("armv8_pmuv3_0/event=0x11/".parse().unwrap(), &p, &[0]).unwrap();
        assert_eq!((ev.type_id, ev.config), (8, 0x11));
        // armv8_pmuv3 must not match a PMU that merely starts alike.
        p.core_pmus[0].name = "armv8_pmuv3x".into();
        assert!(resolve("armv8_pmuv3/br_retired/".parse().unwrap(), &p, &[0]).is_err());
        // No PMU at all: cannot test here (125), not a usage error.
        let none = Platform {
            arch: "aarch64".into(),
            ..Platform::default()
        };
        let err = resolve("armv8_pmuv3/br_retired/".parse().unwrap(), &none, &[0]).unwrap_err();
        assert!(err.0.contains("needs a hardware PMU"), "{err}");
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
