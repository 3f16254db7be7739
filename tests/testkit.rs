//! The whole binary on the test kit's scripted fake kernel
//! (`PMUSTRESS_TESTKIT_SCRIPT`, compiled only with the `testkit` feature
//! that `cargo test` turns on): the command line, the run loop, the
//! results directory and the exit status, with exact numbers and no real
//! clock, PMU or scheduler in them.

use std::path::Path;
use std::process::Output;

use pmustress::testkit::fake_kernel::{SCRIPT_ENV, Script, Scripted, Signal, Step};

use crate::util::{TinyDisk, pmustress, read_json};

/// The Graviton2 the engine's own fake-kernel tests run on.
const MACHINE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/fingerprint/graviton2-c6g-6.1-disabled"
);

/// `pmustress run --period 100000 --skid 1000 --cpus 0,1 --workers 1
/// --migrate none ARGS --out OUT` on `script`.
fn run_scripted(script: Script, args: &[&str], out: &Path) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("script.json");
    let scripted = Scripted {
        machine: MACHINE.into(),
        cpus: vec![0, 1],
        script,
    };
    std::fs::write(&path, serde_json::to_string(&scripted).unwrap()).unwrap();
    pmustress()
        .env(SCRIPT_ENV, &path)
        .args([
            "run",
            "--period",
            "100000",
            "--skid",
            "1000",
            "--cpus",
            "0,1",
            "--workers",
            "1",
            "--migrate",
            "none",
        ])
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// 300 interrupts on time, each signal delivered: enough overflows for a
/// clean verdict, every one accounted for, exit 0, and the summary says
/// so in as many words.
#[test]
fn a_scripted_run_is_clean_with_every_overflow_accounted_for() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("r");
    // Each overflow after a stop 1,000 events past the due point before
    // it: 300 stops, enough for a clean verdict to say its sensitivity.
    let script =
        Script::default().worker([Step::Switch { before_due: 99_000 }, Step::OVERFLOW].repeat(300));
    let out = run_scripted(script, &["--duration", "610ms"], &out_dir);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let r = read_json(&out_dir);
    assert_eq!(r["verdict"], "clean");
    assert_eq!(r["exit_status"], 0);
    assert_eq!(r["stop_reason"], "duration");
    assert_eq!(r["elapsed_ns"], 610_000_000);
    assert_eq!(r["totals"]["stress"]["stops"], 300);
    let t = &r["totals"];
    let got: Vec<u64> = [
        "kernel_samples",
        "signals",
        "accounted_overflows",
        "implied_overflows",
        "dropped_interrupts",
        "ambiguous",
        "sigio",
    ]
    .iter()
    .map(|k| t[k].as_u64().unwrap())
    .collect();
    assert_eq!(got, [300, 300, 300, 300, 0, 0, 0]);
    assert_eq!(t["interrupts"]["on_time"], 300);
    assert_eq!(t["deliveries"]["on_time"], 300);
    // Interrupts 10 events late, read 100 later: the last read.
    assert_eq!(r["workers"][0]["final_count"], 300 * 100_000 + 110);
    assert_eq!(strings(&r["warnings"]), Vec::<String>::new());
    assert_eq!(strings(&r["inconclusive_because"]), Vec::<String>::new());
    assert!(
        crate::util::unwrapped(&stdout).contains(
            "verdict: clean: no dropped interrupt in 300 overflows and 300 stops; a driver losing every overflow due within 1535 events (1.54% of the period) before a stop would have lost one here with 99% probability"
        ),
        "{stdout}"
    );
    assert!(
        stdout.ends_with(&format!("(exit 0)\nresults: {}\n", out_dir.display())),
        "{stdout}"
    );
}

/// The realtime queue full once: the interrupt's signal comes as a plain
/// SIGIO. A delivery fault, never a drop: counted, warned about, and the
/// overflow accounted for by its sample.
#[test]
fn the_sigio_fallback_is_counted_and_never_a_drop() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("r");
    // A stop before each overflow: enough stops for a clean verdict.
    let stop = Step::Switch { before_due: 50_000 };
    let mut steps = [stop, Step::OVERFLOW].repeat(150);
    steps.push(Step::Overflow {
        late: 10,
        signal: Signal::Merged,
    });
    steps.push(Step::SigIo);
    steps.extend([stop, Step::OVERFLOW].repeat(149));
    steps.push(stop);
    let script = Script::default().worker(steps);
    let out = run_scripted(script, &["--duration", "610ms"], &out_dir);
    let r = read_json(&out_dir);
    let t = &r["totals"];
    assert_eq!(
        (
            t["kernel_samples"].as_u64(),
            t["accounted_overflows"].as_u64(),
            t["dropped_interrupts"].as_u64(),
            t["sigio"].as_u64(),
            t["signals"].as_u64(),
        ),
        (Some(300), Some(300), Some(0), Some(1), Some(299)),
        "{r:#}"
    );
    assert_eq!(
        strings(&r["warnings"]),
        [
            "the realtime signal queue overflowed 1 times (plain SIGIO fallback): raise RLIMIT_SIGPENDING (ulimit -i)"
        ]
    );
    assert_eq!(t["anomalies"]["signal-queue-overflow"], 1);
    assert_eq!(
        (r["verdict"].as_str(), out.status.code()),
        (Some("clean"), Some(0))
    );
}

/// The kernel refuses the count witness (perf_event_paranoid 2 on the
/// fixture machine, no CAP_PERFMON): `auto` falls back to times, and the
/// run says so live, before its first verdict line, with the one command
/// that gets the exact verdict; the results say it again.
#[test]
fn a_run_without_the_count_witness_says_how_to_get_it_before_measuring() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("r");
    let mut script = Script::default().worker([Step::OVERFLOW; 20]);
    script.witness_opens = false;
    let out = run_scripted(script, &["--duration", "100ms"], &out_dir);
    let stdout = crate::util::unwrapped(&text(&out.stdout));
    let note = "note: event stops were witnessed without their counts (--switch-witness times): a gap across a stop may stay ambiguous (--max-count-rate, e.g. the CPU's highest frequency for cycles, lets the stops' times bound their counts); the kernel refused the count witness (perf_event_paranoid 2, no CAP_PERFMON): for the exact verdict run as root or after `sudo sysctl kernel.perf_event_paranoid=1`";
    let at = stdout
        .find(note)
        .unwrap_or_else(|| panic!("no live note in:\n{stdout}"));
    let verdict = stdout.find("verdict:").expect("a verdict line");
    assert!(at < verdict, "{stdout}");
    assert_eq!(stdout.matches("note: event stops").count(), 1, "{stdout}");
    let r = read_json(&out_dir);
    assert_eq!(r["workers"][0]["switch_witness"], "times");
    assert!(
        strings(&r["warnings"])
            .iter()
            .any(|w| note.strip_prefix("note: ") == Some(w.as_str())),
        "{r:#}"
    );
}

/// A worker that stops running user code (livelocked in the kernel) is
/// stopped by the watchdog: its event disabled, the run judged on what it
/// measured, inconclusive with the worker named, 125.
#[test]
fn the_watchdog_stops_a_stalled_worker_and_the_run_says_which() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("r");
    let mut steps = vec![Step::OVERFLOW; 12];
    steps.push(Step::Stall);
    steps.extend([Step::OVERFLOW; 100]);
    let script = Script::default().worker(steps);
    let out = run_scripted(
        script,
        &["--duration", "1s", "--watchdog", "50ms"],
        &out_dir,
    );
    assert_eq!(out.status.code(), Some(125), "{}", text(&out.stderr));
    let r = read_json(&out_dir);
    assert_eq!(r["stop_reason"], "workers-gone");
    // Its last round was at 10 ms; signals kept coming until the
    // watchdog's DISABLE at 65 ms.
    assert_eq!(r["elapsed_ns"], 65_000_000);
    let stalled =
        "worker 0 ran no user code for 55 ms (livelocked in the kernel?): its event was disabled";
    assert_eq!(r["workers"][0]["stalled"], stalled);
    let reasons = strings(&r["inconclusive_because"]);
    assert_eq!(reasons[0], stalled);
    assert_eq!(r["verdict"], "inconclusive");
    assert_eq!(r["totals"]["dropped_interrupts"], 0);
}

/// The disk fills while the run goes on: the run stops at once, keeps
/// and judges what it measured, and says so; every overflow the kernel
/// played before the stop is accounted for.
#[test]
fn a_full_disk_stops_a_scripted_run() {
    // The 2 MiB the run reserves for its verdict, and a little for --raw.
    let Some(disk) = TinyDisk::mount(2048 + 160) else {
        return;
    };
    let out_dir = disk.path.join("r");
    let script = Script {
        step_ns: 100_000,
        signal_delay_ns: 10_000,
        ..Script::default()
    }
    .worker(vec![Step::OVERFLOW; 100_000]);
    let out = run_scripted(script, &["--duration", "20s", "--raw"], &out_dir);
    assert_eq!(out.status.code(), Some(125), "{}", text(&out.stderr));
    let r = read_json(&out_dir);
    assert_eq!(r["verdict"], "inconclusive");
    let stop = r["stop_reason"]["output-failed"]
        .as_str()
        .unwrap_or_default();
    assert!(stop.contains("No space left on device"), "{r:#}");
    let t = &r["totals"];
    let samples = t["kernel_samples"].as_u64().unwrap();
    assert!(
        samples > 0 && samples < 100_000,
        "the run stopped when the disk filled: {samples}"
    );
    assert_eq!(t["accounted_overflows"].as_u64(), Some(samples));
    assert_eq!(t["dropped_interrupts"], 0);
    // Every interrupt's signal was judged with it, or was on its way when
    // the run stopped.
    let d = &t["deliveries"];
    assert_eq!(
        d["signals"].as_u64().unwrap() + d["in_flight"].as_u64().unwrap(),
        samples,
        "{d:#}"
    );
    assert_eq!(d["on_time"], d["signals"]);
}

/// An overflow lost at a switch 5,000 events past its due point, and the
/// two interrupts after it: the second 3 events late, not 10, refutes the
/// delivering driver, so the loss is certain.
const A_LOSS: [Step; 3] = [
    Step::DropAtSwitch { past_due: 5_000 },
    Step::OVERFLOW,
    Step::Overflow {
        late: 3,
        signal: Signal::Delivered,
    },
];

/// `stops` overflows each after a stop, `A_LOSS`, then `after` more.
fn a_loss_among(stops: usize, after: usize) -> Script {
    let stop = Step::Switch { before_due: 50_000 };
    let mut steps = [stop, Step::OVERFLOW].repeat(stops);
    steps.extend(A_LOSS);
    steps.extend([stop, Step::OVERFLOW].repeat(after));
    Script::default().worker(steps)
}

/// Bisect mode stops at the first drop the kernel makes: bad, exit 1
/// (git bisect run's "bad"), long before the 4.6 million overflows a good
/// kernel would need at this rate.
#[test]
fn bisect_calls_the_first_drop_a_bad_kernel() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("r");
    let script = a_loss_among(20, 400);
    let out = run_scripted(
        script,
        &["--bad-rate", "0.000001", "--duration", "1s"],
        &out_dir,
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let r = read_json(&out_dir);
    assert_eq!(r["stop_reason"], "bisect-bad");
    assert_eq!(r["verdict"], "dropped");
    assert_eq!(r["totals"]["dropped_interrupts"], 1);
    assert_eq!(r["config"]["bisect"]["overflows_needed"], 4_605_168);
    // It stopped once the judge saw the loss, before the script's end
    // (422 overflows): without the bisect's stop it would play them all.
    let played = r["totals"]["accounted_overflows"].as_u64().unwrap();
    assert!((23..422).contains(&played), "{played}");
}

/// --baseline takes the bad rate from a recorded bad run (the arm64 run
/// without pseudo-NMI: 72 dropped of 14918), says where it came from,
/// and the bisection it plans is short; a drop still makes it bad.
#[test]
fn bisect_takes_its_rate_from_a_bad_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("r");
    let out = run_scripted(
        a_loss_among(20, 400),
        &[
            "--baseline",
            "tests/fixtures/qemu/nopnmi-migrate",
            "--duration",
            "1s",
        ],
        &out_dir,
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let r = read_json(&out_dir);
    let source = r["config"]["bisect"]["bad_rate_source"].as_str().unwrap();
    assert!(
        source.contains("nopnmi-migrate: 72 dropped in 14918 overflows"),
        "{source}"
    );
    let needed = r["config"]["bisect"]["overflows_needed"].as_u64().unwrap();
    assert!((1..2000).contains(&needed), "{needed}");
    assert_eq!(r["stop_reason"], "bisect-bad");
}

/// A self-test on a kernel that loses an overflow of its own: the
/// detector found both injected drops, and one more that was not
/// injected, so the self-test fails (exit 1) and says which.
#[test]
fn a_self_test_fails_on_a_drop_it_did_not_make() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("r");
    // 20 samples: the 8th and 16th are discarded.
    let mut steps = vec![Step::OVERFLOW; 5];
    steps.extend(A_LOSS);
    steps.extend([Step::OVERFLOW; 13]);
    let out = run_scripted(
        Script::default().worker(steps),
        &["--duration", "30ms", "--inject-drop-every", "8"],
        &out_dir,
    );
    let stdout = crate::util::unwrapped(&text(&out.stdout));
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    let r = read_json(&out_dir);
    assert_eq!(r["verdict"], "self-test-failed");
    let t = &r["totals"];
    assert_eq!(
        (
            t["injected"].as_u64(),
            t["interrupts"]["injected_found"].as_u64(),
            t["dropped_interrupts"].as_u64()
        ),
        (Some(2), Some(2), Some(3)),
        "{r:#}"
    );
    assert!(
        stdout.contains(
            "verdict: self-test FAIL: 1 drop was not injected: the kernel lost it or the judge is wrong (see the anomalies) (exit 1)"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("dropped-interrupt: 3 windows: 2 of the 3 drops injected (--inject-drop-every); the others: the PMU interrupt"),
        "{stdout}"
    );
}

/// The same self-test on a kernel that loses nothing passes: both
/// injected drops found, nothing else, exit 0, however few overflows
/// (a self-test asks whether the detector works, not how rare drops are).
#[test]
fn a_self_test_passes_when_it_finds_exactly_what_it_made() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("r");
    let out = run_scripted(
        Script::default().worker([Step::OVERFLOW; 20]),
        &["--duration", "30ms", "--inject-drop-every", "8"],
        &out_dir,
    );
    let stdout = crate::util::unwrapped(&text(&out.stdout));
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let r = read_json(&out_dir);
    assert_eq!(r["verdict"], "self-test-passed");
    assert!(
        stdout.contains(
            "verdict: self-test PASS: found 2 of 2 injected drops and nothing else: the detector works (exit 0)"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "dropped-interrupt: 2 windows: every drop injected: 2 overflows discarded on purpose (--inject-drop-every)"
        ),
        "{stdout}"
    );
}
