//! The counting probes, over the known loop (`ProbeKernel::count`): each
//! iteration retires one conditional branch and two instructions, and the
//! ioctls around it add a few of both, the same every time.
//!
//! - `counts`: rr's ticks count at least the loop's branches (rr's
//!   `working_counters`: fewer is fatal), instructions at least its
//!   instructions, cycles more than none (a virtual PMU may expose an
//!   event that reads 0);
//! - `counters`: how many pinned counters count at once (rr opens ticks
//!   and cycles together; one counter only hides LL/SC on arm64);
//! - `determinism`: the loop counted many times gives one count (rr
//!   replays by the count; a spread makes replay diverge).

use super::events::Found;
use super::outcome::{Finding, Use};
use crate::engine::kernel::probe::{ProbeEvent, ProbeKernel};
use crate::fingerprint::Fingerprint;

/// The loop's length for `counts`, `counters` and `determinism`.
pub(super) const LOOP_BRANCHES: u64 = 100_000;
/// How often `determinism` counts it.
const REPEATS: usize = 50;
/// The most pinned counters `counters` asks for: arm64 has up to 31 and
/// a cycle counter; x86 up to 8 general and 3 or 4 fixed.
const MAX_COUNTERS: usize = 32;

/// An event the later probes count, and its rate over the loop.
#[derive(Debug, Clone)]
pub(super) struct Subject {
    pub event: ProbeEvent,
    pub name: String,
    /// What it counted over the loop of `LOOP_BRANCHES`: loops of other
    /// lengths are sized by it.
    pub per_loop: u64,
    /// rr's ticks (its skid and exactness rules apply) or not.
    pub is_ticks: bool,
}

pub(super) struct Counts {
    pub finding: Finding,
    /// What `ioc_period` and `skid` sample.
    pub timing: Option<Subject>,
    /// What `determinism` and `pmi_overcount` count.
    pub exact: Option<Subject>,
}

pub(super) fn count_one<P: ProbeKernel>(
    pmu: &P,
    event: ProbeEvent,
    branches: u64,
) -> Result<Option<u64>, String> {
    let counter = pmu.open_counter(event, false).map_err(|e| e.to_string())?;
    let counts = pmu.count(&[counter], branches).map_err(|e| e.to_string())?;
    Ok(counts.first().copied().flatten())
}

fn shown(r: &Result<Option<u64>, String>) -> String {
    match r {
        Ok(Some(n)) => n.to_string(),
        Ok(None) => "error state".into(),
        Err(e) => format!("error ({e})"),
    }
}

pub(super) fn counts<P: ProbeKernel>(pmu: &P, found: &Found) -> Counts {
    let n = LOOP_BRANCHES;
    let value = |r: &Result<Option<u64>, String>| r.as_ref().ok().copied().flatten().unwrap_or(0);
    let mut parts = Vec::new();
    let mut finding_numbers = Vec::new();
    // One event over the loop: its count, said and kept, and whether it
    // reached `least`.
    let mut measure = |label: &'static str, event: ProbeEvent, least: u64| {
        let r = count_one(pmu, event, n);
        parts.push(format!("{label} {}", shown(&r)));
        finding_numbers.push((label, value(&r)));
        (value(&r) >= least).then_some(value(&r))
    };
    let subject = |event, name: String, per_loop, is_ticks| Subject {
        event,
        name,
        per_loop,
        is_ticks,
    };
    let (mut rr_fails, mut profiler_fails) = (false, false);
    let mut ticks_subject = None;
    if let Some(ticks) = found.ticks {
        match measure("ticks", ticks, n) {
            Some(count) => {
                let name = format!("rr's ticks (r{:x})", ticks.config);
                ticks_subject = Some(subject(ticks, name, count, true));
            }
            None => rr_fails = true,
        }
    }
    let mut instructions = None;
    if found.instructions {
        match measure("instructions", ProbeEvent::INSTRUCTIONS, 2 * n) {
            Some(count) => {
                let name = "instructions".to_string();
                instructions = Some(subject(ProbeEvent::INSTRUCTIONS, name, count, false));
            }
            None => profiler_fails = true,
        }
    }
    let mut cycles = None;
    if found.cycles {
        match measure("cycles", ProbeEvent::CYCLES, 1) {
            Some(count) => {
                cycles = Some(subject(ProbeEvent::CYCLES, "cycles".into(), count, false));
            }
            None => profiler_fails = true,
        }
    }
    // Interrupt timing on what a profiler samples first (perf record's
    // default, cycles) when rr's ticks do not count; exactness on a count
    // of retired work, never on cycles (time: an interrupt's side effects
    // lengthen it).
    let timing = ticks_subject
        .clone()
        .or_else(|| cycles.clone())
        .or_else(|| instructions.clone());
    let exact = ticks_subject.or(instructions);
    let evidence = format!("a loop of {n} branches: {}", parts.join(", "));
    let expect = "ticks >= the loop's branches (rr's working_counters), instructions >= 2 per iteration, cycles > 0";
    let mut uses = Vec::new();
    if rr_fails {
        uses.push(Use::Rr);
    }
    if profiler_fails {
        uses.push(Use::Profiler);
    }
    let mut finding = if uses.is_empty() {
        Finding::pass("counts", evidence, expect)
    } else {
        Finding::fail("counts", &uses, evidence, expect)
            .remedy("a counter that opens but does not count: a virtual PMU that exposes the event without counting it (check with `perf stat -e EVENT true`)")
    };
    for (name, v) in finding_numbers {
        finding = finding.number(name, v);
    }
    finding = finding.number("loop_branches", n);
    Counts {
        finding,
        timing,
        exact,
    }
}

pub(super) fn counters<P: ProbeKernel>(
    pmu: &P,
    found: &Found,
    fingerprint: &Fingerprint,
) -> Finding {
    let event = if found.instructions {
        ProbeEvent::INSTRUCTIONS
    } else if found.cycles {
        ProbeEvent::CYCLES
    } else {
        return Finding::skip(
            "counters",
            "neither cycles nor instructions opens".into(),
            None,
        );
    };
    let mut open = Vec::new();
    for _ in 0..MAX_COUNTERS {
        match pmu.open_counter(event, true) {
            Ok(c) => open.push(c),
            Err(_) => break,
        }
    }
    let counted = match pmu.count(&open, LOOP_BRANCHES) {
        // Scheduled, whatever it read (`counts` judges the values).
        Ok(counts) => counts.iter().filter(|c| c.is_some()).count() as u64,
        Err(e) => return Finding::skip("counters", format!("cannot count: {e}"), None),
    };
    let watchdog = fingerprint.knobs.nmi_watchdog.value == Some(1)
        && fingerprint.kernel.arch.value.as_deref() == Some("x86_64");
    let note = if watchdog {
        " (the NMI watchdog holds one: `sysctl kernel.nmi_watchdog=0` frees it)"
    } else {
        ""
    };
    let evidence = format!(
        "{counted} of {} pinned counters counted at once{note}",
        open.len()
    );
    let expect =
        "at least 2 (rr counts ticks and cycles together; with one, arm64's LL/SC goes undetected)";
    let finding = match counted {
        0 => Finding::fail("counters", &[Use::Rr, Use::Profiler], evidence, expect),
        1 => Finding::warn("counters", evidence, expect)
            .remedy("one counter: rr warns and records without its cycles counter"),
        _ => Finding::pass("counters", evidence, expect),
    };
    finding.number("counters", counted)
}

/// The finding, and the tolerance of a comparison of two counts of this
/// event (the median's distance from the least count), if it counted.
pub(super) fn determinism<P: ProbeKernel>(pmu: &P, subject: &Subject) -> (Finding, Option<u64>) {
    let counter = match pmu.open_counter(subject.event, false) {
        Ok(c) => c,
        Err(e) => {
            return (
                Finding::skip(
                    "determinism",
                    format!("cannot open {}: {e}", subject.name),
                    None,
                ),
                None,
            );
        }
    };
    let counter = [counter];
    let mut seen = Vec::with_capacity(REPEATS);
    for _ in 0..REPEATS {
        match pmu.count(&counter, LOOP_BRANCHES) {
            Ok(c) => seen.extend(c.first().copied().flatten()),
            Err(e) => {
                return (
                    Finding::skip("determinism", format!("cannot count: {e}"), None),
                    None,
                );
            }
        }
    }
    let (Some(&min), Some(&max)) = (seen.iter().min(), seen.iter().max()) else {
        return (
            Finding::skip("determinism", "the counter was in error state".into(), None),
            None,
        );
    };
    let spread = max - min;
    // What a comparison of two counts tolerates: the lower half's spread
    // (an interrupt in a count only adds to it, so rare high outliers
    // widen the spread, not this).
    seen.sort_unstable();
    let tolerance = seen[seen.len() / 2] - min;
    let evidence = format!(
        "{} over the same loop {} times: {min}..{max} (spread {spread})",
        subject.name,
        seen.len()
    );
    let expect = "every count equal (rr replays by the count)";
    let finding = if spread == 0 {
        Finding::pass("determinism", evidence, expect)
    } else if subject.is_ticks {
        Finding::fail("determinism", &[Use::Rr], evidence, expect)
            .remedy("counts that vary: a hypervisor that does not virtualise the counter exactly; rr cannot replay here")
    } else {
        Finding::warn("determinism", evidence, expect)
            .remedy("not rr's ticks: rr would count branches")
    };
    (
        finding
            .number("min", min)
            .number("max", max)
            .number("spread", spread)
            .number("tolerance", tolerance),
        Some(tolerance),
    )
}

impl Subject {
    /// The loop's length that counts about `events` of this event.
    pub(super) fn branches_for(&self, events: u64) -> u64 {
        (events as u128 * LOOP_BRANCHES as u128 / self.per_loop.max(1) as u128).max(1) as u64
    }
}
