//! VQ extras: the GEMV kernels other than the default (`--vq-kernels`: `mma` (the default
//! choice), `mma2`, `mma4`, `table`, `stream`, `big` and its codebook-cache splits) beside the format suite's rows, on the same
//! weights and inputs.

use vq_codebook::VqMatrix;
use vq_codebook::gpu::{VqKernel, set_kernel_preference};

use crate::dense::Baselines;
use crate::formats::{Pass, run_gpu_passes};
use crate::{BenchError, Row};

/// Runs every shape of `shapes` (seeded as in the format suite) at `batches` with each of
/// `kernels` where it takes the matrix (the default choice where it does not); rows are named
/// like `gptvq2/table`.
///
/// # Errors
/// The format's errors, runtime errors, [`BenchError::Mismatch`].
pub fn run_kernels(
    bench: &mut Baselines<'_>,
    shapes: &[(usize, usize)],
    batches: &[usize],
    kernels: &[VqKernel],
    progress: &mut dyn FnMut(&Row),
) -> Result<Vec<Row>, BenchError> {
    // One encoding per shape (AQLM-3's takes about a minute at the 70B shapes), every
    // kernel on it.
    let setups: Vec<Box<dyn Fn()>> = kernels
        .iter()
        .map(|&k| Box::new(move || set_kernel_preference(Some(k))) as Box<dyn Fn()>)
        .collect();
    let passes: Vec<Pass<'_>> = kernels
        .iter()
        .zip(&setups)
        .map(|(k, f)| (format!("/{}", k.name()), &**f))
        .collect();
    let rows = shapes
        .iter()
        .enumerate()
        .try_fold(Vec::new(), |mut acc, (index, &shape)| {
            acc.extend(run_gpu_passes::<VqMatrix>(
                bench,
                index,
                shape,
                batches,
                &passes,
                &|_| Ok(()),
                progress,
            )?);
            Ok::<_, BenchError>(acc)
        });
    set_kernel_preference(None);
    rows
}

/// One VQ-GEMM measurement (`--vq-gemm-tokens`): GPTVQ-2 or AQLM-3 at one shape and input
/// count against cuBLAS fp16 GEMM on the dequantized weights.
#[derive(Clone, Debug, serde::Serialize)]
pub struct GemmRow {
    /// Configuration (`gptvq2`, `aqlm3`).
    pub config: String,
    /// The kernel: `auto` (what `VqGemv::gemm` runs: GEMV launches of 16 for a few dozen
    /// inputs, else the GEMM), `mma` (`mma.sync`, every GPU), `wgmma` (Hopper, split-K chosen
    /// per launch) or `wgmma-nosplit`.
    pub kernel: String,
    /// Matrix rows.
    pub rows: usize,
    /// Matrix columns.
    pub cols: usize,
    /// Input rows (tokens).
    pub tokens: usize,
    /// Weight copies rotated through (VQ; cuBLAS uses its own count).
    pub copies: usize,
    /// Median time, microseconds.
    pub median_us: f64,
    /// `2 rows cols tokens / median`, 10^12 per second.
    pub tflops: f64,
    /// cuBLAS fp16 GEMM median on the dequantized weights, microseconds.
    pub cublas_us: f64,
    /// `cublas_us / median_us`.
    pub speedup_vs_cublas: f64,
    /// Relative error of sampled tokens against the f64 reference, before and after timing
    /// (VQ, then cuBLAS).
    pub check: String,
}

impl GemmRow {
    /// The row as one progress line.
    pub fn line(&self) -> String {
        format!(
            "vq-gemm/{} {}x{} tokens {}: {:.1} us ({:.0} TFLOP/s), cuBLAS {:.1} us, {:.2}x, {}",
            self.kernel,
            self.rows,
            self.cols,
            self.tokens,
            self.median_us,
            self.tflops,
            self.cublas_us,
            self.speedup_vs_cublas,
            self.check
        )
    }
}

/// Tokens whose outputs are checked against the f64 reference (spread over the blocks).
fn checked_tokens(tokens: usize) -> Vec<usize> {
    let mut t: Vec<usize> = [0, tokens / 3, tokens / 2 + 1, tokens - 1]
        .into_iter()
        .filter(|&t| t < tokens)
        .collect();
    t.dedup();
    t
}

/// Relative error of the outputs of `toks` (`y` is `tokens x rows`) against `want`
/// (`toks.len() x rows`).
fn sampled_error(y: &[half::f16], rows: usize, toks: &[usize], want: &[f64]) -> f64 {
    let got = toks.iter().flat_map(|&t| {
        y[t * rows..(t + 1) * rows]
            .iter()
            .map(|v| f64::from(v.to_f32()))
    });
    vq_codebook::cmv_format::relative_error(got, want)
}

/// The configurations the VQ-GEMM runs for the `--variants` list: those of `gptvq2` and `aqlm3`
/// it names (AQLM-3 has no GEMM kernel: chunks of 16 inputs through its GEMV kernels), GPTVQ-2
/// alone where it names neither.
pub fn gemm_configs(variants: &[String]) -> Vec<(&'static str, vq_codebook::VqConfig)> {
    use vq_codebook::VqConfig;
    let named: Vec<_> = [("gptvq2", VqConfig::gptvq2()), ("aqlm3", VqConfig::aqlm3())]
        .into_iter()
        .filter(|(n, _)| variants.iter().any(|v| v == n))
        .collect();
    if named.is_empty() {
        vec![("gptvq2", VqConfig::gptvq2())]
    } else {
        named
    }
}

/// Runs the VQ-GEMM (each of `configs`, seeded uniform weights as the format suites use) at every shape and token count, and
/// cuBLAS fp16 GEMM (`cublasGemmEx`, fp32 compute) on the same weights dequantized; both
/// timed as the GEMV suites are (CUDA events, median of `iters` after `warmup`, weights
/// rotated through copies of at least 4x L2 for VQ); outputs of sampled tokens are checked
/// against the f64 reference before and after timing, and must be within
/// [`vq_codebook::gpu::GPU_TOLERANCE`].
///
/// # Errors
/// Runtime and format errors, [`BenchError::Mismatch`].
pub fn run_gemm(
    gpu: &cmv_runtime::Gpu,
    configs: &[(&'static str, vq_codebook::VqConfig)],
    shapes: &[(usize, usize)],
    token_counts: &[usize],
    (warmup, iters): (usize, usize),
    progress: &mut dyn FnMut(&GemmRow),
) -> Result<Vec<GemmRow>, BenchError> {
    use cmv_runtime::cudarc::cublas::sys::cublasOperation_t;
    use cmv_runtime::cudarc::cublas::{Gemm, GemmConfig};
    use half::f16;
    use vq_codebook::EncodeOptions;
    use vq_codebook::gpu::{DeviceVqMatrix, GPU_TOLERANCE, GemmKernel, VqGemv, VqOut};
    let fmt = |e: vq_codebook::VqError| BenchError::Format {
        format: "vq",
        source: Box::new(e),
    };
    let kernels = VqGemv::new(gpu).map_err(fmt)?;
    let blas = gpu.cublas()?;
    let l2 = gpu.info().l2_bytes;
    let mut out = Vec::new();
    for (&(config, vq), (si, &(rows, cols))) in configs
        .iter()
        .flat_map(|c| shapes.iter().enumerate().map(move |s| (c, s)))
    {
        let w = <f32 as crate::data::Generate>::weights(rows * cols, 1000 + si as u64);
        let opts = EncodeOptions::with(vq);
        let m = VqMatrix::encode(&w, rows, cols, &opts).map_err(fmt)?;
        let dm = DeviceVqMatrix::upload(gpu, &m).map_err(fmt)?;
        let copies = cmv_runtime::rotation_copies(dm.bytes_read(), l2, 512 << 20);
        let mut devs = vec![dm];
        for _ in 1..copies {
            devs.push(devs[0].try_clone().map_err(fmt)?);
        }
        let wh: Vec<f16> = m.dequantize().iter().map(|&v| f16::from_f32(v)).collect();
        let wd = gpu.upload(&wh)?;
        drop(wh);
        for &tokens in token_counts {
            let x = crate::data::f16_uniform(tokens * cols, 1.0, 7 + tokens as u64);
            let toks = checked_tokens(tokens);
            let xs: Vec<f16> = toks
                .iter()
                .flat_map(|&t| x[t * cols..(t + 1) * cols].iter().copied())
                .collect();
            let want = m.reference(&xs, toks.len()).map_err(fmt)?;
            let dx = gpu.upload(&x)?;
            let mut y = VqOut::new(gpu, rows, tokens).map_err(fmt)?;
            let check = |y: &VqOut, when: &str| -> Result<f64, BenchError> {
                let e = sampled_error(&gpu.download(y.y())?, rows, &toks, &want);
                if e.is_finite() && e < GPU_TOLERANCE {
                    Ok(e)
                } else {
                    Err(BenchError::Mismatch {
                        what: format!("vq-gemm {rows}x{cols} tokens {tokens} ({when})"),
                        detail: format!("relative error {e:e}"),
                    })
                }
            };
            let mut timed = Vec::new();
            let mut which = vec![(GemmKernel::Auto, "auto")];
            if m.gemm_takes() {
                which.push((GemmKernel::MmaSync, "mma"));
            }
            if m.gemm_takes() && kernels.has_wgmma(4) {
                which.push((GemmKernel::WgmmaSplits(1), "wgmma-nosplit"));
                which.push((GemmKernel::Wgmma, "wgmma"));
            }
            for (kernel, name) in which {
                kernels
                    .gemm_with(&devs[0], &dx, &mut y, tokens, kernel)
                    .map_err(fmt)?;
                let before = check(&y, "before timing")?;
                let t = cmv_runtime::time_launches(gpu, warmup, iters, |i| {
                    kernels
                        .gemm_with(&devs[i % copies], &dx, &mut y, tokens, kernel)
                        .map_err(fmt)
                })?;
                let after = check(&y, "after timing")?;
                timed.push((name, t, before, after));
            }
            // cuBLAS on the dequantized weights: W^T (cols x rows, column-major) times X.
            let mut yc = gpu.alloc_zeros::<f16>(tokens * rows)?;
            let to_i32 =
                |v: usize| i32::try_from(v).map_err(|_| BenchError::Usage(format!("{v} past i32")));
            let cfg = GemmConfig {
                transa: cublasOperation_t::CUBLAS_OP_T,
                transb: cublasOperation_t::CUBLAS_OP_N,
                m: to_i32(rows)?,
                n: to_i32(tokens)?,
                k: to_i32(cols)?,
                alpha: f16::ONE,
                lda: to_i32(cols)?,
                ldb: to_i32(cols)?,
                beta: f16::ZERO,
                ldc: to_i32(rows)?,
            };
            let cublas = |yc: &mut cmv_runtime::CudaSlice<f16>| -> Result<(), BenchError> {
                // SAFETY: wd holds rows * cols values (W^T, cols x rows), dx tokens * cols and
                // yc tokens * rows, as the config addresses.
                unsafe { blas.gemm(cfg, &wd, &dx, yc) }.map_err(|source| {
                    BenchError::Runtime(cmv_runtime::RuntimeError::Cublas {
                        op: "cublasGemmEx",
                        source,
                    })
                })
            };
            let tc = cmv_runtime::time_launches(gpu, warmup, iters, |_| cublas(&mut yc))?;
            let ec = sampled_error(&gpu.download(&yc)?, rows, &toks, &want);
            if !(ec.is_finite() && ec < GPU_TOLERANCE) {
                return Err(BenchError::Mismatch {
                    what: format!("cuBLAS {rows}x{cols} tokens {tokens}"),
                    detail: format!("relative error {ec:e}"),
                });
            }
            let cublas_us = 1e3 * tc.median_ms();
            for (name, t, before, after) in timed {
                let median_us = 1e3 * t.median_ms();
                let row = GemmRow {
                    config: config.into(),
                    kernel: name.into(),
                    rows,
                    cols,
                    tokens,
                    copies,
                    median_us,
                    tflops: 2.0 * (rows * cols * tokens) as f64 / median_us / 1e6,
                    cublas_us,
                    speedup_vs_cublas: cublas_us / median_us,
                    check: format!("rel_err={before:.1e}/{after:.1e}, cublas {ec:.1e}"),
                };
                progress(&row);
                out.push(row);
            }
        }
    }
    Ok(out)
}

/// The VQ-GEMM rows as a Markdown table.
pub fn gemm_table(rows: &[GemmRow]) -> String {
    let mut s = String::from(
        "| config | kernel | shape | tokens | VQ us | TFLOP/s | cuBLAS fp16 us | speedup | check |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for r in rows {
        s += &format!(
            "| {} | {} | {}x{} | {} | {:.1} | {:.0} | {:.1} | {:.2}x | {} |\n",
            r.config,
            r.kernel,
            r.rows,
            r.cols,
            r.tokens,
            r.median_us,
            r.tflops,
            r.cublas_us,
            r.speedup_vs_cublas,
            r.check
        );
    }
    s
}

/// Parses a `--vq-kernels` item (`mma`, `mma2`, `mma4`, `table`, `stream`, `big`, or a
/// codebook-cache split of `big`: `vq_codebook::gpu::BIG_CACHES`).
///
/// # Errors
/// A message naming the item and the choices.
pub fn parse_kernel(s: &str) -> Result<VqKernel, String> {
    VqKernel::from_name(s).ok_or_else(|| {
        format!(
            "unknown VQ kernel {s:?}: one of mma, mma2, mma4, table, stream, big, big-mma, \
             big-gmem, big-smem, big-r8-gmem, big-r8-smem, big-1024"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_parse_by_name() {
        assert_eq!(parse_kernel("table"), Ok(VqKernel::Table));
        assert_eq!(
            parse_kernel("mma4"),
            Ok(VqKernel::Mma {
                row_groups: Some(4)
            })
        );
        for k in [
            "mma",
            "mma2",
            "mma4",
            "table",
            "stream",
            "big",
            "big-gmem",
            "big-r8-smem",
            "big-smem",
        ] {
            assert_eq!(parse_kernel(k).map(VqKernel::name), Ok(k));
        }
        let e = parse_kernel("lut").unwrap_err();
        assert!(
            e.contains("lut") && e.contains("mma, mma2, mma4, table, stream"),
            "{e}"
        );
    }
}
