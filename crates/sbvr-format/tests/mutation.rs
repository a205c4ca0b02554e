//! The format-agnostic harness of `cmv_format::testing` over SBVR: small matrices (encoded
//! with u8 indices, hand-made with caches of more than 256 entries and so u16 indices; 2 to 8
//! bitvectors; odd shapes) round-trip canonically, and seeded mutations of their containers
//! (with the CRC as it was and re-fixed) are refused or load as other valid matrices, never
//! panic. The fuzz targets' entry points run on seeded inputs.

use cmv_format::CompressedMatrix;
use cmv_format::testing::{
    Hostile, SeededRng, check_hostile_bytes, check_mutations, fuzz_bytes, fuzz_mutate, round_trip,
    seeded_vec,
};
use sbvr_format::{EncodeOptions, Encoded, SbvrMatrix, f16};

/// Mutations per matrix (beyond the header sweep).
const MUTATIONS: usize = 2000;

/// A hand-made matrix: random codes and indices, a cache of `entries` coefficient vectors.
fn hand_made(seed: u64, rows: usize, cols: usize, bits: u32, entries: usize) -> SbvrMatrix {
    let mut rng = SeededRng::new(seed);
    let mask = (1u64 << bits) - 1;
    let e = Encoded {
        bits,
        rows,
        cols,
        coeffs: (0..entries * bits as usize)
            .map(|_| f16::from_f64(rng.normal()))
            .collect(),
        index: (0..rows * cols.div_ceil(128))
            .map(|_| rng.below(entries as u64) as u32)
            .collect(),
        codes: (0..rows * cols)
            .map(|_| (rng.next_u64() & mask) as u8)
            .collect(),
    };
    SbvrMatrix::from_encoded(&e).unwrap()
}

fn matrices() -> Vec<(String, SbvrMatrix)> {
    let mut out = Vec::new();
    for (k, &(rows, cols, bits)) in [(1, 1, 4), (3, 67, 2), (17, 200, 3), (2, 129, 8)]
        .iter()
        .enumerate()
    {
        let w = seeded_vec::<f32>(k as u64, rows * cols);
        let options = EncodeOptions {
            bits,
            ..EncodeOptions::default()
        };
        let m = SbvrMatrix::encode_slice(&w, rows, cols, &options).unwrap();
        assert!(!m.wide_index());
        out.push((format!("{rows}x{cols} n={bits}"), m));
    }
    for (k, &(rows, cols, bits, entries)) in [(5, 130, 3, 300), (1, 1, 8, 257), (16, 257, 2, 400)]
        .iter()
        .enumerate()
    {
        let m = hand_made(10 + k as u64, rows, cols, bits, entries);
        assert!(m.wide_index());
        out.push((format!("{rows}x{cols} n={bits} L={entries} (u16)"), m));
    }
    out
}

#[test]
fn sbvr_round_trips() {
    for (name, m) in matrices() {
        let blob = round_trip(&m);
        assert_eq!(
            blob.len() as u64,
            m.size_breakdown().container_bytes,
            "{name}"
        );
        assert!(
            matches!(
                check_hostile_bytes::<SbvrMatrix>(&blob),
                Hostile::Loaded {
                    upgraded: false,
                    reference_ok: Some(true),
                    ..
                }
            ),
            "{name}"
        );
    }
}

#[test]
fn sbvr_survives_mutations() {
    for (k, (name, m)) in matrices().into_iter().enumerate() {
        let blob = m.container_bytes();
        let report = check_mutations::<SbvrMatrix>(&blob, 3000 + k as u64, MUTATIONS);
        assert!(report.refused_fixed > 0, "{name}: {report:?}");
        // Changed bits, indices and coefficients load as other matrices.
        assert!(report.loaded_fixed > 0, "{name}: {report:?}");
        eprintln!("{name}: {report:?}");
    }
}

#[test]
fn fuzz_entry_points_run() {
    let ms = matrices();
    let mut rng = SeededRng::new(77);
    let (mut loaded, mut untouched) = ([0; 2], 0);
    for i in 0..64 {
        let len = rng.below(96) as usize;
        let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        fuzz_mutate::<SbvrMatrix>(&data);
        fuzz_bytes::<SbvrMatrix>(&data);
        // A valid container, cut and extended: with the CRC as it was, only the untouched
        // ones load (with the CRC re-fixed, a changed last byte may load too).
        let blob = ms[i % ms.len()].1.container_bytes();
        let mut b = blob.clone();
        b.truncate(blob.len() - i % 3);
        b.extend_from_slice(&data[..len.min(i % 2)]);
        untouched += usize::from(b == blob);
        let [plain, fixed] = fuzz_bytes::<SbvrMatrix>(&b);
        loaded[0] += usize::from(matches!(plain, Hostile::Loaded { .. }));
        loaded[1] += usize::from(matches!(fixed, Hostile::Loaded { .. }));
    }
    assert!(untouched > 0);
    assert_eq!(loaded[0], untouched);
    assert!(loaded[1] >= untouched);
}
