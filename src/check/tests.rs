//! Every probe against the test kit's fake PMU: healthy, each finding is
//! its known answer; with one fault, exactly the probe for that fault
//! fails and no other.

use std::path::{Path, PathBuf};

use super::outcome::{Fitness, Status, Use};
use super::overflow::{PastDue, past_due};
use super::*;
use crate::testkit::fake_pmu::{FakePmu, Fault};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fingerprint")
        .join(name)
}

const GRAVITON2: &str = "graviton2-c6g-6.1-disabled";
const KABY_LAKE: &str = "intel-kabylake-laptop";
const ZEN3: &str = "amd-zen3-desktop";

fn battery(machine: &str, faults: &[Fault]) -> Battery {
    let root = fixture(machine);
    let fingerprint = Fingerprint::collect(&root);
    Battery::measure(&FakePmu::new(root, faults), &fingerprint)
}

fn status(b: &Battery, probe: &str) -> Status {
    b.findings
        .iter()
        .find(|f| f.probe == probe)
        .unwrap_or_else(|| panic!("no {probe} finding in {:#?}", b.findings))
        .status
}

/// The probes that FAILed.
fn failed(b: &Battery) -> Vec<&'static str> {
    b.findings
        .iter()
        .filter(|f| f.status == Status::Fail)
        .map(|f| f.probe)
        .collect()
}

fn unfit(because: &[&'static str]) -> Fitness {
    Fitness::Unfit {
        because: because.to_vec(),
    }
}

#[test]
fn a_healthy_pmu_passes_every_probe_it_measures() {
    let b = battery(GRAVITON2, &[]);
    for probe in [
        "pmu",
        "counts",
        "counters",
        "determinism",
        "ioc_period",
        "skid",
        "pmi_overcount",
        "knobs",
    ] {
        assert_eq!(
            status(&b, probe),
            Status::Pass,
            "{probe}: {:#?}",
            b.findings
        );
    }
    // A Graviton2 kernel without pseudo-NMI: a warning, not a failure.
    assert_eq!(status(&b, "pseudo_nmi"), Status::Warn);
    for probe in ["in_txcp", "freeze_on_smi", "speclockmap"] {
        assert_eq!(status(&b, probe), Status::Skip, "{probe}");
    }
    // A c6g.8xlarge has the basic PMU only; a c7g.16xlarge every event.
    let instance = b.findings.iter().find(|f| f.probe == "instance").unwrap();
    assert_eq!(instance.status, Status::Warn);
    assert_eq!(instance.evidence, "c6g.8xlarge: the basic PMU");
    assert_eq!(
        status(&battery("graviton3-c7g-nmi-enabled", &[]), "instance"),
        Status::Pass
    );
    assert_eq!(b.fitness(Use::Rr), Fitness::Fit);
    assert_eq!(b.fitness(Use::Profiler), Fitness::Fit);
    assert_eq!(b.counted.as_deref(), Some("rr's ticks (r21)"));
    let skid = b.findings.iter().find(|f| f.probe == "skid").unwrap();
    assert_eq!(skid.numbers["max"], 0);
    assert_eq!(skid.numbers["overflows"], 500);
    assert_eq!(skid.numbers["rr_skid"], 1_000);
}

#[test]
fn no_pmu_and_no_permission_leave_both_uses_untested() {
    for fault in [Fault::NoPmu, Fault::Denied] {
        let b = battery(GRAVITON2, &[fault]);
        assert!(!b.tested);
        assert_eq!(b.fitness(Use::Rr), Fitness::Untested);
        assert_eq!(b.fitness(Use::Profiler), Fitness::Untested);
        assert!(failed(&b).is_empty(), "{fault:?}: {:#?}", b.findings);
        for probe in MEASURED.iter().filter(|p| **p != "lost_overflow") {
            assert_eq!(status(&b, probe), Status::Skip, "{fault:?} {probe}");
        }
        let pmu = b.findings.iter().find(|f| f.probe == "pmu").unwrap();
        assert_eq!(pmu.status, Status::Skip);
        if fault == Fault::Denied {
            assert!(
                pmu.remedy
                    .as_deref()
                    .unwrap()
                    .contains("perf_event_paranoid=2")
            );
        } else {
            assert!(
                pmu.remedy
                    .as_deref()
                    .unwrap()
                    .contains("--event task-clock")
            );
        }
    }
}

#[test]
fn each_fault_fails_its_probe_and_no_other() {
    let cases: &[(&str, Fault, &[&str], Fitness, Fitness)] = &[
        (
            GRAVITON2,
            Fault::ReadsZero,
            &["counts"],
            unfit(&["counts"]),
            unfit(&["counts"]),
        ),
        (
            GRAVITON2,
            Fault::PeriodAtNextOverflow,
            &["ioc_period"],
            Fitness::Fit,
            unfit(&["ioc_period"]),
        ),
        (
            GRAVITON2,
            Fault::OvercountAtPmi(50),
            &["pmi_overcount"],
            unfit(&["pmi_overcount"]),
            unfit(&["pmi_overcount"]),
        ),
        (
            GRAVITON2,
            Fault::Nondeterministic,
            &["determinism"],
            unfit(&["determinism"]),
            Fitness::Fit,
        ),
        (
            GRAVITON2,
            Fault::Skid(5_000),
            &["skid"],
            unfit(&["skid"]),
            Fitness::Fit,
        ),
        (
            GRAVITON2,
            Fault::LoseEvery(100),
            &["skid"],
            unfit(&["skid"]),
            unfit(&["skid"]),
        ),
        (
            ZEN3,
            Fault::SpecLockMap,
            &["speclockmap"],
            unfit(&["speclockmap"]),
            Fitness::Fit,
        ),
    ];
    for (machine, fault, fails, rr, profiler) in cases {
        let b = battery(machine, &[*fault]);
        assert_eq!(failed(&b), *fails, "{fault:?}: {:#?}", b.findings);
        assert_eq!(b.fitness(Use::Rr), *rr, "{fault:?}");
        assert_eq!(b.fitness(Use::Profiler), *profiler, "{fault:?}");
    }
    // Healthy, the same machines fail nothing.
    for machine in [GRAVITON2, ZEN3, KABY_LAKE] {
        assert!(failed(&battery(machine, &[])).is_empty(), "{machine}");
    }
}

/// QEMU's PMU has no branch event: rr's ticks open and read 0, so the
/// machine is unfit for rr, and the other probes count cycles.
#[test]
fn ticks_that_read_zero_make_the_machine_unfit_for_rr_only() {
    let b = battery(GRAVITON2, &[Fault::RawReadsZero]);
    assert_eq!(failed(&b), ["counts"]);
    let counts = b.findings.iter().find(|f| f.probe == "counts").unwrap();
    assert_eq!(counts.unfit_for, [Use::Rr]);
    assert_eq!(b.counted.as_deref(), Some("cycles"));
    assert_eq!(status(&b, "skid"), Status::Pass);
    assert_eq!(b.fitness(Use::Profiler), Fitness::Fit);
}

#[test]
fn one_counter_warns() {
    let b = battery(GRAVITON2, &[Fault::OneCounter]);
    assert_eq!(status(&b, "counters"), Status::Warn);
    assert!(failed(&b).is_empty());
    let counters = b.findings.iter().find(|f| f.probe == "counters").unwrap();
    assert_eq!(counters.numbers["counters"], 1);
}

#[test]
fn the_x86_quirks_apply_where_rr_checks_them() {
    let kaby = battery(KABY_LAKE, &[Fault::InTxcp]);
    assert_eq!(status(&kaby, "in_txcp"), Status::Warn);
    assert!(failed(&kaby).is_empty());
    // Kaby Lake is before Comet Lake: rr does not read freeze_on_smi.
    assert_eq!(status(&kaby, "freeze_on_smi"), Status::Skip);
    assert_eq!(status(&kaby, "speclockmap"), Status::Skip);
    let zen = battery(ZEN3, &[]);
    assert_eq!(status(&zen, "speclockmap"), Status::Pass);
    assert_eq!(status(&zen, "in_txcp"), Status::Skip);
}

#[test]
fn freeze_on_smi_off_is_unfit_for_rr() {
    // A Comet Lake copy of the Kaby Lake laptop, with the knob given.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    copy_tree(&fixture(KABY_LAKE), root);
    let cpuinfo = std::fs::read_to_string(root.join("proc/cpuinfo")).unwrap();
    std::fs::write(
        root.join("proc/cpuinfo"),
        cpuinfo.replace("model\t\t: 142", "model\t\t: 165"),
    )
    .unwrap();
    std::fs::create_dir_all(root.join("sys/devices/cpu")).unwrap();
    for (value, expected) in [("0\n", Status::Fail), ("1\n", Status::Pass)] {
        std::fs::write(root.join("sys/devices/cpu/freeze_on_smi"), value).unwrap();
        let fingerprint = Fingerprint::collect(root);
        let b = Battery::measure(&FakePmu::new(root, &[]), &fingerprint);
        assert_eq!(status(&b, "freeze_on_smi"), expected, "{value}");
    }
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_tree(&entry.path(), &target);
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn the_lost_overflow_stress_is_judged_by_its_verdict() {
    let outcome = |verdict: &str, dropped| StressOutcome {
        verdict: verdict.into(),
        exit_status: 0,
        overflows: 40_000,
        stops: 3_000,
        dropped,
        detail: String::new(),
        dir: "d".into(),
    };
    assert_eq!(
        lost_overflow(Some(&outcome("clean", 0))).status,
        Status::Pass
    );
    let dropped = lost_overflow(Some(&outcome("dropped", 3)));
    assert_eq!(dropped.status, Status::Fail);
    assert_eq!(dropped.unfit_for, [Use::Rr, Use::Profiler]);
    let inconclusive = lost_overflow(Some(&outcome("inconclusive", 0)));
    assert_eq!(inconclusive.status, Status::Warn);
    assert_eq!(inconclusive.undecided_for, [Use::Rr, Use::Profiler]);
    // Nothing failed and the stress could not say: neither fit nor unfit.
    let undecided = Fitness::of(Use::Profiler, std::slice::from_ref(&inconclusive), true);
    assert_eq!(
        undecided,
        Fitness::Undecided {
            because: vec!["lost_overflow"]
        }
    );
    assert_eq!(outcome::exit_status(&[(Use::Profiler, undecided)]), 125);
    assert_eq!(lost_overflow(None).status, Status::Skip);
}

#[test]
fn the_exit_status_answers_for_the_uses_asked() {
    use outcome::exit_status;
    let unfit_rr = [(Use::Rr, unfit(&["counts"])), (Use::Profiler, Fitness::Fit)];
    assert_eq!(exit_status(&unfit_rr), 1);
    assert_eq!(exit_status(&unfit_rr[1..]), 0);
    assert_eq!(exit_status(&[(Use::Rr, Fitness::Untested)]), 125);
}

#[test]
fn the_due_walk_follows_the_re_arm_rules() {
    // On time, then 30 late, then one overflow without an interrupt (the
    // next comes a period late: rule 1 re-arms from there).
    let walk = past_due(&[100, 230, 400], 100, 450, 10);
    assert_eq!(
        walk,
        PastDue {
            past_due: vec![0, 30, 100],
            missed_between: 1,
            missed_at_end: 0,
            early: 0,
        }
    );
    // The overflow due at 500 never came, and the count went on past it.
    let end = past_due(&[100, 200, 300, 400], 100, 560, 10);
    assert_eq!(end.missed_at_end, 1);
    // One due within the allowance of the DISABLE may still be in flight.
    assert_eq!(past_due(&[100], 100, 205, 10).missed_at_end, 0);
}

/// QEMU's `-cpu max`: a core rr has no row for, whose BR_RETIRED opens
/// and reads 0. Unfit for rr on both counts; fit for profilers.
#[test]
fn qemu_s_pmu_is_unfit_for_rr_and_fit_for_profilers() {
    let b = battery("qemu-tcg-debian-6.12", &[Fault::RawReadsZero]);
    assert_eq!(b.fitness(Use::Rr), unfit(&["pmu", "counts"]));
    assert_eq!(b.fitness(Use::Profiler), Fitness::Fit);
    let pmu = b.findings.iter().find(|f| f.probe == "pmu").unwrap();
    assert!(
        pmu.evidence.contains("rr has no row for this core"),
        "{}",
        pmu.evidence
    );
    assert_eq!(b.counted.as_deref(), Some("cycles"));
}

/// Pseudo-NMI on a PMU that skids: the window between the overflow and
/// its NMI stays open, and the line says so with the skid measured.
#[test]
fn pseudo_nmi_with_skid_warns() {
    let nmi = "graviton3-c7g-nmi-enabled";
    assert_eq!(status(&battery(nmi, &[]), "pseudo_nmi"), Status::Pass);
    let b = battery(nmi, &[Fault::Skid(700)]);
    let f = b.findings.iter().find(|f| f.probe == "pseudo_nmi").unwrap();
    assert_eq!(f.status, Status::Warn);
    assert!(
        f.evidence.contains("up to 700 events late"),
        "{}",
        f.evidence
    );
    assert!(failed(&b).is_empty(), "{:#?}", b.findings);
}

/// The knobs judged: a paranoid level that keeps users out and a lowered
/// sample rate are warnings naming the sysctl, never failures.
#[test]
fn knobs_that_get_in_the_way_warn() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    copy_tree(&fixture(GRAVITON2), root);
    let kernel = root.join("proc/sys/kernel");
    std::fs::write(kernel.join("perf_event_paranoid"), "3\n").unwrap();
    std::fs::write(kernel.join("perf_event_max_sample_rate"), "25000\n").unwrap();
    let b = Battery::measure(&FakePmu::new(root, &[]), &Fingerprint::collect(root));
    let knobs = b.findings.iter().find(|f| f.probe == "knobs").unwrap();
    assert_eq!(knobs.status, Status::Warn);
    let remedy = knobs.remedy.as_deref().unwrap();
    assert!(
        remedy.contains("sysctl kernel.perf_event_paranoid=2"),
        "{remedy}"
    );
    assert!(
        remedy.contains("perf_event_max_sample_rate 25000"),
        "{remedy}"
    );
    assert_eq!(knobs.numbers["perf_event_paranoid"], 3);
    assert!(failed(&b).is_empty());
}
