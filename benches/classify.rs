/*!
Judge and ring: overflows judged per second, and the cost of a push and a
pop on the handler's ring, each against a floor measured in the same run:

- judgement: a whole `StreamJudge` (interrupts replayed on the driver's
  grid, deliveries matched, histograms, totals) fed one overflow at a time as
  the controller feeds it (a stop, the sample, the signal), against the floor
  of reading the same deltas (a sum);
- the ring: `Ring<4>` push + pop (the signal record's four words) against
  three relaxed atomic stores and loads into a preallocated slot, the
  memory traffic without the single-producer protocol. (A two-thread
  figure would measure the scheduler here: on 2 busy CPUs producer and
  consumer seldom run at once.)

The headroom line compares the judge's rate with the most signals the
kernel would ever send: perf_event_max_sample_rate per CPU, times the CPUs.
*/

mod common;

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

use common::{Tally, machine_line, ratio_line};
use pmustress::domain::{DriverRules, RearmMode};
use pmustress::engine::ring::Ring;
use pmustress::judge::{Delivery, JudgeConfig, Observation, StreamJudge};

const PERIOD: u64 = 100_000;
const SKID: u64 = 2_000;

/// Interrupt latencies like a run's: mostly within the skid, some late.
fn deltas(n: usize) -> Vec<u64> {
    let mut rng = fastrand_like(7);
    (0..n)
        .map(|i| {
            // Within +/- skid of the period.
            let jitter = (rng() % (2 * SKID + 1)) as i64 - SKID as i64;
            match i % 100 {
                0 => PERIOD / 3,
                _ => jitter.unsigned_abs(),
            }
        })
        .collect()
}

/// A tiny xorshift, so the bench needs no RNG dependency of its own.
fn fastrand_like(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// The judge as a run sets it: both drivers' rules followed
/// (`--driver-rules auto`), no NMI to take an overflow before its stop.
fn judge() -> StreamJudge {
    StreamJudge::new(
        0,
        JudgeConfig {
            driver_rules: DriverRules::Auto,
            irq_masked_at_stops: true,
            ..JudgeConfig::new(PERIOD, SKID, SKID, RearmMode::Free)
        },
    )
}

/// What the judge hands back, kept across overflows as the controller
/// keeps them (cleared, never freed).
type Out = (
    Vec<pmustress::judge::ClosedWindow>,
    Vec<pmustress::judge::Anomaly>,
);

/// One overflow as the controller feeds it: the stop at `stops_at`, the
/// interrupt's sample at `count`, then its signal.
fn overflow(j: &mut StreamJudge, out: &mut Out, time: u64, stops_at: u64, count: u64) {
    let (windows, anomalies) = out;
    for o in [
        Observation::Stop {
            time_ns: time - 3,
            cpu: 0,
            count: Some(stops_at),
        },
        Observation::Sample {
            time_ns: time - 1,
            cpu: 0,
            count,
        },
        Observation::Signal {
            time_ns: time,
            cpu: (time & 1) as u32,
            value: count + 10,
            si_code: 1,
            delivery: Delivery::Overflow,
        },
    ] {
        j.observe(&o, windows, anomalies);
    }
    windows.clear();
    anomalies.clear();
}

fn classifier(c: &mut Criterion) {
    println!("{}", machine_line());
    const N: usize = 4096;
    let d = deltas(N);
    let (floor, whole) = (Tally::default(), Tally::default());
    let mut group = c.benchmark_group("classify");
    group.throughput(Throughput::Elements(N as u64));
    group.bench_function("floor_read_deltas", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                let mut sum = 0u64;
                for &x in black_box(&d) {
                    sum = sum.wrapping_add(x);
                }
                black_box(sum);
            }
            let e = start.elapsed();
            floor.record(iters * N as u64, e);
            e
        })
    });
    // One long stream: each overflow is a stop a quarter period before
    // it, its sample, then its signal, as the controller feeds them.
    let mut j = judge();
    let (mut due, mut time) = (0u64, 0u64);
    let mut out: Out = (Vec::new(), Vec::new());
    group.bench_function("judge_stop_sample_signal", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                for &latency in black_box(&d) {
                    due += PERIOD;
                    time += 1000;
                    let stops_at = due - PERIOD / 4;
                    overflow(&mut j, &mut out, time, stops_at, due + latency);
                }
            }
            let e = start.elapsed();
            whole.record(iters * N as u64, e);
            e
        })
    });
    // The same with every 16th overflow lost at a stop just past its due
    // point (the next interrupt a period on, late by its own latency):
    // each loss splits the explanations by driver until a sample refutes
    // the delivering one.
    let mut j = judge();
    let (mut due, mut time) = (0u64, 0u64);
    let lossy = Tally::default();
    group.bench_function("judge_with_a_loss_every_16", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                for (k, &latency) in black_box(&d).iter().enumerate() {
                    due += PERIOD;
                    time += 1000;
                    let lost = k % 16 == 15;
                    let stops_at = if lost { due + 10 } else { due - PERIOD / 4 };
                    if lost {
                        due += PERIOD;
                    }
                    overflow(&mut j, &mut out, time, stops_at, due + latency);
                }
            }
            let e = start.elapsed();
            lossy.record(iters * N as u64, e);
            e
        })
    });
    group.finish();
    println!(
        "{}",
        ratio_line(
            "judge, a loss every 16 overflows",
            "overflows/s",
            lossy.per_second(),
            whole.per_second(),
            "ratio to the lossless stream"
        )
    );
    println!(
        "{}",
        ratio_line(
            "judge (stop + sample + signal)",
            "overflows/s",
            whole.per_second(),
            floor.per_second(),
            "ratio to reading the deltas"
        )
    );
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    if let Some(max) = pmustress::engine::kernel::read_max_sample_rate() {
        println!(
            "headroom: the judge takes {:.0} overflows/s on one thread = {:.1}x the kernel's ceiling here ({max}/s per CPU x {cpus} CPUs)",
            whole.per_second(),
            whole.per_second() / (max as f64 * cpus)
        );
    }
}

fn ring(c: &mut Criterion) {
    let (floor, ours) = (Tally::default(), Tally::default());
    let mut group = c.benchmark_group("ring");
    group.throughput(Throughput::Elements(1));
    let slots: Vec<[AtomicU64; 4]> = (0..16_384)
        .map(|_| std::array::from_fn(|_| AtomicU64::new(0)))
        .collect();
    group.bench_function("floor_store_load_4_words", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for i in 0..iters {
                let slot = &slots[i as usize & (slots.len() - 1)];
                for (j, cell) in slot.iter().enumerate() {
                    cell.store(black_box(i + j as u64), Ordering::Relaxed);
                }
                black_box([
                    slot[0].load(Ordering::Relaxed),
                    slot[1].load(Ordering::Relaxed),
                    slot[2].load(Ordering::Relaxed),
                    slot[3].load(Ordering::Relaxed),
                ]);
            }
            let e = start.elapsed();
            floor.record(iters, e);
            e
        })
    });
    let r = Ring::<4>::with_capacity(16_384);
    group.bench_function("ring_push_pop", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for i in 0..iters {
                r.push(black_box([i, i + 1, i + 2, i + 3]));
                black_box(r.pop());
            }
            let e = start.elapsed();
            ours.record(iters, e);
            e
        })
    });
    group.finish();
    let per = |t: &Tally| 1e9 / t.per_second();
    println!(
        "ring push + pop: pmustress {:.1} ns / floor {:.1} ns = {:.2}x the floor's time",
        per(&ours),
        per(&floor),
        per(&ours) / per(&floor)
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = classifier, ring
}
criterion_main!(benches);
