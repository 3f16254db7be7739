/*!
Which core a CPU is, and what that means for a branch-counting overflow test.

One table (`core_model`) turns an identity (arm64 MIDR_EL1, x86 vendor/family/model)
into the retired-branch event to program and the skid to tolerate. The same table
feeds `--event branches`, the default `--skid`, and the fingerprint, so a run's
choice of event can always be traced back to the CPU it saw. Everything here is
pure parsing of text that the fingerprint reads from a root directory.
*/

use serde::Serialize;

/// The identity of one CPU, as far as choosing an event and a skid goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "arch", rename_all = "snake_case")]
pub enum CpuId {
    /// arm64: the raw MIDR_EL1 value.
    Arm { midr: u32 },
    /// x86: CPUID vendor, family and model as /proc/cpuinfo prints them.
    X86 {
        vendor: X86Vendor,
        family: u32,
        model: u32,
        model_name: String,
    },
    /// Anything we could not read or do not know how to decode.
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum X86Vendor {
    Intel,
    Amd,
    Other(String),
}

/// MIDR_EL1 split into its fields (Arm ARM D17.2.100).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Midr {
    pub implementer: u8,
    pub variant: u8,
    pub part: u16,
    pub revision: u8,
}

impl Midr {
    pub fn decode(midr: u32) -> Midr {
        Midr {
            implementer: (midr >> 24) as u8,
            variant: ((midr >> 20) & 0xf) as u8,
            part: ((midr >> 4) & 0xfff) as u16,
            revision: (midr & 0xf) as u8,
        }
    }

    pub fn implementer_name(&self) -> Option<&'static str> {
        Some(match self.implementer {
            0x41 => "Arm",
            0x42 => "Broadcom",
            0x43 => "Cavium",
            0x46 => "Fujitsu",
            0x48 => "HiSilicon",
            0x4e => "NVIDIA",
            0x51 => "Qualcomm",
            0x61 => "Apple",
            0xc0 => "Ampere",
            _ => return None,
        })
    }

    /// The part name for Arm-designed cores (implementer 0x41).
    pub fn part_name(&self) -> Option<&'static str> {
        if self.implementer != 0x41 {
            return None;
        }
        Some(match self.part {
            0xd03 => "Cortex-A53",
            0xd05 => "Cortex-A55",
            0xd07 => "Cortex-A57",
            0xd08 => "Cortex-A72",
            0xd09 => "Cortex-A73",
            0xd0a => "Cortex-A75",
            0xd0b => "Cortex-A76",
            0xd0c => "Neoverse-N1",
            0xd0d => "Cortex-A77",
            0xd40 => "Neoverse-V1",
            0xd41 => "Cortex-A78",
            0xd44 => "Cortex-X1",
            0xd49 => "Neoverse-N2",
            0xd4f => "Neoverse-V2",
            0xd84 => "Neoverse-V3",
            0xd8e => "Neoverse-N3",
            _ => return None,
        })
    }
}

impl CpuId {
    /// Parses sysfs `regs/identification/midr_el1` ("0x00000000413fd0c1").
    pub fn from_midr_text(text: &str) -> Option<CpuId> {
        let t = text.trim();
        let hex = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X"))?;
        let v = u64::from_str_radix(hex, 16).ok()?;
        Some(CpuId::Arm {
            midr: u32::try_from(v).ok()?,
        })
    }

    /// Reads one /proc/cpuinfo block (the lines of one processor).
    ///
    /// x86 gives vendor_id/cpu family/model/model name; arm64 gives CPU
    /// implementer/variant/part/revision, from which MIDR is rebuilt (the
    /// architecture field 0xf is implied).
    pub fn from_cpuinfo_block(block: &str) -> CpuId {
        let field = |name: &str| {
            block.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == name).then(|| v.trim().to_string())
            })
        };
        let num = |name: &str| {
            let v = field(name)?;
            match v.strip_prefix("0x") {
                Some(h) => u32::from_str_radix(h, 16).ok(),
                None => v.parse().ok(),
            }
        };
        if let Some(vendor) = field("vendor_id") {
            let (Some(family), Some(model)) = (num("cpu family"), num("model")) else {
                return CpuId::Unknown;
            };
            let vendor = match vendor.as_str() {
                "GenuineIntel" => X86Vendor::Intel,
                "AuthenticAMD" | "HygonGenuine" => X86Vendor::Amd,
                _ => X86Vendor::Other(vendor),
            };
            return CpuId::X86 {
                vendor,
                family,
                model,
                model_name: field("model name").unwrap_or_default(),
            };
        }
        match (
            num("CPU implementer"),
            num("CPU variant"),
            num("CPU part"),
            num("CPU revision"),
        ) {
            (Some(i), Some(v), Some(p), Some(r))
                if i <= 0xff && v <= 0xf && p <= 0xfff && r <= 0xf =>
            {
                CpuId::Arm {
                    midr: (i << 24) | (v << 20) | (0xf << 16) | (p << 4) | r,
                }
            }
            _ => CpuId::Unknown,
        }
    }

    /// Splits a whole /proc/cpuinfo into (cpu number, identity) pairs.
    pub fn from_cpuinfo(text: &str) -> Vec<(u32, CpuId)> {
        text.split("\n\n")
            .filter_map(|block| {
                let n = block.lines().find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    (k.trim() == "processor").then(|| v.trim().parse().ok())?
                })?;
                Some((n, CpuId::from_cpuinfo_block(block)))
            })
            .collect()
    }
}

/// What we program for "branches" on a given core.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BranchEvent {
    /// A raw event code for the core PMU (perf's `rHEX`).
    Raw(u64),
    /// PERF_COUNT_HW_BRANCH_INSTRUCTIONS: whatever the driver maps it to.
    Generic,
}

/// Per-core facts: rr's `pmu_configs[]` in table form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CoreModel {
    pub name: String,
    pub branch_event: BranchEvent,
    /// Events a signal's read may land past the programmed period.
    pub skid: u64,
    /// Events the overflow interrupt itself may land past its overflow (a
    /// sample record's count shows it): the tolerance for placing samples on
    /// the overflow grid.
    pub interrupt_skid: u64,
    /// rr's verdict that the skid has no reliable bound on this core.
    pub skid_unbounded: bool,
}

/// The skid we assume for a CPU we do not know.
pub const UNKNOWN_SKID: u64 = 10_000;

/// QEMU TCG's emulated PMU: see `core_model`.
pub const QEMU_TCG_SKID: u64 = 40_000;

/// arm64 BR_RETIRED (Arm ARM, common architectural event 0x21).
pub const ARM_BR_RETIRED: u64 = 0x21;
/// Intel BR_INST_RETIRED.CONDITIONAL, umask 0x01, up to Comet Lake.
pub const INTEL_BR_COND_PRE_ICL: u64 = 0x5101c4;
/// Intel BR_INST_RETIRED.COND (umask 0x11) from Ice Lake on.
pub const INTEL_BR_COND_ICL: u64 = 0x5111c4;
/// AMD Zen: Retired Conditional Branches (PPR event 0xd1); 0x51 in bits
/// 16-23 is USR, INT and EN: user mode only, as rr encodes it.
pub const AMD_ZEN_BR_COND: u64 = 0x5100d1;

/// Intel family 6 models that use the Ice Lake encoding (rr: IntelIcelake
/// and later rows).
const INTEL_ICL_AND_LATER: &[u32] = &[
    0x6a, 0x6c, 0x7d, 0x7e, // Ice Lake server/client
    0x8c, 0x8d, // Tiger Lake
    0xa7, // Rocket Lake
    0x8f, 0xcf, // Sapphire / Emerald Rapids
    0x97, 0x9a, 0xb7, 0xba, 0xbf, // Alder / Raptor Lake
    0xaa, 0xac, 0xbd, 0xc5, 0xc6, // Meteor / Lunar / Arrow Lake
    0xad, 0xae, // Granite Rapids
];
/// From Alder Lake on rr tolerates a slightly larger skid.
const INTEL_ADL_AND_LATER: &[u32] = &[
    0x97, 0x9a, 0xb7, 0xba, 0xbf, 0xaa, 0xac, 0xbd, 0xc5, 0xc6, 0xad, 0xae, 0xcf, 0x8f,
];

/// The table: which event and skid for which core.
pub fn core_model(id: &CpuId) -> CoreModel {
    let unknown = |name: String| CoreModel {
        name,
        branch_event: BranchEvent::Generic,
        skid: UNKNOWN_SKID,
        interrupt_skid: UNKNOWN_SKID,
        skid_unbounded: false,
    };
    match id {
        CpuId::Arm { midr } => {
            let m = Midr::decode(*midr);
            let name = match (m.implementer_name(), m.part_name()) {
                (_, Some(part)) => part.to_string(),
                (Some(imp), None) => format!("{imp} part {:#05x}", m.part),
                (None, None) => format!(
                    "arm64 implementer {:#04x} part {:#05x}",
                    m.implementer, m.part
                ),
            };
            // Every ARMv8 PMU implements BR_RETIRED; only the skid differs.
            // (signal skid, interrupt skid): the same on real cores.
            let (skid, interrupt_skid) = match (m.implementer, m.part) {
                (0x41, 0xd0c | 0xd40 | 0xd49 | 0xd4f | 0xd84 | 0xd8e) => (1_000, 1_000),
                (0x41, 0xd0b | 0xd0d | 0xd41 | 0xd44) => (10_000, 10_000),
                // QEMU's `-cpu max` (MIDR 0x000f0510). Signal reads: under
                // -icount shift=0 we measured reads up to 35,555 cycles past
                // the overflow with no migration at all. Interrupts: exactly
                // at the overflow when prompt (sample counts are exact
                // multiples of the period); when late, late by whatever the
                // other vCPU ran meanwhile (its "cycles" are virtual time),
                // so a tolerance would only let a late one pass for prompt.
                (0x00, 0x051) => (QEMU_TCG_SKID, 0),
                _ => (UNKNOWN_SKID, UNKNOWN_SKID),
            };
            CoreModel {
                name,
                branch_event: BranchEvent::Raw(ARM_BR_RETIRED),
                skid,
                interrupt_skid,
                skid_unbounded: false,
            }
        }
        CpuId::X86 {
            vendor: X86Vendor::Intel,
            family: 6,
            model,
            model_name,
        } => {
            let icl = INTEL_ICL_AND_LATER.contains(model);
            let skid = if INTEL_ADL_AND_LATER.contains(model) {
                125
            } else {
                100
            };
            CoreModel {
                name: model_name.clone(),
                branch_event: BranchEvent::Raw(if icl {
                    INTEL_BR_COND_ICL
                } else {
                    INTEL_BR_COND_PRE_ICL
                }),
                skid,
                interrupt_skid: skid,
                skid_unbounded: false,
            }
        }
        CpuId::X86 {
            vendor: X86Vendor::Amd,
            family,
            model_name,
            ..
        } if *family >= 0x17 => CoreModel {
            name: model_name.clone(),
            branch_event: BranchEvent::Raw(AMD_ZEN_BR_COND),
            skid: 10_000,
            interrupt_skid: 10_000,
            skid_unbounded: true,
        },
        CpuId::X86 { model_name, .. } => unknown(model_name.clone()),
        CpuId::Unknown => unknown("unknown CPU".to_string()),
    }
}

/// One group of CPUs that report the same identity: a cluster in
/// big.LITTLE terms. The fingerprint lists CPUs this way because a run's
/// event and skid depend on which cluster its CPUs are in, and 64 identical
/// lines would hide the one that differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cluster {
    pub id: CpuId,
    pub cpus: Vec<u32>,
}

/// Groups CPUs by identity, in the order each identity first appears.
pub fn clusters(cpus: &[(u32, CpuId)]) -> Vec<Cluster> {
    let mut out: Vec<Cluster> = Vec::new();
    for (n, id) in cpus {
        match out.iter_mut().find(|c| c.id == *id) {
            Some(c) => c.cpus.push(*n),
            None => out.push(Cluster {
                id: id.clone(),
                cpus: vec![*n],
            }),
        }
    }
    out
}

/// Parses the kernel's CPU list format ("0-3,8,10-11"), as in
/// /sys/devices/system/cpu/online, `cpus` of a PMU, Cpus_allowed_list and
/// taskset. Sorted; refuses reversed ranges, CPUs named twice and numbers
/// above `max_cpu`, saying which, so `--cpus` can quote the reason.
pub fn parse_cpu_list_checked(text: &str, max_cpu: u32) -> Result<Vec<u32>, String> {
    let form = "expected CPU numbers and ranges like 0-3,8,10-11";
    let mut cpus = Vec::new();
    for part in text.trim().split(',') {
        let part = part.trim();
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let (Ok(lo), Ok(hi)) = (lo.trim().parse::<u32>(), hi.trim().parse::<u32>()) else {
            return Err(format!("{form}, got {text:?}"));
        };
        if lo > hi {
            return Err(format!("{form}; range {part:?} is reversed"));
        }
        if hi > max_cpu {
            return Err(format!(
                "{form}; CPU {hi} is beyond the largest possible CPU number {max_cpu}"
            ));
        }
        cpus.extend(lo..=hi);
    }
    let n = cpus.len();
    cpus.sort_unstable();
    cpus.dedup();
    if cpus.len() != n {
        return Err(format!("{form}; {text:?} names a CPU twice"));
    }
    Ok(cpus)
}

/// The same for lists the kernel wrote: an empty list is empty, and
/// anything malformed is None rather than a partial list, so a caller never
/// acts on half of a mask. A list wider than any real machine is junk, not a
/// reason to allocate gigabytes.
pub fn parse_cpu_list(text: &str) -> Option<Vec<u32>> {
    if text.trim().is_empty() {
        return Some(Vec::new());
    }
    parse_cpu_list_checked(text, 1 << 16).ok()
}

/// Formats CPU numbers the way the kernel does ("0-3,8").
pub fn format_cpu_list(cpus: &[u32]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

impl std::fmt::Display for CpuId {
    /// "Arm Neoverse-N1 r3p1 (MIDR 0x413fd0c1)" or "Intel family 6 model
    /// 0x6a: Intel(R) Xeon(R) ...": what a reader needs to look the core up.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CpuId::Arm { midr } => {
                let m = Midr::decode(*midr);
                let implementer = match m.implementer_name() {
                    Some(name) => name.to_string(),
                    None => format!("implementer {:#04x}", m.implementer),
                };
                let part = match m.part_name() {
                    Some(name) => name.to_string(),
                    None => format!("part {:#05x}", m.part),
                };
                write!(
                    f,
                    "{implementer} {part} r{}p{} (MIDR {midr:#010x})",
                    m.variant, m.revision
                )
            }
            CpuId::X86 {
                vendor,
                family,
                model,
                model_name,
            } => {
                let vendor = match vendor {
                    X86Vendor::Intel => "Intel",
                    X86Vendor::Amd => "AMD",
                    X86Vendor::Other(v) => v.as_str(),
                };
                write!(f, "{vendor} family {family:#x} model {model:#x}")?;
                if !model_name.is_empty() {
                    write!(f, ": {model_name}")?;
                }
                Ok(())
            }
            CpuId::Unknown => f.write_str("unknown CPU"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_graviton_midrs() {
        let g2 = Midr::decode(0x413fd0c1);
        assert_eq!(
            (g2.implementer, g2.variant, g2.part, g2.revision),
            (0x41, 3, 0xd0c, 1)
        );
        assert_eq!(g2.part_name(), Some("Neoverse-N1"));
        let g3 = Midr::decode(0x411fd401);
        assert_eq!(g3.part_name(), Some("Neoverse-V1"));
        assert_eq!(g3.variant, 1);
    }

    #[test]
    fn neoverse_gets_arm_branch_event_and_skid_1000() {
        let m = core_model(&CpuId::Arm { midr: 0x413fd0c1 });
        assert_eq!(m.branch_event, BranchEvent::Raw(0x21));
        assert_eq!(m.skid, 1000);
        let a76 = core_model(&CpuId::Arm { midr: 0x414fd0b1 });
        assert_eq!((a76.name.as_str(), a76.skid), ("Cortex-A76", 10_000));
        let qemu_max = core_model(&CpuId::Arm { midr: 0x000f0510 });
        assert_eq!((qemu_max.skid, qemu_max.interrupt_skid), (QEMU_TCG_SKID, 0));
        assert_eq!(a76.interrupt_skid, a76.skid);
        assert_eq!(qemu_max.branch_event, BranchEvent::Raw(0x21));
    }

    #[test]
    fn midr_text_parses_sysfs_and_rejects_junk() {
        assert_eq!(
            CpuId::from_midr_text("0x00000000413fd0c1\n"),
            Some(CpuId::Arm { midr: 0x413fd0c1 })
        );
        assert_eq!(CpuId::from_midr_text("413fd0c1"), None);
        assert_eq!(CpuId::from_midr_text("0x"), None);
        assert_eq!(CpuId::from_midr_text("0x1ffffffff"), None);
    }

    #[test]
    fn intel_encoding_switches_at_ice_lake() {
        let intel = |model| CpuId::X86 {
            vendor: X86Vendor::Intel,
            family: 6,
            model,
            model_name: "x".into(),
        };
        // Comet Lake (0xa5) keeps the old encoding, Ice Lake server takes the new.
        assert_eq!(
            core_model(&intel(0xa5)).branch_event,
            BranchEvent::Raw(0x5101c4)
        );
        assert_eq!(
            core_model(&intel(0x6a)).branch_event,
            BranchEvent::Raw(0x5111c4)
        );
        assert_eq!(core_model(&intel(0x6a)).skid, 100);
        assert_eq!(core_model(&intel(0x97)).skid, 125);
    }

    #[test]
    fn amd_zen_is_unbounded_and_old_amd_generic() {
        let amd = |family| CpuId::X86 {
            vendor: X86Vendor::Amd,
            family,
            model: 1,
            model_name: "EPYC".into(),
        };
        let zen = core_model(&amd(0x19));
        assert_eq!(zen.branch_event, BranchEvent::Raw(0x5100d1));
        assert!(zen.skid_unbounded);
        assert_eq!(core_model(&amd(0x15)).branch_event, BranchEvent::Generic);
    }

    #[test]
    fn cpuinfo_x86_and_arm64() {
        let x86 = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 106\nmodel name\t: Intel(R) Xeon(R) Platinum 8375C\n\nprocessor\t: 1\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 106\nmodel name\t: Intel(R) Xeon(R) Platinum 8375C\n";
        let cpus = CpuId::from_cpuinfo(x86);
        assert_eq!(cpus.len(), 2);
        assert!(matches!(&cpus[1], (1, CpuId::X86 { model: 106, .. })));
        let arm = "processor\t: 0\nBogoMIPS\t: 243.75\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1\n";
        assert_eq!(
            CpuId::from_cpuinfo(arm),
            vec![(0, CpuId::Arm { midr: 0x413fd0c1 })]
        );
    }

    #[test]
    fn cpuinfo_odd_input_never_panics() {
        for text in [
            "",
            "processor: x",
            "vendor_id: GenuineIntel\ncpu family: 6",
            "processor: 0\nCPU part: 0xfffff",
            ":\n:\n\n\n",
        ] {
            let _ = CpuId::from_cpuinfo(text);
            let _ = CpuId::from_cpuinfo_block(text);
        }
        assert_eq!(
            CpuId::from_cpuinfo_block("vendor_id: GenuineIntel\ncpu family: 6"),
            CpuId::Unknown
        );
    }

    #[test]
    fn cpu_lists_round_trip_and_reject_junk() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(format_cpu_list(&[11, 0, 1, 2, 3, 8, 10]), "0-3,8,10-11");
        assert_eq!(format_cpu_list(&[]), "");
        for junk in ["3-1", "a", "0-", "-", "1,,2", "0-4294967295"] {
            assert_eq!(parse_cpu_list(junk), None, "{junk}");
        }
    }

    #[test]
    fn clusters_group_big_little_in_order() {
        let a55 = CpuId::Arm { midr: 0x412fd050 };
        let a76 = CpuId::Arm { midr: 0x414fd0b0 };
        let cpus: Vec<_> = (0..8)
            .map(|n| (n, if n < 4 { a55.clone() } else { a76.clone() }))
            .collect();
        let c = clusters(&cpus);
        assert_eq!(c.len(), 2);
        assert_eq!(
            (c[0].id.clone(), c[0].cpus.clone()),
            (a55, vec![0, 1, 2, 3])
        );
        assert_eq!(c[1].cpus, vec![4, 5, 6, 7]);
        assert_eq!(
            CpuId::Arm { midr: 0x413fd0c1 }.to_string(),
            "Arm Neoverse-N1 r3p1 (MIDR 0x413fd0c1)"
        );
        assert_eq!(
            CpuId::Arm { midr: 0x000f0510 }.to_string(),
            "implementer 0x00 part 0x051 r0p0 (MIDR 0x000f0510)"
        );
    }
}
