/*!
The kernel log, as evidence.

The pseudo-NMI verdict rests on what the kernel said at boot: the PMU probe line
ends in ", using NMIs" only when the overflow interrupt really is an NMI. We
read `/dev/kmsg` without blocking (it would otherwise wait for the next
message forever) and, for the live machine only, fall back to syslog(2), the
same ring buffer behind the `dmesg` command. Both are closed to non-root users
under `kernel.dmesg_restrict=1`; then the log is "unreadable" and says why,
and the verdict must stand on the command line and config alone.

A log is only evidence of absence if it still holds the boot messages: on a
long-running machine the ring buffer wraps and the probe line is gone. So we
record whether the first record is the first one the kernel wrote.
*/

use std::fs::OpenOptions;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use serde::Serialize;

use super::read::Root;

/// Ring buffers are at most a few MiB (CONFIG_LOG_BUF_SHIFT <= 25); this
/// only guards against a fixture path that is an endless file.
const MAX_LOG_BYTES: usize = 64 << 20;

/// Lines kept in the fingerprint as they are: the ones the verdicts and the
/// PMU section quote, so a reader can check them without the machine.
const KEPT: &[&str] = &[
    "Booting Linux on physical CPU",
    "hw perfevents:",
    "Performance Events:",
    "... generic registers:",
    "... generic counters:",
    "... fixed-purpose events:",
    "... fixed-purpose counters:",
    "PMU not available",
    "Pseudo-NMI",
    "pseudo-NMI",
    "IRQ priority masking",
    "NMI watchdog",
    "Hypervisor detected",
    "started at EL",
    "hypervisor services detected",
];

#[derive(Debug, Clone, Default, Serialize)]
pub struct KernelLog {
    /// Where the log came from ("/dev/kmsg", "syslog(2) SYSLOG_ACTION_READ_ALL"),
    /// or None if nothing could be read.
    pub source: Option<String>,
    /// Why each source we tried gave nothing.
    pub unreadable: Vec<String>,
    pub records: usize,
    /// Lines we could not parse (truncated, no header); skipped, not guessed at.
    pub skipped: usize,
    /// Whether the log still starts at boot, so that a missing line means
    /// the kernel never printed it.
    pub covers_boot: bool,
    /// The lines worth quoting (see `KEPT`).
    pub kept: Vec<String>,
    #[serde(skip)]
    messages: Vec<String>,
}

impl KernelLog {
    pub fn read(root: &Root) -> KernelLog {
        let rel = "dev/kmsg";
        let mut unreadable = Vec::new();
        let mut denied = false;
        match read_nonblocking(&root.path(rel)) {
            Ok(bytes) => return KernelLog::from_kmsg(&bytes, Root::shown(rel)),
            Err(e) => {
                denied |= is_denied(&e);
                unreadable.push(Root::why(rel, &e));
            }
        }
        if root.is_live() {
            match syslog_read_all() {
                Ok(bytes) => {
                    let mut log =
                        KernelLog::from_syslog(&bytes, "syslog(2) SYSLOG_ACTION_READ_ALL".into());
                    log.unreadable = unreadable;
                    return log;
                }
                Err(e) => {
                    denied |= is_denied(&e);
                    unreadable.push(format!("unreadable: syslog(2) SYSLOG_ACTION_READ_ALL: {e}"));
                }
            }
        } else {
            unreadable.push("syslog(2) not tried: the root is a fixture, not this kernel".into());
        }
        let restrict = root.read_value("proc/sys/kernel/dmesg_restrict").value;
        if denied && restrict.as_deref() == Some("1") {
            unreadable
                .push("kernel.dmesg_restrict=1: reading the log needs CAP_SYSLOG (root)".into());
        }
        KernelLog {
            unreadable,
            ..KernelLog::default()
        }
    }

    /// /dev/kmsg records: `pri,seq,ts,flags[,more];message`, then optional
    /// dictionary lines that start with a space.
    pub fn from_kmsg(bytes: &[u8], source: String) -> KernelLog {
        let text = String::from_utf8_lossy(bytes);
        let mut log = KernelLog {
            source: Some(source),
            ..KernelLog::default()
        };
        let mut first_seq = None;
        for line in text.lines() {
            if line.starts_with(' ') || line.is_empty() {
                continue;
            }
            let Some((header, message)) = line.split_once(';') else {
                log.skipped += 1;
                continue;
            };
            let mut fields = header.split(',');
            let pri = fields.next().and_then(|p| p.parse::<u32>().ok());
            let seq = fields.next().and_then(|s| s.parse::<u64>().ok());
            let (Some(_), Some(seq)) = (pri, seq) else {
                log.skipped += 1;
                continue;
            };
            first_seq.get_or_insert(seq);
            log.push(message);
        }
        log.covers_boot = first_seq == Some(0) || log.has_boot_banner();
        log
    }

    /// syslog(2) text: `<pri>[    1.234567] message`, the timestamp absent
    /// with printk.time=0. No sequence numbers, so boot coverage is judged
    /// by the banner alone.
    pub fn from_syslog(bytes: &[u8], source: String) -> KernelLog {
        let text = String::from_utf8_lossy(bytes);
        let mut log = KernelLog {
            source: Some(source),
            ..KernelLog::default()
        };
        for line in text.lines() {
            let mut rest = line;
            if let Some(after) = rest.strip_prefix('<') {
                match after.split_once('>') {
                    Some((pri, tail)) if pri.parse::<u32>().is_ok() => rest = tail,
                    _ => {
                        log.skipped += 1;
                        continue;
                    }
                }
            }
            if let Some(after) = rest.strip_prefix('[') {
                match after.split_once("] ") {
                    Some((_, tail)) => rest = tail,
                    None => {
                        log.skipped += 1;
                        continue;
                    }
                }
            }
            if rest.is_empty() {
                continue;
            }
            log.push(rest);
        }
        log.covers_boot = log.has_boot_banner();
        log
    }

    fn push(&mut self, message: &str) {
        self.records += 1;
        if KEPT.iter().any(|k| message.contains(k)) {
            self.kept.push(message.to_string());
        }
        self.messages.push(message.to_string());
    }

    /// The first lines any kernel prints ("Booting Linux on physical CPU"
    /// on arm64, "Linux version" everywhere).
    fn has_boot_banner(&self) -> bool {
        self.messages.iter().take(50).any(|m| {
            m.starts_with("Linux version ") || m.starts_with("Booting Linux on physical CPU")
        })
    }

    pub fn is_readable(&self) -> bool {
        self.source.is_some()
    }

    /// Every message containing `needle`.
    pub fn grep<'a>(&'a self, needle: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.messages
            .iter()
            .filter(move |m| m.contains(needle))
            .map(String::as_str)
    }

    /// "/dev/kmsg" or "kernel log" for evidence lines.
    pub fn name(&self) -> &str {
        self.source.as_deref().unwrap_or("kernel log")
    }

    /// One line on why the log could not be read.
    pub fn why_unreadable(&self) -> String {
        if self.unreadable.is_empty() {
            "kernel log not read".to_string()
        } else {
            format!("kernel log: {}", self.unreadable.join("; "))
        }
    }
}

/// EPERM/EACCES: what dmesg_restrict does to a reader without CAP_SYSLOG.
fn is_denied(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::PermissionDenied
        || matches!(err.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES))
}

/// Reads a /dev/kmsg-like file to its current end without waiting.
///
/// Each read(2) of /dev/kmsg returns one record and fails with EINVAL if the
/// buffer is smaller than it (records are at most 8 KiB), EAGAIN at the end,
/// and EPIPE when the record we were about to read was overwritten: then the
/// next read continues with the oldest one still there. A regular file (a
/// fixture) just reads to EOF.
fn read_nonblocking(path: &Path) -> io::Result<Vec<u8>> {
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 16 << 10];
    let mut epipes = 0;
    while out.len() < MAX_LOG_BYTES {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // A wrapped ring keeps moving under a busy kernel; do not chase it forever.
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) && epipes < 1000 => epipes += 1,
            Err(e) if out.is_empty() => return Err(e),
            Err(_) => break,
        }
    }
    Ok(out)
}

/// syslog(2) SYSLOG_ACTION_READ_ALL: the whole ring buffer, as `dmesg` reads
/// it. The only unsafe code in the fingerprint; std has no wrapper for it.
fn syslog_read_all() -> io::Result<Vec<u8>> {
    const SYSLOG_ACTION_READ_ALL: libc::c_int = 3;
    const SYSLOG_ACTION_SIZE_BUFFER: libc::c_int = 10;
    // SAFETY: SIZE_BUFFER only returns a number and never touches the buffer
    // argument (syslog(2)), so a null pointer with length 0 is valid. For
    // READ_ALL, `buf` is a live allocation of exactly `len` writable bytes and
    // the kernel writes at most `len` bytes into it.
    let (len, n, mut buf) = unsafe {
        let len = libc::klogctl(SYSLOG_ACTION_SIZE_BUFFER, std::ptr::null_mut(), 0);
        if len < 0 {
            return Err(io::Error::last_os_error());
        }
        let len = len.max(1);
        let mut buf = vec![0u8; len as usize];
        let n = libc::klogctl(SYSLOG_ACTION_READ_ALL, buf.as_mut_ptr().cast(), len);
        (len, n, buf)
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate((n as usize).min(len as usize));
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KMSG: &str = "5,0,0,-;Booting Linux on physical CPU 0x0000000000 [0x413fd0c1]\n\
         5,1,0,-;Linux version 6.1.0-37-arm64\n\
         6,2,3,-,caller=T1;hw perfevents: enabled with armv8_pmuv3_0 PMU driver, 7 counters available\n \
         SUBSYSTEM=platform\n \
         DEVICE=+platform:armv8-pmu\n";

    #[test]
    fn kmsg_records_dictionaries_and_boot_coverage() {
        let log = KernelLog::from_kmsg(KMSG.as_bytes(), "/dev/kmsg".into());
        assert_eq!((log.records, log.skipped), (3, 0));
        assert!(log.covers_boot);
        assert_eq!(log.kept.len(), 2);
        assert_eq!(log.grep("hw perfevents").count(), 1);
        // A wrapped ring: first record is seq 5000 and no banner.
        let wrapped = KernelLog::from_kmsg(b"6,5000,99,-;eth0: link up\n", "/dev/kmsg".into());
        assert!(!wrapped.covers_boot);
    }

    #[test]
    fn kmsg_truncated_and_garbage_never_panic() {
        for input in [
            &b""[..],
            b"6",
            b"6,",
            b"6,1",
            b"6,1,2,-",
            b";",
            b"x,y;z",
            b"6,18446744073709551616,0,-;overflowing seq",
            b"\xff\xfe;\xff",
            b"6,1,0,-;hw perfevents: enabled with",
            b"\n\n \n",
        ] {
            let log = KernelLog::from_kmsg(input, "t".into());
            assert!(log.records <= 1);
            let _ = KernelLog::from_syslog(input, "t".into());
        }
        let log = KernelLog::from_kmsg(b"6,1\n6,2,0,-;ok\nx;y\n", "t".into());
        assert_eq!((log.records, log.skipped), (1, 2));
    }

    #[test]
    fn syslog_format_with_and_without_timestamps() {
        let log = KernelLog::from_syslog(
            b"<5>[    0.000000] Linux version 6.12.0\n<6>GICv3: Pseudo-NMIs enabled using relaxed ICC_PMR_EL1 synchronisation\n<6>[    0.1\n<x>bad\n",
            "syslog".into(),
        );
        assert_eq!((log.records, log.skipped), (2, 2));
        assert!(log.covers_boot);
        assert_eq!(log.grep("Pseudo-NMIs enabled").count(), 1);
    }

    #[test]
    fn directory_as_kmsg_is_unreadable_with_reason() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("dev/kmsg")).expect("mkdir");
        let log = KernelLog::read(&Root::new(dir.path()));
        assert!(!log.is_readable());
        assert!(
            log.unreadable[0].starts_with("unreadable: /dev/kmsg: Is a directory"),
            "{:?}",
            log.unreadable
        );
        assert!(log.unreadable[1].contains("not tried"));
        let absent = KernelLog::read(&Root::new(&dir.path().join("nowhere")));
        assert_eq!(absent.unreadable[0], "not present: /dev/kmsg");
    }

    /// The live fallback: root may read the log, others may be refused
    /// (dmesg_restrict); both are fine, a crash or garbage is not.
    #[test]
    fn syslog_live_reads_or_is_refused() {
        match syslog_read_all() {
            Ok(bytes) => {
                let log = KernelLog::from_syslog(&bytes, "syslog".into());
                assert!(log.records > 0);
            }
            Err(e) => assert!(
                matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)),
                "{e}"
            ),
        }
    }
}
