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
    (&["--duration", "10"], "--duration"),
    (&["--duration", "0s"], "--duration"),
    (&["--migrate-interval", "soon"], "--migrate-interval"),
    (&["--workers", "0"], "--workers"),
    (&["--workers", "100000"], "--workers"),
    (&["--interrupts", "0"], "--interrupts"),
    (&["--inject-drop-every", "1"], "--inject-drop-every"),
    (&["--migrate", "sideways"], "--migrate"),
    (&["--mode", "chaos"], "--mode"),
    (&["--event", "task-clock", "--out", "/etc/passwd"], "--out"),
];

#[test]
fn bad_command_lines_exit_2_with_one_line_naming_the_flag() {
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
        assert!(out.stdout.is_empty(), "{argv:?}: printed to stdout");
    }
}

#[test]
fn unknown_flag_is_a_usage_error() {
    let out = run(&["run", "--frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--frobnicate"));
}
