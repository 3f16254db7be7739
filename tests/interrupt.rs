//! SIGINT and SIGTERM at any moment leave a complete, parseable results
//! directory marked interrupted; a second Ctrl-C exits at once.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{read_json, send_signal};

fn start(out: &std::path::Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_pmustress"))
        .args([
            "run",
            "--event",
            "task-clock",
            "--duration",
            "30s",
            "--migrate-interval",
            "1ms",
            "--out",
        ])
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("pmustress starts")
}

/// Waits until the run has set up its signal handlers and results
/// directory (the preliminary run.json appears after both), so a signal
/// never lands before pmustress can catch it, however loaded the machine.
fn wait_until_started(out: &std::path::Path) {
    let t = Instant::now();
    while !out.join("run.json").exists() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "pmustress never started"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn interrupted_at_many_points_leaves_parseable_results() {
    let _machine = crate::util::shared_machine();
    let dir = tempfile::tempdir().unwrap();
    // From the moment the directory exists: during worker setup, mid-run,
    // and around the first flushes; both signals.
    let delays_ms = [0u64, 10, 40, 100, 250, 500, 900, 1100, 1600, 2300];
    for (i, delay) in delays_ms.iter().enumerate() {
        for sig in [libc::SIGINT, libc::SIGTERM] {
            let out = dir.path().join(format!("run-{i}-{sig}"));
            let mut child = start(&out);
            wait_until_started(&out);
            std::thread::sleep(Duration::from_millis(*delay));
            send_signal(child.id() as i32, sig);
            let status = child.wait().unwrap();
            assert_eq!(
                status.code(),
                Some(128 + sig),
                "delay {delay} ms, signal {sig}"
            );
            let r = read_json(&out);
            assert_eq!(r["verdict"], "interrupted", "delay {delay} ms: {r:#}");
            assert_eq!(r["exit_status"], 128 + sig);
            let csv = std::fs::read_to_string(out.join("anomalies.csv")).unwrap();
            assert!(csv.starts_with("worker,signal_seq,"), "{csv}");
            // Every row is complete.
            let header_fields = csv.lines().next().unwrap().split(',').count();
            assert!(csv.lines().all(|l| l.split(',').count() == header_fields));
            assert!(out.join("deltas.hgrm").exists());
        }
    }
}

#[test]
fn a_second_ctrl_c_exits_at_once() {
    let _machine = crate::util::shared_machine();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let mut child = start(&out);
    wait_until_started(&out);
    std::thread::sleep(Duration::from_millis(300));
    send_signal(child.id() as i32, libc::SIGINT);
    send_signal(child.id() as i32, libc::SIGINT);
    let t = Instant::now();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    // No timing assertion: just that it did not run its 30 s budget.
    assert!(t.elapsed() < Duration::from_secs(25));
    // What was written before the exit still parses.
    let r = read_json(&out);
    assert!(
        r["verdict"] == "interrupted" || r["verdict"] == "incomplete",
        "{r:#}"
    );
}
