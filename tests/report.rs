//! `pmustress report` and `compare` on recorded result directories: the
//! exact text is pinned (insta snapshots under tests/snapshots/).

use crate::util::{run, stdout_of as stdout};

const CLEAN: &str = "tests/fixtures/results/task-clock-clean";
const INJECTED: &str = "tests/fixtures/results/task-clock-injected";
/// Recorded by `qemu/run.sh` on Linux 6.1's arm64 PMU driver (QEMU, cycles,
/// period 100000, ping-pong migration), pseudo-NMI off and on.
const ARM64_NOPNMI: &str = "tests/fixtures/qemu/nopnmi-migrate";
const ARM64_PNMI: &str = "tests/fixtures/qemu/pnmi-migrate";

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

/// The bug on the real driver, as a maintainer would read it: the verdict,
/// the pseudo-NMI state with its evidence, and each drop shown as two
/// interrupts exactly two periods apart.
#[test]
fn arm64_report_shows_lost_interrupts_as_two_periods_between_interrupts() {
    let text = stdout(&["report", ARM64_NOPNMI, "--anomalies", "1000"]);
    assert!(text.contains("(verdict: dropped, exit 1)"), "{text}");
    assert!(text.contains("pseudo-NMI: disabled"), "{text}");
    assert!(text.contains("skid 40000, interrupt skid 0"), "{text}");
    let drops: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("dropped-interrupt ("))
        .collect();
    assert!(!drops.is_empty(), "{text}");
    // The wrapped continuation holds the gap; every drop's is 2 periods.
    let gaps = text.matches("interrupts 200000 apart").count();
    let v: serde_json::Value =
        serde_json::from_str(&stdout(&["report", ARM64_NOPNMI, "--format", "json"])).unwrap();
    assert_eq!(gaps as u64, v[0]["dropped"].as_u64().unwrap(), "{text}");
    let text = stdout(&["report", ARM64_PNMI]);
    assert!(text.contains("(verdict: clean, exit 0)"), "{text}");
    assert!(text.contains("pseudo-NMI: enabled"), "{text}");
    assert!(text.contains("using NMIs"), "{text}");
}

#[test]
fn arm64_pseudo_nmi_off_and_on_differ_significantly() {
    let text = stdout(&["compare", ARM64_NOPNMI, ARM64_PNMI]);
    assert!(
        text.contains("rate ratio A/B: infinite (B has no drops)"),
        "{text}"
    );
    assert!(text.contains("the rates"), "{text}");
    assert!(text.contains("differ (p < 0.05)"), "{text}");
}
