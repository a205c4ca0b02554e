//! SBVR for cmv: a weight matrix stored as sums of coefficient-weighted bitvectors, multiplied
//! on the GPU by AND + popcount against the 8 bit-planes of int8-quantized inputs
//! (`docs/SBVR.md`).
//!
//! * [`encode()`] fits each group of 128 weights of a row as `sum_j c_j b_j` (2 to 8
//!   bitvectors) with `c` from a shared coefficient cache; [`SbvrMatrix::from_encoded`] packs it
//!   in the kernels' order.
//! * [`SbvrMatrix`] holds it: the CPU decoder ([`SbvrMatrix::dequantize`]), the reference of
//!   the kernels' exact arithmetic ([`SbvrMatrix::reference`]) and the plain f64 reference on
//!   unquantized inputs ([`SbvrMatrix::reference_dequantized`]), sizes, validation, the
//!   container. It implements [`cmv_format::CompressedMatrix`] (and, with the `gpu` feature,
//!   `DeviceGemv`).
//! * [`rtn`]: round-to-nearest baselines at groups of 128 for the accuracy comparison.
//! * `gpu` (feature `gpu`, on by default): the activation kernel and the GEMV kernels, on
//!   binary tensor cores or on CUDA cores.
//!
//! The layouts are shared with the kernels through `sbvr_kernels::layout`. Modules depend one
//! way: `error` under everything; `encode`, `rtn`; `matrix` over `encode`; `container` over
//! `matrix`; `compressed` (the core's traits) over both; `gpu` over `compressed`.

mod compressed;
pub mod container;
pub mod encode;
mod error;
#[cfg(feature = "gpu")]
pub mod gpu;
mod matrix;
pub mod rtn;

/// The GPU runtime the `gpu` module's signatures use (feature `gpu`).
#[cfg(feature = "gpu")]
pub use cmv_format::cmv_runtime;
/// The format core this crate is built on.
pub use cmv_format::{self, FormatError, Limits, SizeBreakdown};
/// fp16, the inputs' and coefficients' type.
pub use half::f16;
/// The bit layouts shared with the kernels.
pub use sbvr_kernels::layout;

pub use compressed::GPU_TOLERANCE;
pub use encode::{EncodeOptions, Encoded, encode};
pub use error::{Result, SbvrError};
pub use matrix::{MAX_SIDE, NAME, SbvrMatrix};
