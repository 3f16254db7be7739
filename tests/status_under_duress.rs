//! The exit status and run.json stay true under duress, as a second
//! hostile trial (issue 27) found them not to: signals at odd moments,
//! resource limits, odd `--out` targets, corrupted inputs to the readers,
//! unwritable output and odd arguments.

use std::os::fd::{FromRawFd as _, OwnedFd};
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{
    exit_status_in, one_message, pmustress_child, read_json, send_signal, shared_machine,
    wait_at_most,
};

/// Waits until `dir/run.json` exists and `done` holds for it.
fn wait_for_run_json(dir: &Path, child: &mut Child, done: impl Fn(&serde_json::Value) -> bool) {
    let t = Instant::now();
    loop {
        let v = std::fs::read_to_string(dir.join("run.json"))
            .ok()
            .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok());
        if v.as_ref().is_some_and(&done) {
            return;
        }
        if t.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("run.json never reached the state waited for: {v:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A pipe's write end, its buffer (4 KiB) already full, and its read end,
/// which nobody reads: a process writing to it blocks.
fn full_pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`, which we then own;
    // fcntl and write act on the write end only.
    unsafe {
        assert_eq!(libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC), 0);
        libc::fcntl(fds[1], libc::F_SETPIPE_SZ, 4096);
        let flags = libc::fcntl(fds[1], libc::F_GETFL);
        libc::fcntl(fds[1], libc::F_SETFL, flags | libc::O_NONBLOCK);
        let block = [b'x'; 512];
        while libc::write(fds[1], block.as_ptr().cast(), block.len()) > 0 {}
        libc::fcntl(fds[1], libc::F_SETFL, flags);
        (OwnedFd::from_raw_fd(fds[1]), OwnedFd::from_raw_fd(fds[0]))
    }
}

fn rlimit(cmd: &mut Command, resource: libc::__rlimit_resource_t, bytes: u64) {
    // SAFETY: setrlimit is async-signal-safe, as pre_exec requires.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            if libc::setrlimit(resource, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

// ------------------------------------------- the status is decided once

/// Once run.json is final, a signal (one, or two back to back) exits with
/// the status it holds, however the process is held up: here printing the
/// summary into a full pipe nobody reads (it exited 130 or 143 while
/// run.json said clean, 0).
#[test]
fn a_signal_after_run_json_is_final_exits_with_its_status() {
    let _machine = shared_machine();
    let dir = tempfile::tempdir().unwrap();
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let out = dir.path().join(format!("r{sig}"));
        let (stdout, _unread) = full_pipe();
        let mut child = pmustress_child()
            .args(["run", "--event", "task-clock", "--duration", "1s", "--out"])
            .arg(&out)
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for_run_json(&out, &mut child, |v| v["verdict"] != "incomplete");
        send_signal(child.id() as i32, sig);
        send_signal(child.id() as i32, sig);
        let status = wait_at_most(&mut child, Duration::from_secs(60))
            .expect("a signal after run.json was final did not end the process");
        assert_eq!(status.code(), exit_status_in(&out), "signal {sig}");
    }
}

/// A signal stops a run whose stdout is blocked (a full pipe, anomaly
/// lines pouring out): the run loop never waits on the console. It used to
/// stop only once the reader drained the pipe (6.5 s late); here nobody
/// ever does, so only a run that does not wait can end.
#[test]
fn a_signal_stops_a_run_whose_stdout_is_blocked() {
    let _machine = shared_machine();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let (stdout, _unread) = full_pipe();
    let mut child = pmustress_child()
        .args(["run", "--event", "task-clock", "--duration", "10m"])
        .args(["--inject-drop-every", "2", "--max-anomaly-lines", "1000000"])
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_run_json(&out, &mut child, |_| true);
    // Long enough for anomaly lines to fill what the pipe takes.
    std::thread::sleep(Duration::from_secs(1));
    let t = Instant::now();
    send_signal(child.id() as i32, libc::SIGTERM);
    wait_for_run_json(&out, &mut child, |v| v["verdict"] != "incomplete");
    eprintln!("run.json final {:?} after SIGTERM", t.elapsed());
    let r = read_json(&out);
    assert_eq!(r["verdict"], "interrupted", "{r:#}");
    assert_eq!(r["stop_reason"]["signal"], libc::SIGTERM);
    // Still blocked printing its summary: the next signal ends it with
    // run.json's status.
    send_signal(child.id() as i32, libc::SIGTERM);
    let status = wait_at_most(&mut child, Duration::from_secs(60)).expect("did not end");
    assert_eq!(status.code(), Some(143));
}

// ------------------------------------------------------ resource limits

/// Under an address-space limit (`ulimit -v`), from too small to start to
/// enough: never an abort (134) with a backtrace; 125 and one line, with
/// run.json (if the directory was made) incomplete and saying why, or a
/// verdict the status agrees with.
#[test]
fn an_allocation_failure_is_one_line_and_125_with_run_json_saying_why() {
    let _machine = shared_machine();
    let dir = tempfile::tempdir().unwrap();
    let mut recorded_oom = 0;
    // Below the executable's own size the kernel cannot map it at all
    // (SIGSEGV at exec, before the loader can say so): not our code yet.
    let binary_kib = std::fs::metadata(env!("CARGO_BIN_EXE_pmustress"))
        .unwrap()
        .len()
        .div_ceil(1024);
    for kib in (6_000u64..=40_000).step_by(500).filter(|k| *k > binary_kib) {
        let out = dir.path().join(format!("r{kib}"));
        let mut cmd = pmustress_child();
        cmd.args([
            "run",
            "--event",
            "task-clock",
            "--duration",
            "200ms",
            // Few threads, so that the limits below reach our own
            // allocations and not only thread starts. (Before the run kept
            // every thread on one malloc arena, glibc also aborted here, not
            // our code, when a new thread could not allocate its TLS
            // destructor list: seen with one worker under load.)
            "--workers",
            "1",
            "--migrators",
            "1",
            "--out",
        ])
        .arg(&out);
        rlimit(&mut cmd, libc::RLIMIT_AS, kib << 10);
        let o = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        if stderr.contains("error while loading shared libraries")
            || stderr.contains("failed to allocate an alternative stack")
        {
            // Too little for the dynamic loader, or for the Rust runtime's
            // own set-up before main (its signal stack): not our code yet.
            // Which of the two a limit reaches depends on the binary's size.
            continue;
        }
        let status = o.status.code();
        assert!(
            matches!(status, Some(0 | 1 | 125)),
            "ulimit -v {kib}: {:?} {}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        );
        if !out.join("run.json").exists() {
            assert_eq!(status, Some(125), "ulimit -v {kib}");
            one_message(&o);
            let left: Vec<_> = std::fs::read_dir(&out)
                .map(|d| d.flatten().map(|e| e.file_name()).collect())
                .unwrap_or_default();
            assert!(left.is_empty(), "ulimit -v {kib}: left {left:?}");
            continue;
        }
        let r = read_json(&out);
        assert_eq!(exit_status_in(&out), status, "ulimit -v {kib}: {r:#}");
        if r["verdict"] == "incomplete" {
            let line = one_message(&o);
            let why = r["setup_failure"].as_str().unwrap_or_default();
            assert!(!why.is_empty(), "{r:#}");
            if line.contains("out of memory") {
                assert!(
                    line.contains("run.json says so"),
                    "ulimit -v {kib}: {line} {r:#}"
                );
                assert!(why.contains("out of memory"), "{why}");
                assert!(!out.join(".reserve-for-run.json").exists());
                recorded_oom += 1;
            }
        } else {
            // Enough memory: the run ran.
            break;
        }
    }
    assert!(
        recorded_oom > 0,
        "no limit made an allocation fail once run.json existed"
    );
}

/// A tiny stack limit (`ulimit -s 16`) runs like any other (it aborted).
#[test]
fn a_tiny_stack_limit_runs() {
    let _machine = shared_machine();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let mut cmd = pmustress_child();
    cmd.args([
        "run",
        "--event",
        "task-clock",
        "--duration",
        "500ms",
        "--out",
    ])
    .arg(&out)
    .stdout(Stdio::null())
    // The environment sits on the same 16 KiB, below a random offset of up
    // to 8 KiB the kernel leaves at the stack's top: with the test runner's
    // (several KiB of variables) any dynamic binary, `--version` included,
    // died with SIGSEGV in the loader about one time in three, before its
    // first instruction; with a shell's usual environment never (0 of 60).
    .env_clear()
    .env("PATH", "/usr/bin:/bin");
    rlimit(&mut cmd, libc::RLIMIT_STACK, 16 << 10);
    let o = cmd.output().unwrap();
    assert!(
        out.join("run.json").exists(),
        "no run.json: {:?}: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    let r = read_json(&out);
    assert_ne!(r["verdict"], "incomplete", "{r:#}");
    assert_eq!(o.status.code(), exit_status_in(&out));
}

/// A file size limit (`ulimit -f`) below the 2 MiB reserve is a full disk
/// at the start: 125, one line naming the limit, run.json saying why and
/// no reserve left (SIGXFSZ killed it, leaving only the reserve).
#[test]
fn a_file_size_limit_at_the_start_is_125_with_run_json() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let mut cmd = pmustress_child();
    cmd.args(["run", "--event", "task-clock", "--duration", "1s", "--out"])
        .arg(&out);
    rlimit(&mut cmd, libc::RLIMIT_FSIZE, 100 << 10);
    let o = cmd.output().unwrap();
    assert_eq!(o.status.code(), Some(125), "{:?}", o.status);
    let line = one_message(&o);
    assert!(line.contains("ulimit -f"), "{line}");
    let r = read_json(&out);
    assert_eq!(r["verdict"], "incomplete");
    assert_eq!(r["exit_status"], 125);
    assert!(
        r["setup_failure"]
            .as_str()
            .unwrap()
            .contains("File too large"),
        "{r:#}"
    );
    assert!(!out.join(".reserve-for-run.json").exists());
}

/// A file that outgrows `ulimit -f` mid-run is the full-disk path: the run
/// stops, every file is cut back to its last complete line and named in
/// partial_files (it was killed by SIGXFSZ, leaving torn lines), and a
/// self-test whose files are short does not pass: 125.
#[test]
fn a_file_size_limit_mid_run_cuts_the_files_back() {
    let _machine = shared_machine();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let mut cmd = pmustress_child();
    cmd.args([
        "run",
        "--event",
        "task-clock",
        "--period",
        "100000",
        "--raw",
    ])
    .args(["--inject-drop-every", "2", "--duration", "10m", "--out"])
    .arg(&out)
    .stdout(Stdio::null());
    rlimit(&mut cmd, libc::RLIMIT_FSIZE, 2100 << 10);
    let o = cmd.output().unwrap();
    let r = read_json(&out);
    assert_eq!(o.status.code(), Some(125), "{:?}: {r:#}", o.status);
    assert_eq!(
        (r["exit_status"].as_u64(), r["verdict"].as_str()),
        (Some(125), Some("inconclusive"))
    );
    assert!(
        r["stop_reason"]["output-failed"]
            .as_str()
            .is_some_and(|s| s.contains("File too large")),
        "{r:#}"
    );
    let partial = r["partial_files"].as_array().unwrap();
    assert!(!partial.is_empty(), "{r:#}");
    for name in ["anomalies.csv", "deltas.csv"] {
        assert!(partial.contains(&name.into()), "{name}: {r:#}");
        let text = std::fs::read(out.join(name)).unwrap();
        assert_eq!(text.last(), Some(&b'\n'), "{name} ends in a torn line");
    }
}

// --------------------------------------------------- one run, one place

/// Every file a run writes marks a directory as a run's (a directory
/// holding only raw.csv.gz was silently overwritten).
#[test]
fn an_out_holding_any_file_a_run_writes_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "raw.csv.gz",
        "deltas.csv",
        "deltas.hgrm",
        "hist-worker0.hlog",
        ".reserve-for-run.json",
        ".run.json.oom",
        ".run.json.tmp",
    ] {
        let out = dir.path().join(name.trim_start_matches('.'));
        std::fs::create_dir(&out).unwrap();
        std::fs::write(out.join(name), "another run's\n").unwrap();
        let o = pmustress_child()
            .args(["run", "--event", "task-clock", "--duration", "1s", "--out"])
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{name}");
        assert!(one_message(&o).contains("--replace"), "{name}");
        assert_eq!(
            std::fs::read_to_string(out.join(name)).unwrap(),
            "another run's\n"
        );
    }
}

/// A results directory renamed while its run writes, and a second run
/// started under the old name: each run's files stay together (the first
/// run's final run.json and deltas.hgrm landed beside the second's
/// raw.csv.gz), and the first says where its results went.
#[test]
fn a_directory_moved_while_its_run_writes_keeps_its_run_together() {
    let _machine = shared_machine();
    let dir = tempfile::tempdir().unwrap();
    let (a, moved) = (dir.path().join("A"), dir.path().join("A-moved"));
    let mut first = pmustress_child()
        .args(["run", "--event", "task-clock", "--duration", "10m"])
        .args(["--workers", "1", "--out"])
        .arg(&a)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_run_json(&a, &mut first, |_| true);
    std::fs::rename(&a, &moved).unwrap();
    let second = pmustress_child()
        .args(["run", "--event", "task-clock", "--duration", "300ms"])
        .args(["--workers", "2", "--out"])
        .arg(&a)
        .output()
        .unwrap();
    assert_eq!(second.status.code(), exit_status_in(&a));
    send_signal(first.id() as i32, libc::SIGINT);
    let status = wait_at_most(&mut first, Duration::from_secs(60)).expect("did not stop");
    let stdout = {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut first.stdout.take().unwrap(), &mut s).unwrap();
        s
    };
    let (ra, rm) = (read_json(&a), read_json(&moved));
    assert_eq!(ra["config"]["workers"], 2, "{ra:#}");
    assert_eq!(rm["config"]["workers"], 1, "{rm:#}");
    assert_eq!(rm["verdict"], "interrupted");
    assert_eq!(status.code(), Some(130));
    assert!(
        rm["warnings"]
            .to_string()
            .contains("moved or replaced while the run wrote it"),
        "{rm:#}"
    );
    assert!(
        stdout.contains(&format!("results: {}", moved.display())),
        "{stdout}"
    );
    assert!(a.join("hist-worker1.hlog").exists());
    assert!(!moved.join("hist-worker1.hlog").exists());
    assert!(moved.join("deltas.hgrm").exists());
    for d in [&a, &moved] {
        let o = pmustress_child().arg("replay").arg(d).output().unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            text.contains("replay: the same totals as run.json"),
            "{}: {text}",
            d.display()
        );
    }
}

// ----------------------------------------------------- readers, bounded

const CLEAN: &str = "tests/fixtures/results/task-clock-clean";

/// A recorded run with its stream (replay gives run.json's totals).
const STREAMED: &str = "tests/fixtures/oracle/smp2-nopnmi-w2-none-free-50k";

/// A copy of a recorded run whose raw.csv.gz is `make`'s.
fn with_stream(dir: &Path, name: &str, make: impl FnOnce(&Path)) -> std::path::PathBuf {
    let d = dir.join(name);
    std::fs::create_dir(&d).unwrap();
    std::fs::copy(Path::new(STREAMED).join("run.json"), d.join("run.json")).unwrap();
    make(&d.join("raw.csv.gz"));
    d
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

/// replay never believes a bad stream: a FIFO or a device is refused
/// without waiting on it (it hung in open, or read /dev/zero to 1.7 GB),
/// a huge line is refused at the limit (it was held whole), a plain file
/// named .gz and bytes after the last member are refused and said (both
/// were read as if fine), a worker number past any run's too; each with
/// one line naming the file, and 125.
#[test]
fn replay_refuses_streams_that_are_not_a_runs() {
    let dir = tempfile::tempdir().unwrap();
    let clean = std::fs::read(Path::new(STREAMED).join("raw.csv.gz")).unwrap();
    let header = "worker,kind,time_ns,cpu,value,si_code\n";
    let cases: Vec<(std::path::PathBuf, &str)> = vec![
        (
            with_stream(dir.path(), "fifo", |p| {
                assert!(Command::new("mkfifo").arg(p).status().unwrap().success());
            }),
            "is not a regular file",
        ),
        (
            with_stream(dir.path(), "zero", |p| {
                std::os::unix::fs::symlink("/dev/zero", p).unwrap();
            }),
            "is not a regular file",
        ),
        (
            with_stream(dir.path(), "long", |p| {
                let mut text = header.as_bytes().to_vec();
                text.resize(text.len() + (1 << 20), b'0');
                std::fs::write(p, gzip(&text)).unwrap();
            }),
            "line 2 is longer than 65536 bytes",
        ),
        (
            with_stream(dir.path(), "plain", |p| {
                let mut text = Vec::new();
                let mut d = flate2::read::MultiGzDecoder::new(&clean[..]);
                std::io::Read::read_to_end(&mut d, &mut text).unwrap();
                std::fs::write(p, text).unwrap();
            }),
            "is not gzip",
        ),
        (
            with_stream(dir.path(), "garbage", |p| {
                let mut bytes = clean.clone();
                bytes.extend_from_slice(b"garbage\n");
                std::fs::write(p, bytes).unwrap();
            }),
            "8 bytes after the last whole gzip member are not gzip",
        ),
        (
            with_stream(dir.path(), "worker", |p| {
                let text = format!("{header}5000,sample,1,0,5,\n");
                std::fs::write(p, gzip(text.as_bytes())).unwrap();
            }),
            "worker 5000 (a run has at most 1024 workers)",
        ),
    ];
    for (d, why) in cases {
        let mut child = pmustress_child()
            .arg("replay")
            .arg(&d)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let status = wait_at_most(&mut child, Duration::from_secs(60))
            .unwrap_or_else(|| panic!("{}: replay did not answer", d.display()));
        let o = child.wait_with_output().unwrap();
        assert_eq!(status.code(), Some(125), "{}", d.display());
        let line = one_message(&o);
        assert!(
            line.contains(&format!("{}/raw.csv.gz", d.display())) && line.contains(why),
            "{line}"
        );
    }
    // A member cut short (a killed run) is still judged up to there.
    let cut = with_stream(dir.path(), "cut", |p| {
        let mut bytes = clean.clone();
        bytes.extend_from_slice(&gzip(b"0,sample,1,0,5,\n")[..12]);
        std::fs::write(p, bytes).unwrap();
    });
    let o = pmustress_child().arg("replay").arg(&cut).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("note: the stream ends early"), "{text}");
}

/// `report` names a run.json that is a symlink to a device, a directory
/// or a FIFO, as replay does (it said "has no run.json"); and an
/// anomalies.csv of one endless line is refused at the limit.
#[test]
fn report_names_a_run_json_that_is_not_a_file() {
    let dir = tempfile::tempdir().unwrap();
    type Make<'a> = &'a dyn Fn(&Path);
    let make: [(&str, Make); 3] = [
        ("zero", &|p| {
            std::os::unix::fs::symlink("/dev/zero", p).unwrap()
        }),
        ("dir", &|p| std::fs::create_dir(p).unwrap()),
        ("fifo", &|p| {
            assert!(Command::new("mkfifo").arg(p).status().unwrap().success())
        }),
    ];
    for (name, make) in make {
        let d = dir.path().join(name);
        std::fs::create_dir(&d).unwrap();
        make(&d.join("run.json"));
        for argv in [vec!["report"], vec!["compare", CLEAN]] {
            let mut child = pmustress_child()
                .args(&argv)
                .arg(&d)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let status = wait_at_most(&mut child, Duration::from_secs(60))
                .unwrap_or_else(|| panic!("{name}: {argv:?} did not answer"));
            let o = child.wait_with_output().unwrap();
            assert_eq!(status.code(), Some(2), "{name} {argv:?}");
            let line = one_message(&o);
            assert!(
                line.contains(&format!("{}/run.json is not a regular file", d.display())),
                "{line}"
            );
        }
    }
    let d = dir.path().join("long-anomalies");
    std::fs::create_dir(&d).unwrap();
    for f in std::fs::read_dir(CLEAN).unwrap().flatten() {
        std::fs::copy(f.path(), d.join(f.file_name())).unwrap();
    }
    std::fs::write(d.join("anomalies.csv"), vec![b'a'; 1 << 20]).unwrap();
    let o = pmustress_child().arg("report").arg(&d).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let line = one_message(&o);
    assert!(
        line.contains("anomalies.csv") && line.contains("a line longer than 65536 bytes"),
        "{line}"
    );
}

// ---------------------------------------------------- unwritable output

fn dev_full() -> Option<std::fs::File> {
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full");
    if full.is_err() {
        eprintln!("skipped: no /dev/full");
    }
    full.ok()
}

/// stderr on a full device: the status is the one the unwritten line
/// would have explained, never a panic's 101 (a usage error, a refused
/// directory, a run, a run whose stdout is full too).
#[test]
fn a_full_stderr_changes_no_exit_status() {
    let _machine = shared_machine();
    let Some(full) = dev_full() else { return };
    let dir = tempfile::tempdir().unwrap();
    for argv in [
        &["run", "--event", "task-clock", "--duration", "0s"][..],
        &["report", "/nonexistent"],
        &["run", "--event", "task-clock", "--out", "/dev/null"],
    ] {
        let o = pmustress_child()
            .args(argv)
            .stderr(full.try_clone().unwrap())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{argv:?}");
    }
    for (name, stdout_full) in [("r", false), ("both", true)] {
        let out = dir.path().join(name);
        let mut cmd = pmustress_child();
        cmd.args([
            "run",
            "--event",
            "task-clock",
            "--duration",
            "300ms",
            "--out",
        ])
        .arg(&out)
        .stderr(full.try_clone().unwrap());
        if stdout_full {
            cmd.stdout(full.try_clone().unwrap());
        }
        let o = cmd.output().unwrap();
        assert_eq!(o.status.code(), exit_status_in(&out), "{name}");
    }
}

/// `run` with its stdout on a full device or closed: one line on stderr
/// says the console output was lost and where the results are, and the
/// status stays run.json's (it was silent). `report` with stdout closed
/// is 125 with one line (it exited 0, the output gone).
#[test]
fn unwritable_stdout_is_said_in_one_line() {
    let _machine = shared_machine();
    let Some(full) = dev_full() else { return };
    let dir = tempfile::tempdir().unwrap();
    for closed in [false, true] {
        let out = dir.path().join(format!("r{closed}"));
        let mut cmd = pmustress_child();
        cmd.args([
            "run",
            "--event",
            "task-clock",
            "--duration",
            "300ms",
            "--out",
        ])
        .arg(&out);
        if closed {
            close_stdout(&mut cmd);
        } else {
            cmd.stdout(full.try_clone().unwrap());
        }
        let o = cmd.output().unwrap();
        assert_eq!(o.status.code(), exit_status_in(&out), "closed {closed}");
        let line = one_message(&o);
        let why = if closed {
            "stdout is closed"
        } else {
            "No space left on device"
        };
        assert!(
            line.contains("the console output was not written")
                && line.contains(why)
                && line.contains(&out.display().to_string()),
            "{line}"
        );
    }
    let mut cmd = pmustress_child();
    cmd.args(["report", CLEAN]);
    close_stdout(&mut cmd);
    let o = cmd.output().unwrap();
    assert_eq!(o.status.code(), Some(125));
    assert!(one_message(&o).contains("cannot write the output: stdout is closed"));
    // `> /dev/null` is a choice, not a loss.
    let o = pmustress_child()
        .args(["report", CLEAN])
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(o.stderr.is_empty());
}

fn close_stdout(cmd: &mut Command) {
    // SAFETY: close() is async-signal-safe, as pre_exec requires.
    unsafe {
        cmd.pre_exec(|| {
            libc::close(1);
            Ok(())
        });
    }
}

// ------------------------------------------- machine limits, arguments

/// One CPU usable (taskset), no --cpus given: this machine's limit, 125
/// naming `--migrate none`, never 2 (git bisect run reads 2 as bad); with
/// --migrate none it runs.
#[test]
fn one_usable_cpu_is_125_not_2() {
    let _machine = shared_machine();
    let dir = tempfile::tempdir().unwrap();
    let on_cpu0 = |extra: &[&str], out: &Path| {
        let mut cmd = pmustress_child();
        cmd.args(["run", "--event", "task-clock", "--duration", "300ms"])
            .args(extra)
            .arg("--out")
            .arg(out)
            .stdout(Stdio::null());
        // SAFETY: sched_setaffinity is async-signal-safe, as pre_exec
        // requires; `set` is plain data.
        unsafe {
            cmd.pre_exec(|| {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(0, &mut set);
                if libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd.output().unwrap()
    };
    let o = on_cpu0(&[], &dir.path().join("a"));
    assert_eq!(o.status.code(), Some(125));
    let line = one_message(&o);
    assert!(
        line.contains("only CPU 0") && line.contains("--migrate none"),
        "{line}"
    );
    let out = dir.path().join("b");
    let o = on_cpu0(&["--migrate", "none"], &out);
    assert_eq!(o.status.code(), exit_status_in(&out));
}

/// An argument that is not UTF-8: the line names its flag (clap said only
/// "invalid UTF-8 was detected in one or more arguments").
#[test]
fn invalid_utf8_is_named_by_its_flag() {
    use std::os::unix::ffi::OsStrExt as _;
    let bad = std::ffi::OsStr::from_bytes(b"bad\xffutf");
    let eq = std::ffi::OsStr::from_bytes(b"--out=bad\xffutf");
    for (argv, flag) in [
        (vec!["run".as_ref(), "--out".as_ref(), bad], "'--out'"),
        (vec!["run".as_ref(), eq], "'--out'"),
        (vec!["run".as_ref(), "--event".as_ref(), bad], "'--event'"),
    ] {
        let o = pmustress_child().args(&argv).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{argv:?}");
        let line = one_message(&o);
        assert!(
            line.contains(&format!("invalid UTF-8 in the value of {flag}"))
                && line.contains(r"bad\xFFutf"),
            "{line}"
        );
    }
}

/// Out of descriptors while the workers open their events: the line ends
/// with what to do, not a dangling "; ".
#[test]
fn out_of_descriptors_says_what_to_do() {
    let _machine = shared_machine();
    let dir = tempfile::tempdir().unwrap();
    for limit in 4..16u64 {
        let out = dir.path().join(format!("r{limit}"));
        let mut cmd = pmustress_child();
        cmd.args([
            "run",
            "--event",
            "task-clock",
            "--duration",
            "300ms",
            "--out",
        ])
        .arg(&out)
        .stdout(Stdio::null());
        rlimit(&mut cmd, libc::RLIMIT_NOFILE, limit);
        let o = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        // Since the workers' need is checked before they start, that
        // check refuses first; a worker's failing event is still the
        // engine's to word.
        if !stderr.contains("perf_event_open") && !stderr.contains("RLIMIT_NOFILE") {
            continue;
        }
        assert_eq!(o.status.code(), Some(125));
        let line = one_message(&o);
        let line = line.trim_end();
        assert!(
            line.ends_with("give fewer --workers")
                || line.contains("; raise it (ulimit -n ") && !line.ends_with("; "),
            "{line}"
        );
        return;
    }
    panic!("no file limit up to 15 made the run refuse for descriptors");
}
