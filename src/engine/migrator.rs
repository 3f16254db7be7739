/*!
The migrator: moves workers between CPUs as fast as asked.

The lost-overflow bug needs an overflow to be pending while the kernel
de-schedules or migrates the event, so the migrator's job is to make that
happen often: sched_setaffinity on each worker's tid (core_affinity can only
pin the calling thread), back to back by default. The kernel migrates a
running thread synchronously, so the loop runs at the kernel's own rate.
Every successful move is timestamped for the anomaly lines ("14 us after
migration"); moves are counted as requested, the kernel's own count is read
per worker at the end.
*/

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::domain::MigrateMode;
use crate::engine::kernel::{Kernel, Real};
use crate::engine::worker::WorkerControl;

/// How long the migrator sleeps when no worker can be moved.
const IDLE_POLL: Duration = Duration::from_micros(200);
/// How long it sleeps when every worker it serves was waiting (moving
/// running workers only): a few tens of microseconds lets a requeued
/// worker run again without leaving the CPUs unstressed for long.
const WAIT_POLL: Duration = Duration::from_micros(20);

/// Where each worker goes next: a pure function of mode, CPU set and state.
#[derive(Clone)]
pub struct Plan {
    mode: MigrateMode,
    cpus: Vec<usize>,
    /// Index into `cpus` of each worker's current CPU.
    position: Vec<usize>,
    /// For ping-pong: each worker's two CPUs (indices into `cpus`).
    pairs: Vec<(usize, usize)>,
    rng: fastrand::Rng,
}

impl Plan {
    pub fn new(mode: MigrateMode, cpus: &[usize], workers: usize, seed: u64) -> Plan {
        let n = cpus.len();
        Plan {
            mode,
            cpus: cpus.to_vec(),
            position: (0..workers).map(|w| w % n).collect(),
            pairs: (0..workers).map(|w| (w % n, (w + 1) % n)).collect(),
            rng: fastrand::Rng::with_seed(seed),
        }
    }

    /// The same plan for the migrator numbered `m`: each draws its own
    /// random sequence from the run's seed, so a seed replays every one.
    pub fn for_migrator(&self, seed: u64, m: usize) -> Plan {
        Plan {
            rng: fastrand::Rng::with_seed(seed.wrapping_add(m as u64)),
            ..self.clone()
        }
    }

    /// The CPU a worker starts on.
    pub fn first_cpu(&self, worker: usize) -> usize {
        self.cpus[self.position[worker]]
    }

    /// Advances `worker` and returns its next CPU, or None if it stays put.
    pub fn next_cpu(&mut self, worker: usize) -> Option<usize> {
        let n = self.cpus.len();
        let pos = self.position[worker];
        let next = match self.mode {
            MigrateMode::None => return None,
            MigrateMode::PingPong => {
                let (a, b) = self.pairs[worker];
                if pos == a { b } else { a }
            }
            MigrateMode::RoundRobin => (pos + 1) % n,
            MigrateMode::Random => {
                // Any CPU but the current one, uniformly.
                let r = self.rng.usize(0..n - 1);
                if r >= pos { r + 1 } else { r }
            }
        };
        self.position[worker] = next;
        Some(self.cpus[next])
    }
}

/// Which workers a migrator moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Moves {
    /// Pause after each round (back to back when zero).
    pub interval: Duration,
    /// Move only a worker that ran user code since this migrator last
    /// looked at it (its heartbeat moved on). A waiting worker is only
    /// requeued by a move, which stops nothing; with more workers than
    /// CPUs about half of all workers wait at any time.
    pub running_only: bool,
}

/// The thread body of one migrator: rounds of one move per worker of
/// `served` (indices into `workers`) until `stop`.
pub fn run(
    plan: Plan,
    workers: Vec<Arc<WorkerControl>>,
    served: Vec<usize>,
    moves: Moves,
    stop: Arc<AtomicBool>,
) {
    run_on(&Real, plan, workers, served, moves, stop)
}

/// `run` on any kernel.
pub fn run_on<K: Kernel>(
    kernel: &K,
    mut plan: Plan,
    workers: Vec<Arc<WorkerControl>>,
    served: Vec<usize>,
    moves: Moves,
    stop: Arc<AtomicBool>,
) {
    if plan.mode == MigrateMode::None {
        return;
    }
    // Heartbeats as this migrator last saw them.
    let mut seen: Vec<u64> = vec![0; workers.len()];
    while !stop.load(Ordering::Relaxed) {
        let mut attempted = 0;
        let mut waiting = 0;
        for &w in &served {
            let shared = &workers[w];
            // A worker that has not spun yet is parked at the start barrier
            // with its event disabled: moving it exercises nothing and would
            // count moves the kernel's own count (taken after the barrier)
            // never sees.
            let heartbeat = shared.heartbeat.load(Ordering::Relaxed);
            if shared.stop.load(Ordering::Relaxed) || heartbeat == 0 {
                continue;
            }
            if moves.running_only && std::mem::replace(&mut seen[w], heartbeat) == heartbeat {
                waiting += 1;
                continue;
            }
            let Some(cpu) = plan.next_cpu(w) else {
                continue;
            };
            attempted += 1;
            shared.moves_requested.fetch_add(1, Ordering::Relaxed);
            let asked = kernel.now_ns();
            match kernel.move_thread(shared.tid.load(Ordering::Relaxed), cpu) {
                Ok(()) => {
                    shared.moves.push([asked, kernel.now_ns(), cpu as u64]);
                }
                Err(_) => {
                    shared.moves_failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        if attempted == 0 && waiting == 0 {
            // Nobody to move yet (workers at the start barrier) or any more:
            // spinning here would steal a CPU from the workers, which on a
            // 2-vCPU guest is half the machine.
            kernel.sleep(IDLE_POLL, &stop);
        } else if attempted == 0 {
            // Every worker waited since the last look: let them run.
            kernel.sleep(WAIT_POLL, &stop);
        } else {
            // Back to back when zero.
            kernel.sleep(moves.interval, &stop);
        }
    }
}

/// Which workers each of `migrators` migrators serves: worker w goes to
/// migrator w mod `migrators`, so each serves workers spread over the CPUs.
pub fn share(workers: usize, migrators: usize) -> Vec<Vec<usize>> {
    let migrators = migrators.clamp(1, workers.max(1));
    (0..migrators)
        .map(|m| (m..workers).step_by(migrators).collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::kernel;

    #[test]
    fn ping_pong_bounces_each_worker_between_two_cpus() {
        let mut plan = Plan::new(MigrateMode::PingPong, &[2, 5, 7], 3, 1);
        assert_eq!((plan.first_cpu(0), plan.first_cpu(2)), (2, 7));
        let w0: Vec<_> = (0..4).map(|_| plan.next_cpu(0).unwrap()).collect();
        assert_eq!(w0, vec![5, 2, 5, 2]);
        let w2: Vec<_> = (0..3).map(|_| plan.next_cpu(2).unwrap()).collect();
        assert_eq!(w2, vec![2, 7, 2]);
    }

    #[test]
    fn round_robin_walks_the_set() {
        let mut plan = Plan::new(MigrateMode::RoundRobin, &[0, 1, 2], 2, 1);
        let w1: Vec<_> = (0..4).map(|_| plan.next_cpu(1).unwrap()).collect();
        assert_eq!(w1, vec![2, 0, 1, 2]);
    }

    #[test]
    fn random_never_stays_and_is_replayable() {
        let mut a = Plan::new(MigrateMode::Random, &[0, 1, 2, 3], 1, 42);
        let mut b = Plan::new(MigrateMode::Random, &[0, 1, 2, 3], 1, 42);
        let mut cur = a.first_cpu(0);
        for _ in 0..1000 {
            let next = a.next_cpu(0).unwrap();
            assert_ne!(next, cur);
            assert_eq!(b.next_cpu(0), Some(next));
            cur = next;
        }
    }

    /// One migrator ping-pongs two workers on the first two of `cpus`,
    /// back to back, until worker 0's tenth move: a count, not a clock.
    fn migrate_until_worker_0_moved_ten_times(
        workers: &[Arc<WorkerControl>],
        cpus: &[usize],
        running_only: bool,
    ) {
        let stop = Arc::new(AtomicBool::new(false));
        let stopper = {
            let (w0, stop) = (Arc::clone(&workers[0]), Arc::clone(&stop));
            std::thread::spawn(move || {
                while w0.moves_requested.load(Ordering::Relaxed) < 10 {
                    std::thread::yield_now();
                }
                stop.store(true, Ordering::Relaxed);
            })
        };
        let plan = Plan::new(MigrateMode::PingPong, &cpus[..2], 2, 1);
        let moves = Moves {
            interval: Duration::ZERO,
            running_only,
        };
        run(plan, workers.to_vec(), vec![0, 1], moves, stop);
        stopper.join().unwrap();
    }

    #[test]
    fn workers_are_moved_only_once_they_run() {
        let cpus = kernel::allowed_cpus().unwrap();
        if cpus.len() < 2 {
            eprintln!("skipped: moving threads needs 2 CPUs");
            return;
        }
        // Two real threads, parked: worker 0 has a heartbeat (it started
        // spinning), worker 1 has none yet (still at the start barrier).
        let release = Arc::new(std::sync::Barrier::new(3));
        let (tx, rx) = std::sync::mpsc::channel();
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (tx, release) = (tx.clone(), Arc::clone(&release));
                std::thread::spawn(move || {
                    tx.send(kernel::gettid()).unwrap();
                    release.wait();
                })
            })
            .collect();
        let workers: Vec<Arc<WorkerControl>> = (0..2)
            .map(|i| {
                let w = Arc::new(WorkerControl::new(i));
                w.tid.store(rx.recv().unwrap(), Ordering::Relaxed);
                w
            })
            .collect();
        workers[0].heartbeat.store(1, Ordering::Relaxed);
        migrate_until_worker_0_moved_ten_times(&workers, &cpus, false);
        release.wait();
        for t in threads {
            t.join().unwrap();
        }
        assert!(workers[0].moves_requested.load(Ordering::Relaxed) >= 10);
        assert_eq!(workers[0].moves_failed.load(Ordering::Relaxed), 0);
        assert_eq!(workers[1].moves_requested.load(Ordering::Relaxed), 0);
        assert_eq!(workers[1].moves.pop(), None);
    }

    #[test]
    fn running_only_skips_a_worker_that_did_not_run() {
        let cpus = kernel::allowed_cpus().unwrap();
        if cpus.len() < 2 {
            eprintln!("skipped: moving threads needs 2 CPUs");
            return;
        }
        // Worker 0 spins (its heartbeat moves on), worker 1 is parked with
        // a heartbeat that never changes: a thread that waits.
        let release = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let workers: Vec<Arc<WorkerControl>> =
            (0..2).map(|i| Arc::new(WorkerControl::new(i))).collect();
        let threads: Vec<_> = (0..2)
            .map(|i| {
                let (tx, release, me) = (tx.clone(), Arc::clone(&release), Arc::clone(&workers[i]));
                std::thread::spawn(move || {
                    tx.send((i, kernel::gettid())).unwrap();
                    me.heartbeat.store(1, Ordering::Relaxed);
                    while !release.load(Ordering::Relaxed) {
                        if i == 0 {
                            me.heartbeat.fetch_add(1, Ordering::Relaxed);
                        }
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        for _ in 0..2 {
            let (i, tid) = rx.recv().unwrap();
            workers[i].tid.store(tid, Ordering::Relaxed);
        }
        while workers
            .iter()
            .any(|w| w.heartbeat.load(Ordering::Relaxed) == 0)
        {
            std::thread::yield_now();
        }
        migrate_until_worker_0_moved_ten_times(&workers, &cpus, true);
        release.store(true, Ordering::Relaxed);
        for t in threads {
            t.join().unwrap();
        }
        assert!(workers[0].moves_requested.load(Ordering::Relaxed) >= 10);
        // Its one heartbeat since the migrator's first look, never again.
        assert_eq!(workers[1].moves_requested.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn migrators_share_the_workers_once_each() {
        assert_eq!(share(5, 2), vec![vec![0, 2, 4], vec![1, 3]]);
        assert_eq!(share(2, 4), vec![vec![0], vec![1]]);
        assert_eq!(share(3, 0), vec![vec![0, 1, 2]]);
    }

    #[test]
    fn none_never_moves() {
        let mut plan = Plan::new(MigrateMode::None, &[0, 1], 2, 1);
        assert_eq!(plan.next_cpu(1), None);
        assert_eq!(plan.first_cpu(1), 1);
    }
}
