//! MatVANS for cmv: int8 matrices entropy-coded with ANS and multiplied on the GPU while they
//! are decoded, one warp per row (`ans-warp-rows`), one thread per row (`ans-warp-stripes`) or
//! one thread per row and column segment with 32-bit coders (`ans-lanes`).
//!
//! The format is specified in `docs/ANS.md`. [`encode`] compresses a matrix, [`AnsMatrix`]
//! holds it (and decodes it on the CPU), [`format`](mod@format) reads and writes the versioned
//! container, and `gpu` (feature `gpu`, on by default) multiplies by it on the GPU.
//! [`AnsMatrix`] implements cmv's format traits, [`CompressedMatrix`](cmv_format::CompressedMatrix)
//! and (feature `gpu`) `cmv_format::DeviceGemv`.
//!
//! # Example
//!
//! Encode, save and load, decode, and multiply on the CPU; on the GPU where there is one.
//!
//! ```rust
//! use ans_codec::{AnsMatrix, EncodeOptions, encode};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let (rows, cols) = (64, 256);
//! let w: Vec<i8> = (0..rows * cols).map(|i| (i * 7 % 13) as i8 - 6).collect();
//! let bytes = encode(&w, rows, cols, &EncodeOptions::default())?.to_bytes();
//! let m = AnsMatrix::from_bytes(&bytes)?; // checks the CRC, the fields, every stream
//! assert_eq!(m.decode()?, w); // lossless on the int8 values
//! let x: Vec<i8> = (0..cols).map(|c| (c % 5) as i8 - 2).collect();
//! let (y, _y8) = m.gemv_reference(&x, 1.0)?; // exact int32 products (and int8 requantized)
//! #[cfg(feature = "gpu")]
//! {
//!     use ans_codec::cmv_format::DeviceGemv;
//!     use ans_codec::cmv_runtime::{Gpu, RuntimeError};
//!     // Without a GPU (no driver, no device) the example stops here.
//!     let gpu = match Gpu::new(0) {
//!         Err(RuntimeError::NoDriver | RuntimeError::NoDevice { .. }) => return Ok(()),
//!         gpu => gpu?,
//!     };
//!     let (kernels, dm) = (AnsMatrix::load(&gpu)?, m.upload(&gpu)?);
//!     let mut out = AnsMatrix::alloc_out(&gpu, rows, 1)?;
//!     AnsMatrix::gemv(&kernels, &dm, &gpu.upload(&x)?, &mut out, 1)?;
//!     AnsMatrix::finish(&kernels, &gpu)?;
//!     assert!(AnsMatrix::check(&gpu, &out, &y)?.passed()); // bit-exact
//! }
//! # Ok(())
//! # }
//! ```

mod compressed;
mod decode;
mod encode;
mod error;
pub mod format;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod lanes;
mod layout;
mod legacy;
mod load;
mod matrix;
pub mod model;
mod options;
pub mod quantize;
mod report;

pub use encode::{encode, encode_weights};
pub use error::{AnsError, Result};
pub use layout::{Layout, default_lane_segment};
pub use matrix::AnsMatrix;
pub use model::Model;
pub use options::{EncodeOptions, INT8_ALLOWANCE_BYTES};
pub use quantize::{
    RowStepQuantized, StepQuantized, quantize_rows_to_error, quantize_step, quantize_to_error,
};
pub use report::EntropyReport;

/// The kernel crate's table packing and layout constants, which the public API's tables
/// follow ([`AnsMatrix::table`], [`AnsMatrix::register_tables`]).
pub use ans_kernels::layout as kernel_layout;
/// The format core this crate is built on (its error, limits, size breakdown and traits).
pub use cmv_format;
pub use cmv_format::{FormatError, Limits, SizeBreakdown};
/// The GPU runtime the [`gpu`] module's signatures use (`Gpu`, `CudaSlice`, `PtxModule`).
#[cfg(feature = "gpu")]
pub use cmv_runtime;
