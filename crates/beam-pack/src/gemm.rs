//! Output widths, overflow behaviours and the reference `C = A x B` (the paper's output
//! strategies `sai`, `c2p2`, `maxv` and overflow behaviours `ovf`, `sat`).

use crate::{BeamError, Layout, PackedMatrix, mask, width_of};

cmv_format::header_code! {
    /// How many bits each output element gets.
    pub enum OutputWidth("output width") {
        /// Same as the input width (the wider of the two operands' widths).
        Sai = 0 => "sai",
        /// The input width rounded up to a power of two: 1, 2, 4, 8, 16, 32 or 64.
        C2p2 = 1 => "c2p2",
        /// The width of an upper bound of the largest output (never too small), at most 64.
        Maxv = 2 => "maxv",
    }
}

cmv_format::header_code! {
    /// What an output too large for its width becomes.
    pub enum Overflow("overflow") {
        /// Wraps: the exact result modulo 2^out.
        Ovf = 0 => "ovf",
        /// Saturates: the exact result clamped at 2^out - 1.
        Sat = 1 => "sat",
    }
}

/// What [`output_bits`] needs of an operand for `maxv`: its largest row sum, largest column
/// sum (both saturating `u128`) and largest element. One pass over the matrix
/// ([`PackedMatrix::stats`]); the GPU side keeps it with the uploaded matrix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OperandStats {
    /// Bits per element.
    pub bits: u32,
    /// The largest sum of a row.
    pub max_row_sum: u128,
    /// The largest sum of a column.
    pub max_col_sum: u128,
    /// The largest element.
    pub max: u64,
}

impl OperandStats {
    /// The statistics of the transposed matrix (row and column sums swapped).
    #[must_use]
    pub const fn transposed(&self) -> OperandStats {
        OperandStats {
            bits: self.bits,
            max_row_sum: self.max_col_sum,
            max_col_sum: self.max_row_sum,
            max: self.max,
        }
    }
}

impl PackedMatrix {
    /// The statistics `maxv` uses.
    pub fn stats(&self) -> OperandStats {
        let mut cols = vec![0u128; self.cols()];
        let (mut max_row_sum, mut max) = (0u128, 0u64);
        for r in 0..self.rows() {
            let mut s = 0u128;
            for (c, col) in cols.iter_mut().enumerate() {
                let v = self.at(r, c);
                max = max.max(v);
                s = s.saturating_add(u128::from(v));
                *col = col.saturating_add(u128::from(v));
            }
            max_row_sum = max_row_sum.max(s);
        }
        OperandStats {
            bits: self.bits(),
            max_row_sum,
            max_col_sum: cols.into_iter().max().unwrap_or(0),
            max,
        }
    }
}

/// The output width of `A x B` under `width` (1..=64).
///
/// `maxv` uses `min(max row sum of A x max of B, max of A x max column sum of B)`, computed
/// in saturating `u128`: every output is at most that bound, so the exact result always fits
/// whenever it is below 2^64 (otherwise the width is 64 and the overflow behaviour applies).
pub fn output_bits(a: &PackedMatrix, b: &PackedMatrix, width: OutputWidth) -> u32 {
    output_bits_from(&a.stats(), &b.stats(), width)
}

/// [`output_bits`] from the operands' [`OperandStats`].
pub fn output_bits_from(a: &OperandStats, b: &OperandStats, width: OutputWidth) -> u32 {
    let input = a.bits.max(b.bits);
    match width {
        OutputWidth::Sai => input,
        OutputWidth::C2p2 => input.next_power_of_two(),
        OutputWidth::Maxv => {
            let bound = a
                .max_row_sum
                .saturating_mul(u128::from(b.max))
                .min(u128::from(a.max).saturating_mul(b.max_col_sum));
            u64::try_from(bound).map_or(64, width_of)
        }
    }
}

/// One exact dot product: the sum modulo 2^128 and whether the exact sum reached 2^128.
fn dot(a: &PackedMatrix, b: &PackedMatrix, i: usize, j: usize) -> (u128, bool) {
    let mut acc = 0u128;
    let mut huge = false;
    for t in 0..a.cols() {
        let p = u128::from(a.at(i, t)) * u128::from(b.at(t, j));
        let (s, carry) = acc.overflowing_add(p);
        acc = s;
        huge |= carry;
    }
    (acc, huge)
}

/// Applies the overflow behaviour to an exact sum (`acc` mod 2^128, `huge` when >= 2^128).
fn finish(acc: u128, huge: bool, bits: u32, overflow: Overflow) -> u64 {
    let m = mask(bits);
    match overflow {
        // 2^bits divides 2^128, so the wrapped u128 sum has the right low bits.
        Overflow::Ovf => (acc as u64) & m,
        Overflow::Sat => {
            if huge || acc > u128::from(m) {
                m
            } else {
                acc as u64
            }
        }
    }
}

/// The reference product `C = A x B` (`A` is `m x k`, `B` is `k x n`, any widths and
/// layouts): each output exact (products in `u128`, the sum tracked past 2^128), then
/// wrapped or clamped to the output width chosen by `width`, packed in `layout`.
///
/// # Errors
/// [`BeamError::GemmShape`] when `A`'s columns differ from `B`'s rows.
pub fn gemm_reference(
    a: &PackedMatrix,
    b: &PackedMatrix,
    width: OutputWidth,
    overflow: Overflow,
    layout: Layout,
) -> Result<PackedMatrix, BeamError> {
    if a.cols() != b.rows() {
        return Err(BeamError::GemmShape {
            a_rows: a.rows(),
            a_cols: a.cols(),
            b_rows: b.rows(),
            b_cols: b.cols(),
        });
    }
    let bits = output_bits(a, b, width);
    let (m, n) = (a.rows(), b.cols());
    let mut out = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let (acc, huge) = dot(a, b, i, j);
            out.push(finish(acc, huge, bits, overflow));
        }
    }
    PackedMatrix::pack(&out, m, n, bits, layout)
}

/// Most columns [`gemv_reference`] takes.
pub const GEMV_MAX_COLS: usize = 16;

/// [`gemm_reference`] for a `B` of 1 to [`GEMV_MAX_COLS`] columns (one to sixteen vectors).
///
/// # Errors
/// [`BeamError::GemvColumns`] for more than 16 columns; as [`gemm_reference`].
pub fn gemv_reference(
    a: &PackedMatrix,
    b: &PackedMatrix,
    width: OutputWidth,
    overflow: Overflow,
    layout: Layout,
) -> Result<PackedMatrix, BeamError> {
    if b.cols() > GEMV_MAX_COLS {
        return Err(BeamError::GemvColumns { cols: b.cols() });
    }
    gemm_reference(a, b, width, overflow, layout)
}
