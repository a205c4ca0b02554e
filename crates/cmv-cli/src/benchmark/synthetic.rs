//! Synthetic layer sets for `cmv bench --synthetic`: the linear layers of one decoder layer of
//! a known model, with seeded Gaussian fp16 weights.

use half::f16;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand_distr::{Distribution, Normal};
use rayon::prelude::*;

/// A model whose decoder layer `cmv bench --synthetic` builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Preset {
    /// LLaMA-2-7B: per layer q, k, v, o 4096x4096, gate and up 11008x4096, down 4096x11008
    /// (rows x columns = outputs x inputs); 32 layers.
    #[value(name = "llama-7b")]
    Llama7b,
}

/// Standard deviation of the synthetic weights (that of LLaMA's initialization; the
/// products' times do not depend on it, the int8 formats' sizes on the shape of the
/// distribution only).
pub const SIGMA: f64 = 0.02;

/// One synthetic tensor: name and shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    /// The tensor's name, as in the model's safetensors files.
    pub name: String,
    /// Rows (outputs).
    pub rows: usize,
    /// Columns (inputs).
    pub cols: usize,
}

impl Preset {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Llama7b => "llama-7b",
        }
    }

    /// The model's decoder layers.
    pub fn layers(self) -> usize {
        match self {
            Preset::Llama7b => 32,
        }
    }

    /// The linear layers of one decoder layer (layer 0's names), in the model's order.
    pub fn shapes(self) -> Vec<Shape> {
        let (hidden, ffn) = match self {
            Preset::Llama7b => (4096, 11008),
        };
        let layer = |name: &str, rows, cols| Shape {
            name: format!("model.layers.0.{name}.weight"),
            rows,
            cols,
        };
        vec![
            layer("self_attn.q_proj", hidden, hidden),
            layer("self_attn.k_proj", hidden, hidden),
            layer("self_attn.v_proj", hidden, hidden),
            layer("self_attn.o_proj", hidden, hidden),
            layer("mlp.gate_proj", ffn, hidden),
            layer("mlp.up_proj", ffn, hidden),
            layer("mlp.down_proj", hidden, ffn),
        ]
    }
}

/// Values generated per block (each block has its own seeded generator, so that blocks are
/// made in parallel and the result does not depend on the threads).
const BLOCK: usize = 1 << 16;

/// `n` values `N(0, sigma^2)` rounded to fp16, as little-endian bytes (an F16 tensor's data).
pub fn gaussian_f16_bytes(n: usize, sigma: f64, seed: u64) -> Vec<u8> {
    let normal = Normal::new(0.0, sigma).unwrap_or_else(|_| {
        // Only a negative or NaN sigma fails; SIGMA is neither.
        Normal::new(0.0, 1.0).expect("the unit normal")
    });
    let mut out = vec![0u8; 2 * n];
    out.par_chunks_mut(2 * BLOCK)
        .enumerate()
        .for_each(|(blk, chunk)| {
            let mut rng =
                SmallRng::seed_from_u64(seed ^ (blk as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            for v in chunk.chunks_exact_mut(2) {
                let x: f64 = normal.sample(&mut rng);
                v.copy_from_slice(&f16::from_f64(x).to_le_bytes());
            }
        });
    out
}

/// The seed of tensor `index` of a set seeded with `seed`.
pub fn tensor_seed(seed: u64, index: usize) -> u64 {
    seed.wrapping_mul(1_000_003).wrapping_add(index as u64 + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_7b_has_the_seven_linear_shapes_of_a_decoder_layer() {
        let s = Preset::Llama7b.shapes();
        let shapes: Vec<(&str, usize, usize)> = s
            .iter()
            .map(|t| (t.name.as_str(), t.rows, t.cols))
            .collect();
        assert_eq!(
            shapes,
            [
                ("model.layers.0.self_attn.q_proj.weight", 4096, 4096),
                ("model.layers.0.self_attn.k_proj.weight", 4096, 4096),
                ("model.layers.0.self_attn.v_proj.weight", 4096, 4096),
                ("model.layers.0.self_attn.o_proj.weight", 4096, 4096),
                ("model.layers.0.mlp.gate_proj.weight", 11008, 4096),
                ("model.layers.0.mlp.up_proj.weight", 11008, 4096),
                ("model.layers.0.mlp.down_proj.weight", 4096, 11008),
            ]
        );
        // 202,375,168 weights per layer; 32 layers: the 6.48 B parameters of LLaMA-2-7B outside
        // its embedding table and output head (2 x 32000 x 4096) and its norms.
        let per_layer: usize = s.iter().map(|t| t.rows * t.cols).sum();
        assert_eq!(per_layer, 202_375_168);
        assert_eq!(Preset::Llama7b.layers(), 32);
        assert_eq!(per_layer * Preset::Llama7b.layers(), 6_476_005_376);
        assert_eq!(Preset::Llama7b.name(), "llama-7b");
        // The names are what `Role::of` counts as linear layers.
        assert!(
            s.iter()
                .all(|t| super::super::report::Role::of(&t.name)
                    == super::super::report::Role::Linear)
        );
    }

    #[test]
    fn weights_are_reproducible_gaussian_fp16() {
        let n = 3 * BLOCK + 17;
        let a = gaussian_f16_bytes(n, SIGMA, 5);
        assert_eq!(a.len(), 2 * n);
        assert_eq!(a, gaussian_f16_bytes(n, SIGMA, 5));
        assert_ne!(a, gaussian_f16_bytes(n, SIGMA, 6));
        let v: Vec<f64> = a
            .chunks_exact(2)
            .map(|b| f64::from(f16::from_le_bytes([b[0], b[1]]).to_f32()))
            .collect();
        assert!(v.iter().all(|x| x.is_finite()));
        let mean = v.iter().sum::<f64>() / n as f64;
        let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
        assert!(mean.abs() < 1e-3, "mean {mean}");
        assert!((sd / SIGMA - 1.0).abs() < 0.02, "sd {sd}");
        // Gaussian tails: about 0.27% beyond 3 sigma.
        let tail = v.iter().filter(|x| x.abs() > 3.0 * SIGMA).count() as f64 / n as f64;
        assert!((0.001..0.005).contains(&tail), "tail {tail}");
        assert_ne!(tensor_seed(0, 0), tensor_seed(0, 1));
        assert_ne!(tensor_seed(0, 1), tensor_seed(1, 0));
    }
}
