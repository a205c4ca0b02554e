//! The dense suite: the bandwidth ceiling, our fp16 and int8 kernels, cuBLAS, and cuBLASLt with
//! its heuristic's first choice of algorithm (a second vendor baseline, whose algorithm each
//! row reports); and [`Baselines`], the GPU context every GEMV suite shares (dense baselines and
//! same-size reads, each measured once per shape and batch or byte count).

use std::collections::HashMap;

use cmv_runtime::{Gpu, Timings, rotation_copies};
use dense_gemv::{
    CublasGemv, CublasLtError, CublasLtGemv, DenseGemv, DeviceMatrix, LtAlgo, cpu, relative_error,
};
use half::f16;

use crate::{BenchConfig, BenchError, CpuRow, Part, Row, RowTimes, data};

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
    let buf = gpu.upload(&host)?;
    drop(host);
    let mut out = gpu.alloc_zeros::<u32>(dense.stream_read_out_len())?;
    let t = cfg
        .timing
        .time(gpu, cfg, 1, |_| -> Result<(), BenchError> {
            Ok(dense.stream_read(&buf, &mut out)?)
        })?;
    let got = gpu.download(&out)?.iter().fold(0, |a, &v| a ^ v);
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

/// A dense baseline kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Baseline {
    /// Our fp16 GEMV (`dense-fp16/cmv`).
    CmvFp16,
    /// cuBLAS fp16 (`dense-fp16/cublas`).
    CublasFp16,
    /// cuBLASLt fp16 with its heuristic's first choice of algorithm (`dense-fp16/cublaslt`).
    CublasLtFp16,
    /// Our int8 `dp4a` GEMV with requantization (`dense-int8/cmv`).
    CmvInt8,
}

impl Baseline {
    /// Format and variant of its rows.
    pub fn name(self) -> (&'static str, &'static str) {
        match self {
            Baseline::CmvFp16 => ("dense-fp16", "cmv"),
            Baseline::CublasFp16 => ("dense-fp16", "cublas"),
            Baseline::CublasLtFp16 => ("dense-fp16", "cublaslt"),
            Baseline::CmvInt8 => ("dense-int8", "cmv"),
        }
    }

    /// Bytes per weight and per input element.
    pub fn elem_bytes(self) -> usize {
        match self {
            Baseline::CmvFp16 | Baseline::CublasFp16 | Baseline::CublasLtFp16 => 2,
            Baseline::CmvInt8 => 1,
        }
    }

    /// Our own dense kernel of the same input type (what `speedup_vs_dense` compares with).
    pub fn own(self) -> Baseline {
        match self {
            Baseline::CmvFp16 | Baseline::CublasFp16 | Baseline::CublasLtFp16 => Baseline::CmvFp16,
            Baseline::CmvInt8 => Baseline::CmvInt8,
        }
    }
}

/// A vendor library's choice of algorithm for one shape and batch, as `bench.json` holds it
/// (the `algorithm` of a [`Row`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LibraryAlgorithm {
    /// The library and its version, e.g. `cuBLASLt 130000`.
    pub library: String,
    /// Everything below in one line, as the log prints it.
    pub summary: String,
    /// The algorithm's id (`CUBLASLT_ALGO_CONFIG_ID`).
    pub algo_id: Option<i32>,
    /// The tile, e.g. `128x64` (`id N` for a value this build has no name for).
    pub tile: String,
    /// The tile's `cublasLtMatmulTile_t` value.
    pub tile_id: Option<u32>,
    /// The stages, e.g. `64x4`.
    pub stages: String,
    /// The stages' `cublasLtMatmulStages_t` value.
    pub stages_id: Option<u32>,
    /// Split-K slices (1: none).
    pub split_k: Option<u32>,
    /// How split-K slices are summed: `none`, `in-place`, `compute-type`, `output-type`.
    pub reduction: String,
    /// Thread-block swizzling.
    pub cta_swizzling: Option<u32>,
    /// The algorithm's custom option.
    pub custom_option: Option<u32>,
    /// The MMA shape, e.g. `MMA16816`.
    pub inner_shape: String,
    /// The thread-block cluster shape, e.g. `1x1x1`.
    pub cluster_shape: String,
    /// Workspace the algorithm needs, bytes.
    pub workspace_bytes: usize,
    /// The heuristic's waves count.
    pub waves_count: f32,
    /// This algorithm's place among those the heuristic returned (0: its first choice).
    pub heuristic_rank: usize,
    /// How many algorithms the heuristic returned.
    pub heuristic_returned: usize,
}

impl From<&LtAlgo> for LibraryAlgorithm {
    fn from(a: &LtAlgo) -> Self {
        Self {
            library: format!("cuBLASLt {}", a.version),
            summary: a.summary(),
            algo_id: a.algo_id,
            tile: a.tile(),
            tile_id: a.tile_id,
            stages: a.stages(),
            stages_id: a.stages_id,
            split_k: a.split_k,
            reduction: a.reduction(),
            cta_swizzling: a.cta_swizzling,
            custom_option: a.custom_option,
            inner_shape: a.inner_shape(),
            cluster_shape: a.cluster_shape(),
            workspace_bytes: a.workspace_bytes,
            waves_count: a.waves_count,
            heuristic_rank: a.rank,
            heuristic_returned: a.returned,
        }
    }
}

/// A dense matrix of one shape: its host values (for references) and rotated device copies.
struct Operands<T> {
    shape: (usize, usize),
    host: Vec<T>,
    mats: Vec<DeviceMatrix<T>>,
}

/// One timed baseline.
#[derive(Clone, Debug)]
struct Timed {
    timings: Timings,
    copies: usize,
    check: String,
    algorithm: Option<LibraryAlgorithm>,
    /// Our kernel's PTX name (`dense-*/cmv`).
    kernel: Option<&'static str>,
}

/// The GPU context the GEMV suites share: the dense kernels, cuBLAS, cuBLASLt, the ceiling, and
/// caches of
/// the dense baselines (per kernel, shape and batch) and of same-size reads (per byte count),
/// so that each is measured once per run, whichever suite asks first.
#[derive(Debug)]
pub struct Baselines<'a> {
    gpu: &'a Gpu,
    cfg: &'a BenchConfig,
    dense: DenseGemv,
    blas: Option<CublasGemv>,
    lt: Option<CublasLtGemv>,
    ceiling_gbps: f64,
    timed: HashMap<(Baseline, usize, usize, usize), Timed>,
    reads: HashMap<usize, f64>,
    fp16: Option<Operands<f16>>,
    int8: Option<Operands<i8>>,
}

impl<T> std::fmt::Debug for Operands<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Operands {}x{}", self.shape.0, self.shape.1)
    }
}

impl<'a> Baselines<'a> {
    /// Loads the dense kernels, cuBLAS and cuBLASLt (the rows of either library are left out
    /// when it cannot be loaded).
    ///
    /// # Errors
    /// Runtime errors of the dense kernels.
    pub fn new(gpu: &'a Gpu, cfg: &'a BenchConfig, ceiling_gbps: f64) -> Result<Self, BenchError> {
        let blas = match CublasGemv::new(gpu) {
            Ok(b) => Some(b),
            Err(e) => {
                eprintln!("cuBLAS unavailable, its rows and speedups are left out: {e}");
                None
            }
        };
        let lt = match CublasLtGemv::new(gpu) {
            Ok(lt) => Some(lt),
            Err(e) => {
                eprintln!("cuBLASLt unavailable, its rows are left out: {e}");
                None
            }
        };
        Ok(Self {
            gpu,
            cfg,
            dense: DenseGemv::new(gpu)?,
            blas,
            lt,
            ceiling_gbps,
            timed: HashMap::new(),
            reads: HashMap::new(),
            fp16: None,
            int8: None,
        })
    }

    /// The GPU.
    pub fn gpu(&self) -> &'a Gpu {
        self.gpu
    }

    /// The configuration.
    pub fn cfg(&self) -> &'a BenchConfig {
        self.cfg
    }

    /// The measured read ceiling, GB/s.
    pub fn ceiling_gbps(&self) -> f64 {
        self.ceiling_gbps
    }

    /// Whether cuBLAS is there.
    pub fn has_cublas(&self) -> bool {
        self.blas.is_some()
    }

    /// Whether cuBLASLt is there.
    pub fn has_cublaslt(&self) -> bool {
        self.lt.is_some()
    }

    /// Median time of a plain streaming read (`DenseGemv::stream_read`) of `bytes` bytes over
    /// rotated buffers (as many as a matrix of that size gets), microseconds; measured once per
    /// byte count.
    ///
    /// # Errors
    /// Runtime errors.
    pub fn same_size_read(&mut self, bytes: usize) -> Result<f64, BenchError> {
        if let Some(&us) = self.reads.get(&bytes) {
            return Ok(us);
        }
        let (gpu, cfg) = (self.gpu, self.cfg);
        let words = bytes.next_multiple_of(16) / 4;
        let copies = rotation_copies(bytes, gpu.info().l2_bytes, cfg.min_rotation_bytes);
        // Distinct nonzero words (their values do not matter to a read, only that they are not
        // all zeros).
        let host: Vec<u32> = (0..words as u32)
            .map(|i| (i | 1).wrapping_mul(0x9E37_79B9))
            .collect();
        let bufs = (0..copies)
            .map(|_| gpu.upload(&host))
            .collect::<Result<Vec<_>, _>>()?;
        drop(host);
        let mut out = gpu.alloc_zeros::<u32>(self.dense.stream_read_out_len())?;
        let dense = &self.dense;
        let t = cfg
            .timing
            .time(gpu, cfg, copies, |i| -> Result<(), BenchError> {
                Ok(dense.stream_read(&bufs[i % copies], &mut out)?)
            })?;
        let us = t.median_ms() * 1e3;
        self.reads.insert(bytes, us);
        Ok(us)
    }

    fn fp16_operands(&mut self, rows: usize, cols: usize) -> Result<&Operands<f16>, BenchError> {
        if self.fp16.as_ref().is_none_or(|o| o.shape != (rows, cols)) {
            self.fp16 = None;
            let host = data::f16_uniform(rows * cols, 1.0, seed(rows, cols));
            let first = DeviceMatrix::upload_f16(self.gpu, &host, rows, cols)?;
            let mats = weight_copies(first, self.gpu.info().l2_bytes, self.cfg)?;
            self.fp16 = Some(Operands {
                shape: (rows, cols),
                host,
                mats,
            });
        }
        Ok(self.fp16.as_ref().expect("just set"))
    }

    fn int8_operands(&mut self, rows: usize, cols: usize) -> Result<&Operands<i8>, BenchError> {
        if self.int8.as_ref().is_none_or(|o| o.shape != (rows, cols)) {
            self.int8 = None;
            let host = data::i8_uniform(rows * cols, seed(rows, cols) + 7);
            let first = DeviceMatrix::upload_i8(self.gpu, &host, rows, cols)?;
            let mats = weight_copies(first, self.gpu.info().l2_bytes, self.cfg)?;
            self.int8 = Some(Operands {
                shape: (rows, cols),
                host,
                mats,
            });
        }
        Ok(self.int8.as_ref().expect("just set"))
    }

    /// Times `kernel` at this shape and batch (checked against the CPU reference before and
    /// after timing), unless it was timed already.
    fn measure(
        &mut self,
        kernel: Baseline,
        rows: usize,
        cols: usize,
        batch: usize,
    ) -> Result<&Timed, BenchError> {
        let key = (kernel, rows, cols, batch);
        if !self.timed.contains_key(&key) {
            let t = match kernel {
                Baseline::CmvFp16 | Baseline::CublasFp16 | Baseline::CublasLtFp16 => {
                    self.time_fp16(kernel, rows, cols, batch)?
                }
                Baseline::CmvInt8 => self.time_int8(rows, cols, batch)?,
            };
            self.timed.insert(key, t);
        }
        Ok(&self.timed[&key])
    }

    fn time_fp16(
        &mut self,
        kernel: Baseline,
        rows: usize,
        cols: usize,
        batch: usize,
    ) -> Result<Timed, BenchError> {
        let (gpu, cfg) = (self.gpu, self.cfg);
        self.fp16_operands(rows, cols)?;
        let (dense, blas, lt) = (&self.dense, self.blas.as_ref(), self.lt.as_ref());
        let ops = self.fp16.as_ref().expect("uploaded");
        let x = data::f16_uniform(batch * cols, 1.0, seed(rows, cols) + batch as u64);
        let want = cpu::gemv_f16(&ops.host, rows, cols, &x, batch)?;
        let dx = gpu.upload(&x)?;
        let run = |m: &DeviceMatrix<f16>,
                   y: &mut cmv_runtime::CudaSlice<f16>|
         -> Result<(), BenchError> {
            match kernel {
                Baseline::CublasFp16 => Ok(blas
                    .ok_or(cmv_runtime::RuntimeError::NoCublas)?
                    .gemv_f16(m, &dx, y, batch)?),
                Baseline::CublasLtFp16 => Ok(lt
                    .ok_or(CublasLtError::NotLoaded)?
                    .gemv_f16(m, &dx, y, batch)?),
                _ => Ok(dense.gemv_f16(m, &dx, y, batch)?),
            }
        };
        let (f, v) = kernel.name();
        let what = format!("{f}/{v} {rows}x{cols} batch {batch}");
        // cuBLASLt's heuristic runs here, before any timed or captured call.
        let algorithm = match (kernel, lt) {
            (Baseline::CublasLtFp16, Some(lt)) => {
                let a = lt.plan(rows, cols, batch)?;
                eprintln!("  {what}: cuBLASLt's heuristic chose {}", a.summary());
                Some(LibraryAlgorithm::from(&a))
            }
            _ => None,
        };
        let mut y = gpu.upload(&vec![f16::NAN; batch * rows])?;
        run(&ops.mats[0], &mut y)?;
        let check = check_f16(&what, &gpu.download(&y)?, &want)?;
        let copies = ops.mats.len();
        let timings = cfg
            .timing
            .time(gpu, cfg, copies, |i| -> Result<(), BenchError> {
                run(&ops.mats[i % copies], &mut y)
            })?;
        // The output of the last timed call is checked too.
        check_f16(&format!("{what} (timed)"), &gpu.download(&y)?, &want)?;
        let kernel = matches!(kernel, Baseline::CmvFp16)
            .then(|| dense.f16_kernel(rows as u32, cols as u32, batch as u32));
        Ok(Timed {
            timings,
            copies,
            check,
            algorithm,
            kernel,
        })
    }

    fn time_int8(&mut self, rows: usize, cols: usize, batch: usize) -> Result<Timed, BenchError> {
        let (gpu, cfg) = (self.gpu, self.cfg);
        self.int8_operands(rows, cols)?;
        let dense = &self.dense;
        let ops = self.int8.as_ref().expect("uploaded");
        let x = data::i8_uniform(batch * cols, seed(rows, cols) + 100 + batch as u64);
        let scale = 1.0 / (cols as f32).sqrt() / 64.0;
        let want = cpu::gemv_i8(&ops.host, rows, cols, &x, batch)?;
        let want8 = cpu::requantize_all(&want, scale);
        let dx = gpu.upload(&x)?;
        let what = format!("dense-int8/cmv {rows}x{cols} batch {batch}");
        let mut y32 = gpu.upload(&vec![i32::MIN; batch * rows])?;
        let mut y8 = gpu.upload(&vec![0x55i8; batch * rows])?;
        let check_exact = |y32: &cmv_runtime::CudaSlice<i32>,
                           y8: &cmv_runtime::CudaSlice<i8>,
                           when: &str|
         -> Result<(), BenchError> {
            if gpu.download(y32)? == want && gpu.download(y8)? == want8 {
                Ok(())
            } else {
                Err(BenchError::Mismatch {
                    what: format!("{what}{when}"),
                    detail: "not bit-exact".into(),
                })
            }
        };
        dense.gemv_i8(&ops.mats[0], &dx, &mut y32, &mut y8, scale, batch)?;
        check_exact(&y32, &y8, "")?;
        let copies = ops.mats.len();
        let timings = cfg
            .timing
            .time(gpu, cfg, copies, |i| -> Result<(), BenchError> {
                Ok(dense.gemv_i8(&ops.mats[i % copies], &dx, &mut y32, &mut y8, scale, batch)?)
            })?;
        check_exact(&y32, &y8, " (timed)")?;
        Ok(Timed {
            timings,
            copies,
            check: "exact".into(),
            algorithm: None,
            kernel: Some(dense.i8_kernel(rows as u32, cols as u32, batch as u32)),
        })
    }

    /// The median time of `kernel` at this shape and batch, microseconds, measured on first
    /// use; `None` where it cannot run (cuBLAS or cuBLASLt missing, a batch past the dense
    /// kernels').
    ///
    /// # Errors
    /// Runtime errors, [`BenchError::Mismatch`].
    pub fn median_us(
        &mut self,
        kernel: Baseline,
        rows: usize,
        cols: usize,
        batch: usize,
    ) -> Result<Option<f64>, BenchError> {
        if (kernel == Baseline::CublasFp16 && self.blas.is_none())
            || (kernel == Baseline::CublasLtFp16 && self.lt.is_none())
            || !(1..=dense_gemv::MAX_BATCH as usize).contains(&batch)
        {
            return Ok(None);
        }
        Ok(Some(
            self.measure(kernel, rows, cols, batch)?.timings.median_ms() * 1e3,
        ))
    }

    /// The row of `kernel` at this shape and batch (`None` where it cannot run).
    ///
    /// # Errors
    /// Runtime errors, [`BenchError::Mismatch`].
    pub fn row(
        &mut self,
        kernel: Baseline,
        rows: usize,
        cols: usize,
        batch: usize,
    ) -> Result<Option<Row>, BenchError> {
        if self.median_us(kernel, rows, cols, batch)?.is_none() {
            return Ok(None);
        }
        let cublas_us = self.median_us(Baseline::CublasFp16, rows, cols, batch)?;
        let dense_us = self.median_us(kernel.own(), rows, cols, batch)?;
        let e = kernel.elem_bytes();
        let (weight_bytes, input_bytes) = (e * rows * cols, e * batch * cols);
        let read_us = self.same_size_read(weight_bytes + input_bytes)?;
        let t = &self.timed[&(kernel, rows, cols, batch)];
        let mut row = Row::derive(RowTimes {
            name: kernel.name(),
            shape: (rows, cols, batch),
            bits_per_weight: 8.0 * e as f64,
            parts: Part::dense(weight_bytes as u64),
            weight_bytes,
            input_bytes,
            copies: t.copies,
            timings: &t.timings,
            ceiling_gbps: self.ceiling_gbps,
            read_us,
            cublas_us,
            dense_us,
            check: t.check.clone(),
        });
        row.algorithm = t.algorithm.clone();
        row.kernel = t.kernel.map(String::from);
        Ok(Some(row))
    }
}

/// The seed of a shape's dense operands.
fn seed(rows: usize, cols: usize) -> u64 {
    (rows as u64) << 32 ^ cols as u64
}

/// Runs the dense fp16 (ours, cuBLAS and cuBLASLt) and int8 kernels over every shape and batch.
/// `progress` is called with each row as it is made.
pub fn run_gpu(
    bench: &mut Baselines<'_>,
    mut progress: impl FnMut(&Row),
) -> Result<Vec<Row>, BenchError> {
    let cfg = bench.cfg();
    let mut out = Vec::new();
    for &(rows, cols) in &cfg.shapes {
        for kernels in [
            &[
                Baseline::CmvFp16,
                Baseline::CublasFp16,
                Baseline::CublasLtFp16,
            ][..],
            &[Baseline::CmvInt8],
        ] {
            for &batch in &cfg.batches {
                for &k in kernels {
                    if let Some(r) = bench.row(k, rows, cols, batch)? {
                        progress(&r);
                        out.push(r);
                    }
                }
            }
        }
    }
    Ok(out)
}

/// The CPU side: sizes, bits per weight and batch-1 CPU reference timings.
pub fn run_cpu(shapes: &[(usize, usize)]) -> Result<Vec<CpuRow>, BenchError> {
    let mut out = Vec::new();
    for &(rows, cols) in shapes {
        let row = |(format, variant): (&str, &str), bytes: usize, ms: f64| CpuRow {
            format: format.into(),
            variant: variant.into(),
            rows,
            cols,
            bytes: bytes as u64,
            bits_per_weight: 8.0 * bytes as f64 / (rows * cols) as f64,
            container_bits_per_weight: 8.0 * bytes as f64 / (rows * cols) as f64,
            parts: Part::dense(bytes as u64),
            encode_ms: 0.0,
            reference_ms: ms,
        };
        let w = data::f16_uniform(rows * cols, 1.0, seed(rows, cols));
        let x = data::f16_uniform(cols, 1.0, seed(rows, cols) + 1);
        let t0 = std::time::Instant::now();
        let y = cpu::gemv_f16(&w, rows, cols, &x, 1)?;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        assert_eq!(y.len(), rows);
        out.push(row(Baseline::CmvFp16.name(), rows * cols * 2, ms));
        drop(w);
        let w = data::i8_uniform(rows * cols, seed(rows, cols) + 2);
        let x = data::i8_uniform(cols, seed(rows, cols) + 3);
        let t0 = std::time::Instant::now();
        let y = cpu::gemv_i8(&w, rows, cols, &x, 1)?;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        assert_eq!(y.len(), rows);
        out.push(row(Baseline::CmvInt8.name(), rows * cols, ms));
    }
    Ok(out)
}
