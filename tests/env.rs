//! `pmustress env` on this very machine, and its embedding in every run.

use crate::util::{has_core_pmu, read_json, run, shared_machine, stdout_of};

#[test]
fn env_json_has_schema_and_a_pseudo_nmi_verdict_with_evidence() {
    let out = run(&["env", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("env --json is JSON");
    assert_eq!(v["schema_version"], 1);
    let verdict = v["pseudo_nmi"]["verdict"].as_str().unwrap();
    let expected = match std::env::consts::ARCH {
        "x86_64" => "not-applicable",
        _ => verdict,
    };
    assert_eq!(verdict, expected);
    assert!(!v["pseudo_nmi"]["evidence"].as_array().unwrap().is_empty());
}

#[test]
fn env_text_starts_with_the_verdict_and_says_when_there_is_no_pmu() {
    let out = run(&["env"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("pseudo-NMI: "), "{text}");
    if !has_core_pmu() {
        assert!(text.contains("no hardware PMU"), "{text}");
    }
}

#[test]
fn every_run_prints_the_verdict_first_and_embeds_the_fingerprint() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("r");
    let _machine = shared_machine();
    let out = run(&[
        "run",
        "--event",
        "cpu-clock",
        // Migrated: a clean verdict needs 299 witnessed stops too
        // (a move every 500 us stops the running worker: ~2 per ms).
        "--migrate-interval",
        "500us",
        "--workers",
        "1",
        "--interrupts",
        "400",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.starts_with("pseudo-NMI: "), "{stdout}");
    let r = read_json(&out_dir);
    assert_eq!(r["fingerprint"]["schema_version"], 1);
    assert_eq!(r["pseudo_nmi"], r["fingerprint"]["pseudo_nmi"]);
    assert_eq!(r["stop_reason"], "interrupts");
    assert!(r["workers"][0]["signals"].as_u64().unwrap() >= 50);
}

#[test]
fn env_reads_another_root() {
    let cases = [
        ("graviton3-c7g-nmi-enabled", "enabled"),
        ("graviton2-c6g-6.1-disabled", "disabled"),
        ("debian-6.1-arm64-param-not-built", "not-built"),
    ];
    for (fixture, verdict) in cases {
        let root = format!("tests/fixtures/fingerprint/{fixture}");
        let out = run(&["env", "--json", "--root", &root]);
        assert_eq!(out.status.code(), Some(0));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["pseudo_nmi"]["verdict"], verdict, "{fixture}");
    }
    let out = run(&["env", "--root", "/nonexistent"]);
    assert_eq!(out.status.code(), Some(2));
}

/// `--version` names the commit, as `env` does: a fleet's binaries (and a
/// bug report's) say which tree they were built from.
#[test]
fn version_carries_the_commit_env_reports() {
    let version = stdout_of(&["--version"]);
    let env: serde_json::Value = serde_json::from_str(&stdout_of(&["env", "--json"])).unwrap();
    let commit = env["tool"]["commit"].as_str().unwrap();
    assert_eq!(
        version,
        format!(
            "pmustress {} (commit {commit})\n",
            env!("CARGO_PKG_VERSION")
        )
    );
    // A built checkout names its HEAD (and "-dirty" with uncommitted
    // changes); only a tree without git says "unknown".
    let head = std::process::Command::new("git")
        .args(["-C", env!("CARGO_MANIFEST_DIR"), "rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8(o.stdout).unwrap().trim().to_string());
    match head {
        Some(head) => {
            assert_eq!(head.len(), 40, "{head}");
            assert!(
                commit == head || commit == format!("{head}-dirty"),
                "{commit} vs HEAD {head}"
            );
        }
        None => assert_eq!(commit, "unknown"),
    }
}
