/*!
Settings that change a run's results without changing the machine.

perf_event_max_sample_rate and perf_cpu_time_max_percent throttle overflow
interrupts (under emulation the kernel lowers the rate on its own, which looks
like lost interrupts unless recorded); nmi_watchdog takes a counter on x86;
perf_event_paranoid decides what a non-root run may open; dmesg_restrict
decides whether the pseudo-NMI verdict can see the kernel log;
RLIMIT_SIGPENDING and SigQ bound the realtime signals a run can queue before
the kernel falls back to plain SIGIO; and the online, allowed, isolated and
nohz_full CPUs decide where a run can measure and migrate.
*/

use serde::Serialize;

use super::read::{Root, Sourced};
use super::running_kernel::Cmdline;
use crate::fingerprint::cpu::parse_cpu_list;

#[derive(Debug, Clone, Serialize)]
pub struct Knobs {
    pub perf_event_paranoid: Sourced<i64>,
    pub perf_event_max_sample_rate: Sourced<i64>,
    pub perf_cpu_time_max_percent: Sourced<i64>,
    pub perf_event_mlock_kb: Sourced<i64>,
    pub nmi_watchdog: Sourced<i64>,
    pub dmesg_restrict: Sourced<i64>,
    /// This process's limit on queued signals (live machine only).
    pub rlimit_sigpending: Sourced<Limit>,
    /// Signals queued for this user now, and the limit, from SigQ.
    pub sigq: Sourced<SigQ>,
    pub online_cpus: Sourced<Vec<u32>>,
    /// Cpus_allowed_list of the reading process.
    pub allowed_cpus: Sourced<Vec<u32>>,
    pub isolcpus: Sourced<String>,
    pub nohz_full: Sourced<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Limit {
    /// None is "unlimited".
    pub soft: Option<u64>,
    pub hard: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SigQ {
    pub queued: u64,
    pub limit: u64,
}

impl Knobs {
    pub fn read(root: &Root, cmdline: &Sourced<Cmdline>) -> Knobs {
        let sysctl = |name: &str| {
            root.read_value(&format!("proc/sys/kernel/{name}"))
                .parse(|v| v.parse::<i64>().ok())
        };
        let status = root.read("proc/self/status");
        let field = |name: &'static str| {
            status
                .clone()
                .parse(move |text| status_field(text, name).map(str::to_string))
        };
        let from_cmdline = |name: &str| match &cmdline.value {
            Some(c) => match c.get(name) {
                Some(v) => Sourced::found(v.unwrap_or("").to_string(), cmdline.source.clone()),
                None => Sourced::missing(format!("not on {}", cmdline.source)),
            },
            None => Sourced::missing(cmdline.source.clone()),
        };
        Knobs {
            perf_event_paranoid: sysctl("perf_event_paranoid"),
            perf_event_max_sample_rate: sysctl("perf_event_max_sample_rate"),
            perf_cpu_time_max_percent: sysctl("perf_cpu_time_max_percent"),
            perf_event_mlock_kb: sysctl("perf_event_mlock_kb"),
            nmi_watchdog: sysctl("nmi_watchdog"),
            dmesg_restrict: sysctl("dmesg_restrict"),
            rlimit_sigpending: read_rlimit(root),
            sigq: field("SigQ").parse(|v| parse_sigq(v)),
            online_cpus: root
                .read_value("sys/devices/system/cpu/online")
                .parse(|v| parse_cpu_list(v)),
            allowed_cpus: field("Cpus_allowed_list").parse(|v| parse_cpu_list(v)),
            isolcpus: from_cmdline("isolcpus"),
            nohz_full: from_cmdline("nohz_full"),
        }
    }
}

/// The limit belongs to the process asking, so it is only read for the live
/// machine. /proc/self/limits gives the same numbers as getrlimit(2)
/// without an unsafe call.
fn read_rlimit(root: &Root) -> Sourced<Limit> {
    if !root.is_live() {
        return Sourced::missing(
            "not read: the root is a fixture, and the limit belongs to this process",
        );
    }
    root.read("proc/self/limits")
        .parse(|text| parse_limits(text, "Max pending signals"))
}

/// "SigQ:\t3/96365" -> queued 3, limit 96365.
pub fn parse_sigq(v: &str) -> Option<SigQ> {
    let (q, l) = v.trim().split_once('/')?;
    Some(SigQ {
        queued: q.trim().parse().ok()?,
        limit: l.trim().parse().ok()?,
    })
}

/// A "Name:\tvalue" line of /proc/<pid>/status.
pub fn status_field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k == name).then(|| v.trim())
    })
}

/// A row of /proc/<pid>/limits: "Max pending signals  96365  96365  signals".
pub fn parse_limits(text: &str, name: &str) -> Option<Limit> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    let mut cols = line[name.len()..].split_whitespace();
    let value = |c: Option<&str>| -> Option<Option<u64>> {
        match c? {
            "unlimited" => Some(None),
            n => Some(Some(n.parse().ok()?)),
        }
    };
    Some(Limit {
        soft: value(cols.next())?,
        hard: value(cols.next())?,
    })
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: Option<u64>| v.map_or("unlimited".to_string(), |n| n.to_string());
        write!(f, "{} (hard {})", show(self.soft), show(self.hard))
    }
}

impl std::fmt::Display for SigQ {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} queued of {}", self.queued, self.limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: &str = "Limit                     Soft Limit           Hard Limit           Units     \n\
        Max processes             127205               127205               processes \n\
        Max pending signals       96365                unlimited            signals   \n";

    #[test]
    fn limits_sigq_and_status() {
        assert_eq!(
            parse_limits(LIMITS, "Max pending signals"),
            Some(Limit {
                soft: Some(96365),
                hard: None
            })
        );
        assert_eq!(
            parse_limits("Max pending signals", "Max pending signals"),
            None
        );
        assert_eq!(
            parse_limits("Max pending signals  x y", "Max pending signals"),
            None
        );
        assert_eq!(parse_limits("", "Max pending signals"), None);
        assert_eq!(
            parse_sigq("0/96365"),
            Some(SigQ {
                queued: 0,
                limit: 96365
            })
        );
        for bad in ["", "/", "1/", "a/b", "1"] {
            assert_eq!(parse_sigq(bad), None);
        }
        let status = "Name:\tcat\nSigQ:\t1/1024\nCpus_allowed_list:\t0-3\n";
        assert_eq!(status_field(status, "SigQ"), Some("1/1024"));
        assert_eq!(status_field(status, "Sig"), None);
        assert_eq!(status_field("SigQ", "SigQ"), None);
    }

    #[test]
    fn live_rlimit_is_read() {
        let live = read_rlimit(&Root::new(std::path::Path::new("/")));
        assert_eq!(live.source, "/proc/self/limits");
        assert!(live.value.is_some());
    }
}
