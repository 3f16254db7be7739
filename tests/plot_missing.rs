//! `pmustress plot` in a build without the `plot` feature (`cargo test
//! --no-default-features`; CI runs the default features, where plot.rs
//! runs instead): whatever follows, one usage-error line naming the
//! feature, exit 2, nothing written.

use crate::util::run;

const INJECTED: &str = "tests/fixtures/results/task-clock-injected";

#[test]
fn plot_is_refused_with_one_line_naming_the_feature() {
    let tmp = tempfile::tempdir().unwrap();
    let svg = tmp.path().join("run.svg");
    let svg = svg.to_str().unwrap();
    for argv in [
        &["plot"][..],
        &["plot", INJECTED, "-o", svg],
        &["plot", "/nonexistent", "-o", "x.jpg"],
        &["plot", "--help"],
    ] {
        let out = run(argv);
        assert_eq!(out.status.code(), Some(2), "{argv:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            err.trim_end(),
            "error: this pmustress was built without plotting (cargo feature \"plot\"); rebuild with default features",
            "{argv:?}"
        );
        assert!(out.stdout.is_empty(), "{argv:?}");
    }
    assert!(std::fs::read_dir(tmp.path()).unwrap().next().is_none());
}

#[test]
fn help_still_lists_plot_and_says_it_is_not_in_this_build() {
    let out = run(&["--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    let line = help
        .lines()
        .find(|l| l.trim_start().starts_with("plot "))
        .unwrap_or_else(|| panic!("no plot in --help:\n{help}"));
    assert!(line.contains("Not in this build"), "{line}");
}
