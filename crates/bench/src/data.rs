//! Reproducible random operands, generated in parallel.

use half::f16;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal};
use rayon::prelude::*;

const BLOCK: usize = 1 << 16;

fn fill<T: Send>(n: usize, seed: u64, f: impl Fn(&mut SmallRng) -> T + Sync) -> Vec<T> {
    let mut v = Vec::with_capacity(n);
    (0..n.div_ceil(BLOCK))
        .into_par_iter()
        .map(|blk| {
            let mut rng =
                SmallRng::seed_from_u64(seed ^ (blk as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let len = BLOCK.min(n - blk * BLOCK);
            (0..len).map(|_| f(&mut rng)).collect::<Vec<T>>()
        })
        .collect::<Vec<_>>()
        .into_iter()
        .for_each(|chunk| v.extend(chunk));
    v
}

/// `n` fp16 values uniform in `[-scale, scale)`.
pub fn f16_uniform(n: usize, scale: f32, seed: u64) -> Vec<f16> {
    fill(n, seed, |r| {
        f16::from_f32(r.gen_range(-1.0f32..1.0) * scale)
    })
}

/// `n` int8 values uniform over all 256 values.
pub fn i8_uniform(n: usize, seed: u64) -> Vec<i8> {
    fill(n, seed, |r| r.r#gen::<i8>())
}

/// `n` int8 values `round_half_even(N(0, sigma^2))`, clamped to the int8 range: the entries
/// of quantized weight matrices (docs/ANS.md).
pub fn i8_gaussian(n: usize, sigma: f64, seed: u64) -> Vec<i8> {
    let normal = Normal::new(0.0, sigma.max(1e-9)).unwrap_or_else(|_| {
        // sigma is finite and positive here; a NaN sigma falls back to the unit normal.
        Normal::new(0.0, 1.0).expect("unit normal")
    });
    fill(n, seed, |r| {
        normal.sample(r).round_ties_even().clamp(-128.0, 127.0) as i8
    })
}

/// Standard deviation of generated int8 weights: the MatVANS benchmark's (docs/ANS.md).
pub const I8_WEIGHT_SIGMA: f64 = 4.0;

/// Element types the bench generates seeded operands of: the weights and inputs of a format's
/// [`cmv_format::CompressedMatrix`] (`i8`, `f32`, `f16`).
pub trait Generate: Copy + Send + Sync + 'static {
    /// `n` seeded weights: bell-shaped int8 (sigma [`I8_WEIGHT_SIGMA`]); floats uniform in
    /// `[-1, 1)`, fp16-representable.
    fn weights(n: usize, seed: u64) -> Vec<Self>;
    /// `n` seeded inputs: int8 uniform over all 256 values; floats uniform in `[-1, 1)`.
    fn inputs(n: usize, seed: u64) -> Vec<Self>;
}

impl Generate for i8 {
    fn weights(n: usize, seed: u64) -> Vec<Self> {
        i8_gaussian(n, I8_WEIGHT_SIGMA, seed)
    }
    fn inputs(n: usize, seed: u64) -> Vec<Self> {
        i8_uniform(n, seed)
    }
}

impl Generate for f16 {
    fn weights(n: usize, seed: u64) -> Vec<Self> {
        f16_uniform(n, 1.0, seed)
    }
    fn inputs(n: usize, seed: u64) -> Vec<Self> {
        f16_uniform(n, 1.0, seed)
    }
}

impl Generate for f32 {
    fn weights(n: usize, seed: u64) -> Vec<Self> {
        f16_uniform(n, 1.0, seed)
            .into_iter()
            .map(f16::to_f32)
            .collect()
    }
    fn inputs(n: usize, seed: u64) -> Vec<Self> {
        Self::weights(n, seed)
    }
}

/// `n` random bytes.
pub fn bytes(n: usize, seed: u64) -> Vec<u8> {
    fill(n, seed, |r| r.r#gen::<u8>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_is_reproducible_and_spread() {
        let a = f16_uniform(200_000, 2.0, 7);
        assert_eq!(a, f16_uniform(200_000, 2.0, 7));
        assert_ne!(a, f16_uniform(200_000, 2.0, 8));
        assert!(a.iter().all(|v| v.to_f32().abs() <= 2.0));
        let zeros = a.iter().filter(|v| v.to_f32() == 0.0).count();
        assert!(
            zeros < 100,
            "{zeros} zeros: data must not be trivially zero"
        );
        let b = i8_uniform(100_000, 1);
        assert!(b.contains(&-128) && b.contains(&127));
        let g = i8_gaussian(100_000, 4.0, 3);
        assert_eq!(g, <i8 as Generate>::weights(100_000, 3));
        let var = g.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / g.len() as f64;
        assert!((var - 16.0).abs() < 1.0, "variance {var}");
        let w = <f32 as Generate>::weights(1000, 4);
        assert!(
            w.iter()
                .all(|&v| f16::from_f32(v).to_f32() == v && v.abs() <= 1.0)
        );
    }
}
