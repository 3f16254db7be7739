/*!
Judging deliveries: the signals against the interrupts.

Each handled overflow queues one realtime signal after writing its sample, and
realtime signals queue in order, so signals are matched to interrupts first
in, first out: a signal belongs to the oldest interrupt its read has passed
that has no signal yet. Two things break the plain order, and both show:

- the kernel merges the signals of two interrupts whose wakeups come
  together (one irq_work for both): the older interrupt never gets a signal.
  A signal whose read passed interrupts the previous read had already passed
  *and* a newer one belongs to the newer: the older ones' signals would have
  been delivered before it, right behind the previous one, had they been
  queued. They are coalesced.
- a signal queued late behind such a merge decision, which then finds no
  interrupt left to claim, takes back the most recent coalesced one: it was
  late, not merged.

A plain SIGIO stands for a signal the full queue refused; a failed read for a
signal we could not place by value: each takes the oldest unsignalled
interrupt. Nothing here changes the interrupt verdict: a delivery problem is
reported as one, never as a lost interrupt.
*/

use std::collections::VecDeque;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::config::JudgeConfig;
use crate::domain::RearmMode;
use crate::records::Delivery;

/// Every delivery of one worker, accounted once.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryTotals {
    /// Overflow signals received on the right thread (injected ones excluded).
    pub signals: u64,
    /// Signals read within the skid of their interrupt.
    pub on_time: u64,
    /// Signals read later than the skid.
    pub late: u64,
    /// Of the late, those read a period or more after their interrupt.
    pub late_by_a_period: u64,
    /// Interrupts whose signal the kernel merged into a later one's.
    pub coalesced: u64,
    /// Plain SIGIO fallbacks: the realtime signal queue was full.
    pub sigio: u64,
    /// Overflow signals delivered to a thread that does not own the event.
    pub wrong_thread: u64,
    /// Handler reads of the counter that failed.
    pub read_failures: u64,
    /// Signals with no interrupt to belong to (our bug, or a kernel that
    /// signals without a sample).
    pub unmatched: u64,
    /// Signals whose interrupt's sample the kernel reports it did not write
    /// (LOST records): a hole in the witness, not a signal without cause.
    pub unrecorded: u64,
    /// Signals the kernel sent because a record other than a sample
    /// crossed the ring's wakeup watermark (no interrupt of their own).
    pub watermark_wakeups: u64,
    /// Signals of interrupts we discarded on purpose.
    pub injected: u64,
    /// Interrupts after the last signal whose signal never came before the
    /// worker stopped.
    pub in_flight: u64,
}

impl DeliveryTotals {
    pub fn add(&mut self, o: &DeliveryTotals) {
        let DeliveryTotals {
            signals,
            on_time,
            late,
            late_by_a_period,
            coalesced,
            sigio,
            wrong_thread,
            read_failures,
            unmatched,
            unrecorded,
            watermark_wakeups,
            injected,
            in_flight,
        } = o;
        self.signals += signals;
        self.on_time += on_time;
        self.late += late;
        self.late_by_a_period += late_by_a_period;
        self.coalesced += coalesced;
        self.sigio += sigio;
        self.wrong_thread += wrong_thread;
        self.read_failures += read_failures;
        self.unmatched += unmatched;
        self.unrecorded += unrecorded;
        self.watermark_wakeups += watermark_wakeups;
        self.injected += injected;
        self.in_flight += in_flight;
    }
}

/// A delivery worth a line of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryEvent {
    pub kind: DeliveryEventKind,
    pub time_ns: u64,
    pub cpu: u32,
    /// The read value (0 when there was none).
    pub value: u64,
    /// The interrupt's count it belongs to, if any.
    pub interrupt: Option<u64>,
    /// The signal's sequence number (1-based, overflow signals only).
    pub signal_seq: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryEventKind {
    /// An interrupt's signal merged into a later one.
    Coalesced,
    /// A SIGIO fallback.
    QueueOverflow,
    /// Read a period or more after its interrupt.
    LateByAPeriod,
    /// A signal with no interrupt.
    Unmatched,
    /// A failed read or a wrong-thread delivery: our own failure.
    ToolError,
}

/// One signal's delta since the previous one: what `--raw` and the delta
/// histogram record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ClosedWindow {
    pub worker: usize,
    pub signal_seq: u64,
    pub time_ns: u64,
    pub delta: u64,
    pub cpu: u32,
}

/// An interrupt waiting for its signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Unsignalled {
    /// (reset epoch, count): the order of counts across resets.
    at: (u64, u64),
    injected: bool,
}

/// How many coalesced interrupts a late signal may still take back: as
/// many signals as can wait in a queue together. Under QEMU 161 queued
/// signals came in one burst after the handler had not run for that many
/// periods; with 64 here, 95 of them were left unmatched. Bounded like the
/// orphans (16 bytes each).
const RECENT_COALESCED: usize = 4096;
/// Signals with no interrupt held for a LOST record to explain; beyond this
/// they are unmatched at once (memory stays bounded).
const MAX_ORPHANS: usize = 4096;

pub struct DeliveryJudge {
    cfg: JudgeConfig,
    worker: usize,
    unsignalled: VecDeque<Unsignalled>,
    recent_coalesced: VecDeque<Unsignalled>,
    epoch: u64,
    /// Where the previous read was, (epoch, value).
    prev_read: (u64, u64),
    /// Free mode: the previous read value, for the delta.
    prev_value: Option<u64>,
    seq: u64,
    /// Signals with no interrupt, held until the end: a LOST record that
    /// comes later (the kernel reports lost samples at its next write)
    /// explains them.
    orphans: Vec<DeliveryEvent>,
    /// Samples the kernel reported lost and no orphan has claimed yet.
    unrecorded_credit: u64,
    /// Watermark wakeups whose signal has not come yet.
    wakeup_credit: u64,
    /// From a THROTTLE to the first sample after its UNTHROTTLE: the kernel
    /// may signal an overflow it writes no sample for (seen on 6.18: the
    /// first overflow after the unthrottle).
    throttled: bool,
    unthrottled: bool,
    totals: DeliveryTotals,
    deltas: Histogram<u64>,
    events: Vec<DeliveryEvent>,
}

impl DeliveryJudge {
    pub fn new(worker: usize, cfg: JudgeConfig) -> DeliveryJudge {
        DeliveryJudge {
            cfg,
            worker,
            unsignalled: VecDeque::new(),
            recent_coalesced: VecDeque::new(),
            epoch: 0,
            prev_read: (0, 0),
            prev_value: Some(0),
            seq: 0,
            orphans: Vec::new(),
            unrecorded_credit: 0,
            wakeup_credit: 0,
            throttled: false,
            unthrottled: false,
            totals: DeliveryTotals::default(),
            deltas: crate::domain::histogram(),
            events: Vec::new(),
        }
    }

    pub fn totals(&self) -> &DeliveryTotals {
        &self.totals
    }

    /// Deltas between consecutive signals' reads.
    pub fn deltas(&self) -> &Histogram<u64> {
        &self.deltas
    }

    pub fn take_events(&mut self, out: &mut Vec<DeliveryEvent>) {
        out.append(&mut self.events);
    }

    /// THROTTLE: until a sample is written again, the kernel may signal
    /// overflows it writes no sample for (seen on 6.18).
    pub fn throttle(&mut self) {
        self.throttled = true;
        self.unthrottled = false;
    }

    pub fn unthrottle(&mut self) {
        self.unthrottled = true;
    }

    /// An interrupt happened (a sample record), in ring order.
    pub fn interrupt(&mut self, count: u64, injected: bool) {
        if self.unthrottled {
            self.throttled = false;
            self.unthrottled = false;
        }
        self.unsignalled.push_back(Unsignalled {
            at: (self.epoch, count),
            injected,
        });
    }

    /// A record crossed the ring's watermark: one signal with no interrupt
    /// is coming.
    pub fn wakeup(&mut self) {
        self.wakeup_credit += 1;
    }

    /// The kernel did not write `lost` records: signals with no sample may
    /// be theirs.
    pub fn lost(&mut self, lost: u64) {
        let explained = (lost as usize).min(self.orphans.len());
        self.orphans.drain(..explained);
        self.totals.unrecorded += explained as u64;
        self.unrecorded_credit += lost - explained as u64;
    }

    /// Reset mode: counts start again from 0.
    pub fn reset(&mut self) {
        self.epoch += 1;
    }

    /// One delivery. Returns the window it closes (an overflow signal of
    /// ours, read), or None.
    pub fn signal(
        &mut self,
        time_ns: u64,
        cpu: u32,
        value: u64,
        delivery: Delivery,
    ) -> Option<ClosedWindow> {
        let event = |kind, interrupt: Option<Unsignalled>, seq| DeliveryEvent {
            kind,
            time_ns,
            cpu,
            value,
            interrupt: interrupt.map(|u| u.at.1),
            signal_seq: seq,
        };
        match delivery {
            Delivery::SigIo => {
                self.totals.sigio += 1;
                // Stands for one interrupt's signal: with none left
                // unsignalled, its interrupt is one we took for coalesced
                // (a signal queued behind it claimed a later interrupt), as
                // for a late signal in `claim`. Else that interrupt would
                // be counted twice, coalesced and by this SIGIO.
                let own = self.unsignalled.pop_front().or_else(|| self.take_back());
                self.events
                    .push(event(DeliveryEventKind::QueueOverflow, own, 0));
                return None;
            }
            Delivery::ReadFailed(_) => {
                self.totals.read_failures += 1;
                // As for a SIGIO: one interrupt's signal, maybe one we took
                // for coalesced.
                let own = self.unsignalled.pop_front().or_else(|| self.take_back());
                self.events
                    .push(event(DeliveryEventKind::ToolError, own, 0));
                return None;
            }
            Delivery::WrongThread => {
                // Another worker's overflow signal, taken on this worker's
                // thread (recorded here: only a ring's owner may push into
                // it): our fault, and no signal of this worker's.
                self.totals.wrong_thread += 1;
                self.events
                    .push(event(DeliveryEventKind::ToolError, None, 0));
                return None;
            }
            Delivery::Overflow => {}
        }
        let read = (self.epoch, value);
        let own = self.claim(read);
        let prev_read = std::mem::replace(&mut self.prev_read, read);
        let Some(own) = own else {
            if self.wakeup_credit > 0 {
                // Not an overflow's signal: no window, no sequence number.
                self.wakeup_credit -= 1;
                self.totals.watermark_wakeups += 1;
                return None;
            }
            self.seq += 1;
            self.totals.signals += 1;
            if self.unrecorded_credit > 0 || self.throttled {
                self.unrecorded_credit = self.unrecorded_credit.saturating_sub(1);
                self.totals.unrecorded += 1;
            } else if self.orphans.len() < MAX_ORPHANS {
                self.orphans
                    .push(event(DeliveryEventKind::Unmatched, None, self.seq));
            } else {
                self.totals.unmatched += 1;
                self.events
                    .push(event(DeliveryEventKind::Unmatched, None, self.seq));
            }
            return self.window(time_ns, cpu, value);
        };
        let _ = prev_read;
        if own.injected {
            // As if this signal never came: the next window spans both.
            self.totals.injected += 1;
            return None;
        }
        self.seq += 1;
        self.totals.signals += 1;
        let lateness = value.saturating_sub(own.at.1);
        if lateness <= self.cfg.skid {
            self.totals.on_time += 1;
        } else {
            self.totals.late += 1;
            if lateness >= self.cfg.period {
                self.totals.late_by_a_period += 1;
                self.events
                    .push(event(DeliveryEventKind::LateByAPeriod, Some(own), self.seq));
            }
        }
        self.window(time_ns, cpu, value)
    }

    /// Which interrupt a signal read at `read` belongs to.
    fn claim(&mut self, read: (u64, u64)) -> Option<Unsignalled> {
        let passed = self.unsignalled.iter().take_while(|u| u.at <= read).count();
        if passed == 0 {
            // Nothing left: a signal queued behind one we thought merged.
            let back = self.recent_coalesced.iter().rposition(|u| u.at <= read)?;
            let u = self.recent_coalesced.remove(back)?;
            if !u.injected {
                self.totals.coalesced -= 1;
            }
            return Some(u);
        }
        let passed_at_prev_read = self
            .unsignalled
            .iter()
            .take_while(|u| u.at <= self.prev_read)
            .count();
        if passed_at_prev_read > 0 && passed > passed_at_prev_read {
            // Older interrupts the previous read had passed, and a newer
            // one: their signals would have come right behind the previous
            // one. Merged.
            for _ in 0..passed_at_prev_read {
                let u = self.unsignalled.pop_front()?;
                self.coalesce(u);
            }
        }
        self.unsignalled.pop_front()
    }

    /// The most recent interrupt taken for coalesced, taken back: a
    /// delivery with no interrupt left to claim was its.
    fn take_back(&mut self) -> Option<Unsignalled> {
        let u = self.recent_coalesced.pop_back()?;
        if !u.injected {
            self.totals.coalesced -= 1;
        }
        Some(u)
    }

    fn coalesce(&mut self, u: Unsignalled) {
        if self.recent_coalesced.len() == RECENT_COALESCED {
            self.recent_coalesced.pop_front();
        }
        // A discarded interrupt is kept too (not counted), so that its
        // late signal can take it back instead of being unmatched.
        self.recent_coalesced.push_back(u);
        if u.injected {
            return;
        }
        self.totals.coalesced += 1;
        self.events.push(DeliveryEvent {
            kind: DeliveryEventKind::Coalesced,
            time_ns: 0,
            cpu: u32::MAX,
            value: 0,
            interrupt: Some(u.at.1),
            signal_seq: self.seq,
        });
    }

    fn window(&mut self, time_ns: u64, cpu: u32, value: u64) -> Option<ClosedWindow> {
        let delta = match self.cfg.mode {
            RearmMode::Reset => value,
            RearmMode::Free => value.wrapping_sub(self.prev_value.unwrap_or(0)),
        };
        self.prev_value = Some(value);
        let _ = self.deltas.record(delta);
        Some(ClosedWindow {
            worker: self.worker,
            signal_seq: self.seq,
            time_ns,
            delta,
            cpu,
        })
    }

    /// The end: interrupts the last read had passed never got a signal
    /// (coalesced); those after it are in flight.
    pub fn finish(&mut self) {
        for e in std::mem::take(&mut self.orphans) {
            self.totals.unmatched += 1;
            self.events.push(e);
        }
        while let Some(u) = self.unsignalled.pop_front() {
            if u.at <= self.prev_read {
                self.coalesce(u);
            } else if !u.injected {
                self.totals.in_flight += 1;
            }
        }
    }
}
