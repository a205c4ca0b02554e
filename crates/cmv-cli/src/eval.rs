//! `cmv eval`: the weight error of a compressed model against the original.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::Serialize;

use crate::bert::{self, Bert, ModelOpts, Tokenizer, plain_source};
use crate::decompress::{decode_all, decode_one, plain_names};
use crate::error::{CliError, Result};
use crate::rtn::RtnSpec;
use crate::stored;
use crate::tensors::{File, FloatDtype, Owned, Parsed, floats, values_f64};

/// The arguments of `cmv eval`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  cmv eval model.safetensors model.spqr.safetensors
  cmv eval model.safetensors model.spqr.safetensors --json | jq '.mean_relative_error'
  cmv eval model.safetensors model.spqr.safetensors --tokenizer tokenizer.json   # + embeddings")]
pub struct Args {
    /// The original model.
    pub original: PathBuf,
    /// The compressed model (from `cmv compress`), or a decompressed one.
    pub compressed: PathBuf,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// The model's Hugging Face `tokenizer.json` (BERT WordPiece): also compare the sentence
    /// embeddings of the two models (a CPU forward pass of the BERT encoder, mean pooling).
    #[arg(long, value_name = "FILE")]
    pub tokenizer: Option<PathBuf>,
    /// Also evaluate round-to-nearest at BITS bits with groups of GROUP weights (fp16 scale
    /// and zero per group) on the same tensors (repeatable), e.g. `--rtn 4:128 --rtn 3:64`.
    #[arg(long, value_name = "BITS:GROUP")]
    pub rtn: Vec<RtnSpec>,
    #[command(flatten)]
    pub model: ModelOpts,
}

/// One sentence's embeddings compared.
#[derive(Debug, Serialize)]
pub struct SentenceRow {
    /// The sentence.
    pub sentence: String,
    /// Its tokens, `[CLS]` and `[SEP]` included.
    pub tokens: usize,
    /// The cosine similarity of its embedding by the compressed model to the original's.
    pub cosine: f64,
}

/// The sentence-embedding comparison.
#[derive(Debug, Serialize)]
pub struct Embeddings {
    /// One row per sentence.
    pub sentences: Vec<SentenceRow>,
    /// The mean cosine similarity.
    pub mean_cosine: f64,
    /// The smallest.
    pub min_cosine: f64,
}

/// One tensor's error.
#[derive(Debug, Serialize)]
pub struct Row {
    /// The tensor.
    pub name: String,
    /// Its format (`None`: stored as it is).
    pub format: Option<String>,
    /// Its shape.
    pub shape: Vec<usize>,
    /// `||W - W'|| / ||W||` (Frobenius; 0 when both are zero, `null` in JSON when only `W` is).
    pub relative_error: f64,
    /// `max |W - W'|`.
    pub max_abs_error: f64,
    /// Whether it counts in the mean: compressed tensors of a cmv file; every 2-D tensor of
    /// a plain (decompressed) file.
    pub counted: bool,
}

/// The report.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The original model.
    pub original: PathBuf,
    /// The compressed model.
    pub compressed: PathBuf,
    /// One row per tensor of the original.
    pub tensors: Vec<Row>,
    /// Tensors counted in the mean (`Row::counted`).
    pub counted_tensors: usize,
    /// The mean of `relative_error` over the counted tensors (0 when there is none).
    pub mean_relative_error: f64,
    /// The largest `relative_error` over the counted tensors.
    pub max_relative_error: f64,
    /// Bits per weight stored for the compressed tensors (a cmv file only).
    pub bits_per_weight: Option<f64>,
    /// The sentence embeddings compared (with `--tokenizer`).
    pub embeddings: Option<Embeddings>,
    /// The RTN baselines (`--rtn`) on the same tensors.
    pub baselines: Vec<Baseline>,
}

/// The report on `original` against `compressed`.
///
/// # Errors
/// Unreadable or invalid files, damaged containers, files whose tensors do not correspond.
pub fn report(args: &Args) -> Result<Report> {
    let (original, compressed) = (args.original.as_path(), args.compressed.as_path());
    let a_file = File::read(original)?;
    let a = a_file.parse()?;
    if a.is_cmv() {
        return Err(CliError::Mismatch {
            original: original.to_owned(),
            compressed: compressed.to_owned(),
            reason: format!(
                "{} is itself compressed: pass the original model first",
                original.display()
            ),
        });
    }
    let b_file = File::read(compressed)?;
    let b = b_file.parse()?;
    let mismatch = |reason: String| CliError::Mismatch {
        original: original.to_owned(),
        compressed: compressed.to_owned(),
        reason,
    };
    let a_names: BTreeSet<&str> = a.names.iter().map(String::as_str).collect();
    let b_names = plain_names(&b);
    if let Some(extra) = b_names.iter().find(|n| !a_names.contains(n.as_str())) {
        return Err(mismatch(format!("tensor {extra} is not in the original")));
    }
    // One tensor at a time per thread: the compressed model is never decoded whole here.
    let rows: Vec<Row> = a
        .names
        .par_iter()
        .map(|name| -> Result<Option<Row>> {
            let t = a.tensor(name)?;
            if b_names.binary_search(&name).is_err() {
                return Err(mismatch(format!(
                    "tensor {name} is missing from the compressed file"
                )));
            }
            let d = decode_one(&b, name, Some(FloatDtype::F32))?;
            if d.shape != t.shape {
                return Err(mismatch(format!(
                    "tensor {name} has shape {:?} in the original but {:?} in the compressed file",
                    t.shape, d.shape
                )));
            }
            let (Some(w), Some(w2)) = (values_f64(t.dtype, t.data), values_f64(d.dtype, &d.data))
            else {
                // Tensors without a numeric reading (bool, fp8) are compared byte for byte.
                if t.data != d.data.as_slice() {
                    return Err(mismatch(format!("tensor {name} ({:?}) differs", t.dtype)));
                }
                return Ok(None);
            };
            let (relative_error, max) = errors(&w, &w2);
            let format = b.entry(name)?.map(|e| e.format);
            let counted = format.is_some() || (!b.is_cmv() && t.shape.len() == 2);
            Ok(Some(Row {
                counted,
                name: name.clone(),
                format,
                shape: t.shape.clone(),
                relative_error,
                max_abs_error: max,
            }))
        })
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .flatten()
        .collect();
    let errors: Vec<f64> = rows
        .iter()
        .filter(|r| r.counted)
        .map(|r| r.relative_error)
        .collect();
    let mut stored_bits = 0u64;
    let mut stored_elements = 0u64;
    for r in rows.iter().filter(|r| r.format.is_some()) {
        if let Some(st) = stored::load(&b, &r.name)? {
            stored_bits += 8 * st.stored_bytes;
            stored_elements += st.elements();
        }
    }
    let ctx = match &args.tokenizer {
        None => None,
        Some(tok) => Some(EmbedCtx::new(&args.model, tok, &a)?),
    };
    let embeddings = match &ctx {
        None => None,
        Some(ctx) => {
            let decoded = decode_all(&b, Some(FloatDtype::F32))?;
            let b = Bert::load(
                compressed,
                &decoded_source(&decoded),
                args.model.heads,
                args.model.layer_norm_eps,
            )?;
            Some(ctx.compare(&b))
        }
    };
    let counted: Vec<&str> = rows
        .iter()
        .filter(|r| r.counted)
        .map(|r| r.name.as_str())
        .collect();
    let baselines = args
        .rtn
        .iter()
        .map(|&spec| baseline(spec, &a, &counted, ctx.as_ref(), &args.model))
        .collect::<Result<Vec<_>>>()?;
    Ok(Report {
        bits_per_weight: (stored_elements > 0).then(|| stored_bits as f64 / stored_elements as f64),
        embeddings,
        baselines,
        original: original.to_owned(),
        compressed: compressed.to_owned(),
        counted_tensors: errors.len(),
        mean_relative_error: errors.iter().sum::<f64>() / errors.len().max(1) as f64,
        max_relative_error: errors.iter().copied().fold(0.0, f64::max),
        tensors: rows,
    })
}

/// `(||w - w2|| / ||w||, max |w - w2|)`; the relative error is 0 when both are zero and
/// infinite when only `w` is.
fn errors(w: &[f64], w2: &[f64]) -> (f64, f64) {
    let (mut num, mut den, mut max) = (0f64, 0f64, 0f64);
    for (x, y) in w.iter().zip(w2) {
        num += (x - y) * (x - y);
        den += x * x;
        max = max.max((x - y).abs());
    }
    let relative = match (num, den) {
        (0.0, _) => 0.0,
        (_, 0.0) => f64::INFINITY,
        _ => (num / den).sqrt(),
    };
    (relative, max)
}

/// An RTN baseline on the counted tensors.
#[derive(Debug, Serialize)]
pub struct Baseline {
    /// `rtn<bits> g<group>`.
    pub name: String,
    /// Bits per code.
    pub bits: u32,
    /// Weights per group.
    pub group: usize,
    /// Bits per weight: codes plus an fp16 scale and zero per group.
    pub bits_per_weight: f64,
    /// Tensors quantized (the counted float tensors).
    pub tensors: usize,
    /// Mean relative weight error over them.
    pub mean_relative_error: f64,
    /// The largest.
    pub max_relative_error: f64,
    /// The sentence embeddings compared with the original's (with `--tokenizer`).
    pub embeddings: Option<Embeddings>,
}

/// One tensor quantized with RTN.
struct Quantized {
    name: String,
    shape: Vec<usize>,
    values: Vec<f32>,
    error: f64,
    bits: u64,
}

/// The RTN baseline `spec` on the tensors `names` of `original`.
fn baseline(
    spec: RtnSpec,
    original: &Parsed<'_>,
    names: &[&str],
    ctx: Option<&EmbedCtx>,
    opts: &ModelOpts,
) -> Result<Baseline> {
    let quantized: Vec<Quantized> = names
        .par_iter()
        .filter_map(|name| {
            let t = original.tensor(name).ok()?;
            let (&[rows, cols], Some(w)) = (&t.shape[..], t.floats()) else {
                return None;
            };
            let q = spec.fake_quantize(&w, cols);
            let w64: Vec<f64> = w.iter().map(|&v| f64::from(v)).collect();
            let q64: Vec<f64> = q.iter().map(|&v| f64::from(v)).collect();
            let (err, _) = errors(&w64, &q64);
            Some(Quantized {
                name: (*name).to_owned(),
                shape: t.shape.clone(),
                values: q,
                error: err,
                bits: spec.stored_bits(rows, cols),
            })
        })
        .collect();
    let elements: u64 = quantized
        .iter()
        .map(|q| q.shape.iter().product::<usize>() as u64)
        .sum();
    let bits: u64 = quantized.iter().map(|q| q.bits).sum();
    let errs: Vec<f64> = quantized.iter().map(|q| q.error).collect();
    let embeddings = match ctx {
        None => None,
        Some(ctx) => {
            let map: HashMap<&str, (&Vec<usize>, &Vec<f32>)> = quantized
                .iter()
                .map(|q| (q.name.as_str(), (&q.shape, &q.values)))
                .collect();
            let plain = plain_source(original);
            let source = |name: &str| match map.get(name) {
                Some((s, q)) => Some(((*s).clone(), (*q).clone())),
                None => plain(name),
            };
            let b = Bert::load(original.path, &source, opts.heads, opts.layer_norm_eps)?;
            Some(ctx.compare(&b))
        }
    };
    Ok(Baseline {
        name: spec.to_string(),
        bits: spec.bits,
        group: spec.group,
        bits_per_weight: bits as f64 / elements.max(1) as f64,
        tensors: quantized.len(),
        mean_relative_error: errs.iter().sum::<f64>() / errs.len().max(1) as f64,
        max_relative_error: errs.iter().copied().fold(0.0, f64::max),
        embeddings,
    })
}

/// Runs `cmv eval`.
///
/// # Errors
/// As [`report`].
pub fn run(args: &Args) -> Result<()> {
    let r = report(args)?;
    if args.json {
        // Strings and numbers (infinite ones become null) always serialize.
        println!("{}", serde_json::to_string_pretty(&r).unwrap_or_default());
        return Ok(());
    }
    let width = r
        .tensors
        .iter()
        .map(|t| t.name.len())
        .max()
        .unwrap_or(6)
        .max(6);
    println!(
        "{:<width$}  {:<8}  {:>12}  {:>12}  {:>12}",
        "tensor", "format", "shape", "rel. error", "max |err|"
    );
    for t in &r.tensors {
        let shape = t
            .shape
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("x");
        println!(
            "{:<width$}  {:<8}  {:>12}  {:>12.4e}  {:>12.4e}",
            t.name,
            t.format.as_deref().unwrap_or("-"),
            shape,
            t.relative_error,
            t.max_abs_error
        );
    }
    println!(
        "{} tensors counted: mean relative weight error {:.4e}, max {:.4e}",
        r.counted_tensors, r.mean_relative_error, r.max_relative_error
    );
    if let Some(e) = &r.embeddings {
        println!();
        println!("{:>8}  {:>6}  sentence", "cosine", "tokens");
        for s in &e.sentences {
            println!("{:>8.6}  {:>6}  {}", s.cosine, s.tokens, s.sentence);
        }
        println!(
            "{} sentences: mean embedding cosine similarity {:.6}, min {:.6}",
            e.sentences.len(),
            e.mean_cosine,
            e.min_cosine
        );
    }
    if !r.baselines.is_empty() {
        let cos = |e: &Option<Embeddings>| {
            e.as_ref().map_or(("-".to_owned(), "-".to_owned()), |e| {
                (
                    format!("{:.6}", e.mean_cosine),
                    format!("{:.6}", e.min_cosine),
                )
            })
        };
        println!();
        println!(
            "{:<14}  {:>7}  {:>13}  {:>11}  {:>10}",
            "model", "bits/w", "mean rel. err", "mean cosine", "min cosine"
        );
        let (mean, min) = cos(&r.embeddings);
        let bits = r
            .bits_per_weight
            .map_or("-".to_owned(), |b| format!("{b:.3}"));
        println!(
            "{:<14}  {:>7}  {:>13.4e}  {:>11}  {:>10}",
            "compressed", bits, r.mean_relative_error, mean, min
        );
        for b in &r.baselines {
            let (mean, min) = cos(&b.embeddings);
            println!(
                "{:<14}  {:>7.3}  {:>13.4e}  {:>11}  {:>10}",
                b.name, b.bits_per_weight, b.mean_relative_error, mean, min
            );
        }
    }
    Ok(())
}

/// The floats of decoded tensors, for [`Bert::load`].
fn decoded_source(
    decoded: &[(String, Owned)],
) -> impl Fn(&str) -> Option<(Vec<usize>, Vec<f32>)> + '_ {
    let map: HashMap<&str, &Owned> = decoded.iter().map(|(n, o)| (n.as_str(), o)).collect();
    move |name| {
        let o = map.get(name)?;
        Some((o.shape.clone(), floats(o.dtype, &o.data)?))
    }
}

/// The original model's sentence embeddings, to compare others with.
struct EmbedCtx {
    sentences: Vec<String>,
    ids: Vec<Vec<u32>>,
    embeddings: Vec<Vec<f32>>,
}

impl EmbedCtx {
    fn new(opts: &ModelOpts, tok_path: &Path, original: &Parsed<'_>) -> Result<Self> {
        let tok = Tokenizer::read(tok_path)?;
        let a = Bert::load(
            original.path,
            &plain_source(original),
            opts.heads,
            opts.layer_norm_eps,
        )?;
        let sentences = bert::sentences(opts.sentences.as_deref())?;
        let ids = bert::tokenize(&tok, tok_path, &a, &sentences, opts.max_tokens)?;
        let embeddings = ids.par_iter().map(|ids| a.embed(ids)).collect();
        Ok(Self {
            sentences,
            ids,
            embeddings,
        })
    }

    /// `b`'s embeddings against the original's.
    fn compare(&self, b: &Bert) -> Embeddings {
        let cosines: Vec<f64> = self
            .ids
            .par_iter()
            .zip(&self.embeddings)
            .map(|(ids, e)| bert::cosine(e, &b.embed(ids)))
            .collect();
        let rows: Vec<SentenceRow> = self
            .sentences
            .iter()
            .zip(&self.ids)
            .zip(&cosines)
            .map(|((sentence, ids), &cosine)| SentenceRow {
                sentence: sentence.clone(),
                tokens: ids.len(),
                cosine,
            })
            .collect();
        Embeddings {
            mean_cosine: cosines.iter().sum::<f64>() / cosines.len().max(1) as f64,
            min_cosine: cosines.iter().copied().fold(f64::INFINITY, f64::min),
            sentences: rows,
        }
    }
}

/// The arguments of `cmv embed`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  cmv embed model.safetensors --tokenizer tokenizer.json \\
      \"The weather is lovely today.\" \"It's so sunny outside!\" \"He drove to the stadium.\"
  cmv embed model.spqr.safetensors --tokenizer tokenizer.json --json")]
pub struct EmbedArgs {
    /// The model (plain, or compressed by `cmv compress`).
    pub model: PathBuf,
    /// Sentences (default: --sentences, or the shipped ones).
    pub text: Vec<String>,
    /// The model's Hugging Face `tokenizer.json` (BERT WordPiece).
    #[arg(long, value_name = "FILE")]
    pub tokenizer: PathBuf,
    /// Print JSON (sentences, embeddings, similarities) instead of the similarity matrix.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub opts: ModelOpts,
}

/// Runs `cmv embed`: sentence embeddings and their cosine similarities.
///
/// # Errors
/// Unreadable or invalid files, damaged containers, a tokenizer or model the forward pass
/// cannot use.
pub fn run_embed(args: &EmbedArgs) -> Result<()> {
    let file = File::read(&args.model)?;
    let parsed = file.parse()?;
    let tok = Tokenizer::read(&args.tokenizer)?;
    let decoded;
    let bert = if parsed.is_cmv() {
        decoded = decode_all(&parsed, Some(FloatDtype::F32))?;
        Bert::load(
            &args.model,
            &decoded_source(&decoded),
            args.opts.heads,
            args.opts.layer_norm_eps,
        )?
    } else {
        Bert::load(
            &args.model,
            &plain_source(&parsed),
            args.opts.heads,
            args.opts.layer_norm_eps,
        )?
    };
    let sentences = if args.text.is_empty() {
        bert::sentences(args.opts.sentences.as_deref())?
    } else {
        args.text.clone()
    };
    let ids = bert::tokenize(
        &tok,
        &args.tokenizer,
        &bert,
        &sentences,
        args.opts.max_tokens,
    )?;
    let emb: Vec<Vec<f32>> = ids.par_iter().map(|ids| bert.embed(ids)).collect();
    let sim: Vec<Vec<f64>> = emb
        .iter()
        .map(|a| emb.iter().map(|b| bert::cosine(a, b)).collect())
        .collect();
    if args.json {
        let v = serde_json::json!({
            "sentences": sentences,
            "embeddings": emb,
            "similarities": sim,
        });
        println!("{v}");
        return Ok(());
    }
    for (i, s) in sentences.iter().enumerate() {
        println!("[{i}] {s}");
    }
    for row in &sim {
        let cells: Vec<String> = row.iter().map(|v| format!("{v:.4}")).collect();
        println!("{}", cells.join("  "));
    }
    Ok(())
}
