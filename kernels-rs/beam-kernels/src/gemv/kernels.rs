//! GEMV entry points (NVPTX only). The arithmetic is in the parent module.

use cmv_device::{
    U32x4, atomic_add_u32, block_dim_x, block_idx_x, cp_async_8_zfill, cp_async_16_ca_zfill,
    cp_async_commit, cp_async_wait, cp_async_wait_at_most, dyn_smem, dyn_smem_addr, fence_gpu,
    global_thread_x, grid_dim_x, lane_id, ld_nc_na_v4, ld_nc_u64, ld_nc_v4, ld_relaxed_u32,
    ld_stream_u64, lds_v2, lds_v4, mma_m16n8k32_u8, red_add_u32_global, shfl_down, shfl_idx,
    shfl_xor, sts_u32, sts_v4, sync_threads, sync_warp, thread_idx_x, warp_id, warp_sum_i32,
};

use super::{
    ACC_SAT_U64, FLAG_B_TRANSPOSED, FLAG_FUSED_PREP, FLAG_OUT_TRANSPOSED, GemvParams, PREP_PERM,
    PREP_STREAM, ROWS_PER_WARP, UNROLL, WARPS_PER_BLOCK, chunk_dot, chunk_x, chunks_per_word,
    mac_u64, perm_value, slice_words, unroll, window, word_elems,
};
use crate::access::{load, store};
use crate::gemv_direct::{
    DIRECT_WARPS, Halves, chunk_halves, chunk_words, direct_chunks, direct_dot, direct_finish,
    direct_rows, direct_unroll, direct_x, slice_chunks,
};
use crate::gemv_mma::{
    MMA_ROWS, MMA_UNROLL, SEG_WORDS, frag_word, frag_word_planes, frag_words_planes, interleaved,
    lane_word, mma_unroll, plane_shares, seg_frag_words, segments, unpack, vector_planes,
};
use crate::gemv_ring::{
    RING_STAGE_BYTES, RING_STEP_WORDS, ring_copies, ring_copy, ring_copy_bytes, ring_decode,
    ring_lane_step, ring_limit, ring_offset, ring_wide, ring_word_offset,
};
use crate::gemv_stream::{
    StreamShape, copies, copy_plan, lane_chunks, seg_stage_bytes, stream_extra_words, warp_units,
    wide_copies,
};
use crate::layout::finish;

const R: usize = ROWS_PER_WARP as usize;
const U: usize = UNROLL as usize;

/// `cmv_beam_gemv_prep`: writes `p.xp_len` words of the vector's workspace, the permuted
/// vector ([`PREP_PERM`]) or the tensor-core kernels' `B` fragments.
///
/// # Safety
/// The launcher checked: `B` has one column and `A.cols` rows (one row and `A.cols` columns
/// with `FLAG_B_TRANSPOSED`), `xp` holds `xp_len` `u32`,
/// which is `perm_slots(A.bits, A.row_words)` or `frag_words(A.cols)` for the `prep` given.
#[inline(always)]
unsafe fn gemv_prep(p: &GemvParams) {
    let (a, bm) = (p.a, p.b);
    let xp = p.xp.as_mut_ptr();
    // SAFETY: c < A.cols is an element of B (k x 1, or 1 x k when transposed), as the callees
    // promise.
    let tb = p.flags & FLAG_B_TRANSPOSED != 0;
    let x = |c: u32| unsafe { if tb { load(&bm, 0, c) } else { load(&bm, c, 0) } } as u32;
    let step = u64::from(grid_dim_x()) * u64::from(block_dim_x());
    let mut i = global_thread_x();
    // The streaming kernel's sums and tile counters follow the fragments, zeroed.
    let extra = if p.prep == PREP_STREAM {
        stream_extra_words(a.rows)
    } else {
        0
    };
    while i < u64::from(p.xp_len) + u64::from(extra) {
        let slot = i as u32;
        let v = if slot >= p.xp_len {
            0
        } else if p.prep == PREP_PERM {
            perm_value(a.bits, slot, a.cols, a.row_words, x)
        } else if p.prep == PREP_STREAM {
            frag_word_planes(a.bits, vector_planes(bm.bits), slot, a.cols, x)
        } else {
            frag_word(a.bits, slot, a.cols, x)
        };
        // SAFETY: slot < xp_len, the workspace's length.
        unsafe { *xp.add(slot as usize) = v };
        i += step;
    }
}

/// Slots one thread computes per round of [`fill_vector`] (their loads in flight together).
const FILL_BATCH: usize = 8;

/// Puts the vector's first `words` (a multiple of 4) `u32` into the dynamic shared memory,
/// then waits for the whole block: with [`FLAG_FUSED_PREP`] computed here (`value(slot)`,
/// [`FILL_BATCH`] slots per thread at a time), otherwise copied from the workspace.
///
/// # Safety
/// Without the flag the workspace holds `words` `u32` written before this launch (16-byte
/// aligned); `value` may be called for every slot below `words`; the shared memory holds at
/// least `words` `u32`; every thread of the block calls it.
#[inline(always)]
unsafe fn fill_vector(p: &GemvParams, words: u32, value: impl Fn(u32) -> u32) {
    let base = dyn_smem_addr();
    let xs = dyn_smem() as *mut u32;
    let nt = block_dim_x();
    if p.flags & FLAG_FUSED_PREP != 0 {
        let mut i = thread_idx_x();
        while i < words {
            let f = |u: u32| {
                let s = i + u * nt;
                if s < words { value(s) } else { 0 }
            };
            // Written out: `array::from_fn` over this closure kept the array in local memory.
            let v: [u32; FILL_BATCH] = [f(0), f(1), f(2), f(3), f(4), f(5), f(6), f(7)];
            for (u, &v) in v.iter().enumerate() {
                let s = i + u as u32 * nt;
                if s < words {
                    // SAFETY: s < words: inside the shared memory.
                    unsafe { *xs.add(s as usize) = v };
                }
            }
            i += FILL_BATCH as u32 * nt;
        }
    } else {
        let src = p.xp.as_mut_ptr() as *const U32x4;
        let n = words / 4;
        let mut i = thread_idx_x();
        while i < n {
            // SAFETY: i < words / 4: inside both the workspace and the shared memory.
            unsafe { sts_v4(base + 16 * i, ld_nc_v4(src.add(i as usize))) };
            i += nt;
        }
    }
    // SAFETY: every thread reaches it (forwarded).
    unsafe { sync_threads() };
}

/// The end of a tile of the `nogaps` and ring kernels: the slices' sums added through the
/// shared slots `red` (when `slices > 1`), then lane 0 of each slice-0 warp writes its rows
/// `row0 ..`.
///
/// # Safety
/// Every thread of the block calls it for the same tile (the barriers); `red` holds
/// [`WARPS_PER_BLOCK`] `* 32` `u32` of shared memory; `acc` holds the warp's sums in every lane;
/// the output is `A.rows x 1` and these rows are written by no other warp.
#[inline(always)]
unsafe fn tile_epilogue(
    p: &GemvParams,
    mut acc: [u32; R],
    red: *mut u32,
    (w, lane, slices): (u32, u32, u32),
    row0: u32,
) {
    let slice = w % slices;
    if slices > 1 {
        // No lane-dependent branch between the barriers (`bar.sync` is `.aligned`: a
        // compiler that duplicated one into two sides of a divergent branch would hang the
        // block). Every lane holds the warp's sums; lane l writes its own slot, sum l % R.
        let mine = acc
            .iter()
            .enumerate()
            .fold(0, |m, (r, &a)| if lane as usize % R == r { a } else { m });
        // SAFETY: w * 32 + lane < WARPS_PER_BLOCK * 32 slots.
        unsafe { *red.add(w as usize * 32 + lane as usize) = mine };
        // SAFETY: every thread of the block runs the same tiles.
        unsafe { sync_threads() };
        // Warp-uniform: every lane of a slice-0 warp adds the other slices' sums.
        if slice == 0 {
            for s in 1..slices as usize {
                for (r, a) in acc.iter_mut().enumerate() {
                    // SAFETY: warp w + s is in this group, inside the block.
                    *a = a.wrapping_add(unsafe { *red.add((w as usize + s) * 32 + r) });
                }
            }
        }
        // SAFETY: as above; the slots are rewritten only after every thread read them.
        unsafe { sync_threads() };
    }
    if slice == 0 && lane == 0 {
        let out = p.c;
        for (r, &s) in acc.iter().enumerate() {
            let row = row0 + r as u32;
            if row < p.a.rows {
                let v = finish(u64::from(s), out.bits, p.overflow);
                // SAFETY: row < rows, column 0 < 1; each output written once.
                unsafe { store(&out, row, 0, v) };
            }
        }
    }
}

/// `cmv_beam_gemv_nogaps_b{B}`: see the parent module.
///
/// # Safety
/// The launcher checked: `A` is `nogaps` with `B`-bit elements, `B` has one column and
/// `A.cols` rows, `C` is `A.rows x 1`, zeroed unless `naive`; the accumulator is `U32`;
/// [`WARPS_PER_BLOCK`] warps per block, `slices` a power of two dividing it; `cmv_beam_gemv_prep`
/// with [`PREP_PERM`] wrote the workspace (`xp_len = perm_slots(B, A.row_words)`) before this
/// launch; the dynamic shared memory holds `nogaps_smem_bytes(B, A.row_words)` bytes.
#[inline(always)]
unsafe fn gemv_nogaps<const B: u32>(p: &GemvParams) {
    let (a, bm) = (p.a, p.b);
    let (rows, rw) = (a.rows, a.row_words);
    let xs = dyn_smem() as *mut u32;
    let slots = p.xp_len;
    // SAFETY: the shared memory holds `slots` u32 for x, then WARPS_PER_BLOCK * 32 for the sums.
    let red = unsafe { xs.add(slots as usize) };
    // SAFETY: forwarded from the launcher (workspace written or fused, smem large enough); c <
    // A.cols is an element of B (k x 1).
    unsafe {
        fill_vector(p, slots, |s| {
            perm_value(B, s, a.cols, rw, |c| load(&bm, c, 0) as u32)
        })
    };

    let slices = p.slices;
    let (w, lane) = (warp_id(), lane_id());
    let (slice, group) = (w % slices, w / slices);
    let groups = WARPS_PER_BLOCK / slices;
    let per = slice_words(rw, slices);
    let begin = (slice * per).min(rw);
    let end = (begin + per).min(rw);
    let tiles = rows.div_ceil(groups * ROWS_PER_WARP);
    let mut tile = block_idx_x();
    while tile < tiles {
        let row0 = (tile * groups + group) * ROWS_PER_WARP;
        let mut acc = [0u32; R];
        // Warp-uniform: the shuffles below run with the whole warp.
        if row0 < rows {
            let base = a.words.as_ptr();
            let rowp: [*const u64; R] = core::array::from_fn(|r| {
                let row = (row0 + r as u32).min(rows - 1);
                // SAFETY: row < rows: the row's words lie in A.
                unsafe { base.add(row as usize * rw as usize) }
            });
            let mut g0 = begin;
            while g0 < end {
                let mut wv = [[0u64; R]; U];
                for (u, wu) in wv.iter_mut().enumerate() {
                    let g = g0 + 32 * u as u32 + lane;
                    if (u as u32) < unroll(B) && g < end {
                        for (r, wr) in wu.iter_mut().enumerate() {
                            // SAFETY: g < row_words: inside row r.
                            *wr = unsafe { ld_stream_u64(rowp[r].add(g as usize)) };
                        }
                    }
                }
                for (u, wu) in wv.iter().enumerate() {
                    if u as u32 >= unroll(B) {
                        break;
                    }
                    let g = g0 + 32 * u as u32 + lane;
                    let we = word_elems(B, g);
                    let win: [(u64, u32); R] = core::array::from_fn(|r| {
                        let next = if 64 % B == 0 {
                            0
                        } else {
                            let wd = wu[r];
                            // SAFETY: the whole warp runs this loop (uniform bounds).
                            let (lo, hi) = unsafe {
                                (shfl_down(wd as u32, 1), shfl_down((wd >> 32) as u32, 1))
                            };
                            let mut n = (u64::from(hi) << 32) | u64::from(lo);
                            if lane == 31 {
                                n = if g + 1 < rw {
                                    // SAFETY: g + 1 < row_words: inside row r.
                                    unsafe { ld_stream_u64(rowp[r].add(g as usize + 1)) }
                                } else {
                                    0
                                };
                            }
                            n
                        };
                        window(wu[r], next, we.shift)
                    });
                    for k in 0..chunks_per_word(B) {
                        // SAFETY: perm_slot(B, g, j) < perm_slots for a word inside the row.
                        let xv = chunk_x::<B>(g, g < end, k, |c| unsafe { *xs.add(c as usize) });
                        for (r, &(lo, hi)) in win.iter().enumerate() {
                            acc[r] = chunk_dot::<B>(acc[r], lo, hi, k, &xv);
                        }
                    }
                }
                g0 += 32 * unroll(B);
            }
            for a in acc.iter_mut() {
                // SAFETY: the whole warp runs this (row0 < rows is warp-uniform).
                *a = unsafe { warp_sum_i32(*a as i32) } as u32;
            }
        }
        // SAFETY: every thread of the block runs the same tiles; `red` holds
        // WARPS_PER_BLOCK * 32 slots.
        unsafe { tile_epilogue(p, acc, red, (w, lane, slices), row0) };
        tile += grid_dim_x();
    }
}

/// `cmv_beam_gemv_ring_b{B}`: see [`crate::gemv_ring`].
///
/// # Safety
/// As [`gemv_nogaps`], with `p.slices` a [`ring_code`] of slices (a power of two dividing
/// [`WARPS_PER_BLOCK`]) and stages (2..=8), and the dynamic shared memory holding
/// `ring_smem_bytes(B, A.row_words, stages)` bytes.
#[inline(always)]
unsafe fn gemv_ring<const B: u32>(p: &GemvParams) {
    // SAFETY: forwarded; the copy width only changes how the same bytes move.
    unsafe {
        if ring_wide(p.a.row_words) {
            ring_body::<B, true>(p)
        } else {
            ring_body::<B, false>(p)
        }
    }
}

/// [`gemv_ring`] with 16-byte (`WIDE`) or 8-byte copies.
///
/// # Safety
/// As [`gemv_ring`], and `WIDE` is `ring_wide(A.row_words)`.
#[inline(always)]
unsafe fn ring_body<const B: u32, const WIDE: bool>(p: &GemvParams) {
    let (a, bm) = (p.a, p.b);
    let (rows, rw) = (a.rows, a.row_words);
    let xs = dyn_smem() as *mut u32;
    let slots = p.xp_len;
    let (slices, ns) = ring_decode(p.slices);
    // SAFETY: the shared memory holds `slots` u32 for x, then WARPS_PER_BLOCK * 32 for the
    // sums, then the rings.
    let red = unsafe { xs.add(slots as usize) };
    let (w, lane) = (warp_id(), lane_id());
    let ring = dyn_smem_addr() + ring_offset(B, rw) as u32 + w * ns * RING_STAGE_BYTES;
    let (slice, group) = (w % slices, w / slices);
    let groups = WARPS_PER_BLOCK / slices;
    let per = slice_words(rw, slices);
    let begin = (slice * per).min(rw);
    let end = (begin + per).min(rw);
    let limit = ring_limit(end, rw);
    let steps = (end - begin).div_ceil(RING_STEP_WORDS);
    let tiles = rows.div_ceil(groups * ROWS_PER_WARP);
    let base = a.words.as_ptr();
    let row0_of = |tile: u32| (tile * groups + group) * ROWS_PER_WARP;

    // The copies of step `step` of tile `tile` into ring slot `slot`, one commit group.
    let issue = |tile: u32, step: u32, slot: u32| {
        let row0 = row0_of(tile);
        let g0 = begin + step * RING_STEP_WORDS;
        let st = ring + slot * RING_STAGE_BYTES;
        let row_off = |r: u32| (row0 + r).min(rows - 1) as usize * rw as usize;
        let inside = g0 + RING_STEP_WORDS < limit;
        for i in 0..ring_copies(WIDE) {
            let (r, pos) = ring_copy(WIDE, lane, i);
            let g = g0 + pos;
            let n = if inside {
                if WIDE { 16 } else { 8 }
            } else {
                ring_copy_bytes(if WIDE { 16 } else { 8 }, g, limit)
            };
            // SAFETY: with n > 0, word g (and g + 1 when n is 16) lies in the row (g < limit
            // <= rw), row0 + r is clamped to a row of A; wide copies start on even words of
            // rows of even length (16-byte aligned). With n = 0 nothing is read (A's first
            // word is a valid aligned address). The destination is this warp's slot, which
            // no lane reads until the group is waited for.
            unsafe {
                let src = if n > 0 {
                    base.add(row_off(r) + g as usize)
                } else {
                    base
                };
                let dst = st + ring_word_offset(r, pos);
                if WIDE {
                    cp_async_16_ca_zfill(dst, src as *const U32x4, n);
                } else {
                    cp_async_8_zfill(dst, src, n);
                }
            }
        }
        if lane < ROWS_PER_WARP {
            // The word after the step, row `lane`.
            let g = g0 + RING_STEP_WORDS;
            let n = ring_copy_bytes(8, g, limit);
            // SAFETY: as above (8-byte copy of an 8-byte aligned word, or nothing).
            unsafe {
                let src = if n > 0 {
                    base.add(row_off(lane) + g as usize)
                } else {
                    base
                };
                cp_async_8_zfill(st + ring_word_offset(lane, RING_STEP_WORDS), src, n);
            }
        }
    };
    // The warp's (tile, step) list: its tiles strided over the grid (rows inside the matrix),
    // each slice's steps.
    let (mut pf_tile, mut pf_step) = (block_idx_x(), 0u32);
    let mut prefetch = |slot: u32| {
        if steps > 0 && pf_tile < tiles && row0_of(pf_tile) < rows {
            issue(pf_tile, pf_step, slot);
            pf_step += 1;
            if pf_step == steps {
                pf_step = 0;
                pf_tile += grid_dim_x();
            }
        }
        // SAFETY: no operands; an empty group when nothing is left keeps the count.
        unsafe { cp_async_commit() };
    };
    for slot in 0..ns - 1 {
        prefetch(slot);
    }
    // SAFETY: forwarded from the launcher (workspace written or fused, smem large enough); c <
    // A.cols is an element of B (k x 1). The first copies are on their way meanwhile.
    unsafe {
        fill_vector(p, slots, |s| {
            perm_value(B, s, a.cols, rw, |c| load(&bm, c, 0) as u32)
        })
    };

    let mut slot = 0;
    let mut tile = block_idx_x();
    while tile < tiles {
        let row0 = row0_of(tile);
        let mut acc = [0u32; R];
        // Warp-uniform: the shuffles below run with the whole warp.
        if row0 < rows {
            for step in 0..steps {
                // SAFETY: no operands. ns - 1 groups were committed before the first stage
                // and one per stage since: waiting until ns - 2 are pending completes this
                // stage's group.
                unsafe {
                    cp_async_wait_at_most(ns - 2);
                    // Every lane's copies of this stage are visible to the warp; every lane
                    // has read the previous slot, which the prefetch below overwrites.
                    sync_warp();
                }
                prefetch(if slot == 0 { ns - 1 } else { slot - 1 });
                let st = ring + slot * RING_STAGE_BYTES;
                ring_lane_step::<B>(
                    &mut acc,
                    (begin + step * RING_STEP_WORDS, end, lane),
                    |r, pos| {
                        // SAFETY: r < ROWS_PER_WARP, pos <= RING_STEP_WORDS: inside this warp's
                        // slot, 8-byte aligned.
                        let v = unsafe { lds_v2(st + ring_word_offset(r, pos)) };
                        u64::from(v[0]) | u64::from(v[1]) << 32
                    },
                    // SAFETY: perm_slot(B, g, j) < perm_slots for a word inside the row.
                    |c| unsafe { *xs.add(c as usize) },
                );
                slot = if slot + 1 == ns { 0 } else { slot + 1 };
            }
            for a in acc.iter_mut() {
                // SAFETY: the whole warp runs this (row0 < rows is warp-uniform).
                *a = unsafe { warp_sum_i32(*a as i32) } as u32;
            }
        }
        // SAFETY: every thread of the block runs the same tiles; `red` holds
        // WARPS_PER_BLOCK * 32 slots.
        unsafe { tile_epilogue(p, acc, red, (w, lane, slices), row0) };
        tile += grid_dim_x();
    }
    // SAFETY: no operands; the remaining groups are empty.
    unsafe { cp_async_wait::<0>() };
}

/// `cmv_beam_gemv_mma_b{B}`: see [`crate::gemv_mma`].
///
/// # Safety
/// The launcher checked: `A` is `nogaps` with `B <= 8`-bit elements, `B` has one column and
/// `A.cols` rows, `C` is `A.rows x 1`, zeroed unless `naive`; the accumulator is `U32`;
/// [`WARPS_PER_BLOCK`] warps per block, `slices` a power of two dividing it;
/// `cmv_beam_gemv_prep` with `PREP_MMA` wrote the workspace (`xp_len = frag_words(A.cols)`)
/// before this launch; the dynamic shared memory holds `mma_smem_bytes(A.cols)` bytes.
#[inline(always)]
unsafe fn gemv_mma<const B: u32>(p: &GemvParams) {
    const U: usize = MMA_UNROLL as usize;
    let un = mma_unroll(B);
    let (a, bm, out) = (p.a, p.b, p.c);
    let (rows, rw) = (a.rows, a.row_words);
    let segs = segments(a.cols);
    let words = p.xp_len;
    // SAFETY: forwarded from the launcher (workspace written or fused, smem large enough); c <
    // A.cols is an element of B (k x 1).
    unsafe {
        fill_vector(p, words, |s| {
            frag_word(B, s, a.cols, |c| load(&bm, c, 0) as u32)
        })
    };
    let xs = dyn_smem_addr();
    // SAFETY: the shared memory holds `words` u32 of fragments, then WARPS_PER_BLOCK * 32.
    let red = unsafe { (dyn_smem() as *mut u32).add(words as usize) };

    let slices = p.slices;
    let (w, lane) = (warp_id(), lane_id());
    let (g, t) = (lane / 4, lane % 4);
    let (slice, group) = (w % slices, w / slices);
    let groups = WARPS_PER_BLOCK / slices;
    let per = segs.div_ceil(slices);
    let begin = (slice * per).min(segs);
    let end = (begin + per).min(segs);
    let tiles = rows.div_ceil(groups * MMA_ROWS);
    let seg_w = 4 * B;
    let mut tile = block_idx_x();
    while tile < tiles {
        let row0 = (tile * groups + group) * MMA_ROWS;
        let mut c = [0u32; 4];
        // Warp-uniform: the MMAs below run with the whole warp.
        if row0 < rows {
            let base = a.words.as_ptr();
            let ra = (row0 + g).min(rows - 1);
            let rb = (row0 + g + 8).min(rows - 1);
            // SAFETY: ra, rb < rows: the rows' words lie in A.
            let (pa, pb) = unsafe {
                (
                    base.add(ra as usize * rw as usize),
                    base.add(rb as usize * rw as usize),
                )
            };
            let mut s0 = begin;
            while s0 < end {
                let mut wv = [[[0u32; 16]; 2]; U];
                for (u, wu) in wv.iter_mut().enumerate() {
                    let seg = s0 + u as u32;
                    if u as u32 >= un {
                        break;
                    }
                    // A closure called with constants, as `step` below: a loop over `j`
                    // is not always unrolled (it was not at B = 7), and then `wv` goes to
                    // local memory.
                    let mut put = |j: u32, va: u64, vb: u64| {
                        let j = 2 * j as usize;
                        wu[0][j] = va as u32;
                        wu[0][j + 1] = (va >> 32) as u32;
                        wu[1][j] = vb as u32;
                        wu[1][j + 1] = (vb >> 32) as u32;
                    };
                    let mut load_word = |j: u32| {
                        let word = seg * seg_w + lane_word(B, t, j);
                        if j >= B || word >= rw {
                            return;
                        }
                        if B % 2 == 0 && rw % 2 == 0 && j % 2 == 0 && word + 1 < rw {
                            // Words j and j + 1 as one 16-byte load: `word` is even (lane_word
                            // of an even j at an even width), rows start on 16 bytes (even
                            // row_words).
                            // SAFETY: word + 1 < row_words: inside rows ra and rb; aligned.
                            let (va, vb) = unsafe {
                                let (qa, qb) = (
                                    pa.add(word as usize) as *const U32x4,
                                    pb.add(word as usize) as *const U32x4,
                                );
                                if interleaved(B) {
                                    (ld_nc_na_v4(qa).0, ld_nc_na_v4(qb).0)
                                } else {
                                    (ld_nc_v4(qa).0, ld_nc_v4(qb).0)
                                }
                            };
                            let w64 = |v: [u32; 4], h: usize| {
                                u64::from(v[2 * h]) | u64::from(v[2 * h + 1]) << 32
                            };
                            put(j, w64(va, 0), w64(vb, 0));
                            put(j + 1, w64(va, 1), w64(vb, 1));
                        } else if !(B % 2 == 0 && rw % 2 == 0 && j % 2 == 1) {
                            // SAFETY: word < row_words: inside rows ra and rb.
                            let (va, vb) = unsafe {
                                if interleaved(B) {
                                    (
                                        ld_stream_u64(pa.add(word as usize)),
                                        ld_stream_u64(pb.add(word as usize)),
                                    )
                                } else {
                                    (
                                        ld_nc_u64(pa.add(word as usize)),
                                        ld_nc_u64(pb.add(word as usize)),
                                    )
                                }
                            };
                            put(j, va, vb);
                        }
                    };
                    if seg < end {
                        load_word(0);
                        load_word(1);
                        load_word(2);
                        load_word(3);
                        load_word(4);
                        load_word(5);
                        load_word(6);
                        load_word(7);
                    }
                }
                // A closure called with constants too (at B = 7 the loop over `u` was not
                // unrolled either).
                let mut multiply = |u: usize| {
                    let (seg, wu) = (s0 + u as u32, &wv[u]);
                    if u as u32 >= un || seg >= end {
                        return;
                    }
                    let mut bf = [U32x4([0; 4]); 4];
                    if lane < 16 {
                        for (q, f) in bf.iter_mut().enumerate() {
                            let off = (seg * SEG_WORDS + q as u32 * 64 + lane * 4) * 4;
                            // SAFETY: inside the fragments: seg < segs, 16-byte aligned.
                            *f = unsafe { lds_v4(xs + off) };
                        }
                    }
                    // Called with constant steps, so every index and shift is an immediate
                    // (a loop over `s` is not always unrolled, and then `wu` goes to local
                    // memory).
                    let mut step = |s: u32| {
                        let (a0, a2) = unpack::<B>(&wu[0], s);
                        let (a1, a3) = unpack::<B>(&wu[1], s);
                        let f = bf[(s / 2) as usize].0;
                        let h = 2 * (s % 2) as usize;
                        // SAFETY: the whole warp runs this (row0 and seg are warp-uniform).
                        c = unsafe { mma_m16n8k32_u8([a0, a1, a2, a3], [f[h], f[h + 1]], c) };
                    };
                    step(0);
                    step(1);
                    step(2);
                    step(3);
                    step(4);
                    step(5);
                    step(6);
                    step(7);
                };
                const _: () = assert!(MMA_UNROLL == 4);
                multiply(0);
                multiply(1);
                multiply(2);
                multiply(3);
                s0 += un;
            }
        }
        let (mut lo, mut hi) = plane_shares(c, t);
        // SAFETY: the whole warp runs this (no lane-dependent branch above).
        unsafe {
            lo = lo.wrapping_add(shfl_xor(lo, 1));
            lo = lo.wrapping_add(shfl_xor(lo, 2));
            hi = hi.wrapping_add(shfl_xor(hi, 1));
            hi = hi.wrapping_add(shfl_xor(hi, 2));
        }
        if slices > 1 {
            // No lane-dependent branch between the barriers (see `gemv_nogaps`): every lane
            // writes its slot; lane 4g holds row g's sum, lane 4g + 1 row g + 8's.
            let mine = if t == 0 { lo } else { hi };
            // SAFETY: w * 32 + lane < WARPS_PER_BLOCK * 32 slots.
            unsafe { *red.add(w as usize * 32 + lane as usize) = mine };
            // SAFETY: every thread of the block runs the same tiles.
            unsafe { sync_threads() };
            if slice == 0 {
                for s in 1..slices as usize {
                    let o = (w as usize + s) * 32 + 4 * g as usize;
                    // SAFETY: warp w + s is in this group, inside the block.
                    unsafe {
                        lo = lo.wrapping_add(*red.add(o));
                        hi = hi.wrapping_add(*red.add(o + 1));
                    }
                }
            }
            // SAFETY: as above; the slots are rewritten only after every thread read them.
            unsafe { sync_threads() };
        }
        if slice == 0 && t == 0 {
            for (r, v) in [(row0 + g, lo), (row0 + g + 8, hi)] {
                if r < rows {
                    let v = finish(u64::from(v), out.bits, p.overflow);
                    // SAFETY: r < rows, column 0 < 1; each output written once.
                    unsafe { store(&out, r, 0, v) };
                }
            }
        }
        tile += grid_dim_x();
    }
}

/// `cmv_beam_gemv_stream_b{B}`: see [`crate::gemv_stream`].
///
/// # Safety
/// The launcher checked: `A` is `nogaps` with `B <= 8`-bit elements, `B` has one column and
/// `A.cols` rows, `C` is `A.rows x 1`, zeroed unless `naive`; the accumulator is `U32`;
/// `warps` (8 or 16) warps per block; `cmv_beam_gemv_prep` with [`PREP_STREAM`] wrote the
/// workspace (`xp_len = frag_words_planes(A.cols, vector_planes(B.bits))` fragments, then
/// `stream_extra_words(A.rows)` zeros) before this launch; the dynamic shared memory holds
/// `stream_smem_bytes(B, warps, A.cols, vector_planes(B.bits))` bytes.
#[inline(always)]
unsafe fn gemv_stream<const B: u32>(p: &GemvParams) {
    // SAFETY: forwarded; the copy width only changes how the same bytes move.
    unsafe {
        if wide_copies(B, p.a.row_words) {
            stream_body::<B, true>(p)
        } else {
            stream_body::<B, false>(p)
        }
    }
}

/// [`gemv_stream`] with 16-byte (`WIDE`) or 8-byte copies.
///
/// # Safety
/// As [`gemv_stream`], and `WIDE` is `wide_copies(B, A.row_words)`.
#[inline(always)]
unsafe fn stream_body<const B: u32, const WIDE: bool>(p: &GemvParams) {
    let shape = StreamShape::from_code(p.slices);
    let (ug, ns) = (shape.unit_segs, shape.stages);
    let ssb = seg_stage_bytes(B);
    let sb = ug * ssb;
    let (a, out) = (p.a, p.c);
    let (rows, rw) = (a.rows, a.row_words);
    let segs = segments(a.cols);
    let rus = shape.row_units(a.cols);
    let tiles = rows.div_ceil(MMA_ROWS);
    let planes = vector_planes(p.b.bits);
    let fw = frag_words_planes(a.cols, planes);
    let fused = p.flags & FLAG_FUSED_PREP != 0;
    let smem = dyn_smem_addr();
    let (w, lane) = (warp_id(), lane_id());
    let (g, t) = (lane / 4, lane % 4);
    let nw = block_dim_x() / 32;
    let sfw = seg_frag_words(planes);
    let ring = smem + w * ns * sb;
    let xs = smem + nw * ns * sb;
    let nc = copies(B, WIDE) as usize;
    let base = a.words.as_ptr();
    // SAFETY: the workspace holds fw fragments (not with FLAG_FUSED_PREP), then a sum per row,
    // then a counter per tile.
    let (sums, counts) = unsafe {
        let s = p.xp.as_mut_ptr().add(if fused { 0 } else { fw as usize });
        (s, s.add(rows as usize))
    };

    let units = u64::from(tiles) * u64::from(rus);
    let warps = u64::from(grid_dim_x()) * u64::from(nw);
    let (u0, u1) = warp_units(units, warps, u64::from(block_idx_x() * nw + w));
    // This lane's copies of one segment, the same in every segment: the word offset from the
    // segment's first word (row0, seg 4 B) and, packed, the stage offset, the row in the tile
    // and the in-segment word (for the checks at the matrix's edges).
    let mut src_off = [0u32; 16];
    let mut plan = [0u32; 16];
    for i in 0..nc {
        let (r, wr, off) = copy_plan(B, WIDE, lane, i as u32);
        if WIDE {
            src_off[i] = r * rw + wr;
        }
        plan[i] = off | r << 16 | wr << 24;
    }
    // The 8-byte path has twice the copies: their word offsets are recomputed (one IMAD)
    // instead of held (at 7 bits, 14 more registers spilled).
    macro_rules! word_off {
        ($i:expr) => {
            if WIDE {
                src_off[$i]
            } else {
                ((plan[$i] >> 16) & 0xff) * rw + (plan[$i] >> 24)
            }
        };
    }
    // The copies of unit (tile, ru) into ring slot `slot`: its `ug` segments, one after the
    // other (each warp load is 4 rows x 128 contiguous bytes; consecutive loads continue the
    // same rows), one commit group.
    let issue = |tile: u32, ru: u32, slot: u32| {
        let row0 = tile * MMA_ROWS;
        let inside_rows = row0 + MMA_ROWS <= rows;
        for k in 0..ug {
            let seg = ru * ug + k;
            let dst0 = ring + slot * sb + k * ssb;
            let w0 = seg * 4 * B;
            if inside_rows && w0 + 4 * B <= rw {
                // SAFETY: row0 < rows and w0 < rw: the segment's first word is in A.
                let sbase = unsafe { base.add(row0 as usize * rw as usize + w0 as usize) };
                // A segment inside the matrix: no checks.
                for i in 0..nc {
                    // SAFETY: row0 + r < rows and w0 + wr (+ 1 when wide) < rw: a word (pair)
                    // of A, aligned as the copy needs (wide: even words of rows of even
                    // length). The destination is this warp's slot, which no lane reads until
                    // the group is waited for.
                    unsafe {
                        let src = sbase.add(word_off!(i) as usize);
                        let dst = dst0 + (plan[i] & 0xffff);
                        if WIDE {
                            cp_async_16_ca_zfill(dst, src as *const U32x4, 16);
                        } else {
                            cp_async_8_zfill(dst, src, 8);
                        }
                    }
                }
            } else {
                // Rows past the matrix, words past the row (or a whole segment past it, in a
                // row's last unit): zero-filled, never read.
                let lim_r = rows - row0;
                let lim_w = rw.saturating_sub(w0);
                for i in 0..nc {
                    let (r, wr) = ((plan[i] >> 16) & 0xff, plan[i] >> 24);
                    let ok = r < lim_r && wr < lim_w;
                    // SAFETY: with `ok` the word (and its pair: wide copies start on even
                    // words of rows of even length) lies in A; otherwise nothing is read
                    // (size 0, zero-filled) from A's aligned first word. The destination as
                    // above.
                    unsafe {
                        let src = if ok {
                            base.add((row0 + r) as usize * rw as usize + (w0 + wr) as usize)
                        } else {
                            base
                        };
                        let dst = dst0 + (plan[i] & 0xffff);
                        if WIDE {
                            cp_async_16_ca_zfill(dst, src as *const U32x4, if ok { 16 } else { 0 });
                        } else {
                            cp_async_8_zfill(dst, src, if ok { 8 } else { 0 });
                        }
                    }
                }
            }
        }
    };
    let (mut pf_tile, mut pf_ru) = ((u0 / u64::from(rus)) as u32, (u0 % u64::from(rus)) as u32);
    let mut pf_left = u1 - u0;
    let mut prefetch = |slot: u32| {
        if pf_left > 0 {
            issue(pf_tile, pf_ru, slot);
            pf_left -= 1;
            pf_ru += 1;
            if pf_ru == rus {
                pf_ru = 0;
                pf_tile += 1;
            }
        }
        // SAFETY: no operands; an empty group when nothing is left keeps the count.
        unsafe { cp_async_commit() };
    };
    for slot in 0..ns - 1 {
        prefetch(slot);
    }
    // The fragments, while the first units are on their way: built from B here (fused), or
    // copied from the workspace the prep kernel wrote.
    if fused {
        let bm = p.b;
        let mut i = thread_idx_x();
        while i < fw {
            // SAFETY: c < A.cols is an element of B (k x 1).
            let v = frag_word_planes(B, planes, i, a.cols, |c| unsafe { load(&bm, c, 0) } as u32);
            // SAFETY: i < fw: inside the shared memory's fragments.
            unsafe { sts_u32(xs + 4 * i, v) };
            i += nw * 32;
        }
    } else {
        let src = p.xp.as_mut_ptr() as *const U32x4;
        let mut i = thread_idx_x();
        while i < fw / 4 {
            // SAFETY: i < fw / 4: inside the workspace's fragments and the shared memory.
            unsafe { sts_v4(xs + 16 * i, ld_nc_v4(src.add(i as usize))) };
            i += nw * 32;
        }
    }
    // SAFETY: every thread of the block reaches it.
    unsafe { sync_threads() };

    let (mut tile, mut ru) = ((u0 / u64::from(rus)) as u32, (u0 % u64::from(rus)) as u32);
    let mut first = ru;
    let mut left = u1 - u0;
    let mut slot = 0;
    let (mut c0, mut c1) = ([0u32; 4], [0u32; 4]);
    while left > 0 {
        // SAFETY: no operands. ns - 1 groups were committed before the first unit and one per
        // unit since: waiting until ns - 2 are pending completes this unit's group.
        unsafe {
            cp_async_wait_at_most(ns - 2);
            // Every lane's copies of this unit are visible to the warp; every lane has read
            // the slot of the previous unit, which the prefetch below overwrites.
            sync_warp();
        }
        prefetch(if slot == 0 { ns - 1 } else { slot - 1 });
        for k in 0..ug {
            let seg = ru * ug + k;
            // Warp-uniform: the row's last unit may end before its last segment.
            if seg >= segs {
                break;
            }
            let st = ring + slot * sb + k * ssb;
            let mut wv = [[0u32; 16]; 2];
            for jj in 0..lane_chunks(B) / 2 {
                for (h, wh) in wv.iter_mut().enumerate() {
                    // SAFETY: inside this warp's slot (stage_offset < ssb), 16-byte aligned.
                    let v = unsafe { lds_v4(st + ((jj * 2 + h as u32) * 32 + lane) * 16) }.0;
                    let j = 4 * jj as usize;
                    wh[j..j + 4].copy_from_slice(&v);
                }
            }
            if B % 2 == 1 {
                // The last chunk's high word is not copied at odd widths.
                for wh in wv.iter_mut() {
                    wh[2 * B as usize] = 0;
                    wh[2 * B as usize + 1] = 0;
                }
            }
            let mut bf = [U32x4([0; 4]); 4];
            if lane < 4 * planes {
                for (q, f) in bf.iter_mut().enumerate() {
                    let off = (seg * sfw + q as u32 * 16 * planes + lane * 4) * 4;
                    // SAFETY: inside the fragments: seg < segs, lane < 4 planes, aligned.
                    *f = unsafe { lds_v4(xs + off) };
                }
            }
            // Called with constant steps so every index and shift is an immediate.
            let mut step = |s: u32| {
                let (a0, a2) = unpack::<B>(&wv[0], s);
                let (a1, a3) = unpack::<B>(&wv[1], s);
                let f = bf[(s / 2) as usize].0;
                let h = 2 * (s % 2) as usize;
                // SAFETY: the whole warp runs this (the unit loop is warp-uniform).
                unsafe {
                    if s % 2 == 0 {
                        c0 = mma_m16n8k32_u8([a0, a1, a2, a3], [f[h], f[h + 1]], c0);
                    } else {
                        c1 = mma_m16n8k32_u8([a0, a1, a2, a3], [f[h], f[h + 1]], c1);
                    }
                }
            };
            step(0);
            step(1);
            step(2);
            step(3);
            step(4);
            step(5);
            step(6);
            step(7);
        }
        slot = if slot + 1 == ns { 0 } else { slot + 1 };
        left -= 1;
        ru += 1;
        if ru == rus || left == 0 {
            // This warp's part of the tile is done: rows g (lane 4g) and g + 8 (lane 4g + 1).
            let c = [
                c0[0].wrapping_add(c1[0]),
                c0[1].wrapping_add(c1[1]),
                c0[2].wrapping_add(c1[2]),
                c0[3].wrapping_add(c1[3]),
            ];
            let (mut lo, mut hi) = plane_shares(c, t);
            // SAFETY: the whole warp runs this.
            unsafe {
                lo = lo.wrapping_add(shfl_xor(lo, 1));
                lo = lo.wrapping_add(shfl_xor(lo, 2));
                hi = hi.wrapping_add(shfl_xor(hi, 1));
                hi = hi.wrapping_add(shfl_xor(hi, 2));
            }
            let mine = if t == 0 { lo } else { hi };
            let row = tile * MMA_ROWS + g + 8 * (t & 1);
            let writes = t < 2 && row < rows;
            let put = |v: u32| {
                let v = finish(u64::from(v), out.bits, p.overflow);
                // SAFETY: row < rows, column 0 < 1; each output written once (by the one warp
                // that covers or completes the tile).
                unsafe { store(&out, row, 0, v) };
            };
            if first == 0 && ru == rus {
                if writes {
                    put(mine);
                }
            } else {
                let done = ru - first;
                // SAFETY: row < rows: a sum slot; tile < tiles: a counter; the workspace is
                // accessed only atomically (and by the one completing warp after the count).
                // The whole warp runs this.
                unsafe {
                    if writes {
                        red_add_u32_global(sums.add(row as usize), mine);
                    }
                    fence_gpu();
                    sync_warp();
                    let mut last = 0;
                    if lane == 0 {
                        let old = atomic_add_u32(counts.add(tile as usize), done);
                        last = u32::from(old + done == rus);
                    }
                    if shfl_idx(last, 0) != 0 {
                        fence_gpu();
                        if writes {
                            put(ld_relaxed_u32(sums.add(row as usize)));
                            // The tile's last user: leave the sum zero for the next launch
                            // (the fused preparation has no prep kernel to zero it).
                            *sums.add(row as usize) = 0;
                        }
                        if lane == 0 {
                            *counts.add(tile as usize) = 0;
                        }
                    }
                }
            }
            c0 = [0; 4];
            c1 = [0; 4];
            if ru == rus {
                ru = 0;
                tile += 1;
            }
            first = ru;
        }
    }
    // SAFETY: no operands; the remaining groups are empty.
    unsafe { cp_async_wait::<0>() };
}

/// `u64` sum over the warp (wrapping or saturating); every lane gets it.
///
/// # Safety
/// All 32 lanes call it together.
#[inline(always)]
unsafe fn warp_sum_u64(mut v: u64, saturate: bool) -> u64 {
    let mut m = 16;
    while m > 0 {
        // SAFETY: forwarded from the caller.
        let o = unsafe {
            let lo = shfl_xor(v as u32, m);
            let hi = shfl_xor((v >> 32) as u32, m);
            (u64::from(hi) << 32) | u64::from(lo)
        };
        v = if saturate {
            v.saturating_add(o)
        } else {
            v.wrapping_add(o)
        };
        m >>= 1;
    }
    v
}

/// `cmv_beam_gemv_any`: see the parent module.
///
/// # Safety
/// The launcher checked: `A` is `m x k`, `B` is `k x n` (`n x k` with `FLAG_B_TRANSPOSED`),
/// `n <= 16`, `C` is `m x n` (`n x m` with `FLAG_OUT_TRANSPOSED`), zeroed unless `naive`; whole
/// warps.
#[inline(always)]
unsafe fn gemv_any(p: &GemvParams) {
    let (a, bm, out) = (p.a, p.b, p.c);
    let tb = p.flags & FLAG_B_TRANSPOSED != 0;
    let to = p.flags & FLAG_OUT_TRANSPOSED != 0;
    let n = if tb { bm.rows } else { bm.cols };
    let sat = p.acc == ACC_SAT_U64;
    let lane = lane_id();
    let warps = block_dim_x() / 32;
    let mut row = block_idx_x() * warps + warp_id();
    while row < a.rows {
        let mut acc = [0u64; 16];
        let mut c = lane;
        while c < a.cols {
            // SAFETY: row < rows, c < cols.
            let av = unsafe { load(&a, row, c) };
            for (j, s) in acc.iter_mut().enumerate() {
                let j = j as u32;
                if j < n {
                    // SAFETY: c < k and j < n: an element of B as given.
                    let xv = unsafe { if tb { load(&bm, j, c) } else { load(&bm, c, j) } };
                    *s = mac_u64(*s, av, xv, sat);
                }
            }
            c += 32;
        }
        for s in acc.iter_mut() {
            // SAFETY: the whole warp runs this (row is warp-uniform).
            *s = unsafe { warp_sum_u64(*s, sat) };
        }
        if lane == 0 {
            for (j, &s) in acc.iter().enumerate() {
                let j = j as u32;
                if j < n {
                    let v = finish(s, out.bits, p.overflow);
                    // SAFETY: an element of C as given; each written once.
                    unsafe {
                        if to {
                            store(&out, j, row, v);
                        } else {
                            store(&out, row, j, v);
                        }
                    }
                }
            }
        }
        row += grid_dim_x() * warps;
    }
}

/// GEMV for every layout, width, batch and accumulator; see the parent module.
///
/// # Safety
/// Launched by `beam-pack`'s `BeamGemv`, which validates shapes and the output.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn cmv_beam_gemv_any(p: GemvParams) {
    // SAFETY: forwarded from the launcher's checks.
    unsafe { gemv_any(&p) }
}

/// Writes the fast kernels' workspace; see the parent module and [`crate::gemv_mma`].
///
/// # Safety
/// Launched by `beam-pack`'s `BeamGemv`, which validates the shapes and the workspace.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn cmv_beam_gemv_prep(p: GemvParams) {
    // SAFETY: forwarded from the launcher's checks.
    unsafe { gemv_prep(&p) }
}

/// One `ptx-kernel` entry per width: `$name` runs `$body::<$b>`, launched by `beam-pack`'s
/// `BeamGemv`, which validates shapes, widths, the accumulator, the workspace, the grid and the
/// shared memory before it.
macro_rules! width_entries {
    ($body:ident, $doc:literal; $($name:ident = $b:literal;)*) => {$(
        #[doc = $doc]
        ///
        /// # Safety
        /// Launched by `beam-pack`'s `BeamGemv`, which validates shapes, widths, the
        /// accumulator, the workspace, the grid and the shared memory.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: GemvParams) {
            // SAFETY: forwarded from the launcher's checks.
            unsafe { $body::<$b>(&p) }
        }
    )*};
}

width_entries! {
    gemv_stream,
    "GEMV of `nogaps` weights of this width by one vector on integer tensor cores, streaming the weights through shared memory, exact modulo 2^32; see [`crate::gemv_stream`].";
    cmv_beam_gemv_stream_b1 = 1;
    cmv_beam_gemv_stream_b2 = 2;
    cmv_beam_gemv_stream_b3 = 3;
    cmv_beam_gemv_stream_b4 = 4;
    cmv_beam_gemv_stream_b5 = 5;
    cmv_beam_gemv_stream_b6 = 6;
    cmv_beam_gemv_stream_b7 = 7;
    cmv_beam_gemv_stream_b8 = 8;
}

cmv_device::launch_bounds! {
    CMV_MAXNTID_cmv_beam_gemv_stream_b1 = crate::gemv_stream::stream_max_warps(1) * 32;
    CMV_MAXNTID_cmv_beam_gemv_stream_b2 = crate::gemv_stream::stream_max_warps(2) * 32;
    CMV_MAXNTID_cmv_beam_gemv_stream_b3 = crate::gemv_stream::stream_max_warps(3) * 32;
    CMV_MAXNTID_cmv_beam_gemv_stream_b4 = crate::gemv_stream::stream_max_warps(4) * 32;
    CMV_MAXNTID_cmv_beam_gemv_stream_b5 = crate::gemv_stream::stream_max_warps(5) * 32;
    CMV_MAXNTID_cmv_beam_gemv_stream_b6 = crate::gemv_stream::stream_max_warps(6) * 32;
    CMV_MAXNTID_cmv_beam_gemv_stream_b7 = crate::gemv_stream::stream_max_warps(7) * 32;
    CMV_MAXNTID_cmv_beam_gemv_stream_b8 = crate::gemv_stream::stream_max_warps(8) * 32;
}

width_entries! {
    gemv_mma,
    "GEMV of `nogaps` weights of this width by one vector on integer tensor cores, exact modulo 2^32; see [`crate::gemv_mma`].";
    cmv_beam_gemv_mma_b1 = 1;
    cmv_beam_gemv_mma_b2 = 2;
    cmv_beam_gemv_mma_b3 = 3;
    cmv_beam_gemv_mma_b4 = 4;
    cmv_beam_gemv_mma_b5 = 5;
    cmv_beam_gemv_mma_b6 = 6;
    cmv_beam_gemv_mma_b7 = 7;
    cmv_beam_gemv_mma_b8 = 8;
}

width_entries! {
    gemv_ring,
    "GEMV of `nogaps` weights of this width by one vector on CUDA cores, the weights copied through a ring of shared-memory stages, exact modulo 2^32; see [`crate::gemv_ring`].";
    cmv_beam_gemv_ring_b1 = 1;
    cmv_beam_gemv_ring_b2 = 2;
    cmv_beam_gemv_ring_b3 = 3;
    cmv_beam_gemv_ring_b4 = 4;
    cmv_beam_gemv_ring_b5 = 5;
    cmv_beam_gemv_ring_b6 = 6;
    cmv_beam_gemv_ring_b7 = 7;
    cmv_beam_gemv_ring_b8 = 8;
    cmv_beam_gemv_ring_b9 = 9;
    cmv_beam_gemv_ring_b10 = 10;
    cmv_beam_gemv_ring_b11 = 11;
    cmv_beam_gemv_ring_b12 = 12;
    cmv_beam_gemv_ring_b13 = 13;
    cmv_beam_gemv_ring_b14 = 14;
    cmv_beam_gemv_ring_b15 = 15;
    cmv_beam_gemv_ring_b16 = 16;
    cmv_beam_gemv_ring_b17 = 17;
    cmv_beam_gemv_ring_b18 = 18;
    cmv_beam_gemv_ring_b19 = 19;
    cmv_beam_gemv_ring_b20 = 20;
    cmv_beam_gemv_ring_b21 = 21;
    cmv_beam_gemv_ring_b22 = 22;
    cmv_beam_gemv_ring_b23 = 23;
    cmv_beam_gemv_ring_b24 = 24;
    cmv_beam_gemv_ring_b25 = 25;
    cmv_beam_gemv_ring_b26 = 26;
    cmv_beam_gemv_ring_b27 = 27;
    cmv_beam_gemv_ring_b28 = 28;
    cmv_beam_gemv_ring_b29 = 29;
    cmv_beam_gemv_ring_b30 = 30;
    cmv_beam_gemv_ring_b31 = 31;
    cmv_beam_gemv_ring_b32 = 32;
}

width_entries! {
    gemv_nogaps,
    "GEMV of `nogaps` weights of this width by one vector on CUDA cores, exact modulo 2^32; see the parent module.";
    cmv_beam_gemv_nogaps_b1 = 1;
    cmv_beam_gemv_nogaps_b2 = 2;
    cmv_beam_gemv_nogaps_b3 = 3;
    cmv_beam_gemv_nogaps_b4 = 4;
    cmv_beam_gemv_nogaps_b5 = 5;
    cmv_beam_gemv_nogaps_b6 = 6;
    cmv_beam_gemv_nogaps_b7 = 7;
    cmv_beam_gemv_nogaps_b8 = 8;
    cmv_beam_gemv_nogaps_b9 = 9;
    cmv_beam_gemv_nogaps_b10 = 10;
    cmv_beam_gemv_nogaps_b11 = 11;
    cmv_beam_gemv_nogaps_b12 = 12;
    cmv_beam_gemv_nogaps_b13 = 13;
    cmv_beam_gemv_nogaps_b14 = 14;
    cmv_beam_gemv_nogaps_b15 = 15;
    cmv_beam_gemv_nogaps_b16 = 16;
    cmv_beam_gemv_nogaps_b17 = 17;
    cmv_beam_gemv_nogaps_b18 = 18;
    cmv_beam_gemv_nogaps_b19 = 19;
    cmv_beam_gemv_nogaps_b20 = 20;
    cmv_beam_gemv_nogaps_b21 = 21;
    cmv_beam_gemv_nogaps_b22 = 22;
    cmv_beam_gemv_nogaps_b23 = 23;
    cmv_beam_gemv_nogaps_b24 = 24;
    cmv_beam_gemv_nogaps_b25 = 25;
    cmv_beam_gemv_nogaps_b26 = 26;
    cmv_beam_gemv_nogaps_b27 = 27;
    cmv_beam_gemv_nogaps_b28 = 28;
    cmv_beam_gemv_nogaps_b29 = 29;
    cmv_beam_gemv_nogaps_b30 = 30;
    cmv_beam_gemv_nogaps_b31 = 31;
    cmv_beam_gemv_nogaps_b32 = 32;
}
