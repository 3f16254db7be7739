/*!
Migrator: moves per second on a spinning worker, pmustress's
`migrator::run` against a bare `sched_setaffinity` loop (the floor) on the
same thread pair: this bench thread moves one spinning thread between the
first two CPUs it may use, back to back.

Printed after criterion's figures: the ratio from criterion's samples, and
the ratio from interleaved rounds (bare, pmustress, bare, ...), which a
machine whose load changes during the run cannot bias. Target >= 0.9.

`PMUSTRESS_BENCH_DIAG=1` adds why full runs move workers far slower than
this (the migrator waiting behind a worker on its own CPU), with the
scheduling changes that would fix it, measured on the same threads.
*/

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

use common::{Spinner, Tally, machine_line, median, ratio_line};
use pmustress::domain::MigrateMode;
use pmustress::engine::kernel;
use pmustress::engine::migrator::{self, Plan};
use pmustress::engine::worker::WorkerControl;

/// The two CPUs every move alternates between.
fn cpu_pair() -> [usize; 2] {
    let cpus = kernel::allowed_cpus().expect("sched_getaffinity");
    assert!(cpus.len() >= 2, "the migrator bench needs 2 CPUs");
    [cpus[0], cpus[1]]
}

/// A spinning worker that the pmustress migrator can drive, and that stops
/// the migrator itself once it has been moved `target` times (no third
/// thread competes for the CPUs).
struct Rig {
    cpus: [usize; 2],
    shared: Arc<WorkerControl>,
    /// u64::MAX when no stop is armed.
    target: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    spinner: Spinner,
}

impl Rig {
    fn new() -> Rig {
        let shared = Arc::new(WorkerControl::new(0));
        let target = Arc::new(AtomicU64::new(u64::MAX));
        let stop = Arc::new(AtomicBool::new(false));
        let spinner = {
            let (shared, target, stop) = (shared.clone(), target.clone(), stop.clone());
            Spinner::start("bench-worker", move || {
                let t = target.load(Ordering::Acquire);
                if t != u64::MAX
                    && shared.moves_requested.load(Ordering::Relaxed) >= t
                    && target
                        .compare_exchange(t, u64::MAX, Ordering::AcqRel, Ordering::Relaxed)
                        .is_ok()
                {
                    stop.store(true, Ordering::Release);
                }
            })
        };
        shared.tid.store(spinner.tid, Ordering::Release);
        // The migrator moves only workers that have started spinning.
        shared.heartbeat.store(1, Ordering::Release);
        Rig {
            cpus: cpu_pair(),
            shared,
            target,
            stop,
            spinner,
        }
    }

    /// The floor: `n` moves by a bare loop. Returns the time taken.
    fn bare(&self, n: u64) -> Duration {
        let start = Instant::now();
        for i in 0..n {
            kernel::move_thread(self.spinner.tid, self.cpus[(i & 1) as usize])
                .expect("sched_setaffinity");
        }
        start.elapsed()
    }

    /// pmustress: `migrator::run` until the worker saw `n` moves. Returns
    /// the time per move scaled to exactly `n` (the loop may overshoot by
    /// a move or two before it sees the stop flag).
    fn pmustress(&self, n: u64) -> Duration {
        self.shared.moves_requested.store(0, Ordering::Relaxed);
        while self.shared.moves.pop().is_some() {}
        self.stop.store(false, Ordering::Release);
        self.target.store(n, Ordering::Release);
        let plan = Plan::new(MigrateMode::PingPong, &self.cpus, 1, 1);
        let start = Instant::now();
        let moves = migrator::Moves {
            interval: Duration::ZERO,
            running_only: false,
        };
        migrator::run(
            plan,
            vec![self.shared.clone()],
            vec![0],
            moves,
            self.stop.clone(),
        );
        let elapsed = start.elapsed();
        let done = self.shared.moves_requested.load(Ordering::Relaxed).max(1);
        assert_eq!(self.shared.moves_failed.load(Ordering::Relaxed), 0);
        elapsed.mul_f64(n as f64 / done as f64)
    }
}

fn bench(c: &mut Criterion) {
    println!("{}", machine_line());
    let rig = Rig::new();
    let (bare, ours) = (Tally::default(), Tally::default());
    let mut group = c.benchmark_group("migrator");
    group.throughput(Throughput::Elements(1));
    group.bench_function("bare_setaffinity_loop", |b| {
        b.iter_custom(|n| {
            let d = rig.bare(n);
            bare.record(n, d);
            d
        })
    });
    group.bench_function("pmustress_migrator_run", |b| {
        b.iter_custom(|n| {
            let d = rig.pmustress(n);
            ours.record(n, d);
            d
        })
    });
    group.finish();
    println!(
        "{}",
        ratio_line(
            "migrator (criterion samples)",
            "moves/s",
            ours.per_second(),
            bare.per_second(),
            "target >= 0.9"
        )
    );

    // Interleaved: each round measures both within a few hundred ms.
    let moves = 20_000;
    let (mut a, mut b, mut r) = (vec![], vec![], vec![]);
    for _ in 0..7 {
        let floor = moves as f64 / rig.bare(moves).as_secs_f64();
        let pm = moves as f64 / rig.pmustress(moves).as_secs_f64();
        a.push(floor);
        b.push(pm);
        r.push(pm / floor);
    }
    r.sort_by(f64::total_cmp);
    println!(
        "{} [7 interleaved rounds of {moves} moves; ratio min {:.3} max {:.3}]",
        ratio_line(
            "migrator (interleaved)",
            "moves/s",
            median(&b),
            median(&a),
            "target >= 0.9"
        ),
        r[0],
        r[r.len() - 1]
    );
    drop(rig);
    if std::env::var_os("PMUSTRESS_BENCH_DIAG").is_some() {
        diag::run();
    }
}

/// Why full runs are slow, measured: see the module doc.
mod diag {
    use super::*;
    use pmustress::config::RunConfig;
    use pmustress::config::event::Platform;
    use pmustress::engine::run;

    const WINDOW: Duration = Duration::from_millis(1000);

    /// (CPU time, time waiting on a runqueue) of the calling thread, ns.
    fn schedstat() -> (u64, u64) {
        let path = format!("/proc/self/task/{}/schedstat", kernel::gettid());
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let v: Vec<u64> = text
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        (
            v.first().copied().unwrap_or(0),
            v.get(1).copied().unwrap_or(0),
        )
    }

    fn set_policy(tid: libc::pid_t, policy: libc::c_int, priority: i32) -> bool {
        let p = libc::sched_param {
            sched_priority: priority,
        };
        // SAFETY: sched_setscheduler reads one sched_param we own; tid is a
        // live thread of this process (or 0, the caller).
        unsafe { libc::sched_setscheduler(tid, policy, &p) == 0 }
    }

    /// Bare loop over `workers` for WINDOW: moves/s, migrator runqueue wait
    /// per move (us), worker heartbeats per second (millions).
    fn bare(workers: &[&Spinner], cpus: [usize; 2]) -> (f64, f64, f64) {
        let beats0: u64 = workers
            .iter()
            .map(|s| s.beats.load(Ordering::Relaxed))
            .sum();
        let (_, wait0) = schedstat();
        let start = Instant::now();
        let mut n = 0u64;
        while start.elapsed() < WINDOW {
            for _ in 0..32 {
                for (w, s) in workers.iter().enumerate() {
                    let cpu = cpus[((n / workers.len() as u64 + w as u64) & 1) as usize];
                    kernel::move_thread(s.tid, cpu).expect("sched_setaffinity");
                    n += 1;
                }
            }
        }
        let secs = start.elapsed().as_secs_f64();
        let (_, wait1) = schedstat();
        let beats: u64 = workers
            .iter()
            .map(|s| s.beats.load(Ordering::Relaxed))
            .sum();
        (
            n as f64 / secs,
            (wait1 - wait0) as f64 / n as f64 / 1e3,
            (beats - beats0) as f64 / secs / 1e6,
        )
    }

    /// Watches a run through its progress reports; with `idle`, switches
    /// the workers to SCHED_IDLE at the first report (the prototype fix).
    struct Watch {
        idle: bool,
        switched: bool,
        /// (elapsed ns, moves, signals) at the first and the last report.
        first: Option<(u64, u64, u64)>,
        last: Option<(u64, u64, u64)>,
    }

    impl run::Observer for Watch {
        fn anomaly(&mut self, _: &pmustress::judge::Anomaly) {}
        fn progress(&mut self, p: &run::Progress) {
            if self.idle && !self.switched {
                self.switched = true;
                for entry in std::fs::read_dir("/proc/self/task").into_iter().flatten() {
                    let Ok(entry) = entry else { continue };
                    let comm =
                        std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
                    if comm.starts_with("worker-")
                        && let Ok(tid) = entry.file_name().to_string_lossy().parse()
                    {
                        set_policy(tid, libc::SCHED_IDLE, 0);
                    }
                }
            }
            let now = (p.elapsed_ns, p.moves, p.signals);
            self.first.get_or_insert(now);
            self.last = Some(now);
        }
    }

    /// A full `run::run` on task-clock, ping-pong back to back: moves/s and
    /// signals/s between its first and last progress reports (0.25 s to
    /// the end), and whether the moves requested match the kernel's count.
    fn full(workers: usize, idle: bool) -> (f64, f64, bool) {
        let workers = workers.to_string();
        let argv = [
            "pmustress",
            "run",
            "--event",
            "task-clock",
            "--workers",
            &workers,
            "--duration",
            "2s",
        ];
        let args = match pmustress::cli::Cli::try_parse_from(argv).map(|c| c.command) {
            Ok(pmustress::cli::Command::Run(a)) => a,
            _ => unreachable!("a valid command line"),
        };
        let allowed = kernel::allowed_cpus().expect("sched_getaffinity");
        let cfg = RunConfig::from_args(&args, &allowed, &Platform::default()).expect("config");
        let mut watch = Watch {
            idle,
            switched: false,
            first: None,
            last: None,
        };
        let rec = run::run(&kernel::Real, &cfg, &|| None, &mut watch).expect("a task-clock run");
        let requested: u64 = rec.workers.iter().map(|w| w.moves_requested).sum();
        let kernel: Option<u64> = rec.workers.iter().map(|w| w.kernel_migrations).sum();
        let (Some(a), Some(b)) = (watch.first, watch.last) else {
            return (0.0, 0.0, false);
        };
        let secs = (b.0 - a.0).max(1) as f64 / 1e9;
        (
            (b.1 - a.1) as f64 / secs,
            (b.2 - a.2) as f64 / secs,
            kernel.is_none_or(|k| k == requested),
        )
    }

    use clap::Parser as _;

    pub fn run() {
        let cpus = cpu_pair();
        println!("diagnosis: bare loop from this thread, {WINDOW:?} per line, 3 rounds");
        println!(
            "  {:<44} {:>10} {:>18} {:>16}",
            "setup", "moves/s", "runqueue wait/move", "worker beats/s"
        );
        let me = kernel::gettid();
        for _ in 0..3 {
            let w0 = Spinner::start("diag-w0", || {});
            let w1 = Spinner::start("diag-w1", || {});
            let line = |label: &str, r: (f64, f64, f64)| {
                println!(
                    "  {label:<44} {:>10.0} {:>15.1} us {:>14.2} M",
                    r.0, r.1, r.2
                )
            };
            line("1 worker", bare(&[&w0], cpus));
            line("2 workers", bare(&[&w0, &w1], cpus));
            if set_policy(me, libc::SCHED_FIFO, 1) {
                line("2 workers, migrator SCHED_FIFO", bare(&[&w0, &w1], cpus));
                set_policy(me, libc::SCHED_OTHER, 0);
            } else {
                println!("  2 workers, migrator SCHED_FIFO: not permitted here");
            }
            let idle = [&w0, &w1]
                .iter()
                .all(|w| set_policy(w.tid, libc::SCHED_IDLE, 0));
            if idle {
                line("2 workers SCHED_IDLE", bare(&[&w0, &w1], cpus));
            }
        }
        println!(
            "diagnosis: full runs (task-clock, ping-pong back to back, 2 s; rates from 0.25 s on)"
        );
        for _ in 0..3 {
            for (workers, idle) in [(1, false), (2, false), (2, true)] {
                let (moves, signals, matches) = full(workers, idle);
                println!(
                    "  {workers} worker(s){}: {moves:>8.0} moves/s, {signals:>6.0} signals/s{}",
                    if idle { ", SCHED_IDLE (prototype)" } else { "" },
                    if matches {
                        ""
                    } else {
                        "; moves requested != kernel count"
                    }
                );
            }
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = bench
}

criterion_main!(benches);
