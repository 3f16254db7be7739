//! Runs recorded on the oracle kernel (qemu/: Linux 6.1's arm64 driver
//! patched to count its own lost, handled and re-based overflows), replayed
//! with today's judge: its totals must equal the oracle's, exactly, so the
//! agreement is pinned without QEMU.
//!
//! Each fixture under tests/fixtures/oracle/ is one run's results directory
//! (run.json, raw.csv.gz) as `qemu/run.sh` left it, the command the guest ran
//! (`command`) and the oracle's counters over that run (`oracle`: after minus
//! before). They cover 4 vCPUs with one ping-pong worker each, with and
//! without pseudo-NMI (thousands of losses and re-based periods; none), and
//! 2 unmigrated workers that still lose interrupts at context switches.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use pmustress::replay;

use crate::util::run;

fn fixtures() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("tests/fixtures/oracle")
        .expect("tests/fixtures/oracle")
        .map(|e| e.expect("a fixture").path())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 3, "{dirs:?}");
    dirs
}

fn oracle(dir: &Path) -> BTreeMap<String, u64> {
    let text = std::fs::read_to_string(dir.join("oracle")).expect("oracle counters");
    text.lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').expect("NAME VALUE");
            (k.to_string(), v.parse().expect("a count"))
        })
        .collect()
}

#[test]
fn replayed_oracle_runs_agree_with_the_driver_exactly() {
    for dir in fixtures() {
        let o = oracle(&dir);
        let r = replay::replay_dir(&dir).expect("replays");
        let name = dir.display();
        assert!(r.truncated.is_none(), "{name}: {:?}", r.truncated);
        assert!(r.differences.is_empty(), "{name}: {:?}", r.differences);
        let i = &r.replayed.interrupts;
        assert_eq!(i.ambiguous, 0, "{name}");
        assert_eq!(i.unexplained, 0, "{name}");
        assert_eq!(i.record_lost, 0, "{name}");
        assert_eq!(i.dropped, o["lost"], "{name}: dropped vs the driver's lost");
        assert_eq!(i.samples, o["handled"], "{name}: samples vs handled");
        assert_eq!(i.throttled, o["throttled"], "{name}");
        assert_eq!(i.rebased_in_handler, o["rebase_irq"], "{name}");
        assert_eq!(i.rebased_at_restart, o["rebase_restart"], "{name}");
        assert_eq!(
            i.overflows,
            o["handled"] + o["lost"],
            "{name}: every overflow accounted once"
        );
        let want = if o["lost"] > 0 { 1 } else { 0 };
        assert_eq!(r.exit_status, want, "{name}: {}", r.verdict);
        assert_eq!(r.run_exit_status, Some(i64::from(want)), "{name}");
    }
}

#[test]
fn replay_command_reproduces_an_oracle_run_and_its_exit_status() {
    let dir = Path::new("tests/fixtures/oracle/smp4-nopnmi-w4-pingpong-free-50k");
    let out = run(&["replay", dir.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("replay: the same totals as run.json"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("{} dropped", oracle(dir)["lost"])),
        "{stdout}"
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}");
}
