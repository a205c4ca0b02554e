//! The fused dequantize + GEMV kernel (NVPTX only); the format is `docs/SPQR.md`, the
//! tensor-core mapping [`crate::tc`].
//!
//! A block computes one tile row (16 rows), or one part of it (`Split`); all its warps but the
//! last (4 or 7, `crate::launch_warps`) split the columns into steps of 4 tiles (warp `w` takes
//! steps `w, w + warps, ...`), while the last warp walks the tile row's outliers. In a
//! step, lane `(g, t)` holds rows `2g, 2g + 1` of tile `t` (16 bytes, which the device order
//! of `layout::device_word` puts at `16 lane` of the step, copied with `cp.async` into a
//! per-warp shared-memory ring [`crate::RING_DEPTH`] steps ahead); it rebuilds the tile's
//! second-order statistics with two xor-shuffles and the scales and zeros of its two rows in
//! fp32, turns its 32 codes into 16 exact `half2` pairs (one `LOP3` each), and issues 4 MMAs
//! for the codes and 4 with ones for the input sums per two vectors. Column `n` of B holds
//! only tile `n / 2`'s inputs, so each lane receives its own rows' products with its own tile
//! and scales them in fp32 (`crate::tc`). The inputs are staged per warp in shared memory,
//! 8 steps (fewer for larger batches) at a time, already permuted and scaled by a power of two.
//! The outlier warp's lanes each own one row and add every 32nd entry of the tile row's walk
//! (8 loads in flight), at the same time as the weights stream (adding them after the
//! weights, by all threads, left their latency at the end of every block); the warps' results
//! and the outlier sums meet in shared memory and are added in a fixed order (and, for a split
//! tile row, the parts' sums in part order, `write_rows`).

use cmv_device::{
    U32x4, atomic_add_u32, block_dim_x, block_idx_x, cp_async_16, cp_async_commit, cp_async_wait,
    dyn_smem, dyn_smem_addr, f16_to_f32, f32_to_f16, fence_gpu, fma_f32,
    griddepcontrol_launch_dependents, griddepcontrol_wait, ld_nc_u16, ld_nc_u32, ld_nc_u64,
    ld_nc_v4, ld_relaxed_u32, ld_u32, ld_v4, lds_v4, mma_m16n8k16_f16_f32, redux_max_u32, shfl_xor,
    st_global_v4, sts_v4, sync_threads, sync_threads_or, sync_warp, thread_idx_x,
};

use crate::layout::{
    STEP_WORDS, TILE, device_band_words, outlier_col, outlier_value, stat_half, stat_quarter,
    stat_words,
};
use crate::tc::{
    ONES_FRAGMENT, a_fragment, accumulate, code_pairs, input_exponent, input_factors, max_abs_bits,
    result_scale, row_scale_zero, staged_pairs, tile_consts,
};
use crate::{
    MAX_SETS, MAX_UNITS, RING_DEPTH, RING_SLOTS, ROUND_BYTES, SpqrGemvParams, WARP_RING_BYTES,
    WARP_STAGE_BYTES, ZERO_BYTES, part_steps, ring_offset, round_steps, sets, stage_offset,
};

/// Values per row of the result and outlier areas of the kernel for `B` vectors
/// ([`crate::area_batch`]).
pub(crate) const fn area<const B: usize>() -> usize {
    crate::area_batch(B as u32) as usize
}

/// Which part of which tile row a block computes: block `b` takes part `b % splits` of tile
/// row `b / splits`, the steps `part_steps(nsteps, splits, part)` of it and every `splits`-th
/// outlier walk; with `splits > 1` the parts meet in `partials` (fp32, `[band][part][16][B]`),
/// and the block that arrives last (by the tile row's counter) adds them in part order.
#[derive(Clone, Copy)]
pub(crate) struct Split {
    pub partials: *mut f32,
    pub counters: *mut u32,
    pub splits: u32,
    pub band: u32,
    pub part: u32,
}

impl Split {
    /// This block's part, from its index.
    #[inline(always)]
    pub(crate) fn of_block(partials: *mut f32, counters: *mut u32, splits: u32) -> Self {
        let b = block_idx_x();
        Self {
            partials,
            counters,
            splits,
            band: b / splits,
            part: b % splits,
        }
    }
}

// The module-wide launch bounds (`CMV_MAXNTID`, `CMV_MINNCTAPERSM`) are defined with the
// scaled-weights kernels (`crate::scaled_entry_points!`), so that the sm_90a module has them too.

/// The 16 fp16 inputs `col0..col0 + 16` of vector row `xv` as 8 `half2` words in natural order;
/// zeros past `cols`.
///
/// # Safety
/// `xv` points to `cols` readable fp16 values; `aligned` only if `xv` is 16-byte aligned and
/// `cols` a multiple of 8.
#[inline(always)]
pub(crate) unsafe fn load_inputs(xv: *const u16, col0: u32, cols: u32, aligned: bool) -> [u32; 8] {
    if aligned && col0 + TILE as u32 <= cols {
        // SAFETY: 16 values from col0 are inside the vector and 16-byte aligned.
        let (a, b) = unsafe {
            let p = xv.add(col0 as usize) as *const U32x4;
            (ld_nc_v4(p).0, ld_nc_v4(p.add(1)).0)
        };
        [a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]]
    } else {
        core::array::from_fn(|j| {
            let c = col0 + 2 * j as u32;
            // SAFETY: each read is checked against cols.
            let lo = if c < cols {
                unsafe { ld_nc_u16(xv.add(c as usize)) }
            } else {
                0
            };
            let hi = if c + 1 < cols {
                // SAFETY: checked against cols.
                unsafe { ld_nc_u16(xv.add(c as usize + 1)) }
            } else {
                0
            };
            u32::from(lo) | (u32::from(hi) << 16)
        })
    }
}

/// The tile's second-order statistics as `(ss, sz)` and `(zs, zz)` `half2` words, for the lane
/// `(g, t)` holding device rows `2g, 2g + 1` (`w`, four words): each lane holds a quarter of
/// them (`layout::device_stat_byte`), and two xor-shuffles over the lanes of the same tile
/// (lane bits 2-3 are `g % 4`) gather the rest.
///
/// # Safety
/// All 32 lanes of the warp call it together.
#[inline(always)]
pub(crate) unsafe fn gather_stats(w: &[u32; 4], g: u32) -> (u32, u32) {
    // SAFETY: the caller's guarantee.
    unsafe { gather_quarters(stat_quarter(w[1], w[3]), g) }
}

/// The tile's statistics from the lane's quarter of them (`quarter`, see [`gather_stats`]),
/// by two xor-shuffles.
///
/// # Safety
/// All 32 lanes of the warp call it together.
#[inline(always)]
pub(crate) unsafe fn gather_quarters(quarter: u32, g: u32) -> (u32, u32) {
    // SAFETY: the caller guarantees a converged warp.
    let half = stat_half(quarter, unsafe { shfl_xor(quarter, 4) }, g);
    // SAFETY: as above.
    stat_words(half, unsafe { shfl_xor(half, 8) }, g)
}

/// A warp's ring of weight copies in shared memory: each lane copies its own 16 bytes of
/// step `i` (rows `2g, 2g + 1` of tile `4 step + t`, which the device order of
/// `layout::device_word` puts at `16 lane`) with `cp.async` into slot `i % RING_SLOTS`,
/// [`RING_DEPTH`] steps ahead, and reads back only what it copied itself, so no barrier is
/// needed; the reads are lane-major 16 bytes, free of bank conflicts.
#[derive(Clone, Copy)]
pub(crate) struct WeightRing {
    /// This lane's 16 bytes of slot 0 (shared-window address).
    slot0: u32,
    /// This lane's words of the band's step 0.
    lane_words: *const u64,
    warp: u32,
    warps: u32,
    last_step: u32,
}

impl WeightRing {
    /// The ring of warp `warp` (of `warps`) over a band of `nsteps >= 1` steps starting at
    /// `band_words`, in the block's ring area (`ring_offset(warps, B)` in dynamic shared
    /// memory, for the kernel of `B` vectors), with the copies of its first [`RING_DEPTH`] steps started. Also returns how
    /// many steps the warp takes (`warp + i * warps` for `i < mine`).
    ///
    /// # Safety
    /// `band_words` holds the band's `nsteps` steps in device order; the block has the ring
    /// area of `warps` warps.
    #[inline(always)]
    pub(crate) unsafe fn start<const B: usize>(
        band_words: *const u64,
        lane: u32,
        warp: u32,
        warps: u32,
        nsteps: u32,
    ) -> (Self, u32) {
        let mine = if warp < nsteps {
            (nsteps - warp).div_ceil(warps)
        } else {
            0
        };
        let ring = Self {
            slot0: dyn_smem_addr()
                + ring_offset(warps, B as u32)
                + warp * WARP_RING_BYTES
                + 16 * lane,
            lane_words: band_words.wrapping_add(2 * lane as usize),
            warp,
            warps,
            last_step: nsteps - 1,
        };
        for d in 0..RING_DEPTH {
            // SAFETY: the caller's guarantees; nothing read yet.
            unsafe { ring.copy(d, d) };
        }
        (ring, mine)
    }

    /// Starts the copy of this warp's step `i` (`warp + i * warps`; past the part's last step
    /// the last step again, which nothing reads: cheaper than a predicated copy, measured)
    /// into `slot` (`i % RING_SLOTS`, passed so that an unrolled loop can make it a constant)
    /// as one commit group.
    ///
    /// # Safety
    /// `band_words` holds the band's `nsteps` steps in device order; the ring area is this
    /// block's shared memory; `slot == i % RING_SLOTS`; step `i - (RING_SLOTS - RING_DEPTH)`'s
    /// slot was read already.
    #[inline(always)]
    pub(crate) unsafe fn copy(&self, i: u32, slot: u32) {
        debug_assert!(slot == i % RING_SLOTS);
        let step = (self.warp + i * self.warps).min(self.last_step);
        // SAFETY: 16 aligned bytes of a step of this part into this lane's 16 bytes of the
        // slot (the caller's guarantees).
        unsafe {
            cp_async_16(
                self.slot0 + 512 * slot,
                self.lane_words.add(step as usize * STEP_WORDS) as *const U32x4,
            )
        };
        // SAFETY: no operands.
        unsafe { cp_async_commit() };
    }

    /// Waits for step `i`'s copy and reads this lane's 16 bytes of it from `slot`
    /// (`i % RING_SLOTS`).
    ///
    /// # Safety
    /// Steps `0..i + RING_DEPTH` were copied, one [`WeightRing::copy`] each, in order.
    #[inline(always)]
    pub(crate) unsafe fn read(&self, slot: u32) -> [u32; 4] {
        // SAFETY: at most RING_DEPTH - 1 groups newer than step i's are pending, so waiting
        // for that many completes it; the slot holds this lane's bytes of step i.
        unsafe {
            cp_async_wait::<{ RING_DEPTH - 1 }>();
            lds_v4(self.slot0 + 512 * slot).0
        }
    }
}

/// The reduction area (`red[warp][row][vector]`) and the outlier area
/// (`out[slot][row][vector]`) of a block with `warps` warps (of weights) in dynamic shared
/// memory (`smem_bytes(warps, B)` bytes).
#[inline(always)]
pub(crate) fn sum_areas<const B: usize>(warps: u32) -> (*mut f32, *mut f32) {
    let red = dyn_smem() as *mut f32;
    (red, red.wrapping_add(warps as usize * TILE * area::<B>()))
}

/// After a block barrier, adds the warps' results and the outlier sums of each row and
/// vector in a fixed order and writes the fp16 outputs of the block's `R` tile rows (tile
/// rows `R band .. R band + R` for `split.band`, the block's group of tile rows); a part of a
/// split group stores its sums in `split.partials` instead, and the last part to arrive adds
/// all parts' sums in part order (a deterministic result) and resets the group's counter.
/// The areas hold tile row `r`'s values after those of tile rows `0..r`: `red[r][warp][row]
/// [vector]`, `outl[r][slot][row][vector]`.
///
/// # Safety
/// Every thread of the block calls it; `red` and `outl` from [`sum_areas`] (or the `R`-row
/// areas of `kernels_scaled`), every warp's part of `red` written; `y` holds `batch` vectors
/// of `rows` outputs; with `split.splits > 1`, `split.partials` holds `[groups][splits][16 R]
/// [B]` values and the group's counter counts the parts that arrived (zero before the
/// launch).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn write_rows<const B: usize, const R: usize>(
    red: *const f32,
    outl: *const f32,
    y: *mut u16,
    rows: u32,
    batch: u32,
    split: &Split,
    tid: u32,
    warps: u32,
    slots: u32,
) {
    // SAFETY: every thread reaches this barrier (the caller's guarantee).
    unsafe { sync_threads() };
    let n = (16 * R * B) as u32;
    // This block's sum of row `idx / B` (of its 16 R), vector `idx % B`.
    let block_sum = |idx: u32| {
        let (rr, b) = ((idx / B as u32) as usize, (idx % B as u32) as usize);
        let (r, rr) = (rr / TILE, rr % TILE);
        let (warps, slots) = (warps as usize, slots as usize);
        let mut total = 0.0f32;
        for w in 0..warps {
            // SAFETY: inside the reduction area.
            total += unsafe { *red.add(((r * warps + w) * TILE + rr) * area::<B>() + b) };
        }
        for slot in 0..slots {
            // SAFETY: inside the outlier area.
            total += unsafe { *outl.add(((r * slots + slot) * TILE + rr) * area::<B>() + b) };
        }
        total
    };
    let split_rows = split.splits > 1;
    // The tile row's partial sums: part p's at `part_sums + p * n`.
    let part_sums = split
        .partials
        .wrapping_add((split.band * split.splits) as usize * n as usize);
    if split_rows {
        let mine = part_sums.wrapping_add((split.part * n) as usize);
        // Blocks of one warp have fewer threads than 16 B sums.
        let mut idx = tid;
        while idx < n {
            // SAFETY: inside this part's partial sums (the caller's guarantee).
            unsafe { *mine.add(idx as usize) = block_sum(idx) };
            idx += block_dim_x();
        }
        // Publish the sums (the barrier orders the block's writes before thread 0's fence),
        // then count this part in; the last one to arrive reads them all.
        // SAFETY: every thread of the block reaches both barriers; the counter is this tile
        // row's (the caller's guarantee).
        let last = unsafe {
            sync_threads();
            let mut last = false;
            if tid == 0 {
                fence_gpu();
                last =
                    atomic_add_u32(split.counters.add(split.band as usize), 1) == split.splits - 1;
            }
            sync_threads_or(last)
        };
        if !last {
            return;
        }
        if tid == 0 {
            // Every part has arrived: ready for the next launch.
            // SAFETY: the tile row's counter; no other block touches it any more.
            unsafe { *split.counters.add(split.band as usize) = 0 };
        }
        // SAFETY: no operands; orders the reads below after the other parts' published sums.
        unsafe { fence_gpu() };
    }
    let mut idx = tid;
    while idx < n {
        let total = if split_rows {
            let mut t = 0.0f32;
            for p in 0..split.splits {
                // SAFETY: inside the tile row's partial sums; written and published by part p.
                t += f32::from_bits(unsafe {
                    ld_relaxed_u32(part_sums.add((p * n + idx) as usize) as *const u32)
                });
            }
            t
        } else {
            block_sum(idx)
        };
        let (rr, b) = (idx / B as u32, idx % B as u32);
        let row = (16 * R) as u32 * split.band + rr;
        if row < rows && b < batch {
            // SAFETY: row < rows and b < batch outputs.
            unsafe { *y.add(b as usize * rows as usize + row as usize) = f32_to_f16(total) };
        }
        idx += block_dim_x();
    }
}

/// One step: lane `(g, t)`'s two rows of tile `t`, multiplied with the staged inputs of its
/// B column (at shared address `frag`, or zeros), the results scaled into `acc` (`acc[j]` is
/// the fragment of vector set `j`: rows `2g, 2g + 1`, vectors `2j, 2j + 1`). `ones` is
/// [`ONES_FRAGMENT`].
///
/// # Safety
/// All 32 lanes of the warp call it together; `frag` is 16-byte aligned with `64 * sets(B)`
/// bytes of this warp's shared memory after it.
#[inline(always)]
unsafe fn step<const B: usize>(
    w: [u32; 4],
    frag: u32,
    g: u32,
    f: f32,
    ones: [u32; 4],
    acc: &mut [[f32; 4]; MAX_SETS],
) {
    let w0 = u64::from(w[0]) | (u64::from(w[1]) << 32);
    let w1 = u64::from(w[2]) | (u64::from(w[3]) << 32);
    // SAFETY: the caller guarantees a converged warp.
    let (lo, hi) = unsafe { gather_stats(&w, g) };
    let c = tile_consts(lo, hi, f);
    let (s0, nz0) = row_scale_zero(w0, &c);
    let (s1, nz1) = row_scale_zero(w1, &c);
    let (p0, p1) = (code_pairs(w0), code_pairs(w1));
    for (j, a) in acc.iter_mut().enumerate().take(sets(B as u32) as usize) {
        // SAFETY: inside this warp's staging area (the caller's guarantee).
        let (b0, b1) = unsafe {
            (
                lds_v4(frag + 64 * j as u32).0,
                lds_v4(frag + 64 * j as u32 + 16).0,
            )
        };
        let b = [b0[0], b0[1], b0[2], b0[3], b1[0], b1[1], b1[2], b1[3]];
        let (mut d, mut ds) = ([0.0f32; 4], [0.0f32; 4]);
        for m in 0..4 {
            let bm = [b[2 * m], b[2 * m + 1]];
            // SAFETY: the caller guarantees a converged warp.
            unsafe {
                d = mma_m16n8k16_f16_f32(a_fragment(&p0, &p1, m), bm, d);
                ds = mma_m16n8k16_f16_f32(ones, bm, ds);
            }
        }
        // The ones' rows are all equal: ds[0] = ds[2], ds[1] = ds[3].
        a[0] = accumulate(a[0], s0, nz0, d[0], ds[0]);
        a[2] = accumulate(a[2], s1, nz1, d[2], ds[0]);
        if B > 1 {
            a[1] = accumulate(a[1], s0, nz0, d[1], ds[1]);
            a[3] = accumulate(a[3], s1, nz1, d[3], ds[1]);
        }
    }
}
/// Outlier entries whose loads a thread issues at once for 1-4 vectors (4 for 8 vectors, whose
/// kernels would spill: 8 measured faster than 4 at batch 4 on the 4096-row shapes and
/// slower at batch 8, docs/PERF.md; 2 for 16 vectors, the same 32 input loads).
const OUTLIER_LOADS: usize = 8;

/// The outlier entries a thread adds up: `first, first + stride, ...` below `end`.
#[derive(Clone, Copy)]
pub(crate) struct OutlierWalk {
    first: u32,
    end: u32,
    stride: u32,
}

/// A 32-bit load of the outlier walk: coherent (`ld.global`) where `C`, the kernels of the
/// programmatic-launch module, which may start while the prep launch still runs (measured
/// that way, docs/PERF.md "SpQR: the inputs as MMA pairs"), else read-only (`ld.global.nc`).
///
/// # Safety
/// As `ld_nc_u32` (the offsets and outlier words are never written by a kernel).
#[inline(always)]
unsafe fn ld_word<const C: bool>(p: *const u32) -> u32 {
    // SAFETY: the caller's guarantees.
    unsafe { if C { ld_u32(p) } else { ld_nc_u32(p) } }
}

/// The outlier entries of row `tid % 16` of the tile row that this thread walks (PTCSR: entry
/// k of row r sits at 16 k + r and the block stride is a multiple of 16; CSR: slot tid / 16
/// walks the row with stride blockDim / 16), from the offsets.
///
/// # Safety
/// The launcher's checks: offsets validated, one per padded row (CSR) or tile row (PTCSR),
/// plus one.
#[inline(always)]
pub(crate) unsafe fn outlier_walk<const PT: bool, const C: bool>(
    offsets: *const u32,
    split: &Split,
    tid: u32,
    threads: u32,
) -> OutlierWalk {
    let band = split.band;
    // The parts of a split tile row take every `splits`-th walk: slot s of part p starts
    // where slot `p * slots + s` of a single block would.
    let (first, end, stride) = if PT {
        // SAFETY: the block offsets have one entry per tile row, plus one (the caller's
        // guarantee).
        let (a, b) = unsafe {
            (
                ld_word::<C>(offsets.add(band as usize)),
                ld_word::<C>(offsets.add(band as usize + 1)),
            )
        };
        (a + split.part * threads + tid, b, split.splits * threads)
    } else {
        let row = (16 * band + (tid & 15)) as usize;
        // SAFETY: the row offsets have one entry per padded row, plus one.
        let (a, b) = unsafe {
            (
                ld_word::<C>(offsets.add(row)),
                ld_word::<C>(offsets.add(row + 1)),
            )
        };
        let slots = threads >> 4;
        (a + split.part * slots + (tid >> 4), b, split.splits * slots)
    };
    OutlierWalk { first, end, stride }
}

/// The outliers' part of row `tid % 16` of the tile row for each vector, from the entries
/// of `walk` ([`outlier_walk`]). [`OUTLIER_LOADS`] entries at a time, so their loads overlap.
///
/// # Safety
/// The launcher's checks: outlier words validated, outlier columns below `cols`, `x` holding
/// `batch` vectors; `walk` from [`outlier_walk`].
#[inline(always)]
pub(crate) unsafe fn outlier_sums<const B: usize, const C: bool>(
    walk: OutlierWalk,
    col_vals: *const u32,
    x: *const u16,
    cols: u32,
    batch: u32,
) -> [f32; B] {
    let OutlierWalk { first, end, stride } = walk;
    // Entries at a time: up to 32 input loads in flight (more spill at 8 and 16 vectors).
    let n = if B >= 16 {
        2
    } else if B >= 8 {
        4
    } else {
        OUTLIER_LOADS
    };
    let mut o = [0.0f32; B];
    let mut e = first;
    while e < end {
        // All loads of a batch of entries are issued before any is used: the words, then
        // the inputs at their columns (a zero word reads column 0, which exists, and adds
        // nothing).
        let mut wv = [0u32; OUTLIER_LOADS];
        for (k, w) in wv.iter_mut().enumerate().take(n) {
            let ek = e + k as u32 * stride;
            if ek < end {
                // SAFETY: ek < end <= the outlier words' length (validated on the host).
                *w = unsafe { ld_word::<C>(col_vals.add(ek as usize)) };
            }
        }
        let mut xs = [[0u16; B]; OUTLIER_LOADS];
        for (w, xk) in wv.iter().zip(xs.iter_mut()).take(n) {
            let c = outlier_col(*w) as usize;
            for (b, xb) in xk.iter_mut().enumerate() {
                if (b as u32) < batch {
                    // SAFETY: c < cols (validated, or 0 for a zero word) and b < batch.
                    *xb = unsafe { ld_nc_u16(x.add(b * cols as usize + c)) };
                }
            }
        }
        for (w, xk) in wv.iter().zip(xs.iter()).take(n) {
            // A zero word is PTCSR padding (or past the end).
            if *w != 0 {
                let v = f16_to_f32(outlier_value(*w));
                for (ob, xb) in o.iter_mut().zip(xk.iter()) {
                    *ob += v * f16_to_f32(*xb);
                }
            }
        }
        e += n as u32 * stride;
    }
    o
}

/// Outlier entries a thread of the kernels for 4 and 8 vectors has in flight with
/// [`outlier_sums_t`] (their inputs: 16 registers at 4 vectors, 32 at 8); 4 for 16 vectors
/// (32 registers).
const OUTLIER_LOADS_T: usize = 8;

/// The `B` transposed inputs (`crate::transposed_index`) of column `c`, as `half2` words;
/// with coherent loads where `C` (the programmatic-launch module: the prep launch writes
/// `xt` and may still run when this kernel starts; a non-coherent load may then see what
/// an earlier launch left, as a layout of the weight warps' inputs read with `ld.global.nc`
/// did in `programmatic_launch_gives_the_same_bits`, docs/PERF.md).
///
/// # Safety
/// `xt` holds `cols * B` values and `c < cols`; `B` is 4, 8 or 16; with `C`, read after
/// `griddepcontrol.wait`.
#[inline(always)]
unsafe fn column_inputs<const B: usize, const C: bool>(xt: *const u16, c: u32) -> [u32; 8] {
    let mut r = [0u32; 8];
    // SAFETY: the column's B values are inside xt (the caller's guarantee), 8 B (B = 4) or
    // 16 B aligned (B >= 8: the allocation is 256-byte aligned, each column 2 B bytes).
    unsafe {
        let p = xt.add(crate::transposed_index(c, 0, B as u32));
        let v4 = |q: *const U32x4| if C { ld_v4(q).0 } else { ld_nc_v4(q).0 };
        if B == 4 {
            let q = p as *const u32;
            if C {
                r[0] = ld_u32(q);
                r[1] = ld_u32(q.add(1));
            } else {
                let w = ld_nc_u64(q as *const u64);
                r[0] = w as u32;
                r[1] = (w >> 32) as u32;
            }
        } else {
            r[..4].copy_from_slice(&v4(p as *const U32x4));
            if B == 16 {
                r[4..].copy_from_slice(&v4((p as *const U32x4).add(1)));
            }
        }
    }
    r
}

/// As [`outlier_sums`] for 4 to 16 vectors, with the inputs by column (`xt`,
/// [`crate::SpqrGemvScaledParams::xt`]): an entry's inputs for all vectors are one or two
/// 16-byte loads (one 2-byte load per vector, each from another vector's row, before), and the
/// next entries' words are loaded before this round's inputs are used, so a round waits for
/// one load, not two in a chain.
///
/// # Safety
/// The launcher's checks: outlier words validated, outlier columns below `cols`, `xt` holding
/// `cols * B` values ([`crate::transposed_index`]); `walk` from [`outlier_walk`].
#[inline(always)]
pub(crate) unsafe fn outlier_sums_t<const B: usize, const C: bool>(
    walk: OutlierWalk,
    col_vals: *const u32,
    xt: *const u16,
) -> [f32; B] {
    let OutlierWalk { first, end, stride } = walk;
    let n = if B >= 16 { 4 } else { OUTLIER_LOADS_T };
    let words = |e: u32| {
        let mut wv = [0u32; OUTLIER_LOADS_T];
        for (k, w) in wv.iter_mut().enumerate().take(n) {
            let ek = e + k as u32 * stride;
            if ek < end {
                // SAFETY: ek < end <= the outlier words' length (validated on the host).
                *w = unsafe { ld_word::<C>(col_vals.add(ek as usize)) };
            }
        }
        wv
    };
    let mut o = [0.0f32; B];
    let mut e = first;
    let mut wv = words(e);
    while e < end {
        let mut xs = [[0u32; 8]; OUTLIER_LOADS_T];
        for (w, xk) in wv.iter().zip(xs.iter_mut()).take(n) {
            // SAFETY: the column is below cols (validated, or 0 for a zero word).
            *xk = unsafe { column_inputs::<B, C>(xt, outlier_col(*w)) };
        }
        let next = e + n as u32 * stride;
        let wn = words(next);
        for (w, xk) in wv.iter().zip(xs.iter()).take(n) {
            // A zero word is PTCSR padding (or past the end).
            if *w != 0 {
                let v = f16_to_f32(outlier_value(*w));
                for (j, ob) in o.iter_mut().enumerate() {
                    let h = (xk[j / 2] >> (16 * (j % 2))) as u16;
                    *ob = fma_f32(v, f16_to_f32(h), *ob);
                }
            }
        }
        wv = wn;
        e = next;
    }
    o
}

/// Prepares the inputs of the kernels for 4 to 16 vectors ([`crate::PrepParams`]): its
/// first `transpose_blocks` blocks transpose them for the outlier warps (thread `c` writes
/// column `c`'s `slots` values, [`crate::transposed_index`], zeros past `batch`), the others
/// write what the weight warps read (thread `i` for tile `i % sum_tiles` of vector slot
/// `i / sum_tiles`): the tile sum of the zero terms ([`crate::tc_scaled::tile_sum_pair`] at
/// [`crate::tile_sum_index`]) and the tile's inputs as MMA pairs ([`crate::tc::input_pairs`]
/// at [`crate::input_pair_index`]).
///
/// With `PDL` (the sm_90a module), the kernel launched after it may start once every block has
/// started (`early`) or written its values (`griddepcontrol.launch_dependents`); it waits for
/// this one's writes to be visible (`griddepcontrol.wait`) before it reads them.
///
/// # Safety
/// Launched by `spqr-format` with [`crate::PrepParams::blocks`] blocks of
/// [`crate::PREP_THREADS`] threads, `x` holding `batch * cols` values (16-byte aligned with
/// `cols % 8 == 0` where `aligned`), `sx` `sum_tiles * sum_slots(slots)` words, `xp`
/// `PAIR_WORDS` times that, 16-byte aligned, and where
/// `transpose_blocks > 0` `xt` `cols * slots` values 4-byte aligned and `transpose_blocks =
/// ceil(cols / PREP_THREADS)`; `1 <= batch <= slots`, `slots` even. `PDL` only on sm_90.
#[inline(always)]
pub unsafe fn prep_inputs<const PDL: bool>(p: &crate::PrepParams) {
    if PDL && p.early != 0 {
        // SAFETY: sm_90 code (the caller's guarantee).
        unsafe { griddepcontrol_launch_dependents() };
    }
    let x = p.x.as_ptr();
    let b = block_idx_x();
    if b < p.transpose_blocks {
        let c = b * crate::PREP_THREADS + thread_idx_x();
        if c < p.cols {
            let xt = p.xt.as_mut_ptr() as *mut u32;
            let at = |v: u32| {
                if v < p.batch {
                    // SAFETY: v < batch and c < cols: inside x.
                    u32::from(unsafe {
                        ld_nc_u16(x.add(v as usize * p.cols as usize + c as usize))
                    })
                } else {
                    0
                }
            };
            let mut v = 0;
            while v < p.slots {
                // SAFETY: transposed_index(c, v, slots) + 1 < cols * slots, even, so the u32
                // at half its index is inside xt and aligned.
                unsafe {
                    *xt.add(crate::transposed_index(c, v, p.slots) / 2) = at(v) | (at(v + 1) << 16)
                };
                v += 2;
            }
        }
    } else {
        let i = (b - p.transpose_blocks) * crate::PREP_THREADS + thread_idx_x();
        if i < p.sum_tiles * crate::sum_slots(p.slots) {
            let (v, tile) = (i / p.sum_tiles, i % p.sum_tiles);
            let (sum, pairs) = if v < p.batch {
                // SAFETY: vector v < batch is inside x; the reads are bounded by cols, and
                // `aligned` is the launcher's check.
                let xs = unsafe {
                    load_inputs(
                        x.add(v as usize * p.cols as usize),
                        tile * TILE as u32,
                        p.cols,
                        p.aligned != 0,
                    )
                };
                (
                    crate::tc_scaled::tile_sum_pair(&xs),
                    crate::tc::input_pairs(&xs),
                )
            } else {
                (0, [0; crate::PAIR_WORDS])
            };
            // SAFETY: tile < sum_tiles, v < sum_slots(slots): inside sx, and the pair words
            // inside xp, each half 16-byte aligned from a 16-byte aligned start
            // (`input_pair_index`).
            unsafe {
                *p.sx
                    .as_mut_ptr()
                    .add(crate::tile_sum_index(tile, v, p.slots)) = sum;
                let xp = p.xp.as_mut_ptr();
                for h in 0..2 {
                    let at = xp.add(crate::input_pair_index(tile, v, 4 * h as u32, p.slots));
                    st_global_v4(
                        at as *mut U32x4,
                        U32x4([
                            pairs[4 * h],
                            pairs[4 * h + 1],
                            pairs[4 * h + 2],
                            pairs[4 * h + 3],
                        ]),
                    );
                }
            }
        }
    }
    if PDL && p.early == 0 {
        // At the end (`crate::early_dependents`): launched early, the product's blocks take SM
        // room the prep's blocks hold, and grids sized to one wave of blocks came out uneven.
        // SAFETY: sm_90 code (the caller's guarantee).
        unsafe { griddepcontrol_launch_dependents() };
    }
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn spqr_gemv<const B: usize, const PT: bool, const PDL: bool>(
    dense: *const u64,
    x: *const u16,
    y: *mut u16,
    offsets: *const u32,
    col_vals: *const u32,
    split: Split,
    rows: u32,
    cols: u32,
    padded_cols: u32,
    batch: u32,
    aligned: u32,
) {
    if PDL {
        // SAFETY: sm_90 code (the caller's contract); it only lets the next grid launch.
        unsafe { griddepcontrol_launch_dependents() };
    }
    let tid = thread_idx_x();
    // The last warp walks the outliers while the others multiply the weights.
    let (lane, warp, warps) = (tid & 31, tid >> 5, (block_dim_x() >> 5) - 1);
    let (red, outl) = sum_areas::<B>(warps);
    if warp == warps {
        if PDL {
            // SAFETY: sm_90 code; the outlier warp reads x, which the kernel before may write.
            unsafe { griddepcontrol_wait() };
        }
        // SAFETY: forwarded from the launcher's checks.
        unsafe {
            outlier_warp::<B, PT, false>(
                offsets,
                col_vals,
                x,
                core::ptr::null(),
                outl,
                &split,
                cols,
                batch,
                lane,
                32,
            )
        };
    } else {
        // SAFETY: forwarded.
        unsafe {
            weights::<B, PDL>(
                dense,
                x,
                red,
                &split,
                cols,
                padded_cols,
                batch,
                aligned,
                lane,
                warp,
                warps,
            )
        };
    }
    // SAFETY: every thread gets here; every warp wrote its part of `red`, the last `outl`.
    unsafe { write_rows::<B, 1>(red, outl, y, rows, batch, &split, tid, warps, 2) };
}

/// The outlier warps' work: thread `otid` of the `othreads` threads of the outlier warps adds
/// every `othreads`-th entry of the tile row's outlier walk (row `otid % 16`) and stores its
/// sums in slot `otid / 16` of the outlier area `outl`.
///
/// Where `crate::reads_transposed(B)` and `xt` is not null, the inputs come by column (`xt`,
/// [`outlier_sums_t`]); elsewhere from `x`.
///
/// # Safety
/// As [`outlier_sums`] (and, where `crate::reads_transposed(B)`, [`outlier_sums_t`]); `outl` from [`sum_areas`]
/// of a block with at least one weight warp, holding `othreads / 16` slots
/// (`crate::outlier_slots`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn outlier_warp<const B: usize, const PT: bool, const C: bool>(
    offsets: *const u32,
    col_vals: *const u32,
    x: *const u16,
    xt: *const u16,
    outl: *mut f32,
    split: &Split,
    cols: u32,
    batch: u32,
    otid: u32,
    othreads: u32,
) {
    // SAFETY: forwarded from the caller.
    let o = unsafe {
        let walk = outlier_walk::<PT, C>(offsets, split, otid, othreads);
        if crate::reads_transposed(B as u32) && !xt.is_null() {
            outlier_sums_t::<B, C>(walk, col_vals, xt)
        } else {
            outlier_sums::<B, C>(walk, col_vals, x, cols, batch)
        }
    };
    for (b, ob) in o.iter().enumerate() {
        // SAFETY: slot otid / 16 < othreads / 16 slots (the caller's guarantee), row
        // otid % 16 < 16, b < B <= area::<B>().
        unsafe {
            *outl.add(((otid >> 4) as usize * TILE + (otid & 15) as usize) * area::<B>() + b) = *ob
        };
    }
}

/// The weights' part of the tile row (or of its part) for weight warp `warp` of `warps`,
/// into `red[warp]`.
///
/// # Safety
/// As the entry points; all lanes of the warp call it.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn weights<const B: usize, const PDL: bool>(
    dense: *const u64,
    x: *const u16,
    red: *mut f32,
    split: &Split,
    cols: u32,
    padded_cols: u32,
    batch: u32,
    aligned: u32,
    lane: u32,
    warp: u32,
    warps: u32,
) {
    // Vector sets (two vectors each, the B slots of a tile), steps per staging round, and
    // the staging units (one tile of one vector) of each lane per round.
    let sets: usize = sets(B as u32) as usize;
    let round: u32 = round_steps(B as u32);
    let units: usize = (4 * round as usize * B).div_ceil(32);
    debug_assert!(units <= MAX_UNITS);
    let (g, t) = (lane >> 2, lane & 3);
    let nsteps = (padded_cols / TILE as u32).div_ceil(4);
    // This block's steps of its tile row: s0..s1.
    let (s0, s1) = part_steps(nsteps, split.splits, split.part);
    // SAFETY: the part's words are inside the dense part (the device order: tile row `band`
    // starts at word `band * device_band_words(padded_cols)`, see `layout::device_word`, and
    // s1 <= nsteps).
    let part_words = unsafe {
        dense.add(
            split.band as usize * device_band_words(padded_cols as usize)
                + s0 as usize * STEP_WORDS,
        )
    };
    // This warp's steps are s0 + warp + i * warps for i < mine; the weights of step i are
    // copied into shared memory RING_DEPTH steps ahead.
    // SAFETY: the part's steps in device order (s1 > s0, the launcher's guarantee); the
    // launcher gave the ring area.
    let (ring, mine) = unsafe { WeightRing::start::<B>(part_words, lane, warp, warps, s1 - s0) };
    if PDL {
        // SAFETY: sm_90 code. The first weight copies (the matrix, which no kernel writes) are
        // in flight; the inputs, which the kernel before may write, are read after this.
        unsafe { griddepcontrol_wait() };
    }
    let area = dyn_smem_addr() + stage_offset(warps, B as u32) + warp * WARP_STAGE_BYTES;
    let zeros = area + ROUND_BYTES;
    if lane < ZERO_BYTES / 16 {
        // SAFETY: inside this warp's zero area; made visible by the staging's warp barrier.
        unsafe { sts_v4(zeros + 16 * lane, U32x4([0; 4])) };
    }
    // Lane (g, t) supplies B column g: the inputs of tile g / 2, vector slot g % 2, when that
    // is its own tile t, else zeros (stride 0).
    let own = g >> 1 == t;
    let slot = if B > 1 { 32 * (g & 1) } else { 0 };
    let (frag0, frag_stride) = if own {
        (area + 64 * sets as u32 * t + slot, 4 * 64 * sets as u32)
    } else {
        (zeros, 0)
    };
    // (An opaque zero keeps the stride a register: as a known 0-or-constant, `ptxas` selects
    // between two sums every step.)
    let frag_stride = frag_stride | (batch >> 20);
    // The ones' A fragment, through a zero the compiler cannot prove (the launcher passes
    // batch <= 8), so that it stays in registers instead of being rebuilt every step.
    // (Four different such zeros: with equal values `ptxas` copies one register into the
    // fragment's next every step.)
    let ones: [u32; 4] = core::array::from_fn(|i| ONES_FRAGMENT[i] | (batch >> (16 + i)));
    let mut acc = [[0.0f32; 4]; MAX_SETS];
    let mut i = 0;
    while i < mine {
        // Stage the inputs of steps i .. i + round: unit u = lane + 32 k is tile u % (4 round)
        // of the round, vector u / (4 round); scaled by the round's exponent.
        let mut raw = [[0u32; 8]; MAX_UNITS];
        let mut mx = 0;
        for (k, r) in raw.iter_mut().enumerate().take(units) {
            let u = lane + 32 * k as u32;
            let (ti, v) = (u % (4 * round), u / (4 * round));
            let tile = (s0 + warp + (i + ti / 4) * warps) * 4 + ti % 4;
            // SAFETY: vector min(v, batch - 1) < batch is inside the input; `aligned` was
            // checked by the launcher; reads are bounded by cols.
            *r = unsafe {
                let xv = x.add(v.min(batch - 1) as usize * cols as usize);
                load_inputs(xv, tile * TILE as u32, cols, aligned != 0)
            };
            mx = max_abs_bits(r, mx);
        }
        // SAFETY: converged warp (`i` and `mine` are warp-uniform).
        let e = input_exponent(unsafe { redux_max_u32(mx) });
        let factors = input_factors(e);
        // SAFETY: every lane has finished reading the previous round.
        unsafe { sync_warp() };
        for (k, r) in raw.iter().enumerate().take(units) {
            let u = lane + 32 * k as u32;
            let (ti, v) = (u % (4 * round), u / (4 * round));
            let p = staged_pairs(r, factors);
            let at = area + 64 * (ti * sets as u32 + v / 2) + 32 * (v % 2);
            // SAFETY: inside this warp's staging area (ti < 4 round, v / 2 < sets).
            unsafe {
                sts_v4(at, U32x4([p[0], p[1], p[2], p[3]]));
                sts_v4(at + 16, U32x4([p[4], p[5], p[6], p[7]]));
            }
        }
        // SAFETY: converged warp.
        unsafe { sync_warp() };
        let f = result_scale(e);
        let end = mine.min(i + round);
        let mut frag = frag0;
        // Unrolled by the ring's slots: rounds start at multiples of RING_SLOTS, so step
        // i + k sits in slot k and every slot offset is a constant.
        while i < end {
            for k in 0..RING_SLOTS {
                if i < end {
                    // SAFETY: steps 0..i + RING_DEPTH were copied in order; then step
                    // i + RING_DEPTH goes into the slot of step i - 1, read already.
                    let w = unsafe { ring.read(k) };
                    unsafe { ring.copy(i + RING_DEPTH, (k + RING_DEPTH) % RING_SLOTS) };
                    // SAFETY: converged warp; `frag` is the lane's slot of this step (or
                    // zeros).
                    unsafe { step::<B>(w, frag, g, f, ones, &mut acc) };
                    frag += frag_stride;
                    i += 1;
                }
            }
        }
    }
    // The copies past the last step (of the part's last tile) finish before the block ends.
    // SAFETY: no operands.
    unsafe { cp_async_wait::<0>() };
    // The 4 lanes of rows 2g, 2g + 1 (t = 0..3) hold different tiles: sum them.
    for (j, a) in acc.iter_mut().enumerate().take(sets) {
        for (q, v) in a.iter_mut().enumerate() {
            if B == 1 && q % 2 == 1 {
                continue;
            }
            // SAFETY: every lane reaches this point.
            unsafe {
                *v += f32::from_bits(shfl_xor(v.to_bits(), 1));
                *v += f32::from_bits(shfl_xor(v.to_bits(), 2));
            }
            if t == 0 {
                let (r, n) = (2 * g as usize + q / 2, 2 * j + q % 2);
                // SAFETY: warp < warps, r < 16, n < 8.
                unsafe {
                    *red.add((warp as usize * TILE + r) * crate::kernels::area::<B>() + n) = *v
                };
            }
        }
    }
}

/// The buffers of the routed and integer-MMA kernels' parameters, as raw pointers: `dense`,
/// `x`, `y`, `offsets`, `col_vals`, `partials`, `counters`.
#[doc(hidden)]
#[inline(always)]
#[allow(clippy::type_complexity)]
pub fn routed_pointers(
    p: &SpqrGemvParams,
) -> (
    *const u64,
    *const u16,
    *mut u16,
    *const u32,
    *const u32,
    *mut f32,
    *mut u32,
) {
    (
        p.dense.as_ptr(),
        p.x.as_ptr(),
        p.y.as_mut_ptr(),
        p.offsets.as_ptr(),
        p.col_vals.as_ptr(),
        p.partials.as_mut_ptr(),
        p.counters.as_mut_ptr(),
    )
}

/// The routed kernels' entry body (1 and 2 vectors): see [`routed_entry_points!`].
///
/// # Safety
/// As the entry points of [`routed_entry_points!`]; `PDL` only in sm_90 code.
#[doc(hidden)]
#[inline(always)]
pub unsafe fn routed_entry<const B: usize, const PT: bool, const PDL: bool>(p: &SpqrGemvParams) {
    let (dense, x, y, offsets, col_vals, partials, counters) = routed_pointers(p);
    let SpqrGemvParams {
        rows,
        cols,
        padded_cols,
        batch,
        splits,
        aligned,
        ..
    } = *p;
    let split = Split::of_block(partials, counters, splits);
    // SAFETY: forwarded from the launcher's checks.
    unsafe {
        spqr_gemv::<B, PT, PDL>(
            dense,
            x,
            y,
            offsets,
            col_vals,
            split,
            rows,
            cols,
            padded_cols,
            batch,
            aligned,
        )
    }
}

/// Defines the entry points of the routed kernels (1 and 2 vectors) and of the integer-MMA
/// kernels of one vector, with programmatic dependent launch when `$pdl` is `true` (the
/// sm_90a module of `spqr-kernels-sm90`; `false` in this crate's module): each block lets
/// the next launch start at once (`griddepcontrol.launch_dependents`), its weight warps
/// issue their first weight copies, and every warp waits for the kernel before it
/// (`griddepcontrol.wait`) before it reads the inputs or writes anything, so a call's first
/// copies overlap the end of the previous call.
#[doc(hidden)]
#[macro_export]
macro_rules! routed_entry_points {
    ($pdl:literal) => {
        $crate::routed_entry_points!(@routed $pdl;
            cmv_spqr_csr_b1 = 1, false;
            cmv_spqr_csr_b2 = 2, false;
            cmv_spqr_ptcsr_b1 = 1, true;
            cmv_spqr_ptcsr_b2 = 2, true;
        );
        $crate::routed_entry_points!(@int8 $pdl;
            cmv_spqr_csr_i8_b1 = false;
            cmv_spqr_ptcsr_i8_b1 = true;
        );

        // One vector: 4 blocks of the largest size (8 of the usual 4 warps), 64 registers, a
        // full SM's worth of warps; the kernels fit in them without spills.
        cmv_device::launch_bounds! {
            CMV_MINNCTAPERSM_cmv_spqr_csr_b1 = 4;
            CMV_MINNCTAPERSM_cmv_spqr_ptcsr_b1 = 4;
            CMV_MINNCTAPERSM_cmv_spqr_csr_i8_b1 = 4;
            CMV_MINNCTAPERSM_cmv_spqr_ptcsr_i8_b1 = 4;
        }
    };
    (@routed $pdl:literal; $($name:ident = $b:literal, $pt:literal;)*) => {$(
        /// SpQR GEMV for up to this many input vectors; see `spqr_kernels::kernels`.
        ///
        /// # Safety
        /// Launched by `spqr-format` with `SpqrGemvParams`, having validated the matrix
        /// (lengths, offsets, outlier columns), sized the inputs and outputs, checked `aligned`
        /// (input 16-byte aligned and `cols % 8 == 0`), and launched `splits` blocks per tile
        /// row (`1 <= splits <=` its steps) of `launch_warps` threads (at least 2 warps) with
        /// `smem_bytes(weight warps, B)` bytes of shared memory; with `splits > 1`, `partials`
        /// holds `bands * splits * 16 * B` values and `counters` one zero per tile row.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: $crate::SpqrGemvParams) {
            // SAFETY: the launcher's checks are this kernel's contract.
            unsafe { $crate::kernels::routed_entry::<$b, $pt, $pdl>(&p) }
        }
    )*};
    (@int8 $pdl:literal; $($name:ident = $pt:literal;)*) => {$(
        /// SpQR GEMV of one vector on integer tensor cores; see `spqr_kernels::kernels_int8`.
        ///
        /// # Safety
        /// As the routed kernel of one vector (`cmv_spqr_csr_b1`), with `batch == 1` and the
        /// dense words in byte layout (`int8::byte_layout_word` of the device order).
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: $crate::SpqrGemvParams) {
            // SAFETY: the launcher's checks are this kernel's contract.
            unsafe { $crate::kernels_int8::int8_entry::<$pt, $pdl>(&p) }
        }
    )*};
}

#[cfg(feature = "entries")]
crate::routed_entry_points!(false);
