//! [`VqConfig`] (`VQ<v, b, r>` and the scope of a codebook) and the [`Geometry`] of a matrix
//! under it: tiles, codebook and code offsets, part lengths, bits per weight.

use cmv_format::FormatError;

use crate::error::{Result, VqError};
use crate::matrix::NAME;

/// The largest side (rows, columns, tile sides) this build takes.
pub const MAX_SIDE: usize = 1 << 30;

/// Which weights share a codebook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// One codebook (per residual stage) for the whole matrix.
    Tensor,
    /// One codebook (per residual stage) per tile of `rows x cols` weights, tiles in row-major
    /// order; partial tiles at the bottom and right edges get their own codebooks. `cols` must
    /// be a multiple of the vector size, so that no vector crosses a tile.
    Tile {
        /// Rows per tile.
        rows: usize,
        /// Columns per tile (a multiple of the vector size).
        cols: usize,
    },
}

/// A `VQ<v, b, r>` configuration: vectors of `vec` consecutive weights of a row, codebooks of
/// `2^bits` fp16 entries, `residuals` codebooks whose selected entries are summed, and the
/// scope of a codebook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VqConfig {
    /// Vector size `v` (along the columns), 1..=16.
    pub vec: usize,
    /// Bits per code `b` (codebooks of `2^b` entries), 1..=16.
    pub bits: u32,
    /// Residual codebooks `r`, 1..=4.
    pub residuals: usize,
    /// Which weights share a codebook.
    pub scope: Scope,
}

impl Default for VqConfig {
    fn default() -> Self {
        Self::gptvq2()
    }
}

impl VqConfig {
    /// GPTVQ-2: `VQ<4, 8, 1>`, one codebook per tile of 512 rows x 128 columns (2.25 bits
    /// per weight). VQ-LLM's tiles are 256 x 256: the same 65536 weights and bits per
    /// codebook, but a 128-column tile is one slab of the table kernel, so each table serves
    /// 512 rows instead of 256 (`docs/VQ.md`); [`VqConfig::gptvq2_256`] is the paper's tile.
    pub const fn gptvq2() -> Self {
        Self {
            vec: 4,
            bits: 8,
            residuals: 1,
            scope: Scope::Tile {
                rows: 512,
                cols: 128,
            },
        }
    }

    /// GPTVQ-2 with VQ-LLM's tiles of 256 x 256 (2.25 bits per weight).
    pub const fn gptvq2_256() -> Self {
        Self {
            scope: Scope::Tile {
                rows: 256,
                cols: 256,
            },
            ..Self::gptvq2()
        }
    }

    /// AQLM-3: `VQ<8, 12, 2>`, per tensor (3 bits per weight plus the codebooks).
    pub const fn aqlm3() -> Self {
        Self {
            vec: 8,
            bits: 12,
            residuals: 2,
            scope: Scope::Tensor,
        }
    }

    /// CQ-4: `VQ<2, 8, 1>`, per tensor (4 bits per weight plus the codebook).
    pub const fn cq4() -> Self {
        Self {
            vec: 2,
            bits: 8,
            residuals: 1,
            scope: Scope::Tensor,
        }
    }

    /// CQ-2: `VQ<4, 8, 1>`, per tensor (2 bits per weight plus the codebook).
    pub const fn cq2() -> Self {
        Self {
            vec: 4,
            bits: 8,
            residuals: 1,
            scope: Scope::Tensor,
        }
    }

    /// Entries per codebook, `2^bits`.
    pub fn entries(&self) -> usize {
        1 << self.bits
    }

    /// Checks the ranges: `vec` in 1..=16, `bits` in 1..=16, `residuals` in 1..=4, tile sides
    /// in 1..=2^30 with the tile's columns a multiple of `vec`.
    ///
    /// # Errors
    /// [`VqError::Config`] naming the value.
    pub fn validate(&self) -> Result<()> {
        let err = |what, value: usize, rule| {
            Err(VqError::Config {
                what,
                value: value as u64,
                rule,
            })
        };
        if !(1..=16).contains(&self.vec) {
            return err("vec", self.vec, "the vector size must be in 1..=16");
        }
        if !(1..=16).contains(&self.bits) {
            return err(
                "bits",
                self.bits as usize,
                "the code width must be in 1..=16",
            );
        }
        if !(1..=4).contains(&self.residuals) {
            return err(
                "residuals",
                self.residuals,
                "the number of residual codebooks must be in 1..=4",
            );
        }
        if let Scope::Tile { rows, cols } = self.scope {
            if !(1..=MAX_SIDE).contains(&rows) {
                return err("tile rows", rows, "tile rows must be in 1..=2^30");
            }
            if !(1..=MAX_SIDE).contains(&cols) || !cols.is_multiple_of(self.vec) {
                return err(
                    "tile cols",
                    cols,
                    "tile columns must be in 1..=2^30 and a multiple of the vector size",
                );
            }
        }
        Ok(())
    }

    /// Bits per weight of a `rows x cols` matrix, codes (as stored: each row's codes of a
    /// stage padded to a whole u32) and codebooks (fp16) counted, header not counted.
    ///
    /// # Errors
    /// As [`Geometry::new`].
    pub fn bits_per_weight(&self, rows: usize, cols: usize) -> Result<f64> {
        let g = Geometry::new(rows, cols, *self)?;
        Ok((g.code_words() * 32 + g.codebook_len() * 16) as f64 / (rows * cols) as f64)
    }
}

/// Where everything of a `rows x cols` matrix lies under a [`VqConfig`].
///
/// * Vectors: row `r` has `vecs = ceil(cols / vec)` vectors; vector `i` holds columns
///   `i*vec .. i*vec+vec` (the last one padded with zeros past `cols`, invisible).
/// * Tiles: `tile_rows x tile_cols` (the whole matrix for [`Scope::Tensor`]), `tiles_r x
///   tiles_c` of them in row-major order.
/// * Codebooks: value `j` of entry `e` of stage `s` of tile `t` at
///   `((t * residuals + s) * entries + e) * vec + j`.
/// * Codes: stage `s` of row `r` is a little-endian bit stream of `vecs` codes of `bits`
///   bits each (code `i` at bits `i*bits ..`), in `words` u32 starting at word
///   `(r * residuals + s) * words`; bits past `vecs * bits` are zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// The configuration.
    pub config: VqConfig,
    /// Vectors per row.
    pub vecs: usize,
    /// u32 words per row and stage.
    pub words: usize,
    /// Rows per tile.
    pub tile_rows: usize,
    /// Vectors per tile row.
    pub tile_vecs: usize,
    /// Tiles down.
    pub tiles_r: usize,
    /// Tiles across.
    pub tiles_c: usize,
}

impl Geometry {
    /// The geometry; checks the shape (both sides in 1..=2^30), the configuration and that
    /// the part lengths fit in `usize` (and in 2^40 values).
    ///
    /// # Errors
    /// [`FormatError::Shape`], [`VqError::Config`].
    pub fn new(rows: usize, cols: usize, config: VqConfig) -> Result<Self> {
        if rows == 0 || cols == 0 || rows > MAX_SIDE || cols > MAX_SIDE {
            return Err(FormatError::Shape {
                format: NAME,
                rows,
                cols,
                rule: "both sides must be in 1..=2^30",
            }
            .into());
        }
        config.validate()?;
        let v = config.vec;
        let vecs = cols.div_ceil(v);
        let words = (vecs * config.bits as usize).div_ceil(32);
        let (tile_rows, tile_vecs) = match config.scope {
            Scope::Tensor => (rows, vecs),
            Scope::Tile { rows: tr, cols: tc } => (tr.min(rows), (tc / v).min(vecs)),
        };
        let g = Self {
            rows,
            cols,
            config,
            vecs,
            words,
            tile_rows,
            tile_vecs,
            tiles_r: rows.div_ceil(tile_rows),
            tiles_c: vecs.div_ceil(tile_vecs),
        };
        let cb = (g.tiles() as u64)
            .checked_mul((config.residuals * config.entries() * v) as u64)
            .filter(|&n| n <= 1 << 40);
        let codes = (rows as u64)
            .checked_mul((config.residuals * words) as u64)
            .filter(|&n| n <= 1 << 40);
        if cb.is_none() || codes.is_none() {
            return Err(VqError::Config {
                what: "tiles",
                value: g.tiles() as u64,
                rule: "the codebooks or codes of this shape and configuration exceed 2^40 values: \
                       take larger tiles or fewer bits",
            });
        }
        Ok(g)
    }

    /// Number of tiles.
    pub fn tiles(&self) -> usize {
        self.tiles_r * self.tiles_c
    }

    /// The tile of vector `vec` of row `row`.
    pub fn tile_of(&self, row: usize, vec: usize) -> usize {
        (row / self.tile_rows) * self.tiles_c + vec / self.tile_vecs
    }

    /// Values (fp16) of all codebooks.
    pub fn codebook_len(&self) -> usize {
        self.tiles() * self.config.residuals * self.config.entries() * self.config.vec
    }

    /// Offset of entry `e` of stage `s` of tile `t` in the codebooks.
    pub fn entry_pos(&self, t: usize, s: usize, e: usize) -> usize {
        ((t * self.config.residuals + s) * self.config.entries() + e) * self.config.vec
    }

    /// u32 words of all codes.
    pub fn code_words(&self) -> usize {
        self.rows * self.config.residuals * self.words
    }

    /// First word of stage `s` of row `r`.
    pub fn row_pos(&self, r: usize, s: usize) -> usize {
        (r * self.config.residuals + s) * self.words
    }
}

/// Code `i` of a row's bit stream of `bits`-bit codes.
pub(crate) fn get_code(words: &[u32], bits: u32, i: usize) -> u32 {
    let w = i * bits as usize / 32;
    let hi = words.get(w + 1).copied().unwrap_or(0);
    vq_kernels::code_from_pair(words[w], hi, bits, i)
}

/// Writes code `i` (below `2^bits`) into a zeroed bit stream.
pub(crate) fn put_code(words: &mut [u32], bits: u32, i: usize, code: u32) {
    let p = i * bits as usize;
    let (w, sh) = (p / 32, p % 32);
    let v = u64::from(code) << sh;
    words[w] |= v as u32;
    if sh + bits as usize > 32 {
        words[w + 1] |= (v >> 32) as u32;
    }
}
