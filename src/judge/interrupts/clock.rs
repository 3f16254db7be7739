/*!
The thread's counted time as the records place it on the clock: what
`count_rate` bounds a time-only stop's count with.
*/

/// Where on the clock the records place the thread's counted time.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Clock {
    /// The last sample's time and count, with `off` there (none before the
    /// first, or after a reset: its count is from another frame).
    pub(super) last_sample: Option<(u64, u64, Off)>,
    /// The first record's time, and the gcd of the times since less it.
    pub(super) first_ns: Option<u64>,
    pub(super) tick_ns: u64,
    /// The last time-only stop since the last sample, with `off` there,
    /// when its lower bound applies (no NMI can take an overflow before
    /// the stop).
    pub(super) stop_since_sample: Option<(u64, Off)>,
    /// A switch-out whose switch-in has not come yet.
    pub(super) switched_out_ns: Option<u64>,
    /// Off the CPU so far, from switch-outs to their switch-ins.
    pub(super) off: Off,
}

/// Time off the CPU since the stream began: its total and how many
/// intervals (each measured to a tick).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Off {
    pub(super) ns: u64,
    pub(super) intervals: u64,
}
