//! Round-to-nearest (RTN) baselines for SBVR's accuracy comparison, on the same groups: 128
//! consecutive weights of a row (the last group of a row is shorter when `cols % 128 != 0`).
//!
//! * [`rtn_symmetric`]: one fp16 scale per group, `s = fp16(absmax / qmax)` with
//!   `qmax = 2^(bits-1) - 1`, decoded back to f64; `q = round(w / s)` (halves away from zero)
//!   clamped to `-qmax..=qmax`; the weight decodes to `q * s`. A group whose `s` is 0 (all zero,
//!   or below fp16's smallest subnormal) decodes to zeros. `bits + 16/128` bits per weight.
//! * [`rtn_asymmetric`]: an fp16 zero `z = fp16(min)` and an fp16 scale
//!   `s = fp16((max - z) / (2^bits - 1))` per group (both decoded back to f64);
//!   `q = round((w - z) / s)` clamped to `0..=2^bits - 1`; the weight decodes to `z + q * s`
//!   (to `z` when `s` is 0). `bits + 32/128` bits per weight.
//!
//! fp16 values are rounded to nearest and clamped to ±65504. Decoded values are computed in
//! f64 and returned as f32. [`relative_error`] and the `bits_per_weight_*` functions make the
//! comparison.

use half::f16;

use cmv_format::{FormatError, Weights, check_finite};

use crate::encode::{GROUP, MAX_BITS, MIN_BITS};
use crate::{Result, SbvrError};

/// The checks both baselines make.
fn check(w: &[f32], rows: usize, cols: usize, bits: u32) -> Result<()> {
    if !(MIN_BITS..=MAX_BITS).contains(&bits) {
        return Err(SbvrError::Bits { bits });
    }
    if rows == 0 || cols == 0 {
        return Err(FormatError::Shape {
            format: "rtn",
            rows,
            cols,
            rule: "both sides must be at least 1",
        }
        .into());
    }
    Weights::new(w, rows, cols)?;
    check_finite("weight", w)?;
    Ok(())
}

/// fp16 nearest to `v` (clamped to the finite range), back in f64.
fn f16_round(v: f64) -> f64 {
    f64::from(f16::from_f64(v.clamp(-65504.0, 65504.0)))
}

/// Symmetric RTN of a `rows x cols` row-major matrix to `bits` bits with groups of 128 (see
/// the module docs for the exact rule); returns the dequantized matrix.
///
/// # Errors
/// [`SbvrError::Bits`] for `bits` outside `2..=8`; [`FormatError::Shape`] for an empty
/// matrix; [`FormatError::Length`] when `w.len() != rows * cols`; [`FormatError::NonFinite`]
/// for a NaN or infinite weight.
pub fn rtn_symmetric(w: &[f32], rows: usize, cols: usize, bits: u32) -> Result<Vec<f32>> {
    check(w, rows, cols, bits)?;
    let qmax = f64::from((1u32 << (bits - 1)) - 1);
    let mut out = vec![0f32; w.len()];
    for (row, orow) in w.chunks(cols).zip(out.chunks_mut(cols)) {
        for (g, og) in row.chunks(GROUP).zip(orow.chunks_mut(GROUP)) {
            let amax = g.iter().fold(0f64, |m, &v| m.max(f64::from(v).abs()));
            let s = f16_round(amax / qmax);
            if s == 0.0 {
                continue;
            }
            for (o, &v) in og.iter_mut().zip(g) {
                let q = (f64::from(v) / s).round().clamp(-qmax, qmax);
                *o = (q * s) as f32;
            }
        }
    }
    Ok(out)
}

/// Asymmetric (min/max) RTN of a `rows x cols` row-major matrix to `bits` bits with groups of
/// 128 (see the module docs for the exact rule); returns the dequantized matrix.
///
/// # Errors
/// As [`rtn_symmetric`].
pub fn rtn_asymmetric(w: &[f32], rows: usize, cols: usize, bits: u32) -> Result<Vec<f32>> {
    check(w, rows, cols, bits)?;
    let qmax = f64::from((1u32 << bits) - 1);
    let mut out = vec![0f32; w.len()];
    for (row, orow) in w.chunks(cols).zip(out.chunks_mut(cols)) {
        for (g, og) in row.chunks(GROUP).zip(orow.chunks_mut(GROUP)) {
            let lo = g.iter().fold(f64::INFINITY, |m, &v| m.min(f64::from(v)));
            let hi = g
                .iter()
                .fold(f64::NEG_INFINITY, |m, &v| m.max(f64::from(v)));
            let z = f16_round(lo);
            let s = f16_round((hi - z).max(0.0) / qmax);
            for (o, &v) in og.iter_mut().zip(g) {
                let q = if s == 0.0 {
                    0.0
                } else {
                    ((f64::from(v) - z) / s).round().clamp(0.0, qmax)
                };
                *o = (z + q * s) as f32;
            }
        }
    }
    Ok(out)
}

/// `||a - b||_F / ||a||_F`, summed in f64 (0 when both are zero, infinite when only `a` is;
/// NaN when the lengths differ).
pub fn relative_error(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() {
        return f64::NAN;
    }
    let (mut num, mut den) = (0f64, 0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (f64::from(x), f64::from(y));
        num += (x - y) * (x - y);
        den += x * x;
    }
    if num == 0.0 { 0.0 } else { (num / den).sqrt() }
}

/// SBVR's bits per weight: `bits` code bits, one cache index per 128 weights (8 bits up to 256
/// entries, 16 above) and the cache (`entries x bits` fp16 values) spread over the
/// `rows * cols` weights: `bits + idx / 128 + entries * bits * 16 / (rows * cols)`.
pub fn bits_per_weight_sbvr(bits: u32, entries: usize, rows: usize, cols: usize) -> f64 {
    let idx = if entries <= 256 { 8.0 } else { 16.0 };
    let weights = (rows as f64 * cols as f64).max(1.0);
    f64::from(bits) + idx / GROUP as f64 + entries as f64 * f64::from(bits) * 16.0 / weights
}

/// Symmetric RTN's bits per weight: `bits + 16 / 128` (one fp16 scale per group).
pub fn bits_per_weight_rtn_symmetric(bits: u32) -> f64 {
    f64::from(bits) + 16.0 / GROUP as f64
}

/// Asymmetric RTN's bits per weight: `bits + 32 / 128` (fp16 scale and zero per group).
pub fn bits_per_weight_rtn_asymmetric(bits: u32) -> f64 {
    f64::from(bits) + 32.0 / GROUP as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    fn uniform(n: usize, seed: u64) -> Vec<f32> {
        let mut rng = SmallRng::seed_from_u64(seed);
        (0..n).map(|_| rng.gen_range(-1.0f32..1.0)).collect()
    }

    #[test]
    fn symmetric_rule() {
        let (rows, cols) = (3, 200);
        let mut w = uniform(rows * cols, 1);
        w[cols..2 * cols].fill(0.0);
        for bits in 2..=8u32 {
            let d = rtn_symmetric(&w, rows, cols, bits).unwrap();
            let qmax = f64::from((1u32 << (bits - 1)) - 1);
            assert!(d[cols..2 * cols].iter().all(|&v| v == 0.0));
            for r in 0..rows {
                for (gi, g) in w[r * cols..(r + 1) * cols].chunks(GROUP).enumerate() {
                    let amax = g.iter().fold(0f64, |m, &v| m.max(f64::from(v).abs()));
                    let s = f64::from(f16::from_f64(amax / qmax));
                    for (k, &v) in g.iter().enumerate() {
                        let y = f64::from(d[r * cols + gi * GROUP + k]);
                        // On the grid, within qmax steps, and at most half a step (plus the
                        // fp16 rounding of s at the clamped extremes) away.
                        let q = y / s;
                        assert!(
                            s == 0.0 || ((q - q.round()).abs() < 1e-6 && q.abs() <= qmax + 1e-9)
                        );
                        assert!(
                            (f64::from(v) - y).abs() <= s * 0.5 + amax * 1e-3 + 1e-7,
                            "{v} {y} {s}"
                        );
                    }
                }
            }
        }
        // The extremes are reached: absmax decodes to about absmax.
        let d = rtn_symmetric(&[0.7, -0.1, 0.3], 1, 3, 4).unwrap();
        assert!((d[0] - 0.7).abs() < 1e-3, "{d:?}");
    }

    #[test]
    fn asymmetric_rule() {
        let (rows, cols) = (2, 300);
        let mut w: Vec<f32> = uniform(rows * cols, 2).iter().map(|v| v + 3.0).collect();
        w[cols + 256..].fill(-0.25); // a constant tail group
        for bits in 2..=8u32 {
            let d = rtn_asymmetric(&w, rows, cols, bits).unwrap();
            let qmax = f64::from((1u32 << bits) - 1);
            for r in 0..rows {
                for (gi, g) in w[r * cols..(r + 1) * cols].chunks(GROUP).enumerate() {
                    let lo = g.iter().fold(f64::INFINITY, |m, &v| m.min(f64::from(v)));
                    let hi = g
                        .iter()
                        .fold(f64::NEG_INFINITY, |m, &v| m.max(f64::from(v)));
                    let step = (hi - lo) / qmax;
                    for (k, &v) in g.iter().enumerate() {
                        let y = f64::from(d[r * cols + gi * GROUP + k]);
                        let tol = step * 0.5 + hi.abs().max(lo.abs()) * 2e-3;
                        assert!((f64::from(v) - y).abs() <= tol, "bits {bits}: {v} {y}");
                    }
                }
            }
            assert!(d[cols + 256..].iter().all(|&v| v == -0.25));
        }
        // More bits, less error.
        let e: Vec<f64> = (2..=8)
            .map(|b| relative_error(&w, &rtn_asymmetric(&w, rows, cols, b).unwrap()))
            .collect();
        assert!(e.windows(2).all(|p| p[1] < p[0]), "{e:?}");
    }

    #[test]
    fn errors() {
        for bits in [0, 1, 9] {
            assert!(matches!(
                rtn_symmetric(&[1.0], 1, 1, bits),
                Err(SbvrError::Bits { .. })
            ));
            assert!(matches!(
                rtn_asymmetric(&[1.0], 1, 1, bits),
                Err(SbvrError::Bits { .. })
            ));
        }
        assert!(matches!(
            rtn_symmetric(&[], 0, 1, 4),
            Err(SbvrError::Format(FormatError::Shape { .. }))
        ));
        assert!(matches!(
            rtn_asymmetric(&[1.0; 3], 2, 2, 4),
            Err(SbvrError::Format(FormatError::Length {
                got: 3,
                expected: 4,
                ..
            }))
        ));
        assert!(matches!(
            rtn_symmetric(&[1.0, f32::NAN], 1, 2, 4),
            Err(SbvrError::Format(FormatError::NonFinite { index: 1, .. }))
        ));
    }

    #[test]
    fn relative_error_and_bits() {
        assert_eq!(relative_error(&[3.0, 4.0], &[3.0, 4.0]), 0.0);
        assert!((relative_error(&[3.0, 4.0], &[0.0, 4.0]) - 0.6).abs() < 1e-12);
        assert!(relative_error(&[1.0], &[1.0, 2.0]).is_nan());
        assert_eq!(relative_error(&[0.0], &[1.0]), f64::INFINITY);
        assert_eq!(relative_error(&[], &[]), 0.0);
        let b = bits_per_weight_sbvr(4, 256, 4096, 14336);
        assert!((b - (4.0 + 8.0 / 128.0 + 256.0 * 64.0 / (4096.0 * 14336.0))).abs() < 1e-12);
        let b = bits_per_weight_sbvr(3, 4096, 1024, 1024);
        assert!((b - (3.0 + 16.0 / 128.0 + 4096.0 * 48.0 / 1048576.0)).abs() < 1e-12);
        assert_eq!(bits_per_weight_rtn_symmetric(4), 4.125);
        assert_eq!(bits_per_weight_rtn_asymmetric(3), 3.25);
    }
}
