//! The benchmark harness behind `cargo xtask bench`.
//!
//! A *suite* (the dense baselines now; each format adds its own) produces [`Measurement`]s:
//! one kernel, one shape, one batch, timed with CUDA events as the median of many calls after
//! warm-up, each call reading a different copy of the weights so that it streams from HBM,
//! its output checked against the CPU reference. [`report`] turns them into the table, the
//! JSON file and the plot. The `weights` suite ([`weights`]) times nothing: it measures the
//! compressed size of a real model's int8-quantized weights on the CPU.

pub mod ans;
pub mod data;
pub mod dense;
pub mod explore;
pub mod report;
pub mod spqr;
pub mod spqr_accuracy;
pub mod weights;

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
    pub fn time<F>(
        self,
        gpu: &cmv_runtime::Gpu,
        cfg: &BenchConfig,
        copies: usize,
        launch: F,
    ) -> Result<cmv_runtime::Timings, cmv_runtime::RuntimeError>
    where
        F: FnMut(usize) -> Result<(), cmv_runtime::RuntimeError>,
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
        }
    }
}

/// One timed kernel configuration.
#[derive(Clone, Debug, Serialize)]
pub struct Measurement {
    /// The format (`dense-fp16`, `dense-int8`, ...).
    pub format: String,
    /// The implementation (`cmv`, `cublas`).
    pub kernel: String,
    /// Matrix rows.
    pub rows: usize,
    /// Matrix columns.
    pub cols: usize,
    /// Input vectors.
    pub batch: usize,
    /// Bytes one call must read: the (compressed) weights plus the inputs.
    pub bytes_read: usize,
    /// Storage bits per weight, everything included.
    pub bits_per_weight: f64,
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
    /// A plain streaming read of the same weight copies (the fastest way to read these bytes
    /// once) over this call's time, percent: how close the kernel is to the limit at this size,
    /// launch and ramp-up included.
    pub pct_of_size_matched_read: f64,
    /// Best dense fp16 time over this time (filled in by [`report::fill_speedups`]).
    pub speedup_vs_best_dense: Option<f64>,
    /// How the output was checked, e.g. `exact` or `rel_err=2.1e-4`.
    pub check: String,
}

/// The CPU side of a run (what a machine without a GPU measures).
#[derive(Clone, Debug, Serialize)]
pub struct CpuMeasurement {
    /// The format.
    pub format: String,
    /// Matrix rows.
    pub rows: usize,
    /// Matrix columns.
    pub cols: usize,
    /// Bytes of the stored matrix.
    pub bytes: usize,
    /// Storage bits per weight.
    pub bits_per_weight: f64,
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
    /// An `ans-codec` error.
    #[error(transparent)]
    Ans(#[from] ans_codec::AnsError),
    /// A runtime error.
    #[error(transparent)]
    Runtime(#[from] cmv_runtime::RuntimeError),
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
