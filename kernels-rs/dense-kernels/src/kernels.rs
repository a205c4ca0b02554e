//! Kernel entry points (NVPTX only). The arithmetic is in [`crate::math`].

use crate::math::{dot_i8x16, fma_f16, fma_f16x8, requantize};
use crate::{BLOCK_THREADS, STREAM_UNROLL, rows_per_warp_f16, rows_per_warp_i8, unroll_for};
use cmv_device::{
    U32x4, block_idx_x, f32_to_f16, global_thread_x, grid_dim_x, lane_id, ld_nc_u8, ld_nc_u16,
    ld_nc_v4, ld_stream_v4, thread_idx_x, warp_id, warp_sum_f32, warp_sum_i32, warp_xor_u32,
};

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
/// buffer; the caller must not store their results.
///
/// # Safety
/// All 32 lanes call it together; `w` holds `rows * chunks` and `x` holds `batch * chunks`
/// readable, aligned 16-byte chunks; `row0 < rows`; `1 <= batch`.
#[inline(always)]
unsafe fn warp_rows_dot<K: Chunk, const B: usize, const R: usize, const U: usize>(
    w: *const U32x4,
    x: *const U32x4,
    rows: u32,
    chunks: u32,
    row0: u32,
    batch: u32,
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
    let mut c = lane as usize;
    while c < chunks {
        let mut wv = [[U32x4([0; 4]); U]; R];
        for (r, wr) in wv.iter_mut().enumerate() {
            for (u, wu) in wr.iter_mut().enumerate().take(unroll) {
                let ci = c + 32 * u;
                if ci < chunks {
                    // SAFETY: ci < chunks, inside row r.
                    *wu = unsafe { ld_stream_v4(wrow[r].add(ci)) };
                }
            }
        }
        for u in 0..unroll {
            let ci = c + 32 * u;
            if ci < chunks {
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

/// The first row of this warp, or `None` when the warp has no rows (uniform across the warp).
#[inline(always)]
fn warp_first_row(rows_per_warp: u32, rows: u32) -> Option<u32> {
    let warp = block_idx_x() * (cmv_device::block_dim_x() / 32) + warp_id();
    let row0 = warp.checked_mul(rows_per_warp)?;
    (row0 < rows).then_some(row0)
}

#[inline(always)]
unsafe fn gemv_f16<const B: usize, const R: usize, const U: usize>(
    w: *const U32x4,
    x: *const U32x4,
    y: *mut u16,
    rows: u32,
    cols: u32,
    batch: u32,
) {
    let Some(row0) = warp_first_row(R as u32, rows) else {
        return;
    };
    // SAFETY: the launcher checked the buffer sizes and alignment; the warp is whole.
    let acc = unsafe { warp_rows_dot::<F16, B, R, U>(w, x, rows, cols / 8, row0, batch) };
    if lane_id() == 0 {
        for (r, accs) in acc.iter().enumerate() {
            let row = row0 + r as u32;
            if row < rows {
                // A constant trip count keeps `acc` in registers; `b < batch` masks the tail.
                for (b, &a) in accs.iter().enumerate() {
                    if (b as u32) < batch {
                        // SAFETY: y holds batch * rows values.
                        unsafe { *y.add(b * rows as usize + row as usize) = f32_to_f16(a) };
                    }
                }
            }
        }
    }
}

#[inline(always)]
unsafe fn gemv_i8<const B: usize, const R: usize, const U: usize>(
    w: *const U32x4,
    x: *const U32x4,
    y32: *mut i32,
    y8: *mut i8,
    scale: f32,
    rows: u32,
    cols: u32,
    batch: u32,
) {
    let Some(row0) = warp_first_row(R as u32, rows) else {
        return;
    };
    // SAFETY: the launcher checked the buffer sizes and alignment; the warp is whole.
    let acc = unsafe { warp_rows_dot::<I8, B, R, U>(w, x, rows, cols / 16, row0, batch) };
    if lane_id() == 0 {
        for (r, accs) in acc.iter().enumerate() {
            let row = row0 + r as u32;
            if row < rows {
                // A constant trip count keeps `acc` in registers; `b < batch` masks the tail.
                for (b, &a) in accs.iter().enumerate() {
                    if (b as u32) < batch {
                        let i = b * rows as usize + row as usize;
                        // SAFETY: y32 and y8 hold batch * rows values.
                        unsafe {
                            *y32.add(i) = a;
                            *y8.add(i) = requantize(a, scale);
                        }
                    }
                }
            }
        }
    }
}

macro_rules! dense_entries {
    ($($b:literal, $u:expr => $f16:ident, $i8:ident;)*) => {$(
        /// fp16 GEMV for up to this many input vectors; see the crate documentation.
        ///
        /// # Safety
        /// Launched by `dense-gemv`, which validates sizes, alignment and the grid.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $f16(
            w: *const U32x4, x: *const U32x4, y: *mut u16, rows: u32, cols: u32, batch: u32,
        ) {
            // SAFETY: forwarded from the launcher's checks.
            unsafe {
                gemv_f16::<$b, { rows_per_warp_f16($b) as usize }, { $u }>(w, x, y, rows, cols, batch)
            }
        }

        /// int8 GEMV for up to this many input vectors; see the crate documentation.
        ///
        /// # Safety
        /// Launched by `dense-gemv`, which validates sizes, alignment and the grid.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $i8(
            w: *const U32x4, x: *const U32x4, y32: *mut i32, y8: *mut i8, scale: f32,
            rows: u32, cols: u32, batch: u32,
        ) {
            // SAFETY: forwarded from the launcher's checks.
            unsafe {
                gemv_i8::<$b, { rows_per_warp_i8($b) as usize }, { $u }>(
                    w, x, y32, y8, scale, rows, cols, batch,
                )
            }
        }
    )*};
}

dense_entries! {
    1, unroll_for(1) => cmv_gemv_f16_b1, cmv_gemv_i8_b1;
    2, unroll_for(2) => cmv_gemv_f16_b2, cmv_gemv_i8_b2;
    4, unroll_for(4) => cmv_gemv_f16_b4, cmv_gemv_i8_b4;
    8, unroll_for(8) => cmv_gemv_f16_b8, cmv_gemv_i8_b8;
    16, unroll_for(16) => cmv_gemv_f16_b16, cmv_gemv_i8_b16;
    // Batch-1 variants with other load depths, for `cmv-bench --explore`.
    1, 2 => cmv_gemv_f16_b1_u2, cmv_gemv_i8_b1_u2;
    1, 4 => cmv_gemv_f16_b1_u4, cmv_gemv_i8_b1_u4;
    1, 8 => cmv_gemv_f16_b1_u8, cmv_gemv_i8_b1_u8;
    1, 16 => cmv_gemv_f16_b1_u16, cmv_gemv_i8_b1_u16;
}

/// fp16 GEMV for any `cols` and any batch: one warp per row, scalar loads.
///
/// # Safety
/// Launched by `dense-gemv`, which validates sizes and the grid.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn cmv_gemv_f16_any(
    w: *const u16,
    x: *const u16,
    y: *mut u16,
    rows: u32,
    cols: u32,
    batch: u32,
) {
    let Some(row) = warp_first_row(1, rows) else {
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
pub unsafe extern "ptx-kernel" fn cmv_gemv_i8_any(
    w: *const u8,
    x: *const u8,
    y32: *mut i32,
    y8: *mut i8,
    scale: f32,
    rows: u32,
    cols: u32,
    batch: u32,
) {
    let Some(row) = warp_first_row(1, rows) else {
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

/// Reads `n` 16-byte chunks once (grid-stride, [`STREAM_UNROLL`] loads in flight per thread)
/// and writes the xor of everything it read, one word per warp, to `out[global warp]`, so the
/// host can check that every byte was read.
///
/// # Safety
/// `p` holds `n` aligned chunks; `out` holds `grid * BLOCK / 32` words.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn cmv_stream_read(p: *const U32x4, n: u64, out: *mut u32) {
    let stride = u64::from(grid_dim_x()) * u64::from(crate::STREAM_THREADS);
    let mut i = global_thread_x();
    let mut acc = 0u32;
    const U: u64 = STREAM_UNROLL as u64;
    while i + (U - 1) * stride < n {
        let mut v = [U32x4([0; 4]); STREAM_UNROLL as usize];
        for (u, vu) in v.iter_mut().enumerate() {
            // SAFETY: i + u * stride < n.
            *vu = unsafe { ld_stream_v4(p.add((i + u as u64 * stride) as usize)) };
        }
        for vu in v {
            acc ^= vu.0[0] ^ vu.0[1] ^ vu.0[2] ^ vu.0[3];
        }
        i += U * stride;
    }
    while i < n {
        // SAFETY: i < n.
        let v = unsafe { ld_stream_v4(p.add(i as usize)) };
        acc ^= v.0[0] ^ v.0[1] ^ v.0[2] ^ v.0[3];
        i += stride;
    }
    // SAFETY: all lanes reach this point (no early exit above).
    let x = unsafe { warp_xor_u32(acc) };
    if lane_id() == 0 {
        let warp = block_idx_x() as usize * (crate::STREAM_THREADS / 32) as usize
            + (thread_idx_x() / 32) as usize;
        // SAFETY: out holds one word per warp of the grid.
        unsafe { *out.add(warp) = x };
    }
}

/// Like [`cmv_stream_read`], but each warp reads `8 x 512` contiguous bytes per step (eight
/// 16-byte loads per lane in flight), warps striding over the buffer.
///
/// # Safety
/// As [`cmv_stream_read`].
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn cmv_stream_read_tiles(p: *const U32x4, n: u64, out: *mut u32) {
    const U: u64 = 8;
    let warps = u64::from(grid_dim_x()) * u64::from(crate::STREAM_THREADS / 32);
    let warp = u64::from(block_idx_x()) * u64::from(crate::STREAM_THREADS / 32)
        + u64::from(thread_idx_x() / 32);
    let lane = u64::from(lane_id());
    let mut base = warp * 32 * U;
    let mut acc = 0u32;
    while base < n {
        let mut v = [U32x4([0; 4]); U as usize];
        for (u, vu) in v.iter_mut().enumerate() {
            let i = base + u as u64 * 32 + lane;
            if i < n {
                // SAFETY: i < n.
                *vu = unsafe { ld_stream_v4(p.add(i as usize)) };
            }
        }
        for vu in v {
            acc ^= vu.0[0] ^ vu.0[1] ^ vu.0[2] ^ vu.0[3];
        }
        base += warps * 32 * U;
    }
    // SAFETY: all lanes reach this point (the loop bound is warp-uniform).
    let x = unsafe { warp_xor_u32(acc) };
    if lane == 0 {
        // SAFETY: out holds one word per warp of the grid.
        unsafe { *out.add(warp as usize) = x };
    }
}

const _: () = assert!(BLOCK_THREADS % 32 == 0);
