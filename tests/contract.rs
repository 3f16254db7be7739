//! The exit status and the results directory are a contract that scripts
//! (`git bisect run`, CI, fleets) read unattended: it holds under signals,
//! races between real processes, full disks and bad files (issue 13).

use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::util::{read_json, shared_machine};

fn pmustress_cmd() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pmustress"))
}

/// Waits for `child` at most `limit`; kills it and returns None past that,
/// so a run that does not stop fails the test instead of hanging it.
fn wait_at_most(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let t = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until the run has set up its signal handlers and results
/// directory (the preliminary run.json appears after both).
fn wait_until_started(out: &Path) {
    let t = Instant::now();
    while !out.join("run.json").exists() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "pmustress never started"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn kill(child: &Child, sig: i32) {
    // SAFETY: sending a signal to our own child process.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

/// A long software run into `out`, stdout and stderr discarded.
fn start_long(out: &Path, extra: &[&str]) -> Child {
    pmustress_cmd()
        .args(["run", "--event", "task-clock", "--duration", "10m"])
        .args(extra)
        .arg("--out")
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("pmustress starts")
}

// ------------------------------------------------ runs that stop on time

/// The migrator's interval sleep ends with the run: `--migrate-interval
/// 1h --duration 1s` used to run for the hour.
#[test]
fn a_long_migrate_interval_ends_with_the_duration() {
    let _machine = shared_machine();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let mut child = pmustress_cmd()
        .args([
            "run",
            "--event",
            "task-clock",
            "--migrate-interval",
            "1h",
            "--duration",
            "1s",
            "--out",
        ])
        .arg(&out)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let status = wait_at_most(&mut child, Duration::from_secs(60))
        .expect("a 1 s run with a 1 h migrate interval did not end within 60 s");
    let r = read_json(&out);
    assert_eq!(r["stop_reason"], "duration", "{r:#}");
    assert_eq!(
        Some(r["exit_status"].as_i64().unwrap() as i32),
        status.code()
    );
}

/// The first SIGINT stops a run whose migrator sleeps an hour, at once,
/// with a verdict (it used to be swallowed until a second one killed the
/// run without one).
#[test]
fn sigint_stops_a_run_in_a_long_migrate_interval_at_once() {
    let _machine = shared_machine();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let mut child = start_long(&out, &["--migrate-interval", "1h"]);
    wait_until_started(&out);
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    kill(&child, libc::SIGINT);
    let status =
        wait_at_most(&mut child, Duration::from_secs(60)).expect("one SIGINT did not stop the run");
    let latency = t.elapsed();
    eprintln!("stop latency after SIGINT: {latency:?}");
    assert_eq!(status.code(), Some(130));
    let r = read_json(&out);
    assert_eq!(r["verdict"], "interrupted", "{r:#}");
    // Generous: the run would otherwise last ten minutes (an hour's sleep).
    assert!(latency < Duration::from_secs(2), "{latency:?}");
}

/// SIGHUP (SSH disconnect), SIGQUIT and SIGPIPE stop the run like SIGTERM:
/// final run.json with a verdict, exit 128 + N, the reserve file gone.
#[test]
fn hangup_quit_and_broken_pipe_keep_the_verdict() {
    let _machine = shared_machine();
    let dir = tempfile::tempdir().unwrap();
    for sig in [libc::SIGHUP, libc::SIGQUIT, libc::SIGPIPE] {
        let out = dir.path().join(format!("r{sig}"));
        let mut child = start_long(&out, &[]);
        wait_until_started(&out);
        std::thread::sleep(Duration::from_millis(300));
        let t = Instant::now();
        kill(&child, sig);
        let status =
            wait_at_most(&mut child, Duration::from_secs(60)).expect("the run did not stop");
        eprintln!("stop latency after signal {sig}: {:?}", t.elapsed());
        assert_eq!(status.code(), Some(128 + sig), "signal {sig}");
        let r = read_json(&out);
        assert_eq!(r["verdict"], "interrupted", "signal {sig}: {r:#}");
        assert_eq!(r["exit_status"], 128 + sig);
        assert_eq!(r["stop_reason"]["signal"], sig);
        assert!(
            !out.join(".reserve-for-run.json").exists(),
            "signal {sig}: the reserve file was left behind"
        );
        assert!(out.join("deltas.hgrm").exists());
    }
}

/// Under `nohup` (SIGHUP ignored when we start) a hangup does not stop the
/// run: the SIGINT that follows does, and is what run.json records.
#[test]
fn an_ignored_sighup_stays_ignored() {
    let _machine = shared_machine();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let mut cmd = pmustress_cmd();
    cmd.args(["run", "--event", "task-clock", "--duration", "10m", "--out"])
        .arg(&out)
        .stdout(Stdio::null());
    // SAFETY: signal() is async-signal-safe, as pre_exec requires.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGHUP, libc::SIG_IGN);
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    wait_until_started(&out);
    kill(&child, libc::SIGHUP);
    std::thread::sleep(Duration::from_millis(300));
    assert!(child.try_wait().unwrap().is_none(), "SIGHUP stopped it");
    kill(&child, libc::SIGINT);
    let status = wait_at_most(&mut child, Duration::from_secs(60)).expect("did not stop");
    assert_eq!(status.code(), Some(130));
    let r = read_json(&out);
    assert_eq!(r["stop_reason"]["signal"], libc::SIGINT, "{r:#}");
}
