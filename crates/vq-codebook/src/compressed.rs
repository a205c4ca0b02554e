//! [`VqMatrix`] as a [`CompressedMatrix`] of the format core.

use cmv_format::{CompressedMatrix, Limits, SizeBreakdown, Weights};
use half::f16;

use crate::config::VqConfig;
use crate::encode::EncodeOptions;
use crate::error::VqError;
use crate::matrix::{NAME, VqMatrix};

/// VQ in the format core: fp32 weights in, fp16 inputs, the f64 reference over the exact
/// decoded weights. The variants are the four presets.
impl CompressedMatrix for VqMatrix {
    const NAME: &'static str = NAME;
    type Weight = f32;
    type Input = f16;
    type Output = f64;
    type Options = EncodeOptions;
    type Error = VqError;

    fn encode_weights(weights: Weights<'_, f32>, options: &EncodeOptions) -> Result<Self, VqError> {
        VqMatrix::encode(weights.data(), weights.rows(), weights.cols(), options)
    }

    /// `gptvq2` (the default, tiles of 512 x 128), `aqlm3`, `cq4`, `cq2`, and `gptvq2-256`
    /// (VQ-LLM's 256 x 256 tiles).
    fn variants() -> Vec<(&'static str, EncodeOptions)> {
        [
            ("gptvq2", VqConfig::gptvq2()),
            ("aqlm3", VqConfig::aqlm3()),
            ("cq4", VqConfig::cq4()),
            ("cq2", VqConfig::cq2()),
            ("gptvq2-256", VqConfig::gptvq2_256()),
        ]
        .into_iter()
        .map(|(name, c)| (name, EncodeOptions::with(c)))
        .collect()
    }

    fn rows(&self) -> usize {
        VqMatrix::rows(self)
    }

    fn cols(&self) -> usize {
        VqMatrix::cols(self)
    }

    fn size_breakdown(&self) -> SizeBreakdown {
        VqMatrix::size_breakdown(self)
    }

    fn container_bytes(&self) -> Vec<u8> {
        self.to_bytes()
    }

    fn from_container(blob: &[u8], limits: &Limits) -> Result<Self, VqError> {
        Self::from_bytes_with(blob, limits)
    }

    fn reference(&self, x: &[f16], batch: usize) -> Result<Vec<f64>, VqError> {
        VqMatrix::reference(self, x, batch)
    }
}
