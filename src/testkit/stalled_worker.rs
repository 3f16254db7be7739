/*!
The machine's kernel with one worker stalled: what a worker livelocked in
signal delivery looks like to the run, so tests/reliability.rs can prove
the watchdog's "ran no user code" path on a real software clock.

Every call is `Real`'s, except the wait a worker makes before each round
of its loop (`Kernel::sleep`): the stalled worker's never ends until its
stop flag is set, so it runs no user code and beats no heartbeat with its
event enabled.
*/

use std::cell::Cell;
use std::io;
use std::os::fd::{BorrowedFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::engine::kernel::{EventAttr, Kernel, PerfEvent, Real, SampleRing};

/// The variable that names the worker to stall (its index).
pub const STALL_ENV: &str = "PMUSTRESS_TEST_STALL_WORKER";

thread_local! {
    /// Whether the calling thread is the stalled worker.
    static STALLED: Cell<bool> = const { Cell::new(false) };
}

/// `Real`, with worker `worker` stalled.
#[derive(Debug, Clone, Copy)]
pub struct StalledWorker {
    pub worker: usize,
}

impl StalledWorker {
    /// The worker `STALL_ENV` names, if it names one.
    pub fn from_env() -> Option<StalledWorker> {
        let index = std::env::var(STALL_ENV).ok()?.trim().parse().ok()?;
        Some(StalledWorker { worker: index })
    }
}

/// No user code, no heartbeat, and (on a software clock, which counts only
/// while the thread runs) no overflow, until `stop` is set: the watchdog
/// gave up on this worker, or the run ended.
fn stall(stop: &AtomicBool) {
    // Wakes twice a second: a 10 ms poll ran ~1 ms of task time in 4 s under
    // load, enough for the odd software-clock overflow in a thread that is
    // meant to show none.
    while !stop.load(Ordering::Relaxed) {
        std::thread::park_timeout(Duration::from_millis(500));
    }
}

impl Kernel for StalledWorker {
    type Event = PerfEvent;
    type Ring = SampleRing;

    fn open(&self, attr: &EventAttr) -> io::Result<PerfEvent> {
        Real.open(attr)
    }

    fn open_switch_witness(&self, leader: &PerfEvent) -> io::Result<PerfEvent> {
        Real.open_switch_witness(leader)
    }

    fn open_resume_witness(&self, leader: &PerfEvent) -> io::Result<PerfEvent> {
        Real.open_resume_witness(leader)
    }

    fn map_ring(&self, event: &PerfEvent, data_pages: usize) -> io::Result<SampleRing> {
        Real.map_ring(event, data_pages)
    }

    fn drain(&self, ring: &mut SampleRing, out: &mut Vec<u8>) {
        Real.drain(ring, out)
    }

    fn id(&self, event: &PerfEvent) -> io::Result<u64> {
        Real.id(event)
    }

    fn route_overflows(
        &self,
        event: &PerfEvent,
        tid: libc::pid_t,
        signo: libc::c_int,
    ) -> io::Result<()> {
        Real.route_overflows(event, tid, signo)
    }

    fn reset(&self, event: BorrowedFd<'_>) -> io::Result<()> {
        Real.reset(event)
    }

    fn enable(&self, event: BorrowedFd<'_>) -> io::Result<()> {
        Real.enable(event)
    }

    fn disable(&self, event: BorrowedFd<'_>) -> io::Result<()> {
        Kernel::disable(&Real, event)
    }

    unsafe fn disable_by_number(&self, fd: RawFd) -> io::Result<()> {
        // SAFETY: the caller promises `fd` is open for the whole call.
        unsafe { Real.disable_by_number(fd) }
    }

    fn read_count(&self, event: BorrowedFd<'_>) -> io::Result<Option<u64>> {
        Kernel::read_count(&Real, event)
    }

    fn move_thread(&self, tid: libc::pid_t, cpu: usize) -> io::Result<()> {
        Real.move_thread(tid, cpu)
    }

    fn thread_migrations(&self, tid: libc::pid_t) -> Option<u64> {
        Real.thread_migrations(tid)
    }

    fn max_sample_rate(&self) -> Option<u64> {
        Real.max_sample_rate()
    }

    fn allowed_cpus(&self) -> io::Result<Vec<usize>> {
        Real.allowed_cpus()
    }

    fn machine_root(&self) -> PathBuf {
        Real.machine_root()
    }

    fn now_ns(&self) -> u64 {
        Kernel::now_ns(&Real)
    }

    fn thread_cpu_ns(&self) -> u64 {
        Real.thread_cpu_ns()
    }

    fn pause(&self, d: Duration) {
        Real.pause(d)
    }

    fn sleep(&self, d: Duration, stop: &AtomicBool) {
        if STALLED.get() {
            stall(stop);
        } else {
            Real.sleep(d, stop)
        }
    }

    /// The run names its workers' threads `worker-N`.
    fn spawn<T, F>(&self, name: String, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let stalled = name == format!("worker-{}", self.worker);
        Real.spawn(name, move || {
            STALLED.set(stalled);
            f()
        })
    }
}
