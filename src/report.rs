/*!
What people read: one line per anomaly in the style maintainers already use,
a live progress line on a terminal, and the end-of-run summary.
*/

use std::fmt::Write as _;
use std::io::Write;

use clap::ValueEnum;

use crate::classify::AnomalyKind;
use crate::config::{RunConfig, format_cpus};
use crate::results::{Counts, RunResults, Verdict};
use crate::run::{Observer, Progress};
use crate::timeline::Anomaly;

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `worker 1 signal #2650640: delta 20001 outside 10000 +/- 1000 (1 dropped
/// interrupt), cpu 3 -> 7, 14 us after migration`
pub fn anomaly_line(a: &Anomaly) -> String {
    let what = match a.kind {
        AnomalyKind::DroppedInterrupt => {
            let mut s = plural(a.dropped, "dropped interrupt", "dropped interrupts");
            if a.missed > a.dropped {
                let _ = write!(s, " + {} coalesced", a.missed - a.dropped);
            }
            if a.injected > 0 {
                s.push_str(", injected");
            }
            s
        }
        AnomalyKind::Late | AnomalyKind::Early => a.kind.to_string(),
        kind => format!(
            "{}: {kind}",
            plural(a.missed, "missed overflow", "missed overflows")
        ),
    };
    // Counted windows are judged on their interrupts: the delta between
    // the two reads may be fine while the signal itself was late.
    let side = if a.delta.abs_diff(a.period) <= a.skid {
        "within"
    } else {
        "outside"
    };
    let mut line = format!(
        "worker {} signal #{}: delta {} {side} {} +/- {} ({what})",
        a.worker, a.signal_seq, a.delta, a.period, a.skid
    );
    match a.cpu_before {
        Some(b) => {
            let _ = write!(line, ", cpu {b} -> {}", a.cpu_after);
        }
        None => {
            let _ = write!(line, ", cpu {}", a.cpu_after);
        }
    }
    if let Some(ns) = a.since_migration_ns {
        let _ = write!(line, ", {} us after migration", ns / 1000);
    }
    let _ = write!(line, ", {} kernel samples in window", a.kernel_samples);
    if let Some(gap) = a.interrupt_gap {
        let _ = write!(line, ", largest gap between interrupts {gap}");
    }
    line
}

/// Prints anomaly lines to stdout (up to a limit) and a progress line to
/// stderr when it is a terminal.
pub struct Console {
    tty: bool,
    printed: u64,
    limit: u64,
    progress_shown: bool,
}

impl Console {
    pub fn new(limit: u64) -> Console {
        Console {
            tty: crate::kernel::stderr_is_tty(),
            printed: 0,
            limit,
            progress_shown: false,
        }
    }

    /// Clears the progress line before anything else is printed.
    pub fn clear_progress(&mut self) {
        if self.progress_shown {
            eprint!("\r\x1b[2K");
            self.progress_shown = false;
        }
    }
}

impl Observer for Console {
    fn anomaly(&mut self, a: &Anomaly) {
        self.printed += 1;
        if self.printed > self.limit {
            return;
        }
        self.clear_progress();
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", anomaly_line(a));
        if self.printed == self.limit {
            let _ = writeln!(
                out,
                "(further anomaly lines suppressed; all are counted and saved)"
            );
        }
    }

    fn progress(&mut self, p: &Progress) {
        if !self.tty {
            return;
        }
        let secs = p.elapsed_ns as f64 / 1e9;
        eprint!(
            "\r\x1b[2K{secs:6.1}s  {:>9.0} interrupts/s  {:>9.0} migrations/s  {} anomalies  {} dropped",
            p.signals as f64 / secs.max(1e-9),
            p.moves as f64 / secs.max(1e-9),
            p.anomalies,
            p.dropped
        );
        self.progress_shown = true;
    }
}

/// The line printed before measuring.
pub fn banner(cfg: &RunConfig) -> String {
    let mut s = format!(
        "pmustress: {} workers on CPUs {}, event {}, period {}, skid {} ({}), migrate {}",
        cfg.workers,
        format_cpus(&cfg.cpus),
        cfg.event.description,
        cfg.period,
        cfg.skid,
        cfg.skid_source,
        cfg.migrate
            .to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_string())
    );
    if cfg.interrupt_skid != cfg.skid {
        let _ = write!(s, ", interrupt skid {}", cfg.interrupt_skid);
    }
    if cfg.migrate_interval_ns > 0 {
        let _ = write!(s, " every {} us", cfg.migrate_interval_ns / 1000);
    }
    if cfg.inject_drop_every.is_some() {
        s.push_str(", SELF-TEST: injected drops");
    }
    s
}

fn counts_row(label: &str, c: &Counts) -> String {
    let d = &c.deltas;
    let opt = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
    format!(
        "{label:<8} {:>10} {:>10} {:>10} {:>8} {:>8} {:>10} {:>10}  {}/{}/{}/{}",
        c.signals,
        c.kernel_samples,
        c.implied_overflows,
        c.dropped_interrupts,
        c.anomalies.values().sum::<u64>(),
        c.migrations_requested,
        c.migrations_kernel.map_or(c.cpu_changes, |k| k),
        opt(d.min),
        opt(d.p50),
        opt(d.p99),
        opt(d.max),
    )
}

/// The end-of-run summary.
pub fn summary(r: &RunResults) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<8} {:>10} {:>10} {:>10} {:>8} {:>8} {:>10} {:>10}  delta min/median/p99/max",
        "", "signals", "samples", "implied", "dropped", "anomal.", "moves", "migrated"
    );
    for w in &r.workers {
        let _ = writeln!(
            s,
            "{}",
            counts_row(&format!("worker {}", w.worker), &w.counts)
        );
        if let Some(st) = &w.stalled {
            let _ = writeln!(s, "         stalled: {st}");
        }
    }
    let _ = writeln!(s, "{}", counts_row("total", &r.totals));
    let t = &r.totals;
    if !t.anomalies.is_empty() {
        let _ = writeln!(s, "anomalies by kind:");
        for (kind, n) in &t.anomalies {
            let missed = t.missed_overflows.get(kind).copied().unwrap_or(0);
            let _ = writeln!(
                s,
                "  {kind:<22} {n:>8} windows, {missed:>8} missed overflows: {}",
                kind.advice()
            );
        }
    }
    let _ = writeln!(
        s,
        "accounting: {} implied by final counts = {} accounted by windows + {} in flight at stop ({} unaccounted); {} signals, {} kernel samples, {} injected",
        t.implied_overflows,
        t.accounted_overflows,
        t.tail_samples + t.overflows_at_stop,
        t.unaccounted_overflows,
        t.signals,
        t.kernel_samples,
        t.injected
    );
    if let Some(rate) = &t.dropped_rate
        && let (Some(pm), Some(lo), Some(hi)) = (
            rate.per_million,
            rate.ci_low_per_million,
            rate.ci_high_per_million,
        )
    {
        let _ = writeln!(
            s,
            "dropped rate: {pm:.3} per million overflows (95% CI {lo:.3} .. {hi:.3}, {}; {} of {})",
            rate.method, rate.events, rate.trials
        );
    }
    let secs = r.elapsed_ns as f64 / 1e9;
    let _ = writeln!(
        s,
        "rates: {:.0} interrupts/s, {:.0} migrations/s requested, {} CPU changes seen between signals, over {secs:.2} s",
        t.signals as f64 / secs.max(1e-9),
        t.migrations_requested as f64 / secs.max(1e-9),
        t.cpu_changes
    );
    for w in &r.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    for w in &r.inconclusive_because {
        let _ = writeln!(s, "inconclusive: {w}");
    }
    let verdict = match r.verdict {
        Verdict::Clean => "clean: no dropped interrupt".to_string(),
        Verdict::Dropped => format!(
            "DROPPED: {} overflow interrupts never happened{}",
            t.dropped_interrupts,
            if r.injected {
                " (injected self-test)"
            } else {
                ""
            }
        ),
        Verdict::Inconclusive => "inconclusive: see above".to_string(),
        Verdict::Interrupted => "interrupted: partial results".to_string(),
    };
    let _ = writeln!(s, "verdict: {verdict} (exit {})", r.exit_status);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn anomaly(kind: AnomalyKind) -> Anomaly {
        Anomaly {
            worker: 1,
            signal_seq: 2650640,
            time_ns: 0,
            delta: 20001,
            period: 10000,
            skid: 1000,
            kind,
            missed: 1,
            dropped: u64::from(kind == AnomalyKind::DroppedInterrupt),
            cpu_before: Some(3),
            cpu_after: 7,
            since_migration_ns: Some(14_200),
            kernel_samples: 1,
            injected: 0,
            interrupt_gap: Some(20_003),
        }
    }

    #[test]
    fn dropped_line_reads_like_a_maintainers_report() {
        assert_eq!(
            anomaly_line(&anomaly(AnomalyKind::DroppedInterrupt)),
            "worker 1 signal #2650640: delta 20001 outside 10000 +/- 1000 (1 dropped interrupt), cpu 3 -> 7, 14 us after migration, 1 kernel samples in window, largest gap between interrupts 20003"
        );
    }

    #[test]
    fn other_kinds_say_what_they_are() {
        let mut a = anomaly(AnomalyKind::CoalescedSignal);
        a.kernel_samples = 2;
        a.since_migration_ns = None;
        a.cpu_before = None;
        a.interrupt_gap = None;
        assert_eq!(
            anomaly_line(&a),
            "worker 1 signal #2650640: delta 20001 outside 10000 +/- 1000 (1 missed overflow: coalesced-signal), cpu 7, 2 kernel samples in window"
        );
        let mut a = anomaly(AnomalyKind::DroppedInterrupt);
        a.injected = 1;
        assert!(anomaly_line(&a).contains("(1 dropped interrupt, injected)"));
        a.delta = 10_500;
        a.kind = AnomalyKind::Late;
        assert!(anomaly_line(&a).contains("delta 10500 within 10000 +/- 1000 (late)"));
    }
}
