//! run-matrix.sh end to end: a tiny sweep on the software clock into a temp
//! directory, checked through summary.csv. Budgets are in signals
//! (`INTERRUPTS`), not seconds, so a loaded machine changes how long a case
//! takes, never what it reports.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::util::{read_json, u64_at};

const HEADER: &str = "case,event,period,workers,migrate,interval,verdict,exit_status,overflows,dropped,rate_per_million,ci_low_per_million,ci_high_per_million,signals,migrations";

/// Every variable the script reads, so a developer's own settings never
/// leak into a test.
const SETTINGS: &[&str] = &[
    "EVENTS",
    "PERIODS",
    "WORKERS",
    "MIGRATE",
    "INTERVALS",
    "DURATION",
    "INTERRUPTS",
    "CPUS",
    "RESULTS_DIR",
    "PMUSTRESS",
    "CASE_TIMEOUT",
];

fn script(env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = Command::new("bash");
    cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("run-matrix.sh"));
    for var in SETTINGS {
        cmd.env_remove(var);
    }
    cmd.env("PMUSTRESS", assert_cmd::cargo::cargo_bin("pmustress"));
    cmd.envs(env.iter().copied()).args(args);
    cmd.output().expect("bash runs run-matrix.sh")
}

/// The one matrix-* directory the script made under `root`.
fn matrix_dir(root: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .expect("the results root exists")
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let name = dirs[0].file_name().unwrap().to_str().unwrap().to_owned();
    assert!(name.starts_with("matrix-") && name.ends_with('Z'), "{name}");
    dirs[0].clone()
}

/// summary.csv as rows of fields, header checked.
fn summary_rows(matrix: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(matrix.join("summary.csv")).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(HEADER));
    let rows: Vec<Vec<String>> = lines
        .map(|l| l.split(',').map(str::to_owned).collect())
        .collect();
    for row in &rows {
        assert_eq!(row.len(), HEADER.split(',').count(), "{row:?}");
    }
    rows
}

fn describe(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn tiny_self_test_matrix_reports_each_case_and_exits_0_when_all_pass() {
    let root = tempfile::tempdir().unwrap();
    let out = script(
        &[
            ("EVENTS", "task-clock"),
            ("PERIODS", "1000000"),
            ("WORKERS", "1"),
            ("MIGRATE", "none,ping-pong"),
            ("INTERRUPTS", "200"),
        ],
        &[
            "--results",
            root.path().to_str().unwrap(),
            "--",
            "--inject-drop-every",
            "50",
        ],
    );
    let what = describe(&out);
    assert_eq!(out.status.code(), Some(0), "{what}");
    let matrix = matrix_dir(root.path());
    let rows = summary_rows(&matrix);
    let names: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(
        names,
        [
            "task-clock-p1000000-w1-none",
            "task-clock-p1000000-w1-ping-pong"
        ]
    );
    for row in &rows {
        let [
            _,
            event,
            period,
            workers,
            migrate,
            interval,
            verdict,
            status,
            overflows,
            dropped,
            rate,
            low,
            high,
            signals,
            migrations,
        ] = &row[..]
        else {
            unreachable!()
        };
        assert_eq!((event.as_str(), period.as_str()), ("task-clock", "1000000"));
        assert_eq!(workers, "1");
        let moving = migrate == "ping-pong";
        assert_eq!(interval, if moving { "0" } else { "" }, "{row:?}");
        // Each case found the drops it injected and no other: passed.
        assert_eq!(
            (verdict.as_str(), status.as_str()),
            ("self-test-passed", "0"),
            "{row:?}"
        );
        let n = |s: &String| -> u64 { s.parse().unwrap_or_else(|_| panic!("{s:?} in {row:?}")) };
        let f = |s: &String| -> f64 { s.parse().unwrap_or_else(|_| panic!("{s:?} in {row:?}")) };
        // --interrupts 200: the handler stops the worker at its 200th
        // overflow signal; the judge counts the injected ones apart.
        let json = read_json(&matrix.join(&row[0]));
        assert_eq!(
            n(signals) + u64_at(&json, "/totals/deliveries/injected"),
            200,
            "{row:?}"
        );
        assert!(n(overflows) > 0, "{row:?}");
        // The same numbers as the case's own run.json. One signal in 50 is
        // discarded, so 200 signals reveal 4 injected drops, each found.
        assert_eq!(n(dropped), u64_at(&json, "/totals/dropped_interrupts"));
        assert_eq!(n(dropped), u64_at(&json, "/totals/injected"), "{row:?}");
        assert!(n(dropped) >= 4, "{row:?}");
        assert_eq!(n(overflows), u64_at(&json, "/totals/accounted_overflows"));
        assert_eq!(n(migrations) > 0, moving, "{row:?}");
        let expected = n(dropped) as f64 / n(overflows) as f64 * 1e6;
        assert!((f(rate) - expected).abs() < 0.001, "{row:?}");
        assert!(f(low) <= f(rate) && f(rate) <= f(high), "{row:?}");
    }
    let txt = std::fs::read_to_string(matrix.join("summary.txt")).unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout, txt, "the summary is printed as saved");
    assert!(
        txt.contains(
            "2 of 2 cases run: 0 clean, 0 with dropped interrupts, 2 passed and 0 failed their self-test, 0 not judged"
        ),
        "{txt}"
    );
}

#[test]
fn failing_cases_do_not_stop_the_sweep_and_exit_125() {
    let root = tempfile::tempdir().unwrap();
    // Below the software-clock minimum: pmustress refuses each case (exit 2).
    let out = script(
        &[
            ("EVENTS", "task-clock"),
            ("PERIODS", "1000 2000"),
            ("WORKERS", "1"),
            ("MIGRATE", "none"),
            ("DURATION", "1s"),
        ],
        &["--results", root.path().to_str().unwrap()],
    );
    let what = describe(&out);
    assert_eq!(out.status.code(), Some(125), "{what}");
    let matrix = matrix_dir(root.path());
    let rows = summary_rows(&matrix);
    assert_eq!(rows.len(), 2, "{what}");
    for (row, period) in rows.iter().zip(["1000", "2000"]) {
        assert_eq!(row[0], format!("task-clock-p{period}-w1-none"));
        assert_eq!((row[6].as_str(), row[7].as_str()), ("usage-error", "2"));
        assert!(row[8..].iter().all(String::is_empty), "{row:?}");
        let stderr = std::fs::read_to_string(matrix.join(&row[0]).join("stderr.log")).unwrap();
        assert!(stderr.contains("--period"), "{stderr}");
    }
}

/// A --migrate none case is a control: a worker no one moves is stopped
/// only when the scheduler preempts it, too seldom for a clean verdict's
/// 299 stops (the quick sweep exited 125 on a healthy VM for it alone).
/// Inconclusive for that alone it is a `control`, which fails nothing but
/// judges nothing either: a sweep of controls only is still 125. How many
/// stops preemption gives depends on the machine's load, so the row is
/// checked against its own run.json.
#[test]
fn a_control_without_migration_too_short_to_judge_is_listed_as_one() {
    let root = tempfile::tempdir().unwrap();
    let out = script(
        &[
            ("EVENTS", "task-clock"),
            ("PERIODS", "1000000"),
            ("WORKERS", "1"),
            ("MIGRATE", "none"),
            ("INTERRUPTS", "300"),
        ],
        &["--results", root.path().to_str().unwrap()],
    );
    let what = describe(&out);
    let matrix = matrix_dir(root.path());
    let rows = summary_rows(&matrix);
    assert_eq!(rows.len(), 1, "{what}");
    let json = read_json(&matrix.join(&rows[0][0]));
    let reasons: Vec<&str> = json["inconclusive_because"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    if json["verdict"] == "clean" {
        assert_eq!(
            (rows[0][6].as_str(), out.status.code()),
            ("clean", Some(0)),
            "{what}"
        );
    } else {
        assert!(
            !reasons.is_empty() && reasons.iter().all(|r| r.starts_with("not enough stops:")),
            "{reasons:?}"
        );
        assert_eq!(
            (rows[0][6].as_str(), rows[0][7].as_str()),
            ("control", "125"),
            "{what}"
        );
        assert_eq!(out.status.code(), Some(125), "{what}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(
                "    a control without migration, too few stops to judge: not enough stops:"
            ),
            "{stderr}"
        );
    }
}

#[test]
fn a_case_over_its_time_limit_is_stopped_and_the_sweep_goes_on() {
    let root = tempfile::tempdir().unwrap();
    let out = script(
        &[
            ("EVENTS", "task-clock"),
            ("PERIODS", "1000000"),
            ("WORKERS", "1"),
            ("MIGRATE", "none ping-pong"),
            ("DURATION", "1h"),
            ("CASE_TIMEOUT", "1"),
        ],
        &["--results", root.path().to_str().unwrap()],
    );
    let what = describe(&out);
    assert_eq!(out.status.code(), Some(125), "{what}");
    let matrix = matrix_dir(root.path());
    let rows = summary_rows(&matrix);
    assert_eq!(rows.len(), 2, "{what}");
    for row in &rows {
        assert_eq!(row[6], "timeout", "{row:?}");
        // SIGINT at the limit (SIGKILL 10 s later if that did not stop it).
        assert!(["130", "137"].contains(&row[7].as_str()), "{row:?}");
        // pmustress saves what it measured when SIGINT stops it (unless
        // the signal came before its handlers were installed).
        let dir = matrix.join(&row[0]);
        if dir.join("run.json").exists() {
            let json = read_json(&dir);
            assert_eq!(json["verdict"], "interrupted");
            assert_eq!(
                row[8],
                u64_at(&json, "/totals/accounted_overflows").to_string()
            );
        }
    }
}

#[test]
fn dry_run_lists_the_product_and_runs_nothing() {
    let root = tempfile::tempdir().unwrap();
    let out = script(
        &[
            ("EVENTS", "task-clock cpu-clock"),
            ("PERIODS", "100000,1000000"),
            ("WORKERS", "1 2 1"),
            ("MIGRATE", "none random"),
            ("INTERVALS", "0 1ms"),
        ],
        &["--dry-run", "--results", root.path().to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut lines = stdout.lines();
    // 2 events x 2 periods x 2 worker counts x (none + random x 2 intervals).
    assert_eq!(lines.next(), Some("24 cases (30s each):"));
    let names: Vec<&str> = lines.map(|l| l.split(':').next().unwrap()).collect();
    assert_eq!(names.len(), 24);
    assert_eq!(
        names[..4],
        [
            "task-clock-p100000-w1-none",
            "task-clock-p100000-w1-random",
            "task-clock-p100000-w1-random-i1ms",
            "task-clock-p100000-w2-none",
        ]
    );
    assert_eq!(names[23], "cpu-clock-p1000000-w2-random-i1ms");
    assert!(stdout.contains(
        "cpu-clock-p1000000-w2-random-i1ms: pmustress run --event cpu-clock --period 1000000 --workers 2 --migrate random --migrate-interval 1ms --duration 30s --out DIR/"
    ));
    assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
}

#[test]
fn bad_settings_are_usage_errors() {
    for (env, args) in [
        (vec![("MIGRATE", "sideways")], vec![]),
        (vec![("WORKERS", "0")], vec![]),
        (vec![], vec!["--bogus"]),
        (vec![], vec!["--events"]),
    ] {
        let out = script(&env, &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{env:?} {args:?}: {stderr}");
        assert!(stderr.starts_with("run-matrix.sh: "), "{stderr}");
    }
}
