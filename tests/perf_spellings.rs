//! perf's spellings and one spelling across commands: `run -e -d -o -C` as
//! perf writes them, `--duration 90` as seconds, `--output` beside `--out`
//! (and `plot --out` beside its `--output`), `--json` wherever `--format
//! json` is taken and `env --format json` beside its `--json`. The old
//! spellings keep working.

use std::time::Duration;

use clap::Parser as _;
use pmustress::cli::{Cli, Command};

use crate::util::{read_json, run, shared_machine, stdout_of};

const CLEAN: &str = "tests/fixtures/results/task-clock-clean";

fn run_args(argv: &[&str]) -> Box<pmustress::cli::RunArgs> {
    let argv: Vec<&str> = ["pmustress", "run"].iter().chain(argv).copied().collect();
    match Cli::try_parse_from(&argv)
        .unwrap_or_else(|e| panic!("{argv:?}: {e}"))
        .command
    {
        Command::Run(args) => args,
        other => panic!("{other:?}"),
    }
}

#[test]
fn run_takes_perfs_short_options_and_bare_seconds() {
    for (argv, secs) in [
        (&["-d", "90"][..], 90),
        (&["--duration", "90"], 90),
        (&["--duration", "90s"], 90),
        (&["-d", "2m"], 120),
    ] {
        assert_eq!(
            run_args(argv).duration,
            Some(Duration::from_secs(secs)),
            "{argv:?}"
        );
    }
    for flag in ["-o", "--out", "--output"] {
        assert_eq!(
            run_args(&[flag, "some/dir"]).out.as_deref(),
            Some(std::path::Path::new("some/dir")),
            "{flag}"
        );
    }
    // perf's -C/--cpu beside --cpus, in taskset syntax.
    for flag in ["-C", "--cpu", "--cpus"] {
        assert_eq!(
            run_args(&[flag, "0-1,3"]).cpus.map(|c| c.0),
            Some(vec![0, 1, 3]),
            "{flag}"
        );
    }
    // A bad list names the flag by its long name, whichever was typed.
    let out = run(&["run", "-C", "5-3"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--cpus"), "{err}");
    // A bare number is whole seconds; nothing else changed.
    for bad in ["0", "1.5", "-3"] {
        let out = run(&["run", "--duration", bad]);
        assert_eq!(out.status.code(), Some(2), "--duration {bad}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("--duration"), "{err}");
    }
}

/// The whole command as a perf user types it, on a software clock (any
/// machine has one): its results land where -o says, measured for -d.
#[test]
fn run_e_d_o_runs_and_writes_where_o_says() {
    let _machine = shared_machine();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let status = run(&[
        "run",
        "-e",
        "task-clock",
        "-d",
        "1",
        "-o",
        out.to_str().unwrap(),
    ])
    .status
    .code();
    let v = read_json(&out);
    assert_eq!(v["exit_status"].as_i64().map(|s| s as i32), status);
    assert_eq!(v["config"]["duration_ns"], 1_000_000_000u64);
    assert_eq!(v["config"]["event"]["spec"], "task-clock");
}

#[test]
fn json_is_one_spelling_across_commands() {
    for cmd in [&["report"][..], &["compare", CLEAN]] {
        let with = |extra: &[&str]| {
            let mut argv: Vec<&str> = cmd.to_vec();
            argv.extend_from_slice(extra);
            argv.push(CLEAN);
            stdout_of(&argv)
        };
        let json = with(&["--json"]);
        assert!(json.starts_with(['{', '[']), "{json}");
        assert_eq!(json, with(&["--format", "json"]), "{cmd:?}");
        // Two answers to one question: refused, naming the flags.
        let mut argv: Vec<&str> = cmd.to_vec();
        argv.extend_from_slice(&["--json", "--format", "text", CLEAN]);
        let out = run(&argv);
        assert_eq!(out.status.code(), Some(2), "{cmd:?}");
        assert!(String::from_utf8(out.stderr).unwrap().contains("--json"));
    }
    let env = stdout_of(&["env", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&env).unwrap();
    assert_eq!(v["tool"]["name"], "pmustress");
    assert!(stdout_of(&["env", "--format", "text"]).starts_with("pseudo-NMI"));
    assert_eq!(run(&["env", "--format", "markdown"]).status.code(), Some(2));
}

#[cfg(feature = "plot")]
#[test]
fn plot_takes_out_beside_output() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("p.svg");
    stdout_of(&["plot", CLEAN, "--out", image.to_str().unwrap()]);
    assert!(std::fs::metadata(&image).unwrap().len() > 0);
}
