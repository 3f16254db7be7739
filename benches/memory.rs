/*!
Memory: the resident set of `pmustress run --event task-clock --period
100000` (defaults otherwise: one worker per CPU, ping-pong back to back)
sampled from /proc/PID/status while it runs. The floor is the same
process's RSS 1 s into the run, once every buffer is allocated; the figure
is the growth after that. Target: < 1 MiB from 10 s to 100 s, so 24 h runs
stay bounded.

Default: samples at 1, 5 and 10 s (an 11 s run). PMUSTRESS_BENCH_LONG=1:
samples at 1, 10, 30, 60 and 100 s (a 101 s run).
*/

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::machine_line;

/// (VmRSS, VmHWM, RssAnon) in KiB.
fn rss_kib(pid: u32) -> Option<(u64, u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        text.lines()
            .find(|l| l.starts_with(name))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    Some((field("VmRSS:")?, field("VmHWM:")?, field("RssAnon:")?))
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    println!("{}", machine_line());
    let long = std::env::var_os("PMUSTRESS_BENCH_LONG").is_some();
    let marks: &[u64] = if long {
        &[1, 10, 30, 60, 100]
    } else {
        &[1, 5, 10]
    };
    let last = *marks.last().unwrap();
    let out = tempfile::tempdir().expect("a temp dir");
    let duration = format!("{}s", last + 1);
    let args = [
        "run",
        "--event",
        "task-clock",
        "--period",
        "100000",
        "--duration",
        &duration,
        "--out",
        out.path().to_str().unwrap(),
    ];
    println!("memory: pmustress {}", args.join(" "));
    let mut child = Command::new(env!("CARGO_BIN_EXE_pmustress"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawning pmustress");
    let start = Instant::now();
    let mut samples = vec![];
    for &t in marks {
        let at = Duration::from_secs(t);
        if let Some(wait) = at.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
        match rss_kib(child.id()) {
            Some(s) => {
                println!(
                    "  {t:>3} s: VmRSS {} KiB, RssAnon {} KiB, VmHWM {} KiB",
                    s.0, s.2, s.1
                );
                samples.push((t, s));
            }
            None => println!("  {t:>3} s: the process is gone"),
        }
    }
    let status = child.wait().expect("waiting for pmustress");
    let verdict = std::fs::read_to_string(out.path().join("run.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .map(|v| {
            format!(
                "verdict {}, {} signals, {} anomalies recorded{}",
                v["verdict"],
                v["totals"]["signals"],
                v["anomalies"].as_array().map_or(0, |a| a.len()),
                match v["inconclusive_because"].as_array() {
                    Some(why) if !why.is_empty() => format!("; inconclusive because {why:?}"),
                    _ => String::new(),
                }
            )
        })
        .unwrap_or_default();
    println!("  exit {:?}; {verdict}", status.code());
    if samples.len() < 2 {
        println!("memory: not enough samples");
        return;
    }
    let (t0, floor) = samples[0];
    let (t1, end) = samples[samples.len() - 1];
    println!(
        "memory: RSS {} KiB at {t0} s (floor) -> {} KiB at {t1} s: growth {:+} KiB",
        floor.0,
        end.0,
        end.0 as i64 - floor.0 as i64
    );
    match samples.iter().find(|(t, _)| *t == 10) {
        Some(&(_, at10)) if t1 > 10 => println!(
            "memory: growth from 10 s to {t1} s: {:+} KiB (target < 1024 KiB)",
            end.0 as i64 - at10.0 as i64,
        ),
        _ => println!(
            "memory: PMUSTRESS_BENCH_LONG=1 measures 10 s to 100 s (the target: < 1024 KiB)"
        ),
    }
}
