//! SpQR for cmv: a weight matrix stored as a dense 3-bit part in 16 x 16 tiles with bi-level
//! statistics (one `u64` per tile row) plus a sparse part of fp16 outliers (CSR and PTCSR),
//! multiplied on the GPU while it is dequantized (`docs/SPQR.md`).
//!
//! * [`quantize()`] / [`quantize_f16`] encode a matrix, data-free or with GPTQ given a
//!   [`Calibration`] ([`QuantizeOptions`]).
//! * [`SpqrMatrix`] holds it: the packed parts the kernel reads, the CPU decoder
//!   ([`SpqrMatrix::dequantize`]) and the f64 reference product
//!   ([`SpqrMatrix::gemv_reference`]), sizes and validation.
//! * [`format`](mod@format) reads and writes the versioned container.
//! * [`rtn`] is the plain round-to-nearest baseline (3 or 4 bits, groups of 16) the accuracy
//!   report compares against.
//! * [`gpu`] multiplies on the GPU.
//!
//! The bit layouts are shared with the kernel through `spqr_kernels::layout`.

mod error;
pub mod format;
pub mod gpu;
mod linalg;
mod matrix;
pub mod quantize;
pub mod rtn;

pub use error::SpqrError;
pub use matrix::{
    MAX_BATCH, MAX_PADDED_COLS, Outlier, OutlierFormat, SizeReport, SpqrMatrix, padded_shape,
};
pub use quantize::{Calibration, OutlierCriterion, QuantizeOptions, quantize, quantize_f16};

/// Result alias of this crate.
pub type Result<T, E = SpqrError> = std::result::Result<T, E>;
