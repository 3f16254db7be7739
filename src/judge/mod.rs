/*!
The judge: one worker's observation stream in, every overflow and every
delivery accounted for, out.

Two judgements that never mix:

- `interrupts`: from the kernel's own records alone (sample counts, stops,
  throttle and lost records, the final count), replaying the driver's re-arm
  rules: each overflow is an interrupt on time, late, a period or more late
  (the driver re-based), dropped, ambiguous, or in a ring gap.
- `deliveries`: the signals against those interrupts: one signal each,
  coalesced, late, a SIGIO fallback, unmatched. A delivery problem never
  changes the interrupt verdict, and no interrupt verdict depends on when a
  signal came.

`worker` runs both over the stream (`stream`), applies `--inject-drop-every`
as a filter before judgement, and turns what they found into anomalies
(`kinds`) with the context a maintainer asks for. `wrap` takes the kernel's
2^32 count jumps (an update racing the overflow NMI) out of every count
first. `stats` turns counts into rates with exact
intervals, and says how many overflows without a drop bound a rate.
`stress` counts the stops the kernel witnessed, the moves that made them and
where in the period they fell: what a clean verdict survived.
*/

pub mod deliveries;
pub mod interrupts;
pub mod kinds;
pub mod stats;
pub mod stream;
pub mod stress;
pub mod worker;
pub mod wrap;

use serde::{Deserialize, Serialize};

use crate::domain::{DriverRules, RearmMode};

pub use deliveries::{ClosedWindow, DeliveryTotals};
pub use interrupts::InterruptTotals;
pub use kinds::AnomalyKind;
pub use stream::{Delivery, Observation, Row};
pub use stress::{Sensitivity, StressTotals};
pub use worker::{Anomaly, StreamJudge, StreamJudgement};

/// User-mode events our handler runs between its read and the DISABLE that
/// stops the event (reset mode): the stop is at most this far past the read.
/// The handler's code there is a few dozen instructions.
pub const HANDLER_SLACK: u64 = 1_000;

/// Everything the judge needs to know about the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct JudgeConfig {
    pub period: u64,
    /// How far past its interrupt a signal's read may be and be on time.
    pub skid: u64,
    /// How far past its due point an interrupt may be taken and be on time.
    pub interrupt_skid: u64,
    pub mode: RearmMode,
    /// A software clock (no PMU, no re-arm grid).
    pub software: bool,
    /// Kernel mode is counted: a stop's count is only a lower bound, and
    /// nothing bounds it from above but the next count the records give (a
    /// sample after the restart, the resume witness, our own read, the next
    /// stop's witness). Under QEMU a vCPU held in the switch path (spinning
    /// while the other vCPU ran the migrator) counted 3.8 million events
    /// there at a period of 50,000. (Runs recorded before kept a
    /// `stop_slack` of `period - 1` in run.json: an assumption, not a fact
    /// of the run, and wrong where a stop was held; replay ignores it.)
    pub include_kernel: bool,
    /// The PMU interrupt is an ordinary IRQ (arm64 without pseudo-NMI): the
    /// scheduler masks it from the switch witness's read to the stop, so an
    /// overflow pending at a context switch is lost there. False (an NMI:
    /// x86, pseudo-NMI; or unknown, and in runs recorded before): it may
    /// still be taken before the stop, and the judge follows both.
    #[serde(default)]
    pub irq_masked_at_stops: bool,
    /// Discard every Nth interrupt and its signal (0: never).
    pub inject_drop_every: u64,
    /// Reset mode: see `HANDLER_SLACK`.
    pub handler_slack: u64,
    /// Witnessed stops without a drop that a clean verdict needs (0 in
    /// runs recorded before stops were counted: their verdict did not ask
    /// for any, and their replay does not either).
    #[serde(default)]
    pub stops_needed: u64,
    /// Reset mode: the handler re-arms rr's way (DISABLE, RESET, PERIOD,
    /// ENABLE), so nothing counts between the reset and the restart and
    /// the next due point is exactly a period after the reset. Runs
    /// recorded before (RESET, PERIOD on a running event; false in their
    /// run.json) placed the restart anywhere in the handler's slack.
    #[serde(default)]
    pub restart_at_reset: bool,
    /// No witness records the event's stops (`--switch-witness none`): the
    /// thread may have been stopped between any two records (a preemption,
    /// a migration), and an overflow lost there leaves the same gap as an
    /// interrupt a period late. The judge keeps both wherever a gap fits a
    /// loss, so such a run is never clean on a gap it cannot explain.
    /// (False in runs recorded before: replay judges them as they were.)
    #[serde(default)]
    pub stops_unseen: bool,
    /// A bound on the event's count rate, in events per second of
    /// CLOCK_MONOTONIC (`--max-count-rate`; 0: none known). A stop recorded
    /// with its time only (`--switch-witness times`) then has its count
    /// bounded by the samples' counts and times around it: up to the last
    /// sample's count plus the most the event can count in between
    /// (counting user mode only), and at least the next sample's count less
    /// the most it can count after the stop. Never assumed: the run checks
    /// it between every two samples and is inconclusive where it fails.
    #[serde(default)]
    pub max_count_rate: u64,
    /// The driver behaviours at a stop the judge follows (stock in runs
    /// recorded before: replay judges them as they were).
    #[serde(default = "crate::domain::stock_driver_rules")]
    pub driver_rules: DriverRules,
}

impl JudgeConfig {
    /// The settings for a run; the slacks follow from the counting mode.
    pub fn new(period: u64, skid: u64, interrupt_skid: u64, mode: RearmMode) -> JudgeConfig {
        JudgeConfig {
            period,
            skid,
            interrupt_skid,
            mode,
            software: false,
            include_kernel: false,
            irq_masked_at_stops: false,
            inject_drop_every: 0,
            handler_slack: HANDLER_SLACK,
            stops_needed: 0,
            restart_at_reset: true,
            stops_unseen: false,
            max_count_rate: 0,
            driver_rules: DriverRules::Stock,
        }
    }
}
