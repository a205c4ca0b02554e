//! Kernel entry points (NVPTX only). The arithmetic is in [`crate::math`].

use crate::math::{dot_i8x16, fma_f16, fma_f16x8, requantize};
use crate::{
    BLOCK_THREADS, GemvF16AnyParams, GemvF16Params, GemvI8AnyParams, GemvI8Params, STREAM_UNROLL,
    StreamReadParams, rows_per_warp_f16, rows_per_warp_i8, unroll_f16, unroll_i8,
};
use cmv_device::{
    U32x4, block_idx_x, f32_to_f16, global_thread_x, grid_dim_x, lane_id, ld_cs_v4, ld_nc_na_v4,
    ld_nc_u8, ld_nc_u16, ld_nc_v4, ld_stream_v4, mma_m16n8k16_f16_f32, thread_idx_x, warp_id,
    warp_sum_f32, warp_sum_i32, warp_xor_u32,
};

/// How weights are loaded: the cache qualifiers of the 128-bit load.
#[derive(Clone, Copy, PartialEq, Eq, core::marker::ConstParamTy)]
enum Load {
    /// `ld.global.nc.L1::no_allocate.L2::256B`
    Stream,
    /// `ld.global.nc`
    Nc,
    /// `ld.global.nc.L1::no_allocate`
    NcNoAlloc,
    /// `ld.global.cs`
    Cs,
}

/// One 16-byte weight load with the qualifiers `L` selects.
///
/// # Safety
/// As [`ld_nc_v4`].
#[inline(always)]
unsafe fn load<const L: Load>(p: *const U32x4) -> U32x4 {
    // SAFETY: forwarded from the caller.
    unsafe {
        match L {
            Load::Stream => ld_stream_v4(p),
            Load::Nc => ld_nc_v4(p),
            Load::NcNoAlloc => ld_nc_na_v4(p),
            Load::Cs => ld_cs_v4(p),
        }
    }
}

/// How one 16-byte chunk of weights meets one of inputs.
trait Chunk {
    type Acc: Copy;
    const ZERO: Self::Acc;
    fn mac(acc: Self::Acc, w: U32x4, x: U32x4) -> Self::Acc;
    /// # Safety
    /// Called by all 32 lanes of a warp together.
    unsafe fn warp_sum(acc: Self::Acc) -> Self::Acc;
}

struct F16;
impl Chunk for F16 {
    type Acc = f32;
    const ZERO: f32 = 0.0;
    #[inline(always)]
    fn mac(acc: f32, w: U32x4, x: U32x4) -> f32 {
        fma_f16x8(acc, w, x)
    }
    #[inline(always)]
    unsafe fn warp_sum(acc: f32) -> f32 {
        // SAFETY: forwarded from the caller.
        unsafe { warp_sum_f32(acc) }
    }
}

struct I8;
impl Chunk for I8 {
    type Acc = i32;
    const ZERO: i32 = 0;
    #[inline(always)]
    fn mac(acc: i32, w: U32x4, x: U32x4) -> i32 {
        dot_i8x16(acc, w, x)
    }
    #[inline(always)]
    unsafe fn warp_sum(acc: i32) -> i32 {
        // SAFETY: forwarded from the caller.
        unsafe { warp_sum_i32(acc) }
    }
}

/// The dot products of `R` consecutive rows starting at `row0` with `B` input vectors, summed
/// over the warp (every lane gets every sum). Rows at or past `rows` are read as row
/// `rows - 1` and input vectors at or past `batch` as vector `batch - 1`, so no load leaves its
/// buffer; the caller must not store their results. Only the chunks `c_begin..c_end` of each
/// row are summed (a slice of the columns; `c_end <= chunks`).
///
/// # Safety
/// All 32 lanes call it together; `w` holds `rows * chunks` and `x` holds `batch * chunks`
/// readable, aligned 16-byte chunks; `row0 < rows`; `1 <= batch`.
#[inline(always)]
unsafe fn warp_rows_dot<K: Chunk, const B: usize, const R: usize, const U: usize, const L: Load>(
    w: *const U32x4,
    x: *const U32x4,
    rows: u32,
    chunks: u32,
    row0: u32,
    batch: u32,
    (c_begin, c_end): (usize, usize),
) -> [[K::Acc; B]; R] {
    // U chunks of each of the R rows are loaded before any is used.
    let unroll: usize = U;
    let lane = lane_id();
    let chunks = chunks as usize;
    let wrow: [*const U32x4; R] = core::array::from_fn(|r| {
        let row = (row0 + r as u32).min(rows - 1) as usize;
        // SAFETY: row < rows, so the row start is inside the matrix.
        unsafe { w.add(row * chunks) }
    });
    let mut acc = [[K::ZERO; B]; R];
    let mut c = c_begin + lane as usize;
    while c < c_end {
        let mut wv = [[U32x4([0; 4]); U]; R];
        for (r, wr) in wv.iter_mut().enumerate() {
            for (u, wu) in wr.iter_mut().enumerate().take(unroll) {
                let ci = c + 32 * u;
                if ci < c_end {
                    // SAFETY: ci < c_end <= chunks, inside row r.
                    *wu = unsafe { load::<L>(wrow[r].add(ci)) };
                }
            }
        }
        for u in 0..unroll {
            let ci = c + 32 * u;
            if ci < c_end {
                for b in 0..B {
                    // Vectors past `batch` read the last one (their sums are not stored).
                    let xb = (b as u32).min(batch - 1) as usize;
                    // SAFETY: xb < batch and ci < chunks: inside input vector xb.
                    let xv = unsafe { ld_nc_v4(x.add(xb * chunks + ci)) };
                    for r in 0..R {
                        acc[r][b] = K::mac(acc[r][b], wv[r][u], xv);
                    }
                }
            }
        }
        c += 32 * unroll;
    }
    for row in acc.iter_mut() {
        for a in row.iter_mut() {
            // SAFETY: every lane of the warp runs this loop the same number of times.
            *a = unsafe { K::warp_sum(*a) };
        }
    }
    acc
}

/// What one warp computes: `R` rows from `row0` over the column chunks `c_begin..c_end`.
///
/// A block's warps form groups of `slices` consecutive warps; each group owns `R` consecutive
/// rows and splits their columns into `slices` equal parts (split-K), so that short, tall or
/// few-row matrices still give every SM enough independent loads.
#[derive(Clone, Copy)]
struct WarpTask {
    row0: u32,
    slice: u32,
    chunk_range: (usize, usize),
}

#[inline(always)]
fn warp_task(rows_per_warp: u32, chunks: u32, slices: u32) -> WarpTask {
    let groups = cmv_device::block_dim_x() / 32 / slices;
    let w = warp_id();
    let slice = w % slices;
    let row0 = (block_idx_x() * groups + w / slices) * rows_per_warp;
    let per = chunks.div_ceil(slices) as usize;
    let c_begin = (slice as usize * per).min(chunks as usize);
    let c_end = (c_begin + per).min(chunks as usize);
    WarpTask {
        row0,
        slice,
        chunk_range: (c_begin, c_end),
    }
}

/// Adds the partial sums of the `slices` warps of each group (through shared memory) and calls
/// `store(row, b, sum)` once per row below `rows` and vector below `batch`, from one lane.
///
/// # Safety
/// Every thread of the block calls it (it has a barrier when `slices > 1`); the launch gave
/// `block_dim / 32 * R * B * 4` bytes of dynamic shared memory when `slices > 1`.
#[inline(always)]
unsafe fn reduce_and_store<A, const B: usize, const R: usize>(
    task: WarpTask,
    acc: [[A; B]; R],
    rows: u32,
    batch: u32,
    slices: u32,
    add: impl Fn(A, A) -> A,
    mut store: impl FnMut(u32, usize, A),
) where
    A: Copy,
{
    let mut acc = acc;
    if slices > 1 {
        let smem = cmv_device::dyn_smem() as *mut A;
        let base = warp_id() as usize * R * B;
        if lane_id() == 0 {
            for (r, accs) in acc.iter().enumerate() {
                for (b, &a) in accs.iter().enumerate() {
                    // SAFETY: the launch gave block_dim / 32 * R * B slots.
                    unsafe { *smem.add(base + r * B + b) = a };
                }
            }
        }
        // SAFETY: every thread of the block reaches this barrier (no early return above).
        unsafe { cmv_device::sync_threads() };
        if task.slice != 0 {
            return;
        }
        if lane_id() == 0 {
            for s in 1..slices as usize {
                for (r, accs) in acc.iter_mut().enumerate() {
                    for (b, a) in accs.iter_mut().enumerate() {
                        // SAFETY: warp + s is a warp of this group, inside the block.
                        *a = add(*a, unsafe { *smem.add(base + s * R * B + r * B + b) });
                    }
                }
            }
        }
    }
    if lane_id() == 0 {
        for (r, accs) in acc.iter().enumerate() {
            let row = task.row0 + r as u32;
            if row < rows {
                // A constant trip count keeps `acc` in registers; `b < batch` masks the tail.
                for (b, &a) in accs.iter().enumerate() {
                    if (b as u32) < batch {
                        store(row, b, a);
                    }
                }
            }
        }
    }
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn gemv_f16<const B: usize, const R: usize, const U: usize, const L: Load>(
    w: *const U32x4,
    x: *const U32x4,
    y: *mut u16,
    rows: u32,
    cols: u32,
    batch: u32,
    slices: u32,
) {
    let chunks = cols / 8;
    let task = warp_task(R as u32, chunks, slices);
    let acc = if task.row0 < rows {
        // SAFETY: the launcher checked sizes and alignment; the condition is warp-uniform.
        unsafe {
            warp_rows_dot::<F16, B, R, U, L>(w, x, rows, chunks, task.row0, batch, task.chunk_range)
        }
    } else {
        [[0.0; B]; R]
    };
    let store = |row: u32, b: usize, a: f32| {
        // SAFETY: y holds batch * rows values; row < rows and b < batch.
        unsafe { *y.add(b * rows as usize + row as usize) = f32_to_f16(a) };
    };
    // SAFETY: every thread of the block gets here; the launcher sized the shared memory.
    unsafe { reduce_and_store(task, acc, rows, batch, slices, |a, b| a + b, store) };
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn gemv_i8<const B: usize, const R: usize, const U: usize, const L: Load>(
    w: *const U32x4,
    x: *const U32x4,
    y32: *mut i32,
    y8: *mut i8,
    scale: f32,
    rows: u32,
    cols: u32,
    batch: u32,
    slices: u32,
) {
    let chunks = cols / 16;
    let task = warp_task(R as u32, chunks, slices);
    let acc = if task.row0 < rows {
        // SAFETY: the launcher checked sizes and alignment; the condition is warp-uniform.
        unsafe {
            warp_rows_dot::<I8, B, R, U, L>(w, x, rows, chunks, task.row0, batch, task.chunk_range)
        }
    } else {
        [[0; B]; R]
    };
    let store = |row: u32, b: usize, a: i32| {
        let i = b * rows as usize + row as usize;
        // SAFETY: y32 and y8 hold batch * rows values; row < rows and b < batch.
        unsafe {
            *y32.add(i) = a;
            *y8.add(i) = requantize(a, scale);
        }
    };
    // SAFETY: every thread of the block gets here; the launcher sized the shared memory.
    unsafe { reduce_and_store(task, acc, rows, batch, slices, i32::wrapping_add, store) };
}

/// fp16 GEMV on tensor cores for 2 to `8 * NT` input vectors.
///
/// A group of `slices` warps owns 16 rows; each warp sums its slice of the column blocks of
/// 32 with `mma.m16n8k16` (rows as M, input vectors as N, `NT` tiles of 8). Lane `(g, t)` loads
/// the 16 bytes at columns `32 kb + 8t ..+8` of rows `g` and `g + 8` and of vector `g`; the
/// first `mma` of a block takes the low 8 bytes as its `k = {2t, 2t+1, 2t+8, 2t+9}`, the second
/// the high 8 bytes. Weights and inputs use the same permutation of `k`, so the dot products are
/// unchanged and every load is 16 bytes wide.
///
/// # Safety
/// As the other fast kernels: sizes and 16-byte alignment checked by the launcher, which also
/// gives `block_dim / 32 * 16 * 8 * NT * 4` bytes of dynamic shared memory when `slices > 1`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn gemv_f16_mma<const NT: usize, const U: usize, const L: Load>(
    w: *const U32x4,
    x: *const U32x4,
    y: *mut u16,
    rows: u32,
    cols: u32,
    batch: u32,
    slices: u32,
) {
    let chunks = (cols / 8) as usize;
    let kblocks = chunks.div_ceil(4);
    let task = warp_task(16, kblocks as u32, slices);
    let (kb0, kb1) = task.chunk_range;
    let lane = lane_id();
    let (g, t) = ((lane >> 2) as usize, (lane & 3) as usize);
    let row_a = (task.row0 + g as u32).min(rows - 1) as usize;
    let row_b = (task.row0 + g as u32 + 8).min(rows - 1) as usize;
    // SAFETY: both rows are below `rows`.
    let (pa, pb) = unsafe { (w.add(row_a * chunks), w.add(row_b * chunks)) };
    let xn: [*const U32x4; NT] = core::array::from_fn(|nt| {
        let n = ((nt * 8 + g) as u32).min(batch - 1) as usize;
        // SAFETY: n < batch.
        unsafe { x.add(n * chunks) }
    });
    let mut acc = [[0.0f32; 4]; NT];
    if task.row0 < rows {
        let mut kb = kb0;
        while kb < kb1 {
            let zero = U32x4([0; 4]);
            let mut wa = [zero; U];
            let mut wb = [zero; U];
            let mut xv = [[zero; U]; NT];
            for u in 0..U {
                let c = (kb + u) * 4 + t;
                if kb + u < kb1 && c < chunks {
                    // SAFETY: c < chunks: inside both rows and every input vector.
                    unsafe {
                        wa[u] = load::<L>(pa.add(c));
                        wb[u] = load::<L>(pb.add(c));
                        for nt in 0..NT {
                            xv[nt][u] = ld_nc_v4(xn[nt].add(c));
                        }
                    }
                }
            }
            for u in 0..U {
                for nt in 0..NT {
                    let (a, b, xx) = (wa[u].0, wb[u].0, xv[nt][u].0);
                    // SAFETY: the loop bounds are warp-uniform, so the whole warp is here.
                    unsafe {
                        acc[nt] =
                            mma_m16n8k16_f16_f32([a[0], b[0], a[1], b[1]], [xx[0], xx[1]], acc[nt]);
                        acc[nt] =
                            mma_m16n8k16_f16_f32([a[2], b[2], a[3], b[3]], [xx[2], xx[3]], acc[nt]);
                    }
                }
            }
            kb += U;
        }
    }
    if slices > 1 {
        let smem = cmv_device::dyn_smem() as *mut f32;
        let base = (warp_id() as usize * 32 + lane as usize) * 4 * NT;
        for (nt, a) in acc.iter().enumerate() {
            for (i, &v) in a.iter().enumerate() {
                // SAFETY: the launch gave 32 * 4 * NT floats per warp.
                unsafe { *smem.add(base + nt * 4 + i) = v };
            }
        }
        // SAFETY: every thread of the block reaches this barrier (no early return above).
        unsafe { cmv_device::sync_threads() };
        if task.slice != 0 {
            return;
        }
        for s in 1..slices as usize {
            for (nt, a) in acc.iter_mut().enumerate() {
                for (i, v) in a.iter_mut().enumerate() {
                    // SAFETY: warp + s is a warp of this group, inside the block.
                    *v += unsafe { *smem.add(base + s * 32 * 4 * NT + nt * 4 + i) };
                }
            }
        }
    }
    for (nt, a) in acc.iter().enumerate() {
        for (i, &v) in a.iter().enumerate() {
            let row = task.row0 + g as u32 + if i >= 2 { 8 } else { 0 };
            let n = (nt * 8 + 2 * t + (i & 1)) as u32;
            if row < rows && n < batch {
                // SAFETY: y holds batch * rows values.
                unsafe { *y.add(n as usize * rows as usize + row as usize) = f32_to_f16(v) };
            }
        }
    }
}

macro_rules! mma_entries {
    ($($name:ident = $nt:literal, $u:literal, $l:expr;)*) => {$(
        /// fp16 GEMV on tensor cores for up to `8 * NT` input vectors; see `gemv_f16_mma`.
        ///
        /// # Safety
        /// Launched by `dense-gemv`, which validates sizes, alignment and the grid.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: GemvF16Params) {
            let (w, x, y) = (p.w.as_ptr(), p.x.as_ptr(), p.y.as_mut_ptr());
            // SAFETY: forwarded from the launcher's checks.
            unsafe {
                gemv_f16_mma::<$nt, $u, { $l }>(w, x, y, p.rows, p.cols, p.batch, p.slices)
            }
        }
    )*};
}

mma_entries! {
    cmv_gemv_f16_mma_n8 = 1, 2, Load::NcNoAlloc;
    cmv_gemv_f16_mma_n16 = 2, 2, Load::NcNoAlloc;
    // Variants for `cmv-bench --explore`.
    cmv_gemv_f16_mma_x_n8u1 = 1, 1, Load::NcNoAlloc;
    cmv_gemv_f16_mma_x_n8u4 = 1, 4, Load::NcNoAlloc;
    cmv_gemv_f16_mma_x_n16u1 = 2, 1, Load::NcNoAlloc;
    cmv_gemv_f16_mma_x_n16u4 = 2, 4, Load::NcNoAlloc;
}

/// One warp per row, for the scalar fallback kernels; `None` past the last row.
#[inline(always)]
fn warp_row(rows: u32) -> Option<u32> {
    let row = block_idx_x() * (cmv_device::block_dim_x() / 32) + warp_id();
    (row < rows).then_some(row)
}

macro_rules! f16_entries {
    ($($b:literal, $fs:expr, $l:expr => $f16:ident;)*) => {$(
        /// fp16 GEMV of up to this many input vectors on the CUDA cores; see the crate
        /// documentation.
        ///
        /// # Safety
        /// Launched by `dense-gemv`, which validates sizes, alignment and the grid.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $f16(p: GemvF16Params) {
            let (w, x, y) = (p.w.as_ptr(), p.x.as_ptr(), p.y.as_mut_ptr());
            // SAFETY: forwarded from the launcher's checks.
            unsafe {
                gemv_f16::<$b, { $fs.0 }, { $fs.1 }, { $l }>(
                    w, x, y, p.rows, p.cols, p.batch, p.slices,
                )
            }
        }
    )*};
}

macro_rules! i8_entries {
    ($($b:literal, $is:expr, $l:expr => $i8:ident;)*) => {$(
        /// int8 GEMV for up to this many input vectors; see the crate documentation.
        ///
        /// # Safety
        /// Launched by `dense-gemv`, which validates sizes, alignment and the grid.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $i8(p: GemvI8Params) {
            let (w, x) = (p.w.as_ptr(), p.x.as_ptr());
            let (y32, y8) = (p.y32.as_mut_ptr(), p.y8.as_mut_ptr());
            // SAFETY: forwarded from the launcher's checks.
            unsafe {
                gemv_i8::<$b, { $is.0 }, { $is.1 }, { $l }>(
                    w, x, y32, y8, p.scale, p.rows, p.cols, p.batch, p.slices,
                )
            }
        }
    )*};
}

f16_entries! {
    1, f16_shape(1), Load::NcNoAlloc => cmv_gemv_f16_b1;
    4, f16_shape(4), Load::NcNoAlloc => cmv_gemv_f16_b4;
    // Variants (rows per warp r, chunks in flight per row u, load no-allocate a or cs c) for
    // `cmv-bench --explore`.
    1, (1, 2), Load::NcNoAlloc => cmv_gemv_f16_x_r1u2a;
    1, (1, 2), Load::Cs => cmv_gemv_f16_x_r1u2c;
    1, (1, 4), Load::NcNoAlloc => cmv_gemv_f16_x_r1u4a;
    1, (2, 1), Load::NcNoAlloc => cmv_gemv_f16_x_r2u1a;
    1, (2, 2), Load::NcNoAlloc => cmv_gemv_f16_x_r2u2a;
    1, (4, 1), Load::NcNoAlloc => cmv_gemv_f16_x_r4u1a;
    1, (4, 1), Load::Cs => cmv_gemv_f16_x_r4u1c;
    1, (4, 2), Load::NcNoAlloc => cmv_gemv_f16_x_r4u2a;
}

i8_entries! {
    1, i8_shape(1), Load::NcNoAlloc => cmv_gemv_i8_b1;
    2, i8_shape(2), Load::NcNoAlloc => cmv_gemv_i8_b2;
    4, i8_shape(4), Load::NcNoAlloc => cmv_gemv_i8_b4;
    8, i8_shape(8), Load::NcNoAlloc => cmv_gemv_i8_b8;
    16, i8_shape(16), Load::NcNoAlloc => cmv_gemv_i8_b16;
    // Batch-1 variants, named as the fp16 ones.
    1, (1, 2), Load::NcNoAlloc => cmv_gemv_i8_x_r1u2a;
    1, (1, 2), Load::Cs => cmv_gemv_i8_x_r1u2c;
    1, (1, 4), Load::NcNoAlloc => cmv_gemv_i8_x_r1u4a;
    1, (2, 1), Load::NcNoAlloc => cmv_gemv_i8_x_r2u1a;
    1, (2, 2), Load::NcNoAlloc => cmv_gemv_i8_x_r2u2a;
    1, (4, 1), Load::NcNoAlloc => cmv_gemv_i8_x_r4u1a;
    1, (4, 1), Load::Cs => cmv_gemv_i8_x_r4u1c;
    1, (4, 2), Load::NcNoAlloc => cmv_gemv_i8_x_r4u2a;
}

/// (rows per warp, chunks in flight) of the fp16 kernel for `kernel_batch`.
const fn f16_shape(kernel_batch: u32) -> (usize, usize) {
    (
        rows_per_warp_f16(kernel_batch) as usize,
        unroll_f16(kernel_batch),
    )
}

/// (rows per warp, chunks in flight) of the int8 kernel for `kernel_batch`.
const fn i8_shape(kernel_batch: u32) -> (usize, usize) {
    (
        rows_per_warp_i8(kernel_batch) as usize,
        unroll_i8(kernel_batch),
    )
}

/// fp16 GEMV for any `cols` and any batch: one warp per row, scalar loads.
///
/// # Safety
/// Launched by `dense-gemv`, which validates sizes and the grid.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn cmv_gemv_f16_any(p: GemvF16AnyParams) {
    let (w, x, y) = (p.w.as_ptr(), p.x.as_ptr(), p.y.as_mut_ptr());
    let (rows, cols, batch) = (p.rows, p.cols, p.batch);
    let Some(row) = warp_row(rows) else {
        return;
    };
    let lane = lane_id();
    let wrow = row as usize * cols as usize;
    for b in 0..batch as usize {
        let mut acc = 0.0f32;
        let mut j = lane;
        while j < cols {
            // SAFETY: j < cols, inside row `row` and input vector b.
            let (wv, xv) = unsafe {
                (
                    ld_nc_u16(w.add(wrow + j as usize)),
                    ld_nc_u16(x.add(b * cols as usize + j as usize)),
                )
            };
            acc = fma_f16(acc, wv, xv);
            j += 32;
        }
        // SAFETY: every lane of the warp reaches this with the same b.
        let s = unsafe { warp_sum_f32(acc) };
        if lane == 0 {
            // SAFETY: y holds batch * rows values.
            unsafe { *y.add(b * rows as usize + row as usize) = f32_to_f16(s) };
        }
    }
}

/// int8 GEMV for any `cols` and any batch: one warp per row, byte loads.
///
/// # Safety
/// Launched by `dense-gemv`, which validates sizes and the grid.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn cmv_gemv_i8_any(p: GemvI8AnyParams) {
    let (w, x) = (p.w.as_ptr(), p.x.as_ptr());
    let (y32, y8, scale) = (p.y32.as_mut_ptr(), p.y8.as_mut_ptr(), p.scale);
    let (rows, cols, batch) = (p.rows, p.cols, p.batch);
    let Some(row) = warp_row(rows) else {
        return;
    };
    let lane = lane_id();
    let wrow = row as usize * cols as usize;
    for b in 0..batch as usize {
        let mut acc = 0i32;
        let mut j = lane;
        while j < cols {
            // SAFETY: j < cols, inside row `row` and input vector b.
            let (wv, xv) = unsafe {
                (
                    ld_nc_u8(w.add(wrow + j as usize)),
                    ld_nc_u8(x.add(b * cols as usize + j as usize)),
                )
            };
            acc = acc.wrapping_add(i32::from(wv as i8) * i32::from(xv as i8));
            j += 32;
        }
        // SAFETY: every lane of the warp reaches this with the same b.
        let s = unsafe { warp_sum_i32(acc) };
        if lane == 0 {
            let i = b * rows as usize + row as usize;
            // SAFETY: y32 and y8 hold batch * rows values.
            unsafe {
                *y32.add(i) = s;
                *y8.add(i) = requantize(s, scale);
            }
        }
    }
}

/// Reads `n` 16-byte chunks once with loads `L` and writes the xor of everything it read,
/// one word per warp, to `out[global warp]`, so the host can check that every byte was read.
///
/// `TILES == false`: grid-stride, [`STREAM_UNROLL`] loads in flight per thread, each load of
/// the grid covering one contiguous span. `TILES == true`: each warp reads `8 x 512`
/// contiguous bytes per step, warps striding over the buffer.
///
/// # Safety
/// `p` holds `n` aligned chunks; `out` holds `grid * STREAM_THREADS / 32` words.
#[inline(always)]
unsafe fn stream_read<const L: Load, const TILES: bool>(p: *const U32x4, n: u64, out: *mut u32) {
    let warps_per_block = u64::from(crate::STREAM_THREADS / 32);
    let warp = u64::from(block_idx_x()) * warps_per_block + u64::from(thread_idx_x() / 32);
    let mut acc = 0u32;
    if TILES {
        const U: u64 = 8;
        let warps = u64::from(grid_dim_x()) * warps_per_block;
        let lane = u64::from(lane_id());
        let mut base = warp * 32 * U;
        while base < n {
            let mut v = [U32x4([0; 4]); U as usize];
            for (u, vu) in v.iter_mut().enumerate() {
                let i = base + u as u64 * 32 + lane;
                if i < n {
                    // SAFETY: i < n.
                    *vu = unsafe { load::<L>(p.add(i as usize)) };
                }
            }
            for vu in v {
                acc ^= vu.0[0] ^ vu.0[1] ^ vu.0[2] ^ vu.0[3];
            }
            base += warps * 32 * U;
        }
    } else {
        const U: u64 = STREAM_UNROLL as u64;
        let stride = u64::from(grid_dim_x()) * u64::from(crate::STREAM_THREADS);
        let mut i = global_thread_x();
        while i + (U - 1) * stride < n {
            let mut v = [U32x4([0; 4]); U as usize];
            for (u, vu) in v.iter_mut().enumerate() {
                // SAFETY: i + u * stride < n.
                *vu = unsafe { load::<L>(p.add((i + u as u64 * stride) as usize)) };
            }
            for vu in v {
                acc ^= vu.0[0] ^ vu.0[1] ^ vu.0[2] ^ vu.0[3];
            }
            i += U * stride;
        }
        while i < n {
            // SAFETY: i < n.
            let v = unsafe { load::<L>(p.add(i as usize)) };
            acc ^= v.0[0] ^ v.0[1] ^ v.0[2] ^ v.0[3];
            i += stride;
        }
    }
    // SAFETY: all lanes reach this point (the loop bounds are warp-uniform or end together).
    let x = unsafe { warp_xor_u32(acc) };
    if lane_id() == 0 {
        // SAFETY: out holds one word per warp of the grid.
        unsafe { *out.add(warp as usize) = x };
    }
}

macro_rules! stream_entries {
    ($($name:ident = $l:expr, $tiles:literal;)*) => {$(
        /// Streaming read of a buffer; see `stream_read`.
        ///
        /// # Safety
        /// `p.p` holds `p.n` aligned chunks; `p.out` holds `grid * STREAM_THREADS / 32` words.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: StreamReadParams) {
            // SAFETY: forwarded from the launcher's checks.
            unsafe { stream_read::<{ $l }, $tiles>(p.p.as_ptr(), p.n, p.out.as_mut_ptr()) }
        }
    )*};
}

stream_entries! {
    // The default, chosen by `cmv-bench --explore` (docs/PERF.md): warp tiles, no L1
    // allocation, no L2 prefetch hint (the 256-byte prefetch hint was slower).
    cmv_stream_read = Load::NcNoAlloc, true;
    cmv_stream_x_grid_s = Load::Stream, false;
    cmv_stream_x_grid_n = Load::Nc, false;
    cmv_stream_x_grid_a = Load::NcNoAlloc, false;
    cmv_stream_x_grid_c = Load::Cs, false;
    cmv_stream_x_tiles_n = Load::Nc, true;
    cmv_stream_x_tiles_c = Load::Cs, true;
}

const _: () = assert!(BLOCK_THREADS % 32 == 0);
