/*!
A worker: one thread that counts an event on itself and spins.

It opens the event (pid 0, cpu -1, pinned), routes its overflows to itself as a
realtime signal, registers the handler's slot, hands the slot and the kernel's
sample ring to the controller, and then does nothing but a branchy loop with a
heartbeat until told to stop. Everything it observes is recorded by the signal
handler; judging is the controller's job.
*/

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::mpsc;

use crate::cli::SwitchWitness;
use crate::kernel::{self, EventAttr, PerfEvent, SampleRing};
use crate::ring::Ring;
use crate::sample::RingIds;
use crate::signal::{self, Slot};

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

/// Test-only fault hook, not a feature: `PMUSTRESS_TEST_STALL_WORKER=N`
/// makes worker N sleep in the kernel with its event enabled instead of
/// running its loop, as a worker livelocked in signal delivery would, so
/// tests/reliability.rs can prove the watchdog's "ran no user code" path.
pub const TEST_STALL_ENV: &str = "PMUSTRESS_TEST_STALL_WORKER";

/// State shared between a worker, the migrator and the controller.
pub struct WorkerShared {
    pub index: usize,
    pub tid: AtomicI32,
    /// The event fd, so the watchdog can disable a stuck worker's event.
    pub event_fd: AtomicI32,
    /// Loop iterations: proof the thread still runs user code.
    pub heartbeat: AtomicU64,
    pub stop: AtomicBool,
    /// The migrator's successful moves: (CLOCK_MONOTONIC ns, target CPU).
    pub moves: Ring<2>,
    pub moves_requested: AtomicU64,
    pub moves_failed: AtomicU64,
}

impl WorkerShared {
    pub fn new(index: usize) -> WorkerShared {
        WorkerShared {
            index,
            tid: AtomicI32::new(0),
            event_fd: AtomicI32::new(-1),
            heartbeat: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            moves: Ring::with_capacity(MOVE_RING_RECORDS),
            moves_requested: AtomicU64::new(0),
            moves_failed: AtomicU64::new(0),
        }
    }
}

/// What a worker hands the controller once its event is set up.
pub struct Ready {
    pub index: usize,
    pub slot: Arc<Slot>,
    pub ring: SampleRing,
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

pub struct WorkerSpec {
    pub attr: EventAttr,
    /// What the run asked for (`Auto` already resolved by event type).
    pub witness: SwitchWitness,
    pub first_cpu: usize,
    pub rearm_period: u64,
}

/// The thread body. Setup errors go to the controller through `ready`.
pub fn run(
    shared: Arc<WorkerShared>,
    spec: WorkerSpec,
    ready: mpsc::Sender<Result<Ready, String>>,
    go: Arc<std::sync::Barrier>,
) -> Finished {
    let tid = kernel::gettid();
    shared.tid.store(tid, Ordering::Release);
    let stall_for_test =
        std::env::var(TEST_STALL_ENV).is_ok_and(|v| v.trim().parse::<usize>() == Ok(shared.index));
    let setup = || -> Result<Setup, String> {
        kernel::move_thread(tid, spec.first_cpu)
            .map_err(|e| format!("cannot move worker to CPU {}: {e}", spec.first_cpu))?;
        let (event, ring, witness, kind) = open_with_witness(&spec)?;
        event
            .route_overflows_to(tid, signal::overflow_signal())
            .map_err(|e| format!("cannot route overflow signals (fcntl): {e}"))?;
        let id = |e: &PerfEvent| e.id().map_err(|e| format!("cannot read the event id: {e}"));
        let ids = RingIds {
            event: id(&event)?,
            witness: witness.as_ref().map(id).transpose()?,
        };
        let slot = Arc::new(Slot::new(
            event.raw_fd(),
            tid,
            spec.rearm_period,
            SIGNAL_RING_RECORDS,
        ));
        Ok(Setup {
            event,
            _witness: witness,
            kind,
            slot,
            ring,
            ids,
        })
    };
    let Setup {
        event,
        _witness,
        kind,
        slot,
        ring,
        ids,
    } = match setup() {
        Ok(parts) => parts,
        Err(e) => {
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
    shared.event_fd.store(event.raw_fd(), Ordering::Release);
    let ring_data_size = ring.data_size();
    let _ = ready.send(Ok(Ready {
        index: shared.index,
        slot,
        ring,
        ids,
        witness: kind,
        ring_data_size,
    }));
    go.wait();
    if shared.stop.load(Ordering::Acquire) {
        return Finished::default();
    }

    let migrations_before = kernel_migrations(tid);
    let started = kernel::set_signal_mask(&signal::worker_signals(), false)
        .and_then(|()| event.reset())
        .and_then(|()| event.enable());
    match started {
        Ok(()) if stall_for_test => stall(&shared),
        Ok(()) => spin(&shared),
        Err(_) => {}
    }
    // Pending overflow signals are delivered on the way out of this syscall,
    // before the final read.
    let _ = event.disable();
    let final_count = event.read_count().ok().flatten();
    let final_time_ns = kernel::monotonic_ns();
    let _ = kernel::set_signal_mask(&signal::worker_signals(), true);
    drop(registration);
    shared.event_fd.store(-1, Ordering::Release);
    let migrations_after = kernel_migrations(tid);
    Finished {
        final_count,
        final_time_ns,
        kernel_migrations: migrations_before
            .zip(migrations_after)
            .map(|(a, b)| b.saturating_sub(a)),
    }
}

struct Setup {
    event: PerfEvent,
    /// Kept open for the worker's life: it samples into `event`'s ring.
    _witness: Option<PerfEvent>,
    kind: SwitchWitness,
    slot: Arc<Slot>,
    ring: SampleRing,
    ids: RingIds,
}

/// Opens the overflow event, maps its ring, and opens the stop witness the
/// spec asks for (after the mapping: the kernel redirects the witness's
/// records only into a ring that exists). `Auto` tries counts and falls
/// back to times (the kernel refuses a kernel-counting witness under
/// perf_event_paranoid > 1).
fn open_with_witness(
    spec: &WorkerSpec,
) -> Result<(PerfEvent, SampleRing, Option<PerfEvent>, SwitchWitness), String> {
    let open = |context_switch: bool| -> Result<(PerfEvent, SampleRing), String> {
        let attr = EventAttr {
            context_switch,
            ..spec.attr
        };
        let event = PerfEvent::open_on_self(&attr).map_err(|e| open_error(&e, &attr))?;
        let ring = map_ring(&event).map_err(|e| {
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
            match PerfEvent::open_switch_witness(&event) {
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
fn map_ring(event: &PerfEvent) -> std::io::Result<SampleRing> {
    let mut pages = SAMPLE_RING_PAGES;
    loop {
        match SampleRing::map(event, pages) {
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
fn spin(shared: &WorkerShared) {
    let mut acc = 0u64;
    while !shared.stop.load(Ordering::Relaxed) {
        for i in 0..1024u64 {
            if black_box(i) & 3 == 0 {
                acc = acc.wrapping_add(i);
            }
        }
        shared.heartbeat.fetch_add(1, Ordering::Relaxed);
    }
    black_box(acc);
}

/// The test-only stall: no user code, no heartbeat, and (on a software
/// clock, which counts only while the thread runs) no overflow, until the
/// watchdog gives up on this worker.
fn stall(shared: &WorkerShared) {
    // Wakes twice a second: a 10 ms poll ran ~1 ms of task time in 4 s under
    // load, enough for the odd software-clock overflow in a thread that is
    // meant to show none.
    while !shared.stop.load(Ordering::Relaxed) {
        std::thread::park_timeout(std::time::Duration::from_millis(500));
    }
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
        _ => "",
    };
    format!(
        "perf_event_open(type {}, config {:#x}) failed: {e}; {hint}",
        attr.type_, attr.config
    )
}

/// se.nr_migrations from /proc/self/task/TID/sched (needs CONFIG_SCHED_DEBUG).
fn kernel_migrations(tid: libc::pid_t) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/sched")).ok()?;
    parse_nr_migrations(&text)
}

pub fn parse_nr_migrations(text: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "se.nr_migrations").then(|| v.trim().parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nr_migrations_from_sched_text() {
        let text = "spin (1234, #threads: 3)\n---\nse.exec_start    :   123.4\nse.nr_migrations                             :                   29\nnr_switches : 5\n";
        assert_eq!(parse_nr_migrations(text), Some(29));
        assert_eq!(parse_nr_migrations("se.nr_migrations : x"), None);
        assert_eq!(parse_nr_migrations(""), None);
    }
}
