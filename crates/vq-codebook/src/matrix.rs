//! [`VqMatrix`]: the packed codes and fp16 codebooks, the CPU decoder and the f64 reference.

use cmv_format::{check_len, check_reference_args};
use half::f16;
use rayon::prelude::*;

use crate::config::{Geometry, VqConfig, get_code};
use crate::encode::{EncodeOptions, encode};
use crate::error::{Result, VqError};

/// The format's name.
pub const NAME: &str = "vq";

/// A VQ matrix: each row cut into vectors of `vec` weights, each vector the sum over the
/// residual stages of one entry of its tile's codebook of that stage ([`Geometry`] has the
/// layout).
///
/// Every constructor checks every invariant ([`VqMatrix::validate`]): part lengths, finite
/// codebook values, zero padding bits (codes are `bits` wide, so every code is below
/// `2^bits`).
#[derive(Clone, Debug, PartialEq)]
pub struct VqMatrix {
    geom: Geometry,
    codebooks: Vec<f16>,
    codes: Vec<u32>,
}

impl VqMatrix {
    /// Encodes `rows x cols` row-major weights ([`EncodeOptions`]).
    ///
    /// # Errors
    /// The shape's, the configuration's, [`cmv_format::FormatError::Length`] for `w` or the
    /// importance, [`cmv_format::FormatError::NonFinite`] weights, [`VqError::Importance`].
    pub fn encode(w: &[f32], rows: usize, cols: usize, opts: &EncodeOptions) -> Result<Self> {
        let geom = Geometry::new(rows, cols, opts.config)?;
        check_len("weights", w.len(), rows * cols)?;
        let (codebooks, codes) = encode(w, &geom, opts)?;
        Self::from_parts(rows, cols, opts.config, codebooks, codes)
    }

    /// A matrix from its stored parts, validated.
    ///
    /// # Errors
    /// As [`Geometry::new`], [`cmv_format::FormatError::Length`], [`VqMatrix::validate`]'s.
    pub fn from_parts(
        rows: usize,
        cols: usize,
        config: VqConfig,
        codebooks: Vec<f16>,
        codes: Vec<u32>,
    ) -> Result<Self> {
        let geom = Geometry::new(rows, cols, config)?;
        check_len("codebooks", codebooks.len(), geom.codebook_len())?;
        check_len("codes", codes.len(), geom.code_words())?;
        let m = Self {
            geom,
            codebooks,
            codes,
        };
        m.validate()?;
        Ok(m)
    }

    /// Checks every codebook value finite and every padding bit of the codes zero.
    ///
    /// # Errors
    /// [`VqError::Codebook`], [`VqError::Padding`].
    pub fn validate(&self) -> Result<()> {
        if let Some(index) = self.codebooks.iter().position(|c| !c.is_finite()) {
            return Err(VqError::Codebook {
                index,
                value: self.codebooks[index].to_f32(),
            });
        }
        let g = &self.geom;
        let used = g.vecs * g.config.bits as usize;
        for r in 0..g.rows {
            for s in 0..g.config.residuals {
                let p = g.row_pos(r, s);
                for (word, &value) in self.codes[p..p + g.words].iter().enumerate() {
                    let first = word * 32;
                    let mask = if used >= first + 32 {
                        0
                    } else {
                        !0u32 << (used - first)
                    };
                    if value & mask != 0 {
                        return Err(VqError::Padding {
                            row: r,
                            stage: s,
                            word,
                            value,
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.geom.rows
    }

    /// Columns.
    pub fn cols(&self) -> usize {
        self.geom.cols
    }

    /// The configuration.
    pub fn config(&self) -> VqConfig {
        self.geom.config
    }

    /// The geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.geom
    }

    /// All codebooks ([`Geometry`]'s order).
    pub fn codebooks(&self) -> &[f16] {
        &self.codebooks
    }

    /// The packed codes ([`Geometry`]'s order).
    pub fn codes(&self) -> &[u32] {
        &self.codes
    }

    /// The code of vector `vec` of `row` in residual stage `stage`.
    ///
    /// # Panics
    /// When an index is out of range.
    pub fn code(&self, stage: usize, row: usize, vec: usize) -> u32 {
        let g = &self.geom;
        assert!(stage < g.config.residuals && row < g.rows && vec < g.vecs);
        let p = g.row_pos(row, stage);
        get_code(&self.codes[p..p + g.words], g.config.bits, vec)
    }

    /// The `vec` values of the entry that vector `vec` of `row` uses in `stage`.
    pub fn entry(&self, stage: usize, row: usize, vec: usize) -> &[f16] {
        let g = &self.geom;
        let e = self.code(stage, row, vec) as usize;
        let p = g.entry_pos(g.tile_of(row, vec), stage, e);
        &self.codebooks[p..p + g.config.vec]
    }

    /// Row `row`, decoded in f64 (each weight the exact sum of its stages' fp16 values).
    fn row_f64(&self, row: usize, out: &mut [f64]) {
        let g = &self.geom;
        let v = g.config.vec;
        out.fill(0.0);
        for s in 0..g.config.residuals {
            for i in 0..g.vecs {
                let e = self.entry(s, row, i);
                for (j, &c) in e
                    .iter()
                    .enumerate()
                    .take(g.cols.saturating_sub(i * v).min(v))
                {
                    out[i * v + j] += f64::from(c.to_f32());
                }
            }
        }
    }

    /// The decoded `rows x cols` weights (row-major).
    pub fn dequantize(&self) -> Vec<f32> {
        let cols = self.cols();
        let mut w = vec![0f32; self.rows() * cols];
        w.par_chunks_mut(cols).enumerate().for_each(|(r, out)| {
            let mut row = vec![0f64; cols];
            self.row_f64(r, &mut row);
            out.iter_mut().zip(&row).for_each(|(o, &x)| *o = x as f32);
        });
        w
    }

    /// The reference product `y = W x` of `batch` fp16 vectors (`x.len() == batch * cols`),
    /// in f64 over the exact decoded weights; `batch * rows` outputs (vector-major).
    ///
    /// # Errors
    /// [`cmv_format::FormatError::Batch`] (batch 0), [`cmv_format::FormatError::Length`].
    pub fn reference(&self, x: &[f16], batch: usize) -> Result<Vec<f64>> {
        let (rows, cols) = (self.rows(), self.cols());
        check_reference_args(x, batch, cols)?;
        let xf: Vec<f64> = x.iter().map(|v| f64::from(v.to_f32())).collect();
        let mut yt = vec![0f64; rows * batch];
        yt.par_chunks_mut(batch).enumerate().for_each(|(r, out)| {
            let mut row = vec![0f64; cols];
            self.row_f64(r, &mut row);
            for (b, o) in out.iter_mut().enumerate() {
                *o = row
                    .iter()
                    .zip(&xf[b * cols..(b + 1) * cols])
                    .map(|(w, x)| w * x)
                    .sum();
            }
        });
        let mut y = vec![0f64; rows * batch];
        for r in 0..rows {
            for b in 0..batch {
                y[b * rows + r] = yt[r * batch + b];
            }
        }
        Ok(y)
    }

    /// Bits per weight from the stored parts (codes and codebooks; the header not counted).
    pub fn bits_per_weight(&self) -> f64 {
        (self.codes.len() * 32 + self.codebooks.len() * 16) as f64
            / (self.rows() * self.cols()) as f64
    }
}
