//! The lookup-table GEMV (`cmv_vq_lut_v{2,4,8}`): layout and geometry shared by the host and
//! the GPU, and a CPU model of the kernel's arithmetic.
//!
//! For `VQ<v, 8, 1>` (one stage of 256-entry codebooks) a codebook is shared by many rows, and
//! so is the input: the dot product of entry `e` with the `v` inputs of vector position `p`,
//! `T[e][p]`, is the same for every row of the tile. The kernel cuts the columns into *slabs*
//! of [`SLAB`] vector positions; for a slab of a tile it builds the table `T` (256 x 32 fp32
//! values, 4 FMAs each) in shared memory once, and every row of the tile then costs one table
//! lookup and one add per code instead of `v` codebook values and `v` FMAs.
//!
//! * **Codes** (rebuilt from the container's bit streams at upload, [`lut_codes`]): one byte
//!   per code; slab `j` of row `r` is 32 bytes at byte `(j * rows_pad + r) * 32`
//!   (`rows_pad = rows` rounded up to 32), **rotated by `r % 32`**: byte `q` holds the code of
//!   position `32 j + (q + r) % 32` (0 past the row's vectors and in padding rows).
//! * **Table**: entry `e` of the slab's table is a row of 64 fp32 words, positions 0..32 twice
//!   ([`table_word`]). Lane `l` of a warp holds row `r` with `r % 32 = l`; at byte `q` it reads
//!   word `e * 64 + l + q` = `T[e][(l + q) % 32]`. At every `q` the 32 lanes read 32 different
//!   banks (bank `(l + q) % 32`), whatever their codes: no bank conflicts, and the address is
//!   one `prmt` of the code word (`e << 8 | 4 l`) plus the constant `4 q`.
//! * **Work**: an *item* is one slab of one *chunk* of rows (`chunk_rows` rows of one tile
//!   row); a block of [`LUT_THREADS`] threads builds the item's table and runs its rows,
//!   [`LUT_PASS_ROWS`] per pass, one row per thread. Each item's row sums are added (fp32, `red.add`) into a
//!   zeroed workspace. When a block has run all its items it counts each into its chunk's
//!   counter (one fence per block, not per item); the block that counts a chunk's last slab
//!   in converts the chunk's sums to fp16 and zeroes them and the counter for the next
//!   launch.
//!
//! Blocks walk the items (`item += grid`), with the next item's codes, codebook and inputs
//! loaded while the current one runs.

use cmv_device::{DevPtr, DevPtrMut, KernelParams};

/// Vector positions per slab (one table per slab and tile).
pub const SLAB: usize = 32;
/// Entries of a codebook the table kernel takes (8-bit codes).
pub const LUT_ENTRIES: usize = 256;
/// Threads per block: 8 warps, one table entry per thread while building.
pub const LUT_THREADS: u32 = 256;
/// Rows per pass: one row per thread; the next pass's codes are loaded while this one runs.
/// (Two rows per thread took 96 registers and ran slower on an H100: docs/VQ.md.)
pub const LUT_PASS_ROWS: u32 = LUT_THREADS;
/// Bytes of the table in shared memory: 256 entries x 64 fp32 words.
pub const TABLE_BYTES: u32 = (LUT_ENTRIES * 64 * 4) as u32;
/// Vector sizes the table kernel is compiled for.
pub const LUT_VECS: [usize; 3] = [2, 4, 8];

/// Dynamic shared memory of `cmv_vq_lut_v{vec}`: the table and the codebook as fp32.
pub const fn lut_smem_bytes(vec: usize) -> u32 {
    TABLE_BYTES + (LUT_ENTRIES * vec * 4) as u32
}

/// The kernel for vector size `vec`, `None` where there is none.
pub fn lut_kernel(vec: usize) -> Option<&'static str> {
    match vec {
        2 => Some("cmv_vq_lut_v2"),
        4 => Some("cmv_vq_lut_v4"),
        8 => Some("cmv_vq_lut_v8"),
        _ => None,
    }
}

/// The table word that lane `lane` reads for code byte `q` holding entry `e`:
/// `e * 64 + lane + q`, i.e. `T[e][(lane + q) % 32]` (the table row holds its 32 positions
/// twice).
#[inline(always)]
pub const fn table_word(e: u32, lane: u32, q: u32) -> u32 {
    e * 64 + lane + q
}

/// Position (0..32 in the slab) of code byte `q` of row `row` in the rotated layout.
#[inline(always)]
pub const fn rotated_position(row: usize, q: usize) -> usize {
    (q + row) % SLAB
}

/// Parameters of `cmv_vq_lut_v{V}`: `y = W x` for one fp16 vector.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VqLutParams {
    /// The rotated byte codes ([`lut_codes`]), `slabs * rows_pad * 8` words.
    pub codes: DevPtr<u32>,
    /// The codebooks (fp16 bits) as stored, `tiles * 256 * V` values.
    pub codebooks: DevPtr<u16>,
    /// `cols` fp16 inputs.
    pub x: DevPtr<u16>,
    /// `rows` fp16 outputs.
    pub y: DevPtrMut<u16>,
    /// `rows` fp32 sums, zero before and after each launch.
    pub acc: DevPtrMut<f32>,
    /// `groups` counters, zero before and after each launch.
    pub counters: DevPtrMut<u32>,
    /// Rows.
    pub rows: u32,
    /// Columns.
    pub cols: u32,
    /// Rows rounded up to 32.
    pub rows_pad: u32,
    /// Slabs (`ceil(vecs / 32)`).
    pub slabs: u32,
    /// Rows per tile (a multiple of 32 unless there is one tile row).
    pub tile_rows: u32,
    /// Slabs per tile (tile vectors / 32, or all slabs when there is one tile column).
    pub slabs_per_tile: u32,
    /// Tiles across.
    pub tiles_c: u32,
    /// Rows per chunk (a multiple of 32).
    pub chunk_rows: u32,
    /// Chunks per tile row.
    pub chunks_per_tile: u32,
    /// Chunks (`tiles_r * chunks_per_tile`).
    pub groups: u32,
    /// Items (`groups * slabs`).
    pub items: u32,
    /// Zero.
    pub pad: u32,
}
const _: () = assert!(core::mem::size_of::<VqLutParams>() == 96);
// SAFETY: #[repr(C)], plain data (device addresses and integers), layout asserted above.
unsafe impl KernelParams for VqLutParams {}

/// Where item `item` lies: its chunk (`group`), slab, rows `row0..row_end` and tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Item {
    /// The chunk (counter index).
    pub group: u32,
    /// The slab.
    pub slab: u32,
    /// First row.
    pub row0: u32,
    /// One past the last row.
    pub row_end: u32,
    /// The tile (codebook).
    pub tile: u32,
}

impl VqLutParams {
    /// Item `item` (below `items`).
    #[inline(always)]
    pub fn item(&self, item: u32) -> Item {
        let group = item / self.slabs;
        let slab = item % self.slabs;
        let tr = group / self.chunks_per_tile;
        let c = group % self.chunks_per_tile;
        let tile_end = ((tr + 1) * self.tile_rows).min(self.rows);
        let row0 = tr * self.tile_rows + c * self.chunk_rows;
        Item {
            group,
            slab,
            row0,
            row_end: (row0 + self.chunk_rows).min(tile_end),
            tile: tr * self.tiles_c + slab / self.slabs_per_tile,
        }
    }

    /// Passes of [`LUT_PASS_ROWS`] rows per item.
    #[inline(always)]
    pub fn passes(&self) -> u32 {
        self.chunk_rows.div_ceil(LUT_PASS_ROWS)
    }
}

/// The table kernel's geometry for a matrix, or why it does not take it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LutGeometry {
    /// Rows rounded up to 32.
    pub rows_pad: usize,
    /// Slabs.
    pub slabs: usize,
    /// Rows per tile.
    pub tile_rows: usize,
    /// Slabs per tile.
    pub slabs_per_tile: usize,
    /// Tiles across.
    pub tiles_c: usize,
    /// Rows per chunk.
    pub chunk_rows: usize,
    /// Chunks per tile row.
    pub chunks_per_tile: usize,
    /// Chunks.
    pub groups: usize,
}

impl LutGeometry {
    /// The geometry for a matrix of `rows` rows and `vecs` vectors per row, 8-bit codes, one
    /// stage, tiles of `tile_rows x tile_vecs` vectors (`tiles_c` across; a tensor-wide
    /// codebook is one tile), `chunk` the rows per item wanted (rounded to 32, at most a
    /// tile's rows). `None` when the tiles do not fall on the kernel's grid: a tile's rows not
    /// a multiple of 32 with more than one tile row, or its vectors not a multiple of 32 with
    /// more than one tile column.
    pub fn new(
        rows: usize,
        vecs: usize,
        tile_rows: usize,
        tile_vecs: usize,
        tiles_c: usize,
        chunk: usize,
    ) -> Option<Self> {
        let tiles_r = rows.div_ceil(tile_rows);
        if (tiles_r > 1 && !tile_rows.is_multiple_of(32))
            || (tiles_c > 1 && !tile_vecs.is_multiple_of(SLAB))
            || rows == 0
            || vecs == 0
        {
            return None;
        }
        let slabs = vecs.div_ceil(SLAB);
        let slabs_per_tile = if tiles_c > 1 { tile_vecs / SLAB } else { slabs };
        let chunk_rows = chunk.div_ceil(32).max(1) * 32;
        let chunk_rows = chunk_rows.min(tile_rows.div_ceil(32) * 32);
        let chunks_per_tile = tile_rows.div_ceil(chunk_rows);
        Some(Self {
            rows_pad: rows.div_ceil(32) * 32,
            slabs,
            tile_rows,
            slabs_per_tile,
            tiles_c,
            chunk_rows,
            chunks_per_tile,
            groups: tiles_r * chunks_per_tile,
        })
    }

    /// Items (chunks x slabs).
    pub fn items(&self) -> usize {
        self.groups * self.slabs
    }

    /// Bytes of the rotated codes.
    pub fn code_bytes(&self) -> usize {
        self.slabs * self.rows_pad * SLAB
    }
}

#[cfg(not(target_arch = "nvptx64"))]
/// The rotated byte codes of the table kernel (see the module docs), as u32 words, from a
/// function giving the code of vector `i` of row `r` (called for `i < vecs` only).
pub fn lut_codes(
    rows: usize,
    vecs: usize,
    g: &LutGeometry,
    code: impl Fn(usize, usize) -> u8,
) -> Vec<u32> {
    let mut bytes = vec![0u8; g.code_bytes()];
    for r in 0..rows {
        for j in 0..g.slabs {
            let base = (j * g.rows_pad + r) * SLAB;
            for q in 0..SLAB {
                let i = j * SLAB + rotated_position(r, q);
                if i < vecs {
                    bytes[base + q] = code(r, i);
                }
            }
        }
    }
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[cfg(not(target_arch = "nvptx64"))]
/// The kernel's product on the CPU, step for step in fp32 (the table of each item, the
/// lookups through [`table_word`] and the `prmt` address, four partial sums per row in the
/// kernel's order; the fp32 atomics add the items of a row in slab order here, on the GPU in
/// any order). `codebooks` are fp16 bits as stored (`vec` values per entry); `x` has `cols`
/// fp16 values. Returns the fp32 sums before the fp16 rounding.
pub fn lut_model(
    p: &VqLutParams,
    vec: usize,
    codes: &[u32],
    codebooks: &[u16],
    x: &[u16],
) -> Vec<f32> {
    use cmv_device::{f16_to_f32, prmt};
    let mut acc = vec![0f32; p.rows as usize];
    let mut table = vec![0f32; LUT_ENTRIES * 64];
    for it in 0..p.items {
        let item = p.item(it);
        // The table: entry e, position l (lane), summed over the vector in order.
        for e in 0..LUT_ENTRIES {
            let cb = &codebooks[(item.tile as usize * LUT_ENTRIES + e) * vec..][..vec];
            for l in 0..SLAB {
                let mut t = 0f32;
                for (k, &c) in cb.iter().enumerate() {
                    let col = (item.slab as usize * SLAB + l) * vec + k;
                    let xv = if col < p.cols as usize {
                        f16_to_f32(x[col])
                    } else {
                        0.0
                    };
                    t = cmv_device::fma_f32(f16_to_f32(c), xv, t);
                }
                table[e * 64 + l] = t;
                table[e * 64 + 32 + l] = t;
            }
        }
        for r in item.row0..item.row_end {
            let lane = r % 32;
            let base = ((item.slab * p.rows_pad + r) * 8) as usize;
            let mut a = [0f32; 4];
            for q in 0..32u32 {
                let w = codes[base + (q / 4) as usize];
                let addr = prmt(w, 4 * lane, 0x5504 | ((q % 4) << 4)) + 4 * q;
                a[(q % 4) as usize] += table[(addr / 4) as usize];
            }
            acc[r as usize] += (a[0] + a[1]) + (a[2] + a[3]);
        }
    }
    acc
}

/// Parameters with null device pointers for a matrix of `rows x cols` under `g`: the
/// geometry fields of a launch, for [`lut_model`] and tests.
#[cfg(not(target_arch = "nvptx64"))]
pub fn model_params(rows: usize, cols: usize, g: &LutGeometry) -> VqLutParams {
    let (c, cb, x, y, a, n) = crate::null_ptrs();
    VqLutParams {
        codes: c,
        codebooks: cb,
        x,
        y,
        acc: a,
        counters: n,
        rows: rows as u32,
        cols: cols as u32,
        rows_pad: g.rows_pad as u32,
        slabs: g.slabs as u32,
        tile_rows: g.tile_rows as u32,
        slabs_per_tile: g.slabs_per_tile as u32,
        tiles_c: g.tiles_c as u32,
        chunk_rows: g.chunk_rows as u32,
        chunks_per_tile: g.chunks_per_tile as u32,
        groups: g.groups as u32,
        items: g.items() as u32,
        pad: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prmt_address_is_the_table_word() {
        for e in [0u32, 1, 7, 128, 255] {
            for lane in [0u32, 1, 17, 31] {
                for q in 0..32u32 {
                    let k = q % 4;
                    // A word whose byte k is e and other bytes noise.
                    let w = (0xa5a5_a5a5 & !(0xff << (8 * k))) | e << (8 * k);
                    let addr = cmv_device::prmt(w, 4 * lane, 0x5504 | (k << 4)) + 4 * q;
                    assert_eq!(addr, 4 * table_word(e, lane, q));
                    assert!(table_word(e, lane, q) % 64 == lane + q);
                }
            }
        }
    }

    #[test]
    fn geometry_refuses_off_grid_tiles_and_rounds_chunks() {
        // 256 x 256 tiles of 4-vectors: 64 vectors per tile, 2 slabs.
        let g = LutGeometry::new(1000, 1024, 256, 64, 16, 512).unwrap();
        assert_eq!((g.slabs, g.slabs_per_tile, g.chunk_rows), (32, 2, 256));
        assert_eq!((g.chunks_per_tile, g.groups, g.rows_pad), (1, 4, 1024));
        // A tile of 48 rows with several tile rows is off the grid; one tile row is fine.
        assert!(LutGeometry::new(100, 64, 48, 32, 2, 256).is_none());
        assert!(LutGeometry::new(40, 64, 40, 32, 2, 256).is_some());
        // 16 vectors per tile with several tile columns is off the grid.
        assert!(LutGeometry::new(64, 64, 64, 16, 4, 256).is_none());
        // Tensor scope: one tile; chunks of 100 rows round up to 128.
        let g = LutGeometry::new(1000, 70, 1000, 70, 1, 100).unwrap();
        assert_eq!((g.slabs, g.slabs_per_tile, g.chunk_rows), (3, 3, 128));
        assert_eq!((g.chunks_per_tile, g.groups, g.items()), (8, 8, 24));
    }

    #[test]
    fn items_cover_every_row_and_slab_once() {
        for &(rows, vecs, tr, tv, tc, chunk) in &[
            (1000usize, 70usize, 1000usize, 70usize, 1usize, 100usize),
            (1000, 1024, 256, 64, 16, 512),
            (97, 33, 97, 33, 1, 32),
            (512, 96, 64, 32, 3, 1024),
        ] {
            let g = LutGeometry::new(rows, vecs, tr, tv, tc, chunk).unwrap();
            let p = model_params(rows, vecs * 4, &g);
            let mut seen = vec![0u32; rows * g.slabs];
            for it in 0..p.items {
                let item = p.item(it);
                assert!(item.row0.is_multiple_of(32) && item.row0 < item.row_end);
                assert!(item.row_end - item.row0 <= p.chunk_rows);
                for r in item.row0..item.row_end {
                    seen[r as usize * g.slabs + item.slab as usize] += 1;
                    // The item's tile is the tile of every vector of this slab in this row.
                    let tile = (r as usize / tr) * tc + (item.slab as usize * SLAB) / tv.max(1);
                    if tc > 1 {
                        assert_eq!(item.tile as usize, tile);
                    } else {
                        assert_eq!(item.tile as usize, r as usize / tr);
                    }
                }
            }
            assert!(seen.iter().all(|&n| n == 1), "{rows}x{vecs}");
        }
    }
}
