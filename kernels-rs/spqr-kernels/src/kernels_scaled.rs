//! The kernel for 3 to 16 vectors (NVPTX only): the weights scaled in fp16 before the MMA,
//! the vectors in the MMA's 8 columns (two groups of 8 for 9 to 16 vectors, sharing the
//! scaled weights); the arithmetic is [`crate::tc_scaled`].
//!
//! A block computes one tile row (16 rows), or one part of it (`Split`); all its warps but the
//! last one (two for 16 vectors, `crate::outlier_warps`) split the columns into steps of 4
//! tiles (warp `w` takes steps `w, w + warps, ...`), while the last walk the outliers. In a
//! step, lane `(g, t)` holds rows
//! `2g, 2g + 1` of tile `t` (16 bytes, through the warp's `WeightRing` like the routed kernel)
//! and the tile's inputs of vector `g` (the MMA's column `g`; lanes past the batch repeat the
//! last vector, loaded into registers one step ahead), and of vector `g + 8` for 16; it
//! rebuilds
//! the tile's second-order statistics with two xor-shuffles, turns its 32 codes into 16
//! scaled `half2` pairs, and issues 4 MMAs for the codes and one bf16 MMA for the zeros
//! (`-z s` times the tiles' input sums, both in two bf16 parts, `tc_scaled::zero_fragment`),
//! per group of 8 vectors. All 8 vectors of a group cost the same instructions; the second
//! group adds its input loads and 5 MMAs, not the weights' work. The outlier
//! warps and the final sums are those of [`crate::kernels`] (the outlier warp measured faster for 4 and 8 vectors
//! than all warps adding the outliers before the weights: docs/PERF.md).

use cmv_device::{
    U32x4, block_dim_x, cp_async_16, cp_async_commit, cp_async_wait, dyn_smem, dyn_smem_addr,
    griddepcontrol_wait, half2_to_f32x2, ld_u32, ld_v4, lds_v4, mma_m16n8k16_bf16_f32,
    mma_m16n8k16_f16_f32, thread_idx_x,
};

use crate::kernels::{Split, WeightRing, area, gather_stats, outlier_warp, sum_areas, write_rows};
use crate::layout::{STEP_WORDS, TILE, device_band_words, row_qs, row_qz};
use crate::tc_scaled::{MASK_A, MASK_B, row_consts, scaled_pairs, zero_fragment};
use crate::{
    RING_DEPTH, RING_SLOTS, SpqrGemvScaledParams, WARP_RING_BYTES, input_pair_index,
    outlier_slots_rows, pair_step_words, part_steps, ring_offset_rows, sum_slots, sum_tiles,
    tile_sum_index,
};

/// A warp's ring of weight copies for `R` tile rows: as `kernels::WeightRing` (each lane
/// copies and reads back only its own bytes, so no barrier), with slots of `R * 512` bytes,
/// tile row `r`'s 512 bytes of a step at `512 r` of its slot, one commit group per step.
#[derive(Clone, Copy)]
struct RowsRing<const R: usize> {
    /// This lane's 16 bytes of slot 0, tile row 0 (shared-window address).
    slot0: u32,
    /// This lane's words of the part's step 0 of the group's first tile row.
    lane_words: *const u64,
    /// Words from one tile row to the next.
    band_words: usize,
    warp: u32,
    warps: u32,
    last_step: u32,
}

impl<const R: usize> RowsRing<R> {
    /// The ring of warp `warp` (of `warps`) over parts of `nsteps >= 1` steps of `R`
    /// consecutive tile rows, the first starting at `part_words` and each `band_words` after
    /// the one before, in the block's ring area (`ring_offset_rows(warps, B, R)`), with the
    /// copies of its first [`RING_DEPTH`] steps started; and how many steps the warp takes.
    ///
    /// # Safety
    /// The `R` tile rows' parts hold `nsteps` steps each in device order; the block has the
    /// ring area of `warps` warps.
    #[inline(always)]
    unsafe fn start<const B: usize>(
        part_words: *const u64,
        band_words: usize,
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
                + ring_offset_rows(warps, B as u32, R as u32)
                + warp * R as u32 * WARP_RING_BYTES
                + 16 * lane,
            lane_words: part_words.wrapping_add(2 * lane as usize),
            band_words,
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

    /// Starts the copies of this warp's step `i` (past the part's last step, the last step
    /// again, which nothing reads) of every tile row into `slot` (`i % RING_SLOTS`), as one
    /// commit group.
    ///
    /// # Safety
    /// As [`RowsRing::start`]; `slot == i % RING_SLOTS`; step `i - (RING_SLOTS -
    /// RING_DEPTH)`'s slot was read already.
    #[inline(always)]
    unsafe fn copy(&self, i: u32, slot: u32) {
        let step = (self.warp + i * self.warps).min(self.last_step) as usize;
        for r in 0..R {
            // SAFETY: 16 aligned bytes of a step of tile row r's part into this lane's 16
            // bytes of the slot (the caller's guarantees).
            unsafe {
                cp_async_16(
                    self.slot0 + 512 * (R as u32 * slot + r as u32),
                    self.lane_words.add(r * self.band_words + step * STEP_WORDS) as *const U32x4,
                )
            };
        }
        // SAFETY: no operands.
        unsafe { cp_async_commit() };
    }

    /// Waits for step `i`'s copies and reads this lane's 16 bytes of each tile row from
    /// `slot` (`i % RING_SLOTS`).
    ///
    /// # Safety
    /// Steps `0..i + RING_DEPTH` were copied, one [`RowsRing::copy`] each, in order.
    #[inline(always)]
    unsafe fn read(&self, slot: u32) -> [[u32; 4]; R] {
        // SAFETY: at most RING_DEPTH - 1 groups newer than step i's are pending.
        unsafe { cp_async_wait::<{ RING_DEPTH - 1 }>() };
        core::array::from_fn(|r| {
            // SAFETY: the slot holds this lane's bytes of step i, tile row r.
            unsafe { lds_v4(self.slot0 + 512 * (R as u32 * slot + r as u32)).0 }
        })
    }
}

/// The reduction area (`red[r][warp][row][vector]`) and the outlier area
/// (`out[r][slot][row][vector]`) of a block of `R` tile rows with `warps` weight warps, in
/// dynamic shared memory (`smem_bytes_rows(warps, B, R)` bytes); for `R = 1` those of
/// `kernels::sum_areas`.
#[inline(always)]
fn sum_areas_rows<const B: usize, const R: usize>(warps: u32) -> (*mut f32, *mut f32) {
    let red = dyn_smem() as *mut f32;
    (
        red,
        red.wrapping_add(R * warps as usize * TILE * area::<B>()),
    )
}

/// Groups of 8 vectors (the MMA's N) of the kernel for `B` vectors.
const fn groups<const B: usize>() -> usize {
    B.div_ceil(8)
}

/// Most groups of a kernel.
const MAX_GROUPS: usize = 2;
const _: () = assert!(groups::<{ crate::MAX_BATCH as usize }>() <= MAX_GROUPS);

/// The accumulators of a lane.
struct Acc {
    /// The code MMAs' fragment: rows 2g, 2g + 1 of vectors 2t, 2t + 1.
    codes: [f32; 4],
    /// The zero MMA's fragment, the same rows and vectors.
    zero: [f32; 4],
}

impl Acc {
    const ZERO: Self = Self {
        codes: [0.0; 4],
        zero: [0.0; 4],
    };
}

/// Lane `(g, t)`'s inputs of the steps, as the prep launch wrote them: tile `4 step + t`'s
/// inputs as MMA pairs ([`SpqrGemvScaledParams::xp`], [`input_pair_index`]) and its tile sum
/// (`sx`, [`tile_sum_index`]) of vector slot `g` and, at 16 vectors, `g + 8`, each clamped
/// to the last vector of the batch (the MMA columns past the batch are not written out;
/// lanes of the same step then read the same bytes instead of zeros): one offset per lane,
/// one stride per step. Coherent loads: with programmatic launch the prep may still be
/// writing them when the product starts (they are read after `griddepcontrol.wait`).
#[derive(Clone, Copy)]
struct StepInputs {
    /// The lane's first pair word of step 0, group 0.
    xp: *const u32,
    /// The lane's tile sum of step 0, group 0.
    sx: *const u32,
    /// Words from the lane's pair words of group 0 to those of group 1 (16 vectors).
    next_pairs: u32,
    /// Slots from the lane's tile sum of group 0 to that of group 1 (16 vectors).
    next_sum: u32,
    /// The last step of the prep's tiles.
    last: u32,
}

impl StepInputs {
    /// Lane `(g, t)`'s inputs in `xp` and `sx` for `batch` vectors of a matrix of
    /// `padded_cols` columns.
    #[inline(always)]
    fn lane<const B: usize>(
        xp: *const u32,
        sx: *const u32,
        g: u32,
        t: u32,
        batch: u32,
        padded_cols: u32,
    ) -> Self {
        let (v0, v1) = (g.min(batch - 1), (g + 8).min(batch - 1));
        let (p0, s0) = (
            input_pair_index(t, v0, 0, B as u32),
            tile_sum_index(t, v0, B as u32),
        );
        Self {
            xp: xp.wrapping_add(p0),
            sx: sx.wrapping_add(s0),
            // Used at 16 vectors only, where batch > 8 and so v1 >= 8 > v0.
            next_pairs: input_pair_index(t, v1, 0, B as u32).wrapping_sub(p0) as u32,
            next_sum: tile_sum_index(t, v1, B as u32).wrapping_sub(s0) as u32,
            last: sum_tiles(padded_cols) / 4 - 1,
        }
    }

    /// Step `step`'s inputs (clamped to the last step: the step after a warp's last one is
    /// loaded and not used) of each group of 8 vectors, and their tile sums.
    ///
    /// # Safety
    /// `xp` and `sx` hold the prep launch's `sum_tiles(padded_cols) * sum_slots(B)` slots
    /// (the launcher's sizes; `xp` 16-byte aligned), visible to this grid.
    #[inline(always)]
    unsafe fn load<const B: usize>(
        &self,
        step: u32,
    ) -> ([[u32; 8]; MAX_GROUPS], [u32; MAX_GROUPS]) {
        let step = step.min(self.last) as usize;
        // A step's pairs are one run of `pair_step_words`, its sums of 4 sum_slots words.
        let (pbase, sbase) = (
            step * pair_step_words(B as u32),
            step * 4 * sum_slots(B as u32) as usize,
        );
        let mut pairs = [[0u32; 8]; MAX_GROUPS];
        let mut sums = [0u32; MAX_GROUPS];
        for j in 0..groups::<B>() {
            let (pj, sj) = if j == 0 {
                (pbase, sbase)
            } else {
                (
                    pbase + self.next_pairs as usize,
                    sbase + self.next_sum as usize,
                )
            };
            // SAFETY: the slot is below sum_slots(B) and the tile below sum_tiles: inside
            // both buffers; each half of the pair words is 16-byte aligned, the second 128
            // words after the first (`input_pair_index`).
            unsafe {
                let p = self.xp.add(pj);
                let a = ld_v4(p as *const U32x4).0;
                let b = ld_v4(p.add(128) as *const U32x4).0;
                pairs[j] = [a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]];
                sums[j] = ld_u32(self.sx.add(sj));
            }
        }
        (pairs, sums)
    }
}

/// A warp's `mine` steps: `body(i, i % RING_SLOTS, inputs of step i)`, with step `i + 1`'s
/// inputs (`load(i + 1)`) loaded before step `i` runs. With `unroll` (a constant), by the ring's slots, so
/// the slot offsets are constants and the inputs alternate between sets of registers (one
/// step at a time, `ptxas` copied the 8 prefetched input words every step).
#[inline(always)]
fn steps<X: Copy>(
    unroll: bool,
    mine: u32,
    load: impl Fn(u32) -> X,
    mut body: impl FnMut(u32, u32, &X),
) {
    const _: () = assert!(RING_SLOTS == 4);
    let mut next = load(0);
    let mut i = 0;
    // Written out: as a loop over the slots, LLVM kept the loop.
    while unroll && i + RING_SLOTS <= mine {
        let x0 = next;
        let x1 = load(i + 1);
        body(i, 0, &x0);
        let x2 = load(i + 2);
        body(i + 1, 1, &x1);
        let x3 = load(i + 3);
        body(i + 2, 2, &x2);
        next = load(i + 4);
        body(i + 3, 3, &x3);
        i += RING_SLOTS;
    }
    while i < mine {
        let x = next;
        next = load(i + 1);
        body(i, i % RING_SLOTS, &x);
        i += 1;
    }
}

/// One step: the MMAs of two rows of one tile per lane, for each group of 8 vectors (`x[j]`,
/// the inputs as MMA pairs (`tc::input_pairs`), the tile sums `sums[j]`, `acc[j]`,
/// `j < groups::<B>()`).
///
/// # Safety
/// All 32 lanes of the warp call it together.
#[inline(always)]
unsafe fn step<const B: usize>(
    w: [u32; 4],
    x: &[[u32; 8]; MAX_GROUPS],
    sums: &[u32; MAX_GROUPS],
    g: u32,
    pre: f32,
    masks: [u32; 2],
    acc: &mut [Acc; MAX_GROUPS],
) {
    let w0 = u64::from(w[0]) | (u64::from(w[1]) << 32);
    let w1 = u64::from(w[2]) | (u64::from(w[3]) << 32);
    // SAFETY: the caller guarantees a converged warp.
    let (lo, hi) = unsafe { gather_stats(&w, g) };
    let (ss, sz) = half2_to_f32x2(lo);
    let (zs, zz) = half2_to_f32x2(hi);
    let ss = ss * pre;
    // s = ss (qs - sz), z = zs (qz - zz), as the CPU computes them (times a power of two).
    let row = |w: u64| {
        let s = ss * (row_qs(w) as f32 - sz);
        let z = zs * (row_qz(w) as f32 - zz);
        row_consts(s, z)
    };
    let (c0, c1) = (row(w0), row(w1));
    let (p0, p1) = (scaled_pairs(w0, &c0, masks), scaled_pairs(w1, &c1, masks));
    let za = zero_fragment(&c0, &c1);
    for ((xp, &sj), acc) in x
        .iter()
        .zip(sums.iter())
        .zip(acc.iter_mut())
        .take(groups::<B>())
    {
        for m in 0..4 {
            let b = [xp[2 * m], xp[2 * m + 1]];
            // SAFETY: the caller guarantees a converged warp.
            unsafe {
                acc.codes = mma_m16n8k16_f16_f32(
                    [p0[2 * m], p1[2 * m], p0[2 * m + 1], p1[2 * m + 1]],
                    b,
                    acc.codes,
                );
            }
        }
        // SAFETY: as above.
        acc.zero = unsafe { mma_m16n8k16_bf16_f32(za, [sj, sj], acc.zero) };
    }
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn spqr_gemv<const B: usize, const PT: bool, const PDL: bool>(
    dense: *const u64,
    x: *const u16,
    xt: *const u16,
    sx: *const u32,
    y: *mut u16,
    offsets: *const u32,
    col_vals: *const u32,
    split: Split,
    rows: u32,
    cols: u32,
    padded_cols: u32,
    batch: u32,
    pre: f32,
    post: f32,
    xp: *const u32,
) {
    let tid = thread_idx_x();
    // The last warps (`outlier_warps`) walk the outliers while the others multiply the
    // weights.
    let ow = crate::outlier_warps(B as u32);
    let (lane, warp, warps) = (tid & 31, tid >> 5, (block_dim_x() >> 5) - ow);
    let (red, outl) = sum_areas::<B>(warps);
    if warp >= warps {
        if PDL {
            // The prep launch's `xt` (sm_90, the launcher's guarantee).
            // SAFETY: no operands.
            unsafe { griddepcontrol_wait() };
        }
        // SAFETY: forwarded from the launcher's checks; the area has outlier_slots(warps, B)
        // >= 2 ow slots.
        unsafe {
            outlier_warp::<B, PT, PDL>(
                offsets,
                col_vals,
                x,
                xt,
                outl,
                &split,
                cols,
                batch,
                tid - 32 * warps,
                32 * ow,
            )
        };
    } else {
        // SAFETY: forwarded.
        unsafe {
            weights::<B, PDL>(
                dense,
                xp,
                sx,
                red,
                &split,
                padded_cols,
                batch,
                pre,
                post,
                lane,
                warp,
                warps,
            )
        };
    }
    // SAFETY: every thread gets here; every warp wrote its part of `red`, the last `outl`.
    unsafe { write_rows::<B, 1>(red, outl, y, rows, batch, &split, tid, warps, 2 * ow) };
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
    xp: *const u32,
    sx: *const u32,
    red: *mut f32,
    split: &Split,
    padded_cols: u32,
    batch: u32,
    pre: f32,
    post: f32,
    lane: u32,
    warp: u32,
    warps: u32,
) {
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
    // Tile t of each step, vectors g and g + 8 (16 vectors).
    let inputs = StepInputs::lane::<B>(xp, sx, g, t, batch, padded_cols);
    // The code masks, through a zero the compiler cannot prove (the launcher passes batch <= 16):
    // see `tc::scaled_pairs`.
    let unknown_zero = batch >> 16;
    let masks = [MASK_A | unknown_zero, MASK_B | unknown_zero];
    let mut acc = [Acc::ZERO; MAX_GROUPS];
    // This warp's steps are s0 + warp + i * warps for i < mine; the weights are copied into
    // the warp's ring in shared memory RING_DEPTH steps ahead, the inputs of step i + 1 loaded
    // into registers while step i is computed.
    // SAFETY: the part's steps in device order (s1 > s0, the launcher's guarantee); the
    // launcher gave the ring area.
    let (ring, mine) = unsafe { WeightRing::start::<B>(part_words, lane, warp, warps, s1 - s0) };
    if PDL {
        // The weights' first copies are on their way; the inputs and tile sums are the prep
        // launch's (sm_90, the launcher's guarantee).
        // SAFETY: no operands.
        unsafe { griddepcontrol_wait() };
    }
    // SAFETY: the prep launch wrote xp and sx for every step of the matrix (the launcher's
    // sizes), visible after the wait above.
    let load_x = |i: u32| unsafe { inputs.load::<B>(s0 + warp + i * warps) };
    steps(true, mine, load_x, |i, slot, x| {
        // SAFETY: steps 0..i + RING_DEPTH were copied in order; then step i + RING_DEPTH goes
        // into the slot of step i - 1, read in the previous iteration.
        let w = unsafe { ring.read(slot) };
        unsafe { ring.copy(i + RING_DEPTH, (slot + RING_DEPTH) % RING_SLOTS) };
        // SAFETY: converged warp (`mine` is warp-uniform).
        unsafe { step::<B>(w, &x.0, &x.1, g, pre, masks, &mut acc) };
    });
    // The copies past the last step finish before the block ends.
    // SAFETY: no operands.
    unsafe { cp_async_wait::<0>() };
    for (j, a) in acc.iter().enumerate().take(groups::<B>()) {
        for i in 0..4 {
            let (r, n) = (2 * g as usize + i / 2, 8 * j + 2 * t as usize + i % 2);
            // SAFETY: warp < warps, r < 16, n < 8 * groups <= area::<B>().
            unsafe {
                *red.add((warp as usize * TILE + r) * area::<B>() + n) =
                    (a.codes[i] + a.zero[i]) * post
            };
        }
    }
}

/// [`spqr_gemv`] for blocks of `R >= 2` tile rows (`crate::block_rows_kernel`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn spqr_gemv_rows<const B: usize, const PT: bool, const R: usize, const PDL: bool>(
    dense: *const u64,
    x: *const u16,
    xt: *const u16,
    sx: *const u32,
    y: *mut u16,
    offsets: *const u32,
    col_vals: *const u32,
    split: Split,
    rows: u32,
    cols: u32,
    padded_cols: u32,
    batch: u32,
    pre: f32,
    post: f32,
    xp: *const u32,
) {
    let tid = thread_idx_x();
    // The last warps (`outlier_warps`) walk the outliers while the others multiply the
    // weights.
    let ow = crate::outlier_warps(B as u32);
    let (lane, warp, warps) = (tid & 31, tid >> 5, (block_dim_x() >> 5) - ow);
    let slots = outlier_slots_rows(warps, B as u32, R as u32);
    let (red, outl) = sum_areas_rows::<B, R>(warps);
    if warp >= warps {
        if PDL {
            // The prep launch's `xt` (sm_90, the launcher's guarantee).
            // SAFETY: no operands.
            unsafe { griddepcontrol_wait() };
        }
        for r in 0..R {
            // Tile row r of the block's group: its walk, into its outlier area.
            let split_r = Split {
                band: R as u32 * split.band + r as u32,
                ..split
            };
            let outl_r = outl.wrapping_add(r * slots as usize * TILE * area::<B>());
            // SAFETY: forwarded from the launcher's checks (every tile row of the group
            // exists); tile row r's area has slots >= 2 ow slots.
            unsafe {
                outlier_warp::<B, PT, PDL>(
                    offsets,
                    col_vals,
                    x,
                    xt,
                    outl_r,
                    &split_r,
                    cols,
                    batch,
                    tid - 32 * warps,
                    32 * ow,
                )
            };
        }
    } else {
        // SAFETY: forwarded.
        unsafe {
            weights_rows::<B, R, PDL>(
                dense,
                xp,
                sx,
                red,
                &split,
                padded_cols,
                batch,
                pre,
                post,
                lane,
                warp,
                warps,
            )
        };
    }
    // SAFETY: every thread gets here; every warp wrote its part of `red`, the last `outl`.
    unsafe { write_rows::<B, R>(red, outl, y, rows, batch, &split, tid, warps, 2 * ow) };
}

/// The weights' part of the block's `R` tile rows (or of their parts) for weight warp `warp`
/// of `warps`, into `red[r][warp]`: [`weights`] with one load of the inputs for `R` tile
/// rows. (For one tile row the kernels keep [`weights`]: this code with `R = 1`, the same
/// work, compiled to 10 more instructions per step at 8 vectors, moves that `ptxas` put
/// between dependent MMAs, and measured 3-13% slower on an H100.)
///
/// # Safety
/// As the entry points; all lanes of the warp call it.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn weights_rows<const B: usize, const R: usize, const PDL: bool>(
    dense: *const u64,
    xp: *const u32,
    sx: *const u32,
    red: *mut f32,
    split: &Split,
    padded_cols: u32,
    batch: u32,
    pre: f32,
    post: f32,
    lane: u32,
    warp: u32,
    warps: u32,
) {
    let (g, t) = (lane >> 2, lane & 3);
    let nsteps = (padded_cols / TILE as u32).div_ceil(4);
    // This block's steps of its tile rows: s0..s1.
    let (s0, s1) = part_steps(nsteps, split.splits, split.part);
    let band_words = device_band_words(padded_cols as usize);
    // SAFETY: the part's words are inside the dense part (the device order: tile row `band`
    // starts at word `band * device_band_words(padded_cols)`, see `layout::device_word`, and
    // s1 <= nsteps); the group's first tile row is R band.
    let part_words =
        unsafe { dense.add(R * split.band as usize * band_words + s0 as usize * STEP_WORDS) };
    // Tile t of each step, vectors g and g + 8 (16 vectors).
    let inputs = StepInputs::lane::<B>(xp, sx, g, t, batch, padded_cols);
    // The code masks, through a zero the compiler cannot prove (the launcher passes batch <= 16):
    // see `tc::scaled_pairs`.
    let unknown_zero = batch >> 16;
    let masks = [MASK_A | unknown_zero, MASK_B | unknown_zero];
    let mut acc: [[Acc; MAX_GROUPS]; R] = core::array::from_fn(|_| [Acc::ZERO; MAX_GROUPS]);
    // This warp's steps are s0 + warp + i * warps for i < mine; the weights (of every tile
    // row) are copied into the warp's ring in shared memory RING_DEPTH steps ahead, the
    // inputs of step i + 1 loaded into registers while step i is computed: one load of the
    // inputs serves the R tile rows.
    // SAFETY: the parts' steps in device order (s1 > s0, the launcher's guarantee); the
    // launcher gave the ring area.
    let (ring, mine) =
        unsafe { RowsRing::<R>::start::<B>(part_words, band_words, lane, warp, warps, s1 - s0) };
    if PDL {
        // As in `weights`.
        // SAFETY: no operands.
        unsafe { griddepcontrol_wait() };
    }
    // SAFETY: the prep launch wrote xp and sx for every step of the matrix (the launcher's
    // sizes), visible after the wait above.
    let load_x = |i: u32| unsafe { inputs.load::<B>(s0 + warp + i * warps) };
    // Unrolled at 4 vectors only: at 16 the kernel spilled, and at 8 it measured 6% slower on
    // 28672x8192 (H100, docs/PERF.md).
    steps(B <= 4, mine, load_x, |i, slot, x| {
        // SAFETY: steps 0..i + RING_DEPTH were copied in order; then step i + RING_DEPTH goes
        // into the slot of step i - 1, read in the previous iteration.
        let w = unsafe { ring.read(slot) };
        unsafe { ring.copy(i + RING_DEPTH, (slot + RING_DEPTH) % RING_SLOTS) };
        for (wr, ar) in w.iter().zip(acc.iter_mut()) {
            // SAFETY: converged warp (`mine` is warp-uniform).
            unsafe { step::<B>(*wr, &x.0, &x.1, g, pre, masks, ar) };
        }
    });
    // The copies past the last step finish before the block ends.
    // SAFETY: no operands.
    unsafe { cp_async_wait::<0>() };
    for (r, ar) in acc.iter().enumerate() {
        for (j, a) in ar.iter().enumerate().take(groups::<B>()) {
            for i in 0..4 {
                let (row, n) = (2 * g as usize + i / 2, 8 * j + 2 * t as usize + i % 2);
                // SAFETY: r < R, warp < warps, row < 16, n < 8 * groups <= area::<B>().
                unsafe {
                    *red.add(
                        ((r * warps as usize + warp as usize) * TILE + row) * area::<B>() + n,
                    ) = (a.codes[i] + a.zero[i]) * post
                };
            }
        }
    }
}

/// The body of the scaled-weights kernel for `B` vectors, PTCSR outliers (`PT`) or CSR, `R`
/// tile rows per block, with programmatic dependent launch (`PDL`, the sm_90a module: the
/// weight warps start their copies before they wait for the prep launch's inputs).
///
/// # Safety
/// Launched by `spqr-format` with [`SpqrGemvScaledParams`], having validated the matrix
/// (lengths, offsets, outlier columns), sized the inputs and outputs, chosen `pre`/`post` from the matrix's
/// scales, and launched `splits` blocks per group of R tile rows (a number of tile rows that
/// R divides; `1 <= splits <=` a tile row's steps) of `launch_warps` threads (at least 2
/// warps) with `smem_bytes_rows(weight warps, B, R)` bytes of shared memory; with
/// `splits > 1`, `partials` holds `bands * splits * 16 * B` values and `counters` one zero
/// per group; `sx` and `xp` the tile sums and input pairs (`sum_tiles(padded_cols) *
/// sum_slots(B)` slots, `xp` 16-byte aligned) and, where not null, `xt` the transposed
/// inputs, written by
/// `cmv_spqr_prep_inputs` launched before it (with `PDL`, on sm_90, launched
/// programmatically after it).
#[inline(always)]
pub unsafe fn scaled_entry<const B: usize, const PT: bool, const R: usize, const PDL: bool>(
    p: &SpqrGemvScaledParams,
) {
    let (dense, x, xt, sx, xp, y) = (
        p.dense.as_ptr(),
        p.x.as_ptr(),
        p.xt.as_ptr(),
        p.sx.as_ptr(),
        p.xp.as_ptr(),
        p.y.as_mut_ptr(),
    );
    let (offsets, col_vals) = (p.offsets.as_ptr(), p.col_vals.as_ptr());
    let (partials, counters) = (p.partials.as_mut_ptr(), p.counters.as_mut_ptr());
    let SpqrGemvScaledParams {
        rows,
        cols,
        padded_cols,
        batch,
        splits,
        pre,
        post,
        ..
    } = *p;
    let split = Split::of_block(partials, counters, splits);
    // The same arguments for one tile row per block and for R.
    macro_rules! with_args {
        ($f:expr) => {
            $f(
                dense,
                x,
                xt,
                sx,
                y,
                offsets,
                col_vals,
                split,
                rows,
                cols,
                padded_cols,
                batch,
                pre,
                post,
                xp,
            )
        };
    }
    // SAFETY: forwarded from the launcher's checks.
    unsafe {
        if R == 1 {
            with_args!(spqr_gemv::<B, PT, PDL>)
        } else {
            with_args!(spqr_gemv_rows::<B, PT, R, PDL>)
        }
    }
}

/// Defines the entry points of the prep kernel and the scaled-weights kernels (4, 8 and 16
/// vectors), with programmatic dependent launch when `$pdl` is `true` (the sm_90a module of
/// `spqr-kernels-sm90`; `false` in this crate's module), and the module's launch bounds.
#[doc(hidden)]
#[macro_export]
macro_rules! scaled_entry_points {
    ($pdl:literal) => {
        /// The prep kernel (see `spqr_kernels::kernels::prep_inputs`).
        ///
        /// # Safety
        /// As `prep_inputs`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn cmv_spqr_prep_inputs(p: $crate::PrepParams) {
            // SAFETY: the launcher's checks are this kernel's contract.
            unsafe { $crate::kernels::prep_inputs::<$pdl>(&p) }
        }

        $crate::scaled_entry_points!(@gemv $pdl;
            cmv_spqr_csr_b4 = 4, false, 1;
            cmv_spqr_csr_b8 = 8, false, 1;
            cmv_spqr_csr_b16 = 16, false, 1;
            cmv_spqr_ptcsr_b4 = 4, true, 1;
            cmv_spqr_ptcsr_b8 = 8, true, 1;
            cmv_spqr_ptcsr_b16 = 16, true, 1;
            cmv_spqr_csr_b4_r2 = 4, false, 2;
            cmv_spqr_ptcsr_b4_r2 = 4, true, 2;
            cmv_spqr_csr_b8_r2 = 8, false, 2;
            cmv_spqr_csr_b16_r2 = 16, false, 2;
            cmv_spqr_ptcsr_b8_r2 = 8, true, 2;
            cmv_spqr_ptcsr_b16_r2 = 16, true, 2;
        );

        /// Launch bounds of every kernel of the module (`cargo xtask ptx` turns this into
        /// `.maxntid`): the launcher never uses more threads, and `ptxas` may then use more
        /// than 64 registers.
        #[unsafe(no_mangle)]
        pub static CMV_MAXNTID: u32 = $crate::BLOCK_THREADS;

        /// Blocks per SM `ptxas` should plan registers for (`.minnctapersm`): 3 blocks of the
        /// largest size (6 of the usual 4 warps), up to 85 registers, which keeps the loops of
        /// 2 to 8 vectors free of spills and of recomputed addresses (at 64, `ptxas` rebuilds
        /// them every step or spills). Sixteen vectors: 2 blocks of the largest size per SM, up
        /// to 128 registers (at 80 the second group's inputs and accumulators spilled and the
        /// kernel measured 3-38% slower on an H200, docs/PERF.md); two tile rows: 2 blocks, for
        /// the second tile row's accumulators and weights.
        #[unsafe(no_mangle)]
        pub static CMV_MINNCTAPERSM: u32 = 3;

        cmv_device::launch_bounds! {
            CMV_MINNCTAPERSM_cmv_spqr_csr_b16 = 2;
            CMV_MINNCTAPERSM_cmv_spqr_ptcsr_b16 = 2;
            CMV_MINNCTAPERSM_cmv_spqr_csr_b4_r2 = 2;
            CMV_MINNCTAPERSM_cmv_spqr_ptcsr_b4_r2 = 2;
            CMV_MINNCTAPERSM_cmv_spqr_csr_b8_r2 = 2;
            CMV_MINNCTAPERSM_cmv_spqr_ptcsr_b8_r2 = 2;
            CMV_MINNCTAPERSM_cmv_spqr_csr_b16_r2 = 2;
            CMV_MINNCTAPERSM_cmv_spqr_ptcsr_b16_r2 = 2;
        }
    };
    (@gemv $pdl:literal; $($name:ident = $b:literal, $pt:literal, $r:literal;)*) => {$(
        /// SpQR GEMV for up to this many input vectors, this many tile rows per block (see
        /// `spqr_kernels::kernels_scaled::scaled_entry`).
        ///
        /// # Safety
        /// As `scaled_entry`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: $crate::SpqrGemvScaledParams) {
            // SAFETY: the launcher's checks are this kernel's contract.
            unsafe { $crate::kernels_scaled::scaled_entry::<$b, $pt, $r, $pdl>(&p) }
        }
    )*};
}

#[cfg(feature = "entries")]
crate::scaled_entry_points!(false);
