//! The container: round trips, and damaged or hostile blobs are errors, never panics.

mod common;

use ans_codec::format::{AnsHeader, CRC_OFFSET, HEADER_BYTES, checksum};
use ans_codec::{AnsError, AnsMatrix, EncodeOptions, Layout, encode};
use common::{Dist, LAYOUTS, sample};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn matrix(rows: usize, cols: usize, dist: Dist, opts: EncodeOptions) -> (Vec<i8>, AnsMatrix) {
    let w = sample(dist, rows * cols, (rows * 1000 + cols) as u64);
    let m = encode(&w, rows, cols, &opts).unwrap();
    (w, m)
}

fn opts(layout: Layout) -> EncodeOptions {
    EncodeOptions {
        layout,
        ..Default::default()
    }
}

/// Writes a valid CRC into a (modified) blob.
fn fix_crc(blob: &mut [u8]) {
    let crc = checksum(blob);
    blob[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_le_bytes());
}

/// The blob with its header changed by `f` and the CRC made valid again.
fn with_header(blob: &[u8], f: impl FnOnce(&mut AnsHeader)) -> Vec<u8> {
    let mut b = blob.to_vec();
    let mut h = AnsHeader::from_bytes(b[..HEADER_BYTES].try_into().unwrap());
    f(&mut h);
    b[..HEADER_BYTES].copy_from_slice(&h.to_bytes());
    fix_crc(&mut b);
    b
}

/// The little-endian `u32` at byte `at`, changed by `f`, the CRC made valid again.
fn with_word(blob: &[u8], at: usize, f: impl FnOnce(u32) -> u32) -> Vec<u8> {
    let mut b = blob.to_vec();
    let w = u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    b[at..at + 4].copy_from_slice(&f(w).to_le_bytes());
    fix_crc(&mut b);
    b
}

const OFFSETS_AT: usize = HEADER_BYTES + 512;

#[test]
fn blobs_round_trip() {
    let cases = [(1, 1), (3, 50), (40, 300), (70, 129)];
    for &(rows, cols) in &cases {
        for layout in LAYOUTS {
            for precision in [None, Some(7), Some(12)] {
                let o = EncodeOptions {
                    precision,
                    ..opts(layout)
                };
                let (w, m) = matrix(rows, cols, Dist::Laplace(2.0), o);
                let blob = m.to_bytes();
                let back = AnsMatrix::from_bytes(&blob).unwrap();
                assert_eq!(back, m);
                assert_eq!(back.to_bytes(), blob);
                assert_eq!(back.decode().unwrap(), w);
                assert_eq!(back.sizes(), m.sizes());
                assert_eq!(blob.len(), m.sizes().total_bytes());
            }
        }
    }
}

#[test]
fn every_truncation_is_an_error() {
    for layout in LAYOUTS {
        let (_, m) = matrix(3, 50, Dist::Normal(2.0), opts(layout));
        let blob = m.to_bytes();
        for len in 0..blob.len() {
            let e = AnsMatrix::from_bytes(&blob[..len]).unwrap_err();
            assert!(matches!(e, AnsError::Truncated { .. }), "length {len}: {e}");
        }
        // Trailing data.
        let mut longer = blob.clone();
        longer.extend_from_slice(&[0; 4]);
        assert!(matches!(
            AnsMatrix::from_bytes(&longer),
            Err(AnsError::TrailingBytes { .. })
        ));
    }
    // A bigger blob, a sample of lengths.
    let (_, m) = matrix(200, 300, Dist::Normal(5.0), opts(Layout::WarpRows));
    let blob = m.to_bytes();
    let mut rng = SmallRng::seed_from_u64(9);
    for _ in 0..300 {
        let len = rng.gen_range(0..blob.len());
        assert!(AnsMatrix::from_bytes(&blob[..len]).is_err(), "length {len}");
    }
    assert!(AnsMatrix::from_bytes(&blob[..blob.len() - 1]).is_err());
}

#[test]
fn every_flipped_byte_is_an_error() {
    for layout in LAYOUTS {
        let (_, m) = matrix(3, 50, Dist::Normal(2.0), opts(layout));
        let blob = m.to_bytes();
        for pos in 0..blob.len() {
            for mask in [0x01u8, 0x80, 0xff] {
                let mut b = blob.clone();
                b[pos] ^= mask;
                let e = AnsMatrix::from_bytes(&b);
                assert!(e.is_err(), "byte {pos} ^ {mask:#x} was accepted");
            }
        }
    }
}

#[test]
fn a_wrong_crc_names_both_values() {
    let (_, m) = matrix(3, 50, Dist::Normal(2.0), opts(Layout::WarpRows));
    let mut blob = m.to_bytes();
    let last = blob.len() - 1;
    blob[last] ^= 1;
    match AnsMatrix::from_bytes(&blob) {
        Err(AnsError::Checksum { stored, computed }) => {
            assert_ne!(stored, computed);
            let msg = AnsError::Checksum { stored, computed }.to_string();
            assert!(msg.contains("CRC") && msg.contains("reload"), "{msg}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn hostile_headers_are_errors() {
    for layout in LAYOUTS {
        let (_, m) = matrix(40, 70, Dist::Normal(2.0), opts(layout));
        let blob = m.to_bytes();
        let h = AnsHeader::from_bytes(blob[..HEADER_BYTES].try_into().unwrap());
        let check =
            |b: Vec<u8>, what: &str, ok: fn(&AnsError) -> bool| match AnsMatrix::from_bytes(&b) {
                Err(e) => assert!(ok(&e), "{what}: unexpected error {e}"),
                Ok(_) => panic!("{what} was accepted"),
            };
        check(with_header(&blob, |h| h.magic[0] = b'X'), "magic", |e| {
            matches!(e, AnsError::Magic { .. })
        });
        check(with_header(&blob, |h| h.version = 2), "version", |e| {
            matches!(e, AnsError::Version { found: 2, .. })
        });
        check(with_header(&blob, |h| h.layout = 7), "layout", |e| {
            matches!(e, AnsError::LayoutCode { found: 7 })
        });
        for p in [0, 6, 13, u32::MAX] {
            check(with_header(&blob, |h| h.precision = p), "precision", |e| {
                matches!(e, AnsError::Precision { .. })
            });
        }
        check(with_header(&blob, |h| h.group = 3), "group", |e| {
            matches!(e, AnsError::Header { field: "group", .. })
        });
        // A precision whose group differs from the stored one.
        let other_p = if h.precision <= 8 { 10 } else { 7 };
        check(
            with_header(&blob, |h| h.precision = other_p),
            "precision vs group",
            |e| matches!(e, AnsError::Header { field: "group", .. }),
        );
        check(with_header(&blob, |h| h.reserved[1] = 1), "reserved", |e| {
            matches!(
                e,
                AnsError::Header {
                    field: "reserved",
                    ..
                }
            )
        });
        for (rows, cols) in [(0, 70), (40, 0), (0, 0)] {
            check(
                with_header(&blob, |h| (h.rows, h.cols) = (rows, cols)),
                "empty shape",
                |e| matches!(e, AnsError::Shape { .. }),
            );
        }
        // Huge shapes: inconsistent padded sides or offset counts, never an allocation.
        for (rows, cols) in [
            (u32::MAX, 70),
            (40, u32::MAX),
            (u32::MAX, u32::MAX),
            (1 << 31, 4),
        ] {
            check(
                with_header(&blob, |h| (h.rows, h.cols) = (rows, cols)),
                "huge shape",
                |e| matches!(e, AnsError::Shape { .. } | AnsError::Header { .. }),
            );
        }
        check(
            with_header(&blob, |h| {
                h.rows = u32::MAX;
                h.padded_rows = u32::MAX;
                h.offset_count = u32::MAX;
            }),
            "huge rows, consistent",
            |e| {
                matches!(
                    e,
                    AnsError::Header { .. } | AnsError::Shape { .. } | AnsError::Truncated { .. }
                )
            },
        );
        check(
            with_header(&blob, |h| h.padded_cols += 4),
            "padded_cols",
            |e| {
                matches!(
                    e,
                    AnsError::Header {
                        field: "padded_cols",
                        ..
                    }
                )
            },
        );
        check(
            with_header(&blob, |h| h.padded_rows += 32),
            "padded_rows",
            |e| {
                matches!(
                    e,
                    AnsError::Header {
                        field: "padded_rows",
                        ..
                    }
                )
            },
        );
        check(
            with_header(&blob, |h| h.offset_count += 1),
            "offset_count",
            |e| {
                matches!(
                    e,
                    AnsError::Header {
                        field: "offset_count",
                        ..
                    }
                )
            },
        );
        for words in [u32::MAX, h.stream_words + 128, h.stream_words - 1] {
            check(
                with_header(&blob, |h| h.stream_words = words),
                "stream_words",
                |e| {
                    matches!(
                        e,
                        AnsError::Truncated { .. } | AnsError::TrailingBytes { .. }
                    )
                },
            );
        }
        // Stream words and the last offset shrunk together, the blob cut to match: a unit
        // shorter than 128 words or offsets past the stream.
        {
            let mut b = with_header(&blob, |h| h.stream_words -= 64);
            b.truncate(b.len() - 256);
            fix_crc(&mut b);
            check(b, "short stream", |e| matches!(e, AnsError::Offset { .. }));
        }
    }
}

#[test]
fn hostile_offsets_and_frequencies_are_errors() {
    for layout in LAYOUTS {
        let (_, m) = matrix(70, 130, Dist::Normal(3.0), opts(layout));
        let blob = m.to_bytes();
        let units = m.offsets().len() - 1;
        assert!(units >= 2);
        let at = |i: usize| OFFSETS_AT + 4 * i;
        let offset_err = |b: Vec<u8>, what: &str| match AnsMatrix::from_bytes(&b) {
            Err(AnsError::Offset { rule, .. }) => rule,
            other => panic!("{what}: {other:?}"),
        };
        assert!(offset_err(with_word(&blob, at(0), |_| 128), "first").contains("first"));
        assert!(offset_err(with_word(&blob, at(1), |o| o + 4), "multiple").contains("multiples"));
        assert!(offset_err(with_word(&blob, at(1), |_| 0), "empty unit").contains("at least"));
        assert!(
            offset_err(with_word(&blob, at(1), |_| u32::MAX - 127), "decreasing")
                .contains("at least")
        );
        assert!(offset_err(with_word(&blob, at(units), |o| o + 128), "last").contains("last"));
        // Frequencies that do not sum to 2^P.
        for (i, f) in [(0usize, 1u16), (128, 0), (200, u16::MAX)] {
            let mut b = blob.clone();
            let at = HEADER_BYTES + 2 * i;
            let old = u16::from_le_bytes([b[at], b[at + 1]]);
            b[at..at + 2].copy_from_slice(&old.wrapping_add(f).to_le_bytes());
            fix_crc(&mut b);
            if old.wrapping_add(f) != old {
                assert!(
                    matches!(
                        AnsMatrix::from_bytes(&b),
                        Err(AnsError::FrequencySum { .. })
                    ),
                    "freq {i}"
                );
            }
        }
        // All zero frequencies.
        let mut b = blob.clone();
        b[HEADER_BYTES..OFFSETS_AT].fill(0);
        fix_crc(&mut b);
        assert!(matches!(
            AnsMatrix::from_bytes(&b),
            Err(AnsError::FrequencySum { sum: 0, .. })
        ));
    }
}

/// Decoding a matrix whose stream was damaged (with a valid CRC) returns cleanly.
fn decode_cleanly(b: &[u8], w: &[i8]) -> bool {
    let Ok(m) = AnsMatrix::from_bytes(b) else {
        return false;
    };
    let x = vec![1i8; m.cols()];
    let _ = m.gemv_reference(&x, 1.0);
    let _ = m.sizes();
    match m.decode() {
        Ok(v) => {
            assert_eq!(v.len(), w.len());
            v != w
        }
        Err(AnsError::Corrupted { .. }) => true,
        Err(e) => panic!("unexpected error {e}"),
    }
}

#[test]
fn damaged_streams_decode_safely() {
    let mut rng = SmallRng::seed_from_u64(0xbad);
    for layout in LAYOUTS {
        for precision in [Some(7), Some(8), Some(12)] {
            let o = EncodeOptions {
                precision,
                ..opts(layout)
            };
            let (w, m) = matrix(45, 260, Dist::Laplace(3.0), o);
            let blob = m.to_bytes();
            let stream_at = OFFSETS_AT + 4 * m.offsets().len();
            let words = m.stream().len();
            let mut detected = 0;
            let trials = 150;
            for t in 0..trials {
                let mut b = blob.clone();
                // One to three words, random values or bit flips, anywhere in the stream.
                for _ in 0..1 + t % 3 {
                    let at = stream_at + 4 * rng.gen_range(0..words);
                    let v: u32 = if t % 2 == 0 {
                        rng.r#gen()
                    } else {
                        u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
                            ^ (1 << rng.gen_range(0..32))
                    };
                    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
                }
                fix_crc(&mut b);
                if decode_cleanly(&b, &w) {
                    detected += 1;
                }
            }
            // Damage in the zero padding of a stream is harmless; most damage is caught.
            println!(
                "{} {precision:?}: {detected}/{trials} damaged",
                layout.name()
            );
        }
        // Whole streams of garbage.
        let (w, m) = matrix(33, 200, Dist::Normal(4.0), opts(layout));
        let blob = m.to_bytes();
        let stream_at = OFFSETS_AT + 4 * m.offsets().len();
        for _ in 0..20 {
            let mut b = blob.clone();
            rng.fill(&mut b[stream_at..]);
            fix_crc(&mut b);
            assert!(decode_cleanly(&b, &w));
        }
        // Offsets that stay valid but cut the streams elsewhere.
        if m.offsets().len() > 2 {
            let o1 = m.offsets()[1];
            for new in [128, o1 + 128] {
                if new != o1 && new < m.offsets()[2] {
                    let b = with_word(&blob, OFFSETS_AT + 4, |_| new);
                    assert!(decode_cleanly(&b, &w));
                }
            }
        }
    }
}

#[test]
fn validate_accepts_what_the_encoder_makes() {
    for layout in LAYOUTS {
        let (_, m) = matrix(5, 7, Dist::Uniform, opts(layout));
        m.validate().unwrap();
        AnsMatrix::from_bytes(&m.to_bytes())
            .unwrap()
            .validate()
            .unwrap();
    }
}
