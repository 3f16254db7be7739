/*!
One measurement: spawn workers and the migrator, drain what they record,
judge it through each worker's timeline, and stop on budget, signal or
watchdog.

The controller (the calling thread) is the only consumer of every ring:
handler records, kernel sample rings and migration times. Each pass drains
signals first and kernel records second (a kernel record always precedes its
signal), then feeds the timelines. Nothing here interprets results; that is
`classify` and `results`.
*/

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, mpsc};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use hdrhistogram::Histogram;

use crate::config::RunConfig;
use crate::kernel::{self, EventAttr, SampleRing};
use crate::migrator::{self, Plan};
use crate::sample;
use crate::signal::{self, Slot};
use crate::timeline::{
    Anomaly, ClosedWindow, Closings, Mode, Timeline, TimelineConfig, WorkerTotals,
};
use crate::worker::{self, Finished, WorkerShared, WorkerSpec};

/// How often the controller drains rings.
const DRAIN_EVERY: Duration = Duration::from_millis(5);
/// How often progress is reported.
const PROGRESS_EVERY_NS: u64 = 250_000_000;

/// Live output while a run goes on.
pub trait Observer {
    /// Every judged window, in order per worker.
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
}

/// Why the run ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    Duration,
    Interrupts,
    Anomalies,
    /// SIGINT or SIGTERM (the signal number).
    Signal(i32),
    /// Every worker stopped on its own (watchdog or setup).
    WorkersGone,
    /// Results could not be written any more (the reason).
    OutputFailed(String),
    /// Bisect mode: enough overflows without a drop.
    BisectGood,
    /// Bisect mode: the first dropped interrupt.
    BisectBad,
}

/// One worker's raw outcome.
pub struct WorkerRecord {
    pub totals: WorkerTotals,
    pub histogram: Histogram<u64>,
    pub final_count: Option<u64>,
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
    pub workers: Vec<WorkerRecord>,
    pub elapsed_ns: u64,
    pub stop_reason: StopReason,
    /// Overflow signals nobody could be charged with, and SIGIOs likewise.
    pub stray_signals: (u64, u64),
    /// perf_event_max_sample_rate at start and end: the kernel lowers it
    /// when interrupts take too long.
    pub max_sample_rate: (Option<u64>, Option<u64>),
}

struct Live {
    slot: Arc<Slot>,
    ring: SampleRing,
    timeline: Timeline,
    bytes: Vec<u8>,
    records: Vec<sample::KernelRecord>,
    garbled: usize,
    last_heartbeat: u64,
    heartbeat_seen_ns: u64,
    last_signal_ns: u64,
    stalled: Option<String>,
}

pub fn read_max_sample_rate() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Runs one measurement. `stop_signal` says whether SIGINT/SIGTERM came
/// (and which).
pub fn run(
    cfg: &RunConfig,
    stop_signal: &dyn Fn() -> Option<i32>,
    observer: &mut dyn Observer,
) -> Result<RunRecord> {
    signal::install().context("installing the overflow signal handlers")?;
    // Threads inherit the mask: only workers unblock the overflow signals.
    kernel::set_signal_mask(&signal::worker_signals(), true)
        .context("blocking overflow signals")?;

    let plan = Plan::new(cfg.migrate, &cfg.cpus, cfg.workers, cfg.migrate_seed);
    let attr = EventAttr {
        type_: cfg.event.type_id,
        config: cfg.event.config,
        sample_period: cfg.period,
        exclude_kernel: !cfg.include_kernel,
        sample_records: true,
    };
    let rate_before = read_max_sample_rate();
    let (ready_tx, ready_rx) = mpsc::channel();
    let go = Arc::new(Barrier::new(cfg.workers + 1));
    let mut handles: Vec<Arc<WorkerShared>> = Vec::with_capacity(cfg.workers);
    let mut threads = Vec::with_capacity(cfg.workers);
    for index in 0..cfg.workers {
        let shared = Arc::new(WorkerShared::new(index));
        let spec = WorkerSpec {
            attr,
            first_cpu: plan.first_cpu(index),
            rearm_period: if cfg.mode == Mode::Reset {
                cfg.period
            } else {
                0
            },
        };
        let (s, tx, g) = (Arc::clone(&shared), ready_tx.clone(), Arc::clone(&go));
        let thread = std::thread::Builder::new()
            .name(format!("worker-{index}"))
            .spawn(move || worker::run(s, spec, tx, g))
            .context("spawning a worker thread")?;
        handles.push(shared);
        threads.push(thread);
    }
    drop(ready_tx);

    let mut live: Vec<Option<Live>> = (0..cfg.workers).map(|_| None).collect();
    let mut setup_error = None;
    for _ in 0..cfg.workers {
        match ready_rx.recv() {
            Ok(Ok(ready)) => {
                live[ready.index] = Some(Live {
                    slot: ready.slot,
                    ring: ready.ring,
                    timeline: Timeline::new(TimelineConfig {
                        worker: ready.index,
                        period: cfg.period,
                        skid: cfg.skid,
                        interrupt_skid: cfg.interrupt_skid,
                        mode: cfg.mode,
                        software: cfg.event.software,
                        inject_drop_every: cfg.inject_drop_every.unwrap_or(0),
                    }),
                    bytes: Vec::with_capacity(64 * 1024),
                    records: Vec::with_capacity(4096),
                    garbled: 0,
                    last_heartbeat: 0,
                    heartbeat_seen_ns: 0,
                    last_signal_ns: 0,
                    stalled: None,
                })
            }
            Ok(Err(e)) => setup_error = setup_error.or(Some(e)),
            Err(_) => break,
        }
    }
    if let Some(e) = setup_error {
        for h in &handles {
            h.stop.store(true, Ordering::Release);
        }
        go.wait();
        for t in threads {
            let _ = t.join();
        }
        bail!(SetupError(e));
    }

    let migrator_stop = Arc::new(AtomicBool::new(false));
    let migrator = {
        let workers = handles.clone();
        let stop = Arc::clone(&migrator_stop);
        let interval = Duration::from_nanos(cfg.migrate_interval_ns);
        std::thread::Builder::new()
            .name("migrator".into())
            .spawn(move || migrator::run(plan, workers, interval, stop))
            .context("spawning the migrator thread")?
    };
    let started_ns = kernel::monotonic_ns();
    for l in live.iter_mut().flatten() {
        l.heartbeat_seen_ns = started_ns;
        l.last_signal_ns = started_ns;
    }
    go.wait();

    let mut progress = Progress::default();
    let mut last_progress = started_ns;
    let stop_reason = loop {
        std::thread::sleep(DRAIN_EVERY);
        let now = kernel::monotonic_ns();
        drain_all(&mut live, &handles, observer, &mut progress, now);
        watchdog(cfg, &mut live, &handles, now);

        if let Some(n) = cfg.interrupts_per_worker {
            for (l, h) in live.iter().zip(&handles) {
                if l.as_ref().is_some_and(|l| l.timeline.totals().signals >= n) {
                    h.stop.store(true, Ordering::Release);
                }
            }
        }
        observer.tick(now);
        if let Some(sig) = stop_signal() {
            break StopReason::Signal(sig);
        }
        if let Some(e) = observer.failure() {
            break StopReason::OutputFailed(e);
        }
        if cfg.duration_ns.is_some_and(|d| now - started_ns >= d) {
            break StopReason::Duration;
        }
        if cfg
            .stop_after_anomalies
            .is_some_and(|n| progress.anomalies >= n)
        {
            break StopReason::Anomalies;
        }
        if let Some(b) = &cfg.bisect {
            if progress.dropped > 0 {
                break StopReason::BisectBad;
            }
            if progress.overflows >= b.overflows_needed {
                break StopReason::BisectGood;
            }
        }
        if handles.iter().all(|h| h.stop.load(Ordering::Relaxed)) {
            let by_budget = cfg.interrupts_per_worker.is_some()
                && live.iter().flatten().all(|l| l.stalled.is_none());
            break if by_budget {
                StopReason::Interrupts
            } else {
                StopReason::WorkersGone
            };
        }
        if now - last_progress >= PROGRESS_EVERY_NS {
            last_progress = now;
            progress.elapsed_ns = now - started_ns;
            progress.moves = handles
                .iter()
                .map(|h| h.moves_requested.load(Ordering::Relaxed))
                .sum();
            observer.progress(&progress);
        }
    };

    migrator_stop.store(true, Ordering::Release);
    for h in &handles {
        h.stop.store(true, Ordering::Release);
    }
    let _ = migrator.join();
    let finished: Vec<Finished> = threads
        .into_iter()
        .map(|t| t.join().unwrap_or_default())
        .collect();
    let elapsed_ns = kernel::monotonic_ns() - started_ns;
    // The last records: everything the handlers and kernel wrote before DISABLE.
    drain_all(&mut live, &handles, observer, &mut progress, u64::MAX);
    // Settle what waited for a next signal that will not come.
    for l in live.iter_mut().flatten() {
        book(&mut l.timeline, observer, &mut progress, |t| {
            [t.flush(), None]
        });
    }

    let workers = live
        .into_iter()
        .zip(handles)
        .zip(finished)
        .filter_map(|((l, h), f)| {
            let mut l = l?;
            let totals = l.timeline.finish().clone();
            Some(WorkerRecord {
                totals,
                histogram: l.timeline.histogram().clone(),
                final_count: f.final_count,
                moves_requested: h.moves_requested.load(Ordering::Relaxed),
                moves_failed: h.moves_failed.load(Ordering::Relaxed),
                kernel_migrations: f.kernel_migrations,
                signal_ring_overflows: l.slot.ring_overflowed(),
                garbled_kernel_bytes: l.garbled,
                stalled: l.stalled,
            })
        })
        .collect();
    Ok(RunRecord {
        workers,
        elapsed_ns,
        stop_reason,
        stray_signals: signal::stray_counts(),
        max_sample_rate: (rate_before, read_max_sample_rate()),
    })
}

/// A worker could not set up its event: the message says why (exit 125).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SetupError(pub String);

fn drain_all(
    live: &mut [Option<Live>],
    handles: &[Arc<WorkerShared>],
    observer: &mut dyn Observer,
    progress: &mut Progress,
    now: u64,
) {
    for (l, h) in live.iter_mut().zip(handles) {
        let Some(l) = l else { continue };
        // Signals first: every kernel record they need was written before them.
        let mut signals = Vec::new();
        while let Some(rec) = l.slot.pop() {
            signals.push(rec);
        }
        l.bytes.clear();
        l.ring.drain(&mut l.bytes);
        l.records.clear();
        l.garbled += sample::parse(&l.bytes, &mut l.records);
        for &rec in &l.records {
            l.timeline.add_kernel(rec);
        }
        while let Some([t]) = h.moves.pop() {
            l.timeline.add_move(t);
        }
        for rec in signals {
            l.last_signal_ns = now.min(kernel::monotonic_ns());
            progress.signals += 1;
            book(&mut l.timeline, observer, progress, |t| t.feed(rec));
        }
    }
}

/// Takes one step of a timeline (a signal, or the final flush) and hands
/// the windows it closed to the observer and the progress counts.
fn book(
    timeline: &mut Timeline,
    observer: &mut dyn Observer,
    progress: &mut Progress,
    step: impl FnOnce(&mut Timeline) -> Closings,
) {
    let before = timeline.totals().accounted_overflows;
    let closings = step(timeline);
    progress.overflows += timeline.totals().accounted_overflows - before;
    for closed in closings.into_iter().flatten() {
        observer.window(&closed.window);
        if let Some(a) = &closed.anomaly {
            progress.anomalies += 1;
            progress.dropped += a.dropped;
            observer.anomaly(a);
        }
    }
}

/// Stops workers that make no progress: a thread that no longer runs user
/// code (livelocked in signal delivery), or an event that never overflows.
fn watchdog(cfg: &RunConfig, live: &mut [Option<Live>], handles: &[Arc<WorkerShared>], now: u64) {
    for (l, h) in live.iter_mut().zip(handles) {
        let Some(l) = l else { continue };
        if l.stalled.is_some() || h.stop.load(Ordering::Relaxed) {
            continue;
        }
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
        if let Some(reason) = reason {
            let fd = h.event_fd.load(Ordering::Acquire);
            if fd >= 0 {
                let _ = kernel::disable_fd(fd);
            }
            h.stop.store(true, Ordering::Release);
            l.stalled = Some(reason);
        }
    }
}
