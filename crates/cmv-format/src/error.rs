//! The error core every format's error wraps.

/// What can go wrong in any format: shapes and buffer lengths, the container (truncated,
/// trailing bytes, magic, version, header fields, offsets, checksum, padding), load limits,
/// batches, non-finite values, and (with the `gpu` feature) the GPU runtime.
///
/// Each format's error type has a `Format(#[from] FormatError)` variant beside its own ones,
/// so `?` lifts these into it. Every variant carries the offending values; the messages say
/// what to do about them.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// A matrix shape the format cannot hold.
    #[error("matrix shape {rows}x{cols} is not supported by {format}: {rule}")]
    Shape {
        /// The format's name.
        format: &'static str,
        /// Rows asked for.
        rows: usize,
        /// Columns asked for.
        cols: usize,
        /// What the shape must be.
        rule: &'static str,
    },
    /// A buffer of the wrong length.
    #[error("{what} holds {got} elements but {expected} are needed: pass a buffer of that length")]
    Length {
        /// Which buffer.
        what: &'static str,
        /// Its length.
        got: usize,
        /// The length the shape needs.
        expected: usize,
    },
    /// A batch outside what a product takes.
    #[error("batch {batch} is not supported: this product takes 1 to {max} input vectors")]
    Batch {
        /// The batch asked for.
        batch: usize,
        /// The largest batch it takes.
        max: usize,
    },
    /// A NaN or infinite value where the format needs finite ones.
    #[error("{what} {index} is not finite ({value}): remove NaN and infinite values first")]
    NonFinite {
        /// Which input (`"weight"`, `"input"`, ...).
        what: &'static str,
        /// Flat index of the first non-finite value.
        index: usize,
        /// Its value.
        value: f64,
    },
    /// A blob shorter than what its header announces (or than a header).
    #[error(
        "the blob is truncated: its {what} needs {needed} bytes but only {got} are there; \
         reload the complete file"
    )]
    Truncated {
        /// The part that does not fit.
        what: &'static str,
        /// Bytes needed up to the end of that part.
        needed: u64,
        /// Bytes in the blob.
        got: usize,
    },
    /// A blob longer than what its header announces.
    #[error(
        "the blob holds {got} bytes but its header announces {expected}: it has trailing data or \
         a damaged header; pass exactly one container"
    )]
    TrailingBytes {
        /// Bytes the header announces.
        expected: u64,
        /// Bytes in the blob.
        got: usize,
    },
    /// A blob that does not start with the format's magic.
    #[error("bad magic {found:02x?}: this is not a {format} container (expected {expected:02x?})")]
    Magic {
        /// The format's name.
        format: &'static str,
        /// The first 8 bytes.
        found: [u8; 8],
        /// The format's magic.
        expected: [u8; 8],
    },
    /// A container version this build does not read.
    #[error(
        "{format} container version {found} is not supported: this build reads versions \
         {oldest} to {newest}; use a newer build of cmv"
    )]
    Version {
        /// The format's name.
        format: &'static str,
        /// The version in the header.
        found: u32,
        /// The oldest version this build reads.
        oldest: u32,
        /// The version this build writes.
        newest: u32,
    },
    /// A header field inconsistent with the others.
    #[error("header field {field} is {found} but must be {expected}: the header is damaged")]
    Header {
        /// The field.
        field: &'static str,
        /// Its value.
        found: u64,
        /// The value the other fields imply.
        expected: u64,
    },
    /// An unknown enumeration code in a header.
    #[error(
        "{field} code {found} is unknown (known: {known}): the header is damaged or from a newer \
         version"
    )]
    Code {
        /// The field.
        field: &'static str,
        /// The code found.
        found: u32,
        /// The known codes and their names, e.g. `0 = CSR, 1 = PTCSR`.
        known: String,
    },
    /// An offset table that breaks one of its rules.
    #[error(
        "{table} offset {index} is {value} but {rule} (previous offset {previous}, {words} \
         words): the offsets are damaged"
    )]
    Offset {
        /// Which table (`"CSR row"`, `"stream"`, ...).
        table: &'static str,
        /// Its index.
        index: usize,
        /// Its value.
        value: u64,
        /// The offset before it (0 for the first).
        previous: u64,
        /// Words of the array it indexes.
        words: u64,
        /// The rule it breaks.
        rule: &'static str,
    },
    /// A CRC-32 that does not match the blob.
    #[error(
        "CRC-32 mismatch: the header stores {stored:#010x} but the blob hashes to \
         {computed:#010x}; the blob was damaged, reload it from an intact copy"
    )]
    Checksum {
        /// The CRC in the header.
        stored: u32,
        /// The CRC of the blob (with the CRC field zeroed).
        computed: u32,
    },
    /// Bytes that must be zero (padding, reserved fields) and are not: the container is not
    /// the one canonical encoding of its matrix.
    #[error(
        "{what} at byte {offset} is {found:#x} but must be zero: the container is damaged or \
         was not written by cmv; re-encode the matrix"
    )]
    NonZero {
        /// Which bytes.
        what: &'static str,
        /// Where, in the blob (or in the part named by `what`).
        offset: u64,
        /// The value found.
        found: u64,
    },
    /// A container that would take more than the load limits allow.
    #[error(
        "loading needs {needed} {what} but the limit is {limit}: raise Limits::{field} if the \
         file is trusted"
    )]
    Limit {
        /// What is counted (`"elements"`, `"bytes"`).
        what: &'static str,
        /// The field of [`Limits`](crate::Limits) that refused.
        field: &'static str,
        /// What the container needs.
        needed: u64,
        /// The limit.
        limit: u64,
    },
    /// The GPU runtime failed.
    #[cfg(feature = "gpu")]
    #[error(transparent)]
    Runtime(#[from] cmv_runtime::RuntimeError),
}

/// Result alias of this crate.
pub type Result<T, E = FormatError> = std::result::Result<T, E>;
