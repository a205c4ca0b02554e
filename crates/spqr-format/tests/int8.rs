//! The int8 split of the inputs (issue 17's integer-MMA design, `spqr_format::int8`): the CPU
//! model of the product stays within its stated bound of the f64 reference on every output, on
//! ordinary and on adversarial inputs, and within the product's 1e-3 relative tolerance where
//! the rows are not ill-conditioned. CPU only.

mod common;

use common::{gaussian, rel_err, to_f16, weights_with_outliers};
use half::f16;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use spqr_format::cmv_format::FormatError;
use spqr_format::{QuantizeOptions, SpqrError, SpqrMatrix, quantize};

/// Every output within its bound of the reference; returns the largest `|error| / bound` and
/// the relative error of the whole product.
fn check_bound(m: &SpqrMatrix, x: &[f16], batch: usize) -> (f64, f64) {
    let want = m.gemv_reference(x, batch).unwrap();
    let got = m.gemv_int8_model(x, batch).unwrap();
    assert_eq!(got.y.len(), want.len());
    let mut worst = 0f64;
    for (i, ((&y, &r), &b)) in got.y.iter().zip(&want).zip(&got.bound).enumerate() {
        let err = (f64::from(y) - r).abs();
        assert!(b.is_finite() && b >= 0.0, "bound {b} at {i}");
        assert!(err <= b, "output {i}: |{y} - {r}| = {err:e} > bound {b:e}");
        if b > 0.0 {
            worst = worst.max(err / b);
        }
    }
    (worst, rel_err(&got.y, &want))
}

fn matrix(rows: usize, cols: usize, scale: f32, seed: u64) -> SpqrMatrix {
    let w: Vec<f32> = weights_with_outliers(rows, cols, seed)
        .into_iter()
        .map(|v| v * scale)
        .collect();
    quantize(&w, rows, cols, &QuantizeOptions::default()).unwrap()
}

#[test]
fn ordinary_inputs_stay_within_the_bound_and_the_tolerance() {
    for (rows, cols, seed) in [(64, 256, 1), (40, 200, 2), (16, 1000, 3)] {
        let m = matrix(rows, cols, 1.0, seed);
        for batch in [1, 3] {
            let x = to_f16(&gaussian(batch * cols, 1.0, seed + 10));
            let (worst, rel) = check_bound(&m, &x, batch);
            assert!(worst <= 1.0);
            // 15-bit inputs per tile: far inside the product's 1e-3.
            assert!(
                rel < 1e-4,
                "{rows}x{cols} batch {batch}: relative error {rel:e}"
            );
            eprintln!("{rows}x{cols} b{batch}: worst {worst:.3} rel {rel:e}");
        }
    }
}

/// Inputs that stress the per-tile scale: in every tile one value near fp16's largest and the
/// others tiny (subnormal to 1e-2) with random signs, or whole tiles of subnormals; weights
/// scaled up to large and down to small fp16 statistics.
#[test]
fn adversarial_inputs_stay_within_the_bound() {
    let (rows, cols) = (32, 320);
    let mut rng = StdRng::seed_from_u64(7);
    for weight_scale in [1e-3f32, 1.0, 1e3] {
        let m = matrix(rows, cols, weight_scale, 5);
        for case in 0..4 {
            let batch = 2;
            let x: Vec<f16> = (0..batch * cols)
                .map(|i| {
                    let sign = if rng.r#gen() { 1.0 } else { -1.0 };
                    let v = match case {
                        // One huge value per tile of 16, the rest tiny.
                        0 if i % 16 == 5 => 60000.0,
                        0 => rng.gen_range(6.0e-8f32..1e-2),
                        // Subnormals only.
                        1 => rng.gen_range(6.0e-8f32..6.0e-5),
                        // Every magnitude from 1e-7 to 6e4 mixed.
                        2 => 10f32.powf(rng.gen_range(-7.0f32..4.7)),
                        // Exactly representable extremes and zeros.
                        _ => [0.0, 65504.0, 6.0e-8, 1.0][i % 4],
                    };
                    f16::from_f32(sign * v)
                })
                .collect();
            let (worst, _) = check_bound(&m, &x, batch);
            assert!(worst <= 1.0, "scale {weight_scale} case {case}");
            eprintln!("scale {weight_scale} case {case}: worst {worst:.3}");
        }
    }
}

/// The bound is what the relative error of a row is measured against: with one huge input per
/// tile, the tiny inputs are rounded to multiples of `60000 / 16383` and the rows whose sum is
/// small next to `sum |w x|` lose relative accuracy; the product over ordinary rows does not.
#[test]
fn the_bound_scales_with_the_tiles_largest_input() {
    let (rows, cols) = (16, 160);
    let m = matrix(rows, cols, 1.0, 9);
    let small = to_f16(&gaussian(cols, 1.0, 11));
    let mut spiked = small.clone();
    for t in 0..cols / 16 {
        spiked[16 * t] = f16::from_f32(30000.0);
    }
    let a = m.gemv_int8_model(&small, 1).unwrap();
    let b = m.gemv_int8_model(&spiked, 1).unwrap();
    let (mean_a, mean_b) = (
        a.bound.iter().sum::<f64>() / rows as f64,
        b.bound.iter().sum::<f64>() / rows as f64,
    );
    // The tiles' largest input grew from ~3 to 30000: the bounds grow with it.
    assert!(mean_b > 1000.0 * mean_a, "{mean_a:e} {mean_b:e}");
    check_bound(&m, &spiked, 1);
}

#[test]
fn bad_arguments_are_errors() {
    let m = matrix(16, 32, 1.0, 1);
    let x = to_f16(&gaussian(32, 1.0, 2));
    assert!(matches!(
        m.gemv_int8_model(&x, 0),
        Err(SpqrError::Format(FormatError::Batch { batch: 0, .. }))
    ));
    assert!(matches!(
        m.gemv_int8_model(&x[..31], 1),
        Err(SpqrError::Format(FormatError::Length { .. }))
    ));
    let mut bad = x.clone();
    bad[7] = f16::NAN;
    assert!(matches!(
        m.gemv_int8_model(&bad, 1),
        Err(SpqrError::Format(FormatError::NonFinite { index: 7, .. }))
    ));
}
