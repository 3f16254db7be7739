/*!
`pmustress replay`: judge a recorded observation stream again.

A results directory's `raw.csv.gz` holds every observation the judge saw, in
order, and its `run.json` (the final one, or the one a killed run left)
holds the judge's settings. Replaying runs the current judge over that
stream and compares what it finds with what the run recorded: the same code
on the same stream must give the same totals and verdict, so a difference is
a change in the judge (or a bug) that the replay names field by field.

A bare stream (`replay FILE --period N --pmu|--software ...`) is judged
with the settings given on the command line; what counted it is never
assumed. Nothing is written unless asked.

The stream is read as it was written: gzip members one after another, each
whole; a run killed mid-write leaves a partial last member, which is
reported and skipped, so everything before it still replays. Anything else
is refused: a file that is not regular, a `.gz` that is not gzip, bytes
after the last member that start no member, an overlong line.
*/

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::Serialize;
use serde_json::Value;

use crate::judge::{
    Anomaly, ClosedWindow, DeliveryTotals, InterruptTotals, JudgeConfig, StreamJudge, StressTotals,
};
use crate::records::{HEADER, Row};
use crate::report::format::markup::{Markup, Report};
use crate::report::format::text::fit;
use crate::results::reader::verdict_name;
use crate::results::schema::Counts;
use crate::stats::Rate;
use crate::verdict::counts::Verdict;
use crate::verdict::{Evidence, Reason, Settings, coincidences, decide, with_the_run};

/// The longest line read from a stream: a row is under 200 bytes, so a
/// longer one is not a stream pmustress wrote (a 300 MB line was held
/// whole).
pub const MAX_STREAM_LINE: u64 = 64 << 10;

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Reads a stream, gzip (one or more members) or plain CSV, and hands each
/// observation to `row` as it is read: a day-long run's stream replays in
/// the memory of its judges, not of its rows. Returns why reading stopped
/// before the end of the file, if it did.
///
/// Only a regular file is read (a FIFO or a device is refused without
/// waiting on it), a `.gz` file must be gzip, and what follows the last
/// whole member must be the start of one (a member cut short by a kill),
/// not anything else.
pub fn read_stream(path: &Path, row: impl FnMut(Row)) -> Result<Option<String>> {
    let (file, _) = crate::results::reader::open_regular(path)?;
    let name = path.display().to_string();
    let mut input = BufReader::new(file);
    let head = input
        .fill_buf()
        .with_context(|| format!("reading {name}"))?;
    let gzip = head.starts_with(&GZIP_MAGIC);
    if !head.is_empty() && !gzip && path.extension().is_some_and(|x| x == "gz") {
        bail!(
            "{name} is not gzip (it does not start with the bytes 1f 8b): not a stream pmustress wrote"
        );
    }
    if gzip {
        parse_stream(
            BufReader::new(Members {
                part: Some(Part::Between(input)),
            }),
            &name,
            row,
        )
    } else {
        parse_stream(input, &name, row)
    }
}

/// What follows the last whole gzip member and is not the start of
/// another.
#[derive(Debug, thiserror::Error)]
#[error(
    "{0} bytes after the last whole gzip member are not gzip (from byte {1}): not what pmustress writes"
)]
struct NotGzip(u64, u64);

enum Part {
    Between(BufReader<std::fs::File>),
    In(flate2::bufread::GzDecoder<BufReader<std::fs::File>>),
}

/// The decompressed bytes of gzip members one after another (each
/// consumes exactly its own bytes), refusing anything between or after
/// them that does not start a member.
struct Members {
    part: Option<Part>,
}

impl Read for Members {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::io::Seek as _;
        loop {
            match self.part.take() {
                None => return Ok(0),
                Some(Part::In(mut member)) => match member.read(buf) {
                    Ok(0) if !buf.is_empty() => {
                        self.part = Some(Part::Between(member.into_inner()));
                    }
                    result => {
                        self.part = Some(Part::In(member));
                        return result;
                    }
                },
                Some(Part::Between(mut input)) => {
                    let head = input.fill_buf()?;
                    // A lone 0x1f at the end: a member cut after its
                    // first byte, which the decoder reports as cut short.
                    let member = head.starts_with(&GZIP_MAGIC) || head == [0x1f];
                    if head.is_empty() || !member {
                        let garbage = (!head.is_empty()).then(|| {
                            let at = input.stream_position().unwrap_or(0);
                            let len = input.get_ref().metadata().map_or(0, |m| m.len());
                            NotGzip(len.saturating_sub(at), at)
                        });
                        self.part = Some(Part::Between(input));
                        return match garbage {
                            Some(g) => Err(std::io::Error::new(std::io::ErrorKind::InvalidData, g)),
                            None => Ok(0),
                        };
                    }
                    self.part = Some(Part::In(flate2::bufread::GzDecoder::new(input)));
                }
            }
        }
    }
}

fn parse_stream(
    mut reader: impl BufRead,
    name: &str,
    mut row: impl FnMut(Row),
) -> Result<Option<String>> {
    let mut line = Vec::new();
    for i in 0.. {
        line.clear();
        let read = (&mut reader)
            .take(MAX_STREAM_LINE + 1)
            .read_until(b'\n', &mut line);
        // A line cut by the end of a partial member is an error here: only
        // whole lines are judged.
        match read {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.get_ref().is_some_and(|inner| inner.is::<NotGzip>()) => {
                bail!("{name}: {e}")
            }
            Err(e) => return Ok(Some(format!("{name}: stopped after line {i}: {e}"))),
        }
        if line.last() == Some(&b'\n') {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        } else if line.len() as u64 > MAX_STREAM_LINE {
            bail!(
                "{name}: line {} is longer than {MAX_STREAM_LINE} bytes: not a stream pmustress wrote",
                i + 1
            );
        }
        let Ok(line) = std::str::from_utf8(&line) else {
            bail!("{name}: line {} is not UTF-8 text", i + 1);
        };
        if i == 0 {
            if line.trim_end() != HEADER {
                bail!("{name}: the first line is not the header {HEADER:?}");
            }
            continue;
        }
        if line.is_empty() {
            continue;
        }
        match line.parse::<Row>() {
            // One judge per worker: a number past what a run can have
            // would make the judges, not the rows, the memory.
            Ok(r) if r.worker >= crate::engine::signal::MAX_WORKERS => bail!(
                "{name}: line {}: worker {} (a run has at most {} workers)",
                i + 1,
                r.worker,
                crate::engine::signal::MAX_WORKERS
            ),
            Ok(r) => row(r),
            Err(e) => bail!("{name}: line {}: {e}", i + 1),
        }
    }
    Ok(None)
}

/// What a replay found, per worker and in total.
#[derive(Debug, Clone, Serialize)]
pub struct Replayed {
    pub workers: BTreeMap<usize, (InterruptTotals, DeliveryTotals)>,
    pub interrupts: InterruptTotals,
    pub deliveries: DeliveryTotals,
    /// Stops, moves and stop positions, per worker and in total.
    pub worker_stress: BTreeMap<usize, StressTotals>,
    pub stress: StressTotals,
    pub expected_coincidences: f64,
    /// Why the stream itself makes the run inconclusive.
    pub inconclusive_because: Vec<Reason>,
    pub verdict: &'static str,
    pub exit_status: i32,
    /// The same verdict, for the rule that adds the run's own reasons.
    #[serde(skip)]
    pub decision: Verdict,
}

/// Judges a stream row by row, one judge per worker.
pub struct Replay {
    cfg: JudgeConfig,
    judges: BTreeMap<usize, StreamJudge>,
    windows: Vec<ClosedWindow>,
    anomalies: Vec<Anomaly>,
}

impl Replay {
    pub fn new(cfg: JudgeConfig) -> Replay {
        Replay {
            cfg,
            judges: BTreeMap::new(),
            windows: Vec::new(),
            anomalies: Vec::new(),
        }
    }

    pub fn row(&mut self, row: &Row) {
        let cfg = self.cfg;
        self.judges
            .entry(row.worker)
            .or_insert_with(|| StreamJudge::new(row.worker, cfg))
            .observe(&row.observation, &mut self.windows, &mut self.anomalies);
        self.windows.clear();
        self.anomalies.clear();
    }

    /// The totals and the verdict the stream gives.
    pub fn finish(self) -> Replayed {
        let cfg = self.cfg;
        let judges = self.judges;
        let mut interrupts = InterruptTotals::default();
        let mut deliveries = DeliveryTotals::default();
        let mut workers = BTreeMap::new();
        let mut stress = StressTotals::default();
        let mut worker_stress = BTreeMap::new();
        for (w, j) in judges {
            interrupts.add(j.interrupts());
            deliveries.add(j.deliveries());
            workers.insert(w, (j.interrupts().clone(), j.deliveries().clone()));
            let s = j.verdict().stress;
            stress.add(&s);
            worker_stress.insert(w, s);
        }
        let expected = coincidences(&interrupts, cfg.interrupt_skid, cfg.period);
        let decision = decide(
            &Evidence::stream(&interrupts, &deliveries, expected, Some(&stress)),
            &Settings::of_stream(&cfg),
        );
        Replayed {
            workers,
            interrupts,
            deliveries,
            worker_stress,
            stress,
            expected_coincidences: expected,
            inconclusive_because: decision.reasons,
            verdict: verdict_name(decision.verdict),
            exit_status: decision.exit_status,
            decision: decision.verdict,
        }
    }
}

/// Judges the stream in `path` with `cfg`; also why it ended early, if it
/// did.
pub fn judge_file(path: &Path, cfg: JudgeConfig) -> Result<(Replayed, Option<String>)> {
    let mut replay = Replay::new(cfg);
    let truncated = read_stream(path, |row| replay.row(&row))?;
    Ok((replay.finish(), truncated))
}

/// A results directory replayed against its own run.json.
pub struct DirReplay {
    pub replayed: Replayed,
    pub truncated: Option<String>,
    /// Fields where the replay and run.json differ: (field, run, replay).
    pub differences: Vec<(String, String, String)>,
    /// The run's verdict and status, as run.json has them.
    pub run_verdict: String,
    pub run_exit_status: Option<i64>,
    /// The verdict the replay gives the run: the stream's judgement plus
    /// run.json's reasons that do not come from the stream (a stalled
    /// worker, an interruption).
    pub verdict: String,
    pub exit_status: i32,
}

pub fn replay_dir(dir: &Path) -> Result<DirReplay> {
    // The same reading as every reader's: a file report refuses is refused.
    let run = crate::results::reader::read(dir)?;
    let cfg: JudgeConfig = *run.judge().context(
        "run.json has no \"judge\" settings (written by pmustress before replay existed?)",
    )?;
    let (replayed, truncated) = judge_file(&dir.join("raw.csv.gz"), cfg)?;
    let mut differences = Vec::new();
    let finished = run.finished();
    if let Some(recorded) = run.results() {
        let t = &recorded.totals;
        compare(
            "totals.interrupts",
            &t.interrupts,
            &replayed.interrupts,
            &mut differences,
        );
        compare(
            "totals.deliveries",
            &t.deliveries,
            &replayed.deliveries,
            &mut differences,
        );
        summary_fields(
            "totals",
            t,
            &replayed.interrupts,
            &replayed.deliveries,
            &mut differences,
        );
        // Runs recorded before stops were counted have no stress to check.
        if let Some(stress) = &t.stress {
            compare("totals.stress", stress, &replayed.stress, &mut differences);
        }
        for w in &recorded.workers {
            if let Some(stress) = &w.counts.stress {
                let mine = replayed
                    .worker_stress
                    .get(&w.worker)
                    .cloned()
                    .unwrap_or_default();
                compare(
                    &format!("workers[{}].stress", w.worker),
                    stress,
                    &mine,
                    &mut differences,
                );
            }
            let n = w.worker;
            let mine = replayed.workers.get(&n);
            let empty = (InterruptTotals::default(), DeliveryTotals::default());
            let (i, d) = mine.unwrap_or(&empty);
            compare(
                &format!("workers[{n}].interrupts"),
                &w.counts.interrupts,
                i,
                &mut differences,
            );
            compare(
                &format!("workers[{n}].deliveries"),
                &w.counts.deliveries,
                d,
                &mut differences,
            );
            summary_fields(&format!("workers[{n}]"), &w.counts, i, d, &mut differences);
        }
    }
    let run_verdict = crate::results::reader::verdict_name(run.verdict()).to_string();
    let run_exit_status = run.exit_status().map(i64::from);
    // run.json's reasons that the stream does not give: those the run's own
    // totals would not produce either (compared as words: run.json holds
    // its reasons as written).
    let stream_words: Vec<String> = match run.totals() {
        Some(t) => decide(
            &Evidence::stream(
                &t.interrupts,
                &t.deliveries,
                t.expected_coincidences,
                t.stress.as_ref(),
            ),
            &Settings::of_stream(&cfg),
        )
        .reasons
        .iter()
        .map(Reason::to_string)
        .collect(),
        None => Vec::new(),
    };
    let other = run
        .inconclusive_because()
        .iter()
        .any(|r| !stream_words.contains(&r.to_string()));
    // The rule itself, with the run's interruption (if it was one) and
    // the run's own reasons added to the stream's.
    let interrupted = match (run_verdict.as_str(), run_exit_status) {
        ("interrupted", Some(s)) => Some(crate::domain::StopReason::Signal(s as i32 - 128)),
        _ => None,
    };
    let (verdict, exit_status) =
        with_the_run(replayed.decision, interrupted.as_ref(), other || !finished);
    let verdict = verdict_name(verdict).to_string();
    if finished && verdict != run_verdict {
        differences.push(("verdict".to_string(), run_verdict.clone(), verdict.clone()));
    }
    Ok(DirReplay {
        replayed,
        truncated,
        differences,
        run_verdict,
        run_exit_status,
        verdict,
        exit_status,
    })
}

/// The counts run.json also holds outside `interrupts` and `deliveries`,
/// where `report`, `compare` and `--baseline` read them
/// (`accounted_overflows`, `dropped_interrupts`, `dropped_rate`...):
/// each against the replay's. An edited `dropped_interrupts` replayed as
/// "the same totals" while the nested ones were compared alone.
fn summary_fields(
    name: &str,
    recorded: &Counts,
    i: &InterruptTotals,
    d: &DeliveryTotals,
    out: &mut Vec<(String, String, String)>,
) {
    let ours = [
        ("signals", recorded.signals, d.signals),
        ("sigio", recorded.sigio, d.sigio),
        ("kernel_samples", recorded.kernel_samples, i.samples),
        (
            "accounted_overflows",
            recorded.accounted_overflows,
            i.overflows,
        ),
        ("dropped_interrupts", recorded.dropped_interrupts, i.dropped),
        ("injected", recorded.injected, i.injected),
        ("ambiguous", recorded.ambiguous, i.ambiguous),
    ];
    for (field, theirs, mine) in ours {
        if theirs != mine {
            out.push((
                format!("{name}.{field}"),
                theirs.to_string(),
                mine.to_string(),
            ));
        }
    }
    // The rate as the run computed it from these counts (its interval
    // is what --baseline reads); the figures as parsed back, to a part in
    // 10^9 (a float read back from JSON may differ in its last digit).
    if let Some(theirs) = &recorded.dropped_rate {
        let mine = Rate::new(i.dropped, i.overflows, theirs.confidence);
        let near = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => (a - b).abs() <= 1e-9 * a.abs().max(b.abs()),
            (a, b) => a.is_none() && b.is_none(),
        };
        let same = (theirs.events, theirs.trials) == (mine.events, mine.trials)
            && near(theirs.per_million, mine.per_million)
            && near(theirs.ci_low_per_million, mine.ci_low_per_million)
            && near(theirs.ci_high_per_million, mine.ci_high_per_million);
        if !same {
            let json = |r: &Rate| serde_json::to_string(r).unwrap_or_default();
            out.push((format!("{name}.dropped_rate"), json(theirs), json(&mine)));
        }
    }
}

/// Field-by-field differences between run.json's totals and ours (a
/// field added after the run was recorded reads as zero there).
fn compare<T: Serialize>(
    name: &str,
    recorded: &T,
    ours: &T,
    out: &mut Vec<(String, String, String)>,
) {
    let (Ok(Value::Object(recorded)), Ok(Value::Object(ours))) =
        (serde_json::to_value(recorded), serde_json::to_value(ours))
    else {
        return;
    };
    for (k, v) in &ours {
        let theirs = recorded.get(k).cloned().unwrap_or(Value::Null);
        if &theirs != v {
            out.push((format!("{name}.{k}"), theirs.to_string(), v.to_string()));
        }
    }
}

/// The text a replay prints: the judgement's accounting lines, then how it
/// compares with the run.
pub fn summary(r: &Replayed) -> String {
    let mut s = crate::report::accounting::accounting(&r.interrupts, &r.deliveries, "");
    for reason in &r.inconclusive_because {
        let _ = writeln!(s, "inconclusive: {reason}");
    }
    s
}

impl DirReplay {
    /// The verdict said and exited with: a stream that does not give
    /// run.json's totals cannot vouch for the run (125), whatever it
    /// shows alone.
    pub fn outcome(&self) -> (&str, i32) {
        if self.differences.is_empty() {
            (self.verdict.as_str(), self.exit_status)
        } else {
            ("inconclusive", crate::domain::EXIT_CANNOT_TEST)
        }
    }
}

/// A directory's replay as a report: the judgement, how it compares with
/// run.json, and the verdict (text is the same in every format but JSON,
/// wrapped as a terminal's lines are).
impl Serialize for DirReplay {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (verdict, status) = self.outcome();
        serde_json::json!({
            "replayed": self.replayed,
            "truncated": self.truncated,
            "differences": self.differences,
            "run_verdict": self.run_verdict,
            "stream_verdict": self.verdict,
            "verdict": verdict,
            "exit_status": status,
        })
        .serialize(s)
    }
}

impl Report for DirReplay {
    fn write(&self, m: &mut dyn Markup) {
        let (verdict, status) = self.outcome();
        let mut out = String::new();
        let _ = writeln!(out, "{}", summary(&self.replayed).trim_end());
        if let Some(t) = &self.truncated {
            let _ = writeln!(out, "note: the stream ends early ({t}): judged up to there");
        }
        if self.differences.is_empty() {
            let _ = writeln!(
                out,
                "replay: the same totals as run.json (run verdict {}, exit {})",
                self.run_verdict,
                self.run_exit_status
                    .map_or("-".to_string(), |s| s.to_string())
            );
        }
        for (field, run, replayed) in &self.differences {
            let _ = writeln!(
                out,
                "replay differs: {field}: run.json {run}, replay {replayed}"
            );
        }
        if self.differences.is_empty() {
            let _ = writeln!(out, "verdict: {verdict} (exit {status})");
        } else {
            let _ = writeln!(
                out,
                "verdict: {verdict} (exit {status}): the stream does not give run.json's totals (the stream alone: {}, exit {})",
                self.verdict, self.exit_status
            );
        }
        lines(m, &out);
    }
}

/// A bare stream's replay: its judgement and verdict; JSON is the
/// judgement itself.
#[derive(Serialize)]
#[serde(transparent)]
pub struct StreamReplay {
    pub replayed: Replayed,
    #[serde(skip)]
    pub truncated: Option<String>,
}

impl Report for StreamReplay {
    fn write(&self, m: &mut dyn Markup) {
        let r = &self.replayed;
        let mut out = String::new();
        let _ = writeln!(out, "{}", summary(r).trim_end());
        if let Some(t) = &self.truncated {
            let _ = writeln!(out, "note: the stream ends early ({t}): judged up to there");
        }
        let _ = writeln!(out, "verdict: {} (exit {})", r.verdict, r.exit_status);
        lines(m, &out);
    }
}

/// `out`'s lines fitted to a terminal's width, as they are.
fn lines(m: &mut dyn Markup, out: &str) {
    for line in fit(out).lines() {
        m.line(line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{EXIT_DROPPED, RearmMode};
    use crate::judge::Observation;

    fn rows(obs: &[Observation]) -> String {
        let mut s = format!("{HEADER}\n");
        for o in obs {
            let _ = writeln!(
                s,
                "{}",
                Row {
                    worker: 0,
                    observation: *o
                }
            );
        }
        s
    }

    #[test]
    fn a_lost_interrupt_at_a_stop_replays_as_one_drop() {
        let p = 100_000;
        let text = rows(&[
            Observation::Sample {
                time_ns: 1,
                cpu: 0,
                count: p,
            },
            // Stopped 30,000 past the second due point, its interrupt not
            // taken: lost; the grid is kept.
            Observation::Stop {
                time_ns: 2,
                cpu: 0,
                count: Some(2 * p + 30_000),
            },
            Observation::Sample {
                time_ns: 3,
                cpu: 1,
                count: 3 * p,
            },
            Observation::Final {
                time_ns: 4,
                count: Some(3 * p + 10),
            },
        ]);
        let mut replay = Replay::new(JudgeConfig::new(p, 0, 0, RearmMode::Free));
        let truncated = parse_stream(text.as_bytes(), "test", |row| replay.row(&row)).unwrap();
        assert_eq!(truncated, None);
        let r = replay.finish();
        assert_eq!(
            (
                r.interrupts.samples,
                r.interrupts.dropped,
                r.interrupts.overflows
            ),
            (2, 1, 3)
        );
        assert_eq!((r.verdict, r.exit_status), ("dropped", EXIT_DROPPED));
    }

    #[test]
    fn a_bad_line_is_named_and_a_missing_header_refused() {
        let e = parse_stream("nope\n".as_bytes(), "f", |_| {})
            .err()
            .unwrap();
        assert!(e.to_string().contains("header"), "{e}");
        let text = format!("{HEADER}\n0,sample,1,0,5,\n0,sample,x,0,5,\n");
        let e = parse_stream(text.as_bytes(), "f", |_| {}).err().unwrap();
        assert!(e.to_string().contains("line 3"), "{e}");
    }

    /// Hands out a stream one line per read and counts what it gave.
    struct OneLineAtATime {
        lines: Vec<String>,
        given: std::rc::Rc<std::cell::Cell<usize>>,
    }

    impl Read for OneLineAtATime {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let Some(line) = self.lines.get(self.given.get()) else {
                return Ok(0);
            };
            let n = line.len().min(buf.len());
            assert_eq!(n, line.len(), "a test line fits one read");
            buf[..n].copy_from_slice(&line.as_bytes()[..n]);
            self.given.set(self.given.get() + 1);
            Ok(n)
        }
    }

    /// Every row reaches the judge before the next line is read: replaying
    /// a day-long run holds its judges, never its stream.
    #[test]
    fn rows_are_judged_as_they_are_read() {
        let mut lines = vec![format!("{HEADER}\n")];
        lines.extend((1..=1000u64).map(|k| {
            let o = Observation::Sample {
                time_ns: k,
                cpu: 0,
                count: k * 100,
            };
            format!(
                "{}\n",
                Row {
                    worker: 0,
                    observation: o
                }
            )
        }));
        let given = std::rc::Rc::new(std::cell::Cell::new(0));
        let reader = std::io::BufReader::with_capacity(
            64,
            OneLineAtATime {
                lines,
                given: given.clone(),
            },
        );
        let mut judged = 0;
        let truncated = parse_stream(reader, "f", |row| {
            judged += 1;
            // The header and this row are all that was read.
            assert_eq!(given.get(), judged + 1, "{row}");
        })
        .unwrap();
        assert_eq!((judged, truncated), (1000, None));
    }
}
