//! The sampling probes: a counter with a period, its overflow interrupts
//! seen through the kernel's own sample records (each holds the count in
//! the overflow handler).
//!
//! - `ioc_period`: a period of 2^31 - 1 changed with PERF_EVENT_IOC_PERIOD
//!   while enabled must overflow at the new period at once (the kernel
//!   restarts the period since 3.14); a driver that applies it at the next
//!   overflow gives none;
//! - `skid`: count past due at each interrupt, the due points walked by
//!   the driver's re-arm rules (a period on; a period from the count when
//!   the interrupt came a period or more late), against rr's skid for this
//!   core; and every overflow due well before the DISABLE interrupted;
//! - `pmi_overcount`: the loop counted with one interrupt in it against
//!   the same loop with none (rr's Xen check): the interrupt must add
//!   nothing beyond the count's own spread (least against least: an
//!   interrupt elsewhere only adds).

use super::counting::Subject;
use super::outcome::{Finding, Use};
use super::rr_core::RrCore;
use crate::domain::SkidMeasure;
use crate::engine::kernel::probe::{Overflows, ProbeKernel, Sampled};

/// A period no probe's loop reaches (the most a 32-bit counter takes).
const UNREACHED: u64 = (1 << 31) - 1;
/// `ioc_period`'s new period and how many of them its loop runs.
const NEW_PERIOD: u64 = 10_000;
const NEW_PERIODS: u64 = 20;
/// `skid`'s period and overflows: slow enough for the default
/// perf_event_max_sample_rate (100,000/s) on a core retiring one branch a
/// cycle, many enough for a 99th percentile.
const SKID_PERIOD: u64 = 200_000;
const SKID_OVERFLOWS: u64 = 500;
/// `pmi_overcount`'s loop, its repeats, and the period that puts one
/// interrupt in it (three quarters in).
const OVERCOUNT_BRANCHES: u64 = 10_000;
const OVERCOUNT_REPEATS: usize = 5;

fn sampled<P: ProbeKernel>(
    pmu: &P,
    subject: &Subject,
    period: u64,
    new_period: Option<u64>,
    branches: u64,
) -> Result<Sampled, String> {
    let mut sampler = pmu
        .open_sampler(subject.event, period)
        .map_err(|e| format!("cannot open {} sampling: {e}", subject.name))?;
    pmu.sample(&mut sampler, new_period, branches)
        .map_err(|e| e.to_string())
}

pub(super) fn ioc_period<P: ProbeKernel>(pmu: &P, subject: &Subject) -> Finding {
    // Half a period more: the last overflow is not at the DISABLE.
    let branches = subject.branches_for(NEW_PERIOD * NEW_PERIODS + NEW_PERIOD / 2);
    let s = match sampled(pmu, subject, UNREACHED, Some(NEW_PERIOD), branches) {
        Ok(s) => s,
        Err(e) => {
            return Finding::fail(
                "ioc_period",
                &[Use::Profiler],
                format!("PERF_EVENT_IOC_PERIOD: {e}"),
                "the ioctl succeeds",
            );
        }
    };
    let n = s.overflows.counts.len() as u64;
    let evidence = format!(
        "period {UNREACHED} changed to {NEW_PERIOD} on {}: {n} overflows in {} events",
        subject.name,
        s.count.unwrap_or(0)
    );
    let expect = "about one overflow per new period at once (the kernel restarts the period at the ioctl since 3.14)";
    let finding = if n == 0 {
        Finding::fail("ioc_period", &[Use::Profiler], evidence, expect).remedy(
            "the driver applies a new period only at the next overflow: a profiler's period change is late by the old period (rr recreates its counters instead)",
        )
    } else {
        Finding::pass("ioc_period", evidence, expect)
    };
    finding
        .number("overflows", n)
        .number("expected", NEW_PERIODS)
}

/// Each interrupt's count past its due point, by the driver's re-arm
/// rules; and the overflows due that never interrupted.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct PastDue {
    pub past_due: Vec<u64>,
    /// Interrupts that came a period or more past their due point: the
    /// overflows in between interrupted never.
    pub missed_between: u64,
    /// Overflows due more than `allowance` before the final count that
    /// never interrupted.
    pub missed_at_end: u64,
    /// Samples at a count before their due point.
    pub early: u64,
}

/// The walk over sample counts (first due at `period`).
pub(super) fn past_due(counts: &[u64], period: u64, final_count: u64, allowance: u64) -> PastDue {
    let mut out = PastDue::default();
    let mut due = period;
    for &c in counts {
        if c < due {
            out.early += 1;
            continue;
        }
        let late = c - due;
        out.past_due.push(late);
        if late >= period {
            out.missed_between += late / period;
            due = c + period;
        } else {
            due += period;
        }
    }
    if final_count > due.saturating_add(allowance) {
        out.missed_at_end = (final_count - due - allowance) / period + 1;
    }
    out
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// One pass of `SKID_OVERFLOWS` overflows every `SKID_PERIOD` events of
/// `subject`, `added` (what each interrupt adds to the count) taken off
/// before the walk: each interrupt's count past due, sorted, and the walk.
pub(super) struct SkidPass {
    pub sorted: Vec<u64>,
    pub walk: PastDue,
    pub overflows: Overflows,
}

pub(super) fn skid_pass<P: ProbeKernel>(
    pmu: &P,
    subject: &Subject,
    added: u64,
    allowance: u64,
) -> Result<SkidPass, String> {
    // Half a period more: the last overflow is not at the DISABLE.
    let branches = subject.branches_for(SKID_PERIOD * SKID_OVERFLOWS + SKID_PERIOD / 2);
    let s = sampled(pmu, subject, SKID_PERIOD, None, branches)?;
    let counts: Vec<u64> = (1u64..)
        .zip(&s.overflows.counts)
        .map(|(k, c)| c.saturating_sub(k * added))
        .collect();
    let final_count = s
        .count
        .unwrap_or(0)
        .saturating_sub(counts.len() as u64 * added);
    let walk = past_due(&counts, SKID_PERIOD, final_count, allowance);
    let mut sorted = walk.past_due.clone();
    sorted.sort_unstable();
    Ok(SkidPass {
        sorted,
        walk,
        overflows: s.overflows,
    })
}

/// The skid pass as `pmustress run` records it: nothing added per
/// interrupt (the judge sees what the counter reads), and an overflow due
/// more than a quarter period before the DISABLE missed if it never
/// interrupted.
pub(super) fn measured_skid<P: ProbeKernel>(
    pmu: &P,
    subject: &Subject,
) -> Result<SkidMeasure, String> {
    let pass = skid_pass(pmu, subject, 0, SKID_PERIOD / 4)?;
    // An interrupt a period or more past due is the next overflow's: the
    // ones before it never interrupted (missed), and it skidded by the rest.
    let mut sorted: Vec<u64> = pass
        .walk
        .past_due
        .iter()
        .map(|late| late % SKID_PERIOD)
        .collect();
    sorted.sort_unstable();
    Ok(SkidMeasure {
        overflows: sorted.len() as u64,
        period: SKID_PERIOD,
        p50: percentile(&sorted, 0.5),
        p99: percentile(&sorted, 0.99),
        max: sorted.last().copied().unwrap_or(0),
        missed: pass.walk.missed_between + pass.walk.missed_at_end,
        throttles: pass.overflows.throttles,
    })
}

/// `added`: what each interrupt adds to the count (`pmi_overcount`'s
/// measure on this event), taken off before the walk.
pub(super) fn skid<P: ProbeKernel>(pmu: &P, subject: &Subject, rr: &RrCore, added: u64) -> Finding {
    let SkidPass {
        sorted,
        walk,
        overflows,
    } = match skid_pass(pmu, subject, added, rr.skid) {
        Ok(pass) => pass,
        Err(e) => return Finding::skip("skid", e, None),
    };
    let (p50, p99, max) = (
        percentile(&sorted, 0.5),
        percentile(&sorted, 0.99),
        sorted.last().copied().unwrap_or(0),
    );
    let missed = walk.missed_between + walk.missed_at_end;
    let evidence = format!(
        "{} overflows of {} every {SKID_PERIOD}: past due p50 {p50}, p99 {p99}, max {max}{}; {missed} without an interrupt{}",
        sorted.len(),
        subject.name,
        if added > 0 {
            format!(" (less the {added} each interrupt adds, pmi_overcount's)")
        } else {
            String::new()
        },
        if overflows.throttles > 0 {
            format!(", throttled {} times", overflows.throttles)
        } else {
            String::new()
        }
    );
    let expect = format!(
        "every interrupt within rr's skid for {} ({}{}), none missing",
        rr.name,
        rr.skid,
        if rr.skid_unbounded {
            ", rr: unbounded"
        } else {
            ""
        }
    );
    let mut uses = Vec::new();
    if subject.is_ticks && max > rr.skid {
        uses.push(Use::Rr);
    }
    let throttled = overflows.throttles > 0 || overflows.lost > 0;
    if !throttled && (missed > 0 || walk.early > 0) {
        uses.push(Use::Profiler);
    }
    let finding = if sorted.is_empty() && missed == 0 {
        Finding::fail("skid", &[Use::Rr, Use::Profiler], evidence, &expect)
            .remedy("no overflow interrupt came at all")
    } else if !uses.is_empty() {
        let remedy = if uses.contains(&Use::Profiler) {
            "overflows without their interrupt: see lost_overflow and pseudo_nmi"
        } else {
            "interrupts later than rr allows: rr's replay would stop short of or past its target"
        };
        Finding::fail("skid", &uses, evidence, &expect).remedy(remedy)
    } else if throttled {
        Finding::warn("skid", evidence, &expect)
            .remedy("the kernel throttled the event (perf_event_max_sample_rate): missing overflows not judged")
    } else {
        Finding::pass("skid", evidence, &expect)
    };
    finding
        .number("overflows", sorted.len() as u64)
        .number("p50", p50)
        .number("p99", p99)
        .number("max", max)
        .number("missed", missed)
        .number("rr_skid", rr.skid)
}

/// The finding, and what the one interrupt added when it added more
/// than the tolerance.
pub(super) fn pmi_overcount<P: ProbeKernel>(
    pmu: &P,
    subject: &Subject,
    tolerance: u64,
) -> (Finding, Option<u64>) {
    let branches = OVERCOUNT_BRANCHES;
    let mut plain = Vec::new();
    let mut with_pmi = Vec::new();
    let mut no_pmi = 0;
    for _ in 0..OVERCOUNT_REPEATS {
        match sampled(pmu, subject, UNREACHED, None, branches) {
            Ok(s) => plain.extend(s.count),
            Err(e) => return (Finding::skip("pmi_overcount", e, None), None),
        }
    }
    // The least of each: an interrupt elsewhere (a tick) only adds.
    let Some(&baseline) = plain.iter().min() else {
        let why = "the counter was in error state".to_string();
        return (Finding::skip("pmi_overcount", why, None), None);
    };
    let period = (baseline * 3 / 4).max(1);
    for _ in 0..OVERCOUNT_REPEATS {
        match sampled(pmu, subject, period, None, branches) {
            Ok(s) if s.overflows.counts.len() == 1 => with_pmi.extend(s.count),
            Ok(_) => no_pmi += 1,
            Err(e) => return (Finding::skip("pmi_overcount", e, None), None),
        }
    }
    let Some(&counted) = with_pmi.iter().min() else {
        let why = format!(
            "no run of {branches} branches with period {period} took exactly one interrupt ({no_pmi} of {OVERCOUNT_REPEATS}); skid judges interrupts"
        );
        return (Finding::skip("pmi_overcount", why, None), None);
    };
    let over = counted.saturating_sub(baseline);
    let evidence = format!(
        "{}: {counted} with one interrupt at period {period}, {baseline} without: {over} more",
        subject.name
    );
    let expect = format!("no more than the count's own spread ({tolerance}; rr's Xen check)");
    let finding = if over > tolerance {
        Finding::fail("pmi_overcount", &[Use::Rr, Use::Profiler], evidence, &expect).remedy(
            "the hypervisor or driver adds events when it takes the interrupt: counts at a PMI are wrong (rr: Xen's PMI overcount)",
        )
    } else {
        Finding::pass("pmi_overcount", evidence, &expect)
    };
    let finding = finding
        .number("with_interrupt", counted)
        .number("without", baseline)
        .number("overcount", over);
    (finding, (over > tolerance).then_some(over))
}
