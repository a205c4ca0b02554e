//! The tensor-core GEMV (`crate::mma`), NVPTX only; its entry points are defined by
//! [`crate::mma_entry_points!`] in this crate's module (`false`) and in `vq-kernels-sm90`'s
//! (`true`: programmatic dependent launch).
// Public only for `mma_entry_points!` (hidden): no host code sees these types.
#![allow(missing_debug_implementations)]

use cmv_device::{
    U32x4, atomic_add_u32, block_idx_x, dyn_smem_addr, f32_to_f16, fence_gpu, grid_dim_x,
    griddepcontrol_launch_dependents, griddepcontrol_wait, ld_nc_na_v4, ld_nc_u16, ld_nc_u32,
    ld_nc_u64, ld_nc_v4, ld_relaxed_u32, lds_u32, lds_v2, lds_v4, mma_m16n8k16_f16_f32,
    red_add_f32_global, sts_u32, sts_v2, sts_v4, sync_threads, thread_idx_x,
};

use crate::dev::lookup;
use crate::mma::{
    Cursor, MMA_ENTRIES, MMA_TABLES_BYTES, MMA_THREADS, MMA_WARPS, SLAB_COLS, STEPS, VqMmaParams,
    X_STAGE_BYTES, entry_offset, frag_col, lookup_offset,
};

/// One thread's part of a unit's shared data, loaded a unit ahead: `x` its input fragment
/// (step `tid / 32`, lane `tid % 32`: the A registers), `cb` entry `tid` of the unit's
/// codebook (`2 V` bytes; only when the unit's table must be built).
#[derive(Clone, Copy)]
struct Stage {
    x: [u32; 4],
    cb: [u32; 4],
}

/// Four inputs of vector `n` from column `col` (0 past the batch and the columns), as two
/// words.
///
/// # Safety
/// The launcher's contract (`VqMmaParams`).
#[inline(always)]
unsafe fn load_x4(p: &VqMmaParams, n: u32, col: usize) -> [u32; 2] {
    let mut x = [0u32; 2];
    let cols = p.cols as usize;
    if n < p.batch {
        let at = n as usize * cols + col;
        if cols.is_multiple_of(4) && col + 4 <= cols {
            // SAFETY: n < batch, col + 4 <= cols: inside x; 8-byte aligned (x is, and at is
            // a multiple of 4 halves).
            let w = unsafe { ld_nc_u64(p.x.as_ptr().add(at) as *const u64) };
            x = [w as u32, (w >> 32) as u32];
        } else {
            for i in 0..4 {
                if col + i < cols {
                    // SAFETY: n < batch, col + i < cols: inside x.
                    let h = u32::from(unsafe { ld_nc_u16(p.x.as_ptr().add(at + i)) });
                    x[i / 2] |= h << (16 * (i % 2));
                }
            }
        }
    }
    x
}

/// Thread `tid`'s input fragment of slab `slab` ([`Stage::x`]).
///
/// # Safety
/// The launcher's contract; `slab < slabs`.
#[inline(always)]
unsafe fn load_x_frag<const V: usize, const B16: bool>(
    p: &VqMmaParams,
    slab: u32,
    tid: u32,
) -> [u32; 4] {
    let lane = tid % 32;
    let col = slab as usize * SLAB_COLS + frag_col(V, (tid / 32) as usize, (lane % 4) as usize);
    // SAFETY: the launcher's contract.
    let lo = unsafe { load_x4(p, lane / 4, col) };
    // Vectors 8..16 only for a kernel that takes more than 8 (else the stage holds `lo`).
    // SAFETY: as above.
    let hi = if B16 {
        unsafe { load_x4(p, lane / 4 + 8, col) }
    } else {
        [0; 2]
    };
    if B16 {
        [lo[0], hi[0], lo[1], hi[1]]
    } else {
        [lo[0], lo[1], 0, 0]
    }
}

/// Loads thread `tid`'s [`Stage`] of slab `slab`, codebook `tile` when `build`; the input
/// fragment only `with_x` (else zeros, for [`load_x_frag`] later).
///
/// # Safety
/// The launcher's contract; `slab < slabs`, `tile` a tile of the matrix.
#[inline(always)]
unsafe fn load_stage<const V: usize, const B16: bool>(
    p: &VqMmaParams,
    slab: u32,
    tile: u32,
    build: bool,
    with_x: bool,
    tid: u32,
) -> Stage {
    let mut st = Stage {
        x: if with_x {
            // SAFETY: the launcher's contract.
            unsafe { load_x_frag::<V, B16>(p, slab, tid) }
        } else {
            [0; 4]
        },
        cb: [0; 4],
    };
    if build {
        let at = (tile as usize * MMA_ENTRIES + tid as usize) * V;
        // SAFETY: tile < tiles, tid < 256: entry tid of the codebook, 2 V bytes, aligned to
        // 2 V (the codebooks are 16-byte aligned).
        unsafe {
            let e = p.codebooks.as_ptr().add(at);
            match V {
                2 => st.cb[0] = ld_nc_u32(e as *const u32),
                4 => {
                    let w = ld_nc_u64(e as *const u64);
                    st.cb[0] = w as u32;
                    st.cb[1] = (w >> 32) as u32;
                }
                _ => st.cb = ld_nc_v4(e as *const U32x4).0,
            }
        }
    }
    st
}

/// Writes a [`Stage`] into the buffers of parity `P`: the input fragment, and when `build`
/// entry `tid` of the table (8 stores of 16 bytes, rotated by `tid % 8` so that the 8 threads
/// of a wavefront hit 8 different bank groups).
///
/// # Safety
/// `base` is the dynamic shared memory (`MMA_SMEM_BYTES` bytes); no thread reads these
/// buffers until the next barrier.
#[inline(always)]
unsafe fn write_stage<const V: usize, const B16: bool, const P: u32>(
    base: u32,
    st: &Stage,
    build: bool,
    tid: u32,
) {
    let xb = base + MMA_TABLES_BYTES + P * X_STAGE_BYTES;
    // SAFETY: fragment tid of this stage buffer (16 bytes, or 8 for at most 8 vectors).
    unsafe {
        if B16 {
            sts_v4(xb + tid * 16, U32x4(st.x));
        } else {
            sts_v2(xb + tid * 8, st.x[0], st.x[1]);
        }
    }
    if build {
        let c = st.cb;
        let val = match V {
            2 => U32x4([c[0]; 4]),
            4 => U32x4([c[0], c[1], c[0], c[1]]),
            _ => U32x4(c),
        };
        let tb = base + entry_offset(tid) + 128 * P;
        for k in 0..8 {
            // SAFETY: inside entry tid of this table.
            unsafe { sts_v4(tb + ((16 * (k as u32 + tid)) & 127), val) };
        }
    }
}

/// The codes of one warp's `R` row groups for a unit: `16 / V` words each.
///
/// # Safety
/// The launcher's contract; `rb < row_blocks`, `slab < slabs`.
#[inline(always)]
unsafe fn load_codes<const V: usize, const R: usize>(
    p: &VqMmaParams,
    rb: u32,
    slab: u32,
    warp: u32,
    lane: u32,
) -> [[u32; 8]; R] {
    let mut c = [[0u32; 8]; R];
    let words = 16 / V;
    for r in 0..R {
        let rg = (rb as usize * MMA_WARPS as usize + warp as usize) * R + r;
        let at = ((rg * p.slabs as usize + slab as usize) * 32 + lane as usize) * words;
        // SAFETY: rg < row_groups, slab < slabs: inside the codes; 16-byte aligned for V <= 4
        // (at is a multiple of 4 words), 8-byte for V = 8 (2 words).
        unsafe {
            let q = p.codes.as_ptr().add(at);
            match V {
                2 => {
                    let (a, b) = (
                        ld_nc_na_v4(q as *const U32x4),
                        ld_nc_na_v4((q as *const U32x4).add(1)),
                    );
                    c[r] = [
                        a.0[0], a.0[1], a.0[2], a.0[3], b.0[0], b.0[1], b.0[2], b.0[3],
                    ];
                }
                4 => {
                    let a = ld_nc_na_v4(q as *const U32x4).0;
                    c[r] = [a[0], a[1], a[2], a[3], 0, 0, 0, 0];
                }
                _ => {
                    let w = ld_nc_u64(q as *const u64);
                    c[r] = [w as u32, (w >> 32) as u32, 0, 0, 0, 0, 0, 0];
                }
            }
        }
    }
    c
}

/// One unit's MMAs on the buffers of parity `P`: for each K step, the lane's A registers (the
/// inputs of vectors `g` and `g + 8`), then for each row group and half (8 rows) the B
/// registers from the table (one code per row and step for `V = 4`, two for `V = 2`, one per
/// two steps for `V = 8`) and one MMA.
///
/// # Safety
/// The buffers of parity `P` hold the unit's table and inputs (after the barrier); the whole
/// warp runs it.
#[inline(always)]
unsafe fn compute<const V: usize, const B16: bool, const R: usize, const P: u32>(
    base: u32,
    codes: &[[u32; 8]; R],
    acc: &mut [[[f32; 4]; 2]; R],
    lane: u32,
) {
    let lo = lookup_offset(V, lane) + 128 * P;
    let xl = base + MMA_TABLES_BYTES + P * X_STAGE_BYTES + lane * if B16 { 16 } else { 8 };
    let mut e8 = [[[0u32; 4]; 2]; R];
    const _: () = assert!(STEPS == 8);
    unroll!(s in [0 1 2 3 4 5 6 7], {
        // SAFETY: fragment (s, lane) of the stage buffer. At most 8 vectors: rows 8..16 of
        // the A tile are zero and not stored.
        let a = if B16 {
            unsafe { lds_v4(xl + (s * 512) as u32).0 }
        } else {
            let [x0, x1] = unsafe { lds_v2(xl + (s * 256) as u32) };
            [x0, 0, x1, 0]
        };
        for r in 0..R {
            let w = &codes[r];
            for h in 0..2 {
                // SAFETY (every lookup): the table of parity P; lo < 128.
                let b = match V {
                    4 => {
                        let e = unsafe { lookup::<2>(w[2 * h + s / 4], s % 4, lo, base) };
                        [e[0], e[1]]
                    }
                    2 => {
                        let (k, q) = ((2 * s) % 4, 4 * h + (2 * s) / 4);
                        let e0 = unsafe { lookup::<1>(w[q], k, lo, base) };
                        let e1 = unsafe { lookup::<1>(w[q], k + 1, lo, base) };
                        [e0[0], e1[0]]
                    }
                    _ => {
                        if s % 2 == 0 {
                            e8[r][h] = unsafe { lookup::<4>(w[h], s / 2, lo, base) };
                        }
                        let (e, o) = (e8[r][h], 2 * (s % 2));
                        [e[o], e[o + 1]]
                    }
                };
                // SAFETY: the whole warp runs this (block-uniform control flow).
                acc[r][h] = unsafe { mma_m16n8k16_f16_f32(a, b, acc[r][h]) };
            }
        }
    });
}

/// Ends a segment (the units of one row block this block ran): adds the sums into the
/// workspace, counts `seg` slabs into the row block's counter, and when that completes the
/// row block converts it to fp16, zeroing its sums and counter.
///
/// # Safety
/// The launcher's contract; every thread of the block calls it (barriers); `flag` is 4 bytes
/// of shared memory no one else uses.
#[inline(always)]
unsafe fn flush<const R: usize>(
    p: &VqMmaParams,
    rb: u32,
    seg: u32,
    acc: &[[[f32; 4]; 2]; R],
    flag: u32,
    tid: u32,
) {
    let (lane, warp) = (tid % 32, tid / 32);
    let (g, t) = (lane / 4, lane % 4);
    let rows = p.rows as usize;
    for r in 0..R {
        let rg = (rb * MMA_WARPS + warp) * R as u32 + r as u32;
        for h in 0..2 {
            for q in 0..4 {
                // c[q]: vector g (+ 8 for q >= 2), row 2t + q % 2 of the 8-row half.
                let n = g + 8 * (q as u32 / 2);
                let row = rg * 16 + 8 * h as u32 + 2 * t + q as u32 % 2;
                if n < p.batch && row < p.rows {
                    // SAFETY: n < batch, row < rows: inside acc.
                    unsafe {
                        red_add_f32_global(
                            p.acc.as_mut_ptr().add(n as usize * rows + row as usize),
                            acc[r][h][q],
                        )
                    };
                }
            }
        }
    }
    // The barrier orders every thread's sums before thread 0's fence, which publishes them
    // (fences are cumulative) before the count; thread 0's second fence orders the count
    // before the reads of the block that completes it (the barrier passes that on). One
    // fence per block, not per thread: a thread's fence waits for all its loads in flight.
    // SAFETY: every thread reaches both barriers.
    unsafe {
        sync_threads();
        if tid == 0 {
            fence_gpu();
            let old = atomic_add_u32(p.counters.as_mut_ptr().add(rb as usize), seg);
            let last = old + seg == p.slabs;
            if last {
                fence_gpu();
            }
            sts_u32(flag, u32::from(last));
        }
        sync_threads();
    }
    // SAFETY: written above, before the barrier.
    if unsafe { lds_u32(flag) } == 0 {
        return;
    }
    // Eight sums per thread at a time, all loads before the stores: one L2 round trip per
    // eight, not per sum.
    let block_rows = 128 * R as u32;
    let total = block_rows * p.batch;
    let mut first = 0;
    while first < total {
        let mut v = [0u32; 8];
        for (k, v) in v.iter_mut().enumerate() {
            let i = first + k as u32 * MMA_THREADS + tid;
            let (n, row) = (i / block_rows, rb * block_rows + i % block_rows);
            if i < total && row < p.rows {
                // SAFETY: n < batch, row < rows: inside acc; every slab's sums have arrived.
                *v = unsafe {
                    ld_relaxed_u32(p.acc.as_mut_ptr().add(n as usize * rows + row as usize) as _)
                };
            }
        }
        for (k, v) in v.iter().enumerate() {
            let i = first + k as u32 * MMA_THREADS + tid;
            let (n, row) = (i / block_rows, rb * block_rows + i % block_rows);
            if i < total && row < p.rows {
                let at = n as usize * rows + row as usize;
                // SAFETY: n < batch, row < rows: inside acc and y; no block touches this row
                // block again in this launch.
                unsafe {
                    *p.y.as_mut_ptr().add(at) = f32_to_f16(f32::from_bits(*v));
                    *p.acc.as_mut_ptr().add(at) = 0.0;
                }
            }
        }
        first += 8 * MMA_THREADS;
    }
    if tid == 0 {
        // SAFETY: the row block's counter; all its slabs have counted in.
        unsafe { *p.counters.as_mut_ptr().add(rb as usize) = 0 };
    }
}

/// The state a block carries from unit to unit. Units `u .. u + depth(R)` are loaded: slot
/// `P` of `st`, `build`, `codes`, `rb` and `tile` belongs to the unit that runs on the buffers
/// of parity `P`; `next` is the next unit to load.
struct State<const R: usize> {
    u: u32,
    end: u32,
    next: Cursor,
    st: [Stage; 2],
    build: [bool; 2],
    rb: [u32; 2],
    tile: [u32; 2],
    /// The slab of each slot's unit.
    slab: [u32; 2],
    held: [u32; 2],
    codes: [[[u32; 8]; R]; 2],
    acc: [[[f32; 4]; 2]; R],
    seg: u32,
}

/// Loads the unit at `c` into slot `slot` of `s` (building its table when the buffers of that
/// parity hold another codebook; its inputs only `with_x`), and moves `c` on.
///
/// # Safety
/// The launcher's contract; `c.u` is below `units`.
#[inline(always)]
unsafe fn load_unit<const V: usize, const B16: bool, const R: usize>(
    p: &VqMmaParams,
    s: &mut State<R>,
    slot: usize,
    c: &mut Cursor,
    with_x: bool,
    tid: u32,
) -> [[u32; 8]; R] {
    let tile = c.tile(p);
    s.build[slot] = s.held[slot] != tile;
    s.rb[slot] = c.rb;
    s.tile[slot] = tile;
    s.slab[slot] = c.slab;
    // SAFETY: a unit of the launch.
    let codes = unsafe {
        s.st[slot] = load_stage::<V, B16>(p, c.slab, tile, s.build[slot], with_x, tid);
        load_codes::<V, R>(p, c.rb, c.slab, tid / 32, tid % 32)
    };
    c.advance(p);
    codes
}

/// Units of loads in flight for `R` row groups per warp: 2 for `R = 2`, 1 for `R = 4` (whose
/// units are twice as large; two of them would not fit in 128 registers).
#[inline(always)]
const fn depth(r: usize) -> usize {
    if r >= 4 { 1 } else { 2 }
}

/// Runs unit `s.u` on the buffers of parity `P` and loads the unit `depth(R)` on (into slot
/// `P` for depth 2, the other slot for depth 1); returns whether it was the block's last.
///
/// # Safety
/// The launcher's contract; every thread of the block runs it with the same `s.u`.
#[inline(always)]
unsafe fn unit<const V: usize, const B16: bool, const R: usize, const P: u32>(
    p: &VqMmaParams,
    s: &mut State<R>,
    base: u32,
    tid: u32,
) -> bool {
    let slot = P as usize;
    let rb = s.rb[slot];
    // SAFETY: the buffers of parity P were last read before the previous barrier.
    unsafe { write_stage::<V, B16, P>(base, &s.st[slot], s.build[slot], tid) };
    s.held[slot] = s.tile[slot];
    // SAFETY: every thread of the block reaches it.
    unsafe { sync_threads() };
    let mut codes = s.codes[slot];
    if s.next.u < s.end {
        let mut c = s.next;
        if depth(R) == 2 {
            // SAFETY: a unit of the launch; unit u + 2 runs on these buffers too.
            codes = unsafe { load_unit::<V, B16, R>(p, s, slot, &mut c, true, tid) };
        } else {
            // SAFETY: a unit of the launch; unit u + 1 runs on the other buffers, whose last
            // unit (u - 1) is done.
            s.codes[1 - slot] =
                unsafe { load_unit::<V, B16, R>(p, s, 1 - slot, &mut c, true, tid) };
        }
        s.next = c;
    }
    // SAFETY: the table and inputs of parity P are written (barrier above).
    unsafe { compute::<V, B16, R, P>(base, &s.codes[slot], &mut s.acc, tid % 32) };
    if depth(R) == 2 {
        s.codes[slot] = codes;
    }
    s.seg += 1;
    s.u += 1;
    let more = s.u < s.end;
    if !more || s.rb[1 - slot] != rb {
        let flag = base + MMA_TABLES_BYTES + 2 * X_STAGE_BYTES;
        // SAFETY: every thread gets here together (block-uniform); the flag word is ours.
        unsafe { flush::<R>(p, rb, s.seg, &s.acc, flag, tid) };
        s.acc = [[[0.0; 4]; 2]; R];
        s.seg = 0;
    }
    !more
}

/// The tensor-core VQ GEMV (see `crate::mma`). With `PDL` (the sm_90a module) each block lets
/// the next launch start at once (`griddepcontrol.launch_dependents`), issues its first
/// units' code and codebook loads, then waits for the kernel before it (`griddepcontrol.wait`)
/// before it reads `x` or touches `y`, `acc` or `counters`, which that kernel (the previous
/// call) may still use.
///
/// # Safety
/// The launcher checked: `codes` holds `MmaGeometry::code_bytes` bytes laid out by
/// `crate::mma::mma_codes` (16-byte aligned), `codebooks` `tiles * 256 * V` values (16-byte
/// aligned), `x` `batch * cols` halves (8-byte aligned), `y` and `acc` `batch * rows` values,
/// `counters` `row_blocks`, `acc` and `counters` zero; `1 <= batch <= 16`; the geometry
/// fields come from an `MmaGeometry` of the matrix with this `V` and `R`; `MMA_THREADS`
/// threads per block, `MMA_SMEM_BYTES` bytes of dynamic shared memory. `PDL` only in sm_90
/// code.
#[doc(hidden)]
#[inline(always)]
pub unsafe fn mma_gemv<const V: usize, const B16: bool, const R: usize, const PDL: bool>(
    p: &VqMmaParams,
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
    let mut s = State::<R> {
        u: start,
        end,
        next: Cursor::new(p, start),
        st: [Stage {
            x: [0; 4],
            cb: [0; 4],
        }; 2],
        build: [true; 2],
        rb: [u32::MAX; 2],
        tile: [u32::MAX; 2],
        slab: [0; 2],
        held: [u32::MAX; 2],
        codes: [[[0; 8]; R]; 2],
        acc: [[[0.0; 4]; 2]; R],
        seg: 0,
    };
    // The first units' loads (they build their tables: the buffers hold none yet); with PDL
    // their inputs after the wait.
    let mut first = 0;
    for slot in 0..depth(R) {
        if s.next.u < end {
            let mut c = s.next;
            // SAFETY: a unit of the launch.
            s.codes[slot] = unsafe { load_unit::<V, B16, R>(p, &mut s, slot, &mut c, !PDL, tid) };
            s.next = c;
            first += 1;
        }
    }
    if PDL {
        // SAFETY: sm_90 code; nothing but the matrix (codes, codebooks) was read before.
        unsafe { griddepcontrol_wait() };
        for slot in 0..first {
            // SAFETY: the slot's unit is a unit of the launch.
            s.st[slot].x = unsafe { load_x_frag::<V, B16>(p, s.slab[slot], tid) };
        }
    }
    loop {
        // SAFETY: the launcher's contract; block-uniform.
        if unsafe { unit::<V, B16, R, 0>(p, &mut s, base, tid) } {
            break;
        }
        // SAFETY: as above.
        if unsafe { unit::<V, B16, R, 1>(p, &mut s, base, tid) } {
            break;
        }
    }
}

/// Defines the tensor-core GEMV's entry points and launch bounds, with programmatic
/// dependent launch when `$pdl` is `true` (the sm_90a module of `vq-kernels-sm90`; `false` in
/// this crate's module).
#[doc(hidden)]
#[macro_export]
macro_rules! mma_entry_points {
    ($pdl:literal) => {
        $crate::mma_entry_points!(@entries $pdl;
            cmv_vq_mma_v2_b8_r2 = 2, false, 2;
            cmv_vq_mma_v4_b8_r2 = 4, false, 2;
            cmv_vq_mma_v8_b8_r2 = 8, false, 2;
            cmv_vq_mma_v2_b8_r4 = 2, false, 4;
            cmv_vq_mma_v4_b8_r4 = 4, false, 4;
            cmv_vq_mma_v8_b8_r4 = 8, false, 4;
            cmv_vq_mma_v2_b16_r2 = 2, true, 2;
            cmv_vq_mma_v4_b16_r2 = 4, true, 2;
            cmv_vq_mma_v8_b16_r2 = 8, true, 2;
            cmv_vq_mma_v2_b16_r4 = 2, true, 4;
            cmv_vq_mma_v4_b16_r4 = 4, true, 4;
            cmv_vq_mma_v8_b16_r4 = 8, true, 4;
        );

        // 256 threads, at least two blocks per SM (at most 128 registers): one block per SM
        // cannot keep enough loads in flight.
        cmv_device::launch_bounds! {
            CMV_MAXNTID_cmv_vq_mma_v2_b8_r2 = $crate::mma::MMA_THREADS;
            CMV_MINNCTAPERSM_cmv_vq_mma_v2_b8_r2 = 2;
            CMV_MAXNTID_cmv_vq_mma_v4_b8_r2 = $crate::mma::MMA_THREADS;
            CMV_MINNCTAPERSM_cmv_vq_mma_v4_b8_r2 = 2;
            CMV_MAXNTID_cmv_vq_mma_v8_b8_r2 = $crate::mma::MMA_THREADS;
            CMV_MINNCTAPERSM_cmv_vq_mma_v8_b8_r2 = 2;
            CMV_MAXNTID_cmv_vq_mma_v2_b8_r4 = $crate::mma::MMA_THREADS;
            CMV_MINNCTAPERSM_cmv_vq_mma_v2_b8_r4 = 2;
            CMV_MAXNTID_cmv_vq_mma_v4_b8_r4 = $crate::mma::MMA_THREADS;
            CMV_MINNCTAPERSM_cmv_vq_mma_v4_b8_r4 = 2;
            CMV_MAXNTID_cmv_vq_mma_v8_b8_r4 = $crate::mma::MMA_THREADS;
            CMV_MINNCTAPERSM_cmv_vq_mma_v8_b8_r4 = 2;
            CMV_MAXNTID_cmv_vq_mma_v2_b16_r2 = $crate::mma::MMA_THREADS;
            CMV_MINNCTAPERSM_cmv_vq_mma_v2_b16_r2 = 2;
            CMV_MAXNTID_cmv_vq_mma_v4_b16_r2 = $crate::mma::MMA_THREADS;
            CMV_MINNCTAPERSM_cmv_vq_mma_v4_b16_r2 = 2;
            CMV_MAXNTID_cmv_vq_mma_v8_b16_r2 = $crate::mma::MMA_THREADS;
            CMV_MINNCTAPERSM_cmv_vq_mma_v8_b16_r2 = 2;
            CMV_MAXNTID_cmv_vq_mma_v2_b16_r4 = $crate::mma::MMA_THREADS;
            CMV_MINNCTAPERSM_cmv_vq_mma_v2_b16_r4 = 2;
            CMV_MAXNTID_cmv_vq_mma_v4_b16_r4 = $crate::mma::MMA_THREADS;
            CMV_MINNCTAPERSM_cmv_vq_mma_v4_b16_r4 = 2;
            CMV_MAXNTID_cmv_vq_mma_v8_b16_r4 = $crate::mma::MMA_THREADS;
            CMV_MINNCTAPERSM_cmv_vq_mma_v8_b16_r4 = 2;
        }
    };
    (@entries $pdl:literal; $($name:ident = $v:literal, $b16:literal, $r:literal;)*) => {$(
        /// The tensor-core VQ GEMV for this vector size, batch and row groups per warp; see
        /// `vq_kernels::mma`.
        ///
        /// # Safety
        /// As `vq_kernels::mma_gpu::mma_gemv`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: $crate::mma::VqMmaParams) {
            // SAFETY: the launcher's checks are this kernel's contract.
            unsafe { $crate::mma_gpu::mma_gemv::<$v, $b16, $r, $pdl>(&p) }
        }
    )*};
}
