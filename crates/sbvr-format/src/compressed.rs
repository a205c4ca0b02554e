//! [`SbvrMatrix`] as a [`CompressedMatrix`] of the format core.

use cmv_format::{CompressedMatrix, Limits, SizeBreakdown, Weights};
use half::f16;

use crate::encode::{EncodeOptions, encode};
use crate::error::SbvrError;
use crate::matrix::{NAME, SbvrMatrix};

/// The relative error (`||y_gpu - y_ref|| / ||y_ref||` against [`SbvrMatrix::reference`], the
/// same arithmetic in f64) a GPU product must stay below: the kernels sum exact integer
/// popcounts times coefficients and scales in f32 and round the output to fp16 (relative
/// error at most 2^-11 per value).
pub const GPU_TOLERANCE: f64 = 1e-3;

/// SBVR in the format core: fp32 weights in, fp16 inputs, the f64 reference of the kernels'
/// arithmetic ([`SbvrMatrix::reference`]: inputs quantized to int8 per group of 128, as the GPU
/// does). The variants are 2, 3 and 4 bitvectors per group.
impl CompressedMatrix for SbvrMatrix {
    const NAME: &'static str = NAME;
    type Weight = f32;
    type Input = f16;
    type Output = f64;
    type Options = EncodeOptions;
    type Error = SbvrError;

    fn encode_weights(
        weights: Weights<'_, f32>,
        options: &EncodeOptions,
    ) -> Result<Self, SbvrError> {
        let e = encode(weights.data(), weights.rows(), weights.cols(), options)?;
        SbvrMatrix::from_encoded(&e)
    }

    /// `n4` (the default), `n3`, `n2`: bitvectors per group.
    fn variants() -> Vec<(&'static str, EncodeOptions)> {
        [("n4", 4), ("n3", 3), ("n2", 2)]
            .into_iter()
            .map(|(name, bits)| {
                (
                    name,
                    EncodeOptions {
                        bits,
                        ..EncodeOptions::default()
                    },
                )
            })
            .collect()
    }

    fn rows(&self) -> usize {
        SbvrMatrix::rows(self)
    }

    fn cols(&self) -> usize {
        SbvrMatrix::cols(self)
    }

    fn size_breakdown(&self) -> SizeBreakdown {
        SbvrMatrix::size_breakdown(self)
    }

    fn container_bytes(&self) -> Vec<u8> {
        self.to_bytes()
    }

    fn from_container(blob: &[u8], limits: &Limits) -> Result<Self, SbvrError> {
        Self::from_bytes_with(blob, limits)
    }

    /// [`SbvrMatrix::reference`]: the kernels' arithmetic in f64 (a group with a non-finite
    /// input makes its vector's outputs NaN).
    fn reference(&self, x: &[f16], batch: usize) -> Result<Vec<f64>, SbvrError> {
        SbvrMatrix::reference(self, x, batch)
    }
}
