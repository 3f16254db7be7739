//! The interrupt skid a run's judge takes for on time: measured on the
//! event before the run (the fake PMU's skid here, on the fake kernel of a
//! Graviton2, whose CPU table says 1,000), never a table figure the PMU
//! exceeds; given by a flag, taken as given.

use std::path::Path;
use std::process::Output;

use pmustress::testkit::fake_kernel::{SCRIPT_ENV, Script, Scripted, Step};
use pmustress::testkit::fake_pmu::{FakePmu, Fault, PMU_ENV};

use crate::util::{pmustress, read_json, unwrapped};

fn graviton2() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fingerprint/graviton2-c6g-6.1-disabled")
}

/// `pmustress run ARGS --out DIR/r` of one worker's 400 overflows on the
/// fake kernel, its interrupt skid probed on a fake PMU with `faults`.
fn run_on(faults: &[Fault], args: &[&str], dir: &Path) -> Output {
    let pmu_file = dir.join("pmu.json");
    let pmu = FakePmu::new(graviton2(), faults);
    std::fs::write(&pmu_file, serde_json::to_string(&pmu).unwrap()).unwrap();
    let script_file = dir.join("script.json");
    let scripted = Scripted {
        machine: graviton2(),
        cpus: vec![0, 1],
        script: Script::default().worker([Step::OVERFLOW].repeat(400)),
    };
    std::fs::write(&script_file, serde_json::to_string(&scripted).unwrap()).unwrap();
    pmustress()
        .env(PMU_ENV, &pmu_file)
        .env(SCRIPT_ENV, &script_file)
        .args([
            "run",
            "--workers",
            "1",
            "--migrate",
            "none",
            "--duration",
            "200ms",
        ])
        .args(args)
        .arg("--out")
        .arg(dir.join("r"))
        .output()
        .unwrap()
}

/// The run's config, once it is sure the run measured and was judged (too
/// short to be clean: inconclusive, never refused).
fn judged_config(out: &Output, dir: &Path) -> serde_json::Value {
    let run = read_json(&dir.join("r"));
    assert_eq!(
        run["verdict"],
        "inconclusive",
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    run["config"].clone()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// What the command said, its wrapped lines joined again.
fn said(out: &Output) -> String {
    unwrapped(&(text(&out.stdout) + &text(&out.stderr)))
}

/// A PMU that skids past its table's figure is judged by what it does:
/// the run's interrupt skid is the one measured, recorded with what the
/// measure saw, and said before the run and in the report.
#[test]
fn a_pmu_that_skids_past_its_table_is_judged_by_its_measured_skid() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_on(&[Fault::Skid(4_321)], &[], dir.path());
    let stdout = text(&out.stdout);
    let config = &judged_config(&out, dir.path());
    assert_eq!(config["skid"], 1_000, "{config:#}");
    assert_eq!(config["interrupt_skid"], 4_321, "{config:#}");
    let measured = &config["interrupt_skid_measured"];
    assert_eq!(
        (&measured["max"], &measured["p50"], &measured["missed"]),
        (&4_321.into(), &4_321.into(), &0.into()),
        "{measured:#}"
    );
    assert_eq!(measured["overflows"], 500, "{measured:#}");
    let said = ", interrupt skid 4321 (measured before the run: 500 overflows every 200000, past due p50 4321, p99 4321, max 4321)";
    assert!(self::said(&out).contains(said), "{stdout}");
    let report = pmustress()
        .args(["report"])
        .arg(dir.path().join("r"))
        .output()
        .unwrap();
    assert!(
        self::said(&report).contains(said),
        "{}",
        text(&report.stdout)
    );
}

/// A PMU that skids less than its table says keeps the table's figure
/// (rr's, for this core), and the measure is recorded beside it; one that
/// loses overflows while measured says how many.
#[test]
fn the_table_figure_stays_where_the_pmu_skids_less_and_missed_overflows_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_on(&[Fault::Skid(40), Fault::LoseEvery(100)], &[], dir.path());
    let config = &judged_config(&out, dir.path());
    assert_eq!(config["interrupt_skid"], 1_000, "{config:#}");
    let measured = &config["interrupt_skid_measured"];
    assert_eq!(
        (&measured["max"], &measured["missed"]),
        (&40.into(), &5.into()),
        "{measured:#}"
    );
    assert!(
        said(&out).contains(", 5 without an interrupt)"),
        "{}",
        said(&out)
    );
}

/// `--interrupt-skid` (or `--skid`) is taken as given: nothing measured.
#[test]
fn a_given_interrupt_skid_is_not_measured() {
    for args in [&["--interrupt-skid", "250"][..], &["--skid", "250"][..]] {
        let dir = tempfile::tempdir().unwrap();
        let out = run_on(&[Fault::Skid(4_321)], args, dir.path());
        let config = &judged_config(&out, dir.path());
        assert_eq!(config["interrupt_skid"], 250, "{args:?}: {config:#}");
        assert!(
            config.get("interrupt_skid_measured").is_none(),
            "{config:#}"
        );
    }
}

/// A measure of a period of the run or more (a vCPU the host did not run,
/// an emulator's overflow timer) is no reason to refuse: the judge books an
/// interrupt a period late by the driver's re-base whatever the skid. It
/// is recorded as measured and judged as a period less one, and the run
/// says so.
#[test]
fn a_skid_of_a_period_or_more_is_recorded_and_judged_up_to_the_period() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_on(&[Fault::Skid(60_000)], &["--period", "50000"], dir.path());
    let config = &judged_config(&out, dir.path());
    assert_eq!(config["interrupt_skid"], 49_999, "{config:#}");
    assert_eq!(
        config["interrupt_skid_measured"]["max"], 60_000,
        "{config:#}"
    );
    assert!(
        said(&out).contains(", interrupt skid 49999 (measured before the run: 500 overflows every 200000, past due p50 60000, p99 60000, max 60000, a period of the run or more: on time up to a period)"),
        "{}",
        said(&out)
    );
}

/// Where the PMU cannot be probed, the table's figure is judged by, and
/// run.json says why it was not measured.
#[test]
fn a_skid_that_cannot_be_measured_keeps_the_table_figure_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_on(&[Fault::Denied], &[], dir.path());
    let config = &judged_config(&out, dir.path());
    assert_eq!(config["interrupt_skid"], 1_000, "{config:#}");
    let why = config["interrupt_skid_not_measured"].as_str().unwrap();
    assert!(!why.is_empty(), "{config:#}");
    assert!(
        said(&out).contains(&format!("(not measured: {why})")),
        "{}",
        said(&out)
    );
}
