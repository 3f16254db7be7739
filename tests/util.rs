use std::path::Path;
use std::process::Output;

use assert_cmd::Command;

pub fn pmustress() -> Command {
    Command::cargo_bin("pmustress").expect("the binary is built for integration tests")
}

/// Runs `pmustress ARGS` and returns its output.
pub fn run(args: &[&str]) -> Output {
    pmustress().args(args).output().expect("pmustress runs")
}

pub fn read_json(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("run.json")).expect("run.json exists");
    serde_json::from_str(&text).expect("run.json parses")
}

pub fn u64_at(v: &serde_json::Value, pointer: &str) -> u64 {
    v.pointer(pointer)
        .and_then(|x| x.as_u64())
        .unwrap_or_else(|| panic!("{pointer} missing or not a number in {v:#}"))
}

/// Machines with a core PMU behave differently for hardware events.
pub fn has_core_pmu() -> bool {
    ["cpu", "cpu_core", "armv8_pmuv3_0"]
        .iter()
        .any(|p| Path::new("/sys/bus/event_source/devices").join(p).exists())
}
