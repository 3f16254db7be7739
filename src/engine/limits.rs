/*!
What a run of N workers needs of this process's limits, checked before any
worker starts (`check_live`): the realtime signal queue, file descriptors
and memory. A run that would fail at a limit part-way, with run.json
incomplete, is refused with the numbers and what fits.

Every overflow queues one realtime signal to its worker. The kernel counts
it against RLIMIT_SIGPENDING (`ulimit -i`) together with every signal queued
for any process of the same user: /proc/self/status shows both as
`SigQ: queued/limit`. When the queue is full the kernel sends plain SIGIO
instead; the run survives that and judges those windows
`signal-queue-overflow`, never dropped, but a worker that cannot queue a
single signal measures nothing, and a tight queue turns a run into mostly
SIGIO.

The descriptors the workers need are checked against RLIMIT_NOFILE (raised
to its hard limit first), and the memory they make resident against
MemAvailable, where the kernel's OOM killer would end the run.
*/

use crate::engine::kernel::{mem_available, process::raise_fd_limit};
use crate::engine::run::resident_bytes_per_worker;
use crate::engine::signal::{MAX_FD, MAX_WORKERS};
use crate::fingerprint::{SigQ, parse_sigq, status_field};

/// Realtime signals one worker may have queued at once in the worst case
/// we plan for. A worker takes its signal on the next return to user mode,
/// and its handler blocks the signal for a few microseconds, so in a healthy
/// run at most one or two wait; this leaves room for a worker that is
/// preempted, migrated or in the kernel for several periods. A worker that
/// stops taking signals altogether fills any queue: that is the watchdog's
/// job, not this check's.
pub const WORST_CASE_PER_WORKER: u64 = 16;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    Ok,
    /// Room for every worker, but not for the worst case: say so.
    Warn(String),
    /// Not even one signal per worker: do not measure (exit 125).
    Refuse(String),
}

/// Judges the queue for `workers` from SigQ (the user's queued signals and
/// this process's RLIMIT_SIGPENDING).
pub fn check(sigq: SigQ, workers: usize) -> Check {
    let workers = workers as u64;
    let free = sigq.limit.saturating_sub(sigq.queued);
    let worst = workers.saturating_mul(WORST_CASE_PER_WORKER);
    let raise = sigq.queued.saturating_add(worst);
    let numbers = format!(
        "RLIMIT_SIGPENDING (ulimit -i) is {} and this user has {} signals queued already, leaving room for {free}",
        sigq.limit, sigq.queued
    );
    if free < workers {
        let fewer = if free > 0 {
            format!(" or use --workers {free}")
        } else {
            String::new()
        };
        Check::Refuse(format!(
            "the realtime signal queue is too small: {numbers}, and each of the {workers} workers needs at least one; raise it (ulimit -i {raise}){fewer}"
        ))
    } else if free < worst {
        Check::Warn(format!(
            "the realtime signal queue is tight: {numbers}, less than {worst} for {workers} workers x {WORST_CASE_PER_WORKER} in the worst case; expect plain-SIGIO fallbacks (judged signal-queue-overflow, not drops); raise it with ulimit -i {raise}"
        ))
    } else {
        Check::Ok
    }
}

/// Every limit for this process and `workers`: descriptors (RLIMIT_NOFILE
/// raised as far as the run needs first), memory, then the signal queue
/// (from /proc/self/status; `Ok` when SigQ cannot be read: the kernel will
/// still fall back to SIGIO, which is handled).
pub fn check_live(workers: usize) -> Check {
    let refusal = raise_fd_limit(fds_needed(workers))
        .and_then(|(soft, _)| fd_refusal(soft, workers))
        .or_else(|| mem_available().and_then(|available| memory_refusal(available, workers)));
    if let Some(why) = refusal {
        return Check::Refuse(why);
    }
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| status_field(&s, "SigQ").and_then(parse_sigq))
        .map_or(Check::Ok, |q| check(q, workers))
}

/// File descriptors one worker holds: its overflow event, the stop
/// witness's events (the context-switch counter and its pair) and its
/// histogram log. Measured: 64 workers held 264 descriptors, 12 of 4
/// workers' were perf events.
pub const FDS_PER_WORKER: u64 = 4;
/// Descriptors a run holds besides its workers' (standard streams, the
/// results directory and its files, the migrator), with room to spare.
pub const FDS_BESIDE_WORKERS: u64 = 32;

/// Descriptors a run of `workers` needs.
pub const fn fds_needed(workers: usize) -> u64 {
    (workers as u64)
        .saturating_mul(FDS_PER_WORKER)
        .saturating_add(FDS_BESIDE_WORKERS)
}
// The signal handler's table, indexed by fd, holds the most workers'.
const _: () = assert!(fds_needed(MAX_WORKERS) <= MAX_FD as u64);

/// Why a run of `workers` cannot start under an RLIMIT_NOFILE of `limit`
/// (already raised as far as its hard limit allows): found before any
/// event is opened, where the run failed at the limit's descriptor after
/// every worker before it had taken its memory (1,024 workers: 3.4 GB,
/// then EMFILE at fd 4096).
pub fn fd_refusal(limit: u64, workers: usize) -> Option<String> {
    let needed = fds_needed(workers);
    (limit < needed).then(|| {
        let fit = limit.saturating_sub(FDS_BESIDE_WORKERS) / FDS_PER_WORKER;
        let fewer = if fit > 0 {
            format!(" or use --workers {fit}")
        } else {
            String::new()
        };
        format!(
            "out of file descriptors: {workers} workers need {needed} and RLIMIT_NOFILE (ulimit -n) allows {limit}, its hard limit included; raise it (ulimit -n {needed}){fewer}"
        )
    })
}

/// Why `workers` cannot start with `available` bytes of memory free
/// (MemAvailable): what they make resident before the run starts does
/// not fit, and how many would. Found before any worker starts, where
/// the kernel's OOM killer would end the run with run.json incomplete.
pub fn memory_refusal(available: u64, workers: usize) -> Option<String> {
    let each = resident_bytes_per_worker();
    let needed = each.saturating_mul(workers as u64);
    (needed > available).then(|| {
        let fit = available / each;
        let fewer = if fit > 0 {
            format!(": use --workers {fit} or fewer")
        } else {
            String::new()
        };
        format!(
            "out of memory: {workers} workers make {} MiB resident before the run starts ({} KiB each: their signal and move rings and queues) and MemAvailable is {} MiB{fewer}",
            needed >> 20,
            each >> 10,
            available >> 20
        )
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_descriptor_limit_below_the_workers_need_is_refused_with_what_fits() {
        assert_eq!(super::fd_refusal(1_000_000, 1024), None);
        assert_eq!(super::fd_refusal(4128, 1024), None);
        let why = super::fd_refusal(4096, 1024).unwrap();
        assert!(why.contains("1024 workers need 4128"), "{why}");
        assert!(why.contains("--workers 1016"), "{why}");
        let why = super::fd_refusal(10, 1).unwrap();
        assert!(!why.contains("--workers"), "{why}");
    }

    /// Workers whose rings and queues cannot be made resident are refused
    /// before any starts, with how many fit; a run that fits is not.
    #[test]
    fn workers_that_cannot_be_resident_are_refused_with_what_fits() {
        let each = resident_bytes_per_worker();
        // The signal ring (512 KiB) and the move ring (1.5 MiB) alone.
        assert!(each > 2 << 20, "{each}");
        assert_eq!(memory_refusal(1024 * each, 1024), None);
        let why = memory_refusal(100 * each + 1, 1024).unwrap();
        assert!(
            why.starts_with("out of memory: 1024 workers make "),
            "{why}"
        );
        assert!(why.ends_with(": use --workers 100 or fewer"), "{why}");
        let why = memory_refusal(each - 1, 1).unwrap();
        assert!(!why.contains("--workers"), "{why}");
    }

    use super::*;

    fn q(queued: u64, limit: u64) -> SigQ {
        SigQ { queued, limit }
    }

    #[test]
    fn room_for_the_worst_case_is_ok() {
        assert_eq!(check(q(0, 96365), 1024), Check::Ok);
        assert_eq!(check(q(3, 3 + 32), 2), Check::Ok);
        // RLIM_INFINITY as SigQ prints it.
        assert_eq!(check(q(5, u64::MAX), 1024), Check::Ok);
    }

    #[test]
    fn room_for_each_worker_but_not_the_worst_case_warns_with_the_numbers() {
        let Check::Warn(m) = check(q(10, 41), 2) else {
            panic!("expected a warning")
        };
        assert_eq!(
            m,
            "the realtime signal queue is tight: RLIMIT_SIGPENDING (ulimit -i) is 41 and this user has 10 signals queued already, leaving room for 31, less than 32 for 2 workers x 16 in the worst case; expect plain-SIGIO fallbacks (judged signal-queue-overflow, not drops); raise it with ulimit -i 42"
        );
        assert!(matches!(check(q(0, 2), 2), Check::Warn(_)));
    }

    #[test]
    fn less_than_one_signal_per_worker_refuses() {
        let Check::Refuse(m) = check(q(0, 1), 2) else {
            panic!("expected a refusal")
        };
        assert!(m.contains("ulimit -i) is 1 "), "{m}");
        assert!(m.contains("leaving room for 1,"), "{m}");
        assert!(
            m.ends_with("raise it (ulimit -i 32) or use --workers 1"),
            "{m}"
        );
        // More queued than the limit (the limit was lowered under us).
        let Check::Refuse(m) = check(q(90, 50), 1) else {
            panic!("expected a refusal")
        };
        assert!(m.contains("leaving room for 0,"), "{m}");
        assert!(!m.contains("--workers"), "{m}");
    }

    #[test]
    fn this_process_can_be_checked() {
        // Whatever this machine's limit, a single worker fits unless the
        // queue is exhausted; the point is that SigQ is read and parsed.
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        assert!(status_field(&status, "SigQ").and_then(parse_sigq).is_some());
    }
}
