/*!
How the process ends when something interrupts it at a bad moment.

- The exit status is decided once, just before the final run.json (which
  holds it) is written and renamed into place: from then on every way out
  (a stop signal, a failed allocation) exits with that status, so the
  process and run.json never disagree. A stop signal that comes while that
  run.json is being written waits for it (`settle`): it used to exit
  before the rename, leaving run.json `incomplete` (`timeout`'s second
  signal, 20 ms after its first). Before the decision, a way out leaves
  run.json `incomplete`.
- A failed allocation (`ulimit -v`, a machine out of memory) is not an
  abort (134) with a backtrace: one line, and 125 with run.json saying why
  (a copy prepared while memory was there is renamed over run.json), or the
  decided status once run.json is final.

Everything here runs inside signal handlers or a failed allocation, so it
allocates nothing, takes no lock and only makes async-signal-safe calls.
*/

use std::alloc::{GlobalAlloc, Layout, System};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// The run.json a failed allocation renames over run.json (verdict
/// `incomplete`, exit 125, `setup_failure` saying why), written beside it
/// while the run starts.
pub const OOM_RUN_JSON: &str = ".run.json.oom";
const OOM_RUN_JSON_C: &std::ffi::CStr = c".run.json.oom";

/// The space held back for the final run.json (`results::writer`):
/// given back when an allocation fails, as no final run.json will come.
pub const RESERVE: &str = ".reserve-for-run.json";
const RESERVE_C: &std::ffi::CStr = c".reserve-for-run.json";

/// The exit status once decided (-1: not yet).
static DECIDED: AtomicI32 = AtomicI32::new(-1);
/// The results directory's descriptor while it holds `OOM_RUN_JSON` (-1:
/// none).
static OOM_DIR: AtomicI32 = AtomicI32::new(-1);

/// The exit status is `status` from now on, whatever interrupts the
/// process; `write` writes the run.json that holds it (or, where none can
/// be written, does nothing). A stop signal that comes during `write`
/// exits once it has returned (`settle`), with `status`.
pub fn decide_while<T>(status: i32, write: impl FnOnce() -> T) -> T {
    DECIDED.store(status, Ordering::SeqCst);
    let written = write();
    settle();
    written
}

/// The decided exit status, if any.
pub fn decided() -> Option<i32> {
    match DECIDED.load(Ordering::SeqCst) {
        s if s >= 0 => Some(s),
        _ => None,
    }
}

/// Set once the run.json holding the decided status is in place, or will
/// never be (its write failed).
static SETTLED: AtomicBool = AtomicBool::new(false);
/// A stop signal came while that run.json was being written.
static EXIT_ASKED: AtomicBool = AtomicBool::new(false);

/// The run.json that holds the decided status is what it will be: a stop
/// signal from now on exits with that status at once, and one that came
/// while it was written does so now.
fn settle() {
    SETTLED.store(true, Ordering::SeqCst);
    if EXIT_ASKED.load(Ordering::SeqCst)
        && let Some(status) = decided()
    {
        exit_now(status, &[]);
    }
}

/// What a stop signal does once the exit status is decided: exit with it,
/// or, while its run.json is being written, leave that to `decide_while`. False
/// (nothing done) before the decision.
pub fn exit_with_the_decided_status() -> bool {
    let Some(status) = decided() else {
        return false;
    };
    // Asked first, then settled read: with `settle`'s opposite order (all
    // SeqCst), one of the two sees the other's store and exits.
    EXIT_ASKED.store(true, Ordering::SeqCst);
    if SETTLED.load(Ordering::SeqCst) {
        exit_now(status, &[]);
    }
    true
}

/// Until `forget_results_dir`: a failed allocation renames `dir`'s
/// `OOM_RUN_JSON` over its run.json. `dir` must stay open until then.
pub fn on_oom_rename_in(dir: BorrowedFd<'_>) {
    OOM_DIR.store(dir.as_raw_fd(), Ordering::SeqCst);
}

/// The results directory is closed (or final): nothing to rename.
pub fn forget_results_dir() {
    OOM_DIR.store(-1, Ordering::SeqCst);
}

/// Writes `parts` to stderr (a failure is ignored: there is nobody left to
/// tell) and ends the process with `status` at once: no destructor runs
/// and nothing is flushed.
pub fn exit_now(status: i32, parts: &[&[u8]]) -> ! {
    for part in parts {
        // SAFETY: write(2) reads `part` only; it is async-signal-safe.
        let _ = unsafe { libc::write(2, part.as_ptr().cast(), part.len()) };
    }
    // SAFETY: _exit ends the process; it is async-signal-safe.
    unsafe { libc::_exit(status) }
}

/// `n` in decimal, in `buf`, without allocating.
fn decimal(mut n: usize, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

/// Set by the first thread whose allocation failed.
static OUT_OF_MEMORY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A failed allocation of `size` bytes: see the module's doc.
fn out_of_memory(size: usize) -> ! {
    let mut digits = [0u8; 20];
    let size = decimal(size, &mut digits);
    out_of_memory_because(&[b"an allocation of ", size, b" bytes failed"])
}

/// Memory ran out (`what` says where): see the module's doc. Also for
/// what std reports as a panic (a new thread's signal stack).
pub fn out_of_memory_because(what: &[&[u8]]) -> ! {
    // One thread says it and exits; another failing at the same time
    // waits for that exit (it would find run.json renamed already and
    // could exit first, its line without the one that says so).
    if OUT_OF_MEMORY.swap(true, Ordering::SeqCst) {
        loop {
            // SAFETY: pause only waits for a signal.
            unsafe { libc::pause() };
        }
    }
    let part = |i: usize| what.get(i).copied().unwrap_or(b"");
    if let Some(status) = decided() {
        exit_now(
            status,
            &[
                b"pmustress: out of memory (",
                part(0),
                part(1),
                part(2),
                b") after run.json was saved\n",
            ],
        );
    }
    let dir = OOM_DIR.load(Ordering::SeqCst);
    let mut recorded: &[u8] = b"";
    if dir >= 0 {
        // SAFETY: both names are NUL-terminated literals; renameat only
        // reads them; it is async-signal-safe.
        let renamed =
            unsafe { libc::renameat(dir, OOM_RUN_JSON_C.as_ptr(), dir, c"run.json".as_ptr()) };
        if renamed == 0 {
            recorded = b"; run.json says so";
        }
        // The space kept for a final run.json that will not come.
        // SAFETY: as above; unlinkat is async-signal-safe.
        let _ = unsafe { libc::unlinkat(dir, RESERVE_C.as_ptr(), 0) };
    }
    exit_now(
        crate::domain::EXIT_CANNOT_TEST,
        &[
            b"pmustress: cannot test here: out of memory: ",
            part(0),
            part(1),
            part(2),
            b" (the address-space limit, ulimit -v, or the machine's memory)",
            recorded,
            b"\n",
        ],
    )
}

/// The system allocator, with a failed allocation ending the process as
/// `out_of_memory` says rather than aborting (the binary's global
/// allocator).
pub struct Allocator;

// SAFETY: every call is the system allocator's, with the same arguments;
// a null result never returns (the process ends).
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds alloc's contract, passed on as is.
        let p = unsafe { System.alloc(layout) };
        if p.is_null() {
            out_of_memory(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in alloc.
        let p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() {
            out_of_memory(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller upholds dealloc's contract, passed on as is.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller upholds realloc's contract, passed on as is.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() {
            out_of_memory(new_size);
        }
        p
    }
}

/// Whether stdout was closed when the process started (`>&-`): Rust's
/// runtime then opens /dev/null read-write in its place, so writes vanish
/// without an error. A shell's `> /dev/null` opens it write-only.
pub fn stdout_was_closed() -> bool {
    // SAFETY: fcntl F_GETFL and fstat only inspect descriptor 1; `st` is
    // plain data written by fstat.
    unsafe {
        let flags = libc::fcntl(1, libc::F_GETFL);
        let mut st: libc::stat = std::mem::zeroed();
        flags >= 0
            && flags & libc::O_ACCMODE == libc::O_RDWR
            && libc::fstat(1, &mut st) == 0
            && st.st_mode & libc::S_IFMT == libc::S_IFCHR
            && st.st_rdev == libc::makedev(1, 3)
    }
}

/// The soft limit of the main thread's stack (`ulimit -s`), in bytes; None
/// when unlimited or unknown.
pub fn stack_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the plain-data `lim`.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_STACK, &mut lim) } == 0;
    (ok && lim.rlim_cur != libc::RLIM_INFINITY).then_some(lim.rlim_cur)
}

/// RLIMIT_NOFILE (`ulimit -n`) raised as far as `wanted` allows, the hard
/// limit at most: (soft, hard) after, None when unknown. Raising the soft
/// limit is what the hard one is for, and the run needs no more than
/// `wanted`; RLIM_INFINITY reads as u64::MAX.
pub fn raise_fd_limit(wanted: u64) -> Option<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the plain-data `lim`.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return None;
    }
    if lim.rlim_cur < wanted && lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: wanted.min(lim.rlim_max),
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit reads the plain-data `raised`; a refusal
        // leaves the limit as it was.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim.rlim_cur = raised.rlim_cur;
        }
    }
    Some((lim.rlim_cur, lim.rlim_max))
}

/// Sends `sig` to the child process `pid` (one this process spawned and
/// has not reaped, so the pid cannot name another process).
pub fn signal_child(pid: u32, sig: libc::c_int) -> std::io::Result<()> {
    // SAFETY: kill(2) takes two integers and touches no memory of ours.
    if unsafe { libc::kill(pid as libc::pid_t, sig) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_names_renamed_are_the_names_written() {
        assert_eq!(OOM_RUN_JSON_C.to_str(), Ok(OOM_RUN_JSON));
        assert_eq!(RESERVE_C.to_str(), Ok(RESERVE));
    }

    #[test]
    fn decimals_without_allocating() {
        let mut buf = [0u8; 20];
        assert_eq!(decimal(0, &mut buf), b"0");
        assert_eq!(decimal(196_608, &mut buf), b"196608");
        assert_eq!(
            decimal(usize::MAX, &mut buf),
            usize::MAX.to_string().as_bytes()
        );
    }

    /// Set in the child process `settle_child` runs in.
    const SETTLE_CHILD: &str = "PMUSTRESS_SETTLE_CHILD";

    /// A stop signal after the decision but before its run.json is in
    /// place exits only once it is (`settle`), with the decided status. In
    /// a child process (this test binary again), as the decision is
    /// process-wide and ends it.
    #[test]
    fn a_stop_while_run_json_is_written_exits_once_it_is_in_place() {
        let out = crate::testkit::child::run_in_child(
            "engine::kernel::process::tests::settle_child",
            SETTLE_CHILD,
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("undecided: went on"), "{stdout}");
        assert!(stdout.contains("being written: deferred"), "{stdout}");
        assert!(!stdout.contains("settled: went on"), "{stdout}");
        assert_eq!(out.status.code(), Some(143), "{stdout}");
    }

    #[test]
    #[ignore = "a child process of a_stop_while_run_json_is_written_exits_once_it_is_in_place"]
    fn settle_child() {
        if !crate::testkit::child::is_child(SETTLE_CHILD) {
            return;
        }
        if !exit_with_the_decided_status() {
            println!("undecided: went on");
        }
        decide_while(143, || {
            if exit_with_the_decided_status() {
                println!("being written: deferred");
            }
        });
        println!("settled: went on");
    }
}
