//! The tensor-core kernel's layout and arithmetic on the CPU (`vq_codebook::mma`): which
//! matrices it takes, and its product (the very replicated table, staged input fragments,
//! byte codes, lane addresses and fragment placement the GPU uses) against the f64 reference,
//! for every configuration it takes, odd shapes, batch 1 to 16, both row-group counts and
//! several work splits.

use half::f16;
use vq_codebook::mma::choose_geometry;
use vq_codebook::{EncodeOptions, MmaGeometry, VqConfig, VqMatrix};

mod common;
use common::{tile, weights};

fn rel(got: &[f32], want: &[f64]) -> f64 {
    vq_codebook::cmv_format::relative_error(got.iter().map(|&v| f64::from(v)), want)
}

#[test]
fn the_mma_model_matches_the_reference() {
    let cases = [
        (VqConfig::gptvq2(), 600, 520),
        (VqConfig::gptvq2(), 1, 4),
        (VqConfig::gptvq2_256(), 300, 700),
        (VqConfig::cq4(), 129, 257),
        (VqConfig::cq2(), 70, 1001),
        (tile(256, 256, 8), 300, 515),
        (tile(512, 128, 2), 97, 200),
        // One tile row of 40 rows (not a multiple of 256) is on the grid.
        (tile(40, 128, 4), 40, 300),
    ];
    for (i, (config, rows, cols)) in cases.into_iter().enumerate() {
        let w = weights(rows * cols, i as u64 + 1);
        let m = VqMatrix::encode(&w, rows, cols, &EncodeOptions::with(config)).unwrap();
        for batch in [1, 3, 8, 9, 16] {
            let x: Vec<f16> = weights(batch * cols, 77 + i as u64)
                .iter()
                .map(|v| f16::from_f32(v * 20.0))
                .collect();
            let want = m.reference(&x, batch).unwrap();
            for r in [2, 4] {
                let Some(layout) = m.mma_layout(r) else {
                    // Only 256-row tiles with several tile rows are off the grid, at r = 4.
                    assert!(r == 4 && m.geometry().tile_rows == 256 && m.geometry().tiles_r > 1);
                    continue;
                };
                assert_eq!(layout.codes.len() * 4, layout.geom.code_bytes());
                for grid in [1, 3, 1000] {
                    let grid = grid.min(layout.geom.units() as u32);
                    let got = m.mma_model(&layout, &x, batch, grid);
                    let e = rel(&got, &want);
                    assert!(
                        e < 1e-5,
                        "{config:?} {rows}x{cols} batch {batch} r {r} grid {grid}: {e:e}"
                    );
                }
            }
        }
    }
}

#[test]
fn the_kernel_takes_one_stage_of_8_bit_codes_on_its_grid() {
    let w = weights(512 * 256, 5);
    let enc = |c: VqConfig, rows: usize, cols: usize| {
        VqMatrix::encode(&w[..rows * cols], rows, cols, &EncodeOptions::with(c)).unwrap()
    };
    assert!(enc(VqConfig::aqlm3(), 64, 64).mma_geometry(2).is_none());
    assert!(enc(tile(64, 128, 4), 128, 128).mma_geometry(2).is_none());
    assert!(enc(tile(256, 64, 4), 256, 256).mma_geometry(2).is_none());
    assert!(enc(tile(256, 64, 4), 256, 64).mma_geometry(2).is_some());
    let v3 = VqConfig {
        vec: 3,
        ..VqConfig::cq2()
    };
    assert!(enc(v3, 64, 63).mma_geometry(2).is_none());
    // R = 4 needs 512-row tiles (or one tile row); 256-row tiles take R = 2 only.
    let m = enc(VqConfig::gptvq2_256(), 512, 256);
    let rs: Vec<usize> = m.mma_geometries().iter().map(|g| g.r).collect();
    assert_eq!(rs, [2]);
    let pick = |geoms: &[MmaGeometry], batch| choose_geometry(geoms, batch, 132).map(|g| g.r);
    assert_eq!(pick(&m.mma_geometries(), 1), Some(2));
    // Both: 4 for at most 3 vectors (v >= 4), or with at least 8 units per SM; else 2.
    let v2 = enc(VqConfig::cq4(), 512, 256).mma_geometries();
    assert_eq!(choose_geometry(&v2, 1, 132).map(|g| g.r), Some(2));
    let m = enc(VqConfig::cq2(), 512, 256);
    let geoms = m.mma_geometries();
    assert_eq!(
        geoms.iter().map(|g| (g.r, g.units())).collect::<Vec<_>>(),
        [(2, 4), (4, 2)]
    );
    assert_eq!(
        (
            pick(&geoms, 1),
            pick(&geoms, 3),
            pick(&geoms, 4),
            pick(&geoms, 16)
        ),
        (Some(4), Some(4), Some(2), Some(2))
    );
    let big = MmaGeometry::new(28672, 8192, 4, (512, 128, 64), 4).unwrap();
    assert_eq!(
        choose_geometry(&[geoms[0], big], 16, 132).map(|g| g.r),
        Some(4)
    );
    assert_eq!(pick(&[], 1), None);
    // The largest geometry's layout serves the smaller: the same bytes, padded further.
    let (l2, l4) = (m.mma_layout(2).unwrap(), m.mma_layout(4).unwrap());
    assert!(l4.codes.len() >= l2.codes.len());
    assert_eq!(l4.codes[..l2.codes.len()], l2.codes[..]);
    assert!(l4.codes[l2.codes.len()..].iter().all(|&w| w == 0));
}

/// The GEMM's CPU model (its input, code and table stages, lane offsets, lookups and fragment
/// placement) against the f64 reference: token counts across one and several 128-token
/// blocks, rows and columns off the 256 x 128 block grid, per-tensor and tile codebooks,
/// every vector size, codes laid out for either row-group count.
#[test]
fn the_gemm_model_matches_the_reference() {
    let cases = [
        (VqConfig::gptvq2(), 600, 520),
        (VqConfig::gptvq2_256(), 300, 264),
        (VqConfig::cq4(), 129, 256),
        (VqConfig::cq2(), 70, 136),
        (tile(256, 256, 8), 300, 512),
        (tile(40, 128, 4), 40, 8),
    ];
    for (i, (config, rows, cols)) in cases.into_iter().enumerate() {
        let w = weights(rows * cols, i as u64 + 11);
        let m = VqMatrix::encode(&w, rows, cols, &EncodeOptions::with(config)).unwrap();
        assert!(m.gemm_takes(), "{config:?}");
        for tokens in [17, 130] {
            let x: Vec<f16> = weights(tokens * cols, 91 + i as u64)
                .iter()
                .map(|v| f16::from_f32(v * 20.0))
                .collect();
            let want = m.reference(&x, tokens).unwrap();
            for layout in m.mma_geometries().iter().filter_map(|g| m.mma_layout(g.r)) {
                let got = m.gemm_model(&layout, &x, tokens).unwrap();
                let e = rel(&got, &want);
                assert!(
                    e < 1e-5,
                    "{config:?} {rows}x{cols} tokens {tokens} r {}: {e:e}",
                    layout.geom.r
                );
            }
        }
    }
}

#[test]
fn the_gemm_refuses_what_it_does_not_take() {
    let w = weights(512 * 264, 6);
    let enc = |c: VqConfig, rows: usize, cols: usize| {
        VqMatrix::encode(&w[..rows * cols], rows, cols, &EncodeOptions::with(c)).unwrap()
    };
    // Columns not a multiple of 8, a second residual stage, 128-row tiles.
    let odd = enc(VqConfig::gptvq2(), 64, 260);
    assert!(!odd.gemm_takes());
    let layout = odd.mma_layout(2).unwrap();
    assert!(
        odd.gemm_model(&layout, &[f16::ZERO; 17 * 260], 17)
            .is_none()
    );
    assert!(!enc(VqConfig::aqlm3(), 64, 64).gemm_takes());
    assert!(!enc(tile(128, 128, 4), 512, 128).gemm_takes());
    assert!(enc(tile(256, 128, 4), 512, 128).gemm_takes());
}
