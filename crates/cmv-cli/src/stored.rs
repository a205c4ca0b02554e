//! The compressed tensors of a cmv file, loaded and checked: what `inspect`, `decompress` and
//! `eval` share.

use safetensors::tensor::Dtype;

use crate::error::{CliError, Result};
use crate::formats::{self, Loaded, Restored};
use crate::tensors::{Entry, InputEncoding, Parsed, SCALES_SUFFIX, dtype_from_name, floats};

/// One compressed tensor of a file: its metadata, its container loaded (and so checked), its
/// scales.
pub struct Stored {
    /// The tensor's name.
    pub name: String,
    /// Its cmv metadata.
    pub entry: Entry,
    /// The original dtype.
    pub dtype: Dtype,
    /// The container, loaded.
    pub loaded: Box<dyn Loaded>,
    /// Scales ([`InputEncoding::has_scales`]).
    pub scales: Option<Vec<f32>>,
    /// Bytes stored for it: the container and the scales.
    pub stored_bytes: u64,
}

impl std::fmt::Debug for Stored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stored")
            .field("name", &self.name)
            .field("entry", &self.entry)
            .finish_non_exhaustive()
    }
}

impl Stored {
    /// Elements of the original tensor.
    pub fn elements(&self) -> u64 {
        self.entry.shape[0] as u64 * self.entry.shape[1] as u64
    }

    /// Bytes of the original tensor.
    pub fn original_bytes(&self) -> u64 {
        self.elements() * (self.dtype.bitsize() as u64) / 8
    }

    /// Decodes it.
    ///
    /// # Errors
    /// [`CliError::Damaged`] for a container that does not decode or values that cannot have
    /// been encoded.
    pub fn restore(&self, parsed: &Parsed<'_>) -> Result<Restored> {
        self.loaded
            .restore(self.entry.input, self.dtype, self.scales.as_deref())
            .map_err(|reason| damaged(parsed, &self.name, reason))
    }
}

fn damaged(parsed: &Parsed<'_>, name: &str, reason: impl Into<String>) -> CliError {
    CliError::Damaged {
        path: parsed.path.to_owned(),
        tensor: name.to_owned(),
        reason: reason.into(),
    }
}

/// Whether tensor `name` is the scales of a compressed tensor of `parsed`.
pub fn is_scales(parsed: &Parsed<'_>, name: &str) -> bool {
    name.strip_suffix(SCALES_SUFFIX)
        .is_some_and(|base| matches!(parsed.entry(base), Ok(Some(e)) if e.input.has_scales()))
}

/// Tensor `name` of `parsed` as a compressed tensor, or `None` for a tensor stored as it is.
///
/// # Errors
/// [`CliError::Damaged`]: metadata that does not parse, a format this build does not know, a
/// container the format refuses (truncated, checksum, fields), a shape other than the
/// metadata's, missing or malformed scales.
pub fn load(parsed: &Parsed<'_>, name: &str) -> Result<Option<Stored>> {
    let Some(entry) = parsed.entry(name)? else {
        return Ok(None);
    };
    let t = parsed.tensor(name)?;
    let format = formats::find(&entry.format).ok_or_else(|| {
        damaged(
            parsed,
            name,
            format!(
                "its format {:?} is not one this build knows ({}); use the build that wrote it",
                entry.format,
                formats::names()
            ),
        )
    })?;
    let dtype = dtype_from_name(&entry.dtype)
        .ok_or_else(|| damaged(parsed, name, format!("unknown dtype {:?}", entry.dtype)))?;
    if t.dtype != Dtype::U8 || t.shape.len() != 1 {
        return Err(damaged(
            parsed,
            name,
            format!(
                "a container is a 1-D U8 tensor, but this one is {:?} of shape {:?}",
                t.dtype, t.shape
            ),
        ));
    }
    let loaded = format
        .load(t.data)
        .map_err(|e| damaged(parsed, name, format!("its {} container: {e}", entry.format)))?;
    let shape = [loaded.rows(), loaded.cols()];
    if shape != entry.shape {
        return Err(damaged(
            parsed,
            name,
            format!(
                "its container holds a {}x{} matrix but its metadata says {}x{}",
                shape[0], shape[1], entry.shape[0], entry.shape[1]
            ),
        ));
    }
    let mut stored_bytes = t.data.len() as u64;
    let scales_shape = match entry.input {
        InputEncoding::Int8Rows => Some(vec![shape[0]]),
        InputEncoding::Int8Blocks => Some(vec![shape[0], shape[1] / crate::gguf::Q8_BLOCK]),
        InputEncoding::Float | InputEncoding::Exact => None,
    };
    let scales = if let Some(want) = scales_shape {
        let sname = format!("{name}{SCALES_SUFFIX}");
        let s = parsed
            .tensor(&sname)
            .map_err(|_| damaged(parsed, name, format!("its scales {sname} are missing")))?;
        if s.dtype != Dtype::F32 || s.shape != want {
            return Err(damaged(
                parsed,
                name,
                format!(
                    "its scales {sname} must be F32 of shape {want:?}, not {:?} {:?}",
                    s.dtype, s.shape
                ),
            ));
        }
        let crc = crc32fast::hash(s.data);
        if entry.scales_crc32 != Some(crc) {
            return Err(damaged(
                parsed,
                name,
                format!(
                    "its scales {sname} hash to CRC-32 {crc:#010x} but its metadata says {}",
                    entry
                        .scales_crc32
                        .map_or("nothing".to_owned(), |c| format!("{c:#010x}"))
                ),
            ));
        }
        stored_bytes += s.data.len() as u64;
        floats(Dtype::F32, s.data)
    } else {
        None
    };
    Ok(Some(Stored {
        name: name.to_owned(),
        entry,
        dtype,
        loaded,
        scales,
        stored_bytes,
    }))
}
