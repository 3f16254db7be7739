/*!
One worker's timeline: raw observations in, judged windows and totals out.

The controller feeds three streams per worker, all on CLOCK_MONOTONIC: the
signals the handler recorded, the kernel's sample-ring records, and the
migrator's moves. For each signal, the window since the previous signal gets
its delta and its witness (kernel records up to the signal's time), and the
classifier judges it. Kernel records for an overflow are written before its
signal is sent, so the controller drains signals first and kernel records
second, and every record a window needs is here when the window closes.

On hardware with a free-running counter (the default) the samples carry the
count at their interrupt, and a window takes the samples whose count its read
has passed, not those older than its signal: the interrupts are then judged
on the counter's own axis, gap by gap (`classify::judge_counted`), and late or
merged signals only decide which signal-level kind a window gets. Software
clocks and reset mode keep the time-ordered witness (`classify::judge`).

Pure and allocation-bounded (moves and records are consumed as windows close),
so it is unit-tested with synthetic streams, `--inject-drop-every` included.
*/

use std::collections::VecDeque;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::classify::{self, AnomalyKind, Counted, Witness};
use crate::sample::KernelRecord;
use crate::signal::{Delivery, SignalRecord};

/// How the counter is re-armed between overflows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// One fixed sample_period; deltas are differences of read() values.
    Free,
    /// rr-style: RESET + PERIOD after every signal; the read value is the delta.
    Reset,
}

#[derive(Debug, Clone, Copy)]
pub struct TimelineConfig {
    pub worker: usize,
    pub period: u64,
    /// Tolerance for a signal's read past its overflow.
    pub skid: u64,
    /// Tolerance for an interrupt's count past its overflow.
    pub interrupt_skid: u64,
    pub mode: Mode,
    pub software: bool,
    /// Discard every Nth overflow signal and its sample record (0: never).
    pub inject_drop_every: u64,
}

/// One anomalous window, with everything a maintainer asks about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Anomaly {
    pub worker: usize,
    /// Sequence number of the signal that closed the window (1-based).
    pub signal_seq: u64,
    pub time_ns: u64,
    pub delta: u64,
    pub period: u64,
    pub skid: u64,
    pub kind: AnomalyKind,
    /// Overflows in the window that got no signal of their own.
    pub missed: u64,
    /// Of those, interrupts with no kernel sample record.
    pub dropped: u64,
    pub cpu_before: Option<u32>,
    pub cpu_after: u32,
    /// Time since the migrator last moved this worker, if it ever did.
    pub since_migration_ns: Option<u64>,
    pub kernel_samples: u64,
    /// Overflows we discarded on purpose in this window.
    pub injected: u64,
    /// Hardware, free mode: the largest count between two consecutive
    /// interrupts (sample records) in the window, ~k periods for k - 1
    /// lost interrupts.
    pub interrupt_gap: Option<u64>,
}

/// One judged window, ok or not: what `--raw` and the histogram logs record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ClosedWindow {
    pub worker: usize,
    pub signal_seq: u64,
    pub time_ns: u64,
    pub delta: u64,
    pub cpu: u32,
}

/// A closed window and the CPU the worker was on at the signal before.
struct Ending {
    window: ClosedWindow,
    cpu_before: Option<u32>,
}

/// What feeding a signal closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closed {
    pub window: ClosedWindow,
    pub anomaly: Option<Anomaly>,
}

/// Per-worker counts; every overflow ends up in exactly one bucket.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WorkerTotals {
    pub worker: usize,
    /// Overflow signals received (injected ones excluded).
    pub signals: u64,
    /// Plain-SIGIO fallbacks received.
    pub sigio: u64,
    /// Overflow signals that landed on another thread (our bug if non-zero).
    pub wrong_thread: u64,
    pub read_failures: u64,
    /// PERF_RECORD_SAMPLEs seen (injected ones excluded).
    pub kernel_samples: u64,
    pub throttle_records: u64,
    pub unthrottle_records: u64,
    /// Records the kernel reported lost from the sample ring.
    pub lost_records: u64,
    /// Windows judged ok.
    pub ok: u64,
    /// Windows per anomaly kind, in `AnomalyKind::ALL` order.
    pub anomalies: Vec<(AnomalyKind, u64)>,
    /// Overflows missed (k - 1 summed) per anomaly kind.
    pub missed_overflows: Vec<(AnomalyKind, u64)>,
    /// Interrupts that never happened (the bug), injected ones included.
    pub dropped_interrupts: u64,
    /// Injected drops revealed by a later signal (one injected after the
    /// last signal has no window to show in and is not counted).
    pub injected: u64,
    /// Overflows the windows account for.
    pub accounted_overflows: u64,
    /// Sample records after the last signal (in flight at stop).
    pub tail_samples: u64,
    /// Signals whose CPU differed from the previous signal's.
    pub cpu_changes: u64,
    /// Hardware, free mode: the count at the last sample record, and where
    /// the overflow grid started, to check the samples against the final
    /// count.
    pub last_sample_value: Option<u64>,
    pub grid_origin: u64,
    /// Hardware, free mode: interrupts a period or more late, after which
    /// the driver re-based the period (and the grid moved).
    pub rebased: u64,
    pub min_delta: Option<u64>,
    pub max_delta: Option<u64>,
}

#[derive(Default)]
struct Window {
    delta: u64,
    witness: Witness,
    /// Counted mode: what the samples this window's read has passed show
    /// (their number is `witness.kernel_samples`).
    counted: Counted,
}

/// Counted mode: a window whose read passed several interrupts that had no
/// signal yet. Whether their signals are still queued behind it (it was
/// late) or were merged into it (coalesced) shows only at the next signal.
struct Held {
    window: Window,
    rec: SignalRecord,
    seq: u64,
    unsignalled: u64,
}

/// What feeding one signal closed, in order: usually one window; two when
/// it also settles a window the previous signal left held.
pub type Closings = [Option<Closed>; 2];

/// THROTTLE/UNTHROTTLE or LOST records met in the ring since the previous
/// sample: the gap before the next sample is not the PMU's alone.
#[derive(Debug, Clone, Copy, Default)]
struct GapMarks {
    throttle: bool,
    lost: bool,
    /// Samples we discarded on purpose (`--inject-drop-every`) in the gap.
    injected: u64,
}

impl GapMarks {
    fn merge(&mut self, other: GapMarks) {
        self.throttle |= other.throttle;
        self.lost |= other.lost;
        self.injected += other.injected;
    }
}

#[derive(Debug, Clone, Copy)]
struct CountedSample {
    value: u64,
    marks: GapMarks,
}

pub struct Timeline {
    cfg: TimelineConfig,
    /// Hardware with a free-running counter: judge drops on sample counts.
    counted: bool,
    kernel: VecDeque<KernelRecord>,
    /// Counted mode: samples not yet passed by a read, in ring order.
    samples: VecDeque<CountedSample>,
    /// Counted mode: marks for the next sample to arrive.
    marks: GapMarks,
    /// Counted mode: the count at the last sample a window took.
    last_sample_value: u64,
    /// Counted mode: the grid point of the last sample taken (the grid's
    /// origin is `totals.grid_origin`).
    last_index: u64,
    /// Counted mode: counts of the current window's new interrupts.
    fresh: Vec<u64>,
    /// Counted mode: counts of interrupts whose signal has not come yet.
    owed: VecDeque<u64>,
    held: Option<Held>,
    /// Counted mode: injections still to discard a sample.
    inject_owed: u64,
    moves: VecDeque<u64>,
    last_move: Option<u64>,
    throttle_active: bool,
    prev_value: u64,
    prev_cpu: Option<u32>,
    /// Signals seen, injected ones included (what the injection counts).
    seq: u64,
    /// Evidence carried across signals we discarded or could not read.
    carry: Window,
    /// SIGIOs since the previous signal.
    sigio_pending: u64,
    totals: WorkerTotals,
    histogram: Histogram<u64>,
}

impl Timeline {
    pub fn new(cfg: TimelineConfig) -> Timeline {
        Timeline {
            cfg,
            counted: cfg.mode == Mode::Free && !cfg.software,
            kernel: VecDeque::new(),
            samples: VecDeque::new(),
            marks: GapMarks::default(),
            last_sample_value: 0,
            last_index: 0,
            fresh: Vec::new(),
            owed: VecDeque::new(),
            held: None,
            inject_owed: 0,
            moves: VecDeque::new(),
            last_move: None,
            throttle_active: false,
            prev_value: 0,
            prev_cpu: None,
            seq: 0,
            carry: Window::default(),
            sigio_pending: 0,
            totals: WorkerTotals {
                worker: cfg.worker,
                anomalies: AnomalyKind::ALL.iter().map(|&k| (k, 0)).collect(),
                missed_overflows: AnomalyKind::ALL.iter().map(|&k| (k, 0)).collect(),
                ..WorkerTotals::default()
            },
            histogram: Histogram::new(3).expect("3 significant figures is a valid precision"),
        }
    }

    pub fn add_kernel(&mut self, rec: KernelRecord) {
        if !self.counted {
            self.kernel.push_back(rec);
            return;
        }
        // Ring order is what matters here: a mark belongs to the gap
        // before the next sample.
        match rec {
            KernelRecord::Sample { value, .. } => {
                let marks = std::mem::take(&mut self.marks);
                self.totals.last_sample_value = Some(value);
                self.samples.push_back(CountedSample { value, marks });
            }
            KernelRecord::Throttle { .. } => {
                self.marks.throttle = true;
                self.totals.throttle_records += 1;
            }
            KernelRecord::Unthrottle { .. } => {
                self.marks.throttle = true;
                self.totals.unthrottle_records += 1;
            }
            KernelRecord::Lost { lost, .. } => {
                self.marks.lost = true;
                self.totals.lost_records += lost;
            }
        }
    }

    /// Counted mode: takes into `w` the samples whose count `value` has
    /// passed. An injected drop discards the last of them, as if that
    /// interrupt never happened; returns whether it could.
    fn count_until(&mut self, value: u64, inject: bool, w: &mut Window) -> bool {
        let c = self.cfg;
        while let Some(s) = self.samples.front().copied() {
            if s.value > value {
                break;
            }
            self.samples.pop_front();
            if inject && self.samples.front().is_none_or(|next| next.value > value) {
                let marks = GapMarks {
                    injected: s.marks.injected + 1,
                    ..s.marks
                };
                match self.samples.front_mut() {
                    Some(next) => next.marks.merge(marks),
                    None => self.marks.merge(marks),
                }
                return true;
            }
            let gap = s.value.saturating_sub(self.last_sample_value);
            self.last_sample_value = s.value;
            self.totals.kernel_samples += 1;
            w.witness.kernel_samples += 1;
            self.fresh.push(s.value);
            let counted = &mut w.counted;
            counted.max_gap = counted.max_gap.max(gap);
            let on_grid = s.value.saturating_sub(self.totals.grid_origin);
            let index = on_grid / c.period;
            let skipped = index.saturating_sub(self.last_index + 1);
            // Grid points we emptied ourselves are drops by construction,
            // whatever this sample's own timing says about the rest.
            let injected = s.marks.injected.min(skipped);
            counted.absent += injected;
            let skipped = skipped - injected;
            if on_grid % c.period <= c.interrupt_skid {
                // Prompt on its grid point: every point skipped since the
                // previous sample had no interrupt.
                if s.marks.lost {
                    counted.absent_unwitnessed += skipped;
                } else if s.marks.throttle {
                    counted.absent_throttled += skipped;
                } else {
                    counted.absent += skipped;
                }
                self.last_index = index;
            } else if skipped == 0 {
                // Past the skid but before the next point: this point's
                // interrupt, late. The driver keeps the grid.
                counted.late_interrupt = true;
                self.last_index = index;
            } else {
                // Past a further point: one interrupt a period or more late,
                // for which the driver re-based the period (the arm64 bug
                // keeps the grid, so this is no lost interrupt). The grid
                // starts again here.
                counted.late_interrupt = true;
                counted.late_skipped += skipped;
                self.totals.rebased += 1;
                self.totals.grid_origin = s.value;
                self.last_index = 0;
            }
        }
        false
    }

    pub fn add_move(&mut self, time_ns: u64) {
        self.moves.push_back(time_ns);
    }

    pub fn histogram(&self) -> &Histogram<u64> {
        &self.histogram
    }

    pub fn totals(&self) -> &WorkerTotals {
        &self.totals
    }

    /// Consumes kernel records up to `t` into `w`.
    fn witness_until(&mut self, t: u64, w: &mut Witness) {
        if self.throttle_active {
            w.throttled = true;
        }
        while let Some(rec) = self.kernel.front().copied() {
            if rec.time_ns() > t {
                break;
            }
            self.kernel.pop_front();
            match rec {
                KernelRecord::Sample { .. } => {
                    w.kernel_samples += 1;
                    self.totals.kernel_samples += 1;
                }
                KernelRecord::Throttle { .. } => {
                    w.throttled = true;
                    self.throttle_active = true;
                    self.totals.throttle_records += 1;
                }
                KernelRecord::Unthrottle { .. } => {
                    w.throttled = true;
                    self.throttle_active = false;
                    self.totals.unthrottle_records += 1;
                }
                KernelRecord::Lost { lost, .. } => {
                    w.records_lost = true;
                    self.totals.lost_records += lost;
                }
            }
        }
        while let Some(&m) = self.moves.front() {
            if m > t {
                break;
            }
            self.last_move = Some(m);
            self.moves.pop_front();
        }
    }

    /// Feeds one handler record; returns the anomalies it closes.
    pub fn add_signal(&mut self, rec: SignalRecord) -> Vec<Anomaly> {
        self.feed(rec)
            .into_iter()
            .flatten()
            .filter_map(|c| c.anomaly)
            .collect()
    }

    /// Feeds one handler record; returns the windows it closes.
    pub fn feed(&mut self, rec: SignalRecord) -> Closings {
        match rec.delivery {
            Delivery::SigIo => {
                self.totals.sigio += 1;
                self.sigio_pending += 1;
                return [None, None];
            }
            Delivery::ReadFailed(_) => {
                // Without a value this window merges into the next, which we
                // then refuse to judge as anything but our own failure.
                self.totals.read_failures += 1;
                let mut w = std::mem::take(&mut self.carry.witness);
                self.witness_until(rec.time_ns, &mut w);
                w.tool_error = true;
                self.carry.witness = w;
                return [None, None];
            }
            Delivery::WrongThread => self.totals.wrong_thread += 1,
            Delivery::Overflow => {}
        }
        self.seq += 1;
        let delta = match self.cfg.mode {
            Mode::Free => rec.value.wrapping_sub(self.prev_value),
            Mode::Reset => rec.value,
        };
        self.prev_value = rec.value;
        let mut window = std::mem::take(&mut self.carry);
        window.delta += delta;
        self.witness_until(rec.time_ns, &mut window.witness);
        window.witness.sigio += std::mem::take(&mut self.sigio_pending);

        let inject =
            self.cfg.inject_drop_every > 0 && self.seq.is_multiple_of(self.cfg.inject_drop_every);
        if self.counted {
            // A signal whose interrupt an earlier read already passed (a
            // late signal's queued successor) has no sample left to discard:
            // its injection is carried to the next signal that has one, so
            // the self-test still gets exactly one drop per injection.
            let discard = inject || self.inject_owed > 0;
            let discarded = self.count_until(rec.value, discard, &mut window);
            match (inject, discarded) {
                (true, false) => self.inject_owed += 1,
                (false, true) => self.inject_owed -= 1,
                _ => {}
            }
        }
        if inject {
            // As if this overflow's interrupt never came: no signal and no
            // sample record; its count flows into the next window.
            if !self.counted && window.witness.kernel_samples > 0 {
                window.witness.kernel_samples -= 1;
                self.totals.kernel_samples -= 1;
            }
            window.witness.injected += 1;
            self.carry = window;
            return [None, None];
        }
        self.totals.signals += 1;
        if self.counted {
            return self.close_counted(window, rec);
        }
        [self.close(window, rec), None]
    }

    /// The window a signal ends, and where the worker ran before it.
    fn closed_window(&mut self, seq: u64, delta: u64, rec: &SignalRecord) -> Ending {
        let cpu_before = self.prev_cpu.replace(rec.cpu);
        if cpu_before.is_some_and(|b| b != rec.cpu) {
            self.totals.cpu_changes += 1;
        }
        Ending {
            window: ClosedWindow {
                worker: self.cfg.worker,
                signal_seq: seq,
                time_ns: rec.time_ns,
                delta,
                cpu: rec.cpu,
            },
            cpu_before,
        }
    }

    fn anomaly(
        &self,
        end: &Ending,
        kind: AnomalyKind,
        missed: u64,
        dropped: u64,
        w: &Witness,
        interrupt_gap: Option<u64>,
    ) -> Anomaly {
        let win = &end.window;
        Anomaly {
            worker: win.worker,
            signal_seq: win.signal_seq,
            time_ns: win.time_ns,
            delta: win.delta,
            period: self.cfg.period,
            skid: self.cfg.skid,
            kind,
            missed,
            dropped,
            cpu_before: end.cpu_before,
            cpu_after: win.cpu,
            since_migration_ns: self.last_move.map(|m| win.time_ns.saturating_sub(m)),
            kernel_samples: w.kernel_samples,
            injected: w.injected,
            interrupt_gap,
        }
    }

    fn close(&mut self, window: Window, rec: SignalRecord) -> Option<Closed> {
        let Window { delta, witness, .. } = window;
        let c = self.cfg;
        let class = classify::classify_delta(delta, c.period, c.skid);
        let j = classify::judge(class, delta, c.period, &witness, c.software);
        Some(self.settle(self.seq, delta, &witness, j, &rec, None))
    }

    /// Counted mode. Signals are matched to interrupts in order, as
    /// realtime signals queue: a signal is the oldest owed interrupt's.
    fn close_counted(&mut self, window: Window, rec: SignalRecord) -> Closings {
        let fresh = window.witness.kernel_samples;
        let settled = self.held.take().map(|h| self.settle_held(h, fresh == 0));
        let mut unsignalled = 0;
        if fresh > 0 && !self.owed.is_empty() {
            // Interrupts still owed a signal when a newer one's came: theirs
            // would have been queued first, so they got none.
            unsignalled = self.owed.len() as u64;
            self.owed.clear();
        }
        self.owed.extend(self.fresh.drain(..));
        if fresh >= 2 {
            self.held = Some(Held {
                window,
                rec,
                seq: self.seq,
                unsignalled,
            });
            return [settled, None];
        }
        let lateness = self.owed.pop_front().map(|s| rec.value.saturating_sub(s));
        let closed = self.judge_counted(window, &rec, self.seq, unsignalled, lateness);
        [settled, Some(closed)]
    }

    /// Settles a held window. `queued_behind` says the next signal came
    /// before any newer interrupt: it was queued behind the held one, which
    /// is then the oldest owed interrupt's, read late. Otherwise the others
    /// got no signal: the kernel merged them into the held one.
    fn settle_held(&mut self, h: Held, queued_behind: bool) -> Closed {
        let (unsignalled, own) = if queued_behind {
            (h.unsignalled, self.owed.pop_front())
        } else {
            let newest = self.owed.back().copied();
            let merged = self.owed.len().saturating_sub(1) as u64;
            self.owed.clear();
            (h.unsignalled + merged, newest)
        };
        let lateness = own.map(|s| h.rec.value.saturating_sub(s));
        self.judge_counted(h.window, &h.rec, h.seq, unsignalled, lateness)
    }

    fn judge_counted(
        &mut self,
        window: Window,
        rec: &SignalRecord,
        seq: u64,
        unsignalled: u64,
        lateness: Option<u64>,
    ) -> Closed {
        let Window {
            delta,
            witness,
            mut counted,
        } = window;
        counted.samples = witness.kernel_samples;
        counted.unsignalled = unsignalled;
        counted.lateness = lateness;
        let j = classify::judge_counted(&counted, &witness, self.cfg.skid);
        let gap = (counted.samples > 0).then_some(counted.max_gap);
        self.settle(seq, delta, &witness, j, rec, gap)
    }

    /// Settles what is still open at the end: a held window (no signal came
    /// after it, so the others were merged into it) and interrupts still
    /// owed a signal (merged likewise), so the books close.
    pub fn flush(&mut self) -> Option<Closed> {
        let settled = self.held.take().map(|h| self.settle_held(h, false));
        let merged = self.owed.len() as u64;
        self.owed.clear();
        bump(
            &mut self.totals.missed_overflows,
            AnomalyKind::CoalescedSignal,
            merged,
        );
        settled
    }

    /// Books one judged window: histogram, totals, and its anomaly if any.
    fn settle(
        &mut self,
        seq: u64,
        delta: u64,
        witness: &Witness,
        j: classify::Judgement,
        rec: &SignalRecord,
        interrupt_gap: Option<u64>,
    ) -> Closed {
        // Auto-resizing: this only fails beyond u64 range.
        let _ = self.histogram.record(delta);
        self.totals.min_delta = Some(self.totals.min_delta.map_or(delta, |m| m.min(delta)));
        self.totals.max_delta = Some(self.totals.max_delta.map_or(delta, |m| m.max(delta)));
        self.totals.accounted_overflows += j.overflows;
        // Counted when revealed: an injection after the last signal is not.
        self.totals.injected += witness.injected;
        self.totals.dropped_interrupts += j.dropped;
        let end = self.closed_window(seq, delta, rec);
        let Some(kind) = j.kind else {
            self.totals.ok += 1;
            return Closed {
                window: end.window,
                anomaly: None,
            };
        };
        bump(&mut self.totals.anomalies, kind, 1);
        bump(&mut self.totals.missed_overflows, kind, j.missed);
        let anomaly = self.anomaly(&end, kind, j.missed, j.dropped, witness, interrupt_gap);
        Closed {
            window: end.window,
            anomaly: Some(anomaly),
        }
    }

    /// Ends the timeline: kernel records after the last signal are overflows
    /// still in flight when the event was disabled.
    pub fn finish(&mut self) -> &WorkerTotals {
        self.flush();
        let mut w = Witness::default();
        self.witness_until(u64::MAX, &mut w);
        let in_flight = self.samples.len() as u64;
        self.samples.clear();
        self.totals.kernel_samples += in_flight;
        self.totals.tail_samples = w.kernel_samples + in_flight;
        &self.totals
    }
}

fn bump(counts: &mut [(AnomalyKind, u64)], kind: AnomalyKind, by: u64) {
    if let Some((_, n)) = counts.iter_mut().find(|(k, _)| *k == kind) {
        *n += by;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 1_000_000;

    fn timeline(inject: u64, software: bool) -> Timeline {
        Timeline::new(TimelineConfig {
            worker: 0,
            period: P,
            skid: P / 4,
            interrupt_skid: P / 4,
            mode: Mode::Free,
            software,
            inject_drop_every: inject,
        })
    }

    /// Under QEMU's numbers: period 100000, skid 10000, hardware, free.
    fn qemu_timeline() -> Timeline {
        Timeline::new(TimelineConfig {
            period: 100_000,
            skid: 10_000,
            interrupt_skid: 10_000,
            ..timeline(0, false).cfg
        })
    }

    fn sig(value: u64, time_ns: u64, cpu: u32) -> SignalRecord {
        SignalRecord {
            value,
            time_ns,
            cpu,
            si_code: 1,
            delivery: Delivery::Overflow,
        }
    }

    fn sample(time_ns: u64, cpu: u32, value: u64) -> KernelRecord {
        KernelRecord::Sample {
            time_ns,
            cpu,
            value,
        }
    }

    /// The kinds of what one signal closed, in order.
    fn kinds(v: &[Anomaly]) -> Vec<AnomalyKind> {
        v.iter().map(|a| a.kind).collect()
    }

    fn one(v: Vec<Anomaly>) -> Anomaly {
        assert_eq!(v.len(), 1, "{v:?}");
        v[0].clone()
    }

    /// n overflows, each with its sample at t-1 and signal at t.
    fn feed_clean(t: &mut Timeline, n: u64) -> Vec<Anomaly> {
        let mut out = vec![];
        for i in 1..=n {
            t.add_kernel(sample(i * 10 - 1, 0, i * P + 3));
        }
        for i in 1..=n {
            out.extend(t.add_signal(sig(i * P + 7, i * 10, (i % 2) as u32)));
        }
        out
    }

    #[test]
    fn clean_stream_has_no_anomaly_and_closes_the_books() {
        for software in [false, true] {
            let mut t = timeline(0, software);
            assert!(feed_clean(&mut t, 100).is_empty());
            let totals = t.finish().clone();
            assert_eq!(
                (totals.signals, totals.kernel_samples, totals.ok),
                (100, 100, 100)
            );
            assert_eq!(totals.accounted_overflows, 100);
            assert_eq!(totals.cpu_changes, 99);
            assert_eq!(totals.tail_samples, 0);
        }
        let mut t = timeline(0, false);
        feed_clean(&mut t, 3);
        assert_eq!(t.finish().last_sample_value, Some(3 * P + 3));
    }

    #[test]
    fn injection_yields_exactly_the_injected_drops() {
        for software in [true, false] {
            let mut t = timeline(7, software);
            let anomalies = feed_clean(&mut t, 100);
            let totals = t.finish();
            assert_eq!(totals.injected, 14);
            assert_eq!(anomalies.len(), 14);
            assert!(
                anomalies
                    .iter()
                    .all(|a| a.kind == AnomalyKind::DroppedInterrupt
                        && a.dropped == 1
                        && a.injected == 1),
                "{anomalies:?}"
            );
            assert_eq!(totals.dropped_interrupts, 14);
            assert_eq!(totals.signals + totals.injected, 100);
            // Every overflow is still accounted for exactly once.
            assert_eq!(totals.accounted_overflows, 100);
            assert_eq!(anomalies[0].signal_seq, 8);
            assert_eq!(anomalies[0].delta, 2 * P);
        }
    }

    #[test]
    fn missing_sample_is_a_drop_and_present_samples_are_coalescing() {
        let mut t = timeline(0, false);
        // Overflow 2's interrupt never happened: no sample, no signal.
        t.add_kernel(sample(9, 0, P + 1));
        t.add_kernel(sample(29, 1, 3 * P + 1));
        // Overflows 4 and 5 both interrupted but one signal came.
        t.add_kernel(sample(38, 1, 4 * P + 1));
        t.add_kernel(sample(39, 1, 5 * P + 1));
        t.add_move(20);
        assert!(t.add_signal(sig(P + 5, 10, 0)).is_empty());
        let drop = one(t.add_signal(sig(3 * P + 5, 30, 1)));
        assert_eq!(
            (drop.kind, drop.dropped, drop.missed),
            (AnomalyKind::DroppedInterrupt, 1, 1)
        );
        assert_eq!(
            (drop.cpu_before, drop.cpu_after, drop.since_migration_ns),
            (Some(0), 1, Some(10))
        );
        assert_eq!(drop.interrupt_gap, Some(2 * P));
        // Two interrupts, one read: held until it shows whether the second
        // signal is queued behind it. None comes before the end: merged.
        assert!(t.add_signal(sig(5 * P + 5, 40, 1)).is_empty());
        let merged = t.flush().and_then(|c| c.anomaly).unwrap();
        assert_eq!(
            (
                merged.kind,
                merged.dropped,
                merged.missed,
                merged.signal_seq
            ),
            (AnomalyKind::CoalescedSignal, 0, 1, 3)
        );
        let totals = t.finish();
        assert_eq!(totals.accounted_overflows, 5);
        assert_eq!(totals.kernel_samples, 4);
        assert_eq!(totals.dropped_interrupts, 1);
    }

    /// A SIGIO stands for a signal the full queue refused; a THROTTLE record
    /// explains a gap; neither hides anything else.
    #[test]
    fn sigio_and_throttle_gaps_are_explained() {
        let mut t = timeline(0, false);
        t.add_kernel(sample(9, 0, P + 1));
        t.add_signal(sig(P + 5, 10, 0));
        // The SIGIO'd overflow had its interrupt: its sample comes first.
        t.add_kernel(sample(14, 0, 2 * P + 1));
        t.add_signal(SignalRecord {
            delivery: Delivery::SigIo,
            ..sig(0, 15, 0)
        });
        t.add_kernel(sample(19, 0, 3 * P + 1));
        assert!(t.add_signal(sig(3 * P + 5, 20, 0)).is_empty());
        t.add_kernel(KernelRecord::Throttle { time_ns: 25 });
        t.add_kernel(sample(29, 0, 5 * P + 1));
        let closed = t.add_signal(sig(5 * P + 5, 30, 0));
        assert_eq!(
            kinds(&closed),
            [AnomalyKind::SignalQueueOverflow, AnomalyKind::Throttled]
        );
        assert_eq!((closed[0].missed, closed[1].missed), (1, 1));
        assert_eq!(closed[1].dropped, 0);
        // The UNTHROTTLE marks the next gap, which is whole: nothing to say.
        t.add_kernel(KernelRecord::Unthrottle { time_ns: 35 });
        t.add_kernel(sample(39, 0, 6 * P + 1));
        assert!(t.add_signal(sig(6 * P + 5, 40, 0)).is_empty());
        // ... but a throttle record elsewhere does not excuse a real gap.
        t.add_kernel(KernelRecord::Throttle { time_ns: 41 });
        t.add_kernel(sample(42, 0, 7 * P + 1));
        t.add_kernel(sample(49, 0, 9 * P + 1));
        assert!(t.add_signal(sig(9 * P + 5, 50, 0)).is_empty());
        let a = t.flush().and_then(|c| c.anomaly).unwrap();
        assert_eq!(
            (a.kind, a.dropped, a.missed),
            (AnomalyKind::DroppedInterrupt, 1, 2)
        );
        let totals = t.finish();
        assert_eq!(
            (
                totals.sigio,
                totals.throttle_records,
                totals.unthrottle_records,
                totals.dropped_interrupts
            ),
            (1, 2, 1, 1)
        );
    }

    /// The time-ordered witness of reset mode: throttled at the start of a
    /// window still explains it.
    #[test]
    fn reset_mode_throttle_spans_windows() {
        let mut t = Timeline::new(TimelineConfig {
            mode: Mode::Reset,
            ..timeline(0, false).cfg
        });
        t.add_kernel(sample(9, 0, P));
        t.add_signal(sig(P, 10, 0));
        t.add_kernel(KernelRecord::Throttle { time_ns: 25 });
        t.add_kernel(sample(29, 0, P));
        assert_eq!(
            kinds(&t.add_signal(sig(2 * P, 30, 0))),
            [AnomalyKind::Throttled]
        );
        assert_eq!(
            kinds(&t.add_signal(sig(2 * P, 40, 0))),
            [AnomalyKind::Throttled]
        );
        t.add_kernel(KernelRecord::Unthrottle { time_ns: 45 });
        t.add_kernel(sample(49, 0, P));
        assert!(t.add_signal(sig(P, 50, 0)).is_empty());
        assert_eq!(t.finish().dropped_interrupts, 0);
    }

    /// The commonest QEMU pattern: a signal delivered only at the next
    /// interrupt, its successor's right behind it. One late signal; the
    /// second is prompt for its own interrupt.
    #[test]
    fn a_signal_delivered_at_the_next_interrupt_is_late_once() {
        let mut t = qemu_timeline();
        t.add_kernel(sample(9, 0, 100_000));
        t.add_kernel(sample(19, 0, 200_000));
        assert!(t.add_signal(sig(200_040, 20, 0)).is_empty());
        let late = one(t.add_signal(sig(200_286, 21, 0)));
        assert_eq!(
            (late.kind, late.signal_seq, late.missed, late.dropped),
            (AnomalyKind::Late, 1, 0, 0)
        );
        let totals = t.finish();
        assert_eq!((totals.ok, totals.accounted_overflows), (1, 2));
    }

    /// Recorded under QEMU (cycles, period 100000, no migration): a signal
    /// read ~1.9 periods after its interrupt, the next one's signal right
    /// behind it, then a signal read 35,555 past its overflow. Every
    /// interrupt happened on its grid point: late signals, never drops, and
    /// the prompt reads after them are fine.
    #[test]
    fn late_signals_are_late_not_drops() {
        let mut t = qemu_timeline();
        t.add_kernel(sample(9, 0, 100_031));
        assert!(t.add_signal(sig(100_040, 10, 0)).is_empty());
        t.add_kernel(sample(15, 0, 200_030));
        t.add_kernel(sample(25, 0, 300_029));
        assert!(t.add_signal(sig(390_101, 30, 0)).is_empty());
        // The second interrupt's own signal, queued behind the first: both
        // were read long after their interrupts.
        let both = t.add_signal(sig(390_345, 31, 0));
        assert_eq!(kinds(&both), [AnomalyKind::Late, AnomalyKind::Late]);
        assert!(both.iter().all(|a| a.dropped == 0 && a.missed == 0));
        t.add_kernel(sample(35, 0, 400_031));
        assert!(t.add_signal(sig(400_040, 40, 0)).is_empty());
        t.add_kernel(sample(45, 0, 500_031));
        assert_eq!(
            kinds(&t.add_signal(sig(535_555, 50, 0))),
            [AnomalyKind::Late]
        );
        // Its delta from the late read is short, but the read is prompt.
        t.add_kernel(sample(55, 0, 600_031));
        assert!(t.add_signal(sig(600_040, 60, 0)).is_empty());
        let totals = t.finish();
        assert_eq!(totals.dropped_interrupts, 0);
        assert_eq!(totals.accounted_overflows, 6);
        assert_eq!((totals.signals, totals.kernel_samples), (6, 6));
        assert_eq!(totals.anomalies[0], (AnomalyKind::DroppedInterrupt, 0));
    }

    /// An injection that falls on a late signal's queued successor, whose
    /// interrupt an earlier read already passed: the next signal with an
    /// interrupt of its own gives up its sample instead, so the self-test
    /// still counts one drop per injection.
    #[test]
    fn an_injection_on_a_queued_signal_still_makes_one_drop() {
        let mut t = Timeline::new(TimelineConfig {
            inject_drop_every: 3,
            ..qemu_timeline().cfg
        });
        for (i, v) in [100_000, 200_000, 300_000, 400_000, 500_000]
            .into_iter()
            .enumerate()
        {
            t.add_kernel(sample(i as u64 * 10 + 9, 0, v));
        }
        t.add_signal(sig(100_010, 10, 0));
        t.add_signal(sig(300_010, 30, 0));
        // Signal 3, discarded: s3's, which the read before already passed.
        assert!(t.add_signal(sig(300_250, 31, 0)).is_empty());
        t.add_signal(sig(400_010, 40, 0));
        let drop = t.add_signal(sig(500_010, 50, 0));
        assert_eq!(kinds(&drop), [AnomalyKind::DroppedInterrupt]);
        let totals = t.finish();
        assert_eq!((totals.injected, totals.dropped_interrupts), (1, 1));
        assert_eq!(totals.kernel_samples, 4);
    }

    /// Seen under QEMU: the interrupt after an injected one came late. The
    /// emptied grid point is still a drop, and the late interrupt does not
    /// pass for one a period late (which would re-base the grid).
    #[test]
    fn an_injection_before_a_late_interrupt_is_still_one_drop() {
        let mut t = Timeline::new(TimelineConfig {
            inject_drop_every: 2,
            ..qemu_timeline().cfg
        });
        t.add_kernel(sample(9, 0, 100_000));
        t.add_kernel(sample(19, 0, 200_000));
        t.add_signal(sig(100_010, 10, 0));
        assert!(t.add_signal(sig(200_010, 20, 0)).is_empty());
        t.add_kernel(sample(29, 0, 370_000));
        let a = one(t.add_signal(sig(370_010, 30, 0)));
        assert_eq!(
            (a.kind, a.dropped, a.injected),
            (AnomalyKind::DroppedInterrupt, 1, 1)
        );
        let totals = t.finish();
        assert_eq!(
            (totals.injected, totals.dropped_interrupts, totals.rebased),
            (1, 1, 0)
        );
    }

    /// A late read whose queued successor never comes: the kernel merged
    /// them, which the next signal (for a newer interrupt) shows.
    #[test]
    fn an_owed_signal_that_never_comes_was_coalesced() {
        let mut t = qemu_timeline();
        t.add_kernel(sample(9, 0, 100_031));
        t.add_kernel(sample(19, 0, 200_031));
        assert!(t.add_signal(sig(250_000, 20, 0)).is_empty());
        t.add_kernel(sample(29, 0, 300_031));
        let merged = one(t.add_signal(sig(300_040, 30, 0)));
        assert_eq!(
            (
                merged.kind,
                merged.missed,
                merged.dropped,
                merged.signal_seq
            ),
            (AnomalyKind::CoalescedSignal, 1, 0, 1)
        );
        assert_eq!(t.finish().accounted_overflows, 3);
    }

    /// The bug itself: the interrupt for overflow 2 never came, so the next
    /// prompt read is two periods on with one sample.
    #[test]
    fn a_lost_interrupt_between_prompt_reads_is_a_drop() {
        let mut t = qemu_timeline();
        t.add_kernel(sample(9, 0, 100_031));
        t.add_signal(sig(100_040, 10, 0));
        t.add_kernel(sample(29, 1, 300_035));
        let a = one(t.add_signal(sig(300_040, 30, 1)));
        assert_eq!(
            (a.kind, a.dropped, a.missed, a.interrupt_gap),
            (AnomalyKind::DroppedInterrupt, 1, 1, Some(200_004))
        );
    }

    /// A drop hidden behind late signals is still a drop: the samples'
    /// counts show the gap wherever the reads fall.
    #[test]
    fn a_lost_interrupt_is_found_whatever_the_signals_did() {
        let mut t = qemu_timeline();
        t.add_kernel(sample(9, 0, 100_031));
        t.add_kernel(sample(19, 0, 200_031));
        // Read late, past overflow 2; overflow 3 then loses its interrupt.
        assert!(t.add_signal(sig(250_000, 20, 0)).is_empty());
        t.add_kernel(sample(39, 0, 400_020));
        assert_eq!(
            kinds(&t.add_signal(sig(250_100, 21, 0))),
            [AnomalyKind::Late, AnomalyKind::Late]
        );
        let a = one(t.add_signal(sig(400_030, 40, 0)));
        assert_eq!((a.kind, a.dropped), (AnomalyKind::DroppedInterrupt, 1));
        assert_eq!(t.finish().dropped_interrupts, 1);
    }

    /// An interrupt past the skid is late; one a period or more late makes
    /// the driver re-base the period: late again, not lost, and the grid
    /// moves with it, so a later loss is still found exactly.
    #[test]
    fn late_interrupts_keep_or_move_the_grid() {
        let mut t = qemu_timeline();
        t.add_kernel(sample(9, 0, 100_031));
        t.add_signal(sig(100_040, 10, 0));
        // 70,000 past grid point 2: late, nothing skipped.
        t.add_kernel(sample(19, 1, 270_000));
        let a = one(t.add_signal(sig(270_010, 20, 1)));
        assert_eq!((a.kind, a.dropped, a.missed), (AnomalyKind::Late, 0, 0));
        // Back on the grid: fine.
        t.add_kernel(sample(29, 1, 300_020));
        assert!(t.add_signal(sig(300_030, 30, 1)).is_empty());
        // 44,444 past point 7, three points passed: re-based, late.
        t.add_kernel(sample(39, 1, 744_444));
        let a = one(t.add_signal(sig(744_450, 40, 1)));
        assert_eq!((a.kind, a.dropped, a.missed), (AnomalyKind::Late, 0, 3));
        // The new grid: one period on is prompt, then a real loss.
        t.add_kernel(sample(49, 1, 844_460));
        assert!(t.add_signal(sig(844_470, 50, 1)).is_empty());
        t.add_kernel(sample(59, 1, 1_044_450));
        let a = one(t.add_signal(sig(1_044_460, 60, 1)));
        assert_eq!((a.kind, a.dropped), (AnomalyKind::DroppedInterrupt, 1));
        let totals = t.finish();
        assert_eq!((totals.rebased, totals.grid_origin), (1, 744_444));
        assert_eq!(totals.accounted_overflows, 10);
    }

    /// A LOST record means samples were not written: a gap across it proves
    /// nothing, and one elsewhere still does.
    #[test]
    fn a_gap_across_a_lost_record_is_unwitnessed() {
        let mut t = qemu_timeline();
        t.add_kernel(sample(9, 0, 100_031));
        t.add_signal(sig(100_040, 10, 0));
        t.add_kernel(KernelRecord::Lost {
            time_ns: 15,
            lost: 1,
        });
        t.add_kernel(sample(29, 0, 300_031));
        let a = one(t.add_signal(sig(300_040, 30, 0)));
        assert_eq!((a.kind, a.dropped), (AnomalyKind::WitnessLost, 0));
        assert_eq!(t.finish().lost_records, 1);
    }

    #[test]
    fn kernel_records_after_the_last_signal_are_in_flight() {
        for software in [false, true] {
            let mut t = timeline(0, software);
            feed_clean(&mut t, 3);
            t.add_kernel(sample(100, 0, 4 * P + 3));
            let totals = t.finish();
            assert_eq!((totals.tail_samples, totals.kernel_samples), (1, 4));
        }
    }

    #[test]
    fn reset_mode_takes_the_value_as_the_delta() {
        let mut t = Timeline::new(TimelineConfig {
            mode: Mode::Reset,
            ..timeline(0, false).cfg
        });
        t.add_kernel(sample(1, 0, P));
        assert!(t.add_signal(sig(P + 3, 2, 0)).is_empty());
        t.add_kernel(sample(3, 0, P));
        let a = one(t.add_signal(sig(2 * P, 4, 0)));
        assert_eq!(a.delta, 2 * P);
        assert_eq!(a.kind, AnomalyKind::DroppedInterrupt);
    }
}
