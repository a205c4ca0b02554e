// The big-codebook table GEMV (`crate::big`), NVPTX only. Included from `kernels.rs`.

use cmv_device::{
    U32x4, atomic_add_u32, block_idx_x, cp_async_16, cp_async_commit, cp_async_wait, dyn_smem_addr,
    f32_to_f16, fence_gpu, grid_dim_x, ld_nc_na_u64, ld_nc_na_v4, ld_nc_u16, ld_nc_u64,
    ld_relaxed_u32, lds_u32, lds_v2, mma_m16n8k16_f16_f32, red_add_f32_global, sts_u32,
    sync_threads, thread_idx_x,
};

use crate::big::{
    BIG_ENTRY_BYTES, BIG_GROUP_ROWS, BIG_MAX_PASSES, BIG_PASS_ROWS, BIG_TABLE_BYTES, BIG_THREADS,
    BigItem, TABLE_STRIDE, VqBigParams, code_slot, positions_per_slab, slab_code,
};

/// A thread's codes of one item: per pass, the lo words of its 4 rows and their hi halves.
#[derive(Clone, Copy)]
struct BigCodes {
    lo: [[u32; 4]; BIG_MAX_PASSES as usize],
    hi: [u64; BIG_MAX_PASSES as usize],
}

/// Loads thread `tid`'s codes of `item` (zeros past the item's rows).
///
/// # Safety
/// The launcher's contract (`VqBigParams`); `item` is one of the launch's items.
#[inline(always)]
unsafe fn load_big_codes(p: &VqBigParams, item: &BigItem, tid: u32) -> BigCodes {
    let mut c = BigCodes {
        lo: [[0; 4]; BIG_MAX_PASSES as usize],
        hi: [0; BIG_MAX_PASSES as usize],
    };
    let plane = p.slabs as usize * p.rows_pad as usize;
    crate::unroll!(k in [0 1 2 3], {
        let r = item.row0 + k as u32 * BIG_PASS_ROWS + BIG_GROUP_ROWS * tid;
        if r < item.row_end {
            let at = item.slab as usize * p.rows_pad as usize + r as usize;
            // SAFETY: r < rows, r % 4 == 0, rows_pad a multiple of 4 >= rows, slab < slabs:
            // 4 lo words (16-byte aligned: `at` is a multiple of 4) and 4 hi halves (8-byte
            // aligned) inside the planes.
            unsafe {
                c.lo[k] = ld_nc_na_v4(p.codes.as_ptr().add(at) as *const U32x4).0;
                c.hi[k] = ld_nc_na_u64(
                    (p.codes.as_ptr().add(plane) as *const u16).add(at) as *const u64,
                );
            }
        }
    });
    c
}

/// The B fragment of lane `(g, t)` for `slab`: for `g` = code `c` < 4, the inputs `2t, 2t + 1`
/// of the code's position in its stage's half of K (`b[s]`), zeros elsewhere.
///
/// # Safety
/// The launcher's contract.
#[inline(always)]
unsafe fn big_b_frag(p: &VqBigParams, slab: u32, g: u32, t: u32) -> [u32; 2] {
    let mut b = [0u32; 2];
    if g < 4 {
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
            b[0] = w;
        } else {
            b[1] = w;
        }
    }
    b
}

/// Rows `e` and `e + 8`'s A words of lane `t`: from shared memory for cached entries, else
/// from global memory (through L1).
///
/// # Safety
/// `e + 8 < entries`; the cached entries are in shared memory at `cbb`.
#[inline(always)]
unsafe fn big_a_frag(p: &VqBigParams, cbb: u32, e: u32, t: u32, cached: bool) -> [u32; 4] {
    let (ra, rb) = if cached {
        // SAFETY: e + 8 < cached: inside the cached entries, 8-byte aligned.
        unsafe {
            (
                lds_v2(cbb + e * BIG_ENTRY_BYTES + 8 * t),
                lds_v2(cbb + (e + 8) * BIG_ENTRY_BYTES + 8 * t),
            )
        }
    } else {
        let at = |e: u32| (e * 8 + 2 * t) as usize;
        // SAFETY: e + 8 < entries: inside the codebook (entries * 8 words), 8-byte aligned.
        let (x, y) = unsafe {
            (
                ld_nc_u64(p.cb.as_ptr().add(at(e)) as *const u64),
                ld_nc_u64(p.cb.as_ptr().add(at(e + 8)) as *const u64),
            )
        };
        ([x as u32, (x >> 32) as u32], [y as u32, (y >> 32) as u32])
    };
    [ra[0], rb[0], ra[1], rb[1]]
}

/// A row's sum over its 4 codes of the slab: 4 table lookups.
///
/// # Safety
/// `tb` is the shared-window address of the built tables.
#[inline(always)]
unsafe fn big_row_sum(tb: u32, w: u32, h: u32) -> f32 {
    let mut s = 0f32;
    crate::unroll!(c in [0 1 2 3], {
        let e = slab_code(w, h, c as u32);
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
    crate::unroll!(k in [0 1 2 3], {
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
        let mut r = item.row0 + tid;
        while r < item.row_end {
            // SAFETY: r < rows: inside acc and y; every slab's sums have arrived.
            unsafe {
                let a = p.acc.as_mut_ptr().add(r as usize);
                let v = f32::from_bits(ld_relaxed_u32(a as *const u32));
                *p.y.as_mut_ptr().add(r as usize) = f32_to_f16(v);
                *a = 0.0;
            }
            r += BIG_THREADS;
        }
    }
}

/// The big-codebook table GEMV (see `crate::big`).
///
/// # Safety
/// The launcher checked: `codes` holds `slabs * rows_pad * 3 / 2` words laid out by
/// `crate::big::big_codes` (16-byte aligned), `cb` `entries * 8` words by
/// `crate::big::big_codebook` (16-byte aligned), `x` `cols` halves, `y`, `acc` `rows` values
/// and `counters` `chunks`, `acc` and `counters` zero; the geometry fields come from a
/// `BigGeometry` of the matrix, `cached` a multiple of 16 up to `entries`; `BIG_THREADS` threads
/// per block and `big_smem_bytes(cached)` bytes of dynamic shared memory.
#[inline(always)]
unsafe fn big(p: &VqBigParams) {
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
    // The codebook cache: the first `cached` entries, 16 bytes per copy.
    let mut i = tid;
    while i < p.cached * (BIG_ENTRY_BYTES / 16) {
        // SAFETY: i < cached * 2: 16 bytes inside the codebook and the cache area, aligned.
        unsafe {
            cp_async_16(
                cbb + 16 * i,
                p.cb.as_ptr().add(4 * i as usize) as *const U32x4,
            )
        };
        i += BIG_THREADS;
    }
    // SAFETY: no operands.
    unsafe { cp_async_commit() };
    let mut it = it0;
    let mut item = p.item(it);
    // SAFETY (this and every load below): `item` is one of the launch's items.
    let mut cur = unsafe { load_big_codes(p, &item, tid) };
    let mut acc = [[0f32; 4]; BIG_MAX_PASSES as usize];
    let mut run = 0u32;
    // SAFETY: every thread of the block reaches it.
    unsafe {
        cp_async_wait::<0>();
        sync_threads();
    }
    let tiles = p.entries / 16;
    loop {
        // The four tables of the slab: warp w builds tiles w, w + 8, ... of 16 entries.
        let bf = unsafe { big_b_frag(p, item.slab, g, t) };
        let mut tile = warp;
        while tile < tiles {
            let e = tile * 16 + g;
            // SAFETY: e + 8 < entries; the cached entries were copied above.
            let a = unsafe { big_a_frag(p, cbb, e, t, tile * 16 < p.cached) };
            // SAFETY: the whole warp runs the loop with the same `tile`.
            let d = unsafe { mma_m16n8k16_f16_f32(a, bf, [0.0; 4]) };
            if t < 2 {
                let c = 2 * t;
                // SAFETY: codes c, c + 1 < 4 and entries e, e + 8 < 4096: inside the tables.
                unsafe {
                    sts_u32(tb + 4 * (c * TABLE_STRIDE + e), d[0].to_bits());
                    sts_u32(tb + 4 * ((c + 1) * TABLE_STRIDE + e), d[1].to_bits());
                    sts_u32(tb + 4 * (c * TABLE_STRIDE + e + 8), d[2].to_bits());
                    sts_u32(tb + 4 * ((c + 1) * TABLE_STRIDE + e + 8), d[3].to_bits());
                }
            }
            tile += BIG_THREADS / 32;
        }
        // SAFETY: every thread of the block reaches it.
        unsafe { sync_threads() };
        let next = if it + 1 < it1 {
            Some(p.item(it + 1))
        } else {
            None
        };
        let nxt = match &next {
            Some(n) => unsafe { load_big_codes(p, n, tid) },
            None => cur,
        };
        crate::unroll!(k in [0 1 2 3], {
            let r0 = item.row0 + k as u32 * BIG_PASS_ROWS + BIG_GROUP_ROWS * tid;
            if r0 < item.row_end {
                crate::unroll!(i in [0 1 2 3], {
                    let h = (cur.hi[k] >> (16 * i)) as u32 & 0xffff;
                    // SAFETY: the tables are built (barrier above).
                    acc[k][i] += unsafe { big_row_sum(tb, cur.lo[k][i], h) };
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
            }
            None => break,
        }
    }
}

/// The big-codebook table GEMV; see `crate::big`.
///
/// # Safety
/// As `big`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn cmv_vq_big(p: VqBigParams) {
    // SAFETY: forwarded contract.
    unsafe { big(&p) }
}
