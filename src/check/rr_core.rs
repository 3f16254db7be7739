//! What rr expects of a core: its ticks event (retired conditional
//! branches, counted user mode only) and the skid it tolerates, from rr's
//! per-microarchitecture table (`PerfCounters_x86.h`, `PerfCounters_aarch64.h`).
//! A core missing from the table is one rr refuses to record on.

use crate::fingerprint::cpu::{BranchEvent, CpuId, Midr, X86Vendor, core_model};

/// rr's row for one core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RrCore {
    /// The core's name as the fingerprint gives it.
    pub name: String,
    /// The raw ticks event: rr's for this core, or on arm64 the
    /// architectural BR_RETIRED rr counts on every core it knows; None
    /// where there is none to try.
    pub ticks: Option<u64>,
    /// Whether rr has a row for this core (it refuses one it has not).
    pub in_rr_table: bool,
    /// The skid rr allows an overflow interrupt, in ticks.
    pub skid: u64,
    /// rr's note that the skid has no reliable bound (AMD Zen).
    pub skid_unbounded: bool,
}

/// arm64 cores rr knows, by (implementer, part), and their skid.
const ARM_CORES: &[(u8, u16, u64)] = &[
    // Neoverse N1, V1, N2, V2, V3AE, V3, N3; Cortex-A720.
    (0x41, 0xd0c, 1_000),
    (0x41, 0xd40, 1_000),
    (0x41, 0xd49, 1_000),
    (0x41, 0xd4f, 1_000),
    (0x41, 0xd83, 1_000),
    (0x41, 0xd84, 1_000),
    (0x41, 0xd8e, 1_000),
    (0x41, 0xd81, 1_000),
    // Cortex-A76, A77, A78, X1 (and their C/AE parts).
    (0x41, 0xd0b, 10_000),
    (0x41, 0xd0d, 10_000),
    (0x41, 0xd41, 10_000),
    (0x41, 0xd4b, 10_000),
    (0x41, 0xd44, 10_000),
    (0x41, 0xd4c, 10_000),
    // Qualcomm's A76 (Kryo 4xx Gold) and Oryon.
    (0x51, 0x804, 10_000),
    (0x51, 0x001, 10_000),
    // AmpereOne.
    (0xc0, 0xac3, 1_000),
];

/// rr's ticks event on arm64: BR_RETIRED.
const ARM_BR_RETIRED: u64 = 0x21;

pub(super) fn rr_core(id: &CpuId) -> RrCore {
    let model = core_model(id);
    let raw = match model.branch_event {
        BranchEvent::Raw(config) => Some(config),
        BranchEvent::Generic => None,
    };
    let (ticks, in_rr_table, skid) = match id {
        CpuId::Arm { midr } => {
            let m = Midr::decode(*midr);
            ARM_CORES
                .iter()
                .find(|(imp, part, _)| *imp == m.implementer && *part == m.part)
                .map_or((Some(ARM_BR_RETIRED), false, model.skid), |(_, _, skid)| {
                    (Some(ARM_BR_RETIRED), true, *skid)
                })
        }
        CpuId::X86 {
            vendor: X86Vendor::Intel,
            family: 6,
            ..
        } => (raw, true, model.skid),
        CpuId::X86 {
            vendor: X86Vendor::Amd,
            family,
            ..
        } if *family >= 0x17 => (raw, true, model.skid),
        _ => (None, false, model.skid),
    };
    RrCore {
        name: model.name,
        ticks,
        in_rr_table,
        skid,
        skid_unbounded: model.skid_unbounded,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rr_s_table_gives_the_ticks_event_and_skid() {
        // Graviton2 (Neoverse N1), r0p1.
        let n1 = rr_core(&CpuId::Arm { midr: 0x413f_d0c1 });
        assert_eq!(
            (n1.ticks, n1.in_rr_table, n1.skid),
            (Some(0x21), true, 1_000)
        );
        // QEMU's `-cpu max`: not a core rr knows; BR_RETIRED is still tried.
        let qemu = rr_core(&CpuId::Arm { midr: 0x000f_0510 });
        assert_eq!((qemu.ticks, qemu.in_rr_table), (Some(0x21), false));
        let kaby = rr_core(&CpuId::X86 {
            vendor: X86Vendor::Intel,
            family: 6,
            model: 0x8e,
            model_name: "Kaby Lake".into(),
        });
        assert_eq!((kaby.ticks, kaby.skid), (Some(0x5101c4), 100));
        let zen3 = rr_core(&CpuId::X86 {
            vendor: X86Vendor::Amd,
            family: 0x19,
            model: 0x21,
            model_name: "Zen 3".into(),
        });
        assert_eq!((zen3.ticks, zen3.skid_unbounded), (Some(0x5100d1), true));
    }
}
