//! [`SbvrMatrix`]: the packed bitvectors, indices and coefficient cache the kernels read, the
//! CPU decoder and the two CPU references.

use half::f16;
use rayon::prelude::*;

use cmv_format::{FormatError, check_len, check_reference_args};
use sbvr_kernels::layout::{
    GROUP, GROUP_WORDS, Geometry, MAX_BITS, MAX_ENTRIES, MAX_U8_ENTRIES, MIN_BITS, PLANES,
    plane_dot, planes_of, quantize_group,
};

use crate::encode::Encoded;
use crate::error::{Result, SbvrError};

/// The format's name.
pub const NAME: &str = "sbvr";

/// The largest side this build takes (kernels index with `u32`; the padded sides must fit).
pub const MAX_SIDE: usize = 1 << 30;

/// An SBVR matrix: `rows x cols` weights, each group of 128 columns of a row
/// `sum_j c_j b_j` over `bits` bitvectors and one entry of the coefficient cache
/// (`sbvr_kernels::layout` has the bit layout).
///
/// Every constructor checks every invariant a kernel relies on ([`SbvrMatrix::validate`]):
/// indices below the cache's entries, finite coefficients, zero padding.
#[derive(Clone, Debug, PartialEq)]
pub struct SbvrMatrix {
    geom: Geometry,
    /// [`Geometry::bit_words`] words in the kernel's order.
    bits: Vec<u64>,
    /// [`Geometry::index_len`] cache indices in the kernel's order (zero in the padding).
    index: Vec<u16>,
    /// `entries x bits` fp16 coefficients.
    coeffs: Vec<f16>,
}

/// Checks the shape and the number of bitvectors.
pub(crate) fn check_shape(rows: usize, cols: usize, bits: u32) -> Result<()> {
    if rows == 0 || cols == 0 || rows > MAX_SIDE || cols > MAX_SIDE {
        return Err(FormatError::Shape {
            format: NAME,
            rows,
            cols,
            rule: "both sides must be in 1..=2^30",
        }
        .into());
    }
    if !(MIN_BITS..=MAX_BITS).contains(&bits) {
        return Err(SbvrError::Bits { bits });
    }
    Ok(())
}

impl SbvrMatrix {
    /// Packs an encoder's output.
    ///
    /// # Errors
    /// The shape's and [`SbvrMatrix::validate`]'s (an `Encoded` built by hand may be wrong).
    pub fn from_encoded(e: &Encoded) -> Result<Self> {
        check_shape(e.rows, e.cols, e.bits)?;
        let geom = Geometry::new(e.rows, e.cols, e.bits as usize);
        check_len("codes", e.codes.len(), e.rows * e.cols)?;
        check_len("index", e.index.len(), e.rows * geom.groups)?;
        let entries = e.coeffs.len() / e.bits as usize;
        if entries == 0 || entries > MAX_ENTRIES || !e.coeffs.len().is_multiple_of(e.bits as usize)
        {
            return Err(SbvrError::Entries { entries });
        }
        let mut bits = vec![0u64; geom.bit_words()];
        for r in 0..e.rows {
            for c in 0..e.cols {
                let code = e.codes[r * e.cols + c];
                if u32::from(code) >> e.bits != 0 {
                    return Err(SbvrError::Padding {
                        what: format!(
                            "code {code:#x} of row {r}, column {c} has bits past {}",
                            e.bits
                        ),
                    });
                }
                for j in 0..e.bits as usize {
                    if code >> j & 1 == 1 {
                        let (w, b) = geom.bit_pos(r, c, j);
                        bits[w] |= 1 << b;
                    }
                }
            }
        }
        let mut index = vec![0u16; geom.index_len()];
        for r in 0..e.rows {
            for g in 0..geom.groups {
                let i = e.index[r * geom.groups + g] as usize;
                if i >= entries {
                    return Err(SbvrError::Index {
                        row: r,
                        group: g,
                        index: i,
                        entries,
                    });
                }
                index[geom.index_pos(r, g)] = i as u16;
            }
        }
        Self::from_stored(e.rows, e.cols, e.bits, bits, index, e.coeffs.clone())
    }

    /// A matrix from its stored parts (the kernel's order), validated.
    ///
    /// # Errors
    /// The shape's, [`FormatError::Length`] for parts of the wrong size,
    /// [`SbvrError::Entries`], and [`SbvrMatrix::validate`]'s.
    pub fn from_stored(
        rows: usize,
        cols: usize,
        nbits: u32,
        bits: Vec<u64>,
        index: Vec<u16>,
        coeffs: Vec<f16>,
    ) -> Result<Self> {
        check_shape(rows, cols, nbits)?;
        let geom = Geometry::new(rows, cols, nbits as usize);
        check_len("bitvector words", bits.len(), geom.bit_words())?;
        check_len("index", index.len(), geom.index_len())?;
        let entries = coeffs.len() / nbits as usize;
        if entries == 0 || entries > MAX_ENTRIES || !coeffs.len().is_multiple_of(nbits as usize) {
            return Err(SbvrError::Entries { entries });
        }
        let m = Self {
            geom,
            bits,
            index,
            coeffs,
        };
        m.validate()?;
        Ok(m)
    }

    /// Checks every invariant: each index below the entries, each coefficient finite, the
    /// padding (rows past the last, columns past the last, the indices of padded rows and
    /// groups) zero.
    ///
    /// # Errors
    /// [`SbvrError::Index`], [`SbvrError::Coefficient`], [`SbvrError::Padding`].
    pub fn validate(&self) -> Result<()> {
        let g = &self.geom;
        let entries = self.entries();
        for (k, c) in self.coeffs.iter().enumerate() {
            if !c.is_finite() {
                return Err(SbvrError::Coefficient {
                    entry: k / g.bits,
                    j: k % g.bits,
                    value: c.to_f32(),
                });
            }
        }
        for r in 0..g.padded_rows() {
            for gr in 0..g.padded_groups() {
                let i = usize::from(self.index[g.index_pos(r, gr)]);
                let padded = r >= g.rows || gr >= g.groups;
                if padded && i != 0 {
                    return Err(SbvrError::Padding {
                        what: format!("index {i} of padded row {r}, group {gr}"),
                    });
                }
                if i >= entries {
                    return Err(SbvrError::Index {
                        row: r,
                        group: gr,
                        index: i,
                        entries,
                    });
                }
            }
        }
        // Padded rows: every bit; real rows: the columns past `cols`.
        for j in 0..g.bits {
            for r in 0..g.padded_rows() {
                let first = if r < g.rows { g.cols } else { 0 };
                for c in first..g.padded_cols() {
                    let (w, b) = g.bit_pos(r, c, j);
                    if self.bits[w] >> b & 1 == 1 {
                        return Err(SbvrError::Padding {
                            what: format!("bitvector {j} at row {r}, column {c}"),
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// The geometry (padded sides, where each bit lives).
    pub fn geometry(&self) -> Geometry {
        self.geom
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.geom.rows
    }

    /// Columns.
    pub fn cols(&self) -> usize {
        self.geom.cols
    }

    /// Bitvectors per group.
    pub fn bits(&self) -> u32 {
        self.geom.bits as u32
    }

    /// Entries of the coefficient cache.
    pub fn entries(&self) -> usize {
        self.coeffs.len() / self.geom.bits
    }

    /// Whether indices are stored as `u16` (more than 256 entries) rather than `u8`.
    pub fn wide_index(&self) -> bool {
        self.entries() > MAX_U8_ENTRIES
    }

    /// The packed bitvectors (kernel order).
    pub fn bit_words(&self) -> &[u64] {
        &self.bits
    }

    /// The indices (kernel order).
    pub fn index(&self) -> &[u16] {
        &self.index
    }

    /// The coefficient cache, `entries x bits`.
    pub fn coefficients(&self) -> &[f16] {
        &self.coeffs
    }

    /// The cache entry of (`row`, `group`).
    pub fn entry(&self, row: usize, group: usize) -> usize {
        usize::from(self.index[self.geom.index_pos(row, group)])
    }

    /// The code (bit `j` = bitvector `j`) at (`row`, `col`).
    pub fn code(&self, row: usize, col: usize) -> u8 {
        let mut code = 0u8;
        for j in 0..self.geom.bits {
            let (w, b) = self.geom.bit_pos(row, col, j);
            code |= ((self.bits[w] >> b & 1) as u8) << j;
        }
        code
    }

    /// The 4 words of bitvector `j` of (`row`, `group`) (bit `i` of word `t` = column
    /// `128 group + 32 t + i`).
    pub fn group_words(&self, row: usize, group: usize, j: usize) -> [u32; GROUP_WORDS] {
        core::array::from_fn(|t| {
            let (w, b) = self.geom.bit_pos(row, group * GROUP + 32 * t, j);
            (self.bits[w] >> b) as u32
        })
    }

    /// The dequantized weight at (`row`, `col`): the sum, in f64 in increasing `j`, of the
    /// coefficients of the set bits.
    pub fn value(&self, row: usize, col: usize) -> f64 {
        let e = self.entry(row, col / GROUP);
        let code = self.code(row, col);
        let n = self.geom.bits;
        (0..n)
            .filter(|j| code >> j & 1 == 1)
            .map(|j| f64::from(self.coeffs[e * n + j].to_f32()))
            .fold(0.0, |acc, c| acc + c) // from +0.0 (`sum` starts at -0.0)
    }

    /// The dequantized matrix, row-major (the CPU decoder).
    pub fn dequantize(&self) -> Vec<f32> {
        let cols = self.cols();
        let mut out = vec![0f32; self.rows() * cols];
        out.par_chunks_mut(cols).enumerate().for_each(|(r, row)| {
            for (c, v) in row.iter_mut().enumerate() {
                *v = self.value(r, c) as f32;
            }
        });
        out
    }

    /// The inputs as the GPU quantizes them: for each vector and (padded) group, the 8
    /// bit-planes (`Geometry::plane_pos` order) and the f32 scale
    /// ([`sbvr_kernels::layout::quantize_group`]).
    ///
    /// # Errors
    /// [`FormatError::Batch`], [`FormatError::Length`].
    pub fn quantize_inputs(&self, x: &[f16], batch: usize) -> Result<(Vec<u32>, Vec<f32>)> {
        check_reference_args(x, batch, self.cols())?;
        let g = &self.geom;
        let mut planes = vec![0u32; g.plane_words(batch)];
        let mut scales = vec![0f32; g.scales_len(batch)];
        for v in 0..batch {
            let xv = &x[v * g.cols..(v + 1) * g.cols];
            for gr in 0..g.groups {
                let vals: Vec<f32> = xv[gr * GROUP..((gr + 1) * GROUP).min(g.cols)]
                    .iter()
                    .map(|h| h.to_f32())
                    .collect();
                let (s, q) = quantize_group(&vals);
                scales[v * g.padded_groups() + gr] = s;
                let p = planes_of(&q);
                for (a, plane) in p.iter().enumerate() {
                    for (t, &w) in plane.iter().enumerate() {
                        planes[g.plane_pos(v, gr, a, t)] = w;
                    }
                }
            }
        }
        Ok((planes, scales))
    }

    /// The reference of exactly what the kernels compute: inputs quantized per group
    /// ([`SbvrMatrix::quantize_inputs`]), the integer popcount sums
    /// `P_j = sum_a pivot_a popc(b_j AND plane_a)` exact, then
    /// `y[v][r] = sum_g s_g sum_j c_j P_j` in f64 (`batch * rows` values, vector-major). A
    /// group with a non-finite input has a NaN scale: every output of its vector is NaN.
    ///
    /// # Errors
    /// [`FormatError::Batch`], [`FormatError::Length`].
    pub fn reference(&self, x: &[f16], batch: usize) -> Result<Vec<f64>> {
        let (planes, scales) = self.quantize_inputs(x, batch)?;
        let g = self.geom;
        let n = g.bits;
        let mut y = vec![0f64; batch * g.rows];
        y.par_chunks_mut(g.rows).enumerate().for_each(|(v, yv)| {
            let group_planes: Vec<[[u32; GROUP_WORDS]; PLANES]> = (0..g.groups)
                .map(|gr| {
                    core::array::from_fn(|a| {
                        core::array::from_fn(|t| planes[g.plane_pos(v, gr, a, t)])
                    })
                })
                .collect();
            for (r, out) in yv.iter_mut().enumerate() {
                let mut acc = 0f64;
                for (gr, gp) in group_planes.iter().enumerate() {
                    let e = self.entry(r, gr);
                    let mut part = 0f64;
                    for j in 0..n {
                        let p = plane_dot(&self.group_words(r, gr, j), gp);
                        part += f64::from(self.coeffs[e * n + j].to_f32()) * f64::from(p);
                    }
                    acc += f64::from(scales[v * g.padded_groups() + gr]) * part;
                }
                *out = acc;
            }
        });
        Ok(y)
    }

    /// The plain reference: the dequantized weights times the unquantized inputs, in f64
    /// (what [`SbvrMatrix::reference`] approximates; the difference is the activation
    /// quantization's error).
    ///
    /// # Errors
    /// [`FormatError::Batch`], [`FormatError::Length`].
    pub fn reference_dequantized(&self, x: &[f16], batch: usize) -> Result<Vec<f64>> {
        check_reference_args(x, batch, self.cols())?;
        let w = self.dequantize();
        let cols = self.cols();
        let mut y = vec![0f64; batch * self.rows()];
        y.par_chunks_mut(self.rows())
            .enumerate()
            .for_each(|(v, yv)| {
                let xv = &x[v * cols..(v + 1) * cols];
                for (r, out) in yv.iter_mut().enumerate() {
                    *out = w[r * cols..(r + 1) * cols]
                        .iter()
                        .zip(xv)
                        .map(|(&a, b)| f64::from(a) * f64::from(b.to_f32()))
                        .sum();
                }
            });
        Ok(y)
    }

    /// Bytes of the parts a product reads: bitvectors, indices (1 or 2 bytes each) and the
    /// cache (stored `bits` halves per entry; the GPU pads entries to 8 halves).
    pub fn part_bytes(&self) -> (usize, usize, usize) {
        let ib = if self.wide_index() { 2 } else { 1 };
        (
            8 * self.bits.len(),
            ib * self.index.len(),
            2 * self.coeffs.len(),
        )
    }

    /// Bits per real weight of everything the kernel reads (bitvectors, indices, cache;
    /// padding included).
    pub fn bits_per_weight(&self) -> f64 {
        let (a, b, c) = self.part_bytes();
        (a + b + c) as f64 * 8.0 / (self.rows() * self.cols()) as f64
    }
}
