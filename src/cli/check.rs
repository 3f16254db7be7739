/*!
`pmustress check`: the fitness battery (`crate::check`) on this machine's
PMU, the lost-overflow stress as a `pmustress run` of its own (a child
process writing `stress/` in the check's directory, its console into
stress-console.txt beside it, out of the check's lines), then check.json
and one line per probe.

Exit status: for the uses `--for` names, 0 fit, 1 unfit (a probe they need
failed), 125 could not test (no PMU, no permission, no results directory),
2 usage, 128+N stopped by signal N (check.json still written, saying so).
*/

use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};
use std::time::{Duration, SystemTime};

use crate::check::document::{CHECK_SCHEMA_VERSION, CheckDocument};
use crate::check::outcome::{Fitness, Use, exit_status};
use crate::check::{Battery, StressOutcome, lost_overflow};
use crate::cli::emit::emit;
use crate::cli::stops::{Stop, install_stops, stopped_by};
use crate::cli::{CheckArgs, CheckFor};
use crate::domain::{EXIT_CANNOT_TEST, EXIT_USAGE};
use crate::engine::kernel::probe::ProbeKernel;
use crate::fingerprint::Fingerprint;
use crate::report::format;
use crate::results::writer::{OutError, claim, default_dir_name, write_json_atomically};

fn uses(for_use: CheckFor) -> Vec<Use> {
    match for_use {
        CheckFor::Rr => vec![Use::Rr],
        CheckFor::Profiler => vec![Use::Profiler],
        CheckFor::All => vec![Use::Rr, Use::Profiler],
    }
}

pub fn check_command<P: ProbeKernel>(args: &CheckArgs, pmu: &P) -> i32 {
    let stops = match install_stops() {
        Ok(s) => s,
        Err(status) => return status,
    };
    let argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let fingerprint = Fingerprint::collect(&pmu.machine_root());
    let dir = match results_dir(args, &fingerprint) {
        Ok(d) => d,
        Err(status) => return status,
    };
    let mut battery = Battery::measure(pmu, &fingerprint);
    let mut stress_dir = None;
    if battery.tested && stopped_by(&stops).is_none() {
        let stress = if args.quick {
            None
        } else {
            stress_dir = Some("stress");
            Some(stress(&dir, args.duration, &battery, &stops))
        };
        battery.add(lost_overflow(stress.as_ref()));
    }
    let interrupted_by = stopped_by(&stops);
    let asked = uses(args.for_use);
    let (rr, profiler) = (battery.fitness(Use::Rr), battery.fitness(Use::Profiler));
    let of = |u: Use| match u {
        Use::Rr => rr.clone(),
        Use::Profiler => profiler.clone(),
    };
    let fitness: Vec<(Use, Fitness)> = asked.iter().map(|u| (*u, of(*u))).collect();
    let status = interrupted_by.map_or_else(|| exit_status(&fitness), |sig| 128 + sig);
    let document = CheckDocument {
        schema: "pmustress-check",
        schema_version: CHECK_SCHEMA_VERSION,
        argv,
        for_uses: asked,
        quick: args.quick,
        stress_duration_s: args.duration.as_secs_f64(),
        rr,
        profiler,
        exit_status: status,
        interrupted_by,
        battery: &battery,
        stress_dir,
        fingerprint: &fingerprint,
        dir: dir.clone(),
    };
    if let Err(e) = write_json_atomically(&dir, "check.json", &document) {
        errln!(
            "pmustress: cannot save the check in {}: {e:#}",
            dir.display()
        );
        return EXIT_CANNOT_TEST;
    }
    match format::render(&document, args.format) {
        Ok(text) => emit(&text, status),
        Err(e) => {
            errln!("error: serialising the check: {e}");
            EXIT_CANNOT_TEST
        }
    }
}

/// The check's own directory: --out, or a new default one. One that
/// already holds a check is refused (2): its evidence stays.
fn results_dir(args: &CheckArgs, fingerprint: &Fingerprint) -> Result<PathBuf, i32> {
    let given = args.out.is_some();
    let path = args.out.clone().unwrap_or_else(|| {
        let host = fingerprint
            .kernel
            .hostname
            .value
            .clone()
            .unwrap_or_else(|| "host".into());
        Path::new("results").join(default_dir_name(SystemTime::now(), &host, "check"))
    });
    if path.join("check.json").exists() {
        errln!(
            "error: --out {}: holds a check's results already (check.json); choose another directory",
            path.display()
        );
        return Err(EXIT_USAGE);
    }
    match claim(&path, given, false) {
        // The lock is the run's business: the check writes one file.
        Ok(dir) => Ok(dir.path().to_path_buf()),
        Err(OutError::Usage(e)) => {
            errln!("error: {e}");
            Err(EXIT_USAGE)
        }
        Err(e) => {
            errln!("pmustress: cannot test here: {e}");
            Err(EXIT_CANNOT_TEST)
        }
    }
}

/// `pmustress run` with its defaults for `duration`, into `dir`/stress,
/// its console discarded (its run.json is read back); a stop signal we
/// get is passed on, and the run saves what it measured.
fn stress(dir: &Path, duration: Duration, battery: &Battery, stops: &[Stop]) -> StressOutcome {
    let out = dir.join("stress");
    let failed = |detail: String| StressOutcome {
        verdict: "not run".into(),
        exit_status: EXIT_CANNOT_TEST,
        overflows: 0,
        stops: 0,
        dropped: 0,
        detail,
        dir: "stress".into(),
    };
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return failed(format!("cannot find pmustress's own binary: {e}")),
    };
    let mut command = Process::new(exe);
    command.arg("run");
    // QEMU's PMU and others without rr's ticks: the stress counts cycles.
    if battery.counted.as_deref() == Some("cycles") {
        command.args(["--event", "cycles"]);
    }
    // Its console, for the record and for why it did not run.
    let console_path = dir.join("stress-console.txt");
    let console = match std::fs::File::create(&console_path).and_then(|f| Ok((f.try_clone()?, f))) {
        Ok(files) => files,
        Err(e) => return failed(format!("cannot create {}: {e}", console_path.display())),
    };
    command
        .arg("--duration")
        .arg(format!("{}ms", duration.as_millis()))
        .arg("--out")
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::from(console.0))
        .stderr(Stdio::from(console.1));
    let mut child = match command.spawn() {
        Ok(c) => c,
        Err(e) => return failed(format!("cannot start pmustress run: {e}")),
    };
    let mut passed_on = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => return failed(format!("waiting for pmustress run: {e}")),
        }
        if let (Some(sig), false) = (stopped_by(stops), passed_on) {
            // The run stops at its first signal and saves what it measured.
            let _ = crate::engine::kernel::process::signal_child(child.id(), sig);
            passed_on = true;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let said = std::fs::read_to_string(&console_path).unwrap_or_default();
    let code = status.code().unwrap_or(EXIT_CANNOT_TEST);
    let loaded = match crate::results::loaded::LoadedRun::load(&out) {
        Ok(l) => l,
        Err(_) => {
            let last = said
                .lines()
                .rfind(|l| !l.trim().is_empty())
                .unwrap_or("no results");
            return StressOutcome {
                exit_status: code,
                ..failed(format!("pmustress run exited {code}: {last}"))
            };
        }
    };
    let detail = loaded
        .run
        .inconclusive_because()
        .iter()
        .map(|r| r.to_string())
        .chain(loaded.run.setup_failure().map(String::from))
        .collect::<Vec<_>>()
        .join("; ");
    StressOutcome {
        verdict: loaded.verdict().to_string(),
        exit_status: code,
        overflows: loaded.overflows(),
        stops: loaded.stops().unwrap_or(0),
        dropped: loaded.dropped(),
        detail,
        dir: "stress".into(),
    }
}
