//! The bulk-copy kernels (NVPTX only); see `dense_kernels::bulk`.

use cmv_device::{
    U32x4, block_idx_x, cp_async_bulk_g2s, dyn_smem_addr, fence_mbarrier_init,
    fence_proxy_async_shared, grid_dim_x, lane_id, ld_nc_v4, lds_v4, mbarrier_arrive,
    mbarrier_arrive_expect_tx, mbarrier_init, mbarrier_wait_parity, named_barrier_sync, sts_v4,
    sync_threads, sync_warp, thread_idx_x, warp_id,
};
use dense_kernels::bulk::{
    BULK_CONSUMERS, BULK_SLICE_KBLOCKS, BULK_STAGE_CHUNKS, BULK_STAGES, BULK_TILE_ROWS,
    bulk_block_tiles, bulk_empty_bar, bulk_full_bar, bulk_plan, bulk_row_offset, bulk_stage_bytes,
    bulk_sums_offset,
};
use dense_kernels::tc::{GemvTcF16Params, GemvTcI8Params, TC_KBLOCK_CHUNKS};
use dense_kernels::tc_dev::{F16, I8, Tc};

/// The whole kernel for element `E` and `NT` groups of 8 vectors: see `dense_kernels::bulk`.
/// `store(i, v)` writes output `i = n * rows + row` from its 32-bit sum.
///
/// # Safety
/// Every thread of the block calls it; the block has `BULK_THREADS` threads and
/// `BULK_SMEM_BYTES` of dynamic shared memory; `w` holds `rows * chunks` and `x` `batch *
/// chunks` readable 16-byte chunks, 16-byte aligned; `rows >= 1`, `1 <= batch <= 8 NT`; a 1-D
/// grid of at most `ceil(rows / 16)` blocks.
#[inline(always)]
unsafe fn gemv_bulk<E: Tc, const NT: usize>(
    w: *const U32x4,
    x: *const U32x4,
    rows: u32,
    chunks: u32,
    batch: u32,
    store: impl Fn(usize, u32),
) {
    let base = dyn_smem_addr();
    let plan = bulk_plan(rows, chunks, grid_dim_x());
    let b = block_idx_x();
    let total = bulk_block_tiles(&plan, b) * plan.kstages;
    let lane = lane_id();
    let warp = warp_id();
    if thread_idx_x() == 0 {
        for s in 0..BULK_STAGES {
            // SAFETY: the barriers' area at the start of the launch's shared memory.
            unsafe {
                mbarrier_init(base + bulk_full_bar(s), 1);
                mbarrier_init(base + bulk_empty_bar(s), BULK_CONSUMERS);
            }
        }
        // SAFETY: device code for sm_90a.
        unsafe { fence_mbarrier_init() };
    }
    // SAFETY: every thread of the block reaches this barrier.
    unsafe { sync_threads() };
    // Stage i of this block: k-stage i % kstages of tile b + (i / kstages) grid.
    let tile_of = |i: u32| b + (i / plan.kstages) * plan.grid;
    if warp == BULK_CONSUMERS {
        // The producer: stage i into ring slot i % STAGES, once the consumers have released
        // the slot's previous stage (i - STAGES).
        for i in 0..total {
            let s = i % BULK_STAGES;
            if i >= BULK_STAGES {
                // SAFETY: an initialized barrier; its phase completes when the consumers are
                // done with stage i - STAGES.
                unsafe {
                    mbarrier_wait_parity(base + bulk_empty_bar(s), (i / BULK_STAGES - 1) & 1)
                };
            }
            let k = i % plan.kstages;
            let bytes = bulk_stage_bytes(chunks, k);
            let full = base + bulk_full_bar(s);
            if lane == 0 {
                // SAFETY: the phase of slot s's full barrier for stage i expects one arrival:
                // this one.
                unsafe { mbarrier_arrive_expect_tx(full, BULK_TILE_ROWS * bytes) };
            }
            // SAFETY: the whole warp is here (the loop is warp-uniform).
            unsafe { sync_warp() };
            if lane < BULK_TILE_ROWS {
                // Rows past the end copy the last row (a valid read; not stored).
                let row = (tile_of(i) * BULK_TILE_ROWS + lane).min(rows - 1);
                let at = (k * BULK_STAGE_CHUNKS) as usize;
                // SAFETY: `bytes` (a non-zero multiple of 16) from chunk `at` of a row lie
                // inside it; the destination is row `lane`'s segment of slot s, which no one
                // reads until the full barrier's phase completes.
                unsafe {
                    let src = w.add(row as usize * chunks as usize + at) as *const u8;
                    cp_async_bulk_g2s(base + bulk_row_offset(s, lane), src, bytes, full);
                }
            }
        }
        // The producer stays until the consumers have released every stage, so that none of
        // its copies is in flight when it exits.
        for i in total.saturating_sub(BULK_STAGES)..total {
            // SAFETY: an initialized barrier; the consumers release stage i.
            unsafe {
                mbarrier_wait_parity(
                    base + bulk_empty_bar(i % BULK_STAGES),
                    (i / BULK_STAGES) & 1,
                )
            };
        }
        return;
    }
    // A consumer: slice `warp` of every k-stage, rows g and g + 8 of the tile, vectors 8 nt + g.
    let (g, t) = (lane >> 2, lane & 3);
    let tid = thread_idx_x();
    let xrow: [Option<*const U32x4>; NT] = core::array::from_fn(|nt| {
        let v = 8 * nt as u32 + g;
        // SAFETY: v < batch: the vector starts inside x.
        (v < batch).then(|| unsafe { x.add(v as usize * chunks as usize) })
    });
    let mut acc = [[E::ZERO; 4]; NT];
    for i in 0..total {
        let s = i % BULK_STAGES;
        let k = i % plan.kstages;
        // This warp's chunks of the stage: c0 + 4 u + t.
        let c0 = k * BULK_STAGE_CHUNKS + warp * BULK_SLICE_KBLOCKS * TC_KBLOCK_CHUNKS;
        // The inputs first, from global memory (through L1), while the stage may still land.
        let mut xv = [[[0u32; 4]; BULK_SLICE_KBLOCKS as usize]; NT];
        for (nt, xs) in xv.iter_mut().enumerate() {
            if let Some(p) = xrow[nt] {
                for (u, v) in xs.iter_mut().enumerate() {
                    let c = c0 + u as u32 * TC_KBLOCK_CHUNKS + t;
                    if c < chunks {
                        // SAFETY: c < chunks: inside the vector.
                        *v = unsafe { ld_nc_v4(p.add(c as usize)) }.0;
                    }
                }
            }
        }
        // SAFETY: an initialized barrier; the producer fills stage i.
        unsafe { mbarrier_wait_parity(base + bulk_full_bar(s), (i / BULK_STAGES) & 1) };
        for u in 0..BULK_SLICE_KBLOCKS {
            let q = warp * BULK_SLICE_KBLOCKS * TC_KBLOCK_CHUNKS + u * TC_KBLOCK_CHUNKS + t;
            let ok = k * BULK_STAGE_CHUNKS + q < chunks;
            let load = |r: u32| {
                if ok {
                    // SAFETY: inside slot s, landed (the full barrier's phase completed).
                    unsafe { lds_v4(base + bulk_row_offset(s, r) + 16 * q) }.0
                } else {
                    [0; 4]
                }
            };
            let (a, bb) = (load(g), load(g + 8));
            for (nt, tile) in acc.iter_mut().enumerate() {
                let xx = xv[nt][u as usize];
                // SAFETY: the whole warp is here (warp-uniform loops).
                unsafe {
                    *tile = E::mma([a[0], bb[0], a[1], bb[1]], [xx[0], xx[1]], *tile);
                    *tile = E::mma([a[2], bb[2], a[3], bb[3]], [xx[2], xx[3]], *tile);
                }
            }
        }
        // Every lane has read slot s: a proxy fence orders the reads (generic proxy) before
        // the producer's next bulk copy into the slot (async proxy), and the warp barrier
        // before lane 0's arrival, which releases the slot.
        // SAFETY: the whole warp is here; the barrier expects one arrival per consumer.
        unsafe {
            fence_proxy_async_shared();
            sync_warp();
            if lane == 0 {
                mbarrier_arrive(base + bulk_empty_bar(s));
            }
        }
        if k + 1 < plan.kstages {
            continue;
        }
        // The tile's end: the consumers' sums, added in warp order by warp 0.
        for (nt, a) in acc.iter().enumerate() {
            let v = U32x4([E::bits(a[0]), E::bits(a[1]), E::bits(a[2]), E::bits(a[3])]);
            // SAFETY: this thread's sums slot.
            unsafe { sts_v4(base + bulk_sums_offset(tid, nt as u32), v) };
        }
        // SAFETY: the consumers (all lanes of the 8 warps) reach both barriers at every tile's
        // end; the producer never uses barrier 1.
        unsafe { named_barrier_sync(1, BULK_CONSUMERS * 32) };
        if warp == 0 {
            for sw in 1..BULK_CONSUMERS {
                for (nt, a) in acc.iter_mut().enumerate() {
                    // SAFETY: warp sw's thread of this lane.
                    let v = unsafe { lds_v4(base + bulk_sums_offset(tid + 32 * sw, nt as u32)) }.0;
                    for j in 0..4 {
                        a[j] = E::add(a[j], E::from_bits(v[j]));
                    }
                }
            }
            let row0 = tile_of(i) * BULK_TILE_ROWS;
            for (nt, a) in acc.iter().enumerate() {
                for (j, &v) in a.iter().enumerate() {
                    // The accumulator layout of `mma`: D[g (+8)][2t (+1)].
                    let row = row0 + g + if j >= 2 { 8 } else { 0 };
                    let n = 8 * nt as u32 + 2 * t + (j as u32 & 1);
                    if row < rows && n < batch {
                        store(n as usize * rows as usize + row as usize, E::bits(v));
                    }
                }
            }
        }
        // SAFETY: as above (warp 0 has read the sums before anyone rewrites them).
        unsafe { named_barrier_sync(1, BULK_CONSUMERS * 32) };
        acc = [[E::ZERO; 4]; NT];
    }
}

macro_rules! bulk_entries {
    ($($f16:ident, $i8:ident = $nt:literal;)*) => {$(
        /// fp16 GEMV for up to `8 * NT` vectors, the weights streamed through shared memory
        /// by bulk copies; see `dense_kernels::bulk`.
        ///
        /// # Safety
        /// Launched by `dense-gemv`, which validates sizes, alignment, the grid (the plan) and
        /// the shared memory (`acc`, `counters` and `kblocks_per_split` are unused).
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $f16(p: GemvTcF16Params) {
            // SAFETY: the launcher's checks: y holds batch * rows values.
            let store = unsafe { dense_kernels::tc_dev::f16_store(&p) };
            // SAFETY: forwarded from the launcher's checks.
            unsafe {
                gemv_bulk::<F16, $nt>(
                    p.w.as_ptr(), p.x.as_ptr(), p.rows, p.cols / 8, p.batch, store,
                )
            }
        }

        /// int8 GEMV for up to `8 * NT` vectors, exact int32 sums and their requantization,
        /// the weights streamed through shared memory by bulk copies; see
        /// `dense_kernels::bulk`.
        ///
        /// # Safety
        /// As the fp16 entry point.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $i8(p: GemvTcI8Params) {
            // SAFETY: the launcher's checks: y32 and y8 hold batch * rows values.
            let store = unsafe { dense_kernels::tc_dev::i8_store(&p) };
            // SAFETY: forwarded from the launcher's checks.
            unsafe {
                gemv_bulk::<I8, $nt>(
                    p.w.as_ptr(), p.x.as_ptr(), p.rows, p.cols / 16, p.batch, store,
                )
            }
        }
    )*};
}

// Names as `dense_kernels::bulk::BULK_F16_KERNELS` / `BULK_I8_KERNELS` (a host test checks
// that every listed name is in the PTX).
bulk_entries! {
    cmv_gemv_f16_bulk_n8, cmv_gemv_i8_bulk_n8 = 1;
    cmv_gemv_f16_bulk_n16, cmv_gemv_i8_bulk_n16 = 2;
}

// One block of 288 threads per SM (the ring fills the shared memory).
cmv_device::launch_bounds! {
    CMV_MAXNTID_cmv_gemv_f16_bulk_n8 = dense_kernels::bulk::BULK_THREADS;
    CMV_MINNCTAPERSM_cmv_gemv_f16_bulk_n8 = 1;
    CMV_MAXNTID_cmv_gemv_f16_bulk_n16 = dense_kernels::bulk::BULK_THREADS;
    CMV_MINNCTAPERSM_cmv_gemv_f16_bulk_n16 = 1;
    CMV_MAXNTID_cmv_gemv_i8_bulk_n8 = dense_kernels::bulk::BULK_THREADS;
    CMV_MINNCTAPERSM_cmv_gemv_i8_bulk_n8 = 1;
    CMV_MAXNTID_cmv_gemv_i8_bulk_n16 = dense_kernels::bulk::BULK_THREADS;
    CMV_MINNCTAPERSM_cmv_gemv_i8_bulk_n16 = 1;
}
