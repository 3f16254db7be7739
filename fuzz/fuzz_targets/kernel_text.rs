//! Kernel-written text other than the log: the first byte picks the parser.
#![no_main]

use libfuzzer_sys::fuzz_target;

use pmustress::fingerprint::cpu::{self, CpuId};
use pmustress::fingerprint::{
    Cmdline, ConfigValue, KernelConfig, parse_limits, parse_probe_line, parse_sigq, status_field,
};

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let text = text.as_ref();
    match which % 7 {
        0 => {
            let c = Cmdline::parse(text);
            for name in [
                "irqchip.gicv3_pseudo_nmi",
                "isolcpus",
                "nohz-full",
                "--",
                "",
            ] {
                if let Some(v) = c.get(name) {
                    let _ = v.map(pmustress::fingerprint::kstrtobool);
                    assert!(c.token(name).is_some());
                }
            }
        }
        1 => {
            let c = KernelConfig::parse(text);
            for name in pmustress::fingerprint::WATCHED_OPTIONS {
                match c.get(name) {
                    ConfigValue::Set(l) | ConfigValue::NotSet(l) => assert!(l.contains(name)),
                    ConfigValue::Absent => {}
                }
            }
        }
        2 => {
            if let Some(id) = CpuId::from_midr_text(text) {
                let _ = cpu::core_model(&id);
            }
        }
        3 => {
            let cpus = CpuId::from_cpuinfo(text);
            for (_, id) in &cpus {
                let _ = cpu::core_model(id);
            }
            let clusters = cpu::clusters(&cpus);
            assert_eq!(
                clusters.iter().map(|c| c.cpus.len()).sum::<usize>(),
                cpus.len()
            );
        }
        4 => {
            if let Some(cpus) = cpu::parse_cpu_list(text) {
                let shown = cpu::format_cpu_list(&cpus);
                assert_eq!(cpu::parse_cpu_list(&shown), Some(cpus), "{text:?}");
            }
        }
        5 => {
            let _ = parse_sigq(text);
            let _ = status_field(text, "SigQ").map(parse_sigq);
            let _ = parse_limits(text, "Max pending signals");
        }
        _ => {
            for line in text.lines() {
                let _ = parse_probe_line(line);
            }
            let _ = pmustress::engine::kernel::parse_nr_migrations(text);
        }
    }
});
