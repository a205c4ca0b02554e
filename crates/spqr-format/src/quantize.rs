//! The SpQR encoder (`docs/SPQR.md`, "Quantization"): data-free min/max statistics, or GPTQ
//! with a calibration; outliers kept as fp16 residuals.
//!
//! Both paths are one algorithm. Tile column by tile column (16 columns), each tile's
//! statistics are fitted to its current weights (`fit_tile`), then its columns are quantized
//! one by one, each weight to the nearest of its group's 8 decoded levels. With a
//! calibration, each column's error (divided by `U_cc`, `U` the upper Cholesky factor of the
//! damped inverse Hessian, `H^-1 = U^T U`) is propagated to the not-yet-quantized columns of
//! the same row through row `c` of `U`: at once to the rest of the tile column, and after the
//! tile column to every later one. Data-free is the same with `H = I`: no propagation. Rows
//! never exchange errors, so tile rows are quantized in parallel (rayon), each on an f64 copy
//! of its 16 rows.
//!
//! Outliers take two runs: the first (with no outlier) records each weight's saliency when
//! its tile column is reached, divided by `U_cc^2` (`[H^-1]_cc` of the columns not yet
//! quantized; 1 data-free): by default ([`OutlierCriterion::Error`]) its squared error under
//! the full bi-level quantization of its tile, or with [`OutlierCriterion::LeaveOneOut`] that
//! plus how much its group's error drops without it. The
//! `floor(outlier_fraction * rows * cols)` most salient weights (of those with a non-zero
//! saliency; ties by position) are the outliers of the second run, which fits the statistics
//! without them and stores each one's fp16 residual `w - w'` (rounded to nearest; a residual
//! that rounds to zero is not stored).

use half::f16;
use rayon::prelude::*;
use spqr_kernels::layout::{self, MAX_CODE, SecondOrder, TILE, pack_row};

use cmv_format::{FormatError, Weights, check_finite, check_len};

use crate::error::{Result, SpqrError};
use crate::linalg;
use crate::matrix::{OutlierFormat, SpqrMatrix, build_csr, build_ptcsr, padded_shape};

/// Largest finite fp16 value.
const F16_MAX: f64 = 65504.0;
/// Levels of a 3-bit code.
const LEVELS: usize = MAX_CODE as usize + 1;

/// Calibration data for GPTQ.
#[derive(Clone, Debug, PartialEq)]
pub enum Calibration {
    /// `samples` input vectors of `cols` values each, `x[s * cols + c]`; `H = X^T X` is
    /// computed in f64.
    Inputs {
        /// The inputs.
        x: Vec<f32>,
        /// How many vectors.
        samples: usize,
    },
    /// The Gram matrix `H = X^T X` itself, `cols x cols` row-major, symmetric positive
    /// semi-definite (it is symmetrized as `(H + H^T) / 2`).
    Gram {
        /// The matrix.
        h: Vec<f64>,
    },
}

/// How [`quantize`] works.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantizeOptions {
    /// Fraction of the weights kept as fp16 outliers, in `0..=1`: `floor(fraction * rows *
    /// cols)` at most (default 0.01).
    pub outlier_fraction: f64,
    /// Calibration for GPTQ; `None` (the default) quantizes data-free.
    pub calibration: Option<Calibration>,
    /// Quantize the columns in order of decreasing `diag(H)` (needs a calibration; default
    /// false). The permutation is stored ([`SpqrMatrix::input_permutation`]).
    pub permute: bool,
    /// GPTQ damping: `H + damping * mean(diag H) I` is factored (default 0.01, at least 0).
    pub damping: f64,
    /// How the outliers are ranked (default [`OutlierCriterion::Error`]).
    pub outlier_criterion: OutlierCriterion,
    /// The outlier encoding the kernel reads, recorded in the matrix (default CSR; both are
    /// always stored, and [`SpqrMatrix::set_outlier_format`] changes it later).
    pub outlier_format: OutlierFormat,
}

/// How the first run ranks the weights for the outliers (each figure divided by `U_cc^2`,
/// 1 data-free).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OutlierCriterion {
    /// The squared error of the weight's own bi-level quantization (`docs/SPQR.md`).
    #[default]
    Error,
    /// The weight's own squared error plus how much the rest of its group's squared error
    /// drops when the group's first-order min/max statistics are fitted without it (SpQR's
    /// leave-one-out criterion): it also finds the extreme weights that stretch a group's
    /// range while being coded almost exactly themselves.
    LeaveOneOut,
}

impl Default for QuantizeOptions {
    fn default() -> Self {
        Self {
            outlier_fraction: 0.01,
            calibration: None,
            permute: false,
            damping: 0.01,
            outlier_criterion: OutlierCriterion::Error,
            outlier_format: OutlierFormat::Csr,
        }
    }
}

/// Quantizes an fp16 matrix ([`quantize`] on its exact fp32 values).
///
/// # Errors
/// As [`quantize`].
pub fn quantize_f16(
    w: &[f16],
    rows: usize,
    cols: usize,
    opts: &QuantizeOptions,
) -> Result<SpqrMatrix> {
    padded_shape(rows, cols)?;
    let w = Weights::new(w, rows, cols)?;
    let w32: Vec<f32> = w.data().iter().map(|v| v.to_f32()).collect();
    quantize(&w32, rows, cols, opts)
}

/// Quantizes a `rows x cols` row-major matrix, exactly `rows * cols` weights, to SpQR
/// ([`quantize_weights`]).
///
/// # Errors
/// As [`quantize_weights`]; the shape is checked before the length
/// ([`FormatError::Length`] for any other number of weights).
pub fn quantize(w: &[f32], rows: usize, cols: usize, opts: &QuantizeOptions) -> Result<SpqrMatrix> {
    padded_shape(rows, cols)?;
    quantize_weights(Weights::new(w, rows, cols)?, opts)
}

/// Quantizes a matrix to SpQR (`docs/SPQR.md`; the module docs say how). The outlier format
/// is `opts.outlier_format`.
///
/// # Errors
/// [`FormatError::Shape`] / [`SpqrError::TooWide`] for an unsupported shape,
/// [`FormatError::Length`] for calibration buffers of the wrong length,
/// [`FormatError::NonFinite`] for a NaN or infinite weight or calibration value,
/// [`SpqrError::WeightRange`] for a weight outside the fp16 range, [`SpqrError::Option`] for an
/// option out of range, [`SpqrError::PermuteWithoutCalibration`], [`SpqrError::Samples`] for
/// calibration inputs with no sample, [`SpqrError::NotPositiveDefinite`] when the damped Gram
/// matrix cannot be factored, [`SpqrError::TooManyOutliers`] when the outliers pass 32-bit
/// offsets.
pub fn quantize_weights(weights: Weights<'_, f32>, opts: &QuantizeOptions) -> Result<SpqrMatrix> {
    let (rows, cols) = (weights.rows(), weights.cols());
    let (padded_rows, padded_cols) = padded_shape(rows, cols)?;
    check_weights(weights)?;
    let w = weights.data();
    let fraction = opts.outlier_fraction;
    if !(0.0..=1.0).contains(&fraction) {
        return Err(SpqrError::Option {
            name: "outlier_fraction",
            value: fraction,
            rule: "must be in 0..=1 (the default is 0.01)",
        });
    }
    if !(opts.damping.is_finite() && opts.damping >= 0.0) {
        return Err(SpqrError::Option {
            name: "damping",
            value: opts.damping,
            rule: "must be finite and at least 0 (the default is 0.01)",
        });
    }
    if opts.permute && opts.calibration.is_none() {
        return Err(SpqrError::PermuteWithoutCalibration);
    }

    let (perm, u) = match &opts.calibration {
        None => (None, None),
        Some(cal) => {
            let h = hessian(cal, cols)?;
            let perm = opts.permute.then(|| order_by_diagonal(&h, cols));
            let h = match &perm {
                None => h,
                Some(p) => permute_square(&h, cols, p),
            };
            (
                perm,
                Some(linalg::inverse_upper_factor(&h, cols, opts.damping)?),
            )
        }
    };
    let ctx = Ctx {
        criterion: opts.outlier_criterion,
        cols,
        padded_cols,
        u: u.as_deref(),
    };
    // Tile rows are independent: each task works on an f64 copy of its (permuted) rows.
    let tile_rows_of = |i: usize| -> Vec<f64> {
        let block = &w[i * TILE * cols..((i + 1) * TILE * cols).min(w.len())];
        match &perm {
            None => block.iter().map(|&v| f64::from(v)).collect(),
            Some(p) => block
                .chunks(cols)
                .flat_map(|row| p.iter().map(|&c| f64::from(row[c as usize])))
                .collect(),
        }
    };

    let n = rows * cols;
    let budget = (fraction * n as f64).floor() as usize;
    let outliers = (budget > 0).then(|| {
        let mut sal = vec![0f32; n];
        sal.par_chunks_mut(TILE * cols)
            .enumerate()
            .for_each(|(i, sr)| {
                ctx.tile_row(&mut tile_rows_of(i), None, Some(sr), None);
            });
        select_outliers(&sal, budget)
    });

    let mut dense = vec![0u64; padded_rows / TILE * padded_cols];
    let found: Vec<Vec<(usize, u16, u16)>> = dense
        .par_chunks_mut(padded_cols)
        .enumerate()
        .map(|(i, words)| {
            let mut wr = tile_rows_of(i);
            let marks = outliers
                .as_deref()
                .map(|o| &o[i * TILE * cols..i * TILE * cols + wr.len()]);
            let mut found = ctx.tile_row(&mut wr, marks, None, Some(words));
            found.sort_unstable();
            found
                .into_iter()
                .map(|(r, c, v)| (TILE * i + r, c, v))
                .collect()
        })
        .collect();
    let found: Vec<(usize, u16, u16)> = found.into_iter().flatten().collect();
    let (csr_row_offsets, csr_col_vals) = build_csr(padded_rows, &found)?;
    let (ptcsr_block_offsets, ptcsr_col_vals) =
        build_ptcsr(padded_rows, &csr_row_offsets, &csr_col_vals)?;
    // Checked as a loaded matrix is: linear in its size, next to quantization's cost.
    SpqrMatrix::from_stored(
        (rows, cols),
        dense,
        [
            csr_row_offsets,
            csr_col_vals,
            ptcsr_block_offsets,
            ptcsr_col_vals,
        ],
        opts.outlier_format,
        perm,
    )
}

/// The weights' rules (their count is [`Weights`']): finite, within the fp16 range.
pub(crate) fn check_weights(w: Weights<'_, f32>) -> Result<()> {
    check_finite("weight", w.data())?;
    for (index, &v) in w.data().iter().enumerate() {
        if f64::from(v).abs() > F16_MAX {
            return Err(SpqrError::WeightRange { index, value: v });
        }
    }
    Ok(())
}

/// The Gram matrix of a calibration, checked.
fn hessian(cal: &Calibration, cols: usize) -> Result<Vec<f64>> {
    match cal {
        Calibration::Inputs { x, samples } => {
            if *samples == 0 {
                return Err(SpqrError::Samples { samples: 0 });
            }
            let expected = samples.checked_mul(cols).ok_or(FormatError::Length {
                what: "calibration inputs",
                got: x.len(),
                expected: usize::MAX,
            })?;
            check_len("calibration inputs", x.len(), expected)?;
            check_finite("calibration input", x)?;
            Ok(linalg::gram(x, *samples, cols))
        }
        Calibration::Gram { h } => {
            check_len("Gram matrix", h.len(), cols * cols)?;
            check_finite("Gram matrix entry", h)?;
            // Symmetrized, so that no triangle is preferred.
            let mut sym = h.clone();
            for a in 0..cols {
                for b in 0..a {
                    let v = 0.5 * (h[a * cols + b] + h[b * cols + a]);
                    sym[a * cols + b] = v;
                    sym[b * cols + a] = v;
                }
            }
            Ok(sym)
        }
    }
}

/// Columns by decreasing `diag(H)`, ties by index.
fn order_by_diagonal(h: &[f64], n: usize) -> Vec<u32> {
    let mut perm: Vec<u32> = (0..n as u32).collect();
    perm.sort_by(|&a, &b| {
        let (da, db) = (
            h[a as usize * n + a as usize],
            h[b as usize * n + b as usize],
        );
        db.total_cmp(&da).then(a.cmp(&b))
    });
    perm
}

/// `H[perm][:, perm]`.
fn permute_square(h: &[f64], n: usize, perm: &[u32]) -> Vec<f64> {
    let mut out = vec![0f64; n * n];
    for (a, &pa) in perm.iter().enumerate() {
        for (b, &pb) in perm.iter().enumerate() {
            out[a * n + b] = h[pa as usize * n + pb as usize];
        }
    }
    out
}

/// Marks the `budget` most salient weights (saliency above zero; ties by position).
fn select_outliers(sal: &[f32], budget: usize) -> Vec<bool> {
    let mut marks = vec![false; sal.len()];
    let mut positive: Vec<f32> = sal.iter().copied().filter(|&s| s > 0.0).collect();
    if positive.is_empty() {
        return marks;
    }
    let take = budget.min(positive.len());
    // The take-th largest saliency.
    let (_, &mut threshold, _) = positive.select_nth_unstable_by(take - 1, |a, b| b.total_cmp(a));
    let mut left = take;
    for (m, &s) in marks.iter_mut().zip(sal) {
        if s > threshold {
            *m = true;
            left -= 1;
        }
    }
    for (m, &s) in marks.iter_mut().zip(sal) {
        if left == 0 {
            break;
        }
        if s == threshold {
            *m = true;
            left -= 1;
        }
    }
    marks
}

/// `x` to fp16 bits, rounded to nearest (ties to even) and saturated to the finite range.
///
/// `half::f16::from_f64` may round twice (through f32) and miss the nearest value by one
/// step; the neighbours of its result are compared in f64 instead.
pub(crate) fn f16_sat(x: f64) -> u16 {
    let x = x.clamp(-F16_MAX, F16_MAX);
    let h = f16::from_f64(x).to_bits();
    let (sign, mag) = (h & 0x8000, h & 0x7fff);
    let mut best = mag;
    let dist = |m: u16| (f16::from_bits(sign | m).to_f64() - x).abs();
    for m in [mag.wrapping_sub(1), mag + 1] {
        if m <= 0x7bff {
            let (d, b) = (dist(m), dist(best));
            if d < b || (d == b && m % 2 == 0) {
                best = m;
            }
        }
    }
    sign | best
}

/// The 3-bit min/max fit of a set of values: `(scale, zero)` as fp16 bits, the values coded
/// `scale (q - zero)`. An empty set, or one of zeros, gives zeros; a single value `v` is fitted
/// as the range between 0 and `v`.
fn fit_second_order(values: impl Iterator<Item = f64>) -> (u16, u16) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi {
        return (0, 0);
    }
    if hi == lo {
        (lo, hi) = (lo.min(0.0), hi.max(0.0));
    }
    if hi == lo {
        return (0, 0);
    }
    let s = (hi - lo) / f64::from(MAX_CODE);
    (f16_sat(s), f16_sat(-lo / s))
}

/// The code in `0..=7` whose value `level(q)` is nearest `target` (ties to the lower code).
fn nearest_code(target: f64, level: impl Fn(u32) -> f32) -> u32 {
    let mut best = (f64::INFINITY, 0);
    for q in 0..=MAX_CODE {
        let d = (f64::from(level(q)) - target).abs();
        if d < best.0 {
            best = (d, q);
        }
    }
    best.1
}

/// Squared error of the plain first-order min/max 3-bit quantization (exact statistics) of
/// `v` except index `skip`, each term weighted by `w`.
fn first_order_error(v: &[f64], w: &[f64], skip: Option<usize>) -> f64 {
    let keep = |i: &usize| Some(*i) != skip;
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for i in (0..v.len()).filter(keep) {
        lo = lo.min(v[i]);
        hi = hi.max(v[i]);
    }
    if hi <= lo || lo.is_infinite() {
        return 0.0;
    }
    let s = (hi - lo) / f64::from(MAX_CODE);
    (0..v.len())
        .filter(keep)
        .map(|i| {
            let q = ((v[i] - lo) / s).round().clamp(0.0, f64::from(MAX_CODE));
            let e = v[i] - (lo + s * q);
            e * e * w[i]
        })
        .sum()
}

/// The leave-one-out saliency of each weight of a group ([`OutlierCriterion::LeaveOneOut`]).
fn leave_one_out(v: &[f64], w: &[f64], out: &mut [f32]) {
    let base = first_order_error(v, w, None);
    for (k, o) in out.iter_mut().enumerate() {
        *o = (base - first_order_error(v, w, Some(k))).max(0.0) as f32;
    }
}

/// The fitted statistics of one tile.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TileFit {
    /// Second-order statistics.
    pub so: SecondOrder,
    /// First-order scale codes.
    pub qs: [u32; TILE],
    /// First-order zero codes.
    pub qz: [u32; TILE],
    /// Each group's 8 dequantized levels, in fp32 as the kernel computes them.
    pub levels: [[f32; LEVELS]; TILE],
}

impl TileFit {
    /// The code of `v` in group `r` (its nearest level) and that level.
    fn code(&self, r: usize, v: f64) -> (u32, f32) {
        let q = nearest_code(v, |q| self.levels[r][q as usize]);
        (q, self.levels[r][q as usize])
    }
}

/// Fits a tile's statistics to the weights `vals[r][k]` where `counted[r][k]` (real weights
/// that are not outliers), per `docs/SPQR.md`:
///
/// 1. each group's min/max over its counted weights gives its exact scale
///    `s* = (hi - lo) / 7` and midpoint (a group of one value `v` spans 0..v; of zeros, 0);
/// 2. the tile's counted groups' `s*` are fitted to 3 bits (min/max, `ss` and `sz` in fp16),
///    each group's `qs` is the code of the decoded scale `s'` nearest `s*`;
/// 3. each counted group with `s' != 0` and a non-zero range gets the zero `z* = 3.5 - mid /
///    s'` that centers its 8 levels on its range; these are fitted to 3 bits (`zs`, `zz`) and
///    each group's `qz` is the code nearest `z*`. A group with no such zero (empty, all
///    outliers, all zeros, padding) takes the zero code that puts a level nearest 0.
pub(crate) fn fit_tile(vals: &[[f64; TILE]; TILE], counted: &[[bool; TILE]; TILE]) -> TileFit {
    let mut s_exact = [None::<(f64, f64)>; TILE];
    for r in 0..TILE {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for k in 0..TILE {
            if counted[r][k] {
                lo = lo.min(vals[r][k]);
                hi = hi.max(vals[r][k]);
            }
        }
        if lo <= hi {
            if hi == lo {
                (lo, hi) = (lo.min(0.0), hi.max(0.0));
            }
            s_exact[r] = Some(((hi - lo) / f64::from(MAX_CODE), 0.5 * (lo + hi)));
        }
    }
    let (ss, sz) = fit_second_order(s_exact.iter().flatten().map(|&(s, _)| s));
    let mut so = SecondOrder {
        ss,
        sz,
        zs: 0,
        zz: 0,
    };
    let scale = |q: u32, so: SecondOrder| layout::first_order(q, 0, so).0;
    let mut qs = [0u32; TILE];
    let mut z_exact = [None::<f64>; TILE];
    for r in 0..TILE {
        let target = s_exact[r].map_or(0.0, |(s, _)| s);
        qs[r] = nearest_code(target, |q| scale(q, so));
        let s = f64::from(scale(qs[r], so));
        if let Some((s_star, mid)) = s_exact[r]
            && s_star > 0.0
            && s != 0.0
        {
            z_exact[r] = Some(3.5 - mid / s);
        }
    }
    (so.zs, so.zz) = fit_second_order(z_exact.iter().flatten().copied());
    let mut qz = [0u32; TILE];
    let mut levels = [[0f32; LEVELS]; TILE];
    for r in 0..TILE {
        let level_set = |qz: u32| -> [f32; LEVELS] {
            let (s, z) = layout::first_order(qs[r], qz, so);
            std::array::from_fn(|q| layout::dequantize(q as u32, s, z))
        };
        qz[r] = match z_exact[r] {
            Some(z) => nearest_code(z, |q| layout::first_order(qs[r], q, so).1),
            None => {
                let smallest = |q: u32| {
                    level_set(q)
                        .iter()
                        .map(|v| f64::from(*v).abs())
                        .fold(f64::INFINITY, f64::min)
                };
                nearest_code(0.0, |q| smallest(q) as f32)
            }
        };
        levels[r] = level_set(qz[r]);
    }
    TileFit { so, qs, qz, levels }
}

/// What one run over a tile row needs.
struct Ctx<'a> {
    criterion: OutlierCriterion,
    cols: usize,
    padded_cols: usize,
    /// `U` (`cols x cols`), or `None` for `H = I`.
    u: Option<&'a [f64]>,
}

impl Ctx<'_> {
    /// Runs the quantization over one tile row: `w` holds its real rows (`nr x cols`, updated
    /// in place as errors propagate). With `saliency`, records each weight's saliency when its
    /// tile column is reached; with `outliers`, keeps those weights as residuals (returned as
    /// `(row in tile, col, fp16 bits)`); with `words`, writes the tile row's dense words.
    fn tile_row(
        &self,
        w: &mut [f64],
        outliers: Option<&[bool]>,
        mut saliency: Option<&mut [f32]>,
        mut words: Option<&mut [u64]>,
    ) -> Vec<(usize, u16, u16)> {
        let cols = self.cols;
        let nr = w.len() / cols;
        let mut found = Vec::new();
        for j in 0..self.padded_cols / TILE {
            let c0 = TILE * j;
            let nc = TILE.min(cols.saturating_sub(c0));
            let is_outlier = |r: usize, k: usize| outliers.is_some_and(|o| o[r * cols + c0 + k]);
            let mut vals = [[0f64; TILE]; TILE];
            let mut counted = [[false; TILE]; TILE];
            for r in 0..nr {
                for k in 0..nc {
                    vals[r][k] = w[r * cols + c0 + k];
                    counted[r][k] = !is_outlier(r, k);
                }
            }
            let fit = fit_tile(&vals, &counted);
            let diag = |c: usize| self.u.map_or(1.0, |u| u[c * cols + c]);
            if let Some(sal) = saliency.as_deref_mut() {
                let inv_d2: [f64; TILE] = std::array::from_fn(|k| {
                    let d = if k < nc { diag(c0 + k) } else { 1.0 };
                    1.0 / (d * d)
                });
                for r in 0..nr {
                    let out = &mut sal[r * cols + c0..r * cols + c0 + nc];
                    match self.criterion {
                        OutlierCriterion::Error => {
                            for (k, o) in out.iter_mut().enumerate() {
                                let err = vals[r][k] - f64::from(fit.code(r, vals[r][k]).1);
                                *o = (err * err * inv_d2[k]) as f32;
                            }
                        }
                        OutlierCriterion::LeaveOneOut => {
                            leave_one_out(&vals[r][..nc], &inv_d2[..nc], out);
                        }
                    }
                }
            }
            let mut codes = [[0u8; TILE]; TILE];
            let mut errs = [[0f64; TILE]; TILE];
            for k in 0..TILE {
                for r in 0..TILE {
                    if r >= nr || k >= nc {
                        codes[r][k] = fit.code(r, 0.0).0 as u8;
                        continue;
                    }
                    let c = c0 + k;
                    let v = w[r * cols + c];
                    let (q, level) = fit.code(r, v);
                    codes[r][k] = q as u8;
                    let mut effective = f64::from(level);
                    if is_outlier(r, k) {
                        let bits = f16_sat(v - effective);
                        if bits & 0x7fff != 0 {
                            found.push((r, c as u16, bits));
                            effective += f64::from(f16::from_bits(bits).to_f32());
                        }
                    }
                    if let Some(u) = self.u {
                        let err = (v - effective) / u[c * cols + c];
                        errs[r][k] = err;
                        let urow = &u[c * cols + c + 1..c * cols + c0 + nc];
                        let wrow = &mut w[r * cols + c + 1..r * cols + c0 + nc];
                        for (wv, uv) in wrow.iter_mut().zip(urow) {
                            *wv -= err * uv;
                        }
                    }
                }
            }
            if let Some(words) = words.as_deref_mut() {
                for r in 0..TILE {
                    words[c0 + r] =
                        pack_row(fit.qs[r], fit.qz[r], &codes[r], fit.so.byte_for_row(r));
                }
            }
            if let Some(u) = self.u {
                let rest = c0 + nc;
                if rest < cols {
                    for r in 0..nr {
                        let wrow = &mut w[r * cols + rest..(r + 1) * cols];
                        for k in 0..nc {
                            let e = errs[r][k];
                            if e != 0.0 {
                                let urow = &u[(c0 + k) * cols + rest..(c0 + k + 1) * cols];
                                for (wv, uv) in wrow.iter_mut().zip(urow) {
                                    *wv -= e * uv;
                                }
                            }
                        }
                    }
                }
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fp16_conversion_rounds_once() {
        // Just below the midpoint of two fp16 values: f64 -> f32 lands on the midpoint and a
        // second rounding would go to the even one, the farther.
        let lo = f16::from_bits(0xbc8d); // -1.1376953125
        let hi = f16::from_bits(0xbc8e); // -1.138671875
        let mid = 0.5 * (lo.to_f64() + hi.to_f64());
        let x = mid + 6e-9;
        assert_eq!(f16_sat(x), lo.to_bits());
        assert_eq!(f16_sat(mid), hi.to_bits(), "ties to even");
        assert_eq!(f16_sat(1e9), f16::MAX.to_bits());
        assert_eq!(f16_sat(-1e9), f16::MIN.to_bits());
        assert_eq!(f16_sat(1e-12), 0);
        assert_eq!(f16_sat(-1e-12), 0x8000);
        assert_eq!(f16_sat(6e-8), 1);
        for i in 0..2000 {
            let x = (i as f64 - 1000.0) * 0.0137;
            let got = f16::from_bits(f16_sat(x)).to_f64();
            let step = f16::from_f64(x).to_f64().abs() * 2f64.powi(-10) + 1e-7;
            assert!((got - x).abs() <= 0.5 * step, "{x}");
        }
    }

    #[test]
    fn second_order_fits() {
        let h = |b: u16| f16::from_bits(b).to_f64();
        let (s, z) = fit_second_order([1.0, 8.0, 3.0].into_iter());
        assert_eq!((h(s), h(z)), (1.0, -1.0));
        assert_eq!(fit_second_order(std::iter::empty()), (0, 0));
        assert_eq!(fit_second_order([0.0, 0.0].into_iter()), (0, 0));
        // A single value v spans 0..v.
        let (s, z) = fit_second_order([-7.0].into_iter());
        assert_eq!((h(s), h(z)), (1.0, 7.0));
    }

    #[test]
    fn outlier_selection_takes_the_largest_and_breaks_ties_by_position() {
        let sal = [0.0, 3.0, 1.0, 3.0, 5.0, 0.0, 3.0];
        let m = select_outliers(&sal, 3);
        assert_eq!(m, [false, true, false, true, true, false, false]);
        let m = select_outliers(&sal, 100);
        assert_eq!(m.iter().filter(|&&b| b).count(), 5);
        assert!(!m[0] && !m[5]);
        assert!(select_outliers(&[0.0; 4], 2).iter().all(|&b| !b));
    }

    #[test]
    fn zero_groups_decode_to_exactly_zero() {
        let counted = [[true; TILE]; TILE];
        let fit = fit_tile(&[[0.0; TILE]; TILE], &counted);
        assert!(fit.levels.iter().all(|l| l.contains(&0.0)));
    }
}
