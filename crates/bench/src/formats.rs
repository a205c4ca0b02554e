//! The format suite: every registered compressed format, measured through the `cmv_format`
//! traits alone ([`CompressedMatrix`] and [`DeviceGemv`]), at any shape and batch.
//!
//! Adding a format is one line in [`registry`]. For each shape, batch (batches above the
//! format's `MAX_GPU_BATCH` are skipped with a note) and encoder variant
//! (`CompressedMatrix::variants`), the GPU side
//!
//! 1. makes seeded weights and inputs of the format's element types ([`Generate`]), encodes,
//!    and computes the CPU reference product;
//! 2. uploads the matrix and device copies of it (`clone_device`) until they fill
//!    `max(4 x L2, min_rotation_bytes)`, so that each timed call reads its weights from HBM;
//! 3. runs the product once and checks it (`finish`, then `check`), times it (CUDA graph or
//!    events, per `BenchConfig::timing`), and checks the last timed call's output again: a
//!    failed check fails the run ([`BenchError::Mismatch`]);
//! 4. relates the median to the read ceiling, to a plain streaming read of the same byte count,
//!    to cuBLAS fp16, and to our own dense kernel of the format's input type (fp16 for fp16
//!    inputs, int8 for int8 inputs); those are measured once per shape and batch in
//!    [`Baselines`], shared with the dense suite.
//!
//! The CPU side (no GPU needed) reports, per format, variant and shape, the size breakdown
//! (bits per weight read by the kernel and of the container, the parts), the encoding time
//! and the batch-1 CPU reference time.

use std::marker::PhantomData;
use std::time::Instant;

use cmv_format::{CompressedMatrix, DeviceGemv};
use cmv_runtime::DeviceRepr;
use half::f16;

use crate::data::Generate;
use crate::dense::{Baseline, Baselines};
use crate::{BenchError, CpuRow, Part, Row, RowTimes};

/// Every format the bench measures, one line each.
pub fn registry() -> Vec<Box<dyn FormatSuite>> {
    vec![
        register::<spqr_format::SpqrMatrix>(),
        register::<sbvr_format::SbvrMatrix>(),
        register::<vq_codebook::VqMatrix>(),
        register::<ans_codec::AnsMatrix>(),
        register::<crate::toy::Fp16Toy>(),
    ]
}

/// The format named `name` in [`registry`].
pub fn find(name: &str) -> Option<Box<dyn FormatSuite>> {
    registry().into_iter().find(|f| f.name() == name)
}

/// Input element types of a format's GPU product, and the dense kernel that takes the same
/// inputs (what `speedup_vs_dense` compares with).
pub trait BenchInput: Generate + DeviceRepr {
    /// Our dense kernel of this input type.
    const DENSE: Baseline;
}

impl BenchInput for f16 {
    const DENSE: Baseline = Baseline::CmvFp16;
}

impl BenchInput for i8 {
    const DENSE: Baseline = Baseline::CmvInt8;
}

/// A registered format, as the bench drives it (object safe; see [`register`]).
pub trait FormatSuite: Send + Sync {
    /// The format's name (`CompressedMatrix::NAME`): its suite name and the `format` of its
    /// rows.
    fn name(&self) -> &'static str;

    /// The names of its encoder variants.
    fn variants(&self) -> Vec<&'static str>;

    /// The largest batch its GPU kernels take.
    fn max_gpu_batch(&self) -> usize;

    /// The CPU side at one shape (`index` seeds the data): one row per variant.
    ///
    /// # Errors
    /// The format's errors (boxed in [`BenchError::Format`]).
    fn cpu(&self, index: usize, shape: (usize, usize)) -> Result<Vec<CpuRow>, BenchError>;

    /// The GPU side at one shape (`index` seeds the data) and the batches given (each at most
    /// [`FormatSuite::max_gpu_batch`]): one row per variant and batch, each passed to
    /// `progress` as it is measured.
    ///
    /// # Errors
    /// The format's errors, runtime errors, [`BenchError::Mismatch`].
    fn gpu(
        &self,
        bench: &mut Baselines<'_>,
        index: usize,
        shape: (usize, usize),
        batches: &[usize],
        progress: &mut dyn FnMut(&Row),
    ) -> Result<Vec<Row>, BenchError>;
}

/// The variants `--variants` selected (all when unset).
static SELECTED_VARIANTS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// Runs only the named variants of every format from now on (`cmv-bench --variants`); a
/// second call is ignored.
pub fn select_variants(names: Vec<String>) {
    let _ = SELECTED_VARIANTS.set(names);
}

/// `M`'s variants that [`select_variants`] left in (all without a selection).
fn selected<M: CompressedMatrix>() -> Vec<(&'static str, M::Options)> {
    let mut v = M::variants();
    if let Some(names) = SELECTED_VARIANTS.get() {
        v.retain(|(n, _)| names.iter().any(|s| s == n));
    }
    v
}

/// A format's [`FormatSuite`]: the generic suite at `M`.
pub fn register<M>() -> Box<dyn FormatSuite>
where
    M: DeviceGemv,
    M::Weight: Generate,
    M::Input: BenchInput,
{
    Box::new(Registered::<M>(PhantomData))
}

struct Registered<M>(PhantomData<fn() -> M>);

impl<M> FormatSuite for Registered<M>
where
    M: DeviceGemv,
    M::Weight: Generate,
    M::Input: BenchInput,
{
    fn name(&self) -> &'static str {
        M::NAME
    }

    fn variants(&self) -> Vec<&'static str> {
        selected::<M>().into_iter().map(|(n, _)| n).collect()
    }

    fn max_gpu_batch(&self) -> usize {
        M::MAX_GPU_BATCH
    }

    fn cpu(&self, index: usize, shape: (usize, usize)) -> Result<Vec<CpuRow>, BenchError> {
        run_cpu::<M>(index, shape)
    }

    fn gpu(
        &self,
        bench: &mut Baselines<'_>,
        index: usize,
        shape: (usize, usize),
        batches: &[usize],
        progress: &mut dyn FnMut(&Row),
    ) -> Result<Vec<Row>, BenchError> {
        run_gpu::<M>(bench, index, shape, batches, progress)
    }
}

/// A format's error as a [`BenchError`].
pub fn format_err<M: CompressedMatrix>(e: M::Error) -> BenchError {
    BenchError::Format {
        format: M::NAME,
        source: Box::new(e),
    }
}

/// Seeds of a shape's weights and of a batch's inputs.
fn weight_seed(index: usize) -> u64 {
    500 + index as u64
}

fn input_seed(index: usize, batch: usize) -> u64 {
    900 + 1000 * index as u64 + batch as u64
}

/// Which of `batches` a format with kernels for 1 to `max` vectors runs, and a note naming
/// the others (`None` when it runs them all).
pub fn split_batches(format: &str, batches: &[usize], max: usize) -> (Vec<usize>, Option<String>) {
    let (run, skip): (Vec<usize>, Vec<usize>) =
        batches.iter().partition(|&&b| (1..=max).contains(&b));
    let note = (!skip.is_empty()).then(|| {
        let list: Vec<String> = skip.iter().map(usize::to_string).collect();
        let range = if max == 1 {
            "1 vector".to_owned()
        } else {
            format!("1 to {max} vectors")
        };
        format!(
            "{format}: batch {} skipped: its GPU kernels take {range}",
            list.join(", ")
        )
    });
    (run, note)
}

/// The CPU side of format `M` at one shape: per variant, sizes, encoding time and the batch-1
/// reference time.
///
/// # Errors
/// The format's errors.
pub fn run_cpu<M>(index: usize, (rows, cols): (usize, usize)) -> Result<Vec<CpuRow>, BenchError>
where
    M: CompressedMatrix,
    M::Weight: Generate,
    M::Input: Generate,
{
    let w = M::Weight::weights(rows * cols, weight_seed(index));
    let x = M::Input::inputs(cols, input_seed(index, 1));
    let mut out = Vec::new();
    for (variant, options) in selected::<M>() {
        let t0 = Instant::now();
        let m = M::encode_slice(&w, rows, cols, &options).map_err(format_err::<M>)?;
        let encode_ms = t0.elapsed().as_secs_f64() * 1e3;
        let t0 = Instant::now();
        let y = m.reference(&x, 1).map_err(format_err::<M>)?;
        let reference_ms = t0.elapsed().as_secs_f64() * 1e3;
        if y.len() != rows {
            return Err(BenchError::Mismatch {
                what: format!("{}/{variant} {rows}x{cols} CPU reference", M::NAME),
                detail: format!("{} outputs for {rows} rows", y.len()),
            });
        }
        let sizes = m.size_breakdown();
        out.push(CpuRow {
            format: M::NAME.into(),
            variant: variant.into(),
            rows,
            cols,
            bytes: sizes.container_bytes,
            bits_per_weight: sizes.kernel_bits_per_weight(),
            container_bits_per_weight: sizes.bits_per_weight(),
            parts: Part::of(&sizes),
            encode_ms,
            reference_ms,
        });
    }
    Ok(out)
}

/// Checks a GPU output: waits for the queued products (`finish` surfaces what the kernels
/// flagged), then compares with the reference.
fn check<M: DeviceGemv>(
    bench: &Baselines<'_>,
    kernels: &M::Kernels,
    out: &M::DeviceOut,
    want: &[M::Output],
    what: &str,
) -> Result<cmv_format::Check, BenchError> {
    let gpu = bench.gpu();
    M::finish(kernels, gpu).map_err(format_err::<M>)?;
    let c = M::check(gpu, out, want).map_err(format_err::<M>)?;
    if !c.passed() {
        return Err(BenchError::Mismatch {
            what: what.into(),
            detail: format!(
                "{c} (exact: {}, relative error {:.3e}, tolerance {:e})",
                c.exact, c.rel_err, c.tolerance
            ),
        });
    }
    Ok(c)
}

/// The GPU side of format `M` at one shape: per variant and batch, one checked, timed [`Row`].
///
/// # Errors
/// The format's errors, runtime errors, [`BenchError::Mismatch`].
pub fn run_gpu<M>(
    bench: &mut Baselines<'_>,
    index: usize,
    shape: (usize, usize),
    batches: &[usize],
    progress: &mut dyn FnMut(&Row),
) -> Result<Vec<Row>, BenchError>
where
    M: DeviceGemv,
    M::Weight: Generate,
    M::Input: BenchInput,
{
    run_gpu_tuned::<M>(bench, index, shape, batches, "", &|_| Ok(()), progress)
}

/// [`run_gpu`] with every uploaded copy passed through `tune` and the variant names suffixed
/// with `suffix`: a format's device-side setting outside its encoder options (SpQR's fixed
/// splits, named like `csr/s4`), for tuning extras.
///
/// # Errors
/// As [`run_gpu`], and `tune`'s.
pub fn run_gpu_tuned<M>(
    bench: &mut Baselines<'_>,
    index: usize,
    shape: (usize, usize),
    batches: &[usize],
    suffix: &str,
    tune: &dyn Fn(&mut M::Device) -> Result<(), BenchError>,
    progress: &mut dyn FnMut(&Row),
) -> Result<Vec<Row>, BenchError>
where
    M: DeviceGemv,
    M::Weight: Generate,
    M::Input: BenchInput,
{
    run_gpu_passes::<M>(
        bench,
        index,
        shape,
        batches,
        &[(suffix.to_string(), &|| ())],
        tune,
        progress,
    )
}

/// [`run_gpu_tuned`] once per pass of `passes` on the same encoded matrices (each variant is
/// encoded once per shape): each pass runs its setup, then uploads and times the matrix with
/// its suffix on the variant names.
///
/// # Errors
/// As [`run_gpu_tuned`].
pub fn run_gpu_passes<M>(
    bench: &mut Baselines<'_>,
    index: usize,
    (rows, cols): (usize, usize),
    batches: &[usize],
    passes: &[Pass<'_>],
    tune: &dyn Fn(&mut M::Device) -> Result<(), BenchError>,
    progress: &mut dyn FnMut(&Row),
) -> Result<Vec<Row>, BenchError>
where
    M: DeviceGemv,
    M::Weight: Generate,
    M::Input: BenchInput,
{
    let gpu = bench.gpu();
    let (batches, note) = split_batches(M::NAME, batches, M::MAX_GPU_BATCH);
    if let Some(note) = note {
        // The driver skips these before calling; a direct caller hears about it here.
        eprintln!("{note}");
    }
    let kernels = M::load(gpu).map_err(format_err::<M>)?;
    let w = M::Weight::weights(rows * cols, weight_seed(index));
    let inputs = |batch: usize| M::Input::inputs(batch * cols, input_seed(index, batch));
    let mut out = Vec::new();
    for (variant, options) in selected::<M>() {
        let m = M::encode_slice(&w, rows, cols, &options).map_err(format_err::<M>)?;
        for (suffix, setup) in passes {
            setup();
            let variant = format!("{variant}{suffix}");
            let run = MatrixRun {
                kernels: &kernels,
                name: (M::NAME, &variant),
                inputs: &inputs,
                dense: M::Input::DENSE,
                tune,
                time: None,
            };
            out.extend(run_matrix(bench, &m, &run, &batches, progress)?);
        }
    }
    Ok(out)
}

/// A pass of [`run_gpu_passes`]: the suffix of its rows' variant names and what it sets up
/// before uploading (e.g. a kernel preference).
pub type Pass<'a> = (String, &'a dyn Fn());

/// How [`run_matrix`] measures one matrix.
pub struct MatrixRun<'a, M: DeviceGemv> {
    /// The format's loaded kernels (`DeviceGemv::load`).
    pub kernels: &'a M::Kernels,
    /// Format and variant of its rows.
    pub name: (&'a str, &'a str),
    /// The inputs of a batch: `batch * cols` values.
    pub inputs: &'a dyn Fn(usize) -> Vec<M::Input>,
    /// The dense kernel `speedup_vs_dense` is taken against.
    pub dense: Baseline,
    /// A device-side setting applied to every uploaded copy (`&|_| Ok(())` for none).
    pub tune: &'a dyn Fn(&mut M::Device) -> Result<(), BenchError>,
    /// How the calls are timed, given the copies rotated through and the launch of call `i`
    /// (which uses copy `i % copies`); `None`: [`crate::Timing::time`] of
    /// `BenchConfig::timing`, as every bench suite times.
    pub time: Option<&'a TimeFn<'a>>,
}

/// A timing of `launch(i)` calls over `copies` weight copies (see [`MatrixRun::time`]).
pub type TimeFn<'a> = dyn Fn(
        usize,
        &mut dyn FnMut(usize) -> Result<(), BenchError>,
    ) -> Result<cmv_runtime::Timings, BenchError>
    + 'a;

impl<M: DeviceGemv> std::fmt::Debug for MatrixRun<'_, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MatrixRun")
            .field("name", &self.name)
            .field("dense", &self.dense)
            .finish_non_exhaustive()
    }
}

/// One encoded matrix `m` on the GPU at `batches` (each in `1..=M::MAX_GPU_BATCH`; see
/// [`split_batches`]): uploads it and copies of it to rotate through, and per batch runs the
/// product on `run.inputs(batch)`, checks it against `m`'s CPU reference, times it, checks the
/// last timed output again, and relates it to the same-size read, cuBLAS fp16 and `run.dense`:
/// one [`Row`] per batch, each passed to `progress`. What [`run_gpu`] does for each variant of
/// its generated weights, for a matrix from anywhere (a model's tensor).
///
/// # Errors
/// The format's errors, runtime errors, [`BenchError::Mismatch`].
pub fn run_matrix<M: DeviceGemv>(
    bench: &mut Baselines<'_>,
    m: &M,
    run: &MatrixRun<'_, M>,
    batches: &[usize],
    progress: &mut dyn FnMut(&Row),
) -> Result<Vec<Row>, BenchError> {
    let (gpu, cfg) = (bench.gpu(), bench.cfg());
    let (rows, cols) = (m.rows(), m.cols());
    let (format, variant) = run.name;
    let kernels = run.kernels;
    let sizes = m.size_breakdown();
    let mut first = m.upload(gpu).map_err(format_err::<M>)?;
    (run.tune)(&mut first)?;
    let weight_bytes = M::bytes_read(&first);
    let n = cmv_runtime::rotation_copies(weight_bytes, gpu.info().l2_bytes, cfg.min_rotation_bytes);
    let mut devs = vec![first];
    for _ in 1..n {
        let mut d = M::clone_device(&devs[0]).map_err(format_err::<M>)?;
        (run.tune)(&mut d)?;
        devs.push(d);
    }
    let mut out = Vec::new();
    for &batch in batches {
        let what = format!("{format}/{variant} {rows}x{cols} batch {batch}");
        let x = (run.inputs)(batch);
        let want = m.reference(&x, batch).map_err(format_err::<M>)?;
        let dx = gpu.upload(&x)?;
        let mut y = M::alloc_out(gpu, rows, batch).map_err(format_err::<M>)?;
        M::gemv(kernels, &devs[0], &dx, &mut y, batch).map_err(format_err::<M>)?;
        let before = check::<M>(bench, kernels, &y, &want, &what)?;
        let timings = {
            let mut launch = |i: usize| -> Result<(), BenchError> {
                M::gemv(kernels, &devs[i % n], &dx, &mut y, batch).map_err(format_err::<M>)
            };
            match run.time {
                Some(time) => time(n, &mut launch)?,
                None => cfg.timing.time(gpu, cfg, n, &mut launch)?,
            }
        };
        let after = check::<M>(bench, kernels, &y, &want, &format!("{what} (timed)"))?;
        let worst = if after.rel_err > before.rel_err {
            after
        } else {
            before
        };
        let input_bytes = batch * cols * size_of::<M::Input>();
        let read_us = bench.same_size_read(weight_bytes + input_bytes)?;
        let cublas_us = bench.median_us(Baseline::CublasFp16, rows, cols, batch)?;
        let dense_us = bench.median_us(run.dense, rows, cols, batch)?;
        let row = Row::derive(RowTimes {
            name: (format, variant),
            shape: (rows, cols, batch),
            bits_per_weight: sizes.kernel_bits_per_weight(),
            parts: Part::of(&sizes),
            weight_bytes,
            input_bytes,
            copies: n,
            timings: &timings,
            ceiling_gbps: bench.ceiling_gbps(),
            read_us,
            cublas_us,
            dense_us,
            check: worst.to_string(),
        });
        progress(&row);
        out.push(row);
    }
    Ok(out)
}

/// Runs `formats` over every shape of `shapes`, shape by shape (so that the dense operands of a
/// shape are uploaded once), each at `batches(format)` (batches past a format's kernels
/// skipped, with a note in `notes`).
///
/// # Errors
/// As [`run_gpu`].
pub fn run_gpu_all(
    bench: &mut Baselines<'_>,
    formats: &[Box<dyn FormatSuite>],
    shapes: &[(usize, usize)],
    batches: &dyn Fn(&str) -> Vec<usize>,
    notes: &mut Vec<String>,
    progress: &mut dyn FnMut(&Row),
) -> Result<Vec<Row>, BenchError> {
    let mut runs = Vec::new();
    for f in formats {
        let (run, note) = split_batches(f.name(), &batches(f.name()), f.max_gpu_batch());
        notes.extend(note);
        runs.push(run);
    }
    let mut out = Vec::new();
    for (index, &shape) in shapes.iter().enumerate() {
        for (f, run) in formats.iter().zip(&runs) {
            if !run.is_empty() {
                out.extend(f.gpu(bench, index, shape, run, progress)?);
            }
        }
    }
    Ok(out)
}

/// The CPU side of `formats` over `shapes`.
///
/// # Errors
/// As [`run_cpu`].
pub fn run_cpu_all(
    formats: &[Box<dyn FormatSuite>],
    shapes: &[(usize, usize)],
    progress: &mut dyn FnMut(&CpuRow),
) -> Result<Vec<CpuRow>, BenchError> {
    let mut out = Vec::new();
    for (index, &shape) in shapes.iter().enumerate() {
        for f in formats {
            for r in f.cpu(index, shape)? {
                progress(&r);
                out.push(r);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::toy::Fp16Toy;

    #[test]
    fn registry_names_are_unique_and_findable() {
        let r = registry();
        let mut names: Vec<&str> = r.iter().map(|f| f.name()).collect();
        assert!(names.contains(&Fp16Toy::NAME));
        assert!(names.contains(&"spqr") && names.contains(&"ans"));
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), r.len(), "two formats share a name");
        assert!(find("fp16-toy").is_some() && find("nope").is_none());
        let toy = find("fp16-toy").unwrap();
        assert_eq!(toy.variants(), ["default"]);
        assert_eq!(toy.max_gpu_batch(), 16);
    }

    #[test]
    fn batches_past_the_kernels_are_skipped_with_a_note() {
        assert_eq!(split_batches("x", &[1, 4], 8), (vec![1, 4], None));
        let (run, note) = split_batches("spqr", &[1, 4, 16, 32], 8);
        assert_eq!(run, [1, 4]);
        assert_eq!(
            note.unwrap(),
            "spqr: batch 16, 32 skipped: its GPU kernels take 1 to 8 vectors"
        );
        let (run, note) = split_batches("ans", &[1, 4], 1);
        assert_eq!(run, [1]);
        assert!(note.unwrap().ends_with("take 1 vector"));
    }
}
