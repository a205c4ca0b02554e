//! The kernels (NVPTX only). The layouts and arithmetic are in [`crate::layout`].

use cmv_device::{
    U32x4, ballot, block_idx_x, dyn_smem, dyn_smem_addr, f16_to_f32, f32_to_f16, grid_dim_x,
    lane_id, ld_nc_na_v4, ld_nc_u16, ld_nc_u32, ld_nc_v4, lds_v4, mma_m16n8k128_and_popc, popc,
    round_half_even_f32_to_i32, shfl_idx, shfl_xor, sts_v4, sync_threads, thread_idx_x, warp_id,
};

use crate::layout::{GROUP, PIVOTS, PLANES, QMAX, TILE_ROWS, lane_pivots};
use crate::{GEMV_WARPS, GemvParams, QUANT_WARPS, QuantParams};

/// `cmv_sbvr_quantize`: one warp per (vector, padded group); lane `l` owns columns
/// `l, l + 32, l + 64, l + 96` of the group, so the ballot of bit `a` of its `i`-th value is
/// word `i` of plane `a`.
///
/// # Safety
/// The launcher checked: `x` holds `batch * cols` halves, `planes` and `scales` the
/// geometry's `plane_words(batch)` and `scales_len(batch)`; `QUANT_WARPS` warps per block,
/// `ceil(batch * padded_groups / QUANT_WARPS)` blocks.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn cmv_sbvr_quantize(p: QuantParams) {
    let lane = lane_id();
    let w = block_idx_x() * QUANT_WARPS + warp_id();
    if w >= p.batch * p.padded_groups {
        return;
    }
    let (v, g) = (w / p.padded_groups, w % p.padded_groups);
    let mut x = [0f32; 4];
    let mut absmax = 0f32;
    let mut bad = false;
    for (i, xi) in x.iter_mut().enumerate() {
        let col = g * GROUP as u32 + 32 * i as u32 + lane;
        if col < p.cols {
            // SAFETY: v < batch and col < cols: inside x.
            let h = unsafe { ld_nc_u16(p.x.as_ptr().add((v * p.cols + col) as usize)) };
            *xi = f16_to_f32(h);
        }
        bad |= !xi.is_finite();
        absmax = absmax.max(xi.abs());
    }
    // SAFETY: the whole warp is here (the early return above is warp-uniform).
    let bad = unsafe { ballot(bad) } != 0;
    for m in [16, 8, 4, 2, 1] {
        // SAFETY: as above. Non-negative finite floats order as their bits.
        let o = f32::from_bits(unsafe { shfl_xor(absmax.to_bits(), m) });
        absmax = absmax.max(o);
    }
    let scale = if bad {
        f32::NAN
    } else if absmax == 0.0 {
        0.0
    } else {
        absmax / QMAX
    };
    let mut mine = 0u32;
    for (i, &xi) in x.iter().enumerate() {
        let q = if bad || absmax == 0.0 {
            0
        } else {
            round_half_even_f32_to_i32(xi / scale).clamp(-127, 127)
        };
        let byte = q as u32;
        for a in 0..PLANES as u32 {
            // SAFETY: as above.
            let word = unsafe { ballot((byte >> a) & 1 != 0) };
            if lane == a * 4 + i as u32 {
                mine = word;
            }
        }
    }
    let base = (v * p.padded_groups + g) as usize;
    // SAFETY: base < batch * padded_groups: word base * 32 + lane and scale base are inside.
    unsafe {
        *p.planes.as_mut_ptr().add(base * 32 + lane as usize) = mine;
        if lane == 0 {
            *p.scales.as_mut_ptr().add(base) = scale;
        }
    }
}

/// Coefficient `j` of a cache entry loaded as 8 halves.
#[inline(always)]
fn coef(e: &U32x4, j: usize) -> f32 {
    f16_to_f32((e.0[j / 2] >> (16 * (j % 2))) as u16)
}

/// The inner product step: the per-row plane-weighted popcounts `P_j` of one bitvector (two
/// rows: `a[0]` row `l / 4`, `a[1]` row `l / 4 + 8`) against one vector's planes.
trait Dot {
    /// What a lane keeps of one (vector, group): its `B` fragment, or the 8 plane words of
    /// its quarter of the group.
    type X: Copy;
    /// Loads it from the lane's plane word `xb` (plane `l / 4`, word `l % 4`).
    ///
    /// # Safety
    /// The whole warp calls it.
    unsafe fn load(xb: u32, t: u32) -> Self::X;
    /// `P_j` for both rows (the lane's part of it; the quad's four parts sum to the whole).
    ///
    /// # Safety
    /// The whole warp calls it.
    unsafe fn dot(a: [u32; 2], x: Self::X, piv: (i32, i32)) -> (i32, i32);
}

/// The binary tensor-core way.
struct Mma;

impl Dot for Mma {
    type X = u32;

    #[inline(always)]
    unsafe fn load(xb: u32, _t: u32) -> u32 {
        xb
    }

    #[inline(always)]
    unsafe fn dot(a: [u32; 2], x: u32, piv: (i32, i32)) -> (i32, i32) {
        // SAFETY: the caller runs it with the whole warp.
        let d = unsafe { mma_m16n8k128_and_popc(a, x, [0; 4]) };
        let p0 = d[0] as i32 * piv.0 + d[1] as i32 * piv.1;
        let p1 = d[2] as i32 * piv.0 + d[3] as i32 * piv.1;
        (p0, p1)
    }
}

/// The CUDA-core way: AND + popc over the lane's 32 columns, all 8 planes.
struct Popc;

impl Dot for Popc {
    type X = [u32; PLANES];

    #[inline(always)]
    unsafe fn load(xb: u32, t: u32) -> [u32; PLANES] {
        // SAFETY: the caller runs it with the whole warp; plane a, word t is on lane 4 a + t.
        core::array::from_fn(|a| unsafe { shfl_idx(xb, 4 * a as u32 + t) })
    }

    #[inline(always)]
    unsafe fn dot(a: [u32; 2], x: [u32; PLANES], _piv: (i32, i32)) -> (i32, i32) {
        let (mut p0, mut p1) = (0i32, 0i32);
        for (k, &xa) in x.iter().enumerate() {
            p0 += PIVOTS[k] * popc(a[0] & xa) as i32;
            p1 += PIVOTS[k] * popc(a[1] & xa) as i32;
        }
        (p0, p1)
    }
}

/// `unroll!(i < N, { body })`: the body once for each `i` in `0..N` (`N <= 16`, a constant),
/// as straight-line code with `i` a constant in each copy, so arrays indexed by `i` stay in
/// registers (LLVM does not always unroll loops this large by itself).
macro_rules! unroll {
    ($i:ident < $n:expr, $body:block) => {
        unroll!(@ $i, $n, $body, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
    };
    (@ $i:ident, $n:expr, $body:block, $($k:literal)*) => {
        $({
            #[allow(clippy::reversed_empty_ranges)]
            const K: usize = $k;
            if K < $n {
                let $i = K;
                $body
            }
        })*
    };
}

/// One pair's loads: lane `l`'s 16 bytes of each bitvector (`N` slots, `n` used) and the
/// index words of rows `l / 4` and `l / 4 + 8` (both groups, `u16` each).
#[derive(Clone, Copy)]
struct Stage<const N: usize, const X: usize> {
    w: [U32x4; N],
    i0: u32,
    i1: u32,
    /// The first `X` vectors' plane words and scales of both groups (`[v][h]`).
    x: [[u32; 2]; X],
    s: [[f32; 2]; X],
}

/// Issues the loads of `pair`.
///
/// # Safety
/// `pair < pairs`; the buffers are as the launcher checked.
#[inline(always)]
unsafe fn load_stage<const N: usize, const X: usize>(
    p: &GemvParams,
    tile: u32,
    pair: u32,
    n: usize,
) -> Stage<N, X> {
    let lane = lane_id();
    let r0 = (lane / 4) as usize;
    let unit = (tile * p.pairs + pair) as usize;
    let mut w = [U32x4([0; 4]); N];
    unroll!(j < N, {
        if j < n {
            // SAFETY: unit < tiles * pairs, j < nbits: inside the bitvectors.
            w[j] = unsafe { ld_nc_na_v4(p.bits.as_ptr().add((unit * n + j) * 32 + lane as usize)) };
        }
    });
    let ib = unit * TILE_ROWS * 2;
    let (i0, i1) = if p.index_u16 != 0 {
        let ip = p.index.as_ptr() as *const u32;
        // SAFETY: entries ib + 2 r .. + 2 of a u16 array inside the index array (4-aligned).
        unsafe {
            (
                ld_nc_u32(ip.add(ib / 2 + r0)),
                ld_nc_u32(ip.add(ib / 2 + r0 + 8)),
            )
        }
    } else {
        let ip = p.index.as_ptr() as *const u16;
        // SAFETY: as above, u8 entries (2-aligned).
        unsafe {
            let a = u32::from(ld_nc_u16(ip.add(ib / 2 + r0)));
            let b = u32::from(ld_nc_u16(ip.add(ib / 2 + r0 + 8)));
            ((a & 0xff) | ((a >> 8) << 16), (b & 0xff) | ((b >> 8) << 16))
        }
    };
    let pg = 2 * p.pairs as usize;
    let mut x = [[0u32; 2]; X];
    let mut s = [[0f32; 2]; X];
    unroll!(v < X, {
        if (v as u32) < p.batch {
            unroll!(h < 2, {
                let g = 2 * pair as usize + h;
                // SAFETY: v < batch, g < padded groups: inside the planes and scales.
                unsafe {
                    x[v][h] = ld_nc_u32(p.planes.as_ptr().add((v * pg + g) * 32 + lane as usize));
                    s[v][h] =
                        f32::from_bits(ld_nc_u32(p.scales.as_ptr().add(v * pg + g) as *const u32));
                }
            });
        }
    });
    Stage { w, i0, i1, x, s }
}

/// The GEMV: see the crate documentation. `N` bitvector slots (`N == nbits`, or 8 for any
/// `nbits`), `B` vectors at most. Each warp keeps the loads of its next pair in flight while
/// it computes the current one; the coefficient cache is copied to shared memory first when
/// [`GemvParams::smem_cache`] says so.
///
/// # Safety
/// The launcher checked: the buffers hold the geometry's sizes for `rows`, `pairs`, `nbits`
/// and `batch`, `1 <= batch <= B`, `nbits <= N`; every index is below `entries`;
/// `GEMV_WARPS` warps per block, any number of blocks (each walks the tiles `block, block +
/// grid, ...`), `gemv_smem_bytes(B, entries)` bytes of dynamic shared memory.
#[inline(always)]
unsafe fn gemv<D: Dot, const B: usize, const N: usize, const X: usize>(p: &GemvParams) {
    let (lane, warp) = (lane_id(), warp_id());
    let t = lane % 4;
    let r0 = lane / 4;
    let pairs = p.pairs;
    let n = if N < 8 { N } else { p.nbits as usize };
    let piv = lane_pivots(t);
    let pg = 2 * pairs as usize;
    let zero = Stage {
        w: [U32x4([0; 4]); N],
        i0: 0,
        i1: 0,
        x: [[0; 2]; X],
        s: [[0.0; 2]; X],
    };
    // Work items of this warp, in order: (tile, pair) for tile = block, block + grid, ... and
    // pair = warp, warp + GEMV_WARPS, ... (every warp of a block walks the same tiles).
    let first_pair = warp;
    let step = grid_dim_x();
    let mut tile = block_idx_x();
    let next_item = |tile: u32, pair: u32| -> (u32, u32) {
        if pair + GEMV_WARPS < pairs {
            (tile, pair + GEMV_WARPS)
        } else {
            (tile + step, first_pair)
        }
    };
    let valid = |tile: u32, pair: u32| tile < p.tiles && pair < pairs;
    let mut pair = first_pair;
    // SAFETY: a valid item.
    let mut cur = if valid(tile, pair) {
        unsafe { load_stage::<N, X>(p, tile, pair, n) }
    } else {
        zero
    };
    // The coefficient cache in shared memory, behind the block's sums (two buffers).
    let cache_addr = dyn_smem_addr() + 2 * crate::gemv_red_bytes(B as u32);
    let cp = p.coeffs.as_ptr();
    let smem_cache = p.smem_cache != 0;
    if smem_cache {
        let mut e = thread_idx_x();
        while e < p.entries {
            // SAFETY: e < entries: inside the cache and inside the shared copy.
            unsafe { sts_v4(cache_addr + 16 * e, ld_nc_v4(cp.add(e as usize))) };
            e += GEMV_WARPS * 32;
        }
    }
    // SAFETY: every thread reaches it.
    unsafe { sync_threads() };
    let entry = |e: u32| -> U32x4 {
        // SAFETY: e < entries (checked on upload): inside the cache or its shared copy.
        unsafe {
            if smem_cache {
                lds_v4(cache_addr + 16 * e)
            } else {
                ld_nc_v4(cp.add(e as usize))
            }
        }
    };
    let red = dyn_smem() as *mut f32;
    let mut parity = 0usize;
    while tile < p.tiles {
        let mut acc = [[0f32; 2]; B];
        while pair < pairs {
            let (nt, np) = next_item(tile, pair);
            // SAFETY: a valid item.
            let nxt = if valid(nt, np) {
                unsafe { load_stage::<N, X>(p, nt, np, n) }
            } else {
                zero
            };
            let e = [
                [entry(cur.i0 & 0xffff), entry(cur.i1 & 0xffff)],
                [entry(cur.i0 >> 16), entry(cur.i1 >> 16)],
            ];
            unroll!(h < 2, {
                let g = 2 * pair as usize + h;
                unroll!(v < B, {
                    if (v as u32) < p.batch {
                        let (xb, s) = if v < X {
                            (cur.x[v][h], cur.s[v][h])
                        } else {
                            let wo = (v * pg + g) * 32;
                            // SAFETY: v < batch, g < padded groups: inside the planes and
                            // scales.
                            unsafe {
                                (
                                    ld_nc_u32(p.planes.as_ptr().add(wo + lane as usize)),
                                    f32::from_bits(ld_nc_u32(
                                        p.scales.as_ptr().add(v * pg + g) as *const u32
                                    )),
                                )
                            }
                        };
                        // SAFETY: the whole warp runs this loop (pair is warp-uniform).
                        let x = unsafe { D::load(xb, t) };
                        let mut part = [0f32; 2];
                        unroll!(j < N, {
                            if j < n {
                                let a = [cur.w[j].0[2 * h], cur.w[j].0[2 * h + 1]];
                                // SAFETY: as above.
                                let (p0, p1) = unsafe { D::dot(a, x, piv) };
                                part[0] += coef(&e[h][0], j) * p0 as f32;
                                part[1] += coef(&e[h][1], j) * p1 as f32;
                            }
                        });
                        acc[v][0] += s * part[0];
                        acc[v][1] += s * part[1];
                    }
                });
            });
            cur = nxt;
            pair = np;
            if nt != tile {
                break;
            }
        }
        // A warp with no pair of this tile (pairs < GEMV_WARPS) still takes part.
        if pair >= pairs {
            pair = first_pair;
        }
        // The quad's four lanes hold parts of the same two rows.
        for acc_v in acc.iter_mut() {
            for a in acc_v.iter_mut() {
                for m in [1, 2] {
                    // SAFETY: every lane reaches this point.
                    *a += f32::from_bits(unsafe { shfl_xor(a.to_bits(), m) });
                }
            }
        }
        let base = parity * GEMV_WARPS as usize * B * TILE_ROWS;
        if t == 0 {
            for (v, acc_v) in acc.iter().enumerate() {
                let o = base + ((warp as usize * B + v) * TILE_ROWS) + r0 as usize;
                // SAFETY: warp < GEMV_WARPS, v < B: inside 2 * gemv_red_bytes(B).
                unsafe {
                    *red.add(o) = acc_v[0];
                    *red.add(o + 8) = acc_v[1];
                }
            }
        }
        // SAFETY: every thread of the block reaches it (all walk the same tiles). The sums of
        // the other parity, read after the previous barrier, are written again only after
        // the next one.
        unsafe { sync_threads() };
        let mut i = thread_idx_x() as usize;
        while i < B * TILE_ROWS {
            let (v, r) = (i / TILE_ROWS, i % TILE_ROWS);
            let mut s = 0f32;
            for wi in 0..GEMV_WARPS as usize {
                // SAFETY: inside the sums written above.
                s += unsafe { *red.add(base + (wi * B + v) * TILE_ROWS + r) };
            }
            let row = tile as usize * TILE_ROWS + r;
            if row < p.rows as usize && v < p.batch as usize {
                // SAFETY: v < batch, row < rows: inside y.
                unsafe { *p.y.as_mut_ptr().add(v * p.rows as usize + row) = f32_to_f16(s) };
            }
            i += (GEMV_WARPS * 32) as usize;
        }
        parity ^= 1;
        tile += step;
    }
}

macro_rules! entries {
    ($($name:ident = $d:ty, $b:literal, $n:literal, $x:literal;)*) => {$(
        /// SBVR GEMV for up to `B` vectors and `N` bitvector slots (see the crate docs).
        ///
        /// # Safety
        /// As `gemv`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: GemvParams) {
            // SAFETY: the launcher's checks are this kernel's contract.
            unsafe { gemv::<$d, $b, $n, $x>(&p) }
        }
    )*};
}

entries! {
    cmv_sbvr_gemv_mma_n2_b1 = Mma, 1, 2, 1;
    cmv_sbvr_gemv_mma_n2_b2 = Mma, 2, 2, 2;
    cmv_sbvr_gemv_mma_n2_b4 = Mma, 4, 2, 0;
    cmv_sbvr_gemv_mma_n2_b8 = Mma, 8, 2, 0;
    cmv_sbvr_gemv_mma_n2_b16 = Mma, 16, 2, 0;
    cmv_sbvr_gemv_mma_n3_b1 = Mma, 1, 3, 1;
    cmv_sbvr_gemv_mma_n3_b2 = Mma, 2, 3, 2;
    cmv_sbvr_gemv_mma_n3_b4 = Mma, 4, 3, 0;
    cmv_sbvr_gemv_mma_n3_b8 = Mma, 8, 3, 0;
    cmv_sbvr_gemv_mma_n3_b16 = Mma, 16, 3, 0;
    cmv_sbvr_gemv_mma_n4_b1 = Mma, 1, 4, 1;
    cmv_sbvr_gemv_mma_n4_b2 = Mma, 2, 4, 2;
    cmv_sbvr_gemv_mma_n4_b4 = Mma, 4, 4, 0;
    cmv_sbvr_gemv_mma_n4_b8 = Mma, 8, 4, 0;
    cmv_sbvr_gemv_mma_n4_b16 = Mma, 16, 4, 0;
    cmv_sbvr_gemv_mma_n8_b1 = Mma, 1, 8, 1;
    cmv_sbvr_gemv_mma_n8_b2 = Mma, 2, 8, 2;
    cmv_sbvr_gemv_mma_n8_b4 = Mma, 4, 8, 0;
    cmv_sbvr_gemv_mma_n8_b8 = Mma, 8, 8, 0;
    cmv_sbvr_gemv_mma_n8_b16 = Mma, 16, 8, 0;
    cmv_sbvr_gemv_popc_n8_b1 = Popc, 1, 8, 1;
    cmv_sbvr_gemv_popc_n8_b2 = Popc, 2, 8, 2;
    cmv_sbvr_gemv_popc_n8_b4 = Popc, 4, 8, 0;
    cmv_sbvr_gemv_popc_n8_b8 = Popc, 8, 8, 0;
    cmv_sbvr_gemv_popc_n8_b16 = Popc, 16, 8, 0;
}
