//! The one container every format stores its matrices in.
//!
//! A container is one little-endian blob:
//!
//! | bytes | what |
//! | --- | --- |
//! | 0..8 | the format's magic |
//! | 8..12 | version (`u32`) |
//! | 12..16 | header bytes: prefix, fields and part table (`u32`) |
//! | 16..20 | CRC-32 (IEEE) of the whole blob with these 4 bytes zero (`u32`) |
//! | 20..24 | number of parts (`u32`) |
//! | 24..32 | total bytes of the blob (`u64`) |
//! | 32.. | the format's header fields: a `#[repr(C)]` [`Pod`] struct of `u32`/`u64` words, a multiple of 8 bytes |
//! | then | the part table: per part a [`PartEntry`] (element count `u64`, element bytes `u32`, zero `u32`) |
//! | then | the parts, each starting at a multiple of [`PART_ALIGN`] bytes, zero bytes between them, none after the last |
//!
//! [`Writer`] writes one; [`Reader::open`] checks one completely before anything in it is
//! trusted: the prefix against the format's [`ContainerSpec`], every length against the
//! blob's (with overflow-free `u64` arithmetic, before allocating), the padding (zero: a
//! matrix has one canonical container), then the CRC. Each part then comes out as a typed
//! `Vec<T>` whose length is bounded by the blob's, never by an unchecked header field.
//!
//! Containers from before this one (each format's version 1) are read by the format's own
//! legacy reader with the help of [`legacy_parts`].

use std::mem::size_of;

use bytemuck::{Pod, Zeroable};

use crate::{FormatError, Result};

#[cfg(target_endian = "big")]
compile_error!(
    "cmv containers are little-endian and are read by casting: big-endian hosts are not supported"
);

/// Bytes of the common prefix.
pub const PREFIX_BYTES: usize = 32;
/// Where the CRC field lies.
pub const CRC_OFFSET: usize = 16;
/// Every part starts at a multiple of this many bytes.
pub const PART_ALIGN: usize = 8;

/// The common prefix of every container, as stored (little-endian; hosts are little-endian).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct Prefix {
    /// The format's magic.
    pub magic: [u8; 8],
    /// The container version.
    pub version: u32,
    /// Bytes of the prefix, the fields and the part table.
    pub header_bytes: u32,
    /// CRC-32 of the blob with this field zero.
    pub crc32: u32,
    /// Number of parts.
    pub part_count: u32,
    /// Bytes of the whole blob.
    pub total_bytes: u64,
}

const _: () = assert!(size_of::<Prefix>() == PREFIX_BYTES);
const _: () = assert!(std::mem::offset_of!(Prefix, crc32) == CRC_OFFSET);

/// One entry of the part table.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct PartEntry {
    /// Elements in the part.
    pub count: u64,
    /// Bytes per element.
    pub elem_bytes: u32,
    /// Zero.
    pub reserved: u32,
}

const _: () = assert!(size_of::<PartEntry>() == 16);

/// One part a format stores: its name (for errors and `inspect`) and element size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartSpec {
    /// The part's name, e.g. `"stream"`.
    pub name: &'static str,
    /// Bytes per element.
    pub elem_bytes: u32,
}

impl PartSpec {
    /// A part of elements of type `T`.
    pub const fn of<T>(name: &'static str) -> Self {
        Self {
            name,
            elem_bytes: size_of::<T>() as u32,
        }
    }
}

/// What a format's containers look like: its name, magic, the version this build writes, the
/// size of its header fields and its parts, in order.
#[derive(Clone, Copy, Debug)]
pub struct ContainerSpec {
    /// The format's name, for errors.
    pub format: &'static str,
    /// The first 8 bytes.
    pub magic: [u8; 8],
    /// The version written and read through [`Reader::open`].
    pub version: u32,
    /// The oldest version the format still reads (through its legacy reader).
    pub oldest_version: u32,
    /// Bytes of the format's header fields (a multiple of 8).
    pub fields_bytes: usize,
    /// The parts, in the order they are stored.
    pub parts: &'static [PartSpec],
}

impl ContainerSpec {
    /// Bytes of the prefix, fields and part table.
    pub const fn header_bytes(&self) -> usize {
        PREFIX_BYTES + self.fields_bytes + size_of::<PartEntry>() * self.parts.len()
    }

    /// Bytes of a container of this spec whose parts hold `part_bytes` bytes each (in order),
    /// laid out as [`Writer`] lays them out: what `finish().len()` will be.
    pub fn container_bytes(&self, part_bytes: &[u64]) -> u64 {
        part_bytes
            .iter()
            .fold(self.header_bytes() as u64, |end, &bytes| {
                if bytes == 0 {
                    end
                } else {
                    end.next_multiple_of(PART_ALIGN as u64) + bytes
                }
            })
    }

    /// The version error for `found`.
    pub fn version_error(&self, found: u32) -> FormatError {
        FormatError::Version {
            format: self.format,
            found,
            oldest: self.oldest_version,
            newest: self.version,
        }
    }
}

/// The magic and version of a blob, checking only that it starts with `magic`.
///
/// # Errors
/// [`FormatError::Truncated`] for a blob shorter than 12 bytes, [`FormatError::Magic`].
pub fn peek_version(blob: &[u8], spec: &ContainerSpec) -> Result<u32> {
    let Some(head) = blob.first_chunk::<12>() else {
        return Err(FormatError::Truncated {
            what: "header",
            needed: PREFIX_BYTES as u64,
            got: blob.len(),
        });
    };
    let found: [u8; 8] = head[..8].try_into().expect("8 bytes");
    if found != spec.magic {
        return Err(FormatError::Magic {
            format: spec.format,
            found,
            expected: spec.magic,
        });
    }
    Ok(u32::from_le_bytes(head[8..12].try_into().expect("4 bytes")))
}

/// The first `N` bytes of a blob: a (legacy) header to read fields from.
///
/// # Errors
/// [`FormatError::Truncated`] for a blob shorter than `N` bytes.
pub fn head<const N: usize>(blob: &[u8]) -> Result<&[u8; N]> {
    blob.first_chunk::<N>().ok_or(FormatError::Truncated {
        what: "header",
        needed: N as u64,
        got: blob.len(),
    })
}

/// CRC-32 of a blob with the 4 bytes at `crc_offset` taken as zero (a blob too short to hold
/// them is hashed as it is).
pub fn checksum_at(blob: &[u8], crc_offset: usize) -> u32 {
    let mut h = crc32fast::Hasher::new();
    match (blob.get(..crc_offset), blob.get(crc_offset + 4..)) {
        (Some(before), Some(after)) => {
            h.update(before);
            h.update(&[0; 4]);
            h.update(after);
        }
        _ => h.update(blob),
    }
    h.finalize()
}

/// CRC-32 of a container (its CRC field taken as zero).
pub fn checksum(blob: &[u8]) -> u32 {
    checksum_at(blob, CRC_OFFSET)
}

/// Writes a container: the fields, then each part in the order of the spec.
#[derive(Debug)]
pub struct Writer {
    spec: &'static ContainerSpec,
    entries: Vec<PartEntry>,
    fields: Vec<u8>,
    body: Vec<u8>,
}

impl Writer {
    /// A container of `spec` with these header fields.
    ///
    /// # Panics
    /// When `F`'s size is not the spec's `fields_bytes` (a bug in the format, not in data).
    pub fn new<F: Pod>(spec: &'static ContainerSpec, fields: &F) -> Self {
        assert_eq!(
            size_of::<F>(),
            spec.fields_bytes,
            "{}: header fields type does not match the spec",
            spec.format
        );
        assert!(spec.fields_bytes.is_multiple_of(8));
        Self {
            spec,
            entries: Vec::with_capacity(spec.parts.len()),
            fields: bytemuck::bytes_of(fields).to_vec(),
            body: Vec::new(),
        }
    }

    /// Appends the next part.
    ///
    /// # Panics
    /// When there are more parts than the spec has, or `T`'s size differs from the part's
    /// (bugs in the format, not in data).
    pub fn part<T: Pod>(mut self, data: &[T]) -> Self {
        let k = self.entries.len();
        let spec =
            self.spec.parts.get(k).unwrap_or_else(|| {
                panic!("{}: more parts than the spec's {}", self.spec.format, k)
            });
        assert_eq!(
            spec.elem_bytes as usize,
            size_of::<T>(),
            "{}: part {} element size",
            self.spec.format,
            spec.name
        );
        let pad = self.body.len().next_multiple_of(PART_ALIGN) - self.body.len();
        if !data.is_empty() {
            self.body.resize(self.body.len() + pad, 0);
        }
        self.body.extend_from_slice(bytemuck::cast_slice(data));
        self.entries.push(PartEntry {
            count: data.len() as u64,
            elem_bytes: size_of::<T>() as u32,
            reserved: 0,
        });
        self
    }

    /// The finished blob, with its CRC.
    ///
    /// # Panics
    /// When fewer parts were written than the spec has (a bug in the format).
    pub fn finish(self) -> Vec<u8> {
        assert_eq!(
            self.entries.len(),
            self.spec.parts.len(),
            "{}: parts written",
            self.spec.format
        );
        let header = self.spec.header_bytes();
        let total = header + self.body.len();
        let prefix = Prefix {
            magic: self.spec.magic,
            version: self.spec.version,
            header_bytes: header as u32,
            crc32: 0,
            part_count: self.entries.len() as u32,
            total_bytes: total as u64,
        };
        let mut blob = Vec::with_capacity(total);
        blob.extend_from_slice(bytemuck::bytes_of(&prefix));
        blob.extend_from_slice(&self.fields);
        blob.extend_from_slice(bytemuck::cast_slice(&self.entries));
        blob.extend_from_slice(&self.body);
        debug_assert_eq!(blob.len(), total);
        let crc = checksum(&blob);
        blob[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_le_bytes());
        blob
    }
}

/// Where one part lies in a checked container.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartInfo {
    /// Its name.
    pub name: &'static str,
    /// Elements.
    pub count: u64,
    /// Bytes per element.
    pub elem_bytes: u32,
    /// First byte, in the blob.
    pub start: u64,
}

impl PartInfo {
    /// Bytes of the part.
    pub fn bytes(&self) -> u64 {
        self.count * u64::from(self.elem_bytes)
    }
}

/// A checked container: its version, header fields and parts, read in order.
#[derive(Debug)]
pub struct Reader<'a> {
    spec: &'static ContainerSpec,
    blob: &'a [u8],
    parts: Vec<PartInfo>,
    next: usize,
}

impl<'a> Reader<'a> {
    /// Checks `blob` as a container of `spec`'s current version: magic, version, header size
    /// and part count, the part table (element sizes, zero reserved words), every part's
    /// extent against the blob's length, zero padding, total length, and the CRC.
    ///
    /// # Errors
    /// [`FormatError::Truncated`], [`FormatError::Magic`], [`FormatError::Version`],
    /// [`FormatError::Header`], [`FormatError::NonZero`], [`FormatError::TrailingBytes`],
    /// [`FormatError::Checksum`].
    pub fn open(blob: &'a [u8], spec: &'static ContainerSpec) -> Result<Self> {
        let version = peek_version(blob, spec)?;
        if version != spec.version {
            return Err(spec.version_error(version));
        }
        let Some(head) = blob.first_chunk::<PREFIX_BYTES>() else {
            return Err(FormatError::Truncated {
                what: "header",
                needed: PREFIX_BYTES as u64,
                got: blob.len(),
            });
        };
        let prefix: Prefix = bytemuck::pod_read_unaligned(head);
        let header = spec.header_bytes();
        crate::check_field(
            "part_count",
            prefix.part_count.into(),
            spec.parts.len() as u64,
        )?;
        crate::check_field("header_bytes", prefix.header_bytes.into(), header as u64)?;
        if blob.len() < header {
            return Err(FormatError::Truncated {
                what: "header",
                needed: header as u64,
                got: blob.len(),
            });
        }
        let table = &blob[PREFIX_BYTES + spec.fields_bytes..header];
        let mut parts = Vec::with_capacity(spec.parts.len());
        let mut end = header as u64;
        for (k, (raw, ps)) in table
            .chunks_exact(size_of::<PartEntry>())
            .zip(spec.parts)
            .enumerate()
        {
            let e: PartEntry = bytemuck::pod_read_unaligned(raw);
            crate::check_field(ps.name, e.elem_bytes.into(), ps.elem_bytes.into()).map_err(
                |_| FormatError::Header {
                    field: "part element bytes",
                    found: e.elem_bytes.into(),
                    expected: ps.elem_bytes.into(),
                },
            )?;
            if e.reserved != 0 {
                return Err(FormatError::NonZero {
                    what: "reserved word of the part table",
                    offset: (PREFIX_BYTES + spec.fields_bytes + 16 * k + 12) as u64,
                    found: e.reserved.into(),
                });
            }
            // count < 2^64 and elem_bytes < 2^32: checked products, nothing wraps.
            let bytes = e
                .count
                .checked_mul(u64::from(e.elem_bytes))
                .filter(|&b| b <= blob.len() as u64)
                .ok_or(FormatError::Truncated {
                    what: ps.name,
                    needed: u64::MAX,
                    got: blob.len(),
                })?;
            let start = if bytes == 0 {
                end
            } else {
                end.next_multiple_of(PART_ALIGN as u64)
            };
            let part_end = start + bytes;
            if part_end > blob.len() as u64 {
                return Err(FormatError::Truncated {
                    what: ps.name,
                    needed: part_end,
                    got: blob.len(),
                });
            }
            if let Some(i) = blob[end as usize..start as usize]
                .iter()
                .position(|&b| b != 0)
            {
                return Err(FormatError::NonZero {
                    what: "padding between parts",
                    offset: end + i as u64,
                    found: blob[end as usize + i].into(),
                });
            }
            parts.push(PartInfo {
                name: ps.name,
                count: e.count,
                elem_bytes: e.elem_bytes,
                start,
            });
            end = part_end;
        }
        if (blob.len() as u64) != end {
            return Err(FormatError::TrailingBytes {
                expected: end,
                got: blob.len(),
            });
        }
        crate::check_field("total_bytes", prefix.total_bytes, end)?;
        let computed = checksum(blob);
        if prefix.crc32 != computed {
            return Err(FormatError::Checksum {
                stored: prefix.crc32,
                computed,
            });
        }
        Ok(Self {
            spec,
            blob,
            parts,
            next: 0,
        })
    }

    /// The format's header fields.
    ///
    /// # Panics
    /// When `F`'s size is not the spec's `fields_bytes` (a bug in the format).
    pub fn fields<F: Pod>(&self) -> F {
        assert_eq!(size_of::<F>(), self.spec.fields_bytes);
        bytemuck::pod_read_unaligned(
            &self.blob[PREFIX_BYTES..PREFIX_BYTES + self.spec.fields_bytes],
        )
    }

    /// Every part's place and size.
    pub fn parts(&self) -> &[PartInfo] {
        &self.parts
    }

    /// Elements of part `k`.
    pub fn count(&self, k: usize) -> u64 {
        self.parts[k].count
    }

    /// The next part, which must hold `expected` elements.
    ///
    /// # Errors
    /// [`FormatError::Header`] (field: the part's name) when its count differs.
    ///
    /// # Panics
    /// When every part was read already, or `T`'s size differs from the part's (bugs in the
    /// format).
    pub fn part<T: Pod>(&mut self, expected: u64) -> Result<Vec<T>> {
        let p = self.parts[self.next];
        crate::check_field(p.name, p.count, expected)?;
        Ok(self.next_part())
    }

    /// The next part, whatever its count (bounded by the blob's length).
    ///
    /// # Panics
    /// When every part was read already, or `T`'s size differs from the part's (bugs in the
    /// format).
    pub fn next_part<T: Pod>(&mut self) -> Vec<T> {
        let p = self.parts[self.next];
        assert_eq!(size_of::<T>(), p.elem_bytes as usize, "part {}", p.name);
        self.next += 1;
        le_vec(&self.blob[p.start as usize..(p.start + p.bytes()) as usize])
    }
}

/// Checks a legacy (pre-container) blob: a header of `header_bytes`, then `parts` (name,
/// bytes) back to back, nothing after them, a CRC-32 at `crc_offset` of the whole blob with
/// that field zero. Returns each part's bytes.
///
/// # Errors
/// [`FormatError::Truncated`], [`FormatError::TrailingBytes`], [`FormatError::Checksum`].
pub fn legacy_parts<'a>(
    blob: &'a [u8],
    header_bytes: usize,
    crc_offset: usize,
    parts: &[(&'static str, u64)],
) -> Result<Vec<&'a [u8]>> {
    let mut end = header_bytes as u64;
    if (blob.len() as u64) < end {
        return Err(FormatError::Truncated {
            what: "header",
            needed: end,
            got: blob.len(),
        });
    }
    let mut ranges = Vec::with_capacity(parts.len());
    for &(what, bytes) in parts {
        let start = end;
        end = end.checked_add(bytes).ok_or(FormatError::Truncated {
            what,
            needed: u64::MAX,
            got: blob.len(),
        })?;
        if (blob.len() as u64) < end {
            return Err(FormatError::Truncated {
                what,
                needed: end,
                got: blob.len(),
            });
        }
        ranges.push(start as usize..end as usize);
    }
    if blob.len() as u64 != end {
        return Err(FormatError::TrailingBytes {
            expected: end,
            got: blob.len(),
        });
    }
    let stored = u32::from_le_bytes(
        blob[crc_offset..crc_offset + 4]
            .try_into()
            .expect("4 bytes"),
    );
    let computed = checksum_at(blob, crc_offset);
    if stored != computed {
        return Err(FormatError::Checksum { stored, computed });
    }
    Ok(ranges.into_iter().map(|r| &blob[r]).collect())
}

/// Little-endian elements of `T` from bytes (a whole number of them; a rest is ignored).
pub fn le_vec<T: Pod>(bytes: &[u8]) -> Vec<T> {
    let n = bytes.len() / size_of::<T>().max(1);
    let mut v = vec![T::zeroed(); n];
    bytemuck::cast_slice_mut::<T, u8>(&mut v).copy_from_slice(&bytes[..n * size_of::<T>()]);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
    struct Fields {
        rows: u32,
        cols: u32,
    }

    static SPEC: ContainerSpec = ContainerSpec {
        format: "test",
        magic: *b"CMVTEST\0",
        version: 2,
        oldest_version: 1,
        fields_bytes: 8,
        parts: &[
            PartSpec::of::<u16>("halves"),
            PartSpec::of::<u64>("words"),
            PartSpec::of::<u8>("bytes"),
        ],
    };

    fn blob() -> Vec<u8> {
        Writer::new(&SPEC, &Fields { rows: 3, cols: 5 })
            .part(&[1u16, 2, 3])
            .part(&[7u64, 8])
            .part::<u8>(&[9])
            .finish()
    }

    #[test]
    fn layout_is_fixed() {
        let b = blob();
        let header = 32 + 8 + 3 * 16;
        assert_eq!(SPEC.header_bytes(), header);
        // halves at 88 (6 bytes), words at 96 (16), bytes at 112 (1).
        assert_eq!(b.len(), 113);
        assert_eq!(&b[..8], b"CMVTEST\0");
        assert_eq!(&b[8..12], &2u32.to_le_bytes());
        assert_eq!(&b[12..16], &(header as u32).to_le_bytes());
        assert_eq!(&b[16..20], &checksum(&b).to_le_bytes());
        assert_eq!(&b[20..24], &3u32.to_le_bytes());
        assert_eq!(&b[24..32], &113u64.to_le_bytes());
        assert_eq!(&b[32..40], &[3, 0, 0, 0, 5, 0, 0, 0]);
        assert_eq!(&b[40..48], &3u64.to_le_bytes());
        assert_eq!(&b[48..52], &2u32.to_le_bytes());
        assert_eq!(&b[88..94], &[1, 0, 2, 0, 3, 0]);
        assert_eq!(&b[94..96], &[0, 0]);
        assert_eq!(&b[96..104], &7u64.to_le_bytes());
        assert_eq!(b[112], 9);
    }

    #[test]
    fn round_trip() {
        let b = blob();
        let mut r = Reader::open(&b, &SPEC).unwrap();
        assert_eq!(r.fields::<Fields>(), Fields { rows: 3, cols: 5 });
        assert_eq!(r.parts().len(), 3);
        assert_eq!(r.parts()[1].start, 96);
        assert_eq!(r.part::<u16>(3).unwrap(), [1, 2, 3]);
        assert!(matches!(
            r.part::<u64>(3),
            Err(FormatError::Header {
                field: "words",
                found: 2,
                expected: 3
            })
        ));
        assert_eq!(r.next_part::<u64>(), [7, 8]);
        assert_eq!(r.next_part::<u8>(), [9]);
    }

    #[test]
    fn every_truncation_and_extension_is_refused() {
        let b = blob();
        for n in 0..b.len() {
            assert!(
                matches!(
                    Reader::open(&b[..n], &SPEC),
                    Err(FormatError::Truncated { .. } | FormatError::Header { .. })
                ),
                "{n}"
            );
        }
        let mut long = b.clone();
        long.push(0);
        assert!(matches!(
            Reader::open(&long, &SPEC),
            Err(FormatError::TrailingBytes {
                expected: 113,
                got: 114
            })
        ));
    }

    #[test]
    fn every_byte_flip_is_refused() {
        let b = blob();
        for i in 0..b.len() {
            for bit in [0x01u8, 0x80] {
                let mut bad = b.clone();
                bad[i] ^= bit;
                assert!(Reader::open(&bad, &SPEC).is_err(), "byte {i} bit {bit:#x}");
            }
        }
    }

    #[test]
    fn nonzero_padding_is_refused_before_the_crc() {
        let mut b = blob();
        b[94] = 1;
        assert!(matches!(
            Reader::open(&b, &SPEC),
            Err(FormatError::NonZero {
                offset: 94,
                found: 1,
                ..
            })
        ));
    }

    #[test]
    fn header_fields_are_checked() {
        let mut b = blob();
        b[8] = 1;
        assert!(matches!(
            Reader::open(&b, &SPEC),
            Err(FormatError::Version {
                found: 1,
                oldest: 1,
                newest: 2,
                ..
            })
        ));
        let mut b = blob();
        b[0] = b'X';
        assert!(matches!(
            Reader::open(&b, &SPEC),
            Err(FormatError::Magic { .. })
        ));
        // A huge count: refused without allocating.
        let mut b = blob();
        b[40..48].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            Reader::open(&b, &SPEC),
            Err(FormatError::Truncated { what: "halves", .. })
        ));
        let mut b = blob();
        b[48] = 4;
        assert!(matches!(
            Reader::open(&b, &SPEC),
            Err(FormatError::Header { .. })
        ));
    }

    #[test]
    fn container_bytes_match_the_writer() {
        assert_eq!(SPEC.container_bytes(&[6, 16, 1]), blob().len() as u64);
        assert_eq!(SPEC.container_bytes(&[2, 0, 0]), 90);
        assert_eq!(SPEC.container_bytes(&[0, 0, 0]), 88);
    }

    #[test]
    fn empty_parts_take_no_padding() {
        let b = Writer::new(&SPEC, &Fields::default())
            .part::<u16>(&[5])
            .part::<u64>(&[])
            .part::<u8>(&[])
            .finish();
        assert_eq!(b.len(), 88 + 2);
        let mut r = Reader::open(&b, &SPEC).unwrap();
        assert_eq!(r.part::<u16>(1).unwrap(), [5]);
        assert!(r.part::<u64>(0).unwrap().is_empty());
    }

    #[test]
    fn legacy_blobs() {
        let mut b = vec![0u8; 16];
        b.extend_from_slice(&[1, 2, 3, 4, 5, 6]);
        let crc = checksum_at(&b, 8);
        b[8..12].copy_from_slice(&crc.to_le_bytes());
        let parts = legacy_parts(&b, 16, 8, &[("a", 2), ("b", 4)]).unwrap();
        assert_eq!(parts, [&[1u8, 2][..], &[3, 4, 5, 6][..]]);
        assert!(matches!(
            legacy_parts(&b[..20], 16, 8, &[("a", 2), ("b", 4)]),
            Err(FormatError::Truncated {
                what: "b",
                needed: 22,
                got: 20
            })
        ));
        assert!(legacy_parts(&b, 16, 8, &[("a", 2), ("b", u64::MAX)]).is_err());
        assert!(matches!(
            legacy_parts(&b, 16, 8, &[("a", 2)]),
            Err(FormatError::TrailingBytes { .. })
        ));
        b[20] ^= 1;
        assert!(matches!(
            legacy_parts(&b, 16, 8, &[("a", 2), ("b", 4)]),
            Err(FormatError::Checksum { .. })
        ));
        assert_eq!(le_vec::<u16>(&[1, 0, 2, 1]), [1, 0x102]);
        assert_eq!(head::<2>(&b).unwrap(), &[0, 0]);
        assert!(matches!(
            head::<64>(&b),
            Err(FormatError::Truncated {
                needed: 64,
                got: 22,
                ..
            })
        ));
    }
}
