/*!
An interrupt's sample record: under each explanation, on time, late, a
period or more late (the driver re-based), or impossible (refuted).
*/

use super::InterruptJudge;
use super::due::Due;
use super::hypotheses::{Class, Hypothesis, Tally, combine};
use super::stops::{Stop, StopKind, lose_at_stop};
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
