//! Matrices for the tests: value distributions and the dense reference product.
#![allow(dead_code)]

use ans_codec::Layout;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Cauchy, Distribution, Normal};

/// Every layout.
pub const LAYOUTS: [Layout; 4] = [
    Layout::WarpRows,
    Layout::WarpStripes,
    Layout::WarpLanes,
    Layout::WarpLanesEsc,
];

/// How the elements of a test matrix are drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Dist {
    /// `round(N(0, sigma))`, clamped to int8.
    Normal(f64),
    /// Uniform over all 256 values.
    Uniform,
    /// Laplace with scale `b`, rounded and clamped.
    Laplace(f64),
    /// Cauchy with scale `gamma`, rounded and clamped.
    Cauchy(f64),
    /// Every element zero.
    Zeros,
    /// Every element the same value.
    Single(i8),
    /// `a` with probability 99.9 %, `b` otherwise.
    Skew(i8, i8),
}

fn clamp(v: f64) -> i8 {
    v.round().clamp(-128.0, 127.0) as i8
}

/// `n` elements drawn from `dist` with a seeded generator.
pub fn sample(dist: Dist, n: usize, seed: u64) -> Vec<i8> {
    let mut rng = SmallRng::seed_from_u64(seed);
    match dist {
        Dist::Normal(sigma) => {
            let d = Normal::new(0.0, sigma).unwrap();
            (0..n).map(|_| clamp(d.sample(&mut rng))).collect()
        }
        Dist::Uniform => (0..n).map(|_| rng.r#gen::<i8>()).collect(),
        Dist::Laplace(b) => (0..n)
            .map(|_| {
                let u: f64 = rng.gen_range(-0.5..0.5);
                clamp(-b * u.signum() * (1.0 - 2.0 * u.abs()).ln())
            })
            .collect(),
        Dist::Cauchy(gamma) => {
            let d = Cauchy::new(0.0, gamma).unwrap();
            (0..n).map(|_| clamp(d.sample(&mut rng))).collect()
        }
        Dist::Zeros => vec![0; n],
        Dist::Single(v) => vec![v; n],
        Dist::Skew(a, b) => (0..n)
            .map(|_| if rng.gen_bool(0.001) { b } else { a })
            .collect(),
    }
}

/// `W x` over int32, wrapping as `dp4a` does.
pub fn dense_gemv(w: &[i8], rows: usize, cols: usize, x: &[i8]) -> Vec<i32> {
    (0..rows)
        .map(|r| {
            w[r * cols..(r + 1) * cols]
                .iter()
                .zip(x)
                .fold(0i32, |acc, (&a, &b)| {
                    acc.wrapping_add(i32::from(a) * i32::from(b))
                })
        })
        .collect()
}
