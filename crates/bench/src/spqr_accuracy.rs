//! SpQR accuracy on real weights (`docs/SPQR-ACCURACY.md`): every 2-D tensor of a safetensors
//! model quantized with SpQR (3-bit tiles, fp16 outliers) and with plain round-to-nearest
//! 3-bit and 4-bit (groups of 16, fp16 scale and zero), reporting the relative Frobenius error
//! of the weights and of GEMV outputs, and the bits per weight.
//!
//! There are no real activations here: the output errors are measured on random inputs, iid
//! N(0, 1) (where the expected output error equals the weight error) and from a synthetic
//! correlated distribution ([`correlated_inputs`]) that the calibrated SpQR variant is also
//! calibrated on (different draws). Runs on the CPU.

use std::path::Path;
use std::time::Instant;

use half::f16;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use serde::Serialize;
use spqr_format::rtn::quantize_rtn;
use spqr_format::{
    Calibration, OutlierCriterion, OutlierFormat, QuantizeOptions, SpqrError, quantize,
};

use crate::weights::{Tensor2d, Weights, WeightsError, load};

/// Input vectors each output error is measured on.
pub const EVAL_VECTORS: usize = 8;
/// Calibration samples of the calibrated variant.
pub const CALIBRATION_SAMPLES: usize = 256;
/// Latent factors of the synthetic correlated inputs.
pub const LATENT_FACTORS: usize = 16;

/// The methods compared, in table order: name and description.
pub const METHODS: [(&str, &str); 7] = [
    (
        "spqr",
        "SpQR 3-bit 16x16, data-free, 1% outliers by own error (docs/SPQR.md)",
    ),
    (
        "spqr-loo",
        "SpQR 3-bit 16x16, data-free, 1% outliers by leave-one-out",
    ),
    (
        "spqr-gptq",
        "SpQR 3-bit 16x16, GPTQ on 256 synthetic correlated inputs, columns permuted by \
         decreasing diag(H), 1% outliers by saliency",
    ),
    (
        "spqr-gptq-loo",
        "spqr-gptq with the outliers ranked by leave-one-out (divided by [H^-1]_cc)",
    ),
    ("rtn3", "RTN 3-bit, groups of 16, fp16 scale and zero"),
    ("rtn4", "RTN 4-bit, groups of 16, fp16 scale and zero"),
    (
        "spqr-0",
        "SpQR 3-bit 16x16, data-free, no outliers (the dense part alone)",
    ),
];

/// Errors of the accuracy report.
#[derive(Debug, thiserror::Error)]
pub enum SpqrAccuracyError {
    /// The model could not be loaded.
    #[error(transparent)]
    Weights(#[from] WeightsError),
    /// Quantization failed.
    #[error("tensor {tensor}: {source}")]
    Spqr {
        /// The tensor.
        tensor: String,
        /// The error.
        #[source]
        source: SpqrError,
    },
}

/// One method on one tensor.
#[derive(Clone, Debug, Serialize)]
pub struct MethodResult {
    /// The method ([`METHODS`]).
    pub method: String,
    /// `||W - W'||_F / ||W||_F`.
    pub weight_rel_err: f64,
    /// `||W X - W' X||_F / ||W X||_F` over [`EVAL_VECTORS`] iid N(0, 1) inputs (fp16).
    pub output_rel_err_iid: f64,
    /// The same over [`EVAL_VECTORS`] synthetic correlated inputs (fp16).
    pub output_rel_err_correlated: f64,
    /// Storage bits per weight (SpQR: dense words, CSR outliers and offsets, permutation).
    pub bits_per_weight: f64,
    /// SpQR with the PTCSR outliers instead (`None` for RTN).
    pub bits_per_weight_ptcsr: Option<f64>,
    /// Outliers (0 for RTN).
    pub outliers: usize,
    /// Squared errors and norms, for the aggregates: weights, iid outputs, correlated
    /// outputs.
    #[serde(skip)]
    sums: [(f64, f64); 3],
}

/// One tensor.
#[derive(Clone, Debug, Serialize)]
pub struct TensorAccuracy {
    /// Its name.
    pub name: String,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Every method, in [`METHODS`] order.
    pub methods: Vec<MethodResult>,
    /// Seconds spent on it.
    pub seconds: f64,
}

/// One method over a set of tensors: `sqrt(sum of squared errors / sum of squared norms)`
/// and bits per weight over all their weights.
#[derive(Clone, Debug, Serialize)]
pub struct MethodAggregate {
    /// The method.
    pub method: String,
    /// Relative Frobenius error of the weights.
    pub weight_rel_err: f64,
    /// Relative error of the outputs, iid N(0, 1) inputs.
    pub output_rel_err_iid: f64,
    /// Relative error of the outputs, correlated inputs.
    pub output_rel_err_correlated: f64,
    /// Bits per weight.
    pub bits_per_weight: f64,
    /// Bits per weight with PTCSR outliers (`None` for RTN).
    pub bits_per_weight_ptcsr: Option<f64>,
    /// Outliers over weights.
    pub outlier_fraction: f64,
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
}

/// The report.
#[derive(Clone, Debug, Serialize)]
pub struct SpqrAccuracyReport {
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
    /// Without the embedding tables (which are looked up, never multiplied), if any.
    pub aggregate_without_embeddings: Option<AccuracyAggregate>,
    /// Wall time, seconds.
    pub seconds: f64,
}

/// `samples` synthetic correlated input vectors of `cols` values (`x[s * cols + c]`): `x_c =
/// scale_c (sum_f g_f a_fc / sqrt(k) + 0.3 e_c)` with `k` [`LATENT_FACTORS`] N(0, 1) latent
/// factors `g` and noise `e` per vector, a fixed N(0, 1) mixing `a` (seeded by `mix_seed`), and
/// per-column scales log-uniform over a factor 30 (a few inputs much larger than others, as in
/// real activations). Draws differ with `draw_seed`.
pub fn correlated_inputs(samples: usize, cols: usize, mix_seed: u64, draw_seed: u64) -> Vec<f32> {
    let k = LATENT_FACTORS;
    let mut rng = StdRng::seed_from_u64(mix_seed);
    let mix: Vec<f64> = (0..k * cols).map(|_| rng.sample(StandardNormal)).collect();
    let scale: Vec<f64> = (0..cols)
        .map(|_| 30f64.powf(rng.gen_range(0.0..1.0)))
        .collect();
    let mut rng = StdRng::seed_from_u64(draw_seed);
    let mut x = Vec::with_capacity(samples * cols);
    for _ in 0..samples {
        let g: Vec<f64> = (0..k).map(|_| rng.sample(StandardNormal)).collect();
        for c in 0..cols {
            let v: f64 = (0..k).map(|f| g[f] * mix[f * cols + c]).sum::<f64>() / (k as f64).sqrt()
                + 0.3 * rng.sample::<f64, _>(StandardNormal);
            x.push((v * scale[c]) as f32);
        }
    }
    x
}

/// `sum (a - b)^2` and `sum b^2`.
pub fn sq_err<A: Copy + Into<f64>>(a: &[A], b: &[f64]) -> (f64, f64) {
    a.iter().zip(b).fold((0.0, 0.0), |(e, n), (&p, &q)| {
        let p: f64 = p.into();
        (e + (p - q) * (p - q), n + q * q)
    })
}

/// `sqrt(e / n)` (0 when `n` is 0): a relative error from [`sq_err`]'s sums (or their totals
/// over tensors, for the aggregates).
pub fn ratio((e, n): (f64, f64)) -> f64 {
    if n > 0.0 { (e / n).sqrt() } else { 0.0 }
}

/// `y = W x` in f64, `x[b * cols + c]` (fp16), `y[b * rows + r]`.
pub fn exact_gemv(t: &Tensor2d, x: &[f16], batch: usize) -> Vec<f64> {
    use rayon::prelude::*;
    let xf: Vec<f64> = x.iter().map(|v| f64::from(v.to_f32())).collect();
    let per_row: Vec<Vec<f64>> = t
        .data
        .par_chunks(t.cols)
        .map(|row| {
            (0..batch)
                .map(|b| {
                    row.iter()
                        .zip(&xf[b * t.cols..(b + 1) * t.cols])
                        .map(|(&w, &v)| f64::from(w) * v)
                        .sum()
                })
                .collect()
        })
        .collect();
    let mut y = vec![0f64; batch * t.rows];
    for (r, s) in per_row.iter().enumerate() {
        for (b, &v) in s.iter().enumerate() {
            y[b * t.rows + r] = v;
        }
    }
    y
}

/// The seed of tensor `index`'s inputs (and of its calibration samples).
pub fn input_seed(index: usize) -> u64 {
    0x5eed_0000 + index as u64
}

/// The evaluation inputs of tensor `index` (of `cols` columns), rounded to fp16,
/// `x[b * cols + c]`: [`EVAL_VECTORS`] iid N(0, 1) vectors and [`EVAL_VECTORS`]
/// [`correlated_inputs`], both seeded by [`input_seed`].
pub fn eval_inputs(cols: usize, index: usize) -> (Vec<f16>, Vec<f16>) {
    let seed = input_seed(index);
    let mut rng = StdRng::seed_from_u64(seed);
    let x_iid: Vec<f16> = (0..EVAL_VECTORS * cols)
        .map(|_| f16::from_f32(rng.sample(StandardNormal)))
        .collect();
    let x_cor: Vec<f16> = correlated_inputs(EVAL_VECTORS, cols, seed, seed ^ 0xe7a1)
        .into_iter()
        .map(f16::from_f32)
        .collect();
    (x_iid, x_cor)
}

/// Every method on one tensor (`index` seeds its inputs).
///
/// # Errors
/// [`SpqrAccuracyError::Spqr`] when a quantization fails.
pub fn tensor_accuracy(t: &Tensor2d, index: usize) -> Result<TensorAccuracy, SpqrAccuracyError> {
    let start = Instant::now();
    let (rows, cols) = (t.rows, t.cols);
    let seed = input_seed(index);
    let spqr_err = |source| SpqrAccuracyError::Spqr {
        tensor: t.name.clone(),
        source,
    };
    let (x_iid, x_cor) = eval_inputs(cols, index);
    let y_iid = exact_gemv(t, &x_iid, EVAL_VECTORS);
    let y_cor = exact_gemv(t, &x_cor, EVAL_VECTORS);
    let w64: Vec<f64> = t.data.iter().map(|&v| f64::from(v)).collect();

    let mut methods = Vec::with_capacity(METHODS.len());
    for &(method, _) in &METHODS {
        let (deq, y1, y2, bits, bits_ptcsr, outliers) =
            if let Some(bits) = method.strip_prefix("rtn") {
                let bits: u32 = bits.parse().expect("rtn3 or rtn4");
                let m = quantize_rtn(&t.data, rows, cols, bits).map_err(spqr_err)?;
                (
                    m.dequantize(),
                    m.gemv_reference(&x_iid, EVAL_VECTORS).map_err(spqr_err)?,
                    m.gemv_reference(&x_cor, EVAL_VECTORS).map_err(spqr_err)?,
                    m.bits_per_weight(),
                    None,
                    0,
                )
            } else {
                let opts = match method {
                    "spqr" => QuantizeOptions::default(),
                    "spqr-0" => QuantizeOptions {
                        outlier_fraction: 0.0,
                        ..QuantizeOptions::default()
                    },
                    "spqr-loo" => QuantizeOptions {
                        outlier_criterion: OutlierCriterion::LeaveOneOut,
                        ..QuantizeOptions::default()
                    },
                    gptq => QuantizeOptions {
                        calibration: Some(Calibration::Inputs {
                            x: correlated_inputs(CALIBRATION_SAMPLES, cols, seed, seed ^ 0xca1),
                            samples: CALIBRATION_SAMPLES,
                        }),
                        permute: true,
                        outlier_criterion: if gptq.ends_with("loo") {
                            OutlierCriterion::LeaveOneOut
                        } else {
                            OutlierCriterion::Error
                        },
                        ..QuantizeOptions::default()
                    },
                };
                let m = quantize(&t.data, rows, cols, &opts).map_err(spqr_err)?;
                (
                    m.dequantize(),
                    m.gemv_reference(&x_iid, EVAL_VECTORS).map_err(spqr_err)?,
                    m.gemv_reference(&x_cor, EVAL_VECTORS).map_err(spqr_err)?,
                    m.bits_per_weight(),
                    Some(m.bits_per_weight_with(OutlierFormat::Ptcsr)),
                    m.outlier_count(),
                )
            };
        let sums = [sq_err(&deq, &w64), sq_err(&y1, &y_iid), sq_err(&y2, &y_cor)];
        methods.push(MethodResult {
            method: method.to_owned(),
            weight_rel_err: ratio(sums[0]),
            output_rel_err_iid: ratio(sums[1]),
            output_rel_err_correlated: ratio(sums[2]),
            bits_per_weight: bits,
            bits_per_weight_ptcsr: bits_ptcsr,
            outliers,
            sums,
        });
    }
    Ok(TensorAccuracy {
        name: t.name.clone(),
        rows,
        cols,
        methods,
        seconds: start.elapsed().as_secs_f64(),
    })
}

fn aggregate(what: &str, tensors: &[&TensorAccuracy]) -> AccuracyAggregate {
    let elements: usize = tensors.iter().map(|t| t.rows * t.cols).sum();
    let methods = METHODS
        .iter()
        .enumerate()
        .map(|(k, &(method, _))| {
            let sum = |i: usize| {
                tensors.iter().fold((0.0, 0.0), |(e, n), t| {
                    let (a, b) = t.methods[k].sums[i];
                    (e + a, n + b)
                })
            };
            let per_weight = |f: &dyn Fn(&MethodResult, usize) -> f64| {
                tensors
                    .iter()
                    .map(|t| f(&t.methods[k], t.rows * t.cols))
                    .sum::<f64>()
                    / elements.max(1) as f64
            };
            MethodAggregate {
                method: method.to_owned(),
                weight_rel_err: ratio(sum(0)),
                output_rel_err_iid: ratio(sum(1)),
                output_rel_err_correlated: ratio(sum(2)),
                bits_per_weight: per_weight(&|m, n| m.bits_per_weight * n as f64),
                bits_per_weight_ptcsr: tensors
                    .iter()
                    .all(|t| t.methods[k].bits_per_weight_ptcsr.is_some())
                    .then(|| per_weight(&|m, n| m.bits_per_weight_ptcsr.unwrap_or(0.0) * n as f64)),
                outlier_fraction: per_weight(&|m, _| m.outliers as f64),
            }
        })
        .collect();
    AccuracyAggregate {
        what: what.to_owned(),
        tensors: tensors.len(),
        elements,
        methods,
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
) -> Result<SpqrAccuracyReport, SpqrAccuracyError> {
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
    Ok(SpqrAccuracyReport {
        model: model.to_owned(),
        methods: METHODS
            .iter()
            .map(|&(a, b)| (a.to_owned(), b.to_owned()))
            .collect(),
        inputs: format!(
            "no real activations: {EVAL_VECTORS} iid N(0,1) vectors, and {EVAL_VECTORS} synthetic \
             correlated vectors ({LATENT_FACTORS} latent factors, per-column scales over a \
             factor 30) from the distribution spqr-gptq is calibrated on with \
             {CALIBRATION_SAMPLES} other draws; all rounded to fp16"
        ),
        tensors,
        aggregate: aggregate_all,
        aggregate_without_embeddings,
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
) -> Result<SpqrAccuracyReport, SpqrAccuracyError> {
    let weights = load(path)?;
    analyse(&weights, &path.display().to_string(), progress)
}

/// One line per tensor: its weight and correlated-output errors per method.
pub fn tensor_line(t: &TensorAccuracy) -> String {
    let mut s = format!("{} {}x{}:", t.name, t.rows, t.cols);
    for m in &t.methods {
        s.push_str(&format!(
            " {} {:.4}/{:.4}/{:.4}",
            m.method, m.weight_rel_err, m.output_rel_err_iid, m.output_rel_err_correlated
        ));
    }
    s.push_str(&format!(" ({:.1} s)", t.seconds));
    s
}

/// The aggregate as a markdown table: one row per method.
pub fn aggregate_table(a: &AccuracyAggregate) -> String {
    let mut s = format!(
        "{} ({} tensors, {} weights)\n\n| method | bits/weight | with PTCSR | outliers | weights \
         rel. err | outputs rel. err, iid N(0,1) | outputs rel. err, correlated |\n| --- | ---: | \
         ---: | ---: | ---: | ---: | ---: |\n",
        a.what, a.tensors, a.elements
    );
    for m in &a.methods {
        s.push_str(&format!(
            "| {} | {:.3} | {} | {:.2}% | {:.4} | {:.4} | {:.4} |\n",
            m.method,
            m.bits_per_weight,
            m.bits_per_weight_ptcsr
                .map_or_else(|| "-".to_owned(), |b| format!("{b:.3}")),
            100.0 * m.outlier_fraction,
            m.weight_rel_err,
            m.output_rel_err_iid,
            m.output_rel_err_correlated
        ));
    }
    s
}

/// Per-tensor markdown table: weight error per method, and bits per weight of SpQR.
pub fn tensor_table(r: &SpqrAccuracyReport) -> String {
    let mut s = String::from("| tensor | shape |");
    for &(m, _) in &METHODS {
        s.push_str(&format!(" {m} |"));
    }
    s.push_str(" spqr bits/weight |\n| --- | --- |");
    for _ in &METHODS {
        s.push_str(" ---: |");
    }
    s.push_str(" ---: |\n");
    for t in &r.tensors {
        s.push_str(&format!("| {} | {}x{} |", t.name, t.rows, t.cols));
        for m in &t.methods {
            s.push_str(&format!(
                " {:.4} / {:.4} |",
                m.weight_rel_err, m.output_rel_err_correlated
            ));
        }
        s.push_str(&format!(" {:.3} |\n", t.methods[0].bits_per_weight));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_tensor_is_reported_for_every_method() {
        let mut rng = StdRng::seed_from_u64(1);
        let (rows, cols) = (64, 64);
        let data: Vec<f32> = (0..rows * cols)
            .map(|_| rng.sample::<f32, _>(StandardNormal) * 0.05)
            .collect();
        let t = Tensor2d {
            name: "layer.0.dense.weight".into(),
            dtype: "F32".into(),
            rows,
            cols,
            data,
        };
        let emb = Tensor2d {
            name: "embeddings.word_embeddings.weight".into(),
            ..t.clone()
        };
        let w = Weights {
            tensors: vec![emb, t],
            skipped: vec![],
        };
        let r = analyse(&w, "test", |_| {}).unwrap();
        assert_eq!(r.tensors.len(), 2);
        assert_eq!(r.aggregate_without_embeddings.as_ref().unwrap().tensors, 1);
        let get = |name: &str| {
            r.aggregate
                .methods
                .iter()
                .find(|m| m.method == name)
                .unwrap()
                .clone()
        };
        let (spqr, rtn3, rtn4) = (get("spqr"), get("rtn3"), get("rtn4"));
        assert!(spqr.weight_rel_err > 0.0 && spqr.weight_rel_err < 0.3);
        assert!(rtn4.weight_rel_err < rtn3.weight_rel_err);
        assert!(spqr.bits_per_weight < rtn3.bits_per_weight);
        assert_eq!(rtn3.bits_per_weight, 5.0);
        assert!(aggregate_table(&r.aggregate).contains("| rtn4 | 6.000 | - |"));
        assert_eq!(tensor_table(&r).lines().count(), 4);
        serde_json::to_string(&r).unwrap();
    }
}
