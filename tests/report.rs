//! `pmustress report` and `compare` on recorded result directories: the
//! exact text is pinned (insta snapshots under tests/snapshots/).

use crate::util::run;

const CLEAN: &str = "tests/fixtures/results/task-clock-clean";
const INJECTED: &str = "tests/fixtures/results/task-clock-injected";

fn stdout(args: &[&str]) -> String {
    let out = run(args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn text_report_is_pinned_and_fits_72_columns() {
    let text = stdout(&["report", CLEAN, INJECTED, "--anomalies", "3"]);
    for line in text.lines() {
        assert!(line.chars().count() <= 72, "too wide: {line:?}");
        assert!(!line.contains('\x1b'), "ANSI escape in {line:?}");
    }
    insta::assert_snapshot!("report_text", text);
}

#[test]
fn markdown_report_is_pinned() {
    insta::assert_snapshot!(
        "report_markdown",
        stdout(&[
            "report",
            INJECTED,
            "--format",
            "markdown",
            "--anomalies",
            "2"
        ])
    );
}

#[test]
fn json_report_carries_rates_and_verdicts() {
    let v: serde_json::Value =
        serde_json::from_str(&stdout(&["report", CLEAN, INJECTED, "--format", "json"])).unwrap();
    assert_eq!(v[0]["verdict"], "clean");
    assert_eq!(v[1]["verdict"], "dropped");
    assert_eq!(v[1]["injected"], true);
    assert_eq!(v[1]["dropped"], v[1]["rate"]["events"]);
    assert!(v[1]["rate"]["ci_low_per_million"].as_f64().unwrap() > 0.0);
}

#[test]
fn a_directory_of_runs_is_a_group() {
    let text = stdout(&["report", "tests/fixtures/results", "--anomalies", "0"]);
    assert_eq!(
        text.matches("\n== ").count() + usize::from(text.starts_with("== ")),
        2,
        "{text}"
    );
}

#[test]
fn compare_is_pinned() {
    insta::assert_snapshot!("compare_text", stdout(&["compare", INJECTED, CLEAN]));
}

#[test]
fn report_on_a_missing_directory_is_a_usage_error() {
    let out = run(&["report", "/nonexistent/pmustress"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr)
            .trim_end()
            .lines()
            .count(),
        1
    );
}
