/*!
`run.json` as every reader takes it (`report`, `compare`, `plot`,
`--baseline`, `replay`): the writer's own types (`results::RunStarted` while
a run is unfinished, `results::RunResults` once it has a verdict), parsed
and checked, never JSON values read with defaults (which turned `null`,
`[1,2,3]`, `"totals": "lots"` or a negative count into a run of zero
overflows with a "clean" verdict).

Every field is read with the writer's type: the `Verdict` enum itself, u64
counts (a negative or fractional count, or a string, is refused by serde),
i32 exit statuses; only the fingerprint stays free-form JSON, as it is
written. Schema versions 1 to 3 read (older fields by the defaults and
aliases `results` declares; schema 1's single skid is its interrupt skid);
anything newer is refused with "upgrade".

Parsing is pure (bytes in, `RunDocument` or one line out); reading the file,
bounded and refusing anything but a regular file, is `read`.
*/

use std::io::Read as _;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use crate::config::RunConfig;
use crate::domain::{EXIT_CANNOT_TEST, EXIT_CLEAN, EXIT_DROPPED, RUN_SCHEMA_VERSION};
use crate::fingerprint::PseudoNmi;
use crate::judge::JudgeConfig;
use crate::results::schema::{Counts, RunResults, RunStarted, ToolInfo, Verdict};
use crate::verdict::{Reason, Warning};

/// The largest run.json read. The writer's, at most 1,000 anomalies, the
/// fingerprint and one entry per worker (1,024 workers at most, ~2 KiB
/// each), stays near 2 MiB; a file eight times that is not ours.
pub const MAX_RUN_JSON_BYTES: u64 = 16 << 20;

/// The oldest schema version still read.
pub const OLDEST_RUN_SCHEMA_VERSION: u32 = 1;

/// run.json as read: either stage of the writer's document, by its verdict
/// (serialised back as that stage, unchanged: `report --format json`).
#[derive(Debug, Clone, serde::Serialize)]
#[serde(untagged)]
pub enum RunDocument {
    /// The run ended with a verdict.
    Finished(Box<RunResults>),
    /// Going, killed, or never started (verdict `incomplete`).
    Unfinished(Box<RunStarted>),
}

impl RunDocument {
    /// Parses and checks run.json's bytes; the error is one line.
    pub fn parse(bytes: &[u8]) -> Result<RunDocument> {
        // The version first, so a newer file says "upgrade" rather than
        // whichever field it changed.
        #[derive(Deserialize)]
        struct Version {
            schema_version: Option<serde_json::Value>,
        }
        let found = match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
            Some(b'{') => None,
            None => Some("nothing"),
            Some(b'n') => Some("null"),
            Some(b'[') => Some("an array"),
            Some(b'"') => Some("a string"),
            Some(b't' | b'f') => Some("a boolean"),
            Some(b'-' | b'0'..=b'9') => Some("a number"),
            Some(_) => Some("something else"),
        };
        if let Some(found) = found {
            bail!("not a pmustress run.json: expected a JSON object, found {found}");
        }
        let version: Version = serde_json::from_slice(bytes)
            .map_err(|e| anyhow::anyhow!("not a pmustress run.json: {e}"))?;
        match version.schema_version.as_ref().and_then(|v| v.as_u64()) {
            Some(v)
                if (u64::from(OLDEST_RUN_SCHEMA_VERSION)..=u64::from(RUN_SCHEMA_VERSION))
                    .contains(&v) => {}
            Some(v) if v > u64::from(RUN_SCHEMA_VERSION) => bail!(
                "schema_version {v} is newer than this pmustress reads ({OLDEST_RUN_SCHEMA_VERSION} to {RUN_SCHEMA_VERSION}): upgrade pmustress"
            ),
            Some(v) => bail!(
                "schema_version {v} is not one this pmustress reads ({OLDEST_RUN_SCHEMA_VERSION} to {RUN_SCHEMA_VERSION})"
            ),
            None => {
                bail!("not a pmustress run.json: schema_version is missing or not a whole number")
            }
        }
        let mut json: serde_json::Value = serde_json::from_slice(bytes)
            .map_err(|e| anyhow::anyhow!("not a pmustress run.json: {e}"))?;
        // Schema 1 had one skid for signals and interrupts alike.
        if let Some(config) = json.get_mut("config").and_then(|c| c.as_object_mut())
            && !config.contains_key("interrupt_skid")
            && let Some(skid) = config.get("skid").cloned()
        {
            config.insert("interrupt_skid".into(), skid);
        }
        #[derive(Deserialize)]
        struct Stage {
            verdict: Verdict,
        }
        let stage: Stage = serde_json::from_value(json.clone())
            .map_err(|e| anyhow::anyhow!("not a pmustress run.json: {e}"))?;
        let run = if stage.verdict == Verdict::Incomplete {
            RunDocument::Unfinished(
                serde_json::from_value(json)
                    .map_err(|e| anyhow::anyhow!("not a pmustress run.json: {e}"))?,
            )
        } else {
            RunDocument::Finished(
                serde_json::from_value(json)
                    .map_err(|e| anyhow::anyhow!("not a pmustress run.json: {e}"))?,
            )
        };
        run.check()?;
        Ok(run)
    }

    /// What the writer never writes: an incomplete run with an exit
    /// status but 125, more drops than overflows, a verdict its counts or
    /// exit status contradict.
    fn check(&self) -> Result<()> {
        let run = match self {
            RunDocument::Unfinished(started) => {
                if let Some(s) = started.exit_status.filter(|&s| s != EXIT_CANNOT_TEST) {
                    bail!("an incomplete run has no exit status but {EXIT_CANNOT_TEST}, not {s}");
                }
                return Ok(());
            }
            RunDocument::Finished(run) => run,
        };
        let (verdict, status, t) = (run.verdict, run.exit_status, &run.totals);
        let name = verdict_name(verdict);
        if t.dropped_interrupts > t.accounted_overflows {
            bail!(
                "totals: {} dropped interrupts out of only {} overflows",
                t.dropped_interrupts,
                t.accounted_overflows
            );
        }
        let fits = match verdict {
            Verdict::Clean => status == EXIT_CLEAN && t.dropped_interrupts == 0,
            Verdict::Dropped => status == EXIT_DROPPED && t.dropped_interrupts > 0,
            Verdict::Inconclusive => status == EXIT_CANNOT_TEST && t.dropped_interrupts == 0,
            Verdict::SelfTestPassed => {
                status == EXIT_CLEAN
                    && t.injected > 0
                    && crate::verdict::finds_exactly_the_injected(&t.interrupts)
            }
            Verdict::SelfTestFailed => status == EXIT_DROPPED,
            Verdict::Interrupted => (129..=128 + 64).contains(&status),
            Verdict::Incomplete => false,
        };
        if !fits {
            bail!(
                "the verdict {name} does not fit exit_status {status} and {} dropped interrupts",
                t.dropped_interrupts
            );
        }
        Ok(())
    }

    /// The finished run, if it finished.
    pub fn results(&self) -> Option<&RunResults> {
        match self {
            RunDocument::Finished(run) => Some(run),
            RunDocument::Unfinished(_) => None,
        }
    }

    /// Whether the run reached a verdict (it was not killed, and it
    /// started).
    pub fn finished(&self) -> bool {
        self.results().is_some()
    }

    pub fn schema_version(&self) -> u32 {
        match self {
            RunDocument::Finished(run) => run.schema_version,
            RunDocument::Unfinished(started) => started.schema_version,
        }
    }

    pub fn verdict(&self) -> Verdict {
        match self {
            RunDocument::Finished(run) => run.verdict,
            RunDocument::Unfinished(started) => started.verdict,
        }
    }

    /// The process's exit status; none while the run is going or after it
    /// was killed.
    pub fn exit_status(&self) -> Option<i32> {
        match self {
            RunDocument::Finished(run) => Some(run.exit_status),
            RunDocument::Unfinished(started) => started.exit_status,
        }
    }

    /// The exact command line.
    pub fn argv(&self) -> &[String] {
        match self {
            RunDocument::Finished(run) => &run.argv,
            RunDocument::Unfinished(started) => &started.argv,
        }
    }

    pub fn config(&self) -> &RunConfig {
        match self {
            RunDocument::Finished(run) => &run.config,
            RunDocument::Unfinished(started) => &started.config,
        }
    }

    /// How to judge the run's stream again (none before schema 2).
    pub fn judge(&self) -> Option<&JudgeConfig> {
        match self {
            RunDocument::Finished(run) => run.judge.as_ref(),
            RunDocument::Unfinished(started) => started.judge.as_ref(),
        }
    }

    /// The pmustress that wrote it (none before schema 3's unfinished runs).
    pub fn tool(&self) -> Option<&ToolInfo> {
        match self {
            RunDocument::Finished(run) => Some(&run.tool),
            RunDocument::Unfinished(started) => started.tool.as_ref(),
        }
    }

    /// When the run started, as seconds since 1970 (UTC).
    pub fn started_unix_s(&self) -> Option<u64> {
        match self {
            RunDocument::Finished(run) => run.started_unix_s,
            RunDocument::Unfinished(started) => started.started_unix_s,
        }
    }

    /// Absent while a run is unfinished.
    pub fn totals(&self) -> Option<&Counts> {
        self.results().map(|r| &r.totals)
    }

    pub fn elapsed_ns(&self) -> Option<u64> {
        self.results().map(|r| r.elapsed_ns)
    }

    /// Where a finished run's overflow and drop counts contradict each
    /// other, as pmustress never writes them: the top-level totals against
    /// the judge's (`interrupts`) and against the sum of the workers', or
    /// more overflows than the run had nanoseconds per worker (no counter
    /// interrupts that often). Readers that take the rate from these
    /// counts (`--baseline`) refuse such a file.
    pub fn counts_contradict(&self) -> Option<String> {
        let run = self.results()?;
        let t = &run.totals;
        let sum = |f: fn(&Counts) -> u64| {
            run.workers
                .iter()
                .try_fold(0u64, |acc, w| acc.checked_add(f(&w.counts)))
        };
        let pairs = [
            (
                "accounted_overflows",
                t.accounted_overflows,
                "interrupts.overflows",
                Some(t.interrupts.overflows),
            ),
            (
                "dropped_interrupts",
                t.dropped_interrupts,
                "interrupts.dropped",
                Some(t.interrupts.dropped),
            ),
            (
                "accounted_overflows",
                t.accounted_overflows,
                "the workers' sum",
                sum(|c| c.accounted_overflows),
            ),
            (
                "dropped_interrupts",
                t.dropped_interrupts,
                "the workers' sum",
                sum(|c| c.dropped_interrupts),
            ),
        ];
        // Schema 1 has no `interrupts`, and a run.json may list no workers.
        let judged = t.interrupts != Default::default();
        for (field, value, other, against) in pairs {
            let recorded = if other == "the workers' sum" {
                !run.workers.is_empty()
            } else {
                judged
            };
            if !recorded {
                continue;
            }
            if against != Some(value) {
                let against = against.map_or("more than 2^64".to_string(), |n| n.to_string());
                return Some(format!(
                    "its totals contradict themselves: {field} is {value} but {other} is {against}"
                ));
            }
        }
        let most = run
            .elapsed_ns
            .saturating_mul(run.workers.len().max(1) as u64);
        (t.accounted_overflows > most).then(|| {
            format!(
                "its totals cannot be: {} overflows in {} ns with {} workers (more than one a nanosecond)",
                t.accounted_overflows,
                run.elapsed_ns,
                run.workers.len()
            )
        })
    }

    /// None only in an unfinished run written before schema 3.
    pub fn pseudo_nmi(&self) -> Option<&PseudoNmi> {
        match self {
            RunDocument::Finished(run) => Some(&run.pseudo_nmi),
            RunDocument::Unfinished(started) => started.pseudo_nmi.as_ref(),
        }
    }

    /// The machine, free-form as `pmustress env --json` prints it (null in
    /// an unfinished run written before schema 3).
    pub fn fingerprint(&self) -> &serde_json::Value {
        match self {
            RunDocument::Finished(run) => &run.fingerprint,
            RunDocument::Unfinished(started) => &started.fingerprint,
        }
    }

    /// Why the run could not start (an incomplete run, exit 125).
    pub fn setup_failure(&self) -> Option<&str> {
        match self {
            RunDocument::Finished(_) => None,
            RunDocument::Unfinished(started) => started.setup_failure.as_deref(),
        }
    }

    pub fn warnings(&self) -> &[Warning] {
        self.results().map_or(&[], |r| &r.warnings)
    }

    pub fn inconclusive_because(&self) -> &[Reason] {
        self.results().map_or(&[], |r| &r.inconclusive_because)
    }

    pub fn partial_files(&self) -> &[String] {
        self.results().map_or(&[], |r| &r.partial_files)
    }

    /// Drops were injected on purpose (a self-test), whatever the run's
    /// end: a killed run's config says it too.
    pub fn is_self_test(&self) -> bool {
        self.results().is_some_and(|r| r.injected) || self.config().inject_drop_every.is_some()
    }
}

/// The verdict as run.json spells it.
pub fn verdict_name(v: Verdict) -> &'static str {
    match v {
        Verdict::Clean => "clean",
        Verdict::Dropped => "dropped",
        Verdict::Inconclusive => "inconclusive",
        Verdict::SelfTestPassed => "self-test-passed",
        Verdict::SelfTestFailed => "self-test-failed",
        Verdict::Interrupted => "interrupted",
        Verdict::Incomplete => "incomplete",
    }
}

/// Opens `path` for reading if it is a regular file: a FIFO, device or
/// socket is refused without waiting on it (opened O_NONBLOCK, never read).
pub fn open_regular(path: &Path) -> Result<(std::fs::File, std::fs::Metadata)> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .with_context(|| format!("reading {}", path.display()))?;
    let meta = file
        .metadata()
        .with_context(|| format!("reading {}", path.display()))?;
    if !meta.is_file() {
        bail!("{} is not a regular file", path.display());
    }
    Ok((file, meta))
}

/// Reads `path` whole, if it is a regular file of at most `max` bytes:
/// a FIFO or device is refused without waiting on it (O_NONBLOCK), and a
/// huge file without reading it.
pub fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>> {
    let (file, meta) = open_regular(path)?;
    if meta.len() > max {
        bail!(
            "{} is {} bytes, more than the {max} a pmustress run writes",
            path.display(),
            meta.len()
        );
    }
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("reading {}", path.display()))?;
    if bytes.len() as u64 > max {
        bail!("{} grew past {max} bytes while read", path.display());
    }
    Ok(bytes)
}

/// A reader that fails once more than `max` bytes pass without a newline:
/// what is read line by line (anomalies.csv) is then held a line at a
/// time, never a 300 MB "line".
pub struct BoundedLines<R> {
    inner: R,
    max: u64,
    since_newline: u64,
}

impl<R> BoundedLines<R> {
    pub fn new(inner: R, max: u64) -> BoundedLines<R> {
        BoundedLines {
            inner,
            max,
            since_newline: 0,
        }
    }
}

impl<R: std::io::Read> std::io::Read for BoundedLines<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        for &b in &buf[..n] {
            self.since_newline = if b == b'\n' {
                0
            } else {
                self.since_newline + 1
            };
            if self.since_newline > self.max {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!(
                        "a line longer than {} bytes: not a file pmustress wrote",
                        self.max
                    ),
                ));
            }
        }
        Ok(n)
    }
}

/// `dir/run.json`, read (bounded) and checked.
pub fn read(dir: &Path) -> Result<RunDocument> {
    let path = dir.join("run.json");
    let bytes = read_bounded(&path, MAX_RUN_JSON_BYTES)?;
    RunDocument::parse(&bytes).with_context(|| path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run.json pmustress wrote (schema 1, clean, 943 overflows).
    const RECORDED: &str = include_str!("../../tests/fixtures/results/task-clock-clean/run.json");

    fn with(field: &str, value: &str) -> String {
        let mut v: serde_json::Value = serde_json::from_str(RECORDED).unwrap();
        let target = v.pointer_mut(field).unwrap();
        *target = serde_json::from_str(value).unwrap();
        v.to_string()
    }

    fn refusal(text: &str) -> String {
        let e = RunDocument::parse(text.as_bytes()).expect_err(text);
        let line = format!("{e:#}");
        assert!(!line.contains('\n'), "{line}");
        line
    }

    #[test]
    fn a_recorded_run_reads() {
        let r = RunDocument::parse(RECORDED.as_bytes()).unwrap();
        assert_eq!(r.verdict(), Verdict::Clean);
        assert_eq!(r.totals().unwrap().accounted_overflows, 943);
        // Schema 1 had one skid, for interrupts too.
        assert_eq!(r.config().interrupt_skid, r.config().skid);
        assert_eq!(r.config().skid, 250_000);
    }

    #[test]
    fn bad_files_are_refused_with_the_reason() {
        assert!(refusal("null").ends_with("expected a JSON object, found null"));
        assert!(refusal(" [1,2,3]").ends_with("found an array"));
        assert!(refusal("").ends_with("found nothing"));
        assert!(refusal("{").contains("not a pmustress run.json: EOF"));
        assert!(refusal("{}").contains("schema_version is missing"));
        assert!(refusal(&with("/schema_version", "999")).contains("upgrade pmustress"));
        assert!(refusal(&with("/schema_version", "0")).contains("schema_version 0"));
        assert!(refusal(&with("/schema_version", "\"2\"")).contains("schema_version"));
        assert!(refusal(&with("/totals", "\"lots\"")).contains("invalid type"));
        assert!(refusal(&with("/totals/accounted_overflows", "-5")).contains("-5"));
        assert!(refusal(&with("/totals/dropped_interrupts", "1.5")).contains("1.5"));
        assert!(refusal(&with("/verdict", "\"great\"")).contains("great"));
        assert!(refusal(&with("/exit_status", "1")).contains("does not fit"));
        assert!(refusal(&with("/totals/dropped_interrupts", "3")).contains("does not fit"));
        assert!(refusal(&with("/totals/dropped_interrupts", "944")).contains("out of only"));
        assert!(refusal(&with("/config/period", "\"1ms\"")).contains("invalid type"));
        assert!(refusal(&with("/anomalies/0/kind", "7")).contains("invalid type"));
        let mut v: serde_json::Value = serde_json::from_str(RECORDED).unwrap();
        v.as_object_mut().unwrap().remove("totals");
        assert!(refusal(&v.to_string()).contains("missing field `totals`"));
    }

    #[test]
    fn an_incomplete_run_reads_without_totals_or_status() {
        let mut v: serde_json::Value = serde_json::from_str(RECORDED).unwrap();
        let o = v.as_object_mut().unwrap();
        o.remove("totals");
        o.remove("exit_status");
        o.insert("verdict".into(), "incomplete".into());
        let r = RunDocument::parse(v.to_string().as_bytes()).unwrap();
        assert!(!r.finished());
        assert_eq!(r.exit_status(), None);
        assert!(r.totals().is_none());
        v["exit_status"] = 0.into();
        assert!(refusal(&v.to_string()).contains("incomplete"));
    }

    /// Both stages of run.json read back into the very values written.
    #[test]
    fn what_the_writer_writes_reads_back_unchanged() {
        let RunDocument::Finished(recorded) = RunDocument::parse(RECORDED.as_bytes()).unwrap()
        else {
            panic!("a finished run");
        };
        let mut written = *recorded;
        written.schema_version = RUN_SCHEMA_VERSION;
        let machine = crate::fingerprint::Fingerprint::collect(Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/fingerprint/graviton2-c6g-6.1-disabled"
        )));
        let json = serde_json::to_string_pretty(&written).unwrap();
        let read = RunDocument::parse(json.as_bytes()).unwrap();
        assert_eq!(
            serde_json::to_value(read.results().unwrap()).unwrap(),
            serde_json::to_value(&written).unwrap()
        );
        let started = RunStarted::going(&written.config, &written.argv, &machine, 1_700_000_000);
        let json = serde_json::to_string_pretty(&started).unwrap();
        let RunDocument::Unfinished(read) = RunDocument::parse(json.as_bytes()).unwrap() else {
            panic!("an unfinished run");
        };
        assert_eq!(
            serde_json::to_value(&read).unwrap(),
            serde_json::to_value(&started).unwrap()
        );
        let failed =
            RunStarted::never_started(&written.config, &written.argv, &machine, 1, "no PMU".into());
        let read = RunDocument::parse(&serde_json::to_vec(&failed).unwrap()).unwrap();
        assert_eq!(
            (read.exit_status(), read.setup_failure()),
            (Some(125), Some("no PMU"))
        );
        // Where a run that never finished ran is known all the same.
        assert_eq!(
            read.pseudo_nmi().map(|p| p.verdict.as_str()),
            Some("disabled")
        );
    }

    #[test]
    fn every_recorded_fixture_reads() {
        for dir in [
            "tests/fixtures/results/task-clock-clean",
            "tests/fixtures/results/task-clock-injected",
            "tests/fixtures/qemu/nopnmi-migrate",
            "tests/fixtures/qemu/pnmi-migrate",
            "tests/fixtures/oracle/smp2-nopnmi-w2-none-free-50k",
            "tests/fixtures/oracle/smp4-nopnmi-w4-pingpong-free-50k",
            "tests/fixtures/oracle/smp4-pnmi-w4-pingpong-free-50k",
        ] {
            let r = read(Path::new(dir)).unwrap_or_else(|e| panic!("{dir}: {e:#}"));
            assert!(r.finished(), "{dir}");
        }
    }

    #[test]
    fn big_files_and_fifos_are_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b' '; 100]).unwrap();
        let e = read_bounded(&big, 99).unwrap_err();
        assert!(format!("{e:#}").contains("more than the 99"), "{e:#}");
        let fifo = dir.path().join("fifo");
        if std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .is_ok_and(|s| s.success())
        {
            let e = read_bounded(&fifo, 99).unwrap_err();
            assert!(format!("{e:#}").contains("not a regular file"), "{e:#}");
        }
    }
}
