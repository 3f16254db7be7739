/*!
One measurement: spawn workers and the migrator, drain what they record,
merge it into each worker's observation stream, judge it, and stop on
budget, signal or watchdog.

The controller (the calling thread) is the only consumer of every ring:
handler records, kernel sample rings and migration times. Each pass drains
all three and merges them by time into one stream per worker
(`records`), holding back what is newer than the previous pass: a
handler still running when its ring was drained then still lands in order.
The stream goes to the observer (the raw record) and to the worker's judge.
Nothing here interprets results; that is `judge` and `results::schema`.
*/

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use hdrhistogram::Histogram;

use std::collections::VecDeque;

use crate::config::RunConfig;
use crate::domain::{Held, RearmMode, StopReason, SwitchWitness};
use crate::engine::kernel::{self, EventAttr, Kernel};
use crate::engine::migrator::{self, Plan};
use crate::engine::ring::Ring;
use crate::engine::sample_ring::{self, RingIds, RingState};
use crate::engine::signal::{self, SignalRecord, Slot};
use crate::engine::worker::{
    self, Finished, MOVE_RING_RECORDS, Ready, SIGNAL_RING_RECORDS, WorkerConfig, WorkerControl,
};
use crate::judge::{Anomaly, ClosedWindow, JudgeConfig, StreamJudge, StreamJudgement};
use crate::records::Observation;

/// How often the controller drains rings.
const DRAIN_EVERY: Duration = Duration::from_millis(5);
/// How far behind the previous pass the controller judges: a record can
/// reach its queue a while after its time was taken (the migrator or a
/// handler preempted between its clock read and its push, a kernel record
/// whose writer's vCPU stopped before it published the ring's head; QEMU
/// held vCPUs for up to 28 ms), and one judged before an older one would
/// be out of time order.
const JUDGE_LAG_NS: u64 = 250_000_000;
/// How often progress is reported.
const PROGRESS_EVERY_NS: u64 = 250_000_000;
/// How long one pass may judge, shared by its workers. Judging is the
/// controller's costly part (without a switch witness every interval may
/// hide a stop, and several explanations are followed: 5.5 us a record on
/// the 2-CPU x86 VM, several times that in an emulated arm64 guest); a
/// pass that judged its whole backlog before draining the next worker and
/// checking the budget fell further behind each time: a 1.5 s run lasted
/// 9.4 s, and its sample ring lost 19,178 records. Judging what is left
/// waits for the next pass (and the end judges everything), so the rings
/// are drained and the duration kept however slow the judging is.
const JUDGE_PER_PASS_NS: u64 = 20_000_000;
/// Observations judged between two reads of the clock.
const JUDGE_CLOCK_EVERY: u32 = 64;
/// Observations a merge queue keeps room for after a backlog is judged.
/// A queue holds `JUDGE_LAG_NS` of its worker's records (a few thousand
/// moves at the migrator's usual rate), but after the controller was held
/// up it holds the whole hold-up, and a VecDeque never gives back what it
/// grew to: each longer hold-up raised the high-water mark for good (the
/// only growth of live memory in a 150 s run, +240 KiB in steps). See
/// `shrink_after_peak`.
const QUEUE_FLOOR: usize = 4096;

/// Live output while a run goes on.
pub trait Observer {
    /// Once every worker has opened its events: how each one's stops are
    /// witnessed (`auto` falls back when the kernel refuses counts).
    fn started(&mut self, _witnesses: &[SwitchWitness]) {}
    /// Every observation, in the order the judge sees it.
    fn observation(&mut self, _worker: usize, _observation: &Observation) {}
    /// Every signal's window, in order per worker.
    fn window(&mut self, _window: &ClosedWindow) {}
    fn anomaly(&mut self, anomaly: &Anomaly);
    fn progress(&mut self, progress: &Progress);
    /// Called on every controller pass: a chance to flush.
    fn tick(&mut self, _now_ns: u64) {}
    /// Set once the observer can no longer record (e.g. the disk is full):
    /// the run then stops, keeping what was measured.
    fn failure(&self) -> Option<String> {
        None
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub struct Progress {
    pub elapsed_ns: u64,
    pub signals: u64,
    pub anomalies: u64,
    pub dropped: u64,
    pub moves: u64,
    /// Overflows the judged windows account for, all workers.
    pub overflows: u64,
    /// Stops of the counting events the kernel witnessed, all workers.
    pub stops: u64,
    /// Spans the controller was held off the CPU (`Held`).
    pub held: Held,
}

/// One worker's raw outcome, in memory: the judge's account of its stream
/// and the histograms (run.json's `WorkerEntry` is written from it).
pub struct WorkerOutcome {
    pub verdict: StreamJudgement,
    /// Deltas between consecutive signals' reads.
    pub histogram: Histogram<u64>,
    /// Interrupt lateness past the due point (events).
    pub latency: Histogram<u64>,
    pub final_count: Option<u64>,
    /// How this worker's stops were witnessed.
    pub switch_witness: SwitchWitness,
    /// Bytes of its sample ring's record area (the kernel may have allowed
    /// less than we asked for).
    pub ring_bytes: usize,
    /// Observations that reached the controller after newer ones had been
    /// judged (a handler held up longer than a controller pass).
    pub reordered: u64,
    pub moves_requested: u64,
    pub moves_failed: u64,
    /// se.nr_migrations difference, when the kernel exposes it.
    pub kernel_migrations: Option<u64>,
    /// Handler records lost because the controller fell behind (our bug).
    pub signal_ring_overflows: u64,
    /// Bytes of the sample ring we could not parse (our bug or a kernel change).
    pub garbled_kernel_bytes: usize,
    /// Set when the watchdog stopped this worker.
    pub stalled: Option<String>,
}

/// Everything one run measured.
pub struct RunRecord {
    pub workers: Vec<WorkerOutcome>,
    pub elapsed_ns: u64,
    pub stop_reason: StopReason,
    /// Overflow signals nobody could be charged with, and SIGIOs likewise.
    pub stray_signals: (u64, u64),
    /// Overflow signals and SIGIOs a process sent, ignored.
    pub foreign_signals: u64,
    /// Spans the controller was held off the CPU (`Held`).
    pub held: Held,
    /// perf_event_max_sample_rate at start and end: the kernel lowers it
    /// when interrupts take too long.
    pub max_sample_rate: (Option<u64>, Option<u64>),
}

/// One worker as the run loop drives it, once its event is open: its signal
/// slot and sample ring, what was drained and not yet judged, and its judge.
struct RunningWorker<K: Kernel> {
    slot: Arc<Slot>,
    ring: K::Ring,
    /// Bytes of the ring's record area.
    ring_bytes: usize,
    ids: RingIds,
    ring_state: RingState,
    switch_witness: SwitchWitness,
    judge: StreamJudge,
    mode: RearmMode,
    bytes: Vec<u8>,
    parsed: Vec<Observation>,
    /// Drained, not yet judged: kernel records in ring order, signals (and
    /// resets) in handler order, moves in migrator order.
    kernel: VecDeque<Observation>,
    signals: VecDeque<Observation>,
    moves: VecDeque<Observation>,
    /// The time of the last observation judged.
    judged_until: u64,
    reordered: u64,
    garbled: usize,
    last_heartbeat: u64,
    heartbeat_seen_ns: u64,
    last_signal_ns: u64,
    stalled: Option<String>,
    windows: Vec<ClosedWindow>,
    anomalies: Vec<Anomaly>,
}

impl<K: Kernel> RunningWorker<K> {
    fn new(ready: Ready<K>, judge_cfg: JudgeConfig, mode: RearmMode) -> RunningWorker<K> {
        RunningWorker {
            slot: ready.slot,
            ring: ready.ring,
            ids: ready.ids,
            ring_state: RingState::new(ready.ring_data_size),
            ring_bytes: ready.ring_data_size,
            switch_witness: ready.witness,
            judge: StreamJudge::new(ready.index, judge_cfg),
            mode,
            bytes: resident_vec(RING_BYTES_FLOOR, 0),
            parsed: resident_vec(PARSED_FLOOR, FILLER),
            kernel: resident_queue(QUEUE_FLOOR),
            signals: resident_queue(QUEUE_FLOOR),
            moves: resident_queue(QUEUE_FLOOR),
            judged_until: 0,
            reordered: 0,
            garbled: 0,
            last_heartbeat: 0,
            heartbeat_seen_ns: 0,
            last_signal_ns: 0,
            stalled: None,
            windows: Vec::new(),
            anomalies: Vec::new(),
        }
    }

    /// Judges, in time order, every drained observation up to `horizon`,
    /// until `budget` says the pass has judged long enough: whether it did
    /// (then some up to `horizon` are left for the next pass).
    fn judge_until(
        &mut self,
        worker: usize,
        horizon: u64,
        budget: &mut JudgeBudget<'_>,
        observer: &mut dyn Observer,
        progress: &mut Progress,
    ) -> bool {
        loop {
            if budget.spent() {
                return true;
            }
            let next = [&self.kernel, &self.signals, &self.moves]
                .into_iter()
                .enumerate()
                .filter_map(|(i, q)| q.front().map(|o| (o.time_ns(), i)))
                .min();
            let Some((t, i)) = next else { break };
            if t > horizon {
                break;
            }
            let queue = match i {
                0 => &mut self.kernel,
                1 => &mut self.signals,
                _ => &mut self.moves,
            };
            let Some(obs) = queue.pop_front() else { break };
            self.feed(worker, obs, observer, progress);
        }
        false
    }

    fn feed(
        &mut self,
        worker: usize,
        obs: Observation,
        observer: &mut dyn Observer,
        progress: &mut Progress,
    ) {
        // A move out of order changes no judgement, only the context of
        // the anomalies after it.
        if obs.time_ns() < self.judged_until && !matches!(obs, Observation::Move { .. }) {
            self.reordered += 1;
        }
        self.judged_until = self.judged_until.max(obs.time_ns());
        observer.observation(worker, &obs);
        let before = self.judge.progress();
        self.judge
            .observe(&obs, &mut self.windows, &mut self.anomalies);
        let after = self.judge.progress();
        progress.overflows += after.0 - before.0;
        progress.dropped += after.1 - before.1;
        progress.stops += u64::from(matches!(obs, Observation::Stop { .. }));
        for w in self.windows.drain(..) {
            observer.window(&w);
        }
        for a in self.anomalies.drain(..) {
            progress.anomalies += 1;
            observer.anomaly(&a);
        }
    }
}

/// Gives back what a merge queue grew to during a backlog, once it holds a
/// quarter of that or less: memory stays at what the steady rate needs
/// however long the run (and however long its longest hold-up). Halving
/// rather than shrinking to fit leaves room to grow again without a
/// reallocation each pass.
fn shrink_after_peak(queue: &mut VecDeque<Observation>) -> bool {
    let shrink = queue.capacity() > QUEUE_FLOOR && queue.len() <= queue.capacity() / 4;
    if shrink {
        queue.shrink_to(QUEUE_FLOOR.max(queue.len() * 2));
    }
    shrink
}

/// What fills a buffer's capacity once, to make its pages resident.
const FILLER: Observation = Observation::Lost {
    time_ns: 0,
    lost: 0,
};

/// A buffer with room for `capacity`, every slot written once. A buffer
/// refilled from its start each pass, or a queue whose contents move round
/// its capacity, touches a page for the first time whenever a pass or a
/// backlog is larger than all before it (after each hold-up of the
/// controller), so a run's memory crept up in steps for hours. Written at
/// the start, the pages a buffer can ever need at this size are resident
/// from the first second, and the run's memory is flat from there.
fn resident_vec<T: Clone>(capacity: usize, filler: T) -> Vec<T> {
    // Not `vec![filler; capacity]`: for zeros that is a zeroed allocation,
    // whose pages stay untouched until used.
    let mut buffer = Vec::with_capacity(capacity);
    buffer.resize(capacity, filler);
    buffer.clear();
    buffer
}

/// `resident_vec` for a merge queue.
fn resident_queue(capacity: usize) -> VecDeque<Observation> {
    let mut queue = VecDeque::with_capacity(capacity);
    queue.resize(capacity, FILLER);
    queue.clear();
    queue
}

/// The memory each worker makes resident before the run starts (its
/// signal and move rings, its pass buffers and merge queues: written once
/// so that a run's memory stays flat), a lower bound on what it holds:
/// 2.7 MiB, where 64 to 256 workers measured 3.4 MB each.
pub const fn resident_bytes_per_worker() -> u64 {
    let observation = std::mem::size_of::<Observation>();
    (Ring::<4>::slot_bytes(SIGNAL_RING_RECORDS)
        + Ring::<3>::slot_bytes(MOVE_RING_RECORDS)
        + RING_BYTES_FLOOR
        + PARSED_FLOOR * observation
        + 3 * QUEUE_FLOOR * observation) as u64
}

/// Room for the sample ring's bytes of one pass: in steady state a pass
/// drains a few kB, after a hold-up up to the whole ring (512 KiB).
const RING_BYTES_FLOOR: usize = 64 << 10;
/// Room for the records parsed from one pass.
const PARSED_FLOOR: usize = 4096;

/// Gives back, once a pass is done with it, what a pass buffer grew to
/// after a hold-up (one full ring): kept, each worker held its ring's size
/// twice over from its longest hold-up on.
fn give_back<T>(buffer: &mut Vec<T>, floor: usize) -> bool {
    let shrink = buffer.capacity() > floor;
    if shrink {
        buffer.clear();
        buffer.shrink_to(floor);
    }
    shrink
}

/// A handler record as the observation it is; in reset mode an overflow
/// signal is followed by the reset its handler made.
fn signal_observations(rec: SignalRecord, mode: RearmMode, out: &mut VecDeque<Observation>) {
    out.push_back(Observation::Signal {
        time_ns: rec.time_ns,
        cpu: rec.cpu,
        value: rec.value,
        si_code: rec.si_code,
        delivery: rec.delivery,
    });
    if mode == RearmMode::Reset && rec.delivery == signal::Delivery::Overflow {
        out.push_back(Observation::Reset {
            time_ns: rec.time_ns,
            count: rec.at_stop,
        });
    }
}

/// Runs one measurement on `kernel` (the binary's: `Real`, or in a test
/// build one from the test kit), with the process's malloc tuned for it.
/// `stop_signal` says whether SIGINT/SIGTERM came (and which).
pub fn run<K: Kernel>(
    kernel: &K,
    cfg: &RunConfig,
    stop_signal: &dyn Fn() -> Option<i32>,
    observer: &mut dyn Observer,
) -> Result<RunRecord> {
    kernel::tune_malloc();
    run_on(kernel, cfg, stop_signal, observer)
}

/// `run` without the process-wide malloc tuning: the tests' kernel is a
/// scripted fake (`testkit::fake_kernel`).
pub fn run_on<K: Kernel>(
    kernel: &K,
    cfg: &RunConfig,
    stop_signal: &dyn Fn() -> Option<i32>,
    observer: &mut dyn Observer,
) -> Result<RunRecord> {
    // Process and thread state a fake kernel leaves as it is: the
    // handlers are only ever run by real overflow signals.
    signal::install().context("installing the overflow signal handlers")?;
    // Threads inherit the mask: only workers unblock the overflow signals.
    kernel::set_signal_mask(&signal::worker_signals(), true)
        .context("blocking overflow signals")?;

    let plan = Plan::new(cfg.migrate, &cfg.cpus, cfg.workers, cfg.migrate_seed);
    let rate_before = kernel.max_sample_rate();
    let go = Arc::new(Barrier::new(cfg.workers + 1));
    let (handles, threads, ready_rx) = spawn_workers(kernel, cfg, &plan, &go)?;
    let mut live = match await_ready(cfg, &ready_rx) {
        Ok(live) => live,
        Err(e) => {
            for h in &handles {
                h.stop.store(true, Ordering::Release);
            }
            go.wait();
            for t in threads {
                let _ = t.join();
            }
            bail!(SetupError(e));
        }
    };
    let witnesses: Vec<SwitchWitness> = live.iter().flatten().map(|l| l.switch_witness).collect();
    observer.started(&witnesses);
    let migrator_stop = Arc::new(AtomicBool::new(false));
    let migrators = spawn_migrators(kernel, cfg, &plan, &handles, &migrator_stop)?;
    let started_ns = kernel.now_ns();
    for l in live.iter_mut().flatten() {
        l.heartbeat_seen_ns = started_ns;
        l.last_signal_ns = started_ns;
    }
    go.wait();

    let (stop_reason, mut progress) = supervise(
        kernel,
        cfg,
        &mut live,
        &handles,
        stop_signal,
        observer,
        started_ns,
    );

    migrator_stop.store(true, Ordering::Release);
    for h in &handles {
        h.stop.store(true, Ordering::Release);
    }
    for m in migrators {
        let _ = m.join();
    }
    let finished: Vec<Finished> = threads
        .into_iter()
        .map(|t| t.join().unwrap_or_default())
        .collect();
    let elapsed_ns = kernel.now_ns() - started_ns;
    let workers = finish(kernel, live, handles, finished, observer, &mut progress);
    Ok(RunRecord {
        workers,
        elapsed_ns,
        stop_reason,
        stray_signals: signal::stray_counts(),
        foreign_signals: signal::foreign_count(),
        held: progress.held,
        max_sample_rate: (rate_before, kernel.max_sample_rate()),
    })
}

/// What a worker thread sends the controller once its event is set up (or
/// why it could not be).
type ReadyResult<K> = Result<Ready<K>, String>;

/// Spawns one thread per worker; each opens its event and reports on the
/// channel returned, then waits at `go`.
#[allow(clippy::type_complexity)]
fn spawn_workers<K: Kernel>(
    kernel: &K,
    cfg: &RunConfig,
    plan: &Plan,
    go: &Arc<Barrier>,
) -> Result<(
    Vec<Arc<WorkerControl>>,
    Vec<JoinHandle<Finished>>,
    mpsc::Receiver<ReadyResult<K>>,
)> {
    let attr = EventAttr {
        type_: cfg.event.type_id,
        config: cfg.event.config,
        sample_period: cfg.period,
        exclude_kernel: !cfg.include_kernel,
        sample_records: true,
        context_switch: false,
    };
    let (ready_tx, ready_rx) = mpsc::channel();
    let mut handles: Vec<Arc<WorkerControl>> = Vec::with_capacity(cfg.workers);
    let mut threads = Vec::with_capacity(cfg.workers);
    for index in 0..cfg.workers {
        let shared = Arc::new(WorkerControl::new(index));
        let spec = WorkerConfig {
            attr,
            // A software clock's judge needs no stops, but its stress is
            // measured in stops like a PMU's: `auto` witnesses them for
            // every event.
            witness: cfg.switch_witness,
            first_cpu: plan.first_cpu(index),
            rearm_period: if cfg.mode == RearmMode::Reset {
                cfg.period
            } else {
                0
            },
            signal_budget: cfg.interrupts_per_worker.unwrap_or(0),
        };
        let (k, s, tx, g) = (
            kernel.clone(),
            Arc::clone(&shared),
            ready_tx.clone(),
            Arc::clone(go),
        );
        let thread = kernel
            .spawn(format!("worker-{index}"), move || {
                worker::run(k, s, spec, tx, g)
            })
            .context("spawning a worker thread")?;
        handles.push(shared);
        threads.push(thread);
    }
    Ok((handles, threads, ready_rx))
}

/// Waits for every worker's report: the workers the run loop drives, or
/// the first setup error (every report is awaited all the same).
fn await_ready<K: Kernel>(
    cfg: &RunConfig,
    ready_rx: &mpsc::Receiver<ReadyResult<K>>,
) -> Result<Vec<Option<RunningWorker<K>>>, String> {
    let judge_cfg = cfg.judge_config();
    let mut live: Vec<Option<RunningWorker<K>>> = (0..cfg.workers).map(|_| None).collect();
    let mut setup_error = None;
    for _ in 0..cfg.workers {
        match ready_rx.recv() {
            Ok(Ok(ready)) => {
                let index = ready.index;
                live[index] = Some(RunningWorker::new(ready, judge_cfg, cfg.mode));
            }
            Ok(Err(e)) => setup_error = setup_error.or(Some(e)),
            Err(_) => break,
        }
    }
    match setup_error {
        Some(e) => Err(e),
        None => Ok(live),
    }
}

/// Spawns the migrators, each moving its share of the workers until `stop`.
fn spawn_migrators<K: Kernel>(
    kernel: &K,
    cfg: &RunConfig,
    plan: &Plan,
    handles: &[Arc<WorkerControl>],
    stop: &Arc<AtomicBool>,
) -> Result<Vec<JoinHandle<()>>> {
    let moves = migrator::Moves {
        interval: Duration::from_nanos(cfg.migrate_interval_ns),
        running_only: cfg.move_running_only,
    };
    let mut migrators = Vec::with_capacity(cfg.migrators);
    for (m, served) in migrator::share(cfg.workers, cfg.migrators)
        .into_iter()
        .enumerate()
    {
        let workers = handles.to_vec();
        let stop_m = Arc::clone(stop);
        let plan = plan.for_migrator(cfg.migrate_seed, m);
        let k = kernel.clone();
        match kernel.spawn(format!("migrator-{m}"), move || {
            migrator::run_on(&k, plan, workers, served, moves, stop_m)
        }) {
            Ok(t) => migrators.push(t),
            Err(e) => {
                stop.store(true, Ordering::Release);
                for t in migrators {
                    let _ = t.join();
                }
                return Err(e).context("spawning a migrator thread");
            }
        }
    }
    Ok(migrators)
}

/// How long a worker's judging may go on in this pass: until `deadline`
/// on `clock` (read every `JUDGE_CLOCK_EVERY` observations), or without
/// end (`deadline` None: the end of the run judges everything).
struct JudgeBudget<'a> {
    clock: &'a dyn Fn() -> u64,
    deadline: Option<u64>,
    until_read: u32,
}

impl<'a> JudgeBudget<'a> {
    fn new(clock: &'a dyn Fn() -> u64, deadline: Option<u64>) -> JudgeBudget<'a> {
        JudgeBudget {
            clock,
            deadline,
            until_read: JUDGE_CLOCK_EVERY,
        }
    }

    fn spent(&mut self) -> bool {
        let Some(deadline) = self.deadline else {
            return false;
        };
        self.until_read -= 1;
        if self.until_read > 0 {
            return false;
        }
        self.until_read = JUDGE_CLOCK_EVERY;
        (self.clock)() >= deadline
    }
}

/// The controller's loop: drains and judges every pass, runs the watchdog,
/// reports progress, until something says stop: why, and the progress
/// so far.
fn supervise<K: Kernel>(
    kernel: &K,
    cfg: &RunConfig,
    live: &mut [Option<RunningWorker<K>>],
    handles: &[Arc<WorkerControl>],
    stop_signal: &dyn Fn() -> Option<i32>,
    observer: &mut dyn Observer,
    started_ns: u64,
) -> (StopReason, Progress) {
    let mut progress = Progress::default();
    let progress = &mut progress;
    let mut last_progress = started_ns;
    let mut horizon = started_ns;
    let mut last_pass = (started_ns, kernel.thread_cpu_ns());
    loop {
        kernel.pause(DRAIN_EVERY);
        let now = kernel.now_ns();
        let cpu = kernel.thread_cpu_ns();
        let held = held_since(last_pass, (now, cpu), cfg.watchdog_ns);
        last_pass = (now, cpu);
        if let Some(span) = held {
            progress.held.add(span);
        }
        let pass = Pass {
            now,
            horizon,
            judge_ns: Some(JUDGE_PER_PASS_NS),
        };
        drain_all(kernel, live, handles, observer, progress, pass);
        horizon = now.saturating_sub(JUDGE_LAG_NS);
        watchdog(kernel, cfg, live, handles, now, held.unwrap_or(0));

        if let Some(n) = cfg.interrupts_per_worker {
            for (l, h) in live.iter().zip(handles) {
                if l.as_ref()
                    .is_some_and(|l| l.judge.deliveries().signals >= n)
                {
                    h.stop.store(true, Ordering::Release);
                }
            }
        }
        observer.tick(now);
        if let Some(sig) = stop_signal() {
            return (StopReason::Signal(sig), *progress);
        }
        if let Some(e) = observer.failure() {
            return (StopReason::OutputFailed(e), *progress);
        }
        if let Some(reason) = budget_spent(cfg, live, handles, progress, now - started_ns) {
            return (reason, *progress);
        }
        if now - last_progress >= PROGRESS_EVERY_NS {
            last_progress = now;
            progress.elapsed_ns = now - started_ns;
            progress.moves = handles
                .iter()
                .map(|h| h.moves_requested.load(Ordering::Relaxed))
                .sum();
            observer.progress(progress);
        }
    }
}

/// Whether the run has what it was asked for (duration, anomalies, a
/// bisection's answer) or its workers are all gone, `elapsed_ns` in.
fn budget_spent<K: Kernel>(
    cfg: &RunConfig,
    live: &[Option<RunningWorker<K>>],
    handles: &[Arc<WorkerControl>],
    progress: &Progress,
    elapsed_ns: u64,
) -> Option<StopReason> {
    if cfg.duration_ns.is_some_and(|d| elapsed_ns >= d) {
        return Some(StopReason::Duration);
    }
    if cfg
        .stop_after_anomalies
        .is_some_and(|n| progress.anomalies >= n)
    {
        return Some(StopReason::Anomalies);
    }
    if let Some(b) = &cfg.bisect {
        if progress.dropped > 0 {
            return Some(StopReason::BisectBad);
        }
        // The loss happens at stops: good needs enough of both.
        if progress.overflows >= b.overflows_needed && progress.stops >= b.stops_needed {
            return Some(StopReason::BisectGood);
        }
    }
    if handles.iter().all(|h| h.stop.load(Ordering::Relaxed)) {
        let by_budget = cfg.interrupts_per_worker.is_some()
            && live.iter().flatten().all(|l| l.stalled.is_none());
        return Some(if by_budget {
            StopReason::Interrupts
        } else {
            StopReason::WorkersGone
        });
    }
    None
}

/// Once every thread is joined: the last records, everything the handlers
/// and kernel wrote before DISABLE (a ring's worth per pass), then each
/// worker's final count, which is its last stop; and each worker's outcome.
fn finish<K: Kernel>(
    kernel: &K,
    mut live: Vec<Option<RunningWorker<K>>>,
    handles: Vec<Arc<WorkerControl>>,
    finished: Vec<Finished>,
    observer: &mut dyn Observer,
    progress: &mut Progress,
) -> Vec<WorkerOutcome> {
    let last = Pass {
        now: u64::MAX,
        horizon: u64::MAX,
        judge_ns: None,
    };
    while drain_all(kernel, &mut live, &handles, observer, progress, last) {}
    for ((i, l), f) in live.iter_mut().enumerate().zip(&finished) {
        let Some(l) = l else { continue };
        let end = Observation::Final {
            time_ns: f.final_time_ns.max(l.judged_until),
            count: f.final_count,
        };
        l.feed(i, end, observer, progress);
    }
    live.into_iter()
        .zip(handles)
        .zip(finished)
        .filter_map(|((l, h), f)| {
            let l = l?;
            Some(WorkerOutcome {
                verdict: l.judge.verdict(),
                histogram: l.judge.deltas().clone(),
                latency: l.judge.latency().clone(),
                final_count: f.final_count,
                switch_witness: l.switch_witness,
                ring_bytes: l.ring_bytes,
                reordered: l.reordered,
                moves_requested: h.moves_requested.load(Ordering::Relaxed),
                moves_failed: h.moves_failed.load(Ordering::Relaxed),
                kernel_migrations: f.kernel_migrations,
                signal_ring_overflows: l.slot.ring_overflowed(),
                garbled_kernel_bytes: l.garbled,
                stalled: l.stalled,
            })
        })
        .collect()
}

/// A worker could not set up its event: the message says why (exit 125).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SetupError(pub String);

/// One pass of the controller: its time, how far it judges, and how long
/// it may judge (None: everything, at the end).
#[derive(Clone, Copy)]
struct Pass {
    now: u64,
    horizon: u64,
    judge_ns: Option<u64>,
}

/// Drains every worker's rings and judges what is older than the pass's
/// horizon, each worker for its share of the pass's judging time. Returns
/// whether a ring held more than one pass takes, or judging was cut short
/// (then what is left is judged later, and nothing after what was taken
/// from a ring yet).
fn drain_all<K: Kernel>(
    kernel: &K,
    live: &mut [Option<RunningWorker<K>>],
    handles: &[Arc<WorkerControl>],
    observer: &mut dyn Observer,
    progress: &mut Progress,
    pass: Pass,
) -> bool {
    let Pass {
        now,
        horizon,
        judge_ns,
    } = pass;
    let mut more = false;
    let share = judge_ns.map(|ns| ns / live.len().max(1) as u64);
    let clock = || kernel.now_ns();
    for (i, (l, h)) in live.iter_mut().zip(handles).enumerate() {
        let Some(l) = l else { continue };
        let mut horizon = horizon;
        // At most one ring's worth per pass: a worker livelocked in its
        // handler (each handler's kernel time a period or more of a
        // kernel-counting event, as under QEMU) pushes as fast as we pop,
        // and an unbounded loop never returned to the watchdog and the
        // duration check (a 1.5 s run killed after 30 s).
        let mut taken = 0;
        for rec in std::iter::from_fn(|| l.slot.pop()).take(SIGNAL_RING_RECORDS) {
            l.last_signal_ns = now.min(kernel.now_ns());
            progress.signals += 1;
            signal_observations(rec, l.mode, &mut l.signals);
            taken += 1;
        }
        if taken == SIGNAL_RING_RECORDS {
            // The rest come after the last one taken: judge no further.
            more = true;
            horizon = horizon.min(l.signals.back().map_or(0, |o| o.time_ns()));
        }
        l.bytes.clear();
        kernel.drain(&mut l.ring, &mut l.bytes);
        l.parsed.clear();
        l.garbled += sample_ring::parse(&l.bytes, &l.ids, &mut l.ring_state, &mut l.parsed);
        l.kernel.extend(l.parsed.drain(..));
        let mut gave_back = give_back(&mut l.bytes, RING_BYTES_FLOOR);
        gave_back |= give_back(&mut l.parsed, PARSED_FLOOR);
        // Bounded for the same reason: the migrator never pauses.
        let mut taken = 0;
        for [asked, t, cpu] in std::iter::from_fn(|| h.moves.pop()).take(MOVE_RING_RECORDS) {
            l.moves.push_back(Observation::Move {
                time_ns: t,
                cpu: cpu as u32,
                requested_ns: Some(asked),
            });
            taken += 1;
        }
        if taken == MOVE_RING_RECORDS {
            more = true;
            horizon = horizon.min(l.moves.back().map_or(0, |o| o.time_ns()));
        }
        let mut budget = JudgeBudget::new(&clock, share.map(|ns| kernel.now_ns() + ns));
        more |= l.judge_until(i, horizon, &mut budget, observer, progress);
        for q in [&mut l.kernel, &mut l.signals, &mut l.moves] {
            gave_back |= shrink_after_peak(q);
        }
        if gave_back {
            kernel::release_free_heap();
        }
    }
    more
}

/// How long the controller was off the CPU since the last pass, between
/// two (CLOCK_MONOTONIC, thread CPU time) readings, when that is half a
/// watchdog or more: the process was stopped (SIGSTOP, a cgroup freezer),
/// the machine paused, or the controller starved. The watchdog cannot
/// have watched the workers then, so that time is not counted against
/// them (a freeze used to read as "the event does not count or overflow
/// here"). Off the CPU: the time between the readings less the pause
/// asked for and the CPU time the pass itself took.
fn held_since(last: (u64, u64), now: (u64, u64), watchdog_ns: u64) -> Option<u64> {
    let wall = now.0.saturating_sub(last.0);
    let ran = now.1.saturating_sub(last.1);
    let off_cpu = wall
        .saturating_sub(DRAIN_EVERY.as_nanos() as u64)
        .saturating_sub(ran);
    (off_cpu >= watchdog_ns / 2).then_some(off_cpu)
}

/// Stops workers that make no progress: a thread that no longer runs user
/// code (livelocked in signal delivery), or an event that never overflows.
/// `held_ns`: time since the last pass the controller was held
/// (`held_since`), which counts as neither silence nor progress.
fn watchdog<K: Kernel>(
    kernel: &K,
    cfg: &RunConfig,
    live: &mut [Option<RunningWorker<K>>],
    handles: &[Arc<WorkerControl>],
    now: u64,
    held_ns: u64,
) {
    for (l, h) in live.iter_mut().zip(handles) {
        let Some(l) = l else { continue };
        if l.stalled.is_some() || h.stop.load(Ordering::Relaxed) {
            continue;
        }
        l.heartbeat_seen_ns = (l.heartbeat_seen_ns + held_ns).min(now);
        l.last_signal_ns = (l.last_signal_ns + held_ns).min(now);
        let beat = h.heartbeat.load(Ordering::Relaxed);
        if beat != l.last_heartbeat {
            l.last_heartbeat = beat;
            l.heartbeat_seen_ns = now;
        }
        let reason = if now - l.heartbeat_seen_ns > cfg.watchdog_ns {
            Some(format!(
                "worker {} ran no user code for {} ms (livelocked in the kernel?): its event was disabled",
                h.index,
                (now - l.heartbeat_seen_ns) / 1_000_000
            ))
        } else if now - l.last_signal_ns > cfg.watchdog_ns {
            Some(format!(
                "worker {} got no overflow signal for {} ms while running: the event does not count or overflow here",
                h.index,
                (now - l.last_signal_ns) / 1_000_000
            ))
        } else {
            None
        };
        if let Some(mut reason) = reason {
            // A worker waiting its turn behind the others looks the same
            // (1,024 workers on 2 CPUs were all called livelocked).
            if cfg.workers > cfg.cpus.len() {
                reason.push_str(&format!(
                    "; {} workers share {} CPUs, so a worker waiting its turn looks the same: give fewer --workers or a longer --watchdog",
                    cfg.workers,
                    cfg.cpus.len()
                ));
            }
            // Before the DISABLE: a reset-mode handler that re-arms after
            // it disables the event again.
            l.slot.hold_disabled();
            let published = h.event_fd.lock().unwrap_or_else(|e| e.into_inner());
            if *published >= 0 {
                // SAFETY: the worker publishes its event's fd while the
                // event is open and withdraws it under this lock before
                // closing it: while we hold the lock, the number is its
                // open event.
                let _ = unsafe { kernel.disable_by_number(*published) };
            }
            drop(published);
            h.stop.store(true, Ordering::Release);
            l.stalled = Some(reason);
        }
    }
}

#[cfg(test)]
mod tests;
