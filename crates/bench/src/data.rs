//! Reproducible random operands, generated in parallel.

use half::f16;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
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
    }
}
