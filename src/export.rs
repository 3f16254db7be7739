/*!
The results directory, written as the run goes.

- `run.json` is written first with verdict `incomplete` (so even a SIGKILLed
  run leaves a parseable directory) and replaced at the end, each time by
  atomic rename.
- `raw.csv.gz`: every observation the judge saw, one per line
  (`judge::stream`), as one gzip member per second: a killed run leaves
  every whole second readable (`zcat`, `pmustress replay`).
- `anomalies.csv`: one row per anomaly, flushed every second.
- `hist-worker<N>.hlog`: HdrHistogram interval logs (V2 deflate), one
  interval per second per worker: mergeable across runs and machines.
- `deltas.hgrm`: the percentile distribution of all deltas at the end.
- `deltas.csv` (`--raw`): every delta.

Write errors do not panic: they are kept, the run stops early, and whatever
could be saved stays (see `failure`).
*/

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use serde::Serialize;

use flate2::Compression;
use flate2::write::GzEncoder;

use crate::config::RunConfig;
use crate::judge::stream::{self, Row};
use crate::judge::{Anomaly, ClosedWindow, Observation};

const FLUSH_EVERY_NS: u64 = 1_000_000_000;

/// Space held back for the final run.json (at most 1000 anomalies plus the
/// fingerprint fit well inside), so a disk that fills up during the run
/// still gets its verdict written.
pub const RESERVE_BYTES: usize = 2 << 20;
const RESERVE_NAME: &str = ".reserve-for-run.json";

/// The name of a default results directory: `<UTC time>-<host>-<event>`.
pub fn default_dir_name(now: SystemTime, host: &str, event: &str) -> String {
    // 2026-11-30T14:24:08Z -> 20261130T142408Z: sortable, no colons.
    let stamp: String = humantime::format_rfc3339_seconds(now)
        .to_string()
        .chars()
        .filter(|c| !matches!(c, '-' | ':'))
        .collect();
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
                    c
                } else {
                    '-'
                }
            })
            .collect()
    };
    format!("{stamp}-{}-{}", clean(host.trim()), clean(event))
}

/// Writes `value` as pretty JSON to `dir/name` via a temporary file and a
/// rename, so a reader sees the old file or the new one, never half.
pub fn write_json_atomically<T: Serialize>(dir: &Path, name: &str, value: &T) -> Result<()> {
    let path = dir.join(name);
    let tmp = dir.join(format!(".{name}.tmp"));
    let mut text =
        serde_json::to_string_pretty(value).with_context(|| format!("serialising {name}"))?;
    text.push('\n');
    let write = || -> std::io::Result<()> {
        let mut f = File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()
    };
    if let Err(e) = write() {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("writing {}", tmp.display()));
    }
    std::fs::rename(&tmp, &path)
        .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
}

/// What `run.json` says while the run is still going (or if it never ends).
#[derive(Serialize)]
struct Incomplete<'a> {
    schema_version: u32,
    verdict: &'static str,
    note: &'static str,
    argv: &'a [String],
    config: &'a RunConfig,
    /// How to judge raw.csv.gz again, should the run never finish.
    judge: crate::judge::JudgeConfig,
    started_unix_s: u64,
}

struct HistogramLog {
    path: PathBuf,
    file: BufWriter<File>,
    interval: Histogram<u64>,
    serializer: V2DeflateSerializer,
    header_written: bool,
}

/// `raw.csv.gz`: the observation stream, one gzip member per flush.
struct RawStream {
    file: BufWriter<File>,
    /// The lines since the last flush.
    pending: String,
}

impl RawStream {
    fn push(&mut self, row: &Row) {
        use std::fmt::Write as _;
        let _ = writeln!(self.pending, "{row}");
    }

    /// Compresses what is pending as one whole gzip member and writes it.
    fn flush(&mut self) -> std::io::Result<()> {
        if !self.pending.is_empty() {
            let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
            gz.write_all(self.pending.as_bytes())?;
            self.file.write_all(&gz.finish()?)?;
            self.pending.clear();
        }
        self.file.flush()
    }
}

pub struct ResultsDir {
    dir: PathBuf,
    stream: RawStream,
    anomalies: csv::Writer<BufWriter<File>>,
    raw: Option<csv::Writer<BufWriter<File>>>,
    hlogs: Vec<HistogramLog>,
    all_deltas: Histogram<u64>,
    started: SystemTime,
    started_ns: Option<u64>,
    interval_start_ns: u64,
    last_flush_ns: u64,
    failed: Option<String>,
}

fn create(path: &Path) -> Result<BufWriter<File>> {
    Ok(BufWriter::new(
        File::create(path).with_context(|| format!("creating {}", path.display()))?,
    ))
}

impl ResultsDir {
    /// Creates the directory and its files before measuring, so an
    /// unwritable path or a full disk is reported before any work is done.
    pub fn create(dir: &Path, cfg: &RunConfig, argv: &[String], raw: bool) -> Result<ResultsDir> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the results directory {}", dir.display()))?;
        let started = SystemTime::now();
        let reserve = dir.join(RESERVE_NAME);
        std::fs::write(&reserve, vec![0u8; RESERVE_BYTES]).map_err(|e| {
            let _ = std::fs::remove_file(&reserve);
            anyhow::anyhow!(
                "cannot reserve {} MiB for the final run.json in {} ({e}): free some space or choose another directory",
                RESERVE_BYTES >> 20,
                dir.display()
            )
        })?;
        write_json_atomically(
            dir,
            "run.json",
            &Incomplete {
                schema_version: crate::results::SCHEMA_VERSION,
                verdict: "incomplete",
                note: "the run has not finished (or was killed): see anomalies.csv and the histogram logs",
                argv,
                config: cfg,
                judge: cfg.judge_config(),
                started_unix_s: started
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs()),
            },
        )?;
        // Headers are written by hand so that a run without rows still has them.
        let csv_writer = |f| csv::WriterBuilder::new().has_headers(false).from_writer(f);
        let anomalies = csv_writer(create(&dir.join("anomalies.csv"))?);
        let mut stream = RawStream {
            file: create(&dir.join("raw.csv.gz"))?,
            pending: String::new(),
        };
        stream.pending.push_str(stream::HEADER);
        stream.pending.push('\n');
        let raw = if raw {
            Some(csv_writer(create(&dir.join("deltas.csv"))?))
        } else {
            None
        };
        let mut hlogs = Vec::with_capacity(cfg.workers);
        for w in 0..cfg.workers {
            let path = dir.join(format!("hist-worker{w}.hlog"));
            hlogs.push(HistogramLog {
                file: create(&path)?,
                path,
                interval: Histogram::new(3).context("creating a histogram")?,
                serializer: V2DeflateSerializer::new(),
                header_written: false,
            });
        }
        let mut out = ResultsDir {
            dir: dir.to_path_buf(),
            stream,
            anomalies,
            raw,
            hlogs,
            all_deltas: Histogram::new(3).context("creating a histogram")?,
            started,
            started_ns: None,
            interval_start_ns: 0,
            last_flush_ns: 0,
            failed: None,
        };
        // Headers now, so even an empty run has well-formed CSVs.
        out.anomalies.write_record(ANOMALY_HEADER)?;
        if let Some(raw) = &mut out.raw {
            raw.write_record(["worker", "signal_seq", "time_ns", "delta", "cpu"])?;
        }
        out.flush_files()?;
        Ok(out)
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    fn fail(&mut self, e: impl std::fmt::Display) {
        if self.failed.is_none() {
            self.failed = Some(format!("{}: {e}", self.dir.display()));
        }
    }

    pub fn failure(&self) -> Option<String> {
        self.failed.clone()
    }

    pub fn record_observation(&mut self, worker: usize, observation: &Observation) {
        self.stream.push(&Row {
            worker,
            observation: *observation,
        });
    }

    pub fn record_window(&mut self, w: &ClosedWindow) {
        let _ = self.all_deltas.record(w.delta);
        if let Some(h) = self.hlogs.get_mut(w.worker) {
            let _ = h.interval.record(w.delta);
        }
        if let Some(raw) = &mut self.raw
            && let Err(e) = raw.serialize(w)
        {
            self.fail(e);
        }
    }

    pub fn record_anomaly(&mut self, a: &Anomaly) {
        let row = AnomalyRow::from(a);
        if let Err(e) = self.anomalies.serialize(row) {
            self.fail(e);
        }
    }

    /// Flushes the CSVs and writes one histogram interval per worker, once a
    /// second.
    pub fn tick(&mut self, now_ns: u64) {
        let start = *self.started_ns.get_or_insert(now_ns);
        if self.interval_start_ns == 0 {
            self.interval_start_ns = now_ns;
            self.last_flush_ns = now_ns;
        }
        if now_ns.saturating_sub(self.last_flush_ns) < FLUSH_EVERY_NS || self.failed.is_some() {
            return;
        }
        self.last_flush_ns = now_ns;
        if let Err(e) = self
            .write_intervals(start, now_ns)
            .and_then(|()| self.flush_files())
        {
            self.fail(format!("{e:#}"));
        }
    }

    fn write_intervals(&mut self, run_start_ns: u64, now_ns: u64) -> Result<()> {
        let offset = Duration::from_nanos(self.interval_start_ns.saturating_sub(run_start_ns));
        let length = Duration::from_nanos(now_ns.saturating_sub(self.interval_start_ns));
        for (w, h) in self.hlogs.iter_mut().enumerate() {
            let mut buf = Vec::new();
            {
                let mut builder = IntervalLogWriterBuilder::new();
                builder.with_start_time(self.started);
                let mut log = builder
                    .begin_log_with(&mut buf, &mut h.serializer)
                    .context("starting a histogram log")?;
                let tag = format!("worker{w}");
                log.write_histogram(&h.interval, offset, length, Tag::new(&tag))
                    .map_err(|e| anyhow::anyhow!("serialising a histogram interval: {e:?}"))?;
            }
            let text = String::from_utf8_lossy(&buf);
            // The log's header goes in once; later intervals are just lines.
            let body: String = if h.header_written {
                text.lines()
                    .filter(|l| !l.starts_with('#') && !l.starts_with('"'))
                    .flat_map(|l| [l, "\n"])
                    .collect()
            } else {
                text.into_owned()
            };
            h.header_written = true;
            h.file
                .write_all(body.as_bytes())
                .with_context(|| format!("writing {}", h.path.display()))?;
            h.interval.reset();
        }
        self.interval_start_ns = now_ns;
        Ok(())
    }

    fn flush_files(&mut self) -> Result<()> {
        self.stream.flush().context("writing raw.csv.gz")?;
        self.anomalies.flush().context("writing anomalies.csv")?;
        if let Some(raw) = &mut self.raw {
            raw.flush().context("writing deltas.csv")?;
        }
        for h in &mut self.hlogs {
            h.file
                .flush()
                .with_context(|| format!("writing {}", h.path.display()))?;
        }
        Ok(())
    }

    /// Writes the last intervals, deltas.hgrm and the final run.json.
    pub fn finish<T: Serialize>(mut self, now_ns: u64, results: &T) -> Result<()> {
        let start = self.started_ns.unwrap_or(now_ns);
        let mut tail = Ok(());
        if self.failed.is_none() {
            tail = self
                .write_intervals(start, now_ns)
                .and_then(|()| self.flush_files())
                .and_then(|()| {
                    let mut hgrm = create(&self.dir.join("deltas.hgrm"))?;
                    hgrm.write_all(percentile_distribution(&self.all_deltas).as_bytes())
                        .and_then(|()| hgrm.flush())
                        .context("writing deltas.hgrm")
                });
        }
        // The verdict matters more than the last second of histograms.
        self.write_final(results)?;
        tail
    }

    /// Gives back the reserved space and writes the verdict into it.
    fn write_final<T: Serialize>(&self, results: &T) -> Result<()> {
        let _ = std::fs::remove_file(self.dir.join(RESERVE_NAME));
        write_json_atomically(&self.dir, "run.json", results)
    }
}

const ANOMALY_HEADER: [&str; 15] = [
    "worker",
    "signal_seq",
    "time_ns",
    "delta",
    "period",
    "skid",
    "kind",
    "overflows_missed",
    "interrupts_dropped",
    "injected",
    "cpu_before",
    "cpu_after",
    "ns_since_migration",
    "kernel_samples_in_window",
    "interrupt_gap",
];

/// One anomalies.csv row, in ANOMALY_HEADER order.
#[derive(Serialize)]
struct AnomalyRow<'a> {
    worker: usize,
    signal_seq: u64,
    time_ns: u64,
    delta: u64,
    period: u64,
    skid: u64,
    kind: &'a str,
    overflows_missed: u64,
    interrupts_dropped: u64,
    injected: u64,
    cpu_before: Option<u32>,
    cpu_after: u32,
    ns_since_migration: Option<u64>,
    kernel_samples_in_window: u64,
    interrupt_gap: Option<u64>,
}

impl<'a> From<&'a Anomaly> for AnomalyRow<'a> {
    fn from(a: &'a Anomaly) -> AnomalyRow<'a> {
        AnomalyRow {
            worker: a.worker,
            signal_seq: a.signal_seq,
            time_ns: a.time_ns,
            delta: a.delta,
            period: a.period,
            skid: a.skid,
            kind: a.kind.name(),
            overflows_missed: a.missed,
            interrupts_dropped: a.dropped,
            injected: a.injected,
            cpu_before: a.cpu_before,
            cpu_after: a.cpu_after,
            ns_since_migration: a.since_migration_ns,
            kernel_samples_in_window: a.kernel_samples,
            interrupt_gap: a.interrupt_gap,
        }
    }
}

/// HdrHistogram's classic percentile text (`.hgrm`), as Java's
/// outputPercentileDistribution prints it, so existing plotters read it.
pub fn percentile_distribution(h: &Histogram<u64>) -> String {
    let mut s = format!(
        "{:>12} {:>14} {:>10} {:>14}\n\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    let mut total = 0u64;
    for v in h.iter_quantiles(5) {
        total += v.count_since_last_iteration();
        let q = v.quantile_iterated_to();
        let inv = if q < 1.0 {
            format!("{:14.2}", 1.0 / (1.0 - q))
        } else {
            format!("{:>14}", "")
        };
        s.push_str(&format!(
            "{:12.3} {:14.12} {:10} {inv}\n",
            v.value_iterated_to() as f64,
            q,
            total
        ));
    }
    if h.is_empty() {
        s.push_str("#[Mean    =          nan, StdDeviation   =          nan]\n");
    } else {
        s.push_str(&format!(
            "#[Mean    = {:12.3}, StdDeviation   = {:12.3}]\n",
            h.mean(),
            h.stdev()
        ));
    }
    s.push_str(&format!(
        "#[Max     = {:12.3}, Total count    = {:12}]\n",
        h.max() as f64,
        h.len()
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::Deserializer;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

    #[test]
    fn default_name_is_sortable_and_path_safe() {
        // 1_796_000_000 s after the epoch is 2026-11-30T00:53:20Z.
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_000_000);
        let name = default_dir_name(t, "my host/x\n", "r21");
        assert_eq!(name, "20261130T005320Z-my-host-x-r21");
    }

    #[test]
    fn percentile_text_ends_with_the_totals() {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for v in [100u64, 200, 300, 1000] {
            h.record(v).unwrap();
        }
        let text = percentile_distribution(&h);
        assert!(text.starts_with("       Value     Percentile TotalCount 1/(1-Percentile)\n\n"));
        assert!(text.contains("Total count    =            4]"), "{text}");
        let last_data = text
            .lines()
            .rfind(|l| !l.starts_with('#') && !l.is_empty())
            .unwrap();
        assert!(last_data.contains("1.000000000000          4"), "{text}");
    }

    /// Merging the intervals of two logs equals recording every value
    /// into one histogram: what makes logs from many machines summable.
    #[test]
    fn merged_interval_logs_equal_one_histogram_of_all_values() {
        let mut all = Histogram::<u64>::new(3).unwrap();
        let mut logs = Vec::new();
        for seed in [1u64, 2] {
            let mut rng = fastrand::Rng::with_seed(seed);
            let mut buf = Vec::new();
            let mut ser = V2DeflateSerializer::new();
            {
                let mut log = IntervalLogWriterBuilder::new()
                    .begin_log_with(&mut buf, &mut ser)
                    .unwrap();
                for i in 0..3u64 {
                    let mut h = Histogram::<u64>::new(3).unwrap();
                    for _ in 0..1000 {
                        let v = rng.u64(90_000..2_100_000);
                        h.record(v).unwrap();
                        all.record(v).unwrap();
                    }
                    log.write_histogram(&h, Duration::from_secs(i), Duration::from_secs(1), None)
                        .unwrap();
                }
            }
            logs.push(buf);
        }
        let mut merged = Histogram::<u64>::new(3).unwrap();
        let mut de = Deserializer::new();
        for log in &logs {
            for entry in IntervalLogIterator::new(log) {
                if let LogEntry::Interval(ilh) = entry.unwrap() {
                    let bytes = base64_decode(ilh.encoded_histogram());
                    let h: Histogram<u64> = de.deserialize(&mut &bytes[..]).unwrap();
                    merged.add(&h).unwrap();
                }
            }
        }
        assert_eq!(merged, all);
    }

    fn base64_decode(s: &str) -> Vec<u8> {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.decode(s).unwrap()
    }
}
