/*!
The kernel's ring records written from observations: the inverse of
`engine::sample_ring`'s parser, in the layout the kernel writes for the
attributes the engine opens. The fake kernel fills its rings with it, and
the parser's tests round-trip through it.
*/

use perf_event_open_sys::bindings as sys;

use crate::engine::sample_ring::{MISC_SWITCH_OUT, RingIds};
use crate::records::Observation;

/// Encodes records as the kernel writes them.
pub fn encode(rec: &Observation, ids: &RingIds) -> Vec<u8> {
    let mut b = Vec::new();
    let header = |b: &mut Vec<u8>, kind: u32, misc: u16, size: u16| {
        b.extend_from_slice(&kind.to_ne_bytes());
        b.extend_from_slice(&misc.to_ne_bytes());
        b.extend_from_slice(&size.to_ne_bytes());
    };
    let tid = [1u8, 0, 0, 0, 2, 0, 0, 0];
    let sample_id = |b: &mut Vec<u8>, time_ns: u64, cpu: u32, id: u64| {
        b.extend_from_slice(&tid);
        b.extend_from_slice(&time_ns.to_ne_bytes());
        b.extend_from_slice(&cpu.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.extend_from_slice(&id.to_ne_bytes());
    };
    match *rec {
        Observation::Sample {
            time_ns,
            cpu,
            count,
        } => {
            header(&mut b, sys::PERF_RECORD_SAMPLE, 0, 48);
            b.extend_from_slice(&ids.event.to_ne_bytes());
            b.extend_from_slice(&tid);
            b.extend_from_slice(&time_ns.to_ne_bytes());
            b.extend_from_slice(&cpu.to_ne_bytes());
            b.extend_from_slice(&0u32.to_ne_bytes());
            b.extend_from_slice(&count.to_ne_bytes());
        }
        Observation::Stop {
            time_ns,
            cpu,
            count: Some(count),
        }
        | Observation::Resume {
            time_ns,
            cpu,
            count,
        } => {
            let id = if matches!(rec, Observation::Resume { .. }) {
                ids.resume
            } else {
                ids.witness
            };
            header(&mut b, sys::PERF_RECORD_SAMPLE, 0, 64);
            b.extend_from_slice(&id.unwrap_or(0).to_ne_bytes());
            b.extend_from_slice(&tid);
            b.extend_from_slice(&time_ns.to_ne_bytes());
            b.extend_from_slice(&cpu.to_ne_bytes());
            b.extend_from_slice(&0u32.to_ne_bytes());
            b.extend_from_slice(&2u64.to_ne_bytes());
            b.extend_from_slice(&count.to_ne_bytes());
            b.extend_from_slice(&7u64.to_ne_bytes());
        }
        Observation::Stop {
            time_ns,
            cpu,
            count: None,
        } => {
            header(&mut b, sys::PERF_RECORD_SWITCH, MISC_SWITCH_OUT, 40);
            sample_id(&mut b, time_ns, cpu, ids.event);
        }
        Observation::Start { time_ns, cpu } => {
            header(&mut b, sys::PERF_RECORD_SWITCH, 0, 40);
            sample_id(&mut b, time_ns, cpu, ids.event);
        }
        Observation::Throttle { time_ns, witness }
        | Observation::Unthrottle { time_ns, witness } => {
            let kind = if matches!(rec, Observation::Throttle { .. }) {
                sys::PERF_RECORD_THROTTLE
            } else {
                sys::PERF_RECORD_UNTHROTTLE
            };
            let id = if witness {
                ids.witness.unwrap_or(0)
            } else {
                ids.event
            };
            header(&mut b, kind, 0, 64);
            b.extend_from_slice(&time_ns.to_ne_bytes());
            b.extend_from_slice(&id.to_ne_bytes());
            b.extend_from_slice(&id.to_ne_bytes());
            sample_id(&mut b, time_ns, 0, id);
        }
        Observation::Lost { time_ns, lost } => {
            header(&mut b, sys::PERF_RECORD_LOST, 0, 56);
            b.extend_from_slice(&ids.event.to_ne_bytes());
            b.extend_from_slice(&lost.to_ne_bytes());
            sample_id(&mut b, time_ns, 0, ids.event);
        }
        // Not ring records.
        Observation::Signal { .. }
        | Observation::Reset { .. }
        | Observation::Move { .. }
        | Observation::Final { .. }
        | Observation::Wakeup { .. } => {}
    }
    b
}
