//! Output failures: an unwritable --out is refused before measuring, and a
//! disk that fills up mid-run stops the run with the verdict still saved.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{is_root, read_json, run};

/// A tmpfs of `kib` KiB, unmounted on drop.
struct TinyDisk {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl TinyDisk {
    fn mount(kib: u64) -> Option<TinyDisk> {
        let dir = tempfile::tempdir().ok()?;
        let path = dir.path().join("disk");
        std::fs::create_dir(&path).ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(&path)
            .status()
            .ok()?
            .success();
        ok.then_some(TinyDisk { path, _dir: dir })
    }
}

impl Drop for TinyDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.path).status();
    }
}

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
    if !is_root() {
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    }
    let Some(disk) = TinyDisk::mount(1024) else {
        eprintln!("skipped: cannot mount a tmpfs here");
        return;
    };
    let (code, stderr) = run_into(&disk.path.join("r"), &["--duration", "1s"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--out") && stderr.contains("reserve"),
        "{stderr}"
    );
}

#[test]
fn a_disk_that_fills_up_mid_run_stops_it_and_keeps_the_verdict() {
    let _machine = crate::util::shared_machine();
    if !is_root() {
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    }
    // 2 MiB reserve + the first files; --raw then fills the rest in seconds.
    let Some(disk) = TinyDisk::mount(2048 + 160) else {
        eprintln!("skipped: cannot mount a tmpfs here");
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
}
