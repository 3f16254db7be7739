/*!
A worker: one thread that counts an event on itself and spins.

It opens the event (pid 0, cpu -1, pinned), routes its overflows to itself as a
realtime signal, registers the handler's slot, hands the slot and the kernel's
sample ring to the controller, and then does nothing but a branchy loop with a
heartbeat until told to stop. Everything it observes is recorded by the signal
handler; judging is the controller's job.
*/

use std::hint::black_box;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::domain::SwitchWitness;
use crate::engine::kernel::{self, EventAttr, Kernel};
use crate::engine::ring::Ring;
use crate::engine::sample_ring::RingIds;
use crate::engine::signal::{self, Slot};

/// Data pages of each event's sample ring: 512 KiB with 4 KiB pages, about
/// 6,500 samples of 80 bytes. The controller drains every few ms, but in a
/// VM it may not run for tens of ms while the workers' vCPUs do; with 16
/// pages the ring overflowed there (651 records lost in 1.5 s under QEMU,
/// 4 vCPUs). 128 pages + the control page is exactly the default
/// perf_event_mlock_kb (516) per CPU, so one worker per CPU fits unprivileged.
pub const SAMPLE_RING_PAGES: usize = 128;
/// The fewest pages tried when the kernel refuses the larger ring (more
/// workers than CPUs under perf_event_mlock_kb): halved down to this.
pub const SAMPLE_RING_MIN_PAGES: usize = 16;
/// Handler records buffered per worker between controller drains.
pub const SIGNAL_RING_RECORDS: usize = 16_384;
/// The migrator's moves of one worker buffered between controller drains.
pub const MOVE_RING_RECORDS: usize = 65_536;

/// What the controller, the migrator and the watchdog share with one
/// running worker: its thread, its event fd, its heartbeat and stop flag,
/// and the moves made of it.
pub struct WorkerControl {
    pub index: usize,
    pub tid: AtomicI32,
    /// The event fd (-1: none), so the watchdog can disable a stuck
    /// worker's event: published while the event is open and withdrawn,
    /// under this lock, before it closes, so a watchdog holding the lock
    /// holds the event open.
    pub event_fd: Mutex<RawFd>,
    /// Loop iterations: proof the thread still runs user code.
    pub heartbeat: AtomicU64,
    pub stop: AtomicBool,
    /// The migrator's successful moves: (CLOCK_MONOTONIC ns when asked,
    /// ns when done, target CPU).
    pub moves: Ring<3>,
    pub moves_requested: AtomicU64,
    pub moves_failed: AtomicU64,
}

impl WorkerControl {
    pub fn new(index: usize) -> WorkerControl {
        WorkerControl {
            index,
            tid: AtomicI32::new(0),
            event_fd: Mutex::new(-1),
            heartbeat: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            moves: Ring::with_capacity(MOVE_RING_RECORDS),
            moves_requested: AtomicU64::new(0),
            moves_failed: AtomicU64::new(0),
        }
    }
}

/// What a worker hands the controller once its event is set up.
pub struct Ready<K: Kernel> {
    pub index: usize,
    pub slot: Arc<Slot>,
    pub ring: K::Ring,
    /// Which events write into the ring.
    pub ids: RingIds,
    /// How stops are witnessed: counts, times or none.
    pub witness: SwitchWitness,
    /// Bytes of the ring's data area.
    pub ring_data_size: usize,
}

/// How a worker ended.
#[derive(Debug, Default)]
pub struct Finished {
    /// The counter after DISABLE (None if it could not be read).
    pub final_count: Option<u64>,
    /// When it was read (CLOCK_MONOTONIC ns).
    pub final_time_ns: u64,
    /// se.nr_migrations of the thread at start and end (CONFIG_SCHED_DEBUG).
    pub kernel_migrations: Option<u64>,
}

/// What one worker opens and where it starts: its part of the run's
/// configuration.
pub struct WorkerConfig {
    pub attr: EventAttr,
    /// What the run asked for (`Auto` already resolved by event type).
    pub witness: SwitchWitness,
    pub first_cpu: usize,
    pub rearm_period: u64,
    /// `--interrupts`: overflow signals after which the handler disables
    /// the event and the worker stops (0: no limit).
    pub signal_budget: u64,
}

/// The thread body. Setup errors go to the controller through `ready`.
pub fn run<K: Kernel>(
    kernel: K,
    shared: Arc<WorkerControl>,
    spec: WorkerConfig,
    ready: mpsc::Sender<Result<Ready<K>, String>>,
    go: Arc<std::sync::Barrier>,
) -> Finished {
    let tid = kernel::gettid();
    shared.tid.store(tid, Ordering::Release);
    let setup = || -> Result<Setup<K>, String> {
        kernel
            .move_thread(tid, spec.first_cpu)
            .map_err(|e| format!("cannot move worker to CPU {}: {e}", spec.first_cpu))?;
        let (event, ring, witness, kind) = open_with_witness(&kernel, &spec)?;
        // Where the switch witness counts, the resume witness bounds each
        // migration's stop from above. Without it the judge only has the
        // lower bound (more ambiguity counting kernel mode), so a refusal
        // is no error.
        let resume = witness
            .as_ref()
            .and_then(|_| kernel.open_resume_witness(&event).ok());
        kernel
            .route_overflows(&event, tid, signal::overflow_signal())
            .map_err(|e| format!("cannot route overflow signals (fcntl): {e}"))?;
        let id = |e: &K::Event| {
            kernel
                .id(e)
                .map_err(|e| format!("cannot read the event id: {e}"))
        };
        let ids = RingIds {
            event: id(&event)?,
            witness: witness.as_ref().map(id).transpose()?,
            resume: resume.as_ref().map(id).transpose()?,
        };
        let slot = Arc::new(
            Slot::new(
                event.as_raw_fd(),
                tid,
                spec.rearm_period,
                SIGNAL_RING_RECORDS,
            )
            .with_budget(spec.signal_budget),
        );
        Ok(Setup {
            event,
            _witness: witness,
            _resume: resume,
            kind,
            slot,
            ring,
            ids,
        })
    };
    let Setup {
        event,
        _witness,
        _resume,
        kind,
        slot,
        ring,
        ids,
    } = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(setup)) {
        Ok(Ok(parts)) => parts,
        // A panic here would leave the controller waiting for a report
        // that never comes and the others at the barrier: report it.
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_string());
            let _ = ready.send(Err(format!(
                "worker {} failed while opening its event: {what} (our bug: please report it)",
                shared.index
            )));
            go.wait();
            return Finished::default();
        }
        Ok(Err(e)) => {
            let _ = ready.send(Err(e));
            go.wait();
            return Finished::default();
        }
    };
    let registration = match signal::register(shared.index, Arc::clone(&slot)) {
        Ok(r) => r,
        Err(e) => {
            let _ = ready.send(Err(e));
            go.wait();
            return Finished::default();
        }
    };
    // Declared after `event`, so dropped (withdrawn) before it closes, on
    // every way out of here.
    let _published = PublishedFd::new(&shared.event_fd, event.as_raw_fd());
    let (ring, ring_data_size) = ring;
    let _ = ready.send(Ok(Ready {
        index: shared.index,
        slot: Arc::clone(&slot),
        ring,
        ids,
        witness: kind,
        ring_data_size,
    }));
    go.wait();
    if shared.stop.load(Ordering::Acquire) {
        return Finished::default();
    }

    let migrations_before = kernel.thread_migrations(tid);
    let fd = event.as_fd();
    let started = kernel::set_signal_mask(&signal::worker_signals(), false)
        .and_then(|()| kernel.reset(fd))
        .and_then(|()| kernel.enable(fd));
    if started.is_ok() {
        spin(&kernel, &shared, &slot);
    }
    // Pending overflow signals are delivered on the way out of this syscall,
    // before the final read.
    let _ = kernel.disable(fd);
    let final_count = kernel.read_count(fd).ok().flatten();
    let final_time_ns = kernel.now_ns();
    let _ = kernel::set_signal_mask(&signal::worker_signals(), true);
    drop(registration);
    let migrations_after = kernel.thread_migrations(tid);
    Finished {
        final_count,
        final_time_ns,
        kernel_migrations: migrations_before
            .zip(migrations_after)
            .map(|(a, b)| b.saturating_sub(a)),
    }
}

/// A worker's event fd, published for the watchdog until dropped.
struct PublishedFd<'a>(&'a Mutex<RawFd>);

impl<'a> PublishedFd<'a> {
    fn new(slot: &'a Mutex<RawFd>, fd: RawFd) -> PublishedFd<'a> {
        *slot.lock().unwrap_or_else(|e| e.into_inner()) = fd;
        PublishedFd(slot)
    }
}

impl Drop for PublishedFd<'_> {
    fn drop(&mut self) {
        // Waits for a watchdog's DISABLE in progress: only then may the
        // event close.
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = -1;
    }
}

struct Setup<K: Kernel> {
    event: K::Event,
    /// Kept open for the worker's life: they sample into `event`'s ring.
    _witness: Option<K::Event>,
    _resume: Option<K::Event>,
    kind: SwitchWitness,
    slot: Arc<Slot>,
    ring: MappedRing<K>,
    ids: RingIds,
}

/// The overflow event, its ring, its witness and how stops are witnessed.
/// A mapped ring and the bytes of its record area.
type MappedRing<K> = (<K as Kernel>::Ring, usize);

type Opened<K> = (
    <K as Kernel>::Event,
    MappedRing<K>,
    Option<<K as Kernel>::Event>,
    SwitchWitness,
);

/// Opens the overflow event, maps its ring, and opens the stop witness the
/// spec asks for (after the mapping: the kernel redirects the witness's
/// records only into a ring that exists). `Auto` tries counts and falls
/// back to times (the kernel refuses a kernel-counting witness under
/// perf_event_paranoid > 1).
fn open_with_witness<K: Kernel>(kernel: &K, spec: &WorkerConfig) -> Result<Opened<K>, String> {
    let open = |context_switch: bool| -> Result<(K::Event, MappedRing<K>), String> {
        let attr = EventAttr {
            context_switch,
            ..spec.attr
        };
        let event = kernel.open(&attr).map_err(|e| open_error(&e, &attr))?;
        let ring = map_ring(kernel, &event).map_err(|e| {
            format!(
                "cannot mmap the sample ring ({e}); perf_event_mlock_kb or RLIMIT_MEMLOCK may be too low for this many workers"
            )
        })?;
        Ok((event, ring))
    };
    match spec.witness {
        SwitchWitness::None => {
            let (event, ring) = open(false)?;
            Ok((event, ring, None, SwitchWitness::None))
        }
        SwitchWitness::Times => {
            let (event, ring) = open(true)?;
            Ok((event, ring, None, SwitchWitness::Times))
        }
        SwitchWitness::Counts | SwitchWitness::Auto => {
            let (event, ring) = open(false)?;
            match kernel.open_switch_witness(&event) {
                Ok(w) => Ok((event, ring, Some(w), SwitchWitness::Counts)),
                Err(e) if spec.witness == SwitchWitness::Counts => Err(format!(
                    "cannot open the context-switch witness (--switch-witness counts): {e}; it counts kernel mode, which needs perf_event_paranoid <= 1 or CAP_PERFMON; use --switch-witness times"
                )),
                Err(_) => {
                    drop((ring, event));
                    let (event, ring) = open(true)?;
                    Ok((event, ring, None, SwitchWitness::Times))
                }
            }
        }
    }
}

/// The largest ring the kernel allows (EPERM: over perf_event_mlock_kb
/// and RLIMIT_MEMLOCK; ENOMEM), from SAMPLE_RING_PAGES down to
/// SAMPLE_RING_MIN_PAGES; the size used is in the run's records.
fn map_ring<K: Kernel>(kernel: &K, event: &K::Event) -> std::io::Result<MappedRing<K>> {
    let mut pages = SAMPLE_RING_PAGES;
    loop {
        match kernel
            .map_ring(event, pages)
            .map(|r| (r, pages * kernel::page_size()))
        {
            Err(e)
                if pages > SAMPLE_RING_MIN_PAGES
                    && matches!(e.raw_os_error(), Some(libc::EPERM | libc::ENOMEM)) =>
            {
                pages /= 2
            }
            r => return r,
        }
    }
}

/// The workload: conditional branches, nothing else, until told to stop.
fn spin<K: Kernel>(kernel: &K, shared: &WorkerControl, slot: &Slot) {
    let mut acc = 0u64;
    loop {
        // Nothing on the real kernel, which preempts the loop anywhere; a
        // fake kernel runs one round per tick of its clock.
        kernel.sleep(Duration::ZERO, &shared.stop);
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        // Its --interrupts are in: the handler has disabled the event.
        if slot.spent() {
            shared.stop.store(true, Ordering::Release);
            break;
        }
        for i in 0..1024u64 {
            if black_box(i) & 3 == 0 {
                acc = acc.wrapping_add(i);
            }
        }
        shared.heartbeat.fetch_add(1, Ordering::Relaxed);
    }
    black_box(acc);
}

fn open_error(e: &std::io::Error, attr: &EventAttr) -> String {
    let hint = match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) => {
            "the PMU does not support this event (no hardware PMU in a VM? try --event task-clock)"
        }
        Some(libc::EACCES) | Some(libc::EPERM) if !attr.exclude_kernel => {
            "counting kernel mode needs perf_event_paranoid <= 1 (sysctl kernel.perf_event_paranoid=1) or CAP_PERFMON; drop --include-kernel"
        }
        Some(libc::EACCES) | Some(libc::EPERM) => {
            "perf_event_paranoid forbids it (needs <= 2 for user-only counting) or a seccomp/LSM policy blocks perf_event_open"
        }
        Some(libc::EINVAL) => "the kernel rejected the event attributes",
        Some(libc::EMFILE) | Some(libc::ENFILE) => {
            "out of file descriptors: raise the limit (ulimit -n) or give fewer --workers"
        }
        _ => "",
    };
    let mut line = format!(
        "perf_event_open(type {}, config {:#x}) failed: {e}",
        attr.type_, attr.config
    );
    if !hint.is_empty() {
        line.push_str("; ");
        line.push_str(hint);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fd is withdrawn on every way out of the worker (it used to stay
    /// published when a run stopped before it started, naming a closed
    /// file), and a watchdog holding the lock sees it published.
    #[test]
    fn a_published_fd_is_withdrawn_when_the_guard_goes() {
        let shared = WorkerControl::new(0);
        {
            let _published = PublishedFd::new(&shared.event_fd, 7);
            assert_eq!(*shared.event_fd.lock().unwrap(), 7);
            // An early return drops it like the normal end does.
        }
        assert_eq!(*shared.event_fd.lock().unwrap(), -1);

        // A watchdog holding the lock keeps the withdrawal (and with it
        // the close) waiting until it lets go.
        let published = Arc::new(Mutex::new(-1));
        let guard = PublishedFd::new(&published, 9);
        let held = published.lock().unwrap();
        std::thread::scope(|s| {
            let dropper = s.spawn(move || drop(guard));
            assert_eq!(*held, 9);
            drop(held);
            dropper.join().unwrap();
        });
        assert_eq!(*published.lock().unwrap(), -1);
    }
}
