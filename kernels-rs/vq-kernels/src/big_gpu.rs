//! The big-codebook table GEMV (`crate::big`), NVPTX only; its entry points by
//! [`crate::big_entry_points!`] in this crate's module (`false`) and in `vq-kernels-sm90`'s
//! (`true`: programmatic dependent launch).
// Public only for `big_entry_points!` (hidden): no host code sees these types.

use cmv_device::{
    U32x4, atomic_add_u32, block_idx_x, cp_async_16, cp_async_commit, cp_async_wait, dyn_smem_addr,
    f32_to_f16, fence_gpu, grid_dim_x, griddepcontrol_launch_dependents, griddepcontrol_wait,
    ld_nc_na_v4, ld_nc_u16, ld_nc_u64, ld_relaxed_u32, lds_u32, lds_v2, mma_m16n8k16_f16_f32,
    red_add_f32_global, sts_u32, sts_v2, sync_threads, thread_idx_x,
};

use crate::big::{
    BIG_ENTRY_BYTES, BIG_GROUP_ROWS, BIG_MAX_PASSES, BIG_PASS_ROWS, BIG_ROW_WORDS, BIG_TABLE_BYTES,
    BIG_THREADS, BIG_WARPS, BigItem, TABLE_STRIDE, TILE_ENTRIES, VqBigParams, code_slot,
    positions_per_slab, reg_entries, slab_code,
};

/// Passes per item (as a `usize` for the unrolled loops).
const PASSES: usize = BIG_MAX_PASSES as usize;

/// A thread's codes of one item: per pass and plane, the words of its 4 rows.
#[derive(Clone, Copy)]
struct BigCodes {
    w: [[[u32; 4]; BIG_ROW_WORDS]; BIG_MAX_PASSES as usize],
}

/// Loads thread `tid`'s codes of `item` (zeros past the item's rows).
///
/// # Safety
/// The launcher's contract (`VqBigParams`); `item` is one of the launch's items.
#[inline(always)]
unsafe fn load_big_codes(p: &VqBigParams, item: &BigItem, tid: u32) -> BigCodes {
    let mut c = BigCodes {
        w: [[[0; 4]; BIG_ROW_WORDS]; BIG_MAX_PASSES as usize],
    };
    let plane = p.slabs as usize * p.rows_pad as usize;
    crate::unroll!(k < PASSES, {
        let r = item.row0 + k as u32 * BIG_PASS_ROWS + BIG_GROUP_ROWS * tid;
        if r < item.row_end {
            let at = item.slab as usize * p.rows_pad as usize + r as usize;
            crate::unroll!(q in [0 1 2], {
                // SAFETY: r < rows, r % 4 == 0, rows_pad a multiple of 4 >= rows, slab <
                // slabs: 4 words of plane q inside the codes, 16-byte aligned (`at` and the
                // plane size are multiples of 4).
                c.w[k][q] = unsafe {
                    ld_nc_na_v4(p.codes.as_ptr().add(q * plane + at) as *const U32x4).0
                };
            });
        }
    });
    c
}

/// The A fragment of lane `(g, t)` for `slab`, as its two nonzero words `a[0]`, `a[2]`: for
/// row `g` = code `g` (0..8), the inputs `2t, 2t + 1` of the code's position in its stage's
/// half of K, zeros in the other half (rows 8..16 are zero).
///
/// # Safety
/// The launcher's contract.
#[inline(always)]
unsafe fn big_x_frag(p: &VqBigParams, slab: u32, g: u32, t: u32) -> [u32; 2] {
    let mut a = [0u32; 2];
    {
        let (j, s) = code_slot(g, p.residuals);
        let col = ((slab * positions_per_slab(p.residuals) + j) * 8 + 2 * t) as usize;
        let mut w = 0u32;
        if col < p.cols as usize {
            // SAFETY: col < cols: inside x.
            w = u32::from(unsafe { ld_nc_u16(p.x.as_ptr().add(col)) });
        }
        if col + 1 < p.cols as usize {
            // SAFETY: col + 1 < cols: inside x.
            w |= u32::from(unsafe { ld_nc_u16(p.x.as_ptr().add(col + 1)) }) << 16;
        }
        if s == 0 {
            a[0] = w;
        } else {
            a[1] = w;
        }
    }
    a
}

/// Lane `(g, t)`'s B words of the tile of 8 entries starting at `e0` (entry `e0 + g`): from
/// global memory.
///
/// # Safety
/// `e0 + 8 <= entries`.
#[inline(always)]
unsafe fn big_cb_global(p: &VqBigParams, e0: u32, g: u32, t: u32) -> [u32; 2] {
    // SAFETY: e0 + g < entries: inside the codebook (entries * 8 words), 8-byte aligned.
    let x = unsafe { ld_nc_u64(p.cb.as_ptr().add(((e0 + g) * 8 + 2 * t) as usize) as *const u64) };
    [x as u32, (x >> 32) as u32]
}

/// Lane `(g, t)`'s B words of tile `tile` (entries `8 tile ..`, past the register ones):
/// from the shared-memory cache below `cached_end`, else from global memory.
///
/// # Safety
/// `regs <= 8 tile` and `tile < entries / 8`; the cache holds entries `regs..cached_end` at
/// `cbb`.
#[inline(always)]
unsafe fn big_cb(
    p: &VqBigParams,
    cbb: u32,
    regs: u32,
    cached_end: u32,
    tile: u32,
    g: u32,
    t: u32,
) -> [u32; 2] {
    let e0 = tile * TILE_ENTRIES;
    if e0 < cached_end {
        // SAFETY: regs <= e0 < cached_end: inside the cached entries, aligned.
        unsafe { lds_v2(cbb + (e0 - regs + g) * BIG_ENTRY_BYTES + 8 * t) }
    } else {
        // SAFETY: tile < tiles.
        unsafe { big_cb_global(p, e0, g, t) }
    }
}

/// One table tile: the `mma` of the inputs with the 8 entries from `e0` (B words `b`), and
/// lane `(g, t)` stores entries `e0 + 2t, e0 + 2t + 1` of table `g` as 8 bytes.
///
/// # Safety
/// The whole warp calls it with the same `e0`; `e0 + 8 <= 4096`; `tb` is the tables' address.
#[inline(always)]
unsafe fn big_tile(tb: u32, a: [u32; 2], b: [u32; 2], e0: u32, g: u32, t: u32) {
    // SAFETY: the caller's warp-uniform call.
    let d = unsafe { mma_m16n8k16_f16_f32([a[0], 0, a[1], 0], b, [0.0; 4]) };
    // SAFETY: table g < 8, entry e0 + 2t + 1 < 4096: inside the tables, 8-byte aligned
    // (TABLE_STRIDE and e0 + 2t are even).
    unsafe {
        sts_v2(
            tb + 4 * (g * TABLE_STRIDE + e0 + 2 * t),
            d[0].to_bits(),
            d[1].to_bits(),
        )
    };
}

/// A row's sum over its 8 codes of the slab (its 3 words): 8 table lookups, added in code
/// order.
///
/// # Safety
/// `tb` is the shared-window address of the built tables.
#[inline(always)]
unsafe fn big_row_sum(tb: u32, w: [u32; 3]) -> f32 {
    // SAFETY: code < 4096 < TABLE_STRIDE: inside table 0.
    let mut s = f32::from_bits(unsafe { lds_u32(tb + 4 * slab_code(w, 0)) });
    crate::unroll!(c in [1 2 3 4 5 6 7], {
        let e = slab_code(w, c as u32);
        // SAFETY: code < 4096 < TABLE_STRIDE: inside table c.
        s += f32::from_bits(unsafe { lds_u32(tb + 4 * (c as u32 * TABLE_STRIDE + e)) });
    });
    s
}

/// Adds a thread's sums of `chunk` into the workspace, counts the block's `run` items of it
/// in, and converts the chunk when that completes it (see `crate::big`). Block-uniform.
///
/// # Safety
/// The launcher's contract; every thread of the block calls it; `flag` is the block's flag
/// word in shared memory.
#[inline(always)]
unsafe fn big_flush(
    p: &VqBigParams,
    item: &BigItem,
    acc: &mut [[f32; 4]; BIG_MAX_PASSES as usize],
    run: u32,
    tid: u32,
    flag: u32,
) {
    crate::unroll!(k < PASSES, {
        let r0 = item.row0 + k as u32 * BIG_PASS_ROWS + BIG_GROUP_ROWS * tid;
        crate::unroll!(i in [0 1 2 3], {
            let r = r0 + i as u32;
            if r < item.row_end {
                // SAFETY: r < rows: inside acc.
                unsafe { red_add_f32_global(p.acc.as_mut_ptr().add(r as usize), acc[k][i]) };
            }
            acc[k][i] = 0.0;
        });
    });
    // SAFETY: every thread reaches the barriers; the counter index is below `chunks`.
    unsafe {
        sync_threads();
        if tid == 0 {
            // The barrier orders the block's sums before the fence, the fence before the count.
            fence_gpu();
            let ctr = p.counters.as_mut_ptr().add(item.chunk as usize);
            let done = atomic_add_u32(ctr, run) + run == p.slabs;
            if done {
                // Every slab of the chunk has counted in: no block touches the counter again
                // in this launch.
                *ctr = 0;
            }
            sts_u32(flag, u32::from(done));
        }
        sync_threads();
    }
    // SAFETY: written above (a broadcast read).
    if unsafe { lds_u32(flag) } != 0 {
        // SAFETY: no operands; orders the reads below after the other blocks' sums.
        unsafe { fence_gpu() };
        // At most `PASSES * 4` rows per thread: all loads first, then the stores.
        let mut v = [0f32; PASSES * BIG_GROUP_ROWS as usize];
        crate::unroll!(k < PASSES * BIG_GROUP_ROWS as usize, {
            let r = item.row0 + tid + k as u32 * BIG_THREADS;
            if r < item.row_end {
                // SAFETY: r < rows: inside acc; every slab's sums have arrived.
                v[k] = f32::from_bits(unsafe {
                    ld_relaxed_u32(p.acc.as_mut_ptr().add(r as usize) as *const u32)
                });
            }
        });
        crate::unroll!(k < PASSES * BIG_GROUP_ROWS as usize, {
            let r = item.row0 + tid + k as u32 * BIG_THREADS;
            if r < item.row_end {
                // SAFETY: r < rows: inside acc and y.
                unsafe {
                    *p.y.as_mut_ptr().add(r as usize) = f32_to_f16(v[k]);
                    *p.acc.as_mut_ptr().add(r as usize) = 0.0;
                }
            }
        });
    }
}

/// `body` once for each `k` in `0..R` (`R <= 32`, a constant) as straight-line code, so that
/// the register tiles stay in registers.
macro_rules! reg_tiles {
    ($r:expr, $k:ident, $body:block) => {
        crate::unroll!(h in [0 1], {
            crate::unroll!(q < 16, {
                let $k = 16 * h + q;
                if $k < $r {
                    $body
                }
            });
        });
    };
}

/// The big-codebook table GEMV (see `crate::big`), with `R` tiles per warp in registers.
///
/// # Safety
/// The launcher checked: `codes` holds `slabs * rows_pad * 3 / 2` words laid out by
/// `crate::big::big_codes` (16-byte aligned), `cb` `entries * 8` words by
/// `crate::big::big_codebook` (16-byte aligned), `x` `cols` halves, `y`, `acc` `rows` values
/// and `counters` `chunks`, `acc` and `counters` zero; the geometry fields come from a
/// `BigGeometry` of the matrix, `reg_entries(R) + cached <= entries` with `cached` a multiple
/// of 8; `BIG_THREADS` threads per block and `big_smem_bytes(cached)` bytes of dynamic shared
/// memory. `PDL` only in sm_90 code: then each block lets the next launch start at once and
/// waits for the kernel before it (`griddepcontrol.wait`) after its codebook and first code
/// loads, before it reads `x` or touches `y`, `acc` or `counters`, which that kernel (the
/// previous call or vector) may still use.
#[doc(hidden)]
#[inline(always)]
pub unsafe fn big<const R: usize, const PDL: bool>(p: &VqBigParams) {
    if PDL {
        // SAFETY: sm_90 code (the caller's contract); it only lets the next grid launch.
        unsafe { griddepcontrol_launch_dependents() };
    }
    let tid = thread_idx_x();
    let lane = tid % 32;
    let warp = tid / 32;
    let (g, t) = (lane / 4, lane % 4);
    let (it0, it1) = p.block_items(block_idx_x(), grid_dim_x());
    if it0 >= it1 {
        return;
    }
    let tb = dyn_smem_addr();
    let cbb = tb + BIG_TABLE_BYTES;
    let flag = cbb + p.cached * BIG_ENTRY_BYTES;
    let tiles = p.entries / TILE_ENTRIES;
    let regs = reg_entries(R as u32);
    // The codebook cache: entries regs.. regs + cached in shared memory, 16 bytes per copy,
    // and this warp's first R tiles in registers.
    let mut i = tid;
    while i < p.cached * (BIG_ENTRY_BYTES / 16) {
        // SAFETY: i < cached * 2 and regs + cached <= entries: 16 bytes inside the codebook
        // and the cache area, aligned.
        unsafe {
            cp_async_16(
                cbb + 16 * i,
                p.cb.as_ptr().add((regs * 8 + 4 * i) as usize) as *const U32x4,
            )
        };
        i += BIG_THREADS;
    }
    // SAFETY: no operands.
    unsafe { cp_async_commit() };
    let mut breg = [[0u32; 2]; R];
    reg_tiles!(R, k, {
        let tile = warp + BIG_WARPS * k as u32;
        // SAFETY: tile < 16 R <= tiles: its 8 entries are inside the codebook.
        breg[k] = unsafe { big_cb_global(p, tile * TILE_ENTRIES, g, t) };
    });
    let mut it = it0;
    let mut item = p.item(it);
    // SAFETY (this and every load below): `item` is one of the launch's items.
    let mut cur = unsafe { load_big_codes(p, &item, tid) };
    if PDL {
        // SAFETY: sm_90 code; nothing but the matrix (codes, codebook) was read before.
        unsafe { griddepcontrol_wait() };
    }
    let mut xa = unsafe { big_x_frag(p, item.slab, g, t) };
    let mut acc = [[0f32; 4]; BIG_MAX_PASSES as usize];
    let mut run = 0u32;
    // SAFETY: every thread of the block reaches it.
    unsafe {
        cp_async_wait::<0>();
        sync_threads();
    }
    let cached_end = regs + p.cached;
    loop {
        // The eight tables of the slab: warp w builds tiles w, w + 16, ... of 8 entries.
        reg_tiles!(R, k, {
            let tile = warp + BIG_WARPS * k as u32;
            // SAFETY: warp-uniform; tile < 16 R <= tiles.
            unsafe { big_tile(tb, xa, breg[k], tile * TILE_ENTRIES, g, t) };
        });
        // The other tiles, four at a time: the four entries' loads are in flight together.
        let mut tile = warp + BIG_WARPS * R as u32;
        while tile + 3 * BIG_WARPS < tiles {
            let mut b = [[0u32; 2]; 4];
            crate::unroll!(u in [0 1 2 3], {
                // SAFETY: tile + 16 u < tiles.
                b[u] = unsafe { big_cb(p, cbb, regs, cached_end, tile + BIG_WARPS * u as u32, g, t) };
            });
            crate::unroll!(u in [0 1 2 3], {
                let e0 = (tile + BIG_WARPS * u as u32) * TILE_ENTRIES;
                // SAFETY: warp-uniform; tile + 16 u < tiles.
                unsafe { big_tile(tb, xa, b[u], e0, g, t) };
            });
            tile += 4 * BIG_WARPS;
        }
        while tile < tiles {
            // SAFETY: tile < tiles.
            let b = unsafe { big_cb(p, cbb, regs, cached_end, tile, g, t) };
            // SAFETY: warp-uniform; tile < tiles.
            unsafe { big_tile(tb, xa, b, tile * TILE_ENTRIES, g, t) };
            tile += BIG_WARPS;
        }
        // SAFETY: every thread of the block reaches it.
        unsafe { sync_threads() };
        let next = if it + 1 < it1 {
            Some(p.item(it + 1))
        } else {
            None
        };
        let (nxt, nxa) = match &next {
            Some(n) => unsafe { (load_big_codes(p, n, tid), big_x_frag(p, n.slab, g, t)) },
            None => (cur, xa),
        };
        crate::unroll!(k < PASSES, {
            let r0 = item.row0 + k as u32 * BIG_PASS_ROWS + BIG_GROUP_ROWS * tid;
            if r0 < item.row_end {
                crate::unroll!(i in [0 1 2 3], {
                    let w = [cur.w[k][0][i], cur.w[k][1][i], cur.w[k][2][i]];
                    // SAFETY: the tables are built (barrier above).
                    acc[k][i] += unsafe { big_row_sum(tb, w) };
                });
            }
        });
        run += 1;
        // SAFETY: every thread reaches it: the tables are read before the next build.
        unsafe { sync_threads() };
        let flush = match &next {
            Some(n) => n.chunk != item.chunk,
            None => true,
        };
        if flush {
            // SAFETY: block-uniform; the flag word follows the cached entries.
            unsafe { big_flush(p, &item, &mut acc, run, tid, flag) };
            run = 0;
        }
        match next {
            Some(n) => {
                it += 1;
                item = n;
                cur = nxt;
                xa = nxa;
            }
            None => break,
        }
    }
}

/// Defines the big-codebook table GEMV's entry points and launch bounds, with programmatic
/// dependent launch when `$pdl` is `true` (the sm_90a module of `vq-kernels-sm90`; `false` in
/// this crate's module).
#[doc(hidden)]
#[macro_export]
macro_rules! big_entry_points {
    ($pdl:literal) => {
        $crate::big_entry_points!(@entries $pdl;
            cmv_vq_big = 0;
            cmv_vq_big_r8 = 8;
        );

        // 512 threads, one block per SM (the 128 KiB of tables): up to 128 registers per
        // thread.
        cmv_device::launch_bounds! {
            CMV_MAXNTID_cmv_vq_big = $crate::big::BIG_THREADS;
            CMV_MINNCTAPERSM_cmv_vq_big = 1;
            CMV_MAXNTID_cmv_vq_big_r8 = $crate::big::BIG_THREADS;
            CMV_MINNCTAPERSM_cmv_vq_big_r8 = 1;
        }
    };
    (@entries $pdl:literal; $($name:ident = $r:literal;)*) => {$(
        /// The big-codebook table GEMV with this many tiles per warp in registers; see
        /// `vq_kernels::big`.
        ///
        /// # Safety
        /// As `vq_kernels::big_gpu::big`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: $crate::big::VqBigParams) {
            // SAFETY: forwarded contract.
            unsafe { $crate::big_gpu::big::<$r, $pdl>(&p) }
        }
    )*};
}
