//! The toy format through the generic suite: CPU side, container round trip, GPU side (where
//! there is a GPU).

use bench::dense::{Baseline, Baselines};
use bench::formats::{self, FormatSuite};
use bench::toy::Fp16Toy;
use bench::{BenchConfig, Timing};
use cmv_format::{CompressedMatrix, Limits};
use half::f16;

fn toy() -> Box<dyn FormatSuite> {
    formats::find(Fp16Toy::NAME).expect("the toy is registered")
}

#[test]
fn cpu_side_reports_sizes_and_reference_times() {
    let rows = formats::run_cpu_all(&[toy()], &[(64, 128), (48, 40)], &mut |_| {}).unwrap();
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert_eq!(
            (r.format.as_str(), r.variant.as_str()),
            ("fp16-toy", "default")
        );
        assert_eq!(r.bits_per_weight, 16.0);
        assert!(r.container_bits_per_weight > 16.0);
        assert_eq!(r.parts.len(), 1);
        assert_eq!(r.parts[0].bytes, 2 * (r.rows * r.cols) as u64);
        assert!(r.reference_ms >= 0.0 && r.encode_ms >= 0.0);
    }
    assert_eq!((rows[1].rows, rows[1].cols), (48, 40));
}

#[test]
fn round_trip_gives_the_same_bytes_and_reference() {
    let (rows, cols) = (37, 53);
    let w: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 7919) % 201) as f32 / 100.0 - 1.0)
        .collect();
    let m = Fp16Toy::encode_slice(&w, rows, cols, &()).unwrap();
    let bytes = cmv_format::testing::round_trip(&m);
    assert_eq!(bytes, m.container_bytes());
    let loaded = Fp16Toy::from_container(&bytes, &Limits::DEFAULT).unwrap();
    assert_eq!(loaded.container_bytes(), bytes);
    let x: Vec<f16> = (0..3 * cols)
        .map(|i| f16::from_f32((i % 13) as f32 / 8.0 - 0.75))
        .collect();
    assert_eq!(
        loaded.reference(&x, 3).unwrap(),
        m.reference(&x, 3).unwrap()
    );
    assert_eq!(
        m.size_breakdown().container_bytes,
        bytes.len() as u64,
        "sizes add up to the container"
    );
    // Seeded mutations of the container are refused or load canonically.
    let report = cmv_format::testing::check_mutations::<Fp16Toy>(&bytes, 7, 200);
    assert!(!format!("{report:?}").is_empty());
}

#[test]
fn gpu_side_matches_the_dense_kernel() {
    let Some(gpu) = cmv_runtime::gpu_for_tests("gpu_side_matches_the_dense_kernel") else {
        return;
    };
    let cfg = BenchConfig {
        shapes: vec![(1024, 2048)],
        batches: vec![1, 3, 17],
        warmup: 2,
        iters: 20,
        min_rotation_bytes: 0,
        timing: Timing::Graph,
        ..BenchConfig::default()
    };
    let mut bench = Baselines::new(&gpu, &cfg, 1000.0).unwrap();
    let mut notes = Vec::new();
    let rows = formats::run_gpu_all(
        &mut bench,
        &[toy()],
        &cfg.shapes,
        &|name| cfg.batches_for(name),
        &mut notes,
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(
        notes.len(),
        1,
        "batch 17 is past the dense kernels: {notes:?}"
    );
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert!(r.check.starts_with("rel_err="), "{}", r.check);
        assert_eq!(r.bits_per_weight, 16.0);
        assert_eq!(r.bytes_read, 2 * 1024 * 2048 + 2 * r.batch * 2048);
        assert!(r.median_us > 0.0 && r.read_us > 0.0);
        // The toy runs the dense fp16 kernel: about as fast as itself.
        let s = r.speedup_vs_dense.expect("dense fp16 measured");
        assert!((0.5..2.0).contains(&s), "{s}");
        let dense = bench
            .median_us(Baseline::CmvFp16, 1024, 2048, r.batch)
            .unwrap()
            .unwrap();
        assert!(dense > 0.0);
    }
    let dense_rows = bench::dense::run_gpu(&mut bench, |_| {}).unwrap();
    assert!(dense_rows.iter().any(|r| r.format == "dense-int8"));
}
