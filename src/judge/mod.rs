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

`stream_judge` runs both over the stream (`crate::records`), applies
`--inject-drop-every` as a filter before judgement, and turns what they
found into anomalies (`kinds`) with the context a maintainer asks for.
`wrap` takes the kernel's 2^32 count jumps (an update racing the overflow
NMI) out of every count first. `stress` counts
the stops the kernel witnessed, the moves that made them and where in the
period they fell: what a clean verdict survived (its rates from
`crate::stats`).
*/

pub mod config;
pub mod deliveries;
pub mod interrupts;
pub mod kinds;
pub mod stream_judge;
pub mod stress;
pub mod wrap;

pub use crate::records::{Delivery, Observation};
pub use config::{HANDLER_SLACK, JudgeConfig};
pub use deliveries::{ClosedWindow, DeliveryTotals};
pub use interrupts::InterruptTotals;
pub use kinds::AnomalyKind;
pub use stream_judge::{Anomaly, StreamJudge, StreamJudgement};
pub use stress::{Sensitivity, StressTotals};
