/*!
The signals that stop a run: their handlers.

A stop signal's first delivery raises the run's stop flag, so the run
stops and keeps what it measured; `install_stop` says what a second one
does. SIGSEGV and SIGBUS are stop signals only when a process sent them
(kill, sigqueue, tgkill: si_code <= 0); a fault of ours goes on to the
handler that was there before (Rust's, which reports a stack overflow)
and then to the default action, a core dump (`install_sent_fault_stop`).
SIGXFSZ is ignored (`ignore`), so that a write past the file size limit
fails like a full disk.
*/

use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crate::engine::kernel;

/// Whether `sig` is ignored (SIG_IGN) in this process, as `nohup` leaves
/// SIGHUP: such a signal is left ignored rather than handled.
pub fn is_ignored(sig: libc::c_int) -> bool {
    // SAFETY: a zeroed sigaction is a valid value to be written over, and
    // sigaction with a null new action only reads the current disposition.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}

/// How long a stop signal of the same kind counts as the same stop. GNU
/// `timeout` sends its signal to the child and then to the child's
/// process group, which holds the child: the same signal twice within
/// microseconds, which must not read as the second Ctrl-C that ends the
/// run at once. A second one a person sends because the run did not stop
/// comes later than this.
pub const REPEAT_WINDOW_NS: u64 = 1_000_000_000;

/// Whether a stop signal at `now_ns`, after the first of its kind at
/// `first_ns` (CLOCK_MONOTONIC), is a second stop rather than the same one
/// sent twice (`REPEAT_WINDOW_NS`).
pub fn is_second_stop(first_ns: u64, now_ns: u64) -> bool {
    now_ns.saturating_sub(first_ns) >= REPEAT_WINDOW_NS
}

/// Installs the handler of a stop signal (SIGINT, SIGTERM, SIGHUP,
/// SIGQUIT, SIGPIPE, ...): the first sets `stop` (the run stops and keeps
/// what it measured); once the exit status is decided (`process::decide_while`,
/// the final run.json), any of them ends the process with that status;
/// before that, a second one of the same kind (when `exit_on_second`) ends
/// it with 128 + `sig`, leaving run.json incomplete. The same signal again
/// within `REPEAT_WINDOW_NS` of the first is the same stop.
pub fn install_stop(
    sig: libc::c_int,
    stop: Arc<AtomicBool>,
    exit_on_second: bool,
) -> std::io::Result<signal_hook::SigId> {
    let action = stop_action(sig, stop, exit_on_second);
    // SAFETY: the action only reads the clock (clock_gettime), loads,
    // stores and swaps atomics and calls _exit, all async-signal-safe; it
    // allocates nothing and takes no lock.
    unsafe { signal_hook::low_level::register(sig, action) }
}

/// What a stop signal does (`install_stop`), as one async-signal-safe
/// closure: reads the clock, loads, stores and swaps atomics, calls _exit.
fn stop_action(
    sig: libc::c_int,
    stop: Arc<AtomicBool>,
    exit_on_second: bool,
) -> impl Fn() + Send + Sync + 'static {
    // When the first one came (0: none yet). Two threads may run this
    // handler at once: one stamps it, the other finds the stamp.
    let first_ns = AtomicU64::new(0);
    move || {
        if kernel::process::exit_with_the_decided_status() {
            return;
        }
        let now_ns = kernel::monotonic_ns().max(1);
        stop.store(true, Ordering::SeqCst);
        if let Err(first) = first_ns.compare_exchange(0, now_ns, Ordering::SeqCst, Ordering::SeqCst)
            && exit_on_second
            && is_second_stop(first, now_ns)
        {
            kernel::process::exit_now(128 + sig, &[]);
        }
    }
}

/// A sent fault signal's stop action and the handler that was installed
/// before ours, which a real fault goes back to.
struct FaultStop {
    stop: Box<dyn Fn() + Send + Sync>,
    before: libc::sigaction,
}

// SAFETY: `before` is plain data (a handler address, flags, a mask) that
// is only ever read, from any thread.
unsafe impl Send for FaultStop {}
// SAFETY: as above.
unsafe impl Sync for FaultStop {}

/// One per fault signal, set once when its handler is installed and read
/// by the handler (`OnceLock::get` is one atomic load).
static SEGV_STOP: OnceLock<FaultStop> = OnceLock::new();
static BUS_STOP: OnceLock<FaultStop> = OnceLock::new();

fn fault_stop(sig: libc::c_int) -> Option<&'static OnceLock<FaultStop>> {
    match sig {
        libc::SIGSEGV => Some(&SEGV_STOP),
        libc::SIGBUS => Some(&BUS_STOP),
        _ => None,
    }
}

/// Installs the handler of SIGSEGV or SIGBUS. One a process sent
/// (si_code <= 0: kill, sigqueue, tgkill) is a stop signal like SIGTERM
/// (`install_stop`): an external SIGSEGV used to be taken by Rust's
/// stack-overflow handler, which treats every SIGSEGV as a fault, and
/// the run went on as if nothing came. A real fault (si_code > 0) puts
/// back the handler that was there before, and the faulting instruction,
/// run again on return, meets it: Rust's report of a stack overflow, then
/// the default action. Runs on the alternate signal stack, as Rust's
/// handler does, so a fault on an overflowed stack still reaches it.
pub fn install_sent_fault_stop(
    sig: libc::c_int,
    stop: Arc<AtomicBool>,
    exit_on_second: bool,
) -> std::io::Result<()> {
    let Some(slot) = fault_stop(sig) else {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    };
    // SAFETY: a zeroed sigaction is a valid value to be written over; a
    // null new action only reads the current one.
    let mut before: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::sigaction(sig, ptr::null(), &mut before) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let fault = FaultStop {
        stop: Box::new(stop_action(sig, stop, exit_on_second)),
        before,
    };
    if slot.set(fault).is_err() {
        return Err(std::io::Error::from_raw_os_error(libc::EEXIST));
    }
    // SAFETY: zeroed is "no flags, empty mask", filled in below.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = on_fault as *const () as usize;
    action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
    // SAFETY: `action` is fully initialised and `on_fault` only does what
    // its own SAFETY line says.
    unsafe {
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(sig, &action, ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The SIGSEGV/SIGBUS handler (`install_sent_fault_stop`).
extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    let Some(fault) = fault_stop(sig).and_then(OnceLock::get) else {
        return;
    };
    // SAFETY: the kernel hands an SA_SIGINFO handler a valid siginfo.
    let sent = unsafe { info.as_ref() }.is_none_or(|i| i.si_code <= 0);
    if sent {
        (fault.stop)();
    } else {
        // SAFETY: sigaction is async-signal-safe and `before` is the
        // complete action read back when ours was installed.
        unsafe {
            libc::sigaction(sig, &fault.before, ptr::null_mut());
        }
    }
}

/// Ignores `sig` from now on: SIGXFSZ, so that a file past the size limit
/// (`ulimit -f`) fails its write with EFBIG, which the writers handle like
/// a full disk, instead of the signal killing the process (153).
pub fn ignore(sig: libc::c_int) {
    // SAFETY: setting SIG_IGN installs no code; signal() only changes the
    // disposition.
    unsafe {
        libc::signal(sig, libc::SIG_IGN);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `timeout` sends its signal twice within microseconds (to the child,
    /// then to its process group): one stop. A second one a second or more
    /// later ends the run at once.
    #[test]
    fn the_same_stop_signal_twice_in_the_window_is_one_stop() {
        let first = 5_000_000_000;
        assert!(!is_second_stop(first, first));
        assert!(!is_second_stop(first, first + 40_000));
        assert!(!is_second_stop(first, first + REPEAT_WINDOW_NS - 1));
        assert!(is_second_stop(first, first + REPEAT_WINDOW_NS));
        assert!(is_second_stop(first, first + 30 * REPEAT_WINDOW_NS));
        // A clock read that went backwards is never a second stop.
        assert!(!is_second_stop(first, first - 1));
    }

    /// Set in the child process `fault_child` runs in.
    const FAULT_CHILD: &str = "PMUSTRESS_FAULT_CHILD";

    /// A SIGSEGV a process sends stops like SIGTERM (it used to be taken by
    /// Rust's stack-overflow handler and the run went on); a real fault
    /// still ends the process by SIGSEGV. In a child process (this test
    /// binary again, running `fault_child`), as a fault ends the process.
    #[test]
    fn a_sent_segv_stops_and_a_real_fault_still_kills() {
        use std::os::unix::process::ExitStatusExt;
        let out = crate::testkit::child::run_in_child(
            "engine::stop_signal::tests::fault_child",
            FAULT_CHILD,
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("sent SIGSEGV: stop true"), "{stdout}");
        assert!(!stdout.contains("the fault returned"), "{stdout}");
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGSEGV),
            "{:?}: {stdout}",
            out.status
        );
    }

    #[test]
    #[ignore = "a child process of a_sent_segv_stops_and_a_real_fault_still_kills"]
    fn fault_child() {
        if !crate::testkit::child::is_child(FAULT_CHILD) {
            return;
        }
        let stop = Arc::new(AtomicBool::new(false));
        install_sent_fault_stop(libc::SIGSEGV, Arc::clone(&stop), true).unwrap();
        // SAFETY: raise is tgkill to this thread (si_code SI_TKILL): the
        // handler has run when it returns.
        unsafe { libc::raise(libc::SIGSEGV) };
        println!("sent SIGSEGV: stop {}", stop.load(Ordering::SeqCst));
        let no_core = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: setrlimit with a valid rlimit; mmap of a fresh anonymous
        // page that nothing may touch; reading it is the fault under test.
        unsafe {
            libc::setrlimit(libc::RLIMIT_CORE, &no_core);
            let page = libc::mmap(
                ptr::null_mut(),
                4096,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(page, libc::MAP_FAILED);
            std::ptr::read_volatile(page as *const u8);
        }
        println!("the fault returned");
    }
}
