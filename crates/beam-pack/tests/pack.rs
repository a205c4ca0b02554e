//! Pack/unpack round trips for every width and layout, word counts, errors, the container and
//! the reference product.

use beam_pack::{BeamError, BeamOptions, Layout, PackedMatrix, SPEC, native_bits, width_of};
use cmv_format::{CompressedMatrix, FormatError, HeaderCode, Limits};
use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn max_of(bits: u32) -> u64 {
    if bits == 64 {
        u64::MAX
    } else {
        (1 << bits) - 1
    }
}

/// Values of `bits` bits: 0 = random, 1 = all zero, 2 = all max, 3 = mixed extremes.
fn values(seed: u64, n: usize, bits: u32, mode: u8) -> Vec<u64> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let max = max_of(bits);
    (0..n)
        .map(|_| match mode {
            0 => rng.r#gen::<u64>() & max,
            1 => 0,
            2 => max,
            _ => [0, max, 1 & max, max >> 1][rng.gen_range(0..4)],
        })
        .collect()
}

fn fix_crc(blob: &mut [u8]) {
    use cmv_format::container::{CRC_OFFSET, checksum};
    let crc = checksum(blob);
    blob[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_le_bytes());
}

fn expected_words(rows: usize, cols: usize, bits: u32, layout: Layout) -> usize {
    let b = bits as usize;
    match layout {
        Layout::Naive => rows * cols,
        Layout::Tight => (rows * cols * native_bits(bits) as usize).div_ceil(64),
        Layout::Slabs => rows * cols.div_ceil(64 / b),
        Layout::Nogaps => rows * (cols * b).div_ceil(64),
    }
}

fn check(v: &[u64], rows: usize, cols: usize, bits: u32, layout: Layout) {
    let m = PackedMatrix::pack(v, rows, cols, bits, layout).unwrap();
    let ctx = format!("{rows}x{cols} b={bits} {}", layout.name());
    assert_eq!(m.unpack(), v, "{ctx}");
    assert_eq!(
        m.words().len(),
        expected_words(rows, cols, bits, layout),
        "{ctx}"
    );
    assert_eq!(m.get(rows - 1, cols - 1), v.last().copied(), "{ctx}");
    assert_eq!(m.get(rows, 0), None);
    assert_eq!(m.get(0, cols), None);
    let again = PackedMatrix::from_words(rows, cols, bits, layout, m.words().to_vec()).expect(&ctx);
    assert_eq!(again, m, "{ctx}");
    let blob = m.to_bytes();
    let loaded = PackedMatrix::from_bytes(&blob).expect(&ctx);
    assert_eq!(loaded, m, "{ctx}");
    assert_eq!(loaded.to_bytes(), blob, "{ctx}");
    assert_eq!(
        blob.len() as u64,
        m.size_breakdown().container_bytes,
        "{ctx}"
    );
}

#[test]
fn every_width_and_layout_round_trips() {
    let shapes = [(1, 1), (1, 67), (67, 1), (3, 67), (2, 5), (4, 64)];
    for bits in 1..=64 {
        for &layout in Layout::ALL {
            for (k, &(rows, cols)) in shapes.iter().enumerate() {
                for mode in 0..4 {
                    let v = values(u64::from(bits) * 100 + k as u64, rows * cols, bits, mode);
                    check(&v, rows, cols, bits, layout);
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn round_trips(
        bits in 1u32..=64,
        layout in 0usize..4,
        rows in 1usize..6,
        cols in 1usize..90,
        seed in any::<u64>(),
        mode in 0u8..4,
    ) {
        let v = values(seed, rows * cols, bits, mode);
        check(&v, rows, cols, bits, Layout::ALL[layout]);
        // Zero suppression: the smallest width that holds every value.
        let m = PackedMatrix::pack_min_width(&v, rows, cols, Layout::ALL[layout]).unwrap();
        let want = v.iter().map(|&x| width_of(x)).max().unwrap();
        prop_assert_eq!(m.bits(), want);
        prop_assert!(m.bits() <= bits);
        prop_assert_eq!(m.unpack(), v);
    }
}

#[test]
fn native_slices_pack() {
    let a: Vec<u8> = (0..=255).collect();
    let m = PackedMatrix::pack_native(&a, 16, 16, 8, Layout::Slabs).unwrap();
    assert_eq!(
        m.unpack(),
        a.iter().map(|&x| u64::from(x)).collect::<Vec<_>>()
    );
    let b: Vec<u16> = vec![65535, 1, 2, 3, 4, 5];
    let m = PackedMatrix::pack_native(&b, 2, 3, 16, Layout::Nogaps).unwrap();
    assert_eq!(m.get(0, 0), Some(65535));
    let c: Vec<u32> = vec![u32::MAX; 7];
    let m = PackedMatrix::pack_native(&c, 7, 1, 32, Layout::Tight).unwrap();
    assert_eq!(m.words().len(), 4);
    assert!(PackedMatrix::pack_native(&c, 7, 1, 31, Layout::Tight).is_err());
    assert!(matches!(
        PackedMatrix::pack_native(&c, 2, 3, 32, Layout::Tight),
        Err(BeamError::Format(FormatError::Length {
            got: 7,
            expected: 6,
            ..
        }))
    ));
}

#[test]
fn errors_name_what_is_wrong() {
    for bits in [0, 65, 1000] {
        assert!(matches!(
            PackedMatrix::pack(&[0], 1, 1, bits, Layout::Naive),
            Err(BeamError::Width { bits: b }) if b == bits
        ));
    }
    let e = PackedMatrix::pack(&[1, 2, 3, 9, 4, 5], 2, 3, 3, Layout::Nogaps).unwrap_err();
    assert!(
        matches!(
            e,
            BeamError::ValueTooWide {
                index: 3,
                row: 1,
                col: 0,
                value: 9,
                bits: 3,
                needed: 4
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("row 1, column 0"), "{e}");
    assert!(matches!(
        PackedMatrix::pack(&[1, 2, 3], 2, 2, 8, Layout::Naive),
        Err(BeamError::Format(FormatError::Length {
            got: 3,
            expected: 4,
            ..
        }))
    ));
    assert!(matches!(
        PackedMatrix::pack(&[], 0, 3, 8, Layout::Naive),
        Err(BeamError::Format(FormatError::Shape { .. }))
    ));
    assert!(matches!(
        PackedMatrix::pack(&[], 3, 0, 8, Layout::Naive),
        Err(BeamError::Format(FormatError::Shape { .. }))
    ));
    // Non-canonical words: a set unused bit is refused.
    let m = PackedMatrix::pack(&[1, 2, 3], 1, 3, 5, Layout::Slabs).unwrap();
    let mut w = m.words().to_vec();
    w[0] |= 1 << 63;
    assert!(matches!(
        PackedMatrix::from_words(1, 3, 5, Layout::Slabs, w),
        Err(BeamError::Format(FormatError::NonZero { offset: 0, found, .. })) if found == 1 << 63
    ));
    assert!(matches!(
        PackedMatrix::from_words(1, 3, 5, Layout::Slabs, vec![]),
        Err(BeamError::Format(FormatError::Length { .. }))
    ));
}

#[test]
fn container_refuses_damage() {
    for &layout in Layout::ALL {
        let v = values(7, 3 * 67, 13, 0);
        let m = PackedMatrix::pack(&v, 3, 67, 13, layout).unwrap();
        let blob = m.to_bytes();
        // A set padding bit in the last word (every layout has unused high bits at 13 bits).
        let mut bad = blob.clone();
        let last = bad.len() - 1;
        bad[last] |= 0x80;
        fix_crc(&mut bad);
        assert!(
            matches!(
                PackedMatrix::from_bytes(&bad),
                Err(BeamError::Format(FormatError::NonZero { .. }))
            ),
            "{}",
            layout.name()
        );
        // Any byte flip without a fixed CRC is refused.
        for pos in (0..blob.len()).step_by(7) {
            let mut bad = blob.clone();
            bad[pos] ^= 0x10;
            assert!(PackedMatrix::from_bytes(&bad).is_err(), "{pos}");
        }
        assert!(PackedMatrix::from_bytes(&blob[..blob.len() - 8]).is_err());
        assert!(matches!(
            PackedMatrix::from_bytes_with(
                &blob,
                &Limits {
                    max_elements: 10,
                    ..Limits::DEFAULT
                }
            ),
            Err(BeamError::Format(FormatError::Limit { .. }))
        ));
    }
    assert_eq!(SPEC.format, PackedMatrix::NAME);
}

#[test]
fn reference_is_exact_modulo_2_64() {
    let v = values(3, 5 * 9, 64, 0);
    let m = PackedMatrix::encode_slice(&v, 5, 9, &BeamOptions::default()).unwrap();
    let x = values(4, 2 * 9, 64, 0);
    let y = m.reference(&x, 2).unwrap();
    for b in 0..2 {
        for r in 0..5 {
            let want = (0..9).fold(0u64, |a, c| {
                a.wrapping_add(v[r * 9 + c].wrapping_mul(x[b * 9 + c]))
            });
            assert_eq!(y[b * 5 + r], want);
        }
    }
    assert!(m.reference(&x, 0).is_err());
    assert!(m.reference(&x[1..], 2).is_err());
    let small = PackedMatrix::pack(&[1, 2, 3, 4], 2, 2, 3, Layout::Nogaps).unwrap();
    assert_eq!(small.reference(&[5, 6], 1).unwrap(), vec![17, 39]);
    assert_eq!(PackedMatrix::variants().len(), 4);
}
