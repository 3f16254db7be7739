//! `pmustress check` as a user runs it: on the test kit's fake PMU
//! (`PMUSTRESS_TESTKIT_PMU`, healthy or with one fault) and fixture
//! machines, its stress on the scripted fake kernel; and on this machine's
//! own PMU where it has none. The lines, check.json and the exit status.

use std::path::Path;
use std::process::Output;

use pmustress::testkit::fake_kernel::{SCRIPT_ENV, Script, Scripted, Step};
use pmustress::testkit::fake_pmu::{FakePmu, Fault, PMU_ENV};

use crate::util::pmustress;

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fingerprint")
        .join(name)
}

const GRAVITON2: &str = "graviton2-c6g-6.1-disabled";

/// `pmustress check ARGS --out DIR/c` on a fake PMU with `faults`, and
/// the stress (if any) on `script`.
fn check(faults: &[Fault], script: Option<Script>, args: &[&str], dir: &Path) -> Output {
    check_on(GRAVITON2, faults, script, args, dir)
}

/// `check` as above, on the fixture `machine`.
fn check_on(
    machine: &str,
    faults: &[Fault],
    script: Option<Script>,
    args: &[&str],
    dir: &Path,
) -> Output {
    let pmu_file = dir.join("pmu.json");
    let pmu = FakePmu::new(fixture(machine), faults);
    std::fs::write(&pmu_file, serde_json::to_string(&pmu).unwrap()).unwrap();
    let mut cmd = pmustress();
    cmd.env(PMU_ENV, &pmu_file);
    if let Some(script) = script {
        let path = dir.join("script.json");
        let scripted = Scripted {
            machine: fixture(GRAVITON2),
            cpus: vec![0, 1],
            script,
        };
        std::fs::write(&path, serde_json::to_string(&scripted).unwrap()).unwrap();
        cmd.env(SCRIPT_ENV, &path);
    }
    cmd.arg("check")
        .args(args)
        .arg("--out")
        .arg(dir.join("c"))
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn check_json(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("c/check.json")).expect("check.json");
    serde_json::from_str(&text).expect("check.json parses")
}

fn finding<'a>(doc: &'a serde_json::Value, probe: &str) -> &'a serde_json::Value {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["probe"] == probe)
        .unwrap_or_else(|| panic!("no {probe} in {doc:#}"))
}

#[test]
fn a_healthy_pmu_is_fit_for_both_in_a_few_lines() {
    let dir = tempfile::tempdir().unwrap();
    let out = check(&[], None, &["--quick"], dir.path());
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.lines().count() < 30, "{stdout}");
    assert!(
        stdout.contains("verdict: fit for rr; fit for sampling profilers (exit 0, --for all)"),
        "{stdout}"
    );
    assert!(stdout.contains("PASS skid "), "{stdout}");
    assert!(stdout.contains("SKIP lost_overflow --quick"), "{stdout}");
    let doc = check_json(dir.path());
    assert_eq!(doc["schema"], "pmustress-check");
    assert_eq!(doc["exit_status"], 0);
    assert_eq!(doc["rr"]["fitness"], "fit");
    assert_eq!(finding(&doc, "skid")["numbers"]["overflows"], 500);
    assert_eq!(
        doc["fingerprint"]["machine"]["dmi"]["product_name"]["value"],
        "c6g.8xlarge"
    );
}

/// A period change applied only at the next overflow: a profiler's
/// periods are wrong, rr copes (it recreates its counters).
#[test]
fn the_exit_status_answers_for_the_use_asked() {
    for (for_use, status) in [("rr", 0), ("profiler", 1), ("all", 1)] {
        let dir = tempfile::tempdir().unwrap();
        let out = check(
            &[Fault::PeriodAtNextOverflow],
            None,
            &["--quick", "--for", for_use],
            dir.path(),
        );
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(status), "--for {for_use}: {stdout}");
        assert!(stdout.contains("FAIL ioc_period"), "{stdout}");
        assert!(
            stdout.contains("not fit for sampling profilers (ioc_period)"),
            "{stdout}"
        );
        let doc = check_json(dir.path());
        assert_eq!(doc["exit_status"], status);
        assert_eq!(finding(&doc, "ioc_period")["unfit_for"][0], "profiler");
    }
}

#[test]
fn no_pmu_exits_125_saying_what_tests_the_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    let out = check(&[Fault::NoPmu], None, &[], dir.path());
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(125), "{stdout}");
    assert!(
        stdout.contains("verdict: could not test the PMU here"),
        "{stdout}"
    );
    assert_eq!(
        stdout.matches("pmustress run --event task-clock").count(),
        1,
        "{stdout}"
    );
    let doc = check_json(dir.path());
    assert_eq!(doc["tested"], false);
    assert_eq!(doc["rr"]["fitness"], "untested");
    for f in doc["findings"].as_array().unwrap() {
        if !["pseudo_nmi", "knobs", "instance"].contains(&f["probe"].as_str().unwrap()) {
            assert_eq!(f["status"], "SKIP", "{f}");
        }
    }
    // No stress was started.
    assert!(!dir.path().join("c/stress").exists());
}

/// This machine's own PMU, where it has none (CI's VMs): 125 and every
/// probe that needs one SKIPs. A machine with a PMU says so and skips.
#[test]
fn a_check_here_without_a_pmu_exits_125() {
    let env = pmustress().args(["env", "--json"]).output().unwrap();
    let fingerprint: serde_json::Value = serde_json::from_slice(&env.stdout).unwrap();
    if fingerprint["pmus"]["has_hardware_pmu"] == true {
        crate::util::skipped("this machine has a hardware PMU");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = pmustress()
        .args(["check", "--out"])
        .arg(dir.path().join("c"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", text(&out.stdout));
    let doc = check_json(dir.path());
    assert_eq!(finding(&doc, "pmu")["status"], "SKIP");
    assert_eq!(finding(&doc, "counts")["status"], "SKIP");
}

/// The stress is a `pmustress run` of its own, in stress/: one that
/// drops an overflow makes the machine unfit for both uses.
#[test]
fn the_stress_s_lost_overflow_makes_the_machine_unfit() {
    let mut steps = [Step::Switch { before_due: 99_000 }, Step::OVERFLOW].repeat(300);
    steps.insert(100, Step::DropAtSwitch { past_due: 10 });
    let script = Script::default().worker(steps.clone()).worker(steps);
    let dir = tempfile::tempdir().unwrap();
    let out = check(&[], Some(script), &["--duration", "700ms"], dir.path());
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("FAIL lost_overflow dropped: 2 lost"),
        "{stdout}"
    );
    let doc = check_json(dir.path());
    assert_eq!(doc["stress_dir"], "stress");
    assert_eq!(finding(&doc, "lost_overflow")["numbers"]["dropped"], 2);
    let run: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("c/stress/run.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(run["verdict"], "dropped");
    assert_eq!(run["totals"]["dropped_interrupts"], 2);
}

#[test]
fn json_and_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let out = check(&[], None, &["--quick", "--json"], dir.path());
    assert_eq!(out.status.code(), Some(0));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc, check_json(dir.path()));
    // A second check into the same directory keeps the first's evidence.
    let again = check(&[], None, &["--quick"], dir.path());
    assert_eq!(again.status.code(), Some(2));
    assert!(text(&again.stderr).contains("--out"));
    let bad = pmustress()
        .args(["check", "--for", "gdb"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let stderr = text(&bad.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--for"), "{stderr}");
}

/// `report` reads checks back: each alone, and a fleet's grouped by
/// instance type, one row each with how many were fit for each use.
#[test]
fn report_reads_checks_alone_and_grouped() {
    let fleet = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, &[Fault]); 3] = [
        ("a", GRAVITON2, &[]),
        ("b", GRAVITON2, &[Fault::PeriodAtNextOverflow]),
        ("c", "graviton3-c7g-nmi-enabled", &[]),
    ];
    for (name, machine, faults) in cases {
        let dir = fleet.path().join(name);
        std::fs::create_dir(&dir).unwrap();
        let out = check_on(machine, faults, None, &["--quick"], &dir);
        assert!(out.status.code().is_some(), "{}", text(&out.stderr));
    }
    let one = pmustress()
        .arg("report")
        .arg(fleet.path().join("b/c"))
        .output()
        .unwrap();
    let stdout = text(&one.stdout);
    assert_eq!(one.status.code(), Some(0), "{stdout}{}", text(&one.stderr));
    assert!(
        stdout.contains("fit for rr; not fit for sampling profilers (ioc_period) (exit 1)"),
        "{stdout}"
    );
    assert!(stdout.contains("  FAIL ioc_period"), "{stdout}");
    let grouped = pmustress()
        .args(["report", "--group-by", "instance-type"])
        .arg(fleet.path())
        .output()
        .unwrap();
    let stdout = text(&grouped.stdout);
    assert_eq!(
        grouped.status.code(),
        Some(0),
        "{stdout}{}",
        text(&grouped.stderr)
    );
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [
            vec!["c6g.8xlarge", "2", "2", "1", "-"],
            vec!["c7g.16xlarge", "1", "1", "1", "-"]
        ],
        "{stdout}"
    );
}

/// A stress that cannot conclude (here the workers get no overflow until
/// the watchdog stops them) rules no loss out: both uses are undecided,
/// 125, never fit.
#[test]
fn an_inconclusive_stress_leaves_the_uses_undecided() {
    let idle = [Step::Switch { before_due: 99_000 }, Step::Idle];
    let script = Script::default().worker(idle).worker(idle);
    let dir = tempfile::tempdir().unwrap();
    let out = check(&[], Some(script), &["--duration", "1h"], dir.path());
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(125),
        "{stdout}{}",
        text(&out.stderr)
    );
    assert!(
        stdout.contains("WARN lost_overflow inconclusive"),
        "{stdout}"
    );
    assert!(
        stdout
            .contains("rr undecided (lost_overflow); sampling profilers undecided (lost_overflow)"),
        "{stdout}"
    );
    let doc = check_json(dir.path());
    assert_eq!(doc["profiler"]["fitness"], "undecided");
    assert_eq!(doc["exit_status"], 125);
}

/// A stop signal to check (only to it: not its process group) reaches
/// the stress too: the run stops and saves what it measured, check.json
/// says which signal, and both exit 128 + N.
#[test]
fn a_stop_signal_ends_the_stress_and_the_check_saying_so() {
    let dir = tempfile::tempdir().unwrap();
    let pmu_file = dir.path().join("pmu.json");
    let pmu = FakePmu::new(fixture(GRAVITON2), &[]);
    std::fs::write(&pmu_file, serde_json::to_string(&pmu).unwrap()).unwrap();
    // Long enough in real time (some seconds) to be stopped on the way.
    let steps = [Step::Switch { before_due: 99_000 }, Step::OVERFLOW].repeat(100_000);
    let scripted = Scripted {
        machine: fixture(GRAVITON2),
        cpus: vec![0, 1],
        script: Script::default().worker(steps.clone()).worker(steps),
    };
    let script_file = dir.path().join("script.json");
    std::fs::write(&script_file, serde_json::to_string(&scripted).unwrap()).unwrap();
    let out_dir = dir.path().join("c");
    let child = crate::util::pmustress_child()
        .env(PMU_ENV, &pmu_file)
        .env(SCRIPT_ENV, &script_file)
        .args(["check", "--duration", "1h", "--out"])
        .arg(&out_dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The stress has started once its run.json is there (a minute is a
    // stress that never starts: a failure, not a wait).
    let started = std::time::Instant::now();
    while !out_dir.join("stress/run.json").exists() {
        assert!(started.elapsed().as_secs() < 60, "the stress never started");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    crate::util::send_signal(child.id() as i32, libc::SIGTERM);
    let out = child.wait_with_output().unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(143),
        "{stdout}{}",
        text(&out.stderr)
    );
    assert!(stdout.contains("stopped by signal 15"), "{stdout}");
    let doc = check_json(dir.path());
    assert_eq!(doc["interrupted_by"], 15);
    assert_eq!(doc["exit_status"], 143);
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("stress/run.json")).unwrap())
            .unwrap();
    assert_eq!(run["verdict"], "interrupted");
    assert_eq!(run["exit_status"], 143);
}
