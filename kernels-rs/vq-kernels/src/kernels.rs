//! The GEMV kernel (NVPTX only); see the crate documentation.

use cmv_device::{
    block_idx_x, f16_to_f32, f32_to_f16, lane_id, ld_nc_u16, ld_nc_u32, shfl_xor, warp_id,
};

use crate::{GEMV_WARPS, VqGemvParams, code_from_pair};

/// One warp per row (see the crate docs).
///
/// # Safety
/// The launcher checked: `codes` holds `rows * residuals * words` words, `codebooks`
/// `tiles_r * tiles_c * residuals * 2^bits * vec` values, `x` `batch * cols` halves, `y`
/// `batch * rows`; `1 <= batch <= B`; the geometry fields are those of a validated matrix;
/// `GEMV_WARPS` warps per block, `ceil(rows / GEMV_WARPS)` blocks.
#[inline(always)]
unsafe fn gemv<const B: usize>(p: &VqGemvParams) {
    let lane = lane_id();
    let row = block_idx_x() * GEMV_WARPS + warp_id();
    if row >= p.rows {
        return;
    }
    let (v, bits, words) = (p.vec as usize, p.bits, p.words as usize);
    let entries = 1usize << bits;
    let tile_r = (row / p.tile_rows) * p.tiles_c;
    let mut acc = [0f32; B];
    for s in 0..p.residuals as usize {
        let base = (row as usize * p.residuals as usize + s) * words;
        let mut k = lane as usize;
        while k < p.vecs as usize {
            let w = k * bits as usize / 32;
            // SAFETY: w < words (the stream holds vecs * bits bits): inside the row's codes.
            let lo = unsafe { ld_nc_u32(p.codes.as_ptr().add(base + w)) };
            let hi = if w + 1 < words {
                // SAFETY: as above.
                unsafe { ld_nc_u32(p.codes.as_ptr().add(base + w + 1)) }
            } else {
                0
            };
            let code = code_from_pair(lo, hi, bits, k) as usize;
            let t = (tile_r + k as u32 / p.tile_vecs) as usize;
            let entry = ((t * p.residuals as usize + s) * entries + code) * v;
            for j in 0..v {
                let col = k * v + j;
                if col < p.cols as usize {
                    // SAFETY: t < tiles, code < 2^bits, j < vec: inside the codebooks.
                    let wv = f16_to_f32(unsafe { ld_nc_u16(p.codebooks.as_ptr().add(entry + j)) });
                    unroll!(b < B, {
                        if (b as u32) < p.batch {
                            // SAFETY: b < batch, col < cols: inside x.
                            let xv = f16_to_f32(unsafe {
                                ld_nc_u16(p.x.as_ptr().add(b * p.cols as usize + col))
                            });
                            acc[b] += wv * xv;
                        }
                    });
                }
            }
            k += 32;
        }
    }
    unroll!(b < B, {
        for m in [16, 8, 4, 2, 1] {
            // SAFETY: the whole warp is here (the early return is warp-uniform).
            acc[b] += f32::from_bits(unsafe { shfl_xor(acc[b].to_bits(), m) });
        }
        if lane == 0 && (b as u32) < p.batch {
            // SAFETY: b < batch, row < rows: inside y.
            unsafe {
                *p.y.as_mut_ptr().add(b * p.rows as usize + row as usize) = f32_to_f16(acc[b])
            };
        }
    });
}

macro_rules! entries {
    ($($name:ident = $b:literal;)*) => {$(
        /// VQ GEMV for up to this many vectors; see the crate docs.
        ///
        /// # Safety
        /// As `gemv`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: VqGemvParams) {
            // SAFETY: the launcher's checks are this kernel's contract.
            unsafe { gemv::<$b>(&p) }
        }
    )*};
}

entries! {
    cmv_vq_gemv_b1 = 1;
    cmv_vq_gemv_b2 = 2;
    cmv_vq_gemv_b4 = 4;
    cmv_vq_gemv_b8 = 8;
    cmv_vq_gemv_b16 = 16;
}

// ---------------------------------------------------------------------------------------------
// The lookup-table GEMV (`crate::lut`)

use cmv_device::{
    atomic_add_u32, dyn_smem_addr, fence_gpu, grid_dim_x, ld_nc_na_v4, ld_relaxed_u32, lds_u32,
    lds_v4, red_add_f32_global, sts_u32, sync_threads, thread_idx_x,
};

use crate::lut::{Item, LUT_ENTRIES, LUT_PASS_ROWS, LUT_THREADS, TABLE_BYTES, VqLutParams};

/// The raw fp16 bits of one thread's part of an item's inputs and codebook: `x[k]` is input
/// `(32 slab + lane) V + k` (0 past the columns), `cb[k]` value `k` of entry `tid`.
#[derive(Clone, Copy)]
struct Staged {
    x: [u32; 16],
    cb: [u32; 16],
}

/// Loads thread `tid`'s inputs and codebook entry of `item` (see [`Staged`]).
///
/// # Safety
/// The launcher's contract (`VqLutParams`); `item` is one of the launch's items.
#[inline(always)]
unsafe fn load_staged<const V: usize>(p: &VqLutParams, item: &Item, tid: u32) -> Staged {
    let lane = tid % 32;
    let mut s = Staged {
        x: [0; 16],
        cb: [0; 16],
    };
    let col0 = (item.slab as usize * 32 + lane as usize) * V;
    let entry = (item.tile as usize * LUT_ENTRIES + tid as usize) * V;
    unroll!(k < V, {
        if col0 + k < p.cols as usize {
            // SAFETY: col0 + k < cols: inside x.
            s.x[k] = u32::from(unsafe { ld_nc_u16(p.x.as_ptr().add(col0 + k)) });
        }
        // SAFETY: tile < tiles and tid < 256: inside the codebooks.
        s.cb[k] = u32::from(unsafe { ld_nc_u16(p.codebooks.as_ptr().add(entry + k)) });
    });
    s
}

/// Loads the 32 code bytes of the item's slab of row `item.row0 + 256 k + tid` (zeros past
/// the item's rows).
///
/// # Safety
/// The launcher's contract; `item` is one of the launch's items.
#[inline(always)]
unsafe fn load_codes(p: &VqLutParams, item: &Item, k: u32, tid: u32) -> [u32; 8] {
    let r = item.row0 + k * LUT_PASS_ROWS + tid;
    if r >= item.row_end {
        return [0; 8];
    }
    let at = (item.slab as usize * p.rows_pad as usize + r as usize) * 8;
    // SAFETY: r < rows <= rows_pad and slab < slabs: 32 bytes inside the codes, 16-byte
    // aligned (the buffer is, and `at` is a multiple of 8 words).
    let (a, b) = unsafe {
        let base = p.codes.as_ptr().add(at) as *const cmv_device::U32x4;
        (ld_nc_na_v4(base), ld_nc_na_v4(base.add(1)))
    };
    [
        a.0[0], a.0[1], a.0[2], a.0[3], b.0[0], b.0[1], b.0[2], b.0[3],
    ]
}

/// Table lookup of code byte `Q` (byte `Q % 4` of `w`): the table word at byte address
/// `tb + (e << 8 | 4 lane) + 4 Q` (`crate::lut::table_word`), the address one `prmt` of the
/// code word and the lane's `4 lane` plus a constant, in one asm block so that the constant
/// stays an immediate of the load.
macro_rules! lookup {
    ($tb:expr, $lane4:expr, $codes:expr, $base:expr, $a:expr, $($q:literal)*) => {$({
        const Q: u32 = $q;
        let r: u32;
        // SAFETY: `e << 8 | 4 lane` + 4 Q < 256 * 64 * 4 = TABLE_BYTES: inside the table (the
        // caller's `tb`).
        unsafe {
            core::arch::asm!(
                "{{ .reg .b32 t; prmt.b32 t, {w}, {l}, {sel}; add.u32 t, t, {tb}; ld.shared.u32 {r}, [t+{off}]; }}",
                w = in(reg32) $codes[$base + (Q / 4) as usize],
                l = in(reg32) $lane4,
                tb = in(reg32) $tb,
                sel = const 0x5504 | ((Q % 4) << 4),
                off = const 4 * Q,
                r = out(reg32) r,
                options(readonly, nostack)
            );
        }
        $a[(Q % 4) as usize] += f32::from_bits(r);
    })*};
}

/// One row's sum over its 32 code bytes (words `BASE..BASE + 8` of `codes`): byte `q`
/// (entry `e`) reads table word `e * 64 + lane + q` (`crate::lut::table_word`), four partial
/// sums (`a[q % 4]`).
///
/// # Safety
/// `tb` is the shared-window address of a built table.
#[inline(always)]
unsafe fn row_sum<const BASE: usize>(tb: u32, lane4: u32, codes: &[u32; 8]) -> f32 {
    let mut a = [0f32; 4];
    lookup!(tb, lane4, codes, BASE, a, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);
    (a[0] + a[1]) + (a[2] + a[3])
}

/// The lookup-table GEMV for vectors of `V` (see `crate::lut`).
///
/// # Safety
/// The launcher checked: `codes` holds `slabs * rows_pad * 8` words laid out by
/// `crate::lut::lut_codes` (16-byte aligned), `codebooks` `tiles * 256 * V` values, `x` `cols`
/// halves, `y`, `acc` `rows` values and `counters` `groups`, `acc` and `counters` zero; the
/// geometry fields come from a `LutGeometry` of the matrix; `LUT_THREADS` threads per block
/// and `lut_smem_bytes(V)` bytes of dynamic shared memory.
#[inline(always)]
unsafe fn lut<const V: usize>(p: &VqLutParams) {
    let tid = thread_idx_x();
    let lane = tid % 32;
    let warp = tid / 32;
    let grid = grid_dim_x();
    let mut it = block_idx_x();
    if it >= p.items {
        return;
    }
    let tb = dyn_smem_addr();
    let cbb = tb + TABLE_BYTES;
    let passes = p.passes();
    let mut item = p.item(it);
    // SAFETY (this and every load below): `item` is one of the launch's items.
    let mut staged = unsafe { load_staged::<V>(p, &item, tid) };
    let mut cur = unsafe { load_codes(p, &item, 0, tid) };
    loop {
        // Stage the codebook as fp32: entry `tid`, V words at cbb + 4 V tid.
        unroll!(k < V, {
            // SAFETY: inside the codebook area (256 V words after the table).
            unsafe {
                sts_u32(
                    cbb + 4 * (tid * V as u32 + k as u32),
                    f16_to_f32(staged.cb[k] as u16).to_bits(),
                )
            };
        });
        let mut xv = [0f32; 16];
        unroll!(k < V, {
            xv[k] = f16_to_f32(staged.x[k] as u16);
        });
        // SAFETY: every thread of the block reaches it.
        unsafe { sync_threads() };
        // The table: warp w builds entries 32 w .. 32 w + 32 at this lane's position.
        for i in 0..32u32 {
            let e = warp * 32 + i;
            let mut c = [0f32; 16];
            if V % 4 == 0 {
                unroll!(h < 2, {
                    if 4 * h < V {
                        // SAFETY: inside the codebook area (a broadcast read).
                        let q = unsafe { lds_v4(cbb + 4 * (e * V as u32 + 4 * h as u32)) };
                        unroll!(j < 4, {
                            c[4 * h + j] = f32::from_bits(q.0[j]);
                        });
                    }
                });
            } else {
                unroll!(j < V, {
                    // SAFETY: inside the codebook area.
                    c[j] = f32::from_bits(unsafe { lds_u32(cbb + 4 * (e * V as u32 + j as u32)) });
                });
            }
            let mut t = 0f32;
            unroll!(j < V, {
                t = cmv_device::fma_f32(c[j], xv[j], t);
            });
            // SAFETY: e < 256, lane < 32: inside the table.
            unsafe {
                sts_u32(tb + 4 * (e * 64 + lane), t.to_bits());
                sts_u32(tb + 4 * (e * 64 + 32 + lane), t.to_bits());
            }
        }
        // SAFETY: every thread of the block reaches it.
        unsafe { sync_threads() };
        let next_it = it + grid;
        let next = if next_it < p.items {
            Some(p.item(next_it))
        } else {
            None
        };
        if let Some(n) = &next {
            staged = unsafe { load_staged::<V>(p, n, tid) };
        }
        for k in 0..passes {
            let nxt = if k + 1 < passes {
                unsafe { load_codes(p, &item, k + 1, tid) }
            } else if let Some(n) = &next {
                unsafe { load_codes(p, n, 0, tid) }
            } else {
                [0; 8]
            };
            let r = item.row0 + k * LUT_PASS_ROWS + tid;
            if r < item.row_end {
                // SAFETY: the table is built (barrier above).
                let s = unsafe { row_sum::<0>(tb, 4 * lane, &cur) };
                // SAFETY: r < rows: inside acc.
                unsafe { red_add_f32_global(p.acc.as_mut_ptr().add(r as usize), s) };
            }
            cur = nxt;
        }
        match next {
            Some(n) => {
                it = next_it;
                item = n;
            }
            None => break,
        }
    }
    // Count this block's items in, each into its chunk's counter; a chunk whose last slab
    // this block counts is converted to fp16 here, its sums and counter zeroed for the next
    // launch. Once per block, not per item: the fence waits for the block's sums to land.
    // SAFETY: every thread of the block reaches every barrier (the loops are block-uniform);
    // the table is no longer read after the first barrier, so it holds the flags.
    unsafe { sync_threads() };
    let first = block_idx_x();
    let mine = (p.items - first).div_ceil(grid);
    let mut base = 0;
    while base < mine {
        let j = base + tid;
        let mut flag = u32::MAX;
        if j < mine {
            let group = (first + j * grid) / p.slabs;
            // SAFETY: group < groups: the chunk's counter. The fence publishes this block's
            // sums (ordered before it by the barrier) before the count.
            unsafe {
                fence_gpu();
                if atomic_add_u32(p.counters.as_mut_ptr().add(group as usize), 1) == p.slabs - 1 {
                    flag = group;
                }
            }
        }
        // SAFETY: inside the table area; every thread reaches the barrier.
        unsafe {
            sts_u32(tb + 4 * tid, flag);
            sync_threads();
        }
        let n = (mine - base).min(LUT_THREADS);
        for slot in 0..n {
            // SAFETY: written above (a broadcast read).
            let group = unsafe { lds_u32(tb + 4 * slot) };
            if group == u32::MAX {
                continue;
            }
            let g = p.item(group * p.slabs);
            if tid == 0 {
                // SAFETY: the chunk's counter; every slab has counted in, no block touches it
                // again in this launch.
                unsafe { *p.counters.as_mut_ptr().add(group as usize) = 0 };
            }
            // SAFETY: no operands; orders the reads below after the other blocks' sums.
            unsafe { fence_gpu() };
            let mut r = g.row0 + tid;
            while r < g.row_end {
                // SAFETY: r < rows: inside acc and y; every slab's sums have arrived.
                unsafe {
                    let a = p.acc.as_mut_ptr().add(r as usize);
                    let v = f32::from_bits(ld_relaxed_u32(a as *const u32));
                    *p.y.as_mut_ptr().add(r as usize) = f32_to_f16(v);
                    *a = 0.0;
                }
                r += LUT_THREADS;
            }
        }
        // SAFETY: every thread reaches it; the flags are read before the next round writes.
        unsafe { sync_threads() };
        base += LUT_THREADS;
    }
}

macro_rules! lut_entries {
    ($($name:ident = $v:literal;)*) => {$(
        /// The lookup-table GEMV for this vector size; see `crate::lut`.
        ///
        /// # Safety
        /// As `lut`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: VqLutParams) {
            // SAFETY: the launcher's checks are this kernel's contract.
            unsafe { lut::<$v>(&p) }
        }
    )*};
}

lut_entries! {
    cmv_vq_lut_v2 = 2;
    cmv_vq_lut_v4 = 4;
    cmv_vq_lut_v8 = 8;
}

// ---------------------------------------------------------------------------------------------
// The tensor-core GEMV (`crate::mma`)

crate::mma_entry_points!(false);

// ---------------------------------------------------------------------------------------------
// The tensor-core GEMM (`crate::gemm`)

#[path = "gemm_gpu.rs"]
mod gemm_gpu;

// ---------------------------------------------------------------------------------------------
// The big-codebook table GEMV (`crate::big`)

crate::big_entry_points!(false);

// ---------------------------------------------------------------------------------------------
// The big-codebook tensor-core GEMV (`crate::bigmma`)

crate::big_mma_entry_points!(false);

// ---------------------------------------------------------------------------------------------
// The input permutation of the Hopper GEMM (`crate::gemm90::permuted_col`)

/// `xp` = `x` with the columns of each group of 16 permuted (K group 0's eight, then K group
/// 1's: word order 0, 2, 4, 6 | 1, 3, 5, 7), zeros past `cols`; one thread per token and group.
///
/// # Safety
/// The launcher checked: `x` holds `tokens * cols` halves, `xp` `tokens * padded_cols(cols)`,
/// both 16-byte aligned, `cols % 8 == 0`; at least `tokens * padded_cols(cols) / 16` threads.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn cmv_vq_permute_x(p: crate::gemm90::PermuteParams) {
    use cmv_device::{U32x4, block_dim_x, block_idx_x, ld_nc_v4, thread_idx_x};
    let groups = crate::gemm90::padded_cols(p.cols) / 16;
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i >= p.tokens * groups {
        return;
    }
    let (n, g) = (i / groups, i % groups);
    let col = 16 * g as usize;
    let cols = p.cols as usize;
    let at = n as usize * cols + col;
    let mut w = [0u32; 8];
    for h in 0..2 {
        if col + 8 * h < cols {
            // SAFETY: n < tokens, col + 8 h + 8 <= cols (cols % 8 == 0): 16 bytes inside x,
            // 16-byte aligned.
            let v = unsafe { ld_nc_v4(p.x.as_ptr().add(at + 8 * h) as *const U32x4).0 };
            w[4 * h..4 * h + 4].copy_from_slice(&v);
        }
    }
    let out = n as usize * (16 * groups as usize) + col;
    // SAFETY: n < tokens, g < groups: 32 bytes inside xp, 16-byte aligned.
    unsafe {
        let o = p.xp.as_mut_ptr().add(out) as *mut U32x4;
        *o = U32x4([w[0], w[2], w[4], w[6]]);
        *o.add(1) = U32x4([w[1], w[3], w[5], w[7]]);
    }
}
