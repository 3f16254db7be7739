/*!
One worker's judge: the stream in, both judgements and the anomalies out.

`--inject-drop-every N` is a filter in front of judgement: every Nth sample
record is discarded as if its interrupt had never come, and the signal that
belongs to it with it. The interrupt judge books it where it happened, as a
drop by our hand, so the self-test's drops land exactly where they were made.

Pure and bounded: the judges keep at most a few hypotheses and the
unsignalled interrupts, so it is tested with synthetic streams and replays a
recorded run exactly.
*/

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;

use super::config::JudgeConfig;
use super::deliveries::ClosedWindow;
use super::deliveries::{DeliveryEvent, DeliveryEventKind, DeliveryJudge, DeliveryTotals};
use super::interrupts::{InterruptEvent, InterruptEventKind, InterruptJudge, InterruptTotals};
use super::kinds::AnomalyKind;
use super::stress::StressTotals;
use super::wrap::Unwrap;
use crate::domain::RearmMode;
use crate::records::{Delivery, Observation};

/// One anomaly, with everything a maintainer asks about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Anomaly {
    pub worker: usize,
    /// The last overflow signal before it (1-based; 0: none yet).
    pub signal_seq: u64,
    pub time_ns: u64,
    /// Interrupt kinds: the count between the interrupts around it (~k
    /// periods for k - 1 lost interrupts; an injected drop is booked at the
    /// sample we discarded: from the interrupt before to that one).
    /// Delivery kinds: how far past its interrupt the signal read (0 when
    /// unknown).
    pub delta: u64,
    pub period: u64,
    pub skid: u64,
    pub kind: AnomalyKind,
    /// Overflows it concerns.
    pub missed: u64,
    /// Of those, interrupts that never happened.
    pub dropped: u64,
    pub cpu_before: Option<u32>,
    pub cpu_after: u32,
    /// Time since the migrator last moved this worker, if it ever did.
    pub since_migration_ns: Option<u64>,
    /// Interrupts (sample records) seen so far.
    pub kernel_samples: u64,
    /// Overflows we discarded on purpose among them.
    pub injected: u64,
    /// The count between the two interrupts around it (see `delta`).
    pub interrupt_gap: Option<u64>,
}

/// What one worker's observation stream amounts to: the stream judge's
/// totals (the run's verdict is `verdict::decide`'s, over all
/// workers).
#[derive(Debug, Clone, Default, Serialize)]
pub struct StreamJudgement {
    pub worker: usize,
    pub interrupts: InterruptTotals,
    pub deliveries: DeliveryTotals,
    /// Anomalies per kind.
    pub anomalies: BTreeMap<AnomalyKind, u64>,
    /// Signals whose CPU differed from the previous signal's.
    pub cpu_changes: u64,
    /// Moves the migrator reported.
    pub moves: u64,
    /// Stops, the moves that made them, and where in the period they fell.
    pub stress: StressTotals,
    /// The count the final read gave, count wraps taken out.
    pub final_count: Option<u64>,
}

/// Judges one worker's observation stream, record by record.
pub struct StreamJudge {
    worker: usize,
    cfg: JudgeConfig,
    interrupts: InterruptJudge,
    deliveries: DeliveryJudge,
    /// Takes count wraps out of every count before either judge sees it.
    unwrap: Unwrap,
    /// Samples seen, injected ones included (what the injection counts).
    samples_seen: u64,
    /// Reset mode: the last read, where the handler's PERIOD stops the event.
    last_read: u64,
    last_move: Option<u64>,
    /// Time of the last stop the witness recorded.
    last_stop_ns: Option<u64>,
    /// CPU of the last kernel record or signal.
    cpu: Option<u32>,
    prev_signal_cpu: Option<u32>,
    signal_seq: u64,
    verdict: StreamJudgement,
    ievents: Vec<InterruptEvent>,
    devents: Vec<DeliveryEvent>,
    /// Our own observations since the last kernel record (see `observe`).
    held: Vec<Observation>,
}

impl StreamJudge {
    pub fn new(worker: usize, cfg: JudgeConfig) -> StreamJudge {
        StreamJudge {
            worker,
            cfg,
            interrupts: InterruptJudge::new(cfg),
            deliveries: DeliveryJudge::new(worker, cfg),
            unwrap: if cfg.software {
                Unwrap::new(u64::MAX)
            } else {
                Unwrap::new(cfg.period)
            },
            samples_seen: 0,
            last_read: 0,
            last_move: None,
            last_stop_ns: None,
            cpu: None,
            prev_signal_cpu: None,
            signal_seq: 0,
            verdict: StreamJudgement {
                worker,
                ..StreamJudgement::default()
            },
            ievents: Vec::new(),
            devents: Vec::new(),
            held: Vec::new(),
        }
    }

    pub fn config(&self) -> &JudgeConfig {
        &self.cfg
    }

    /// Feeds one observation; pushes the window a signal closes and the
    /// anomalies it settles.
    ///
    /// Our own observations (signals, resets, moves) are held until the
    /// next kernel record: the kernel writes a LOST record only when it next
    /// writes one, so records it lost (a sample whose signal and, in reset
    /// mode, reset came already) are reported after them. A LOST is judged
    /// before what was held since the last kernel record; judged after
    /// them, a reset's PERIOD found the lost sample's overflow pending and
    /// counted it dropped.
    pub fn observe(
        &mut self,
        obs: &Observation,
        windows: &mut Vec<ClosedWindow>,
        anomalies: &mut Vec<Anomaly>,
    ) {
        let lost = matches!(obs, Observation::Lost { .. });
        if !lost && !obs.is_kernel() && !matches!(obs, Observation::Final { .. }) {
            self.held.push(*obs);
            return;
        }
        if lost {
            self.apply(obs, windows, anomalies);
        }
        for held in std::mem::take(&mut self.held) {
            self.apply(&held, windows, anomalies);
        }
        if !lost {
            self.apply(obs, windows, anomalies);
        }
    }

    fn apply(
        &mut self,
        obs: &Observation,
        windows: &mut Vec<ClosedWindow>,
        anomalies: &mut Vec<Anomaly>,
    ) {
        let obs = &self.unwrapped(obs);
        match *obs {
            Observation::Sample {
                time_ns,
                cpu,
                count,
            } => {
                self.samples_seen += 1;
                let n = self.cfg.inject_drop_every;
                let injected = n > 0 && self.samples_seen.is_multiple_of(n);
                self.interrupts.sample(time_ns, cpu, count, injected);
                self.deliveries.interrupt(count, injected);
                self.cpu = Some(cpu);
            }
            Observation::Stop {
                time_ns,
                cpu,
                count,
            } => {
                let due = self.interrupts.due_point();
                self.verdict.stress.stop(count, due, self.cfg.period);
                self.last_stop_ns = Some(time_ns);
                self.interrupts.stop(time_ns, cpu, count);
            }
            // Every stop before it was at or below its count.
            Observation::Resume { count, .. } => self.interrupts.count_read(count),
            Observation::Start { time_ns, .. } => self.interrupts.start(time_ns),
            Observation::Throttle { time_ns, witness } => {
                self.interrupts.throttle(time_ns, witness);
                if !witness {
                    self.deliveries.throttle();
                }
            }
            Observation::Unthrottle { witness, .. } => {
                self.interrupts.unthrottle(witness);
                if !witness {
                    self.deliveries.unthrottle();
                }
            }
            Observation::Lost { time_ns, lost } => {
                self.interrupts.lost(time_ns, lost);
                self.deliveries.lost(lost);
            }
            Observation::Signal {
                time_ns,
                cpu,
                value,
                delivery,
                ..
            } => {
                if delivery == Delivery::Overflow {
                    self.last_read = value;
                    self.interrupts.count_read(value);
                }
                if let Some(w) = self.deliveries.signal(time_ns, cpu, value, delivery) {
                    self.signal_seq = w.signal_seq;
                    if self.prev_signal_cpu.replace(cpu).is_some_and(|c| c != cpu) {
                        self.verdict.cpu_changes += 1;
                    }
                    windows.push(w);
                }
                self.cpu = Some(cpu);
            }
            Observation::Reset { time_ns, count } => {
                if self.cfg.mode == RearmMode::Reset {
                    self.unwrap.reset();
                    self.interrupts.reset(time_ns, self.last_read, count);
                    self.deliveries.reset();
                }
            }
            Observation::Wakeup { .. } => self.deliveries.wakeup(),
            Observation::Move {
                time_ns,
                requested_ns,
                ..
            } => {
                self.last_move = Some(time_ns);
                self.verdict.moves += 1;
                let stress = &mut self.verdict.stress;
                stress.moves += 1;
                match requested_ns {
                    // The kernel stops a running thread inside the request.
                    Some(asked) if self.last_stop_ns.is_some_and(|t| t >= asked) => {
                        stress.moves_that_stopped += 1;
                    }
                    Some(_) => {}
                    None => stress.moves_untimed += 1,
                }
            }
            Observation::Final { time_ns, count } => {
                self.verdict.final_count = count;
                self.interrupts.final_stop(time_ns, count);
                self.deliveries.finish();
            }
        }
        self.collect(anomalies);
    }

    /// `obs` with its count unwrapped (see `wrap`); a new wrap is told to
    /// the interrupt judge first.
    fn unwrapped(&mut self, obs: &Observation) -> Observation {
        let mut o = *obs;
        let (count, time_ns, cpu) = match &mut o {
            Observation::Sample {
                count,
                time_ns,
                cpu,
            }
            | Observation::Stop {
                count: Some(count),
                time_ns,
                cpu,
            }
            | Observation::Resume {
                count,
                time_ns,
                cpu,
            } => (count, *time_ns, *cpu),
            Observation::Signal {
                value,
                time_ns,
                cpu,
                delivery: Delivery::Overflow,
                ..
            } => (value, *time_ns, *cpu),
            Observation::Final {
                count: Some(count),
                time_ns,
            }
            | Observation::Reset {
                count: Some(count),
                time_ns,
            } => (count, *time_ns, u32::MAX),
            _ => return o,
        };
        let (v, wrapped) = self.unwrap.count(*count);
        *count = v;
        if wrapped {
            self.interrupts.count_wrap(time_ns, cpu, v);
        }
        o
    }

    /// Overflows accounted for so far, and how many were dropped.
    pub fn progress(&self) -> (u64, u64) {
        let t = self.interrupts.totals();
        (t.overflows, t.dropped)
    }

    pub fn interrupts(&self) -> &InterruptTotals {
        self.interrupts.totals()
    }

    pub fn deliveries(&self) -> &DeliveryTotals {
        self.deliveries.totals()
    }

    /// Interrupt lateness: events past the due point.
    pub fn latency(&self) -> &Histogram<u64> {
        self.interrupts.latency()
    }

    /// Deltas between consecutive signals' reads.
    pub fn deltas(&self) -> &Histogram<u64> {
        self.deliveries.deltas()
    }

    /// The totals; complete once a `Final` was observed.
    pub fn verdict(&self) -> StreamJudgement {
        StreamJudgement {
            interrupts: self.interrupts.totals().clone(),
            deliveries: self.deliveries.totals().clone(),
            ..self.verdict.clone()
        }
    }

    fn collect(&mut self, anomalies: &mut Vec<Anomaly>) {
        self.interrupts.take_events(&mut self.ievents);
        self.deliveries.take_events(&mut self.devents);
        for e in std::mem::take(&mut self.ievents) {
            let a = self.interrupt_anomaly(&e);
            *self.verdict.anomalies.entry(a.kind).or_default() += 1;
            anomalies.push(a);
        }
        for e in std::mem::take(&mut self.devents) {
            let a = self.delivery_anomaly(&e);
            *self.verdict.anomalies.entry(a.kind).or_default() += 1;
            anomalies.push(a);
        }
    }

    fn base(&self, kind: AnomalyKind, time_ns: u64, cpu: u32) -> Anomaly {
        Anomaly {
            worker: self.worker,
            signal_seq: self.signal_seq,
            time_ns,
            delta: 0,
            period: self.cfg.period,
            skid: self.cfg.skid,
            kind,
            missed: 0,
            dropped: 0,
            cpu_before: self.cpu.filter(|&c| c != cpu),
            cpu_after: cpu,
            since_migration_ns: self.last_move.map(|m| time_ns.saturating_sub(m)),
            kernel_samples: self.interrupts.totals().samples,
            injected: 0,
            interrupt_gap: None,
        }
    }

    fn interrupt_anomaly(&self, e: &InterruptEvent) -> Anomaly {
        let kind = match e.kind {
            InterruptEventKind::Dropped => AnomalyKind::DroppedInterrupt,
            InterruptEventKind::Ambiguous => AnomalyKind::Ambiguous,
            InterruptEventKind::RebasedInHandler => AnomalyKind::LateInterrupt,
            InterruptEventKind::Throttled => AnomalyKind::Throttled,
            InterruptEventKind::RecordsLost => AnomalyKind::WitnessLost,
            InterruptEventKind::TimerSkip => AnomalyKind::SoftwareTimerSkip,
            InterruptEventKind::Unexplained => AnomalyKind::Unexplained,
            InterruptEventKind::CountWrap => AnomalyKind::CountWrap,
        };
        let gap = e.prev_count.map(|p| e.count.saturating_sub(p));
        let cpu = if e.cpu == u32::MAX {
            self.cpu.unwrap_or(u32::MAX)
        } else {
            e.cpu
        };
        Anomaly {
            delta: gap.unwrap_or(e.count),
            missed: e.overflows,
            dropped: if kind == AnomalyKind::DroppedInterrupt {
                e.overflows
            } else {
                0
            },
            injected: u64::from(e.injected),
            interrupt_gap: gap,
            ..self.base(kind, e.time_ns, cpu)
        }
    }

    fn delivery_anomaly(&self, e: &DeliveryEvent) -> Anomaly {
        let kind = match e.kind {
            DeliveryEventKind::Coalesced => AnomalyKind::CoalescedSignal,
            DeliveryEventKind::QueueOverflow => AnomalyKind::SignalQueueOverflow,
            DeliveryEventKind::LateByAPeriod => AnomalyKind::LateSignal,
            DeliveryEventKind::Unmatched => AnomalyKind::UnmatchedSignal,
            DeliveryEventKind::ToolError => AnomalyKind::ToolError,
        };
        let cpu = if e.cpu == u32::MAX {
            self.cpu.unwrap_or(u32::MAX)
        } else {
            e.cpu
        };
        Anomaly {
            signal_seq: e.signal_seq.max(self.signal_seq),
            delta: e.interrupt.map_or(0, |i| e.value.saturating_sub(i)),
            missed: u64::from(kind == AnomalyKind::CoalescedSignal),
            ..self.base(kind, e.time_ns, cpu)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(judge: &mut StreamJudge, stream: &[Observation]) {
        let (mut windows, mut anomalies) = (Vec::new(), Vec::new());
        for o in stream {
            judge.observe(o, &mut windows, &mut anomalies);
        }
    }

    /// Samples at these counts, then the final DISABLE at `end`.
    fn samples_then_end(counts: &[u64], end: u64) -> Vec<Observation> {
        let mut stream: Vec<Observation> = counts
            .iter()
            .zip(1..)
            .map(|(&count, t)| Observation::Sample {
                time_ns: t,
                cpu: 0,
                count,
            })
            .collect();
        stream.push(Observation::Final {
            time_ns: counts.len() as u64 + 1,
            count: Some(end),
        });
        stream
    }

    fn judged(stops_unseen: bool, stream: &[Observation]) -> InterruptTotals {
        let cfg = JudgeConfig {
            stops_unseen,
            ..JudgeConfig::new(100_000, 1_000, 500, RearmMode::Free)
        };
        let mut judge = StreamJudge::new(0, cfg);
        feed(&mut judge, stream);
        judge.verdict().interrupts
    }

    #[test]
    fn without_a_stop_witness_a_gap_that_fits_a_loss_is_never_clean() {
        // The second interrupt comes 2 periods and 200 events in: a period
        // late (the driver re-based), or the overflow due at 200,000 was
        // lost at a stop no record shows and this is the next one's, 200
        // events late. The third fits both grids.
        let stream = samples_then_end(&[100_100, 300_200, 400_250], 450_000);
        let seen = judged(false, &stream);
        assert_eq!(
            (seen.dropped, seen.ambiguous, seen.rebased_in_handler),
            (0, 0, 1),
            "every stop witnessed: none here, so a period late"
        );
        let unseen = judged(true, &stream);
        assert_eq!(unseen.dropped, 0, "{unseen:?}");
        assert!(unseen.ambiguous >= 1, "{unseen:?}");
        assert_eq!(unseen.rebased_in_handler, 0, "{unseen:?}");
    }

    #[test]
    fn without_a_stop_witness_interrupts_within_a_period_stay_exact() {
        // Every interrupt less than a period past its due point: no gap
        // fits a loss, so the unseen stops change nothing.
        let stream = samples_then_end(&[100_100, 250_000, 300_050, 450_000], 480_000);
        let seen = judged(false, &stream);
        let unseen = judged(true, &stream);
        assert_eq!((unseen.dropped, unseen.ambiguous), (0, 0), "{unseen:?}");
        assert_eq!(
            (unseen.on_time, unseen.late, unseen.samples),
            (seen.on_time, seen.late, seen.samples)
        );
        assert_eq!((unseen.on_time, unseen.late), (2, 2));
    }

    #[test]
    fn a_move_stopped_its_worker_when_a_stop_was_witnessed_inside_the_request() {
        let period = 100_000;
        let mut judge = StreamJudge::new(0, JudgeConfig::new(period, 1_000, 0, RearmMode::Free));
        let stop = |time_ns, count| Observation::Stop {
            time_ns,
            cpu: 0,
            count: Some(count),
        };
        let mv = |asked, time_ns| Observation::Move {
            time_ns,
            cpu: 1,
            requested_ns: asked,
        };
        feed(
            &mut judge,
            &[
                // Stopped inside the request (10..20): the move stopped it.
                stop(15, 30_000),
                mv(Some(10), 20),
                // No stop inside 30..40 (the last was at 15): a waiting
                // thread, requeued.
                mv(Some(30), 40),
                // A stop after the move returned is not the move's.
                mv(Some(50), 60),
                stop(70, 60_000),
                // A move recorded without its request time.
                mv(None, 80),
                Observation::Final {
                    time_ns: 90,
                    count: Some(95_000),
                },
            ],
        );
        let s = judge.verdict().stress;
        assert_eq!(
            (s.stops, s.moves, s.moves_that_stopped, s.moves_untimed),
            (2, 4, 1, 1)
        );
        // Due at 100,000: 30,000 and 60,000 past the last due point (0).
        let mut positions = [0; crate::judge::stress::POSITION_BINS];
        positions[6] = 1;
        positions[12] = 1;
        assert_eq!(s.stop_positions, positions);
    }
}
