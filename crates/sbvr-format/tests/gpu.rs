//! GPU tests: the quantization kernel and the three GEMV ways (binary and int8 tensor cores,
//! CUDA cores) against the CPU reference of the same arithmetic, for 2 to 8 bitvectors, batch 1 to 16, u8 and u16 indices, padded shapes.
//! Skipped (with a message) where there is no GPU; `CMV_REQUIRE_GPU=1` makes that a failure.

use half::f16;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal};
use sbvr_format::cmv_format::{DeviceGemv, FormatError};
use sbvr_format::cmv_runtime::gpu_for_tests;
use sbvr_format::gpu::{DeviceSbvrMatrix, SbvrGemv, Way};
use sbvr_format::{EncodeOptions, GPU_TOLERANCE, SbvrError, SbvrMatrix, encode};

fn relative_error(got: &[f16], want: &[f64]) -> f64 {
    sbvr_format::cmv_format::relative_error(got.iter().map(|v| f64::from(v.to_f32())), want)
}

fn matrix(rng: &mut StdRng, rows: usize, cols: usize, bits: u32, entries: usize) -> SbvrMatrix {
    let normal = Normal::new(0.0f32, 0.02).unwrap();
    let mut w: Vec<f32> = (0..rows * cols).map(|_| normal.sample(rng)).collect();
    // A zero row and a constant run.
    if rows > 2 {
        w[cols..2 * cols].fill(0.0);
        let n = cols.min(128);
        w[2 * cols..2 * cols + n].fill(0.01);
    }
    let opts = EncodeOptions {
        bits,
        entries,
        ..EncodeOptions::default()
    };
    SbvrMatrix::from_encoded(&encode(&w, rows, cols, &opts).unwrap()).unwrap()
}

#[test]
fn every_way_matches_the_reference_for_every_bit_count_and_batch() {
    let Some(gpu) = gpu_for_tests("every_way_matches_the_reference_for_every_bit_count_and_batch")
    else {
        return;
    };
    let k = SbvrGemv::new(&gpu).unwrap();
    // Without programmatic dependent launch: on Hopper the sm_80 kernels, which must give the
    // same bits.
    let k0 = SbvrGemv::with_pdl(&gpu, false).unwrap();
    assert!(!k0.uses_pdl());
    eprintln!("programmatic dependent launch: {}", k.uses_pdl());
    let mut rng = StdRng::seed_from_u64(7);
    let cases = [
        (1, 1, 2, 16),
        (16, 128, 4, 16),
        (33, 300, 3, 64),
        (100, 1000, 5, 256),
        (300, 256, 4, 4096), // more than 256 groups: u16 indices
        (64, 4096, 8, 256),
        (48, 8200, 6, 256),
        (256, 4096, 2, 256),
        (512, 2048, 7, 256),
    ];
    for (rows, cols, bits, entries) in cases {
        let m = matrix(&mut rng, rows, cols, bits, entries);
        let mut dm = DeviceSbvrMatrix::upload(&gpu, &m).unwrap();
        for batch in [1, 2, 3, 4, 5, 8, 9, 16] {
            let x: Vec<f16> = (0..batch * cols)
                .map(|_| f16::from_f32(rng.gen_range(-1.0..1.0)))
                .collect();
            let want = m.reference(&x, batch).unwrap();
            let dx = gpu.upload(&x).unwrap();
            // One vector on binary tensor cores: both the kernel with one item in flight and the
            // deep one (2-4 bitvectors), whatever the rule picks.
            let deeps: &[Option<bool>] = if batch == 1 {
                &[Some(false), Some(true)]
            } else {
                &[None]
            };
            for (way, &deep) in Way::ALL
                .into_iter()
                .flat_map(|w| deeps.iter().map(move |d| (w, d)))
            {
                dm.set_deep(deep);
                let mut dy = gpu.upload(&vec![f16::NAN; batch * rows]).unwrap();
                k.gemv_with(&dm, &dx, &mut dy, batch, way).unwrap();
                let got = gpu.download(&dy).unwrap();
                let err = relative_error(&got, &want);
                assert!(
                    err < GPU_TOLERANCE,
                    "{rows}x{cols} n={bits} L={} wide={} batch {batch} {way:?} deep {deep:?}: \
                     rel err {err:e}",
                    m.entries(),
                    m.wide_index()
                );
                if k.uses_pdl() {
                    let mut dy0 = gpu.upload(&vec![f16::NAN; batch * rows]).unwrap();
                    k0.gemv_with(&dm, &dx, &mut dy0, batch, way).unwrap();
                    let got0 = gpu.download(&dy0).unwrap();
                    assert!(
                        got.iter()
                            .zip(&got0)
                            .all(|(a, b)| a.to_bits() == b.to_bits()),
                        "{rows}x{cols} n={bits} batch {batch} {way:?}: the sm_90a kernels with \
                         programmatic launch differ from the sm_80 kernels"
                    );
                }
            }
        }
        eprintln!(
            "ok: {rows}x{cols} n={bits} entries={} wide={}",
            m.entries(),
            m.wide_index()
        );
    }
}

/// Products launched back to back without a synchronization, each on new inputs into its
/// own output: every quantization (which rewrites the shared buffer of quantized inputs) runs
/// only after the GEMV before it has finished reading it, also when the GEMV is launched
/// programmatically.
#[test]
fn back_to_back_products_each_read_their_own_inputs() {
    let Some(gpu) = gpu_for_tests("back_to_back_products_each_read_their_own_inputs") else {
        return;
    };
    let k = SbvrGemv::new(&gpu).unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    let (rows, cols) = (1024, 4096);
    let m = matrix(&mut rng, rows, cols, 4, 256);
    let dm = DeviceSbvrMatrix::upload(&gpu, &m).unwrap();
    for batch in [1, 2, 8] {
        let xs: Vec<Vec<f16>> = (0..6)
            .map(|_| {
                (0..batch * cols)
                    .map(|_| f16::from_f32(rng.gen_range(-1.0..1.0)))
                    .collect()
            })
            .collect();
        let dxs: Vec<_> = xs.iter().map(|x| gpu.upload(x).unwrap()).collect();
        let mut dys: Vec<_> = (0..xs.len())
            .map(|_| gpu.upload(&vec![f16::NAN; batch * rows]).unwrap())
            .collect();
        for (dx, dy) in dxs.iter().zip(dys.iter_mut()) {
            k.gemv(&dm, dx, dy, batch).unwrap();
        }
        for (i, (x, dy)) in xs.iter().zip(&dys).enumerate() {
            let want = m.reference(x, batch).unwrap();
            let err = relative_error(&gpu.download(dy).unwrap(), &want);
            assert!(
                err < GPU_TOLERANCE,
                "batch {batch}, product {i} of a chain (pdl {}): rel err {err:e}",
                k.uses_pdl()
            );
        }
    }
}

/// A chain of layers as a decoder runs them: each product reads the vector the one before
/// wrote, with no synchronization between them, once through distinct buffers (each step
/// checked against the CPU on the GPU's own input) and once through two buffers in turn (each
/// product overwrites the vector the product before read): the same bits, with and without a
/// programmatically launched quantization (which starts while the GEMV before it still runs).
#[test]
fn a_chain_of_layers_reads_each_output_after_it_is_written() {
    let Some(gpu) = gpu_for_tests("a_chain_of_layers_reads_each_output_after_it_is_written") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(12);
    let d = 2048;
    let m = matrix(&mut rng, d, d, 4, 256);
    let dm = DeviceSbvrMatrix::upload(&gpu, &m).unwrap();
    let steps = 8;
    let inputs: Vec<(usize, Vec<f16>)> = [1, 2, 8]
        .into_iter()
        .map(|batch| {
            let x: Vec<f16> = (0..batch * d)
                .map(|_| f16::from_f32(rng.gen_range(-1.0..1.0)))
                .collect();
            (batch, x)
        })
        .collect();
    let mut finals = Vec::new();
    for programmatic in [true, false] {
        let mut k = SbvrGemv::new(&gpu).unwrap();
        k.set_programmatic_quantize(programmatic);
        eprintln!(
            "chain: programmatic quantization {}",
            k.programmatic_quantize()
        );
        for (batch, x0) in &inputs {
            let (batch, x0) = (*batch, x0.as_slice());
            // Distinct buffers: step i reads bufs[i] and writes bufs[i + 1].
            let mut bufs = vec![gpu.upload(x0).unwrap()];
            for _ in 0..steps {
                bufs.push(gpu.upload(&vec![f16::NAN; batch * d]).unwrap());
            }
            for i in 0..steps {
                let (head, tail) = bufs.split_at_mut(i + 1);
                k.gemv(&dm, &head[i], &mut tail[0], batch).unwrap();
            }
            let got: Vec<Vec<f16>> = bufs.iter().map(|b| gpu.download(b).unwrap()).collect();
            for i in 0..steps {
                let want = m.reference(&got[i], batch).unwrap();
                let err = relative_error(&got[i + 1], &want);
                assert!(
                    err < GPU_TOLERANCE,
                    "batch {batch}, step {i} of the chain (programmatic quantization \
                     {programmatic}): rel err {err:e}"
                );
            }
            // Two buffers in turn.
            let mut a = gpu.upload(x0).unwrap();
            let mut b = gpu.upload(&vec![f16::NAN; batch * d]).unwrap();
            for _ in 0..steps {
                k.gemv(&dm, &a, &mut b, batch).unwrap();
                std::mem::swap(&mut a, &mut b);
            }
            let last = gpu.download(&a).unwrap();
            let bits = |v: &[f16]| v.iter().map(|h| h.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&last),
                bits(&got[steps]),
                "batch {batch}: the chain through two buffers differs from the one through \
                 distinct buffers (programmatic quantization {programmatic})"
            );
            finals.push((batch, bits(&last)));
        }
    }
    let (with, without) = finals.split_at(finals.len() / 2);
    for ((batch, a), (_, b)) in with.iter().zip(without) {
        assert_eq!(
            a, b,
            "batch {batch}: the chain's bits depend on the quantization's launch"
        );
    }
}

#[test]
fn non_finite_inputs_make_their_vector_nan_and_bad_sizes_are_errors() {
    let Some(gpu) =
        gpu_for_tests("non_finite_inputs_make_their_vector_nan_and_bad_sizes_are_errors")
    else {
        return;
    };
    let k = SbvrGemv::new(&gpu).unwrap();
    let mut rng = StdRng::seed_from_u64(3);
    let (rows, cols) = (40, 300);
    let m = matrix(&mut rng, rows, cols, 4, 256);
    let dm = DeviceSbvrMatrix::upload(&gpu, &m).unwrap();
    let mut x: Vec<f16> = (0..2 * cols)
        .map(|i| f16::from_f32((i % 7) as f32 - 3.0))
        .collect();
    x[cols + 5] = f16::NAN;
    let want = m.reference(&x, 2).unwrap();
    assert!(want[rows..].iter().all(|v| v.is_nan()));
    let dx = gpu.upload(&x).unwrap();
    for way in Way::ALL {
        let mut dy = gpu.alloc_zeros::<f16>(2 * rows).unwrap();
        k.gemv_with(&dm, &dx, &mut dy, 2, way).unwrap();
        let got = gpu.download(&dy).unwrap();
        assert!(got[rows..].iter().all(|v| v.is_nan()), "{way:?}");
        assert!(relative_error(&got[..rows], &want[..rows]) < GPU_TOLERANCE);
    }
    // One vector (the fused kernel quantizes it itself when K <= 4096): NaN everywhere.
    let dx1 = gpu.upload(&x[cols..]).unwrap();
    for way in Way::ALL {
        let mut dy = gpu.alloc_zeros::<f16>(rows).unwrap();
        k.gemv_with(&dm, &dx1, &mut dy, 1, way).unwrap();
        assert!(
            gpu.download(&dy).unwrap().iter().all(|v| v.is_nan()),
            "{way:?}"
        );
    }
    let mut dy = gpu.alloc_zeros::<f16>(2 * rows).unwrap();
    let e = k.gemv(&dm, &dx, &mut dy, 3).unwrap_err();
    assert!(
        matches!(e, SbvrError::Format(FormatError::Length { .. })),
        "{e}"
    );
    let e = k.gemv(&dm, &dx, &mut dy, 17).unwrap_err();
    assert!(
        matches!(e, SbvrError::Format(FormatError::Batch { .. })),
        "{e}"
    );
    let e = k.gemv(&dm, &dx, &mut dy, 0).unwrap_err();
    assert!(
        matches!(e, SbvrError::Format(FormatError::Batch { .. })),
        "{e}"
    );
}

#[test]
fn the_format_core_path_checks_against_the_reference() {
    let Some(gpu) = gpu_for_tests("the_format_core_path_checks_against_the_reference") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(11);
    let m = matrix(&mut rng, 200, 700, 3, 256);
    let k = <SbvrMatrix as DeviceGemv>::load(&gpu).unwrap();
    let dm = m.upload(&gpu).unwrap();
    let copy = SbvrMatrix::clone_device(&dm).unwrap();
    assert_eq!(SbvrMatrix::bytes_read(&copy), SbvrMatrix::bytes_read(&dm));
    let x: Vec<f16> = (0..4 * 700)
        .map(|_| f16::from_f32(rng.gen_range(-2.0..2.0)))
        .collect();
    let want = sbvr_format::cmv_format::CompressedMatrix::reference(&m, &x, 4).unwrap();
    let dx = gpu.upload(&x).unwrap();
    let mut out = SbvrMatrix::alloc_out(&gpu, 200, 4).unwrap();
    SbvrMatrix::gemv(&k, &copy, &dx, &mut out, 4).unwrap();
    SbvrMatrix::finish(&k, &gpu).unwrap();
    let check = SbvrMatrix::check(&gpu, &out, &want).unwrap();
    assert!(check.passed(), "{check}");
}
