//! GEMM on integer tensor cores for operands of at most 8 bits, any layout; and for `nogaps`
//! operands of one width in 9..=24 bits as byte planes ([`NOGAPS_PLANE_NAMES`]).
//!
//! A block computes a [`TILE_M`] x [`TILE_N`] tile of `C`, stepping through `K` by
//! [`TILE_K`]. At each step its threads unpack the packed words of `A` (rows x `TILE_K`) and
//! `B` (`TILE_K` x columns) to bytes in shared memory ([`gather8`]: eight elements of a row
//! to the eight bytes of a `u64`, from whichever layout); `B` is transposed on the way
//! ([`transpose4x8`]) so that both operands are `K`-contiguous, as
//! `mma.m16n8k32.row.col.u8.u8.s32` takes them. Eight warps (2 x 4) each own a 64 x 32
//! sub-tile: 4 x 4 MMAs per 32 `K`.
//!
//! The per-width `nogaps` kernels ([`NOGAPS_WIDTH_NAMES`]) load differently: each step's packed
//! words go to a ring of [`RAW_STAGES`] stages in shared memory by `cp.async`, and are
//! unpacked from there ([`chunk_window`], [`spread8`]), 2 blocks per SM.
//!
//! Exactness: a product of two bytes is below 2^16, so the 32-bit accumulators hold the exact
//! sum of up to 2^16 products, and the sum modulo 2^32 of any number. The launcher picks
//! [`layout::acc_for`]: `U32` (the sum modulo 2^32 is all the output needs) or `U64`, where
//! the accumulators are added into 64-bit sums every [`FLUSH_K`] columns of `A`.

use crate::layout::{self, Geometry, NAIVE, NOGAPS, SLABS, TIGHT, mask};

/// Rows of `C` per block.
pub const TILE_M: u32 = 128;
/// Columns of `C` per block.
pub const TILE_N: u32 = 128;
/// `K` per step.
pub const TILE_K: u32 = 64;
/// Threads per block.
pub const THREADS: u32 = 256;
/// Bytes per row of a shared tile (`TILE_K` and 16 bytes of padding, so that the fragment
/// loads of a warp hit 32 different banks).
pub const SMEM_STRIDE: u32 = TILE_K + 16;
/// Shared memory of one buffer: the `A` and `B` tiles of one step.
pub const BUFFER_BYTES: u32 = (TILE_M + TILE_N) * SMEM_STRIDE;
/// Shared memory of one block: two buffers (one step is unpacked while the other is
/// multiplied).
pub const SMEM_BYTES: u32 = 2 * BUFFER_BYTES;
/// `K` between two additions of the 32-bit accumulators into the 64-bit sums (`U64`):
/// `FLUSH_K * 255 * 255 < 2^32`.
pub const FLUSH_K: u32 = 32768;
const _: () = assert!((FLUSH_K as u64) * 255 * 255 < 1 << 32);
const _: () = assert!(FLUSH_K.is_multiple_of(TILE_K));

/// Stages of the raw-word ring of the per-width `nogaps` kernels ([`NOGAPS_WIDTH_NAMES`],
/// [`NOGAPS_PLANE_NAMES`]) up to 16 bits: the packed words of a step are copied to shared
/// memory (`cp.async`) this many steps ahead, then unpacked from there, so no register holds
/// a word in flight. [`raw_stages`] gives each width's.
pub const RAW_STAGES: u32 = 3;

/// The raw stages at width `w`: [`RAW_STAGES`] up to 16 bits, 2 above (three planes of
/// unpacked tiles and 3 stages of 18-24-bit words would pass the 227 KiB of a block). The
/// copies of step `i + stages` are issued after waiting for step `i + 1`
/// (`cp.async.wait_group stages - 2`), so at least 2.
pub const fn raw_stages(w: u32) -> u32 {
    if w > 16 { 2 } else { RAW_STAGES }
}
// A step of a `nogaps` row of `w` bits (padded to whole words) is exactly `w` aligned words of A
// (`TILE_K` = 64 columns) and `2w` of B (`TILE_N` = 128 columns).
const _: () = assert!(TILE_K == 64 && TILE_N == 2 * TILE_K);

/// Words of one raw stage at width `w`: `w` per row of the A tile ([`raw_b_word`] places
/// B's), then the B tile's step in 16 groups of 4 rows of `2w` words, each group followed by
/// one spare word (a chunk's unpacking reads the word after its first, which for the last
/// chunk is the spare).
pub const fn raw_stage_words(w: u32) -> u32 {
    TILE_M * w + (TILE_K / 4) * (8 * w + 1)
}
// Stages stay 16-byte aligned.
const _: () = assert!(raw_stage_words(1).is_multiple_of(2) && raw_stage_words(7).is_multiple_of(2));

/// Where word `word` of row `k` of the B tile's step lies in a raw stage at width `w`.
/// The lanes of a warp unpack rows `4kq + i` for 16 values of `kq`; with rows `4kq` at
/// `kq * (8w + 1)` (an odd stride) those 16 words fall in 16 different bank pairs (a stride
/// of `8w` words, a multiple of 8, would put them in at most 2).
pub const fn raw_b_word(w: u32, k: u32, word: u32) -> u32 {
    TILE_M * w + (k / 4) * (8 * w + 1) + (k % 4) * 2 * w + word
}

/// Dynamic shared memory of the kernel [`kernel_name`] picks for these operands: the two
/// unpacked buffers, and for the per-width `nogaps` kernels the raw ring behind them.
pub const fn smem_bytes(la: u32, lb: u32, a_bits: u32, b_bits: u32) -> u32 {
    if per_width(la, lb, a_bits, b_bits) || plane_width(la, lb, a_bits, b_bits) {
        planes(a_bits) * SMEM_BYTES + raw_stages(a_bits) * 8 * raw_stage_words(a_bits)
    } else {
        SMEM_BYTES
    }
}

/// Whether the per-width `nogaps` kernel of 1..=8 bits runs these operands.
const fn per_width(la: u32, lb: u32, a_bits: u32, b_bits: u32) -> bool {
    la == NOGAPS && lb == NOGAPS && a_bits == b_bits && a_bits >= 1 && a_bits <= 8
}

/// Whether these operands are both `nogaps` of one width in 9..=24 bits: the byte-plane
/// kernels ([`NOGAPS_PLANE_NAMES`]).
const fn plane_width(la: u32, lb: u32, a_bits: u32, b_bits: u32) -> bool {
    la == NOGAPS && lb == NOGAPS && a_bits == b_bits && a_bits >= 9 && a_bits <= MAX_PLANE_BITS
}

/// The widest operands of the byte-plane kernels.
pub const MAX_PLANE_BITS: u32 = 24;

/// Byte planes of an operand of `w` bits in the tensor-core kernels: `ceil(w / 8)`.
pub const fn planes(w: u32) -> u32 {
    w.div_ceil(8)
}

/// Whether a tensor-core kernel multiplies these operands with sums modulo 2^32 (`wide`
/// false) or exact 64-bit sums (`wide` true): any layouts of at most 8 bits, or both
/// `nogaps` of one width in 9..=24 bits with sums modulo 2^32 (the byte-plane kernels).
pub const fn supports(la: u32, lb: u32, a_bits: u32, b_bits: u32, wide: bool) -> bool {
    (a_bits >= 1 && a_bits <= 8 && b_bits >= 1 && b_bits <= 8)
        || (plane_width(la, lb, a_bits, b_bits) && !wide)
}

/// The low `n` bytes set (`n` in 0..=8).
#[inline(always)]
pub const fn byte_mask(n: u32) -> u64 {
    if n >= 8 {
        u64::MAX
    } else {
        (1u64 << (8 * n)) - 1
    }
}

/// `lo` shifted right by `s` bits with `hi`'s low bits shifted in (`s` in 0..64).
#[inline(always)]
const fn funnel(lo: u64, hi: u64, s: u32) -> u64 {
    if s == 0 {
        lo
    } else {
        (lo >> s) | (hi << (64 - s))
    }
}

/// Elements `c0 .. c0 + 8` of row `row` of a matrix of `rows` rows with geometry `g` and
/// `bits <= 8`, as the eight bytes of a `u64` (element `c0 + i` in byte `i`); elements outside
/// the matrix are 0. `word(i)` reads word `i`; it is called only for words that hold one of
/// those elements. [`fetch8`] then [`unpack8`].
#[inline(always)]
pub fn gather8(word: impl Fn(u64) -> u64, g: Geometry, rows: u32, row: u32, c0: u32) -> u64 {
    unpack8(fetch8(word, g, rows, row, c0), g, rows, row, c0)
}

/// The loads of [`gather8`]: the (at most) two words holding elements `c0 .. c0 + 8` of
/// `row` (`tight`, `slabs`, `nogaps`), or, for `naive`, the eight bytes already (eight
/// words). Split from [`unpack8`] so that a kernel can issue the next step's loads before it
/// needs them.
#[inline(always)]
pub fn fetch8(word: impl Fn(u64) -> u64, g: Geometry, rows: u32, row: u32, c0: u32) -> [u64; 2] {
    if row >= rows || c0 >= g.cols {
        return [0, 0];
    }
    let n = if g.cols - c0 < 8 { g.cols - c0 } else { 8 };
    let b = g.bits;
    let (r, c0_64) = (row as u64, c0 as u64);
    match g.layout {
        NAIVE => {
            let m = mask(b);
            let base = r * g.cols as u64 + c0_64;
            let mut v = 0u64;
            let mut i = 0;
            while i < n {
                v |= (word(base + i as u64) & m) << (8 * i);
                i += 1;
            }
            [v, 0]
        }
        TIGHT => {
            // 8-bit natives: byte `r * cols + c`.
            let first = r * g.cols as u64 + c0_64;
            let s = (first % 8) as u32 * 8;
            let hi = if s + 8 * n > 64 {
                word(first / 8 + 1)
            } else {
                0
            };
            [word(first / 8), hi]
        }
        SLABS => {
            let k = 64 / b;
            let w0 = c0 / k;
            let base = r * g.row_words as u64 + w0 as u64;
            let hi = if (c0 + n - 1) / k > w0 {
                word(base + 1)
            } else {
                0
            };
            [word(base), hi]
        }
        _ => {
            let bit = c0_64 * b as u64;
            let s = (bit % 64) as u32;
            let w = r * g.row_words as u64 + bit / 64;
            let hi = if s + n * b > 64 { word(w + 1) } else { 0 };
            [word(w), hi]
        }
    }
}

/// The eight bytes of [`gather8`] from the words [`fetch8`] loaded.
#[inline(always)]
pub fn unpack8([lo, hi]: [u64; 2], g: Geometry, rows: u32, row: u32, c0: u32) -> u64 {
    if row >= rows || c0 >= g.cols {
        return 0;
    }
    let n = if g.cols - c0 < 8 { g.cols - c0 } else { 8 };
    let b = g.bits;
    let m = mask(b);
    let v = match g.layout {
        NAIVE => lo,
        TIGHT => {
            let first = row as u64 * g.cols as u64 + c0 as u64;
            funnel(lo, hi, (first % 8) as u32 * 8)
        }
        SLABS => {
            let k = 64 / b;
            let w0 = c0 / k;
            let mut v = 0u64;
            let mut i = 0;
            while i < 8 {
                let c = c0 + i;
                let src = if c / k == w0 { lo } else { hi };
                v |= ((src >> ((c % k) * b)) & m) << (8 * i);
                i += 1;
            }
            v
        }
        _ => {
            let win = funnel(lo, hi, ((c0 as u64 * b as u64) % 64) as u32);
            if b == 8 { win } else { spread8(win, b) }
        }
    };
    v & byte_mask(n)
}

/// Eight elements of `b < 8` bits, element `i` at bits `i * b ..` of `win`, to the eight bytes
/// of a `u64` (element `i` in byte `i`). Two halves of four elements in 32-bit arithmetic: a
/// constant `b` makes each half three shifts and four masks, where a loop over the `u64` costs
/// each element 64-bit shifts (two instructions each).
#[inline(always)]
pub const fn spread8(win: u64, b: u32) -> u64 {
    spread4(win as u32, b) as u64 | (spread4((win >> (4 * b)) as u32, b) as u64) << 32
}

/// Four elements of `b < 8` bits at bits `i * b ..` of `x` (bits above `4 * b` ignored) to the
/// four bytes of a `u32`.
#[inline(always)]
pub const fn spread4(x: u32, b: u32) -> u32 {
    let m = mask(b) as u32;
    (x & m)
        | ((x << (8 - b)) & (m << 8))
        | ((x << (16 - 2 * b)) & (m << 16))
        | ((x << (24 - 3 * b)) & (m << 24))
}

/// The 32-bit words a chunk of 8 elements of `w` bits spans when it starts at byte
/// `j * w` (`j` in 0..8) of a word-aligned row segment: its bytes `o .. o + w` from the first
/// aligned word, `o = j * w % 4` (the `nogaps` chunk of the per-width kernels).
pub const fn chunk_words(w: u32) -> u32 {
    let mut end = 0;
    let mut j = 0;
    while j < 8 {
        let e = (j * w) % 4 + w;
        if e > end {
            end = e;
        }
        j += 1;
    }
    end.div_ceil(4)
}

/// The eight bytes starting at byte `o` (0..4) of the little-endian words `x` (the chunk's
/// packed bits in the low `8w`, the [`spread8`] input): two `prmt`s with a selector of `o`.
#[inline(always)]
pub fn chunk_window(x: [u32; 3], o: u32) -> u64 {
    use cmv_device::prmt;
    let sel = 0x3210 + 0x1111 * o;
    prmt(x[0], x[1], sel) as u64 | (prmt(x[1], x[2], sel) as u64) << 32
}

/// [`chunk_window`] for 9..=24 bits: the 24 bytes starting at byte `o` (0..4) of `x`, as six
/// words (those past the chunk's `w` bytes unused).
#[inline(always)]
pub fn chunk_window_wide(x: [u32; 7], o: u32) -> [u32; 6] {
    use cmv_device::prmt;
    let sel = 0x3210 + 0x1111 * o;
    core::array::from_fn(|i| prmt(x[i], x[i + 1], sel))
}

/// Eight elements of `w` (9..=24) bits, element `i` at bits `i * w ..` of `win`, as `P` byte
/// planes (`P = ceil(w / 8)`): plane `p` holds byte `p` of element `i` in its byte `i`.
#[inline(always)]
pub fn spread_planes<const P: usize>(win: [u32; 6], w: u32) -> [u64; P] {
    use cmv_device::prmt;
    let m = if w >= 32 { u32::MAX } else { (1u32 << w) - 1 };
    let e = |i: u32| -> u32 {
        let (k, s) = ((i * w / 32) as usize, i * w % 32);
        let v = if s + w > 32 {
            (win[k] >> s) | (win[k + 1] << (32 - s))
        } else {
            win[k] >> s
        };
        v & m
    };
    if P == 2 {
        // Up to 16 bits: two elements per word, then the low and the high bytes of four
        // (2 `prmt` per plane and 4 elements, against 3 below: 5-6% faster at 9-16 bits).
        let q: [u32; 4] = core::array::from_fn(|i| e(2 * i as u32) | e(2 * i as u32 + 1) << 16);
        return core::array::from_fn(|p| {
            let sel = if p == 0 { 0x6420 } else { 0x7531 };
            prmt(q[0], q[1], sel) as u64 | (prmt(q[2], q[3], sel) as u64) << 32
        });
    }
    let v: [u32; 8] = core::array::from_fn(|i| e(i as u32));
    core::array::from_fn(|p| {
        // Byte p of four elements: two pairs, then the pairs' halves.
        let sel = (p as u32) | (p as u32 + 4) << 4;
        let quad = |q: usize| {
            prmt(
                prmt(v[4 * q], v[4 * q + 1], sel),
                prmt(v[4 * q + 2], v[4 * q + 3], sel),
                0x5410,
            )
        };
        quad(0) as u64 | (quad(1) as u64) << 32
    })
}

/// Four rows of eight bytes (`r[i]` byte `j` = element `(i, j)`) to eight columns of four
/// bytes (`out[j]` byte `i` = element `(i, j)`): the transpose that makes `B` `K`-contiguous.
#[inline(always)]
pub fn transpose4x8(r: [u64; 4]) -> [u32; 8] {
    use cmv_device::prmt;
    let lo = [r[0] as u32, r[1] as u32, r[2] as u32, r[3] as u32];
    let hi = [
        (r[0] >> 32) as u32,
        (r[1] >> 32) as u32,
        (r[2] >> 32) as u32,
        (r[3] >> 32) as u32,
    ];
    let t4 = |q: [u32; 4]| -> [u32; 4] {
        let t0 = prmt(q[0], q[1], 0x5140);
        let t1 = prmt(q[2], q[3], 0x5140);
        let t2 = prmt(q[0], q[1], 0x7362);
        let t3 = prmt(q[2], q[3], 0x7362);
        [
            prmt(t0, t1, 0x5410),
            prmt(t0, t1, 0x7632),
            prmt(t2, t3, 0x5410),
            prmt(t2, t3, 0x7632),
        ]
    };
    let a = t4(lo);
    let b = t4(hi);
    [a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]]
}

/// "Any layout": the kernel reads the layout from the parameters.
pub const ANY_LAYOUT: u32 = u32::MAX;

/// The per-width `nogaps` entry points: `(narrow, wide)` at index `bits - 1`.
pub const NOGAPS_WIDTH_NAMES: [(&str, &str); 8] = [
    (
        "cmv_beam_gemm_mma_nogaps_b1",
        "cmv_beam_gemm_mma_nogaps_b1_wide",
    ),
    (
        "cmv_beam_gemm_mma_nogaps_b2",
        "cmv_beam_gemm_mma_nogaps_b2_wide",
    ),
    (
        "cmv_beam_gemm_mma_nogaps_b3",
        "cmv_beam_gemm_mma_nogaps_b3_wide",
    ),
    (
        "cmv_beam_gemm_mma_nogaps_b4",
        "cmv_beam_gemm_mma_nogaps_b4_wide",
    ),
    (
        "cmv_beam_gemm_mma_nogaps_b5",
        "cmv_beam_gemm_mma_nogaps_b5_wide",
    ),
    (
        "cmv_beam_gemm_mma_nogaps_b6",
        "cmv_beam_gemm_mma_nogaps_b6_wide",
    ),
    (
        "cmv_beam_gemm_mma_nogaps_b7",
        "cmv_beam_gemm_mma_nogaps_b7_wide",
    ),
    (
        "cmv_beam_gemm_mma_nogaps_b8",
        "cmv_beam_gemm_mma_nogaps_b8_wide",
    ),
];

/// The byte-plane entry points for `nogaps` operands of one width in 9..=24 bits (sums
/// modulo 2^32 only), at index `bits - 9`.
pub const NOGAPS_PLANE_NAMES: [&str; 16] = [
    "cmv_beam_gemm_mma_nogaps_b9",
    "cmv_beam_gemm_mma_nogaps_b10",
    "cmv_beam_gemm_mma_nogaps_b11",
    "cmv_beam_gemm_mma_nogaps_b12",
    "cmv_beam_gemm_mma_nogaps_b13",
    "cmv_beam_gemm_mma_nogaps_b14",
    "cmv_beam_gemm_mma_nogaps_b15",
    "cmv_beam_gemm_mma_nogaps_b16",
    "cmv_beam_gemm_mma_nogaps_b17",
    "cmv_beam_gemm_mma_nogaps_b18",
    "cmv_beam_gemm_mma_nogaps_b19",
    "cmv_beam_gemm_mma_nogaps_b20",
    "cmv_beam_gemm_mma_nogaps_b21",
    "cmv_beam_gemm_mma_nogaps_b22",
    "cmv_beam_gemm_mma_nogaps_b23",
    "cmv_beam_gemm_mma_nogaps_b24",
];

/// The entry point for A in layout `la` of `a_bits`, B in `lb` of `b_bits` (codes), with
/// 64-bit sums or not, for operands [`supports`] accepts: both `nogaps` of one width run a
/// kernel compiled for that layout and width (every shift and mask a constant; 9..=24 bits
/// as two or three byte planes); one layout shared by A and B, a kernel compiled for that layout;
/// `mixed` otherwise.
pub const fn kernel_name(la: u32, lb: u32, a_bits: u32, b_bits: u32, wide: bool) -> &'static str {
    if plane_width(la, lb, a_bits, b_bits) && !wide {
        return NOGAPS_PLANE_NAMES[a_bits as usize - 9];
    }
    if per_width(la, lb, a_bits, b_bits) {
        let (narrow, w) = NOGAPS_WIDTH_NAMES[a_bits as usize - 1];
        return if wide { w } else { narrow };
    }
    let l = if la == lb { la } else { ANY_LAYOUT };
    match (l, wide) {
        (NAIVE, false) => "cmv_beam_gemm_mma_naive",
        (NAIVE, true) => "cmv_beam_gemm_mma_naive_wide",
        (TIGHT, false) => "cmv_beam_gemm_mma_tight",
        (TIGHT, true) => "cmv_beam_gemm_mma_tight_wide",
        (SLABS, false) => "cmv_beam_gemm_mma_slabs",
        (SLABS, true) => "cmv_beam_gemm_mma_slabs_wide",
        (NOGAPS, false) => "cmv_beam_gemm_mma_nogaps",
        (NOGAPS, true) => "cmv_beam_gemm_mma_nogaps_wide",
        (_, false) => "cmv_beam_gemm_mma_mixed",
        (_, true) => "cmv_beam_gemm_mma_mixed_wide",
    }
}

/// Whether the kernel's 64-bit sums are needed: [`layout::acc_for`] is not `U32`.
#[inline(always)]
pub const fn needs_wide(a_bits: u32, b_bits: u32, k: u64, out: u32, overflow: u32) -> bool {
    !matches!(
        layout::acc_for(a_bits, b_bits, k, out, overflow),
        layout::Acc::U32
    )
}

#[cfg(all(target_arch = "nvptx64", feature = "entries"))]
mod kernel {
    use super::*;
    use crate::access::store;
    use crate::{GemmParams, PackedOut, PackedRef};
    use cmv_device::{
        block_idx_x, block_idx_y, cp_async_8_zfill, cp_async_commit, cp_async_wait_at_most,
        dyn_smem_addr, lane_id, ld_nc_u64, mma_m16n8k32_u8, sync_threads, thread_idx_x, warp_id,
    };
    use core::arch::asm;

    #[inline(always)]
    unsafe fn lds_u32(a: u32) -> u32 {
        let r: u32;
        // SAFETY: the caller guarantees an aligned address inside shared memory.
        unsafe {
            asm!("ld.shared.u32 {r}, [{a}];", a = in(reg32) a, r = out(reg32) r,
                 options(readonly, nostack));
        }
        r
    }

    #[inline(always)]
    unsafe fn lds_u64(a: u32) -> u64 {
        let r: u64;
        // SAFETY: the caller guarantees an aligned address inside shared memory.
        unsafe {
            asm!("ld.shared.u64 {r}, [{a}];", a = in(reg32) a, r = out(reg64) r,
                 options(readonly, nostack));
        }
        r
    }

    #[inline(always)]
    unsafe fn sts_u32(a: u32, v: u32) {
        // SAFETY: the caller guarantees an aligned address inside shared memory.
        unsafe {
            asm!("st.shared.u32 [{a}], {v};", a = in(reg32) a, v = in(reg32) v, options(nostack))
        };
    }

    #[inline(always)]
    unsafe fn sts_u64(a: u32, v: u64) {
        // SAFETY: the caller guarantees an aligned address inside shared memory.
        unsafe {
            asm!("st.shared.u64 [{a}], {v};", a = in(reg32) a, v = in(reg64) v, options(nostack))
        };
    }

    /// `m`'s geometry, its layout the constant `L` unless `L` is [`ANY_LAYOUT`] (so that a
    /// kernel for one layout compiles only that layout's code), its width the constant `W`
    /// unless `W` is 0.
    #[inline(always)]
    fn geometry<const L: u32, const W: u32>(m: &PackedRef) -> Geometry {
        let mut g = m.geometry();
        if L != ANY_LAYOUT {
            g.layout = L;
        }
        if W != 0 {
            g.bits = W;
        }
        g
    }

    /// This thread's share of a step: A chunks `(row, 8j)` for `q = tid + THREADS * i`
    /// (`row = q / 8`, `j = q % 8`, `i` in 0..4), and the B unit of rows `4kq ..` and columns
    /// `8nj ..` (`kq = tid % 16` varies fastest within a warp, so the transposed stores of a
    /// warp fall in 16 banks).
    #[inline(always)]
    const fn a_at(tid: u32, i: u32) -> (u32, u32) {
        ((tid + THREADS * i) / 8, (tid + THREADS * i) % 8)
    }

    /// The words of this thread's share of step `k0` ([`fetch8`]): 4 chunks of A, 4 of B.
    ///
    /// # Safety
    /// `a` and `b` describe live buffers of the words their geometries imply.
    #[inline(always)]
    unsafe fn fetch_step<const LA: u32, const LB: u32, const W: u32>(
        a: PackedRef,
        b: PackedRef,
        tid: u32,
        m0: u32,
        n0: u32,
        k0: u32,
    ) -> [[u64; 2]; 8] {
        let (aw, bw) = (a.words.as_ptr(), b.words.as_ptr());
        // SAFETY (both): fetch8 reads only words holding an element of the matrix.
        let load_a = move |i: u64| unsafe { ld_nc_u64(aw.add(i as usize)) };
        let load_b = move |i: u64| unsafe { ld_nc_u64(bw.add(i as usize)) };
        let (ga, gb) = (geometry::<LA, W>(&a), geometry::<LB, W>(&b));
        let fa = move |i: u32| {
            let (row, j) = a_at(tid, i);
            fetch8(load_a, ga, a.rows, m0 + row, k0 + 8 * j)
        };
        let (kq, nj) = (tid % 16, tid / 16);
        let fb = move |i: u32| fetch8(load_b, gb, b.rows, k0 + 4 * kq + i, n0 + 8 * nj);
        [fa(0), fa(1), fa(2), fa(3), fb(0), fb(1), fb(2), fb(3)]
    }

    /// Unpacks the words [`fetch_step`] loaded and stores them to the shared tiles: A as
    /// rows of bytes, B transposed ([`transpose4x8`]).
    ///
    /// # Safety
    /// The block has [`SMEM_BYTES`] of shared memory at `a_smem` (A) and `b_smem` (B).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    unsafe fn store_step<const LA: u32, const LB: u32, const W: u32>(
        raw: [[u64; 2]; 8],
        a: PackedRef,
        b: PackedRef,
        tid: u32,
        m0: u32,
        n0: u32,
        k0: u32,
        a_smem: u32,
        b_smem: u32,
    ) {
        let ga = geometry::<LA, W>(&a);
        let store_a = move |i: u32, w: [u64; 2]| {
            let (row, j) = a_at(tid, i);
            let v = unpack8(w, ga, a.rows, m0 + row, k0 + 8 * j);
            // SAFETY: inside the A tile (row < 128, 8j + 8 <= 64), 8-byte aligned.
            unsafe { sts_u64(a_smem + row * SMEM_STRIDE + 8 * j, v) };
        };
        // Spelled out (not a loop) so that `raw` stays in registers.
        store_a(0, raw[0]);
        store_a(1, raw[1]);
        store_a(2, raw[2]);
        store_a(3, raw[3]);
        let gb = geometry::<LB, W>(&b);
        let (kq, nj) = (tid % 16, tid / 16);
        let (k, n) = (k0 + 4 * kq, n0 + 8 * nj);
        let r = [
            unpack8(raw[4], gb, b.rows, k, n),
            unpack8(raw[5], gb, b.rows, k + 1, n),
            unpack8(raw[6], gb, b.rows, k + 2, n),
            unpack8(raw[7], gb, b.rows, k + 3, n),
        ];
        let cols = transpose4x8(r);
        for (c, &w) in cols.iter().enumerate() {
            let n = 8 * nj + c as u32;
            // SAFETY: inside the B tile (n < 128, 4kq + 4 <= 64), 4-byte aligned.
            unsafe { sts_u32(b_smem + n * SMEM_STRIDE + 4 * kq, w) };
        }
    }

    /// The kernel body; `WIDE` adds the 32-bit accumulators into 64-bit sums every
    /// [`FLUSH_K`]; `W` (when not 0) is the width of both operands.
    ///
    /// # Safety
    /// Launched with [`THREADS`] threads, [`SMEM_BYTES`] of dynamic shared memory, a grid of
    /// `(ceil(n / TILE_N), ceil(m / TILE_M))`; `p` validated by the launcher (operands of at
    /// most 8 bits whose words match their geometry, `A.cols == B.rows`, `C` of `A.rows x
    /// B.cols`, zeroed unless naive).
    #[inline(always)]
    unsafe fn gemm<const WIDE: bool, const LA: u32, const LB: u32, const W: u32>(p: &GemmParams) {
        let tid = thread_idx_x();
        let (lane, warp) = (lane_id(), warp_id());
        let m0 = block_idx_y() * TILE_M;
        let n0 = block_idx_x() * TILE_N;
        let k_total = p.a.cols;
        let smem = dyn_smem_addr();
        let (a, b) = (p.a, p.b);

        let mut acc: Acc32 = [[[0u32; 4]; 4]; 4];
        let mut wide: Acc64 = [[[0u64; 4]; 4]; 4];
        // SAFETY: forwarded (the launcher's guarantees on A and B).
        let mut raw = unsafe { fetch_step::<LA, LB, W>(a, b, tid, m0, n0, 0) };
        // SAFETY: buffer 0 of the block's shared memory.
        unsafe {
            store_step::<LA, LB, W>(raw, a, b, tid, m0, n0, 0, smem, smem + TILE_M * SMEM_STRIDE)
        };
        if TILE_K < k_total {
            // SAFETY: as above.
            raw = unsafe { fetch_step::<LA, LB, W>(a, b, tid, m0, n0, TILE_K) };
        }
        // SAFETY: all threads reach it.
        unsafe { sync_threads() };
        let mut k0 = 0u32;
        let mut cur = 0u32;
        while k0 < k_total {
            let a_smem = smem + cur * BUFFER_BYTES;
            let b_smem = a_smem + TILE_M * SMEM_STRIDE;
            // SAFETY: the unpacked tiles of buffer `cur`, complete since the last barrier.
            unsafe { mma_step(&mut acc, a_smem, b_smem, lane, warp) };
            // The next step goes to the other buffer (read by no one since the last
            // barrier); its words were loaded a whole step ago, the one after loads now.
            if k0 + TILE_K < k_total {
                let next = smem + (1 - cur) * BUFFER_BYTES;
                let k1 = k0 + TILE_K;
                // SAFETY: the other buffer of the block's shared memory.
                unsafe {
                    store_step::<LA, LB, W>(
                        raw,
                        a,
                        b,
                        tid,
                        m0,
                        n0,
                        k1,
                        next,
                        next + TILE_M * SMEM_STRIDE,
                    )
                };
                if k1 + TILE_K < k_total {
                    // SAFETY: as above.
                    raw = unsafe { fetch_step::<LA, LB, W>(a, b, tid, m0, n0, k1 + TILE_K) };
                }
            }
            // SAFETY: all threads reach it.
            unsafe { sync_threads() };
            cur = 1 - cur;
            k0 += TILE_K;
            if WIDE && (k0 % FLUSH_K == 0 || k0 >= k_total) {
                flush(&mut acc, &mut wide);
            }
        }
        // SAFETY: forwarded.
        unsafe { epilogue::<WIDE>(p, &acc, &wide, m0, n0, lane, warp) };
    }

    /// The MMAs of one step: this warp's 64 x 32 sub-tile of the unpacked A and B tiles at
    /// `a_smem` and `b_smem` (4 x 4 MMAs per 32 `K`).
    ///
    /// # Safety
    /// Both tiles lie in the block's shared memory and are complete (a barrier since they
    /// were written); every lane of the warp calls it.
    #[inline(always)]
    unsafe fn mma_step(acc: &mut Acc32, a_smem: u32, b_smem: u32, lane: u32, warp: u32) {
        let (g, t) = (lane / 4, lane % 4);
        let (wm, wn) = (warp / 4, warp % 4);
        for s in 0..TILE_K / 32 {
            let kb = 32 * s + 4 * t;
            // B's 4 fragments first, then one A fragment at a time: 12 registers of fragments
            // live instead of 24.
            let mut bf = [[0u32; 2]; 4];
            for (ni, f) in bf.iter_mut().enumerate() {
                let c = (32 * wn + 8 * ni as u32 + g) * SMEM_STRIDE;
                // SAFETY: inside the B tile, 4-byte aligned.
                *f = unsafe { [lds_u32(b_smem + c + kb), lds_u32(b_smem + c + kb + 16)] };
            }
            for mi in 0..4 {
                let r0 = (64 * wm + 16 * mi as u32 + g) * SMEM_STRIDE;
                let r1 = r0 + 8 * SMEM_STRIDE;
                // SAFETY: inside the A tile, 4-byte aligned.
                let af = unsafe {
                    [
                        lds_u32(a_smem + r0 + kb),
                        lds_u32(a_smem + r1 + kb),
                        lds_u32(a_smem + r0 + kb + 16),
                        lds_u32(a_smem + r1 + kb + 16),
                    ]
                };
                for ni in 0..4 {
                    // SAFETY: every lane of every warp runs the same MMAs.
                    acc[mi][ni] = unsafe { mma_m16n8k32_u8(af, bf[ni], acc[mi][ni]) };
                }
            }
        }
    }

    /// The 32-bit accumulators of a warp: 4 x 4 MMA tiles of 4 per lane.
    type Acc32 = [[[u32; 4]; 4]; 4];
    /// Their 64-bit sums (`WIDE`).
    type Acc64 = [[[u64; 4]; 4]; 4];

    /// Adds the 32-bit accumulators into the 64-bit sums and clears them.
    #[inline(always)]
    fn flush(acc: &mut Acc32, wide: &mut Acc64) {
        for mi in 0..4 {
            for ni in 0..4 {
                for e in 0..4 {
                    wide[mi][ni][e] += acc[mi][ni][e] as u64;
                    acc[mi][ni][e] = 0;
                }
            }
        }
    }

    /// Writes this lane's outputs of the block's tile at `(m0, n0)`: `wide` (`WIDE`) or `acc`.
    ///
    /// # Safety
    /// As `gemm` (each element of C belongs to one lane of one warp).
    #[inline(always)]
    unsafe fn epilogue<const WIDE: bool>(
        p: &GemmParams,
        acc: &Acc32,
        wide: &Acc64,
        m0: u32,
        n0: u32,
        lane: u32,
        warp: u32,
    ) {
        let (g, t) = (lane / 4, lane % 4);
        let (wm, wn) = (warp / 4, warp % 4);
        let row0 = m0 + 64 * wm + g;
        let col0 = n0 + 32 * wn + 2 * t;
        for mi in 0..4 {
            for ni in 0..4 {
                let sums: [u64; 4] = if WIDE {
                    wide[mi][ni]
                } else {
                    let a = acc[mi][ni];
                    [a[0] as u64, a[1] as u64, a[2] as u64, a[3] as u64]
                };
                // SAFETY: forwarded.
                unsafe {
                    store4(
                        p.c,
                        p.overflow,
                        row0 + 16 * mi as u32,
                        col0 + 8 * ni as u32,
                        sums,
                    )
                };
            }
        }
    }

    /// Issues this thread's copies of step `k0`'s packed words (both operands `nogaps` of `W`
    /// bits) to the raw stage at `dst` ([`raw_stage_words`]): word `q = tid + THREADS * c`
    /// of the stage, A's rows first (`W` words each), then B's (`2W`, placed by
    /// [`raw_b_word`]); a word outside its matrix is not read and its destination becomes
    /// zero.
    ///
    /// # Safety
    /// `a` and `b` describe live buffers of the words their geometries imply; `dst` is a
    /// raw stage in the block's shared memory.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    unsafe fn issue_raw<const W: u32>(
        a: PackedRef,
        b: PackedRef,
        tid: u32,
        m0: u32,
        n0: u32,
        k0: u32,
        dst: u32,
    ) {
        let (aw, bw) = (a.words.as_ptr(), b.words.as_ptr());
        // Word offsets of the step in a row of A and of the block's columns in a row of B.
        let (ka, nb) = (k0 / 64 * W, n0 / 64 * W);
        for c in 0..W {
            let q = tid + THREADS * c;
            // Warp-uniform: TILE_M * W is a multiple of 128.
            let (src, ok, at) = if q < TILE_M * W {
                let (r, w) = (q / W, ka + q % W);
                let row = m0 + r;
                let i = row as usize * a.row_words as usize + w as usize;
                (aw.wrapping_add(i), row < a.rows && w < a.row_words, q)
            } else {
                let q = q - TILE_M * W;
                let (k, w) = (q / (2 * W), q % (2 * W));
                let row = k0 + k;
                let i = row as usize * b.row_words as usize + (nb + w) as usize;
                (
                    bw.wrapping_add(i),
                    row < b.rows && nb + w < b.row_words,
                    raw_b_word(W, k, w),
                )
            };
            // SAFETY: `src` is a word of its matrix when `ok` (row and word inside it); else
            // nothing is read. `dst + 8 at` is inside the stage, 8-byte aligned.
            unsafe {
                cp_async_8_zfill(
                    dst + 8 * at,
                    if ok { src } else { aw },
                    if ok { 8 } else { 0 },
                )
            };
        }
    }

    /// Unpacks a step from the raw stage at `raw` ([`issue_raw`]) to the shared tiles at
    /// `a_smem` and `b_smem`: this thread's 4 chunks of A and its 4 x 8 unit of B, as
    /// [`store_step`] does from words in registers. No bounds: the stage holds zeros for
    /// every word outside the matrices and a canonical packing zeros in every other bit
    /// outside them, so such elements unpack to 0.
    ///
    /// # Safety
    /// The stage holds the step's words, visible to this thread (waited for, then a
    /// barrier); the tiles lie in the block's shared memory and no one reads them until the
    /// next barrier.
    #[inline(always)]
    unsafe fn unpack_raw<const W: u32>(tid: u32, raw: u32, a_smem: u32, b_smem: u32) {
        // The chunk starting at shared byte `at` (a chunk of 8 elements at byte j * W of a
        // row segment; the segment word-aligned).
        // SAFETY (all): the words of a chunk lie in its row segment, or (for the last
        // chunk's last word) in the stage's spare word; aligned.
        let chunk = |at: u32| -> u64 {
            if W == 8 {
                return unsafe { lds_u64(at) };
            }
            let (w0, o) = (at & !3, at & 3);
            let n = chunk_words(W);
            let x = unsafe {
                [
                    lds_u32(w0),
                    if n > 1 { lds_u32(w0 + 4) } else { 0 },
                    if n > 2 { lds_u32(w0 + 8) } else { 0 },
                ]
            };
            spread8(chunk_window(x, o), W)
        };
        let j = tid % 8;
        let a_raw = raw + 8 * W * (tid / 8) + j * W;
        for i in 0..4 {
            let v = chunk(a_raw + 8 * W * (THREADS / 8) * i);
            let row = (tid + THREADS * i) / 8;
            // SAFETY: inside the A tile (row < 128, 8j + 8 <= 64), 8-byte aligned.
            unsafe { sts_u64(a_smem + row * SMEM_STRIDE + 8 * j, v) };
        }
        let (kq, nj) = (tid % 16, tid / 16);
        let b_raw = raw + 8 * raw_b_word(W, 4 * kq, 0) + nj * W;
        let r = [
            chunk(b_raw),
            chunk(b_raw + 8 * 2 * W),
            chunk(b_raw + 8 * 4 * W),
            chunk(b_raw + 8 * 6 * W),
        ];
        let cols = transpose4x8(r);
        for (c, &w) in cols.iter().enumerate() {
            let n = 8 * nj + c as u32;
            // SAFETY: inside the B tile (n < 128, 4kq + 4 <= 64), 4-byte aligned.
            unsafe { sts_u32(b_smem + n * SMEM_STRIDE + 4 * kq, w) };
        }
    }

    /// Unpacks the raw stage at `raw` into the buffer at `buf`: [`unpack_raw`] up to 8 bits,
    /// [`unpack_raw_planes`] above.
    ///
    /// # Safety
    /// As [`unpack_raw`], `buf` a buffer of `planes(W)` tile pairs.
    #[inline(always)]
    unsafe fn unpack_any<const W: u32>(tid: u32, raw: u32, buf: u32) {
        // SAFETY: forwarded.
        unsafe {
            if W > 16 {
                unpack_raw_planes::<W, 3>(tid, raw, buf)
            } else if W > 8 {
                unpack_raw_planes::<W, 2>(tid, raw, buf)
            } else {
                unpack_raw::<W>(tid, raw, buf, buf + TILE_M * SMEM_STRIDE)
            }
        }
    }

    /// [`unpack_raw`] for 9..=24 bits in `P` byte planes: every chunk's byte `p` goes to the
    /// tile pair at `buf + p * BUFFER_BYTES`.
    ///
    /// # Safety
    /// As [`unpack_raw`], `buf` a buffer of `P` tile pairs.
    #[inline(always)]
    unsafe fn unpack_raw_planes<const W: u32, const P: usize>(tid: u32, raw: u32, buf: u32) {
        // SAFETY (all): as in unpack_raw (a chunk's words lie in its row segment or the
        // stage's spare word).
        let chunk = |at: u32| -> [u64; P] {
            let (w0, o) = (at & !3, at & 3);
            let n = chunk_words(W);
            let x: [u32; 7] = core::array::from_fn(|i| {
                if (i as u32) < n {
                    unsafe { lds_u32(w0 + 4 * i as u32) }
                } else {
                    0
                }
            });
            spread_planes::<P>(chunk_window_wide(x, o), W)
        };
        let b_smem = buf + TILE_M * SMEM_STRIDE;
        let j = tid % 8;
        let a_raw = raw + 8 * W * (tid / 8) + j * W;
        for i in 0..4 {
            let v = chunk(a_raw + 8 * W * (THREADS / 8) * i);
            let at = buf + ((tid + THREADS * i) / 8) * SMEM_STRIDE + 8 * j;
            for (pl, &x) in v.iter().enumerate() {
                // SAFETY: inside plane pl's A tile (row < 128, 8j + 8 <= 64), 8-byte aligned.
                unsafe { sts_u64(at + pl as u32 * BUFFER_BYTES, x) };
            }
        }
        let (kq, nj) = (tid % 16, tid / 16);
        let b_raw = raw + 8 * raw_b_word(W, 4 * kq, 0) + nj * W;
        let r: [[u64; P]; 4] = core::array::from_fn(|i| chunk(b_raw + 8 * 2 * W * i as u32));
        for pl in 0..P {
            let cols = transpose4x8([r[0][pl], r[1][pl], r[2][pl], r[3][pl]]);
            for (c, &x) in cols.iter().enumerate() {
                let at = b_smem + pl as u32 * BUFFER_BYTES + (8 * nj + c as u32) * SMEM_STRIDE;
                // SAFETY: inside plane pl's B tile (n < 128, 4kq + 4 <= 64), 4-byte aligned.
                unsafe { sts_u32(at + 4 * kq, x) };
            }
        }
    }

    /// [`mma_step`] for operands of `P` byte planes (`A = sum_p 2^(8p) A_p`, as B): per tile,
    /// the MMAs of the plane pairs `(p, q)` with `p + q <= 3` (all 4 pairs at 2 planes, 8 of 9
    /// at 3: the rest is a multiple of 2^32), summed per `p + q` over `H` halves of 32 `K`
    /// at a time and added into the sums modulo 2^32 shifted by `8 (p + q)` bits. `H = 2`
    /// (one fold per step) was 4-6% faster than `H = 1` at 2 planes; at 3 planes the
    /// fragments of both halves do not stay in registers, so `H = 1` there.
    ///
    /// # Safety
    /// As [`mma_step`], `buf` a buffer of `P` tile pairs (plane 0 first).
    #[inline(always)]
    unsafe fn mma_step_planes<const P: usize, const H: usize>(
        acc: &mut Acc32,
        buf: u32,
        lane: u32,
        warp: u32,
    ) {
        let (g, t) = (lane / 4, lane % 4);
        let (wm, wn) = (warp / 4, warp % 4);
        let b_smem = buf + TILE_M * SMEM_STRIDE;
        for s0 in (0..2).step_by(H) {
            // B's fragments of H halves and every plane: [half][plane][ni].
            let bf: [[[[u32; 2]; 4]; P]; H] = core::array::from_fn(|h| {
                core::array::from_fn(|pl| {
                    core::array::from_fn(|ni| {
                        let c = b_smem
                            + pl as u32 * BUFFER_BYTES
                            + (32 * wn + 8 * ni as u32 + g) * SMEM_STRIDE
                            + 32 * (s0 + h) as u32
                            + 4 * t;
                        // SAFETY: inside plane pl's B tile, 4-byte aligned.
                        unsafe { [lds_u32(c), lds_u32(c + 16)] }
                    })
                })
            });
            for mi in 0..4 {
                let af: [[[u32; 4]; P]; H] = core::array::from_fn(|h| {
                    core::array::from_fn(|pl| {
                        let r0 = buf
                            + pl as u32 * BUFFER_BYTES
                            + (64 * wm + 16 * mi as u32 + g) * SMEM_STRIDE
                            + 32 * (s0 + h) as u32
                            + 4 * t;
                        let r1 = r0 + 8 * SMEM_STRIDE;
                        // SAFETY: inside plane pl's A tile, 4-byte aligned.
                        unsafe { [lds_u32(r0), lds_u32(r1), lds_u32(r0 + 16), lds_u32(r1 + 16)] }
                    })
                });
                for ni in 0..4 {
                    // Sums of the pairs with p + q = d, d in 0..4.
                    let mut d = [[0u32; 4]; 4];
                    for (a, b) in af.iter().zip(&bf) {
                        for (p, ap) in a.iter().enumerate() {
                            for (q, bq) in b.iter().enumerate() {
                                if p + q <= 3 {
                                    // SAFETY: every lane of every warp runs the same MMAs.
                                    d[p + q] = unsafe { mma_m16n8k32_u8(*ap, bq[ni], d[p + q]) };
                                }
                            }
                        }
                    }
                    for e in 0..4 {
                        acc[mi][ni][e] = acc[mi][ni][e]
                            .wrapping_add(d[0][e])
                            .wrapping_add(d[1][e] << 8)
                            .wrapping_add(d[2][e] << 16)
                            .wrapping_add(d[3][e] << 24);
                    }
                }
            }
        }
    }

    /// The per-width `nogaps` body: both operands `nogaps` of `W` bits (1..=24; above 8 as
    /// byte planes). The packed words of a step go to a ring of `S` ([`raw_stages`]) raw
    /// stages by `cp.async`, issued `S` steps ahead; each step is unpacked from its stage into the buffer the
    /// next step multiplies, one barrier per step. `WIDE` as in `gemm`.
    ///
    /// # Safety
    /// As `gemm`, with [`smem_bytes`] of dynamic shared memory and both operands `nogaps`
    /// of `W` bits.
    #[inline(always)]
    unsafe fn gemm_nogaps<const WIDE: bool, const W: u32, const S: u32>(p: &GemmParams) {
        let tid = thread_idx_x();
        let (lane, warp) = (lane_id(), warp_id());
        let m0 = block_idx_y() * TILE_M;
        let n0 = block_idx_x() * TILE_N;
        let k_total = p.a.cols;
        let steps = k_total.div_ceil(TILE_K);
        let smem = dyn_smem_addr();
        // Two buffers of `planes(W)` (A, B) tile pairs, then the ring.
        let ring = smem + planes(W) * SMEM_BYTES;
        let stage = |i: u32| ring + (i % S) * 8 * raw_stage_words(W);
        let buffer = |i: u32| smem + (i % 2) * planes(W) * BUFFER_BYTES;
        let (a, b) = (p.a, p.b);

        let mut acc: Acc32 = [[[0u32; 4]; 4]; 4];
        let mut wide: Acc64 = [[[0u64; 4]; 4]; 4];
        // One commit group per step, empty past the last, so that the counts of the waits
        // hold everywhere.
        for i in 0..S {
            if i < steps {
                // SAFETY: forwarded; stage i of the ring.
                unsafe { issue_raw::<W>(a, b, tid, m0, n0, TILE_K * i, stage(i)) };
            }
            // SAFETY: closes this thread's copies.
            unsafe { cp_async_commit() };
        }
        // SAFETY: step 0's copies (the oldest group) done here, then visible to all.
        unsafe {
            cp_async_wait_at_most(S - 1);
            sync_threads();
            unpack_any::<W>(tid, stage(0), buffer(0));
        }
        let mut i = 0u32;
        while i < steps {
            // Groups committed: steps 0 ..= i + S - 1; step i + 1 is done when at most S - 2
            // remain. After the barrier step i + 1's words are visible to
            // all, step i's tiles are complete, and stage i (unpacked before it) is free.
            // SAFETY: all threads reach it.
            unsafe {
                cp_async_wait_at_most(S - 2);
                sync_threads();
            }
            if i + S < steps {
                // SAFETY: forwarded; stage i is free (above).
                unsafe { issue_raw::<W>(a, b, tid, m0, n0, TILE_K * (i + S), stage(i)) };
            }
            // SAFETY: as above.
            unsafe { cp_async_commit() };
            let cur = buffer(i);
            // SAFETY: step i's tiles (above).
            unsafe {
                if W > 16 {
                    mma_step_planes::<3, 1>(&mut acc, cur, lane, warp)
                } else if W > 8 {
                    mma_step_planes::<2, 2>(&mut acc, cur, lane, warp)
                } else {
                    mma_step(&mut acc, cur, cur + TILE_M * SMEM_STRIDE, lane, warp)
                }
            };
            if i + 1 < steps {
                let next = buffer(i + 1);
                // SAFETY: step i + 1's stage is visible (above); the other buffer was last
                // read by step i - 1's MMAs, before the barrier.
                unsafe { unpack_any::<W>(tid, stage(i + 1), next) };
            }
            i += 1;
            let k0 = TILE_K * i;
            if WIDE && (k0 % FLUSH_K == 0 || k0 >= k_total) {
                flush(&mut acc, &mut wide);
            }
        }
        // SAFETY: forwarded.
        unsafe { epilogue::<WIDE>(p, &acc, &wide, m0, n0, lane, warp) };
    }

    /// Writes one lane's four outputs of an MMA tile: `(row, col)`, `(row, col + 1)`,
    /// `(row + 8, col)`, `(row + 8, col + 1)`, those inside `C`. Not inlined, so the
    /// epilogue's loops stay small enough to unroll and the accumulators stay in registers.
    ///
    /// # Safety
    /// As `gemm`; no other thread writes these elements.
    #[inline(never)]
    unsafe fn store4(out: PackedOut, overflow: u32, row: u32, col: u32, sums: [u64; 4]) {
        for (e, &sum) in sums.iter().enumerate() {
            let (r, c) = (row + 8 * (e as u32 / 2), col + e as u32 % 2);
            if r < out.rows && c < out.cols {
                let v = layout::finish(sum, out.bits, overflow);
                // SAFETY: inside C, written once.
                unsafe { store(&out, r, c, v) };
            }
        }
    }

    /// The body of the entry points for layouts `LA`, `LB` and width `W` (0: any).
    ///
    /// # Safety
    /// As `gemm`, with [`smem_bytes`] of dynamic shared memory.
    #[inline(always)]
    unsafe fn body<const WIDE: bool, const LA: u32, const LB: u32, const W: u32>(p: &GemmParams) {
        if LA == NOGAPS && LB == NOGAPS && W != 0 {
            // SAFETY: forwarded (the per-width names are launched with nogaps operands of W).
            unsafe { gemm_nogaps::<WIDE, W, RAW_STAGES>(p) }
        } else {
            // SAFETY: forwarded.
            unsafe { gemm::<WIDE, LA, LB, W>(p) }
        }
    }

    macro_rules! entries {
        ($($narrow:ident, $wide:ident: $la:expr, $lb:expr, $w:expr;)*) => {$(
            /// `C = A x B` for operands of at most 8 bits, sums modulo 2^32 (exact when
            /// [`needs_wide`] is false); see [`kernel_name`].
            ///
            /// # Safety
            /// As `gemm`, with A and B in the layouts of the name.
            #[unsafe(no_mangle)]
            pub unsafe extern "ptx-kernel" fn $narrow(p: GemmParams) {
                // SAFETY: forwarded.
                unsafe { body::<false, { $la }, { $lb }, { $w }>(&p) }
            }

            /// As the kernel without `_wide`, with exact 64-bit sums.
            ///
            /// # Safety
            /// As `gemm`, with A and B in the layouts of the name.
            #[unsafe(no_mangle)]
            pub unsafe extern "ptx-kernel" fn $wide(p: GemmParams) {
                // SAFETY: forwarded.
                unsafe { body::<true, { $la }, { $lb }, { $w }>(&p) }
            }
        )*};
    }

    entries! {
        cmv_beam_gemm_mma_naive, cmv_beam_gemm_mma_naive_wide: NAIVE, NAIVE, 0;
        cmv_beam_gemm_mma_tight, cmv_beam_gemm_mma_tight_wide: TIGHT, TIGHT, 0;
        cmv_beam_gemm_mma_slabs, cmv_beam_gemm_mma_slabs_wide: SLABS, SLABS, 0;
        cmv_beam_gemm_mma_nogaps, cmv_beam_gemm_mma_nogaps_wide: NOGAPS, NOGAPS, 0;
        cmv_beam_gemm_mma_mixed, cmv_beam_gemm_mma_mixed_wide: ANY_LAYOUT, ANY_LAYOUT, 0;
        cmv_beam_gemm_mma_nogaps_b1, cmv_beam_gemm_mma_nogaps_b1_wide: NOGAPS, NOGAPS, 1;
        cmv_beam_gemm_mma_nogaps_b2, cmv_beam_gemm_mma_nogaps_b2_wide: NOGAPS, NOGAPS, 2;
        cmv_beam_gemm_mma_nogaps_b3, cmv_beam_gemm_mma_nogaps_b3_wide: NOGAPS, NOGAPS, 3;
        cmv_beam_gemm_mma_nogaps_b4, cmv_beam_gemm_mma_nogaps_b4_wide: NOGAPS, NOGAPS, 4;
        cmv_beam_gemm_mma_nogaps_b5, cmv_beam_gemm_mma_nogaps_b5_wide: NOGAPS, NOGAPS, 5;
        cmv_beam_gemm_mma_nogaps_b6, cmv_beam_gemm_mma_nogaps_b6_wide: NOGAPS, NOGAPS, 6;
        cmv_beam_gemm_mma_nogaps_b7, cmv_beam_gemm_mma_nogaps_b7_wide: NOGAPS, NOGAPS, 7;
        cmv_beam_gemm_mma_nogaps_b8, cmv_beam_gemm_mma_nogaps_b8_wide: NOGAPS, NOGAPS, 8;
    }

    macro_rules! plane_entries {
        ($($name:ident: $w:expr;)*) => {$(
            /// `C = A x B` for `nogaps` operands of the name's width (9..=24 bits) as two
            /// or three byte planes, sums modulo 2^32; see [`kernel_name`].
            ///
            /// # Safety
            /// As `gemm`, with [`smem_bytes`] of dynamic shared memory and both operands
            /// `nogaps` of the name's width.
            #[unsafe(no_mangle)]
            pub unsafe extern "ptx-kernel" fn $name(p: GemmParams) {
                // SAFETY: forwarded.
                unsafe { gemm_nogaps::<false, { $w }, { raw_stages($w) }>(&p) }
            }
        )*};
    }

    plane_entries! {
        cmv_beam_gemm_mma_nogaps_b9: 9;
        cmv_beam_gemm_mma_nogaps_b10: 10;
        cmv_beam_gemm_mma_nogaps_b11: 11;
        cmv_beam_gemm_mma_nogaps_b12: 12;
        cmv_beam_gemm_mma_nogaps_b13: 13;
        cmv_beam_gemm_mma_nogaps_b14: 14;
        cmv_beam_gemm_mma_nogaps_b15: 15;
        cmv_beam_gemm_mma_nogaps_b16: 16;
        cmv_beam_gemm_mma_nogaps_b17: 17;
        cmv_beam_gemm_mma_nogaps_b18: 18;
        cmv_beam_gemm_mma_nogaps_b19: 19;
        cmv_beam_gemm_mma_nogaps_b20: 20;
        cmv_beam_gemm_mma_nogaps_b21: 21;
        cmv_beam_gemm_mma_nogaps_b22: 22;
        cmv_beam_gemm_mma_nogaps_b23: 23;
        cmv_beam_gemm_mma_nogaps_b24: 24;
    }

    // Launch bounds (`cargo xtask ptx` turns these into `.maxntid` / `.minnctapersm`): the
    // per-width kernels with 32-bit sums in at most 128 registers, so that two blocks (16
    // warps) share an SM.
    cmv_device::launch_bounds! {
        CMV_MAXNTID_cmv_beam_gemm_mma_nogaps_b1 = THREADS;
        CMV_MINNCTAPERSM_cmv_beam_gemm_mma_nogaps_b1 = 2;
        CMV_MAXNTID_cmv_beam_gemm_mma_nogaps_b2 = THREADS;
        CMV_MINNCTAPERSM_cmv_beam_gemm_mma_nogaps_b2 = 2;
        CMV_MAXNTID_cmv_beam_gemm_mma_nogaps_b3 = THREADS;
        CMV_MINNCTAPERSM_cmv_beam_gemm_mma_nogaps_b3 = 2;
        CMV_MAXNTID_cmv_beam_gemm_mma_nogaps_b4 = THREADS;
        CMV_MINNCTAPERSM_cmv_beam_gemm_mma_nogaps_b4 = 2;
        CMV_MAXNTID_cmv_beam_gemm_mma_nogaps_b5 = THREADS;
        CMV_MINNCTAPERSM_cmv_beam_gemm_mma_nogaps_b5 = 2;
        CMV_MAXNTID_cmv_beam_gemm_mma_nogaps_b6 = THREADS;
        CMV_MINNCTAPERSM_cmv_beam_gemm_mma_nogaps_b6 = 2;
        CMV_MAXNTID_cmv_beam_gemm_mma_nogaps_b7 = THREADS;
        CMV_MINNCTAPERSM_cmv_beam_gemm_mma_nogaps_b7 = 2;
        CMV_MAXNTID_cmv_beam_gemm_mma_nogaps_b8 = THREADS;
        CMV_MINNCTAPERSM_cmv_beam_gemm_mma_nogaps_b8 = 2;
    }

    // The byte-plane kernels: one block per SM (two buffers of two or three planes and the
    // ring take 150-220 KiB), so up to 255 registers.
    cmv_device::launch_bounds! {
        CMV_MAXNTID_cmv_beam_gemm_mma_nogaps_b9 = THREADS;
        CMV_MAXNTID_cmv_beam_gemm_mma_nogaps_b10 = THREADS;
        CMV_MAXNTID_cmv_beam_gemm_mma_nogaps_b11 = THREADS;
        CMV_MAXNTID_cmv_beam_gemm_mma_nogaps_b12 = THREADS;
        CMV_MAXNTID_cmv_beam_gemm_mma_nogaps_b13 = THREADS;
        CMV_MAXNTID_cmv_beam_gemm_mma_nogaps_b14 = THREADS;
        CMV_MAXNTID_cmv_beam_gemm_mma_nogaps_b15 = THREADS;
        CMV_MAXNTID_cmv_beam_gemm_mma_nogaps_b16 = THREADS;
        CMV_MAXNTID_cmv_beam_gemm_mma_nogaps_b17 = THREADS;
        CMV_MAXNTID_cmv_beam_gemm_mma_nogaps_b18 = THREADS;
        CMV_MAXNTID_cmv_beam_gemm_mma_nogaps_b19 = THREADS;
        CMV_MAXNTID_cmv_beam_gemm_mma_nogaps_b20 = THREADS;
        CMV_MAXNTID_cmv_beam_gemm_mma_nogaps_b21 = THREADS;
        CMV_MAXNTID_cmv_beam_gemm_mma_nogaps_b22 = THREADS;
        CMV_MAXNTID_cmv_beam_gemm_mma_nogaps_b23 = THREADS;
        CMV_MAXNTID_cmv_beam_gemm_mma_nogaps_b24 = THREADS;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_names_by_layout_and_width() {
        // Both nogaps of one width: the kernel compiled for it.
        for bits in 1..=8 {
            let (n, w) = NOGAPS_WIDTH_NAMES[bits as usize - 1];
            assert_eq!(kernel_name(NOGAPS, NOGAPS, bits, bits, false), n);
            assert_eq!(kernel_name(NOGAPS, NOGAPS, bits, bits, true), w);
            assert!(n.ends_with(&format!("_b{bits}")) && w == format!("{n}_wide"));
        }
        // Different widths, or another layout: the per-layout and mixed kernels.
        assert_eq!(
            kernel_name(NOGAPS, NOGAPS, 4, 8, false),
            "cmv_beam_gemm_mma_nogaps"
        );
        assert_eq!(
            kernel_name(TIGHT, TIGHT, 8, 8, true),
            "cmv_beam_gemm_mma_tight_wide"
        );
        assert_eq!(
            kernel_name(NOGAPS, SLABS, 8, 8, false),
            "cmv_beam_gemm_mma_mixed"
        );
        // 9..=24 bits: the byte-plane kernels, sums modulo 2^32 only.
        assert_eq!(
            kernel_name(NOGAPS, NOGAPS, 9, 9, false),
            "cmv_beam_gemm_mma_nogaps_b9"
        );
        assert_eq!(
            kernel_name(NOGAPS, NOGAPS, 24, 24, false),
            "cmv_beam_gemm_mma_nogaps_b24"
        );
        assert_eq!(
            kernel_name(NOGAPS, NOGAPS, 25, 25, false),
            "cmv_beam_gemm_mma_nogaps"
        );
    }

    #[test]
    fn transpose_moves_every_byte() {
        let r: [u64; 4] = core::array::from_fn(|i| {
            u64::from_le_bytes(core::array::from_fn(|j| (16 * i + j) as u8))
        });
        let t = transpose4x8(r);
        for (j, col) in t.iter().enumerate() {
            for i in 0..4 {
                assert_eq!(
                    (col >> (8 * i)) & 0xff,
                    (16 * i + j) as u32,
                    "row {i} col {j}"
                );
            }
        }
    }

    #[test]
    fn spread_puts_each_element_in_its_byte() {
        for b in 1..8u32 {
            let m = (1u64 << b) - 1;
            for seed in 0..200u64 {
                // Eight elements, then junk above bit 8b that must not leak in.
                let e: [u64; 8] = core::array::from_fn(|i| {
                    (seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (3 * i + 5)) & m
                });
                let mut win = u64::MAX << (8 * b);
                for (i, &v) in e.iter().enumerate() {
                    win |= v << (i as u32 * b);
                }
                let got = spread8(win, b);
                for (i, &v) in e.iter().enumerate() {
                    assert_eq!((got >> (8 * i)) & 0xff, v, "b {b} seed {seed} element {i}");
                }
            }
        }
    }

    #[test]
    fn raw_stage_holds_every_word_once_and_spreads_banks() {
        for w in 1..=8u32 {
            let n = raw_stage_words(w) as usize;
            let mut used = vec![false; n];
            // A: row r's words at r * w.
            for q in 0..TILE_M * w {
                assert!(!core::mem::replace(&mut used[q as usize], true));
            }
            for k in 0..TILE_K {
                for word in 0..2 * w {
                    let at = raw_b_word(w, k, word) as usize;
                    // The word after it (read with it) lies in the stage too.
                    assert!(at + 1 < n, "w {w} row {k} word {word}");
                    assert!(!core::mem::replace(&mut used[at], true), "w {w} row {k}");
                }
            }
            // The unpacking's B reads: for each row i of a unit, the 16 values of kq in
            // 16 different 8-byte bank pairs.
            for i in 0..4 {
                let mut banks: Vec<u32> = (0..16)
                    .map(|kq| raw_b_word(w, 4 * kq + i, 0) % 16)
                    .collect();
                banks.sort();
                banks.dedup();
                assert_eq!(banks.len(), 16, "w {w} i {i}");
            }
            assert_eq!(
                smem_bytes(NOGAPS, NOGAPS, w, w),
                SMEM_BYTES + RAW_STAGES * 8 * raw_stage_words(w)
            );
        }
        assert_eq!(smem_bytes(NOGAPS, NOGAPS, 4, 8), SMEM_BYTES);
        assert_eq!(smem_bytes(SLABS, SLABS, 4, 4), SMEM_BYTES);
        // Two blocks of the widest fit the 227 KiB of an H100's or H200's SM.
        assert!(2 * (smem_bytes(NOGAPS, NOGAPS, 8, 8) + 1024) <= 228 * 1024);
    }

    /// A `nogaps` row segment of 64 elements of `w` bits (`w` words) followed by a spare word
    /// of junk, as 32-bit words, and the chunk words of chunk `j` as the kernels read them
    /// (`N` words from the aligned word holding byte `j * w`, zero past `chunk_words(w)`),
    /// with the byte offset `o`.
    fn segment_chunks<const N: usize>(vals: &[u64], w: u32) -> Vec<([u32; N], u32)> {
        let mut seg = vec![0u64; w as usize + 1];
        for (i, &v) in vals.iter().enumerate() {
            let bit = i * w as usize;
            seg[bit / 64] |= v << (bit % 64);
            if bit % 64 + w as usize > 64 {
                seg[bit / 64 + 1] |= v >> (64 - bit % 64);
            }
        }
        seg[w as usize] = u64::MAX;
        let words: Vec<u32> = seg
            .iter()
            .flat_map(|&x| [x as u32, (x >> 32) as u32])
            .collect();
        (0..8u32)
            .map(|j| {
                let (byte, n) = (j * w, chunk_words(w));
                let w0 = (byte / 4) as usize;
                let x = core::array::from_fn(|i| if (i as u32) < n { words[w0 + i] } else { 0 });
                (x, byte % 4)
            })
            .collect()
    }

    #[test]
    fn chunk_windows_read_every_width() {
        for w in 1..=7u32 {
            assert!(chunk_words(w) <= 3);
            let vals: Vec<u64> = (0..64u64).map(|i| (i * 37 + w as u64) % (1 << w)).collect();
            for (j, (x, o)) in segment_chunks::<3>(&vals, w).into_iter().enumerate() {
                let got = spread8(chunk_window(x, o), w);
                for e in 0..8 {
                    let v = vals[8 * j + e];
                    assert_eq!((got >> (8 * e)) & 0xff, v, "w {w} j {j} e {e}");
                }
            }
        }
        assert_eq!(
            (1..=8).map(chunk_words).collect::<Vec<_>>(),
            [1, 1, 2, 1, 2, 2, 3, 2]
        );
    }

    #[test]
    fn plane_chunks_read_every_width() {
        fn check<const P: usize>(w: u32) {
            assert_eq!(planes(w) as usize, P);
            assert!(chunk_words(w) <= 7);
            let vals: Vec<u64> = (0..64u64)
                .map(|i| (i * 40503 + w as u64 * 7) % (1 << w))
                .collect();
            for (j, (x, o)) in segment_chunks::<7>(&vals, w).into_iter().enumerate() {
                let got = spread_planes::<P>(chunk_window_wide(x, o), w);
                for e in 0..8 {
                    let v = vals[8 * j + e];
                    for (p, plane) in got.iter().enumerate() {
                        let byte = (plane >> (8 * e)) & 0xff;
                        assert_eq!(byte, (v >> (8 * p)) & 0xff, "w {w} j {j} e {e} plane {p}");
                    }
                }
            }
        }
        for w in 9..=16 {
            check::<2>(w);
        }
        for w in 17..=24 {
            check::<3>(w);
        }
    }

    #[test]
    fn plane_kernels_only_for_nogaps_of_one_width_modulo_2_pow_32() {
        for bits in 9..=MAX_PLANE_BITS {
            assert!(supports(NOGAPS, NOGAPS, bits, bits, false));
            assert!(!supports(NOGAPS, NOGAPS, bits, bits, true));
            assert_eq!(
                kernel_name(NOGAPS, NOGAPS, bits, bits, false),
                NOGAPS_PLANE_NAMES[bits as usize - 9]
            );
            assert_eq!(
                smem_bytes(NOGAPS, NOGAPS, bits, bits),
                planes(bits) * SMEM_BYTES + raw_stages(bits) * 8 * raw_stage_words(bits)
            );
            assert!(smem_bytes(NOGAPS, NOGAPS, bits, bits) + 1024 <= 227 * 1024);
        }
        assert!(!supports(NOGAPS, NOGAPS, 9, 10, false));
        assert!(!supports(SLABS, SLABS, 12, 12, false));
        assert!(!supports(NOGAPS, NOGAPS, 25, 25, false));
        assert_eq!((planes(16), planes(17), planes(24)), (2, 3, 3));
        assert_eq!((raw_stages(16), raw_stages(17)), (3, 2));
        assert!(supports(SLABS, NAIVE, 8, 3, true));
    }

    #[test]
    fn byte_masks() {
        assert_eq!(byte_mask(0), 0);
        assert_eq!(byte_mask(3), 0xff_ffff);
        assert_eq!(byte_mask(8), u64::MAX);
    }

    #[test]
    fn wide_sums_only_when_needed() {
        assert!(!needs_wide(8, 8, 1 << 16, 64, layout::SAT));
        assert!(needs_wide(8, 8, (1 << 16) + 1, 64, layout::SAT));
        assert!(!needs_wide(8, 8, 1 << 30, 32, layout::OVF));
        assert!(needs_wide(8, 8, 1 << 30, 33, layout::OVF));
    }
}
