/*!
pmustress: a PMU-interrupt reliability stress tester.

This file only wires the command line to the modules:
config -> run (workers, migrator, signal handlers) -> timeline/classify ->
results -> report. Exit statuses follow `git bisect run`: 0 good, 1 bad
(dropped interrupts), 2 usage, 125 cannot test here.
*/

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Parser;

use pmustress::cli::{Cli, Command, EnvArgs, RunArgs};
use pmustress::config::{ConfigError, RunConfig};
use pmustress::fingerprint::Fingerprint;
use pmustress::results::{EXIT_CANNOT_TEST, EXIT_USAGE, MAX_RECORDED_ANOMALIES, RunResults};
use pmustress::timeline::Anomaly;
use pmustress::{event, kernel, report, run};

/// Prints to stdout, ignoring a closed pipe (`pmustress run | head`): a
/// reader that went away must not cost us the results file.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("{}", pmustress::cli::usage_line(&e));
            return ExitCode::from(EXIT_USAGE as u8);
        }
    };
    let status = match cli.command {
        Command::Run(args) => run_command(&args),
        Command::Env(args) => env_command(&args),
    };
    ExitCode::from(status as u8)
}

fn env_command(args: &EnvArgs) -> i32 {
    let fp = Fingerprint::collect(Path::new("/"));
    if args.json {
        match serde_json::to_string_pretty(&fp) {
            Ok(s) => say!("{s}"),
            Err(e) => {
                eprintln!("error: serialising the fingerprint: {e}");
                return EXIT_CANNOT_TEST;
            }
        }
    } else {
        say!("{fp}");
    }
    0
}

/// Console output plus the anomalies kept for run.json.
struct Collect {
    console: report::Console,
    anomalies: Vec<Anomaly>,
    not_recorded: u64,
}

impl run::Observer for Collect {
    fn anomaly(&mut self, a: &Anomaly) {
        self.console.anomaly(a);
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

fn run_command(args: &RunArgs) -> i32 {
    let allowed = match kernel::allowed_cpus() {
        Ok(cpus) => cpus,
        Err(e) => {
            eprintln!("pmustress: cannot test here: sched_getaffinity failed: {e}");
            return EXIT_CANNOT_TEST;
        }
    };
    let fingerprint = Fingerprint::collect(Path::new("/"));
    let platform = event::Platform::from_fingerprint(&fingerprint);
    let cfg = match RunConfig::from_args(args, &allowed, &platform) {
        Ok(cfg) => cfg,
        Err(e @ ConfigError::Usage { .. }) => {
            eprintln!("error: {e}");
            return EXIT_USAGE;
        }
        Err(e @ ConfigError::CannotTest(_)) => {
            eprintln!("pmustress: {e}");
            return EXIT_CANNOT_TEST;
        }
    };

    match pmustress::sigqueue::check_live(cfg.workers) {
        pmustress::sigqueue::Check::Refuse(msg) => {
            eprintln!("pmustress: cannot test here: {msg}");
            return EXIT_CANNOT_TEST;
        }
        pmustress::sigqueue::Check::Warn(msg) => eprintln!("warning: {msg}"),
        pmustress::sigqueue::Check::Ok => {}
    }

    // First Ctrl-C (or SIGTERM) stops the run and keeps what was measured;
    // a second one exits at once.
    let sigint = Arc::new(AtomicBool::new(false));
    let sigterm = Arc::new(AtomicBool::new(false));
    for (sig, flag) in [(libc::SIGINT, &sigint), (libc::SIGTERM, &sigterm)] {
        let registered =
            signal_hook::flag::register_conditional_shutdown(sig, 128 + sig, Arc::clone(flag))
                .and_then(|_| signal_hook::flag::register(sig, Arc::clone(flag)));
        if let Err(e) = registered {
            eprintln!(
                "pmustress: cannot test here: installing the SIGINT/SIGTERM handlers failed: {e}"
            );
            return EXIT_CANNOT_TEST;
        }
    }
    let stop_signal = || {
        if sigint.load(Ordering::Relaxed) {
            Some(libc::SIGINT)
        } else if sigterm.load(Ordering::Relaxed) {
            Some(libc::SIGTERM)
        } else {
            None
        }
    };

    say!("{}", fingerprint.verdict_line());
    say!("{}", report::banner(&cfg));
    let mut collect = Collect {
        console: report::Console::new(cfg.max_anomaly_lines),
        anomalies: Vec::new(),
        not_recorded: 0,
    };
    let record = match run::run(&cfg, &stop_signal, &mut collect) {
        Ok(record) => record,
        Err(e) => {
            collect.console.clear_progress();
            eprintln!("pmustress: cannot test here: {e:#}");
            return EXIT_CANNOT_TEST;
        }
    };
    collect.console.clear_progress();
    let results = RunResults::new(
        &cfg,
        std::env::args().collect(),
        &fingerprint,
        &record,
        collect.anomalies,
        collect.not_recorded,
    );
    say!("{}", report::summary(&results).trim_end());
    if let Some(dir) = &cfg.out {
        if let Err(e) = results.write_json(dir) {
            eprintln!("pmustress: could not save results: {e:#}");
            return EXIT_CANNOT_TEST;
        }
        say!("results: {}", dir.join("run.json").display());
    }
    results.exit_status
}
