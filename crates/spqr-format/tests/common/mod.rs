//! Helpers shared by the CPU tests.
#![allow(dead_code)]

use half::f16;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal, StandardNormal};

/// `n` N(0, sigma^2) values, seeded.
pub fn gaussian(n: usize, sigma: f64, seed: u64) -> Vec<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    let d = Normal::new(0.0, sigma).unwrap();
    (0..n).map(|_| d.sample(&mut rng) as f32).collect()
}

/// Gaussian weights with a few large ones (heavy tail), as real layers have.
pub fn weights_with_outliers(rows: usize, cols: usize, seed: u64) -> Vec<f32> {
    let mut w = gaussian(rows * cols, 0.02, seed);
    let mut rng = StdRng::seed_from_u64(seed ^ 0xabcd);
    for _ in 0..(rows * cols / 200).max(1) {
        let i = rng.gen_range(0..w.len());
        w[i] = rng.gen_range(0.1..0.4) * if rng.r#gen() { 1.0 } else { -1.0 };
    }
    w
}

/// `samples` correlated input vectors of `cols` values: `x = A g + 0.1 e` with `k` latent
/// factors `g`, a fixed random mixing `A` and per-column scales spread over a factor 30 (so
/// that `diag(H)` is far from uniform).
pub fn correlated_inputs(samples: usize, cols: usize, k: usize, seed: u64) -> Vec<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mix: Vec<f64> = (0..k * cols).map(|_| rng.sample(StandardNormal)).collect();
    let scale: Vec<f64> = (0..cols)
        .map(|c| 30f64.powf(((c * 37) % cols) as f64 / cols as f64))
        .collect();
    let mut x = Vec::with_capacity(samples * cols);
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
    for _ in 0..samples {
        let g: Vec<f64> = (0..k).map(|_| rng.sample(StandardNormal)).collect();
        for c in 0..cols {
            let mut v: f64 =
                (0..k).map(|f| g[f] * mix[f * cols + c]).sum::<f64>() / (k as f64).sqrt();
            v += 0.1 * rng.sample::<f64, _>(StandardNormal);
            x.push((v * scale[c]) as f32);
        }
    }
    x
}

/// The values as fp16.
pub fn to_f16(v: &[f32]) -> Vec<f16> {
    v.iter().map(|&a| f16::from_f32(a)).collect()
}

/// `y = W x` in f64 for a batch of fp16 inputs (`x[b * cols + c]`, `y[b * rows + r]`).
pub fn dense_gemv(w: &[f32], rows: usize, cols: usize, x: &[f16], batch: usize) -> Vec<f64> {
    let mut y = vec![0f64; batch * rows];
    for b in 0..batch {
        for r in 0..rows {
            y[b * rows + r] = (0..cols)
                .map(|c| f64::from(w[r * cols + c]) * f64::from(x[b * cols + c].to_f32()))
                .sum();
        }
    }
    y
}

/// `||a - b|| / ||b||`.
pub fn rel_err<A: Copy + Into<f64>, B: Copy + Into<f64>>(a: &[A], b: &[B]) -> f64 {
    let (mut num, mut den) = (0f64, 0f64);
    for (&p, &q) in a.iter().zip(b) {
        let (p, q) = (p.into(), q.into());
        num += (p - q) * (p - q);
        den += q * q;
    }
    (num / den.max(f64::MIN_POSITIVE)).sqrt()
}
