//! GEMV entry points (NVPTX only). The arithmetic is in the parent module.

use cmv_device::{
    block_dim_x, block_idx_x, dyn_smem, grid_dim_x, lane_id, ld_stream_u64, shfl_down, shfl_xor,
    sync_threads, thread_idx_x, warp_id, warp_sum_i32,
};

use super::{
    ACC_SAT_U64, FLAG_B_TRANSPOSED, FLAG_OUT_TRANSPOSED, GemvParams, ROWS_PER_WARP, UNROLL,
    WARPS_PER_BLOCK, chunk_dot, chunk_x, chunks_per_word, mac_u64, slice_words, window, word_elems,
    x_slots,
};
use crate::access::{load, store};
use crate::layout::finish;

const R: usize = ROWS_PER_WARP as usize;
const U: usize = UNROLL as usize;

/// `cmv_beam_gemv_nogaps_b{B}`: see the parent module.
///
/// # Safety
/// The launcher checked: `A` is `nogaps` with `B`-bit elements, `B` has one column and
/// `A.cols` rows, `C` is `A.rows x 1`, zeroed unless `naive`; the accumulator is `U32`;
/// [`WARPS_PER_BLOCK`] warps per block, `slices` a power of two dividing it; the dynamic shared
/// memory holds `nogaps_smem_bytes(A.cols)` bytes.
#[inline(always)]
unsafe fn gemv_nogaps<const B: u32>(p: &GemvParams) {
    let (a, bm, out) = (p.a, p.b, p.c);
    let (rows, cols, rw) = (a.rows, a.cols, a.row_words);
    let xs = dyn_smem() as *mut u32;
    let slots = x_slots(cols);
    // SAFETY: the shared memory holds `slots` u32 for x, then WARPS_PER_BLOCK * 32 for the sums.
    let red = unsafe { xs.add(slots as usize) };
    let mut c = thread_idx_x();
    while c < slots {
        // SAFETY: c < cols is an element of B (k x 1); c < slots is inside shared memory.
        unsafe {
            let v = if c < cols { load(&bm, c, 0) as u32 } else { 0 };
            *xs.add(c as usize) = v;
        }
        c += block_dim_x();
    }
    // SAFETY: every thread reaches it (no return above).
    unsafe { sync_threads() };

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
                    if g < end {
                        for (r, wr) in wu.iter_mut().enumerate() {
                            // SAFETY: g < row_words: inside row r.
                            *wr = unsafe { ld_stream_u64(rowp[r].add(g as usize)) };
                        }
                    }
                }
                for (u, wu) in wv.iter().enumerate() {
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
                        // SAFETY: c0 + j < cols + X_PAD <= slots for a word inside the row.
                        let xv = chunk_x::<B>(we, g < end, k, |c| unsafe { *xs.add(c as usize) });
                        for (r, &(lo, hi)) in win.iter().enumerate() {
                            acc[r] = chunk_dot::<B>(acc[r], lo, hi, k, &xv);
                        }
                    }
                }
                g0 += 32 * UNROLL;
            }
            for a in acc.iter_mut() {
                // SAFETY: the whole warp runs this (row0 < rows is warp-uniform).
                *a = unsafe { warp_sum_i32(*a as i32) } as u32;
            }
        }
        if slices > 1 {
            // No lane-dependent branch between the barriers (`bar.sync` is `.aligned`: a
            // compiler that duplicated one into two sides of a divergent branch would hang the
            // block). Every lane holds the warp's sums; lane l writes its own slot, sum l % R.
            let mine = acc.iter().enumerate().fold(
                0,
                |m, (r, &a)| {
                    if lane as usize % R == r { a } else { m }
                },
            );
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
            for (r, &s) in acc.iter().enumerate() {
                let row = row0 + r as u32;
                if row < rows {
                    let v = finish(u64::from(s), out.bits, p.overflow);
                    // SAFETY: row < rows, column 0 < 1; each output written once.
                    unsafe { store(&out, row, 0, v) };
                }
            }
        }
        tile += grid_dim_x();
    }
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

macro_rules! nogaps_entries {
    ($($name:ident = $b:literal;)*) => {$(
        /// GEMV of `nogaps` weights of this width by one vector, exact modulo 2^32; see the
        /// parent module.
        ///
        /// # Safety
        /// Launched by `beam-pack`'s `BeamGemv`, which validates shapes, widths, the
        /// accumulator, the grid and the shared memory.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: GemvParams) {
            // SAFETY: forwarded from the launcher's checks.
            unsafe { gemv_nogaps::<$b>(&p) }
        }
    )*};
}

nogaps_entries! {
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
