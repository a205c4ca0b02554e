//! [`VqError`]: the VQ format's errors.

use cmv_format::FormatError;

/// What can go wrong encoding, loading or multiplying a VQ matrix: the shared [`FormatError`]s
/// and VQ's own (configuration, importance, codebook values, padding).
#[derive(Debug, thiserror::Error)]
pub enum VqError {
    /// A shared format error.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// A configuration value out of range.
    #[error("VQ configuration: {what} = {value} is not supported: {rule}")]
    Config {
        /// Which value.
        what: &'static str,
        /// The value given.
        value: u64,
        /// What it must be.
        rule: &'static str,
    },
    /// An importance vector entry that is negative or not finite.
    #[error(
        "importance of column {index} is {value}: importances must be finite and >= 0 \
         (e.g. the diagonal of X^T X)"
    )]
    Importance {
        /// Column.
        index: usize,
        /// Its value.
        value: f32,
    },
    /// A stored codebook value that is not finite.
    #[error("codebook value {index} is {value} (not finite): the container is corrupted")]
    Codebook {
        /// Index in the codebook part.
        index: usize,
        /// Its value.
        value: f32,
    },
    /// More than 16 inputs for a matrix the tensor-core GEMM does not take.
    #[error(
        "a product of {tokens} inputs needs the tensor-core GEMM, which {reason}: multiply at \
         most 16 inputs at a time (the GEMV), or upload a VQ<v, 8, 1> matrix (v = 2, 4, 8) with \
         tiles of a multiple of 256 rows (or one tile row) for the tensor-core kernel"
    )]
    Gemm {
        /// Inputs asked for.
        tokens: usize,
        /// Why the GEMM does not take the matrix.
        reason: &'static str,
    },
    /// A set bit in the padding of a row's codes.
    #[error(
        "a padding bit is set in the codes of row {row}, stage {stage} (word {word} = {value:#x}): \
         the container is corrupted (padding must be zero)"
    )]
    Padding {
        /// Row.
        row: usize,
        /// Residual stage.
        stage: usize,
        /// Word within the row's stage.
        word: usize,
        /// The word.
        value: u32,
    },
}

/// Results of this crate.
pub type Result<T, E = VqError> = std::result::Result<T, E>;

#[cfg(feature = "gpu")]
impl From<cmv_runtime::RuntimeError> for VqError {
    fn from(e: cmv_runtime::RuntimeError) -> Self {
        VqError::Format(FormatError::Runtime(e))
    }
}
