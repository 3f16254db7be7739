/*!
An interrupt's sample record: under each explanation, on time, late, a
period or more late (the driver re-based), or impossible (refuted).
*/

use super::InterruptJudge;
use super::drivers::{Stop, StopKind};
use super::due::Due;
use super::hypotheses::{Hypothesis, Tally, combine, lose_at_stop, split_at_stop};
use super::rules::{
    AtStop, Class, Handled, pending_at_stop, rearm_after_raced_read, rearm_in_handler,
};
use super::totals::{InterruptEvent, InterruptEventKind};

impl InterruptJudge {
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
        self.note_time(time_ns);
        if std::mem::take(&mut self.ring_gap) {
            // The gap may hide samples after the last stop: its bound
            // is not this sample's.
            self.forget_stop_since_sample();
            self.reanchor_after_ring_gap(time_ns, count);
        }
        if let Some(stops) = self.wrap_stops.take() {
            self.forget_stop_since_sample();
            self.anchor_after_wrap(time_ns, cpu, count, stops, injected);
            return;
        }
        self.unwitnessed_stops(time_ns, cpu, Some(count));
        self.sample_bounds_stops(time_ns, count);
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
            let (lost, taken_at) = self.pending_at_sample(&mut h, count, event);
            if let Some(lost) = lost {
                work.push(lost);
            }
            if count < h.due.lo {
                match rearm_after_raced_read(h.due, raced, count, self.cfg.period) {
                    Some(due) => h.due = due,
                    // Under this explanation no overflow was due yet.
                    None => continue,
                }
            }
            match taken_at {
                None => self.claim_sample(h, count, injected, event, &mut next),
                Some(stop) => {
                    let mut claimed = Vec::new();
                    self.claim_sample(h, count, injected, event, &mut claimed);
                    for c in claimed {
                        Self::pending_again(c, stop, &mut next);
                    }
                }
            }
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
        // hypothesis's due point (`rearm_after_raced_read`) instead of
        // refuting it.
        self.raced_sample = self.nmi_may_have_raced_a_read(count).then_some(count);
        self.read_since_sample = None;
        // A sample refutes the stock driver only where its rules are exact:
        // after a ring gap (a re-base in the handler may be in it), a count
        // wrap or a raced read, what they leave unexplained stays
        // unexplained. (Refuted there, the model's stock streams went on
        // judged by the delivering driver's rules, their grid already off,
        // which could have hidden a loss.) Refuting the delivering driver
        // only makes the judgement stricter.
        if !next.is_empty() && self.refutes_stock(&next) && (self.grid_uncertain || raced.is_some())
        {
            next.clear();
        }
        self.hyps = next;
        if self.hyps.is_empty() {
            if !before.is_empty() {
                self.commit(combine(before));
            }
            self.unexplained(time_ns, cpu, count, prev);
        }
        self.prev_count = Some(count);
        self.commit_agreed();
        self.unsettled_samples = if self.hyps.len() > 1 {
            self.unsettled_samples + 1
        } else {
            0
        };
    }

    /// Under `h`, an overflow pending at a stop before this interrupt at
    /// `count`: lost there (`h` then re-armed by the restart), or this its
    /// interrupt taken before the stop finished. Where both fit, `h` is
    /// the taken one and the lost one is returned, to be followed too.
    fn pending_at_sample(
        &self,
        h: &mut Hypothesis,
        count: u64,
        event: impl Fn(InterruptEventKind, Option<u64>) -> InterruptEvent,
    ) -> (Option<Hypothesis>, Option<(u64, u64)>) {
        let Some((stop_lo, stop_hi)) = h.pending_stop.take() else {
            return (None, None);
        };
        let p = self.cfg.period;
        // Lost at the stop, this interrupt came after the restart:
        // the stop was at or below its count.
        let stop = Stop {
            lo: stop_lo,
            hi: stop_hi.min(count).max(stop_lo),
            kind: StopKind::Switch,
        };
        let masked = self.cfg.irq_masked_at_stops;
        // A sample below the witness's read ran inside the stop path (the
        // NMI's record nested in the witness's): taken there, the stop
        // itself still to come, at or above the read. (One at or above
        // the read says nothing of where the stop was: followed as before,
        // the next due point pending there too multiplied the ambiguity
        // of every kernel-mode run by up to 7 against the oracle.)
        let taken_at = (count < stop_lo).then_some((stop_lo, stop_hi));
        match pending_at_stop(h.due, stop_lo, stop_hi, count, masked) {
            AtStop::Lost => {
                lose_at_stop(h, p, stop, event(InterruptEventKind::Dropped, None));
                (None, None)
            }
            AtStop::TakenOrLost => {
                let mut lost = h.clone();
                lose_at_stop(&mut lost, p, stop, event(InterruptEventKind::Dropped, None));
                (Some(lost), taken_at)
            }
            AtStop::Taken => (None, taken_at),
        }
    }

    /// After an interrupt taken before a stop finished: the handler's
    /// re-arm put the next due point in `h.due`, and the stop, still to
    /// come at [`lo`, `hi`] (counting kernel mode the count moves on
    /// through the stop path, and an NMI can run anywhere in it), may find
    /// that one pending too. Lost there or not: both are followed, as at
    /// any stop (`stop_at`), and the next record's count decides.
    ///
    /// Not where the next due point is at or below the stop's read: the
    /// read then says that overflow came before the stop while this
    /// interrupt, below the read, was still to be handled, so the NMI ran
    /// inside the read's update of the count (`nmi_may_have_raced_a_read`)
    /// and re-armed from a count no record shows. Booked lost there, a
    /// zero-skid pseudo-NMI run on 4 vCPUs counted one drop more than the
    /// oracle allowed (its overflow was never lost); what the next samples
    /// cannot place stays unexplained instead.
    fn pending_again(h: Hypothesis, (lo, hi): (u64, u64), out: &mut Vec<Hypothesis>) {
        if h.due.unknown() || h.due.lo > hi || h.due.lo <= lo {
            out.push(h);
            return;
        }
        let mut h = h;
        let from = split_at_stop(&mut h, lo, hi, out);
        h.pending_stop = Some((from, hi));
        out.push(h);
    }

    /// Books the interrupt at `count` under `h` (its due point at or below
    /// `count`) and follows where the handler's re-arm put the next due
    /// point into `out`: one hypothesis, or two where the due range leaves
    /// open whether it was a period late.
    fn claim_sample(
        &self,
        mut h: Hypothesis,
        count: u64,
        injected: bool,
        event: impl Fn(InterruptEventKind, Option<u64>) -> InterruptEvent + Copy,
        out: &mut Vec<Hypothesis>,
    ) {
        let p = self.cfg.period;
        let class = match rearm_in_handler(h.due, count, p, self.cfg.interrupt_skid) {
            Handled::Anchored {
                next,
                maybe_lost,
                may_rebase,
            } => {
                h.tally.ambiguous += maybe_lost;
                h.due = next;
                // Booked on time, maybe re-based (see `rearm_in_handler`).
                h.tally.late_maybe_rebased += u64::from(may_rebase);
                Class::OnTime
            }
            Handled::Rebased { lateness, next } => {
                h.due = next;
                Class::Rebased(lateness)
            }
            Handled::Kept {
                class,
                next,
                lateness,
            } => {
                h.tally.latencies.extend(lateness);
                h.due = next;
                class
            }
            Handled::Either {
                lateness,
                rebased,
                kept,
            } => {
                let mut r = h.clone();
                r.due = rebased;
                r.tally.claim(Class::Rebased(lateness), injected, event);
                out.push(r);
                h.due = kept;
                Class::Late
            }
        };
        h.tally.claim(class, injected, event);
        out.push(h);
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

    /// One hypothesis from an interrupt at `count` whose own due point is
    /// unknown: at most a period back, unless it was re-based (then the
    /// next is a period on), so the next is due in [count + 1, count + p].
    pub(super) fn anchor_on(&mut self, count: u64) {
        let p = self.cfg.period;
        self.hyps = vec![Hypothesis {
            due: Due {
                lo: count.saturating_add(1),
                hi: count.saturating_add(p),
            },
            pending_stop: None,
            drivers: self.drivers,
            tally: Tally::default(),
        }];
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
}
