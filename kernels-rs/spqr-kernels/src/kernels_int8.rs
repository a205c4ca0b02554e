//! The integer-MMA product of one vector (`cmv_spqr_{csr,ptcsr}_i8_b1`, NVPTX only): the
//! routed kernel's work layout ([`crate::kernels`]: one block per tile row or part of one,
//! weight warps in steps of 4 tiles through a `cp.async` ring, the last warp walking the
//! outliers, the same result areas), with the weights in the byte layout of
//! [`crate::int8::byte_layout_word`] and the inputs as two int8 halves per tile
//! ([`crate::int8::stage_tile`]).
//!
//! In a step, lane `(g, t)` holds rows `2g`, `2g + 1` of tile `t`; its 32 codes are 8 u8 A
//! registers (one mask each, `int8::code_regs`), and two chained `mma.m16n8k32` (u8 codes, s8
//! halves, exact int32 sums) give it `Σ q h` and `Σ q l` of both rows with its own tile
//! (routed through B as in the fp16 kernel: column `n` of B holds tile `n / 2`'s high halves
//! for even `n`, its low halves for odd). Then `D = 128 Σ q h + Σ q l` and the row adds
//! `s σ (D - z T)` in fp32, `σ` and `T = Σ x̂` from the staging.
//!
//! Staging: every 8 steps (a round) lane `l` of a warp quantizes tile `l` of the round (16
//! inputs: one fp16 max, one multiply-add per input, byte permutes) and stores its 32 bytes
//! of halves and its `(σ, T)` in the warp's shared memory.

use cmv_device::{
    U32x4, block_dim_x, cp_async_wait, dyn_smem_addr, griddepcontrol_launch_dependents,
    griddepcontrol_wait, lds_v2, lds_v4, mma_m16n8k32_u8s8, shfl_xor, sts_v2, sts_v4, sync_warp,
    thread_idx_x,
};

use crate::int8::{
    code_regs, row_dots, row_scale_zero_bytes, stage_tile, stat_quarter_bytes, tile_consts_bytes,
};
use crate::kernels::{
    Split, WeightRing, gather_quarters, load_inputs, outlier_warp, sum_areas, write_rows,
};
use crate::layout::{STEP_WORDS, TILE, device_band_words};
use crate::tc::accumulate;
use crate::{
    RING_DEPTH, RING_SLOTS, ROUND_BYTES, SpqrGemvParams, WARP_STAGE_BYTES, ZERO_BYTES, part_steps,
    stage_offset,
};

/// Steps per staging round: one tile per lane.
const ROUND: u32 = 8;
/// Bytes of a round's halves in the staging area: 32 tiles of 32 bytes (`h` then `l`).
const HALVES_BYTES: u32 = 32 * 32;
// The halves and the (σ, T) pairs of a round fit the routed kernel's staging area, and the
// zeros after it hold one lane's 16 bytes.
const _: () = assert!(HALVES_BYTES + 32 * 8 <= ROUND_BYTES && ZERO_BYTES >= 16);
const _: () = assert!(4 * ROUND == 32 && ROUND.is_multiple_of(RING_SLOTS));

/// The tile's statistics as `(ss, sz)`, `(zs, zz)` `half2` words for lane `(g, t)` holding
/// device rows `2g, 2g + 1` in byte layout (`w`: row `2g`'s low and high halves, then row
/// `2g + 1`'s), gathered by two xor-shuffles as [`crate::kernels::gather_stats`] does.
///
/// # Safety
/// All 32 lanes of the warp call it together.
#[inline(always)]
unsafe fn gather_stats_bytes(w: &[u32; 4], g: u32) -> (u32, u32) {
    // SAFETY: the caller's guarantee.
    unsafe { gather_quarters(stat_quarter_bytes(w[0], w[2]), g) }
}

/// One step: lane `(g, t)`'s two rows of tile `t` times the staged halves of its B column
/// (at shared address `frag`, or zeros), with the tile's `(σ, T)` at `st`, added into `acc`
/// (rows `2g`, `2g + 1`).
///
/// # Safety
/// All 32 lanes of the warp call it together; `frag` and `st` are inside this warp's staging
/// area, 16- and 8-byte aligned.
#[inline(always)]
unsafe fn step(w: [u32; 4], frag: u32, st: u32, g: u32, acc: &mut [f32; 2]) {
    // SAFETY: the caller guarantees a converged warp.
    let (lo, hi) = unsafe { gather_stats_bytes(&w, g) };
    // SAFETY: inside this warp's staging area (the caller's guarantee).
    let (b, [sigma, t]) = unsafe { (lds_v4(frag).0, lds_v2(st)) };
    let c = tile_consts_bytes(lo, hi, f32::from_bits(sigma));
    let (s0, nz0) = row_scale_zero_bytes(w[1], &c);
    let (s1, nz1) = row_scale_zero_bytes(w[3], &c);
    let r0 = code_regs(u64::from(w[0]) | (u64::from(w[1]) << 32));
    let r1 = code_regs(u64::from(w[2]) | (u64::from(w[3]) << 32));
    // SAFETY: the caller guarantees a converged warp.
    let d = unsafe {
        let d = mma_m16n8k32_u8s8([r0[0], r1[0], r0[1], r1[1]], [b[0], b[1]], [0; 4]);
        mma_m16n8k32_u8s8([r0[2], r1[2], r0[3], r1[3]], [b[2], b[3]], d)
    };
    let (d0, d1) = row_dots([d[0] as i32, d[1] as i32, d[2] as i32, d[3] as i32]);
    let tf = f32::from_bits(t);
    acc[0] = accumulate(acc[0], s0, nz0, d0 as f32, tf);
    acc[1] = accumulate(acc[1], s1, nz1, d1 as f32, tf);
}

/// The weights' part of the tile row (or of its part) for weight warp `warp` of `warps`,
/// into `red[warp]`.
///
/// # Safety
/// As the entry points; all lanes of the warp call it.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn weights<const PDL: bool>(
    dense: *const u64,
    x: *const u16,
    red: *mut f32,
    split: &Split,
    cols: u32,
    padded_cols: u32,
    aligned: u32,
    lane: u32,
    warp: u32,
    warps: u32,
) {
    let (g, t) = (lane >> 2, lane & 3);
    let nsteps = (padded_cols / TILE as u32).div_ceil(4);
    let (s0, s1) = part_steps(nsteps, split.splits, split.part);
    // SAFETY: the part's words are inside the dense part (device order, s1 <= nsteps).
    let part_words = unsafe {
        dense.add(
            split.band as usize * device_band_words(padded_cols as usize)
                + s0 as usize * STEP_WORDS,
        )
    };
    // SAFETY: the part's steps in device order (s1 > s0); the launcher gave the ring area.
    let (ring, mine) = unsafe { WeightRing::start::<1>(part_words, lane, warp, warps, s1 - s0) };
    if PDL {
        // SAFETY: sm_90 code. The first weight copies are in flight; the input, which the
        // kernel before may write, is read after this.
        unsafe { griddepcontrol_wait() };
    }
    let area = dyn_smem_addr() + stage_offset(warps, 1) + warp * WARP_STAGE_BYTES;
    let zeros = area + ROUND_BYTES;
    if lane == 0 {
        // SAFETY: inside this warp's zero area; made visible by the staging's warp barrier.
        unsafe { sts_v4(zeros, U32x4([0; 4])) };
    }
    // Lane (g, t) supplies B column g: tile g / 2's high (even g) or low (odd g) halves when
    // that is its own tile t, else zeros (stride 0). (An opaque zero keeps the stride a
    // register, as in the fp16 kernel.)
    let own = g >> 1 == t;
    let (frag0, frag_stride) = if own {
        (area + 32 * t + 16 * (g & 1), 128)
    } else {
        (zeros, 0)
    };
    let frag_stride = frag_stride | (cols >> 30);
    let st0 = area + HALVES_BYTES + 8 * t;
    let mut acc = [0.0f32; 2];
    let mut i = 0;
    while i < mine {
        // Lane l stages tile l of the round: step i + l / 4, tile l % 4 of it.
        let tile = (s0 + warp + (i + lane / 4) * warps) * 4 + lane % 4;
        // SAFETY: the vector holds cols values; `aligned` was checked by the launcher; reads
        // are bounded by cols (a tile past them reads zeros).
        let xs = unsafe { load_inputs(x, tile * TILE as u32, cols, aligned != 0) };
        let sg = stage_tile(&xs);
        // SAFETY: every lane has finished reading the previous round.
        unsafe { sync_warp() };
        // SAFETY: inside this warp's staging area (lane < 32 tiles).
        unsafe {
            sts_v4(area + 32 * lane, U32x4(sg.h));
            sts_v4(area + 32 * lane + 16, U32x4(sg.l));
            sts_v2(
                area + HALVES_BYTES + 8 * lane,
                sg.sigma.to_bits(),
                sg.t.to_bits(),
            );
            sync_warp();
        }
        let end = mine.min(i + ROUND);
        let (mut frag, mut st) = (frag0, st0);
        // Unrolled by the ring's slots: rounds start at multiples of RING_SLOTS.
        while i < end {
            for k in 0..RING_SLOTS {
                if i < end {
                    // SAFETY: steps 0..i + RING_DEPTH were copied in order; then step
                    // i + RING_DEPTH goes into the slot of step i - 1, read already.
                    let w = unsafe { ring.read(k) };
                    unsafe { ring.copy(i + RING_DEPTH, (k + RING_DEPTH) % RING_SLOTS) };
                    // SAFETY: converged warp; `frag` is the lane's slot of this step (or
                    // zeros), `st` the tile's (σ, T).
                    unsafe { step(w, frag, st, g, &mut acc) };
                    frag += frag_stride;
                    st += 32;
                    i += 1;
                }
            }
        }
    }
    // The copies past the last step finish before the block ends.
    // SAFETY: no operands.
    unsafe { cp_async_wait::<0>() };
    // The 4 lanes of rows 2g, 2g + 1 (t = 0..3) hold different tiles: sum them.
    for (q, v) in acc.iter_mut().enumerate() {
        // SAFETY: every lane reaches this point.
        unsafe {
            *v += f32::from_bits(shfl_xor(v.to_bits(), 1));
            *v += f32::from_bits(shfl_xor(v.to_bits(), 2));
        }
        if t == 0 {
            let r = 2 * g as usize + q;
            // SAFETY: warp < warps, r < 16.
            unsafe { *red.add((warp as usize * TILE + r) * crate::kernels::area::<1>()) = *v };
        }
    }
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn spqr_gemv_i8<const PT: bool, const PDL: bool>(
    dense: *const u64,
    x: *const u16,
    y: *mut u16,
    offsets: *const u32,
    col_vals: *const u32,
    split: Split,
    rows: u32,
    cols: u32,
    padded_cols: u32,
    aligned: u32,
) {
    if PDL {
        // SAFETY: sm_90 code (the caller's contract); it only lets the next grid launch.
        unsafe { griddepcontrol_launch_dependents() };
    }
    let tid = thread_idx_x();
    let (lane, warp, warps) = (tid & 31, tid >> 5, (block_dim_x() >> 5) - 1);
    let (red, outl) = sum_areas::<1>(warps);
    if warp == warps {
        if PDL {
            // SAFETY: sm_90 code; the outlier warp reads x, which the kernel before may write.
            unsafe { griddepcontrol_wait() };
        }
        // SAFETY: forwarded from the launcher's checks.
        unsafe {
            outlier_warp::<1, PT, false>(
                offsets,
                col_vals,
                x,
                core::ptr::null(),
                outl,
                &split,
                cols,
                1,
                lane,
                32,
            )
        };
    } else {
        // SAFETY: forwarded.
        unsafe {
            weights::<PDL>(
                dense,
                x,
                red,
                &split,
                cols,
                padded_cols,
                aligned,
                lane,
                warp,
                warps,
            )
        };
    }
    // SAFETY: every thread gets here; every warp wrote its part of `red`, the last `outl`.
    unsafe { write_rows::<1, 1>(red, outl, y, rows, 1, &split, tid, warps, 2) };
}

/// The integer-MMA kernels' entry body (`crate::routed_entry_points!`).
///
/// # Safety
/// As those entry points; `PDL` only in sm_90 code.
#[doc(hidden)]
#[inline(always)]
pub unsafe fn int8_entry<const PT: bool, const PDL: bool>(p: &SpqrGemvParams) {
    let (dense, x, y, offsets, col_vals, partials, counters) = crate::kernels::routed_pointers(p);
    let SpqrGemvParams {
        rows,
        cols,
        padded_cols,
        splits,
        aligned,
        ..
    } = *p;
    let split = Split::of_block(partials, counters, splits);
    // SAFETY: forwarded from the launcher's checks.
    unsafe {
        spqr_gemv_i8::<PT, PDL>(
            dense,
            x,
            y,
            offsets,
            col_vals,
            split,
            rows,
            cols,
            padded_cols,
            aligned,
        )
    }
}
