//! [`CompressedMatrix`], the trait every format's matrix implements, and [`Weights`], the one
//! way a dense matrix comes in.

use std::fmt::Debug;

use crate::{FormatError, Limits, Result, SizeBreakdown};

/// A dense row-major matrix handed to an encoder: exactly `rows * cols` values.
///
/// This is the one rule for every format: a slice of any other length is refused
/// ([`FormatError::Length`]), never cut or padded.
#[derive(Clone, Copy, Debug)]
pub struct Weights<'a, T> {
    data: &'a [T],
    rows: usize,
    cols: usize,
}

impl<'a, T> Weights<'a, T> {
    /// `data` as a `rows x cols` matrix, row-major.
    ///
    /// # Errors
    /// [`FormatError::Length`] when `data.len() != rows * cols` (also when the product
    /// overflows: then `expected` is `usize::MAX`).
    pub fn new(data: &'a [T], rows: usize, cols: usize) -> Result<Self> {
        let expected = rows.saturating_mul(cols);
        crate::check_len("matrix", data.len(), expected)?;
        Ok(Self { data, rows, cols })
    }

    /// The values, row-major.
    pub fn data(&self) -> &'a [T] {
        self.data
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Row `r`.
    pub fn row(&self, r: usize) -> &'a [T] {
        &self.data[r * self.cols..(r + 1) * self.cols]
    }
}

/// A compressed matrix of one format, at matrix level: encode, shape, sizes, container, CPU
/// reference product. Its GPU side is [`DeviceGemv`](crate::DeviceGemv) (feature `gpu`).
///
/// The product is `y = W x` for a batch of vectors: `x` holds `batch` vectors of `cols`
/// inputs one after another, `y` holds `batch` vectors of `rows` outputs likewise.
///
/// # Contract
/// * `from_bytes(to_bytes(m)) == m`, and `to_bytes` of a loaded matrix gives back the same
///   bytes (one canonical container per matrix: a blob that differs in any byte is either
///   refused or a different matrix).
/// * `from_bytes_with` never panics, never allocates more than the blob's length plus what
///   `limits` allow, and takes time bounded by the blob's length and `limits.max_elements`.
/// * `sizes()` comes from the header and part lengths alone: it never decodes.
/// * `reference` is the exact (integer formats) or fp64 (lossy formats) product of the
///   matrix as stored; a GPU product is compared with it.
/// * Non-finite inputs: each format says what they do in `reference`'s docs (for float
///   inputs they propagate as in IEEE arithmetic, on the CPU as on the GPU).
pub trait CompressedMatrix: Sized + Send + Sync + Debug + 'static {
    /// The format's name (`"ans"`, `"spqr"`), used in tables and file names.
    const NAME: &'static str;
    /// The dense weights the encoder takes (`i8`, `f32`).
    type Weight: Copy + Send + Sync + 'static;
    /// The input vectors' elements (`i8`, `f16`).
    type Input: Copy + Send + Sync + 'static;
    /// The reference product's elements (`i32` exact, `f64`).
    type Output: Copy + Send + Sync + Debug + 'static;
    /// Encoder options.
    type Options: Clone + Default + Debug + Send + Sync;
    /// The format's error, which wraps [`FormatError`].
    type Error: std::error::Error + From<FormatError> + Send + Sync + 'static;

    /// Compresses a dense matrix.
    ///
    /// # Errors
    /// The format's (shape, values, options).
    fn encode_weights(
        weights: Weights<'_, Self::Weight>,
        options: &Self::Options,
    ) -> Result<Self, Self::Error>;

    /// Compresses `weights`, a `rows x cols` row-major matrix of exactly `rows * cols`
    /// values.
    ///
    /// # Errors
    /// [`FormatError::Length`] for any other length; the format's errors.
    fn encode_slice(
        weights: &[Self::Weight],
        rows: usize,
        cols: usize,
        options: &Self::Options,
    ) -> Result<Self, Self::Error> {
        Self::encode_weights(Weights::new(weights, rows, cols)?, options)
    }

    /// Named encoder settings worth comparing (the bench runs each); the first is the
    /// default.
    fn variants() -> Vec<(&'static str, Self::Options)> {
        vec![("default", Self::Options::default())]
    }

    /// Rows.
    fn rows(&self) -> usize;

    /// Columns.
    fn cols(&self) -> usize;

    /// Bytes part by part, from the header and part lengths.
    fn size_breakdown(&self) -> SizeBreakdown;

    /// The container.
    fn container_bytes(&self) -> Vec<u8>;

    /// Reads a container, within `limits`.
    ///
    /// # Errors
    /// [`FormatError`]s of the container and the limits; the format's own checks.
    fn from_container(blob: &[u8], limits: &Limits) -> Result<Self, Self::Error>;

    /// The CPU reference product of `batch` vectors (`x.len() == batch * cols`), `batch *
    /// rows` outputs.
    ///
    /// # Errors
    /// [`FormatError::Length`], [`FormatError::Batch`] (batch 0), the format's.
    fn reference(&self, x: &[Self::Input], batch: usize) -> Result<Vec<Self::Output>, Self::Error>;
}

/// Checks the arguments of a reference product: `batch >= 1` and `x.len() == batch * cols`.
///
/// # Errors
/// [`FormatError::Batch`], [`FormatError::Length`].
pub fn check_reference_args<T>(x: &[T], batch: usize, cols: usize) -> Result<()> {
    if batch == 0 {
        return Err(FormatError::Batch {
            batch,
            max: usize::MAX,
        });
    }
    crate::check_len("input", x.len(), crate::batch_len(batch, cols)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_must_have_exactly_rows_times_cols_values() {
        let v = [1, 2, 3, 4, 5, 6];
        let w = Weights::new(&v, 2, 3).unwrap();
        assert_eq!(w.row(1), [4, 5, 6]);
        assert_eq!((w.rows(), w.cols(), w.data().len()), (2, 3, 6));
        assert!(matches!(
            Weights::new(&v, 2, 2),
            Err(FormatError::Length {
                got: 6,
                expected: 4,
                ..
            })
        ));
        assert!(Weights::new(&v, 7, 1).is_err());
        assert!(matches!(
            Weights::new(&v, usize::MAX, 2),
            Err(FormatError::Length {
                expected: usize::MAX,
                ..
            })
        ));
        check_reference_args(&v, 2, 3).unwrap();
        assert!(check_reference_args(&v, 0, 3).is_err());
        assert!(check_reference_args(&v, 3, 3).is_err());
        assert!(check_reference_args(&v, usize::MAX, 3).is_err());
    }
}
