//! GPU tests of the cuBLASLt baseline: its product against the CPU reference, the algorithm it
//! reports, and its calls inside a captured CUDA graph (as the bench times them). Skipped (with
//! a message) where there is no GPU or no libcublasLt; `CMV_REQUIRE_GPU=1` turns either into a
//! failure.

use cmv_runtime::{gpu_for_tests, time_graph};
use dense_gemv::{CublasLtError, CublasLtGemv, DenseError, DeviceMatrix, cpu, relative_error};
use half::f16;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn random_f16(rng: &mut StdRng, n: usize, scale: f32) -> Vec<f16> {
    (0..n)
        .map(|_| f16::from_f32(rng.gen_range(-1.0f32..1.0) * scale))
        .collect()
}

fn required() -> bool {
    std::env::var("CMV_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// The GPU and cuBLASLt, or `None` (after printing why) where either is missing.
fn setup(test: &str) -> Option<(cmv_runtime::Gpu, CublasLtGemv)> {
    let gpu = gpu_for_tests(test)?;
    match CublasLtGemv::new(&gpu) {
        Ok(lt) => Some((gpu, lt)),
        Err(e) if required() => panic!("{test}: {e}"),
        Err(e) => {
            eprintln!("SKIPPED {test}: {e}");
            None
        }
    }
}

fn rel_err(got: &[f16], want: &[f64]) -> f64 {
    relative_error(got.iter().map(|v| f64::from(v.to_f32())), want)
}

#[test]
fn cublaslt_gemv_matches_the_fp64_reference() {
    let Some((gpu, lt)) = setup("cublaslt_gemv_matches_the_fp64_reference") else {
        return;
    };
    eprintln!(
        "cuBLASLt {}, workspace {} bytes",
        lt.version(),
        lt.workspace_bytes()
    );
    let mut rng = StdRng::seed_from_u64(18);
    // Odd sides (unaligned leading dimensions), a single row and column, and bench-like shapes.
    for (rows, cols) in [(1, 1), (7, 24), (513, 1001), (1000, 4096), (4096, 4096)] {
        let w = random_f16(&mut rng, rows * cols, 1.0);
        let dw = DeviceMatrix::upload_f16(&gpu, &w, rows, cols).unwrap();
        for batch in [1, 4, 16] {
            let x = random_f16(&mut rng, batch * cols, 1.0);
            let want = cpu::gemv_f16(&w, rows, cols, &x, batch).unwrap();
            let dx = gpu.upload(&x).unwrap();
            // Poison the output: every element must be written.
            let mut dy = gpu.upload(&vec![f16::NAN; batch * rows]).unwrap();
            assert_eq!(lt.algorithm(rows, cols, batch), None);
            lt.gemv_f16(&dw, &dx, &mut dy, batch).unwrap();
            let err = rel_err(&gpu.download(&dy).unwrap(), &want);
            let algo = lt
                .algorithm(rows, cols, batch)
                .expect("the call chose an algorithm");
            eprintln!("{rows}x{cols} batch {batch}: {}", algo.summary());
            assert!(
                err < 1e-3,
                "cuBLASLt {rows}x{cols} batch {batch}: relative error {err} ({})",
                algo.summary()
            );
            assert!(algo.returned >= 1 && algo.rank < algo.returned);
            assert!(algo.algo_id.is_some(), "{}", algo.summary());
            assert!(algo.workspace_bytes <= lt.workspace_bytes());
            assert_eq!(lt.plan(rows, cols, batch).unwrap(), algo, "cached");
        }
    }
}

#[test]
fn cublaslt_gemv_runs_inside_a_cuda_graph() {
    let Some((gpu, lt)) = setup("cublaslt_gemv_runs_inside_a_cuda_graph") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(19);
    let (rows, cols) = (2048, 4096);
    let w = random_f16(&mut rng, rows * cols, 1.0);
    let first = DeviceMatrix::upload_f16(&gpu, &w, rows, cols).unwrap();
    // Rotated copies, as the bench times them.
    let mats = [
        first.try_clone().unwrap(),
        first.try_clone().unwrap(),
        first,
    ];
    for batch in [1, 4, 16] {
        let x = random_f16(&mut rng, batch * cols, 1.0);
        let want = cpu::gemv_f16(&w, rows, cols, &x, batch).unwrap();
        let dx = gpu.upload(&x).unwrap();
        let mut dy = gpu.upload(&vec![f16::NAN; batch * rows]).unwrap();
        // The heuristic runs here, outside the capture.
        let algo = lt.plan(rows, cols, batch).unwrap();
        let t = time_graph(&gpu, 6, 2, 5, |i| -> Result<(), CublasLtError> {
            lt.gemv_f16(&mats[i % mats.len()], &dx, &mut dy, batch)
        })
        .unwrap();
        let err = rel_err(&gpu.download(&dy).unwrap(), &want);
        assert!(
            err < 1e-3,
            "batch {batch}: relative error {err} after the graph"
        );
        eprintln!(
            "{rows}x{cols} batch {batch} in a graph: {:.2} us ({})",
            t.median_ms() * 1e3,
            algo.summary()
        );
    }
}

#[test]
fn bad_arguments_are_refused_before_any_launch() {
    let Some((gpu, lt)) = setup("bad_arguments_are_refused_before_any_launch") else {
        return;
    };
    let (rows, cols) = (64, 32);
    let dw = DeviceMatrix::upload_f16(&gpu, &vec![f16::ONE; rows * cols], rows, cols).unwrap();
    let dx = gpu.upload(&vec![f16::ONE; 4 * cols]).unwrap();
    let mut dy = gpu.upload(&vec![f16::ZERO; 4 * rows]).unwrap();
    assert!(matches!(
        lt.gemv_f16(&dw, &dx, &mut dy, 17),
        Err(CublasLtError::Dense(DenseError::Batch { batch: 17 }))
    ));
    assert!(matches!(
        lt.gemv_f16(&dw, &dx, &mut dy, 5),
        Err(CublasLtError::Dense(DenseError::Length {
            what: "input",
            ..
        }))
    ));
    let mut short = gpu.upload(&vec![f16::ZERO; rows]).unwrap();
    assert!(matches!(
        lt.gemv_f16(&dw, &dx, &mut short, 4),
        Err(CublasLtError::Dense(DenseError::Length {
            what: "output",
            ..
        }))
    ));
    assert_eq!(lt.algorithm(rows, cols, 4), None, "nothing was planned");
}
