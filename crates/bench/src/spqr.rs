//! The SpQR suite: the fused 3-bit GEMV (CSR and PTCSR outliers) against the dense fp16
//! kernels, on the LLM shapes, batch 1, 4 and 8.

use cmv_runtime::Gpu;
use dense_gemv::{CublasGemv, DenseGemv, DeviceMatrix};
use half::f16;
use serde::Serialize;
use spqr_format::gpu::{DeviceSpqrMatrix, SpqrGemv};
use spqr_format::{OutlierFormat, QuantizeOptions, SpqrMatrix, quantize};

use crate::dense::{F16_TOLERANCE, weight_copies};
use crate::{BenchConfig, BenchError, data};

/// One timed SpQR configuration.
#[derive(Clone, Debug, Serialize)]
pub struct SpqrRow {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Input vectors.
    pub batch: usize,
    /// `csr`, `ptcsr`, `cmv-fp16` or `cublas-fp16`; `csr/s4` for a fixed split (tuning).
    pub kernel: String,
    /// Blocks per tile row of the SpQR kernel (1 for the dense kernels).
    pub splits: u32,
    /// Bits per weight read (dense part, outliers and offsets of this encoding).
    pub bits_per_weight: f64,
    /// Median time per call, microseconds.
    pub median_us: f64,
    /// Bytes read per call over the median, GB/s.
    pub gbps: f64,
    /// `gbps` over the measured ceiling, percent.
    pub pct_of_ceiling: f64,
    /// Median time of a plain streaming read of the same number of bytes (rotated copies as
    /// many as this row's), microseconds: what any kernel reading these bytes once can reach
    /// at this size, launch and ramp included.
    pub read_us: f64,
    /// `read_us` over `median_us`, percent.
    pub pct_of_same_size_read: f64,
    /// cuBLAS fp16 time over this time.
    pub speedup_vs_cublas: f64,
    /// Our dense fp16 time over this time.
    pub speedup_vs_dense: f64,
    /// Relative error against the fp64 reference of the quantized matrix.
    pub rel_err: f64,
}

fn rt(e: cmv_runtime::RuntimeError) -> BenchError {
    BenchError::Runtime(e)
}

fn spqr_err(e: spqr_format::SpqrError) -> cmv_runtime::RuntimeError {
    match e {
        spqr_format::SpqrError::Format(spqr_format::FormatError::Runtime(r)) => r,
        o => cmv_runtime::RuntimeError::InvalidLaunch {
            kernel: "spqr",
            reason: o.to_string(),
        },
    }
}

fn dense_err(e: dense_gemv::DenseError) -> cmv_runtime::RuntimeError {
    match e {
        dense_gemv::DenseError::Runtime(r) => r,
        o => cmv_runtime::RuntimeError::InvalidLaunch {
            kernel: "dense",
            reason: o.to_string(),
        },
    }
}

/// Median time of a plain streaming read (`DenseGemv::stream_read`) of `bytes` bytes, over
/// `copies` rotated buffers of scrambled words, microseconds.
fn same_size_read(
    gpu: &Gpu,
    dense: &DenseGemv,
    cfg: &BenchConfig,
    bytes: usize,
    copies: usize,
) -> Result<f64, BenchError> {
    let words = bytes.next_multiple_of(16) / 4;
    // Distinct nonzero words (their values do not matter to a read, only that they are not
    // all zeros).
    let host: Vec<u32> = (0..words as u32)
        .map(|i| (i | 1).wrapping_mul(0x9E37_79B9))
        .collect();
    let bufs = (0..copies.max(1))
        .map(|_| gpu.upload(&host))
        .collect::<Result<Vec<_>, _>>()
        .map_err(rt)?;
    let mut out = gpu
        .alloc_zeros::<u32>(dense.stream_read_out_len())
        .map_err(rt)?;
    let t = cfg
        .timing
        .time(gpu, cfg, bufs.len(), |i| {
            dense
                .stream_read(&bufs[i % bufs.len()], &mut out)
                .map_err(dense_err)
        })
        .map_err(rt)?;
    Ok(t.median_ms() * 1e3)
}

/// What one row is computed from.
struct RowTimes {
    shape: (usize, usize, usize),
    kernel: String,
    splits: u32,
    /// Bytes of the weights (dense part, outliers and offsets, or the fp16 matrix).
    weight_bytes: usize,
    /// All bytes read per call (weights and inputs).
    bytes: usize,
    us: f64,
    read_us: f64,
    ceiling_gbps: f64,
    cublas_us: f64,
    dense_us: f64,
    rel_err: f64,
}

/// A table row with its derived rates and ratios.
fn row(t: RowTimes) -> SpqrRow {
    let (rows, cols, batch) = t.shape;
    let gbps = t.bytes as f64 / (t.us * 1e3);
    SpqrRow {
        rows,
        cols,
        batch,
        kernel: t.kernel,
        splits: t.splits,
        bits_per_weight: 8.0 * t.weight_bytes as f64 / (rows * cols) as f64,
        median_us: t.us,
        gbps,
        pct_of_ceiling: 100.0 * gbps / t.ceiling_gbps,
        read_us: t.read_us,
        pct_of_same_size_read: 100.0 * t.read_us / t.us,
        speedup_vs_cublas: t.cublas_us / t.us,
        speedup_vs_dense: t.dense_us / t.us,
        rel_err: t.rel_err,
    }
}

fn rel_err(got: &[f16], want: &[f64]) -> f64 {
    dense_gemv::relative_error(got.iter().map(|v| f64::from(v.to_f32())), want)
}

/// Runs the suite. `progress` gets each row as it is measured.
pub fn run_gpu(
    gpu: &Gpu,
    cfg: &BenchConfig,
    batches: &[usize],
    splits: &[Option<u32>],
    ceiling_gbps: f64,
    mut progress: impl FnMut(&SpqrRow),
) -> Result<Vec<SpqrRow>, BenchError> {
    let spqr = SpqrGemv::new(gpu).map_err(|e| rt(spqr_err(e)))?;
    let dense = DenseGemv::new(gpu)?;
    let blas = CublasGemv::new(gpu).ok();
    let l2 = gpu.info().l2_bytes;
    let mut out = Vec::new();
    for (si, &(rows, cols)) in cfg.shapes.iter().enumerate() {
        // Same-size reads by byte count, measured once each.
        let mut reads = std::collections::HashMap::<usize, f64>::new();
        let mut read_of = |bytes: usize, copies: usize| -> Result<f64, BenchError> {
            if let Some(&us) = reads.get(&bytes) {
                return Ok(us);
            }
            let us = same_size_read(gpu, &dense, cfg, bytes, copies)?;
            reads.insert(bytes, us);
            Ok(us)
        };
        let w16 = data::f16_uniform(rows * cols, 1.0, 500 + si as u64);
        let w32: Vec<f32> = w16.iter().map(|v| v.to_f32()).collect();
        let m: SpqrMatrix =
            quantize(&w32, rows, cols, &QuantizeOptions::default()).map_err(|e| rt(spqr_err(e)))?;
        drop(w32);
        // Rotated copies of the compressed matrix and of the fp16 matrix.
        let first = DeviceSpqrMatrix::upload(gpu, &m).map_err(|e| rt(spqr_err(e)))?;
        let n = cmv_runtime::rotation_copies(first.bytes_read(), l2, cfg.min_rotation_bytes);
        let mut mats = vec![first];
        for _ in 1..n {
            mats.push(mats[0].try_clone().map_err(|e| rt(spqr_err(e)))?);
        }
        let dmats = weight_copies(DeviceMatrix::upload_f16(gpu, &w16, rows, cols)?, l2, cfg)?;
        drop(w16);
        for &batch in batches {
            let x = data::f16_uniform(batch * cols, 1.0, 900 + batch as u64);
            let want = m.gemv_reference(&x, batch).map_err(|e| rt(spqr_err(e)))?;
            let dx = gpu.upload(&x).map_err(rt)?;
            let mut y = gpu.alloc_zeros::<f16>(batch * rows).map_err(rt)?;
            // Dense fp16 baselines at this shape and batch.
            let dense_us = cfg
                .timing
                .time(gpu, cfg, dmats.len(), |i| {
                    dense
                        .gemv_f16(&dmats[i % dmats.len()], &dx, &mut y, batch)
                        .map_err(dense_err)
                })
                .map_err(rt)?
                .median_ms()
                * 1e3;
            let cublas_us = match &blas {
                Some(b) => {
                    cfg.timing
                        .time(gpu, cfg, dmats.len(), |i| {
                            b.gemv_f16(&dmats[i % dmats.len()], &dx, &mut y, batch)
                                .map_err(dense_err)
                        })
                        .map_err(rt)?
                        .median_ms()
                        * 1e3
                }
                None => f64::NAN,
            };
            let variants = [(OutlierFormat::Csr, "csr"), (OutlierFormat::Ptcsr, "ptcsr")]
                .into_iter()
                .flat_map(|f| splits.iter().map(move |&s| (f, s)));
            for ((format, base), split) in variants {
                for d in &mut mats {
                    d.set_outlier_format(format);
                    d.set_splits(split).map_err(|e| rt(spqr_err(e)))?;
                }
                let name = match split {
                    None => base.to_owned(),
                    Some(n) => format!("{base}/s{n}"),
                };
                let used = spqr.splits(&mats[0], batch).map_err(|e| rt(spqr_err(e)))?;
                let mut ys = gpu.upload(&vec![f16::NAN; batch * rows]).map_err(rt)?;
                spqr.gemv(&mats[0], &dx, &mut ys, batch)
                    .map_err(|e| rt(spqr_err(e)))?;
                let err = rel_err(&gpu.download(&ys).map_err(rt)?, &want);
                if err.is_nan() || err >= F16_TOLERANCE {
                    return Err(BenchError::Mismatch {
                        what: format!("spqr {name} {rows}x{cols} batch {batch}"),
                        detail: format!("relative error {err:.3e}"),
                    });
                }
                let t = cfg
                    .timing
                    .time(gpu, cfg, mats.len(), |i| {
                        spqr.gemv(&mats[i % mats.len()], &dx, &mut ys, batch)
                            .map_err(spqr_err)
                    })
                    .map_err(rt)?;
                let err_after = rel_err(&gpu.download(&ys).map_err(rt)?, &want);
                if err_after.is_nan() || err_after >= F16_TOLERANCE {
                    return Err(BenchError::Mismatch {
                        what: format!("spqr {name} {rows}x{cols} batch {batch} (timed)"),
                        detail: format!("relative error {err_after:.3e}"),
                    });
                }
                let us = t.median_ms() * 1e3;
                let weight_bytes = mats[0].bytes_read();
                let bytes = weight_bytes + 2 * batch * cols;
                let read_us = read_of(bytes, mats.len())?;
                let row = row(RowTimes {
                    shape: (rows, cols, batch),
                    kernel: name,
                    splits: used,
                    weight_bytes,
                    bytes,
                    us,
                    read_us,
                    ceiling_gbps,
                    cublas_us,
                    dense_us,
                    rel_err: err,
                });
                progress(&row);
                out.push(row);
            }
            for (name, us) in [("cmv-fp16", dense_us), ("cublas-fp16", cublas_us)] {
                let weight_bytes = 2 * rows * cols;
                let bytes = weight_bytes + 2 * batch * cols;
                let read_us = read_of(bytes, dmats.len())?;
                out.push(row(RowTimes {
                    shape: (rows, cols, batch),
                    kernel: name.into(),
                    splits: 1,
                    weight_bytes,
                    bytes,
                    us,
                    read_us,
                    ceiling_gbps,
                    cublas_us,
                    dense_us,
                    rel_err: 0.0,
                }));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_derive_rates_and_ratios_from_the_times() {
        let r = row(RowTimes {
            shape: (4, 8, 1),
            kernel: "csr".into(),
            splits: 1,
            weight_bytes: 16,
            bytes: 32,
            us: 2.0,
            read_us: 1.0,
            ceiling_gbps: 0.032,
            cublas_us: 6.0,
            dense_us: 4.0,
            rel_err: 1e-4,
        });
        assert_eq!(r.bits_per_weight, 4.0);
        assert_eq!(r.gbps, 0.016);
        assert_eq!(r.pct_of_ceiling, 50.0);
        assert_eq!(r.pct_of_same_size_read, 50.0);
        assert_eq!((r.speedup_vs_cublas, r.speedup_vs_dense), (3.0, 2.0));
        assert_eq!((r.rows, r.cols, r.batch, r.rel_err), (4, 8, 1, 1e-4));
    }
}
