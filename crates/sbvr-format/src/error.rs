//! [`SbvrError`]: the SBVR format's errors.

use cmv_format::FormatError;

/// What can go wrong encoding, loading or multiplying an SBVR matrix: the shared
/// [`FormatError`]s (shapes, lengths, non-finite values, containers, limits, runtime) and
/// SBVR's own (bitvector counts, cache sizes, indices, coefficients).
#[derive(Debug, thiserror::Error)]
pub enum SbvrError {
    /// A shared format error.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// A number of bitvectors per group outside 2..=8.
    #[error(
        "{bits} bitvectors per group is not supported: SBVR takes 2 to 8 (the bits per weight); \
         pick one in that range"
    )]
    Bits {
        /// The number asked for.
        bits: u32,
    },
    /// A coefficient cache size outside 1..=65536 entries.
    #[error(
        "a coefficient cache of {entries} entries is not supported: take 1 to 65536 (indices are \
         u8 up to 256 entries, u16 above)"
    )]
    Entries {
        /// The size asked for.
        entries: usize,
    },
    /// A stored coefficient index past the cache.
    #[error(
        "coefficient index {index} of row {row}, group {group} is past the cache of {entries} \
         entries: the container is corrupted"
    )]
    Index {
        /// Row.
        row: usize,
        /// Group (of 128 columns).
        group: usize,
        /// The index.
        index: usize,
        /// Cache entries.
        entries: usize,
    },
    /// A stored coefficient that is not finite.
    #[error(
        "coefficient {j} of cache entry {entry} is {value} (not finite): the container is \
         corrupted"
    )]
    Coefficient {
        /// Cache entry.
        entry: usize,
        /// Which of its coefficients.
        j: usize,
        /// Its value.
        value: f32,
    },
    /// A set bit in the padding (rows past the last, columns past the last, bitvectors past
    /// `bits`): the one canonical packing keeps it zero.
    #[error("a padding bit is set ({what}): the container is corrupted (padding must be zero)")]
    Padding {
        /// Where.
        what: String,
    },
}

/// Results of this crate.
pub type Result<T, E = SbvrError> = std::result::Result<T, E>;

#[cfg(feature = "gpu")]
impl From<cmv_runtime::RuntimeError> for SbvrError {
    fn from(e: cmv_runtime::RuntimeError) -> Self {
        SbvrError::Format(FormatError::Runtime(e))
    }
}
