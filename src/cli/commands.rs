/*!
What each subcommand does, from its validated arguments to its exit status:
`run` measures (config, engine, judge, the results directory, the console),
`env` prints the fingerprint, `report`, `compare`, `plot` and `replay` read
results directories back, `completions` and `man` print from the clap
definitions. Exit statuses follow `git bisect run`: 0 good, 1 bad (dropped
interrupts), 2 usage, 125 cannot test here.
*/

use std::path::Path;

use crate::check;
use crate::cli::console;
pub use crate::cli::emit::{emit, emit_bytes};
use crate::cli::stops::{Stopped, install_stops, stopped_by};
use crate::cli::validate::{ConfigError, Refused};
use crate::cli::{Command, CompareArgs, EnvArgs, PlotArgs, ReplayArgs, ReportArgs, RunArgs};
use crate::config::RunConfig;
use crate::config::event;
use crate::domain::{EXIT_CANNOT_TEST, EXIT_USAGE, OutputFormat, SwitchWitness};
use crate::engine::kernel::probe::{ProbeEvent, ProbeKernel};
use crate::engine::kernel::{self, Kernel};
use crate::engine::limits;
use crate::engine::run::{self, RunRecord};
use crate::fingerprint::Fingerprint;
use crate::judge::{Anomaly, ClosedWindow};
use crate::records::Observation;
use crate::report::compare::{self, Group};
use crate::report::format::{self, markup::Report};
use crate::report::groups;
use crate::report::runs::RunsReport;
use crate::results::loaded::{self as loaded_run, LoadedRun};
use crate::results::schema::{MAX_RECORDED_ANOMALIES, RunResults};
use crate::results::writer::{OutError, ResultsDir};
use crate::verdict::{self, Warning};

/// Appends a line to a command's output.
macro_rules! put {
    ($out:expr, $($arg:tt)*) => {{
        use std::fmt::Write as _;
        let _ = writeln!($out, $($arg)*);
    }};
}

/// Runs one subcommand and returns its exit status; `run` measures on
/// `machine`, and `check` and `run`'s interrupt skid probe `pmu` (the
/// binary picks both: `main.rs`).
pub fn dispatch<K: Kernel, P: ProbeKernel>(command: Command, machine: &K, pmu: &P) -> i32 {
    // A file past the size limit (ulimit -f) is then a failed write (EFBIG),
    // handled as a full disk, not a kill by SIGXFSZ.
    crate::engine::stop_signal::ignore(libc::SIGXFSZ);
    match command {
        Command::Check(args) => crate::cli::check::check_command(&args, pmu),
        Command::Run(args) => run_command(&args, machine, pmu),
        Command::Env(args) => env_command(&args),
        Command::Report(args) => report_command(&args),
        Command::Compare(args) => compare_command(&args),
        Command::Plot(args) => plot_command(&args),
        Command::Replay(args) => replay_command(&args),
        Command::Completions { shell } => {
            // Rendered first: clap_complete panics on a failed write.
            let mut script = Vec::new();
            crate::cli::manual::completions(shell, &mut script);
            emit_bytes(&script, 0)
        }
        Command::Man => man_command(),
    }
}

/// `pmustress replay`: the judgement of a recorded stream, again.
fn replay_command(args: &ReplayArgs) -> i32 {
    use crate::report::replay;
    if args.path.is_dir() {
        // A run.json that is not a run is the argument's fault (2), as in
        // report; a stream that cannot be judged is 125.
        if let Err(e) = crate::results::reader::read(&args.path) {
            errln!("error: <DIR|FILE> {}: {e:#}", args.path.display());
            return EXIT_USAGE;
        }
        let r = match replay::replay_dir(&args.path) {
            Ok(r) => r,
            Err(e) => {
                errln!("error: <DIR|FILE> {}: {e:#}", args.path.display());
                return EXIT_CANNOT_TEST;
            }
        };
        // A stream that does not give run.json's totals cannot vouch for
        // the run: 125, and the verdict said is the one exited with.
        let status = r.outcome().1;
        return rendered(&r, args.format, status);
    }
    let cfg = match crate::cli::validate::bare_stream(args) {
        Ok(cfg) => cfg,
        Err(e) => {
            errln!("error: {e}");
            return EXIT_USAGE;
        }
    };
    let (r, truncated) = match replay::judge_file(&args.path, cfg) {
        Ok(judged) => judged,
        Err(e) => {
            errln!("error: <DIR|FILE> {}: {e:#}", args.path.display());
            return EXIT_CANNOT_TEST;
        }
    };
    let status = r.exit_status;
    rendered(
        &replay::StreamReplay {
            replayed: r,
            truncated,
        },
        args.format,
        status,
    )
}

/// A report in the format asked, exiting `status`; a report that cannot
/// be serialised is one line and 125, never an empty output.
fn rendered<R: Report + serde::Serialize>(report: &R, format: OutputFormat, status: i32) -> i32 {
    match format::render(report, format) {
        Ok(text) => emit(&text, status),
        Err(e) => {
            errln!("error: serialising the report: {e}");
            EXIT_CANNOT_TEST
        }
    }
}

/// A bare stream's skids by the run's rule: it refuses a skid of a
/// period or more, so a replay accepting one judged a stream no run could
/// have made.
fn env_command(args: &EnvArgs) -> i32 {
    if !args.root.is_dir() {
        errln!("error: --root: {} is not a directory", args.root.display());
        return EXIT_USAGE;
    }
    let fp = Fingerprint::collect(&args.root);
    let mut out = String::new();
    if args.json {
        match serde_json::to_string_pretty(&fp) {
            Ok(s) => put!(out, "{s}"),
            Err(e) => {
                errln!("error: serialising the fingerprint: {e}");
                return EXIT_CANNOT_TEST;
            }
        }
    } else {
        put!(out, "{fp}");
    }
    emit(&out, 0)
}

/// Loads each argument's runs; an error names the argument (`names[i]`,
/// e.g. "<DIR>", or the last name for all the rest) and the file.
fn load_groups(dirs: &[std::path::PathBuf], names: &[&str]) -> anyhow::Result<Vec<Vec<LoadedRun>>> {
    use anyhow::Context as _;
    dirs.iter()
        .enumerate()
        .map(|(i, dir)| {
            let name = names.get(i).or(names.last()).copied().unwrap_or("<DIR>");
            loaded_run::expand(std::slice::from_ref(dir))
                .and_then(|mut groups| {
                    groups
                        .pop()
                        .unwrap_or_default()
                        .iter()
                        .map(|d| LoadedRun::load(d))
                        .collect()
                })
                .with_context(|| name.to_string())
        })
        .collect()
}

fn report_command(args: &ReportArgs) -> i32 {
    use crate::report::checks::LoadedCheck;
    let runs: Vec<LoadedRun> = match load_groups(&args.dirs, &["<DIR>"]) {
        Ok(groups) => groups.into_iter().flatten().collect(),
        Err(e) => {
            errln!("error: {e:#}");
            return EXIT_USAGE;
        }
    };
    let checks: Vec<LoadedCheck> = match loaded_run::checks(&args.dirs)
        .iter()
        .map(|d| LoadedCheck::load(d))
        .collect()
    {
        Ok(c) => c,
        Err(e) => {
            errln!("error: <DIR> {e:#}");
            return EXIT_USAGE;
        }
    };
    if !checks.is_empty() {
        return report_checks(args, &checks, &runs);
    }
    let runs_report = RunsReport {
        runs: &runs,
        first_anomalies: args.anomalies,
    };
    match args.group_by {
        Some(by) => match groups::group(&runs, by) {
            Ok(grouped) => rendered(&grouped, args.format, unfinished_status(&runs)),
            Err(e) => {
                errln!("error: {e:#}");
                EXIT_USAGE
            }
        },
        None => rendered(&runs_report, args.format, unfinished_status(&runs)),
    }
}

/// `report` of checks (and any runs given beside them): the checks'
/// sections or rows first, then the runs' report.
fn report_checks(
    args: &ReportArgs,
    checks: &[crate::report::checks::LoadedCheck],
    runs: &[LoadedRun],
) -> i32 {
    let report = crate::report::checks::ChecksReport {
        checks,
        group_by: args.group_by,
        runs: RunsReport {
            runs,
            first_anomalies: args.anomalies,
        },
    };
    rendered(&report, args.format, unfinished_status(runs))
}

/// A run without a verdict is evidence, not a result: a script that reads
/// "0" as "all reported runs finished" must not be misled (125, and the
/// run named on stderr).
fn unfinished_status(runs: &[LoadedRun]) -> i32 {
    match runs.iter().find(|r| !r.run.finished()) {
        Some(r) => {
            let line = match r.run.setup_failure() {
                Some(why) => format!("pmustress: {} could not start: {why}", r.dir.display()),
                None => format!(
                    "pmustress: {} did not finish (verdict incomplete): it has no verdict",
                    r.dir.display()
                ),
            };
            let options = textwrap::Options::new(100).subsequent_indent("    ");
            errln!("{}", textwrap::fill(&line, options));
            EXIT_CANNOT_TEST
        }
        None => 0,
    }
}

fn compare_command(args: &CompareArgs) -> i32 {
    let loaded = match args.group_by {
        None => load_groups(&[args.a.clone(), args.b.clone()], &["<A>", "<B>"]),
        Some(by) => load_groups(&args.dirs, &["<DIR>"])
            .map(|g| g.into_iter().flatten().collect::<Vec<_>>())
            .and_then(|runs| groups::pick_two(runs, by, &args.a, &args.b)),
    };
    let groups = match loaded {
        Ok(g) => g,
        Err(e) => {
            errln!("error: {e:#}");
            return EXIT_USAGE;
        }
    };
    // A killed run's counts are unknown, not zero.
    if let Some(r) = groups.iter().flatten().find(|r| !r.run.finished()) {
        errln!(
            "pmustress: cannot compare: {} did not finish (verdict incomplete), so its counts are unknown; leave it out",
            r.dir.display()
        );
        return EXIT_CANNOT_TEST;
    }
    let label = |key: &Path| match args.group_by {
        Some(by) => format!("{} {}", groups::key_name(by), key.display()),
        None => key.display().to_string(),
    };
    let (a, b) = match (
        Group::of(label(&args.a), &groups[0]),
        Group::of(label(&args.b), &groups[1]),
    ) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            errln!("error: {e:#}");
            return EXIT_USAGE;
        }
    };
    if args.mail {
        let mail = crate::report::mail::Mail {
            a: &a,
            b: &b,
            runs_a: &groups[0],
            runs_b: &groups[1],
        };
        return emit(&format::render_text(&mail), 0);
    }
    rendered(&compare::Comparison { a: &a, b: &b }, args.format, 0)
}

/// What a build without the `plot` feature says to `pmustress plot ...`,
/// on one line, with exit status 2 (EXIT_USAGE).
#[cfg(not(feature = "plot"))]
pub const NO_PLOT: &str = "error: this pmustress was built without plotting (cargo feature \"plot\"); rebuild with default features";

#[cfg(not(feature = "plot"))]
fn plot_command(_: &PlotArgs) -> i32 {
    errln!("{NO_PLOT}");
    EXIT_USAGE
}

#[cfg(feature = "plot")]
fn plot_command(args: &PlotArgs) -> i32 {
    let runs: Vec<LoadedRun> = match load_groups(&args.dirs, &["<DIR>"]) {
        Ok(groups) => groups.into_iter().flatten().collect(),
        Err(e) => {
            errln!("error: {e:#}");
            return EXIT_USAGE;
        }
    };
    match crate::report::plot::render(&runs, &args.output) {
        Ok(()) => 0,
        Err(e) => {
            // A full disk is this machine's state, not a wrong -o.
            let full = e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>().is_some_and(|io| {
                    matches!(io.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
                })
            });
            if full {
                errln!(
                    "pmustress: cannot write -o {}: {e:#}: free some space or choose another place; nothing was left behind",
                    args.output.path.display()
                );
                EXIT_CANNOT_TEST
            } else {
                errln!(
                    "error: -o {}: {e:#}; choose a path you can write to",
                    args.output.path.display()
                );
                EXIT_USAGE
            }
        }
    }
}

fn man_command() -> i32 {
    let mut page = Vec::new();
    if let Err(e) = crate::cli::manual::man_page(&mut page) {
        errln!("error: rendering the man page: {e}");
        return EXIT_CANNOT_TEST;
    }
    emit_bytes(&page, 0)
}

/// Console output, the results directory, and the anomalies kept for
/// run.json.
struct Collect {
    console: console::Console,
    files: ResultsDir,
    anomalies: Vec<Anomaly>,
    not_recorded: u64,
    /// What the live note on the stop witness needs: the witness asked
    /// for, perf_event_paranoid, and whether the event is a PMU's.
    witness_asked: SwitchWitness,
    paranoid: Option<i64>,
    hardware: bool,
    /// `--max-count-rate` was given.
    rate_bounded: bool,
    /// The signal queue check's warning, for run.json (`validate`).
    queue_tight: Option<String>,
}

impl run::Observer for Collect {
    fn started(&mut self, witnesses: &[SwitchWitness]) {
        if self.hardware
            && let Some(w) = verdict::stops_not_witnessed(
                witnesses.iter().copied(),
                self.witness_asked,
                self.paranoid,
                self.rate_bounded,
            )
        {
            self.console.say(format!("note: {w}"));
        }
    }

    fn observation(&mut self, worker: usize, o: &Observation) {
        self.files.record_observation(worker, o);
    }

    fn window(&mut self, w: &ClosedWindow) {
        self.files.record_window(w);
    }

    fn tick(&mut self, now_ns: u64) {
        self.files.tick(now_ns);
    }

    fn failure(&self) -> Option<String> {
        self.files.failure()
    }

    fn anomaly(&mut self, a: &Anomaly) {
        self.console.anomaly(a);
        self.files.record_anomaly(a);
        if self.anomalies.len() < MAX_RECORDED_ANOMALIES {
            self.anomalies.push(a.clone());
        } else {
            self.not_recorded += 1;
        }
    }

    fn progress(&mut self, p: &run::Progress) {
        self.console.progress(p);
    }
}

/// `pmustress run`: refuse what cannot be run, make the results
/// directory, measure with the live console, then save and print.
fn run_command<K: Kernel, P: ProbeKernel>(args: &RunArgs, machine: &K, pmu: &P) -> i32 {
    match run_steps(args, machine, pmu) {
        Ok(status) | Err(status) => status,
    }
}

fn run_steps<K: Kernel, P: ProbeKernel>(
    args: &RunArgs,
    machine: &K,
    pmu: &P,
) -> Result<i32, Stopped> {
    let stops = install_stops()?;
    let allowed = match machine.allowed_cpus() {
        Ok(cpus) => cpus,
        Err(e) => {
            errln!("pmustress: cannot test here: sched_getaffinity failed: {e}");
            return Err(EXIT_CANNOT_TEST);
        }
    };
    let fingerprint = Fingerprint::collect(&machine.machine_root());
    let platform = event::Platform::from_fingerprint(&fingerprint);
    // Lossy: an argument that is not UTF-8 (a --baseline path) is recorded
    // with U+FFFD rather than panicking.
    let argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let (mut cfg, queue_tight) = validate(args, &allowed, &platform, &argv, &fingerprint)?;
    if !cfg.event.software && args.skid.is_none() && args.interrupt_skid.is_none() {
        let event = ProbeEvent {
            type_: cfg.event.type_id,
            config: cfg.event.config,
        };
        cfg.take_measured_interrupt_skid(check::interrupt_skid(pmu, event));
    }

    let stop_signal = || stopped_by(&stops);

    let files = create_results_dir(&mut cfg, &argv, &fingerprint)?;
    let cfg = cfg;
    let collect = Collect {
        console: live_console(&cfg, &fingerprint),
        files,
        anomalies: Vec::new(),
        not_recorded: 0,
        witness_asked: cfg.switch_witness,
        rate_bounded: cfg.max_count_rate.is_some(),
        paranoid: fingerprint.knobs.perf_event_paranoid.value,
        hardware: !cfg.event.software,
        queue_tight,
    };
    let (record, collect) = measure(machine, &cfg, &stop_signal, collect, &argv, &fingerprint)?;
    let (console, saved) = collect.save(&cfg, argv, &fingerprint, &record);
    Ok(print_end(console, saved, &cfg))
}

/// The validated configuration, or the run refused: a usage error (2),
/// a run this machine cannot do (125, recorded by `refuse`), among them
/// a signal queue too short for the workers. With it, the signal queue
/// check's warning (said now, and kept for run.json).
fn validate(
    args: &RunArgs,
    allowed: &[usize],
    platform: &event::Platform,
    argv: &[String],
    fingerprint: &Fingerprint,
) -> Result<(RunConfig, Option<String>), Stopped> {
    let cfg = match RunConfig::from_args_or_refused(args, allowed, platform) {
        Ok(cfg) => cfg,
        Err(Refused {
            error: e @ ConfigError::Usage { .. },
            ..
        }) => {
            errln!("error: {e}");
            return Err(EXIT_USAGE);
        }
        Err(Refused {
            error: ConfigError::CannotTest(why),
            config,
        }) => return Err(refuse(config, argv, fingerprint, &why)),
    };

    if let Some(why) = std::fs::read_to_string("/proc/self/timens_offsets")
        .ok()
        .and_then(|text| monotonic_offset_refusal(&text))
    {
        return Err(refuse(Some(Box::new(cfg)), argv, fingerprint, &why));
    }
    match limits::check_live(cfg.workers) {
        limits::Check::Refuse(why) => Err(refuse(Some(Box::new(cfg)), argv, fingerprint, &why)),
        limits::Check::Warn(msg) => {
            errln!("warning: {msg}");
            Ok((cfg, Some(msg)))
        }
        limits::Check::Ok => Ok((cfg, None)),
    }
}

/// Why a run cannot be judged in this time namespace, from
/// /proc/self/timens_offsets: the kernel stamps its sample records with
/// its own CLOCK_MONOTONIC, while this process reads the namespace's,
/// offset from it, so the two would not share one clock (100,000 s
/// apart, the run was called clean with its rows beside no record).
fn monotonic_offset_refusal(offsets: &str) -> Option<String> {
    let line = offsets
        .lines()
        .find_map(|l| l.trim().strip_prefix("monotonic"))?;
    let mut fields = line.split_whitespace().map(str::parse::<i64>);
    let (Some(Ok(secs)), Some(Ok(nanos))) = (fields.next(), fields.next()) else {
        return None;
    };
    ((secs, nanos) != (0, 0)).then(|| {
        format!(
            "this process runs in a time namespace whose CLOCK_MONOTONIC is {secs} s {nanos} ns off the kernel's (/proc/self/timens_offsets): the kernel's records and the run's rows would not share one clock; run outside it"
        )
    })
}

/// The run's results directory (`cfg.out` becomes the one claimed): an
/// --out that is wrong is 2, one that cannot be made here 125.
fn create_results_dir(
    cfg: &mut RunConfig,
    argv: &[String],
    fingerprint: &Fingerprint,
) -> Result<ResultsDir, Stopped> {
    match ResultsDir::create(cfg, argv, fingerprint) {
        Ok(files) => Ok(files),
        Err(e @ OutError::Usage(_)) => {
            errln!("error: {e}");
            Err(EXIT_USAGE)
        }
        Err(e @ (OutError::CannotTest(_) | OutError::WorkingDir(_))) => {
            errln!("pmustress: cannot test here: {e}");
            Err(EXIT_CANNOT_TEST)
        }
    }
}

/// The live console, its opening lines queued: the machine's verdict
/// line, the banner, and in bisect mode what a good run must show.
fn live_console(cfg: &RunConfig, fingerprint: &Fingerprint) -> console::Console {
    // From here the run loop only queues console lines (`console`): a
    // blocked stdout never delays measuring or stopping.
    let mut console = console::Console::new(cfg.max_anomaly_lines, console::Goal::of(cfg));
    console.say(fingerprint.verdict_line());
    console.say(console::banner(cfg));
    if let Some(b) = &cfg.bisect {
        let per_stop = b.bad_rate_per_stop.map_or_else(String::new, |r| {
            format!(" and the rate per stop below {:.3} per million", r * 1e6)
        });
        console.say(format!(
            "bisect: zero dropped interrupts in {} overflows and {} witnessed stops will show the rate is below {:.3} per million{per_stop} at {} confidence ({}); the run stops as bad at the first dropped interrupt",
            b.overflows_needed,
            b.stops_needed,
            b.bad_rate * 1e6,
            b.confidence,
            b.bad_rate_source
        ));
    }
    console
}

/// Runs the measurement. A run that fails is 125, its cause recorded in
/// the results directory as well as said.
fn measure<K: Kernel>(
    machine: &K,
    cfg: &RunConfig,
    stop_signal: &dyn Fn() -> Option<i32>,
    mut collect: Collect,
    argv: &[String],
    fingerprint: &Fingerprint,
) -> Result<(RunRecord, Collect), Stopped> {
    match run::run(machine, cfg, stop_signal, &mut collect) {
        Ok(record) => Ok((record, collect)),
        Err(e) => {
            let cause = format!("{e:#}");
            let recorded = collect.files.abandon(cfg, argv, fingerprint, &cause);
            let _ = collect.console.finish();
            errln!("pmustress: cannot test here: {cause}");
            if let Err(e) = recorded {
                errln!(
                    "pmustress: could not record the cause in {}: {e:#}",
                    cfg.out.display()
                );
            }
            Err(EXIT_CANNOT_TEST)
        }
    }
}

/// A finished run's results, and whether they are all on disk.
struct Saved {
    results: RunResults,
    /// Where the results directory was moved to while the run went on.
    moved: Option<std::path::PathBuf>,
    saved: anyhow::Result<()>,
}

impl Collect {
    /// Saves the run's results; the console is handed back still open,
    /// for what is printed once they are saved.
    fn save(
        self,
        cfg: &RunConfig,
        argv: Vec<String>,
        fingerprint: &Fingerprint,
        record: &RunRecord,
    ) -> (console::Console, Saved) {
        let Collect {
            console,
            files,
            anomalies,
            not_recorded,
            queue_tight,
            ..
        } = self;
        let mut results = RunResults::new(cfg, argv, fingerprint, record, anomalies, not_recorded);
        if let Some(why) = queue_tight {
            results.warnings.push(Warning::SignalQueueTight(why));
        }
        let moved = files.moved_to();
        if let Some(now) = &moved {
            results.warnings.push(Warning::ResultsMoved {
                to: now.display().to_string(),
                from: cfg.out.display().to_string(),
            });
        }
        // Saved first, printed second: the verdict printed is the one on disk
        // and the exit status (a file cut short makes "clean" inconclusive, in
        // run.json too). Should run.json itself fail, it stays "incomplete"
        // and the status is not 0 either.
        let saved = files.finish(kernel::monotonic_ns(), &mut results);
        if let Err(e) = &saved {
            results.mark_unsaved(crate::results::writer::unsaved(&cfg.out, e));
            // run.json is still the incomplete one (nothing more to write):
            // any status goes with it.
            kernel::process::decide_while(results.exit_status, || ());
        }
        (
            console,
            Saved {
                results,
                moved,
                saved,
            },
        )
    }
}

/// Prints the end of a run (the summary, where the results are, what
/// could not be saved or printed) and returns the exit status run.json
/// holds.
fn print_end(console: console::Console, saved: Saved, cfg: &RunConfig) -> i32 {
    let Saved {
        results,
        moved,
        saved,
    } = saved;
    // The exit status is decided: only now may printing block.
    let (dropped, mut failure) = console.finish();
    let mut out = String::new();
    if dropped > 0 {
        put!(
            out,
            "({dropped} console lines not printed: stdout did not keep up; every anomaly is counted and saved)"
        );
    }
    put!(out, "{}", console::summary(&results).trim_end());
    let location = moved.as_deref().unwrap_or(&cfg.out);
    if saved.is_ok() {
        put!(out, "results: {}", location.display());
    }
    failure = failure.or_else(|| write_stdout(&out).err());
    if let Err(e) = saved {
        errln!(
            "pmustress: could not save all results in {}: {e:#}",
            cfg.out.display()
        );
    }
    // The console is a copy of what the results directory holds: its loss
    // is said, and the status stays the one run.json holds.
    let lost = match failure {
        Some(e) => Some(e.to_string()),
        None if kernel::process::stdout_was_closed() => Some("stdout is closed".to_string()),
        None => None,
    };
    if let Some(why) = lost {
        errln!(
            "pmustress: the console output was not written ({why}); the results are in {} (run.json has the verdict)",
            location.display()
        );
    }
    results.exit_status
}

/// A run this machine cannot do (no PMU for the event, one CPU to migrate
/// on): 125, said in one line, and recorded like any run that could not
/// start, so a fleet gets run.json back with the fingerprint and the
/// reason (`config` is the run as it would have been, its event
/// unresolved). A results directory that cannot be made is said on the
/// same line; the status stays 125, or 2 for an --out that is wrong.
fn refuse(
    config: Option<Box<RunConfig>>,
    argv: &[String],
    fingerprint: &Fingerprint,
    why: &str,
) -> i32 {
    // Wrapped to the console's width like every other report: readers
    // take the reason from run.json (its `setup_failure`), not stderr.
    let say = |text: String| errln!("{}", crate::cli::console::fit(&text).trim_end());
    let Some(mut cfg) = config else {
        say(format!("pmustress: cannot test here: {why}"));
        return EXIT_CANNOT_TEST;
    };
    match ResultsDir::create(&mut cfg, argv, fingerprint) {
        Ok(files) => match files.abandon(&cfg, argv, fingerprint, why) {
            Ok(()) => say(format!(
                "pmustress: cannot test here: {why} (recorded in {})",
                cfg.out.join("run.json").display()
            )),
            Err(e) => say(format!(
                "pmustress: cannot test here: {why} (not recorded in {}: {e:#})",
                cfg.out.display()
            )),
        },
        Err(e @ OutError::Usage(_)) => {
            errln!("error: {e}");
            return EXIT_USAGE;
        }
        Err(e @ (OutError::CannotTest(_) | OutError::WorkingDir(_))) => {
            say(format!(
                "pmustress: cannot test here: {why} (not recorded: {e})"
            ));
        }
    }
    EXIT_CANNOT_TEST
}

/// Writes `text` to stdout (control characters escaped): a reader that
/// went away is not an error.
fn write_stdout(text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(crate::report::format::escape::escape_controls(text).as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_time_namespace_with_another_monotonic_clock_is_refused() {
        use super::monotonic_offset_refusal as refusal;
        let at = |m: &str| format!("monotonic {m}\nboottime 0 0\n");
        assert_eq!(refusal(&at("0 0")), None);
        assert!(refusal(&at("100000 0")).is_some_and(|w| w.contains("100000 s 0 ns")));
        assert!(refusal(&at("-5000 0")).is_some());
        assert!(refusal(&at("0 1")).is_some());
        assert_eq!(refusal(""), None);
    }

    /// Without the `plot` feature, any `pmustress plot ...` (no arguments,
    /// real ones, bad ones, --help) reaches the command, which refuses it
    /// with a usage error and the one line naming the feature.
    #[cfg(not(feature = "plot"))]
    #[test]
    fn plot_without_the_feature_is_one_usage_error_line() {
        use clap::Parser as _;

        use super::*;
        use crate::cli::Cli;

        assert_eq!(NO_PLOT.lines().count(), 1);
        assert!(NO_PLOT.starts_with("error: "), "{NO_PLOT}");
        assert!(NO_PLOT.contains("cargo feature \"plot\""), "{NO_PLOT}");
        assert!(NO_PLOT.contains("default features"), "{NO_PLOT}");
        for argv in [
            &["pmustress", "plot"][..],
            &["pmustress", "plot", "dir", "-o", "run.svg"],
            &["pmustress", "plot", "dir", "-o", "run.jpg", "--frob"],
            &["pmustress", "plot", "--help"],
        ] {
            let cli = Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
            let Command::Plot(args) = cli.command else {
                panic!("{argv:?}: not plot");
            };
            assert_eq!(plot_command(&args), EXIT_USAGE, "{argv:?}");
        }
    }
}
