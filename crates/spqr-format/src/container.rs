//! The SpQR container (`docs/SPQR.md`, "Container") and the sizes of a matrix.
//!
//! Version 2 (written) is a [`cmv_format::container`]: the common prefix (magic
//! `b"CMVSPQR\0"`, version, header size, CRC-32, part count, total size), the
//! [`SpqrFields`], the part table (each part's element count and size) and the parts of
//! [`SPEC`]: the dense words (`u64`), the CSR row offsets and `col_val` words, the PTCSR block
//! offsets and `col_val` words, and the input permutation (`u32` each; 0 or `cols` entries).
//! The part table carries the counts; every count the shape implies is checked against it.
//!
//! Version 1 (the 64-byte header of the first build, parts back to back) is still read.
//! [`SpqrMatrix::from_bytes_with`] checks the container completely (the core's checks, the
//! fields, the limits) before it decodes anything, then every invariant of
//! [`SpqrMatrix::validate`].

use std::mem::{offset_of, size_of};

use bytemuck::{Pod, Zeroable};
use cmv_format::container::{ContainerSpec, PREFIX_BYTES, PartSpec, Reader, Writer, peek_version};
use cmv_format::{FormatError, HeaderCode, Limits, SizeBreakdown, check_field};
use spqr_kernels::layout::TILE;

use crate::error::Result;
use crate::legacy;
use crate::matrix::{NAME, OutlierFormat, SpqrMatrix, padded_shape};

/// The first 8 bytes of every container.
pub const MAGIC: [u8; 8] = *b"CMVSPQR\0";
/// The container version this build writes.
pub const VERSION: u32 = 2;
/// The oldest version this build reads.
pub const OLDEST_VERSION: u32 = 1;

/// The SpQR header fields of a version 2 container (after the common prefix).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct SpqrFields {
    /// [`HeaderCode::code`] of the [`OutlierFormat`] the kernel reads: 0 CSR, 1 PTCSR.
    pub outlier_format: u32,
    /// Rows of the matrix.
    pub rows: u32,
    /// Columns of the matrix.
    pub cols: u32,
    /// Rows after padding to 16.
    pub padded_rows: u32,
    /// Columns after padding to 16 (at most 65536).
    pub padded_cols: u32,
    /// Zero.
    pub reserved: u32,
}

/// The version 2 container: its fields and parts, in order.
pub static SPEC: ContainerSpec = ContainerSpec {
    format: NAME,
    magic: MAGIC,
    version: VERSION,
    oldest_version: OLDEST_VERSION,
    fields_bytes: size_of::<SpqrFields>(),
    parts: &[
        PartSpec::of::<u64>(DENSE),
        PartSpec::of::<u32>(CSR_OFFSETS),
        PartSpec::of::<u32>(CSR_WORDS),
        PartSpec::of::<u32>(PTCSR_OFFSETS),
        PartSpec::of::<u32>(PTCSR_WORDS),
        PartSpec::of::<u32>(PERMUTATION),
    ],
};

/// Part names, in the container and in [`SizeBreakdown`]s.
const DENSE: &str = "dense words";
const CSR_OFFSETS: &str = "CSR row offsets";
const CSR_WORDS: &str = "CSR col_val words";
const PTCSR_OFFSETS: &str = "PTCSR block offsets";
const PTCSR_WORDS: &str = "PTCSR col_val words";
const PERMUTATION: &str = "input permutation";

impl SpqrMatrix {
    /// The header fields describing this matrix.
    pub fn fields(&self) -> SpqrFields {
        // Every size was checked to fit u32 when the matrix was made.
        SpqrFields {
            outlier_format: self.outlier_format.code(),
            rows: self.shape.rows() as u32,
            cols: self.shape.cols() as u32,
            padded_rows: self.shape.padded_rows() as u32,
            padded_cols: self.shape.padded_cols() as u32,
            reserved: 0,
        }
    }

    /// The container (version 2): fields, dense words, CSR arrays, PTCSR arrays, permutation.
    pub fn to_bytes(&self) -> Vec<u8> {
        Writer::new(&SPEC, &self.fields())
            .part(&self.dense)
            .part(&self.csr_row_offsets)
            .part(&self.csr_col_vals)
            .part(&self.ptcsr_block_offsets)
            .part(&self.ptcsr_col_vals)
            .part(self.perm.as_deref().unwrap_or_default())
            .finish()
    }

    /// Reads a container of version 1 or 2 within the default [`Limits`]
    /// ([`SpqrMatrix::from_bytes_with`]).
    ///
    /// # Errors
    /// As [`SpqrMatrix::from_bytes_with`].
    pub fn from_bytes(blob: &[u8]) -> Result<SpqrMatrix> {
        Self::from_bytes_with(blob, &Limits::default())
    }

    /// Reads a container written by [`SpqrMatrix::to_bytes`] (version 2) or by the first
    /// build (version 1). Checks the whole container before it decodes anything (the core's
    /// checks of [`Reader::open`]: magic, version, sizes against the blob's length, padding,
    /// CRC), then the fields (outlier format, shape and padded shape, reserved zero), the
    /// padded weight count against `limits.max_elements`, every part's count against the
    /// shape, and every invariant of [`SpqrMatrix::validate`].
    ///
    /// # Errors
    /// One error per failed check, naming the offending values: the container's
    /// [`FormatError`]s (`Truncated`, `TrailingBytes`, `Magic`, `Version`, `Header`, `Code`,
    /// `NonZero`, `Checksum`, `Shape`, `Limit`), [`crate::SpqrError::TooWide`], and those of
    /// [`SpqrMatrix::validate`].
    pub fn from_bytes_with(blob: &[u8], limits: &Limits) -> Result<SpqrMatrix> {
        match peek_version(blob, &SPEC)? {
            1 => legacy::read_v1(blob, limits),
            VERSION => read_v2(blob, limits),
            v => Err(SPEC.version_error(v).into()),
        }
    }

    /// Bytes of every part of the container (both outlier encodings; the kernel reads the
    /// dense words and the chosen encoding's two arrays: the input permutation is applied to
    /// the inputs before a launch, [`SpqrMatrix::permute_input`]).
    pub fn size_breakdown(&self) -> SizeBreakdown {
        let csr = self.outlier_format == OutlierFormat::Csr;
        let parts = [
            (DENSE, 8 * self.dense.len(), true),
            (CSR_OFFSETS, 4 * self.csr_row_offsets.len(), csr),
            (CSR_WORDS, 4 * self.csr_col_vals.len(), csr),
            (PTCSR_OFFSETS, 4 * self.ptcsr_block_offsets.len(), !csr),
            (PTCSR_WORDS, 4 * self.ptcsr_col_vals.len(), !csr),
            (
                PERMUTATION,
                4 * self.perm.as_ref().map_or(0, Vec::len),
                false,
            ),
        ];
        let part_bytes = parts.map(|p| p.1 as u64);
        let container = SPEC.container_bytes(&part_bytes);
        parts.iter().fold(
            SizeBreakdown::new(self.shape.rows(), self.shape.cols(), container),
            |s, &(name, bytes, read)| s.part(name, bytes as u64, read),
        )
    }

    /// Bits per real weight of what a product with the chosen outlier format needs: the dense
    /// words, that format's offsets and words, and the input permutation if there is one
    /// ([`SpqrMatrix::bits_per_weight_with`]).
    pub fn bits_per_weight(&self) -> f64 {
        self.bits_per_weight_with(self.outlier_format)
    }

    /// Bits per real weight of what a product with the outliers in `format` needs: the dense
    /// words, that format's offsets and words, and the input permutation if there is one (the
    /// kernel does not read it, but the inputs must be permuted with it).
    pub fn bits_per_weight_with(&self, format: OutlierFormat) -> f64 {
        let outliers = match format {
            OutlierFormat::Csr => self.csr_row_offsets.len() + self.csr_col_vals.len(),
            OutlierFormat::Ptcsr => self.ptcsr_block_offsets.len() + self.ptcsr_col_vals.len(),
        };
        let bytes = 8 * self.dense.len() + 4 * (outliers + self.perm.as_ref().map_or(0, Vec::len));
        bytes as f64 * 8.0 / (self.shape.rows() * self.shape.cols()) as f64
    }
}

/// Reads a version 2 container.
fn read_v2(blob: &[u8], limits: &Limits) -> Result<SpqrMatrix> {
    let mut r = Reader::open(blob, &SPEC)?;
    let f: SpqrFields = r.fields();
    let outlier_format = OutlierFormat::from_code(f.outlier_format)?;
    if f.reserved != 0 {
        return Err(FormatError::NonZero {
            what: "reserved header field",
            offset: (PREFIX_BYTES + offset_of!(SpqrFields, reserved)) as u64,
            found: f.reserved.into(),
        }
        .into());
    }
    let (rows, cols) = (f.rows as usize, f.cols as usize);
    let (padded_rows, padded_cols) = padded_shape(rows, cols)?;
    check_field("padded_rows", f.padded_rows.into(), padded_rows as u64)?;
    check_field("padded_cols", f.padded_cols.into(), padded_cols as u64)?;
    limits.check_elements(padded_rows as u64 * padded_cols as u64)?;
    let tile_rows = (padded_rows / TILE) as u64;
    let dense = r.part(tile_rows * padded_cols as u64)?;
    let csr_row_offsets = r.part(padded_rows as u64 + 1)?;
    let csr_col_vals = r.next_part();
    let ptcsr_block_offsets = r.part(tile_rows + 1)?;
    let ptcsr_col_vals = r.next_part();
    let perm: Vec<u32> = if r.count(5) == 0 {
        r.next_part()
    } else {
        r.part(cols as u64)?
    };
    SpqrMatrix::from_stored(
        (rows, cols),
        dense,
        [
            csr_row_offsets,
            csr_col_vals,
            ptcsr_block_offsets,
            ptcsr_col_vals,
        ],
        outlier_format,
        (!perm.is_empty()).then_some(perm),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_layout_is_fixed() {
        assert_eq!(size_of::<SpqrFields>(), 24);
        let f = SpqrFields {
            outlier_format: 1,
            rows: 0x0403_0201,
            cols: 7,
            padded_rows: 0x0403_0210,
            padded_cols: 16,
            reserved: 0,
        };
        let b = bytemuck::bytes_of(&f);
        assert_eq!(&b[..4], &[1, 0, 0, 0]);
        assert_eq!(&b[4..8], &[1, 2, 3, 4]);
        assert_eq!(&b[8..12], &[7, 0, 0, 0]);
        assert_eq!(SPEC.header_bytes(), 32 + 24 + 6 * 16);
    }
}
