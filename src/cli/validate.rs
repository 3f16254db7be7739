/*!
From command-line values to one validated `RunConfig`, and a bare
stream's `JudgeConfig` for `replay` (`bare_stream`).

clap checks each value's form; here we check how they fit together and with
the machine (CPUs that exist, skid below period, the software-period guard),
and resolve the event. Usage mistakes are `ConfigError::Usage` (exit 2, one
line naming the flag); a machine that cannot run the event is
`ConfigError::CannotTest` (exit 125).
*/

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use crate::cli::{ReplayArgs, RunArgs};
use crate::config::StressDefaults;
use crate::config::event::{self, CountedModes, Platform};
use crate::config::{Bisect, RunConfig, format_cpus};
use crate::domain::{MigrateMode, MoveWhich, RearmMode};
use crate::judge::JudgeConfig;

/// Software clocks below this period livelock the worker on a 2-CPU VM and
/// fill the per-user signal queue (measured on a 2-vCPU x86_64 VM, kernel
/// 6.18: at 10 us and 5 us the thread spent ~99% in the kernel and never
/// exited).
pub const MIN_SOFTWARE_PERIOD_NS: u64 = 50_000;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{flag}: {message}")]
    Usage { flag: &'static str, message: String },
    #[error("cannot test here: {0}")]
    CannotTest(String),
}

fn usage(flag: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Usage {
        flag,
        message: message.into(),
    }
}

/// A duration flag in nanoseconds, checked rather than wrapped: clap's
/// parser caps every duration at `cli::MAX_DURATION`, and this holds the
/// same line for a `RunArgs` built any other way.
fn nanos(flag: &'static str, d: Duration) -> Result<u64, ConfigError> {
    match u64::try_from(d.as_nanos()) {
        Ok(ns) if d <= crate::cli::MAX_DURATION => Ok(ns),
        _ => Err(usage(
            flag,
            format!("expected a duration of at most 365d (8760h), got {d:?}"),
        )),
    }
}

impl Bisect {
    fn plan(args: &RunArgs) -> Result<Option<Bisect>, ConfigError> {
        // A self-test passes (exit 0) when it finds the drops it made:
        // under `git bisect run` that would mark every kernel good.
        if args.inject_drop_every.is_some() && (args.bad_rate.is_some() || args.baseline.is_some())
        {
            return Err(usage(
                "--inject-drop-every",
                "a self-test cannot bisect: its drops are ours, and exit 0 for finding them would mark the kernel good; expected it without --bad-rate and --baseline",
            ));
        }
        let (bad_rate, source, per_stop) = match (args.bad_rate, &args.baseline) {
            (Some(r), _) => (r, "--bad-rate".to_string(), None),
            (None, Some(dir)) => {
                let run = crate::results::loaded::LoadedRun::load(dir).map_err(|e| {
                    usage(
                        "--baseline",
                        format!("{e:#}; expected a results directory with run.json"),
                    )
                })?;
                // A self-test's drops are ours, and a run that never
                // finished has no counts: neither is a bad kernel's rate.
                if run.run.is_self_test() {
                    return Err(usage(
                        "--baseline",
                        format!(
                            "{} is a self-test (--inject-drop-every): its drops were injected, not lost by the kernel; expected a run without injection",
                            dir.display()
                        ),
                    ));
                }
                if let Some(why) = run.run.counts_contradict() {
                    return Err(usage(
                        "--baseline",
                        format!(
                            "{}: {why}; expected a run.json as pmustress wrote it",
                            dir.join("run.json").display()
                        ),
                    ));
                }
                if !run.run.finished() {
                    return Err(usage(
                        "--baseline",
                        format!(
                            "{} did not finish (verdict incomplete: killed, or it could not start), so it has no counts; expected a finished run",
                            dir.display()
                        ),
                    ));
                }
                let rate = crate::stats::Rate::new(
                    run.dropped(),
                    run.overflows(),
                    crate::domain::CONFIDENCE,
                );
                let low = rate.ci_low_per_million.unwrap_or(0.0) / 1e6;
                if run.dropped() == 0 || low <= 0.0 {
                    return Err(usage(
                        "--baseline",
                        format!(
                            "{} shows no dropped interrupt, so it cannot define a bad rate; give a bad run or --bad-rate",
                            dir.display()
                        ),
                    ));
                }
                // The loss happens at stops: where the baseline counted
                // them, its rate per stop says how many stops a good
                // kernel must survive.
                let stops = run
                    .run
                    .totals()
                    .and_then(|t| t.stress.as_ref())
                    .map_or(0, |s| s.stops);
                let per_stop = (stops > 0)
                    .then(|| {
                        crate::stats::Rate::new(run.dropped(), stops, crate::domain::CONFIDENCE)
                            .ci_low_per_million
                    })
                    .flatten()
                    .map(|r| r / 1e6)
                    .filter(|&r| r > 0.0);
                (
                    low,
                    format!(
                        "baseline {}: {} dropped in {} overflows and {stops} stops, lower end of the 95% interval",
                        dir.display(),
                        run.dropped(),
                        run.overflows()
                    ),
                    per_stop,
                )
            }
            (None, None) => return Ok(None),
        };
        let every_run = crate::stats::trials_to_bound(
            crate::domain::MIN_EVIDENCE_RATE,
            crate::domain::CONFIDENCE,
        )
        .unwrap_or(u64::MAX);
        let stops_needed = per_stop
            .and_then(|r| crate::stats::trials_to_bound(r, args.confidence))
            .unwrap_or(every_run)
            .max(every_run);
        let needed = crate::stats::trials_to_bound(bad_rate, args.confidence).ok_or_else(|| {
            usage(
                "--bad-rate",
                format!(
                    "a rate of {bad_rate} at confidence {} needs more overflows than any run can count (2^64); expected a larger rate, e.g. 0.0001",
                    args.confidence
                ),
            )
        })?;
        Ok(Some(Bisect {
            bad_rate,
            bad_rate_source: source,
            confidence: args.confidence,
            overflows_needed: needed,
            bad_rate_per_stop: per_stop,
            stops_needed,
        }))
    }
}

/// A run this machine cannot do (125), with the configuration it would
/// have had, so the refusal can be recorded in a results directory like
/// any run that could not start.
#[derive(Debug)]
pub struct Refused {
    pub error: ConfigError,
    /// None for a usage error (2): nothing is written for those.
    pub config: Option<Box<RunConfig>>,
}

impl RunConfig {
    /// `allowed` is the set of CPUs this process may use.
    pub fn from_args(
        args: &RunArgs,
        allowed: &[usize],
        platform: &Platform,
    ) -> Result<RunConfig, ConfigError> {
        RunConfig::from_args_or_refused(args, allowed, platform).map_err(|r| r.error)
    }

    /// As `from_args`; a machine that cannot run it (no PMU for the
    /// event, one CPU to migrate on) also gives the configuration, its
    /// event unresolved.
    pub fn from_args_or_refused(
        args: &RunArgs,
        allowed: &[usize],
        platform: &Platform,
    ) -> Result<RunConfig, Refused> {
        let mut refusal = None;
        let cfg =
            RunConfig::build(args, allowed, platform, &mut refusal).map_err(|error| Refused {
                error,
                config: None,
            })?;
        match refusal {
            Some(why) => Err(Refused {
                error: ConfigError::CannotTest(why),
                config: Some(Box::new(cfg)),
            }),
            None => Ok(cfg),
        }
    }

    /// The configuration, or the first usage error; what this machine
    /// cannot do goes to `refusal` (the first reason) and the event is
    /// then left unresolved.
    fn build(
        args: &RunArgs,
        allowed: &[usize],
        platform: &Platform,
        refusal: &mut Option<String>,
    ) -> Result<RunConfig, ConfigError> {
        let cpus = cpus(args, allowed)?;
        let too_few_to_migrate = too_few_to_migrate(args, &cpus)?;
        let spec = args.event.spec.clone();
        let include_kernel = include_kernel(args)?;
        let period = period(args)?;
        check_out(args)?;
        check_skids(args.skid, args.interrupt_skid, period)?;
        let stress = StressDefaults::for_cpus(cpus.len());
        migration_flags(args)?;
        let (migrate_interval_ns, watchdog_ns) = durations(args, &stress)?;
        let bisect = Bisect::plan(args)?;
        // Only now what this machine can do (125): every usage error (2)
        // is found first, before any event is looked up or opened.
        if too_few_to_migrate {
            *refusal = Some(format!(
                "migrating needs at least 2 CPUs, and this process may use only CPU {} (taskset, a cpuset, or CPUs offline); run where 2 CPUs are available, or give --migrate none to run without moving",
                format_cpus(&cpus)
            ));
        }
        let event = match event::resolve(spec.clone(), platform, &cpus) {
            Ok(event) => event,
            Err(e) => {
                refusal.get_or_insert(e.0);
                event::ResolvedEvent::unresolved(spec.clone())
            }
        };
        let (skid, skid_source) = skid(args, &event, period, refusal.is_some())?;
        let duration = run_length(args, bisect.as_ref());
        let interrupt_skid = match args.interrupt_skid.or(args.skid) {
            Some(s) => s,
            None => event.default_interrupt_skid.unwrap_or(skid),
        };
        let migrators = args.migrators.unwrap_or(stress.migrators);
        Ok(RunConfig {
            event,
            migrators,
            period,
            skid,
            skid_source,
            interrupt_skid,
            interrupt_skid_measured: None,
            interrupt_skid_not_measured: None,
            workers: args.workers.unwrap_or(stress.workers),
            cpus,
            migrate: args.migrate,
            migrate_interval_ns,
            move_running_only: args.move_which.unwrap_or(stress.move_which) == MoveWhich::Running,
            migrate_seed: args
                .seed
                .unwrap_or_else(crate::engine::kernel::monotonic_ns),
            duration_ns: duration.map(|d| nanos("--duration", d)).transpose()?,
            interrupts_per_worker: args.interrupts,
            stop_after_anomalies: args.stop_after_anomalies,
            bisect,
            include_kernel,
            pmu_irq_maskable: platform.pmu_irq_maskable,
            switch_witness: args.switch_witness,
            max_count_rate: args.max_count_rate,
            driver_rules: args.driver_rules,
            mode: args.mode,
            inject_drop_every: args.inject_drop_every,
            watchdog_ns,
            out: args.out.clone().unwrap_or_else(|| {
                let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
                PathBuf::from("results").join(crate::results::writer::default_dir_name(
                    std::time::SystemTime::now(),
                    &host,
                    &spec.to_string(),
                ))
            }),
            out_given: args.out.is_some(),
            raw: args.raw,
            replace: args.replace,
            max_anomaly_lines: args.max_anomaly_lines,
        })
    }
}

/// --cpus: the CPUs named, each one this process may use, or by default
/// all it may use.
fn cpus(args: &RunArgs, allowed: &[usize]) -> Result<Vec<usize>, ConfigError> {
    let cpus = match &args.cpus {
        None => allowed.to_vec(),
        Some(crate::cli::CpuList(cpus)) => {
            if let Some(bad) = cpus.iter().find(|c| !allowed.contains(c)) {
                return Err(usage(
                    "--cpus",
                    format!(
                        "CPU {bad} does not exist or is not available to this process (available: {})",
                        format_cpus(allowed)
                    ),
                ));
            }
            cpus.clone()
        }
    };
    if cpus.is_empty() {
        return Err(usage("--cpus", "no CPU is available to this process"));
    }
    Ok(cpus)
}

/// --migrate against the CPUs: whether there are too few to migrate on.
fn too_few_to_migrate(args: &RunArgs, cpus: &[usize]) -> Result<bool, ConfigError> {
    // Too few CPUs named on the command line is its mistake (2); too
    // few that this process may use (taskset, a cpuset, CPUs offline)
    // is this machine's limit, found below (125).
    let too_few_to_migrate = args.migrate != MigrateMode::None && cpus.len() < 2;
    if too_few_to_migrate && args.cpus.is_some() {
        return Err(usage(
            "--migrate",
            format!(
                "migrating needs at least 2 CPUs in --cpus (got only CPU {}); use --migrate none",
                format_cpus(cpus)
            ),
        ));
    }
    Ok(too_few_to_migrate)
}

/// Kernel mode counted: `--include-kernel`, or perf's `:uk` on the event;
/// `:u` beside `--include-kernel` asks for both and neither.
fn include_kernel(args: &RunArgs) -> Result<bool, ConfigError> {
    match args.event.modes {
        Some(CountedModes::User) if args.include_kernel => Err(usage(
            "--event",
            format!(
                "{}:u counts user mode only, and --include-kernel asks for kernel mode too: use --include-kernel without :u, or write :uk",
                args.event.spec
            ),
        )),
        Some(CountedModes::UserAndKernel) => Ok(true),
        _ => Ok(args.include_kernel),
    }
}

/// --period, or the event's default, held to the software-period guard.
fn period(args: &RunArgs) -> Result<u64, ConfigError> {
    let spec = &args.event.spec;
    let period = args.period.unwrap_or_else(|| spec.default_period());
    if spec.is_software() && period < MIN_SOFTWARE_PERIOD_NS {
        return Err(usage(
            "--period",
            format!(
                "software clocks below {MIN_SOFTWARE_PERIOD_NS} ns livelock the worker and fill the per-user signal queue; use --period {MIN_SOFTWARE_PERIOD_NS} or more (got {period})"
            ),
        ));
    }
    Ok(period)
}

/// --out: a directory, or nothing yet.
fn check_out(args: &RunArgs) -> Result<(), ConfigError> {
    let Some(out) = args.out.as_ref() else {
        return Ok(());
    };
    if out.exists() && !out.is_dir() {
        return Err(usage(
            "--out",
            format!(
                "{} exists and is not a directory; expected a directory path",
                out.display()
            ),
        ));
    }
    // A results directory belongs to one run. `/`, `.` and `..` are
    // directories that hold other things (the working directory, its
    // parent, the whole system): written into, their result files could
    // be any run's, and `--replace` would remove them there.
    let root = out.canonicalize().is_ok_and(|c| c == Path::new("/"));
    if root
        || matches!(
            out.components().next_back(),
            Some(Component::RootDir | Component::CurDir | Component::ParentDir)
        )
    {
        return Err(usage(
            "--out",
            format!(
                "{} is not a directory of its own; expected a new or empty directory for this run (e.g. results/my-run)",
                out.display()
            ),
        ));
    }
    // --replace removes the result files of --out, so a baseline there
    // would be deleted before it is read; without --replace the
    // directory is refused anyway, as one that holds a run.
    if let Some(baseline) = &args.baseline
        && same_directory(baseline, out)
    {
        return Err(usage(
            "--out",
            format!(
                "{} is also the --baseline directory, whose run.json this run reads; give --out a directory of its own",
                out.display()
            ),
        ));
    }
    Ok(())
}

/// Whether two paths name one directory (through links, `..`, or a bind
/// mount): the same device and inode.
fn same_directory(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// --skid and --interrupt-skid as given: below the period (`run` and a
/// bare stream's `replay` alike).
fn check_skids(
    skid: Option<u64>,
    interrupt_skid: Option<u64>,
    period: u64,
) -> Result<(), ConfigError> {
    for (flag, skid) in [("--skid", skid), ("--interrupt-skid", interrupt_skid)] {
        if let Some(s) = skid {
            skid_below_period(flag, s, period)?;
        }
    }
    Ok(())
}

/// A bare stream's judge settings (`replay FILE`), all from the command
/// line: its period, its skids below it as `run` holds them, and what
/// counted it, which is never assumed (judged as a PMU's, a software
/// clock's stream reads as drops: its hrtimer takes the overflow late, a
/// tick after the due point).
pub fn bare_stream(args: &ReplayArgs) -> Result<JudgeConfig, ConfigError> {
    let Some(period) = args.period else {
        return Err(usage(
            "--period",
            format!(
                "replaying a bare stream ({}) needs its period, e.g. --period 100000 (or give a results directory)",
                args.path.display()
            ),
        ));
    };
    check_skids(args.skid, args.interrupt_skid, period)?;
    if !args.software && !args.pmu {
        return Err(usage(
            "--pmu/--software",
            format!(
                "a bare stream ({}) does not say what counted it: give --pmu (a hardware PMU counter) or --software (a software clock: task-clock, cpu-clock), or give its results directory",
                args.path.display()
            ),
        ));
    }
    Ok(JudgeConfig {
        software: args.software,
        include_kernel: args.include_kernel,
        inject_drop_every: args.inject_drop_every.unwrap_or(0),
        irq_masked_at_stops: args.irq_masked_at_stops,
        max_count_rate: args.max_count_rate.unwrap_or(0),
        driver_rules: args.driver_rules,
        ..JudgeConfig::new(
            period,
            args.skid.unwrap_or(0),
            args.interrupt_skid.unwrap_or(0),
            args.mode.unwrap_or(RearmMode::Free),
        )
    })
}

/// A skid given as `flag` must be below the period: an interrupt a whole
/// period late is the next overflow's. `run` and `replay` share this rule.
pub fn skid_below_period(flag: &'static str, skid: u64, period: u64) -> Result<(), ConfigError> {
    if skid >= period {
        return Err(usage(
            flag,
            format!(
                "skid {skid} ({flag}) must be below the period {period}; give a smaller {flag} or a larger --period"
            ),
        ));
    }
    Ok(())
}

/// Flags that shape a migration mode other than the one asked for would
/// be ignored without a word: refused, naming the flag and the fix.
fn migration_flags(args: &RunArgs) -> Result<(), ConfigError> {
    if args.migrate == MigrateMode::None {
        let shaping = [
            ("--migrate-interval", args.migrate_interval.is_some()),
            ("--migrators", args.migrators.is_some()),
            ("--move", args.move_which.is_some()),
        ];
        if let Some((flag, _)) = shaping.iter().find(|(_, given)| *given) {
            return Err(usage(
                flag,
                "shapes the moves and --migrate none makes none; use --migrate ping-pong|round-robin|random with it, or drop it",
            ));
        }
    }
    if args.seed.is_some() && args.migrate != MigrateMode::Random {
        return Err(usage(
            "--seed",
            "seeds the draw of CPUs and only --migrate random draws; use --migrate random with it, or drop it",
        ));
    }
    Ok(())
}

/// --migrate-interval (or the stress default) and --watchdog in
/// nanoseconds; --duration is checked here too, with the others.
fn durations(args: &RunArgs, stress: &StressDefaults) -> Result<(u64, u64), ConfigError> {
    let migrate_interval_ns = nanos(
        "--migrate-interval",
        args.migrate_interval.unwrap_or(stress.migrate_interval),
    )?;
    let watchdog_ns = nanos("--watchdog", args.watchdog)?;
    if let Some(d) = args.duration {
        nanos("--duration", d)?;
    }
    Ok((migrate_interval_ns, watchdog_ns))
}

/// The skid and where it came from: --skid, the CPU table, or a quarter
/// of the period; below the period either way.
fn skid(
    args: &RunArgs,
    event: &event::ResolvedEvent,
    period: u64,
    refused: bool,
) -> Result<(u64, String), ConfigError> {
    let (skid, skid_source) = match (args.skid, event.default_skid) {
        (Some(s), _) => (s, "--skid".to_string()),
        (None, Some(s)) => (
            s,
            format!(
                "CPU table ({})",
                event.core.as_deref().unwrap_or("unknown CPU")
            ),
        ),
        (None, None) if refused => (period / 4, "period/4 (unresolved)".to_string()),
        (None, None) => (period / 4, "period/4 (software clock)".to_string()),
    };
    if skid >= period {
        let flag = if args.skid.is_some() {
            "--skid"
        } else {
            "--period"
        };
        return Err(usage(
            flag,
            format!(
                "skid {skid} ({skid_source}) must be below the period {period}; give a smaller --skid or a larger --period"
            ),
        ));
    }
    Ok((skid, skid_source))
}

/// --duration, or 10 s when neither it, --interrupts nor bisect mode says
/// how long.
fn run_length(args: &RunArgs, bisect: Option<&Bisect>) -> Option<Duration> {
    match (args.duration, args.interrupts, bisect) {
        // Bisect mode runs until its overflow budget unless told otherwise.
        (None, None, None) => Some(Duration::from_secs(10)),
        (d, _, _) => d,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use clap::Parser;

    fn args(extra: &[&str]) -> RunArgs {
        let mut argv = vec!["pmustress", "run"];
        argv.extend_from_slice(extra);
        match Cli::try_parse_from(argv).unwrap().command {
            crate::cli::Command::Run(a) => *a,
            _ => unreachable!(),
        }
    }

    fn no_pmu() -> Platform {
        Platform {
            arch: "x86_64".into(),
            ..Platform::default()
        }
    }

    fn check(extra: &[&str]) -> Result<RunConfig, ConfigError> {
        RunConfig::from_args(&args(extra), &[0, 1], &no_pmu())
    }

    fn usage_flag(extra: &[&str]) -> &'static str {
        match check(extra) {
            Err(ConfigError::Usage { flag, .. }) => flag,
            other => panic!("{extra:?}: expected a usage error, got {other:?}"),
        }
    }

    #[test]
    fn stops_mask_the_pmu_interrupt_only_where_it_is_an_ordinary_irq() {
        let mut c = check(&["--event", "task-clock"]).unwrap();
        assert!(!c.pmu_irq_maskable, "no PMU: unknown, so not maskable");
        c.pmu_irq_maskable = true;
        assert!(!c.judge_config().irq_masked_at_stops, "a software clock");
        c.event.software = false;
        assert!(c.judge_config().irq_masked_at_stops);
        c.pmu_irq_maskable = false;
        assert!(!c.judge_config().irq_masked_at_stops);
    }

    #[test]
    fn software_defaults() {
        let c = check(&["--event", "task-clock"]).unwrap();
        assert_eq!((c.period, c.skid, c.workers), (1_000_000, 250_000, 4));
        assert_eq!(c.cpus, vec![0, 1]);
        // The stress defaults of 2 CPUs: one migrator moving any worker
        // every 50 us.
        assert_eq!(
            (c.migrators, c.move_running_only, c.migrate_interval_ns),
            (1, false, 50_000)
        );
        // Each is still the user's to set.
        let c = check(&[
            "--event",
            "task-clock",
            "--migrators",
            "2",
            "--move",
            "running",
            "--migrate-interval",
            "0",
        ])
        .unwrap();
        assert_eq!(
            (c.migrators, c.move_running_only, c.migrate_interval_ns),
            (2, true, 0)
        );
        assert_eq!(c.duration_ns, Some(10_000_000_000));
        assert!(c.event.software);
    }

    #[test]
    fn cross_flag_errors_name_the_flag() {
        assert_eq!(
            usage_flag(&[
                "--event",
                "task-clock",
                "--period",
                "1000",
                "--skid",
                "1000"
            ]),
            "--period"
        );
        assert_eq!(
            usage_flag(&[
                "--event",
                "task-clock",
                "--period",
                "100000",
                "--skid",
                "100000"
            ]),
            "--skid"
        );
        assert_eq!(
            usage_flag(&["--event", "task-clock", "--cpus", "5"]),
            "--cpus"
        );
        assert_eq!(
            usage_flag(&["--event", "task-clock", "--cpus", "1"]),
            "--migrate"
        );
        assert_eq!(
            usage_flag(&["--event", "task-clock", "--period", "49999"]),
            "--period"
        );
        assert!(check(&["--event", "task-clock", "--cpus", "1", "--migrate", "none"]).is_ok());
    }

    /// One CPU that this process may use, with no --cpus given (taskset,
    /// a cpuset, the other CPUs offline), is this machine's limit: 125,
    /// never 2 (git bisect run reads 2 as a bad commit).
    #[test]
    fn one_usable_cpu_is_a_machine_limit_not_a_usage_error() {
        let one = |extra: &[&str]| RunConfig::from_args(&args(extra), &[0], &no_pmu());
        let Err(ConfigError::CannotTest(m)) = one(&["--event", "task-clock"]) else {
            panic!("expected cannot-test");
        };
        assert!(
            m.contains("only CPU 0") && m.contains("--migrate none"),
            "{m}"
        );
        assert!(one(&["--event", "task-clock", "--migrate", "none"]).is_ok());
        // Named on the command line: its mistake.
        assert!(matches!(
            one(&["--event", "task-clock", "--cpus", "0"]),
            Err(ConfigError::Usage {
                flag: "--migrate",
                ..
            })
        ));
        // A usage error still comes first.
        assert!(matches!(
            one(&["--event", "task-clock", "--period", "1"]),
            Err(ConfigError::Usage {
                flag: "--period",
                ..
            })
        ));
    }

    /// `/`, `.` and `..` hold other things than one run's results: each
    /// was accepted and written into (as root, `/run.json`).
    #[test]
    fn out_refuses_a_directory_that_is_not_the_runs_own() {
        for out in ["/", "//", ".", "./", "..", "../", "src/..", "/tmp/.."] {
            assert_eq!(
                usage_flag(&["--event", "task-clock", "--out", out]),
                "--out",
                "{out}"
            );
        }
        // `name/.` is `name`: a directory of its own.
        assert!(check(&["--event", "task-clock", "--out", "results/x/."]).is_ok());
    }

    /// Usage errors come before what this machine can do: a bad
    /// --baseline on a machine without a PMU is 2, not 125 (the default
    /// event, branches, needs a PMU).
    #[test]
    fn usage_errors_come_before_the_event_is_looked_up() {
        assert_eq!(usage_flag(&["--baseline", "/nonexistent"]), "--baseline");
        assert_eq!(
            usage_flag(&["--period", "1000", "--skid", "1000"]),
            "--skid"
        );
        assert_eq!(usage_flag(&["--bad-rate", "1e-300"]), "--bad-rate");
        assert!(matches!(
            check(&["--bad-rate", "0.01"]),
            Err(ConfigError::CannotTest(_))
        ));
    }

    #[test]
    fn hardware_event_without_pmu_cannot_test() {
        assert!(matches!(check(&[]), Err(ConfigError::CannotTest(m)) if m.contains("task-clock")));
    }

    #[test]
    fn cpu_list_rendering() {
        assert_eq!(format_cpus(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(format_cpus(&[]), "");
    }
}
