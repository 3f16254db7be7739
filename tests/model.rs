/*!
Property tests of the judge against the driver model (`testkit::driver_model`).

Each property draws settings per seed (latency up to 3 periods, pseudo-NMI on
or off, stop and migration rates, free and reset mode, injection,
throttling, ring gaps, counting kernel mode), generates streams with their
ground truth, runs `StreamJudge` over each (the last observation is the
`Final`) and requires the truth back. The model says which losses the
records decide and which places they leave open, by its own reading of them
(`testkit::driver_model::records`, never the judge's state): every decided loss
dropped, never a drop that was not, at most one ambiguous overflow per open
place, and exact where nothing is open. Each property also runs two wrong
judges and requires both caught: one that never reports a drop and one that
reports every ambiguity as a drop.

Each property generates at least `PMUSTRESS_MODEL_OVERFLOWS` overflows
(default 10^6) in streams of a few thousand to 40,000 overflows. A failure
prints the seed, the settings, the truth and the verdict, the smallest
number of overflows with that seed that still fails and the stream's end;
`PMUSTRESS_MODEL_SEED=N` starts a property at seed N to replay it.
*/

use pmustress::domain::RearmMode;
use pmustress::judge::{Observation, StreamJudge, StreamJudgement};
use pmustress::testkit::driver_model::{self as model, Generated, ModelConfig, Taken, Truth};

/// Overflows per property: `PMUSTRESS_MODEL_OVERFLOWS` or 10^6.
fn budget() -> u64 {
    std::env::var("PMUSTRESS_MODEL_OVERFLOWS")
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(1_000_000)
}

fn judge(cfg: &ModelConfig, g: &Generated) -> StreamJudgement {
    let mut j = StreamJudge::new(0, cfg.judge_config());
    let mut windows = Vec::new();
    let mut anomalies = Vec::new();
    for o in &g.observations {
        j.observe(o, &mut windows, &mut anomalies);
        windows.clear();
        anomalies.clear();
    }
    j.verdict()
}

macro_rules! require {
    ($cond:expr, $($fmt:tt)*) => {
        if !$cond {
            return Err(format!("{}: {}", stringify!($cond), format!($($fmt)*)));
        }
    };
}

/// The observations at which the judge called an overflow dropped or
/// ambiguous.
fn drop_anomalies(cfg: &ModelConfig, g: &Generated) -> std::collections::BTreeMap<usize, String> {
    use pmustress::judge::AnomalyKind;
    let mut j = StreamJudge::new(0, cfg.judge_config());
    let mut windows = Vec::new();
    let mut anomalies = Vec::new();
    let mut out = std::collections::BTreeMap::new();
    for (k, o) in g.observations.iter().enumerate() {
        j.observe(o, &mut windows, &mut anomalies);
        for a in anomalies.drain(..) {
            if matches!(
                a.kind,
                AnomalyKind::DroppedInterrupt | AnomalyKind::Ambiguous
            ) {
                out.insert(k, format!("{:?} {}", a.kind, a.missed));
            }
        }
    }
    out
}

/// The index of the observation the judge found unexplained first.
fn first_unexplained(cfg: &ModelConfig, g: &Generated) -> Option<usize> {
    let mut j = StreamJudge::new(0, cfg.judge_config());
    let mut windows = Vec::new();
    let mut anomalies = Vec::new();
    for (k, o) in g.observations.iter().enumerate() {
        j.observe(o, &mut windows, &mut anomalies);
        if j.interrupts().unexplained > 0 {
            return Some(k);
        }
    }
    None
}

/// What the judge must find for the samples it does not discard. Where
/// the records place a due point only within the handler slack (after a
/// reset by the handler before), a late interrupt may be on time and one a
/// period late only late: `late_or_on_time` and `rebased_or_late` count
/// those that can be. Where they do not place it (`unplaced`), only the
/// total is certain.
#[derive(Debug, Default, PartialEq, Eq)]
struct Classes {
    on_time: u64,
    late: u64,
    rebased: u64,
    late_or_on_time: u64,
    rebased_or_late: u64,
    /// Samples whose due point the records do not place, and of them the
    /// ones a period or more late.
    unplaced: u64,
    unplaced_rebased: u64,
    /// First after a count wrap: the judge anchors the grid on them.
    after_wrap: u64,
}

fn classes(cfg: &ModelConfig, g: &Generated) -> Classes {
    let mut c = Classes::default();
    for (i, s) in g.samples.iter().enumerate() {
        let n = cfg.inject_drop_every;
        if n > 0 && (i as u64 + 1).is_multiple_of(n) {
            continue;
        }
        if s.after_wrap {
            c.after_wrap += 1;
            continue;
        }
        let Some(spread) = s.due_spread else {
            c.unplaced += 1;
            c.unplaced_rebased += u64::from(s.taken == Taken::Rebased);
            continue;
        };
        match s.taken {
            Taken::OnTime => c.on_time += 1,
            Taken::Late => c.late += 1,
            Taken::Rebased => c.rebased += 1,
        }
        match s.taken {
            Taken::Late if s.lateness <= cfg.interrupt_skid + spread => c.late_or_on_time += 1,
            Taken::Rebased if s.lateness < cfg.period + spread => c.rebased_or_late += 1,
            _ => {}
        }
    }
    c
}

/// The judge's on-time, late and re-based samples against the truth: the
/// total always; where the records leave nothing open (`exact`), each
/// sample whose due point they place in its class (within the range's
/// slack). Where they leave something open the judge follows several
/// explanations and merges them into the widest (judge::interrupts), so a
/// sample placed exactly may be only "late, maybe re-based" for it.
fn check_classes(
    c: &Classes,
    i: &pmustress::judge::InterruptTotals,
    exact: bool,
) -> Result<(), String> {
    require!(
        i.on_time + i.late + i.rebased_in_handler == c.on_time + c.late + c.rebased + c.unplaced,
        "{i:?} vs {c:?}"
    );
    require!(i.after_count_wrap == c.after_wrap, "{i:?} vs {c:?}");
    // Whatever the ambiguity, the driver's re-bases in the handler lie
    // between the certain ones and those some explanation has.
    let rebased = c.rebased + c.unplaced_rebased;
    require!(
        i.late_maybe_rebased <= i.on_time + i.late
            && i.rebased_in_handler <= rebased
            && rebased <= i.rebased_in_handler + i.late_maybe_rebased + c.rebased_or_late,
        "{} + {} maybe vs {c:?}",
        i.rebased_in_handler,
        i.late_maybe_rebased
    );
    if !exact {
        return Ok(());
    }
    // Placed: exact, but where the records give the due point only as a
    // range (after a reset): "on time if it can be".
    require!(
        c.on_time <= i.on_time && i.on_time <= c.on_time + c.late_or_on_time + c.unplaced,
        "{} vs {c:?}",
        i.on_time
    );
    require!(
        c.rebased <= i.rebased_in_handler + c.rebased_or_late,
        "{} vs {c:?}",
        i.rebased_in_handler
    );
    Ok(())
}

type Check = fn(&ModelConfig, &Generated, &StreamJudgement) -> Result<(), String>;

/// A judge that never reports a drop: what it should call dropped it calls
/// ambiguous (the self-test's injected drops, marked in the stream, stay).
fn never_drops(v: &StreamJudgement) -> StreamJudgement {
    let mut m = v.clone();
    let i = &mut m.interrupts;
    let real = i.dropped - i.injected;
    i.dropped -= real;
    i.ambiguous += real;
    i.dropped_at_final_stop = 0;
    m
}

/// A judge that reports every ambiguous overflow as a drop.
fn drops_every_ambiguity(v: &StreamJudgement) -> StreamJudgement {
    let mut m = v.clone();
    let i = &mut m.interrupts;
    i.dropped += i.ambiguous;
    i.ambiguous = 0;
    m
}

/// Runs `check` on streams drawn by `settings` until `budget()` overflows
/// were generated; panics with the details of the first failure.
fn property(name: &str, settings: fn(&mut fastrand::Rng, u64) -> ModelConfig, check: Check) {
    let started = std::time::Instant::now();
    let want = budget();
    let mut total = 0;
    // PMUSTRESS_MODEL_SEED: start at this seed (to replay a failure).
    let mut seed = std::env::var("PMUSTRESS_MODEL_SEED")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(0, |s| s - 1);
    let mut streams = 0;
    let mut sums = [0u64; 8];
    // Both directions: streams where a wrong judge was caught, and streams
    // where it could have been (a real loss; an ambiguous overflow).
    let (mut never_caught, mut never_could) = (0u64, 0u64);
    let (mut every_caught, mut every_could) = (0u64, 0u64);
    while total < want {
        seed += 1;
        let mut rng = fastrand::Rng::with_seed(seed ^ 0x9e37_79b9_7f4a_7c15);
        let size = rng.u64(2_000..=40_000).min(want - total).max(200);
        let cfg = settings(&mut rng, size);
        let g = model::generate(&cfg, seed);
        let v = judge(&cfg, &g);
        if let Err(e) = check(&cfg, &g, &v) {
            // The smallest stream with this seed that still fails.
            let (mut lo, mut hi) = (1, cfg.overflows);
            while lo < hi {
                let mid = (lo + hi) / 2;
                let c = ModelConfig {
                    overflows: mid,
                    ..cfg.clone()
                };
                let g = model::generate(&c, seed);
                if check(&c, &g, &judge(&c, &g)).is_err() {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            let small = ModelConfig {
                overflows: lo,
                ..cfg.clone()
            };
            let gs = model::generate(&small, seed);
            let vs = judge(&small, &gs);
            let e = check(&small, &gs, &vs).err().unwrap_or(e);
            // Each sample with its truth: how late, after which due point.
            let mut k = 0;
            let drops = drop_anomalies(&small, &gs);
            let mut stream: Vec<String> = gs
                .observations
                .iter()
                .enumerate()
                .map(|(i, o)| {
                    let mut line = match o {
                        Observation::Sample { count, .. } => {
                            let s = gs.samples[k];
                            k += 1;
                            format!("{o:?} due {} {s:?}", count - s.lateness)
                        }
                        _ => format!("{o:?}"),
                    };
                    if gs.decided_losses.contains(&i) {
                        line = format!("(a loss the records decide)\n{line}");
                    }
                    if let Some(kind) = drops.get(&i) {
                        line.push_str(&format!("  <- judge: {kind}"));
                    }
                    line
                })
                .collect();
            // PMUSTRESS_MODEL_DUMP=FILE: the whole annotated stream there.
            if let Ok(path) = std::env::var("PMUSTRESS_MODEL_DUMP") {
                let _ = std::fs::write(path, stream.join("\n"));
            }
            if stream.len() > 200 {
                // Around the first unexplained sample, if any.
                let at = first_unexplained(&small, &gs).unwrap_or(stream.len() - 1);
                stream = stream[at.saturating_sub(30)..=at].to_vec();
            }
            panic!(
                "{name}: seed {seed}: {e}\nsmallest failing: {lo} overflows\n{small:#?}\n{:#?}\n{:#?}\nsamples {:?}\n{}",
                gs.truth,
                vs,
                if gs.samples.len() <= 60 {
                    &gs.samples[..]
                } else {
                    &[]
                },
                stream.join("\n")
            );
        }
        if g.truth.lost > 0 {
            never_could += 1;
            never_caught += u64::from(check(&cfg, &g, &never_drops(&v)).is_err());
        }
        if v.interrupts.ambiguous > 0 {
            every_could += 1;
            every_caught += u64::from(check(&cfg, &g, &drops_every_ambiguity(&v)).is_err());
        }
        total += g.truth.overflows;
        streams += 1;
        let (t, i) = (&g.truth, &v.interrupts);
        sums[0] += t.lost;
        sums[1] += i.dropped - i.injected;
        sums[2] += i.ambiguous;
        sums[3] += t.undecided;
        sums[4] += i.unexplained;
        sums[5] += t.rebase_irq + t.rebase_restart;
        sums[6] += t.coalesced;
        sums[7] += v.deliveries.coalesced;
    }
    eprintln!(
        "{name}: {total} overflows in {streams} streams, {:.2?}: lost {} (judge: dropped {}, \
         ambiguous {} of {} undecided places, unexplained {}), re-based {}, coalesced {} (judge {})",
        started.elapsed(),
        sums[0],
        sums[1],
        sums[2],
        sums[3],
        sums[4],
        sums[5],
        sums[6],
        sums[7],
    );
    eprintln!(
        "{name}: a judge that never drops caught in {never_caught} of {never_could} streams with a drop; \
         one that drops every ambiguity in {every_caught} of {every_could} streams with one"
    );
    // Both directions, asserted: a judge that never reports a drop fails
    // wherever the records decide a loss, one that reports every
    // ambiguity as a drop wherever an ambiguous overflow was not lost.
    assert!(
        never_could == 0 || never_caught > 0,
        "{name}: no stream caught a judge that never drops ({never_could} had a loss)"
    );
    assert!(
        every_could == 0 || every_caught > 0,
        "{name}: no stream caught a judge that drops every ambiguity ({every_could} had one)"
    );
}

/// Latency from 0 to 3 periods, in varying mixes.
fn draw_common(rng: &mut fastrand::Rng, mode: RearmMode, overflows: u64) -> ModelConfig {
    // Reset mode: the judge knows a restart only within the handler slack
    // (1,000 events), so periods are well above it, as in real runs.
    let period = match mode {
        RearmMode::Free => [1_000, 10_000, 50_000, 200_000][rng.usize(0..4)],
        RearmMode::Reset => [10_000, 50_000, 200_000][rng.usize(0..3)],
    };
    let mut cfg = ModelConfig::new(period, mode, overflows);
    cfg.interrupt_skid = period / [100, 20, 8][rng.usize(0..3)];
    cfg.latency.on_time = rng.u32(0..100);
    cfg.latency.late = rng.u32(0..30);
    cfg.latency.period_late = [0, 1, 5, 20][rng.usize(0..4)];
    cfg.latency.max_periods = rng.u64(1..=3);
    cfg.pnmi = rng.bool();
    cfg.stops_per_period = [0.0, 0.05, 0.3, 1.0, 3.0][rng.usize(0..5)];
    cfg.stop_near_due = [0.0, 0.3, 0.9][rng.usize(0..3)];
    cfg.migrations = rng.f64();
    cfg.resume_witness = rng.bool();
    // Throttling: see `lost_records_and_throttling` (the judge takes an
    // UNTHROTTLE as a ring gap: newer kernels write no sample for the next
    // overflow).
    cfg.signal_late = [0.0, 0.05, 0.3][rng.usize(0..3)];
    cfg.coalesce = [0.0, 0.0, 0.02][rng.usize(0..3)];
    cfg.sigio = [0.0, 0.0, 0.01][rng.usize(0..3)];
    cfg.inject_drop_every = [0, 0, 7, 61][rng.usize(0..4)];
    cfg
}

/// The drops against the truth. The records decide some losses (only
/// "lost" fits them): each must be dropped. Every other loss is dropped or
/// ambiguous (or, behind a ring gap, its record lost), and every ambiguous
/// overflow sits at a place the records leave open (`Truth::undecided`):
/// none, and the judge must be exact.
fn drops(t: &Truth, i: &pmustress::judge::InterruptTotals) -> Result<(), String> {
    let a = i.ambiguous;
    require!(
        i.dropped <= t.lost + t.injected,
        "{} vs lost {} + injected {}",
        i.dropped,
        t.lost,
        t.injected
    );
    require!(
        i.dropped >= t.lost_decided + t.injected,
        "{} vs decided {} + injected {} (of {} lost)",
        i.dropped,
        t.lost_decided,
        t.injected,
        t.lost
    );
    require!(
        t.lost + t.injected <= i.dropped + a + i.record_lost,
        "lost {} + injected {} vs {} + {a} ambiguous + {} record-lost",
        t.lost,
        t.injected,
        i.dropped,
        i.record_lost
    );
    require!(
        a <= t.undecided,
        "{a} ambiguous vs {} undecided",
        t.undecided
    );
    require!(
        t.lost_at_final_decided <= i.dropped_at_final_stop
            && i.dropped_at_final_stop <= t.lost_at_final,
        "{} vs {} ({} decided)",
        i.dropped_at_final_stop,
        t.lost_at_final,
        t.lost_at_final_decided
    );
    // A re-base is claimed only where every explanation has it.
    require!(
        i.rebased_at_restart <= t.rebase_restart,
        "{} vs {}",
        i.rebased_at_restart,
        t.rebase_restart
    );

    if t.undecided == 0 {
        require!(
            i.dropped == t.lost + t.injected && a == 0 && i.rebased_at_restart == t.rebase_restart,
            "{} ({a} ambiguous) vs lost {} + injected {}, nothing undecided",
            i.dropped,
            t.lost,
            t.injected
        );
    }
    Ok(())
}

/// The interrupt verdict: exact where the records decide, within the
/// places they leave open elsewhere.
fn interrupts(cfg: &ModelConfig, g: &Generated, v: &StreamJudgement) -> Result<(), String> {
    let t = &g.truth;
    let i = &v.interrupts;
    let c = classes(cfg, g);
    let a = i.ambiguous;
    require!(i.unexplained == 0, "{}", i.unexplained);
    require!(
        i.count_wraps == t.count_wraps,
        "{} vs {}",
        i.count_wraps,
        t.count_wraps
    );
    require!(
        i.samples == t.samples - t.injected,
        "{} vs {}",
        i.samples,
        t.samples
    );
    require!(i.injected == t.injected, "{} vs {}", i.injected, t.injected);
    drops(t, i)?;
    check_classes(&c, i, t.undecided == 0)?;
    require!(i.record_lost == 0, "{}", i.record_lost);
    require!(
        i.throttled == t.throttled,
        "{} vs {}",
        i.throttled,
        t.throttled
    );
    // An ambiguous overflow may be one that never was (not pending).
    require!(
        i.overflows - a <= t.overflows && t.overflows <= i.overflows,
        "{} ({a} ambiguous) vs {}",
        i.overflows,
        t.overflows
    );
    let recorded = g
        .observations
        .iter()
        .filter(|o| matches!(o, Observation::Stop { .. }))
        .count() as u64;
    require!(i.stops == recorded, "{} vs {}", i.stops, recorded);
    require!(
        i.stops_without_count == t.stops_unknown,
        "{} vs {}",
        i.stops_without_count,
        t.stops_unknown
    );
    Ok(())
}

/// The deliveries: every interrupt's signal is delivered, merged, a SIGIO
/// or in flight, once.
fn deliveries(cfg: &ModelConfig, g: &Generated, v: &StreamJudgement) -> Result<(), String> {
    let t = &g.truth;
    let d = &v.deliveries;
    require!(d.unmatched == 0, "{}", d.unmatched);
    require!(
        d.signals + d.injected == t.signals,
        "{d:?} vs {}",
        t.signals
    );
    require!(d.sigio == t.sigio, "{} vs {}", d.sigio, t.sigio);
    require!(d.on_time + d.late == d.signals, "{d:?}");
    if cfg.inject_drop_every == 0 {
        require!(
            d.signals + d.sigio + d.coalesced + d.in_flight == t.samples,
            "{d:?} vs {} samples",
            t.samples
        );
        if !cfg.signals_queue {
            // Each signal read before the next interrupt: which interrupt
            // it belongs to is never in doubt.
            require!(
                d.coalesced == t.coalesced,
                "{} vs {}",
                d.coalesced,
                t.coalesced
            );
            require!(
                d.in_flight == t.in_flight,
                "{} vs {}",
                d.in_flight,
                t.in_flight
            );
        }
    } else {
        // Discarded interrupts' signals are counted apart, and discarded
        // interrupts that got none are in neither total.
        require!(
            d.coalesced + d.in_flight <= t.coalesced + t.in_flight,
            "{d:?} vs {t:?}"
        );
    }
    Ok(())
}

fn both(cfg: &ModelConfig, g: &Generated, v: &StreamJudgement) -> Result<(), String> {
    interrupts(cfg, g, v)?;
    deliveries(cfg, g, v)
}

#[test]
fn reset_mode_exact_stops() {
    property(
        "reset_mode_exact_stops",
        |rng, n| {
            let mut cfg = draw_common(rng, RearmMode::Reset, n);
            cfg.signals_queue = rng.bool();
            cfg
        },
        both,
    );
}

/// Reset mode: seed 176 ends at count 10,058 after its last reset with the
/// overflow (due at 10,000) pending at the final DISABLE. Today's handler
/// restarts exactly at the reset, so that is a drop; with the handler
/// before, the records placed the due point only in [10,000, 11,000], and
/// "pending, lost there" and "not yet due" fit alike: ambiguous.
#[test]
fn final_stop_within_the_reset_slack() {
    let mut cfg = ModelConfig::new(10_000, RearmMode::Reset, 20);
    cfg.stops_per_period = 0.0;
    cfg.stop_near_due = 0.0;
    cfg.latency.late = 0;
    cfg.latency.period_late = 0;
    cfg.signal_late = 0.0;
    let g = model::generate(&cfg, 176);
    assert!(matches!(
        g.observations.last(),
        Some(Observation::Final {
            count: Some(10_058),
            ..
        })
    ));
    assert_eq!(g.truth.lost_at_final, 1, "{:?}", g.truth);
    let v = judge(&cfg, &g);
    // Today's handler restarts the event exactly at the reset: the due
    // point is exactly 10,000 and the final DISABLE found it pending.
    assert_eq!(
        (v.interrupts.dropped, v.interrupts.ambiguous),
        (1, 0),
        "{v:?}"
    );
    both(&cfg, &g, &v).unwrap();
    // The handler before placed the restart anywhere in its slack
    // ([10,000, 11,000]): pending or not yet due, both fit.
    let mut old = cfg.judge_config();
    old.restart_at_reset = false;
    let mut j = StreamJudge::new(0, old);
    let (mut w, mut a) = (Vec::new(), Vec::new());
    for o in &g.observations {
        j.observe(o, &mut w, &mut a);
    }
    let v = j.verdict();
    assert_eq!(
        (v.interrupts.dropped, v.interrupts.ambiguous),
        (0, 1),
        "{v:?}"
    );
}

/// Free mode, user-mode counting, every stop recorded with its count: the
/// records decide every stop, so nothing is undecided and the judge must
/// find the truth exactly.
#[test]
fn free_mode_exact_stops() {
    property(
        "free_mode_exact_stops",
        |rng, n| {
            let mut cfg = draw_common(rng, RearmMode::Free, n);
            cfg.signals_queue = rng.bool();
            cfg
        },
        |cfg, g, v| {
            require!(g.truth.undecided == 0, "{:?}", g.truth);
            both(cfg, g, v)
        },
    );
}

/// Pseudo-NMI races that wrap the count by 2^32 at a stop: every wrap
/// found, the grid anchored again on the next sample, nothing called
/// dropped that was not; only the stops between a wrap and that sample are
/// open.
#[test]
fn count_wraps() {
    property(
        "count_wraps",
        |rng, n| {
            let mode = if rng.bool() {
                RearmMode::Free
            } else {
                RearmMode::Reset
            };
            let mut cfg = draw_common(rng, mode, n);
            cfg.pnmi = true;
            cfg.count_wrap = [0.01, 0.1, 0.5][rng.usize(0..3)];
            cfg.stop_near_due = [0.3, 0.9][rng.usize(0..2)];
            cfg.stops_per_period = [0.3, 1.0, 3.0][rng.usize(0..3)];
            if rng.bool() {
                cfg.include_kernel = true;
                cfg.stop_slack = [1, 50, cfg.period / 20][rng.usize(0..3)].max(1);
                cfg.held_stop = [0.0, 0.01, 0.2][rng.usize(0..3)];
            }
            cfg.signals_queue = rng.bool();
            cfg
        },
        |cfg, g, v| {
            require!(
                g.truth.count_wraps > 0 || g.truth.nmi_at_stop == 0,
                "no wrap in {:?}",
                g.truth
            );
            both(cfg, g, v)
        },
    );
}

#[test]
fn counting_kernel_mode() {
    property(
        "counting_kernel_mode",
        |rng, n| {
            let mode = if rng.bool() {
                RearmMode::Free
            } else {
                RearmMode::Reset
            };
            let mut cfg = draw_common(rng, mode, n);
            cfg.include_kernel = true;
            cfg.stop_slack = [1, 50, cfg.period / 20, cfg.period / 4][rng.usize(0..4)].max(1);
            // A vCPU held in the switch path: the stop periods past its
            // witness (under QEMU: up to 75 periods).
            cfg.held_stop = [0.0, 0.01, 0.2][rng.usize(0..3)];
            cfg.signals_queue = rng.bool();
            cfg
        },
        both,
    );
}

#[test]
fn unknown_and_unwitnessed_stops() {
    property(
        "unknown_and_unwitnessed_stops",
        |rng, n| {
            let mode = if rng.bool() {
                RearmMode::Free
            } else {
                RearmMode::Reset
            };
            let mut cfg = draw_common(rng, mode, n);
            cfg.stop_count_unknown = [0.0, 0.01, 0.2][rng.usize(0..3)];
            cfg.witness_throttle = [0.0, 0.01, 0.1][rng.usize(0..3)];
            // No witness at all (`--switch-witness none`) in a third of the
            // streams: every interval between two records may hide a stop
            // that lost an overflow, and an interrupt a period or more past
            // the lowest due point such a stop leaves may be the driver's
            // re-base in the handler. (The model's reading of the records
            // decides no loss without a witness; the other streams catch a
            // judge that never drops.)
            cfg.no_witness = rng.u32(0..3) == 0;
            cfg.include_kernel = rng.u32(0..4) == 0;
            cfg.held_stop = [0.0, 0.05][rng.usize(0..2)];
            cfg.signals_queue = rng.bool();
            cfg
        },
        both,
    );
}

/// The switch witness throttled: the stops at 3,600,000 and 3,800,000 go
/// unrecorded, each clearing its pending overflow, and the next interrupt is
/// taken at 4,003,733 (due 4,000,000). The records also fit that interrupt
/// being the one due at 3,600,000 or 3,800,000, a period or more late
/// (re-based: next due at 4,203,733), and a grid moved at an unrecorded
/// restart; no later record refutes them, so every later stop between the
/// grids is open too (seed 362 of `unknown_and_unwitnessed_stops` at 2x10^7:
/// ambiguous 4, where a model that copied the judge's reasoning counted 3
/// open places; while the witness is throttled every interval may hide a
/// missed stop, and each counts).
#[test]
fn a_grid_moved_at_unwitnessed_stops_leaves_later_stops_uncertain() {
    let mut cfg = ModelConfig::new(200_000, RearmMode::Free, 40);
    cfg.interrupt_skid = 10_000;
    cfg.skid = 20_000;
    cfg.latency.on_time = 45;
    cfg.latency.late = 23;
    cfg.latency.period_late = 20;
    cfg.latency.max_periods = 2;
    cfg.stops_per_period = 0.0;
    cfg.stop_near_due = 0.9;
    cfg.migrations = 0.8956930664795802;
    cfg.stop_slack = 10_000;
    cfg.witness_throttle = 0.01;
    cfg.signal_late = 0.3;
    let g = model::generate(&cfg, 362);
    assert_eq!(g.truth.stops_unwitnessed, 2, "{:?}", g.truth);
    let v = judge(&cfg, &g);
    assert_eq!(v.interrupts.ambiguous, 4, "{v:?}");
    both(&cfg, &g, &v).unwrap();
}

/// Ring gaps (LOST records): the samples and stops in a gap were never
/// written, so the overflows there are `record_lost`, never dropped beyond
/// the truth.
fn ring_gaps(cfg: &ModelConfig, g: &Generated, v: &StreamJudgement) -> Result<(), String> {
    let t = &g.truth;
    let i = &v.interrupts;
    let d = &v.deliveries;
    let a = i.ambiguous;
    // After a gap the judge keeps the grid: where an interrupt or a restart
    // re-based in the gap, the grid moved unseen and a later sample may fit
    // no hypothesis (the judge then re-anchors on it).
    require!(
        i.unexplained <= t.gaps_hiding_rebase,
        "{} vs {}",
        i.unexplained,
        t.gaps_hiding_rebase
    );
    require!(
        i.samples == t.samples - t.injected,
        "{} vs {}",
        i.samples,
        t.samples
    );
    require!(
        i.lost_records == t.lost_records,
        "{} vs {}",
        i.lost_records,
        t.lost_records
    );
    require!(
        d.signals + d.injected == t.signals,
        "{d:?} vs {}",
        t.signals
    );
    require!(d.sigio == t.sigio, "{} vs {}", d.sigio, t.sigio);
    if t.gaps_hiding_rebase > 0 {
        // Known limit (see above): the judge re-anchors on an unexplained
        // sample, and what it judges until the grid is right again (drops at
        // a stop or at the end included) rests on a wrong grid. Such a run
        // is inconclusive (unexplained), never judged clean.
        return Ok(());
    }
    drops(t, i)?;
    require!(
        t.record_lost + t.unwritten_after_unthrottle <= i.record_lost + a,
        "{} + {} vs {} + {a} ambiguous",
        t.record_lost,
        t.unwritten_after_unthrottle,
        i.record_lost
    );
    require!(
        i.throttled == t.throttled,
        "{} vs {}",
        i.throttled,
        t.throttled
    );
    require!(
        d.unmatched <= t.signals_of_record_lost,
        "{} vs {}",
        d.unmatched,
        t.signals_of_record_lost
    );
    let _ = cfg;
    Ok(())
}

#[test]
fn lost_records_and_throttling() {
    property(
        "lost_records_and_throttling",
        |rng, n| {
            let mode = if rng.bool() {
                RearmMode::Free
            } else {
                RearmMode::Reset
            };
            let mut cfg = draw_common(rng, mode, n);
            cfg.ring_loss = [0.0, 0.0005, 0.005, 0.05][rng.usize(0..4)];
            cfg.throttle = [0.0, 0.001, 0.01][rng.usize(0..3)];
            cfg.unthrottle_unwritten = rng.bool();
            cfg.signals_queue = rng.bool();
            cfg
        },
        ring_gaps,
    );
}

/// A hand-written stream, judged: one observation per microsecond.
fn judge_stream(cfg: &ModelConfig, observations: Vec<Observation>) -> StreamJudgement {
    let g = Generated {
        observations,
        truth: Truth::default(),
        samples: Vec::new(),
        decided_losses: Vec::new(),
    };
    judge(cfg, &g)
}

fn sample(time_ns: u64, count: u64) -> Observation {
    Observation::Sample {
        time_ns,
        cpu: 0,
        count,
    }
}

fn signal(time_ns: u64, value: u64) -> Observation {
    Observation::Signal {
        time_ns,
        cpu: 0,
        value,
        si_code: 1,
        delivery: pmustress::judge::Delivery::Overflow,
    }
}

fn stop(time_ns: u64, count: u64) -> Observation {
    Observation::Stop {
        time_ns,
        cpu: 0,
        count: Some(count),
    }
}

/// A stop finds the overflow due at 20,000 pending a period and more past
/// it (30,027): the stop clears it and the restart re-bases (rule 1), next
/// due at 40,027. That interrupt's sample is lost in a ring gap. The grid
/// after the gap is the re-based one: the samples at 50,100 and 60,100 are
/// on time, and the stop at 60,010 found nothing pending. (Seed 72 of
/// `lost_records_and_throttling` at 5x10^6: the judge kept the old grid
/// across the gap and found a later sample unexplained.)
#[test]
fn a_ring_gap_after_a_stop_that_lost_and_re_based() {
    let cfg = ModelConfig::new(10_000, RearmMode::Free, 0);
    let v = judge_stream(
        &cfg,
        vec![
            sample(1_000, 10_100),
            signal(2_000, 10_150),
            stop(3_000, 30_027),
            signal(4_000, 40_150),
            Observation::Lost {
                time_ns: 5_000,
                lost: 1,
            },
            sample(6_000, 50_100),
            signal(7_000, 50_150),
            stop(8_000, 60_010),
            sample(9_000, 60_100),
            signal(10_000, 60_150),
            Observation::Final {
                time_ns: 11_000,
                count: Some(60_200),
            },
        ],
    );
    let i = &v.interrupts;
    assert_eq!(i.unexplained, 0, "{i:?}");
    assert_eq!((i.samples, i.on_time), (3, 3), "{i:?}");
    assert_eq!((i.dropped, i.rebased_at_restart), (1, 1), "{i:?}");
    assert_eq!(i.ambiguous, 0, "{i:?}");
    assert_eq!(i.lost_records, 1, "{i:?}");
}

/// Reset mode: after the reset the records place the due point in
/// [10,000, 11,000] (the PERIOD's restart is somewhere in the handler
/// slack); it was at 10,750. A ring gap (a stop record, nothing pending)
/// comes before the sample at 20,700, the interrupt of that due point 9,950
/// late; the next is due at 20,750 and taken at 20,800. Due points up to
/// 20,700 - period passed in the gap: only those in [10,000, 10,700] of the
/// range. (Seed 72 of `lost_records_and_throttling` at 5x10^6: the judge
/// moved the whole range a period on and found 20,800 unexplained.)
#[test]
fn a_ring_gap_splits_a_due_range_at_its_last_due_point() {
    let mut cfg = ModelConfig::new(10_000, RearmMode::Reset, 0);
    // The handler before rr-style re-arming: the restart anywhere in the
    // slack after the RESET.
    cfg.reset_gap = 30;
    let v = judge_stream(
        &cfg,
        vec![
            sample(1_000, 10_100),
            signal(2_000, 10_150),
            Observation::Reset {
                time_ns: 2_000,
                count: None,
            },
            Observation::Lost {
                time_ns: 3_000,
                lost: 1,
            },
            sample(4_000, 20_700),
            sample(5_000, 20_800),
            Observation::Final {
                time_ns: 6_000,
                count: Some(20_900),
            },
        ],
    );
    let i = &v.interrupts;
    assert_eq!(i.unexplained, 0, "{i:?}");
    assert_eq!((i.samples, i.on_time, i.late), (3, 2, 1), "{i:?}");
    assert_eq!((i.dropped, i.ambiguous), (0, 0), "{i:?}");
    assert_eq!(i.lost_records, 1, "{i:?}");
}

/// Reset mode, ring gaps, throttling (seed 381 of
/// `lost_records_and_throttling` at 2x10^7): samples lost in a gap, their
/// signals and resets delivered, then an interrupt throttles the event. The
/// kernel writes a gap's LOST record first thing when it next writes any
/// record, a THROTTLE too, so the judge learns of the gap before it judges
/// those resets. The model wrote the THROTTLE before the LOST, and the
/// judge, judging the resets' PERIODs with no gap known, found the lost
/// samples' overflows pending there: dropped 2, lost 0.
#[test]
fn a_throttle_record_comes_after_the_lost_record_of_a_gap() {
    let mut cfg = ModelConfig::new(200_000, RearmMode::Reset, 2_306);
    cfg.interrupt_skid = 10_000;
    cfg.skid = 20_000;
    cfg.latency.on_time = 86;
    cfg.latency.late = 14;
    cfg.latency.period_late = 0;
    cfg.latency.max_periods = 1;
    cfg.pnmi = true;
    cfg.stops_per_period = 0.0;
    cfg.stop_near_due = 0.0;
    cfg.migrations = 0.017164360344113033;
    cfg.stop_slack = 10_000;
    cfg.throttle = 0.01;
    cfg.ring_loss = 0.05;
    cfg.signal_late = 0.05;
    let g = model::generate(&cfg, 381);
    assert!(
        g.truth.throttled > 0 && g.truth.ring_gaps > 0,
        "{:?}",
        g.truth
    );
    let v = judge(&cfg, &g);
    assert_eq!(v.interrupts.dropped, g.truth.lost, "{v:?}");
    ring_gaps(&cfg, &g, &v).unwrap();
}

/// Reset mode: an interrupt taken between the handler's RESET and its
/// PERIOD writes a sample counting from the reset, but its record comes
/// before the reset's (whose time is taken after PERIOD). The judge cannot
/// place it: it must call it unexplained (the run inconclusive), never a
/// drop or a clean interrupt on the wrong grid.
/// Reset mode, one stream of `interrupts_between_reset_and_period`: the
/// interrupt at 19,948 is nearly a period late, so its handler reads at
/// 19,960 and RESETs just past the next due point; that overflow's
/// interrupt is taken before the PERIOD, at 7 counted from the RESET, and
/// its sample comes before the signal's reset record. The judge cannot place
/// it (unexplained), but the PERIOD after it is at most the handler slack
/// from the RESET, not past the read: whether the next overflow was due
/// before it is open (ambiguous), never a drop. (Seed 220 at 5x10^6: the
/// PERIOD judged at the read claimed one dropped.)
#[test]
fn an_interrupt_between_reset_and_period_is_never_a_drop() {
    let cfg = ModelConfig::new(10_000, RearmMode::Reset, 0);
    let v = judge_stream(
        &cfg,
        vec![
            sample(1_000, 10_100),
            signal(2_000, 10_150),
            Observation::Reset {
                time_ns: 2_000,
                count: None,
            },
            sample(3_000, 19_948),
            sample(4_000, 7),
            signal(5_000, 19_960),
            Observation::Reset {
                time_ns: 5_000,
                count: None,
            },
            sample(6_000, 10_050),
            signal(7_000, 10_060),
            Observation::Reset {
                time_ns: 7_000,
                count: None,
            },
            Observation::Final {
                time_ns: 8_000,
                count: Some(500),
            },
        ],
    );
    let i = &v.interrupts;
    assert_eq!((i.samples, i.unexplained), (4, 1), "{i:?}");
    assert_eq!((i.dropped, i.ambiguous), (0, 1), "{i:?}");
}

#[test]
fn interrupts_between_reset_and_period() {
    property(
        "interrupts_between_reset_and_period",
        |rng, n| {
            let mut cfg = draw_common(rng, RearmMode::Reset, n);
            cfg.reset_gap = 30;
            cfg.signals_queue = rng.bool();
            cfg
        },
        |cfg, g, v| {
            let t = &g.truth;
            let i = &v.interrupts;
            if t.taken_in_reset_gap == 0 {
                return both(cfg, g, v);
            }
            require!(
                i.unexplained >= 1 && i.unexplained <= t.taken_in_reset_gap,
                "{} vs {}",
                i.unexplained,
                t.taken_in_reset_gap
            );
            // Unexplained, so inconclusive: what the judge says after the
            // sample it cannot place rests on a grid it re-anchored there,
            // so a loss the records decide may be missed (seed 170 at
            // 5x10^6), but never a drop that was not.
            require!(
                i.dropped <= t.lost + t.injected,
                "{} vs {} + {}",
                i.dropped,
                t.lost,
                t.injected
            );
            Ok(())
        },
    );
}

#[test]
fn model_is_deterministic() {
    let mut cfg = ModelConfig::new(10_000, RearmMode::Free, 5_000);
    cfg.latency.period_late = 10;
    cfg.stops_per_period = 1.0;
    let a = model::generate(&cfg, 7);
    let b = model::generate(&cfg, 7);
    assert_eq!(a.observations, b.observations);
    assert_eq!(a.truth, b.truth);
    let c = model::generate(&cfg, 8);
    assert_ne!(a.observations, c.observations);
}

#[test]
fn model_times_increase() {
    for mode in [RearmMode::Free, RearmMode::Reset] {
        let mut cfg = ModelConfig::new(10_000, mode, 20_000);
        cfg.latency.period_late = 10;
        cfg.stops_per_period = 1.0;
        cfg.throttle = 0.01;
        cfg.ring_loss = 0.01;
        cfg.witness_throttle = 0.05;
        cfg.signals_queue = true;
        cfg.coalesce = 0.02;
        let g = model::generate(&cfg, 3);
        let mut prev: Option<&Observation> = None;
        for o in &g.observations {
            if let Some(p) = prev {
                // A reset's record has its signal's time.
                let same_ok = matches!(o, Observation::Reset { .. });
                assert!(
                    o.time_ns() > p.time_ns() || (same_ok && o.time_ns() == p.time_ns()),
                    "{p:?} then {o:?}"
                );
            }
            prev = Some(o);
        }
        assert!(matches!(
            g.observations.last(),
            Some(Observation::Final { .. })
        ));
        let _: &Truth = &g.truth;
    }
}

/// Free mode at a period of 50,000, pseudo-NMI on, kernel mode counted:
/// the setting of the recorded streams below.
fn pnmi_kernel_mode() -> ModelConfig {
    let mut cfg = ModelConfig::new(50_000, RearmMode::Free, 0);
    cfg.pnmi = true;
    cfg.include_kernel = true;
    cfg
}

/// The count wrap recorded under QEMU with pseudo-NMI (smp4-pnmi,
/// w2-roundrobin-free-50k-k, worker 0, at 123,984,379; the driver re-based
/// at 3 restarts and lost nothing), shifted to start at 0: the switch
/// witness reads 1,414 past the due point at 150,000 plus its own delta
/// again (the NMI came inside its update); the NMI's sample, nested in the
/// witness's record, at 150,050; the restart re-bases at 154,050; then
/// 2^32 + 204,102 and on. One wrap, the next sample the anchor, nothing
/// dropped, unexplained or ambiguous; the signals' reads carry the wrap too
/// and are no late signals.
#[test]
fn a_count_wrap_at_a_stop_is_taken_out_and_anchors_the_grid() {
    const WRAP: u64 = 1 << 32;
    let mut cfg = pnmi_kernel_mode();
    cfg.stop_slack = 2_500;
    let v = judge_stream(
        &cfg,
        vec![
            sample(1_000, 50_100),
            signal(1_500, 50_300),
            sample(2_000, 100_050),
            signal(2_500, 100_200),
            stop(3_000, 151_464),
            sample(3_100, 150_050),
            signal(4_000, WRAP + 154_500),
            sample(5_000, WRAP + 204_102),
            signal(5_500, WRAP + 204_300),
            sample(6_000, WRAP + 254_060),
            signal(6_500, WRAP + 254_200),
            sample(7_000, WRAP + 304_055),
            signal(7_500, WRAP + 304_200),
            Observation::Final {
                time_ns: 8_000,
                count: Some(WRAP + 304_100),
            },
        ],
    );
    let i = &v.interrupts;
    assert_eq!((i.count_wraps, i.after_count_wrap), (1, 1), "{i:?}");
    assert_eq!((i.unexplained, i.dropped, i.ambiguous), (0, 0, 0), "{i:?}");
    assert_eq!((i.samples, i.overflows), (6, 6), "{i:?}");
    // Anchored on 204,102: the next two on its grid, none a period late.
    assert_eq!((i.on_time, i.rebased_in_handler), (5, 0), "{i:?}");
    let d = &v.deliveries;
    assert_eq!((d.late_by_a_period, d.unmatched), (0, 0), "{d:?}");
    assert_eq!(
        v.anomalies.get(&pmustress::judge::AnomalyKind::CountWrap),
        Some(&1)
    );
    // The events counted: the wrap taken out of the final count too.
    assert_eq!(v.final_count, Some(304_100));
}

/// The overflow NMI taken inside the stop path (its sample nested in the
/// switch witness's record, below the witness's read), as the skidding
/// QEMU showed with pseudo-NMI, kernel mode counted: the overflow due at
/// 150,000 is taken 40,000 late at 190,000, the handler re-arms for
/// 200,000, and the stop, counting on through its path, finds that one
/// pending and clears it (the signal's read, 201,000, after it). The
/// restart keeps the grid (rule 2): 250,000 and 300,000 come on time. Judged as if nothing could be pending at the stop
/// once its interrupt was taken, 250,900 read as a re-base in the handler
/// and 300,500 then fit nothing: unexplained, where one loss is certain.
#[test]
fn a_stop_that_took_one_interrupt_can_lose_the_next() {
    let cfg = pnmi_kernel_mode();
    let v = judge_stream(
        &cfg,
        vec![
            sample(1_000, 50_100),
            signal(1_500, 50_300),
            sample(2_000, 100_050),
            signal(2_500, 100_200),
            stop(3_000, 190_500),
            sample(3_100, 190_000),
            // Read when the thread ran again, after the stop.
            signal(4_000, 201_000),
            sample(5_000, 250_900),
            signal(5_500, 251_000),
            sample(6_000, 300_500),
            signal(6_500, 300_600),
            Observation::Final {
                time_ns: 8_000,
                count: Some(320_000),
            },
        ],
    );
    let i = &v.interrupts;
    assert_eq!((i.unexplained, i.dropped, i.ambiguous), (0, 1, 0), "{i:?}");
    assert_eq!((i.samples, i.overflows), (5, 6), "{i:?}");
    assert_eq!(
        (i.rebased_in_handler, i.rebased_at_restart),
        (0, 0),
        "{i:?}"
    );
}

/// Recorded on the oracle kernel with pseudo-NMI, zero skid, kernel mode
/// counted (smp4-pnmi, w2-roundrobin-free-50k-k, worker 0): the grid at
/// 8,111; the stop's witness reads 47,572,632, past the next due point
/// (47,558,111), and the sample after it reads 47,523,103, below it: the
/// NMI for 47,508,111 ran inside that read's update. The oracle lost
/// nothing in the whole run, and the grid goes on (47,658,111). Booking
/// 47,558,111 lost at that stop, as a sample nested in a stop path allows
/// where the next due point lies above the read, was one drop more than
/// the oracle allowed; here the records cannot place it (unexplained),
/// never a drop.
#[test]
fn an_interrupt_below_a_stop_read_past_the_next_due_point_is_never_a_drop() {
    let cfg = pnmi_kernel_mode();
    // The recorded rows (raw.csv.gz's), the migrator's moves left out.
    let rows = "\
0,sample,3667586128,0,47308111,\n\
0,stop,3667588816,0,47310431,\n\
0,resume,3667604528,1,47311822,\n\
0,signal,3667607568,1,47315127,1\n\
0,sample,3667651984,1,47358111,\n\
0,signal,3667656544,1,47362541,1\n\
0,stop,3667694320,1,47400077,\n\
0,sample,3667722560,2,47408065,\n\
0,resume,3667724096,2,47409230,\n\
0,signal,3667728608,2,47413991,1\n\
0,sample,3667774160,2,47458111,\n\
0,stop,3667824064,2,47572632,\n\
0,sample,3667890704,2,47523103,\n\
0,resume,3668032528,3,47595610,\n\
0,signal,3668033792,3,47597118,1\n\
0,signal,3668038304,3,47601641,1\n\
0,sample,3668052256,3,47614158,\n\
0,stop,3668055360,3,47616919,\n\
0,signal,3668145616,3,47620269,1\n\
0,sample,3668184896,3,47658111,\n\
0,signal,3668189424,3,47662541,1\n\
0,stop,3668224992,3,47697864,\n\
0,sample,3668250624,3,47708054,\n\
0,stop,3668277616,3,47734712,\n\
0,resume,3668349424,0,47736103,\n\
0,sample,3668404016,0,47789518,\n\
0,sample,3668438432,0,47822377,\n\
0,signal,3668440976,0,47825028,1\n\
0,signal,3668461504,0,47845543,1\n\
0,sample,3668475504,0,47858111,\n\
0,signal,3668480048,0,47862541,1\n\
0,sample,3668527056,0,47908111,\n\
0,signal,3668536976,0,47917921,1";
    let mut stream: Vec<Observation> = rows
        .lines()
        .map(|line| line.parse::<pmustress::records::Row>().unwrap().observation)
        .collect();
    stream.push(Observation::Final {
        time_ns: 3_668_600_000,
        count: Some(47_930_000),
    });
    let v = judge_stream(&cfg, stream);
    let i = &v.interrupts;
    assert_eq!((i.dropped, i.unexplained), (0, 2), "{i:?}");
}

/// A stop before a count wrap cannot have lost an overflow due past the
/// count of the record that showed the wrap (with the jump taken out):
/// the stop came before that record.
#[test]
fn a_stop_before_a_wrap_loses_nothing_due_after_it() {
    const WRAP: u64 = 1 << 32;
    let cfg = pnmi_kernel_mode();
    let v = judge_stream(
        &cfg,
        vec![
            sample(1_000, 50_100),
            signal(1_500, 50_300),
            sample(2_000, 100_050),
            signal(2_500, 100_200),
            stop(3_000, 120_000),
            signal(4_000, WRAP + 130_000),
            sample(5_000, WRAP + 154_102),
            signal(5_500, WRAP + 154_300),
            sample(6_000, WRAP + 204_060),
            signal(6_500, WRAP + 204_200),
            sample(7_000, WRAP + 254_055),
            signal(7_500, WRAP + 254_100),
            Observation::Final {
                time_ns: 8_000,
                count: Some(WRAP + 254_100),
            },
        ],
    );
    let i = &v.interrupts;
    assert_eq!(i.count_wraps, 1, "{i:?}");
    assert_eq!((i.unexplained, i.dropped, i.ambiguous), (0, 0, 0), "{i:?}");
}

/// After a wrap the grid is unknown until a sample anchors it: a stop in
/// between may have lost an overflow (without pseudo-NMI it would have), so
/// a gap of two periods across it is ambiguous, never dropped; without the
/// stop the same gap is an interrupt a period late.
#[test]
fn a_stop_between_a_wrap_and_its_anchor_is_ambiguous_not_dropped() {
    const WRAP: u64 = 1 << 32;
    let cfg = ModelConfig::new(10_000, RearmMode::Free, 0);
    let stream = |with_stop: bool| {
        let mut s = vec![
            sample(1_000, 10_000),
            stop(2_000, 15_000),
            stop(3_000, WRAP + 17_000),
        ];
        if with_stop {
            s.push(stop(4_000, WRAP + 30_000));
        }
        s.push(sample(5_000, WRAP + 37_000));
        s.push(sample(6_000, WRAP + 47_000));
        s.push(Observation::Final {
            time_ns: 7_000,
            count: Some(WRAP + 47_000),
        });
        judge_stream(&cfg, s)
    };
    let with = stream(true).interrupts;
    assert_eq!(
        (with.count_wraps, with.dropped, with.ambiguous),
        (1, 0, 1),
        "{with:?}"
    );
    let without = stream(false).interrupts;
    assert_eq!(
        (without.count_wraps, without.dropped, without.ambiguous),
        (1, 0, 0),
        "{without:?}"
    );
    assert_eq!(without.after_count_wrap, 1, "{without:?}");
}

/// Counting kernel mode, a context switch's witness reads 1,097 past the
/// due point at 100,000, and the next sample is 150,400 (seen under QEMU,
/// smp2 ping-pong, reset mode). With an NMI (x86, pseudo-NMI) its
/// interrupt may have come at 150,400 before the stop (the stop's count is
/// only known up to a period past the witness's): lost there or a period
/// late, ambiguous. An ordinary IRQ is masked from the witness to the stop:
/// lost, certainly.
#[test]
fn an_overflow_pending_at_a_switch_is_lost_where_the_irq_is_masked() {
    for (pnmi, dropped, ambiguous) in [(true, 0, 1), (false, 1, 0)] {
        let mut cfg = ModelConfig::new(50_000, RearmMode::Free, 0);
        cfg.include_kernel = true;
        cfg.stop_slack = 49_999;
        cfg.pnmi = pnmi;
        let v = judge_stream(
            &cfg,
            vec![
                sample(1_000, 50_400),
                stop(2_000, 101_097),
                sample(3_000, 150_400),
                Observation::Final {
                    time_ns: 4_000,
                    count: Some(150_500),
                },
            ],
        );
        let i = &v.interrupts;
        assert_eq!(
            (i.dropped, i.ambiguous),
            (dropped, ambiguous),
            "pnmi {pnmi}: {i:?}"
        );
        assert_eq!(i.unexplained, 0, "{i:?}");
    }
}

/// Counting kernel mode, a switch's witness reads 500 before the due point
/// at 20,000 and the stop itself is anywhere up to a period on: the next
/// sample at 30,050 fits "lost at the stop, the next on time" and "not
/// due at the stop, taken a period late". Where the thread ran again
/// after the migration below the due point (the resume witness at 19,800),
/// the stop was too: nothing was pending, the second is the truth. A
/// resume past the due point settles nothing.
#[test]
fn a_resume_below_the_due_point_says_nothing_was_pending_at_the_stop() {
    let mut cfg = ModelConfig::new(10_000, RearmMode::Free, 0);
    cfg.include_kernel = true;
    cfg.stop_slack = 9_999;
    for (resume, dropped, ambiguous) in [(None, 0, 1), (Some(19_800), 0, 0), (Some(20_300), 0, 1)] {
        let mut s = vec![sample(1_000, 10_100), stop(2_000, 19_500)];
        if let Some(count) = resume {
            s.push(Observation::Resume {
                time_ns: 2_500,
                cpu: 1,
                count,
            });
        }
        s.push(sample(3_000, 30_050));
        s.push(Observation::Final {
            time_ns: 4_000,
            count: Some(30_100),
        });
        let i = judge_stream(&cfg, s).interrupts;
        assert_eq!(
            (i.dropped, i.ambiguous),
            (dropped, ambiguous),
            "{resume:?}: {i:?}"
        );
        assert_eq!(i.unexplained, 0, "{i:?}");
    }
}
