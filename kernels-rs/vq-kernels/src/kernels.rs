//! The GEMV kernel (NVPTX only); see the crate documentation.

use cmv_device::{
    block_idx_x, f16_to_f32, f32_to_f16, lane_id, ld_nc_u16, ld_nc_u32, shfl_xor, warp_id,
};

use crate::{GEMV_WARPS, VqGemvParams, code_from_pair};

/// `unroll!(i < N, { body })`: the body once for each `i` in `0..N` (`N <= 16`, a constant),
/// as straight-line code with `i` a constant in each copy, so arrays indexed by `i` stay in
/// registers.
macro_rules! unroll {
    ($i:ident < $n:expr, $body:block) => {
        unroll!(@ $i, $n, $body, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
    };
    (@ $i:ident, $n:expr, $body:block, $($k:literal)*) => {
        $({
            const K: usize = $k;
            if K < $n {
                let $i = K;
                $body
            }
        })*
    };
}

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
