//! Real weights (`docs/WEIGHTS.md`): the 2-D tensors of a safetensors model, int8-quantized
//! per row, compressed with `ans-codec` in every layout, bits per element against entropy.
//!
//! The loading ([`load`], [`from_bytes`]) and the quantization ([`quantize_int8_rows`]) are
//! kept apart from the size analysis ([`analyse`]) so that other suites (SpQR accuracy) can
//! reuse them on the same model.

use std::path::Path;
use std::time::Instant;

use ans_codec::{AnsError, AnsMatrix, EncodeOptions, EntropyReport, Layout};
use half::{bf16, f16};
use safetensors::{Dtype, SafeTensors};
use serde::Serialize;

use crate::BenchError;

/// Where `cargo xtask fetch-model` puts all-MiniLM-L6-v2 (relative to the workspace root).
pub const DEFAULT_MODEL: &str = "target/models/all-MiniLM-L6-v2/model.safetensors";

/// The command that fetches [`DEFAULT_MODEL`].
pub const FETCH_COMMAND: &str = "cargo xtask fetch-model";

/// What is measured per tensor: the four layouts with the default model (within 0.1 bits of
/// the entropy; `ans-lanes` and `ans-lanes-esc` at 8 bits and their default segment), `ans-warp-rows` forced onto
/// the 7-bit register-table path, and the encoder's own choice (`EncodeOptions::auto(0.1)`:
/// the layout it picks is the one reported; never larger than the int8 matrix). Fields:
/// layout (the preferred one for `auto`), forced precision, layout budget, name.
pub const VARIANTS: [(Layout, Option<u32>, Option<f64>, &str); 6] = [
    (Layout::WarpRows, None, None, "rows"),
    (Layout::WarpStripes, None, None, "stripes"),
    (Layout::WarpLanes, None, None, "lanes"),
    (Layout::WarpLanesEsc, None, None, "lanes-esc"),
    (Layout::WarpRows, Some(7), None, "rows-p7"),
    (Layout::WarpRows, None, Some(0.1), "auto"),
];

/// Errors of loading a model's weights.
#[derive(Debug, thiserror::Error)]
pub enum WeightsError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid safetensors file.
    #[error("{path} is not a valid safetensors file: {source}")]
    Format {
        /// The file.
        path: String,
        /// The parser's error.
        #[source]
        source: safetensors::SafeTensorError,
    },
    /// A weight is NaN or infinite.
    #[error("tensor {tensor}: weight {index} (row {row}, column {col}) is not finite ({value})")]
    NonFinite {
        /// The tensor's name.
        tensor: String,
        /// Flat index of the first non-finite weight.
        index: usize,
        /// Its row.
        row: usize,
        /// Its column.
        col: usize,
        /// Its value.
        value: f32,
    },
}

/// A 2-D floating-point tensor of a model, converted to `f32`, row-major.
#[derive(Clone, Debug)]
pub struct Tensor2d {
    /// The tensor's name in the file.
    pub name: String,
    /// Its dtype in the file (`F32`, `F16`, `BF16`, `F64`).
    pub dtype: String,
    /// Rows (the first dimension).
    pub rows: usize,
    /// Columns (the second dimension).
    pub cols: usize,
    /// `rows * cols` weights, row-major.
    pub data: Vec<f32>,
}

/// A tensor of the file that is not analysed, and why.
#[derive(Clone, Debug, Serialize)]
pub struct SkippedTensor {
    /// The tensor's name.
    pub name: String,
    /// Its dtype.
    pub dtype: String,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Why it is skipped: `not a float`, `not 2-D` or `empty`.
    pub reason: String,
}

/// The 2-D float tensors of a model and the tensors left out.
#[derive(Clone, Debug)]
pub struct Weights {
    /// The 2-D float tensors, in natural name order (`layer.2` before `layer.10`).
    pub tensors: Vec<Tensor2d>,
    /// Every other tensor (1-D biases and LayerNorms, integer buffers, ...), in name order.
    pub skipped: Vec<SkippedTensor>,
}

/// Reads a safetensors file ([`from_bytes`]).
///
/// # Errors
/// [`WeightsError::Io`] when the file cannot be read, else as [`from_bytes`].
pub fn load(path: &Path) -> Result<Weights, WeightsError> {
    let bytes = std::fs::read(path).map_err(|source| WeightsError::Io {
        path: path.display().to_string(),
        source,
    })?;
    from_bytes(&bytes, &path.display().to_string())
}

/// Parses a safetensors file held in memory (`source` names it in errors): keeps its
/// non-empty 2-D `F32`, `F16`, `BF16` and `F64` tensors, converted to `f32`, and lists the
/// others.
///
/// # Errors
/// [`WeightsError::Format`] for a malformed file, [`WeightsError::NonFinite`] for a NaN or
/// infinite weight in a kept tensor.
pub fn from_bytes(bytes: &[u8], source: &str) -> Result<Weights, WeightsError> {
    let file = SafeTensors::deserialize(bytes).map_err(|e| WeightsError::Format {
        path: source.to_owned(),
        source: e,
    })?;
    let mut views = file.tensors();
    views.sort_by(|a, b| natural_cmp(&a.0, &b.0));
    let mut weights = Weights {
        tensors: Vec::new(),
        skipped: Vec::new(),
    };
    for (name, view) in views {
        let dtype = view.dtype();
        let shape = view.shape().to_vec();
        let skip = |reason: &str| SkippedTensor {
            name: name.clone(),
            dtype: format!("{dtype:?}"),
            shape: shape.clone(),
            reason: reason.to_owned(),
        };
        let Some(data) = to_f32(dtype, view.data()) else {
            weights.skipped.push(skip("not a float"));
            continue;
        };
        let &[rows, cols] = shape.as_slice() else {
            weights.skipped.push(skip("not 2-D"));
            continue;
        };
        if rows == 0 || cols == 0 {
            weights.skipped.push(skip("empty"));
            continue;
        }
        if let Some(index) = data.iter().position(|w| !w.is_finite()) {
            return Err(WeightsError::NonFinite {
                tensor: name,
                index,
                row: index / cols.max(1),
                col: index % cols.max(1),
                value: data[index],
            });
        }
        weights.tensors.push(Tensor2d {
            name,
            dtype: format!("{dtype:?}"),
            rows,
            cols,
            data,
        });
    }
    Ok(weights)
}

/// Little-endian `F32`, `F16`, `BF16` or `F64` data as `f32`; `None` for any other dtype.
fn to_f32(dtype: Dtype, data: &[u8]) -> Option<Vec<f32>> {
    let v = match dtype {
        Dtype::F32 => data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        Dtype::F16 => data
            .chunks_exact(2)
            .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        Dtype::BF16 => data
            .chunks_exact(2)
            .map(|b| bf16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        Dtype::F64 => data
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")) as f32)
            .collect(),
        _ => return None,
    };
    Some(v)
}

/// Orders names with their digit runs compared as numbers (`layer.2` < `layer.10`).
fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    natural_key(a).cmp(&natural_key(b)).then_with(|| a.cmp(b))
}

/// A name's runs: a digit run as (its length without leading zeros, its digits), which orders
/// like the number, a text run as (0, "", the text).
fn natural_key(s: &str) -> Vec<(usize, &str, &str)> {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=bytes.len() {
        if i == bytes.len() || bytes[i].is_ascii_digit() != bytes[start].is_ascii_digit() {
            let run = &s[start..i];
            if bytes[start].is_ascii_digit() {
                let digits = run.trim_start_matches('0');
                out.push((digits.len(), digits, ""));
            } else {
                out.push((0, "", run));
            }
            start = i;
        }
    }
    out
}

/// A matrix int8-quantized per row: `w[r][c] ~ scales[r] * q[r][c]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Int8Rows {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// `rows * cols` values in `-127..=127`, row-major.
    pub q: Vec<i8>,
    /// One scale per row: `absmax / 127`, or 1 for an all-zero row.
    pub scales: Vec<f32>,
}

impl Int8Rows {
    /// The dequantized matrix, `scales[r] * q[r][c]`.
    pub fn dequantize(&self) -> Vec<f32> {
        self.q
            .chunks_exact(self.cols)
            .zip(&self.scales)
            .flat_map(|(row, &s)| row.iter().map(move |&q| s * f32::from(q)))
            .collect()
    }
}

/// Symmetric per-row absmax int8 quantization: `scale = absmax / 127` (1 for an all-zero
/// row), `q = round_half_even(w / scale)` clamped to `-127..=127`.
pub fn quantize_int8_rows(t: &Tensor2d) -> Int8Rows {
    let mut q = Vec::with_capacity(t.data.len());
    let mut scales = Vec::with_capacity(t.rows);
    for row in t.data.chunks_exact(t.cols.max(1)).take(t.rows) {
        let absmax = row.iter().fold(0.0f32, |m, w| m.max(w.abs()));
        let scale = if absmax == 0.0 { 1.0 } else { absmax / 127.0 };
        scales.push(scale);
        q.extend(
            row.iter()
                .map(|&w| (w / scale).round_ties_even().clamp(-127.0, 127.0) as i8),
        );
    }
    Int8Rows {
        rows: t.rows,
        cols: t.cols,
        q,
        scales,
    }
}

/// `(||W - s q||^2, ||W||^2)`, accumulated in `f64`.
pub fn quantization_error(t: &Tensor2d, qt: &Int8Rows) -> (f64, f64) {
    let (mut err, mut norm) = (0.0f64, 0.0f64);
    for ((row, qrow), &s) in t
        .data
        .chunks_exact(t.cols.max(1))
        .zip(qt.q.chunks_exact(qt.cols.max(1)))
        .zip(&qt.scales)
    {
        for (&w, &q) in row.iter().zip(qrow) {
            let d = f64::from(w) - f64::from(s * f32::from(q));
            err += d * d;
            norm += f64::from(w) * f64::from(w);
        }
    }
    (err, norm)
}

fn ratio(err_sq: f64, norm_sq: f64) -> f64 {
    if norm_sq == 0.0 {
        0.0
    } else {
        (err_sq / norm_sq).sqrt()
    }
}

/// One encoding of a tensor, per real element.
#[derive(Clone, Debug, Serialize)]
pub struct VariantSizes {
    /// `rows`, `stripes` or `rows-p7` ([`VARIANTS`]).
    pub variant: String,
    /// The layout's name (`ans-warp-rows`, `ans-warp-stripes`).
    pub layout: String,
    /// Model precision chosen (or forced), bits.
    pub precision: u32,
    /// Cross-entropy of the elements under the quantized model, bits per element.
    pub cross_entropy_bits: f64,
    /// Information the stream carries (payload plus the flushed states' content), bits per
    /// element.
    pub coded_bits: f64,
    /// Emitted data words, bits per element.
    pub payload_bits: f64,
    /// Flushed coder states, bits per element.
    pub state_bits: f64,
    /// Zero padding of the streams, bits per element.
    pub padding_bits: f64,
    /// Frequency table, offsets and header, bits per element.
    pub table_offset_header_bits: f64,
    /// The whole container, bits per element.
    pub total_bits: f64,
    /// The whole container, bytes.
    pub total_bytes: usize,
    /// Emitted data words, bytes.
    pub payload_bytes: usize,
}

impl VariantSizes {
    fn new(variant: &str, layout: Layout, s: &EntropyReport) -> Self {
        Self {
            variant: variant.to_owned(),
            layout: layout.name().to_owned(),
            precision: s.precision,
            cross_entropy_bits: s.cross_entropy_bits,
            coded_bits: s.coded_bits,
            payload_bits: s.payload_bits_per_element(),
            state_bits: s.per_element(s.flushed_state_bytes),
            padding_bits: s.per_element(s.padding_bytes),
            table_offset_header_bits: s
                .per_element(s.table_bytes + s.offset_bytes + s.header_bytes),
            total_bits: s.bits_per_element(),
            total_bytes: s.total_bytes(),
            payload_bytes: s.payload_bytes,
        }
    }
}

/// A variant that cannot encode a tensor: a forced precision with fewer table slots than the
/// tensor has distinct values (`rows-p7` on a tensor with more than 128 int8 values).
#[derive(Clone, Debug, Serialize)]
pub struct NotEncoded {
    /// The variant.
    pub variant: String,
    /// The encoder's error.
    pub reason: String,
}

/// One 2-D tensor: its quantization error and its compressed sizes.
#[derive(Clone, Debug, Serialize)]
pub struct TensorRow {
    /// The tensor's name.
    pub name: String,
    /// Its dtype in the file.
    pub dtype: String,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// `||W - s q||_F / ||W||_F` of the int8 quantization.
    pub int8_rel_frobenius: f64,
    /// Distinct int8 values (at most 255).
    pub distinct_values: usize,
    /// Empirical entropy of the int8 values, bits per element.
    pub entropy_bits: f64,
    /// The per-row f32 scales, bits per element (not part of the ANS container).
    pub scale_bits: f64,
    /// The [`VARIANTS`] that encoded the tensor, in that order.
    pub variants: Vec<VariantSizes>,
    /// The [`VARIANTS`] that could not.
    pub not_encoded: Vec<NotEncoded>,
}

impl TensorRow {
    /// The sizes of one variant, if it encoded the tensor.
    pub fn variant(&self, name: &str) -> Option<&VariantSizes> {
        self.variants.iter().find(|v| v.variant == name)
    }
}

/// Element-weighted figures over several tensors, per variant (over the tensors it encoded).
#[derive(Clone, Debug, Serialize)]
pub struct VariantAggregate {
    /// The variant.
    pub variant: String,
    /// Tensors it encoded.
    pub tensors: usize,
    /// Their elements.
    pub elements: usize,
    /// Element-weighted mean of their entropies, bits per element.
    pub entropy_bits: f64,
    /// Element-weighted mean cross-entropy, bits per element.
    pub cross_entropy_bits: f64,
    /// Element-weighted mean of what the streams carry (payload plus the flushed states'
    /// content), bits per element.
    pub coded_bits: f64,
    /// Payload bytes of all tensors over their elements, bits per element.
    pub payload_bits: f64,
    /// Container bytes of all tensors over their elements, bits per element.
    pub total_bits: f64,
    /// Container bytes of all tensors.
    pub total_bytes: usize,
}

/// Element-weighted figures over several tensors.
#[derive(Clone, Debug, Serialize)]
pub struct Aggregate {
    /// Which tensors: `all` or `without embeddings`.
    pub what: String,
    /// Tensors.
    pub tensors: usize,
    /// Elements.
    pub elements: usize,
    /// Element-weighted mean of the tensors' entropies (each tensor has its own model),
    /// bits per element.
    pub entropy_bits: f64,
    /// `sqrt(sum ||W - s q||^2 / sum ||W||^2)`.
    pub int8_rel_frobenius: f64,
    /// The per-row f32 scales, bits per element.
    pub scale_bits: f64,
    /// One entry per [`VARIANTS`] entry that encoded at least one tensor, in that order.
    pub variants: Vec<VariantAggregate>,
}

/// What the weights suite measured.
#[derive(Clone, Debug, Serialize)]
pub struct WeightsReport {
    /// The safetensors file.
    pub model: String,
    /// Its size, bytes.
    pub file_bytes: u64,
    /// Every 2-D float tensor.
    pub tensors: Vec<TensorRow>,
    /// The tensors left out.
    pub skipped: Vec<SkippedTensor>,
    /// Over every analysed tensor.
    pub aggregate: Aggregate,
    /// Over the tensors whose name does not contain `embeddings` (the matrices a GEMV reads);
    /// `None` unless some tensors are embeddings and some are not.
    pub aggregate_without_embeddings: Option<Aggregate>,
    /// One quantization step per row, chosen for a target error
    /// (`ans_codec::quantize_rows_to_error`), then `EncodeOptions::auto(0.1)`: one row per
    /// target of [`STEP_TARGETS`], over the tensors without embeddings (all when none is one).
    pub step_quantized: Vec<StepRow>,
    /// Wall time of the analysis (load excluded), seconds.
    pub seconds: f64,
}

/// The target relative errors of the per-row-step quantizer rows: about per-row absmax int8's
/// error (0.009 on all-MiniLM-L6-v2), then the range of the 3-5 bit formats (RTN-4 g128 is
/// about 0.1, data-free SpQR 0.14).
pub const STEP_TARGETS: [f64; 5] = [0.009, 0.02, 0.05, 0.1, 0.14];

/// The per-row-step quantizer at one target error, over a set of tensors.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepRow {
    /// The target relative error per tensor.
    pub target: f64,
    /// Tensors.
    pub tensors: usize,
    /// Their elements.
    pub elements: usize,
    /// Relative Frobenius error over all of them.
    pub rel_error: f64,
    /// Empirical entropy of the int8 values, bits per element (weighted by elements).
    pub entropy_bits: f64,
    /// Container bits per element plus the f32 step of every row, as the encoder's choice of
    /// layout stores them.
    pub bits_per_element: f64,
    /// Tensors coded in `ans-warp-rows`.
    pub rows_layout: usize,
    /// Tensors coded in `ans-warp-stripes`.
    pub stripes_layout: usize,
    /// Tensors coded in `ans-lanes`.
    pub lanes_layout: usize,
    /// Tensors the encoder refused as incompressible (kept as int8: 8 bits counted).
    pub incompressible: usize,
    /// Values clipped at `±127 step`.
    pub clipped: usize,
}

/// [`StepRow`]s of `tensors` for every target of [`STEP_TARGETS`]; each encoding is checked
/// to decode back to its int8 values.
///
/// # Errors
/// An encoding error, [`BenchError::Mismatch`] for an encoding that does not round-trip.
pub fn step_rows(tensors: &[&Tensor2d]) -> Result<Vec<StepRow>, BenchError> {
    let mut out = Vec::new();
    for &target in &STEP_TARGETS {
        let (mut err_sq, mut norm_sq, mut ent, mut bits) = (0f64, 0f64, 0f64, 0f64);
        let (mut elements, mut rows_l, mut stripes_l, mut lanes_l) = (0, 0, 0, 0);
        let (mut inc, mut clipped) = (0, 0);
        for t in tensors {
            let q = ans_codec::quantize_rows_to_error(&t.data, t.rows, t.cols, target)?;
            let n = t.data.len();
            let norm: f64 = t.data.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
            err_sq += q.rel_error * q.rel_error * norm;
            norm_sq += norm;
            clipped += q.clipped;
            elements += n;
            let h = ans_codec::model::entropy_bits(&ans_codec::model::counts(&q.q));
            ent += h;
            match ans_codec::encode(&q.q, t.rows, t.cols, &EncodeOptions::auto(0.1)) {
                Ok(m) => {
                    if m.decode()? != q.q {
                        return Err(BenchError::Mismatch {
                            what: format!("{} (step for {target})", t.name),
                            detail: "the encoding does not decode to the int8 values".into(),
                        });
                    }
                    bits += m.size_breakdown().container_bytes as f64 * 8.0 + 32.0 * t.rows as f64;
                    match m.layout() {
                        Layout::WarpRows => rows_l += 1,
                        Layout::WarpStripes => stripes_l += 1,
                        Layout::WarpLanes | Layout::WarpLanesEsc => lanes_l += 1,
                    }
                }
                Err(AnsError::Incompressible { .. }) => {
                    inc += 1;
                    bits += n as f64 * 8.0 + 32.0 * t.rows as f64;
                }
                Err(e) => return Err(e.into()),
            }
        }
        let per = |b: f64| b / elements.max(1) as f64;
        out.push(StepRow {
            target,
            tensors: tensors.len(),
            elements,
            rel_error: ratio(err_sq, norm_sq),
            entropy_bits: per(ent),
            bits_per_element: per(bits),
            rows_layout: rows_l,
            stripes_layout: stripes_l,
            lanes_layout: lanes_l,
            incompressible: inc,
            clipped,
        });
    }
    Ok(out)
}

/// One line per [`StepRow`].
pub fn step_line(r: &StepRow) -> String {
    format!(
        "steps for error <= {:.3} ({} tensors, {} elements): rel. error {:.4}, entropy {:.3}, \
         stored {:.3} bits/element with the row steps (lanes {}, rows {}, stripes {}, incompressible \
         {}), \
         clipped {}",
        r.target,
        r.tensors,
        r.elements,
        r.rel_error,
        r.entropy_bits,
        r.bits_per_element,
        r.lanes_layout,
        r.rows_layout,
        r.stripes_layout,
        r.incompressible,
        r.clipped
    )
}

/// Distinct values of `q`.
fn distinct(q: &[i8]) -> usize {
    let mut seen = [false; 256];
    for &v in q {
        seen[v as u8 as usize] = true;
    }
    seen.iter().filter(|&&s| s).count()
}

/// Per-tensor squared quantization error and norm, kept for the aggregates.
struct Acc {
    err_sq: f64,
    norm_sq: f64,
}

fn aggregate(what: &str, rows: &[(&TensorRow, &Acc)]) -> Aggregate {
    let elements_of = |r: &TensorRow| r.rows * r.cols;
    let elements: usize = rows.iter().map(|(r, _)| elements_of(r)).sum();
    let n = elements.max(1) as f64;
    let variants = VARIANTS
        .iter()
        .filter_map(|&(_, _, _, name)| {
            let with: Vec<(&TensorRow, &VariantSizes)> = rows
                .iter()
                .filter_map(|(r, _)| Some((*r, r.variant(name)?)))
                .collect();
            let elements: usize = with.iter().map(|(r, _)| elements_of(r)).sum();
            let m = elements as f64;
            let weighted = |f: &dyn Fn(&TensorRow, &VariantSizes) -> f64| {
                with.iter()
                    .map(|&(r, v)| f(r, v) * elements_of(r) as f64)
                    .sum::<f64>()
                    / m
            };
            let total_bytes: usize = with.iter().map(|(_, v)| v.total_bytes).sum();
            let payload: usize = with.iter().map(|(_, v)| v.payload_bytes).sum();
            (elements > 0).then(|| VariantAggregate {
                variant: name.to_owned(),
                tensors: with.len(),
                elements,
                entropy_bits: weighted(&|r, _| r.entropy_bits),
                cross_entropy_bits: weighted(&|_, v| v.cross_entropy_bits),
                coded_bits: weighted(&|_, v| v.coded_bits),
                payload_bits: payload as f64 * 8.0 / m,
                total_bits: total_bytes as f64 * 8.0 / m,
                total_bytes,
            })
        })
        .collect();
    Aggregate {
        what: what.to_owned(),
        tensors: rows.len(),
        elements,
        entropy_bits: rows
            .iter()
            .map(|(r, _)| r.entropy_bits * elements_of(r) as f64)
            .sum::<f64>()
            / n,
        int8_rel_frobenius: ratio(
            rows.iter().map(|(_, a)| a.err_sq).sum(),
            rows.iter().map(|(_, a)| a.norm_sq).sum(),
        ),
        scale_bits: rows.iter().map(|(r, _)| r.rows).sum::<usize>() as f64 * 32.0 / n,
        variants,
    }
}

/// Quantizes every tensor of `weights`, encodes it in every [`VARIANTS`] entry, checks that
/// each encoding decodes back to the int8 values and reports the sizes; `progress` gets a
/// line per tensor.
///
/// # Errors
/// An encoding error, or [`BenchError::Mismatch`] when an encoding does not round-trip.
pub fn analyse(
    weights: &Weights,
    model: &str,
    file_bytes: u64,
    mut progress: impl FnMut(&str),
) -> Result<WeightsReport, BenchError> {
    let start = Instant::now();
    let mut rows = Vec::with_capacity(weights.tensors.len());
    let mut accs = Vec::with_capacity(weights.tensors.len());
    for t in &weights.tensors {
        let qt = quantize_int8_rows(t);
        let (err_sq, norm_sq) = quantization_error(t, &qt);
        let mut variants = Vec::with_capacity(VARIANTS.len());
        let mut not_encoded = Vec::new();
        let mut entropy_bits = 0.0;
        for &(layout, precision, budget, name) in &VARIANTS {
            let opts = EncodeOptions {
                layout,
                precision,
                layout_budget_bits: budget,
                ..EncodeOptions::default()
            };
            let m: AnsMatrix = match ans_codec::encode(&qt.q, t.rows, t.cols, &opts) {
                Ok(m) => m,
                Err(e @ AnsError::Incompressible { .. }) if budget.is_some() => {
                    not_encoded.push(NotEncoded {
                        variant: name.to_owned(),
                        reason: e.to_string(),
                    });
                    continue;
                }
                Err(e @ AnsError::TooManyValues { .. }) if precision.is_some() => {
                    not_encoded.push(NotEncoded {
                        variant: name.to_owned(),
                        reason: e.to_string(),
                    });
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            if m.decode()? != qt.q {
                return Err(BenchError::Mismatch {
                    what: format!("{} ({name})", t.name),
                    detail: "the encoding does not decode to the int8 values".into(),
                });
            }
            let s = m.entropy_report();
            entropy_bits = s.entropy_bits;
            variants.push(VariantSizes::new(name, m.layout(), &s));
        }
        let row = TensorRow {
            name: t.name.clone(),
            dtype: t.dtype.clone(),
            rows: t.rows,
            cols: t.cols,
            int8_rel_frobenius: ratio(err_sq, norm_sq),
            distinct_values: distinct(&qt.q),
            entropy_bits,
            scale_bits: 32.0 / t.cols.max(1) as f64,
            variants,
            not_encoded,
        };
        let mut line = format!(
            "{} {}x{}: entropy {:.3}, total bits/element",
            row.name, row.rows, row.cols, row.entropy_bits
        );
        for v in &row.variants {
            line.push_str(&format!(" {} {:.3}", v.variant, v.total_bits));
        }
        progress(&line);
        rows.push(row);
        accs.push(Acc { err_sq, norm_sq });
    }
    let all: Vec<(&TensorRow, &Acc)> = rows.iter().zip(&accs).collect();
    let linear: Vec<(&TensorRow, &Acc)> = all
        .iter()
        .copied()
        .filter(|(r, _)| !r.name.contains("embeddings"))
        .collect();
    let aggregate_all = aggregate("all", &all);
    let aggregate_without_embeddings = (!linear.is_empty() && linear.len() < all.len())
        .then(|| aggregate("without embeddings", &linear));
    let gemv: Vec<&Tensor2d> = weights
        .tensors
        .iter()
        .filter(|t| !t.name.contains("embeddings"))
        .collect();
    let step_quantized = if gemv.is_empty() {
        step_rows(&weights.tensors.iter().collect::<Vec<_>>())?
    } else {
        step_rows(&gemv)?
    };
    for r in &step_quantized {
        progress(&step_line(r));
    }
    Ok(WeightsReport {
        model: model.to_owned(),
        file_bytes,
        tensors: rows,
        skipped: weights.skipped.clone(),
        aggregate: aggregate_all,
        aggregate_without_embeddings,
        step_quantized,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// The suite: `Ok(None)` (after printing one line saying how to fetch it) when `path` does
/// not exist, else the report of [`analyse`] on the file.
///
/// # Errors
/// As [`load`] and [`analyse`].
pub fn run(path: &Path, progress: impl FnMut(&str)) -> Result<Option<WeightsReport>, BenchError> {
    if !path.exists() {
        return Ok(None);
    }
    let weights = load(path)?;
    let file_bytes = std::fs::metadata(path).map_or(0, |m| m.len());
    analyse(&weights, &path.display().to_string(), file_bytes, progress).map(Some)
}

/// The line printed when the model is missing.
pub fn missing_line(path: &Path) -> String {
    let fetch = if path == Path::new(DEFAULT_MODEL) {
        format!("`{FETCH_COMMAND}`")
    } else {
        format!("`{FETCH_COMMAND}` (it writes {DEFAULT_MODEL})")
    };
    format!(
        "weights suite skipped: {} not found; fetch all-MiniLM-L6-v2 with {fetch}",
        path.display()
    )
}

/// The per-tensor table and the aggregate lines: for each variant the precision, the
/// cross-entropy, the payload and the whole container in bits per element (`-` where the
/// variant cannot encode the tensor).
pub fn table(r: &WeightsReport) -> String {
    use std::fmt::Write as _;
    let width = r
        .tensors
        .iter()
        .map(|t| t.name.len())
        .max()
        .unwrap_or(0)
        .max("tensor".len());
    let mut s = String::new();
    let _ = write!(
        s,
        "{:<width$} {:>10} {:>7} {:>3} {:>6}",
        "tensor", "shape", "relerr", "n", "H"
    );
    for &(_, _, _, name) in &VARIANTS {
        let _ = write!(
            s,
            " | {:<7} {:>6} {:>6} {:>6}",
            name, "x-ent", "pay", "total"
        );
    }
    s.push('\n');
    for t in &r.tensors {
        let _ = write!(
            s,
            "{:<width$} {:>10} {:>7.5} {:>3} {:>6.3}",
            t.name,
            format!("{}x{}", t.rows, t.cols),
            t.int8_rel_frobenius,
            t.distinct_values,
            t.entropy_bits,
        );
        for &(_, _, _, name) in &VARIANTS {
            match t.variant(name) {
                Some(v) => {
                    let _ = write!(
                        s,
                        " | {:<7} {:>6.3} {:>6.3} {:>6.3}",
                        format!("P{}", v.precision),
                        v.cross_entropy_bits,
                        v.payload_bits,
                        v.total_bits
                    );
                }
                None => {
                    let _ = write!(s, " | {:<7} {:>6} {:>6} {:>6}", "-", "-", "-", "-");
                }
            }
        }
        s.push('\n');
    }
    for a in std::iter::once(&r.aggregate).chain(&r.aggregate_without_embeddings) {
        let _ = writeln!(s, "{}", aggregate_line(a));
    }
    for q in &r.step_quantized {
        let _ = writeln!(s, "{}", step_line(q));
    }
    let _ = writeln!(s, "{}", skipped_line(&r.skipped));
    s
}

/// `skipped N tensors: A not 2-D, B not a float (names)`, naming the tensors of a reason
/// only when there are at most 4.
pub fn skipped_line(skipped: &[SkippedTensor]) -> String {
    let mut reasons: Vec<&str> = skipped.iter().map(|k| k.reason.as_str()).collect();
    reasons.sort_unstable();
    reasons.dedup();
    let parts: Vec<String> = reasons
        .iter()
        .map(|&reason| {
            let of: Vec<&SkippedTensor> = skipped.iter().filter(|k| k.reason == reason).collect();
            if of.len() <= 4 {
                let names: Vec<String> = of
                    .iter()
                    .map(|k| format!("{} {} {:?}", k.name, k.dtype, k.shape))
                    .collect();
                format!("{} {reason} ({})", of.len(), names.join(", "))
            } else {
                format!("{} {reason}", of.len())
            }
        })
        .collect();
    format!("skipped {} tensors: {}", skipped.len(), parts.join(", "))
}

/// One line: an aggregate's entropy and bits per element per variant.
pub fn aggregate_line(a: &Aggregate) -> String {
    let mut s = format!(
        "aggregate, {} ({} tensors, {} elements): int8 rel. Frobenius error {:.5}, entropy {:.4} \
         bits/element (+{:.4} for the f32 row scales)",
        a.what, a.tensors, a.elements, a.int8_rel_frobenius, a.entropy_bits, a.scale_bits
    );
    for v in &a.variants {
        s.push_str(&format!(
            "; {}: x-ent {:.4} coded {:.4} payload {:.4} total {:.4}",
            v.variant, v.cross_entropy_bits, v.coded_bits, v.payload_bits, v.total_bits
        ));
        if v.tensors < a.tensors {
            s.push_str(&format!(
                " (only {} tensors, {} elements, entropy {:.4})",
                v.tensors, v.elements, v.entropy_bits
            ));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use safetensors::tensor::TensorView;

    fn file(tensors: &[(&str, Vec<usize>, &[f32])]) -> Vec<u8> {
        let bytes: Vec<Vec<u8>> = tensors
            .iter()
            .map(|(_, _, d)| d.iter().flat_map(|w| w.to_le_bytes()).collect())
            .collect();
        let views = tensors.iter().zip(&bytes).map(|((name, shape, _), b)| {
            (
                (*name).to_owned(),
                TensorView::new(Dtype::F32, shape.clone(), b).expect("view"),
            )
        });
        safetensors::serialize(views, None).expect("serialize")
    }

    fn matrix(rows: usize, cols: usize) -> Vec<f32> {
        // Roughly Gaussian-looking weights of varying row scales, plus an all-zero row.
        (0..rows * cols)
            .map(|i| {
                let (r, c) = (i / cols, i % cols);
                if r == 3 {
                    return 0.0;
                }
                let x =
                    ((i as f32 * 0.618_034).fract() - 0.5) + ((i as f32 * 0.414_213).fract() - 0.5);
                x * 0.02 * (1.0 + r as f32 * 0.1) + if c == 7 { 0.3 } else { 0.0 }
            })
            .collect()
    }

    #[test]
    fn analyses_a_small_file() {
        let (rows, cols) = (40, 200);
        let w = matrix(rows, cols);
        let bias = [0.5f32; 8];
        let bytes = file(&[
            ("layer.10.weight", vec![rows, cols], &w),
            ("layer.10.bias", vec![8], &bias),
        ]);
        let weights = from_bytes(&bytes, "test").expect("loads");
        assert_eq!(weights.tensors.len(), 1);
        assert_eq!(weights.skipped.len(), 1);
        assert_eq!(weights.skipped[0].name, "layer.10.bias");
        assert_eq!(weights.skipped[0].reason, "not 2-D");
        let t = &weights.tensors[0];
        assert_eq!(
            (t.rows, t.cols, t.name.as_str()),
            (rows, cols, "layer.10.weight")
        );
        assert_eq!(t.data, w);

        let qt = quantize_int8_rows(t);
        assert_eq!(qt.scales[3], 1.0, "an all-zero row gets scale 1");
        assert!(qt.q[3 * cols..4 * cols].iter().all(|&q| q == 0));
        assert!(qt.q.iter().all(|&q| q >= -127));
        for (r, row) in qt.q.chunks(cols).enumerate() {
            if r != 3 {
                assert_eq!(row.iter().map(|q| q.unsigned_abs()).max(), Some(127));
            }
        }

        let report = analyse(&weights, "test", bytes.len() as u64, |_| {}).expect("analyses");
        assert_eq!(report.tensors.len(), 1);
        assert_eq!(report.skipped.len(), 1);
        let row = &report.tensors[0];
        assert_eq!((row.rows, row.cols), (rows, cols));
        assert!(
            row.int8_rel_frobenius > 0.0 && row.int8_rel_frobenius < 0.05,
            "{}",
            row.int8_rel_frobenius
        );
        // The outlier column leaves few distinct values: every variant encodes it.
        assert!(row.distinct_values <= 128, "{}", row.distinct_values);
        assert_eq!(row.variants.len(), VARIANTS.len());
        assert!(row.not_encoded.is_empty());
        assert_eq!(row.variant("rows-p7").map(|v| v.precision), Some(7));
        for v in &row.variants {
            assert!(v.cross_entropy_bits >= row.entropy_bits - 1e-9, "{v:?}");
            // The payload alone can be below the entropy (the flushed states carry up to 32
            // bits per coder); what the stream carries cannot, nor can the container.
            assert!(
                v.coded_bits >= row.entropy_bits - 0.05,
                "{v:?} vs {}",
                row.entropy_bits
            );
            assert!(v.total_bits >= v.coded_bits, "{v:?}");
            assert!(v.total_bits > v.payload_bits, "{v:?}");
        }
        assert_eq!(report.aggregate.elements, rows * cols);
        assert!((report.aggregate.entropy_bits - row.entropy_bits).abs() < 1e-12);
        assert!((report.aggregate.int8_rel_frobenius - row.int8_rel_frobenius).abs() < 1e-12);
        assert!(report.aggregate_without_embeddings.is_none());
        let text = table(&report);
        assert!(
            text.contains("layer.10.weight") && text.contains("skipped 1"),
            "{text}"
        );
        serde_json::to_string(&report).expect("serializes");
    }

    #[test]
    fn a_forced_7_bit_model_skips_a_tensor_with_255_values() {
        let (rows, cols) = (8, 256);
        let w: Vec<f32> = (0..rows * cols)
            .map(|i| (i % cols) as f32 / (cols - 1) as f32 * 2.0 - 1.0)
            .collect();
        let bytes = file(&[
            ("wide", vec![rows, cols], &w),
            ("narrow", vec![2, 4], &[1.0; 8]),
        ]);
        let weights = from_bytes(&bytes, "test").expect("loads");
        let report = analyse(&weights, "test", 0, |_| {}).expect("analyses");
        let wide = report
            .tensors
            .iter()
            .find(|t| t.name == "wide")
            .expect("wide");
        assert_eq!(wide.distinct_values, 255);
        assert_eq!(wide.variants.len(), VARIANTS.len() - 1);
        assert_eq!(wide.not_encoded[0].variant, "rows-p7");
        assert!(wide.not_encoded[0].reason.contains("255 distinct values"));
        let p7 = report
            .aggregate
            .variants
            .iter()
            .find(|v| v.variant == "rows-p7")
            .expect("p7 encoded the narrow tensor");
        assert_eq!((p7.tensors, p7.elements), (1, 8));
        assert_eq!(report.aggregate.variants[0].elements, rows * cols + 8);
        assert!(table(&report).contains("only 1 tensors"));
    }

    #[test]
    fn a_nan_weight_is_an_error_naming_the_tensor() {
        let mut w = matrix(4, 8);
        w[13] = f32::NAN;
        let bytes = file(&[("bad.weight", vec![4, 8], &w)]);
        let err = from_bytes(&bytes, "test").expect_err("NaN");
        assert!(
            matches!(err, WeightsError::NonFinite { ref tensor, index: 13, row: 1, col: 5, .. } if tensor == "bad.weight"),
            "{err:?}"
        );
        assert!(err.to_string().contains("bad.weight"), "{err}");
    }

    #[test]
    fn half_precision_and_integer_tensors() {
        let h: Vec<u8> = [1.5f32, -2.0, 0.25, 4.0]
            .iter()
            .flat_map(|&x| f16::from_f32(x).to_le_bytes())
            .collect();
        let b: Vec<u8> = [1.5f32, -2.0, 0.25, 4.0]
            .iter()
            .flat_map(|&x| bf16::from_f32(x).to_le_bytes())
            .collect();
        let ids: Vec<u8> = [0i64, 1].iter().flat_map(|x| x.to_le_bytes()).collect();
        let views = vec![
            (
                "h",
                TensorView::new(Dtype::F16, vec![2, 2], &h).expect("f16"),
            ),
            (
                "b",
                TensorView::new(Dtype::BF16, vec![2, 2], &b).expect("bf16"),
            ),
            (
                "ids",
                TensorView::new(Dtype::I64, vec![1, 2], &ids).expect("i64"),
            ),
            (
                "empty",
                TensorView::new(Dtype::F32, vec![0, 4], &[]).expect("empty"),
            ),
        ];
        let bytes = safetensors::serialize(views, None).expect("serialize");
        let w = from_bytes(&bytes, "test").expect("loads");
        assert_eq!(w.tensors.len(), 2);
        for t in &w.tensors {
            assert_eq!(t.data, [1.5, -2.0, 0.25, 4.0], "{}", t.name);
        }
        let reasons: Vec<(&str, &str)> = w
            .skipped
            .iter()
            .map(|k| (k.name.as_str(), k.reason.as_str()))
            .collect();
        assert_eq!(reasons, [("empty", "empty"), ("ids", "not a float")]);
        assert_eq!(
            skipped_line(&w.skipped),
            "skipped 2 tensors: 1 empty (empty F32 [0, 4]), 1 not a float (ids I64 [1, 2])"
        );
    }

    #[test]
    fn natural_order() {
        let mut v = vec!["l.10.w", "l.2.w", "l.1.w", "emb", "l.02.x"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["emb", "l.1.w", "l.2.w", "l.02.x", "l.10.w"]);
    }

    #[test]
    fn missing_model_is_not_an_error() {
        let p = Path::new("target/does-not-exist/model.safetensors");
        assert!(run(p, |_| {}).expect("not an error").is_none());
        assert!(missing_line(p).contains(FETCH_COMMAND));
    }
}
