//! Bisect mode: run until zero drops would prove the rate below R, stop
//! as bad at the first drop, and never call a short run good.

use crate::util::{run, run_measured, u64_at};

fn bisect(extra: &[&str]) -> (Option<i32>, String, serde_json::Value) {
    let _machine = crate::util::shared_machine();
    let argv = [
        &["--event", "task-clock", "--migrate-interval", "1ms"],
        extra,
    ]
    .concat();
    run_measured(&argv)
}

#[test]
fn enough_clean_overflows_make_a_good_kernel() {
    let (code, stdout, r) = bisect(&["--bad-rate", "0.001", "--confidence", "0.99"]);
    // ln(0.01) / ln(1 - 0.001) = 4602.9 -> 4603 overflows.
    assert!(
        stdout.contains("zero dropped interrupts in 4603 overflows"),
        "{stdout}"
    );
    assert_eq!(code, Some(0), "{stdout}");
    assert_eq!(r["stop_reason"], "bisect-good");
    assert_eq!(u64_at(&r, "/config/bisect/overflows_needed"), 4603);
    assert!(u64_at(&r, "/totals/accounted_overflows") >= 4603);
}

#[test]
fn a_run_cut_short_is_never_good() {
    let (code, stdout, r) = bisect(&["--bad-rate", "0.000001", "--duration", "1s"]);
    assert_eq!(code, Some(125), "{stdout}");
    assert!(
        r["inconclusive_because"]
            .to_string()
            .contains("bisect: only"),
        "{r:#}"
    );
}

/// The recorded arm64 run without pseudo-NMI: 72 dropped of 14918.
const BAD_RUN: &str = "tests/fixtures/qemu/nopnmi-migrate";

/// A self-test's drops are injected, and a killed run has no counts:
/// neither defines a bad rate (both were taken, the killed one refused
/// only for "no dropped interrupt").
#[test]
fn a_self_test_or_a_killed_run_is_no_baseline() {
    for (dir, why) in [
        (
            "tests/fixtures/results/task-clock-injected",
            "is a self-test",
        ),
        ("tests/fixtures/bad-results/killed", "did not finish"),
    ] {
        let o = run(&["run", "--event", "task-clock", "--baseline", dir]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains("--baseline") && stderr.contains(dir) && stderr.contains(why),
            "{stderr}"
        );
    }
}

#[test]
fn a_clean_baseline_cannot_define_a_bad_rate() {
    let o = run(&[
        "run",
        "--event",
        "task-clock",
        "--baseline",
        "tests/fixtures/results/task-clock-clean",
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--baseline"), "{stderr}");
}

/// `--replace` removes the result files of `--out`: with the baseline's
/// own directory there, the run deleted the evidence it was about to read.
#[test]
fn the_baseline_is_never_the_results_directory() {
    let dir = tempfile::tempdir().unwrap();
    let baseline = dir.path().join("bad");
    crate::util::copy_run(BAD_RUN, &baseline, |_| {});
    let before = std::fs::read(baseline.join("run.json")).unwrap();
    let b = baseline.to_str().unwrap();
    // The same directory by another spelling too.
    let other = format!("{}/../bad", b);
    for out in [b, other.as_str()] {
        let o = run(&[
            "run",
            "--event",
            "task-clock",
            "--duration",
            "1s",
            "--baseline",
            b,
            "--out",
            out,
            "--replace",
        ]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains("--out") && stderr.contains("--baseline"),
            "{stderr}"
        );
        assert_eq!(std::fs::read(baseline.join("run.json")).unwrap(), before);
    }
}
