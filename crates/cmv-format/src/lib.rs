//! cmv's format core: what every compressed-matrix format shares.
//!
//! * [`CompressedMatrix`]: the trait a format's matrix implements (encode from [`Weights`],
//!   shape, [`SizeBreakdown`], container, CPU reference product); [`DeviceGemv`] (feature
//!   `gpu`, on by default) its GPU side (upload, kernels, the product of a batch of vectors,
//!   [`Check`] against the reference).
//! * [`container`]: the one container (common prefix with magic, version, header size and
//!   CRC; the format's header fields; a table of typed parts), its [`Writer`](container::Writer)
//!   and [`Reader`](container::Reader).
//! * [`FormatError`]: the error core every format's error wraps; [`Limits`] bound what a load
//!   may cost; the shared checks ([`check_field`], [`check_len`], [`check_offsets`], ...).
//! * [`HeaderCode`]: enumerations stored as header codes (layouts, outlier encodings), declared
//!   with [`header_code!`].
//! * [`PaddedShape`] / [`DeviceShape`]: a matrix's sides and padded sides (in `usize`, and in
//!   the `u32`s a launch takes), with their getters ([`shape_getters!`]).
//!
//! How a format plugs in: docs/ARCHITECTURE.md, "Adding a format".

mod check;
mod code;
pub mod container;
#[cfg(feature = "gpu")]
mod device;
mod error;
mod matrix;
mod shape;
mod size;
#[cfg(feature = "testing")]
pub mod testing;

pub use check::{
    Limits, OffsetRules, batch_len, check_batch, check_field, check_finite, check_len,
    check_len_at_least, check_offsets,
};
pub use code::HeaderCode;
#[cfg(feature = "gpu")]
pub use device::{Check, DeviceGemv, check_f16, clone_slice, relative_error, upload_nonempty};
pub use error::{FormatError, Result};
pub use matrix::{CompressedMatrix, Weights, check_reference_args};
pub use shape::{DeviceShape, PaddedShape};
pub use size::{SizeBreakdown, SizePart};

/// The runtime the GPU side is built on (feature `gpu`).
#[cfg(feature = "gpu")]
pub use cmv_runtime;
