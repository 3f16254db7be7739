/*!
The accounting lines: where every overflow and every delivery went. The
run's end-of-run summary and `pmustress replay` print them from the same
function, so a replay that agrees with its run prints the same words.
*/

use std::fmt::Write as _;

use crate::judge::{DeliveryTotals, InterruptTotals};

/// The accounting of every overflow and every delivery, as the run and a
/// replay print it; `implied` ends the first line.
pub fn accounting(i: &InterruptTotals, d: &DeliveryTotals, implied: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "interrupts: {} overflows = {} interrupts ({} on time, {} late, {} a period or more late{}, {}{} unexplained) + {} dropped ({} injected, {} at the final stop) + {} ambiguous + {} in ring gaps{implied}",
        i.overflows,
        i.samples,
        i.on_time,
        i.late,
        i.rebased_in_handler,
        if i.late_maybe_rebased > 0 {
            format!(" (perhaps {} more)", i.late_maybe_rebased)
        } else {
            String::new()
        },
        if i.count_wraps > 0 {
            format!(
                "{} first after a count wrap ({} {}), ",
                i.after_count_wrap,
                i.count_wraps,
                if i.count_wraps == 1 { "wrap" } else { "wraps" }
            )
        } else {
            String::new()
        },
        i.unexplained,
        i.dropped,
        i.injected,
        i.dropped_at_final_stop,
        i.ambiguous,
        i.record_lost,
    );
    let _ = writeln!(
        s,
        "stops witnessed: {} ({} without their count); throttled {} {}",
        i.stops,
        i.stops_without_count,
        i.throttled,
        if i.throttled == 1 { "time" } else { "times" }
    );
    let _ = writeln!(
        s,
        "deliveries: {} signals ({} on time, {} late, {} a period or more late, {} without a sample record), {} coalesced, {} SIGIO, {} unmatched, {} in flight at stop, {} watermark wakeups",
        d.signals,
        d.on_time,
        d.late,
        d.late_by_a_period,
        d.unrecorded,
        d.coalesced,
        d.sigio,
        d.unmatched,
        d.in_flight,
        d.watermark_wakeups,
    );
    s
}
