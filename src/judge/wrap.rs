/*!
Count wraps: the kernel's count of an event jumping by 2^32.

`armpmu_event_update` (arm64, 6.1; x86's update has the same shape) reads
`prev_count`, reads the counter, swaps `prev_count` for the new value with a
cmpxchg, then adds the delta, masked to the counter's 32 bits, to the count
and takes it off `period_left`. With pseudo-NMI the overflow handler can run
between the read and the cmpxchg of a task-context update of the same event
(the switch witness's group read at a context switch, a `read()`). When the
handler re-arms the counter to the very value that update had read as
`prev_count` (the same `-left` as last time), the cmpxchg still succeeds
(ABA): that update counts its delta a second time and leaves `prev_count`
ahead of the counter, so the next update's delta is "negative", masked to
2^32 less a little. The count jumps by 2^32 and `period_left` drops as far,
so the driver's next re-arm (a restart, or the next interrupt) re-bases:
rule 1. No overflow is lost by it. The QEMU oracle counts these updates
(`update_wrapped`, qemu/patches/oracle.patch); seen 3 times in a 1.5 s run of
2 workers on 4 vCPUs with pseudo-NMI, counting kernel mode.

Consecutive records of one event are never 2^31 events apart otherwise: that
many events without a sample or a stop is an interrupt held off for a second
or more. So a count that far above every count before it is a wrap, and from
there on the judge sees the count as it would have been without it (the raw
stream keeps what the kernel wrote). Records written before the wrap but
read after it (the NMI's sample nested in the witness's record) keep their
old base. With a period of 2^28 or more, real gaps can be that large: wraps
are then not looked for.
*/

/// One wrap of a 32-bit counter's count (a 48-bit one wraps by 2^16 of them).
const WRAP: u64 = 1 << 32;

/// Periods from here up give gaps a wrap cannot be told from.
const MAX_PERIOD: u64 = 1 << 28;

/// Takes the wraps out of one event's counts, in stream order.
#[derive(Debug, Clone, Default)]
pub struct Unwrap {
    enabled: bool,
    /// What the wraps so far added to the kernel's count.
    offset: u64,
    /// The highest count seen (unwrapped) since the start or the last reset.
    high: u64,
}

impl Unwrap {
    pub fn new(period: u64) -> Unwrap {
        Unwrap {
            enabled: period < MAX_PERIOD,
            ..Unwrap::default()
        }
    }

    /// RESET zeroed the count: counts start again from 0.
    pub fn reset(&mut self) {
        self.offset = 0;
        self.high = 0;
    }

    /// The count without wraps, and whether this count showed a new one.
    pub fn count(&mut self, raw: u64) -> (u64, bool) {
        if !self.enabled {
            return (raw, false);
        }
        let half = WRAP / 2;
        let mut v = raw.wrapping_sub(self.offset);
        let mut wrapped = false;
        if raw < self.offset || v.saturating_add(half) < self.high {
            // Written before the last wrap: its old base.
            v = raw.wrapping_sub(self.offset.saturating_sub(WRAP));
        } else if v >= self.high.saturating_add(half) {
            // Whole wraps in the jump (one for a 32-bit counter).
            let n = (v - self.high + half) / WRAP;
            self.offset += n * WRAP;
            v -= n * WRAP;
            wrapped = true;
        }
        self.high = self.high.max(v);
        (v, wrapped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jump_of_two_to_the_32_is_taken_out_from_there_on() {
        let mut u = Unwrap::new(50_000);
        assert_eq!(u.count(50_000), (50_000, false));
        assert_eq!(u.count(101_414), (101_414, false));
        // The recorded QEMU case: a witness read, the NMI's sample nested in
        // it, then the next sample 2^32 + 54,052 past that sample.
        assert_eq!(u.count(100_000), (100_000, false));
        assert_eq!(u.count(100_000 + WRAP + 54_052), (154_052, true));
        assert_eq!(u.count(201_143 + WRAP), (201_143, false));
        // A record from before the wrap, read after it.
        assert_eq!(u.count(150_000), (150_000, false));
        assert_eq!(u.count(251_143 + WRAP), (251_143, false));
        // A second wrap.
        assert_eq!(u.count(301_000 + 2 * WRAP), (301_000, true));
    }

    #[test]
    fn a_48_bit_wrap_is_one_wrap() {
        let mut u = Unwrap::new(50_000);
        assert_eq!(u.count(7), (7, false));
        assert_eq!(u.count((1 << 48) + 50_007), (50_007, true));
        assert_eq!(u.count((1 << 48) + 100_007), (100_007, false));
    }

    #[test]
    fn gaps_below_half_a_wrap_are_real() {
        let mut u = Unwrap::new(50_000);
        assert_eq!(u.count(WRAP / 2 - 1), (WRAP / 2 - 1, false));
        // A count far below the highest without an offset to undo: kept.
        assert_eq!(u.count(3), (3, false));
    }

    #[test]
    fn reset_starts_again_and_huge_periods_are_left_alone() {
        let mut u = Unwrap::new(50_000);
        u.count(WRAP + 10);
        u.reset();
        assert_eq!(u.count(40), (40, false));
        let mut big = Unwrap::new(MAX_PERIOD);
        assert_eq!(big.count(WRAP + 10), (WRAP + 10, false));
    }
}
