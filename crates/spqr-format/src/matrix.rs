//! [`SpqrMatrix`], a SpQR matrix in memory, its CPU reference product and its [`SizeReport`].

use half::f16;
use rayon::prelude::*;
use spqr_kernels::layout::{
    self, SecondOrder, TILE, outlier_col, outlier_value, outlier_word, row_code, row_padding_ok,
    row_qs, row_qz, row_stat_byte,
};

use crate::{Result, SpqrError};

/// Largest padded column count: outlier columns are 16-bit.
pub const MAX_PADDED_COLS: usize = 1 << 16;
/// Largest batch of the GEMV.
pub const MAX_BATCH: usize = 16;

/// Which outlier encoding the kernel reads (`docs/SPQR.md`, "Outliers"); both are stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OutlierFormat {
    /// Row offsets and each row's `col_val` words (the smaller one; the default).
    #[default]
    Csr,
    /// Padded, transposed CSR: per tile row a block of `16 m` words, coalesced reads.
    Ptcsr,
}

impl OutlierFormat {
    /// Both formats.
    pub const ALL: [OutlierFormat; 2] = [OutlierFormat::Csr, OutlierFormat::Ptcsr];

    /// The code in the container header: 0 for CSR, 1 for PTCSR.
    pub const fn code(self) -> u32 {
        match self {
            OutlierFormat::Csr => 0,
            OutlierFormat::Ptcsr => 1,
        }
    }

    /// The format of a header code.
    ///
    /// # Errors
    /// [`SpqrError::FormatCode`] for an unknown code.
    pub const fn from_code(code: u32) -> Result<Self> {
        match code {
            0 => Ok(OutlierFormat::Csr),
            1 => Ok(OutlierFormat::Ptcsr),
            found => Err(SpqrError::FormatCode { found }),
        }
    }

    /// `"CSR"` or `"PTCSR"`.
    pub const fn name(self) -> &'static str {
        match self {
            OutlierFormat::Csr => "CSR",
            OutlierFormat::Ptcsr => "PTCSR",
        }
    }
}

/// One outlier: its position (in the stored column order) and its fp16 residual.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Outlier {
    /// Row.
    pub row: usize,
    /// Column of the stored matrix (see [`SpqrMatrix::input_permutation`]).
    pub col: usize,
    /// The residual `w - w'`, fp16 (never zero).
    pub value: f16,
}

/// A SpQR matrix: the dense 3-bit part in 16 x 16 tiles, one `u64` per tile row, and the fp16
/// outliers, in CSR and in PTCSR (`docs/SPQR.md`).
///
/// Made by [`crate::quantize()`], [`SpqrMatrix::from_parts`] or [`SpqrMatrix::from_bytes`], all
/// of which check every invariant ([`SpqrMatrix::validate`]).
///
/// The stored matrix `W'` may have its columns permuted ([`SpqrMatrix::input_permutation`]):
/// the product is `y = W' P x`, column `c` of `W'` multiplying `x[perm[c]]`. The accessors of
/// the stored parts (`dense`, the outlier arrays, [`SpqrMatrix::dense_part`],
/// [`SpqrMatrix::outliers`]) are in the stored order; [`SpqrMatrix::dequantize`] and the
/// reference products take and give the caller's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpqrMatrix {
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) padded_rows: usize,
    pub(crate) padded_cols: usize,
    pub(crate) dense: Vec<u64>,
    pub(crate) csr_row_offsets: Vec<u32>,
    pub(crate) csr_col_vals: Vec<u32>,
    pub(crate) ptcsr_block_offsets: Vec<u32>,
    pub(crate) ptcsr_col_vals: Vec<u32>,
    pub(crate) outlier_format: OutlierFormat,
    pub(crate) perm: Option<Vec<u32>>,
}

/// The padded shape of a `rows x cols` matrix: both sides rounded up to 16.
///
/// # Errors
/// [`SpqrError::Shape`] for an empty matrix or padded rows past `u32::MAX`,
/// [`SpqrError::TooWide`] for padded columns past 65536.
pub fn padded_shape(rows: usize, cols: usize) -> Result<(usize, usize)> {
    let pad = |n: usize| n.div_ceil(TILE).checked_mul(TILE);
    let (Some(pr), Some(pc)) = (pad(rows), pad(cols)) else {
        return Err(SpqrError::Shape { rows, cols });
    };
    if rows == 0 || cols == 0 || u32::try_from(pr).is_err() {
        return Err(SpqrError::Shape { rows, cols });
    }
    if pc > MAX_PADDED_COLS {
        return Err(SpqrError::TooWide {
            cols,
            padded_cols: pc,
        });
    }
    Ok((pr, pc))
}

impl SpqrMatrix {
    /// A matrix from its stored parts: the dense words (`padded_rows / 16 * padded_cols`,
    /// index `i * padded_cols + 16 j + r`), the CSR outliers (`padded_rows + 1` row offsets and
    /// the `col_val` words) and an optional input permutation. The PTCSR arrays are built from
    /// the CSR ones; the outlier format is CSR.
    ///
    /// # Errors
    /// As [`padded_shape`] and [`SpqrMatrix::validate`], and [`SpqrError::TooManyOutliers`]
    /// when the PTCSR arrays would pass `u32` offsets.
    pub fn from_parts(
        rows: usize,
        cols: usize,
        dense: Vec<u64>,
        csr_row_offsets: Vec<u32>,
        csr_col_vals: Vec<u32>,
        perm: Option<Vec<u32>>,
    ) -> Result<Self> {
        let (padded_rows, padded_cols) = padded_shape(rows, cols)?;
        check_csr(
            rows,
            cols,
            padded_rows,
            &csr_row_offsets,
            &csr_col_vals,
            "CSR",
        )?;
        let (ptcsr_block_offsets, ptcsr_col_vals) =
            build_ptcsr(padded_rows, &csr_row_offsets, &csr_col_vals)?;
        let m = SpqrMatrix {
            rows,
            cols,
            padded_rows,
            padded_cols,
            dense,
            csr_row_offsets,
            csr_col_vals,
            ptcsr_block_offsets,
            ptcsr_col_vals,
            outlier_format: OutlierFormat::Csr,
            perm,
        };
        m.validate()?;
        Ok(m)
    }

    /// Rows of the matrix (without padding).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns of the matrix (without padding).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Rows after padding: a multiple of 16.
    pub fn padded_rows(&self) -> usize {
        self.padded_rows
    }

    /// Columns after padding: a multiple of 16, at most 65536.
    pub fn padded_cols(&self) -> usize {
        self.padded_cols
    }

    /// Tile rows: `padded_rows / 16`.
    pub fn tile_rows(&self) -> usize {
        self.padded_rows / TILE
    }

    /// Tile columns: `padded_cols / 16`.
    pub fn tile_cols(&self) -> usize {
        self.padded_cols / TILE
    }

    /// The dense part: `padded_rows / 16 * padded_cols` words, the word of tile `(i, j)`,
    /// row `r` at `i * padded_cols + 16 j + r` (`layout::pack_row`).
    pub fn dense(&self) -> &[u64] {
        &self.dense
    }

    /// CSR row offsets: `padded_rows + 1` entries, the last equal to the outlier count.
    pub fn csr_row_offsets(&self) -> &[u32] {
        &self.csr_row_offsets
    }

    /// CSR `col_val` words (`layout::outlier_word`), each row's in increasing column order.
    pub fn csr_col_vals(&self) -> &[u32] {
        &self.csr_col_vals
    }

    /// PTCSR block offsets: `padded_rows / 16 + 1` entries, multiples of 16.
    pub fn ptcsr_block_offsets(&self) -> &[u32] {
        &self.ptcsr_block_offsets
    }

    /// PTCSR `col_val` words: the `k`-th outlier of row `r` of tile row `i` at
    /// `block_offsets[i] + 16 k + r`, zero words where a row has fewer.
    pub fn ptcsr_col_vals(&self) -> &[u32] {
        &self.ptcsr_col_vals
    }

    /// The outlier format the kernel reads (recorded in the container).
    pub fn outlier_format(&self) -> OutlierFormat {
        self.outlier_format
    }

    /// Chooses the outlier format the kernel reads (both are always stored).
    pub fn set_outlier_format(&mut self, format: OutlierFormat) {
        self.outlier_format = format;
    }

    /// Number of outliers.
    pub fn outlier_count(&self) -> usize {
        self.csr_col_vals.len()
    }

    /// The input permutation, if the columns were permuted (calibrated quantization with
    /// `permute`): `y = W' P x`, column `c` of the stored matrix multiplies `x[perm[c]]`.
    pub fn input_permutation(&self) -> Option<&[u32]> {
        self.perm.as_deref()
    }

    /// Input vectors in the order the stored columns expect (`batch` vectors of `cols`):
    /// `out[b * cols + c] = x[b * cols + perm[c]]`, or `x` itself without a permutation. The
    /// GPU kernel takes its input in this order.
    ///
    /// # Errors
    /// [`SpqrError::Length`] when `x` is not `batch * cols` long.
    pub fn permute_input(&self, x: &[f16], batch: usize) -> Result<Vec<f16>> {
        let cols = self.cols;
        if x.len() != batch * cols {
            return Err(SpqrError::Length {
                what: "input",
                got: x.len(),
                expected: batch * cols,
            });
        }
        Ok(match &self.perm {
            None => x.to_vec(),
            Some(p) => (0..batch)
                .flat_map(|b| p.iter().map(move |&c| x[b * cols + c as usize]))
                .collect(),
        })
    }

    /// The tile's second-order statistics, rebuilt from its 16 rows' bytes.
    ///
    /// # Panics
    /// When `i >= tile_rows()` or `j >= tile_cols()`.
    pub fn tile_statistics(&self, i: usize, j: usize) -> SecondOrder {
        assert!(
            i < self.tile_rows() && j < self.tile_cols(),
            "tile out of range"
        );
        let base = i * self.padded_cols + TILE * j;
        tile_second_order(&self.dense[base..base + TILE])
    }

    /// The first-order scale and zero of the group of `row` in tile column `j`, in fp32 as
    /// the kernel computes them (`layout::first_order`).
    ///
    /// # Panics
    /// When `row >= padded_rows()` or `j >= tile_cols()`.
    pub fn group_statistics(&self, row: usize, j: usize) -> (f32, f32) {
        let so = self.tile_statistics(row / TILE, j);
        let w = self.dense[(row / TILE) * self.padded_cols + TILE * j + row % TILE];
        layout::first_order(row_qs(w), row_qz(w), so)
    }

    /// The dense part dequantized, `rows x cols`, in the stored column order, padding
    /// stripped: `s (q - z)` in fp32 from the fp16 statistics, exactly as the kernel computes it.
    pub fn dense_part(&self) -> Vec<f32> {
        let (cols, pc) = (self.cols, self.padded_cols);
        let mut out = vec![0f32; self.rows * cols];
        out.par_chunks_mut(TILE * cols)
            .zip(self.dense.par_chunks(pc))
            .for_each(|(rows_out, words)| {
                for j in 0..pc / TILE {
                    let tile = &words[TILE * j..TILE * j + TILE];
                    let so = tile_second_order(tile);
                    for (r, row_out) in rows_out.chunks_mut(cols).enumerate() {
                        let w = tile[r];
                        let (s, z) = layout::first_order(row_qs(w), row_qz(w), so);
                        for k in 0..TILE.min(cols - TILE * j) {
                            row_out[TILE * j + k] = layout::dequantize(row_code(w, k as u32), s, z);
                        }
                    }
                }
            });
        out
    }

    /// The outliers, by row then column, in the stored column order (from the CSR arrays).
    pub fn outliers(&self) -> Vec<Outlier> {
        self.outliers_from(OutlierFormat::Csr)
    }

    /// The outliers, by row then column, read from one of the two encodings.
    pub fn outliers_from(&self, format: OutlierFormat) -> Vec<Outlier> {
        let mut out = Vec::with_capacity(self.outlier_count());
        let push = |out: &mut Vec<Outlier>, row: usize, w: u32| {
            out.push(Outlier {
                row,
                col: outlier_col(w) as usize,
                value: f16::from_bits(outlier_value(w)),
            });
        };
        match format {
            OutlierFormat::Csr => {
                for (row, o) in self.csr_row_offsets.windows(2).enumerate() {
                    for &w in &self.csr_col_vals[o[0] as usize..o[1] as usize] {
                        push(&mut out, row, w);
                    }
                }
            }
            OutlierFormat::Ptcsr => {
                for (i, o) in self.ptcsr_block_offsets.windows(2).enumerate() {
                    let block = &self.ptcsr_col_vals[o[0] as usize..o[1] as usize];
                    for r in 0..TILE {
                        for &w in block.iter().skip(r).step_by(TILE) {
                            if w != 0 {
                                push(&mut out, TILE * i + r, w);
                            }
                        }
                    }
                }
            }
        }
        out
    }

    /// The dequantized matrix `W'`, `rows x cols` row-major, in the caller's column order (the
    /// input permutation undone), padding stripped: the dense part plus the outliers' fp16
    /// residuals, each sum rounded once to fp32.
    pub fn dequantize(&self) -> Vec<f32> {
        let mut w = self.dense_part();
        for o in self.outliers() {
            w[o.row * self.cols + o.col] += o.value.to_f32();
        }
        match &self.perm {
            None => w,
            Some(perm) => {
                let mut out = vec![0f32; w.len()];
                for (src, dst) in w.chunks(self.cols).zip(out.chunks_mut(self.cols)) {
                    for (c, &p) in perm.iter().enumerate() {
                        dst[p as usize] = src[c];
                    }
                }
                out
            }
        }
    }

    /// `y = W' x` for `batch` input vectors, with the outliers read in the stored format
    /// ([`SpqrMatrix::gemv_reference_with`]).
    ///
    /// # Errors
    /// As [`SpqrMatrix::gemv_reference_with`].
    pub fn gemv_reference(&self, x: &[f16], batch: usize) -> Result<Vec<f64>> {
        self.gemv_reference_with(self.outlier_format, x, batch)
    }

    /// `y = W' x` in f64: every dense weight dequantized in fp32 exactly as the kernel does
    /// (`layout::first_order`, `layout::dequantize`) and every outlier's fp16 residual, each
    /// multiplied by its fp16 input in f64 and summed in f64 (the dense part then the outliers,
    /// in column order). `x` holds `batch * cols` values in the caller's column order,
    /// `x[b * cols + c]`; the result holds `batch * rows`, `y[b * rows + r]`. The outliers are
    /// read from the arrays of `format` (both give the same result, bit for bit).
    ///
    /// # Errors
    /// [`SpqrError::Batch`] for a batch outside `1..=16`, [`SpqrError::Length`] when `x` does
    /// not hold `batch * cols` values.
    pub fn gemv_reference_with(
        &self,
        format: OutlierFormat,
        x: &[f16],
        batch: usize,
    ) -> Result<Vec<f64>> {
        if !(1..=MAX_BATCH).contains(&batch) {
            return Err(SpqrError::Batch { batch, max: 16 });
        }
        let (rows, cols, pc) = (self.rows, self.cols, self.padded_cols);
        check_len("input", x.len(), batch * cols)?;
        // The inputs in the stored column order, f64, padded with zeros.
        let mut xs = vec![0f64; batch * pc];
        for b in 0..batch {
            for c in 0..cols {
                let src = self.perm.as_ref().map_or(c, |p| p[c] as usize);
                xs[b * pc + c] = f64::from(x[b * cols + src].to_f32());
            }
        }
        let per_tile_row: Vec<Vec<f64>> = (0..self.tile_rows())
            .into_par_iter()
            .map(|i| {
                let words = &self.dense[i * pc..(i + 1) * pc];
                let mut acc = vec![0f64; TILE * batch];
                for j in 0..pc / TILE {
                    let tile = &words[TILE * j..TILE * j + TILE];
                    let so = tile_second_order(tile);
                    for (r, &w) in tile.iter().enumerate() {
                        let (s, z) = layout::first_order(row_qs(w), row_qz(w), so);
                        for k in 0..TILE {
                            let v = f64::from(layout::dequantize(row_code(w, k as u32), s, z));
                            for b in 0..batch {
                                acc[r * batch + b] += v * xs[b * pc + TILE * j + k];
                            }
                        }
                    }
                }
                let mut add = |r: usize, w: u32| {
                    let v = f64::from(f16::from_bits(outlier_value(w)).to_f32());
                    let c = outlier_col(w) as usize;
                    for b in 0..batch {
                        acc[r * batch + b] += v * xs[b * pc + c];
                    }
                };
                match format {
                    OutlierFormat::Csr => {
                        for r in 0..TILE {
                            let o = &self.csr_row_offsets[TILE * i + r..TILE * i + r + 2];
                            for &w in &self.csr_col_vals[o[0] as usize..o[1] as usize] {
                                add(r, w);
                            }
                        }
                    }
                    OutlierFormat::Ptcsr => {
                        let o = &self.ptcsr_block_offsets[i..i + 2];
                        let block = &self.ptcsr_col_vals[o[0] as usize..o[1] as usize];
                        for r in 0..TILE {
                            for &w in block.iter().skip(r).step_by(TILE) {
                                if w != 0 {
                                    add(r, w);
                                }
                            }
                        }
                    }
                }
                acc
            })
            .collect();
        let mut y = vec![0f64; batch * rows];
        for (i, acc) in per_tile_row.iter().enumerate() {
            for r in 0..TILE.min(rows - TILE * i) {
                for b in 0..batch {
                    y[b * rows + TILE * i + r] = acc[r * batch + b];
                }
            }
        }
        Ok(y)
    }

    /// Bytes of every part of the matrix.
    pub fn sizes(&self) -> SizeReport {
        SizeReport {
            elements: self.rows * self.cols,
            padded_elements: self.padded_rows * self.padded_cols,
            outliers: self.outlier_count(),
            dense_bytes: 8 * self.dense.len(),
            csr_offset_bytes: 4 * self.csr_row_offsets.len(),
            csr_col_val_bytes: 4 * self.csr_col_vals.len(),
            ptcsr_offset_bytes: 4 * self.ptcsr_block_offsets.len(),
            ptcsr_col_val_bytes: 4 * self.ptcsr_col_vals.len(),
            permutation_bytes: 4 * self.perm.as_ref().map_or(0, Vec::len),
            header_bytes: crate::format::HEADER_BYTES,
        }
    }

    /// Bits per real weight of what the kernel reads with the chosen outlier format: the dense
    /// words, that format's offsets and words, and the permutation if any
    /// ([`SizeReport::bits_per_weight`]).
    pub fn bits_per_weight(&self) -> f64 {
        self.sizes().bits_per_weight(self.outlier_format)
    }

    /// Checks every in-memory invariant the kernel and the reference rely on: the padded
    /// shape; the dense length, the padding bits (62-63) zero, each tile's statistics bytes
    /// equal in rows `2f` and `2f + 1` (the xor-shuffles read one of the two) and its four fp16
    /// statistics finite; the CSR offsets (`padded_rows + 1`, from 0, monotone, the last equal
    /// to the word count), words (column `< cols` and increasing within a row, fp16 residual
    /// finite and non-zero, no outlier in a padding row); the PTCSR offsets (`padded_rows / 16
    /// + 1`, from 0, monotone, blocks a multiple of 16 words, the last equal to the word
    /// count), words (as CSR's, zero words only after a row's last outlier) and that they hold
    /// the CSR outliers with the least padding; the permutation (`cols` distinct entries
    /// `< cols`).
    ///
    /// # Errors
    /// The first broken invariant: [`SpqrError::Shape`], [`SpqrError::TooWide`],
    /// [`SpqrError::Header`], [`SpqrError::Dense`], [`SpqrError::Offset`],
    /// [`SpqrError::Outlier`], [`SpqrError::Inconsistent`], [`SpqrError::Permutation`].
    pub fn validate(&self) -> Result<()> {
        let (pr, pc) = padded_shape(self.rows, self.cols)?;
        check_field("padded_rows", self.padded_rows as u64, pr as u64)?;
        check_field("padded_cols", self.padded_cols as u64, pc as u64)?;
        check_field(
            "dense words",
            self.dense.len() as u64,
            (pr / TILE * pc) as u64,
        )?;
        check_dense(&self.dense)?;
        check_csr(
            self.rows,
            self.cols,
            pr,
            &self.csr_row_offsets,
            &self.csr_col_vals,
            "CSR",
        )?;
        check_ptcsr(
            self.rows,
            self.cols,
            pr,
            &self.ptcsr_block_offsets,
            &self.ptcsr_col_vals,
        )?;
        if let Some(tile_row) = ptcsr_mismatch(
            &self.csr_row_offsets,
            &self.csr_col_vals,
            &self.ptcsr_block_offsets,
            &self.ptcsr_col_vals,
        ) {
            return Err(SpqrError::Inconsistent { tile_row });
        }
        if let Some(perm) = &self.perm {
            check_permutation(perm, self.cols)?;
        }
        Ok(())
    }
}

/// The size of a SpQR matrix, part by part, in bytes. Both outlier encodings are counted; a
/// kernel reads the dense part, one encoding and the permutation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SizeReport {
    /// Real weights, `rows * cols`.
    pub elements: usize,
    /// Weights stored, padding included.
    pub padded_elements: usize,
    /// Outliers.
    pub outliers: usize,
    /// The dense words: 8 bytes per 16 weights (4 bits per padded weight).
    pub dense_bytes: usize,
    /// CSR row offsets.
    pub csr_offset_bytes: usize,
    /// CSR `col_val` words.
    pub csr_col_val_bytes: usize,
    /// PTCSR block offsets.
    pub ptcsr_offset_bytes: usize,
    /// PTCSR `col_val` words, padding included.
    pub ptcsr_col_val_bytes: usize,
    /// The input permutation (0 without one).
    pub permutation_bytes: usize,
    /// The container header.
    pub header_bytes: usize,
}

impl SizeReport {
    /// Bytes of the CSR encoding.
    pub fn csr_bytes(&self) -> usize {
        self.csr_offset_bytes + self.csr_col_val_bytes
    }

    /// Bytes of the PTCSR encoding.
    pub fn ptcsr_bytes(&self) -> usize {
        self.ptcsr_offset_bytes + self.ptcsr_col_val_bytes
    }

    /// Bytes of one outlier encoding.
    pub fn outlier_bytes(&self, format: OutlierFormat) -> usize {
        match format {
            OutlierFormat::Csr => self.csr_bytes(),
            OutlierFormat::Ptcsr => self.ptcsr_bytes(),
        }
    }

    /// Bytes a kernel reading `format` needs: dense part, that encoding, permutation.
    pub fn kernel_bytes(&self, format: OutlierFormat) -> usize {
        self.dense_bytes + self.outlier_bytes(format) + self.permutation_bytes
    }

    /// Bytes of the container (header, dense part, both encodings, permutation).
    pub fn container_bytes(&self) -> usize {
        self.header_bytes
            + self.dense_bytes
            + self.csr_bytes()
            + self.ptcsr_bytes()
            + self.permutation_bytes
    }

    /// `bytes` in bits per real weight.
    pub fn per_weight(&self, bytes: usize) -> f64 {
        bytes as f64 * 8.0 / self.elements.max(1) as f64
    }

    /// Bits per real weight of what a kernel reading `format` needs.
    pub fn bits_per_weight(&self, format: OutlierFormat) -> f64 {
        self.per_weight(self.kernel_bytes(format))
    }
}

impl std::fmt::Display for SizeReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} outliers ({:.3}%) | bits/weight: dense {:.4} CSR {:.4} PTCSR {:.4} permutation \
             {:.4} | kernel with CSR {:.4}, with PTCSR {:.4} | container {} bytes",
            self.outliers,
            100.0 * self.outliers as f64 / self.elements.max(1) as f64,
            self.per_weight(self.dense_bytes),
            self.per_weight(self.csr_bytes()),
            self.per_weight(self.ptcsr_bytes()),
            self.per_weight(self.permutation_bytes),
            self.bits_per_weight(OutlierFormat::Csr),
            self.bits_per_weight(OutlierFormat::Ptcsr),
            self.container_bytes(),
        )
    }
}

/// The second-order statistics of a tile from its 16 words.
pub(crate) fn tile_second_order(tile: &[u64]) -> SecondOrder {
    let bytes: [u8; TILE] = std::array::from_fn(|r| row_stat_byte(tile[r]));
    SecondOrder::from_row_bytes(&bytes)
}

pub(crate) fn check_len(what: &'static str, got: usize, expected: usize) -> Result<()> {
    if got == expected {
        Ok(())
    } else {
        Err(SpqrError::Length {
            what,
            got,
            expected,
        })
    }
}

/// A header field that must equal what the other fields imply.
pub(crate) fn check_field(field: &'static str, found: u64, expected: u64) -> Result<()> {
    if found == expected {
        Ok(())
    } else {
        Err(SpqrError::Header {
            field,
            found,
            expected,
        })
    }
}

fn f16_finite(bits: u16) -> bool {
    bits & 0x7c00 != 0x7c00
}

/// The dense words' rules: padding bits zero, statistics bytes doubled, statistics finite.
fn check_dense(dense: &[u64]) -> Result<()> {
    let err = |index: usize, word: u64, rule| Err(SpqrError::Dense { index, word, rule });
    for (t, tile) in dense.chunks(TILE).enumerate() {
        for (r, &w) in tile.iter().enumerate() {
            if !row_padding_ok(w) {
                return err(TILE * t + r, w, "bits 62-63 must be zero");
            }
            if r % 2 == 1 && row_stat_byte(w) != row_stat_byte(tile[r - 1]) {
                return err(
                    TILE * t + r,
                    w,
                    "rows 2f and 2f + 1 of a tile must hold the same statistics byte",
                );
            }
        }
        let so = tile_second_order(tile);
        if ![so.ss, so.sz, so.zs, so.zz].into_iter().all(f16_finite) {
            return err(
                TILE * t,
                tile[0],
                "the tile's second-order statistics must be finite fp16",
            );
        }
    }
    Ok(())
}

/// An offset table's rules: `count` entries, from 0, monotone, blocks a multiple of `step`,
/// the last equal to `words`.
fn check_offsets(
    table: &'static str,
    offsets: &[u32],
    count: usize,
    step: u64,
    words: u64,
) -> Result<()> {
    let err = |index: usize, value: u64, previous: u64, rule: &'static str| SpqrError::Offset {
        table,
        index,
        value,
        previous,
        words,
        rule,
    };
    if offsets.len() != count {
        return Err(SpqrError::Header {
            field: if table == "CSR row" {
                "CSR offset count"
            } else {
                "PTCSR offset count"
            },
            found: offsets.len() as u64,
            expected: count as u64,
        });
    }
    if offsets[0] != 0 {
        return Err(err(0, offsets[0].into(), 0, "the first offset must be 0"));
    }
    for (i, w) in offsets.windows(2).enumerate() {
        let (prev, cur) = (u64::from(w[0]), u64::from(w[1]));
        if cur < prev {
            return Err(err(i + 1, cur, prev, "offsets must not decrease"));
        }
        if cur > words {
            return Err(err(
                i + 1,
                cur,
                prev,
                "offsets must not pass the word count",
            ));
        }
        if (cur - prev) % step != 0 {
            return Err(err(
                i + 1,
                cur,
                prev,
                "PTCSR blocks must be a multiple of 16 words",
            ));
        }
    }
    let last = u64::from(offsets[count - 1]);
    if last != words {
        return Err(err(
            count - 1,
            last,
            u64::from(offsets[count.saturating_sub(2)]),
            "the last offset must equal the word count",
        ));
    }
    Ok(())
}

/// The rule an outlier word breaks, if any.
fn outlier_rule(w: u32, cols: usize) -> Option<&'static str> {
    let v = outlier_value(w);
    if outlier_col(w) as usize >= cols {
        Some("its column must be below the matrix's column count")
    } else if !f16_finite(v) {
        Some("its fp16 value must be finite")
    } else if v & 0x7fff == 0 {
        Some("its fp16 value must not be zero")
    } else {
        None
    }
}

/// CSR's rules (`what` names the format in errors).
pub(crate) fn check_csr(
    rows: usize,
    cols: usize,
    padded_rows: usize,
    row_offsets: &[u32],
    col_vals: &[u32],
    what: &'static str,
) -> Result<()> {
    check_offsets(
        "CSR row",
        row_offsets,
        padded_rows + 1,
        1,
        col_vals.len() as u64,
    )?;
    for (row, o) in row_offsets.windows(2).enumerate() {
        let (start, end) = (o[0] as usize, o[1] as usize);
        let mut prev_col = None;
        for (index, &word) in col_vals[start..end].iter().enumerate() {
            let index = start + index;
            let err = |rule| SpqrError::Outlier {
                format: what,
                index,
                row,
                word,
                rule,
            };
            if row >= rows {
                return Err(err("padding rows hold no outlier"));
            }
            if let Some(rule) = outlier_rule(word, cols) {
                return Err(err(rule));
            }
            if prev_col.is_some_and(|p| p >= outlier_col(word)) {
                return Err(err("columns must increase within a row"));
            }
            prev_col = Some(outlier_col(word));
        }
    }
    Ok(())
}

/// PTCSR's own rules (the comparison with CSR is separate).
fn check_ptcsr(
    rows: usize,
    cols: usize,
    padded_rows: usize,
    block_offsets: &[u32],
    col_vals: &[u32],
) -> Result<()> {
    check_offsets(
        "PTCSR block",
        block_offsets,
        padded_rows / TILE + 1,
        TILE as u64,
        col_vals.len() as u64,
    )?;
    for (i, o) in block_offsets.windows(2).enumerate() {
        let (start, end) = (o[0] as usize, o[1] as usize);
        for r in 0..TILE {
            let row = TILE * i + r;
            let mut prev: Option<u32> = None;
            let mut ended = false;
            for index in (start + r..end).step_by(TILE) {
                let word = col_vals[index];
                let err = |rule| SpqrError::Outlier {
                    format: "PTCSR",
                    index,
                    row,
                    word,
                    rule,
                };
                if word == 0 {
                    ended = true;
                    continue;
                }
                if ended {
                    return Err(err("a row's outliers must come before its zero words"));
                }
                if row >= rows {
                    return Err(err("padding rows hold no outlier"));
                }
                if let Some(rule) = outlier_rule(word, cols) {
                    return Err(err(rule));
                }
                if prev.is_some_and(|p| outlier_col(p) >= outlier_col(word)) {
                    return Err(err("columns must increase within a row"));
                }
                prev = Some(word);
            }
        }
    }
    Ok(())
}

/// The first tile row where the PTCSR arrays (which must satisfy [`check_ptcsr`]) do not
/// hold what [`build_ptcsr`] makes of the CSR arrays (which must satisfy [`check_csr`]), if
/// any. Compares in place: a hostile blob cannot make it allocate.
fn ptcsr_mismatch(
    row_offsets: &[u32],
    col_vals: &[u32],
    block_offsets: &[u32],
    block_words: &[u32],
) -> Option<usize> {
    let mut start = 0usize;
    for (i, o) in block_offsets.windows(2).enumerate() {
        let rows = &row_offsets[TILE * i..TILE * i + TILE + 1];
        let m = rows
            .windows(2)
            .map(|w| (w[1] - w[0]) as usize)
            .max()
            .unwrap_or(0);
        if o[0] as usize != start || (o[1] - o[0]) as usize != TILE * m {
            return Some(i);
        }
        let block = &block_words[o[0] as usize..o[1] as usize];
        for r in 0..TILE {
            let src = &col_vals[rows[r] as usize..rows[r + 1] as usize];
            for k in 0..m {
                if block[TILE * k + r] != src.get(k).copied().unwrap_or(0) {
                    return Some(i);
                }
            }
        }
        start += TILE * m;
    }
    None
}

/// The PTCSR arrays of CSR arrays (which must satisfy [`check_csr`]): per tile row a block of
/// `16 m` words, `m` the largest count among its rows.
pub(crate) fn build_ptcsr(
    padded_rows: usize,
    row_offsets: &[u32],
    col_vals: &[u32],
) -> Result<(Vec<u32>, Vec<u32>)> {
    let tile_rows = padded_rows / TILE;
    let count = |row: usize| (row_offsets[row + 1] - row_offsets[row]) as usize;
    let mut offsets = Vec::with_capacity(tile_rows + 1);
    offsets.push(0u32);
    let mut total = 0u64;
    for i in 0..tile_rows {
        let m = (0..TILE).map(|r| count(TILE * i + r)).max().unwrap_or(0);
        total += (TILE * m) as u64;
        let Ok(t) = u32::try_from(total) else {
            return Err(SpqrError::TooManyOutliers {
                format: "PTCSR",
                words: total,
            });
        };
        offsets.push(t);
    }
    let mut words = vec![0u32; total as usize];
    for (i, &start) in offsets[..tile_rows].iter().enumerate() {
        let start = start as usize;
        for r in 0..TILE {
            let row = TILE * i + r;
            let src = &col_vals[row_offsets[row] as usize..row_offsets[row + 1] as usize];
            for (k, &w) in src.iter().enumerate() {
                words[start + TILE * k + r] = w;
            }
        }
    }
    Ok((offsets, words))
}

/// CSR arrays of outliers `(row, col, fp16 bits)` sorted by row then column.
pub(crate) fn build_csr(
    padded_rows: usize,
    outliers: &[(usize, u16, u16)],
) -> Result<(Vec<u32>, Vec<u32>)> {
    if u32::try_from(outliers.len()).is_err() {
        return Err(SpqrError::TooManyOutliers {
            format: "CSR",
            words: outliers.len() as u64,
        });
    }
    let mut offsets = vec![0u32; padded_rows + 1];
    for &(row, _, _) in outliers {
        offsets[row + 1] += 1;
    }
    for r in 0..padded_rows {
        offsets[r + 1] += offsets[r];
    }
    let words = outliers
        .iter()
        .map(|&(_, col, v)| outlier_word(col, v))
        .collect();
    Ok((offsets, words))
}

/// A permutation's rules: `cols` entries, each `< cols`, all distinct.
pub(crate) fn check_permutation(perm: &[u32], cols: usize) -> Result<()> {
    if perm.len() != cols {
        return Err(SpqrError::Length {
            what: "input permutation",
            got: perm.len(),
            expected: cols,
        });
    }
    let mut seen = vec![false; cols];
    for (index, &p) in perm.iter().enumerate() {
        let err = |rule| SpqrError::Permutation {
            index,
            value: p.into(),
            rule,
        };
        let Some(s) = seen.get_mut(p as usize) else {
            return Err(err("entries must be below the column count"));
        };
        if *s {
            return Err(err("entries must be distinct"));
        }
        *s = true;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padded_shapes() {
        assert_eq!(padded_shape(1, 1).unwrap(), (16, 16));
        assert_eq!(padded_shape(17, 33).unwrap(), (32, 48));
        assert_eq!(padded_shape(16, 65536).unwrap(), (16, 65536));
        assert!(matches!(
            padded_shape(16, 65537),
            Err(SpqrError::TooWide {
                cols: 65537,
                padded_cols: 65552
            })
        ));
        assert!(matches!(
            padded_shape(0, 3),
            Err(SpqrError::Shape { rows: 0, cols: 3 })
        ));
        assert!(padded_shape(3, 0).is_err());
        assert!(padded_shape(u32::MAX as usize, 1).is_err());
        assert!(padded_shape(usize::MAX, 1).is_err());
        assert_eq!(
            padded_shape(u32::MAX as usize - 15, 1).unwrap().0,
            u32::MAX as usize - 15
        );
        assert!(matches!(
            OutlierFormat::from_code(2),
            Err(SpqrError::FormatCode { found: 2 })
        ));
        for f in OutlierFormat::ALL {
            assert_eq!(OutlierFormat::from_code(f.code()).unwrap(), f);
        }
    }

    #[test]
    fn ptcsr_pads_each_tile_row_to_its_longest_row() {
        // 32 padded rows: row 1 has 2 outliers, row 3 one, row 17 three.
        let v = 0x3c00; // 1.0
        let outliers = [
            (1, 4u16, v),
            (1, 9, v),
            (3, 0, v),
            (17, 1, v),
            (17, 2, v),
            (17, 3, v),
        ];
        let (ro, cv) = build_csr(32, &outliers).unwrap();
        assert_eq!(ro.len(), 33);
        assert_eq!((ro[1], ro[2], ro[4], ro[18], ro[32]), (0, 2, 3, 6, 6));
        let (bo, bw) = build_ptcsr(32, &ro, &cv).unwrap();
        assert_eq!(bo, vec![0, 32, 80]);
        assert_eq!(bw[1], outlier_word(4, v));
        assert_eq!(bw[16 + 1], outlier_word(9, v));
        assert_eq!(bw[3], outlier_word(0, v));
        assert_eq!(bw[16 + 3], 0);
        assert_eq!(bw[32 + 1], outlier_word(1, v));
        assert_eq!(bw[32 + 16 + 1], outlier_word(2, v));
        assert_eq!(bw[32 + 32 + 1], outlier_word(3, v));
        assert_eq!(bw.iter().filter(|&&w| w != 0).count(), 6);
    }

    #[test]
    fn offset_rules() {
        let rule =
            |o: &[u32], step, words| match check_offsets("PTCSR block", o, o.len(), step, words) {
                Err(SpqrError::Offset { index, rule, .. }) => (index, rule),
                other => panic!("{other:?}"),
            };
        assert!(check_offsets("CSR row", &[0, 0, 3, 5], 4, 1, 5).is_ok());
        assert!(rule(&[1, 5], 1, 5).1.contains("first"));
        assert!(rule(&[0, 2, 1], 1, 2).1.contains("decrease"));
        assert!(rule(&[0, 6, 6], 1, 5).1.contains("pass"));
        assert!(rule(&[0, 8, 16], 16, 16).1.contains("multiple"));
        assert_eq!(rule(&[0, 16, 16], 16, 32).0, 2);
        assert!(matches!(
            check_offsets("CSR row", &[0, 0], 3, 1, 0),
            Err(SpqrError::Header {
                field: "CSR offset count",
                found: 2,
                expected: 3
            })
        ));
    }

    #[test]
    fn permutation_rules() {
        assert!(check_permutation(&[2, 0, 1], 3).is_ok());
        assert!(matches!(
            check_permutation(&[2, 0, 3], 3),
            Err(SpqrError::Permutation {
                index: 2,
                value: 3,
                ..
            })
        ));
        assert!(matches!(
            check_permutation(&[1, 0, 1], 3),
            Err(SpqrError::Permutation {
                index: 2,
                value: 1,
                ..
            })
        ));
        assert!(matches!(
            check_permutation(&[0, 1], 3),
            Err(SpqrError::Length { .. })
        ));
    }
}
