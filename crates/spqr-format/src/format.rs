//! The versioned container of a SpQR matrix (`docs/SPQR.md`, "Container").
//!
//! One little-endian blob: the 64-byte [`SpqrHeader`], then the dense words (`u64`), the CSR
//! row offsets and `col_val` words, the PTCSR block offsets and `col_val` words, and the input
//! permutation (`u32` each; the permutation only when the header's `perm_len` is `cols`).
//! Every length follows from the header: `padded_rows / 16 * padded_cols` dense words,
//! `padded_rows + 1` CSR offsets, `outlier_count` CSR words, `padded_rows / 16 + 1` PTCSR
//! offsets, `ptcsr_words` PTCSR words, `perm_len` permutation entries. The header's CRC-32
//! covers the whole blob, computed with the CRC field zero. [`SpqrMatrix::from_bytes`] checks
//! every field and every length against the blob's before it allocates anything, then the CRC,
//! then every invariant of [`SpqrMatrix::validate`].

use std::mem::{offset_of, size_of};

use bytemuck::{Pod, Zeroable};
use spqr_kernels::layout::TILE;

use crate::matrix::{check_field, padded_shape};
use crate::{OutlierFormat, Result, SpqrError, SpqrMatrix};

/// The first 8 bytes of every container.
pub const MAGIC: [u8; 8] = *b"CMVSPQR\0";
/// The container version this build writes and reads.
pub const VERSION: u32 = 1;
/// Bytes of the header.
pub const HEADER_BYTES: usize = 64;
/// Where the CRC field lies in the header.
pub const CRC_OFFSET: usize = offset_of!(SpqrHeader, crc32);

/// The container's header, stored little-endian (the fields of a value of this type are in
/// host order; [`SpqrHeader::to_bytes`] and [`SpqrHeader::from_bytes`] convert).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct SpqrHeader {
    /// [`MAGIC`].
    pub magic: [u8; 8],
    /// [`VERSION`].
    pub version: u32,
    /// [`OutlierFormat::code`] of the format the kernel reads: 0 for CSR, 1 for PTCSR.
    pub outlier_format: u32,
    /// Rows of the matrix.
    pub rows: u32,
    /// Columns of the matrix.
    pub cols: u32,
    /// Rows after padding to 16.
    pub padded_rows: u32,
    /// Columns after padding to 16 (at most 65536).
    pub padded_cols: u32,
    /// Outliers: words of the CSR `col_val` array, the last CSR offset.
    pub outlier_count: u32,
    /// Words of the PTCSR `col_val` array, padding included, the last PTCSR offset.
    pub ptcsr_words: u32,
    /// Entries of the input permutation: 0 (none) or `cols`.
    pub perm_len: u32,
    /// CRC-32 (IEEE, `crc32fast`) of the whole blob with this field zero.
    pub crc32: u32,
    /// Zero.
    pub reserved: [u32; 4],
}

const _: () = assert!(size_of::<SpqrHeader>() == HEADER_BYTES);
const _: () = assert!(CRC_OFFSET == 44);

impl SpqrHeader {
    /// The header as stored: little-endian.
    pub fn to_bytes(&self) -> [u8; HEADER_BYTES] {
        let mut h = *self;
        h.map_words(u32::to_le);
        bytemuck::cast(h)
    }

    /// A header from its stored bytes (no field is checked).
    pub fn from_bytes(bytes: &[u8; HEADER_BYTES]) -> Self {
        let mut h: Self = bytemuck::pod_read_unaligned(bytes);
        h.map_words(u32::from_le);
        h
    }

    fn map_words(&mut self, f: fn(u32) -> u32) {
        for w in [
            &mut self.version,
            &mut self.outlier_format,
            &mut self.rows,
            &mut self.cols,
            &mut self.padded_rows,
            &mut self.padded_cols,
            &mut self.outlier_count,
            &mut self.ptcsr_words,
            &mut self.perm_len,
            &mut self.crc32,
        ] {
            *w = f(*w);
        }
        for w in &mut self.reserved {
            *w = f(*w);
        }
    }
}

/// CRC-32 of a blob with its CRC field taken as zero (a blob too short to hold the field is
/// hashed as it is).
pub fn checksum(blob: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    match (blob.get(..CRC_OFFSET), blob.get(CRC_OFFSET + 4..)) {
        (Some(before), Some(after)) => {
            h.update(before);
            h.update(&[0; 4]);
            h.update(after);
        }
        _ => h.update(blob),
    }
    h.finalize()
}

fn u32_words(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

impl SpqrMatrix {
    /// The header describing this matrix (with its CRC field zero).
    pub fn header(&self) -> SpqrHeader {
        // Every size was checked to fit u32 when the matrix was made.
        SpqrHeader {
            magic: MAGIC,
            version: VERSION,
            outlier_format: self.outlier_format.code(),
            rows: self.rows as u32,
            cols: self.cols as u32,
            padded_rows: self.padded_rows as u32,
            padded_cols: self.padded_cols as u32,
            outlier_count: self.csr_col_vals.len() as u32,
            ptcsr_words: self.ptcsr_col_vals.len() as u32,
            perm_len: self.perm.as_ref().map_or(0, Vec::len) as u32,
            crc32: 0,
            reserved: [0; 4],
        }
    }

    /// The container: header, dense words, CSR arrays, PTCSR arrays, permutation,
    /// little-endian, with its CRC.
    pub fn to_bytes(&self) -> Vec<u8> {
        let len = self.sizes().container_bytes();
        let mut blob = Vec::with_capacity(len);
        blob.extend_from_slice(&self.header().to_bytes());
        for w in &self.dense {
            blob.extend_from_slice(&w.to_le_bytes());
        }
        for part in [
            &self.csr_row_offsets,
            &self.csr_col_vals,
            &self.ptcsr_block_offsets,
            &self.ptcsr_col_vals,
        ] {
            for w in part {
                blob.extend_from_slice(&w.to_le_bytes());
            }
        }
        for w in self.perm.iter().flatten() {
            blob.extend_from_slice(&w.to_le_bytes());
        }
        debug_assert_eq!(blob.len(), len);
        let crc = checksum(&blob);
        blob[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_le_bytes());
        blob
    }

    /// Reads a container written by [`SpqrMatrix::to_bytes`], checking the magic, the
    /// version, the outlier format, the shape and padded shape, the permutation length, the
    /// reserved words, the length of every part against the blob's length (before allocating
    /// anything), the CRC-32, and then every invariant of [`SpqrMatrix::validate`].
    ///
    /// # Errors
    /// One error per failed check, naming the offending values: [`SpqrError::Truncated`],
    /// [`SpqrError::TrailingBytes`], [`SpqrError::Magic`], [`SpqrError::Version`],
    /// [`SpqrError::FormatCode`], [`SpqrError::Header`], [`SpqrError::Shape`],
    /// [`SpqrError::TooWide`], [`SpqrError::Checksum`], and those of
    /// [`SpqrMatrix::validate`].
    pub fn from_bytes(blob: &[u8]) -> Result<SpqrMatrix> {
        let Some(head) = blob.first_chunk::<HEADER_BYTES>() else {
            return Err(SpqrError::Truncated {
                what: "header",
                needed: HEADER_BYTES as u64,
                got: blob.len(),
            });
        };
        let h = SpqrHeader::from_bytes(head);
        if h.magic != MAGIC {
            return Err(SpqrError::Magic { found: h.magic });
        }
        if h.version != VERSION {
            return Err(SpqrError::Version {
                found: h.version,
                supported: VERSION,
            });
        }
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

        // Every length against the blob's before anything is allocated (u64: no overflow,
        // padded_rows < 2^32 and padded_cols <= 2^16).
        let dense_words = (padded_rows / TILE) as u64 * padded_cols as u64;
        let tile_rows = (padded_rows / TILE) as u64;
        let mut end = HEADER_BYTES as u64;
        let mut ends = [0u64; 6];
        let parts: [(&'static str, u64); 6] = [
            ("dense part", 8 * dense_words),
            ("CSR row offsets", 4 * (padded_rows as u64 + 1)),
            ("CSR col_val words", 4 * u64::from(h.outlier_count)),
            ("PTCSR block offsets", 4 * (tile_rows + 1)),
            ("PTCSR col_val words", 4 * u64::from(h.ptcsr_words)),
            ("input permutation", 4 * u64::from(h.perm_len)),
        ];
        for (k, &(what, bytes)) in parts.iter().enumerate() {
            end += bytes;
            ends[k] = end;
            if (blob.len() as u64) < end {
                return Err(SpqrError::Truncated {
                    what,
                    needed: end,
                    got: blob.len(),
                });
            }
        }
        if blob.len() as u64 != end {
            return Err(SpqrError::TrailingBytes {
                expected: end,
                got: blob.len(),
            });
        }
        let stored = h.crc32;
        let computed = checksum(blob);
        if stored != computed {
            return Err(SpqrError::Checksum { stored, computed });
        }

        let at = |k: usize| {
            let start = if k == 0 {
                HEADER_BYTES
            } else {
                ends[k - 1] as usize
            };
            &blob[start..ends[k] as usize]
        };
        let dense = at(0)
            .chunks_exact(8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
            .collect();
        let m = SpqrMatrix {
            rows,
            cols,
            padded_rows,
            padded_cols,
            dense,
            csr_row_offsets: u32_words(at(1)),
            csr_col_vals: u32_words(at(2)),
            ptcsr_block_offsets: u32_words(at(3)),
            ptcsr_col_vals: u32_words(at(4)),
            outlier_format,
            perm: (h.perm_len != 0).then(|| u32_words(at(5))),
        };
        m.validate()?;
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_layout_is_fixed() {
        let h = SpqrHeader {
            magic: MAGIC,
            version: 1,
            outlier_format: 1,
            rows: 0x0403_0201,
            cols: 7,
            perm_len: 7,
            crc32: 0xdead_beef,
            ..Default::default()
        };
        let b = h.to_bytes();
        assert_eq!(&b[..8], b"CMVSPQR\0");
        assert_eq!(&b[8..12], &[1, 0, 0, 0]);
        assert_eq!(&b[12..16], &[1, 0, 0, 0]);
        assert_eq!(&b[16..20], &[1, 2, 3, 4]);
        assert_eq!(&b[20..24], &[7, 0, 0, 0]);
        assert_eq!(&b[40..44], &[7, 0, 0, 0]);
        assert_eq!(&b[44..48], &0xdead_beefu32.to_le_bytes());
        assert_eq!(SpqrHeader::from_bytes(&b), h);
    }
}
