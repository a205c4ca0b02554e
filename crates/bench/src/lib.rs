//! The benchmark harness behind `cargo xtask bench`.
//!
//! Every GEMV suite produces [`Row`]s: one format (or dense baseline) and variant, one shape,
//! one batch, the median of many calls after warm-up (timed in a CUDA graph or with an event
//! pair per call), each call reading a different copy of the weights so that it streams from
//! HBM, its output checked against the CPU reference before and after timing. The dense suite
//! ([`dense`]) measures the baselines; [`formats`] measures every registered compressed format
//! (one line in [`formats::registry`]) through the `cmv_format` traits alone. [`report`] turns
//! the rows into the table, the JSON file and the plot. The extras keep their own rows: the
//! MatVANS chain ([`ans`]) and the `weights` suite ([`weights`]), which times nothing and
//! measures the compressed size of a real model's int8-quantized weights on the CPU.

pub mod ans;
pub mod beam;
pub mod data;
pub mod dense;
pub mod explore;
pub mod formats;
pub mod report;
pub mod sbvr;
pub mod sbvr_accuracy;
pub mod spqr;
pub mod spqr_accuracy;
pub mod toy;
pub mod vq;
pub mod weights;

use std::collections::BTreeMap;

use serde::Serialize;

/// The shapes (rows, cols) every format is measured on: Llama-2-7B, Llama-3-8B, Llama-3-70B,
/// and 8192 x 8192 (a square reference for the int8 and ANS kernels).
pub const SHAPES: [(usize, usize); 8] = [
    (4096, 4096),
    (8192, 8192),
    (11008, 4096),
    (4096, 11008),
    (14336, 4096),
    (4096, 14336),
    (28672, 8192),
    (8192, 28672),
];

/// The shapes of a quick run and of the CPU side (which encodes every format on the host).
pub const CPU_SHAPES: [(usize, usize); 2] = [(4096, 4096), (11008, 4096)];

/// Batches every format is measured at.
pub const BATCHES: [usize; 3] = [1, 4, 16];

/// How to measure.
#[derive(Clone, Debug, Serialize)]
pub struct BenchConfig {
    /// Shapes to run.
    pub shapes: Vec<(usize, usize)>,
    /// Batches to run.
    pub batches: Vec<usize>,
    /// Untimed calls first.
    pub warmup: usize,
    /// Timed calls (the median is reported).
    pub iters: usize,
    /// Weight bytes to rotate through at least (and at least 4 x L2).
    pub min_rotation_bytes: usize,
    /// How calls are timed.
    pub timing: Timing,
    /// Batches of a format where they differ from `batches` (`--spqr-batches`).
    pub format_batches: BTreeMap<String, Vec<usize>>,
}

impl BenchConfig {
    /// The batches format `name` runs at (before those past its kernels are skipped).
    pub fn batches_for(&self, name: &str) -> Vec<usize> {
        self.format_batches
            .get(name)
            .unwrap_or(&self.batches)
            .clone()
    }
}

/// How calls are timed (both with CUDA events, after warm-up, median reported).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Timing {
    /// A CUDA graph of at least 16 back-to-back calls (covering every weight copy) is
    /// replayed; a sample is one replay over its calls. No host launch overhead and no events
    /// between kernels, as in an inference step.
    Graph,
    /// An event pair around every single call, launched from the host back to back.
    Events,
}

impl Timing {
    /// Times `launch(i)` (which must use weight copy `i % copies`) per `cfg`; per-call samples.
    /// `launch` may return any error a `RuntimeError` converts into.
    ///
    /// # Errors
    /// The first error of `launch` or of the timing calls.
    pub fn time<F, E>(
        self,
        gpu: &cmv_runtime::Gpu,
        cfg: &BenchConfig,
        copies: usize,
        launch: F,
    ) -> Result<cmv_runtime::Timings, E>
    where
        F: FnMut(usize) -> Result<(), E>,
        E: From<cmv_runtime::RuntimeError>,
    {
        match self {
            Timing::Events => cmv_runtime::time_launches(gpu, cfg.warmup, cfg.iters, launch),
            Timing::Graph => {
                let calls = 16usize.div_ceil(copies.max(1)) * copies.max(1);
                let reps = cfg.iters.div_ceil(calls).max(20);
                cmv_runtime::time_graph(gpu, calls, 3, reps, launch)
            }
        }
    }
}

impl Default for BenchConfig {
    fn default() -> Self {
        Self {
            shapes: SHAPES.to_vec(),
            batches: BATCHES.to_vec(),
            warmup: 20,
            iters: 200,
            min_rotation_bytes: 1 << 30,
            timing: Timing::Graph,
            format_batches: BTreeMap::new(),
        }
    }
}

/// One named part of a matrix and its bytes (from [`cmv_format::SizeBreakdown`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Part {
    /// The part's name (`"weights"`, `"stream"`, `"CSR outliers"`).
    pub name: String,
    /// Its bytes.
    pub bytes: u64,
    /// Whether a GPU product reads it.
    pub read_by_kernel: bool,
}

impl Part {
    /// The parts of a size breakdown.
    pub fn of(sizes: &cmv_format::SizeBreakdown) -> Vec<Part> {
        sizes
            .parts
            .iter()
            .map(|p| Part {
                name: p.name.into(),
                bytes: p.bytes,
                read_by_kernel: p.read_by_kernel,
            })
            .collect()
    }

    /// One part holding a whole dense matrix.
    pub fn dense(bytes: u64) -> Vec<Part> {
        vec![Part {
            name: "weights".into(),
            bytes,
            read_by_kernel: true,
        }]
    }
}

/// One timed GPU configuration: a format (or a dense baseline) and its variant at one shape
/// and batch. Every suite that times GEMV kernels produces these; [`report::gpu_table`] prints
/// them and `bench.json` holds them as they are.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The format (`spqr`, `ans`, `fp16-toy`) or dense baseline (`dense-fp16`, `dense-int8`).
    pub format: String,
    /// The variant: an encoder setting of the format (`CompressedMatrix::variants`), or the
    /// dense implementation (`cmv`, `cublas`).
    pub variant: String,
    /// Matrix rows.
    pub rows: usize,
    /// Matrix columns.
    pub cols: usize,
    /// Input vectors.
    pub batch: usize,
    /// Bits per weight a GPU product reads (the parts the kernel reads, no container header).
    pub bits_per_weight: f64,
    /// The matrix's parts.
    pub parts: Vec<Part>,
    /// Bytes one call must read: the (compressed) weights plus the inputs.
    pub bytes_read: usize,
    /// Weight copies rotated through.
    pub copies: usize,
    /// Median time per call, microseconds.
    pub median_us: f64,
    /// 10th percentile, microseconds.
    pub p10_us: f64,
    /// 90th percentile, microseconds.
    pub p90_us: f64,
    /// `bytes_read / median`, GB/s.
    pub gbps: f64,
    /// `gbps` over the measured read ceiling, percent.
    pub pct_of_ceiling: f64,
    /// Median time of a plain streaming read of `bytes_read` bytes (rotated copies),
    /// microseconds: what any kernel that reads these bytes once can reach at this size,
    /// launch and ramp-up included.
    pub read_us: f64,
    /// `read_us` over `median_us`, percent.
    pub pct_of_same_size_read: f64,
    /// cuBLAS fp16 time at this shape and batch over this time (absent without cuBLAS).
    pub speedup_vs_cublas: Option<f64>,
    /// Our own dense kernel's time at this shape and batch over this time: the dense kernel of
    /// the format's input type (fp16 for fp16 inputs, int8 for int8 inputs).
    pub speedup_vs_dense: Option<f64>,
    /// How the output was checked against the CPU reference, e.g. `exact` or
    /// `rel_err=2.1e-4` (before and after timing; the run fails otherwise).
    pub check: String,
    /// The library's own choice of algorithm, for a vendor baseline that reports one
    /// (`dense-fp16/cublaslt`: cuBLASLt's heuristic's first choice); `null` for every other row.
    pub algorithm: Option<dense::LibraryAlgorithm>,
    /// The PTX entry point our dense baseline ran (`dense-*/cmv` rows: the default path's
    /// choice for this shape and batch, `dense_gemv::DenseGemv::f16_kernel`); `null` for every
    /// other row.
    pub kernel: Option<String>,
}

/// What a [`Row`] is derived from: the times and sizes measured for it.
#[derive(Clone, Debug)]
pub struct RowTimes<'a> {
    /// Format and variant.
    pub name: (&'a str, &'a str),
    /// Rows, columns, batch.
    pub shape: (usize, usize, usize),
    /// Bits per weight the kernel reads (from the size breakdown).
    pub bits_per_weight: f64,
    /// The matrix's parts.
    pub parts: Vec<Part>,
    /// Bytes the kernel reads for the weights (the parts it reads, as uploaded).
    pub weight_bytes: usize,
    /// Bytes of the inputs.
    pub input_bytes: usize,
    /// Weight copies rotated through.
    pub copies: usize,
    /// The timed calls.
    pub timings: &'a cmv_runtime::Timings,
    /// Measured read ceiling, GB/s.
    pub ceiling_gbps: f64,
    /// Same-size read, microseconds.
    pub read_us: f64,
    /// cuBLAS fp16 median, microseconds.
    pub cublas_us: Option<f64>,
    /// Our dense kernel's median, microseconds.
    pub dense_us: Option<f64>,
    /// The check.
    pub check: String,
}

impl Row {
    /// A row with its rates and ratios derived from `t`.
    pub fn derive(t: RowTimes<'_>) -> Row {
        let (rows, cols, batch) = t.shape;
        let median_us = t.timings.median_ms() * 1e3;
        let bytes_read = t.weight_bytes + t.input_bytes;
        let gbps = bytes_read as f64 / (median_us * 1e3);
        Row {
            format: t.name.0.into(),
            variant: t.name.1.into(),
            rows,
            cols,
            batch,
            bits_per_weight: t.bits_per_weight,
            parts: t.parts,
            bytes_read,
            copies: t.copies,
            median_us,
            p10_us: t.timings.quantile(0.1) * 1e3,
            p90_us: t.timings.quantile(0.9) * 1e3,
            gbps,
            pct_of_ceiling: 100.0 * gbps / t.ceiling_gbps,
            read_us: t.read_us,
            pct_of_same_size_read: 100.0 * t.read_us / median_us,
            speedup_vs_cublas: t.cublas_us.map(|b| b / median_us),
            speedup_vs_dense: t.dense_us.map(|b| b / median_us),
            check: t.check,
            algorithm: None,
            kernel: None,
        }
    }
}

/// The CPU side of a run (what a machine without a GPU measures): one format (or dense
/// baseline) and variant at one shape.
#[derive(Clone, Debug, Serialize)]
pub struct CpuRow {
    /// The format.
    pub format: String,
    /// The variant.
    pub variant: String,
    /// Matrix rows.
    pub rows: usize,
    /// Matrix columns.
    pub cols: usize,
    /// Bytes of the stored matrix (the whole container for formats).
    pub bytes: u64,
    /// Bits per weight a GPU product reads.
    pub bits_per_weight: f64,
    /// Bits per weight of the whole container.
    pub container_bits_per_weight: f64,
    /// The matrix's parts.
    pub parts: Vec<Part>,
    /// Encoding time, milliseconds (0 for the dense baselines).
    pub encode_ms: f64,
    /// Batch-1 CPU reference product, milliseconds.
    pub reference_ms: f64,
}

/// Errors of a benchmark run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A result did not match its CPU reference: the run is invalid.
    #[error("{what}: GPU result does not match the CPU reference ({detail})")]
    Mismatch {
        /// Which configuration.
        what: String,
        /// How it differed.
        detail: String,
    },
    /// A dense-baseline error.
    #[error(transparent)]
    Dense(#[from] dense_gemv::DenseError),
    /// A cuBLASLt-baseline error.
    #[error(transparent)]
    CublasLt(#[from] dense_gemv::CublasLtError),
    /// An `ans-codec` error.
    #[error(transparent)]
    Ans(#[from] ans_codec::AnsError),
    /// A runtime error.
    #[error(transparent)]
    Runtime(#[from] cmv_runtime::RuntimeError),
    /// A format's error (encoding, upload, launch, a kernel-flagged error).
    #[error("{format}: {source}")]
    Format {
        /// The format's name.
        format: &'static str,
        /// Its error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Arguments the suites cannot run.
    #[error("{0}")]
    Usage(String),
    /// The weights suite could not load its model.
    #[error(transparent)]
    Weights(#[from] weights::WeightsError),
    /// Writing the report failed.
    #[error("writing {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}
