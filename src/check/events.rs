//! The `pmu` probe: is there a hardware PMU, and which of the events the
//! uses need does it open (rr's ticks event for this core, cycles,
//! instructions)? An event the kernel refuses to open is missing; one it
//! opens may still read 0, which `counts` finds.

use std::io;

use super::outcome::{Finding, Use};
use super::rr_core::RrCore;
use crate::engine::kernel::probe::{ProbeEvent, ProbeKernel};
use crate::fingerprint::Fingerprint;

/// What opened.
#[derive(Debug, Clone)]
pub(super) struct Found {
    pub ticks: Option<ProbeEvent>,
    pub cycles: bool,
    pub instructions: bool,
    pub finding: Finding,
}

impl Found {
    /// Whether anything on the PMU could be measured.
    pub(super) fn tested(&self) -> bool {
        self.cycles || self.instructions || self.ticks.is_some()
    }
}

/// Why an open failed, in a user's words.
enum Refusal {
    /// The PMU has no such event, or there is no PMU.
    Missing,
    /// Not allowed (perf_event_paranoid, a seccomp filter, a container).
    Denied(io::Error),
    Other(io::Error),
}

fn try_open<P: ProbeKernel>(pmu: &P, event: ProbeEvent) -> Result<(), Refusal> {
    match pmu.open_counter(event, false) {
        Ok(_) => Ok(()),
        Err(e) => Err(match e.raw_os_error() {
            Some(libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV | libc::EINVAL) => Refusal::Missing,
            Some(libc::EACCES | libc::EPERM) => Refusal::Denied(e),
            _ => Refusal::Other(e),
        }),
    }
}

const EXPECT: &str = "cycles and instructions open, and rr's ticks event for this core (rr's per-core table; rr refuses a core it has no row for)";

pub(super) fn probe<P: ProbeKernel>(pmu: &P, rr: &RrCore, fingerprint: &Fingerprint) -> Found {
    let cycles = try_open(pmu, ProbeEvent::CYCLES);
    let instructions = try_open(pmu, ProbeEvent::INSTRUCTIONS);
    let ticks = rr
        .ticks
        .map(|c| (ProbeEvent::raw(c), try_open(pmu, ProbeEvent::raw(c))));
    let opened = |r: &Result<(), Refusal>| r.is_ok();
    let mut found = Found {
        ticks: ticks
            .as_ref()
            .filter(|(_, r)| opened(r))
            .map(|(event, _)| *event),
        cycles: opened(&cycles),
        instructions: opened(&instructions),
        finding: Finding::pass("pmu", String::new(), EXPECT),
    };
    let paranoid = fingerprint.knobs.perf_event_paranoid.value;
    if !found.tested() {
        let denied = [&cycles, &instructions].into_iter().find_map(|r| match r {
            Err(Refusal::Denied(e)) => Some(e.to_string()),
            _ => None,
        });
        let other = [&cycles, &instructions].into_iter().find_map(|r| match r {
            Err(Refusal::Other(e)) => Some(e.to_string()),
            _ => None,
        });
        found.finding = match (denied, other) {
            (Some(e), _) => Finding::skip(
                "pmu",
                format!(
                    "no permission to open hardware events ({e}; perf_event_paranoid {})",
                    paranoid.map_or("unknown".into(), |p| p.to_string())
                ),
                Some("sudo sysctl kernel.perf_event_paranoid=2, or run with CAP_PERFMON".into()),
            ),
            (None, Some(e)) => Finding::skip("pmu", format!("cannot open hardware events: {e}"), None),
            (None, None) => Finding::skip(
                "pmu",
                format!(
                    "no hardware PMU here: cycles and instructions do not open (event sources: {})",
                    pmu_names(fingerprint)
                ),
                Some("`pmustress run --event task-clock --duration 10s` tests the pipeline on a software clock (not the PMU)".into()),
            ),
        };
        return found;
    }
    let name = |ok: bool| if ok { "opens" } else { "missing" };
    let ticks_text = match (rr.ticks, &found.ticks) {
        (None, _) => "no ticks event for this core".to_string(),
        (Some(c), Some(_)) => format!("ticks r{c:x} opens"),
        (Some(c), None) => format!("ticks r{c:x} missing"),
    };
    let table = if rr.in_rr_table {
        ""
    } else {
        " (rr has no row for this core)"
    };
    let evidence = format!(
        "{}{table}: cycles {}, instructions {}, {ticks_text}",
        rr.name,
        name(found.cycles),
        name(found.instructions)
    );
    let mut uses = Vec::new();
    if found.ticks.is_none() || !rr.in_rr_table {
        uses.push(Use::Rr);
    }
    if !found.cycles && !found.instructions {
        uses.push(Use::Profiler);
    }
    found.finding = if uses.is_empty() {
        Finding::pass("pmu", evidence, EXPECT)
    } else {
        let remedy = if !rr.in_rr_table {
            "rr cannot record on this core; a core in rr's table (or a newer rr) is needed"
        } else {
            "the PMU exposes only a basic event set (a smaller instance size, a virtual PMU): a larger size or bare metal"
        };
        Finding::fail("pmu", &uses, evidence, EXPECT).remedy(remedy)
    };
    found
}

/// The event sources sysfs lists, by name.
fn pmu_names(fingerprint: &Fingerprint) -> String {
    let names: Vec<&str> = fingerprint
        .pmus
        .devices
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}
