//! The tensor-core GEMV (`cmv_vq_mma_v{2,4,8}_b{8,16}_r{2,4}`): layout, geometry and work split
//! shared by the host and the GPU, and a CPU model of the kernel's arithmetic.
//!
//! For `VQ<v, 8, 1>` (one stage of 256-entry codebooks) the kernel dequantizes each code
//! straight into the registers of an `mma.m16n8k16` and multiplies the inputs of up to 16
//! vectors (the A operand, `M` = the batch) by 8 weight rows (the B operand, `W^T`) over 16
//! columns per instruction: one launch for 1 to 16 vectors, the codes read once.
//!
//! * **Fragments and columns.** The MMA's K order is free as long as A and B agree: lane
//!   `(g, t)` (`g = lane / 4`, `t = lane % 4`) holds the K slots `2t, 2t+1` (`b[0]`) and
//!   `2t+8, 2t+9` (`b[1]`) of weight row `g`, and here those slots are four *consecutive*
//!   columns ([`frag_col`]). With `v = 4` they are one codebook entry: one 8-byte shared load
//!   gives `b[0], b[1]` in the registers the MMA reads, no moves. `v = 2`: two entries of 4
//!   bytes; `v = 8`: one 16-byte entry covers two K steps. The inputs of the same columns are
//!   the A registers `x[g][..2], x[g + 8][..2], x[g][2..], x[g + 8][2..]`: one 16-byte load.
//! * **Replicated table.** A slab of [`SLAB_COLS`] columns of a tile shares one codebook. It
//!   sits in shared memory as 256 entries of [`ENTRY_BYTES`] bytes, each entry's `2v` bytes
//!   repeated `64 / v` times ([`copies`]); lane `l` reads copy `l % copies` ([`lookup_offset`]),
//!   so the lanes of one shared-memory wavefront (32 lanes of 4 bytes, 16 of 8, 8 of 16) hit
//!   distinct banks whatever their codes. Two tables (double buffered): the next slab's table
//!   is written while slow warps still read the current one, one barrier per slab. They are
//!   interleaved in 64 KiB so that an address is one `prmt`: entry `c` of table `P` starts at
//!   [`entry_offset`]`(c) + 128 P`, and the codes are stored rotated right by one bit
//!   ([`stored_code`]), so `prmt` of the code byte into byte 1 over the lane's offset `lo + 128
//!   P` into byte 0 is the address: a `prmt` and the load per code.
//! * **Codes** (rebuilt from the container's bit streams at upload, [`mma_codes`]): one byte
//!   per code, grouped per *row group* (16 rows) and slab: lane `(g, t)`'s
//!   [`lane_code_bytes`] bytes at byte `((rg * slabs + slab) * 32 + lane) * lane_code_bytes`,
//!   first row `g`'s codes in column order, then row `g + 8`'s ([`code_vec`]); 0 past the
//!   matrix. A warp's part of a slab is 512 (`v = 4`) contiguous bytes.
//! * **Inputs**: per slab, staged in shared memory as fragments: fragment `(s, lane)` is the
//!   A registers of step `s` (columns `128 slab + frag_col(v, s, t) ..`, vectors `g` and
//!   `g + 8`, 0 past the batch and the columns), 16 bytes at `(s * 32 + lane) * 16`: each lane's
//!   A registers are one conflict-free load. The kernels for at most 8 vectors (`_b8`) store
//!   only vector `g`'s 8 bytes (`a[0]`, `a[2]`) at `(s * 32 + lane) * 8`.
//! * **Work.** A block (8 warps) owns *row blocks* of `8 R` row groups (`128 R` rows, warp `w`
//!   takes groups `w R .. w R + R`, two MMAs of 8 rows per group and step). A *unit* is one slab of one row block; a block runs an
//!   equal contiguous range of units ([`VqMmaParams::unit_range`], row-block-major), keeping
//!   its sums in registers while the row block stays the same. When it leaves a row block it
//!   adds its sums into the fp32 workspace (`red.add`) and counts its slabs into the row
//!   block's counter; the block that completes the count converts the row block to fp16 and
//!   zeroes its sums and counter for the next launch.

use cmv_device::{DevPtr, DevPtrMut, KernelParams};

/// Columns per slab (8 MMA steps of 16).
pub const SLAB_COLS: usize = 128;
/// MMA K steps per slab.
pub const STEPS: usize = SLAB_COLS / 16;
/// Entries of a codebook the kernel takes (8-bit codes).
pub const MMA_ENTRIES: usize = 256;
/// Bytes of one table entry in shared memory (its value repeated [`copies`] times).
pub const ENTRY_BYTES: u32 = 128;
/// Bytes of the two interleaved tables: 256 entries x [`ENTRY_BYTES`] x 2.
pub const MMA_TABLES_BYTES: u32 = 2 * MMA_ENTRIES as u32 * ENTRY_BYTES;

/// Where entry `code` of table 0 starts: `(code >> 1) << 8 | (code & 1) << 15` (table 1: 128
/// bytes on). This is `stored_code(code) << 8`.
#[inline(always)]
pub const fn entry_offset(code: u32) -> u32 {
    (code >> 1) << 8 | (code & 1) << 15
}

/// A code as stored in the kernel's layout: rotated right by one bit.
#[inline(always)]
pub const fn stored_code(code: u8) -> u8 {
    code.rotate_right(1)
}

/// The `prmt` selector that puts byte `k` of the code word into byte 1 over byte 0 of the
/// lane offset, zeros above.
#[inline(always)]
pub const fn lookup_selector(k: u32) -> u32 {
    0x5504 | (k << 4)
}
/// Threads per block: 8 warps; one table entry per thread while building.
pub const MMA_THREADS: u32 = 256;
/// Warps per block.
pub const MMA_WARPS: u32 = MMA_THREADS / 32;
/// Vector sizes the kernel is compiled for.
pub const MMA_VECS: [usize; 3] = [2, 4, 8];
/// Row groups (16 rows) per warp the kernel is compiled for (`R`).
pub const MMA_ROW_GROUPS: [usize; 2] = [2, 4];
/// Most vectors per launch (the MMA's `M`).
pub const MMA_MAX_BATCH: u32 = 16;
/// Bytes of staged inputs per buffer: 8 steps x 32 lanes x 16 bytes.
pub const X_STAGE_BYTES: u32 = STEPS as u32 * 32 * 16;

/// Copies of each entry in a table row: `64 / v` (32, 16 or 8 for `v` = 2, 4, 8).
#[inline(always)]
pub const fn copies(vec: usize) -> u32 {
    (64 / vec) as u32
}

/// Byte offset of lane `lane`'s copy inside a table entry.
#[inline(always)]
pub const fn lookup_offset(vec: usize, lane: u32) -> u32 {
    (lane % copies(vec)) * 2 * vec as u32
}

/// Code bytes of one lane per row group and slab: `2 * 32 / v` (rows `g` and `g + 8`).
#[inline(always)]
pub const fn lane_code_bytes(vec: usize) -> usize {
    64 / vec
}

/// First of the four consecutive columns (inside the slab) that lane `t = lane % 4` holds at
/// K step `s` (the K slots `2t, 2t+1, 2t+8, 2t+9`).
#[inline(always)]
pub const fn frag_col(vec: usize, s: usize, t: usize) -> usize {
    if vec == 8 {
        32 * (s / 2) + 8 * t + 4 * (s % 2)
    } else {
        16 * s + 4 * t
    }
}

/// Vector (inside the slab) of code `c` (0..32 / v) of a row in lane `t`'s code bytes.
#[inline(always)]
pub const fn code_vec(vec: usize, t: usize, c: usize) -> usize {
    match vec {
        2 => 8 * (c / 2) + 2 * t + c % 2,
        _ => 4 * c + t,
    }
}

/// Dynamic shared memory of the kernel: two tables, two input stages and 16 bytes for the
/// block's flag.
pub const MMA_SMEM_BYTES: u32 = MMA_TABLES_BYTES + 2 * X_STAGE_BYTES + 16;

/// The kernel for vector size `vec`, `batch` vectors (1..=8 or 9..=16: a kernel for at most 8
/// stages half the inputs) and `r` row groups per warp.
pub fn mma_kernel(vec: usize, batch: usize, r: usize) -> Option<&'static str> {
    Some(match (vec, batch > 8, r) {
        _ if batch == 0 || batch > MMA_MAX_BATCH as usize => return None,
        (2, false, 2) => "cmv_vq_mma_v2_b8_r2",
        (4, false, 2) => "cmv_vq_mma_v4_b8_r2",
        (8, false, 2) => "cmv_vq_mma_v8_b8_r2",
        (2, false, 4) => "cmv_vq_mma_v2_b8_r4",
        (4, false, 4) => "cmv_vq_mma_v4_b8_r4",
        (8, false, 4) => "cmv_vq_mma_v8_b8_r4",
        (2, true, 2) => "cmv_vq_mma_v2_b16_r2",
        (4, true, 2) => "cmv_vq_mma_v4_b16_r2",
        (8, true, 2) => "cmv_vq_mma_v8_b16_r2",
        (2, true, 4) => "cmv_vq_mma_v2_b16_r4",
        (4, true, 4) => "cmv_vq_mma_v4_b16_r4",
        (8, true, 4) => "cmv_vq_mma_v8_b16_r4",
        _ => return None,
    })
}

/// Parameters of `cmv_vq_mma_v{V}_b{8,16}_r{R}`: `y = W x` for `batch` fp16 vectors.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VqMmaParams {
    /// The byte codes ([`mma_codes`]), `MmaGeometry::code_bytes / 4` words, 16-byte aligned.
    pub codes: DevPtr<u32>,
    /// The codebooks (fp16 bits) as stored, `tiles * 256 * V` values, 16-byte aligned.
    pub codebooks: DevPtr<u16>,
    /// `batch x cols` fp16 inputs, 8-byte aligned.
    pub x: DevPtr<u16>,
    /// `batch x rows` fp16 outputs.
    pub y: DevPtrMut<u16>,
    /// `batch x rows` fp32 sums, zero before and after each launch.
    pub acc: DevPtrMut<f32>,
    /// `row_blocks` counters, zero before and after each launch.
    pub counters: DevPtrMut<u32>,
    /// Rows.
    pub rows: u32,
    /// Columns.
    pub cols: u32,
    /// Vectors (1..=16).
    pub batch: u32,
    /// Slabs (`ceil(cols / 128)`).
    pub slabs: u32,
    /// Row blocks (`ceil(rows / 128 R)`).
    pub row_blocks: u32,
    /// Row blocks per tile row (all of them when there is one tile row).
    pub tile_blocks: u32,
    /// Slabs per tile column (all of them when there is one tile column).
    pub slabs_per_tile: u32,
    /// Tiles across.
    pub tiles_c: u32,
    /// Units (`row_blocks * slabs`).
    pub units: u32,
    /// Zero.
    pub pad: u32,
}
const _: () = assert!(core::mem::size_of::<VqMmaParams>() == 88);
// SAFETY: #[repr(C)], plain data (device addresses and integers), layout asserted above.
unsafe impl KernelParams for VqMmaParams {}

impl VqMmaParams {
    /// The units of block `block` of `grid`: an equal contiguous share, `start..end`.
    #[inline(always)]
    pub fn unit_range(&self, block: u32, grid: u32) -> (u32, u32) {
        crate::block_share(block, grid, self.units)
    }

    /// Row block and slab of unit `u`.
    #[inline(always)]
    pub fn unit(&self, u: u32) -> (u32, u32) {
        (u / self.slabs, u % self.slabs)
    }

    /// The tile (codebook) of a row block and slab.
    #[inline(always)]
    pub fn tile(&self, rb: u32, slab: u32) -> u32 {
        (rb / self.tile_blocks) * self.tiles_c + slab / self.slabs_per_tile
    }
}

/// A walk over consecutive units without divisions: unit `u`, its row block, slab and tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cursor {
    /// The unit.
    pub u: u32,
    /// Its row block.
    pub rb: u32,
    /// Its slab.
    pub slab: u32,
    /// Row block inside the tile row.
    rbt: u32,
    /// Tile row.
    tr: u32,
    /// Slab inside the tile column.
    sit: u32,
    /// Tile column.
    tc: u32,
}

impl Cursor {
    /// The cursor at unit `u` (below `units`).
    #[inline(always)]
    pub fn new(p: &VqMmaParams, u: u32) -> Self {
        let (rb, slab) = p.unit(u);
        Self {
            u,
            rb,
            slab,
            rbt: rb % p.tile_blocks,
            tr: rb / p.tile_blocks,
            sit: slab % p.slabs_per_tile,
            tc: slab / p.slabs_per_tile,
        }
    }

    /// The tile (codebook) of the unit.
    #[inline(always)]
    pub fn tile(&self, p: &VqMmaParams) -> u32 {
        self.tr * p.tiles_c + self.tc
    }

    /// Moves to the next unit.
    #[inline(always)]
    pub fn advance(&mut self, p: &VqMmaParams) {
        self.u += 1;
        self.slab += 1;
        self.sit += 1;
        if self.sit == p.slabs_per_tile {
            self.sit = 0;
            self.tc += 1;
        }
        if self.slab == p.slabs {
            self.slab = 0;
            self.sit = 0;
            self.tc = 0;
            self.rb += 1;
            self.rbt += 1;
            if self.rbt == p.tile_blocks {
                self.rbt = 0;
                self.tr += 1;
            }
        }
    }
}

/// The kernel's geometry for a matrix, or why it does not take it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmaGeometry {
    /// Vector size (2, 4 or 8).
    pub vec: usize,
    /// Row groups per warp (`R`, 2 or 4).
    pub r: usize,
    /// Row blocks of `128 R` rows.
    pub row_blocks: usize,
    /// Slabs of 128 columns.
    pub slabs: usize,
    /// Row blocks per tile row.
    pub tile_blocks: usize,
    /// Slabs per tile column.
    pub slabs_per_tile: usize,
    /// Tiles across.
    pub tiles_c: usize,
}

impl MmaGeometry {
    /// The geometry for `rows x cols` weights in vectors of `vec`, tiles of `tile_rows x
    /// tile_cols` weights (`tiles_c` across; a tensor-wide codebook is one tile), `r` row
    /// groups per warp. `None` when the kernel does not take it: `vec` not 2, 4 or 8, `r` not
    /// 2 or 4, empty, more than one tile row with a tile's rows not a multiple of `128 r`, or
    /// more than one tile column with a tile's columns not a multiple of 128.
    pub fn new(
        rows: usize,
        cols: usize,
        vec: usize,
        (tile_rows, tile_cols, tiles_c): (usize, usize, usize),
        r: usize,
    ) -> Option<Self> {
        if !MMA_VECS.contains(&vec) || !MMA_ROW_GROUPS.contains(&r) || rows == 0 || cols == 0 {
            return None;
        }
        let block_rows = 128 * r;
        let tiles_r = rows.div_ceil(tile_rows.max(1));
        if (tiles_r > 1 && !tile_rows.is_multiple_of(block_rows))
            || (tiles_c > 1 && !tile_cols.is_multiple_of(SLAB_COLS))
        {
            return None;
        }
        let row_blocks = rows.div_ceil(block_rows);
        let slabs = cols.div_ceil(SLAB_COLS);
        Some(Self {
            vec,
            r,
            row_blocks,
            slabs,
            tile_blocks: if tiles_r > 1 {
                tile_rows / block_rows
            } else {
                row_blocks
            },
            slabs_per_tile: if tiles_c > 1 {
                tile_cols / SLAB_COLS
            } else {
                slabs
            },
            tiles_c,
        })
    }

    /// Row groups (16 rows), a whole number of row blocks.
    pub fn row_groups(&self) -> usize {
        self.row_blocks * MMA_WARPS as usize * self.r
    }

    /// Units (row blocks x slabs).
    pub fn units(&self) -> usize {
        self.row_blocks * self.slabs
    }

    /// Bytes of the codes.
    pub fn code_bytes(&self) -> usize {
        self.row_groups() * self.slabs * 32 * lane_code_bytes(self.vec)
    }
}

#[cfg(not(target_arch = "nvptx64"))]
/// The kernel's byte codes (see the module docs), as u32 words, from a function giving the
/// code of vector `i` of row `r` (called for `r < rows`, `i < vecs` only).
pub fn mma_codes(
    rows: usize,
    vecs: usize,
    g: &MmaGeometry,
    code: impl Fn(usize, usize) -> u8,
) -> Vec<u32> {
    let v = g.vec;
    let lcb = lane_code_bytes(v);
    let per_row = 32 / v;
    let mut bytes = vec![0u8; g.code_bytes()];
    for rg in 0..g.row_groups() {
        for slab in 0..g.slabs {
            for lane in 0..32 {
                let base = ((rg * g.slabs + slab) * 32 + lane) * lcb;
                for h in 0..2 {
                    let r = rg * 16 + lane / 4 + 8 * h;
                    if r >= rows {
                        continue;
                    }
                    for c in 0..per_row {
                        let i = slab * (SLAB_COLS / v) + code_vec(v, lane % 4, c);
                        if i < vecs {
                            bytes[base + h * per_row + c] = stored_code(code(r, i));
                        }
                    }
                }
            }
        }
    }
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Parameters with null device pointers for `rows x cols` and `batch` vectors under `g`: the
/// geometry fields of a launch, for [`mma_model`] and tests.
#[cfg(not(target_arch = "nvptx64"))]
pub fn mma_model_params(rows: usize, cols: usize, batch: usize, g: &MmaGeometry) -> VqMmaParams {
    let (c, cb, x, y, a, n) = crate::null_ptrs();
    VqMmaParams {
        codes: c,
        codebooks: cb,
        x,
        y,
        acc: a,
        counters: n,
        rows: rows as u32,
        cols: cols as u32,
        batch: batch as u32,
        slabs: g.slabs as u32,
        row_blocks: g.row_blocks as u32,
        tile_blocks: g.tile_blocks as u32,
        slabs_per_tile: g.slabs_per_tile as u32,
        tiles_c: g.tiles_c as u32,
        units: g.units() as u32,
        pad: 0,
    }
}

#[cfg(not(target_arch = "nvptx64"))]
/// The kernel's product on the CPU, step for step: the replicated table and the staged input
/// fragments written byte for byte as the kernel writes shared memory, every code looked up
/// at the kernel's address, the A (inputs) and B (weights) registers of each lane placed in
/// the 16 x 16 and 16 x 8 tiles by the PTX ISA's fragment layout, and the tiles multiplied
/// (fp32 sums in K order; the tensor core adds in its own order). `grid` blocks split the
/// units as the kernel does. Returns the fp32 sums (`batch x rows`) before the fp16 rounding.
pub fn mma_model(
    p: &VqMmaParams,
    g: &MmaGeometry,
    grid: u32,
    codes: &[u32],
    codebooks: &[u16],
    x: &[u16],
) -> Vec<f32> {
    use cmv_device::f16_to_f32;
    let v = g.vec;
    let (rows, cols, batch) = (p.rows as usize, p.cols as usize, p.batch as usize);
    let code_bytes: Vec<u8> = codes.iter().flat_map(|w| w.to_le_bytes()).collect();
    let mut acc = vec![0f32; batch * rows];
    let mut table = vec![0u8; MMA_TABLES_BYTES as usize];
    let mut stage = vec![0u8; X_STAGE_BYTES as usize];
    let half = |b: &[u8], at: usize| f16_to_f32(u16::from_le_bytes([b[at], b[at + 1]]));
    // K slot of half i (0..4) of a lane's four columns: 2t, 2t+1, 2t+8, 2t+9.
    let slot = |t: usize, i: usize| if i < 2 { 2 * t + i } else { 2 * t + 6 + i };
    for block in 0..grid {
        let (u0, u1) = p.unit_range(block, grid);
        for u in u0..u1 {
            let (rb, slab) = p.unit(u);
            let par = (u - u0) % 2;
            // The table, as thread `e` writes it: 8 stores of 16 bytes, rotated by `e % 8`.
            let tile = p.tile(rb, slab) as usize;
            for e in 0..MMA_ENTRIES {
                let val: Vec<u8> = codebooks[(tile * MMA_ENTRIES + e) * v..][..v]
                    .iter()
                    .flat_map(|h| h.to_le_bytes())
                    .collect();
                for k in 0..8 {
                    let at = (entry_offset(e as u32) + 128 * par) as usize + ((k + e) % 8) * 16;
                    for (i, b) in table[at..at + 16].iter_mut().enumerate() {
                        *b = val[i % (2 * v)];
                    }
                }
            }
            // The input fragments: thread (s, lane) writes [x_g lo, x_g+8 lo, x_g hi, x_g+8 hi].
            for f in 0..STEPS * 32 {
                let (s, lane) = (f / 32, f % 32);
                let col = slab as usize * SLAB_COLS + frag_col(v, s, lane % 4);
                for (q, (n, i0)) in [(0, 0), (8, 0), (0, 2), (8, 2)].into_iter().enumerate() {
                    let n = lane / 4 + n;
                    for i in i0..i0 + 2 {
                        let h = if n < batch && col + i < cols {
                            x[n * cols + col + i]
                        } else {
                            0
                        };
                        let at = f * 16 + 4 * q + 2 * (i - i0);
                        stage[at..at + 2].copy_from_slice(&h.to_le_bytes());
                    }
                }
            }
            for w in 0..MMA_WARPS as usize {
                for r in 0..g.r {
                    let rg = (rb as usize * MMA_WARPS as usize + w) * g.r + r;
                    for s in 0..STEPS {
                        let mut a = [[0f32; 16]; 16];
                        let mut b = [[[0f32; 8]; 16]; 2];
                        for lane in 0..32usize {
                            let (gi, t) = (lane / 4, lane % 4);
                            let lcb = lane_code_bytes(v);
                            let cbase = ((rg * g.slabs + slab as usize) * 32 + lane) * lcb;
                            let f = (s * 32 + lane) * 16;
                            // a[0] = A(g, 2t..), a[1] = A(g+8, 2t..), a[2] = A(g, 2t+8..),
                            // a[3] = A(g+8, 2t+8..).
                            for q in 0..4 {
                                for i in 0..2 {
                                    let m = gi + 8 * (q % 2);
                                    a[m][slot(t, 2 * (q / 2) + i)] =
                                        half(&stage, f + 4 * q + 2 * i);
                                }
                            }
                            // b[0] = B(2t.., g), b[1] = B(2t+8.., g): the row's four columns,
                            // one, two or half an entry.
                            for (h, bh) in b.iter_mut().enumerate() {
                                let per = 32 / v;
                                let (c, part, n) = match v {
                                    2 => (2 * s, 0, 2),
                                    4 => (s, 0, 1),
                                    _ => (s / 2, 8 * (s % 2), 1),
                                };
                                let len = 8 / n;
                                let mut reg = [0u8; 8];
                                for j in 0..n {
                                    let at = cbase + h * per + c + j;
                                    let (w, k) = (&code_bytes[at / 4 * 4..][..4], at % 4);
                                    let w = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                                    let lo = lookup_offset(v, lane as u32) + 128 * par;
                                    let sel = lookup_selector(k as u32);
                                    let addr = cmv_device::prmt(w, lo, sel);
                                    let src = addr as usize + part;
                                    reg[j * len..][..len].copy_from_slice(&table[src..][..len]);
                                }
                                for i in 0..4 {
                                    bh[slot(t, i)][gi] = half(&reg, 2 * i);
                                }
                            }
                        }
                        for (h, bh) in b.iter().enumerate() {
                            for n in 0..8 {
                                let row = rg * 16 + 8 * h + n;
                                for (m, am) in a.iter().enumerate().take(batch) {
                                    let d =
                                        am.iter().zip(bh).fold(0f32, |d, (&av, bk)| d + av * bk[n]);
                                    if row < rows {
                                        acc[m * rows + row] += d;
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_lane_holds_four_consecutive_columns_and_the_slab_once() {
        for v in MMA_VECS {
            let mut seen = [0u32; SLAB_COLS];
            for s in 0..STEPS {
                for t in 0..4 {
                    let c = frag_col(v, s, t);
                    assert!(c.is_multiple_of(4) && c + 4 <= SLAB_COLS);
                    for k in 0..4 {
                        seen[c + k] += 1;
                    }
                }
            }
            assert!(seen.iter().all(|&n| n == 1), "v = {v}");
            // Code c of lane t covers the columns that lane meets, in order.
            let per = 32 / v;
            let mut vecs = [0u32; SLAB_COLS / 2];
            for t in 0..4 {
                let mut cols = Vec::new();
                for s in 0..STEPS {
                    let c = frag_col(v, s, t);
                    cols.extend(c..c + 4);
                }
                let from_codes: Vec<usize> = (0..per)
                    .flat_map(|c| {
                        let i = code_vec(v, t, c);
                        vecs[i] += 1;
                        i * v..i * v + v
                    })
                    .collect();
                assert_eq!(cols, from_codes, "v = {v}, t = {t}");
            }
            assert!(vecs[..SLAB_COLS / v].iter().all(|&n| n == 1));
        }
    }

    #[test]
    fn the_prmt_address_is_the_entry_and_the_two_tables_interleave() {
        let mut seen = vec![0u8; MMA_TABLES_BYTES as usize];
        for c in 0..=255u8 {
            for k in 0..4u32 {
                // A word with the stored code in byte k and noise elsewhere.
                let w = (0x5a5a_5a5a & !(0xff << (8 * k))) | u32::from(stored_code(c)) << (8 * k);
                for lo in [0u32, 8, 127, 128, 255] {
                    let a = cmv_device::prmt(w, lo, lookup_selector(k));
                    assert_eq!(a, entry_offset(u32::from(c)) + lo);
                }
            }
            for par in 0..2 {
                let at = (entry_offset(u32::from(c)) + 128 * par) as usize;
                for b in &mut seen[at..at + ENTRY_BYTES as usize] {
                    *b += 1;
                }
            }
        }
        assert!(seen.iter().all(|&n| n == 1));
    }

    #[test]
    fn lanes_of_a_wavefront_read_distinct_banks() {
        for v in MMA_VECS {
            // Lanes per wavefront: 128 bytes over 2v-byte loads.
            let per = 128 / (2 * v) as u32;
            for first in (0..32).step_by(per as usize) {
                let mut banks = [0u32; 32];
                for lane in first..first + per {
                    let o = lookup_offset(v, lane);
                    assert!(o + 2 * v as u32 <= ENTRY_BYTES);
                    for w in 0..(v as u32 / 2) {
                        banks[((o / 4 + w) % 32) as usize] += 1;
                    }
                }
                assert!(banks.iter().all(|&n| n == 1), "v = {v}");
            }
        }
    }

    #[test]
    fn geometry_takes_the_presets_and_refuses_off_grid_tiles() {
        // gptvq2: 512 x 128 tiles.
        let g = MmaGeometry::new(11008, 4096, 4, (512, 128, 32), 4).unwrap();
        assert_eq!(
            (g.row_blocks, g.slabs, g.tile_blocks, g.slabs_per_tile),
            (22, 32, 1, 1)
        );
        let g = MmaGeometry::new(11008, 4096, 4, (512, 128, 32), 2).unwrap();
        assert_eq!((g.row_blocks, g.tile_blocks), (43, 2));
        // 256 x 256 tiles: rows off the grid for R = 4.
        assert!(MmaGeometry::new(4096, 4096, 4, (256, 256, 16), 4).is_none());
        let g = MmaGeometry::new(4096, 4096, 4, (256, 256, 16), 2).unwrap();
        assert_eq!((g.tile_blocks, g.slabs_per_tile), (1, 2));
        // One tile row or column of any size; per tensor.
        let g = MmaGeometry::new(100, 300, 2, (100, 300, 1), 4).unwrap();
        assert_eq!(
            (g.row_blocks, g.slabs, g.tile_blocks, g.slabs_per_tile),
            (1, 3, 1, 3)
        );
        assert_eq!(g.code_bytes(), 32 * 3 * 32 * 32);
        assert!(MmaGeometry::new(100, 300, 4, (100, 64, 5), 4).is_none());
        assert!(MmaGeometry::new(100, 300, 3, (100, 300, 1), 4).is_none());
        assert!(MmaGeometry::new(100, 300, 4, (100, 300, 1), 3).is_none());
    }

    #[test]
    fn blocks_split_the_units_exactly() {
        let g = MmaGeometry::new(4096, 14336, 4, (512, 128, 112), 4).unwrap();
        let p = mma_model_params(4096, 14336, 16, &g);
        for grid in [1u32, 7, 264, 896, 900] {
            let mut next = 0;
            let mut most = 0;
            for b in 0..grid {
                let (s, e) = p.unit_range(b, grid);
                assert_eq!(s, next);
                next = e;
                most = most.max(e - s);
            }
            assert_eq!(next, p.units);
            assert!(most <= p.units.div_ceil(grid));
        }
        // The cursor walks the units as unit() and tile() name them.
        for g in [
            g,
            MmaGeometry::new(3000, 1000, 4, (512, 256, 4), 2).unwrap(),
            MmaGeometry::new(3000, 1000, 4, (3000, 1000, 1), 4).unwrap(),
        ] {
            let p = mma_model_params(3000, 1000, 1, &g);
            for start in [0, 1, 7] {
                let mut c = Cursor::new(&p, start);
                for u in start..p.units {
                    let (rb, slab) = p.unit(u);
                    assert_eq!(
                        (c.u, c.rb, c.slab, c.tile(&p)),
                        (u, rb, slab, p.tile(rb, slab))
                    );
                    c.advance(&p);
                }
            }
        }
        // Units walk the slabs of a row block, then the next row block.
        assert_eq!(p.unit(113), (1, 1));
        assert_eq!(p.tile(1, 1), 113);
    }
}
