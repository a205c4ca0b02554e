//! GPU tests: the fused VQ GEMV against the f64 reference for every preset and odd
//! configurations, batch 1 to 16. Skipped (with a message) where there is no GPU;
//! `CMV_REQUIRE_GPU=1` makes that a failure.

use half::f16;
use vq_codebook::cmv_format::{CompressedMatrix, DeviceGemv, FormatError};
use vq_codebook::cmv_runtime::gpu_for_tests;
use vq_codebook::gpu::{
    BIG_CACHES, BigCache, DeviceVqMatrix, GPU_TOLERANCE, GemmKernel, VqGemv, VqKernel, VqOut,
};
use vq_codebook::{EncodeOptions, Scope, VqConfig, VqError, VqMatrix};

mod common;
use common::{tile, weights};

/// `n` fp16 inputs: the seeded `weights` times 20.
fn inputs(n: usize, seed: u64) -> Vec<f16> {
    weights(n, seed)
        .iter()
        .map(|v| f16::from_f32(v * 20.0))
        .collect()
}

fn rel(got: &[f16], want: &[f64]) -> f64 {
    vq_codebook::cmv_format::relative_error(got.iter().map(|v| f64::from(v.to_f32())), want)
}

/// `VQ<8, bits, residuals>` with one codebook per stage (the big-codebook kernel's).
fn big(bits: u32, residuals: usize) -> VqConfig {
    VqConfig {
        vec: 8,
        bits,
        residuals,
        scope: Scope::Tensor,
    }
}

#[test]
fn the_kernel_matches_the_reference() {
    let Some(gpu) = gpu_for_tests("the_kernel_matches_the_reference") else {
        return;
    };
    let k = VqGemv::new(&gpu).unwrap();
    let odd = VqConfig {
        vec: 3,
        bits: 5,
        residuals: 3,
        scope: Scope::Tile { rows: 7, cols: 9 },
    };
    let wide = VqConfig {
        vec: 5,
        bits: 16,
        residuals: 1,
        scope: Scope::Tensor,
    };
    let cases = [
        (VqConfig::gptvq2(), 300, 520),
        (VqConfig::aqlm3(), 64, 200),
        (VqConfig::cq4(), 129, 257),
        (VqConfig::cq2(), 1, 1),
        (odd, 50, 61),
        (wide, 33, 47),
    ];
    let cases = cases.into_iter().chain([
        (VqConfig::gptvq2(), 2048, 1100),
        (VqConfig::cq2(), 3000, 700),
        (tile(64, 256, 8), 200, 515),
        (tile(32, 64, 2), 97, 200),
        (tile(40, 128, 4), 40, 300),
        (VqConfig::gptvq2_256(), 700, 1000),
        (tile(512, 256, 8), 1100, 600),
        (tile(512, 128, 2), 600, 300),
        // The big-codebook kernel: two chunks, one stage, few entries, odd columns.
        (VqConfig::aqlm3(), 4100, 64),
        (big(9, 1), 2000, 100),
        (big(4, 2), 33, 13),
        (big(12, 1), 1030, 40),
        // The big-codebook tensor-core kernel: three row blocks, three slabs, odd columns.
        (big(10, 2), 1100, 301),
    ]);
    let (mut tables, mut mmas, mut bigs, mut big_mmas) = (0, 0, 0, 0);
    for (i, (config, rows, cols)) in cases.enumerate() {
        let w = weights(rows * cols, i as u64 + 1);
        let m = VqMatrix::encode(&w, rows, cols, &EncodeOptions::with(config)).unwrap();
        let mut kernels = vec![VqKernel::Stream];
        if m.table_geometry(512).is_some() {
            kernels.push(VqKernel::Table);
            tables += 1;
        }
        for row_groups in [Some(2), Some(4), None] {
            let takes = match row_groups {
                Some(r) => m.mma_geometry(r).is_some(),
                None => !m.mma_geometries().is_empty(),
            };
            if takes {
                kernels.push(VqKernel::Mma { row_groups });
                mmas += 1;
            }
        }
        if m.big_geometry().is_some() {
            // The default cache, every named split, and a partial shared one.
            kernels.push(VqKernel::Big { cache: None });
            for (_, c) in BIG_CACHES {
                kernels.push(VqKernel::Big { cache: Some(c) });
            }
            kernels.push(VqKernel::Big {
                cache: Some(BigCache {
                    reg_tiles: 8,
                    smem: 48,
                }),
            });
            bigs += 1;
        }
        if m.big_mma_geometry().is_some() {
            kernels.push(VqKernel::BigMma);
            big_mmas += 1;
        }
        for kernel in kernels {
            let dm = DeviceVqMatrix::upload_for(&gpu, &m, kernel).unwrap();
            assert_eq!(dm.kernel(), kernel);
            for batch in [1, 2, 3, 5, 8, 16] {
                let x: Vec<f16> = inputs(batch * cols, 99 + batch as u64);
                let want = m.reference(&x, batch).unwrap();
                let dx = gpu.upload(&x).unwrap();
                let mut out = VqOut::new(&gpu, rows, batch).unwrap();
                // Twice: the workspace must be left zero for the next launch.
                for round in 0..2 {
                    k.gemv(&dm, &dx, &mut out, batch).unwrap();
                    let got = gpu.download(out.y()).unwrap();
                    let e = rel(&got, &want);
                    assert!(
                        e < GPU_TOLERANCE,
                        "{kernel:?} {config:?} {rows}x{cols} batch {batch} round {round}: {e:e}"
                    );
                }
            }
        }
    }
    assert!(tables >= 8, "the table kernel ran on {tables} cases");
    assert!(mmas >= 23, "the tensor-core kernel ran on {mmas} cases");
    assert!(bigs >= 5, "the big-codebook kernel ran on {bigs} cases");
    assert!(
        big_mmas >= 4,
        "the big-codebook tensor-core kernel ran on {big_mmas} cases"
    );
}

/// A chain of layers as a decoder runs them, through the tensor-core kernel (GPTVQ-2) and the
/// big-codebook kernels (AQLM-3: the table kernel for one vector, the tensor-core one for 5
/// and 16; a one-stage codebook of 1024 entries: the table kernel, one launch per vector, for
/// 3): each product reads the vector the one before wrote,
/// queued back to back with no synchronization (with programmatic launch on Hopper a product
/// starts while the one before still runs). Every step within the tolerance of the f64
/// reference on the GPU's own input, with and without programmatic launch. (Not the same
/// bits: blocks that split a row block's columns add their fp32 sums in whatever order they
/// finish, so two runs may differ in the last bit.) A product that read one element of the
/// vector before the one before wrote it would be off by about 3% (weights of 1 / sqrt(d),
/// d = 1024): far above the tolerance.
#[test]
fn a_chain_of_layers_reads_each_output_after_it_is_written() {
    let Some(gpu) = gpu_for_tests("a_chain_of_layers_reads_each_output_after_it_is_written") else {
        return;
    };
    let d = 1024;
    // Weights of standard deviation 1 / sqrt(d): outputs about as large as the inputs.
    let raw = weights(d * d, 7);
    let rms = (raw.iter().map(|v| f64::from(*v).powi(2)).sum::<f64>() / raw.len() as f64).sqrt();
    let w: Vec<f32> = raw
        .iter()
        .map(|v| (f64::from(*v) / (rms * (d as f64).sqrt())) as f32)
        .collect();
    let runs = [
        (
            VqConfig::gptvq2(),
            VqKernel::Mma { row_groups: None },
            &[1usize, 5, 16][..],
        ),
        (VqConfig::aqlm3(), VqKernel::Big { cache: None }, &[1][..]),
        (big(10, 1), VqKernel::Big { cache: None }, &[3][..]),
        (VqConfig::aqlm3(), VqKernel::BigMma, &[5, 16][..]),
    ];
    for (config, kernel, batches) in runs {
        let m = VqMatrix::encode(&w, d, d, &EncodeOptions::with(config)).unwrap();
        let dm = DeviceVqMatrix::upload_for(&gpu, &m, kernel).unwrap();
        let steps = 6;
        for &batch in batches {
            let x0: Vec<f16> = weights(batch * d, 40 + batch as u64)
                .iter()
                .map(|v| f16::from_f32(*v / rms as f32))
                .collect();
            for pdl in [true, false] {
                let k = VqGemv::with_pdl(&gpu, pdl).unwrap();
                let dx = gpu.upload(&x0).unwrap();
                let mut outs: Vec<VqOut> = (0..steps)
                    .map(|_| VqOut::new(&gpu, d, batch).unwrap())
                    .collect();
                k.gemv(&dm, &dx, &mut outs[0], batch).unwrap();
                for i in 1..steps {
                    let (head, tail) = outs.split_at_mut(i);
                    k.gemv(&dm, head[i - 1].y(), &mut tail[0], batch).unwrap();
                }
                let mut xs = vec![x0.clone()];
                xs.extend(outs.iter().map(|o| gpu.download(o.y()).unwrap()));
                for i in 0..steps {
                    let want = m.reference(&xs[i], batch).unwrap();
                    let e = rel(&xs[i + 1], &want);
                    assert!(
                        e < GPU_TOLERANCE,
                        "{} batch {batch} step {i} (programmatic {}): {e:e}",
                        kernel.name(),
                        k.uses_pdl()
                    );
                }
            }
        }
    }
}

#[test]
fn nan_inputs_propagate_and_bad_sizes_are_errors() {
    let Some(gpu) = gpu_for_tests("nan_inputs_propagate_and_bad_sizes_are_errors") else {
        return;
    };
    let (rows, cols) = (40, 100);
    let m = VqMatrix::encode(
        &weights(rows * cols, 5),
        rows,
        cols,
        &EncodeOptions::with(VqConfig::cq4()),
    )
    .unwrap();
    let k = <VqMatrix as DeviceGemv>::load(&gpu).unwrap();
    let dm = m.upload(&gpu).unwrap();
    let mut x = vec![f16::from_f32(0.5); 2 * cols];
    x[cols + 3] = f16::NAN;
    let want = CompressedMatrix::reference(&m, &x, 2).unwrap();
    let dx = gpu.upload(&x).unwrap();
    let mut out = VqMatrix::alloc_out(&gpu, rows, 2).unwrap();
    VqMatrix::gemv(&k, &dm, &dx, &mut out, 2).unwrap();
    let got = gpu.download(out.y()).unwrap();
    assert!(got[rows..].iter().all(|v| v.is_nan()) && want[rows..].iter().all(|v| v.is_nan()));
    assert!(rel(&got[..rows], &want[..rows]) < GPU_TOLERANCE);
    let e = VqMatrix::gemv(&k, &dm, &dx, &mut out, 3).unwrap_err();
    assert!(
        matches!(e, VqError::Format(FormatError::Length { .. })),
        "{e}"
    );
    let e = VqMatrix::gemv(&k, &dm, &dx, &mut out, 17).unwrap_err();
    assert!(
        matches!(e, VqError::Format(FormatError::Batch { .. })),
        "{e}"
    );
}

/// The tensor-core GEMM (more than 16 inputs) against the f64 reference: token counts across
/// one and several 128-token blocks, rows and columns off its 256 x 128 grid, every vector
/// size, per-tensor and tile codebooks, the Hopper kernel's split-K and stream-K; 16 inputs
/// take the GEMV; what it does not take is a typed error.
#[test]
fn the_gemm_matches_the_reference() {
    let Some(gpu) = gpu_for_tests("the_gemm_matches_the_reference") else {
        return;
    };
    let k = VqGemv::new(&gpu).unwrap();
    let cases = [
        (VqConfig::gptvq2(), 600, 520),
        (VqConfig::gptvq2(), 1100, 4096),
        (VqConfig::gptvq2_256(), 300, 264),
        (VqConfig::cq4(), 129, 256),
        (VqConfig::cq2(), 70, 136),
        (tile(256, 256, 8), 300, 512),
        (tile(512, 128, 2), 600, 304),
        (tile(40, 128, 4), 40, 8),
    ];
    let mut hopper = 0;
    for (i, (config, rows, cols)) in cases.into_iter().enumerate() {
        let w = weights(rows * cols, i as u64 + 21);
        let m = VqMatrix::encode(&w, rows, cols, &EncodeOptions::with(config)).unwrap();
        assert!(m.gemm_takes());
        let dm = DeviceVqMatrix::upload(&gpu, &m).unwrap();
        for tokens in [16, 17, 32, 128, 129, 300] {
            let x: Vec<f16> = inputs(tokens * cols, 7 + tokens as u64);
            let want = m.reference(&x, tokens).unwrap();
            let dx = gpu.upload(&x).unwrap();
            let vec = config.vec;
            let mut kernels = vec![GemmKernel::Auto, GemmKernel::MmaSync];
            if k.has_wgmma(vec) {
                // Stream-K on 1, 2, 3, 5 and 7 blocks: segments that cut tiles at every
                // place, several tiles per block, parts of one tile from several blocks.
                kernels.extend([
                    GemmKernel::Wgmma,
                    GemmKernel::WgmmaSplits(2),
                    GemmKernel::WgmmaSplits(3),
                    GemmKernel::WgmmaStream(1),
                    GemmKernel::WgmmaStream(2),
                    GemmKernel::WgmmaStream(3),
                    GemmKernel::WgmmaStream(5),
                    GemmKernel::WgmmaStream(7),
                ]);
                hopper += 1;
            } else if tokens > 16 {
                // Off sm_90, or v = 8: asking for the Hopper kernel is a typed error.
                let mut out = VqOut::new(&gpu, rows, tokens).unwrap();
                let e = k.gemm_with(&dm, &dx, &mut out, tokens, GemmKernel::Wgmma);
                assert!(matches!(e, Err(VqError::Gemm { .. })), "{e:?}");
            }
            for kernel in kernels {
                let mut out = VqOut::new(&gpu, rows, tokens).unwrap();
                // Twice: a split launch must leave its sums and counters zero.
                for round in 0..2 {
                    k.gemm_with(&dm, &dx, &mut out, tokens, kernel).unwrap();
                    let got = gpu.download(out.y()).unwrap();
                    let e = rel(&got, &want);
                    assert!(
                        e < GPU_TOLERANCE,
                        "{kernel:?} {config:?} {rows}x{cols} tokens {tokens} round {round}: {e:e}"
                    );
                }
            }
        }
    }
    if hopper == 0 {
        eprintln!(
            "the_gemm_matches_the_reference: no sm_90 GPU, the Hopper (wgmma) GEMM was not run"
        );
    }
    // Not taken: a stream-kernel upload, columns not a multiple of 8; 0 inputs.
    let w = weights(64 * 260, 3);
    let odd = VqMatrix::encode(&w, 64, 260, &EncodeOptions::with(VqConfig::gptvq2())).unwrap();
    let x = gpu.upload(&vec![f16::ONE; 17 * 260]).unwrap();
    let mut out = VqOut::new(&gpu, 64, 17).unwrap();
    for kernel in [VqKernel::Stream, VqKernel::Mma { row_groups: None }] {
        let dm = DeviceVqMatrix::upload_for(&gpu, &odd, kernel).unwrap();
        let e = k.gemm(&dm, &x, &mut out, 17).unwrap_err();
        assert!(matches!(e, VqError::Gemm { tokens: 17, .. }), "{e}");
        assert!(e.to_string().contains("16 inputs at a time"), "{e}");
    }
    let dm = DeviceVqMatrix::upload(&gpu, &odd).unwrap();
    assert!(k.gemm(&dm, &x, &mut out, 0).is_err());
}

/// The Hopper GEMM's stream-K alone (small enough for compute-sanitizer's racecheck): 10
/// tiles of 5 slabs on 1, 3, 7 and 32 blocks, so that segments start and end inside tiles,
/// one block takes several tiles, others the middle of a tile, and a tile's parts come from
/// up to four blocks; twice each (the sums and counters are left zero). Skipped off sm_90.
#[test]
fn the_stream_k_gemm_matches_the_reference() {
    let Some(gpu) = gpu_for_tests("the_stream_k_gemm_matches_the_reference") else {
        return;
    };
    let k = VqGemv::new(&gpu).unwrap();
    if !k.has_wgmma(4) {
        eprintln!("the_stream_k_gemm_matches_the_reference: no sm_90 GPU, skipped");
        return;
    }
    let (rows, cols, tokens) = (1200, 640, 200);
    let w = weights(rows * cols, 5);
    let m = VqMatrix::encode(&w, rows, cols, &EncodeOptions::with(VqConfig::gptvq2())).unwrap();
    let dm = DeviceVqMatrix::upload(&gpu, &m).unwrap();
    let x: Vec<f16> = inputs(tokens * cols, 9);
    let want = m.reference(&x, tokens).unwrap();
    let dx = gpu.upload(&x).unwrap();
    let mut out = VqOut::new(&gpu, rows, tokens).unwrap();
    for blocks in [1, 3, 7, 32] {
        for round in 0..2 {
            k.gemm_with(&dm, &dx, &mut out, tokens, GemmKernel::WgmmaStream(blocks))
                .unwrap();
            let e = rel(&gpu.download(out.y()).unwrap(), &want);
            assert!(e < GPU_TOLERANCE, "{blocks} blocks, round {round}: {e:e}");
        }
    }
}

/// More than 16 inputs on the big codebooks: chunks through the GEMV kernels (of up to 64 on
/// the tensor-core one's `_t64`, a last chunk of up to 16 on `_b8`/`_b16` or of one input on
/// the table kernel; one stage: chunks of 16 on the table kernel).
#[test]
fn the_big_gemm_runs_in_gemv_chunks() {
    let Some(gpu) = gpu_for_tests("the_big_gemm_runs_in_gemv_chunks") else {
        return;
    };
    let k = VqGemv::new(&gpu).unwrap();
    for (i, (config, rows, cols)) in [(VqConfig::aqlm3(), 520, 136), (big(9, 1), 300, 40)]
        .into_iter()
        .enumerate()
    {
        let w = weights(rows * cols, 60 + i as u64);
        let m = VqMatrix::encode(&w, rows, cols, &EncodeOptions::with(config)).unwrap();
        let mut uploads = vec![VqKernel::Big { cache: None }];
        if m.big_mma_geometry().is_some() {
            uploads.push(VqKernel::BigMma);
        }
        for kernel in uploads {
            let dm = DeviceVqMatrix::upload_for(&gpu, &m, kernel).unwrap();
            for tokens in [17, 40, 64, 65, 80, 130] {
                let x: Vec<f16> = inputs(tokens * cols, 5 + tokens as u64);
                let want = m.reference(&x, tokens).unwrap();
                let dx = gpu.upload(&x).unwrap();
                let mut out = VqOut::new(&gpu, rows, tokens).unwrap();
                for round in 0..2 {
                    k.gemm(&dm, &dx, &mut out, tokens).unwrap();
                    let e = rel(&gpu.download(out.y()).unwrap(), &want);
                    assert!(
                        e < GPU_TOLERANCE,
                        "{kernel:?} {config:?} {rows}x{cols} tokens {tokens} round {round}: {e:e}"
                    );
                }
                let e = k.gemm_with(&dm, &dx, &mut out, tokens, GemmKernel::MmaSync);
                assert!(matches!(e, Err(VqError::Gemm { .. })), "{e:?}");
            }
        }
    }
}

/// The big-codebook kernels alone (small enough for compute-sanitizer): AQLM-3 over two chunks
/// with every codebook-cache split, one stage with few entries, batch 1 and 3 (3: the
/// tensor-core kernel for two stages); the tensor-core kernel at batch 1 to 16.
#[test]
fn the_big_kernel_matches_the_reference() {
    let Some(gpu) = gpu_for_tests("the_big_kernel_matches_the_reference") else {
        return;
    };
    let k = VqGemv::new(&gpu).unwrap();
    for (i, (config, rows, cols)) in [(VqConfig::aqlm3(), 4100, 24), (big(6, 1), 300, 35)]
        .into_iter()
        .enumerate()
    {
        let w = weights(rows * cols, 50 + i as u64);
        let m = VqMatrix::encode(&w, rows, cols, &EncodeOptions::with(config)).unwrap();
        let caches = BIG_CACHES.map(|(_, c)| Some(c));
        let odd = [
            Some(BigCache {
                reg_tiles: 0,
                smem: 16,
            }),
            Some(BigCache {
                reg_tiles: 8,
                smem: 8,
            }),
        ];
        let kernels = [None]
            .into_iter()
            .chain(caches)
            .chain(odd)
            .map(|cache| (VqKernel::Big { cache }, &[1usize, 3][..]))
            .chain(
                m.big_mma_geometry()
                    .map(|_| (VqKernel::BigMma, &[1usize, 2, 8, 9, 16][..])),
            );
        for (kernel, batches) in kernels {
            let dm = DeviceVqMatrix::upload_for(&gpu, &m, kernel).unwrap();
            for &batch in batches {
                let x: Vec<f16> = inputs(batch * cols, 7 + batch as u64);
                let want = m.reference(&x, batch).unwrap();
                let dx = gpu.upload(&x).unwrap();
                let mut out = VqOut::new(&gpu, rows, batch).unwrap();
                for round in 0..2 {
                    k.gemv(&dm, &dx, &mut out, batch).unwrap();
                    let e = rel(&gpu.download(out.y()).unwrap(), &want);
                    assert!(
                        e < GPU_TOLERANCE,
                        "{kernel:?} {config:?} {rows}x{cols} batch {batch} round {round}: {e:e}"
                    );
                }
            }
        }
    }
}
