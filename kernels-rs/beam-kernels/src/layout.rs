//! Where an element of a packed BEAM matrix lies, and the exact arithmetic every kernel
//! shares: which accumulator a product needs and how a sum becomes an output of `out` bits.
//!
//! Pure functions on integers, so the host crate (`beam-pack`), its tests and the kernels
//! call the very same code. The layouts are specified in `docs/BEAM.md`; codes as
//! `beam_pack::Layout`.

/// One `u64` per element.
pub const NAIVE: u32 = 0;
/// One native integer (8, 16, 32 or 64 bits) per element, the native array in the words.
pub const TIGHT: u32 = 1;
/// `floor(64 / b)` whole elements per word; each row starts a new word.
pub const SLABS: u32 = 2;
/// One bit stream per row, padded to a multiple of 64 bits.
pub const NOGAPS: u32 = 3;

/// Wrap: the exact result modulo `2^out`.
pub const OVF: u32 = 0;
/// Saturate: the exact result clamped at `2^out - 1`.
pub const SAT: u32 = 1;

/// The low `bits` bits set (`bits` in 1..=64).
#[inline(always)]
pub const fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// The smallest native width (8, 16, 32, 64) holding `bits` bits.
#[inline(always)]
pub const fn native_bits(bits: u32) -> u32 {
    if bits <= 8 {
        8
    } else if bits <= 16 {
        16
    } else if bits <= 32 {
        32
    } else {
        64
    }
}

/// Words per row of the row-padded layouts (`slabs`, `nogaps`); for `naive` the columns; for
/// `tight` (not row-padded) 0. `bits` in 1..=64.
#[inline(always)]
pub const fn row_words(cols: u64, bits: u32, layout: u32) -> u64 {
    match layout {
        NAIVE => cols,
        SLABS => cols.div_ceil((64 / bits) as u64),
        NOGAPS => (cols * bits as u64).div_ceil(64),
        _ => 0,
    }
}

/// Where one element lies: its first word, the shift of its lowest bit in that word, and
/// whether its high bits continue at the bottom of the next word (only `nogaps`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    /// Index of the first word.
    pub word: u64,
    /// Bit offset of the element in that word.
    pub shift: u32,
    /// The element continues into word `word + 1`.
    pub straddles: bool,
}

/// The geometry of a packed matrix: what [`place`] needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Columns.
    pub cols: u32,
    /// Bits per element, 1..=64.
    pub bits: u32,
    /// Layout code.
    pub layout: u32,
    /// [`row_words`] of the matrix.
    pub row_words: u32,
}

/// Where element `(r, c)` lies (`r`, `c` inside the matrix).
#[inline(always)]
pub const fn place(g: Geometry, r: u32, c: u32) -> Place {
    let (r, c) = (r as u64, c as u64);
    match g.layout {
        NAIVE => Place {
            word: r * g.cols as u64 + c,
            shift: 0,
            straddles: false,
        },
        TIGHT => {
            let t = native_bits(g.bits);
            let per = (64 / t) as u64;
            let i = r * g.cols as u64 + c;
            Place {
                word: i / per,
                shift: (i % per) as u32 * t,
                straddles: false,
            }
        }
        SLABS => {
            let k = (64 / g.bits) as u64;
            Place {
                word: r * g.row_words as u64 + c / k,
                shift: (c % k) as u32 * g.bits,
                straddles: false,
            }
        }
        _ => {
            let bit = c * g.bits as u64;
            let shift = (bit % 64) as u32;
            Place {
                word: r * g.row_words as u64 + bit / 64,
                shift,
                straddles: shift + g.bits > 64,
            }
        }
    }
}

/// The element at `shift` of `lo`, continued in `hi` when it straddles, `bits` wide.
#[inline(always)]
pub const fn extract(lo: u64, hi: u64, shift: u32, bits: u32) -> u64 {
    let mut v = lo >> shift;
    if shift != 0 && shift + bits > 64 {
        v |= hi << (64 - shift);
    }
    v & mask(bits)
}

/// Bits of `ceil(log2(k))` (0 for `k <= 1`): a sum of `k` values below `2^w` is below
/// `2^(w + ceil_log2(k))`.
#[inline(always)]
pub const fn ceil_log2(k: u64) -> u32 {
    if k <= 1 {
        0
    } else {
        64 - (k - 1).leading_zeros()
    }
}

/// The accumulator a product needs to give the exact answer for its overflow behaviour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(target_arch = "nvptx64", derive(core::marker::ConstParamTy))]
pub enum Acc {
    /// 32-bit arithmetic, wrapping: exact modulo 2^32 (`ovf` with `out <= 32`, or any
    /// product whose exact result is below 2^32).
    U32,
    /// 64-bit arithmetic, wrapping: exact modulo 2^64 (`ovf` with `out <= 64`, or any
    /// product whose exact result is below 2^64).
    U64,
    /// 64-bit saturating arithmetic (products and sums clamp at `2^64 - 1`): for `sat` when
    /// the exact result may reach 2^64. Exact after the final clamp at `2^out - 1 <= 2^64 - 1`,
    /// because every term is non-negative: once a partial sum passes `2^out - 1` so does the
    /// whole sum.
    SatU64,
}

/// The narrowest [`Acc`] that gives the exact output for `A` of `a_bits`, `B` of `b_bits`,
/// inner dimension `k`, `out` output bits and `overflow` ([`OVF`] or [`SAT`]).
#[inline(always)]
pub const fn acc_for(a_bits: u32, b_bits: u32, k: u64, out: u32, overflow: u32) -> Acc {
    // Bits of the exact result's upper bound.
    let exact = a_bits + b_bits + ceil_log2(k);
    if overflow == OVF {
        if out <= 32 || exact <= 32 {
            Acc::U32
        } else {
            Acc::U64
        }
    } else if exact <= 32 {
        Acc::U32
    } else if exact <= 64 {
        Acc::U64
    } else {
        Acc::SatU64
    }
}

/// `a * b` clamped at `2^64 - 1`.
#[inline(always)]
pub const fn sat_mul(a: u64, b: u64) -> u64 {
    match a.checked_mul(b) {
        Some(p) => p,
        None => u64::MAX,
    }
}

/// The output of `out` bits (1..=64) from a sum computed with an [`Acc`] that was exact for
/// `overflow`: the low bits for [`OVF`], the clamp at `2^out - 1` for [`SAT`].
#[inline(always)]
pub const fn finish(sum: u64, out: u32, overflow: u32) -> u64 {
    let m = mask(out);
    if overflow == OVF || sum <= m {
        sum & m
    } else {
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceil_log2_bounds_sums() {
        assert_eq!(ceil_log2(0), 0);
        assert_eq!(ceil_log2(1), 0);
        assert_eq!(ceil_log2(2), 1);
        assert_eq!(ceil_log2(3), 2);
        assert_eq!(ceil_log2(4), 2);
        assert_eq!(ceil_log2(5), 3);
        assert_eq!(ceil_log2(1 << 40), 40);
        assert_eq!(ceil_log2((1 << 40) + 1), 41);
    }

    #[test]
    fn acc_is_narrowest_exact() {
        // ovf at out <= 32 wraps in 32 bits whatever the operands.
        assert_eq!(acc_for(64, 64, 1 << 20, 32, OVF), Acc::U32);
        assert_eq!(acc_for(64, 64, 1 << 20, 33, OVF), Acc::U64);
        // 8 x 8 bits over 2^16 terms: below 2^32, exact in 32 bits even for sat.
        assert_eq!(acc_for(8, 8, 1 << 16, 64, SAT), Acc::U32);
        assert_eq!(acc_for(8, 8, (1 << 16) + 1, 64, SAT), Acc::U64);
        assert_eq!(acc_for(32, 31, 2, 64, SAT), Acc::U64);
        assert_eq!(acc_for(32, 32, 2, 64, SAT), Acc::SatU64);
    }

    #[test]
    fn finish_wraps_or_clamps() {
        assert_eq!(finish(0x1ff, 8, OVF), 0xff);
        assert_eq!(finish(0x100, 8, OVF), 0);
        assert_eq!(finish(0x100, 8, SAT), 0xff);
        assert_eq!(finish(0xfe, 8, SAT), 0xfe);
        assert_eq!(finish(u64::MAX, 64, SAT), u64::MAX);
        assert_eq!(finish(u64::MAX, 64, OVF), u64::MAX);
        assert_eq!(sat_mul(1 << 32, 1 << 32), u64::MAX);
        assert_eq!(sat_mul(1 << 31, 1 << 32), 1 << 63);
    }

    #[test]
    fn nogaps_straddle_is_extracted() {
        let g = Geometry {
            cols: 5,
            bits: 25,
            layout: NOGAPS,
            row_words: row_words(5, 25, NOGAPS) as u32,
        };
        assert_eq!(g.row_words, 2);
        let p = place(g, 1, 2);
        assert_eq!(
            p,
            Place {
                word: 2,
                shift: 50,
                straddles: true
            }
        );
        let v = 0x1AB_CDEFu64;
        let (lo, hi) = (v << 50, v >> 14);
        assert_eq!(extract(lo, hi, 50, 25), v);
    }
}
