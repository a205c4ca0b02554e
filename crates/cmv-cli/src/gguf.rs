//! GGUF input: the tensors of a GGUF file (F32, F16, BF16, F64, I8 to I64 and Q8_0), as the
//! safetensors tensors the rest of the CLI works on.
//!
//! A GGUF tensor of dimensions `[ne0, ne1, ...]` (`ne0` varying fastest) becomes a row-major
//! tensor of shape `[..., ne1, ne0]`. A Q8_0 tensor (blocks of 32 int8 values with an fp16
//! scale `d`, value `d * q`) becomes its F32 values, and its int8 values and block scales are
//! kept beside ([`Q8`]) so that the int8 formats compress them exactly. The GGUF metadata
//! (hyperparameters, tokenizer) is not carried over.

use std::collections::HashMap;

use half::f16;
use safetensors::tensor::Dtype;

use crate::tensors::Owned;

/// The first four bytes of a GGUF file.
pub const MAGIC: &[u8; 4] = b"GGUF";

/// Weights per Q8_0 block.
pub const Q8_BLOCK: usize = 32;

/// A Q8_0 tensor's int8 values and block scales, row-major (`scales[i]` for values
/// `32 i .. 32 i + 32`).
#[derive(Clone, Debug, PartialEq)]
pub struct Q8 {
    /// The int8 values.
    pub q: Vec<i8>,
    /// The block scales, exactly as f32.
    pub scales: Vec<f32>,
}

/// A GGUF file's tensors.
#[derive(Debug)]
pub struct Gguf {
    /// Every tensor, as a safetensors tensor (Q8_0 ones dequantized to F32).
    pub tensors: Vec<(String, Owned)>,
    /// The int8 content of the Q8_0 tensors, by name.
    pub q8: HashMap<String, Q8>,
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8], String> {
        let end = usize::try_from(n)
            .ok()
            .and_then(|n| self.pos.checked_add(n))
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| {
                format!(
                    "the file is truncated: its {what} needs {n} bytes at offset {} but it holds \
                     {}",
                    self.pos,
                    self.bytes.len()
                )
            })?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u32(&mut self, what: &str) -> Result<u32, String> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self, what: &str) -> Result<u64, String> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    fn string(&mut self, what: &str) -> Result<String, String> {
        let n = self.u64(what)?;
        let b = self.take(n, what)?;
        String::from_utf8(b.to_vec()).map_err(|_| format!("its {what} is not UTF-8"))
    }

    /// Skips one metadata value of type `ty` (arrays nested at most 4 deep), returning it if
    /// it is a `u32` (for `general.alignment`).
    fn value(&mut self, ty: u32, what: &str, depth: u32) -> Result<Option<u64>, String> {
        let fixed = |ty: u32| match ty {
            0 | 1 | 7 => Some(1),
            2 | 3 => Some(2),
            4..=6 => Some(4),
            10..=12 => Some(8),
            _ => None,
        };
        match ty {
            4 => Ok(Some(u64::from(self.u32(what)?))),
            8 => self.string(what).map(|_| None),
            9 => {
                if depth >= 4 {
                    return Err(format!("its {what} nests arrays more than 4 deep"));
                }
                let elem = self.u32(what)?;
                let count = self.u64(what)?;
                if let Some(size) = fixed(elem) {
                    self.take(count.saturating_mul(size), what)?;
                } else {
                    // Each element takes at least 8 bytes (a string's length, an array's
                    // header): a count past that cannot be there.
                    if count > (self.bytes.len() - self.pos) as u64 / 8 {
                        return Err(format!("its {what} announces {count} elements"));
                    }
                    for _ in 0..count {
                        self.value(elem, what, depth + 1)?;
                    }
                }
                Ok(None)
            }
            t => match fixed(t) {
                Some(size) => self.take(size, what).map(|_| None),
                None => Err(format!("its {what} has the unknown value type {t}")),
            },
        }
    }
}

/// A ggml tensor type this reader takes: its safetensors dtype (F32 for Q8_0) and whether it
/// is Q8_0.
fn dtype_of(ty: u32) -> Option<(Dtype, bool)> {
    Some(match ty {
        0 => (Dtype::F32, false),
        1 => (Dtype::F16, false),
        8 => (Dtype::F32, true),
        24 => (Dtype::I8, false),
        25 => (Dtype::I16, false),
        26 => (Dtype::I32, false),
        27 => (Dtype::I64, false),
        28 => (Dtype::F64, false),
        30 => (Dtype::BF16, false),
        _ => return None,
    })
}

/// Parses a GGUF file (versions 2 and 3).
///
/// # Errors
/// A one-line reason: truncated, bad version, an unknown value or tensor type (the types read
/// are F32, F16, BF16, F64, I8, I16, I32, I64 and Q8_0), offsets outside the file.
pub fn parse(bytes: &[u8]) -> Result<Gguf, String> {
    let mut r = Reader { bytes, pos: 0 };
    if r.take(4, "magic")? != MAGIC {
        return Err("it does not start with GGUF".into());
    }
    let version = r.u32("version")?;
    if !(2..=3).contains(&version) {
        return Err(format!(
            "GGUF version {version} is not read (versions 2 and 3 are)"
        ));
    }
    let n_tensors = r.u64("tensor count")?;
    let n_kv = r.u64("metadata count")?;
    // A tensor info takes at least 28 bytes, a metadata entry at least 13.
    let rest = (bytes.len() - r.pos) as u64;
    if n_tensors > rest / 28 || n_kv > rest / 13 {
        return Err(format!(
            "the file is truncated or damaged: it announces {n_tensors} tensors and {n_kv} \
             metadata entries, more than its {} bytes hold",
            bytes.len()
        ));
    }
    let mut alignment = 32u64;
    for _ in 0..n_kv {
        let key = r.string("metadata key")?;
        let ty = r.u32("metadata type")?;
        let v = r.value(ty, &format!("metadata {key}"), 0)?;
        if key == "general.alignment" {
            alignment = v
                .filter(|a| a.is_power_of_two())
                .ok_or("its general.alignment is not a power-of-two u32")?;
        }
    }
    let mut infos = Vec::new();
    for _ in 0..n_tensors {
        let name = r.string("tensor name")?;
        let n_dims = r.u32("tensor dimensions")?;
        if !(1..=4).contains(&n_dims) {
            return Err(format!(
                "tensor {name} has {n_dims} dimensions (1 to 4 are read)"
            ));
        }
        let mut dims = Vec::new();
        for _ in 0..n_dims {
            let d = r.u64("tensor dimension")?;
            dims.push(usize::try_from(d).map_err(|_| format!("tensor {name}: dimension {d}"))?);
        }
        let ty = r.u32("tensor type")?;
        let offset = r.u64("tensor offset")?;
        infos.push((name, dims, ty, offset));
    }
    let data_start = (r.pos as u64).div_ceil(alignment) * alignment;
    let mut tensors = Vec::new();
    let mut q8 = HashMap::new();
    for (name, dims, ty, offset) in infos {
        let (dtype, is_q8) = dtype_of(ty).ok_or_else(|| {
            format!(
                "tensor {name} has ggml type {ty}, which cmv does not read (it reads F32, F16, \
                 BF16, F64, I8, I16, I32, I64 and Q8_0)"
            )
        })?;
        let n = dims
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or_else(|| format!("tensor {name}: {dims:?} overflows"))?;
        let bytes_needed = if is_q8 {
            if dims[0] % Q8_BLOCK != 0 {
                return Err(format!(
                    "Q8_0 tensor {name} has {} columns, not a multiple of 32",
                    dims[0]
                ));
            }
            n / Q8_BLOCK * 34
        } else {
            n.checked_mul(dtype.bitsize() / 8)
                .ok_or_else(|| format!("tensor {name} overflows"))?
        };
        let mut at = Reader {
            bytes,
            pos: usize::try_from(data_start.saturating_add(offset)).unwrap_or(usize::MAX),
        };
        if at.pos > bytes.len() {
            return Err(format!(
                "the file is truncated: tensor {name} starts past its end"
            ));
        }
        let data = at.take(bytes_needed as u64, &format!("tensor {name}"))?;
        let shape: Vec<usize> = dims.iter().rev().copied().collect();
        let data = if is_q8 {
            let mut values = Vec::with_capacity(n * 4);
            let mut q = Vec::with_capacity(n);
            let mut scales = Vec::with_capacity(n / Q8_BLOCK);
            for block in data.chunks_exact(34) {
                let d = f16::from_le_bytes([block[0], block[1]]).to_f32();
                scales.push(d);
                for &b in &block[2..] {
                    q.push(b as i8);
                    values.extend_from_slice(&(d * f32::from(b as i8)).to_le_bytes());
                }
            }
            q8.insert(name.clone(), Q8 { q, scales });
            values
        } else {
            data.to_vec()
        };
        tensors.push((name, Owned { dtype, shape, data }));
    }
    let mut names: Vec<&str> = tensors.iter().map(|(n, _)| n.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("it holds two tensors named {}", w[0]));
    }
    Ok(Gguf { tensors, q8 })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A GGUF v3 file: one metadata string, a 2x2 F32 tensor and a 1x32 Q8_0 tensor.
    fn small() -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend(3u32.to_le_bytes());
        out.extend(2u64.to_le_bytes());
        out.extend(1u64.to_le_bytes());
        let string = |out: &mut Vec<u8>, s: &str| {
            out.extend((s.len() as u64).to_le_bytes());
            out.extend(s.as_bytes());
        };
        string(&mut out, "general.name");
        out.extend(8u32.to_le_bytes());
        string(&mut out, "x");
        for (name, ty, dims, offset) in [("a", 0u32, [2u64, 2], 0u64), ("b", 8, [32, 1], 32)] {
            string(&mut out, name);
            out.extend(2u32.to_le_bytes());
            dims.iter().for_each(|d| out.extend(d.to_le_bytes()));
            out.extend(ty.to_le_bytes());
            out.extend(offset.to_le_bytes());
        }
        out.resize(out.len().div_ceil(32) * 32, 0);
        [1.0f32, 2.0, 3.0, 4.0]
            .iter()
            .for_each(|v| out.extend(v.to_le_bytes()));
        out.extend([0u8; 16]);
        out.extend(f16::from_f32(0.5).to_le_bytes());
        out.extend((0..32).map(|i| (i as i8 - 16) as u8));
        out
    }

    #[test]
    fn reads_shapes_values_and_q8_0() {
        let g = parse(&small()).unwrap();
        let (name, a) = &g.tensors[0];
        assert_eq!((name.as_str(), a.shape.as_slice()), ("a", &[2usize, 2][..]));
        assert_eq!(a.dtype, Dtype::F32);
        let (_, b) = &g.tensors[1];
        assert_eq!(b.shape, [1, 32]);
        let q8 = &g.q8["b"];
        assert_eq!(q8.scales, [0.5]);
        assert_eq!(q8.q[0], -16);
        assert_eq!(&b.data[..4], &(-8.0f32).to_le_bytes());
    }

    #[test]
    fn damaged_files_are_errors_never_panics() {
        let good = small();
        for n in 0..good.len() {
            assert!(parse(&good[..n]).is_err(), "truncated to {n}");
        }
        for i in 0..good.len() {
            for x in [0x01u8, 0x80, 0xff] {
                let mut bad = good.clone();
                bad[i] ^= x;
                let _ = parse(&bad);
            }
        }
    }
}
