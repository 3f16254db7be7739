use super::*;

fn stream(overflows: u64, dropped: u64) -> InterruptTotals {
    InterruptTotals {
        overflows,
        dropped,
        samples: overflows - dropped,
        on_time: overflows - dropped,
        ..InterruptTotals::default()
    }
}

fn settings() -> Settings {
    Settings {
        software: false,
        mode: RearmMode::Free,
        period: 100_000,
        inject_drop_every: None,
        migrates: true,
        bisect_overflows_needed: None,
        stops_needed: 0,
        bisect_stops_needed: None,
        asked_witness: SwitchWitness::Auto,
        count_rate_bounded: false,
    }
}

fn words<T: ToString>(all: &[T]) -> Vec<String> {
    all.iter().map(ToString::to_string).collect()
}

fn decide_stream(i: &InterruptTotals, d: &DeliveryTotals, s: &Settings) -> Decision {
    decide(&Evidence::stream(i, d, 0.0, None), s)
}

/// 0.99^299 = 0.0495 <= 0.05 < 0.99^298: 299 overflows without a drop
/// bound the rate below 1% at 95%, 298 do not.
#[test]
fn a_clean_verdict_needs_299_overflows() {
    assert_eq!(overflows_needed(), 299);
    let d = DeliveryTotals::default();
    let short = decide_stream(&stream(298, 0), &d, &settings());
    assert_eq!(
        words(&short.reasons),
        [
            "not enough overflows: 298 measured, 299 needed to bound the dropped rate below 0.01 at 95% confidence; run longer"
        ]
    );
    assert_eq!(
        (short.verdict, short.exit_status),
        (Verdict::Inconclusive, 125)
    );
    let enough = decide_stream(&stream(299, 0), &d, &settings());
    assert_eq!((enough.verdict, enough.exit_status), (Verdict::Clean, 0));
    assert!(enough.reasons.is_empty());
    // A drop is a drop however short the run.
    let dropped = decide_stream(&stream(9, 1), &d, &settings());
    assert_eq!(
        (dropped.verdict, dropped.exit_status),
        (Verdict::Dropped, 1)
    );
    assert!(dropped.reasons.is_empty());
}

/// The order of the rule: an interruption before a drop, a drop before
/// anything inconclusive.
#[test]
fn interrupted_then_dropped_then_inconclusive_then_clean() {
    let sig = StopReason::Signal(2);
    assert_eq!(verdict_of(Some(&sig), 5, true), (Verdict::Interrupted, 130));
    assert_eq!(
        verdict_of(Some(&StopReason::Duration), 5, true),
        (Verdict::Dropped, 1)
    );
    assert_eq!(verdict_of(None, 0, true), (Verdict::Inconclusive, 125));
    assert_eq!(verdict_of(None, 0, false), (Verdict::Clean, 0));
}

/// A self-test: 10 overflows, 2 discarded by us. Too few overflows for a
/// machine's verdict does not matter; exactly the injected drops pass,
/// one more fails, nothing injected is inconclusive.
#[test]
fn a_self_test_passes_on_exactly_its_drops() {
    let s = Settings {
        inject_drop_every: Some(5),
        ..settings()
    };
    let d = DeliveryTotals::default();
    let injected = |dropped, injected, found| InterruptTotals {
        injected,
        injected_found: found,
        ..stream(10, dropped)
    };
    let pass = decide_stream(&injected(2, 2, 2), &d, &s);
    assert_eq!(
        (pass.verdict, pass.exit_status),
        (Verdict::SelfTestPassed, 0)
    );
    assert!(pass.reasons.is_empty(), "{:?}", words(&pass.reasons));
    for (dropped, found) in [(3, 2), (2, 1), (1, 1)] {
        let fail = decide_stream(&injected(dropped, 2, found), &d, &s);
        assert_eq!(
            (fail.verdict, fail.exit_status),
            (Verdict::SelfTestFailed, 1),
            "{dropped} dropped, {found} found"
        );
    }
    let none = decide_stream(&injected(0, 0, 0), &d, &s);
    assert_eq!(
        (none.verdict, none.exit_status),
        (Verdict::Inconclusive, 125)
    );
    assert_eq!(
        words(&none.reasons),
        [
            "the self-test discarded no overflow: each worker needs --inject-drop-every overflows for one; run longer or lower it"
        ]
    );
}

/// A replayed stream's verdict with the run's own reasons: an
/// interruption first, then a drop or a failed self-test, then anything
/// inconclusive, then the pass.
#[test]
fn the_run_adds_its_interruption_and_reasons_to_a_stream() {
    let sig = StopReason::Signal(15);
    for v in [Verdict::Clean, Verdict::Dropped, Verdict::SelfTestPassed] {
        assert_eq!(
            with_the_run(v, Some(&sig), false),
            (Verdict::Interrupted, 143)
        );
    }
    for v in [Verdict::Dropped, Verdict::SelfTestFailed] {
        assert_eq!(with_the_run(v, None, true), (v, 1));
    }
    for v in [Verdict::Clean, Verdict::SelfTestPassed] {
        assert_eq!(with_the_run(v, None, false), (v, 0));
        assert_eq!(with_the_run(v, None, true), (Verdict::Inconclusive, 125));
    }
    assert_eq!(
        with_the_run(Verdict::Inconclusive, None, false),
        (Verdict::Inconclusive, 125)
    );
}

/// A drop is a real miss even when something else could not be judged:
/// the ambiguous overflows stay a reason, the verdict is dropped.
#[test]
fn a_drop_with_ambiguous_overflows_is_dropped_and_says_why() {
    let mut i = stream(1000, 2);
    i.ambiguous = 3;
    let d = DeliveryTotals::default();
    let e = Evidence::stream(&i, &d, 0.5, None);
    let v = decide(&e, &settings());
    assert_eq!(v.verdict, Verdict::Dropped);
    assert_eq!(
        v.reasons,
        [Reason::Ambiguous {
            overflows: 3,
            expected_coincidences: 0.5
        }]
    );
    assert_eq!(
        v.reasons[0].to_string(),
        "3 overflows fit both a lost interrupt and one a period late (chance coincidences expected: 0.50); not counted as dropped"
    );
}

/// Lost sample records hide overflows a PMU could have lost; a software
/// clock loses none there, so they are only a warning for it.
#[test]
fn lost_records_are_a_reason_for_a_pmu_and_a_warning_for_a_software_clock() {
    let mut i = stream(1000, 0);
    i.lost_records = 4;
    let d = DeliveryTotals {
        unrecorded: 6,
        ..DeliveryTotals::default()
    };
    let pmu = decide_stream(&i, &d, &settings());
    assert_eq!(pmu.reasons, [Reason::LostRecords(4)]);
    let software = Settings {
        software: true,
        ..settings()
    };
    let sw = decide_stream(&i, &d, &software);
    assert!(sw.reasons.is_empty());
    assert_eq!(sw.verdict, Verdict::Clean);
    assert!(sw.warnings.contains(&Warning::LostRecords {
        lost: 4,
        unrecorded: 6
    }));
}

/// Each stream count that cannot be judged is a reason of its own, in a
/// fixed order, and a replay finds every one of them again.
#[test]
fn every_stream_reason_comes_from_the_stream() {
    let mut i = stream(10, 0);
    i.unexplained = 1;
    i.lost_records = 2;
    let d = DeliveryTotals {
        unmatched: 3,
        wrong_thread: 4,
        read_failures: 5,
        ..DeliveryTotals::default()
    };
    let v = decide_stream(&i, &d, &settings());
    assert_eq!(
        v.reasons,
        [
            Reason::NotEnoughOverflows {
                measured: 10,
                needed: 299
            },
            Reason::Unexplained(1),
            Reason::LostRecords(2),
            Reason::UnmatchedSignals(3),
            Reason::WrongThread(4),
            Reason::ReadFailures(5),
        ]
    );
    assert!(v.reasons.iter().all(Reason::from_stream));
}

fn worker(n: usize, implied: Option<u64>, accounted: u64) -> WorkerEntry {
    WorkerEntry {
        worker: n,
        final_count: None,
        stalled: None,
        switch_witness: SwitchWitness::Counts,
        ring_bytes: 0,
        counts: Counts {
            implied_overflows: implied,
            accounted_overflows: accounted,
            ..Counts::default()
        },
    }
}

/// What only a run has: its stalled workers, its own failures, a final
/// count that disagrees with the judge, an early stop; none of it is a
/// stream's, so a replay does not expect to find it.
#[test]
fn a_runs_own_reasons_are_not_the_streams() {
    let mut stalled = worker(0, None, 0);
    stalled.stalled = Some("worker 0 stopped answering".to_string());
    let workers = [stalled, worker(1, Some(400), 399)];
    let totals = Counts {
        interrupts: stream(400, 0),
        signals: 0,
        signal_ring_overflows: 1,
        garbled_kernel_bytes: 2,
        reordered_observations: 5,
        ..Counts::default()
    };
    let stop = StopReason::OutputFailed("disk full".to_string());
    let side = RunSide {
        workers: &workers,
        stop: &stop,
        stray_signals: (3, 4),
        foreign_signals: 6,
        held: crate::domain::Held::default(),
        max_sample_rate: (Some(100_000), Some(50_000)),
        perf_event_paranoid: Some(1),
    };
    let s = Settings {
        mode: RearmMode::Reset,
        bisect_overflows_needed: Some(1000),
        ..settings()
    };
    let v = decide(&Evidence::run(&totals, side), &s);
    assert_eq!(
        v.reasons,
        [
            Reason::Stalled("worker 0 stopped answering".to_string()),
            Reason::NoSignal,
            Reason::SignalRingFull(1),
            Reason::GarbledKernelBytes(2),
            Reason::StrayFd(3),
            Reason::StraySigio(4),
            Reason::Reordered(5),
            Reason::ImpliedOverflows {
                worker: 1,
                implied: 400,
                accounted: 399
            },
            Reason::OutputFailed("disk full".to_string()),
            Reason::BisectTooFew {
                measured: 0,
                needed: 1000
            },
        ]
    );
    assert!(!v.reasons.iter().any(Reason::from_stream));
    assert_eq!((v.verdict, v.exit_status), (Verdict::Inconclusive, 125));
    assert_eq!(
        v.warnings,
        [
            Warning::ForeignSignals(6),
            Warning::SampleRateLowered {
                from: 100_000,
                to: 50_000
            },
            Warning::NoMigration
        ]
    );
    // Free mode: the order of observations moves no reset.
    let free = decide(&Evidence::run(&totals, side), &settings());
    assert!(!free.reasons.contains(&Reason::Reordered(5)));
}

/// run.json holds the words; any words read back stay as written, so a
/// file written by an older pmustress (or with words changed since) reads
/// and writes back the same.
#[test]
fn reasons_and_warnings_are_their_words_in_run_json() {
    let reasons = vec![
        Reason::NoSignal,
        Reason::StrayFd(2),
        Reason::PartialFiles(vec!["raw.csv.gz".into(), "anomalies.csv".into()]),
    ];
    let json = serde_json::to_string(&reasons).unwrap();
    assert_eq!(
        json,
        r#"["no overflow signal was received at all","2 overflow signals carried an unknown fd","results could not all be written: raw.csv.gz, anomalies.csv cut back to the last complete line"]"#
    );
    let back: Vec<Reason> = serde_json::from_str(&json).unwrap();
    assert_eq!(words(&back), words(&reasons));
    assert!(matches!(back[0], Reason::AsWritten(_)));
    let warnings = vec![Warning::SelfTest { every: 2 }, Warning::Throttled(1)];
    let json = serde_json::to_string(&warnings).unwrap();
    let back: Vec<Warning> = serde_json::from_str(&json).unwrap();
    assert_eq!(words(&back), words(&warnings));
    assert_eq!(
        back[0].to_string(),
        "self-test: every 2nd overflow interrupt was discarded on purpose (--inject-drop-every); these results prove the detector, not the machine"
    );
    assert!(
        back[1]
            .to_string()
            .starts_with("the kernel throttled the event 1 time (")
    );
}

/// A late p99.9 suggests a period four times the latency.
#[test]
fn a_late_p999_suggests_a_period() {
    let mut totals = Counts {
        interrupts: stream(1000, 0),
        signals: 1000,
        migrations_requested: 1,
        ..Counts::default()
    };
    totals.interrupt_latency.p999 = Some(0.5);
    let stop = StopReason::Duration;
    let side = RunSide {
        workers: &[],
        stop: &stop,
        stray_signals: (0, 0),
        foreign_signals: 0,
        held: crate::domain::Held::default(),
        max_sample_rate: (None, None),
        perf_event_paranoid: None,
    };
    let v = decide(&Evidence::run(&totals, side), &settings());
    assert_eq!(
        v.warnings,
        [Warning::LateInterrupts {
            p999: 0.5,
            suggested_period: 200_000
        }]
    );
    assert_eq!(v.verdict, Verdict::Clean);
    totals.interrupt_latency.p999 = Some(0.25);
    assert!(
        decide(&Evidence::run(&totals, side), &settings())
            .warnings
            .is_empty()
    );
}

#[test]
fn pooled_runs() {
    assert_eq!(pooled(1, true), Verdict::Dropped);
    assert_eq!(pooled(0, true), Verdict::Clean);
    assert_eq!(pooled(0, false), Verdict::Inconclusive);
}

/// A run without the count witness says why and the one command that gets
/// it: the kernel's refusal (auto fell back) or the user's choice.
#[test]
fn a_run_without_the_count_witness_says_how_to_get_it() {
    let totals = Counts {
        interrupts: stream(1000, 0),
        signals: 1000,
        migrations_requested: 10,
        ..Counts::default()
    };
    let stop = StopReason::Duration;
    let with = |got: [SwitchWitness; 2], asked, paranoid, software| {
        let workers: Vec<WorkerEntry> = got
            .iter()
            .enumerate()
            .map(|(n, &w)| WorkerEntry {
                switch_witness: w,
                ..worker(n, Some(500), 500)
            })
            .collect();
        let side = RunSide {
            workers: &workers,
            stop: &stop,
            stray_signals: (0, 0),
            foreign_signals: 0,
            held: crate::domain::Held::default(),
            max_sample_rate: (None, None),
            perf_event_paranoid: paranoid,
        };
        let s = Settings {
            asked_witness: asked,
            software,
            ..settings()
        };
        words(&decide(&Evidence::run(&totals, side), &s).warnings)
            .into_iter()
            .filter(|w| w.contains("witnessed"))
            .collect::<Vec<_>>()
    };
    use SwitchWitness::{Auto, Counts as Exact, None as Unseen, Times};
    let refused = with([Exact, Times], Auto, Some(2), false);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(refused[0].contains("without their counts"), "{refused:?}");
    assert!(refused[0].contains("perf_event_paranoid 2"), "{refused:?}");
    assert!(
        refused[0].contains("`sudo sysctl kernel.perf_event_paranoid=1`"),
        "{refused:?}"
    );
    let chosen = with([Unseen, Unseen], Unseen, Some(-1), false);
    assert_eq!(chosen.len(), 1, "{chosen:?}");
    assert!(chosen[0].contains("(--switch-witness none)"), "{chosen:?}");
    assert!(
        chosen[0].contains("use --switch-witness counts"),
        "{chosen:?}"
    );
    // The weakest witness any worker got is the one named.
    let mixed = with([Times, Unseen], Times, None, false);
    assert!(mixed[0].contains("(--switch-witness none)"), "{mixed:?}");
    assert!(with([Exact, Exact], Auto, Some(2), false).is_empty());
    assert!(with([Unseen, Unseen], Unseen, None, true).is_empty());
}

/// One kernel has one driver: streams that refuted the stock driver's
/// rules make drops elsewhere that rest on them, or a stream that refuted
/// the delivering driver's, inconclusive; alone they are a warning.
#[test]
fn workers_that_disagree_on_the_driver_are_inconclusive() {
    let d = DeliveryTotals::default();
    let mut fixed = stream(1_000, 0);
    fixed.stock_rules_refuted = 2;
    let v = decide_stream(&fixed, &d, &settings());
    assert_eq!((v.verdict, v.exit_status), (Verdict::Clean, 0));
    assert_eq!(v.warnings, [Warning::DeliveringDriver(2)]);

    let mut stock = stream(1_000, 3);
    stock.dropped_assuming_stock = 3;
    let v = decide_stream(&stock, &d, &settings());
    assert_eq!((v.verdict, v.exit_status), (Verdict::Dropped, 1));
    assert_eq!(v.warnings, [Warning::DroppedAssumingStock(3)]);
    assert!(v.reasons.is_empty());

    // The drops that rest on the stock driver's rules are not certain.
    for (delivering_refuted, assuming) in [(1, 0), (0, 3)] {
        let mut mixed = stream(1_000, assuming);
        mixed.stock_rules_refuted = 1;
        mixed.delivering_rules_refuted = delivering_refuted;
        mixed.dropped_assuming_stock = assuming;
        let v = decide_stream(&mixed, &d, &settings());
        assert_eq!((v.verdict, v.exit_status), (Verdict::Inconclusive, 125));
        assert_eq!(
            v.reasons,
            [Reason::DriversDisagree {
                stock_refuted: 1,
                delivering_refuted,
                dropped_assuming_stock: assuming,
            }]
        );
        assert!(v.reasons.iter().all(Reason::from_stream));
    }
}

/// The expected chance coincidences grow with the interrupt skid's window
/// until it covers a whole period, then every interrupt re-based in the
/// handler may be one, and no more.
#[test]
fn coincidences_never_exceed_the_interrupts_re_based_in_the_handler() {
    let i = InterruptTotals {
        rebased_in_handler: 8,
        ..InterruptTotals::default()
    };
    let expected = |skid| coincidences(&i, skid, 100);
    assert_eq!(
        [0, 49, 50, 99].map(expected),
        [8.0 * 0.01, 8.0 * 0.99, 8.0, 8.0]
    );
}
