//! The errors of `ans-codec`.

use cmv_runtime::RuntimeError;

/// Errors of the MatVANS encoder, decoder, container and kernels.
///
/// Every variant carries the offending values; the messages say what to do about them.
#[derive(Debug, thiserror::Error)]
pub enum AnsError {
    /// A matrix with no element, or a side (or padded side) past `u32::MAX`.
    #[error(
        "matrix shape {rows}x{cols} is not supported: both sides must be at least 1 and, padded, \
         at most u32::MAX"
    )]
    Shape {
        /// Rows asked for.
        rows: usize,
        /// Columns asked for.
        cols: usize,
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
    /// A model precision outside `7..=12`.
    #[error(
        "precision {precision} bits is out of range 7..=12: pick one in range or let the encoder choose"
    )]
    Precision {
        /// The precision asked for (or found).
        precision: u32,
    },
    /// A forced precision too small for the number of distinct values.
    #[error(
        "precision {precision} bits gives {slots} table slots but the matrix (padding included) \
         has {distinct} distinct values: force a precision with 2^P >= {distinct} or let the \
         encoder choose"
    )]
    TooManyValues {
        /// The precision asked for.
        precision: u32,
        /// `2^precision`.
        slots: u32,
        /// Distinct values to model.
        distinct: usize,
    },
    /// A maximal cross-entropy overhead that is negative, NaN or infinite.
    #[error(
        "max_overhead_bits {value} must be finite and at least 0 (the default is 0.1 bits per \
         element)"
    )]
    Overhead {
        /// The value given.
        value: f64,
    },
    /// A compressed stream too long for 32-bit word offsets.
    #[error(
        "the compressed stream needs {words} words but offsets are 32-bit: split the matrix into \
         row blocks of at most 4 Gi words of stream (16 GiB) each"
    )]
    StreamTooLong {
        /// Words the stream needs.
        words: u64,
    },
    /// A requantization scale that is NaN or infinite.
    #[error("requantization scale {scale} must be finite")]
    Scale {
        /// The scale.
        scale: f32,
    },
    /// A decoded matrix too large to allocate on this machine.
    #[error(
        "decoding needs {bytes} bytes, which could not be allocated: decode a smaller matrix or \
         use gemv_reference, which does not materialize it"
    )]
    Alloc {
        /// Bytes asked for.
        bytes: u128,
    },
    /// A stream that does not decode: it ran out, or a coder did not end in `2^32`.
    #[error(
        "{unit} {index} is corrupted: {reason}; the compressed matrix was damaged, re-encode it or \
         reload it from an intact copy"
    )]
    Corrupted {
        /// `"row"` or `"stripe"`.
        unit: &'static str,
        /// Its index.
        index: usize,
        /// What went wrong.
        reason: String,
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
    /// A blob that does not start with `b"CMVANS\0\0"`.
    #[error("bad magic {found:02x?}: this is not a MatVANS container (expected b\"CMVANS\\0\\0\")")]
    Magic {
        /// The first 8 bytes.
        found: [u8; 8],
    },
    /// A container version this build does not read.
    #[error("container version {found} is not supported: this build reads version {supported}")]
    Version {
        /// The version in the header.
        found: u32,
        /// The version this build reads.
        supported: u32,
    },
    /// An unknown layout code.
    #[error(
        "layout code {found} is unknown (0 = ans-warp-rows, 1 = ans-warp-stripes): the header is \
         damaged or from a newer version"
    )]
    LayoutCode {
        /// The code in the header.
        found: u32,
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
    /// Frequencies that do not sum to `2^P`.
    #[error(
        "the frequencies sum to {sum} but must sum to 2^{precision} = {expected}: the model is \
         damaged"
    )]
    FrequencySum {
        /// Their sum.
        sum: u64,
        /// The precision.
        precision: u32,
        /// `2^precision`.
        expected: u64,
    },
    /// An offset table that breaks one of its rules.
    #[error(
        "offset {index} is {value} but {rule} (previous offset {previous}, stream length \
         {stream_words} words): the offsets are damaged"
    )]
    Offset {
        /// Its index.
        index: usize,
        /// Its value.
        value: u64,
        /// The offset before it (0 for the first).
        previous: u64,
        /// Stream words.
        stream_words: u64,
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
    /// The GPU runtime failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}
