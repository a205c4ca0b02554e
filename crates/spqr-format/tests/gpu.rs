//! GPU tests: the SpQR kernel against the CPU reference, CSR and PTCSR, batch 1 to 16.
//! Skipped (with a message) where there is no GPU; `CMV_REQUIRE_GPU=1` makes that a failure.

use half::f16;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal};
use spqr_format::cmv_format::{CompressedMatrix, DeviceGemv, FormatError};
use spqr_format::cmv_runtime::gpu_for_tests;
use spqr_format::gpu::{DeviceSpqrMatrix, SpqrGemv};
use spqr_format::{GPU_TOLERANCE, OutlierFormat, QuantizeOptions, SpqrError, SpqrMatrix, quantize};

fn relative_error(got: &[f16], want: &[f64]) -> f64 {
    spqr_format::cmv_format::relative_error(got.iter().map(|v| f64::from(v.to_f32())), want)
}

#[test]
fn kernel_matches_the_cpu_reference() {
    let Some(gpu) = gpu_for_tests("kernel_matches_the_cpu_reference") else {
        return;
    };
    let spqr = SpqrGemv::new(&gpu).unwrap();
    // Blocks of one and of two tile rows (4 to 16 vectors; one where the tile rows are odd).
    let mut spqr1 = SpqrGemv::new(&gpu).unwrap();
    spqr1.set_block_rows(Some(1)).unwrap();
    let mut spqr2 = SpqrGemv::new(&gpu).unwrap();
    spqr2.set_block_rows(Some(2)).unwrap();
    let mut rng = StdRng::seed_from_u64(1);
    let normal = Normal::new(0.0f32, 1.0).unwrap();
    for (rows, cols) in [
        (1, 1),
        (16, 16),
        (17, 33),
        (100, 500),
        (256, 4096),
        (1000, 1000),
        (48, 8200),
    ] {
        let w: Vec<f32> = (0..rows * cols).map(|_| normal.sample(&mut rng)).collect();
        for fraction in [0.0, 0.01, 0.05] {
            let opts = QuantizeOptions {
                outlier_fraction: fraction,
                ..QuantizeOptions::default()
            };
            let m = quantize(&w, rows, cols, &opts).unwrap();
            let mut dm = DeviceSpqrMatrix::upload(&gpu, &m).unwrap();
            for batch in [1, 2, 3, 4, 5, 8, 9, 16] {
                let x: Vec<f16> = (0..batch * cols)
                    .map(|_| f16::from_f32(rng.gen_range(-1.0..1.0)))
                    .collect();
                let want = m.gemv_reference(&x, batch).unwrap();
                let dx = gpu.upload(&x).unwrap();
                let bands = rows.div_ceil(16);
                if batch >= 3 {
                    let want_rows = if bands % 2 == 0 { 2 } else { 1 };
                    assert_eq!(spqr2.block_rows(&dm, batch).unwrap(), want_rows);
                    assert_eq!(spqr1.block_rows(&dm, batch).unwrap(), 1);
                } else {
                    assert_eq!(spqr2.block_rows(&dm, batch).unwrap(), 1);
                }
                for format in [OutlierFormat::Csr, OutlierFormat::Ptcsr] {
                    dm.set_outlier_format(format);
                    let runs: &[(&SpqrGemv, &str)] = if batch >= 3 {
                        &[(&spqr, "default"), (&spqr1, "1 row"), (&spqr2, "2 rows")]
                    } else {
                        &[(&spqr, "default")]
                    };
                    for &(k, which) in runs {
                        let mut dy = gpu.upload(&vec![f16::NAN; batch * rows]).unwrap();
                        k.gemv(&dm, &dx, &mut dy, batch).unwrap();
                        let got = gpu.download(&dy).unwrap();
                        let err = relative_error(&got, &want);
                        assert!(
                            err < 1e-3,
                            "{rows}x{cols} outliers {fraction} batch {batch} {format:?} \
                             {which}: relative error {err}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn programmatic_launch_gives_the_same_bits() {
    // The kernels of 1 to 16 vectors with programmatic dependent launch (compute capability
    // 9.0; at 2 vectors the sm_80 kernel either way) and without: the same bits, for launches queued back to back with different inputs
    // (each product reads the tile sums of its own prep launch), one and two tile rows, CSR
    // and PTCSR, aligned and unaligned inputs.
    let Some(gpu) = gpu_for_tests("programmatic_launch_gives_the_same_bits") else {
        return;
    };
    let hopper = gpu.info().compute_capability == (9, 0);
    let mut rng = StdRng::seed_from_u64(21);
    let normal = Normal::new(0.0f32, 1.0).unwrap();
    for (rows, cols) in [(256, 4096), (96, 3000), (48, 8200), (32, 37)] {
        let w: Vec<f32> = (0..rows * cols).map(|_| normal.sample(&mut rng)).collect();
        let opts = QuantizeOptions {
            outlier_fraction: 0.02,
            ..QuantizeOptions::default()
        };
        let m = quantize(&w, rows, cols, &opts).unwrap();
        let mut dm = DeviceSpqrMatrix::upload(&gpu, &m).unwrap();
        for block_rows in [1, 2] {
            let mut on = SpqrGemv::with_pdl(&gpu, true).unwrap();
            on.set_routed_programmatic(Some(true));
            let mut off = SpqrGemv::with_pdl(&gpu, false).unwrap();
            assert_eq!(on.uses_pdl(), hopper);
            assert!(!off.uses_pdl());
            on.set_block_rows(Some(block_rows)).unwrap();
            off.set_block_rows(Some(block_rows)).unwrap();
            for batch in [1, 2, 3, 4, 8, 11, 16] {
                for format in [OutlierFormat::Csr, OutlierFormat::Ptcsr] {
                    dm.set_outlier_format(format);
                    let xs: Vec<Vec<f16>> = (0..3)
                        .map(|_| {
                            (0..batch * cols)
                                .map(|_| f16::from_f32(rng.gen_range(-1.0..1.0)))
                                .collect()
                        })
                        .collect();
                    let run = |spqr: &SpqrGemv| -> Vec<Vec<f16>> {
                        let dxs: Vec<_> = xs.iter().map(|x| gpu.upload(x).unwrap()).collect();
                        let mut dys: Vec<_> = (0..xs.len())
                            .map(|_| gpu.upload(&vec![f16::NAN; batch * rows]).unwrap())
                            .collect();
                        // Queued back to back, downloaded after the last.
                        for (dx, dy) in dxs.iter().zip(dys.iter_mut()) {
                            spqr.gemv(&dm, dx, dy, batch).unwrap();
                        }
                        dys.iter().map(|dy| gpu.download(dy).unwrap()).collect()
                    };
                    let (a, b) = (run(&on), run(&off));
                    for (k, (ya, yb)) in a.iter().zip(&b).enumerate() {
                        let want = m.gemv_reference(&xs[k], batch).unwrap();
                        let err = relative_error(ya, &want);
                        assert!(
                            err < GPU_TOLERANCE,
                            "{rows}x{cols} rows/block {block_rows} batch {batch} {format:?} \
                             launch {k}: relative error {err}"
                        );
                        assert!(
                            ya.iter().zip(yb).all(|(p, q)| p.to_bits() == q.to_bits()),
                            "{rows}x{cols} rows/block {block_rows} batch {batch} {format:?} \
                             launch {k}: programmatic launch changed the bits"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn a_chain_of_layers_reads_each_output_after_it_is_written() {
    // A chain as a decoder runs it: each one-vector product (routed and integer-MMA kernels,
    // CSR and PTCSR, whole and split tile rows) reads the vector the one before wrote, queued
    // back to back: with programmatic launch a product starts while the one before still
    // runs. Every step within the tolerance of the CPU on the GPU's own input, and the same
    // bits with and without programmatic launch.
    let Some(gpu) = gpu_for_tests("a_chain_of_layers_reads_each_output_after_it_is_written") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(23);
    let d = 2048;
    // Outputs about as large as the inputs (std 1.3 / sqrt(d) weights).
    let normal = Normal::new(0.0f32, 1.3 / (d as f32).sqrt()).unwrap();
    let w: Vec<f32> = (0..d * d).map(|_| normal.sample(&mut rng)).collect();
    let opts = QuantizeOptions {
        outlier_fraction: 0.02,
        ..QuantizeOptions::default()
    };
    let m = quantize(&w, d, d, &opts).unwrap();
    let x0: Vec<f16> = (0..d)
        .map(|_| f16::from_f32(rng.gen_range(-1.0..1.0)))
        .collect();
    let steps = 8;
    for int8 in [false, true] {
        let mut dm = DeviceSpqrMatrix::upload(&gpu, &m).unwrap();
        dm.set_int8(int8).unwrap();
        for format in [OutlierFormat::Csr, OutlierFormat::Ptcsr] {
            dm.set_outlier_format(format);
            for splits in [None, Some(4)] {
                dm.set_splits(splits).unwrap();
                let mut outs = Vec::new();
                for pdl in [true, false] {
                    let mut spqr = SpqrGemv::with_pdl(&gpu, pdl).unwrap();
                    // Programmatic whatever the rule (this matrix is too short for it).
                    spqr.set_routed_programmatic(Some(pdl));
                    let mut bufs = vec![gpu.upload(&x0).unwrap()];
                    for _ in 0..steps {
                        bufs.push(gpu.upload(&vec![f16::NAN; d]).unwrap());
                    }
                    for i in 0..steps {
                        let (head, tail) = bufs.split_at_mut(i + 1);
                        spqr.gemv(&dm, &head[i], &mut tail[0], 1).unwrap();
                    }
                    let got: Vec<Vec<f16>> =
                        bufs.iter().map(|b| gpu.download(b).unwrap()).collect();
                    for i in 0..steps {
                        let want = m.gemv_reference(&got[i], 1).unwrap();
                        let err = relative_error(&got[i + 1], &want);
                        assert!(
                            err < GPU_TOLERANCE,
                            "int8 {int8} {format:?} splits {splits:?} pdl {}: step {i}: \
                             relative error {err}",
                            spqr.uses_pdl()
                        );
                    }
                    outs.push(got);
                }
                for (i, (a, b)) in outs[0].iter().zip(&outs[1]).enumerate() {
                    assert!(
                        a.iter().zip(b).all(|(p, q)| p.to_bits() == q.to_bits()),
                        "int8 {int8} {format:?} splits {splits:?}: step {i}: programmatic \
                         launch changed the bits"
                    );
                }
            }
        }
    }
}

#[test]
fn both_outlier_walks_match_the_reference() {
    // The outlier warps of 4, 8 and 16 vectors walk the inputs by column or one load per input
    // (`set_transposed_walk`, the `CMV_SPQR_TRANSPOSED` knob): both within the tolerance, with
    // and without programmatic launch, one and two tile rows, CSR and PTCSR.
    let Some(gpu) = gpu_for_tests("both_outlier_walks_match_the_reference") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(33);
    let normal = Normal::new(0.0f32, 1.0).unwrap();
    let (rows, cols) = (96, 3000);
    let w: Vec<f32> = (0..rows * cols).map(|_| normal.sample(&mut rng)).collect();
    let opts = QuantizeOptions {
        outlier_fraction: 0.03,
        ..QuantizeOptions::default()
    };
    let m = quantize(&w, rows, cols, &opts).unwrap();
    let mut dm = DeviceSpqrMatrix::upload(&gpu, &m).unwrap();
    for pdl in [true, false] {
        for block_rows in [1, 2] {
            for walk in [Some(true), Some(false), None] {
                let mut spqr = SpqrGemv::with_pdl(&gpu, pdl).unwrap();
                spqr.set_block_rows(Some(block_rows)).unwrap();
                spqr.set_transposed_walk(walk);
                for batch in [3, 4, 5, 8, 9, 16] {
                    for format in [OutlierFormat::Csr, OutlierFormat::Ptcsr] {
                        dm.set_outlier_format(format);
                        let x: Vec<f16> = (0..batch * cols)
                            .map(|_| f16::from_f32(rng.gen_range(-1.0..1.0)))
                            .collect();
                        let want = m.gemv_reference(&x, batch).unwrap();
                        let dx = gpu.upload(&x).unwrap();
                        let mut dy = gpu.upload(&vec![f16::NAN; batch * rows]).unwrap();
                        spqr.gemv(&dm, &dx, &mut dy, batch).unwrap();
                        let err = relative_error(&gpu.download(&dy).unwrap(), &want);
                        assert!(
                            err < GPU_TOLERANCE,
                            "pdl {pdl}, rows/block {block_rows}, walk {walk:?}, batch \
                             {batch}, {format:?}: relative error {err}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn large_and_small_weights_keep_their_accuracy() {
    // Scales above 63 do not fit the scaled-weights kernel's (3-8 vectors) fp16 arithmetic as
    // they are: the launcher divides them by a power of two and multiplies the result back.
    // The routed kernel (1-2 vectors) scales in fp32 and normalizes each round's inputs by a
    // power of two. Tiny weights (fp16 subnormal scales), large and tiny inputs are covered.
    let Some(gpu) = gpu_for_tests("large_and_small_weights_keep_their_accuracy") else {
        return;
    };
    let spqr = SpqrGemv::new(&gpu).unwrap();
    let mut spqr2 = SpqrGemv::new(&gpu).unwrap();
    spqr2.set_block_rows(Some(2)).unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    let normal = Normal::new(0.0f32, 1.0).unwrap();
    let (rows, cols) = (64, 1024);
    for (wscale, xscale) in [
        (300.0f32, 1.0f32),
        (1e-3, 1.0),
        (0.02, 300.0),
        (20.0, 20.0),
        (1.0, 2e-3),
    ] {
        let w: Vec<f32> = (0..rows * cols)
            .map(|_| wscale * normal.sample(&mut rng))
            .collect();
        let m = quantize(&w, rows, cols, &QuantizeOptions::default()).unwrap();
        let dm = DeviceSpqrMatrix::upload(&gpu, &m).unwrap();
        for batch in [1, 2, 4, 8, 16] {
            let x: Vec<f16> = (0..batch * cols)
                .map(|_| f16::from_f32(xscale * rng.gen_range(-1.0..1.0)))
                .collect();
            let want = m.gemv_reference(&x, batch).unwrap();
            let dx = gpu.upload(&x).unwrap();
            for k in [&spqr, &spqr2] {
                let mut dy = gpu.upload(&vec![f16::NAN; batch * rows]).unwrap();
                k.gemv(&dm, &dx, &mut dy, batch).unwrap();
                let err = relative_error(&gpu.download(&dy).unwrap(), &want);
                assert!(
                    err < 1e-3,
                    "weights x{wscale}, inputs x{xscale}, batch {batch}, {} tile rows per \
                     block: {err}",
                    k.block_rows(&dm, batch).unwrap()
                );
            }
        }
    }
}

#[test]
fn split_tile_rows_add_up_and_reset_their_counters() {
    // Every split of the tile rows gives the reference's result, batch 1 to 16, CSR and PTCSR
    // (the outlier walks are shared out between the parts too); a second launch gives the
    // same bits (the parts meet in a fixed order, and the last part reset the counters).
    let Some(gpu) = gpu_for_tests("split_tile_rows_add_up_and_reset_their_counters") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(11);
    let normal = Normal::new(0.0f32, 1.0).unwrap();
    // 7 tile rows, and 8 (which blocks of two tile rows split at 4 to 16 vectors).
    for ((rows, cols), block_rows) in [((100, 3000), 1), ((128, 3000), 1), ((128, 3000), 2)] {
        let mut spqr = SpqrGemv::new(&gpu).unwrap();
        spqr.set_block_rows(Some(block_rows)).unwrap();
        split_shape(&gpu, &spqr, &mut rng, &normal, rows, cols);
    }
}

fn split_shape(
    gpu: &spqr_format::cmv_runtime::Gpu,
    spqr: &SpqrGemv,
    rng: &mut StdRng,
    normal: &Normal<f32>,
    rows: usize,
    cols: usize,
) {
    let w: Vec<f32> = (0..rows * cols).map(|_| normal.sample(&mut *rng)).collect();
    let opts = QuantizeOptions {
        outlier_fraction: 0.03,
        ..QuantizeOptions::default()
    };
    let m = quantize(&w, rows, cols, &opts).unwrap();
    let mut dm = DeviceSpqrMatrix::upload(gpu, &m).unwrap();
    // 3000 columns: 47 steps of 64.
    assert_eq!(dm.max_splits(), 16);
    assert!(matches!(
        dm.set_splits(Some(0)),
        Err(SpqrError::Splits { splits: 0, max: 16 })
    ));
    assert!(matches!(
        dm.set_splits(Some(17)),
        Err(SpqrError::Splits {
            splits: 17,
            max: 16
        })
    ));
    for batch in [1, 2, 4, 8, 12, 16] {
        let x: Vec<f16> = (0..batch * cols)
            .map(|_| f16::from_f32(rng.gen_range(-1.0..1.0)))
            .collect();
        let want = m.gemv_reference(&x, batch).unwrap();
        let dx = gpu.upload(&x).unwrap();
        for format in [OutlierFormat::Csr, OutlierFormat::Ptcsr] {
            dm.set_outlier_format(format);
            for splits in [Some(1), Some(2), Some(3), Some(7), Some(16), None] {
                dm.set_splits(splits).unwrap();
                let mut dy = gpu.upload(&vec![f16::NAN; batch * rows]).unwrap();
                spqr.gemv(&dm, &dx, &mut dy, batch).unwrap();
                let first = gpu.download(&dy).unwrap();
                let err = relative_error(&first, &want);
                assert!(
                    err < 1e-3,
                    "{rows}x{cols}, {} tile rows per block, batch {batch} {format:?} splits \
                     {splits:?}: relative error {err}",
                    spqr.block_rows(&dm, batch).unwrap()
                );
                spqr.gemv(&dm, &dx, &mut dy, batch).unwrap();
                let again = gpu.download(&dy).unwrap();
                assert!(
                    first
                        .iter()
                        .zip(&again)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{rows}x{cols} batch {batch} {format:?} splits {splits:?}: a second launch \
                     differs"
                );
            }
        }
    }
}

#[test]
fn bad_arguments_are_errors() {
    let Some(gpu) = gpu_for_tests("bad_arguments_are_errors") else {
        return;
    };
    let spqr = SpqrGemv::new(&gpu).unwrap();
    let w = vec![0.5f32; 32 * 64];
    let m = quantize(&w, 32, 64, &QuantizeOptions::default()).unwrap();
    let dm = DeviceSpqrMatrix::upload(&gpu, &m).unwrap();
    let x = gpu.upload(&[f16::ONE; 64]).unwrap();
    let mut y = gpu.alloc_zeros::<f16>(32).unwrap();
    assert!(
        matches!(
            spqr.gemv(&dm, &x, &mut y, 2),
            Err(SpqrError::Format(FormatError::Length { what: "input", .. }))
        ),
        "x too short for batch 2"
    );
    assert!(matches!(
        spqr.gemv(&dm, &x, &mut y, 0),
        Err(SpqrError::Format(FormatError::Batch { batch: 0, max: 16 }))
    ));
    assert!(matches!(
        spqr.gemv(&dm, &x, &mut y, 17),
        Err(SpqrError::Format(FormatError::Batch { batch: 17, max: 16 }))
    ));
    assert!(spqr.gemv(&dm, &x, &mut y, usize::MAX).is_err());
    spqr.gemv(&dm, &x, &mut y, 1).unwrap();
    let got = gpu.download(&y).unwrap();
    for v in got {
        assert!((v.to_f32() - 32.0).abs() < 0.05, "{v}");
    }
}

#[test]
fn calibrated_and_permuted_matrices_run_on_permuted_inputs() {
    use spqr_format::Calibration;
    let Some(gpu) = gpu_for_tests("calibrated_and_permuted_matrices_run_on_permuted_inputs") else {
        return;
    };
    let spqr = SpqrGemv::new(&gpu).unwrap();
    let mut rng = StdRng::seed_from_u64(3);
    let normal = Normal::new(0.0f32, 1.0).unwrap();
    let (rows, cols, samples) = (64, 96, 200);
    let w: Vec<f32> = (0..rows * cols).map(|_| normal.sample(&mut rng)).collect();
    let x_cal: Vec<f32> = (0..samples * cols)
        .map(|_| normal.sample(&mut rng))
        .collect();
    let opts = QuantizeOptions {
        calibration: Some(Calibration::Inputs { x: x_cal, samples }),
        permute: true,
        ..QuantizeOptions::default()
    };
    let m = quantize(&w, rows, cols, &opts).unwrap();
    assert!(m.input_permutation().is_some());
    let dm = DeviceSpqrMatrix::upload(&gpu, &m).unwrap();
    assert!(dm.is_permuted());
    for batch in [1, 4] {
        let x: Vec<f16> = (0..batch * cols)
            .map(|_| f16::from_f32(rng.gen_range(-1.0..1.0)))
            .collect();
        let want = m.gemv_reference(&x, batch).unwrap();
        let dx = gpu.upload(&m.permute_input(&x, batch).unwrap()).unwrap();
        let mut dy = gpu.alloc_zeros::<f16>(batch * rows).unwrap();
        spqr.gemv(&dm, &dx, &mut dy, batch).unwrap();
        let err = relative_error(&gpu.download(&dy).unwrap(), &want);
        assert!(err < 1e-3, "batch {batch}: relative error {err}");
    }
}

#[test]
fn hybrid_mode_times_both_encodings_and_records_the_choice() {
    let Some(gpu) = gpu_for_tests("hybrid_mode_times_both_encodings_and_records_the_choice") else {
        return;
    };
    let spqr = SpqrGemv::new(&gpu).unwrap();
    let mut rng = StdRng::seed_from_u64(9);
    let normal = Normal::new(0.0f32, 1.0).unwrap();
    let (rows, cols) = (512, 2048);
    let w: Vec<f32> = (0..rows * cols).map(|_| normal.sample(&mut rng)).collect();
    let mut m = quantize(&w, rows, cols, &QuantizeOptions::default()).unwrap();
    let mut dm = DeviceSpqrMatrix::upload(&gpu, &m).unwrap();
    let (choice, csr_us, ptcsr_us) = spqr.choose_outlier_format(&gpu, &mut dm, &mut m).unwrap();
    assert!(csr_us > 0.0 && ptcsr_us > 0.0);
    assert_eq!(
        choice,
        if ptcsr_us < csr_us {
            OutlierFormat::Ptcsr
        } else {
            OutlierFormat::Csr
        }
    );
    assert_eq!((m.outlier_format(), dm.outlier_format()), (choice, choice));
    let reloaded = spqr_format::SpqrMatrix::from_bytes(&m.to_bytes()).unwrap();
    assert_eq!(
        reloaded.outlier_format(),
        choice,
        "the choice is stored in the container"
    );
}

#[test]
fn non_finite_inputs_make_their_vectors_non_finite_as_on_the_cpu() {
    let Some(gpu) = gpu_for_tests("non_finite_inputs_make_their_vectors_non_finite_as_on_the_cpu")
    else {
        return;
    };
    let spqr = SpqrGemv::new(&gpu).unwrap();
    let mut rng = StdRng::seed_from_u64(5);
    let normal = Normal::new(0.0f32, 1.0).unwrap();
    let (rows, cols) = (48, 1000);
    let w: Vec<f32> = (0..rows * cols).map(|_| normal.sample(&mut rng)).collect();
    let m = quantize(&w, rows, cols, &QuantizeOptions::default()).unwrap();
    let mut dm = DeviceSpqrMatrix::upload(&gpu, &m).unwrap();
    for bad in [f16::NAN, f16::INFINITY, f16::NEG_INFINITY] {
        for batch in [1, 2, 4, 8, 16] {
            // The last vector has one non-finite input.
            let mut x: Vec<f16> = (0..batch * cols)
                .map(|_| f16::from_f32(rng.gen_range(-1.0..1.0)))
                .collect();
            x[(batch - 1) * cols + 77] = bad;
            let want = m.gemv_reference(&x, batch).unwrap();
            let dx = gpu.upload(&x).unwrap();
            for format in [OutlierFormat::Csr, OutlierFormat::Ptcsr] {
                dm.set_outlier_format(format);
                let mut dy = gpu.upload(&vec![f16::ZERO; batch * rows]).unwrap();
                spqr.gemv(&dm, &dx, &mut dy, batch).unwrap();
                let got = gpu.download(&dy).unwrap();
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert_eq!(
                        g.is_finite(),
                        w.is_finite(),
                        "{bad} batch {batch} {format:?} output {i}: GPU {g}, CPU {w}"
                    );
                }
                let last = (batch - 1) * rows;
                assert!(want[last..].iter().all(|v| !v.is_finite()));
                if batch > 1 {
                    let err = relative_error(&got[..last], &want[..last]);
                    assert!(err < 1e-3, "{bad} batch {batch} {format:?}: {err}");
                }
            }
        }
    }
}

#[test]
fn spqr_is_a_device_gemv() {
    let Some(gpu) = gpu_for_tests("spqr_is_a_device_gemv") else {
        return;
    };
    assert_eq!(<SpqrMatrix as DeviceGemv>::MAX_GPU_BATCH, 16);
    let kernels = SpqrMatrix::load(&gpu).unwrap();
    let mut rng = StdRng::seed_from_u64(13);
    let normal = Normal::new(0.0f32, 1.0).unwrap();
    let (rows, cols) = (200, 700);
    let w: Vec<f32> = (0..rows * cols).map(|_| normal.sample(&mut rng)).collect();
    for (name, opts) in SpqrMatrix::variants() {
        let m = SpqrMatrix::encode_slice(&w, rows, cols, &opts).unwrap();
        let dm = DeviceGemv::upload(&m, &gpu).unwrap();
        let copy = SpqrMatrix::clone_device(&dm).unwrap();
        assert_eq!(SpqrMatrix::bytes_read(&copy), dm.bytes_read());
        for batch in 1..=SpqrMatrix::MAX_GPU_BATCH {
            let x: Vec<f16> = (0..batch * cols)
                .map(|_| f16::from_f32(rng.gen_range(-1.0..1.0)))
                .collect();
            let want = m.reference(&x, batch).unwrap();
            let dx = gpu.upload(&x).unwrap();
            let mut out = SpqrMatrix::alloc_out(&gpu, rows, batch).unwrap();
            SpqrMatrix::gemv(&kernels, &copy, &dx, &mut out, batch).unwrap();
            SpqrMatrix::finish(&kernels, &gpu).unwrap();
            let check = SpqrMatrix::check(&gpu, &out, &want).unwrap();
            assert!(check.passed(), "{name} batch {batch}: {check}");
            assert_eq!(check.tolerance, GPU_TOLERANCE);
        }
        let x = gpu.upload(&vec![f16::ONE; 17 * cols]).unwrap();
        let mut out = SpqrMatrix::alloc_out(&gpu, rows, 17).unwrap();
        assert!(matches!(
            SpqrMatrix::gemv(&kernels, &dm, &x, &mut out, 17),
            Err(SpqrError::Format(FormatError::Batch { batch: 17, max: 16 }))
        ));
    }
}

#[test]
fn integer_kernel_matches_the_reference_and_its_model() {
    // `upload_int8`: one vector through `cmv_spqr_{csr,ptcsr}_i8_b1`, within the tolerance of
    // the f64 reference and within the CPU model's bound (plus the fp16 output rounding) on
    // ordinary and adversarial inputs, with split tile rows; NaN and infinities make the
    // outputs non-finite; more than one vector is a typed error.
    let Some(gpu) = gpu_for_tests("integer_kernel_matches_the_reference_and_its_model") else {
        return;
    };
    let spqr = SpqrGemv::new(&gpu).unwrap();
    let mut rng = StdRng::seed_from_u64(44);
    let normal = Normal::new(0.0f32, 1.0).unwrap();
    for (rows, cols) in [
        (1, 1),
        (16, 16),
        (17, 33),
        (100, 500),
        (256, 4096),
        (48, 8200),
    ] {
        let w: Vec<f32> = (0..rows * cols).map(|_| normal.sample(&mut rng)).collect();
        for fraction in [0.0, 0.02] {
            let opts = QuantizeOptions {
                outlier_fraction: fraction,
                ..QuantizeOptions::default()
            };
            let m = quantize(&w, rows, cols, &opts).unwrap();
            let mut dm = DeviceSpqrMatrix::upload_int8(&gpu, &m).unwrap();
            assert!(dm.is_int8());
            for case in 0..3 {
                if case > 0 && cols < 64 {
                    // Outputs that small would be fp16 subnormals.
                    continue;
                }
                let mut x: Vec<f16> = (0..cols)
                    .map(|_| f16::from_f32(rng.gen_range(-1.0..1.0)))
                    .collect();
                if case == 1 {
                    // One large input per 16 columns among tiny ones (3e5 apart; larger
                    // ones would overflow the fp16 outputs).
                    for (c, v) in x.iter_mut().enumerate() {
                        *v = if c % 16 == 5 {
                            f16::from_f32(300.0)
                        } else {
                            f16::from_f32(v.to_f32() * 1e-3)
                        };
                    }
                } else if case == 2 {
                    // Magnitudes from 1e-4 to 1e2 (larger ones would overflow the fp16
                    // outputs).
                    for (c, v) in x.iter_mut().enumerate() {
                        *v = f16::from_f32(v.to_f32() * 10f32.powi((c % 7) as i32 - 4));
                    }
                }
                let want = m.gemv_reference(&x, 1).unwrap();
                let model = m.gemv_int8_model(&x, 1).unwrap();
                let dx = gpu.upload(&x).unwrap();
                for format in [OutlierFormat::Csr, OutlierFormat::Ptcsr] {
                    dm.set_outlier_format(format);
                    for splits in [None, Some(dm.max_splits())] {
                        dm.set_splits(splits).unwrap();
                        let mut dy = gpu.upload(&vec![f16::NAN; rows]).unwrap();
                        spqr.gemv(&dm, &dx, &mut dy, 1).unwrap();
                        let got = gpu.download(&dy).unwrap();
                        let err = relative_error(&got, &want);
                        assert!(
                            err < GPU_TOLERANCE,
                            "{rows}x{cols} case {case} {format:?} {splits:?}: {err}"
                        );
                        for (r, g) in got.iter().enumerate() {
                            let g = f64::from(g.to_f32());
                            // The model's bound, the fp16 rounding of the output and fp32
                            // rounding in another order of the sums.
                            let slack = model.bound[r] * 2.0
                                + want[r].abs() * 2f64.powi(-10)
                                + 2f64.powi(-25);
                            assert!(
                                (g - want[r]).abs() <= slack + 1e-30,
                                "{rows}x{cols} case {case} {format:?} row {r}: GPU {g}, \
                                 reference {}, bound {}",
                                want[r],
                                model.bound[r]
                            );
                        }
                    }
                }
            }
        }
    }
    // Non-finite inputs, and more than one vector.
    let (rows, cols) = (48, 1000);
    let w: Vec<f32> = (0..rows * cols).map(|_| normal.sample(&mut rng)).collect();
    let m = quantize(&w, rows, cols, &QuantizeOptions::default()).unwrap();
    let dm = DeviceSpqrMatrix::upload_int8(&gpu, &m).unwrap();
    for bad in [f16::NAN, f16::INFINITY, f16::NEG_INFINITY] {
        let mut x: Vec<f16> = (0..cols)
            .map(|_| f16::from_f32(rng.gen_range(-1.0..1.0)))
            .collect();
        x[77] = bad;
        let dx = gpu.upload(&x).unwrap();
        let mut dy = gpu.upload(&vec![f16::ZERO; rows]).unwrap();
        spqr.gemv(&dm, &dx, &mut dy, 1).unwrap();
        let got = gpu.download(&dy).unwrap();
        assert!(got.iter().all(|v| !v.is_finite()), "{bad}: {got:?}");
    }
    let dx = gpu.upload(&vec![f16::ONE; 2 * cols]).unwrap();
    let mut dy = gpu.upload(&vec![f16::ZERO; 2 * rows]).unwrap();
    assert!(matches!(
        spqr.gemv(&dm, &dx, &mut dy, 2),
        Err(SpqrError::Int8Batch { batch: 2 })
    ));
}
