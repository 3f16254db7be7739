//! The kernel log as /dev/kmsg records and as syslog(2) text, then the
//! pseudo-NMI verdict that quotes it (on arm64, with a cmdline and config
//! taken from the same bytes).
#![no_main]

use libfuzzer_sys::fuzz_target;

use pmustress::fingerprint::{
    Cmdline, KernelConfig, KernelLog, Sourced, parse_probe_line, pseudo_nmi_verdict,
};

fuzz_target!(|data: &[u8]| {
    let kmsg = KernelLog::from_kmsg(data, "/dev/kmsg".into());
    let syslog = KernelLog::from_syslog(data, "syslog".into());
    for log in [&kmsg, &syslog] {
        assert!(log.kept.len() <= log.records);
        for line in log.grep("PMU") {
            let _ = parse_probe_line(line);
        }
        let _ = log.why_unreadable();
    }
    // The first line doubles as the command line, the rest as a config.
    let text = String::from_utf8_lossy(data);
    let (first, rest) = text.split_once('\n').unwrap_or((&text, ""));
    let cmdline = Sourced::found(Cmdline::parse(first), "/proc/cmdline");
    let config = Sourced::found(KernelConfig::parse(rest), "/proc/config.gz");
    for arch in ["aarch64", "x86_64", "riscv64"] {
        let arch = Sourced::found(arch.to_string(), "uname -m");
        for log in [&kmsg, &syslog] {
            let v = pseudo_nmi_verdict(&arch, &cmdline, &config, log);
            assert!(!v.evidence.is_empty());
        }
    }
});
