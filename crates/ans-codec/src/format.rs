//! The versioned container of a compressed matrix (`docs/ANS.md`, "Container").
//!
//! One little-endian blob: the 64-byte [`AnsHeader`], the 256 `u16` frequencies (value `-128`
//! first), the offsets (`u32`) and the stream (`u32`, as stored: interleaved). The header's
//! CRC-32 covers the whole blob, computed with the CRC field zero.
//! [`AnsMatrix::from_bytes`] checks every field, length and rule before it trusts any of them.

use std::mem::{offset_of, size_of};
use std::sync::OnceLock;

use ans_kernels::layout::group_size;
use bytemuck::{Pod, Zeroable};

use crate::matrix::{check_field, check_offsets};
use crate::model::{Model, VALUES, check_precision};
use crate::{AnsError, AnsMatrix, Layout, Result};

/// The first 8 bytes of every container.
pub const MAGIC: [u8; 8] = *b"CMVANS\0\0";
/// The container version this build writes and reads.
pub const VERSION: u32 = 1;
/// Bytes of the header.
pub const HEADER_BYTES: usize = 64;
/// Bytes of the frequency table: one `u16` per value.
pub const FREQ_BYTES: usize = 2 * VALUES;
/// Where the CRC field lies in the header.
pub const CRC_OFFSET: usize = offset_of!(AnsHeader, crc32);

/// The container's header, stored little-endian (the fields of a value of this type are in
/// host order; [`AnsHeader::to_bytes`] and [`AnsHeader::from_bytes`] convert).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct AnsHeader {
    /// [`MAGIC`].
    pub magic: [u8; 8],
    /// [`VERSION`].
    pub version: u32,
    /// [`Layout::code`]: 0 for `ans-warp-rows`, 1 for `ans-warp-stripes`.
    pub layout: u32,
    /// The model's precision `P`, 7 to 12.
    pub precision: u32,
    /// Elements per ANS step, `layout::group_size(P)`.
    pub group: u32,
    /// Rows of the matrix.
    pub rows: u32,
    /// Columns of the matrix.
    pub cols: u32,
    /// Rows after padding.
    pub padded_rows: u32,
    /// Columns after padding.
    pub padded_cols: u32,
    /// Entries of the offset table: units + 1.
    pub offset_count: u32,
    /// Words of the stream.
    pub stream_words: u32,
    /// CRC-32 (IEEE, `crc32fast`) of the whole blob with this field zero.
    pub crc32: u32,
    /// Zero.
    pub reserved: [u32; 3],
}

const _: () = assert!(size_of::<AnsHeader>() == HEADER_BYTES);
const _: () = assert!(CRC_OFFSET == 48);

impl AnsHeader {
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
            &mut self.layout,
            &mut self.precision,
            &mut self.group,
            &mut self.rows,
            &mut self.cols,
            &mut self.padded_rows,
            &mut self.padded_cols,
            &mut self.offset_count,
            &mut self.stream_words,
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

impl AnsMatrix {
    /// The header describing this matrix (with its CRC field zero).
    pub fn header(&self) -> AnsHeader {
        // Every size was checked to fit u32 when the matrix was made.
        AnsHeader {
            magic: MAGIC,
            version: VERSION,
            layout: self.layout.code(),
            precision: self.precision(),
            group: self.group() as u32,
            rows: self.rows as u32,
            cols: self.cols as u32,
            padded_rows: self.padded_rows as u32,
            padded_cols: self.padded_cols as u32,
            offset_count: self.offsets.len() as u32,
            stream_words: self.stream.len() as u32,
            crc32: 0,
            reserved: [0; 3],
        }
    }

    /// The container: header, frequencies, offsets and stream, little-endian, with its CRC.
    pub fn to_bytes(&self) -> Vec<u8> {
        let len = HEADER_BYTES + FREQ_BYTES + 4 * self.offsets.len() + 4 * self.stream.len();
        let mut blob = Vec::with_capacity(len);
        blob.extend_from_slice(&self.header().to_bytes());
        for f in self.model.freqs() {
            blob.extend_from_slice(&f.to_le_bytes());
        }
        for o in &self.offsets {
            blob.extend_from_slice(&o.to_le_bytes());
        }
        for w in &self.stream {
            blob.extend_from_slice(&w.to_le_bytes());
        }
        debug_assert_eq!(blob.len(), len);
        let crc = checksum(&blob);
        blob[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_le_bytes());
        blob
    }

    /// Reads a container written by [`AnsMatrix::to_bytes`], checking the magic, the version,
    /// the layout, the precision and group, the shape and padded shape, the reserved words, the
    /// lengths of every part against the blob's length (before allocating anything), the
    /// CRC-32, the frequencies (sum `2^P`) and the offsets (count, start at 0, multiples of 128
    /// words, at least 128 words per unit, the last equal to the stream length).
    ///
    /// # Errors
    /// One error per failed check, naming the offending values: [`AnsError::Truncated`],
    /// [`AnsError::TrailingBytes`], [`AnsError::Magic`], [`AnsError::Version`],
    /// [`AnsError::LayoutCode`], [`AnsError::Precision`], [`AnsError::Header`],
    /// [`AnsError::Shape`], [`AnsError::Checksum`], [`AnsError::FrequencySum`],
    /// [`AnsError::Offset`].
    pub fn from_bytes(blob: &[u8]) -> Result<AnsMatrix> {
        let Some(head) = blob.first_chunk::<HEADER_BYTES>() else {
            return Err(AnsError::Truncated {
                what: "header",
                needed: HEADER_BYTES as u64,
                got: blob.len(),
            });
        };
        let h = AnsHeader::from_bytes(head);
        if h.magic != MAGIC {
            return Err(AnsError::Magic { found: h.magic });
        }
        if h.version != VERSION {
            return Err(AnsError::Version {
                found: h.version,
                supported: VERSION,
            });
        }
        let layout = Layout::from_code(h.layout)?;
        check_precision(h.precision)?;
        check_field("group", h.group.into(), group_size(h.precision) as u64)?;
        for r in h.reserved {
            check_field("reserved", r.into(), 0)?;
        }
        let (rows, cols) = (h.rows as usize, h.cols as usize);
        let (padded_rows, padded_cols) = layout.padded_shape(rows, cols)?;
        check_field("padded_rows", h.padded_rows.into(), padded_rows as u64)?;
        check_field("padded_cols", h.padded_cols.into(), padded_cols as u64)?;
        let units = layout.units(padded_rows) as u64;
        check_field("offset_count", h.offset_count.into(), units + 1)?;

        // Every length against the blob's before anything is allocated.
        let freqs_end = (HEADER_BYTES + FREQ_BYTES) as u64;
        let offsets_end = freqs_end + 4 * u64::from(h.offset_count);
        let stream_end = offsets_end + 4 * u64::from(h.stream_words);
        for (what, needed) in [
            ("frequency table", freqs_end),
            ("offset table", offsets_end),
            ("stream", stream_end),
        ] {
            if (blob.len() as u64) < needed {
                return Err(AnsError::Truncated {
                    what,
                    needed,
                    got: blob.len(),
                });
            }
        }
        if blob.len() as u64 != stream_end {
            return Err(AnsError::TrailingBytes {
                expected: stream_end,
                got: blob.len(),
            });
        }
        let stored = h.crc32;
        let computed = checksum(blob);
        if stored != computed {
            return Err(AnsError::Checksum { stored, computed });
        }

        let (freqs_end, offsets_end) = (freqs_end as usize, offsets_end as usize);
        let mut freqs = [0u16; VALUES];
        for (f, b) in freqs
            .iter_mut()
            .zip(blob[HEADER_BYTES..freqs_end].chunks_exact(2))
        {
            *f = u16::from_le_bytes([b[0], b[1]]);
        }
        let model = Model::new(h.precision, freqs)?;
        let words = |bytes: &[u8]| -> Vec<u32> {
            bytes
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()
        };
        let offsets = words(&blob[freqs_end..offsets_end]);
        check_offsets(&offsets, h.stream_words.into())?;
        let stream = words(&blob[offsets_end..]);
        let m = AnsMatrix {
            layout,
            model,
            rows,
            cols,
            padded_rows,
            padded_cols,
            offsets,
            stream,
            stats: OnceLock::new(),
        };
        m.validate()?;
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EncodeOptions, encode};

    #[test]
    fn header_layout_is_fixed() {
        let h = AnsHeader {
            magic: MAGIC,
            version: 1,
            layout: 1,
            precision: 9,
            group: 2,
            rows: 0x0403_0201,
            crc32: 0xdead_beef,
            ..Default::default()
        };
        let b = h.to_bytes();
        assert_eq!(&b[..8], b"CMVANS\0\0");
        assert_eq!(&b[8..12], &[1, 0, 0, 0]);
        assert_eq!(&b[12..16], &[1, 0, 0, 0]);
        assert_eq!(&b[16..20], &[9, 0, 0, 0]);
        assert_eq!(&b[24..28], &[1, 2, 3, 4]);
        assert_eq!(&b[48..52], &0xdead_beefu32.to_le_bytes());
        assert_eq!(AnsHeader::from_bytes(&b), h);
    }

    #[test]
    fn blobs_round_trip_with_their_crc() {
        let w: Vec<i8> = (0..40 * 70).map(|i| ((i * 37) % 11) as i8 - 5).collect();
        for layout in [Layout::WarpRows, Layout::WarpStripes] {
            let m = encode(
                &w,
                40,
                70,
                &EncodeOptions {
                    layout,
                    ..Default::default()
                },
            )
            .unwrap();
            let blob = m.to_bytes();
            assert_eq!(blob.len(), m.sizes().total_bytes());
            let back = AnsMatrix::from_bytes(&blob).unwrap();
            assert_eq!(back, m);
            assert_eq!(back.sizes(), m.sizes());
            assert_eq!(back.decode().unwrap(), w);
            let stored = u32::from_le_bytes(blob[48..52].try_into().unwrap());
            assert_eq!(stored, checksum(&blob));
        }
    }

    #[test]
    fn validate_catches_broken_invariants() {
        let w: Vec<i8> = (0..3 * 200).map(|i| (i % 7) as i8).collect();
        let m = encode(&w, 3, 200, &EncodeOptions::default()).unwrap();
        m.validate().unwrap();
        let mut bad = m.clone();
        bad.offsets[1] += 4;
        assert!(matches!(
            bad.validate(),
            Err(AnsError::Offset { index: 1, .. })
        ));
        let mut bad = m.clone();
        bad.stream.pop();
        assert!(matches!(bad.validate(), Err(AnsError::Offset { .. })));
        let mut bad = m.clone();
        bad.padded_cols = 200;
        assert!(matches!(
            bad.validate(),
            Err(AnsError::Header {
                field: "padded_cols",
                found: 200,
                expected: 256
            })
        ));
        let mut bad = m.clone();
        bad.offsets.push(bad.stream.len() as u32 + 128);
        assert!(matches!(
            bad.validate(),
            Err(AnsError::Header {
                field: "offset count",
                ..
            })
        ));
        let mut bad = m;
        bad.layout = Layout::WarpStripes;
        assert!(bad.validate().is_err());
    }
}
