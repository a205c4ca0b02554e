//! The container: round trips, version 1 files, and damaged or hostile blobs are errors,
//! never panics.

mod common;

use std::time::{Duration, Instant};

use ans_codec::cmv_format::container::{CRC_OFFSET, Writer, checksum, checksum_at};
use ans_codec::format::{AnsFields, SPEC};
use ans_codec::{AnsError, AnsMatrix, EncodeOptions, FormatError, Layout, Limits, encode};
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

/// The parts of a matrix's container, to be changed and written again with [`build`].
#[derive(Clone)]
struct Parts {
    fields: AnsFields,
    freqs: Vec<u16>,
    offsets: Vec<u32>,
    stream: Vec<u32>,
}

fn parts(m: &AnsMatrix) -> Parts {
    Parts {
        fields: m.fields(),
        freqs: m.model().freqs().to_vec(),
        offsets: m.offsets().to_vec(),
        stream: m.stream().to_vec(),
    }
}

/// A well-formed container (valid prefix, part table, padding and CRC) of `p`.
fn build(p: &Parts) -> Vec<u8> {
    Writer::new(&SPEC, &p.fields)
        .part(&p.freqs)
        .part(&p.offsets)
        .part(&p.stream)
        .finish()
}

/// The container of `m` with its parts changed by `f`.
fn with_parts(m: &AnsMatrix, f: impl FnOnce(&mut Parts)) -> Vec<u8> {
    let mut p = parts(m);
    f(&mut p);
    build(&p)
}

/// The container of `m` with its fields changed by `f`.
fn with_fields(m: &AnsMatrix, f: impl FnOnce(&mut AnsFields)) -> Vec<u8> {
    with_parts(m, |p| f(&mut p.fields))
}

/// Whether `e` is a format error that `ok` accepts.
fn fe(e: &AnsError, ok: fn(&FormatError) -> bool) -> bool {
    match e {
        AnsError::Format(e) => ok(e),
        _ => false,
    }
}

fn format_err(r: ans_codec::Result<AnsMatrix>) -> FormatError {
    match r {
        Err(AnsError::Format(e)) => e,
        other => panic!("expected a format error: {other:?}"),
    }
}

#[test]
fn blobs_round_trip() {
    let cases = [(1, 1), (3, 50), (40, 300), (70, 129)];
    for &(rows, cols) in &cases {
        for layout in LAYOUTS {
            // ans-lanes: 8 bits only, and a few segments instead.
            let settings: &[(Option<u32>, Option<usize>)] = match layout {
                Layout::WarpLanes | Layout::WarpLanesEsc => {
                    &[(None, None), (Some(8), Some(16)), (None, Some(48))]
                }
                _ => &[(None, None), (Some(7), None), (Some(12), None)],
            };
            for &(precision, lane_segment) in settings {
                let o = EncodeOptions {
                    precision,
                    lane_segment,
                    ..opts(layout)
                };
                let (w, m) = matrix(rows, cols, Dist::Laplace(2.0), o);
                let blob = m.to_bytes();
                let back = AnsMatrix::from_bytes(&blob).unwrap();
                assert_eq!(back, m);
                assert_eq!(back.to_bytes(), blob);
                assert_eq!(back.decode().unwrap(), w);
                assert_eq!(back.size_breakdown(), m.size_breakdown());
                assert_eq!(back.entropy_report(), m.entropy_report());
                assert_eq!(blob.len() as u64, m.size_breakdown().container_bytes);
                assert_eq!(blob.len(), m.entropy_report().total_bytes());
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
            let e = format_err(AnsMatrix::from_bytes(&blob[..len]));
            assert!(
                matches!(e, FormatError::Truncated { .. }),
                "length {len}: {e}"
            );
        }
        // Trailing data.
        let mut longer = blob.clone();
        longer.extend_from_slice(&[0; 4]);
        assert!(matches!(
            format_err(AnsMatrix::from_bytes(&longer)),
            FormatError::TrailingBytes { .. }
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
        Err(e @ AnsError::Format(FormatError::Checksum { stored, computed })) => {
            assert_ne!(stored, computed);
            let msg = e.to_string();
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
        let f = m.fields();
        let check =
            |b: Vec<u8>, what: &str, ok: fn(&AnsError) -> bool| match AnsMatrix::from_bytes(&b) {
                Err(e) => assert!(ok(&e), "{what}: unexpected error {e}"),
                Ok(_) => panic!("{what} was accepted"),
            };
        let mut b = blob.clone();
        b[0] = b'X';
        fix_crc(&mut b);
        check(b, "magic", |e| {
            matches!(e, AnsError::Format(FormatError::Magic { .. }))
        });
        for version in [0u32, 3, u32::MAX] {
            let mut b = blob.clone();
            b[8..12].copy_from_slice(&version.to_le_bytes());
            fix_crc(&mut b);
            check(b, "version", |e| {
                matches!(
                    e,
                    AnsError::Format(FormatError::Version {
                        oldest: 1,
                        newest: 2,
                        ..
                    })
                )
            });
        }
        // A version 2 container labelled version 1: the legacy reader refuses it.
        let mut b = blob.clone();
        b[8..12].copy_from_slice(&1u32.to_le_bytes());
        fix_crc(&mut b);
        assert!(AnsMatrix::from_bytes(&b).is_err());
        check(with_fields(&m, |f| f.layout = 7), "layout", |e| {
            matches!(
                e,
                AnsError::Format(FormatError::Code {
                    field: "layout",
                    found: 7,
                    ..
                })
            )
        });
        for p in [0, 6, 13, u32::MAX] {
            check(with_fields(&m, |f| f.precision = p), "precision", |e| {
                matches!(e, AnsError::Precision { .. })
            });
        }
        check(with_fields(&m, |f| f.group = 3), "group", |e| {
            matches!(
                e,
                AnsError::Format(FormatError::Header { field: "group", .. })
            )
        });
        // A precision whose group differs from the stored one (ans-lanes: any other than 8).
        let other_p = if f.precision <= 8 { 10 } else { 7 };
        if layout.is_lanes() {
            for p in [7, 9, 10, 12] {
                check(
                    with_fields(&m, |f| f.precision = p),
                    "lane precision",
                    |e| {
                        matches!(
                            e,
                            AnsError::Format(FormatError::Header {
                                field: "precision",
                                expected: 8,
                                ..
                            })
                        )
                    },
                );
            }
            // The group of an 8-bit model in the other layouts.
            check(with_fields(&m, |f| f.group = 4), "lane group", |e| {
                matches!(
                    e,
                    AnsError::Format(FormatError::Header {
                        field: "group",
                        found: 4,
                        expected: 2
                    })
                )
            });
            // Bad segments: zero, not a multiple of 16, past the padded columns (80).
            assert_eq!((f.segment, f.padded_cols), (64, 80));
            for segment in [0u32, 1, 8, 20, 72 + 1, 96, 1 << 20, u32::MAX] {
                let b = with_fields(&m, |f| f.segment = segment);
                match AnsMatrix::from_bytes(&b) {
                    Err(e @ AnsError::Segment { .. }) => {
                        assert!(
                            matches!(e, AnsError::Segment { segment: s, padded_cols: 80 } if s == segment)
                        );
                        assert!(e.to_string().contains(&segment.to_string()), "{e}");
                    }
                    other => panic!("segment {segment}: {other:?}"),
                }
            }
            // A valid segment other than the encoder's: the offset count no longer matches.
            check(with_fields(&m, |f| f.segment = 16), "other segment", |e| {
                matches!(
                    e,
                    AnsError::Format(FormatError::Header {
                        field: "offsets",
                        ..
                    })
                )
            });
        } else {
            check(
                with_fields(&m, |f| f.precision = other_p),
                "precision vs group",
                |e| {
                    matches!(
                        e,
                        AnsError::Format(FormatError::Header { field: "group", .. })
                    )
                },
            );
            // The segment field is zero outside ans-lanes.
            for segment in [1u32, 16, 64, u32::MAX] {
                let b = with_fields(&m, |f| f.segment = segment);
                assert!(
                    matches!(
                        AnsMatrix::from_bytes(&b),
                        Err(AnsError::Format(FormatError::NonZero {
                            offset: 60,
                            found,
                            ..
                        })) if found == u64::from(segment)
                    ),
                    "segment {segment}"
                );
            }
        }
        for (rows, cols) in [(0, 70), (40, 0), (0, 0)] {
            check(
                with_fields(&m, |f| (f.rows, f.cols) = (rows, cols)),
                "empty shape",
                |e| matches!(e, AnsError::Format(FormatError::Shape { .. })),
            );
        }
        // Huge shapes: inconsistent padded sides, the limits or the offset count, never an
        // allocation or a long decode.
        for (rows, cols) in [
            (u32::MAX, 70),
            (40, u32::MAX),
            (u32::MAX, u32::MAX),
            (1 << 31, 4),
        ] {
            check(
                with_fields(&m, |f| (f.rows, f.cols) = (rows, cols)),
                "huge shape",
                |e| {
                    matches!(
                        e,
                        AnsError::Format(FormatError::Shape { .. } | FormatError::Header { .. })
                    )
                },
            );
        }
        check(
            with_fields(&m, |f| {
                f.rows = u32::MAX;
                f.padded_rows = u32::MAX;
            }),
            "huge rows, consistent",
            |e| {
                matches!(
                    e,
                    AnsError::Format(
                        FormatError::Header { .. }
                            | FormatError::Shape { .. }
                            | FormatError::Limit { .. }
                    )
                )
            },
        );
        check(
            with_fields(&m, |f| f.padded_cols += 4),
            "padded_cols",
            |e| {
                matches!(
                    e,
                    AnsError::Format(FormatError::Header {
                        field: "padded_cols",
                        ..
                    })
                )
            },
        );
        check(
            with_fields(&m, |f| f.padded_rows += 32),
            "padded_rows",
            |e| {
                matches!(
                    e,
                    AnsError::Format(FormatError::Header {
                        field: "padded_rows",
                        ..
                    })
                )
            },
        );
        // Part counts that do not match the fields.
        check(
            with_parts(&m, |p| {
                let last = *p.offsets.last().unwrap();
                p.offsets.push(last + 128);
                p.stream.extend([0; 128]);
            }),
            "offset count",
            |e| {
                matches!(
                    e,
                    AnsError::Format(FormatError::Header {
                        field: "offsets",
                        ..
                    })
                )
            },
        );
        check(
            with_parts(&m, |p| {
                p.freqs.pop();
            }),
            "frequency count",
            |e| {
                matches!(
                    e,
                    AnsError::Format(FormatError::Header {
                        field: "frequency table",
                        found: 255,
                        expected: 256
                    })
                )
            },
        );
        // A stream count that disagrees with the blob's length.
        for delta in [1u64, 128, u64::MAX / 4] {
            let mut b = blob.clone();
            let at = 32 + 32 + 2 * 16;
            let count = u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
            b[at..at + 8].copy_from_slice(&count.wrapping_add(delta).to_le_bytes());
            fix_crc(&mut b);
            check(b, "stream count", |e| {
                fe(e, |e| matches!(e, FormatError::Truncated { .. }))
            });
        }
        // Stream and last offset shrunk together: a unit shorter than 128 words (ans-lanes:
        // shorter than its 32 words of states).
        let n = m.offsets().len();
        let cut = match layout {
            Layout::WarpLanes | Layout::WarpLanesEsc => {
                (m.offsets()[n - 1] - m.offsets()[n - 2]) as usize - 28
            }
            _ => 64,
        };
        check(
            with_parts(&m, |p| {
                p.stream.truncate(p.stream.len() - cut);
                *p.offsets.last_mut().unwrap() -= cut as u32;
            }),
            "short stream",
            |e| fe(e, |e| matches!(e, FormatError::Offset { .. })),
        );
    }
}

#[test]
fn hostile_offsets_and_frequencies_are_errors() {
    for layout in LAYOUTS {
        let (_, m) = matrix(70, 130, Dist::Normal(3.0), opts(layout));
        let units = m.offsets().len() - 1;
        assert!(units >= 2);
        let offset_err = |i: usize, f: fn(u32) -> u32, what: &str| {
            let b = with_parts(&m, |p| p.offsets[i] = f(p.offsets[i]));
            match format_err(AnsMatrix::from_bytes(&b)) {
                FormatError::Offset { rule, index, .. } => {
                    assert_eq!(index, i, "{what}");
                    rule
                }
                other => panic!("{what}: {other:?}"),
            }
        };
        assert!(offset_err(0, |_| 128, "first").contains("first"));
        if layout.is_lanes() {
            // Multiples of 4 words, at least 32 (the states) per unit.
            for off in [1, 2, 3, 6] {
                let b = with_parts(&m, |p| p.offsets[1] += off);
                assert!(
                    matches!(
                        format_err(AnsMatrix::from_bytes(&b)),
                        FormatError::Offset { index: 1, rule, .. } if rule.contains("multiples")
                    ),
                    "+{off}"
                );
            }
            for gap in [0, 4, 28] {
                let b = with_parts(&m, |p| p.offsets[1] = gap);
                assert!(
                    matches!(
                        format_err(AnsMatrix::from_bytes(&b)),
                        FormatError::Offset { index: 1, rule, .. } if rule.contains("at least")
                    ),
                    "gap {gap}"
                );
            }
        } else {
            assert!(offset_err(1, |o| o + 4, "multiple").contains("multiples"));
        }
        assert!(offset_err(1, |_| 0, "empty unit").contains("at least"));
        assert!(offset_err(1, |_| u32::MAX - 127, "past the end").contains("end"));
        assert!(offset_err(units, |o| o + 128, "last").contains("end"));
        // Frequencies that do not sum to 2^P.
        for (i, f) in [(0usize, 1u16), (128, 0), (200, u16::MAX)] {
            let b = with_parts(&m, |p| p.freqs[i] = p.freqs[i].wrapping_add(f));
            if f != 0 {
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
        let b = with_parts(&m, |p| p.freqs.fill(0));
        assert!(matches!(
            AnsMatrix::from_bytes(&b),
            Err(AnsError::FrequencySum { sum: 0, .. })
        ));
    }
}

/// The fields and parts of a `1 x cols` matrix of one value (P = 7, all probability on it):
/// every coder stays in `2^32`, so the stream is 64 state words and 64 zero words whatever
/// `cols` is.
fn constant_row(cols: u32) -> Parts {
    let mut freqs = vec![0u16; 256];
    freqs[128] = 128;
    let mut stream = vec![0u32; 128];
    for l in 0..32 {
        // Logical word 2l (hi = 1) is stored at interleave(2l) = 4 (2l mod 32) + 2l / 32.
        stream[4 * (2 * l % 32) + 2 * l / 32] = 1;
    }
    Parts {
        fields: AnsFields {
            layout: 0,
            precision: 7,
            group: 4,
            rows: 1,
            cols,
            padded_rows: 1,
            padded_cols: cols,
            segment: 0,
        },
        freqs,
        offsets: vec![0, 128],
        stream,
    }
}

/// The version 1 container of `p` (64-byte header, parts back to back, CRC at byte 48).
fn build_v1(p: &Parts) -> Vec<u8> {
    let f = &p.fields;
    let words = [
        u32::from_le_bytes(*b"CMVA"),
        u32::from_le_bytes(*b"NS\0\0"),
        1,
        f.layout,
        f.precision,
        f.group,
        f.rows,
        f.cols,
        f.padded_rows,
        f.padded_cols,
        p.offsets.len() as u32,
        p.stream.len() as u32,
        0,
        0,
        0,
        0,
    ];
    let mut b: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    b.extend(p.freqs.iter().flat_map(|v| v.to_le_bytes()));
    b.extend(p.offsets.iter().flat_map(|v| v.to_le_bytes()));
    b.extend(p.stream.iter().flat_map(|v| v.to_le_bytes()));
    let crc = checksum_at(&b, 48);
    b[48..52].copy_from_slice(&crc.to_le_bytes());
    b
}

#[test]
fn a_tiny_container_declaring_a_huge_matrix_is_refused_quickly() {
    // The fuzzer's case: 1,096 bytes (version 1) declaring 1 x 4,294,967,168.
    let huge = constant_row(u32::MAX - 127);
    let v1 = build_v1(&huge);
    assert_eq!(v1.len(), 1096);
    for blob in [v1, build(&huge)] {
        let t = Instant::now();
        let e = format_err(AnsMatrix::from_bytes(&blob));
        assert!(
            matches!(
                e,
                FormatError::Limit {
                    field: "max_elements",
                    needed: 4_294_967_168,
                    ..
                }
            ),
            "{e}"
        );
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    }
    // The same shape of a modest size loads (and decodes to its one value) within the
    // limits, and is refused by tighter ones.
    let small = constant_row(1 << 16);
    for blob in [build_v1(&small), build(&small)] {
        let m = AnsMatrix::from_bytes(&blob).unwrap();
        assert_eq!(m.decode().unwrap(), vec![0; 1 << 16]);
        assert_eq!(m.to_bytes(), build(&small));
        let tight = Limits {
            max_elements: 1 << 15,
            ..Limits::default()
        };
        assert!(matches!(
            format_err(AnsMatrix::from_bytes_with(&blob, &tight)),
            FormatError::Limit { .. }
        ));
    }
}

#[test]
fn sizes_come_from_the_header_and_offsets() {
    let small = constant_row(1 << 16);
    let m = AnsMatrix::from_bytes(&build(&small)).unwrap();
    let s = m.size_breakdown();
    assert_eq!(s.container_bytes, build(&small).len() as u64);
    assert_eq!(
        (
            s.bytes_of("frequency table"),
            s.bytes_of("offsets"),
            s.bytes_of("stream")
        ),
        (Some(512), Some(8), Some(512))
    );
    assert_eq!(s.kernel_bytes(), 512 + 8 + 512);
    assert_eq!(s.elements(), 1 << 16);
}

#[test]
fn non_canonical_streams_are_refused() {
    // A constant row: logical words 64..128 of its stream are padding.
    let p = constant_row(128);
    AnsMatrix::from_bytes(&build(&p)).unwrap();
    // A flipped padding word, the CRC made valid again: refused, not loaded as the same
    // matrix.
    let blob = build(&p);
    let stream_at = blob.len() - 4 * 128;
    for logical in [64usize, 100, 127] {
        let physical = 4 * (logical % 32) + logical / 32;
        let mut b = blob.clone();
        b[stream_at + 4 * physical] ^= 0x10;
        fix_crc(&mut b);
        assert!(
            matches!(
                format_err(AnsMatrix::from_bytes(&b)),
                FormatError::NonZero { offset, found: 0x10, .. } if offset == physical as u64
            ),
            "logical word {logical}"
        );
    }
    // The same in a version 1 container.
    let mut b = build_v1(&p);
    let at = b.len() - 4 * 128 + 4 * (4 * 4 + 3);
    b[at] = 1;
    let crc = checksum_at(&b, 48);
    b[48..52].copy_from_slice(&crc.to_le_bytes());
    assert!(matches!(
        format_err(AnsMatrix::from_bytes(&b)),
        FormatError::NonZero { .. }
    ));
    // An extra block of zero words after a unit's stream.
    let mut q = p.clone();
    q.stream.extend([0; 128]);
    q.offsets[1] = 256;
    assert!(matches!(
        format_err(AnsMatrix::from_bytes(&build(&q))),
        FormatError::Offset { index: 1, .. }
    ));
    // A padding element coded with another value than the padding value: a 1 x 128 matrix
    // whose last column is not the padding value, declared 1 x 127.
    let mut w = vec![0i8; 128];
    w[127] = 5;
    let m = encode(&w, 1, 128, &EncodeOptions::default()).unwrap();
    let b = with_fields(&m, |f| f.cols = 127);
    assert!(matches!(
        AnsMatrix::from_bytes(&b),
        Err(AnsError::Padding {
            row: 0,
            col: 127,
            found: 5,
            expected: 0
        })
    ));
}

/// A lane matrix whose unit `u` is replaced by `f(words)` (the offsets after it moved).
fn with_lane_unit(m: &AnsMatrix, u: usize, f: impl FnOnce(&mut Vec<u32>)) -> Vec<u8> {
    with_parts(m, |p| {
        let (lo, hi) = (p.offsets[u] as usize, p.offsets[u + 1] as usize);
        let mut unit = p.stream[lo..hi].to_vec();
        f(&mut unit);
        let delta = unit.len() as i64 - (hi - lo) as i64;
        p.stream.splice(lo..hi, unit);
        for o in &mut p.offsets[u + 1..] {
            *o = (i64::from(*o) + delta) as u32;
        }
    })
}

/// A damaged lane container (its CRC made valid again) is refused at load, or loads and its
/// unit `u` is reported as corrupted by every decode (`true`), or is the valid container of
/// another matrix (`false`: ANS has no redundancy to spare, e.g. a flip between two values
/// of frequency 1 in adjacent slots); it never decodes to the original values `w`, never
/// panics.
fn lane_damage_is_detected(b: &[u8], w: &[i8], u: usize, what: &str) -> bool {
    let m = match AnsMatrix::from_bytes(b) {
        Err(AnsError::Format(FormatError::NonZero { .. } | FormatError::Offset { .. })) => {
            return true;
        }
        Err(AnsError::Padding { .. }) => return true,
        Err(e) => panic!("{what}: unexpected load error {e}"),
        Ok(m) => m,
    };
    // Sizes and reports come back whatever the stream holds.
    let _ = (m.size_breakdown(), m.entropy_report());
    let x = sample(Dist::Uniform, m.cols(), 1);
    match m.decode() {
        Err(AnsError::Corrupted {
            unit: "lane unit",
            index,
            ..
        }) => {
            assert_eq!(index, u, "{what}");
            assert!(
                matches!(
                    m.gemv_reference(&x, 1.0),
                    Err(AnsError::Corrupted { index, .. }) if index == u
                ),
                "{what}"
            );
            true
        }
        Ok(v) => {
            assert!(v != w, "{what}: decoded to the original values");
            let (acc, _) = m.gemv_reference(&x, 1.0).unwrap();
            assert_eq!(
                acc,
                common::dense_gemv(&v, m.rows(), m.cols(), &x),
                "{what}"
            );
            assert_eq!(AnsMatrix::from_bytes(&m.to_bytes()).unwrap(), m, "{what}");
            false
        }
        Err(e) => panic!("{what}: unexpected decode error {e}"),
    }
}

#[test]
fn damaged_lane_units_are_detected() {
    let o = EncodeOptions {
        lane_segment: Some(48),
        ..opts(Layout::WarpLanes)
    };
    // 2 row groups x 3 segments (the last one 16 columns).
    let (w, m) = matrix(50, 100, Dist::Laplace(3.0), o);
    assert_eq!((m.segments(), m.units()), (3, 6));
    assert_eq!(
        AnsMatrix::from_bytes(&m.to_bytes())
            .unwrap()
            .decode()
            .unwrap(),
        w
    );
    let (mut flips, mut detected) = (0, 0);
    for u in 0..m.units() {
        let len = (m.offsets()[u + 1] - m.offsets()[u]) as usize;
        assert!(len > 32, "unit {u} has data");
        // Truncated by a block of 4 words (8 16-bit words): the stream runs dry.
        let b = with_lane_unit(&m, u, |s| s.truncate(len - 4));
        assert!(
            lane_damage_is_detected(&b, &w, u, &format!("unit {u} truncated")),
            "unit {u} truncated"
        );
        // Extended by a block of zero words, or of other words: not where the data ends.
        for fill in [0u32, 0x0001_0001, u32::MAX] {
            let b = with_lane_unit(&m, u, |s| s.extend([fill; 4]));
            assert!(
                matches!(
                    format_err(AnsMatrix::from_bytes(&b)),
                    FormatError::Offset { index, .. } if index == u + 1
                ),
                "unit {u} extended with {fill:#x}"
            );
        }
        // Flipped bits: in the states (16-bit words 0, 1 and 63), in the first data word, and
        // in every word of the last block (data or padding).
        let mut positions = vec![0usize, 1, 63, 64];
        positions.extend(2 * len - 8..2 * len);
        for k in positions {
            for bit in [0, 7, 15] {
                let b = with_lane_unit(&m, u, |s| s[k / 2] ^= 1 << (16 * (k % 2) + bit));
                let what = format!("unit {u} 16-bit word {k} bit {bit}");
                flips += 1;
                if lane_damage_is_detected(&b, &w, u, &what) {
                    detected += 1;
                }
            }
        }
    }
    println!("{detected} of {flips} bit flips detected without the CRC");
    assert!(detected * 20 >= flips * 19, "{detected} of {flips}");
}

#[test]
fn non_canonical_lane_streams_are_refused() {
    // A one-unit matrix whose stream ends in zero 16-bit padding words.
    let (rows, cols) = (32, 16);
    let (m, data) = (0..)
        .find_map(|seed| {
            let w = sample(Dist::Normal(3.0), rows * cols, seed);
            let m = encode(&w, rows, cols, &opts(Layout::WarpLanes)).unwrap();
            let data = m.entropy_report().payload_bytes / 2;
            (!data.is_multiple_of(8)).then_some((m, data))
        })
        .unwrap();
    let end = 64 + data;
    assert_eq!(m.stream().len(), end.next_multiple_of(8) / 2);
    for k in end..end.next_multiple_of(8) {
        let b = with_parts(&m, |p| p.stream[k / 2] ^= 0x40 << (16 * (k % 2)));
        assert!(
            matches!(
                format_err(AnsMatrix::from_bytes(&b)),
                FormatError::NonZero { offset, found: 0x40, .. } if offset == (k / 2) as u64
            ),
            "padding word {k}"
        );
    }
    // An extra block of zero words after the unit's stream.
    let b = with_parts(&m, |p| {
        p.stream.extend([0; 4]);
        p.offsets[1] += 4;
    });
    assert!(matches!(
        format_err(AnsMatrix::from_bytes(&b)),
        FormatError::Offset { index: 1, .. }
    ));
    // A padding element coded with another value than the padding value: a 32 x 16 matrix whose
    // last column holds a 5, declared 32 x 15.
    let mut w = vec![0i8; rows * cols];
    w[15] = 5;
    let m = encode(&w, rows, cols, &opts(Layout::WarpLanes)).unwrap();
    let b = with_fields(&m, |f| f.cols = 15);
    assert!(matches!(
        AnsMatrix::from_bytes(&b),
        Err(AnsError::Padding {
            row: 0,
            col: 15,
            found: 5,
            expected: 0
        })
    ));
    // Version 1 never holds ans-lanes: the legacy reader refuses layout 2.
    let mut p = constant_row(128);
    p.fields.layout = 2;
    assert!(matches!(
        format_err(AnsMatrix::from_bytes(&build_v1(&p))),
        FormatError::Code {
            field: "layout",
            found: 2,
            ..
        }
    ));
}

#[test]
fn version_1_files_still_load() {
    let data = |name: &str| {
        std::fs::read(format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    };
    let want: Vec<i8> = data("v1-matrix.i8").iter().map(|&b| b as i8).collect();
    assert_eq!(want.len(), 37 * 150);
    for (file, layout) in [
        ("v1-rows.cmvans", Layout::WarpRows),
        ("v1-stripes.cmvans", Layout::WarpStripes),
    ] {
        let v1 = data(file);
        assert_eq!(&v1[8..12], &1u32.to_le_bytes(), "{file}");
        let m = AnsMatrix::from_bytes(&v1).unwrap();
        assert_eq!(
            (m.rows(), m.cols(), m.layout()),
            (37, 150, layout),
            "{file}"
        );
        assert_eq!(m.decode().unwrap(), want, "{file}");
        let v2 = m.to_bytes();
        assert_eq!(&v2[..8], b"CMVANS\0\0");
        assert_eq!(&v2[8..12], &2u32.to_le_bytes(), "{file}");
        let back = AnsMatrix::from_bytes(&v2).unwrap();
        assert_eq!(back, m, "{file}");
        assert_eq!(back.to_bytes(), v2, "{file}");
        // Damaged version 1 files are refused.
        let mut bad = v1.clone();
        bad[200] ^= 1;
        assert!(matches!(
            format_err(AnsMatrix::from_bytes(&bad)),
            FormatError::Checksum { .. }
        ));
        assert!(matches!(
            format_err(AnsMatrix::from_bytes(&v1[..v1.len() - 1])),
            FormatError::Truncated { .. }
        ));
    }
}

/// Loading and decoding a matrix whose stream was damaged (with a valid CRC) return cleanly;
/// whether the damage was found (by the load's checks or the decode) or the decode differs.
fn decode_cleanly(b: &[u8], w: &[i8]) -> bool {
    let m = match AnsMatrix::from_bytes(b) {
        Ok(m) => m,
        Err(AnsError::Format(FormatError::NonZero { .. } | FormatError::Offset { .. })) => {
            return true;
        }
        Err(AnsError::Padding { .. }) => return true,
        Err(e) => panic!("unexpected load error {e}"),
    };
    let x = vec![1i8; m.cols()];
    let _ = m.gemv_reference(&x, 1.0);
    let _ = m.size_breakdown();
    let _ = m.entropy_report();
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
        let precisions: &[Option<u32>] = match layout {
            Layout::WarpLanes | Layout::WarpLanesEsc => &[None, Some(8)],
            _ => &[Some(7), Some(8), Some(12)],
        };
        for &precision in precisions {
            let o = EncodeOptions {
                precision,
                lane_segment: Some(64),
                ..opts(layout)
            };
            let (w, m) = matrix(45, 260, Dist::Laplace(3.0), o);
            let blob = m.to_bytes();
            let stream_at = blob.len() - 4 * m.stream().len();
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
            // Damage in the zero padding of a stream is refused by the load; most damage is
            // caught.
            println!(
                "{} {precision:?}: {detected}/{trials} damaged",
                layout.name()
            );
        }
        // Whole streams of garbage.
        let (w, m) = matrix(33, 200, Dist::Normal(4.0), opts(layout));
        let blob = m.to_bytes();
        let stream_at = blob.len() - 4 * m.stream().len();
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
                    let b = with_parts(&m, |p| p.offsets[1] = new);
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
