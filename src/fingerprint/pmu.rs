/*!
The PMUs perf can open, from /sys/bus/event_source/devices.

Each directory there is one PMU: its `type` is the perf_event_attr.type to
open it with, `events/` names the events sysfs knows by name, and `cpus` (only
on core PMUs) says which CPUs it counts on. A run on arm64 must open the
armv8 PMU whose `cpus` covers its CPUs (big.LITTLE has one per cluster); on
x86 the core PMU is `cpu` (type 4, PERF_TYPE_RAW). A VM without a virtual PMU
has only software, tracepoint, breakpoint and the like: perf then counts
nothing in hardware, and pmustress must say so instead of failing obscurely.

How many counters a core PMU has is not in sysfs: arm64 says it in the
driver's probe line, x86 in the "... generic registers" line at boot.
*/

use std::collections::BTreeMap;

use serde::Serialize;

use super::kmsg::KernelLog;
use super::read::{Root, Sourced};
use crate::fingerprint::cpu::{format_cpu_list, parse_cpu_list};

const DEVICES: &str = "sys/bus/event_source/devices";

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pmu {
    pub name: String,
    /// perf_event_attr.type for this PMU.
    pub type_id: u32,
    /// The CPUs a core PMU counts on (its `cpus` file); None where there is
    /// no such file (x86 `cpu`, uncore and software PMUs).
    pub cpus: Option<Vec<u32>>,
    /// Named events from `events/`, sorted.
    pub events: Vec<String>,
    /// Core PMUs: what each named event stands for (`events/NAME`, e.g.
    /// `event=0xc4,umask=0x1`), for perf's `pmu/NAME/` syntax.
    #[serde(skip)]
    pub event_terms: BTreeMap<String, String>,
    /// Core PMUs: where each term's value goes (`format/NAME`, e.g.
    /// `config:0-7`).
    #[serde(skip)]
    pub formats: BTreeMap<String, String>,
    /// A PMU that counts what a CPU executes (cycles, branches), by perf's
    /// own rule (`is_pmu_core`): named `cpu`, or has a `cpus` file.
    pub is_core: bool,
    /// `caps/` attributes (x86: pmu_name, max_precise, branches; arm64:
    /// slots, bus_width ...).
    pub caps: BTreeMap<String, String>,
    /// Counters available, from the kernel log line that says so.
    pub counters: Option<Sourced<u32>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Pmus {
    /// The directory read, or why it could not be.
    pub source: String,
    pub devices: Vec<Pmu>,
    /// PMU directories we could not use (no readable `type`), with the reason.
    pub skipped: Vec<String>,
    /// Whether any core PMU exists: without one only software events count.
    pub has_hardware_pmu: bool,
    /// What the kernel log said about PMUs at boot.
    pub log_lines: Vec<String>,
}

impl Pmus {
    pub fn read(root: &Root, log: &KernelLog) -> Pmus {
        let names = match root.list(DEVICES) {
            Ok(names) => names,
            Err(e) => {
                return Pmus {
                    source: Root::why(DEVICES, &e),
                    devices: Vec::new(),
                    skipped: Vec::new(),
                    has_hardware_pmu: false,
                    log_lines: pmu_log_lines(log),
                };
            }
        };
        let mut devices = Vec::new();
        let mut skipped = Vec::new();
        for name in names {
            let dir = format!("{DEVICES}/{name}");
            let type_file = root.read_value(&format!("{dir}/type"));
            let Some(type_id) = type_file.value.as_deref().and_then(|t| t.parse().ok()) else {
                skipped.push(format!(
                    "{name}: {}",
                    match type_file.value {
                        Some(t) => format!("unparsable type {t:?}"),
                        None => type_file.source,
                    }
                ));
                continue;
            };
            let cpus = root
                .read_value(&format!("{dir}/cpus"))
                .value
                .and_then(|c| parse_cpu_list(&c));
            let events = root.list(&format!("{dir}/events")).unwrap_or_default();
            let caps = root
                .list(&format!("{dir}/caps"))
                .unwrap_or_default()
                .into_iter()
                .filter_map(|cap| {
                    let v = root.read_value(&format!("{dir}/caps/{cap}")).value?;
                    Some((cap, v))
                })
                .collect();
            let is_core = name == "cpu" || root.exists(&format!("{dir}/cpus"));
            let contents = |sub: &str, names: &[String]| -> BTreeMap<String, String> {
                if !is_core {
                    return BTreeMap::new();
                }
                names
                    .iter()
                    .filter_map(|n| {
                        let v = root.read_value(&format!("{dir}/{sub}/{n}")).value?;
                        Some((n.clone(), v))
                    })
                    .collect()
            };
            let event_terms = contents("events", &events);
            let format_names = root.list(&format!("{dir}/format")).unwrap_or_default();
            let formats = contents("format", &format_names);
            devices.push(Pmu {
                name,
                type_id,
                cpus,
                events,
                event_terms,
                formats,
                is_core,
                caps,
                counters: None,
            });
        }
        attach_counters(&mut devices, log);
        // Core PMUs first: they are what a run opens.
        devices.sort_by(|a, b| b.is_core.cmp(&a.is_core).then(a.name.cmp(&b.name)));
        Pmus {
            source: Root::shown(DEVICES),
            has_hardware_pmu: devices.iter().any(|p| p.is_core),
            devices,
            skipped,
            log_lines: pmu_log_lines(log),
        }
    }
}

fn pmu_log_lines(log: &KernelLog) -> Vec<String> {
    log.kept
        .iter()
        .filter(|l| {
            [
                "hw perfevents:",
                "Performance Events:",
                "... ",
                "PMU not available",
                "NMI watchdog",
            ]
            .iter()
            .any(|k| l.contains(k))
        })
        .cloned()
        .collect()
}

/// arm64: "hw perfevents: enabled with <pmu> PMU driver, <n> ..." names
/// its PMU. x86: "... generic registers: <n>" follows "Performance
/// Events:" and belongs to `cpu` (hybrid parts print one block per PMU;
/// we only attach it when there is one core PMU to attach it to).
fn attach_counters(devices: &mut [Pmu], log: &KernelLog) {
    let quoted = |line: &str| format!("{}: \"{line}\"", log.name());
    for line in log.grep("hw perfevents: enabled with ") {
        if let Some((name, n)) = parse_probe_line(line)
            && let Some(pmu) = devices.iter_mut().find(|p| p.name == name)
        {
            pmu.counters = Some(Sourced::found(n, quoted(line)));
        }
    }
    let cores: Vec<usize> = (0..devices.len()).filter(|&i| devices[i].is_core).collect();
    let generic = log
        .grep("... generic registers:")
        .chain(log.grep("... generic counters:"))
        .next();
    if let [only] = cores[..]
        && devices[only].name == "cpu"
        && devices[only].counters.is_none()
        && let Some(line) = generic
        && let Some(n) = line.rsplit(':').next().and_then(|n| n.trim().parse().ok())
    {
        devices[only].counters = Some(Sourced::found(n, quoted(line)));
    }
}

/// "hw perfevents: enabled with armv8_pmuv3_0 PMU driver, 7 counters
/// available[, using NMIs]" (6.11+: "7 (0,8000003f) counters") -> the PMU
/// name and the count, which includes the cycle counter.
pub fn parse_probe_line(line: &str) -> Option<(&str, u32)> {
    let rest = line.split_once("enabled with ")?.1;
    let (name, rest) = rest.split_once(" PMU driver, ")?;
    let n = rest.split_whitespace().next()?.parse().ok()?;
    Some((name, n))
}

impl Pmu {
    /// One line for the readable fingerprint.
    pub fn summary(&self) -> String {
        let mut s = format!("{} (type {})", self.name, self.type_id);
        if let Some(cpus) = &self.cpus {
            s.push_str(&format!(", cpus {}", format_cpu_list(cpus)));
        }
        if let Some(Sourced { value: Some(n), .. }) = &self.counters {
            s.push_str(&format!(", {n} counters"));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_lines_old_and_new_and_junk() {
        assert_eq!(
            parse_probe_line(
                "hw perfevents: enabled with armv8_pmuv3_0 PMU driver, 7 counters available"
            ),
            Some(("armv8_pmuv3_0", 7))
        );
        assert_eq!(
            parse_probe_line(
                "hw perfevents: enabled with armv8_pmuv3_0 PMU driver, 7 (0,8000003f) counters available, using NMIs"
            ),
            Some(("armv8_pmuv3_0", 7))
        );
        for junk in [
            "",
            "hw perfevents: enabled with",
            "enabled with x PMU driver, ",
            "enabled with x PMU driver, many counters",
        ] {
            assert_eq!(parse_probe_line(junk), None);
        }
    }

    #[test]
    fn sysfs_tree_core_detection_and_counters() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mk = |rel: &str, text: &str| {
            let p = dir.path().join(rel);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(p, text).expect("write");
        };
        mk("sys/bus/event_source/devices/software/type", "1\n");
        mk("sys/bus/event_source/devices/armv8_cortex_a55/type", "8\n");
        mk(
            "sys/bus/event_source/devices/armv8_cortex_a55/cpus",
            "0-3\n",
        );
        mk(
            "sys/bus/event_source/devices/armv8_cortex_a55/events/br_retired",
            "event=0x0021\n",
        );
        mk(
            "sys/bus/event_source/devices/armv8_cortex_a55/caps/slots",
            "0x00000001\n",
        );
        mk("sys/bus/event_source/devices/broken/type", "eight\n");
        let log = KernelLog::from_kmsg(
            b"6,0,0,-;hw perfevents: enabled with armv8_cortex_a55 PMU driver, 7 counters available\n",
            "/dev/kmsg".into(),
        );
        let pmus = Pmus::read(&Root::new(dir.path()), &log);
        assert!(pmus.has_hardware_pmu);
        assert_eq!(pmus.devices[0].name, "armv8_cortex_a55");
        assert_eq!(pmus.devices[0].cpus, Some(vec![0, 1, 2, 3]));
        assert_eq!(pmus.devices[0].events, vec!["br_retired"]);
        assert_eq!(
            pmus.devices[0].caps.get("slots").map(String::as_str),
            Some("0x00000001")
        );
        assert_eq!(
            pmus.devices[0].counters.as_ref().and_then(|c| c.value),
            Some(7)
        );
        assert_eq!(
            pmus.devices[0].summary(),
            "armv8_cortex_a55 (type 8), cpus 0-3, 7 counters"
        );
        assert!(!pmus.devices[1].is_core);
        assert_eq!(pmus.skipped, vec!["broken: unparsable type \"eight\""]);

        let none = Pmus::read(&Root::new(&dir.path().join("nowhere")), &log);
        assert!(!none.has_hardware_pmu);
        assert_eq!(none.source, "not present: /sys/bus/event_source/devices");
    }
}
