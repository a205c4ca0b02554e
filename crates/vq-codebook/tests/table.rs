//! The table kernel's layout and arithmetic on the CPU (`vq_codebook::table`): which
//! matrices it takes, and its fp32 product (the very table, rotated codes and `prmt`
//! addresses the GPU uses) against the f64 reference, for every configuration it takes, odd
//! shapes and every chunk size.

use half::f16;
use vq_codebook::{EncodeOptions, VqConfig, VqMatrix};

mod common;
use common::{tile, weights};

fn rel(got: &[f32], want: &[f64]) -> f64 {
    vq_codebook::cmv_format::relative_error(got.iter().map(|&v| f64::from(v)), want)
}

#[test]
fn the_table_model_matches_the_reference() {
    let cases = [
        (VqConfig::gptvq2(), 300, 520),
        (VqConfig::gptvq2(), 1, 4),
        (VqConfig::cq4(), 129, 257),
        (VqConfig::cq2(), 70, 1001),
        (tile(64, 256, 8), 200, 515),
        (tile(32, 64, 2), 97, 200),
        // One tile row of 40 rows (not a multiple of 32) is on the grid.
        (tile(40, 128, 4), 40, 300),
    ];
    for (i, (config, rows, cols)) in cases.into_iter().enumerate() {
        let w = weights(rows * cols, i as u64 + 1);
        let m = VqMatrix::encode(&w, rows, cols, &EncodeOptions::with(config)).unwrap();
        let x: Vec<f16> = weights(cols, 77 + i as u64)
            .iter()
            .map(|v| f16::from_f32(v * 20.0))
            .collect();
        let want = m.reference(&x, 1).unwrap();
        for chunk in [32, 256, 512, 2048] {
            let layout = m
                .table_layout(chunk)
                .unwrap_or_else(|| panic!("{config:?} {rows}x{cols} not taken"));
            assert_eq!(layout.codes.len() * 4, layout.geom.code_bytes());
            let got = m.table_model(&layout, &x);
            let e = rel(&got, &want);
            assert!(e < 1e-5, "{config:?} {rows}x{cols} chunk {chunk}: {e:e}");
        }
    }
}

#[test]
fn non_finite_inputs_reach_only_their_rows() {
    let (rows, cols) = (64, 300);
    let m = VqMatrix::encode(
        &weights(rows * cols, 3),
        rows,
        cols,
        &EncodeOptions::with(VqConfig::cq2()),
    )
    .unwrap();
    let mut x = vec![f16::from_f32(0.25); cols];
    x[299] = f16::INFINITY;
    let got = m.table_model(&m.table_layout(256).unwrap(), &x);
    let want = m.reference(&x, 1).unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.is_finite(), w.is_finite(), "{g} vs {w}");
    }
}

#[test]
fn which_matrices_the_table_kernel_takes() {
    let m = |config: VqConfig, rows: usize, cols: usize| {
        VqMatrix::encode(
            &weights(rows * cols, 9),
            rows,
            cols,
            &EncodeOptions::with(config),
        )
        .unwrap()
    };
    assert!(m(VqConfig::gptvq2(), 64, 300).table_geometry(512).is_some());
    assert!(m(VqConfig::cq4(), 64, 64).table_geometry(512).is_some());
    // 12-bit codes, residual stages, other vector sizes: the stream kernel.
    assert!(m(VqConfig::aqlm3(), 16, 64).table_geometry(512).is_none());
    let two_stages = VqConfig {
        residuals: 2,
        ..VqConfig::cq2()
    };
    assert!(m(two_stages, 16, 64).table_geometry(512).is_none());
    let v3 = VqConfig {
        vec: 3,
        ..VqConfig::cq2()
    };
    assert!(m(v3, 16, 64).table_geometry(512).is_none());
    // Tiles off the grid: 48 rows with two tile rows; 16 vectors with two tile columns.
    assert!(m(tile(48, 128, 4), 96, 128).table_geometry(512).is_none());
    assert!(m(tile(64, 64, 4), 64, 128).table_geometry(512).is_none());
    // Chunks: many items on a large matrix take the largest chunk, few items the smallest.
    let big = m(VqConfig::cq2(), 4096, 512);
    // 4096 rows x 4 slabs on 1 SM: 2731 rows per item, in passes of 512; on many SMs one pass.
    assert_eq!(big.table_chunk(1), 3072);
    assert_eq!(big.table_chunk(1000), 512);
    let g = big.table_geometry(big.table_chunk(1)).unwrap();
    assert_eq!((g.chunk_rows, g.groups), (3072, 2));
}
