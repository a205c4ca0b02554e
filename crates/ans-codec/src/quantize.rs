//! A quantizer for ANS: one uniform step per matrix, chosen from a target error.
//!
//! MatVANS assumes int8 values from a fixed quantization step, whose histogram is peaked and
//! cheap to code; per-row absmax int8 (the usual int8 scheme) spreads every row over all 255
//! values instead (7.26 bits of entropy on all-MiniLM-L6-v2). [`quantize_to_error`] picks the
//! largest step whose relative error `||w - step q|| / ||w||` stays within a target, clipping
//! the rare values past `127 step` (their error is counted): a larger step gives fewer
//! distinct values, a lower entropy and a smaller ANS stream.

use cmv_format::check_finite;

use crate::error::{AnsError, Result};

/// Weights as `step * q` with `q` in `-127..=127` (rounded half to even, clamped).
#[derive(Clone, Debug, PartialEq)]
pub struct StepQuantized {
    /// The int8 values.
    pub q: Vec<i8>,
    /// The step (scale) of every value.
    pub step: f32,
    /// `||w - step q|| / ||w||` (0 for an all-zero matrix).
    pub rel_error: f64,
    /// Values past `±127 step`, clamped.
    pub clipped: usize,
}

/// Quantizes `w` with the step `step` (positive and finite): `q = clamp(round(w / step))`.
///
/// # Errors
/// [`FormatError::NonFinite`](cmv_format::FormatError::NonFinite) weights,
/// [`AnsError::Step`] for a step that is not positive and finite.
pub fn quantize_step(w: &[f32], step: f32) -> Result<StepQuantized> {
    check_finite("weights", w)?;
    if !(step.is_finite() && step > 0.0) {
        return Err(AnsError::Step { step });
    }
    Ok(quantize_unchecked(w, step))
}

fn quantize_unchecked(w: &[f32], step: f32) -> StepQuantized {
    let (mut err, mut norm, mut clipped) = (0f64, 0f64, 0usize);
    let q = w
        .iter()
        .map(|&v| {
            let r = (v / step).round_ties_even();
            if r.abs() > 127.0 {
                clipped += 1;
            }
            let q = r.clamp(-127.0, 127.0);
            let d = f64::from(v) - f64::from(q) * f64::from(step);
            err += d * d;
            norm += f64::from(v) * f64::from(v);
            q as i8
        })
        .collect();
    StepQuantized {
        q,
        step,
        rel_error: if norm == 0.0 {
            0.0
        } else {
            (err / norm).sqrt()
        },
        clipped,
    }
}

/// The largest step (to about 0.1%) whose relative error is at most `target`, searched between
/// the absmax step (`max |w| / 127`, no clipping) and `4 max |w|` (everything rounds to 0). If
/// even the absmax step misses the target, the result has the absmax step and its error (check
/// [`StepQuantized::rel_error`]): no step of int8 does better by much.
///
/// # Errors
/// [`FormatError::NonFinite`](cmv_format::FormatError::NonFinite) weights,
/// [`AnsError::TargetError`] for a target that is not in `(0, 1)`.
pub fn quantize_to_error(w: &[f32], target: f64) -> Result<StepQuantized> {
    check_finite("weights", w)?;
    if !(target > 0.0 && target < 1.0) {
        return Err(AnsError::TargetError { target });
    }
    let absmax = w.iter().fold(0f32, |m, v| m.max(v.abs()));
    if absmax == 0.0 {
        return Ok(quantize_unchecked(w, 1.0));
    }
    let lo_step = absmax / 127.0;
    let lo = quantize_unchecked(w, lo_step);
    if lo.rel_error > target {
        return Ok(lo);
    }
    // Bisect on log(step): error(lo) <= target < error(hi).
    let (mut lo_l, mut hi_l) = (f64::from(lo_step).ln(), f64::from(4.0 * absmax).ln());
    let mut best = lo;
    while hi_l - lo_l > 1e-3 {
        let mid = 0.5 * (lo_l + hi_l);
        let cand = quantize_unchecked(w, mid.exp() as f32);
        if cand.rel_error <= target {
            lo_l = mid;
            best = cand;
        } else {
            hi_l = mid;
        }
    }
    Ok(best)
}

/// Weights as `steps[r] * q` per row `r`, `q` in `-127..=127`.
#[derive(Clone, Debug, PartialEq)]
pub struct RowStepQuantized {
    /// The int8 values, row-major.
    pub q: Vec<i8>,
    /// One step per row.
    pub steps: Vec<f32>,
    /// `||w - step q|| / ||w||` over the whole matrix.
    pub rel_error: f64,
    /// Values past `±127 step` of their row, clamped.
    pub clipped: usize,
}

/// [`quantize_to_error`] row by row: each row of the row-major `rows x cols` matrix `w` gets
/// the largest step that keeps its own relative error within `target`, so the matrix's is
/// within it too wherever int8 can reach it. Unlike per-row absmax scaling (which spreads
/// every row over all 255 values), the steps follow the target error, so every row's values
/// share one peaked histogram, which ANS codes in few bits.
///
/// # Errors
/// As [`quantize_to_error`]; [`FormatError::Length`](cmv_format::FormatError::Length) when `w`
/// does not hold `rows * cols` values.
pub fn quantize_rows_to_error(
    w: &[f32],
    rows: usize,
    cols: usize,
    target: f64,
) -> Result<RowStepQuantized> {
    cmv_format::check_len("weights", w.len(), rows.saturating_mul(cols))?;
    check_finite("weights", w)?;
    if !(target > 0.0 && target < 1.0) {
        return Err(AnsError::TargetError { target });
    }
    let mut out = RowStepQuantized {
        q: Vec::with_capacity(w.len()),
        steps: Vec::with_capacity(rows),
        rel_error: 0.0,
        clipped: 0,
    };
    let (mut err, mut norm) = (0f64, 0f64);
    for row in w.chunks_exact(cols.max(1)).take(rows) {
        let r = quantize_to_error(row, target)?;
        let n: f64 = row.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
        err += r.rel_error * r.rel_error * n;
        norm += n;
        out.clipped += r.clipped;
        out.steps.push(r.step);
        out.q.extend_from_slice(&r.q);
    }
    out.rel_error = if norm == 0.0 {
        0.0
    } else {
        (err / norm).sqrt()
    };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gauss(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                let mut t = 0f32;
                for _ in 0..4 {
                    s = s
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    t += (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
                }
                t
            })
            .collect()
    }

    #[test]
    fn the_step_meets_the_target_and_is_nearly_the_largest() {
        let w = gauss(20000, 1);
        for target in [0.01, 0.05, 0.14, 0.3] {
            let q = quantize_to_error(&w, target).unwrap();
            assert!(q.rel_error <= target, "{target}: {}", q.rel_error);
            let bigger = quantize_step(&w, q.step * 1.01).unwrap();
            assert!(
                bigger.rel_error > target * 0.99,
                "{target}: {}",
                bigger.rel_error
            );
            // The values are what the step says.
            for (&v, &qv) in w.iter().zip(&q.q).take(100) {
                let r = (v / q.step).round_ties_even().clamp(-127.0, 127.0);
                assert_eq!(qv as f32, r);
            }
        }
        // A looser target never takes a smaller step, nor more distinct values.
        let a = quantize_to_error(&w, 0.05).unwrap();
        let b = quantize_to_error(&w, 0.1).unwrap();
        assert!(b.step >= a.step);
    }

    #[test]
    fn outliers_are_clipped_and_counted() {
        let mut w = gauss(10000, 2);
        w[17] = 1000.0;
        w[18] = -1000.0;
        let q = quantize_step(&w, 0.05).unwrap();
        assert_eq!(q.clipped, 2);
        assert_eq!((q.q[17], q.q[18]), (127, -127));
        // The error counts the clipped part: 1000 - 127 * 0.05 each, most of the norm.
        assert!(q.rel_error > 0.9, "{}", q.rel_error);
        // The search keeps a step that meets the target: here one large enough to hold them.
        let t = quantize_to_error(&w, 0.05).unwrap();
        assert!(t.rel_error <= 0.05 && t.step * 127.0 >= 1000.0 * 0.95);
    }

    #[test]
    fn rows_get_their_own_steps() {
        // Row 1 is 100x row 0: one step for both would zero row 0.
        let mut w = gauss(2000, 4);
        for v in &mut w[1000..] {
            *v *= 100.0;
        }
        let r = quantize_rows_to_error(&w, 2, 1000, 0.05).unwrap();
        assert!(r.rel_error <= 0.05);
        assert!(
            (r.steps[1] / r.steps[0] - 100.0).abs() < 5.0,
            "{:?}",
            r.steps
        );
        // The two rows' values have nearly the same histogram.
        let hist = |q: &[i8]| {
            let mut h = [0usize; 256];
            q.iter().for_each(|&v| h[v as u8 as usize] += 1);
            h
        };
        let (a, b) = (hist(&r.q[..1000]), hist(&r.q[1000..]));
        let diff: usize = a.iter().zip(&b).map(|(x, y)| x.abs_diff(*y)).sum();
        assert!(diff < 200, "{diff}");
        assert!(quantize_rows_to_error(&w, 3, 1000, 0.05).is_err());
    }

    #[test]
    fn edge_cases_and_errors() {
        let z = quantize_to_error(&[0.0; 10], 0.1).unwrap();
        assert_eq!((z.rel_error, z.clipped), (0.0, 0));
        assert!(z.q.iter().all(|&v| v == 0));
        // A target tighter than int8 can give: the absmax step, its error reported.
        let w = gauss(1000, 3);
        let t = quantize_to_error(&w, 1e-6).unwrap();
        assert!(t.rel_error > 1e-6 && t.clipped == 0);
        for bad in [0.0, 1.0, -0.1, f64::NAN] {
            assert!(matches!(
                quantize_to_error(&w, bad),
                Err(AnsError::TargetError { .. })
            ));
        }
        assert!(matches!(quantize_step(&w, 0.0), Err(AnsError::Step { .. })));
        assert!(matches!(
            quantize_to_error(&[1.0, f32::NAN], 0.1),
            Err(AnsError::Format(cmv_format::FormatError::NonFinite { .. }))
        ));
    }
}
