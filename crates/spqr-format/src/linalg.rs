//! The f64 linear algebra of the calibrated path: the Gram matrix of calibration inputs and
//! the upper Cholesky factor of the damped inverse Hessian that GPTQ propagates errors with.

use rayon::prelude::*;

use crate::error::{Result, SpqrError};

/// `H = X^T X` of `samples` input vectors of `cols` values (`x[s * cols + c]`), in f64.
pub(crate) fn gram(x: &[f32], samples: usize, cols: usize) -> Vec<f64> {
    // Columns of X as rows, so that every entry is a contiguous dot product.
    let mut xt = vec![0f64; cols * samples];
    for s in 0..samples {
        for c in 0..cols {
            xt[c * samples + s] = f64::from(x[s * cols + c]);
        }
    }
    let mut h = vec![0f64; cols * cols];
    h.par_chunks_mut(cols).enumerate().for_each(|(a, row)| {
        let xa = &xt[a * samples..(a + 1) * samples];
        for (b, v) in row.iter_mut().enumerate() {
            let xb = &xt[b * samples..(b + 1) * samples];
            *v = xa.iter().zip(xb).map(|(p, q)| p * q).sum();
        }
    });
    h
}

/// In-place lower Cholesky factor of the `n x n` row-major `a` (only its lower triangle is
/// read; the strict upper triangle is zeroed): `a = L L^T`.
fn cholesky_lower(a: &mut [f64], n: usize, stage: &'static str) -> Result<()> {
    for i in 0..n {
        let (done, rest) = a.split_at_mut(i * n);
        let row_i = &mut rest[..n];
        for j in 0..i {
            let row_j = &done[j * n..j * n + j + 1];
            let dot: f64 = row_i[..j].iter().zip(&row_j[..j]).map(|(p, q)| p * q).sum();
            row_i[j] = (row_i[j] - dot) / row_j[j];
        }
        let dot: f64 = row_i[..i].iter().map(|v| v * v).sum();
        let pivot = row_i[i] - dot;
        if !(pivot > 0.0 && pivot.is_finite()) {
            return Err(SpqrError::NotPositiveDefinite {
                stage,
                column: i,
                pivot,
            });
        }
        row_i[i] = pivot.sqrt();
        row_i[i + 1..].fill(0.0);
    }
    Ok(())
}

/// In-place inverse of the lower-triangular `n x n` row-major `l`.
fn invert_lower(l: &mut [f64], n: usize) {
    // Row i of L^-1 = (e_i - sum_{k<i} L[i][k] (row k of L^-1)) / L[i][i].
    for i in 0..n {
        let (done, rest) = l.split_at_mut(i * n);
        let row_i = &mut rest[..n];
        let coeffs: Vec<f64> = row_i[..i].to_vec();
        let d = row_i[i];
        row_i[..=i].fill(0.0);
        row_i[i] = 1.0;
        for (k, &c) in coeffs.iter().enumerate() {
            if c != 0.0 {
                let row_k = &done[k * n..k * n + k + 1];
                for (v, &p) in row_i[..=k].iter_mut().zip(row_k) {
                    *v -= c * p;
                }
            }
        }
        for v in &mut row_i[..=i] {
            *v /= d;
        }
    }
}

/// The upper-triangular `U` (`n x n` row-major) with `(H + lambda I)^-1 = U^T U`, where
/// `lambda = damping * mean(diag H)` after every zero diagonal entry (a dead input) is set to
/// 1, as GPTQ does. Only the lower triangle of `h` is read.
///
/// Computed without forming the inverse: with `J` the order reversal, the lower Cholesky
/// factor `M` of `J A J` gives `A = V V^T` with `V = J M J` upper, so `A^-1 = U^T U` with
/// `U = V^-1 = J M^-1 J`.
pub(crate) fn inverse_upper_factor(h: &[f64], n: usize, damping: f64) -> Result<Vec<f64>> {
    let mut diag: Vec<f64> = (0..n).map(|i| h[i * n + i]).collect();
    for d in &mut diag {
        if *d == 0.0 {
            *d = 1.0;
        }
    }
    let lambda = damping * diag.iter().sum::<f64>() / n as f64;
    // J A J, lower triangle: (J A J)[i][j] = A[n-1-i][n-1-j]; for j <= i that is the
    // entry of A at (n-1-i, n-1-j) with n-1-i <= n-1-j, i.e. the upper triangle of A, which
    // is read as the transpose of the lower one.
    let mut m = vec![0f64; n * n];
    for i in 0..n {
        for j in 0..i {
            m[i * n + j] = h[(n - 1 - j) * n + (n - 1 - i)];
        }
        m[i * n + i] = diag[n - 1 - i] + lambda;
    }
    cholesky_lower(&mut m, n, "Cholesky factorization").map_err(|e| match e {
        // Row i of the reversed matrix is column n - 1 - i.
        SpqrError::NotPositiveDefinite {
            stage,
            column,
            pivot,
        } => SpqrError::NotPositiveDefinite {
            stage,
            column: n - 1 - column,
            pivot,
        },
        e => e,
    })?;
    invert_lower(&mut m, n);
    let mut u = vec![0f64; n * n];
    for i in 0..n {
        for j in 0..=i {
            u[(n - 1 - i) * n + (n - 1 - j)] = m[i * n + j];
        }
    }
    if let Some(bad) = u.iter().position(|v| !v.is_finite()) {
        return Err(SpqrError::NotPositiveDefinite {
            stage: "inverse",
            column: bad % n,
            pivot: u[bad],
        });
    }
    Ok(u)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matmul(a: &[f64], b: &[f64], n: usize) -> Vec<f64> {
        let mut c = vec![0f64; n * n];
        for i in 0..n {
            for k in 0..n {
                for j in 0..n {
                    c[i * n + j] += a[i * n + k] * b[k * n + j];
                }
            }
        }
        c
    }

    fn transpose(a: &[f64], n: usize) -> Vec<f64> {
        let mut t = vec![0f64; n * n];
        for i in 0..n {
            for j in 0..n {
                t[j * n + i] = a[i * n + j];
            }
        }
        t
    }

    #[test]
    fn the_factor_inverts_the_damped_gram_matrix() {
        let (samples, n) = (40, 9);
        let x: Vec<f32> = (0..samples * n)
            .map(|i| (((i * 7919) % 113) as f32 - 56.0) / 17.0 + (i % n) as f32 * 0.3)
            .collect();
        let mut h = gram(&x, samples, n);
        // A dead input.
        for k in 0..n {
            h[3 * n + k] = 0.0;
            h[k * n + 3] = 0.0;
        }
        let damping = 0.01;
        let u = inverse_upper_factor(&h, n, damping).unwrap();
        for i in 0..n {
            for j in 0..i {
                assert_eq!(u[i * n + j], 0.0, "U must be upper triangular");
            }
            assert!(u[i * n + i] > 0.0);
        }
        let mut a = h.clone();
        a[3 * n + 3] = 1.0;
        let lambda = damping * (0..n).map(|i| a[i * n + i]).sum::<f64>() / n as f64;
        for i in 0..n {
            a[i * n + i] += lambda;
        }
        let inv = matmul(&transpose(&u, n), &u, n);
        let id = matmul(&inv, &a, n);
        for i in 0..n {
            for j in 0..n {
                let want = if i == j { 1.0 } else { 0.0 };
                assert!(
                    (id[i * n + j] - want).abs() < 1e-9,
                    "({i}, {j}): {}",
                    id[i * n + j]
                );
            }
        }
    }

    #[test]
    fn an_indefinite_matrix_is_an_error() {
        let h = vec![1.0, 2.0, 2.0, 1.0];
        assert!(matches!(
            inverse_upper_factor(&h, 2, 0.0),
            Err(SpqrError::NotPositiveDefinite { .. })
        ));
    }
}
