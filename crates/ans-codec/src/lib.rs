//! MatVANS for cmv: int8 matrices entropy-coded with ANS and multiplied on the GPU while they
//! are decoded, one warp per row (`ans-warp-rows`) or one thread per row (`ans-warp-stripes`).
//!
//! The format is specified in `docs/ANS.md`. [`encode`] compresses a matrix, [`AnsMatrix`]
//! holds it (and decodes it on the CPU), [`format`](mod@format) reads and writes the versioned
//! container, and `gpu` (feature `gpu`, on by default) multiplies by it on the GPU.
//! [`AnsMatrix`] implements cmv's format traits, [`CompressedMatrix`](cmv_format::CompressedMatrix)
//! and (feature `gpu`) `cmv_format::DeviceGemv`.

mod compressed;
mod decode;
mod encode;
mod error;
pub mod format;
#[cfg(feature = "gpu")]
pub mod gpu;
mod layout;
mod legacy;
mod load;
mod matrix;
pub mod model;
mod options;
mod report;

pub use encode::{encode, encode_weights};
pub use error::{AnsError, Result};
pub use layout::Layout;
pub use matrix::AnsMatrix;
pub use model::Model;
pub use options::{EncodeOptions, INT8_ALLOWANCE_BYTES};
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
