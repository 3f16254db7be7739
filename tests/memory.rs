//! Memory stays flat however long a run: what the controller thread keeps
//! alive (the judge, the results directory's writers) is the same after a
//! long stream as after a short one, hold-ups of the controller included.
//! A counting allocator measures it, per thread: exact, no timing.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::Path;

use clap::Parser;
use pmustress::cli::{Cli, Command};
use pmustress::config::RunConfig;
use pmustress::config::event::Platform;
use pmustress::domain::RearmMode;
use pmustress::fingerprint::Fingerprint;
use pmustress::judge::stream_judge::StreamJudge;
use pmustress::judge::{ClosedWindow, JudgeConfig};
use pmustress::records::{Delivery, Observation};
use pmustress::results::writer::{RAW_MEMBER_BYTES, ResultsDir};

/// The system allocator, counting the bytes each thread holds: what a
/// thread allocated less what it freed. A test that allocates and frees on
/// its own thread reads its own live bytes, whatever the other tests do.
struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
}

fn count(bytes: isize) {
    // try_with: a thread being torn down has no counter left; it is not
    // one of ours.
    let _ = LIVE.try_with(|l| l.set(l.get() + bytes));
}

// SAFETY: every call is passed on to the system allocator unchanged; the
// count is a thread-local Cell without a destructor (no allocation, no
// reentrancy).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Bytes this thread holds.
fn live() -> isize {
    LIVE.with(Cell::get)
}

const PERIOD: u64 = 100_000;

/// A deterministic jitter in 0..n (an LCG: the same stream every run).
struct Jitter(u64);

impl Jitter {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

/// One software-clock overflow as a worker's stream has it: the sample,
/// its signal's read a little later, and two moves by the migrator.
fn overflow(k: u64, j: &mut Jitter, out: &mut Vec<Observation>) {
    let time_ns = k * PERIOD;
    let cpu = (k % 2) as u32;
    let count = k * PERIOD + j.next(PERIOD / 10);
    out.push(Observation::Sample {
        time_ns,
        cpu,
        count,
    });
    out.push(Observation::Move {
        time_ns: time_ns + 10,
        cpu: 1 - cpu,
        requested_ns: Some(time_ns + 5),
    });
    out.push(Observation::Signal {
        time_ns: time_ns + 20_000,
        cpu,
        value: count + j.next(PERIOD / 5),
        si_code: 1,
        delivery: Delivery::Overflow,
    });
    out.push(Observation::Move {
        time_ns: time_ns + 30_000,
        cpu,
        requested_ns: Some(time_ns + 29_990),
    });
}

#[test]
fn judging_a_long_stream_keeps_the_same_memory_as_a_short_one() {
    let cfg = JudgeConfig {
        software: true,
        ..JudgeConfig::new(PERIOD, PERIOD / 4, PERIOD / 4, RearmMode::Free)
    };
    let mut judge = StreamJudge::new(0, cfg);
    let (mut windows, mut anomalies) = (Vec::new(), Vec::new());
    let mut jitter = Jitter(1);
    let mut stream = Vec::with_capacity(4);
    let mut judged = 0;
    let mut judge_up_to = |n: u64, judge: &mut StreamJudge| {
        while judged < n {
            judged += 1;
            stream.clear();
            overflow(judged, &mut jitter, &mut stream);
            for o in &stream {
                judge.observe(o, &mut windows, &mut anomalies);
            }
            windows.clear();
            anomalies.clear();
        }
    };
    // Warm-up: every buffer and histogram sized for this stream.
    judge_up_to(20_000, &mut judge);
    let warm = live();
    // Ten times as long again: one byte kept per overflow would be 200 kB.
    judge_up_to(220_000, &mut judge);
    assert_eq!(live() - warm, 0, "bytes kept after 200,000 more overflows");
    assert_eq!(judge.interrupts().overflows, 220_000);
}

fn fixture_fingerprint() -> Fingerprint {
    Fingerprint::collect(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/fingerprint/graviton2-c6g-6.1-disabled"),
    )
}

/// The results directory's writers (raw.csv.gz, anomalies, the histogram
/// logs) hold the same memory after a hold-up of the controller as before:
/// rows of several seconds arriving between two ticks used to grow the
/// raw stream's buffer to all of them, and it kept that size for the rest
/// of the run.
#[test]
fn the_results_directory_holds_the_same_memory_after_a_hold_up() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let argv = [
        "pmustress",
        "run",
        "--event",
        "task-clock",
        "--workers",
        "1",
        "--cpus",
        "0,1",
        "--out",
        out.to_str().unwrap(),
    ];
    let Command::Run(args) = Cli::try_parse_from(argv).unwrap().command else {
        unreachable!("a run command")
    };
    let machine = fixture_fingerprint();
    let platform = Platform::from_fingerprint(&machine);
    let mut cfg = RunConfig::from_args(&args, &[0, 1], &platform).unwrap();
    let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    let mut files = ResultsDir::create(&mut cfg, &argv, &machine).unwrap();

    let mut jitter = Jitter(7);
    let mut stream = Vec::with_capacity(4);
    let mut k = 0;
    // Overflows of one second at this period, and a second of them.
    let per_second = 1_000_000_000 / PERIOD;
    let mut second = |files: &mut ResultsDir, seconds: u64, tick: bool| {
        for _ in 0..seconds * per_second {
            k += 1;
            stream.clear();
            overflow(k, &mut jitter, &mut stream);
            for o in &stream {
                files.record_observation(0, o);
            }
            files.record_window(&ClosedWindow {
                worker: 0,
                signal_seq: k,
                time_ns: k * PERIOD,
                delta: PERIOD + jitter.next(PERIOD / 10),
                cpu: (k % 2) as u32,
            });
        }
        if tick {
            files.tick(k * PERIOD);
        }
    };
    // A second's rows are more than a member's worth, so the buffer is
    // full before any hold-up: what a hold-up adds is all growth.
    let bytes_per_second = per_second * 4 * 30;
    assert!(bytes_per_second as usize > RAW_MEMBER_BYTES);
    files.tick(0);
    for _ in 0..5 {
        second(&mut files, 1, true);
    }
    let warm = live();
    // The controller held up for 8 s: all of it comes between two ticks.
    second(&mut files, 8, true);
    for _ in 0..5 {
        second(&mut files, 1, true);
    }
    assert_eq!(live() - warm, 0, "bytes kept after an 8 s hold-up");
    assert!(files.failure().is_none(), "{:?}", files.failure());
}
