/*!
The results directory, written as the run goes.

- `run.json` is written first with verdict `incomplete` (so even a SIGKILLed
  run leaves a parseable directory) and replaced at the end, each time by
  atomic rename.
- `raw.csv.gz`: every observation the judge saw, one per line
  (`records`), as one gzip member per second (or per
  `RAW_MEMBER_BYTES` of text, when that comes first): a killed run leaves
  every whole member readable (`zcat`, `pmustress replay`).
- `anomalies.csv`: one row per anomaly, flushed every second.
- `hist-worker<N>.hlog`: HdrHistogram interval logs (V2 deflate), one
  interval per second per worker: mergeable across runs and machines.
- `deltas.hgrm`: the percentile distribution of all deltas at the end.
- `deltas.csv` (`--raw`): every delta.

Write errors do not panic: they are kept, the run stops early, and whatever
could be saved stays (see `failure`). Once a write fails no file of the
run is written again (a retried buffer would duplicate rows): each is cut
back to its last complete line (raw.csv.gz: its last whole gzip member) and
named in run.json's `partial_files`.

A results directory is written by one run only: a default name is made
unique (milliseconds, then `-2`, `-3`... by an atomic mkdir), an `--out`
that already holds a run's files is refused unless `--replace` (other
files, such as a wrapper's log, are left alone), and the directory
is locked (flock) for as long as the run writes. Every file is created,
renamed and removed relative to the directory opened at the start (a
descriptor, `*at` calls), not by its path: a directory renamed or replaced
while the run writes (`mv out out.old; pmustress run --out out`) keeps each
run's files together, and the run says where its results went.
*/

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::fd::AsFd as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use serde::Serialize;

use flate2::Compression;
use flate2::write::GzEncoder;

use crate::config::RunConfig;
use crate::engine::kernel::process;
use crate::fingerprint::Fingerprint;
use crate::judge::{Anomaly, ClosedWindow, Observation};
use crate::records::{self, Row};
use crate::results::schema::{AnomalyRecord, RunStarted, anomaly_columns};

const FLUSH_EVERY_NS: u64 = 1_000_000_000;

/// Space held back for the final run.json (at most 1000 anomalies plus the
/// fingerprint fit well inside), so a disk that fills up during the run
/// still gets its verdict written.
pub const RESERVE_BYTES: usize = 2 << 20;
const RESERVE_NAME: &str = process::RESERVE;

/// The name of a default results directory: `<UTC time>-<host>-<event>`.
pub fn default_dir_name(now: SystemTime, host: &str, event: &str) -> String {
    // 2026-11-30T14:24:08.123Z -> 20261130T142408.123Z: sortable, no
    // colons, and runs a second apart or less get their own directory.
    let stamp: String = humantime::format_rfc3339_millis(now)
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
    let mut text =
        serde_json::to_string_pretty(value).with_context(|| format!("serialising {name}"))?;
    text.push('\n');
    write_atomically(dir, name, text.as_bytes())
}

/// Writes `bytes` to `dir/name` via a temporary file and a rename: the file
/// is whole or absent (or the old one), never cut short.
pub fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let path = dir.join(name);
    let tmp = dir.join(format!(".{name}.tmp"));
    let write = || -> std::io::Result<()> {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    };
    if let Err(e) = write() {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("writing {}", tmp.display()));
    }
    std::fs::rename(&tmp, &path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        anyhow::Error::new(e).context(format!("renaming {} to {}", tmp.display(), path.display()))
    })
}

/// The results directory as opened (and locked) when the run claimed it:
/// files are created, renamed and removed relative to this descriptor.
pub struct Dir {
    /// The directory itself, flocked for as long as the run writes.
    fd: File,
    /// The path it had when claimed.
    path: PathBuf,
}

impl Dir {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates (or truncates) `name` for writing.
    fn create(&self, name: &str) -> io::Result<File> {
        use rustix::fs::{Mode, OFlags};
        let fd = rustix::fs::openat(
            &self.fd,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )?;
        Ok(File::from(fd))
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        Ok(rustix::fs::unlinkat(
            &self.fd,
            name,
            rustix::fs::AtFlags::empty(),
        )?)
    }

    /// `write_atomically`, in this directory.
    fn write_atomically(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let tmp = format!(".{name}.tmp");
        let write = || -> io::Result<()> {
            let mut f = self.create(&tmp)?;
            f.write_all(bytes)?;
            f.sync_all()
        };
        if let Err(e) = write() {
            let _ = self.remove(&tmp);
            return Err(e).with_context(|| format!("writing {}", self.path.join(&tmp).display()));
        }
        rustix::fs::renameat(&self.fd, tmp.as_str(), &self.fd, name).map_err(|e| {
            let _ = self.remove(&tmp);
            anyhow::Error::new(io::Error::from(e)).context(format!(
                "renaming {} to {name}",
                self.path.join(&tmp).display()
            ))
        })
    }

    fn write_json_atomically<T: Serialize>(&self, name: &str, value: &T) -> Result<()> {
        let mut text =
            serde_json::to_string_pretty(value).with_context(|| format!("serialising {name}"))?;
        text.push('\n');
        self.write_atomically(name, text.as_bytes())
    }

    /// `write_json_atomically`, or where that fails (no inode left for
    /// the temporary file, no space for a second copy) the file rewritten
    /// in place: for the run.json that says why a run could not start,
    /// which is better whole-or-cut-short than never written (the process
    /// already exits with the status it holds).
    fn write_json_even_in_place<T: Serialize>(&self, name: &str, value: &T) -> Result<()> {
        let atomic = self.write_json_atomically(name, value);
        let Err(e) = atomic else {
            return Ok(());
        };
        let mut text = serde_json::to_string_pretty(value)?;
        text.push('\n');
        let in_place = || -> io::Result<()> {
            let mut f = self.create(name)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()
        };
        in_place().map_err(|e2| e.context(format!("rewriting {name} in place too: {e2}")))
    }

    /// Where the directory is now, when its path no longer names it (it
    /// was renamed, removed or replaced while the run wrote it).
    pub fn moved_to(&self) -> Option<PathBuf> {
        let ours = rustix::fs::fstat(&self.fd).ok()?;
        let same = rustix::fs::stat(&self.path)
            .is_ok_and(|now| (now.st_dev, now.st_ino) == (ours.st_dev, ours.st_ino));
        if same {
            return None;
        }
        use std::os::fd::AsRawFd as _;
        Some(
            std::fs::read_link(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
                .unwrap_or_else(|_| PathBuf::from("(unknown)")),
        )
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        // A failed allocation must not rename in a closed descriptor.
        process::forget_results_dir();
    }
}

/// A file that is never written again after its first failed write (so a
/// buffer retried by BufWriter or csv, or flushed on drop once space is
/// back, cannot duplicate rows), nor after any file of the same run failed
/// (`stopped`: what a run leaves ends where it stopped writing), and that
/// knows where its last complete line ends.
pub struct Guarded {
    file: File,
    name: String,
    written: u64,
    complete: u64,
    failed: bool,
    /// Shared by the run's files: set once one of them failed.
    stopped: Arc<AtomicBool>,
    /// Text: a line is the unit. Else (raw.csv.gz) the unit is whatever
    /// was written between two `commit`s (one whole gzip member).
    lines: bool,
}

impl Guarded {
    fn create(dir: &Dir, name: &str, stopped: &Arc<AtomicBool>) -> Result<Guarded> {
        Ok(Guarded {
            file: dir
                .create(name)
                .with_context(|| format!("creating {}", dir.path.join(name).display()))?,
            name: name.to_string(),
            written: 0,
            complete: 0,
            failed: false,
            stopped: Arc::clone(stopped),
            lines: true,
        })
    }

    fn create_binary(dir: &Dir, name: &str, stopped: &Arc<AtomicBool>) -> Result<Guarded> {
        Ok(Guarded {
            lines: false,
            ..Guarded::create(dir, name, stopped)?
        })
    }

    /// Binary files: everything written so far is a whole unit.
    fn commit(&mut self) {
        if !self.refuses() {
            self.complete = self.written;
        }
    }

    fn refuses(&self) -> bool {
        self.failed || self.stopped.load(Ordering::Relaxed)
    }

    /// After a failed write (to this file or another of the run's): cuts
    /// the file back to its last complete line and returns its name; None
    /// if nothing failed.
    fn cut_if_failed(&self) -> Option<String> {
        if !self.refuses() {
            return None;
        }
        let _ = self.file.set_len(self.complete);
        Some(self.name.clone())
    }
}

impl Write for Guarded {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.refuses() {
            return Err(io::Error::other(format!(
                "{}: not written after an earlier failure",
                self.name
            )));
        }
        match self.file.write(buf) {
            Ok(n) => {
                if self.lines
                    && let Some(i) = buf[..n].iter().rposition(|&b| b == b'\n')
                {
                    self.complete = self.written + i as u64 + 1;
                }
                self.written += n as u64;
                Ok(n)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Err(e),
            Err(e) => {
                self.failed = true;
                self.stopped.store(true, Ordering::Relaxed);
                Err(e)
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// Why a results directory could not be claimed: the --out given is
/// wrong (exit 2, the user picks another), this machine cannot write there
/// now (exit 125: a full disk, no file descriptors left), or no --out was
/// given and the working directory takes no results directory (exit 125:
/// read-only, deleted, not ours to write; no flag is wrong).
#[derive(Debug, thiserror::Error)]
pub enum OutError {
    #[error("--out: {0}")]
    Usage(String),
    #[error("--out: {0}")]
    CannotTest(String),
    #[error("{0}")]
    WorkingDir(String),
}

/// Errors of the environment rather than of the path given.
fn environmental(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc::ENOSPC
                | libc::EDQUOT
                | libc::EFBIG
                | libc::EMFILE
                | libc::ENFILE
                | libc::ENOMEM
                | libc::EIO
        )
    )
}

/// Why `what` failed with `e`, and who can fix it: `given` says whether
/// the user named the directory (--out) or it is the default one, made in
/// the working directory.
fn out_error(what: String, e: &io::Error, given: bool) -> OutError {
    if !given {
        return OutError::WorkingDir(format!(
            "the working directory {} takes no results directory: {what} ({e}); run from a directory you can write to, or choose one with --out",
            working_directory()
        ));
    }
    if environmental(e) {
        let fix = if matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) {
            "free some space (or inodes: df -i) or choose another --out"
        } else if e.raw_os_error() == Some(libc::EFBIG) {
            "raise the file size limit (ulimit -f)"
        } else if e.raw_os_error() == Some(libc::EIO) {
            "check the disk, or choose another --out"
        } else {
            "raise the limit (ulimit -n) or close files"
        };
        OutError::CannotTest(format!("{what} ({e}): {fix}"))
    } else {
        OutError::Usage(format!("{what} ({e}): choose a directory you can write to"))
    }
}

/// The working directory's path, as the kernel has it when it was deleted
/// ("/tmp/x (deleted)").
fn working_directory() -> String {
    std::env::current_dir()
        .or_else(|_| std::fs::read_link("/proc/self/cwd"))
        .map_or_else(
            |_| "(which has no path now)".to_string(),
            |p| p.display().to_string(),
        )
}

/// Every file a run writes: a directory holding any of them holds a run
/// (refused unless `--replace`, which removes them first).
const WRITTEN: &[&str] = &[
    "run.json",
    "raw.csv.gz",
    "anomalies.csv",
    "deltas.csv",
    "deltas.hgrm",
    RESERVE_NAME,
    process::OOM_RUN_JSON,
];

/// Whether a run writes a file of this name (the `WRITTEN` ones, their
/// temporary files, the histogram logs).
fn is_result_file(name: &str) -> bool {
    let temporary = name
        .strip_prefix('.')
        .and_then(|n| n.strip_suffix(".tmp"))
        .is_some_and(|n| WRITTEN.contains(&n));
    WRITTEN.contains(&name)
        || temporary
        || (name.starts_with("hist-worker") && name.ends_with(".hlog"))
}

/// Creates (or takes) the results directory and locks it for this run.
/// `given`: the user named it (--out); else it is a default name, made
/// unique with a suffix if another run took it first.
pub fn claim(dir: &Path, given: bool, replace: bool) -> Result<Dir, OutError> {
    let dir = if given {
        std::fs::create_dir_all(dir)
            .map_err(|e| out_error(format!("cannot create {}", dir.display()), &e, given))?;
        dir.to_path_buf()
    } else {
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|e| out_error(format!("cannot create {}", parent.display()), &e, given))?;
        }
        let mut n = 1;
        loop {
            let candidate = if n == 1 {
                dir.to_path_buf()
            } else {
                let mut name = dir.as_os_str().to_owned();
                name.push(format!("-{n}"));
                PathBuf::from(name)
            };
            match std::fs::create_dir(&candidate) {
                Ok(()) => break candidate,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 1000 => n += 1,
                Err(e) => {
                    return Err(out_error(
                        format!("cannot create {}", candidate.display()),
                        &e,
                        given,
                    ));
                }
            }
        }
    };
    let lock = File::open(&dir)
        .map_err(|e| out_error(format!("cannot open {}", dir.display()), &e, given))?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            return Err(OutError::Usage(format!(
                "{} is being written by another pmustress run (it holds the lock); choose another directory",
                dir.display()
            )));
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(out_error(
                format!("cannot lock {}", dir.display()),
                &e,
                given,
            ));
        }
    }
    let entries: Vec<String> = std::fs::read_dir(&dir)
        .map_err(|e| out_error(format!("cannot list {}", dir.display()), &e, given))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    // Another run's results are evidence: never overwritten unasked.
    // Other files (a wrapper's console log, made before we start) stay.
    if entries.iter().any(|n| is_result_file(n)) {
        if !replace {
            return Err(OutError::Usage(format!(
                "{} holds a run's results; choose a new or empty directory, or add --replace to overwrite them",
                dir.display()
            )));
        }
        for name in entries.iter().filter(|n| is_result_file(n)) {
            let path = dir.join(name);
            std::fs::remove_file(&path)
                .map_err(|e| out_error(format!("cannot remove {}", path.display()), &e, given))?;
        }
    }
    Ok(Dir {
        fd: lock,
        path: dir,
    })
}

struct HistogramLog {
    path: PathBuf,
    file: BufWriter<Guarded>,
    interval: Histogram<u64>,
    serializer: V2DeflateSerializer,
    header_written: bool,
}

/// Text of raw.csv.gz held before it is compressed as one gzip member:
/// a second's worth at most, less when the stream is fast. Held for a
/// second only, the buffer grew with the rate and with every hold-up of
/// the controller (the rows of a 2 s pause are twice a second's) and never
/// gave it back; bounded, it is allocated once.
pub const RAW_MEMBER_BYTES: usize = 256 << 10;
/// Longer than any row (`records::Row`: a few numbers and a word).
const RAW_ROW_MAX: usize = 256;

/// `raw.csv.gz`: the observation stream, one gzip member per flush.
struct RawStream {
    file: Guarded,
    /// The lines since the last flush: never more than `RAW_MEMBER_BYTES`
    /// and a row, so never reallocated.
    pending: String,
    /// The last member, compressed: its buffer is used again.
    compressed: Vec<u8>,
}

impl RawStream {
    fn new(file: Guarded) -> RawStream {
        // Written once so its pages are resident from the start: a second's
        // rows after a hold-up are more than before, and each larger second
        // touched new pages for good.
        let mut pending = " ".repeat(RAW_MEMBER_BYTES + RAW_ROW_MAX);
        pending.clear();
        RawStream {
            file,
            pending,
            compressed: Vec::new(),
        }
    }

    /// Adds a row; true once a member's worth is pending (then `flush`).
    fn push(&mut self, row: &Row) -> bool {
        use std::fmt::Write as _;
        let _ = writeln!(self.pending, "{row}");
        self.pending.len() >= RAW_MEMBER_BYTES
    }

    /// Compresses what is pending as one whole gzip member and writes it.
    fn flush(&mut self) -> std::io::Result<()> {
        if !self.pending.is_empty() {
            self.compressed.clear();
            let mut gz = GzEncoder::new(std::mem::take(&mut self.compressed), Compression::fast());
            gz.write_all(self.pending.as_bytes())?;
            self.compressed = gz.finish()?;
            self.file.write_all(&self.compressed)?;
            self.file.commit();
            self.pending.clear();
        }
        self.file.flush()
    }
}

pub struct ResultsDir {
    /// The directory, flocked for as long as this run writes it.
    dir: Dir,
    stream: RawStream,
    anomalies: csv::Writer<BufWriter<Guarded>>,
    raw: Option<csv::Writer<BufWriter<Guarded>>>,
    hlogs: Vec<HistogramLog>,
    all_deltas: Histogram<u64>,
    started: SystemTime,
    /// Set when a file failed (or the run stopped for a failure): no file
    /// is written after that.
    stopped: Arc<AtomicBool>,
    started_ns: Option<u64>,
    interval_start_ns: u64,
    last_flush_ns: u64,
    failed: Option<String>,
}

fn create(dir: &Dir, name: &str, stopped: &Arc<AtomicBool>) -> Result<BufWriter<Guarded>> {
    Ok(BufWriter::new(Guarded::create(dir, name, stopped)?))
}

/// What run.json says when an allocation fails (`process`).
const OUT_OF_MEMORY: &str = "out of memory: an allocation failed (the address-space limit, ulimit -v, or the machine's memory)";

/// Fills `name` with `bytes` zeros, a block at a time (no 2 MiB buffer).
/// The error says which step failed: creating the file (on a file system
/// out of inodes) or filling it (out of space, or past `ulimit -f`).
fn reserve(dir: &Dir, name: &str, bytes: usize) -> Result<()> {
    static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
    let mut f = dir.create(name).with_context(|| {
        format!("cannot create {name}, the space kept for the final run.json (no inode left?)")
    })?;
    let mut left = bytes;
    let mut fill = || -> io::Result<()> {
        while left > 0 {
            let n = left.min(ZEROS.len());
            f.write_all(&ZEROS[..n])?;
            left -= n;
        }
        f.sync_all()
    };
    fill().with_context(|| format!("cannot reserve {} MiB for the final run.json", bytes >> 20))
}

impl ResultsDir {
    /// Claims the directory (see `claim`) and creates its files before
    /// measuring, so an unwritable path or a full disk is reported before
    /// any work is done. `cfg.out` is updated to the directory used.
    ///
    /// run.json comes first, so a run killed at any moment leaves one;
    /// then the copy a failed allocation renames over it (`process`), the
    /// reserve for the final run.json, and the files the run writes.
    pub fn create(
        cfg: &mut RunConfig,
        argv: &[String],
        machine: &Fingerprint,
    ) -> Result<ResultsDir, OutError> {
        let dir = claim(&cfg.out, cfg.out_given, cfg.replace)?;
        cfg.out = dir.path.clone();
        let cfg = &*cfg;
        let started = SystemTime::now();
        let started_unix_s = started
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let io_of = |e: &anyhow::Error| {
            e.chain()
                .find_map(|c| c.downcast_ref::<io::Error>())
                .map_or_else(
                    || io::Error::other(format!("{e:#}")),
                    |io| io::Error::from_raw_os_error(io.raw_os_error().unwrap_or(libc::EIO)),
                )
        };
        let fail = |dir: &Dir, e: anyhow::Error| {
            // The files start_files opened are closed by now: room to say
            // why in run.json when the machine is at fault (125); a path
            // at fault (2) keeps no run.json of ours.
            process::forget_results_dir();
            let _ = dir.remove(RESERVE_NAME);
            let _ = dir.remove(process::OOM_RUN_JSON);
            let err = out_error(
                format!("cannot write in {}: {e}", dir.path.display()),
                &io_of(&e),
                cfg.out_given,
            );
            if let OutError::CannotTest(cause) | OutError::WorkingDir(cause) = &err {
                process::decide_while(crate::domain::EXIT_CANNOT_TEST, || {
                    let _ = dir.write_json_even_in_place(
                        "run.json",
                        &RunStarted::never_started(
                            cfg,
                            argv,
                            machine,
                            started_unix_s,
                            cause.clone(),
                        ),
                    );
                });
            } else {
                let _ = dir.remove("run.json");
            }
            err
        };
        let prepared = (|| -> Result<()> {
            dir.write_json_atomically(
                "run.json",
                &RunStarted::going(cfg, argv, machine, started_unix_s),
            )?;
            dir.write_json_atomically(
                process::OOM_RUN_JSON,
                &RunStarted::never_started(
                    cfg,
                    argv,
                    machine,
                    started_unix_s,
                    OUT_OF_MEMORY.to_string(),
                ),
            )?;
            process::on_oom_rename_in(dir.fd.as_fd());
            reserve(&dir, RESERVE_NAME, RESERVE_BYTES)
        })();
        if let Err(e) = prepared {
            return Err(fail(&dir, e));
        }
        Self::start_files(dir, cfg, started).map_err(|(dir, e)| fail(&dir, e))
    }

    fn start_files(
        dir: Dir,
        cfg: &RunConfig,
        started: SystemTime,
    ) -> Result<ResultsDir, (Dir, anyhow::Error)> {
        // Headers are written by hand so that a run without rows still has them.
        let csv_writer = |f| csv::WriterBuilder::new().has_headers(false).from_writer(f);
        let stopped = Arc::new(AtomicBool::new(false));
        let opened = (|| -> Result<_> {
            let anomalies = csv_writer(create(&dir, "anomalies.csv", &stopped)?);
            let mut stream = RawStream::new(Guarded::create_binary(&dir, "raw.csv.gz", &stopped)?);
            stream.pending.push_str(records::HEADER);
            stream.pending.push('\n');
            let raw = if cfg.raw {
                Some(csv_writer(create(&dir, "deltas.csv", &stopped)?))
            } else {
                None
            };
            let mut hlogs = Vec::with_capacity(cfg.workers);
            for w in 0..cfg.workers {
                let name = format!("hist-worker{w}.hlog");
                hlogs.push(HistogramLog {
                    file: create(&dir, &name, &stopped)?,
                    path: dir.path.join(name),
                    interval: crate::domain::histogram(),
                    serializer: V2DeflateSerializer::new(),
                    header_written: false,
                });
            }
            Ok((anomalies, stream, raw, hlogs))
        })();
        let (anomalies, stream, raw, hlogs) = match opened {
            Ok(files) => files,
            Err(e) => return Err((dir, e)),
        };
        let all_deltas = crate::domain::histogram();
        let mut out = ResultsDir {
            dir,
            stream,
            anomalies,
            raw,
            hlogs,
            all_deltas,
            started,
            stopped,
            started_ns: None,
            interval_start_ns: 0,
            last_flush_ns: 0,
            failed: None,
        };
        // Headers now, so even an empty run has well-formed CSVs.
        let headers = (|| -> Result<()> {
            out.anomalies.write_record(anomaly_columns())?;
            if let Some(raw) = &mut out.raw {
                raw.write_record(["worker", "signal_seq", "time_ns", "delta", "cpu"])?;
            }
            out.flush_files()
        })();
        match headers {
            Ok(()) => Ok(out),
            Err(e) => {
                let ResultsDir { dir, .. } = out;
                Err((dir, e))
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.dir.path
    }

    /// Where the directory is now, if it was moved while the run wrote it.
    pub fn moved_to(&self) -> Option<PathBuf> {
        self.dir.moved_to()
    }

    fn fail(&mut self, e: impl std::fmt::Display) {
        if self.failed.is_none() {
            self.failed = Some(format!("{}: {e}", self.dir.path.display()));
        }
        self.stopped.store(true, Ordering::Relaxed);
    }

    pub fn failure(&self) -> Option<String> {
        self.failed.clone()
    }

    pub fn record_observation(&mut self, worker: usize, observation: &Observation) {
        if self.failed.is_some() {
            return;
        }
        let full = self.stream.push(&Row {
            worker,
            observation: *observation,
        });
        if full && let Err(e) = self.stream.flush() {
            self.fail(format!("writing raw.csv.gz: {e}"));
        }
    }

    pub fn record_window(&mut self, w: &ClosedWindow) {
        let _ = self.all_deltas.record(w.delta);
        if let Some(h) = self.hlogs.get_mut(w.worker) {
            let _ = h.interval.record(w.delta);
        }
        if self.failed.is_some() {
            return;
        }
        if let Some(raw) = &mut self.raw
            && let Err(e) = raw.serialize(w)
        {
            self.fail(e);
        }
    }

    pub fn record_anomaly(&mut self, a: &Anomaly) {
        if self.failed.is_some() {
            return;
        }
        let row = AnomalyRecord::from(a);
        if let Err(e) = self.anomalies.serialize(row) {
            self.fail(e);
        }
    }

    /// The run could not start (`cause`, exit 125): run.json says so, and
    /// the reserve is given back.
    pub fn abandon(
        self,
        cfg: &RunConfig,
        argv: &[String],
        machine: &Fingerprint,
        cause: &str,
    ) -> Result<()> {
        // Close the files first: out of file descriptors is a common cause.
        drop(self.anomalies);
        drop(self.raw);
        drop(self.hlogs);
        let _ = self.dir.remove(RESERVE_NAME);
        let started_unix_s = self
            .started
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        process::decide_while(crate::domain::EXIT_CANNOT_TEST, || {
            let written = self.dir.write_json_even_in_place(
                "run.json",
                &RunStarted::never_started(cfg, argv, machine, started_unix_s, cause.to_string()),
            );
            process::forget_results_dir();
            let _ = self.dir.remove(process::OOM_RUN_JSON);
            written
        })
    }

    /// Files whose writing failed, cut back to their last complete line.
    fn cut_partial_files(&self) -> Vec<String> {
        let mut files = Vec::new();
        files.extend(self.stream.file.cut_if_failed());
        files.extend(self.anomalies.get_ref().get_ref().cut_if_failed());
        if let Some(raw) = &self.raw {
            files.extend(raw.get_ref().get_ref().cut_if_failed());
        }
        for h in &self.hlogs {
            files.extend(h.file.get_ref().cut_if_failed());
        }
        files
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

    /// Writes the last intervals, deltas.hgrm and the final run.json, which
    /// names the files a failed write left partial.
    pub fn finish(
        mut self,
        now_ns: u64,
        results: &mut crate::results::schema::RunResults,
    ) -> Result<()> {
        let start = self.started_ns.unwrap_or(now_ns);
        let started_unix_s = self
            .started
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        results.started_unix_s = Some(started_unix_s);
        results.started_utc = Some(crate::results::schema::utc_text(started_unix_s));
        results.started_monotonic_ns = self.started_ns;
        let mut tail = Ok(());
        if self.failed.is_none() {
            tail = self
                .write_intervals(start, now_ns)
                .and_then(|()| self.flush_files())
                .and_then(|()| {
                    self.dir.write_atomically(
                        "deltas.hgrm",
                        percentile_distribution(&self.all_deltas).as_bytes(),
                    )
                });
        }
        let partial = self.cut_partial_files();
        if !partial.is_empty() {
            results.mark_partial(partial);
        }
        // What run.json says is what the run exits with: a file that could
        // not be written makes "clean" inconclusive there too.
        if let Err(e) = &tail {
            results.mark_unsaved(unsaved(&self.dir.path, e));
        }
        // The verdict matters more than the last second of histograms.
        self.write_final(&*results)?;
        tail
    }

    /// Gives back the reserved space and writes the verdict into it. The
    /// exit status is decided first (`process`): from here on any way out
    /// exits with the status this run.json holds, or leaves the previous
    /// one (incomplete) if the rename does not happen.
    fn write_final(&self, results: &crate::results::schema::RunResults) -> Result<()> {
        let _ = self.dir.remove(RESERVE_NAME);
        process::decide_while(results.exit_status, || {
            let written = self.dir.write_json_atomically("run.json", results);
            if written.is_ok() {
                process::forget_results_dir();
                let _ = self.dir.remove(process::OOM_RUN_JSON);
            }
            written
        })
    }
}

/// Why results are incomplete on disk, in run.json and on the console alike.
pub fn unsaved(dir: &Path, e: &anyhow::Error) -> String {
    format!("could not save all results in {}: {e:#}", dir.display())
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
        assert_eq!(name, "20261130T005320.000Z-my-host-x-r21");
        // Runs in the same second get different names.
        let later = t + Duration::from_millis(200);
        assert_eq!(
            default_dir_name(later, "h", "task-clock"),
            "20261130T005320.200Z-h-task-clock"
        );
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
