//! The CPU side of SBVR: the packing is the inverse of `code`/`entry`, the container round-trips
//! canonically (u8 and u16 indices, every number of bitvectors, odd shapes), every invariant a
//! kernel relies on is checked on load (zero padding, indices below the cache, finite
//! coefficients, part lengths, the index width), the decoder agrees with the encoder's, and
//! both references agree with independent naive computations.

use std::mem::size_of;

use cmv_format::CompressedMatrix;
use cmv_format::container::{CRC_OFFSET, PREFIX_BYTES, Reader, Writer, checksum};
use cmv_format::testing::{SeededRng, round_trip, seeded_vec};
use proptest::prelude::*;
use sbvr_format::container::{SPEC, SbvrFields};
use sbvr_format::layout::{GROUP, Geometry, planes_of, quantize_group};
use sbvr_format::{
    EncodeOptions, Encoded, FormatError, Limits, SbvrError, SbvrMatrix, encode, f16,
};

// ---------------------------------------------------------------------------------------------
// Builders.

/// A hand-made encoder output: random codes, indices below `entries` (the last entry used at
/// least once), coefficients of either sign; the rows in `zero_rows` have code 0 everywhere.
fn random_encoded(
    seed: u64,
    rows: usize,
    cols: usize,
    bits: u32,
    entries: usize,
    zero_rows: &[usize],
) -> Encoded {
    let mut rng = SeededRng::new(seed);
    let groups = cols.div_ceil(GROUP);
    let mask = ((1u32 << bits) - 1) as u64;
    let mut codes: Vec<u8> = (0..rows * cols)
        .map(|_| (rng.next_u64() & mask) as u8)
        .collect();
    for &r in zero_rows {
        codes[r * cols..(r + 1) * cols].fill(0);
    }
    let mut index: Vec<u32> = (0..rows * groups)
        .map(|_| rng.below(entries as u64) as u32)
        .collect();
    let last = index.len() - 1;
    index[last] = entries as u32 - 1;
    let coeffs = (0..entries * bits as usize)
        .map(|_| f16::from_f64(rng.normal() * 0.05))
        .collect();
    Encoded {
        bits,
        rows,
        cols,
        coeffs,
        index,
        codes,
    }
}

/// The encoder's output on seeded weights.
fn encoded(seed: u64, rows: usize, cols: usize, bits: u32, entries: usize) -> Encoded {
    let w = seeded_vec::<f32>(seed, rows * cols);
    let options = EncodeOptions {
        bits,
        entries,
        seed,
        ..EncodeOptions::default()
    };
    encode(&w, rows, cols, &options).unwrap()
}

/// Roughly normal inputs without outliers.
fn smooth_inputs(seed: u64, n: usize) -> Vec<f16> {
    let mut rng = SeededRng::new(seed);
    (0..n).map(|_| f16::from_f64(rng.normal())).collect()
}

/// Checks that the packed matrix holds exactly the encoder's codes and indices, and that the
/// padding is zero.
fn check_packing(e: &Encoded, m: &SbvrMatrix) {
    let ctx = format!("{}x{} n={} L={}", e.rows, e.cols, e.bits, e.entries());
    assert_eq!(
        (m.rows(), m.cols(), m.bits()),
        (e.rows, e.cols, e.bits),
        "{ctx}"
    );
    assert_eq!(m.entries(), e.entries(), "{ctx}");
    assert_eq!(m.coefficients(), &e.coeffs[..], "{ctx}");
    assert_eq!(m.wide_index(), e.entries() > 256, "{ctx}");
    let groups = e.groups();
    for r in 0..e.rows {
        for c in 0..e.cols {
            assert_eq!(
                m.code(r, c),
                e.codes[r * e.cols + c],
                "{ctx}: code ({r}, {c})"
            );
        }
        for g in 0..groups {
            assert_eq!(
                m.entry(r, g),
                e.index[r * groups + g] as usize,
                "{ctx}: entry ({r}, {g})"
            );
        }
    }
    let geom = m.geometry();
    for r in 0..geom.padded_rows() {
        for c in 0..geom.padded_cols() {
            if r >= e.rows || c >= e.cols {
                assert_eq!(m.code(r, c), 0, "{ctx}: padding ({r}, {c})");
            }
        }
        for g in 0..geom.padded_groups() {
            if r >= e.rows || g >= groups {
                assert_eq!(m.entry(r, g), 0, "{ctx}: padded index ({r}, {g})");
            }
        }
    }
    // Each set bit of the words is one set bit of one code: nothing else is stored.
    let ones: u32 = m.bit_words().iter().map(|w| w.count_ones()).sum();
    let want: u32 = e.codes.iter().map(|c| c.count_ones()).sum();
    assert_eq!(ones, want, "{ctx}");
    m.validate().unwrap();
}

/// `|a - b| <= tol * scale` for every value, NaN only where both are.
fn assert_close(a: &[f64], b: &[f64], scale: &[f64], tol: f64, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}");
    for (i, ((&x, &y), &s)) in a.iter().zip(b).zip(scale).enumerate() {
        if x.is_nan() || y.is_nan() {
            assert!(x.is_nan() && y.is_nan(), "{what}[{i}]: {x} vs {y}");
        } else {
            assert!(
                (x - y).abs() <= tol * s.max(f64::MIN_POSITIVE),
                "{what}[{i}]: {x} vs {y} (scale {s})"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Independent references.

/// The kernels' arithmetic, computed from the encoder's row-major output without the packing
/// or the bit-planes: each group of each vector quantized, then
/// `y = sum_g s_g sum_j c_j sum_k b_j[k] q[k]` in f64. Also the same sum of absolute values
/// (the scale of the rounding errors).
fn naive_reference(e: &Encoded, x: &[f16], batch: usize) -> (Vec<f64>, Vec<f64>) {
    let (rows, cols, n) = (e.rows, e.cols, e.bits as usize);
    let groups = e.groups();
    let mut y = vec![0f64; batch * rows];
    let mut mag = vec![0f64; batch * rows];
    for v in 0..batch {
        for g in 0..groups {
            let lo = g * GROUP;
            let hi = (lo + GROUP).min(cols);
            let vals: Vec<f32> = x[v * cols + lo..v * cols + hi]
                .iter()
                .map(|h| h.to_f32())
                .collect();
            let (s, q) = quantize_group(&vals);
            for r in 0..rows {
                let ent = e.index[r * groups + g] as usize;
                let (mut part, mut part_mag) = (0f64, 0f64);
                for j in 0..n {
                    let p: i64 = (lo..hi)
                        .filter(|&c| e.codes[r * cols + c] >> j & 1 == 1)
                        .map(|c| i64::from(q[c - lo]))
                        .sum();
                    let c = f64::from(e.coeffs[ent * n + j].to_f32());
                    part += c * p as f64;
                    part_mag += (c * p as f64).abs();
                }
                y[v * rows + r] += f64::from(s) * part;
                mag[v * rows + r] += (f64::from(s) * part_mag).abs();
            }
        }
    }
    (y, mag)
}

/// The encoder's decoded weights times the inputs, in f64, and the sum of absolute values.
fn naive_dequantized(e: &Encoded, x: &[f16], batch: usize) -> (Vec<f64>, Vec<f64>) {
    let (rows, cols) = (e.rows, e.cols);
    let w = e.dequantize();
    let mut y = vec![0f64; batch * rows];
    let mut mag = vec![0f64; batch * rows];
    for v in 0..batch {
        for r in 0..rows {
            for c in 0..cols {
                let t = f64::from(w[r * cols + c]) * f64::from(x[v * cols + c].to_f32());
                y[v * rows + r] += t;
                mag[v * rows + r] += t.abs();
            }
        }
    }
    (y, mag)
}

/// Every check of one matrix against its encoder output: packing, decoder, both references
/// (batch 1 and 3), the container.
fn check_all(e: &Encoded, seed: u64) -> SbvrMatrix {
    let m = SbvrMatrix::from_encoded(e).unwrap();
    check_packing(e, &m);
    let ctx = format!("{}x{} n={} L={}", e.rows, e.cols, e.bits, e.entries());
    let d = m.dequantize();
    let want = e.dequantize();
    if let Some(i) = (0..d.len()).find(|&i| d[i].to_bits() != want[i].to_bits()) {
        panic!(
            "{ctx}: dequantize differs from Encoded::dequantize at {i}: {:e} vs {:e}",
            d[i], want[i]
        );
    }
    for r in 0..e.rows {
        for c in (0..e.cols).step_by(7) {
            assert_eq!(m.value(r, c).to_bits(), e.value(r, c).to_bits(), "{ctx}");
        }
    }
    for batch in [1, 3] {
        let x = seeded_vec::<f16>(seed.wrapping_add(batch as u64), batch * e.cols);
        let (y, mag) = naive_reference(e, &x, batch);
        assert_close(&m.reference(&x, batch).unwrap(), &y, &mag, 1e-12, &ctx);
        let (y, mag) = naive_dequantized(e, &x, batch);
        let got = m.reference_dequantized(&x, batch).unwrap();
        assert_close(&got, &y, &mag, 1e-12, &ctx);
    }
    let blob = round_trip(&m);
    let back = SbvrMatrix::from_bytes(&blob).unwrap();
    assert_eq!(back, m, "{ctx}");
    m
}

// ---------------------------------------------------------------------------------------------
// Round trips.

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn hand_made_matrices_pack_and_round_trip(
        rows in 1usize..40,
        cols in 1usize..400,
        bits in 2u32..=8,
        entries in prop_oneof![1usize..=4, 250usize..=256, 257usize..=300],
        seed in any::<u64>(),
    ) {
        let zero_rows: Vec<usize> = (0..rows).filter(|r| r % 5 == 3).collect();
        let e = random_encoded(seed, rows, cols, bits, entries, &zero_rows);
        let m = check_all(&e, seed);
        prop_assert_eq!(m.wide_index(), entries > 256);
    }

    #[test]
    fn encoded_matrices_pack_and_round_trip(
        rows in 1usize..40,
        cols in 1usize..400,
        bits in 2u32..=8,
        entries in prop_oneof![Just(1usize), Just(16), Just(256)],
        seed in 0u64..1000,
    ) {
        let e = encoded(seed, rows, cols, bits, entries);
        prop_assert!(e.entries() <= entries);
        check_all(&e, seed);
    }
}

#[test]
fn encoded_matrices_with_u16_indices_round_trip() {
    // More than 256 groups, a cache of up to 4096 entries: more than 256 are used.
    for (rows, cols, bits) in [(300, 129, 3), (150, 300, 2)] {
        let e = encoded(7, rows, cols, bits, 4096);
        assert!(e.entries() > 256, "{rows}x{cols}: {} entries", e.entries());
        let m = check_all(&e, 7);
        assert!(m.wide_index());
        let sb = m.size_breakdown();
        assert_eq!(sb.bytes_of("indices (u8)"), Some(0));
        assert_eq!(
            sb.bytes_of("indices (u16)"),
            Some(2 * m.geometry().index_len() as u64)
        );
    }
}

#[test]
fn odd_shapes_round_trip() {
    let shapes = [
        (1, 1),
        (1, 500),
        (45, 1),
        (16, 127),
        (17, 128),
        (15, 129),
        (3, 255),
        (2, 256),
        (33, 257),
    ];
    for (k, &(rows, cols)) in shapes.iter().enumerate() {
        for bits in [2, 5, 8] {
            let seed = 100 * k as u64 + u64::from(bits);
            check_all(&encoded(seed, rows, cols, bits, 256), seed);
            check_all(&random_encoded(seed, rows, cols, bits, 3, &[0]), seed);
            check_all(&random_encoded(seed, rows, cols, bits, 257, &[]), seed);
        }
    }
}

#[test]
fn constant_and_zero_groups() {
    // Rows of constants (zero among them) and one row that is constant per group.
    let (rows, cols) = (6, 300);
    let consts = [0.5f32, -1.25, 3.0, 0.0, 1e-3];
    let mut w: Vec<f32> = (0..rows * cols)
        .map(|i| consts.get(i / cols).copied().unwrap_or(0.0))
        .collect();
    for c in 0..cols {
        w[5 * cols + c] = [0.25, 0.0, -7.0][c / GROUP];
    }
    for bits in [2, 4, 8] {
        let options = EncodeOptions {
            bits,
            ..EncodeOptions::default()
        };
        let e = encode(&w, rows, cols, &options).unwrap();
        let m = check_all(&e, 1);
        let d = m.dequantize();
        for r in 0..rows {
            for g in 0..cols.div_ceil(GROUP) {
                let lo = r * cols + g * GROUP;
                let hi = r * cols + ((g + 1) * GROUP).min(cols);
                // A constant group decodes to one value, close to the constant; zero exactly.
                let v = d[lo];
                assert!(d[lo..hi].iter().all(|&x| x == v), "n={bits} ({r}, {g})");
                let want = w[lo];
                assert!(
                    (v - want).abs() <= 1e-3 * want.abs(),
                    "n={bits} ({r}, {g}): {v} for {want}"
                );
            }
        }
        // The zero row (and the zero group) multiply to exactly zero.
        let x = seeded_vec::<f16>(3, 2 * cols);
        for y in [
            m.reference(&x, 2).unwrap(),
            m.reference_dequantized(&x, 2).unwrap(),
        ] {
            assert_eq!(y[3], 0.0);
            assert_eq!(y[rows + 3], 0.0);
        }
    }
}

#[test]
fn zero_rows_multiply_to_exact_zeros() {
    let (rows, cols) = (20, 200);
    let zero_rows = [0, 7, 19];
    let e = random_encoded(5, rows, cols, 4, 10, &zero_rows);
    let m = SbvrMatrix::from_encoded(&e).unwrap();
    let x = seeded_vec::<f16>(9, 2 * cols);
    let y = m.reference(&x, 2).unwrap();
    let yd = m.reference_dequantized(&x, 2).unwrap();
    for r in 0..rows {
        for v in 0..2 {
            let i = v * rows + r;
            if zero_rows.contains(&r) {
                assert_eq!((y[i], yd[i]), (0.0, 0.0), "row {r}");
            } else {
                assert!(y[i] != 0.0 && yd[i] != 0.0, "row {r}");
            }
        }
    }
    // An all-zero matrix: zero weights, zero outputs, whatever the inputs (finite).
    let e = random_encoded(6, 3, 130, 2, 1, &[0, 1, 2]);
    let m = check_all(&e, 6);
    assert!(m.bit_words().iter().all(|&w| w == 0));
    assert!(m.dequantize().iter().all(|&v| v == 0.0));
}

// ---------------------------------------------------------------------------------------------
// The references.

#[test]
fn the_references_differ_by_the_activation_quantization() {
    for (k, &(rows, cols, bits)) in [(40, 384, 4), (33, 300, 2), (17, 1000, 8)]
        .iter()
        .enumerate()
    {
        let e = encoded(k as u64, rows, cols, bits, 256);
        let m = SbvrMatrix::from_encoded(&e).unwrap();
        let batch = 3;
        let x = smooth_inputs(50 + k as u64, batch * cols);
        let y = m.reference(&x, batch).unwrap();
        let yd = m.reference_dequantized(&x, batch).unwrap();
        for v in 0..batch {
            let (a, b) = (&y[v * rows..(v + 1) * rows], &yd[v * rows..(v + 1) * rows]);
            let diff: f64 = a.iter().zip(b).map(|(p, q)| (p - q) * (p - q)).sum();
            let norm: f64 = b.iter().map(|q| q * q).sum();
            let rel = (diff / norm).sqrt();
            assert!(
                rel < 0.02 && rel > 0.0,
                "{rows}x{cols} n={bits} vector {v}: {rel}"
            );
        }
    }
}

#[test]
fn a_non_finite_input_makes_its_vector_nan_only() {
    let (rows, cols) = (21, 300);
    let e = encoded(3, rows, cols, 3, 64);
    let m = SbvrMatrix::from_encoded(&e).unwrap();
    for bad in [f16::NAN, f16::INFINITY, f16::NEG_INFINITY] {
        for at in [0, 200, cols - 1] {
            let mut x = seeded_vec::<f16>(4, 3 * cols);
            x[cols + at] = bad;
            let y = m.reference(&x, 3).unwrap();
            let (naive, _) = naive_reference(&e, &x, 3);
            for (i, (&a, &b)) in y.iter().zip(&naive).enumerate() {
                let in_bad = i / rows == 1;
                assert_eq!(a.is_nan(), in_bad, "{bad} at {at}: output {i} is {a}");
                assert_eq!(b.is_nan(), in_bad, "{bad} at {at}: naive output {i}");
            }
            let (_, mag) = naive_reference(&e, &x, 3);
            assert_close(&y, &naive, &mag, 1e-12, &format!("{bad} at {at}"));
        }
    }
}

#[test]
fn reference_arguments_are_checked() {
    let m = SbvrMatrix::from_encoded(&random_encoded(1, 5, 130, 3, 4, &[])).unwrap();
    let x = seeded_vec::<f16>(1, 2 * 130 + 1);
    let batch = |e: SbvrError| matches!(e, SbvrError::Format(FormatError::Batch { batch: 0, .. }));
    let length = |e: SbvrError| matches!(e, SbvrError::Format(FormatError::Length { .. }));
    assert!(batch(m.reference(&x[..130], 0).unwrap_err()));
    assert!(batch(m.reference(&[], 0).unwrap_err()));
    assert!(batch(m.reference_dequantized(&x[..130], 0).unwrap_err()));
    assert!(batch(m.quantize_inputs(&x[..130], 0).unwrap_err()));
    for len in [0, 129, 131, 259, 261] {
        let b = if len > 200 { 2 } else { 1 };
        assert!(length(m.reference(&x[..len], b).unwrap_err()), "{len}");
        assert!(
            length(m.reference_dequantized(&x[..len], b).unwrap_err()),
            "{len}"
        );
        assert!(
            length(m.quantize_inputs(&x[..len], b).unwrap_err()),
            "{len}"
        );
    }
    assert_eq!(m.reference(&x[..260], 2).unwrap().len(), 10);
    // Through the trait too.
    assert!(batch(
        CompressedMatrix::reference(&m, &x[..130], 0).unwrap_err()
    ));
}

#[test]
fn quantize_inputs_agrees_with_the_layout() {
    for (rows, cols) in [(1, 1), (3, 129), (2, 300), (1, 256), (4, 513)] {
        let m = SbvrMatrix::from_encoded(&random_encoded(2, rows, cols, 2, 2, &[])).unwrap();
        let g = m.geometry();
        let batch = 3;
        let mut x = seeded_vec::<f16>(cols as u64, batch * cols);
        // A zero group and a NaN group in the last vector.
        x[2 * cols..2 * cols + cols.min(GROUP)].fill(f16::ZERO);
        if cols > GROUP {
            x[2 * cols + GROUP] = f16::NAN;
        }
        let (planes, scales) = m.quantize_inputs(&x, batch).unwrap();
        assert_eq!(planes.len(), g.plane_words(batch));
        assert_eq!(scales.len(), g.scales_len(batch));
        for v in 0..batch {
            for gr in 0..g.padded_groups() {
                let at = v * g.padded_groups() + gr;
                let (s, p) = if gr < g.groups {
                    let lo = v * cols + gr * GROUP;
                    let hi = v * cols + ((gr + 1) * GROUP).min(cols);
                    let vals: Vec<f32> = x[lo..hi].iter().map(|h| h.to_f32()).collect();
                    let (s, q) = quantize_group(&vals);
                    (s, planes_of(&q))
                } else {
                    (0.0, [[0; 4]; 8])
                };
                assert_eq!(scales[at].to_bits(), s.to_bits(), "{cols}: ({v}, {gr})");
                for (a, plane) in p.iter().enumerate() {
                    for (t, &w) in plane.iter().enumerate() {
                        assert_eq!(
                            planes[g.plane_pos(v, gr, a, t)],
                            w,
                            "{cols}: ({v}, {gr}) plane {a} word {t}"
                        );
                    }
                }
            }
        }
        assert_eq!(scales[2 * g.padded_groups()], 0.0);
        if cols > GROUP {
            assert!(scales[2 * g.padded_groups() + 1].is_nan());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Invariants: constructors refuse what a kernel must not see.

fn padding(e: SbvrError) -> bool {
    matches!(e, SbvrError::Padding { .. })
}

fn length(e: SbvrError, part: &str) -> bool {
    matches!(e, SbvrError::Format(FormatError::Length { what, .. }) if what == part)
}

/// The stored parts of `m`.
fn parts(m: &SbvrMatrix) -> (Vec<u64>, Vec<u16>, Vec<f16>) {
    (
        m.bit_words().to_vec(),
        m.index().to_vec(),
        m.coefficients().to_vec(),
    )
}

fn stored(m: &SbvrMatrix, p: (Vec<u64>, Vec<u16>, Vec<f16>)) -> Result<SbvrMatrix, SbvrError> {
    SbvrMatrix::from_stored(m.rows(), m.cols(), m.bits(), p.0, p.1, p.2)
}

#[test]
fn stored_parts_are_validated() {
    // 17 x 300: a padded row tile, an odd group count (a padded group), a short last group.
    let (rows, cols, bits) = (17, 300, 3);
    let e = random_encoded(11, rows, cols, bits, 5, &[]);
    let m = SbvrMatrix::from_encoded(&e).unwrap();
    let g = m.geometry();
    assert_eq!((g.padded_rows(), g.padded_groups()), (32, 4));
    assert_eq!(stored(&m, parts(&m)).unwrap(), m);

    // Every bit of a sample: flipping a real one gives a valid matrix with that code bit
    // flipped; flipping a padding bit is refused.
    let mut rng = SeededRng::new(3);
    let mut kinds = [0usize; 2];
    for _ in 0..300 {
        let (r, c, j) = (
            rng.below(g.padded_rows() as u64) as usize,
            rng.below(g.padded_cols() as u64) as usize,
            rng.below(u64::from(bits)) as usize,
        );
        let (w, b) = g.bit_pos(r, c, j);
        let mut p = parts(&m);
        p.0[w] ^= 1 << b;
        let real = r < rows && c < cols;
        kinds[usize::from(real)] += 1;
        match stored(&m, p) {
            Ok(x) => {
                assert!(real, "padding bit ({r}, {c}, {j}) accepted");
                assert_eq!(x.code(r, c), m.code(r, c) ^ (1 << j));
            }
            Err(e) => assert!(!real && padding(e), "({r}, {c}, {j})"),
        }
    }
    assert!(kinds[0] > 20 && kinds[1] > 20, "{kinds:?}");
    // The corners of the padding.
    for (r, c) in [
        (rows, 0),
        (0, cols),
        (rows - 1, 383),
        (0, g.padded_cols() - 1),
        (31, 511),
    ] {
        let (w, b) = g.bit_pos(r, c, bits as usize - 1);
        let mut p = parts(&m);
        p.0[w] |= 1 << b;
        assert!(padding(stored(&m, p).unwrap_err()), "({r}, {c})");
    }

    // Indices: past the cache at a real group; non-zero at a padded row or group.
    let mut p = parts(&m);
    p.1[g.index_pos(16, 2)] = 5;
    match stored(&m, p).unwrap_err() {
        SbvrError::Index {
            row: 16,
            group: 2,
            index: 5,
            entries: 5,
        } => {}
        other => panic!("{other:?}"),
    }
    for (r, gr) in [(17, 0), (31, 3), (0, 3), (16, 3)] {
        let mut p = parts(&m);
        p.1[g.index_pos(r, gr)] = 1;
        assert!(padding(stored(&m, p).unwrap_err()), "({r}, {gr})");
    }

    // Coefficients: NaN and infinities, named by entry and position.
    for (k, bad) in [(0, f16::NAN), (7, f16::INFINITY), (14, f16::NEG_INFINITY)] {
        let mut p = parts(&m);
        p.2[k] = bad;
        match stored(&m, p).unwrap_err() {
            SbvrError::Coefficient { entry, j, .. } => {
                assert_eq!((entry, j), (k / 3, k % 3));
            }
            other => panic!("{other:?}"),
        }
    }

    // Lengths.
    for delta in [-1i64, 1] {
        let n = |len: usize| (len as i64 + delta) as usize;
        let mut p = parts(&m);
        p.0.resize(n(p.0.len()), 0);
        assert!(length(stored(&m, p).unwrap_err(), "bitvector words"));
        let mut p = parts(&m);
        p.1.resize(n(p.1.len()), 0);
        assert!(length(stored(&m, p).unwrap_err(), "index"));
    }
    for len in [0, 1, 14, 16] {
        let mut p = parts(&m);
        p.2.resize(len, f16::ONE);
        assert!(
            matches!(stored(&m, p).unwrap_err(), SbvrError::Entries { .. }),
            "{len}"
        );
    }
    let mut p = parts(&m);
    p.2 = vec![f16::ONE; 3 * 65537];
    assert!(matches!(
        stored(&m, p).unwrap_err(),
        SbvrError::Entries { entries: 65537 }
    ));
    // The largest cache is fine.
    let mut p = parts(&m);
    p.2 = vec![f16::ONE; 3 * 65536];
    assert!(stored(&m, p).unwrap().wide_index());

    // Shapes and bit counts.
    let (b, i, c) = parts(&m);
    for nb in [0, 1, 9, 32] {
        let e = SbvrMatrix::from_stored(rows, cols, nb, b.clone(), i.clone(), c.clone());
        assert!(
            matches!(e, Err(SbvrError::Bits { bits }) if bits == nb),
            "{nb}"
        );
    }
    for (r, cc) in [(0, cols), (rows, 0), ((1 << 30) + 1, 1)] {
        let e = SbvrMatrix::from_stored(r, cc, bits, b.clone(), i.clone(), c.clone());
        assert!(
            matches!(e, Err(SbvrError::Format(FormatError::Shape { .. }))),
            "{r}x{cc}"
        );
    }
}

#[test]
fn encoder_outputs_are_validated() {
    let (rows, cols, bits) = (5, 200, 4);
    let e = random_encoded(12, rows, cols, bits, 7, &[]);
    SbvrMatrix::from_encoded(&e).unwrap();

    let mut x = e.clone();
    x.codes[3 * cols + 150] = 0x10;
    assert!(padding(SbvrMatrix::from_encoded(&x).unwrap_err()));
    let mut x = e.clone();
    x.index[2 * 2 + 1] = 7;
    match SbvrMatrix::from_encoded(&x).unwrap_err() {
        SbvrError::Index {
            row: 2,
            group: 1,
            index: 7,
            entries: 7,
        } => {}
        other => panic!("{other:?}"),
    }
    let mut x = e.clone();
    x.coeffs[27] = f16::NAN;
    assert!(matches!(
        SbvrMatrix::from_encoded(&x).unwrap_err(),
        SbvrError::Coefficient { entry: 6, j: 3, .. }
    ));
    let mut x = e.clone();
    x.codes.pop();
    assert!(length(SbvrMatrix::from_encoded(&x).unwrap_err(), "codes"));
    let mut x = e.clone();
    x.index.push(0);
    assert!(length(SbvrMatrix::from_encoded(&x).unwrap_err(), "index"));
    let mut x = e.clone();
    x.coeffs.pop();
    assert!(matches!(
        SbvrMatrix::from_encoded(&x).unwrap_err(),
        SbvrError::Entries { .. }
    ));
    let mut x = e.clone();
    x.coeffs.clear();
    assert!(matches!(
        SbvrMatrix::from_encoded(&x).unwrap_err(),
        SbvrError::Entries { entries: 0 }
    ));
    let mut x = e.clone();
    x.bits = 9;
    assert!(matches!(
        SbvrMatrix::from_encoded(&x).unwrap_err(),
        SbvrError::Bits { bits: 9 }
    ));
    // 2 bitvectors: a code with bit 2 set is padding.
    let mut x = random_encoded(13, 2, 10, 2, 1, &[]);
    x.codes[0] = 0b100;
    assert!(padding(SbvrMatrix::from_encoded(&x).unwrap_err()));
}

// ---------------------------------------------------------------------------------------------
// The container.

/// Rewrites the CRC.
fn fix_crc(blob: &mut [u8]) {
    let crc = checksum(blob);
    blob[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_le_bytes());
}

/// The blob with its fields changed by `f` and the CRC made valid again.
fn with_fields(blob: &[u8], f: impl FnOnce(&mut SbvrFields)) -> Vec<u8> {
    let mut b = blob.to_vec();
    let at = PREFIX_BYTES..PREFIX_BYTES + size_of::<SbvrFields>();
    let mut h: SbvrFields = bytemuck::pod_read_unaligned(&b[at.clone()]);
    f(&mut h);
    b[at].copy_from_slice(bytemuck::bytes_of(&h));
    fix_crc(&mut b);
    b
}

/// The blob with byte `at` changed by `f` and the CRC made valid again.
fn with_byte(blob: &[u8], at: usize, f: impl FnOnce(&mut u8)) -> Vec<u8> {
    let mut b = blob.to_vec();
    f(&mut b[at]);
    fix_crc(&mut b);
    b
}

/// Where each part starts in `blob`.
fn part_starts(blob: &[u8]) -> [usize; 4] {
    let r = Reader::open(blob, &SPEC).unwrap();
    core::array::from_fn(|k| r.parts()[k].start as usize)
}

fn core_error(e: &SbvrError, f: fn(&FormatError) -> bool) -> bool {
    matches!(e, SbvrError::Format(c) if f(c))
}

#[test]
fn container_checks_the_body() {
    for entries in [5, 300] {
        let (rows, cols, bits) = (17, 300, 3);
        let e = random_encoded(21, rows, cols, bits, entries, &[]);
        let m = SbvrMatrix::from_encoded(&e).unwrap();
        let blob = m.to_bytes();
        assert_eq!(blob.len() as u64, m.size_breakdown().container_bytes);
        let [bits_at, i8_at, i16_at, cache_at] = part_starts(&blob);
        let g = m.geometry();
        let load = |b: &[u8]| SbvrMatrix::from_bytes(b);
        assert_eq!(load(&blob).unwrap(), m);

        // A padding bit and a real bit.
        let (w, b) = g.bit_pos(rows, 5, 1);
        let at = bits_at + 8 * w + b as usize / 8;
        let bad = with_byte(&blob, at, |x| *x ^= 1 << (b % 8));
        assert!(padding(load(&bad).unwrap_err()), "L={entries}");
        let (w, b) = g.bit_pos(rows - 1, cols - 1, 2);
        let at = bits_at + 8 * w + b as usize / 8;
        let ok = load(&with_byte(&blob, at, |x| *x ^= 1 << (b % 8))).unwrap();
        assert_eq!(ok.code(rows - 1, cols - 1), m.code(rows - 1, cols - 1) ^ 4);

        // An index past the cache; a non-zero padded index.
        let (at, size) = if entries > 256 {
            (i16_at, 2)
        } else {
            (i8_at, 1)
        };
        let pos = at + size * g.index_pos(3, 1);
        let bad = with_byte(&blob, pos + size - 1, |x| *x = 0xff);
        assert!(matches!(
            load(&bad).unwrap_err(),
            SbvrError::Index {
                row: 3,
                group: 1,
                ..
            }
        ));
        let bad = with_byte(&blob, at + size * g.index_pos(0, 3), |x| *x = 1);
        assert!(padding(load(&bad).unwrap_err()));

        // A NaN coefficient (fp16 0x7e00), an infinite one (0x7c00).
        for hi in [0x7eu8, 0x7c] {
            let mut bad = blob.clone();
            bad[cache_at + 2 * 4] = 0;
            bad[cache_at + 2 * 4 + 1] = hi;
            fix_crc(&mut bad);
            assert!(matches!(
                load(&bad).unwrap_err(),
                SbvrError::Coefficient { entry: 1, j: 1, .. }
            ));
        }
    }
}

#[test]
fn container_checks_the_header() {
    let m = SbvrMatrix::from_encoded(&random_encoded(22, 17, 300, 3, 5, &[])).unwrap();
    let blob = m.to_bytes();
    let load = |b: Vec<u8>| SbvrMatrix::from_bytes(&b).unwrap_err();
    assert!(matches!(
        load(with_fields(&blob, |h| h.bits = 9)),
        SbvrError::Bits { bits: 9 }
    ));
    assert!(matches!(
        load(with_fields(&blob, |h| h.bits = 1)),
        SbvrError::Bits { bits: 1 }
    ));
    // 15 halves are 5 entries of 3, not a whole number of entries of 4.
    assert!(matches!(
        load(with_fields(&blob, |h| h.bits = 4)),
        SbvrError::Entries { .. }
    ));
    let e = load(with_fields(&blob, |h| h.reserved = 1));
    assert!(
        core_error(&e, |c| matches!(
            c,
            FormatError::Header {
                field: "reserved",
                found: 1,
                expected: 0
            }
        )),
        "{e}"
    );
    for (r, c) in [(0, 300), (17, 0), ((1 << 30) + 1, 1)] {
        let e = load(with_fields(&blob, |h| {
            h.rows = r;
            h.cols = c;
        }));
        assert!(
            core_error(&e, |c| matches!(c, FormatError::Shape { .. })),
            "{e}"
        );
    }
    // Another shape: the parts no longer have the counts it needs.
    for (r, c) in [(33, 300), (17, 600), (16, 300), (17, 256)] {
        let e = load(with_fields(&blob, |h| {
            h.rows = r;
            h.cols = c;
        }));
        assert!(
            core_error(&e, |c| matches!(c, FormatError::Header { .. })),
            "{r}x{c}: {e}"
        );
    }
    // 18 rows: same tiles, same part sizes: loads, with row 17 as zeros.
    let more = SbvrMatrix::from_bytes(&with_fields(&blob, |h| h.rows = 18)).unwrap();
    assert_eq!(more.rows(), 18);
    assert!((0..300).all(|c| more.code(17, c) == 0));
    // Limits on the padded weight count.
    let padded = (m.geometry().padded_rows() * m.geometry().padded_cols()) as u64;
    let tight = Limits {
        max_elements: padded - 1,
        ..Limits::DEFAULT
    };
    assert!(matches!(
        SbvrMatrix::from_bytes_with(&blob, &tight),
        Err(SbvrError::Format(FormatError::Limit {
            field: "max_elements",
            ..
        }))
    ));
    let exact = Limits {
        max_elements: padded,
        ..Limits::DEFAULT
    };
    assert_eq!(SbvrMatrix::from_bytes_with(&blob, &exact).unwrap(), m);
    // Every truncation, and a trailing byte.
    for len in 0..blob.len() {
        assert!(SbvrMatrix::from_bytes(&blob[..len]).is_err(), "{len}");
    }
    let mut longer = blob.clone();
    longer.push(0);
    assert!(SbvrMatrix::from_bytes(&longer).is_err());
    // Every byte flipped (the CRC catches what the checks do not).
    for pos in 0..blob.len() {
        let mut b = blob.clone();
        b[pos] ^= 0x21;
        assert!(SbvrMatrix::from_bytes(&b).is_err(), "byte {pos}");
    }
}

#[test]
fn container_index_width_follows_the_cache() {
    // The same indices written with the other width (a valid CRC): refused, so each matrix
    // has one container.
    for entries in [3usize, 256, 257] {
        let m = SbvrMatrix::from_encoded(&random_encoded(23, 20, 130, 2, entries, &[])).unwrap();
        assert_eq!(m.wide_index(), entries > 256);
        let cache: Vec<u16> = m.coefficients().iter().map(|c| c.to_bits()).collect();
        let narrow: Vec<u8> = m.index().iter().map(|&i| i as u8).collect();
        let w = Writer::new(&SPEC, &m.fields()).part(m.bit_words());
        let other = if m.wide_index() {
            w.part(&narrow).part::<u16>(&[])
        } else {
            w.part::<u8>(&[]).part(m.index())
        }
        .part(&cache)
        .finish();
        let e = SbvrMatrix::from_bytes(&other).unwrap_err();
        assert!(
            core_error(&e, |c| matches!(c, FormatError::Header { .. })),
            "L={entries}: {e}"
        );
        // Both parts filled.
        let both = Writer::new(&SPEC, &m.fields())
            .part(m.bit_words())
            .part(&narrow)
            .part(m.index())
            .part(&cache)
            .finish();
        assert!(SbvrMatrix::from_bytes(&both).is_err(), "L={entries}");
        // The canonical one, written the same way, is the matrix's container.
        let w = Writer::new(&SPEC, &m.fields()).part(m.bit_words());
        let same = if m.wide_index() {
            w.part::<u8>(&[]).part(m.index())
        } else {
            w.part(&narrow).part::<u16>(&[])
        }
        .part(&cache)
        .finish();
        assert_eq!(same, m.to_bytes());
    }
}

// ---------------------------------------------------------------------------------------------
// Sizes.

#[test]
fn sizes_add_up() {
    for (rows, cols, bits, entries) in [(1, 1, 2, 1), (17, 300, 3, 5), (40, 129, 8, 300)] {
        let m =
            SbvrMatrix::from_encoded(&random_encoded(31, rows, cols, bits, entries, &[])).unwrap();
        let g = Geometry::new(rows, cols, bits as usize);
        let (b, i, c) = m.part_bytes();
        let isz = if entries > 256 { 2 } else { 1 };
        assert_eq!(
            (b, i, c),
            (
                8 * g.bit_words(),
                isz * g.index_len(),
                2 * entries * bits as usize
            )
        );
        let sb = m.size_breakdown();
        assert_eq!(sb.parts_bytes(), (b + i + c) as u64);
        assert_eq!(sb.kernel_bytes(), (b + i + c) as u64);
        assert_eq!(sb.bytes_of("bitvectors"), Some(b as u64));
        assert_eq!(sb.bytes_of("coefficient cache"), Some(c as u64));
        let (i8b, i16b) = if isz == 2 { (0, i) } else { (i, 0) };
        assert_eq!(sb.bytes_of("indices (u8)"), Some(i8b as u64));
        assert_eq!(sb.bytes_of("indices (u16)"), Some(i16b as u64));
        assert_eq!(sb.container_bytes, m.to_bytes().len() as u64);
        assert!(sb.overhead_bytes() >= SPEC.header_bytes() as u64);
        assert_eq!((sb.rows, sb.cols), (rows, cols));
        let bpw = (b + i + c) as f64 * 8.0 / (rows * cols) as f64;
        assert_eq!(m.bits_per_weight(), bpw);
        assert!((sb.kernel_bits_per_weight() - bpw).abs() < 1e-12);
        assert_eq!(m.size_breakdown(), CompressedMatrix::size_breakdown(&m));
    }
    // Large and aligned: close to bits + 8 / 128 (u8 index) bits per weight.
    let m = SbvrMatrix::from_encoded(&random_encoded(32, 64, 1024, 4, 16, &[])).unwrap();
    let want = 4.0 + 8.0 / 128.0 + 16.0 * 4.0 * 16.0 / (64.0 * 1024.0);
    assert!(
        (m.bits_per_weight() - want).abs() < 1e-9,
        "{}",
        m.bits_per_weight()
    );
}
