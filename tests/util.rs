use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use assert_cmd::Command;

pub fn pmustress() -> Command {
    Command::cargo_bin("pmustress").expect("the binary is built for integration tests")
}

/// Runs `pmustress ARGS` and returns its output.
pub fn run(args: &[&str]) -> Output {
    pmustress().args(args).output().expect("pmustress runs")
}

/// Runs `pmustress ARGS`, which must succeed, and returns its stdout.
pub fn stdout_of(args: &[&str]) -> String {
    let out = run(args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs `pmustress run ARGS --out <a fresh directory>` and returns its exit
/// code, stdout and run.json.
pub fn run_measured(args: &[&str]) -> (Option<i32>, String, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let out = pmustress()
        .arg("run")
        .args(args)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .expect("pmustress runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        read_json(&out_dir),
    )
}

pub fn read_json(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("run.json")).expect("run.json exists");
    serde_json::from_str(&text).expect("run.json parses")
}

pub fn u64_at(v: &serde_json::Value, pointer: &str) -> u64 {
    v.pointer(pointer)
        .and_then(|x| x.as_u64())
        .unwrap_or_else(|| panic!("{pointer} missing or not a number in {v:#}"))
}

/// Machines with a core PMU behave differently for hardware events.
pub fn has_core_pmu() -> bool {
    ["cpu", "cpu_core", "armv8_pmuv3_0"]
        .iter()
        .any(|p| Path::new("/sys/bus/event_source/devices").join(p).exists())
}

/// Runs share the machine: a test that changes a kernel-wide setting
/// (perf_event_max_sample_rate, perf_event_paranoid) or the user-wide
/// signal queue would change every run going on beside it. Every test that
/// launches a measurement holds this for reading; such a test holds it for
/// writing, alone.
static MACHINE: RwLock<()> = RwLock::new(());

/// Held by a test while it runs pmustress measurements.
pub fn shared_machine() -> RwLockReadGuard<'static, ()> {
    MACHINE.read().unwrap_or_else(PoisonError::into_inner)
}

/// Held by a test that changes what other runs would see.
pub fn exclusive_machine() -> RwLockWriteGuard<'static, ()> {
    MACHINE.write().unwrap_or_else(PoisonError::into_inner)
}

/// A test that cannot run here says so where it shows (straight to
/// stderr, which the test harness does not capture) before it returns,
/// and is counted: one line in `SKIPPED` (in cargo's target/tmp), which
/// .ci/run prints after the suite. A passing suite never hides a test
/// that did not run.
pub fn skipped(reason: &str) {
    use std::io::Write as _;
    // The harness names each test's thread after the test.
    let test = std::thread::current()
        .name()
        .unwrap_or("an unnamed test")
        .to_string();
    let _ = writeln!(std::io::stderr().lock(), "skipped: {test}: {reason}");
    let list = Path::new(env!("CARGO_TARGET_TMPDIR")).join(SKIPPED);
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(list)
    {
        let _ = writeln!(f, "{test}: {reason}");
    }
}

/// The list of skipped tests, one "test: reason" a line.
pub const SKIPPED: &str = "skipped-tests.txt";

pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A /proc/sys value set for the life of the guard, restored on drop, which
/// runs on panic too.
pub struct Sysctl {
    path: PathBuf,
    old: String,
}

impl Sysctl {
    /// `name` as in /proc/sys ("kernel/perf_event_max_sample_rate").
    pub fn set(name: &str, value: &str) -> std::io::Result<Sysctl> {
        let path = Path::new("/proc/sys").join(name);
        let old = std::fs::read_to_string(&path)?.trim().to_string();
        let guard = Sysctl { path, old };
        std::fs::write(&guard.path, value)?;
        Ok(guard)
    }
}

impl Drop for Sysctl {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(&self.path, &self.old) {
            eprintln!(
                "COULD NOT RESTORE {} to {}: {e}",
                self.path.display(),
                self.old
            );
        }
    }
}

/// Console text with its wrapped lines joined again: the console wraps
/// at 100 columns, indenting each continuation by four spaces.
pub fn unwrapped(text: &str) -> String {
    text.replace("\n    ", " ")
}

/// Copies the files of a recorded results directory to `to` (created),
/// then applies `edit` to its run.json.
pub fn copy_run(from: &str, to: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
    let path = to.join("run.json");
    let mut run: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut run);
    std::fs::write(&path, serde_json::to_vec(&run).unwrap()).unwrap();
}

/// `pmustress` as a `std::process::Command` (to spawn and signal),
/// started with the default SIGHUP whatever the test runner inherited (a
/// SIGHUP ignored at the start stays ignored: `nohup`).
pub fn pmustress_child() -> std::process::Command {
    use std::os::unix::process::CommandExt as _;
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_pmustress"));
    // SAFETY: signal() is async-signal-safe, as pre_exec requires.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGHUP, libc::SIG_DFL);
            Ok(())
        });
    }
    cmd
}

/// Waits for `child` at most `limit`: a guard against a hang, never a
/// measurement. Past it the child is killed and None returned, so a run
/// that does not stop fails its test instead of hanging the suite.
pub fn wait_at_most(
    child: &mut std::process::Child,
    limit: std::time::Duration,
) -> Option<std::process::ExitStatus> {
    let t = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Waits until the run in `out` has installed its signal handlers and
/// made its results directory (the first run.json comes after both).
pub fn wait_until_started(out: &Path, child: &mut std::process::Child) {
    let t = std::time::Instant::now();
    while !out.join("run.json").exists() {
        if t.elapsed() > std::time::Duration::from_secs(120) || child.try_wait().unwrap().is_some()
        {
            let _ = child.kill();
            let _ = child.wait();
            panic!("pmustress never started a run in {}", out.display());
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Sends `sig` to process (or, negative, process group) `pid`, which must
/// be this test's own child.
pub fn send_signal(pid: i32, sig: i32) {
    // SAFETY: kill(2) only sends a signal; the pid is our child (a zombie
    // until waited for, so never another process's).
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0, "kill({pid}, {sig})");
}

/// run.json's `exit_status`, if it has one.
pub fn exit_status_in(dir: &Path) -> Option<i32> {
    read_json(dir)["exit_status"].as_i64().map(|s| s as i32)
}

/// What a process said on stderr as one message, which the console may
/// have wrapped: a first line, then continuation lines indented four
/// spaces (nothing else: two messages, or a stray line, fail). The
/// message unwrapped, on one line.
pub fn one_message(out: &std::process::Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.trim_end().lines().collect();
    let continued = |l: &&str| l.starts_with("    ") && !l[4..].starts_with(' ');
    assert!(
        lines.first().is_some_and(|l| !l.starts_with(' ')) && lines[1..].iter().all(continued),
        "not one message: {stderr}"
    );
    let words: Vec<&str> = lines.iter().map(|l| l.trim_start()).collect();
    words.join(" ") + "\n"
}

/// A tmpfs of some KiB, unmounted on drop: a disk that fills up. None
/// (the test skipped, and said so) without root or where none mounts.
pub struct TinyDisk {
    pub path: PathBuf,
    _dir: tempfile::TempDir,
}

impl TinyDisk {
    pub fn mount(kib: u64) -> Option<TinyDisk> {
        TinyDisk::mount_with(kib, "")
    }

    pub fn mount_read_only(kib: u64) -> Option<TinyDisk> {
        TinyDisk::mount_with(kib, ",ro")
    }

    fn mount_with(kib: u64, options: &str) -> Option<TinyDisk> {
        if !is_root() {
            skipped("mounting a tmpfs needs root");
            return None;
        }
        let dir = tempfile::tempdir().ok()?;
        let path = dir.path().join("disk");
        std::fs::create_dir(&path).ok()?;
        let ok = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={kib}k{options}"),
                "tmpfs",
            ])
            .arg(&path)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            skipped("cannot mount a tmpfs here");
        }
        ok.then_some(TinyDisk { path, _dir: dir })
    }
}

impl Drop for TinyDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(&self.path)
            .status();
    }
}

/// A copy of results directory `dir` that outlives the test's temporary
/// directory, for a failing assertion's message to name: the stream of
/// a rare failure is its evidence. Called only when the assertion fails.
pub fn kept(dir: &Path) -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let to = std::env::temp_dir().join(format!("pmustress-kept-{}-{n}", std::process::id()));
    let copied = std::fs::create_dir_all(&to).and_then(|()| {
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                std::fs::copy(entry.path(), to.join(entry.file_name()))?;
            }
        }
        Ok(())
    });
    match copied {
        Ok(()) => format!("(results kept in {})", to.display()),
        Err(e) => format!("(could not keep {}: {e})", dir.display()),
    }
}
