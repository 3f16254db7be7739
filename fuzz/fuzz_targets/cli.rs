//! The command line: clap with every value parser (event spec, numbers,
//! durations, CPU lists), then RunConfig's cross-flag checks against a fake
//! machine (an arm64 big.LITTLE pair and an x86 box), and the direct
//! parsers with their round trips.
#![no_main]

use std::collections::BTreeMap;

use clap::Parser;
use libfuzzer_sys::fuzz_target;

use pmustress::cli::{Cli, Command};
use pmustress::config::RunConfig;
use pmustress::config::event::{EventSpec, Platform};
use pmustress::fingerprint::Pmu;
use pmustress::fingerprint::cpu::{self, CpuId};

fn pmu(name: &str, cpus: Option<Vec<u32>>, events: &[&str]) -> Pmu {
    Pmu {
        name: name.into(),
        type_id: 8,
        cpus,
        events: events.iter().map(|e| e.to_string()).collect(),
        is_core: true,
        caps: BTreeMap::new(),
        counters: None,
    }
}

fn platforms() -> [Platform; 3] {
    let a55 = CpuId::Arm { midr: 0x412f_d050 };
    let a76 = CpuId::Arm { midr: 0x414f_d0b0 };
    let intel = CpuId::X86 {
        vendor: pmustress::fingerprint::cpu::X86Vendor::Intel,
        family: 6,
        model: 0xcf,
        model_name: "Intel(R) Xeon(R)".into(),
    };
    [
        Platform::default(),
        Platform {
            arch: "aarch64".into(),
            cpus: vec![(0, a55.clone()), (1, a55), (2, a76.clone()), (3, a76)],
            core_pmus: vec![
                pmu("armv8_cortex_a55", Some(vec![0, 1]), &["br_retired"]),
                pmu("armv8_cortex_a76", Some(vec![2, 3]), &[]),
            ],
            // arm64 without pseudo-NMI: the case the bug lives in.
            pmu_irq_maskable: true,
        },
        Platform {
            arch: "x86_64".into(),
            cpus: (0..4).map(|n| (n, intel.clone())).collect(),
            core_pmus: vec![pmu("cpu", None, &["branch-instructions"])],
            pmu_irq_maskable: false,
        },
    ]
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };

    // The direct parsers, with their round trips.
    if let Ok(spec) = text.parse::<EventSpec>() {
        assert_eq!(spec.to_string().parse::<EventSpec>(), Ok(spec), "{text:?}");
    }
    if let Ok(cpus) = cpu::parse_cpu_list_checked(text, 4095) {
        assert!(cpus.windows(2).all(|w| w[0] < w[1]), "{text:?}");
        assert!(cpus.iter().all(|&c| c <= 4095));
        let shown = cpu::format_cpu_list(&cpus);
        assert_eq!(
            cpu::parse_cpu_list_checked(&shown, 4095),
            Ok(cpus),
            "{text:?}"
        );
    }
    let _ = cpu::parse_cpu_list(text);

    // The whole command line: arguments separated by NUL, or by newlines.
    let sep = if text.contains('\0') { '\0' } else { '\n' };
    let mut argv = vec!["pmustress", "run"];
    argv.extend(text.split(sep));
    let Ok(cli) = Cli::try_parse_from(&argv) else {
        return;
    };
    let Command::Run(args) = cli.command else {
        return;
    };
    for (platform, allowed) in platforms()
        .iter()
        .zip([&[0, 1][..], &[0, 1, 2, 3], &[0, 1, 2, 3]])
    {
        if let Ok(cfg) = RunConfig::from_args(&args, allowed, platform) {
            assert!(cfg.skid < cfg.period, "{argv:?}");
            assert!(!cfg.cpus.is_empty());
            assert!(cfg.cpus.iter().all(|c| allowed.contains(c)), "{argv:?}");
            assert!(cfg.workers >= 1);
            assert!(cfg.duration_ns.is_some() || cfg.interrupts_per_worker.is_some());
            let _ = pmustress::cli::console::banner(&cfg);
        }
    }
});
