//! SpQR for cmv: a weight matrix stored as a dense 3-bit part in 16 x 16 tiles with bi-level
//! statistics (one `u64` per tile row) plus a sparse part of fp16 outliers (CSR and PTCSR),
//! multiplied on the GPU while it is dequantized (`docs/SPQR.md`).
//!
//! # Example
//!
//! Quantize, save and load, decode, and multiply on the CPU; on the GPU where there is one.
//!
//! ```rust
//! use spqr_format::{QuantizeOptions, SpqrMatrix, f16, quantize};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let (rows, cols) = (64, 256);
//! let w: Vec<f32> = (0..rows * cols).map(|i| (i * 7919 % 1009) as f32 / 1009.0 - 0.5).collect();
//! let bytes = quantize(&w, rows, cols, &QuantizeOptions::default())?.to_bytes(); // data-free
//! let m = SpqrMatrix::from_bytes(&bytes)?; // checks the CRC, the fields, every part
//! let diff: f32 = w.iter().zip(m.dequantize()).map(|(a, b)| (a - b).abs()).sum();
//! assert!(diff / (w.len() as f32) < 0.05); // mean |w| is 0.25: 3-bit tiles, fp16 outliers
//! let x: Vec<f16> = (0..cols).map(|c| f16::from_f32((c % 5) as f32 - 2.0)).collect();
//! let y = m.gemv_reference(&x, 1)?; // the f64 product of the stored matrix
//! #[cfg(feature = "gpu")]
//! {
//!     use spqr_format::cmv_format::DeviceGemv;
//!     use spqr_format::cmv_runtime::{Gpu, RuntimeError};
//!     // Without a GPU (no driver, no device) the example stops here.
//!     let gpu = match Gpu::new(0) {
//!         Err(RuntimeError::NoDriver | RuntimeError::NoDevice { .. }) => return Ok(()),
//!         gpu => gpu?,
//!     };
//!     let (kernels, dm) = (SpqrMatrix::load(&gpu)?, m.upload(&gpu)?);
//!     let mut out = SpqrMatrix::alloc_out(&gpu, rows, 1)?;
//!     SpqrMatrix::gemv(&kernels, &dm, &gpu.upload(&x)?, &mut out, 1)?;
//!     SpqrMatrix::finish(&kernels, &gpu)?;
//!     assert!(SpqrMatrix::check(&gpu, &out, &y)?.passed());
//! }
//! # Ok(())
//! # }
//! ```
//!
//! * [`quantize()`] / [`quantize_f16`] / [`quantize_weights`] encode a matrix, data-free or
//!   with GPTQ given a [`Calibration`] ([`QuantizeOptions`]).
//! * [`SpqrMatrix`] holds it: the packed parts the kernel reads, the CPU decoder
//!   ([`SpqrMatrix::dequantize`]) and the f64 reference product
//!   ([`SpqrMatrix::gemv_reference`]), sizes and validation. It implements
//!   [`cmv_format::CompressedMatrix`] (and, with the `gpu` feature, `DeviceGemv`).
//! * [`container`] reads and writes the versioned container (version 2, the
//!   [`cmv_format::container`]; version 1 is still read).
//! * [`rtn`] is the plain round-to-nearest baseline (3 or 4 bits, groups of 16) the accuracy
//!   report compares against.
//! * `gpu` (feature `gpu`, on by default) multiplies on the GPU.
//!
//! The bit layouts are shared with the kernel through `spqr_kernels::layout`.
//!
//! Module dependencies run one way, none back: `error` under everything; `matrix` (the
//! matrix, its checks and reference product); `linalg` and `quantize` (with `rtn`) over it;
//! `legacy` (version 1) under `container`; `compressed` (the [`cmv_format`] traits) over
//! `quantize`; `gpu` over `compressed`.

mod compressed;
pub mod container;
mod error;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod int8;
mod legacy;
mod linalg;
mod matrix;
pub mod quantize;
pub mod rtn;

/// The GPU runtime the `gpu` module's signatures use (feature `gpu`).
#[cfg(feature = "gpu")]
pub use cmv_format::cmv_runtime;
/// The format core this crate is built on; its [`FormatError`], [`Limits`] and
/// [`SizeBreakdown`] appear in this crate's signatures.
pub use cmv_format::{self, FormatError, Limits, SizeBreakdown};
/// fp16, the inputs' and outliers' type.
pub use half::f16;
/// A tile's second-order statistics ([`SpqrMatrix::tile_statistics`]).
pub use spqr_kernels::layout::SecondOrder;

pub use compressed::GPU_TOLERANCE;
pub use error::{Result, SpqrError};
pub use matrix::{MAX_PADDED_COLS, Outlier, OutlierFormat, SpqrMatrix, padded_shape};
pub use quantize::{
    Calibration, OutlierCriterion, QuantizeOptions, quantize, quantize_f16, quantize_weights,
};
