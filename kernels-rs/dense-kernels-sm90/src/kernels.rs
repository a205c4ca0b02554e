//! The bulk-copy kernels (NVPTX only); see `dense_kernels::bulk`.

use cmv_device::{
    U32x4, atomic_add_u32, block_idx_x, block_idx_y, cp_async_bulk_g2s, dyn_smem_addr, f32_to_f16,
    fence_gpu, fence_mbarrier_init, grid_dim_y, lane_id, ld_cg_v4, lds_v4, mbarrier_arrive,
    mbarrier_arrive_expect_tx, mbarrier_init, mbarrier_wait_parity, mma_m16n8k16_f16_f32,
    mma_m16n8k32_s8, requantize, shfl_idx, st_global_v4, sync_threads, sync_warp, thread_idx_x,
    warp_id,
};
use dense_kernels::bulk::{
    BULK_CONSUMERS, BULK_KBLOCKS, BULK_ROWS, BULK_STAGES, bulk_empty_bar, bulk_full_bar,
    bulk_row_offset, bulk_slot, bulk_stage_bytes, bulk_x_offset,
};
use dense_kernels::tc::{GemvTcF16Params, GemvTcI8Params, TC_KBLOCK_CHUNKS};

/// One `mma` shape: the element type's instruction and its 32-bit accumulators.
trait Tc {
    type Acc: Copy;
    const ZERO: Self::Acc;
    /// `c + A B` for one 16-row tile and 8 vectors.
    ///
    /// # Safety
    /// All 32 lanes of the warp call it together.
    unsafe fn mma(a: [u32; 4], b: [u32; 2], c: [Self::Acc; 4]) -> [Self::Acc; 4];
    fn bits(a: Self::Acc) -> u32;
    fn from_bits(b: u32) -> Self::Acc;
    fn add(a: Self::Acc, b: Self::Acc) -> Self::Acc;
}

struct F16;
impl Tc for F16 {
    type Acc = f32;
    const ZERO: f32 = 0.0;
    #[inline(always)]
    unsafe fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        // SAFETY: forwarded from the caller.
        unsafe { mma_m16n8k16_f16_f32(a, b, c) }
    }
    #[inline(always)]
    fn bits(a: f32) -> u32 {
        a.to_bits()
    }
    #[inline(always)]
    fn from_bits(b: u32) -> f32 {
        f32::from_bits(b)
    }
    #[inline(always)]
    fn add(a: f32, b: f32) -> f32 {
        a + b
    }
}

struct I8;
impl Tc for I8 {
    type Acc = u32;
    const ZERO: u32 = 0;
    #[inline(always)]
    unsafe fn mma(a: [u32; 4], b: [u32; 2], c: [u32; 4]) -> [u32; 4] {
        // SAFETY: forwarded from the caller.
        unsafe { mma_m16n8k32_s8(a, b, c) }
    }
    #[inline(always)]
    fn bits(a: u32) -> u32 {
        a
    }
    #[inline(always)]
    fn from_bits(b: u32) -> u32 {
        b
    }
    #[inline(always)]
    fn add(a: u32, b: u32) -> u32 {
        a.wrapping_add(b)
    }
}

/// The whole kernel for element `E` and `NT` groups of 8 vectors: see `dense_kernels::bulk`.
/// `store(i, v)` writes output `i = n * rows + row` from its 32-bit sum.
///
/// # Safety
/// Every thread of the block calls it; the block has `BULK_THREADS` threads and
/// `BULK_SMEM_BYTES` of dynamic shared memory; `w` holds `rows * chunks` and `x` `batch *
/// chunks` readable 16-byte chunks, 16-byte aligned; `rows >= 1`, `1 <= batch <= 8 NT`; the
/// grid is the plan's (`row_blocks x ksplit`, `per` k-stages per split); when split, `ws` holds
/// `dense_kernels::bulk::bulk_workspace_words` 16-byte-aligned words and `counters`
/// `bulk_counters` words, all zero.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn gemv_bulk<E: Tc, const NT: usize>(
    w: *const U32x4,
    x: *const U32x4,
    rows: u32,
    chunks: u32,
    batch: u32,
    per: u32,
    ws: *mut u32,
    counters: *mut u32,
    store: impl Fn(usize, u32),
) {
    let base = dyn_smem_addr();
    let (rb, split, ksplit) = (block_idx_x(), block_idx_y(), grid_dim_y());
    let kstages = (chunks.div_ceil(TC_KBLOCK_CHUNKS)).div_ceil(BULK_KBLOCKS);
    let s0 = split * per;
    let s1 = if s0 + per < kstages {
        s0 + per
    } else {
        kstages
    };
    let n = s1.saturating_sub(s0);
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
    let row0 = rb * BULK_ROWS;
    if warp == BULK_CONSUMERS {
        // The producer: k-stage i into ring slot i % STAGES, once the consumers have released
        // the slot's previous k-stage (i - STAGES).
        for i in 0..n {
            let s = i % BULK_STAGES;
            if i >= BULK_STAGES {
                // SAFETY: an initialized barrier; its phase completes when the 8 consumers
                // are done with k-stage i - STAGES.
                unsafe {
                    mbarrier_wait_parity(base + bulk_empty_bar(s), (i / BULK_STAGES - 1) & 1)
                };
            }
            let k = s0 + i;
            let bytes = bulk_stage_bytes(chunks, k);
            let at = (k * BULK_KBLOCKS * TC_KBLOCK_CHUNKS) as usize;
            let full = base + bulk_full_bar(s);
            if lane == 0 {
                // SAFETY: the phase of slot s's full barrier for k-stage i expects one
                // arrival: this one.
                unsafe { mbarrier_arrive_expect_tx(full, (BULK_ROWS + batch) * bytes) };
            }
            // SAFETY: the whole warp is here (the loop is warp-uniform).
            unsafe { sync_warp() };
            let mut r = lane;
            while r < BULK_ROWS {
                // Rows past the end copy the last row (a valid read; not stored).
                let row = if row0 + r < rows { row0 + r } else { rows - 1 };
                // SAFETY: `bytes` (a non-zero multiple of 16) from chunk `at` of a row lie
                // inside it; the destination is row r's segment of slot s, which no one
                // reads until the full barrier's phase completes.
                unsafe {
                    let src = w.add(row as usize * chunks as usize + at) as *const u8;
                    cp_async_bulk_g2s(base + bulk_row_offset(s, r), src, bytes, full);
                }
                r += 32;
            }
            if lane < batch {
                // SAFETY: as above, for vector `lane` (< batch).
                unsafe {
                    let src = x.add(lane as usize * chunks as usize + at) as *const u8;
                    cp_async_bulk_g2s(base + bulk_x_offset(s, lane), src, bytes, full);
                }
            }
        }
        return;
    }
    // A consumer: rows `row0 + 16 warp + g` and `+ 8`, vectors `8 nt + g`.
    let (g, t) = (lane >> 2, lane & 3);
    let mut acc = [[E::ZERO; 4]; NT];
    for i in 0..n {
        let s = i % BULK_STAGES;
        // SAFETY: an initialized barrier; the producer fills k-stage i.
        unsafe { mbarrier_wait_parity(base + bulk_full_bar(s), (i / BULK_STAGES) & 1) };
        let c0 = (s0 + i) * BULK_KBLOCKS * TC_KBLOCK_CHUNKS;
        for u in 0..BULK_KBLOCKS {
            let q = u * TC_KBLOCK_CHUNKS + t;
            let ok = c0 + q < chunks;
            let zero = U32x4([0; 4]);
            let load = |off: u32| {
                if ok {
                    // SAFETY: inside slot s, landed (the full barrier's phase completed).
                    unsafe { lds_v4(base + off + 16 * q) }
                } else {
                    zero
                }
            };
            let a = load(bulk_row_offset(s, 16 * warp + g)).0;
            let b = load(bulk_row_offset(s, 16 * warp + g + 8)).0;
            for (nt, tile) in acc.iter_mut().enumerate() {
                let v = 8 * nt as u32 + g;
                let xx = if v < batch {
                    load(bulk_x_offset(s, v)).0
                } else {
                    [0; 4]
                };
                // SAFETY: the whole warp is here (warp-uniform loops).
                unsafe {
                    *tile = E::mma([a[0], b[0], a[1], b[1]], [xx[0], xx[1]], *tile);
                    *tile = E::mma([a[2], b[2], a[3], b[3]], [xx[2], xx[3]], *tile);
                }
            }
        }
        // Every lane has read slot s (the warp barrier orders the reads before lane 0's
        // arrival, which releases them).
        // SAFETY: the whole warp is here; the barrier expects one arrival per consumer.
        unsafe {
            sync_warp();
            if lane == 0 {
                mbarrier_arrive(base + bulk_empty_bar(s));
            }
        }
    }
    let tile_row0 = row0 + 16 * warp;
    if ksplit > 1 {
        let tile = rb * BULK_CONSUMERS + warp;
        let slot = |part: u32, nt: usize| {
            let i = bulk_slot(tile, part, ksplit, lane, nt as u32, NT as u32);
            // SAFETY: inside the workspace (the plan's size).
            unsafe { (ws as *mut U32x4).add(i as usize) }
        };
        for (nt, a) in acc.iter().enumerate() {
            let v = U32x4([E::bits(a[0]), E::bits(a[1]), E::bits(a[2]), E::bits(a[3])]);
            // SAFETY: this lane's chunk of this split's slot.
            unsafe { st_global_v4(slot(split, nt), v) };
        }
        // Publish the partials, then count the split in once every lane has.
        // SAFETY: the whole warp is here; the counter is this tile's.
        let last = unsafe {
            fence_gpu();
            sync_warp();
            let mut last = 0;
            if lane == 0 {
                last = u32::from(atomic_add_u32(counters.add(tile as usize), 1) == ksplit - 1);
            }
            shfl_idx(last, 0) != 0
        };
        if !last {
            return;
        }
        // SAFETY: no operands; orders the reads below after the other splits' stores.
        unsafe { fence_gpu() };
        if lane == 0 {
            // SAFETY: this tile's counter; every split has counted in.
            unsafe { *counters.add(tile as usize) = 0 };
        }
        let own = acc;
        acc = [[E::ZERO; 4]; NT];
        for part in 0..ksplit {
            for (nt, tot) in acc.iter_mut().enumerate() {
                let v = if part == split {
                    own[nt]
                } else {
                    // SAFETY: split part's slot, written and published before its count.
                    let v = unsafe { ld_cg_v4(slot(part, nt)) }.0;
                    [
                        E::from_bits(v[0]),
                        E::from_bits(v[1]),
                        E::from_bits(v[2]),
                        E::from_bits(v[3]),
                    ]
                };
                for j in 0..4 {
                    tot[j] = E::add(tot[j], v[j]);
                }
            }
        }
    }
    for (nt, a) in acc.iter().enumerate() {
        for (j, &v) in a.iter().enumerate() {
            // The accumulator layout of `mma`: D[g (+8)][2t (+1)].
            let row = tile_row0 + g + if j >= 2 { 8 } else { 0 };
            let n = 8 * nt as u32 + 2 * t + (j as u32 & 1);
            if row < rows && n < batch {
                store(n as usize * rows as usize + row as usize, E::bits(v));
            }
        }
    }
}

macro_rules! bulk_entries {
    ($($f16:ident, $i8:ident = $nt:literal;)*) => {$(
        /// fp16 GEMV for up to `8 * NT` vectors, the weights streamed through shared memory
        /// by bulk copies; see `dense_kernels::bulk`.
        ///
        /// # Safety
        /// Launched by `dense-gemv`, which validates sizes, alignment, the grid (the plan), the
        /// shared memory, the workspace and the zeroed counters (`kblocks_per_split` holds
        /// the k-stages per split).
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $f16(p: GemvTcF16Params) {
            let y = p.y.as_mut_ptr();
            let store = |at: usize, v: u32| {
                // SAFETY: at < batch * rows: inside y.
                unsafe { *y.add(at) = f32_to_f16(f32::from_bits(v)) };
            };
            // SAFETY: forwarded from the launcher's checks.
            unsafe {
                gemv_bulk::<F16, $nt>(
                    p.w.as_ptr(), p.x.as_ptr(), p.rows, p.cols / 8, p.batch,
                    p.kblocks_per_split, p.acc.as_mut_ptr(), p.counters.as_mut_ptr(), store,
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
                gemv_bulk::<I8, $nt>(
                    p.w.as_ptr(), p.x.as_ptr(), p.rows, p.cols / 16, p.batch,
                    p.kblocks_per_split, p.acc.as_mut_ptr(), p.counters.as_mut_ptr(), store,
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
