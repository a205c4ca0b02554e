//! The dense suite: the bandwidth ceiling, our fp16 and int8 kernels, and cuBLAS.

use cmv_runtime::{Gpu, Timings, rotation_copies};
use dense_gemv::{CublasGemv, DenseGemv, DeviceMatrix, cpu, relative_error};
use half::f16;

use crate::{BenchConfig, BenchError, CpuMeasurement, Measurement, data};

/// The measured read-bandwidth ceiling.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Ceiling {
    /// Bytes read per call.
    pub bytes: usize,
    /// Median time per call, microseconds.
    pub median_us: f64,
    /// Read bandwidth, GB/s (10^9 bytes per second).
    pub gbps: f64,
}

/// Tolerance of every fp16 result against the fp64 reference.
pub const F16_TOLERANCE: f64 = 1e-3;

fn runtime(e: cmv_runtime::RuntimeError) -> BenchError {
    BenchError::Runtime(e)
}

/// Measures the read ceiling: a streaming read of a buffer of at least 1 GiB and 8 x L2.
pub fn measure_ceiling(
    gpu: &Gpu,
    dense: &DenseGemv,
    cfg: &BenchConfig,
) -> Result<Ceiling, BenchError> {
    let bytes = (8 * gpu.info().l2_bytes).max(1 << 30).next_multiple_of(16);
    let host = data::bytes(bytes, 0xC0FFEE);
    let want = host.chunks_exact(4).fold(0u32, |a, c| {
        a ^ u32::from_le_bytes([c[0], c[1], c[2], c[3]])
    });
    let buf = gpu.upload(&host).map_err(runtime)?;
    drop(host);
    let mut out = gpu
        .alloc_zeros::<u32>(dense.stream_read_out_len())
        .map_err(runtime)?;
    let t = cfg
        .timing
        .time(gpu, cfg, 1, |_| {
            dense.stream_read(&buf, &mut out).map_err(|e| match e {
                dense_gemv::DenseError::Runtime(r) => r,
                other => cmv_runtime::RuntimeError::InvalidLaunch {
                    kernel: "cmv_stream_read",
                    reason: other.to_string(),
                },
            })
        })
        .map_err(runtime)?;
    let got = gpu
        .download(&out)
        .map_err(runtime)?
        .iter()
        .fold(0, |a, &v| a ^ v);
    if got != want {
        return Err(BenchError::Mismatch {
            what: "stream read".into(),
            detail: format!("xor {got:#x}, expected {want:#x}"),
        });
    }
    let median_us = t.median_ms() * 1e3;
    Ok(Ceiling {
        bytes,
        median_us,
        gbps: bytes as f64 / (median_us * 1e3),
    })
}

struct Timed<'a> {
    format: &'static str,
    kernel: &'static str,
    rows: usize,
    cols: usize,
    batch: usize,
    bytes_read: usize,
    bits_per_weight: f64,
    copies: usize,
    ceiling_gbps: f64,
    read_us: f64,
    check: &'a str,
}

impl Timed<'_> {
    fn measurement(&self, t: &Timings) -> Measurement {
        let median_us = t.median_ms() * 1e3;
        let gbps = self.bytes_read as f64 / (median_us * 1e3);
        Measurement {
            format: self.format.into(),
            kernel: self.kernel.into(),
            rows: self.rows,
            cols: self.cols,
            batch: self.batch,
            bytes_read: self.bytes_read,
            bits_per_weight: self.bits_per_weight,
            copies: self.copies,
            median_us,
            p10_us: t.quantile(0.1) * 1e3,
            p90_us: t.quantile(0.9) * 1e3,
            gbps,
            pct_of_ceiling: 100.0 * gbps / self.ceiling_gbps,
            pct_of_size_matched_read: 100.0 * self.read_us / median_us,
            speedup_vs_best_dense: None,
            check: self.check.into(),
        }
    }
}

fn dense_err(e: dense_gemv::DenseError) -> cmv_runtime::RuntimeError {
    match e {
        dense_gemv::DenseError::Runtime(r) => r,
        other => cmv_runtime::RuntimeError::InvalidLaunch {
            kernel: "dense",
            reason: other.to_string(),
        },
    }
}

fn check_f16(what: &str, got: &[f16], want: &[f64]) -> Result<String, BenchError> {
    let err = relative_error(got.iter().map(|v| f64::from(v.to_f32())), want);
    // NaN fails this test too.
    if err.is_nan() || err >= F16_TOLERANCE {
        return Err(BenchError::Mismatch {
            what: what.into(),
            detail: format!("relative error {err:.3e} >= {F16_TOLERANCE:e}"),
        });
    }
    Ok(format!("rel_err={err:.1e}"))
}

/// `first` and enough device copies of it to rotate through at least 4 x L2 and
/// `cfg.min_rotation_bytes` in all, so that each timed call reads from device memory.
pub fn weight_copies<T: cmv_runtime::DeviceRepr>(
    first: DeviceMatrix<T>,
    l2_bytes: usize,
    cfg: &BenchConfig,
) -> Result<Vec<DeviceMatrix<T>>, BenchError> {
    let n = rotation_copies(first.bytes(), l2_bytes, cfg.min_rotation_bytes);
    let mut v = vec![first];
    for _ in 1..n {
        v.push(v[0].try_clone()?);
    }
    Ok(v)
}

/// Median time of a plain streaming read of the rotated weight copies `mats`, microseconds.
fn size_matched_read<T: cmv_runtime::DeviceRepr>(
    gpu: &Gpu,
    dense: &DenseGemv,
    cfg: &BenchConfig,
    mats: &[DeviceMatrix<T>],
) -> Result<f64, BenchError> {
    let mut out = gpu
        .alloc_zeros::<u32>(dense.stream_read_out_len())
        .map_err(runtime)?;
    let t = cfg
        .timing
        .time(gpu, cfg, mats.len(), |i| {
            dense
                .stream_read(mats[i % mats.len()].data(), &mut out)
                .map_err(dense_err)
        })
        .map_err(runtime)?;
    Ok(t.median_ms() * 1e3)
}

/// Runs the dense fp16 (ours and cuBLAS) and int8 kernels over every shape and batch.
/// `progress` is called with each measurement as it is made.
pub fn run_gpu(
    gpu: &Gpu,
    dense: &DenseGemv,
    cfg: &BenchConfig,
    ceiling_gbps: f64,
    mut progress: impl FnMut(&Measurement),
) -> Result<Vec<Measurement>, BenchError> {
    let blas = match CublasGemv::new(gpu) {
        Ok(b) => Some(b),
        Err(e) => {
            eprintln!("cuBLAS unavailable, its rows are left out: {e}");
            None
        }
    };
    let l2 = gpu.info().l2_bytes;
    let mut out = Vec::new();
    for (si, &(rows, cols)) in cfg.shapes.iter().enumerate() {
        let seed = 1000 * si as u64;
        // fp16
        let w = data::f16_uniform(rows * cols, 1.0, seed);
        let first = DeviceMatrix::upload_f16(gpu, &w, rows, cols)?;
        let mats = weight_copies(first, l2, cfg)?;
        let copies = mats.len();
        let read_us = size_matched_read(gpu, dense, cfg, &mats)?;
        for &batch in &cfg.batches {
            let x = data::f16_uniform(batch * cols, 1.0, seed + batch as u64);
            let want = cpu::gemv_f16(&w, rows, cols, &x, batch)?;
            let dx = gpu.upload(&x).map_err(runtime)?;
            let bytes_read = rows * cols * 2 + batch * cols * 2;
            let mut impls: Vec<&'static str> = vec!["cmv"];
            if blas.is_some() {
                impls.push("cublas");
            }
            for kernel in impls {
                let run = |m: &DeviceMatrix<f16>, y: &mut cmv_runtime::CudaSlice<f16>| match kernel
                {
                    "cmv" => dense.gemv_f16(m, &dx, y, batch),
                    _ => blas
                        .as_ref()
                        .map_or(Ok(()), |b| b.gemv_f16(m, &dx, y, batch)),
                };
                let what = format!("dense-fp16/{kernel} {rows}x{cols} batch {batch}");
                let mut y = gpu.upload(&vec![f16::NAN; batch * rows]).map_err(runtime)?;
                run(&mats[0], &mut y)?;
                let check = check_f16(&what, &gpu.download(&y).map_err(runtime)?, &want)?;
                let t = cfg
                    .timing
                    .time(gpu, cfg, copies, |i| {
                        run(&mats[i % copies], &mut y).map_err(dense_err)
                    })
                    .map_err(runtime)?;
                // The output of the last timed call is checked too.
                check_f16(&what, &gpu.download(&y).map_err(runtime)?, &want)?;
                let m = Timed {
                    format: "dense-fp16",
                    kernel,
                    rows,
                    cols,
                    batch,
                    bytes_read,
                    bits_per_weight: 16.0,
                    copies,
                    ceiling_gbps,
                    read_us,
                    check: &check,
                }
                .measurement(&t);
                progress(&m);
                out.push(m);
            }
        }
        drop(mats);
        // int8
        let w = data::i8_uniform(rows * cols, seed + 7);
        let first = DeviceMatrix::upload_i8(gpu, &w, rows, cols)?;
        let mats = weight_copies(first, l2, cfg)?;
        let copies = mats.len();
        let read_us = size_matched_read(gpu, dense, cfg, &mats)?;
        let scale = 1.0 / (cols as f32).sqrt() / 64.0;
        for &batch in &cfg.batches {
            let x = data::i8_uniform(batch * cols, seed + 100 + batch as u64);
            let want = cpu::gemv_i8(&w, rows, cols, &x, batch)?;
            let want8 = cpu::requantize_all(&want, scale);
            let dx = gpu.upload(&x).map_err(runtime)?;
            let what = format!("dense-int8/cmv {rows}x{cols} batch {batch}");
            let mut y32 = gpu.upload(&vec![i32::MIN; batch * rows]).map_err(runtime)?;
            let mut y8 = gpu.upload(&vec![0x55i8; batch * rows]).map_err(runtime)?;
            let check_exact = |y32: &cmv_runtime::CudaSlice<i32>,
                               y8: &cmv_runtime::CudaSlice<i8>| {
                let ok = gpu.download(y32).map_err(runtime)? == want
                    && gpu.download(y8).map_err(runtime)? == want8;
                if ok {
                    Ok(())
                } else {
                    Err(BenchError::Mismatch {
                        what: what.clone(),
                        detail: "not bit-exact".into(),
                    })
                }
            };
            dense.gemv_i8(&mats[0], &dx, &mut y32, &mut y8, scale, batch)?;
            check_exact(&y32, &y8)?;
            let t = cfg
                .timing
                .time(gpu, cfg, copies, |i| {
                    dense
                        .gemv_i8(&mats[i % copies], &dx, &mut y32, &mut y8, scale, batch)
                        .map_err(dense_err)
                })
                .map_err(runtime)?;
            check_exact(&y32, &y8)?;
            let m = Timed {
                format: "dense-int8",
                kernel: "cmv",
                rows,
                cols,
                batch,
                bytes_read: rows * cols + batch * cols,
                bits_per_weight: 8.0,
                copies,
                ceiling_gbps,
                read_us,
                check: "exact",
            }
            .measurement(&t);
            progress(&m);
            out.push(m);
        }
    }
    Ok(out)
}

/// The CPU side: sizes, bits per weight and batch-1 CPU reference timings.
pub fn run_cpu(cfg: &BenchConfig) -> Result<Vec<CpuMeasurement>, BenchError> {
    let mut out = Vec::new();
    for (si, &(rows, cols)) in cfg.shapes.iter().enumerate() {
        let w = data::f16_uniform(rows * cols, 1.0, si as u64);
        let x = data::f16_uniform(cols, 1.0, si as u64 + 1);
        let t0 = std::time::Instant::now();
        let y = cpu::gemv_f16(&w, rows, cols, &x, 1)?;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        assert_eq!(y.len(), rows);
        out.push(CpuMeasurement {
            format: "dense-fp16".into(),
            rows,
            cols,
            bytes: rows * cols * 2,
            bits_per_weight: 16.0,
            reference_ms: ms,
        });
        drop(w);
        let w = data::i8_uniform(rows * cols, si as u64 + 2);
        let x = data::i8_uniform(cols, si as u64 + 3);
        let t0 = std::time::Instant::now();
        let y = cpu::gemv_i8(&w, rows, cols, &x, 1)?;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        assert_eq!(y.len(), rows);
        out.push(CpuMeasurement {
            format: "dense-int8".into(),
            rows,
            cols,
            bytes: rows * cols,
            bits_per_weight: 8.0,
            reference_ms: ms,
        });
    }
    Ok(out)
}
