//! SBVR for cmv: a weight matrix stored as sums of coefficient-weighted bitvectors, multiplied
//! on the GPU by AND + popcount against the 8 bit-planes of int8-quantized inputs
//! (`docs/SBVR.md`).
//!
//! # Example
//!
//! Encode, save and load, decode, and multiply on the CPU; on the GPU where there is one.
//!
//! ```rust
//! use sbvr_format::{EncodeOptions, SbvrMatrix, encode, f16};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let (rows, cols) = (64, 256);
//! let w: Vec<f32> = (0..rows * cols).map(|i| (i * 7919 % 1009) as f32 / 1009.0 - 0.5).collect();
//! let opts = EncodeOptions { bits: 4, ..EncodeOptions::default() }; // 4 bitvectors per group
//! let bytes = SbvrMatrix::from_encoded(&encode(&w, rows, cols, &opts)?)?.to_bytes();
//! let m = SbvrMatrix::from_bytes(&bytes)?; // checks the CRC, the fields, every part
//! let diff: f32 = w.iter().zip(m.dequantize()).map(|(a, b)| (a - b).abs()).sum();
//! assert!(diff / (w.len() as f32) < 0.05); // mean |w| is 0.25
//! let x: Vec<f16> = (0..cols).map(|c| f16::from_f32((c % 5) as f32 - 2.0)).collect();
//! let y = m.reference(&x, 1)?; // the kernels' arithmetic (int8 input bit-planes), in f64
//! #[cfg(feature = "gpu")]
//! {
//!     use sbvr_format::cmv_format::DeviceGemv;
//!     use sbvr_format::cmv_runtime::{Gpu, RuntimeError};
//!     // Without a GPU (no driver, no device) the example stops here.
//!     let gpu = match Gpu::new(0) {
//!         Err(RuntimeError::NoDriver | RuntimeError::NoDevice { .. }) => return Ok(()),
//!         gpu => gpu?,
//!     };
//!     let (kernels, dm) = (SbvrMatrix::load(&gpu)?, m.upload(&gpu)?);
//!     let mut out = SbvrMatrix::alloc_out(&gpu, rows, 1)?;
//!     SbvrMatrix::gemv(&kernels, &dm, &gpu.upload(&x)?, &mut out, 1)?;
//!     SbvrMatrix::finish(&kernels, &gpu)?;
//!     assert!(SbvrMatrix::check(&gpu, &out, &y)?.passed());
//! }
//! # Ok(())
//! # }
//! ```
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
