//! The copy-engine kernels (NVPTX only); see `dense_kernels::bulk`.

use cmv_device::{
    U32x4, atomic_add_u32, block_idx_x, cp_async_bulk_tensor_2d_g2s, dyn_smem_addr, fence_gpu,
    fence_mbarrier_init, fence_proxy_async_shared, grid_dim_x, griddepcontrol_launch_dependents,
    griddepcontrol_wait, lane_id, ld_cg_v4, ldmatrix_x2, ldmatrix_x4, mbarrier_arrive,
    mbarrier_arrive_expect_tx, mbarrier_init, mbarrier_wait_parity, prefetch_tensormap, shfl_idx,
    st_global_v4, sync_threads, sync_warp, thread_idx_x, warp_id,
};
use dense_kernels::bulk::{
    BULK_ROW_BYTES, BulkGeom, bulk_a_offset, bulk_b_offset, bulk_empty_bar, bulk_full_bar,
    bulk_plan_for, bulk_ring, bulk_tile_part, swizzle128,
};
use dense_kernels::tc_dev::{F16, I8, Tc, store_fragment};

/// The whole kernel for element `E` (`EB` bytes), `NT` groups of 8 vectors, `C` consumer
/// warps and `S` stages (`BulkGeom { consumers: C, stages: S }`): see `dense_kernels::bulk`.
/// `maps` is the generic address of the parameter struct (the weights'
/// tensor map at `+0`, the inputs' at `+128`); `store(i, v)` writes output `i = n * rows + row`
/// from its 32-bit sum.
///
/// # Safety
/// Every thread of the block calls it; the block has the geometry's `threads()` threads and
/// `smem_bytes()` of dynamic shared memory; the maps describe `W` (`rows x cols`, boxes of
/// `16 C` rows x 128 bytes) and `X` (`batch x cols`, boxes of `8 NT` rows x 128 bytes) with the
/// 128-byte swizzle; `row_bytes = cols * EB`; `1 <= batch <= 8 NT`; the grid is
/// `bulk_plan_for(geometry, rows, row_bytes, grid).grid` blocks; when that plan shares
/// tiles, `ws` holds `bulk_split_words` words and `counters` `tiles * C` zero words. With
/// programmatic dependent launch, no kernel launched before this one on the stream writes `W`
/// (its first stages are read before `griddepcontrol.wait`; everything else after it).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn gemv_bulk<E: Tc, const EB: u32, const NT: usize, const C: u32, const S: u32>(
    maps: u64,
    rows: u32,
    row_bytes: u32,
    batch: u32,
    ws: *mut U32x4,
    counters: *mut u32,
    store: impl Fn(usize, u32),
) {
    let g = const {
        let g = BulkGeom {
            consumers: C,
            stages: S,
        };
        assert!(g.is_valid());
        g
    };
    let (tile_rows, w_bytes, stage_bytes) = (g.tile_rows(), g.w_bytes(), g.stage_bytes());
    let base = dyn_smem_addr();
    let ring = bulk_ring(base);
    let plan = bulk_plan_for(g, rows, row_bytes, grid_dim_x());
    let b = block_idx_x();
    let sk = plan.stream();
    // This block's units (tile-major k-stages).
    let (u0, u1) = (sk.start(b as u64), sk.start(b as u64 + 1));
    let lane = lane_id();
    let warp = warp_id();
    // Programmatic dependent launch: the next kernel on the stream may start at once; it
    // streams its own weights while this one ends and waits (below) for everything else.
    // SAFETY: device code for sm_90a.
    unsafe { griddepcontrol_launch_dependents() };
    if thread_idx_x() == 0 {
        for s in 0..S {
            // SAFETY: the barriers' area at the start of the launch's shared memory.
            unsafe {
                mbarrier_init(base + bulk_full_bar(s), 1);
                mbarrier_init(base + bulk_empty_bar(s), C);
            }
        }
        // SAFETY: device code for sm_90a.
        unsafe { fence_mbarrier_init() };
    }
    // SAFETY: every thread of the block reaches this barrier.
    unsafe { sync_threads() };
    if warp == C {
        if lane != 0 {
            return;
        }
        // The producer (one thread): k-stage `i` of this block into ring slot `i % STAGES`,
        // once the consumers have released the slot's previous stage (`i - STAGES`).
        // SAFETY: the maps are in the parameter space, valid (the launcher's contract).
        unsafe {
            prefetch_tensormap(maps);
            prefetch_tensormap(maps + 128);
        }
        let box_cols = BULK_ROW_BYTES / EB;
        let stage_tx = w_bytes + 8 * NT as u32 * BULK_ROW_BYTES;
        // The first unit's tile and k-stage, then counted on (a 64-bit division per stage
        // would delay every refill).
        let (mut tile, mut k) = ((u0 / sk.kbs) as u32, (u0 % sk.kbs) as u32);
        // The weights of the first stages before `griddepcontrol.wait` (no kernel writes the
        // matrix: the launcher's contract), so that they stream while the kernel before this
        // one on the stream ends; that kernel may write the inputs, so their boxes follow the
        // wait. A slot's full barrier completes once both of its boxes have landed.
        let first = if u1 - u0 < S as u64 {
            (u1 - u0) as u32
        } else {
            S
        };
        let k_first = k;
        for s in 0..first {
            // SAFETY: slot s is fresh (s < STAGES); its full barrier's first phase expects one
            // arrival (this one) and both boxes' bytes; the destination is slot s's weights
            // (1024-byte aligned), which no one reads until the phase completes; boxes outside
            // the tensor are zero-filled by the copy engine, never read out of bounds.
            unsafe {
                let full = base + bulk_full_bar(s);
                mbarrier_arrive_expect_tx(full, stage_tx);
                let dst = ring + s * stage_bytes;
                cp_async_bulk_tensor_2d_g2s(dst, maps, k * box_cols, tile * tile_rows, full);
            }
            k += 1;
            if k == plan.kstages {
                k = 0;
                tile += 1;
            }
        }
        // SAFETY: device code for sm_90a.
        unsafe { griddepcontrol_wait() };
        let mut kx = k_first;
        for s in 0..first {
            // SAFETY: slot s's inputs, counted in its full barrier's phase above.
            unsafe {
                let dst = ring + s * stage_bytes + w_bytes;
                let full = base + bulk_full_bar(s);
                cp_async_bulk_tensor_2d_g2s(dst, maps + 128, kx * box_cols, 0, full);
            }
            kx += 1;
            if kx == plan.kstages {
                kx = 0;
            }
        }
        let mut i = first;
        for _ in u0 + first as u64..u1 {
            let s = i % S;
            // SAFETY: an initialized barrier (i >= STAGES here); its phase completes when the
            // consumers are done with stage i - STAGES.
            unsafe { mbarrier_wait_parity(base + bulk_empty_bar(s), (i / S - 1) & 1) };
            let full = base + bulk_full_bar(s);
            let dst = ring + s * stage_bytes;
            // SAFETY: the phase of slot s's full barrier expects one arrival (this one) and
            // both boxes' bytes; the destinations are slot s's weights and inputs (1024-byte
            // aligned), which no one reads until the phase completes; boxes outside the
            // tensors are zero-filled by the copy engine, never read out of bounds.
            unsafe {
                mbarrier_arrive_expect_tx(full, stage_tx);
                cp_async_bulk_tensor_2d_g2s(dst, maps, k * box_cols, tile * tile_rows, full);
                cp_async_bulk_tensor_2d_g2s(dst + w_bytes, maps + 128, k * box_cols, 0, full);
            }
            i += 1;
            k += 1;
            if k == plan.kstages {
                k = 0;
                tile += 1;
            }
        }
        // Stay until the consumers have released every stage, so that no copy of this block
        // is in flight when it exits.
        for j in i.saturating_sub(S)..i {
            // SAFETY: an initialized barrier; the consumers release stage j.
            unsafe { mbarrier_wait_parity(base + bulk_empty_bar(j % S), (j / S) & 1) };
        }
        return;
    }
    // A consumer: rows 16 warp .. 16 warp + 16 of every tile. It writes the outputs, the
    // workspace and the counters, which the kernel before this one on the stream may still
    // use: it waits for that kernel first (a no-op without programmatic launch).
    // SAFETY: device code for sm_90a.
    unsafe { griddepcontrol_wait() };
    // The fragment addresses are the same in every stage (stages are 1024-byte aligned, so the
    // swizzle moves only the offset).
    let a_off: [u32; 4] = core::array::from_fn(|j| swizzle128(bulk_a_offset(warp, lane, j as u32)));
    let b_off: [u32; 4] =
        core::array::from_fn(|j| w_bytes + swizzle128(bulk_b_offset(lane, j as u32)));
    let mut i = 0u32;
    let mut u = u0;
    let mut next_tile = (u0 / sk.kbs) as u32;
    while u < u1 {
        let tile = next_tile;
        next_tile += 1;
        let (k0, k1) = bulk_tile_part(&plan, tile, u0, u1);
        u += (k1 - k0) as u64;
        let mut acc = [[E::ZERO; 4]; NT];
        for _ in k0..k1 {
            let s = i % S;
            // SAFETY: an initialized barrier; the producer fills stage i.
            unsafe { mbarrier_wait_parity(base + bulk_full_bar(s), (i / S) & 1) };
            let st = ring + s * stage_bytes;
            for j in 0..4 {
                // SAFETY: the whole warp is here (warp-uniform loops); the addresses are inside
                // slot s, which has landed.
                unsafe {
                    let a = ldmatrix_x4(st + a_off[j]);
                    if NT == 2 {
                        let x = ldmatrix_x4(st + b_off[j]);
                        acc[0] = E::mma(a, [x[0], x[1]], acc[0]);
                        acc[NT - 1] = E::mma(a, [x[2], x[3]], acc[NT - 1]);
                    } else {
                        acc[0] = E::mma(a, ldmatrix_x2(st + b_off[j]), acc[0]);
                    }
                }
            }
            // Every lane has read slot s: a proxy fence orders the reads (generic proxy) before
            // the producer's next copy into the slot (async proxy), the warp barrier before
            // lane 0's arrival, which releases the slot.
            // SAFETY: the whole warp is here; the barrier expects one arrival per consumer.
            unsafe {
                fence_proxy_async_shared();
                sync_warp();
                if lane == 0 {
                    mbarrier_arrive(base + bulk_empty_bar(s));
                }
            }
            i += 1;
        }
        let row0 = tile * tile_rows + 16 * warp;
        if k1 - k0 == plan.kstages {
            store_fragment::<E, NT>(&acc, row0, rows, batch, &store);
            continue;
        }
        // A shared tile: this warp's partial fragments to its block's slot, then count in; the
        // last of the tile's blocks adds all of them in block order.
        let slot = |blk: u64, nt: usize| {
            let side = sk.side(blk, tile as u64);
            let at = (((blk as usize * 2 + side) * C as usize + warp as usize) * NT + nt) * 32
                + lane as usize;
            // SAFETY: blk < grid: inside the workspace (bulk_split_words).
            unsafe { ws.add(at) }
        };
        for (nt, a) in acc.iter().enumerate() {
            let v = U32x4([E::bits(a[0]), E::bits(a[1]), E::bits(a[2]), E::bits(a[3])]);
            // SAFETY: this lane's slot.
            unsafe { st_global_v4(slot(b as u64, nt), v) };
        }
        let t0 = tile as u64 * sk.kbs;
        let (first, last_blk) = (sk.owner(t0), sk.owner(t0 + sk.kbs - 1));
        let parts = (last_blk - first + 1) as u32;
        let counter = (tile * C + warp) as usize;
        // SAFETY: the whole warp is here; the counter is inside `counters`.
        let last = unsafe {
            fence_gpu();
            sync_warp();
            let mut last = 0;
            if lane == 0 {
                last = u32::from(atomic_add_u32(counters.add(counter), 1) == parts - 1);
            }
            shfl_idx(last, 0) != 0
        };
        if !last {
            continue;
        }
        // SAFETY: no operands; orders the reads below after the other warps' stores.
        unsafe { fence_gpu() };
        if lane == 0 {
            // SAFETY: this (tile, warp)'s counter; nothing touches it again in this launch.
            unsafe { *counters.add(counter) = 0 };
        }
        // The sharers' partials in groups of SHARE_LOADS: every load of a group is issued
        // before the first add (one round trip to L2 per group, not per sharer), then added in
        // block order.
        const SHARE_LOADS: u64 = 4;
        let mut sums = [[E::ZERO; 4]; NT];
        let mut blk = first;
        while blk <= last_blk {
            let parts: [[U32x4; NT]; SHARE_LOADS as usize] = core::array::from_fn(|j| {
                let c = blk + j as u64;
                core::array::from_fn(|nt| {
                    if c > last_blk || c == b as u64 {
                        U32x4([0; 4])
                    } else {
                        // SAFETY: block c's slot, written and published before its count.
                        unsafe { ld_cg_v4(slot(c, nt)) }
                    }
                })
            });
            for (j, part) in parts.iter().enumerate() {
                let c = blk + j as u64;
                if c > last_blk {
                    break;
                }
                for (nt, sum) in sums.iter_mut().enumerate() {
                    let v: [E::Acc; 4] = if c == b as u64 {
                        acc[nt]
                    } else {
                        core::array::from_fn(|q| E::from_bits(part[nt].0[q]))
                    };
                    for q in 0..4 {
                        sum[q] = E::add(sum[q], v[q]);
                    }
                }
            }
            blk += SHARE_LOADS;
        }
        store_fragment::<E, NT>(&sums, row0, rows, batch, &store);
    }
}

/// The generic address of kernel `$name`'s parameter struct (its first parameter, in the
/// parameter space), as `nvcc` takes that of a `__grid_constant__` parameter.
macro_rules! param_address {
    ($name:ident) => {{
        let a: u64;
        // SAFETY: reads the address of this kernel's own first parameter (no memory access).
        unsafe {
            core::arch::asm!(
                concat!("mov.b64 {a}, ", stringify!($name), "_param_0;"),
                "cvta.param.u64 {a}, {a};",
                a = out(reg64) a,
                options(nomem, nostack, pure)
            );
        }
        a
    }};
}

macro_rules! bulk_entries {
    ($($f16:ident, $i8:ident = $nt:literal, $g:path;)*) => {$(
        /// fp16 GEMV for up to `8 * NT` vectors, the weights and inputs streamed through
        /// shared memory by the copy engine; see `dense_kernels::bulk`.
        ///
        /// # Safety
        /// Launched by `dense-gemv`, which makes the tensor maps and validates sizes, the
        /// plan, the workspace and the shared memory.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $f16(p: dense_kernels::bulk::GemvBulkF16Params) {
            let maps = param_address!($f16);
            let q = p.p;
            // SAFETY: the launcher's checks: y holds batch * rows values.
            let store = unsafe { dense_kernels::tc_dev::f16_store(&q) };
            // SAFETY: forwarded from the launcher's checks.
            unsafe {
                gemv_bulk::<F16, 2, $nt, { $g.consumers }, { $g.stages }>(
                    maps, q.rows, 2 * q.cols, q.batch,
                    q.acc.as_mut_ptr() as *mut U32x4, q.counters.as_mut_ptr(), store,
                )
            }
        }

        /// int8 GEMV for up to `8 * NT` vectors, exact int32 sums and their requantization,
        /// the weights and inputs streamed through shared memory by the copy engine; see
        /// `dense_kernels::bulk`.
        ///
        /// # Safety
        /// As the fp16 entry point.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $i8(p: dense_kernels::bulk::GemvBulkI8Params) {
            let maps = param_address!($i8);
            let q = p.p;
            // SAFETY: the launcher's checks: y32 and y8 hold batch * rows values.
            let store = unsafe { dense_kernels::tc_dev::i8_store(&q) };
            // SAFETY: forwarded from the launcher's checks.
            unsafe {
                gemv_bulk::<I8, 1, $nt, { $g.consumers }, { $g.stages }>(
                    maps, q.rows, q.cols, q.batch,
                    q.acc.as_mut_ptr() as *mut U32x4, q.counters.as_mut_ptr(), store,
                )
            }
        }
    )*};
}

// Names as `dense_kernels::bulk::BULK_F16_KERNELS` / `BULK_I8_KERNELS` (a host test checks
// that every listed name is in the PTX).
bulk_entries! {
    cmv_gemv_f16_bulk_n8, cmv_gemv_i8_bulk_n8 = 1, dense_kernels::bulk::BULK_T128;
    cmv_gemv_f16_bulk_n16, cmv_gemv_i8_bulk_n16 = 2, dense_kernels::bulk::BULK_T128;
    cmv_gemv_f16_bulk64_n8, cmv_gemv_i8_bulk64_n8 = 1, dense_kernels::bulk::BULK_T64;
    cmv_gemv_f16_bulk64_n16, cmv_gemv_i8_bulk64_n16 = 2, dense_kernels::bulk::BULK_T64;
    cmv_gemv_f16_bulk112_n8, cmv_gemv_i8_bulk112_n8 = 1, dense_kernels::bulk::BULK_T112;
    cmv_gemv_f16_bulk112_n16, cmv_gemv_i8_bulk112_n16 = 2, dense_kernels::bulk::BULK_T112;
}

// One block per SM (the ring fills most of the shared memory): 288 threads on tiles of 128
// rows, 160 on tiles of 64, 256 on tiles of 112.
cmv_device::launch_bounds! {
    CMV_MAXNTID_cmv_gemv_f16_bulk_n8 = dense_kernels::bulk::BULK_T128.threads();
    CMV_MINNCTAPERSM_cmv_gemv_f16_bulk_n8 = 1;
    CMV_MAXNTID_cmv_gemv_f16_bulk_n16 = dense_kernels::bulk::BULK_T128.threads();
    CMV_MINNCTAPERSM_cmv_gemv_f16_bulk_n16 = 1;
    CMV_MAXNTID_cmv_gemv_i8_bulk_n8 = dense_kernels::bulk::BULK_T128.threads();
    CMV_MINNCTAPERSM_cmv_gemv_i8_bulk_n8 = 1;
    CMV_MAXNTID_cmv_gemv_i8_bulk_n16 = dense_kernels::bulk::BULK_T128.threads();
    CMV_MINNCTAPERSM_cmv_gemv_i8_bulk_n16 = 1;
    CMV_MAXNTID_cmv_gemv_f16_bulk64_n8 = dense_kernels::bulk::BULK_T64.threads();
    CMV_MINNCTAPERSM_cmv_gemv_f16_bulk64_n8 = 1;
    CMV_MAXNTID_cmv_gemv_f16_bulk64_n16 = dense_kernels::bulk::BULK_T64.threads();
    CMV_MINNCTAPERSM_cmv_gemv_f16_bulk64_n16 = 1;
    CMV_MAXNTID_cmv_gemv_i8_bulk64_n8 = dense_kernels::bulk::BULK_T64.threads();
    CMV_MINNCTAPERSM_cmv_gemv_i8_bulk64_n8 = 1;
    CMV_MAXNTID_cmv_gemv_i8_bulk64_n16 = dense_kernels::bulk::BULK_T64.threads();
    CMV_MINNCTAPERSM_cmv_gemv_i8_bulk64_n16 = 1;
    CMV_MAXNTID_cmv_gemv_f16_bulk112_n8 = dense_kernels::bulk::BULK_T112.threads();
    CMV_MINNCTAPERSM_cmv_gemv_f16_bulk112_n8 = 1;
    CMV_MAXNTID_cmv_gemv_f16_bulk112_n16 = dense_kernels::bulk::BULK_T112.threads();
    CMV_MINNCTAPERSM_cmv_gemv_f16_bulk112_n16 = 1;
    CMV_MAXNTID_cmv_gemv_i8_bulk112_n8 = dense_kernels::bulk::BULK_T112.threads();
    CMV_MINNCTAPERSM_cmv_gemv_i8_bulk112_n8 = 1;
    CMV_MAXNTID_cmv_gemv_i8_bulk112_n16 = dense_kernels::bulk::BULK_T112.threads();
    CMV_MINNCTAPERSM_cmv_gemv_i8_bulk112_n16 = 1;
    // The tensor maps at the parameter's offsets 0 and 128 must be 64-byte aligned
    // (`dense_kernels::bulk`; `cargo xtask ptx` declares the parameter `.align 64`).
    CMV_PARAMALIGN_cmv_gemv_f16_bulk_n8 = 64;
    CMV_PARAMALIGN_cmv_gemv_f16_bulk_n16 = 64;
    CMV_PARAMALIGN_cmv_gemv_i8_bulk_n8 = 64;
    CMV_PARAMALIGN_cmv_gemv_i8_bulk_n16 = 64;
    CMV_PARAMALIGN_cmv_gemv_f16_bulk64_n8 = 64;
    CMV_PARAMALIGN_cmv_gemv_f16_bulk64_n16 = 64;
    CMV_PARAMALIGN_cmv_gemv_i8_bulk64_n8 = 64;
    CMV_PARAMALIGN_cmv_gemv_i8_bulk64_n16 = 64;
    CMV_PARAMALIGN_cmv_gemv_f16_bulk112_n8 = 64;
    CMV_PARAMALIGN_cmv_gemv_f16_bulk112_n16 = 64;
    CMV_PARAMALIGN_cmv_gemv_i8_bulk112_n8 = 64;
    CMV_PARAMALIGN_cmv_gemv_i8_bulk112_n16 = 64;
}
