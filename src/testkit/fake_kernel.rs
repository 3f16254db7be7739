/*!
A scripted kernel for tests: the whole run loop (run, worker, migrator, the
handler's recording steps, the judge) runs on it without a PMU, and every
number it produces is the same on every run.

Its clock is its own and moves only while the controller pauses between
two passes (`Kernel::pause`). One pause is one tick:

1. every thread of the run that sleeps here re-checks its stop flag: a
   worker the controller stopped leaves now, disables its event and reads
   its final count, before anything else happens;
2. the script's kernel events due in the tick happen in time order, on the
   controller's thread, with the clock at each one's time: records written
   into the event's ring in the kernel's own layout (`ring_encoder::encode`), and
   overflow signals delivered through the handler's own recording steps
   (`signal::record_overflow`) with this kernel's clock, CPU and counter;
3. the clock reaches the end of the tick and every thread whose sleep is
   over runs one step, alone, in the order the run spawned them: a worker
   one round of its loop (one heartbeat), the migrator one round of moves.

So heartbeats, moves, deliveries and what the watchdog sees do not depend
on the host's scheduler.

Why the signals are not real: a real signal runs the real handler, which
stamps CLOCK_MONOTONIC and read(2)s a real perf fd, and a fake clock and
counter cannot meet it there. Every step of the handler after the siginfo
decode is the same code; the decode, F_SETOWN_EX/F_SETSIG and the signal
masks are what the software-clock tests in tests/ cover.

The counter follows a driver's two re-arm rules (the arm64 driver's
`armpmu_event_set_period`) just far enough for the judge: each overflow event counts `count` events
and has its next overflow due at `next_due`; an interrupt taken at `count`
moves the due point a period on (rule 2), or a period past `count` when it
came a period or more late (rule 1); RESET and the handler's re-arm start
again from 0 with the next due a period in. A script says, per worker and
step, where the counter goes and what the kernel does there (`Step`).

The whole binary runs on it too, for tests/ only: with the test kit
compiled in, `PMUSTRESS_TESTKIT_SCRIPT` names a JSON `Scripted` (the
script, the fixture machine and the CPUs the run believes it has), and
`pmustress run` plays it instead of opening real events.
*/

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::engine::kernel::{self, EventAttr, HandlerKernel, Kernel};
use crate::engine::sample_ring::RingIds;
use crate::engine::signal;
use crate::records::Observation;
use crate::testkit::ring_encoder;

/// The fake clock at the start of a run (any value would do; not 0, so a
/// time never looks unset).
pub const START_NS: u64 = 1_000_000_000;

/// How often a thread sleeping in the fake looks at its stop flag on its
/// own (the real kernel's is `kernel::STOP_POLL`): only when the run ends
/// (no pause comes any more) does it need to.
const FAKE_STOP_POLL: Duration = Duration::from_millis(1);

/// What the kernel does for one worker at one step of its script.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Step {
    /// The counter runs to its next due point and `late` events past it,
    /// where the kernel takes the overflow interrupt: a sample record with
    /// that count; `signal` says what becomes of its signal.
    Overflow { late: u64, signal: Signal },
    /// The thread is switched out `past_due` events after its due point,
    /// with the overflow pending: the stop clears it and the restart arms
    /// the next a period on (the lost-overflow bug). No sample, no signal;
    /// the witness records the stop.
    DropAtSwitch { past_due: u64 },
    /// The thread is switched out `before_due` events before its due
    /// point: nothing is pending; the witness records the stop.
    Switch { before_due: u64 },
    /// The counter runs to `before_due` events before its due point.
    Run { before_due: u64 },
    /// The kernel throttles the event (a THROTTLE record).
    Throttle,
    /// And lets it go again (an UNTHROTTLE record).
    Unthrottle,
    /// The ring had no room for `n` records (a LOST record).
    LostRecords(u64),
    /// The realtime signal queue was full: a plain SIGIO to the worker.
    SigIo,
    /// The worker's thread stops running user code (livelocked in the
    /// kernel): no more heartbeats until it is stopped.
    Stall,
    /// Nothing happens.
    Idle,
}

impl Step {
    /// An interrupt 10 events past its due point, its signal delivered.
    pub const OVERFLOW: Step = Step::Overflow {
        late: 10,
        signal: Signal::Delivered,
    };
}

/// What becomes of an interrupt's signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Signal {
    /// Its handler runs on the owner thread `Script::signal_delay_ns`
    /// after the interrupt and reads the counter `Script::read_skid`
    /// events past it.
    Delivered,
    /// Never delivered on its own (the kernel merged it into the next).
    Merged,
    /// Delivered as `Delivered`, but on a thread other than the owner.
    WrongThread,
}

/// One run's script and the machine it plays on.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct Script {
    /// Time between two steps of a worker: its first step is this long
    /// after the start.
    pub step_ns: u64,
    /// Time from an interrupt to its signal's handler.
    pub signal_delay_ns: u64,
    /// Events the counter runs between an interrupt and its handler's read.
    pub read_skid: u64,
    /// Each worker's steps, by worker index.
    pub workers: Vec<Vec<Step>>,
    /// Whether the context-switch witness opens (else EACCES, as under
    /// perf_event_paranoid > 1).
    pub witness_opens: bool,
    /// An errno for every perf_event_open (no PMU: ENOENT).
    pub open_error: Option<i32>,
    /// Opening an event panics (our bug in a worker's setup).
    pub open_panics: bool,
    /// perf_event_max_sample_rate.
    pub max_sample_rate: Option<u64>,
    /// The watchdog's DISABLE comes while the owner's handler runs: every
    /// signal still on its way is handled right after it (the race a
    /// reset-mode re-arm must not win).
    pub handlers_after_watchdog: bool,
    /// The whole process stopped (SIGSTOP, a cgroup freezer): from each
    /// (time after `START_NS`, how long), no thread runs and no step or
    /// signal comes, and everything due after its start comes that much
    /// later. The controller, asleep in its pause when it came, is the
    /// first to run at its end (its sleep is long over): that pause ends
    /// there.
    pub holds: Vec<(u64, u64)>,
}

impl Default for Script {
    fn default() -> Script {
        Script {
            step_ns: 1_000_000,
            signal_delay_ns: 100_000,
            read_skid: 100,
            workers: Vec::new(),
            witness_opens: true,
            open_error: None,
            open_panics: false,
            max_sample_rate: Some(100_000),
            handlers_after_watchdog: false,
            holds: Vec::new(),
        }
    }
}

/// The variable that names a `Scripted` for the binary to play.
pub const SCRIPT_ENV: &str = "PMUSTRESS_TESTKIT_SCRIPT";

/// A whole `pmustress run` on the fake kernel: what tests/ write for
/// `SCRIPT_ENV` to name.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Scripted {
    /// The root of the machine the run reads its fingerprint from (a
    /// fixture tree), so the event resolves the same on every host.
    pub machine: std::path::PathBuf,
    /// The CPUs the process may run on.
    pub cpus: Vec<usize>,
    pub script: Script,
}

impl Scripted {
    /// The fake kernel that plays it.
    pub fn kernel(self) -> FakeKernel {
        FakeKernel::on_machine(self.script, self.machine, self.cpus)
    }

    /// The script `SCRIPT_ENV` names, if it names one. A file that cannot
    /// be read is the test's bug: a panic that names it.
    pub fn from_env() -> Option<Scripted> {
        let path = std::env::var_os(SCRIPT_ENV)?;
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{SCRIPT_ENV}={}: {e}", path.display()));
        let scripted = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{SCRIPT_ENV}={}: {e}", path.display()));
        Some(scripted)
    }
}

impl Script {
    /// Adds the next worker's steps.
    pub fn worker(mut self, steps: impl IntoIterator<Item = Step>) -> Script {
        self.workers.push(steps.into_iter().collect());
        self
    }
}

/// A call that changes an event's counter, in the order it came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    Reset,
    Enable,
    Disable,
    /// The handler's DISABLE + RESET + PERIOD (reset mode).
    Disarm(u64),
    /// The handler's ENABLE after it (reset mode).
    Arm,
}

/// What the kernel did for one worker, for tests to check against the
/// run's own account.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FakeKernelLog {
    /// Every event opened on the worker's thread (the witness included).
    pub opened: Vec<EventAttr>,
    /// Calls on the overflow event's counter.
    pub calls: Vec<Call>,
    /// Sample records written (interrupts taken).
    pub samples: u64,
    /// Overflow signals delivered, to the owner or not.
    pub signals: u64,
    /// Plain SIGIOs delivered.
    pub sigio: u64,
    /// Stops written into the ring (witness samples or SWITCH records).
    pub stops: u64,
    /// Successful moves of the worker's thread: (time, CPU).
    pub moves: Vec<(u64, usize)>,
    /// Script steps (and signals) that found no enabled event.
    pub skipped: u64,
}

/// The scripted kernel; clones share one machine.
#[derive(Clone)]
pub struct FakeKernel {
    sim: Arc<Sim>,
}

struct Sim {
    state: Mutex<State>,
    wake: Condvar,
    /// The root of the machine the run reads its fingerprint from.
    machine: std::path::PathBuf,
    /// The CPUs the process may run on.
    cpus: Vec<usize>,
}

/// One event the fake opened.
/// Which witness an event opened in another's group is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Switch,
    Resume,
}

struct EventState {
    worker: usize,
    fd: RawFd,
    id: u64,
    attr: EventAttr,
    /// This overflow event's witness.
    witness: Option<usize>,
    /// Its resume witness.
    resume: Option<usize>,
    owner_tid: libc::pid_t,
    owner_thread: libc::pthread_t,
    enabled: bool,
    count: u64,
    next_due: u64,
    period: u64,
    /// Records written and not drained yet.
    ring: Vec<u8>,
}

/// Something due at a time: a script step or a signal on its way.
#[derive(Debug, Clone, Copy)]
enum Due {
    Step(usize, Step),
    Signal {
        worker: usize,
        event: usize,
        wrong_thread: bool,
    },
}

#[derive(Debug, Clone, Copy, Default)]
struct ThreadState {
    /// Sleeping until this time.
    until: Option<u64>,
    stalled: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Poke {
    /// Look at your stop flag.
    Check,
    /// Run one step.
    Run,
}

struct State {
    now: u64,
    script: Script,
    timeline: BTreeMap<(u64, u64), Due>,
    seq: u64,
    events: Vec<EventState>,
    /// Open fds to events.
    fds: HashMap<RawFd, usize>,
    /// Each worker's current overflow event.
    current: HashMap<usize, usize>,
    logs: Vec<FakeKernelLog>,
    cpu_of: HashMap<libc::pid_t, usize>,
    migrations: HashMap<libc::pid_t, u64>,
    /// Worker thread by tid, for stalls and moves.
    worker_of_tid: HashMap<libc::pid_t, usize>,
    thread_of_worker: HashMap<usize, usize>,
    threads: Vec<ThreadState>,
    /// The run's threads that are neither sleeping here nor gone.
    running: usize,
    poke: Option<(usize, Poke)>,
}

thread_local! {
    /// Which of the fake's threads this is (set by `spawn`).
    static THREAD: Cell<Option<usize>> = const { Cell::new(None) };
}

impl FakeKernel {
    /// DISABLE of the event the fd number names (EBADF if none): the fake
    /// keys its events by number, so the borrowed and the numbered forms
    /// are the same here.
    fn disable_fd_number(&self, fd: RawFd) -> io::Result<()> {
        let mut st = self.sim.lock();
        let key = st.event_of(fd)?;
        st.events[key].enabled = false;
        let worker = st.events[key].worker;
        st.log(worker).calls.push(Call::Disable);
        Ok(())
    }

    /// The signals still on their way to `fd`'s owner are handled now,
    /// the event disabled: as a handler that had already started when the
    /// watchdog's DISABLE came from the controller's thread would go on
    /// (`Script::handlers_after_watchdog`).
    fn handle_pending_signals(&self, fd: RawFd) -> io::Result<()> {
        let mut st = self.sim.lock();
        let key = st.event_of(fd)?;
        let pending: Vec<(u64, u64)> = st
            .timeline
            .iter()
            .filter(|(_, d)| matches!(d, Due::Signal { event, .. } if *event == key))
            .map(|(at, _)| *at)
            .collect();
        for at in pending {
            st.timeline.remove(&at);
            st.deliver(key, false);
        }
        Ok(())
    }

    /// `script` on the host's fingerprint (`/`), one CPU per scripted
    /// worker.
    pub fn new(script: Script) -> FakeKernel {
        let cpus = (0..script.workers.len()).collect();
        FakeKernel::on_machine(script, std::path::PathBuf::from("/"), cpus)
    }

    /// `script` on the machine whose fingerprint is at `machine`, with
    /// `cpus` allowed.
    pub fn on_machine(script: Script, machine: std::path::PathBuf, cpus: Vec<usize>) -> FakeKernel {
        let mut timeline = BTreeMap::new();
        let mut seq = 0;
        for (w, steps) in script.workers.iter().enumerate() {
            for (i, step) in steps.iter().enumerate() {
                let at = START_NS + (i as u64 + 1) * script.step_ns;
                timeline.insert((at, seq), Due::Step(w, *step));
                seq += 1;
            }
        }
        let logs = vec![FakeKernelLog::default(); script.workers.len()];
        FakeKernel {
            sim: Arc::new(Sim {
                state: Mutex::new(State {
                    now: START_NS,
                    script,
                    timeline,
                    seq,
                    events: Vec::new(),
                    fds: HashMap::new(),
                    current: HashMap::new(),
                    logs,
                    cpu_of: HashMap::new(),
                    migrations: HashMap::new(),
                    worker_of_tid: HashMap::new(),
                    thread_of_worker: HashMap::new(),
                    threads: Vec::new(),
                    running: 0,
                    poke: None,
                }),
                wake: Condvar::new(),
                machine,
                cpus,
            }),
        }
    }

    /// What the kernel did for `worker`.
    pub fn log(&self, worker: usize) -> FakeKernelLog {
        self.sim
            .lock()
            .logs
            .get(worker)
            .cloned()
            .unwrap_or_default()
    }

    /// Script steps and signals not played yet.
    pub fn unplayed(&self) -> usize {
        self.sim.lock().timeline.len()
    }
}

impl Sim {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'a>(&self, st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.wake.wait(st).unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until none of the run's threads runs.
    fn quiet<'a>(&self, mut st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        while st.running > 0 || st.poke.is_some() {
            st = self.wait(st);
        }
        st
    }

    /// Pokes each sleeping thread `due` picks, one at a time in spawn
    /// order, waiting until all is quiet again after each.
    fn poke_each<'a>(
        &self,
        mut st: MutexGuard<'a, State>,
        poke: Poke,
        due: impl Fn(&ThreadState) -> bool,
    ) -> MutexGuard<'a, State> {
        st = self.quiet(st);
        let ids: Vec<usize> = (0..st.threads.len())
            .filter(|&i| st.threads[i].until.is_some() && due(&st.threads[i]))
            .collect();
        for id in ids {
            if st.threads[id].until.is_none() {
                continue;
            }
            st.poke = Some((id, poke));
            self.wake.notify_all();
            st = self.quiet(st);
        }
        st
    }

    /// The calling thread sleeps until poked to run, or until `stop`.
    fn sleep(&self, until: u64, stop: &AtomicBool) {
        let id = THREAD
            .get()
            .expect("the fake kernel's sleeps are for the threads it spawned");
        let mut st = self.lock();
        st.threads[id].until = Some(until);
        st.running -= 1;
        self.wake.notify_all();
        loop {
            let poke = match st.poke {
                Some((who, poke)) if who == id => {
                    st.poke = None;
                    self.wake.notify_all();
                    Some(poke)
                }
                _ => None,
            };
            if poke == Some(Poke::Run) || stop.load(Ordering::Acquire) {
                break;
            }
            st = self
                .wake
                .wait_timeout(st, FAKE_STOP_POLL)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        st.threads[id].until = None;
        st.running += 1;
    }
}

/// Counts a spawned thread out, however its body ended.
struct Exit {
    sim: Arc<Sim>,
}

impl Drop for Exit {
    fn drop(&mut self) {
        let mut st = self.sim.lock();
        st.running -= 1;
        self.sim.wake.notify_all();
    }
}

/// One event the fake opened: a real fd (of /dev/null), so the handler's
/// fd table and fd numbers work as with a perf fd.
pub struct FakeEvent {
    fd: OwnedFd,
    key: usize,
    sim: Arc<Sim>,
}

impl AsRawFd for FakeEvent {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for FakeEvent {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Drop for FakeEvent {
    fn drop(&mut self) {
        let mut st = self.sim.lock();
        st.fds.remove(&self.fd.as_raw_fd());
        st.events[self.key].enabled = false;
    }
}

/// An overflow event's ring: what the fake wrote, drained as bytes.
pub struct FakeRing {
    key: usize,
    sim: Arc<Sim>,
}

fn errno(e: i32) -> io::Error {
    io::Error::from_raw_os_error(e)
}

impl State {
    /// The log of `worker`, which need not have a script.
    fn log(&mut self, worker: usize) -> &mut FakeKernelLog {
        if self.logs.len() <= worker {
            self.logs.resize_with(worker + 1, FakeKernelLog::default);
        }
        &mut self.logs[worker]
    }

    /// A pause from now to `target`: the first hold (`Script::holds`) that
    /// starts in it postpones everything due after its start by its length
    /// and ends the pause. The pause's end.
    fn hold_the_process(&mut self, target: u64) -> u64 {
        let Some((at, span)) = self
            .script
            .holds
            .iter()
            .map(|&(after, span)| (START_NS + after, span))
            .find(|&(at, _)| self.now <= at && at < target)
        else {
            return target;
        };
        let later: Vec<((u64, u64), Due)> =
            self.timeline.extract_if(.., |(t, _), _| *t > at).collect();
        self.timeline
            .extend(later.into_iter().map(|((t, n), due)| ((t + span, n), due)));
        for t in &mut self.threads {
            if let Some(u) = t.until.as_mut().filter(|u| **u > at) {
                *u += span;
            }
        }
        at + span
    }

    fn event_of(&self, fd: RawFd) -> io::Result<usize> {
        self.fds.get(&fd).copied().ok_or_else(|| errno(libc::EBADF))
    }

    fn ids(&self, key: usize) -> RingIds {
        let e = &self.events[key];
        RingIds {
            event: e.id,
            witness: e.witness.map(|w| self.events[w].id),
            resume: e.resume.map(|w| self.events[w].id),
        }
    }

    fn cpu(&self, key: usize) -> u32 {
        let tid = self.events[key].owner_tid;
        self.cpu_of.get(&tid).map_or(u32::MAX, |&c| c as u32)
    }

    fn write(&mut self, key: usize, record: &Observation) {
        let bytes = ring_encoder::encode(record, &self.ids(key));
        self.events[key].ring.extend_from_slice(&bytes);
    }

    /// The counter moves on to `count`; never backwards.
    fn run_to(&mut self, key: usize, count: u64) {
        let e = &mut self.events[key];
        assert!(
            count >= e.count,
            "the script runs worker {}'s counter backwards, from {} to {count}",
            e.worker,
            e.count
        );
        e.count = count;
    }

    /// The thread is switched out: the witness records it.
    fn stop(&mut self, key: usize, worker: usize) {
        let e = &self.events[key];
        let count = e.count;
        let record = if e.witness.is_some() {
            Some(count)
        } else if e.attr.context_switch {
            None
        } else {
            return;
        };
        let stop = Observation::Stop {
            time_ns: self.now,
            cpu: self.cpu(key),
            count: record,
        };
        self.write(key, &stop);
        self.log(worker).stops += 1;
        if self.events[key].resume.is_some() {
            // The thread runs again (on whichever CPU) at the same count.
            let resume = Observation::Resume {
                time_ns: self.now,
                cpu: self.cpu(key),
                count,
            };
            self.write(key, &resume);
        }
    }

    /// Plays what is due now.
    fn play(&mut self, due: Due) {
        let (worker, key) = match due {
            Due::Step(w, _) => (w, self.current.get(&w).copied()),
            Due::Signal { worker, event, .. } => (worker, Some(event)),
        };
        if let Due::Step(_, Step::Stall) = due {
            if let Some(&t) = self.thread_of_worker.get(&worker) {
                self.threads[t].stalled = true;
            }
            return;
        }
        // Nothing happens to an event that is closed, disabled, or not
        // open yet.
        let Some(key) = key.filter(|&k| self.events[k].enabled) else {
            self.log(worker).skipped += 1;
            return;
        };
        match due {
            Due::Step(_, step) => self.step(worker, key, step),
            Due::Signal { wrong_thread, .. } => self.deliver(key, wrong_thread),
        }
    }

    /// An overflow signal to `key`'s owner: the handler's recording steps.
    fn deliver(&mut self, key: usize, wrong_thread: bool) {
        let worker = self.events[key].worker;
        let count = self.events[key].count + self.script.read_skid;
        self.run_to(key, count);
        self.log(worker).signals += 1;
        let fd = self.events[key].fd;
        let mut ctx = Handler::on_owner(self, key);
        if wrong_thread {
            ctx.thread = kernel::current_thread();
        }
        // SAFETY: the owner drops its registration only after its own
        // DISABLE, which waits for this lock, and the event is still open
        // (`event_of` found it): the registration outlives this call.
        unsafe { signal::record_overflow(&ctx, fd, signal::POLL_IN) };
    }

    fn step(&mut self, worker: usize, key: usize, step: Step) {
        let p = self.events[key].period;
        let now = self.now;
        match step {
            Step::Overflow { late, signal } => {
                let due_at = self.events[key].next_due;
                self.run_to(key, due_at + late);
                let e = &mut self.events[key];
                e.next_due = if late >= p { e.count + p } else { due_at + p };
                let sample = Observation::Sample {
                    time_ns: now,
                    cpu: self.cpu(key),
                    count: due_at + late,
                };
                self.write(key, &sample);
                self.log(worker).samples += 1;
                if signal != Signal::Merged {
                    let at = now + self.script.signal_delay_ns;
                    self.timeline.insert(
                        (at, self.seq),
                        Due::Signal {
                            worker,
                            event: key,
                            wrong_thread: signal == Signal::WrongThread,
                        },
                    );
                    self.seq += 1;
                }
            }
            Step::DropAtSwitch { past_due } => {
                let due_at = self.events[key].next_due;
                self.run_to(key, due_at + past_due);
                self.stop(key, worker);
                let e = &mut self.events[key];
                e.next_due = if past_due >= p {
                    e.count + p
                } else {
                    due_at + p
                };
            }
            Step::Switch { before_due } => {
                let to = self.events[key].next_due.saturating_sub(before_due);
                self.run_to(key, to);
                self.stop(key, worker);
            }
            Step::Run { before_due } => {
                let to = self.events[key].next_due.saturating_sub(before_due);
                self.run_to(key, to);
            }
            Step::Throttle => self.write(
                key,
                &Observation::Throttle {
                    time_ns: now,
                    witness: false,
                },
            ),
            Step::Unthrottle => self.write(
                key,
                &Observation::Unthrottle {
                    time_ns: now,
                    witness: false,
                },
            ),
            Step::LostRecords(n) => self.write(
                key,
                &Observation::Lost {
                    time_ns: now,
                    lost: n,
                },
            ),
            Step::SigIo => {
                self.log(worker).sigio += 1;
                let ctx = Handler::on_owner(self, key);
                // SAFETY: as for an overflow signal (`play`).
                unsafe { signal::record_sigio(&ctx) };
            }
            Step::Stall | Step::Idle => {}
        }
    }
}

/// The handler's view of the kernel during one delivery: this kernel's
/// clock, the owner's CPU and the event's counter.
struct Handler<'a> {
    state: RefCell<&'a mut State>,
    now: u64,
    cpu: u32,
    tid: libc::pid_t,
    thread: libc::pthread_t,
}

impl<'a> Handler<'a> {
    fn on_owner(state: &'a mut State, key: usize) -> Handler<'a> {
        let e = &state.events[key];
        let (tid, thread) = (e.owner_tid, e.owner_thread);
        Handler {
            now: state.now,
            cpu: state.cpu(key),
            tid,
            thread,
            state: RefCell::new(state),
        }
    }
}

impl HandlerKernel for Handler<'_> {
    fn now_ns(&self) -> u64 {
        self.now
    }

    fn current_cpu(&self) -> u32 {
        self.cpu
    }

    fn current_thread(&self) -> libc::pthread_t {
        self.thread
    }

    fn gettid(&self) -> libc::pid_t {
        self.tid
    }

    fn read_count(&self, event: BorrowedFd<'_>) -> io::Result<Option<u64>> {
        let st = self.state.borrow();
        let key = st.event_of(event.as_raw_fd())?;
        Ok(Some(st.events[key].count))
    }

    fn disarm(&self, event: BorrowedFd<'_>, period: u64) -> io::Result<Option<u64>> {
        let mut st = self.state.borrow_mut();
        let key = st.event_of(event.as_raw_fd())?;
        let e = &mut st.events[key];
        let at_stop = e.count;
        e.enabled = false;
        e.count = 0;
        e.next_due = period;
        e.period = period;
        let worker = e.worker;
        st.log(worker).calls.push(Call::Disarm(period));
        Ok(Some(at_stop))
    }

    fn arm(&self, event: BorrowedFd<'_>) -> io::Result<()> {
        let mut st = self.state.borrow_mut();
        let key = st.event_of(event.as_raw_fd())?;
        st.events[key].enabled = true;
        let worker = st.events[key].worker;
        st.log(worker).calls.push(Call::Arm);
        Ok(())
    }

    fn disable(&self, event: BorrowedFd<'_>) -> io::Result<()> {
        let mut st = self.state.borrow_mut();
        let key = st.event_of(event.as_raw_fd())?;
        st.events[key].enabled = false;
        let worker = st.events[key].worker;
        st.log(worker).calls.push(Call::Disable);
        Ok(())
    }
}

/// The worker index of the calling thread, from the name the run gives it.
/// (Nothing here panics on a worker's thread: the run would wait for that
/// worker at its start barrier for ever.)
fn worker_of_this_thread() -> io::Result<usize> {
    std::thread::current()
        .name()
        .and_then(|n| n.strip_prefix("worker-"))
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| errno(libc::EINVAL))
}

impl Kernel for FakeKernel {
    type Event = FakeEvent;
    type Ring = FakeRing;

    fn open(&self, attr: &EventAttr) -> io::Result<FakeEvent> {
        self.open_event(attr, None)
    }

    fn open_switch_witness(&self, leader: &FakeEvent) -> io::Result<FakeEvent> {
        self.open_witness(leader, Role::Switch)
    }

    fn open_resume_witness(&self, leader: &FakeEvent) -> io::Result<FakeEvent> {
        self.open_witness(leader, Role::Resume)
    }

    fn map_ring(&self, event: &FakeEvent, _data_pages: usize) -> io::Result<FakeRing> {
        Ok(FakeRing {
            key: event.key,
            sim: Arc::clone(&self.sim),
        })
    }

    fn drain(&self, ring: &mut FakeRing, out: &mut Vec<u8>) {
        let mut st = ring.sim.lock();
        out.append(&mut st.events[ring.key].ring);
    }

    fn id(&self, event: &FakeEvent) -> io::Result<u64> {
        Ok(self.sim.lock().events[event.key].id)
    }

    fn route_overflows(
        &self,
        event: &FakeEvent,
        tid: libc::pid_t,
        _signo: libc::c_int,
    ) -> io::Result<()> {
        let mut st = self.sim.lock();
        st.events[event.key].owner_tid = tid;
        Ok(())
    }

    fn reset(&self, event: BorrowedFd<'_>) -> io::Result<()> {
        let mut st = self.sim.lock();
        let key = st.event_of(event.as_raw_fd())?;
        let e = &mut st.events[key];
        e.count = 0;
        e.next_due = e.period;
        let worker = e.worker;
        st.log(worker).calls.push(Call::Reset);
        Ok(())
    }

    fn enable(&self, event: BorrowedFd<'_>) -> io::Result<()> {
        let mut st = self.sim.lock();
        let key = st.event_of(event.as_raw_fd())?;
        let e = &mut st.events[key];
        e.enabled = true;
        let worker = e.worker;
        st.log(worker).calls.push(Call::Enable);
        Ok(())
    }

    fn disable(&self, event: BorrowedFd<'_>) -> io::Result<()> {
        self.disable_fd_number(event.as_raw_fd())
    }

    unsafe fn disable_by_number(&self, fd: RawFd) -> io::Result<()> {
        self.disable_fd_number(fd)?;
        if self.sim.lock().script.handlers_after_watchdog {
            self.handle_pending_signals(fd)?;
        }
        Ok(())
    }

    fn read_count(&self, event: BorrowedFd<'_>) -> io::Result<Option<u64>> {
        let st = self.sim.lock();
        let key = st.event_of(event.as_raw_fd())?;
        Ok(Some(st.events[key].count))
    }

    fn move_thread(&self, tid: libc::pid_t, cpu: usize) -> io::Result<()> {
        let mut st = self.sim.lock();
        if let Some(old) = st.cpu_of.insert(tid, cpu)
            && old != cpu
        {
            *st.migrations.entry(tid).or_default() += 1;
        }
        let now = st.now;
        if let Some(&w) = st.worker_of_tid.get(&tid) {
            st.log(w).moves.push((now, cpu));
        }
        Ok(())
    }

    fn thread_migrations(&self, tid: libc::pid_t) -> Option<u64> {
        Some(
            self.sim
                .lock()
                .migrations
                .get(&tid)
                .copied()
                .unwrap_or_default(),
        )
    }

    fn max_sample_rate(&self) -> Option<u64> {
        self.sim.lock().script.max_sample_rate
    }

    fn allowed_cpus(&self) -> io::Result<Vec<usize>> {
        Ok(self.sim.cpus.clone())
    }

    fn machine_root(&self) -> std::path::PathBuf {
        self.sim.machine.clone()
    }

    fn now_ns(&self) -> u64 {
        self.sim.lock().now
    }

    /// The controller's work between two pauses takes no time on this
    /// clock: it is always on the CPU.
    fn thread_cpu_ns(&self) -> u64 {
        0
    }

    fn pause(&self, d: Duration) {
        let sim = &*self.sim;
        let mut st = sim.lock();
        st = sim.poke_each(st, Poke::Check, |_| true);
        let target = st.now + d.as_nanos() as u64;
        let target = st.hold_the_process(target);
        while let Some(entry) = st.timeline.first_entry() {
            if entry.key().0 > target {
                break;
            }
            let ((at, _), due) = entry.remove_entry();
            st.now = at;
            st.play(due);
        }
        st.now = target;
        drop(sim.poke_each(st, Poke::Run, |t| {
            !t.stalled && t.until.is_some_and(|u| u <= target)
        }));
    }

    fn sleep(&self, d: Duration, stop: &AtomicBool) {
        let until = self.sim.lock().now + (d.as_nanos() as u64).max(1);
        self.sim.sleep(until, stop);
    }

    fn spawn<T, F>(&self, name: String, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let id = {
            let mut st = self.sim.lock();
            st.threads.push(ThreadState::default());
            st.running += 1;
            st.threads.len() - 1
        };
        let exit = Exit {
            sim: Arc::clone(&self.sim),
        };
        let worker = name
            .strip_prefix("worker-")
            .and_then(|n| n.parse::<usize>().ok());
        if let Some(w) = worker {
            self.sim.lock().thread_of_worker.insert(w, id);
        }
        std::thread::Builder::new().name(name).spawn(move || {
            THREAD.set(Some(id));
            let _exit = exit;
            f()
        })
    }
}

impl FakeKernel {
    /// A software witness in `leader`'s group, refused (EACCES) as under
    /// perf_event_paranoid > 1 when the script says so.
    fn open_witness(&self, leader: &FakeEvent, role: Role) -> io::Result<FakeEvent> {
        if !self.sim.lock().script.witness_opens {
            return Err(errno(libc::EACCES));
        }
        let software_event = match role {
            Role::Switch => perf_event_open_sys::bindings::PERF_COUNT_SW_CONTEXT_SWITCHES,
            Role::Resume => perf_event_open_sys::bindings::PERF_COUNT_SW_CPU_MIGRATIONS,
        };
        let attr = EventAttr {
            type_: perf_event_open_sys::bindings::PERF_TYPE_SOFTWARE,
            config: software_event as u64,
            sample_period: 1,
            exclude_kernel: false,
            sample_records: true,
            context_switch: false,
        };
        self.open_event(&attr, Some((leader.key, role)))
    }

    fn open_event(&self, attr: &EventAttr, leader: Option<(usize, Role)>) -> io::Result<FakeEvent> {
        let worker = worker_of_this_thread()?;
        let mut st = self.sim.lock();
        if st.script.open_panics {
            drop(st);
            panic!("scripted panic in perf_event_open");
        }
        st.log(worker).opened.push(*attr);
        if let Some(e) = st.script.open_error {
            return Err(errno(e));
        }
        let fd: OwnedFd = File::open("/dev/null")?.into();
        let key = st.events.len();
        let tid = kernel::gettid();
        st.events.push(EventState {
            worker,
            fd: fd.as_raw_fd(),
            id: 1000 + key as u64,
            attr: *attr,
            witness: None,
            resume: None,
            owner_tid: tid,
            owner_thread: kernel::current_thread(),
            enabled: false,
            count: 0,
            next_due: attr.sample_period,
            period: attr.sample_period,
            ring: Vec::new(),
        });
        match leader {
            Some((l, Role::Switch)) => st.events[l].witness = Some(key),
            Some((l, Role::Resume)) => st.events[l].resume = Some(key),
            None => {
                st.current.insert(worker, key);
            }
        }
        st.worker_of_tid.insert(tid, worker);
        st.fds.insert(fd.as_raw_fd(), key);
        Ok(FakeEvent {
            fd,
            key,
            sim: Arc::clone(&self.sim),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;
    use std::sync::mpsc;

    use super::*;
    use crate::engine::sample_ring::RingState;

    const P: u64 = 1_000;

    fn attr() -> EventAttr {
        EventAttr {
            type_: 4,
            config: 0x21,
            sample_period: P,
            exclude_kernel: true,
            sample_records: true,
            context_switch: false,
        }
    }

    #[test]
    fn threads_run_one_step_per_tick_in_spawn_order() {
        let kernel = FakeKernel::new(Script::default());
        let stop = Arc::new(AtomicBool::new(false));
        let order = Arc::new(Mutex::new(Vec::new()));
        let threads: Vec<_> = (0..3)
            .map(|i| {
                let (k, stop, order) = (kernel.clone(), stop.clone(), order.clone());
                // Thread 2 sleeps two ticks at a time.
                let d = Duration::from_millis(if i == 2 { 10 } else { 0 });
                kernel
                    .spawn(format!("t{i}"), move || {
                        let steps = AtomicU64::new(0);
                        loop {
                            k.sleep(d, &stop);
                            if stop.load(Ordering::Relaxed) {
                                return steps.into_inner();
                            }
                            steps.fetch_add(1, Ordering::Relaxed);
                            order.lock().unwrap().push((k.now_ns(), i));
                        }
                    })
                    .unwrap()
            })
            .collect();
        for _ in 0..4 {
            kernel.pause(Duration::from_millis(5));
        }
        stop.store(true, Ordering::Relaxed);
        let steps: Vec<u64> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(steps, [4, 4, 2]);
        let tick = |n: u64| START_NS + n * 5_000_000;
        assert_eq!(
            *order.lock().unwrap(),
            [
                (tick(1), 0),
                (tick(1), 1),
                (tick(2), 0),
                (tick(2), 1),
                (tick(2), 2),
                (tick(3), 0),
                (tick(3), 1),
                (tick(4), 0),
                (tick(4), 1),
                (tick(4), 2),
            ]
        );
        assert_eq!(kernel.now_ns(), tick(4));
    }

    #[test]
    fn the_counter_follows_the_script_and_the_ring_has_the_kernels_layout() {
        // No signals: with no handler slot registered they would count as
        // strays, process-wide.
        let quiet = |late| Step::Overflow {
            late,
            signal: Signal::Merged,
        };
        let kernel = FakeKernel::new(Script::default().worker([
            quiet(10),
            Step::Switch { before_due: 300 },
            Step::DropAtSwitch { past_due: 50 },
            quiet(20),
            Step::Throttle,
            Step::Run { before_due: 100 },
        ]));
        let (tx, rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let (k, done) = (kernel.clone(), stop.clone());
        let worker = kernel
            .spawn("worker-0".into(), move || {
                let tid = kernel::gettid();
                k.move_thread(tid, 3).unwrap();
                let event = k.open(&attr()).unwrap();
                let witness = k.open_switch_witness(&event).unwrap();
                let ring = k.map_ring(&event, 1).unwrap();
                k.route_overflows(&event, tid, 0).unwrap();
                let ids = RingIds {
                    event: k.id(&event).unwrap(),
                    witness: Some(k.id(&witness).unwrap()),
                    resume: None,
                };
                k.reset(event.as_fd()).unwrap();
                k.enable(event.as_fd()).unwrap();
                tx.send((ring, ids, event.as_raw_fd())).unwrap();
                // The event stays open until the test is done with it.
                k.sleep(Duration::from_secs(3600), &done);
                k.disable(event.as_fd()).unwrap();
            })
            .unwrap();
        let (mut ring, ids, fd) = rx.recv().unwrap();
        kernel.pause(Duration::from_millis(6));
        let mut bytes = Vec::new();
        kernel.drain(&mut ring, &mut bytes);
        let mut out = Vec::new();
        let garbled =
            crate::engine::sample_ring::parse(&bytes, &ids, &mut RingState::new(1 << 16), &mut out);
        assert_eq!(garbled, 0);
        let ms = |n: u64| START_NS + n * 1_000_000;
        assert_eq!(
            out,
            [
                Observation::Sample {
                    time_ns: ms(1),
                    cpu: 3,
                    count: P + 10,
                },
                // Before the second due point: nothing pending.
                Observation::Stop {
                    time_ns: ms(2),
                    cpu: 3,
                    count: Some(2 * P - 300),
                },
                // Past it: pending and lost; the next is due at 3 P.
                Observation::Stop {
                    time_ns: ms(3),
                    cpu: 3,
                    count: Some(2 * P + 50),
                },
                Observation::Sample {
                    time_ns: ms(4),
                    cpu: 3,
                    count: 3 * P + 20,
                },
                Observation::Throttle {
                    time_ns: ms(5),
                    witness: false,
                },
            ]
        );
        // SAFETY: the worker thread keeps the event open until `stop`.
        let event = unsafe { BorrowedFd::borrow_raw(fd) };
        assert_eq!(kernel.read_count(event).unwrap(), Some(4 * P - 100));
        stop.store(true, Ordering::Relaxed);
        worker.join().unwrap();
        let log = kernel.log(0);
        assert_eq!((log.samples, log.signals, log.stops), (2, 0, 2));
        assert_eq!(log.calls, [Call::Reset, Call::Enable, Call::Disable]);
        assert_eq!(log.opened.len(), 2);
        assert_eq!(kernel.unplayed(), 0);
    }
}
