//! `cmv inspect`.

use std::path::PathBuf;

use serde::Serialize;

use crate::error::Result;
use crate::stored;
use crate::tensors::{File, InputEncoding, dtype_name};

/// The arguments of `cmv inspect`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  cmv inspect model.spqr.safetensors
  cmv inspect model.spqr.safetensors --json | jq '.totals'")]
pub struct Args {
    /// A safetensors file (compressed by `cmv compress`, or any other).
    pub file: PathBuf,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// One part of a container.
#[derive(Debug, Serialize)]
pub struct PartRow {
    /// The format's name for it.
    pub name: &'static str,
    /// Bytes.
    pub bytes: u64,
    /// Whether a GPU product reads it.
    pub read_by_kernel: bool,
}

/// One tensor of the file.
#[derive(Debug, Serialize)]
pub struct Row {
    /// The tensor.
    pub name: String,
    /// Its format, `None` for a tensor stored as it is.
    pub format: Option<String>,
    /// The encoder variant.
    pub variant: Option<String>,
    /// The container version.
    pub container_version: Option<u32>,
    /// How the weights were fed to the encoder.
    pub input: Option<InputEncoding>,
    /// Whether the encoder was calibrated (`compress --calibrate`).
    pub calibrated: Option<bool>,
    /// The (original) shape.
    pub shape: Vec<usize>,
    /// The (original) dtype.
    pub dtype: String,
    /// Bits per weight stored: the container (`SizeBreakdown::bits_per_weight`) plus the row
    /// scales if any; the dtype's bits for a tensor stored as it is.
    pub bits_per_weight: f64,
    /// Bits per weight a GPU product reads (`SizeBreakdown::kernel_bits_per_weight`).
    pub kernel_bits_per_weight: Option<f64>,
    /// Bytes stored.
    pub stored_bytes: u64,
    /// Bytes of the original tensor.
    pub original_bytes: u64,
    /// The container's parts.
    pub parts: Vec<PartRow>,
}

/// The totals over the file.
#[derive(Debug, Serialize)]
pub struct Totals {
    /// Tensors.
    pub tensors: usize,
    /// Compressed tensors.
    pub compressed: usize,
    /// Weights in compressed tensors.
    pub compressed_weights: u64,
    /// Bytes stored for compressed tensors.
    pub compressed_stored_bytes: u64,
    /// Their original bytes.
    pub compressed_original_bytes: u64,
    /// Bits per weight over the compressed tensors.
    pub compressed_bits_per_weight: f64,
    /// Bytes of every tensor as stored.
    pub stored_bytes: u64,
    /// Bytes of every tensor as it was.
    pub original_bytes: u64,
}

/// The whole report.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The file.
    pub file: PathBuf,
    /// One row per tensor (scales tensors are counted in their tensor's row).
    pub tensors: Vec<Row>,
    /// Totals.
    pub totals: Totals,
}

/// The report on `path`.
///
/// # Errors
/// Unreadable or invalid file, damaged containers.
pub fn report(path: &std::path::Path) -> Result<Report> {
    let file = File::read(path)?;
    let parsed = file.parse()?;
    let mut rows = Vec::new();
    for name in &parsed.names {
        if stored::is_scales(&parsed, name) {
            continue;
        }
        let row = match stored::load(&parsed, name)? {
            Some(s) => {
                let b = s.loaded.size_breakdown();
                Row {
                    name: name.clone(),
                    format: Some(s.entry.format.clone()),
                    variant: Some(s.entry.variant.clone()),
                    container_version: Some(s.loaded.version()),
                    input: Some(s.entry.input),
                    calibrated: Some(s.entry.calibrated),
                    shape: s.entry.shape.to_vec(),
                    dtype: s.entry.dtype.clone(),
                    bits_per_weight: s.stored_bytes as f64 * 8.0 / s.elements().max(1) as f64,
                    kernel_bits_per_weight: Some(b.kernel_bits_per_weight()),
                    stored_bytes: s.stored_bytes,
                    original_bytes: s.original_bytes(),
                    parts: b
                        .parts
                        .iter()
                        .map(|p| PartRow {
                            name: p.name,
                            bytes: p.bytes,
                            read_by_kernel: p.read_by_kernel,
                        })
                        .collect(),
                }
            }
            None => {
                let t = parsed.tensor(name)?;
                Row {
                    name: name.clone(),
                    format: None,
                    variant: None,
                    container_version: None,
                    input: None,
                    calibrated: None,
                    shape: t.shape.clone(),
                    dtype: dtype_name(t.dtype),
                    bits_per_weight: t.dtype.bitsize() as f64,
                    kernel_bits_per_weight: None,
                    stored_bytes: t.data.len() as u64,
                    original_bytes: t.data.len() as u64,
                    parts: Vec::new(),
                }
            }
        };
        rows.push(row);
    }
    let compressed: Vec<&Row> = rows.iter().filter(|r| r.format.is_some()).collect();
    let weights: u64 = compressed
        .iter()
        .map(|r| r.shape.iter().product::<usize>() as u64)
        .sum();
    let c_stored: u64 = compressed.iter().map(|r| r.stored_bytes).sum();
    let totals = Totals {
        tensors: rows.len(),
        compressed: compressed.len(),
        compressed_weights: weights,
        compressed_stored_bytes: c_stored,
        compressed_original_bytes: compressed.iter().map(|r| r.original_bytes).sum(),
        compressed_bits_per_weight: c_stored as f64 * 8.0 / weights.max(1) as f64,
        stored_bytes: rows.iter().map(|r| r.stored_bytes).sum(),
        original_bytes: rows.iter().map(|r| r.original_bytes).sum(),
    };
    Ok(Report {
        file: path.to_owned(),
        tensors: rows,
        totals,
    })
}

/// Runs `cmv inspect`.
///
/// # Errors
/// As [`report`].
pub fn run(args: &Args) -> Result<()> {
    let r = report(&args.file)?;
    if args.json {
        // A report of strings and finite numbers always serializes.
        println!("{}", serde_json::to_string_pretty(&r).unwrap_or_default());
        return Ok(());
    }
    let shape = |s: &[usize]| {
        s.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("x")
    };
    let width = r
        .tensors
        .iter()
        .map(|t| t.name.len())
        .max()
        .unwrap_or(6)
        .max(6);
    println!(
        "{:<width$}  {:<14}  {:<6}  {:>12}  {:>8}  {:>9}  {:>12}  {:>12}",
        "tensor", "format", "dtype", "shape", "bits/w", "kernel", "stored", "original"
    );
    for t in &r.tensors {
        let format = match (&t.format, &t.variant) {
            (Some(f), Some(v)) => format!("{f}/{v}"),
            _ => "-".into(),
        };
        let kernel = t
            .kernel_bits_per_weight
            .map_or("-".into(), |k| format!("{k:.3}"));
        println!(
            "{:<width$}  {:<14}  {:<6}  {:>12}  {:>8.3}  {:>9}  {:>12}  {:>12}",
            t.name,
            format,
            t.dtype,
            shape(&t.shape),
            t.bits_per_weight,
            kernel,
            t.stored_bytes,
            t.original_bytes
        );
    }
    let s = &r.totals;
    println!(
        "{} tensors, {} compressed ({} weights: {} -> {} bytes, {:.3} bits per weight); file \
         {} -> {} bytes ({:.2}x)",
        s.tensors,
        s.compressed,
        s.compressed_weights,
        s.compressed_original_bytes,
        s.compressed_stored_bytes,
        s.compressed_bits_per_weight,
        s.original_bytes,
        s.stored_bytes,
        s.original_bytes as f64 / s.stored_bytes.max(1) as f64
    );
    Ok(())
}
