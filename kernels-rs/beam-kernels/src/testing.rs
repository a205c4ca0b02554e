//! Helpers of the crate's CPU tests: seeded data and the canonical `nogaps` packing.

use crate::layout::{Geometry, NOGAPS, mask, place, row_words};

/// A tiny xorshift generator for seeded test data (the kernel crate has no dependencies).
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    /// The next 64 random bits.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A random `b`-bit value.
    pub(crate) fn bits(&mut self, b: u32) -> u64 {
        self.next() & mask(b)
    }
}

/// Packs a `rows x cols` row-major matrix of `bits`-bit values in `nogaps` (the canonical
/// packing); returns the words and the words per row.
pub(crate) fn pack_nogaps(v: &[u64], rows: u32, cols: u32, bits: u32) -> (Vec<u64>, u32) {
    let rw = row_words(cols as u64, bits, NOGAPS) as u32;
    let g = Geometry {
        cols,
        bits,
        layout: NOGAPS,
        row_words: rw,
    };
    let mut w = vec![0u64; (rows * rw) as usize];
    for r in 0..rows {
        for c in 0..cols {
            let p = place(g, r, c);
            let x = v[(r * cols + c) as usize];
            w[p.word as usize] |= x << p.shift;
            if p.straddles {
                w[p.word as usize + 1] |= x >> (64 - p.shift);
            }
        }
    }
    (w, rw)
}
