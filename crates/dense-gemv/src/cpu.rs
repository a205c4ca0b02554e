//! CPU references of the dense products (rayon over rows).

use half::f16;
use rayon::prelude::*;

use crate::{Result, check_batch, check_len, check_shape};

/// `Y = X W^T` with every product and sum in f64 (exact products of fp16 values; the sum is as
/// close to exact as f64 allows). Returns `batch * rows` values, `Y[b * rows + row]`.
///
/// # Errors
/// On an empty or oversized shape, a batch outside 1..=16, or short buffers.
pub fn gemv_f16(w: &[f16], rows: usize, cols: usize, x: &[f16], batch: usize) -> Result<Vec<f64>> {
    check_shape(rows, cols)?;
    check_batch(batch)?;
    check_len("weights", w.len(), rows * cols)?;
    check_len("input", x.len(), batch * cols)?;
    let xf: Vec<f64> = x[..batch * cols]
        .iter()
        .map(|v| f64::from(v.to_f32()))
        .collect();
    let mut y = vec![0.0f64; batch * rows];
    let per_row: Vec<Vec<f64>> = w[..rows * cols]
        .par_chunks(cols)
        .map(|row| {
            let wf: Vec<f64> = row.iter().map(|v| f64::from(v.to_f32())).collect();
            (0..batch)
                .map(|b| {
                    wf.iter()
                        .zip(&xf[b * cols..(b + 1) * cols])
                        .map(|(a, c)| a * c)
                        .sum()
                })
                .collect()
        })
        .collect();
    for (r, sums) in per_row.iter().enumerate() {
        for (b, &s) in sums.iter().enumerate() {
            y[b * rows + r] = s;
        }
    }
    Ok(y)
}

/// `Y = X W^T` over int8 with int32 accumulation, wrapping on overflow exactly as `dp4a` does.
/// Returns `batch * rows` accumulators, `Y[b * rows + row]`.
///
/// # Errors
/// As [`gemv_f16`].
pub fn gemv_i8(w: &[i8], rows: usize, cols: usize, x: &[i8], batch: usize) -> Result<Vec<i32>> {
    check_shape(rows, cols)?;
    check_batch(batch)?;
    check_len("weights", w.len(), rows * cols)?;
    check_len("input", x.len(), batch * cols)?;
    let per_row: Vec<Vec<i32>> = w[..rows * cols]
        .par_chunks(cols)
        .map(|row| {
            (0..batch)
                .map(|b| {
                    row.iter()
                        .zip(&x[b * cols..(b + 1) * cols])
                        .fold(0i32, |acc, (&a, &c)| {
                            acc.wrapping_add(i32::from(a) * i32::from(c))
                        })
                })
                .collect()
        })
        .collect();
    let mut y = vec![0i32; batch * rows];
    for (r, sums) in per_row.iter().enumerate() {
        for (b, &s) in sums.iter().enumerate() {
            y[b * rows + r] = s;
        }
    }
    Ok(y)
}

/// [`crate::requantize`] applied to every accumulator.
pub fn requantize_all(acc: &[i32], scale: f32) -> Vec<i8> {
    acc.iter().map(|&a| crate::requantize(a, scale)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DenseError;

    #[test]
    fn f16_reference_on_a_hand_computed_case() {
        // W = [[1, 2, 3], [-1, 0.5, 4]], X = [[1, 1, 1], [2, -2, 0.25]]
        let w: Vec<f16> = [1.0, 2.0, 3.0, -1.0, 0.5, 4.0].map(f16::from_f32).to_vec();
        let x: Vec<f16> = [1.0, 1.0, 1.0, 2.0, -2.0, 0.25].map(f16::from_f32).to_vec();
        let y = gemv_f16(&w, 2, 3, &x, 2).unwrap();
        assert_eq!(y, vec![6.0, 3.5, 2.0 - 4.0 + 0.75, -2.0 - 1.0 + 1.0]);
    }

    #[test]
    fn i8_reference_on_a_hand_computed_case() {
        let w: Vec<i8> = vec![127, -128, 1, -1, 0, 5];
        let x: Vec<i8> = vec![-128, -128, 3];
        let y = gemv_i8(&w, 2, 3, &x, 1).unwrap();
        assert_eq!(y, vec![127 * -128 + 128 * 128 + 3, 128 + 15]);
        // 131 * 0.5 = 65.5 -> 66 and 143 * 0.5 = 71.5 -> 72: ties go to the even neighbour.
        assert_eq!(requantize_all(&y, 0.5), vec![66, 72]);
    }

    #[test]
    fn references_reject_bad_arguments() {
        let w = vec![f16::ONE; 6];
        let x = vec![f16::ONE; 3];
        assert!(matches!(
            gemv_f16(&w, 2, 3, &x, 2),
            Err(DenseError::Length { what: "input", .. })
        ));
        assert!(matches!(
            gemv_f16(&w, 3, 3, &x, 1),
            Err(DenseError::Length {
                what: "weights",
                ..
            })
        ));
        assert!(matches!(
            gemv_f16(&w, 2, 3, &x, 0),
            Err(DenseError::Batch { .. })
        ));
        assert!(matches!(
            gemv_i8(&[1], 0, 1, &[1], 1),
            Err(DenseError::Shape { .. })
        ));
    }
}
