//! Tensor-core GEMV entry points for 2 to 16 vectors (NVPTX only); the design is in
//! [`crate::tc`].

use crate::tc::{GemvTcF16Params, GemvTcI8Params, StreamK, TC_KBLOCK_CHUNKS};
use crate::tc_dev::{F16, I8, Tc, store_fragment};
use cmv_device::{
    U32x4, atomic_add_u32, block_idx_x, block_idx_y, cp_async_16_zfill, cp_async_commit,
    cp_async_wait, dyn_smem_addr, fence_gpu, grid_dim_x, grid_dim_y, lane_id, ld_cg_v4,
    ld_nc_na_v4, ld_nc_v4, lds_v4, st_global_v4, sts_v4, sync_threads, sync_threads_or, sync_warp,
    thread_idx_x, warp_id,
};

/// The weight chunks of `U` k-blocks from `kb` (zeros past `kb1` or the row's end) of a
/// warp's `MT` tiles (rows `g` and `g + 8` of each; row `g` only with `WB`).
///
/// # Safety
/// `wrow` are row starts of `chunks` readable chunks.
#[inline(always)]
unsafe fn load_w<const MT: usize, const U: usize, const WB: bool>(
    wrow: &[[*const U32x4; 2]; MT],
    kb: usize,
    kb1: usize,
    chunks: usize,
    t: usize,
) -> [[[U32x4; U]; 2]; MT] {
    let mut wv = [[[U32x4([0; 4]); U]; 2]; MT];
    for u in 0..U {
        let c = (kb + u) * TC_KBLOCK_CHUNKS as usize + t;
        if kb + u < kb1 && c < chunks {
            for m in 0..MT {
                for h in 0..if WB { 1 } else { 2 } {
                    // SAFETY: c < chunks: inside the row.
                    wv[m][h][u] = unsafe { ld_nc_na_v4(wrow[m][h].add(c)) };
                }
            }
        }
    }
    wv
}

/// Where a warp reads its input chunks: global memory (through L1), or the block's copy of
/// its k-range in shared memory (`XS`).
#[derive(Clone, Copy)]
struct XSrc<const NT: usize> {
    /// Start of vector `8 nt + g` in global memory (clamped to a valid vector).
    xrow: [*const U32x4; NT],
    /// Whether vector `8 nt + g` is below the batch (else its chunks are zeros).
    xok: [bool; NT],
    /// Shared-window address of chunk 0 of vector `8 nt + g`'s copy (`XS`).
    srow: [u32; NT],
    /// First k-block of the copy.
    kb0: usize,
}

/// The input chunks of `U` k-blocks from `kb` of the vectors `8 nt + g` (zeros for vectors
/// past the batch, past `kb1` or past the row's end).
///
/// # Safety
/// `src.xrow` are vector starts of `chunks` readable chunks where `xok`; with `XS`, the shared
/// copy holds k-blocks `src.kb0..kb1` (zeros past `chunks`) at `src.srow`.
#[inline(always)]
unsafe fn load_x<const NT: usize, const U: usize, const XS: bool>(
    src: &XSrc<NT>,
    kb: usize,
    kb1: usize,
    chunks: usize,
    t: usize,
) -> [[U32x4; U]; NT] {
    let mut xv = [[U32x4([0; 4]); U]; NT];
    for u in 0..U {
        let c = (kb + u) * TC_KBLOCK_CHUNKS as usize + t;
        if kb + u < kb1 && (XS || c < chunks) {
            for nt in 0..NT {
                if src.xok[nt] {
                    xv[nt][u] = if XS {
                        let i = c - src.kb0 * TC_KBLOCK_CHUNKS as usize;
                        // SAFETY: k-block kb + u of the copy, inside the shared memory.
                        unsafe { lds_v4(src.srow[nt] + 16 * i as u32) }
                    } else {
                        // SAFETY: c < chunks: inside the vector (a valid one).
                        unsafe { ld_nc_v4(src.xrow[nt].add(c)) }
                    };
                }
            }
        }
    }
    xv
}

/// `acc += W X` over `U` loaded k-blocks: two `mma` per k-block, tile and group of 8 vectors.
///
/// `WB` (weights as the B operand): each tile is 8 rows (the `mma`'s N), the vectors are its M
/// (`g` and `g + 8`, `NT` of them loaded, `NA == 1` accumulator), two `mma` per k-block and
/// tile for all 16 vectors; else `NA == NT`.
///
/// # Safety
/// All 32 lanes of the warp call it together.
#[inline(always)]
unsafe fn mma_group<
    E: Tc,
    const MT: usize,
    const NT: usize,
    const NA: usize,
    const U: usize,
    const WB: bool,
>(
    acc: &mut [[[E::Acc; 4]; NA]; MT],
    wv: &[[[U32x4; U]; 2]; MT],
    xv: &[[U32x4; U]; NT],
) {
    if WB {
        for u in 0..U {
            for m in 0..MT {
                let w = wv[m][0][u].0;
                let xa = xv[0][u].0;
                let xb = if NT > 1 { xv[NT - 1][u].0 } else { [0; 4] };
                // SAFETY: forwarded: the whole warp is here.
                unsafe {
                    acc[m][0] = E::mma([xa[0], xb[0], xa[1], xb[1]], [w[0], w[1]], acc[m][0]);
                    acc[m][0] = E::mma([xa[2], xb[2], xa[3], xb[3]], [w[2], w[3]], acc[m][0]);
                }
            }
        }
        return;
    }
    for u in 0..U {
        for m in 0..MT {
            let (a, b) = (wv[m][0][u].0, wv[m][1][u].0);
            for nt in 0..NT.min(NA) {
                let xx = xv[nt][u].0;
                // SAFETY: forwarded: the whole warp is here.
                unsafe {
                    acc[m][nt] = E::mma([a[0], b[0], a[1], b[1]], [xx[0], xx[1]], acc[m][nt]);
                    acc[m][nt] = E::mma([a[2], b[2], a[3], b[3]], [xx[2], xx[3]], acc[m][nt]);
                }
            }
        }
    }
}

/// A warp's sums over k-blocks `kb0..kb1` of its `MT` tiles of 16 rows from `row0`, for the
/// vectors `8 nt + g` below `batch` (`NT` groups of 8). Rows at or past `rows` read row
/// `rows - 1` (their sums are not stored); vectors at or past `batch` are zeros; chunks at or
/// past `chunks` (the last k-block's tail) are zeros in both operands.
///
/// `PF`: the weights of the next `U` k-blocks are loaded before the `mma` of the current ones
/// (twice the weight registers, loads in flight all the time); otherwise each group of `U`
/// k-blocks is loaded, then used.
///
/// Without `PF`, the warp sums the groups of `U` k-blocks from `kb0 + first`, `step`
/// k-blocks apart (a column slice); `PF` warps sum every k-block (`first` 0, `step` `U`).
///
/// `R > 0`: the weights go through the warp's ring of `R` stages in shared memory at `ring`
/// ([`crate::tc::tc_ring_offset`]): `R` groups of `U` k-blocks are in flight (`cp.async`)
/// while the oldest is multiplied, and a group is copied into a stage only after the same
/// lanes have read that stage back (each lane reads only the 16 bytes it copied).
///
/// # Safety
/// All 32 lanes call it together with the same arguments; `w` holds `rows * chunks` and `x`
/// `batch * chunks` readable, 16-byte-aligned chunks; `rows >= 1`, `batch >= 1`; with `R > 0`,
/// `ring` is this warp's ring of `R` stages in the block's shared memory, used by no one else.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn tile_sums<
    E: Tc,
    const MT: usize,
    const NT: usize,
    const NA: usize,
    const U: usize,
    const PF: bool,
    const XS: bool,
    const R: usize,
    const WB: bool,
>(
    w: *const U32x4,
    x: *const U32x4,
    rows: u32,
    chunks: usize,
    batch: u32,
    row0: u32,
    (kb0, kb1): (usize, usize),
    xs: (u32, usize),
    ring: u32,
    (first, step): (usize, usize),
) -> [[[E::Acc; 4]; NA]; MT] {
    let lane = lane_id();
    let (g, t) = ((lane >> 2) as usize, (lane & 3) as usize);
    let wrow: [[*const U32x4; 2]; MT] = core::array::from_fn(|m| {
        core::array::from_fn(|h| {
            let tile_rows = if WB { 8 } else { 16 };
            let r = (row0 as usize + m * tile_rows + h * 8 + g).min(rows as usize - 1);
            // SAFETY: r < rows: the row starts inside the matrix.
            unsafe { w.add(r * chunks) }
        })
    });
    let src = XSrc::<NT> {
        xok: core::array::from_fn(|nt| ((nt * 8 + g) as u32) < batch),
        xrow: core::array::from_fn(|nt| {
            let n = (nt * 8 + g).min(batch as usize - 1);
            // SAFETY: n < batch: the vector starts inside x.
            unsafe { x.add(n * chunks) }
        }),
        srow: core::array::from_fn(|nt| xs.0 + (16 * (nt * 8 + g) * xs.1) as u32),
        kb0,
    };
    let mut acc = [[[E::ZERO; 4]; NA]; MT];
    let mut kb = kb0;
    if R > 0 {
        let lane_ring = ring + 16 * lane;
        let slot = |s: usize, u: usize, m: usize, h: usize| {
            lane_ring + ((((s * U + u) * MT + m) * 2 + h) * 512) as u32
        };
        // Copies k-blocks kb..kb + U into stage s: zeros past kb1 or the row's end (the
        // inputs there are zeros too, and 0 x garbage could be NaN).
        let issue = |kb: usize, s: usize| {
            for u in 0..U {
                let c = (kb + u) * TC_KBLOCK_CHUNKS as usize + t;
                let ok = kb + u < kb1 && c < chunks;
                for m in 0..MT {
                    for h in 0..2 {
                        // SAFETY: c < chunks when read (else nothing is read from the row
                        // start); the stage slot is this lane's, not in flight (see below).
                        unsafe {
                            let src = wrow[m][h].add(if ok { c } else { 0 });
                            cp_async_16_zfill(slot(s, u, m, h), src, if ok { 16 } else { 0 });
                        }
                    }
                }
            }
        };
        // This warp's groups of U k-blocks: kb0 + first + i step (every group without slices).
        let start = kb0 + first;
        let groups = kb1.saturating_sub(start).div_ceil(step);
        // One commit group per stage, empty ones too, so that `wait_group R - 1` below always
        // means "the oldest group has landed".
        for st in 0..R {
            if st < groups {
                issue(start + st * step, st);
            }
            // SAFETY: device code.
            unsafe { cp_async_commit() };
        }
        let mut st = 0;
        for i in 0..groups {
            let kb = start + i * step;
            // SAFETY: as the other loads.
            let xv = unsafe { load_x::<NT, U, false>(&src, kb, kb1, chunks, t) };
            // SAFETY: device code; R is a compile-time constant.
            unsafe {
                match R {
                    2 => cp_async_wait::<1>(),
                    3 => cp_async_wait::<2>(),
                    4 => cp_async_wait::<3>(),
                    5 => cp_async_wait::<4>(),
                    6 => cp_async_wait::<5>(),
                    _ => cp_async_wait::<0>(),
                }
            }
            let mut wv = [[[U32x4([0; 4]); U]; 2]; MT];
            for (m, tile) in wv.iter_mut().enumerate() {
                for (h, half) in tile.iter_mut().enumerate() {
                    for (u, v) in half.iter_mut().enumerate() {
                        // SAFETY: this lane's bytes of stage st, landed (waited for above).
                        *v = unsafe { lds_v4(slot(st, u, m, h)) };
                    }
                }
            }
            // SAFETY: the loop bounds are warp-uniform: the whole warp is here.
            unsafe { mma_group::<E, MT, NT, NA, U, WB>(&mut acc, &wv, &xv) };
            // Stage st is read (the `mma` consumed it; the warp barrier orders the reads
            // before the copies): refill it with group i + R.
            // SAFETY: all lanes are here (warp-uniform loop).
            unsafe { sync_warp() };
            if i + R < groups {
                issue(start + (i + R) * step, st);
            }
            // SAFETY: device code.
            unsafe { cp_async_commit() };
            st = if st + 1 == R { 0 } else { st + 1 };
        }
        // SAFETY: device code; only empty groups can be left.
        unsafe { cp_async_wait::<0>() };
    } else if PF {
        // SAFETY (all loads below): rows and vectors as documented, chunks checked inside.
        let mut cur = unsafe { load_w::<MT, U, WB>(&wrow, kb, kb1, chunks, t) };
        while kb < kb1 {
            let next = unsafe { load_w::<MT, U, WB>(&wrow, kb + U, kb1, chunks, t) };
            let xv = unsafe { load_x::<NT, U, XS>(&src, kb, kb1, chunks, t) };
            // SAFETY: the loop bounds are warp-uniform: the whole warp is here.
            unsafe { mma_group::<E, MT, NT, NA, U, WB>(&mut acc, &cur, &xv) };
            cur = next;
            kb += U;
        }
    } else {
        kb += first;
        while kb < kb1 {
            // SAFETY: as above.
            let (wv, xv) = unsafe {
                (
                    load_w::<MT, U, WB>(&wrow, kb, kb1, chunks, t),
                    load_x::<NT, U, XS>(&src, kb, kb1, chunks, t),
                )
            };
            // SAFETY: the loop bounds are warp-uniform: the whole warp is here.
            unsafe { mma_group::<E, MT, NT, NA, U, WB>(&mut acc, &wv, &xv) };
            kb += step;
        }
    }
    acc
}

/// The whole kernel for element `E`: the block's sums (`S` column slices per row tile, added
/// in slice order through shared memory; `WB`: 8-row tiles with the weights as the B operand,
/// `NA` accumulator fragments per tile), then, when the k-blocks are split over `gridDim.y`
/// blocks, the split-K protocol of [`crate::tc`] (each thread's partial fragment to the
/// workspace; the block that counts last in adds all partials in split order), then the
/// stores: `store(i, v)` writes output `i = n * rows + row` from its 32-bit sum.
///
/// # Safety
/// Every thread of the block calls it (it has barriers when split or sliced); sizes and
/// alignment as [`tile_sums`]; the launch gives [`crate::tc::tc_smem_bytes`] of dynamic shared
/// memory; when `gridDim.y > 1`, `ws` holds `gridDim.y * gridDim.x * TC_THREADS * MT * NA`
/// 16-byte-aligned chunks and `counters` `gridDim.x` words, all zero.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn gemv_tc<
    E: Tc,
    const MT: usize,
    const NT: usize,
    const NA: usize,
    const U: usize,
    const PF: bool,
    const XS: bool,
    const R: usize,
    const S: usize,
    const WB: bool,
    const CS: bool,
>(
    w: *const U32x4,
    x: *const U32x4,
    rows: u32,
    chunks: usize,
    batch: u32,
    per: u32,
    ws: *mut u32,
    counters: *mut u32,
    store: impl Fn(usize, u32),
) {
    // Block `(x, y)` of the `row_blocks x ksplit` grid is number `y row_blocks + x` in launch
    // order; it sums split `id % ksplit` of row block `id / ksplit`, so the splits of one row
    // block run side by side and the blocks running at once read few distinct rows.
    let (rb, split) = {
        let id = block_idx_y() * grid_dim_x() + block_idx_x();
        (id / grid_dim_y(), id % grid_dim_y())
    };
    // Tiles of 16 rows (8 with the weights as the B operand), `MT` per warp.
    let tile_rows: u32 = if WB { 8 } else { 16 };
    let rb0 = rb * tile_rows * MT as u32 * (crate::tc::TC_WARPS / S as u32);
    // Warps `S t .. S t + S` share row tiles `t` (column slices `0..S`).
    let slice = warp_id() as usize % S;
    let row0 = rb0 + (warp_id() / S as u32) * tile_rows * MT as u32;
    let kblocks = chunks.div_ceil(TC_KBLOCK_CHUNKS as usize);
    let kb0 = (split * per) as usize;
    let kb1 = (kb0 + per as usize).min(kblocks);
    // XS: the block copies its k-range of every vector to shared memory first (zeros past the
    // row's end), `xs_stride` chunks apart ([`crate::tc::tc_x_stride`]).
    let stride = crate::tc::tc_x_stride(per) as usize;
    let base = dyn_smem_addr();
    if XS {
        let span = per as usize * TC_KBLOCK_CHUNKS as usize;
        let c0 = kb0 * TC_KBLOCK_CHUNKS as usize;
        let mut i = thread_idx_x() as usize;
        while i < batch as usize * span {
            let (n, c) = (i / span, i % span);
            let v = if c0 + c < chunks {
                // SAFETY: n < batch and c0 + c < chunks: inside x.
                unsafe { ld_nc_v4(x.add(n * chunks + c0 + c)) }
            } else {
                U32x4([0; 4])
            };
            // SAFETY: n * stride + c < batch * stride: inside the launch's shared memory.
            unsafe { sts_v4(base + (16 * (n * stride + c)) as u32, v) };
            i += crate::tc::TC_THREADS as usize;
        }
        // SAFETY: every thread of the block reaches this barrier.
        unsafe { sync_threads() };
    }
    // This warp's k-blocks: every `S`-th group of `U` from group `slice`, or with `CS` one
    // contiguous share of whole groups (`wk0..wk1`).
    let (wk0, wk1, first, step) = if CS {
        let share = (kb1 - kb0).div_ceil(U).div_ceil(S) * U;
        let lo = (kb0 + slice * share).min(kb1);
        (lo, (lo + share).min(kb1), 0, U)
    } else {
        (kb0, kb1, slice * U, S * U)
    };
    let mut sums = if row0 < rows {
        // SAFETY: forwarded; the condition is warp-uniform.
        unsafe {
            tile_sums::<E, MT, NT, NA, U, PF, XS, R, WB>(
                w,
                x,
                rows,
                chunks,
                batch,
                row0,
                (wk0, wk1),
                (base, stride),
                // The rings start the dynamic shared memory (a kernel has a ring or the
                // inputs' copy, never both: crate::tc tests).
                base + warp_id() * (R * U * MT * 1024) as u32,
                (first, step),
            )
        }
    } else {
        [[[E::ZERO; 4]; NA]; MT]
    };
    if S > 1 {
        // Add the slices' sums in slice order (the same order every run) into slice 0's
        // warp; the other warps go on with zeros and store nothing. Fragment `(m, nt)` of
        // thread `tid` sits at `16 ((m NT + nt) TC_THREADS + tid)` (conflict-free).
        let tid = thread_idx_x();
        // After the rings (`tc_smem_bytes`: rings, then the slices' sums).
        let sums_at = base + crate::tc::TC_WARPS * (R * U * MT * 1024) as u32;
        let at = |tid: u32, m: usize, nt: usize| {
            sums_at + 16 * ((m * NA + nt) as u32 * crate::tc::TC_THREADS + tid)
        };
        for (m, tile) in sums.iter().enumerate() {
            for (nt, a) in tile.iter().enumerate() {
                let v = U32x4([E::bits(a[0]), E::bits(a[1]), E::bits(a[2]), E::bits(a[3])]);
                // SAFETY: inside the launch's tc_slice_smem_bytes.
                unsafe { sts_v4(at(tid, m, nt), v) };
            }
        }
        // SAFETY: every thread of the block reaches this barrier.
        unsafe { sync_threads() };
        if slice == 0 {
            for s in 1..S as u32 {
                for (m, tile) in sums.iter_mut().enumerate() {
                    for (nt, a) in tile.iter_mut().enumerate() {
                        // SAFETY: slice s's thread of this lane, inside the shared memory.
                        let v = unsafe { lds_v4(at(tid + 32 * s, m, nt)) }.0;
                        for i in 0..4 {
                            a[i] = E::add(a[i], E::from_bits(v[i]));
                        }
                    }
                }
            }
        } else {
            sums = [[[E::ZERO; 4]; NA]; MT];
        }
    }
    let splits = grid_dim_y();
    if splits > 1 {
        let tid = thread_idx_x() as usize;
        // This thread's partial fragment of split `s`: MT * NT chunks, a block's threads side
        // by side (coalesced).
        let slot = |s: u32| {
            let i = (s as usize * grid_dim_x() as usize + rb as usize)
                * crate::tc::TC_THREADS as usize
                + tid;
            // SAFETY: i < gridDim.y * gridDim.x * TC_THREADS: inside the workspace.
            unsafe { (ws as *mut U32x4).add(i * MT * NA) }
        };
        let mine = slot(split);
        for (m, tile) in sums.iter().enumerate() {
            for (nt, a) in tile.iter().enumerate() {
                let v = U32x4([E::bits(a[0]), E::bits(a[1]), E::bits(a[2]), E::bits(a[3])]);
                // SAFETY: inside this thread's slot.
                unsafe { st_global_v4(mine.add(m * NA + nt), v) };
            }
        }
        // Publish the partials, then count the block in once all its threads have.
        // SAFETY: every thread of the block reaches both barriers (`splits` is grid-uniform).
        let last = unsafe {
            fence_gpu();
            sync_threads();
            let mut last = false;
            if tid == 0 {
                let c = counters.add(rb as usize);
                last = atomic_add_u32(c, 1) == splits - 1;
            }
            sync_threads_or(last)
        };
        if !last {
            return;
        }
        // The last split of this row block: every partial has landed. Add them in split order
        // (the same order every run), and leave the counter zero for the next launch.
        // SAFETY: no operands; orders the reads below after the other blocks' stores.
        unsafe { fence_gpu() };
        if tid == 0 {
            // SAFETY: this row block's counter; no block touches it again in this launch.
            unsafe { *counters.add(rb as usize) = 0 };
        }
        let own = sums;
        sums = [[[E::ZERO; 4]; NA]; MT];
        for s in 0..splits {
            let p = slot(s);
            for m in 0..MT {
                for nt in 0..NA {
                    let part = if s == split {
                        own[m][nt]
                    } else {
                        // SAFETY: split s's slot, written and published before its count.
                        let v = unsafe { ld_cg_v4(p.add(m * NA + nt)) }.0;
                        [
                            E::from_bits(v[0]),
                            E::from_bits(v[1]),
                            E::from_bits(v[2]),
                            E::from_bits(v[3]),
                        ]
                    };
                    for i in 0..4 {
                        sums[m][nt][i] = E::add(sums[m][nt][i], part[i]);
                    }
                }
            }
        }
    }
    let lane = lane_id();
    let (g, t) = (lane >> 2, lane & 3);
    for (m, tile) in sums.iter().enumerate() {
        for (nt, a) in tile.iter().enumerate() {
            for (i, &v) in a.iter().enumerate() {
                // The accumulator layout of `mma`: D[g (+8)][2t (+1)]; D's rows are the
                // weight rows and its columns the vectors, or the other way round with `WB`.
                let (hi, odd) = (if i >= 2 { 8 } else { 0 }, i as u32 & 1);
                let (row, n) = if WB {
                    (row0 + (m * 8) as u32 + 2 * t + odd, g + hi)
                } else {
                    (
                        row0 + (m * 16) as u32 + g + hi,
                        (nt * 8) as u32 + 2 * t + odd,
                    )
                };
                if slice == 0 && row < rows && n < batch {
                    store(n as usize * rows as usize + row as usize, E::bits(v));
                }
            }
        }
    }
}

/// Stream-K version of [`gemv_tc`] (one row tile per warp, inputs through L1): block `b` sums
/// the units `start(b)..start(b + 1)`; a row block it covers whole is stored directly, a part
/// of one goes to its partial slot, and the last of the row block's blocks to count in adds
/// the parts in block order (the same order every run) and stores the outputs.
///
/// # Safety
/// As [`gemv_tc`], with `ws` holding `2 * gridDim.x * TC_THREADS * NT` chunks and `counters`
/// one zero word per row block; `gridDim.y == 1`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn gemv_tc_stream<E: Tc, const NT: usize, const U: usize>(
    w: *const U32x4,
    x: *const U32x4,
    rows: u32,
    chunks: usize,
    batch: u32,
    ws: *mut u32,
    counters: *mut u32,
    store: impl Fn(usize, u32),
) {
    let rpb = u64::from(16 * crate::tc::TC_WARPS);
    let kbs = chunks.div_ceil(TC_KBLOCK_CHUNKS as usize) as u64;
    let sk = StreamK {
        kbs,
        units: (rows as u64).div_ceil(rpb) * kbs,
        blocks: grid_dim_x() as u64,
    };
    // (StreamK's arithmetic is unit-tested on the host: crate::tc tests.)
    let b = block_idx_x() as u64;
    let (u0, u1) = (sk.start(b), sk.start(b + 1));
    let tid = thread_idx_x() as usize;
    let slot = |blk: u64, side: usize| {
        let i = (2 * blk as usize + side) * crate::tc::TC_THREADS as usize + tid;
        // SAFETY: blk < gridDim.x, side < 2: inside the workspace.
        unsafe { (ws as *mut U32x4).add(i * NT) }
    };
    let mut u = u0;
    // Block-uniform loop: every thread walks the same segments.
    while u < u1 {
        let r = u / kbs;
        let end = u1.min((r + 1) * kbs);
        let (k0, k1) = ((u - r * kbs) as usize, (end - r * kbs) as usize);
        let row0 = (r * rpb) as u32 + warp_id() * 16;
        let sums = if row0 < rows {
            // SAFETY: forwarded; the condition is warp-uniform.
            unsafe {
                tile_sums::<E, 1, NT, NT, U, false, false, 0, false>(
                    w,
                    x,
                    rows,
                    chunks,
                    batch,
                    row0,
                    (k0, k1),
                    (0, 0),
                    0,
                    (0, U),
                )
            }
        } else {
            [[[E::ZERO; 4]; NT]; 1]
        };
        u = end;
        if k0 == 0 && k1 as u64 == kbs {
            store_fragment::<E, NT>(&sums[0], row0, rows, batch, &store);
            continue;
        }
        let mine = slot(b, sk.side(b, r));
        for (nt, a) in sums[0].iter().enumerate() {
            let v = U32x4([E::bits(a[0]), E::bits(a[1]), E::bits(a[2]), E::bits(a[3])]);
            // SAFETY: inside this thread's slot.
            unsafe { st_global_v4(mine.add(nt), v) };
        }
        let (first, last_block) = (sk.owner(r * kbs), sk.owner((r + 1) * kbs - 1));
        let parts = (last_block - first + 1) as u32;
        // Publish the part, then count it in once all the block's threads have.
        // SAFETY: every thread of the block reaches both barriers (the loop is block-uniform).
        let last = unsafe {
            fence_gpu();
            sync_threads();
            let mut last = false;
            if tid == 0 {
                last = atomic_add_u32(counters.add(r as usize), 1) == parts - 1;
            }
            sync_threads_or(last)
        };
        if !last {
            continue;
        }
        // SAFETY: no operands; orders the reads below after the other blocks' stores.
        unsafe { fence_gpu() };
        if tid == 0 {
            // SAFETY: this row block's counter; every part has counted in.
            unsafe { *counters.add(r as usize) = 0 };
        }
        let mut total = [[E::ZERO; 4]; NT];
        for c in first..=last_block {
            let p = slot(c, sk.side(c, r));
            for (nt, tot) in total.iter_mut().enumerate() {
                let part = if c == b {
                    sums[0][nt]
                } else {
                    // SAFETY: block c's part, written and published before its count.
                    let v = unsafe { ld_cg_v4(p.add(nt)) }.0;
                    [
                        E::from_bits(v[0]),
                        E::from_bits(v[1]),
                        E::from_bits(v[2]),
                        E::from_bits(v[3]),
                    ]
                };
                for i in 0..4 {
                    tot[i] = E::add(tot[i], part[i]);
                }
            }
        }
        store_fragment::<E, NT>(&total, row0, rows, batch, &store);
        // The slots of this row block may be rewritten by this block's next segment only
        // after every thread has read them.
        // SAFETY: block-uniform (`last` came from a block-wide vote).
        unsafe { sync_threads() };
    }
}

macro_rules! tc_stream_entries {
    ($($f16:ident, $i8:ident = $nt:literal, $u:literal;)*) => {$(
        /// fp16 GEMV on tensor cores for up to `8 * NT` vectors, stream-K schedule; see
        /// [`crate::tc`].
        ///
        /// # Safety
        /// Launched by `dense-gemv`, which validates sizes, alignment, the grid
        /// ([`crate::tc::tc_stream_plan`]), the workspace and the zeroed counters.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $f16(p: GemvTcF16Params) {
            // SAFETY: the launcher's checks: y holds batch * rows values.
            let store = unsafe { crate::tc_dev::f16_store(&p) };
            // SAFETY: forwarded from the launcher's checks.
            unsafe {
                gemv_tc_stream::<F16, $nt, $u>(
                    p.w.as_ptr(), p.x.as_ptr(), p.rows, (p.cols / 8) as usize, p.batch,
                    p.acc.as_mut_ptr(), p.counters.as_mut_ptr(), store,
                )
            }
        }

        /// int8 GEMV on tensor cores for up to `8 * NT` vectors, stream-K schedule, exact
        /// int32 sums and their requantization; see [`crate::tc`].
        ///
        /// # Safety
        /// As the fp16 entry point.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $i8(p: GemvTcI8Params) {
            // SAFETY: the launcher's checks: y32 and y8 hold batch * rows values.
            let store = unsafe { crate::tc_dev::i8_store(&p) };
            // SAFETY: forwarded from the launcher's checks.
            unsafe {
                gemv_tc_stream::<I8, $nt, $u>(
                    p.w.as_ptr(), p.x.as_ptr(), p.rows, (p.cols / 16) as usize, p.batch,
                    p.acc.as_mut_ptr(), p.counters.as_mut_ptr(), store,
                )
            }
        }
    )*};
}

tc_stream_entries! {
    cmv_gemv_f16_tc_sk_n8u4, cmv_gemv_i8_tc_sk_n8u4 = 1, 4;
    cmv_gemv_f16_tc_sk_n16u4, cmv_gemv_i8_tc_sk_n16u4 = 2, 4;
}

macro_rules! tc_entries {
    ($($f16:ident, $i8:ident = $nt:literal, $na:literal, $mt:literal, $u:literal, $pf:literal,
       $xs:literal, $r:literal, $s:literal, $wb:literal, $cs:literal;)*) => {$(
        /// fp16 GEMV on tensor cores for up to `8 * NT` vectors; see [`crate::tc`].
        ///
        /// # Safety
        /// Launched by `dense-gemv`, which validates sizes, alignment, the grid
        /// ([`crate::tc::tc_plan`]), the workspace and the zeroed counters.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $f16(p: GemvTcF16Params) {
            // SAFETY: the launcher's checks: y holds batch * rows values.
            let store = unsafe { crate::tc_dev::f16_store(&p) };
            // SAFETY: forwarded from the launcher's checks.
            unsafe {
                gemv_tc::<F16, $mt, $nt, $na, $u, $pf, $xs, $r, $s, $wb, $cs>(
                    p.w.as_ptr(), p.x.as_ptr(), p.rows, (p.cols / 8) as usize, p.batch,
                    p.kblocks_per_split, p.acc.as_mut_ptr(), p.counters.as_mut_ptr(), store,
                )
            }
        }

        /// int8 GEMV on tensor cores for up to `8 * NT` vectors, exact int32 sums and their
        /// requantization; see [`crate::tc`].
        ///
        /// # Safety
        /// As the fp16 entry point.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $i8(p: GemvTcI8Params) {
            // SAFETY: the launcher's checks: y32 and y8 hold batch * rows values.
            let store = unsafe { crate::tc_dev::i8_store(&p) };
            // SAFETY: forwarded from the launcher's checks.
            unsafe {
                gemv_tc::<I8, $mt, $nt, $na, $u, $pf, $xs, $r, $s, $wb, $cs>(
                    p.w.as_ptr(), p.x.as_ptr(), p.rows, (p.cols / 16) as usize, p.batch,
                    p.kblocks_per_split, p.acc.as_mut_ptr(), p.counters.as_mut_ptr(), store,
                )
            }
        }
    )*};
}

// Names and shapes as `crate::tc::TC_F16_KERNELS` / `TC_I8_KERNELS` (a host test checks
// that every listed name is in the PTX).
tc_entries! {
    cmv_gemv_f16_tc_n8u4, cmv_gemv_i8_tc_n8u4 = 1, 1, 1, 4, false, false, 0, 1, false, false;
    cmv_gemv_f16_tc_n16u4, cmv_gemv_i8_tc_n16u4 = 2, 2, 1, 4, false, false, 0, 1, false, false;
    cmv_gemv_f16_tc_n8u4c8, cmv_gemv_i8_tc_n8u4c8 = 1, 1, 1, 4, false, false, 0, 8, false, false;
    cmv_gemv_f16_tc_n8u4c8b, cmv_gemv_i8_tc_n8u4c8b = 1, 1, 1, 4, false, false, 0, 8, true, false;
    cmv_gemv_f16_tc_n16u4c8, cmv_gemv_i8_tc_n16u4c8 = 2, 2, 1, 4, false, false, 0, 8, false, false;
    cmv_gemv_f16_tc_n16u4c4b, cmv_gemv_i8_tc_n16u4c4b = 2, 1, 1, 4, false, false, 0, 4, true, false;
    cmv_gemv_f16_tc_n8u4c8w, cmv_gemv_i8_tc_n8u4c8w = 1, 1, 1, 4, false, false, 0, 8, false, true;
    cmv_gemv_f16_tc_n16u4c8w, cmv_gemv_i8_tc_n16u4c8w = 2, 2, 1, 4, false, false, 0, 8, false, true;
    cmv_gemv_f16_tc_x_n8m1u8, cmv_gemv_i8_tc_x_n8m1u8 = 1, 1, 1, 8, false, false, 0, 1, false, false;
    cmv_gemv_f16_tc_x_n16m1u8, cmv_gemv_i8_tc_x_n16m1u8 = 2, 2, 1, 8, false, false, 0, 1, false, false;
    cmv_gemv_f16_tc_x_n8m1u4p, cmv_gemv_i8_tc_x_n8m1u4p = 1, 1, 1, 4, true, false, 0, 1, false, false;
    cmv_gemv_f16_tc_x_n16m1u4p, cmv_gemv_i8_tc_x_n16m1u4p = 2, 2, 1, 4, true, false, 0, 1, false, false;
    cmv_gemv_f16_tc_x_n16m1u4ps, cmv_gemv_i8_tc_x_n16m1u4ps = 2, 2, 1, 4, true, true, 0, 1, false, false;
    cmv_gemv_f16_tc_x_n8m1u4r3, cmv_gemv_i8_tc_x_n8m1u4r3 = 1, 1, 1, 4, false, false, 3, 1, false, false;
    cmv_gemv_f16_tc_x_n16m1u4r3, cmv_gemv_i8_tc_x_n16m1u4r3 = 2, 2, 1, 4, false, false, 3, 1, false, false;
    cmv_gemv_f16_tc_x_n8m1u2c8, cmv_gemv_i8_tc_x_n8m1u2c8 = 1, 1, 1, 2, false, false, 0, 8, false, false;
    cmv_gemv_f16_tc_x_n16m1u2c8, cmv_gemv_i8_tc_x_n16m1u2c8 = 2, 2, 1, 2, false, false, 0, 8, false, false;
    cmv_gemv_f16_tc_x_n16m2u2c8, cmv_gemv_i8_tc_x_n16m2u2c8 = 2, 2, 2, 2, false, false, 0, 8, false, false;
    cmv_gemv_f16_tc_x_n8m1u8c8b, cmv_gemv_i8_tc_x_n8m1u8c8b = 1, 1, 1, 8, false, false, 0, 8, true, false;
    cmv_gemv_f16_tc_x_n16m1u4c8b, cmv_gemv_i8_tc_x_n16m1u4c8b = 2, 1, 1, 4, false, false, 0, 8, true, false;
    cmv_gemv_f16_tc_x_n16m2u4c8b, cmv_gemv_i8_tc_x_n16m2u4c8b = 2, 1, 2, 4, false, false, 0, 8, true, false;
    cmv_gemv_f16_tc_x_n8m1u2r3c8, cmv_gemv_i8_tc_x_n8m1u2r3c8 = 1, 1, 1, 2, false, false, 3, 8, false, false;
}

// Launch bounds (`cargo xtask ptx` turns these into `.maxntid` / `.minnctapersm`): the
// shared-input (`s`) variant keeps its weights in flight in at most 128 registers, so that 2
// blocks fit on an SM (measured no faster than the others on an H100: docs/PERF.md).
cmv_device::launch_bounds! {
    CMV_MAXNTID_cmv_gemv_f16_tc_x_n16m1u4ps = crate::tc::TC_THREADS;
    CMV_MINNCTAPERSM_cmv_gemv_f16_tc_x_n16m1u4ps = 2;
    CMV_MAXNTID_cmv_gemv_i8_tc_x_n16m1u4ps = crate::tc::TC_THREADS;
    CMV_MINNCTAPERSM_cmv_gemv_i8_tc_x_n16m1u4ps = 2;
}
