//! `gemm_reference`: output widths (`sai`, `c2p2`, `maxv`), overflow behaviours (`ovf`,
//! `sat`), output layouts, shapes.

use beam_pack::{
    BeamError, GEMV_MAX_COLS, Layout, OutputWidth, Overflow, PackedMatrix, gemm_reference,
    gemv_reference, output_bits,
};
use proptest::prelude::*;

const LAYOUTS: [Layout; 4] = [Layout::Naive, Layout::Tight, Layout::Slabs, Layout::Nogaps];
const WIDTHS: [OutputWidth; 3] = [OutputWidth::Sai, OutputWidth::C2p2, OutputWidth::Maxv];

fn max_of(bits: u32) -> u64 {
    if bits == 64 {
        u64::MAX
    } else {
        (1 << bits) - 1
    }
}

fn pack(v: &[u64], rows: usize, cols: usize, bits: u32) -> PackedMatrix {
    PackedMatrix::pack(v, rows, cols, bits, Layout::Nogaps).unwrap()
}

fn gemm(a: &PackedMatrix, b: &PackedMatrix, w: OutputWidth, o: Overflow) -> (u32, Vec<u64>) {
    let mut first: Option<PackedMatrix> = None;
    for layout in LAYOUTS {
        let c = gemm_reference(a, b, w, o, layout).unwrap();
        assert_eq!(c.layout(), layout);
        assert_eq!((c.rows(), c.cols()), (a.rows(), b.cols()));
        if let Some(f) = &first {
            assert_eq!(c.bits(), f.bits());
            assert_eq!(c.unpack(), f.unpack(), "{}", layout.name());
        } else {
            first = Some(c);
        }
    }
    let c = first.unwrap();
    (c.bits(), c.unpack())
}

#[test]
fn hand_small_all_widths() {
    // A = [[1, 2], [3, 3]], B = [[3], [3]] (2 bits): C = [9, 18].
    let a = pack(&[1, 2, 3, 3], 2, 2, 2);
    let b = pack(&[3, 3], 2, 1, 2);
    assert_eq!(
        gemm(&a, &b, OutputWidth::Sai, Overflow::Ovf),
        (2, vec![1, 2])
    );
    assert_eq!(
        gemm(&a, &b, OutputWidth::Sai, Overflow::Sat),
        (2, vec![3, 3])
    );
    assert_eq!(
        gemm(&a, &b, OutputWidth::C2p2, Overflow::Ovf),
        (2, vec![1, 2])
    );
    assert_eq!(
        gemm(&a, &b, OutputWidth::C2p2, Overflow::Sat),
        (2, vec![3, 3])
    );
    // bound 18 -> 5 bits; the exact result fits.
    assert_eq!(
        gemm(&a, &b, OutputWidth::Maxv, Overflow::Ovf),
        (5, vec![9, 18])
    );
    assert_eq!(
        gemm(&a, &b, OutputWidth::Maxv, Overflow::Sat),
        (5, vec![9, 18])
    );
}

#[test]
fn c2p2_overflows_its_width() {
    // 200 * 2 + 100 * 1 = 500 > 255 in 8 bits.
    let a = pack(&[200, 100], 1, 2, 8);
    let b = pack(&[2, 1], 2, 1, 8);
    assert_eq!(
        gemm(&a, &b, OutputWidth::C2p2, Overflow::Ovf),
        (8, vec![500 - 256])
    );
    assert_eq!(
        gemm(&a, &b, OutputWidth::C2p2, Overflow::Sat),
        (8, vec![255])
    );
    assert_eq!(gemm(&a, &b, OutputWidth::Maxv, Overflow::Sat).1, vec![500]);
}

#[test]
fn sums_past_2_64_and_2_128() {
    let m = u64::MAX;
    // 3 * (2^64 - 1)^2 > 2^129: the sum passes 2^128.
    let a = pack(&[m, m, m], 1, 3, 64);
    let b = pack(&[m, m, m], 3, 1, 64);
    for w in WIDTHS {
        assert_eq!(
            gemm(&a, &b, w, Overflow::Sat),
            (64, vec![m]),
            "{}",
            w.name()
        );
        // (2^64 - 1)^2 = 1 mod 2^64.
        assert_eq!(
            gemm(&a, &b, w, Overflow::Ovf),
            (64, vec![3]),
            "{}",
            w.name()
        );
    }
    // 2^63 * 2 + 2^63 * 2 = 2^65: ovf 0, sat max; just under: 2^64 - 1 + 0.
    let a = pack(&[1 << 63, 1 << 63, m, 0], 2, 2, 64);
    let b = pack(&[2, 2], 2, 1, 64);
    assert_eq!(
        gemm(&a, &b, OutputWidth::Sai, Overflow::Ovf).1,
        vec![0, m - 1]
    );
    assert_eq!(gemm(&a, &b, OutputWidth::Sai, Overflow::Sat).1, vec![m, m]);
    // A single product past 2^64 with a small output width: clamp, not wrap.
    let a = pack(&[(1 << 40) + 1], 1, 1, 41);
    let b = pack(&[(1 << 40) + 3], 1, 1, 41);
    let exact = ((1u128 << 40) + 1) * ((1u128 << 40) + 3);
    assert_eq!(
        gemm(&a, &b, OutputWidth::Sai, Overflow::Sat),
        (41, vec![max_of(41)])
    );
    assert_eq!(
        gemm(&a, &b, OutputWidth::Sai, Overflow::Ovf),
        (41, vec![(exact as u64) & max_of(41)])
    );
    assert_eq!(
        gemm(&a, &b, OutputWidth::Maxv, Overflow::Sat),
        (64, vec![m])
    );
    assert_eq!(
        gemm(&a, &b, OutputWidth::Maxv, Overflow::Ovf),
        (64, vec![exact as u64])
    );
}

#[test]
fn c2p2_and_sai_widths() {
    for bits in 1..=64u32 {
        // The smallest power of two at least `bits`: 1, 2, 4, 8, 16, 32, 64.
        let expected = [1u32, 2, 4, 8, 16, 32, 64]
            .into_iter()
            .find(|&p| p >= bits)
            .unwrap();
        let a = pack(&[0], 1, 1, bits);
        assert_eq!(output_bits(&a, &a, OutputWidth::C2p2), expected, "b={bits}");
        assert_eq!(output_bits(&a, &a, OutputWidth::Sai), bits, "b={bits}");
        // All zeros: maxv takes 1 bit.
        assert_eq!(output_bits(&a, &a, OutputWidth::Maxv), 1, "b={bits}");
    }
    // Mixed widths: the wider operand.
    let a = pack(&[1], 1, 1, 3);
    let b = pack(&[1], 1, 1, 12);
    assert_eq!(output_bits(&a, &b, OutputWidth::Sai), 12);
    assert_eq!(output_bits(&b, &a, OutputWidth::C2p2), 16);
}

#[test]
fn shape_mismatch_and_gemv() {
    let a = pack(&[1; 6], 2, 3, 4);
    let b = pack(&[1; 8], 4, 2, 4);
    let e = gemm_reference(&a, &b, OutputWidth::Sai, Overflow::Ovf, Layout::Naive).unwrap_err();
    assert!(
        matches!(
            e,
            BeamError::GemmShape {
                a_rows: 2,
                a_cols: 3,
                b_rows: 4,
                b_cols: 2
            }
        ),
        "{e}"
    );
    let msg = e.to_string();
    assert!(msg.contains("2 x 3") && msg.contains("4 x 2"), "{msg}");

    let x = pack(&[2, 3, 4], 3, 1, 4);
    let y = gemv_reference(&a, &x, OutputWidth::C2p2, Overflow::Ovf, Layout::Tight).unwrap();
    assert_eq!(y.unpack(), vec![9, 9]);
    let wide = pack(&vec![1; 3 * (GEMV_MAX_COLS + 1)], 3, GEMV_MAX_COLS + 1, 1);
    let e = gemv_reference(&a, &wide, OutputWidth::Sai, Overflow::Ovf, Layout::Naive).unwrap_err();
    assert!(matches!(e, BeamError::GemvColumns { cols: 17 }), "{e}");
    let ok = pack(&vec![1; 3 * GEMV_MAX_COLS], 3, GEMV_MAX_COLS, 1);
    assert!(gemv_reference(&a, &ok, OutputWidth::Sai, Overflow::Ovf, Layout::Naive).is_ok());
}

fn matrix(rows: usize, cols: usize, bits: u32) -> impl Strategy<Value = Vec<u64>> {
    let max = max_of(bits);
    prop::collection::vec(
        prop_oneof![
            Just(0u64),
            Just(max),
            any::<u64>().prop_map(move |v| v & max)
        ],
        rows * cols,
    )
}

fn case() -> impl Strategy<Value = (usize, usize, usize, u32, u32, Vec<u64>, Vec<u64>)> {
    (1usize..=4, 1usize..=6, 1usize..=4, 1u32..=64, 1u32..=64).prop_flat_map(|(m, k, n, ab, bb)| {
        (
            Just(m),
            Just(k),
            Just(n),
            Just(ab),
            Just(bb),
            matrix(m, k, ab),
            matrix(k, n, bb),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Against u64 references: wrapping arithmetic for ovf, saturating arithmetic for sat
    /// (exact for unsigned operands), then the output width's mask / clamp.
    #[test]
    fn matches_u64_references(
        (m, k, n, ab, bb, av, bv) in case(),
        wi in 0usize..3,
        li in 0usize..4,
        sat in any::<bool>(),
    ) {
        let a = PackedMatrix::pack(&av, m, k, ab, LAYOUTS[li]).unwrap();
        let b = PackedMatrix::pack(&bv, k, n, bb, LAYOUTS[(li + 1) % 4]).unwrap();
        let w = WIDTHS[wi];
        let o = if sat { Overflow::Sat } else { Overflow::Ovf };
        let c = gemm_reference(&a, &b, w, o, LAYOUTS[(li + 2) % 4]).unwrap();
        let bits = c.bits();
        prop_assert_eq!(bits, output_bits(&a, &b, w));
        let mask = max_of(bits);
        for i in 0..m {
            for j in 0..n {
                let (mut wrap, mut satu) = (0u64, 0u64);
                for t in 0..k {
                    let (x, y) = (av[i * k + t], bv[t * n + j]);
                    wrap = wrap.wrapping_add(x.wrapping_mul(y));
                    satu = satu.saturating_add(x.saturating_mul(y));
                }
                let want = if sat { satu.min(mask) } else { wrap & mask };
                prop_assert_eq!(c.get(i, j), Some(want), "({}, {})", i, j);
                if w == OutputWidth::Maxv && satu < u64::MAX {
                    // maxv is never too small: the exact result fits.
                    prop_assert!(satu <= mask, "exact {} in {} bits", satu, bits);
                }
            }
        }
    }

    /// Small values (exact in u128 with room): maxv keeps every exact result and
    /// both overflow modes agree with it.
    #[test]
    fn maxv_exact_small(
        (m, k, n, ab, bb, av, bv) in (1usize..=5, 1usize..=8, 1usize..=5, 1u32..=30, 1u32..=30)
            .prop_flat_map(|(m, k, n, ab, bb)| {
                (Just(m), Just(k), Just(n), Just(ab), Just(bb), matrix(m, k, ab), matrix(k, n, bb))
            }),
    ) {
        let a = pack(&av, m, k, ab);
        let b = pack(&bv, k, n, bb);
        for o in [Overflow::Ovf, Overflow::Sat] {
            let c = gemm_reference(&a, &b, OutputWidth::Maxv, o, Layout::Slabs).unwrap();
            for i in 0..m {
                for j in 0..n {
                    let exact: u128 = (0..k)
                        .map(|t| u128::from(av[i * k + t]) * u128::from(bv[t * n + j]))
                        .sum();
                    prop_assert_eq!(c.get(i, j).map(u128::from), Some(exact));
                }
            }
        }
    }
}
