//! The Hopper copy-engine GEMV (`cmv_gemv_{f16,i8}_bulk_n{8,16}`, crate `dense-kernels-sm90`,
//! PTX for `sm_90a`): its shared-memory layout, fragment addresses, work plan and parameters,
//! shared by the kernels and the host.
//!
//! # Why
//! On an H200 the register-fed tensor-core kernels ([`crate::tc`]) stop at 63-65% of the DRAM
//! bandwidth at 16 vectors (ncu at 11008x4096), re-reading the 16 input vectors for every 16
//! rows (L2 hit rate 23%), where cuBLAS's `nvjet_sm90_hsh_128x16_64x11` reaches 72-75% with
//! tiles of 128 rows streamed through 11 shared-memory stages by the copy engine, one 2-D
//! tensor copy per stage (docs/PERF.md, "Dense batch 9-16 on an H200"). A first design of
//! this kernel with 1-D bulk copies (one per row: about 60 cycles each, whatever their size)
//! was slower; this one copies 2-D boxes as cuBLAS does.
//!
//! # The kernel
//! A block is `consumers` consumer warps and a producer warp, one block per SM (persistent;
//! [`BulkGeom`]: 8 consumers and 5 stages in [`BULK_T128`], 4 and 9 in [`BULK_T64`]). The
//! work is *items*: a tile of `16 consumers` rows and a range of *k-stages* (128 bytes of
//! every row: 64 fp16 or 128 int8 columns), cut among the blocks by [`BulkPlan`]. For each
//! k-stage the producer's lane 0 copies two boxes with `cp.async.bulk.tensor.2d` into a ring
//! of `stages` stages: the tile's rows x 128 bytes of weights (16 KiB for 128 rows) and the
//! batch's 8 or 16 vectors x 128 bytes of
//! inputs, completing on the stage's *full* barrier; it runs ahead across items, refilling a
//! stage once the consumers have released it on its *empty* barrier. The boxes are written
//! with the 128-byte swizzle ([`swizzle128`]), and elements outside the matrix (rows past
//! the end, columns past a row's end, vectors past the batch) arrive as zeros: no bounds
//! checks, and partial tiles and stages need no special case.
//!
//! Consumer warp `w` owns rows `16 w .. 16 w + 16` of every tile. Per stage it does
//! 4 k-steps of 32 bytes; each reads the weights' `mma` A fragment with one `ldmatrix.x4`
//! ([`bulk_a_offset`]) and the inputs' B fragments with one `ldmatrix.x4` (16 vectors) or
//! `.x2` (8; [`bulk_b_offset`]), then runs one `mma` per group of 8 vectors (fp16
//! `m16n8k16`, int8 `m16n8k32`: the same bytes, so the same addresses). The swizzle makes
//! every `ldmatrix` phase (8 rows, one 16-byte chunk each) hit 8 different bank groups. The
//! inputs are read once per 128 rows (the register kernels read them once per 16).
//!
//! # Stream-K
//! The units (a tile's k-stage) are cut into equal contiguous ranges, one per block
//! ([`BulkPlan`]), so every SM reads the same bytes whatever the shape. A tile a block covers
//! whole is stored at once; a block's first and last tile may be shared with other blocks:
//! each warp then stores its partial fragments to its block's slot in the workspace, publishes
//! them (a fence) and counts itself into the (tile, warp) counter; the warp that counts last
//! adds every sharer's partials in block order (the same order every run: deterministic fp32
//! sums, exact int32 ones), stores the outputs and sets the counter back to zero. Nothing waits
//! for another block. [`bulk_plan`] aligns the ranges to tiles where it can.
//!
//! A first version split each tile into equal items taken round-robin by the blocks: shapes
//! with many items per block (28672x8192: 7) ran at 67% of the read ceiling on an H200.
//! Counting in after the last stage instead of at each shared tile's end was no faster (and
//! slower at 16 vectors), so the count stays where the tile ends (docs/PERF.md).

use crate::tc::{GemvTcF16Params, GemvTcI8Params, StreamK, TC_COUNTERS, TC_WORKSPACE_WORDS};
use cmv_device::{KernelParams, TensorMap};

/// Bytes of a row in one k-stage: one box row, the 128-byte swizzle's span.
pub const BULK_ROW_BYTES: u32 = 128;
/// Bytes of a stage's inputs (room for 16 vectors).
pub const BULK_X_BYTES: u32 = 16 * BULK_ROW_BYTES;
/// Bytes at the start of the shared memory for the barriers: the full barriers of up to 32
/// stages at `0..256`, the empty ones at `256..512` (8 bytes each).
pub const BULK_HEADER_BYTES: u32 = 512;
/// Most stages a ring may have (the header's room).
pub const BULK_MAX_STAGES: u32 = 32;
/// The least dynamic shared memory a launch asks for: more than half of an SM's 228 KiB (less
/// the 1 KiB the driver reserves per block), so that two blocks of one launch never share an SM
/// while other SMs idle. The plans count on one block per SM; on an H200 the 5- and 9-stage
/// rings (92 KiB) without this ran 4096-row matrices 1.3-1.4x slower on 64 blocks (docs/PERF.md).
pub const BULK_MIN_SMEM_BYTES: u32 = 115 * 1024;
/// Most splits of a row's k-stages.
pub const BULK_MAX_SPLIT: u32 = 16;

/// The geometry of a copy-engine kernel: `consumers` warps of 16 rows each (a tile of
/// `16 consumers` rows, one weights box per stage) and a ring of `stages` stages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BulkGeom {
    /// Consumer warps per block, 16 rows each.
    pub consumers: u32,
    /// Stages of the ring.
    pub stages: u32,
}

impl BulkGeom {
    /// Rows per tile: 16 per consumer warp (the `mma`'s M).
    pub const fn tile_rows(&self) -> u32 {
        16 * self.consumers
    }

    /// Threads per block: the consumers and one producer warp.
    pub const fn threads(&self) -> u32 {
        (self.consumers + 1) * 32
    }

    /// Bytes of a stage's weights (one box of `tile_rows` rows x 128 bytes).
    pub const fn w_bytes(&self) -> u32 {
        self.tile_rows() * BULK_ROW_BYTES
    }

    /// Bytes of one stage: the weights, then room for 16 vectors' inputs.
    pub const fn stage_bytes(&self) -> u32 {
        self.w_bytes() + BULK_X_BYTES
    }

    /// Shared memory the kernel uses: the header, up to 1008 bytes to the ring's 1024-byte
    /// boundary ([`bulk_ring`]), the ring.
    pub const fn used_bytes(&self) -> u32 {
        BULK_HEADER_BYTES + 1024 + self.stages * self.stage_bytes()
    }

    /// Dynamic shared memory of a launch: what the kernel uses, at least
    /// [`BULK_MIN_SMEM_BYTES`], so that one block runs per SM.
    pub const fn smem_bytes(&self) -> u32 {
        let used = self.used_bytes();
        if used < BULK_MIN_SMEM_BYTES {
            BULK_MIN_SMEM_BYTES
        } else {
            used
        }
    }

    /// Whether the geometry is one the kernels can take: 1-8 consumers, 2-32 stages (the
    /// header's barriers), stages 1024-byte multiples (the swizzle's alignment), the whole
    /// ring within a block's 227 KiB of shared memory.
    pub const fn is_valid(&self) -> bool {
        self.consumers >= 1
            && self.consumers <= 8
            && self.stages >= 2
            && self.stages <= BULK_MAX_STAGES
            && self.stage_bytes().is_multiple_of(1024)
            && self.w_bytes().is_multiple_of(1024)
            && self.used_bytes() <= 227 * 1024
    }
}

/// Tiles of 128 rows (8 consumer warps), 5 stages (80 KiB of weights in flight per SM). The
/// ring depth was measured on an H200 (docs/PERF.md, "Dense 2-16 vectors: tiles of 64 rows
/// and shallower rings"): deeper rings were slower (12 stages against 6: 3-10% at four of the
/// five shapes measured, level at 8192x28672), and 5 stages against 6 were 1.5-2.5% faster at
/// 28672x8192, within 1% elsewhere; 3 and 4 stages were slower again.
pub const BULK_T128: BulkGeom = BulkGeom {
    consumers: 8,
    stages: 5,
};

/// Tiles of 64 rows (4 consumer warps), 9 stages (72 KiB of weights in flight): twice the
/// tiles of [`BULK_T128`], so that 8192 rows make 128 whole tiles for 132 SMs, as cuBLASLt's
/// `64x16` tiles do there. On an H200 7-9 stages ran within 1.5% of each other and 2-4%
/// faster than 12, 16 or 22 (docs/PERF.md).
pub const BULK_T64: BulkGeom = BulkGeom {
    consumers: 4,
    stages: 9,
};

/// Tiles of 112 rows (7 consumer warps), 5 stages: 14336 rows make 128 whole tiles and 28672
/// rows 256 (two per block), one full wave of whole tiles on 132 SMs, which tiles of 128 rows
/// (112 or 224) and of 64 (224 or 448) are not, so the launch is programmatic
/// ([`bulk_pdl_preferred`]). On an H200 (docs/PERF.md, "Tiles of 112 rows" under "Dense 2-16
/// vectors: programmatic dependent launch"): 14336x4096 fp16 7% and int8 10-11% faster than
/// tiles of 128 rows; 28672x8192 int8 3% faster, fp16 1% slower.
pub const BULK_T112: BulkGeom = BulkGeom {
    consumers: 7,
    stages: 5,
};

const _: () = assert!(BULK_T128.is_valid() && BULK_T64.is_valid() && BULK_T112.is_valid());
const _: () = assert!(16 * BULK_MAX_STAGES <= BULK_HEADER_BYTES);

/// Offset of stage `s`'s full barrier in the shared memory.
pub const fn bulk_full_bar(s: u32) -> u32 {
    8 * s
}

/// Offset of stage `s`'s empty barrier.
pub const fn bulk_empty_bar(s: u32) -> u32 {
    8 * (BULK_MAX_STAGES + s)
}

/// The ring's start for dynamic shared memory at `base` (a shared-window address, 16-byte
/// aligned): the first 1024-byte boundary after the header, as the 128-byte swizzle needs.
pub const fn bulk_ring(base: u32) -> u32 {
    (base + BULK_HEADER_BYTES + 1023) & !1023
}

/// Where the 128-byte swizzle puts byte `off` of a box (counted from a 1024-byte boundary):
/// 16-byte chunk `c` of 128-byte row `r` lands at chunk `c ^ (r % 8)`
/// (`CU_TENSOR_MAP_SWIZZLE_128B`).
pub const fn swizzle128(off: u32) -> u32 {
    off ^ (((off >> 7) & 7) << 4)
}

/// Offset in a stage's weights (unswizzled) of the row that lane `lane` of consumer warp
/// `warp` addresses for the `ldmatrix.x4` of k-step `j` (`0..4`, 32 bytes each): lanes
/// `0..16` give rows `0..16` of the warp's 16 at the step's first 16-byte chunk, lanes
/// `16..32` the same rows at its second. The four matrices are then rows 0-7 / 8-15 at chunk
/// 0 and rows 0-7 / 8-15 at chunk 1: the `mma` A fragment's registers in order.
pub const fn bulk_a_offset(warp: u32, lane: u32, j: u32) -> u32 {
    (16 * warp + (lane & 15)) * BULK_ROW_BYTES + 16 * (2 * j + (lane >> 4))
}

/// Offset in a stage's inputs (unswizzled) of the vector row that lane `lane` addresses for
/// the `ldmatrix` of k-step `j`: lanes `8 i .. 8 i + 8` give vectors `8 (i / 2) ..` at the
/// step's chunk `i % 2`, so the matrices are the B fragments of vectors 0-7 (two registers)
/// and then of vectors 8-15 (`.x2` uses the first two).
pub const fn bulk_b_offset(lane: u32, j: u32) -> u32 {
    ((lane & 7) + 8 * (lane >> 4)) * BULK_ROW_BYTES + 16 * (2 * j + ((lane >> 3) & 1))
}

/// How a launch divides the work: `tiles * kstages` *units* (a tile's k-stage), in tile-major
/// order, cut into `grid` equal contiguous ranges, one per (persistent) block: stream-K
/// ([`StreamK`]). A block's range covers whole tiles, whose outputs it stores, and at most two
/// partial ones (its first and its last), whose sums it adds through the workspace with the
/// other blocks that share them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BulkPlan {
    /// Consumer warps of the kernel ([`BulkGeom::consumers`]): tiles of 16 rows per warp.
    pub consumers: u32,
    /// Tiles of `16 consumers` rows.
    pub tiles: u32,
    /// k-stages of a row (128 bytes each; the last may be partial).
    pub kstages: u32,
    /// Blocks (`gridDim.x`), `1..=tiles * kstages`.
    pub grid: u32,
}

impl BulkPlan {
    /// The stream-K schedule of the plan.
    pub const fn stream(&self) -> StreamK {
        StreamK {
            kbs: self.kstages as u64,
            units: self.tiles as u64 * self.kstages as u64,
            blocks: self.grid as u64,
        }
    }

    /// Whether some tile is shared by several blocks (so the workspace and counters are used):
    /// not when every block's range is whole tiles.
    pub const fn shares_tiles(&self) -> bool {
        !(self.kstages == 0 || self.grid == self.tiles || self.grid == 1)
    }
}

/// The plan of a kernel of geometry `g` on `grid` blocks for `rows` rows of `row_bytes` bytes
/// (`grid` clamped to `1..=units`). The kernel rebuilds its plan with this from its
/// parameters.
pub const fn bulk_plan_for(g: BulkGeom, rows: u32, row_bytes: u32, grid: u32) -> BulkPlan {
    let tiles = rows.div_ceil(g.tile_rows());
    let kstages = row_bytes.div_ceil(BULK_ROW_BYTES);
    let units = tiles * kstages;
    let mut grid = if grid == 0 { 1 } else { grid };
    if units > 0 && grid > units {
        grid = units;
    }
    BulkPlan {
        consumers: g.consumers,
        tiles,
        kstages,
        grid,
    }
}

/// Workspace words (32-bit partial sums) of a launch of `p` for `groups` groups of 8 vectors:
/// two slots per block (its first and last tile) of 4 words per lane, group and warp.
pub const fn bulk_split_words(p: &BulkPlan, groups: u32) -> usize {
    2 * p.grid as usize * (p.consumers * 32 * 4 * groups) as usize
}

/// Whether `p` fits the workspace ([`TC_WORKSPACE_WORDS`]) and the counters ([`TC_COUNTERS`]:
/// one per tile and warp) for `groups` groups of 8 vectors; plans without shared tiles always
/// fit.
pub const fn bulk_plan_fits(p: &BulkPlan, groups: u32) -> bool {
    !p.shares_tiles()
        || (p.tiles as usize * p.consumers as usize <= TC_COUNTERS
            && bulk_split_words(p, groups) <= TC_WORKSPACE_WORDS)
}

/// The plan of a kernel of geometry `g` for `rows` rows of `row_bytes` bytes and `groups`
/// groups of 8 vectors on `sms` SMs. Ranges aligned to tiles: with at most `sms` tiles, `n = sms / tiles` blocks per tile
/// (each sums `1 / n` of one tile), except one block per tile of 128 rows where `n` would be 2
/// and the rows have at most 16 KiB (64 tiles on 132 SMs: 8192x8192 on an H200 at 2-16 vectors
/// 35.9-36.9 us on 64 blocks against 37.1-38.4 on 128, int8 19.7-20.9 against 21.2-22.2;
/// 8192x28672 fp16 kept 128: 114.2-115.5 us against 116.1-118.5 on 64; docs/PERF.md; tiles
/// of 64 rows keep two blocks: int8 4096x11008 and 4096x14336 on an H200, build `4e47a8b`,
/// one full wave launched programmatically, 0-7% faster than the register-fed kernels at 2
/// and 16 vectors, where 64 blocks had been 15-25% slower); with
/// more, `m = ceil(tiles / sms)` whole tiles per block
/// where `m` divides the tiles; otherwise one block per SM. Where the counters cannot take the
/// tiles (more than 65536 rows), one block per tile.
///
/// On an H200 (docs/PERF.md) ranges that cut tiles unevenly cost up to 15% against the same
/// work aligned to tiles (4096x4096: 16.7 us on 132 blocks, 14.2 on 128), while leaving a
/// third of the SMs idle costs little (66 blocks: within 12% of 132 at every LLM shape).
pub const fn bulk_plan(g: BulkGeom, rows: u32, row_bytes: u32, groups: u32, sms: u32) -> BulkPlan {
    let sms = if sms == 0 { 1 } else { sms };
    let tiles = rows.div_ceil(g.tile_rows());
    let grid = if tiles == 0 {
        1
    } else if tiles <= sms {
        let n = sms / tiles;
        tiles
            * if n == 2 && row_bytes <= 16384 && g.tile_rows() == 128 {
                1
            } else {
                n
            }
    } else {
        match whole_tile_grid(tiles, sms) {
            0 => sms,
            g => g,
        }
    };
    let p = bulk_plan_for(g, rows, row_bytes, grid);
    if bulk_plan_fits(&p, groups) {
        p
    } else {
        bulk_plan_for(g, rows, row_bytes, tiles)
    }
}

/// Whether the default path runs `batch` vectors of a `rows x cols` matrix (`int8` or fp16)
/// on the copy-engine kernels, on compute capability 9.0: the shapes where they were faster
/// than the register-fed kernels (docs/PERF.md): from 2 vectors on at least 80 tiles of 128
/// rows (11008x4096, 14336x4096, 28672x8192: 2-13% faster at 2 and 16 vectors on the H200,
/// equal to 5% on the H100; builds `b0dd9a5`, `8ec1f6d`), and at 64 tiles of 128 rows with at
/// least 8192 columns (8192x8192, 8192x28672), where they run on tiles of 64 rows
/// ([`bulk_t64_preferred`]; on an H200 int8 at 8192x28672 then 1-8% faster than the
/// register-fed kernels at 2-8 vectors, where tiles of 128 rows had been 3% slower at 2).
/// Also on 32 tiles of 128 rows (4096 rows) with at least 11008 columns, on tiles of 64
/// rows, two blocks per tile, a full wave launched programmatically ([`bulk_pdl_preferred`]):
/// on an H200 (build `500fefe`) fp16 4096x14336 30.6-31.5 us against 31.9-33.7 (4-7%
/// faster) and 4096x11008 24.4-25.1 against 24.9-26.5 (1-7%); int8 (build `4e47a8b`, forced
/// grid of 128) 4096x11008 14.2-15.0 us against 14.3-15.7, 4096x14336 17.5-18.5 against
/// 17.5-19.2 (b8 within 1%). 4096x4096 ran 17-25% slower.
/// Never at 1 vector (the batch-1 kernels reach 92-97% of the ceiling at these shapes) nor on
/// other smaller matrices (4096 rows: 2-45% slower before the programmatic launch).
pub const fn bulk_preferred(rows: u32, cols: u32, batch: u32, int8: bool) -> bool {
    let _ = int8;
    let tiles = rows.div_ceil(BULK_T128.tile_rows());
    if batch < 2 || batch > 16 {
        false
    } else {
        tiles >= 80 || (tiles >= 64 && cols >= 8192) || (tiles >= 32 && cols >= 11008)
    }
}

/// Whether the default path's copy-engine kernel for `batch` vectors of a `rows x cols`
/// matrix (where [`bulk_preferred`] runs one) takes tiles of 64 rows ([`BULK_T64`]) rather
/// than 128: where the rows make 65-128 tiles of 64 rows (4097-8192 rows), one whole tile
/// per block on 132 SMs, where tiles of 128 rows would leave half of the SMs idle or split
/// every tile. On an H200 (docs/PERF.md): 8192x8192 fp16 3-5% faster, int8 3-5%; 8192x28672
/// fp16 2-3%, int8 4% at 16 vectors. Tiles of 64 rows were slower at 11008x4096, 14336x4096
/// and 28672x8192 (2-9%). Also at 64 tiles of 64 rows (4033-4096 rows; fp16 4096x11008 and
/// 4096x14336 on an H200, build `500fefe`: 1-3% faster than tiles of 128 rows).
pub const fn bulk_t64_preferred(rows: u32, cols: u32, batch: u32, int8: bool) -> bool {
    let _ = (cols, batch, int8);
    let tiles = rows.div_ceil(BULK_T64.tile_rows());
    tiles >= 64 && tiles <= 128
}

/// Whether a programmatic launch of plan `p` pays on `sms` SMs (one block per SM): only when
/// its grid fills at least 90% of the SMs and no more than all of them (one full wave), as
/// for BEAM's direct kernel (`beam_kernels::direct_full_wave`). Measured on an H200
/// (docs/PERF.md, "Dense 2-16 vectors: programmatic dependent launch"), against the ordinary
/// launch: 128 blocks (8192x8192, 8192x28672) 2-10% faster; 112 blocks mixed (14336x4096
/// int8 8-9% faster, fp16 1%; 28672x8192 3-7% slower); 86 blocks (11008x4096) 3-14% slower.
/// (The dependent grid's first blocks take the SMs the grid before leaves idle, then the
/// others as they free up, so a partial wave lands differently on the SMs than a launch on an
/// idle GPU: our reading, not profiled.)
pub const fn bulk_pdl_preferred(p: &BulkPlan, sms: u32) -> bool {
    full_wave(p.grid, sms)
}

/// The blocks of a plan that gives each block whole tiles (`bulk_plan`'s for more tiles than
/// SMs: `m` tiles per block where `m` divides them), 0 where there is none.
const fn whole_tile_grid(tiles: u32, sms: u32) -> u32 {
    if tiles <= sms {
        tiles
    } else {
        let m = tiles.div_ceil(sms);
        if tiles.is_multiple_of(m) {
            tiles / m
        } else {
            0
        }
    }
}

/// Whether `grid` blocks are one full wave on `sms` SMs (90-100%, as [`bulk_pdl_preferred`]).
const fn full_wave(grid: u32, sms: u32) -> bool {
    grid <= sms && 10 * grid as u64 >= 9 * sms as u64
}

/// Whether the default path's copy-engine kernel for `batch` vectors of a `rows x cols`
/// matrix on `sms` SMs takes tiles of 112 rows ([`BULK_T112`]): where not 64 rows
/// ([`bulk_t64_preferred`]), and tiles of 112 rows give each block whole tiles on one full
/// wave while tiles of 128 rows do not (14336 rows: 128 tiles against 112; 28672 rows: 128
/// blocks of two tiles against 112), one tile per block, or several for int8 only (fp16
/// 28672x8192 ran 1% slower on them). 11008 rows (99 tiles: no full wave) keep 128 rows
/// (measured level).
pub const fn bulk_t112_preferred(rows: u32, cols: u32, batch: u32, int8: bool, sms: u32) -> bool {
    let t112 = rows.div_ceil(BULK_T112.tile_rows());
    let t128 = rows.div_ceil(BULK_T128.tile_rows());
    !bulk_t64_preferred(rows, cols, batch, int8)
        && full_wave(whole_tile_grid(t112, sms), sms)
        && !full_wave(whole_tile_grid(t128, sms), sms)
        && (int8 || t112 <= sms)
}

/// The geometry of the default path's copy-engine kernel for `batch` vectors of a `rows x
/// cols` matrix on `sms` SMs: [`BULK_T64`], [`BULK_T112`] or [`BULK_T128`].
pub const fn bulk_geom_preferred(
    rows: u32,
    cols: u32,
    batch: u32,
    int8: bool,
    sms: u32,
) -> BulkGeom {
    if bulk_t64_preferred(rows, cols, batch, int8) {
        BULK_T64
    } else if bulk_t112_preferred(rows, cols, batch, int8, sms) {
        BULK_T112
    } else {
        BULK_T128
    }
}

/// The part of tile `tile` that the range `u0..u1` of plan `p` covers: k-stages `k0..k1`.
pub const fn bulk_tile_part(p: &BulkPlan, tile: u32, u0: u64, u1: u64) -> (u32, u32) {
    let t0 = tile as u64 * p.kstages as u64;
    let lo = u0.saturating_sub(t0);
    let hi = if u1 < t0 + p.kstages as u64 {
        u1 - t0
    } else {
        p.kstages as u64
    };
    (lo as u32, hi as u32)
}

/// Parameters of the fp16 copy-engine kernels: the tensor maps of the weights (`rows x cols`,
/// boxes of 128 rows x 64 columns) and of the inputs (`batch x cols`, boxes of 8 or 16
/// vectors, the kernel's capacity, x 64 columns), then the tensor-core kernels' parameters
/// (`acc` and `counters` are the workspace of shared tiles; `kblocks_per_split` is unused).
/// The maps sit at offsets 0 and 128 of the kernel's parameter, 64-byte aligned.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemvBulkF16Params {
    /// The weights' tensor map.
    pub wmap: TensorMap,
    /// The inputs' tensor map.
    pub xmap: TensorMap,
    /// Buffers and sizes.
    pub p: GemvTcF16Params,
}
const _: () = assert!(core::mem::size_of::<GemvBulkF16Params>() == 256 + 56);
// SAFETY: repr(C), no padding (size asserted; every field 4-aligned), plain data and device
// pointers only; the one parameter of the fp16 bulk kernels.
unsafe impl KernelParams for GemvBulkF16Params {}

/// Parameters of the int8 copy-engine kernels, as [`GemvBulkF16Params`] (boxes of 128
/// columns).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemvBulkI8Params {
    /// The weights' tensor map.
    pub wmap: TensorMap,
    /// The inputs' tensor map.
    pub xmap: TensorMap,
    /// Buffers, sizes and the requantization scale.
    pub p: GemvTcI8Params,
}
const _: () = assert!(
    core::mem::size_of::<GemvBulkI8Params>() == 256 + core::mem::size_of::<GemvTcI8Params>()
);
// SAFETY: as for GemvBulkF16Params; the one parameter of the int8 bulk kernels.
unsafe impl KernelParams for GemvBulkI8Params {}

/// A bulk kernel: its PTX name, the vectors it takes and its geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BulkKernel {
    /// PTX entry point (in the `sm_90a` module).
    pub name: &'static str,
    /// Input vectors it takes at most (8 or 16): also the rows of its input boxes.
    pub batch: u32,
    /// Its tile and ring.
    pub geom: BulkGeom,
}

/// The fp16 bulk kernels: up to 8 and up to 16 vectors on tiles of 128 rows, then the same on
/// tiles of 64 rows and of 112 rows ([`bulk_kernel`] gives the index).
pub const BULK_F16_KERNELS: [BulkKernel; 6] = [
    BulkKernel {
        name: "cmv_gemv_f16_bulk_n8",
        batch: 8,
        geom: BULK_T128,
    },
    BulkKernel {
        name: "cmv_gemv_f16_bulk_n16",
        batch: 16,
        geom: BULK_T128,
    },
    BulkKernel {
        name: "cmv_gemv_f16_bulk64_n8",
        batch: 8,
        geom: BULK_T64,
    },
    BulkKernel {
        name: "cmv_gemv_f16_bulk64_n16",
        batch: 16,
        geom: BULK_T64,
    },
    BulkKernel {
        name: "cmv_gemv_f16_bulk112_n8",
        batch: 8,
        geom: BULK_T112,
    },
    BulkKernel {
        name: "cmv_gemv_f16_bulk112_n16",
        batch: 16,
        geom: BULK_T112,
    },
];

/// The int8 bulk kernels, as [`BULK_F16_KERNELS`].
pub const BULK_I8_KERNELS: [BulkKernel; 6] = [
    BulkKernel {
        name: "cmv_gemv_i8_bulk_n8",
        batch: 8,
        geom: BULK_T128,
    },
    BulkKernel {
        name: "cmv_gemv_i8_bulk_n16",
        batch: 16,
        geom: BULK_T128,
    },
    BulkKernel {
        name: "cmv_gemv_i8_bulk64_n8",
        batch: 8,
        geom: BULK_T64,
    },
    BulkKernel {
        name: "cmv_gemv_i8_bulk64_n16",
        batch: 16,
        geom: BULK_T64,
    },
    BulkKernel {
        name: "cmv_gemv_i8_bulk112_n8",
        batch: 8,
        geom: BULK_T112,
    },
    BulkKernel {
        name: "cmv_gemv_i8_bulk112_n16",
        batch: 16,
        geom: BULK_T112,
    },
];

/// The bulk kernel (index in [`BULK_F16_KERNELS`] / [`BULK_I8_KERNELS`]) for `batch` vectors
/// on tiles of geometry `g` ([`BULK_T128`], [`BULK_T64`] or [`BULK_T112`]; any other counts as
/// [`BULK_T128`]).
pub const fn bulk_kernel(batch: u32, g: BulkGeom) -> usize {
    let tile = if g.consumers == BULK_T64.consumers {
        2
    } else if g.consumers == BULK_T112.consumers {
        4
    } else {
        0
    };
    (if batch <= 8 { 0 } else { 1 }) + tile
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;

    #[test]
    fn the_layout_fits_and_is_aligned() {
        assert_eq!(BULK_T128.w_bytes(), 16384);
        assert_eq!(BULK_T128.stage_bytes(), 18432);
        assert_eq!(BULK_T64.w_bytes(), 8192);
        assert_eq!(BULK_T64.stage_bytes(), 10240);
        assert_eq!((BULK_T128.threads(), BULK_T64.threads()), (288, 160));
        for s in 0..BULK_MAX_STAGES {
            assert!(bulk_full_bar(s) + 8 <= bulk_empty_bar(0));
            assert!(bulk_empty_bar(s) + 8 <= BULK_HEADER_BYTES);
        }
        assert!(
            !BulkGeom {
                consumers: 1,
                stages: 33
            }
            .is_valid()
        );
        assert!(
            !BulkGeom {
                consumers: 8,
                stages: 13
            }
            .is_valid(),
            "over 227 KiB"
        );
        assert!(
            !BulkGeom {
                consumers: 0,
                stages: 6
            }
            .is_valid()
        );
        for g in [BULK_T128, BULK_T64] {
            assert!(g.is_valid());
            // One block per SM: two launches' worth of shared memory exceeds an SM's 228 KiB.
            assert!(2 * (g.smem_bytes() + 1024) > 228 * 1024);
            assert!(g.smem_bytes() <= 227 * 1024);
            // Whatever 16-byte-aligned start the dynamic shared memory has, the ring is
            // 1024-byte aligned, after the header, and ends inside the launch's shared memory.
            for base in (0..4096).step_by(16) {
                let ring = bulk_ring(base);
                assert!(ring.is_multiple_of(1024));
                assert!(ring >= base + BULK_HEADER_BYTES);
                assert!(ring + g.stages * g.stage_bytes() <= base + g.used_bytes());
                assert!(g.used_bytes() <= g.smem_bytes());
            }
        }
    }

    /// Every `ldmatrix` phase (8 lanes' addresses) of the A and B reads hits 8 different
    /// 16-byte bank groups after the swizzle.
    #[test]
    fn fragment_reads_are_free_of_bank_conflicts() {
        for j in 0..4 {
            for phase in 0..4 {
                let groups = |f: &dyn Fn(u32) -> u32| {
                    let mut g: Vec<u32> = (0..8)
                        .map(|l| swizzle128(f(8 * phase + l)) / 16 % 8)
                        .collect();
                    g.sort_unstable();
                    g.dedup();
                    g.len()
                };
                for w in 0..BULK_T128.consumers {
                    assert_eq!(groups(&|l| bulk_a_offset(w, l, j)), 8);
                }
                assert_eq!(groups(&|l| bulk_b_offset(l, j)), 8);
            }
        }
    }

    /// A stage as the copy engine writes it (128-byte swizzle), read back through the
    /// `ldmatrix` addresses and the PTX ISA's fragment layouts, gives for every consumer warp
    /// and k-step exactly the `mma` operands of its 16 rows and the 16 vectors: checked by
    /// element index, for 16-bit elements (`m16n8k16`) and bytes (`m16n8k32`).
    #[test]
    fn swizzled_stages_give_the_mma_operands() {
        // Element (row, byte) of the weights box and (vector, byte) of the inputs box, as the
        // byte value id: the byte offset in the unswizzled box, which is unique per byte.
        // The 128-row box; a 64-row box is its first half (warps 0-3 read only that).
        let mut w = vec![0u32; BULK_T128.w_bytes() as usize];
        for off in 0..BULK_T128.w_bytes() {
            w[swizzle128(off) as usize] = off;
        }
        let mut x = vec![0u32; BULK_X_BYTES as usize];
        for off in 0..BULK_X_BYTES {
            x[swizzle128(off) as usize] = off;
        }
        // ldmatrix: lane (g, t) of matrix i gets word t (4 bytes) of the row at the address
        // lane 8 i + g gave.
        let ldm = |mem: &[u32], addr: &dyn Fn(u32) -> u32, i: u32, lane: u32| -> [u32; 4] {
            let (g, t) = (lane / 4, lane % 4);
            let row = addr(8 * i + g);
            core::array::from_fn(|b| mem[(row + 4 * t + b as u32) as usize])
        };
        for warp in 0..BULK_T128.consumers {
            for j in 0..4 {
                for lane in 0..32 {
                    let (g, t) = (lane / 4, lane % 4);
                    let a = |i| ldm(&w, &|l| swizzle128(bulk_a_offset(warp, l, j)), i, lane);
                    let b = |i| ldm(&x, &|l| swizzle128(bulk_b_offset(l, j)), i, lane);
                    // The unswizzled byte of weight row r (of the tile) at k-step byte kb, and
                    // of vector n.
                    let wid = |r: u32, kb: u32| r * BULK_ROW_BYTES + 32 * j + kb;
                    let xid = |n: u32, kb: u32| n * BULK_ROW_BYTES + 32 * j + kb;
                    let r0 = 16 * warp;
                    // fp16 m16n8k16: a0 = A[g][2t..2t+2], a1 = A[g+8][2t..], a2 = A[g][2t+8..],
                    // a3 = A[g+8][2t+8..]; b0 = B[2t..2t+2][n], b1 = B[2t+8..][n] (2 bytes per
                    // element). int8 m16n8k32: a0 = A[g][4t..4t+4], a1 = A[g+8][4t..],
                    // a2 = A[g][16+4t..], a3 = A[g+8][16+4t..]; b0 = B[4t..][n],
                    // b1 = B[16+4t..][n]. Both are the same bytes: byte 4t + 16 h of rows g
                    // (+ 8).
                    for (i, (dr, h)) in [(0, 0), (8, 0), (0, 1), (8, 1)].into_iter().enumerate() {
                        let want: [u32; 4] =
                            core::array::from_fn(|q| wid(r0 + g + dr, 16 * h + 4 * t + q as u32));
                        assert_eq!(a(i as u32), want, "warp {warp} step {j} lane {lane} a{i}");
                    }
                    for (i, (n0, h)) in [(0, 0), (0, 1), (8, 0), (8, 1)].into_iter().enumerate() {
                        let want: [u32; 4] =
                            core::array::from_fn(|q| xid(n0 + g, 16 * h + 4 * t + q as u32));
                        assert_eq!(b(i as u32), want, "step {j} lane {lane} b{i}");
                    }
                }
            }
        }
    }

    /// Geometries, row counts, row lengths and grids for the plan tests.
    fn unit_cases() -> Vec<(BulkGeom, u32, u32, u32)> {
        let mut v = Vec::new();
        for g in [BULK_T128, BULK_T64, BULK_T112] {
            for rows in [1, 63, 64, 65, 127, 128, 129, 300, 4096, 11008] {
                for row_bytes in [16, 128, 144, 2080, 8192] {
                    for grid in [1, 2, 7, 33, 132, 10_000] {
                        v.push((g, rows, row_bytes, grid));
                    }
                }
            }
        }
        v
    }

    #[test]
    fn the_blocks_take_every_unit_once() {
        for (g, rows, row_bytes, grid) in unit_cases() {
            {
                {
                    let p = bulk_plan_for(g, rows, row_bytes, grid);
                    let sk = p.stream();
                    assert!(p.grid >= 1 && u64::from(p.grid) <= sk.units.max(1));
                    let mut seen = vec![0u8; sk.units as usize];
                    let mut sharers = vec![0u32; p.tiles as usize];
                    for b in 0..u64::from(p.grid) {
                        let (u0, u1) = (sk.start(b), sk.start(b + 1));
                        assert!(u0 < u1, "{p:?}: block {b} has no work");
                        let (mut partial, mut u) = (0, u0);
                        while u < u1 {
                            let tile = (u / sk.kbs) as u32;
                            let (k0, k1) = bulk_tile_part(&p, tile, u0, u1);
                            assert!(k0 < k1 && u64::from(k0) == u % sk.kbs);
                            for k in k0..k1 {
                                seen[(u64::from(tile) * sk.kbs + u64::from(k)) as usize] += 1;
                            }
                            if k1 - k0 < p.kstages {
                                partial += 1;
                                // Its slot: 0 for the tile the range starts in, else 1.
                                assert_eq!(sk.side(b, u64::from(tile)), usize::from(u != u0));
                            }
                            sharers[tile as usize] += 1;
                            u += u64::from(k1 - k0);
                        }
                        assert!(partial <= 2);
                    }
                    assert!(seen.iter().all(|&c| c == 1), "{rows} {row_bytes} {p:?}");
                    // The sharers of a tile are the blocks from the owner of its first unit to
                    // that of its last.
                    for (t, &n) in sharers.iter().enumerate() {
                        let t0 = t as u64 * sk.kbs;
                        let parts = sk.owner(t0 + sk.kbs - 1) - sk.owner(t0) + 1;
                        assert_eq!(u64::from(n), parts, "tile {t} {p:?}");
                        if !p.shares_tiles() {
                            assert_eq!(n, 1, "{p:?}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn plans_fill_the_sms_within_the_workspace() {
        // Aligned to tiles: n blocks per tile, or m tiles per block.
        let t = BULK_T128;
        let grid = |rows: u32, cols: u32| bulk_plan(t, rows, 2 * cols, 2, 132).grid;
        assert_eq!(grid(4096, 4096), 128);
        assert_eq!(grid(8192, 28672), 128);
        assert_eq!(grid(8192, 8192), 64);
        assert_eq!(bulk_plan(t, 8192, 8192, 2, 132).grid, 64);
        assert_eq!(bulk_plan(t, 8192, 16384 + 128, 2, 132).grid, 128);
        assert_eq!(grid(11008, 4096), 86);
        assert_eq!(grid(14336, 4096), 112);
        assert_eq!(grid(28672, 8192), 112);
        assert_eq!(grid(128 * 133, 4096), 132);
        let p = bulk_plan(t, 4096, 8192, 2, 132);
        assert!(p.shares_tiles() && bulk_plan_fits(&p, 2));
        let sk = p.stream();
        assert!((0..128).all(|b| sk.start(b).is_multiple_of(16)));
        // Tiles of 64 rows: 8192 rows are 128 whole tiles, 4096 rows of 28 KiB 64 tiles of
        // two blocks each.
        let g64 = |rows: u32, cols: u32| bulk_plan(BULK_T64, rows, 2 * cols, 2, 132);
        assert_eq!(
            (g64(8192, 8192).grid, g64(8192, 8192).shares_tiles()),
            (128, false)
        );
        assert_eq!(
            (g64(4096, 14336).grid, g64(4096, 14336).shares_tiles()),
            (128, true)
        );
        assert_eq!(g64(28672, 8192).grid, 112);
        // ... also with rows of at most 16 KiB (int8 4096x14336), unlike tiles of 128 rows.
        let p = bulk_plan(BULK_T64, 4096, 14336, 2, 132);
        assert_eq!((p.grid, p.shares_tiles()), (128, true));
        assert_eq!(g64(8192, 8192).consumers, 4);
        // Small matrices: at most one block per unit.
        assert_eq!(bulk_plan(t, 1, 16, 2, 132).grid, 1);
        // Too many tiles for the counters: one block per tile, none shared.
        for g in [BULK_T128, BULK_T64, BULK_T112] {
            let p = bulk_plan(g, 600_000, 256, 2, 132);
            assert_eq!(p.grid, p.tiles);
            assert!(!p.shares_tiles() && bulk_plan_fits(&p, 2));
            assert!(!bulk_plan_fits(&bulk_plan_for(g, 600_000, 256, 132), 2));
        }
        assert_eq!(bulk_kernel(8, BULK_T128), 0);
        assert_eq!(bulk_kernel(9, BULK_T128), 1);
        assert_eq!(bulk_kernel(2, BULK_T64), 2);
        assert_eq!(bulk_kernel(16, BULK_T64), 3);
        assert_eq!(bulk_kernel(5, BULK_T112), 4);
        assert_eq!(bulk_kernel(16, BULK_T112), 5);
        for (i, k) in BULK_F16_KERNELS.iter().enumerate() {
            assert_eq!(bulk_kernel(k.batch, k.geom), i);
            assert_eq!(BULK_I8_KERNELS[i].geom, k.geom);
            assert_eq!(BULK_I8_KERNELS[i].batch, k.batch);
            assert_eq!(k.name.contains("bulk64"), k.geom == BULK_T64);
            assert_eq!(k.name.contains("bulk112"), k.geom == BULK_T112);
        }
    }

    #[test]
    fn the_default_path_takes_them_where_they_were_measured_faster() {
        let pick = |rows, cols, batch, int8| bulk_preferred(rows, cols, batch, int8);
        for int8 in [false, true] {
            for batch in [2, 5, 16] {
                assert!(pick(14336, 4096, batch, int8));
                assert!(pick(28672, 8192, batch, int8));
                // The wide 4096-row shapes.
                assert!(pick(4096, 14336, batch, int8) && pick(4096, 11008, batch, int8));
                assert!(!pick(4096, 8192, batch, int8) && !pick(2048, 14336, batch, int8));
                assert!(pick(8192, 8192, batch, int8));
                assert!(pick(8192, 28672, batch, int8));
                assert!(pick(11008, 4096, batch, int8));
                assert!(!pick(8192, 4096, batch, int8));
                assert!(!pick(4096, 4096, batch, int8));
                // Tiles of 64 rows at 4096 and 8192 rows only (of the LLM shapes).
                let t64 = |rows, cols| bulk_t64_preferred(rows, cols, batch, int8);
                assert!(t64(8192, 8192) && t64(8192, 28672) && t64(4096, 14336));
                assert!(!t64(11008, 4096) && !t64(14336, 4096) && !t64(28672, 8192));
                assert!(!t64(4032, 14336) && !t64(8193, 8192) && t64(4033, 14336));
            }
            assert!(!pick(28672, 8192, 1, int8));
            assert!(!pick(28672, 8192, 17, int8));
        }
    }

    #[test]
    fn programmatic_launch_only_for_a_full_wave() {
        // The default plans on 132 SMs, per tile of the default path.
        let plan = |rows: u32, cols: u32, int8: bool| {
            let g = bulk_geom_preferred(rows, cols, 16, int8, 132);
            bulk_plan(g, rows, if int8 { cols } else { 2 * cols }, 2, 132)
        };
        for (rows, cols, int8, grid, pdl) in [
            (4096, 14336, false, 128, true),
            (4096, 11008, false, 128, true),
            (4096, 11008, true, 128, true),
            (8192, 8192, false, 128, true),
            (8192, 28672, true, 128, true),
            (14336, 4096, false, 128, true),
            (14336, 4096, true, 128, true),
            (28672, 8192, true, 128, true),
            (28672, 8192, false, 112, false),
            (11008, 4096, false, 86, false),
            (11008, 4096, true, 86, false),
        ] {
            let p = plan(rows, cols, int8);
            assert_eq!(p.grid, grid, "{rows}x{cols} int8 {int8}");
            assert_eq!(
                bulk_pdl_preferred(&p, 132),
                pdl,
                "{rows}x{cols} int8 {int8}"
            );
        }
        // Tiles of 112 rows at 14336 rows, and 28672 for int8 only; whole tiles.
        for int8 in [false, true] {
            let g = |rows, cols| bulk_geom_preferred(rows, cols, 16, int8, 132);
            assert_eq!(g(14336, 4096), BULK_T112);
            assert_eq!(g(28672, 8192), if int8 { BULK_T112 } else { BULK_T128 });
            assert_eq!(g(11008, 4096), BULK_T128);
            assert_eq!(g(8192, 8192), BULK_T64);
            assert_eq!(g(4096, 14336), BULK_T64);
            assert!(!plan(14336, 4096, int8).shares_tiles());
        }
        // On fewer SMs the rule follows the wave: 14336 rows on 114 SMs take 128 rows (112
        // whole tiles, a full wave).
        assert_eq!(bulk_geom_preferred(14336, 4096, 16, false, 114), BULK_T128);
        // 90% to 100% of the SMs, never more than one block per SM.
        let g = |grid| bulk_plan_for(BULK_T128, 1 << 20, 4096, grid);
        assert!(bulk_pdl_preferred(&g(119), 132) && bulk_pdl_preferred(&g(132), 132));
        assert!(!bulk_pdl_preferred(&g(118), 132) && !bulk_pdl_preferred(&g(133), 132));
        assert!(bulk_pdl_preferred(&g(1), 1) && !bulk_pdl_preferred(&g(1), 2));
    }
}
