/*!
The verdict rule, in one place: `decide` is a pure function from a run's
totals and its settings to a verdict, the typed reasons it is inconclusive
and the typed warnings a reader must know. The run (`totals`), a replayed
stream (`replay`) and the readers (report, plot) all take their verdict
and their words from here.

The rule: a run stopped by a signal is `interrupted`; otherwise `dropped`
when the judge found an overflow whose interrupt never happened under
every explanation of the kernel's records; otherwise `inconclusive` when
anything could not be judged (a `Reason`); otherwise `clean`.

A reason (`reason.rs`) or a warning (`warning.rs`) is a variant with its
numbers; its words are its `Display`, and run.json holds those words (serde writes them as strings,
and reads any string back as `AsWritten`, so files written before stay
readable). Adding a reason is its variant, its `Display` arm and the line
of `reasons` that finds it.
*/

/// run.json holds a reason and a warning as its words.
macro_rules! as_words {
    ($t:ty) => {
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$t, D::Error> {
                String::deserialize(d).map(<$t>::AsWritten)
            }
        }
    };
}

pub mod counts;
mod reason;
mod warning;
mod words;

pub use reason::Reason;
pub use warning::{Warning, stops_not_witnessed};

use crate::config::RunConfig;
use crate::domain::{
    CONFIDENCE, EXIT_CANNOT_TEST, EXIT_CLEAN, EXIT_DROPPED, MigrateMode, RearmMode, StopReason,
    SwitchWitness,
};
use crate::judge::{DeliveryTotals, InterruptTotals, JudgeConfig, StressTotals};
use crate::verdict::counts::{Counts, Verdict, WorkerEntry};

pub use crate::domain::MIN_EVIDENCE_RATE;

/// How many overflows with no drop make a run "clean": enough to bound the
/// dropped rate below `MIN_EVIDENCE_RATE` at `CONFIDENCE` (299).
pub fn overflows_needed() -> u64 {
    crate::stats::trials_to_bound(MIN_EVIDENCE_RATE, CONFIDENCE).unwrap_or(u64::MAX)
}

/// Interrupts a period or more late that land within the interrupt skid of
/// a grid point by chance: the expected number among the ambiguous. A skid
/// of half a period or more covers every point between two grid points, so
/// each may be one.
pub fn coincidences(i: &InterruptTotals, interrupt_skid: u64, period: u64) -> f64 {
    let window = (2 * interrupt_skid + 1) as f64 / period as f64;
    i.rebased_in_handler as f64 * window.min(1.0)
}

/// What the rule needs of the run's configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    pub software: bool,
    pub mode: RearmMode,
    pub period: u64,
    pub inject_drop_every: Option<u64>,
    /// The migrator was asked to move workers.
    pub migrates: bool,
    /// Bisect mode: the overflows a "good" needs.
    pub bisect_overflows_needed: Option<u64>,
    /// Witnessed stops a clean verdict needs (0: a run recorded before
    /// stops were counted, whose verdict did not ask for any).
    pub stops_needed: u64,
    /// Bisect mode: the stops a "good" needs.
    pub bisect_stops_needed: Option<u64>,
    /// `--switch-witness` as asked (what the workers got is in `RunSide`).
    pub asked_witness: SwitchWitness,
    /// `--max-count-rate` was given: time-only stops have bounded counts.
    pub count_rate_bounded: bool,
}

impl Settings {
    pub fn of_run(cfg: &RunConfig) -> Settings {
        Settings {
            software: cfg.event.software,
            mode: cfg.mode,
            period: cfg.period,
            inject_drop_every: cfg.inject_drop_every,
            migrates: cfg.migrate != MigrateMode::None,
            bisect_overflows_needed: cfg.bisect.as_ref().map(|b| b.overflows_needed),
            stops_needed: cfg.judge_config().stops_needed,
            bisect_stops_needed: cfg.bisect.as_ref().map(|b| b.stops_needed),
            asked_witness: cfg.switch_witness,
            count_rate_bounded: cfg.max_count_rate.is_some(),
        }
    }

    /// A stream judged again: what its judge's settings say (nothing of
    /// the run around it).
    pub fn of_stream(cfg: &JudgeConfig) -> Settings {
        Settings {
            software: cfg.software,
            mode: cfg.mode,
            period: cfg.period,
            // A stream's judge discarded the same samples: a self-test
            // replays as one.
            inject_drop_every: (cfg.inject_drop_every > 0).then_some(cfg.inject_drop_every),
            migrates: false,
            bisect_overflows_needed: None,
            stops_needed: cfg.stops_needed,
            bisect_stops_needed: None,
            asked_witness: SwitchWitness::Counts,
            count_rate_bounded: cfg.max_count_rate > 0,
        }
    }
}

/// What only a run has, and a replayed stream has not: its threads, its
/// rings and signals, why it stopped.
#[derive(Debug, Clone, Copy)]
pub struct RunSide<'a> {
    pub workers: &'a [WorkerEntry],
    pub stop: &'a StopReason,
    /// Overflow signals nobody could be charged with, and SIGIOs likewise.
    pub stray_signals: (u64, u64),
    /// Overflow signals and SIGIOs a process sent (kill, sigqueue), ignored.
    pub foreign_signals: u64,
    /// Spans the run's controller was held off the CPU.
    pub held: crate::domain::Held,
    /// perf_event_max_sample_rate at start and end.
    pub max_sample_rate: (Option<u64>, Option<u64>),
    /// perf_event_paranoid when the run started (None: unreadable).
    pub perf_event_paranoid: Option<i64>,
}

/// What the verdict is decided from.
#[derive(Debug, Clone, Copy)]
pub struct Evidence<'a> {
    pub interrupts: &'a InterruptTotals,
    pub deliveries: &'a DeliveryTotals,
    pub expected_coincidences: f64,
    /// The stops the stream shows (None: a run recorded before they were
    /// counted).
    pub stress: Option<&'a StressTotals>,
    /// The run's own totals and circumstances; `None` for a bare stream.
    pub run: Option<(&'a Counts, RunSide<'a>)>,
}

impl<'a> Evidence<'a> {
    /// A judged stream alone.
    pub fn stream(
        interrupts: &'a InterruptTotals,
        deliveries: &'a DeliveryTotals,
        expected_coincidences: f64,
        stress: Option<&'a StressTotals>,
    ) -> Evidence<'a> {
        Evidence {
            interrupts,
            deliveries,
            expected_coincidences,
            stress,
            run: None,
        }
    }

    /// A whole run.
    pub fn run(totals: &'a Counts, side: RunSide<'a>) -> Evidence<'a> {
        Evidence {
            interrupts: &totals.interrupts,
            deliveries: &totals.deliveries,
            expected_coincidences: totals.expected_coincidences,
            stress: totals.stress.as_ref(),
            run: Some((totals, side)),
        }
    }
}

/// The verdict, its exit status, and what a reader must be told.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub verdict: Verdict,
    pub exit_status: i32,
    pub reasons: Vec<Reason>,
    pub warnings: Vec<Warning>,
}

/// The verdict rule.
pub fn decide(e: &Evidence, s: &Settings) -> Decision {
    let mut reasons = reasons(e, s);
    let stop = e.run.map(|(_, side)| side.stop);
    let (verdict, exit_status) = if s.inject_drop_every.is_some() {
        self_test_of(stop, e.interrupts, &mut reasons)
    } else {
        verdict_of(stop, certain_drops(e.interrupts), !reasons.is_empty())
    };
    Decision {
        verdict,
        exit_status,
        reasons,
        warnings: warnings(e, s),
    }
}

/// The drops no explanation of the records avoids. Those only the stock
/// driver's rules claim are not, where another worker's records refuted
/// those rules (`Reason::DriversDisagree`).
pub fn certain_drops(i: &InterruptTotals) -> u64 {
    if i.stock_rules_refuted > 0 {
        i.dropped - i.dropped_assuming_stock
    } else {
        i.dropped
    }
}

/// The rule's last step: interrupted, then dropped, then inconclusive,
/// then clean.
pub fn verdict_of(stop: Option<&StopReason>, dropped: u64, inconclusive: bool) -> (Verdict, i32) {
    match stop {
        Some(StopReason::Signal(sig)) => (Verdict::Interrupted, 128 + sig),
        _ if dropped > 0 => (Verdict::Dropped, EXIT_DROPPED),
        _ if inconclusive => (Verdict::Inconclusive, EXIT_CANNOT_TEST),
        _ => (Verdict::Clean, EXIT_CLEAN),
    }
}

/// A self-test's question: the drops it found, those it booked where it
/// discarded a sample and the injected are one number.
pub fn finds_exactly_the_injected(i: &InterruptTotals) -> bool {
    i.injected_found == i.injected && certain_drops(i) == i.injected
}

/// A stream's verdict with what the run around it adds: its
/// interruption, and reasons the stream does not give. A drop, or a
/// failed self-test, stands whatever the reasons; a pass needs none.
pub fn with_the_run(
    stream: Verdict,
    stop: Option<&StopReason>,
    inconclusive: bool,
) -> (Verdict, i32) {
    if let Some(StopReason::Signal(sig)) = stop {
        return (Verdict::Interrupted, 128 + sig);
    }
    match stream {
        Verdict::Dropped | Verdict::SelfTestFailed => (stream, EXIT_DROPPED),
        Verdict::Clean | Verdict::SelfTestPassed if !inconclusive => (stream, EXIT_CLEAN),
        _ => (Verdict::Inconclusive, EXIT_CANNOT_TEST),
    }
}

/// A self-test's rule: it asks whether the detector finds the drops it
/// was handed, not how rare drops are on this machine, so the reasons
/// that bound the machine's rate (too few overflows or stops) do not
/// apply. Interrupted as any run; failed when the drops found are not
/// exactly the injected ones (fewer: the detector missed some; more: the
/// kernel lost others, or the judge is wrong); inconclusive when nothing
/// was injected or the stream could not be judged; otherwise passed.
fn self_test_of(
    stop: Option<&StopReason>,
    i: &InterruptTotals,
    reasons: &mut Vec<Reason>,
) -> (Verdict, i32) {
    reasons.retain(|r| {
        !matches!(
            r,
            Reason::NotEnoughOverflows { .. }
                | Reason::NotEnoughStops { .. }
                | Reason::BisectTooFew { .. }
                | Reason::BisectTooFewStops { .. }
        )
    });
    if i.injected == 0 && i.dropped == 0 {
        reasons.push(Reason::NothingInjected);
    }
    match stop {
        Some(StopReason::Signal(sig)) => (Verdict::Interrupted, 128 + sig),
        _ if !finds_exactly_the_injected(i) => (Verdict::SelfTestFailed, EXIT_DROPPED),
        _ if !reasons.is_empty() => (Verdict::Inconclusive, EXIT_CANNOT_TEST),
        _ => (Verdict::SelfTestPassed, EXIT_CLEAN),
    }
}

/// Pooled runs: dropped if any dropped an interrupt, clean if every one
/// was clean, otherwise inconclusive.
pub fn pooled(dropped: u64, all_clean: bool) -> Verdict {
    if dropped > 0 {
        Verdict::Dropped
    } else if all_clean {
        Verdict::Clean
    } else {
        Verdict::Inconclusive
    }
}

/// A count, and the reason it is when it is not zero.
type Counted = (u64, fn(u64) -> Reason);

fn reasons(e: &Evidence, s: &Settings) -> Vec<Reason> {
    let (i, d) = (e.interrupts, e.deliveries);
    let mut r = Vec::new();
    if let Some((t, side)) = e.run {
        r.extend(
            side.workers
                .iter()
                .filter_map(|w| w.stalled.clone())
                .map(Reason::Stalled),
        );
        if t.signals == 0 {
            r.push(Reason::NoSignal);
        }
    }
    let needed = overflows_needed();
    if i.dropped == 0 && i.overflows < needed {
        r.push(Reason::NotEnoughOverflows {
            measured: i.overflows,
            needed,
        });
    }
    let stops = e.stress.map_or(0, |x| x.stops);
    if i.dropped == 0 && stops < s.stops_needed {
        r.push(Reason::NotEnoughStops {
            witnessed: stops,
            needed: s.stops_needed,
        });
    }
    if i.ambiguous > 0 {
        r.push(Reason::Ambiguous {
            overflows: i.ambiguous,
            expected_coincidences: e.expected_coincidences,
        });
    }
    if i.stock_rules_refuted > 0 && (i.delivering_rules_refuted > 0 || i.dropped_assuming_stock > 0)
    {
        r.push(Reason::DriversDisagree {
            stock_refuted: i.stock_rules_refuted,
            delivering_refuted: i.delivering_rules_refuted,
            dropped_assuming_stock: i.dropped_assuming_stock,
        });
    }
    // A software clock loses no interrupt a hole could hide.
    let lost_records = if s.software { 0 } else { i.lost_records };
    let counted: [Counted; 6] = [
        (i.unexplained, Reason::Unexplained),
        (i.count_rate_exceeded, Reason::CountRateExceeded),
        (lost_records, Reason::LostRecords),
        (d.unmatched, Reason::UnmatchedSignals),
        (d.wrong_thread, Reason::WrongThread),
        (d.read_failures, Reason::ReadFailures),
    ];
    r.extend(
        counted
            .into_iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, f)| f(n)),
    );
    if let Some((t, side)) = e.run {
        r.extend(run_reasons(t, &side, s));
    }
    r
}

/// What the run around the stream makes inconclusive: our own failures,
/// a final count that disagrees with the judge, an early stop.
fn run_reasons(t: &Counts, side: &RunSide, s: &Settings) -> Vec<Reason> {
    let mut r = Vec::new();
    let ours: [Counted; 4] = [
        (t.signal_ring_overflows, Reason::SignalRingFull),
        (t.garbled_kernel_bytes, Reason::GarbledKernelBytes),
        (side.stray_signals.0, Reason::StrayFd),
        (side.stray_signals.1, Reason::StraySigio),
    ];
    r.extend(ours.into_iter().filter(|(n, _)| *n > 0).map(|(n, f)| f(n)));
    if s.mode == RearmMode::Reset && t.reordered_observations > 0 {
        r.push(Reason::Reordered(t.reordered_observations));
    }
    for w in side.workers {
        if let Some(implied) = w.counts.implied_overflows
            && implied != w.counts.accounted_overflows
        {
            r.push(Reason::ImpliedOverflows {
                worker: w.worker,
                implied,
                accounted: w.counts.accounted_overflows,
            });
        }
    }
    if let StopReason::OutputFailed(e) = side.stop {
        r.push(Reason::OutputFailed(e.clone()));
    }
    if let Some(needed) = s.bisect_overflows_needed
        && t.dropped_interrupts == 0
        && t.accounted_overflows < needed
    {
        r.push(Reason::BisectTooFew {
            measured: t.accounted_overflows,
            needed,
        });
    }
    let stops = t.stress.as_ref().map_or(0, |x| x.stops);
    if let Some(needed) = s.bisect_stops_needed
        && t.dropped_interrupts == 0
        && stops < needed
    {
        r.push(Reason::BisectTooFewStops {
            witnessed: stops,
            needed,
        });
    }
    r
}

fn warnings(e: &Evidence, s: &Settings) -> Vec<Warning> {
    let (i, d) = (e.interrupts, e.deliveries);
    let run = e.run;
    let mut w = Vec::new();
    if s.software {
        w.push(Warning::SoftwareEvent);
    }
    if let Some(every) = s.inject_drop_every {
        w.push(Warning::SelfTest { every });
    }
    if i.throttled > 0 {
        w.push(Warning::Throttled(i.throttled));
    }
    if let Some((_, side)) = run
        && side.foreign_signals > 0
    {
        w.push(Warning::ForeignSignals(side.foreign_signals));
    }
    if let Some((_, side)) = run
        && side.held.times > 0
    {
        w.push(Warning::Held(side.held));
    }
    if let Some((_, side)) = run
        && let (Some(from), Some(to)) = side.max_sample_rate
        && to < from
    {
        w.push(Warning::SampleRateLowered { from, to });
    }
    if i.rebased_in_handler > 0 {
        w.push(Warning::RebasedInHandler(i.rebased_in_handler));
    }
    if i.stock_rules_refuted > 0 {
        w.push(Warning::DeliveringDriver(i.stock_rules_refuted));
    }
    if i.dropped_assuming_stock > 0 {
        w.push(Warning::DroppedAssumingStock(i.dropped_assuming_stock));
    }
    if i.count_wraps > 0 {
        w.push(Warning::CountWraps(i.count_wraps));
    }
    if let Some((t, _)) = run
        && let Some(p999) = t.interrupt_latency.p999
        && p999 > 0.25
    {
        // Latency in a VM is time the vCPU did not run, not a fraction of
        // the period: at this period the p99.9 is a quarter of it.
        let suggested_period = (p999 * 4.0 * s.period as f64).ceil() as u64;
        w.push(Warning::LateInterrupts {
            p999,
            suggested_period,
        });
    }
    if d.sigio > 0 {
        w.push(Warning::SignalQueueOverflow(d.sigio));
    }
    if i.lost_records > 0 {
        w.push(Warning::LostRecords {
            lost: i.lost_records,
            unrecorded: d.unrecorded,
        });
    }
    if d.coalesced > 0 {
        w.push(Warning::Coalesced(d.coalesced));
    }
    if d.late_by_a_period > 0 {
        w.push(Warning::LateSignals(d.late_by_a_period));
    }
    if i.timer_skips > 0 {
        w.push(Warning::TimerSkips(i.timer_skips));
    }
    if let Some((t, side)) = run {
        if s.migrates && t.migrations_requested == 0 {
            w.push(Warning::NoMigration);
        }
        if t.migrations_failed > 0 {
            w.push(Warning::FailedMigrations {
                failed: t.migrations_failed,
                requested: t.migrations_requested,
            });
        }
        if !s.software
            && let Some(warning) = stops_not_witnessed(
                side.workers.iter().map(|w| w.switch_witness),
                s.asked_witness,
                side.perf_event_paranoid,
                s.count_rate_bounded,
            )
        {
            w.push(warning);
        }
    }
    w
}

#[cfg(test)]
mod tests;
