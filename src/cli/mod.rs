/*!
The command line. This file holds the clap definitions only: every flag and
its help; value parsers check one value at a time and say the accepted form.
`validate` checks how values fit together and builds the `RunConfig`;
`commands` runs each subcommand; `console` is what `pmustress run` prints
while it runs and at its end; `manual` renders the man page and the shell
completions from these definitions.
*/

pub mod check;
pub mod commands;
pub mod console;
mod emit;
pub mod manual;
mod stops;
pub mod validate;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::config::event::EventArg;
use crate::domain::{
    DriverRules, GroupBy, MigrateMode, MoveWhich, OutputFormat, RearmMode, SwitchWitness,
};

#[derive(Debug, Parser)]
#[command(
    name = "pmustress",
    // The commit too (build.rs): a fleet's binaries say which tree they are.
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("PMUSTRESS_GIT_COMMIT"), ")"),
    about = "Stress-tests PMU overflow interrupts: finds overflows whose interrupt never came",
    long_about = None,
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Can rr and a sampling profiler trust this machine's PMU? A battery of
    /// probes (events, counts, determinism, IOC_PERIOD, skid, overcount at
    /// a PMI, the x86 quirks rr checks, the lost-overflow stress, the
    /// knobs), one line each, and a verdict per use.
    Check(CheckArgs),
    /// Run workers that count an event with an overflow period, migrate them,
    /// and judge every overflow from the kernel's records: was its interrupt
    /// taken, late, or never (dropped)?
    Run(Box<RunArgs>),
    /// Print the machine fingerprint, pseudo-NMI verdict first.
    Env(EnvArgs),
    /// Summarise results directories for a mailing list (<= 72 columns).
    Report(ReportArgs),
    /// Compare two runs or groups of runs: rates, ratio, exact test.
    Compare(CompareArgs),
    /// Draw the histogram of delta/period and the anomalies over time (SVG
    /// or PNG).
    // Listed in every build, so --help, the man page and the completions
    // name the same commands; a build without the `plot` feature says so
    // here and refuses it with a usage error.
    #[cfg_attr(
        not(feature = "plot"),
        command(
            about = "Not in this build (cargo feature \"plot\"): would draw the histogram of delta/period and the anomalies over time"
        )
    )]
    Plot(PlotArgs),
    /// Judge a recorded stream again: a results directory against its own
    /// run.json, or a bare raw.csv(.gz) with the settings given.
    Replay(ReplayArgs),
    /// Print a shell completion script (e.g. `pmustress completions bash >
    /// ~/.local/share/bash-completion/completions/pmustress`).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) for all commands, e.g. `pmustress man >
    /// pmustress.1`.
    Man,
}

#[cfg(feature = "plot")]
#[derive(Debug, Args)]
pub struct PlotArgs {
    /// Results directories, or directories of them; each run gets its own
    /// row of the image (stacked, not overlaid).
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,

    /// The image to write: FILE.svg or FILE.png (the extension picks the
    /// format).
    #[arg(short = 'o', long = "output", visible_alias = "out", value_name = "FILE", value_parser = crate::report::plot::parse_output)]
    pub output: crate::report::plot::Output,
}

/// `plot` in a build without the `plot` feature: takes whatever follows
/// (even `--help`), so every `pmustress plot ...` gets the same one-line
/// refusal rather than a complaint about its arguments.
#[cfg(not(feature = "plot"))]
#[derive(Debug, Args)]
#[command(disable_help_flag = true)]
pub struct PlotArgs {
    #[arg(
        num_args = 0..,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        hide = true,
        value_name = "ARGS"
    )]
    pub args: Vec<std::ffi::OsString>,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Results directories, or directories of them (a matrix, a bisection).
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,

    #[arg(long, value_enum, default_value_t = OutputFormat::Text,
          default_value_if("json", clap::builder::ArgPredicate::IsPresent, "json"))]
    pub format: OutputFormat,

    /// The same as --format json (as `env --json`).
    #[arg(long, conflicts_with = "format")]
    pub json: bool,

    /// How many anomalies to list per run.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub anomalies: usize,

    /// One row per group instead of one section per run: the runs pooled
    /// by host, instance type (DMI product name), kernel release or
    /// pseudo-NMI verdict, with the pooled rate and its exact interval.
    #[arg(long, value_enum, value_name = "KEY")]
    pub group_by: Option<GroupBy>,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// A results directory, or a directory of them (summed); with
    /// --group-by, a group's key (e.g. c6g.12xlarge).
    #[arg(value_name = "A")]
    pub a: PathBuf,
    /// The same, to compare with.
    #[arg(value_name = "B")]
    pub b: PathBuf,

    /// Compare two groups of the runs in DIR...: A and B are keys of
    /// host, instance-type, kernel or pseudo-nmi (see report --group-by).
    #[arg(long, value_enum, value_name = "KEY", requires = "dirs")]
    pub group_by: Option<GroupBy>,

    /// With --group-by: the results directories to group.
    #[arg(value_name = "DIR", requires = "group_by")]
    pub dirs: Vec<PathBuf>,

    #[arg(long, value_enum, default_value_t = OutputFormat::Text,
          default_value_if("json", clap::builder::ArgPredicate::IsPresent, "json"))]
    pub format: OutputFormat,

    /// The same as --format json (as `env --json`).
    #[arg(long, conflicts_with = "format")]
    pub json: bool,

    /// The whole body of a mail to a list (plain text, at most 72
    /// columns): the comparison, then each side's machines, kernels,
    /// pseudo-NMI verdicts, the driver its records showed, its verdicts and
    /// the commands that reproduce its runs.
    #[arg(long, conflicts_with = "format")]
    pub mail: bool,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// A results directory (its raw.csv.gz, judged with its run.json's
    /// settings), or a stream file (raw.csv.gz or raw.csv: give --period,
    /// and --pmu or --software).
    #[arg(value_name = "DIR|FILE")]
    pub path: PathBuf,

    /// A bare stream's overflow period.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_positive)]
    pub period: Option<u64>,

    /// A bare stream's signal skid. [default: 0]
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_count)]
    pub skid: Option<u64>,

    /// A bare stream's interrupt skid. [default: 0]
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_count)]
    pub interrupt_skid: Option<u64>,

    /// A bare stream's re-arm mode.
    #[arg(long, value_enum)]
    pub mode: Option<RearmMode>,

    /// A bare stream of a software clock (task-clock, cpu-clock). A bare
    /// stream does not say what counted it: give this or --pmu.
    #[arg(long)]
    pub software: bool,

    /// A bare stream of a hardware PMU counter.
    #[arg(long, conflicts_with = "software")]
    pub pmu: bool,

    /// A bare stream that counted kernel mode.
    #[arg(long)]
    pub include_kernel: bool,

    /// Discard every Nth interrupt, as the run's self-test did.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_positive)]
    pub inject_drop_every: Option<u64>,

    /// A bare stream whose PMU interrupt is an ordinary IRQ (arm64 without
    /// pseudo-NMI): an overflow pending at a stop is lost there, never
    /// taken before it.
    #[arg(long)]
    pub irq_masked_at_stops: bool,

    /// A bare stream's bound on the count rate, events per second (as
    /// `run --max-count-rate`).
    #[arg(long, value_name = "RATE", allow_hyphen_values = true, value_parser = parse_count_rate)]
    pub max_count_rate: Option<u64>,

    /// A bare stream's driver rules at a stop (as `run --driver-rules`).
    #[arg(long, value_name = "RULES", value_enum, default_value_t = DriverRules::Auto)]
    pub driver_rules: DriverRules,

    #[arg(long, value_enum, default_value_t = OutputFormat::Text,
          default_value_if("json", clap::builder::ArgPredicate::IsPresent, "json"))]
    pub format: OutputFormat,

    /// The same as --format json (as `env --json`).
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
}

/// What `check`'s exit status answers for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CheckFor {
    /// rr: its ticks event, exact counts, a bounded skid.
    Rr,
    /// Sampling profilers: overflows that arrive, on time, without loss.
    Profiler,
    /// Both.
    All,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The use the exit status answers for: 0 fit, 1 unfit, 125 could not
    /// test.
    #[arg(long = "for", value_enum, value_name = "USE", default_value = "all")]
    pub for_use: CheckFor,

    /// Leave out the lost-overflow stress (the probes alone take a second
    /// or two).
    #[arg(long)]
    pub quick: bool,

    /// How long the lost-overflow stress runs (500ms, 10s, 5m; a bare
    /// number is seconds).
    #[arg(short = 'd', long, value_name = "DURATION", default_value = "20s", allow_hyphen_values = true, value_parser = parse_duration)]
    pub duration: Duration,

    /// Results directory of this check's own (created if missing; its
    /// check.json, and the stress's run in stress/).
    /// [default: results/<UTC time>-<host>-check, made unique]
    #[arg(short = 'o', long, visible_alias = "output", value_name = "DIR", value_parser = parse_out)]
    pub out: Option<PathBuf>,

    #[arg(long, value_enum, default_value_t = OutputFormat::Text,
          default_value_if("json", clap::builder::ArgPredicate::IsPresent, "json"))]
    pub format: OutputFormat,

    /// The same as --format json (as `env --json`).
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct EnvArgs {
    /// Print JSON instead of text.
    #[arg(long, default_value_if("format", "json", "true"))]
    pub json: bool,

    /// text or json (the same as --json), as the other commands spell it.
    #[arg(long, value_name = "FORMAT", value_parser = ["text", "json"], conflicts_with = "json")]
    pub format: Option<String>,

    /// Read the machine under this directory instead of / (a mounted image,
    /// a copy of another machine's /proc and /sys).
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Event to count, in perf's syntax: branches (the CPU's retired-branch
    /// event), instructions, cycles, perf's other hardware names
    /// (branch-misses, ref-cycles...), rHEX or r0xHEX (raw), PMU/TERMS/
    /// (cpu/event=0xc4,umask=0x1/, armv8_pmuv3/br_retired/), task-clock or
    /// cpu-clock (software: exercises the pipeline, does not test the PMU).
    /// Unlike perf, user mode only unless :uk or --include-kernel is given.
    #[arg(short = 'e', long, value_name = "SPEC", default_value = "branches", value_parser = parse_event)]
    pub event: EventArg,

    /// Overflow period in events (ns for software clocks).
    /// [default: 100000 for hardware events, 1000000 for software clocks]
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_period)]
    pub period: Option<u64>,

    /// Tolerance around each multiple of the period, for signal reads and
    /// (on hardware) for an interrupt's count past its overflow.
    /// [default: from the CPU table; period/4 for software clocks]
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_count)]
    pub skid: Option<u64>,

    /// How far past its overflow an interrupt (a sample's count) may land
    /// and still be on time, on hardware. [default: --skid when given, else
    /// measured before the run (the skid probe's pass), or the CPU table's
    /// where that is larger]
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_count)]
    pub interrupt_skid: Option<u64>,

    /// Worker threads. [default: two per CPU of --cpus]
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_workers)]
    pub workers: Option<usize>,

    /// CPUs to run on, taskset syntax (0-3,8,10-11). [default: the CPUs
    /// this process may use]
    #[arg(short = 'C', long, visible_alias = "cpu", value_name = "LIST", value_parser = parse_cpus_flag)]
    pub cpus: Option<CpuList>,

    /// How workers are moved between CPUs.
    #[arg(long, value_name = "MODE", value_enum, default_value_t = MigrateMode::PingPong)]
    pub migrate: MigrateMode,

    /// Seed of --migrate random's choices: recorded in run.json, and the
    /// report's reproduce line gives it, so a rerun draws the same
    /// sequence of CPUs. [default: from the clock]
    #[arg(long, value_name = "N", value_parser = parse_seed)]
    pub seed: Option<u64>,

    /// Pause between migration rounds (0: back to back). [default: 50us on
    /// 2 CPUs, 0 on more]
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = parse_interval)]
    pub migrate_interval: Option<Duration>,

    /// Migrator threads, each moving its share of the workers. [default:
    /// one on 2 CPUs, one per CPU of --cpus on more]
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_workers)]
    pub migrators: Option<usize>,

    /// Which workers are moved: only those that ran since their migrator
    /// last looked (a move of a waiting thread stops nothing), or any.
    /// [default: any on 2 CPUs, running on more]
    #[arg(long = "move", value_name = "WHICH", value_enum)]
    pub move_which: Option<MoveWhich>,

    /// How long to measure (500ms, 10s, 5m, 2h; a bare number is
    /// seconds). [default: 10s when --interrupts is not given either]
    #[arg(short = 'd', long, value_name = "DURATION", allow_hyphen_values = true, value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// Stop each worker at its Nth overflow signal (counted in its signal
    /// handler, which disables the event there). A verdict needs at least
    /// 299 overflows and 299 witnessed stops in all (enough to bound the
    /// dropped rate below 1% at 95% confidence); fewer is inconclusive
    /// (exit 125).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_positive)]
    pub interrupts: Option<u64>,

    /// Stop the run after this many anomalies of any kind.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_positive)]
    pub stop_after_anomalies: Option<u64>,

    /// Bisect mode: run until zero dropped interrupts would prove the rate is
    /// below this many per overflow (e.g. 0.0001) at --confidence; stop as
    /// bad at the first dropped interrupt.
    #[arg(long, value_name = "R", allow_negative_numbers = true, value_parser = parse_rate, conflicts_with = "baseline")]
    pub bad_rate: Option<f64>,

    /// Bisect mode with the bad rate taken from a known bad run (the lower
    /// end of its 95% interval, to be conservative).
    #[arg(long, value_name = "DIR")]
    pub baseline: Option<PathBuf>,

    /// Confidence for bisect mode.
    #[arg(long, value_name = "C", default_value = "0.99", allow_negative_numbers = true, value_parser = parse_confidence)]
    pub confidence: f64,

    /// Count kernel mode too, as perf's :uk (needs perf_event_paranoid <= 1
    /// or CAP_PERFMON).
    #[arg(long)]
    pub include_kernel: bool,

    /// How event stops (context switches, where a pending overflow is lost)
    /// are witnessed in the kernel's ring.
    #[arg(long, value_name = "HOW", value_enum, default_value_t = SwitchWitness::Auto)]
    pub switch_witness: SwitchWitness,

    /// A bound on the event's count rate, events per second (e.g. 1G: QEMU's
    /// emulated PMU counts cycles at 1 GHz of its virtual clock; for cycles
    /// on hardware, the CPU's highest frequency). With a time-only switch
    /// witness it bounds each stop's count from the records' times, so
    /// losses the times decide are dropped and not ambiguous. Checked
    /// against every two samples: a run where the count rose faster is
    /// inconclusive.
    #[arg(long, value_name = "RATE", allow_hyphen_values = true, value_parser = parse_count_rate)]
    pub max_count_rate: Option<u64>,

    /// What the driver does with an overflow pending when it stops the
    /// event at a context switch. stock: lost (every arm64 kernel to date);
    /// delivering: delivered late after the restart (a kernel with a fix);
    /// auto: both followed, the records refute one where they can (each
    /// kernel's stream does within a few losses in free mode with the count
    /// witness), else the stock driver's rules decide and the drops only
    /// they claim are counted apart; either: as auto, but what the records
    /// leave open is ambiguous.
    #[arg(long, value_name = "RULES", value_enum, default_value_t = DriverRules::Auto)]
    pub driver_rules: DriverRules,

    /// free: one fixed period, deltas of read() values; reset: rr-style
    /// DISABLE, RESET, PERIOD, ENABLE after every signal.
    #[arg(long, value_enum, default_value_t = RearmMode::Free)]
    pub mode: RearmMode,

    /// Self-test: discard every Nth overflow (its signal and its kernel sample
    /// record) as if its interrupt never came. The run is marked injected.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_inject)]
    pub inject_drop_every: Option<u64>,

    /// Give up on a worker whose thread or counter makes no progress this
    /// long (at least 50ms).
    #[arg(long, value_name = "DURATION", default_value = "5s", allow_hyphen_values = true, value_parser = parse_watchdog)]
    pub watchdog: Duration,

    /// Results directory of this run's own (created if missing; not /, .
    /// or .., nor the --baseline directory; one that holds a run's files is
    /// refused unless --replace, which removes them).
    /// [default: results/<UTC time>-<host>-<event>, made unique]
    #[arg(short = 'o', long, visible_alias = "output", value_name = "DIR", value_parser = parse_out)]
    pub out: Option<PathBuf>,

    /// Let --out name a directory that already holds a run: its result
    /// files are removed first (other files are left alone).
    #[arg(long, requires = "out")]
    pub replace: bool,

    /// Also write every delta to deltas.csv.
    #[arg(long)]
    pub raw: bool,

    /// Print at most this many anomaly lines (all are counted and saved).
    #[arg(long, value_name = "N", default_value_t = 50, allow_negative_numbers = true, value_parser = parse_lines)]
    pub max_anomaly_lines: u64,
}

fn parse_event(s: &str) -> Result<EventArg, String> {
    s.parse()
}

/// The longest `--duration`, `--watchdog` or `--migrate-interval`: a year,
/// far below what 64-bit nanoseconds hold (584 years), so no duration wraps.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// The largest `--period` or `--skid`: perf_event_attr.sample_period with
/// bit 63 set is rejected by the kernel (EINVAL), so it is refused here.
pub const MAX_PERIOD: u64 = i64::MAX as u64;

fn parse_count(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(n) if n <= MAX_PERIOD => Ok(n),
        _ => Err(format!(
            "expected a whole number of events from 0 to {MAX_PERIOD} (e.g. 1000), got {s:?}"
        )),
    }
}

fn parse_period(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(n) if (1..=MAX_PERIOD).contains(&n) => Ok(n),
        _ => Err(format!(
            "expected a whole number from 1 to {MAX_PERIOD} (2^63 - 1, the kernel's limit; e.g. 100000), got {s:?}"
        )),
    }
}

fn parse_out(s: &str) -> Result<PathBuf, String> {
    if s.is_empty() {
        return Err("expected a directory path (e.g. results/my-run), got an empty string".into());
    }
    Ok(PathBuf::from(s))
}

fn parse_seed(s: &str) -> Result<u64, String> {
    s.parse::<u64>().map_err(|_| {
        format!(
            "expected a whole number from 0 to {} (e.g. 42), got {s:?}",
            u64::MAX
        )
    })
}

fn parse_lines(s: &str) -> Result<u64, String> {
    s.parse::<u64>().map_err(|_| {
        format!("expected a whole number of lines (e.g. 50, or 0 for none), got {s:?}")
    })
}

fn parse_positive(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(0) | Err(_) => Err(format!(
            "expected a whole number above 0 (e.g. 100000), got {s:?}"
        )),
        Ok(n) => Ok(n),
    }
}

/// Events per second: a whole number, or a number with k, M or G (1.5G).
fn parse_count_rate(s: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "expected events per second above 0, a whole number or with k, M or G (e.g. 1G, 3.2G), got {s:?}"
        )
    };
    let (num, unit) = match s.strip_suffix(['k', 'K']) {
        Some(n) => (n, 1e3),
        None => match s.strip_suffix('M') {
            Some(n) => (n, 1e6),
            None => match s.strip_suffix('G') {
                Some(n) => (n, 1e9),
                None => (s, 1.0),
            },
        },
    };
    if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(bad());
    }
    let v: f64 = num.parse().map_err(|_| bad())?;
    let rate = (v * unit).round();
    if !(1.0..=1e15).contains(&rate) {
        return Err(bad());
    }
    Ok(rate as u64)
}

fn parse_workers(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=crate::engine::signal::MAX_WORKERS).contains(&n) => Ok(n),
        _ => Err(format!(
            "expected a number of threads from 1 to {}, got {s:?}",
            crate::engine::signal::MAX_WORKERS
        )),
    }
}

fn parse_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r > 0.0 && r < 1.0 => Ok(r),
        _ => Err(format!(
            "expected dropped interrupts per overflow, above 0 and below 1 (e.g. 0.0001 for 100 per million), got {s:?}"
        )),
    }
}

fn parse_confidence(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(c) if c > 0.0 && c < 1.0 => Ok(c),
        _ => Err(format!(
            "expected a confidence above 0 and below 1 (e.g. 0.99), got {s:?}"
        )),
    }
}

fn parse_inject(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(n) if n >= 2 => Ok(n),
        _ => Err(format!(
            "expected a whole number of at least 2 (e.g. 50), got {s:?}"
        )),
    }
}

fn too_long(s: &str) -> String {
    format!("expected a duration of at most 365d (8760h), got {s:?}")
}

fn parse_interval(s: &str) -> Result<Duration, String> {
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    match humantime::parse_duration(s) {
        Ok(d) if d > MAX_DURATION => Err(too_long(s)),
        Ok(d) => Ok(d),
        Err(e) => Err(format!(
            "expected 0 or a duration like 500us, 1ms, 2s ({e}), got {s:?}"
        )),
    }
}

/// The shortest `--watchdog`. It stops a worker that runs no user code
/// (livelocked in signal delivery) or whose event never overflows, and the
/// controller looks once a pass (5 ms): a shorter one would stop healthy
/// workers that merely waited a scheduler slice (sched_latency is up to
/// 24 ms) or the first overflow, and `--watchdog 1ns` stopped every
/// worker on the controller's first pass. Ten passes, and twice that
/// latency.
pub const MIN_WATCHDOG: Duration = Duration::from_millis(50);

fn parse_watchdog(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < MIN_WATCHDOG {
        return Err(format!(
            "expected a duration of at least 50ms (e.g. 5s), got {s:?}"
        ));
    }
    Ok(d)
}

/// A duration as humantime spells it, or a bare whole number of seconds
/// (`--duration 90`, as `sleep 90` and perf's habits have it).
fn parse_duration(s: &str) -> Result<Duration, String> {
    let parsed = match s.parse::<u64>() {
        Ok(secs) => Ok(Duration::from_secs(secs)),
        Err(_) => humantime::parse_duration(s),
    };
    match parsed {
        Ok(d) if d > MAX_DURATION => Err(too_long(s)),
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err(format!(
            "expected a duration above zero like 500ms, 10s, 5m, 2h, got {s:?}"
        )),
        Err(e) => Err(format!(
            "expected a duration like 500ms, 10s, 5m, 2h ({e}), got {s:?}"
        )),
    }
}

/// The one line printed for a command line clap rejects: clap's first line
/// names the flag and the problem; the accepted values of an enum flag are on
/// a later line, so they are appended.
pub fn usage_line<S: AsRef<std::ffi::OsStr>>(e: &clap::Error, argv: &[S]) -> String {
    use clap::error::{ContextKind, ContextValue};
    let text = e.render().to_string();
    let mut line = text
        .lines()
        .next()
        .unwrap_or("error: invalid command line")
        .to_string();
    // "the following required arguments were not provided:" lists them
    // on later lines: name them on this one.
    if let Some(ContextValue::Strings(args)) = e.get(ContextKind::InvalidArg)
        && line.trim_end().ends_with(':')
        && !args.is_empty()
    {
        line = format!("{} {}", line.trim_end(), args.join(", "));
    }
    if let Some(ContextValue::Strings(values)) = e.get(ContextKind::ValidValue)
        && !values.is_empty()
    {
        line.push_str(&format!(" (expected one of: {})", values.join(", ")));
    }
    // clap's "a similar argument exists" is on a later line: said here.
    let mut similar = Vec::new();
    for kind in [
        ContextKind::SuggestedArg,
        ContextKind::SuggestedSubcommand,
        ContextKind::SuggestedValue,
    ] {
        match e.get(kind) {
            Some(ContextValue::String(s)) => similar.push(s.clone()),
            Some(ContextValue::Strings(v)) => similar.extend(v.iter().cloned()),
            _ => {}
        }
    }
    // clap's own similarity misses a dropped letter in a short name
    // ("rn"): one edit away is suggested too.
    if similar.is_empty()
        && let Some(ContextValue::String(typed)) = e.get(ContextKind::InvalidSubcommand)
    {
        use clap::CommandFactory as _;
        similar.extend(
            Cli::command()
                .get_subcommands()
                .map(|c| c.get_name().to_string())
                .filter(|name| strsim::levenshtein(name, typed) == 1),
        );
    }
    if !similar.is_empty() {
        line.push_str(&format!(" (did you mean '{}'?)", similar.join("' or '")));
    }
    line.push_str(&help_hint(subcommand_of(argv).as_deref()));
    line
}

/// The subcommand the command line names (`argv[1]`), if it is one.
fn subcommand_of<S: AsRef<std::ffi::OsStr>>(argv: &[S]) -> Option<String> {
    use clap::CommandFactory as _;
    let word = argv.get(1)?.as_ref().to_str()?;
    Cli::command()
        .find_subcommand(word)
        .map(|c| c.get_name().to_string())
}

/// " (see pmustress run --help)": the help of the command that was given.
fn help_hint(subcommand: Option<&str>) -> String {
    match subcommand {
        Some(sub) => format!(" (see pmustress {sub} --help)"),
        None => " (see pmustress --help)".to_string(),
    }
}

/// The line for an argument that is not UTF-8 (clap's says only "invalid
/// UTF-8 was detected in one or more arguments"): which argument, and the
/// flag it is the value of.
pub fn invalid_utf8_line(e: &clap::Error, argv: &[std::ffi::OsString]) -> Option<String> {
    use clap::CommandFactory as _;
    if e.kind() != clap::error::ErrorKind::InvalidUtf8 {
        return None;
    }
    let (i, bad) = argv
        .iter()
        .enumerate()
        .skip(1)
        .find(|(_, a)| a.to_str().is_none())?;
    let text = format!("{:?}", std::ffi::OsStr::new(bad));
    let cmd = Cli::command();
    let sub_name = subcommand_of(argv);
    // --flag=VALUE
    let lossy = bad.to_string_lossy();
    if let Some((flag, _)) = lossy.split_once('=')
        && flag.starts_with('-')
        && !flag.contains('\u{fffd}')
    {
        return Some(format!(
            "error: invalid UTF-8 in the value of '{flag}': {text}; expected UTF-8 text{}",
            help_hint(sub_name.as_deref())
        ));
    }
    // --flag VALUE, when that flag takes a value.
    let sub = argv
        .get(1)
        .and_then(|s| s.to_str())
        .and_then(|name| cmd.find_subcommand(name));
    let previous = argv.get(i - 1).and_then(|p| p.to_str()).unwrap_or("");
    let takes_value = sub.is_some_and(|sub| {
        sub.get_arguments().any(|a| {
            let named = previous
                .strip_prefix("--")
                .is_some_and(|l| a.get_long() == Some(l))
                || (previous.len() == 2
                    && previous
                        .strip_prefix('-')
                        .is_some_and(|s| a.get_short().map(String::from).as_deref() == Some(s)));
            named && a.get_action().takes_values()
        })
    });
    let hint = help_hint(sub_name.as_deref());
    Some(if takes_value {
        format!(
            "error: invalid UTF-8 in the value of '{previous}': {text}; expected UTF-8 text{hint}"
        )
    } else {
        format!("error: invalid UTF-8 in argument {i}: {text}; expected UTF-8 text{hint}")
    })
}

/// A validated `--cpus` value (a newtype so clap takes it as one value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

fn parse_cpus_flag(s: &str) -> Result<CpuList, String> {
    let max = libc::CPU_SETSIZE as u32 - 1;
    crate::fingerprint::cpu::parse_cpu_list_checked(s, max)
        .map(|cpus| CpuList(cpus.into_iter().map(|c| c as usize).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn cpu_lists() {
        let ok = |s: &str| parse_cpus_flag(s).map(|l| l.0);
        assert_eq!(ok("0-3,8,10-11"), Ok(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(ok("5"), Ok(vec![5]));
        assert_eq!(ok("3,1"), Ok(vec![1, 3]));
        for bad in ["", "5-3", "1,1", "0-2,2", "a", "1-", "-1", "0,,1", "99999"] {
            assert!(ok(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn enum_errors_say_the_accepted_values_on_one_line() {
        let argv = ["pmustress", "run", "--migrate", "sideways"];
        let e = Cli::try_parse_from(argv).unwrap_err();
        assert_eq!(
            usage_line(&e, &argv),
            "error: invalid value 'sideways' for '--migrate <MODE>' (expected one of: none, ping-pong, round-robin, random) (see pmustress run --help)"
        );
        let argv = ["pmustress", "run", "--evnt", "x"];
        let e = Cli::try_parse_from(argv).unwrap_err();
        assert_eq!(
            usage_line(&e, &argv),
            "error: unexpected argument '--evnt' found (did you mean '--event'?) (see pmustress run --help)"
        );
        let argv = ["pmustress", "rn"];
        let e = Cli::try_parse_from(argv).unwrap_err();
        assert_eq!(
            usage_line(&e, &argv),
            "error: unrecognized subcommand 'rn' (did you mean 'run'?) (see pmustress --help)"
        );
        let argv = ["pmustress", "run", "--period", "0"];
        let e = Cli::try_parse_from(argv).unwrap_err();
        assert!(!usage_line(&e, &argv).contains("one of"));
    }

    #[test]
    fn numbers_and_durations() {
        assert!(parse_positive("0").is_err());
        assert!(parse_positive("-1").is_err());
        assert!(parse_positive("1e6").is_err());
        assert_eq!(parse_positive("100000"), Ok(100_000));
        assert!(parse_duration("0s").is_err());
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("1.5").is_err());
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_interval("0"), Ok(Duration::ZERO));
        assert!(parse_inject("1").is_err());
        assert!(parse_workers("0").is_err());
    }
}
