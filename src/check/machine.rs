//! The probes that judge the machine rather than measure a counter:
//! pseudo-NMI, the perf knobs, the EC2 instance size's PMU class, and the
//! lost-overflow stress (a `run` whose outcome the command line hands in).

use super::outcome::{Finding, Use};
use crate::fingerprint::{Fingerprint, PseudoNmiVerdict};

/// `skid_max`: the latest interrupt the skid probe saw, in events past
/// due, when it measured one: pseudo-NMI closes the stop's window only
/// where the interrupt comes at the overflow.
pub(super) fn pseudo_nmi(fingerprint: &Fingerprint, skid_max: Option<u64>) -> Finding {
    let p = &fingerprint.pseudo_nmi;
    let evidence = format!(
        "{}{}",
        p.verdict,
        p.evidence
            .first()
            .map(|e| format!(": {e}"))
            .unwrap_or_default()
    );
    let expect = "the overflow interrupt is an NMI (x86), or arm64's pseudo-NMI is on";
    match p.verdict {
        PseudoNmiVerdict::Enabled => match skid_max {
            Some(late) if late > 0 => Finding::warn(
                "pseudo_nmi",
                format!("{evidence}; but interrupts come up to {late} events late (skid)"),
                expect,
            )
            .remedy(
                "pseudo-NMI does not close the window a skid leaves: a stop before the NMI is raised still clears the overflow (lost_overflow measures it; on the QEMU bed at 0..1,000 events of skid the driver lost 26 of 175,021 overflows under the default stress, 148 per 10,396 at 0..10,000)",
            ),
            _ => Finding::pass("pseudo_nmi", evidence, expect),
        },
        PseudoNmiVerdict::NotApplicable => Finding::pass(
            "pseudo_nmi",
            "not arm64: PMU interrupts are NMIs".into(),
            expect,
        ),
        PseudoNmiVerdict::Disabled | PseudoNmiVerdict::NotBuilt => {
            Finding::warn("pseudo_nmi", evidence, expect).remedy(
                "an overflow pending at a stop can be lost (lost_overflow measures it): CONFIG_ARM64_PSEUDO_NMI=y and irqchip.gicv3_pseudo_nmi=1",
            )
        }
        PseudoNmiVerdict::Unknown => Finding::skip("pseudo_nmi", evidence, None),
    }
}

/// perf_event_max_sample_rate's default: lower means the kernel lowered
/// it after slow interrupts, or someone did.
const DEFAULT_MAX_SAMPLE_RATE: i64 = 100_000;
/// perf_event_mlock_kb's default (512 KiB and a page).
const DEFAULT_MLOCK_KB: i64 = 516;

pub(super) fn knobs(fingerprint: &Fingerprint) -> Finding {
    let k = &fingerprint.knobs;
    let mut warnings = Vec::new();
    let mut shown = Vec::new();
    let mut finding_numbers = Vec::new();
    if let Some(p) = k.perf_event_paranoid.value {
        shown.push(format!("paranoid {p}"));
        finding_numbers.push(("perf_event_paranoid", p.max(0) as u64));
        if p > 2 {
            warnings.push(format!(
                "perf_event_paranoid {p} keeps unprivileged users from counting (sysctl kernel.perf_event_paranoid=2)"
            ));
        }
    }
    if let Some(r) = k.perf_event_max_sample_rate.value {
        shown.push(format!("max_sample_rate {r}"));
        finding_numbers.push(("perf_event_max_sample_rate", r.max(0) as u64));
        if r < DEFAULT_MAX_SAMPLE_RATE {
            warnings.push(format!(
                "perf_event_max_sample_rate {r} is below the default {DEFAULT_MAX_SAMPLE_RATE}: faster sampling is throttled (the kernel lowers it after slow interrupts)"
            ));
        }
    }
    if let Some(m) = k.perf_event_mlock_kb.value {
        shown.push(format!("mlock_kb {m}"));
        if m < DEFAULT_MLOCK_KB {
            warnings.push(format!(
                "perf_event_mlock_kb {m}: unprivileged sample rings smaller than perf's default"
            ));
        }
    }
    if let Some(w) = k.nmi_watchdog.value {
        shown.push(format!("nmi_watchdog {w}"));
    }
    let expect = "paranoid <= 2, max_sample_rate >= 100000, mlock_kb >= 516";
    let evidence = shown.join(", ");
    let mut finding = if warnings.is_empty() {
        Finding::pass("knobs", evidence, expect)
    } else {
        Finding::warn("knobs", evidence, expect).remedy(warnings.join("; "))
    };
    for (name, v) in finding_numbers {
        finding = finding.number(name, v);
    }
    finding
}

/// An EC2 instance size's PMU: every event, the basic set, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PmuClass {
    Full,
    Basic,
    None,
}

/// The class of `instance` (m7g.large) and the sizes with every event,
/// from AWS's hardware-PMU guide; None for a family it does not list.
pub(super) fn ec2_pmu_class(instance: &str) -> Option<(PmuClass, &'static str)> {
    let (family, size) = instance.split_once('.')?;
    let generation: String = family
        .chars()
        .skip_while(|c| c.is_ascii_alphabetic())
        .collect();
    let gen_digit = generation.chars().next()?.to_digit(10)?;
    let suffix: String = generation.chars().skip(1).collect();
    let suffix = suffix.trim_end_matches(['d', 'n', 'e']);
    let (full, small): (&[&str], PmuClass) = match (gen_digit, suffix) {
        (9, "g") => (&["12xlarge", "24xlarge", "48xlarge"], PmuClass::Basic),
        (8, "g") => (&["24xlarge", "48xlarge"], PmuClass::Basic),
        (6 | 7, "g") => (&["16xlarge"], PmuClass::Basic),
        (8, "a") | (7, "a") | (7, "i") => (&["24xlarge", "48xlarge"], PmuClass::Basic),
        (6, "a") => (&["24xlarge", "48xlarge"], PmuClass::None),
        (8, "i") => (&["48xlarge"], PmuClass::Basic),
        (6, "i") => (&["16xlarge", "32xlarge"], PmuClass::None),
        (5, "") if family.starts_with('c') => (&["9xlarge", "18xlarge"], PmuClass::None),
        (5, "") => (&["12xlarge", "24xlarge"], PmuClass::None),
        _ => return None,
    };
    let sizes = match full {
        ["16xlarge"] => "16xlarge and metal",
        ["12xlarge", ..] => "12xlarge, 24xlarge, 48xlarge and metal",
        ["24xlarge", ..] => "24xlarge, 48xlarge and metal",
        ["48xlarge"] => "48xlarge and metal",
        ["16xlarge", "32xlarge"] => "16xlarge, 32xlarge and metal",
        ["9xlarge", ..] => "9xlarge, 18xlarge and metal",
        _ => "12xlarge, 24xlarge and metal",
    };
    let class = if size.starts_with("metal") || full.contains(&size) {
        PmuClass::Full
    } else {
        small
    };
    Some((class, sizes))
}

pub(super) fn instance(fingerprint: &Fingerprint) -> Finding {
    let dmi = &fingerprint.machine.dmi;
    let vendor = dmi.sys_vendor.value.as_deref().unwrap_or("");
    let Some(product) = dmi
        .product_name
        .value
        .as_deref()
        .filter(|_| vendor == "Amazon EC2")
    else {
        return Finding::skip(
            "instance",
            format!(
                "not an EC2 instance (sys_vendor {})",
                if vendor.is_empty() { "unknown" } else { vendor }
            ),
            None,
        );
    };
    let expect = "an instance size with every PMU event (AWS's hardware-PMU guide)";
    match ec2_pmu_class(product) {
        None => Finding::skip(
            "instance",
            format!("{product}: a family the PMU guide does not list"),
            None,
        ),
        Some((PmuClass::Full, _)) => {
            Finding::pass("instance", format!("{product}: every PMU event"), expect)
        }
        Some((class, sizes)) => Finding::warn(
            "instance",
            format!(
                "{product}: {} PMU",
                if class == PmuClass::Basic {
                    "the basic"
                } else {
                    "no"
                }
            ),
            expect,
        )
        .remedy(format!("every event only at {sizes}")),
    }
}

/// What the lost-overflow stress (`pmustress run`) left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StressOutcome {
    /// The run's verdict (clean, dropped, inconclusive, interrupted...).
    pub verdict: String,
    pub exit_status: i32,
    pub overflows: u64,
    pub stops: u64,
    pub dropped: u64,
    /// The run's own line for what it rules out, or why it could not say.
    pub detail: String,
    /// Where its results directory is.
    pub dir: String,
}

pub fn lost_overflow(stress: Option<&StressOutcome>) -> Finding {
    let expect = "no overflow without its interrupt under migrations (pmustress run's verdict)";
    let Some(s) = stress else {
        return Finding::skip(
            "lost_overflow",
            "--quick: the stress was not run".into(),
            Some("pmustress check without --quick, or pmustress run --duration 60s".into()),
        );
    };
    let evidence = format!(
        "{}: {} lost of {} overflows, {} stops witnessed ({})",
        s.verdict, s.dropped, s.overflows, s.stops, s.dir
    );
    let finding = match s.verdict.as_str() {
        "clean" => Finding::pass("lost_overflow", evidence, expect),
        "dropped" => Finding::fail("lost_overflow", &[Use::Rr, Use::Profiler], evidence, expect)
            .remedy("overflows lost at stops: arm64 without pseudo-NMI loses them (pseudo_nmi); report it with `pmustress report --mail`"),
        // It ran and could not say: losses are not ruled out.
        _ => Finding::undecided(
            "lost_overflow",
            &[Use::Rr, Use::Profiler],
            format!("{evidence}: {}", s.detail),
            expect,
        )
        .remedy("run longer: pmustress check --duration 60s"),
    };
    finding
        .number("overflows", s.overflows)
        .number("stops", s.stops)
        .number("dropped", s.dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ec2_sizes_give_their_pmu_class() {
        assert_eq!(ec2_pmu_class("c7g.16xlarge").unwrap().0, PmuClass::Full);
        assert_eq!(ec2_pmu_class("c7g.large").unwrap().0, PmuClass::Basic);
        assert_eq!(ec2_pmu_class("m7gd.metal").unwrap().0, PmuClass::Full);
        assert_eq!(ec2_pmu_class("r6a.4xlarge").unwrap().0, PmuClass::None);
        assert_eq!(ec2_pmu_class("c5.9xlarge").unwrap().0, PmuClass::Full);
        assert_eq!(ec2_pmu_class("m5.12xlarge").unwrap().0, PmuClass::Full);
        assert_eq!(ec2_pmu_class("m5.large").unwrap().0, PmuClass::None);
        assert_eq!(ec2_pmu_class("c8g.24xlarge").unwrap().0, PmuClass::Full);
        assert_eq!(ec2_pmu_class("t4g.micro"), None);
    }
}
