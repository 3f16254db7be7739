//! Any command line either parses into a validated run configuration or is
//! one usage line naming an argument (exit 2): never a panic, never a
//! number that wraps. Checked at the config layer, where `main` decides,
//! without running anything.

use std::time::Duration;

use clap::Parser;
use proptest::prelude::*;

use pmustress::cli::validate::ConfigError;
use pmustress::cli::{Cli, Command, MAX_DURATION, MAX_PERIOD, usage_line};
use pmustress::config::RunConfig;
use pmustress::config::event::Platform;

const FLAGS: &[&str] = &[
    "--event",
    "--period",
    "--skid",
    "--workers",
    "--cpus",
    "--migrate",
    "--migrate-interval",
    "--duration",
    "--interrupts",
    "--stop-after-anomalies",
    "--bad-rate",
    "--baseline",
    "--confidence",
    "--include-kernel",
    "--mode",
    "--inject-drop-every",
    "--watchdog",
    "--out",
    "--replace",
    "--raw",
    "--max-anomaly-lines",
    "--help-me",
    "-x",
    "--format",
    "--root",
    "--json",
    "--anomalies",
];

const WORDS: &[&str] = &[
    "task-clock",
    "cpu-clock",
    "branches",
    "r1c4",
    "none",
    "ping-pong",
    "random",
    "free",
    "reset",
    "0-1",
    "0,1",
    "1",
    "",
    "-",
    "--",
    "-0",
    "-0.1",
    "0.5",
    "1e-300",
    "nan",
    "inf",
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/results/task-clock-injected"
    ),
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/qemu/nopnmi-migrate"
    ),
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/bad-results/killed"
    ),
    "/nonexistent",
    "bash",
    "json",
];

/// Numbers around every limit: u64 and i64 edges, nanosecond overflow
/// (18446744074 s), and more digits than any integer holds.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<u64>().prop_map(|n| n.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        (0u64..100_000).prop_map(|n| n.to_string()),
        Just("18446744073709551615".to_string()),
        Just("18446744073709551616".to_string()),
        Just("9223372036854775807".to_string()),
        Just("9223372036854775808".to_string()),
        Just("99999999999999999999999999".to_string()),
    ]
}

fn duration() -> impl Strategy<Value = String> {
    let unit = prop::sample::select(vec![
        "ns", "us", "ms", "s", "m", "h", "d", "w", "M", "y", "",
    ]);
    prop_oneof![
        (number(), unit.clone()).prop_map(|(n, u)| format!("{n}{u}")),
        (0u64..20_000_000_000, unit).prop_map(|(n, u)| format!("{n}{u}")),
        Just("18446744074s".to_string()),
        Just("1000y".to_string()),
        Just("1h 30m".to_string()),
    ]
}

fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(FLAGS).prop_map(str::to_string),
        2 => number(),
        2 => duration(),
        2 => prop::sample::select(WORDS).prop_map(str::to_string),
        1 => "[ -~\t\u{1b}]{0,12}",
    ]
}

fn argv() -> impl Strategy<Value = Vec<String>> {
    let command = prop::sample::select(vec![
        "run",
        "run",
        "run",
        "report",
        "compare",
        "plot",
        "env",
        "replay",
        "completions",
        "man",
        "bogus",
    ]);
    (command, prop::collection::vec(token(), 0..8)).prop_map(|(c, rest)| {
        let mut argv = vec!["pmustress".to_string(), c.to_string()];
        argv.extend(rest);
        argv
    })
}

fn no_pmu() -> Platform {
    Platform {
        arch: "x86_64".into(),
        ..Platform::default()
    }
}

/// A usage message is one line that names an argument: a flag, a
/// <VALUE>, or the offending word in quotes.
fn names_an_argument(line: &str) -> bool {
    line.contains("--") || line.contains('<') || line.contains('\'')
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).expect("a duration that fits in u64 ns")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn any_command_line_parses_or_names_an_argument(argv in argv()) {
        let cli = match Cli::try_parse_from(&argv) {
            Ok(cli) => cli,
            Err(e) if !e.use_stderr() => return Ok(()), // --help, --version
            Err(e) => {
                let line = usage_line(&e, &argv);
                prop_assert!(!line.contains('\n'), "{argv:?}: {line}");
                prop_assert!(names_an_argument(&line), "{argv:?}: {line}");
                prop_assert!(!line.contains("one of: )"), "{argv:?}: {line}");
                return Ok(());
            }
        };
        let Command::Run(args) = cli.command else {
            return Ok(());
        };
        match RunConfig::from_args(&args, &[0, 1], &no_pmu()) {
            Ok(cfg) => {
                // Every duration and count as given, never wrapped.
                prop_assert!(args.duration.is_none_or(|d| d <= MAX_DURATION));
                if let Some(d) = args.duration {
                    prop_assert_eq!(cfg.duration_ns, Some(ns(d)));
                }
                prop_assert_eq!(cfg.watchdog_ns, ns(args.watchdog));
                // As given, or the default of the 2 CPUs given here.
                let interval = args
                    .migrate_interval
                    .unwrap_or(pmustress::config::StressDefaults::for_cpus(2).migrate_interval);
                prop_assert_eq!(cfg.migrate_interval_ns, ns(interval));
                prop_assert!(cfg.watchdog_ns > 0);
                prop_assert!((1..=MAX_PERIOD).contains(&cfg.period));
                prop_assert!(cfg.skid < cfg.period);
                prop_assert!((1..=1024).contains(&cfg.workers));
            }
            Err(e @ ConfigError::Usage { .. }) => {
                let line = format!("error: {e}");
                prop_assert!(!line.contains('\n'), "{argv:?}: {line}");
                let ConfigError::Usage { flag, .. } = e else { unreachable!() };
                prop_assert!(flag.starts_with("--"), "{argv:?}: {flag}");
            }
            // A hardware event on a machine without a PMU: 125, not usage.
            Err(ConfigError::CannotTest(m)) => {
                prop_assert!(!m.contains('\n'), "{argv:?}: {m}");
            }
        }
    }
}

/// How this machine would take a `run` command line: a usage error (the
/// flag), or something else (it would run, or say 125).
fn run_usage_error(argv: &[String]) -> Option<String> {
    let cli = match Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => return None,
        Err(e) => return Some(usage_line(&e, argv)),
    };
    let Command::Run(args) = cli.command else {
        return None;
    };
    let allowed = pmustress::engine::kernel::allowed_cpus().expect("sched_getaffinity");
    let fingerprint = pmustress::fingerprint::Fingerprint::collect(std::path::Path::new("/"));
    let platform = Platform::from_fingerprint(&fingerprint);
    match RunConfig::from_args(&args, &allowed, &platform) {
        Err(e @ ConfigError::Usage { .. }) => Some(e.to_string()),
        _ => None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// The same through the binary, in an empty directory: a usage error
    /// exits 2 with one line naming an argument and nothing on stdout,
    /// before anything is opened (no results directory appears); any other
    /// command line ends in a documented status (0, 2, 125) with a line of
    /// its own, never a panic (101) or a signal. `run` lines that would
    /// measure are left to the in-process test above.
    #[test]
    fn the_binary_runs_or_exits_2_with_one_line(argv in argv()) {
        let is_run = argv.get(1).is_some_and(|c| c == "run");
        let usage = run_usage_error(&argv);
        if is_run && usage.is_none() {
            return Ok(());
        }
        let cwd = tempfile::tempdir().unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_pmustress"))
            .args(&argv[1..])
            .current_dir(cwd.path())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let code = out.status.code();
        prop_assert!(!stderr.contains("panicked"), "{argv:?}: {stderr}");
        prop_assert!(matches!(code, Some(0 | 2 | 125)), "{argv:?}: {code:?} {stderr}");
        if code == Some(2) {
            let line = stderr.trim_end();
            prop_assert!(!line.is_empty() && !line.contains('\n'), "{argv:?}: {stderr}");
            // Without the `plot` feature, plot's one line names the
            // feature, not an argument (plot_missing.rs checks it).
            let no_plot = !cfg!(feature = "plot") && argv[1] == "plot";
            prop_assert!(no_plot || names_an_argument(line), "{argv:?}: {line}");
            prop_assert!(out.stdout.is_empty(), "{argv:?}");
        }
        if code == Some(125) {
            prop_assert!(stderr.trim_end().lines().count() >= 1, "{argv:?}: silent 125");
        }
        if is_run {
            prop_assert_eq!(code, Some(2), "{:?}: {:?}", argv, usage);
            let left: Vec<_> = std::fs::read_dir(cwd.path()).unwrap().collect();
            prop_assert!(left.is_empty(), "{argv:?} left {left:?}");
        }
    }
}
