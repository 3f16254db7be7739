//! Helpers shared by the benches: a spinning thread, CPU clocks, the machine
//! line, and ratio reporting. Each bench includes this with `mod common;`
//! and uses only part of it.
#![allow(dead_code)]

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use pmustress::engine::kernel;

/// A thread that spins like a pmustress worker (a branchy loop and a
/// heartbeat) until stopped. `poll` runs once per heartbeat on the spinning
/// thread itself, so a bench can stop a loop without a third thread.
pub struct Spinner {
    pub tid: libc::pid_t,
    pub beats: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Spinner {
    pub fn start(name: &str, poll: impl Fn() + Send + 'static) -> Spinner {
        let stop = Arc::new(AtomicBool::new(false));
        let beats = Arc::new(AtomicU64::new(0));
        let tid = Arc::new(AtomicI32::new(0));
        let handle = {
            let (stop, beats, tid) = (Arc::clone(&stop), Arc::clone(&beats), Arc::clone(&tid));
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    tid.store(kernel::gettid(), Ordering::Release);
                    spin_until(&stop, &beats, poll);
                })
                .expect("spawning a spinner")
        };
        while tid.load(Ordering::Acquire) == 0 {
            std::thread::yield_now();
        }
        Spinner {
            tid: tid.load(Ordering::Acquire),
            beats,
            stop,
            handle: Some(handle),
        }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The worker's workload (`worker::spin` is private; this is the same loop).
pub fn spin_until(stop: &AtomicBool, beats: &AtomicU64, poll: impl Fn()) {
    let mut acc = 0u64;
    while !stop.load(Ordering::Relaxed) {
        for i in 0..1024u64 {
            if black_box(i) & 3 == 0 {
                acc = acc.wrapping_add(i);
            }
        }
        beats.fetch_add(1, Ordering::Relaxed);
        poll();
    }
    black_box(acc);
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own; both clocks used
    // here exist on every Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time of the calling thread.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time of the whole process (all threads).
pub fn process_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// CPU time (ns) of one thread of this process, from its schedstat.
pub fn task_cpu_ns(tid: libc::pid_t) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// `nproc`, CPU model, kernel and load: printed above every bench's figures.
pub fn machine_line() -> String {
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let load = std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    format!("machine: nproc {nproc}, {model}, kernel {kernel}, load average {load}")
}

/// Median of a non-empty slice.
pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Sleeps in short steps until `done()` or `limit`; returns whether done.
pub fn wait_for(limit: Duration, done: impl Fn() -> bool) -> bool {
    let start = std::time::Instant::now();
    while !done() {
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    true
}

/// (iterations, nanoseconds) of every timed call of one bench function, so
/// a ratio can be printed from the same run criterion measured.
#[derive(Default)]
pub struct Tally {
    samples: std::sync::Mutex<Vec<(u64, u64)>>,
}

impl Tally {
    pub fn record(&self, iters: u64, elapsed: Duration) {
        self.samples
            .lock()
            .unwrap()
            .push((iters, elapsed.as_nanos() as u64));
    }

    /// Median over the timed calls of iterations per second.
    pub fn per_second(&self) -> f64 {
        let samples = self.samples.lock().unwrap();
        let rates: Vec<f64> = samples
            .iter()
            .filter(|(_, ns)| *ns > 0)
            .map(|&(n, ns)| n as f64 * 1e9 / ns as f64)
            .collect();
        if rates.is_empty() {
            0.0
        } else {
            median(&rates)
        }
    }
}

/// One line: what, the two rates, their ratio and the target.
pub fn ratio_line(what: &str, unit: &str, ours: f64, floor: f64, target: &str) -> String {
    format!(
        "{what}: pmustress {ours:.0} {unit} / floor {floor:.0} {unit} = {:.3} ({target})",
        ours / floor
    )
}
