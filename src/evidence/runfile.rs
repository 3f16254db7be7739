/*!
`run.json` as every reader takes it (`report`, `compare`, `plot`,
`--baseline`, `replay`): one typed schema, checked, instead of JSON values
read with defaults (which turned `null`, `[1,2,3]`, `"totals": "lots"` or a
negative count into a run of zero overflows with a "clean" verdict).

The fields are the writer's (`results::RunResults`, and `results_dir`'s
incomplete form), with the writer's types: the `Verdict` enum itself, u64
counts (a negative or fractional count, or a string, is refused by serde),
i32 exit statuses. Fields a reader does not use are not read (the
fingerprint stays free-form JSON, as it is written). Schema versions 1 (the
recorded fixtures) and 2 read; anything newer is refused with "upgrade".

Parsing is pure (bytes in, `RunFile` or one line out); reading the file,
bounded and refusing anything but a regular file, is `read`.
*/

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use crate::domain::{EXIT_CANNOT_TEST, EXIT_CLEAN, EXIT_DROPPED, SCHEMA_VERSION};
use crate::evidence::results::Verdict;

/// The largest run.json read. The writer's, at most 1,000 anomalies, the
/// fingerprint and one entry per worker (1,024 workers at most, ~2 KiB
/// each), stays near 2 MiB; a file eight times that is not ours.
pub const MAX_RUN_JSON_BYTES: u64 = 16 << 20;

/// The oldest schema version still read.
pub const OLDEST_SCHEMA_VERSION: u32 = 1;

/// What the readers take from run.json.
#[derive(Debug, Clone, Deserialize)]
pub struct RunFile {
    pub schema_version: u32,
    pub verdict: Verdict,
    /// The process's exit status; none while the run is going or after it
    /// was killed.
    #[serde(default)]
    pub exit_status: Option<i32>,
    /// The exact command line.
    pub argv: Vec<String>,
    pub config: Config,
    /// --inject-drop-every discarded overflows on purpose.
    #[serde(default)]
    pub injected: bool,
    #[serde(default)]
    pub elapsed_ns: Option<u64>,
    /// Absent only while a run is incomplete.
    #[serde(default)]
    pub totals: Option<Totals>,
    #[serde(default)]
    pub warnings: Vec<String>,
    #[serde(default)]
    pub inconclusive_because: Vec<String>,
    #[serde(default)]
    pub partial_files: Vec<String>,
    /// Why the run could not start (an incomplete run, exit 125).
    #[serde(default)]
    pub setup_failure: Option<String>,
    #[serde(default)]
    pub pseudo_nmi: Option<PseudoNmi>,
    /// The machine, free-form as `pmustress env --json` prints it.
    #[serde(default)]
    pub fingerprint: serde_json::Value,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Config {
    pub period: u64,
    pub skid: u64,
    /// Version 1 had none: it was the skid then.
    #[serde(default)]
    pub interrupt_skid: Option<u64>,
    pub event: Event,
    #[serde(default)]
    pub inject_drop_every: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Event {
    pub spec: String,
    pub description: String,
    pub software: bool,
}

#[derive(Debug, Clone, Deserialize, serde::Serialize)]
pub struct PseudoNmi {
    pub verdict: String,
    #[serde(default)]
    pub evidence: Vec<String>,
}

/// The run's totals, as far as readers use them.
#[derive(Debug, Clone, Deserialize)]
pub struct Totals {
    pub accounted_overflows: u64,
    pub dropped_interrupts: u64,
    #[serde(default)]
    pub injected: u64,
    /// Anomaly windows by kind (names as written, so older kinds still
    /// read).
    #[serde(default)]
    pub anomalies: BTreeMap<String, u64>,
}

impl RunFile {
    /// Parses and checks run.json's bytes; the error is one line.
    pub fn parse(bytes: &[u8]) -> Result<RunFile> {
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
                if (u64::from(OLDEST_SCHEMA_VERSION)..=u64::from(SCHEMA_VERSION)).contains(&v) => {}
            Some(v) if v > u64::from(SCHEMA_VERSION) => bail!(
                "schema_version {v} is newer than this pmustress reads ({OLDEST_SCHEMA_VERSION} to {SCHEMA_VERSION}): upgrade pmustress"
            ),
            Some(v) => bail!(
                "schema_version {v} is not one this pmustress reads ({OLDEST_SCHEMA_VERSION} to {SCHEMA_VERSION})"
            ),
            None => {
                bail!("not a pmustress run.json: schema_version is missing or not a whole number")
            }
        }
        let run: RunFile = serde_json::from_slice(bytes)
            .map_err(|e| anyhow::anyhow!("not a pmustress run.json: {e}"))?;
        run.check()?;
        Ok(run)
    }

    /// What the writer never writes: a verdict without totals or without
    /// its exit status, more drops than overflows, a verdict its counts
    /// contradict.
    fn check(&self) -> Result<()> {
        let verdict = self.verdict;
        if verdict == Verdict::Incomplete {
            if let Some(s) = self.exit_status.filter(|&s| s != EXIT_CANNOT_TEST) {
                bail!("an incomplete run has no exit status but {EXIT_CANNOT_TEST}, not {s}");
            }
            return Ok(());
        }
        let name = verdict_name(verdict);
        let Some(t) = &self.totals else {
            bail!("the verdict is {name} but there are no totals");
        };
        let Some(status) = self.exit_status else {
            bail!("the verdict is {name} but there is no exit_status");
        };
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
            Verdict::Interrupted => (129..=128 + 64).contains(&status),
            Verdict::Incomplete => true,
        };
        if !fits {
            bail!(
                "the verdict {name} does not fit exit_status {status} and {} dropped interrupts",
                t.dropped_interrupts
            );
        }
        Ok(())
    }

    /// Whether the run reached a verdict (it was not killed, and it
    /// started).
    pub fn finished(&self) -> bool {
        self.verdict != Verdict::Incomplete
    }

    /// Drops were injected on purpose (a self-test), whatever the run's
    /// end: a killed run's config says it too.
    pub fn is_self_test(&self) -> bool {
        self.injected || self.config.inject_drop_every.is_some()
    }
}

/// The verdict as run.json spells it.
pub fn verdict_name(v: Verdict) -> &'static str {
    match v {
        Verdict::Clean => "clean",
        Verdict::Dropped => "dropped",
        Verdict::Inconclusive => "inconclusive",
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

/// `dir/run.json`, read (bounded) and checked.
pub fn read(dir: &Path) -> Result<RunFile> {
    let path = dir.join("run.json");
    let bytes = read_bounded(&path, MAX_RUN_JSON_BYTES)?;
    RunFile::parse(&bytes).with_context(|| path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"{"schema_version": 2, "verdict": "clean", "exit_status": 0,
        "argv": ["pmustress", "run"],
        "config": {"period": 1000, "skid": 10,
                   "event": {"spec": "task-clock", "description": "d", "software": true}},
        "totals": {"accounted_overflows": 500, "dropped_interrupts": 0}}"#;

    fn with(field: &str, value: &str) -> String {
        let mut v: serde_json::Value = serde_json::from_str(MINIMAL).unwrap();
        let target = v.pointer_mut(field).unwrap();
        *target = serde_json::from_str(value).unwrap();
        v.to_string()
    }

    fn refusal(text: &str) -> String {
        let e = RunFile::parse(text.as_bytes()).expect_err(text);
        let line = format!("{e:#}");
        assert!(!line.contains('\n'), "{line}");
        line
    }

    #[test]
    fn the_minimal_run_reads() {
        let r = RunFile::parse(MINIMAL.as_bytes()).unwrap();
        assert_eq!(r.verdict, Verdict::Clean);
        assert_eq!(r.totals.unwrap().accounted_overflows, 500);
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
        assert!(refusal(&with("/totals/dropped_interrupts", "501")).contains("out of only"));
        let mut v: serde_json::Value = serde_json::from_str(MINIMAL).unwrap();
        v.as_object_mut().unwrap().remove("totals");
        assert!(refusal(&v.to_string()).contains("no totals"));
    }

    #[test]
    fn an_incomplete_run_reads_without_totals_or_status() {
        let mut v: serde_json::Value = serde_json::from_str(MINIMAL).unwrap();
        let o = v.as_object_mut().unwrap();
        o.remove("totals");
        o.remove("exit_status");
        o.insert("verdict".into(), "incomplete".into());
        let r = RunFile::parse(v.to_string().as_bytes()).unwrap();
        assert!(!r.finished());
        assert_eq!(r.exit_status, None);
        v["exit_status"] = 0.into();
        assert!(refusal(&v.to_string()).contains("incomplete"));
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
