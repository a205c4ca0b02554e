//! The errors of `spqr-format`.

use cmv_runtime::RuntimeError;

/// Errors of the SpQR encoder, the in-memory matrix, the container and the kernels.
///
/// Every variant carries the offending values; the messages say what to do about them.
#[derive(Debug, thiserror::Error)]
pub enum SpqrError {
    /// A matrix with no element, or padded sides past what the format holds.
    #[error(
        "matrix shape {rows}x{cols} is not supported: both sides must be at least 1, the rows \
         padded to 16 at most u32::MAX"
    )]
    Shape {
        /// Rows asked for.
        rows: usize,
        /// Columns asked for.
        cols: usize,
    },
    /// Columns past what 16-bit outlier columns address.
    #[error(
        "{cols} columns pad to {padded_cols}, but outlier columns are 16-bit: at most 65536 \
         columns are supported; split the matrix into column blocks of at most 65536"
    )]
    TooWide {
        /// Columns asked for.
        cols: usize,
        /// Columns after padding to 16.
        padded_cols: usize,
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
    /// A NaN or infinite input value.
    #[error("{what} {index} is not finite ({value}): remove NaN and infinite values first")]
    NonFinite {
        /// Which input (`"weight"`, `"calibration input"`, `"Gram matrix entry"`).
        what: &'static str,
        /// Flat index of the first non-finite value.
        index: usize,
        /// Its value.
        value: f64,
    },
    /// A weight outside the fp16 range.
    #[error(
        "weight {index} is {value}, outside the fp16 range (|w| <= 65504) that the fp16 GEMV and \
         the fp16 outliers work in: rescale the matrix"
    )]
    WeightRange {
        /// Flat index of the weight.
        index: usize,
        /// Its value.
        value: f32,
    },
    /// A quantization option outside its range.
    #[error("option {name} is {value} but {rule}")]
    Option {
        /// The option.
        name: &'static str,
        /// Its value.
        value: f64,
        /// What it must be.
        rule: &'static str,
    },
    /// `permute` without a calibration to take `diag(H)` from.
    #[error(
        "permute needs a calibration (the columns are ordered by decreasing diag(H)): pass \
         calibration inputs or a Gram matrix, or set permute to false"
    )]
    PermuteWithoutCalibration,
    /// Calibration inputs with no sample.
    #[error("calibration inputs need at least one sample (samples = {samples})")]
    Samples {
        /// Samples given.
        samples: usize,
    },
    /// A damped Gram matrix (or its inverse) that is not positive definite.
    #[error(
        "the damped Gram matrix is not positive definite (pivot {pivot} at column {column} of \
         the {stage}): pass X^T X of real inputs (symmetric positive semi-definite) or raise \
         the damping"
    )]
    NotPositiveDefinite {
        /// Which factorization failed.
        stage: &'static str,
        /// The column where it failed.
        column: usize,
        /// The non-positive (or non-finite) pivot.
        pivot: f64,
    },
    /// More outliers than 32-bit offsets address.
    #[error(
        "the outliers need {words} words in {format}, but offsets are 32-bit: lower \
         outlier_fraction or split the matrix into row blocks"
    )]
    TooManyOutliers {
        /// `"CSR"` or `"PTCSR"`.
        format: &'static str,
        /// Words needed.
        words: u64,
    },
    /// A batch outside `1..=max`.
    #[error("batch {batch} is not supported: this product takes 1 to {max} input vectors")]
    Batch {
        /// The batch asked for.
        batch: usize,
        /// The largest batch it takes (16 on the CPU, 8 on the GPU).
        max: usize,
    },
    /// A split of the GPU kernel's tile rows outside what the matrix allows.
    #[error(
        "{splits} blocks per tile row is not possible here: pass 1 to {max} (each part needs \
         at least one step of 64 columns, and at most 16 parts), or None to let the launcher \
         choose"
    )]
    Splits {
        /// The split asked for.
        splits: u32,
        /// The most this matrix allows.
        max: u32,
    },
    /// A dense word that breaks one of its rules.
    #[error(
        "dense word {index} ({word:#018x}) is invalid: {rule}; the matrix is damaged, re-encode \
         it or reload it from an intact copy"
    )]
    Dense {
        /// Its index in the dense array.
        index: usize,
        /// The word.
        word: u64,
        /// The rule it breaks.
        rule: &'static str,
    },
    /// An offset table that breaks one of its rules.
    #[error(
        "{table} offset {index} is {value} but {rule} (previous offset {previous}, {words} \
         words): the offsets are damaged"
    )]
    Offset {
        /// `"CSR row"` or `"PTCSR block"`.
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
    /// An outlier word that breaks one of its rules.
    #[error(
        "{format} outlier word {index} ({word:#010x}, row {row}) is invalid: {rule}; the \
         outliers are damaged"
    )]
    Outlier {
        /// `"CSR"` or `"PTCSR"`.
        format: &'static str,
        /// Its index in its `col_val` array.
        index: usize,
        /// The matrix row it belongs to.
        row: usize,
        /// The word.
        word: u32,
        /// The rule it breaks.
        rule: &'static str,
    },
    /// PTCSR arrays that do not hold the outliers the CSR arrays hold.
    #[error(
        "the PTCSR arrays differ from the CSR arrays at tile row {tile_row}: both must hold the \
         same outliers (PTCSR as built from CSR); the outliers are damaged"
    )]
    Inconsistent {
        /// The first tile row where they differ.
        tile_row: usize,
    },
    /// An input permutation that is not a permutation of `0..cols`.
    #[error("input permutation entry {index} is {value} but {rule}")]
    Permutation {
        /// Its index.
        index: usize,
        /// Its value.
        value: u64,
        /// The rule it breaks.
        rule: &'static str,
    },
    /// An unknown outlier-format code.
    #[error(
        "outlier format code {found} is unknown (0 = CSR, 1 = PTCSR): the header is damaged or \
         from a newer version"
    )]
    FormatCode {
        /// The code in the header.
        found: u32,
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
    /// A blob that does not start with `b"CMVSPQR\0"`.
    #[error("bad magic {found:02x?}: this is not a SpQR container (expected b\"CMVSPQR\\0\")")]
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
