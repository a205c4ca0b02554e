//! Round-to-nearest baseline: asymmetric min-max quantization of each group of `group`
//! consecutive weights of a row to `bits` bits (scale and zero kept in f32, not counted).

/// The RTN-quantized weights (`rows x cols`, row-major), `bits` in 1..=16, `group >= 1`.
pub fn rtn(w: &[f32], rows: usize, cols: usize, bits: u32, group: usize) -> Vec<f32> {
    let levels = ((1u32 << bits) - 1) as f32;
    let mut out = vec![0f32; rows * cols];
    for r in 0..rows {
        for g0 in (0..cols).step_by(group) {
            let g1 = (g0 + group).min(cols);
            let src = &w[r * cols + g0..r * cols + g1];
            let lo = src.iter().copied().fold(f32::INFINITY, f32::min);
            let hi = src.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let scale = if hi > lo { (hi - lo) / levels } else { 1.0 };
            for (o, &x) in out[r * cols + g0..r * cols + g1].iter_mut().zip(src) {
                *o = lo + ((x - lo) / scale).round().clamp(0.0, levels) * scale;
            }
        }
    }
    out
}

/// `||a - b|| / ||b||` in f64 (0 when both are zero).
pub fn relative_error(a: &[f32], b: &[f32]) -> f64 {
    let (mut num, mut den) = (0f64, 0f64);
    for (&x, &y) in a.iter().zip(b) {
        num += (f64::from(x) - f64::from(y)).powi(2);
        den += f64::from(y).powi(2);
    }
    if den == 0.0 {
        num.sqrt()
    } else {
        (num / den).sqrt()
    }
}
