//! The errors of `spqr-format`: the format core's ([`FormatError`]) and SpQR's own.

use cmv_format::FormatError;

/// Errors of the SpQR encoder, the in-memory matrix, the container and the kernels.
///
/// What every format shares (shapes, lengths, batches, non-finite values, the container, load
/// limits, the GPU runtime) is [`SpqrError::Format`]; the other variants are SpQR's own. Every
/// variant carries the offending values; the messages say what to do about them.
#[derive(Debug, thiserror::Error)]
pub enum SpqrError {
    /// An error every format shares (shape, length, batch, non-finite value, container, load
    /// limits, GPU runtime).
    #[error(transparent)]
    Format(#[from] FormatError),
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
    /// A product of more than one vector on a matrix uploaded for the integer kernel.
    #[error(
        "the integer-MMA kernel takes one vector, not {batch}: upload the matrix with \
         DeviceSpqrMatrix::upload for 2 to 16 vectors"
    )]
    Int8Batch {
        /// The batch asked for.
        batch: usize,
    },
    /// Tile rows per block outside what the kernels have (`SpqrGemv::set_block_rows`).
    #[error(
        "{rows} tile rows per block is not possible: pass 1 to {max} (the kernels for 4, 8 \
         and 16 vectors have a two-row version), or None for the default rule"
    )]
    BlockRows {
        /// The number asked for.
        rows: u32,
        /// The most a kernel computes.
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
}

/// Result alias of this crate.
pub type Result<T, E = SpqrError> = std::result::Result<T, E>;

#[cfg(feature = "gpu")]
impl From<cmv_format::cmv_runtime::RuntimeError> for SpqrError {
    fn from(e: cmv_format::cmv_runtime::RuntimeError) -> Self {
        SpqrError::Format(FormatError::Runtime(e))
    }
}
