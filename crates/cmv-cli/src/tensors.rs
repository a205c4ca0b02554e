//! Safetensors files: reading (with the CLI's errors), dtype conversions, the cmv metadata
//! of a compressed tensor, and the atomic write of an output file.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use half::{bf16, f16};
use safetensors::tensor::{Dtype, SafeTensorError};
use safetensors::{SafeTensors, View};
use serde::{Deserialize, Serialize};

use crate::error::{CliError, Result};
use crate::gguf::{self, Q8};

/// The `__metadata__` key that marks a file written by `cmv compress`, and its value.
pub const FILE_KEY: &str = "cmv";
/// The version of the cmv layout inside safetensors (docs/CLI.md), the value of [`FILE_KEY`].
pub const FILE_VERSION: &str = "1";
/// The prefix of the per-tensor metadata keys: `cmv.<tensor>`.
pub const TENSOR_KEY_PREFIX: &str = "cmv.";
/// The suffix of the tensor that holds the scales of an int8-quantized tensor.
pub const SCALES_SUFFIX: &str = ".cmv_scales";

/// A safetensors file, mapped into memory (a GGUF file is converted to one in memory when
/// read).
#[derive(Debug)]
pub struct File {
    /// Where it was read from.
    pub path: PathBuf,
    bytes: Bytes,
    q8: HashMap<String, Q8>,
}

/// A file's bytes: mapped, or in memory.
#[derive(Debug)]
enum Bytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

/// Maps `path` (an empty file is read as no bytes: it cannot be mapped).
fn map(path: &Path) -> std::io::Result<Bytes> {
    let f = fs::File::open(path)?;
    let meta = f.metadata()?;
    if meta.is_dir() {
        return Err(std::io::ErrorKind::IsADirectory.into());
    }
    if meta.len() == 0 {
        return Ok(Bytes::Owned(Vec::new()));
    }
    // SAFETY: the map is read-only and lives as long as `File`; a model file changed by
    // another process while cmv reads it is outside what cmv supports (as for every tool that
    // maps safetensors files): the values read could change, but every length and offset is
    // checked against the map's length before use, so no access leaves the map.
    let m = unsafe { memmap2::Mmap::map(&f)? };
    Ok(Bytes::Mapped(m))
}

impl File {
    /// Reads `path`.
    ///
    /// # Errors
    /// [`CliError::Read`] when it cannot be read, [`CliError::NotSafetensors`] when it is
    /// not a (complete) safetensors file, [`CliError::NotGguf`] for a GGUF file this build
    /// cannot read.
    pub fn read(path: &Path) -> Result<Self> {
        let mut bytes = map(path).map_err(|source| CliError::Read {
            path: path.to_owned(),
            source,
        })?;
        let mut q8 = HashMap::new();
        if bytes.starts_with(gguf::MAGIC) {
            let not = |reason: String| CliError::NotGguf {
                path: path.to_owned(),
                reason,
            };
            let g = gguf::parse(&bytes).map_err(not)?;
            let st = safetensors::serialize(g.tensors.iter().map(|(n, t)| (n.as_str(), t)), None)
                .map_err(|e| not(e.to_string()))?;
            bytes = Bytes::Owned(st);
            q8 = g.q8;
        }
        let file = Self {
            path: path.to_owned(),
            bytes,
            q8,
        };
        file.parse()?;
        Ok(file)
    }

    /// The parsed file (checked once by [`File::read`]).
    ///
    /// # Errors
    /// [`CliError::NotSafetensors`].
    pub fn parse(&self) -> Result<Parsed<'_>> {
        let not = |e: SafeTensorError| {
            let hint = match e {
                SafeTensorError::MetadataIncompleteBuffer
                | SafeTensorError::InvalidHeaderLength => {
                    ": the file is truncated or has trailing bytes; copy or download it again"
                }
                _ => ": pass a .safetensors or .gguf file",
            };
            CliError::NotSafetensors {
                path: self.path.clone(),
                reason: e.to_string(),
                hint,
            }
        };
        let (_, meta) = SafeTensors::read_metadata(&self.bytes).map_err(not)?;
        let tensors = SafeTensors::deserialize(&self.bytes).map_err(not)?;
        let metadata = meta.metadata().clone().unwrap_or_default();
        let mut names: Vec<String> = tensors.names().into_iter().map(String::from).collect();
        names.sort();
        Ok(Parsed {
            path: &self.path,
            q8: &self.q8,
            tensors,
            metadata,
            names,
        })
    }
}

/// A parsed safetensors file.
#[derive(Debug)]
pub struct Parsed<'a> {
    /// Where it was read from.
    pub path: &'a Path,
    tensors: SafeTensors<'a>,
    q8: &'a HashMap<String, Q8>,
    /// Its `__metadata__`.
    pub metadata: HashMap<String, String>,
    /// Its tensor names, sorted.
    pub names: Vec<String>,
}

impl<'a> Parsed<'a> {
    /// Tensor `name`.
    ///
    /// # Errors
    /// [`CliError::NoSuchTensor`].
    pub fn tensor(&self, name: &str) -> Result<Tensor<'a>> {
        let view = self
            .tensors
            .tensor(name)
            .map_err(|_| CliError::NoSuchTensor {
                path: self.path.to_owned(),
                tensor: name.to_owned(),
            })?;
        Ok(Tensor {
            name: name.to_owned(),
            dtype: view.dtype(),
            shape: view.shape().to_vec(),
            data: view.data(),
            q8_0: self.q8.get(name),
        })
    }

    /// Whether the file was written by `cmv compress`.
    pub fn is_cmv(&self) -> bool {
        self.metadata.contains_key(FILE_KEY)
    }

    /// The cmv metadata of tensor `name`, if it is a compressed one.
    ///
    /// # Errors
    /// [`CliError::Damaged`] for metadata that does not parse.
    pub fn entry(&self, name: &str) -> Result<Option<Entry>> {
        let Some(text) = self.metadata.get(&format!("{TENSOR_KEY_PREFIX}{name}")) else {
            return Ok(None);
        };
        serde_json::from_str(text)
            .map(Some)
            .map_err(|e| CliError::Damaged {
                path: self.path.to_owned(),
                tensor: name.to_owned(),
                reason: format!("its cmv metadata does not parse ({e})"),
            })
    }

    /// The metadata keys that are not cmv's (kept from the original file).
    pub fn foreign_metadata(&self) -> HashMap<String, String> {
        self.metadata
            .iter()
            .filter(|(k, _)| k.as_str() != FILE_KEY && !k.starts_with(TENSOR_KEY_PREFIX))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

/// One tensor of a file, borrowed.
#[derive(Clone, Debug)]
pub struct Tensor<'a> {
    /// Its name.
    pub name: String,
    /// Its dtype.
    pub dtype: Dtype,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Its bytes (little-endian).
    pub data: &'a [u8],
    /// For a GGUF Q8_0 tensor (whose `data` are its F32 values), its int8 values and block
    /// scales.
    pub q8_0: Option<&'a Q8>,
}

impl Tensor<'_> {
    /// Elements.
    pub fn elements(&self) -> usize {
        self.shape.iter().product()
    }

    /// The values as f32, for F32, F16 and BF16 tensors.
    pub fn floats(&self) -> Option<Vec<f32>> {
        floats(self.dtype, self.data)
    }

    /// An owned copy.
    pub fn to_owned_tensor(&self) -> Owned {
        Owned {
            dtype: self.dtype,
            shape: self.shape.clone(),
            data: self.data.to_vec(),
        }
    }
}

/// The values of a F32, F16 or BF16 tensor as f32 (exact); `None` for other dtypes.
pub fn floats(dtype: Dtype, data: &[u8]) -> Option<Vec<f32>> {
    Some(match dtype {
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
        _ => return None,
    })
}

/// The values of a tensor of any numeric dtype as f64 (exact for every dtype but 64-bit
/// integers beyond 2^53); `None` for dtypes without a plain numeric reading (bool, fp8,
/// fp4/fp6, complex).
pub fn values_f64(dtype: Dtype, data: &[u8]) -> Option<Vec<f64>> {
    fn le<const N: usize>(data: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
        data.chunks_exact(N).map(|b| {
            let mut a = [0u8; N];
            a.copy_from_slice(b);
            a
        })
    }
    Some(match dtype {
        Dtype::F32 | Dtype::F16 | Dtype::BF16 => {
            floats(dtype, data)?.into_iter().map(f64::from).collect()
        }
        Dtype::F64 => le::<8>(data).map(f64::from_le_bytes).collect(),
        Dtype::I8 => data.iter().map(|&b| f64::from(b as i8)).collect(),
        Dtype::U8 => data.iter().map(|&b| f64::from(b)).collect(),
        Dtype::I16 => le::<2>(data)
            .map(|b| f64::from(i16::from_le_bytes(b)))
            .collect(),
        Dtype::U16 => le::<2>(data)
            .map(|b| f64::from(u16::from_le_bytes(b)))
            .collect(),
        Dtype::I32 => le::<4>(data)
            .map(|b| f64::from(i32::from_le_bytes(b)))
            .collect(),
        Dtype::U32 => le::<4>(data)
            .map(|b| f64::from(u32::from_le_bytes(b)))
            .collect(),
        Dtype::I64 => le::<8>(data)
            .map(|b| i64::from_le_bytes(b) as f64)
            .collect(),
        Dtype::U64 => le::<8>(data)
            .map(|b| u64::from_le_bytes(b) as f64)
            .collect(),
        _ => return None,
    })
}

/// `values` in `dtype` (F32, F16 or BF16; rounded to nearest), little-endian bytes.
pub fn float_bytes(values: &[f32], dtype: FloatDtype) -> Vec<u8> {
    match dtype {
        FloatDtype::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        FloatDtype::F16 => values
            .iter()
            .flat_map(|&v| f16::from_f32(v).to_le_bytes())
            .collect(),
        FloatDtype::BF16 => values
            .iter()
            .flat_map(|&v| bf16::from_f32(v).to_le_bytes())
            .collect(),
    }
}

/// The float dtypes weights come in and go out as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
pub enum FloatDtype {
    /// IEEE fp32.
    F32,
    /// IEEE fp16.
    F16,
    /// bfloat16.
    BF16,
}

impl FloatDtype {
    /// The float dtype of `d`, if it is one.
    pub fn of(d: Dtype) -> Option<Self> {
        match d {
            Dtype::F32 => Some(Self::F32),
            Dtype::F16 => Some(Self::F16),
            Dtype::BF16 => Some(Self::BF16),
            _ => None,
        }
    }

    /// As a safetensors dtype.
    pub fn dtype(self) -> Dtype {
        match self {
            Self::F32 => Dtype::F32,
            Self::F16 => Dtype::F16,
            Self::BF16 => Dtype::BF16,
        }
    }
}

/// The name safetensors gives `d` (`"F16"`).
pub fn dtype_name(d: Dtype) -> String {
    format!("{d:?}")
}

/// A safetensors dtype from its name.
pub fn dtype_from_name(name: &str) -> Option<Dtype> {
    serde_json::from_value(serde_json::Value::String(name.to_owned())).ok()
}

/// How the weights were fed to a format's encoder (docs/CLI.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InputEncoding {
    /// Float weights as f32 (exact for F32, F16 and BF16).
    Float,
    /// Integer weights as they are: lossless.
    Exact,
    /// Float weights quantized per row to int8 (`q = round_half_even(w / s)`,
    /// `s = max|w| / 127`), the scales in the tensor `<name>.cmv_scales` (F32, shape
    /// `[rows]`); formats of unsigned integers store `q + 127`.
    Int8Rows,
    /// A GGUF Q8_0 tensor's int8 values, exactly; its block scales (one per 32 weights of a
    /// row) in the tensor `<name>.cmv_scales` (F32, shape `[rows, cols / 32]`); formats of
    /// unsigned integers store `q + 127`.
    Int8Blocks,
}

impl InputEncoding {
    /// Whether a scales tensor goes with it.
    pub fn has_scales(self) -> bool {
        matches!(self, Self::Int8Rows | Self::Int8Blocks)
    }
}

/// The cmv metadata of one compressed tensor: the JSON value of `cmv.<tensor>`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The format's name (`CompressedMatrix::NAME`).
    pub format: String,
    /// The encoder variant.
    pub variant: String,
    /// The container version (also in the container's own prefix).
    pub container_version: u32,
    /// The original shape, `[rows, cols]`.
    pub shape: [usize; 2],
    /// The original dtype (`"F16"`).
    pub dtype: String,
    /// How the weights were fed to the encoder.
    pub input: InputEncoding,
    /// Whether the encoder was calibrated on recorded activations (`compress --calibrate`).
    #[serde(default)]
    pub calibrated: bool,
    /// CRC-32 of the scales tensor's bytes, for the inputs that have one (the containers
    /// carry their own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scales_crc32: Option<u32>,
}

/// An owned tensor, to write.
#[derive(Clone, Debug)]
pub struct Owned {
    /// Its dtype.
    pub dtype: Dtype,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Its bytes.
    pub data: Vec<u8>,
}

impl View for &Owned {
    fn dtype(&self) -> Dtype {
        self.dtype
    }

    fn shape(&self) -> &[usize] {
        &self.shape
    }

    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.data)
    }

    fn data_len(&self) -> usize {
        self.data.len()
    }
}

/// Writes a safetensors file to `path`, the same bytes for the same tensors and metadata:
/// the header's keys sorted (`__metadata__`, then the tensors in data order), the tensors laid
/// out by decreasing dtype alignment then name (as the safetensors crate does, so each tensor
/// is aligned to its dtype), the header padded with spaces to a multiple of 8 bytes.
fn serialize(
    path: &Path,
    tensors: &[(String, Owned)],
    metadata: &HashMap<String, String>,
) -> std::io::Result<()> {
    use std::io::Write;

    let mut order: Vec<&(String, Owned)> = tensors.iter().collect();
    order.sort_by(|(ln, l), (rn, r)| r.dtype.cmp(&l.dtype).then(ln.cmp(rn)));
    let mut header = String::from("{");
    let mut entries = Vec::new();
    if !metadata.is_empty() {
        let sorted: std::collections::BTreeMap<&String, &String> = metadata.iter().collect();
        entries.push(format!(
            "\"__metadata__\":{}",
            serde_json::to_string(&sorted).map_err(std::io::Error::other)?
        ));
    }
    let mut offset = 0usize;
    for (name, t) in &order {
        let entry = serde_json::json!({
            "dtype": t.dtype,
            "shape": t.shape,
            "data_offsets": [offset, offset + t.data.len()],
        });
        entries.push(format!(
            "{}:{}",
            serde_json::to_string(name).map_err(std::io::Error::other)?,
            entry
        ));
        offset += t.data.len();
    }
    header.push_str(&entries.join(","));
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut f = std::io::BufWriter::with_capacity(1 << 20, fs::File::create(path)?);
    f.write_all(&(header.len() as u64).to_le_bytes())?;
    f.write_all(header.as_bytes())?;
    for (_, t) in &order {
        f.write_all(&t.data)?;
    }
    f.into_inner().map_err(|e| e.into_error())?.sync_all()
}

/// Refuses an existing `path` unless `force`.
///
/// # Errors
/// [`CliError::OutputExists`].
pub fn check_output(path: &Path, force: bool) -> Result<()> {
    if !force && path.exists() {
        return Err(CliError::OutputExists {
            path: path.to_owned(),
        });
    }
    Ok(())
}

/// Writes a safetensors file to a temporary name beside `path`, then renames it to `path`:
/// `path` is either absent, as it was, or complete.
///
/// # Errors
/// [`CliError::OutputExists`] (checked again), [`CliError::Write`].
pub fn write_atomic(
    path: &Path,
    tensors: &[(String, Owned)],
    metadata: HashMap<String, String>,
    force: bool,
) -> Result<()> {
    check_output(path, force)?;
    let write_err = |reason: String| CliError::Write {
        path: path.to_owned(),
        reason,
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    let file_name = path
        .file_name()
        .ok_or_else(|| write_err("the path names no file".into()))?;
    let tmp = dir.join(format!(
        ".{}.cmv-partial-{}",
        file_name.to_string_lossy(),
        std::process::id()
    ));
    let result = serialize(&tmp, tensors, &metadata)
        .and_then(|()| fs::rename(&tmp, path))
        .map_err(|e| e.to_string());
    if let Err(e) = result {
        // Best effort: the temporary file may not exist.
        let _ = fs::remove_file(&tmp);
        return Err(write_err(e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_files_read_back_and_are_reproducible() {
        let dir = std::env::temp_dir().join(format!("cmv-serialize-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let tensors = vec![
            (
                "b \"quoted\"".to_owned(),
                Owned {
                    dtype: Dtype::U8,
                    shape: vec![3],
                    data: vec![1, 2, 3],
                },
            ),
            (
                "a".to_owned(),
                Owned {
                    dtype: Dtype::F32,
                    shape: vec![1, 2],
                    data: [1.5f32, -2.0]
                        .iter()
                        .flat_map(|v| v.to_le_bytes())
                        .collect(),
                },
            ),
        ];
        let meta: HashMap<String, String> = (0..20)
            .map(|i| (format!("k{i}"), format!("v{i}")))
            .collect();
        let (p1, p2) = (dir.join("1.safetensors"), dir.join("2.safetensors"));
        serialize(&p1, &tensors, &meta).unwrap();
        let meta2: HashMap<String, String> = meta.clone().into_iter().collect();
        serialize(&p2, &tensors, &meta2).unwrap();
        let (b1, b2) = (fs::read(&p1).unwrap(), fs::read(&p2).unwrap());
        assert_eq!(b1, b2);
        let st = SafeTensors::deserialize(&b1).unwrap();
        assert_eq!(st.tensor("b \"quoted\"").unwrap().data(), [1, 2, 3]);
        assert_eq!(st.tensor("a").unwrap().shape(), [1, 2]);
        let (_, m) = SafeTensors::read_metadata(&b1).unwrap();
        assert_eq!(m.metadata().as_ref().unwrap()["k7"], "v7");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn dtype_names_round_trip() {
        for d in [Dtype::F32, Dtype::F16, Dtype::BF16, Dtype::I8, Dtype::U64] {
            assert_eq!(dtype_from_name(&dtype_name(d)), Some(d));
        }
        assert_eq!(dtype_from_name("F17"), None);
    }

    #[test]
    fn entries_are_json() {
        let e = Entry {
            format: "spqr".into(),
            variant: "csr".into(),
            container_version: 2,
            shape: [3, 5],
            dtype: "F16".into(),
            input: InputEncoding::Int8Rows,
            calibrated: false,
            scales_crc32: Some(7),
        };
        let text = serde_json::to_string(&e).unwrap();
        assert!(text.contains("\"input\":\"int8-rows\""), "{text}");
        assert_eq!(serde_json::from_str::<Entry>(&text).unwrap(), e);
    }

    #[test]
    fn float_conversions_are_exact_where_they_can_be() {
        let v = [1.5f32, -0.25, 3.0];
        for d in [FloatDtype::F32, FloatDtype::F16, FloatDtype::BF16] {
            let b = float_bytes(&v, d);
            assert_eq!(floats(d.dtype(), &b).unwrap(), v);
        }
        assert_eq!(values_f64(Dtype::I8, &[0xff, 3]).unwrap(), [-1.0, 3.0]);
    }
}
