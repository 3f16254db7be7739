/*!
The kernel's witness: records from an event's mmap'd sample ring.

A PERF_RECORD_SAMPLE is written by the overflow handler in the kernel itself,
so a sample between two of our signals proves the interrupt for that overflow
happened, whatever became of its signal. THROTTLE/UNTHROTTLE mark the kernel
stopping the event for exceeding perf_event_max_sample_rate, and LOST means the
ring itself overflowed (the witness is incomplete for that stretch).

Parsing is pure: bytes in, records out, for exactly the layout `kernel`
requests (sample_type TID|TIME|CPU|READ with sample_id_all, read_format 0).

The READ value is the event's count as the overflow handler saw it: the
position of the interrupt on the counter's own axis, so consecutive samples
show directly whether an overflow between them got no interrupt at all,
however late the signals were delivered.
*/

use perf_event_open_sys::bindings as sys;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelRecord {
    /// One overflow the kernel handled (CLOCK_MONOTONIC ns, CPU, and the
    /// counter's value in the overflow handler).
    Sample {
        time_ns: u64,
        cpu: u32,
        value: u64,
    },
    Throttle {
        time_ns: u64,
    },
    Unthrottle {
        time_ns: u64,
    },
    /// The ring overflowed and `lost` records were dropped by the kernel.
    Lost {
        time_ns: u64,
        lost: u64,
    },
}

impl KernelRecord {
    pub fn time_ns(&self) -> u64 {
        match *self {
            KernelRecord::Sample { time_ns, .. }
            | KernelRecord::Throttle { time_ns }
            | KernelRecord::Unthrottle { time_ns }
            | KernelRecord::Lost { time_ns, .. } => time_ns,
        }
    }
}

fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

/// Parses whole records from `bytes`; returns them and the count of bytes
/// that did not form a record we understand (which should stay 0).
pub fn parse(bytes: &[u8], out: &mut Vec<KernelRecord>) -> usize {
    let mut off = 0;
    let mut garbled = 0;
    while off + 8 <= bytes.len() {
        let (Some(kind), Some(size)) = (u32_at(bytes, off), bytes.get(off + 6..off + 8)) else {
            break;
        };
        let size = u16::from_ne_bytes([size[0], size[1]]) as usize;
        if size < 8 || off + size > bytes.len() {
            garbled += bytes.len() - off;
            break;
        }
        let rec = &bytes[off..off + size];
        let parsed = match kind {
            // pid/tid, time, cpu/res, read value.
            sys::PERF_RECORD_SAMPLE => u64_at(rec, 16)
                .zip(u32_at(rec, 24))
                .zip(u64_at(rec, 32))
                .map(|((time_ns, cpu), value)| KernelRecord::Sample {
                    time_ns,
                    cpu,
                    value,
                }),
            sys::PERF_RECORD_THROTTLE => {
                u64_at(rec, 8).map(|time_ns| KernelRecord::Throttle { time_ns })
            }
            sys::PERF_RECORD_UNTHROTTLE => {
                u64_at(rec, 8).map(|time_ns| KernelRecord::Unthrottle { time_ns })
            }
            // id, lost, then sample_id: pid/tid, time.
            sys::PERF_RECORD_LOST => u64_at(rec, 16)
                .zip(u64_at(rec, 32))
                .map(|(lost, time_ns)| KernelRecord::Lost { time_ns, lost }),
            // lost, then sample_id: pid/tid, time.
            sys::PERF_RECORD_LOST_SAMPLES => u64_at(rec, 8)
                .zip(u64_at(rec, 24))
                .map(|(lost, time_ns)| KernelRecord::Lost { time_ns, lost }),
            _ => None,
        };
        match parsed {
            Some(r) => out.push(r),
            None => garbled += size,
        }
        off += size;
    }
    garbled
}

#[cfg(test)]
pub fn encode(rec: &KernelRecord) -> Vec<u8> {
    let mut b = Vec::new();
    let mut header = |kind: u32, size: u16| {
        b.extend_from_slice(&kind.to_ne_bytes());
        b.extend_from_slice(&0u16.to_ne_bytes());
        b.extend_from_slice(&size.to_ne_bytes());
    };
    match *rec {
        KernelRecord::Sample {
            time_ns,
            cpu,
            value,
        } => {
            header(sys::PERF_RECORD_SAMPLE, 40);
            b.extend_from_slice(&[1, 0, 0, 0, 2, 0, 0, 0]);
            b.extend_from_slice(&time_ns.to_ne_bytes());
            b.extend_from_slice(&cpu.to_ne_bytes());
            b.extend_from_slice(&0u32.to_ne_bytes());
            b.extend_from_slice(&value.to_ne_bytes());
        }
        KernelRecord::Throttle { time_ns } | KernelRecord::Unthrottle { time_ns } => {
            let kind = if matches!(rec, KernelRecord::Throttle { .. }) {
                sys::PERF_RECORD_THROTTLE
            } else {
                sys::PERF_RECORD_UNTHROTTLE
            };
            header(kind, 48);
            b.extend_from_slice(&time_ns.to_ne_bytes());
            b.extend_from_slice(&[0; 32]);
        }
        KernelRecord::Lost { time_ns, lost } => {
            header(sys::PERF_RECORD_LOST, 48);
            b.extend_from_slice(&7u64.to_ne_bytes());
            b.extend_from_slice(&lost.to_ne_bytes());
            b.extend_from_slice(&[1, 0, 0, 0, 2, 0, 0, 0]);
            b.extend_from_slice(&time_ns.to_ne_bytes());
            b.extend_from_slice(&[0; 8]);
        }
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_kind_in_one_stream() {
        let recs = [
            KernelRecord::Sample {
                time_ns: 10,
                cpu: 3,
                value: 100_042,
            },
            KernelRecord::Throttle { time_ns: 20 },
            KernelRecord::Unthrottle { time_ns: 30 },
            KernelRecord::Lost {
                time_ns: 40,
                lost: 5,
            },
        ];
        let bytes: Vec<u8> = recs.iter().flat_map(encode).collect();
        let mut out = Vec::new();
        assert_eq!(parse(&bytes, &mut out), 0);
        assert_eq!(out, recs);
    }

    #[test]
    fn truncated_and_unknown_records_are_counted_not_fatal() {
        let mut bytes = encode(&KernelRecord::Sample {
            time_ns: 1,
            cpu: 0,
            value: 1,
        });
        // An unknown record type of 16 bytes.
        bytes.extend_from_slice(&99u32.to_ne_bytes());
        bytes.extend_from_slice(&[0, 0, 16, 0]);
        bytes.extend_from_slice(&[0; 8]);
        // A header claiming more than there is.
        bytes.extend_from_slice(&9u32.to_ne_bytes());
        bytes.extend_from_slice(&[0, 0, 200, 0]);
        let mut out = Vec::new();
        assert_eq!(parse(&bytes, &mut out), 16 + 8);
        assert_eq!(out.len(), 1);
        // Size 0 would loop forever if accepted.
        let mut zero = vec![9, 0, 0, 0, 0, 0, 0, 0];
        zero.extend_from_slice(&[0; 24]);
        assert_eq!(parse(&zero, &mut Vec::new()), 32);
    }
}
