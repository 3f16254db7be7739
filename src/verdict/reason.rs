/*!
Why a verdict is inconclusive: each `Reason` with its numbers, and its
words (`Display`), which run.json holds.
*/

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::words::plural;
use crate::domain::{CONFIDENCE, MIN_EVIDENCE_RATE};

/// Why a verdict is inconclusive.
#[derive(Debug, Clone, PartialEq)]
pub enum Reason {
    /// A worker stopped answering (the engine's words).
    Stalled(String),
    NoSignal,
    NotEnoughOverflows {
        measured: u64,
        needed: u64,
    },
    /// The loss happens at stops: zero drops in too few say nothing.
    NotEnoughStops {
        witnessed: u64,
        needed: u64,
    },
    Ambiguous {
        overflows: u64,
        expected_coincidences: f64,
    },
    Unexplained(u64),
    /// `--max-count-rate` did not hold.
    CountRateExceeded(u64),
    /// The streams of one kernel refuted different drivers' rules, or some
    /// refuted the stock driver's while drops elsewhere rest on them.
    DriversDisagree {
        stock_refuted: u64,
        delivering_refuted: u64,
        dropped_assuming_stock: u64,
    },
    LostRecords(u64),
    UnmatchedSignals(u64),
    WrongThread(u64),
    ReadFailures(u64),
    SignalRingFull(u64),
    GarbledKernelBytes(u64),
    StrayFd(u64),
    StraySigio(u64),
    /// Reset mode: observations judged out of time order.
    Reordered(u64),
    /// A bug of ours: the final count and the judge disagree.
    ImpliedOverflows {
        worker: usize,
        implied: u64,
        accounted: u64,
    },
    OutputFailed(String),
    BisectTooFew {
        measured: u64,
        needed: u64,
    },
    BisectTooFewStops {
        witnessed: u64,
        needed: u64,
    },
    /// Results that could not all be saved (the writer's words).
    Unsaved(String),
    /// Files a failed write left short.
    PartialFiles(Vec<String>),
    /// A self-test whose run was too short to discard any overflow.
    NothingInjected,
    /// Read back from run.json: the words as written.
    AsWritten(String),
}

impl Reason {
    /// Whether the judged stream alone gives it (a replay finds it again).
    pub fn from_stream(&self) -> bool {
        matches!(
            self,
            Reason::NotEnoughOverflows { .. }
                | Reason::NotEnoughStops { .. }
                | Reason::Ambiguous { .. }
                | Reason::Unexplained(_)
                | Reason::CountRateExceeded(_)
                | Reason::DriversDisagree { .. }
                | Reason::LostRecords(_)
                | Reason::UnmatchedSignals(_)
                | Reason::WrongThread(_)
                | Reason::ReadFailures(_)
        )
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Stalled(s) | Reason::Unsaved(s) | Reason::AsWritten(s) => f.write_str(s),
            Reason::NoSignal => f.write_str("no overflow signal was received at all"),
            Reason::NothingInjected => f.write_str(
                "the self-test discarded no overflow: each worker needs --inject-drop-every overflows for one; run longer or lower it",
            ),
            Reason::NotEnoughOverflows { measured, needed } => write!(
                f,
                "not enough overflows: {measured} measured, {needed} needed to bound the dropped rate below {MIN_EVIDENCE_RATE} at {:.0}% confidence; run longer",
                CONFIDENCE * 100.0
            ),
            Reason::NotEnoughStops { witnessed, needed } => write!(
                f,
                "not enough stops: {witnessed} witnessed, {needed} needed to bound the dropped rate per stop below {MIN_EVIDENCE_RATE} at {:.0}% confidence; overflows are lost where the kernel stops a counting thread, so move the workers more (the default --migrate and --migrators), run longer, or witness stops (--switch-witness counts or times)",
                CONFIDENCE * 100.0
            ),
            Reason::Ambiguous {
                overflows,
                expected_coincidences,
            } => write!(
                f,
                "{overflows} {} fit both a lost interrupt and one a period late (chance coincidences expected: {expected_coincidences:.2}); not counted as dropped",
                plural(*overflows, "overflow", "overflows"),
            ),
            Reason::Unexplained(n) => write!(
                f,
                "{n} kernel sample records fit no driver behaviour (see the unexplained anomalies)"
            ),
            Reason::CountRateExceeded(n) => write!(
                f,
                "{n} {} rose faster than --max-count-rate allows: the bound is wrong for this event, and what it decided of time-only stops cannot stand; run without it, or with the event's true bound",
                plural(*n, "count", "counts"),
            ),
            Reason::DriversDisagree {
                stock_refuted,
                delivering_refuted,
                dropped_assuming_stock,
            } => write!(
                f,
                "the workers' records disagree on the driver: the stock driver's rules (an overflow pending at a context switch is lost there) were refuted in {stock_refuted} {}, a delivering driver's in {delivering_refuted}, and {dropped_assuming_stock} {} only the stock driver's rules claim; one kernel has one driver",
                plural(*stock_refuted, "stream", "streams"),
                plural(*dropped_assuming_stock, "drop is one", "drops are ones"),
            ),
            Reason::LostRecords(n) => write!(
                f,
                "{n} kernel records were lost from the sample ring (LOST records)"
            ),
            Reason::UnmatchedSignals(n) => {
                write!(f, "{n} overflow signals had no interrupt of their own")
            }
            Reason::WrongThread(n) => write!(f, "{n} overflow signals landed on the wrong thread"),
            Reason::ReadFailures(n) => write!(f, "{n} counter reads failed in the handler"),
            Reason::SignalRingFull(n) => {
                write!(f, "{n} handler records were lost (signal ring full)")
            }
            Reason::GarbledKernelBytes(n) => {
                write!(f, "{n} bytes of the kernel sample ring could not be parsed")
            }
            Reason::StrayFd(n) => write!(f, "{n} overflow signals carried an unknown fd"),
            Reason::StraySigio(n) => write!(f, "{n} SIGIOs arrived on a non-worker thread"),
            Reason::Reordered(n) => write!(
                f,
                "{n} observations reached the judge out of time order, so resets may be misplaced"
            ),
            Reason::ImpliedOverflows {
                worker,
                implied,
                accounted,
            } => write!(
                f,
                "worker {worker}: the final count implies {implied} overflows but the judge accounted for {accounted} (a bug in pmustress: please report it with raw.csv.gz)"
            ),
            Reason::OutputFailed(e) => write!(
                f,
                "the run stopped early because results could not be written: {e}"
            ),
            Reason::BisectTooFew { measured, needed } => write!(
                f,
                "bisect: only {measured} of the {needed} overflows needed were measured, too few to call this kernel good"
            ),
            Reason::BisectTooFewStops { witnessed, needed } => write!(
                f,
                "bisect: only {witnessed} of the {needed} stops needed were witnessed, too few to call this kernel good"
            ),
            Reason::PartialFiles(files) => write!(
                f,
                "results could not all be written: {} cut back to the last complete line",
                files.join(", ")
            ),
        }
    }
}

as_words!(Reason);
