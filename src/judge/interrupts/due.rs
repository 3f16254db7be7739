/*!
Where the next overflow is due, as the records place it: a count, or a
range of counts where a stop's or a restart's count is known only to a
range.
*/

/// Where the next overflow is due: somewhere in [lo, hi]; exact when
/// lo == hi. `hi == u64::MAX`: the grid moved by an unknown amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Due {
    pub(super) lo: u64,
    pub(super) hi: u64,
}

impl Due {
    pub(super) fn exact(at: u64) -> Due {
        Due { lo: at, hi: at }
    }

    pub(super) fn plus(self, p: u64) -> Due {
        Due {
            lo: self.lo.saturating_add(p),
            hi: self.hi.saturating_add(p),
        }
    }

    pub(super) fn unknown(&self) -> bool {
        self.hi == u64::MAX
    }
}
