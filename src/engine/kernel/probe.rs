/*!
What the fitness probes (`check`) ask of the PMU: count or sample a loop
of known length on the calling thread, user mode only.

The loop is a few instructions of inline assembly whose retired
conditional branches are exactly its iteration count (x86_64: `dec; jnz`,
aarch64: `subs; b.ne`), so a counter of conditional branches has a known
answer; the code around it (the ioctls' user-mode wrappers) adds a small
count that is the same every time. `ProbeKernel` is the seam: `Real`
makes the system calls here, and the test kit's fake PMU
(`testkit::fake_pmu`) behaves as faulty PMUs are described to.
*/

use std::io;
use std::os::fd::AsFd;
use std::path::PathBuf;

use perf_event_open_sys as sys;
use sys::bindings::perf_event_attr;

use super::{
    EventAttr, PerfEvent, Real, SampleRing, cvt, disable_fd, enable_fd, open, read_count_fd,
    reset_fd,
};
use crate::engine::sample_ring::{self, RingIds, RingState};
use crate::records::Observation;

/// One event a probe opens: perf's type and config, counting user mode
/// only (what rr and a self-profiling runtime count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeEvent {
    pub type_: u32,
    pub config: u64,
}

impl ProbeEvent {
    pub const CYCLES: ProbeEvent = ProbeEvent {
        type_: sys::bindings::PERF_TYPE_HARDWARE,
        config: sys::bindings::PERF_COUNT_HW_CPU_CYCLES as u64,
    };
    pub const INSTRUCTIONS: ProbeEvent = ProbeEvent {
        type_: sys::bindings::PERF_TYPE_HARDWARE,
        config: sys::bindings::PERF_COUNT_HW_INSTRUCTIONS as u64,
    };
    pub const BRANCHES: ProbeEvent = ProbeEvent {
        type_: sys::bindings::PERF_TYPE_HARDWARE,
        config: sys::bindings::PERF_COUNT_HW_BRANCH_INSTRUCTIONS as u64,
    };

    /// A raw event of the core PMU (perf's `rHEX`).
    pub fn raw(config: u64) -> ProbeEvent {
        ProbeEvent {
            type_: sys::bindings::PERF_TYPE_RAW,
            config,
        }
    }
}

/// What a sampling event's ring held after a measurement.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overflows {
    /// The event's count in the overflow handler, one per sample record
    /// (an interrupt the kernel took), in order.
    pub counts: Vec<u64>,
    /// THROTTLE records: the kernel stopped the event for its rate.
    pub throttles: u64,
    /// Records the ring had no room for.
    pub lost: u64,
}

/// A sampling measurement: the count at the DISABLE and the overflows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sampled {
    /// None when the event was in error state.
    pub count: Option<u64>,
    pub overflows: Overflows,
}

/// The PMU as the probes use it, on the calling thread.
pub trait ProbeKernel {
    /// An open event (with its ring when it samples).
    type Counter;

    /// A counting event, disabled; `pinned` makes one the PMU cannot give
    /// a counter read as error state instead of being multiplexed.
    fn open_counter(&self, event: ProbeEvent, pinned: bool) -> io::Result<Self::Counter>;
    /// A sampling event with `period`, disabled, writing a sample record
    /// with its count at every overflow it handles.
    fn open_sampler(&self, event: ProbeEvent, period: u64) -> io::Result<Self::Counter>;
    /// RESET and ENABLE every counter, the loop of `branches` conditional
    /// branches, DISABLE every counter, then each one's count (None: error
    /// state).
    fn count(&self, counters: &[Self::Counter], branches: u64) -> io::Result<Vec<Option<u64>>>;
    /// RESET and ENABLE the counter, `adds` lock-prefixed adds (x86; none
    /// elsewhere), DISABLE; the count.
    fn count_locked_adds(&self, counter: &Self::Counter, adds: u64) -> io::Result<Option<u64>>;
    /// ENABLE the sampler, PERF_EVENT_IOC_PERIOD to `new_period` when
    /// given, the loop of `branches`, DISABLE; the count and what its ring
    /// recorded since it was opened.
    fn sample(
        &self,
        sampler: &mut Self::Counter,
        new_period: Option<u64>,
        branches: u64,
    ) -> io::Result<Sampled>;
    /// The root the machine's fingerprint is read from.
    fn machine_root(&self) -> PathBuf;
}

/// `Real`'s open event: the fd, and the ring a sampler writes.
pub struct RealCounter {
    event: PerfEvent,
    ring: Option<(SampleRing, RingIds, RingState)>,
}

/// Pages of records a sampler's ring holds: 64 KiB, some 1,300 samples of
/// this layout, so a probe's overflows all fit between drains.
const SAMPLER_PAGES: usize = 16;

impl ProbeKernel for Real {
    type Counter = RealCounter;

    fn open_counter(&self, event: ProbeEvent, pinned: bool) -> io::Result<RealCounter> {
        let mut attr = perf_event_attr {
            type_: event.type_,
            config: event.config,
            ..Default::default()
        };
        attr.set_disabled(1);
        attr.set_exclude_kernel(1);
        attr.set_exclude_hv(1);
        attr.set_pinned(pinned as u64);
        Ok(RealCounter {
            event: PerfEvent {
                fd: open(&mut attr, None)?,
            },
            ring: None,
        })
    }

    fn open_sampler(&self, event: ProbeEvent, period: u64) -> io::Result<RealCounter> {
        let event = PerfEvent::open_on_self(&EventAttr {
            type_: event.type_,
            config: event.config,
            sample_period: period.max(1),
            exclude_kernel: true,
            sample_records: true,
            context_switch: false,
        })?;
        let ring = SampleRing::map(&event, SAMPLER_PAGES)?;
        let ids = RingIds {
            event: event.id()?,
            witness: None,
            resume: None,
        };
        let state = RingState::new(ring.data_size());
        Ok(RealCounter {
            event,
            ring: Some((ring, ids, state)),
        })
    }

    fn count(&self, counters: &[RealCounter], branches: u64) -> io::Result<Vec<Option<u64>>> {
        for c in counters {
            reset_fd(c.event.as_fd())?;
        }
        for c in counters {
            enable_fd(c.event.as_fd())?;
        }
        branch_loop(branches);
        for c in counters {
            disable_fd(c.event.as_fd())?;
        }
        counters
            .iter()
            .map(|c| read_count_fd(c.event.as_fd()))
            .collect()
    }

    fn count_locked_adds(&self, counter: &RealCounter, adds: u64) -> io::Result<Option<u64>> {
        let fd = counter.event.as_fd();
        reset_fd(fd)?;
        enable_fd(fd)?;
        locked_adds(adds);
        disable_fd(fd)?;
        read_count_fd(fd)
    }

    fn sample(
        &self,
        sampler: &mut RealCounter,
        new_period: Option<u64>,
        branches: u64,
    ) -> io::Result<Sampled> {
        let fd = sampler.event.as_fd();
        enable_fd(fd)?;
        let period = new_period.map(|p| set_period(&sampler.event, p));
        branch_loop(branches);
        disable_fd(fd)?;
        period.transpose()?;
        let count = read_count_fd(fd)?;
        let mut overflows = Overflows::default();
        if let Some((ring, ids, state)) = &mut sampler.ring {
            let mut bytes = Vec::new();
            ring.drain(&mut bytes);
            let mut observations = Vec::new();
            sample_ring::parse(&bytes, ids, state, &mut observations);
            for o in observations {
                match o {
                    Observation::Sample { count, .. } => overflows.counts.push(count),
                    Observation::Throttle { .. } => overflows.throttles += 1,
                    Observation::Lost { lost, .. } => overflows.lost += lost,
                    _ => {}
                }
            }
        }
        Ok(Sampled { count, overflows })
    }

    fn machine_root(&self) -> PathBuf {
        PathBuf::from("/")
    }
}

/// PERF_EVENT_IOC_PERIOD: the event's new sample period.
fn set_period(event: &PerfEvent, period: u64) -> io::Result<()> {
    let mut p = period;
    // SAFETY: PERIOD reads one u64 through a pointer that lives across the
    // call; the fd is open while `event` is borrowed.
    cvt(unsafe {
        libc::ioctl(
            event.raw_fd(),
            sys::bindings::PERIOD as _,
            &mut p as *mut u64,
        )
    } as libc::c_long)
    .map(drop)
}

/// Exactly `n` retired conditional branches (at least one).
#[inline(never)]
fn branch_loop(n: u64) {
    let n = n.max(1);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a register-only countdown loop: no memory, no stack.
    unsafe {
        std::arch::asm!("2:", "dec {n}", "jnz 2b", n = inout(reg) n => _, options(nomem, nostack));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: a register-only countdown loop: no memory, no stack.
    unsafe {
        std::arch::asm!("2:", "subs {n}, {n}, #1", "b.ne 2b", n = inout(reg) n => _, options(nomem, nostack));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    for i in 0..n {
        std::hint::black_box(i);
    }
}

/// `n` lock-prefixed adds to a local (x86_64; nothing elsewhere).
#[inline(never)]
fn locked_adds(n: u64) {
    #[cfg(target_arch = "x86_64")]
    {
        let mut word = 0u64;
        for _ in 0..n {
            // SAFETY: a locked add to a local the asm borrows mutably.
            unsafe {
                std::arch::asm!("lock add qword ptr [{p}], 1", p = in(reg) &mut word, options(nostack));
            }
        }
        std::hint::black_box(word);
    }
    #[cfg(not(target_arch = "x86_64"))]
    std::hint::black_box(n);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The software clock stands in for a PMU on machines without one:
    /// the real calls count, sample and change the period.
    #[test]
    fn the_real_calls_work_on_a_software_event() {
        let clock = ProbeEvent {
            type_: sys::bindings::PERF_TYPE_SOFTWARE,
            config: sys::bindings::PERF_COUNT_SW_TASK_CLOCK as u64,
        };
        let counters = [Real.open_counter(clock, false).unwrap()];
        let counts = Real.count(&counters, 50_000_000).unwrap();
        assert!(counts[0].is_some_and(|ns| ns > 0), "{counts:?}");
        // A period of an hour of CPU time, changed to 100 us at ENABLE:
        // overflows come only if the new period took effect.
        let mut sampler = Real.open_sampler(clock, 3_600_000_000_000).unwrap();
        let sampled = Real
            .sample(&mut sampler, Some(100_000), 200_000_000)
            .unwrap();
        let ns = sampled.count.unwrap();
        assert!(ns > 1_000_000, "{sampled:?}");
        assert!(!sampled.overflows.counts.is_empty(), "{sampled:?}");
        assert!(
            sampled.overflows.counts.windows(2).all(|w| w[0] < w[1]),
            "{sampled:?}"
        );
        assert!(sampled.overflows.counts.iter().all(|&c| c <= ns));
    }
}
