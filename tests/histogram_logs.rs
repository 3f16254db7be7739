//! Readers bound what a histogram log's header claims before allocating
//! it: a `hist-worker*.hlog` whose interval claims a 2^31-1 byte payload
//! made `report`, `compare` and `plot` allocate 2 GiB, and under a memory
//! limit say "out of memory" without naming the file.

use std::os::unix::process::CommandExt as _;

use base64::Engine as _;

const RECORDED: &str = "tests/fixtures/results/task-clock-clean";

/// One interval line of `log`, its encoded histogram's length field set
/// to 2^31-1.
fn forged(log: &str) -> String {
    let mut out = String::new();
    for line in log.lines() {
        if let Some((head, encoded)) = line.rsplit_once(',')
            && line.starts_with("Tag=")
        {
            let engine = base64::engine::general_purpose::STANDARD;
            let mut raw = engine.decode(encoded).unwrap();
            raw[4..8].copy_from_slice(&0x7fff_ffffu32.to_be_bytes());
            out.push_str(&format!("{head},{}\n", engine.encode(raw)));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[test]
fn a_log_claiming_2_gib_is_refused_by_name_without_allocating_it() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    crate::util::copy_run(RECORDED, &run, |_| {});
    let log = run.join("hist-worker1.hlog");
    std::fs::write(&log, forged(&std::fs::read_to_string(&log).unwrap())).unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_pmustress"));
    cmd.args(["report"]).arg(&run);
    // SAFETY: setrlimit is async-signal-safe, as pre_exec requires. 1 GiB
    // of address space: the claim cannot be allocated under it.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 1 << 30,
                rlim_max: 1 << 30,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let o = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("hist-worker1.hlog") && stderr.contains("2147483647"),
        "{stderr}"
    );
    assert!(!stderr.contains("out of memory"), "{stderr}");
    assert_ne!(o.status.code(), Some(0), "{stderr}");
}
