//! The format-agnostic harness of `cmv_format::testing` over MatVANS: small matrices of odd
//! shapes in every layout (automatic and forced model precisions, lane segments, a constant matrix, the
//! extreme values) round-trip canonically, and seeded mutations of their containers (with the
//! CRC as it was and re-fixed) are refused or load as other valid matrices, never panic. The
//! version-1 fixtures, read by the legacy reader, are mutated the same way (CRC at byte 48).

use ans_codec::{AnsMatrix, EncodeOptions, Layout};
use cmv_format::CompressedMatrix;
use cmv_format::testing::{check_legacy_mutations, check_mutations, round_trip, seeded_vec};

/// Mutations per matrix (beyond the header sweep).
const MUTATIONS: usize = 4000;

fn matrices() -> Vec<(String, AnsMatrix)> {
    let mut out = Vec::new();
    let shapes = [(1, 1), (1, 200), (70, 1), (37, 150), (33, 129)];
    for (k, &(rows, cols)) in shapes.iter().enumerate() {
        let w = seeded_vec::<i8>(k as u64, rows * cols);
        for layout in [Layout::WarpRows, Layout::WarpStripes] {
            for precision in [None, Some(7), Some(12)] {
                let opts = EncodeOptions {
                    layout,
                    precision,
                    ..EncodeOptions::default()
                };
                let m = AnsMatrix::encode_slice(&w, rows, cols, &opts).unwrap();
                out.push((format!("{rows}x{cols} {layout:?} {precision:?}"), m));
            }
        }
        // ans-lanes (8 bits only): the default segment, and short ones (several units per row
        // group, the last one shorter).
        for lane_segment in [None, Some(16), Some(48)] {
            let opts = EncodeOptions {
                layout: Layout::WarpLanes,
                lane_segment,
                ..EncodeOptions::default()
            };
            let m = AnsMatrix::encode_slice(&w, rows, cols, &opts).unwrap();
            out.push((format!("{rows}x{cols} WarpLanes {lane_segment:?}"), m));
        }
    }
    // ans-lanes-esc with exceptions: values in -2..=2 but for rare ones, each its own value.
    let skewed: Vec<i8> = seeded_vec::<i8>(9, 45 * 160)
        .iter()
        .enumerate()
        .map(|(i, &v)| if i % 41 == 7 { v } else { v % 3 })
        .collect();
    for lane_segment in [None, Some(32)] {
        let opts = EncodeOptions {
            layout: Layout::WarpLanesEsc,
            lane_segment,
            ..EncodeOptions::default()
        };
        let m = AnsMatrix::encode_slice(&skewed, 45, 160, &opts).unwrap();
        let r = m.entropy_report();
        assert!(
            r.exception_bytes > 4 * m.units(),
            "the skewed matrix lists exceptions: {r}"
        );
        out.push((format!("45x160 skewed WarpLanesEsc {lane_segment:?}"), m));
    }
    for layout in [
        Layout::WarpRows,
        Layout::WarpStripes,
        Layout::WarpLanes,
        Layout::WarpLanesEsc,
    ] {
        let opts = EncodeOptions {
            layout,
            ..EncodeOptions::default()
        };
        let constant = vec![-3i8; 5 * 40];
        let m = AnsMatrix::encode_slice(&constant, 5, 40, &opts).unwrap();
        out.push((format!("5x40 constant {layout:?}"), m));
        let extremes: Vec<i8> = (0..9 * 31)
            .map(|i| if i % 3 == 0 { -128 } else { 127 })
            .collect();
        let m = AnsMatrix::encode_slice(&extremes, 9, 31, &opts).unwrap();
        out.push((format!("9x31 extremes {layout:?}"), m));
    }
    out
}

#[test]
fn ans_round_trips() {
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
fn ans_survives_mutations() {
    for (k, (name, m)) in matrices().into_iter().enumerate() {
        let blob = m.container_bytes();
        let report = check_mutations::<AnsMatrix>(&blob, 3000 + k as u64, MUTATIONS);
        assert!(report.refused_fixed > 0, "{name}: {report:?}");
        eprintln!("{name}: {report:?}");
    }
}

#[test]
fn ans_v1_fixtures_survive_mutations() {
    for (k, name) in ["v1-rows.cmvans", "v1-stripes.cmvans"]
        .into_iter()
        .enumerate()
    {
        let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
        let blob = std::fs::read(&path).unwrap();
        // Version 1: a 64-byte header with the CRC-32 at byte 48.
        let report = check_legacy_mutations::<AnsMatrix>(&blob, 48, 64, 4000 + k as u64, MUTATIONS);
        assert!(report.refused_fixed > 0, "{name}: {report:?}");
        assert!(report.loaded_fixed > 0, "{name}: {report:?}");
        eprintln!("{name}: {report:?}");
    }
}
