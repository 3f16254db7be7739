/*!
Property tests of the classifier and the per-worker timeline, on the library.

A generated stream is a list of segments, each ending with one overflow whose
signal arrived. Before it, a segment holds overflows that got no signal of
their own, all of one cause: dropped (no sample record, no signal),
coalesced (a sample record, no signal), throttled (between a THROTTLE and an
UNTHROTTLE record: neither), or queue overflow (a sample record and a plain
SIGIO instead of the realtime signal, sometimes next to drops, which the
SIGIO must not hide). The stream is fed to `Timeline` the
way the controller does it (signals up to one instant, kernel records up to
a later one, per drain pass), optionally with `--inject-drop-every`, and the
totals must match what was generated, exactly:

- every overflow up to the last judged signal is accounted once, and the
  windows split into ok + anomalies, with missed overflows per kind;
- hardware mode: `dropped_interrupts` is the drops generated (plus the
  injections revealed); software mode: only the injections.

Skids stay below period/4 per signal, so a delta of k periods is always
within the classifier's tolerance (skid < period/2) of exactly k periods.
*/

use proptest::prelude::*;

use pmustress::classify::{self, AnomalyKind, DeltaClass, Witness};
use pmustress::sample::KernelRecord;
use pmustress::signal::{Delivery, SignalRecord};
use pmustress::timeline::{Mode, Timeline, TimelineConfig, WorkerTotals};

/// Why the overflows of a segment before its signalled one got no signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    /// Just the signalled overflow.
    Clean,
    /// `drops` with no sample and `coalesced` with one, interleaved by `mix`.
    Lost {
        drops: u64,
        coalesced: u64,
        mix: u64,
    },
    /// `n` overflows while throttled; the UNTHROTTLE record comes before the
    /// signalled overflow, or just after its signal when `late`.
    Throttled { n: u64, late: bool },
    /// `n` overflows whose realtime signal fell back to SIGIO (their
    /// interrupts happened: sample records), after `drops` that had none.
    SigIo { n: u64, drops: u64 },
}

#[derive(Debug, Clone)]
struct Stream {
    period: u64,
    /// The classifier's tolerance (< period/2).
    skid: u64,
    segments: Vec<Cause>,
    /// Per signalled overflow: how far past its multiple of the period the
    /// handler read the counter (<= skid/2).
    late_by: Vec<u64>,
    /// Overflows with a sample record after the last signal (in flight).
    tail: u64,
    mode: Mode,
    /// Seed for where drain passes cut the stream and migrations fall.
    cuts: Vec<u64>,
}

fn cause(with_throttle_and_sigio: bool) -> BoxedStrategy<Cause> {
    let lost = (0..4u64, 0..4u64, any::<u64>())
        .prop_map(|(drops, coalesced, mix)| Cause::Lost {
            drops,
            coalesced,
            mix,
        })
        .boxed();
    if with_throttle_and_sigio {
        prop_oneof![
            4 => Just(Cause::Clean),
            2 => lost,
            1 => (0..5u64, any::<bool>()).prop_map(|(n, late)| Cause::Throttled { n, late }),
            1 => (0..5u64, prop_oneof![3 => Just(0u64), 1 => 1..3u64])
                .prop_map(|(n, drops)| Cause::SigIo { n, drops }),
        ]
        .boxed()
    } else {
        prop_oneof![4 => Just(Cause::Clean), 2 => lost].boxed()
    }
}

fn stream(with_throttle_and_sigio: bool) -> impl Strategy<Value = Stream> {
    (
        1_000u64..10_000_000,
        0u64..=100,
        prop::collection::vec(cause(with_throttle_and_sigio), 1..60),
        0u64..3,
        prop_oneof![Just(Mode::Free), Just(Mode::Reset)],
        prop::collection::vec(any::<u64>(), 1..20),
    )
        .prop_flat_map(|(period, skid_pct, mut segments, tail, mode, cuts)| {
            // skid in [0, period/2): here up to 49%.
            let skid = period * skid_pct.min(49) / 100;
            // A late UNTHROTTLE leaves the next window throttled too: only a
            // window that needs no verdict (a clean one) may follow it.
            for i in 1..segments.len() {
                if matches!(segments[i - 1], Cause::Throttled { late: true, .. }) {
                    segments[i] = Cause::Clean;
                }
            }
            let n = segments.len();
            (
                Just(period),
                Just(skid),
                Just(segments),
                prop::collection::vec(0..=skid / 2, n),
                Just(tail),
                Just(mode),
                Just(cuts),
            )
        })
        .prop_map(
            |(period, skid, segments, late_by, tail, mode, cuts)| Stream {
                period,
                skid,
                segments,
                late_by,
                tail,
                mode,
                cuts,
            },
        )
}

/// What the kernel and the handler produced, in time order per stream.
#[derive(Default)]
struct Observed {
    kernel: Vec<KernelRecord>,
    signals: Vec<SignalRecord>,
    moves: Vec<u64>,
    /// Overflow number (1-based) of each realtime signal, in order.
    signalled: Vec<u64>,
    /// Overflow numbers that had no sample record.
    unsampled: Vec<u64>,
    end_ns: u64,
}

/// Overflow `i` happens at 100 i ns: its sample record at +1, its signal at
/// +2; THROTTLE/UNTHROTTLE at -50 or +50.
fn render(s: &Stream) -> Observed {
    let mut o = Observed::default();
    let mut i = 0u64; // overflows so far
    let mut last_signal_value = 0u64;
    let sample = |o: &mut Observed, i: u64| {
        o.kernel.push(KernelRecord::Sample {
            time_ns: 100 * i + 1,
            cpu: (i % 3) as u32,
            // The count in the overflow handler: at the multiple, so no
            // read of its signal comes before it.
            value: i * s.period,
        })
    };
    for (seg, cause) in s.segments.iter().enumerate() {
        let mut late_unthrottle = None;
        match *cause {
            Cause::Clean => {}
            Cause::Lost {
                drops,
                coalesced,
                mix,
            } => {
                // Interleave drops and coalesced overflows by the bits of mix.
                let (mut d, mut c, mut bits) = (drops, coalesced, mix);
                while d + c > 0 {
                    i += 1;
                    let drop_now = c == 0 || (d > 0 && bits & 1 == 1);
                    bits = bits.rotate_right(1);
                    if drop_now {
                        d -= 1;
                        o.unsampled.push(i);
                    } else {
                        c -= 1;
                        sample(&mut o, i);
                    }
                }
            }
            Cause::Throttled { n, late } => {
                o.kernel.push(KernelRecord::Throttle {
                    time_ns: 100 * (i + 1) - 50,
                });
                for _ in 0..n {
                    i += 1;
                    o.unsampled.push(i);
                }
                if late {
                    late_unthrottle = Some(100 * (i + 1) + 50);
                } else {
                    o.kernel.push(KernelRecord::Unthrottle {
                        time_ns: 100 * (i + 1) - 50,
                    });
                }
            }
            Cause::SigIo { n, drops } => {
                for _ in 0..drops {
                    i += 1;
                    o.unsampled.push(i);
                }
                for _ in 0..n {
                    i += 1;
                    sample(&mut o, i);
                    o.signals.push(SignalRecord {
                        value: 0,
                        time_ns: 100 * i + 2,
                        cpu: 0,
                        si_code: 0,
                        delivery: Delivery::SigIo,
                    });
                }
            }
        }
        // The signalled overflow that ends the segment.
        i += 1;
        sample(&mut o, i);
        let value = i * s.period + s.late_by[seg];
        o.signals.push(SignalRecord {
            value: match s.mode {
                Mode::Free => value,
                // Re-armed at every signal: the count restarts after it.
                Mode::Reset => value - last_signal_value,
            },
            time_ns: 100 * i + 2,
            cpu: (i % 3) as u32,
            si_code: 1,
            delivery: Delivery::Overflow,
        });
        o.signalled.push(i);
        last_signal_value = value;
        if let Some(t) = late_unthrottle {
            o.kernel.push(KernelRecord::Unthrottle { time_ns: t });
        }
    }
    for _ in 0..s.tail {
        i += 1;
        sample(&mut o, i);
    }
    o.end_ns = 100 * (i + 1);
    for &c in &s.cuts {
        o.moves.push(c % o.end_ns);
    }
    o.moves.sort_unstable();
    o
}

/// Feeds `o` the controller's way: per drain pass, the signals up to one
/// instant, then kernel records up to a later one (a kernel record always
/// precedes its signal, the ring may hold newer ones), then the moves.
fn feed(s: &Stream, o: &Observed, inject: u64, software: bool) -> WorkerTotals {
    let mut t = Timeline::new(TimelineConfig {
        worker: 0,
        period: s.period,
        skid: s.skid,
        interrupt_skid: s.skid,
        mode: s.mode,
        software,
        inject_drop_every: inject,
    });
    let mut instants: Vec<u64> = s.cuts.iter().map(|c| c % o.end_ns).collect();
    instants.sort_unstable();
    instants.push(o.end_ns);
    let (mut k, mut sg, mut m) = (0, 0, 0);
    for (n, &cut) in instants.iter().enumerate() {
        let ring_cut = instants.get(n + 1).copied().unwrap_or(u64::MAX).max(cut);
        let ring_cut = cut + (ring_cut - cut) / 2;
        let first = sg;
        while sg < o.signals.len() && o.signals[sg].time_ns <= cut {
            sg += 1;
        }
        while k < o.kernel.len() && o.kernel[k].time_ns() <= ring_cut {
            t.add_kernel(o.kernel[k]);
            k += 1;
        }
        while m < o.moves.len() && o.moves[m] <= ring_cut {
            t.add_move(o.moves[m]);
            m += 1;
        }
        for rec in &o.signals[first..sg] {
            for a in t.add_signal(*rec) {
                assert!(a.missed >= a.dropped, "{a:?}");
                assert_ne!(a.kind, AnomalyKind::ToolError);
            }
        }
    }
    for &rec in &o.kernel[k..] {
        t.add_kernel(rec);
    }
    for &rec in &o.signals[sg..] {
        t.add_signal(rec);
    }
    t.finish().clone()
}

fn count(v: &[(AnomalyKind, u64)], kind: AnomalyKind) -> u64 {
    v.iter().find(|(k, _)| *k == kind).map_or(0, |(_, n)| *n)
}

/// Windows partition the judged signals, and each window accounts for its
/// signalled overflow plus the ones it missed.
fn assert_windows_partition(t: &WorkerTotals) {
    let windows: u64 = t.anomalies.iter().map(|(_, n)| n).sum();
    let missed: u64 = t.missed_overflows.iter().map(|(_, n)| n).sum();
    assert_eq!(t.ok + windows, t.signals, "{t:#?}");
    assert_eq!(t.accounted_overflows, t.signals + missed, "{t:#?}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// No injection: every cause lands in its own bucket, exactly.
    #[test]
    fn every_overflow_is_accounted_once_in_its_own_kind(
        s in stream(true),
        software in any::<bool>(),
    ) {
        let o = render(&s);
        let t = feed(&s, &o, 0, software);
        assert_windows_partition(&t);

        let last = *o.signalled.last().unwrap();
        let total = last + s.tail;
        prop_assert_eq!(t.accounted_overflows, last);
        prop_assert_eq!(t.accounted_overflows + t.tail_samples, total);
        prop_assert_eq!(t.tail_samples, s.tail);
        prop_assert_eq!(t.signals, s.segments.len() as u64);
        prop_assert_eq!(t.kernel_samples, total - o.unsampled.len() as u64);
        prop_assert_eq!(t.injected, 0);

        let (mut ok, mut drops, mut lost_windows, mut lost_missed) = (0, 0, 0, 0);
        let (mut coalesced_windows, mut coalesced_missed) = (0, 0);
        let (mut thr_windows, mut thr_missed, mut thr_records) = (0, 0, 0);
        let (mut sigio_windows, mut sigio_missed) = (0, 0);
        for c in &s.segments {
            match *c {
                Cause::Clean
                | Cause::Throttled { n: 0, .. }
                | Cause::SigIo { n: 0, drops: 0 }
                | Cause::Lost { drops: 0, coalesced: 0, .. } => ok += 1,
                Cause::Lost { drops: 0, coalesced, .. } => {
                    coalesced_windows += 1;
                    coalesced_missed += coalesced;
                }
                // A SIGIO explains missing signals, never a missing
                // interrupt: on hardware a window with both is judged on its
                // samples; on a software clock the missing ones are the timer
                // skipping, and the SIGIO is what the window shows.
                Cause::SigIo { drops: d @ 1.., n } if !software || n == 0 => {
                    drops += d;
                    lost_windows += 1;
                    lost_missed += d + n;
                }
                Cause::SigIo { drops: d @ 1.., n } => {
                    sigio_windows += 1;
                    sigio_missed += d + n;
                }
                Cause::Lost { drops: d, coalesced: c, .. } => {
                    drops += d;
                    lost_windows += 1;
                    lost_missed += d + c;
                }
                Cause::Throttled { n, .. } => {
                    thr_windows += 1;
                    thr_missed += n;
                }
                Cause::SigIo { n, drops: 0 } => {
                    sigio_windows += 1;
                    sigio_missed += n;
                }
            }
            if matches!(c, Cause::Throttled { .. }) {
                thr_records += 1;
            }
        }
        prop_assert_eq!(t.ok, ok);
        let sigio: u64 = s
            .segments
            .iter()
            .map(|c| match c {
                Cause::SigIo { n, .. } => *n,
                _ => 0,
            })
            .sum();
        prop_assert_eq!(t.sigio, sigio);
        prop_assert_eq!(t.throttle_records, thr_records);
        prop_assert_eq!(t.unthrottle_records, thr_records);
        let a = |k| count(&t.anomalies, k);
        let m = |k| count(&t.missed_overflows, k);
        prop_assert_eq!(a(AnomalyKind::CoalescedSignal), coalesced_windows);
        prop_assert_eq!(m(AnomalyKind::CoalescedSignal), coalesced_missed);
        prop_assert_eq!(a(AnomalyKind::Throttled), thr_windows);
        prop_assert_eq!(m(AnomalyKind::Throttled), thr_missed);
        prop_assert_eq!(a(AnomalyKind::SignalQueueOverflow), sigio_windows);
        prop_assert_eq!(m(AnomalyKind::SignalQueueOverflow), sigio_missed);
        let lost_kind = if software {
            AnomalyKind::SoftwareTimerSkip
        } else {
            AnomalyKind::DroppedInterrupt
        };
        prop_assert_eq!(a(lost_kind), lost_windows);
        prop_assert_eq!(m(lost_kind), lost_missed);
        prop_assert_eq!(t.dropped_interrupts, if software { 0 } else { drops });
        for k in [
            AnomalyKind::WitnessLost,
            AnomalyKind::Late,
            AnomalyKind::Early,
            AnomalyKind::ToolError,
        ] {
            prop_assert_eq!(a(k), 0, "{}", k);
        }
    }

    /// `--inject-drop-every N` on top of drops and coalescing: the injected
    /// overflows come back as dropped interrupts, exactly (software mode:
    /// only they do), and the books still close.
    #[test]
    fn injected_drops_come_back_exactly(
        s in stream(false),
        inject in 2u64..12,
        software in any::<bool>(),
    ) {
        let o = render(&s);
        let t = feed(&s, &o, inject, software);
        assert_windows_partition(&t);

        // Signals numbered 1.. in order; multiples of `inject` are discarded.
        let seqs = o.signalled.len() as u64;
        let judged: Vec<u64> = (1..=seqs).filter(|q| q % inject != 0).collect();
        prop_assume!(!judged.is_empty());
        let last_judged = *judged.last().unwrap();
        // The overflow of the last judged signal closes the books; what was
        // injected after it has no window to show in.
        let last_overflow = o.signalled[(last_judged - 1) as usize];
        let revealed = last_judged / inject;
        let real_drops = o.unsampled.iter().filter(|&&i| i < last_overflow).count() as u64;
        prop_assert_eq!(t.signals, judged.len() as u64);
        prop_assert_eq!(t.injected, revealed);
        prop_assert_eq!(t.accounted_overflows, last_overflow);
        prop_assert_eq!(
            t.dropped_interrupts,
            if software { revealed } else { revealed + real_drops }
        );
        // Every sample record is seen once, less one per injection.
        let total = *o.signalled.last().unwrap() + s.tail;
        prop_assert_eq!(
            t.kernel_samples,
            total - o.unsampled.len() as u64 - seqs / inject
        );
    }

    /// The classifier's contract, for skid < period/2.
    #[test]
    fn classify_delta_picks_the_nearest_multiple(
        period in 1u64..=u64::MAX / 4,
        skid_frac in 0.0f64..0.5,
        k in 0u64..64,
        off_frac in -1.0f64..1.0,
    ) {
        let skid = ((period as f64 * skid_frac) as u64).min((period - 1) / 2);
        let off = (off_frac * period as f64 / 2.0) as i128;
        let delta = (k as i128 * period as i128 + off).clamp(0, u64::MAX as i128) as u64;
        let class = classify::classify_delta(delta, period, skid);
        // The nearest multiple, in exact arithmetic.
        let near = (0..=k + 1)
            .min_by_key(|&j| (delta as i128 - j as i128 * period as i128).unsigned_abs())
            .unwrap();
        let dist = (delta as i128 - near as i128 * period as i128).unsigned_abs();
        match class {
            DeltaClass::Ok => {
                prop_assert!(delta.abs_diff(period) <= skid);
                prop_assert_eq!(near, 1);
            }
            DeltaClass::Missed { missed } => {
                prop_assert_eq!(missed + 1, near);
                prop_assert!(near >= 2 && dist <= skid as u128);
            }
            DeltaClass::Late => {
                prop_assert!(delta > period && (dist > skid as u128 || near == 0));
            }
            DeltaClass::Early => {
                prop_assert!(delta < period && (dist > skid as u128 || near == 0));
            }
        }
        // Within skid of a multiple >= 1 is never late or early.
        if near >= 1 && dist <= skid as u128 {
            let judged = matches!(class, DeltaClass::Ok | DeltaClass::Missed { .. });
            prop_assert!(judged, "{:?}", class);
        }
    }

    /// Any delta at all (a counter that went backwards wraps to a huge one):
    /// no panic, and a late or early window accounts for the nearest
    /// multiple of the period, not a wrapped-around one.
    #[test]
    fn judge_accounts_the_nearest_multiple_of_any_delta(
        delta in any::<u64>(),
        period in 1u64..=u64::MAX,
        skid_frac in 0.0f64..0.5,
        samples in 0u64..4,
        software in any::<bool>(),
    ) {
        let skid = ((period as f64 * skid_frac) as u64).min((period - 1) / 2);
        let class = classify::classify_delta(delta, period, skid);
        let w = Witness { kernel_samples: samples, ..Witness::default() };
        let j = classify::judge(class, delta, period, &w, software);
        let nearest = ((delta as u128 + period as u128 / 2) / period as u128) as u64;
        match class {
            DeltaClass::Ok => prop_assert_eq!(j.overflows, 1),
            DeltaClass::Missed { missed } => prop_assert_eq!(j.overflows, missed + 1),
            DeltaClass::Late | DeltaClass::Early => prop_assert_eq!(j.overflows, nearest),
        }
        prop_assert!(j.dropped <= j.missed);
        prop_assert!(j.missed <= j.overflows.max(1));
    }
}

/// One overflow of a hardware counter in free mode, for the late-signal
/// model: its interrupt may be lost, its signal merged into the next, and
/// the read of whatever signal comes may lag by up to a few periods.
#[derive(Debug, Clone, Copy)]
struct Overflow {
    lost: bool,
    merged: bool,
    /// Events between the overflow and the read of its signal.
    lag: u64,
    /// Events between the overflow and its interrupt (<= skid).
    skid: u64,
    /// Sample records the ring holds beyond this read when it is drained.
    lookahead: u8,
}

fn overflows() -> impl Strategy<Value = Vec<Overflow>> {
    prop::collection::vec(
        (
            prop::bool::weighted(0.1),
            prop::bool::weighted(0.1),
            prop_oneof![6 => 0u64..50, 1 => 0u64..350_000],
            0u64..=40,
            0u8..3,
        )
            .prop_map(|(lost, merged, lag, skid, lookahead)| Overflow {
                lost,
                merged,
                lag,
                skid,
                lookahead,
            }),
        1..200,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// On hardware, however late signals are read and however the kernel
    /// merges them, the dropped interrupts are exactly the overflows with
    /// no interrupt that a later interrupt reveals: no more, no fewer.
    #[test]
    fn late_and_merged_signals_never_fake_or_hide_a_drop(ovs in overflows()) {
        const P: u64 = 100_000;
        const SKID: u64 = 50;
        // Sample records and signal reads, on the counter's own axis.
        let mut samples = Vec::new();
        let mut reads: Vec<u64> = Vec::new();
        for (i, o) in ovs.iter().enumerate() {
            let at = (i as u64 + 1) * P;
            if o.lost {
                continue;
            }
            samples.push((at + o.skid, o.lookahead));
            if o.merged {
                continue;
            }
            // Signals are delivered in order: a read never precedes the
            // previous one, nor its own interrupt.
            let floor = reads.last().map_or(0, |r| r + 1);
            reads.push((at + o.skid + o.lag).max(floor));
        }
        prop_assume!(!reads.is_empty());
        let mut t = Timeline::new(TimelineConfig {
            worker: 0,
            period: P,
            skid: SKID,
            interrupt_skid: SKID,
            mode: Mode::Free,
            software: false,
            inject_drop_every: 0,
        });
        // Feed: per read, first the ring (everything up to the read and a
        // little beyond), then the signal.
        let mut given = 0;
        for (n, &r) in reads.iter().enumerate() {
            let mut upto = samples.partition_point(|s| s.0 <= r);
            if let Some(s) = samples.get(upto) {
                upto = (upto + usize::from(s.1)).min(samples.len());
            }
            while given < upto {
                t.add_kernel(KernelRecord::Sample {
                    time_ns: 2 * given as u64,
                    cpu: 0,
                    value: samples[given].0,
                });
                given += 1;
            }
            let a = t.add_signal(SignalRecord {
                value: r,
                time_ns: 2 * n as u64 + 1,
                cpu: 0,
                si_code: 1,
                delivery: Delivery::Overflow,
            });
            for a in a {
                prop_assert!(a.dropped <= a.missed, "{:?}", a);
            }
        }
        for &(value, _) in &samples[given..] {
            t.add_kernel(KernelRecord::Sample { time_ns: u64::MAX, cpu: 0, value });
        }
        let totals = t.finish().clone();
        // Revealed: lost overflows below the last sample a read passed.
        let last_read = *reads.last().unwrap();
        let last_passed = samples.iter().filter(|s| s.0 <= last_read).map(|s| s.0).max();
        let revealed = match last_passed {
            None => 0,
            Some(v) => ovs
                .iter()
                .enumerate()
                .filter(|(i, o)| o.lost && (*i as u64 + 1) * P < v)
                .count() as u64,
        };
        prop_assert_eq!(totals.dropped_interrupts, revealed);
        prop_assert_eq!(totals.kernel_samples, samples.len() as u64);
        prop_assert_eq!(totals.signals, reads.len() as u64);
        prop_assert_eq!(
            totals.accounted_overflows,
            last_passed.map_or(0, |v| v / P)
        );
    }
}
