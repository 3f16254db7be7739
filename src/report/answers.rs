//! The questions a report is read for, and the rates that answer them:
//! how many of what, out of how many, per million with an exact interval.

use crate::stats::Rate;

/// A rate per million and its exact interval as two table cells, three
/// decimals each; "-" without trials.
pub fn rate_cells(overflows: u64, dropped: u64) -> (String, String) {
    let rate = Rate::new(dropped, overflows, crate::domain::CONFIDENCE);
    match (
        rate.per_million,
        rate.ci_low_per_million,
        rate.ci_high_per_million,
    ) {
        (Some(pm), Some(lo), Some(hi)) => (format!("{pm:.3}"), format!("{lo:.3}..{hi:.3}")),
        _ => ("-".into(), "-".into()),
    }
}

/// One answer to the questions a report is read for: how many of what,
/// out of how many, as a rate with its exact interval.
pub struct Answer {
    pub label: &'static str,
    pub events: u64,
    pub trials: u64,
    /// What `trials` counts ("overflows", "stops", ...).
    pub of: &'static str,
}

/// The two questions maintainers ask of a lost-interrupt report, from a
/// run's totals: how often overflows are lost (per overflow, and per stop,
/// where the loss happens), and whether anything looks like a spurious or
/// duplicate overflow interrupt (sample records that fit no driver
/// behaviour; signals with no interrupt of their own). Rates come with
/// exact (Clopper-Pearson) intervals, the drops' and the spurious ones'
/// alike.
pub fn answers(t: &crate::results::schema::Counts) -> Vec<Answer> {
    let mut rows = vec![Answer {
        label: "dropped per overflow",
        events: t.dropped_interrupts,
        trials: t.accounted_overflows,
        of: "overflows",
    }];
    if let Some(x) = &t.stress {
        rows.push(Answer {
            label: "dropped per stop",
            events: t.dropped_interrupts,
            trials: x.stops,
            of: "stops",
        });
    }
    // Schema 1 judged no interrupts or deliveries (they read as zero):
    // rows of nothing are left out, not shown as "0 of 0".
    rows.extend(
        [
            Answer {
                label: "spurious interrupts",
                events: t.interrupts.unexplained,
                trials: t.interrupts.samples,
                of: "interrupts",
            },
            Answer {
                label: "unmatched signals",
                events: t.deliveries.unmatched,
                trials: t.deliveries.signals,
                of: "signals",
            },
        ]
        .into_iter()
        .filter(|a| a.trials > 0),
    );
    rows
}

/// A rate per million in as many digits as it needs: 38781, 5.23, 0.042.
fn per_million_short(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 1.0 || x == 0.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// "0.00 (0.00..1724)", or "-" without trials.
pub fn answer_rate(a: &Answer) -> String {
    rate_short(a.trials, a.events)
}

/// `events` per million `trials` with its exact 95% interval, in as many
/// digits as each needs: "0.00 (0.00..1724)"; "-" without trials.
pub fn rate_short(trials: u64, events: u64) -> String {
    let rate = Rate::new(events, trials, crate::domain::CONFIDENCE);
    match (
        rate.per_million,
        rate.ci_low_per_million,
        rate.ci_high_per_million,
    ) {
        (Some(pm), Some(lo), Some(hi)) => format!(
            "{} ({}..{})",
            per_million_short(pm),
            per_million_short(lo),
            per_million_short(hi)
        ),
        _ => "-".to_string(),
    }
}
