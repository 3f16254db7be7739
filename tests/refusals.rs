//! A run this machine cannot do is 125, said in one line naming what
//! failed, and recorded in run.json wherever a results directory can be
//! made: a working directory that takes no results directory (no `--out`
//! was given, so none is blamed), a signal queue too small, a file system
//! out of inodes.

use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::Output;

use crate::util::{
    exit_status_in, is_root, one_message, pmustress_child, read_json, shared_machine, skipped,
};

/// Without `--out`, in a working directory that was deleted, or where
/// nothing can be made (/proc, even for root): 125 naming the working
/// directory, not 2 naming an `--out` nobody gave (`git bisect run` reads
/// 2 as bad).
#[test]
fn a_working_directory_that_takes_no_results_is_125_not_a_usage_error() {
    let _machine = shared_machine();
    let dir = tempfile::tempdir().unwrap();
    let gone = dir.path().join("gone");
    std::fs::create_dir(&gone).unwrap();
    let mut cmd = pmustress_child();
    cmd.args(["run", "--event", "task-clock", "--duration", "1s"])
        .current_dir(&gone);
    // SAFETY: rmdir is async-signal-safe, as pre_exec requires; the
    // child removes its own working directory before pmustress starts.
    unsafe {
        cmd.pre_exec(|| {
            if libc::rmdir(c"../gone".as_ptr()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let deleted = cmd.output().unwrap();
    let proc_cwd = pmustress_child()
        .args(["run", "--event", "task-clock", "--duration", "1s"])
        .current_dir("/proc")
        .output()
        .unwrap();
    for (out, cwd) in [(&deleted, "gone (deleted)"), (&proc_cwd, "/proc")] {
        let line = one_message(out);
        assert_eq!(out.status.code(), Some(125), "{line}");
        assert!(
            line.starts_with("pmustress: cannot test here: the working directory ")
                && line.contains(cwd)
                && !line.contains("--out:"),
            "{line}"
        );
    }
}

/// A refusal for a signal queue too small (`ulimit -i 0`) comes once the
/// results directory is known: its run.json says why, as every refusal's
/// does (it used to exit 125 leaving no directory at all).
#[test]
fn a_signal_queue_too_small_is_recorded_in_run_json() {
    let _machine = shared_machine();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let o = run_with_sigpending(&out, 0);
    let line = one_message(&o);
    assert_eq!(o.status.code(), Some(125), "{line}");
    assert!(
        line.contains("the realtime signal queue is too small"),
        "{line}"
    );
    let run = read_json(&out);
    assert_eq!(run["verdict"], "incomplete", "{run:#}");
    assert_eq!(exit_status_in(&out), Some(125));
    let why = run["setup_failure"].as_str().unwrap_or_default();
    assert!(
        why.contains("the realtime signal queue is too small"),
        "{run:#}"
    );
}

/// The queue's "tight" warning, said on stderr, is in run.json's warnings
/// too. The limit is set a few signals above what this user has queued
/// now; should the user's queue grow meanwhile past it, the run is
/// refused instead, and run.json says that.
#[test]
fn a_tight_signal_queue_is_in_run_json_warnings() {
    let _machine = shared_machine();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let queued = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("SigQ:"))
        .and_then(|q| q.trim().split('/').next()?.parse::<u64>().ok())
        .expect("SigQ in /proc/self/status");
    let o = run_with_sigpending(&out, queued + 4);
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let run = read_json(&out);
    if o.status.code() == Some(125) && run["verdict"] == "incomplete" {
        let why = run["setup_failure"].as_str().unwrap_or_default();
        assert!(
            why.contains("signal queue is too small"),
            "{stderr}\n{run:#}"
        );
        return;
    }
    let warning = stderr
        .lines()
        .find_map(|l| l.strip_prefix("warning: "))
        .filter(|w| w.starts_with("the realtime signal queue is tight"))
        .unwrap_or_else(|| panic!("no tight-queue warning: {stderr}"));
    let warnings: Vec<&str> = run["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter_map(|w| w.as_str())
        .collect();
    assert!(warnings.contains(&warning), "{warning}\n{run:#}");
}

/// `pmustress run` for a second into `out`, one worker, with
/// RLIMIT_SIGPENDING at `limit`.
fn run_with_sigpending(out: &Path, limit: u64) -> Output {
    let mut cmd = pmustress_child();
    cmd.args(["run", "--event", "task-clock", "--period", "1000000"])
        .args(["--duration", "1s", "--workers", "1", "--out"])
        .arg(out);
    // SAFETY: setrlimit is async-signal-safe, as pre_exec requires.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_SIGPENDING, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.output().unwrap()
}

/// Too few file descriptors for the workers (`ulimit -n`) is refused
/// before any worker starts, run.json saying why and what fits: the run
/// used to start them all and fail at the limit's descriptor (1,024
/// workers: 3.4 GB taken, then EMFILE at fd 4096).
#[test]
fn too_few_file_descriptors_for_the_workers_are_refused_up_front() {
    let _machine = shared_machine();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let o = run_with_nofile(&out, "64", 128, 128);
    let line = one_message(&o);
    assert_eq!(o.status.code(), Some(125), "{line}");
    assert!(line.contains("64 workers need 288"), "{line}");
    assert!(line.contains("--workers 24"), "{line}");
    let run = read_json(&out);
    assert_eq!(exit_status_in(&out), Some(125));
    let why = run["setup_failure"].as_str().unwrap_or_default();
    assert!(why.contains("RLIMIT_NOFILE"), "{run:#}");
}

/// A soft descriptor limit below the need, with a hard one above it, is
/// raised: that is what the hard limit allows.
#[test]
fn a_soft_file_descriptor_limit_is_raised_to_what_the_workers_need() {
    let _machine = shared_machine();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    // 4 workers hold more than 16 descriptors: without raising, the
    // fourth worker's event failed.
    run_with_nofile(&out, "4", 16, 4096);
    let run = read_json(&out);
    assert!(run["setup_failure"].is_null(), "{run:#}");
    assert_ne!(run["verdict"], "incomplete", "{run:#}");
}

/// `pmustress run` for a second into `out` with `workers`, RLIMIT_NOFILE
/// at `soft` and `hard`.
fn run_with_nofile(out: &Path, workers: &str, soft: u64, hard: u64) -> Output {
    let mut cmd = pmustress_child();
    cmd.args(["run", "--event", "task-clock", "--period", "1000000"])
        .args(["--duration", "1s", "--workers", workers, "--out"])
        .arg(out);
    // SAFETY: setrlimit is async-signal-safe, as pre_exec requires.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: soft,
                rlim_max: hard,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.output().unwrap()
}

/// On a file system out of inodes (a tmpfs with 3 to 5), wherever the
/// run's files stop fitting: 125, and run.json says so with the same
/// status (with 3 the process exited 125 while run.json stayed
/// `incomplete` without a status: the run.json saying why needed an
/// inode for its temporary file), naming the step that failed (with 4
/// it said "cannot reserve 2 MiB" when no file could be created).
#[test]
fn out_of_inodes_the_status_and_run_json_agree() {
    let _machine = shared_machine();
    if !is_root() {
        return skipped("mounting a tmpfs needs root");
    }
    let dir = tempfile::tempdir().unwrap();
    for inodes in 3..=5 {
        let mnt = dir.path().join(format!("mnt{inodes}"));
        let kept = dir.path().join(format!("kept{inodes}"));
        std::fs::create_dir_all(&mnt).unwrap();
        std::fs::create_dir_all(&kept).unwrap();
        // The tmpfs lives in a mount namespace of its own, gone with the
        // shell: run.json is copied out before.
        let script = format!(
            "mount -t tmpfs -o nr_inodes={inodes},size=8m none {mnt} || exit 99; \
             \"$0\" run --event task-clock --period 1000000 --duration 1s --out {mnt}/out; \
             s=$?; cp {mnt}/out/run.json {kept}/; exit $s",
            mnt = mnt.display(),
            kept = kept.display()
        );
        let o = match std::process::Command::new("unshare")
            .args(["-m", "sh", "-c", &script, env!("CARGO_BIN_EXE_pmustress")])
            .output()
        {
            Ok(o) if o.status.code() != Some(99) => o,
            Ok(o) => {
                return skipped(&format!(
                    "no tmpfs mount here: {}",
                    String::from_utf8_lossy(&o.stderr)
                ));
            }
            Err(e) => return skipped(&format!("no unshare here: {e}")),
        };
        let line = one_message(&o);
        assert_eq!(o.status.code(), Some(125), "{inodes} inodes: {line}");
        let run = read_json(&kept);
        assert_eq!(exit_status_in(&kept), Some(125), "{inodes} inodes: {run:#}");
        let why = run["setup_failure"].as_str().unwrap_or_default();
        assert!(line.contains(why), "{inodes} inodes: {line}\n{why}");
        assert!(
            !why.contains("cannot reserve") && why.contains("No space left on device"),
            "{inodes} inodes: {why}"
        );
    }
}

/// In a time namespace whose CLOCK_MONOTONIC is offset (`unshare --time
/// --monotonic N`), the kernel's records and the run's rows would be N s
/// apart: the run is refused (125, recorded), where it was called clean
/// (+100,000 s) or blamed 3,543 signals on missing interrupts (-5,000 s).
#[test]
fn a_time_namespace_off_the_kernels_clock_is_refused() {
    let _machine = shared_machine();
    if !is_root() {
        return skipped("a time namespace needs root");
    }
    let dir = tempfile::tempdir().unwrap();
    for offset in ["100000", "-5000"] {
        let out = dir.path().join(format!("r{offset}"));
        let o = match std::process::Command::new("unshare")
            .args(["--time", "--fork", "--monotonic", offset])
            .arg(env!("CARGO_BIN_EXE_pmustress"))
            .args(["run", "--event", "task-clock", "--duration", "1s", "--out"])
            .arg(&out)
            .output()
        {
            Ok(o) if out.exists() || o.status.code() == Some(125) => o,
            Ok(o) => {
                return skipped(&format!(
                    "no time namespace here: {}",
                    String::from_utf8_lossy(&o.stderr)
                ));
            }
            Err(e) => return skipped(&format!("no unshare here: {e}")),
        };
        let line = one_message(&o);
        assert_eq!(o.status.code(), Some(125), "{line}");
        assert!(line.contains("time namespace"), "{line}");
        assert_eq!(exit_status_in(&out), Some(125), "{line}");
        let run = read_json(&out);
        let why = run["setup_failure"].as_str().unwrap_or_default();
        assert!(why.contains(&format!("{offset} s")), "{run:#}");
    }
}
