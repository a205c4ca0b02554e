//! The MatVANS benchmark (`docs/ANS.md`, the seed's section 2): a chain of 10 int8 matrices
//! `d x d` with entries `round(N(0, sigma^2))`, `v_i = round_half_even(alpha_i W_i v_(i-1))`,
//! timed from the compressed matrices resident on the GPU to `v_10` downloaded, against the
//! same chain on the dense int8 kernel.

use std::time::Instant;

use ans_codec::gpu::{AnsGemv, DeviceAnsMatrix};
use ans_codec::{AnsMatrix, EncodeOptions, Layout};
use cmv_runtime::{CudaSlice, Gpu};
use dense_gemv::{DenseGemv, DeviceMatrix};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand_distr::{Distribution, Normal};
use rayon::prelude::*;
use serde::Serialize;

use crate::BenchError;

/// Matrices in a chain.
pub const CHAIN: usize = 10;

/// What is measured: the four layouts with the default model (within 0.1 bits of the
/// entropy; `ans-lanes` and `ans-lanes-esc` always at 8 bits, with the default segment), and `ans-warp-rows`
/// forced onto the 7-bit model, decoded from shared memory (the default) and from the seed's
/// register tables (`-regs`).
const VARIANTS: [(Layout, Option<u32>, &str); 6] = [
    (Layout::WarpLanesEsc, None, "ans-lanes-esc"),
    (Layout::WarpLanes, None, "ans-lanes"),
    (Layout::WarpRows, None, "ans-warp-rows"),
    (Layout::WarpRows, Some(7), "ans-warp-rows-p7"),
    (Layout::WarpRows, Some(7), "ans-warp-rows-p7-regs"),
    (Layout::WarpStripes, None, "ans-warp-stripes"),
];

/// One measured variant: its name and encoder options.
struct Variant {
    name: String,
    opts: EncodeOptions,
}

/// The variants of `cfg`: [`VARIANTS`], `ans-lanes-s{S}` and `ans-lanes-esc-s{S}` for each of
/// `cfg.lane_segments`, keeping those named in `cfg.variants` (all when it is empty).
fn variants(cfg: &ChainConfig) -> Vec<Variant> {
    let fixed = VARIANTS.iter().map(|&(layout, precision, name)| Variant {
        name: name.into(),
        opts: EncodeOptions {
            layout,
            precision,
            ..EncodeOptions::default()
        },
    });
    let segments = cfg.lane_segments.iter().flat_map(|&s| {
        [
            (Layout::WarpLanes, "ans-lanes"),
            (Layout::WarpLanesEsc, "ans-lanes-esc"),
        ]
        .map(|(layout, name)| Variant {
            name: format!("{name}-s{s}"),
            opts: EncodeOptions {
                layout,
                lane_segment: Some(s),
                ..EncodeOptions::default()
            },
        })
    });
    fixed
        .chain(segments)
        .filter(|v| cfg.variants.is_empty() || cfg.variants.contains(&v.name))
        .collect()
}

/// How to run the chain benchmark.
#[derive(Clone, Debug, Serialize)]
pub struct ChainConfig {
    /// Matrix sizes `d`.
    pub dims: Vec<usize>,
    /// Standard deviation of the entries before rounding.
    pub sigma: f64,
    /// Timed chains (the median is reported).
    pub iters: usize,
    /// Untimed chains first.
    pub warmup: usize,
    /// Chain copies are rotated through until they hold at least this many bytes and 4 x L2.
    pub min_rotation_bytes: usize,
    /// Also measure `ans-lanes` with these segments (variants `ans-lanes-s{S}`).
    pub lane_segments: Vec<usize>,
    /// Only these variants (by name; all when empty).
    pub variants: Vec<String>,
}

impl Default for ChainConfig {
    fn default() -> Self {
        Self {
            dims: vec![2048, 4096, 8192, 16384],
            sigma: 4.0,
            iters: 100,
            warmup: 10,
            min_rotation_bytes: 1 << 30,
            lane_segments: Vec::new(),
            variants: Vec::new(),
        }
    }
}

/// Sizes of one compressed matrix, per element, and what the model says it should cost.
#[derive(Clone, Debug, Serialize)]
pub struct SizeRow {
    /// Matrix side.
    pub d: usize,
    /// Layout.
    pub layout: String,
    /// Model precision, bits.
    pub precision: u32,
    /// Empirical entropy of the entries, bits per element.
    pub entropy: f64,
    /// Cross-entropy under the quantized model, bits per element.
    pub cross_entropy: f64,
    /// Emitted data words, bits per element.
    pub payload: f64,
    /// Flushed coder states, bits per element.
    pub flushed_states: f64,
    /// Zero padding of the streams, bits per element.
    pub padding: f64,
    /// Tables, bits per element.
    pub tables: f64,
    /// Offsets, bits per element.
    pub offsets: f64,
    /// Everything (header included), bits per element.
    pub total: f64,
}

/// One timed chain.
#[derive(Clone, Debug, Serialize)]
pub struct ChainRow {
    /// Matrix side.
    pub d: usize,
    /// `ans-warp-rows`, `ans-warp-stripes` or `dense-int8`.
    pub kernel: String,
    /// Median time of a chain of 10 products plus the download of `v_10`, microseconds.
    pub median_us: f64,
    /// Multiply-accumulates per second, 10^9.
    pub gmacs: f64,
    /// Bytes of matrix data read per chain over the median time, GB/s.
    pub gbps: f64,
    /// Dense chain time over this time.
    pub speedup_vs_dense: f64,
    /// Chain copies rotated through.
    pub copies: usize,
}

/// A chain's matrices, inputs and expected result.
struct Chain {
    d: usize,
    mats: Vec<Vec<i8>>,
    v0: Vec<i8>,
    alphas: Vec<f32>,
    v10: Vec<i8>,
}

fn gaussian_int8(n: usize, sigma: f64, seed: u64) -> Vec<i8> {
    const BLOCK: usize = 1 << 16;
    (0..n.div_ceil(BLOCK))
        .into_par_iter()
        .flat_map_iter(|b| {
            let mut rng =
                SmallRng::seed_from_u64(seed ^ (b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let normal = Normal::new(0.0, sigma.max(1e-9))
                .unwrap_or_else(|_| Normal::new(0.0, 1.0).expect("unit normal"));
            let len = BLOCK.min(n - b * BLOCK);
            (0..len)
                .map(move |_| {
                    normal
                        .sample(&mut rng)
                        .round_ties_even()
                        .clamp(-128.0, 127.0) as i8
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

fn dense_product(w: &[i8], d: usize, v: &[i8]) -> Vec<i32> {
    w.par_chunks(d)
        .map(|row| {
            row.iter().zip(v).fold(0i32, |a, (&p, &q)| {
                a.wrapping_add(i32::from(p) * i32::from(q))
            })
        })
        .collect()
}

impl Chain {
    fn new(d: usize, sigma: f64, seed: u64) -> Self {
        let mats: Vec<Vec<i8>> = (0..CHAIN)
            .map(|i| gaussian_int8(d * d, sigma, seed + i as u64))
            .collect();
        let v0 = gaussian_int8(d, sigma, seed + 100);
        let mut v = v0.clone();
        let mut alphas = Vec::with_capacity(CHAIN);
        for w in &mats {
            let acc = dense_product(w, d, &v);
            let peak = acc
                .iter()
                .map(|a| a.unsigned_abs())
                .max()
                .unwrap_or(0)
                .max(1);
            // The largest scale that keeps every element inside int8 (no saturation).
            let alpha = 127.0 / peak as f32;
            v = acc
                .iter()
                .map(|&a| cmv_device::requantize(a, alpha))
                .collect();
            alphas.push(alpha);
        }
        Chain {
            d,
            mats,
            v0,
            alphas,
            v10: v,
        }
    }
}

fn runtime(e: impl Into<BenchError>) -> BenchError {
    e.into()
}

fn rt(e: cmv_runtime::RuntimeError) -> BenchError {
    BenchError::Runtime(e)
}

/// Times `run(copy)`, which must queue one chain on copy `copy` and download `v_10`; checks
/// the downloaded result of every timed chain, and runs `after()` (a check of the kernels'
/// error flags, not part of a product) after each one, outside the timed part.
fn time_chain(
    cfg: &ChainConfig,
    copies: usize,
    want: &[i8],
    what: &str,
    mut run: impl FnMut(usize) -> Result<Vec<i8>, BenchError>,
    mut after: impl FnMut() -> Result<(), BenchError>,
) -> Result<f64, BenchError> {
    for i in 0..cfg.warmup {
        run(i % copies)?;
        after()?;
    }
    let mut samples = Vec::with_capacity(cfg.iters);
    for i in 0..cfg.iters {
        let t0 = Instant::now();
        let v10 = run(i % copies)?;
        samples.push(t0.elapsed().as_secs_f64() * 1e6);
        after()?;
        if v10 != want {
            return Err(BenchError::Mismatch {
                what: what.into(),
                detail: "v_10 differs from the CPU".into(),
            });
        }
    }
    samples.sort_by(f64::total_cmp);
    Ok(samples[samples.len() / 2])
}

fn size_row(d: usize, layout: &str, m: &AnsMatrix) -> SizeRow {
    let s = m.entropy_report();
    let n = (m.rows() * m.cols()) as f64;
    let per = |bytes: usize| 8.0 * bytes as f64 / n;
    SizeRow {
        d,
        layout: layout.into(),
        precision: m.precision(),
        entropy: s.entropy_bits,
        cross_entropy: s.cross_entropy_bits,
        payload: per(s.payload_bytes),
        flushed_states: per(s.flushed_state_bytes),
        padding: per(s.padding_bytes),
        tables: per(s.table_bytes),
        offsets: per(s.offset_bytes),
        total: per(s.total_bytes()),
    }
}

/// Runs the chain benchmark on the GPU. `progress` gets each line as it is measured.
pub fn run_gpu(
    gpu: &Gpu,
    cfg: &ChainConfig,
    mut progress: impl FnMut(&str),
) -> Result<(Vec<SizeRow>, Vec<ChainRow>), BenchError> {
    let dense = DenseGemv::new(gpu)?;
    let mut ans = AnsGemv::new(gpu)?;
    let l2 = gpu.info().l2_bytes;
    let mut sizes = Vec::new();
    let mut rows = Vec::new();
    for &d in &cfg.dims {
        let chain = Chain::new(d, cfg.sigma, 7 * d as u64);
        let dense_bytes = CHAIN * d * d;
        let copies_for = |bytes: usize| {
            (4 * l2)
                .max(cfg.min_rotation_bytes)
                .div_ceil(bytes.max(1))
                .max(1)
        };
        // Dense int8 chain.
        let dcopies = copies_for(dense_bytes);
        let mut dmats: Vec<Vec<DeviceMatrix<i8>>> = Vec::new();
        let first: Vec<DeviceMatrix<i8>> = chain
            .mats
            .iter()
            .map(|w| DeviceMatrix::upload_i8(gpu, w, d, d))
            .collect::<Result<_, _>>()?;
        for _ in 1..dcopies {
            dmats.push(
                first
                    .iter()
                    .map(DeviceMatrix::try_clone)
                    .collect::<Result<_, _>>()?,
            );
        }
        dmats.insert(0, first);
        let x0: CudaSlice<i8> = gpu.upload(&chain.v0).map_err(rt)?;
        let mut bufs: Vec<CudaSlice<i8>> = (0..2)
            .map(|_| gpu.alloc_zeros::<i8>(d))
            .collect::<Result<_, _>>()
            .map_err(rt)?;
        let mut y32 = gpu.alloc_zeros::<i32>(d).map_err(rt)?;
        let dense_us = time_chain(
            cfg,
            dcopies,
            &chain.v10,
            &format!("dense-int8 chain d={d}"),
            |c| {
                for (i, w) in dmats[c].iter().enumerate() {
                    let (a, b) = bufs.split_at_mut(1);
                    let (src, dst) = if i % 2 == 0 {
                        (&a[0], &mut b[0])
                    } else {
                        (&b[0], &mut a[0])
                    };
                    let x = if i == 0 { &x0 } else { src };
                    dense.gemv_i8(w, x, &mut y32, dst, chain.alphas[i], 1)?;
                }
                // After 10 products the result is in bufs[(CHAIN - 1) % 2 == 1 ? 0 : 1].
                let last = if CHAIN.is_multiple_of(2) {
                    &bufs[0]
                } else {
                    &bufs[1]
                };
                gpu.download(last).map_err(rt)
            },
            || Ok(()),
        )?;
        drop(dmats);
        let macs = (CHAIN * d * d) as f64;
        rows.push(ChainRow {
            d,
            kernel: "dense-int8".into(),
            median_us: dense_us,
            gmacs: macs / dense_us / 1e3,
            gbps: dense_bytes as f64 / dense_us / 1e3,
            speedup_vs_dense: 1.0,
            copies: dcopies,
        });
        progress(&format!("d={d} dense-int8 chain: {dense_us:.1} us"));
        for Variant { name, opts } in variants(cfg) {
            let name = name.as_str();
            let t0 = Instant::now();
            let enc: Vec<AnsMatrix> = chain
                .mats
                .iter()
                .map(|w| ans_codec::encode(w, d, d, &opts))
                .collect::<Result<_, _>>()
                .map_err(runtime)?;
            let encode_s = t0.elapsed().as_secs_f64();
            sizes.push(size_row(d, name, &enc[0]));
            let first: Vec<DeviceAnsMatrix> = enc
                .iter()
                .map(|m| DeviceAnsMatrix::upload(gpu, m))
                .collect::<Result<_, _>>()
                .map_err(runtime)?;
            let bytes: usize = first.iter().map(DeviceAnsMatrix::bytes_read).sum();
            let copies = copies_for(bytes);
            let mut mats = vec![first];
            for _ in 1..copies {
                let c = mats[0]
                    .iter()
                    .map(DeviceAnsMatrix::try_clone)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(runtime)?;
                mats.push(c);
            }
            ans.set_shared_tables(!name.ends_with("-regs"));
            let us = time_chain(
                cfg,
                copies,
                &chain.v10,
                &format!("{name} chain d={d}"),
                |c| {
                    for (i, m) in mats[c].iter().enumerate() {
                        let (a, b) = bufs.split_at_mut(1);
                        let (src, dst) = if i % 2 == 0 {
                            (&a[0], &mut b[0])
                        } else {
                            (&b[0], &mut a[0])
                        };
                        let x = if i == 0 { &x0 } else { src };
                        ans.gemv(m, x, &mut y32, dst, chain.alphas[i])
                            .map_err(runtime)?;
                    }
                    let last = if CHAIN.is_multiple_of(2) {
                        &bufs[0]
                    } else {
                        &bufs[1]
                    };
                    gpu.download(last).map_err(rt)
                },
                || ans.check(gpu).map_err(runtime),
            )?;
            rows.push(ChainRow {
                d,
                kernel: name.into(),
                median_us: us,
                gmacs: macs / us / 1e3,
                gbps: bytes as f64 / us / 1e3,
                speedup_vs_dense: dense_us / us,
                copies,
            });
            progress(&format!(
                "d={d} {name} chain: {us:.1} us ({:.2}x dense), {:.3} bits/element (entropy {:.3}), encoded in {encode_s:.1} s",
                dense_us / us,
                sizes.last().map_or(0.0, |s| s.total),
                sizes.last().map_or(0.0, |s| s.entropy),
            ));
        }
        let _ = chain.d;
    }
    Ok((sizes, rows))
}

/// The CPU side of the benchmark: compressed sizes of one matrix per `d` (no GPU needed).
pub fn run_cpu(cfg: &ChainConfig) -> Result<Vec<SizeRow>, BenchError> {
    let mut out = Vec::new();
    for &d in &cfg.dims {
        let w = gaussian_int8(d * d, cfg.sigma, 7 * d as u64);
        for v in variants(cfg) {
            let m = ans_codec::encode(&w, d, d, &v.opts).map_err(runtime)?;
            out.push(size_row(d, &v.name, &m));
        }
    }
    Ok(out)
}
