//! GPU tests: every dense kernel against its CPU reference. Skipped (with a message) where
//! there is no GPU; `CMV_REQUIRE_GPU=1` turns a missing GPU into a failure.

use cmv_runtime::gpu_for_tests;
use dense_gemv::{
    BULK_F16_KERNELS, BULK_I8_KERNELS, CublasGemv, DenseGemv, DeviceMatrix, TC_F16_KERNELS,
    TC_I8_KERNELS, TcKernel, bulk_kernel, bulk_plan, bulk_plan_for, cpu, relative_error, tc_plan,
    tc_stream_plan,
};
use half::f16;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One fp16 and one int8 launch into outputs poisoned first (every element must be written),
/// checked against the CPU references `want` (fp16: within 1e-3 relative) and `want_i` (int8:
/// exact, and its requantization with scale 0.5); `what` names each in a failure.
fn check_pair(
    gpu: &cmv_runtime::Gpu,
    (want, want_i): (&[f64], &[i32]),
    (what_f, what_i): (&str, &str),
    f16_launch: impl FnOnce(&mut cmv_runtime::CudaSlice<f16>) -> dense_gemv::Result<()>,
    i8_launch: impl FnOnce(
        (
            &mut cmv_runtime::CudaSlice<i32>,
            &mut cmv_runtime::CudaSlice<i8>,
        ),
    ) -> dense_gemv::Result<()>,
) {
    let n = want.len();
    let mut dy = gpu.upload(&vec![f16::NAN; n]).unwrap();
    f16_launch(&mut dy).unwrap();
    let got = gpu.download(&dy).unwrap();
    let err = relative_error(got.iter().map(|v| f64::from(v.to_f32())), want);
    assert!(err < 1e-3, "{what_f}: relative error {err}");
    let mut y32 = gpu.upload(&vec![i32::MIN; n]).unwrap();
    let mut y8 = gpu.upload(&vec![0x55i8; n]).unwrap();
    i8_launch((&mut y32, &mut y8)).unwrap();
    assert_eq!(gpu.download(&y32).unwrap(), want_i, "{what_i}");
    assert_eq!(
        gpu.download(&y8).unwrap(),
        cpu::requantize_all(want_i, 0.5),
        "{what_i}"
    );
}

fn random_f16(rng: &mut StdRng, n: usize, scale: f32) -> Vec<f16> {
    (0..n)
        .map(|_| f16::from_f32(rng.gen_range(-1.0f32..1.0) * scale))
        .collect()
}

/// Shapes that exercise every path: vector kernels (cols % 16 == 0), the scalar fallback, row
/// counts that do not fill a warp group or a block, a single row and column.
const SHAPES: [(usize, usize); 8] = [
    (1, 1),
    (1, 8),
    (7, 24),
    (33, 16),
    (257, 520),
    (1000, 4096),
    (513, 1001),
    (64, 8200),
];

#[test]
fn f16_gemv_matches_the_fp64_reference() {
    let Some(gpu) = gpu_for_tests("f16_gemv_matches_the_fp64_reference") else {
        return;
    };
    let dense = DenseGemv::new(&gpu).unwrap();
    let mut rng = StdRng::seed_from_u64(1);
    for (rows, cols) in SHAPES {
        let w = random_f16(&mut rng, rows * cols, 1.0);
        let dw = DeviceMatrix::upload_f16(&gpu, &w, rows, cols).unwrap();
        for batch in [1, 2, 3, 4, 5, 8, 9, 16] {
            let x = random_f16(&mut rng, batch * cols, 1.0);
            let want = cpu::gemv_f16(&w, rows, cols, &x, batch).unwrap();
            let dx = gpu.upload(&x).unwrap();
            // Poison the output: every element must be written.
            let mut dy = gpu.upload(&vec![f16::NAN; batch * rows]).unwrap();
            dense.gemv_f16(&dw, &dx, &mut dy, batch).unwrap();
            let got = gpu.download(&dy).unwrap();
            let err = relative_error(got.iter().map(|v| f64::from(v.to_f32())), &want);
            assert!(
                err < 1e-3,
                "{rows}x{cols} batch {batch}: relative error {err}"
            );
        }
    }
}

#[test]
fn cublas_gemv_matches_the_fp64_reference() {
    let Some(gpu) = gpu_for_tests("cublas_gemv_matches_the_fp64_reference") else {
        return;
    };
    let blas = match CublasGemv::new(&gpu) {
        Ok(b) => b,
        Err(e) if std::env::var("CMV_REQUIRE_GPU").is_ok_and(|v| v == "1") => panic!("{e}"),
        Err(e) => {
            eprintln!("SKIPPED cublas_gemv_matches_the_fp64_reference: {e}");
            return;
        }
    };
    let mut rng = StdRng::seed_from_u64(2);
    for (rows, cols) in [(1000, 4096), (513, 1001)] {
        let w = random_f16(&mut rng, rows * cols, 1.0);
        let dw = DeviceMatrix::upload_f16(&gpu, &w, rows, cols).unwrap();
        for batch in [1, 4, 16] {
            let x = random_f16(&mut rng, batch * cols, 1.0);
            let want = cpu::gemv_f16(&w, rows, cols, &x, batch).unwrap();
            let dx = gpu.upload(&x).unwrap();
            let mut dy = gpu.upload(&vec![f16::NAN; batch * rows]).unwrap();
            blas.gemv_f16(&dw, &dx, &mut dy, batch).unwrap();
            let got = gpu.download(&dy).unwrap();
            let err = relative_error(got.iter().map(|v| f64::from(v.to_f32())), &want);
            assert!(
                err < 1e-3,
                "cuBLAS {rows}x{cols} batch {batch}: relative error {err}"
            );
        }
    }
}

#[test]
fn i8_gemv_is_exact_and_requantizes_half_to_even() {
    let Some(gpu) = gpu_for_tests("i8_gemv_is_exact_and_requantizes_half_to_even") else {
        return;
    };
    let dense = DenseGemv::new(&gpu).unwrap();
    let mut rng = StdRng::seed_from_u64(3);
    for (rows, cols) in SHAPES {
        let w: Vec<i8> = (0..rows * cols).map(|_| rng.r#gen()).collect();
        let dw = DeviceMatrix::upload_i8(&gpu, &w, rows, cols).unwrap();
        for batch in [1, 3, 4, 7, 16] {
            let x: Vec<i8> = (0..batch * cols).map(|_| rng.r#gen()).collect();
            let want = cpu::gemv_i8(&w, rows, cols, &x, batch).unwrap();
            // A scale that puts many products on exact .5 ties: 1/2, and one that saturates.
            for scale in [0.5f32, 1.0 / 1024.0, 3.0] {
                let dx = gpu.upload(&x).unwrap();
                let mut y32 = gpu.upload(&vec![i32::MIN; batch * rows]).unwrap();
                let mut y8 = gpu.upload(&vec![0x55i8; batch * rows]).unwrap();
                dense
                    .gemv_i8(&dw, &dx, &mut y32, &mut y8, scale, batch)
                    .unwrap();
                assert_eq!(
                    gpu.download(&y32).unwrap(),
                    want,
                    "{rows}x{cols} batch {batch}"
                );
                assert_eq!(
                    gpu.download(&y8).unwrap(),
                    cpu::requantize_all(&want, scale),
                    "{rows}x{cols} batch {batch} scale {scale}"
                );
            }
        }
    }
}

#[test]
fn stream_read_reads_every_byte() {
    let Some(gpu) = gpu_for_tests("stream_read_reads_every_byte") else {
        return;
    };
    let dense = DenseGemv::new(&gpu).unwrap();
    let mut rng = StdRng::seed_from_u64(4);
    for chunks in [1usize, 1000, 1 << 20, (1 << 20) + 17] {
        let buf: Vec<u8> = (0..chunks * 16).map(|_| rng.r#gen()).collect();
        let want = buf.chunks_exact(4).fold(0u32, |a, c| {
            a ^ u32::from_le_bytes([c[0], c[1], c[2], c[3]])
        });
        let dbuf = gpu.upload(&buf).unwrap();
        let mut out = gpu.alloc_zeros::<u32>(dense.stream_read_out_len()).unwrap();
        dense.stream_read(&dbuf, &mut out).unwrap();
        let got = gpu.download(&out).unwrap().iter().fold(0, |a, &v| a ^ v);
        assert_eq!(got, want, "{chunks} chunks");
    }
}

#[test]
fn bad_arguments_are_errors_not_launches() {
    let Some(gpu) = gpu_for_tests("bad_arguments_are_errors_not_launches") else {
        return;
    };
    let dense = DenseGemv::new(&gpu).unwrap();
    let w = vec![f16::ONE; 64 * 64];
    let dw = DeviceMatrix::upload_f16(&gpu, &w, 64, 64).unwrap();
    let dx = gpu.upload(&[f16::ONE; 64]).unwrap();
    let mut dy = gpu.alloc_zeros::<f16>(64).unwrap();
    assert!(
        dense.gemv_f16(&dw, &dx, &mut dy, 2).is_err(),
        "x too short for batch 2"
    );
    assert!(dense.gemv_f16(&dw, &dx, &mut dy, 0).is_err());
    let mut nan = w.clone();
    nan[77] = f16::NAN;
    let e = DeviceMatrix::upload_f16(&gpu, &nan, 64, 64).unwrap_err();
    assert!(e.to_string().contains("77"), "{e}");
    let wi = DeviceMatrix::upload_i8(&gpu, &[1i8; 64 * 64], 64, 64).unwrap();
    let xi = gpu.upload(&[1i8; 64]).unwrap();
    let mut y32 = gpu.alloc_zeros::<i32>(64).unwrap();
    let mut y8 = gpu.alloc_zeros::<i8>(64).unwrap();
    assert!(
        dense
            .gemv_i8(&wi, &xi, &mut y32, &mut y8, f32::NAN, 1)
            .is_err()
    );
    dense.gemv_i8(&wi, &xi, &mut y32, &mut y8, 1.0, 1).unwrap();
    assert_eq!(gpu.download(&y32).unwrap(), vec![64; 64]);
}

/// Every tensor-core kernel (defaults and `--explore` variants), with the default plan, no
/// split and the most splits, each product twice (the split-K workspace must be left zero):
/// fp16 within 1e-3 of fp64, int8 exact.
///
/// `CMV_TC_ONLY=a,b` runs only the kernels whose name contains one of the parts (for slow
/// tools such as compute-sanitizer's racecheck); it says so.
#[test]
fn tensor_core_kernels_match_the_reference_with_every_plan() {
    let Some(gpu) = gpu_for_tests("tensor_core_kernels_match_the_reference_with_every_plan") else {
        return;
    };
    let only: Vec<String> = std::env::var("CMV_TC_ONLY")
        .map(|v| v.split(',').map(String::from).collect())
        .unwrap_or_default();
    if !only.is_empty() {
        eprintln!("CMV_TC_ONLY={only:?}: only the tensor-core kernels named so run");
    }
    let dense = DenseGemv::new(&gpu).unwrap();
    let mut rng = StdRng::seed_from_u64(4);
    for (rows, cols) in [(1, 16), (129, 48), (300, 1040), (1000, 4096), (4100, 2064)] {
        let wf = random_f16(&mut rng, rows * cols, 1.0);
        let dwf = DeviceMatrix::upload_f16(&gpu, &wf, rows, cols).unwrap();
        let wi: Vec<i8> = (0..rows * cols).map(|_| rng.r#gen()).collect();
        let dwi = DeviceMatrix::upload_i8(&gpu, &wi, rows, cols).unwrap();
        for (tf, ti) in TC_F16_KERNELS.iter().zip(&TC_I8_KERNELS) {
            if !only.is_empty() && !only.iter().any(|p| tf.name.contains(p.as_str())) {
                continue;
            }
            let kf = gpu.kernel(&dense_gemv::PTX, tf.name).unwrap();
            let ki = gpu.kernel(&dense_gemv::PTX, ti.name).unwrap();
            for batch in [2, tf.batch - 1, tf.batch] {
                let batch = batch.max(1);
                let x = random_f16(&mut rng, batch as usize * cols, 1.0);
                let want = cpu::gemv_f16(&wf, rows, cols, &x, batch as usize).unwrap();
                let dx = gpu.upload(&x).unwrap();
                let xi: Vec<i8> = (0..batch as usize * cols).map(|_| rng.r#gen()).collect();
                let want_i = cpu::gemv_i8(&wi, rows, cols, &xi, batch as usize).unwrap();
                let dxi = gpu.upload(&xi).unwrap();
                let (r, cf, ci) = (rows as u32, cols as u32 / 8, cols as u32 / 16);
                // Split kernels: a moderate split, none, the most; stream-K kernels: one block per
                // SM, 3 blocks (ranges over several row blocks), up to 1000 blocks.
                let plans = |k: &TcKernel, c: u32| {
                    if k.stream {
                        [
                            tc_stream_plan(r, c, *k, dense.sm_count()),
                            tc_stream_plan(r, c, *k, 3),
                            tc_stream_plan(r, c, *k, 1000),
                        ]
                    } else {
                        [
                            tc_plan(r, c, *k, 2 * dense.sm_count(), 8),
                            tc_plan(r, c, *k, 1, 1),
                            tc_plan(r, c, *k, 1 << 20, 1),
                        ]
                    }
                };
                let (plans_f, plans_i) = (plans(tf, cf), plans(ti, ci));
                for (pf, pi) in plans_f.into_iter().zip(plans_i) {
                    for rep in 0..2 {
                        let what = format!("{rows}x{cols} batch {batch} {pf:?} {pi:?} run {rep}");
                        check_pair(
                            &gpu,
                            (&want, &want_i),
                            (
                                &format!("{} {what}", tf.name),
                                &format!("{} {what}", ti.name),
                            ),
                            |dy| dense.launch_tc_f16(&kf, *tf, pf, &dwf, &dx, dy, batch),
                            |ys| dense.launch_tc_i8(&ki, *ti, pi, &dwi, &dxi, ys, 0.5, batch),
                        );
                    }
                }
            }
        }
    }
}

/// The Hopper copy-engine kernels (`dense_kernels::bulk`) against the CPU references, on
/// their default plan and on forced grids (one block, taking every tile and stage through one
/// ring many times round; 5 blocks; one per tile; 3 per k-stage count, so that blocks share
/// tiles three and four ways), each product twice (the split-K counters must be back at
/// zero), outputs poisoned before every launch, for both tiles (128 and 64 rows): rows not a
/// multiple of the tile, partial last k-stages (columns not a multiple of 64 or 128), batches
/// 1 to 16; plans for another shape, another tile and too many vectors are refused. Skipped
/// (with a message) off compute capability 9.0.
#[test]
fn bulk_kernels_match_the_reference_on_every_plan() {
    let Some(gpu) = gpu_for_tests("bulk_kernels_match_the_reference_on_every_plan") else {
        return;
    };
    let dense = DenseGemv::new(&gpu).unwrap();
    let Some((kfs, kis)) = dense.bulk_kernels() else {
        eprintln!(
            "bulk_kernels_match_the_reference_on_every_plan: skipped, compute capability {:?} \
             is not 9.0",
            gpu.info().compute_capability
        );
        return;
    };
    let mut rng = StdRng::seed_from_u64(6);
    let sms = dense.sm_count();
    for (rows, cols) in [(1, 16), (129, 48), (300, 1040), (1000, 4096), (2113, 4112)] {
        let wf = random_f16(&mut rng, rows * cols, 1.0);
        let dwf = DeviceMatrix::upload_f16(&gpu, &wf, rows, cols).unwrap();
        let wi: Vec<i8> = (0..rows * cols).map(|_| rng.r#gen()).collect();
        let dwi = DeviceMatrix::upload_i8(&gpu, &wi, rows, cols).unwrap();
        let (r, bytes) = (rows as u32, 2 * cols as u32);
        for (i, (tf, ti)) in BULK_F16_KERNELS.iter().zip(&BULK_I8_KERNELS).enumerate() {
            let groups = tf.batch / 8;
            let g = tf.geom;
            let plans = |row_bytes: u32| {
                let tiles = r.div_ceil(g.tile_rows());
                [
                    bulk_plan(g, r, row_bytes, groups, sms),
                    bulk_plan_for(g, r, row_bytes, 1),
                    bulk_plan_for(g, r, row_bytes, 5),
                    bulk_plan_for(g, r, row_bytes, tiles),
                    bulk_plan_for(g, r, row_bytes, 3 * tiles + 1),
                ]
            };
            for batch in [1, 5, tf.batch - 1, tf.batch] {
                let x = random_f16(&mut rng, batch as usize * cols, 1.0);
                let want = cpu::gemv_f16(&wf, rows, cols, &x, batch as usize).unwrap();
                let dx = gpu.upload(&x).unwrap();
                let xi: Vec<i8> = (0..batch as usize * cols).map(|_| rng.r#gen()).collect();
                let want_i = cpu::gemv_i8(&wi, rows, cols, &xi, batch as usize).unwrap();
                let dxi = gpu.upload(&xi).unwrap();
                for (pf, pi) in plans(bytes).into_iter().zip(plans(bytes / 2)) {
                    for rep in 0..2 {
                        let what = format!("{rows}x{cols} batch {batch} {pf:?} {pi:?} run {rep}");
                        check_pair(
                            &gpu,
                            (&want, &want_i),
                            (
                                &format!("{} {what}", tf.name),
                                &format!("{} {what}", ti.name),
                            ),
                            |dy| dense.launch_bulk_f16(&kfs[i], *tf, pf, &dwf, &dx, dy, batch),
                            |ys| dense.launch_bulk_i8(&kis[i], *ti, pi, &dwi, &dxi, ys, 0.5, batch),
                        );
                    }
                }
            }
        }
    }
    // A plan for another shape is refused before any launch.
    let (rows, cols) = (300, 1040);
    let w = random_f16(&mut rng, rows * cols, 1.0);
    let dw = DeviceMatrix::upload_f16(&gpu, &w, rows, cols).unwrap();
    let dx = gpu.upload(&random_f16(&mut rng, 16 * cols, 1.0)).unwrap();
    let mut dy = gpu.upload(&vec![f16::ZERO; 16 * rows]).unwrap();
    let k = BULK_F16_KERNELS[1];
    let wrong = bulk_plan(k.geom, rows as u32 * 2, 2 * cols as u32, 2, 132);
    assert!(
        dense
            .launch_bulk_f16(&kfs[1], k, wrong, &dw, &dx, &mut dy, 16)
            .is_err()
    );
    // So is a plan of the other tile (64-row tiles for a kernel of 128).
    let other = bulk_plan(
        BULK_F16_KERNELS[3].geom,
        rows as u32,
        2 * cols as u32,
        2,
        132,
    );
    assert!(
        dense
            .launch_bulk_f16(&kfs[1], k, other, &dw, &dx, &mut dy, 16)
            .is_err()
    );
    assert!(
        dense
            .launch_bulk_f16(
                &kfs[1],
                k,
                bulk_plan(k.geom, rows as u32, 2 * cols as u32, 2, 132),
                &dw,
                &dx,
                &mut dy,
                17
            )
            .is_err()
    );
    // The default path takes them where the measured rule says (unless CMV_DENSE_BULK), and
    // names the kernel it runs.
    if std::env::var(dense_gemv::BULK_ENV).is_err()
        && std::env::var(dense_gemv::BULK_TILE_ENV).is_err()
    {
        let sms = dense.sm_count();
        let t64 = |r, c, b, int8| dense_gemv::bulk_geom_preferred(r, c, b, int8, sms);
        assert!(dense.uses_bulk(28672, 8192, 16, false));
        assert!(!dense.uses_bulk(4096, 4096, 16, false));
        assert!(!dense.uses_bulk(28672, 8192, 1, true));
        assert_eq!(
            dense.f16_path(28672, 8192, 16),
            dense_gemv::DensePath::Bulk(bulk_kernel(16, t64(28672, 8192, 16, false)))
        );
        assert_eq!(
            dense.f16_kernel(28672, 8192, 5),
            BULK_F16_KERNELS[bulk_kernel(5, t64(28672, 8192, 5, false))].name
        );
        assert_eq!(
            dense.i8_kernel(14336, 4096, 16),
            BULK_I8_KERNELS[bulk_kernel(16, t64(14336, 4096, 16, true))].name
        );
        assert!(!dense.f16_kernel(4096, 4096, 16).contains("bulk"));
    }
    assert_eq!(dense.f16_path(100, 12, 3), dense_gemv::DensePath::Any);
    assert_eq!(dense.f16_kernel(100, 12, 3), "cmv_gemv_f16_any");
    assert_eq!(dense.i8_kernel(100, 24, 3), "cmv_gemv_i8_any");
}

/// Repeats one copy-engine product many times (`CMV_BULK_STRESS=ROWS,COLS,REPS[,BLOCKS]`, int8 and
/// fp16 at 16 vectors), each checked against the CPU reference: for hunting rare failures and
/// for the race checkers on a small grid. Skipped (saying so) when the variable is unset.
#[test]
fn bulk_stress() {
    let Ok(spec) = std::env::var("CMV_BULK_STRESS") else {
        eprintln!("bulk_stress: skipped, CMV_BULK_STRESS=ROWS,COLS,REPS[,BLOCKS] is not set");
        return;
    };
    let Some(gpu) = gpu_for_tests("bulk_stress") else {
        return;
    };
    let dense = DenseGemv::new(&gpu).unwrap();
    let Some((kfs, kis)) = dense.bulk_kernels() else {
        eprintln!("bulk_stress: skipped, compute capability is not 9.0");
        return;
    };
    let v: Vec<usize> = spec.split(',').map(|p| p.trim().parse().unwrap()).collect();
    let (rows, cols, reps) = (v[0], v[1], v[2]);
    let batch = 16u32;
    let mut rng = StdRng::seed_from_u64(7);
    let wi: Vec<i8> = (0..rows * cols).map(|_| rng.r#gen()).collect();
    let dwi = DeviceMatrix::upload_i8(&gpu, &wi, rows, cols).unwrap();
    let xi: Vec<i8> = (0..batch as usize * cols).map(|_| rng.r#gen()).collect();
    let want_i = cpu::gemv_i8(&wi, rows, cols, &xi, batch as usize).unwrap();
    let dxi = gpu.upload(&xi).unwrap();
    let wf = random_f16(&mut rng, rows * cols, 1.0);
    let dwf = DeviceMatrix::upload_f16(&gpu, &wf, rows, cols).unwrap();
    let x = random_f16(&mut rng, batch as usize * cols, 1.0);
    let want = cpu::gemv_f16(&wf, rows, cols, &x, batch as usize).unwrap();
    let dx = gpu.upload(&x).unwrap();
    let n = batch as usize * rows;
    // BLOCKS given: that grid; else the default plan. Every tile (128, 64 and 112 rows), in
    // turn.
    let mut bad = 0;
    for rep in 0..reps {
        let ki = [1, 3, 5][rep % 3];
        let g = BULK_F16_KERNELS[ki].geom;
        let plan = |row_bytes: u32| {
            v.get(3).map_or(
                bulk_plan(g, rows as u32, row_bytes, 2, dense.sm_count()),
                |&b| bulk_plan_for(g, rows as u32, row_bytes, b as u32),
            )
        };
        let (pi, pf) = (plan(cols as u32), plan(2 * cols as u32));
        let mut y32 = gpu.upload(&vec![i32::MIN; n]).unwrap();
        let mut y8 = gpu.upload(&vec![0x55i8; n]).unwrap();
        let k = BULK_I8_KERNELS[ki];
        dense
            .launch_bulk_i8(&kis[ki], k, pi, &dwi, &dxi, (&mut y32, &mut y8), 0.5, batch)
            .unwrap();
        let got = gpu.download(&y32).unwrap();
        let wrong: Vec<usize> = (0..n).filter(|&i| got[i] != want_i[i]).collect();
        if !wrong.is_empty() {
            bad += 1;
            let first: Vec<(usize, usize, i32, i32)> = wrong
                .iter()
                .take(8)
                .map(|&i| (i / rows, i % rows, got[i], want_i[i]))
                .collect();
            eprintln!(
                "int8 rep {rep} ({pi:?}): {} wrong (vector, row, got, want): {first:?}",
                wrong.len()
            );
        }
        let mut dy = gpu.upload(&vec![f16::NAN; n]).unwrap();
        let k = BULK_F16_KERNELS[ki];
        dense
            .launch_bulk_f16(&kfs[ki], k, pf, &dwf, &dx, &mut dy, batch)
            .unwrap();
        let got = gpu.download(&dy).unwrap();
        let err = relative_error(got.iter().map(|v| f64::from(v.to_f32())), &want);
        if err >= 1e-3 {
            bad += 1;
            eprintln!("fp16 rep {rep} ({pf:?}): relative error {err}");
        }
    }
    assert_eq!(bad, 0, "{bad} of {reps} repetitions wrong ({rows}x{cols})");
}

/// A chain of copy-engine products, each reading the vectors the one before wrote and writing
/// the buffer that one read, launched back to back with no synchronization, with and without
/// programmatic dependent launch (`DenseGemv::with_pdl`): int8 bit-exact against the CPU
/// chain (requantized between layers), fp16 within 1e-2 of the CPU chain (rounded to fp16
/// between layers) and bit-identical with and without the programmatic launch. Every bulk
/// kernel, with the default plan, a grid of 5 and one block per SM (all share tiles: the
/// workspace and the counters carry over from one launch to the next).
#[test]
fn a_chain_of_bulk_products_is_exact_with_and_without_programmatic_launch() {
    let name = "a_chain_of_bulk_products_is_exact_with_and_without_programmatic_launch";
    let Some(gpu) = gpu_for_tests(name) else {
        return;
    };
    if DenseGemv::new(&gpu).unwrap().bulk_kernels().is_none() {
        eprintln!("{name}: skipped, compute capability is not 9.0");
        return;
    }
    let (d, layers, mats) = (2048usize, 6usize, 3usize);
    let mut rng = StdRng::seed_from_u64(11);
    let wi: Vec<Vec<i8>> = (0..mats)
        .map(|_| (0..d * d).map(|_| rng.gen_range(-8i8..=8)).collect())
        .collect();
    let wf: Vec<Vec<f16>> = (0..mats)
        .map(|_| random_f16(&mut rng, d * d, (3.0 / d as f32).sqrt()))
        .collect();
    let dwi: Vec<_> = wi
        .iter()
        .map(|w| DeviceMatrix::upload_i8(&gpu, w, d, d).unwrap())
        .collect();
    let dwf: Vec<_> = wf
        .iter()
        .map(|w| DeviceMatrix::upload_f16(&gpu, w, d, d).unwrap())
        .collect();
    // y8 keeps about the spread of x: scale ~ 1 / (sqrt(d) * std(W)).
    let scale = 1.0 / ((d as f32).sqrt() * 4.9);
    let mut fp16_runs: Vec<Vec<f16>> = Vec::new();
    for pdl in [true, false] {
        let dense = DenseGemv::new(&gpu).unwrap().with_pdl(pdl);
        assert_eq!(dense.uses_pdl(), pdl);
        let (kfs, kis) = dense.bulk_kernels().unwrap();
        for (ki, (tf, ti)) in BULK_F16_KERNELS.iter().zip(&BULK_I8_KERNELS).enumerate() {
            let batch = if tf.batch == 16 { 16 } else { 5 };
            let n = batch as usize * d;
            let g = tf.geom;
            let sms = dense.sm_count();
            for (gi, grid) in [None, Some(5u32), Some(sms)].into_iter().enumerate() {
                // The same inputs in both passes.
                let mut xr = StdRng::seed_from_u64((3 * ki + gi) as u64);
                let plan = |row_bytes: u32| match grid {
                    None => bulk_plan(g, d as u32, row_bytes, 2, dense.sm_count()),
                    Some(b) => bulk_plan_for(g, d as u32, row_bytes, b),
                };
                let what = format!("pdl {pdl}, {}, grid {:?}", tf.name, plan(2 * d as u32).grid);
                // A grid of one block per SM is one full wave (programmatic with `pdl`), a grid
                // of 5 is not (always the ordinary launch); the default plans on an H100 or
                // H200 are full waves but for tiles of 112 rows (19 tiles, 114 blocks).
                let p = plan(2 * d as u32);
                let full = dense_gemv::bulk_pdl_preferred(&p, sms);
                assert_eq!(dense.bulk_launch_is_programmatic(&p), pdl && full, "{what}");
                match grid {
                    Some(5) => assert!(!full || sms <= 5, "{what}"),
                    Some(_) => assert!(full, "{what}"),
                    None if sms == 132 => assert_eq!(full, g != dense_gemv::BULK_T112, "{what}"),
                    None => {}
                }
                // int8
                let x0: Vec<i8> = (0..n).map(|_| xr.gen_range(-40i8..=40)).collect();
                let mut want = x0.clone();
                for l in 0..layers {
                    let acc = cpu::gemv_i8(&wi[l % mats], d, d, &want, batch as usize).unwrap();
                    want = cpu::requantize_all(&acc, scale);
                }
                let mut bufs = [
                    gpu.upload(&x0).unwrap(),
                    gpu.upload(&vec![0x55i8; n]).unwrap(),
                ];
                let mut y32 = gpu.upload(&vec![i32::MIN; n]).unwrap();
                for l in 0..layers {
                    let [a, b] = &mut bufs;
                    let (src, dst) = if l % 2 == 0 { (&*a, b) } else { (&*b, a) };
                    dense
                        .launch_bulk_i8(
                            &kis[ki],
                            *ti,
                            plan(d as u32),
                            &dwi[l % mats],
                            src,
                            (&mut y32, dst),
                            scale,
                            batch,
                        )
                        .unwrap();
                }
                let got = gpu.download(&bufs[layers % 2]).unwrap();
                assert_eq!(got, want, "int8 chain, {what}");
                assert!(
                    want.iter().filter(|&&v| v != 0 && v.abs() < 127).count() > n / 2,
                    "the chain's values must stay mostly unsaturated and nonzero ({what})"
                );
                // fp16
                let x0 = random_f16(&mut xr, n, 1.0);
                let mut want: Vec<f16> = x0.clone();
                for l in 0..layers {
                    let y = cpu::gemv_f16(&wf[l % mats], d, d, &want, batch as usize).unwrap();
                    want = y.iter().map(|&v| f16::from_f64(v)).collect();
                }
                let mut bufs = [
                    gpu.upload(&x0).unwrap(),
                    gpu.upload(&vec![f16::NAN; n]).unwrap(),
                ];
                for l in 0..layers {
                    let [a, b] = &mut bufs;
                    let (src, dst) = if l % 2 == 0 { (&*a, b) } else { (&*b, a) };
                    dense
                        .launch_bulk_f16(
                            &kfs[ki],
                            *tf,
                            plan(2 * d as u32),
                            &dwf[l % mats],
                            src,
                            dst,
                            batch,
                        )
                        .unwrap();
                }
                let got = gpu.download(&bufs[layers % 2]).unwrap();
                let err = relative_error(
                    got.iter().map(|v| f64::from(v.to_f32())),
                    &want
                        .iter()
                        .map(|v| f64::from(v.to_f32()))
                        .collect::<Vec<_>>(),
                );
                assert!(err < 1e-2, "fp16 chain, {what}: relative error {err}");
                let j = 3 * ki + gi;
                if pdl {
                    fp16_runs.push(got);
                } else {
                    let bits = |v: &[f16]| v.iter().map(|h| h.to_bits()).collect::<Vec<_>>();
                    assert!(
                        bits(&got) == bits(&fp16_runs[j]),
                        "fp16 chain, {what}: not the same bits as with the programmatic launch"
                    );
                }
            }
        }
    }
    assert_eq!(fp16_runs.len(), 3 * BULK_F16_KERNELS.len());
}
