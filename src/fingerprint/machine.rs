/*!
What the kernel runs on: the CPUs, the DMI identity, and whether there is a
hypervisor underneath.

CPUs come from sysfs `midr_el1` first (arm64, every CPU, exact register
value) and /proc/cpuinfo second (x86, and arm64 kernels without the sysfs
file), as rr's counters test does. They are listed per cluster because the
branch event and skid follow the core type.

A VM matters twice: its vPMU may be missing or partial, and the hypervisor
may itself delay or drop PMU interrupts. We say "virtual machine" or "bare
metal" only on evidence, and list the evidence; otherwise "unknown".
*/

use serde::{Serialize, Serializer};

use super::kmsg::KernelLog;
use super::read::{Root, Sourced};
use crate::fingerprint::cpu::{Cluster, CoreModel, CpuId, clusters, core_model, format_cpu_list};

#[derive(Debug, Clone, Serialize)]
pub struct Cpus {
    /// Every CPU by number, with its identity.
    #[serde(serialize_with = "per_cpu")]
    pub list: Vec<(u32, CpuId)>,
    /// The same CPUs grouped by identity, with what the core table makes of it.
    pub clusters: Vec<ClusterInfo>,
    /// How many CPUs each source identified.
    pub sources: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ClusterInfo {
    /// Kernel CPU-list form ("0-3").
    pub cpus: String,
    pub id: CpuId,
    pub model: CoreModel,
}

fn per_cpu<S: Serializer>(list: &[(u32, CpuId)], s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Entry<'a> {
        cpu: u32,
        id: &'a CpuId,
    }
    s.collect_seq(list.iter().map(|(cpu, id)| Entry { cpu: *cpu, id }))
}

const MIDR: &str = "regs/identification/midr_el1";

impl Cpus {
    pub fn read(root: &Root, cpuinfo: &Sourced<String>) -> Cpus {
        let sysfs_cpus: Vec<u32> = root
            .list("sys/devices/system/cpu")
            .unwrap_or_default()
            .iter()
            .filter_map(|n| n.strip_prefix("cpu")?.parse().ok())
            .collect();
        let mut list: Vec<(u32, CpuId)> = Vec::new();
        for &n in &sysfs_cpus {
            let midr = root.read_value(&format!("sys/devices/system/cpu/cpu{n}/{MIDR}"));
            if let Some(id) = midr.value.as_deref().and_then(CpuId::from_midr_text) {
                list.push((n, id));
            }
        }
        let from_midr = list.len();
        let from_cpuinfo_all = cpuinfo
            .value
            .as_deref()
            .map(CpuId::from_cpuinfo)
            .unwrap_or_default();
        let mut from_cpuinfo = 0;
        for (n, id) in from_cpuinfo_all {
            if !list.iter().any(|(m, _)| *m == n) {
                list.push((n, id));
                from_cpuinfo += 1;
            }
        }
        // Listed in sysfs but identified nowhere (offline, or no MIDR file
        // and no cpuinfo): still a CPU, of unknown kind.
        let mut unidentified = Vec::new();
        for &n in &sysfs_cpus {
            if !list.iter().any(|(m, _)| *m == n) {
                list.push((n, CpuId::Unknown));
                unidentified.push(n);
            }
        }
        list.sort_by_key(|(n, _)| *n);
        let mut sources = Vec::new();
        if from_midr > 0 {
            sources.push(format!(
                "{from_midr} from /sys/devices/system/cpu/cpu*/{MIDR}"
            ));
        }
        if from_cpuinfo > 0 {
            sources.push(format!("{from_cpuinfo} from {}", cpuinfo.source));
        } else if cpuinfo.value.is_none() {
            sources.push(cpuinfo.source.clone());
        }
        if !unidentified.is_empty() {
            sources.push(format!(
                "{} unidentified (cpu {} in sysfs, no MIDR, not in /proc/cpuinfo)",
                unidentified.len(),
                format_cpu_list(&unidentified)
            ));
        }
        let clusters = clusters(&list)
            .into_iter()
            .map(|Cluster { id, cpus }| ClusterInfo {
                cpus: format_cpu_list(&cpus),
                model: core_model(&id),
                id,
            })
            .collect();
        Cpus {
            list,
            clusters,
            sources,
        }
    }
}

/// /sys/class/dmi/id: on EC2, sys_vendor "Amazon EC2", product_name the
/// instance type, board_asset_tag the instance id.
#[derive(Debug, Clone, Serialize)]
pub struct Dmi {
    pub sys_vendor: Sourced<String>,
    pub product_name: Sourced<String>,
    pub board_asset_tag: Sourced<String>,
    pub bios_vendor: Sourced<String>,
}

impl Dmi {
    pub fn read(root: &Root) -> Dmi {
        let f = |name: &str| root.read_value(&format!("sys/class/dmi/id/{name}"));
        Dmi {
            sys_vendor: f("sys_vendor"),
            product_name: f("product_name"),
            board_asset_tag: f("board_asset_tag"),
            bios_vendor: f("bios_vendor"),
        }
    }
}

/// Bare metal or a virtual machine: run.json's `virtualization.platform`.
/// (`config::event::Platform` is what event resolution knows of the machine.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MachineKind {
    BareMetal,
    VirtualMachine,
    Unknown,
}

#[derive(Debug, Clone, Serialize)]
pub struct Virtualization {
    pub platform: MachineKind,
    /// The hypervisor's name when something names it ("KVM", "xen").
    pub hypervisor: Option<String>,
    pub evidence: Vec<String>,
}

/// DMI vendors and products that only virtual machines report.
const VM_DMI: &[&str] = &[
    "QEMU",
    "KVM",
    "VMware",
    "VirtualBox",
    "innotek",
    "Xen",
    "Virtual Machine",
    "Google Compute Engine",
    "OpenStack",
    "Bochs",
];

impl Virtualization {
    pub fn detect(root: &Root, cpuinfo: &Sourced<String>, dmi: &Dmi, log: &KernelLog) -> Self {
        let mut vm = Vec::new();
        let mut metal = Vec::new();
        let mut name = None;

        let hv = root.read_value("sys/hypervisor/type");
        if let Some(t) = hv.value.filter(|t| !t.is_empty()) {
            vm.push(format!("{}: \"{t}\"", hv.source));
            name = Some(t);
        }
        if let Some(text) = cpuinfo.value.as_deref() {
            // x86 only: CPUID.1:ECX[31], set by every mainstream hypervisor.
            let flags: Vec<&str> = text
                .lines()
                .filter(|l| l.split(':').next().is_some_and(|k| k.trim() == "flags"))
                .collect();
            if let Some(first) = flags.first() {
                if first.split_whitespace().any(|f| f == "hypervisor") {
                    vm.push(format!("{}: flag \"hypervisor\"", cpuinfo.source));
                } else {
                    metal.push(format!("{}: no \"hypervisor\" flag", cpuinfo.source));
                }
            }
        }
        for line in log.grep("Hypervisor detected: ") {
            vm.push(format!("{}: \"{line}\"", log.name()));
            if let Some(n) = line.rsplit(": ").next() {
                name.get_or_insert_with(|| n.trim().to_string());
            }
        }
        for line in log.grep("hypervisor services detected") {
            vm.push(format!("{}: \"{line}\"", log.name()));
        }
        // arm64: a kernel entered at EL1 runs under a hypervisor; at EL2 it
        // owns the machine (or is a host itself).
        for line in log.grep("CPU: All CPU(s) started at EL") {
            if line.trim_end().ends_with("EL1") {
                vm.push(format!("{}: \"{line}\"", log.name()));
            } else if line.trim_end().ends_with("EL2") {
                metal.push(format!("{}: \"{line}\"", log.name()));
            }
        }
        let vendor = dmi.sys_vendor.value.as_deref().unwrap_or("");
        let product = dmi.product_name.value.as_deref().unwrap_or("");
        if let Some(hit) = VM_DMI
            .iter()
            .find(|k| vendor.contains(*k) || product.contains(*k))
        {
            vm.push(format!(
                "DMI: sys_vendor \"{vendor}\", product_name \"{product}\""
            ));
            name.get_or_insert_with(|| hit.to_string());
        } else if vendor == "Amazon EC2" && !product.is_empty() {
            // Nitro: every instance type is a VM except *.metal*.
            if product.contains(".metal") {
                metal.push(format!(
                    "DMI: Amazon EC2 \"{product}\" is a bare-metal instance"
                ));
            } else {
                vm.push(format!(
                    "DMI: Amazon EC2 \"{product}\" runs on the Nitro hypervisor"
                ));
                name.get_or_insert_with(|| "Nitro".to_string());
            }
        }
        let platform = if !vm.is_empty() {
            MachineKind::VirtualMachine
        } else if !metal.is_empty() {
            MachineKind::BareMetal
        } else {
            MachineKind::Unknown
        };
        let mut evidence = if platform == MachineKind::VirtualMachine {
            vm
        } else {
            metal
        };
        if platform == MachineKind::Unknown {
            evidence.push("no evidence either way (no DMI, hypervisor flag or boot line)".into());
        }
        Virtualization {
            platform,
            hypervisor: if platform == MachineKind::VirtualMachine {
                name
            } else {
                None
            },
            evidence,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dmi(vendor: Option<&str>, product: Option<&str>) -> Dmi {
        let s = |v: Option<&str>| match v {
            Some(v) => Sourced::found(v.to_string(), "/sys/class/dmi/id/x"),
            None => Sourced::missing("not present: /sys/class/dmi/id/x"),
        };
        Dmi {
            sys_vendor: s(vendor),
            product_name: s(product),
            board_asset_tag: s(None),
            bios_vendor: s(None),
        }
    }

    #[test]
    fn ec2_metal_vs_nitro_vm_and_el_lines() {
        let root = Root::new(std::path::Path::new("/nonexistent-root"));
        let none = Sourced::missing("not present: /proc/cpuinfo");
        let log = KernelLog::from_kmsg(
            b"6,0,0,-;CPU: All CPU(s) started at EL2\n",
            "/dev/kmsg".into(),
        );
        let v = Virtualization::detect(
            &root,
            &none,
            &dmi(Some("Amazon EC2"), Some("c7g.metal")),
            &log,
        );
        assert_eq!(v.platform, MachineKind::BareMetal);
        assert_eq!(v.evidence.len(), 2);
        let log = KernelLog::from_kmsg(
            b"6,0,0,-;CPU: All CPU(s) started at EL1\n",
            "/dev/kmsg".into(),
        );
        let v = Virtualization::detect(
            &root,
            &none,
            &dmi(Some("Amazon EC2"), Some("c6g.8xlarge")),
            &log,
        );
        assert_eq!(
            (v.platform, v.hypervisor.as_deref()),
            (MachineKind::VirtualMachine, Some("Nitro"))
        );
        let empty = KernelLog::default();
        let v = Virtualization::detect(&root, &none, &dmi(None, None), &empty);
        assert_eq!(v.platform, MachineKind::Unknown);
        let qemu = Virtualization::detect(
            &root,
            &none,
            &dmi(Some("QEMU"), Some("Standard PC (Q35 + ICH9, 2009)")),
            &empty,
        );
        assert_eq!(qemu.hypervisor.as_deref(), Some("QEMU"));
    }

    #[test]
    fn x86_hypervisor_flag() {
        let root = Root::new(std::path::Path::new("/nonexistent-root"));
        let info = |flags: &str| {
            Sourced::found(
                format!("processor\t: 0\nflags\t\t: {flags}\n"),
                "/proc/cpuinfo",
            )
        };
        let empty = KernelLog::default();
        let vm = Virtualization::detect(
            &root,
            &info("fpu vme hypervisor lahf_lm"),
            &dmi(None, None),
            &empty,
        );
        assert_eq!(vm.platform, MachineKind::VirtualMachine);
        let metal =
            Virtualization::detect(&root, &info("fpu vme lahf_lm"), &dmi(None, None), &empty);
        assert_eq!(metal.platform, MachineKind::BareMetal);
    }
}
