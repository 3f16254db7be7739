/*!
Is the PMU overflow interrupt an NMI on this machine?

On arm64 without pseudo-NMI, the PMU interrupt is an ordinary IRQ, masked
whenever the kernel runs with interrupts off; an overflow that arrives while
a task is being migrated can be lost, which is the bug pmustress hunts. With
pseudo-NMI (GICv3 priority masking, CONFIG_ARM64_PSEUDO_NMI plus the boot
parameter `irqchip.gicv3_pseudo_nmi=1`, and firmware that leaves SCR_EL3.FIQ
set) the PMU driver requests an NMI and says so in its probe line. On x86 the
PMU interrupt is delivered as an NMI through the local APIC already.

The verdict is a pure function of what the fingerprint read, so each rule is
tested on inline inputs. Evidence is ordered by weight: the line that decided
first. The kernel log outranks a config file and the command line because
it is what the running kernel did, not what it was asked or built to do.
*/

use serde::{Deserialize, Serialize};

use super::kmsg::KernelLog;
use super::read::Sourced;
use super::running_kernel::{ArchFamily, Cmdline, ConfigValue, KernelConfig, kstrtobool};

const PARAM: &str = "irqchip.gicv3_pseudo_nmi";
const CONFIG: &str = "CONFIG_ARM64_PSEUDO_NMI";
/// The arm_pmu probe line: "hw perfevents: enabled with armv8_pmuv3_0 PMU
/// driver, 7 counters available" (6.11+: "7 (0,8000003f) counters available").
const PROBE: &str = "counters available";
const PROBE_NMI: &str = "counters available, using NMIs";
const GIC_ENABLED: &str = "Pseudo-NMIs enabled using";
const FIRMWARE_REFUSED: &str = "SCR_EL3.FIQ is cleared, cannot enable use of pseudo-NMIs";
/// Printed when the CPU feature is switched on, before the GIC decides:
/// also present when firmware then refuses, so supporting evidence only.
const PRIO_MASKING: &str = "CPU features: detected: IRQ priority masking";
/// More quoted probe lines than this (one per PMU on big.LITTLE) add nothing.
const MAX_QUOTED: usize = 4;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PseudoNmi {
    pub verdict: PseudoNmiVerdict,
    /// The lines and sources the verdict rests on, decisive one first.
    #[serde(default)]
    pub evidence: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PseudoNmiVerdict {
    /// The PMU overflow interrupt is a pseudo-NMI.
    Enabled,
    /// Built in but not in use: not requested, refused by firmware, or not
    /// taken by the PMU driver.
    Disabled,
    /// CONFIG_ARM64_PSEUDO_NMI is not set: this kernel cannot do it.
    NotBuilt,
    /// Not arm64: the question does not arise (x86 PMU interrupts are NMIs).
    NotApplicable,
    /// The evidence needed was unreadable; the evidence says which.
    Unknown,
}

impl PseudoNmiVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            PseudoNmiVerdict::Enabled => "enabled",
            PseudoNmiVerdict::Disabled => "disabled",
            PseudoNmiVerdict::NotBuilt => "not-built",
            PseudoNmiVerdict::NotApplicable => "not-applicable",
            PseudoNmiVerdict::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for PseudoNmiVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the command line asked for.
enum Request {
    Yes(String),
    No(String),
    Unknown(String),
}

fn request(cmdline: &Sourced<Cmdline>) -> Request {
    let Some(c) = &cmdline.value else {
        return Request::Unknown(format!("command line unknown: {}", cmdline.source));
    };
    let src = &cmdline.source;
    match (c.get(PARAM), c.token(PARAM)) {
        (Some(Some(v)), Some(tok)) if kstrtobool(v) == Some(true) => {
            Request::Yes(format!("{src}: \"{tok}\" (requested)"))
        }
        (Some(_), Some(tok)) => Request::No(format!("{src}: \"{tok}\" does not request it")),
        _ => Request::No(format!("{src}: no {PARAM}=1 (not requested)")),
    }
}

impl Request {
    fn line(&self) -> String {
        match self {
            Request::Yes(s) | Request::No(s) | Request::Unknown(s) => s.clone(),
        }
    }
}

/// What the config says about CONFIG_ARM64_PSEUDO_NMI.
enum Built {
    Yes(String),
    No(String),
    Unknown(String),
}

fn built(config: &Sourced<KernelConfig>) -> Built {
    let Some(c) = &config.value else {
        return Built::Unknown(format!("kernel config unknown: {}", config.source));
    };
    let src = &config.source;
    match c.get(CONFIG) {
        ConfigValue::Set(line) => Built::Yes(format!("{src}: \"{line}\"")),
        ConfigValue::NotSet(line) => Built::No(format!("{src}: \"{line}\"")),
        ConfigValue::Absent => Built::No(format!(
            "{src}: no {CONFIG} line (its dependencies are not met, so it is not built)"
        )),
    }
}

fn quote(log: &KernelLog, lines: &[&str]) -> Vec<String> {
    lines
        .iter()
        .take(MAX_QUOTED)
        .map(|l| format!("{}: \"{l}\"", log.name()))
        .collect()
}

/// Whether the running kernel's PMU interrupt is a pseudo-NMI, with the
/// lines that say so: the architecture first, then the kernel log (the only
/// word on the running kernel), then its config and command line.
pub fn verdict(
    arch: &Sourced<String>,
    cmdline: &Sourced<Cmdline>,
    config: &Sourced<KernelConfig>,
    log: &KernelLog,
) -> PseudoNmi {
    if let Err(not_arm64) = arm64(arch) {
        return not_arm64;
    }
    let req = request(cmdline);
    let cfg = built(config);
    let lines = LogLines::grep(log);
    let log_enabled =
        !lines.nmi_probes.is_empty() || (!lines.gic.is_empty() && lines.probes.is_empty());

    // Not built: the kernel cannot do it, whatever was asked. Only the log
    // of the running kernel can overrule a config file, and then the file
    // belongs to another build.
    if let Built::No(cfg_line) = &cfg
        && !log_enabled
    {
        let mut ev = vec![cfg_line.clone(), req.line()];
        ev.extend(quote(log, &lines.probes));
        return done(PseudoNmiVerdict::NotBuilt, ev);
    }
    if log.is_readable()
        && let Some(v) = from_log(log, &lines, &req, &cfg)
    {
        return v;
    }
    // No usable log: decide from the config and command line, if they can.
    without_log(log, cfg, req)
}

fn done(verdict: PseudoNmiVerdict, evidence: Vec<String>) -> PseudoNmi {
    PseudoNmi { verdict, evidence }
}

/// Ok on arm64; elsewhere (or where the arch is unknown) the verdict.
fn arm64(arch: &Sourced<String>) -> Result<(), PseudoNmi> {
    let Some(machine) = arch.value.as_deref() else {
        return Err(done(
            PseudoNmiVerdict::Unknown,
            vec![format!("arch unknown: {}", arch.source)],
        ));
    };
    let why = match ArchFamily::from_uname(machine) {
        ArchFamily::Arm64 => return Ok(()),
        ArchFamily::X86 => "the PMU overflow interrupt is an NMI already",
        ArchFamily::Other => "pseudo-NMI is an arm64 GICv3 mechanism",
    };
    Err(done(
        PseudoNmiVerdict::NotApplicable,
        vec![format!("arch {machine} ({}): {why}", arch.source)],
    ))
}

/// The kernel log's lines that bear on pseudo-NMI.
struct LogLines<'a> {
    /// The PMU driver's probe lines, and those of them saying it uses NMIs.
    probes: Vec<&'a str>,
    nmi_probes: Vec<&'a str>,
    /// The GIC's "pseudo-NMIs enabled", firmware's refusal, and priority
    /// masking lines.
    gic: Vec<&'a str>,
    refused: Vec<&'a str>,
    prio: Vec<&'a str>,
}

impl<'a> LogLines<'a> {
    fn grep(log: &'a KernelLog) -> LogLines<'a> {
        let probes: Vec<&str> = log
            .grep(PROBE)
            .filter(|l| l.contains(" PMU driver, "))
            .collect();
        let nmi_probes = probes
            .iter()
            .copied()
            .filter(|l| l.trim_end().ends_with(PROBE_NMI))
            .collect();
        LogLines {
            probes,
            nmi_probes,
            gic: log.grep(GIC_ENABLED).collect(),
            refused: log.grep(FIRMWARE_REFUSED).collect(),
            prio: log.grep(PRIO_MASKING).collect(),
        }
    }
}

/// The verdict a readable log gives, if it gives one.
fn from_log(
    log: &KernelLog,
    lines: &LogLines<'_>,
    req: &Request,
    cfg: &Built,
) -> Option<PseudoNmi> {
    if !lines.nmi_probes.is_empty() {
        let mut ev = quote(log, &lines.nmi_probes);
        ev.extend(quote(log, &lines.gic));
        ev.push(req.line());
        if let Built::No(cfg_line) = cfg {
            ev.push(format!(
                "{cfg_line}, yet the running kernel uses NMIs: that config is not this kernel's"
            ));
        }
        return Some(done(PseudoNmiVerdict::Enabled, ev));
    }
    if !lines.refused.is_empty() {
        let mut ev = quote(log, &lines.refused);
        ev[0].push_str(" (firmware refused)");
        ev.push(req.line());
        ev.extend(quote(log, &lines.probes));
        return Some(done(PseudoNmiVerdict::Disabled, ev));
    }
    if !lines.gic.is_empty() {
        let mut ev = quote(log, &lines.gic);
        if lines.probes.is_empty() {
            ev.push(format!(
                "{}: no PMU probe line to confirm the PMU uses it",
                log.name()
            ));
            ev.push(req.line());
            return Some(done(PseudoNmiVerdict::Enabled, ev));
        }
        // The GIC can deliver NMIs, but the PMU driver fell back to a
        // normal IRQ: what matters here is the PMU interrupt.
        let mut first = quote(log, &lines.probes);
        first[0].push_str(" (no \", using NMIs\": the PMU driver took a normal IRQ)");
        first.extend(ev);
        return Some(done(PseudoNmiVerdict::Disabled, first));
    }
    if !lines.probes.is_empty() || log.covers_boot {
        let mut ev = if lines.probes.is_empty() {
            vec![format!(
                "{}: from boot, no PMU probe line and no \"{GIC_ENABLED}\" line",
                log.name()
            )]
        } else {
            let mut q = quote(log, &lines.probes);
            q[0].push_str(" (no \", using NMIs\")");
            q
        };
        match req {
            Request::Yes(line) => ev.push(format!("{line}, but the kernel did not enable it")),
            other => ev.push(other.line()),
        }
        ev.extend(quote(log, &lines.prio));
        if let Built::Yes(line) | Built::Unknown(line) = cfg {
            ev.push(line.clone());
        }
        return Some(done(PseudoNmiVerdict::Disabled, ev));
    }
    None
}

/// The verdict from the config and command line alone (`log` says why they
/// must do).
fn without_log(log: &KernelLog, cfg: Built, req: Request) -> PseudoNmi {
    let log_why = if log.is_readable() {
        format!(
            "{}: no longer holds the boot messages (ring buffer wrapped), so a missing line proves nothing",
            log.name()
        )
    } else {
        log.why_unreadable()
    };
    match (cfg, req) {
        (Built::Yes(cfg_line), Request::No(req_line)) => done(
            PseudoNmiVerdict::Disabled,
            vec![req_line, cfg_line, log_why],
        ),
        (Built::Yes(cfg_line), Request::Yes(req_line)) => done(
            PseudoNmiVerdict::Unknown,
            vec![
                format!("{log_why}: only the log shows whether firmware allowed it"),
                req_line,
                cfg_line,
            ],
        ),
        (cfg, req) => {
            let cfg_line = match cfg {
                Built::Yes(s) | Built::No(s) | Built::Unknown(s) => s,
            };
            done(
                PseudoNmiVerdict::Unknown,
                vec![log_why, cfg_line, req.line()],
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arch(a: &str) -> Sourced<String> {
        Sourced::found(a.to_string(), "/proc/sys/kernel/arch")
    }
    fn cmdline(c: &str) -> Sourced<Cmdline> {
        Sourced::found(Cmdline::parse(c), "/proc/cmdline")
    }
    fn config(text: Option<&str>) -> Sourced<KernelConfig> {
        match text {
            Some(t) => Sourced::found(KernelConfig::parse(t), "/boot/config-6.1.0"),
            None => {
                Sourced::missing("not present: /proc/config.gz; not present: /boot/config-6.1.0")
            }
        }
    }
    fn kmsg(lines: &[&str]) -> KernelLog {
        let mut text =
            String::from("5,0,0,-;Booting Linux on physical CPU 0x0000000000 [0x413fd0c1]\n");
        for (i, l) in lines.iter().enumerate() {
            text.push_str(&format!("6,{},{},-;{l}\n", i + 1, i * 10));
        }
        KernelLog::from_kmsg(text.as_bytes(), "/dev/kmsg".into())
    }
    fn unreadable() -> KernelLog {
        let mut log = KernelLog::from_kmsg(b"", "x".into());
        log.source = None;
        log.unreadable = vec![
            "unreadable: /dev/kmsg: Operation not permitted (os error 1)".into(),
            "unreadable: syslog(2) SYSLOG_ACTION_READ_ALL: Operation not permitted (os error 1)"
                .into(),
            "kernel.dmesg_restrict=1: reading the log needs CAP_SYSLOG (root)".into(),
        ];
        log
    }

    const BUILT: &str = "CONFIG_ARM64_PSEUDO_NMI=y\n";
    const NOT_SET: &str = "# CONFIG_ARM64_PSEUDO_NMI is not set\n";
    const PROBE_OFF: &str =
        "hw perfevents: enabled with armv8_pmuv3_0 PMU driver, 7 counters available";
    const PROBE_ON: &str = "hw perfevents: enabled with armv8_pmuv3_0 PMU driver, 7 (0,8000003f) counters available, using NMIs";
    const GIC_ON: &str = "GICv3: Pseudo-NMIs enabled using relaxed ICC_PMR_EL1 synchronisation";

    #[test]
    fn x86_and_others_not_applicable() {
        for a in ["x86_64", "i686"] {
            let v = verdict(&arch(a), &cmdline(""), &config(None), &unreadable());
            assert_eq!(v.verdict, PseudoNmiVerdict::NotApplicable);
            assert!(v.evidence[0].contains("an NMI already"));
        }
        let v = verdict(&arch("riscv64"), &cmdline(""), &config(None), &unreadable());
        assert_eq!(v.verdict, PseudoNmiVerdict::NotApplicable);
        let v = verdict(
            &Sourced::missing("not present: /proc/sys/kernel/arch"),
            &cmdline(""),
            &config(None),
            &kmsg(&[]),
        );
        assert_eq!(v.verdict, PseudoNmiVerdict::Unknown);
    }

    #[test]
    fn probe_line_with_nmis_is_enabled_and_quoted_first() {
        let v = verdict(
            &arch("aarch64"),
            &cmdline("irqchip.gicv3_pseudo_nmi=1"),
            &config(Some(BUILT)),
            &kmsg(&[GIC_ON, PROBE_ON]),
        );
        assert_eq!(v.verdict, PseudoNmiVerdict::Enabled);
        assert_eq!(v.evidence[0], format!("/dev/kmsg: \"{PROBE_ON}\""));
        assert_eq!(v.evidence[1], format!("/dev/kmsg: \"{GIC_ON}\""));
    }

    #[test]
    fn parameter_without_config_is_not_built() {
        let v = verdict(
            &arch("aarch64"),
            &cmdline("irqchip.gicv3_pseudo_nmi=1"),
            &config(Some(NOT_SET)),
            &kmsg(&[PROBE_OFF]),
        );
        assert_eq!(v.verdict, PseudoNmiVerdict::NotBuilt);
        assert_eq!(
            v.evidence[0],
            "/boot/config-6.1.0: \"# CONFIG_ARM64_PSEUDO_NMI is not set\""
        );
        // Also when the log is unreadable, and when the option has no line.
        let v = verdict(
            &arch("aarch64"),
            &cmdline(""),
            &config(Some("CONFIG_HZ=250\n")),
            &unreadable(),
        );
        assert_eq!(v.verdict, PseudoNmiVerdict::NotBuilt);
    }

    #[test]
    fn firmware_refusal_is_disabled_despite_parameter() {
        let v = verdict(
            &arch("aarch64"),
            &cmdline("irqchip.gicv3_pseudo_nmi=1"),
            &config(Some(BUILT)),
            &kmsg(&[
                PRIO_MASKING,
                "GICv3: SCR_EL3.FIQ is cleared, cannot enable use of pseudo-NMIs",
                PROBE_OFF,
            ]),
        );
        assert_eq!(v.verdict, PseudoNmiVerdict::Disabled);
        assert!(
            v.evidence[0].ends_with("(firmware refused)"),
            "{:?}",
            v.evidence
        );
    }

    #[test]
    fn built_not_requested_is_disabled_with_or_without_log() {
        for log in [kmsg(&[PROBE_OFF]), unreadable(), kmsg(&[])] {
            let v = verdict(
                &arch("aarch64"),
                &cmdline("ro quiet"),
                &config(Some(BUILT)),
                &log,
            );
            assert_eq!(v.verdict, PseudoNmiVerdict::Disabled, "{v:?}");
            assert!(
                v.evidence.iter().any(|e| e.contains("not requested")),
                "{v:?}"
            );
        }
        // "=0" is said as such.
        let v = verdict(
            &arch("aarch64"),
            &cmdline("irqchip.gicv3_pseudo_nmi=0"),
            &config(Some(BUILT)),
            &unreadable(),
        );
        assert_eq!(v.verdict, PseudoNmiVerdict::Disabled);
        assert!(v.evidence[0].contains("\"irqchip.gicv3_pseudo_nmi=0\" does not request it"));
    }

    #[test]
    fn unreadable_log_and_no_config_is_unknown_with_reason() {
        for c in ["irqchip.gicv3_pseudo_nmi=1", ""] {
            let v = verdict(&arch("aarch64"), &cmdline(c), &config(None), &unreadable());
            assert_eq!(v.verdict, PseudoNmiVerdict::Unknown);
            assert!(
                v.evidence[0].contains("dmesg_restrict=1"),
                "{:?}",
                v.evidence
            );
            assert!(
                v.evidence[1].starts_with("kernel config unknown: not present: /proc/config.gz")
            );
        }
        // Requested and built, but no log: firmware may have refused.
        let v = verdict(
            &arch("aarch64"),
            &cmdline("irqchip.gicv3_pseudo_nmi=1"),
            &config(Some(BUILT)),
            &unreadable(),
        );
        assert_eq!(v.verdict, PseudoNmiVerdict::Unknown);
        assert!(v.evidence[0].contains("firmware"));
    }

    #[test]
    fn gic_enabled_but_pmu_on_normal_irq_is_disabled() {
        let v = verdict(
            &arch("aarch64"),
            &cmdline("irqchip.gicv3_pseudo_nmi=1"),
            &config(Some(BUILT)),
            &kmsg(&[GIC_ON, PROBE_OFF]),
        );
        assert_eq!(v.verdict, PseudoNmiVerdict::Disabled);
        assert!(v.evidence[0].contains("normal IRQ"));
        let v = verdict(
            &arch("aarch64"),
            &cmdline("irqchip.gicv3_pseudo_nmi=1"),
            &config(None),
            &kmsg(&[GIC_ON]),
        );
        assert_eq!(v.verdict, PseudoNmiVerdict::Enabled);
    }

    #[test]
    fn wrapped_log_proves_no_absence() {
        let wrapped = KernelLog::from_kmsg(b"6,9000,1,-;eth0: link up\n", "/dev/kmsg".into());
        let v = verdict(
            &arch("aarch64"),
            &cmdline("irqchip.gicv3_pseudo_nmi=1"),
            &config(Some(BUILT)),
            &wrapped,
        );
        assert_eq!(v.verdict, PseudoNmiVerdict::Unknown);
        assert!(v.evidence[0].contains("no longer holds the boot messages"));
    }

    #[test]
    fn running_kernel_outranks_a_stale_config_file() {
        let v = verdict(
            &arch("aarch64"),
            &cmdline("irqchip.gicv3_pseudo_nmi=1"),
            &config(Some(NOT_SET)),
            &kmsg(&[PROBE_ON]),
        );
        assert_eq!(v.verdict, PseudoNmiVerdict::Enabled);
        assert!(
            v.evidence
                .last()
                .is_some_and(|e| e.contains("not this kernel's"))
        );
    }
}
