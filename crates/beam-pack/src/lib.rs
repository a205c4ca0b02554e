//! BEAM (bit-level matrix multiplication): unsigned integer matrices whose elements have any
//! width `b` from 1 to 64 bits, bit-packed in one of four [`Layout`]s, row-major.
//!
//! [`PackedMatrix::pack`] / [`PackedMatrix::unpack`] (exact inverses), [`PackedMatrix::get`],
//! zero suppression ([`PackedMatrix::pack_min_width`]), the container and the CPU reference
//! products ([`cmv_format::CompressedMatrix`], [`gemm_reference`]). With the default `gpu`
//! feature, [`gpu`] multiplies packed matrices on the GPU, bit-exact with the references:
//! GEMM with every kernel of the paper and integer tensor cores, and GEMV (`docs/BEAM.md`).
//!
//! # Example
//!
//! Pack, save and load, unpack, and multiply on the CPU; on the GPU where there is one.
//!
//! ```rust
//! use beam_pack::{Layout, PackedMatrix};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let (rows, cols) = (64, 256);
//! let w: Vec<u64> = (0..rows * cols).map(|i| (i * 7 % 32) as u64).collect(); // 5-bit values
//! let bytes = PackedMatrix::pack(&w, rows, cols, 5, Layout::Nogaps)?.to_bytes();
//! let m = PackedMatrix::from_bytes(&bytes)?; // checks the CRC, the fields, the padding
//! assert_eq!(m.unpack(), w); // exact
//! let x: Vec<u64> = (0..cols as u64).map(|c| c % 9).collect();
//! let y = m.reference(&x, 1)?; // y = W x, exact (modulo 2^64)
//! #[cfg(feature = "gpu")]
//! {
//!     use beam_pack::cmv_format::DeviceGemv;
//!     use beam_pack::cmv_runtime::{Gpu, RuntimeError};
//!     // Without a GPU (no driver, no device) the example stops here.
//!     let gpu = match Gpu::new(0) {
//!         Err(RuntimeError::NoDriver | RuntimeError::NoDevice { .. }) => return Ok(()),
//!         gpu => gpu?,
//!     };
//!     let (kernels, dm) = (PackedMatrix::load(&gpu)?, m.upload(&gpu)?);
//!     let mut out = PackedMatrix::alloc_out(&gpu, rows, 1)?;
//!     PackedMatrix::gemv(&kernels, &dm, &gpu.upload(&x)?, &mut out, 1)?;
//!     PackedMatrix::finish(&kernels, &gpu)?;
//!     assert!(PackedMatrix::check(&gpu, &out, &y)?.passed());
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Layouts
//!
//! Every layout stores `u64` words ([`PackedMatrix::words`]); inside a word, element bits go
//! from the least significant bit up (little-endian bit order). With `b` the width,
//! `k = floor(64 / b)` and `t` the native width (8, 16, 32 or 64, the smallest that holds `b`):
//!
//! | layout | element `(r, c)` | words |
//! | --- | --- | --- |
//! | `naive` | word `r * cols + c` | `rows * cols` |
//! | `tight` | native element `i = r * cols + c` of the whole matrix viewed as one `[u{t}]` array stored in the words little-endian (word `i / (64 / t)`, bits `(i % (64 / t)) * t ..`) | `ceil(rows * cols * t / 64)` |
//! | `slabs` | word `r * ceil(cols / k) + c / k`, bits `(c % k) * b ..` | `rows * ceil(cols / k)` |
//! | `nogaps` | bits `c * b ..` of row `r`'s stream of `ceil(cols * b / 64)` words (an element may straddle two words) | `rows * ceil(cols * b / 64)` |
//!
//! `tight` keeps its native elements inside `u64` words (not a byte vector) so all layouts
//! share one word vector and one container part; on a little-endian device the words can be
//! read as a `[u{t}]` array directly. Every bit not holding an element (the high bits of a
//! naive or tight element above `b`, the rest of a slab, the end-of-row padding of slabs and
//! nogaps, the tail of tight's last word) is zero: one canonical packing per matrix, checked
//! when a container is loaded.
//!
//! # Products
//!
//! [`PackedMatrix::reference`] is `y = W x` with `u64` inputs: each product exact in `u128`,
//! the sums kept modulo 2^128, so the result is exactly `(W x) mod 2^64`. [`gemm_reference`] is `C = A x B` with the
//! paper's output widths ([`OutputWidth`]) and overflow behaviours ([`Overflow`]).

mod container;
mod error;
mod gemm;
#[cfg(feature = "gpu")]
pub mod gpu;

/// The device crate: layouts and kernel parameters shared with the GPU.
pub use beam_kernels;
/// The format core this crate builds on.
pub use cmv_format;
/// The GPU runtime the [`gpu`] module's signatures use.
#[cfg(feature = "gpu")]
pub use cmv_runtime;

use cmv_format::{FormatError, Weights};

pub use container::{BeamFields, BeamOptions, SPEC};
pub use error::BeamError;
pub use gemm::{
    GEMV_MAX_COLS, OperandStats, OutputWidth, Overflow, gemm_reference, gemv_reference,
    output_bits, output_bits_from,
};

cmv_format::header_code! {
    /// How the elements are laid out in the `u64` words (see the crate docs).
    pub enum Layout("layout") {
        /// One `u64` per element.
        Naive = 0 => "naive",
        /// One element per native integer (`u8`/`u16`/`u32`/`u64`) of the smallest width
        /// holding `b` bits, the native array stored in the words little-endian.
        Tight = 1 => "tight",
        /// `floor(64 / b)` whole elements per word, the rest of the word zero; each row
        /// starts a new word.
        Slabs = 2 => "slabs",
        /// One contiguous bit stream per row, padded to a multiple of 64 bits.
        Nogaps = 3 => "nogaps",
    }
}

/// The smallest native width (8, 16, 32, 64) holding `bits` bits.
pub const fn native_bits(bits: u32) -> u32 {
    if bits <= 8 {
        8
    } else if bits <= 16 {
        16
    } else if bits <= 32 {
        32
    } else {
        64
    }
}

/// Bits a value needs (at least 1: zero takes one bit).
pub const fn width_of(value: u64) -> u32 {
    if value == 0 {
        1
    } else {
        64 - value.leading_zeros()
    }
}

const fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1 << bits) - 1
    }
}

/// Words a `rows x cols` matrix of `bits`-bit elements takes in `layout` (`None` when the
/// count overflows `usize`). `bits` must be in 1..=64.
pub fn word_count(rows: usize, cols: usize, bits: u32, layout: Layout) -> Option<usize> {
    debug_assert!((1..=64).contains(&bits));
    match layout {
        Layout::Naive => rows.checked_mul(cols),
        Layout::Tight => {
            let per = (64 / native_bits(bits)) as usize;
            Some(rows.checked_mul(cols)?.div_ceil(per))
        }
        Layout::Slabs => rows.checked_mul(row_words(cols, bits, layout)?),
        Layout::Nogaps => rows.checked_mul(row_words(cols, bits, layout)?),
    }
}

/// Words per row for the row-padded layouts (slabs, nogaps).
fn row_words(cols: usize, bits: u32, layout: Layout) -> Option<usize> {
    match layout {
        Layout::Slabs => Some(cols.div_ceil((64 / bits) as usize)),
        Layout::Nogaps => Some(cols.checked_mul(bits as usize)?.div_ceil(64)),
        Layout::Naive | Layout::Tight => None,
    }
}

/// Checks a width.
fn check_bits(bits: u32) -> Result<(), BeamError> {
    if (1..=64).contains(&bits) {
        Ok(())
    } else {
        Err(BeamError::Width { bits })
    }
}

/// Checks a shape: both sides at least 1.
fn check_shape(rows: usize, cols: usize) -> Result<(), BeamError> {
    if rows == 0 || cols == 0 {
        return Err(FormatError::Shape {
            format: "beam",
            rows,
            cols,
            rule: "rows and columns must be at least 1",
        }
        .into());
    }
    Ok(())
}

/// A BEAM matrix: `rows x cols` unsigned integers of `bits` bits each, packed in `layout`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackedMatrix {
    rows: usize,
    cols: usize,
    bits: u32,
    layout: Layout,
    words: Vec<u64>,
}

impl PackedMatrix {
    /// Packs `values`, a `rows x cols` row-major matrix, with `bits` bits per element.
    ///
    /// # Errors
    /// [`FormatError::Length`] unless `values.len() == rows * cols`; [`FormatError::Shape`]
    /// for a side of 0; [`BeamError::Width`] for `bits` outside 1..=64;
    /// [`BeamError::ValueTooWide`] for the first value that does not fit (never truncated).
    pub fn pack(
        values: &[u64],
        rows: usize,
        cols: usize,
        bits: u32,
        layout: Layout,
    ) -> Result<Self, BeamError> {
        let w = Weights::new(values, rows, cols)?;
        check_shape(rows, cols)?;
        check_bits(bits)?;
        let limit = mask(bits);
        if let Some(index) = values.iter().position(|&v| v > limit) {
            let value = values[index];
            return Err(BeamError::ValueTooWide {
                index,
                row: index / cols,
                col: index % cols,
                value,
                bits,
                needed: width_of(value),
            });
        }
        let n = word_count(rows, cols, bits, layout).ok_or(FormatError::Length {
            what: "packed words",
            got: 0,
            expected: usize::MAX,
        })?;
        let mut words = vec![0u64; n];
        for r in 0..rows {
            for (c, &v) in w.row(r).iter().enumerate() {
                put(&mut words, layout, bits, cols, r, c, v);
            }
        }
        Ok(Self {
            rows,
            cols,
            bits,
            layout,
            words,
        })
    }

    /// Packs with the smallest width holding every value (at least 1): zero suppression.
    ///
    /// # Errors
    /// As [`PackedMatrix::pack`] (lengths and shapes).
    pub fn pack_min_width(
        values: &[u64],
        rows: usize,
        cols: usize,
        layout: Layout,
    ) -> Result<Self, BeamError> {
        let bits = width_of(values.iter().copied().max().unwrap_or(0));
        Self::pack(values, rows, cols, bits, layout)
    }

    /// Packs native unsigned values (`u8`, `u16`, `u32`, `u64`), widened to `u64`.
    ///
    /// # Errors
    /// As [`PackedMatrix::pack`].
    pub fn pack_native<T: Copy + Into<u64>>(
        values: &[T],
        rows: usize,
        cols: usize,
        bits: u32,
        layout: Layout,
    ) -> Result<Self, BeamError> {
        Weights::new(values, rows, cols)?;
        let wide: Vec<u64> = values.iter().map(|&v| v.into()).collect();
        Self::pack(&wide, rows, cols, bits, layout)
    }

    /// Rebuilds a matrix from its words, checking the word count and that every bit not
    /// holding an element is zero and every element fits (the canonical packing).
    ///
    /// # Errors
    /// [`FormatError::Shape`], [`BeamError::Width`], [`FormatError::Length`] for a wrong word
    /// count, [`FormatError::NonZero`] for a set unused bit (`offset`: the byte in `words`).
    pub fn from_words(
        rows: usize,
        cols: usize,
        bits: u32,
        layout: Layout,
        words: Vec<u64>,
    ) -> Result<Self, BeamError> {
        check_shape(rows, cols)?;
        check_bits(bits)?;
        let expected = word_count(rows, cols, bits, layout).unwrap_or(usize::MAX);
        cmv_format::check_len("packed words", words.len(), expected)?;
        let m = Self {
            rows,
            cols,
            bits,
            layout,
            words,
        };
        let mut canon = vec![0u64; expected];
        for r in 0..rows {
            for c in 0..cols {
                put(&mut canon, layout, bits, cols, r, c, m.at(r, c));
            }
        }
        if let Some(i) = m.words.iter().zip(&canon).position(|(a, b)| a != b) {
            return Err(FormatError::NonZero {
                what: "unused bits of the packed words",
                offset: (i * 8) as u64,
                found: m.words[i] & !canon[i],
            }
            .into());
        }
        Ok(m)
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Bits per element.
    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// The layout.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The packed words (see the crate docs for where each element lies).
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// Element `(r, c)`, `None` outside the matrix.
    pub fn get(&self, r: usize, c: usize) -> Option<u64> {
        (r < self.rows && c < self.cols).then(|| self.at(r, c))
    }

    /// All elements, row-major: the inverse of [`PackedMatrix::pack`].
    pub fn unpack(&self) -> Vec<u64> {
        let mut out = Vec::with_capacity(self.rows * self.cols);
        for r in 0..self.rows {
            for c in 0..self.cols {
                out.push(self.at(r, c));
            }
        }
        out
    }

    /// The reference product `y = W x` of `batch` vectors (`x.len() == batch * cols`),
    /// `batch * rows` outputs: products exact in `u128`, sums modulo 2^128, each output
    /// exactly `(W x)[r] mod 2^64` (wrapping; for output widths and saturation see
    /// [`gemm_reference`]).
    ///
    /// # Errors
    /// [`FormatError::Batch`] for batch 0, [`FormatError::Length`].
    pub fn reference(&self, x: &[u64], batch: usize) -> Result<Vec<u64>, BeamError> {
        cmv_format::check_reference_args(x, batch, self.cols)?;
        let mut y = Vec::with_capacity(batch * self.rows);
        for xb in x.chunks_exact(self.cols) {
            for r in 0..self.rows {
                let acc = xb.iter().enumerate().fold(0u128, |acc, (c, &xv)| {
                    acc.wrapping_add(u128::from(self.at(r, c)) * u128::from(xv))
                });
                y.push(acc as u64);
            }
        }
        Ok(y)
    }

    /// Element `(r, c)`, in range.
    pub(crate) fn at(&self, r: usize, c: usize) -> u64 {
        get(&self.words, self.layout, self.bits, self.cols, r, c)
    }
}

/// Reads element `(r, c)` from `words`.
fn get(words: &[u64], layout: Layout, bits: u32, cols: usize, r: usize, c: usize) -> u64 {
    let m = mask(bits);
    match layout {
        Layout::Naive => words[r * cols + c] & m,
        Layout::Tight => {
            let t = native_bits(bits) as usize;
            let i = r * cols + c;
            let per = 64 / t;
            (words[i / per] >> ((i % per) * t)) & m
        }
        Layout::Slabs => {
            let k = (64 / bits) as usize;
            let rw = cols.div_ceil(k);
            (words[r * rw + c / k] >> ((c % k) * bits as usize)) & m
        }
        Layout::Nogaps => {
            let b = bits as usize;
            let rw = (cols * b).div_ceil(64);
            let bit = c * b;
            let (w, off) = (r * rw + bit / 64, bit % 64);
            let mut v = words[w] >> off;
            if off + b > 64 {
                v |= words[w + 1] << (64 - off);
            }
            v & m
        }
    }
}

/// ORs element `(r, c)` (which fits in `bits`) into zeroed `words`.
fn put(words: &mut [u64], layout: Layout, bits: u32, cols: usize, r: usize, c: usize, v: u64) {
    let v = v & mask(bits);
    match layout {
        Layout::Naive => words[r * cols + c] = v,
        Layout::Tight => {
            let t = native_bits(bits) as usize;
            let i = r * cols + c;
            let per = 64 / t;
            words[i / per] |= v << ((i % per) * t);
        }
        Layout::Slabs => {
            let k = (64 / bits) as usize;
            let rw = cols.div_ceil(k);
            words[r * rw + c / k] |= v << ((c % k) * bits as usize);
        }
        Layout::Nogaps => {
            let b = bits as usize;
            let rw = (cols * b).div_ceil(64);
            let bit = c * b;
            let (w, off) = (r * rw + bit / 64, bit % 64);
            words[w] |= v << off;
            if off + b > 64 {
                words[w + 1] |= v >> (64 - off);
            }
        }
    }
}
