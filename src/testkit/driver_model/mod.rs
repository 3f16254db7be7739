/*!
A model of the arm64/x86 PMU driver that generates one worker's observation
stream with its ground truth, for the property tests of the judge.

It simulates one sampling event on a count axis (events counted in user mode:
the count advances only while the thread runs) under the driver's rules
(`armpmu_event_set_period`, `armv8pmu_handle_irq`, `armv8pmu_disable_event`
in Linux's drivers/perf):

- The first overflow is due a period in (RESET + ENABLE). An overflow raises
  one flag; its interrupt is taken after a latency drawn from 0 to several
  periods. Taken at count `c`, it writes a sample with count `c` and re-arms:
  rule 1 (re-base: next due `c + P`) when `c` is a period or more past the
  due point, else rule 2 (next due `due + P`). One sample, one signal.
- A context switch stops the event. An overflow pending there (its interrupt
  not yet taken) is taken first with pseudo-NMI (the sample follows the stop
  record: the NMI lands between the witness and the stop), else lost: the
  stop clears the flag and the restart applies rule 1 or 2 silently.
- Throttling (the sample is still written, the grid kept), lost ring records
  (samples and stops never written, then a LOST record), a throttled switch
  witness or none at all (stops unrecorded), stops whose count is unknown.
- Signals: one per handled interrupt, delivered after a delay, in order and
  back to back when queued; sometimes merged with the next interrupt's
  (coalesced), sometimes a plain SIGIO instead.
- Reset mode: after each overflow signal the handler reads the count, RESETs
  it (counts are then relative to the reset) and PERIOD stops the event a few
  events later (a pending overflow is lost there) and re-arms one period
  after the restart.
- Counting kernel mode (`include_kernel`): the switch witness reads the count
  a little before the stop; an overflow due in between is pending at the
  stop (interrupts are masked in the scheduler) and lost without
  pseudo-NMI. The resume witness (`resume_witness`) reads it where a
  migrated thread runs again: the stop's count plus a little kernel mode.
- Count wraps (`count_wrap`, pseudo-NMI only): the NMI that takes an
  overflow at a context switch raced the witness's read of the count (the
  ABA of `armpmu_event_update`, see `judge::wrap`): the witness's count is
  too high by that read's delta, every count from the stop on is 2^32 higher,
  and the restart re-bases (`period_left` 2^32 low). Nothing is lost.
- The end: the final DISABLE is a stop; a pending overflow is lost there.

Everything is drawn from one seeded generator: the same config and seed give
the same stream.

Besides what happened (`Truth`), the model says what the records it wrote
decide (`records`): for each stop, PERIOD and final DISABLE, whether they
show an overflow pending there (a loss, without an NMI to take it) or
leave it open, and where they place each sample's due point. Those rules
read only the driver's rules and the records, never the judge's state: a
loss the records decide must be reported dropped, and every open place
counts once in `Truth::undecided`, the bound on the judge's ambiguous.
*/

use std::collections::VecDeque;

mod records;

use records::{Answer, Known, NextRead, Seen};

use crate::domain::RearmMode;
use crate::judge::{HANDLER_SLACK, JudgeConfig};
use crate::records::{Delivery, Observation};

/// How late interrupts are taken, in events past the due point: weights of
/// three ranges.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Latency {
    /// 0..=interrupt_skid.
    pub on_time: u32,
    /// interrupt_skid+1 .. period.
    pub late: u32,
    /// period ..= max_periods * period (the driver re-bases).
    pub period_late: u32,
    pub max_periods: u64,
}

/// What the model generates.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    pub period: u64,
    pub interrupt_skid: u64,
    /// The judge's signal skid.
    pub skid: u64,
    pub mode: RearmMode,
    /// Overflows (due points reached) to generate before the end.
    pub overflows: u64,
    pub latency: Latency,
    /// Pseudo-NMI: an overflow pending at a context switch is taken before
    /// the stop clears it.
    pub pnmi: bool,
    /// Context switches per period of counted events, on average.
    pub stops_per_period: f64,
    /// Of the stops, the share drawn just at or after a due point (where
    /// losses happen).
    pub stop_near_due: f64,
    /// Of the stops, the share that are migrations (a `Move` before them).
    pub migrations: f64,
    /// Of the recorded stops, the share whose count the witness could not read.
    pub stop_count_unknown: f64,
    /// Kernel mode counted: the switch path between the witness's read and
    /// the stop counts too.
    pub include_kernel: bool,
    /// Kernel mode counted: the witness reads up to `stop_slack - 1` events
    /// before an ordinary stop (the judge is not told this bound).
    pub stop_slack: u64,
    /// Kernel mode counted: of the stops, the share whose witness reads up
    /// to `HELD_STOP_PERIODS` periods before the stop (the vCPU held in the
    /// switch path while its counter runs: seen under QEMU).
    pub held_stop: f64,
    /// Probability that an interrupt throttles the event.
    pub throttle: f64,
    /// Newer kernels (seen on 6.18): the first interrupt after an
    /// unthrottle is handled (re-armed, signalled) without writing its
    /// sample.
    pub unthrottle_unwritten: bool,
    /// Probability that a stop throttles the switch witness (the next 1-3
    /// stops go unrecorded).
    pub witness_throttle: f64,
    /// No switch witness at all (`--switch-witness none`): no stop is
    /// recorded, and the judge is told so.
    pub no_witness: bool,
    /// Probability that a kernel record starts a ring gap of 1-3 records.
    pub ring_loss: f64,
    /// Probability that a signal is delayed past the skid (up to 3 periods).
    pub signal_late: f64,
    /// Signals queue (delivered in order, back to back, maybe after later
    /// interrupts); false: each is delivered before the next interrupt, so
    /// which interrupt a signal belongs to is never in doubt.
    pub signals_queue: bool,
    /// Probability that an interrupt's signal is merged with the next one's.
    pub coalesce: f64,
    /// Probability that an interrupt's signal is a plain SIGIO instead.
    pub sigio: f64,
    /// Reset mode: most events between the handler's RESET and its PERIOD
    /// (an interrupt taken there counts from the reset, before the reset's
    /// record: see `judge_config`).
    pub reset_gap: u64,
    /// The judge's `--inject-drop-every`.
    pub inject_drop_every: u64,
    /// With pseudo-NMI, the probability that an overflow the NMI takes at a
    /// context switch wraps the count (see the module doc).
    pub count_wrap: f64,
    /// A resume witness records the count where a migrated thread runs
    /// again (at or above the stop's).
    pub resume_witness: bool,
}

impl ModelConfig {
    /// A plain setting: interrupts mostly on time, few stops, no extras.
    pub fn new(period: u64, mode: RearmMode, overflows: u64) -> ModelConfig {
        ModelConfig {
            period,
            interrupt_skid: period / 50,
            skid: period / 10,
            mode,
            overflows,
            latency: Latency {
                on_time: 90,
                late: 8,
                period_late: 2,
                max_periods: 3,
            },
            pnmi: false,
            stops_per_period: 0.2,
            stop_near_due: 0.3,
            migrations: 0.5,
            stop_count_unknown: 0.0,
            include_kernel: false,
            stop_slack: period / 20,
            held_stop: 0.0,
            throttle: 0.0,
            unthrottle_unwritten: false,
            witness_throttle: 0.0,
            no_witness: false,
            ring_loss: 0.0,
            signal_late: 0.05,
            signals_queue: false,
            coalesce: 0.0,
            sigio: 0.0,
            reset_gap: 0,
            inject_drop_every: 0,
            count_wrap: 0.0,
            resume_witness: false,
        }
    }

    /// The judge's settings for this stream.
    pub fn judge_config(&self) -> JudgeConfig {
        let mut cfg = JudgeConfig::new(self.period, self.skid, self.interrupt_skid, self.mode);
        cfg.include_kernel = self.include_kernel;
        cfg.stops_unseen = self.no_witness;
        // Without pseudo-NMI the model's interrupts are masked from the
        // witness to the stop, as the kernel's are.
        cfg.irq_masked_at_stops = !self.pnmi;
        cfg.inject_drop_every = self.inject_drop_every;
        // Without a gap between RESET and PERIOD the model is today's
        // handler (DISABLE, RESET, PERIOD, ENABLE): the restart is at the
        // reset. With one, it is the handler before, and so is the judge.
        cfg.restart_at_reset = self.reset_gap == 0;
        // What a run judges by: both drivers followed, the records refute
        // the delivering one or the stock one's rules decide.
        cfg.driver_rules = crate::domain::DriverRules::Auto;
        cfg
    }
}

/// How far before its stop a held stop's witness may read, in periods.
pub const HELD_STOP_PERIODS: u64 = 3;

/// What really happened to every overflow and every signal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Truth {
    /// Overflows raised (due points the count reached).
    pub overflows: u64,
    /// Interrupts taken: sample records written (in the stream or not).
    pub handled: u64,
    pub on_time: u64,
    pub late: u64,
    /// Interrupts a period or more late: rule 1 in the handler.
    pub rebase_irq: u64,
    /// Overflows pending at a stop and cleared there: no interrupt.
    pub lost: u64,
    /// Of the lost, those whose restart re-based (rule 1).
    pub rebase_restart: u64,
    /// Of the lost, those at the final DISABLE.
    pub lost_at_final: u64,
    /// Of the lost, those at the PERIOD of a reset (never a re-base: PERIOD
    /// sets period_left to 0 before the restart).
    pub lost_at_period: u64,
    /// Overflows pending at a stop and taken there by pseudo-NMI.
    pub nmi_at_stop: u64,
    /// Interrupts that throttled the event.
    pub throttled: u64,
    /// Interrupts after an unthrottle whose sample was not written
    /// (`unthrottle_unwritten`).
    pub unwritten_after_unthrottle: u64,
    /// Samples the judge discards (`inject_drop_every`).
    pub injected: u64,
    /// Sample records the ring lost (their interrupts were handled).
    pub record_lost: u64,
    /// Stop records the ring lost.
    pub stops_record_lost: u64,
    /// Records in LOST records.
    pub lost_records: u64,
    /// Ring gaps (up to the next sample written) in which the grid moved:
    /// an interrupt or a restart re-based there, so the due points after
    /// the gap are not those before it.
    pub gaps_hiding_rebase: u64,
    /// Ring gaps (LOST records).
    pub ring_gaps: u64,
    /// Context switches.
    pub stops: u64,
    /// Stops recorded without a count.
    pub stops_unknown: u64,
    /// Stops the throttled witness did not record.
    pub stops_unwitnessed: u64,
    /// Reset mode: resets, and interrupts taken between a RESET and its
    /// PERIOD (their sample counts from the reset but comes before it).
    pub resets: u64,
    pub taken_in_reset_gap: u64,
    /// Overflow signals delivered (records in the stream).
    pub signals: u64,
    /// Plain SIGIO fallbacks delivered.
    pub sigio: u64,
    /// Interrupts whose signal was merged into a later interrupt's.
    pub coalesced: u64,
    /// Signals (or SIGIOs) not delivered by the end.
    pub in_flight: u64,
    /// Delivered signals/SIGIOs whose interrupt's sample the ring lost.
    pub signals_of_record_lost: u64,
    /// Sample records in the stream.
    pub samples: u64,
    /// Count wraps (each re-based the period at its restart).
    pub count_wraps: u64,
    /// Of the lost, those the records decide: only "lost" fits them
    /// (`records::pending_at`). The judge must call each dropped.
    pub lost_decided: u64,
    /// Of those, the ones at the final DISABLE.
    pub lost_at_final_decided: u64,
    /// Places where the records leave open whether an overflow was pending
    /// (a stop, a reset's PERIOD, the final DISABLE) or how the restart
    /// re-armed (`records`): each may hold one ambiguous overflow, so they
    /// bound the judge's ambiguous; none, and the judge must be exact.
    pub undecided: u64,
}

/// How late an interrupt was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    /// Within the interrupt skid of its due point.
    OnTime,
    /// Later, but less than a period.
    Late,
    /// A period or more late: the driver re-based.
    Rebased,
}

/// One sample record in the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sampled {
    pub taken: Taken,
    /// Events past its due point.
    pub lateness: u64,
    /// How far the records leave its due point open (`records::Known`):
    /// 0 where they give it exactly, the handler slack after a reset by the
    /// handler before, `None` where they do not place it.
    pub due_spread: Option<u64>,
    /// The first sample after a count wrap: its due point is unknown to the
    /// judge, which anchors the grid on it.
    pub after_wrap: bool,
}

/// A generated stream and what really happened.
#[derive(Debug, Clone)]
pub struct Generated {
    pub observations: Vec<Observation>,
    pub truth: Truth,
    /// How late each sample record in the stream was, in stream order
    /// (what the judge must find for the samples it does not discard).
    pub samples: Vec<Sampled>,
    /// Where each loss the records decide happened: the index of the first
    /// observation after it (for failure reports).
    pub decided_losses: Vec<usize>,
}

/// An overflow raised whose interrupt is not taken yet.
#[derive(Debug, Clone, Copy)]
struct Pending {
    due: u64,
    take: u64,
}

/// A signal queued (or waiting to be queued) for delivery.
#[derive(Debug, Clone, Copy)]
struct Queued {
    /// Absolute count of its (latest) interrupt.
    irq: u64,
    deliver: u64,
    sigio: bool,
    /// Its interrupt's sample is missing from the stream (ring gap).
    record_lost: bool,
    /// Will be merged with the next interrupt's signal.
    merge_next: bool,
}

/// The next context switch: the witness reads at `witness`, the event stops
/// at `at` (equal unless kernel mode is counted).
#[derive(Debug, Clone, Copy)]
struct NextStop {
    witness: u64,
    at: u64,
}

struct Sim<'a> {
    cfg: &'a ModelConfig,
    rng: fastrand::Rng,
    out: Vec<Observation>,
    truth: Truth,
    samples: Vec<Sampled>,
    decided_losses: Vec<usize>,
    /// Losses decided at PERIODs since the last record through the ring: a
    /// ring gap that starts later reaches back to that record for the
    /// judge (its LOST record does not say where in between it started),
    /// so its lost records may have been those overflows' samples.
    unanchored_decisions: u64,
    /// Where the records place the due point, and a question about the
    /// last stop they answer only with the next count read.
    known: Known,
    awaiting: Option<NextRead>,
    t: u64,
    cpu: u32,
    /// Absolute count (never reset) and the count at the last reset.
    a: u64,
    base: u64,
    due: u64,
    pending: Option<Pending>,
    next_stop: NextStop,
    queue: VecDeque<Queued>,
    /// Ring: records still to drop, and dropped since the last LOST.
    ring_drop: u64,
    ring_dropped: u64,
    /// Stops the throttled witness will still miss.
    witness_suppress: u64,
    /// A ring gap since the last sample written, and whether the grid moved
    /// in it.
    gap_open: bool,
    gap_rebased: bool,
    /// Between the witness's THROTTLE and UNTHROTTLE records.
    witness_throttled: bool,
    /// The next interrupt's sample is not written (`unthrottle_unwritten`).
    skip_sample: bool,
    end_at: Option<u64>,
    /// What count wraps added to the kernel's count since the last reset.
    wrap_offset: u64,
    /// A wrap since the last sample written.
    unanchored: bool,
}

/// Generates one stream.
pub fn generate(cfg: &ModelConfig, seed: u64) -> Generated {
    assert!(cfg.period >= 100, "the model needs room inside a period");
    assert!(cfg.interrupt_skid < cfg.period && cfg.skid < cfg.period);
    assert!(!cfg.include_kernel || cfg.stop_slack >= 1);
    // The handler before (a gap between RESET and PERIOD) counting kernel
    // mode: the judge knows its PERIOD's stop only from the read, so the
    // next due point not at all; not modelled.
    assert!(!cfg.include_kernel || cfg.reset_gap == 0);
    let mut sim = Sim {
        cfg,
        rng: fastrand::Rng::with_seed(seed),
        out: Vec::with_capacity(cfg.overflows as usize * 2 + 16),
        truth: Truth::default(),
        samples: Vec::new(),
        decided_losses: Vec::new(),
        unanchored_decisions: 0,
        known: Known::exact(cfg.period),
        awaiting: None,
        t: 1_000_000,
        cpu: 0,
        a: 0,
        base: 0,
        due: cfg.period,
        pending: None,
        next_stop: NextStop { witness: 0, at: 0 },
        queue: VecDeque::new(),
        ring_drop: 0,
        ring_dropped: 0,
        witness_suppress: 0,
        gap_open: false,
        gap_rebased: false,
        witness_throttled: false,
        skip_sample: false,
        end_at: None,
        wrap_offset: 0,
        unanchored: false,
    };
    sim.next_stop = sim.draw_stop();
    sim.run();
    let mut truth = sim.truth;
    truth.samples = sim
        .out
        .iter()
        .filter(|o| matches!(o, Observation::Sample { .. }))
        .count() as u64;
    truth.injected = truth
        .samples
        .checked_div(cfg.inject_drop_every)
        .unwrap_or(0);
    Generated {
        observations: sim.out,
        truth,
        samples: sim.samples,
        decided_losses: sim.decided_losses,
    }
}

/// What happens next on the count axis; ties in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Next {
    Raise,
    Take,
    Signal,
    Stop,
    End,
}

impl Sim<'_> {
    fn p(&self) -> u64 {
        self.cfg.period
    }

    fn coin(&mut self, p: f64) -> bool {
        p > 0.0 && self.rng.f64() < p
    }

    /// The handler's overflow signal, up to `max` ns on (`tick`), carrying
    /// its read; returns its time.
    fn overflow_signal(&mut self, max: u64, value: u64) -> u64 {
        let time_ns = self.tick(max);
        self.emit(Observation::Signal {
            time_ns,
            cpu: self.cpu,
            value,
            si_code: 1,
            delivery: Delivery::Overflow,
        });
        time_ns
    }

    fn emit(&mut self, o: Observation) {
        if !matches!(
            o,
            Observation::Signal { .. }
                | Observation::Reset { .. }
                | Observation::Move { .. }
                | Observation::Final { .. }
        ) {
            // A record through the ring: a gap after it cannot reach back
            // past it.
            self.unanchored_decisions = 0;
        }
        self.out.push(o);
    }

    /// The kernel's count at absolute count `a`: from the last reset, with
    /// the wraps since.
    fn count_at(&self, a: u64) -> u64 {
        a - self.base + self.wrap_offset
    }

    /// A strictly later time.
    fn tick(&mut self, max: u64) -> u64 {
        self.t += 1 + self.rng.u64(0..=max);
        self.t
    }

    fn latency(&mut self) -> u64 {
        let l = self.cfg.latency;
        let p = self.p();
        let skid = self.cfg.interrupt_skid;
        let total = l.on_time + l.late + l.period_late;
        let r = self.rng.u32(0..total.max(1));
        if r < l.on_time || total == 0 {
            self.rng.u64(0..=skid)
        } else if r < l.on_time + l.late {
            self.rng.u64(skid + 1..p)
        } else {
            self.rng.u64(p..=p * l.max_periods.max(1))
        }
    }

    fn draw_stop(&mut self) -> NextStop {
        let p = self.p();
        let at = if self.coin(self.cfg.stop_near_due) && self.due > self.a {
            // At the due point or a little after: where an overflow is
            // pending (the QEMU oracle saw most losses exactly at it).
            let after = match self.rng.u32(0..4) {
                0 | 1 => 0,
                2 => self.rng.u64(0..=self.cfg.interrupt_skid),
                _ => self.rng.u64(0..p * 2),
            };
            self.due + after
        } else {
            let mean = p as f64 / self.cfg.stops_per_period.max(1e-9);
            let gap = -(1.0 - self.rng.f64()).ln() * mean;
            self.a + 1 + (gap.min(1e15) as u64)
        };
        let at = at.max(self.a + 1);
        let witness = if self.cfg.include_kernel {
            // The witness reads a little before the stop (or, held, a lot),
            // never before the last thing that happened.
            let slack = if self.coin(self.cfg.held_stop) {
                HELD_STOP_PERIODS * p
            } else {
                self.cfg.stop_slack
            };
            at - self.rng.u64(0..slack).min(at - self.a - 1)
        } else {
            at
        };
        NextStop { witness, at }
    }

    /// Where the next signal is delivered, if one is queued.
    fn next_delivery(&self) -> Option<u64> {
        let q = self.queue.front()?;
        let mut at = q.deliver;
        if !self.cfg.signals_queue && !q.merge_next {
            // Before the next interrupt's sample and before the next stop
            // (where a pseudo-NMI may take one early).
            // Reset mode: before the handler's window reaches the next due
            // point, or the PERIOD would find every such overflow pending.
            let window = match self.cfg.mode {
                RearmMode::Free => 1,
                RearmMode::Reset => 1 + 2 * HANDLER_SLACK,
            };
            let next_take = self.pending.map_or(self.due, |p| p.take);
            at = at
                .min(next_take.saturating_sub(window))
                .min(self.next_stop.witness.saturating_sub(1));
        }
        Some(at.max(self.a).max(q.irq))
    }

    fn run(&mut self) {
        loop {
            let mut next = (u64::MAX, Next::End);
            let now = self.a;
            let mut consider = |at: u64, what: Next| {
                let at = at.max(now);
                if (at, what) < next {
                    next = (at, what);
                }
            };
            match self.pending {
                None => consider(self.due, Next::Raise),
                Some(p) => consider(p.take, Next::Take),
            }
            if let Some(at) = self.next_delivery() {
                consider(at, Next::Signal);
            }
            consider(self.next_stop.witness, Next::Stop);
            if let Some(end) = self.end_at {
                consider(end, Next::End);
            }
            let (at, what) = next;
            debug_assert!(at >= self.a, "{what:?} at {at} before {}", self.a);
            self.a = at;
            match what {
                Next::Raise => self.raise(),
                Next::Take => self.take(),
                Next::Signal => self.deliver(),
                Next::Stop => self.stop(),
                Next::End => {
                    self.end();
                    return;
                }
            }
        }
    }

    fn raise(&mut self) {
        self.truth.overflows += 1;
        let l = self.latency();
        self.pending = Some(Pending {
            due: self.due,
            take: self.due + l,
        });
        if self.end_at.is_none() && self.truth.overflows >= self.cfg.overflows {
            let end = self.a + self.rng.u64(0..self.p() * 2);
            self.end_at = Some(end);
        }
    }

    /// The pending overflow's interrupt is taken at the current count.
    fn take(&mut self) {
        let p = self.p();
        let pend = self.pending.take().expect("an overflow is pending");
        let late = self.a - pend.due;
        let skid = self.cfg.interrupt_skid;
        let taken = if late >= p {
            self.truth.rebase_irq += 1;
            self.due = self.a + p;
            Taken::Rebased
        } else {
            self.due = pend.due + p;
            if late <= skid {
                self.truth.on_time += 1;
                Taken::OnTime
            } else {
                self.truth.late += 1;
                Taken::Late
            }
        };
        self.truth.handled += 1;
        let t = self.tick(2_000);
        let count = self.count_at(self.a);
        let written = if std::mem::take(&mut self.skip_sample) {
            self.truth.unwritten_after_unthrottle += 1;
            // Taken as a ring gap up to the next sample: a stop may hide
            // there too.
            self.gap_open = true;
            self.truth.undecided += 1;
            false
        } else {
            self.kernel_record(Observation::Sample {
                time_ns: t,
                cpu: self.cpu,
                count,
            })
        };
        if taken == Taken::Rebased {
            // A gap the judge re-anchors at this sample hides it too.
            self.gap_moved();
        }
        if written {
            // Its count answers a question about the last stop first.
            self.read(self.a, true);
            self.gap_open = false;
            self.gap_rebased = false;
            self.samples.push(Sampled {
                taken,
                lateness: late,
                due_spread: self.known.spread(),
                after_wrap: std::mem::take(&mut self.unanchored),
            });
            // While the switch witness is throttled, a stop it misses may
            // come anywhere until it is unthrottled: the interval up to
            // this sample may hide one that lost an overflow.
            self.known = if self.stops_unrecorded() {
                self.truth.undecided += 1;
                Known::Unknown
            } else {
                self.known.after_sample(self.a, p)
            };
            self.check_known();
        } else {
            self.forget();
        }
        if self.coin(self.cfg.throttle) {
            // The sample is written all the same; the counter pauses until
            // the next tick and the grid is kept.
            self.truth.throttled += 1;
            self.flush_ring_gap();
            let t = self.tick(10);
            self.emit(Observation::Throttle {
                time_ns: t,
                witness: false,
            });
            let t = self.tick(1_000_000);
            self.emit(Observation::Unthrottle {
                time_ns: t,
                witness: false,
            });
            // Throttling is judged like a ring gap from here to the next
            // sample (the judge cannot tell the kernels apart).
            self.gap_open = true;
            self.truth.undecided += 1;
            self.forget();
            self.skip_sample = self.cfg.unthrottle_unwritten;
        }
        self.queue_signal(!written);
    }

    fn queue_signal(&mut self, record_lost: bool) {
        let p = self.p();
        if let Some(last) = self.queue.back_mut()
            && last.merge_next
        {
            // One irq_work for both interrupts: one signal, after this one.
            last.merge_next = false;
            last.irq = self.a;
            last.record_lost |= record_lost;
            last.deliver = last.deliver.max(self.a);
            self.truth.coalesced += 1;
            return;
        }
        let delay = if self.coin(self.cfg.signal_late) {
            self.rng.u64(self.cfg.skid..3 * p)
        } else {
            self.rng.u64(0..=self.cfg.skid)
        };
        // Queued signals are delivered back to back: the handler's own
        // events between them (and in reset mode its RESET and PERIOD).
        let gap = 20
            + self.rng.u64(0..200)
            + if self.cfg.mode == RearmMode::Reset {
                2 * HANDLER_SLACK
            } else {
                0
            };
        let mut deliver = self.a + delay;
        if let Some(last) = self.queue.back() {
            deliver = deliver.max(last.deliver + gap);
        }
        let sigio = self.coin(self.cfg.sigio);
        let merge_next = !sigio && self.coin(self.cfg.coalesce);
        self.queue.push_back(Queued {
            irq: self.a,
            deliver,
            sigio,
            record_lost,
            merge_next,
        });
    }

    /// A sample or stop record through the ring: maybe lost in a gap.
    /// Returns whether it was written.
    fn kernel_record(&mut self, o: Observation) -> bool {
        if self.ring_drop == 0 && self.coin(self.cfg.ring_loss) {
            self.ring_drop = self.rng.u64(1..=3);
            self.truth.ring_gaps += 1;
        }
        if self.ring_drop > 0 {
            self.ring_drop -= 1;
            self.ring_dropped += 1;
            self.gap_open = true;
            // A LOST record says how many records, not which: each may
            // have been a stop that cleared a pending overflow.
            self.truth.undecided += 1;
            let n = std::mem::take(&mut self.unanchored_decisions);
            self.truth.lost_decided -= n;
            self.truth.undecided += n;
            let kept = self.decided_losses.len() - n as usize;
            self.decided_losses.truncate(kept);
            self.forget();
            match o {
                Observation::Sample { .. } => self.truth.record_lost += 1,
                _ => self.truth.stops_record_lost += 1,
            }
            return false;
        }
        if self.ring_dropped > 0 {
            // The LOST record comes first: the record takes a later time.
            self.flush_ring_gap();
            let t = self.tick(10);
            let o = match o {
                Observation::Sample { cpu, count, .. } => Observation::Sample {
                    time_ns: t,
                    cpu,
                    count,
                },
                Observation::Stop { cpu, count, .. } => Observation::Stop {
                    time_ns: t,
                    cpu,
                    count,
                },
                other => other,
            };
            self.emit(o);
        } else {
            self.emit(o);
        }
        true
    }

    /// Writes the LOST record of the records dropped since the last one
    /// written. The kernel writes it first thing when it next writes any
    /// record (perf_output_begin): a sample or stop (`kernel_record`), a
    /// THROTTLE or UNTHROTTLE (of the event or of the switch witness, which
    /// shares its ring), or at the end.
    fn flush_ring_gap(&mut self) {
        if self.ring_dropped > 0 {
            let lost = std::mem::take(&mut self.ring_dropped);
            self.truth.lost_records += lost;
            let t = self.tick(10);
            self.emit(Observation::Lost { time_ns: t, lost });
        }
    }

    fn deliver(&mut self) {
        let q = self.queue.pop_front().expect("a signal is queued");
        if q.record_lost {
            self.truth.signals_of_record_lost += 1;
        }
        if q.sigio {
            self.truth.sigio += 1;
            let t = self.tick(2_000);
            self.emit(Observation::Signal {
                time_ns: t,
                cpu: self.cpu,
                value: 0,
                si_code: 0,
                delivery: Delivery::SigIo,
            });
            return;
        }
        self.truth.signals += 1;
        let value = self.count_at(self.a);
        // The handler's read: after every stop so far.
        self.read(self.a, false);
        if self.cfg.mode == RearmMode::Free {
            self.overflow_signal(2_000, value);
            return;
        }
        self.reset_handler(value);
    }

    /// Reset mode: the handler read `value` at the current count; it RESETs
    /// `x1` events later and PERIOD stops the event `x2` events after that.
    /// Interrupts taken in between come before the signal's record, whose
    /// time is the reset's.
    fn reset_handler(&mut self, value: u64) {
        let p = self.p();
        let x2 = self.rng.u64(0..=self.cfg.reset_gap.min(HANDLER_SLACK));
        let x1 = self.rng.u64(0..=HANDLER_SLACK - x2);
        let read_at = self.a;
        let reset_at = read_at + x1;
        let stop_at = reset_at + x2;
        // Events up to the RESET count in the old frame, then in the new.
        let mut at_disable = 0;
        for (until, new_frame) in [(reset_at, false), (stop_at, true)] {
            if new_frame {
                at_disable = self.count_at(reset_at);
                self.base = reset_at;
                self.wrap_offset = 0;
            }
            loop {
                match self.pending {
                    None if self.due <= until => {
                        self.a = self.due;
                        self.raise();
                    }
                    Some(pend) if pend.take <= until => {
                        self.a = pend.take;
                        self.take();
                        if new_frame {
                            // Its sample counts from the RESET but comes
                            // before the reset's record: the records place
                            // nothing until the PERIOD re-arms.
                            self.truth.taken_in_reset_gap += 1;
                            self.forget();
                        }
                    }
                    _ => break,
                }
            }
        }
        self.a = stop_at;
        // The PERIOD's stop: at the reset's DISABLE, whose count the record
        // gives (today's handler); the handler before, anywhere in the
        // handler slack after the read.
        let seen = if self.cfg.reset_gap == 0 {
            Seen::At(stop_at)
        } else {
            Seen::Between(read_at, read_at + HANDLER_SLACK)
        };
        let pending = self.pending.take().is_some();
        if self.stops_unrecorded() {
            // The interval up to the PERIOD may hide a missed stop.
            self.truth.undecided += 1;
        }
        if self.ask_pending(seen, pending, pending) == Answer::Yes && pending {
            self.unanchored_decisions += 1;
        }
        if pending {
            // PERIOD stops the event: the flag is cleared. It then sets
            // period_left to 0, so the restart takes rule 2 from there.
            self.truth.lost += 1;
            self.truth.lost_at_period += 1;
        }
        self.due = stop_at + p;
        // The PERIOD re-arms from period_left 0: a wrap's damage ends.
        self.unanchored = false;
        // The restart is at the reset (today's handler) or anywhere in the
        // handler slack after it (before): the new frame counts from the
        // RESET.
        let slack = if self.cfg.reset_gap == 0 {
            0
        } else {
            HANDLER_SLACK
        };
        self.known = if self.gap_open || self.stops_unrecorded() {
            // A ring gap up to the next sample (for the judge it may start
            // after this PERIOD as well as before, and a throttle is judged
            // like one), or a throttled witness whose unrecorded stops may
            // come anywhere until it is unthrottled.
            Known::Unknown
        } else {
            Known::Due {
                lo: reset_at + p,
                hi: reset_at + p + slack,
            }
        };
        self.check_known();
        self.truth.resets += 1;
        let t = self.overflow_signal(5_000, value);
        // The handler reads the count at its DISABLE (today's handler: the
        // stop is at the reset); before, it did not.
        let count = (self.cfg.reset_gap == 0).then_some(at_disable);
        self.emit(Observation::Reset { time_ns: t, count });
        if self.next_stop.witness <= stop_at {
            self.next_stop = self.draw_stop();
        }
        if let Some(end) = self.end_at
            && end < stop_at
        {
            self.end_at = Some(stop_at);
        }
    }

    fn stop(&mut self) {
        let NextStop { witness, at } = self.next_stop;
        self.truth.stops += 1;
        let old_cpu = self.cpu;
        let migrated = self.coin(self.cfg.migrations);
        if migrated {
            let t = self.tick(1_000);
            self.cpu = (self.cpu + 1) % 4;
            self.emit(Observation::Move {
                time_ns: t,
                cpu: self.cpu,
                requested_ns: None,
            });
        }
        // The witness's record.
        let count = self.count_at(witness);
        // Where the witness's record is in the stream, if written with a count.
        let mut witness_at = None;
        // Where the records place the stop.
        let mut seen = Seen::Unseen;
        if self.cfg.no_witness {
            self.truth.stops_unwitnessed += 1;
        } else if self.witness_suppress > 0 {
            self.truth.stops_unwitnessed += 1;
            self.witness_suppress -= 1;
            if self.witness_suppress == 0 {
                self.witness_unthrottle();
            }
        } else if self.coin(self.cfg.witness_throttle) {
            self.truth.stops_unwitnessed += 1;
            self.flush_ring_gap();
            let t = self.tick(1_000);
            self.emit(Observation::Throttle {
                time_ns: t,
                witness: true,
            });
            self.witness_throttled = true;
            self.forget();
            self.witness_suppress = self.rng.u64(0..=2);
            if self.witness_suppress == 0 {
                self.witness_unthrottle();
            }
        } else {
            let unknown = self.coin(self.cfg.stop_count_unknown);
            let t = self.tick(1_000);
            let written = self.kernel_record(Observation::Stop {
                time_ns: t,
                cpu: old_cpu,
                count: if unknown { None } else { Some(count) },
            });
            if written && unknown {
                self.truth.stops_unknown += 1;
            }
            if written && !unknown {
                // Its count answers a question about the last stop.
                self.read(witness, false);
                seen = if self.cfg.include_kernel {
                    Seen::From(witness)
                } else {
                    Seen::At(witness)
                };
                // The last record out (a LOST record may precede it).
                witness_at = Some(self.out.len() - 1);
            }
        }
        let known = self.known;
        // From the witness to the stop (kernel mode counted): interrupts
        // are masked in the scheduler; an overflow due there is pending.
        if self.pending.is_none() && self.due <= at {
            self.a = self.due;
            self.raise();
        }
        self.a = at;
        let pending = self.pending.is_some();
        let answer = self.ask_pending(seen, pending, pending && !self.cfg.pnmi);
        if let Some(pend) = self.pending.take() {
            if self.cfg.pnmi {
                // The NMI takes it before the stop clears the flag, at its
                // own point if that came first.
                self.truth.nmi_at_stop += 1;
                self.pending = Some(pend);
                self.a = pend.take.clamp(witness.max(pend.due), at);
                let taken_at = self.a;
                self.take();
                self.a = at;
                if let Some(k) = witness_at
                    && self.coin(self.cfg.count_wrap)
                {
                    self.wrap(k, taken_at);
                }
            } else {
                let rebased = self.a - pend.due >= self.p();
                self.lose(pend, false);
                if answer == Answer::Yes {
                    self.ask_rebased(known, seen, rebased);
                }
            }
        }
        // Off the CPU for a while.
        self.t += self.rng.u64(0..100_000);
        if migrated && self.cfg.resume_witness {
            // The resume witness: on the new CPU, after the restart, with
            // the kernel mode counted since (never past the next due point:
            // interrupts are masked there).
            let room = self.due.saturating_sub(self.a + 1);
            if self.cfg.include_kernel {
                self.a += self.rng.u64(0..=self.cfg.stop_slack.min(room));
            }
            let t = self.tick(1_000);
            let count = self.count_at(self.a);
            if self.kernel_record(Observation::Resume {
                time_ns: t,
                cpu: self.cpu,
                count,
            }) {
                self.read(self.a, false);
            }
        }
        self.check_known();
        self.next_stop = self.draw_stop();
    }

    /// `pend` was pending when the event stopped at the current count: the
    /// stop clears it; the restart re-arms by rule 1 or 2.
    fn lose(&mut self, pend: Pending, at_final: bool) {
        let p = self.p();
        self.truth.lost += 1;
        if at_final {
            self.truth.lost_at_final += 1;
        }
        if at_final {
            // DISABLE: no restart, no re-arm.
            return;
        }
        if self.a - pend.due >= p {
            self.truth.rebase_restart += 1;
            self.gap_moved();
            self.due = self.a + p;
        } else {
            self.due = pend.due + p;
        }
    }

    /// The NMI that took the overflow at `taken_at` raced the witness's
    /// read (the record at `k`): that read counted its delta twice, and the
    /// stop's update wrapped. The restart re-bases (rule 1).
    fn wrap(&mut self, k: usize, taken_at: u64) {
        let p = self.p();
        let double = self.rng.u64(0..p);
        let inflated = self.count_at(taken_at) + double;
        if let Observation::Stop { count, .. } = &mut self.out[k] {
            *count = Some(inflated);
        }
        self.wrap_offset += 1 << 32;
        self.truth.count_wraps += 1;
        self.due = self.a + p;
        self.gap_moved();
        self.unanchored = true;
        // The records place no due point until the next sample or reset.
        self.forget();
    }

    /// The grid moved: count it if a ring gap hides it.
    fn gap_moved(&mut self) {
        if self.gap_open && !self.gap_rebased {
            self.gap_rebased = true;
            self.truth.gaps_hiding_rebase += 1;
        }
    }

    /// Stops go unrecorded now: the witness is throttled, or there is none.
    fn stops_unrecorded(&self) -> bool {
        self.witness_throttled || self.cfg.no_witness
    }

    fn witness_unthrottle(&mut self) {
        self.witness_throttled = false;
        // The interval up to here may hide a missed stop too.
        self.truth.undecided += 1;
        self.flush_ring_gap();
        let t = self.tick(1_000);
        self.emit(Observation::Unthrottle {
            time_ns: t,
            witness: true,
        });
    }

    /// What the records say of whether an overflow was pending at the stop
    /// they place at `seen` (`pending`: the truth; `lost`: not taken by an
    /// NMI there), asked with the due point where they had it before.
    fn ask_pending(&mut self, seen: Seen, pending: bool, lost: bool) -> Answer {
        let answer = records::pending_at(self.known, seen, self.p());
        match answer {
            Answer::Yes => {
                assert!(pending, "the records say pending at {seen:?}");
                if lost {
                    self.truth.lost_decided += 1;
                    self.decided_losses.push(self.out.len());
                } else if let (true, Known::Due { lo, .. }) = (self.cfg.pnmi, self.known) {
                    // An NMI takes it, but it may also have lost it (the
                    // race pseudo-NMI leaves): only its sample says which,
                    // at or below an exact stop (taken before it) or below
                    // where a lost one's successor could be.
                    let before_stop = match seen {
                        Seen::At(s) => s + 1,
                        _ => 0,
                    };
                    self.awaiting = Some(NextRead {
                        below: 0,
                        sample_below: before_stop.max(lo + self.p()),
                    });
                }
            }
            Answer::No => assert!(!pending, "the records say not pending at {seen:?}"),
            Answer::Open => self.leave_open(),
            Answer::NextRead(q) => self.awaiting = Some(q),
        }
        answer
    }

    /// After a loss the records decide at the stop they place at `seen`:
    /// what they say of the restart's re-arm (`rebased`: the truth), and
    /// where they place the due point after it.
    fn ask_rebased(&mut self, known: Known, seen: Seen, rebased: bool) {
        let p = self.p();
        match records::rebased_at_restart(known, seen, p) {
            Answer::Yes => {
                assert!(rebased, "the records say re-based at {seen:?}");
                self.known = records::after_loss(known, seen, true, p);
            }
            Answer::No => {
                assert!(!rebased, "the records say rule 2 at {seen:?}");
                self.known = records::after_loss(known, seen, false, p);
            }
            Answer::Open => self.leave_open(),
            Answer::NextRead(q) => {
                // Rule 2 unless the next read says the stop may have been a
                // period past the due point.
                self.awaiting = Some(q);
                self.known = records::after_loss(known, seen, false, p);
            }
        }
    }

    /// A count the records give (absolute `x`), after every stop before it
    /// (`sample`: a sample's): it answers the question waiting on it, or
    /// leaves it open.
    fn read(&mut self, x: u64, sample: bool) {
        if let Some(q) = self.awaiting.take() {
            let below = if sample { q.sample_below } else { q.below };
            if x >= below {
                self.leave_open();
            }
        }
    }

    /// A place the records leave open: counted, and they place no due
    /// point after it until something anchors it again.
    fn leave_open(&mut self) {
        self.truth.undecided += 1;
        self.known = Known::Unknown;
    }

    /// Something the records do not show: they place no due point until
    /// the next sample or reset, and a question still waiting stays open.
    fn forget(&mut self) {
        if self.awaiting.take().is_some() {
            self.truth.undecided += 1;
        }
        self.known = Known::Unknown;
    }

    /// Where the records place the due point, the due point is there.
    fn check_known(&self) {
        if let (Known::Due { lo, hi }, None) = (self.known, self.awaiting) {
            let due = self.pending.map_or(self.due, |p| p.due);
            assert!(
                lo <= due && due <= hi,
                "due {due} outside [{lo}, {hi}] at {}",
                self.a
            );
        }
    }

    fn end(&mut self) {
        self.read(self.a, false);
        // The final DISABLE is a stop at the final count.
        let pending = self.pending.is_some();
        let lost = pending && !self.cfg.pnmi;
        if self.ask_pending(Seen::At(self.a), pending, lost) == Answer::Yes && lost {
            self.truth.lost_at_final_decided += 1;
        }
        if let Some(pend) = self.pending.take() {
            if self.cfg.pnmi {
                self.truth.nmi_at_stop += 1;
                self.pending = Some(pend);
                self.take();
            } else {
                self.lose(pend, true);
            }
        }
        self.truth.in_flight += self.queue.len() as u64;
        self.flush_ring_gap();
        if self.witness_throttled {
            self.witness_unthrottle();
        } else if self.cfg.no_witness {
            // The interval up to the end may hide a stop too.
            self.truth.undecided += 1;
        }
        let t = self.tick(100_000);
        self.emit(Observation::Final {
            time_ns: t,
            count: Some(self.count_at(self.a)),
        });
    }
}
