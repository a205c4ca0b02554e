//! `cmv eval`: the weight error of a compressed model against the original.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde::Serialize;

use crate::decompress::decode_all;
use crate::error::{CliError, Result};
use crate::tensors::{File, values_f64};

/// The arguments of `cmv eval`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  cmv eval model.safetensors model.spqr.safetensors
  cmv eval model.safetensors model.spqr.safetensors --json | jq '.mean_relative_error'")]
pub struct Args {
    /// The original model.
    pub original: PathBuf,
    /// The compressed model (from `cmv compress`), or a decompressed one.
    pub compressed: PathBuf,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
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
}

/// The report on `original` against `compressed`.
///
/// # Errors
/// Unreadable or invalid files, damaged containers, files whose tensors do not correspond.
pub fn report(original: &std::path::Path, compressed: &std::path::Path) -> Result<Report> {
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
    let decoded = decode_all(&b, Some(crate::tensors::FloatDtype::F32))?;
    let a_names: BTreeSet<&str> = a.names.iter().map(String::as_str).collect();
    if let Some((extra, _)) = decoded.iter().find(|(n, _)| !a_names.contains(n.as_str())) {
        return Err(mismatch(format!("tensor {extra} is not in the original")));
    }
    let mut rows = Vec::new();
    for name in &a.names {
        let t = a.tensor(name)?;
        let (_, d) = decoded.iter().find(|(n, _)| n == name).ok_or_else(|| {
            mismatch(format!("tensor {name} is missing from the compressed file"))
        })?;
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
            continue;
        };
        let (mut num, mut den, mut max) = (0f64, 0f64, 0f64);
        for (x, y) in w.iter().zip(&w2) {
            num += (x - y) * (x - y);
            den += x * x;
            max = max.max((x - y).abs());
        }
        let relative_error = match (num, den) {
            (0.0, _) => 0.0,
            (_, 0.0) => f64::INFINITY,
            _ => (num / den).sqrt(),
        };
        let format = b.entry(name)?.map(|e| e.format);
        let counted = format.is_some() || (!b.is_cmv() && t.shape.len() == 2);
        rows.push(Row {
            counted,
            name: name.clone(),
            format,
            shape: t.shape.clone(),
            relative_error,
            max_abs_error: max,
        });
    }
    let errors: Vec<f64> = rows
        .iter()
        .filter(|r| r.counted)
        .map(|r| r.relative_error)
        .collect();
    Ok(Report {
        original: original.to_owned(),
        compressed: compressed.to_owned(),
        counted_tensors: errors.len(),
        mean_relative_error: errors.iter().sum::<f64>() / errors.len().max(1) as f64,
        max_relative_error: errors.iter().copied().fold(0.0, f64::max),
        tensors: rows,
    })
}

/// Runs `cmv eval`.
///
/// # Errors
/// As [`report`].
pub fn run(args: &Args) -> Result<()> {
    let r = report(&args.original, &args.compressed)?;
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
    Ok(())
}
