//! Bytes from the mmap'd sample ring: whatever they are, the parser ends,
//! and every byte is either in a record it returned or counted as garbled.
#![no_main]

use libfuzzer_sys::fuzz_target;

use pmustress::engine::sample;

fuzz_target!(|data: &[u8]| {
    let mut out = Vec::new();
    let ids = sample::RingIds {
        event: 1,
        witness: Some(2),
        resume: Some(3),
    };
    let mut ring = sample::RingState::new(1 << 16);
    let garbled = sample::parse(data, &ids, &mut ring, &mut out);
    assert!(garbled <= data.len());
    // Each record is at least a header (a watermark wakeup follows one).
    assert!(out.len() * 4 + garbled <= data.len());
});
