//! The SBVR container (`docs/SBVR.md`, "Container"): a [`cmv_format::container`] with the
//! common prefix (magic `b"CMVSBVR\0"`, version 1), the [`SbvrFields`] and four parts: the
//! bitvector words (`u64`, kernel order), the indices as `u8` (caches of at most 256
//! entries) or as `u16` (larger caches; the other part is empty), and the coefficient cache
//! (`entries x bits` fp16). The number of entries is the cache part's count over `bits`.

use std::mem::size_of;

use bytemuck::{Pod, Zeroable};
use cmv_format::container::{ContainerSpec, PartSpec, Reader, Writer};
use cmv_format::{Limits, SizeBreakdown, check_field};
use half::f16;
use sbvr_kernels::layout::{Geometry, MAX_ENTRIES, MAX_U8_ENTRIES};

use crate::error::{Result, SbvrError};
use crate::matrix::{NAME, SbvrMatrix, check_shape};

/// The first 8 bytes of every container.
pub const MAGIC: [u8; 8] = *b"CMVSBVR\0";
/// The container version this build writes (and the oldest it reads).
pub const VERSION: u32 = 1;

/// The SBVR header fields (after the common prefix).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct SbvrFields {
    /// Rows.
    pub rows: u32,
    /// Columns.
    pub cols: u32,
    /// Bitvectors per group (2..=8).
    pub bits: u32,
    /// Zero.
    pub reserved: u32,
}

const BITS: &str = "bitvectors";
const INDEX8: &str = "indices (u8)";
const INDEX16: &str = "indices (u16)";
const CACHE: &str = "coefficient cache";

/// The container: its fields and parts, in order.
pub static SPEC: ContainerSpec = ContainerSpec {
    format: NAME,
    magic: MAGIC,
    version: VERSION,
    oldest_version: VERSION,
    fields_bytes: size_of::<SbvrFields>(),
    parts: &[
        PartSpec::of::<u64>(BITS),
        PartSpec::of::<u8>(INDEX8),
        PartSpec::of::<u16>(INDEX16),
        PartSpec::of::<u16>(CACHE),
    ],
};

impl SbvrMatrix {
    /// The header fields of this matrix.
    pub fn fields(&self) -> SbvrFields {
        SbvrFields {
            rows: self.rows() as u32,
            cols: self.cols() as u32,
            bits: self.bits(),
            reserved: 0,
        }
    }

    /// The container.
    pub fn to_bytes(&self) -> Vec<u8> {
        let cache: Vec<u16> = self.coefficients().iter().map(|c| c.to_bits()).collect();
        let w = Writer::new(&SPEC, &self.fields()).part(self.bit_words());
        let w = if self.wide_index() {
            w.part::<u8>(&[]).part(self.index())
        } else {
            let narrow: Vec<u8> = self.index().iter().map(|&i| i as u8).collect();
            w.part(&narrow).part::<u16>(&[])
        };
        w.part(&cache).finish()
    }

    /// Reads a container within the default [`Limits`].
    ///
    /// # Errors
    /// As [`SbvrMatrix::from_bytes_with`].
    pub fn from_bytes(blob: &[u8]) -> Result<Self> {
        Self::from_bytes_with(blob, &Limits::default())
    }

    /// Reads a container: the core's checks ([`Reader::open`]: magic, version, every size
    /// against the blob, zero padding, CRC), the fields (shape, bits, reserved zero), the
    /// weight count against `limits.max_elements`, every part's count against the shape, the
    /// index width against the cache size, then every invariant of
    /// [`SbvrMatrix::validate`].
    ///
    /// # Errors
    /// One per failed check, naming the offending value.
    pub fn from_bytes_with(blob: &[u8], limits: &Limits) -> Result<Self> {
        let mut r = Reader::open(blob, &SPEC)?;
        let f: SbvrFields = r.fields();
        check_field("reserved", f.reserved.into(), 0)?;
        let (rows, cols) = (f.rows as usize, f.cols as usize);
        check_shape(rows, cols, f.bits)?;
        let geom = Geometry::new(rows, cols, f.bits as usize);
        limits.check_elements(geom.padded_rows() as u64 * geom.padded_cols() as u64)?;
        let n = f.bits as u64;
        let cache_count = r.count(3);
        let entries = cache_count / n;
        if entries == 0 || entries > MAX_ENTRIES as u64 || cache_count % n != 0 {
            return Err(SbvrError::Entries {
                entries: entries as usize,
            });
        }
        let wide = entries > MAX_U8_ENTRIES as u64;
        let bits = r.part::<u64>(geom.bit_words() as u64)?;
        let (i8_len, i16_len) = if wide {
            (0, geom.index_len() as u64)
        } else {
            (geom.index_len() as u64, 0)
        };
        let narrow = r.part::<u8>(i8_len)?;
        let index16 = r.part::<u16>(i16_len)?;
        let index = if wide {
            index16
        } else {
            narrow.into_iter().map(u16::from).collect()
        };
        let cache: Vec<u16> = r.part(cache_count)?;
        let coeffs = cache.into_iter().map(f16::from_bits).collect();
        SbvrMatrix::from_stored(rows, cols, f.bits, bits, index, coeffs)
    }

    /// Bytes of every part (all read by the kernel).
    pub fn size_breakdown(&self) -> SizeBreakdown {
        let (b, i, c) = self.part_bytes();
        let (i8b, i16b) = if self.wide_index() { (0, i) } else { (i, 0) };
        let parts = [(BITS, b), (INDEX8, i8b), (INDEX16, i16b), (CACHE, c)];
        let container = SPEC.container_bytes(&parts.map(|p| p.1 as u64));
        parts.iter().fold(
            SizeBreakdown::new(self.rows(), self.cols(), container),
            |s, &(name, bytes)| s.part(name, bytes as u64, true),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_layout_is_fixed() {
        assert_eq!(size_of::<SbvrFields>(), 16);
        let f = SbvrFields {
            rows: 0x0403_0201,
            cols: 7,
            bits: 4,
            reserved: 0,
        };
        let b = bytemuck::bytes_of(&f);
        assert_eq!(&b[..8], &[1, 2, 3, 4, 7, 0, 0, 0]);
        assert_eq!(SPEC.header_bytes(), 32 + 16 + 4 * 16);
    }
}
