/*!
Reading files under a root directory, and saying where each value came from.

Every reader in the fingerprint goes through [`Root`] so that the same code
reads the live machine (`/`) and a fixture tree in `tests/fixtures`. Sources are
named as the machine would name them ("/proc/cmdline"), not by the fixture path,
so a fingerprint from a fixture reads like one from the machine it imitates.

A missing or unreadable file is a fact worth recording, not an error: it becomes
a [`Sourced`] with no value and a source that says what happened.
*/

use std::io::{self, Read};
use std::path::{Path, PathBuf};

use serde::Serialize;

/// Sysfs and procfs files are small; anything bigger than this is not what
/// we meant to read (or is a device that never ends).
const MAX_FILE_BYTES: u64 = 4 << 20;

/// A value and where it came from, or why there is none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Sourced<T> {
    pub value: Option<T>,
    /// The file or call it came from ("/proc/cmdline"), or why it is missing
    /// ("not present: /proc/config.gz").
    pub source: String,
}

impl<T> Sourced<T> {
    pub fn found(value: T, source: impl Into<String>) -> Self {
        Sourced {
            value: Some(value),
            source: source.into(),
        }
    }

    pub fn missing(why: impl Into<String>) -> Self {
        Sourced {
            value: None,
            source: why.into(),
        }
    }

    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Sourced<U> {
        Sourced {
            value: self.value.map(f),
            source: self.source,
        }
    }

    /// Keeps the source but turns a value `parse` rejects into a missing one
    /// that quotes it.
    pub fn parse<U>(self, parse: impl FnOnce(&T) -> Option<U>) -> Sourced<U>
    where
        T: std::fmt::Debug,
    {
        match self.value {
            Some(v) => match parse(&v) {
                Some(u) => Sourced::found(u, self.source),
                None => Sourced::missing(format!("unparsable: {}: {v:?}", self.source)),
            },
            None => Sourced::missing(self.source),
        }
    }
}

/// The directory everything is read from.
#[derive(Debug, Clone)]
pub struct Root {
    dir: PathBuf,
}

impl Root {
    pub fn new(dir: &Path) -> Root {
        Root {
            dir: dir.to_path_buf(),
        }
    }

    /// Whether this is the running machine, where a few things (syslog(2),
    /// `uname -m`, this process's rlimits) may be asked of the kernel
    /// directly. Anything else is a fixture, and the kernel we run on has
    /// nothing to say about it.
    pub fn is_live(&self) -> bool {
        self.dir == Path::new("/")
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The real path of `rel` ("proc/cmdline") under the root.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel.trim_start_matches('/'))
    }

    /// How a source is named in the fingerprint: as on the machine.
    pub fn shown(rel: &str) -> String {
        format!("/{}", rel.trim_start_matches('/'))
    }

    /// Says why `rel` gave nothing: "not present" for ENOENT (the common,
    /// boring case), the error otherwise.
    pub fn why(rel: &str, err: &io::Error) -> String {
        if err.kind() == io::ErrorKind::NotFound {
            format!("not present: {}", Root::shown(rel))
        } else {
            format!("unreadable: {}: {err}", Root::shown(rel))
        }
    }

    /// A regular file's first `MAX_FILE_BYTES`. Anything else (a FIFO, a
    /// device, a socket planted in a --root tree) is refused: opened
    /// without waiting (O_NONBLOCK) and never read, so it cannot hang us.
    pub fn read_bytes(&self, rel: &str) -> io::Result<Vec<u8>> {
        use std::os::unix::fs::OpenOptionsExt as _;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(self.path(rel))?;
        if !file.metadata()?.is_file() {
            return Err(io::Error::other("not a regular file"));
        }
        let mut buf = Vec::new();
        file.take(MAX_FILE_BYTES).read_to_end(&mut buf)?;
        Ok(buf)
    }

    /// The whole file as text (invalid UTF-8 replaced, never an error).
    pub fn read(&self, rel: &str) -> Sourced<String> {
        match self.read_bytes(rel) {
            Ok(bytes) => Sourced::found(
                String::from_utf8_lossy(&bytes).into_owned(),
                Root::shown(rel),
            ),
            Err(e) => Sourced::missing(Root::why(rel, &e)),
        }
    }

    /// A one-value file (sysctl, sysfs attribute), trimmed.
    pub fn read_value(&self, rel: &str) -> Sourced<String> {
        self.read(rel).map(|s| s.trim().to_string())
    }

    /// Names in a directory, sorted so output is stable.
    pub fn list(&self, rel: &str) -> io::Result<Vec<String>> {
        let mut names: Vec<String> = std::fs::read_dir(self.path(rel))?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        Ok(names)
    }

    pub fn exists(&self, rel: &str) -> bool {
        self.path(rel).exists()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_files_say_so_and_sources_are_machine_paths() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = Root::new(dir.path());
        assert!(!root.is_live());
        let s = root.read_value("proc/cmdline");
        assert_eq!(s.value, None);
        assert_eq!(s.source, "not present: /proc/cmdline");
        std::fs::create_dir_all(dir.path().join("proc")).expect("mkdir");
        std::fs::write(dir.path().join("proc/cmdline"), b"ro quiet\n\xff\n").expect("write");
        let s = root.read_value("proc/cmdline");
        assert_eq!(s.value.as_deref(), Some("ro quiet\n\u{fffd}"));
        assert_eq!(s.source, "/proc/cmdline");
        let n = root
            .read_value("proc/cmdline")
            .parse(|v| v.parse::<i64>().ok());
        assert!(n.source.starts_with("unparsable: /proc/cmdline"));
        assert!(Root::new(Path::new("/")).is_live());
    }

    #[test]
    fn a_fifo_is_refused_not_waited_on() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("proc")).expect("mkdir");
        let fifo = dir.path().join("proc/cmdline");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|s| s.success()) {
            eprintln!("skipped: mkfifo is not available");
            return;
        }
        let s = Root::new(dir.path()).read_value("proc/cmdline");
        assert_eq!(s.value, None);
        assert_eq!(s.source, "unreadable: /proc/cmdline: not a regular file");
    }
}
