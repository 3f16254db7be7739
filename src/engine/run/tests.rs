//! The whole run loop on the scripted kernel (`testkit::fake_kernel`): workers,
//! migrator, handler records, ring drains, the merge, the watchdog and
//! every way a run stops, judged and summed up as run.json has it. The
//! fake's clock moves 5 ms per controller pass (`DRAIN_EVERY`) and its
//! scripts step every 1 ms, so every number below follows from the script.

use std::path::Path;
use std::sync::{Mutex, PoisonError};

use clap::Parser;

use super::*;
use crate::cli::{Cli, Command};
use crate::config::event::Platform;
use crate::fingerprint::Fingerprint;
use crate::judge::AnomalyKind;
use crate::results::schema::{RunResults, Verdict};
use crate::testkit::fake_kernel::{Call, FakeKernel, START_NS, Script, Signal, Step};
use crate::verdict::Warning;

const PERIOD: u64 = 100_000;
const MS: u64 = 1_000_000;

/// Reasons or warnings as run.json words them.
fn words<T: ToString>(all: &[T]) -> Vec<String> {
    all.iter().map(ToString::to_string).collect()
}

/// The verdict of a scripted run with nothing wrong: a few dozen
/// overflows and stops are too few to call a machine clean (299 of each
/// are needed), so it is inconclusive for those reasons, and those alone.
fn assert_clean_but_short(r: &RunResults) {
    assert_eq!(
        (r.verdict, r.exit_status),
        (Verdict::Inconclusive, 125),
        "{:?}",
        r.inconclusive_because
    );
    assert_eq!(words(&r.inconclusive_because), short_reasons(r));
}

/// "not enough overflows" and "not enough stops", with the run's numbers.
fn short_reasons(r: &RunResults) -> [String; 2] {
    [
        format!(
            "not enough overflows: {} measured, 299 needed to bound the dropped rate below 0.01 at 95% confidence; run longer",
            r.totals.accounted_overflows
        ),
        not_enough_stops(r),
    ]
}

fn not_enough_stops(r: &RunResults) -> String {
    format!(
        "not enough stops: {} witnessed, 299 needed to bound the dropped rate per stop below 0.01 at 95% confidence; overflows are lost where the kernel stops a counting thread, so move the workers more (the default --migrate and --migrators), run longer, or witness stops (--switch-witness counts or times)",
        r.totals.stress.as_ref().map_or(0, |s| s.stops)
    )
}

/// The handler's fd and worker tables are process-wide: one run at a time.
static ONE_RUN: Mutex<()> = Mutex::new(());

/// A Graviton2 (Neoverse-N1, arm64 PMU) as recorded in tests/fixtures.
fn graviton2() -> Fingerprint {
    Fingerprint::collect(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/fingerprint/graviton2-c6g-6.1-disabled"
    )))
}

/// `pmustress run --period 100000 --skid 1000 --cpus 0,1 EXTRA` on it
/// (`branches`; one worker per CPU and one migrator moving any worker
/// unless EXTRA says otherwise: the scripts' workers are scripted threads
/// whose heartbeats the fake kernel does not move; `--migrate none` gets
/// no migrator flags).
fn config(extra: &[&str]) -> RunConfig {
    let mut argv = vec![
        "pmustress",
        "run",
        "--period",
        "100000",
        "--skid",
        "1000",
        "--cpus",
        "0,1",
    ];
    // `--migrate none` refuses the flags that shape moves it would not make.
    let moves = !extra.windows(2).any(|pair| pair == ["--migrate", "none"]);
    for (flag, value) in [("--workers", "2"), ("--migrators", "1"), ("--move", "any")] {
        if !extra.contains(&flag) && (moves || flag == "--workers") {
            argv.extend([flag, value]);
        }
    }
    argv.extend_from_slice(extra);
    let Command::Run(args) = Cli::try_parse_from(argv).unwrap().command else {
        unreachable!("a run command")
    };
    let platform = Platform::from_fingerprint(&graviton2());
    RunConfig::from_args(&args, &[0, 1], &platform).unwrap()
}

/// Everything the run showed its observer.
#[derive(Default)]
struct Seen {
    stream: Vec<(usize, Observation)>,
    anomalies: Vec<Anomaly>,
    windows: u64,
    ticks: u64,
}

impl Observer for Seen {
    fn observation(&mut self, worker: usize, observation: &Observation) {
        self.stream.push((worker, *observation));
    }

    fn window(&mut self, _window: &ClosedWindow) {
        self.windows += 1;
    }

    fn anomaly(&mut self, anomaly: &Anomaly) {
        self.anomalies.push(anomaly.clone());
    }

    fn progress(&mut self, _progress: &Progress) {}

    fn tick(&mut self, _now_ns: u64) {
        self.ticks += 1;
    }
}

struct Outcome {
    record: RunRecord,
    results: RunResults,
    seen: Seen,
    kernel: FakeKernel,
}

fn run_fake(cfg: &RunConfig, script: Script, stop_signal: &dyn Fn() -> Option<i32>) -> Outcome {
    let _one = ONE_RUN.lock().unwrap_or_else(PoisonError::into_inner);
    let kernel = FakeKernel::new(script);
    let mut seen = Seen::default();
    let record = run_on(&kernel, cfg, stop_signal, &mut seen).expect("the run starts");
    let results = RunResults::new(
        cfg,
        Vec::new(),
        &graviton2(),
        &record,
        seen.anomalies.clone(),
        0,
    );
    Outcome {
        record,
        results,
        seen,
        kernel,
    }
}

fn no_stop() -> Option<i32> {
    None
}

/// Stops on the `n`th controller pass, as a SIGINT between two passes
/// would.
fn sigint_on_pass(n: u64) -> impl Fn() -> Option<i32> {
    let passes = std::cell::Cell::new(0);
    move || {
        passes.set(passes.get() + 1);
        (passes.get() >= n).then_some(libc::SIGINT)
    }
}

/// Where the handler of the `k`th overflow (1-based) of a clean free-mode
/// script reads the counter: 10 events late, read 100 later.
fn read_of(k: u64) -> u64 {
    k * PERIOD + 10 + 100
}

#[test]
fn free_mode_accounts_for_every_scripted_overflow() {
    let cfg = config(&["--workers", "1", "--migrate", "none", "--duration", "30ms"]);
    let out = run_fake(
        &cfg,
        Script::default().worker([Step::OVERFLOW; 20]),
        &no_stop,
    );
    let r = &out.results;
    assert_eq!(r.stop_reason, StopReason::Duration);
    assert_eq!(r.elapsed_ns, 30 * MS);
    assert_clean_but_short(r);
    let t = &r.totals;
    assert_eq!(
        (
            t.kernel_samples,
            t.signals,
            t.accounted_overflows,
            t.implied_overflows
        ),
        (20, 20, 20, Some(20))
    );
    assert_eq!((t.interrupts.on_time, t.deliveries.on_time), (20, 20));
    assert_eq!(t.dropped_interrupts, 0);
    assert!(t.anomalies.is_empty(), "{:?}", t.anomalies);
    assert_eq!(r.workers[0].final_count, Some(read_of(20)));
    // The kernel's own account: one RESET and ENABLE, the final DISABLE.
    let log = out.kernel.log(0);
    assert_eq!(log.calls, [Call::Reset, Call::Enable, Call::Disable]);
    assert_eq!((log.samples, log.signals, log.skipped), (20, 20, 0));
    assert_eq!(out.kernel.unplayed(), 0);
    // 20 samples, 20 signals and the final count; one window per signal.
    assert_eq!(out.seen.stream.len(), 41);
    assert_eq!(out.seen.windows, 20);
    assert_eq!(out.seen.ticks, 6);
}

#[test]
fn enough_overflows_and_stops_make_a_clean_verdict_that_says_its_sensitivity() {
    let cfg = config(&["--workers", "1", "--migrate", "none", "--duration", "610ms"]);
    // 300 times: switched out 1,000 events past a due point (nothing
    // pending: the interrupt was taken), then the next overflow.
    let steps = [Step::Switch { before_due: 99_000 }, Step::OVERFLOW];
    let out = run_fake(&cfg, Script::default().worker(steps.repeat(300)), &no_stop);
    let r = &out.results;
    assert_eq!(words(&r.inconclusive_because), Vec::<String>::new());
    assert_eq!((r.verdict, r.exit_status), (Verdict::Clean, 0));
    let stress = r.totals.stress.as_ref().unwrap();
    assert_eq!((stress.stops, stress.moves), (300, 0));
    // Every stop 1,000 of 100,000 past its last due point: the first bin.
    let mut positions = [0; crate::judge::stress::POSITION_BINS];
    positions[0] = 300;
    assert_eq!(stress.stop_positions, positions);
    let x = &r.stress.as_ref().unwrap().sensitivity;
    assert_eq!(x.stops, 300);
    // P ln(100) / S, stops bunched at the due points not credited.
    let window = x.window_events.unwrap();
    assert!(
        (window - 100_000.0 * 100f64.ln() / 300.0).abs() < 1e-6,
        "{window}"
    );
    assert_eq!((x.per_stop.events, x.per_stop.trials), (0, 300));
}

#[test]
fn reset_mode_rearms_after_every_signal() {
    let cfg = config(&[
        "--workers",
        "1",
        "--migrate",
        "none",
        "--duration",
        "30ms",
        "--mode",
        "reset",
    ]);
    let out = run_fake(
        &cfg,
        Script::default().worker([Step::OVERFLOW; 20]),
        &no_stop,
    );
    let r = &out.results;
    assert_clean_but_short(r);
    let t = &r.totals;
    assert_eq!(
        (t.kernel_samples, t.signals, t.accounted_overflows),
        (20, 20, 20)
    );
    assert_eq!(t.interrupts.on_time, 20);
    // Every handler re-armed: the counter starts again from 0 each time,
    // so each sample is 10 events past the first due point.
    let mut calls = vec![Call::Reset, Call::Enable];
    for _ in 0..20 {
        calls.extend([Call::Disarm(PERIOD), Call::Arm]);
    }
    calls.push(Call::Disable);
    assert_eq!(out.kernel.log(0).calls, calls);
    let samples: Vec<u64> = out
        .seen
        .stream
        .iter()
        .filter_map(|(_, o)| match o {
            Observation::Sample { count, .. } => Some(*count),
            _ => None,
        })
        .collect();
    assert_eq!(samples, [PERIOD + 10; 20]);
    // Each reset carries the count at its DISABLE, read before the RESET:
    // the fake counts nothing between the handler's read and its DISABLE,
    // so it equals the signal's read.
    let mut read = None;
    let mut resets = 0;
    for (_, o) in &out.seen.stream {
        match *o {
            Observation::Signal { value, .. } => read = Some(value),
            Observation::Reset { count, .. } => {
                assert!(count.is_some() && count == read, "{count:?} vs {read:?}");
                resets += 1;
            }
            _ => {}
        }
    }
    assert_eq!(resets, 20);
    assert_eq!(r.workers[0].final_count, Some(0));
}

#[test]
fn kernel_records_signals_and_moves_are_judged_in_time_order() {
    // Signals 1.5 ms after their interrupt, so the kernel's ring (drained
    // first), the handler's ring and the migrator's interleave in time.
    let script = Script {
        signal_delay_ns: 1_500_000,
        ..Script::default()
    }
    .worker([
        Step::OVERFLOW,
        Step::Switch { before_due: 50_000 },
        Step::OVERFLOW,
    ]);
    let cfg = config(&["--workers", "1", "--duration", "10ms"]);
    let out = run_fake(&cfg, script, &no_stop);
    let at = |ms_tenths: u64| START_NS + ms_tenths * MS / 10;
    let signal = |t, value| Observation::Signal {
        time_ns: at(t),
        cpu: 0,
        value,
        si_code: signal::POLL_IN,
        delivery: signal::Delivery::Overflow,
    };
    let stream: Vec<Observation> = out.seen.stream.iter().map(|(_, o)| *o).collect();
    assert_eq!(
        stream,
        [
            Observation::Sample {
                time_ns: at(10),
                cpu: 0,
                count: PERIOD + 10,
            },
            // The switch witness: the count where the thread was stopped.
            Observation::Stop {
                time_ns: at(20),
                cpu: 0,
                count: Some(2 * PERIOD - 50_000),
            },
            // The resume witness: where it ran again (the fake counts
            // nothing in between).
            Observation::Resume {
                time_ns: at(20),
                cpu: 0,
                count: 2 * PERIOD - 50_000,
            },
            // Read after the switch: the count had moved on.
            signal(25, 2 * PERIOD - 50_000 + 100),
            Observation::Sample {
                time_ns: at(30),
                cpu: 0,
                count: 2 * PERIOD + 10,
            },
            signal(45, read_of(2)),
            // The migrator's rounds, one per pass (ping-pong 0 <-> 1).
            Observation::Move {
                time_ns: at(50),
                cpu: 1,
                requested_ns: Some(at(50)),
            },
            Observation::Move {
                time_ns: at(100),
                cpu: 0,
                requested_ns: Some(at(100)),
            },
            Observation::Final {
                time_ns: at(100),
                count: Some(read_of(2)),
            },
        ]
    );
    assert_eq!(out.record.workers[0].reordered, 0);
    assert_eq!(out.kernel.log(0).moves, [(at(50), 1), (at(100), 0)]);
    let t = &out.results.totals;
    assert_eq!((t.migrations_requested, t.migrations_kernel), (2, Some(2)));
    assert_eq!((t.interrupts.stops, t.dropped_interrupts), (1, 0));
}

#[test]
fn two_migrated_workers_move_once_per_pass() {
    let cfg = config(&["--duration", "30ms"]);
    let script = Script::default()
        .worker([Step::OVERFLOW; 20])
        .worker([Step::OVERFLOW; 20]);
    let out = run_fake(&cfg, script, &no_stop);
    let r = &out.results;
    assert_clean_but_short(r);
    // One round of moves per pass, the first once both workers ran: at 5,
    // 10 ... 30 ms.
    for w in &r.workers {
        let c = &w.counts;
        assert_eq!(
            (c.kernel_samples, c.signals, c.dropped_interrupts),
            (20, 20, 0)
        );
        assert_eq!(
            (
                c.migrations_requested,
                c.migrations_failed,
                c.migrations_kernel
            ),
            (6, 0, Some(6))
        );
        // Signals 1.1-4.1 ms on the first CPU, 5.1-9.1 on the other, ...
        assert_eq!(c.cpu_changes, 4);
    }
    assert_eq!(out.kernel.log(1).moves.len(), 6);
}
/// Five clean overflows, one lost at a switch `past_due` events after
/// its due point, five more. The second after the loss is 3 events late,
/// not 10: a delivering driver would have taken the lost one's interrupt a
/// period late there and re-based the grid 10 events past the stock
/// driver's, which that one refutes in free mode (every real PMU's skid
/// varies; with a skid that never did, no record would tell the drivers
/// apart).
fn with_a_loss(past_due: u64) -> Script {
    let mut steps = vec![Step::OVERFLOW; 5];
    steps.push(Step::DropAtSwitch { past_due });
    steps.push(Step::OVERFLOW);
    steps.push(Step::Overflow {
        late: 3,
        signal: Signal::Delivered,
    });
    steps.extend([Step::OVERFLOW; 3]);
    Script::default().worker(steps)
}

#[test]
fn an_overflow_lost_at_a_switch_is_a_dropped_interrupt() {
    let cfg = config(&["--workers", "1", "--migrate", "none", "--duration", "20ms"]);
    let out = run_fake(&cfg, with_a_loss(5_000), &no_stop);
    let r = &out.results;
    assert_eq!((r.verdict, r.exit_status), (Verdict::Dropped, 1));
    let t = &r.totals;
    assert_eq!(
        (
            t.kernel_samples,
            t.dropped_interrupts,
            t.accounted_overflows
        ),
        (10, 1, 11)
    );
    assert_eq!((t.interrupts.stops, t.signals), (1, 10));
    assert_eq!(t.implied_overflows, Some(11));
    assert_eq!(
        t.anomalies
            .iter()
            .map(|(k, n)| (k.as_str(), *n))
            .collect::<Vec<_>>(),
        [(AnomalyKind::DroppedInterrupt.name(), 1)]
    );
    let a = &out.seen.anomalies[0];
    assert_eq!((a.dropped, a.time_ns), (1, START_NS + 7 * MS));
    // The arm64 bug's signature: two interrupts two periods apart.
    assert_eq!(a.interrupt_gap, Some(2 * PERIOD));
}

#[test]
fn an_overflow_lost_at_a_switch_is_a_dropped_interrupt_in_reset_mode() {
    let cfg = config(&[
        "--workers",
        "1",
        "--migrate",
        "none",
        "--duration",
        "20ms",
        "--mode",
        "reset",
    ]);
    let out = run_fake(&cfg, with_a_loss(5_000), &no_stop);
    let r = &out.results;
    assert_eq!((r.verdict, r.exit_status), (Verdict::Dropped, 1));
    let t = &r.totals;
    assert_eq!(
        (
            t.kernel_samples,
            t.dropped_interrupts,
            t.accounted_overflows
        ),
        (10, 1, 11)
    );
    // Counts start again at every reset: the interrupt after the loss is
    // two periods (and 10 events) past the last reset.
    assert_eq!(out.seen.anomalies[0].delta, 2 * PERIOD + 10);
    // Ten handlers read and re-armed; the lost overflow's never ran.
    let log = out.kernel.log(0);
    let rearms = log.calls.iter().filter(|c| **c == Call::Disarm(PERIOD));
    assert_eq!(rearms.count(), 10);

    // The handler restarts the event exactly at its reset (DISABLE,
    // RESET, PERIOD, ENABLE), so the due point is exact: a stop even 500
    // events past it found the overflow pending, a drop and nothing
    // ambiguous. (Before, the restart was anywhere in the handler's 1000
    // events of slack, and this was ambiguous.)
    let out = run_fake(&cfg, with_a_loss(500), &no_stop);
    let r = &out.results;
    assert_eq!((r.verdict, r.exit_status), (Verdict::Dropped, 1));
    let t = &r.totals;
    assert_eq!(
        (t.dropped_interrupts, t.ambiguous, t.accounted_overflows),
        (1, 0, 11)
    );
}

#[test]
fn enough_anomalies_end_the_run_at_the_pass_that_judged_them() {
    let cfg = config(&[
        "--workers",
        "1",
        "--migrate",
        "none",
        "--duration",
        "1s",
        "--stop-after-anomalies",
        "1",
    ]);
    let out = run_fake(&cfg, with_a_loss(5_000), &no_stop);
    let r = &out.results;
    assert_eq!(r.stop_reason, StopReason::Anomalies);
    // The interrupt at 7 ms shows the loss; the pass at 265 ms judges up
    // to 10 ms (the pass before, less the judging lag).
    assert_eq!(r.elapsed_ns, (10 + JUDGE_LAG_NS / MS + 5) * MS);
    assert_eq!(
        (r.verdict, r.totals.dropped_interrupts),
        (Verdict::Dropped, 1)
    );
}

#[test]
fn injected_drops_are_counted_exactly() {
    let cfg = config(&[
        "--workers",
        "1",
        "--migrate",
        "none",
        "--duration",
        "30ms",
        "--inject-drop-every",
        "4",
    ]);
    let out = run_fake(
        &cfg,
        Script::default().worker([Step::OVERFLOW; 20]),
        &no_stop,
    );
    let r = &out.results;
    assert!(r.injected);
    assert_eq!((r.verdict, r.exit_status), (Verdict::SelfTestPassed, 0));
    let t = &r.totals;
    // Every 4th of 20: 5 samples and their signals discarded.
    assert_eq!(
        (t.kernel_samples, t.injected, t.dropped_interrupts),
        (15, 5, 5)
    );
    assert_eq!((t.signals, t.deliveries.injected), (15, 5));
    assert_eq!(t.accounted_overflows, 20);
    // Each is booked at the sample we discarded: its gap is from the
    // interrupt before it to that one (the report says "discarded N after
    // the interrupt before it"), one period on this exact fake.
    let injected: Vec<_> = out
        .seen
        .anomalies
        .iter()
        .filter(|a| a.injected > 0)
        .collect();
    assert_eq!(injected.len(), 5);
    for a in injected {
        assert_eq!(
            (a.kind, a.interrupt_gap),
            (AnomalyKind::DroppedInterrupt, Some(cfg.period))
        );
    }
}
#[test]
fn a_throttled_event_is_throttled_not_dropped() {
    let cfg = config(&["--workers", "1", "--migrate", "none", "--duration", "20ms"]);
    let mut steps = vec![Step::OVERFLOW; 5];
    steps.extend([Step::Throttle, Step::Unthrottle]);
    steps.extend([Step::OVERFLOW; 5]);
    let out = run_fake(&cfg, Script::default().worker(steps), &no_stop);
    let r = &out.results;
    assert_clean_but_short(r);
    let t = &r.totals;
    assert_eq!((t.interrupts.throttled, t.interrupts.unthrottled), (1, 1));
    assert_eq!(
        t.anomalies
            .iter()
            .map(|(k, n)| (k.as_str(), *n))
            .collect::<Vec<_>>(),
        [(AnomalyKind::Throttled.name(), 1)]
    );
    assert_eq!(out.seen.anomalies[0].time_ns, START_NS + 6 * MS);
    assert_eq!(
        (
            t.kernel_samples,
            t.dropped_interrupts,
            t.accounted_overflows
        ),
        (10, 0, 10)
    );
    assert!(
        words(&r.warnings)
            .iter()
            .any(|w| w.starts_with("the kernel throttled the event 1 time (")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn a_burst_of_signals_long_after_their_interrupts_matches_each_one() {
    // The handler does not run for 200 periods (QEMU held the vCPU back:
    // 161 queued signals came in one burst there), then every signal
    // arrives, each reading far past its interrupt.
    let cfg = config(&["--workers", "1", "--migrate", "none", "--duration", "600ms"]);
    let script = Script {
        signal_delay_ns: 250_000_000,
        ..Script::default()
    }
    .worker(vec![Step::OVERFLOW; 200]);
    let out = run_fake(&cfg, script, &no_stop);
    let t = &out.results.totals;
    assert_eq!((t.kernel_samples, t.dropped_interrupts), (200, 0));
    let d = &t.deliveries;
    assert_eq!((d.signals, d.unmatched, d.coalesced), (200, 0, 0), "{d:?}");
}

#[test]
fn sigio_and_a_wrong_thread_are_delivery_faults_never_drops() {
    let cfg = config(&["--workers", "1", "--migrate", "none", "--duration", "20ms"]);
    let mut steps = vec![Step::OVERFLOW; 3];
    // The realtime queue is full: this interrupt's signal comes as SIGIO.
    steps.push(Step::Overflow {
        late: 10,
        signal: Signal::Merged,
    });
    steps.push(Step::SigIo);
    steps.extend([Step::OVERFLOW; 3]);
    steps.push(Step::Overflow {
        late: 10,
        signal: Signal::WrongThread,
    });
    steps.extend([Step::OVERFLOW; 3]);
    let out = run_fake(&cfg, Script::default().worker(steps), &no_stop);
    let r = &out.results;
    let t = &r.totals;
    assert_eq!(
        (
            t.kernel_samples,
            t.accounted_overflows,
            t.dropped_interrupts
        ),
        (11, 11, 0)
    );
    let d = &t.deliveries;
    assert_eq!((d.sigio, d.wrong_thread), (1, 1));
    // The wrong thread records the signal in its own ring (only a ring's
    // owner pushes into it), so the owner's stream has an interrupt without
    // its signal: the owner's judge cannot tell it from one the kernel
    // merged into the next, which then reads a period late.
    assert_eq!((d.coalesced, d.late_by_a_period), (1, 1), "{d:?}");
    assert_eq!(
        t.anomalies
            .iter()
            .map(|(k, n)| (k.as_str(), *n))
            .collect::<Vec<_>>(),
        [
            (AnomalyKind::CoalescedSignal.name(), 1),
            (AnomalyKind::LateSignal.name(), 1),
            (AnomalyKind::SignalQueueOverflow.name(), 1),
            (AnomalyKind::ToolError.name(), 1)
        ]
    );
    // A signal on the wrong thread is ours or the kernel's routing bug.
    assert_eq!((r.verdict, r.exit_status), (Verdict::Inconclusive, 125));
    let [overflows, stops] = short_reasons(r);
    assert_eq!(
        words(&r.inconclusive_because),
        [
            overflows,
            stops,
            "1 overflow signals landed on the wrong thread".to_string(),
        ]
    );
    // One of the 11 interrupts' signals came as the SIGIO.
    let log = out.kernel.log(0);
    assert_eq!((log.samples, log.signals, log.sigio), (11, 10, 1));
}

#[test]
fn counted_mode_stops_each_worker_at_its_nth_signal() {
    let cfg = config(&["--migrate", "none", "--interrupts", "7"]);
    let script = Script::default()
        .worker([Step::OVERFLOW; 300])
        .worker([Step::OVERFLOW; 300]);
    let out = run_fake(&cfg, script, &no_stop);
    let r = &out.results;
    assert_eq!(r.stop_reason, StopReason::Interrupts);
    // The handler counts the signals where they arrive and disables the
    // event at the 7th (7.1 ms); the workers stop, and the pass after
    // (10 ms) ends the run. (Counted by the judge, 250 ms behind its
    // drains, the budget took 264 signals.)
    assert_eq!(r.elapsed_ns, 10 * MS);
    assert_eq!((r.verdict, r.exit_status), (Verdict::Inconclusive, 125));
    for (i, w) in r.workers.iter().enumerate() {
        let c = &w.counts;
        assert_eq!((c.kernel_samples, c.signals), (7, 7));
        assert_eq!(c.deliveries.in_flight, 0);
        // Disabled in the 7th handler, at the count it read: 10 events
        // past the interrupt's, which came 10 past the due point.
        assert_eq!(w.final_count, Some(7 * PERIOD + 110));
        assert_eq!(out.kernel.log(i).calls.last(), Some(&Call::Disable));
    }
    // Each script ran for the 10 ms of the run, its last 3 steps on a
    // disabled event (no sample, no signal); the rest never ran.
    assert_eq!(out.kernel.unplayed(), 2 * (300 - 10));
}

#[test]
fn a_stop_request_ends_the_run_between_two_passes() {
    let cfg = config(&["--workers", "1", "--migrate", "none", "--duration", "1s"]);
    let out = run_fake(
        &cfg,
        Script::default().worker([Step::OVERFLOW; 30]),
        &sigint_on_pass(4),
    );
    let r = &out.results;
    assert_eq!(r.stop_reason, StopReason::Signal(libc::SIGINT));
    assert_eq!(r.elapsed_ns, 20 * MS);
    assert_eq!((r.verdict, r.exit_status), (Verdict::Interrupted, 130));
    let t = &r.totals;
    assert_eq!(
        (t.kernel_samples, t.signals, t.dropped_interrupts),
        (20, 19, 0)
    );
    assert_eq!(r.workers[0].final_count, Some(20 * PERIOD + 10));
}

#[test]
fn watchdog_stops_a_worker_whose_event_stops_overflowing() {
    let cfg = config(&[
        "--workers",
        "1",
        "--migrate",
        "none",
        "--duration",
        "1s",
        "--watchdog",
        "50ms",
    ]);
    let out = run_fake(
        &cfg,
        Script::default().worker([Step::OVERFLOW; 3]),
        &no_stop,
    );
    let r = &out.results;
    assert_eq!(r.stop_reason, StopReason::WorkersGone);
    // The last signals were drained at 5 ms; 55 ms later is past 50 ms.
    assert_eq!(r.elapsed_ns, 60 * MS);
    assert_eq!(
        r.workers[0].stalled.as_deref(),
        Some(
            "worker 0 got no overflow signal for 55 ms while running: the event does not count or overflow here"
        )
    );
    assert_eq!((r.verdict, r.exit_status), (Verdict::Inconclusive, 125));
    assert_eq!(r.totals.signals, 3);
    // The watchdog's DISABLE, then the worker's own.
    assert_eq!(
        out.kernel.log(0).calls,
        [Call::Reset, Call::Enable, Call::Disable, Call::Disable]
    );
}

/// SIGSTOP or a cgroup freezer holds every thread, the controller's too:
/// a hold longer than the watchdog used to stop the workers as if their
/// event did not count or overflow. The held time counts against no
/// worker, and the run says it was held.
#[test]
fn a_held_process_is_not_a_stalled_worker() {
    let cfg = config(&[
        "--workers",
        "1",
        "--migrate",
        "none",
        "--duration",
        "150ms",
        "--watchdog",
        "50ms",
    ]);
    let mut script = Script::default().worker([Step::OVERFLOW; 300]);
    // From the start of the controller's pause at 20 ms, as SIGSTOP
    // mostly finds it.
    script.holds = vec![(20 * MS, 100 * MS)];
    let out = run_fake(&cfg, script, &no_stop);
    let r = &out.results;
    assert_eq!(r.stop_reason, StopReason::Duration);
    assert_eq!(r.workers[0].stalled, None);
    // The controller's pause from 20 ms, asked for 5, ended at 120 ms
    // with the hold: 95 ms more than it asked.
    let held = Held {
        times: 1,
        longest_ns: 95 * MS,
        total_ns: 95 * MS,
    };
    assert_eq!(r.held, held);
    assert!(
        r.warnings.contains(&Warning::Held(held)),
        "{:?}",
        r.warnings
    );
    assert_clean_but_short(r);
    // 150 ms, 100 of them held: 50 steps of 1 ms, every one an overflow.
    assert_eq!(
        (r.totals.kernel_samples, r.totals.dropped_interrupts),
        (50, 0)
    );
}

#[test]
fn watchdog_stops_a_worker_that_runs_no_user_code() {
    let cfg = config(&[
        "--workers",
        "1",
        "--migrate",
        "none",
        "--duration",
        "1s",
        "--watchdog",
        "50ms",
    ]);
    let mut steps = vec![Step::OVERFLOW; 12];
    steps.push(Step::Stall);
    steps.extend([Step::OVERFLOW; 100]);
    let out = run_fake(&cfg, Script::default().worker(steps), &no_stop);
    let r = &out.results;
    // Its last round was at 10 ms; signals kept coming.
    assert_eq!(r.elapsed_ns, 65 * MS);
    assert_eq!(
        r.workers[0].stalled.as_deref(),
        Some(
            "worker 0 ran no user code for 55 ms (livelocked in the kernel?): its event was disabled"
        )
    );
    assert_eq!(r.stop_reason, StopReason::WorkersGone);
    assert_eq!((r.verdict, r.exit_status), (Verdict::Inconclusive, 125));
}

/// Reset mode: a handler that re-arms the event (DISABLE, RESET, PERIOD,
/// record, ENABLE) while the watchdog disables it must leave it disabled:
/// its ENABLE would otherwise re-arm a stalled worker's event. Here every
/// signal on its way when the watchdog's DISABLE comes is handled right
/// after it; each handler's ENABLE is followed by a DISABLE.
#[test]
fn a_reset_mode_handler_never_re_enables_what_the_watchdog_disabled() {
    let cfg = config(&[
        "--workers",
        "1",
        "--migrate",
        "none",
        "--mode",
        "reset",
        "--duration",
        "1s",
        "--watchdog",
        "50ms",
    ]);
    let mut steps = vec![Step::OVERFLOW; 12];
    steps.push(Step::Stall);
    steps.extend([Step::OVERFLOW; 100]);
    let script = Script {
        // Three interrupts' signals on their way at any time.
        signal_delay_ns: 3 * MS,
        handlers_after_watchdog: true,
        ..Script::default()
    }
    .worker(steps);
    let out = run_fake(&cfg, script, &no_stop);
    let r = &out.results;
    assert_eq!(r.stop_reason, StopReason::WorkersGone);
    let calls = out.kernel.log(0).calls;
    // Until it, each signal's re-arm is DISABLE-RESET-PERIOD and ENABLE.
    let watchdog = calls
        .iter()
        .position(|c| *c == Call::Disable)
        .expect("the watchdog's DISABLE");
    let rearm = [Call::Disarm(PERIOD), Call::Arm, Call::Disable];
    assert_eq!(
        &calls[watchdog..],
        [
            &[Call::Disable][..],
            &rearm,
            &rearm,
            &rearm,
            &[Call::Disable],
        ]
        .concat(),
        "{calls:?}"
    );
}

#[test]
fn an_event_that_cannot_be_opened_stops_the_run_with_the_reason() {
    let _one = ONE_RUN.lock().unwrap_or_else(PoisonError::into_inner);
    let kernel = FakeKernel::new(Script {
        open_error: Some(libc::ENOENT),
        ..Script::default()
    });
    let cfg = config(&["--migrate", "none", "--duration", "10ms"]);
    let err = run_on(&kernel, &cfg, &no_stop, &mut Seen::default())
        .err()
        .expect("no event, no run");
    assert!(err.downcast_ref::<SetupError>().is_some());
    assert_eq!(
        err.to_string(),
        "perf_event_open(type 8, config 0x21) failed: No such file or directory (os error 2); the PMU does not support this event (no hardware PMU in a VM? try --event task-clock)"
    );
}
#[test]
fn a_worker_that_panics_while_opening_stops_the_run_with_the_reason() {
    let _one = ONE_RUN.lock().unwrap_or_else(PoisonError::into_inner);
    let kernel = FakeKernel::new(Script {
        open_panics: true,
        ..Script::default()
    });
    let cfg = config(&["--workers", "2", "--migrate", "none", "--duration", "10ms"]);
    let err = run_on(&kernel, &cfg, &no_stop, &mut Seen::default())
        .err()
        .expect("no event, no run");
    assert!(
        err.to_string()
            .contains("failed while opening its event: scripted panic in perf_event_open"),
        "{err}"
    );
}

#[test]
fn a_refused_witness_falls_back_to_switch_times() {
    let script = Script {
        witness_opens: false,
        ..Script::default()
    }
    .worker([
        Step::OVERFLOW,
        Step::OVERFLOW,
        Step::Switch { before_due: 50_000 },
        Step::OVERFLOW,
        Step::OVERFLOW,
    ]);
    let cfg = config(&["--workers", "1", "--migrate", "none", "--duration", "10ms"]);
    let out = run_fake(&cfg, script, &no_stop);
    let r = &out.results;
    assert_clean_but_short(r);
    let w = &r.workers[0];
    assert_eq!(w.switch_witness, SwitchWitness::Times);
    let i = &w.counts.interrupts;
    assert_eq!(
        (i.samples, i.stops, i.stops_without_count, i.dropped),
        (4, 1, 1, 0)
    );
    // The witness was refused, and the event opened again asking for
    // PERF_RECORD_SWITCH.
    let opened = out.kernel.log(0).opened;
    assert_eq!(
        opened.iter().map(|a| a.context_switch).collect::<Vec<_>>(),
        [false, true]
    );
}

/// What main's observer does with a run: the results directory.
struct Files {
    files: crate::results::writer::ResultsDir,
    anomalies: Vec<Anomaly>,
}

impl Observer for Files {
    fn observation(&mut self, worker: usize, observation: &Observation) {
        self.files.record_observation(worker, observation);
    }

    fn window(&mut self, window: &ClosedWindow) {
        self.files.record_window(window);
    }

    fn anomaly(&mut self, anomaly: &Anomaly) {
        self.files.record_anomaly(anomaly);
        self.anomalies.push(anomaly.clone());
    }

    fn progress(&mut self, _progress: &Progress) {}

    fn tick(&mut self, now_ns: u64) {
        self.files.tick(now_ns);
    }

    fn failure(&self) -> Option<String> {
        self.files.failure()
    }
}

#[test]
fn run_json_has_the_totals_and_the_raw_stream_replays_to_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(&["--duration", "30ms", "--out", dir.path().to_str().unwrap()]);
    let argv = vec!["pmustress".to_string(), "run".to_string()];
    let script = with_a_loss(5_000).worker([Step::OVERFLOW; 20]);
    let _one = ONE_RUN.lock().unwrap_or_else(PoisonError::into_inner);
    let kernel = FakeKernel::new(script);
    let mut files = Files {
        files: crate::results::writer::ResultsDir::create(&mut cfg, &argv, &graviton2()).unwrap(),
        anomalies: Vec::new(),
    };
    let record = run_on(&kernel, &cfg, &no_stop, &mut files).unwrap();
    let mut results = RunResults::new(&cfg, argv, &graviton2(), &record, files.anomalies, 0);
    files.files.finish(kernel.now_ns(), &mut results).unwrap();

    let text = std::fs::read_to_string(dir.path().join("run.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let at = |pointer: &str| json.pointer(pointer).cloned().unwrap_or_default();
    assert_eq!(at("/verdict"), "dropped");
    assert_eq!(at("/exit_status"), 1);
    assert_eq!(at("/totals/kernel_samples"), 30);
    assert_eq!(at("/totals/accounted_overflows"), 31);
    assert_eq!(at("/totals/dropped_interrupts"), 1);
    assert_eq!(at("/workers/0/dropped_interrupts"), 1);
    assert_eq!(at("/workers/1/dropped_interrupts"), 0);
    // Ping-pong, one round per pass: 6 moves each.
    assert_eq!(at("/totals/migrations_requested"), 12);

    let replay = crate::report::replay::replay_dir(dir.path()).unwrap();
    assert!(replay.differences.is_empty(), "{:?}", replay.differences);
    assert_eq!(
        (replay.verdict.as_str(), replay.exit_status),
        ("dropped", 1)
    );
}

/// A hold-up of the controller leaves a merge queue holding all of it;
/// once that is judged the queue gives the memory back, and the steady
/// rate's come and go never reallocates it.
#[test]
fn a_merge_queue_gives_back_what_a_backlog_grew_it_to() {
    let moves = |from: u64, n: u64| {
        (from..from + n).map(|t| Observation::Move {
            time_ns: t,
            cpu: 0,
            requested_ns: Some(t),
        })
    };
    let mut queue = VecDeque::new();
    // Steady: a pass's records come, the older ones are judged.
    queue.extend(moves(0, 3_000));
    shrink_after_peak(&mut queue);
    let steady = queue.capacity();
    assert!(steady <= QUEUE_FLOOR, "{steady}");
    // A 2 s hold-up at the migrator's 100,000 moves per second.
    queue.extend(moves(3_000, 200_000));
    shrink_after_peak(&mut queue);
    assert!(queue.capacity() >= 203_000);
    // Judged a ring's worth per pass, as drain_all takes them.
    while queue.len() > 3_000 {
        queue.drain(..(queue.len() - 3_000).min(MOVE_RING_RECORDS));
        shrink_after_peak(&mut queue);
    }
    assert!(queue.capacity() <= 2 * QUEUE_FLOOR, "{}", queue.capacity());
    // Back to the steady come and go: no more shrinking or growing.
    let after = queue.capacity();
    for pass in 0..100 {
        queue.drain(..1_000);
        queue.extend(moves(1_000_000 + pass * 1_000, 1_000));
        shrink_after_peak(&mut queue);
        assert_eq!(queue.capacity(), after);
    }
}

/// More workers than CPUs: a worker that waits its turn also runs no
/// user code, so the watchdog's reason says so and what to change.
#[test]
fn watchdog_says_when_workers_outnumber_the_cpus() {
    let cfg = config(&[
        "--workers",
        "3",
        "--migrate",
        "none",
        "--duration",
        "1s",
        "--watchdog",
        "50ms",
    ]);
    let mut steps = vec![Step::OVERFLOW; 12];
    steps.push(Step::Stall);
    steps.extend([Step::OVERFLOW; 100]);
    let out = run_fake(&cfg, Script::default().worker(steps), &no_stop);
    let why = out.results.workers[0].stalled.clone().unwrap_or_default();
    assert!(
        why.starts_with("worker 0 ran no user code for ")
            && why.ends_with(
                "; 3 workers share 2 CPUs, so a worker waiting its turn looks the same: give fewer --workers or a longer --watchdog"
            ),
        "{why}"
    );
}

/// A pass judges for its budget, reading the clock every
/// `JUDGE_CLOCK_EVERY` observations, and the end judges without one: a
/// pass that judged its whole backlog starved the rings and the duration
/// check whenever judging was slower than the workers.
#[test]
fn a_pass_judges_until_its_budget_is_spent() {
    let now = std::cell::Cell::new(0u64);
    // Each reading of the clock finds 1 ms more gone.
    let clock = || {
        now.set(now.get() + 1_000_000);
        now.get()
    };
    let mut budget = JudgeBudget::new(&clock, Some(3_000_000));
    let judged = (0..10_000).take_while(|_| !budget.spent()).count();
    // Read at 1, 2, 3 ms: spent at the third reading.
    assert_eq!(judged, 3 * JUDGE_CLOCK_EVERY as usize - 1);
    let mut unbounded = JudgeBudget::new(&clock, None);
    assert!((0..10_000).all(|_| !unbounded.spent()));
}

/// Files a write left short: a drop, and a failed self-test, keep their
/// verdict and exit 1 (the drops were found before the files failed); a
/// passed self-test cannot be trusted on short files: inconclusive, 125.
#[test]
fn short_files_keep_a_drop_but_not_a_pass() {
    let loss = config(&["--workers", "1", "--migrate", "none", "--duration", "20ms"]);
    let mut dropped = run_fake(&loss, with_a_loss(5_000), &no_stop).results;
    dropped.mark_unsaved("run.json: No space left on device".into());
    assert_eq!(
        (dropped.verdict, dropped.exit_status),
        (Verdict::Dropped, 1)
    );
    let self_test = |steps: Script| {
        let cfg = config(&[
            "--workers",
            "1",
            "--migrate",
            "none",
            "--duration",
            "30ms",
            "--inject-drop-every",
            "4",
        ]);
        let mut r = run_fake(&cfg, steps, &no_stop).results;
        let before = (r.verdict, r.exit_status);
        r.mark_unsaved("run.json: No space left on device".into());
        (before, (r.verdict, r.exit_status))
    };
    assert_eq!(
        self_test(Script::default().worker([Step::OVERFLOW; 20])),
        ((Verdict::SelfTestPassed, 0), (Verdict::Inconclusive, 125))
    );
    assert_eq!(
        self_test(with_a_loss(5_000)),
        ((Verdict::SelfTestFailed, 1), (Verdict::SelfTestFailed, 1))
    );
}
