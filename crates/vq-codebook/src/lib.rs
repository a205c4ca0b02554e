//! VQ for cmv (`docs/VQ.md`): a weight matrix stored as indices into codebooks of short
//! vectors, after VQ-LLM's configurations `VQ<v, b, r>` (vector size `v` along the columns,
//! `2^b` fp16 entries per codebook, `r` residual codebooks summed).
//!
//! * [`VqConfig`] / [`Scope`]: the configuration and the scope of a codebook (the tensor, or
//!   one tile of rows x columns), with the presets [`VqConfig::gptvq2`], [`VqConfig::aqlm3`],
//!   [`VqConfig::cq4`], [`VqConfig::cq2`] and their bits per weight.
//! * [`VqMatrix::encode`]: k-means++ and Lloyd per codebook (optionally importance-weighted),
//!   residual stages, codebooks reordered by access frequency; deterministic for a seed.
//! * [`VqMatrix`]: packed codes and codebooks, the CPU decoder, the f64 reference product,
//!   the container ([`container`]); it implements [`cmv_format::CompressedMatrix`].
//! * [`rtn`]: a round-to-nearest baseline for the accuracy comparison.
//!
//! * [`mma`]: the layout of the tensor-core kernel (byte codes in MMA fragment order per row
//!   group and slab of 128 columns), its work split and its arithmetic on the CPU.
//! * [`table`]: the layout of the table kernel (rotated byte codes per slab of 32 vector
//!   positions) and its arithmetic on the CPU.
//! * `gpu` (feature `gpu`, on by default): the fused GEMV kernels (`DeviceGemv`): the
//!   tensor-core kernel for `VQ<v, 8, 1>` (each code looked up in a replicated codebook in
//!   shared memory straight into an `mma.m16n8k16`, batch 1-16 in one launch; the default), the
//!   table kernel (per tile and slab, the codebook entries' dot products with the inputs in
//!   shared memory, one lookup per code and vector), and a stream kernel for every other
//!   configuration.
//!
//! # Example
//!
//! Encode, save and load, decode, and multiply on the CPU; on the GPU where there is one.
//!
//! ```rust
//! use vq_codebook::{EncodeOptions, VqMatrix, f16};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let (rows, cols) = (64, 256);
//! let w: Vec<f32> = (0..rows * cols).map(|i| (i * 7919 % 1009) as f32 / 1009.0 - 0.5).collect();
//! let opts = EncodeOptions::default(); // GPTVQ-2
//! let bytes = VqMatrix::encode(&w, rows, cols, &opts)?.to_bytes();
//! let m = VqMatrix::from_bytes(&bytes)?; // checks the CRC, the fields, every part
//! let diff: f32 = w.iter().zip(m.dequantize()).map(|(a, b)| (a - b).abs()).sum();
//! assert!(diff / (w.len() as f32) < 0.1); // mean |w| is 0.25
//! let x: Vec<f16> = (0..cols).map(|c| f16::from_f32((c % 5) as f32 - 2.0)).collect();
//! let y = m.reference(&x, 1)?; // the f64 product of the stored matrix
//! #[cfg(feature = "gpu")]
//! {
//!     use vq_codebook::cmv_format::DeviceGemv;
//!     use vq_codebook::cmv_runtime::{Gpu, RuntimeError};
//!     // Without a GPU (no driver, no device) the example stops here.
//!     let gpu = match Gpu::new(0) {
//!         Err(RuntimeError::NoDriver | RuntimeError::NoDevice { .. }) => return Ok(()),
//!         gpu => gpu?,
//!     };
//!     let (kernels, dm) = (VqMatrix::load(&gpu)?, m.upload(&gpu)?);
//!     let mut out = VqMatrix::alloc_out(&gpu, rows, 1)?;
//!     VqMatrix::gemv(&kernels, &dm, &gpu.upload(&x)?, &mut out, 1)?;
//!     VqMatrix::finish(&kernels, &gpu)?;
//!     assert!(VqMatrix::check(&gpu, &out, &y)?.passed());
//! }
//! # Ok(())
//! # }
//! ```

pub mod big;
mod compressed;
mod config;
pub mod container;
mod encode;
mod error;
#[cfg(feature = "gpu")]
pub mod gpu;
mod matrix;
pub mod mma;
pub mod rtn;
pub mod table;

/// The GPU runtime the `gpu` module's signatures use (feature `gpu`).
#[cfg(feature = "gpu")]
pub use cmv_format::cmv_runtime;
/// The format core this crate is built on.
pub use cmv_format::{self, FormatError, Limits, SizeBreakdown};
/// fp16, the inputs' and codebooks' type.
pub use half::f16;

pub use big::BigLayout;
pub use config::{Geometry, MAX_SIDE, Scope, VqConfig};
pub use encode::{EncodeOptions, SplitMix64};
pub use error::{Result, VqError};
pub use matrix::{NAME, VqMatrix};
pub use mma::MmaLayout;
pub use table::TableLayout;
/// The table kernel's geometry ([`VqMatrix::table_geometry`]).
pub use vq_kernels::big::BigGeometry;
pub use vq_kernels::lut::LutGeometry;
/// The tensor-core kernel's geometry ([`VqMatrix::mma_geometry`]).
pub use vq_kernels::mma::MmaGeometry;
