//! The fused dequantize + GEMV kernel (NVPTX only); the format is `docs/SPQR.md`.
//!
//! A block computes one tile row (16 rows). Thread `t` owns rows `t % 8` and `t % 8 + 8` of
//! the tiles `t / 8, t / 8 + 32, ...` of each staged column chunk: 8 consecutive threads read
//! a tile's 16 rows, sharing its statistics (two shuffles per word) and its 16 inputs. The input vectors are staged
//! in shared memory as fp32, with the sum of each group of 16 (`xsum`), so a group's dot
//! product is `s (sum q x - z xsum)`.
//! Outliers are added by the threads that own their rows, before the reduction.

use cmv_device::{
    block_dim_x, block_idx_x, dyn_smem, f16_to_f32, f32_to_f16, fma_f32, lane_id, ld_nc_u16,
    ld_nc_u32, ld_stream_u64, shfl_xor, sync_threads, thread_idx_x, warp_id,
};

use crate::layout::{
    CODES_SHIFT, SecondOrder, TILE, first_order, outlier_col, outlier_value, row_qs, row_qz,
    row_stat_byte,
};
use crate::smem_floats;

/// The tile's second-order statistics, rebuilt by the 8 lanes that hold its 16 rows (lane
/// `r` holds rows `r` and `r + 8`): row `r`'s byte is byte `r / 2` of the low word, row
/// `r + 8`'s byte `r / 2` of the high word; two xor-shuffles per word (over lane bits 1 and 2)
/// gather them.
///
/// # Safety
/// All 32 lanes of the warp call it together.
#[inline(always)]
unsafe fn second_order(w0: u64, w1: u64, r: u32) -> SecondOrder {
    let shift = 8 * ((r >> 1) & 3);
    let mut lo = u32::from(row_stat_byte(w0)) << shift;
    let mut hi = u32::from(row_stat_byte(w1)) << shift;
    for m in [2, 4] {
        // SAFETY: the caller guarantees a converged warp.
        unsafe {
            lo |= shfl_xor(lo, m);
            hi |= shfl_xor(hi, m);
        }
    }
    SecondOrder::from_u64(u64::from(lo) | (u64::from(hi) << 32))
}

/// Four staged floats, aligned for one 16-byte shared-memory load.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct F32x4([f32; 4]);

/// The 3-bit code at bits `shift..shift + 3` of `c`, as a float (`I2FP`, full rate on sm_90).
#[inline(always)]
fn code_value(c: u32, shift: u32) -> f32 {
    ((c >> shift) & 7) as f32
}

/// The 16 codes of a tile row as floats (codes 0-9 from a low word, 10-15 from a high one,
/// with 32-bit shifts).
#[inline(always)]
fn code_values(w: u64) -> [f32; TILE] {
    let (lo, hi) = ((w >> CODES_SHIFT) as u32, (w >> (CODES_SHIFT + 30)) as u32);
    core::array::from_fn(|k| {
        let k = k as u32;
        if k < 10 {
            code_value(lo, 3 * k)
        } else {
            code_value(hi, 3 * (k - 10))
        }
    })
}

/// `sum_k q_k x_k` for two tile rows' code values `q0`, `q1` of the same tile (so the same 16
/// inputs); `xs` is 16-byte aligned. Two partial sums per row: shorter FMA chains.
#[inline(always)]
fn dot2(q0: &[f32; TILE], q1: &[f32; TILE], xs: *const f32) -> (f32, f32) {
    let (mut a0, mut b0, mut a1, mut b1) = (0.0f32, 0.0f32, 0.0f32, 0.0f32);
    for v in 0..TILE / 4 {
        // SAFETY: the caller passes 16 staged floats, 16-byte aligned.
        let xv = unsafe { *(xs as *const F32x4).add(v) };
        for e in 0..4 {
            let k = 4 * v + e;
            if e % 2 == 0 {
                a0 = fma_f32(q0[k], xv.0[e], a0);
                a1 = fma_f32(q1[k], xv.0[e], a1);
            } else {
                b0 = fma_f32(q0[k], xv.0[e], b0);
                b1 = fma_f32(q1[k], xv.0[e], b1);
            }
        }
    }
    (a0 + b0, a1 + b1)
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn spqr_gemv<const B: usize, const PT: bool, const UNROLL: usize>(
    dense: *const u64,
    x: *const u16,
    y: *mut u16,
    offsets: *const u32,
    col_vals: *const u32,
    rows: u32,
    cols: u32,
    padded_cols: u32,
    batch: u32,
    kc: u32,
) {
    let tid = thread_idx_x();
    // Thread t holds rows r and r + 8 of tiles t / 8, t / 8 + groups, ...
    let r = tid & 7;
    let g = tid >> 3;
    let groups = block_dim_x() >> 3;
    let warps = block_dim_x() >> 5;
    let tile_row = block_idx_x();
    let smem = dyn_smem() as *mut f32;
    let (kc_u, b_u) = (kc as usize, B);
    // SAFETY (all pointer offsets below): the launcher gave `smem_floats(B, kc, warps)` floats.
    let xs = smem;
    let xsum = unsafe { xs.add(b_u * kc_u) };
    let red = unsafe { xsum.add(b_u * kc_u / TILE) };
    let out = unsafe { red.add(warps as usize * TILE * b_u) };
    let offs = unsafe { out.add(TILE * b_u) } as *mut u32;
    // SAFETY: the tile row's words are inside the dense part.
    let row_base = unsafe { dense.add(tile_row as usize * padded_cols as usize) };
    // acc[h][b]: row r + 8 h, vector b.
    let mut acc = [[0.0f32; B]; 2];
    let mut c0 = 0u32;
    while c0 < padded_cols {
        let cn = kc.min(padded_cols - c0);
        // SAFETY: every thread of the block runs the same chunk loop.
        unsafe { sync_threads() };
        let mut idx = tid;
        while idx < B as u32 * cn {
            let (b, c) = (idx / cn, idx % cn);
            let col = c0 + c;
            let v = if col < cols && b < batch {
                // SAFETY: b < batch and col < cols: inside the input.
                f16_to_f32(unsafe { ld_nc_u16(x.add((b * cols + col) as usize)) })
            } else {
                0.0
            };
            // SAFETY: b < B and c < kc.
            unsafe { *xs.add(b as usize * kc_u + c as usize) = v };
            idx += block_dim_x();
        }
        // SAFETY: as above.
        unsafe { sync_threads() };
        let ntiles = cn / TILE as u32;
        let mut idx = tid;
        while idx < B as u32 * ntiles {
            let (b, t) = (idx / ntiles, idx % ntiles);
            let mut s = 0.0f32;
            for k in 0..TILE {
                // SAFETY: inside the staged chunk.
                s += unsafe { *xs.add(b as usize * kc_u + t as usize * TILE + k) };
            }
            // SAFETY: b < B and t < kc / 16.
            unsafe { *xsum.add(b as usize * (kc_u / TILE) + t as usize) = s };
            idx += block_dim_x();
        }
        // SAFETY: as above.
        unsafe { sync_threads() };
        let steps = ntiles.div_ceil(groups);
        let mut s = 0;
        while s < steps {
            // UNROLL tiles loaded before any is used, to keep loads in flight (fewer for larger
            // batches, whose bodies are too large for the compiler to unroll more).
            let mut ws = [[0u64; 2]; UNROLL];
            for (u, wu) in ws.iter_mut().enumerate() {
                let lt = g + (s + u as u32) * groups;
                if lt < ntiles {
                    let p = ((c0 / 16 + lt) * 16 + r) as usize;
                    // SAFETY: tile c0 / 16 + lt of this tile row exists; rows r, r + 8 < 16.
                    *wu = unsafe {
                        [
                            ld_stream_u64(row_base.add(p)),
                            ld_stream_u64(row_base.add(p + 8)),
                        ]
                    };
                }
            }
            for (u, &w) in ws.iter().enumerate() {
                let lt = g + (s + u as u32) * groups;
                // SAFETY: the step count is uniform over the block, so the warp is converged.
                let so = unsafe { second_order(w[0], w[1], r) };
                if lt < ntiles {
                    let (s0, z0) = first_order(row_qs(w[0]), row_qz(w[0]), so);
                    let (s1, z1) = first_order(row_qs(w[1]), row_qz(w[1]), so);
                    // The codes become floats once, for every vector.
                    let (q0, q1) = (code_values(w[0]), code_values(w[1]));
                    for b in 0..B {
                        // SAFETY: inside the staged chunk and its sums.
                        let (xp, t) = unsafe {
                            (
                                xs.add(b * kc_u + lt as usize * TILE),
                                *xsum.add(b * (kc_u / TILE) + lt as usize),
                            )
                        };
                        let (d0, d1) = dot2(&q0, &q1, xp);
                        acc[0][b] = fma_f32(s0, d0 - z0 * t, acc[0][b]);
                        acc[1][b] = fma_f32(s1, d1 - z1 * t, acc[1][b]);
                    }
                }
            }
            s += UNROLL as u32;
        }
        c0 += cn;
    }
    // Outliers, before the reduction, into the same accumulators: thread t only ever sees
    // entries of row t % 16, one of its two rows (PTCSR: entry k of row r sits at 16 k + r and
    // the block stride is a multiple of 16; CSR: thread t walks row t % 16 with stride
    // blockDim / 16).
    let (first, end, stride) = if PT {
        // SAFETY: the block offsets have one entry per tile row, plus one.
        let (s0, s1) = unsafe {
            (
                ld_nc_u32(offsets.add(tile_row as usize)),
                ld_nc_u32(offsets.add(tile_row as usize + 1)),
            )
        };
        (s0 + tid, s1, block_dim_x())
    } else {
        let row = (16 * tile_row + (tid & 15)) as usize;
        // SAFETY: the row offsets have one entry per padded row, plus one.
        let (s0, s1) = unsafe { (ld_nc_u32(offsets.add(row)), ld_nc_u32(offsets.add(row + 1))) };
        (s0 + (tid >> 4), s1, block_dim_x() >> 4)
    };
    // Row tid % 16 is row r (h = 0) or r + 8 (h = 1) of this thread.
    let h = ((tid >> 3) & 1) as usize;
    let mut e = first;
    while e < end {
        // SAFETY: e < end <= the outlier words' length (validated on the host).
        let wv = unsafe { ld_nc_u32(col_vals.add(e as usize)) };
        if wv != 0 {
            let (c, v) = (outlier_col(wv), f16_to_f32(outlier_value(wv)));
            for b in 0..B {
                if (b as u32) < batch {
                    // SAFETY: c < cols (validated) and b < batch.
                    let xv =
                        f16_to_f32(unsafe { ld_nc_u16(x.add(b * cols as usize + c as usize)) });
                    // Constant indices keep `acc` in registers.
                    if h == 0 {
                        acc[0][b] = fma_f32(v, xv, acc[0][b]);
                    } else {
                        acc[1][b] = fma_f32(v, xv, acc[1][b]);
                    }
                }
            }
        }
        e += stride;
    }
    // Rows are shared by lanes l, l ^ 8, l ^ 16, l ^ 24 of a warp, then by the block's warps.
    for hh in 0..2 {
        for b in 0..B {
            let mut a = acc[hh][b];
            // SAFETY: every lane reaches this point.
            unsafe {
                a += f32::from_bits(shfl_xor(a.to_bits(), 8));
                a += f32::from_bits(shfl_xor(a.to_bits(), 16));
            }
            acc[hh][b] = a;
        }
    }
    let lane = lane_id();
    if lane < 8 {
        for hh in 0..2 {
            for b in 0..B {
                let rr = lane as usize + 8 * hh;
                // SAFETY: warp < warps, rr < 16, b < B.
                unsafe { *red.add((warp_id() as usize * TILE + rr) * b_u + b) = acc[hh][b] };
            }
        }
    }
    // SAFETY: every thread reaches this barrier.
    unsafe { sync_threads() };
    if tid < 16 * B as u32 {
        let (rr, b) = (tid / B as u32, tid % B as u32);
        let mut total = 0.0f32;
        for w in 0..warps as usize {
            // SAFETY: inside the reduction area.
            total += unsafe { *red.add((w * TILE + rr as usize) * b_u + b as usize) };
        }
        let row = 16 * tile_row + rr;
        if row < rows && b < batch {
            // SAFETY: row < rows and b < batch outputs.
            unsafe { *y.add((b * rows + row) as usize) = f32_to_f16(total) };
        }
    }
    let _ = (out, offs, smem_floats);
}

macro_rules! entries {
    ($($name:ident = $b:literal, $pt:literal, $u:literal;)*) => {$(
        /// SpQR GEMV for up to this many input vectors; see the module documentation.
        ///
        /// # Safety
        /// Launched by `spqr-format`, which validated the matrix (lengths, offsets, outlier
        /// columns), sized the inputs and outputs, launched one block per tile row with a
        /// multiple of 32 threads and `smem_floats(B, kc, warps) * 4` bytes of shared memory.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(
            dense: *const u64, x: *const u16, y: *mut u16, offsets: *const u32,
            col_vals: *const u32, rows: u32, cols: u32, padded_cols: u32, batch: u32, kc: u32,
        ) {
            // SAFETY: forwarded from the launcher's checks.
            unsafe {
                spqr_gemv::<$b, $pt, $u>(dense, x, y, offsets, col_vals, rows, cols, padded_cols, batch, kc)
            }
        }
    )*};
}

entries! {
    cmv_spqr_csr_b1 = 1, false, 4;
    cmv_spqr_csr_b2 = 2, false, 2;
    cmv_spqr_csr_b4 = 4, false, 1;
    cmv_spqr_csr_b8 = 8, false, 1;
    cmv_spqr_ptcsr_b1 = 1, true, 4;
    cmv_spqr_ptcsr_b2 = 2, true, 2;
    cmv_spqr_ptcsr_b4 = 4, true, 1;
    cmv_spqr_ptcsr_b8 = 8, true, 1;
}
