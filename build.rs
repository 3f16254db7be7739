//! Records the git commit the binary is built from, for `pmustress env`.
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !s.is_empty()).then_some(s)
}

fn main() {
    let commit = match git(&["rev-parse", "HEAD"]) {
        Some(head) => match git(&["status", "--porcelain", "--untracked-files=no"]) {
            Some(_) => format!("{head}-dirty"),
            None => head,
        },
        None => "unknown".to_string(),
    };
    println!("cargo:rustc-env=PMUSTRESS_GIT_COMMIT={commit}");
    // Rebuild when HEAD moves or the index changes (commit, checkout, add).
    for path in ["HEAD", "index"] {
        if let Some(p) = git(&["rev-parse", "--git-path", path]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(p) = git(&["rev-parse", "--git-path", &r])
    {
        println!("cargo:rerun-if-changed={p}");
    }
    println!("cargo:rerun-if-changed=src");
}
