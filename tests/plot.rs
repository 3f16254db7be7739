//! `pmustress plot` on the recorded result directories, into a temporary
//! directory: the file is there and in the format its name asks for.

use std::path::Path;

use crate::util::run;

const CLEAN: &str = "tests/fixtures/results/task-clock-clean";
const INJECTED: &str = "tests/fixtures/results/task-clock-injected";

fn plot(dirs: &[&str], out: &Path) {
    let mut args = vec!["plot"];
    args.extend_from_slice(dirs);
    let out_s = out.to_str().unwrap();
    args.extend(["-o", out_s]);
    let o = run(&args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.is_file(), "{} not written", out.display());
}

fn anomaly_rows(dir: &str) -> usize {
    let text = std::fs::read_to_string(Path::new(dir).join("anomalies.csv")).unwrap();
    text.lines().skip(1).filter(|l| !l.is_empty()).count()
}

fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "no PNG signature");
    assert_eq!(&bytes[12..16], b"IHDR");
    let be = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap());
    (be(16), be(20))
}

#[test]
fn svg_has_the_title_and_one_circle_per_anomaly() {
    let tmp = tempfile::tempdir().unwrap();
    for (dir, verdict, injected) in [(CLEAN, "clean", false), (INJECTED, "dropped", true)] {
        let out = tmp.path().join(format!("{verdict}.svg"));
        plot(&[dir], &out);
        let svg = std::fs::read_to_string(&out).unwrap();
        assert!(
            svg.starts_with("<svg") || svg.starts_with("<?xml"),
            "{}",
            &svg[..60]
        );
        assert!(svg.trim_end().ends_with("</svg>"));
        assert!(
            svg.contains(&format!("task-clock, period 1000000: verdict {verdict}")),
            "title missing"
        );
        assert!(svg.contains("software event: does not test the PMU"));
        assert_eq!(svg.contains("SELF-TEST (injected)"), injected);
        assert!(svg.contains("migration before an anomaly"));
        assert_eq!(svg.matches("<circle").count(), anomaly_rows(dir), "{dir}");
    }
}

#[test]
fn png_has_the_signature_and_one_row_per_run() {
    let tmp = tempfile::tempdir().unwrap();
    for dir in [CLEAN, INJECTED] {
        let out = tmp.path().join("one.PNG");
        plot(&[dir], &out);
        let bytes = std::fs::read(&out).unwrap();
        assert_eq!(png_size(&bytes), (1400, 560));
    }
    // A group directory: both runs, stacked.
    let out = tmp.path().join("group.png");
    plot(&["tests/fixtures/results"], &out);
    assert_eq!(png_size(&std::fs::read(&out).unwrap()), (1400, 1120));
}

fn usage_error(args: &[&str]) -> String {
    let o = run(args);
    assert_eq!(o.status.code(), Some(2), "{args:?}");
    let err = String::from_utf8_lossy(&o.stderr).trim_end().to_string();
    assert_eq!(err.lines().count(), 1, "{err}");
    err
}

#[test]
fn a_bad_extension_is_a_usage_error_naming_o() {
    let tmp = tempfile::tempdir().unwrap();
    for name in ["plot.jpg", "plot"] {
        let out = tmp.path().join(name);
        let err = usage_error(&["plot", INJECTED, "-o", out.to_str().unwrap()]);
        assert!(
            err.contains("-o") && err.contains("FILE.svg") && err.contains("FILE.png"),
            "{err}"
        );
        assert!(!out.exists());
    }
    usage_error(&["plot", INJECTED]);
}

#[test]
fn a_missing_directory_is_a_usage_error() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("x.svg");
    let err = usage_error(&[
        "plot",
        "/nonexistent/pmustress",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(err.contains("/nonexistent/pmustress"), "{err}");
    assert!(!out.exists());
}

#[test]
fn an_unwritable_output_is_a_usage_error() {
    let err = usage_error(&["plot", INJECTED, "-o", "/nonexistent/dir/x.png"]);
    assert!(err.contains("-o /nonexistent/dir/x.png"), "{err}");
}
