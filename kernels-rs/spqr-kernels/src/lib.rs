//! SpQR (3-bit 16x16 tiles with bi-level statistics, fp16 outliers) for cmv: the packing that
//! the host encoder and CPU decoder share with the GPU kernel ([`layout`]), and (on `nvptx64`)
//! the kernel. The format is specified in `docs/SPQR.md`.
//!
//! Every kernel takes its parameters as one struct, launched by `spqr-format` through
//! `cmv-runtime`'s typed launch: the routed kernels (1 and 2 vectors) [`SpqrGemvParams`], the
//! scaled-weights kernels (4, 8 and 16 vectors) [`SpqrGemvScaledParams`] (the same fields with
//! `pre` and `post`). As a parameter struct the scaled-weights kernels got 2 more registers
//! from `ptxas` on sm_80 (76 to 78) and 1 more on sm_90 (78 to 79), within the same
//! allocation of 80, and a slightly different loop schedule (LLVM no longer knows the
//! pointers to be global); neither the struct's field order nor rebuilding the pointers
//! where they are used changed that.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]

pub mod int8;
pub mod layout;
pub mod tc;
pub mod tc_scaled;

use cmv_device::{DevPtr, DevPtrMut, KernelParams};

/// The kernels' bodies. The entry points are defined here with the `entries` feature (the
/// prep and scaled-weights ones by [`scaled_entry_points!`], which `spqr-kernels-sm90` defines
/// again with programmatic dependent launch).
#[cfg(target_arch = "nvptx64")]
#[doc(hidden)]
pub mod kernels;
#[cfg(target_arch = "nvptx64")]
#[doc(hidden)]
pub mod kernels_int8;
#[cfg(target_arch = "nvptx64")]
#[doc(hidden)]
pub mod kernels_scaled;

/// Most threads per block of the kernel (one block per tile row); see [`block_threads`].
pub const BLOCK_THREADS: u32 = 256;
/// Largest batch a kernel runs (kernels exist for 1, 2, 4, 8 and 16).
pub const MAX_BATCH: u32 = 16;
/// The kernel batch (outlier accumulators per row) that runs `batch` vectors.
pub const fn kernel_batch(batch: u32) -> Option<u32> {
    match batch {
        1 => Some(1),
        2 => Some(2),
        3..=4 => Some(4),
        5..=8 => Some(8),
        9..=16 => Some(16),
        _ => None,
    }
}

/// Values per row of a block's result and outlier areas in shared memory for the kernel of
/// `kernel_batch` vectors: 8 up to 8 vectors (the layout of the kernels before batch 16), 16
/// for 16.
pub const fn area_batch(kernel_batch: u32) -> u32 {
    if kernel_batch > 8 { 16 } else { 8 }
}

/// Threads per block of weight warps for a matrix of `padded_rows x padded_cols`, before
/// [`launch_warps`] caps them at 7 and adds the outlier warp: 4 warps per tile row, or 8
/// when there are fewer than 512 tile rows (so that short, wide matrices still fill the GPU),
/// never more warps than the tile row has steps of 4 tiles. (4 warps measured best from 688
/// tile rows on, 8 below, and 8 warps beat 4 warps in 2 parts: docs/PERF.md.)
pub const fn block_threads(padded_rows: u32, padded_cols: u32) -> u32 {
    let steps = padded_cols.div_ceil(64);
    let want = if padded_rows / 16 < 512 { 8 } else { 4 };
    let warps = if steps < want { steps } else { want };
    32 * if warps == 0 { 1 } else { warps }
}

/// Warps of a block of the kernel for `kernel_batch` vectors that walk the outliers: one
/// ([`OUTLIER_WARPS_16`] for 16 vectors). A walk is a chain of dependent loads (an entry, then
/// its inputs). While the outlier warps read each input with its own 2-byte load, one warp's
/// walk took longer than the weights at 16 vectors and two walked them (8192x28672 at batch 16
/// ran 2.5-3x batch 8's time, docs/PERF.md); with the inputs by column (one or two 16-byte
/// loads per entry, `transposed_index`) one warp keeps up, and the block of 4 weight warps
/// and 1 outlier warp fits 3 times per SM at 112 registers instead of 2.
pub const fn outlier_warps(kernel_batch: u32) -> u32 {
    if kernel_batch > 8 {
        OUTLIER_WARPS_16
    } else {
        1
    }
}

/// Outlier warps of the 16-vector kernels (see [`outlier_warps`]).
pub const OUTLIER_WARPS_16: u32 = 1;

/// Threads per block of the kernel for `kernel_batch` vectors and how many of their warps
/// multiply weights, for a matrix of `padded_rows x padded_cols`: the weight warps of
/// [`block_threads`] (at most 8 less the outlier warps) and the [`outlier_warps`] that walk
/// the outliers at the same time. This measured faster at batch 1 and at batch 4 and 8 than
/// all warps adding the outliers after (1-2 vectors) or before (4-8 vectors) the weights
/// (docs/PERF.md has the measurements).
pub const fn launch_warps(padded_rows: u32, padded_cols: u32, kernel_batch: u32) -> (u32, u32) {
    let t = block_threads(padded_rows, padded_cols);
    let ow = outlier_warps(kernel_batch);
    let most = BLOCK_THREADS / 32 - ow;
    let w = if t / 32 < most { t / 32 } else { most };
    (32 * (w + ow), w)
}

/// Slots of the outlier area of a block of `warps` weight warps of the kernel for
/// `kernel_batch` vectors: two per weight warp (the area's size), of which the outlier warps
/// fill two each.
pub const fn outlier_slots(warps: u32, kernel_batch: u32) -> u32 {
    let ow = outlier_warps(kernel_batch);
    // (Written so that one outlier warp folds to `2 * warps`: a block has a weight warp.)
    2 * if ow > 1 && warps < ow { ow } else { warps }
}

/// Most blocks one tile row is split across.
pub const MAX_SPLITS: u32 = 16;
/// Fewest steps per warp a part of a split tile row keeps: below that, a block's fixed costs
/// (its first weight copies, its inputs' first round, the parts' meeting) outweigh the
/// parallelism it adds (4096 x 4096 ran slower in 2 parts of 8 steps per warp).
pub const MIN_PART_STEPS_PER_WARP: u32 = 16;
/// Warps per SM up to which tile rows are split (half of what the kernels run at once).
pub const SPLIT_WARPS_PER_SM: u32 = 16;

/// The steps `s0..s1` of part `part` of a tile row of `nsteps` steps split into `splits`
/// parts (as equal as can be; non-empty when `splits <= nsteps`).
pub const fn part_steps(nsteps: u32, splits: u32, part: u32) -> (u32, u32) {
    let (n, s) = (nsteps as u64, splits as u64);
    (
        (part as u64 * n / s) as u32,
        ((part as u64 + 1) * n / s) as u32,
    )
}

/// How many blocks to split each of `bands` tile rows of `nsteps` steps across, for blocks of
/// `warps` warps on a GPU of `sms` SMs: the most parts (at most [`MAX_SPLITS`], each of at
/// least [`MIN_PART_STEPS_PER_WARP`] steps per warp) that keep the warps at
/// [`SPLIT_WARPS_PER_SM`] per SM or fewer. The parts' meeting adds a block's worth of
/// latency at the end, so splitting pays only where the tile rows alone leave most of the
/// GPU idle (docs/PERF.md: 256 tile rows of 8 warps ran faster unsplit than 4 warps in 2
/// parts).
pub fn choose_splits(bands: u32, nsteps: u32, warps: u32, sms: u32) -> u32 {
    let warps = warps.max(1);
    let most = (nsteps / (MIN_PART_STEPS_PER_WARP * warps)).clamp(1, MAX_SPLITS);
    (SPLIT_WARPS_PER_SM * sms / warps)
        .checked_div(bands)
        .unwrap_or(1)
        .clamp(1, most)
}

/// Blocks per SM from which a one-vector launch (routed or integer-MMA kernel, tile rows not
/// split) goes programmatically after the kernel before it on Hopper ([`routed_programmatic`]).
pub const ROUTED_PDL_BLOCKS_PER_SM: u32 = 12;

/// Whether a launch of the routed or integer-MMA kernel for `kernel_batch` vectors, `splits`
/// blocks per tile row and `blocks` blocks in all, on `sms` SMs, is launched programmatically
/// (with the sm_90a module): one vector, unsplit tile rows, and at least
/// [`ROUTED_PDL_BLOCKS_PER_SM`] blocks per SM, that is about three rounds of resident blocks,
/// so that the blocks that start early, while the kernel before ends, leave the SMs no more
/// unevenly loaded than the rounds after them even out. Measured on an H200 (docs/PERF.md,
/// "SpQR and SBVR: a call that starts while the one before ends"): 1-3% faster at 28672 x
/// 8192 (1792 blocks on 132 SMs), 1-3% slower at 11008 x 4096 (688 blocks) and 52% slower at
/// 8192 x 28672 (split tile rows, fewer blocks than one round) when launched so.
pub const fn routed_programmatic(kernel_batch: u32, splits: u32, blocks: u32, sms: u32) -> bool {
    kernel_batch == 1
        && splits == 1
        && blocks as u64 >= ROUTED_PDL_BLOCKS_PER_SM as u64 * sms as u64
}

/// Largest kernel batch of the routed kernel ([`tc`]); larger batches run the scaled-weights
/// kernel ([`tc_scaled`]), which takes the fp16 prescale arguments.
pub const ROUTED_MAX_BATCH: u32 = 2;

/// Whether the kernel for `kernel_batch` vectors is the scaled-weights one (its launch passes
/// `pre` and `post` from [`tc_scaled::prescale`]).
pub const fn is_scaled_kernel(kernel_batch: u32) -> bool {
    kernel_batch > ROUTED_MAX_BATCH
}

/// Vector sets of a routed kernel batch: the B operand carries two vectors of each tile.
pub const fn sets(kernel_batch: u32) -> u32 {
    kernel_batch.div_ceil(2)
}

/// Most vector sets of the routed kernel.
pub const MAX_SETS: usize = 1;
/// Most staging units (16 inputs of one vector) a lane stages per round.
pub const MAX_UNITS: usize = 2;

/// Steps whose inputs a warp of the routed kernel stages at once.
pub const fn round_steps(kernel_batch: u32) -> u32 {
    8 / sets(kernel_batch)
}

/// Bytes of a warp's staged inputs per round: steps x 4 tiles x sets x 64 (two vectors' 16
/// fp16 inputs).
pub const ROUND_BYTES: u32 = 8 * 4 * 64;
/// Bytes of zeros after each warp's staging area (the B columns of other tiles).
pub const ZERO_BYTES: u32 = 64 * MAX_SETS as u32;
/// Shared memory of one warp's staging.
pub const WARP_STAGE_BYTES: u32 = ROUND_BYTES + ZERO_BYTES;

const _: () = assert!(round_steps(1) * 4 * sets(1) * 64 == ROUND_BYTES);
const _: () =
    assert!(round_steps(ROUTED_MAX_BATCH) * 4 * sets(ROUTED_MAX_BATCH) * 64 == ROUND_BYTES);
const _: () = assert!((4 * round_steps(2) * 2).div_ceil(32) as usize <= MAX_UNITS);
const _: () = assert!(sets(ROUTED_MAX_BATCH) as usize <= MAX_SETS);

/// Steps by which the routed kernel's weight copies run ahead of their use.
pub const RING_DEPTH: u32 = 3;
/// Slots of a warp's weight ring (one step, 512 bytes, each): one more than [`RING_DEPTH`],
/// so that a slot is refilled one step after its last read.
pub const RING_SLOTS: u32 = RING_DEPTH + 1;
/// Shared memory of one warp's weight ring.
pub const WARP_RING_BYTES: u32 = RING_SLOTS * 512;

const _: () = assert!(RING_SLOTS.is_power_of_two());
// The routed kernel's rounds start at multiples of RING_SLOTS (its unrolled loop relies on it).
const _: () =
    assert!(round_steps(1).is_multiple_of(RING_SLOTS) && round_steps(2).is_multiple_of(RING_SLOTS));

/// Bytes of dynamic shared memory for a block of `warps` warps of the kernel for
/// `kernel_batch` vectors: each warp's 16 x [`area_batch`] results, each 16-thread slot's
/// 16 x [`area_batch`] outlier sums (fp32), each warp's weight ring, then (routed kernel only)
/// each warp's input staging area. (The scaled-weights kernel reads its inputs through L1, so
/// it leaves L1 the staging area's share: with it, 8 vectors measured slower, docs/PERF.md.)
pub const fn smem_bytes(warps: u32, kernel_batch: u32) -> u32 {
    if is_scaled_kernel(kernel_batch) {
        stage_offset(warps, kernel_batch)
    } else {
        stage_offset(warps, kernel_batch) + warps * WARP_STAGE_BYTES
    }
}

/// Where the warps' weight rings start in the dynamic shared memory of a block of `warps`
/// warps of the kernel for `kernel_batch` vectors (after the results and the outlier sums,
/// see [`smem_bytes`]).
pub const fn ring_offset(warps: u32, kernel_batch: u32) -> u32 {
    4 * (warps + outlier_slots(warps, kernel_batch)) * 16 * area_batch(kernel_batch)
}

/// Where the warps' staging areas start (after the weight rings).
pub const fn stage_offset(warps: u32, kernel_batch: u32) -> u32 {
    ring_offset(warps, kernel_batch) + warps * WARP_RING_BYTES
}

/// Most tile rows a block of the scaled-weights kernels computes ([`block_rows_kernel`]).
pub const MAX_BLOCK_ROWS: u32 = 2;

/// Whether a kernel computing `rows` tile rows per block exists for `kernel_batch` vectors:
/// one tile row for every batch, two for the scaled-weights kernels (4, 8 and 16 vectors:
/// `cmv_spqr_*_b4_r2`, `_b8_r2`, `_b16_r2`).
/// With two, a weight warp multiplies the same 4 tiles' columns of both tile rows per step,
/// so each input it loads serves twice the weights.
pub const fn block_rows_kernel(kernel_batch: u32, rows: u32) -> bool {
    rows == 1 || (rows == 2 && is_scaled_kernel(kernel_batch))
}

/// Tile rows per block the launcher picks for the kernel of `kernel_batch` vectors on a
/// `padded_rows x padded_cols` matrix on a GPU of `sms` SMs: two ([`block_rows_kernel`]) at 8
/// vectors on matrices of 2^27 weights or more; at 4 vectors where the pairs of tile rows
/// are more than two per SM (they then run 4 weight warps, [`block_rows_warps`]); at 16
/// vectors in both cases; one elsewhere (and where the tile rows are odd). Measured on an
/// H100 (docs/PERF.md), two against one tile row, us:
/// - 28672x8192: 69.7 / 70.5 / 103.4 against 73.6 / 76.5 / 115.5 at 4 / 8 / 16 vectors;
/// - 8192x28672 (256 pairs): 71.2-72.4 / 104.7-106.7 against 77.0-77.5 / 113.8-116.6 at 8 /
///   16 vectors, but 74.9-76.2 against 73.4-73.8 at 4;
/// - 11008x4096 (344 pairs): 18.3-18.8 / 28.4-28.9 against 19.7-19.8 / 31.6-31.7 at 4 / 16
///   vectors, but 21.3-23.6 against 21.4-22.0 at 8;
/// - 8192x8192 (256 pairs) and 4096x14336 (128 pairs, split in two): two lost or tied at
///   every batch (8192x8192 at 8 vectors 26.6 against 26.0; 4096x14336 24.8 / 30.3 / 45.1
///   against 21.8 / 24.1 / 35.1).
pub const fn default_block_rows(
    kernel_batch: u32,
    padded_rows: u32,
    padded_cols: u32,
    sms: u32,
) -> u32 {
    let bands = padded_rows / 16;
    let big = (padded_rows as u64) * (padded_cols as u64) >= 1 << 27;
    let many = bands / 2 > 2 * sms;
    let two = match kernel_batch {
        16 => big || many,
        8 => big,
        4 => many,
        _ => false,
    };
    if two && bands.is_multiple_of(2) { 2 } else { 1 }
}

/// Weight warps per block of the kernels of two tile rows on a matrix of `bands` tile rows
/// and `steps` steps per tile row, on a GPU of `sms` SMs: 7 (the most next to the outlier
/// warp) where the pairs fit one wave of 2 blocks per SM (the registers of 8-warp blocks at
/// 106-122 registers), else 4 (3 blocks of 5 warps per SM). At 11008x4096 (344 pairs), 16
/// vectors: 28.4 us with 4 weight warps, 38.5 with 7 (on an H100, docs/PERF.md); at
/// 8192x28672 (256 pairs) 7 and 3 warps were even.
pub const fn block_rows_warps(bands: u32, steps: u32, sms: u32) -> u32 {
    let w = if bands / 2 <= 2 * sms { 7 } else { 4 };
    if steps < w {
        if steps == 0 { 1 } else { steps }
    } else {
        w
    }
}

/// Outlier slots of a block of `rows` tile rows ([`outlier_slots`] for one; for more, the
/// two of each outlier warp, per tile row).
pub const fn outlier_slots_rows(warps: u32, kernel_batch: u32, rows: u32) -> u32 {
    if rows == 1 {
        outlier_slots(warps, kernel_batch)
    } else {
        2 * outlier_warps(kernel_batch)
    }
}

/// Where the weight rings start in a block of `rows` tile rows ([`ring_offset`] for one):
/// after `rows` reduction areas (`[rows][warps][16][area]`) and `rows` outlier areas
/// (`[rows][slots][16][area]`).
pub const fn ring_offset_rows(warps: u32, kernel_batch: u32, rows: u32) -> u32 {
    4 * rows
        * (warps + outlier_slots_rows(warps, kernel_batch, rows))
        * 16
        * area_batch(kernel_batch)
}

/// Bytes of dynamic shared memory of a block of `warps` weight warps computing `rows` tile
/// rows ([`smem_bytes`] for one): the areas, then each warp's ring of `rows * 512`-byte slots.
pub const fn smem_bytes_rows(warps: u32, kernel_batch: u32, rows: u32) -> u32 {
    if rows == 1 {
        smem_bytes(warps, kernel_batch)
    } else {
        ring_offset_rows(warps, kernel_batch, rows) + rows * warps * WARP_RING_BYTES
    }
}

const _: () = assert!(ring_offset_rows(5, 8, 1) == ring_offset(5, 8));
const _: () = assert!(smem_bytes_rows(7, 16, 1) == smem_bytes(7, 16));
// The largest two-row block fits an SM (227 KB) twice.
const _: () = assert!(2 * smem_bytes_rows(BLOCK_THREADS / 32, MAX_BATCH, 2) <= 227 * 1024);

// The largest block stays within the 48 KB a launch gets without opting in.
const _: () = assert!(smem_bytes(BLOCK_THREADS / 32, 1) <= 48 * 1024);
const _: () =
    assert!(smem_bytes(BLOCK_THREADS / 32, MAX_BATCH) <= smem_bytes(BLOCK_THREADS / 32, 1));
const _: () = assert!(smem_bytes(BLOCK_THREADS / 32, 8) <= smem_bytes(BLOCK_THREADS / 32, 1));

/// Parameters of the routed kernels (`cmv_spqr_csr_b1`, `_b2`, `cmv_spqr_ptcsr_b1`, `_b2`),
/// in the order of their former arguments (the scaled-weights kernels take
/// [`SpqrGemvScaledParams`]: the same fields with `pre` and `post` before `aligned`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpqrGemvParams {
    /// The dense words in device order (`layout::device_order`), every tile row's steps.
    pub dense: DevPtr<u64>,
    /// `X`, `batch * cols` fp16 values (as bits), in the matrix's input order.
    pub x: DevPtr<u16>,
    /// `Y`, `batch * rows` fp16 values (as bits).
    pub y: DevPtrMut<u16>,
    /// The outlier offsets: CSR row offsets (`padded_rows + 1`) or PTCSR block offsets
    /// (`padded_rows / 16 + 1`), as the kernel's name says.
    pub offsets: DevPtr<u32>,
    /// The outlier words of that encoding.
    pub col_vals: DevPtr<u32>,
    /// With `splits > 1`, the parts' fp32 sums, `bands * splits * 16 * B` values.
    pub partials: DevPtrMut<f32>,
    /// With `splits > 1`, one counter per tile row, zero between launches.
    pub counters: DevPtrMut<u32>,
    /// Rows of the matrix.
    pub rows: u32,
    /// Columns of the matrix.
    pub cols: u32,
    /// Columns padded to a multiple of 16.
    pub padded_cols: u32,
    /// Input vectors, `1..=` the kernel's batch.
    pub batch: u32,
    /// Blocks per tile row, `1..=` its steps.
    pub splits: u32,
    /// 1 where every input vector is 16-byte aligned and `cols % 8 == 0`, else 0.
    pub aligned: u32,
}
const _: () = assert!(core::mem::size_of::<SpqrGemvParams>() == 80);
const _: () = assert!(core::mem::align_of::<SpqrGemvParams>() == 4);
// SAFETY: repr(C), no padding (size asserted: 7 pointers of 8 bytes and 6 words, alignment
// 4), plain data and device pointers only; the one parameter of the kernels named above.
unsafe impl KernelParams for SpqrGemvParams {}

impl SpqrGemvParams {
    /// The parameters of a scaled-weights kernel: these fields with the transposed inputs
    /// `xt`, the tile sums `sx`, the inputs as MMA pairs `xp` and `pre` and `post`.
    pub const fn with_prescale(
        self,
        xt: DevPtr<u16>,
        sx: DevPtr<u32>,
        xp: DevPtr<u32>,
        pre: f32,
        post: f32,
    ) -> SpqrGemvScaledParams {
        let Self {
            dense,
            x,
            y,
            offsets,
            col_vals,
            partials,
            counters,
            rows,
            cols,
            padded_cols,
            batch,
            splits,
            aligned,
        } = self;
        SpqrGemvScaledParams {
            dense,
            x,
            y,
            offsets,
            col_vals,
            xt,
            sx,
            xp,
            partials,
            counters,
            rows,
            cols,
            padded_cols,
            batch,
            splits,
            pre,
            post,
            aligned,
        }
    }
}

/// Parameters of the scaled-weights kernels (`cmv_spqr_csr_b4`, `_b8`, `_b16`,
/// `cmv_spqr_ptcsr_b4`, `_b8`, `_b16`), in the order of their former arguments: the fields of [`SpqrGemvParams`] with the
/// prescale factors `pre` and `post` before `aligned`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpqrGemvScaledParams {
    /// The dense words in device order (`layout::device_order`), every tile row's steps.
    pub dense: DevPtr<u64>,
    /// `X`, `batch * cols` fp16 values (as bits), in the matrix's input order.
    pub x: DevPtr<u16>,
    /// `Y`, `batch * rows` fp16 values (as bits).
    pub y: DevPtrMut<u16>,
    /// The outlier offsets: CSR row offsets (`padded_rows + 1`) or PTCSR block offsets
    /// (`padded_rows / 16 + 1`), as the kernel's name says.
    pub offsets: DevPtr<u32>,
    /// The outlier words of that encoding.
    pub col_vals: DevPtr<u32>,
    /// The inputs by column for the outlier warps where [`walk_transposed`]: `cols * B` fp16
    /// values (as bits), column `c`'s `B` inputs at `c * B` (zeros past `batch`), written by
    /// `cmv_spqr_prep_inputs` ([`PrepParams`]) before the launch; null otherwise.
    pub xt: DevPtr<u16>,
    /// The tile sums of the inputs for the zero terms (`tc_scaled::tile_sum_pair`), one
    /// `bf16x2` word per tile and vector slot at [`tile_sum_index`], [`sum_tiles`] tiles of
    /// [`sum_slots`] slots, written by `cmv_spqr_prep_inputs` before the launch.
    pub sx: DevPtr<u32>,
    /// The inputs as the weight warps' MMAs take them: per tile and vector slot the 8 `half2`
    /// words of `tc::input_pairs` at [`input_pair_index`] (zeros past the columns and the
    /// batch), [`sum_tiles`] tiles of [`sum_slots`] slots, written by `cmv_spqr_prep_inputs`
    /// before the launch.
    pub xp: DevPtr<u32>,
    /// With `splits > 1`, the parts' fp32 sums, `bands * splits * 16 * B` values.
    pub partials: DevPtrMut<f32>,
    /// With `splits > 1`, one counter per tile row, zero between launches.
    pub counters: DevPtrMut<u32>,
    /// Rows of the matrix.
    pub rows: u32,
    /// Columns of the matrix.
    pub cols: u32,
    /// Columns padded to a multiple of 16.
    pub padded_cols: u32,
    /// Input vectors, `1..=` the kernel's batch.
    pub batch: u32,
    /// Blocks per tile row, `1..=` its steps.
    pub splits: u32,
    /// Power of two the scales are multiplied by before the fp16 arithmetic
    /// ([`tc_scaled::prescale`] of the matrix's scales).
    pub pre: f32,
    /// Power of two the fp32 results are multiplied by, `1 / pre`.
    pub post: f32,
    /// 1 where every input vector is 16-byte aligned and `cols % 8 == 0`, else 0. (Kept
    /// for the layout shared with [`SpqrGemvParams`]; the weight warps read the prep's input
    /// pairs `xp`, which are always aligned, and the prep takes its own `aligned`.)
    pub aligned: u32,
}
const _: () = assert!(core::mem::size_of::<SpqrGemvScaledParams>() == 112);
const _: () = assert!(core::mem::align_of::<SpqrGemvScaledParams>() == 4);
// SAFETY: repr(C), no padding (size asserted: 10 pointers of 8 bytes and 8 words, alignment
// 4), plain data and device pointers only; the one parameter of the kernels named above.
unsafe impl KernelParams for SpqrGemvScaledParams {}

/// Whether the kernel for `kernel_batch` vectors can walk its outliers with the inputs by
/// column ([`SpqrGemvScaledParams::xt`], written by `cmv_spqr_prep_inputs` before it;
/// a null `xt` walks with one load per input as the smaller batches do): 4, 8 and 16 vectors.
pub const fn reads_transposed(kernel_batch: u32) -> bool {
    kernel_batch >= 4
}

/// Whether a launch of the kernel for `kernel_batch` vectors with `weight_warps` weight warps
/// per block on a `padded_rows x padded_cols` matrix walks the inputs by column: at 4, 8 and
/// 16 vectors, where the prep launch runs anyway (the transpose is a few more of its blocks).
/// Measured on an H100 (docs/PERF.md "SpQR: the outlier walk by column at 4 and 8 vectors"):
/// at 8 vectors 8192x8192 took 21.1-21.3 against 25.0-25.6 us walking by vector, 11008x4096
/// 20.0 against 23.4-24.1; at 4 vectors every benchmark shape was 1-12% faster (28672x8192
/// 65.8-67.4 against 74.3-75.0 us). (Before the prep kernel existed at 4 and 8 vectors the
/// transpose was a launch of its own and lost 1-6% at some shapes.)
pub const fn walk_transposed(
    kernel_batch: u32,
    weight_warps: u32,
    padded_rows: u32,
    padded_cols: u32,
) -> bool {
    let _ = (weight_warps, padded_rows, padded_cols);
    kernel_batch >= 4
}

/// Threads per block of `cmv_spqr_prep_inputs` (one column, or one tile sum, each).
pub const PREP_THREADS: u32 = 256;

/// Where input `v` of column `c` sits in the transposed inputs of the kernel for
/// `kernel_batch` vectors ([`SpqrGemvScaledParams::xt`]): the column's `kernel_batch` inputs
/// are contiguous, so an outlier's inputs for every vector are one or two 16-byte loads
/// instead of one scattered 2-byte load per vector.
pub const fn transposed_index(c: u32, v: u32, kernel_batch: u32) -> usize {
    c as usize * kernel_batch as usize + v as usize
}

/// Tiles of the tile sums and input pairs ([`SpqrGemvScaledParams::sx`], `xp`) of a matrix
/// of `padded_cols` columns: every tile of the weight steps (4 tiles each), so the last
/// step's tiles past the columns have them too (zeros).
pub const fn sum_tiles(padded_cols: u32) -> u32 {
    (padded_cols / layout::TILE as u32).div_ceil(4) * 4
}

/// Vector slots per tile of the tile sums of the kernel for `kernel_batch` vectors: one per
/// lane row `g` of each group of 8 (the MMA's columns), zeros past the batch.
pub const fn sum_slots(kernel_batch: u32) -> u32 {
    8 * kernel_batch.div_ceil(8)
}

/// Where the sum of tile `tile`'s inputs of vector slot `v` sits in the tile sums of the
/// kernel for `kernel_batch` vectors: a step's 4 tiles are `4 * sum_slots` consecutive words.
pub const fn tile_sum_index(tile: u32, v: u32, kernel_batch: u32) -> usize {
    tile as usize * sum_slots(kernel_batch) as usize + v as usize
}

/// Words of a tile's inputs of one vector as MMA pairs ([`SpqrGemvScaledParams::xp`]): the
/// 8 `half2` words of `tc::input_pairs` (the B operands of a step's 4 code MMAs), 32 bytes.
pub const PAIR_WORDS: usize = 8;

/// Where word `w` (`< PAIR_WORDS`) of tile `tile`'s input pairs of vector slot `v` sits in
/// the input pairs of the kernel for `kernel_batch` vectors ([`SpqrGemvScaledParams::xp`]).
/// Laid out so that each 16-byte load of a weight warp reads 512 contiguous bytes: per step
/// (4 tiles), per group `j` of 8 slots, per half (words `0..4`, `4..8`), the 16 bytes of
/// lane `(g, t)` (slot `8 j + g`, tile `4 step + t`) at `16 (4 g + t)`. (Tile-major 32-byte
/// pieces, one per lane, made a quarter warp's 16-byte loads touch 4 lines of 128 bytes
/// instead of 2 and measured 15-30% slower than loading the inputs themselves: docs/PERF.md.)
pub const fn input_pair_index(tile: u32, v: u32, w: u32, kernel_batch: u32) -> usize {
    let (step, t) = (tile as usize / 4, tile as usize % 4);
    let (j, g) = (v as usize / 8, v as usize % 8);
    let groups = sum_slots(kernel_batch) as usize / 8;
    ((step * groups + j) * 2 + w as usize / 4) * 128 + (4 * g + t) * 4 + w as usize % 4
}

/// Words of a step's input pairs ([`input_pair_index`]) for the kernel for `kernel_batch`
/// vectors: `4 * sum_slots * PAIR_WORDS`.
pub const fn pair_step_words(kernel_batch: u32) -> usize {
    4 * sum_slots(kernel_batch) as usize * PAIR_WORDS
}

/// Parameters of `cmv_spqr_prep_inputs`, run before every scaled-weights kernel. Its first
/// `transpose_blocks` blocks write `xt[transposed_index(c, v, slots)] = x[v * cols + c]` for
/// `v < batch`, zero for `batch <= v < slots` (none where `xt` is null); the other blocks the
/// tile sums `sx[tile_sum_index(tile, v, slots)]` (`tc_scaled::tile_sum_pair` of the
/// inputs of vector `v` at columns `16 tile ..`, zeros past `cols`) and the same inputs as
/// MMA pairs, `xp[input_pair_index(tile, v, slots)..][..PAIR_WORDS]` (`tc::input_pairs`),
/// zeros for `v >= batch`, for `tile < sum_tiles`, `v < sum_slots(slots)`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrepParams {
    /// `batch * cols` fp16 values (as bits), vector by vector.
    pub x: DevPtr<u16>,
    /// `cols * slots` fp16 values (as bits), column by column; null with no transpose.
    pub xt: DevPtrMut<u16>,
    /// `sum_tiles * sum_slots(slots)` words.
    pub sx: DevPtrMut<u32>,
    /// `sum_tiles * sum_slots(slots) * PAIR_WORDS` words, 16-byte aligned.
    pub xp: DevPtrMut<u32>,
    /// Columns.
    pub cols: u32,
    /// Input vectors, `1..=slots`.
    pub batch: u32,
    /// The kernel batch, 4, 8 or 16.
    pub slots: u32,
    /// [`sum_tiles`] of the matrix.
    pub sum_tiles: u32,
    /// Blocks of the transpose: `cols.div_ceil(PREP_THREADS)`, or 0 where `xt` is null.
    pub transpose_blocks: u32,
    /// 1 where every input vector is 16-byte aligned and `cols % 8 == 0`, else 0.
    pub aligned: u32,
    /// In the sm_90a module (programmatic dependent launch): 1 lets the product launch as
    /// each block starts, 0 once each block has written its values ([`early_dependents`]).
    /// Unused elsewhere.
    pub early: u32,
}
const _: () = assert!(core::mem::size_of::<PrepParams>() == 60);
const _: () = assert!(core::mem::align_of::<PrepParams>() == 4);
// SAFETY: repr(C), no padding (size asserted: 4 pointers of 8 bytes and 7 words, alignment
// 4), plain data and device pointers only; the parameter of `cmv_spqr_prep_inputs`.
unsafe impl KernelParams for PrepParams {}

/// Whether the prep kernel lets the product for `kernel_batch` vectors launch as its blocks
/// start ([`PrepParams::early`]) rather than once they have written their values. Measured on
/// an H100 (docs/PERF.md "SpQR: tile sums for the zero terms"): early, 16 vectors took 1-3%
/// less time at all five benchmark shapes; at 4 and 8 vectors the product's blocks took SM
/// room beside the prep's and some grids of one wave came out uneven (8192x28672 at 4
/// vectors and 4096x14336 at 8, 1.2-1.3x slower), and signalling at the end saved nothing
/// and cost nothing.
pub const fn early_dependents(kernel_batch: u32) -> bool {
    kernel_batch == MAX_BATCH
}

impl PrepParams {
    /// Blocks of [`PREP_THREADS`] of the launch: the transpose's, then one thread per tile sum.
    pub const fn blocks(&self) -> u32 {
        self.transpose_blocks + (self.sum_tiles * sum_slots(self.slots)).div_ceil(PREP_THREADS)
    }
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod split_tests {
    use super::*;

    #[test]
    fn only_kernels_that_can_walk_by_column_are_asked_to() {
        for kb in [1, 2, 4, 8, 16] {
            for (rows, cols, w) in [(4096, 14336, 7), (8192, 8192, 4), (28672, 8192, 4)] {
                if walk_transposed(kb, w, rows, cols) {
                    assert!(reads_transposed(kb) && is_scaled_kernel(kb), "{kb}");
                }
            }
        }
        assert!(walk_transposed(16, 4, 8192, 8192));
        assert!(walk_transposed(8, 7, 4096, 14336));
        assert!(walk_transposed(8, 4, 28672, 8192));
        assert!(walk_transposed(8, 4, 8192, 8192));
        assert!(walk_transposed(4, 7, 28672, 8192));
        assert!(!walk_transposed(2, 4, 28672, 8192));
    }

    #[test]
    fn two_tile_rows_where_measured_faster_and_only_where_a_kernel_has_them() {
        let sms = 132;
        let pick = |kb, rows, cols| default_block_rows(kb, rows, cols, sms);
        // The benchmark shapes (docs/PERF.md).
        for (rows, cols, b4, b8, b16) in [
            (8192, 8192, 1, 1, 1),
            (11008, 4096, 2, 1, 2),
            (4096, 14336, 1, 1, 1),
            (28672, 8192, 2, 2, 2),
            (8192, 28672, 1, 2, 2),
        ] {
            assert_eq!(pick(4, rows, cols), b4, "{rows}x{cols} b4");
            assert_eq!(pick(8, rows, cols), b8, "{rows}x{cols} b8");
            assert_eq!(pick(16, rows, cols), b16, "{rows}x{cols} b16");
            for kb in [1, 2] {
                assert_eq!(pick(kb, rows, cols), 1, "{rows}x{cols} b{kb}");
            }
        }
        // An odd number of tile rows runs one per block, however large.
        assert_eq!(pick(16, 16 * 4097, 65536), 1);
        assert_eq!(pick(16, 16 * 4098, 65536), 2);
        for kb in [1, 2, 4, 8, 16] {
            for (rows, cols) in [(16, 16), (32, 1 << 24), (1 << 20, 4096), (48, 64)] {
                let r = default_block_rows(kb, rows, cols, sms);
                assert!(
                    block_rows_kernel(kb, r) && (rows / 16) % r == 0,
                    "{kb} {rows}x{cols}"
                );
            }
        }
        assert!(!block_rows_kernel(2, 2) && !block_rows_kernel(16, 3));
    }

    #[test]
    fn two_row_blocks_take_one_wave_of_seven_warps_or_four() {
        // 8192x28672: 256 pairs fit 2 blocks on each of 132 SMs; 11008x4096 and 28672x8192
        // do not.
        assert_eq!(block_rows_warps(512, 448, 132), 7);
        assert_eq!(block_rows_warps(688, 64, 132), 4);
        assert_eq!(block_rows_warps(1792, 128, 132), 4);
        // Never more warps than steps, never none.
        assert_eq!(block_rows_warps(4, 3, 132), 3);
        assert_eq!(block_rows_warps(4, 0, 132), 1);
        for w in [1, 4, 7] {
            assert!(32 * (w + outlier_warps(16)) <= BLOCK_THREADS);
        }
    }

    #[test]
    fn two_row_areas_and_rings_do_not_overlap() {
        for kb in [8u32, 16] {
            for warps in 1..=BLOCK_THREADS / 32 - outlier_warps(kb) {
                let rows = 2;
                let area = 4 * 16 * area_batch(kb);
                let slots = outlier_slots_rows(warps, kb, rows);
                // The outlier warps fill two slots each, per tile row.
                assert!(2 * outlier_warps(kb) <= slots);
                let red = rows * warps * area;
                let outl = rows * slots * area;
                assert_eq!(ring_offset_rows(warps, kb, rows), red + outl);
                assert_eq!(
                    smem_bytes_rows(warps, kb, rows),
                    red + outl + rows * warps * WARP_RING_BYTES
                );
                // One tile row: the layout of the one-row kernels.
                assert_eq!(smem_bytes_rows(warps, kb, 1), smem_bytes(warps, kb));
            }
        }
    }

    #[test]
    fn two_row_kernels_are_named_for_8_and_16_vectors() {
        for b in 1..=MAX_BATCH {
            for pt in [false, true] {
                assert_eq!(kernel_name_rows(b, pt, 1), kernel_name(b, pt));
                let two = kernel_name_rows(b, pt, 2);
                assert_eq!(two.is_some(), b > 2, "batch {b}");
                if let Some(n) = two {
                    let one = kernel_name(b, pt).unwrap();
                    assert_eq!(n, format!("{one}_r2"));
                }
                assert_eq!(kernel_name_rows(b, pt, 3), None);
            }
        }
        assert_eq!(kernel_name_rows(0, false, 2), None);
        assert_eq!(kernel_name_rows(17, false, 1), None);
    }

    #[test]
    fn transposed_inputs_are_a_bijection_with_aligned_columns() {
        for kb in [4u32, 8, 16] {
            let cols = 37;
            let mut seen = vec![false; (cols * kb) as usize];
            for c in 0..cols {
                // A column's inputs are contiguous and start where one 8-byte (4 vectors) or
                // 16-byte load (8, 16) of the outlier warps can read them.
                let base = transposed_index(c, 0, kb);
                assert_eq!((2 * base) % (2 * kb as usize).min(16), 0);
                for v in 0..kb {
                    let i = transposed_index(c, v, kb);
                    assert_eq!(i, base + v as usize);
                    assert!(!seen[i], "kb {kb}: ({c}, {v}) lands on a taken slot");
                    seen[i] = true;
                }
            }
            assert!(seen.iter().all(|&s| s));
        }
    }

    #[test]
    fn only_long_unsplit_one_vector_launches_are_programmatic() {
        // 132 SMs: 28672 rows (1792 tile rows) yes; 11008 (688) and split rows no; 2 vectors no.
        assert!(routed_programmatic(1, 1, 1792, 132));
        assert!(routed_programmatic(1, 1, 12 * 132, 132));
        assert!(!routed_programmatic(1, 1, 12 * 132 - 1, 132));
        assert!(!routed_programmatic(1, 1, 688, 132));
        assert!(!routed_programmatic(1, 4, 2048, 132));
        assert!(!routed_programmatic(2, 1, 1792, 132));
        assert!(routed_programmatic(1, 1, u32::MAX, u32::MAX / 12));
    }

    #[test]
    fn the_prep_lets_only_the_products_for_16_vectors_launch_early() {
        assert!(early_dependents(16));
        assert!(!early_dependents(4) && !early_dependents(8));
    }

    #[test]
    fn tile_sums_cover_every_step_tile_and_lane_row_once() {
        for kb in [4u32, 8, 16] {
            for padded_cols in [16u32, 48, 64, 3008, 4096, 14336] {
                let tiles = sum_tiles(padded_cols);
                // Whole steps of 4 tiles, covering the matrix's tiles.
                assert_eq!(tiles % 4, 0);
                assert!(tiles * 16 >= padded_cols && (tiles - 4) * 16 < padded_cols);
                let slots = sum_slots(kb);
                // Every lane row g (and g + 8 at 16 vectors) has a slot.
                assert_eq!(slots, if kb > 8 { 16 } else { 8 });
                let mut seen = vec![false; (tiles * slots) as usize];
                for tile in 0..tiles {
                    for v in 0..slots {
                        let i = tile_sum_index(tile, v, kb);
                        assert!(!seen[i], "kb {kb}: ({tile}, {v}) twice");
                        seen[i] = true;
                    }
                }
                assert!(seen.iter().all(|&s| s));
                // A step's 4 tiles are one contiguous run of words.
                assert_eq!(tile_sum_index(4, 0, kb), 4 * slots as usize);
                // The input pairs: every word of every tile and slot once; a step's words
                // are its own run of `pair_step_words`; each 16-byte load of the warp (one
                // group, one half) is 512 contiguous bytes in lane order, 16-byte aligned.
                let step_words = pair_step_words(kb);
                let mut seen = vec![false; tiles as usize * slots as usize * PAIR_WORDS];
                for tile in 0..tiles {
                    for v in 0..slots {
                        for w in 0..PAIR_WORDS as u32 {
                            let i = input_pair_index(tile, v, w, kb);
                            assert!(!seen[i], "kb {kb}: ({tile}, {v}, {w}) twice");
                            seen[i] = true;
                            assert_eq!(i / step_words, (tile / 4) as usize);
                        }
                    }
                }
                assert!(seen.iter().all(|&s| s));
                for step in 0..tiles / 4 {
                    for j in 0..slots / 8 {
                        for h in 0..2u32 {
                            let first = input_pair_index(4 * step, 8 * j, 4 * h, kb);
                            assert_eq!(first % 4, 0);
                            for lane in 0..32u32 {
                                let (g, t) = (lane / 4, lane % 4);
                                for q in 0..4 {
                                    assert_eq!(
                                        input_pair_index(4 * step + t, 8 * j + g, 4 * h + q, kb),
                                        first + 4 * lane as usize + q as usize
                                    );
                                }
                            }
                        }
                    }
                }
                // The prep launch has a thread for every column and every sum.
                for transpose in [false, true] {
                    let cols = padded_cols - 3;
                    let transpose_blocks = if transpose {
                        cols.div_ceil(PREP_THREADS)
                    } else {
                        0
                    };
                    let p = PrepParams {
                        x: DevPtr::null(),
                        xt: DevPtrMut::null(),
                        sx: DevPtrMut::null(),
                        xp: DevPtrMut::null(),
                        cols,
                        batch: 1,
                        slots: kb,
                        sum_tiles: tiles,
                        transpose_blocks,
                        aligned: 0,
                        early: 1,
                    };
                    let sum_threads = (p.blocks() - transpose_blocks) * PREP_THREADS;
                    assert!(sum_threads >= tiles * slots);
                    assert!(sum_threads < tiles * slots + PREP_THREADS);
                }
            }
        }
    }

    #[test]
    fn parts_cover_the_steps_once_in_order() {
        for nsteps in 1..100 {
            for splits in 1..=nsteps.min(MAX_SPLITS) {
                let mut next = 0;
                for p in 0..splits {
                    let (s0, s1) = part_steps(nsteps, splits, p);
                    assert_eq!(s0, next, "{nsteps} steps, {splits} splits, part {p}");
                    assert!(s1 > s0, "empty part {p} of {splits} over {nsteps} steps");
                    next = s1;
                }
                assert_eq!(next, nsteps);
            }
        }
    }

    #[test]
    fn blocks_add_an_outlier_warp_within_the_launch_bounds() {
        for (rows, cols) in [
            (16, 16),
            (16, 64),
            (16, 192),
            (4096, 4096),
            (8192, 8192),
            (16, 65536),
        ] {
            let base = block_threads(rows, cols);
            for kb in [1, 2, 4, 8, 16] {
                let ow = outlier_warps(kb);
                let (threads, weight) = launch_warps(rows, cols, kb);
                assert_eq!(threads, 32 * (weight + ow), "{rows}x{cols}");
                assert!(threads <= BLOCK_THREADS && weight >= 1);
                assert_eq!(weight, (base / 32).min(BLOCK_THREADS / 32 - ow));
                // The outlier warps' slots fit the area.
                assert!(2 * ow <= outlier_slots(weight, kb));
                assert_eq!(outlier_slots(weight, kb), 2 * weight.max(ow));
            }
        }
        // 256 tile rows: 8 warps, of which 7 multiply; 512: 4 weight warps and the outlier warp.
        assert_eq!(launch_warps(4096, 14336, 8), (256, 7));
        assert_eq!(launch_warps(8192, 8192, 1), (160, 4));
        // 16 vectors: one outlier warp too (OUTLIER_WARPS_16).
        assert_eq!(launch_warps(4096, 14336, 16), (256, 7));
        assert_eq!(launch_warps(8192, 8192, 16), (160, 4));
        assert_eq!(launch_warps(16, 64, 16), (64, 1));
        assert_eq!(outlier_slots(1, 16), 2);
    }

    #[test]
    fn splits_keep_to_half_the_warps_and_the_limits() {
        let sms = 132;
        // The benchmark shapes are not split: 256 tile rows of 8 warps fill 2048 of the
        // 2112 warps, 512 and more tile rows of 4 warps more.
        assert_eq!(choose_splits(256, 224, 8, sms), 1);
        assert_eq!(choose_splits(512, 448, 4, sms), 1);
        assert_eq!(choose_splits(1792, 128, 4, sms), 1);
        // 64 tile rows (1024 rows) of 8 warps and 224 steps: 4 parts would fit the warps,
        // the steps allow 1 (128 per part at least).
        assert_eq!(choose_splits(64, 224, 8, sms), 1);
        assert_eq!(choose_splits(64, 1024, 8, sms), 4);
        // Few tile rows and many steps: as many parts as MAX_SPLITS.
        assert_eq!(choose_splits(3, 4096, 8, sms), MAX_SPLITS);
        for (bands, nsteps) in [
            (1, 1),
            (7, 3000),
            (300, 64),
            (2000, 500),
            (1, 10_000),
            (0, 5),
        ] {
            for warps in [1, 4, 8] {
                let s = choose_splits(bands, nsteps, warps, sms);
                assert!((1..=MAX_SPLITS).contains(&s));
                assert!(
                    s == 1 || nsteps / s >= warps * MIN_PART_STEPS_PER_WARP,
                    "{bands} {nsteps} {warps}: {s}"
                );
                assert!(
                    s == 1 || bands * s * warps <= SPLIT_WARPS_PER_SM * sms,
                    "{bands} {nsteps} {warps}: {s}"
                );
            }
        }
        assert_eq!(choose_splits(10, 100, 4, 0), 1);
    }
}

/// PTX name of the kernel for `batch` vectors, the outlier format and `rows` tile rows per
/// block ([`block_rows_kernel`]).
pub fn kernel_name_rows(batch: u32, ptcsr: bool, rows: u32) -> Option<&'static str> {
    let kb = kernel_batch(batch)?;
    if rows == 1 {
        return kernel_name(batch, ptcsr);
    }
    if !block_rows_kernel(kb, rows) {
        return None;
    }
    Some(match (kb, ptcsr) {
        (4, false) => "cmv_spqr_csr_b4_r2",
        (4, true) => "cmv_spqr_ptcsr_b4_r2",
        (8, false) => "cmv_spqr_csr_b8_r2",
        (8, true) => "cmv_spqr_ptcsr_b8_r2",
        (_, false) => "cmv_spqr_csr_b16_r2",
        (_, true) => "cmv_spqr_ptcsr_b16_r2",
    })
}

/// PTX name of the kernel for `batch` vectors and the outlier format.
pub fn kernel_name(batch: u32, ptcsr: bool) -> Option<&'static str> {
    Some(match (kernel_batch(batch)?, ptcsr) {
        (1, false) => "cmv_spqr_csr_b1",
        (2, false) => "cmv_spqr_csr_b2",
        (4, false) => "cmv_spqr_csr_b4",
        (8, false) => "cmv_spqr_csr_b8",
        (16, false) => "cmv_spqr_csr_b16",
        (1, true) => "cmv_spqr_ptcsr_b1",
        (2, true) => "cmv_spqr_ptcsr_b2",
        (4, true) => "cmv_spqr_ptcsr_b4",
        (8, true) => "cmv_spqr_ptcsr_b8",
        _ => "cmv_spqr_ptcsr_b16",
    })
}
