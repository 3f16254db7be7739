/*!
What people read while `pmustress run` runs: one line per anomaly in the
style maintainers already use, a live progress line on a terminal, and the
end-of-run summary. (`evidence::report` is `pmustress report`, which reads
a finished run back.)
*/

use std::fmt::Write as _;
use std::io::Write;

use clap::ValueEnum;

use crate::config::{RunConfig, format_cpus};
use crate::engine::run::{Observer, Progress};
use crate::evidence::accounting::accounting;
use crate::evidence::results::{AnomalyRecord, Counts, RunResults, Verdict};
use crate::judge::{Anomaly, AnomalyKind};

/// `worker 1: dropped interrupt: interrupts 20003 apart (2.00 periods of
/// 10000), cpu 3 -> 7, 14 us after migration, after signal #2650640`
pub fn anomaly_line(a: &Anomaly) -> String {
    let periods = |n: u64| n as f64 / a.period.max(1) as f64;
    let record = AnomalyRecord::from(a);
    let mut line = format!("worker {}: {}", a.worker, a.kind.name().replace('-', " "));
    match a.kind {
        AnomalyKind::DroppedInterrupt
        | AnomalyKind::Ambiguous
        | AnomalyKind::LateInterrupt
        | AnomalyKind::SoftwareTimerSkip
        | AnomalyKind::Unexplained => {
            if a.missed > 1 {
                let _ = write!(line, " x{}", a.missed);
            }
            if a.injected > 0 {
                line.push_str(" (injected)");
            }
            if let Some(gap) = a.interrupt_gap {
                let _ = write!(
                    line,
                    ": {} ({:.2} periods of {})",
                    record.gap_text(gap),
                    periods(gap),
                    a.period
                );
            }
        }
        AnomalyKind::LateSignal => {
            let _ = write!(
                line,
                ": read {} past its interrupt ({:.2} periods of {})",
                a.delta,
                periods(a.delta),
                a.period
            );
        }
        _ => {}
    }
    let cpus = record.cpus();
    if !cpus.is_empty() {
        let _ = write!(line, ", {cpus}");
    }
    if let Some(ns) = a.since_migration_ns {
        let _ = write!(line, ", {} us after migration", ns / 1000);
    }
    if a.signal_seq > 0 {
        let _ = write!(line, ", after signal #{}", a.signal_seq);
    }
    line
}

/// What the console thread writes.
enum Line {
    /// A line to stdout.
    Out(String),
    /// The progress line on stderr (a terminal), redrawn in place.
    Progress(String),
    /// Clears the progress line.
    Clear,
}

/// How many lines wait for the console thread before more are dropped
/// (counted): a blocked stdout must not hold up the run.
const QUEUED_LINES: usize = 1024;

/// What the console thread could not do: the first failed write to stdout
/// (a reader that went away is not one).
type Failure = Option<std::io::Error>;

/// Prints anomaly lines to stdout (up to a limit) and a progress line to
/// stderr when it is a terminal, from a thread of its own: the run loop
/// only queues lines (dropping, and counting, what a blocked stdout cannot
/// take), so a full pipe or a stopped terminal never delays a stop.
pub struct Console {
    tty: bool,
    printed: u64,
    limit: u64,
    progress_shown: bool,
    queue: Option<std::sync::mpsc::SyncSender<Line>>,
    thread: Option<std::thread::JoinHandle<Failure>>,
    /// Lines dropped because the queue was full.
    dropped: u64,
}

impl Console {
    pub fn new(limit: u64) -> Console {
        let (queue, lines) = std::sync::mpsc::sync_channel(QUEUED_LINES);
        let thread = std::thread::Builder::new()
            .name("console".into())
            .spawn(move || write_lines(&lines));
        // Without a thread, lines are written at once (and may block).
        let (queue, thread) = match thread {
            Ok(t) => (Some(queue), Some(t)),
            Err(_) => (None, None),
        };
        Console {
            tty: crate::engine::kernel::stderr_is_tty(),
            printed: 0,
            limit,
            progress_shown: false,
            queue,
            thread,
            dropped: 0,
        }
    }

    /// Queues a line for stdout; dropped (and counted) if the queue is full.
    pub fn say(&mut self, line: String) {
        self.send(Line::Out(line));
    }

    fn send(&mut self, line: Line) {
        let Some(queue) = &self.queue else {
            write_line(line, &mut None);
            return;
        };
        match queue.try_send(line) {
            Ok(()) => {}
            Err(std::sync::mpsc::TrySendError::Full(Line::Out(_))) => self.dropped += 1,
            Err(_) => {}
        }
    }

    /// Clears the progress line before anything else is printed.
    pub fn clear_progress(&mut self) {
        if self.progress_shown {
            self.send(Line::Clear);
            self.progress_shown = false;
        }
    }

    /// Waits until every queued line is written (this may block on a
    /// blocked stdout: call it once the run's results are saved) and
    /// returns how many lines were dropped and the first failed write.
    pub fn finish(mut self) -> (u64, Failure) {
        self.clear_progress();
        drop(self.queue.take());
        let failure = self.thread.take().and_then(|t| t.join().ok()).flatten();
        (self.dropped, failure)
    }
}

/// The console thread: writes lines until the queue closes.
fn write_lines(lines: &std::sync::mpsc::Receiver<Line>) -> Failure {
    // Overflow signals go to workers only (`engine::signal`).
    let _ = crate::engine::kernel::set_signal_mask(&crate::engine::signal::worker_signals(), true);
    let mut failure = None;
    for line in lines {
        write_line(line, &mut failure);
    }
    failure
}

fn write_line(line: Line, failure: &mut Failure) {
    let result = match line {
        Line::Out(text) => {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{}", crate::evidence::report::escape_controls(&text))
                .and_then(|()| out.flush())
        }
        // The progress line is a courtesy: a failed write is not recorded.
        Line::Progress(text) => {
            let _ = write!(std::io::stderr(), "\r\x1b[2K{text}");
            Ok(())
        }
        Line::Clear => {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
            Ok(())
        }
    };
    if let Err(e) = result
        && e.kind() != std::io::ErrorKind::BrokenPipe
        && failure.is_none()
    {
        *failure = Some(e);
    }
}

impl Observer for Console {
    fn anomaly(&mut self, a: &Anomaly) {
        self.printed += 1;
        if self.printed > self.limit {
            return;
        }
        self.clear_progress();
        self.say(anomaly_line(a));
        if self.printed == self.limit {
            self.say("(further anomaly lines suppressed; all are counted and saved)".to_string());
        }
    }

    fn progress(&mut self, p: &Progress) {
        if !self.tty {
            return;
        }
        let secs = p.elapsed_ns as f64 / 1e9;
        self.send(Line::Progress(format!(
            "{secs:6.1}s  {:>8.0} interrupts/s  {:>7.0} stops/s  {:>8.0} moves/s  {} anomalies  {} dropped",
            p.signals as f64 / secs.max(1e-9),
            p.stops as f64 / secs.max(1e-9),
            p.moves as f64 / secs.max(1e-9),
            p.anomalies,
            p.dropped
        )));
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
        "{label:<8} {:>9} {:>9} {:>8} {:>8} {:>8} {:>9} {:>9}  {}/{}/{}/{}",
        c.signals,
        c.kernel_samples,
        c.dropped_interrupts,
        c.ambiguous,
        c.interrupts.rebased_in_handler,
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
        "{:<8} {:>9} {:>9} {:>8} {:>8} {:>8} {:>9} {:>9}  delta min/median/p99/max",
        "", "signals", "samples", "dropped", "ambig.", "late>=P", "moves", "migrated"
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
    let i = &t.interrupts;
    let d = &t.deliveries;
    if !t.anomalies.is_empty() {
        let _ = writeln!(s, "anomalies by kind:");
        // In the judge's order of kinds, with what each means.
        for kind in AnomalyKind::ALL {
            if let Some(n) = t.anomalies.get(kind.name()) {
                let _ = writeln!(s, "  {kind:<22} {n:>8}: {}", kind.advice());
            }
        }
    }
    let implied = match t.implied_overflows {
        Some(n) if n == t.accounted_overflows => {
            format!("; the final counts imply {n}, as they should")
        }
        Some(n) => format!("; the final counts imply {n}: MISMATCH"),
        None => String::new(),
    };
    s.push_str(&accounting(i, d, &implied));
    let l = &t.interrupt_latency;
    if let (Some(p50), Some(p99), Some(p999), Some(max)) = (l.p50, l.p99, l.p999, l.max) {
        let _ = writeln!(
            s,
            "interrupt latency (periods past the due point): p50 {p50:.4}, p99 {p99:.4}, p99.9 {p999:.4}, max {max:.4} over {} interrupts",
            l.count
        );
    }
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
    if let (Some(x), Some(t)) = (&r.stress, &r.totals.stress) {
        let _ = writeln!(s, "stress: {}", x.describe(t));
    }
    for w in &r.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    for w in &r.inconclusive_because {
        let _ = writeln!(s, "inconclusive: {w}");
    }
    let verdict = match r.verdict {
        Verdict::Clean => format!(
            "clean: no dropped interrupt in {} overflows{}",
            t.accounted_overflows,
            r.stress
                .as_ref()
                .map_or_else(String::new, |x| format!(" and {}", x.sensitivity_words()))
        ),
        Verdict::Dropped => format!(
            "DROPPED: {} {} never happened{}",
            t.dropped_interrupts,
            if t.dropped_interrupts == 1 {
                "overflow interrupt"
            } else {
                "overflow interrupts"
            },
            if r.injected {
                " (injected self-test)"
            } else {
                ""
            }
        ),
        Verdict::Inconclusive => "inconclusive: see above".to_string(),
        Verdict::Interrupted => "interrupted: partial results".to_string(),
        Verdict::Incomplete => "incomplete: no verdict".to_string(),
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
            delta: 20003,
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
            "worker 1: dropped interrupt: interrupts 20003 apart (2.00 periods of 10000), cpu 3 -> 7, 14 us after migration, after signal #2650640"
        );
    }

    #[test]
    fn other_kinds_say_what_they_are() {
        let mut a = anomaly(AnomalyKind::CoalescedSignal);
        a.since_migration_ns = None;
        a.cpu_before = None;
        a.interrupt_gap = None;
        assert_eq!(
            anomaly_line(&a),
            "worker 1: coalesced signal, cpu 7, after signal #2650640"
        );
        let mut a = anomaly(AnomalyKind::DroppedInterrupt);
        a.injected = 1;
        a.interrupt_gap = Some(10_001);
        assert!(anomaly_line(&a).contains(
            "dropped interrupt (injected): discarded 10001 after the interrupt before it (1.00 periods"
        ));
        a.kind = AnomalyKind::LateSignal;
        a.delta = 15_000;
        assert!(
            anomaly_line(&a)
                .contains("late signal: read 15000 past its interrupt (1.50 periods of 10000)")
        );
    }
}
