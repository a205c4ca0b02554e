//! The format-agnostic harness of `cmv_format::testing` over SpQR: small matrices of odd
//! shapes, with and without outliers, CSR and PTCSR, data-free and GPTQ with a stored column
//! permutation, round-trip canonically, and seeded mutations of their containers (with the
//! CRC as it was and re-fixed) are refused or load as other valid matrices, never panic. The
//! version-1 fixtures, read by the legacy reader, are mutated the same way (CRC at byte 44).

use cmv_format::CompressedMatrix;
use cmv_format::testing::{check_legacy_mutations, check_mutations, round_trip, seeded_vec};
use spqr_format::{Calibration, OutlierFormat, QuantizeOptions, SpqrMatrix};

/// Mutations per matrix (beyond the header sweep).
const MUTATIONS: usize = 6000;

fn options(outliers: f64, format: OutlierFormat) -> QuantizeOptions {
    QuantizeOptions {
        outlier_fraction: outliers,
        outlier_format: format,
        ..QuantizeOptions::default()
    }
}

fn matrices() -> Vec<(String, SpqrMatrix)> {
    let mut out = Vec::new();
    let shapes = [(1, 1), (1, 70), (45, 1), (37, 150), (16, 16)];
    for (k, &(rows, cols)) in shapes.iter().enumerate() {
        let w = seeded_vec::<f32>(k as u64, rows * cols);
        for format in [OutlierFormat::Csr, OutlierFormat::Ptcsr] {
            for outliers in [0.0, 0.05] {
                let m =
                    SpqrMatrix::encode_slice(&w, rows, cols, &options(outliers, format)).unwrap();
                assert_eq!(m.outlier_count() > 0, outliers > 0.0 && rows * cols >= 20);
                out.push((format!("{rows}x{cols} {format:?} outliers {outliers}"), m));
            }
        }
    }
    // GPTQ with the columns permuted: the permutation is stored too.
    let (rows, cols, samples) = (37, 150, 64);
    let w = seeded_vec::<f32>(9, rows * cols);
    let x = seeded_vec::<f32>(10, samples * cols);
    let gptq = QuantizeOptions {
        calibration: Some(Calibration::Inputs { x, samples }),
        permute: true,
        ..options(0.02, OutlierFormat::Ptcsr)
    };
    let m = SpqrMatrix::encode_slice(&w, rows, cols, &gptq).unwrap();
    assert!(m.input_permutation().is_some());
    out.push(("37x150 GPTQ permuted".into(), m));
    out
}

#[test]
fn spqr_round_trips() {
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
fn spqr_survives_mutations() {
    for (k, (name, m)) in matrices().into_iter().enumerate() {
        let blob = m.container_bytes();
        let report = check_mutations::<SpqrMatrix>(&blob, 1000 + k as u64, MUTATIONS);
        assert!(report.refused_fixed > 0, "{name}: {report:?}");
        assert!(report.loaded_fixed > 0, "{name}: {report:?}");
        eprintln!("{name}: {report:?}");
    }
}

#[test]
fn spqr_v1_fixtures_survive_mutations() {
    for (k, name) in ["v1-csr.cmvspqr", "v1-ptcsr.cmvspqr"]
        .into_iter()
        .enumerate()
    {
        let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
        let blob = std::fs::read(&path).unwrap();
        // Version 1: a 64-byte header with the CRC-32 at byte 44.
        let report =
            check_legacy_mutations::<SpqrMatrix>(&blob, 44, 64, 2000 + k as u64, MUTATIONS);
        assert!(report.refused_fixed > 0, "{name}: {report:?}");
        assert!(report.loaded_fixed > 0, "{name}: {report:?}");
        eprintln!("{name}: {report:?}");
    }
}
