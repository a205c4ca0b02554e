//! The tensor-core kernel's unpacking (`beam_kernels::mma::gather8`), run on the CPU against
//! `PackedMatrix::get` for every width up to 8 bits, every layout and ragged shapes: the
//! same function the GPU runs.

use beam_pack::beam_kernels::layout::{Geometry, row_words};
use beam_pack::beam_kernels::mma::gather8;
use beam_pack::cmv_format::HeaderCode;
use beam_pack::{Layout, PackedMatrix};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[test]
fn gather8_reads_eight_elements_as_bytes() {
    let mut rng = StdRng::seed_from_u64(8);
    for bits in 1..=8u32 {
        for &layout in Layout::ALL {
            for (rows, cols) in [(1, 1), (3, 7), (5, 8), (4, 67), (2, 130)] {
                let v: Vec<u64> = (0..rows * cols)
                    .map(|_| rng.gen_range(0..1u64 << bits))
                    .collect();
                let m = PackedMatrix::pack(&v, rows, cols, bits, layout).unwrap();
                let words = m.words();
                let g = Geometry {
                    cols: cols as u32,
                    bits,
                    layout: layout.code(),
                    row_words: row_words(cols as u64, bits, layout.code()) as u32,
                };
                let read = |i: u64| {
                    // Only words holding an element may be read.
                    words[usize::try_from(i).unwrap()]
                };
                for r in 0..rows as u32 + 1 {
                    for c0 in (0..cols as u32 + 9).step_by(8) {
                        let got = gather8(read, g, rows as u32, r, c0);
                        for i in 0..8u32 {
                            let want = m.get(r as usize, (c0 + i) as usize).unwrap_or(0);
                            assert_eq!(
                                (got >> (8 * i)) & 0xff,
                                want,
                                "bits {bits} {layout:?} {rows}x{cols} row {r} col {}",
                                c0 + i
                            );
                        }
                    }
                }
            }
        }
    }
}
