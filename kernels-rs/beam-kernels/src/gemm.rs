//! GEMM `C = A x B` on CUDA cores: the paper's kernels (guide, tight, slabs, nogaps, and
//! slabs/nogaps with flexible output widths).
//!
//! This module holds what host and GPU share, as plain functions tested on the CPU: which
//! arithmetic ([`Mode`]) a launch runs, the tiles and launch geometry, the entry-point names,
//! and the column cursor ([`Col`], [`ColStep`], [`locate`]) the kernels use to find elements
//! of a tile without dividing in the loop. The entry points (NVPTX only) are in `kernels`.
//!
//! Design (see `docs/BEAM-GEMM-notes.md`):
//! * `guide`: the programming guide's tiled product, 16 x 16 tiles of `u64` in shared memory,
//!   one output per thread, 64-bit multiplies; exact (wrapping `u64`, or saturating `u64`
//!   where the exact result may pass 2^64).
//! * the packed kernels (`tight`, `slabs`, `nogaps` and the flex-out variants): one engine.
//!   Each block computes a [`Mode::tile`] of outputs (`16 TM x 16 TN`, 256 threads, `TM x TN`
//!   outputs per thread in registers), walking the inner dimension [`BK`] at a time. Every
//!   thread reads its share of the next packed tile from global memory (64-bit words,
//!   located by the column cursor, the element cut out with [`crate::layout::extract`]) while
//!   the block multiplies the current one, and writes it into the other of two shared-memory
//!   buffers as native 32-bit values (one plane, or two for 64-bit operands). The inner loop
//!   is then the same for every layout and width: 128-bit shared loads and one multiply-add
//!   per output and step in the [`Mode`]'s arithmetic. Outputs go out packed, each element
//!   ORed into the zeroed words (`access::store`).

use crate::layout::{Acc, NOGAPS, Place, SLABS, TIGHT, acc_for, native_bits, sat_mul};

/// Threads per block of the packed kernels (16 x 16).
pub const THREADS: u32 = 256;
/// Elements of the inner dimension per tile of the packed kernels.
pub const BK: u32 = 8;
/// Padding (in 32-bit words) after each `k`-row of the `A` tile in shared memory, so that the
/// tile's stores (threads along `k`) hit different banks while rows stay 16-byte aligned.
pub const A_PAD: u32 = 4;
/// Side of the guide's square tiles (16 x 16 threads, one output each).
pub const GUIDE_TILE: u32 = 16;

/// The arithmetic of one launch of a packed kernel: operand width in shared memory and
/// registers, and the accumulator. Chosen by [`Mode::select`] from [`acc_for`]: the narrowest
/// arithmetic that is exact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(target_arch = "nvptx64", derive(core::marker::ConstParamTy))]
pub enum Mode {
    /// 32-bit operands (the low 32 bits), 32-bit wrapping accumulator ([`Acc::U32`]).
    U32,
    /// 32-bit operands, 64-bit wrapping accumulator (widening multiply): [`Acc::U64`] with
    /// both operands at most 32 bits wide.
    U64n,
    /// 64-bit operands, 64-bit wrapping accumulator: [`Acc::U64`] otherwise.
    U64,
    /// 32-bit operands, 64-bit saturating sum of exact 64-bit products: [`Acc::SatU64`] with
    /// both operands at most 32 bits wide.
    SatU64n,
    /// 64-bit operands, saturating products and sums: [`Acc::SatU64`] otherwise.
    SatU64,
}

/// Every [`Mode`], in the order of [`Mode::index`].
pub const MODES: [Mode; 5] = [
    Mode::U32,
    Mode::U64n,
    Mode::U64,
    Mode::SatU64n,
    Mode::SatU64,
];

impl Mode {
    /// The mode for `A` of `a_bits`, `B` of `b_bits`, inner dimension `k`, `out` output bits
    /// and `overflow` ([`crate::layout::OVF`] or [`crate::layout::SAT`]).
    pub const fn select(a_bits: u32, b_bits: u32, k: u64, out: u32, overflow: u32) -> Mode {
        let narrow = a_bits <= 32 && b_bits <= 32;
        match acc_for(a_bits, b_bits, k, out, overflow) {
            Acc::U32 => Mode::U32,
            Acc::U64 if narrow => Mode::U64n,
            Acc::U64 => Mode::U64,
            Acc::SatU64 if narrow => Mode::SatU64n,
            Acc::SatU64 => Mode::SatU64,
        }
    }

    /// Position in [`MODES`].
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The suffix of the entry points.
    pub const fn name(self) -> &'static str {
        match self {
            Mode::U32 => "u32",
            Mode::U64n => "u64n",
            Mode::U64 => "u64",
            Mode::SatU64n => "satu64n",
            Mode::SatU64 => "satu64",
        }
    }

    /// Operands are 64 bits wide (two 32-bit planes in shared memory).
    pub const fn wide(self) -> bool {
        matches!(self, Mode::U64 | Mode::SatU64)
    }

    /// 32-bit planes per tile in shared memory: 1 (32-bit operands) or 2 (64-bit operands: low
    /// and high halves).
    pub const fn planes(self) -> u32 {
        if self.wide() { 2 } else { 1 }
    }

    /// `(TM, TN)`: outputs per thread, rows by columns (each 4 or 8).
    pub const fn tile(self) -> (u32, u32) {
        match self {
            Mode::U32 | Mode::U64n | Mode::SatU64n => (8, 8),
            Mode::U64 => (8, 4),
            Mode::SatU64 => (4, 4),
        }
    }

    /// Output rows per block (`16 TM`).
    pub const fn block_rows(self) -> u32 {
        16 * self.tile().0
    }

    /// Output columns per block (`16 TN`).
    pub const fn block_cols(self) -> u32 {
        16 * self.tile().1
    }

    /// Bytes of dynamic shared memory: two buffers, each with the `A` tile (`BK` rows of
    /// `block_rows + A_PAD` words) and the `B` tile (`BK` rows of `block_cols` words) per plane.
    pub const fn smem_bytes(self) -> u32 {
        2 * 4 * self.planes() * BK * (self.block_rows() + A_PAD + self.block_cols())
    }

    /// One step of the accumulation, as the kernel computes it, on the host (for tests):
    /// `acc + a * b` in the mode's arithmetic, on operands and accumulator as `u64`.
    pub const fn mac(self, acc: u64, a: u64, b: u64) -> u64 {
        match self {
            Mode::U32 => (acc as u32).wrapping_add((a as u32).wrapping_mul(b as u32)) as u64,
            Mode::U64n => acc.wrapping_add((a as u32 as u64) * (b as u32 as u64)),
            Mode::U64 => acc.wrapping_add(a.wrapping_mul(b)),
            Mode::SatU64n => acc.saturating_add((a as u32 as u64) * (b as u32 as u64)),
            Mode::SatU64 => acc.saturating_add(sat_mul(a, b)),
        }
    }
}

/// The arithmetic of the guide: 64-bit loads and multiplies, wrapping (exact modulo 2^64,
/// enough for every `ovf` and for `sat` while the exact result stays below 2^64) or
/// saturating.
pub const fn guide_saturates(a_bits: u32, b_bits: u32, k: u64, out: u32, overflow: u32) -> bool {
    matches!(acc_for(a_bits, b_bits, k, out, overflow), Acc::SatU64)
}

/// The CUDA-core GEMM kernels (as `beam_pack::gpu::GemmKernel`, without `mma`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// The programming guide's tiled product on the naive layout.
    Guide,
    /// Tight types.
    Tight,
    /// Slabs, output width = input width.
    Slabs,
    /// Slabs, any output width.
    SlabsFlexOut,
    /// Nogaps, output width = input width.
    Nogaps,
    /// Nogaps, any output width.
    NogapsFlexOut,
}

/// The packed kernels, in the order of [`entry`]'s table.
pub const PACKED: [Kernel; 5] = [
    Kernel::Tight,
    Kernel::Slabs,
    Kernel::SlabsFlexOut,
    Kernel::Nogaps,
    Kernel::NogapsFlexOut,
];

/// Entry points of the packed kernels: `ENTRIES[kernel][mode]`.
const ENTRIES: [[&str; 5]; 5] = [
    [
        "cmv_beam_gemm_tight_u32",
        "cmv_beam_gemm_tight_u64n",
        "cmv_beam_gemm_tight_u64",
        "cmv_beam_gemm_tight_satu64n",
        "cmv_beam_gemm_tight_satu64",
    ],
    [
        "cmv_beam_gemm_slabs_u32",
        "cmv_beam_gemm_slabs_u64n",
        "cmv_beam_gemm_slabs_u64",
        "cmv_beam_gemm_slabs_satu64n",
        "cmv_beam_gemm_slabs_satu64",
    ],
    [
        "cmv_beam_gemm_slabs_flex_out_u32",
        "cmv_beam_gemm_slabs_flex_out_u64n",
        "cmv_beam_gemm_slabs_flex_out_u64",
        "cmv_beam_gemm_slabs_flex_out_satu64n",
        "cmv_beam_gemm_slabs_flex_out_satu64",
    ],
    [
        "cmv_beam_gemm_nogaps_u32",
        "cmv_beam_gemm_nogaps_u64n",
        "cmv_beam_gemm_nogaps_u64",
        "cmv_beam_gemm_nogaps_satu64n",
        "cmv_beam_gemm_nogaps_satu64",
    ],
    [
        "cmv_beam_gemm_nogaps_flex_out_u32",
        "cmv_beam_gemm_nogaps_flex_out_u64n",
        "cmv_beam_gemm_nogaps_flex_out_u64",
        "cmv_beam_gemm_nogaps_flex_out_satu64n",
        "cmv_beam_gemm_nogaps_flex_out_satu64",
    ],
];

/// The guide's entry points: wrapping, saturating.
pub const GUIDE_ENTRIES: [&str; 2] = ["cmv_beam_gemm_guide_u64", "cmv_beam_gemm_guide_satu64"];

/// The entry point of `kernel` for `mode` (the guide: [`Mode::SatU64n`] and [`Mode::SatU64`]
/// select its saturating entry, every other mode the wrapping one).
pub const fn entry(kernel: Kernel, mode: Mode) -> &'static str {
    let saturating = matches!(mode, Mode::SatU64n | Mode::SatU64);
    let row = match kernel {
        Kernel::Guide => return GUIDE_ENTRIES[saturating as usize],
        Kernel::Tight => 0,
        Kernel::Slabs => 1,
        Kernel::SlabsFlexOut => 2,
        Kernel::Nogaps => 3,
        Kernel::NogapsFlexOut => 4,
    };
    ENTRIES[row][mode.index()]
}

/// The layout code a kernel reads and writes.
pub const fn kernel_layout(kernel: Kernel) -> u32 {
    match kernel {
        Kernel::Guide => crate::layout::NAIVE,
        Kernel::Tight => TIGHT,
        Kernel::Slabs | Kernel::SlabsFlexOut => SLABS,
        Kernel::Nogaps | Kernel::NogapsFlexOut => NOGAPS,
    }
}

/// The grid of a launch for an `m x n` output: `(column blocks, row blocks)`, blocks of
/// `rows x cols` outputs.
pub const fn grid(m: u32, n: u32, block_rows: u32, block_cols: u32) -> (u32, u32) {
    (n.div_ceil(block_cols), m.div_ceil(block_rows))
}

/// The column part of an element's position in a row of a packed matrix, advanced tile by
/// tile without division ([`ColStep`]). `off` is, by layout: `tight` the column (elements);
/// `slabs` the word in the row (`c / k`, `k = 64 / bits`) with `sub = c % k`; `nogaps` the
/// bit in the row's stream (`c * bits`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Col {
    /// See the type.
    pub off: u64,
    /// `slabs`: the element's slot in its word; otherwise 0.
    pub sub: u32,
}

/// What one step of `step` columns adds to a [`Col`] (computed once, with one division).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColStep {
    /// Added to `off`: `tight` `step`, `slabs` `step / k`, `nogaps` `step * bits`.
    pub off: u64,
    /// `slabs`: `step % k`; otherwise 0.
    pub sub: u32,
    /// `slabs`: `k`, the elements per word; otherwise 0.
    pub k: u32,
}

impl Col {
    /// Column `c` of a matrix of `bits` bits in `layout` (`tight`, `slabs` or `nogaps`).
    #[inline(always)]
    pub const fn new(layout: u32, bits: u32, c: u32) -> Col {
        match layout {
            SLABS => {
                let k = 64 / bits;
                Col {
                    off: (c / k) as u64,
                    sub: c % k,
                }
            }
            NOGAPS => Col {
                off: c as u64 * bits as u64,
                sub: 0,
            },
            _ => Col {
                off: c as u64,
                sub: 0,
            },
        }
    }

    /// This column moved by the step `s` describes.
    #[inline(always)]
    pub const fn advance(self, s: ColStep) -> Col {
        let (mut off, mut sub) = (self.off + s.off, self.sub + s.sub);
        if s.k != 0 && sub >= s.k {
            sub -= s.k;
            off += 1;
        }
        Col { off, sub }
    }
}

impl ColStep {
    /// A step of `step` columns for `bits` bits in `layout`.
    #[inline(always)]
    pub const fn new(layout: u32, bits: u32, step: u32) -> ColStep {
        match layout {
            SLABS => {
                let k = 64 / bits;
                ColStep {
                    off: (step / k) as u64,
                    sub: step % k,
                    k,
                }
            }
            NOGAPS => ColStep {
                off: step as u64 * bits as u64,
                sub: 0,
                k: 0,
            },
            _ => ColStep {
                off: step as u64,
                sub: 0,
                k: 0,
            },
        }
    }
}

/// What [`locate`] needs of a matrix besides the column: `row_stride` is the row's words
/// (`slabs`, `nogaps`: `row_words`) or elements (`tight`: the columns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowGeometry {
    /// Layout code (`tight`, `slabs` or `nogaps`).
    pub layout: u32,
    /// Bits per element.
    pub bits: u32,
    /// Words (`slabs`, `nogaps`) or elements (`tight`) per row.
    pub row_stride: u32,
}

impl RowGeometry {
    /// The geometry of a matrix with `cols` columns and `row_words` words per row.
    #[inline(always)]
    pub const fn new(layout: u32, bits: u32, cols: u32, row_words: u32) -> RowGeometry {
        let row_stride = if layout == TIGHT { cols } else { row_words };
        RowGeometry {
            layout,
            bits,
            row_stride,
        }
    }
}

/// Where element `(row, col)` lies: the same [`Place`] as [`crate::layout::place`], computed
/// with shifts and multiplies only (`tight`'s native widths are powers of two).
#[inline(always)]
pub const fn locate(g: RowGeometry, row: u32, col: Col) -> Place {
    let base = row as u64 * g.row_stride as u64;
    match g.layout {
        TIGHT => {
            let t_log = native_bits(g.bits).trailing_zeros();
            let per_log = 6 - t_log;
            let i = base + col.off;
            Place {
                word: i >> per_log,
                shift: ((i as u32) & ((1 << per_log) - 1)) << t_log,
                straddles: false,
            }
        }
        SLABS => Place {
            word: base + col.off,
            shift: col.sub * g.bits,
            straddles: false,
        },
        _ => {
            let shift = (col.off & 63) as u32;
            Place {
                word: base + (col.off >> 6),
                shift,
                straddles: shift + g.bits > 64,
            }
        }
    }
}

#[cfg(all(target_arch = "nvptx64", feature = "entries"))]
mod kernels;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{Geometry, OVF, SAT, finish, place, row_words};

    use crate::testing::Rng;

    #[test]
    fn cursor_matches_place() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for layout in [TIGHT, SLABS, NOGAPS] {
            for bits in 1..=64 {
                for _ in 0..20 {
                    let cols = 1 + (rng.next() % 300) as u32;
                    let rw = row_words(cols as u64, bits, layout) as u32;
                    let g = Geometry {
                        cols,
                        bits,
                        layout,
                        row_words: rw,
                    };
                    let rg = RowGeometry::new(layout, bits, cols, rw);
                    let c0 = (rng.next() % 8) as u32;
                    let step_len = 1 + (rng.next() % 70) as u32;
                    let step = ColStep::new(layout, bits, step_len);
                    let mut col = Col::new(layout, bits, c0);
                    let mut c = c0;
                    while c < cols {
                        let row = (rng.next() % 50) as u32;
                        assert_eq!(
                            locate(rg, row, col),
                            place(g, row, c),
                            "layout {layout} bits {bits} cols {cols} row {row} col {c}"
                        );
                        col = col.advance(step);
                        c += step_len;
                    }
                }
            }
        }
    }

    /// Every mode, run as the kernel runs it and finished, equals the exact result.
    #[test]
    fn modes_are_exact() {
        let mut rng = Rng(12345);
        let widths = [1, 2, 3, 7, 8, 9, 16, 17, 25, 31, 32, 33, 48, 63, 64];
        for &ab in &widths {
            for &bb in &widths {
                for k in [1u64, 2, 3, 17, 64] {
                    for out in [1, 8, 31, 32, 33, 63, 64, ab.max(bb)] {
                        for overflow in [OVF, SAT] {
                            let mode = Mode::select(ab, bb, k, out, overflow);
                            for max in [false, true] {
                                let (mut exact, mut huge, mut acc) = (0u128, false, 0u64);
                                for _ in 0..k {
                                    let (a, b) = if max {
                                        (crate::layout::mask(ab), crate::layout::mask(bb))
                                    } else {
                                        (rng.bits(ab), rng.bits(bb))
                                    };
                                    let (s, c) = exact.overflowing_add(a as u128 * b as u128);
                                    exact = s;
                                    huge |= c;
                                    acc = mode.mac(acc, a, b);
                                }
                                let m = crate::layout::mask(out);
                                let want = if overflow == OVF {
                                    exact as u64 & m
                                } else if huge || exact > m as u128 {
                                    m
                                } else {
                                    exact as u64
                                };
                                assert_eq!(
                                    finish(acc, out, overflow),
                                    want,
                                    "{mode:?} a {ab} b {bb} k {k} out {out} ovf {overflow}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn modes_are_narrowest() {
        assert_eq!(Mode::select(8, 8, 1000, 8, OVF), Mode::U32);
        assert_eq!(Mode::select(64, 64, 1000, 32, OVF), Mode::U32);
        assert_eq!(Mode::select(16, 16, 4, 64, SAT), Mode::U64n);
        assert_eq!(Mode::select(16, 16, 4, 33, OVF), Mode::U64n);
        assert_eq!(Mode::select(33, 16, 4, 64, OVF), Mode::U64);
        assert_eq!(Mode::select(32, 32, 2, 64, SAT), Mode::SatU64n);
        assert_eq!(Mode::select(33, 2, 1 << 40, 64, SAT), Mode::SatU64);
        assert!(guide_saturates(32, 32, 2, 64, SAT));
        assert!(!guide_saturates(64, 64, 2, 64, OVF));
    }

    #[test]
    fn entries_are_distinct_and_named() {
        let mut all: Vec<&str> = GUIDE_ENTRIES.to_vec();
        for k in PACKED {
            for m in MODES {
                let e = entry(k, m);
                assert!(
                    e.starts_with("cmv_beam_gemm_") && e.ends_with(m.name()),
                    "{e}"
                );
                all.push(e);
            }
        }
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n);
        assert_eq!(entry(Kernel::Guide, Mode::U32), "cmv_beam_gemm_guide_u64");
        assert_eq!(
            entry(Kernel::Guide, Mode::SatU64),
            "cmv_beam_gemm_guide_satu64"
        );
    }

    #[test]
    fn tiles_fit() {
        for m in MODES {
            let (tm, tn) = m.tile();
            assert!(tm == 4 || tm == 8);
            assert!(tn == 4 || tn == 8);
            // The loads: BK x block elements spread evenly over the threads.
            assert_eq!((m.block_rows() * BK) % THREADS, 0);
            assert_eq!((m.block_cols() * BK) % THREADS, 0);
            assert!(
                THREADS.is_multiple_of(m.block_cols()) || m.block_cols().is_multiple_of(THREADS)
            );
            assert!(m.smem_bytes() <= 48 * 1024, "{m:?}");
        }
        assert_eq!(grid(1, 1, 128, 128), (1, 1));
        assert_eq!(grid(129, 300, 128, 64), (5, 2));
    }
}
