//! Output failures: an unwritable --out is refused before measuring, and a
//! disk that fills up mid-run stops the run with the verdict still saved.

use std::path::Path;

use crate::util::{TinyDisk, read_json, run};

fn run_into(out: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let mut argv = vec![
        "run",
        "--event",
        "task-clock",
        "--out",
        out.to_str().unwrap(),
    ];
    argv.extend_from_slice(extra);
    let o = run(&argv);
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn unwritable_out_is_refused_before_measuring() {
    let (code, stderr) = run_into(
        Path::new("/proc/pmustress-cannot-be-here"),
        &["--duration", "1s"],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--out"), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
}

#[test]
fn a_disk_too_small_for_the_verdict_is_refused_before_measuring() {
    let Some(disk) = TinyDisk::mount(1024) else {
        return;
    };
    let (code, stderr) = run_into(&disk.path.join("r"), &["--duration", "1s"]);
    // A full disk is this machine's state, not a usage error: 125.
    assert_eq!(code, Some(125), "{stderr}");
    assert!(
        stderr.contains("--out") && stderr.contains("reserve"),
        "{stderr}"
    );
}

#[test]
fn a_disk_that_fills_up_mid_run_stops_it_and_keeps_the_verdict() {
    let _machine = crate::util::shared_machine();
    // 2 MiB reserve + the first files; --raw then fills the rest in seconds.
    let Some(disk) = TinyDisk::mount(2048 + 160) else {
        return;
    };
    let out = disk.path.join("r");
    let (code, stderr) = run_into(&out, &["--duration", "60s", "--raw"]);
    assert_eq!(code, Some(125), "{stderr}");
    let r = read_json(&out);
    assert_eq!(r["verdict"], "inconclusive", "{r:#}");
    let why = r["inconclusive_because"].to_string();
    assert!(why.contains("No space left"), "{why}");
    assert!(
        r["elapsed_ns"].as_u64().unwrap() < 55_000_000_000,
        "the run went on after the disk filled"
    );
    let csv = std::fs::read_to_string(out.join("anomalies.csv")).unwrap();
    assert!(csv.starts_with("worker,"));
    // What the full disk left is complete or marked partial: deltas.csv
    // holds whole rows, each once and in order (a retried buffer used to
    // duplicate rows and leave a partial last one), and run.json says it
    // is partial.
    let deltas = std::fs::read_to_string(out.join("deltas.csv")).unwrap();
    assert!(deltas.ends_with('\n'), "partial last row");
    let mut last: std::collections::HashMap<u64, u64> = Default::default();
    for line in deltas.lines().skip(1) {
        let f: Vec<u64> = line.split(',').map(|x| x.parse().unwrap()).collect();
        assert_eq!(f.len(), 5, "{line}");
        let prev = last.insert(f[0], f[1]);
        assert!(
            prev.is_none_or(|p| f[1] > p),
            "duplicated or out of order: {line}"
        );
    }
    let partial = r["partial_files"].to_string();
    assert!(partial.contains("deltas.csv"), "{r:#}");
    // raw.csv.gz ends with a whole gzip member, and a whole line.
    let gz = std::fs::File::open(out.join("raw.csv.gz")).unwrap();
    let mut raw = String::new();
    std::io::Read::read_to_string(&mut flate2::read::MultiGzDecoder::new(gz), &mut raw)
        .expect("raw.csv.gz is whole gzip members");
    assert!(raw.ends_with('\n'), "partial last row in raw.csv.gz");
}
