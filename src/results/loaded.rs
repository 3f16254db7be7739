/*!
Reading a results directory back, as written by `results_dir`: run.json
(through `runfile`, which refuses anything pmustress does not write), the
per-worker histogram logs (merged into one histogram of deltas) and
anomalies.csv (counted by kind, the first rows kept). `report`, `compare`,
`plot` and `--baseline` all start from a `LoadedRun`.
*/

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use serde_json::Value;

use crate::results::reader::RunDocument;
use crate::results::schema::AnomalyRecord;

/// At most this many anomalies.csv rows are kept in memory (all are
/// counted): report shows the first few, plot draws these.
pub const MAX_ANOMALY_ROWS: usize = 100_000;

/// One results directory, loaded.
pub struct LoadedRun {
    pub dir: PathBuf,
    /// run.json, typed and checked.
    pub run: RunDocument,
    /// All deltas of all workers, from the histogram logs.
    pub deltas: Histogram<u64>,
    /// anomalies.csv's first `MAX_ANOMALY_ROWS` rows, none when the file
    /// contradicts run.json.
    pub anomalies: Vec<AnomalyRecord>,
    /// Rows in anomalies.csv.
    pub anomaly_count: u64,
    /// Why anomalies.csv's rows are not shown, if they are not.
    pub anomalies_note: Option<String>,
}

impl LoadedRun {
    pub fn load(dir: &Path) -> Result<LoadedRun> {
        let run = crate::results::reader::read(dir)?;
        let mut deltas = Histogram::<u64>::new(3).context("creating a histogram")?;
        let mut hlogs: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("listing {}", dir.display()))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "hlog"))
            .collect();
        hlogs.sort();
        for log in &hlogs {
            merge_log(log, &mut deltas)?;
        }
        let anomalies = read_anomalies(&dir.join("anomalies.csv"))?;
        let mut loaded = LoadedRun {
            dir: dir.to_path_buf(),
            run,
            deltas,
            anomalies: anomalies.rows,
            anomaly_count: anomalies.count,
            anomalies_note: None,
        };
        // run.json is the record: rows it does not count are not shown as
        // this run's (a file cut short by a full disk may hold fewer).
        if let Some(t) = &loaded.run.totals() {
            let partial = loaded
                .run
                .partial_files()
                .iter()
                .any(|f| f == "anomalies.csv");
            let fits = anomalies.by_kind.iter().all(|(k, n)| {
                let counted = t.anomalies.get(k).copied().unwrap_or(0);
                if partial {
                    *n <= counted
                } else {
                    *n == counted
                }
            }) && (partial
                || t.anomalies
                    .iter()
                    .all(|(k, n)| anomalies.by_kind.get(k) == Some(n)));
            if !fits {
                loaded.anomalies_note = Some(format!(
                    "anomalies.csv does not match run.json ({} rows; run.json counts {}): its rows are not shown",
                    loaded.anomaly_count,
                    t.anomalies.values().sum::<u64>()
                ));
                loaded.anomalies.clear();
            }
        }
        Ok(loaded)
    }

    /// Overflows accounted for; 0 for a run that did not finish (which
    /// `compare` refuses and `report` shows without rates).
    pub fn overflows(&self) -> u64 {
        self.run
            .totals()
            .as_ref()
            .map_or(0, |t| t.accounted_overflows)
    }

    pub fn dropped(&self) -> u64 {
        self.run
            .totals()
            .as_ref()
            .map_or(0, |t| t.dropped_interrupts)
    }

    /// Stops the kernel witnessed; None for a run recorded before they
    /// were counted.
    pub fn stops(&self) -> Option<u64> {
        self.run
            .totals()
            .and_then(|t| t.stress.as_ref())
            .map(|s| s.stops)
    }

    pub fn verdict(&self) -> &'static str {
        crate::results::reader::verdict_name(self.run.verdict())
    }

    /// "exit 1", or "no exit status" for a run that did not finish.
    pub fn exit_text(&self) -> String {
        match self.run.exit_status() {
            Some(s) if self.run.finished() => format!("exit {s}"),
            Some(s) => format!("did not start, exit {s}"),
            None => "did not finish, no exit status".to_string(),
        }
    }

    pub fn period(&self) -> u64 {
        self.run.config().period
    }

    /// A string from the free-form fingerprint.
    pub(crate) fn fingerprint_str(&self, pointer: &str) -> Option<&str> {
        self.run
            .fingerprint()
            .pointer(pointer)
            .and_then(Value::as_str)
    }

    /// The exact command, shell-quoted where needed.
    pub fn command(&self) -> String {
        self.command_words().join(" ")
    }

    /// The command's words, each shell-quoted.
    pub(crate) fn command_words(&self) -> Vec<String> {
        let mut argv: Vec<String> = self.run.argv().iter().map(|a| shell_quote(a)).collect();
        if let Some(first) = argv.first_mut() {
            // The path the binary had on that machine says nothing here.
            *first = "pmustress".to_string();
        }
        // Random moves come from a seed the clock picked: given here, a
        // rerun draws the same CPUs.
        let cfg = self.run.config();
        let seeded = self
            .run
            .argv()
            .iter()
            .any(|a| a == "--seed" || a.starts_with("--seed="));
        if cfg.migrate == crate::domain::MigrateMode::Random
            && !seeded
            && !self.run.argv().is_empty()
        {
            argv.push("--seed".to_string());
            argv.push(cfg.migrate_seed.to_string());
        }
        argv
    }
}

/// One argument as a shell word: bare when safe, else in single quotes,
/// or in bash's $'...' with escapes when it holds control characters (so
/// the command is copied exactly and no terminal sequence is printed).
fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        s.to_string()
    } else if s.chars().any(char::is_control) {
        let mut q = String::from("$'");
        for c in s.chars() {
            match c {
                '\\' => q.push_str("\\\\"),
                '\'' => q.push_str("\\'"),
                c if c.is_control() && (c as u32) < 0x80 => {
                    let _ = write!(q, "\\x{:02x}", c as u32);
                }
                c if c.is_control() => {
                    let _ = write!(q, "\\u{:04x}", c as u32);
                }
                c => q.push(c),
            }
        }
        q.push('\'');
        q
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The longest line read from a histogram log: an interval is a few KiB.
const MAX_HLOG_LINE: u64 = 4 << 20;

/// Adds every interval of one HdrHistogram log to `into`, a line at a time
/// (a long run's log is never held whole).
pub fn merge_log(path: &Path, into: &mut Histogram<u64>) -> Result<()> {
    use std::io::BufRead as _;
    let (file, _) = crate::results::reader::open_regular(path)?;
    let mut reader = std::io::BufReader::new(file);
    let mut line = Vec::new();
    let mut de = Deserializer::new();
    loop {
        line.clear();
        let n = (&mut reader)
            .take(MAX_HLOG_LINE)
            .read_until(b'\n', &mut line)
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            return Ok(());
        }
        if n as u64 == MAX_HLOG_LINE && line.last() != Some(&b'\n') {
            bail!(
                "{}: a line longer than {MAX_HLOG_LINE} bytes is not a histogram log",
                path.display()
            );
        }
        for entry in IntervalLogIterator::new(&line) {
            let entry = entry.map_err(|e| {
                anyhow::anyhow!("{}: bad histogram log line: {e:?}", path.display())
            })?;
            if let LogEntry::Interval(ilh) = entry {
                let raw = base64::engine::general_purpose::STANDARD
                    .decode(ilh.encoded_histogram())
                    .with_context(|| format!("{}: bad base64 in an interval", path.display()))?;
                bound_claims(&raw)
                    .map_err(|why| anyhow::anyhow!("{}: bad histogram: {why}", path.display()))?;
                let h: Histogram<u64> = de
                    .deserialize(&mut &raw[..])
                    .map_err(|e| anyhow::anyhow!("{}: bad histogram: {e:?}", path.display()))?;
                into.add(&h)
                    .map_err(|e| anyhow::anyhow!("{}: cannot merge: {e:?}", path.display()))?;
            }
        }
    }
}

/// The V2 histogram encodings' cookies (HdrHistogram's, word size 8).
const V2_COOKIE: u32 = 0x1c84_9303 | 0x10;
const V2_DEFLATE_COOKIE: u32 = 0x1c84_9304 | 0x10;
/// The V2 header's bytes after its cookie and payload length.
const V2_HEADER_REST: usize = 32;
/// The most bytes deflate makes of one (its best ratio is 1032:1).
const DEFLATE_MOST: usize = 1032;

/// Refuses an encoded histogram whose header claims more bytes than it
/// can hold, before the decoder allocates what it claims (an 83-byte
/// file claiming 2^31-1 bytes had `report` allocate 2 GiB): a plain
/// payload must fit in what follows its header, a compressed one in the
/// bytes given, and what it inflates to in 1032 times that.
fn bound_claims(raw: &[u8]) -> Result<(), String> {
    use std::io::Read as _;
    let word = |b: &[u8]| -> Option<usize> {
        Some(u32::from_be_bytes(b.get(..4)?.try_into().ok()?) as usize)
    };
    let (Some(cookie), Some(claimed)) = (word(raw), raw.get(4..).and_then(word)) else {
        return Err("shorter than its header".to_string());
    };
    let left = raw.len() - 8;
    match cookie as u32 {
        V2_COOKIE if claimed > left.saturating_sub(V2_HEADER_REST) => {
            Err(format!("its header claims {claimed} bytes, {left} follow"))
        }
        V2_DEFLATE_COOKIE if claimed > left => Err(format!(
            "its header claims {claimed} compressed bytes, {left} follow"
        )),
        V2_DEFLATE_COOKIE => {
            let mut inner = [0u8; 8];
            flate2::read::ZlibDecoder::new(&raw[8..])
                .read_exact(&mut inner)
                .map_err(|e| format!("its compressed header does not inflate: {e}"))?;
            let inner_claim = word(&inner[4..]).unwrap_or(usize::MAX);
            if inner_claim > claimed.saturating_mul(DEFLATE_MOST) {
                Err(format!(
                    "its header claims {inner_claim} bytes inflated from {claimed}"
                ))
            } else {
                Ok(())
            }
        }
        _ => Ok(()),
    }
}

/// The longest anomalies.csv line read: a row is a few hundred bytes.
const MAX_ANOMALY_LINE: u64 = 64 << 10;

struct Anomalies {
    rows: Vec<AnomalyRecord>,
    count: u64,
    by_kind: BTreeMap<String, u64>,
}

/// anomalies.csv, streamed into the writer's `AnomalyRecord`s (columns by
/// name, so an older file without `interrupt_gap` reads): every row counted
/// by kind, the first `MAX_ANOMALY_ROWS` kept. A missing file is no rows;
/// a FIFO or a bad row is an error.
fn read_anomalies(path: &Path) -> Result<Anomalies> {
    let mut out = Anomalies {
        rows: Vec::new(),
        count: 0,
        by_kind: BTreeMap::new(),
    };
    if !path.exists() {
        return Ok(out);
    }
    let (file, _) = crate::results::reader::open_regular(path)?;
    let file = crate::results::reader::BoundedLines::new(file, MAX_ANOMALY_LINE);
    let mut r = csv::Reader::from_reader(std::io::BufReader::new(file));
    // Read here: deserialize() would swallow an error in the header line.
    r.headers()
        .with_context(|| format!("reading {}", path.display()))?;
    for row in r.deserialize::<AnomalyRecord>() {
        let row = row.with_context(|| format!("reading {}", path.display()))?;
        out.count += 1;
        *out.by_kind.entry(row.kind.clone()).or_insert(0) += 1;
        if out.rows.len() < MAX_ANOMALY_ROWS {
            out.rows.push(row);
        }
    }
    Ok(out)
}

/// How deep `expand` looks below a group directory: a fleet's
/// `pmustress_results/<host>/<run>/` is two levels, a bisection's
/// `<tree>/<commit>/<run>/` three.
pub const MAX_GROUP_DEPTH: usize = 4;

/// Expands each argument: a directory with run.json is one run; a directory
/// without is a group whose results directories below it (up to
/// `MAX_GROUP_DEPTH` levels down, symlinks not followed, none looked into
/// once it has a run.json) are its runs, in path order.
pub fn expand(args: &[PathBuf]) -> Result<Vec<Vec<PathBuf>>> {
    args.iter()
        .map(|dir| {
            if holds_run_json(dir) {
                return Ok(vec![dir.clone()]);
            }
            // A check's own directory: the check is its result (its
            // stress/ run is reported by naming it).
            if holds_check_json(dir) {
                return Ok(Vec::new());
            }
            let mut runs = Vec::new();
            runs_below(dir, MAX_GROUP_DEPTH, &mut runs).with_context(|| {
                format!(
                    "{} is neither a results directory nor a group of them",
                    dir.display()
                )
            })?;
            runs.sort();
            if runs.is_empty() && checks(std::slice::from_ref(dir)).is_empty() {
                bail!(
                    "{} has no run.json, nor directories below it with one",
                    dir.display()
                );
            }
            Ok(runs)
        })
        .collect()
}

/// Whether `dir` has a run.json of any kind: one that is not a regular
/// file (a symlink to /dev/zero, a directory, a FIFO) is a results
/// directory all the same, refused with its name when read
/// (`runfile::read`), never taken for a group without one.
fn holds_run_json(dir: &Path) -> bool {
    dir.join("run.json").symlink_metadata().is_ok()
}

/// Whether `dir` is a `pmustress check`'s results directory.
pub fn holds_check_json(dir: &Path) -> bool {
    !holds_run_json(dir) && dir.join("check.json").symlink_metadata().is_ok()
}

/// The checks' directories among `args` and below them (as `expand`
/// finds runs), in path order.
pub fn checks(args: &[PathBuf]) -> Vec<PathBuf> {
    fn below(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let path = entry.path();
            if holds_check_json(&path) {
                out.push(path);
            } else if depth > 1 && !holds_run_json(&path) {
                below(&path, depth - 1, out);
            }
        }
    }
    let mut out = Vec::new();
    for dir in args {
        if holds_check_json(dir) {
            out.push(dir.clone());
        } else if !holds_run_json(dir) {
            let mut found = Vec::new();
            below(dir, MAX_GROUP_DEPTH, &mut found);
            found.sort();
            out.extend(found);
        }
    }
    out
}

fn runs_below(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir)?.flatten() {
        // file_type() does not follow symlinks: a link is never descended.
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let path = entry.path();
        if holds_run_json(&path) {
            out.push(path);
        } else if holds_check_json(&path) {
            // A check's stress run belongs to the check.
        } else if depth > 1 {
            // An unreadable subdirectory is not a run; the others still are.
            let _ = runs_below(&path, depth - 1, out);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// What a header claims is bounded before anything is allocated: an
    /// encoding pmustress writes passes, the same with its lengths forged
    /// to 2^31-1 does not.
    #[test]
    fn a_histogram_header_claiming_more_than_it_holds_is_refused() {
        use hdrhistogram::serialization::{Serializer as _, V2DeflateSerializer, V2Serializer};
        let mut h = crate::domain::histogram();
        for v in [1u64, 1_000, 1_000_000] {
            h.record(v).unwrap();
        }
        let mut deflated = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&h, &mut deflated)
            .unwrap();
        let mut plain = Vec::new();
        V2Serializer::new().serialize(&h, &mut plain).unwrap();
        assert_eq!(bound_claims(&deflated), Ok(()));
        assert_eq!(bound_claims(&plain), Ok(()));
        for mut forged in [deflated, plain] {
            forged[4..8].copy_from_slice(&0x7fff_ffffu32.to_be_bytes());
            let why = bound_claims(&forged).unwrap_err();
            assert!(why.contains("2147483647"), "{why}");
        }
        assert!(bound_claims(&[0x1c, 0x84]).is_err());
    }

    use super::*;

    #[test]
    fn shell_quoting() {
        assert_eq!(shell_quote("--period"), "--period");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote("\u{1b}[31m'\\"), "$'\\x1b[31m\\'\\\\'");
        assert_eq!(shell_quote("a\u{9b}b"), "$'a\\u009bb'");
    }
}
