//! CPU reference products of the dense baselines.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use dense_gemv::cpu;
use half::f16;

fn dense_references(c: &mut Criterion) {
    let (rows, cols) = (1024, 4096);
    let w: Vec<f16> = (0..rows * cols)
        .map(|i| f16::from_f32(((i * 37) % 101) as f32 / 50.0 - 1.0))
        .collect();
    let x: Vec<f16> = (0..cols)
        .map(|i| f16::from_f32(((i * 13) % 29) as f32 / 14.0 - 1.0))
        .collect();
    let wi: Vec<i8> = (0..rows * cols).map(|i| ((i * 37) % 255) as i8).collect();
    let xi: Vec<i8> = (0..cols).map(|i| ((i * 13) % 251) as i8).collect();
    let mut g = c.benchmark_group("dense_cpu_reference");
    g.throughput(Throughput::Elements((rows * cols) as u64));
    g.bench_function("gemv_f16_1024x4096", |b| {
        b.iter(|| cpu::gemv_f16(black_box(&w), rows, cols, black_box(&x), 1))
    });
    g.bench_function("gemv_i8_1024x4096", |b| {
        b.iter(|| cpu::gemv_i8(black_box(&wi), rows, cols, black_box(&xi), 1))
    });
    g.finish();
}

criterion_group!(benches, dense_references);
criterion_main!(benches);
