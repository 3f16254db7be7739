//! Every bad command line exits 2 with one line that names the flag.

use crate::util::run;

/// (arguments after `run`, the flag the error must name)
const BAD: &[(&[&str], &str)] = &[
    (&["--period", "0"], "--period"),
    (&["--period", "-5"], "--period"),
    (&["--period", "abc"], "--period"),
    (&["--period", "99999999999999999999999"], "--period"),
    (
        &[
            "--event",
            "task-clock",
            "--period",
            "100000",
            "--skid",
            "100000",
        ],
        "--skid",
    ),
    (
        &[
            "--event",
            "task-clock",
            "--period",
            "100000",
            "--skid",
            "2000000",
        ],
        "--skid",
    ),
    (&["--event", "task-clock", "--period", "1000"], "--period"),
    (&["--skid", "x"], "--skid"),
    (&["--cpus", "5-3"], "--cpus"),
    (&["--cpus", ""], "--cpus"),
    (&["--cpus", "0,0"], "--cpus"),
    (&["--cpus", "a-b"], "--cpus"),
    (&["--event", "task-clock", "--cpus", "1000"], "--cpus"),
    (&["--event", "task-clock", "--cpus", "0"], "--migrate"),
    (&["--event", "foo"], "--event"),
    (&["--event", "r"], "--event"),
    (&["--event", "rzz"], "--event"),
    (&["--duration", "10x"], "--duration"),
    (&["--duration", "1.5"], "--duration"),
    (&["--duration", "0s"], "--duration"),
    (&["--migrate-interval", "soon"], "--migrate-interval"),
    (
        &["--migrate", "none", "--migrate-interval", "1ms"],
        "--migrate-interval",
    ),
    (&["--migrate", "none", "--migrators", "1"], "--migrators"),
    (&["--migrate", "none", "--move", "any"], "--move"),
    (&["--seed", "7"], "--seed"),
    (&["--migrate", "round-robin", "--seed", "7"], "--seed"),
    (&["--workers", "0"], "--workers"),
    (&["--workers", "100000"], "--workers"),
    (&["--interrupts", "0"], "--interrupts"),
    (&["--inject-drop-every", "1"], "--inject-drop-every"),
    (
        &["--inject-drop-every", "40", "--bad-rate", "0.001"],
        "--inject-drop-every",
    ),
    (
        &[
            "--inject-drop-every",
            "40",
            "--baseline",
            "tests/fixtures/qemu/nopnmi-migrate",
        ],
        "--inject-drop-every",
    ),
    (&["--migrate", "sideways"], "--migrate"),
    (&["--mode", "chaos"], "--mode"),
    (&["--event", "task-clock", "--out", "/etc/passwd"], "--out"),
    (&["--event", "task-clock", "--out", "/dev/null"], "--out"),
    // Huge, negative and malformed numbers on every numeric flag.
    (&["--period", "18446744073709551616"], "--period"),
    (&["--skid", "99999999999999999999999"], "--skid"),
    (&["--skid", "-1"], "--skid"),
    (&["--workers", "-1"], "--workers"),
    (&["--workers", "1025"], "--workers"),
    (&["--interrupts", "-3"], "--interrupts"),
    (&["--stop-after-anomalies", "0"], "--stop-after-anomalies"),
    (
        &["--inject-drop-every", "99999999999999999999"],
        "--inject-drop-every",
    ),
    (&["--max-count-rate", "0"], "--max-count-rate"),
    (&["--max-count-rate", "-1G"], "--max-count-rate"),
    (&["--max-count-rate", "fast"], "--max-count-rate"),
    (&["--max-count-rate", "1T"], "--max-count-rate"),
    (&["--max-count-rate", "1e9"], "--max-count-rate"),
    (&["--max-count-rate", "99999999G"], "--max-count-rate"),
    (&["--driver-rules", "fixed"], "--driver-rules"),
    (&["--driver-rules", ""], "--driver-rules"),
    (&["--max-anomaly-lines", "-1"], "--max-anomaly-lines"),
    (&["--max-anomaly-lines", "x"], "--max-anomaly-lines"),
    // Durations: negative, zero, scientific, beyond what a Duration holds.
    (&["--duration", "-5s"], "--duration"),
    (&["--duration", "1e3s"], "--duration"),
    (&["--duration", "99999999999999999999h"], "--duration"),
    (&["--migrate-interval", "-1ms"], "--migrate-interval"),
    (&["--watchdog", "0s"], "--watchdog"),
    (&["--watchdog", "-1s"], "--watchdog"),
    // Below the watchdog's floor: it would stop healthy workers.
    (&["--watchdog", "1ns"], "--watchdog"),
    (&["--watchdog", "49ms"], "--watchdog"),
    // Beyond a year, or beyond 64-bit nanoseconds (which used to wrap:
    // 18446744074s ran 0.29 s), and periods the kernel would reject.
    (&["--duration", "18446744074s"], "--duration"),
    (&["--duration", "1000y"], "--duration"),
    (&["--duration", "366d"], "--duration"),
    (&["--watchdog", "1000y"], "--watchdog"),
    (
        &["--migrate-interval", "18446744074s"],
        "--migrate-interval",
    ),
    (
        &["--event", "task-clock", "--period", "9223372036854775808"],
        "--period",
    ),
    (&["--skid", "9223372036854775808"], "--skid"),
    // Negative rates are values, not flags; an empty --out is no path.
    (&["--bad-rate", "-0.1"], "--bad-rate"),
    (&["--confidence", "-0.5"], "--confidence"),
    (&["--out", ""], "--out"),
    // CPU lists: duplicates through a range, open ranges, beyond any CPU,
    // and CPUs that exist nowhere or not for this process.
    (&["--cpus", "0-1,1"], "--cpus"),
    (&["--cpus", "0-"], "--cpus"),
    (&["--cpus", ","], "--cpus"),
    (&["--cpus", "0-4294967295"], "--cpus"),
    (&["--cpus", "99999999999"], "--cpus"),
    (&["--event", "task-clock", "--cpus", "4095"], "--cpus"),
    // perf's syntax, malformed or asking what pmustress cannot count:
    // kernel mode alone, precision modifiers, a term that is no NAME=VALUE,
    // user mode only beside --include-kernel.
    (&["-e", "instructions:k"], "--event"),
    (&["--event", "cycles:pp"], "--event"),
    (&["--event", "cpu/event 0xc4/"], "--event"),
    (&["--event", "cpu//"], "--event"),
    (
        &["--event", "instructions:u", "--include-kernel"],
        "--event",
    ),
    // Events: case, empty, too many hex digits.
    (&["--event", "BRANCHES"], "--event"),
    (&["--event", ""], "--event"),
    (&["--event", "r12345678901234567"], "--event"),
    // Usage errors with the default event (branches), which this VM
    // cannot count: still 2, found before any event is looked up.
    (&["--baseline", "/nonexistent"], "--baseline"),
    (&["--period", "1000", "--skid", "1000"], "--skid"),
    (
        &["--period", "1000", "--interrupt-skid", "1000"],
        "--interrupt-skid",
    ),
    (&["--interrupt-skid", "-1"], "--interrupt-skid"),
    // A rate no run could bound (more than 2^64 overflows needed).
    (&["--bad-rate", "1e-300"], "--bad-rate"),
    // Conflicting flags.
    (
        &[
            "--event",
            "task-clock",
            "--migrate",
            "random",
            "--cpus",
            "1",
        ],
        "--migrate",
    ),
    (
        &[
            "--event",
            "cpu-clock",
            "--period",
            "60000",
            "--skid",
            "60000",
        ],
        "--skid",
    ),
];

/// Words that introduce the accepted form in every message.
const FORM: &[&str] = &[
    "expected",
    "possible values",
    "available:",
    "must be below",
    "use --",
];

#[test]
fn bad_command_lines_exit_2_with_one_line_naming_the_flag() {
    assert!(BAD.len() >= 25);
    for (args, flag) in BAD {
        let mut argv = vec!["run"];
        argv.extend_from_slice(args);
        let out = run(&argv);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{argv:?}: {stderr}");
        assert_eq!(
            stderr.trim_end().lines().count(),
            1,
            "{argv:?}: not one line: {stderr}"
        );
        assert!(
            stderr.contains(flag),
            "{argv:?}: does not name {flag}: {stderr}"
        );
        assert!(
            FORM.iter().any(|f| stderr.contains(f)),
            "{argv:?}: does not say the accepted form: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{argv:?}: printed to stdout");
        assert!(!stderr.contains("one of: )"), "{argv:?}: {stderr}");
    }
}

/// A missing required argument is named on the one line (clap lists it on
/// a later line, which used to be dropped).
#[test]
fn missing_arguments_are_named() {
    for (args, name) in [
        (&["report"][..], "<DIR>"),
        (&["compare", "a"][..], "<B>"),
        (&["plot", "x"][..], "--output"),
        (&["completions"][..], "<SHELL>"),
    ]
    .into_iter()
    // Without the feature, plot takes any arguments (plot_missing.rs).
    .filter(|(args, _)| cfg!(feature = "plot") || args[0] != "plot")
    {
        let out = run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!("were not provided: {name}")),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn unknown_flag_is_a_usage_error() {
    let out = run(&["run", "--frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--frobnicate"));
}

/// What a perf user types or pastes from a perf report is accepted: on a
/// machine without a hardware PMU each is refused for want of one (125,
/// run.json saying so), never as a usage error (2).
#[test]
fn perf_event_spellings_are_accepted() {
    if crate::util::has_core_pmu() {
        crate::util::skipped("perf_event_spellings_are_accepted: this machine has a core PMU");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (i, spelling) in [
        "armv8_pmuv3/br_retired/",
        "cpu/branches/",
        "cpu/event=0xc4,umask=0x1/u",
        "instructions:u",
        "cycles:uk",
        "branch-misses",
        "ref-cycles",
        "r0x21",
    ]
    .into_iter()
    .enumerate()
    {
        let out_dir = dir.path().join(i.to_string());
        let out = run(&[
            "run",
            "-e",
            spelling,
            "--duration",
            "1s",
            "--out",
            out_dir.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{spelling}: {stderr}");
        assert!(
            stderr.contains("needs a hardware PMU"),
            "{spelling}: {stderr}"
        );
        let r = crate::util::read_json(&out_dir);
        assert_eq!(r["exit_status"], 125, "{spelling}");
    }
}

/// `replay` takes a bare stream's skid by the rule `run` keeps: below the
/// period (a skid above it was accepted and judged).
#[test]
fn replay_refuses_a_skid_that_run_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let stream = dir.path().join("raw.csv");
    std::fs::write(
        &stream,
        "worker,kind,time_ns,cpu,value,si_code\n0,sample,1,0,1000,\n0,signal,2,0,1001,1\n",
    )
    .unwrap();
    let s = stream.to_str().unwrap();
    for (flag, skid) in [("--skid", "1000"), ("--interrupt-skid", "5000")] {
        let o = run(&["replay", s, "--period", "1000", flag, skid]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{flag}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains(&format!(
                "{flag}: skid {skid} ({flag}) must be below the period 1000"
            )),
            "{stderr}"
        );
    }
    // Below the period it judges the stream.
    let o = run(&["replay", s, "--period", "1000", "--skid", "999", "--pmu"]);
    assert_ne!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
