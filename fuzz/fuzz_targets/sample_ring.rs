//! Bytes from the mmap'd sample ring: whatever they are, the parser ends,
//! and every byte is either in a record it returned or counted as garbled.
#![no_main]

use libfuzzer_sys::fuzz_target;

use pmustress::sample;

fuzz_target!(|data: &[u8]| {
    let mut out = Vec::new();
    let garbled = sample::parse(data, &mut out);
    assert!(garbled <= data.len());
    // Each record is at least a header.
    assert!(out.len() * 8 + garbled <= data.len());
});
