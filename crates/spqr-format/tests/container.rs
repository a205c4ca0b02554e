//! The container: round trips, and damaged or hostile blobs are errors, never panics.

mod common;

use common::{correlated_inputs, weights_with_outliers};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use std::mem::size_of;

use spqr_format::cmv_format::HeaderCode;
use spqr_format::cmv_format::container::{
    CRC_OFFSET, PREFIX_BYTES, Reader, Writer, checksum, peek_version,
};
use spqr_format::container::{SPEC, SpqrFields};
use spqr_format::{
    Calibration, FormatError, Limits, OutlierFormat, QuantizeOptions, SpqrError, SpqrMatrix,
    quantize,
};

/// Bytes before the first part: prefix, fields, part table.
const HEADER_BYTES: usize = PREFIX_BYTES + 24 + 6 * 16;

/// A 17 x 33 matrix with 10% outliers, permuted (every part of the container is there).
fn matrix(permute: bool) -> SpqrMatrix {
    let (rows, cols) = (17, 33);
    let w = weights_with_outliers(rows, cols, 5);
    let x = correlated_inputs(40, cols, 4, 6);
    let opts = QuantizeOptions {
        outlier_fraction: 0.1,
        calibration: Some(Calibration::Inputs { x, samples: 40 }),
        permute,
        ..Default::default()
    };
    quantize(&w, rows, cols, &opts).unwrap()
}

/// Writes a valid CRC into a (modified) blob.
fn fix_crc(blob: &mut [u8]) {
    let crc = checksum(blob);
    blob[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_le_bytes());
}

/// The blob with its SpQR fields changed by `f` and the CRC made valid again.
fn with_fields(blob: &[u8], f: impl FnOnce(&mut SpqrFields)) -> Vec<u8> {
    let mut b = blob.to_vec();
    let at = PREFIX_BYTES..PREFIX_BYTES + size_of::<SpqrFields>();
    let mut h: SpqrFields = bytemuck::pod_read_unaligned(&b[at.clone()]);
    f(&mut h);
    b[at].copy_from_slice(bytemuck::bytes_of(&h));
    fix_crc(&mut b);
    b
}

/// The blob with the element count of part `k` set to `count` and the CRC made valid again.
fn with_count(blob: &[u8], k: usize, count: u64) -> Vec<u8> {
    let at = PREFIX_BYTES + size_of::<SpqrFields>() + 16 * k;
    with_bytes(blob, at, 8, |b| b.copy_from_slice(&count.to_le_bytes()))
}

/// The blob with `len` bytes at `at` changed by `f` and the CRC made valid again.
fn with_bytes(blob: &[u8], at: usize, len: usize, f: impl FnOnce(&mut [u8])) -> Vec<u8> {
    let mut b = blob.to_vec();
    f(&mut b[at..at + len]);
    fix_crc(&mut b);
    b
}

/// Where each part starts in the blob of `m`.
struct Parts {
    dense: usize,
    csr_offsets: usize,
    csr_words: usize,
    ptcsr_offsets: usize,
    ptcsr_words: usize,
    perm: usize,
}

fn parts(m: &SpqrMatrix) -> Parts {
    let blob = m.to_bytes();
    let r = Reader::open(&blob, &SPEC).unwrap();
    let at = |k: usize| r.parts()[k].start as usize;
    Parts {
        dense: at(0),
        csr_offsets: at(1),
        csr_words: at(2),
        ptcsr_offsets: at(3),
        ptcsr_words: at(4),
        perm: at(5),
    }
}

#[test]
fn blobs_round_trip() {
    for permute in [false, true] {
        for &format in OutlierFormat::ALL {
            let mut m = matrix(permute);
            m.set_outlier_format(format);
            let blob = m.to_bytes();
            assert_eq!(peek_version(&blob, &SPEC).unwrap(), 2);
            assert_eq!(SPEC.header_bytes(), HEADER_BYTES);
            assert_eq!(blob.len() as u64, m.size_breakdown().container_bytes);
            let back = SpqrMatrix::from_bytes(&blob).unwrap();
            assert_eq!(back, m);
            assert_eq!(back.outlier_format(), format);
            assert_eq!(back.to_bytes(), blob);
            assert_eq!(back.dequantize(), m.dequantize());
            let stored = u32::from_le_bytes(blob[CRC_OFFSET..CRC_OFFSET + 4].try_into().unwrap());
            assert_eq!(stored, checksum(&blob));
            if permute {
                assert_eq!(blob.len(), parts(&m).perm + 4 * m.cols());
            }
        }
    }
    // 1 x 1 without outliers.
    let m = quantize(&[0.5], 1, 1, &QuantizeOptions::default()).unwrap();
    assert_eq!(SpqrMatrix::from_bytes(&m.to_bytes()).unwrap(), m);
}

#[test]
fn every_truncation_is_an_error() {
    let blob = matrix(true).to_bytes();
    for len in 0..blob.len() {
        let e = SpqrMatrix::from_bytes(&blob[..len]).unwrap_err();
        assert!(
            matches!(
                e,
                SpqrError::Format(FormatError::Truncated { .. } | FormatError::Header { .. })
            ),
            "length {len}: {e}"
        );
    }
    let mut longer = blob.clone();
    longer.extend_from_slice(&[0; 4]);
    assert!(matches!(
        SpqrMatrix::from_bytes(&longer),
        Err(SpqrError::Format(FormatError::TrailingBytes { .. }))
    ));
}

#[test]
fn every_flipped_byte_is_an_error() {
    let blob = matrix(true).to_bytes();
    for pos in 0..blob.len() {
        for mask in [0x01u8, 0x80, 0xff] {
            let mut b = blob.clone();
            b[pos] ^= mask;
            assert!(
                SpqrMatrix::from_bytes(&b).is_err(),
                "byte {pos} ^ {mask:#x} was accepted"
            );
        }
    }
}

#[test]
fn a_wrong_crc_names_both_values() {
    let blob = matrix(false).to_bytes();
    let mut b = blob.clone();
    b[HEADER_BYTES] ^= 1;
    match SpqrMatrix::from_bytes(&b) {
        Err(SpqrError::Format(FormatError::Checksum { stored, computed })) => {
            assert_eq!(stored, checksum(&blob));
            assert_eq!(computed, checksum(&b));
        }
        other => panic!("{other:?}"),
    }
}

/// Whether `e` is the core error `f` picks out.
fn core(e: &SpqrError, f: fn(&FormatError) -> bool) -> bool {
    matches!(e, SpqrError::Format(c) if f(c))
}

#[test]
fn hostile_headers_with_a_valid_crc_are_errors() {
    let m = matrix(true);
    let blob = m.to_bytes();
    let check = |b: Vec<u8>, what: &str, ok: &dyn Fn(&SpqrError) -> bool| {
        let e = SpqrMatrix::from_bytes(&b).unwrap_err();
        assert!(ok(&e), "{what}: {e}");
    };
    check(with_bytes(&blob, 0, 1, |b| b[0] = b'X'), "magic", &|e| {
        core(e, |c| matches!(c, FormatError::Magic { .. }))
    });
    check(with_bytes(&blob, 8, 1, |b| b[0] = 3), "version", &|e| {
        core(e, |c| {
            matches!(
                c,
                FormatError::Version {
                    found: 3,
                    oldest: 1,
                    newest: 2,
                    ..
                }
            )
        })
    });
    // A version 2 body announced as version 1: its 64-byte header does not add up.
    check(with_bytes(&blob, 8, 1, |b| b[0] = 1), "version 1", &|e| {
        matches!(e, SpqrError::Format(_))
    });
    check(
        with_fields(&blob, |h| h.outlier_format = 2),
        "format",
        &|e| core(e, |c| matches!(c, FormatError::Code { found: 2, .. })),
    );
    check(with_fields(&blob, |h| h.reserved = 1), "reserved", &|e| {
        core(e, |c| matches!(c, FormatError::NonZero { found: 1, .. }))
    });
    check(with_fields(&blob, |h| h.rows = 0), "rows 0", &|e| {
        core(e, |c| matches!(c, FormatError::Shape { .. }))
    });
    check(with_fields(&blob, |h| h.cols = 0), "cols 0", &|e| {
        core(e, |c| matches!(c, FormatError::Shape { .. }))
    });
    check(with_fields(&blob, |h| h.cols = 65537), "cols", &|e| {
        matches!(e, SpqrError::TooWide { .. })
    });
    check(with_fields(&blob, |h| h.rows = 40), "rows", &|e| {
        core(e, |c| {
            matches!(
                c,
                FormatError::Header {
                    field: "padded_rows",
                    ..
                }
            )
        })
    });
    check(
        with_fields(&blob, |h| h.padded_cols = 64),
        "padded_cols",
        &|e| {
            core(e, |c| {
                matches!(
                    c,
                    FormatError::Header {
                        field: "padded_cols",
                        ..
                    }
                )
            })
        },
    );
    // The shape's counts against the part table: a wider matrix needs more dense words.
    check(
        with_fields(&blob, |h| {
            h.cols = 60;
            h.padded_cols = 64;
        }),
        "dense count",
        &|e| {
            core(e, |c| {
                matches!(
                    c,
                    FormatError::Header {
                        field: "dense words",
                        ..
                    }
                )
            })
        },
    );
    // Counts far past the blob: refused before any allocation.
    for k in 0..6 {
        check(with_count(&blob, k, u64::MAX / 2), "huge", &|e| {
            core(e, |c| matches!(c, FormatError::Truncated { .. }))
        });
    }
    // Counts that move the parts: the blob no longer adds up, or the offsets no longer fit.
    let csr = m.csr_col_vals().len() as u64;
    check(with_count(&blob, 2, csr - 1), "CSR count", &|e| {
        matches!(e, SpqrError::Format(_))
    });
    // A permutation of the wrong length.
    check(with_count(&blob, 5, 5), "perm count", &|e| {
        matches!(e, SpqrError::Format(_))
    });
    // The limits: the padded weight count is checked before anything is decoded.
    let tight = Limits {
        max_elements: (m.padded_rows() * m.padded_cols()) as u64 - 1,
        ..Limits::DEFAULT
    };
    assert!(matches!(
        SpqrMatrix::from_bytes_with(&blob, &tight),
        Err(SpqrError::Format(FormatError::Limit {
            field: "max_elements",
            ..
        }))
    ));
    let exact = Limits {
        max_elements: (m.padded_rows() * m.padded_cols()) as u64,
        ..Limits::DEFAULT
    };
    assert_eq!(SpqrMatrix::from_bytes_with(&blob, &exact).unwrap(), m);
}

#[test]
fn hostile_bodies_with_a_valid_crc_are_errors() {
    let m = matrix(true);
    assert!(m.outlier_count() > 10);
    let blob = m.to_bytes();
    let p = parts(&m);
    let err = |b: Vec<u8>| SpqrMatrix::from_bytes(&b).unwrap_err();
    // Dense: padding bits, a statistics byte that differs between rows 2f and 2f + 1, NaN
    // statistics (ss's high byte is byte 1, in rows 2 and 3).
    let e = err(with_bytes(&blob, p.dense + 8 * 5 + 7, 1, |b| b[0] |= 0x80));
    assert!(matches!(e, SpqrError::Dense { index: 5, .. }), "{e}");
    let e = err(with_bytes(&blob, p.dense + 8 + 6, 2, |b| b[1] ^= 0x04));
    assert!(matches!(e, SpqrError::Dense { index: 1, .. }), "{e}");
    let e = err(with_bytes(&blob, p.dense + 16, 16, |b| {
        // Rows 2 and 3: statistics byte (bits 54-61) = 0x7e.
        for r in 0..2 {
            let mut w = u64::from_le_bytes(b[8 * r..8 * r + 8].try_into().unwrap());
            w = (w & !(0xffu64 << 54)) | (0x7eu64 << 54);
            b[8 * r..8 * r + 8].copy_from_slice(&w.to_le_bytes());
        }
    }));
    assert!(
        matches!(e, SpqrError::Dense { rule, .. } if rule.contains("finite")),
        "{e}"
    );
    // CSR: offsets, a column past the matrix, a zero value, columns out of order.
    let e = err(with_bytes(&blob, p.csr_offsets, 4, |b| b[0] = 1));
    assert!(
        core(&e, |c| matches!(c, FormatError::Offset { index: 0, .. })),
        "{e}"
    );
    let e = err(with_bytes(&blob, p.csr_words, 4, |b| {
        b[0] = 40;
        b[1] = 0;
    }));
    assert!(
        matches!(
            e,
            SpqrError::Outlier {
                format: "CSR",
                index: 0,
                ..
            }
        ),
        "{e}"
    );
    let e = err(with_bytes(&blob, p.csr_words, 4, |b| {
        b[2] = 0;
        b[3] = 0x80;
    }));
    assert!(
        matches!(e, SpqrError::Outlier { rule, .. } if rule.contains("zero")),
        "{e}"
    );
    let e = err(with_bytes(&blob, p.csr_words, 4, |b| b[3] = 0x7c));
    assert!(
        matches!(e, SpqrError::Outlier { rule, .. } if rule.contains("finite")),
        "{e}"
    );
    // A row with two outliers: swap them.
    let offsets = m.csr_row_offsets();
    let row = (0..offsets.len() - 1)
        .find(|&r| offsets[r + 1] - offsets[r] >= 2)
        .unwrap();
    let at = p.csr_words + 4 * offsets[row] as usize;
    let e = err(with_bytes(&blob, at, 8, |b| {
        let (x, y) = b.split_at_mut(4);
        x.swap_with_slice(y);
    }));
    assert!(
        matches!(e, SpqrError::Outlier { rule, .. } if rule.contains("increase")),
        "{e}"
    );
    // PTCSR: a block that is not a multiple of 16, a changed word, a missing outlier.
    let e = err(with_bytes(&blob, p.ptcsr_offsets + 4, 4, |b| b[0] -= 1));
    assert!(core(&e, |c| matches!(c, FormatError::Offset { .. })), "{e}");
    let e = err(with_bytes(&blob, p.ptcsr_words, 4, |b| b[2] ^= 1));
    assert!(matches!(e, SpqrError::Inconsistent { tile_row: 0 }), "{e}");
    let first = m.ptcsr_col_vals().iter().position(|&w| w != 0).unwrap();
    let e = err(with_bytes(&blob, p.ptcsr_words + 4 * first, 4, |b| {
        b.fill(0)
    }));
    assert!(
        matches!(
            e,
            SpqrError::Inconsistent { .. } | SpqrError::Outlier { .. }
        ),
        "{e}"
    );
    // The permutation: a repeated entry, an entry past cols.
    let e = err(with_bytes(&blob, p.perm, 8, |b| {
        let first: [u8; 4] = b[..4].try_into().unwrap();
        b[4..].copy_from_slice(&first);
    }));
    assert!(matches!(e, SpqrError::Permutation { index: 1, .. }), "{e}");
    let e = err(with_bytes(&blob, p.perm, 4, |b| b[0] = 33));
    assert!(
        matches!(
            e,
            SpqrError::Permutation {
                index: 0,
                value: 33,
                ..
            }
        ),
        "{e}"
    );
}

fn config(cases: u32, seed: u64) -> Config {
    Config {
        cases,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(seed),
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config(256, 0x5e9_0c01))]

    /// Random parts under plausible fields, in a well-formed container with a valid CRC: an
    /// error or a valid matrix, never a panic.
    #[test]
    fn random_blobs_never_panic(
        rows in 1u32..40, cols in 1u32..40, format in 0u32..3,
        dense in prop::collection::vec(any::<u64>(), 0..100),
        words in prop::collection::vec(prop::collection::vec(any::<u32>(), 0..80), 5),
        fill_zero in any::<bool>(),
    ) {
        let f = SpqrFields {
            outlier_format: format,
            rows,
            cols,
            padded_rows: rows.div_ceil(16) * 16,
            padded_cols: cols.div_ceil(16) * 16,
            reserved: 0,
        };
        let zero = |v: &[u32]| if fill_zero { vec![0; v.len()] } else { v.to_vec() };
        let b = Writer::new(&SPEC, &f)
            .part(&dense)
            .part(&zero(&words[0]))
            .part(&zero(&words[1]))
            .part(&zero(&words[2]))
            .part(&zero(&words[3]))
            .part(&zero(&words[4]))
            .finish();
        if let Ok(m) = SpqrMatrix::from_bytes(&b) {
            m.validate().unwrap();
            prop_assert!(m.dequantize().iter().all(|v| v.is_finite()));
        }
    }
}

proptest! {
    #![proptest_config(config(256, 0x5e9_0c02))]

    /// A valid blob with a few body bytes overwritten and the CRC fixed: an error, or a valid
    /// matrix whose decode and product are finite.
    #[test]
    fn damaged_bodies_never_panic(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let m = matrix(true);
        let mut b = m.to_bytes();
        let body = b.len() - HEADER_BYTES;
        for (at, v) in edits {
            b[HEADER_BYTES + at.index(body)] = v;
        }
        fix_crc(&mut b);
        if let Ok(back) = SpqrMatrix::from_bytes(&b) {
            back.validate().unwrap();
            prop_assert!(back.dequantize().iter().all(|v| v.is_finite()));
            let x = vec![half::f16::from_f32(1.5); 2 * back.cols()];
            for &format in OutlierFormat::ALL {
                let y = back.gemv_reference_with(format, &x, 2).unwrap();
                prop_assert!(y.iter().all(|v| v.is_finite()));
            }
        }
    }
}

/// The committed version 1 fixtures (a 40 x 50 matrix written by the first build, CSR and
/// PTCSR) and its dequantized values.
fn v1_fixtures() -> [(OutlierFormat, &'static [u8]); 2] {
    [
        (
            OutlierFormat::Csr,
            include_bytes!("data/v1-csr.cmvspqr").as_slice(),
        ),
        (
            OutlierFormat::Ptcsr,
            include_bytes!("data/v1-ptcsr.cmvspqr").as_slice(),
        ),
    ]
}

#[test]
fn version_1_containers_still_load_and_rewrite_as_version_2() {
    let want: Vec<u32> = include_bytes!("data/v1-dequantized.f32")
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(want.len(), 40 * 50);
    for (format, blob) in v1_fixtures() {
        assert_eq!(peek_version(blob, &SPEC).unwrap(), 1);
        let m = SpqrMatrix::from_bytes(blob).unwrap();
        assert_eq!((m.rows(), m.cols()), (40, 50));
        assert_eq!(m.outlier_format(), format);
        let got: Vec<u32> = m.dequantize().iter().map(|v| v.to_bits()).collect();
        assert_eq!(got, want, "{format:?}: dequantize differs from the fixture");
        let v2 = m.to_bytes();
        assert_eq!(peek_version(&v2, &SPEC).unwrap(), 2);
        Reader::open(&v2, &SPEC).unwrap();
        let back = SpqrMatrix::from_bytes(&v2).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.to_bytes(), v2);
        // The limits hold for version 1 too.
        let tight = Limits {
            max_elements: 48 * 64 - 1,
            ..Limits::DEFAULT
        };
        assert!(matches!(
            SpqrMatrix::from_bytes_with(blob, &tight),
            Err(SpqrError::Format(FormatError::Limit { .. }))
        ));
    }
}

#[test]
fn damaged_version_1_containers_are_errors() {
    for (_, blob) in v1_fixtures() {
        for len in 0..blob.len() {
            assert!(
                SpqrMatrix::from_bytes(&blob[..len]).is_err(),
                "length {len}"
            );
        }
        let mut longer = blob.to_vec();
        longer.push(0);
        assert!(matches!(
            SpqrMatrix::from_bytes(&longer),
            Err(SpqrError::Format(FormatError::TrailingBytes { .. }))
        ));
        for pos in 0..blob.len() {
            for mask in [0x01u8, 0x80] {
                let mut b = blob.to_vec();
                b[pos] ^= mask;
                assert!(
                    SpqrMatrix::from_bytes(&b).is_err(),
                    "byte {pos} ^ {mask:#x} was accepted"
                );
            }
        }
        // A huge count in the header (CRC fixed at its version 1 place, byte 44): refused
        // before any allocation.
        let mut b = blob.to_vec();
        b[32..36].copy_from_slice(&u32::MAX.to_le_bytes());
        let crc = spqr_format::cmv_format::container::checksum_at(&b, 44);
        b[44..48].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(
            SpqrMatrix::from_bytes(&b),
            Err(SpqrError::Format(FormatError::Truncated { .. }))
        ));
    }
}
