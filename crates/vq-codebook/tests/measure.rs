//! Measurements for `docs/VQ.md` (ignored by default; run with
//! `cargo test --release -p vq-codebook --test measure -- --ignored --nocapture`).

use std::time::Instant;

use cmv_format::testing::SeededRng;
use vq_codebook::rtn::{relative_error, rtn};
use vq_codebook::{EncodeOptions, VqConfig, VqMatrix};

fn gaussian(seed: u64, n: usize) -> Vec<f32> {
    let mut rng = SeededRng::new(seed);
    (0..n).map(|_| rng.normal() as f32).collect()
}

/// GPTVQ-2 on a 4096 x 14336 Gaussian matrix: the encode time.
#[test]
#[ignore]
fn encode_time_4096x14336() {
    let (rows, cols) = (4096, 14336);
    let w = gaussian(1, rows * cols);
    let t = Instant::now();
    let m = VqMatrix::encode(&w, rows, cols, &EncodeOptions::default()).unwrap();
    let secs = t.elapsed().as_secs_f64();
    let err = relative_error(&m.dequantize(), &w);
    println!(
        "gptvq2 {rows}x{cols}: encode {secs:.1} s on {} threads, relative error {err:.4}, {:.4} bits/weight",
        rayon::current_num_threads(),
        m.bits_per_weight()
    );
}

/// Each preset and RTN (groups of 128) on a seeded Gaussian matrix: relative weight error.
#[test]
#[ignore]
fn errors_against_rtn() {
    let n: usize = std::env::var("VQ_SIDE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1024);
    let (rows, cols) = (n, n);
    let w = gaussian(2, rows * cols);
    for (name, c) in [
        ("gptvq2", VqConfig::gptvq2()),
        ("aqlm3", VqConfig::aqlm3()),
        ("cq4", VqConfig::cq4()),
        ("cq2", VqConfig::cq2()),
    ] {
        let t = Instant::now();
        let m = VqMatrix::encode(&w, rows, cols, &EncodeOptions::with(c)).unwrap();
        println!(
            "{name} {rows}x{cols}: {:.4} bits/weight, relative error {:.4}, encode {:.1} s",
            m.bits_per_weight(),
            relative_error(&m.dequantize(), &w),
            t.elapsed().as_secs_f64()
        );
    }
    for bits in [2, 3, 4] {
        let q = rtn(&w, rows, cols, bits, 128);
        println!(
            "rtn{bits} g128 {rows}x{cols}: {:.4} bits/weight (f16 scale+zero), relative error {:.4}",
            bits as f64 + 32.0 / 128.0,
            relative_error(&q, &w)
        );
    }
}
