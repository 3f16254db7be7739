/*!
The running kernel: release, version, arch, command line and build config.

These decide what a run can mean. The arch decides whether pseudo-NMI is even a
question; the command line says whether it was requested (and which CPUs are
isolated); the config says whether the kernel can do it at all. The config is
the running kernel's own only when it comes from /proc/config.gz; a
/boot/config-<release> file is what the distribution shipped under that name,
which is almost always the same thing, and the source says which one we used.
*/

use std::collections::BTreeMap;
use std::io::Read;

use serde::Serialize;

use super::read::{Root, Sourced};

/// Config options worth recording: the ones that change how PMU interrupts
/// are delivered, what the timer tick does to a measuring CPU, and whether
/// this kernel can describe itself. The whole config is thousands of lines
/// and belongs in its own file, not in every result.
pub const WATCHED_OPTIONS: &[&str] = &[
    "CONFIG_ARM64_PSEUDO_NMI",
    "CONFIG_ARM_GIC_V3",
    "CONFIG_PERF_EVENTS",
    "CONFIG_HW_PERF_EVENTS",
    "CONFIG_ARM_PMU",
    "CONFIG_ARM_PMUV3",
    "CONFIG_HARDLOCKUP_DETECTOR",
    "CONFIG_HARDLOCKUP_DETECTOR_PERF",
    "CONFIG_NO_HZ_FULL",
    "CONFIG_HZ",
    "CONFIG_PREEMPT_NONE",
    "CONFIG_PREEMPT_VOLUNTARY",
    "CONFIG_PREEMPT",
    "CONFIG_PREEMPT_DYNAMIC",
    "CONFIG_PREEMPT_RT",
    "CONFIG_HYPERVISOR_GUEST",
    "CONFIG_KVM_GUEST",
];

/// Decompressed configs are a few hundred KiB; stop well before a corrupt
/// or hostile file could eat memory.
const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// The kernel this machine runs (run.json's `fingerprint.kernel`); not to be
/// confused with `engine::kernel`, the syscalls pmustress makes.
#[derive(Debug, Clone, Serialize)]
pub struct RunningKernel {
    /// The host's name: `report --group-by host` groups a fleet's runs by it.
    pub hostname: Sourced<String>,
    pub release: Sourced<String>,
    pub version: Sourced<String>,
    /// `uname -m` spelling: "aarch64", "x86_64".
    pub arch: Sourced<String>,
    pub cmdline: Sourced<Cmdline>,
    pub config: Sourced<KernelConfig>,
    pub log: super::kmsg::KernelLog,
}

impl RunningKernel {
    pub fn read(root: &Root) -> RunningKernel {
        let hostname = root.read_value("proc/sys/kernel/hostname");
        let release = root.read_value("proc/sys/kernel/osrelease");
        let version = root.read_value("proc/sys/kernel/version");
        let arch = read_arch(root);
        let cmdline = root
            .read("proc/cmdline")
            .map(|raw| Cmdline::parse(raw.trim_end()));
        let config = read_config(root, release.value.as_deref());
        let log = super::kmsg::KernelLog::read(root);
        RunningKernel {
            hostname,
            release,
            version,
            arch,
            cmdline,
            config,
            log,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchFamily {
    Arm64,
    X86,
    Other,
}

impl ArchFamily {
    pub fn from_uname(machine: &str) -> ArchFamily {
        match machine.trim() {
            "aarch64" | "arm64" | "aarch64_be" => ArchFamily::Arm64,
            "x86_64" | "i386" | "i486" | "i586" | "i686" | "x86" => ArchFamily::X86,
            _ => ArchFamily::Other,
        }
    }
}

/// kernel.arch exists on current kernels; on older ones, and only for the
/// live machine, `uname -m` answers the same question. A fixture without the
/// file has no arch: we do not infer it from cpuinfo.
fn read_arch(root: &Root) -> Sourced<String> {
    let from_sysctl = root.read_value("proc/sys/kernel/arch");
    if from_sysctl.value.is_some() || !root.is_live() {
        return from_sysctl;
    }
    match std::process::Command::new("uname").arg("-m").output() {
        Ok(out) if out.status.success() => {
            let machine = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if machine.is_empty() {
                Sourced::missing(format!(
                    "{}; `uname -m` printed nothing",
                    from_sysctl.source
                ))
            } else {
                Sourced::found(machine, "uname -m")
            }
        }
        Ok(out) => Sourced::missing(format!(
            "{}; `uname -m` failed: {}",
            from_sysctl.source, out.status
        )),
        Err(e) => Sourced::missing(format!("{}; `uname -m`: {e}", from_sysctl.source)),
    }
}

/// /proc/cmdline, split the way the kernel splits it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cmdline {
    pub raw: String,
    #[serde(skip)]
    params: Vec<(String, Option<String>)>,
}

impl Cmdline {
    /// Splits on whitespace outside double quotes, like the kernel's
    /// `next_arg`, and stops at a bare "--": what follows goes to init.
    pub fn parse(raw: &str) -> Cmdline {
        let mut params = Vec::new();
        let mut word = String::new();
        let mut in_quotes = false;
        let mut words = Vec::new();
        for c in raw.chars() {
            match c {
                '"' => in_quotes = !in_quotes,
                c if c.is_whitespace() && !in_quotes => {
                    if !word.is_empty() {
                        words.push(std::mem::take(&mut word));
                    }
                }
                c => word.push(c),
            }
        }
        if !word.is_empty() {
            words.push(word);
        }
        for w in words {
            if w == "--" {
                break;
            }
            match w.split_once('=') {
                Some((k, v)) => params.push((k.to_string(), Some(v.to_string()))),
                None => params.push((w, None)),
            }
        }
        Cmdline {
            raw: raw.to_string(),
            params,
        }
    }

    /// The last occurrence of `name` (the kernel lets the last one win), as
    /// written: `Some(None)` for a bare flag. Dashes and underscores are the
    /// same to the kernel (`parameq`), so they are the same here.
    pub fn get(&self, name: &str) -> Option<Option<&str>> {
        let norm = |s: &str| s.replace('-', "_");
        let want = norm(name);
        self.params
            .iter()
            .rev()
            .find(|(k, _)| norm(k) == want)
            .map(|(_, v)| v.as_deref())
    }

    /// The whole `name=value` token, quoted for evidence.
    pub fn token(&self, name: &str) -> Option<String> {
        self.get(name).map(|v| match v {
            Some(v) => format!("{name}={v}"),
            None => name.to_string(),
        })
    }
}

/// The kernel's `kstrtobool`: what a boolean boot parameter accepts.
pub fn kstrtobool(s: &str) -> Option<bool> {
    let b = s.as_bytes();
    match b.first()? {
        b'e' | b'E' | b'y' | b'Y' | b't' | b'T' | b'1' => Some(true),
        b'd' | b'D' | b'n' | b'N' | b'f' | b'F' | b'0' => Some(false),
        b'o' | b'O' => match b.get(1)? {
            b'n' | b'N' => Some(true),
            b'f' | b'F' => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// The watched options of a kernel config, each as its exact line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KernelConfig {
    /// Option name to the line as written ("CONFIG_HZ=250", "# CONFIG_X is
    /// not set"). Watched options with no line at all are absent: Kconfig
    /// writes no line for an option whose dependencies are unmet.
    pub options: BTreeMap<String, String>,
}

/// What a config says about one option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigValue<'a> {
    /// `=y`, `=m`, or a value; with the line.
    Set(&'a str),
    /// "# CONFIG_X is not set"; with the line.
    NotSet(&'a str),
    /// No line at all.
    Absent,
}

impl KernelConfig {
    pub fn parse(text: &str) -> KernelConfig {
        let mut options = BTreeMap::new();
        for line in text.lines() {
            let line = line.trim();
            let name = if let Some(rest) = line.strip_prefix("# ") {
                match rest.strip_suffix(" is not set") {
                    Some(name) => name,
                    None => continue,
                }
            } else {
                match line.split_once('=') {
                    Some((name, _)) => name,
                    None => continue,
                }
            };
            if WATCHED_OPTIONS.contains(&name) {
                options.insert(name.to_string(), line.to_string());
            }
        }
        KernelConfig { options }
    }

    pub fn get(&self, name: &str) -> ConfigValue<'_> {
        match self.options.get(name) {
            Some(line) if line.starts_with('#') => ConfigValue::NotSet(line),
            Some(line) => match line.split_once('=') {
                Some((_, "n")) => ConfigValue::NotSet(line),
                _ => ConfigValue::Set(line),
            },
            None => ConfigValue::Absent,
        }
    }
}

/// /proc/config.gz is the running kernel's own config (CONFIG_IKCONFIG_PROC);
/// /boot/config-<release> is the distribution's copy. First one readable wins;
/// if none is, every attempt is said.
fn read_config(root: &Root, release: Option<&str>) -> Sourced<KernelConfig> {
    let mut tried = Vec::new();
    let gz = "proc/config.gz";
    match root.read_bytes(gz) {
        Ok(bytes) => match gunzip(&bytes) {
            Ok(text) => return Sourced::found(KernelConfig::parse(&text), Root::shown(gz)),
            Err(e) => tried.push(format!("unreadable: {}: {e}", Root::shown(gz))),
        },
        Err(e) => tried.push(Root::why(gz, &e)),
    }
    match release {
        Some(release) if !release.contains('/') && !release.is_empty() => {
            let boot = format!("boot/config-{release}");
            let file = root.read(&boot);
            match file.value {
                Some(text) => return Sourced::found(KernelConfig::parse(&text), file.source),
                None => tried.push(file.source),
            }
        }
        _ => tried.push("/boot/config-<release> not tried: release unknown".to_string()),
    }
    Sourced::missing(tried.join("; "))
}

fn gunzip(bytes: &[u8]) -> std::io::Result<String> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .take(MAX_CONFIG_BYTES)
        .read_to_end(&mut out)?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn cmdline_last_wins_quotes_and_init_args() {
        let c = Cmdline::parse(
            "BOOT_IMAGE=/vmlinuz root=UUID=1 irqchip.gicv3_pseudo_nmi=0 \
             irqchip.gicv3-pseudo-nmi=1 dyndbg=\"file x +p\" quiet -- irqchip.gicv3_pseudo_nmi=0",
        );
        assert_eq!(c.get("irqchip.gicv3_pseudo_nmi"), Some(Some("1")));
        assert_eq!(c.get("dyndbg"), Some(Some("file x +p")));
        assert_eq!(c.get("quiet"), Some(None));
        assert_eq!(c.get("root"), Some(Some("UUID=1")));
        assert_eq!(c.get("isolcpus"), None);
        assert_eq!(c.token("quiet").as_deref(), Some("quiet"));
    }

    #[test]
    fn cmdline_odd_input() {
        for raw in ["", "   ", "\"", "=", "==", "--", "a=\"b", "\u{0}"] {
            let c = Cmdline::parse(raw);
            let _ = c.get("a");
        }
        assert_eq!(Cmdline::parse("=").get(""), Some(Some("")));
    }

    #[test]
    fn kstrtobool_matches_kernel() {
        for t in ["1", "y", "Y", "yes", "on", "ON", "true", "enable"] {
            assert_eq!(kstrtobool(t), Some(true), "{t}");
        }
        for f in ["0", "n", "no", "off", "false", "disable"] {
            assert_eq!(kstrtobool(f), Some(false), "{f}");
        }
        for bad in ["", "2", "o", "ox", "maybe"] {
            assert_eq!(kstrtobool(bad), None, "{bad}");
        }
    }

    #[test]
    fn config_lines_set_not_set_absent() {
        let c = KernelConfig::parse(
            "#\n# Automatically generated file; DO NOT EDIT.\n#\nCONFIG_HZ=250\n\
             # CONFIG_ARM64_PSEUDO_NMI is not set\nCONFIG_PERF_EVENTS=y\nCONFIG_UNWATCHED=y\n\
             CONFIG_ARM_PMU\n# comment\n=\n",
        );
        assert_eq!(
            c.get("CONFIG_ARM64_PSEUDO_NMI"),
            ConfigValue::NotSet("# CONFIG_ARM64_PSEUDO_NMI is not set")
        );
        assert_eq!(c.get("CONFIG_HZ"), ConfigValue::Set("CONFIG_HZ=250"));
        assert_eq!(c.get("CONFIG_ARM_PMU"), ConfigValue::Absent);
        assert_eq!(c.get("CONFIG_UNWATCHED"), ConfigValue::Absent);
        assert_eq!(c.options.len(), 3);
        assert_eq!(KernelConfig::parse("").options.len(), 0);
    }

    #[test]
    fn config_from_gz_then_boot_then_says_why() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = Root::new(dir.path());
        let missing = read_config(&root, Some("6.1.0-37-arm64"));
        assert_eq!(
            missing.source,
            "not present: /proc/config.gz; not present: /boot/config-6.1.0-37-arm64"
        );
        std::fs::create_dir_all(dir.path().join("boot")).expect("mkdir");
        std::fs::write(
            dir.path().join("boot/config-6.1.0-37-arm64"),
            "# CONFIG_ARM64_PSEUDO_NMI is not set\n",
        )
        .expect("write");
        let boot = read_config(&root, Some("6.1.0-37-arm64"));
        assert_eq!(boot.source, "/boot/config-6.1.0-37-arm64");
        // A corrupt config.gz is said, and /boot is still used.
        std::fs::create_dir_all(dir.path().join("proc")).expect("mkdir");
        std::fs::write(dir.path().join("proc/config.gz"), b"\x1f\x8bjunk").expect("write");
        assert!(read_config(&root, Some("6.1.0-37-arm64")).value.is_some());
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(b"CONFIG_ARM64_PSEUDO_NMI=y\n").expect("gz");
        std::fs::write(dir.path().join("proc/config.gz"), gz.finish().expect("gz")).expect("write");
        let proc = read_config(&root, None);
        assert_eq!(proc.source, "/proc/config.gz");
        let cfg = proc.value.expect("config");
        assert_eq!(
            cfg.get("CONFIG_ARM64_PSEUDO_NMI"),
            ConfigValue::Set("CONFIG_ARM64_PSEUDO_NMI=y")
        );
    }
}
