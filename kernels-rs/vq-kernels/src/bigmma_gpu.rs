//! The big-codebook tensor-core GEMV (`crate::bigmma`), NVPTX only; its entry points by
//! [`crate::big_mma_entry_points!`] in this crate's module (`false`) and in `vq-kernels-sm90`'s
//! (`true`: programmatic dependent launch).
// Public only for `big_mma_entry_points!` (hidden): no host code sees these types.

use cmv_device::{
    U32x4, add_f16x2, block_idx_x, cp_async_16, cp_async_commit, cp_async_wait, dyn_smem_addr,
    grid_dim_x, griddepcontrol_launch_dependents, griddepcontrol_wait, ld_nc_na_u32, lds_v2,
    lds_v4, mma_m16n8k16_f16_f32, red_add_f32_global, sts_v2, sync_threads, thread_idx_x,
};

use crate::big::{BIG_ROW_WORDS, slab_code};
use crate::bigmma::{
    BM_ENTRY_BYTES, BM_SLAB_COLS, BM_THREADS, BM_X_GROUP_BYTES, VqBigMmaParams, bm_b_regs,
    bm_block_rows, bm_codebook_bytes, bm_frag_col, bm_x_stage_bytes,
};
use crate::dev::{convert_rows, count_in, load_x4};

/// A thread's loads for one unit: its codes (per row group and half, the row's 3 words of the
/// lane's table-kernel slab) and its part of the unit's input fragments (8 bytes per group of
/// 16 inputs).
#[derive(Clone, Copy)]
struct Loaded<const R: usize, const MG: usize> {
    rb: u32,
    codes: [[[u32; BIG_ROW_WORDS]; 2]; R],
    x: [[u32; 2]; MG],
}

/// Sums of one lane: per input group, row group, half and sum (`S` = 2: one per stage; 1:
/// both stages in one).
type Acc<const R: usize, const MG: usize, const S: usize> = [[[[[f32; 4]; S]; 2]; R]; MG];

/// Loads thread `tid`'s part of unit `u`: its codes, and for each input group `m` the 8 bytes
/// of fragment `tid % 256` (step `(tid % 256) / 32`, lane `tid % 32`) of vector `16 m + g`
/// (threads below 256) or `16 m + g + 8` (the others; only when `B16`).
///
/// # Safety
/// The launcher's contract; `u < units`.
#[inline(always)]
unsafe fn load_unit<const B16: bool, const R: usize, const MG: usize>(
    p: &VqBigMmaParams,
    u: u32,
    tid: u32,
) -> Loaded<R, MG> {
    let (rb, slab) = p.unit(u);
    let (warp, lane) = (tid / 32, tid % 32);
    let (g, t) = (lane / 4, lane % 4);
    let mut codes = [[[0u32; BIG_ROW_WORDS]; 2]; R];
    for (r, cr) in codes.iter_mut().enumerate() {
        for (h, ch) in cr.iter_mut().enumerate() {
            let row = VqBigMmaParams::row(R, rb, warp, r as u32, h as u32, g);
            for (k, w) in ch.iter_mut().enumerate() {
                if let Some(at) = p.code_word(row, slab, t, k) {
                    // SAFETY: `code_word` is inside the planes (row < rows, the table
                    // kernel's slab < big_slabs).
                    *w = unsafe { ld_nc_na_u32(p.codes.as_ptr().add(at)) };
                }
            }
        }
    }
    let f = tid % 256;
    let (fs, fl) = ((f / 32) as usize, f % 32);
    let col = slab as usize * BM_SLAB_COLS + bm_frag_col(fs, (fl % 4) as usize);
    let mut x = [[0u32; 2]; MG];
    for (m, xm) in x.iter_mut().enumerate() {
        let n = 16 * m as u32 + fl / 4 + 8 * (tid / 256);
        if B16 || tid < 256 {
            // SAFETY: the launcher's contract.
            *xm = unsafe { load_x4(p.x, p.cols, p.batch, n, col) };
        }
    }
    Loaded { rb, codes, x }
}

/// Ends a segment (the units of one row block this block ran): adds the sums into the
/// workspace, counts `seg` slabs into the row block's counter, and when that completes the
/// row block converts it to fp16, zeroing its sums and counter (as `crate::mma`'s kernel).
///
/// # Safety
/// The launcher's contract; every thread of the block calls it (barriers); `flag` is 4 bytes
/// of shared memory no one else uses.
#[inline(always)]
unsafe fn flush<const R: usize, const MG: usize, const S: usize>(
    p: &VqBigMmaParams,
    rb: u32,
    seg: u32,
    acc: &Acc<R, MG, S>,
    flag: u32,
    tid: u32,
) {
    let (lane, warp) = (tid % 32, tid / 32);
    let (g, t) = (lane / 4, lane % 4);
    let rows = p.rows as usize;
    let block_rows = bm_block_rows(R);
    for (m, am) in acc.iter().enumerate() {
        for (r, ar) in am.iter().enumerate() {
            for (h, ah) in ar.iter().enumerate() {
                for q in 0..4 {
                    // c[q]: vector g (+ 8 for q >= 2) of group m, row 2t + q % 2 of the half.
                    let n = 16 * m as u32 + g + 8 * (q as u32 / 2);
                    let row =
                        VqBigMmaParams::row(R, rb, warp, r as u32, h as u32, 2 * t + q as u32 % 2);
                    if n < p.batch && row < p.rows {
                        let mut v = ah[0][q];
                        if S > 1 {
                            v += ah[S - 1][q];
                        }
                        // SAFETY: n < batch, row < rows: inside acc.
                        unsafe {
                            red_add_f32_global(
                                p.acc.as_mut_ptr().add(n as usize * rows + row as usize),
                                v,
                            )
                        };
                    }
                }
            }
        }
    }
    // SAFETY: every thread of the block calls it; the row block's counter; the flag word is
    // ours.
    if !unsafe {
        count_in(
            p.counters.as_mut_ptr().add(rb as usize),
            seg,
            p.slabs,
            flag,
            tid,
        )
    } {
        return;
    }
    // SAFETY: every slab's sums of the row block have arrived; acc and y hold batch * rows
    // values; no other block touches these rows in this launch.
    unsafe {
        convert_rows(
            p.acc,
            p.y,
            (p.rows, p.batch),
            rb,
            block_rows,
            BM_THREADS,
            tid,
        )
    };
    if tid == 0 {
        // SAFETY: the row block's counter; all its slabs have counted in.
        unsafe { *p.counters.as_mut_ptr().add(rb as usize) = 0 };
    }
}

/// One unit's MMAs: for each K step the lane's A registers of every input group from the
/// staged inputs at `xs`, then for each row group and half the B registers of both stages (a
/// code's entry serves two steps) and one MMA per stage and input group.
///
/// # Safety
/// `cb0` and `cb1` are the two codebooks in shared memory (`entries` entries of 16 bytes
/// each, `cb1 = cb0 + entries * 16`), every code below `entries`; `xs` this unit's input
/// stage (after the barrier); the whole warp runs it.
#[inline(always)]
unsafe fn compute<const B16: bool, const R: usize, const MG: usize, const S: usize>(
    (cb0, cb1): (u32, u32),
    xs: u32,
    codes: &[[[u32; BIG_ROW_WORDS]; 2]; R],
    acc: &mut Acc<R, MG, S>,
    lane: u32,
) {
    let xl = xs + lane * 16;
    let mut e = [[[[0u32; 4]; 2]; 2]; R];
    crate::unroll!(s in [0 1 2 3 4 5 6 7], {
        // SAFETY: fragment (s, lane) of group m of the stage buffer: vector g's 8 bytes, then
        // g + 8's.
        let a: [[u32; 4]; MG] = core::array::from_fn(|m| {
            let at = xl + m as u32 * BM_X_GROUP_BYTES + (s * 512) as u32;
            if B16 {
                let v = unsafe { lds_v4(at).0 };
                [v[0], v[2], v[1], v[3]]
            } else {
                let [x0, x1] = unsafe { lds_v2(at) };
                [x0, 0, x1, 0]
            }
        });
        for r in 0..R {
            for h in 0..2 {
                if s % 2 == 0 {
                    let c = (s / 2) as u32;
                    let w = codes[r][h];
                    // SAFETY (both): codes below entries (the caller's contract): inside the
                    // stage's codebook.
                    e[r][h][0] = unsafe { lds_v4(cb0 + slab_code(w, 2 * c) * BM_ENTRY_BYTES).0 };
                    e[r][h][1] =
                        unsafe { lds_v4(cb1 + slab_code(w, 2 * c + 1) * BM_ENTRY_BYTES).0 };
                }
                if S > 1 {
                    for (m, am) in a.iter().enumerate() {
                        for st in 0..2 {
                            // SAFETY: the whole warp runs this (block-uniform control flow).
                            acc[m][r][h][st] = unsafe {
                                mma_m16n8k16_f16_f32(
                                    *am,
                                    bm_b_regs(e[r][h][st], s),
                                    acc[m][r][h][st],
                                )
                            };
                        }
                    }
                } else {
                    // The stages' entries added in fp16 (two words: this step's B registers).
                    let o = 2 * (s % 2);
                    let b = [
                        add_f16x2(e[r][h][0][o], e[r][h][1][o]),
                        add_f16x2(e[r][h][0][o + 1], e[r][h][1][o + 1]),
                    ];
                    for (m, am) in a.iter().enumerate() {
                        // SAFETY: the whole warp runs this (block-uniform control flow).
                        acc[m][r][h][0] = unsafe { mma_m16n8k16_f16_f32(*am, b, acc[m][r][h][0]) };
                    }
                }
            }
        }
    });
}

/// The big-codebook tensor-core GEMV (see `crate::bigmma`).
///
/// # Safety
/// The launcher checked: `codes` holds the table kernel's 3 planes of `big_slabs * rows_pad`
/// words for this matrix (every code below `entries`), `codebooks` `2 * entries * 8` values
/// (16-byte aligned), `x` `batch * cols` halves (8-byte aligned), `y` and `acc` `batch * rows`
/// values, `counters` `row_blocks`, `acc` and `counters` zero; `1 <= batch <= 16 MG` (`<= 8`
/// unless `B16`); the geometry fields from a `BigMmaGeometry` of the matrix with `R` row
/// groups per warp; `BM_THREADS` threads per block, `bm_smem_bytes(entries, MG)` bytes of
/// dynamic shared memory. `PDL` only in sm_90 code: then each block lets the next launch
/// start at once and waits for the kernel before it (`griddepcontrol.wait`) once its codebook
/// copies are issued, before it reads `x` or touches `y`, `acc` or `counters`, which that
/// kernel (the previous call) may still use.
#[doc(hidden)]
#[inline(always)]
pub unsafe fn big_mma_gemv<
    const B16: bool,
    const R: usize,
    const MG: usize,
    const S: usize,
    const PDL: bool,
>(
    p: &VqBigMmaParams,
) {
    if PDL {
        // SAFETY: sm_90 code (the caller's contract); it only lets the next grid launch.
        unsafe { griddepcontrol_launch_dependents() };
    }
    let tid = thread_idx_x();
    let (start, end) = p.unit_range(block_idx_x(), grid_dim_x());
    if start >= end {
        return;
    }
    let base = dyn_smem_addr();
    let cb_bytes = bm_codebook_bytes(p.entries);
    // The codebooks into shared memory, as stored, while the first unit loads.
    let mut i = tid;
    while i < cb_bytes / 16 {
        // SAFETY: chunk i < 2 entries of 16 bytes: inside the codebooks (16-byte aligned) and
        // inside the shared codebook area; nothing reads it before the wait and barrier.
        unsafe {
            cp_async_16(
                base + 16 * i,
                (p.codebooks.as_ptr() as *const U32x4).add(i as usize),
            )
        };
        i += BM_THREADS;
    }
    // SAFETY: no operands.
    unsafe { cp_async_commit() };
    if PDL {
        // SAFETY: sm_90 code; nothing but the matrix (its codebooks) was read before.
        unsafe { griddepcontrol_wait() };
    }
    let cbs = (base, base + cb_bytes / 2);
    let xs0 = base + cb_bytes;
    let stage_bytes = bm_x_stage_bytes(MG);
    let flag = xs0 + 2 * stage_bytes;
    let lane = tid % 32;
    // SAFETY: a unit of the launch.
    let mut cur = unsafe { load_unit::<B16, R, MG>(p, start, tid) };
    let mut acc: Acc<R, MG, S> = [[[[[0f32; 4]; S]; 2]; R]; MG];
    let mut seg = 0u32;
    // SAFETY: this thread's copies; the first barrier below makes everyone's visible.
    unsafe { cp_async_wait::<0>() };
    let f = tid % 256;
    let mut u = start;
    loop {
        let xs = xs0 + (u & 1) * stage_bytes;
        if B16 || tid < 256 {
            for (m, xm) in cur.x.iter().enumerate() {
                // SAFETY: fragment f of group m of this stage buffer (vector g's 8 bytes, or
                // g + 8's), last read before the previous barrier (the other buffer was used
                // in between).
                unsafe {
                    sts_v2(
                        xs + m as u32 * BM_X_GROUP_BYTES + f * 16 + 8 * (tid / 256),
                        xm[0],
                        xm[1],
                    )
                };
            }
        }
        // SAFETY: every thread of the block reaches it (block-uniform loop).
        unsafe { sync_threads() };
        let more = u + 1 < end;
        let next = if more {
            // SAFETY: a unit of the launch.
            unsafe { load_unit::<B16, R, MG>(p, u + 1, tid) }
        } else {
            cur
        };
        // SAFETY: the codebooks are in shared memory (waited for before the first barrier),
        // the stage written before the barrier; codes below entries (the contract).
        unsafe { compute::<B16, R, MG, S>(cbs, xs, &cur.codes, &mut acc, lane) };
        seg += 1;
        if !more || next.rb != cur.rb {
            // SAFETY: block-uniform; the flag word is ours.
            unsafe { flush(p, cur.rb, seg, &acc, flag, tid) };
            acc = [[[[[0f32; 4]; S]; 2]; R]; MG];
            seg = 0;
        }
        if !more {
            break;
        }
        cur = next;
        u += 1;
    }
}

/// Defines the big-codebook tensor-core GEMV's entry points and launch bounds, with
/// programmatic dependent launch when `$pdl` is `true` (the sm_90a module of
/// `vq-kernels-sm90`; `false` in this crate's module).
#[doc(hidden)]
#[macro_export]
macro_rules! big_mma_entry_points {
    ($pdl:literal) => {
        /// The big-codebook tensor-core GEMV for at most 8 vectors; see `vq_kernels::bigmma`.
        ///
        /// # Safety
        /// As `vq_kernels::bigmma_gpu::big_mma_gemv` with `B16 = false`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn cmv_vq_big_mma_b8(p: $crate::bigmma::VqBigMmaParams) {
            // SAFETY: the launcher's checks are this kernel's contract.
            unsafe { $crate::bigmma_gpu::big_mma_gemv::<false, 2, 1, 2, $pdl>(&p) }
        }

        /// The big-codebook tensor-core GEMV for at most 16 vectors; see `vq_kernels::bigmma`.
        ///
        /// # Safety
        /// As `vq_kernels::bigmma_gpu::big_mma_gemv` with `B16 = true`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn cmv_vq_big_mma_b16(p: $crate::bigmma::VqBigMmaParams) {
            // SAFETY: the launcher's checks are this kernel's contract.
            unsafe { $crate::bigmma_gpu::big_mma_gemv::<true, 2, 1, 2, $pdl>(&p) }
        }

        /// The big-codebook tensor-core GEMV for at most 64 inputs (four groups of 16, one row
        /// group per warp, the stages' entries added in fp16 into one sum); see
        /// `vq_kernels::bigmma`.
        ///
        /// # Safety
        /// As `vq_kernels::bigmma_gpu::big_mma_gemv` with up to 64 inputs and the geometry of
        /// `BM_T64`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn cmv_vq_big_mma_t64(p: $crate::bigmma::VqBigMmaParams) {
            // SAFETY: the launcher's checks are this kernel's contract.
            unsafe { $crate::bigmma_gpu::big_mma_gemv::<true, 1, 4, 1, $pdl>(&p) }
        }

        // 512 threads, one block per SM (the codebooks take 128 KiB of shared memory): at most
        // 128 registers.
        cmv_device::launch_bounds! {
            CMV_MAXNTID_cmv_vq_big_mma_b8 = $crate::bigmma::BM_THREADS;
            CMV_MINNCTAPERSM_cmv_vq_big_mma_b8 = 1;
            CMV_MAXNTID_cmv_vq_big_mma_b16 = $crate::bigmma::BM_THREADS;
            CMV_MINNCTAPERSM_cmv_vq_big_mma_b16 = 1;
            CMV_MAXNTID_cmv_vq_big_mma_t64 = $crate::bigmma::BM_THREADS;
            CMV_MINNCTAPERSM_cmv_vq_big_mma_t64 = 1;
        }
    };
}
