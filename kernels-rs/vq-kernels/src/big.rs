//! The big-codebook table GEMV (`cmv_vq_big`): layout, geometry and parameters shared by the
//! host and the GPU, and a CPU model of the kernel's arithmetic.
//!
//! For `VQ<8, b, r>` with `b` up to 12 and one or two stages of per-tensor codebooks (AQLM-3 is
//! `VQ<8, 12, 2>`). A codebook of 4096 entries cannot be replicated per lane as the tensor-core
//! kernel does (`crate::mma`), and a product table over 32 vector positions, as the 8-bit table
//! kernel builds (`crate::lut`), would take 512 KiB. This kernel builds, per *slab* of
//! [`BIG_CODES`] codes of every row (4 positions x 2 stages, or 8 positions x 1 stage), the
//! eight tables `T[c][e]` = entry `e` of code `c`'s stage dotted with the 8 inputs of code `c`'s
//! position, in shared memory (128 KiB), **on the tensor cores**: one `mma.m16n8k16` gives 8
//! codes x 8 entries (the A operand's rows 0..8 hold each code's inputs in its stage's half of
//! K and zeros in the other; the B operand is 8 entries, both stages side by side along K), and
//! every lane stores its two outputs as one 8-byte word, conflict-free. Every code of every
//! row of the slab is then one table lookup and one add.
//!
//! * **Codes** ([`big_codes`]): each row's 8 codes of a slab are 96 bits, code `c` at bits
//!   `12 c ..`, as 3 words in 3 *planes* (word `k` of every row of every slab in plane `k`,
//!   `slabs x rows_pad` words, slab-major). A thread reads 4 consecutive rows at once: 16 bytes
//!   of each plane. Codes of `b < 12` bits are stored in 12 bits.
//! * **Codebook** ([`big_codebook`]): entry `e` as 32 bytes in the B fragment's order: for
//!   `t` in 0..4, the fp16 pair `2t, 2t + 1` of stage 0 then the same pair of stage 1 (zeros
//!   for one stage), so lane `(g, t)` reads its `b[0], b[1]` as 8 bytes.
//! * **Codebook cache** (VQ-LLM's, by level; every entry is read once per table built, so
//!   the levels differ in what a build costs, not in hit rates): warp `w` builds the tiles of
//!   8 entries `w, w + 16, ...`; the first `R` of them ([`BIG_REG_TILES`], a kernel per `R`)
//!   live in its registers for the whole launch (`R = 8`: 1024 entries, 16 registers); the
//!   next [`VqBigParams::cached`] entries are copied to shared memory once per block; the rest
//!   are read from global memory (through L1) at every build.
//! * **Work**: an *item* is one slab of a *chunk* of up to [`BIG_MAX_PASSES`] x
//!   [`BIG_PASS_ROWS`] rows. Block `i` of the grid runs the contiguous items
//!   `[i items / grid, (i + 1) items / grid)` (slab-major within a chunk), so consecutive items
//!   mostly share a chunk: a thread keeps its 16 rows' sums in registers across them and adds
//!   them (`red.global.add.f32`) into the fp32 workspace when the chunk changes. It then counts
//!   the items into the chunk's counter; the block that completes a chunk converts its sums to
//!   fp16 and zeroes them and the counter for the next launch. The next item's codes are loaded
//!   while the current one runs.

use cmv_device::{DevPtr, DevPtrMut, KernelParams};

/// Vector size the kernel takes.
pub const BIG_VEC: usize = 8;
/// Most code bits (entries `2^bits <= 4096`); codes are stored in 12 bits.
pub const BIG_MAX_BITS: u32 = 12;
/// Codes per row and slab (one table each).
pub const BIG_CODES: usize = 8;
/// Words of a row's codes per slab (8 codes of 12 bits).
pub const BIG_ROW_WORDS: usize = 3;
/// Threads per block.
pub const BIG_THREADS: u32 = 512;
/// Warps per block.
pub const BIG_WARPS: u32 = BIG_THREADS / 32;
/// Codebook entries per `mma` of a table build (its N).
pub const TILE_ENTRIES: u32 = 8;
/// The register levels of the codebook cache the kernels are compiled for: tiles per warp
/// kept in registers (`cmv_vq_big`, `cmv_vq_big_r8`).
pub const BIG_REG_TILES: [u32; 2] = [0, 8];
/// Consecutive rows a thread reads at once (one 16-byte load per plane).
pub const BIG_GROUP_ROWS: u32 = 4;
/// Rows per pass of a block over a slab.
pub const BIG_PASS_ROWS: u32 = BIG_THREADS * BIG_GROUP_ROWS;
/// Most passes per item (a chunk has at most `BIG_MAX_PASSES * BIG_PASS_ROWS` rows).
pub const BIG_MAX_PASSES: u32 = 2;
/// Words per table in shared memory: 4096 entries plus 8, so that the D fragment's 8-byte
/// stores of codes `g`, entries `2t, 2t + 1` (each half warp: codes 0..4 or 4..8) fall in 16
/// different bank pairs.
pub const TABLE_STRIDE: u32 = 4096 + 8;
/// Bytes of the eight tables.
pub const BIG_TABLE_BYTES: u32 = BIG_CODES as u32 * TABLE_STRIDE * 4;
/// Bytes of a codebook entry in fragment order (16 fp16 values: both stages).
pub const BIG_ENTRY_BYTES: u32 = 32;
/// Bytes after the tables and the cached entries: the block's chunk-complete flag.
pub const BIG_FLAG_BYTES: u32 = 16;

/// The kernel keeping `reg_tiles` tiles per warp in registers.
pub fn big_kernel(reg_tiles: u32) -> Option<&'static str> {
    match reg_tiles {
        0 => Some("cmv_vq_big"),
        8 => Some("cmv_vq_big_r8"),
        _ => None,
    }
}

/// Entries kept in registers with `reg_tiles` tiles per warp (the first ones).
pub const fn reg_entries(reg_tiles: u32) -> u32 {
    reg_tiles * BIG_WARPS * TILE_ENTRIES
}

/// Dynamic shared memory of `cmv_vq_big*` with `cached` entries in shared memory.
pub const fn big_smem_bytes(cached: u32) -> u32 {
    BIG_TABLE_BYTES + cached * BIG_ENTRY_BYTES + BIG_FLAG_BYTES
}

/// Vector positions per slab for `residuals` stages (1 or 2).
pub const fn positions_per_slab(residuals: u32) -> u32 {
    BIG_CODES as u32 / residuals
}

/// Parameters of `cmv_vq_big`: `y = W x` for one fp16 vector.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VqBigParams {
    /// The 3 code planes (`slabs * rows_pad` words each), [`big_codes`].
    pub codes: DevPtr<u32>,
    /// The codebook in fragment order ([`big_codebook`]), `entries * 8` words.
    pub cb: DevPtr<u32>,
    /// `cols` fp16 inputs.
    pub x: DevPtr<u16>,
    /// `rows` fp16 outputs.
    pub y: DevPtrMut<u16>,
    /// `rows` fp32 sums, zero before and after each launch.
    pub acc: DevPtrMut<f32>,
    /// `chunks` counters, zero before and after each launch.
    pub counters: DevPtrMut<u32>,
    /// Rows.
    pub rows: u32,
    /// Columns.
    pub cols: u32,
    /// Rows rounded up to [`BIG_GROUP_ROWS`].
    pub rows_pad: u32,
    /// Slabs (`ceil(vecs / positions_per_slab)`).
    pub slabs: u32,
    /// Residual stages (1 or 2).
    pub residuals: u32,
    /// Codebook entries (`2^bits`, a multiple of 16 up to 4096).
    pub entries: u32,
    /// Rows per chunk (a multiple of [`BIG_PASS_ROWS`], at most `BIG_MAX_PASSES` of them).
    pub chunk_rows: u32,
    /// Chunks (`ceil(rows / chunk_rows)`).
    pub chunks: u32,
    /// Items (`chunks * slabs`).
    pub items: u32,
    /// Entries kept in shared memory after those in registers (a multiple of 8; the
    /// register and shared entries at most `entries`).
    pub cached: u32,
}
const _: () = assert!(core::mem::size_of::<VqBigParams>() == 88);
// SAFETY: #[repr(C)], plain data (device addresses and integers), layout asserted above.
unsafe impl KernelParams for VqBigParams {}

/// Where item `item` lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BigItem {
    /// The chunk (counter index).
    pub chunk: u32,
    /// The slab.
    pub slab: u32,
    /// First row.
    pub row0: u32,
    /// One past the last row.
    pub row_end: u32,
}

impl VqBigParams {
    /// Item `item` (below `items`).
    #[inline(always)]
    pub fn item(&self, item: u32) -> BigItem {
        let chunk = item / self.slabs;
        let row0 = chunk * self.chunk_rows;
        BigItem {
            chunk,
            slab: item % self.slabs,
            row0,
            row_end: (row0 + self.chunk_rows).min(self.rows),
        }
    }

    /// The items block `block` of `grid` runs: `[block items / grid, (block + 1) items / grid)`.
    #[inline(always)]
    pub fn block_items(&self, block: u32, grid: u32) -> (u32, u32) {
        let n = self.items as u64;
        (
            (block as u64 * n / grid as u64) as u32,
            ((block as u64 + 1) * n / grid as u64) as u32,
        )
    }
}

/// The kernel's geometry for a matrix, or why it does not take it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BigGeometry {
    /// Rows rounded up to [`BIG_GROUP_ROWS`].
    pub rows_pad: usize,
    /// Slabs.
    pub slabs: usize,
    /// Residual stages.
    pub residuals: usize,
    /// Entries per codebook.
    pub entries: usize,
    /// Rows per chunk.
    pub chunk_rows: usize,
    /// Chunks.
    pub chunks: usize,
}

impl BigGeometry {
    /// The geometry for `rows` rows of `vecs` vectors of 8, `bits`-bit codes, `residuals`
    /// stages of one codebook per tensor; `None` unless `bits` is in 4..=12 and `residuals`
    /// 1 or 2. Chunks are as large as allowed ([`BIG_MAX_PASSES`] passes): the tables are
    /// built once per chunk and slab.
    pub fn new(rows: usize, vecs: usize, bits: u32, residuals: usize) -> Option<Self> {
        if !(4..=BIG_MAX_BITS).contains(&bits)
            || !(1..=2).contains(&residuals)
            || rows == 0
            || vecs == 0
            || rows > u32::MAX as usize / 2
        {
            return None;
        }
        let pass = BIG_PASS_ROWS as usize;
        let chunk_rows = rows.div_ceil(pass).min(BIG_MAX_PASSES as usize) * pass;
        Some(Self {
            rows_pad: rows.div_ceil(BIG_GROUP_ROWS as usize) * BIG_GROUP_ROWS as usize,
            slabs: vecs.div_ceil(positions_per_slab(residuals as u32) as usize),
            residuals,
            entries: 1 << bits,
            chunk_rows,
            chunks: rows.div_ceil(chunk_rows),
        })
    }

    /// Items (chunks x slabs).
    pub fn items(&self) -> usize {
        self.chunks * self.slabs
    }

    /// Words of the codes: the 3 planes.
    pub fn code_words(&self) -> usize {
        self.slabs * self.rows_pad * BIG_ROW_WORDS
    }

    /// Words of the codebook in fragment order.
    pub fn codebook_words(&self) -> usize {
        self.entries * 8
    }
}

/// Code `c` (0..8) of a row's slab, from its 3 words (`w[k]` bits `32 k ..` of the 96).
#[inline(always)]
pub const fn slab_code(w: [u32; 3], c: u32) -> u32 {
    let bit = 12 * c;
    let k = (bit / 32) as usize;
    let lo = w[k] >> (bit % 32);
    // A code straddles words 0-1 (c = 2) or 1-2 (c = 5).
    let hi = if bit % 32 > 20 {
        w[k + 1] << (32 - bit % 32)
    } else {
        0
    };
    (lo | hi) & 0xfff
}

/// The position (within the slab) and stage of code `c` (0..4) of a slab.
#[inline(always)]
pub const fn code_slot(c: u32, residuals: u32) -> (u32, u32) {
    (c / residuals, c % residuals)
}

#[cfg(not(target_arch = "nvptx64"))]
/// The codes of the kernel (see the module docs), from a function giving the code of stage
/// `s` of vector `i` of row `r` (called for `i < vecs` only).
pub fn big_codes(
    rows: usize,
    vecs: usize,
    g: &BigGeometry,
    code: impl Fn(usize, usize, usize) -> u32,
) -> Vec<u32> {
    let plane = g.slabs * g.rows_pad;
    let mut words = vec![0u32; BIG_ROW_WORDS * plane];
    let per = positions_per_slab(g.residuals as u32) as usize;
    for r in 0..rows {
        for j in 0..g.slabs {
            let mut q = 0u128;
            for c in 0..BIG_CODES {
                let (p, s) = code_slot(c as u32, g.residuals as u32);
                let i = j * per + p as usize;
                if i < vecs {
                    q |= u128::from(code(r, i, s as usize) & 0xfff) << (12 * c);
                }
            }
            for k in 0..BIG_ROW_WORDS {
                words[k * plane + j * g.rows_pad + r] = (q >> (32 * k)) as u32;
            }
        }
    }
    words
}

#[cfg(not(target_arch = "nvptx64"))]
/// The codebook in fragment order (see the module docs) from the stored one (fp16 bits, value
/// `j` of entry `e` of stage `s` at `(s * entries + e) * 8 + j`).
pub fn big_codebook(g: &BigGeometry, codebooks: &[u16]) -> Vec<u32> {
    let mut out = vec![0u32; g.codebook_words()];
    for e in 0..g.entries {
        for t in 0..4 {
            for s in 0..g.residuals {
                let v = &codebooks[(s * g.entries + e) * BIG_VEC + 2 * t..][..2];
                out[e * 8 + 2 * t + s] = u32::from(v[0]) | u32::from(v[1]) << 16;
            }
        }
    }
    out
}

/// Parameters with null device pointers for a matrix of `rows x cols` under `g`: the
/// geometry fields of a launch, for [`big_model`] and tests.
#[cfg(not(target_arch = "nvptx64"))]
pub fn model_params(rows: usize, cols: usize, g: &BigGeometry, cached: u32) -> VqBigParams {
    let (c, _, x, y, a, n) = crate::null_ptrs();
    // SAFETY: a null address, never dereferenced on the CPU.
    let cb = unsafe { DevPtr::from_addr(0) };
    VqBigParams {
        codes: c,
        cb,
        x,
        y,
        acc: a,
        counters: n,
        rows: rows as u32,
        cols: cols as u32,
        rows_pad: g.rows_pad as u32,
        slabs: g.slabs as u32,
        residuals: g.residuals as u32,
        entries: g.entries as u32,
        chunk_rows: g.chunk_rows as u32,
        chunks: g.chunks as u32,
        items: g.items() as u32,
        cached,
    }
}

#[cfg(not(target_arch = "nvptx64"))]
/// The kernel's product on the CPU, step for step in fp32: the B fragment of each slab as the
/// kernel builds it, the tables from the fragment-order codebook (each entry's dot product
/// summed in K order; the tensor cores add in their own order), the codes decoded by
/// [`slab_code`] from the 3 planes, a row's 8 lookups added in code order, the slabs in
/// order (the kernel adds a block's slabs in order and the blocks' sums in any order). `cb` is
/// [`big_codebook`]'s output, `x` has `cols` fp16 values. Returns the fp32 sums before the
/// fp16 rounding.
pub fn big_model(p: &VqBigParams, codes: &[u32], cb: &[u32], x: &[u16]) -> Vec<f32> {
    use cmv_device::f16_to_f32;
    let plane = (p.slabs * p.rows_pad) as usize;
    let mut acc = vec![0f32; p.rows as usize];
    let mut table = vec![0f32; BIG_CODES * TABLE_STRIDE as usize];
    let half = |w: u32, k: u32| f16_to_f32((w >> (16 * k)) as u16);
    for slab in 0..p.slabs {
        // A: row c = code c < 8, the x pair 2t, 2t+1 of the code's position in its stage's
        // half of K.
        let mut b = [[[0u32; 2]; 4]; BIG_CODES];
        for c in 0..BIG_CODES as u32 {
            let (j, s) = code_slot(c, p.residuals);
            for t in 0..4u32 {
                b[c as usize][t as usize][s as usize] =
                    x_pair(x, p.cols, slab * positions_per_slab(p.residuals) + j, t);
            }
        }
        for e in 0..p.entries as usize {
            for c in 0..BIG_CODES {
                let mut d = 0f32;
                for k in 0..16u32 {
                    // A(e, k): word 2t + k / 8 of the entry, half k % 2, t = (k % 8) / 2.
                    let t = (k % 8) / 2;
                    let a = half(cb[e * 8 + (2 * t + k / 8) as usize], k % 2);
                    let bw = b[c][t as usize][(k / 8) as usize];
                    d = cmv_device::fma_f32(a, half(bw, k % 2), d);
                }
                table[c * TABLE_STRIDE as usize + e] = d;
            }
        }
        for (r, a) in acc.iter_mut().enumerate() {
            let at = slab as usize * p.rows_pad as usize + r;
            let w = [codes[at], codes[plane + at], codes[2 * plane + at]];
            let mut sum = table[slab_code(w, 0) as usize];
            for c in 1..BIG_CODES as u32 {
                sum += table[(c * TABLE_STRIDE + slab_code(w, c)) as usize];
            }
            *a += sum;
        }
    }
    acc
}

#[cfg(not(target_arch = "nvptx64"))]
/// Inputs `8 pos + 2t` and `8 pos + 2t + 1` as one word (0 past the columns).
fn x_pair(x: &[u16], cols: u32, pos: u32, t: u32) -> u32 {
    let col = pos as usize * BIG_VEC + 2 * t as usize;
    let at = |k: usize| {
        if k < cols as usize {
            u32::from(x[k])
        } else {
            0
        }
    };
    at(col) | at(col + 1) << 16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_takes_8_vectors_of_up_to_12_bits_and_one_or_two_stages() {
        let g = BigGeometry::new(28672, 1024, 12, 2).unwrap();
        assert_eq!(
            (g.slabs, g.chunk_rows, g.chunks, g.rows_pad),
            (256, 4096, 7, 28672)
        );
        assert_eq!(reg_entries(8), 1024);
        assert_eq!(g.code_words() * 4, 28672 * 1024 * 2 * 12 / 8);
        let g = BigGeometry::new(1001, 17, 9, 1).unwrap();
        assert_eq!(
            (g.slabs, g.chunk_rows, g.chunks, g.rows_pad),
            (3, 2048, 1, 1004)
        );
        assert_eq!(g.entries, 512);
        assert!(BigGeometry::new(64, 8, 13, 2).is_none());
        assert!(BigGeometry::new(64, 8, 12, 3).is_none());
        assert!(BigGeometry::new(64, 8, 3, 1).is_none());
        assert!(BigGeometry::new(0, 8, 12, 2).is_none());
        // Smem: the tables and the 3072 entries past the registers fit one block of an H100
        // (227 KiB).
        assert!(big_smem_bytes(4096 - reg_entries(8)) <= 227 * 1024);
    }

    #[test]
    fn codes_round_trip_through_the_planes() {
        for (rows, vecs, r) in [(7usize, 9usize, 2usize), (13, 5, 1), (4, 4, 2), (3, 17, 1)] {
            let g = BigGeometry::new(rows, vecs, 12, r).unwrap();
            let code =
                |row: usize, i: usize, s: usize| ((row * 131 + i * 17 + s * 2049) % 4096) as u32;
            let words = big_codes(rows, vecs, &g, code);
            assert_eq!(words.len(), g.code_words());
            let plane = g.slabs * g.rows_pad;
            let per = positions_per_slab(r as u32) as usize;
            for row in 0..rows {
                for j in 0..g.slabs {
                    let at = j * g.rows_pad + row;
                    let w = [words[at], words[plane + at], words[2 * plane + at]];
                    for c in 0..8u32 {
                        let (p, s) = code_slot(c, r as u32);
                        let i = j * per + p as usize;
                        let want = if i < vecs {
                            code(row, i, s as usize)
                        } else {
                            0
                        };
                        assert_eq!(
                            slab_code(w, c),
                            want,
                            "{rows}x{vecs} r{r} row {row} slab {j} c {c}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn blocks_cover_every_item_once() {
        let g = BigGeometry::new(5000, 100, 12, 2).unwrap();
        let p = model_params(5000, 800, &g, 0);
        for grid in [1u32, 7, 132, 264, p.items, p.items + 3] {
            let mut next = 0;
            for b in 0..grid {
                let (a, e) = p.block_items(b, grid);
                assert_eq!(a, next);
                next = e;
            }
            assert_eq!(next, p.items);
        }
        let last = p.item(p.items - 1);
        assert_eq!((last.chunk, last.row_end), (g.chunks as u32 - 1, 5000));
    }
}
