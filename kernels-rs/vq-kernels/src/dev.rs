//! Device helpers shared by the tensor-core kernels (`crate::mma`, `crate::gemm`,
//! `crate::bigmma`) and by the Hopper crate `vq-kernels-sm90`: the table lookup that lands a
//! lane's MMA registers, the load and replicated store of a codebook entry into the tables
//! (`crate::mma`'s layout), the inputs' 8-byte fragment loads, and the split finish (the
//! block-wide count-in and the completing block's fp16 conversion).
//!
//! The tensor-core GEMV (`mma_gpu.rs`) still has its own copies of the entry store and the
//! per-vector-size lookup: moved onto these helpers, its PTX changed throughout and ptxas spilled
//! in four more of its kernels, so it keeps the code it was measured with. The same holds for
//! its input loads and split finish: on [`load_x4`], [`count_in`] and [`convert_rows`] (which
//! the big-codebook tensor-core GEMV uses) its PTX changed and three more of its kernels
//! spilled.

use cmv_device::{
    DevPtr, DevPtrMut, U32x4, atomic_add_u32, cp_async_16_zfill, f32_to_f16, fence_gpu, ld_nc_u16,
    ld_nc_u32, ld_nc_u64, ld_nc_v4, ld_relaxed_u32, lds_u32, sts_u32, sts_v4, sync_threads,
};

use crate::gemm::{GEMM_ROW_GROUPS, VqGemmParams, code_stage_offset};
use crate::mma::{MMA_ENTRIES, entry_offset, lane_code_bytes, lookup_selector};

/// Looks up code byte `k` of `w` for this lane: `N` words at `tb + prmt(w, lo, sel(k))`
/// (`crate::mma::entry_offset` of the code plus `lo`, the lane's copy in table `P`). One asm
/// block, so that the table address folds into the load.
///
/// # Safety
/// `tb` is the tables in shared memory (`MMA_TABLES_BYTES` bytes); `lo < 256`.
#[inline(always)]
pub unsafe fn lookup<const N: usize>(w: u32, k: usize, lo: u32, tb: u32) -> [u32; 4] {
    let sel = lookup_selector(k as u32);
    macro_rules! go {
        ($ld:literal, $($o:ident)*) => {{
            $(let $o: u32;)*
            // SAFETY: the caller's tables; the address is below 64 KiB.
            unsafe {
                core::arch::asm!(
                    concat!("{{ .reg .b32 t; prmt.b32 t, {w}, {lo}, {sel}; add.u32 t, t, {tb}; ",
                            $ld, " }}"),
                    w = in(reg32) w, lo = in(reg32) lo, sel = in(reg32) sel, tb = in(reg32) tb,
                    $($o = out(reg32) $o,)*
                    options(readonly, nostack)
                );
            }
            [$($o,)*]
        }};
    }
    match N {
        1 => {
            let [a] = go!("ld.shared.u32 {a}, [t];", a);
            [a, 0, 0, 0]
        }
        2 => {
            let [a, b] = go!("ld.shared.v2.u32 {{{a}, {b}}}, [t];", a b);
            [a, b, 0, 0]
        }
        _ => go!("ld.shared.v4.u32 {{{a}, {b}, {c}, {d}}}, [t];", a b c d),
    }
}

/// Entry `tid` of codebook `tile` (`2 V` bytes).
///
/// # Safety
/// `codebooks` holds the matrix's codebooks (16-byte aligned, 256 entries of `V` values per
/// tile); `tile` a tile of the matrix; `tid < 256`.
#[inline(always)]
pub unsafe fn load_entry<const V: usize>(codebooks: DevPtr<u16>, tile: u32, tid: u32) -> [u32; 4] {
    let at = (tile as usize * MMA_ENTRIES + tid as usize) * V;
    // SAFETY: tile < tiles, tid < 256: entry tid of the codebook, aligned to 2 V bytes (the
    // codebooks are 16-byte aligned).
    unsafe {
        let e = codebooks.as_ptr().add(at);
        match V {
            2 => [ld_nc_u32(e as *const u32), 0, 0, 0],
            4 => {
                let w = ld_nc_u64(e as *const u64);
                [w as u32, (w >> 32) as u32, 0, 0]
            }
            _ => ld_nc_v4(e as *const U32x4).0,
        }
    }
}

/// Writes entry `tid` into table `P` (8 rotated stores of 16 bytes, as the GEMV does).
///
/// # Safety
/// `base` is the dynamic shared memory; no thread reads table `P` until the next barrier.
#[inline(always)]
pub unsafe fn write_entry<const V: usize, const P: u32>(base: u32, c: [u32; 4], tid: u32) {
    let val = match V {
        2 => U32x4([c[0]; 4]),
        4 => U32x4([c[0], c[1], c[0], c[1]]),
        _ => U32x4(c),
    };
    let tb = base + entry_offset(tid) + 128 * P;
    for k in 0..8 {
        // SAFETY: inside entry tid of table P.
        unsafe { sts_v4(tb + ((16 * (k as u32 + tid)) & 127), val) };
    }
}

/// Copies (`cp.async`, 16-byte chunks, no commit) the codes of slab `slab` of the 16 row groups
/// of 256-row block `rb` into the code stage at `stage` ([`crate::gemm::code_stage_offset`]);
/// thread `tid` of `T` takes every `T`-th chunk.
///
/// # Safety
/// `p` is a GEMM launch's parameters under its launcher's contract; `rb < row_blocks`,
/// `slab < slabs`; `stage` is `code_stage_bytes(V)` bytes of shared memory, 16-byte aligned,
/// that nothing reads until the copies have been waited for.
#[inline(always)]
pub unsafe fn copy_codes<const V: usize, const T: u32>(
    p: &VqGemmParams,
    stage: u32,
    rb: u32,
    slab: u32,
    tid: u32,
) {
    let lcb = lane_code_bytes(V) as u32;
    let chunks = GEMM_ROW_GROUPS * 32 * lcb / 16;
    let per_group = 32 * lcb / 16;
    let mut c = tid;
    while c < chunks {
        let (rg, q) = (c / per_group, c % per_group);
        let grg = (rb * GEMM_ROW_GROUPS + rg) as usize;
        let at = (grg * p.slabs as usize + slab as usize) * 32 * lcb as usize + 16 * q as usize;
        // SAFETY: grg < 16 * row_blocks <= code_groups, slab < slabs: inside the codes, 16-byte
        // aligned; the destination is inside the stage.
        unsafe {
            cp_async_16_zfill(
                stage + code_stage_offset(V, rg, 0) + 16 * q,
                (p.codes.as_ptr() as *const u8).add(at) as *const U32x4,
                16,
            )
        };
        c += T;
    }
}

/// The two MMA registers of weight row `g` (`h = 0`) or `g + 8` (`h = 1`) at K step `s`: the
/// lane's four consecutive columns ([`crate::mma::frag_col`]), looked up from the lane's code
/// words `w` (rows `g` then `g + 8`, [`crate::mma::mma_codes`]'s order) in the table at
/// `base`, copy offset `lo`: one 8-byte entry (`V = 4`), two 4-byte entries (`V = 2`), or half
/// of a 16-byte entry (`V = 8`, looked up at even steps into `e8` and reused at odd ones).
///
/// # Safety
/// The table at `base` holds the slab's codebook (after the barrier); `lo < 256`.
#[inline(always)]
pub unsafe fn frag_regs<const V: usize>(
    w: &[u32; 8],
    s: usize,
    h: usize,
    lo: u32,
    base: u32,
    e8: &mut [u32; 4],
) -> [u32; 2] {
    // SAFETY (every lookup): the caller's table; lo < 256.
    match V {
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
                *e8 = unsafe { lookup::<4>(w[h], s / 2, lo, base) };
            }
            let o = 2 * (s % 2);
            [e8[o], e8[o + 1]]
        }
    }
}

/// Counts `count` into `*counter` for the whole block and says whether that reached `target`
/// (the block that completes a tile or row block, which then reads every block's sums). The
/// barrier orders every thread's sums before thread 0's fence, which publishes them (fences
/// are cumulative) before the count; thread 0's second fence orders the count before the
/// reads of the block that completes it (the barrier passes that on). One fence per block,
/// not per thread: a thread's fence waits for all its loads in flight.
///
/// # Safety
/// Every thread of the block calls it (two barriers); `counter` is a valid global counter;
/// `flag` is 4 bytes of shared memory no one else uses.
#[inline(always)]
pub unsafe fn count_in(counter: *mut u32, count: u32, target: u32, flag: u32, tid: u32) -> bool {
    // SAFETY: every thread reaches both barriers; the caller's counter and flag.
    unsafe {
        sync_threads();
        if tid == 0 {
            fence_gpu();
            let old = atomic_add_u32(counter, count);
            let last = old + count == target;
            if last {
                fence_gpu();
            }
            sts_u32(flag, u32::from(last));
        }
        sync_threads();
        lds_u32(flag) != 0
    }
}

/// Four inputs of vector `n` from column `col` of `x` (`batch x cols` fp16 values; 0 past the
/// batch and the columns), as two words: one 8-byte load where `cols % 4 == 0` and the four
/// are inside the row, else four 2-byte loads.
///
/// # Safety
/// `x` holds `batch * cols` halves, 8-byte aligned.
#[inline(always)]
pub unsafe fn load_x4(x: DevPtr<u16>, cols: u32, batch: u32, n: u32, col: usize) -> [u32; 2] {
    let mut v = [0u32; 2];
    let cols = cols as usize;
    if n < batch {
        let at = n as usize * cols + col;
        if cols.is_multiple_of(4) && col + 4 <= cols {
            // SAFETY: n < batch, col + 4 <= cols: inside x; 8-byte aligned (x is, and at is
            // a multiple of 4 halves).
            let w = unsafe { ld_nc_u64(x.as_ptr().add(at) as *const u64) };
            v = [w as u32, (w >> 32) as u32];
        } else {
            for i in 0..4 {
                if col + i < cols {
                    // SAFETY: n < batch, col + i < cols: inside x.
                    let h = u32::from(unsafe { ld_nc_u16(x.as_ptr().add(at + i)) });
                    v[i / 2] |= h << (16 * (i % 2));
                }
            }
        }
    }
    v
}

/// The conversion by the block that completed row block `rb` (`block_rows` rows from
/// `rb * block_rows`): every vector's fp32 sums of its rows to fp16 in `y`, zeroing the sums
/// for the next launch; `threads` threads, eight sums per thread at a time with all loads
/// before the stores (one L2 round trip per eight, not per sum).
///
/// # Safety
/// Every slab's sums of the row block have arrived (after [`count_in`] said so); `acc` and `y`
/// hold `batch * rows` values; no other block touches these rows in this launch; thread
/// `tid` of `threads` (all of the block) calls it.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn convert_rows(
    acc: DevPtrMut<f32>,
    y: DevPtrMut<u16>,
    (rows, batch): (u32, u32),
    rb: u32,
    block_rows: u32,
    threads: u32,
    tid: u32,
) {
    let total = block_rows * batch;
    let rows_us = rows as usize;
    let mut first = 0;
    while first < total {
        let mut v = [0u32; 8];
        for (k, v) in v.iter_mut().enumerate() {
            let i = first + k as u32 * threads + tid;
            let (n, row) = (i / block_rows, rb * block_rows + i % block_rows);
            if i < total && row < rows {
                // SAFETY: n < batch, row < rows: inside acc; every slab's sums have arrived.
                *v = unsafe {
                    ld_relaxed_u32(acc.as_mut_ptr().add(n as usize * rows_us + row as usize) as _)
                };
            }
        }
        for (k, v) in v.iter().enumerate() {
            let i = first + k as u32 * threads + tid;
            let (n, row) = (i / block_rows, rb * block_rows + i % block_rows);
            if i < total && row < rows {
                let at = n as usize * rows_us + row as usize;
                // SAFETY: n < batch, row < rows: inside acc and y; no block touches this row
                // block again in this launch.
                unsafe {
                    *y.as_mut_ptr().add(at) = f32_to_f16(f32::from_bits(*v));
                    *acc.as_mut_ptr().add(at) = 0.0;
                }
            }
        }
        first += 8 * threads;
    }
}
