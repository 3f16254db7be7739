//! The totals run.json holds at its top level (`accounted_overflows`,
//! `dropped_interrupts`, `dropped_rate`), which `report`, `compare` and
//! `--baseline` read, are checked like the judge's own: `replay` names a
//! run.json whose top-level totals its stream does not give, and
//! `--baseline` refuses one whose counts contradict themselves.

use std::path::Path;

use crate::util::{copy_run, run};

/// A recorded run with a stream: 3 dropped in 30,542 overflows, 2 workers.
const RECORDED: &str = "tests/fixtures/oracle/smp2-nopnmi-w2-none-free-50k";

/// `replay DIR` on a copy of the recorded run, `edit` applied to its
/// run.json: exit status and stdout.
fn replay_edited(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) -> (Option<i32>, String) {
    copy_run(RECORDED, dir, edit);
    let o = run(&["replay", dir.to_str().unwrap()]);
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

#[test]
fn replay_of_the_recorded_run_finds_the_same_totals() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stdout) = replay_edited(&dir.path().join("run"), |_| {});
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("replay: the same totals as run.json"),
        "{stdout}"
    );
}

/// An edited `dropped_interrupts` (3 to 1), or `accounted_overflows` at
/// 2^64-1, replayed as "the same totals as run.json": only the judge's
/// nested totals were compared.
#[test]
fn replay_names_edited_top_level_totals() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, serde_json::Value); 4] = [
        (
            "/totals/dropped_interrupts",
            "totals.dropped_interrupts",
            1.into(),
        ),
        (
            "/totals/accounted_overflows",
            "totals.accounted_overflows",
            u64::MAX.into(),
        ),
        (
            "/workers/1/dropped_interrupts",
            "workers[1].dropped_interrupts",
            1000.into(),
        ),
        (
            "/totals/dropped_rate/ci_low_per_million",
            "totals.dropped_rate",
            1e-9.into(),
        ),
    ];
    for (i, (pointer, field, value)) in cases.into_iter().enumerate() {
        let (code, stdout) = replay_edited(&dir.path().join(format!("r{i}")), |run| {
            *run.pointer_mut(pointer).expect(pointer) = value;
        });
        // Lines wrap at 100 columns: read them whole.
        let stdout = crate::util::unwrapped(&stdout);
        assert_eq!(code, Some(125), "{pointer}: {stdout}");
        assert!(!stdout.contains("the same totals"), "{pointer}: {stdout}");
        // The verdict said is the one exited with (it said the stream's
        // own, "dropped (exit 1)", and exited 125).
        assert!(
            stdout.contains("verdict: inconclusive (exit 125)"),
            "{pointer}: {stdout}"
        );
        assert!(
            stdout.contains(&format!("replay differs: {field}: run.json ")),
            "{pointer}: {stdout}"
        );
    }
}

/// A baseline whose counts contradict themselves is refused (2, one line
/// naming its run.json): `accounted_overflows` at 2^64-1 made a bisect step
/// ask for 8.3e16 overflows and skip (125) forever; set in every place it
/// appears, it is still more overflows than the run had nanoseconds.
#[test]
fn a_baseline_whose_counts_cannot_be_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let top_only = |run: &mut serde_json::Value| {
        run["totals"]["accounted_overflows"] = u64::MAX.into();
    };
    let everywhere = |run: &mut serde_json::Value| {
        let half = u64::MAX / 2;
        run["totals"]["accounted_overflows"] = (2 * half).into();
        run["totals"]["interrupts"]["overflows"] = (2 * half).into();
        for w in run["workers"].as_array_mut().unwrap() {
            w["accounted_overflows"] = half.into();
        }
    };
    type Edit<'a> = &'a dyn Fn(&mut serde_json::Value);
    let cases: [(&str, Edit, &str); 2] = [
        ("top", &top_only, "contradict"),
        ("everywhere", &everywhere, "cannot be"),
    ];
    for (name, edit, why) in cases {
        let baseline = dir.path().join(name);
        copy_run(RECORDED, &baseline, edit);
        let o = run(&[
            "run",
            "--event",
            "task-clock",
            "--baseline",
            baseline.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{name}: {stderr}");
        let file = baseline.join("run.json");
        assert!(
            stderr.contains("--baseline")
                && stderr.contains(file.to_str().unwrap())
                && stderr.contains(why),
            "{name}: {stderr}"
        );
    }
}
