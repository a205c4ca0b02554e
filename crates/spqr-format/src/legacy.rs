//! Version 1 of the SpQR container, still read (never written): a 64-byte header, then the
//! dense words (`u64`), the CSR row offsets and `col_val` words, the PTCSR block offsets and
//! `col_val` words and the input permutation (`u32` each) back to back, every length following
//! from the header, a CRC-32 of the whole blob (with the CRC field zero) at byte 44.

use std::mem::{offset_of, size_of};

use bytemuck::{Pod, Zeroable};
use cmv_format::container::{le_vec, legacy_parts};
use cmv_format::{FormatError, HeaderCode, Limits, check_field};
use spqr_kernels::layout::TILE;

use crate::error::Result;
use crate::matrix::{OutlierFormat, SpqrMatrix, padded_shape};

/// Bytes of the version 1 header.
const HEADER_BYTES: usize = 64;

/// The version 1 header, as stored (little-endian; hosts are little-endian).
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
struct HeaderV1 {
    magic: [u8; 8],
    version: u32,
    outlier_format: u32,
    rows: u32,
    cols: u32,
    padded_rows: u32,
    padded_cols: u32,
    outlier_count: u32,
    ptcsr_words: u32,
    perm_len: u32,
    crc32: u32,
    reserved: [u32; 4],
}

const _: () = assert!(size_of::<HeaderV1>() == HEADER_BYTES);

/// Reads a version 1 container (its magic and version already checked by the caller): the
/// header fields, the limits, every part's length against the blob's, the CRC, then every
/// invariant of [`SpqrMatrix::validate`].
pub(crate) fn read_v1(blob: &[u8], limits: &Limits) -> Result<SpqrMatrix> {
    let Some(head) = blob.first_chunk::<HEADER_BYTES>() else {
        return Err(FormatError::Truncated {
            what: "header",
            needed: HEADER_BYTES as u64,
            got: blob.len(),
        }
        .into());
    };
    let h: HeaderV1 = bytemuck::pod_read_unaligned(head);
    let outlier_format = OutlierFormat::from_code(h.outlier_format)?;
    for r in h.reserved {
        check_field("reserved", r.into(), 0)?;
    }
    let (rows, cols) = (h.rows as usize, h.cols as usize);
    let (padded_rows, padded_cols) = padded_shape(rows, cols)?;
    check_field("padded_rows", h.padded_rows.into(), padded_rows as u64)?;
    check_field("padded_cols", h.padded_cols.into(), padded_cols as u64)?;
    if h.perm_len != 0 {
        check_field("perm_len", h.perm_len.into(), cols as u64)?;
    }
    limits.check_elements(padded_rows as u64 * padded_cols as u64)?;
    // u64: padded_rows < 2^32 and padded_cols <= 2^16, nothing overflows.
    let tile_rows = (padded_rows / TILE) as u64;
    let parts = legacy_parts(
        blob,
        HEADER_BYTES,
        offset_of!(HeaderV1, crc32),
        &[
            ("dense part", 8 * tile_rows * padded_cols as u64),
            ("CSR row offsets", 4 * (padded_rows as u64 + 1)),
            ("CSR col_val words", 4 * u64::from(h.outlier_count)),
            ("PTCSR block offsets", 4 * (tile_rows + 1)),
            ("PTCSR col_val words", 4 * u64::from(h.ptcsr_words)),
            ("input permutation", 4 * u64::from(h.perm_len)),
        ],
    )?;
    SpqrMatrix::from_stored(
        (rows, cols),
        le_vec(parts[0]),
        std::array::from_fn(|k| le_vec(parts[k + 1])),
        outlier_format,
        (h.perm_len != 0).then(|| le_vec(parts[5])),
    )
}
