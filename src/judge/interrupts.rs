/*!
Judging interrupts from the kernel's own records alone.

The driver arms each overflow on a grid: the next one is due a period after
the previous due point (`armpmu_event_set_period` / `x86_perf_event_set_period`,
rule 2), except when it finds the counter a whole period or more past the due
point, where it re-bases: the next is due a period after *now* (rule 1). An
overflow's interrupt writes one sample record whose count is where the
interrupt was taken, so a sample's lateness is its count minus its due point.
An overflow is lost only where the event is stopped while it is pending (the
stop clears the overflow flag): at a context switch, which the switch witness
records with the event's count, or at the final DISABLE, whose count we read.
The restart then applies the same two rules and ignores "overflowed", so the
lost overflow's period is consumed silently (`armpmu_start` in Linux's
drivers/perf/arm_pmu.c).

With the count at every stop (the context-switch witness, user-mode counting)
the replay of those rules is exact: one explanation of the stream. Where a
stop's count is only a lower bound (kernel mode is counted too, so the count
moves between the witness and the stop) or unknown (a time-only switch
record, a throttled witness), both "pending at the stop" and "not pending" are
followed as hypotheses. A sample refutes the hypotheses under which its count
is impossible, and hypotheses that reach the same state are merged: when they
disagree on what happened, the difference is counted `ambiguous`, never
guessed. A stream that no hypothesis explains is counted `unexplained` and the
grid is re-anchored: the run is then inconclusive, never silently judged.

Software clocks have no such grid (an hrtimer re-arms on time, and skips
periods when it fires late); their gaps are timer skips, never drops.
*/

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::JudgeConfig;

/// Every overflow of one event, accounted exactly once.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterruptTotals {
    /// PERF_RECORD_SAMPLEs of the overflow event (injected ones excluded):
    /// interrupts the kernel handled.
    pub samples: u64,
    /// Samples within the interrupt skid of their due point.
    pub on_time: u64,
    /// Samples later than the skid but less than a period late.
    pub late: u64,
    /// Samples a period or more late, after which the driver re-based the
    /// period (rule 1 in the interrupt handler).
    pub rebased_in_handler: u64,
    /// Of the samples booked on time or late, those a period or more late
    /// under some explanation of the stream but not under all (late where
    /// the due point is known to a range, or anchoring a grid a stop moved
    /// by an unknown amount): the driver's re-bases in the handler are
    /// between `rebased_in_handler` and this much more.
    #[serde(default)]
    pub late_maybe_rebased: u64,
    /// Overflows whose interrupt never happened: pending when the event was
    /// stopped (injected ones included). Only what no other explanation fits.
    pub dropped: u64,
    /// Of the dropped, those whose restart re-based the period (the event ran
    /// a period or more past the lost due point before it was stopped).
    pub rebased_at_restart: u64,
    /// Of the dropped, those at the final DISABLE.
    pub dropped_at_final_stop: u64,
    /// Overflows that are dropped under one explanation of the stream and
    /// not under another (e.g. an interrupt a period late that lands on the
    /// grid of a lost one): counted apart, never as drops.
    pub ambiguous: u64,
    /// Overflows we discarded on purpose (`--inject-drop-every`): counted in
    /// `dropped` too.
    pub injected: u64,
    /// THROTTLE records of the overflow event.
    pub throttled: u64,
    pub unthrottled: u64,
    /// Overflows inside a gap of the ring (a LOST record): their samples
    /// were never written, so nothing can be said of them.
    pub record_lost: u64,
    /// LOST records' counts of records the kernel could not write.
    pub lost_records: u64,
    /// Event stops the witness recorded (context switches).
    pub stops: u64,
    /// Of those, stops whose count the witness could not read.
    pub stops_without_count: u64,
    /// THROTTLE records of the switch witness: stops went unrecorded.
    pub witness_throttled: u64,
    /// Software clocks: periods the timer skipped (no overflow at all).
    pub timer_skips: u64,
    /// Samples that fit no driver behaviour (our bug or a kernel we do not
    /// model): the grid was re-anchored on them.
    pub unexplained: u64,
    /// Times the kernel's count jumped by 2^32 (`wrap`): its update raced
    /// the overflow NMI, and the driver's next re-arm re-based the period,
    /// in the handler or at a restart (the records do not say which).
    #[serde(default)]
    pub count_wraps: u64,
    /// The first sample after each count wrap: the re-base erased its due
    /// point, so its lateness is unknown; the grid is anchored on it.
    #[serde(default)]
    pub after_count_wrap: u64,
    /// Every overflow accounted for once: samples + dropped + ambiguous +
    /// record_lost, where samples = on_time + late + rebased_in_handler +
    /// after_count_wrap + unexplained. A due point the final count passed is judged at the
    /// final stop like at any stop, so none is left over.
    pub overflows: u64,
}

impl InterruptTotals {
    pub fn add(&mut self, o: &InterruptTotals) {
        let InterruptTotals {
            samples,
            on_time,
            late,
            rebased_in_handler,
            late_maybe_rebased,
            dropped,
            rebased_at_restart,
            dropped_at_final_stop,
            ambiguous,
            injected,
            throttled,
            unthrottled,
            record_lost,
            lost_records,
            stops,
            stops_without_count,
            witness_throttled,
            timer_skips,
            unexplained,
            count_wraps,
            after_count_wrap,
            overflows,
        } = o;
        self.samples += samples;
        self.on_time += on_time;
        self.late += late;
        self.rebased_in_handler += rebased_in_handler;
        self.late_maybe_rebased += late_maybe_rebased;
        self.dropped += dropped;
        self.rebased_at_restart += rebased_at_restart;
        self.dropped_at_final_stop += dropped_at_final_stop;
        self.ambiguous += ambiguous;
        self.injected += injected;
        self.throttled += throttled;
        self.unthrottled += unthrottled;
        self.record_lost += record_lost;
        self.lost_records += lost_records;
        self.stops += stops;
        self.stops_without_count += stops_without_count;
        self.witness_throttled += witness_throttled;
        self.timer_skips += timer_skips;
        self.unexplained += unexplained;
        self.count_wraps += count_wraps;
        self.after_count_wrap += after_count_wrap;
        self.overflows += overflows;
    }
}

/// Something about one overflow worth a line of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InterruptEvent {
    pub kind: InterruptEventKind,
    pub time_ns: u64,
    pub cpu: u32,
    /// The count of the sample that showed it (or of the final stop).
    pub count: u64,
    /// The count of the interrupt before it, if any.
    pub prev_count: Option<u64>,
    /// How many overflows it concerns.
    pub overflows: u64,
    /// The stop's count, for a drop.
    pub stop_count: Option<u64>,
    /// For a sample: its lateness past the due point.
    pub lateness: Option<u64>,
    /// A drop we made ourselves (`--inject-drop-every`).
    pub injected: bool,
}

impl InterruptEvent {
    /// The event a sample makes, once its kind and lateness are known.
    fn of_sample(
        time_ns: u64,
        cpu: u32,
        count: u64,
        prev_count: Option<u64>,
        injected: bool,
    ) -> impl Fn(InterruptEventKind, Option<u64>) -> InterruptEvent + Copy {
        move |kind, lateness| InterruptEvent {
            kind,
            time_ns,
            cpu,
            count,
            prev_count,
            overflows: 1,
            stop_count: None,
            lateness,
            injected,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterruptEventKind {
    Dropped,
    Ambiguous,
    /// An interrupt a period or more late (the driver re-based).
    RebasedInHandler,
    Throttled,
    RecordsLost,
    TimerSkip,
    Unexplained,
    /// The kernel's count jumped by 2^32 (`wrap`).
    CountWrap,
}

/// Where the next overflow is due: somewhere in [lo, hi]; exact when
/// lo == hi. `hi == u64::MAX`: the grid moved by an unknown amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Due {
    lo: u64,
    hi: u64,
}

impl Due {
    fn exact(at: u64) -> Due {
        Due { lo: at, hi: at }
    }

    fn plus(self, p: u64) -> Due {
        Due {
            lo: self.lo.saturating_add(p),
            hi: self.hi.saturating_add(p),
        }
    }

    fn unknown(&self) -> bool {
        self.hi == u64::MAX
    }
}

/// What one hypothesis has claimed since the hypotheses last agreed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Tally {
    on_time: u64,
    late: u64,
    rebased_in_handler: u64,
    late_maybe_rebased: u64,
    dropped: u64,
    rebased_at_restart: u64,
    dropped_at_final_stop: u64,
    ambiguous: u64,
    injected: u64,
    latencies: Vec<u64>,
    events: Vec<InterruptEvent>,
}

/// One explanation of the stream so far.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Hypothesis {
    due: Due,
    /// A stop found the overflow pending: lost, unless the next sample is
    /// its interrupt taken before the stop finished. (lo, hi) of the
    /// stop's count.
    pending_stop: Option<(u64, u64)>,
    tally: Tally,
}

/// At most this many hypotheses are followed; more are merged as ambiguous.
const MAX_HYPOTHESES: usize = 16;

/// One event's interrupt judgement.
pub struct InterruptJudge {
    cfg: JudgeConfig,
    hyps: Vec<Hypothesis>,
    totals: InterruptTotals,
    /// Lateness of interrupts (events past the due point) where the due
    /// point is exact.
    latency: Histogram<u64>,
    prev_count: Option<u64>,
    /// Stops may have gone unrecorded since the last sample.
    stops_unwitnessed: bool,
    /// The switch witness is throttled: stops go unrecorded.
    witness_throttled: bool,
    /// A LOST record since the last sample.
    ring_gap: bool,
    /// After a count wrap, until the next sample anchors the grid again:
    /// the stops since that may have found an overflow pending (the driver
    /// re-based at one of its re-arms there, so no due point is known).
    wrap_stops: Option<u64>,
    /// The highest count a task-context read gave since the last sample
    /// (a stop's or a resume's witness, our own read).
    read_since_sample: Option<u64>,
    /// The last sample's count, when its interrupt may have raced a read
    /// of the count (`nmi_may_have_raced_a_read`).
    raced_sample: Option<u64>,
    /// Settled events not yet taken by the caller.
    events: Vec<InterruptEvent>,
}

impl InterruptJudge {
    pub fn new(cfg: JudgeConfig) -> InterruptJudge {
        InterruptJudge {
            cfg,
            hyps: vec![Hypothesis {
                // RESET then ENABLE: the first overflow is a period in.
                due: Due::exact(cfg.period),
                pending_stop: None,
                tally: Tally::default(),
            }],
            totals: InterruptTotals::default(),
            latency: crate::domain::histogram(),
            prev_count: None,
            stops_unwitnessed: false,
            witness_throttled: false,
            read_since_sample: None,
            raced_sample: None,
            ring_gap: false,
            wrap_stops: None,
            events: Vec::new(),
        }
    }

    pub fn totals(&self) -> &InterruptTotals {
        &self.totals
    }

    pub fn latency(&self) -> &Histogram<u64> {
        &self.latency
    }

    /// Events settled since the last call, in order.
    pub fn take_events(&mut self, out: &mut Vec<InterruptEvent>) {
        out.append(&mut self.events);
    }

    /// Where the next overflow is due, when every explanation of the
    /// records so far puts it at one count (a software clock has no grid:
    /// a period past its last sample). Only for measuring where stops fall
    /// (`stress`), never for a verdict.
    pub fn due_point(&self) -> Option<u64> {
        if self.cfg.software {
            return self.prev_count.map(|c| c.saturating_add(self.cfg.period));
        }
        let first = self.hyps.first()?.due;
        (first.lo == first.hi && self.hyps.iter().all(|h| h.due == first)).then_some(first.lo)
    }

    /// Overflows accounted for so far (settled ones only).
    pub fn overflows(&self) -> u64 {
        self.totals.overflows
    }

    /// One interrupt (sample record). `injected`: we discard it on purpose,
    /// as if its interrupt had never come (the driver's grid still moves
    /// with it: it did handle it).
    pub fn sample(&mut self, time_ns: u64, cpu: u32, count: u64, injected: bool) {
        if injected {
            self.totals.injected += 1;
        } else {
            self.totals.samples += 1;
        }
        if self.cfg.software {
            self.software_sample(time_ns, cpu, count, injected);
            return;
        }
        if std::mem::take(&mut self.ring_gap) {
            self.reanchor_after_ring_gap(time_ns, count);
        }
        if let Some(stops) = self.wrap_stops.take() {
            self.anchor_after_wrap(time_ns, cpu, count, stops, injected);
            return;
        }
        self.unwitnessed_stops(time_ns, cpu, Some(count));
        let p = self.cfg.period;
        let skid = self.cfg.interrupt_skid;
        let prev = self.prev_count;
        let event = InterruptEvent::of_sample(time_ns, cpu, count, prev, injected);
        // What the hypotheses claimed so far, should none explain this one.
        let before: Vec<Tally> = if self.hyps.len() > 1 {
            self.hyps.iter().map(|h| h.tally.clone()).collect()
        } else {
            Vec::new()
        };
        let raced = self.raced_sample.take();
        let mut next = Vec::with_capacity(self.hyps.len() + 1);
        let mut work = std::mem::take(&mut self.hyps);
        let mut k = 0;
        while k < work.len() {
            let mut h = work[k].clone();
            k += 1;
            if let Some((stop_lo, stop_hi)) = h.pending_stop.take() {
                // Lost at the stop, this interrupt came after the restart:
                // the stop was at or below its count.
                let stop = Stop {
                    lo: stop_lo,
                    hi: stop_hi.min(count).max(stop_lo),
                    kind: StopKind::Switch,
                };
                if !(h.due.lo <= count && count <= stop_hi) || self.cfg.irq_masked_at_stops {
                    // Not taken before the stop finished (as an NMI would
                    // be; an ordinary IRQ cannot be, the scheduler masks it
                    // from the witness's read to the stop): the stop
                    // cleared it.
                    lose_at_stop(&mut h, p, stop, event(InterruptEventKind::Dropped, None));
                } else if stop_lo < stop_hi {
                    // Taken before the stop, or lost there and this is the
                    // next overflow's interrupt: with the stop's count only
                    // a range, the next due point after a loss (rule 2) can
                    // lie below the stop's upper end, so both can fit:
                    // follow the loss too.
                    let mut lost = h.clone();
                    lose_at_stop(&mut lost, p, stop, event(InterruptEventKind::Dropped, None));
                    work.push(lost);
                }
            }
            if count < h.due.lo {
                match raced {
                    // The last interrupt came a period or more late under
                    // this explanation (the driver re-based from it), and
                    // may have raced a read of the count: re-armed from
                    // below its sample's count, anywhere up to this one.
                    Some(at) if count > at && h.due == Due::exact(at.saturating_add(p)) => {
                        h.due = Due {
                            lo: at + 1,
                            hi: count,
                        }
                    }
                    // Under this explanation no overflow was due yet.
                    _ => continue,
                }
            }
            let late_min = count.saturating_sub(h.due.hi);
            let late_max = count - h.due.lo;
            let class = if h.due.unknown() {
                // The grid moved by an unknown amount (a restart re-based at
                // a stop we could not read): this interrupt anchors it. Its
                // due point is in [lo, count], less than a period back
                // unless the driver re-based again (then the next is due at
                // count + p), so the next is due in [max(lo, count - p + 1)
                // + p, count + p]. (Anchoring at count + p exactly took the
                // interrupt for on time: a later interrupt taken earlier
                // past its due point then fit no hypothesis.)
                //
                // A grid moved at a stop the witness missed is one loss
                // and a re-base, or (rule 2 each time) one loss per grid
                // point up to this interrupt's: at most (count - lo) / p + 2
                // with lo two periods past the first lost one. The loss
                // booked is certain; the rest may have been, so ambiguous.
                h.tally.ambiguous += (count - h.due.lo) / p + 1;
                // A period or more past the lowest due point it can have,
                // it may be the driver's re-base in the handler (rule 1):
                // its next due point, count + p, is inside the range below
                // either way, so no record tells. Booked on time, maybe
                // re-based: booked on time alone, those re-bases fit no
                // explanation's count (with no witness at all, pseudo-NMI
                // on: the driver re-based 48 times in the handler, the
                // judge had 45 as some explanation's).
                let may_rebase = count - h.due.lo >= p;
                h.due = Due {
                    lo: h
                        .due
                        .lo
                        .max((count + 1).saturating_sub(p))
                        .saturating_add(p),
                    hi: count.saturating_add(p),
                };
                h.tally.late_maybe_rebased += u64::from(may_rebase);
                Class::OnTime
            } else if late_min >= p {
                h.due = Due::exact(count.saturating_add(p));
                Class::Rebased(late_min)
            } else if late_max < p {
                if h.due.lo == h.due.hi {
                    h.tally.latencies.push(late_max);
                }
                // Its due point is at or before its count.
                h.due.hi = h.due.hi.min(count);
                h.due = h.due.plus(p);
                if late_min > skid {
                    Class::Late
                } else {
                    Class::OnTime
                }
            } else {
                // A period late under some due points in range, not under
                // others: follow both.
                let mut rebased = h.clone();
                rebased.due = Due::exact(count.saturating_add(p));
                rebased
                    .tally
                    .claim(Class::Rebased(late_max), injected, event);
                next.push(rebased);
                h.due = Due {
                    lo: h.due.lo.max(count - p + 1),
                    hi: h.due.hi,
                }
                .plus(p);
                Class::Late
            };
            h.tally.claim(class, injected, event);
            next.push(h);
        }
        // The overflow NMI ran inside or right after a task-context read of
        // the count (this sample is at or below that read's count), where it
        // can race the read's update of the count: seeing the count's delta
        // but not period_left's, the driver re-arms off the grid (its
        // `irq_unhandled`), and the count it writes in the sample is not the
        // one it re-armed at. Measured on the oracle kernel: the next
        // interrupt came 3,095 events before this sample's count plus the
        // period, which no grid explained, and a hypothesis without the loss
        // was refuted by it. So the next sample may come before a
        // hypothesis's due point (see above) instead of refuting it.
        self.raced_sample = self.nmi_may_have_raced_a_read(count).then_some(count);
        self.read_since_sample = None;
        self.hyps = next;
        if self.hyps.is_empty() {
            if !before.is_empty() {
                self.commit(combine(before));
            }
            self.unexplained(time_ns, cpu, count, prev);
        }
        self.prev_count = Some(count);
        self.commit_agreed();
    }

    /// The event was stopped (a context switch). `count`: its count there,
    /// when the witness could read it.
    pub fn stop(&mut self, time_ns: u64, cpu: u32, count: Option<u64>) {
        self.totals.stops += 1;
        if self.cfg.software {
            return;
        }
        if self.ring_gap {
            // After a LOST record and before the next sample, an overflow
            // due by this stop may have had its sample in the gap: not a
            // drop to claim here. The next sample re-anchors past it (the
            // due points before it are record_lost, stops unknown).
            // Judging it as any stop claimed drops of overflows whose
            // samples the ring lost.
            if count.is_none() {
                self.totals.stops_without_count += 1;
            }
            return;
        }
        if let Some(stops) = &mut self.wrap_stops {
            // No due point is known after a wrap: judged at the next sample.
            // The restart that re-based was at or after the last sample, so
            // nothing was due before a period past it.
            let floor = self.prev_count.unwrap_or(0).saturating_add(self.cfg.period);
            if count.is_none_or(|c| c >= floor) {
                *stops += 1;
            }
            if count.is_none() {
                self.totals.stops_without_count += 1;
            }
            return;
        }
        // Stops the witness missed (it was throttled and is no more) came
        // before this one: judging them only at the next sample put them
        // after it, which cannot explain a loss between them.
        self.unwitnessed_stops(time_ns, cpu, count);
        let Some(count) = count else {
            self.totals.stops_without_count += 1;
            self.stop_unknown(time_ns, cpu, true, None);
            return;
        };
        self.note_read(count);
        // Counting kernel mode, the count moves on between the witness's
        // read and the stop itself; counting user mode only, it cannot.
        let stop = Stop {
            lo: count,
            hi: count.saturating_add(self.kernel_slack()),
            kind: StopKind::Switch,
        };
        self.stop_at(time_ns, cpu, stop);
    }

    /// How far past its witness's read a stop may be: counting kernel mode,
    /// up to the next count the records give (which then bounds it).
    fn kernel_slack(&self) -> u64 {
        if self.cfg.include_kernel { u64::MAX } else { 0 }
    }

    /// The overflow interrupt may be an NMI (not masked where the kernel
    /// reads the count) and the count moves in kernel mode, and this
    /// sample's count is at or below a read since the last sample: the NMI
    /// came during or after that read's update of the count. Counting user
    /// mode only, the count stands still across the read, and the race
    /// leaves a late interrupt, which the judge takes as one.
    fn nmi_may_have_raced_a_read(&self, count: u64) -> bool {
        !self.cfg.irq_masked_at_stops
            && self.cfg.include_kernel
            && self.read_since_sample.is_some_and(|read| count <= read)
    }

    fn note_read(&mut self, count: u64) {
        self.read_since_sample = Some(self.read_since_sample.map_or(count, |r| r.max(count)));
    }

    fn stop_at(&mut self, time_ns: u64, cpu: u32, stop: Stop) {
        let p = self.cfg.period;
        let prev = self.prev_count;
        let event = |count| InterruptEvent {
            kind: InterruptEventKind::Dropped,
            time_ns,
            cpu,
            count,
            prev_count: prev,
            overflows: 1,
            stop_count: Some(stop.lo),
            lateness: None,
            injected: false,
        };
        let mut next = Vec::with_capacity(self.hyps.len() + 1);
        for mut h in std::mem::take(&mut self.hyps) {
            if let Some((lo, hi)) = h.pending_stop.take() {
                // Stopped again with no interrupt in between: the pending
                // overflow of the previous stop was lost there, at or below
                // this stop's count.
                let earlier = Stop {
                    lo,
                    hi: hi.min(stop.lo).max(lo),
                    kind: StopKind::Switch,
                };
                lose_at_stop(&mut h, p, earlier, event(lo));
            }
            if h.due.unknown() || h.due.lo > stop.hi {
                // Not due yet at the stop.
                next.push(h);
                continue;
            }
            if h.due.hi > stop.lo {
                // Pending only if the due point was below the stop's count.
                let mut not_pending = h.clone();
                not_pending.due.lo = not_pending.due.lo.max(stop.lo + 1);
                next.push(not_pending);
                h.due.hi = h.due.hi.min(stop.hi);
            }
            // Pending at the stop. Lost, unless its interrupt comes before
            // the stop clears it: the next sample says (a final stop has no
            // next sample, and a PERIOD's is counted from 0 again).
            let at = Stop {
                lo: stop.lo.max(h.due.lo),
                ..stop
            };
            if stop.kind == StopKind::Switch {
                h.pending_stop = Some((at.lo, at.hi));
            } else {
                lose_at_stop(&mut h, p, at, event(at.lo));
            }
            next.push(h);
        }
        self.hyps = next;
        self.commit_agreed();
    }

    /// Stops may have gone unrecorded (the witness was throttled, or there
    /// is none) since the last sample: one of unknown count. Its branches
    /// where an overflow was lost survive only where the next record's
    /// count fits the loss (a period or more past the due point).
    ///
    /// `by`: the count of the record that follows them, when known: they
    /// were at or below it, so no overflow due past it was lost there.
    fn unwitnessed_stops(&mut self, time_ns: u64, cpu: u32, by: Option<u64>) {
        if std::mem::take(&mut self.stops_unwitnessed)
            || self.witness_throttled
            || self.cfg.stops_unseen
        {
            self.stop_unknown(time_ns, cpu, false, by);
        }
    }

    /// A stop of unknown count since the last sample: lost or not, with
    /// the grid kept or moved by an unknown amount.
    ///
    /// `after_pending`: a recorded stop of its own (after any earlier stop
    /// that found an overflow pending, with no sample between): that
    /// overflow was lost at the earlier stop, as in `stop_at`. Else (stops
    /// the witness missed since the last sample, in unknown order with a
    /// recorded one) it may also still be pending.
    fn stop_unknown(&mut self, time_ns: u64, cpu: u32, after_pending: bool, by: Option<u64>) {
        let p = self.cfg.period;
        let prev = self.prev_count;
        let mut next = Vec::with_capacity(self.hyps.len() * 3);
        for mut h in std::mem::take(&mut self.hyps) {
            if let Some((lo, hi)) = h.pending_stop {
                // Skipping the hypothesis's unknown-stop branches while an
                // overflow was pending missed the losses of a second stop
                // before the next sample: the grid fell behind and a later
                // sample fit no hypothesis.
                if !after_pending {
                    next.push(h.clone());
                }
                h.pending_stop = None;
                let earlier = Stop {
                    lo,
                    hi,
                    kind: StopKind::Switch,
                };
                let event = InterruptEvent {
                    kind: InterruptEventKind::Dropped,
                    time_ns,
                    cpu,
                    count: lo,
                    prev_count: prev,
                    overflows: 1,
                    stop_count: Some(lo),
                    lateness: None,
                    injected: false,
                };
                lose_at_stop(&mut h, p, earlier, event);
            }
            next.push(h.clone());
            if h.due.unknown() || by.is_some_and(|c| h.due.lo > c) {
                // Not due by the stop, which was at or below `by`.
                continue;
            }
            let event = InterruptEvent {
                kind: InterruptEventKind::Dropped,
                time_ns,
                cpu,
                count: h.due.lo,
                prev_count: prev,
                overflows: 1,
                stop_count: None,
                lateness: None,
                injected: false,
            };
            let mut kept = h.clone();
            kept.tally.dropped += 1;
            kept.tally.events.push(event);
            kept.due = kept.due.plus(p);
            next.push(kept);
            // The grid moved by more than a period: a re-base at the
            // restart, or several stops that each lost an overflow on the
            // grid (rule 2 each time). Which one the records cannot say, so
            // no re-base is claimed here: with it counted, every
            // explanation left could claim a re-base that was two losses.
            let mut moved = h;
            moved.tally.dropped += 1;
            moved.tally.events.push(event);
            moved.due = Due {
                lo: moved.due.lo.saturating_add(2 * p),
                hi: u64::MAX,
            };
            next.push(moved);
        }
        self.hyps = next;
        self.commit_agreed();
    }

    /// Our own read of the count (a handler's read(2), the count at a reset's
    /// DISABLE): the thread ran again after any stop before it, so every
    /// such stop was at `count` or below. A hypothesis whose overflow was
    /// pending at one needs its due point at or below `count` too. (Counting
    /// kernel mode, a stop's count is otherwise bounded above only by the
    /// next count the records give: a held vCPU can run for many periods
    /// past the witness's read.)
    pub fn count_read(&mut self, count: u64) {
        if !self.cfg.software {
            self.note_read(count);
        }
        if self.cfg.software || self.hyps.iter().all(|h| h.pending_stop.is_none()) {
            return;
        }
        let before = self.hyps.len();
        let kept: Vec<Hypothesis> = self
            .hyps
            .iter()
            .filter(|h| h.pending_stop.is_none() || h.due.lo <= count)
            .cloned()
            .map(|mut h| {
                if let Some((lo, hi)) = h.pending_stop {
                    h.pending_stop = Some((lo, hi.min(count).max(lo)));
                    h.due.hi = h.due.hi.min(count);
                }
                h
            })
            .collect();
        if kept.is_empty() {
            // A read below every explanation's due point at a pending stop:
            // not ours to refute here; the next sample judges.
            return;
        }
        self.hyps = kept;
        if self.hyps.len() < before {
            self.commit_agreed();
        }
    }

    pub fn throttle(&mut self, time_ns: u64, witness: bool) {
        if witness {
            self.totals.witness_throttled += 1;
            self.witness_throttled = true;
            return;
        }
        self.totals.throttled += 1;
        self.events.push(InterruptEvent {
            kind: InterruptEventKind::Throttled,
            time_ns,
            cpu: u32::MAX,
            count: self.prev_count.unwrap_or(0),
            prev_count: self.prev_count,
            overflows: 0,
            stop_count: None,
            lateness: None,
            injected: false,
        });
    }

    pub fn unthrottle(&mut self, witness: bool) {
        if witness {
            // Stops while it was throttled are unknown up to the next sample.
            self.witness_throttled = false;
            self.stops_unwitnessed = true;
        } else {
            self.totals.unthrottled += 1;
            // Newer kernels (seen on 6.18) handle the first overflow after
            // an unthrottle without writing its sample: a gap follows.
            self.ring_gap = true;
        }
    }

    /// The ring lost `lost` records: samples or stops up to the next sample
    /// may be missing.
    pub fn lost(&mut self, time_ns: u64, lost: u64) {
        self.totals.lost_records += lost;
        self.ring_gap = true;
        self.events.push(InterruptEvent {
            kind: InterruptEventKind::RecordsLost,
            time_ns,
            cpu: u32::MAX,
            count: self.prev_count.unwrap_or(0),
            prev_count: self.prev_count,
            overflows: lost,
            stop_count: None,
            lateness: None,
            injected: false,
        });
    }

    /// Reset mode: the handler read `read`, then reset the count. Its
    /// DISABLE (PERIOD, in runs recorded before) stops the event a few
    /// user-mode events after the read (a pending overflow is lost there
    /// like at any stop) and re-arms one period from the restart, which is
    /// a few events after the RESET. `at_stop`: the count at the DISABLE,
    /// where the handler read it (exact; counting kernel mode, the read is
    /// only a lower bound of it).
    pub fn reset(&mut self, time_ns: u64, read: u64, at_stop: Option<u64>) {
        let last_sample = self.prev_count.take();
        // The count starts again from 0: reads before say nothing of the
        // samples after.
        self.read_since_sample = None;
        self.raced_sample = None;
        if self.cfg.software {
            return;
        }
        let slack = self.cfg.handler_slack.saturating_add(self.kernel_slack());
        // Where the PERIOD stopped the event: [read, read + slack]. But a
        // sample since the last reset with a count within the slack was
        // taken after this RESET (RESET zeroes the count and leaves the
        // counter running; no due point is that low, the first is a period
        // past a restart), before the PERIOD: the judge re-anchored on its
        // count, which is from the reset, and so is the PERIOD's, at most
        // the slack. Judged at the read, the PERIOD found the re-anchored
        // due point long passed and claimed it lost.
        let (lo, hi) = match (at_stop, last_sample) {
            (Some(c), _) => (c, c),
            (None, Some(c)) if c <= slack && c < read => (c, slack),
            (None, _) => (read, read.saturating_add(slack)),
        };
        if let Some(c) = at_stop {
            // Every switch since the last sample stopped at or below it.
            self.count_read(c);
        }
        if let Some(stops) = self.wrap_stops.take() {
            // PERIOD sets period_left to 0: the wrap's damage ends here. The
            // stops since it, and the PERIOD's own, may each have lost an
            // overflow on the grid nobody knows.
            self.wrap_unknown_losses(time_ns, stops + 1, last_sample, hi);
        }
        if self.ring_gap {
            // A LOST record since the last sample: the overflows due by the
            // PERIOD may have had their samples in the gap (the PERIOD
            // re-arms after them anyway). The gap may also be after this
            // reset (the LOST comes at the next sample): it stays open.
            self.ring_gap_up_to(time_ns, hi, at_stop.unwrap_or(read));
        }
        // Stops the witness missed since the last sample come before the
        // PERIOD's: as at a sample (they were never considered without one).
        self.unwitnessed_stops(time_ns, u32::MAX, None);
        let stop = Stop {
            lo,
            hi,
            kind: StopKind::Period,
        };
        self.stop_at(time_ns, u32::MAX, stop);
        let p = self.cfg.period;
        let restart_slack = if self.cfg.restart_at_reset { 0 } else { slack };
        for h in &mut self.hyps {
            h.due = Due {
                lo: p,
                hi: p.saturating_add(restart_slack),
            };
        }
        self.commit_agreed();
    }

    /// The final DISABLE, after which the count was read: a stop whose
    /// count is exact.
    pub fn final_stop(&mut self, time_ns: u64, count: Option<u64>) {
        if !self.cfg.software
            && let Some(count) = count
        {
            if std::mem::take(&mut self.ring_gap) {
                // A LOST record since the last sample: the overflows due
                // by the end may have had their samples in the gap.
                self.ring_gap_up_to(time_ns, count, count);
            }
            if let Some(stops) = self.wrap_stops.take() {
                // The final DISABLE too may have found an overflow pending.
                self.wrap_unknown_losses(time_ns, stops + 1, self.prev_count, count);
                self.commit_at_end();
                return;
            }
            // Stops the witness missed since the last sample come first:
            // one may have lost the overflow this stop would find pending.
            self.unwitnessed_stops(time_ns, u32::MAX, Some(count));
            let stop = Stop {
                lo: count,
                hi: count,
                kind: StopKind::Final,
            };
            self.stop_at(time_ns, u32::MAX, stop);
        }
        self.commit_at_end();
    }

    fn software_sample(&mut self, time_ns: u64, cpu: u32, count: u64, injected: bool) {
        let p = self.cfg.period;
        let prev = self.prev_count;
        let mut t = Tally::default();
        t.claim(
            Class::OnTime,
            injected,
            InterruptEvent::of_sample(time_ns, cpu, count, prev, injected),
        );
        if let Some(prev) = prev {
            // The hrtimer fires a period of task time apart; a gap of k
            // periods is k - 1 periods it skipped.
            let k = (count.saturating_sub(prev) + p / 2) / p;
            if k >= 2 {
                self.totals.timer_skips += k - 1;
                self.events.push(InterruptEvent {
                    kind: InterruptEventKind::TimerSkip,
                    time_ns,
                    cpu,
                    count,
                    prev_count: Some(prev),
                    overflows: k - 1,
                    stop_count: None,
                    lateness: None,
                    injected: false,
                });
            }
        }
        self.prev_count = Some(count);
        self.commit(t);
    }

    /// After a LOST record: samples (or stops) are missing up to `count`.
    /// The due points passed in the gap are counted `record_lost`, the grid
    /// kept, and stops in the gap taken as unknown.
    fn reanchor_after_ring_gap(&mut self, time_ns: u64, count: u64) {
        if let Some(last) = count.checked_sub(self.cfg.period) {
            self.ring_gap_up_to(time_ns, last, count);
        }
        self.stops_unwitnessed = true;
        self.merge();
    }

    /// The due points up to `last` passed in a ring gap: `record_lost`
    /// (their samples, or the stops that lost them, may be in the gap), the
    /// grid kept.
    ///
    /// `seen`: a count read after every stop before the gap (the sample,
    /// read or stop that ends it).
    fn ring_gap_up_to(&mut self, time_ns: u64, last: u64, seen: u64) {
        let p = self.cfg.period;
        // A stop before the gap found an overflow pending: lost there (the
        // restart re-arms from the stop's count by rule 1 or 2), or taken
        // before the stop with its sample in the gap (the grid kept). Only
        // the second was followed: after a restart that re-based, every due
        // point after the gap was off and a later sample fit no hypothesis.
        let pending = std::mem::take(&mut self.hyps);
        let hyps = self.resolve_pending_stops(pending, seen, |_| time_ns);
        let mut record_lost = 0;
        for mut h in hyps {
            if h.due.unknown() || last < h.due.lo {
                self.hyps.push(h);
                continue;
            }
            let mut k = (last - h.due.lo) / p + 1;
            record_lost = record_lost.max(k);
            // A due point above `last - (k - 1) * p` passed one grid point
            // fewer in the gap. Where the due point is a range (after a
            // reset, an unexplained sample, a stop whose count is a range)
            // the range is split there: advancing it all by k periods put
            // the next due point a period ahead of the truth when it lay in
            // the upper part, and a later sample fit no hypothesis.
            while k > 0 && h.due.hi > last - (k - 1) * p {
                let top = last - (k - 1) * p;
                let mut below = h.clone();
                below.due.hi = top;
                below.due = below.due.plus(k * p);
                self.hyps.push(below);
                h.due.lo = top + 1;
                k -= 1;
            }
            h.due = h.due.plus(k * p);
            self.hyps.push(h);
        }
        self.totals.record_lost += record_lost;
        self.totals.overflows += record_lost;
    }

    /// The kernel's count jumped by 2^32 here (`wrap`; the counts from
    /// here are unwrapped). The driver's `period_left` dropped as far, so
    /// its next re-arm re-based: at the restart after the stop whose update
    /// wrapped, or in the next interrupt. Either way the grid is lost until
    /// the next sample anchors it; nothing is lost by the wrap itself.
    pub fn count_wrap(&mut self, time_ns: u64, cpu: u32) {
        self.totals.count_wraps += 1;
        self.read_since_sample = None;
        self.raced_sample = None;
        self.events.push(InterruptEvent {
            kind: InterruptEventKind::CountWrap,
            time_ns,
            cpu,
            count: self.prev_count.unwrap_or(0),
            prev_count: self.prev_count,
            overflows: 0,
            stop_count: None,
            lateness: None,
            injected: false,
        });
        if self.cfg.software || self.wrap_stops.is_some() {
            return;
        }
        // An overflow pending at a stop before the wrap: lost there, or
        // taken before it (what the hypotheses disagree on is ambiguous).
        let pending = std::mem::take(&mut self.hyps);
        let hyps = self.resolve_pending_stops(pending, u64::MAX, |_| time_ns);
        let t = combine(hyps.into_iter().map(|h| h.tally).collect());
        self.commit(t);
        self.hyps = vec![Hypothesis {
            due: Due {
                lo: 0,
                hi: u64::MAX,
            },
            pending_stop: None,
            tally: Tally::default(),
        }];
        self.wrap_stops = Some(0);
    }

    /// The first sample after a count wrap, with `stops` recorded since: the
    /// grid is anchored on it as on an unexplained one (its due point at
    /// most a period back; or it re-based and the next is a period on).
    fn anchor_after_wrap(
        &mut self,
        time_ns: u64,
        cpu: u32,
        count: u64,
        stops: u64,
        injected: bool,
    ) {
        let prev = self.prev_count;
        // Stops the witness missed (throttled, or in a ring gap) count too.
        let unwitnessed = std::mem::take(&mut self.stops_unwitnessed) || self.witness_throttled;
        let stops = stops + u64::from(unwitnessed);
        self.wrap_unknown_losses(time_ns, stops, prev, count.saturating_sub(1));
        if injected {
            self.totals.dropped += 1;
            self.events
                .push(InterruptEvent::of_sample(time_ns, cpu, count, prev, true)(
                    InterruptEventKind::Dropped,
                    None,
                ));
        } else {
            self.totals.after_count_wrap += 1;
        }
        self.totals.overflows += 1;
        self.anchor_on(count);
        self.prev_count = Some(count);
    }

    /// One hypothesis from an interrupt at `count` whose own due point is
    /// unknown: at most a period back, unless it was re-based (then the
    /// next is a period on), so the next is due in [count + 1, count + p].
    fn anchor_on(&mut self, count: u64) {
        let p = self.cfg.period;
        self.hyps = vec![Hypothesis {
            due: Due {
                lo: count.saturating_add(1),
                hi: count.saturating_add(p),
            },
            pending_stop: None,
            tally: Tally::default(),
        }];
    }

    /// After a count wrap no due point is known: each of `stops` stops up to
    /// `until` may have lost an overflow, at most one per period counted
    /// since the last sample (the re-basing restart was after it). Counted
    /// ambiguous, never dropped.
    fn wrap_unknown_losses(&mut self, time_ns: u64, stops: u64, since: Option<u64>, until: u64) {
        let p = self.cfg.period;
        let room = until.saturating_sub(since.unwrap_or(0)) / p;
        let n = stops.min(room);
        if n == 0 {
            return;
        }
        self.totals.ambiguous += n;
        self.totals.overflows += n;
        self.events.push(InterruptEvent {
            kind: InterruptEventKind::Ambiguous,
            time_ns,
            cpu: u32::MAX,
            count: until,
            prev_count: since,
            overflows: n,
            stop_count: None,
            lateness: None,
            injected: false,
        });
    }

    fn unexplained(&mut self, time_ns: u64, cpu: u32, count: u64, prev: Option<u64>) {
        self.totals.unexplained += 1;
        self.totals.overflows += 1;
        // Not booked by any hypothesis: it is an interrupt all the same.
        self.events.push(InterruptEvent {
            kind: InterruptEventKind::Unexplained,
            time_ns,
            cpu,
            count,
            prev_count: prev,
            overflows: 1,
            stop_count: None,
            lateness: None,
            injected: false,
        });
        // Its own due point is unknown. Anchoring at count + p exactly
        // took it for on time: if it was late, the next sample fell before
        // that and was unexplained too, and so on.
        self.anchor_on(count);
    }

    /// Merges hypotheses in the same state and commits what they all claim.
    fn commit_agreed(&mut self) {
        self.merge();
        if self.hyps.len() == 1 {
            let t = std::mem::take(&mut self.hyps[0].tally);
            self.commit(t);
        }
    }

    /// At the end: what the remaining hypotheses disagree on is ambiguous.
    fn commit_at_end(&mut self) {
        let hyps = std::mem::take(&mut self.hyps);
        if !hyps.is_empty() {
            let t = combine(hyps.into_iter().map(|h| h.tally).collect());
            self.commit(t);
        }
        self.hyps = vec![Hypothesis {
            due: Due::exact(u64::MAX),
            pending_stop: None,
            tally: Tally::default(),
        }];
    }

    fn merge(&mut self) {
        if self.hyps.len() <= 1 {
            return;
        }
        // (due, pending stop) -> the tallies of the hypotheses in that state.
        type Group = (Due, Option<(u64, u64)>, Vec<Tally>);
        let mut groups: Vec<Group> = Vec::new();
        for h in std::mem::take(&mut self.hyps) {
            match groups
                .iter_mut()
                .find(|g| g.0 == h.due && g.1 == h.pending_stop)
            {
                Some(g) => g.2.push(h.tally),
                None => groups.push((h.due, h.pending_stop, vec![h.tally])),
            }
        }
        let mut merged: Vec<Hypothesis> = groups
            .into_iter()
            .map(|(due, pending_stop, tallies)| Hypothesis {
                due,
                pending_stop,
                tally: combine(tallies),
            })
            .collect();
        if merged.len() > MAX_HYPOTHESES {
            // Too many explanations to follow: settle them as ambiguous and
            // follow the widest grid from here: one for the explanations
            // with an overflow pending at a stop (over the widest stop
            // range), one for the rest. Resolving the pending ones first
            // (lost there, or taken) needed the stop's upper end, which
            // counting kernel mode is known only at the next count read: the
            // grid after the loss became unknown, and a sample a period late
            // under it counted as neither a re-base nor a maybe.
            let (pending, settled): (Vec<Hypothesis>, Vec<Hypothesis>) =
                merged.into_iter().partition(|h| h.pending_stop.is_some());
            merged = [pending, settled]
                .into_iter()
                .filter(|group| !group.is_empty())
                .map(widest)
                .collect();
        }
        self.hyps = merged;
    }

    /// Each hypothesis with an overflow pending at a stop, followed both
    /// ways: lost there (the restart re-arms by rule 1 or 2), and taken
    /// before the stop finished (kept as it is, the pending state dropped),
    /// which only an NMI can be (not where the PMU interrupt is an ordinary
    /// IRQ, `irq_masked_at_stops`). `seen`: a count read after the stop
    /// (`u64::MAX`: none). `time_ns` dates the drop of the lost branch.
    fn resolve_pending_stops(
        &self,
        hyps: Vec<Hypothesis>,
        seen: u64,
        time_ns: impl Fn(&Hypothesis) -> u64,
    ) -> Vec<Hypothesis> {
        let p = self.cfg.period;
        let mut out = Vec::with_capacity(hyps.len() * 2);
        for mut h in hyps {
            if let Some((lo, hi)) = h.pending_stop.take() {
                let mut lost = h.clone();
                let stop = Stop {
                    lo,
                    hi: hi.min(seen).max(lo),
                    kind: StopKind::Switch,
                };
                let event = InterruptEvent {
                    kind: InterruptEventKind::Dropped,
                    time_ns: time_ns(&lost),
                    cpu: u32::MAX,
                    count: lo,
                    prev_count: self.prev_count,
                    overflows: 1,
                    stop_count: Some(lo),
                    lateness: None,
                    injected: false,
                };
                lose_at_stop(&mut lost, p, stop, event);
                out.push(lost);
                if self.cfg.irq_masked_at_stops {
                    continue;
                }
            }
            out.push(h);
        }
        out
    }

    fn commit(&mut self, t: Tally) {
        let tot = &mut self.totals;
        tot.on_time += t.on_time;
        tot.late += t.late;
        tot.rebased_in_handler += t.rebased_in_handler;
        tot.late_maybe_rebased += t.late_maybe_rebased;
        tot.dropped += t.dropped;
        tot.rebased_at_restart += t.rebased_at_restart;
        tot.dropped_at_final_stop += t.dropped_at_final_stop;
        tot.ambiguous += t.ambiguous;
        tot.overflows += t.on_time + t.late + t.rebased_in_handler + t.dropped + t.ambiguous;
        for l in t.latencies {
            let _ = self.latency.record(l);
        }
        self.events.extend(t.events);
    }
}

/// How a sample relates to its due point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    OnTime,
    Late,
    /// A period or more late (by this much): the driver re-based.
    Rebased(u64),
}

impl Tally {
    /// Books one sample; an injected one is a drop by our hand instead.
    fn claim(
        &mut self,
        class: Class,
        injected: bool,
        event: impl Fn(InterruptEventKind, Option<u64>) -> InterruptEvent,
    ) {
        if injected {
            self.dropped += 1;
            self.injected += 1;
            self.events.push(event(InterruptEventKind::Dropped, None));
            return;
        }
        match class {
            Class::OnTime => self.on_time += 1,
            Class::Late => self.late += 1,
            Class::Rebased(lateness) => {
                self.rebased_in_handler += 1;
                self.latencies.push(lateness);
                self.events
                    .push(event(InterruptEventKind::RebasedInHandler, Some(lateness)));
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopKind {
    /// A context switch: an NMI may still take the pending interrupt before
    /// the stop clears it.
    Switch,
    /// PERF_EVENT_IOC_PERIOD in reset mode.
    Period,
    /// The final DISABLE.
    Final,
}

/// A stop whose count is in [lo, hi].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stop {
    lo: u64,
    hi: u64,
    kind: StopKind,
}

/// The pending overflow of `stop` was lost: the restart re-arms by the
/// driver's rules from the stop's count.
fn lose_at_stop(h: &mut Hypothesis, p: u64, stop: Stop, event: InterruptEvent) {
    h.tally.dropped += 1;
    h.tally.dropped_at_final_stop += u64::from(stop.kind == StopKind::Final);
    h.tally.events.push(event);
    if stop.kind != StopKind::Switch {
        // No re-arm rule runs on a lost overflow's behalf here, so no
        // re-base to count: the final DISABLE never restarts the event, and
        // PERIOD sets period_left to 0 before its restart (rule 2 from the
        // restart; `reset` sets the grid from there).
        h.due = h.due.plus(p);
        return;
    }
    if stop.lo >= h.due.hi.saturating_add(p) {
        // Rule 1: a whole period past the due point; re-based.
        h.tally.rebased_at_restart += 1;
        h.due = Due {
            lo: stop.lo.saturating_add(p),
            hi: stop.hi.saturating_add(p),
        };
    } else if stop.hi < h.due.lo.saturating_add(p) {
        // Rule 2: the grid is kept.
        h.due = h.due.plus(p);
    } else {
        // Rule 1 or 2 depending on where in [lo, hi] the stop was.
        h.due = Due {
            lo: h.due.lo.saturating_add(p),
            hi: stop.hi.saturating_add(p),
        };
    }
}

/// One hypothesis for a group: the widest grid (and stop range, if pending)
/// of them, with what they all claim.
fn widest(group: Vec<Hypothesis>) -> Hypothesis {
    let lo = group.iter().map(|h| h.due.lo).min().unwrap_or(0);
    let hi = group.iter().map(|h| h.due.hi).max().unwrap_or(u64::MAX);
    let stops = group.iter().filter_map(|h| h.pending_stop);
    let pending_stop = stops.reduce(|(alo, ahi), (blo, bhi)| (alo.min(blo), ahi.max(bhi)));
    Hypothesis {
        due: Due { lo, hi },
        pending_stop,
        tally: combine(group.into_iter().map(|h| h.tally).collect()),
    }
}

/// The tallies of hypotheses that reached the same state: what they all
/// claim is kept, the drops some claim and others do not are ambiguous.
/// Every hypothesis books each sample as one interrupt, so they differ only
/// in drops and in which interrupts were a period late.
fn combine(mut tallies: Vec<Tally>) -> Tally {
    if tallies.len() == 1 {
        return tallies.pop().expect("one tally");
    }
    let min = |f: fn(&Tally) -> u64| tallies.iter().map(f).min().unwrap_or(0);
    let max = |f: fn(&Tally) -> u64| tallies.iter().map(f).max().unwrap_or(0);
    let dropped = min(|t| t.dropped);
    let ambiguous = max(|t| t.dropped + t.ambiguous) - dropped;
    let rebased_in_handler = min(|t| t.rebased_in_handler);
    let late_maybe_rebased =
        max(|t| t.rebased_in_handler + t.late_maybe_rebased) - rebased_in_handler;
    let rebased_at_restart = min(|t| t.rebased_at_restart);
    let dropped_at_final_stop = min(|t| t.dropped_at_final_stop);
    let injected = min(|t| t.injected);
    // Keep the explanation with the fewest drops: its drops are certain in
    // number, and its interrupts are the samples.
    let best = tallies
        .iter()
        .position(|t| t.dropped == dropped)
        .unwrap_or(0);
    let mut t = tallies.swap_remove(best);
    // Interrupts a period late under it but not under every explanation
    // were late at least.
    let mut unsure_rebases = t.rebased_in_handler - rebased_in_handler;
    t.late += unsure_rebases;
    t.rebased_in_handler = rebased_in_handler;
    t.late_maybe_rebased = late_maybe_rebased;
    while unsure_rebases > 0 {
        match t
            .events
            .iter()
            .rposition(|e| e.kind == InterruptEventKind::RebasedInHandler)
        {
            Some(i) => {
                t.events.remove(i);
                unsure_rebases -= 1;
            }
            None => break,
        }
    }
    t.ambiguous = ambiguous;
    t.rebased_at_restart = rebased_at_restart;
    t.dropped_at_final_stop = dropped_at_final_stop;
    t.injected = injected;
    if ambiguous > 0 {
        let at = t.events.last().copied().or_else(|| {
            tallies
                .iter()
                .filter_map(|o| o.events.last().copied())
                .next()
        });
        if let Some(e) = at {
            t.events.push(InterruptEvent {
                kind: InterruptEventKind::Ambiguous,
                overflows: ambiguous,
                lateness: None,
                injected: false,
                ..e
            });
        }
    }
    t
}
