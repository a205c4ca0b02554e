//! Persistent shared-input tensor-core GEMV entry points for 5 to 16 vectors (NVPTX only);
//! the design is in [`crate::tcp`], the fragments and `mma`s are [`crate::tc`]'s.

use crate::math::requantize;
use crate::tc::{GemvTcF16Params, GemvTcI8Params, TC_KBLOCK_CHUNKS, TC_THREADS, TC_WARPS};
use crate::tc_kernels::{F16, I8, Tc, XSrc, load_w, load_x, mma_group, store_fragment};
use crate::tcp::{TCP_ROWS, TCP_WHOLE, tcp_plan, tcp_sums_offset, tcp_unit, tcp_units};
use cmv_device::{
    U32x4, atomic_add_u32, block_idx_x, cp_async_16_zfill, cp_async_commit, cp_async_wait,
    dyn_smem_addr, f32_to_f16, fence_gpu, grid_dim_x, lane_id, ld_cg_v4, lds_v4, shfl_idx,
    st_global_v4, sts_v4, sync_threads, sync_warp, thread_idx_x, warp_id,
};

/// The whole kernel for element `E`, `NT` groups of 8 vectors, groups of `U` k-blocks: see
/// [`crate::tcp`]. `store(i, v)` writes output `i = n * rows + row` from its 32-bit sum.
///
/// # Safety
/// Every thread of the block calls it (it has barriers); `w` holds `rows * chunks` and `x`
/// `batch * chunks` readable, 16-byte-aligned chunks; `rows >= 1`, `1 <= batch <= 8 NT`; the
/// launch gives [`crate::tcp::tcp_smem_bytes`] of dynamic shared memory and a 1-D grid of at
/// most `ceil(rows / 16)` blocks; when the plan of that grid cuts row blocks into parts, `ws`
/// holds [`crate::tcp::tcp_workspace_words`] 16-byte-aligned words and `counters` `rem`
/// words, all zero.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn gemv_tcp<E: Tc, const NT: usize, const U: usize>(
    w: *const U32x4,
    x: *const U32x4,
    rows: u32,
    chunks: usize,
    batch: u32,
    ws: *mut u32,
    counters: *mut u32,
    store: impl Fn(usize, u32),
) {
    let plan = tcp_plan(rows, chunks as u32, U as u32, grid_dim_x());
    let b = block_idx_x();
    let units = tcp_units(&plan, b);
    let lane = lane_id();
    let (g, t) = ((lane >> 2) as usize, (lane & 3) as usize);
    let slice = warp_id();
    let tid = thread_idx_x();
    // Rows g and g + 8 of row block rb (rows past the end read the last row; their sums are
    // not stored).
    let wrows = |rb: u32| -> [[*const U32x4; 2]; 1] {
        [core::array::from_fn(|h| {
            let r = ((rb * TCP_ROWS) as usize + h * 8 + g).min(rows as usize - 1);
            // SAFETY: r < rows: the row starts inside the matrix.
            unsafe { w.add(r * chunks) }
        })]
    };
    let zero = [[[U32x4([0; 4]); U]; 2]; 1];
    let range = |u: &crate::tcp::TcpUnit| {
        let (lo, hi) = crate::tcp::tcp_warp_range(u.kb0, u.kb1, U as u32, slice);
        (lo as usize, hi as usize)
    };
    // The first unit's first group is in flight while the block copies the inputs.
    let mut u = tcp_unit(&plan, b, 0);
    let (mut lo, mut hi) = range(&u);
    let mut cur = if units > 0 && lo < hi {
        // SAFETY: rows as documented, chunks checked inside.
        unsafe { load_w::<1, U, false>(&wrows(u.rb), lo, hi, chunks, t) }
    } else {
        zero
    };
    // Every vector to shared memory, `stride` chunks apart, zeros past the row's end up to
    // the last k-block's.
    let kblocks = plan.kblocks as usize;
    let stride = crate::tc::tc_x_stride(plan.kblocks) as usize;
    let span = kblocks * TC_KBLOCK_CHUNKS as usize;
    let base = dyn_smem_addr();
    // Chunks `c0..c1` of every vector, `first, first + step, ...` of them by this thread:
    // all of its copies in flight at once (`cp.async`, no registers; a loop of loads and
    // stores waits for each load in turn: measured 1.7x slower at 16 vectors).
    let copy = |c0: usize, c1: usize, first: usize, step: usize| {
        let w = c1 - c0;
        let mut i = first;
        while i < batch as usize * w {
            let (n, c) = (i / w, c0 + i % w);
            let ok = c < chunks;
            // SAFETY: n < batch and, when read, c < chunks: inside x; n * stride + c < batch *
            // stride: inside the launch's shared memory (zero-filled past the row's end).
            unsafe {
                cp_async_16_zfill(
                    base + (16 * (n * stride + c)) as u32,
                    x.add(n * chunks + if ok { c } else { 0 }),
                    if ok { 16 } else { 0 },
                )
            };
            i += step;
        }
        // SAFETY: device code.
        unsafe {
            cp_async_commit();
            cp_async_wait::<0>();
        }
    };
    if plan.full > 0 {
        // Every unit before the last round covers all k-blocks, so each warp reads only its
        // own share of the vectors (the same in each): it copies that share and starts as
        // soon as it has landed, without waiting for the block. The shares cover every
        // k-block, and the barriers after the first unit make them all visible before a
        // last-round part (whose range is any) reads them.
        let (c0, c1) = (
            lo * TC_KBLOCK_CHUNKS as usize,
            hi * TC_KBLOCK_CHUNKS as usize,
        );
        copy(c0, c1, lane as usize, 32);
        // SAFETY: the whole warp is here (the branch is block-uniform).
        unsafe { sync_warp() };
    } else {
        copy(0, span, tid as usize, TC_THREADS as usize);
        // SAFETY: every thread of the block reaches this barrier (the branch is
        // block-uniform).
        unsafe { sync_threads() };
    }
    let src = XSrc::<NT> {
        xok: core::array::from_fn(|nt| ((nt * 8 + g) as u32) < batch),
        xrow: core::array::from_fn(|nt| {
            let n = (nt * 8 + g).min(batch as usize - 1);
            // SAFETY: n < batch: the vector starts inside x (not read: the copy is).
            unsafe { x.add(n * chunks) }
        }),
        srow: core::array::from_fn(|nt| base + (16 * (nt * 8 + g) * stride) as u32),
        kb0: 0,
    };
    // Warp s's fragment nt of thread tid sits at 16 (nt TC_THREADS + tid) (conflict-free).
    let sums_at = base + tcp_sums_offset(chunks as u32, batch);
    let at = |tid: u32, nt: usize| sums_at + 16 * (nt as u32 * TC_THREADS + tid);
    let mut j = 0;
    // Block-uniform loop: every thread walks the same units.
    while j < units {
        let more = j + 1 < units;
        let nu = if more { tcp_unit(&plan, b, j + 1) } else { u };
        let (nlo, nhi) = if more { range(&nu) } else { (0, 0) };
        let (wr, nwr) = (wrows(u.rb), wrows(nu.rb));
        let mut acc = [[[E::ZERO; 4]; NT]; 1];
        if lo >= hi && nlo < nhi {
            // An empty share: start the next unit's loads now.
            // SAFETY: as above.
            cur = unsafe { load_w::<1, U, false>(&nwr, nlo, nhi, chunks, t) };
        }
        let mut kb = lo;
        while kb < hi {
            // SAFETY (loads): rows and vectors as documented, chunks checked inside; the
            // shared copy holds every k-block.
            let next = if kb + U < hi {
                unsafe { load_w::<1, U, false>(&wr, kb + U, hi, chunks, t) }
            } else if nlo < nhi {
                unsafe { load_w::<1, U, false>(&nwr, nlo, nhi, chunks, t) }
            } else {
                zero
            };
            // One k-block's inputs at a time (8 registers per group of 8 vectors instead of
            // 8 U), so that twice the weights fit in flight.
            for u in 0..U {
                let xv = unsafe { load_x::<NT, 1, true>(&src, kb + u, hi, chunks, t) };
                let wv = [[[cur[0][0][u]], [cur[0][1][u]]]];
                // SAFETY: the loop bounds are warp-uniform: the whole warp is here.
                unsafe { mma_group::<E, 1, NT, NT, 1, false>(&mut acc, &wv, &xv) };
            }
            cur = next;
            kb += U;
        }
        // The warps' sums, added in warp order by warp 0.
        for (nt, a) in acc[0].iter().enumerate() {
            let v = U32x4([E::bits(a[0]), E::bits(a[1]), E::bits(a[2]), E::bits(a[3])]);
            // SAFETY: inside the launch's shared memory (after the inputs' copy).
            unsafe { sts_v4(at(tid, nt), v) };
        }
        // SAFETY: every thread of the block reaches this barrier (block-uniform loop).
        unsafe { sync_threads() };
        if slice == 0 {
            let mut sums = acc[0];
            for s in 1..TC_WARPS {
                for (nt, a) in sums.iter_mut().enumerate() {
                    // SAFETY: warp s's thread of this lane, inside the shared memory.
                    let v = unsafe { lds_v4(at(tid + 32 * s, nt)) }.0;
                    for i in 0..4 {
                        a[i] = E::add(a[i], E::from_bits(v[i]));
                    }
                }
            }
            let row0 = u.rb * TCP_ROWS;
            if u.part == TCP_WHOLE {
                store_fragment::<E, NT>(&sums, row0, rows, batch, &store);
            } else {
                // SAFETY: forwarded: the workspace and counters of a cut plan.
                unsafe {
                    finish_part::<E, NT>(
                        &sums,
                        &u,
                        plan.ksplit,
                        ws,
                        counters,
                        row0,
                        rows,
                        batch,
                        &store,
                    )
                };
            }
        }
        // The sums' area is rewritten by the next unit only after warp 0 has read it.
        // SAFETY: every thread of the block reaches this barrier.
        unsafe { sync_threads() };
        u = nu;
        (lo, hi) = (nlo, nhi);
        j += 1;
    }
}

/// Warp 0's end of a part of a last-round row block: its partial sums to the workspace, then
/// the part that counts in last adds every part in part order, stores the outputs and sets
/// the counter back to zero.
///
/// # Safety
/// Called by the 32 lanes of one warp together; `ws` holds `ksplit * (u.slot + 1) * 32 * NT`
/// 16-byte chunks and `counters` `u.slot + 1` words, zero before the launch.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn finish_part<E: Tc, const NT: usize>(
    sums: &[[E::Acc; 4]; NT],
    u: &crate::tcp::TcpUnit,
    ksplit: u32,
    ws: *mut u32,
    counters: *mut u32,
    row0: u32,
    rows: u32,
    batch: u32,
    store: &impl Fn(usize, u32),
) {
    let lane = lane_id() as usize;
    let slot = |part: u32| {
        let i = ((u.slot * ksplit + part) as usize * 32 + lane) * NT;
        // SAFETY: inside the workspace (the caller's contract).
        unsafe { (ws as *mut U32x4).add(i) }
    };
    let mine = slot(u.part);
    for (nt, a) in sums.iter().enumerate() {
        let v = U32x4([E::bits(a[0]), E::bits(a[1]), E::bits(a[2]), E::bits(a[3])]);
        // SAFETY: this lane's chunk of this part's slot.
        unsafe { st_global_v4(mine.add(nt), v) };
    }
    // Publish the partials, then count the part in once every lane has.
    // SAFETY: the whole warp is here; the counter is this row block's.
    let last = unsafe {
        fence_gpu();
        sync_warp();
        let mut last = 0;
        if lane == 0 {
            last = u32::from(atomic_add_u32(counters.add(u.slot as usize), 1) == ksplit - 1);
        }
        shfl_idx(last, 0) != 0
    };
    if !last {
        return;
    }
    // SAFETY: no operands; orders the reads below after the other parts' stores.
    unsafe { fence_gpu() };
    if lane == 0 {
        // SAFETY: this row block's counter; every part has counted in.
        unsafe { *counters.add(u.slot as usize) = 0 };
    }
    let mut total = [[E::ZERO; 4]; NT];
    for part in 0..ksplit {
        let p = slot(part);
        for (nt, tot) in total.iter_mut().enumerate() {
            let v = if part == u.part {
                sums[nt]
            } else {
                // SAFETY: part's slot, written and published before its count.
                let v = unsafe { ld_cg_v4(p.add(nt)) }.0;
                [
                    E::from_bits(v[0]),
                    E::from_bits(v[1]),
                    E::from_bits(v[2]),
                    E::from_bits(v[3]),
                ]
            };
            for i in 0..4 {
                tot[i] = E::add(tot[i], v[i]);
            }
        }
    }
    store_fragment::<E, NT>(&total, row0, rows, batch, store);
}

macro_rules! tcp_entries {
    ($($f16:ident, $i8:ident = $nt:literal, $u:literal;)*) => {$(
        /// fp16 GEMV on tensor cores for up to `8 * NT` vectors, persistent with the inputs in
        /// shared memory; see [`crate::tcp`].
        ///
        /// # Safety
        /// Launched by `dense-gemv`, which validates sizes, alignment, the grid, the shared
        /// memory, the workspace and the zeroed counters (`kblocks_per_split` is unused).
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $f16(p: GemvTcF16Params) {
            let y = p.y.as_mut_ptr();
            let store = |at: usize, v: u32| {
                // SAFETY: at < batch * rows: inside y.
                unsafe { *y.add(at) = f32_to_f16(f32::from_bits(v)) };
            };
            // SAFETY: forwarded from the launcher's checks.
            unsafe {
                gemv_tcp::<F16, $nt, $u>(
                    p.w.as_ptr(), p.x.as_ptr(), p.rows, (p.cols / 8) as usize, p.batch,
                    p.acc.as_mut_ptr(), p.counters.as_mut_ptr(), store,
                )
            }
        }

        /// int8 GEMV on tensor cores for up to `8 * NT` vectors, persistent with the inputs in
        /// shared memory, exact int32 sums and their requantization; see [`crate::tcp`].
        ///
        /// # Safety
        /// As the fp16 entry point.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $i8(p: GemvTcI8Params) {
            let (y32, y8, scale) = (p.y32.as_mut_ptr(), p.y8.as_mut_ptr(), p.scale);
            let store = |at: usize, v: u32| {
                // SAFETY: at < batch * rows: inside y32 and y8.
                unsafe {
                    *y32.add(at) = v as i32;
                    *y8.add(at) = requantize(v as i32, scale);
                }
            };
            // SAFETY: forwarded from the launcher's checks.
            unsafe {
                gemv_tcp::<I8, $nt, $u>(
                    p.w.as_ptr(), p.x.as_ptr(), p.rows, (p.cols / 16) as usize, p.batch,
                    p.acc.as_mut_ptr(), p.counters.as_mut_ptr(), store,
                )
            }
        }
    )*};
}

// Names and shapes as `crate::tcp::TCP_F16_KERNELS` / `TCP_I8_KERNELS` (a host test checks
// that every listed name is in the PTX).
tcp_entries! {
    cmv_gemv_f16_tcp_n8u4, cmv_gemv_i8_tcp_n8u4 = 1, 4;
    cmv_gemv_f16_tcp_n16u4, cmv_gemv_i8_tcp_n16u4 = 2, 4;
    cmv_gemv_f16_tcp_n16u8, cmv_gemv_i8_tcp_n16u8 = 2, 8;
}

// One block of 256 threads per SM (the inputs' copy fills the shared memory), so up to 255
// registers: the current and the next group of weights stay in registers.
cmv_device::launch_bounds! {
    CMV_MAXNTID_cmv_gemv_f16_tcp_n8u4 = TC_THREADS;
    CMV_MINNCTAPERSM_cmv_gemv_f16_tcp_n8u4 = 1;
    CMV_MAXNTID_cmv_gemv_f16_tcp_n16u4 = TC_THREADS;
    CMV_MINNCTAPERSM_cmv_gemv_f16_tcp_n16u4 = 1;
    CMV_MAXNTID_cmv_gemv_f16_tcp_n16u8 = TC_THREADS;
    CMV_MINNCTAPERSM_cmv_gemv_f16_tcp_n16u8 = 1;
    CMV_MAXNTID_cmv_gemv_i8_tcp_n8u4 = TC_THREADS;
    CMV_MINNCTAPERSM_cmv_gemv_i8_tcp_n8u4 = 1;
    CMV_MAXNTID_cmv_gemv_i8_tcp_n16u4 = TC_THREADS;
    CMV_MINNCTAPERSM_cmv_gemv_i8_tcp_n16u4 = 1;
    CMV_MAXNTID_cmv_gemv_i8_tcp_n16u8 = TC_THREADS;
    CMV_MINNCTAPERSM_cmv_gemv_i8_tcp_n16u8 = 1;
}
