//! Plain round-to-nearest (RTN) baselines for the accuracy report: asymmetric min/max
//! quantization to `bits` bits per group of 16 consecutive weights of a row (the last group of
//! a row may be shorter), one fp16 scale and one fp16 zero per group, no second order, no
//! outliers. A weight is coded `q = round(w / s + z)` clamped to `0..2^bits`, evaluated as the
//! nearest of the decoded levels, and decoded `s (q - z)` in fp32 from the fp16 `s` and `z`.

use half::f16;

use cmv_format::{FormatError, Weights, check_reference_args};

use crate::error::{Result, SpqrError};
use crate::quantize::{check_weights, f16_sat};

/// Weights per group, as SpQR's first order.
pub const GROUP: usize = 16;

/// An RTN-quantized matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct RtnMatrix {
    bits: u32,
    rows: usize,
    cols: usize,
    /// One code per weight, row-major.
    codes: Vec<u8>,
    /// One fp16 scale per group, `rows * groups_per_row`, row-major.
    scales: Vec<f16>,
    /// One fp16 zero per group.
    zeros: Vec<f16>,
}

/// Quantizes a `rows x cols` row-major matrix to `bits` bits (1 to 8) per weight with RTN.
///
/// # Errors
/// [`FormatError::Shape`] for an empty matrix, [`SpqrError::Option`] for `bits` outside
/// `1..=8`, and as [`crate::quantize()`] for the weights (exactly `rows * cols` of them).
pub fn quantize_rtn(w: &[f32], rows: usize, cols: usize, bits: u32) -> Result<RtnMatrix> {
    if rows == 0 || cols == 0 {
        return Err(FormatError::Shape {
            format: "rtn",
            rows,
            cols,
            rule: "both sides must be at least 1",
        }
        .into());
    }
    if !(1..=8).contains(&bits) {
        return Err(SpqrError::Option {
            name: "bits",
            value: bits.into(),
            rule: "must be in 1..=8",
        });
    }
    check_weights(Weights::new(w, rows, cols)?)?;
    let maxq = (1u32 << bits) - 1;
    let groups = cols.div_ceil(GROUP);
    let mut m = RtnMatrix {
        bits,
        rows,
        cols,
        codes: vec![0; rows * cols],
        scales: Vec::with_capacity(rows * groups),
        zeros: Vec::with_capacity(rows * groups),
    };
    for (row, codes) in w.chunks(cols).zip(m.codes.chunks_mut(cols)) {
        for (g, cg) in row.chunks(GROUP).zip(codes.chunks_mut(GROUP)) {
            let lo = g.iter().copied().fold(f32::INFINITY, f32::min);
            let hi = g.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let (mut lo, mut hi) = (f64::from(lo), f64::from(hi));
            if hi == lo {
                (lo, hi) = (lo.min(0.0), hi.max(0.0));
            }
            let (s, z) = if hi == lo {
                (0u16, 0u16)
            } else {
                let s = (hi - lo) / f64::from(maxq);
                (f16_sat(s), f16_sat(-lo / s))
            };
            let (s, z) = (f16::from_bits(s), f16::from_bits(z));
            m.scales.push(s);
            m.zeros.push(z);
            let (sf, zf) = (s.to_f32(), z.to_f32());
            for (&v, c) in g.iter().zip(cg.iter_mut()) {
                let mut best = (f64::INFINITY, 0u8);
                for q in 0..=maxq {
                    let d = (f64::from(sf * (q as f32 - zf)) - f64::from(v)).abs();
                    if d < best.0 {
                        best = (d, q as u8);
                    }
                }
                *c = best.1;
            }
        }
    }
    Ok(m)
}

impl RtnMatrix {
    /// Bits per code.
    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Groups per row: `ceil(cols / 16)`.
    pub fn groups_per_row(&self) -> usize {
        self.cols.div_ceil(GROUP)
    }

    /// The codes, one per weight, row-major.
    pub fn codes(&self) -> &[u8] {
        &self.codes
    }

    /// The fp16 scales, one per group, row-major.
    pub fn scales(&self) -> &[f16] {
        &self.scales
    }

    /// The fp16 zeros, one per group, row-major.
    pub fn zeros(&self) -> &[f16] {
        &self.zeros
    }

    /// The dequantized matrix, `rows x cols` row-major: `s (q - z)` in fp32.
    pub fn dequantize(&self) -> Vec<f32> {
        let gpr = self.groups_per_row();
        let mut out = Vec::with_capacity(self.rows * self.cols);
        for (r, codes) in self.codes.chunks(self.cols).enumerate() {
            for (g, cg) in codes.chunks(GROUP).enumerate() {
                let (s, z) = (
                    self.scales[r * gpr + g].to_f32(),
                    self.zeros[r * gpr + g].to_f32(),
                );
                out.extend(cg.iter().map(|&q| s * (f32::from(q) - z)));
            }
        }
        out
    }

    /// Storage bits per weight: the codes plus 32 bits (fp16 scale and zero) per group.
    pub fn bits_per_weight(&self) -> f64 {
        let n = (self.rows * self.cols) as f64;
        (n * f64::from(self.bits) + 32.0 * self.scales.len() as f64) / n
    }

    /// `y = W' x` in f64 (`x[b * cols + c]`, `y[b * rows + r]`, any batch of at least one
    /// vector). Non-finite inputs propagate as in IEEE arithmetic.
    ///
    /// # Errors
    /// [`FormatError::Batch`] or [`FormatError::Length`].
    pub fn gemv_reference(&self, x: &[f16], batch: usize) -> Result<Vec<f64>> {
        check_reference_args(x, batch, self.cols)?;
        let w = self.dequantize();
        let mut y = vec![0f64; batch * self.rows];
        for b in 0..batch {
            let xb = &x[b * self.cols..(b + 1) * self.cols];
            for (r, row) in w.chunks(self.cols).enumerate() {
                y[b * self.rows + r] = row
                    .iter()
                    .zip(xb)
                    .map(|(&a, c)| f64::from(a) * f64::from(c.to_f32()))
                    .sum();
            }
        }
        Ok(y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rtn_is_within_half_a_step_up_to_fp16() {
        let (rows, cols) = (5, 37);
        let w: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 300.0)
            .collect();
        for bits in [3, 4] {
            let m = quantize_rtn(&w, rows, cols, bits).unwrap();
            assert_eq!(m.groups_per_row(), 3);
            assert_eq!(m.scales().len(), rows * 3);
            let d = m.dequantize();
            let gpr = m.groups_per_row();
            for (i, (&a, &b)) in w.iter().zip(&d).enumerate() {
                let (r, c) = (i / cols, i % cols);
                let s = m.scales()[r * gpr + c / GROUP].to_f32();
                let z = m.zeros()[r * gpr + c / GROUP].to_f32();
                // The levels span [-s z, s (maxq - z)]; the fp16 rounding of s and z moves the
                // ends by at most 2^-11 (|s| maxq + |s z|) around the group's min and max.
                let maxq = ((1u32 << bits) - 1) as f32;
                let slack = 2f32.powi(-10) * (s.abs() * maxq + (s * z).abs()) + 1e-6;
                assert!(
                    (a - b).abs() <= 0.5 * s + slack,
                    "{bits} bits, weight {i}: {a} vs {b}"
                );
            }
            assert_eq!(m.bits_per_weight(), f64::from(bits) + 32.0 * 15.0 / 185.0);
            let x: Vec<f16> = (0..cols).map(|c| f16::from_f32(c as f32 / 10.0)).collect();
            let y = m.gemv_reference(&x, 1).unwrap();
            assert_eq!(y.len(), rows);
        }
        let m3 = quantize_rtn(&w, rows, cols, 3).unwrap();
        let m4 = quantize_rtn(&w, rows, cols, 4).unwrap();
        let err = |m: &RtnMatrix| -> f64 {
            m.dequantize()
                .iter()
                .zip(&w)
                .map(|(&a, &b)| f64::from(a - b).powi(2))
                .sum()
        };
        assert!(err(&m4) < err(&m3) / 2.0);
    }

    #[test]
    fn constant_groups_and_bad_arguments() {
        let w = vec![0.5f32; 20];
        let m = quantize_rtn(&w, 1, 20, 3).unwrap();
        assert!(m.dequantize().iter().all(|&v| (v - 0.5).abs() < 1e-3));
        let m = quantize_rtn(&[0.0; 3], 1, 3, 4).unwrap();
        assert_eq!(m.dequantize(), vec![0.0; 3]);
        assert!(quantize_rtn(&w, 1, 20, 0).is_err());
        assert!(quantize_rtn(&w, 1, 20, 9).is_err());
        assert!(quantize_rtn(&w, 2, 20, 3).is_err());
        assert!(quantize_rtn(&[f32::NAN], 1, 1, 3).is_err());
        assert!(matches!(
            m.gemv_reference(&[f16::ONE; 3], 0),
            Err(SpqrError::Format(FormatError::Batch { batch: 0, .. }))
        ));
        assert_eq!(m.gemv_reference(&[f16::ONE; 51], 17).unwrap().len(), 17);
    }
}
