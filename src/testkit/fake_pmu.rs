/*!
A PMU for the fitness probes' tests: it counts the known loop as a
healthy core would (one conditional branch and two instructions an
iteration, three cycles, and a fixed few of each for the ioctls around
it) and takes each overflow interrupt at its due point, unless told to
behave as one of the faulty PMUs rr and users have met (`Fault`).

Its counters follow the driver's re-arm rules: the first overflow is due a
period after the open, the next a period after each due point;
PERF_EVENT_IOC_PERIOD restarts the period from the count at the ioctl.

With the test kit compiled in, `PMUSTRESS_TESTKIT_PMU` names a JSON
`FakePmu` (the faults and the fixture machine), and `pmustress check`
probes it instead of the machine's PMU.
*/

use std::cell::Cell;
use std::io;
use std::path::PathBuf;

use perf_event_open_sys::bindings as sys;
use serde::{Deserialize, Serialize};

use crate::engine::kernel::probe::{Overflows, ProbeEvent, ProbeKernel, Sampled};

/// The environment variable naming a `FakePmu` JSON file.
pub const PMU_ENV: &str = "PMUSTRESS_TESTKIT_PMU";

/// Branches the ioctls around the loop add to a count.
pub const OVERHEAD_BRANCHES: u64 = 7;

/// What is wrong with the PMU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// No hardware PMU: hardware and raw events do not open (ENOENT).
    NoPmu,
    /// perf_event_paranoid forbids it: every open is EACCES.
    Denied,
    /// Every hardware counter reads 0 (a virtual PMU that exposes events
    /// it does not count).
    ReadsZero,
    /// Raw events open but read 0 (QEMU's PMU has no branch event).
    RawReadsZero,
    /// One counter: a second pinned event is in error state.
    OneCounter,
    /// Each count is off by 0, 1 or 2, in turn.
    Nondeterministic,
    /// IOC_PERIOD takes effect only after the next overflow.
    PeriodAtNextOverflow,
    /// Each interrupt adds this many events to the count.
    OvercountAtPmi(u64),
    /// Each interrupt comes this many events past its due point.
    Skid(u64),
    /// Every this-many-th overflow raises no interrupt.
    LoseEvery(u64),
    /// IN_TXCP counts half the branches (KVM's bug).
    InTxcp,
    /// SpecLockMapCommit counts locked instructions (SpecLockMap on).
    SpecLockMap,
}

/// The fake PMU: its faults and the machine it pretends to be on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FakePmu {
    /// The fingerprint root (a fixture tree).
    pub root: PathBuf,
    pub faults: Vec<Fault>,
    /// Counters measured so far, for `Nondeterministic`.
    #[serde(skip)]
    measured: Cell<u64>,
}

/// One open fake event.
pub struct FakeCounter {
    event: ProbeEvent,
    pinned: bool,
    count: u64,
    period: u64,
    next_due: u64,
    /// An IOC_PERIOD waiting for the next overflow.
    pending_period: Option<u64>,
    overflows: Overflows,
    /// Overflows so far, for `LoseEvery`.
    overflowed: u64,
    /// Events interrupts added to the count (`OvercountAtPmi`): the
    /// driver re-arms from the hardware counter, which never saw them.
    added: u64,
}

impl FakePmu {
    pub fn new(root: impl Into<PathBuf>, faults: &[Fault]) -> FakePmu {
        FakePmu {
            root: root.into(),
            faults: faults.to_vec(),
            measured: Cell::new(0),
        }
    }

    /// The PMU `PMU_ENV` names, if it names one; a file that is not one
    /// is a test's mistake.
    pub fn from_env() -> Option<FakePmu> {
        let path = std::env::var_os(PMU_ENV)?;
        let text = std::fs::read_to_string(&path).expect("PMUSTRESS_TESTKIT_PMU file");
        Some(serde_json::from_str(&text).expect("PMUSTRESS_TESTKIT_PMU holds a FakePmu"))
    }

    fn has(&self, fault: Fault) -> bool {
        self.faults.contains(&fault)
    }

    /// The number a fault with one carries, if the PMU has that fault.
    fn amount(&self, of: fn(&Fault) -> Option<u64>) -> Option<u64> {
        self.faults.iter().find_map(of)
    }

    fn skid(&self) -> u64 {
        self.amount(|f| match f {
            Fault::Skid(n) => Some(*n),
            _ => None,
        })
        .unwrap_or(0)
    }

    fn overcount(&self) -> u64 {
        self.amount(|f| match f {
            Fault::OvercountAtPmi(n) => Some(*n),
            _ => None,
        })
        .unwrap_or(0)
    }

    fn lose_every(&self) -> Option<u64> {
        self.amount(|f| match f {
            Fault::LoseEvery(n) => Some(*n),
            _ => None,
        })
    }

    /// What `event` counts over the loop of `branches` and the ioctls.
    fn events(&self, event: ProbeEvent, branches: u64) -> u64 {
        let hardware = event.type_ == sys::PERF_TYPE_HARDWARE;
        let raw = event.type_ == sys::PERF_TYPE_RAW;
        if self.has(Fault::ReadsZero) || (raw && self.has(Fault::RawReadsZero)) {
            return 0;
        }
        let b = branches + OVERHEAD_BRANCHES;
        let n = if hardware && event.config == sys::PERF_COUNT_HW_INSTRUCTIONS as u64 {
            2 * b
        } else if hardware && event.config == sys::PERF_COUNT_HW_CPU_CYCLES as u64 {
            3 * b
        } else if raw && event.config & (1 << 33) != 0 && self.has(Fault::InTxcp) {
            b / 2
        } else if raw && event.config == 0x510825 {
            0
        } else {
            b
        };
        let turn = self.measured.get();
        self.measured.set(turn + 1);
        if self.has(Fault::Nondeterministic) {
            n + turn % 3
        } else {
            n
        }
    }

    fn open(&self, event: ProbeEvent, pinned: bool, period: u64) -> io::Result<FakeCounter> {
        if self.has(Fault::Denied) {
            return Err(io::Error::from_raw_os_error(libc::EACCES));
        }
        let hardware = matches!(event.type_, sys::PERF_TYPE_HARDWARE | sys::PERF_TYPE_RAW);
        if hardware && self.has(Fault::NoPmu) {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        }
        Ok(FakeCounter {
            event,
            pinned,
            count: 0,
            period,
            next_due: period,
            pending_period: None,
            overflows: Overflows::default(),
            overflowed: 0,
            added: 0,
        })
    }

    /// The counter runs `events` more events, interrupting `skid` past
    /// each due point it passes. Due points are on the hardware counter's
    /// axis (the driver re-arms from it), so events an interrupt adds to
    /// the count (`OvercountAtPmi`) move the count off the grid.
    fn advance(&self, c: &mut FakeCounter, events: u64) {
        let end = c.count + events;
        while c.period > 0 && c.next_due + self.skid() <= end {
            let due = c.next_due;
            c.overflowed += 1;
            let lost = self
                .lose_every()
                .is_some_and(|n| c.overflowed.is_multiple_of(n));
            if !lost {
                c.added += self.overcount();
                c.overflows.counts.push(due + self.skid() + c.added);
            }
            if let Some(p) = c.pending_period.take() {
                c.period = p;
            }
            c.next_due = due + c.period;
        }
        c.count = end;
    }
}

impl ProbeKernel for FakePmu {
    type Counter = FakeCounter;

    fn open_counter(&self, event: ProbeEvent, pinned: bool) -> io::Result<FakeCounter> {
        self.open(event, pinned, 0)
    }

    fn open_sampler(&self, event: ProbeEvent, period: u64) -> io::Result<FakeCounter> {
        self.open(event, false, period)
    }

    fn count(&self, counters: &[FakeCounter], branches: u64) -> io::Result<Vec<Option<u64>>> {
        // With one counter, the pinned events after the first get none.
        let mut pinned = 0;
        Ok(counters
            .iter()
            .map(|c| {
                pinned += c.pinned as u64;
                let scheduled = !(c.pinned && pinned > 1 && self.has(Fault::OneCounter));
                scheduled.then(|| self.events(c.event, branches))
            })
            .collect())
    }

    fn count_locked_adds(&self, counter: &FakeCounter, adds: u64) -> io::Result<Option<u64>> {
        let speclock = counter.event.type_ == sys::PERF_TYPE_RAW
            && counter.event.config == 0x510825
            && self.has(Fault::SpecLockMap);
        Ok(Some(if speclock { adds } else { 0 }))
    }

    fn sample(
        &self,
        sampler: &mut FakeCounter,
        new_period: Option<u64>,
        branches: u64,
    ) -> io::Result<Sampled> {
        let events = self.events(sampler.event, branches);
        // The ENABLE's return and the IOC_PERIOD's entry count a few.
        let before = events.min(OVERHEAD_BRANCHES / 2);
        self.advance(sampler, before);
        if let Some(p) = new_period {
            if self.has(Fault::PeriodAtNextOverflow) {
                sampler.pending_period = Some(p);
            } else {
                sampler.period = p;
                sampler.next_due = sampler.count + p;
            }
        }
        self.advance(sampler, events - before);
        Ok(Sampled {
            count: Some(sampler.count + sampler.added),
            overflows: std::mem::take(&mut sampler.overflows),
        })
    }

    fn machine_root(&self) -> PathBuf {
        self.root.clone()
    }
}
