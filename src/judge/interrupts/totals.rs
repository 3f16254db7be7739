/*!
What the interrupt judgement counts (`InterruptTotals`) and the overflows
worth a line of their own (`InterruptEvent`).
*/

use serde::{Deserialize, Serialize};

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
    /// Of the dropped, those the judge booked where it discarded a sample
    /// (a self-test passes when it equals `injected` and `dropped`).
    #[serde(default)]
    pub injected_found: u64,
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
    /// Samples whose count rose from the sample before it faster than
    /// `--max-count-rate` allows (or whose time-bounded stop left no
    /// explanation): the bound is wrong for this event, so what it decided
    /// of time-only stops cannot stand.
    #[serde(default)]
    pub count_rate_exceeded: u64,
    /// Streams in which the stock driver's rules were refuted: an overflow
    /// pending at a context switch had its interrupt after the restart,
    /// where the stock driver loses it (a delivering driver, `drivers`).
    #[serde(default)]
    pub stock_rules_refuted: u64,
    /// Streams in which a delivering driver's rules were refuted: the
    /// records fit only the stock driver's loss at a stop.
    #[serde(default)]
    pub delivering_rules_refuted: u64,
    /// Of the dropped, those only the stock driver's rules claim, where
    /// the records refuted neither driver (`--driver-rules auto`): a
    /// delivering driver would have taken each of them a period or more
    /// late.
    #[serde(default)]
    pub dropped_assuming_stock: u64,
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
            injected_found,
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
            count_rate_exceeded,
            stock_rules_refuted,
            delivering_rules_refuted,
            dropped_assuming_stock,
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
        self.injected_found += injected_found;
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
        self.count_rate_exceeded += count_rate_exceeded;
        self.stock_rules_refuted += stock_rules_refuted;
        self.delivering_rules_refuted += delivering_rules_refuted;
        self.dropped_assuming_stock += dropped_assuming_stock;
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
    pub(super) fn of_sample(
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
