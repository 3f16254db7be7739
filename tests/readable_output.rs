//! Output a maintainer reads as it is: a console that fits 100
//! columns with a line only for what can change the verdict; reports of
//! at most 72 columns that open with the loss rates and the spurious
//! interrupts, and name the date, the version and the commit; `compare`
//! that warns when its sides are not alike; `--interrupts` and `--seed`
//! that do what they say. Real runs on a software clock where a run is
//! needed, recorded fixtures elsewhere.

use std::io::Read as _;
use std::path::Path;

use crate::util::{pmustress, read_json, shared_machine, stdout_of};

const CLEAN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/results/task-clock-clean"
);
const NOPNMI: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/qemu/nopnmi-migrate"
);
const PNMI: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/qemu/pnmi-migrate"
);

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Help text as words: clap wraps it to the terminal's width.
fn one_spaced(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn widest(text: &str) -> usize {
    text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

/// `pmustress run --event task-clock ARGS --out OUT`: (status, stdout).
fn software_run(args: &[&str], out: &Path) -> (Option<i32>, String) {
    let o = pmustress()
        .args(["run", "--event", "task-clock"])
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    (o.status.code(), text(&o.stdout))
}

/// A clean two-second run on a software clock used to print 68 lines, 50
/// of them "software timer skip", the widest 188 columns. Now: a line of
/// its own only for what can change the verdict, the rest counted by kind,
/// every line within 100 columns, and the answers with their intervals.
#[test]
fn a_clean_run_prints_a_short_console_within_100_columns() {
    let _machine = shared_machine();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let (code, stdout) = software_run(&["--duration", "2s"], &out);
    assert!(matches!(code, Some(0 | 125)), "{stdout}");
    let r = read_json(&out);
    assert!(widest(&stdout) <= 100, "{stdout}");
    assert!(stdout.lines().count() <= 30, "{stdout}");
    assert!(!stdout.contains("software timer skip"), "{stdout}");
    let skips = r["totals"]["anomalies"]["software-timer-skip"]
        .as_u64()
        .unwrap_or(0);
    if skips > 0 {
        assert!(
            stdout.contains(&format!("software-timer-skip {skips}")),
            "{stdout}"
        );
    }
    let overflows = r["totals"]["accounted_overflows"].as_u64().unwrap();
    let stops = r["totals"]["stress"]["stops"].as_u64().unwrap();
    let stdout = crate::util::unwrapped(&stdout);
    assert!(
        stdout.contains("lost and spurious interrupts, per million (exact 95% interval):"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("dropped per overflow  0 of {overflows} overflows")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("dropped per stop      0 of {stops} stops")),
        "{stdout}"
    );
    assert!(stdout.contains("spurious interrupts   0 of "), "{stdout}");
}

/// Drops still get their line each (they are the verdict), within 100
/// columns.
#[test]
fn drops_keep_their_lines_within_100_columns() {
    let _machine = shared_machine();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let (code, stdout) = software_run(
        &[
            "--interrupts",
            "40",
            "--inject-drop-every",
            "10",
            "--workers",
            "1",
            "--migrate",
            "none",
        ],
        &out,
    );
    // A self-test that found its 4 drops passes.
    assert_eq!(code, Some(0), "{stdout}");
    assert!(widest(&stdout) <= 100, "{stdout}");
    let lines = stdout
        .lines()
        .filter(|l| l.starts_with("worker 0: dropped interrupt (injected)"))
        .count();
    assert_eq!(lines, 4, "{stdout}");
    plot_places_injected_drops_like_real_ones(&out);
}

/// The plot's timeline spans the whole run, and an injected drop is drawn
/// where a real one is, about 2x (it was drawn at 1x, as if on time).
#[cfg(feature = "plot")]
fn plot_places_injected_drops_like_real_ones(dir: &Path) {
    use pmustress::report::plot::RunPlot;
    use pmustress::results::loaded::LoadedRun;
    let run = LoadedRun::load(dir).unwrap();
    let p = RunPlot::from_run(&run);
    assert!(p.whole_run);
    assert_eq!(p.anomalies.len(), run.anomalies.len());
    let mut drops = 0;
    for (point, row) in p.anomalies.iter().zip(&run.anomalies) {
        assert!(
            (0.0..=p.elapsed_s).contains(&point.t),
            "{point:?} {}",
            p.elapsed_s
        );
        if row.kind == "dropped-interrupt" {
            drops += 1;
            // From the interrupt before to the one after: a period more
            // than the delta to the one discarded, at least 2x.
            let gap = row.delta as f64 / row.period as f64 + 1.0;
            assert_eq!(point.ratio, gap, "{point:?} {row:?}");
            assert!(point.ratio >= 1.5, "{point:?}");
        }
    }
    assert_eq!(drops, 4);
}

#[cfg(not(feature = "plot"))]
fn plot_places_injected_drops_like_real_ones(_: &Path) {}

/// `--interrupts N` stops each worker at its Nth overflow signal, counted
/// in the handler (it took 253 for 10 when the judge, 250 ms behind its
/// drains, decided); injected ones count, as the signals they were.
#[test]
fn interrupts_n_stops_each_worker_at_n_signals() {
    let _machine = shared_machine();
    let dir = tempfile::tempdir().unwrap();
    for (name, extra) in [
        ("one", &["--workers", "1", "--migrate", "none"][..]),
        ("reset", &["--workers", "2", "--mode", "reset"][..]),
        (
            "injected",
            &["--workers", "2", "--inject-drop-every", "3"][..],
        ),
    ] {
        let out = dir.path().join(name);
        let mut args = vec!["--interrupts", "10"];
        args.extend_from_slice(extra);
        let (code, stdout) = software_run(&args, &out);
        let r = read_json(&out);
        assert_eq!(r["stop_reason"], "interrupts", "{name}: {stdout}");
        for w in r["workers"].as_array().unwrap() {
            let signals = w["signals"].as_u64().unwrap();
            let injected = w["deliveries"]["injected"].as_u64().unwrap();
            assert_eq!(signals + injected, 10, "{name}: {w:#}");
        }
        // Too few for a verdict, and it says how many are needed.
        if name != "injected" {
            assert_eq!(code, Some(125), "{name}: {stdout}");
            assert!(
                crate::util::unwrapped(&stdout).contains("299 needed"),
                "{name}: {stdout}"
            );
        }
    }
    let help = one_spaced(&stdout_of(&["run", "--help"]));
    assert!(
        help.contains("A verdict needs at least 299 overflows and 299 witnessed stops in all"),
        "{help}"
    );
}

/// The date and the pmustress that wrote a run go from run.json into both
/// report formats; the report opens with the answers and fits 72 columns.
#[test]
fn date_version_and_commit_round_trip_into_the_report() {
    let _machine = shared_machine();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let (code, stdout) = software_run(
        &["--interrupts", "20", "--workers", "1", "--migrate", "none"],
        &out,
    );
    assert_eq!(code, Some(125), "{stdout}");
    let r = read_json(&out);
    let started = r["started_unix_s"].as_u64().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(started <= now && now - started < 3600, "{started} {now}");
    let utc = r["started_utc"].as_str().unwrap().to_string();
    assert_eq!(utc, pmustress::results::schema::utc_text(started));
    assert!(utc.ends_with('Z') && utc.len() == 20, "{utc}");
    let version = stdout_of(&["--version"]);
    let commit = r["tool"]["commit"].as_str().unwrap();
    assert!(version.contains(&format!("(commit {commit})")), "{version}");
    assert_eq!(r["tool"]["version"], env!("CARGO_PKG_VERSION"));
    let short = commit.get(..12).unwrap();

    let dir_arg = out.to_str().unwrap();
    let report = stdout_of(&["report", dir_arg]);
    assert!(widest(&report) <= 72, "{report}");
    let provenance = format!(
        "run: {utc}, {:.1} s, pmustress {} (commit {short})",
        r["elapsed_ns"].as_u64().unwrap() as f64 / 1e9,
        env!("CARGO_PKG_VERSION")
    );
    assert!(
        report.replace("\n    ", " ").contains(&provenance),
        "{report}"
    );
    // The answers come first, right under the title.
    let lines: Vec<&str> = report.lines().collect();
    assert!(lines[0].starts_with("== "), "{report}");
    assert_eq!(
        lines[1],
        "lost and spurious interrupts, per million (exact 95% interval):"
    );
    assert!(
        lines[2].starts_with("  dropped per overflow  0 of 20 overflows"),
        "{report}"
    );
    assert!(lines[3].starts_with("  dropped per stop "), "{report}");
    assert!(lines[4].starts_with("  spurious interrupts "), "{report}");

    let md = stdout_of(&["report", "--format", "markdown", dir_arg]);
    assert!(
        md.replace("\n    ", " ")
            .contains(&format!("- {provenance}")),
        "{md}"
    );
    // Each fact its own list item: rendered, they do not run together.
    for fact in ["machine: ", "kernel: ", "pseudo-NMI: ", "event: "] {
        assert!(md.contains(&format!("\n- {fact}")), "{fact}: {md}");
    }
    assert!(
        md.contains("| dropped per overflow | 0 | 20 overflows |"),
        "{md}"
    );

    let json: serde_json::Value =
        serde_json::from_str(&stdout_of(&["report", "--format", "json", dir_arg])).unwrap();
    assert_eq!(json[0]["run"]["started_utc"], utc.as_str());
}

/// x86 names only the vendor's line; the report adds family and model.
#[test]
fn the_report_names_the_x86_cpu_family_and_model() {
    let report = stdout_of(&["report", CLEAN]);
    assert!(
        report.contains("CPUs 0-1: Intel(R) Xeon(R) Processor family 6"),
        "{report}"
    );
    assert!(report.contains("model 207"), "{report}");
}

/// The moves of a random migration, as raw.csv.gz records them: (worker,
/// target CPU, in the `value` column) in order.
fn moves(dir: &Path) -> Vec<(String, String)> {
    let mut gz =
        flate2::read::MultiGzDecoder::new(std::fs::File::open(dir.join("raw.csv.gz")).unwrap());
    let mut csv = String::new();
    gz.read_to_string(&mut csv).unwrap();
    csv.lines()
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| f.get(1) == Some(&"move"))
        .map(|f| (f[0].to_string(), f[4].to_string()))
        .collect()
}

/// A random migration's seed is recorded, the report's reproduce line
/// gives it, and that line, run again, draws the same CPUs. On the fake
/// kernel with four CPUs, so that a draw has three choices.
#[test]
fn the_reproduce_line_replays_a_random_migration() {
    use pmustress::testkit::fake_kernel::{SCRIPT_ENV, Script, Scripted, Step};
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    let scripted = Scripted {
        machine: concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/fingerprint/graviton2-c6g-6.1-disabled"
        )
        .into(),
        cpus: vec![0, 1, 2, 3],
        script: Script::default().worker([Step::OVERFLOW].repeat(400)),
    };
    std::fs::write(&script, serde_json::to_string(&scripted).unwrap()).unwrap();
    let run = |argv: &[String], out: &Path| {
        let o = pmustress()
            .env(SCRIPT_ENV, &script)
            .args(argv)
            .arg("--out")
            .arg(out)
            .output()
            .unwrap();
        assert!(o.status.code().is_some(), "{}", text(&o.stderr));
    };
    let first = dir.path().join("first");
    let argv: Vec<String> = [
        "run",
        "--period",
        "100000",
        "--skid",
        "1000",
        "--workers",
        "1",
        "--migrators",
        "1",
        "--move",
        "any",
        "--migrate",
        "random",
        "--duration",
        "200ms",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    run(&argv, &first);
    let seed = read_json(&first)["config"]["migrate_seed"]
        .as_u64()
        .unwrap();
    let md = stdout_of(&["report", "--format", "markdown", first.to_str().unwrap()]);
    let command = md
        .split("```\n")
        .nth(1)
        .and_then(|block| block.lines().next())
        .unwrap()
        .to_string();
    assert!(command.ends_with(&format!("--seed {seed}")), "{command}");
    // The command again, into another directory.
    let mut again: Vec<String> = command.split(' ').skip(1).map(String::from).collect();
    let out_at = again.iter().position(|a| a == "--out").unwrap();
    again.drain(out_at..out_at + 2);
    let second = dir.path().join("second");
    run(&again, &second);
    assert_eq!(read_json(&second)["config"]["migrate_seed"], seed);
    let (a, b) = (moves(&first), moves(&second));
    let n = a.len().min(b.len());
    assert!(n >= 20, "{} and {} moves", a.len(), b.len());
    assert_eq!(a[..n], b[..n]);
    // Another seed draws other CPUs: the comparison can fail.
    let mut other = again.clone();
    let seed_at = other.iter().position(|a| a == "--seed").unwrap();
    other[seed_at + 1] = (seed ^ 1).to_string();
    let third = dir.path().join("third");
    run(&other, &third);
    let c = moves(&third);
    let n = a.len().min(c.len());
    assert_ne!(a[..n], c[..n]);
}

/// A ratio between unlike runs is said to be one: different settings, an
/// interrupted side, the same runs on both sides. Like runs get no
/// warning.
#[test]
fn compare_warns_when_the_sides_are_not_alike() {
    let like = stdout_of(&["compare", NOPNMI, PNMI]);
    assert!(!like.contains("warning"), "{like}");

    let same = stdout_of(&["compare", NOPNMI, NOPNMI]);
    assert!(
        same.starts_with("warning: A and B are the same runs"),
        "{same}"
    );

    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other");
    crate::util::copy_run(PNMI, &other, |r| {
        r["config"]["workers"] = 7.into();
        r["config"]["period"] = 200000.into();
        r["verdict"] = "interrupted".into();
        r["exit_status"] = 130.into();
    });
    let text = stdout_of(&["compare", NOPNMI, other.to_str().unwrap()]);
    let workers = read_json(Path::new(NOPNMI))["config"]["workers"].clone();
    let period = read_json(Path::new(NOPNMI))["config"]["period"].clone();
    let unwrapped = text.replace("\n    ", " ");
    assert!(
        unwrapped.contains(&format!("warning: different workers: A {workers}, B 7")),
        "{text}"
    );
    assert!(
        unwrapped.contains(&format!("warning: different period: A {period}, B 200000")),
        "{text}"
    );
    assert!(
        unwrapped.contains("warning: B holds 1 interrupted run"),
        "{text}"
    );
    assert!(widest(&text) <= 72, "{text}");

    let md = stdout_of(&[
        "compare",
        "--format",
        "markdown",
        NOPNMI,
        other.to_str().unwrap(),
    ]);
    assert!(md.starts_with("- **warning**: different "), "{md}");
    assert!(md.contains("\n| A | 1 | "), "{md}");
    let json: serde_json::Value = serde_json::from_str(&stdout_of(&[
        "compare",
        "--format",
        "json",
        NOPNMI,
        other.to_str().unwrap(),
    ]))
    .unwrap();
    assert!(json["warnings"].as_array().unwrap().len() >= 3, "{json:#}");
}

/// `report --group-by kernel` with release names as long as real ones
/// fits the 72 columns its help promises.
#[test]
fn a_grouped_report_fits_72_columns() {
    let dir = tempfile::tempdir().unwrap();
    for (i, (from, release)) in [
        (NOPNMI, "6.1.0-13-arm64-unsigned+"),
        (PNMI, "6.18.44-fc-v669-pseudo-nmi"),
        (CLEAN, "6.8.0-1019-aws"),
    ]
    .into_iter()
    .enumerate()
    {
        crate::util::copy_run(from, &dir.path().join(format!("run-{i}")), |r| {
            r["fingerprint"]["kernel"]["release"] =
                serde_json::json!({"source": "/proc/sys/kernel/osrelease", "value": release});
        });
    }
    let root = dir.path().to_str().unwrap();
    let text = stdout_of(&["report", "--group-by", "kernel", root]);
    assert!(widest(&text) <= 72, "{text}");
    assert!(text.contains("\n6.1.0-13-arm64-unsigned+\n"), "{text}");
    let help = stdout_of(&["report", "--help"]);
    assert!(help.contains("72 columns"), "{help}");
}

/// A misspelt flag or subcommand gets clap's suggestion on its one line,
/// and the hint names the subcommand's own help.
#[test]
fn a_misspelling_is_answered_with_did_you_mean() {
    for (argv, want) in [
        (
            &["run", "--evnt", "task-clock"][..],
            "error: unexpected argument '--evnt' found (did you mean '--event'?) (see pmustress run --help)",
        ),
        (
            &["run", "--worker", "2"][..],
            "error: unexpected argument '--worker' found (did you mean '--workers'?) (see pmustress run --help)",
        ),
        (
            &["rn"][..],
            "error: unrecognized subcommand 'rn' (did you mean 'run'?) (see pmustress --help)",
        ),
    ] {
        let o = pmustress().args(argv).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{argv:?}");
        assert_eq!(text(&o.stderr), format!("{want}\n"), "{argv:?}");
    }
    let o = pmustress()
        .args(["run", "--cpus", "0", "--event", "task-clock"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("(got only CPU 0)"),
        "{}",
        text(&o.stderr)
    );
}

/// A run refused for lack of a PMU used to leave no results directory: a
/// fleet got only console text back. Now run.json says why, with the
/// fingerprint, as for any run that could not start.
#[test]
fn a_run_refused_for_lack_of_a_pmu_leaves_run_json() {
    if crate::util::has_core_pmu() {
        crate::util::skipped("this machine has a PMU: the default event is not refused");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let o = pmustress()
        .args(["run", "--duration", "1s", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(125));
    // One message, wrapped to 100 columns (it was one line of 276).
    let raw = text(&o.stderr);
    assert!(raw.lines().all(|l| l.len() <= 100), "{raw}");
    let stderr = crate::util::one_message(&o);
    assert!(
        stderr.contains(&format!("(recorded in {})", out.join("run.json").display())),
        "{stderr}"
    );
    let r = read_json(&out);
    assert_eq!(r["verdict"], "incomplete");
    assert_eq!(r["exit_status"], 125);
    assert!(
        r["setup_failure"]
            .as_str()
            .unwrap()
            .contains("needs a hardware PMU"),
        "{r:#}"
    );
    assert!(r["fingerprint"]["kernel"]["release"]["value"].is_string());
    assert!(r["started_utc"].is_string());
    let report = pmustress().args(["report"]).arg(&out).output().unwrap();
    assert_eq!(report.status.code(), Some(125));
    assert!(
        text(&report.stdout)
            .contains("the run could not start: --event branches needs a hardware PMU"),
        "{}",
        text(&report.stdout)
    );
}

/// A grouped report pools an interrupted run as far as it ran, and its
/// note says so (it said unfinished runs are not pooled, next to a pooled
/// interrupted run).
#[test]
fn a_grouped_report_says_how_it_pooled_an_interrupted_run() {
    let dir = tempfile::tempdir().unwrap();
    crate::util::copy_run(NOPNMI, &dir.path().join("a"), |_| {});
    crate::util::copy_run(NOPNMI, &dir.path().join("b"), |r| {
        r["verdict"] = "interrupted".into();
        r["exit_status"] = 130.into();
    });
    let root = dir.path().to_str().unwrap();
    let json: serde_json::Value = serde_json::from_str(&stdout_of(&[
        "report",
        "--group-by",
        "kernel",
        "--format",
        "json",
        root,
    ]))
    .unwrap();
    let overflows = read_json(Path::new(NOPNMI))["totals"]["accounted_overflows"].clone();
    assert_eq!(
        json["groups"][0]["overflows"],
        2 * overflows.as_u64().unwrap()
    );
    let text = stdout_of(&["report", "--group-by", "kernel", root]);
    assert!(
        text.contains("1 interrupted (pooled as far as it ran)"),
        "{text}"
    );
    assert!(!text.contains("not pooled if unfinished"), "{text}");
}

/// `run --help` says what a run judges, not the deltas between signals it
/// classified before the judge read the kernel's records.
#[test]
fn run_help_says_what_the_run_judges() {
    let help = one_spaced(&stdout_of(&["run", "--help"]));
    assert!(!help.contains("classify every delta"), "{help}");
    assert!(
        help.contains("judge every overflow from the kernel's records"),
        "{help}"
    );
}

/// `replay` keeps its lines within 100 columns (its totals lines ran to
/// 186), a directory's replay and a bare stream's alike.
#[test]
fn replay_fits_100_columns() {
    let dir = "tests/fixtures/oracle/smp2-nopnmi-w1-pingpong-free-100k";
    let stream = format!("{dir}/raw.csv.gz");
    for argv in [
        vec!["replay", dir],
        vec!["replay", &stream, "--period", "100000", "--pmu"],
    ] {
        let out = crate::util::run(&argv);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("verdict: dropped (exit 1)"),
            "{argv:?}: {stdout}"
        );
        assert!(widest(&stdout) <= 100, "{argv:?}: {stdout}");
        assert!(stdout.lines().any(|l| l.starts_with("    ")), "{stdout}");
    }
}
