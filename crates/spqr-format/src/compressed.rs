//! [`SpqrMatrix`] as a [`CompressedMatrix`] of the format core.

use cmv_format::{CompressedMatrix, Limits, SizeBreakdown, Weights};
use half::f16;

use crate::error::SpqrError;
use crate::matrix::{NAME, OutlierFormat, SpqrMatrix};
use crate::quantize::{QuantizeOptions, quantize_weights};

/// The relative error (`||y_gpu - y_ref|| / ||y_ref||`, the fp64 reference) a GPU product
/// must stay below: the fp16 output rounding and the scaled-weights kernel's fp16 weights
/// (3 to 16 vectors) stay well under it (`docs/SPQR.md`, "GPU kernel").
pub const GPU_TOLERANCE: f64 = 1e-3;

/// SpQR in the format core: fp32 weights in, fp16 inputs, the fp64 reference product
/// ([`SpqrMatrix::gemv_reference`]). The variants are the two outlier encodings the kernel can
/// read.
impl CompressedMatrix for SpqrMatrix {
    const NAME: &'static str = NAME;
    type Weight = f32;
    type Input = f16;
    type Output = f64;
    type Options = QuantizeOptions;
    type Error = SpqrError;

    fn encode_weights(
        weights: Weights<'_, f32>,
        options: &QuantizeOptions,
    ) -> Result<Self, SpqrError> {
        quantize_weights(weights, options)
    }

    fn variants() -> Vec<(&'static str, QuantizeOptions)> {
        [("csr", OutlierFormat::Csr), ("ptcsr", OutlierFormat::Ptcsr)]
            .into_iter()
            .map(|(name, outlier_format)| {
                (
                    name,
                    QuantizeOptions {
                        outlier_format,
                        ..QuantizeOptions::default()
                    },
                )
            })
            .collect()
    }

    fn rows(&self) -> usize {
        self.shape.rows()
    }

    fn cols(&self) -> usize {
        self.shape.cols()
    }

    fn size_breakdown(&self) -> SizeBreakdown {
        SpqrMatrix::size_breakdown(self)
    }

    fn container_bytes(&self) -> Vec<u8> {
        self.to_bytes()
    }

    fn from_container(blob: &[u8], limits: &Limits) -> Result<Self, SpqrError> {
        Self::from_bytes_with(blob, limits)
    }

    /// [`SpqrMatrix::gemv_reference`]: `x` in the caller's column order, any batch of at
    /// least one vector; non-finite inputs propagate as IEEE arithmetic does.
    fn reference(&self, x: &[f16], batch: usize) -> Result<Vec<f64>, SpqrError> {
        self.gemv_reference(x, batch)
    }
}
