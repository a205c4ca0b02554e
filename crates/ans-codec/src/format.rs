//! The versioned container of a compressed matrix (`docs/ANS.md`, "Container").
//!
//! Version 2 is cmv's one container ([`cmv_format::container`]): the common prefix (magic
//! `b"CMVANS\0\0"`, version, header size, CRC-32, part count, total size), the header fields
//! [`AnsFields`], then three parts: the 256 `u16` frequencies (value `-128` first), the offsets
//! (`u32`) and the stream (`u32`, as stored: interleaved). Version 1 containers are still read
//! ([`AnsMatrix::from_bytes`] dispatches on the version).

use std::mem::size_of;

use cmv_format::container::{self, ContainerSpec, PartSpec, Reader, Writer};
use cmv_format::{Limits, SizeBreakdown};

use crate::error::Result;
use crate::legacy;
pub use crate::load::AnsFields;
use crate::matrix::AnsMatrix;
use crate::model::{FREQ_BYTES, VALUES};

/// The first 8 bytes of every container.
pub const MAGIC: [u8; 8] = *b"CMVANS\0\0";
/// The container version this build writes.
pub const VERSION: u32 = 2;
/// The oldest container version this build reads.
pub const OLDEST_VERSION: u32 = legacy::VERSION;
/// Where the header fields start in a version 2 container.
pub const FIELDS_OFFSET: usize = container::PREFIX_BYTES;

const _: () = assert!(size_of::<AnsFields>() == 32);

/// The version 2 container: its magic, version, fields and parts.
pub static SPEC: ContainerSpec = ContainerSpec {
    format: "MatVANS",
    magic: MAGIC,
    version: VERSION,
    oldest_version: OLDEST_VERSION,
    fields_bytes: size_of::<AnsFields>(),
    parts: &[
        PartSpec::of::<u16>("frequency table"),
        PartSpec::of::<u32>("offsets"),
        PartSpec::of::<u32>("stream"),
    ],
};

impl AnsMatrix {
    /// The header fields describing this matrix.
    pub fn fields(&self) -> AnsFields {
        // Every size was checked to fit u32 when the matrix was made.
        let [rows, cols, padded_rows, padded_cols] = [
            self.shape.rows(),
            self.shape.cols(),
            self.shape.padded_rows(),
            self.shape.padded_cols(),
        ]
        .map(|v| v as u32);
        AnsFields {
            layout: self.layout.code(),
            precision: self.precision(),
            group: self.group() as u32,
            rows,
            cols,
            padded_rows,
            padded_cols,
            // Checked to fit u32 (at most the padded columns) when the matrix was made.
            segment: self.segment.map_or(0, |s| s as u32),
        }
    }

    /// The container (version 2): prefix, fields, part table, frequencies, offsets and
    /// stream, little-endian, with its CRC.
    pub fn to_bytes(&self) -> Vec<u8> {
        Writer::new(&SPEC, &self.fields())
            .part(self.model.freqs())
            .part(&self.offsets)
            .part(&self.stream)
            .finish()
    }

    /// The bytes of every part of the container and the container's own, from the shape and
    /// the parts' lengths alone: it never decodes. Every part is read by the kernels (the
    /// frequencies as the lookup table built from them).
    pub fn size_breakdown(&self) -> SizeBreakdown {
        let parts = [
            ("frequency table", FREQ_BYTES as u64),
            ("offsets", 4 * self.offsets.len() as u64),
            ("stream", 4 * self.stream.len() as u64),
        ];
        let total = SPEC.container_bytes(&parts.map(|(_, b)| b));
        parts.into_iter().fold(
            SizeBreakdown::new(self.shape.rows(), self.shape.cols(), total),
            |s, (name, bytes)| s.part(name, bytes, true),
        )
    }

    /// [`AnsMatrix::from_bytes_with`] the default [`Limits`].
    ///
    /// # Errors
    /// As [`AnsMatrix::from_bytes_with`].
    pub fn from_bytes(blob: &[u8]) -> Result<AnsMatrix> {
        Self::from_bytes_with(blob, &Limits::default())
    }

    /// Reads a container written by [`AnsMatrix::to_bytes`] (version 2) or by an older build
    /// (version 1), within `limits`.
    ///
    /// Checks, in order, before trusting any of it: the container (magic, version, lengths of
    /// every part against the blob's, zero padding and reserved words, CRC-32), the fields
    /// (layout, precision and group, shape and padded shape, segment), the padded element count
    /// against `limits.max_elements` (before any heavy work), the parts' counts, the
    /// frequencies (sum `2^P`) and the offsets (start at 0, multiples of 128 words, at least 128
    /// words per unit (`ans-lanes`: multiples of 4, at least 32), the last equal to the stream
    /// length); then it decodes every unit (work bounded by `limits.max_elements`) to check
    /// that the container is the canonical one of its matrix: padding coded with the padding
    /// value, zero words after each unit's data, each unit's stream ending at the first
    /// multiple of 128 words after them (`ans-lanes`: of 8 16-bit words). A unit whose stream
    /// does not decode is loaded as it is and reported as corrupted where it is decoded (CPU or
    /// GPU).
    ///
    /// # Errors
    /// One error per failed check, naming the offending values: the
    /// [`FormatError`](cmv_format::FormatError)s of the
    /// container (`Truncated`, `TrailingBytes`, `Magic`, `Version`, `Header`, `NonZero`,
    /// `Checksum`), `Code` (layout), `Shape`, `Limit`, `Offset`;
    /// [`AnsError::Precision`](crate::AnsError::Precision),
    /// [`AnsError::Segment`](crate::AnsError::Segment),
    /// [`AnsError::FrequencySum`](crate::AnsError::FrequencySum),
    /// [`AnsError::Padding`](crate::AnsError::Padding).
    pub fn from_bytes_with(blob: &[u8], limits: &Limits) -> Result<AnsMatrix> {
        if container::peek_version(blob, &SPEC)? == legacy::VERSION {
            return legacy::read(blob, limits);
        }
        let mut r = Reader::open(blob, &SPEC)?;
        let f: AnsFields = r.fields();
        let (_, _, units) = f.check(limits)?;
        let freqs: Vec<u16> = r.part(VALUES as u64)?;
        let offsets: Vec<u32> = r.part(units as u64 + 1)?;
        let stream: Vec<u32> = r.next_part();
        f.matrix(limits, &freqs, offsets, stream)
    }
}

#[cfg(test)]
mod tests {
    use cmv_format::FormatError;

    use super::*;
    use crate::{EncodeOptions, Layout, encode};

    #[test]
    fn fields_layout_is_fixed() {
        let w: Vec<i8> = (0..3 * 5).map(|i| (i % 3) as i8).collect();
        let m = encode(&w, 3, 5, &EncodeOptions::default()).unwrap();
        let b = m.to_bytes();
        assert_eq!(&b[..8], b"CMVANS\0\0");
        assert_eq!(&b[8..12], &2u32.to_le_bytes());
        assert_eq!(SPEC.header_bytes(), 112);
        let f = &b[FIELDS_OFFSET..FIELDS_OFFSET + 32];
        let words: Vec<u32> = f
            .chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(words, [0, 7, 4, 3, 5, 3, 128, 0]);
        // Frequencies at 112, offsets at 624 (4 of them), the stream at 640.
        assert_eq!(b.len(), 640 + 4 * 3 * 128);
        assert_eq!(&b[624..628], &0u32.to_le_bytes());
        assert_eq!(&b[628..632], &128u32.to_le_bytes());
    }

    #[test]
    fn lane_fields_carry_the_segment() {
        let w: Vec<i8> = (0..33 * 70).map(|i| (i % 5) as i8).collect();
        let opts = EncodeOptions {
            layout: Layout::WarpLanes,
            lane_segment: Some(32),
            ..EncodeOptions::default()
        };
        let m = encode(&w, 33, 70, &opts).unwrap();
        let b = m.to_bytes();
        let f = &b[FIELDS_OFFSET..FIELDS_OFFSET + 32];
        let words: Vec<u32> = f
            .chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(words, [2, 8, 2, 33, 70, 64, 80, 32]);
        // 2 row groups x 3 segments: 7 offsets at 624, the stream after them (at 656).
        assert_eq!(m.units(), 6);
        assert_eq!(b.len(), 656 + 4 * m.stream().len());
        assert_eq!(&b[624..628], &0u32.to_le_bytes());
        assert_eq!(AnsMatrix::from_bytes(&b).unwrap(), m);
    }

    #[test]
    fn blobs_round_trip_with_their_sizes() {
        let w: Vec<i8> = (0..40 * 70).map(|i| ((i * 37) % 11) as i8 - 5).collect();
        for layout in [Layout::WarpRows, Layout::WarpStripes, Layout::WarpLanes] {
            let opts = EncodeOptions {
                layout,
                ..Default::default()
            };
            let m = encode(&w, 40, 70, &opts).unwrap();
            let blob = m.to_bytes();
            let s = m.size_breakdown();
            assert_eq!(blob.len() as u64, s.container_bytes);
            assert_eq!(blob.len(), m.entropy_report().total_bytes());
            let back = AnsMatrix::from_bytes(&blob).unwrap();
            assert_eq!(back, m);
            assert_eq!(back.size_breakdown(), s);
            assert_eq!(back.entropy_report(), m.entropy_report());
            assert_eq!(back.decode().unwrap(), w);
        }
    }

    #[test]
    fn sizes_of_a_huge_declared_matrix_do_not_decode() {
        // 1 x 4,294,967,168, one value: a stream of 128 words (the states stay 2^32).
        let mut freqs = [0u16; VALUES];
        freqs[128] = 128;
        let mut stream = vec![0u32; 128];
        for l in 0..32 {
            stream[ans_kernels::layout::interleave(2 * l)] = 1;
        }
        let cols = u32::MAX as usize - 127;
        let m = AnsMatrix {
            layout: Layout::WarpRows,
            model: crate::Model::new(7, freqs).unwrap(),
            shape: cmv_format::PaddedShape::new(1, cols, 1, cols),
            segment: None,
            offsets: vec![0, 128],
            stream,
            stats: std::sync::OnceLock::new(),
        };
        m.validate().unwrap();
        let t = std::time::Instant::now();
        let s = m.size_breakdown();
        assert!(t.elapsed() < std::time::Duration::from_millis(100));
        assert!(m.stats.get().is_none(), "size_breakdown decoded the matrix");
        assert_eq!(s.elements(), cols as u64);
        assert_eq!(s.container_bytes, m.to_bytes().len() as u64);
        assert!(m.bits_per_element() < 1e-5);
        assert!(m.stats.get().is_none());
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
            Err(crate::AnsError::Format(FormatError::Offset {
                index: 1,
                ..
            }))
        ));
        let mut bad = m.clone();
        bad.stream.pop();
        assert!(matches!(
            bad.validate(),
            Err(crate::AnsError::Format(FormatError::Offset { .. }))
        ));
        let mut bad = m.clone();
        bad.shape = cmv_format::PaddedShape::new(3, 200, 3, 200);
        assert!(matches!(
            bad.validate(),
            Err(crate::AnsError::Format(FormatError::Header {
                field: "padded_cols",
                found: 200,
                expected: 256
            }))
        ));
        let mut bad = m.clone();
        bad.offsets.push(bad.stream.len() as u32 + 128);
        assert!(matches!(
            bad.validate(),
            Err(crate::AnsError::Format(FormatError::Header {
                field: "offset count",
                ..
            }))
        ));
        let mut bad = m.clone();
        bad.layout = Layout::WarpStripes;
        assert!(bad.validate().is_err());
        // A segment outside ans-lanes, none in ans-lanes, a bad one.
        let mut bad = m;
        bad.segment = Some(128);
        assert!(matches!(
            bad.validate(),
            Err(crate::AnsError::Format(FormatError::NonZero {
                found: 128,
                ..
            }))
        ));
        // One segment (one unit): its end offset is the stream's length.
        let opts = EncodeOptions {
            layout: Layout::WarpLanes,
            lane_segment: Some(208),
            ..EncodeOptions::default()
        };
        let lanes = encode(&w, 3, 200, &opts).unwrap();
        lanes.validate().unwrap();
        for segment in [None, Some(0), Some(24), Some(224)] {
            let mut bad = lanes.clone();
            bad.segment = segment;
            assert!(
                matches!(bad.validate(), Err(crate::AnsError::Segment { .. })),
                "{segment:?}"
            );
        }
        let mut bad = lanes.clone();
        bad.offsets[1] -= 4;
        assert!(matches!(
            bad.validate(),
            Err(crate::AnsError::Format(FormatError::Offset {
                index: 1,
                ..
            }))
        ));
        let mut bad = lanes;
        bad.model = crate::Model::quantize(&crate::model::counts(&w), 9).unwrap();
        assert!(matches!(
            bad.validate(),
            Err(crate::AnsError::Format(FormatError::Header {
                field: "precision",
                found: 9,
                expected: 8
            }))
        ));
    }
}
