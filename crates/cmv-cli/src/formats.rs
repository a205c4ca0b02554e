//! The formats the CLI knows: [`registry`] has one line per format, generic over
//! [`CompressedMatrix`].
//!
//! A format plugs in with one line in [`registry`] and, if the CLI does not know it yet, one
//! [`Decode`] impl (its CPU decoder: the trait has none) below. How tensors are fed to it
//! follows from its `Weight` type ([`CliWeight`]): f32 formats take F32/F16/BF16 tensors
//! as they are; integer formats take integer tensors as they are (lossless) and float tensors
//! quantized per row to int8, with the scales stored beside (docs/CLI.md).

use std::marker::PhantomData;

use cmv_format::{CompressedMatrix, Limits, SizeBreakdown};
use safetensors::tensor::Dtype;

use crate::bert::Gram;
use crate::tensors::{FloatDtype, InputEncoding, Tensor, dtype_name};

/// Every format the CLI compresses with, one line each.
pub fn registry() -> Vec<Box<dyn Format>> {
    vec![
        register::<spqr_format::SpqrMatrix>(),
        register::<sbvr_format::SbvrMatrix>(),
        register::<vq_codebook::VqMatrix>(),
        register::<ans_codec::AnsMatrix>(),
        register::<beam_pack::PackedMatrix>(),
    ]
}

/// The format named `name`.
pub fn find(name: &str) -> Option<Box<dyn Format>> {
    registry().into_iter().find(|f| f.name() == name)
}

/// The registered names, comma-separated.
pub fn names() -> String {
    registry()
        .iter()
        .map(|f| f.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// What the CLI needs of a format beyond [`CompressedMatrix`]: its CPU decoder, and how its
/// encoder takes a calibration (if it does).
pub trait Decode: CompressedMatrix {
    /// The `rows * cols` weights, row-major.
    ///
    /// # Errors
    /// The format's (a stream that does not decode).
    fn decode(&self) -> Result<Vec<Self::Weight>, Self::Error>;

    /// Sets `options` to calibrate on `gram` (`X^T X` of the layer's recorded inputs);
    /// whether the format uses it (default: it does not).
    fn calibrate(options: &mut Self::Options, gram: &Gram) -> bool {
        let _ = (options, gram);
        false
    }
}

impl Decode for spqr_format::SpqrMatrix {
    fn decode(&self) -> Result<Vec<f32>, Self::Error> {
        Ok(self.dequantize())
    }

    /// GPTQ on the Gram matrix, columns in order of decreasing `diag(H)` (as the accuracy
    /// report's `spqr-gptq`).
    fn calibrate(options: &mut spqr_format::QuantizeOptions, gram: &Gram) -> bool {
        options.calibration = Some(spqr_format::Calibration::Gram { h: gram.h.clone() });
        options.permute = true;
        true
    }
}

impl Decode for sbvr_format::SbvrMatrix {
    fn decode(&self) -> Result<Vec<f32>, Self::Error> {
        Ok(self.dequantize())
    }
}

impl Decode for vq_codebook::VqMatrix {
    fn decode(&self) -> Result<Vec<f32>, Self::Error> {
        Ok(self.dequantize())
    }

    /// Importance-weighted k-means, `diag(H)` as the column importances.
    fn calibrate(options: &mut vq_codebook::EncodeOptions, gram: &Gram) -> bool {
        options.importance = Some(gram.diagonal().iter().map(|&v| v as f32).collect());
        true
    }
}

impl Decode for ans_codec::AnsMatrix {
    fn decode(&self) -> Result<Vec<i8>, Self::Error> {
        ans_codec::AnsMatrix::decode(self)
    }
}

impl Decode for beam_pack::PackedMatrix {
    fn decode(&self) -> Result<Vec<u64>, Self::Error> {
        Ok(self.unpack())
    }
}

/// Weights fed to an encoder, from a tensor.
#[derive(Debug)]
pub struct Prepared<W> {
    /// `rows * cols` values.
    pub values: Vec<W>,
    /// How they were made from the tensor.
    pub input: InputEncoding,
    /// The scales of [`InputEncoding::Int8Rows`] and [`InputEncoding::Int8Blocks`].
    pub scales: Option<Vec<f32>>,
}

/// Decoded weights, as a tensor again.
#[derive(Debug)]
pub enum Restored {
    /// Float weights (written in the dtype asked for).
    Float(Vec<f32>),
    /// Integer weights in their original dtype, exactly.
    Raw {
        /// The dtype.
        dtype: Dtype,
        /// Little-endian bytes.
        data: Vec<u8>,
    },
}

/// How the weights of one `CompressedMatrix::Weight` type come from tensors and go back.
pub trait CliWeight: Copy + Send + Sync + 'static {
    /// What such a format takes, for `cmv formats` and the help.
    const TAKES: &'static str;

    /// The weights of `t`, a `rows x cols` tensor; float tensors for an integer format are
    /// quantized per row as `int8` says.
    ///
    /// # Errors
    /// Why this tensor cannot be fed (its dtype, a non-finite value).
    fn prepare(
        t: &Tensor<'_>,
        rows: usize,
        cols: usize,
        int8: Int8Quant,
    ) -> Result<Prepared<Self>, String>;

    /// The tensor back from decoded `values`.
    ///
    /// # Errors
    /// Values or metadata that cannot have come from [`CliWeight::prepare`] (a damaged file).
    fn restore(
        values: Vec<Self>,
        input: InputEncoding,
        dtype: Dtype,
        scales: Option<&[f32]>,
    ) -> Result<Restored, String>;
}

fn dtype_refusal(t: &Tensor<'_>, takes: &str) -> String {
    format!(
        "its dtype is {}, but this format takes {takes}",
        dtype_name(t.dtype)
    )
}

impl CliWeight for f32 {
    const TAKES: &'static str = "F32, F16 and BF16 tensors (read exactly as f32)";

    fn prepare(t: &Tensor<'_>, _: usize, _: usize, _: Int8Quant) -> Result<Prepared<f32>, String> {
        let values = t.floats().ok_or_else(|| dtype_refusal(t, Self::TAKES))?;
        Ok(Prepared {
            values,
            input: InputEncoding::Float,
            scales: None,
        })
    }

    fn restore(
        values: Vec<f32>,
        input: InputEncoding,
        _: Dtype,
        _: Option<&[f32]>,
    ) -> Result<Restored, String> {
        match input {
            InputEncoding::Float => Ok(Restored::Float(values)),
            other => Err(format!(
                "input encoding {other:?} is not one of a float format"
            )),
        }
    }
}

/// Per-row symmetric int8 quantization, as the bench's `weights` suite does it:
/// `s = max|w| / 127` (0 for a zero row, whose `q` are 0), `q = round_half_even(w / s)` in
/// -127..=127.
///
/// # Errors
/// The first non-finite weight.
pub fn quantize_rows(w: &[f32], cols: usize) -> Result<(Vec<i8>, Vec<f32>), String> {
    if let Some(i) = w.iter().position(|v| !v.is_finite()) {
        return Err(format!(
            "weight {i} is {}: int8 quantization needs finite weights",
            w[i]
        ));
    }
    let mut q = Vec::with_capacity(w.len());
    let mut scales = Vec::with_capacity(w.len() / cols.max(1));
    for row in w.chunks(cols.max(1)) {
        let max = row.iter().fold(0f32, |m, v| m.max(v.abs()));
        let s = max / 127.0;
        scales.push(s);
        q.extend(row.iter().map(|&v| {
            if s == 0.0 {
                0
            } else {
                (v / s).round_ties_even().clamp(-127.0, 127.0) as i8
            }
        }));
    }
    Ok((q, scales))
}

/// How float tensors become int8 for the int8 formats (ans, beam).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Int8Quant {
    /// Per-row absmax scales, `s = max|w| / 127` ([`quantize_rows`]).
    #[default]
    Absmax,
    /// Per row, the largest step whose relative error is at most this
    /// (`ans_codec::quantize_rows_to_error`): fewer distinct values, which ANS codes in fewer
    /// bits (`compress --int8-error`).
    Error(f64),
}

/// [`quantize_rows`] or, for [`Int8Quant::Error`], per-row steps chosen for the error; the
/// scales are the steps either way (`w ~ q * s` per row).
///
/// # Errors
/// The first non-finite weight; a target outside (0, 1).
pub fn quantize_rows_with(
    w: &[f32],
    rows: usize,
    cols: usize,
    int8: Int8Quant,
) -> Result<(Vec<i8>, Vec<f32>), String> {
    match int8 {
        Int8Quant::Absmax => quantize_rows(w, cols),
        Int8Quant::Error(target) => {
            let r = ans_codec::quantize_rows_to_error(w, rows, cols, target)
                .map_err(|e| e.to_string())?;
            Ok((r.q, r.steps))
        }
    }
}

/// The inverse of [`quantize_rows`] (`q * s` in f32), one scale for each run of
/// `q.len() / scales.len()` consecutive values (a row, or a Q8_0 block).
///
/// # Errors
/// Scales missing or not dividing the values.
pub fn dequantize_rows(q: &[i8], scales: Option<&[f32]>) -> Result<Vec<f32>, String> {
    let scales = scales.ok_or("its scales are missing")?;
    if scales.is_empty() || !q.len().is_multiple_of(scales.len()) {
        return Err(format!(
            "{} scales do not divide {} weights",
            scales.len(),
            q.len()
        ));
    }
    let cols = q.len() / scales.len();
    Ok(q.chunks(cols.max(1))
        .zip(scales)
        .flat_map(|(row, &s)| row.iter().map(move |&v| f32::from(v) * s))
        .collect())
}

impl CliWeight for i8 {
    const TAKES: &'static str = "I8 tensors and GGUF Q8_0 tensors (int8 values and block \
                                 scales) as they are (lossless), and F32/F16/BF16 tensors \
                                 quantized per row to int8 with absmax scales (lossy)";

    fn prepare(
        t: &Tensor<'_>,
        rows: usize,
        cols: usize,
        int8: Int8Quant,
    ) -> Result<Prepared<i8>, String> {
        if let Some(q8) = t.q8_0 {
            return Ok(Prepared {
                values: q8.q.clone(),
                input: InputEncoding::Int8Blocks,
                scales: Some(q8.scales.clone()),
            });
        }
        if t.dtype == Dtype::I8 {
            return Ok(Prepared {
                values: t.data.iter().map(|&b| b as i8).collect(),
                input: InputEncoding::Exact,
                scales: None,
            });
        }
        let w = t.floats().ok_or_else(|| dtype_refusal(t, Self::TAKES))?;
        let (values, scales) = quantize_rows_with(&w, rows, cols, int8)?;
        Ok(Prepared {
            values,
            input: InputEncoding::Int8Rows,
            scales: Some(scales),
        })
    }

    fn restore(
        values: Vec<i8>,
        input: InputEncoding,
        dtype: Dtype,
        scales: Option<&[f32]>,
    ) -> Result<Restored, String> {
        match input {
            InputEncoding::Exact if dtype == Dtype::I8 => Ok(Restored::Raw {
                dtype,
                data: values.iter().map(|&v| v as u8).collect(),
            }),
            InputEncoding::Int8Rows | InputEncoding::Int8Blocks => {
                Ok(Restored::Float(dequantize_rows(&values, scales)?))
            }
            other => Err(format!(
                "input encoding {other:?} of a {} tensor is not one of an int8 format",
                dtype_name(dtype)
            )),
        }
    }
}

/// The offset that makes int8 values unsigned (`q + 127` in 0..=254).
const UNSIGNED_OFFSET: i16 = 127;

impl CliWeight for u64 {
    const TAKES: &'static str = "U8/U16/U32/U64 tensors as they are, GGUF Q8_0 tensors as \
                                 their int8 values + 127 and block scales (lossless), and \
                                 F32/F16/BF16 tensors quantized per row to int8 with absmax \
                                 scales, stored as q + 127 (lossy)";

    fn prepare(
        t: &Tensor<'_>,
        rows: usize,
        cols: usize,
        int8: Int8Quant,
    ) -> Result<Prepared<u64>, String> {
        let exact = |values: Vec<u64>| Prepared {
            values,
            input: InputEncoding::Exact,
            scales: None,
        };
        if let Some(q8) = t.q8_0 {
            return Ok(Prepared {
                values: q8
                    .q
                    .iter()
                    .map(|&v| (i16::from(v) + UNSIGNED_OFFSET) as u64)
                    .collect(),
                input: InputEncoding::Int8Blocks,
                scales: Some(q8.scales.clone()),
            });
        }
        let d = t.data;
        match t.dtype {
            Dtype::U8 => return Ok(exact(d.iter().map(|&b| u64::from(b)).collect())),
            Dtype::U16 => {
                return Ok(exact(
                    d.chunks_exact(2)
                        .map(|b| u64::from(u16::from_le_bytes([b[0], b[1]])))
                        .collect(),
                ));
            }
            Dtype::U32 => {
                return Ok(exact(
                    d.chunks_exact(4)
                        .map(|b| u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])))
                        .collect(),
                ));
            }
            Dtype::U64 => {
                return Ok(exact(
                    d.chunks_exact(8)
                        .map(|b| {
                            let mut a = [0u8; 8];
                            a.copy_from_slice(b);
                            u64::from_le_bytes(a)
                        })
                        .collect(),
                ));
            }
            _ => {}
        }
        let w = t.floats().ok_or_else(|| dtype_refusal(t, Self::TAKES))?;
        let (q, scales) = quantize_rows_with(&w, rows, cols, int8)?;
        Ok(Prepared {
            values: q
                .iter()
                .map(|&v| (i16::from(v) + UNSIGNED_OFFSET) as u64)
                .collect(),
            input: InputEncoding::Int8Rows,
            scales: Some(scales),
        })
    }

    fn restore(
        values: Vec<u64>,
        input: InputEncoding,
        dtype: Dtype,
        scales: Option<&[f32]>,
    ) -> Result<Restored, String> {
        let too_wide = |v: u64| format!("decoded value {v} does not fit {}", dtype_name(dtype));
        match input {
            InputEncoding::Exact => {
                let width = match dtype {
                    Dtype::U8 => 1,
                    Dtype::U16 => 2,
                    Dtype::U32 => 4,
                    Dtype::U64 => 8,
                    other => {
                        return Err(format!(
                            "original dtype {} is not one an unsigned format takes exactly",
                            dtype_name(other)
                        ));
                    }
                };
                let mut data = Vec::with_capacity(values.len() * width);
                for &v in &values {
                    if width < 8 && v >> (8 * width) != 0 {
                        return Err(too_wide(v));
                    }
                    data.extend_from_slice(&v.to_le_bytes()[..width]);
                }
                Ok(Restored::Raw { dtype, data })
            }
            InputEncoding::Int8Rows | InputEncoding::Int8Blocks => {
                let q = values
                    .iter()
                    .map(|&v| {
                        i16::try_from(v)
                            .ok()
                            .filter(|v| (0..=2 * UNSIGNED_OFFSET).contains(v))
                            .map(|v| (v - UNSIGNED_OFFSET) as i8)
                            .ok_or_else(|| format!("decoded value {v} is not an offset int8"))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Restored::Float(dequantize_rows(&q, scales)?))
            }
            InputEncoding::Float => {
                Err("input encoding Float is not one of an unsigned format".into())
            }
        }
    }
}

/// One tensor compressed.
#[derive(Debug)]
pub struct Encoded {
    /// The container.
    pub blob: Vec<u8>,
    /// Its version.
    pub version: u32,
    /// How the weights were fed.
    pub input: InputEncoding,
    /// Whether the encoder was calibrated.
    pub calibrated: bool,
    /// Scales of [`InputEncoding::Int8Rows`] and [`InputEncoding::Int8Blocks`].
    pub scales: Option<Vec<f32>>,
}

/// Input element types `cmv bench` makes seeded inputs of: those of the formats' GPU
/// products.
#[cfg(feature = "gpu")]
pub trait BenchInput: cmv_runtime::DeviceRepr + Copy + Send + Sync + 'static {
    /// `n` seeded inputs.
    fn inputs(n: usize, seed: u64) -> Vec<Self>;
}

#[cfg(feature = "gpu")]
impl BenchInput for half::f16 {
    /// Uniform in `[-1, 1)`, as the bench's.
    fn inputs(n: usize, seed: u64) -> Vec<Self> {
        <Self as bench::data::Generate>::inputs(n, seed)
    }
}

#[cfg(feature = "gpu")]
impl BenchInput for i8 {
    /// Uniform over all 256 values, as the bench's.
    fn inputs(n: usize, seed: u64) -> Vec<Self> {
        <Self as bench::data::Generate>::inputs(n, seed)
    }
}

#[cfg(feature = "gpu")]
impl BenchInput for u64 {
    /// Uniform over 0..=255: 8-bit activations, as the int8 ones.
    fn inputs(n: usize, seed: u64) -> Vec<Self> {
        bench::data::bytes(n, seed)
            .into_iter()
            .map(u64::from)
            .collect()
    }
}

/// What a registered format needs for `cmv bench`: its GPU product (`DeviceGemv`), with inputs
/// `cmv bench` can make. Every type qualifies in a build without the `gpu` feature.
#[cfg(feature = "gpu")]
pub trait OnGpu: cmv_format::DeviceGemv<Input: BenchInput> {}

#[cfg(feature = "gpu")]
impl<M: cmv_format::DeviceGemv<Input: BenchInput>> OnGpu for M {}

/// What a registered format needs for `cmv bench`: nothing in a build without the `gpu`
/// feature.
#[cfg(not(feature = "gpu"))]
pub trait OnGpu {}

#[cfg(not(feature = "gpu"))]
impl<M> OnGpu for M {}

/// A container, loaded and checked.
pub trait Loaded: Send + Sync {
    /// Rows.
    fn rows(&self) -> usize;
    /// Columns.
    fn cols(&self) -> usize;
    /// Its version (from its prefix).
    fn version(&self) -> u32;
    /// The format's size breakdown.
    fn size_breakdown(&self) -> SizeBreakdown;
    /// The dense tensor back.
    ///
    /// # Errors
    /// The format's decode errors, and what [`CliWeight::restore`] refuses.
    fn restore(
        &self,
        input: InputEncoding,
        dtype: Dtype,
        scales: Option<&[f32]>,
    ) -> Result<Restored, String>;
    /// The largest batch the format's GPU kernels take.
    #[cfg(feature = "gpu")]
    fn max_gpu_batch(&self) -> usize;
    /// Times the GPU product at `batches` (each at most [`Loaded::max_gpu_batch`]) on seeded
    /// inputs, checked against the CPU reference, with the bench's rotation and timing
    /// (`bench::formats::run_matrix`; `time` as its `MatrixRun::time`); speedups against our
    /// dense fp16 kernel and cuBLAS.
    ///
    /// # Errors
    /// The format's errors (kernels, upload, launch), runtime errors, a mismatch.
    #[cfg(feature = "gpu")]
    fn bench_gpu(
        &self,
        bench: &mut bench::dense::Baselines<'_>,
        variant: &str,
        batches: &[usize],
        seed: u64,
        time: Option<&bench::formats::TimeFn<'_>>,
    ) -> Result<Vec<bench::Row>, bench::BenchError>;
}

/// A registered format, as the CLI drives it (object safe; see [`register`]).
pub trait Format: Send + Sync {
    /// `CompressedMatrix::NAME`.
    fn name(&self) -> &'static str;
    /// Its variants' names; the first is the default.
    fn variants(&self) -> Vec<&'static str>;
    /// What it takes.
    fn takes(&self) -> &'static str;
    /// Compresses `t`, a 2-D tensor, with variant `variant` (one of [`Format::variants`]),
    /// calibrated on `gram` if given and the format takes one; float tensors going into an
    /// int8 format are quantized as `int8` says.
    ///
    /// # Errors
    /// Why this tensor cannot be compressed (dtype, shape, values: the format's message).
    fn encode(
        &self,
        variant: &str,
        t: &Tensor<'_>,
        gram: Option<&Gram>,
        int8: Int8Quant,
    ) -> Result<Encoded, String>;
    /// Whether the format takes a calibration ([`Decode::calibrate`]).
    fn calibrates(&self) -> bool;
    /// Loads and checks a container.
    ///
    /// # Errors
    /// The format's container errors.
    fn load(&self, blob: &[u8]) -> Result<Box<dyn Loaded>, String>;
}

/// The format `M` as a [`Format`].
pub fn register<M>() -> Box<dyn Format>
where
    M: Decode + OnGpu,
    M::Weight: CliWeight,
{
    Box::new(Registered::<M>(PhantomData))
}

struct Registered<M>(PhantomData<fn() -> M>);

struct LoadedMatrix<M> {
    matrix: M,
    version: u32,
}

/// The version field of a container prefix (magic, then a little-endian `u32`).
fn container_version(blob: &[u8]) -> u32 {
    blob.get(8..12)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .unwrap_or(0)
}

impl<M> Format for Registered<M>
where
    M: Decode + OnGpu,
    M::Weight: CliWeight,
{
    fn name(&self) -> &'static str {
        M::NAME
    }

    fn variants(&self) -> Vec<&'static str> {
        M::variants().into_iter().map(|(n, _)| n).collect()
    }

    fn takes(&self) -> &'static str {
        <M::Weight as CliWeight>::TAKES
    }

    fn calibrates(&self) -> bool {
        // `calibrate` only sets options: asking it on a 1x1 Gram matrix tells whether the
        // format uses one.
        let mut o = M::Options::default();
        let gram = Gram {
            cols: 1,
            h: vec![1.0],
        };
        M::calibrate(&mut o, &gram)
    }

    fn encode(
        &self,
        variant: &str,
        t: &Tensor<'_>,
        gram: Option<&Gram>,
        int8: Int8Quant,
    ) -> Result<Encoded, String> {
        let [rows, cols] = t.shape[..] else {
            return Err(format!(
                "it has shape {:?}: only 2-D tensors are compressed",
                t.shape
            ));
        };
        let mut options = M::variants()
            .into_iter()
            .find(|(n, _)| *n == variant)
            .map(|(_, o)| o)
            .ok_or_else(|| format!("{} has no variant {variant}", M::NAME))?;
        let calibrated = match gram {
            Some(g) if g.cols == cols => M::calibrate(&mut options, g),
            Some(g) => {
                return Err(format!(
                    "its calibration has {} inputs but it has {cols} columns",
                    g.cols
                ));
            }
            None => false,
        };
        let p = <M::Weight as CliWeight>::prepare(t, rows, cols, int8)?;
        let m = M::encode_slice(&p.values, rows, cols, &options).map_err(|e| e.to_string())?;
        let blob = m.container_bytes();
        Ok(Encoded {
            calibrated,
            version: container_version(&blob),
            blob,
            input: p.input,
            scales: p.scales,
        })
    }

    fn load(&self, blob: &[u8]) -> Result<Box<dyn Loaded>, String> {
        let matrix = M::from_container(blob, &Limits::DEFAULT).map_err(|e| e.to_string())?;
        Ok(Box::new(LoadedMatrix {
            matrix,
            version: container_version(blob),
        }))
    }
}

impl<M> Loaded for LoadedMatrix<M>
where
    M: Decode + OnGpu,
    M::Weight: CliWeight,
{
    fn rows(&self) -> usize {
        self.matrix.rows()
    }

    fn cols(&self) -> usize {
        self.matrix.cols()
    }

    fn version(&self) -> u32 {
        self.version
    }

    fn size_breakdown(&self) -> SizeBreakdown {
        self.matrix.size_breakdown()
    }

    fn restore(
        &self,
        input: InputEncoding,
        dtype: Dtype,
        scales: Option<&[f32]>,
    ) -> Result<Restored, String> {
        let values = self.matrix.decode().map_err(|e| e.to_string())?;
        <M::Weight as CliWeight>::restore(values, input, dtype, scales)
    }

    #[cfg(feature = "gpu")]
    fn max_gpu_batch(&self) -> usize {
        M::MAX_GPU_BATCH
    }

    #[cfg(feature = "gpu")]
    fn bench_gpu(
        &self,
        bench: &mut bench::dense::Baselines<'_>,
        variant: &str,
        batches: &[usize],
        seed: u64,
        time: Option<&bench::formats::TimeFn<'_>>,
    ) -> Result<Vec<bench::Row>, bench::BenchError> {
        let kernels = M::load(bench.gpu()).map_err(bench::formats::format_err::<M>)?;
        let cols = self.matrix.cols();
        let inputs = |batch: usize| {
            <M::Input as BenchInput>::inputs(batch * cols, seed.wrapping_add(batch as u64))
        };
        let run = bench::formats::MatrixRun {
            kernels: &kernels,
            name: (M::NAME, variant),
            inputs: &inputs,
            dense: bench::dense::Baseline::CmvFp16,
            tune: &|_| Ok(()),
            time,
        };
        bench::formats::run_matrix(bench, &self.matrix, &run, batches, &mut |_| {})
    }
}

/// The float dtype `Restored::Float` weights of a `dtype` tensor are written in by default:
/// their own when it is a float one, else F32.
pub fn default_float_dtype(dtype: Dtype) -> FloatDtype {
    FloatDtype::of(dtype).unwrap_or(FloatDtype::F32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_variants_exist() {
        let r = registry();
        let mut names: Vec<_> = r.iter().map(|f| f.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), r.len());
        assert!(r.iter().all(|f| !f.variants().is_empty()));
    }

    #[test]
    fn row_quantization_round_trips_within_half_a_step() {
        let w = [0.5f32, -1.0, 0.25, 0.0, 0.0, 0.0];
        let (q, s) = quantize_rows(&w, 3).unwrap();
        assert_eq!(q[1], -127);
        assert_eq!(&q[3..], [0, 0, 0]);
        let back = dequantize_rows(&q, Some(&s)).unwrap();
        for (a, b) in w.iter().zip(&back) {
            assert!((a - b).abs() <= s[0] / 2.0 + 1e-7);
        }
        assert!(quantize_rows(&[f32::NAN], 1).is_err());
        assert!(dequantize_rows(&q, None).is_err());
    }
}
