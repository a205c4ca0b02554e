//! The direct GEMV's entry points and body (NVPTX only), outside the `entries` feature so that
//! `beam-kernels-sm90` defines them too: there with programmatic dependent launch (the
//! single-vector kernels; [`direct_entry_points!`](crate::direct_entry_points) with `true`).
//! The arithmetic and the work split are in [`crate::gemv_direct`].
//!
//! With `PDL`, a block lets the next grid on the stream launch at once
//! (`griddepcontrol.launch_dependents`), issues its first weight loads, and waits for the grid
//! before it (`griddepcontrol.wait`) before it reads the vector, which it then reads with
//! coherent loads, and before it writes anything: the weights are the only data read before
//! the wait, and nothing a product writes is read or written by this one before it.

use cmv_device::{
    U32x4, block_dim_x, block_idx_x, dyn_smem, griddepcontrol_launch_dependents,
    griddepcontrol_wait, lane_id, ld_nc_na_v4, ld_nc_u64, ld_nc_v4, ld_u64, ld_v4, sync_threads,
    warp_id, warp_sum_i32,
};

use crate::access::store;
use crate::gemv::GemvParams;
use crate::gemv_direct::{
    Halves, chunk_halves, chunk_words, direct_chunks, direct_dot, direct_finish, direct_rows,
    direct_unroll, direct_x, slice_chunks,
};
use crate::layout::finish;

/// `cmv_beam_gemv_direct_b{B}[_n{NB}]`: see [`crate::gemv_direct`].
///
/// # Safety
/// Launched with programmatic stream serialization only when `PDL` (sm_90a). The launcher
/// checked: `A` is `nogaps` with `B`-bit elements (a direct width), `p.b` is an
/// `n x A.cols` `nogaps` matrix of `B`-bit elements (so `A.row_words` words per row), `n` in
/// `1..=NB`, `C` is `A.rows x n`, zeroed unless `naive`; the accumulator is `U32`;
/// whole warps per block, at most `DIRECT_THREADS` threads and a multiple of `slices` warps
/// (`slices` in {1, 2, 4, 8}), a grid of `direct_grid_of`'s blocks for `NB` and that block,
/// and `direct_smem_bytes(slices, B, NB)` bytes of dynamic shared memory.
#[inline(always)]
pub unsafe fn gemv_direct<const B: u32, const NB: usize, const PDL: bool>(p: &GemvParams) {
    const { assert!(NB == 1 || NB == 2 || NB == 4 || NB == 8 || NB == 16) };
    let aligned = chunk_words(B) == 2 && p.a.row_words % 2 == 0;
    // SAFETY (every branch): forwarded; with `aligned` every row starts 16-byte aligned (even
    // words per row). The shape constants are `direct_rows(B, NB)` and `direct_unroll(B)`.
    unsafe {
        match (direct_rows(B, NB as u32), direct_unroll(B), aligned) {
            (4, 1, true) => direct_body::<B, true, 4, 1, NB, PDL>(p),
            (4, 1, false) => direct_body::<B, false, 4, 1, NB, PDL>(p),
            (4, _, true) => direct_body::<B, true, 4, 2, NB, PDL>(p),
            (4, _, false) => direct_body::<B, false, 4, 2, NB, PDL>(p),
            (_, 1, true) => direct_body::<B, true, 2, 1, NB, PDL>(p),
            (_, 1, false) => direct_body::<B, false, 2, 1, NB, PDL>(p),
            (_, _, true) => direct_body::<B, true, 2, 2, NB, PDL>(p),
            (_, _, false) => direct_body::<B, false, 2, 2, NB, PDL>(p),
        }
    }
}

/// Chunk `ci` of the row at `row` (`rw` words): one 16-byte load when `V4` (the row 16-byte
/// aligned, two words per chunk, the chunk inside the row), else word by word with the words
/// past the row as zero. `STREAM` loads skip L1 (the weights); the others stay in it (the
/// vectors), as coherent loads when `COHERENT` (a vector an earlier grid may write while this
/// one starts: read after `griddepcontrol.wait`), else non-coherent ones.
///
/// # Safety
/// `row` points at a row of `rw` readable words, `ci < direct_chunks(rw, B)`; with `V4`,
/// `row` is 16-byte aligned and `rw` even. Without `COHERENT`, nothing writes the row while
/// the kernel runs.
#[inline(always)]
unsafe fn load_chunk<const B: u32, const V4: bool, const STREAM: bool, const COHERENT: bool>(
    row: *const u64,
    ci: u32,
    rw: u32,
) -> Halves {
    if V4 {
        let p = row.cast::<U32x4>();
        // SAFETY: chunk ci (2 words) lies inside the row, 16-byte aligned.
        let v = unsafe {
            if STREAM {
                ld_nc_na_v4(p.add(ci as usize))
            } else if COHERENT {
                ld_v4(p.add(ci as usize))
            } else {
                ld_nc_v4(p.add(ci as usize))
            }
        };
        [v.0[0], v.0[1], v.0[2], v.0[3], 0, 0]
    } else if COHERENT {
        // SAFETY: chunk_halves loads only words g < rw, inside the row.
        chunk_halves(B, ci, rw, |g| unsafe { ld_u64(row.add(g as usize)) })
    } else {
        // SAFETY: chunk_halves loads only words g < rw, inside the row.
        chunk_halves(B, ci, rw, |g| unsafe { ld_nc_u64(row.add(g as usize)) })
    }
}

/// Calls `f(0)`, ..., `f(N - 1)` (`N <= 16`) with constant arguments: written out, because
/// LLVM left longer loops over the vectors rolled, which put the per-vector sums in local
/// memory.
#[inline(always)]
fn unrolled<const N: usize>(mut f: impl FnMut(usize)) {
    const { assert!(N <= 16) };
    macro_rules! call {
        ($($k:literal)*) => {$(
            if N > $k {
                f($k);
            }
        )*};
    }
    call!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
}

/// The direct kernel's body: `RD` rows per warp, `UD` chunks of each in flight, up to `NB`
/// vectors (the rows of `p.b`).
///
/// # Safety
/// As [`gemv_direct`], with `RD == direct_rows(B, NB)`, and 16-byte aligned rows when `V4`.
#[inline(always)]
unsafe fn direct_body<
    const B: u32,
    const V4: bool,
    const RD: usize,
    const UD: usize,
    const NB: usize,
    const PDL: bool,
>(
    p: &GemvParams,
) {
    if PDL {
        // SAFETY: sm_90a code (the PDL kernels are in `beam-kernels-sm90` only).
        unsafe { griddepcontrol_launch_dependents() };
    }
    let (a, xm) = (p.a, p.b);
    let (rows, rw) = (a.rows, a.row_words);
    let nv = xm.rows;
    let slices = p.slices;
    let (w, lane) = (warp_id(), lane_id());
    let slice = w % slices;
    // Blocks of DIRECT_WARPS warps or fewer (`direct_block_warps`).
    let groups = block_dim_x() / 32 / slices;
    let row0 = (block_idx_x() * groups + w / slices) * RD as u32;
    let (begin, end) = slice_chunks(direct_chunks(rw, B), slices, slice);
    let mut sums = [[0u32; NB]; RD];
    // Warp-uniform: the shuffles of the sums run with the whole warp.
    if row0 < rows {
        let base = a.words.as_ptr();
        let rowp: [*const u64; RD] = core::array::from_fn(|r| {
            let row = (row0 + r as u32).min(rows - 1);
            // SAFETY: row < rows: the row's words lie in A.
            unsafe { base.add(row as usize * rw as usize) }
        });
        let xp = xm.words.as_ptr();
        let mut acc = [[[0u32; 2]; NB]; RD];
        let mut c = begin + lane;
        while c < end {
            let mut wv = [[[0u32; 6]; UD]; RD];
            for u in 0..UD {
                let ci = c + 32 * u as u32;
                if ci < end {
                    for r in 0..RD {
                        // SAFETY: ci < chunks of a row of A.
                        wv[r][u] = unsafe { load_chunk::<B, V4, true, false>(rowp[r], ci, rw) };
                    }
                }
            }
            if PDL {
                // This pass's weights are in flight; the vector may be the previous grid's
                // output. (At every pass, not only the first: a flag cost registers and spills
                // at 16 and 24 bits; once the grid before has completed it returns at once.)
                // SAFETY: sm_90a code.
                unsafe { griddepcontrol_wait() };
            }
            // Called once per `u`, written out: a loop here was not unrolled at 6 bits, which
            // left the chunks in local memory.
            let mut step = |u: usize| {
                let ci = c + 32 * u as u32;
                if ci < end {
                    unrolled::<NB>(|j| {
                        // Warp-uniform: vectors past `nv` are not read (one vector: always
                        // there).
                        if NB == 1 || (j as u32) < nv {
                            // SAFETY: vector j < nv is a row of rw words of B (the launcher
                            // checked B's shape).
                            let xv = unsafe {
                                load_chunk::<B, V4, false, PDL>(xp.add(j * rw as usize), ci, rw)
                            };
                            let xe = direct_x::<B>(&xv);
                            for r in 0..RD {
                                acc[r][j] = direct_dot::<B>(acc[r][j], &wv[r][u], &xe);
                            }
                        }
                    });
                }
            };
            const { assert!(UD >= 1 && UD <= 4) };
            step(0);
            if UD > 1 {
                step(1);
            }
            if UD > 2 {
                step(2);
            }
            if UD > 3 {
                step(3);
            }
            c += 32 * UD as u32;
        }
        for r in 0..RD {
            unrolled::<NB>(|j| {
                if NB == 1 || (j as u32) < nv {
                    // SAFETY: the whole warp runs this (row0 < rows and j < nv are
                    // warp-uniform).
                    sums[r][j] =
                        unsafe { warp_sum_i32(direct_finish::<B>(acc[r][j]) as i32) } as u32;
                }
            });
        }
    }
    if PDL {
        // Every thread, before any write (also those with no chunk or no row: a no-op for
        // those that waited above). SAFETY: sm_90a code.
        unsafe { griddepcontrol_wait() };
    }
    if slices > 1 {
        let red = dyn_smem() as *mut u32;
        let per = RD * NB;
        // Slot `w * per + r * NB + j` holds warp w's sum of row r and vector j; lane l writes
        // slots l, l + 32, ... of its warp.
        for k in 0..per.div_ceil(32) {
            let idx = lane as usize + 32 * k;
            if idx < per {
                let mut mine = 0;
                for (r, row) in sums.iter().enumerate() {
                    unrolled::<NB>(|j| {
                        if idx == r * NB + j {
                            mine = row[j];
                        }
                    });
                }
                // SAFETY: w * per + idx < DIRECT_WARPS * RD * NB slots of the shared memory.
                unsafe { *red.add(w as usize * per + idx) = mine };
            }
        }
        // SAFETY: every thread of the block reaches it (one tile per block).
        unsafe { sync_threads() };
        if slice == 0 {
            for s in 1..slices as usize {
                for (r, row) in sums.iter_mut().enumerate() {
                    unrolled::<NB>(|j| {
                        // SAFETY: warp w + s is in this group, inside the block.
                        let o = unsafe { *red.add((w as usize + s) * per + r * NB + j) };
                        row[j] = row[j].wrapping_add(o);
                    });
                }
            }
        }
    }
    if slice == 0 && lane == 0 && row0 < rows {
        let out = p.c;
        for (r, row_sums) in sums.iter().enumerate() {
            let row = row0 + r as u32;
            unrolled::<NB>(|j| {
                if row < rows && (j as u32) < nv {
                    let v = finish(u64::from(row_sums[j]), out.bits, p.overflow);
                    // SAFETY: row < rows, column j < nv = out.cols; each output written once.
                    unsafe { store(&out, row, j as u32, v) };
                }
            });
        }
    }
}

/// Defines one `ptx-kernel` entry per `$name / $bound = bits, slots;` line: `$name` runs
/// [`gemv_direct`]`::<bits, slots, $pdl>`, with `$bound` its launch bound (`.maxntid` of
/// [`DIRECT_THREADS`](crate::gemv_direct::DIRECT_THREADS), `CMV_MAXNTID_$name`). `false` here
/// (the `entries` feature: every width and vector count), `true` in `beam-kernels-sm90` (the
/// single-vector kernels, launched with programmatic dependent launch).
#[macro_export]
macro_rules! direct_entry_points {
    ($pdl:literal; $($name:ident / $bound:ident = $b:literal, $nb:literal;)*) => {$(
        /// GEMV of `nogaps` weights of this width by up to this many vectors packed like rows,
        /// straight from global memory, exact modulo 2^32; see `beam_kernels::gemv_direct`.
        ///
        /// # Safety
        /// Launched by `beam-pack`'s `BeamGemv`, which validates shapes, widths, the
        /// accumulator, the grid and the shared memory.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: $crate::gemv::GemvParams) {
            // SAFETY: forwarded from the launcher's checks.
            unsafe { $crate::direct_kernel::gemv_direct::<$b, $nb, $pdl>(&p) }
        }

        ::cmv_device::launch_bounds! {
            $bound = $crate::gemv_direct::DIRECT_THREADS;
        }
    )*};
}

#[cfg(feature = "entries")]
crate::direct_entry_points! {
    false;
    cmv_beam_gemv_direct_b4 / CMV_MAXNTID_cmv_beam_gemv_direct_b4 = 4, 1;
    cmv_beam_gemv_direct_b6 / CMV_MAXNTID_cmv_beam_gemv_direct_b6 = 6, 1;
    cmv_beam_gemv_direct_b8 / CMV_MAXNTID_cmv_beam_gemv_direct_b8 = 8, 1;
    cmv_beam_gemv_direct_b12 / CMV_MAXNTID_cmv_beam_gemv_direct_b12 = 12, 1;
    cmv_beam_gemv_direct_b16 / CMV_MAXNTID_cmv_beam_gemv_direct_b16 = 16, 1;
    cmv_beam_gemv_direct_b24 / CMV_MAXNTID_cmv_beam_gemv_direct_b24 = 24, 1;
    cmv_beam_gemv_direct_b32 / CMV_MAXNTID_cmv_beam_gemv_direct_b32 = 32, 1;
    cmv_beam_gemv_direct_b4_n2 / CMV_MAXNTID_cmv_beam_gemv_direct_b4_n2 = 4, 2;
    cmv_beam_gemv_direct_b6_n2 / CMV_MAXNTID_cmv_beam_gemv_direct_b6_n2 = 6, 2;
    cmv_beam_gemv_direct_b8_n2 / CMV_MAXNTID_cmv_beam_gemv_direct_b8_n2 = 8, 2;
    cmv_beam_gemv_direct_b12_n2 / CMV_MAXNTID_cmv_beam_gemv_direct_b12_n2 = 12, 2;
    cmv_beam_gemv_direct_b16_n2 / CMV_MAXNTID_cmv_beam_gemv_direct_b16_n2 = 16, 2;
    cmv_beam_gemv_direct_b24_n2 / CMV_MAXNTID_cmv_beam_gemv_direct_b24_n2 = 24, 2;
    cmv_beam_gemv_direct_b32_n2 / CMV_MAXNTID_cmv_beam_gemv_direct_b32_n2 = 32, 2;
    cmv_beam_gemv_direct_b4_n4 / CMV_MAXNTID_cmv_beam_gemv_direct_b4_n4 = 4, 4;
    cmv_beam_gemv_direct_b6_n4 / CMV_MAXNTID_cmv_beam_gemv_direct_b6_n4 = 6, 4;
    cmv_beam_gemv_direct_b8_n4 / CMV_MAXNTID_cmv_beam_gemv_direct_b8_n4 = 8, 4;
    cmv_beam_gemv_direct_b12_n4 / CMV_MAXNTID_cmv_beam_gemv_direct_b12_n4 = 12, 4;
    cmv_beam_gemv_direct_b16_n4 / CMV_MAXNTID_cmv_beam_gemv_direct_b16_n4 = 16, 4;
    cmv_beam_gemv_direct_b24_n4 / CMV_MAXNTID_cmv_beam_gemv_direct_b24_n4 = 24, 4;
    cmv_beam_gemv_direct_b32_n4 / CMV_MAXNTID_cmv_beam_gemv_direct_b32_n4 = 32, 4;
    cmv_beam_gemv_direct_b4_n8 / CMV_MAXNTID_cmv_beam_gemv_direct_b4_n8 = 4, 8;
    cmv_beam_gemv_direct_b6_n8 / CMV_MAXNTID_cmv_beam_gemv_direct_b6_n8 = 6, 8;
    cmv_beam_gemv_direct_b8_n8 / CMV_MAXNTID_cmv_beam_gemv_direct_b8_n8 = 8, 8;
    cmv_beam_gemv_direct_b12_n8 / CMV_MAXNTID_cmv_beam_gemv_direct_b12_n8 = 12, 8;
    cmv_beam_gemv_direct_b16_n8 / CMV_MAXNTID_cmv_beam_gemv_direct_b16_n8 = 16, 8;
    cmv_beam_gemv_direct_b24_n8 / CMV_MAXNTID_cmv_beam_gemv_direct_b24_n8 = 24, 8;
    cmv_beam_gemv_direct_b32_n8 / CMV_MAXNTID_cmv_beam_gemv_direct_b32_n8 = 32, 8;
    cmv_beam_gemv_direct_b4_n16 / CMV_MAXNTID_cmv_beam_gemv_direct_b4_n16 = 4, 16;
    cmv_beam_gemv_direct_b6_n16 / CMV_MAXNTID_cmv_beam_gemv_direct_b6_n16 = 6, 16;
    cmv_beam_gemv_direct_b8_n16 / CMV_MAXNTID_cmv_beam_gemv_direct_b8_n16 = 8, 16;
    cmv_beam_gemv_direct_b12_n16 / CMV_MAXNTID_cmv_beam_gemv_direct_b12_n16 = 12, 16;
    cmv_beam_gemv_direct_b16_n16 / CMV_MAXNTID_cmv_beam_gemv_direct_b16_n16 = 16, 16;
    cmv_beam_gemv_direct_b24_n16 / CMV_MAXNTID_cmv_beam_gemv_direct_b24_n16 = 24, 16;
    cmv_beam_gemv_direct_b32_n16 / CMV_MAXNTID_cmv_beam_gemv_direct_b32_n16 = 32, 16;
}
