/*!
The kernel's witness: records from an event's mmap'd sample ring.

Two events write into one worker's ring (the switch witness through
PERF_EVENT_IOC_SET_OUTPUT), told apart by PERF_SAMPLE_IDENTIFIER:

- the overflow event's PERF_RECORD_SAMPLEs, written by the overflow handler
  in the kernel itself: a sample proves the interrupt for that overflow
  happened, whatever became of its signal, and its READ value is the event's
  count in the handler, the interrupt's position on the counter's own axis;
- the switch witness's samples: a software PERF_COUNT_SW_CONTEXT_SWITCHES
  event in the overflow event's group, sampling every switch-out of the
  thread just before the scheduler stops the group, with a group READ whose
  first value is the overflow event's count there: where on the counter's
  axis the event was stopped. Where the witness cannot be opened (it counts
  kernel mode, which perf_event_paranoid may forbid), the overflow event
  asks for PERF_RECORD_SWITCH instead: the time of each switch-out, without
  the count.

THROTTLE/UNTHROTTLE mark the kernel stopping an event for exceeding
perf_event_max_sample_rate, and LOST means the ring itself overflowed.

Parsing is pure: bytes in, observations out, for exactly the layout `kernel`
requests (sample_type IDENTIFIER|TID|TIME|CPU|READ with sample_id_all; read
format 0 for the overflow event, GROUP for the witness).

It is written here rather than taken from linux-perf-event-reader (0.10.2,
the parser the samply profiler uses), which does not fit: its
`SampleRecord` reads PERF_SAMPLE_READ's values and drops them (and reads
the GROUP and non-GROUP layouts the other way round, so a sample with read
format 0 asks for `count` further values and fails), while the READ value
is the one datum judged here; it has no LOST_SAMPLES record; and it parses
by one attr's `RecordParseInfo` while three events with different read
formats share this ring. What it does well (a record wrapping the ring's
end read from two slices) `kernel`'s drain already does, copying each
pass's bytes out once, off the signal handler's path; parsing allocates
nothing per record here either.
*/

use perf_event_open_sys::bindings as sys;

use crate::records::Observation;

/// The ids of the events writing into one ring (PERF_EVENT_IOC_ID).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RingIds {
    /// The overflow event.
    pub event: u64,
    /// The switch witness, if one was opened.
    pub witness: Option<u64>,
    /// The resume witness (migrations, at sched-in), if one was opened.
    pub resume: Option<u64>,
}

/// Where the kernel's writer is in one ring, to know when it wakes the
/// reader for a reason other than a sample: `perf_output_begin` adds the
/// watermark (half the ring, since we ask for wakeup_events, not a
/// watermark) to `rb->wakeup` whenever a record's end passes
/// `rb->wakeup + watermark`, and the event that wrote that record then
/// signals its owner. `rb->wakeup` is not a multiple of the watermark:
/// `perf_output_sample` also adds 1 to it after every sample of an event
/// with wakeup_events 1 (that is how a sample wakes its reader), so each
/// overflow sample moves the next crossing one byte further on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingState {
    /// Bytes the kernel has written so far (its `head`).
    pub head: u64,
    /// The kernel's `rb->wakeup`.
    pub wakeup: u64,
    pub watermark: u64,
}

impl RingState {
    /// A fresh ring of `data_size` bytes.
    pub fn new(data_size: usize) -> RingState {
        RingState {
            head: 0,
            wakeup: 0,
            watermark: (data_size / 2) as u64,
        }
    }

    /// Advances past one record; true when it crossed the watermark.
    /// `wakes` is true for a sample of the overflow event (wakeup_events
    /// 1), whose own wakeup the kernel counts after the crossing test.
    fn advance(&mut self, size: usize, wakes: bool) -> bool {
        self.head += size as u64;
        let crossed = self.watermark > 0 && self.head - self.wakeup > self.watermark;
        if crossed {
            self.wakeup += self.watermark;
        }
        if wakes {
            self.wakeup += 1;
        }
        crossed
    }
}

/// misc bit of PERF_RECORD_SWITCH: a switch out of the thread.
pub const MISC_SWITCH_OUT: u16 = 0x2000;

fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

/// Parses whole records from `bytes` (everything drained from the ring,
/// in order); returns the number of bytes that did not form a record we
/// understand (which should stay 0).
pub fn parse(
    bytes: &[u8],
    ids: &RingIds,
    ring: &mut RingState,
    out: &mut Vec<Observation>,
) -> usize {
    let mut off = 0;
    let mut garbled = 0;
    while off + 8 <= bytes.len() {
        let (Some(kind), Some(misc), Some(size)) = (
            u32_at(bytes, off),
            bytes.get(off + 4..off + 6),
            bytes.get(off + 6..off + 8),
        ) else {
            break;
        };
        let misc = u16::from_ne_bytes([misc[0], misc[1]]);
        let size = u16::from_ne_bytes([size[0], size[1]]) as usize;
        if size < 8 || off + size > bytes.len() {
            garbled += bytes.len() - off;
            break;
        }
        let rec = &bytes[off..off + size];
        let parsed = parse_one(kind, misc, rec, ids);
        let wakes = matches!(parsed, Parsed::Record(Observation::Sample { .. }));
        let crossed = ring.advance(size, wakes);
        let by_event = match &parsed {
            Parsed::Record(Observation::Sample { .. }) => false,
            Parsed::Record(
                Observation::Stop { count: Some(_), .. }
                | Observation::Resume { .. }
                | Observation::Throttle { witness: true, .. }
                | Observation::Unthrottle { witness: true, .. },
            )
            | Parsed::Skip => false,
            // The overflow event's own (a LOST record is the writer's:
            // ours, unless the witness lost it, which we cannot tell).
            Parsed::Record(_) => true,
            Parsed::Garbled => false,
        };
        match parsed {
            Parsed::Record(r) => {
                let time_ns = r.time_ns();
                out.push(r);
                if crossed && by_event {
                    out.push(Observation::Wakeup { time_ns });
                }
            }
            Parsed::Skip => {}
            Parsed::Garbled => garbled += size,
        }
        off += size;
    }
    garbled
}

enum Parsed {
    Record(Observation),
    /// A record we asked for but do not judge: the resume witness's
    /// throttling, which only costs upper bounds.
    Skip,
    Garbled,
}

fn parse_one(kind: u32, misc: u16, rec: &[u8], ids: &RingIds) -> Parsed {
    let is_witness = |id: u64| ids.witness == Some(id);
    let is_resume = |id: u64| ids.resume == Some(id);
    let known = |id: u64| id == ids.event || is_witness(id);
    let parsed = match kind {
        // identifier, pid/tid, time, cpu/res, then the READ value: the
        // count (read format 0) or a group (nr, leader's count, ...).
        sys::PERF_RECORD_SAMPLE => (|| {
            let id = u64_at(rec, 8)?;
            let time_ns = u64_at(rec, 24)?;
            let cpu = u32_at(rec, 32)?;
            if id == ids.event {
                let count = u64_at(rec, 40)?;
                Some(Observation::Sample {
                    time_ns,
                    cpu,
                    count,
                })
            } else if is_witness(id) {
                let nr = u64_at(rec, 40)?;
                let count = (nr >= 1).then(|| u64_at(rec, 48)).flatten()?;
                Some(Observation::Stop {
                    time_ns,
                    cpu,
                    count: Some(count),
                })
            } else if is_resume(id) {
                let nr = u64_at(rec, 40)?;
                let count = (nr >= 1).then(|| u64_at(rec, 48)).flatten()?;
                Some(Observation::Resume {
                    time_ns,
                    cpu,
                    count,
                })
            } else {
                None
            }
        })(),
        // time, id, stream_id, then sample_id.
        sys::PERF_RECORD_THROTTLE | sys::PERF_RECORD_UNTHROTTLE
            if u64_at(rec, 16).is_some_and(is_resume) =>
        {
            return Parsed::Skip;
        }
        sys::PERF_RECORD_THROTTLE | sys::PERF_RECORD_UNTHROTTLE => (|| {
            let time_ns = u64_at(rec, 8)?;
            let id = u64_at(rec, 16)?;
            if !known(id) {
                return None;
            }
            let witness = is_witness(id);
            Some(if kind == sys::PERF_RECORD_THROTTLE {
                Observation::Throttle { time_ns, witness }
            } else {
                Observation::Unthrottle { time_ns, witness }
            })
        })(),
        // id, lost, then sample_id: pid/tid, time.
        sys::PERF_RECORD_LOST => u64_at(rec, 16)
            .zip(u64_at(rec, 32))
            .map(|(lost, time_ns)| Observation::Lost { time_ns, lost }),
        // lost, then sample_id: pid/tid, time.
        sys::PERF_RECORD_LOST_SAMPLES => u64_at(rec, 8)
            .zip(u64_at(rec, 24))
            .map(|(lost, time_ns)| Observation::Lost { time_ns, lost }),
        // Only sample_id: pid/tid, time, cpu, identifier.
        sys::PERF_RECORD_SWITCH => {
            let out = misc & MISC_SWITCH_OUT != 0;
            u64_at(rec, 16)
                .zip(u32_at(rec, 24))
                .map(|(time_ns, cpu)| match out {
                    true => Observation::Stop {
                        time_ns,
                        cpu,
                        count: None,
                    },
                    false => Observation::Start { time_ns, cpu },
                })
        }
        _ => None,
    };
    match parsed {
        Some(r) => Parsed::Record(r),
        None => Parsed::Garbled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::ring_encoder::encode;

    const IDS: RingIds = RingIds {
        event: 41,
        witness: Some(42),
        resume: Some(43),
    };

    #[test]
    fn round_trips_every_kind_in_one_stream() {
        let recs = [
            Observation::Sample {
                time_ns: 10,
                cpu: 3,
                count: 100_042,
            },
            Observation::Stop {
                time_ns: 11,
                cpu: 3,
                count: Some(150_000),
            },
            Observation::Stop {
                time_ns: 12,
                cpu: 1,
                count: None,
            },
            Observation::Resume {
                time_ns: 13,
                cpu: 2,
                count: 150_020,
            },
            Observation::Throttle {
                time_ns: 20,
                witness: false,
            },
            Observation::Unthrottle {
                time_ns: 30,
                witness: false,
            },
            Observation::Throttle {
                time_ns: 31,
                witness: true,
            },
            Observation::Lost {
                time_ns: 40,
                lost: 5,
            },
        ];
        let bytes: Vec<u8> = recs.iter().flat_map(|r| encode(r, &IDS)).collect();
        let mut out = Vec::new();
        assert_eq!(
            parse(&bytes, &IDS, &mut RingState::new(1 << 20), &mut out),
            0
        );
        assert_eq!(out, recs);
    }

    fn wakeups(out: &[Observation]) -> Vec<&Observation> {
        out.iter()
            .filter(|o| matches!(o, Observation::Wakeup { .. }))
            .collect()
    }

    /// perf_output_begin wakes the reader each time a record's end passes
    /// another half ring: after a sample that is its own wakeup, after a
    /// throttle record it is a signal with no interrupt.
    #[test]
    fn a_non_sample_record_crossing_the_watermark_is_a_wakeup() {
        let sample = |t| Observation::Sample {
            time_ns: t,
            cpu: 0,
            count: t,
        };
        let throttle = Observation::Throttle {
            time_ns: 3,
            witness: false,
        };
        // 48-byte samples and a 64-byte throttle in a 256-byte ring:
        // watermark 128.
        let recs = [sample(1), sample(2), throttle, sample(4), sample(5)];
        let bytes: Vec<u8> = recs.iter().flat_map(|r| encode(r, &IDS)).collect();
        let mut ring = RingState::new(256);
        let mut out = Vec::new();
        assert_eq!(parse(&bytes, &IDS, &mut ring, &mut out), 0);
        // Ends: 48, 96, 160 (past 2 + 128: the throttle's, after two
        // samples' wakeups), 208, 256 (not past 131 + 128).
        assert_eq!(out[3], Observation::Wakeup { time_ns: 3 });
        assert_eq!(out.len(), recs.len() + 1);
        assert_eq!((ring.head, ring.wakeup), (256, 132));
    }

    /// Every overflow sample adds one to `rb->wakeup`, so a record that
    /// ends fewer bytes past the half ring than there were samples before
    /// it crosses nothing (a parser that ignored this saw a signal with no
    /// cause, and judged it foreign).
    #[test]
    fn each_sample_moves_the_next_crossing_one_byte_on() {
        let sample = |t| Observation::Sample {
            time_ns: t,
            cpu: 0,
            count: t,
        };
        let start = |t| Observation::Start { time_ns: t, cpu: 0 };
        let sample_size = encode(&sample(1), &IDS).len() as u64;
        let start_size = encode(&start(1), &IDS).len() as u64;
        let recs = [sample(1), sample(2), sample(3), start(4), start(5)];
        let bytes: Vec<u8> = recs.iter().flat_map(|r| encode(r, &IDS)).collect();
        // The first start ends 3 bytes past a watermark of its end - 3:
        // 3 samples before it, so it crosses nothing; the second start does.
        let first_start_end = 3 * sample_size + start_size;
        let mut ring = RingState::new(2 * (first_start_end - 3) as usize);
        let mut out = Vec::new();
        assert_eq!(parse(&bytes, &IDS, &mut ring, &mut out), 0);
        let wakeups = wakeups(&out);
        assert_eq!(wakeups, [&Observation::Wakeup { time_ns: 5 }]);
        // A switch witness's samples (wakeup_events 0) do not count.
        let witness = |t| Observation::Stop {
            time_ns: t,
            cpu: 0,
            count: Some(t),
        };
        let recs = [witness(1), witness(2), witness(3), start(4)];
        let bytes: Vec<u8> = recs.iter().flat_map(|r| encode(r, &IDS)).collect();
        let end = bytes.len() as u64;
        let mut ring = RingState::new(2 * (end - 1) as usize);
        let mut out = Vec::new();
        assert_eq!(parse(&bytes, &IDS, &mut ring, &mut out), 0);
        assert_eq!(out.last(), Some(&Observation::Wakeup { time_ns: 4 }));
    }

    /// The time-only witness's switch records are the overflow event's
    /// own: a switch-in passing the watermark also wakes the reader.
    #[test]
    fn a_switch_in_crossing_the_watermark_is_a_wakeup() {
        let start = |t| Observation::Start { time_ns: t, cpu: 0 };
        let recs = [start(1), start(2), start(3), start(4), start(5)];
        let bytes: Vec<u8> = recs.iter().flat_map(|r| encode(r, &IDS)).collect();
        let size = encode(&start(1), &IDS).len();
        // Half the ring passed by the third record's end.
        let mut ring = RingState::new(5 * size);
        let mut out = Vec::new();
        assert_eq!(parse(&bytes, &IDS, &mut ring, &mut out), 0);
        let wakeups = wakeups(&out);
        assert_eq!(wakeups, [&Observation::Wakeup { time_ns: 3 }]);
        assert_eq!(out.len(), recs.len() + 1);
    }

    #[test]
    fn switch_ins_are_starts_and_strangers_are_garbled() {
        let mut bytes = encode(
            &Observation::Stop {
                time_ns: 5,
                cpu: 0,
                count: None,
            },
            &IDS,
        );
        // The same record as a switch-in.
        bytes[4..6].copy_from_slice(&0u16.to_ne_bytes());
        let start = bytes.clone();
        // A sample of an event that is not ours.
        let stranger = RingIds {
            event: 99,
            witness: None,
            resume: None,
        };
        let other = encode(
            &Observation::Sample {
                time_ns: 1,
                cpu: 0,
                count: 1,
            },
            &stranger,
        );
        bytes.extend_from_slice(&other);
        let mut out = Vec::new();
        let mut ring = RingState::new(1 << 20);
        assert_eq!(parse(&bytes, &IDS, &mut ring, &mut out), other.len());
        assert_eq!(out, [Observation::Start { time_ns: 5, cpu: 0 }]);
        assert_eq!(start, encode(&out[0], &IDS));
    }

    #[test]
    fn truncated_and_unknown_records_are_counted_not_fatal() {
        let mut bytes = encode(
            &Observation::Sample {
                time_ns: 1,
                cpu: 0,
                count: 1,
            },
            &IDS,
        );
        // An unknown record type of 16 bytes.
        bytes.extend_from_slice(&99u32.to_ne_bytes());
        bytes.extend_from_slice(&[0, 0, 16, 0]);
        bytes.extend_from_slice(&[0; 8]);
        // A header claiming more than there is.
        bytes.extend_from_slice(&9u32.to_ne_bytes());
        bytes.extend_from_slice(&[0, 0, 200, 0]);
        let mut out = Vec::new();
        let mut ring = RingState::new(1 << 20);
        assert_eq!(parse(&bytes, &IDS, &mut ring, &mut out), 16 + 8);
        assert_eq!(out.len(), 1);
        // Size 0 would loop forever if accepted.
        let mut zero = vec![9, 0, 0, 0, 0, 0, 0, 0];
        zero.extend_from_slice(&[0; 24]);
        assert_eq!(parse(&zero, &IDS, &mut ring, &mut Vec::new()), 32);
    }
}
