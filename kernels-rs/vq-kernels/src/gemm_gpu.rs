// The tensor-core VQ-GEMM (`crate::gemm`), NVPTX only. Included from `kernels.rs`.

use cmv_device::{
    U32x4, block_idx_x, block_idx_y, cp_async_16_zfill, cp_async_commit, cp_async_wait_at_most,
    dyn_smem_addr, f32_to_f16, f32x2_to_half2, lds_v2, lds_v4, mma_m16n8k16_f16_f32, sync_threads,
    thread_idx_x,
};

use crate::dev::{copy_codes, frag_regs, load_entry, write_entry};
use crate::gemm::{
    GEMM_ROWS, GEMM_THREADS, GEMM_TOKENS, VqGemmParams, code_stage_base, code_stage_offset,
    x_stage_base, x_stage_offset,
};
use crate::mma::{SLAB_COLS, STEPS, frag_col, lookup_offset};

/// Copies slab `slab`'s inputs (the block's 128 tokens) and codes (its 16 row groups) into the
/// stages of parity `P` and commits them as one group.
///
/// # Safety
/// The launcher's contract; `slab < slabs`; nothing reads the stages of parity `P` until the
/// group has been waited for and a barrier passed.
#[inline(always)]
unsafe fn copy_slab<const V: usize, const P: u32>(
    p: &VqGemmParams,
    base: u32,
    rb: u32,
    tb: u32,
    slab: u32,
    tid: u32,
) {
    let cols = p.cols as usize;
    // 128 tokens x 16 chunks of 8 columns: 8 per thread.
    for k in 0..(GEMM_TOKENS * 16 / GEMM_THREADS) {
        let c = k * GEMM_THREADS + tid;
        let (tok, j) = (c / 16, c % 16);
        let n = tb * GEMM_TOKENS + tok;
        let col = slab as usize * SLAB_COLS + 8 * j as usize;
        let inside = n < p.tokens && col < cols;
        let at = if inside { n as usize * cols + col } else { 0 };
        // SAFETY: inside: token n < tokens, columns col .. col + 8 <= cols (cols % 8 == 0), a
        // 16-byte-aligned chunk of x; outside: nothing is read (size 0) from x's start. The
        // destination is chunk j of token row tok in the stage of parity P.
        unsafe {
            cp_async_16_zfill(
                base + x_stage_base(P) + x_stage_offset(tok, 8 * j),
                p.x.as_ptr().add(at) as *const U32x4,
                if inside { 16 } else { 0 },
            )
        };
    }
    // SAFETY: the launcher's contract; rb < row_blocks, slab < slabs; the stage is ours.
    unsafe {
        copy_codes::<V, GEMM_THREADS>(p, base + code_stage_base(V, P), rb, slab, tid);
    }
    // SAFETY: closes this thread's copies of the slab.
    unsafe { cp_async_commit() };
}

/// The warp's sums: token tile `i` (4), row group `r` (4), half `h` (2), the MMA's 4 values.
type Acc = [[[[f32; 4]; 2]; 4]; 4];

/// One slab's MMAs on the stages and table of parity `P`.
///
/// # Safety
/// The stages and table of parity `P` hold the slab (after the barrier); the whole warp runs
/// it.
#[inline(always)]
unsafe fn compute<const V: usize, const P: u32>(base: u32, acc: &mut Acc, warp: u32, lane: u32) {
    let (wm, wn) = (warp % 2, warp / 2);
    let (g, t) = (lane / 4, lane % 4);
    let lo = lookup_offset(V, lane) + 128 * P;
    // The lane's codes of its 4 row groups.
    let mut codes = [[0u32; 8]; 4];
    for (r, c) in codes.iter_mut().enumerate() {
        let at = base + code_stage_base(V, P) + code_stage_offset(V, 4 * wn + r as u32, lane);
        // SAFETY: inside the code stage of parity P (written before the barrier).
        unsafe {
            match V {
                2 => {
                    let (a, b) = (lds_v4(at).0, lds_v4(at + 16).0);
                    *c = [a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]];
                }
                4 => {
                    let a = lds_v4(at).0;
                    *c = [a[0], a[1], a[2], a[3], 0, 0, 0, 0];
                }
                _ => {
                    let [a, b] = lds_v2(at);
                    *c = [a, b, 0, 0, 0, 0, 0, 0];
                }
            }
        }
    }
    let xs = base + x_stage_base(P);
    let mut e8 = [[[0u32; 4]; 2]; 4];
    const _: () = assert!(STEPS == 8);
    unroll!(s in [0 1 2 3 4 5 6 7], {
        let col = frag_col(V, s, t as usize) as u32;
        let mut a = [[0u32; 4]; 4];
        unroll!(i in [0 1 2 3], {
            let tok = 64 * wm + 16 * i as u32 + g;
            // SAFETY: tokens tok and tok + 8 < 128, columns col .. col + 4 <= 128: inside the
            // input stage of parity P.
            let ([x0, x2], [x1, x3]) = unsafe {
                (
                    lds_v2(xs + x_stage_offset(tok, col)),
                    lds_v2(xs + x_stage_offset(tok + 8, col)),
                )
            };
            a[i] = [x0, x1, x2, x3];
        });
        unroll!(r in [0 1 2 3], {
            let w = &codes[r];
            unroll!(h in [0 1], {
                // SAFETY: the table of parity P (after the barrier); lo < 256.
                let b = unsafe { frag_regs::<V>(w, s, h, lo, base, &mut e8[r][h]) };
                unroll!(i in [0 1 2 3], {
                    // SAFETY: the whole warp runs this (block-uniform control flow).
                    acc[i][r][h] = unsafe { mma_m16n8k16_f16_f32(a[i], b, acc[i][r][h]) };
                });
            });
        });
    });
}

/// Slab `j` on the buffers of parity `P`: waits for its copies, writes its table when its
/// tile differs from the one held, passes the barrier, starts the copies of slab `j + 1` and
/// loads its codebook entry, and multiplies.
///
/// # Safety
/// The launcher's contract; every thread of the block runs it with the same `j`; slab `j`'s
/// copies were committed as this thread's last group, and `entry` holds its table's entry
/// `tid` when `tile[P] != held[P]`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn slab<const V: usize, const P: u32>(
    p: &VqGemmParams,
    base: u32,
    rb: u32,
    tb: u32,
    j: u32,
    tiles: &mut [u32; 2],
    held: &mut [u32; 2],
    entry: &mut [u32; 4],
    acc: &mut Acc,
    tid: u32,
) {
    let slot = P as usize;
    // SAFETY: the group of slab j is this thread's only one in flight.
    unsafe { cp_async_wait_at_most(0) };
    if tiles[slot] != held[slot] {
        // SAFETY: table P was last read in slab j - 2, before the previous barrier.
        unsafe { write_entry::<V, P>(base, *entry, tid) };
        held[slot] = tiles[slot];
    }
    // SAFETY: every thread of the block reaches it.
    unsafe { sync_threads() };
    if j + 1 < p.slabs {
        // SAFETY: the stages of parity 1 - P were last read in slab j - 1, before the barrier.
        unsafe {
            if P == 0 {
                copy_slab::<V, 1>(p, base, rb, tb, j + 1, tid);
            } else {
                copy_slab::<V, 0>(p, base, rb, tb, j + 1, tid);
            }
        }
        let other = 1 - slot;
        tiles[other] = p.tile(rb, j + 1);
        if tiles[other] != held[other] {
            // SAFETY: a tile of the matrix; tid < 256.
            *entry = unsafe { load_entry::<V>(p.codebooks, tiles[other], tid) };
        }
    }
    // SAFETY: the slab's stages and table are written (barrier above).
    unsafe { compute::<V, P>(base, acc, tid / 32, tid % 32) };
}

/// The tensor-core VQ-GEMM (see `crate::gemm`).
///
/// # Safety
/// The launcher checked: `codes` holds `code_groups * slabs * 32 * lane_code_bytes(V)` bytes
/// laid out by `crate::mma::mma_codes` (16-byte aligned) with `code_groups >= 16 *
/// ceil(rows / 256)`, `codebooks` `tiles * 256 * V` values (16-byte aligned), `x` `tokens *
/// cols` halves (16-byte aligned, `cols % 8 == 0`), `y` `tokens * rows`; the geometry fields
/// come from an `MmaGeometry` of the matrix with this `V` and 2 row groups per warp; grid
/// `(ceil(rows / 256), ceil(tokens / 128))`, `GEMM_THREADS` threads per block,
/// `gemm_smem_bytes(V)` bytes of dynamic shared memory.
#[inline(always)]
unsafe fn vq_gemm<const V: usize>(p: &VqGemmParams) {
    let tid = thread_idx_x();
    let (rb, tb) = (block_idx_x(), block_idx_y());
    let base = dyn_smem_addr();
    let mut acc: Acc = [[[[0.0; 4]; 2]; 4]; 4];
    let mut tiles = [p.tile(rb, 0), u32::MAX];
    let mut held = [u32::MAX; 2];
    // SAFETY: slab 0 < slabs (cols > 0); its table's entry.
    let mut entry = unsafe {
        copy_slab::<V, 0>(p, base, rb, tb, 0, tid);
        load_entry::<V>(p.codebooks, tiles[0], tid)
    };
    let mut j = 0;
    loop {
        // SAFETY: the launcher's contract; block-uniform; slab j's copies are the last group.
        unsafe {
            slab::<V, 0>(
                p, base, rb, tb, j, &mut tiles, &mut held, &mut entry, &mut acc, tid,
            )
        };
        j += 1;
        if j == p.slabs {
            break;
        }
        // SAFETY: as above.
        unsafe {
            slab::<V, 1>(
                p, base, rb, tb, j, &mut tiles, &mut held, &mut entry, &mut acc, tid,
            )
        };
        j += 1;
        if j == p.slabs {
            break;
        }
    }
    // The sums: c[0], c[1] are token g, rows 2t, 2t + 1 of the half; c[2], c[3] token g + 8.
    let (warp, lane) = (tid / 32, tid % 32);
    let (wm, wn) = (warp % 2, warp / 2);
    let (g, t) = (lane / 4, lane % 4);
    let rows = p.rows as usize;
    let pairs = rows.is_multiple_of(2);
    // Unrolled, so that the sums stay in registers.
    unroll!(i in [0 1 2 3], {
        unroll!(r in [0 1 2 3], {
            unroll!(h in [0 1], {
                let c = acc[i][r][h];
                let row = rb * GEMM_ROWS + (4 * wn + r as u32) * 16 + 8 * h as u32 + 2 * t;
                unroll!(q in [0 1], {
                    let n = tb * GEMM_TOKENS + 64 * wm + 16 * i as u32 + g + 8 * q as u32;
                    if n < p.tokens && row < p.rows {
                        let at = n as usize * rows + row as usize;
                        let (v0, v1) = (c[2 * q], c[2 * q + 1]);
                        // SAFETY: n < tokens, row < rows: inside y; row + 1 only when < rows.
                        unsafe {
                            let y = p.y.as_mut_ptr();
                            if pairs && row + 1 < p.rows {
                                // at is even (rows and row are): 4-byte aligned.
                                *(y.add(at) as *mut u32) = f32x2_to_half2(v0, v1);
                            } else {
                                *y.add(at) = f32_to_f16(v0);
                                if row + 1 < p.rows {
                                    *y.add(at + 1) = f32_to_f16(v1);
                                }
                            }
                        }
                    }
                });
            });
        });
    });
}

macro_rules! gemm_entries {
    ($($name:ident = $v:literal;)*) => {$(
        /// The tensor-core VQ-GEMM for this vector size; see `crate::gemm`.
        ///
        /// # Safety
        /// As `vq_gemm`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: VqGemmParams) {
            // SAFETY: the launcher's checks are this kernel's contract.
            unsafe { vq_gemm::<$v>(&p) }
        }
    )*};
}

gemm_entries! {
    cmv_vq_gemm_v2 = 2;
    cmv_vq_gemm_v4 = 4;
    cmv_vq_gemm_v8 = 8;
}

// 256 threads, one block per SM: 128 sums per lane need up to 255 registers.
cmv_device::launch_bounds! {
    CMV_MAXNTID_cmv_vq_gemm_v2 = GEMM_THREADS;
    CMV_MINNCTAPERSM_cmv_vq_gemm_v2 = 1;
    CMV_MAXNTID_cmv_vq_gemm_v4 = GEMM_THREADS;
    CMV_MINNCTAPERSM_cmv_vq_gemm_v4 = 1;
    CMV_MAXNTID_cmv_vq_gemm_v8 = GEMM_THREADS;
    CMV_MINNCTAPERSM_cmv_vq_gemm_v8 = 1;
}
