/*!
`pmustress check`: can rr and a sampling profiler trust this machine's PMU?

A battery of probes, each a small measurement with a known answer, run on
the calling thread through `engine::kernel::probe::ProbeKernel`:

- `pmu` (`events`): a hardware PMU, and the events the uses need: rr's
  ticks event for this core (`rr_core`), cycles, instructions;
- `counts`, `counters`, `determinism` (`counting`): the known loop counts
  what it retires, how many counters count at once, and whether the same
  loop counts the same every time;
- `ioc_period`, `skid`, `pmi_overcount` (`overflow`): a period change
  takes effect at once, every overflow's interrupt comes within the skid
  the use allows, and the interrupt adds nothing to the count;
- `in_txcp`, `freeze_on_smi`, `speclockmap` (`quirks`): the x86 faults rr
  checks for, where they apply;
- `pseudo_nmi`, `knobs`, `instance`, `lost_overflow` (`machine`): the
  fingerprint judged, and the lost-overflow stress (a `run` the command
  line starts, judged here).

Each finding says which use its FAIL makes unfit (`outcome`); a probe
that cannot measure says SKIP and why, never FAIL. When no hardware event
opens at all (no PMU, no permission), nothing is measured and both uses
are untested.
*/

mod counting;
pub mod document;
mod events;
mod machine;
pub mod outcome;
mod overflow;
mod quirks;
mod rr_core;

use serde::Serialize;

use crate::domain::SkidMeasure;
use crate::engine::kernel::probe::{ProbeEvent, ProbeKernel};
use crate::fingerprint::Fingerprint;
pub use machine::{StressOutcome, lost_overflow};
use outcome::{Finding, Fitness, Use};

/// The battery's findings and what they make of each use.
#[derive(Debug, Clone, Serialize)]
pub struct Battery {
    /// The core the probes ran on, and the event the sampling probes
    /// sampled (rr's ticks where they count, else cycles).
    pub core: String,
    pub counted: Option<String>,
    /// False when no hardware event could be opened at all.
    pub tested: bool,
    pub findings: Vec<Finding>,
}

impl Battery {
    /// Every probe that measures the PMU, then the fingerprint's.
    pub fn measure<P: ProbeKernel>(pmu: &P, fingerprint: &Fingerprint) -> Battery {
        let id = fingerprint
            .cpus
            .clusters
            .first()
            .map(|c| c.id.clone())
            .unwrap_or(crate::fingerprint::cpu::CpuId::Unknown);
        let rr = rr_core::rr_core(&id);
        let found = events::probe(pmu, &rr, fingerprint);
        let mut findings = vec![found.finding.clone()];
        let mut counted = None;
        if found.tested() {
            let counts = counting::counts(pmu, &found);
            findings.push(counts.finding);
            findings.push(counting::counters(pmu, &found, fingerprint));
            counted = counts.timing.as_ref().map(|s| s.name.clone());
            let skipped =
                |probe| Finding::skip(probe, "no event counted the loop (see counts)".into(), None);
            let tolerance = match &counts.exact {
                Some(exact) => {
                    let (finding, tolerance) = counting::determinism(pmu, exact);
                    findings.push(finding);
                    tolerance
                }
                None => {
                    findings.push(skipped("determinism"));
                    None
                }
            };
            // The overcount first: on the event the skid is measured on,
            // what each interrupt adds is not skid.
            let (overcount, added) = match (&counts.exact, tolerance) {
                (Some(exact), Some(tolerance)) => overflow::pmi_overcount(pmu, exact, tolerance),
                _ => (skipped("pmi_overcount"), None),
            };
            match &counts.timing {
                Some(timing) => {
                    findings.push(overflow::ioc_period(pmu, timing));
                    let same = counts.exact.as_ref().map(|e| e.event) == Some(timing.event);
                    let added = added.filter(|_| same).unwrap_or(0);
                    findings.push(overflow::skid(pmu, timing, &rr, added));
                }
                None => findings.extend([skipped("ioc_period"), skipped("skid")]),
            }
            findings.push(overcount);
            findings.extend(quirks::all(pmu, &id, &rr, pmu.machine_root()));
        } else {
            for probe in MEASURED {
                findings.push(Finding::skip(probe, "needs the PMU (see pmu)".into(), None));
            }
        }
        let skid_max = findings
            .iter()
            .find(|f| f.probe == "skid" && f.status != outcome::Status::Skip)
            .and_then(|f| f.numbers.get("max").copied());
        findings.push(machine::pseudo_nmi(fingerprint, skid_max));
        findings.push(machine::knobs(fingerprint));
        findings.push(machine::instance(fingerprint));
        Battery {
            core: rr.name,
            counted,
            tested: found.tested(),
            findings,
        }
    }

    /// The stress's finding, after the other probes.
    pub fn add(&mut self, finding: Finding) {
        self.findings.push(finding);
    }

    pub fn fitness(&self, use_: Use) -> Fitness {
        Fitness::of(use_, &self.findings, self.tested)
    }
}

/// The probes that need a PMU event, after `pmu`.
const MEASURED: [&str; 10] = [
    "counts",
    "counters",
    "determinism",
    "ioc_period",
    "skid",
    "pmi_overcount",
    "in_txcp",
    "freeze_on_smi",
    "speclockmap",
    "lost_overflow",
];

/// The interrupt skid of `event` as `run` needs it, measured on the
/// calling thread by the skid probe's pass (sized by one count of the known
/// loop): what a run's judge takes for on time, where no table figure can
/// be trusted to hold for this PMU.
pub fn interrupt_skid<P: ProbeKernel>(pmu: &P, event: ProbeEvent) -> Result<SkidMeasure, String> {
    let per_loop = match counting::count_one(pmu, event, counting::LOOP_BRANCHES)? {
        Some(n) if n > 0 => n,
        Some(_) => return Err("the event counted nothing over the known loop".into()),
        None => return Err("the event was in error state".into()),
    };
    let subject = counting::Subject {
        event,
        name: "the run's event".into(),
        per_loop,
        is_ticks: false,
    };
    overflow::measured_skid(pmu, &subject)
}

#[cfg(test)]
mod tests;
