//! `cmv compress`.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;
use safetensors::tensor::Dtype;

use crate::bert::{self, Bert, Gram, Tokenizer};
use crate::error::{CliError, Result};
use crate::formats::{self, Encoded, Format, Int8Quant};
use crate::tensors::{
    Entry, FILE_KEY, FILE_VERSION, File, InputEncoding, Owned, SCALES_SUFFIX, TENSOR_KEY_PREFIX,
    Tensor, check_output, dtype_name, write_atomic,
};

/// The arguments of `cmv compress`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  cmv compress model.safetensors --format spqr -o model.spqr.safetensors
  cmv compress model.safetensors --format sbvr --variant n3 -o model.sbvr3.safetensors --force
  cmv compress model.safetensors --format ans --tensor encoder.layer.0.attention.self.query.weight -o q.safetensors
  cmv compress model.safetensors --format spqr --calibrate tokenizer.json -o model.gptq.safetensors
  cmv formats      # the formats, their variants and what they take")]
pub struct Args {
    /// The model: a safetensors or GGUF file (GGUF: F32, F16, BF16, F64, I8-I64 and Q8_0
    /// tensors; its metadata is not carried over).
    pub model: PathBuf,
    /// The format (`cmv formats` lists them).
    #[arg(short, long)]
    pub format: String,
    /// The encoder variant of the format (default: its first; `cmv formats` lists them).
    #[arg(long)]
    pub variant: Option<String>,
    /// The output file (a safetensors file).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Overwrite the output if it exists.
    #[arg(long)]
    pub force: bool,
    /// Compress only this tensor (repeatable); each must be one the format can take.
    #[arg(long = "tensor", value_name = "NAME")]
    pub tensors: Vec<String>,
    /// Fail on a 2-D tensor the format cannot take instead of keeping it as it is.
    #[arg(long)]
    pub strict: bool,
    /// 2-D tensors with fewer weights are kept as they are.
    #[arg(long, default_value_t = 4096, value_name = "N")]
    pub min_elements: usize,
    /// No progress bars.
    #[arg(short, long)]
    pub quiet: bool,
    /// Calibrate the formats that take it (spqr: GPTQ on `X^T X` with act-order; vq:
    /// `diag(X^T X)` as column importances) on the inputs each linear layer sees when the
    /// model (a BERT sentence encoder) runs on the calibration sentences; this is its
    /// `tokenizer.json`.
    #[arg(long, value_name = "TOKENIZER")]
    pub calibrate: Option<PathBuf>,
    /// Calibration sentences, one per line (default: the 64 shipped in
    /// crates/cmv-cli/data/calibration.txt, disjoint from the evaluation sentences).
    #[arg(long, value_name = "FILE")]
    pub calibration_sentences: Option<PathBuf>,
    /// Attention heads of the model, for --calibrate (all-MiniLM-L6-v2: 12).
    #[arg(long, default_value_t = 12)]
    pub heads: usize,
    /// Tokens per calibration sentence at most, for --calibrate.
    #[arg(long, default_value_t = 256)]
    pub max_tokens: usize,
    /// LayerNorm epsilon, for --calibrate (BERT: 1e-12).
    #[arg(long, default_value_t = 1e-12)]
    pub layer_norm_eps: f64,
    /// For the int8 formats (ans, beam): quantize float tensors per row with the largest step
    /// whose relative error is at most this (e.g. 0.05) instead of absmax scales (error about
    /// 0.01): fewer distinct values, which ans codes in fewer bits (docs/ANS.md).
    #[arg(long, value_name = "ERROR", value_parser = parse_int8_error)]
    pub int8_error: Option<f64>,
}

/// A target relative error in (0, 1).
pub(crate) fn parse_int8_error(s: &str) -> std::result::Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number: give a relative error such as 0.05"))?;
    if v > 0.0 && v < 1.0 {
        Ok(v)
    } else {
        Err(format!(
            "{v} is not in (0, 1): give a relative error such as 0.05"
        ))
    }
}

/// The variant named `name` of `format` (its first when `None`).
///
/// # Errors
/// [`CliError::UnknownVariant`].
pub(crate) fn resolve_variant(format: &dyn Format, name: Option<&str>) -> Result<&'static str> {
    let variants = format.variants();
    match name {
        None => Ok(variants[0]),
        Some(v) => {
            variants
                .iter()
                .copied()
                .find(|n| *n == v)
                .ok_or_else(|| CliError::UnknownVariant {
                    format: format.name(),
                    name: v.to_owned(),
                    known: variants.join(", "),
                })
        }
    }
}

/// The Gram matrices of the model's linear layers on the calibration sentences, with the
/// sentence and token counts.
fn calibration(
    args: &Args,
    tok_path: &std::path::Path,
    parsed: &crate::tensors::Parsed<'_>,
) -> Result<(HashMap<String, Gram>, usize, usize)> {
    let tok = Tokenizer::read(tok_path)?;
    let bert = Bert::load(
        &args.model,
        &bert::plain_source(parsed),
        args.heads,
        args.layer_norm_eps,
    )?;
    let sentences = match &args.calibration_sentences {
        Some(p) => bert::sentences(Some(p))?,
        None => bert::CALIBRATION
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect(),
    };
    let ids = bert::tokenize(&tok, tok_path, &bert, &sentences, args.max_tokens)?;
    let (grams, tokens) = bert::grams(&bert, &ids);
    Ok((grams, sentences.len(), tokens))
}

/// Why a tensor was kept as it is.
fn keep_reason(t: &Tensor<'_>, min_elements: usize) -> Option<String> {
    if t.shape.len() != 2 {
        return Some(format!("{}-D", t.shape.len()));
    }
    if t.elements() < min_elements {
        return Some(format!(
            "{} weights, fewer than --min-elements {min_elements}",
            t.elements()
        ));
    }
    None
}

/// Runs `cmv compress`.
///
/// # Errors
/// Unknown format or variant, unreadable or invalid input, an existing output without
/// `--force`, a named (or, with `--strict`, any 2-D) tensor the format cannot take, a write
/// error.
pub fn run(args: &Args) -> Result<()> {
    let format = formats::find(&args.format).ok_or_else(|| CliError::UnknownFormat {
        name: args.format.clone(),
        known: formats::names(),
    })?;
    let variant = resolve_variant(format.as_ref(), args.variant.as_deref())?;
    let file = File::read(&args.model)?;
    let parsed = file.parse()?;
    if parsed.is_cmv() {
        return Err(CliError::AlreadyCompressed {
            path: args.model.clone(),
        });
    }
    check_output(&args.output, args.force)?;
    let selected: BTreeSet<&str> = args.tensors.iter().map(String::as_str).collect();
    for name in &selected {
        parsed.tensor(name)?;
    }

    let mut candidates = Vec::new();
    let mut kept: Vec<(String, String)> = Vec::new();
    for name in &parsed.names {
        let t = parsed.tensor(name)?;
        if !selected.is_empty() && !selected.contains(name.as_str()) {
            kept.push((name.clone(), "not selected with --tensor".into()));
            continue;
        }
        match keep_reason(&t, args.min_elements) {
            Some(reason) if selected.contains(name.as_str()) => {
                return Err(CliError::CannotTake {
                    tensor: name.clone(),
                    format: format.name(),
                    reason,
                });
            }
            Some(reason) => kept.push((name.clone(), reason)),
            None => {
                let scales = format!("{name}{SCALES_SUFFIX}");
                if parsed.names.contains(&scales) {
                    return Err(CliError::CannotTake {
                        tensor: name.clone(),
                        format: format.name(),
                        reason: format!(
                            "the model already has a tensor {scales}, the name cmv stores its \
                             scales under; rename it"
                        ),
                    });
                }
                candidates.push(t);
            }
        }
    }

    let start = Instant::now();
    let (grams, calibrated_on) = match &args.calibrate {
        None => (HashMap::new(), None),
        Some(tok) => {
            let (g, sentences, tokens) = calibration(args, tok, &parsed)?;
            (g, Some((sentences, tokens)))
        }
    };
    let int8 = args.int8_error.map_or(Int8Quant::Absmax, Int8Quant::Error);
    let results = encode_all(
        format.as_ref(),
        variant,
        &candidates,
        &grams,
        int8,
        args.quiet,
    );
    let elapsed = start.elapsed();

    let mut out: Vec<(String, Owned)> = Vec::new();
    let mut metadata = parsed.foreign_metadata();
    metadata.insert(FILE_KEY.into(), FILE_VERSION.into());
    let mut summary = Summary::default();
    let mut encoded_names = BTreeSet::new();
    for (t, result) in candidates.iter().zip(results) {
        match result {
            Ok(e) => {
                summary.add(t, &e);
                summary.calibrated += usize::from(e.calibrated);
                add_compressed(&mut out, &mut metadata, format.name(), variant, t, e);
                encoded_names.insert(t.name.as_str());
            }
            Err(reason) if args.strict || selected.contains(t.name.as_str()) => {
                return Err(CliError::CannotTake {
                    tensor: t.name.clone(),
                    format: format.name(),
                    reason,
                });
            }
            Err(reason) => kept.push((
                t.name.clone(),
                format!("{} refused it: {reason}", format.name()),
            )),
        }
    }
    for name in &parsed.names {
        if !encoded_names.contains(name.as_str()) {
            out.push((name.clone(), parsed.tensor(name)?.to_owned_tensor()));
        }
    }
    write_atomic(&args.output, &out, metadata, args.force)?;
    kept.sort();
    summary.print(format.name(), variant, &args.output, elapsed, &kept);
    if let Some((sentences, tokens)) = calibrated_on {
        if format.calibrates() {
            println!(
                "calibrated {} of them on the inputs of their layers over {sentences} sentences \
                 ({tokens} tokens); the others (embeddings, layers the forward pass does not \
                 use) data-free",
                summary.calibrated
            );
        } else {
            println!(
                "{} takes no calibration: --calibrate changed nothing",
                format.name()
            );
        }
    }
    Ok(())
}

fn add_compressed(
    out: &mut Vec<(String, Owned)>,
    metadata: &mut HashMap<String, String>,
    format: &str,
    variant: &str,
    t: &Tensor<'_>,
    e: Encoded,
) {
    let scales_bytes: Option<Vec<u8>> = e
        .scales
        .as_ref()
        .map(|s| s.iter().flat_map(|v| v.to_le_bytes()).collect());
    let entry = Entry {
        scales_crc32: scales_bytes.as_deref().map(crc32fast::hash),
        format: format.to_owned(),
        variant: variant.to_owned(),
        container_version: e.version,
        shape: [t.shape[0], t.shape[1]],
        dtype: dtype_name(t.dtype),
        input: e.input,
        calibrated: e.calibrated,
    };
    // An `Entry` of plain strings, numbers and a unit enum always serializes.
    let json = serde_json::to_string(&entry).unwrap_or_default();
    metadata.insert(format!("{TENSOR_KEY_PREFIX}{}", t.name), json);
    if let Some(data) = scales_bytes {
        let n = data.len() / 4;
        let rows = t.shape[0].max(1);
        let shape = match e.input {
            InputEncoding::Int8Blocks => vec![rows, n / rows],
            _ => vec![n],
        };
        out.push((
            format!("{}{SCALES_SUFFIX}", t.name),
            Owned {
                dtype: Dtype::F32,
                shape,
                data,
            },
        ));
    }
    out.push((
        t.name.clone(),
        Owned {
            dtype: Dtype::U8,
            shape: vec![e.blob.len()],
            data: e.blob,
        },
    ));
}

/// Encodes every candidate in parallel, with a bar per tensor and one overall (in weights,
/// with an ETA).
fn encode_all(
    format: &dyn Format,
    variant: &str,
    candidates: &[Tensor<'_>],
    grams: &HashMap<String, Gram>,
    int8: Int8Quant,
    quiet: bool,
) -> Vec<Result<Encoded, String>> {
    let multi = MultiProgress::new();
    if quiet {
        multi.set_draw_target(ProgressDrawTarget::hidden());
    }
    let total: u64 = candidates.iter().map(|t| t.elements() as u64).sum();
    let overall = multi.add(ProgressBar::new(total));
    if let Ok(style) = ProgressStyle::with_template(
        "{prefix:>10} [{elapsed_precise}] {wide_bar} {percent:>3}% of the weights, ETA {eta}",
    ) {
        overall.set_style(style);
    }
    overall.set_prefix(format!("{} {variant}", format.name()));
    let spinner = ProgressStyle::with_template("  {spinner} {msg} [{elapsed}]").ok();
    let results = candidates
        .par_iter()
        .map(|t| {
            let bar = multi.insert_before(&overall, ProgressBar::new_spinner());
            if let Some(s) = &spinner {
                bar.set_style(s.clone());
            }
            bar.set_message(format!("{} {:?}", t.name, t.shape));
            bar.enable_steady_tick(Duration::from_millis(200));
            let r = format.encode(variant, t, grams.get(&t.name), int8);
            bar.finish_and_clear();
            multi.remove(&bar);
            overall.inc(t.elements() as u64);
            r
        })
        .collect();
    overall.finish_and_clear();
    results
}

#[derive(Default)]
struct Summary {
    tensors: usize,
    calibrated: usize,
    weights: u64,
    original_bytes: u64,
    stored_bytes: u64,
}

impl Summary {
    fn add(&mut self, t: &Tensor<'_>, e: &Encoded) {
        self.tensors += 1;
        self.weights += t.elements() as u64;
        self.original_bytes += t.data.len() as u64;
        self.stored_bytes +=
            e.blob.len() as u64 + e.scales.as_ref().map_or(0, |s| 4 * s.len() as u64);
    }

    fn print(
        &self,
        format: &str,
        variant: &str,
        out: &std::path::Path,
        elapsed: Duration,
        kept: &[(String, String)],
    ) {
        println!(
            "compressed {} tensors ({} weights) with {format} ({variant}) in {:.1} s: {} -> {} \
             bytes, {:.3} bits per weight; wrote {}",
            self.tensors,
            self.weights,
            elapsed.as_secs_f64(),
            self.original_bytes,
            self.stored_bytes,
            self.stored_bytes as f64 * 8.0 / self.weights.max(1) as f64,
            out.display()
        );
        if !kept.is_empty() {
            println!("kept {} tensors as they are:", kept.len());
            for (name, reason) in kept {
                println!("  {name}: {reason}");
            }
        }
    }
}
