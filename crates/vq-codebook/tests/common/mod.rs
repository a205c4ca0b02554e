//! What the table and GPU tests share: seeded weights and tile configurations.

use vq_codebook::{Scope, VqConfig};

/// `n` seeded weights, uniform in `[-0.05, 0.05)`.
pub fn weights(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.1
        })
        .collect()
}

/// `VQ<vec, 8, 1>` with tiles of `rows x cols` weights (the table kernel's configurations).
pub fn tile(rows: usize, cols: usize, vec: usize) -> VqConfig {
    VqConfig {
        vec,
        bits: 8,
        residuals: 1,
        scope: Scope::Tile { rows, cols },
    }
}
