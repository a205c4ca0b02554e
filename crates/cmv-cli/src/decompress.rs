//! `cmv decompress`.

use std::path::PathBuf;

use rayon::prelude::*;

use crate::error::Result;
use crate::formats::{Restored, default_float_dtype};
use crate::stored;
use crate::tensors::{File, FloatDtype, Owned, Parsed, float_bytes, write_atomic};

/// The arguments of `cmv decompress`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  cmv decompress model.spqr.safetensors -o model.dequantized.safetensors
  cmv decompress model.spqr.safetensors -o model.f32.safetensors --dtype f32 --force")]
pub struct Args {
    /// A file written by `cmv compress`.
    pub file: PathBuf,
    /// The output file (a plain safetensors file).
    #[arg(short, long)]
    pub output: PathBuf,
    /// The dtype of decompressed float tensors (default: each tensor's original dtype).
    /// Integer tensors compressed losslessly come back in their own dtype; tensors that were
    /// not compressed are copied as they are.
    #[arg(long, value_enum)]
    pub dtype: Option<FloatDtype>,
    /// Overwrite the output if it exists.
    #[arg(long)]
    pub force: bool,
}

/// Tensor `name` of `parsed` as a plain tensor: decoded if compressed (floats in `dtype`, or
/// their original dtype), else as it is.
///
/// # Errors
/// A damaged container, a missing tensor.
pub fn decode_one(parsed: &Parsed<'_>, name: &str, dtype: Option<FloatDtype>) -> Result<Owned> {
    Ok(match stored::load(parsed, name)? {
        None => parsed.tensor(name)?.to_owned_tensor(),
        Some(s) => {
            let shape = s.entry.shape.to_vec();
            match s.restore(parsed)? {
                Restored::Float(v) => {
                    let d = dtype.unwrap_or_else(|| default_float_dtype(s.dtype));
                    Owned {
                        dtype: d.dtype(),
                        shape,
                        data: float_bytes(&v, d),
                    }
                }
                Restored::Raw { dtype, data } => Owned { dtype, shape, data },
            }
        }
    })
}

/// The names of `parsed`'s tensors as a plain file has them: the scales tensors left out.
pub fn plain_names<'p>(parsed: &'p Parsed<'_>) -> Vec<&'p String> {
    parsed
        .names
        .iter()
        .filter(|n| !stored::is_scales(parsed, n))
        .collect()
}

/// Every tensor of `parsed` as a plain tensor ([`decode_one`]), scales dropped.
///
/// # Errors
/// Damaged containers.
pub fn decode_all(parsed: &Parsed<'_>, dtype: Option<FloatDtype>) -> Result<Vec<(String, Owned)>> {
    plain_names(parsed)
        .par_iter()
        .map(|name| Ok(((*name).clone(), decode_one(parsed, name, dtype)?)))
        .collect()
}

/// Runs `cmv decompress`.
///
/// # Errors
/// Unreadable or invalid input, damaged containers, an existing output without `--force`, a
/// write error.
pub fn run(args: &Args) -> Result<()> {
    let file = File::read(&args.file)?;
    let parsed = file.parse()?;
    crate::tensors::check_output(&args.output, args.force)?;
    let tensors = decode_all(&parsed, args.dtype)?;
    write_atomic(
        &args.output,
        &tensors,
        parsed.foreign_metadata(),
        args.force,
    )?;
    println!(
        "wrote {} tensors to {}",
        tensors.len(),
        args.output.display()
    );
    Ok(())
}
