//! The tensor-core GEMV for 2 to 16 input vectors: launch geometry, work plan and parameters,
//! shared by the kernels (`cmv_gemv_f16_tc_*`, `cmv_gemv_i8_tc_*`) and the host launcher.
//!
//! # The kernels
//! A k-block is 4 lanes x 16 bytes of every row: 32 fp16 or 64 int8 columns. Lane `(g, t) =
//! (lane / 4, lane % 4)` loads the 16 bytes at chunk `4 kb + t` of its weight rows and of its
//! input vectors; the first `mma` of the k-block takes words 0-1 of every chunk, the second
//! words 2-3. Weights and inputs use the same permutation of `k`, so the sums are unchanged
//! and every load is 16 bytes wide. fp16: `mma.m16n8k16` with fp32 accumulation; int8:
//! `mma.m16n8k32.s8` with exact int32 accumulation, requantized as the CUDA-core kernels do
//! ([`crate::requantize`]).
//!
//! A row tile is 16 rows, the `mma`'s M (lane rows `g`, `g + 8`; each group of 8 vectors is an
//! N), or, with the weights as the B operand ([`TcKernel::wb`]), 8 rows, the `mma`'s N (lane
//! row `g`; vectors `g` and `g + 8` are the M, so one `mma` pair serves 16 vectors).
//!
//! A block has [`TC_WARPS`] warps. In the *column-slice* kernels (the defaults for large
//! matrices, [`tc_sliced`]) `slices` warps share each row tile and sum every `slices`-th group
//! of `unroll` k-blocks, then add their sums through shared memory in slice order; a block owns
//! 8 to 32 rows. So the blocks running at once read few distinct rows (a few thousand), each
//! over a window of `slices * unroll` k-blocks. The first kernels gave each warp its own 16
//! rows and the whole k range (128 rows per block, ~6000 rows read at once on an H100); they
//! stayed about 10% below the batch-1 kernel's bandwidth at every batch, whatever the loads in
//! flight (registers, prefetch, a `cp.async` ring), the grid (stream-K) or the batch, and the
//! batch-1 kernel lost the same when its blocks read many rows at once (docs/PERF.md). They
//! remain the defaults for small matrices, where their split-K fills the GPU.
//!
//! # Split-K
//! When the rows alone give too few blocks, the k-blocks are split over `gridDim.y` blocks
//! ([`tc_plan`]); block `(x, y)` is number `y * gridDim.x + x` in launch order and sums split
//! `id % ksplit` of row block `id / ksplit`, so the splits of a row block run side by side.
//! Each block stores its threads' partial `mma` fragments side by side in a workspace (plain,
//! coalesced 16-byte stores; no atomics on the sums), then counts itself into its row block's
//! counter; the block that counts last adds the partials of every split in split order and
//! stores the outputs, and sets the counter back to zero. So one launch does the whole
//! product, the counters are zero before and after every launch, and the result is the same on
//! every run (the fp32 additions always happen in the same order; int32 additions are exact).

use cmv_device::{DevPtr, DevPtrMut, KernelParams, U32x4};

/// Warps per block of the tensor-core kernels.
pub const TC_WARPS: u32 = 8;
/// Threads per block of the tensor-core kernels.
pub const TC_THREADS: u32 = TC_WARPS * cmv_device::WARP_SIZE;
/// 16-byte chunks per row in one k-block (one per lane of a quad).
pub const TC_KBLOCK_CHUNKS: u32 = 4;
/// Workspace words (32-bit partial sums) the host allocates for split-K launches (16 MiB): a
/// split launch needs `ksplit * row_blocks * TC_THREADS * 4 * tc_frags(k)` of them.
pub const TC_WORKSPACE_WORDS: usize = 1 << 22;
/// Counters the host allocates, zeroed: one per row block of a split launch (so a split launch
/// has at most this many row blocks; taller matrices run unsplit, their rows give enough
/// blocks).
pub const TC_COUNTERS: usize = 4096;

/// Workspace words one split of a launch with `row_blocks` row blocks of kernel `k` needs.
pub const fn tc_split_words(k: TcKernel, row_blocks: u32) -> usize {
    row_blocks as usize * TC_THREADS as usize * 4 * tc_frags(k) as usize
}

/// Accumulator fragments (4 words each) a thread of kernel `k` holds: one per row tile and
/// group of 8 vectors, or one per row tile when the weights are the B operand (one `mma`
/// covers 16 vectors).
pub const fn tc_frags(k: TcKernel) -> u32 {
    if k.wb { k.mt } else { k.mt * (k.batch / 8) }
}

/// Rows of one row tile of kernel `k`: 16 (the `mma`'s M), or 8 with the weights as the B
/// operand (its N).
pub const fn tc_tile_rows(k: TcKernel) -> u32 {
    if k.wb { 8 } else { 16 }
}

/// Rows a block of kernel `k` owns: `mt` tiles per warp, `slices` warps per tile group.
pub const fn tc_rows_per_block(k: TcKernel) -> u32 {
    tc_tile_rows(k) * k.mt * (TC_WARPS / k.slices)
}

/// k-blocks of a row of `chunks` 16-byte chunks (the last may be partial).
pub const fn tc_kblocks(chunks: u32) -> u32 {
    chunks.div_ceil(TC_KBLOCK_CHUNKS)
}

/// How one launch divides the work: `row_blocks x ksplit` blocks, each summing
/// `kblocks_per_split` k-blocks (the last split fewer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcPlan {
    /// Blocks along the rows (`gridDim.x`).
    pub row_blocks: u32,
    /// Blocks along the k-blocks (`gridDim.y`); 1 means no workspace is used.
    pub ksplit: u32,
    /// k-blocks each split sums.
    pub kblocks_per_split: u32,
    /// Stream-K kernels only: the blocks of the grid (`gridDim.x`), each summing an equal
    /// contiguous range of the `row_blocks * k-blocks` units ([`tc_stream_plan`]); 0 for the
    /// others.
    pub stream_blocks: u32,
}

/// The work plan for `rows` rows of `chunks` 16-byte chunks with kernel `k`: the k-blocks are
/// split until the grid has about `target_blocks` blocks, keeping at least `min_kblocks`
/// k-blocks per split, within [`TC_COUNTERS`] row blocks and [`TC_WORKSPACE_WORDS`]; a
/// shared-input kernel's splits are at most [`TC_XS_MAX_KBLOCKS`] long (which may need more
/// workspace than there is: check the plan). Every split is non-empty (`ksplit` is recomputed
/// from the rounded-up share).
pub const fn tc_plan(
    rows: u32,
    chunks: u32,
    k: TcKernel,
    target_blocks: u32,
    min_kblocks: u32,
) -> TcPlan {
    let row_blocks = rows.div_ceil(tc_rows_per_block(k));
    let kblocks = tc_kblocks(chunks);
    let split_words = tc_split_words(k, row_blocks);
    let mut ksplit = if row_blocks == 0 || row_blocks as usize > TC_COUNTERS {
        1
    } else {
        target_blocks.div_ceil(row_blocks)
    };
    let min = if min_kblocks == 0 { 1 } else { min_kblocks };
    let most = if kblocks / min == 0 { 1 } else { kblocks / min };
    if ksplit > most {
        ksplit = most;
    }
    if split_words > 0 && ksplit as usize * split_words > TC_WORKSPACE_WORDS {
        ksplit = (TC_WORKSPACE_WORDS / split_words) as u32;
    }
    if ksplit == 0 {
        ksplit = 1;
    }
    // A shared-input kernel's splits hold at most TC_XS_MAX_KBLOCKS k-blocks, whatever the
    // workspace allows (the host checks the result and falls back to another kernel).
    if k.xs && kblocks.div_ceil(ksplit) > TC_XS_MAX_KBLOCKS {
        ksplit = kblocks.div_ceil(TC_XS_MAX_KBLOCKS);
    }
    let per = if kblocks == 0 {
        1
    } else {
        kblocks.div_ceil(ksplit)
    };
    let ksplit = if kblocks == 0 {
        1
    } else {
        kblocks.div_ceil(per)
    };
    TcPlan {
        row_blocks,
        ksplit,
        kblocks_per_split: per,
        stream_blocks: 0,
    }
}

/// The plan of a stream-K kernel (`k.stream`) for `rows` rows of `chunks` chunks on a grid of
/// `blocks` blocks (at most one per unit): block `b` sums units `b U / P .. (b + 1) U / P` of
/// the `U = row_blocks * k-blocks` units, so every block gets the same work whatever the shape
/// (no partial last wave). Check it: the row blocks must fit [`TC_COUNTERS`] and the partial
/// slots [`TC_WORKSPACE_WORDS`] ([`tc_stream_words`]).
pub const fn tc_stream_plan(rows: u32, chunks: u32, k: TcKernel, blocks: u32) -> TcPlan {
    let row_blocks = rows.div_ceil(tc_rows_per_block(k));
    let kblocks = tc_kblocks(chunks);
    let units = row_blocks as u64 * kblocks as u64;
    let blocks = if (blocks as u64) > units {
        units as u32
    } else {
        blocks
    };
    TcPlan {
        row_blocks,
        ksplit: 1,
        kblocks_per_split: kblocks,
        stream_blocks: if blocks == 0 { 1 } else { blocks },
    }
}

/// The stream-K schedule of [`tc_stream_plan`], shared by the kernels and the host tests:
/// the `units = row_blocks * kbs` units (row block, k-block) cut into `blocks` equal
/// contiguous ranges, one per block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamK {
    /// k-blocks per row block.
    pub kbs: u64,
    /// Units in all (`row_blocks * kbs`).
    pub units: u64,
    /// Blocks of the grid (`1..=units`).
    pub blocks: u64,
}

impl StreamK {
    /// First unit of block `b` (`start(blocks)` is the end).
    #[inline(always)]
    pub fn start(&self, b: u64) -> u64 {
        b * self.units / self.blocks
    }

    /// The block whose range holds unit `u` (`u < units`).
    #[inline(always)]
    pub fn owner(&self, u: u64) -> u64 {
        let mut o = u * self.blocks / self.units;
        while o + 1 < self.blocks && self.start(o + 1) <= u {
            o += 1;
        }
        while o > 0 && self.start(o) > u {
            o -= 1;
        }
        o
    }

    /// Which of block `b`'s two partial slots holds its part of row block `r`: 0 when `r` is
    /// the row block its range starts in, else 1 (a range holds at most two partial row
    /// blocks: its first and its last).
    #[inline(always)]
    pub fn side(&self, b: u64, r: u64) -> usize {
        usize::from(self.start(b) / self.kbs != r)
    }
}

/// Workspace words a stream-K launch of kernel `k` on `blocks` blocks needs: two partial
/// fragments per block (its first and its last row block may be shared with other blocks).
pub const fn tc_stream_words(k: TcKernel, blocks: u32) -> usize {
    2 * blocks as usize * TC_THREADS as usize * 4 * tc_frags(k) as usize
}

/// Parameters of the fp16 tensor-core kernels (`cmv_gemv_f16_tc_*`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemvTcF16Params {
    /// `W`, `rows * cols` fp16 values, read as 16-byte chunks (16-byte aligned).
    pub w: DevPtr<U32x4>,
    /// `X`, `batch * cols` fp16 values, read as 16-byte chunks (16-byte aligned).
    pub x: DevPtr<U32x4>,
    /// `Y`, `batch * rows` fp16 values (as bits).
    pub y: DevPtrMut<u16>,
    /// Split-K workspace of [`TC_WORKSPACE_WORDS`] words (partial fp32 sums; unused when
    /// `gridDim.y == 1`).
    pub acc: DevPtrMut<u32>,
    /// One counter per row block, zero before and after a launch (unused unsplit).
    pub counters: DevPtrMut<u32>,
    /// Rows of `W`.
    pub rows: u32,
    /// Columns of `W`, a multiple of 8.
    pub cols: u32,
    /// Input vectors, `1..=` the kernel's `8 * NT`.
    pub batch: u32,
    /// k-blocks each split sums ([`TcPlan::kblocks_per_split`]).
    pub kblocks_per_split: u32,
}
const _: () = assert!(core::mem::size_of::<GemvTcF16Params>() == 56);
// SAFETY: repr(C), no padding (size asserted), plain data and device pointers only; the one
// parameter of the kernels named above.
unsafe impl KernelParams for GemvTcF16Params {}

/// Parameters of the int8 tensor-core kernels (`cmv_gemv_i8_tc_*`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemvTcI8Params {
    /// `W`, `rows * cols` int8 values, read as 16-byte chunks (16-byte aligned).
    pub w: DevPtr<U32x4>,
    /// `X`, `batch * cols` int8 values, read as 16-byte chunks (16-byte aligned).
    pub x: DevPtr<U32x4>,
    /// The int32 accumulators, `batch * rows`.
    pub y32: DevPtrMut<i32>,
    /// Their int8 requantization ([`crate::requantize`]), `batch * rows`.
    pub y8: DevPtrMut<i8>,
    /// Split-K workspace of [`TC_WORKSPACE_WORDS`] words (partial int32 sums).
    pub acc: DevPtrMut<u32>,
    /// One counter per row block, zero before and after a launch.
    pub counters: DevPtrMut<u32>,
    /// Requantization scale (finite).
    pub scale: f32,
    /// Rows of `W`.
    pub rows: u32,
    /// Columns of `W`, a multiple of 16.
    pub cols: u32,
    /// Input vectors, `1..=` the kernel's `8 * NT`.
    pub batch: u32,
    /// k-blocks each split sums.
    pub kblocks_per_split: u32,
    /// Zero; makes the struct's tail explicit, so it has no padding bytes.
    pub pad: u32,
}
const _: () = assert!(core::mem::size_of::<GemvTcI8Params>() == 72);
// SAFETY: repr(C), no padding (size asserted), plain data and device pointers only; the one
// parameter of the kernels named above.
unsafe impl KernelParams for GemvTcI8Params {}

/// A tensor-core kernel: its PTX name and compile-time shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcKernel {
    /// PTX entry point.
    pub name: &'static str,
    /// Input vectors it takes at most (`8 * NT`).
    pub batch: u32,
    /// Row tiles of 16 per warp.
    pub mt: u32,
    /// k-blocks each warp loads before using any.
    pub unroll: u32,
    /// Whether the next `unroll` k-blocks are loaded while the current ones are multiplied.
    pub prefetch: bool,
    /// Whether the block first copies its k-range of the inputs to shared memory (so the
    /// inputs take no registers while the weights are in flight); such a kernel sums at most
    /// [`TC_XS_MAX_KBLOCKS`] k-blocks per split and needs [`tc_x_smem_bytes`] of dynamic shared
    /// memory.
    pub xs: bool,
    /// Whether it runs the stream-K schedule ([`tc_stream_plan`]; one row tile per warp, no
    /// prefetch, inputs through L1).
    pub stream: bool,
    /// Stages of the warp's `cp.async` weight ring in shared memory (0: the weights are loaded
    /// straight into registers). With `R` stages a warp keeps `R` groups of `unroll` k-blocks
    /// in flight while it multiplies, in [`tc_ring_bytes`] of dynamic shared memory instead of
    /// registers; see [`tc_ring_offset`].
    pub stages: u32,
    /// Warps that share one group of row tiles, each summing every `slices`-th group of
    /// `unroll` k-blocks of the block's range (1: each warp owns its tiles and the whole
    /// range). With more slices a block owns fewer rows (`16 * mt * TC_WARPS / slices`), so the
    /// blocks running at once read fewer distinct rows, each over a wider window; the slices'
    /// sums are added through [`tc_slice_smem_bytes`] of shared memory in slice order.
    pub slices: u32,
    /// Whether the weights are the `mma`'s B operand (`b`): tiles of 8 rows, the vectors as
    /// its 16 rows (one `mma` pair per k-block for up to 16 vectors), so a block owns half the
    /// rows; otherwise tiles of 16 rows and one `mma` pair per group of 8 vectors.
    pub wb: bool,
    /// With slices: whether each warp sums one contiguous share of the block's groups of
    /// `unroll` k-blocks (`w`) instead of every `slices`-th group.
    pub cs: bool,
}

/// Dynamic shared memory of the cross-slice sums of kernel `k` (zero with one slice): every
/// thread's fragments, 16 bytes per tile and group of 8 vectors.
pub const fn tc_slice_smem_bytes(k: TcKernel) -> u32 {
    if k.slices > 1 {
        TC_THREADS * 16 * tc_frags(k)
    } else {
        0
    }
}

/// Bytes one stage of a warp's weight ring holds: `unroll` k-blocks of its `mt` row tiles,
/// each 32 lanes x 2 rows x 16 bytes.
pub const fn tc_ring_stage_bytes(k: TcKernel) -> u32 {
    k.unroll * k.mt * 2 * 512
}

/// Dynamic shared memory of the weight rings of a block of kernel `k` (zero without one).
pub const fn tc_ring_bytes(k: TcKernel) -> u32 {
    TC_WARPS * k.stages * tc_ring_stage_bytes(k)
}

/// Where, in its warp's ring, lane `lane` copies (and later reads back) its 16 bytes of
/// k-block `u` of a stage `s`, row tile `m`, row half `h` (rows `g` / `g + 8`). Each lane reads
/// only what it copied itself, so the ring needs no barrier, only `cp.async.wait_group`; the
/// 32 lanes of one copy or read are 512 contiguous bytes (no bank conflicts).
pub const fn tc_ring_offset(k: TcKernel, s: u32, u: u32, m: u32, h: u32, lane: u32) -> u32 {
    (((s * k.unroll + u) * k.mt + m) * 2 + h) * 512 + 16 * lane
}

/// All the dynamic shared memory a launch of kernel `k` with `per` k-blocks per split and
/// `batch` vectors needs, in this order: the inputs' copy ([`tc_x_smem_bytes`]) or the weight
/// rings ([`tc_ring_bytes`]), then the slices' sums ([`tc_slice_smem_bytes`]).
pub const fn tc_smem_bytes(k: TcKernel, per: u32, batch: u32) -> u32 {
    tc_x_smem_bytes(k, per, batch) + tc_ring_bytes(k) + tc_slice_smem_bytes(k)
}

/// Most k-blocks a split of a shared-input (`xs`) kernel may sum (its copy of 16 vectors then
/// takes 66.5 KiB of shared memory).
pub const TC_XS_MAX_KBLOCKS: u32 = 64;

/// Chunks between the vectors' copies in shared memory for splits of `per` k-blocks: the span
/// `4 per`, plus 4 when that is a multiple of 8, so that the 8 lanes of each quarter warp
/// (vectors `g`, `g + 1`, chunks `4 kb + t`) hit 8 different 16-byte bank groups.
pub const fn tc_x_stride(per: u32) -> u32 {
    let span = per * TC_KBLOCK_CHUNKS;
    if span.is_multiple_of(8) {
        span + 4
    } else {
        span
    }
}

/// Dynamic shared memory a launch of kernel `k` with `per` k-blocks per split and `batch`
/// vectors needs (zero unless `k.xs`).
pub const fn tc_x_smem_bytes(k: TcKernel, per: u32, batch: u32) -> u32 {
    if k.xs {
        16 * batch * tc_x_stride(per)
    } else {
        0
    }
}

/// Both kernel tables from one list (the entry points of `tc_kernels.rs` follow it): name
/// suffix, vectors, row tiles, k-blocks in flight, prefetch, shared inputs, stream-K, ring
/// stages, slices, weights as the B operand, contiguous slices.
macro_rules! tc_table {
    ($prefix:literal) => {
        tc_table!(@ $prefix;
            "n8u4", 8, 1, 4, false, false, false, 0, 1, false, false;
            "n16u4", 16, 1, 4, false, false, false, 0, 1, false, false;
            "n8u4c8", 8, 1, 4, false, false, false, 0, 8, false, false;
            "n8u4c8b", 8, 1, 4, false, false, false, 0, 8, true, false;
            "n16u4c8", 16, 1, 4, false, false, false, 0, 8, false, false;
            "n16u4c4b", 16, 1, 4, false, false, false, 0, 4, true, false;
            "n8u4c8w", 8, 1, 4, false, false, false, 0, 8, false, true;
            "n16u4c8w", 16, 1, 4, false, false, false, 0, 8, false, true;
            "x_n8m1u8", 8, 1, 8, false, false, false, 0, 1, false, false;
            "x_n16m1u8", 16, 1, 8, false, false, false, 0, 1, false, false;
            "x_n8m1u4p", 8, 1, 4, true, false, false, 0, 1, false, false;
            "x_n16m1u4p", 16, 1, 4, true, false, false, 0, 1, false, false;
            "x_n16m1u4ps", 16, 1, 4, true, true, false, 0, 1, false, false;
            "x_n8m1u4r3", 8, 1, 4, false, false, false, 3, 1, false, false;
            "x_n16m1u4r3", 16, 1, 4, false, false, false, 3, 1, false, false;
            "x_n8m1u2c8", 8, 1, 2, false, false, false, 0, 8, false, false;
            "x_n16m1u2c8", 16, 1, 2, false, false, false, 0, 8, false, false;
            "x_n16m2u2c8", 16, 2, 2, false, false, false, 0, 8, false, false;
            "x_n8m1u8c8b", 8, 1, 8, false, false, false, 0, 8, true, false;
            "x_n16m1u4c8b", 16, 1, 4, false, false, false, 0, 8, true, false;
            "x_n16m2u4c8b", 16, 2, 4, false, false, false, 0, 8, true, false;
            "x_n8m1u2r3c8", 8, 1, 2, false, false, false, 3, 8, false, false;
            "sk_n8u4", 8, 1, 4, false, false, true, 0, 1, false, false;
            "sk_n16u4", 16, 1, 4, false, false, true, 0, 1, false, false;
        )
    };
    (@ $prefix:literal; $($suffix:literal, $batch:literal, $mt:literal, $unroll:literal,
        $prefetch:literal, $xs:literal, $stream:literal, $stages:literal, $slices:literal,
        $wb:literal, $cs:literal;)*) => {
        [$(TcKernel {
            name: concat!($prefix, $suffix),
            batch: $batch,
            mt: $mt,
            unroll: $unroll,
            prefetch: $prefetch,
            xs: $xs,
            stream: $stream,
            stages: $stages,
            slices: $slices,
            wb: $wb,
            cs: $cs,
        },)*]
    };
}

/// The fp16 tensor-core kernels. The first eight are the defaults ([`TC_DEFAULTS`], chosen by
/// [`tc_choice`]): up to 8 or up to 16 vectors, 128 rows per block for small matrices (split),
/// 16 or 8 rows per block in 8 column slices (4 for the last) for the others; then the
/// variants `cmv-bench
/// --explore-tc` also times (`m` row tiles, `u` k-blocks in flight, `p` prefetch of the next
/// k-blocks, `s` inputs staged in shared memory, `r` a `cp.async` weight ring of that many
/// stages, `c` that many warps (column slices) per row tile, `b` the weights as the B operand
/// (8-row tiles), `w` contiguous slices, `sk` the stream-K schedule).
pub const TC_F16_KERNELS: [TcKernel; TC_KERNELS] = tc_table!("cmv_gemv_f16_tc_");

/// The int8 tensor-core kernels, as [`TC_F16_KERNELS`].
pub const TC_I8_KERNELS: [TcKernel; TC_KERNELS] = tc_table!("cmv_gemv_i8_tc_");

/// Tensor-core kernels per element type.
pub const TC_KERNELS: usize = 24;

/// How many of the table's first kernels the default path uses.
pub const TC_DEFAULTS: usize = 8;

/// Whether a matrix of `rows` rows of `chunks` 16-byte chunks takes the column-slice kernels
/// (16 or 8 rows per block, unsplit) on `sm_count` SMs: when it has about two 16-row blocks
/// per SM (4092 rows on 132 SMs; measured from 4096 rows on), or rows too short for the
/// 128-row kernels to split (fewer than 16 k-blocks: measured at MiniLM's 384x384 and 1536x384,
/// where the slices were also faster; docs/PERF.md). The others (few, long rows) take the
/// 128-row split kernels.
pub const fn tc_sliced(rows: u32, chunks: u32, sm_count: u32) -> bool {
    tc_many_rows(rows, sm_count) || tc_kblocks(chunks) < 16
}

/// Whether `rows` give about two 16-row blocks per SM on `sm_count` SMs (at least 31 rows per
/// SM: 4092 on 132 SMs).
pub const fn tc_many_rows(rows: u32, sm_count: u32) -> bool {
    let sms = if sm_count == 0 { 1 } else { sm_count };
    rows as u64 >= 31 * sms as u64
}

/// The default kernel (its index in [`TC_F16_KERNELS`] / [`TC_I8_KERNELS`]) and plan for
/// `batch` (2..=16) vectors and a `rows x cols` matrix of `chunks` 16-byte chunks per row on
/// `sm_count` SMs.
///
/// Measured on an H100 with `cmv-bench --explore-tc` (docs/PERF.md, fp16 and int8 alike):
/// - large matrices and short rows ([`tc_sliced`]): 8 warps share each row tile, each summing every 8th
///   group of 4 k-blocks, so the blocks running at once read few rows, each over a 2 KiB
///   window (the 128-row blocks of the earlier kernels read ~6000 rows at once and stayed
///   10% below the batch-1 kernel's bandwidth); unsplit. Up to 4 vectors: 16-row tiles, or
///   8-row tiles with the weights as the `mma`'s B operand on tall matrices (`rows >= 2
///   cols`, at least 31 rows per SM). 5 to 16 vectors on many rows ([`tc_many_rows`]): 16-row
///   tiles in 8 *contiguous* slices (`n8u4c8w`, `n16u4c8w`: each warp sums one eighth of the
///   row; 2-14% faster than the interleaved slices on an H200, -1% to +9% on an H100, docs/PERF.md);
///   on short rows: 16-row tiles, or 8-row tiles in 4 slices on square and wide ones
///   (16 vectors).
/// - the others (few, long rows): 128-row blocks, the k-blocks split until the grid holds
///   about 2 blocks per SM (8 vectors) or 1 (16 vectors).
pub const fn tc_choice(
    batch: u32,
    rows: u32,
    cols: u32,
    chunks: u32,
    sm_count: u32,
) -> (usize, TcPlan) {
    let wide = batch > 8;
    let row_blocks = rows.div_ceil(tc_rows_per_block(TC_F16_KERNELS[0]));
    let sms = if sm_count == 0 { 1 } else { sm_count };
    if tc_sliced(rows, chunks, sm_count) {
        // Tall: at least twice as many rows as columns, and many rows (at 1536x384 the
        // 16-row tiles were faster).
        let tall = rows as u64 >= 2 * cols as u64 && tc_many_rows(rows, sms);
        let contiguous = batch > 4 && tc_many_rows(rows, sms);
        let i = match (wide, contiguous, tall, cols >= rows) {
            (false, true, _, _) => 6,
            (true, true, _, _) => 7,
            (false, false, true, _) => 3,
            (false, false, false, _) => 2,
            (true, false, _, true) => 5,
            (true, false, _, false) => 4,
        };
        (i, tc_plan(rows, chunks, TC_F16_KERNELS[i], 1, 1))
    } else {
        let i = if wide { 1 } else { 0 };
        let per_sm = if wide { 1 } else { 2 };
        let splits = (per_sm * sms + row_blocks / 2) / row_blocks;
        let splits = if splits == 0 { 1 } else { splits };
        (
            i,
            tc_plan(rows, chunks, TC_F16_KERNELS[i], splits * row_blocks, 8),
        )
    }
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;

    #[test]
    fn plans_fill_the_grid_and_cover_every_kblock() {
        for rows in [
            1, 100, 128, 4096, 8192, 11008, 28672, 65536, 524_288, 600_000,
        ] {
            for chunks in [1, 3, 4, 5, 512, 1376, 1792, 3584] {
                for k in TC_F16_KERNELS.iter().chain(&TC_I8_KERNELS) {
                    for target in [1, 264, 528, 1 << 20] {
                        let p = tc_plan(rows, chunks, *k, target, 8);
                        let kb = tc_kblocks(chunks);
                        assert!(p.ksplit >= 1 && p.kblocks_per_split >= 1, "{p:?}");
                        // Every k-block in exactly one split, no empty split.
                        assert!(
                            p.ksplit * p.kblocks_per_split >= kb,
                            "{rows} {chunks} {p:?}"
                        );
                        assert!((p.ksplit - 1) * p.kblocks_per_split < kb, "{p:?}");
                        assert_eq!(
                            p.row_blocks,
                            rows.div_ceil(tc_tile_rows(*k) * k.mt * TC_WARPS / k.slices)
                        );
                        if k.xs {
                            assert!(p.kblocks_per_split <= TC_XS_MAX_KBLOCKS);
                        }
                        let forced = k.xs && kb > TC_XS_MAX_KBLOCKS;
                        if p.ksplit > 1 && !forced {
                            assert!(p.row_blocks as usize <= TC_COUNTERS);
                            let words = p.ksplit as usize * tc_split_words(*k, p.row_blocks);
                            assert!(words <= TC_WORKSPACE_WORDS, "{rows} {k:?} {p:?}");
                            assert!(p.kblocks_per_split >= 8 || kb < 16);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn plans_split_small_matrices_only() {
        let k = TC_F16_KERNELS[1];
        // 4096 rows: 32 row blocks; 528 wanted -> 17 splits wanted, 128 k-blocks / 8 = 16 most.
        let p = tc_plan(4096, 512, k, 528, 8);
        assert_eq!((p.row_blocks, p.ksplit, p.kblocks_per_split), (32, 16, 8));
        // 28672 rows: 224 row blocks, 3 splits.
        let p = tc_plan(28672, 1024, k, 528, 8);
        assert_eq!((p.row_blocks, p.ksplit), (224, 3));
        assert_eq!(p.kblocks_per_split, 86);
        // Past the counters: never split.
        assert_eq!(tc_plan(600_000, 4096, k, 1 << 20, 8).ksplit, 1);
        // The workspace bounds the splits: 1024 row blocks x 256 threads x 8 words per split
        // -> 2 splits.
        assert_eq!(tc_plan(131_072, 4096, k, 1 << 20, 8).ksplit, 2);
        // Too few k-blocks to split.
        assert_eq!(tc_plan(16, 7, k, 528, 8).ksplit, 1);
    }

    #[test]
    fn kernel_tables_are_consistent() {
        for t in TC_F16_KERNELS.iter().chain(&TC_I8_KERNELS) {
            assert!(t.batch == 8 || t.batch == 16);
            assert!(t.mt >= 1 && t.unroll >= 1);
            let tag = format!("n{}", t.batch);
            assert!(t.name.contains(&tag), "{}", t.name);
            let ring = if t.stages > 0 {
                format!("r{}", t.stages)
            } else {
                String::new()
            };
            let slices = if t.slices > 1 {
                format!("c{}", t.slices)
            } else {
                String::new()
            };
            let shape = format!(
                "m{}u{}{}{}{ring}{slices}{}{}",
                t.mt,
                t.unroll,
                if t.prefetch { "p" } else { "" },
                if t.xs { "s" } else { "" },
                if t.wb { "b" } else { "" },
                if t.cs { "w" } else { "" }
            );
            let bounded = format!("{shape}2");
            assert!(
                t.name.ends_with(&shape) || t.name.ends_with(&bounded) || !t.name.contains("_x_"),
                "{}",
                t.name
            );
            assert_eq!(t.stream, t.name.contains("_sk_"), "{}", t.name);
            if t.stream {
                assert!(t.mt == 1 && !t.prefetch && !t.xs, "{}", t.name);
            }
            if t.stages > 0 {
                // A ring replaces the register loads: no prefetch, no shared inputs (both
                // would share its shared memory), and a block fits on an SM.
                assert!(
                    t.stages >= 2 && !t.prefetch && !t.xs && !t.stream,
                    "{}",
                    t.name
                );
                assert!(tc_smem_bytes(*t, 1, t.batch) <= 227 * 1024, "{}", t.name);
            }
            // Slices: a power of two dividing the warps, register loads only (the shared
            // memory holds the cross-slice sums).
            assert!(
                t.slices.is_power_of_two() && TC_WARPS.is_multiple_of(t.slices),
                "{}",
                t.name
            );
            // Slices: no prefetch, shared inputs or stream-K (a ring is fine: its shared
            // memory comes first). Weights as B: register loads only.
            if t.slices > 1 {
                assert!(!t.prefetch && !t.xs && !t.stream, "{}", t.name);
            }
            // Contiguous slices: only with slices and register loads.
            if t.cs {
                assert!(t.slices > 1 && t.stages == 0, "{}", t.name);
            }
            if t.wb {
                assert!(
                    !t.prefetch && !t.xs && !t.stream && t.stages == 0,
                    "{}",
                    t.name
                );
            }
        }
        for (i, (f, q)) in TC_F16_KERNELS.iter().zip(&TC_I8_KERNELS).enumerate() {
            // The two tables list the same shapes in the same order.
            assert_eq!(f.name.replace("f16", "i8"), q.name);
            let shape = |k: &TcKernel| {
                (
                    (k.batch, k.mt, k.unroll, k.prefetch, k.xs),
                    (k.stream, k.stages, k.slices, k.wb, k.cs),
                )
            };
            assert_eq!(shape(f), shape(q));
            if i < TC_DEFAULTS {
                assert!(!f.name.contains("_x_") && !f.xs, "{}", f.name);
            }
        }
    }

    #[test]
    fn shared_inputs_are_bank_conflict_free_and_fit() {
        for per in 1..=TC_XS_MAX_KBLOCKS {
            let stride = tc_x_stride(per);
            assert!(stride >= per * TC_KBLOCK_CHUNKS);
            // A quarter warp: lanes (g, t) for g in {2q, 2q + 1}, t in 0..4 read chunk
            // g * stride + 4 kb + t; their 16-byte bank groups (chunk % 8) must differ.
            for q in 0..4 {
                for kb in 0..per {
                    let mut seen = [false; 8];
                    for g in [2 * q, 2 * q + 1] {
                        for t in 0..4 {
                            let group = ((g * stride + 4 * kb + t) % 8) as usize;
                            assert!(!seen[group], "per {per} q {q} kb {kb}");
                            seen[group] = true;
                        }
                    }
                }
            }
        }
        let k = TC_F16_KERNELS
            .iter()
            .find(|k| k.xs && k.batch == 16)
            .unwrap();
        // 66.5 KiB: two blocks fit in an SM's 227 KiB.
        assert_eq!(tc_x_smem_bytes(*k, TC_XS_MAX_KBLOCKS, 16), 16 * 16 * 260);
        assert_eq!(tc_x_smem_bytes(TC_F16_KERNELS[0], 64, 16), 0);
    }

    #[test]
    fn ring_slots_are_distinct_contiguous_and_inside_the_ring() {
        for k in TC_F16_KERNELS.iter().filter(|k| k.stages > 0) {
            let per_warp = k.stages * tc_ring_stage_bytes(*k);
            assert_eq!(tc_ring_bytes(*k), TC_WARPS * per_warp);
            let mut seen = std::collections::BTreeSet::new();
            for s in 0..k.stages {
                for u in 0..k.unroll {
                    for m in 0..k.mt {
                        for h in 0..2 {
                            let first = tc_ring_offset(*k, s, u, m, h, 0);
                            for lane in 0..32 {
                                let o = tc_ring_offset(*k, s, u, m, h, lane);
                                // One copy: 32 lanes, 512 contiguous bytes.
                                assert_eq!(o, first + 16 * lane);
                                assert!(o.is_multiple_of(16) && o + 16 <= per_warp, "{}", k.name);
                                assert!(seen.insert(o), "{} slot reused", k.name);
                            }
                        }
                    }
                }
            }
            assert_eq!(seen.len() as u32 * 16, per_warp);
            assert_eq!(
                tc_smem_bytes(*k, 64, 16),
                tc_ring_bytes(*k) + tc_slice_smem_bytes(*k)
            );
        }
        let r3 = TC_F16_KERNELS
            .iter()
            .find(|k| k.name.ends_with("x_n16m1u4r3"))
            .unwrap();
        // 8 warps x 3 stages x 4 k-blocks x 1 KiB: two blocks fit in an SM's 227 KiB.
        assert_eq!(tc_ring_bytes(*r3), 96 * 1024);
    }

    #[test]
    fn stream_plans_give_every_block_work() {
        for k in TC_F16_KERNELS.iter().filter(|k| k.stream) {
            for (rows, chunks, blocks) in
                [(1, 1, 132), (4096, 512, 132), (11008, 512, 264), (7, 5, 3)]
            {
                let p = tc_stream_plan(rows, chunks, *k, blocks);
                let units = p.row_blocks * tc_kblocks(chunks);
                assert!(
                    p.stream_blocks >= 1 && p.stream_blocks <= units.max(1),
                    "{p:?}"
                );
                assert_eq!((p.ksplit, p.kblocks_per_split), (1, tc_kblocks(chunks)));
                // Every block's range is non-empty: floor((b + 1) U / P) > floor(b U / P).
                let pb = p.stream_blocks as u64;
                for b in 0..pb {
                    assert!((b + 1) * units as u64 / pb > b * units as u64 / pb);
                }
            }
        }
        let k = TC_F16_KERNELS
            .iter()
            .find(|k| k.stream && k.batch == 16)
            .unwrap();
        assert_eq!(tc_stream_words(*k, 132), 2 * 132 * 256 * 8);
    }

    /// The kernel's protocol replayed on the host: every unit summed once, whole row blocks
    /// stored by their one block, every part in a slot no other part uses, and each row
    /// block's count of parts what its last block waits for.
    #[test]
    fn stream_schedule_covers_every_unit_once_with_distinct_slots() {
        use std::collections::{BTreeMap, BTreeSet};
        for (row_blocks, kbs) in [(1u64, 1u64), (1, 7), (3, 5), (32, 128), (86, 128), (7, 3)] {
            let units = row_blocks * kbs;
            for blocks in [1, 2, 3, 5, 64, 132, 264, units]
                .into_iter()
                .filter(|&b| b <= units)
            {
                let sk = StreamK { kbs, units, blocks };
                let mut seen = vec![0u32; units as usize];
                let mut slots = BTreeSet::new();
                let mut parts: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
                for b in 0..blocks {
                    let (u0, u1) = (sk.start(b), sk.start(b + 1));
                    assert!(u1 > u0, "block {b} of {blocks} is empty");
                    let mut u = u0;
                    while u < u1 {
                        let r = u / kbs;
                        let end = u1.min((r + 1) * kbs);
                        for v in u..end {
                            seen[v as usize] += 1;
                            assert_eq!(sk.owner(v), b);
                        }
                        if !(u == r * kbs && end == (r + 1) * kbs) {
                            assert!(slots.insert((b, sk.side(b, r))), "slot reused: {b} {r}");
                            parts.entry(r).or_default().push(b);
                        }
                        u = end;
                    }
                }
                assert!(seen.iter().all(|&n| n == 1));
                for (r, bs) in parts {
                    let (first, last) = (sk.owner(r * kbs), sk.owner((r + 1) * kbs - 1));
                    let want: Vec<u64> = (first..=last).collect();
                    assert_eq!(
                        bs, want,
                        "row block {r}: parts from blocks {first}..={last}"
                    );
                }
            }
        }
    }

    #[test]
    fn default_choices_follow_the_measured_rules() {
        // H100 (132 SMs), fp16 (8 columns per chunk).
        let name = |b, r, c: u32| {
            let (i, p) = tc_choice(b, r, c, c / 8, 132);
            (TC_F16_KERNELS[i].name, p.ksplit)
        };
        // Few, long rows: 128-row blocks, split.
        assert_eq!(name(8, 2048, 4096), ("cmv_gemv_f16_tc_n8u4", 16));
        assert_eq!(name(16, 384, 1536), ("cmv_gemv_f16_tc_n16u4", 6));
        assert!(!tc_sliced(4091, 512, 132) && tc_sliced(4092, 512, 132));
        // Short rows (fewer than 16 k-blocks): slices, whatever the rows.
        assert!(tc_sliced(384, 48, 132) && !tc_sliced(384, 64, 132));
        assert_eq!(name(16, 384, 384), ("cmv_gemv_f16_tc_n16u4c4b", 1));
        assert_eq!(name(8, 1536, 384), ("cmv_gemv_f16_tc_n8u4c8", 1));
        // Large ones: column slices, unsplit.
        // Up to 4 vectors: interleaved slices (8-row B-operand tiles when tall).
        assert_eq!(name(4, 4096, 4096), ("cmv_gemv_f16_tc_n8u4c8", 1));
        assert_eq!(name(2, 28672, 8192), ("cmv_gemv_f16_tc_n8u4c8b", 1));
        assert_eq!(name(4, 11008, 4096), ("cmv_gemv_f16_tc_n8u4c8b", 1));
        // 5 to 16 vectors: contiguous slices.
        assert_eq!(name(5, 11008, 4096), ("cmv_gemv_f16_tc_n8u4c8w", 1));
        assert_eq!(name(8, 8192, 28672), ("cmv_gemv_f16_tc_n8u4c8w", 1));
        assert_eq!(name(16, 28672, 8192), ("cmv_gemv_f16_tc_n16u4c8w", 1));
        assert_eq!(name(16, 8192, 8192), ("cmv_gemv_f16_tc_n16u4c8w", 1));
        assert_eq!(name(9, 4096, 14336), ("cmv_gemv_f16_tc_n16u4c8w", 1));
        // Short rows keep the interleaved ones at any batch.
        assert_eq!(name(16, 1536, 384), ("cmv_gemv_f16_tc_n16u4c8", 1));
        // Every choice is a plan of its kernel for any shape, and takes the batch.
        for rows in [1, 7, 200, 4096, 70_000] {
            for chunks in [1, 5, 512, 3584] {
                for b in 2..=16 {
                    let (i, p) = tc_choice(b, rows, 8 * chunks, chunks, 132);
                    let k = TC_F16_KERNELS[i];
                    assert!(i < TC_DEFAULTS);
                    assert!(k.batch >= b);
                    assert_eq!(p.row_blocks, rows.div_ceil(tc_rows_per_block(k)));
                    assert!(p.ksplit * p.kblocks_per_split >= tc_kblocks(chunks));
                }
            }
        }
    }
}
