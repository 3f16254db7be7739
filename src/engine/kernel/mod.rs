/*!
Every system call pmustress makes on the hot path, and nearly all of its `unsafe`.

perf_event_open, its ioctls, the fcntl dance that routes an overflow to one thread
as a realtime signal, the mmap'd sample ring, sigaction, thread affinity and the
clocks. Each call turns -1 into `io::Error::last_os_error()` in one place (`cvt`),
and each new fd goes straight into an `OwnedFd`, so nothing above this module
handles raw return codes or leaks descriptors.

The run loop (run, worker, migrator) reaches these through the `Kernel`
trait, and the overflow handler's recording steps through `HandlerKernel`:
`Real` is the machine, each of its methods one of the calls below,
unchanged; the test kit's fake (`testkit::fake_kernel`) is a scripted
kernel on which `cargo test` runs the whole loop without a PMU.

Every function here that works on an fd takes it borrowed (`BorrowedFd`),
the signal handler's steps (`read_count_fd`, `disarm_fd`, `enable_fd`)
included: the handler borrows the number its slot holds once, in
`signal::record_overflow`, under that function's contract. Only
`Kernel::disable_by_number`, the watchdog's DISABLE from another thread,
takes a bare number, and is `unsafe`.

The other place with `unsafe` is `signal`, whose handler must read the siginfo
the kernel hands it; the run loop's one `unsafe` is its watchdog's call to
`disable_by_number`.
*/

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The longest `Real::sleep` goes without looking at its stop flag: a stop
/// request or the end of the run ends any wait (a `--migrate-interval` of
/// an hour) this soon.
pub const STOP_POLL: Duration = Duration::from_millis(10);

use perf_event_open_sys as sys;
use sys::bindings::perf_event_attr;

pub mod probe;
pub mod process;

// libc does not define these (fcntl.h / asm-generic/fcntl.h); identical on
// x86_64 and aarch64.
/// fcntl: which signal to send when I/O is possible (here: on overflow).
const F_SETSIG: libc::c_int = 10;
/// fcntl: set the owner to a thread, process or process group.
const F_SETOWN_EX: libc::c_int = 15;
/// `f_owner_ex.type_`: the owner is one thread, not its whole process.
const F_OWNER_TID: libc::c_int = 0;

/// struct f_owner_ex from asm-generic/fcntl.h.
#[repr(C)]
struct FOwnerEx {
    type_: libc::c_int,
    pid: libc::pid_t,
}

/// Turns a -1 return into the thread's errno.
fn cvt(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// What to open: the few perf_event_attr fields pmustress varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventAttr {
    pub type_: u32,
    pub config: u64,
    /// Overflow period in events; 0 opens a plain counter with no overflow.
    pub sample_period: u64,
    pub exclude_kernel: bool,
    /// Ask for IDENTIFIER|TID|TIME|CPU|READ sample records (the kernel's
    /// own witness).
    pub sample_records: bool,
    /// Ask for PERF_RECORD_SWITCH (when no switch witness can be opened).
    pub context_switch: bool,
}

/// Sample layout we request; `sample` parses exactly this.
pub const SAMPLE_TYPE: u64 = (sys::bindings::PERF_SAMPLE_IDENTIFIER
    | sys::bindings::PERF_SAMPLE_TID
    | sys::bindings::PERF_SAMPLE_TIME
    | sys::bindings::PERF_SAMPLE_CPU
    | sys::bindings::PERF_SAMPLE_READ) as u64;

/// Sets what every event of ours shares: sample layout, sample_id on other
/// records, and sample times on the clock the signal handler reads, so
/// records and signals can be merged in time order.
fn set_sample_layout(attr: &mut perf_event_attr) {
    attr.sample_type = SAMPLE_TYPE;
    attr.set_sample_id_all(1);
    attr.set_use_clockid(1);
    attr.clockid = libc::CLOCK_MONOTONIC;
}

/// perf_event_open(2) with no group leader or with `group`.
fn open(attr: &mut perf_event_attr, group: Option<BorrowedFd<'_>>) -> io::Result<OwnedFd> {
    attr.size = std::mem::size_of::<perf_event_attr>() as u32;
    // SAFETY: attr is a fully initialised perf_event_attr whose size field
    // is ours; pid 0 / cpu -1 / CLOEXEC is a plain self-counter, `group` is
    // -1 or an event fd open while borrowed.
    let fd = unsafe {
        sys::perf_event_open(
            attr,
            0,
            -1,
            group.map_or(-1, |g| g.as_raw_fd()),
            sys::bindings::PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    };
    cvt(fd as libc::c_long)?;
    // SAFETY: perf_event_open returned a new descriptor that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// One perf event counting the calling thread on whatever CPU it runs.
#[derive(Debug)]
pub struct PerfEvent {
    fd: OwnedFd,
}

impl PerfEvent {
    /// Opens the event on the calling thread (pid 0, cpu -1), disabled.
    pub fn open_on_self(spec: &EventAttr) -> io::Result<PerfEvent> {
        let mut attr = perf_event_attr {
            type_: spec.type_,
            config: spec.config,
            ..Default::default()
        };
        attr.set_disabled(1);
        attr.set_exclude_kernel(spec.exclude_kernel as u64);
        attr.set_exclude_hv(1);
        if spec.sample_period > 0 {
            attr.__bindgen_anon_1.sample_period = spec.sample_period;
            // Pinned: if the PMU cannot give us a counter we want an error
            // state we can see, not silent multiplexing that fakes deltas.
            attr.set_pinned(1);
            // One wakeup (and so one signal) per overflow.
            attr.__bindgen_anon_2.wakeup_events = 1;
        }
        if spec.sample_records {
            set_sample_layout(&mut attr);
        }
        attr.set_context_switch(spec.context_switch as u64);
        Ok(PerfEvent {
            fd: open(&mut attr, None)?,
        })
    }

    /// Opens the switch witness in `leader`'s group and sends its records
    /// into `leader`'s ring: a software event that samples every switch-out
    /// of the thread, before the scheduler stops the group, with the
    /// group's counts (the leader's first). It must count kernel mode (the
    /// scheduler is), which perf_event_paranoid > 1 forbids without
    /// CAP_PERFMON: then this fails with EACCES.
    pub fn open_switch_witness(leader: &PerfEvent) -> io::Result<PerfEvent> {
        Self::open_group_witness(leader, sys::bindings::PERF_COUNT_SW_CONTEXT_SWITCHES)
    }

    /// Opens the resume witness in `leader`'s group, into `leader`'s ring:
    /// a software event that samples every migration of the thread when it
    /// runs again on its new CPU (the kernel counts CPU migrations at
    /// sched-in, after the group is back), with the group's counts. The
    /// leader counted nothing while stopped, so its count there is at or
    /// above the stop's: with kernel mode counted, the switch witness only
    /// gives a lower bound of where the event stopped, this gives the upper
    /// one. Needs what the switch witness needs.
    pub fn open_resume_witness(leader: &PerfEvent) -> io::Result<PerfEvent> {
        Self::open_group_witness(leader, sys::bindings::PERF_COUNT_SW_CPU_MIGRATIONS)
    }

    fn open_group_witness(leader: &PerfEvent, software_event: u32) -> io::Result<PerfEvent> {
        let mut attr = perf_event_attr {
            type_: sys::bindings::PERF_TYPE_SOFTWARE,
            config: software_event as u64,
            read_format: sys::bindings::PERF_FORMAT_GROUP as u64,
            ..Default::default()
        };
        attr.__bindgen_anon_1.sample_period = 1;
        attr.set_exclude_hv(1);
        set_sample_layout(&mut attr);
        // No wakeups of its own: only the overflow event's signals count.
        attr.__bindgen_anon_2.wakeup_events = 0;
        let witness = PerfEvent {
            fd: open(&mut attr, Some(leader.as_fd()))
                .map_err(|e| io::Error::new(e.kind(), format!("perf_event_open: {e}")))?,
        };
        // SAFETY: SET_OUTPUT takes the target fd as an int.
        cvt(unsafe { sys::ioctls::SET_OUTPUT(witness.raw_fd(), leader.raw_fd()) } as libc::c_long)
            .map_err(|e| io::Error::new(e.kind(), format!("PERF_EVENT_IOC_SET_OUTPUT: {e}")))?;
        Ok(witness)
    }

    /// The kernel's id of this event, as PERF_SAMPLE_IDENTIFIER reports it.
    pub fn id(&self) -> io::Result<u64> {
        let mut id = 0u64;
        // SAFETY: ID writes one u64 through a pointer that lives across the call.
        cvt(unsafe { sys::ioctls::ID(self.raw_fd(), &mut id) } as libc::c_long)?;
        Ok(id)
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Routes each overflow to thread `tid` as signal `signo`, with si_fd set.
    /// Order matters: owner and signal before O_ASYNC, or the first overflow
    /// could go to the process as plain SIGIO.
    pub fn route_overflows_to(&self, tid: libc::pid_t, signo: libc::c_int) -> io::Result<()> {
        let fd = self.raw_fd();
        let owner = FOwnerEx {
            type_: F_OWNER_TID,
            pid: tid,
        };
        // SAFETY: fcntl on an fd we own; F_SETOWN_EX reads one f_owner_ex
        // that lives across the call.
        cvt(unsafe { libc::fcntl(fd, F_SETOWN_EX, &owner as *const FOwnerEx) } as libc::c_long)?;
        // SAFETY: F_SETSIG takes an int.
        cvt(unsafe { libc::fcntl(fd, F_SETSIG, signo) } as libc::c_long)?;
        // SAFETY: F_GETFL/F_SETFL take and return ints.
        let flags = cvt(unsafe { libc::fcntl(fd, libc::F_GETFL) } as libc::c_long)?;
        // SAFETY: as above.
        cvt(
            unsafe { libc::fcntl(fd, libc::F_SETFL, flags as libc::c_int | libc::O_ASYNC) }
                as libc::c_long,
        )?;
        Ok(())
    }

    pub fn reset(&self) -> io::Result<()> {
        reset_fd(self.as_fd())
    }

    pub fn enable(&self) -> io::Result<()> {
        enable_fd(self.as_fd())
    }

    pub fn disable(&self) -> io::Result<()> {
        disable_fd(self.as_fd())
    }

    /// The current count. Ok(None) means the event is in error state (a
    /// pinned event that lost its counter reads as EOF).
    pub fn read_count(&self) -> io::Result<Option<u64>> {
        read_count_fd(self.as_fd())
    }
}

impl AsRawFd for PerfEvent {
    fn as_raw_fd(&self) -> RawFd {
        self.raw_fd()
    }
}

impl AsFd for PerfEvent {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// RESET: the count goes back to 0.
pub fn reset_fd(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: RESET takes no argument pointer, and `fd` is open while borrowed.
    cvt(unsafe { sys::ioctls::RESET(fd.as_raw_fd(), 0) } as libc::c_long).map(drop)
}

/// ENABLE by raw fd; in reset mode the second half of the re-arm (after
/// `disarm_fd`): the restart re-arms the period from here (its
/// `period_left` is 0). Async-signal-safe.
pub fn enable_fd(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: ENABLE takes no argument pointer, and `fd` is open while
    // borrowed.
    cvt(unsafe { sys::ioctls::ENABLE(fd.as_raw_fd(), 0) } as libc::c_long).map(drop)
}

/// DISABLE: the event stops counting and overflowing.
pub fn disable_fd(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: DISABLE takes no argument pointer, and `fd` is open while
    // borrowed.
    cvt(unsafe { sys::ioctls::DISABLE(fd.as_raw_fd(), 0) } as libc::c_long).map(drop)
}

/// read(2) of a counting event with read_format 0: one u64.
/// Async-signal-safe: the signal handler uses it.
pub fn read_count_fd(fd: BorrowedFd<'_>) -> io::Result<Option<u64>> {
    let mut value: u64 = 0;
    // SAFETY: reading at most 8 bytes into a u64 we own, from an fd open
    // while borrowed.
    let n = unsafe { libc::read(fd.as_raw_fd(), (&mut value as *mut u64).cast(), 8) };
    match cvt(n as libc::c_long)? {
        8 => Ok(Some(value)),
        _ => Ok(None),
    }
}

/// rr-style re-arm, first half: stop the event, zero its count and reload
/// the period, leaving it disabled. rr does the same (DISABLE when the
/// tracee stops; RESET, PERIOD, ENABLE when it resumes). While it is
/// disabled the event counts nothing and writes no record, so a time taken
/// now separates every record of the old count from every record of the
/// new one, however long this thread is held up on the way.
///
/// Returns the count at the DISABLE, read before the RESET: the DISABLE is
/// where a pending overflow is lost, and while kernel mode counts, the
/// handler's own read is only a lower bound of it (the kernel's path from
/// the read to the stop counts too; under QEMU, up to a period).
/// Async-signal-safe (three ioctls and a read).
pub fn disarm_fd(event: BorrowedFd<'_>, period: u64) -> io::Result<Option<u64>> {
    let fd = event.as_raw_fd();
    // SAFETY: DISABLE and RESET take no pointer; PERIOD takes a pointer to
    // a u64 that lives across the call; `event` is open while borrowed.
    unsafe { cvt(sys::ioctls::DISABLE(fd, 0) as libc::c_long)? };
    let at_stop = read_count_fd(event)?;
    // SAFETY: as above.
    unsafe {
        cvt(sys::ioctls::RESET(fd, 0) as libc::c_long)?;
        let mut p = period;
        cvt(libc::ioctl(fd, sys::bindings::PERIOD as _, &mut p as *mut u64) as libc::c_long)?;
    }
    Ok(at_stop)
}

/// The kernel's mmap'd record ring of one event: a control page then
/// `data_pages` pages of records.
pub struct SampleRing {
    base: *mut u8,
    len: usize,
    data_offset: usize,
    data_size: usize,
}

// SAFETY: the mapping is plain shared memory; one thread (the controller)
// reads it at a time because `drain` takes &mut self.
unsafe impl Send for SampleRing {}

impl SampleRing {
    /// Bytes of the record area (`data_pages` pages).
    pub fn data_size(&self) -> usize {
        self.data_size
    }

    /// Maps `data_pages` (a power of two) of records for `event`.
    pub fn map(event: &PerfEvent, data_pages: usize) -> io::Result<SampleRing> {
        let page = page_size();
        let len = page * (1 + data_pages);
        // SAFETY: a fresh shared mapping of the event fd, as perf_event_open(2)
        // documents; the kernel validates the length.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                event.raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(SampleRing {
            base: base.cast(),
            len,
            data_offset: page,
            data_size: page * data_pages,
        })
    }

    fn control(&self) -> *mut sys::bindings::perf_event_mmap_page {
        self.base.cast()
    }

    /// Appends every record the kernel has written since the last drain to
    /// `out` (each record contiguous, wrap-around undone) and frees the space.
    pub fn drain(&mut self, out: &mut Vec<u8>) {
        let ctl = self.control();
        // SAFETY: the control page is mapped for our lifetime; data_head is
        // written by the kernel, so read it atomically and order the record
        // reads after it (the kernel's documented protocol: smp_rmb).
        let head = unsafe {
            (*(std::ptr::addr_of!((*ctl).data_head) as *const AtomicU64)).load(Ordering::Acquire)
        };
        // SAFETY: data_tail is only written by us.
        let tail_ptr = unsafe { std::ptr::addr_of_mut!((*ctl).data_tail) as *const AtomicU64 };
        // SAFETY: as above; an AtomicU64 has the layout of the u64 field.
        let tail = unsafe { (*tail_ptr).load(Ordering::Relaxed) };
        let size = self.data_size as u64;
        let avail = head.wrapping_sub(tail).min(size);
        let start = (tail % size) as usize;
        let first = (avail as usize).min(self.data_size - start);
        // SAFETY: both ranges lie inside the data area of the mapping.
        unsafe {
            let data = self.base.add(self.data_offset);
            out.extend_from_slice(std::slice::from_raw_parts(data.add(start), first));
            out.extend_from_slice(std::slice::from_raw_parts(data, avail as usize - first));
        }
        fence(Ordering::Release);
        // SAFETY: publishing the new tail tells the kernel the space is free.
        unsafe { (*tail_ptr).store(tail.wrapping_add(avail), Ordering::Release) };
    }
}

impl Drop for SampleRing {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `map` mapped, once.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory effects.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// The calling thread's kernel id. Async-signal-safe.
pub fn gettid() -> libc::pid_t {
    // SAFETY: gettid cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as libc::pid_t }
}

/// The CPU the calling thread runs on now, u32::MAX if unknown. glibc reads
/// it from the rseq area or the vDSO: no lock, no allocation, and (unlike a
/// getcpu syscall) no kernel time inside the signal handler.
pub fn current_cpu() -> u32 {
    // SAFETY: sched_getcpu has no preconditions.
    let cpu = unsafe { libc::sched_getcpu() };
    u32::try_from(cpu).unwrap_or(u32::MAX)
}

/// pthread_self(): a read of the thread pointer, usable in a handler.
pub fn current_thread() -> libc::pthread_t {
    // SAFETY: pthread_self has no preconditions.
    unsafe { libc::pthread_self() }
}

/// CLOCK_MONOTONIC in ns: the clock of the sample records too
/// (`use_clockid`). Async-signal-safe.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Moves thread `tid` to exactly `cpu`. The kernel migrates a running
/// thread synchronously (stop_one_cpu), which is what the bug needs.
pub fn move_thread(tid: libc::pid_t, cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: cpu is below CPU_SETSIZE, checked above.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: sched_setaffinity reads one cpu_set_t of the size we pass.
    cvt(
        unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) }
            as libc::c_long,
    )
    .map(drop)
}

/// Moves the calling thread from a realtime policy (SCHED_FIFO or
/// SCHED_RR, inherited from `chrt`) to SCHED_OTHER, keeping its nice
/// value; any other policy stays. Each worker and migrator calls it as it
/// starts: a worker spins and never blocks, so under SCHED_FIFO the
/// workers would take every CPU from the controller, which must drain
/// their rings, watch the clock and stop them (a `--duration 1s` run under
/// `chrt -f 1` never ended, deaf to SIGINT). The controller keeps the
/// policy it was started with, so under `chrt` it outranks them and stops
/// the run as promptly as anywhere. Lowering one's own policy needs no
/// privilege; should it fail, the thread runs on as it was.
pub fn leave_realtime_policy() {
    // SAFETY: sched_getscheduler only reads the calling thread's policy.
    let policy = unsafe { libc::sched_getscheduler(0) };
    if policy == libc::SCHED_FIFO || policy == libc::SCHED_RR {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: sched_setscheduler reads one sched_param; pid 0 is the
        // calling thread.
        unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) };
    }
}

/// The CPUs the calling process may run on.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: as in `move_thread`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: sched_getaffinity writes one cpu_set_t of the size we pass.
    cvt(
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) }
            as libc::c_long,
    )?;
    // SAFETY: CPU_ISSET reads the set within CPU_SETSIZE.
    Ok((0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// MemAvailable from /proc/meminfo, in bytes: what the kernel can give
/// without swapping (None: unreadable).
pub fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// A signal handler taking siginfo, as `sigaction` wants it.
pub type SigInfoHandler =
    unsafe extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);

/// Installs `handler` for `signo` with SA_SIGINFO|SA_RESTART, blocking every
/// signal in `also_block` while it runs so our handlers never nest.
pub fn install_handler(
    signo: libc::c_int,
    handler: SigInfoHandler,
    also_block: &[libc::c_int],
) -> io::Result<()> {
    // SAFETY: sigaction is plain data; zeroed means "no flags, empty mask".
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = handler as usize;
    action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
    // SAFETY: sigemptyset/sigaddset initialise the mask inside `action`.
    unsafe {
        libc::sigemptyset(&mut action.sa_mask);
        for &s in also_block {
            libc::sigaddset(&mut action.sa_mask, s);
        }
    }
    // SAFETY: `action` is fully initialised; we do not want the old action.
    cvt(unsafe { libc::sigaction(signo, &action, std::ptr::null_mut()) } as libc::c_long).map(drop)
}

/// Blocks (`block == true`) or unblocks `signals` in the calling thread.
/// Threads inherit the mask, so the controller blocks overflow signals
/// before spawning and each worker unblocks its own.
pub fn set_signal_mask(signals: &[libc::c_int], block: bool) -> io::Result<()> {
    // SAFETY: sigset_t is plain data initialised by sigemptyset.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe {
        libc::sigemptyset(&mut set);
        for &s in signals {
            libc::sigaddset(&mut set, s);
        }
    }
    let how = if block {
        libc::SIG_BLOCK
    } else {
        libc::SIG_UNBLOCK
    };
    // SAFETY: pthread_sigmask reads `set`; returns an errno value, not -1.
    match unsafe { libc::pthread_sigmask(how, &set, std::ptr::null_mut()) } {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// Blocks of this size or more get a mapping of their own, returned to
/// the kernel when freed (glibc's initial M_MMAP_THRESHOLD, kept).
pub const MALLOC_MMAP_THRESHOLD: usize = 128 << 10;

/// Keeps glibc malloc's mmap threshold fixed at `MALLOC_MMAP_THRESHOLD`.
/// By default glibc raises the threshold to the size of each mapped block
/// freed (up to 32 MiB), and from then on blocks of that size (a merge
/// queue after a hold-up, a raw.csv.gz member being compressed) come from
/// the heap instead, which keeps the pages of every size it grew to: in a
/// 300 s run the heap's resident pages grew from 4.7 MB at 10 s to 6.7 MB,
/// while the memory in use grew 0.24 MB. Fixed, a large block's pages go
/// back to the kernel when it is freed (the heap: 2.2 MB at 5 s, 2.5 MB at
/// 260 s). Other C libraries (musl, in the static build) give freed memory
/// back anyway.
///
/// And keeps every thread on glibc's main arena (M_ARENA_MAX 1): by default
/// each thread that allocates gets an arena of its own, reserving 64 MiB of
/// address space (a one-worker run's VmPeak: 280 MB). Under an address-space
/// limit (`ulimit -v`) a new thread's first allocation, glibc's record of its
/// thread-local destructors, then failed where the reservation did not fit,
/// and glibc aborts the process there ("failed to register TLS destructor"):
/// no status of ours, no run.json. With one arena a failed allocation is one
/// of ours, which the run reports. Only the controller allocates while a run
/// goes on, so no thread waits on another's allocations.
pub fn tune_malloc() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets allocator parameters; glibc takes its own
    // lock for them.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MALLOC_MMAP_THRESHOLD as libc::c_int);
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Hands the malloc heap's free pages back to the kernel. A buffer given
/// back after a backlog leaves a free chunk inside the heap, and glibc
/// only returns the heap's top on its own: the pages of every chunk below
/// a live one stay resident, so each hold-up left the run larger for good.
pub fn release_free_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks glibc's own free lists under its lock
    // and madvises whole free pages away; no live allocation is touched.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Whether fd 2 is a terminal (the progress line only goes there).
pub fn stderr_is_tty() -> bool {
    // SAFETY: isatty only inspects the descriptor.
    unsafe { libc::isatty(2) == 1 }
}

/// The errno cell of the calling thread: the signal handler saves and
/// restores it so an interrupted read() elsewhere never sees our errno.
pub fn errno_location() -> *mut libc::c_int {
    // SAFETY: __errno_location returns the calling thread's errno cell.
    unsafe { libc::__errno_location() }
}

/// perf_event_max_sample_rate: the kernel lowers it when interrupts take
/// too long.
pub fn read_max_sample_rate() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// se.nr_migrations of thread `tid` of this process, from
/// /proc/self/task/TID/sched (needs CONFIG_SCHED_DEBUG).
pub fn thread_migrations(tid: libc::pid_t) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/sched")).ok()?;
    parse_nr_migrations(&text)
}

pub fn parse_nr_migrations(text: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "se.nr_migrations").then(|| v.trim().parse().ok())?
    })
}

/// What the run loop (run, worker, migrator) asks of the kernel: the seam
/// that lets `cargo test` run the whole loop on a scripted fake
/// (`testkit::fake_kernel`).
/// `Real` is the machine.
///
/// Left out because a fake would do the same: installing the signal
/// handlers and setting signal masks (process and thread state that only a
/// real overflow exercises), gettid and pthread_self (identities a fake
/// keys its threads by) and the page size.
pub trait Kernel: Clone + Send + Sync + 'static {
    /// An open perf event: the overflow event or its switch witness.
    type Event: AsFd + AsRawFd + Send + 'static;
    /// The mmap'd record ring of an overflow event; it outlives the event.
    type Ring: Send + 'static;

    /// perf_event_open on the calling thread, disabled.
    fn open(&self, attr: &EventAttr) -> io::Result<Self::Event>;
    /// The context-switch witness in `leader`'s group, writing its records
    /// into `leader`'s ring (`PerfEvent::open_switch_witness`).
    fn open_switch_witness(&self, leader: &Self::Event) -> io::Result<Self::Event>;
    /// The migration witness in `leader`'s group, writing its records into
    /// `leader`'s ring (`PerfEvent::open_resume_witness`).
    fn open_resume_witness(&self, leader: &Self::Event) -> io::Result<Self::Event>;
    /// Maps `data_pages` pages of records for `event`.
    fn map_ring(&self, event: &Self::Event, data_pages: usize) -> io::Result<Self::Ring>;
    /// Appends every record written since the last drain to `out`, as the
    /// kernel wrote them (`sample::parse` reads them).
    fn drain(&self, ring: &mut Self::Ring, out: &mut Vec<u8>);
    /// The event's id, as PERF_SAMPLE_IDENTIFIER reports it.
    fn id(&self, event: &Self::Event) -> io::Result<u64>;
    /// Routes each overflow of `event` to thread `tid` as signal `signo`.
    fn route_overflows(
        &self,
        event: &Self::Event,
        tid: libc::pid_t,
        signo: libc::c_int,
    ) -> io::Result<()>;
    fn reset(&self, event: BorrowedFd<'_>) -> io::Result<()>;
    fn enable(&self, event: BorrowedFd<'_>) -> io::Result<()>;
    fn disable(&self, event: BorrowedFd<'_>) -> io::Result<()>;
    /// DISABLE by fd number: the watchdog stops a stuck worker's event from
    /// another thread, which has only the number the worker published.
    ///
    /// # Safety
    ///
    /// `fd` must be an open perf event for the whole call: a number its
    /// owner has closed may name another file by now (another worker's
    /// event, say), which this would then disable.
    unsafe fn disable_by_number(&self, fd: RawFd) -> io::Result<()>;
    /// The count; None when the event is in error state.
    fn read_count(&self, event: BorrowedFd<'_>) -> io::Result<Option<u64>>;

    /// Moves thread `tid` to exactly `cpu`.
    fn move_thread(&self, tid: libc::pid_t, cpu: usize) -> io::Result<()>;
    /// How often thread `tid` was migrated so far, if the kernel says.
    fn thread_migrations(&self, tid: libc::pid_t) -> Option<u64>;
    /// perf_event_max_sample_rate.
    fn max_sample_rate(&self) -> Option<u64>;
    /// The CPUs the calling process may run on.
    fn allowed_cpus(&self) -> io::Result<Vec<usize>>;
    /// The root the machine's fingerprint is read from.
    fn machine_root(&self) -> std::path::PathBuf;

    /// CLOCK_MONOTONIC ns: the clock of the sample records and the handler.
    fn now_ns(&self) -> u64;
    /// The CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID): with
    /// `now_ns`, how long the controller was off the CPU between passes.
    fn thread_cpu_ns(&self) -> u64;
    /// The controller's wait between two passes over the rings.
    fn pause(&self, d: Duration);
    /// A worker's or the migrator's wait: `d`, none when zero, or until
    /// `stop` is set. The real kernel looks at `stop` at least every
    /// `STOP_POLL` and preempts threads anywhere; a fake with a
    /// clock of its own runs the run's threads only between these calls,
    /// one step per tick of its clock (zero included), and lets them go
    /// once `stop` is set.
    fn sleep(&self, d: Duration, stop: &AtomicBool);
    /// Starts one of the run's threads (workers, migrator).
    fn spawn<T, F>(&self, name: String, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static;
}

/// What the overflow handler asks of the kernel once it knows which event
/// overflowed (`signal::record_overflow`). `Real`'s are async-signal-safe.
pub trait HandlerKernel {
    fn now_ns(&self) -> u64;
    fn current_cpu(&self) -> u32;
    fn current_thread(&self) -> libc::pthread_t;
    fn gettid(&self) -> libc::pid_t;
    fn read_count(&self, event: BorrowedFd<'_>) -> io::Result<Option<u64>>;
    /// Reset mode, first half: DISABLE, RESET and PERIOD (`disarm_fd`);
    /// the count at the DISABLE.
    fn disarm(&self, event: BorrowedFd<'_>, period: u64) -> io::Result<Option<u64>>;
    /// Reset mode, second half: ENABLE, so the next overflow comes
    /// `period` events from here.
    fn arm(&self, event: BorrowedFd<'_>) -> io::Result<()>;
    /// DISABLE, after a re-arm the watchdog's DISABLE raced.
    fn disable(&self, event: BorrowedFd<'_>) -> io::Result<()>;
}

/// The machine pmustress runs on.
#[derive(Debug, Clone, Copy, Default)]
pub struct Real;

impl Kernel for Real {
    type Event = PerfEvent;
    type Ring = SampleRing;

    fn open(&self, attr: &EventAttr) -> io::Result<PerfEvent> {
        PerfEvent::open_on_self(attr)
    }

    fn open_switch_witness(&self, leader: &PerfEvent) -> io::Result<PerfEvent> {
        PerfEvent::open_switch_witness(leader)
    }

    fn open_resume_witness(&self, leader: &PerfEvent) -> io::Result<PerfEvent> {
        PerfEvent::open_resume_witness(leader)
    }

    fn map_ring(&self, event: &PerfEvent, data_pages: usize) -> io::Result<SampleRing> {
        SampleRing::map(event, data_pages)
    }

    fn drain(&self, ring: &mut SampleRing, out: &mut Vec<u8>) {
        ring.drain(out)
    }

    fn id(&self, event: &PerfEvent) -> io::Result<u64> {
        event.id()
    }

    fn route_overflows(
        &self,
        event: &PerfEvent,
        tid: libc::pid_t,
        signo: libc::c_int,
    ) -> io::Result<()> {
        event.route_overflows_to(tid, signo)
    }

    fn reset(&self, event: BorrowedFd<'_>) -> io::Result<()> {
        reset_fd(event)
    }

    fn enable(&self, event: BorrowedFd<'_>) -> io::Result<()> {
        enable_fd(event)
    }

    fn disable(&self, event: BorrowedFd<'_>) -> io::Result<()> {
        disable_fd(event)
    }

    unsafe fn disable_by_number(&self, fd: RawFd) -> io::Result<()> {
        // SAFETY: the caller promises `fd` is open for the whole call.
        disable_fd(unsafe { BorrowedFd::borrow_raw(fd) })
    }

    fn read_count(&self, event: BorrowedFd<'_>) -> io::Result<Option<u64>> {
        read_count_fd(event)
    }

    fn move_thread(&self, tid: libc::pid_t, cpu: usize) -> io::Result<()> {
        move_thread(tid, cpu)
    }

    fn thread_migrations(&self, tid: libc::pid_t) -> Option<u64> {
        thread_migrations(tid)
    }

    fn max_sample_rate(&self) -> Option<u64> {
        read_max_sample_rate()
    }

    fn allowed_cpus(&self) -> io::Result<Vec<usize>> {
        allowed_cpus()
    }

    fn machine_root(&self) -> std::path::PathBuf {
        std::path::PathBuf::from("/")
    }

    fn now_ns(&self) -> u64 {
        monotonic_ns()
    }

    fn thread_cpu_ns(&self) -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec; the calling thread's
        // CPU clock always exists.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }

    fn pause(&self, d: Duration) {
        std::thread::sleep(d)
    }

    #[inline(always)]
    fn sleep(&self, d: Duration, stop: &AtomicBool) {
        if d <= STOP_POLL {
            if !d.is_zero() {
                std::thread::sleep(d)
            }
            return;
        }
        // Slices: a long --migrate-interval ends with the run.
        let end = Instant::now() + d;
        while !stop.load(Ordering::Relaxed) {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(STOP_POLL));
        }
    }

    fn spawn<T, F>(&self, name: String, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        std::thread::Builder::new().name(name).spawn(move || {
            leave_realtime_policy();
            f()
        })
    }
}

impl HandlerKernel for Real {
    #[inline(always)]
    fn now_ns(&self) -> u64 {
        monotonic_ns()
    }

    #[inline(always)]
    fn current_cpu(&self) -> u32 {
        current_cpu()
    }

    #[inline(always)]
    fn current_thread(&self) -> libc::pthread_t {
        current_thread()
    }

    #[inline(always)]
    fn gettid(&self) -> libc::pid_t {
        gettid()
    }

    #[inline(always)]
    fn read_count(&self, event: BorrowedFd<'_>) -> io::Result<Option<u64>> {
        read_count_fd(event)
    }

    #[inline(always)]
    fn disarm(&self, event: BorrowedFd<'_>, period: u64) -> io::Result<Option<u64>> {
        disarm_fd(event, period)
    }

    #[inline(always)]
    fn arm(&self, event: BorrowedFd<'_>) -> io::Result<()> {
        enable_fd(event)
    }

    #[inline(always)]
    fn disable(&self, event: BorrowedFd<'_>) -> io::Result<()> {
        disable_fd(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An hour's sleep ends at the stop request (it used to run the hour:
    /// `run --migrate-interval 1h --duration 1s` did not end, and the first
    /// SIGINT was swallowed). The bound only tells an hour from a stop.
    #[test]
    fn a_long_sleep_ends_at_a_stop_request() {
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let stopper = {
            let stop = std::sync::Arc::clone(&stop);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                stop.store(true, Ordering::Relaxed);
            })
        };
        let t = Instant::now();
        Real.sleep(Duration::from_secs(3600), &stop);
        stopper.join().unwrap();
        assert!(t.elapsed() < Duration::from_secs(600), "{:?}", t.elapsed());
    }

    #[test]
    fn nr_migrations_from_sched_text() {
        let text = "spin (1234, #threads: 3)\n---\nse.exec_start    :   123.4\nse.nr_migrations                             :                   29\nnr_switches : 5\n";
        assert_eq!(parse_nr_migrations(text), Some(29));
        assert_eq!(parse_nr_migrations("se.nr_migrations : x"), None);
        assert_eq!(parse_nr_migrations(""), None);
    }

    fn spin_ms(ms: u64) {
        let end = monotonic_ns() + ms * 1_000_000;
        let mut x = 0u64;
        while monotonic_ns() < end {
            x = std::hint::black_box(x.wrapping_add(1));
        }
    }

    /// Reset mode's handler takes its record's time between `disarm_fd`
    /// and `enable_fd`: the event must count nothing there (so it writes no
    /// record either), and count again from 0 after.
    #[test]
    fn disarmed_event_counts_nothing_until_enabled() {
        let attr = EventAttr {
            type_: sys::bindings::PERF_TYPE_SOFTWARE,
            config: sys::bindings::PERF_COUNT_SW_TASK_CLOCK as u64,
            sample_period: 1_000_000_000,
            exclude_kernel: true,
            sample_records: false,
            context_switch: false,
        };
        let event = match PerfEvent::open_on_self(&attr) {
            Ok(e) => e,
            Err(e) => {
                eprintln!("skipped: cannot open task-clock here: {e}");
                return;
            }
        };
        event.reset().unwrap();
        event.enable().unwrap();
        spin_ms(5);
        assert!(event.read_count().unwrap().unwrap() > 0);
        disarm_fd(event.as_fd(), 1_000_000_000).unwrap();
        assert_eq!(event.read_count().unwrap(), Some(0));
        spin_ms(5);
        assert_eq!(
            event.read_count().unwrap(),
            Some(0),
            "a disarmed event counted on"
        );
        enable_fd(event.as_fd()).unwrap();
        spin_ms(5);
        assert!(event.read_count().unwrap().unwrap() > 0);
    }
}
