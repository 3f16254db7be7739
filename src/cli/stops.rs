//! The signals that stop a measurement (`run`, `check`) and keep what it
//! measured.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::domain::EXIT_CANNOT_TEST;

/// Why a step of a measurement stopped it: the exit status, its reason
/// already said on stderr.
pub(crate) type Stopped = i32;

/// A stop signal and the flag its handler raises.
pub(crate) type Stop = (i32, Arc<AtomicBool>);

/// The first SIGINT, SIGTERM, SIGHUP (the terminal or SSH session went
/// away), SIGQUIT, SIGPIPE (our reader went away), SIGXCPU (the CPU time
/// limit, `ulimit -t`), SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM or SIGPROF
/// (whose default would end the process without a word), or a SIGSEGV or
/// SIGBUS that a process sent (kill: not a fault of ours), stops the run
/// and keeps what was measured: final run.json, verdict, exit 128 + N. A
/// second one of the same kind a second or more after the first exits at
/// once, leaving run.json incomplete; the same one twice within a second
/// (`timeout` signals the child and its process group) is one stop. Not
/// SIGPIPE or SIGXCPU: the kernel raises those again by itself (every
/// later write to a closed pipe, every further second of CPU time). Once
/// the final run.json is written, any of them exits with the status it
/// holds (`engine::stop_signal::install_stop`). A SIGHUP ignored when we start
/// (nohup) stays ignored.
pub(crate) fn install_stops() -> Result<Vec<Stop>, Stopped> {
    let mut stops: Vec<Stop> = Vec::new();
    for sig in STOP_SIGNALS.into_iter().chain(SENT_FAULTS) {
        if sig == libc::SIGHUP && crate::engine::stop_signal::is_ignored(sig) {
            continue;
        }
        let flag = Arc::new(AtomicBool::new(false));
        let repeated_by_the_kernel = matches!(sig, libc::SIGPIPE | libc::SIGXCPU);
        let installed = if SENT_FAULTS.contains(&sig) {
            crate::engine::stop_signal::install_sent_fault_stop(sig, Arc::clone(&flag), true)
        } else {
            crate::engine::stop_signal::install_stop(
                sig,
                Arc::clone(&flag),
                !repeated_by_the_kernel,
            )
            .map(drop)
        };
        if let Err(e) = installed {
            errln!("pmustress: cannot test here: installing the signal handlers failed: {e}");
            return Err(EXIT_CANNOT_TEST);
        }
        stops.push((sig, flag));
    }
    Ok(stops)
}

/// The signals that stop a run and keep what it measured (`install_stops`).
const STOP_SIGNALS: [libc::c_int; 11] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGPIPE,
    libc::SIGXCPU,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGVTALRM,
    libc::SIGPROF,
];

/// Stop signals only when a process sends them: a fault of ours is not
/// a stop (`engine::stop_signal::install_sent_fault_stop`).
const SENT_FAULTS: [libc::c_int; 2] = [libc::SIGSEGV, libc::SIGBUS];

/// The signal that stopped us, if one has.
pub(crate) fn stopped_by(stops: &[Stop]) -> Option<i32> {
    stops
        .iter()
        .find(|(_, flag)| flag.load(Ordering::Relaxed))
        .map(|(sig, _)| *sig)
}
