//! The kernel for 3 to 16 vectors (NVPTX only): the weights scaled in fp16 before the MMA,
//! the vectors in the MMA's 8 columns (two groups of 8 for 9 to 16 vectors, sharing the
//! scaled weights); the arithmetic is [`crate::tc_scaled`].
//!
//! A block computes one tile row (16 rows), or one part of it (`Split`); all its warps but the
//! last one (two for 16 vectors, `crate::outlier_warps`) split the columns into steps of 4
//! tiles (warp `w` takes steps `w, w + warps, ...`), while the last walk the outliers. In a
//! step, lane `(g, t)` holds rows
//! `2g, 2g + 1` of tile `t` (16 bytes, through the warp's `WeightRing` like the routed kernel)
//! and the tile's inputs of vector `g` (the MMA's column `g`; lanes past the batch repeat the
//! last vector, loaded into registers one step ahead), and of vector `g + 8` for 16; it
//! rebuilds
//! the tile's second-order statistics with two xor-shuffles, turns its 32 codes into 16
//! scaled `half2` pairs, and issues 4 MMAs for the codes and 8 for the zeros (`-z s` in two
//! fp16 parts), per group of 8 vectors. All 8 vectors of a group cost the same instructions;
//! the second group adds its input loads and 12 MMAs, not the weights' work. The outlier
//! warps and the final sums are those of [`crate::kernels`] (the outlier warp measured faster for 4 and 8 vectors
//! than all warps adding the outliers before the weights: docs/PERF.md).

use cmv_device::{block_dim_x, cp_async_wait, half2_to_f32x2, mma_m16n8k16_f16_f32, thread_idx_x};

use crate::kernels::{
    Split, WeightRing, area, gather_stats, load_inputs, outlier_warp, sum_areas, write_rows,
};
use crate::layout::{STEP_WORDS, TILE, device_band_words, row_qs, row_qz};
use crate::tc_scaled::{MASK_A, MASK_B, input_pairs, row_consts, scaled_pairs};
use crate::{RING_DEPTH, RING_SLOTS, SpqrGemvScaledParams, part_steps};

/// Groups of 8 vectors (the MMA's N) of the kernel for `B` vectors.
const fn groups<const B: usize>() -> usize {
    B.div_ceil(8)
}

/// Most groups of a kernel.
const MAX_GROUPS: usize = 2;
const _: () = assert!(groups::<{ crate::MAX_BATCH as usize }>() <= MAX_GROUPS);

/// The accumulators of a lane.
struct Acc {
    /// The code MMAs' fragment: rows 2g, 2g + 1 of vectors 2t, 2t + 1.
    codes: [f32; 4],
    /// The zero MMAs' fragments, for the fp16 high and low parts of `-z s`.
    zero_hi: [f32; 4],
    zero_lo: [f32; 4],
}

/// One step: the MMAs of two rows of one tile per lane, for each group of 8 vectors (`x[j]`,
/// `acc[j]`, `j < groups::<B>()`).
///
/// # Safety
/// All 32 lanes of the warp call it together.
#[inline(always)]
unsafe fn step<const B: usize>(
    w: [u32; 4],
    x: &[[u32; 8]; MAX_GROUPS],
    g: u32,
    pre: f32,
    masks: [u32; 2],
    acc: &mut [Acc; MAX_GROUPS],
) {
    let w0 = u64::from(w[0]) | (u64::from(w[1]) << 32);
    let w1 = u64::from(w[2]) | (u64::from(w[3]) << 32);
    // SAFETY: the caller guarantees a converged warp.
    let (lo, hi) = unsafe { gather_stats(&w, g) };
    let (ss, sz) = half2_to_f32x2(lo);
    let (zs, zz) = half2_to_f32x2(hi);
    let ss = ss * pre;
    // s = ss (qs - sz), z = zs (qz - zz), as the CPU computes them (times a power of two).
    let row = |w: u64| {
        let s = ss * (row_qs(w) as f32 - sz);
        let z = zs * (row_qz(w) as f32 - zz);
        row_consts(s, z)
    };
    let (c0, c1) = (row(w0), row(w1));
    let (p0, p1) = (scaled_pairs(w0, &c0, masks), scaled_pairs(w1, &c1, masks));
    for (xj, acc) in x.iter().zip(acc.iter_mut()).take(groups::<B>()) {
        let xp = input_pairs(xj);
        for m in 0..4 {
            let b = [xp[2 * m], xp[2 * m + 1]];
            // SAFETY: the caller guarantees a converged warp.
            unsafe {
                acc.codes = mma_m16n8k16_f16_f32(
                    [p0[2 * m], p1[2 * m], p0[2 * m + 1], p1[2 * m + 1]],
                    b,
                    acc.codes,
                );
                acc.zero_hi =
                    mma_m16n8k16_f16_f32([c0.nz_hi, c1.nz_hi, c0.nz_hi, c1.nz_hi], b, acc.zero_hi);
                acc.zero_lo =
                    mma_m16n8k16_f16_f32([c0.nz_lo, c1.nz_lo, c0.nz_lo, c1.nz_lo], b, acc.zero_lo);
            }
        }
    }
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn spqr_gemv<const B: usize, const PT: bool>(
    dense: *const u64,
    x: *const u16,
    xt: *const u16,
    y: *mut u16,
    offsets: *const u32,
    col_vals: *const u32,
    split: Split,
    rows: u32,
    cols: u32,
    padded_cols: u32,
    batch: u32,
    pre: f32,
    post: f32,
    aligned: u32,
) {
    let tid = thread_idx_x();
    // The last warps (`outlier_warps`) walk the outliers while the others multiply the
    // weights.
    let ow = crate::outlier_warps(B as u32);
    let (lane, warp, warps) = (tid & 31, tid >> 5, (block_dim_x() >> 5) - ow);
    let (red, outl) = sum_areas::<B>(warps);
    if warp >= warps {
        // SAFETY: forwarded from the launcher's checks; the area has outlier_slots(warps, B)
        // >= 2 ow slots.
        unsafe {
            outlier_warp::<B, PT>(
                offsets,
                col_vals,
                x,
                xt,
                outl,
                &split,
                cols,
                batch,
                tid - 32 * warps,
                32 * ow,
            )
        };
    } else {
        // SAFETY: forwarded.
        unsafe {
            weights::<B>(
                dense,
                x,
                red,
                &split,
                cols,
                padded_cols,
                batch,
                pre,
                post,
                aligned,
                lane,
                warp,
                warps,
            )
        };
    }
    // SAFETY: every thread gets here; every warp wrote its part of `red`, the last `outl`.
    unsafe { write_rows::<B>(red, outl, y, rows, batch, &split, tid, warps, 2 * ow) };
}

/// The weights' part of the tile row (or of its part) for weight warp `warp` of `warps`,
/// into `red[warp]`.
///
/// # Safety
/// As the entry points; all lanes of the warp call it.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn weights<const B: usize>(
    dense: *const u64,
    x: *const u16,
    red: *mut f32,
    split: &Split,
    cols: u32,
    padded_cols: u32,
    batch: u32,
    pre: f32,
    post: f32,
    aligned: u32,
    lane: u32,
    warp: u32,
    warps: u32,
) {
    let (g, t) = (lane >> 2, lane & 3);
    let nsteps = (padded_cols / TILE as u32).div_ceil(4);
    // This block's steps of its tile row: s0..s1.
    let (s0, s1) = part_steps(nsteps, split.splits, split.part);
    // SAFETY: the part's words are inside the dense part (the device order: tile row `band`
    // starts at word `band * device_band_words(padded_cols)`, see `layout::device_word`, and
    // s1 <= nsteps).
    let part_words = unsafe {
        dense.add(
            split.band as usize * device_band_words(padded_cols as usize)
                + s0 as usize * STEP_WORDS,
        )
    };
    // Vectors g and g + 8 (16 vectors).
    let xv: [*const u16; MAX_GROUPS] = core::array::from_fn(|j| {
        if j < groups::<B>() {
            // SAFETY: vector min(v, batch - 1) < batch is inside the input.
            unsafe { x.add((g + 8 * j as u32).min(batch - 1) as usize * cols as usize) }
        } else {
            x
        }
    });
    // The code masks, through a zero the compiler cannot prove (the launcher passes batch <= 16):
    // see `tc::scaled_pairs`.
    let unknown_zero = batch >> 16;
    let masks = [MASK_A | unknown_zero, MASK_B | unknown_zero];
    let mut acc: [Acc; MAX_GROUPS] = core::array::from_fn(|_| Acc {
        codes: [0.0; 4],
        zero_hi: [0.0; 4],
        zero_lo: [0.0; 4],
    });
    // This warp's steps are s0 + warp + i * warps for i < mine; the weights are copied into
    // the warp's ring in shared memory RING_DEPTH steps ahead, the inputs of step i + 1 loaded
    // into registers while step i is computed.
    // SAFETY: the part's steps in device order (s1 > s0, the launcher's guarantee); the
    // launcher gave the ring area.
    let (ring, mine) = unsafe { WeightRing::start::<B>(part_words, lane, warp, warps, s1 - s0) };
    let load_x = |i: u32| {
        let col0 = (4 * (s0 + warp + i * warps) + t) * TILE as u32;
        let mut r = [[0u32; 8]; MAX_GROUPS];
        if B <= 8 {
            // SAFETY: xv[0] is a vector of the input (above); `aligned` was checked by the
            // launcher; reads are bounded by cols.
            r[0] = unsafe { load_inputs(xv[0], col0, cols, aligned != 0) };
        } else if aligned != 0 && col0 + TILE as u32 <= cols {
            // One branch for both groups: with a test per group, the compiler evaluated the
            // bounds of the per-input path on every step (83 more instructions per step).
            for (rj, &xj) in r.iter_mut().zip(xv.iter()) {
                // SAFETY: as `load_inputs`' aligned path: 16 inputs from col0 inside the
                // vector, 16-byte aligned.
                *rj = unsafe { load_inputs(xj, col0, cols, true) };
            }
        } else {
            for (rj, &xj) in r.iter_mut().zip(xv.iter()) {
                // SAFETY: reads bounded by cols.
                *rj = unsafe { load_inputs(xj, col0, cols, false) };
            }
        }
        r
    };
    let mut next = load_x(0);
    let mut i = 0;
    while i < mine {
        let x = next;
        next = load_x(i + 1);
        // SAFETY: steps 0..i + RING_DEPTH were copied in order; then step i + RING_DEPTH goes
        // into the slot of step i - 1, read in the previous iteration.
        let w = unsafe { ring.read(i % RING_SLOTS) };
        unsafe { ring.copy(i + RING_DEPTH, (i + RING_DEPTH) % RING_SLOTS) };
        // SAFETY: converged warp (`mine` is warp-uniform).
        unsafe { step::<B>(w, &x, g, pre, masks, &mut acc) };
        i += 1;
    }
    // The copies past the last step finish before the block ends.
    // SAFETY: no operands.
    unsafe { cp_async_wait::<0>() };
    for (j, a) in acc.iter().enumerate().take(groups::<B>()) {
        for i in 0..4 {
            let (r, n) = (2 * g as usize + i / 2, 8 * j + 2 * t as usize + i % 2);
            // SAFETY: warp < warps, r < 16, n < 8 * groups <= area::<B>().
            unsafe {
                *red.add((warp as usize * TILE + r) * area::<B>() + n) =
                    (a.codes[i] + (a.zero_hi[i] + a.zero_lo[i])) * post
            };
        }
    }
}

macro_rules! entries {
    ($($name:ident = $b:literal, $pt:literal;)*) => {$(
        /// SpQR GEMV for up to this many input vectors; see the module documentation.
        ///
        /// # Safety
        /// Launched by `spqr-format` with [`SpqrGemvScaledParams`], having validated the
        /// matrix (lengths, offsets, outlier columns), sized the inputs and outputs, checked
        /// `aligned` (input 16-byte aligned and `cols % 8 == 0`), chosen `pre`/`post` from the
        /// matrix's scales, and launched `splits` blocks per tile row (`1 <= splits <=` its
        /// steps) of `launch_warps` threads (at least 2 warps) with `smem_bytes(weight warps,
        /// B)` bytes of shared memory; with `splits > 1`, `partials` holds
        /// `bands * splits * 16 * B` values and `counters` one zero per tile row.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: SpqrGemvScaledParams) {
            let (dense, x, xt, y) =
                (p.dense.as_ptr(), p.x.as_ptr(), p.xt.as_ptr(), p.y.as_mut_ptr());
            let (offsets, col_vals) = (p.offsets.as_ptr(), p.col_vals.as_ptr());
            let (partials, counters) = (p.partials.as_mut_ptr(), p.counters.as_mut_ptr());
            let SpqrGemvScaledParams {
                rows, cols, padded_cols, batch, splits, pre, post, aligned, ..
            } = p;
            let split = Split::of_block(partials, counters, splits);
            // SAFETY: forwarded from the launcher's checks.
            unsafe {
                spqr_gemv::<$b, $pt>(
                    dense, x, xt, y, offsets, col_vals, split, rows, cols, padded_cols, batch, pre,
                    post, aligned,
                )
            }
        }
    )*};
}

entries! {
    cmv_spqr_csr_b4 = 4, false;
    cmv_spqr_csr_b8 = 8, false;
    cmv_spqr_csr_b16 = 16, false;
    cmv_spqr_ptcsr_b4 = 4, true;
    cmv_spqr_ptcsr_b8 = 8, true;
    cmv_spqr_ptcsr_b16 = 16, true;
}

/// Sixteen vectors: 2 blocks of the largest size per SM, up to 128 registers (112 on sm_90).
/// At 80 registers (3 blocks) the second group's inputs and accumulators spill, and with
/// one accumulator per group instead of three (80 registers, 8 bytes spilled) the kernel
/// measured 3-38% slower on an H200 (docs/PERF.md).
#[unsafe(no_mangle)]
#[allow(non_upper_case_globals)]
pub static CMV_MINNCTAPERSM_cmv_spqr_csr_b16: u32 = 2;

/// As [`CMV_MINNCTAPERSM_cmv_spqr_csr_b16`].
#[unsafe(no_mangle)]
#[allow(non_upper_case_globals)]
pub static CMV_MINNCTAPERSM_cmv_spqr_ptcsr_b16: u32 = 2;
