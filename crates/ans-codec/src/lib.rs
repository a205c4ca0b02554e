//! MatVANS for cmv: int8 matrices entropy-coded with ANS and multiplied on the GPU while they
//! are decoded, one warp per row (`ans-warp-rows`) or one thread per row (`ans-warp-stripes`).
//!
//! The format is specified in `docs/ANS.md`. [`encode`] compresses a matrix, [`AnsMatrix`]
//! holds it (and decodes it on the CPU), [`format`](mod@format) reads and writes the versioned container,
//! and [`gpu`] multiplies by it on the GPU.

mod decode;
mod encode;
mod error;
pub mod format;
pub mod gpu;
mod matrix;
pub mod model;

pub use encode::{EncodeOptions, encode};
pub use error::AnsError;
pub use matrix::{AnsMatrix, Layout, SizeReport};
pub use model::Model;

/// Result alias of this crate.
pub type Result<T, E = AnsError> = std::result::Result<T, E>;
