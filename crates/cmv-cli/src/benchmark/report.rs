//! The report of `cmv bench`, built from measured times: per tensor and batch, the compressed
//! product against our dense fp16 kernel and cuBLAS fp16; the sums over the linear layers
//! (the per-token time of the weights); for a synthetic layer set, those sums times the
//! model's layers. Everything here is arithmetic and text on given times, so that it is tested
//! without a GPU.

use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;

/// What was benchmarked.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Source {
    /// A file written by `cmv compress`.
    File {
        /// The file.
        path: PathBuf,
    },
    /// A synthetic layer set compressed in memory.
    Synthetic {
        /// The preset (`llama-7b`).
        preset: String,
        /// The format.
        format: String,
        /// Its variant.
        variant: String,
        /// The seed of the weights.
        seed: u64,
        /// Standard deviation of the Gaussian weights.
        sigma: f64,
        /// How float weights became int8 for the int8 formats (`absmax`, or the target of
        /// `--int8-error`).
        int8: String,
    },
}

/// The GPU it ran on.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Device {
    /// Its name.
    pub name: String,
    /// Compute capability, `major.minor`.
    pub compute_capability: String,
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// L2 cache bytes.
    pub l2_bytes: usize,
    /// The driver version.
    pub driver: String,
    /// The measured read ceiling (a streaming read of at least 1 GiB), GB/s.
    pub ceiling_gbps: f64,
    /// Whether cuBLAS could be loaded (else its columns are empty).
    pub cublas: bool,
}

/// How it was measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Config {
    /// Batches (input vectors per product).
    pub batches: Vec<usize>,
    /// Timed calls per product (the median is reported).
    pub iters: usize,
    /// Untimed calls first.
    pub warmup: usize,
    /// `graph` or `events`.
    pub timing: String,
    /// Graph timing: the calls timed per product and batch at most, where the bench's 20
    /// replays would time more (then at least 3 replays).
    pub max_graph_calls: usize,
    /// Weight bytes each product rotates through at least (and at least 4 x L2).
    pub min_rotation_bytes: usize,
    /// Kept 2-D tensors with fewer weights are not timed.
    pub min_elements: usize,
}

/// Whether a tensor's product is part of the per-token sum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// A linear layer: one product per token, counted in the sums.
    Linear,
    /// An embedding table (its name holds `embed` or `embd`): a lookup per token, not a
    /// product; timed, but not counted.
    Embedding,
}

impl Role {
    /// The role of tensor `name`: an embedding table when its name holds `embed` or `embd`
    /// (`embeddings.word_embeddings.weight`, `model.embed_tokens.weight`, GGUF's
    /// `token_embd.weight`), else a linear layer (`lm_head.weight` and GGUF's `output.weight`
    /// are products per token).
    pub fn of(name: &str) -> Role {
        let n = name.to_ascii_lowercase();
        if n.contains("embed") || n.contains("embd") {
            Role::Embedding
        } else {
            Role::Linear
        }
    }
}

/// One timed compressed product (a `bench::Row`'s measurements).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Measured {
    /// Median time per call, microseconds.
    pub median_us: f64,
    /// 10th percentile, microseconds.
    pub p10_us: f64,
    /// 90th percentile, microseconds.
    pub p90_us: f64,
    /// Bytes one call reads (the compressed weights the kernel reads, and the inputs).
    pub bytes_read: usize,
    /// `bytes_read / median`, GB/s.
    pub gbps: f64,
    /// `gbps` over the read ceiling, percent.
    pub pct_of_ceiling: f64,
    /// Median time of a plain streaming read of `bytes_read` bytes, microseconds.
    pub read_us: f64,
    /// `read_us` over `median_us`, percent.
    pub pct_of_same_size_read: f64,
    /// Weight copies rotated through.
    pub copies: usize,
    /// How the output matched the CPU reference (before and after timing), e.g. `exact`
    /// or `rel_err=2.1e-4`.
    pub check: String,
}

/// One tensor at one batch.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BatchResult {
    /// Input vectors.
    pub batch: usize,
    /// The compressed product (`None` for a kept tensor, or where it did not run).
    pub compressed: Option<Measured>,
    /// Why a compressed tensor's product did not run at this batch (its GPU kernels take
    /// fewer vectors).
    pub compressed_skipped: Option<String>,
    /// Our dense fp16 kernel (`dense-gemv`) at this shape, median microseconds.
    pub dense_fp16_us: Option<f64>,
    /// cuBLAS fp16 at this shape, median microseconds (`None` without cuBLAS).
    pub cublas_fp16_us: Option<f64>,
    /// `dense_fp16_us` over the compressed time (above 1: the compressed product is faster).
    pub speedup_vs_dense_fp16: Option<f64>,
    /// `cublas_fp16_us` over the compressed time.
    pub speedup_vs_cublas: Option<f64>,
}

impl BatchResult {
    /// A result with its speedups derived.
    pub fn new(
        batch: usize,
        compressed: Option<Measured>,
        compressed_skipped: Option<String>,
        dense_fp16_us: Option<f64>,
        cublas_fp16_us: Option<f64>,
    ) -> Self {
        let us = compressed.as_ref().map(|m| m.median_us);
        Self {
            batch,
            speedup_vs_dense_fp16: ratio(dense_fp16_us, us),
            speedup_vs_cublas: ratio(cublas_fp16_us, us),
            compressed,
            compressed_skipped,
            dense_fp16_us,
            cublas_fp16_us,
        }
    }
}

/// `a / b` where both are there and `b` is positive.
fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// One timed tensor.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TensorReport {
    /// The tensor.
    pub name: String,
    /// Rows (outputs).
    pub rows: usize,
    /// Columns (inputs).
    pub cols: usize,
    /// Its format, `None` for a tensor kept uncompressed (timed as dense only).
    pub format: Option<String>,
    /// The variant.
    pub variant: Option<String>,
    /// Bits per weight the GPU product reads (16 for a kept tensor, timed as fp16).
    pub bits_per_weight: f64,
    /// Linear layer or embedding table.
    pub role: Role,
    /// Whether it is counted in the sums ([`Role::Linear`]).
    pub in_sum: bool,
    /// One entry per batch.
    pub batches: Vec<BatchResult>,
}

/// A tensor that was not timed, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NotTimed {
    /// The tensor.
    pub name: String,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Its dtype.
    pub dtype: String,
    /// Why.
    pub reason: String,
}

/// The sums over the linear layers at one batch: the per-token time of the weights.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Total {
    /// Input vectors.
    pub batch: usize,
    /// Tensors summed.
    pub tensors: usize,
    /// Weights summed.
    pub weights: u64,
    /// The compressed model: each compressed tensor's product, and our dense fp16 kernel
    /// for the tensors kept uncompressed; `None` where a compressed product did not run
    /// (`missing`).
    pub compressed_us: Option<f64>,
    /// Every summed tensor with our dense fp16 kernel.
    pub dense_fp16_us: Option<f64>,
    /// Every summed tensor with cuBLAS fp16.
    pub cublas_fp16_us: Option<f64>,
    /// `dense_fp16_us / compressed_us`.
    pub speedup_vs_dense_fp16: Option<f64>,
    /// `cublas_fp16_us / compressed_us`.
    pub speedup_vs_cublas: Option<f64>,
    /// Summed tensors whose compressed product did not run at this batch, with the reason.
    pub missing: Vec<String>,
}

/// The sums of a synthetic layer set times the model's layers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PerModel {
    /// Decoder layers.
    pub layers: usize,
    /// Each [`Total`] times `layers` (speedups unchanged).
    pub totals: Vec<Total>,
}

/// The whole report (`cmv bench --json` prints it).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// What was benchmarked.
    pub source: Source,
    /// The GPU.
    pub device: Device,
    /// The cmv version (`cmv --version`).
    pub cmv_version: String,
    /// The git revision it was built from (`git describe --always --dirty`).
    pub git_revision: String,
    /// When it ran (RFC 3339, UTC).
    pub date: String,
    /// How it was measured.
    pub config: Config,
    /// The timed tensors, in the file's order.
    pub tensors: Vec<TensorReport>,
    /// The tensors not timed.
    pub not_timed: Vec<NotTimed>,
    /// The sums over the linear layers, one per batch.
    pub totals: Vec<Total>,
    /// For a synthetic layer set: the sums times its model's layers.
    pub per_model: Option<PerModel>,
    /// Notes (cuBLAS missing, batches a format skips).
    pub notes: Vec<String>,
}

/// What a report is made of, before its sums.
#[derive(Clone, Debug)]
pub struct Parts {
    /// What was benchmarked.
    pub source: Source,
    /// The GPU.
    pub device: Device,
    /// When.
    pub date: String,
    /// How.
    pub config: Config,
    /// The timed tensors.
    pub tensors: Vec<TensorReport>,
    /// The others.
    pub not_timed: Vec<NotTimed>,
    /// Notes.
    pub notes: Vec<String>,
    /// Layers of the model a synthetic layer set stands for.
    pub layers: Option<usize>,
}

impl Report {
    /// The report with its sums (and, with `layers`, the per-model sums).
    pub fn build(p: Parts) -> Report {
        let totals = totals(&p.tensors, &p.config.batches);
        let per_model = p.layers.map(|layers| PerModel {
            layers,
            totals: totals.iter().map(|t| scale(t, layers)).collect(),
        });
        Report {
            source: p.source,
            device: p.device,
            cmv_version: env!("CARGO_PKG_VERSION").into(),
            git_revision: env!("CMV_GIT_REV").into(),
            date: p.date,
            config: p.config,
            tensors: p.tensors,
            not_timed: p.not_timed,
            totals,
            per_model,
            notes: p.notes,
        }
    }
}

/// The sums over the tensors counted ([`TensorReport::in_sum`]) at each batch: a compressed
/// tensor adds its compressed product to the compressed sum and a kept one our dense fp16
/// kernel; the dense and cuBLAS sums take every tensor with that kernel. A sum with a term
/// missing is `None` (the compressed one lists the tensors in `missing`).
pub fn totals(tensors: &[TensorReport], batches: &[usize]) -> Vec<Total> {
    batches
        .iter()
        .map(|&batch| {
            let mut compressed = Some(0.0);
            let mut dense = Some(0.0);
            let mut cublas = Some(0.0);
            let mut missing = Vec::new();
            let mut count = 0;
            let mut weights = 0u64;
            let add = |sum: &mut Option<f64>, v: Option<f64>| {
                *sum = match (*sum, v) {
                    (Some(s), Some(v)) => Some(s + v),
                    _ => None,
                };
            };
            for t in tensors.iter().filter(|t| t.in_sum) {
                count += 1;
                weights += t.rows as u64 * t.cols as u64;
                let r = t.batches.iter().find(|r| r.batch == batch);
                let dense_us = r.and_then(|r| r.dense_fp16_us);
                add(&mut dense, dense_us);
                add(&mut cublas, r.and_then(|r| r.cublas_fp16_us));
                let own = if t.format.is_some() {
                    r.and_then(|r| r.compressed.as_ref().map(|m| m.median_us))
                } else {
                    dense_us
                };
                if own.is_none() {
                    let why = r
                        .and_then(|r| r.compressed_skipped.clone())
                        .unwrap_or_else(|| "not measured".into());
                    missing.push(format!("{}: {why}", t.name));
                }
                add(&mut compressed, own);
            }
            Total {
                batch,
                tensors: count,
                weights,
                speedup_vs_dense_fp16: ratio(dense, compressed),
                speedup_vs_cublas: ratio(cublas, compressed),
                compressed_us: compressed,
                dense_fp16_us: dense,
                cublas_fp16_us: cublas,
                missing,
            }
        })
        .collect()
}

/// `t` for `layers` copies of its layer set: times and weights multiplied, speedups as they
/// are.
pub fn scale(t: &Total, layers: usize) -> Total {
    let k = layers as f64;
    Total {
        batch: t.batch,
        tensors: t.tensors * layers,
        weights: t.weights * layers as u64,
        compressed_us: t.compressed_us.map(|v| v * k),
        dense_fp16_us: t.dense_fp16_us.map(|v| v * k),
        cublas_fp16_us: t.cublas_fp16_us.map(|v| v * k),
        speedup_vs_dense_fp16: t.speedup_vs_dense_fp16,
        speedup_vs_cublas: t.speedup_vs_cublas,
        missing: t.missing.clone(),
    }
}

fn us(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2}"))
}

fn times(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2}x"))
}

/// The terminal table of a report.
pub fn table(r: &Report) -> String {
    let mut s = String::new();
    let d = &r.device;
    let what = match &r.source {
        Source::File { path } => path.display().to_string(),
        Source::Synthetic {
            preset,
            format,
            variant,
            seed,
            ..
        } => format!("synthetic {preset} layer set as {format}/{variant} (seed {seed})"),
    };
    let _ = writeln!(
        s,
        "{what}\n{} (sm_{}, {} SMs, {} MiB L2, driver {}), read ceiling {:.1} GB/s; cmv {} ({})",
        d.name,
        d.compute_capability.replace('.', ""),
        d.sm_count,
        d.l2_bytes >> 20,
        d.driver,
        d.ceiling_gbps,
        r.cmv_version,
        r.git_revision
    );
    let c = &r.config;
    let _ = writeln!(
        s,
        "timing: {}, median over {} calls after {} warm-up, each call reading another of the \
         weight copies filling at least {} MiB (the larger of --min-rotation-mib and 4 x L2); \
         every output checked against the CPU reference\n",
        c.timing,
        c.iters,
        c.warmup,
        c.min_rotation_bytes.max(4 * d.l2_bytes) >> 20
    );
    let width = r
        .tensors
        .iter()
        .map(|t| t.name.len())
        .max()
        .unwrap_or(6)
        .max(6);
    let _ = writeln!(
        s,
        "{:<width$}  {:>11}  {:<18}  {:>6}  {:>5}  {:>10}  {:>10}  {:>10}  {:>8}  {:>9}  {:>7}  check",
        "tensor",
        "shape",
        "format",
        "bits/w",
        "batch",
        "cmv us",
        "fp16 us",
        "cuBLAS us",
        "vs fp16",
        "vs cuBLAS",
        "GB/s",
    );
    for t in &r.tensors {
        let format = match (&t.format, &t.variant) {
            (Some(f), Some(v)) => format!("{f}/{v}"),
            _ => "kept (fp16)".into(),
        };
        let name = if t.in_sum {
            t.name.clone()
        } else {
            format!("{} *", t.name)
        };
        for (i, b) in t.batches.iter().enumerate() {
            let (first, shape, fmt, bits) = if i == 0 {
                (
                    name.as_str(),
                    format!("{}x{}", t.rows, t.cols),
                    format.as_str(),
                    format!("{:.3}", t.bits_per_weight),
                )
            } else {
                ("", String::new(), "", String::new())
            };
            let (cmv, gbps, check) = match (&b.compressed, &b.compressed_skipped) {
                (Some(m), _) => (
                    format!("{:.2}", m.median_us),
                    format!("{:.0}", m.gbps),
                    m.check.clone(),
                ),
                (None, Some(why)) => ("-".into(), "-".into(), format!("not run: {why}")),
                (None, None) => ("-".into(), "-".into(), String::new()),
            };
            let _ = writeln!(
                s,
                "{first:<width$}  {shape:>11}  {fmt:<18}  {bits:>6}  {:>5}  {cmv:>10}  {:>10}  \
                 {:>10}  {:>8}  {:>9}  {gbps:>7}  {check}",
                b.batch,
                us(b.dense_fp16_us),
                us(b.cublas_fp16_us),
                times(b.speedup_vs_dense_fp16),
                times(b.speedup_vs_cublas),
            );
        }
    }
    if r.tensors.iter().any(|t| !t.in_sum) {
        let _ = writeln!(
            s,
            "* embedding table: a lookup per token, not a product; timed, not in the sums"
        );
    }
    if !r.not_timed.is_empty() {
        let _ = writeln!(
            s,
            "{} tensors not timed (--json lists them with the reason): {}",
            r.not_timed.len(),
            not_timed_summary(&r.not_timed)
        );
    }
    let count = r.totals.first().map_or(0, |t| t.tensors);
    let _ = writeln!(
        s,
        "\nper-token weight time: the sum over the {count} linear layers (compressed model: \
         kept tensors at dense fp16)"
    );
    totals_table(&mut s, &r.totals);
    if let Some(m) = &r.per_model {
        let _ = writeln!(s, "\nper token of the whole model: {} layers", m.layers);
        totals_table(&mut s, &m.totals);
    }
    for n in &r.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}

/// The reasons of `not_timed`, each with its count.
fn not_timed_summary(v: &[NotTimed]) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for n in v {
        match counts.iter_mut().find(|(r, _)| *r == n.reason) {
            Some((_, c)) => *c += 1,
            None => counts.push((&n.reason, 1)),
        }
    }
    counts
        .iter()
        .map(|(r, c)| format!("{c} {r}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn totals_table(s: &mut String, totals: &[Total]) {
    let _ = writeln!(
        s,
        "{:>5}  {:>12}  {:>12}  {:>12}  {:>8}  {:>9}",
        "batch", "cmv us", "fp16 us", "cuBLAS us", "vs fp16", "vs cuBLAS"
    );
    for t in totals {
        let _ = writeln!(
            s,
            "{:>5}  {:>12}  {:>12}  {:>12}  {:>8}  {:>9}",
            t.batch,
            us(t.compressed_us),
            us(t.dense_fp16_us),
            us(t.cublas_fp16_us),
            times(t.speedup_vs_dense_fp16),
            times(t.speedup_vs_cublas)
        );
        if !t.missing.is_empty() {
            let _ = writeln!(
                s,
                "       cmv: {} of the compressed products did not run at batch {}, e.g. {}",
                t.missing.len(),
                t.batch,
                t.missing[0]
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(us: f64) -> Measured {
        Measured {
            median_us: us,
            p10_us: us * 0.9,
            p90_us: us * 1.1,
            bytes_read: 1000,
            gbps: 1000.0 / (us * 1e3),
            pct_of_ceiling: 50.0,
            read_us: us / 2.0,
            pct_of_same_size_read: 50.0,
            copies: 8,
            check: "exact".into(),
        }
    }

    /// A compressed tensor timed at batch 1 and 4 (`cmv` us, fp16 us, cuBLAS us each), and
    /// skipped at batch 16.
    fn compressed(name: &str, b1: [f64; 3], b4: [f64; 3]) -> TensorReport {
        let r = |batch, [c, d, b]: [f64; 3]| {
            BatchResult::new(batch, Some(measured(c)), None, Some(d), Some(b))
        };
        TensorReport {
            name: name.into(),
            rows: 10,
            cols: 20,
            format: Some("spqr".into()),
            variant: Some("csr".into()),
            bits_per_weight: 4.4,
            role: Role::of(name),
            in_sum: Role::of(name) == Role::Linear,
            batches: vec![
                r(1, b1),
                r(4, b4),
                BatchResult::new(
                    16,
                    None,
                    Some("its GPU kernels take 1 to 8 vectors".into()),
                    Some(100.0),
                    Some(90.0),
                ),
            ],
        }
    }

    fn kept(name: &str, dense: [f64; 3], cublas: [f64; 3]) -> TensorReport {
        TensorReport {
            name: name.into(),
            rows: 5,
            cols: 20,
            format: None,
            variant: None,
            bits_per_weight: 16.0,
            role: Role::Linear,
            in_sum: true,
            batches: [1, 4, 16]
                .iter()
                .zip(dense.iter().zip(&cublas))
                .map(|(&b, (&d, &c))| BatchResult::new(b, None, None, Some(d), Some(c)))
                .collect(),
        }
    }

    fn parts(tensors: Vec<TensorReport>, layers: Option<usize>) -> Parts {
        Parts {
            source: Source::Synthetic {
                preset: "llama-7b".into(),
                format: "spqr".into(),
                variant: "csr".into(),
                seed: 0,
                sigma: 0.02,
                int8: "absmax".into(),
            },
            device: Device {
                name: "test device".into(),
                compute_capability: "9.0".into(),
                sm_count: 132,
                l2_bytes: 50 << 20,
                driver: "13.0".into(),
                ceiling_gbps: 3000.0,
                cublas: true,
            },
            date: "2026-01-01T00:00:00Z".into(),
            config: Config {
                batches: vec![1, 4, 16],
                iters: 200,
                warmup: 20,
                timing: "graph".into(),
                max_graph_calls: 10_000,
                min_rotation_bytes: 1 << 30,
                min_elements: 4096,
            },
            tensors,
            not_timed: vec![NotTimed {
                name: "bias".into(),
                shape: vec![10],
                dtype: "F32".into(),
                reason: "1-D".into(),
            }],
            notes: vec![],
            layers,
        }
    }

    #[test]
    fn roles_follow_the_names() {
        for n in [
            "embeddings.word_embeddings.weight",
            "model.embed_tokens.weight",
            "token_embd.weight",
            "Embedding.W",
        ] {
            assert_eq!(Role::of(n), Role::Embedding, "{n}");
        }
        for n in [
            "encoder.layer.0.attention.self.query.weight",
            "lm_head.weight",
            "output.weight",
            "pooler.dense.weight",
        ] {
            assert_eq!(Role::of(n), Role::Linear, "{n}");
        }
    }

    #[test]
    fn sums_add_the_linear_layers_and_count_kept_ones_as_dense() {
        let tensors = vec![
            compressed("a.weight", [2.0, 4.0, 5.0], [6.0, 8.0, 9.0]),
            compressed("b.weight", [3.0, 9.0, 12.0], [7.0, 10.0, 11.0]),
            kept("c.weight", [10.0, 20.0, 30.0], [11.0, 21.0, 31.0]),
            compressed(
                "embeddings.word.weight",
                [100.0, 100.0, 100.0],
                [1.0, 1.0, 1.0],
            ),
        ];
        let t = totals(&tensors, &[1, 4, 16]);
        assert_eq!(t.len(), 3);
        let b1 = &t[0];
        assert_eq!((b1.batch, b1.tensors, b1.weights), (1, 3, 500));
        // cmv: 2 + 3 + the kept tensor at dense fp16 (10); fp16: 4 + 9 + 10; cuBLAS 5 + 12 + 11.
        assert_eq!(b1.compressed_us, Some(15.0));
        assert_eq!(b1.dense_fp16_us, Some(23.0));
        assert_eq!(b1.cublas_fp16_us, Some(28.0));
        assert_eq!(b1.speedup_vs_dense_fp16, Some(23.0 / 15.0));
        assert_eq!(b1.speedup_vs_cublas, Some(28.0 / 15.0));
        assert!(b1.missing.is_empty());
        let b4 = &t[1];
        assert_eq!(b4.compressed_us, Some(6.0 + 7.0 + 20.0));
        assert_eq!(b4.dense_fp16_us, Some(8.0 + 10.0 + 20.0));
        assert_eq!(b4.cublas_fp16_us, Some(9.0 + 11.0 + 21.0));
        // Batch 16: the compressed products did not run; the dense sums still add up.
        let b16 = &t[2];
        assert_eq!(b16.compressed_us, None);
        assert_eq!(b16.speedup_vs_dense_fp16, None);
        assert_eq!(b16.dense_fp16_us, Some(100.0 + 100.0 + 30.0));
        assert_eq!(
            b16.missing,
            [
                "a.weight: its GPU kernels take 1 to 8 vectors",
                "b.weight: its GPU kernels take 1 to 8 vectors"
            ]
        );
        // Per model: 32 layers multiply times and weights, not speedups.
        let m = scale(b1, 32);
        assert_eq!(m.compressed_us, Some(15.0 * 32.0));
        assert_eq!(m.dense_fp16_us, Some(23.0 * 32.0));
        assert_eq!(m.cublas_fp16_us, Some(28.0 * 32.0));
        assert_eq!((m.tensors, m.weights), (96, 16_000));
        assert_eq!(m.speedup_vs_cublas, b1.speedup_vs_cublas);
    }

    #[test]
    fn a_missing_cublas_empties_its_sum_only() {
        let mut t = compressed("a.weight", [2.0, 4.0, 5.0], [6.0, 8.0, 9.0]);
        for b in &mut t.batches {
            *b = BatchResult::new(
                b.batch,
                b.compressed.clone(),
                b.compressed_skipped.clone(),
                b.dense_fp16_us,
                None,
            );
        }
        let s = totals(&[t], &[1]);
        assert_eq!(s[0].compressed_us, Some(2.0));
        assert_eq!(s[0].cublas_fp16_us, None);
        assert_eq!(s[0].speedup_vs_cublas, None);
        assert_eq!(s[0].speedup_vs_dense_fp16, Some(2.0));
    }

    #[test]
    fn json_has_the_documented_fields() {
        let tensors = vec![
            compressed("a.weight", [2.0, 4.0, 5.0], [6.0, 8.0, 9.0]),
            kept("c.weight", [10.0, 20.0, 30.0], [11.0, 21.0, 31.0]),
        ];
        let r = Report::build(parts(tensors, Some(32)));
        let v = serde_json::to_value(&r).unwrap();
        for key in [
            "source",
            "device",
            "cmv_version",
            "git_revision",
            "date",
            "config",
            "tensors",
            "not_timed",
            "totals",
            "per_model",
            "notes",
        ] {
            assert!(v.get(key).is_some(), "missing {key}");
        }
        assert_eq!(v["source"]["kind"], "synthetic");
        assert_eq!(v["device"]["ceiling_gbps"], 3000.0);
        let t0 = &v["tensors"][0];
        assert_eq!(t0["format"], "spqr");
        assert_eq!(t0["role"], "linear");
        let b = &t0["batches"][0];
        assert_eq!(b["batch"], 1);
        assert_eq!(b["compressed"]["median_us"], 2.0);
        assert_eq!(b["compressed"]["check"], "exact");
        assert_eq!(b["dense_fp16_us"], 4.0);
        assert_eq!(b["cublas_fp16_us"], 5.0);
        assert_eq!(b["speedup_vs_dense_fp16"], 2.0);
        assert_eq!(b["speedup_vs_cublas"], 2.5);
        assert!(t0["batches"][2]["compressed"].is_null());
        assert!(t0["batches"][2]["compressed_skipped"].is_string());
        let kept = &v["tensors"][1];
        assert!(kept["format"].is_null());
        assert!(kept["batches"][0]["compressed"].is_null());
        assert_eq!(v["totals"][0]["compressed_us"], 12.0);
        assert_eq!(v["totals"][0]["dense_fp16_us"], 14.0);
        assert!(v["totals"][2]["compressed_us"].is_null());
        assert_eq!(v["per_model"]["layers"], 32);
        assert_eq!(v["per_model"]["totals"][0]["compressed_us"], 12.0 * 32.0);
        assert_eq!(v["not_timed"][0]["reason"], "1-D");
        let file = Report::build(Parts {
            source: Source::File {
                path: "m.safetensors".into(),
            },
            ..parts(vec![], None)
        });
        let v = serde_json::to_value(&file).unwrap();
        assert_eq!(v["source"]["kind"], "file");
        assert_eq!(v["source"]["path"], "m.safetensors");
        assert!(v["per_model"].is_null());
    }

    #[test]
    fn the_table_shows_every_tensor_batch_and_sum() {
        let tensors = vec![
            compressed("a.weight", [2.0, 4.0, 5.0], [6.0, 8.0, 9.0]),
            kept("c.weight", [10.0, 20.0, 30.0], [11.0, 21.0, 31.0]),
            compressed("embeddings.word.weight", [1.0; 3], [1.0; 3]),
        ];
        let text = table(&Report::build(parts(tensors, Some(32))));
        assert!(text.contains("a.weight"), "{text}");
        assert!(text.contains("spqr/csr"), "{text}");
        assert!(text.contains("kept (fp16)"), "{text}");
        assert!(text.contains("embeddings.word.weight *"), "{text}");
        assert!(
            text.contains("not run: its GPU kernels take 1 to 8 vectors"),
            "{text}"
        );
        assert!(text.contains("sum over the 2 linear layers"), "{text}");
        assert!(text.contains("32 layers"), "{text}");
        assert!(text.contains("1 tensors not timed"), "{text}");
        // 12 us compressed against 14 us dense: 1.17x.
        assert!(text.contains("1.17x"), "{text}");
    }
}
