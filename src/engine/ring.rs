/*!
A bounded single-producer single-consumer ring of fixed-width records.

The producer is a signal handler (or the migrator), so `push` must never
allocate, lock or block: slots are preallocated `AtomicU64`s, and a full ring
drops the record and counts it instead of waiting. Counting matters: a dropped
record is our own loss, reported as such, never mistaken for a lost interrupt.
Built from atomics only, so it needs no `unsafe`.
*/

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

pub struct Ring<const W: usize> {
    slots: Box<[[AtomicU64; W]]>,
    mask: usize,
    /// Next slot the producer writes; only the producer stores it.
    head: AtomicUsize,
    /// Next slot the consumer reads; only the consumer stores it.
    tail: AtomicUsize,
    /// Records the producer had to drop because the consumer fell behind.
    overflowed: AtomicU64,
}

impl<const W: usize> Ring<W> {
    /// The bytes of the slots of a ring of `capacity` records, all of them
    /// resident from its making (`with_capacity`).
    pub const fn slot_bytes(capacity: usize) -> usize {
        let cap = if capacity < 2 { 2 } else { capacity };
        cap.next_power_of_two() * W * std::mem::size_of::<AtomicU64>()
    }

    /// A ring holding `capacity` records, rounded up to a power of two.
    pub fn with_capacity(capacity: usize) -> Ring<W> {
        let cap = capacity.max(2).next_power_of_two();
        let ring = Ring {
            slots: (0..cap)
                .map(|_| std::array::from_fn(|_| AtomicU64::new(0)))
                .collect(),
            mask: cap - 1,
            head: AtomicUsize::new(0),
            tail: AtomicUsize::new(0),
            overflowed: AtomicU64::new(0),
        };
        // The zeroed slots come from calloc, whose fresh pages the kernel
        // maps only when first written: a worker's 1 MiB move ring became
        // resident over its first lap, 176 KiB at 10 s, 924 KiB at 60 s and
        // all of it by 130 s (most of a run's RSS growth after its first
        // minute), and each first write was a page fault, in the handler
        // for the signal ring. Written once here, every page is resident
        // before the run starts. (Atomic stores: not optimised away as
        // stores of zero into zeroed memory.)
        for slot in ring.slots.iter() {
            for cell in slot {
                cell.store(0, Ordering::Relaxed);
            }
        }
        ring
    }

    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// Producer side. Returns false (and counts) when the ring is full.
    pub fn push(&self, record: [u64; W]) -> bool {
        let head = self.head.load(Ordering::Relaxed);
        let tail = self.tail.load(Ordering::Acquire);
        if head.wrapping_sub(tail) > self.mask {
            self.overflowed.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        for (cell, value) in self.slots[head & self.mask].iter().zip(record) {
            cell.store(value, Ordering::Relaxed);
        }
        // Publishes the stores above to the consumer's Acquire load.
        self.head.store(head.wrapping_add(1), Ordering::Release);
        true
    }

    /// Consumer side: the oldest record, if any.
    pub fn pop(&self) -> Option<[u64; W]> {
        let tail = self.tail.load(Ordering::Relaxed);
        if tail == self.head.load(Ordering::Acquire) {
            return None;
        }
        let slot = &self.slots[tail & self.mask];
        let record = std::array::from_fn(|i| slot[i].load(Ordering::Relaxed));
        // Hands the slot back to the producer only after we copied it.
        self.tail.store(tail.wrapping_add(1), Ordering::Release);
        Some(record)
    }

    /// How many records were dropped because the ring was full.
    pub fn overflowed(&self) -> u64 {
        self.overflowed.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn fifo_and_full_counting() {
        let ring = Ring::<2>::with_capacity(3);
        assert_eq!(ring.capacity(), 4);
        for i in 0..6 {
            ring.push([i, i * 10]);
        }
        assert_eq!(ring.overflowed(), 2);
        assert_eq!(ring.pop(), Some([0, 0]));
        assert!(ring.push([6, 60]));
        let rest: Vec<_> = std::iter::from_fn(|| ring.pop()).collect();
        assert_eq!(rest, vec![[1, 10], [2, 20], [3, 30], [6, 60]]);
        assert_eq!(ring.pop(), None);
    }

    #[test]
    fn concurrent_producer_consumer_sees_every_record_in_order() {
        let ring = Arc::new(Ring::<1>::with_capacity(64));
        let producer = {
            let ring = Arc::clone(&ring);
            std::thread::spawn(move || {
                let mut i = 0u64;
                while i < 100_000 {
                    if ring.push([i]) {
                        i += 1;
                    } else {
                        std::hint::spin_loop();
                    }
                }
            })
        };
        let mut expect = 0u64;
        while expect < 100_000 {
            if let Some([v]) = ring.pop() {
                assert_eq!(v, expect);
                expect += 1;
            }
        }
        producer.join().unwrap();
        // The producer retried rather than losing records; the counter still
        // tells how often the consumer fell behind.
        assert_eq!(ring.pop(), None);
    }
}
