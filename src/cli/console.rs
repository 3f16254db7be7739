/*!
What people read while `pmustress run` runs: one line per anomaly in the
style maintainers already use, a live progress line on a terminal, and the
end-of-run summary. (`report::runs` is `pmustress report`, which reads
a finished run back.)
*/

use std::fmt::Write as _;
use std::io::Write;

use clap::ValueEnum;

use crate::config::{RunConfig, format_cpus};
use crate::engine::run::{Observer, Progress};
use crate::judge::{Anomaly, AnomalyKind, InterruptTotals};
use crate::results::schema::{AnomalyRecord, Counts, RunResults, Verdict};

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
    goal: Goal,
}

impl Console {
    pub fn new(limit: u64, goal: Goal) -> Console {
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
            goal,
        }
    }

    /// Queues a line for stdout (wrapped to `WIDTH`); dropped (and
    /// counted) if the queue is full.
    pub fn say(&mut self, line: String) {
        let mut text = fit(&line);
        text.pop();
        self.send(Line::Out(text));
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
            writeln!(
                out,
                "{}",
                crate::report::format::escape::escape_controls(&text)
            )
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

/// Whether an anomaly of this kind can change the verdict (a drop, or
/// what makes a run inconclusive): only those get a line of their own
/// while the run goes on. The others (late interrupts, software timer
/// skips, coalesced or late signals...) are counted by kind in the summary
/// and listed in anomalies.csv: a clean run's console stays short.
pub fn gets_a_line(kind: AnomalyKind) -> bool {
    matches!(
        kind,
        AnomalyKind::DroppedInterrupt
            | AnomalyKind::Ambiguous
            | AnomalyKind::WitnessLost
            | AnomalyKind::UnmatchedSignal
            | AnomalyKind::Unexplained
            | AnomalyKind::ToolError
    )
}

/// The widest console line: longer ones are wrapped between words, their
/// continuation indented (`fit`).
pub use crate::report::format::text::{TERMINAL_WIDTH as WIDTH, fit};

/// What the progress line counts towards, besides the time.
#[derive(Debug, Clone, Copy, Default)]
pub struct Goal {
    /// --duration, in seconds.
    pub seconds: Option<f64>,
    /// Bisect mode: the overflows and witnessed stops a good verdict needs.
    pub overflows: Option<u64>,
    pub stops: Option<u64>,
}

impl Goal {
    pub fn of(cfg: &RunConfig) -> Goal {
        Goal {
            seconds: cfg.duration_ns.map(|ns| ns as f64 / 1e9),
            overflows: cfg.bisect.as_ref().map(|b| b.overflows_needed),
            stops: cfg.bisect.as_ref().map(|b| b.stops_needed),
        }
    }
}

/// The live line: "3.1s of 10s" (or "of --interrupts" time unknown), the
/// rates, and in bisect mode the overflows and stops against what a good
/// verdict needs.
pub fn progress_line(p: &Progress, goal: &Goal) -> String {
    let secs = p.elapsed_ns as f64 / 1e9;
    let per_s = |n: u64| n as f64 / secs.max(1e-9);
    let mut s = match goal.seconds {
        Some(total) => format!("{secs:.1}s of {total:.0}s"),
        None => format!("{secs:.1}s"),
    };
    if let Some(need) = goal.overflows {
        let _ = write!(s, "  overflows {}/{need}", p.overflows);
    }
    if let Some(need) = goal.stops {
        let _ = write!(s, "  stops {}/{need}", p.stops);
    }
    let _ = write!(
        s,
        "  {:.0} interrupts/s  {:.0} stops/s",
        per_s(p.signals),
        per_s(p.stops)
    );
    // Bisect mode's counts take the room of the moves (a terminal line
    // that wraps is not redrawn in place).
    if goal.overflows.is_none() {
        let _ = write!(s, "  {:.0} moves/s", per_s(p.moves));
    }
    let _ = write!(s, "  {} anomalies  {} dropped", p.anomalies, p.dropped);
    s
}

impl Observer for Console {
    fn anomaly(&mut self, a: &Anomaly) {
        if !gets_a_line(a.kind) {
            return;
        }
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
        self.send(Line::Progress(progress_line(p, &self.goal)));
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
    s.push_str(&cfg.interrupt_skid_words());
    // --migrate none moves nothing: no interval to print.
    if cfg.migrate_interval_ns > 0 && cfg.migrate != crate::domain::MigrateMode::None {
        let _ = write!(s, " every {} us", cfg.migrate_interval_ns / 1000);
    }
    if cfg.inject_drop_every.is_some() {
        s.push_str(", SELF-TEST: injected drops");
    }
    s
}

/// A worker's line in the summary, when it has something of its own to
/// say (a drop, a stall): the per-worker counts of a run that went well
/// are in run.json, not on the console.
fn worker_line(w: &crate::results::schema::WorkerEntry) -> Option<String> {
    let c: &Counts = &w.counts;
    let mut parts = Vec::new();
    if c.dropped_interrupts > 0 {
        parts.push(format!(
            "{} dropped in {} overflows",
            c.dropped_interrupts, c.accounted_overflows
        ));
    }
    if let Some(st) = &w.stalled {
        parts.push(format!("stalled: {st}"));
    }
    (!parts.is_empty()).then(|| format!("worker {}: {}", w.worker, parts.join("; ")))
}

/// Where every overflow and every signal went, in two lines (`pmustress
/// replay DIR` prints the whole accounting).
fn where_they_went(t: &Counts, elapsed_ns: u64) -> String {
    let i = &t.interrupts;
    let d = &t.deliveries;
    let mut s = format!(
        "overflows: {} = {} interrupts ({} late, {} a period or more late) + {} dropped",
        i.overflows, i.samples, i.late, i.rebased_in_handler, i.dropped
    );
    if i.injected > 0 {
        let _ = write!(s, " ({} injected)", i.injected);
    }
    let _ = write!(
        s,
        " + {} ambiguous + {} in ring gaps, in {:.2} s",
        i.ambiguous,
        i.record_lost,
        elapsed_ns as f64 / 1e9
    );
    if i.count_wraps > 0 {
        let _ = write!(s, "; {} count wraps", i.count_wraps);
    }
    match t.implied_overflows {
        Some(n) if n != t.accounted_overflows => {
            let _ = write!(s, "; the final counts imply {n}: MISMATCH");
        }
        _ => {}
    }
    let _ = writeln!(
        s,
        "\nsignals: {} ({} late, {} without a sample record), {} coalesced, {} SIGIO, {} unmatched; throttled {}",
        d.signals, d.late, d.unrecorded, d.coalesced, d.sigio, d.unmatched, i.throttled
    );
    s
}

/// The end-of-run summary, every line at most `WIDTH` columns: the
/// answers (lost and spurious interrupts with their intervals), workers
/// with something of their own to say, where every overflow and signal
/// went, the stress, the anomalies by kind (each once, with what it
/// means), warnings, and the verdict.
pub fn summary(r: &RunResults) -> String {
    let mut s = String::new();
    let t = &r.totals;
    crate::report::format::text::answers_into(&mut s, &crate::report::answers::answers(t));
    for line in r.workers.iter().filter_map(worker_line) {
        let _ = writeln!(s, "{line}");
    }
    s.push_str(&where_they_went(t, r.elapsed_ns));
    let l = &t.interrupt_latency;
    if let (Some(p50), Some(p99), Some(p999), Some(max)) = (l.p50, l.p99, l.p999, l.max) {
        let _ = writeln!(
            s,
            "interrupt latency (periods past the due point): p50 {p50:.4}, p99 {p99:.4}, p99.9 {p999:.4}, max {max:.4}"
        );
    }
    if let (Some(x), Some(t)) = (&r.stress, &r.totals.stress) {
        let _ = writeln!(s, "stress: {}", x.describe(t));
    }
    if !t.anomalies.is_empty() {
        // Each kind once: what the verdict turns on with what it means,
        // the rest by count (anomalies.csv has every one).
        let mut quiet = Vec::new();
        for kind in AnomalyKind::ALL {
            if let Some(n) = t.anomalies.get(kind.name()) {
                if gets_a_line(kind) {
                    let _ = writeln!(s, "{kind}: {n} windows: {}", advice(kind, t));
                } else if kind == AnomalyKind::SoftwareTimerSkip {
                    // A row per interrupt that skipped periods; the
                    // warning counts the periods: say which is which.
                    quiet.push(format!(
                        "{kind} {n} (interrupts that skipped {} periods)",
                        t.interrupts.timer_skips
                    ));
                } else {
                    quiet.push(format!("{kind} {n}"));
                }
            }
        }
        if !quiet.is_empty() {
            let _ = writeln!(
                s,
                "other anomalies (none changes the verdict; all in anomalies.csv): {}",
                quiet.join(", ")
            );
        }
    }
    for w in &r.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    for w in &r.inconclusive_because {
        let _ = writeln!(s, "inconclusive: {w}");
    }
    let i = &t.interrupts;
    let verdict = match r.verdict {
        Verdict::Clean => format!(
            "clean: no dropped interrupt in {} overflows{}",
            t.accounted_overflows,
            r.stress
                .as_ref()
                .map_or_else(String::new, |x| format!(" and {}", x.sensitivity_words()))
        ),
        Verdict::Dropped => format!(
            "DROPPED: {} {} never happened",
            t.dropped_interrupts,
            if t.dropped_interrupts == 1 {
                "overflow interrupt"
            } else {
                "overflow interrupts"
            }
        ),
        Verdict::SelfTestPassed => format!(
            "self-test PASS: found {} of {} injected drops and nothing else: the detector works",
            i.injected_found, i.injected
        ),
        Verdict::SelfTestFailed => format!("self-test FAIL: {}", self_test_failure(i)),
        Verdict::Inconclusive => "inconclusive: see above".to_string(),
        Verdict::Interrupted => "interrupted: partial results".to_string(),
        Verdict::Incomplete => "incomplete: no verdict".to_string(),
    };
    let _ = writeln!(s, "verdict: {verdict} (exit {})", r.exit_status);
    fit(&s)
}

/// What a kind of anomaly means in this run: a self-test's drops are
/// ours, not the kernel's, and the line says how many.
fn advice(kind: AnomalyKind, t: &Counts) -> String {
    if kind != AnomalyKind::DroppedInterrupt || t.injected == 0 {
        return kind.advice().to_string();
    }
    if t.injected == t.dropped_interrupts {
        format!(
            "every drop injected: {} overflows discarded on purpose (--inject-drop-every)",
            t.injected
        )
    } else {
        format!(
            "{} of the {} drops injected (--inject-drop-every); the others: {}",
            t.injected,
            t.dropped_interrupts,
            kind.advice()
        )
    }
}

/// Why a self-test failed: the injected drops it missed, or the drops it
/// found that were not injected.
pub fn self_test_failure(i: &InterruptTotals) -> String {
    // The count the verdict read (`verdict::certain_drops`), not every
    // drop under every explanation.
    let found = crate::verdict::certain_drops(i);
    let other = found.saturating_sub(i.injected_found);
    let mut parts = Vec::new();
    if i.injected_found < i.injected {
        parts.push(format!(
            "found {} of {} injected drops: the detector missed {}",
            i.injected_found,
            i.injected,
            i.injected - i.injected_found
        ));
    }
    if other > 0 {
        parts.push(format!(
            "{other} {} not injected: the kernel lost {} or the judge is wrong (see the anomalies)",
            if other == 1 { "drop was" } else { "drops were" },
            if other == 1 { "it" } else { "them" }
        ));
    }
    if parts.is_empty() {
        parts.push(format!("found {found} drops for {} injected", i.injected));
    }
    parts.join("; ")
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

    /// The anomaly count (a row per interrupt that skipped periods) and
    /// the periods skipped are two numbers: the summary says which is
    /// which, beside the warning that counts the periods.
    #[test]
    fn timer_skips_say_interrupts_and_periods_apart() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/results/task-clock-clean");
        let crate::results::reader::RunDocument::Finished(mut run) =
            crate::results::loaded::LoadedRun::load(&dir).unwrap().run
        else {
            panic!("the fixture is a finished run");
        };
        run.totals.interrupts.timer_skips = 33;
        let rows = run.totals.anomalies["software-timer-skip"];
        let text = summary(&run).replace("\n    ", " ");
        assert!(
            text.contains(&format!(
                "software-timer-skip {rows} (interrupts that skipped 33 periods)"
            )),
            "{text}"
        );
    }

    /// The live line says how far the run is: the time of the total, and
    /// in bisect mode the overflows and stops of those needed.
    #[test]
    fn the_progress_line_counts_towards_the_goal() {
        let p = Progress {
            elapsed_ns: 3_100_000_000,
            signals: 31_000,
            anomalies: 2,
            dropped: 0,
            moves: 3_100,
            overflows: 31_000,
            stops: 620,
            held: Default::default(),
        };
        let timed = Goal {
            seconds: Some(10.0),
            ..Goal::default()
        };
        assert_eq!(
            progress_line(&p, &timed),
            "3.1s of 10s  10000 interrupts/s  200 stops/s  1000 moves/s  2 anomalies  0 dropped"
        );
        let bisect = Goal {
            seconds: None,
            overflows: Some(46_050),
            stops: Some(4_603),
        };
        let line = progress_line(&p, &bisect);
        assert!(
            line.starts_with("3.1s  overflows 31000/46050  stops 620/4603  "),
            "{line}"
        );
        assert!(line.len() <= WIDTH, "{line}");
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
