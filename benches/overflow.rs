/*!
Overflow path: signals per second and CPU cost per overflow for one worker
on task-clock at 100 us and 1 ms, pmustress against a bare handler (the
floor: read() of the counter and an atomic increment, nothing else) in the
same run. Two parts:

1. CPU cost per overflow (criterion): the calling thread queues the overflow
   signal to itself with rt_tgsigqueueinfo, si_fd set as the kernel sets it,
   so each iteration is one whole delivery (kernel entry, signal frame,
   handler, sigreturn) into pmustress's `signal::on_overflow` or into the
   bare handler. Synchronous, so the figure does not depend on a timer or on
   how much CPU the machine lends the worker (thread CPU clocks in a busy VM
   do not tell: they include stolen time).
2. Signals per second (timer-driven, interleaved rounds on one CPU): the
   bare handler on a spinning thread against `run::run` end to end, as
   `pmustress run --event task-clock --workers 1 --migrate none` does it.
   The rate is counted per second of the worker's own task-clock (the final
   count), so the machine's load decides neither side; per wall second too.
   Target: >= 0.95 of bare, and 0 false anomalies (any kind a software clock
   cannot produce: dropped interrupts, tool errors, lost witness, wrong
   thread, ring overflows, stray signals).

PMUSTRESS_BENCH_SECS sets each timed leg (default 1), PMUSTRESS_BENCH_ROUNDS
the rounds (default 3).
*/

mod common;

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use clap::Parser as _;
use criterion::{Criterion, Throughput};
use perf_event_open_sys::bindings as sys;

use common::{machine_line, median, spin_until};
use pmustress::config::RunConfig;
use pmustress::config::event::Platform;
use pmustress::engine::kernel::{self, EventAttr, PerfEvent};
use pmustress::engine::run;
use pmustress::engine::signal::{self, Slot};
use pmustress::judge::AnomalyKind;

/// Kinds a software clock produces on its own: the hrtimer skips periods
/// when it fires late, and the kernel merges signals now and then.
const SOFTWARE_KINDS: [AnomalyKind; 3] = [
    AnomalyKind::SoftwareTimerSkip,
    AnomalyKind::LateSignal,
    AnomalyKind::CoalescedSignal,
];

fn task_clock(period: u64) -> EventAttr {
    EventAttr {
        type_: sys::PERF_TYPE_SOFTWARE,
        config: sys::PERF_COUNT_SW_TASK_CLOCK as u64,
        sample_period: period,
        // pmustress's default (no --include-kernel).
        exclude_kernel: true,
        sample_records: false,
        context_switch: false,
    }
}

// --- the floor: a bare handler ---------------------------------------------

static BARE_FD: AtomicI32 = AtomicI32::new(-1);
static BARE_SIGNALS: AtomicU64 = AtomicU64::new(0);

/// read() of the counter and a count: the least an overflow handler does.
unsafe extern "C" fn bare_handler(_: libc::c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {
    let fd = BARE_FD.load(Ordering::Relaxed);
    if fd < 0 {
        return;
    }
    // SAFETY: the bench stores the event's fd before it can overflow and
    // closes it only after blocking this signal.
    let event = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    if let Ok(Some(_)) = kernel::read_count_fd(event) {
        BARE_SIGNALS.fetch_add(1, Ordering::Relaxed);
    }
}

/// A realtime signal no pmustress handler uses.
fn bare_signal() -> libc::c_int {
    signal::overflow_signal() + 2
}

// --- part 1: one delivery, synchronously -------------------------------------

/// A siginfo_t for an F_SETSIG overflow signal, padded to the kernel's 128
/// bytes.
#[repr(C)]
struct PaddedSigInfo {
    info: signal::SigPollInfo,
    _rest: [u8; 128 - std::mem::size_of::<signal::SigPollInfo>()],
}

/// Queues `signo` with si_fd = `fd`, si_code POLL_IN to the calling thread;
/// the kernel delivers it on the way out of this syscall.
fn queue_to_self(signo: libc::c_int, fd: libc::c_int) {
    let info = PaddedSigInfo {
        info: signal::SigPollInfo::poll_in(signo, fd),
        _rest: [0; 128 - std::mem::size_of::<signal::SigPollInfo>()],
    };
    // SAFETY: rt_tgsigqueueinfo reads one 128-byte siginfo that lives
    // across the call; sending to our own thread needs no privilege.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_rt_tgsigqueueinfo,
            libc::getpid(),
            kernel::gettid(),
            signo,
            &info as *const PaddedSigInfo,
        )
    };
    assert_eq!(
        ret,
        0,
        "rt_tgsigqueueinfo: {}",
        std::io::Error::last_os_error()
    );
}

fn handler_cost(c: &mut Criterion) -> (f64, f64) {
    // A counting event (no overflow of its own) for the handlers to read.
    let event = PerfEvent::open_on_self(&task_clock(0)).expect("a task-clock counter");
    event.enable().expect("enable");
    let fd = event.raw_fd();
    BARE_FD.store(fd, Ordering::Release);
    let slot = Arc::new(Slot::new(fd, kernel::gettid(), 0, 1 << 16));
    let registration = signal::register(0, slot.clone()).expect("registering the slot");
    let mine = [bare_signal(), signal::overflow_signal()];
    kernel::set_signal_mask(&mine, false).expect("unblocking");

    let (mut bare, mut ours) = (vec![], vec![]);
    let mut group = c.benchmark_group("overflow_handler");
    group.throughput(Throughput::Elements(1));
    group.bench_function("bare_read_and_count", |b| {
        b.iter_custom(|n| {
            let before = BARE_SIGNALS.load(Ordering::Relaxed);
            let start = Instant::now();
            for _ in 0..n {
                queue_to_self(bare_signal(), fd);
            }
            let d = start.elapsed();
            assert_eq!(BARE_SIGNALS.load(Ordering::Relaxed) - before, n);
            bare.push(d.as_nanos() as f64 / n as f64);
            d
        })
    });
    group.bench_function("pmustress_on_overflow", |b| {
        b.iter_custom(|n| {
            let mut d = Duration::ZERO;
            // The ring holds 65,536 records: drain it between chunks,
            // outside the timed part (the controller's job in a run).
            let mut left = n;
            while left > 0 {
                let chunk = left.min(1 << 15);
                let start = Instant::now();
                for _ in 0..chunk {
                    queue_to_self(signal::overflow_signal(), fd);
                }
                d += start.elapsed();
                let mut popped = 0;
                while slot.pop().is_some() {
                    popped += 1;
                }
                assert_eq!(popped, chunk);
                left -= chunk;
            }
            ours.push(d.as_nanos() as f64 / n as f64);
            d
        })
    });
    group.finish();

    // Interleaved chunks timed on this thread's CPU clock, so neither the
    // load changing over the run nor being preempted biases the ratio.
    const CHUNK: u64 = 1000;
    let (mut bare_ns, mut ours_ns, mut ratios) = (vec![], vec![], vec![]);
    for _ in 0..200 {
        let t0 = common::thread_cpu_ns();
        for _ in 0..CHUNK {
            queue_to_self(bare_signal(), fd);
        }
        let t1 = common::thread_cpu_ns();
        for _ in 0..CHUNK {
            queue_to_self(signal::overflow_signal(), fd);
        }
        let t2 = common::thread_cpu_ns();
        while slot.pop().is_some() {}
        let (b, o) = (
            (t1 - t0) as f64 / CHUNK as f64,
            (t2 - t1) as f64 / CHUNK as f64,
        );
        bare_ns.push(b);
        ours_ns.push(o);
        ratios.push(o / b);
    }
    kernel::set_signal_mask(&mine, true).expect("blocking");
    assert_eq!(slot.ring_overflowed(), 0);
    drop(registration);
    println!(
        "criterion samples: pmustress {:.2} us, bare {:.2} us per delivery (medians)",
        median(&ours) / 1e3,
        median(&bare) / 1e3
    );
    let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    println!(
        "interleaved, thread CPU time, 200 x {CHUNK} deliveries each: pmustress {:.2} us (min {:.2}), bare {:.2} us (min {:.2})",
        median(&ours_ns) / 1e3,
        min(&ours_ns) / 1e3,
        median(&bare_ns) / 1e3,
        min(&bare_ns) / 1e3
    );
    (median(&ours_ns), median(&bare_ns))
}

// --- part 2: the timer-driven rate ---------------------------------------------

/// What one leg measured.
#[derive(Default, Clone, Copy)]
struct Leg {
    signals: u64,
    wall_ns: u64,
    /// The counter at the end: the worker's task-clock ns in user mode.
    count_ns: u64,
    /// The controller's CPU time (the run leg).
    controller_ns: u64,
    false_anomalies: u64,
    software_anomalies: u64,
}

impl Leg {
    fn per_second(&self) -> f64 {
        self.signals as f64 * 1e9 / self.wall_ns.max(1) as f64
    }

    /// Signals per second of the worker's own counted time.
    fn per_task_second(&self) -> f64 {
        self.signals as f64 * 1e9 / self.count_ns.max(1) as f64
    }
}

/// The spin loop on `cpu` for `secs` with the event and the bare handler.
fn bare_leg(cpu: usize, period: u64, secs: Duration) -> Leg {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let thread = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            kernel::move_thread(0, cpu).expect("pinning the bare worker");
            let event = PerfEvent::open_on_self(&task_clock(period)).expect("task-clock");
            event
                .route_overflows_to(kernel::gettid(), bare_signal())
                .expect("fcntl");
            BARE_FD.store(event.raw_fd(), Ordering::Release);
            BARE_SIGNALS.store(0, Ordering::Release);
            kernel::set_signal_mask(&[bare_signal()], false).expect("unblocking");
            event.reset().expect("reset");
            event.enable().expect("enable");
            let t0 = kernel::monotonic_ns();
            tx.send(()).unwrap();
            spin_until(&stop, &AtomicU64::new(0), || {});
            event.disable().expect("disable");
            let count_ns = event.read_count().ok().flatten().unwrap_or(0);
            let wall_ns = kernel::monotonic_ns() - t0;
            kernel::set_signal_mask(&[bare_signal()], true).expect("blocking");
            Leg {
                signals: BARE_SIGNALS.load(Ordering::Acquire),
                wall_ns,
                count_ns,
                ..Leg::default()
            }
        })
    };
    rx.recv().unwrap();
    std::thread::sleep(secs);
    stop.store(true, Ordering::Release);
    thread.join().unwrap()
}

struct Quiet;
impl run::Observer for Quiet {
    fn anomaly(&mut self, _: &pmustress::judge::Anomaly) {}
    fn progress(&mut self, _: &run::Progress) {}
}

/// `run::run` with one worker on `cpu`, no migration.
fn run_leg(cpu: usize, period: u64, secs: Duration) -> Leg {
    let (period, cpu, duration) = (
        period.to_string(),
        cpu.to_string(),
        format!("{}ms", secs.as_millis()),
    );
    let argv = [
        "pmustress",
        "run",
        "--event",
        "task-clock",
        "--period",
        &period,
        "--workers",
        "1",
        "--cpus",
        &cpu,
        "--migrate",
        "none",
        "--duration",
        &duration,
    ];
    let args = match pmustress::cli::Cli::try_parse_from(argv).map(|c| c.command) {
        Ok(pmustress::cli::Command::Run(a)) => a,
        _ => unreachable!("a valid command line"),
    };
    let allowed = kernel::allowed_cpus().expect("sched_getaffinity");
    let cfg = RunConfig::from_args(&args, &allowed, &Platform::default()).expect("config");
    let c0 = common::thread_cpu_ns();
    let rec = run::run(&kernel::Real, &cfg, &|| None, &mut Quiet).expect("a task-clock run");
    let controller_ns = common::thread_cpu_ns() - c0;
    let w = &rec.workers[0];
    let (mut false_anomalies, mut software) = (0, 0);
    let v = &w.verdict;
    for (&kind, &n) in &v.anomalies {
        if SOFTWARE_KINDS.contains(&kind) {
            software += n;
        } else {
            false_anomalies += n;
        }
    }
    false_anomalies += v.deliveries.wrong_thread
        + v.deliveries.read_failures
        + v.interrupts.lost_records
        + w.signal_ring_overflows
        + rec.stray_signals.0
        + rec.stray_signals.1;
    Leg {
        signals: v.deliveries.signals,
        wall_ns: rec.elapsed_ns,
        count_ns: w.final_count.unwrap_or(0),
        controller_ns,
        false_anomalies,
        software_anomalies: software,
    }
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn signal_rates(cpu: usize) {
    let secs = Duration::from_secs(env_number("PMUSTRESS_BENCH_SECS", 1));
    let rounds = env_number("PMUSTRESS_BENCH_ROUNDS", 3).max(1) as usize;
    println!(
        "overflow path, timer-driven: task-clock, 1 worker on CPU {cpu}, {rounds} rounds of {secs:?} per leg"
    );
    for period in [100_000u64, 1_000_000] {
        let legs: Vec<[Leg; 2]> = (0..rounds)
            .map(|_| [bare_leg(cpu, period, secs), run_leg(cpu, period, secs)])
            .collect();
        // A round where either worker got too little CPU for 50 periods
        // says nothing about rates.
        let judged: Vec<&[Leg; 2]> = legs
            .iter()
            .filter(|l| l.iter().all(|x| x.count_ns >= 50 * period))
            .collect();
        let false_total: u64 = legs.iter().map(|l| l[1].false_anomalies).sum();
        let software: u64 = legs.iter().map(|l| l[1].software_anomalies).sum();
        let windows: u64 = legs.iter().map(|l| l[1].signals).sum();
        println!("period {} us:", period / 1000);
        if judged.is_empty() {
            println!("  no round gave both workers 50 periods of CPU: the machine is too busy");
        } else {
            let med = |f: &dyn Fn(&[Leg; 2]) -> f64| {
                median(&judged.iter().map(|l| f(l)).collect::<Vec<_>>())
            };
            let ratios: Vec<f64> = judged
                .iter()
                .map(|l| l[1].per_task_second() / l[0].per_task_second())
                .collect();
            let (lo, hi) = ratios.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &x| {
                (lo.min(x), hi.max(x))
            });
            println!(
                "  signals per second of worker time: bare {:.0}, pmustress run {:.0} (one per period: {:.0})",
                med(&|l| l[0].per_task_second()),
                med(&|l| l[1].per_task_second()),
                1e9 / period as f64
            );
            println!(
                "  ratio run/bare {:.3} (min {lo:.3}, max {hi:.3}, {} of {rounds} rounds judged; target >= 0.95)",
                median(&ratios),
                judged.len()
            );
            println!(
                "  signals per wall second (the worker's CPU share decides): bare {:.0}, run {:.0}",
                med(&|l| l[0].per_second()),
                med(&|l| l[1].per_second()),
            );
            println!(
                "  controller CPU per overflow (drain, parse, classify): {:.2} us",
                med(&|l| l[1].controller_ns as f64 / l[1].signals.max(1) as f64) / 1e3
            );
        }
        println!(
            "  false anomalies: {false_total} (target 0); software-clock anomalies: {software} of {windows} windows"
        );
    }
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` does not, and
    // then there is nothing to check here.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    println!("{}", machine_line());
    let cpu = kernel::allowed_cpus().expect("sched_getaffinity")[0];
    kernel::install_handler(bare_signal(), bare_handler, &[]).expect("sigaction");
    signal::install().expect("installing pmustress's handlers");

    let mut c = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    let (ours, bare) = handler_cost(&mut c);
    println!(
        "overflow handler, CPU per delivery (interleaved medians): pmustress {:.2} us / bare {:.2} us = {:.3}x the floor (+{:.2} us per overflow)",
        ours / 1e3,
        bare / 1e3,
        ours / bare,
        (ours - bare) / 1e3
    );
    signal_rates(cpu);
    c.final_summary();
}
