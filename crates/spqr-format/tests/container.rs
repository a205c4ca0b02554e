//! The container: round trips, and damaged or hostile blobs are errors, never panics.

mod common;

use common::{correlated_inputs, weights_with_outliers};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use spqr_format::format::{CRC_OFFSET, HEADER_BYTES, SpqrHeader, checksum};
use spqr_format::{Calibration, OutlierFormat, QuantizeOptions, SpqrError, SpqrMatrix, quantize};

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

/// The blob with its header changed by `f` and the CRC made valid again.
fn with_header(blob: &[u8], f: impl FnOnce(&mut SpqrHeader)) -> Vec<u8> {
    let mut b = blob.to_vec();
    let mut h = SpqrHeader::from_bytes(b[..HEADER_BYTES].try_into().unwrap());
    f(&mut h);
    b[..HEADER_BYTES].copy_from_slice(&h.to_bytes());
    fix_crc(&mut b);
    b
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
    let dense = HEADER_BYTES;
    let csr_offsets = dense + 8 * m.dense().len();
    let csr_words = csr_offsets + 4 * m.csr_row_offsets().len();
    let ptcsr_offsets = csr_words + 4 * m.csr_col_vals().len();
    let ptcsr_words = ptcsr_offsets + 4 * m.ptcsr_block_offsets().len();
    let perm = ptcsr_words + 4 * m.ptcsr_col_vals().len();
    Parts {
        dense,
        csr_offsets,
        csr_words,
        ptcsr_offsets,
        ptcsr_words,
        perm,
    }
}

#[test]
fn blobs_round_trip() {
    for permute in [false, true] {
        for format in OutlierFormat::ALL {
            let mut m = matrix(permute);
            m.set_outlier_format(format);
            let blob = m.to_bytes();
            assert_eq!(blob.len(), m.sizes().container_bytes());
            let back = SpqrMatrix::from_bytes(&blob).unwrap();
            assert_eq!(back, m);
            assert_eq!(back.outlier_format(), format);
            assert_eq!(back.to_bytes(), blob);
            assert_eq!(back.dequantize(), m.dequantize());
            let stored = u32::from_le_bytes(blob[CRC_OFFSET..CRC_OFFSET + 4].try_into().unwrap());
            assert_eq!(stored, checksum(&blob));
            assert_eq!(
                blob.len(),
                parts(&m).perm + 4 * m.input_permutation().map_or(0, <[u32]>::len)
            );
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
            matches!(e, SpqrError::Truncated { .. }),
            "length {len}: {e}"
        );
    }
    let mut longer = blob.clone();
    longer.extend_from_slice(&[0; 4]);
    assert!(matches!(
        SpqrMatrix::from_bytes(&longer),
        Err(SpqrError::TrailingBytes { .. })
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
        Err(SpqrError::Checksum { stored, computed }) => {
            assert_eq!(stored, checksum(&blob));
            assert_eq!(computed, checksum(&b));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn hostile_headers_with_a_valid_crc_are_errors() {
    let m = matrix(true);
    let blob = m.to_bytes();
    let check = |b: Vec<u8>, what: &str, ok: fn(&SpqrError) -> bool| {
        let e = SpqrMatrix::from_bytes(&b).unwrap_err();
        assert!(ok(&e), "{what}: {e}");
    };
    check(with_header(&blob, |h| h.magic[0] = b'X'), "magic", |e| {
        matches!(e, SpqrError::Magic { .. })
    });
    check(with_header(&blob, |h| h.version = 2), "version", |e| {
        matches!(
            e,
            SpqrError::Version {
                found: 2,
                supported: 1
            }
        )
    });
    check(
        with_header(&blob, |h| h.outlier_format = 2),
        "format",
        |e| matches!(e, SpqrError::FormatCode { found: 2 }),
    );
    check(with_header(&blob, |h| h.reserved[3] = 1), "reserved", |e| {
        matches!(
            e,
            SpqrError::Header {
                field: "reserved",
                ..
            }
        )
    });
    check(with_header(&blob, |h| h.rows = 0), "rows 0", |e| {
        matches!(e, SpqrError::Shape { .. })
    });
    check(with_header(&blob, |h| h.cols = 0), "cols 0", |e| {
        matches!(e, SpqrError::Shape { .. })
    });
    check(with_header(&blob, |h| h.cols = 65537), "cols", |e| {
        matches!(e, SpqrError::TooWide { .. })
    });
    check(with_header(&blob, |h| h.rows = 40), "rows", |e| {
        matches!(
            e,
            SpqrError::Header {
                field: "padded_rows",
                ..
            }
        )
    });
    check(
        with_header(&blob, |h| h.padded_cols = 64),
        "padded_cols",
        |e| {
            matches!(
                e,
                SpqrError::Header {
                    field: "padded_cols",
                    ..
                }
            )
        },
    );
    check(with_header(&blob, |h| h.perm_len = 5), "perm_len", |e| {
        matches!(
            e,
            SpqrError::Header {
                field: "perm_len",
                ..
            }
        )
    });
    // Sizes far past the blob: refused before any allocation.
    for f in [
        (|h: &mut SpqrHeader| h.outlier_count = u32::MAX) as fn(&mut SpqrHeader),
        |h| h.ptcsr_words = u32::MAX,
        |h| {
            h.rows = u32::MAX - 15;
            h.padded_rows = u32::MAX - 15;
        },
        |h| {
            h.cols = 65536;
            h.padded_cols = 65536;
            h.perm_len = 65536;
        },
    ] {
        check(with_header(&blob, f), "huge", |e| {
            matches!(e, SpqrError::Truncated { .. })
        });
    }
    // Counts that move the parts: the offsets no longer fit.
    check(
        with_header(&blob, |h| {
            h.outlier_count -= 1;
            h.ptcsr_words += 1;
        }),
        "counts",
        |e| matches!(e, SpqrError::Offset { .. }),
    );
    // No permutation where one was written: trailing bytes.
    check(with_header(&blob, |h| h.perm_len = 0), "no perm", |e| {
        matches!(e, SpqrError::TrailingBytes { .. })
    });
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
    assert!(matches!(e, SpqrError::Offset { index: 0, .. }), "{e}");
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
    assert!(matches!(e, SpqrError::Offset { .. }), "{e}");
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

    /// Random bytes after a plausible header, with a valid CRC: an error or a valid matrix,
    /// never a panic.
    #[test]
    fn random_blobs_never_panic(
        rows in 1u32..40, cols in 1u32..40, outliers in 0u32..20, ptcsr in 0u32..64,
        perm in any::<bool>(), format in 0u32..3,
        body in prop::collection::vec(any::<u8>(), 0..4000),
        fill_zero in any::<bool>(),
    ) {
        let h = SpqrHeader {
            magic: spqr_format::format::MAGIC,
            version: 1,
            outlier_format: format,
            rows,
            cols,
            padded_rows: rows.div_ceil(16) * 16,
            padded_cols: cols.div_ceil(16) * 16,
            outlier_count: outliers,
            ptcsr_words: ptcsr,
            perm_len: if perm { cols } else { 0 },
            ..Default::default()
        };
        let mut b = h.to_bytes().to_vec();
        if fill_zero {
            b.extend(std::iter::repeat_n(0u8, body.len()));
        } else {
            b.extend_from_slice(&body);
        }
        fix_crc(&mut b);
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
            for format in OutlierFormat::ALL {
                let y = back.gemv_reference_with(format, &x, 2).unwrap();
                prop_assert!(y.iter().all(|v| v.is_finite()));
            }
        }
    }
}
