//! A CPU model of the integer-MMA SpQR product (the kernels `cmv_spqr_{csr,ptcsr}_i8_b1` for one
//! vector, `DeviceSpqrMatrix::upload_int8`): the dense part with the inputs as int8 halves per tile ([`spqr_kernels::int8`]), the
//! outliers as the kernels add them (fp16 residual times fp16 input, in fp32), every row summed
//! in fp32 in tile-column order; and, per output, a bound on its distance from the f64
//! reference ([`SpqrMatrix::gemv_reference`]) that holds for any finite input. The tests
//! (`tests/int8.rs`) check the bound on adversarial inputs; a kernel built on this split has
//! to match this model, so the bound carries over.

use crate::matrix::tile_second_order;
use crate::{Result, SpqrMatrix};
use cmv_format::{FormatError, batch_len, check_reference_args};
use half::f16;
use spqr_kernels::int8::{
    INPUT_MAX, quantize_input, tile_dot, tile_error_bound, tile_sigma, tile_term,
};
use spqr_kernels::layout::{self, TILE, row_code, row_qs, row_qz};

/// fp32's unit roundoff, `2^-24`.
const U32: f64 = 1.0 / 16_777_216.0;

/// The model's outputs and their error bounds, `batch * rows` each (`y[b * rows + r]`).
#[derive(Clone, Debug, PartialEq)]
pub struct Int8Product {
    /// The outputs in fp32, as a kernel built on the int8 split would compute them.
    pub y: Vec<f32>,
    /// For each output, the largest `|y - reference|` the model allows: the inputs' rounding
    /// to 15-bit integers (`spqr_kernels::int8::tile_error_bound` per tile row) plus the fp32
    /// rounding of the terms and of their sum (`(n + 8) 2^-24` times the sum of the terms'
    /// and the exact products' magnitudes, `n` the number of terms).
    pub bound: Vec<f64>,
}

impl SpqrMatrix {
    /// `y = W' x` through the int8 split of the inputs (module docs), with each output's error
    /// bound. `x` as [`SpqrMatrix::gemv_reference`] takes it (caller's column order, `batch *
    /// cols` values); inputs must be finite.
    ///
    /// # Errors
    /// [`FormatError::Batch`] for batch 0, [`FormatError::Length`] when `x` does not hold
    /// `batch * cols` values, [`FormatError::NonFinite`] for a NaN or infinite input (the
    /// split scales each tile by its largest magnitude).
    pub fn gemv_int8_model(&self, x: &[f16], batch: usize) -> Result<Int8Product> {
        let (rows, cols, pc) = (
            self.shape.rows(),
            self.shape.cols(),
            self.shape.padded_cols(),
        );
        check_reference_args(x, batch, cols)?;
        if let Some(index) = x.iter().position(|v| !v.is_finite()) {
            return Err(FormatError::NonFinite {
                what: "input",
                index,
                value: f64::from(x[index].to_f32()),
            }
            .into());
        }
        let xs = self.permute_input(x, batch)?;
        let tiles_c = pc / TILE;
        let mut y = vec![0f32; batch_len(batch, rows)?];
        let mut bound = vec![0f64; y.len()];
        // Each row's outliers (stored column, fp16 residual).
        let mut outliers: Vec<Vec<(usize, f32)>> = vec![Vec::new(); rows];
        for o in self.outliers() {
            outliers[o.row].push((o.col, o.value.to_f32()));
        }
        for b in 0..batch {
            // The inputs in stored order, fp32, padded with zeros; per tile its scale and
            // 15-bit integers.
            let mut xv = vec![0f32; pc];
            for (c, v) in xs[b * cols..(b + 1) * cols].iter().enumerate() {
                xv[c] = v.to_f32();
            }
            let sigma: Vec<f32> = xv
                .chunks(TILE)
                .map(|t| {
                    let max_bits = t.iter().map(|v| f16::from_f32(*v).to_bits() & 0x7fff).max();
                    tile_sigma(u32::from(max_bits.unwrap_or(0)))
                })
                .collect();
            let xq: Vec<[i32; TILE]> = xv
                .chunks(TILE)
                .zip(&sigma)
                .map(|(t, &s)| std::array::from_fn(|k| quantize_input(t[k], s)))
                .collect();
            debug_assert!(xq.iter().flatten().all(|q| q.abs() <= INPUT_MAX));
            for r in 0..rows {
                let (i, rr) = (r / TILE, r % TILE);
                let words = &self.dense[i * pc..(i + 1) * pc];
                let (mut acc, mut input_err, mut mags, mut terms) = (0f32, 0f64, 0f64, 0usize);
                for j in 0..tiles_c {
                    let tile = &words[TILE * j..TILE * j + TILE];
                    let w = tile[rr];
                    let (s, z) = layout::first_order(row_qs(w), row_qz(w), tile_second_order(tile));
                    let (d, t) = tile_dot(w, &xq[j]);
                    let term = tile_term(s, z, sigma[j], d, t);
                    acc += term;
                    terms += 1;
                    input_err += tile_error_bound(w, s, z, sigma[j]);
                    mags += f64::from(term).abs();
                    for k in 0..TILE {
                        let wk = f64::from(s) * (f64::from(row_code(w, k as u32)) - f64::from(z));
                        mags += (wk * f64::from(xv[TILE * j + k])).abs();
                    }
                }
                for &(col, value) in &outliers[r] {
                    let term = value * xv[col];
                    acc += term;
                    terms += 1;
                    mags += 2.0 * f64::from(term).abs();
                }
                y[b * rows + r] = acc;
                bound[b * rows + r] = input_err + (terms as f64 + 8.0) * U32 * mags;
            }
        }
        Ok(Int8Product { y, bound })
    }
}
