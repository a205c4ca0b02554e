//! The errors of `ans-codec`: the format core's ([`FormatError`]) and MatVANS's own.

use cmv_format::FormatError;

/// Errors of the MatVANS encoder, decoder, container and kernels.
///
/// What every format shares (shapes, buffer lengths, the container, load limits, the GPU
/// runtime) is a [`FormatError`] in [`AnsError::Format`]; the other variants are MatVANS's
/// own. Every variant carries the offending values; the messages say what to do about them.
#[derive(Debug, thiserror::Error)]
pub enum AnsError {
    /// An error of the format core: shape, length, container, limits, runtime.
    #[error(transparent)]
    Format(#[from] FormatError),
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
    /// Value counts whose sum does not fit a `u64`.
    #[error(
        "the value counts sum past u64::MAX (the first {index} counts already do): pass counts \
         of at most 2^64 - 1 values in all"
    )]
    CountOverflow {
        /// Index of the count at which the sum overflowed.
        index: usize,
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
    /// A quantization step that is not positive and finite.
    #[error("quantization step {step} must be positive and finite")]
    Step {
        /// The step given.
        step: f32,
    },
    /// A target relative error outside `(0, 1)`.
    #[error(
        "target relative error {target} must be in (0, 1), e.g. 0.01 for 1% of the weights' norm"
    )]
    TargetError {
        /// The target given.
        target: f64,
    },
    /// A precision other than 8 bits asked for (or found) with the `ans-lanes` layout, whose
    /// coder works at 8 bits only.
    #[error(
        "layout ans-lanes codes at 8 bits of precision but precision {precision} was asked for: \
         leave the precision to the encoder (None) or choose another layout"
    )]
    LanePrecision {
        /// The precision asked for.
        precision: u32,
    },
    /// An `ans-lanes` segment (columns per unit) asked of the encoder that is not a positive
    /// multiple of 16.
    #[error(
        "lane_segment {segment} must be a positive multiple of 16 columns (a segment past the \
         padded columns is clamped to them), or None for the default rule"
    )]
    LaneSegment {
        /// The segment given.
        segment: usize,
    },
    /// The `segment` header field of an `ans-lanes` container that is not a multiple of 16
    /// between 16 and the padded columns.
    #[error(
        "header field segment is {segment} but ans-lanes needs a multiple of 16 from 16 to the \
         padded columns ({padded_cols}): the header is damaged"
    )]
    Segment {
        /// The field's value.
        segment: u32,
        /// The padded columns of the container.
        padded_cols: usize,
    },
    /// A layout budget that is negative, NaN or infinite.
    #[error(
        "layout_budget_bits {value} must be finite and at least 0 (EncodeOptions::auto(0.1) \
         keeps ans-lanes or ans-warp-rows only within 0.1 bits per element of the entropy)"
    )]
    LayoutBudget {
        /// The value given.
        value: f64,
    },
    /// A matrix whose every layout is larger than the plain int8 matrix.
    #[error(
        "the matrix does not compress: its smallest container ({layout}) takes {bytes} bytes, \
         more than the {limit} of the plain int8 matrix plus the allowance (entropy \
         {entropy_bits:.2} bits per element): keep it as int8 (the dense int8 kernel)"
    )]
    Incompressible {
        /// The smaller layout's name.
        layout: &'static str,
        /// Its container's bytes.
        bytes: u64,
        /// `rows * cols + INT8_ALLOWANCE_BYTES`.
        limit: u64,
        /// The values' empirical entropy.
        entropy_bits: f64,
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
    /// A stream that does not decode: it ran out, or a coder did not end in its initial state
    /// (`2^32`, or `2^16` for `ans-lanes`).
    #[error(
        "{unit} {index} is corrupted: {reason}; the compressed matrix was damaged, re-encode it or \
         reload it from an intact copy"
    )]
    Corrupted {
        /// `"row"`, `"stripe"`, `"lane unit"` or `"matrix"`.
        unit: &'static str,
        /// Its index.
        index: usize,
        /// What went wrong.
        reason: String,
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
    /// An `ans-lanes-esc` unit whose escape value is not the matrix's (unit 0's), or an escape
    /// value the model does not code: not the canonical container.
    #[error(
        "lane unit {unit} escapes to {found} but the matrix escapes to {expected}, a value its \
         model must code: the container was not written by cmv; re-encode the matrix"
    )]
    Escape {
        /// The unit.
        unit: usize,
        /// Its escape value.
        found: i8,
        /// The matrix's escape value (unit 0's).
        expected: i8,
    },
    /// A stream that decodes but does not code its padding with the padding value: the
    /// container is not the canonical one of its matrix.
    #[error(
        "padding element ({row}, {col}) decodes to {found} but padding is coded with the \
         padding value {expected}: the container was not written by cmv; re-encode the matrix"
    )]
    Padding {
        /// Row in the padded matrix.
        row: usize,
        /// Column in the padded matrix.
        col: usize,
        /// The value decoded.
        found: i8,
        /// The padding value.
        expected: i8,
    },
}

/// Result alias of this crate.
pub type Result<T, E = AnsError> = std::result::Result<T, E>;

#[cfg(feature = "gpu")]
impl From<cmv_runtime::RuntimeError> for AnsError {
    fn from(e: cmv_runtime::RuntimeError) -> Self {
        AnsError::Format(FormatError::Runtime(e))
    }
}

/// The format core's shape error for a matrix MatVANS cannot hold.
pub(crate) fn shape_error(rows: usize, cols: usize) -> AnsError {
    FormatError::Shape {
        format: "ans",
        rows,
        cols,
        rule: "both sides must be at least 1 and, padded, at most u32::MAX",
    }
    .into()
}
