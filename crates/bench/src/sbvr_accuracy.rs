//! SBVR accuracy on real weights (`docs/SBVR-ACCURACY.md`): every 2-D tensor of a safetensors
//! model encoded with SBVR at n = 2, 3, 4 bitvectors per group of 128 (default
//! `EncodeOptions` otherwise: a cache of at most 256 coefficient vectors, u8 indices), against
//! round-to-nearest (symmetric and asymmetric, groups of 128, `sbvr_format::rtn`) at 2, 3 and 4
//! bits and against SpQR's default (`spqr_format::quantize`). Reported per tensor and method:
//! the relative Frobenius error of the weights and of GEMV outputs, bits per weight, the cache
//! entries used and the encoding time.
//!
//! The inputs are those of the SpQR report ([`crate::spqr_accuracy::eval_inputs`]: the same
//! iid N(0, 1) and synthetic correlated vectors for the same tensor), so the two reports'
//! numbers are comparable. For SBVR two output errors are measured: the dequantized weights on
//! the unquantized fp16 inputs (`SbvrMatrix::reference_dequantized`), and the GPU's whole
//! arithmetic, inputs quantized to int8 per group of 128 (`SbvrMatrix::reference`); their
//! difference is the activation quantization's share. Runs on the CPU.

use std::path::Path;
use std::time::Instant;

use half::f16;
use sbvr_format::rtn::{
    bits_per_weight_rtn_asymmetric, bits_per_weight_rtn_symmetric, bits_per_weight_sbvr,
    rtn_asymmetric, rtn_symmetric,
};
use sbvr_format::{EncodeOptions, SbvrError, SbvrMatrix, encode};
use serde::Serialize;
use spqr_format::{QuantizeOptions, SpqrError, quantize};

use crate::spqr_accuracy::{EVAL_VECTORS, eval_inputs, exact_gemv, ratio, sq_err};
use crate::weights::{Tensor2d, Weights, WeightsError, load};

/// One compared method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// SBVR with this many bitvectors per group, default `EncodeOptions` otherwise.
    Sbvr(u32),
    /// Symmetric RTN at this many bits, groups of 128, an fp16 scale per group.
    RtnSym(u32),
    /// Asymmetric (min/max) RTN at this many bits, groups of 128, fp16 scale and zero.
    RtnAsym(u32),
    /// SpQR, `QuantizeOptions::default()` (3-bit 16 x 16 tiles, 1% fp16 outliers).
    Spqr,
}

impl Method {
    /// Its name in the tables.
    pub fn name(self) -> String {
        match self {
            Method::Sbvr(n) => format!("sbvr{n}"),
            Method::RtnSym(b) => format!("rtn-sym{b}"),
            Method::RtnAsym(b) => format!("rtn-asym{b}"),
            Method::Spqr => "spqr".to_owned(),
        }
    }

    /// What it is.
    pub fn describe(self) -> String {
        match self {
            Method::Sbvr(n) => format!(
                "SBVR, n = {n} bitvectors per group of 128, default EncodeOptions (at most \
                 256 cache entries, u8 indices)"
            ),
            Method::RtnSym(b) => {
                format!("symmetric RTN {b}-bit, groups of 128 along the row, fp16 scale")
            }
            Method::RtnAsym(b) => format!(
                "asymmetric (min/max) RTN {b}-bit, groups of 128 along the row, fp16 scale \
                 and zero"
            ),
            Method::Spqr => "SpQR default (QuantizeOptions::default(): 3-bit 16x16 tiles, \
                             3-bit statistics, 1% fp16 outliers; docs/SPQR-ACCURACY.md's `spqr`)"
                .to_owned(),
        }
    }
}

/// The methods, in table order.
pub const METHODS: [Method; 10] = [
    Method::Sbvr(2),
    Method::Sbvr(3),
    Method::Sbvr(4),
    Method::RtnSym(2),
    Method::RtnSym(3),
    Method::RtnSym(4),
    Method::RtnAsym(2),
    Method::RtnAsym(3),
    Method::RtnAsym(4),
    Method::Spqr,
];

/// Errors of the accuracy report.
#[derive(Debug, thiserror::Error)]
pub enum SbvrAccuracyError {
    /// The model could not be loaded.
    #[error(transparent)]
    Weights(#[from] WeightsError),
    /// SBVR encoding, RTN or a reference product failed.
    #[error("tensor {tensor}: {source}")]
    Sbvr {
        /// The tensor.
        tensor: String,
        /// The error.
        #[source]
        source: SbvrError,
    },
    /// SpQR quantization or its reference failed.
    #[error("tensor {tensor}: {source}")]
    Spqr {
        /// The tensor.
        tensor: String,
        /// The error.
        #[source]
        source: SpqrError,
    },
}

/// Indices of [`MethodResult`]'s squared-error sums.
const W: usize = 0;
const IID: usize = 1;
const COR: usize = 2;
const GPU_IID: usize = 3;
const GPU_COR: usize = 4;
const ACT_IID: usize = 5;
const ACT_COR: usize = 6;

/// One method on one tensor.
#[derive(Clone, Debug, Serialize)]
pub struct MethodResult {
    /// The method ([`Method::name`]).
    pub method: String,
    /// Bits per weight counting everything the representation needs: SBVR `n` code bits, one
    /// cache index per 128 weights (8 bits up to 256 entries) and the cache's fp16 values over
    /// the tensor's weights (`rtn::bits_per_weight_sbvr` with the entries used); RTN `bits` plus
    /// the fp16 scale (and zero) per 128 weights; SpQR every byte its kernel reads.
    pub bits_per_weight: f64,
    /// Bits per weight as stored for the GPU kernels (SBVR: `SbvrMatrix::bits_per_weight`, with
    /// the padding of groups to pairs of 128 columns and of rows to tiles of 16; the others: as
    /// `bits_per_weight`).
    pub stored_bits_per_weight: f64,
    /// Cache entries used (SBVR only).
    pub entries: Option<usize>,
    /// `||W - W'||_F / ||W||_F`.
    pub weight_rel_err: f64,
    /// `||W X - W' X||_F / ||W X||_F`, iid N(0, 1) inputs (fp16), `W' X` in f64.
    pub output_rel_err_iid: f64,
    /// The same, correlated inputs.
    pub output_rel_err_correlated: f64,
    /// `||W X - Y_gpu||_F / ||W X||_F`, iid inputs, `Y_gpu` the GPU's arithmetic: SBVR's
    /// `reference` (int8 inputs per group of 128), SpQR's `gemv_reference` (the same as
    /// `output_rel_err_iid`). `None` for RTN (no kernel).
    pub gpu_output_rel_err_iid: Option<f64>,
    /// The same, correlated inputs.
    pub gpu_output_rel_err_correlated: Option<f64>,
    /// SBVR: `||Y_gpu - W' X||_F / ||W X||_F`, the activation quantization's own error, iid
    /// inputs.
    pub activation_rel_err_iid: Option<f64>,
    /// The same, correlated inputs.
    pub activation_rel_err_correlated: Option<f64>,
    /// Seconds to encode (SBVR: `encode`, without the packing; RTN: the rounding; SpQR:
    /// `quantize`).
    pub encode_seconds: f64,
    /// Squared errors and norms for the aggregates: weights, outputs iid and correlated, GPU
    /// outputs iid and correlated, activation errors iid and correlated.
    #[serde(skip)]
    sums: [(f64, f64); 7],
}

/// One tensor.
#[derive(Clone, Debug, Serialize)]
pub struct TensorAccuracy {
    /// Its name.
    pub name: String,
    /// Its kind ([`tensor_kind`]).
    pub kind: String,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Every method, in [`METHODS`] order.
    pub methods: Vec<MethodResult>,
    /// Seconds spent on it.
    pub seconds: f64,
}

/// One method over a set of tensors: `sqrt(sum of squared errors / sum of squared norms)`,
/// bits per weight over all their weights.
#[derive(Clone, Debug, Serialize)]
pub struct MethodAggregate {
    /// The method.
    pub method: String,
    /// Bits per weight (as [`MethodResult::bits_per_weight`]).
    pub bits_per_weight: f64,
    /// Stored bits per weight.
    pub stored_bits_per_weight: f64,
    /// Fewest and most cache entries used by a tensor (SBVR only).
    pub entries_range: Option<(usize, usize)>,
    /// Relative Frobenius error of the weights.
    pub weight_rel_err: f64,
    /// Relative error of the outputs, iid N(0, 1) inputs.
    pub output_rel_err_iid: f64,
    /// Relative error of the outputs, correlated inputs.
    pub output_rel_err_correlated: f64,
    /// Relative error of the GPU's outputs, iid inputs.
    pub gpu_output_rel_err_iid: Option<f64>,
    /// Relative error of the GPU's outputs, correlated inputs.
    pub gpu_output_rel_err_correlated: Option<f64>,
    /// The activation quantization's own error, iid inputs.
    pub activation_rel_err_iid: Option<f64>,
    /// The same, correlated inputs.
    pub activation_rel_err_correlated: Option<f64>,
    /// Encoding seconds, summed.
    pub encode_seconds: f64,
}

/// SBVR at `n` bitvectors against RTN at `n` bits over a set of tensors.
#[derive(Clone, Debug, Serialize)]
pub struct Verdict {
    /// Bitvectors.
    pub n: u32,
    /// SBVR's bits per weight.
    pub sbvr_bits_per_weight: f64,
    /// SBVR's weight error.
    pub sbvr_weight_rel_err: f64,
    /// The RTN variant at `n` bits whose bits per weight are closest to SBVR's.
    pub closest_rtn: String,
    /// Its bits per weight.
    pub closest_rtn_bits_per_weight: f64,
    /// Its weight error.
    pub closest_rtn_weight_rel_err: f64,
    /// `sbvr_weight_rel_err <= closest_rtn_weight_rel_err`.
    pub meets_closest: bool,
    /// SBVR's weight error is at most both RTN variants' at `n` bits.
    pub meets_both: bool,
    /// Tensors on which SBVR's weight error is at most that of the RTN variant closest in bits
    /// on that tensor.
    pub tensors_meeting_closest: usize,
    /// Tensors on which it is at most both RTN variants'.
    pub tensors_meeting_both: usize,
}

/// The aggregate over a set of tensors.
#[derive(Clone, Debug, Serialize)]
pub struct AccuracyAggregate {
    /// Which tensors.
    pub what: String,
    /// How many.
    pub tensors: usize,
    /// Weights.
    pub elements: usize,
    /// Every method.
    pub methods: Vec<MethodAggregate>,
    /// SBVR n = 2, 3, 4 against RTN at the same bits.
    pub verdicts: Vec<Verdict>,
}

/// The report.
#[derive(Clone, Debug, Serialize)]
pub struct SbvrAccuracyReport {
    /// The model file.
    pub model: String,
    /// The methods: name and description.
    pub methods: Vec<(String, String)>,
    /// How the inputs were made.
    pub inputs: String,
    /// Every 2-D tensor.
    pub tensors: Vec<TensorAccuracy>,
    /// All tensors.
    pub aggregate: AccuracyAggregate,
    /// Without the embedding tables (looked up, never multiplied), if any.
    pub aggregate_without_embeddings: Option<AccuracyAggregate>,
    /// Per tensor kind ([`tensor_kind`]), in order of first appearance.
    pub kinds: Vec<AccuracyAggregate>,
    /// Wall time, seconds.
    pub seconds: f64,
}

/// A tensor's kind: its name without the layer number (`encoder.layer.3.attention.self.key.
/// weight` is `attention.self.key`) and without `.weight`.
pub fn tensor_kind(name: &str) -> String {
    let mut s = name.strip_suffix(".weight").unwrap_or(name);
    if let Some(p) = s.find("layer.") {
        let rest = &s[p + "layer.".len()..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && rest[digits..].starts_with('.') {
            s = &rest[digits + 1..];
        }
    }
    s.to_owned()
}

/// Every method on one tensor (`index` seeds its inputs, as in the SpQR report).
///
/// # Errors
/// [`SbvrAccuracyError::Sbvr`] or [`SbvrAccuracyError::Spqr`] when an encoding or a reference
/// product fails.
pub fn tensor_accuracy(t: &Tensor2d, index: usize) -> Result<TensorAccuracy, SbvrAccuracyError> {
    let start = Instant::now();
    let (rows, cols) = (t.rows, t.cols);
    let sbvr_err = |source| SbvrAccuracyError::Sbvr {
        tensor: t.name.clone(),
        source,
    };
    let spqr_err = |source| SbvrAccuracyError::Spqr {
        tensor: t.name.clone(),
        source,
    };
    let (x_iid, x_cor) = eval_inputs(cols, index);
    let y_iid = exact_gemv(t, &x_iid, EVAL_VECTORS);
    let y_cor = exact_gemv(t, &x_cor, EVAL_VECTORS);
    let w64: Vec<f64> = t.data.iter().map(|&v| f64::from(v)).collect();
    // `W' X` in f64 for a dequantized matrix without a reference of its own.
    let dense = |deq: Vec<f32>, x: &[f16]| {
        let d = Tensor2d {
            name: String::new(),
            dtype: "F32".into(),
            rows,
            cols,
            data: deq,
        };
        exact_gemv(&d, x, EVAL_VECTORS)
    };

    let mut methods = Vec::with_capacity(METHODS.len());
    for &method in &METHODS {
        let t0 = Instant::now();
        let mut sums = [(0.0, 0.0); 7];
        let (bits, stored, entries, gpu, encode_seconds) = match method {
            Method::Sbvr(n) => {
                let opts = EncodeOptions {
                    bits: n,
                    ..EncodeOptions::default()
                };
                let e = encode(&t.data, rows, cols, &opts).map_err(sbvr_err)?;
                let secs = t0.elapsed().as_secs_f64();
                let m = SbvrMatrix::from_encoded(&e).map_err(sbvr_err)?;
                sums[W] = sq_err(&m.dequantize(), &w64);
                for (x, y, (o, g, a)) in [
                    (&x_iid, &y_iid, (IID, GPU_IID, ACT_IID)),
                    (&x_cor, &y_cor, (COR, GPU_COR, ACT_COR)),
                ] {
                    let deq = m.reference_dequantized(x, EVAL_VECTORS).map_err(sbvr_err)?;
                    let gpu = m.reference(x, EVAL_VECTORS).map_err(sbvr_err)?;
                    sums[o] = sq_err(&deq, y);
                    sums[g] = sq_err(&gpu, y);
                    // The activation error relative to the exact outputs' norm.
                    sums[a] = (sq_err(&gpu, &deq).0, sums[o].1);
                }
                (
                    bits_per_weight_sbvr(n, m.entries(), rows, cols),
                    m.bits_per_weight(),
                    Some(m.entries()),
                    true,
                    secs,
                )
            }
            Method::RtnSym(b) | Method::RtnAsym(b) => {
                let (deq, bits) = if matches!(method, Method::RtnSym(_)) {
                    (
                        rtn_symmetric(&t.data, rows, cols, b),
                        bits_per_weight_rtn_symmetric(b),
                    )
                } else {
                    (
                        rtn_asymmetric(&t.data, rows, cols, b),
                        bits_per_weight_rtn_asymmetric(b),
                    )
                };
                let deq = deq.map_err(sbvr_err)?;
                let secs = t0.elapsed().as_secs_f64();
                sums[W] = sq_err(&deq, &w64);
                sums[IID] = sq_err(&dense(deq.clone(), &x_iid), &y_iid);
                sums[COR] = sq_err(&dense(deq, &x_cor), &y_cor);
                (bits, bits, None, false, secs)
            }
            Method::Spqr => {
                let m =
                    quantize(&t.data, rows, cols, &QuantizeOptions::default()).map_err(spqr_err)?;
                let secs = t0.elapsed().as_secs_f64();
                sums[W] = sq_err(&m.dequantize(), &w64);
                let y1 = m.gemv_reference(&x_iid, EVAL_VECTORS).map_err(spqr_err)?;
                let y2 = m.gemv_reference(&x_cor, EVAL_VECTORS).map_err(spqr_err)?;
                sums[IID] = sq_err(&y1, &y_iid);
                sums[COR] = sq_err(&y2, &y_cor);
                sums[GPU_IID] = sums[IID];
                sums[GPU_COR] = sums[COR];
                let b = m.bits_per_weight();
                (b, b, None, true, secs)
            }
        };
        let sbvr = matches!(method, Method::Sbvr(_));
        methods.push(MethodResult {
            method: method.name(),
            bits_per_weight: bits,
            stored_bits_per_weight: stored,
            entries,
            weight_rel_err: ratio(sums[W]),
            output_rel_err_iid: ratio(sums[IID]),
            output_rel_err_correlated: ratio(sums[COR]),
            gpu_output_rel_err_iid: gpu.then(|| ratio(sums[GPU_IID])),
            gpu_output_rel_err_correlated: gpu.then(|| ratio(sums[GPU_COR])),
            activation_rel_err_iid: sbvr.then(|| ratio(sums[ACT_IID])),
            activation_rel_err_correlated: sbvr.then(|| ratio(sums[ACT_COR])),
            encode_seconds,
            sums,
        });
    }
    Ok(TensorAccuracy {
        name: t.name.clone(),
        kind: tensor_kind(&t.name),
        rows,
        cols,
        methods,
        seconds: start.elapsed().as_secs_f64(),
    })
}

fn method_index(m: Method) -> usize {
    METHODS
        .iter()
        .position(|&x| x == m)
        .expect("a listed method")
}

/// The RTN variant at `n` bits closest in bits per weight to SBVR's (the first on a tie), and
/// whether SBVR's weight error is at most it and at most both, from (bits, error) pairs.
fn compare(sbvr: (f64, f64), sym: (f64, f64), asym: (f64, f64)) -> (bool, bool, bool) {
    let sym_closest = (sym.0 - sbvr.0).abs() <= (asym.0 - sbvr.0).abs();
    let closest = if sym_closest { sym } else { asym };
    (
        sym_closest,
        sbvr.1 <= closest.1,
        sbvr.1 <= sym.1 && sbvr.1 <= asym.1,
    )
}

fn aggregate(what: &str, tensors: &[&TensorAccuracy]) -> AccuracyAggregate {
    let elements: usize = tensors.iter().map(|t| t.rows * t.cols).sum();
    let methods: Vec<MethodAggregate> = METHODS
        .iter()
        .enumerate()
        .map(|(k, &method)| {
            let sum = |i: usize| {
                tensors.iter().fold((0.0, 0.0), |(e, n), t| {
                    let (a, b) = t.methods[k].sums[i];
                    (e + a, n + b)
                })
            };
            let per_weight = |f: &dyn Fn(&MethodResult) -> f64| {
                tensors
                    .iter()
                    .map(|t| f(&t.methods[k]) * (t.rows * t.cols) as f64)
                    .sum::<f64>()
                    / elements.max(1) as f64
            };
            let first = tensors.first().map(|t| &t.methods[k]);
            let gpu = first.is_some_and(|m| m.gpu_output_rel_err_iid.is_some());
            let sbvr = matches!(method, Method::Sbvr(_));
            let entries: Vec<usize> = tensors
                .iter()
                .filter_map(|t| t.methods[k].entries)
                .collect();
            MethodAggregate {
                method: method.name(),
                bits_per_weight: per_weight(&|m| m.bits_per_weight),
                stored_bits_per_weight: per_weight(&|m| m.stored_bits_per_weight),
                entries_range: entries
                    .iter()
                    .min()
                    .zip(entries.iter().max())
                    .map(|(&a, &b)| (a, b)),
                weight_rel_err: ratio(sum(W)),
                output_rel_err_iid: ratio(sum(IID)),
                output_rel_err_correlated: ratio(sum(COR)),
                gpu_output_rel_err_iid: gpu.then(|| ratio(sum(GPU_IID))),
                gpu_output_rel_err_correlated: gpu.then(|| ratio(sum(GPU_COR))),
                activation_rel_err_iid: sbvr.then(|| ratio(sum(ACT_IID))),
                activation_rel_err_correlated: sbvr.then(|| ratio(sum(ACT_COR))),
                encode_seconds: tensors.iter().map(|t| t.methods[k].encode_seconds).sum(),
            }
        })
        .collect();
    let verdicts = [2, 3, 4]
        .into_iter()
        .map(|n| {
            let (s, y, a) = (
                method_index(Method::Sbvr(n)),
                method_index(Method::RtnSym(n)),
                method_index(Method::RtnAsym(n)),
            );
            let pair = |m: &MethodAggregate| (m.bits_per_weight, m.weight_rel_err);
            let (sym_closest, meets_closest, meets_both) =
                compare(pair(&methods[s]), pair(&methods[y]), pair(&methods[a]));
            let closest = &methods[if sym_closest { y } else { a }];
            let per_tensor: Vec<(bool, bool, bool)> = tensors
                .iter()
                .map(|t| {
                    let pair = |m: &MethodResult| (m.bits_per_weight, m.weight_rel_err);
                    compare(
                        pair(&t.methods[s]),
                        pair(&t.methods[y]),
                        pair(&t.methods[a]),
                    )
                })
                .collect();
            Verdict {
                n,
                sbvr_bits_per_weight: methods[s].bits_per_weight,
                sbvr_weight_rel_err: methods[s].weight_rel_err,
                closest_rtn: closest.method.clone(),
                closest_rtn_bits_per_weight: closest.bits_per_weight,
                closest_rtn_weight_rel_err: closest.weight_rel_err,
                meets_closest,
                meets_both,
                tensors_meeting_closest: per_tensor.iter().filter(|v| v.1).count(),
                tensors_meeting_both: per_tensor.iter().filter(|v| v.2).count(),
            }
        })
        .collect();
    AccuracyAggregate {
        what: what.to_owned(),
        tensors: tensors.len(),
        elements,
        methods,
        verdicts,
    }
}

/// The report on loaded weights; `progress` gets a line per tensor.
///
/// # Errors
/// As [`tensor_accuracy`].
pub fn analyse(
    weights: &Weights,
    model: &str,
    mut progress: impl FnMut(&str),
) -> Result<SbvrAccuracyReport, SbvrAccuracyError> {
    let start = Instant::now();
    let mut tensors = Vec::with_capacity(weights.tensors.len());
    for (i, t) in weights.tensors.iter().enumerate() {
        let a = tensor_accuracy(t, i)?;
        progress(&tensor_line(&a));
        tensors.push(a);
    }
    let all: Vec<&TensorAccuracy> = tensors.iter().collect();
    let linear: Vec<&TensorAccuracy> = tensors
        .iter()
        .filter(|t| !t.name.contains("embeddings"))
        .collect();
    let aggregate_all = aggregate("all 2-D tensors", &all);
    let aggregate_without_embeddings = (!linear.is_empty() && linear.len() < all.len())
        .then(|| aggregate("without embeddings", &linear));
    let mut kind_names: Vec<&str> = Vec::new();
    for t in &tensors {
        if !kind_names.contains(&t.kind.as_str()) {
            kind_names.push(&t.kind);
        }
    }
    let kinds = kind_names
        .iter()
        .map(|&k| {
            let of_kind: Vec<&TensorAccuracy> = tensors.iter().filter(|t| t.kind == k).collect();
            aggregate(k, &of_kind)
        })
        .collect();
    Ok(SbvrAccuracyReport {
        model: model.to_owned(),
        methods: METHODS.iter().map(|&m| (m.name(), m.describe())).collect(),
        inputs: format!(
            "no real activations: the SpQR report's inputs for the same tensor, \
             {EVAL_VECTORS} iid N(0,1) vectors and {EVAL_VECTORS} synthetic correlated vectors \
             (16 latent factors, per-column scales over a factor 30), rounded to fp16; SBVR's \
             GPU arithmetic further quantizes them to int8 per group of 128"
        ),
        tensors,
        aggregate: aggregate_all,
        aggregate_without_embeddings,
        kinds,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// The report on a safetensors file.
///
/// # Errors
/// As [`load`] and [`analyse`].
pub fn run(
    path: &Path,
    progress: impl FnMut(&str),
) -> Result<SbvrAccuracyReport, SbvrAccuracyError> {
    let weights = load(path)?;
    analyse(&weights, &path.display().to_string(), progress)
}

/// One line per tensor: weight error, correlated output error (dequantized; GPU) and encode
/// time per method.
pub fn tensor_line(t: &TensorAccuracy) -> String {
    let mut s = format!("{} {}x{}:", t.name, t.rows, t.cols);
    for m in &t.methods {
        s.push_str(&format!(
            " {} {:.4}/{:.4}",
            m.method, m.weight_rel_err, m.output_rel_err_correlated
        ));
        if let (Some(g), Some(_)) = (m.gpu_output_rel_err_correlated, m.entries) {
            s.push_str(&format!("/{g:.4}"));
        }
        s.push_str(&format!(" ({:.2} s)", m.encode_seconds));
    }
    s.push_str(&format!(" [{:.1} s]", t.seconds));
    s
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.4}"))
}

/// The aggregate as a markdown table (one row per method) followed by the verdict lines.
pub fn aggregate_table(a: &AccuracyAggregate) -> String {
    let mut s = format!(
        "{} ({} tensors, {} weights)\n\n| method | bits/weight | stored bits/weight | cache \
         entries | weights rel. err | outputs rel. err, iid | outputs rel. err, correlated | \
         GPU outputs rel. err, iid | GPU outputs rel. err, correlated | activation quant. \
         err, correlated | encode s |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: \
         | ---: | ---: | ---: |\n",
        a.what, a.tensors, a.elements
    );
    for m in &a.methods {
        s.push_str(&format!(
            "| {} | {:.3} | {:.3} | {} | {:.4} | {:.4} | {:.4} | {} | {} | {} | {:.2} |\n",
            m.method,
            m.bits_per_weight,
            m.stored_bits_per_weight,
            m.entries_range.map_or_else(
                || "-".to_owned(),
                |(lo, hi)| if lo == hi {
                    lo.to_string()
                } else {
                    format!("{lo}-{hi}")
                }
            ),
            m.weight_rel_err,
            m.output_rel_err_iid,
            m.output_rel_err_correlated,
            opt(m.gpu_output_rel_err_iid),
            opt(m.gpu_output_rel_err_correlated),
            opt(m.activation_rel_err_correlated),
            m.encode_seconds
        ));
    }
    s.push('\n');
    for v in &a.verdicts {
        s.push_str(&verdict_line(v, a.tensors));
        s.push('\n');
    }
    s
}

/// One verdict in words.
pub fn verdict_line(v: &Verdict, tensors: usize) -> String {
    format!(
        "- sbvr{n} ({:.3} bits/weight): weights rel. err {:.4} {} {:.4} of {} ({:.3} \
         bits/weight, the RTN-{n} variant closest in bits){}; per tensor: at most the closest \
         RTN-{n} on {}/{tensors}, at most both RTN-{n} on {}/{tensors}",
        v.sbvr_bits_per_weight,
        v.sbvr_weight_rel_err,
        if v.meets_closest { "<=" } else { ">" },
        v.closest_rtn_weight_rel_err,
        v.closest_rtn,
        v.closest_rtn_bits_per_weight,
        if v.meets_both {
            ", and <= the other RTN variant too"
        } else {
            ""
        },
        v.tensors_meeting_closest,
        v.tensors_meeting_both,
        n = v.n,
    )
}

/// Per tensor kind: weights rel. err per method (first table) and correlated outputs (second:
/// for SBVR `dequantized / GPU`), with SBVR n = 4's bits per weight.
pub fn kind_tables(r: &SbvrAccuracyReport) -> String {
    let header = |s: &mut String, last: &str| {
        s.push_str("| kind | tensors |");
        for m in &METHODS {
            s.push_str(&format!(" {} |", m.name()));
        }
        s.push_str(&format!(" {last} |\n| --- | ---: |"));
        for _ in &METHODS {
            s.push_str(" ---: |");
        }
        s.push_str(" ---: |\n");
    };
    let s4 = method_index(Method::Sbvr(4));
    let mut s = String::from("weights rel. err per tensor kind\n\n");
    header(&mut s, "sbvr4 bits/weight");
    for k in &r.kinds {
        s.push_str(&format!("| {} | {} |", k.what, k.tensors));
        for m in &k.methods {
            s.push_str(&format!(" {:.4} |", m.weight_rel_err));
        }
        s.push_str(&format!(" {:.3} |\n", k.methods[s4].bits_per_weight));
    }
    s.push_str(
        "\noutputs rel. err per tensor kind, correlated inputs (SBVR: dequantized weights on \
         fp16 inputs / GPU arithmetic with int8 inputs)\n\n",
    );
    header(&mut s, "sbvr4 stored bits/weight");
    for k in &r.kinds {
        s.push_str(&format!("| {} | {} |", k.what, k.tensors));
        for (i, m) in k.methods.iter().enumerate() {
            if matches!(METHODS[i], Method::Sbvr(_)) {
                s.push_str(&format!(
                    " {:.4} / {} |",
                    m.output_rel_err_correlated,
                    opt(m.gpu_output_rel_err_correlated)
                ));
            } else {
                s.push_str(&format!(" {:.4} |", m.output_rel_err_correlated));
            }
        }
        s.push_str(&format!(" {:.3} |\n", k.methods[s4].stored_bits_per_weight));
    }
    s
}

/// Per-tensor markdown table: `weights / correlated outputs` rel. err per method (SBVR's
/// output the GPU arithmetic's), SBVR n = 4's entries and bits per weight.
pub fn tensor_table(r: &SbvrAccuracyReport) -> String {
    let mut s = String::from("| tensor | shape |");
    for m in &METHODS {
        s.push_str(&format!(" {} |", m.name()));
    }
    s.push_str(" sbvr4 entries | sbvr4 bits/weight |\n| --- | --- |");
    for _ in &METHODS {
        s.push_str(" ---: |");
    }
    s.push_str(" ---: | ---: |\n");
    let s4 = method_index(Method::Sbvr(4));
    for t in &r.tensors {
        s.push_str(&format!("| {} | {}x{} |", t.name, t.rows, t.cols));
        for m in &t.methods {
            s.push_str(&format!(
                " {:.4} / {:.4} |",
                m.weight_rel_err,
                m.gpu_output_rel_err_correlated
                    .unwrap_or(m.output_rel_err_correlated)
            ));
        }
        let m = &t.methods[s4];
        s.push_str(&format!(
            " {} | {:.3} |\n",
            m.entries.unwrap_or(0),
            m.bits_per_weight
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use rand_distr::StandardNormal;

    fn gaussian(name: &str, rows: usize, cols: usize, seed: u64) -> Tensor2d {
        let mut rng = StdRng::seed_from_u64(seed);
        Tensor2d {
            name: name.into(),
            dtype: "F32".into(),
            rows,
            cols,
            data: (0..rows * cols)
                .map(|_| rng.sample::<f32, _>(StandardNormal) * 0.05)
                .collect(),
        }
    }

    #[test]
    fn kinds() {
        assert_eq!(
            tensor_kind("encoder.layer.3.attention.self.key.weight"),
            "attention.self.key"
        );
        assert_eq!(
            tensor_kind("encoder.layer.12.output.dense.weight"),
            "output.dense"
        );
        assert_eq!(tensor_kind("pooler.dense.weight"), "pooler.dense");
        assert_eq!(
            tensor_kind("embeddings.word_embeddings.weight"),
            "embeddings.word_embeddings"
        );
        assert_eq!(tensor_kind("layer.x.y"), "layer.x.y");
    }

    #[test]
    fn a_small_model_is_reported_for_every_method() {
        let w = Weights {
            tensors: vec![
                gaussian("embeddings.word_embeddings.weight", 96, 256, 1),
                gaussian("encoder.layer.0.output.dense.weight", 128, 384, 2),
                gaussian("encoder.layer.1.output.dense.weight", 128, 384, 3),
            ],
            skipped: vec![],
        };
        let r = analyse(&w, "test", |_| {}).unwrap();
        assert_eq!(r.tensors.len(), 3);
        assert_eq!(r.aggregate_without_embeddings.as_ref().unwrap().tensors, 2);
        assert_eq!(r.kinds.len(), 2);
        assert_eq!(r.kinds[1].what, "output.dense");
        assert_eq!(r.kinds[1].tensors, 2);
        let get = |name: &str| {
            r.aggregate
                .methods
                .iter()
                .find(|m| m.method == name)
                .unwrap()
                .clone()
        };
        let s: Vec<MethodAggregate> = (2..=4).map(|n| get(&format!("sbvr{n}"))).collect();
        // More bitvectors, less error; bits per weight as the formula says.
        assert!(s[2].weight_rel_err < s[1].weight_rel_err);
        assert!(s[1].weight_rel_err < s[0].weight_rel_err);
        assert!(s[0].weight_rel_err < 0.5);
        let t = &r.tensors[1].methods[2];
        assert_eq!(t.method, "sbvr4");
        let e = t.entries.unwrap();
        assert!((1..=256).contains(&e) && e <= 128 * 3);
        let expect = 4.0 + 8.0 / 128.0 + (e * 4 * 16) as f64 / (128.0 * 384.0);
        assert!((t.bits_per_weight - expect).abs() < 1e-12);
        // 384 columns are stored as 512 (groups in pairs).
        assert!(t.stored_bits_per_weight > t.bits_per_weight + 1.0);
        // On Gaussian weights SBVR-4 beats symmetric RTN-4 g128 on the weights.
        assert!(s[2].weight_rel_err < get("rtn-sym4").weight_rel_err);
        // Output errors on iid inputs track the weight error; int8 activations add a little.
        for m in &s {
            assert!((m.output_rel_err_iid / m.weight_rel_err - 1.0).abs() < 0.25);
            let (act, gpu) = (
                m.activation_rel_err_correlated.unwrap(),
                m.gpu_output_rel_err_correlated.unwrap(),
            );
            assert!(act > 0.0 && act < 0.05, "{act}");
            assert!(
                gpu > m.output_rel_err_correlated * 0.9
                    && gpu < m.output_rel_err_correlated + act + 1e-12
            );
        }
        let rs4 = get("rtn-sym4");
        assert_eq!(rs4.bits_per_weight, 4.125);
        assert!(rs4.gpu_output_rel_err_iid.is_none());
        let spqr = get("spqr");
        assert_eq!(spqr.gpu_output_rel_err_iid, Some(spqr.output_rel_err_iid));
        let v4 = &r.aggregate.verdicts[2];
        assert_eq!(v4.n, 4);
        assert!(v4.closest_rtn.starts_with("rtn-") && v4.closest_rtn.ends_with('4'));
        assert!(aggregate_table(&r.aggregate).contains("| rtn-asym4 | 4.250 | 4.250 | - |"));
        assert_eq!(tensor_table(&r).lines().count(), 5);
        assert!(kind_tables(&r).contains("| output.dense | 2 |"));
        serde_json::to_string(&r).unwrap();
    }
}
