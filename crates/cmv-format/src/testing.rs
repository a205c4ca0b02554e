//! A format-agnostic test harness for [`CompressedMatrix`] (feature `testing`).
//!
//! Every format's matrix promises the same things (see the trait's contract): one canonical
//! container per matrix, loads that never panic and stay within [`Limits`], sizes that add
//! up. The functions here check those promises for any `M: CompressedMatrix`:
//!
//! * [`round_trip`]: a matrix survives `container_bytes -> from_container` with the same
//!   shape, sizes, bytes and reference products.
//! * [`check_hostile_bytes`]: `from_container` on arbitrary bytes either refuses them or
//!   yields a matrix whose container is exactly those bytes and whose reference product
//!   runs.
//! * [`check_mutations`]: seeded mutations of a valid container (bit flips, byte sets,
//!   truncations, extensions, inserted and deleted ranges, header words set to edge values),
//!   each checked twice: as it is (it must be refused: the CRC no longer matches) and with the
//!   CRC re-fixed (it goes through [`check_hostile_bytes`], so the mutation reaches the
//!   format's own checks).
//! * [`check_fuzz_mutation`] and [`seeded_matrix`]: the same checks driven by a fuzzer's
//!   bytes (the cargo-fuzz targets in `fuzz/` are a few lines over these).
//!
//! A broken promise panics with a message naming the format, the mutation and the blob (in
//! hex when it is small); everything else comes back as a report of what was checked.

use std::any::TypeId;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use crate::container::{CRC_OFFSET, PREFIX_BYTES, checksum_at};
use crate::{CompressedMatrix, Limits};

/// The limits of hostile loads: small enough that a fuzzer stays fast (a loaded matrix's
/// reference product touches at most `2^22` weights), large enough for every matrix the
/// format tests build.
pub const HOSTILE_LIMITS: Limits = Limits {
    max_elements: 1 << 22,
    max_alloc_bytes: 256 << 20,
};

/// Blobs up to this many bytes are printed in hex in a failure message.
const HEX_MAX: usize = 1024;

// ---------------------------------------------------------------------------------------------
// Seeded values.

/// A small seeded generator (SplitMix64): the same seed gives the same values on every
/// machine, with no dependency.
#[derive(Clone, Debug)]
pub struct SeededRng(u64);

impl SeededRng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x853c_49e6_748f_ea9b)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
        }
    }

    /// A value in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A roughly normal value (sum of four uniforms, scaled to unit variance).
    pub fn normal(&mut self) -> f64 {
        let s: f64 = (0..4).map(|_| self.unit()).sum();
        (s - 2.0) * 3f64.sqrt()
    }
}

/// Element types the harness can fill with seeded values: weights for [`seeded_matrix`],
/// inputs for reference products.
///
/// Integers are small and bell-shaped (as quantized weights are), with an occasional extreme
/// value; floats are roughly normal with an occasional large one (an outlier) and are always
/// finite.
pub trait Sample: Copy {
    /// One value.
    fn sample(rng: &mut SeededRng) -> Self;
}

fn sample_int(rng: &mut SeededRng, min: i64, max: i64) -> i64 {
    match rng.below(64) {
        0 => min,
        1 => max,
        2 => rng.below((max - min + 1) as u64) as i64 + min,
        _ => ((rng.normal() * 6.0).round() as i64).clamp(min, max),
    }
}

fn sample_float(rng: &mut SeededRng) -> f64 {
    let v = rng.normal();
    if rng.below(64) == 0 { v * 16.0 } else { v }
}

macro_rules! sample_ints {
    ($($t:ty),*) => {$(
        impl Sample for $t {
            fn sample(rng: &mut SeededRng) -> Self {
                sample_int(rng, <$t>::MIN as i64, <$t>::MAX as i64) as $t
            }
        }
    )*};
}

sample_ints!(i8, u8, i16, u16, i32, u32);

/// Small bell-shaped magnitudes (as the other integers), with an occasional 0, `u64::MAX` or
/// uniform value: products wrap modulo 2^64, and the harness only compares CPU outputs with
/// themselves.
impl Sample for u64 {
    fn sample(rng: &mut SeededRng) -> Self {
        match rng.below(64) {
            0 => 0,
            1 => u64::MAX,
            2 => rng.next_u64(),
            _ => (rng.normal() * 6.0).round().abs() as u64,
        }
    }
}

impl Sample for f32 {
    fn sample(rng: &mut SeededRng) -> Self {
        sample_float(rng) as f32
    }
}

impl Sample for f64 {
    fn sample(rng: &mut SeededRng) -> Self {
        sample_float(rng)
    }
}

impl Sample for half::f16 {
    fn sample(rng: &mut SeededRng) -> Self {
        half::f16::from_f64(sample_float(rng))
    }
}

impl Sample for half::bf16 {
    fn sample(rng: &mut SeededRng) -> Self {
        half::bf16::from_f64(sample_float(rng))
    }
}

/// `n` seeded values.
pub fn seeded_vec<T: Sample>(seed: u64, n: usize) -> Vec<T> {
    let mut rng = SeededRng::new(seed);
    (0..n).map(|_| T::sample(&mut rng)).collect()
}

// ---------------------------------------------------------------------------------------------
// Round trip and hostile bytes.

fn hex(blob: &[u8]) -> String {
    if blob.len() > HEX_MAX {
        return format!("<{} bytes, not printed>", blob.len());
    }
    blob.iter().map(|b| format!("{b:02x}")).collect()
}

fn first_difference(a: &[u8], b: &[u8]) -> String {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => format!(
            "first difference at byte {i} ({:#04x} vs {:#04x})",
            a[i], b[i]
        ),
        None => format!(
            "one is a prefix of the other ({} vs {} bytes)",
            a.len(),
            b.len()
        ),
    }
}

/// The reference product of seeded inputs, printed (outputs need not be `PartialEq`; their
/// `Debug` text is exact for integers and floats alike).
fn reference_text<M: CompressedMatrix>(m: &M, seed: u64, batch: usize) -> Result<String, String>
where
    M::Input: Sample,
{
    let x = seeded_vec::<M::Input>(seed, batch * m.cols());
    match m.reference(&x, batch) {
        Ok(y) => {
            assert_eq!(
                y.len(),
                batch * m.rows(),
                "{}: the reference product of {} vector(s) of a {}x{} matrix has {} outputs",
                M::NAME,
                batch,
                m.rows(),
                m.cols(),
                y.len()
            );
            Ok(format!("{y:?}"))
        }
        Err(e) => Err(e.to_string()),
    }
}

/// Checks the reference product's argument checks: batch 0 and inputs one too long or too
/// short are refused (not panics).
fn check_reference_refusals<M: CompressedMatrix>(m: &M)
where
    M::Input: Sample,
{
    let cols = m.cols();
    let x = seeded_vec::<M::Input>(7, cols + 1);
    assert!(
        m.reference(&x[..cols], 0).is_err(),
        "{}: a reference product of batch 0 was accepted",
        M::NAME
    );
    assert!(
        m.reference(&x, 1).is_err(),
        "{}: a reference product with {} inputs for {} columns was accepted",
        M::NAME,
        cols + 1,
        cols
    );
    if cols > 0 {
        assert!(
            m.reference(&x[..cols - 1], 1).is_err(),
            "{}: a reference product with {} inputs for {} columns was accepted",
            M::NAME,
            cols - 1,
            cols
        );
    }
}

/// Checks that `m`'s sizes agree with its container and shape.
fn check_sizes<M: CompressedMatrix>(m: &M, bytes: &[u8]) {
    let sb = m.size_breakdown();
    assert_eq!(
        sb.container_bytes,
        bytes.len() as u64,
        "{}: size_breakdown().container_bytes is not container_bytes().len()",
        M::NAME
    );
    assert_eq!(
        (sb.rows, sb.cols),
        (m.rows(), m.cols()),
        "{}: size_breakdown()'s shape is not the matrix's",
        M::NAME
    );
    assert!(
        sb.parts_bytes() <= sb.container_bytes,
        "{}: the parts of size_breakdown() ({} bytes) exceed the container ({} bytes)",
        M::NAME,
        sb.parts_bytes(),
        sb.container_bytes
    );
}

/// Checks that `m` survives its container: `container_bytes -> from_container` (with
/// [`Limits::DEFAULT`]) gives a matrix of the same shape and sizes, whose container is
/// byte-identical (canonical) and whose reference products of seeded inputs (batch 1 and 2)
/// are identical; `size_breakdown().container_bytes == container_bytes().len()`; the reference
/// product refuses batch 0 and inputs of the wrong length.
///
/// Returns the container.
///
/// # Panics
/// When any of that fails (the message says which).
pub fn round_trip<M: CompressedMatrix>(m: &M) -> Vec<u8>
where
    M::Input: Sample,
{
    let bytes = m.container_bytes();
    check_sizes(m, &bytes);
    let loaded = match M::from_container(&bytes, &Limits::DEFAULT) {
        Ok(l) => l,
        Err(e) => panic!(
            "{}: the container of a {}x{} matrix does not load: {e} ({e:?}); blob {}",
            M::NAME,
            m.rows(),
            m.cols(),
            hex(&bytes)
        ),
    };
    assert_eq!(
        (loaded.rows(), loaded.cols()),
        (m.rows(), m.cols()),
        "{}: the loaded matrix's shape differs",
        M::NAME
    );
    assert_eq!(
        loaded.size_breakdown(),
        m.size_breakdown(),
        "{}: the loaded matrix's size breakdown differs",
        M::NAME
    );
    let again = loaded.container_bytes();
    assert!(
        again == bytes,
        "{}: the loaded matrix's container differs from the one it was loaded from \
         (not canonical): {}",
        M::NAME,
        first_difference(&again, &bytes)
    );
    for (seed, batch) in [(1, 1), (2, 2)] {
        let a = reference_text(m, seed, batch);
        let b = reference_text(&loaded, seed, batch);
        assert!(
            a.is_ok(),
            "{}: the reference product of a {}x{} matrix (batch {batch}) failed: {}",
            M::NAME,
            m.rows(),
            m.cols(),
            a.unwrap_err()
        );
        assert!(
            a == b,
            "{}: the loaded matrix's reference product (batch {batch}) differs",
            M::NAME
        );
    }
    check_reference_refusals(m);
    check_reference_refusals(&loaded);
    bytes
}

/// What [`check_hostile_bytes`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hostile {
    /// `from_container` refused the bytes; the error's `Debug` text.
    Refused(String),
    /// The bytes loaded as a `rows x cols` matrix (which round-tripped canonically).
    Loaded {
        /// Rows.
        rows: usize,
        /// Columns.
        cols: usize,
        /// Whether the blob was of an older container version (read by the format's legacy
        /// reader; its matrix's container is in the current version).
        upgraded: bool,
        /// Whether the reference product of a seeded vector succeeded (an error is allowed,
        /// a panic is not); `None` when the shape was too large to try (a side above
        /// [`HOSTILE_LIMITS`]' `max_elements`).
        reference_ok: Option<bool>,
    },
}

/// Checks `from_container` (with [`HOSTILE_LIMITS`]) on arbitrary bytes: it must not panic;
/// when it succeeds, the matrix's container must be exactly `data` (canonical), its sizes must
/// agree with it, it must load again, and its reference product of a seeded vector must run
/// without panicking (an error is allowed) and refuse wrong-length inputs.
///
/// A blob of an older container version (bytes 8..12, the version word, differ from those
/// of the matrix's container) is read by the format's legacy reader and comes back in the
/// current version: then that container must load and give itself back, with the same
/// reference product as the legacy blob's matrix.
///
/// # Panics
/// When any of that fails, or (propagated) when the format panics.
pub fn check_hostile_bytes<M: CompressedMatrix>(data: &[u8]) -> Hostile
where
    M::Input: Sample,
{
    let m = match M::from_container(data, &HOSTILE_LIMITS) {
        Ok(m) => m,
        Err(e) => return Hostile::Refused(format!("{e:?}")),
    };
    let bytes = m.container_bytes();
    let upgraded = bytes.get(8..12) != data.get(8..12);
    assert!(
        upgraded || bytes == data,
        "{}: a blob of {} bytes loaded as a {}x{} matrix whose container is different \
         ({} bytes; {}): two blobs load as one matrix (not canonical); loaded blob {}",
        M::NAME,
        data.len(),
        m.rows(),
        m.cols(),
        bytes.len(),
        first_difference(&bytes, data),
        hex(data)
    );
    check_sizes(&m, &bytes);
    let again = match M::from_container(&bytes, &HOSTILE_LIMITS) {
        Ok(again) => again,
        Err(e) => panic!(
            "{}: a loaded matrix's own container does not load again: {e:?}; loaded blob {}",
            M::NAME,
            hex(data)
        ),
    };
    let (rows, cols) = (m.rows(), m.cols());
    let small = |n: usize| n as u64 <= HOSTILE_LIMITS.max_elements;
    let reference_ok = if small(rows) && small(cols) {
        let y = reference_text(&m, 3, 1);
        check_reference_refusals(&m);
        if upgraded {
            let again_bytes = again.container_bytes();
            assert!(
                again_bytes == bytes,
                "{}: the container of a matrix read from an older version is not canonical \
                 ({}); legacy blob {}",
                M::NAME,
                first_difference(&again_bytes, &bytes),
                hex(data)
            );
            assert!(
                reference_text(&again, 3, 1) == y,
                "{}: a matrix read from an older version multiplies differently once \
                 written in the current one; legacy blob {}",
                M::NAME,
                hex(data)
            );
        }
        Some(y.is_ok())
    } else {
        None
    };
    Hostile::Loaded {
        rows,
        cols,
        upgraded,
        reference_ok,
    }
}

// ---------------------------------------------------------------------------------------------
// Mutations.

/// Where a word set by a mutation comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WordValue {
    /// This value.
    Set(u64),
    /// The word's value plus this (wrapping).
    Add(i64),
}

/// One change to a blob. Positions are reduced modulo the blob's length when the mutation is
/// applied (so a mutation applies to any blob, after any other).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mutation {
    /// Flips bit `bit` of byte `pos`.
    FlipBit {
        /// Byte.
        pos: u32,
        /// Bit, 0-7.
        bit: u8,
    },
    /// Sets byte `pos` to `value`.
    SetByte {
        /// Byte.
        pos: u32,
        /// Its new value.
        value: u8,
    },
    /// Keeps the first `len` bytes (modulo the length: always shorter).
    Truncate {
        /// Bytes kept.
        len: u32,
    },
    /// Appends bytes.
    Extend {
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// Inserts bytes before byte `pos`.
    Insert {
        /// Byte.
        pos: u32,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// Deletes `len` bytes from byte `pos` (up to the end).
    Delete {
        /// First byte.
        pos: u32,
        /// Bytes deleted.
        len: u32,
    },
    /// Overwrites the 4-aligned little-endian `u32` at or below `pos`.
    SetU32 {
        /// Byte.
        pos: u32,
        /// The new value.
        value: WordValue,
    },
    /// Overwrites the 8-aligned little-endian `u64` at or below `pos`.
    SetU64 {
        /// Byte.
        pos: u32,
        /// The new value.
        value: WordValue,
    },
    /// Copies `len` bytes from `from` over the bytes at `to` (duplicating a table entry or a
    /// header field elsewhere).
    Copy {
        /// Source byte.
        from: u32,
        /// Destination byte.
        to: u32,
        /// Bytes.
        len: u32,
    },
}

/// Values worth putting in a header word: zero, one, powers of two and their neighbours,
/// the extremes.
const EDGE_U32: [u32; 20] = [
    0,
    1,
    2,
    3,
    4,
    7,
    8,
    15,
    16,
    31,
    32,
    128,
    255,
    256,
    0xffff,
    0x1_0000,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_fffe,
    0xffff_ffff,
];

const EDGE_U64: [u64; 10] = [
    0,
    1,
    0xffff_ffff,
    0x1_0000_0000,
    0x1_0000_0001,
    1 << 40,
    0x7fff_ffff_ffff_ffff,
    0x8000_0000_0000_0000,
    u64::MAX - 1,
    u64::MAX,
];

/// Where mutation parameters come from: a seeded generator or a fuzzer's bytes.
trait Source {
    fn u8(&mut self) -> u8;
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
}

impl Source for SeededRng {
    fn u8(&mut self) -> u8 {
        self.next_u64() as u8
    }
    fn u32(&mut self) -> u32 {
        self.next_u64() as u32
    }
}

/// A fuzzer's bytes, zeros once they run out.
struct Bytes<'a>(&'a [u8]);

impl Source for Bytes<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
}

/// The header bytes a blob announces (bytes 12..16 of the prefix), within `PREFIX_BYTES..=len`.
fn header_len(blob: &[u8]) -> usize {
    let announced = blob.get(12..16).map_or(0, |b| {
        u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize
    });
    announced.clamp(PREFIX_BYTES.min(blob.len()), blob.len())
}

impl Mutation {
    /// Draws a mutation of a blob of `len` bytes whose header (prefix, fields, part table)
    /// has `header` bytes: half of the positions fall in the header.
    fn draw(src: &mut impl Source, len: usize, header: usize) -> Self {
        let kind = src.u8();
        let in_header = kind & 0x80 != 0 && header > 0;
        let span = if in_header { header } else { len.max(1) } as u32;
        let pos = src.u32() % span;
        let small_len = |src: &mut dyn FnMut() -> u8| u32::from(src() % 32) + 1;
        let bytes = |src: &mut dyn Source, n: u32| -> Vec<u8> {
            match src.u8() % 3 {
                0 => vec![0; n as usize],
                1 => vec![0xff; n as usize],
                _ => (0..n).map(|_| src.u8()).collect(),
            }
        };
        let word = |src: &mut dyn Source, edges: &[u64]| -> WordValue {
            match src.u8() % 4 {
                0 | 1 => WordValue::Set(edges[src.u8() as usize % edges.len()]),
                2 => WordValue::Add(i64::from(src.u8() % 17) - 8),
                _ => WordValue::Set(u64::from(src.u32()) | (u64::from(src.u32()) << 32)),
            }
        };
        match kind % 10 {
            0 => Mutation::FlipBit {
                pos,
                bit: src.u8() % 8,
            },
            1 => Mutation::SetByte {
                pos,
                value: src.u8(),
            },
            2 => Mutation::Truncate { len: pos },
            3 => {
                let n = small_len(&mut || src.u8());
                Mutation::Extend {
                    bytes: bytes(src, n),
                }
            }
            4 => {
                let n = small_len(&mut || src.u8());
                Mutation::Insert {
                    pos,
                    bytes: bytes(src, n),
                }
            }
            5 => Mutation::Delete {
                pos,
                len: small_len(&mut || src.u8()),
            },
            6 | 7 => {
                let edges: Vec<u64> = EDGE_U32
                    .iter()
                    .map(|&v| u64::from(v))
                    .chain([
                        len as u64,
                        (len as u64).wrapping_sub(1),
                        len as u64 + 1,
                        header as u64,
                    ])
                    .collect();
                Mutation::SetU32 {
                    pos,
                    value: word(src, &edges),
                }
            }
            8 => {
                let edges: Vec<u64> = EDGE_U64
                    .iter()
                    .copied()
                    .chain([len as u64, len as u64 + 8])
                    .collect();
                Mutation::SetU64 {
                    pos,
                    value: word(src, &edges),
                }
            }
            _ => Mutation::Copy {
                from: src.u32() % span,
                to: pos,
                len: small_len(&mut || src.u8()),
            },
        }
    }

    /// Applies the mutation to `blob`.
    pub fn apply(&self, blob: &mut Vec<u8>) {
        let len = blob.len();
        let at = |pos: u32| pos as usize % len.max(1);
        match self {
            Mutation::FlipBit { pos, bit } if len > 0 => blob[at(*pos)] ^= 1 << (bit % 8),
            Mutation::SetByte { pos, value } if len > 0 => blob[at(*pos)] = *value,
            Mutation::Truncate { len: keep } => blob.truncate(*keep as usize % len.max(1)),
            Mutation::Extend { bytes } => blob.extend_from_slice(bytes),
            Mutation::Insert { pos, bytes } => {
                let p = at(*pos);
                blob.splice(p..p, bytes.iter().copied());
            }
            Mutation::Delete { pos, len: n } if len > 0 => {
                let p = at(*pos);
                blob.drain(p..(p + *n as usize).min(len));
            }
            Mutation::SetU32 { pos, value } if len >= 4 => {
                let p = (*pos as usize % (len - 3)) & !3;
                let old = u32::from_le_bytes(blob[p..p + 4].try_into().expect("4 bytes"));
                let new = match *value {
                    WordValue::Set(v) => v as u32,
                    WordValue::Add(d) => old.wrapping_add(d as u32),
                };
                blob[p..p + 4].copy_from_slice(&new.to_le_bytes());
            }
            Mutation::SetU64 { pos, value } if len >= 8 => {
                let p = (*pos as usize % (len - 7)) & !7;
                let old = u64::from_le_bytes(blob[p..p + 8].try_into().expect("8 bytes"));
                let new = match *value {
                    WordValue::Set(v) => v,
                    WordValue::Add(d) => old.wrapping_add(d as u64),
                };
                blob[p..p + 8].copy_from_slice(&new.to_le_bytes());
            }
            Mutation::Copy { from, to, len: n } if len > 0 => {
                let (f, t) = (at(*from), at(*to));
                let n = (*n as usize).min(len - f).min(len - t);
                blob.copy_within(f..f + n, t);
            }
            _ => {}
        }
    }
}

/// Writes the CRC a container of `blob`'s bytes would have at [`CRC_OFFSET`] (a blob too
/// short to hold it is left as it is).
pub fn fix_crc(blob: &mut [u8]) {
    fix_crc_at(blob, CRC_OFFSET);
}

/// Writes the CRC-32 of `blob` (with the 4 bytes at `crc_offset` taken as zero) at
/// `crc_offset`, as a legacy container stores it (a blob too short is left as it is).
pub fn fix_crc_at(blob: &mut [u8], crc_offset: usize) {
    if blob.len() >= crc_offset + 4 {
        let crc = checksum_at(blob, crc_offset);
        blob[crc_offset..crc_offset + 4].copy_from_slice(&crc.to_le_bytes());
    }
}

/// What one mutated blob did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The mutation left the bytes as they were (the blob loaded, as it must).
    Unchanged,
    /// Refused with the CRC as it was (as it must be).
    RefusedUnfixed,
    /// Refused with the CRC re-fixed.
    RefusedFixed,
    /// Loaded with the CRC re-fixed, as a different valid matrix whose container is the
    /// mutated blob.
    LoadedFixed,
}

/// Checks one mutated container: `mutated` derived from the valid canonical `valid`, with
/// the CRC re-fixed (`crc_fixed`) or not.
///
/// * Identical bytes must load.
/// * Different bytes with the CRC as it was must be refused.
/// * Different bytes with the CRC re-fixed go through [`check_hostile_bytes`]: refused, or
///   loaded as a different matrix whose container is exactly `mutated`.
///
/// # Panics
/// When any of that fails, or (propagated) when the format panics.
pub fn check_mutated<M: CompressedMatrix>(valid: &[u8], mutated: &[u8], crc_fixed: bool) -> Outcome
where
    M::Input: Sample,
{
    check_mutated_why::<M>(valid, mutated, crc_fixed).0
}

/// [`check_mutated`], with the `Debug` text of the error of a refusal with the CRC re-fixed.
fn check_mutated_why<M: CompressedMatrix>(
    valid: &[u8],
    mutated: &[u8],
    crc_fixed: bool,
) -> (Outcome, Option<String>)
where
    M::Input: Sample,
{
    if mutated == valid {
        match check_hostile_bytes::<M>(mutated) {
            Hostile::Loaded { .. } => return (Outcome::Unchanged, None),
            Hostile::Refused(e) => panic!(
                "{}: the valid container no longer loads: {e} (limits too small for it?)",
                M::NAME
            ),
        }
    }
    if !crc_fixed {
        if let Ok(m) = M::from_container(mutated, &HOSTILE_LIMITS) {
            panic!(
                "{}: a mutated container with the CRC as it was loaded (as a {}x{} matrix): the \
                 CRC is not checked, or a legacy reader accepts it; {}; mutated blob {}",
                M::NAME,
                m.rows(),
                m.cols(),
                first_difference(mutated, valid),
                hex(mutated)
            );
        }
        return (Outcome::RefusedUnfixed, None);
    }
    match check_hostile_bytes::<M>(mutated) {
        Hostile::Refused(e) => (Outcome::RefusedFixed, Some(e)),
        Hostile::Loaded { .. } => (Outcome::LoadedFixed, None),
    }
}

/// What [`check_mutations`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MutationReport {
    /// Mutated blobs checked (each mutation twice: with the CRC as it was and re-fixed).
    pub checked: usize,
    /// Mutations that left the bytes as they were.
    pub unchanged: usize,
    /// Refused with the CRC as it was.
    pub refused_unfixed: usize,
    /// Refused with the CRC re-fixed.
    pub refused_fixed: usize,
    /// Loaded with the CRC re-fixed (as different valid matrices).
    pub loaded_fixed: usize,
    /// The errors of the refusals with the CRC re-fixed, by the start of their `Debug` text
    /// (up to the first `{`), with counts: which checks the mutations reached.
    pub refusals: BTreeMap<String, usize>,
}

impl MutationReport {
    fn add(&mut self, outcome: Outcome) {
        self.checked += 1;
        match outcome {
            Outcome::Unchanged => self.unchanged += 1,
            Outcome::RefusedUnfixed => self.refused_unfixed += 1,
            Outcome::RefusedFixed => self.refused_fixed += 1,
            Outcome::LoadedFixed => self.loaded_fixed += 1,
        }
    }
}

/// Runs `check`, adding what was mutated to the message of a panic.
fn with_context<T>(context: impl FnOnce() -> String, check: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(check)) {
        Ok(v) => v,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied());
            match msg {
                Some(msg) => panic!("{msg}\n  while checking {}", context()),
                None => resume_unwind(payload),
            }
        }
    }
}

fn error_kind(debug: &str) -> String {
    debug.split('{').next().unwrap_or(debug).trim().to_string()
}

/// The mutations [`check_mutations`] applies to `valid` before its seeded ones: every
/// 4-aligned `u32` and 8-aligned `u64` word of the header (prefix, fields, part table) set
/// to each edge value and to its neighbours, and every truncation within the header and the
/// first bytes after it.
pub fn header_sweep(valid: &[u8]) -> Vec<Mutation> {
    sweep(valid, header_len(valid))
}

fn sweep(valid: &[u8], header: usize) -> Vec<Mutation> {
    let mut out = Vec::new();
    for pos in (0..header.saturating_sub(3)).step_by(4) {
        let values = EDGE_U32
            .iter()
            .map(|&v| WordValue::Set(v.into()))
            .chain([WordValue::Add(1), WordValue::Add(-1)]);
        for value in values {
            out.push(Mutation::SetU32 {
                pos: pos as u32,
                value,
            });
        }
    }
    for pos in (0..header.saturating_sub(7)).step_by(8) {
        for &v in &EDGE_U64 {
            out.push(Mutation::SetU64 {
                pos: pos as u32,
                value: WordValue::Set(v),
            });
        }
    }
    for keep in 0..(header + 16).min(valid.len()) {
        out.push(Mutation::Truncate { len: keep as u32 });
    }
    out
}

/// Checks a valid canonical container against mutations: first the [`header_sweep`], then
/// `count` seeded mutations (one to four stacked changes each, drawn from `seed`). Each
/// mutated blob is checked twice through [`check_mutated`]: with the CRC as it was (it must
/// be refused unless the bytes did not change) and with the CRC re-fixed at
/// [`CRC_OFFSET`] (it must be refused, or load as a different valid matrix whose container is
/// the mutated blob; never panic).
///
/// # Panics
/// When `valid_blob` does not load within [`HOSTILE_LIMITS`] or is not canonical, and when
/// any check fails (the message names the mutation, its index and the seed).
pub fn check_mutations<M: CompressedMatrix>(
    valid_blob: &[u8],
    seed: u64,
    count: usize,
) -> MutationReport
where
    M::Input: Sample,
{
    mutations_at::<M>(valid_blob, CRC_OFFSET, header_len(valid_blob), seed, count)
}

/// [`check_mutations`] for a container of an older version, read by the format's legacy
/// reader, whose CRC-32 lies at `crc_offset` and whose header has `header_bytes` bytes (the
/// sweep covers them). Loads of mutated blobs are checked as [`check_hostile_bytes`] checks
/// older versions.
///
/// # Panics
/// As [`check_mutations`].
pub fn check_legacy_mutations<M: CompressedMatrix>(
    legacy_blob: &[u8],
    crc_offset: usize,
    header_bytes: usize,
    seed: u64,
    count: usize,
) -> MutationReport
where
    M::Input: Sample,
{
    mutations_at::<M>(legacy_blob, crc_offset, header_bytes, seed, count)
}

fn mutations_at<M: CompressedMatrix>(
    valid_blob: &[u8],
    crc_offset: usize,
    header: usize,
    seed: u64,
    count: usize,
) -> MutationReport
where
    M::Input: Sample,
{
    let header = header.min(valid_blob.len());
    match with_context(
        || "the valid container".into(),
        || check_hostile_bytes::<M>(valid_blob),
    ) {
        Hostile::Loaded { .. } => {}
        Hostile::Refused(e) => panic!(
            "{}: check_mutations needs a valid container that loads within HOSTILE_LIMITS: {e}",
            M::NAME
        ),
    }
    let mut report = MutationReport::default();
    let run = |report: &mut MutationReport, what: &dyn Fn() -> String, muts: &[Mutation]| {
        let mut mutated = valid_blob.to_vec();
        for m in muts {
            m.apply(&mut mutated);
        }
        for crc_fixed in [false, true] {
            let mut blob = mutated.clone();
            if crc_fixed {
                fix_crc_at(&mut blob, crc_offset);
            }
            let (outcome, why) = with_context(
                || format!("{} {muts:?} (CRC re-fixed: {crc_fixed})", what()),
                || check_mutated_why::<M>(valid_blob, &blob, crc_fixed),
            );
            if let Some(e) = why {
                *report.refusals.entry(error_kind(&e)).or_default() += 1;
            }
            report.add(outcome);
        }
    };
    for (i, m) in sweep(valid_blob, header).into_iter().enumerate() {
        run(
            &mut report,
            &|| format!("{}: header sweep mutation {i}:", M::NAME),
            &[m],
        );
    }
    let mut rng = SeededRng::new(seed);
    for i in 0..count {
        let stack = 1 + usize::from(rng.below(4) == 0) * (1 + rng.below(3) as usize);
        let muts: Vec<Mutation> = (0..stack)
            .map(|_| Mutation::draw(&mut rng, valid_blob.len(), header))
            .collect();
        run(
            &mut report,
            &|| format!("{}: seed {seed} mutation {i}:", M::NAME),
            &muts,
        );
    }
    report
}

// ---------------------------------------------------------------------------------------------
// Fuzzing.

/// The mutations a fuzzer's bytes describe: the CRC is re-fixed afterwards unless the first
/// byte is odd; the rest is read as up to 8 mutations (missing bytes read as zero).
pub fn fuzz_mutations(valid: &[u8], ops: &[u8]) -> (Vec<Mutation>, bool) {
    let Some((&flags, rest)) = ops.split_first() else {
        return (Vec::new(), true);
    };
    let mut src = Bytes(rest);
    let header = header_len(valid);
    let mut muts = Vec::new();
    while !src.0.is_empty() && muts.len() < 8 {
        muts.push(Mutation::draw(&mut src, valid.len(), header));
    }
    (muts, flags & 1 == 0)
}

/// Checks a valid canonical container mutated as a fuzzer's bytes say ([`fuzz_mutations`]),
/// through [`check_mutated`].
///
/// # Panics
/// As [`check_mutated`].
pub fn check_fuzz_mutation<M: CompressedMatrix>(valid: &[u8], ops: &[u8]) -> Outcome
where
    M::Input: Sample,
{
    let (muts, crc_fixed) = fuzz_mutations(valid, ops);
    let mut blob = valid.to_vec();
    for m in &muts {
        m.apply(&mut blob);
    }
    if crc_fixed {
        fix_crc(&mut blob);
    }
    check_mutated::<M>(valid, &blob, crc_fixed)
}

/// Bytes of the seed [`seeded_matrix`] reads: rows, columns, encoder variant, values (one
/// byte each).
pub const SEED_BYTES: usize = 4;

/// A small matrix built from a fuzzer's first bytes ([`SEED_BYTES`] of them; missing ones
/// read as zero): `1..=40` rows, `1..=200` columns (at most 4096 weights), seeded weights, and
/// one of [`CompressedMatrix::variants`]. `None` when the format refuses the shape or the
/// weights.
pub fn seeded_matrix<M: CompressedMatrix>(seed: &[u8]) -> Option<M>
where
    M::Weight: Sample,
{
    let b = |i: usize| seed.get(i).copied().unwrap_or(0);
    let rows = 1 + usize::from(b(0)) % 40;
    let cols = (1 + usize::from(b(1)) % 200).min(4096 / rows);
    let variants = M::variants();
    let (_, options) = &variants[usize::from(b(2)) % variants.len()];
    let weights = seeded_vec::<M::Weight>(u64::from(b(3)), rows * cols);
    M::encode_slice(&weights, rows, cols, options).ok()
}

/// The fuzz target `<format>_mutate` in one call: a valid container of the
/// [`seeded_matrix`] of `data`'s first [`SEED_BYTES`], mutated as the rest says, checked.
///
/// # Panics
/// As [`check_mutated`]; also when a seeded matrix does not [`round_trip`].
pub fn fuzz_mutate<M: CompressedMatrix>(data: &[u8]) -> Option<Outcome>
where
    M::Weight: Sample,
    M::Input: Sample,
{
    let (seed, ops) = data.split_at(data.len().min(SEED_BYTES));
    let valid = seeded_container::<M>(seed)?;
    Some(check_fuzz_mutation::<M>(&valid, ops))
}

/// The container of [`seeded_matrix`], remembered (a fuzzer keeps a seed while it mutates
/// the rest of its input; encoding each time would take most of its time).
fn seeded_container<M: CompressedMatrix>(seed: &[u8]) -> Option<Vec<u8>>
where
    M::Weight: Sample,
    M::Input: Sample,
{
    type Cache = HashMap<(TypeId, Vec<u8>), Option<Vec<u8>>>;
    thread_local! {
        static CACHE: RefCell<Cache> = RefCell::new(HashMap::new());
    }
    let key = (TypeId::of::<M>(), seed.to_vec());
    if let Some(hit) = CACHE.with(|c| c.borrow().get(&key).cloned()) {
        return hit;
    }
    // Each new seed's matrix is checked once through `round_trip`.
    let blob = seeded_matrix::<M>(seed).map(|m| round_trip(&m));
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= 4096 {
            c.clear();
        }
        c.insert(key, blob.clone());
    });
    blob
}

/// The fuzz target `<format>_bytes` in one call: `data` through [`check_hostile_bytes`] as it
/// is, then with its CRC re-fixed (so a fuzzer that cannot forge a CRC still reaches the
/// format's checks).
///
/// # Panics
/// As [`check_hostile_bytes`].
pub fn fuzz_bytes<M: CompressedMatrix>(data: &[u8]) -> [Hostile; 2]
where
    M::Input: Sample,
{
    let plain = check_hostile_bytes::<M>(data);
    let mut fixed = data.to_vec();
    fix_crc(&mut fixed);
    [plain, check_hostile_bytes::<M>(&fixed)]
}
