//! The format-agnostic harness of `cmv_format::testing` over VQ: small matrices of every
//! preset and some odd configurations round-trip canonically, and seeded mutations of their
//! containers (with the CRC as it was and re-fixed) are refused or load as other valid
//! matrices, never panic. The fuzz targets' entry points run on seeded inputs.

use cmv_format::CompressedMatrix;
use cmv_format::testing::{
    Hostile, SeededRng, check_hostile_bytes, check_mutations, fuzz_bytes, fuzz_mutate, round_trip,
    seeded_vec,
};
use vq_codebook::{EncodeOptions, Scope, VqConfig, VqMatrix};

/// Mutations per matrix (beyond the header sweep).
const MUTATIONS: usize = 1500;

fn matrices() -> Vec<(String, VqMatrix)> {
    let odd = VqConfig {
        vec: 3,
        bits: 5,
        residuals: 3,
        scope: Scope::Tile { rows: 4, cols: 6 },
    };
    let wide = VqConfig {
        vec: 1,
        bits: 16,
        residuals: 1,
        scope: Scope::Tile { rows: 2, cols: 64 },
    };
    [
        (VqConfig::gptvq2(), 3, 67),
        (VqConfig::aqlm3(), 2, 17),
        (VqConfig::cq4(), 1, 1),
        (VqConfig::cq2(), 9, 30),
        (odd, 7, 20),
        (wide, 3, 5),
    ]
    .into_iter()
    .enumerate()
    .map(|(k, (config, rows, cols))| {
        let w = seeded_vec::<f32>(k as u64, rows * cols);
        let m = VqMatrix::encode_slice(&w, rows, cols, &EncodeOptions::with(config)).unwrap();
        (format!("{rows}x{cols} {config:?}"), m)
    })
    .collect()
}

#[test]
fn vq_round_trips() {
    for (name, m) in matrices() {
        let blob = round_trip(&m);
        assert_eq!(
            blob.len() as u64,
            m.size_breakdown().container_bytes,
            "{name}"
        );
        assert!(
            matches!(
                check_hostile_bytes::<VqMatrix>(&blob),
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
fn vq_survives_mutations() {
    for (k, (name, m)) in matrices().into_iter().enumerate() {
        let blob = m.container_bytes();
        let report = check_mutations::<VqMatrix>(&blob, 5000 + k as u64, MUTATIONS);
        assert!(report.refused_fixed > 0, "{name}: {report:?}");
        // Changed codes and codebook values load as other matrices.
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
        fuzz_mutate::<VqMatrix>(&data);
        fuzz_bytes::<VqMatrix>(&data);
        let blob = ms[i % ms.len()].1.container_bytes();
        let mut b = blob.clone();
        b.truncate(blob.len() - i % 3);
        b.extend_from_slice(&data[..len.min(i % 2)]);
        untouched += usize::from(b == blob);
        let [plain, fixed] = fuzz_bytes::<VqMatrix>(&b);
        loaded[0] += usize::from(matches!(plain, Hostile::Loaded { .. }));
        loaded[1] += usize::from(matches!(fixed, Hostile::Loaded { .. }));
    }
    assert!(untouched > 0);
    assert_eq!(loaded[0], untouched);
    assert!(loaded[1] >= untouched);
}
