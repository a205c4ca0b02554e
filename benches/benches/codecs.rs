//! Encoders and decoders of the formats on the CPU (`cargo bench -p benches --bench codecs`).

use std::hint::black_box;

use ans_codec::{EncodeOptions, Layout, encode};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use spqr_format::{QuantizeOptions, quantize};

/// A deterministic int8 matrix with a bell-shaped spread of about 4 (an LCG and a sum of four
/// uniforms), like the MatVANS benchmark's entries.
fn int8_matrix(n: usize) -> Vec<i8> {
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    (0..n)
        .map(|_| {
            let mut t = 0i32;
            for _ in 0..4 {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                t += ((s >> 33) % 9) as i32 - 4;
            }
            t as i8
        })
        .collect()
}

fn ans(c: &mut Criterion) {
    let (rows, cols) = (1024, 1024);
    let w = int8_matrix(rows * cols);
    let mut g = c.benchmark_group("ans_codec");
    g.throughput(Throughput::Elements((rows * cols) as u64));
    for (layout, name) in [(Layout::WarpRows, "rows"), (Layout::WarpStripes, "stripes")] {
        let opts = EncodeOptions {
            layout,
            ..EncodeOptions::default()
        };
        g.bench_function(format!("encode_{name}_1024x1024"), |b| {
            b.iter(|| encode(black_box(&w), rows, cols, &opts))
        });
        let m = encode(&w, rows, cols, &opts).expect("encodes");
        g.bench_function(format!("decode_{name}_1024x1024"), |b| {
            b.iter(|| black_box(&m).decode())
        });
    }
    g.finish();
}

fn spqr(c: &mut Criterion) {
    let (rows, cols) = (512, 1024);
    let w: Vec<f32> = int8_matrix(rows * cols)
        .iter()
        .map(|&v| f32::from(v) / 16.0)
        .collect();
    let mut g = c.benchmark_group("spqr_format");
    g.throughput(Throughput::Elements((rows * cols) as u64));
    g.bench_function("quantize_data_free_512x1024", |b| {
        b.iter(|| quantize(black_box(&w), rows, cols, &QuantizeOptions::default()))
    });
    let m = quantize(&w, rows, cols, &QuantizeOptions::default()).expect("quantizes");
    g.bench_function("dequantize_512x1024", |b| {
        b.iter(|| black_box(&m).dequantize())
    });
    g.finish();
}

criterion_group!(benches, ans, spqr);
criterion_main!(benches);
