/*!
Overflow signal delivery: the handlers and where they put what they see.

Each worker registers a `Slot` (its event fd, its thread id and a preallocated
ring). The kernel queues one realtime signal per overflow to the worker thread
with `si_fd` set; `on_overflow` finds the slot by fd in a static table, reads
the counter with read(2), takes the time and CPU, optionally re-arms (rr's
reset mode: DISABLE, read the count there, RESET, PERIOD, time, ENABLE) and
pushes one record. It allocates nothing, takes no lock, saves errno, and only
calls async-signal-safe syscalls.

When the per-user signal queue (RLIMIT_SIGPENDING) is full the kernel falls
back to plain SIGIO, whose default action kills the process. `on_sigio` keeps
us alive and records the fallback in the receiving worker's ring, so the
classifier can call that window `signal-queue-overflow`, not a lost interrupt.

Signals we cannot attribute (unknown fd, wrong thread) are our own or the
kernel's routing bugs: counted, never silently ignored.
*/

use std::os::fd::{BorrowedFd, RawFd};
use std::ptr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

use crate::engine::kernel::{self, HandlerKernel, Real};
use crate::engine::ring::Ring;

/// The largest fd a worker's event may have (the table is indexed by fd).
/// Descriptors are handed out lowest first, so a run's stay below the
/// number it holds: room for the most workers' (at 4096, `--workers 1024`
/// took 3.4 GB and then failed at fd 4098).
pub const MAX_FD: usize = 8192;
/// The most workers one run may have.
pub const MAX_WORKERS: usize = 1024;
/// `at_stop` in a packed record: none (no count is ever this high).
const NO_COUNT: u64 = u64::MAX;

pub use crate::records::Delivery;

/// What the handler saw for one delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalRecord {
    /// Counter value read in the handler (0 for SIGIO and failed reads).
    pub value: u64,
    /// CLOCK_MONOTONIC ns when the handler ran.
    pub time_ns: u64,
    /// CPU the handler ran on (u32::MAX if unknown).
    pub cpu: u32,
    /// siginfo si_code: POLL_IN for a plain overflow, POLL_HUP for REFRESH.
    pub si_code: i32,
    pub delivery: Delivery,
    /// Reset mode: the count at the handler's DISABLE, read before its
    /// RESET (None: not reset, or the read failed).
    pub at_stop: Option<u64>,
}

impl SignalRecord {
    fn pack(&self) -> [u64; 4] {
        let (kind, extra) = match self.delivery {
            Delivery::Overflow => (0u64, 0u64),
            Delivery::WrongThread => (1, 0),
            Delivery::ReadFailed(e) => (2, e as u32 as u64),
            Delivery::SigIo => (3, 0),
        };
        [
            self.value,
            self.time_ns,
            self.cpu as u64 | ((self.si_code as u16 as u64) << 32) | (kind << 48) | (extra << 56),
            self.at_stop.unwrap_or(NO_COUNT),
        ]
    }

    fn unpack(w: [u64; 4]) -> SignalRecord {
        let delivery = match (w[2] >> 48) & 0xff {
            0 => Delivery::Overflow,
            1 => Delivery::WrongThread,
            2 => Delivery::ReadFailed((w[2] >> 56) as i32),
            _ => Delivery::SigIo,
        };
        SignalRecord {
            value: w[0],
            time_ns: w[1],
            cpu: w[2] as u32,
            si_code: (w[2] >> 32) as u16 as i16 as i32,
            delivery,
            at_stop: (w[3] != NO_COUNT).then_some(w[3]),
        }
    }
}

/// One worker's registration: what the handler needs, and its ring.
pub struct Slot {
    fd: RawFd,
    tid: libc::pid_t,
    /// pthread_self() of the owner: checked in the handler without a syscall
    /// (every syscall there is kernel time a software clock cannot sample).
    thread: libc::pthread_t,
    /// Non-zero in reset mode: the handler re-arms with this period.
    rearm_period: u64,
    /// Set by the watchdog before its DISABLE: the handler must leave the
    /// event disabled (`hold_disabled`).
    held: AtomicBool,
    /// `--interrupts`: the handler disables the event at this many
    /// overflow signals (0: no limit), so a run stops where asked rather
    /// than where the controller, judging behind its drains, sees it.
    budget: u64,
    /// Overflow signals this handler has recorded.
    delivered: AtomicU64,
    ring: Ring<4>,
}

impl Slot {
    /// Called by the owning thread itself.
    pub fn new(fd: RawFd, tid: libc::pid_t, rearm_period: u64, capacity: usize) -> Slot {
        Slot {
            fd,
            tid,
            thread: kernel::current_thread(),
            rearm_period,
            held: AtomicBool::new(false),
            budget: 0,
            delivered: AtomicU64::new(0),
            ring: Ring::with_capacity(capacity),
        }
    }

    /// The same slot, its event disabled by the handler at the `budget`th
    /// overflow signal (0: never).
    pub fn with_budget(mut self, budget: u64) -> Slot {
        self.budget = budget;
        self
    }

    /// Whether the handler has recorded its budget of overflow signals
    /// (and disabled the event).
    pub fn spent(&self) -> bool {
        self.budget != 0 && self.delivered.load(Ordering::Acquire) >= self.budget
    }

    /// The watchdog is about to disable the event from another thread: a
    /// handler re-arming it (reset mode) must not enable it again. Called
    /// before the DISABLE; the handler looks after its ENABLE, so whichever
    /// of the two comes last leaves the event disabled.
    pub fn hold_disabled(&self) {
        self.held.store(true, Ordering::SeqCst);
    }

    /// Consumer side: the next record the handler pushed.
    pub fn pop(&self) -> Option<SignalRecord> {
        self.ring.pop().map(SignalRecord::unpack)
    }

    /// Records lost because the controller did not drain fast enough.
    pub fn ring_overflowed(&self) -> u64 {
        self.ring.overflowed()
    }

    fn push(&self, record: SignalRecord) {
        self.ring.push(record.pack());
    }
}

static BY_FD: [AtomicPtr<Slot>; MAX_FD] = [const { AtomicPtr::new(ptr::null_mut()) }; MAX_FD];
static BY_WORKER: [AtomicPtr<Slot>; MAX_WORKERS] =
    [const { AtomicPtr::new(ptr::null_mut()) }; MAX_WORKERS];
/// Overflow signals whose si_fd is no registered event.
static STRAY_OVERFLOWS: AtomicU64 = AtomicU64::new(0);
/// SIGIOs on a thread that is no registered worker.
static STRAY_SIGIO: AtomicU64 = AtomicU64::new(0);

/// Overflow signals and SIGIOs a process sent (kill, sigqueue, tgkill):
/// never the kernel's, so never an overflow or a queue overflow.
static FOREIGN: AtomicU64 = AtomicU64::new(0);

/// Whether a process sent the signal, not the kernel, counting it if so:
/// its si_code is SI_USER (0), SI_QUEUE, SI_TKILL or another value at or
/// below 0, where the kernel's own are positive (POLL_IN, POLL_HUP for an
/// overflow; SI_KERNEL for the fallback SIGIO).
fn counted_as_foreign(si_code: libc::c_int) -> bool {
    let foreign = si_code <= 0;
    if foreign {
        FOREIGN.fetch_add(1, Ordering::Relaxed);
    }
    foreign
}

/// Overflow signals and SIGIOs a process sent, ignored.
pub fn foreign_count() -> u64 {
    FOREIGN.load(Ordering::Relaxed)
}

/// Signals nobody could be charged with: (overflow signals with an unknown
/// fd, SIGIOs on a non-worker thread).
pub fn stray_counts() -> (u64, u64) {
    (
        STRAY_OVERFLOWS.load(Ordering::Relaxed),
        STRAY_SIGIO.load(Ordering::Relaxed),
    )
}

/// Keeps `slot` reachable from the handlers until the guard is dropped.
pub struct Registration {
    slot: Arc<Slot>,
    worker: usize,
}

/// Registers `slot` for `worker`. Fails if the fd or the worker index does
/// not fit the static tables, or either is taken.
pub fn register(worker: usize, slot: Arc<Slot>) -> Result<Registration, String> {
    let fd = usize::try_from(slot.fd).ok().filter(|&fd| fd < MAX_FD);
    let Some(fd) = fd else {
        return Err(format!(
            "event fd {} is beyond the handler's table of {MAX_FD}",
            slot.fd
        ));
    };
    if worker >= MAX_WORKERS {
        return Err(format!(
            "worker {worker} is beyond the limit of {MAX_WORKERS} workers"
        ));
    }
    let p = Arc::as_ptr(&slot) as *mut Slot;
    if BY_FD[fd]
        .compare_exchange(ptr::null_mut(), p, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return Err(format!("fd {fd} is already registered"));
    }
    if BY_WORKER[worker]
        .compare_exchange(ptr::null_mut(), p, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        BY_FD[fd].store(ptr::null_mut(), Ordering::Release);
        return Err(format!("worker {worker} is already registered"));
    }
    Ok(Registration { slot, worker })
}

impl Drop for Registration {
    fn drop(&mut self) {
        // The worker blocks its signals before dropping this, so no handler
        // can be between the load and the use of these pointers.
        BY_FD[self.slot.fd as usize].store(ptr::null_mut(), Ordering::Release);
        BY_WORKER[self.worker].store(ptr::null_mut(), Ordering::Release);
    }
}

/// Layout of siginfo_t for SIGPOLL-class signals on 64-bit Linux (si_band
/// then si_fd after the three ints and padding): libc does not expose si_fd.
/// Public so benches can queue exactly what the kernel sends.
#[repr(C)]
pub struct SigPollInfo {
    pub signo: libc::c_int,
    pub errno: libc::c_int,
    pub code: libc::c_int,
    _pad: libc::c_int,
    pub band: libc::c_long,
    pub fd: libc::c_int,
}

/// si_code of a SIGPOLL-class signal for input (asm-generic/siginfo.h):
/// what the kernel puts in an overflow signal. libc does not export it.
pub const POLL_IN: libc::c_int = 1;

impl SigPollInfo {
    /// What the kernel fills in for an overflow of event `fd`.
    pub fn poll_in(signo: libc::c_int, fd: libc::c_int) -> SigPollInfo {
        SigPollInfo {
            signo,
            errno: 0,
            code: POLL_IN,
            _pad: 0,
            band: 0,
            fd,
        }
    }
}

/// Restores the interrupted code's errno when the handler returns.
struct ErrnoGuard(libc::c_int);

impl ErrnoGuard {
    fn save() -> ErrnoGuard {
        // SAFETY: the calling thread's errno cell is always valid.
        ErrnoGuard(unsafe { *kernel::errno_location() })
    }
}

impl Drop for ErrnoGuard {
    fn drop(&mut self) {
        // SAFETY: as in `save`.
        unsafe { *kernel::errno_location() = self.0 };
    }
}

/// The realtime overflow signal handler.
///
/// # Safety
///
/// Only the kernel calls it, as the SA_SIGINFO handler of the overflow
/// signal: `info` is then a valid siginfo of the SIGPOLL layout.
pub unsafe extern "C" fn on_overflow(
    _signo: libc::c_int,
    info: *mut libc::siginfo_t,
    _ctx: *mut libc::c_void,
) {
    let _errno = ErrnoGuard::save();
    // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo; for a
    // signal sent by F_SETSIG it has the SIGPOLL layout.
    let (fd, si_code) = unsafe {
        let poll = &*(info as *const SigPollInfo);
        (poll.fd, poll.code)
    };
    if counted_as_foreign(si_code) {
        return;
    }
    // SAFETY: this runs on the thread the signal was routed to, which
    // blocks it before it drops its registration.
    unsafe { record_overflow(&Real, fd, si_code) }
}

/// What the overflow handler does once it knows the event (`fd`) and the
/// siginfo's `si_code`: finds the slot registered for `fd`, reads the
/// counter, checks the thread, re-arms in reset mode and pushes one record.
/// A fake kernel calls it as the handler would, with its own clock and
/// counters (`testkit::fake_kernel`).
///
/// # Safety
///
/// No registration for `fd` may be dropped while this runs: the handler
/// runs on the owning thread, which blocks the signal before it drops its
/// registration; any other caller must hold that drop off itself.
pub unsafe fn record_overflow<K: HandlerKernel>(k: &K, fd: libc::c_int, si_code: libc::c_int) {
    let time_ns = k.now_ns();
    let slot = usize::try_from(fd)
        .ok()
        .filter(|&fd| fd < MAX_FD)
        .map(|fd| BY_FD[fd].load(Ordering::Acquire))
        .filter(|p| !p.is_null());
    let Some(slot) = slot else {
        STRAY_OVERFLOWS.fetch_add(1, Ordering::Relaxed);
        return;
    };
    // SAFETY: a registered slot outlives its registration, which the
    // caller keeps (this function's contract).
    let slot = unsafe { &*slot };
    if k.current_thread() != slot.thread {
        // The ring is single-producer: only its owner's thread pushes. A
        // signal another thread took is recorded in that thread's own ring
        // (as a tool error of that worker's) or counted as stray.
        // SAFETY: this function's contract covers every registration.
        unsafe {
            record_on_own_thread(k, |cpu| SignalRecord {
                value: 0,
                time_ns,
                cpu,
                si_code,
                delivery: Delivery::WrongThread,
                at_stop: None,
            })
        };
        return;
    }
    // SAFETY: `fd` is registered, and a worker drops its registration
    // before it closes its event, so the event stays open through this call
    // (this function's contract).
    let event = unsafe { BorrowedFd::borrow_raw(fd) };
    let cpu = k.current_cpu();
    let (value, delivery) = match k.read_count(event) {
        Ok(Some(v)) => (v, Delivery::Overflow),
        Ok(None) => (0, Delivery::ReadFailed(0)),
        Err(e) => (0, Delivery::ReadFailed(e.raw_os_error().unwrap_or(0))),
    };
    let mut time_ns = time_ns;
    let mut at_stop = None;
    let rearm = slot.rearm_period != 0 && delivery == Delivery::Overflow;
    if rearm {
        // Reset mode: the record's time is taken while the event is
        // disabled, between the DISABLE (after which the old count writes
        // no record) and the ENABLE (before which the new one writes none):
        // every kernel record before it in time counts from the previous
        // reset, every one after it from this one. Taken after an enabled
        // event's PERIOD, it could come arbitrarily late (this thread
        // preempted, or its vCPU held back while the cycle counter runs on:
        // seen under QEMU for tens of ms and 20 periods), after samples of
        // the new count that were then judged on the old one.
        //
        // A failed re-arm shows up as a missing next overflow and the
        // watchdog; there is nothing safer to do inside a handler.
        at_stop = k.disarm(event, slot.rearm_period).ok().flatten();
        time_ns = k.now_ns();
    }
    // The budget's last signal: no further overflow may come, so the
    // event stays disabled (in reset mode past the re-arm below, as for
    // the watchdog).
    let spent = delivery == Delivery::Overflow
        && slot.budget != 0
        && slot.delivered.load(Ordering::Relaxed) + 1 >= slot.budget;
    if spent {
        slot.held.store(true, Ordering::SeqCst);
    }
    slot.push(SignalRecord {
        value,
        time_ns,
        cpu,
        si_code,
        delivery,
        at_stop,
    });
    if delivery == Delivery::Overflow {
        // Only this thread writes it: a load and a store, no RMW needed.
        let n = slot.delivered.load(Ordering::Relaxed) + 1;
        slot.delivered.store(n, Ordering::Release);
    }
    if spent && !rearm {
        let _ = k.disable(event);
    }
    if rearm {
        // Enabled only once the record is pushed: no record of the new
        // count can reach the controller before it (or it would judge
        // them first and find this one out of time order).
        let _ = k.arm(event);
        // The watchdog's one DISABLE may have come between our DISABLE
        // and this ENABLE: it set `held` before it, so the event is
        // disabled again here (`Slot::hold_disabled`).
        if slot.held.load(Ordering::SeqCst) {
            let _ = k.disable(event);
        }
    }
}

/// The plain-SIGIO fallback handler.
///
/// # Safety
///
/// Only the kernel calls it, as the handler of SIGIO.
pub unsafe extern "C" fn on_sigio(
    _signo: libc::c_int,
    info: *mut libc::siginfo_t,
    _ctx: *mut libc::c_void,
) {
    let _errno = ErrnoGuard::save();
    // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo, whose
    // si_code every layout has at the same place.
    let si_code = unsafe { (*info).si_code };
    if counted_as_foreign(si_code) {
        return;
    }
    // SAFETY: as in `on_overflow`: every worker blocks SIGIO before it
    // drops its registration.
    unsafe { record_sigio(&Real) }
}

/// What the SIGIO handler does: records the fallback in the ring of the
/// worker whose thread (`k.gettid()`) took it.
///
/// # Safety
///
/// As for `record_overflow`, for every registration.
pub unsafe fn record_sigio<K: HandlerKernel>(k: &K) {
    let time_ns = k.now_ns();
    // SAFETY: this function's contract is `record_on_own_thread`'s.
    unsafe {
        record_on_own_thread(k, |cpu| SignalRecord {
            value: 0,
            time_ns,
            cpu,
            si_code: 0,
            delivery: Delivery::SigIo,
            at_stop: None,
        })
    };
}

/// Pushes `record` (given the CPU) into the ring of the worker whose thread
/// runs this (`k.gettid()`): the one ring this thread may produce into.
/// Counted as stray when this thread is no worker's.
///
/// # Safety
///
/// As `record_overflow`: no registration may be dropped while this runs.
unsafe fn record_on_own_thread<K: HandlerKernel>(k: &K, record: impl FnOnce(u32) -> SignalRecord) {
    let tid = k.gettid();
    for entry in &BY_WORKER {
        let p = entry.load(Ordering::Acquire);
        // SAFETY: as in `record_overflow`.
        if let Some(slot) = unsafe { p.as_ref() }
            && slot.tid == tid
        {
            slot.push(record(k.current_cpu()));
            return;
        }
    }
    let stray = match record(0).delivery {
        Delivery::SigIo => &STRAY_SIGIO,
        _ => &STRAY_OVERFLOWS,
    };
    stray.fetch_add(1, Ordering::Relaxed);
}

/// The realtime signal the workers use: SIGRTMIN()+1, taken at run time
/// because glibc reserves the first few for itself.
pub fn overflow_signal() -> libc::c_int {
    libc::SIGRTMIN() + 1
}

/// Installs both handlers process-wide (each blocks the other while running).
pub fn install() -> std::io::Result<()> {
    let rt = overflow_signal();
    kernel::install_handler(rt, on_overflow, &[rt, libc::SIGIO])?;
    kernel::install_handler(libc::SIGIO, on_sigio, &[rt, libc::SIGIO])
}

/// The signals a worker unblocks and everyone else keeps blocked.
pub fn worker_signals() -> [libc::c_int; 2] {
    [overflow_signal(), libc::SIGIO]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_packing_round_trips_every_delivery() {
        for delivery in [
            Delivery::Overflow,
            Delivery::WrongThread,
            Delivery::ReadFailed(9),
            Delivery::SigIo,
        ] {
            for (si_code, at_stop) in [(1, Some(0)), (6, None), (-1, Some(u64::MAX - 1)), (0, None)]
            {
                let r = SignalRecord {
                    value: u64::MAX - 3,
                    time_ns: 123_456_789_012,
                    cpu: 7,
                    si_code,
                    delivery,
                    at_stop,
                };
                assert_eq!(SignalRecord::unpack(r.pack()), r);
            }
        }
    }

    #[test]
    fn siginfo_layout_puts_fd_at_24() {
        assert_eq!(std::mem::offset_of!(SigPollInfo, fd), 24);
    }

    /// The handler's kernel as the thread `tid` sees it; the event is never
    /// touched on the wrong thread.
    struct OnThread {
        tid: libc::pid_t,
    }

    impl HandlerKernel for OnThread {
        fn now_ns(&self) -> u64 {
            42
        }
        fn current_cpu(&self) -> u32 {
            3
        }
        fn current_thread(&self) -> libc::pthread_t {
            kernel::current_thread()
        }
        fn gettid(&self) -> libc::pid_t {
            self.tid
        }
        fn read_count(&self, _: BorrowedFd<'_>) -> std::io::Result<Option<u64>> {
            panic!("read on the wrong thread")
        }
        fn disarm(&self, _: BorrowedFd<'_>, _: u64) -> std::io::Result<Option<u64>> {
            panic!("re-armed on the wrong thread")
        }
        fn arm(&self, _: BorrowedFd<'_>) -> std::io::Result<()> {
            panic!("re-armed on the wrong thread")
        }
        fn disable(&self, _: BorrowedFd<'_>) -> std::io::Result<()> {
            panic!("disabled on the wrong thread")
        }
    }

    /// A ring has one producer, its worker's thread: an overflow signal
    /// another worker's thread takes goes into that thread's own ring.
    #[test]
    fn a_wrong_thread_signal_never_writes_into_the_owners_ring() {
        // Numbers no other test registers (fds and workers are global).
        let (owner_fd, other_fd) = (MAX_FD as RawFd - 2, MAX_FD as RawFd - 1);
        let (owner_tid, other_tid) = (1_000_001, 1_000_002);
        // The owner's slot belongs to another thread.
        let owner = std::thread::spawn(move || Arc::new(Slot::new(owner_fd, owner_tid, 7, 16)))
            .join()
            .unwrap();
        let other = Arc::new(Slot::new(other_fd, other_tid, 7, 16));
        let _r1 = register(MAX_WORKERS - 2, Arc::clone(&owner)).unwrap();
        let _r2 = register(MAX_WORKERS - 1, Arc::clone(&other)).unwrap();
        // SAFETY: both registrations live through the call.
        unsafe { record_overflow(&OnThread { tid: other_tid }, owner_fd, POLL_IN) };
        assert_eq!(owner.pop(), None, "the owner's ring was written");
        let r = other.pop().expect("recorded in the taking thread's ring");
        assert_eq!(
            (r.delivery, r.cpu, r.time_ns),
            (Delivery::WrongThread, 3, 42)
        );
        // A thread that is no worker's: counted as stray, no ring written.
        let (stray_before, _) = stray_counts();
        // SAFETY: as above.
        unsafe { record_overflow(&OnThread { tid: 1_000_003 }, owner_fd, POLL_IN) };
        assert_eq!((owner.pop(), other.pop()), (None, None));
        assert!(stray_counts().0 > stray_before);
    }

    /// The handler's kernel on the owner's thread, logging each call.
    struct Logged {
        calls: std::cell::RefCell<Vec<&'static str>>,
    }

    impl HandlerKernel for Logged {
        fn now_ns(&self) -> u64 {
            42
        }
        fn current_cpu(&self) -> u32 {
            3
        }
        fn current_thread(&self) -> libc::pthread_t {
            kernel::current_thread()
        }
        fn gettid(&self) -> libc::pid_t {
            1_000_005
        }
        fn read_count(&self, _: BorrowedFd<'_>) -> std::io::Result<Option<u64>> {
            self.calls.borrow_mut().push("read");
            Ok(Some(100_010))
        }
        fn disarm(&self, _: BorrowedFd<'_>, _: u64) -> std::io::Result<Option<u64>> {
            self.calls.borrow_mut().push("disarm");
            Ok(Some(100_020))
        }
        fn arm(&self, _: BorrowedFd<'_>) -> std::io::Result<()> {
            self.calls.borrow_mut().push("arm");
            Ok(())
        }
        fn disable(&self, _: BorrowedFd<'_>) -> std::io::Result<()> {
            self.calls.borrow_mut().push("disable");
            Ok(())
        }
    }

    /// Reset mode: the handler's DISABLE-RESET-PERIOD, record, ENABLE may
    /// straddle the watchdog's one DISABLE from the controller's thread.
    /// Its ENABLE would then re-arm the event the watchdog stopped (a
    /// stalled worker counting on); the watchdog marks the slot first, so
    /// the handler disables it again after its ENABLE.
    #[test]
    fn a_reset_mode_handler_leaves_a_watchdog_disable_in_force() {
        let fd = MAX_FD as RawFd - 3;
        let slot = Arc::new(Slot::new(fd, 1_000_005, 100_000, 16));
        let _r = register(MAX_WORKERS - 3, Arc::clone(&slot)).unwrap();
        let k = Logged {
            calls: Default::default(),
        };
        // SAFETY: the registration lives through the calls.
        unsafe { record_overflow(&k, fd, POLL_IN) };
        assert_eq!(*k.calls.borrow(), ["read", "disarm", "arm"]);
        let r = slot.pop().expect("recorded");
        assert_eq!((r.value, r.at_stop), (100_010, Some(100_020)));
        // The watchdog marks the slot before its DISABLE.
        slot.hold_disabled();
        k.calls.borrow_mut().clear();
        // SAFETY: as above.
        unsafe { record_overflow(&k, fd, POLL_IN) };
        assert_eq!(*k.calls.borrow(), ["read", "disarm", "arm", "disable"]);
        assert!(slot.pop().is_some(), "the signal is still recorded");
    }
}
