//! [`SpqrMatrix`], a SpQR matrix in memory, its validation and its CPU reference product.

use cmv_format::{
    FormatError, OffsetRules, PaddedShape, batch_len, check_field, check_len, check_offsets,
    check_reference_args,
};
use half::f16;
use rayon::prelude::*;
use spqr_kernels::layout::{
    self, SecondOrder, TILE, outlier_col, outlier_value, outlier_word, row_code, row_padding_ok,
    row_qs, row_qz, row_stat_byte,
};

use crate::error::{Result, SpqrError};

/// Largest padded column count: outlier columns are 16-bit.
pub const MAX_PADDED_COLS: usize = 1 << 16;
/// The format's name, in errors.
pub(crate) const NAME: &str = "spqr";

cmv_format::header_code! {
    /// Which outlier encoding the kernel reads (`docs/SPQR.md`, "Outliers"); both are stored.
    /// The container's outlier-format code: 0 for CSR, 1 for PTCSR; names `"CSR"` and
    /// `"PTCSR"`.
    pub enum OutlierFormat("outlier format") {
        /// Row offsets and each row's `col_val` words (the smaller one; the default).
        Csr = 0 => "CSR",
        /// Padded, transposed CSR: per tile row a block of `16 m` words, coalesced reads.
        Ptcsr = 1 => "PTCSR",
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
    pub(crate) shape: PaddedShape,
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
/// [`FormatError::Shape`] for an empty matrix or padded rows past `u32::MAX`,
/// [`SpqrError::TooWide`] for padded columns past 65536.
pub fn padded_shape(rows: usize, cols: usize) -> Result<(usize, usize)> {
    let pad = |n: usize| n.div_ceil(TILE).checked_mul(TILE);
    let shape = || FormatError::Shape {
        format: NAME,
        rows,
        cols,
        rule: "both sides must be at least 1, the rows padded to 16 at most u32::MAX",
    };
    let (Some(pr), Some(pc)) = (pad(rows), pad(cols)) else {
        return Err(shape().into());
    };
    if rows == 0 || cols == 0 || u32::try_from(pr).is_err() {
        return Err(shape().into());
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
        let (padded_rows, _) = padded_shape(rows, cols)?;
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
        Self::from_stored(
            (rows, cols),
            dense,
            [
                csr_row_offsets,
                csr_col_vals,
                ptcsr_block_offsets,
                ptcsr_col_vals,
            ],
            OutlierFormat::Csr,
            perm,
        )
    }

    /// A matrix from every stored array (the outlier arrays in container order: CSR row
    /// offsets, CSR words, PTCSR block offsets, PTCSR words), checked by
    /// [`SpqrMatrix::validate`].
    pub(crate) fn from_stored(
        (rows, cols): (usize, usize),
        dense: Vec<u64>,
        outliers: [Vec<u32>; 4],
        outlier_format: OutlierFormat,
        perm: Option<Vec<u32>>,
    ) -> Result<Self> {
        let (padded_rows, padded_cols) = padded_shape(rows, cols)?;
        let [
            csr_row_offsets,
            csr_col_vals,
            ptcsr_block_offsets,
            ptcsr_col_vals,
        ] = outliers;
        let m = SpqrMatrix {
            shape: PaddedShape::new(rows, cols, padded_rows, padded_cols),
            dense,
            csr_row_offsets,
            csr_col_vals,
            ptcsr_block_offsets,
            ptcsr_col_vals,
            outlier_format,
            perm,
        };
        m.validate()?;
        Ok(m)
    }

    cmv_format::shape_getters!(shape, "a multiple of 16", "a multiple of 16, at most 65536");

    /// Tile rows: `padded_rows / 16`.
    pub fn tile_rows(&self) -> usize {
        self.shape.padded_rows() / TILE
    }

    /// Tile columns: `padded_cols / 16`.
    pub fn tile_cols(&self) -> usize {
        self.shape.padded_cols() / TILE
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
    /// [`FormatError::Batch`] for batch 0 or a `batch * cols` past `usize`,
    /// [`FormatError::Length`] when `x` is not `batch * cols` long.
    pub fn permute_input(&self, x: &[f16], batch: usize) -> Result<Vec<f16>> {
        let cols = self.shape.cols();
        check_reference_args(x, batch, cols)?;
        Ok(match &self.perm {
            None => x.to_vec(),
            Some(p) => (0..batch)
                .flat_map(|b| p.iter().map(move |&c| x[b * cols + c as usize]))
                .collect(),
        })
    }

    /// The second-order statistics of tile `(i, j)`, rebuilt from its 16 rows' bytes; `None`
    /// when `i >= tile_rows()` or `j >= tile_cols()`.
    pub fn tile_statistics(&self, i: usize, j: usize) -> Option<SecondOrder> {
        if i >= self.tile_rows() || j >= self.tile_cols() {
            return None;
        }
        let base = i * self.shape.padded_cols() + TILE * j;
        Some(tile_second_order(&self.dense[base..base + TILE]))
    }

    /// The first-order scale and zero of the group of `row` in tile column `j`, in fp32 as
    /// the kernel computes them (`layout::first_order`); `None` when `row >= padded_rows()`
    /// or `j >= tile_cols()`.
    pub fn group_statistics(&self, row: usize, j: usize) -> Option<(f32, f32)> {
        let so = self.tile_statistics(row / TILE, j)?;
        let w = self.dense[(row / TILE) * self.shape.padded_cols() + TILE * j + row % TILE];
        Some(layout::first_order(row_qs(w), row_qz(w), so))
    }

    /// The dense part dequantized, `rows x cols`, in the stored column order, padding
    /// stripped: `s (q - z)` in fp32 from the fp16 statistics, exactly as the kernel computes it.
    pub fn dense_part(&self) -> Vec<f32> {
        let (cols, pc) = (self.shape.cols(), self.shape.padded_cols());
        let mut out = vec![0f32; self.shape.rows() * cols];
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
            w[o.row * self.shape.cols() + o.col] += o.value.to_f32();
        }
        match &self.perm {
            None => w,
            Some(perm) => {
                let mut out = vec![0f32; w.len()];
                for (src, dst) in w
                    .chunks(self.shape.cols())
                    .zip(out.chunks_mut(self.shape.cols()))
                {
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
    /// Non-finite inputs propagate as in IEEE arithmetic: a NaN or infinite input makes every
    /// output of its vector non-finite (NaN or infinite: every row multiplies every input, and
    /// a zero weight times an infinite input is NaN), the other vectors are unaffected. The GPU
    /// product does the same: non-finite outputs for the same vectors, the others unaffected
    /// (the order of its operations differs, so an infinite output here may be NaN there).
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
    /// Any batch of at least one vector is taken (the GPU kernels take 1 to
    /// `spqr_kernels::MAX_BATCH`); non-finite inputs as [`SpqrMatrix::gemv_reference`] says.
    ///
    /// # Errors
    /// [`FormatError::Batch`] for batch 0 (or a `batch * cols` past `usize`),
    /// [`FormatError::Length`] when `x` does not hold `batch * cols` values.
    pub fn gemv_reference_with(
        &self,
        format: OutlierFormat,
        x: &[f16],
        batch: usize,
    ) -> Result<Vec<f64>> {
        let (rows, cols, pc) = (
            self.shape.rows(),
            self.shape.cols(),
            self.shape.padded_cols(),
        );
        check_reference_args(x, batch, cols)?;
        let out_len = batch_len(batch, rows)?;
        // The inputs in the stored column order, f64, padded with zeros.
        let mut xs = vec![0f64; batch_len(batch, pc)?];
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
        let mut y = vec![0f64; out_len];
        for (i, acc) in per_tile_row.iter().enumerate() {
            for r in 0..TILE.min(rows - TILE * i) {
                for b in 0..batch {
                    y[b * rows + TILE * i + r] = acc[r * batch + b];
                }
            }
        }
        Ok(y)
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
    /// The first broken invariant: [`FormatError::Shape`], [`SpqrError::TooWide`],
    /// [`FormatError::Header`], [`SpqrError::Dense`], [`FormatError::Offset`],
    /// [`SpqrError::Outlier`], [`SpqrError::Inconsistent`], [`SpqrError::Permutation`].
    pub fn validate(&self) -> Result<()> {
        let (pr, pc) = padded_shape(self.shape.rows(), self.shape.cols())?;
        check_field("padded_rows", self.shape.padded_rows() as u64, pr as u64)?;
        check_field("padded_cols", self.shape.padded_cols() as u64, pc as u64)?;
        check_field(
            "dense words",
            self.dense.len() as u64,
            (pr / TILE * pc) as u64,
        )?;
        check_dense(&self.dense)?;
        check_csr(
            self.shape.rows(),
            self.shape.cols(),
            pr,
            &self.csr_row_offsets,
            &self.csr_col_vals,
            "CSR",
        )?;
        check_ptcsr(
            self.shape.rows(),
            self.shape.cols(),
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
            check_permutation(perm, self.shape.cols())?;
        }
        Ok(())
    }
}

/// The second-order statistics of a tile from its 16 words.
pub(crate) fn tile_second_order(tile: &[u64]) -> SecondOrder {
    let bytes: [u8; TILE] = std::array::from_fn(|r| row_stat_byte(tile[r]));
    SecondOrder::from_row_bytes(&bytes)
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
        row_offsets,
        &OffsetRules {
            table: "CSR row",
            count: padded_rows + 1,
            multiple: 1,
            min_gap: 0,
            words: col_vals.len() as u64,
        },
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
    // Offsets that are multiples of 16 from 0: every block is a multiple of 16 words.
    check_offsets(
        block_offsets,
        &OffsetRules {
            table: "PTCSR block",
            count: padded_rows / TILE + 1,
            multiple: TILE as u64,
            min_gap: 0,
            words: col_vals.len() as u64,
        },
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
    check_len("input permutation", perm.len(), cols)?;
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
    use cmv_format::HeaderCode;

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
            Err(SpqrError::Format(FormatError::Shape {
                format: "spqr",
                rows: 0,
                cols: 3,
                ..
            }))
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
            Err(FormatError::Code {
                field: "outlier format",
                found: 2,
                ..
            })
        ));
        for &f in OutlierFormat::ALL {
            assert_eq!(OutlierFormat::from_code(f.code()).unwrap(), f);
        }
        assert_eq!(
            OutlierFormat::from_name("PTCSR"),
            Some(OutlierFormat::Ptcsr)
        );
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
        // The tables go through cmv_format::check_offsets: a CSR table may repeat an offset,
        // a PTCSR table's offsets are multiples of 16.
        let v = 0x3c00u16;
        let (ro, cv) = build_csr(32, &[(1, 4, v), (1, 9, v), (17, 1, v)]).unwrap();
        check_csr(32, 32, 32, &ro, &cv, "CSR").unwrap();
        let (bo, bw) = build_ptcsr(32, &ro, &cv).unwrap();
        check_ptcsr(32, 32, 32, &bo, &bw).unwrap();
        let offset = |e: SpqrError| match e {
            SpqrError::Format(FormatError::Offset {
                table, index, rule, ..
            }) => (table, index, rule),
            other => panic!("{other:?}"),
        };
        let mut bad = ro.clone();
        bad[0] = 1;
        let (table, index, rule) = offset(check_csr(32, 32, 32, &bad, &cv, "CSR").unwrap_err());
        assert_eq!((table, index), ("CSR row", 0));
        assert!(rule.contains("first"));
        let mut bad = bo.clone();
        bad[1] -= 8;
        let (table, index, rule) = offset(check_ptcsr(32, 32, 32, &bad, &bw).unwrap_err());
        assert_eq!((table, index), ("PTCSR block", 1));
        assert!(rule.contains("multiple"));
        assert!(matches!(
            check_csr(32, 32, 32, &ro[..32], &cv, "CSR"),
            Err(SpqrError::Format(FormatError::Header {
                found: 32,
                expected: 33,
                ..
            }))
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
            Err(SpqrError::Format(FormatError::Length { .. }))
        ));
    }
}
