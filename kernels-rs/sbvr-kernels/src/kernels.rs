//! The kernels (NVPTX only). The layouts and arithmetic are in [`crate::layout`].
// Public only for `entry_points!` (hidden): no host code sees these types.
#![allow(missing_debug_implementations)]

use cmv_device::{
    U32x4, ballot, block_idx_x, cp_async_16_ca_zfill, cp_async_commit, cp_async_wait, dyn_smem,
    dyn_smem_addr, f16_to_f32, f32_to_f16, fma_f32, grid_dim_x, griddepcontrol_launch_dependents,
    griddepcontrol_wait, lane_id, ld_nc_na_v4, ld_nc_u16, ld_nc_u32, ld_nc_v4, lds_v4,
    mma_m16n8k32_u8s8, mma_m16n8k128_and_popc, popc, round_half_even_f32_to_i32, shfl_idx,
    shfl_xor, sts_v4, sync_threads, thread_idx_x, warp_id,
};

use crate::layout::{
    GROUP, MAGIC, MAGIC_F32, PIVOTS, PLANES, Q8_GROUP_BYTES, Q8_STEPS, QMAX, TILE_ROWS, expand,
    lane_pivot_split, q8_offset,
};
use crate::{GEMV_WARPS, GemvParams, QUANT_BYTES, QUANT_WARPS, QuantParams};

/// `cmv_sbvr_quantize`: one warp per (vector, padded group); lane `l` owns columns
/// `l, l + 32, l + 64, l + 96` of the group, so the ballot of bit `a` of its `i`-th value is
/// word `i` of plane `a`. With `PDL` (the sm_90a module) each block first lets the GEMV
/// launched after it start (`griddepcontrol.launch_dependents`); the GEMV waits for this
/// grid's completion before it reads the planes. Then it waits for the grid before it
/// (`griddepcontrol.wait`; at once where that grid was an ordinary launch's predecessor), so
/// that it may itself be launched programmatically: it reads `x`, which the kernel before may
/// write, and rewrites the planes, which the GEMV before reads, only after that kernel ended.
///
/// # Safety
/// The launcher checked: `x` holds `batch * cols` halves, `planes` and `scales` the
/// geometry's `plane_words(batch)` and `scales_len(batch)`; `QUANT_WARPS` warps per block,
/// `ceil(batch * padded_groups / QUANT_WARPS)` blocks. `PDL` only in sm_90 code.
#[doc(hidden)]
#[inline(always)]
pub unsafe fn quantize<const PDL: bool>(p: &QuantParams) {
    if PDL {
        // SAFETY: sm_90 code (the caller's contract). Nothing is read or written before the
        // wait.
        unsafe {
            griddepcontrol_launch_dependents();
            griddepcontrol_wait();
        }
    }
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
    let base = (v * p.padded_groups + g) as usize;
    let mut mine = 0u32;
    for (i, &xi) in x.iter().enumerate() {
        let q = if bad || absmax == 0.0 {
            0
        } else {
            round_half_even_f32_to_i32(xi / scale).clamp(-127, 127)
        };
        if p.output == QUANT_BYTES {
            let k = 32 * i + lane as usize;
            // SAFETY: base < batch * padded_groups: its 128 bytes are inside the buffer of
            // plane_words(batch) words.
            unsafe {
                *(p.planes.as_mut_ptr() as *mut u8).add(base * Q8_GROUP_BYTES + q8_offset(k)) =
                    q as u8;
            }
            continue;
        }
        let byte = q as u32;
        for a in 0..PLANES as u32 {
            // SAFETY: as above.
            let word = unsafe { ballot((byte >> a) & 1 != 0) };
            if lane == a * 4 + i as u32 {
                mine = word;
            }
        }
    }
    // SAFETY: base < batch * padded_groups: word base * 32 + lane and scale base are inside.
    unsafe {
        if p.output != QUANT_BYTES {
            *p.planes.as_mut_ptr().add(base * 32 + lane as usize) = mine;
        }
        if lane == 0 {
            *p.scales.as_mut_ptr().add(base) = scale;
        }
    }
}

/// Coefficient `j` of a cache entry as the kernels of `N` bitvector slots read it: for `N <=
/// 4` four f32 ([`crate::f32_coefficients`]), else 8 halves.
#[inline(always)]
fn coef<const N: usize>(e: &U32x4, j: usize) -> f32 {
    if N <= 4 {
        f32::from_bits(e.0[j])
    } else {
        f16_to_f32((e.0[j / 2] >> (16 * (j % 2))) as u16)
    }
}

/// The inner product step: the per-row plane-weighted popcounts `P_j` of one bitvector (two
/// rows: `a[0]` row `l / 4`, `a[1]` row `l / 4 + 8`) against one vector's planes.
#[doc(hidden)]
pub trait Dot {
    /// What a lane keeps of one (vector, group): its `B` fragment, or the 8 plane words of
    /// its quarter of the group.
    type X: Copy;
    /// Loads it from the lane's plane word `xb` (plane `l / 4`, word `l % 4`).
    ///
    /// # Safety
    /// The whole warp calls it.
    unsafe fn load(xb: u32, t: u32) -> Self::X;
    /// The factor lane quad position `t` takes on the vector's scale: [`Dot::dot`] gives the
    /// lane's part of `P_j` divided by it (a power of two, so every sum keeps its bits).
    fn scale(t: u32) -> f32;
    /// `P_j / scale(t)` for both rows (the lane's part of it; the quad's four parts, each times
    /// its `scale`, sum to the whole).
    ///
    /// # Safety
    /// The whole warp calls it.
    unsafe fn dot(a: [u32; 2], x: Self::X, t: u32) -> (i32, i32);
}

/// The binary tensor-core way.
#[doc(hidden)]
pub struct Mma;

impl Dot for Mma {
    type X = u32;

    #[inline(always)]
    unsafe fn load(xb: u32, _t: u32) -> u32 {
        xb
    }

    #[inline(always)]
    fn scale(t: u32) -> f32 {
        lane_pivot_split(t).1
    }

    #[inline(always)]
    unsafe fn dot(a: [u32; 2], x: u32, t: u32) -> (i32, i32) {
        // SAFETY: the caller runs it with the whole warp.
        let d = unsafe { mma_m16n8k128_and_popc(a, x, [0; 4]) };
        // Columns 2 t, 2 t + 1 weigh f and m f (lane_pivot_split): f comes on the scale.
        let m = lane_pivot_split(t).0;
        let p0 = d[0] as i32 + d[1] as i32 * m;
        let p1 = d[2] as i32 + d[3] as i32 * m;
        (p0, p1)
    }
}

/// The CUDA-core way: AND + popc over the lane's 32 columns, all 8 planes.
#[doc(hidden)]
pub struct Popc;

impl Dot for Popc {
    type X = [u32; PLANES];

    #[inline(always)]
    unsafe fn load(xb: u32, t: u32) -> [u32; PLANES] {
        // SAFETY: the caller runs it with the whole warp; plane a, word t is on lane 4 a + t.
        core::array::from_fn(|a| unsafe { shfl_idx(xb, 4 * a as u32 + t) })
    }

    #[inline(always)]
    fn scale(_t: u32) -> f32 {
        1.0
    }

    #[inline(always)]
    unsafe fn dot(a: [u32; 2], x: [u32; PLANES], _t: u32) -> (i32, i32) {
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
#[doc(hidden)]
pub struct Stage<const N: usize, const X: usize> {
    w: [U32x4; N],
    i0: u32,
    i1: u32,
    /// The first `X` vectors' plane words and scales of both groups (`[v][h]`).
    x: [[u32; 2]; X],
    s: [[f32; 2]; X],
}

/// Issues the loads of the first `X` vectors' plane words and scales of both groups of `pair`
/// into `st`.
///
/// # Safety
/// `pair < pairs`; the buffers are as the launcher checked.
#[inline(always)]
unsafe fn load_plane_words<const N: usize, const X: usize>(
    p: &GemvParams,
    st: &mut Stage<N, X>,
    pair: u32,
) {
    let lane = lane_id();
    let pg = 2 * p.pairs as usize;
    unroll!(v < X, {
        if (v as u32) < p.batch {
            unroll!(h < 2, {
                let g = 2 * pair as usize + h;
                // SAFETY: v < batch, g < padded groups: inside the planes and scales.
                unsafe {
                    st.x[v][h] =
                        ld_nc_u32(p.planes.as_ptr().add((v * pg + g) * 32 + lane as usize));
                    st.s[v][h] =
                        f32::from_bits(ld_nc_u32(p.scales.as_ptr().add(v * pg + g) as *const u32));
                }
            });
        }
    });
}

/// Issues the weight loads of `pair`: lane `l`'s 16 bytes of each bitvector (`N` slots, `n`
/// used) and the index words of rows `l / 4` and `l / 4 + 8`, as loaded: with `u16` indices
/// group 0 in the low half and group 1 in the high half; with `u8` indices the two bytes in
/// the low half, which [`index_words`] spreads when the stage is used (so that no arithmetic
/// waits on the load right after it is issued).
///
/// # Safety
/// `pair < pairs`; the buffers are as the launcher checked.
#[inline(always)]
unsafe fn load_weights<const N: usize>(
    p: &GemvParams,
    tile: u32,
    pair: u32,
    n: usize,
) -> ([U32x4; N], u32, u32) {
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
            (
                u32::from(ld_nc_u16(ip.add(ib / 2 + r0))),
                u32::from(ld_nc_u16(ip.add(ib / 2 + r0 + 8))),
            )
        }
    };
    (w, i0, i1)
}

/// A stage's index words as [`Way::indices`] gives them (as [`load_weights`] loaded them),
/// turned into group 0 in the low half and group 1 in the high half.
#[inline(always)]
fn index_words(p: &GemvParams, (i0, i1): (u32, u32)) -> (u32, u32) {
    if p.index_u16 != 0 {
        (i0, i1)
    } else {
        let spread = |a: u32| (a & 0xff) | ((a >> 8) << 16);
        (spread(i0), spread(i1))
    }
}

/// One kernel family of the GEMV: what a warp loads and computes per pair of groups, and how
/// it hands its sums of a tile to the block. [`gemv`] walks the work items.
#[doc(hidden)]
pub trait Way<const N: usize> {
    /// Vectors the kernel takes (the block's sums hold this many).
    const B: usize;
    /// Bytes of shared memory each warp's ring of loads takes (behind the cache).
    const RING: u32;
    /// Items whose loads a warp keeps in flight while it computes one (1 or 2).
    const DEPTH: u32;
    /// The loads of one pair, issued one pair ahead.
    type Stage: Copy;
    /// A warp's sums over its pairs of one tile.
    type Acc: Copy;
    /// The stage's index words of rows `l / 4`, `l / 4 + 8`, as [`load_weights`] loaded them
    /// ([`index_words`] spreads them).
    fn indices(s: &Self::Stage) -> (u32, u32);
    /// Zero sums.
    fn zero() -> Self::Acc;
    /// Issues the weight loads (bitvectors, indices) of `pair` of `tile` when `valid` (else a
    /// stage of zeros); the inputs follow with [`Way::load_inputs`].
    ///
    /// # Safety
    /// The whole warp calls it. When `valid`: `tile < tiles`, `pair < pairs`; the buffers as
    /// the launcher checked.
    unsafe fn load_weights(
        p: &GemvParams,
        tile: u32,
        pair: u32,
        n: usize,
        valid: bool,
    ) -> Self::Stage;
    /// Issues the loads of the quantized inputs of `pair` into `st` (or the warp's ring) when
    /// `valid`; `k` counts the warp's items (0, 1, ...), `ring` is the warp's ring in shared
    /// memory ([`Way::RING`] bytes).
    ///
    /// # Safety
    /// As [`Way::load_weights`], for the stage it returned for the same item.
    unsafe fn load_inputs(
        p: &GemvParams,
        st: &mut Self::Stage,
        pair: u32,
        k: u32,
        valid: bool,
        ring: u32,
    );
    /// Both loads of an item.
    ///
    /// # Safety
    /// As [`Way::load_weights`].
    #[inline(always)]
    unsafe fn load(
        p: &GemvParams,
        tile: u32,
        pair: u32,
        n: usize,
        k: u32,
        valid: bool,
        ring: u32,
    ) -> Self::Stage {
        // SAFETY: the caller's contract.
        unsafe {
            let mut st = Self::load_weights(p, tile, pair, n, valid);
            Self::load_inputs(p, &mut st, pair, k, valid, ring);
            st
        }
    }
    /// Adds the pair's products to `acc`; `e[h][r]` is the cache entry of group `h` of the
    /// pair for row `l / 4` (`r` = 0) and `l / 4 + 8` (`r` = 1).
    ///
    /// # Safety
    /// The whole warp calls it, with the stage of `pair` and the warp's `ring`, after issuing
    /// the loads of exactly one more item (valid or not).
    unsafe fn pair(
        p: &GemvParams,
        cur: &Self::Stage,
        pair: u32,
        n: usize,
        e: &[[U32x4; 2]; 2],
        ring: u32,
        acc: &mut Self::Acc,
    );
    /// Writes the warp's sums: row `r` of the tile, vector `v` at `red[(warp * B + v) * 16 +
    /// r]`.
    ///
    /// # Safety
    /// The whole warp calls it; `red` points at `GEMV_WARPS * B * 16` writable floats of
    /// shared memory.
    unsafe fn store(acc: &mut Self::Acc, red: *mut f32, warp: u32);
}

/// The bit-plane ways (binary tensor cores or CUDA cores, [`Dot`]): `B` vectors, the first
/// `X` of them loaded one pair ahead.
#[doc(hidden)]
pub struct Planes<D, const B: usize, const X: usize, const DEEP: bool>(
    core::marker::PhantomData<D>,
);

impl<D: Dot, const B: usize, const N: usize, const X: usize, const DEEP: bool> Way<N>
    for Planes<D, B, X, DEEP>
{
    const B: usize = B;
    const RING: u32 = 0;
    const DEPTH: u32 = if DEEP { 2 } else { 1 };
    type Stage = Stage<N, X>;
    type Acc = [[f32; 2]; B];

    #[inline(always)]
    fn indices(s: &Stage<N, X>) -> (u32, u32) {
        (s.i0, s.i1)
    }

    #[inline(always)]
    fn zero() -> [[f32; 2]; B] {
        [[0.0; 2]; B]
    }

    #[inline(always)]
    unsafe fn load_weights(
        p: &GemvParams,
        tile: u32,
        pair: u32,
        n: usize,
        valid: bool,
    ) -> Stage<N, X> {
        let mut st = Stage {
            w: [U32x4([0; 4]); N],
            i0: 0,
            i1: 0,
            x: [[0; 2]; X],
            s: [[0.0; 2]; X],
        };
        if valid {
            // SAFETY: the caller's contract.
            (st.w, st.i0, st.i1) = unsafe { load_weights::<N>(p, tile, pair, n) };
        }
        st
    }

    #[inline(always)]
    unsafe fn load_inputs(
        p: &GemvParams,
        st: &mut Stage<N, X>,
        pair: u32,
        _k: u32,
        valid: bool,
        _ring: u32,
    ) {
        if valid {
            // SAFETY: the caller's contract.
            unsafe { load_plane_words::<N, X>(p, st, pair) };
        }
    }

    #[inline(always)]
    unsafe fn pair(
        p: &GemvParams,
        cur: &Stage<N, X>,
        pair: u32,
        n: usize,
        e: &[[U32x4; 2]; 2],
        _ring: u32,
        acc: &mut [[f32; 2]; B],
    ) {
        let lane = lane_id();
        let t = lane % 4;
        let f = D::scale(t);
        let pg = 2 * p.pairs as usize;
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
                    // SAFETY: the whole warp runs this (pair is warp-uniform).
                    let x = unsafe { D::load(xb, t) };
                    let mut part = [0f32; 2];
                    unroll!(j < N, {
                        if j < n {
                            let a = [cur.w[j].0[2 * h], cur.w[j].0[2 * h + 1]];
                            // SAFETY: as above.
                            let (p0, p1) = unsafe { D::dot(a, x, t) };
                            part[0] = fma_f32(coef::<N>(&e[h][0], j), p0 as f32, part[0]);
                            part[1] = fma_f32(coef::<N>(&e[h][1], j), p1 as f32, part[1]);
                        }
                    });
                    // The parts are the lane's sums over f; (s f) part = s (f part) exactly.
                    let sf = s * f;
                    acc[v][0] = fma_f32(sf, part[0], acc[v][0]);
                    acc[v][1] = fma_f32(sf, part[1], acc[v][1]);
                }
            });
        });
    }

    #[inline(always)]
    unsafe fn store(acc: &mut [[f32; 2]; B], red: *mut f32, warp: u32) {
        let lane = lane_id();
        // The quad's four lanes hold parts of the same two rows.
        for acc_v in acc.iter_mut() {
            for a in acc_v.iter_mut() {
                for m in [1, 2] {
                    // SAFETY: the whole warp is here.
                    *a += f32::from_bits(unsafe { shfl_xor(a.to_bits(), m) });
                }
            }
        }
        if lane % 4 == 0 {
            for (v, acc_v) in acc.iter().enumerate() {
                let o = (warp as usize * B + v) * TILE_ROWS + (lane / 4) as usize;
                // SAFETY: warp < GEMV_WARPS, v < B: inside the caller's buffer.
                unsafe {
                    *red.add(o) = acc_v[0];
                    *red.add(o + 8) = acc_v[1];
                }
            }
        }
    }
}

/// The int8 way's loads of one pair kept in registers: the weights as [`load_weights`], and
/// the scales of vectors `8 hv + 2 (l % 4)` and `+ 1` (the lane's `D` columns) of each group
/// `h` of the pair and half `hv` of the vectors, as loaded (the sums' factor 128 of the
/// expanded bits comes off in [`Int8`]'s `store`: no arithmetic right behind the load). The
/// inputs go to the warp's ring in shared memory ([`Int8::ring_unit`]), in `slot`.
#[derive(Clone, Copy)]
#[doc(hidden)]
pub struct Stage8<const N: usize, const H: usize> {
    w: [U32x4; N],
    i0: u32,
    i1: u32,
    s: [[[f32; 2]; H]; 2],
    slot: u32,
}

/// The int8 tensor-core way: `8 H` vectors. Per group, bitvector and half of the vectors, four
/// `mma.m16n8k32` (u8 x s8) of the bitvector expanded to bytes ([`layout::expand`], 128 per
/// set bit) by the quantized inputs (8 vectors, the 8 columns) sum `128 P_j` exactly; the
/// accumulators start at [`MAGIC`] so that they read as floats with one subtraction. The
/// inputs of the next pair travel by `cp.async` into a per-warp ring of
/// [`crate::INT8_STAGES`] slots in shared memory (no registers held while they fly).
#[doc(hidden)]
pub struct Int8<const H: usize>;

impl<const H: usize> Int8<H> {
    /// The shared-memory address of the 16 bytes lane `lane` keeps of unit `u` (0, 1: its 32
    /// bytes of a group) of group `h` of the pair and half `hv` of the vectors, in `slot` of
    /// the ring at `ring`: lanes are adjacent, so the 16-byte accesses have no bank conflict.
    #[inline(always)]
    fn ring_unit(ring: u32, slot: u32, h: usize, hv: usize, u: usize, lane: u32) -> u32 {
        let per_slot = (2 * H * 2 * 32 * 16) as u32;
        ring + slot * per_slot + (((h * H + hv) * 2 + u) as u32 * 32 + lane) * 16
    }
}

impl<const N: usize, const H: usize> Way<N> for Int8<H> {
    const B: usize = 8 * H;
    const RING: u32 = crate::int8_ring_bytes(8 * H as u32);
    // The ring has INT8_STAGES = 2 slots: the item computed and the next.
    const DEPTH: u32 = 1;
    type Stage = Stage8<N, H>;
    type Acc = [[f32; 4]; H];

    #[inline(always)]
    fn indices(s: &Stage8<N, H>) -> (u32, u32) {
        (s.i0, s.i1)
    }

    #[inline(always)]
    fn zero() -> [[f32; 4]; H] {
        [[0.0; 4]; H]
    }

    #[inline(always)]
    unsafe fn load_weights(
        p: &GemvParams,
        tile: u32,
        pair: u32,
        n: usize,
        valid: bool,
    ) -> Stage8<N, H> {
        let mut st = Stage8 {
            w: [U32x4([0; 4]); N],
            i0: 0,
            i1: 0,
            s: [[[0.0; 2]; H]; 2],
            slot: 0,
        };
        if valid {
            // SAFETY: the caller's contract.
            (st.w, st.i0, st.i1) = unsafe { load_weights::<N>(p, tile, pair, n) };
        }
        st
    }

    #[inline(always)]
    unsafe fn load_inputs(
        p: &GemvParams,
        st: &mut Stage8<N, H>,
        pair: u32,
        k: u32,
        valid: bool,
        ring: u32,
    ) {
        let lane = lane_id();
        let (g8, t) = (lane / 4, lane % 4);
        let slot = k % crate::INT8_STAGES;
        st.slot = slot;
        if valid {
            let pg = 2 * p.pairs;
            let q = p.planes.as_ptr() as *const U32x4;
            for h in 0..2 {
                let g = 2 * pair + h as u32;
                for hv in 0..H {
                    let v = 8 * hv as u32 + g8;
                    // 16-byte units: the group's 128 bytes are 8 of them, the lane's 32 bytes
                    // start at unit 2 t. A vector past the batch reads nothing (zeros).
                    let (src, bytes) = if v < p.batch {
                        // SAFETY: v < batch, g < padded groups: inside the quantized inputs
                        // (plane_words(batch) words, 16-byte aligned).
                        (unsafe { q.add(((v * pg + g) * 8 + 2 * t) as usize) }, 16)
                    } else {
                        (q, 0)
                    };
                    for u in 0..2 {
                        // SAFETY: the source as above (u < 2 units of the lane's 32 bytes);
                        // the slot is this lane's own, last read by the pair two items ago,
                        // whose reads completed before its MMAs.
                        unsafe {
                            cp_async_16_ca_zfill(
                                Self::ring_unit(ring, slot, h, hv, u, lane),
                                src.add(if bytes == 0 { 0 } else { u }),
                                bytes,
                            )
                        };
                    }
                    for c in 0..2 {
                        let v = 8 * hv as u32 + 2 * t + c as u32;
                        if v < p.batch {
                            // SAFETY: v < batch, g < padded groups: inside the scales.
                            st.s[h][hv][c] = unsafe {
                                f32::from_bits(ld_nc_u32(
                                    p.scales.as_ptr().add((v * pg + g) as usize) as *const u32,
                                ))
                            };
                        }
                    }
                }
            }
        }
        // SAFETY: no operands; an empty group keeps the count of groups per item at one.
        unsafe { cp_async_commit() };
    }

    #[inline(always)]
    unsafe fn pair(
        _p: &GemvParams,
        cur: &Stage8<N, H>,
        _pair: u32,
        n: usize,
        e: &[[U32x4; 2]; 2],
        ring: u32,
        acc: &mut [[f32; 4]; H],
    ) {
        let lane = lane_id();
        // The next item's group is the newest: this item's bytes are in the ring after this.
        // SAFETY: no operands.
        unsafe { cp_async_wait::<1>() };
        for h in 0..2 {
            let mut x = [[U32x4([0; 4]); 2]; H];
            for (hv, xh) in x.iter_mut().enumerate() {
                for (u, xu) in xh.iter_mut().enumerate() {
                    // SAFETY: the lane's own bytes of this slot, complete after the wait.
                    *xu = unsafe { lds_v4(Self::ring_unit(ring, cur.slot, h, hv, u, lane)) };
                }
            }
            let mut ga = [[0f32; 4]; H];
            // Up to 4 bitvectors, the steps go outside so that consecutive MMAs are
            // independent (one accumulator per bitvector); more would take too many registers.
            if N <= 4 {
                let mut d = [[[MAGIC; 4]; H]; N];
                for st in 0..Q8_STEPS {
                    let r = 2 * st as u32;
                    unroll!(j < N, {
                        let (lo, hi) = (cur.w[j].0[2 * h], cur.w[j].0[2 * h + 1]);
                        let a = [
                            expand(lo, r),
                            expand(hi, r),
                            expand(lo, r + 1),
                            expand(hi, r + 1),
                        ];
                        for hv in 0..H {
                            let xw = &x[hv][st / 2].0;
                            let b = [xw[2 * (st % 2)], xw[2 * (st % 2) + 1]];
                            // SAFETY: the whole warp runs this (the pair is warp-uniform).
                            d[j][hv] = unsafe { mma_m16n8k32_u8s8(a, b, d[j][hv]) };
                        }
                    });
                }
                unroll!(j < N, {
                    let c = [coef::<N>(&e[h][0], j), coef::<N>(&e[h][1], j)];
                    for hv in 0..H {
                        for q in 0..4 {
                            let v = f32::from_bits(d[j][hv][q]) - MAGIC_F32;
                            ga[hv][q] = fma_f32(c[q / 2], v, ga[hv][q]);
                        }
                    }
                });
            } else {
                unroll!(j < N, {
                    if j < n {
                        let (lo, hi) = (cur.w[j].0[2 * h], cur.w[j].0[2 * h + 1]);
                        let mut d = [[MAGIC; 4]; H];
                        for st in 0..Q8_STEPS {
                            let r = 2 * st as u32;
                            let a = [
                                expand(lo, r),
                                expand(hi, r),
                                expand(lo, r + 1),
                                expand(hi, r + 1),
                            ];
                            for hv in 0..H {
                                let xw = &x[hv][st / 2].0;
                                let b = [xw[2 * (st % 2)], xw[2 * (st % 2) + 1]];
                                // SAFETY: the whole warp runs this (the pair is warp-uniform).
                                d[hv] = unsafe { mma_m16n8k32_u8s8(a, b, d[hv]) };
                            }
                        }
                        let c = [coef::<N>(&e[h][0], j), coef::<N>(&e[h][1], j)];
                        for hv in 0..H {
                            for q in 0..4 {
                                let v = f32::from_bits(d[hv][q]) - MAGIC_F32;
                                ga[hv][q] = fma_f32(c[q / 2], v, ga[hv][q]);
                            }
                        }
                    }
                });
            }
            for hv in 0..H {
                for q in 0..4 {
                    acc[hv][q] = fma_f32(cur.s[h][hv][q % 2], ga[hv][q], acc[hv][q]);
                }
            }
        }
    }

    #[inline(always)]
    unsafe fn store(acc: &mut [[f32; 4]; H], red: *mut f32, warp: u32) {
        let lane = lane_id();
        let (g8, t) = ((lane / 4) as usize, (lane % 4) as usize);
        let b = 8 * H;
        for hv in 0..H {
            for q in 0..4 {
                let v = 8 * hv + 2 * t + q % 2;
                let r = g8 + 8 * (q / 2);
                // The sums are 128 times the products (the expanded bits are 128): a power
                // of two, so taking it off here gives the bits it would give per product.
                // SAFETY: warp < GEMV_WARPS, v < 8 H = B, r < 16: inside the caller's buffer.
                unsafe {
                    *red.add((warp as usize * b + v) * TILE_ROWS + r) = acc[hv][q] * (1.0 / 128.0)
                };
            }
        }
    }
}

/// The GEMV: see the crate documentation. `N` bitvector slots (`N == nbits`, or 8 for any
/// `nbits`), `W::B` vectors at most. Each warp keeps the loads of its next pair in flight
/// while it computes the current one; the coefficient cache is copied to shared memory first
/// when [`GemvParams::smem_cache`] says so.
///
/// With `PDL` (the sm_90a module, launched with programmatic stream serialization after
/// `cmv_sbvr_quantize`) a warp issues the weight loads of its first item and copies the cache
/// before `griddepcontrol.wait`, so that they overlap the end of the quantization; only the
/// quantized inputs wait. It also lets the launch after it start at once
/// (`griddepcontrol.launch_dependents`): the next call's quantization, launched
/// programmatically, waits for this grid before it touches anything, and the next GEMV's first
/// weight loads then overlap this one's last tiles.
///
/// # Safety
/// The launcher checked: the buffers hold the geometry's sizes for `rows`, `pairs`, `nbits`
/// and `batch` (the planes, or for [`Int8`] the bytes, of `cmv_sbvr_quantize`), `1 <= batch
/// <= W::B`, `nbits <= N`; every index is below `entries`; `GEMV_WARPS` warps per block, any
/// number of blocks (each walks the tiles `block, block + grid, ...`), `gemv_smem_bytes(W::B,
/// entries)` bytes of dynamic shared memory (with the warps' rings). `PDL` only in sm_90 code;
/// nothing the grid launched before the quantization may still write is read before the wait.
#[doc(hidden)]
#[inline(always)]
pub unsafe fn gemv<W: Way<N>, const N: usize, const PDL: bool>(p: &GemvParams) {
    if PDL {
        // SAFETY: sm_90 code (the caller's contract); it only lets the next grid launch.
        unsafe { griddepcontrol_launch_dependents() };
    }
    let warp = warp_id();
    let b = W::B;
    let pairs = p.pairs;
    let n = if N < 8 { N } else { p.nbits as usize };
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
    // The coefficient cache in shared memory, behind the block's sums (two buffers), then the
    // warps' rings.
    let cache_addr = dyn_smem_addr() + 2 * crate::gemv_red_bytes(b as u32);
    let smem_cache = p.smem_cache != 0;
    let ring = cache_addr + if smem_cache { 16 * p.entries } else { 0 } + warp * W::RING;
    let mut k = 0u32;
    let deep = W::DEPTH == 2;
    // SAFETY: valid says whether the item is.
    let mut cur = unsafe { W::load_weights(p, tile, pair, n, valid(tile, pair)) };
    // With DEPTH 2, the item after `cur` ((t1, p1)) is loaded too (else an empty stage).
    let (mut t1, mut p1) = next_item(tile, pair);
    let v1 = deep && valid(t1, p1);
    // SAFETY: as above.
    let mut ahead = unsafe { W::load_weights(p, t1, p1, n, v1) };
    if !PDL {
        // SAFETY: as above, for the stages of the same items (`ahead` only used with DEPTH 2,
        // whose ways have no ring).
        unsafe {
            W::load_inputs(p, &mut cur, pair, k, valid(tile, pair), ring);
            if deep {
                W::load_inputs(p, &mut ahead, p1, k, v1, ring);
            }
        }
    }
    let cp = p.coeffs.as_ptr();
    if smem_cache {
        let mut e = thread_idx_x();
        while e < p.entries {
            // SAFETY: e < entries: inside the cache and inside the shared copy.
            unsafe { sts_v4(cache_addr + 16 * e, ld_nc_v4(cp.add(e as usize))) };
            e += GEMV_WARPS * 32;
        }
    }
    if PDL {
        // SAFETY: sm_90 code (the caller's contract); then the inputs as above.
        unsafe {
            griddepcontrol_wait();
            W::load_inputs(p, &mut cur, pair, k, valid(tile, pair), ring);
            if deep {
                W::load_inputs(p, &mut ahead, p1, k, v1, ring);
            }
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
        let mut acc = W::zero();
        while pair < pairs {
            let (nt, np) = next_item(tile, pair);
            k += 1;
            // The loads of the item DEPTH after this one.
            let (lt, lp) = if deep { next_item(t1, p1) } else { (nt, np) };
            // SAFETY: valid says whether the item is; the whole warp is here.
            let nxt = unsafe { W::load(p, lt, lp, n, k, valid(lt, lp), ring) };
            let (i0, i1) = index_words(p, W::indices(&cur));
            let e = [
                [entry(i0 & 0xffff), entry(i1 & 0xffff)],
                [entry(i0 >> 16), entry(i1 >> 16)],
            ];
            // SAFETY: the whole warp runs this loop (pair is warp-uniform), after the next
            // item's loads.
            unsafe { W::pair(p, &cur, pair, n, &e, ring, &mut acc) };
            if deep {
                cur = ahead;
                ahead = nxt;
                (t1, p1) = (lt, lp);
            } else {
                cur = nxt;
            }
            pair = np;
            if nt != tile {
                break;
            }
        }
        // A warp with no pair of this tile (pairs < GEMV_WARPS) still takes part.
        if pair >= pairs {
            pair = first_pair;
        }
        let base = parity * GEMV_WARPS as usize * b * TILE_ROWS;
        // SAFETY: every lane is here; the buffer of this parity holds GEMV_WARPS * b * 16
        // floats.
        unsafe { W::store(&mut acc, red.add(base), warp) };
        // SAFETY: every thread of the block reaches it (all walk the same tiles). The sums of
        // the other parity, read after the previous barrier, are written again only after
        // the next one.
        unsafe { sync_threads() };
        let mut i = thread_idx_x() as usize;
        while i < b * TILE_ROWS {
            let (v, r) = (i / TILE_ROWS, i % TILE_ROWS);
            let mut s = 0f32;
            for wi in 0..GEMV_WARPS as usize {
                // SAFETY: inside the sums written above.
                s += unsafe { *red.add(base + (wi * b + v) * TILE_ROWS + r) };
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

/// Defines every kernel entry point of the module: the quantization and the GEMV kernels,
/// with programmatic dependent launch when `$pdl` is `true` (the sm_90a module of
/// `sbvr-kernels-sm90`; `false` here), and their launch bounds.
#[doc(hidden)]
#[macro_export]
macro_rules! entry_points {
    ($pdl:literal) => {
        /// `cmv_sbvr_quantize` (see `sbvr_kernels::kernels::quantize`).
        ///
        /// # Safety
        /// As `quantize`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn cmv_sbvr_quantize(p: $crate::QuantParams) {
            // SAFETY: the launcher's checks are this kernel's contract.
            unsafe { $crate::kernels::quantize::<$pdl>(&p) }
        }

        $crate::entry_points!(@gemv $pdl;
            cmv_sbvr_gemv_mma_n2_b1 = Mma1<1, 1>, 2;
            cmv_sbvr_gemv_mma_n2_b2 = Mma1<2, 2>, 2;
            cmv_sbvr_gemv_mma_n2_b4 = Mma1<4, 0>, 2;
            cmv_sbvr_gemv_mma_n2_b8 = Mma1<8, 0>, 2;
            cmv_sbvr_gemv_mma_n2_b16 = Mma1<16, 0>, 2;
            cmv_sbvr_gemv_mma_n3_b1 = Mma1<1, 1>, 3;
            cmv_sbvr_gemv_mma_n3_b2 = Mma1<2, 2>, 3;
            cmv_sbvr_gemv_mma_n3_b4 = Mma1<4, 0>, 3;
            cmv_sbvr_gemv_mma_n3_b8 = Mma1<8, 0>, 3;
            cmv_sbvr_gemv_mma_n3_b16 = Mma1<16, 0>, 3;
            cmv_sbvr_gemv_mma_n4_b1 = Mma1<1, 1>, 4;
            cmv_sbvr_gemv_mma_n4_b2 = Mma1<2, 2>, 4;
            cmv_sbvr_gemv_mma_n4_b4 = Mma1<4, 0>, 4;
            cmv_sbvr_gemv_mma_n4_b8 = Mma1<8, 0>, 4;
            cmv_sbvr_gemv_mma_n4_b16 = Mma1<16, 0>, 4;
            cmv_sbvr_gemv_mma_n2_b1_deep = MmaDeep<1, 1>, 2;
            cmv_sbvr_gemv_mma_n3_b1_deep = MmaDeep<1, 1>, 3;
            cmv_sbvr_gemv_mma_n4_b1_deep = MmaDeep<1, 1>, 4;
            cmv_sbvr_gemv_mma_n8_b1 = Mma1<1, 1>, 8;
            cmv_sbvr_gemv_mma_n8_b2 = Mma1<2, 2>, 8;
            cmv_sbvr_gemv_mma_n8_b4 = Mma1<4, 0>, 8;
            cmv_sbvr_gemv_mma_n8_b8 = Mma1<8, 0>, 8;
            cmv_sbvr_gemv_mma_n8_b16 = Mma1<16, 0>, 8;
            cmv_sbvr_gemv_popc_n8_b1 = Popc1<1, 1>, 8;
            cmv_sbvr_gemv_popc_n8_b2 = Popc1<2, 2>, 8;
            cmv_sbvr_gemv_popc_n8_b4 = Popc1<4, 0>, 8;
            cmv_sbvr_gemv_popc_n8_b8 = Popc1<8, 0>, 8;
            cmv_sbvr_gemv_popc_n8_b16 = Popc1<16, 0>, 8;
            cmv_sbvr_gemv_i8_n2_b8 = Int8<1>, 2;
            cmv_sbvr_gemv_i8_n2_b16 = Int8<2>, 2;
            cmv_sbvr_gemv_i8_n3_b8 = Int8<1>, 3;
            cmv_sbvr_gemv_i8_n3_b16 = Int8<2>, 3;
            cmv_sbvr_gemv_i8_n4_b8 = Int8<1>, 4;
            cmv_sbvr_gemv_i8_n4_b16 = Int8<2>, 4;
            cmv_sbvr_gemv_i8_n8_b8 = Int8<1>, 8;
            cmv_sbvr_gemv_i8_n8_b16 = Int8<2>, 8;
        );

        /// Launch bounds of every kernel here (`cargo xtask ptx` turns this into `.maxntid`):
        /// the launchers use blocks of `GEMV_WARPS` (= `QUANT_WARPS`) warps.
        #[unsafe(no_mangle)]
        pub static CMV_MAXNTID: u32 = $crate::GEMV_WARPS * 32;

        // The int8 kernels for 16 vectors in at most 128 registers (`.minnctapersm 2`), so
        // that two blocks (16 warps) share an SM. The binary kernels of one vector and two
        // bitvectors with `.minnctapersm 3`: the bound lets ptxas take the deep kernel to 80
        // registers (from 66; 3 blocks per SM either way), and both loops come out 4-5%
        // faster at the LLM shapes on an H200 (docs/PERF.md "SBVR: launch bounds of the
        // one-vector kernels"). At 3 and 4 bitvectors the same bound (80 registers, spills at
        // 4) was slower, and 4 blocks (64 registers) slower still; `.minnctapersm 2`, the
        // occupancy they have anyway, makes the 3-bitvector ones 1.0-1.3% faster (another
        // schedule) and leaves the 4-bitvector ones level, so those carry no bound.
        // With the f32 coefficients (6-9 more registers) `_n2_b1` and `_n3_b1` take the bound
        // of the blocks per SM they had before them (4 and 3: 64 and 80 registers, no spills);
        // with them, n = 4 ran 1.3-1.6% faster at the 7B/8B shapes and n = 2 within 2% on an
        // H200 (docs/PERF.md, "SBVR: the lean binary epilogue").
        cmv_device::launch_bounds! {
            CMV_MINNCTAPERSM_cmv_sbvr_gemv_mma_n2_b1 = 4;
            CMV_MINNCTAPERSM_cmv_sbvr_gemv_mma_n2_b1_deep = 3;
            CMV_MINNCTAPERSM_cmv_sbvr_gemv_mma_n3_b1 = 3;
            CMV_MINNCTAPERSM_cmv_sbvr_gemv_mma_n3_b1_deep = 2;
            CMV_MINNCTAPERSM_cmv_sbvr_gemv_i8_n2_b16 = 2;
            CMV_MINNCTAPERSM_cmv_sbvr_gemv_i8_n3_b16 = 2;
            CMV_MINNCTAPERSM_cmv_sbvr_gemv_i8_n4_b16 = 2;
        }
    };
    (@gemv $pdl:literal; $($name:ident = $w:ident<$($a:literal),*>, $n:literal;)*) => {$(
        /// SBVR GEMV (see `sbvr_kernels::kernels::gemv`).
        ///
        /// # Safety
        /// As `gemv`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: $crate::GemvParams) {
            // SAFETY: the launcher's checks are this kernel's contract.
            unsafe { $crate::kernels::gemv::<$crate::kernels::$w<$($a),*>, $n, $pdl>(&p) }
        }
    )*};
}

#[doc(hidden)]
pub type Mma1<const B: usize, const X: usize> = Planes<Mma, B, X, false>;
/// The binary way with the loads of two items in flight per warp (`_deep`).
#[doc(hidden)]
pub type MmaDeep<const B: usize, const X: usize> = Planes<Mma, B, X, true>;
#[doc(hidden)]
pub type Popc1<const B: usize, const X: usize> = Planes<Popc, B, X, false>;

#[cfg(feature = "entries")]
crate::entry_points!(false);
