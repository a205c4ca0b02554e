//! The big-codebook kernel's layout and arithmetic on the CPU (`vq_codebook::big`): which
//! matrices it takes, and its fp32 product (the very code planes, fragment-order codebook,
//! tables and lookups the GPU uses) against the f64 reference, for one and two stages, 4 to
//! 12 bits and odd shapes.

use half::f16;
use vq_codebook::{EncodeOptions, Scope, VqConfig, VqMatrix};
use vq_kernels::bigmma::{BM_GEMV, BM_T64};

mod common;
use common::{tile, weights};

fn rel(got: &[f32], want: &[f64]) -> f64 {
    vq_codebook::cmv_format::relative_error(got.iter().map(|&v| f64::from(v)), want)
}

fn tensor(bits: u32, residuals: usize) -> VqConfig {
    VqConfig {
        vec: 8,
        bits,
        residuals,
        scope: Scope::Tensor,
    }
}

fn encode(config: VqConfig, rows: usize, cols: usize, seed: u64) -> VqMatrix {
    let opts = EncodeOptions {
        iters: 2,
        ..EncodeOptions::with(config)
    };
    VqMatrix::encode(&weights(rows * cols, seed), rows, cols, &opts).unwrap()
}

#[test]
fn the_big_model_matches_the_reference() {
    let cases = [
        (VqConfig::aqlm3(), 300, 96),
        (VqConfig::aqlm3(), 1, 8),
        (VqConfig::aqlm3(), 5, 3),
        (tensor(12, 1), 130, 70),
        (tensor(9, 2), 1031, 40),
        (tensor(4, 2), 64, 17),
        (tensor(10, 1), 2100, 24),
    ];
    for (i, (config, rows, cols)) in cases.into_iter().enumerate() {
        let m = encode(config, rows, cols, i as u64 + 1);
        let layout = m
            .big_layout()
            .unwrap_or_else(|| panic!("{config:?} {rows}x{cols} not taken"));
        assert_eq!(layout.codes.len(), layout.geom.code_words());
        assert_eq!(layout.codebook.len(), layout.geom.codebook_words());
        let x: Vec<f16> = weights(cols, 77 + i as u64)
            .iter()
            .map(|v| f16::from_f32(v * 20.0))
            .collect();
        let want = m.reference(&x, 1).unwrap();
        let got = m.big_model(&layout, &x);
        let e = rel(&got, &want);
        assert!(e < 1e-5, "{config:?} {rows}x{cols}: {e:e}");
    }
}

/// The tensor-core kernel's model (`vq_kernels::bigmma`) over the same layout: every batch
/// size class, shapes across row blocks (512 rows) and slabs (128 columns), odd columns.
#[test]
fn the_big_mma_model_matches_the_reference() {
    // (config, rows, cols, batch, variant: BM_GEMV up to 16 vectors, exact stage sums;
    // BM_T64 up to 64, the stages added in fp16)
    let cases = [
        (VqConfig::aqlm3(), 600, 300, 3, BM_GEMV, 1e-5),
        (VqConfig::aqlm3(), 1, 8, 1, BM_GEMV, 1e-5),
        (VqConfig::aqlm3(), 5, 3, 16, BM_GEMV, 1e-5),
        (VqConfig::aqlm3(), 1030, 136, 9, BM_GEMV, 1e-5),
        (tensor(9, 2), 1031, 40, 8, BM_GEMV, 1e-5),
        (tensor(4, 2), 64, 17, 2, BM_GEMV, 1e-5),
        (VqConfig::aqlm3(), 300, 136, 40, BM_T64, 5e-4),
        (tensor(6, 2), 700, 30, 64, BM_T64, 5e-4),
    ];
    for (i, (config, rows, cols, batch, shape, tol)) in cases.into_iter().enumerate() {
        let m = encode(config, rows, cols, i as u64 + 11);
        let layout = m.big_layout().unwrap();
        let x: Vec<f16> = weights(batch * cols, 91 + i as u64)
            .iter()
            .map(|v| f16::from_f32(v * 20.0))
            .collect();
        let want = m.reference(&x, batch).unwrap();
        let got = m
            .big_mma_model(&layout, &x, batch, shape)
            .unwrap_or_else(|| panic!("{config:?} {rows}x{cols} not taken"));
        assert_eq!(got.len(), batch * rows);
        let e = rel(&got, &want);
        assert!(e < tol, "{config:?} {rows}x{cols} batch {batch}: {e:e}");
        // Each vector on its own too: a vector's sums do not depend on the others.
        for n in [0, batch - 1] {
            let xn = &x[n * cols..(n + 1) * cols];
            let one = m.big_mma_model(&layout, xn, 1, shape).unwrap();
            assert_eq!(&got[n * rows..(n + 1) * rows], &one[..], "vector {n}");
        }
    }
    // One stage: the table kernel's layout, but not this kernel's.
    let m = encode(tensor(12, 1), 130, 70, 5);
    assert!(m.big_geometry().is_some());
    assert!(m.big_mma_geometry().is_none());
    assert!(
        m.big_mma_model(&m.big_layout().unwrap(), &[f16::ZERO; 70], 1, BM_GEMV)
            .is_none()
    );
}

#[test]
fn non_finite_inputs_reach_only_their_rows() {
    let (rows, cols) = (64, 40);
    let m = encode(VqConfig::aqlm3(), rows, cols, 3);
    let mut x = vec![f16::from_f32(0.25); cols];
    x[39] = f16::INFINITY;
    let got = m.big_model(&m.big_layout().unwrap(), &x);
    let want = m.reference(&x, 1).unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.is_finite(), w.is_finite(), "{g} vs {w}");
    }
}

#[test]
fn which_matrices_the_big_kernel_takes() {
    assert!(
        encode(VqConfig::aqlm3(), 16, 64, 9)
            .big_geometry()
            .is_some()
    );
    assert!(encode(tensor(8, 1), 16, 64, 9).big_geometry().is_some());
    // Three stages, vectors of 4, 13+ bits, tiles: not taken.
    assert!(encode(tensor(6, 3), 16, 64, 9).big_geometry().is_none());
    let v4 = VqConfig {
        vec: 4,
        ..tensor(8, 1)
    };
    assert!(encode(v4, 16, 64, 9).big_geometry().is_none());
    assert!(encode(tensor(13, 1), 8, 16, 9).big_geometry().is_none());
    let tiles = VqConfig {
        vec: 8,
        ..tile(8, 64, 8)
    };
    assert!(encode(tiles, 16, 64, 9).big_geometry().is_none());
}
