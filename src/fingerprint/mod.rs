/*!
The machine fingerprint: what a result was measured on.

A count of dropped PMU interrupts is evidence only together with the kernel,
CPU, hypervisor, PMU and settings it came from; above all, whether the PMU
overflow interrupt was an NMI (arm64 pseudo-NMI), which decides whether the
bug can happen at all. `pmustress env` prints this; `pmustress run` prints the
verdict line before measuring and embeds the whole fingerprint in its
results.

Every value carries its source, and a missing source is said ("not present:
/proc/config.gz"), never filled in by a guess. Everything is read under a root
directory (`/` live), so the same code runs on fixture trees in
`tests/fixtures/fingerprint`. Collecting never fails.
*/

pub mod cpu;
mod kmsg;
mod knobs;
mod machine;
mod pmu;
mod pseudo_nmi;
mod read;
mod running_kernel;

use std::fmt;
use std::path::Path;

use serde::Serialize;

pub use kmsg::KernelLog;
pub use knobs::{Knobs, Limit, SigQ, parse_limits, parse_sigq, status_field};
pub use machine::{Cpus, Dmi, MachineKind, Virtualization};
pub use pmu::{Pmu, Pmus, parse_probe_line};
pub use pseudo_nmi::{PseudoNmi, PseudoNmiVerdict, verdict as pseudo_nmi_verdict};
pub use read::Sourced;
pub use running_kernel::{
    ArchFamily, Cmdline, ConfigValue, KernelConfig, RunningKernel, WATCHED_OPTIONS, kstrtobool,
};

use crate::fingerprint::cpu::{BranchEvent, CpuId, format_cpu_list};
use read::Root;

/// The fingerprint's own `schema_version` (run.json's is
/// `domain::RUN_SCHEMA_VERSION`): bumped whenever a field changes meaning or
/// disappears, so results written by different versions can be compared
/// knowingly.
pub const FINGERPRINT_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize)]
pub struct Fingerprint {
    pub schema_version: u32,
    pub tool: Tool,
    /// The directory read ("/" for the live machine).
    pub root: String,
    pub pseudo_nmi: PseudoNmi,
    pub kernel: RunningKernel,
    pub cpus: Cpus,
    pub machine: Machine,
    pub pmus: Pmus,
    pub knobs: Knobs,
}

#[derive(Debug, Clone, Serialize)]
pub struct Tool {
    pub name: &'static str,
    pub version: &'static str,
    /// `git rev-parse HEAD` at build time ("-dirty" with uncommitted
    /// changes), or "unknown" outside git.
    pub commit: &'static str,
}

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub dmi: Dmi,
    pub virtualization: Virtualization,
}

impl Fingerprint {
    /// Reads everything under `root` ("/" live). Never fails: missing
    /// sources are recorded as such.
    pub fn collect(root: &Path) -> Fingerprint {
        let root = Root::new(root);
        let kernel = RunningKernel::read(&root);
        let cpuinfo = root.read("proc/cpuinfo");
        let cpus = Cpus::read(&root, &cpuinfo);
        let dmi = Dmi::read(&root);
        let virtualization = Virtualization::detect(&root, &cpuinfo, &dmi, &kernel.log);
        let pmus = Pmus::read(&root, &kernel.log);
        let knobs = Knobs::read(&root, &kernel.cmdline);
        let pseudo_nmi =
            pseudo_nmi::verdict(&kernel.arch, &kernel.cmdline, &kernel.config, &kernel.log);
        Fingerprint {
            schema_version: FINGERPRINT_SCHEMA_VERSION,
            tool: Tool {
                name: env!("CARGO_PKG_NAME"),
                version: env!("CARGO_PKG_VERSION"),
                commit: env!("PMUSTRESS_GIT_COMMIT"),
            },
            root: root.dir().display().to_string(),
            pseudo_nmi,
            kernel,
            cpus,
            machine: Machine {
                dmi,
                virtualization,
            },
            pmus,
            knobs,
        }
    }

    pub fn pseudo_nmi(&self) -> &PseudoNmi {
        &self.pseudo_nmi
    }

    /// CPU identities of every CPU, by cpu number (sysfs midr_el1 first,
    /// then /proc/cpuinfo).
    pub fn cpus(&self) -> &[(u32, CpuId)] {
        &self.cpus.list
    }

    /// The PMUs under sys/bus/event_source/devices, core PMUs first.
    pub fn pmus(&self) -> &[Pmu] {
        &self.pmus.devices
    }

    /// Whether a core PMU exists; without one only software events count.
    #[cfg(test)]
    pub fn has_hardware_pmu(&self) -> bool {
        self.pmus.has_hardware_pmu
    }

    /// The line `run` prints before measuring:
    /// "pseudo-NMI: disabled (evidence: ...; ...)".
    pub fn verdict_line(&self) -> String {
        format!(
            "pseudo-NMI: {} (evidence: {})",
            self.pseudo_nmi.verdict,
            self.pseudo_nmi.evidence.join("; ")
        )
    }
}

/// `  label                 value  [source]`, or `-  (why not)`.
fn row<T: fmt::Display>(f: &mut fmt::Formatter<'_>, label: &str, item: &Sourced<T>) -> fmt::Result {
    match &item.value {
        Some(v) => writeln!(f, "  {label:<27} {v}  [{}]", item.source),
        None => writeln!(f, "  {label:<27} -  ({})", item.source),
    }
}

fn cpu_row(f: &mut fmt::Formatter<'_>, label: &str, item: &Sourced<Vec<u32>>) -> fmt::Result {
    row(f, label, &item.clone().map(|v| format_cpu_list(&v)))
}

impl Fingerprint {
    /// The running kernel: release, command line, watched config options, log.
    fn write_kernel(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let k = &self.kernel;
        writeln!(f, "\nkernel")?;
        row(f, "release", &k.release)?;
        row(f, "version", &k.version)?;
        row(f, "arch", &k.arch)?;
        row(f, "cmdline", &k.cmdline.clone().map(|c| c.raw))?;
        match &k.config.value {
            Some(c) => {
                writeln!(
                    f,
                    "  {:<27} {} watched options  [{}]",
                    "config",
                    c.options.len(),
                    k.config.source
                )?;
                for line in c.options.values() {
                    writeln!(f, "  {:<27}   {line}", "")?;
                }
            }
            None => writeln!(f, "  {:<27} -  ({})", "config", k.config.source)?,
        }
        if k.log.is_readable() {
            writeln!(
                f,
                "  {:<27} {} records{}{}  [{}]",
                "log",
                k.log.records,
                if k.log.covers_boot {
                    ", from boot"
                } else {
                    ", boot messages gone"
                },
                if k.log.skipped > 0 {
                    format!(", {} unparsable", k.log.skipped)
                } else {
                    String::new()
                },
                k.log.name()
            )?;
            for why in &k.log.unreadable {
                writeln!(f, "  {:<27}   (first tried: {why})", "")?;
            }
        } else {
            writeln!(f, "  {:<27} -  ({})", "log", k.log.unreadable.join("; "))?;
        }
        Ok(())
    }

    /// The CPU clusters and the core model each has.
    fn write_cpus(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "\ncpus ({})", self.cpus.sources.join(", "))?;
        for c in &self.cpus.clusters {
            writeln!(f, "  {:<27} {}", c.cpus, c.id)?;
            let event = match c.model.branch_event {
                BranchEvent::Raw(code) => format!("raw {code:#x}"),
                BranchEvent::Generic => "generic PERF_COUNT_HW_BRANCH_INSTRUCTIONS".to_string(),
            };
            writeln!(
                f,
                "  {:<27} core {}: branches {event}, skid {}{}",
                "",
                c.model.name,
                c.model.skid,
                if c.model.skid_unbounded {
                    " (unbounded)"
                } else {
                    ""
                }
            )?;
        }
        Ok(())
    }

    /// DMI names and whether this is a virtual machine.
    fn write_machine(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = &self.machine;
        writeln!(f, "\nmachine")?;
        row(f, "sys_vendor", &m.dmi.sys_vendor)?;
        row(f, "product_name", &m.dmi.product_name)?;
        row(f, "board_asset_tag", &m.dmi.board_asset_tag)?;
        row(f, "bios_vendor", &m.dmi.bios_vendor)?;
        let platform = match m.virtualization.platform {
            MachineKind::BareMetal => "bare metal".to_string(),
            MachineKind::VirtualMachine => match &m.virtualization.hypervisor {
                Some(h) => format!("virtual machine ({h})"),
                None => "virtual machine".to_string(),
            },
            MachineKind::Unknown => "unknown".to_string(),
        };
        writeln!(f, "  {:<27} {platform}", "platform")?;
        for e in &m.virtualization.evidence {
            writeln!(f, "  {:<27}   {e}", "")?;
        }
        Ok(())
    }

    /// The PMUs sysfs lists, the core ones in detail.
    fn write_pmus(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.pmus;
        writeln!(f, "\npmus [{}]", p.source)?;
        if !p.has_hardware_pmu {
            writeln!(
                f,
                "  no hardware PMU: no core PMU (`cpu`, or one with a `cpus` file); only software events can be counted"
            )?;
        }
        for pmu in &p.devices {
            writeln!(
                f,
                "  {}{}",
                if pmu.is_core { "core " } else { "" },
                pmu.summary()
            )?;
            if pmu.is_core {
                writeln!(
                    f,
                    "    events: {}",
                    if pmu.events.is_empty() {
                        "(none named in sysfs)".to_string()
                    } else {
                        pmu.events.join(" ")
                    }
                )?;
                for (cap, v) in &pmu.caps {
                    writeln!(f, "    caps/{cap}: {v}")?;
                }
                if let Some(c) = &pmu.counters {
                    writeln!(f, "    counters from {}", c.source)?;
                }
            } else if !pmu.events.is_empty() {
                writeln!(f, "    {} named events", pmu.events.len())?;
            }
        }
        for s in &p.skipped {
            writeln!(f, "  skipped {s}")?;
        }
        for l in &p.log_lines {
            writeln!(f, "  {}: \"{l}\"", self.kernel.log.name())?;
        }
        Ok(())
    }

    /// The sysctls and limits that decide what a run can do.
    fn write_knobs(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = &self.knobs;
        writeln!(f, "\nknobs")?;
        row(f, "perf_event_paranoid", &n.perf_event_paranoid)?;
        row(
            f,
            "perf_event_max_sample_rate",
            &n.perf_event_max_sample_rate,
        )?;
        row(f, "perf_cpu_time_max_percent", &n.perf_cpu_time_max_percent)?;
        row(f, "perf_event_mlock_kb", &n.perf_event_mlock_kb)?;
        row(f, "nmi_watchdog", &n.nmi_watchdog)?;
        row(f, "dmesg_restrict", &n.dmesg_restrict)?;
        row(f, "RLIMIT_SIGPENDING", &n.rlimit_sigpending)?;
        row(f, "SigQ", &n.sigq)?;
        cpu_row(f, "online cpus", &n.online_cpus)?;
        cpu_row(f, "allowed cpus", &n.allowed_cpus)?;
        row(f, "isolcpus", &n.isolcpus)?;
        row(f, "nohz_full", &n.nohz_full)
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "pseudo-NMI: {}", self.pseudo_nmi.verdict)?;
        for e in &self.pseudo_nmi.evidence {
            writeln!(f, "  {e}")?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "tool: {} {} (commit {}); root {}",
            self.tool.name, self.tool.version, self.tool.commit, self.root
        )?;
        self.write_kernel(f)?;
        self.write_cpus(f)?;
        self.write_machine(f)?;
        self.write_pmus(f)?;
        self.write_knobs(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::cpu::{BranchEvent, CpuId};
    use std::path::PathBuf;

    fn fixture(case: &str) -> Fingerprint {
        let dir: PathBuf = [
            env!("CARGO_MANIFEST_DIR"),
            "tests/fixtures/fingerprint",
            case,
        ]
        .iter()
        .collect();
        assert!(dir.is_dir(), "missing fixture {}", dir.display());
        Fingerprint::collect(&dir)
    }

    fn json(fp: &Fingerprint) -> serde_json::Value {
        let text = serde_json::to_string_pretty(fp).expect("serializes");
        serde_json::from_str(&text).expect("parses back")
    }

    /// Built in, not requested: the 6.1 probe line has no ", using NMIs".
    #[test]
    fn graviton2_c6g_built_in_not_requested_is_disabled() {
        let fp = fixture("graviton2-c6g-6.1-disabled");
        let v = fp.pseudo_nmi();
        assert_eq!(v.verdict, PseudoNmiVerdict::Disabled, "{v:?}");
        assert_eq!(
            v.evidence[0],
            "/dev/kmsg: \"hw perfevents: enabled with armv8_pmuv3_0 PMU driver, 7 counters available\" (no \", using NMIs\")"
        );
        assert_eq!(
            v.evidence[1],
            "/proc/cmdline: no irqchip.gicv3_pseudo_nmi=1 (not requested)"
        );
        assert_eq!(
            v.evidence[2],
            "/boot/config-6.1.102-111.182.amzn2023.aarch64: \"CONFIG_ARM64_PSEUDO_NMI=y\""
        );
        assert_eq!(fp.cpus().len(), 32);
        assert!(
            fp.cpus()
                .iter()
                .all(|(_, id)| *id == CpuId::Arm { midr: 0x413fd0c1 })
        );
        assert_eq!(fp.cpus.clusters.len(), 1);
        assert_eq!(fp.cpus.clusters[0].cpus, "0-31");
        assert_eq!(fp.cpus.clusters[0].model.name, "Neoverse-N1");
        assert_eq!(
            fp.cpus.sources,
            ["32 from /sys/devices/system/cpu/cpu*/regs/identification/midr_el1"]
        );
        assert_eq!(
            fp.machine.dmi.sys_vendor.value.as_deref(),
            Some("Amazon EC2")
        );
        assert_eq!(
            fp.machine.dmi.product_name.value.as_deref(),
            Some("c6g.8xlarge")
        );
        assert_eq!(
            fp.machine.virtualization.platform,
            MachineKind::VirtualMachine
        );
        assert!(fp.has_hardware_pmu());
        let core = &fp.pmus()[0];
        assert_eq!(
            (core.name.as_str(), core.type_id, core.is_core),
            ("armv8_pmuv3_0", 8, true)
        );
        assert_eq!(
            core.cpus.as_deref(),
            Some(&(0..32).collect::<Vec<u32>>()[..])
        );
        assert!(core.events.iter().any(|e| e == "br_retired"));
        assert_eq!(core.counters.as_ref().and_then(|c| c.value), Some(7));
        assert_eq!(
            fp.knobs.sigq.value,
            Some(SigQ {
                queued: 0,
                limit: 252837
            })
        );
        assert_eq!(fp.knobs.rlimit_sigpending.value, None);
        assert!(fp.knobs.rlimit_sigpending.source.starts_with("not read"));
        assert_eq!(
            fp.knobs.nmi_watchdog.source,
            "not present: /proc/sys/kernel/nmi_watchdog"
        );
    }

    #[test]
    fn graviton3_c7g_with_parameter_and_nmi_probe_line_is_enabled() {
        let fp = fixture("graviton3-c7g-nmi-enabled");
        let v = fp.pseudo_nmi();
        assert_eq!(v.verdict, PseudoNmiVerdict::Enabled, "{v:?}");
        assert_eq!(
            v.evidence[0],
            "/dev/kmsg: \"hw perfevents: enabled with armv8_pmuv3_0 PMU driver, 7 (0,8000003f) counters available, using NMIs\""
        );
        assert!(v.evidence[1].contains("Pseudo-NMIs enabled using relaxed ICC_PMR_EL1"));
        assert_eq!(
            v.evidence[2],
            "/proc/cmdline: \"irqchip.gicv3_pseudo_nmi=1\" (requested)"
        );
        assert_eq!(fp.kernel.config.source, "/proc/config.gz");
        assert_eq!(fp.cpus().len(), 64);
        assert_eq!(fp.cpus.clusters[0].model.name, "Neoverse-V1");
        assert_eq!(
            fp.cpus.clusters[0].model.branch_event,
            BranchEvent::Raw(0x21)
        );
        assert_eq!(
            fp.knobs.isolcpus.value.as_deref(),
            Some("nohz,domain,62-63")
        );
        assert_eq!(fp.knobs.nohz_full.value.as_deref(), Some("62-63"));
        assert_eq!(fp.knobs.allowed_cpus.value, Some((0..62).collect()));
        let core = &fp.pmus()[0];
        assert_eq!(
            core.caps.get("slots").map(String::as_str),
            Some("0x00000008")
        );
        assert!(fp.verdict_line().starts_with(
            "pseudo-NMI: enabled (evidence: /dev/kmsg: \"hw perfevents: enabled with armv8_pmuv3_0"
        ));
        let text = fp.to_string();
        assert!(
            text.starts_with("pseudo-NMI: enabled\n  /dev/kmsg: \"hw perfevents:"),
            "{text}"
        );
    }

    #[test]
    fn parameter_on_cmdline_without_config_is_not_built() {
        let fp = fixture("debian-6.1-arm64-param-not-built");
        let v = fp.pseudo_nmi();
        assert_eq!(v.verdict, PseudoNmiVerdict::NotBuilt, "{v:?}");
        assert_eq!(
            v.evidence[0],
            "/boot/config-6.1.0-37-arm64: \"# CONFIG_ARM64_PSEUDO_NMI is not set\""
        );
        assert_eq!(
            v.evidence[1],
            "/proc/cmdline: \"irqchip.gicv3_pseudo_nmi=1\" (requested)"
        );
        assert_eq!(
            fp.machine.virtualization.platform,
            MachineKind::VirtualMachine
        );
        assert_eq!(
            fp.machine.virtualization.hypervisor.as_deref(),
            Some("QEMU")
        );
        assert_eq!(fp.machine.dmi.board_asset_tag.value.as_deref(), Some(""));
    }

    #[test]
    fn firmware_refusal_is_disabled_and_big_little_is_two_clusters() {
        let fp = fixture("rk3588-firmware-refused");
        let v = fp.pseudo_nmi();
        assert_eq!(v.verdict, PseudoNmiVerdict::Disabled, "{v:?}");
        assert_eq!(
            v.evidence[0],
            "/dev/kmsg: \"GICv3: SCR_EL3.FIQ is cleared, cannot enable use of pseudo-NMIs\" (firmware refused)"
        );
        let c = &fp.cpus.clusters;
        assert_eq!(c.len(), 2);
        assert_eq!(
            (c[0].cpus.as_str(), c[0].model.name.as_str()),
            ("0-3", "Cortex-A55")
        );
        assert_eq!(
            (c[1].cpus.as_str(), c[1].model.name.as_str()),
            ("4-7", "Cortex-A76")
        );
        let cores: Vec<_> = fp.pmus().iter().filter(|p| p.is_core).collect();
        assert_eq!(cores.len(), 2);
        assert_eq!(cores[1].cpus, Some(vec![4, 5, 6, 7]));
        assert_eq!(cores[1].type_id, 9);
        assert_eq!(
            fp.machine.dmi.sys_vendor.source,
            "not present: /sys/class/dmi/id/sys_vendor"
        );
        assert_eq!(fp.machine.virtualization.platform, MachineKind::BareMetal);
    }

    #[test]
    fn unreadable_log_without_config_is_unknown_and_says_why() {
        let fp = fixture("container-unreadable-log");
        let v = fp.pseudo_nmi();
        assert_eq!(v.verdict, PseudoNmiVerdict::Unknown, "{v:?}");
        assert!(
            v.evidence[0].starts_with("kernel log: unreadable: /dev/kmsg: Is a directory"),
            "{v:?}"
        );
        assert!(v.evidence[0].contains("syslog(2) not tried"));
        assert_eq!(
            v.evidence[1],
            "kernel config unknown: not present: /proc/config.gz; not present: /boot/config-6.8.0-1021-aws"
        );
        assert_eq!(
            v.evidence[2],
            "/proc/cmdline: \"irqchip.gicv3_pseudo_nmi=1\" (requested)"
        );
        // No sysfs MIDR here: the CPUs come from /proc/cpuinfo.
        assert_eq!(fp.cpus.sources, ["4 from /proc/cpuinfo"]);
        assert_eq!(fp.cpus().len(), 4);
        assert_eq!(fp.cpus()[3], (3, CpuId::Arm { midr: 0x413fd0c1 }));
        assert!(!fp.has_hardware_pmu());
        assert_eq!(fp.pmus.source, "not present: /sys/bus/event_source/devices");
        assert_eq!(
            fp.knobs.sigq.value,
            Some(SigQ {
                queued: 2,
                limit: 31437
            })
        );
    }

    #[test]
    fn intel_host_is_not_applicable_with_counters_from_the_log() {
        let fp = fixture("intel-kabylake-laptop");
        assert_eq!(fp.pseudo_nmi().verdict, PseudoNmiVerdict::NotApplicable);
        assert_eq!(
            fp.pseudo_nmi().evidence,
            ["arch x86_64 (/proc/sys/kernel/arch): the PMU overflow interrupt is an NMI already"]
        );
        let cpu = &fp.pmus()[0];
        assert_eq!(
            (cpu.name.as_str(), cpu.type_id, cpu.is_core),
            ("cpu", 4, true)
        );
        assert_eq!(cpu.cpus, None);
        assert!(cpu.events.iter().any(|e| e == "branch-instructions"));
        assert_eq!(
            cpu.caps.get("pmu_name").map(String::as_str),
            Some("skylake")
        );
        assert_eq!(cpu.counters.as_ref().and_then(|c| c.value), Some(4));
        assert_eq!(fp.cpus().len(), 8);
        assert_eq!(
            fp.cpus.clusters[0].model.branch_event,
            BranchEvent::Raw(0x5101c4)
        );
        assert_eq!(fp.machine.virtualization.platform, MachineKind::BareMetal);
        assert_eq!(fp.knobs.nmi_watchdog.value, Some(1));
        assert_eq!(fp.knobs.perf_event_max_sample_rate.value, Some(50000));
        assert!(
            fp.pmus
                .log_lines
                .iter()
                .any(|l| l.starts_with("NMI watchdog: Enabled"))
        );
    }

    #[test]
    fn amd_host_is_not_applicable() {
        let fp = fixture("amd-zen3-desktop");
        assert_eq!(fp.pseudo_nmi().verdict, PseudoNmiVerdict::NotApplicable);
        assert!(fp.has_hardware_pmu());
        assert_eq!(
            fp.pmus()[0].counters.as_ref().and_then(|c| c.value),
            Some(6)
        );
        let model = &fp.cpus.clusters[0].model;
        assert_eq!(model.branch_event, BranchEvent::Raw(0x5100d1));
        assert!(model.skid_unbounded);
        assert_eq!(fp.cpus().len(), 12);
        assert_eq!(fp.knobs.nmi_watchdog.value, Some(0));
        assert_eq!(
            fp.kernel
                .cmdline
                .value
                .as_ref()
                .and_then(|c| c.get("nmi_watchdog")),
            Some(Some("0"))
        );
    }

    /// The emulated PMU of a QEMU arm64 guest: no branch event, the
    /// kernel already throttled, no config to look at.
    #[test]
    fn qemu_guest_without_config_is_disabled_from_the_boot_log() {
        let fp = fixture("qemu-tcg-debian-6.12");
        let v = fp.pseudo_nmi();
        assert_eq!(v.verdict, PseudoNmiVerdict::Disabled, "{v:?}");
        assert!(
            v.evidence
                .iter()
                .any(|e| e.starts_with("kernel config unknown"))
        );
        let core = &fp.pmus()[0];
        assert_eq!(core.name, "armv8_pmuv3");
        assert_eq!(core.events, ["cpu_cycles"]);
        assert_eq!(fp.knobs.perf_event_max_sample_rate.value, Some(500));
        assert_eq!(
            fp.cpus.clusters[0].model.name,
            "arm64 implementer 0x00 part 0x051"
        );
        assert_eq!(
            fp.machine.virtualization.platform,
            MachineKind::VirtualMachine
        );
    }

    #[test]
    fn json_has_schema_version_and_kebab_verdict() {
        let fp = fixture("debian-6.1-arm64-param-not-built");
        let j = json(&fp);
        assert_eq!(j["schema_version"], FINGERPRINT_SCHEMA_VERSION);
        assert_eq!(j["pseudo_nmi"]["verdict"], "not-built");
        assert!(
            j["pseudo_nmi"]["evidence"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
        );
        assert_eq!(j["cpus"]["list"][0]["cpu"], 0);
        assert_eq!(j["cpus"]["list"][0]["id"]["midr"], 0x413fd0c1);
        assert_eq!(j["kernel"]["release"]["value"], "6.1.0-37-arm64");
        assert_eq!(
            j["kernel"]["release"]["source"],
            "/proc/sys/kernel/osrelease"
        );
        assert_eq!(j["pmus"]["has_hardware_pmu"], true);
        assert_eq!(j["knobs"]["nmi_watchdog"]["value"], serde_json::Value::Null);
        assert_eq!(j["tool"]["version"], env!("CARGO_PKG_VERSION"));
    }

    /// An empty root, and a root full of garbage: everything is said to be
    /// missing or unparsable, nothing panics.
    #[test]
    fn empty_and_garbage_roots_never_panic() {
        let empty = tempfile::tempdir().expect("tempdir");
        let fp = Fingerprint::collect(empty.path());
        assert_eq!(fp.pseudo_nmi().verdict, PseudoNmiVerdict::Unknown);
        assert_eq!(
            fp.pseudo_nmi().evidence,
            ["arch unknown: not present: /proc/sys/kernel/arch"]
        );
        assert!(fp.cpus().is_empty());
        let _ = fp.to_string();

        let junk = tempfile::tempdir().expect("tempdir");
        let put = |rel: &str, bytes: &[u8]| {
            let p = junk.path().join(rel);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(p, bytes).expect("write");
        };
        put("proc/sys/kernel/arch", b"aarch64");
        put("proc/sys/kernel/osrelease", b"../../etc/passwd");
        put("proc/sys/kernel/perf_event_paranoid", b"two\n");
        put("proc/cmdline", b"irqchip.gicv3_pseudo_nmi=\"1");
        put("proc/config.gz", b"\x1f\x8b\x08\x00garbage");
        put(
            "proc/cpuinfo",
            b"processor: 0\nCPU implementer: 0xzz\n\nprocessor\n\xff\xfe",
        );
        put("proc/self/status", b"SigQ:\t5/\nCpus_allowed_list:\t3-1\n");
        put(
            "dev/kmsg",
            b"6,0,0,-;Booting Linux\n6,1\n;;;\n6,2,0,-;hw perfevents: enabled with",
        );
        put("sys/devices/system/cpu/online", b"0-");
        put(
            "sys/devices/system/cpu/cpu0/regs/identification/midr_el1",
            b"0xnothex\n",
        );
        put("sys/bus/event_source/devices/armv8_pmuv3_0/type", b"\n");
        put("sys/bus/event_source/devices/armv8_pmuv3_0/cpus", b"0-");
        put("sys/class/dmi/id/sys_vendor", b"\xff");
        let fp = Fingerprint::collect(junk.path());
        assert_eq!(fp.cpus(), [(0, CpuId::Unknown)]);
        assert!(
            fp.knobs
                .perf_event_paranoid
                .source
                .starts_with("unparsable: /proc/sys/kernel/perf_event_paranoid")
        );
        assert_eq!(fp.knobs.sigq.value, None);
        assert_eq!(fp.knobs.allowed_cpus.value, None);
        assert_eq!(fp.knobs.online_cpus.value, None);
        assert!(fp.pmus().is_empty());
        assert_eq!(fp.pmus.skipped.len(), 1);
        assert_eq!(fp.kernel.log.skipped, 2);
        let _ = fp.to_string();
        let _ = json(&fp);
    }

    /// This very machine. Where it was written (an x86_64 VM whose kernel
    /// says "no PMU driver, software events only") there must be no
    /// hardware PMU and the verdict is not-applicable; elsewhere the test
    /// checks the same things against what the kernel and sysfs say.
    #[test]
    fn live_machine() {
        let fp = Fingerprint::collect(Path::new("/"));
        println!("{fp}");
        if cfg!(target_arch = "x86_64") {
            assert_eq!(fp.pseudo_nmi().verdict, PseudoNmiVerdict::NotApplicable);
            assert!(
                fp.verdict_line()
                    .starts_with("pseudo-NMI: not-applicable (evidence: arch x86_64")
            );
        }
        let kernel_says_none = fp
            .kernel
            .log
            .kept
            .iter()
            .any(|l| l.contains("software events only"));
        if kernel_says_none {
            assert!(!fp.has_hardware_pmu());
        }
        let cpu_pmu = Path::new("/sys/bus/event_source/devices/cpu").exists();
        assert_eq!(fp.pmus().iter().any(|p| p.name == "cpu"), cpu_pmu);
        assert!(
            fp.pmus()
                .iter()
                .any(|p| p.name == "software" && p.type_id == 1)
        );
        assert!(!fp.cpus().is_empty());
        assert!(fp.knobs.rlimit_sigpending.value.is_some());
        assert_eq!(json(&fp)["schema_version"], FINGERPRINT_SCHEMA_VERSION);
    }
}
