/*!
The raw observation stream: everything one worker's run showed, in order.

A run produces two streams per worker: the kernel's records from the event's
sample ring (interrupts, stops, throttling, lost records) and our signal
handler's records (one per delivery). The controller merges them by time
(both are CLOCK_MONOTONIC: the samples through `use_clockid`) into one
ordered stream of `Observation`s, holding back the newest few milliseconds so
that a handler still running cannot land behind a later record. That stream
is the single input of the judge, is written as it goes to `raw.csv.gz` in the
results directory, and is what `pmustress replay` reads back: judging is a
pure function of it, so a replay gives exactly the run's totals.

One row per observation: `worker,kind,time_ns,cpu,value,si_code`, where
`value` is the count (sample, stop, final), the read value (signal), the
target CPU (move), the number of records (lost) or the errno (a failed read).

The rows are written and read here (`Display`, `FromStr`), not by the `csv`
crate that writes the other tables: every field is a number or a fixed word,
so there is nothing to quote, and the two ends need what csv's reader and
writer keep to themselves. The run writes rows into a buffer allocated once
(`results::writer`'s gzip members), formatting a few integers with no
allocation per row. `pmustress replay` reads line by line, to refuse an
overlong line before buffering it, to name the line of a bad row, and to
tell a partial last gzip member (a killed run) from a bad row.
*/

use std::fmt;
use std::str::FromStr;

/// What the signal handler saw for one delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Delivery {
    /// The realtime overflow signal, on the thread that owns the event.
    Overflow,
    /// The overflow signal arrived on a thread that does not own the event.
    WrongThread,
    /// read(2) of the counter failed (errno) or hit an error-state event.
    ReadFailed(i32),
    /// Plain SIGIO: the kernel could not queue the realtime signal.
    SigIo,
}

/// One observation of one worker's run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observation {
    /// PERF_RECORD_SAMPLE of the overflow event: an interrupt the kernel
    /// handled, with the event's count in the overflow handler.
    Sample {
        time_ns: u64,
        cpu: u32,
        count: u64,
    },
    /// The event was stopped: the thread was switched out (migration or
    /// preemption). `count` is the event's count at the switch when the
    /// context-switch witness could read it, None when only the time is
    /// known (PERF_RECORD_SWITCH).
    Stop {
        time_ns: u64,
        cpu: u32,
        count: Option<u64>,
    },
    /// The thread was switched in (PERF_RECORD_SWITCH, the time-only
    /// witness): the kernel restarts the event before it writes this, and
    /// counting user mode only the event counted nothing from its stop to
    /// here.
    Start {
        time_ns: u64,
        cpu: u32,
    },
    /// THROTTLE/UNTHROTTLE of the overflow event (`witness` false) or of
    /// the context-switch witness (`witness` true: stops go unrecorded
    /// until it is unthrottled).
    Throttle {
        time_ns: u64,
        witness: bool,
    },
    Unthrottle {
        time_ns: u64,
        witness: bool,
    },
    /// The sample ring overflowed: `lost` records were never written.
    Lost {
        time_ns: u64,
        lost: u64,
    },
    /// One delivery to the signal handler: the counter it read, when, where.
    Signal {
        time_ns: u64,
        cpu: u32,
        value: u64,
        si_code: i32,
        delivery: Delivery,
    },
    /// Reset mode: the handler reset the count (DISABLE, RESET, PERIOD,
    /// ENABLE) right after the signal before this; its time is taken while
    /// the event is disabled, so later counts are relative to it. `count`:
    /// the count at the DISABLE, read before the RESET (where a pending
    /// overflow is lost; none in runs recorded before it was read).
    Reset {
        time_ns: u64,
        count: Option<u64>,
    },
    /// The thread ran again after a migration (the resume witness): the
    /// event's count there, at or above where it stopped (it counted
    /// nothing while stopped, some kernel mode since its restart).
    Resume {
        time_ns: u64,
        cpu: u32,
        count: u64,
    },
    /// The migrator moved the worker to `cpu`: `time_ns` when the
    /// sched_setaffinity call returned, `requested_ns` when it was made
    /// (None in runs recorded before). The kernel stops a running thread
    /// inside that call, so a stop witnessed between the two is the move's:
    /// a move with none moved a thread that was not running, which stops
    /// nothing.
    Move {
        time_ns: u64,
        cpu: u32,
        requested_ns: Option<u64>,
    },
    /// The count after the final DISABLE, if it could be read.
    Final {
        time_ns: u64,
        count: Option<u64>,
    },
    /// A record of the overflow event other than a sample crossed the
    /// ring's wakeup watermark: the kernel signals for it as it does for an
    /// overflow (one signal with no interrupt of its own).
    Wakeup {
        time_ns: u64,
    },
}

impl Observation {
    pub fn time_ns(&self) -> u64 {
        match *self {
            Observation::Sample { time_ns, .. }
            | Observation::Stop { time_ns, .. }
            | Observation::Resume { time_ns, .. }
            | Observation::Start { time_ns, .. }
            | Observation::Throttle { time_ns, .. }
            | Observation::Unthrottle { time_ns, .. }
            | Observation::Lost { time_ns, .. }
            | Observation::Signal { time_ns, .. }
            | Observation::Reset { time_ns, .. }
            | Observation::Move { time_ns, .. }
            | Observation::Final { time_ns, .. }
            | Observation::Wakeup { time_ns } => time_ns,
        }
    }

    /// Kernel records come from the event's ring; the rest from us.
    pub fn is_kernel(&self) -> bool {
        matches!(
            self,
            Observation::Sample { .. }
                | Observation::Stop { .. }
                | Observation::Resume { .. }
                | Observation::Start { .. }
                | Observation::Throttle { .. }
                | Observation::Unthrottle { .. }
                | Observation::Lost { .. }
                | Observation::Wakeup { .. }
        )
    }
}

/// One CSV row: a worker's observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    pub worker: usize,
    pub observation: Observation,
}

/// The header line of `raw.csv.gz`.
pub const HEADER: &str = "worker,kind,time_ns,cpu,value,si_code";

impl fmt::Display for Row {
    /// The CSV row, without the line end. Every field is a number or a
    /// fixed word, so nothing needs quoting.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = self.worker;
        let opt = Opt;
        match self.observation {
            Observation::Sample {
                time_ns,
                cpu,
                count,
            } => write!(f, "{w},sample,{time_ns},{cpu},{count},"),
            Observation::Stop {
                time_ns,
                cpu,
                count,
            } => write!(f, "{w},stop,{time_ns},{cpu},{},", opt(count)),
            Observation::Resume {
                time_ns,
                cpu,
                count,
            } => write!(f, "{w},resume,{time_ns},{cpu},{count},"),
            Observation::Start { time_ns, cpu } => write!(f, "{w},start,{time_ns},{cpu},,"),
            Observation::Throttle { time_ns, witness } => {
                let kind = if witness {
                    "witness-throttle"
                } else {
                    "throttle"
                };
                write!(f, "{w},{kind},{time_ns},,,")
            }
            Observation::Unthrottle { time_ns, witness } => {
                let kind = if witness {
                    "witness-unthrottle"
                } else {
                    "unthrottle"
                };
                write!(f, "{w},{kind},{time_ns},,,")
            }
            Observation::Lost { time_ns, lost } => write!(f, "{w},lost,{time_ns},,{lost},"),
            Observation::Signal {
                time_ns,
                cpu,
                value,
                si_code,
                delivery,
            } => {
                let (kind, value) = match delivery {
                    Delivery::Overflow => ("signal", value),
                    Delivery::WrongThread => ("signal-wrong-thread", value),
                    Delivery::ReadFailed(errno) => ("signal-read-failed", errno as u32 as u64),
                    Delivery::SigIo => ("sigio", value),
                };
                write!(f, "{w},{kind},{time_ns},{cpu},{value},{si_code}")
            }
            Observation::Reset { time_ns, count } => {
                write!(f, "{w},reset,{time_ns},,{},", opt(count))
            }
            // The last column, a signal's si_code, holds when a move was
            // requested.
            Observation::Move {
                time_ns,
                cpu,
                requested_ns,
            } => write!(f, "{w},move,{time_ns},,{cpu},{}", opt(requested_ns)),
            Observation::Final { time_ns, count } => {
                write!(f, "{w},final,{time_ns},,{},", opt(count))
            }
            Observation::Wakeup { time_ns } => write!(f, "{w},wakeup,{time_ns},,,"),
        }
    }
}

/// An optional number as its field: empty for None. (Formatted in place: a
/// row allocates nothing.)
struct Opt(Option<u64>);

impl fmt::Display for Opt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(v) => write!(f, "{v}"),
            None => Ok(()),
        }
    }
}

/// Why a CSV line is not a row.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RowError(String);

impl FromStr for Row {
    type Err = RowError;

    fn from_str(line: &str) -> Result<Row, RowError> {
        let fields: Vec<&str> = line.trim_end_matches(['\r', '\n']).split(',').collect();
        let [worker, kind, time_ns, cpu, value, si_code] = fields[..] else {
            return Err(RowError(format!(
                "expected 6 comma-separated fields ({HEADER}), found {}",
                fields.len()
            )));
        };
        let num = |name: &str, s: &str| -> Result<u64, RowError> {
            s.parse::<u64>()
                .map_err(|_| RowError(format!("{name} {s:?} is not a whole number")))
        };
        let opt = |name: &str, s: &str| -> Result<Option<u64>, RowError> {
            if s.is_empty() {
                Ok(None)
            } else {
                num(name, s).map(Some)
            }
        };
        let cpu32 = |s: &str| -> Result<u32, RowError> {
            u32::try_from(num("cpu", s)?).map_err(|_| RowError(format!("cpu {s} is too large")))
        };
        let worker = usize::try_from(num("worker", worker)?)
            .map_err(|_| RowError(format!("worker {worker} is too large")))?;
        let time_ns = num("time_ns", time_ns)?;
        let signal = |delivery: Delivery, value: u64| -> Result<Observation, RowError> {
            let si_code = si_code
                .parse::<i32>()
                .map_err(|_| RowError(format!("si_code {si_code:?} is not an integer")))?;
            Ok(Observation::Signal {
                time_ns,
                cpu: cpu32(cpu)?,
                value,
                si_code,
                delivery,
            })
        };
        let observation = match kind {
            "sample" => Observation::Sample {
                time_ns,
                cpu: cpu32(cpu)?,
                count: num("value", value)?,
            },
            "stop" => Observation::Stop {
                time_ns,
                cpu: cpu32(cpu)?,
                count: opt("value", value)?,
            },
            "resume" => Observation::Resume {
                time_ns,
                cpu: cpu32(cpu)?,
                count: num("value", value)?,
            },
            "start" => Observation::Start {
                time_ns,
                cpu: cpu32(cpu)?,
            },
            "throttle" | "witness-throttle" => Observation::Throttle {
                time_ns,
                witness: kind == "witness-throttle",
            },
            "unthrottle" | "witness-unthrottle" => Observation::Unthrottle {
                time_ns,
                witness: kind == "witness-unthrottle",
            },
            "lost" => Observation::Lost {
                time_ns,
                lost: num("value", value)?,
            },
            "signal" => signal(Delivery::Overflow, num("value", value)?)?,
            "signal-wrong-thread" => signal(Delivery::WrongThread, num("value", value)?)?,
            "signal-read-failed" => {
                let errno = i32::try_from(num("value", value)?)
                    .map_err(|_| RowError(format!("errno {value} is too large")))?;
                signal(Delivery::ReadFailed(errno), 0)?
            }
            "sigio" => signal(Delivery::SigIo, num("value", value)?)?,
            "reset" => Observation::Reset {
                time_ns,
                count: opt("value", value)?,
            },
            "wakeup" => Observation::Wakeup { time_ns },
            "move" => Observation::Move {
                time_ns,
                cpu: cpu32(value)?,
                requested_ns: opt("requested_ns", si_code)?,
            },
            "final" => Observation::Final {
                time_ns,
                count: opt("value", value)?,
            },
            other => return Err(RowError(format!("unknown kind {other:?}"))),
        };
        Ok(Row {
            worker,
            observation,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_its_csv_row() {
        let all = [
            Observation::Sample {
                time_ns: 1,
                cpu: 2,
                count: 100_000,
            },
            Observation::Stop {
                time_ns: 2,
                cpu: 1,
                count: Some(150_000),
            },
            Observation::Stop {
                time_ns: 3,
                cpu: 0,
                count: None,
            },
            Observation::Throttle {
                time_ns: 4,
                witness: false,
            },
            Observation::Unthrottle {
                time_ns: 5,
                witness: true,
            },
            Observation::Lost {
                time_ns: 6,
                lost: 3,
            },
            Observation::Signal {
                time_ns: 7,
                cpu: 1,
                value: 100_040,
                si_code: 1,
                delivery: Delivery::Overflow,
            },
            Observation::Signal {
                time_ns: 8,
                cpu: 0,
                value: 0,
                si_code: -6,
                delivery: Delivery::ReadFailed(9),
            },
            Observation::Signal {
                time_ns: 9,
                cpu: 0,
                value: 0,
                si_code: 0,
                delivery: Delivery::SigIo,
            },
            Observation::Signal {
                time_ns: 10,
                cpu: 3,
                value: 5,
                si_code: 1,
                delivery: Delivery::WrongThread,
            },
            Observation::Reset {
                time_ns: 11,
                count: Some(52_000),
            },
            Observation::Reset {
                time_ns: 11,
                count: None,
            },
            Observation::Resume {
                time_ns: 11,
                cpu: 2,
                count: 77,
            },
            Observation::Start {
                time_ns: 11,
                cpu: 3,
            },
            Observation::Move {
                time_ns: 12,
                cpu: 1,
                requested_ns: Some(11),
            },
            Observation::Move {
                time_ns: 12,
                cpu: 1,
                requested_ns: None,
            },
            Observation::Final {
                time_ns: 13,
                count: Some(1_234_567),
            },
            Observation::Final {
                time_ns: 14,
                count: None,
            },
            Observation::Wakeup { time_ns: 15 },
        ];
        for (i, observation) in all.into_iter().enumerate() {
            let row = Row {
                worker: i,
                observation,
            };
            let text = row.to_string();
            assert_eq!(text.split(',').count(), 6, "{text}");
            assert_eq!(text.parse::<Row>(), Ok(row), "{text}");
        }
    }

    #[test]
    fn bad_rows_say_what_is_wrong() {
        for (line, want) in [
            ("0,sample,1,2", "expected 6"),
            ("0,sample,x,0,1,", "time_ns \"x\""),
            ("0,bogus,1,0,1,", "unknown kind"),
            ("0,sample,1,0,,", "value \"\""),
            ("0,signal,1,0,5,z", "si_code"),
            ("0,move,1,,99999999999,", "cpu"),
            ("0,move,9,,1,x", "requested_ns \"x\""),
        ] {
            let e = line.parse::<Row>().unwrap_err().to_string();
            assert!(e.contains(want), "{line}: {e}");
        }
    }
}
