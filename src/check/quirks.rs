//! The x86 faults rr checks for at start-up, where they apply (SKIP
//! elsewhere):
//!
//! - `in_txcp` (Intel): rr's ticks with IN_TXCP (bit 33) must count the
//!   loop; KVM's bug counts fewer. rr works around it (an IN_TX counter,
//!   aborting if ticks fall in a transaction): WARN;
//! - `freeze_on_smi` (Intel, Comet Lake on, as rr checks it): counters
//!   must stop in System Management Mode, or SMIs add counts; rr refuses
//!   `0`;
//! - `speclockmap` (AMD Zen): a locked instruction counted by
//!   SpecLockMapCommit (raw 0x510825) means the optimisation is on, which
//!   miscounts branches around locked instructions; rr refuses it.

use std::path::PathBuf;

use super::counting::LOOP_BRANCHES;
use super::outcome::{Finding, Use};
use super::rr_core::RrCore;
use crate::engine::kernel::probe::{ProbeEvent, ProbeKernel};
use crate::fingerprint::cpu::{CpuId, X86Vendor};

/// IN_TXCP in an Intel raw event's config.
const IN_TXCP: u64 = 1 << 33;
/// AMD's SpecLockMapCommit, user mode (rr's `zen_speclockmap` check).
const SPEC_LOCK_MAP_COMMIT: u64 = 0x510825;
/// Intel family 6 models from Comet Lake on (rr's CPU enum order, which
/// puts the Atom cores after it too).
const COMET_LAKE_AND_LATER: &[u32] = &[
    0xa5, 0xa6, // Comet Lake
    0x6a, 0x6c, 0x7d, 0x7e, 0x8c, 0x8d, 0xa7, // Ice, Tiger, Rocket
    0x8f, 0xcf, 0xad, 0xae, // Sapphire, Emerald, Granite Rapids
    0x97, 0x9a, 0xb7, 0xba, 0xbf, 0xaa, 0xac, 0xbd, 0xc5, 0xc6, // Alder..Arrow
    0x37, 0x4c, 0x4d, 0x5c, 0x5f, 0x7a, 0x86, 0x96, 0x9c, 0xbe, 0xaf, 0xb6, // Atom
];

pub(super) fn all<P: ProbeKernel>(pmu: &P, id: &CpuId, rr: &RrCore, root: PathBuf) -> Vec<Finding> {
    let (intel_model, zen) = match id {
        CpuId::X86 {
            vendor: X86Vendor::Intel,
            family: 6,
            model,
            ..
        } => (Some(*model), false),
        CpuId::X86 {
            vendor: X86Vendor::Amd,
            family,
            ..
        } => (None, *family >= 0x17),
        _ => (None, false),
    };
    let not = |probe: &'static str, what: &str| {
        Finding::skip(probe, format!("applies to {what} only"), None)
    };
    vec![
        match (intel_model, rr.ticks) {
            (Some(_), Some(ticks)) => in_txcp(pmu, ticks),
            _ => not("in_txcp", "Intel cores with rr's ticks event"),
        },
        match intel_model {
            Some(m) if COMET_LAKE_AND_LATER.contains(&m) => freeze_on_smi(root),
            _ => not("freeze_on_smi", "Intel from Comet Lake on"),
        },
        if zen {
            speclockmap(pmu)
        } else {
            not("speclockmap", "AMD Zen")
        },
    ]
}

fn in_txcp<P: ProbeKernel>(pmu: &P, ticks: u64) -> Finding {
    let event = ProbeEvent::raw(ticks | IN_TXCP);
    let counted = pmu
        .open_counter(event, false)
        .and_then(|c| pmu.count(&[c], LOOP_BRANCHES));
    let count = match counted {
        Ok(c) => c.first().copied().flatten().unwrap_or(0),
        Err(e) => {
            return Finding::skip(
                "in_txcp",
                format!("IN_TXCP does not open ({e}): no TSX here"),
                None,
            );
        }
    };
    let evidence = format!("ticks|IN_TXCP over {LOOP_BRANCHES} branches: {count}");
    let expect = "at least the loop's branches (rr's kvm_in_txcp_bug)";
    let finding = if count > 0 && count < LOOP_BRANCHES {
        Finding::warn("in_txcp", evidence, expect).remedy(
            "KVM's IN_TXCP bug: rr adds an IN_TX counter and aborts if ticks fall in a transaction",
        )
    } else {
        Finding::pass("in_txcp", evidence, expect)
    };
    finding.number("count", count)
}

fn freeze_on_smi(root: PathBuf) -> Finding {
    let path = root.join("sys/devices/cpu/freeze_on_smi");
    let expect = "1: counters stop in System Management Mode (rr refuses 0)";
    match std::fs::read_to_string(&path) {
        Err(e) => Finding::skip(
            "freeze_on_smi",
            format!("/sys/devices/cpu/freeze_on_smi: {e}"),
            None,
        ),
        Ok(text) if text.trim() == "0" => Finding::fail(
            "freeze_on_smi",
            &[Use::Rr],
            "/sys/devices/cpu/freeze_on_smi is 0".into(),
            expect,
        )
        .remedy("echo 1 | sudo tee /sys/devices/cpu/freeze_on_smi"),
        Ok(text) => Finding::pass(
            "freeze_on_smi",
            format!("/sys/devices/cpu/freeze_on_smi is {}", text.trim()),
            expect,
        ),
    }
}

fn speclockmap<P: ProbeKernel>(pmu: &P) -> Finding {
    let counter = match pmu.open_counter(ProbeEvent::raw(SPEC_LOCK_MAP_COMMIT), false) {
        Ok(c) => c,
        Err(e) => {
            return Finding::skip(
                "speclockmap",
                format!("r{SPEC_LOCK_MAP_COMMIT:x} does not open: {e}"),
                None,
            );
        }
    };
    let none = pmu.count_locked_adds(&counter, 0);
    let hundred = pmu.count_locked_adds(&counter, 100);
    let (Ok(Some(none)), Ok(Some(hundred))) = (none, hundred) else {
        return Finding::skip("speclockmap", "the counter could not be read".into(), None);
    };
    let evidence =
        format!("SpecLockMapCommit: {none} without locked instructions, {hundred} with 100");
    let expect = "no change: SpecLockMap off (rr's zen_speclockmap)";
    let finding = if hundred > none {
        Finding::fail("speclockmap", &[Use::Rr], evidence, expect)
            .remedy("SpecLockMap is on: rr's scripts/zen_workaround.py turns it off (MSR 0xc0011020 bit 54)")
    } else {
        Finding::pass("speclockmap", evidence, expect)
    };
    finding.number("without", none).number("with", hundred)
}
