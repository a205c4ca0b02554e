//! The BEAM container and [`CompressedMatrix`] for [`PackedMatrix`].

use bytemuck::{Pod, Zeroable};
use cmv_format::container::{ContainerSpec, PartSpec, Reader, Writer};
use cmv_format::{
    CompressedMatrix, FormatError, HeaderCode, Limits, SizeBreakdown, Weights, check_field,
};

use crate::{BeamError, Layout, PackedMatrix, word_count};

/// The BEAM container's header fields.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct BeamFields {
    /// Rows.
    pub rows: u64,
    /// Columns.
    pub cols: u64,
    /// Bits per element (1..=64).
    pub bits: u32,
    /// The [`Layout`] code.
    pub layout: u32,
}

const _: () = assert!(size_of::<BeamFields>() == 24);

/// The BEAM container: the fields above and one part, the packed `u64` words.
pub static SPEC: ContainerSpec = ContainerSpec {
    format: "beam",
    magic: *b"CMVBEAM\0",
    version: 1,
    oldest_version: 1,
    fields_bytes: size_of::<BeamFields>(),
    parts: &[PartSpec::of::<u64>("words")],
};

/// Encoder options of [`PackedMatrix`] as a [`CompressedMatrix`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BeamOptions {
    /// Bits per element; `None`: the width of the largest value (zero suppression).
    pub bits: Option<u32>,
    /// The layout.
    pub layout: Layout,
}

impl PackedMatrix {
    /// The container.
    pub fn to_bytes(&self) -> Vec<u8> {
        let fields = BeamFields {
            rows: self.rows as u64,
            cols: self.cols as u64,
            bits: self.bits,
            layout: self.layout.code(),
        };
        Writer::new(&SPEC, &fields).part(&self.words).finish()
    }

    /// Reads a container within `limits`, checking every field and that the packing is
    /// canonical (unused bits zero).
    ///
    /// # Errors
    /// The container's [`FormatError`]s, [`FormatError::Limit`], [`BeamError::Width`],
    /// [`FormatError::Header`] for a word count the fields do not imply,
    /// [`FormatError::NonZero`] for set unused bits.
    pub fn from_bytes_with(blob: &[u8], limits: &Limits) -> Result<Self, BeamError> {
        let mut reader = Reader::open(blob, &SPEC)?;
        let f: BeamFields = reader.fields();
        let layout = Layout::from_code(f.layout)?;
        if !(1..=64).contains(&f.bits) {
            return Err(BeamError::Width { bits: f.bits });
        }
        let elements = f.rows.saturating_mul(f.cols);
        limits.check_elements(elements)?;
        let (rows, cols) = (
            usize::try_from(f.rows).map_err(|_| header("rows", f.rows))?,
            usize::try_from(f.cols).map_err(|_| header("cols", f.cols))?,
        );
        if rows == 0 || cols == 0 {
            return Err(FormatError::Shape {
                format: "beam",
                rows,
                cols,
                rule: "rows and columns must be at least 1",
            }
            .into());
        }
        let expected = word_count(rows, cols, f.bits, layout).unwrap_or(usize::MAX) as u64;
        check_field("words", reader.count(0), expected)?;
        let words: Vec<u64> = reader.part(expected)?;
        PackedMatrix::from_words(rows, cols, f.bits, layout, words)
    }

    /// Reads a container within [`Limits::DEFAULT`].
    ///
    /// # Errors
    /// As [`PackedMatrix::from_bytes_with`].
    pub fn from_bytes(blob: &[u8]) -> Result<Self, BeamError> {
        Self::from_bytes_with(blob, &Limits::DEFAULT)
    }
}

fn header(field: &'static str, found: u64) -> FormatError {
    FormatError::Header {
        field,
        found,
        expected: usize::MAX as u64,
    }
}

impl CompressedMatrix for PackedMatrix {
    const NAME: &'static str = "beam";
    type Weight = u64;
    type Input = u64;
    type Output = u64;
    type Options = BeamOptions;
    type Error = BeamError;

    fn encode_weights(weights: Weights<'_, u64>, options: &BeamOptions) -> Result<Self, BeamError> {
        let (v, r, c) = (weights.data(), weights.rows(), weights.cols());
        match options.bits {
            Some(bits) => Self::pack(v, r, c, bits, options.layout),
            None => Self::pack_min_width(v, r, c, options.layout),
        }
    }

    fn variants() -> Vec<(&'static str, BeamOptions)> {
        Layout::ALL
            .iter()
            .map(|&layout| (layout.name(), BeamOptions { bits: None, layout }))
            .collect()
    }

    fn rows(&self) -> usize {
        self.rows
    }

    fn cols(&self) -> usize {
        self.cols
    }

    fn size_breakdown(&self) -> SizeBreakdown {
        let bytes = (self.words.len() * 8) as u64;
        SizeBreakdown::new(self.rows, self.cols, SPEC.container_bytes(&[bytes]))
            .part("words", bytes, true)
    }

    fn container_bytes(&self) -> Vec<u8> {
        self.to_bytes()
    }

    fn from_container(blob: &[u8], limits: &Limits) -> Result<Self, BeamError> {
        Self::from_bytes_with(blob, limits)
    }

    /// `y = W x` accumulated exactly in `u128`, wrapped modulo 2^64 (output widths and
    /// saturation come in the next chunk).
    fn reference(&self, x: &[u64], batch: usize) -> Result<Vec<u64>, BeamError> {
        PackedMatrix::reference(self, x, batch)
    }
}
