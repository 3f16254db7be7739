/*!
Which driver's rules an explanation follows at a context switch that finds
an overflow pending, and the stops that may find one (`Stop`).

- The stock driver loses it: the stop clears the overflow flag and the
  restart re-arms by the rules, its period consumed silently (every arm64
  kernel to date, `armv8pmu_disable_intens` under `armpmu_stop`).
- A delivering driver keeps it: the stop leaves it due where it was, and
  the restart makes the counter overflow again at once, so its interrupt is
  the first sample after the restart (late, not lost), re-armed by the
  handler's usual rules from the same due point (the candidate fix,
  qemu/patches/fix.patch). Its last stop (the final DISABLE) and a PERIOD
  lose it as the stock driver does.

A stream is one kernel's, so one driver's: the judge follows both families
of explanations from the start and a sample that fits none of a family's
refutes that driver for the rest of the stream. Where both still explain the
records, what they disagree on is ambiguous, as between any explanations.
*/

/// A set of driver behaviours (a bit each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Drivers(u8);

impl Drivers {
    pub(super) const STOCK: Drivers = Drivers(1);
    pub(super) const DELIVERING: Drivers = Drivers(2);
    pub(super) const BOTH: Drivers = Drivers(3);
    const NONE: Drivers = Drivers(0);

    pub(super) fn has(self, d: Drivers) -> bool {
        self.0 & d.0 == d.0
    }

    pub(super) fn union(self, o: Drivers) -> Drivers {
        Drivers(self.0 | o.0)
    }

    /// The union of `sets` (none for no sets).
    pub(super) fn of(sets: impl IntoIterator<Item = Drivers>) -> Drivers {
        sets.into_iter().fold(Drivers::NONE, Drivers::union)
    }

    pub(super) fn is_empty(self) -> bool {
        self.0 == 0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StopKind {
    /// A context switch: an NMI may still take the pending interrupt before
    /// the stop clears it.
    Switch,
    /// PERF_EVENT_IOC_PERIOD in reset mode.
    Period,
    /// The final DISABLE.
    Final,
}

/// A stop whose count is in [lo, hi].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stop {
    pub(super) lo: u64,
    pub(super) hi: u64,
    pub(super) kind: StopKind,
}
