//! The format-agnostic harness of `cmv_format::testing` over BEAM: small matrices (1x1,
//! 3x67 and a few odd shapes) at widths 1, 7, 33 and 64 in every layout round-trip
//! canonically, and seeded mutations of their containers (with the CRC as it was and
//! re-fixed) are refused or load as other valid matrices, never panic.

use beam_pack::{Layout, PackedMatrix};
use cmv_format::testing::{SeededRng, check_mutations, round_trip};
use cmv_format::{CompressedMatrix, HeaderCode};

/// Mutations per matrix (beyond the header sweep).
const MUTATIONS: usize = 2000;

fn mask(bits: u32) -> u64 {
    if bits == 64 {
        u64::MAX
    } else {
        (1 << bits) - 1
    }
}

fn matrices() -> Vec<(String, PackedMatrix)> {
    let mut out = Vec::new();
    let shapes = [(1, 1), (3, 67), (5, 9), (2, 1)];
    for (k, &(rows, cols)) in shapes.iter().enumerate() {
        for bits in [1, 7, 33, 64] {
            let mut rng = SeededRng::new(k as u64 * 100 + u64::from(bits));
            let v: Vec<u64> = (0..rows * cols)
                .map(|i| match i % 5 {
                    0 => mask(bits),
                    _ => rng.next_u64() & mask(bits),
                })
                .collect();
            for &layout in Layout::ALL {
                let m = PackedMatrix::pack(&v, rows, cols, bits, layout).unwrap();
                out.push((format!("{rows}x{cols} b={bits} {layout:?}"), m));
            }
        }
    }
    out
}

#[test]
fn beam_round_trips() {
    for (name, m) in matrices() {
        let blob = round_trip(&m);
        assert_eq!(
            blob.len() as u64,
            m.size_breakdown().container_bytes,
            "{name}"
        );
    }
}

#[test]
fn beam_survives_mutations() {
    for (k, (name, m)) in matrices().into_iter().enumerate() {
        let blob = m.container_bytes();
        let report = check_mutations::<PackedMatrix>(&blob, 5000 + k as u64, MUTATIONS);
        assert!(report.refused_fixed > 0, "{name}: {report:?}");
    }
}
