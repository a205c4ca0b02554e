//! `cmv bench`: every compressed tensor's GPU product against our dense fp16 kernel and
//! cuBLAS fp16, at several batches, and the sums over the linear layers (the per-token time
//! of the weights). The measuring is the bench crate's (`bench::formats::run_matrix`,
//! `bench::dense::Baselines`): the same weight rotation, timing and checks as `cargo xtask
//! bench`. Without a GPU, or in a build without the `gpu` feature, it says so (exit code 12).

// Without the `gpu` feature only the arguments and the file are checked before `cmv bench`
// says it was built without GPU support: the measuring side and the report are unused there.
#![cfg_attr(not(feature = "gpu"), allow(dead_code))]

#[cfg(feature = "gpu")]
mod gpu;
pub mod report;
pub mod synthetic;

use std::path::PathBuf;

use safetensors::tensor::Dtype;

use crate::error::{CliError, Result};
use crate::formats::{self, Format, Int8Quant, Loaded};
use crate::stored;
use crate::tensors::{File, dtype_name};

use report::{NotTimed, Role};
use synthetic::Preset;

/// The largest batch of the dense baselines (`dense_gemv::MAX_BATCH`), which run at every
/// batch.
pub const MAX_BATCH: usize = 16;

/// The arguments of `cmv bench`.
#[derive(Debug, clap::Args)]
#[command(
    group(clap::ArgGroup::new("what").required(true).args(["file", "synthetic"])),
    after_help = "Examples:
  cmv bench model.spqr.safetensors
  cmv bench model.spqr.safetensors --batches 1,4 --json > bench.json
  cmv bench --synthetic llama-7b --format sbvr --variant n3
  cmv bench --synthetic llama-7b --format ans --int8-error 0.05 --json

Needs an NVIDIA GPU and driver (exit code 12 without one)."
)]
pub struct Args {
    /// A file written by `cmv compress`: every compressed tensor is timed, and every other
    /// 2-D float tensor as dense.
    pub file: Option<PathBuf>,
    /// Instead of a file: one decoder layer's linear layers of this model, with seeded
    /// Gaussian weights, compressed in memory with --format; the sums are also given times
    /// the model's layers.
    #[arg(long, value_enum, value_name = "MODEL", requires = "format")]
    pub synthetic: Option<Preset>,
    /// The format of --synthetic (`cmv formats` lists them).
    #[arg(short, long, requires = "synthetic", conflicts_with = "file")]
    pub format: Option<String>,
    /// Its encoder variant (default: its first).
    #[arg(long, requires = "synthetic")]
    pub variant: Option<String>,
    /// For --synthetic with an int8 format (ans, beam): quantize the weights per row with the
    /// largest step within this relative error, as `cmv compress --int8-error`.
    #[arg(long, value_name = "ERROR", requires = "synthetic",
          value_parser = crate::compress::parse_int8_error)]
    pub int8_error: Option<f64>,
    /// For --synthetic: the seed of the weights.
    #[arg(long, default_value_t = 0, requires = "synthetic")]
    pub seed: u64,
    /// Batches (input vectors per product), comma-separated, each 1 to 16. A format whose
    /// GPU kernels take fewer vectors reports those batches as not run.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16", value_parser = parse_batch)]
    pub batches: Vec<usize>,
    /// Timed calls per product (the median is reported).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..))]
    pub iters: u32,
    /// Untimed calls per product first.
    #[arg(long, default_value_t = 20)]
    pub warmup: u32,
    /// How calls are timed: replays of a CUDA graph of back-to-back calls (as in an
    /// inference step), or an event pair around each call launched from the host (quicker,
    /// but it adds the host's launch time to kernels of a few microseconds).
    #[arg(long, value_enum, default_value_t = Timing::Graph)]
    pub timing: Timing,
    /// Graph timing: time at most this many calls per product and batch where the bench's 20
    /// replays of a graph of one call per weight copy would time more (a small matrix has
    /// thousands of copies): then as many replays as fit, at least 3, after one untimed one.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub max_graph_calls: usize,
    /// Each product rotates through copies of its weights filling at least this many MiB
    /// (and 4 x L2), so that every call reads them from device memory. Lower it for a model
    /// of many small tensors (each copy is a device allocation).
    #[arg(long, default_value_t = 1024, value_name = "MIB")]
    pub min_rotation_mib: usize,
    /// Kept (uncompressed) 2-D tensors with fewer weights are not timed.
    #[arg(long, default_value_t = 4096, value_name = "N")]
    pub min_elements: usize,
    /// The CUDA device.
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON report to this file (the table still goes to the terminal).
    #[arg(long, value_name = "FILE")]
    pub json_out: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(short, long)]
    pub quiet: bool,
}

/// How calls are timed (`bench::Timing`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Timing {
    /// Replays of a CUDA graph of at least 16 back-to-back calls.
    Graph,
    /// An event pair around each call.
    Events,
}

impl Timing {
    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Timing::Graph => "graph",
            Timing::Events => "events",
        }
    }
}

/// A batch from 1 to [`MAX_BATCH`].
fn parse_batch(s: &str) -> std::result::Result<usize, String> {
    let b: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a batch: give numbers such as 1,4,16"))?;
    if (1..=MAX_BATCH).contains(&b) {
        Ok(b)
    } else {
        Err(format!(
            "batch {b} is not 1 to {MAX_BATCH} (the dense baselines' range)"
        ))
    }
}

/// One tensor to time.
pub struct Job {
    /// Its name.
    pub name: String,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Linear layer or embedding.
    pub role: Role,
    /// Compressed, or kept (timed as dense only).
    pub compressed: Option<Compressed>,
}

/// A compressed tensor to time.
pub struct Compressed {
    /// Its format.
    pub format: String,
    /// Its variant.
    pub variant: String,
    /// The container, loaded.
    pub loaded: Box<dyn Loaded>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("name", &self.name)
            .field("shape", &(self.rows, self.cols))
            .field(
                "format",
                &self
                    .compressed
                    .as_ref()
                    .map(|c| format!("{}/{}", c.format, c.variant)),
            )
            .finish()
    }
}

/// What `cmv bench` times.
#[derive(Debug)]
pub struct Plan {
    /// The source, for the report.
    pub source: report::Source,
    /// The tensors to time (for a synthetic set: none yet, see [`Plan::synthetic`]).
    pub jobs: Vec<Job>,
    /// Those not timed.
    pub not_timed: Vec<NotTimed>,
    /// Notes.
    pub notes: Vec<String>,
    /// A synthetic set still to be made (after the GPU is found).
    pub synthetic: Option<SyntheticPlan>,
}

/// A synthetic set to make.
pub struct SyntheticPlan {
    /// Its model.
    pub preset: Preset,
    /// The format.
    pub format: Box<dyn Format>,
    /// Its variant.
    pub variant: &'static str,
    /// How float weights become int8 for the int8 formats.
    pub int8: Int8Quant,
    /// The seed.
    pub seed: u64,
}

impl std::fmt::Debug for SyntheticPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyntheticPlan")
            .field("preset", &self.preset)
            .field("format", &self.format.name())
            .field("variant", &self.variant)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}

/// The plan of `args`: a file's tensors (read and checked), or a synthetic set's format and
/// variant (checked).
///
/// # Errors
/// Unreadable or invalid file, damaged containers; unknown format or variant.
pub fn plan(args: &Args) -> Result<Plan> {
    match (&args.file, args.synthetic) {
        (Some(path), None) => file_plan(path, args.min_elements),
        (None, Some(preset)) => synthetic_plan(args, preset),
        // clap's group makes exactly one of them present.
        _ => Err(CliError::Usage {
            reason: "give either FILE or --synthetic MODEL".into(),
        }),
    }
}

fn file_plan(path: &std::path::Path, min_elements: usize) -> Result<Plan> {
    let file = File::read(path)?;
    let parsed = file.parse()?;
    let mut jobs = Vec::new();
    let mut not_timed = Vec::new();
    let mut notes = Vec::new();
    if !parsed.is_cmv() {
        notes.push(format!(
            "{} was not written by `cmv compress`: its tensors are timed as dense only",
            path.display()
        ));
    }
    for name in &parsed.names {
        if stored::is_scales(&parsed, name) {
            continue;
        }
        if let Some(s) = stored::load(&parsed, name)? {
            jobs.push(Job {
                name: name.clone(),
                rows: s.entry.shape[0],
                cols: s.entry.shape[1],
                role: Role::of(name),
                compressed: Some(Compressed {
                    format: s.entry.format.clone(),
                    variant: s.entry.variant.clone(),
                    loaded: s.loaded,
                }),
            });
            continue;
        }
        let t = parsed.tensor(name)?;
        let reason = if t.shape.len() != 2 {
            Some(format!("{}-D", t.shape.len()))
        } else if !matches!(t.dtype, Dtype::F32 | Dtype::F16 | Dtype::BF16) {
            Some("not a float matrix".into())
        } else if t.elements() < min_elements {
            Some(format!("fewer than --min-elements {min_elements} weights"))
        } else {
            None
        };
        match reason {
            Some(reason) => not_timed.push(NotTimed {
                name: name.clone(),
                shape: t.shape.clone(),
                dtype: dtype_name(t.dtype),
                reason,
            }),
            None => jobs.push(Job {
                name: name.clone(),
                rows: t.shape[0],
                cols: t.shape[1],
                role: Role::of(name),
                compressed: None,
            }),
        }
    }
    Ok(Plan {
        source: report::Source::File {
            path: path.to_owned(),
        },
        jobs,
        not_timed,
        notes,
        synthetic: None,
    })
}

fn synthetic_plan(args: &Args, preset: Preset) -> Result<Plan> {
    let name = args.format.as_deref().unwrap_or_default();
    let format = formats::find(name).ok_or_else(|| CliError::UnknownFormat {
        name: name.to_owned(),
        known: formats::names(),
    })?;
    let variant = crate::compress::resolve_variant(format.as_ref(), args.variant.as_deref())?;
    let int8 = args.int8_error.map_or(Int8Quant::Absmax, Int8Quant::Error);
    Ok(Plan {
        source: report::Source::Synthetic {
            preset: preset.name().into(),
            format: format.name().into(),
            variant: variant.into(),
            seed: args.seed,
            sigma: synthetic::SIGMA,
            int8: match int8 {
                Int8Quant::Absmax => "absmax".into(),
                Int8Quant::Error(t) => format!("error {t}"),
            },
        },
        jobs: Vec::new(),
        not_timed: Vec::new(),
        notes: Vec::new(),
        synthetic: Some(SyntheticPlan {
            preset,
            format,
            variant,
            int8,
            seed: args.seed,
        }),
    })
}

/// Generates and compresses a synthetic set (in parallel), each tensor through its
/// container as `cmv compress` would store it.
///
/// # Errors
/// [`CliError::CannotTake`] when the format refuses a tensor.
pub fn make_synthetic(s: &SyntheticPlan, quiet: bool) -> Result<Vec<Job>> {
    use rayon::prelude::*;

    let shapes = s.preset.shapes();
    let weights: usize = shapes.iter().map(|t| t.rows * t.cols).sum();
    if !quiet {
        eprintln!(
            "generating and compressing {} tensors ({weights} weights) with {}/{}",
            shapes.len(),
            s.format.name(),
            s.variant
        );
    }
    let start = std::time::Instant::now();
    let jobs = shapes
        .par_iter()
        .enumerate()
        .map(|(i, shape)| {
            let data = synthetic::gaussian_f16_bytes(
                shape.rows * shape.cols,
                synthetic::SIGMA,
                synthetic::tensor_seed(s.seed, i),
            );
            let t = crate::tensors::Tensor {
                name: shape.name.clone(),
                dtype: Dtype::F16,
                shape: vec![shape.rows, shape.cols],
                data: &data,
                q8_0: None,
            };
            let cannot = |reason: String| CliError::CannotTake {
                tensor: shape.name.clone(),
                format: s.format.name(),
                reason,
            };
            let e = s
                .format
                .encode(s.variant, &t, None, s.int8)
                .map_err(cannot)?;
            let loaded = s.format.load(&e.blob).map_err(cannot)?;
            Ok(Job {
                name: shape.name.clone(),
                rows: shape.rows,
                cols: shape.cols,
                role: Role::of(&shape.name),
                compressed: Some(Compressed {
                    format: s.format.name().into(),
                    variant: s.variant.into(),
                    loaded,
                }),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    if !quiet {
        eprintln!("compressed in {:.1} s", start.elapsed().as_secs_f64());
    }
    Ok(jobs)
}

/// Runs `cmv bench`.
///
/// # Errors
/// As [`plan`]; [`CliError::NoGpu`] without a GPU (or GPU support); [`CliError::GpuFailed`]
/// when a product fails or does not match its reference.
pub fn run(args: &Args) -> Result<()> {
    let plan = plan(args)?;
    if let Some(path) = &args.json_out {
        // Found out before minutes of measuring, not after.
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => std::path::Path::new("."),
        };
        if !dir.is_dir() {
            return Err(CliError::Write {
                path: path.clone(),
                reason: format!("{} is not a directory", dir.display()),
            });
        }
    }
    run_plan(args, plan)
}

#[cfg(feature = "gpu")]
fn run_plan(args: &Args, plan: Plan) -> Result<()> {
    let r = gpu::run(args, plan)?;
    // A report of strings and numbers always serializes (a non-finite number as null).
    let json = serde_json::to_string_pretty(&r).unwrap_or_default();
    if let Some(path) = &args.json_out {
        std::fs::write(path, format!("{json}\n")).map_err(|e| CliError::Write {
            path: path.clone(),
            reason: e.to_string(),
        })?;
    }
    if args.json {
        println!("{json}");
    } else {
        print!("{}", report::table(&r));
    }
    Ok(())
}

#[cfg(not(feature = "gpu"))]
fn run_plan(_: &Args, _: Plan) -> Result<()> {
    Err(CliError::NoGpu {
        reason: "this cmv was built without GPU support (cargo feature `gpu` off); rebuild it \
                 with the default features: cargo build -p cmv-cli --release"
            .into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(line: &[&str]) -> std::result::Result<Args, clap::Error> {
        Cli::try_parse_from(std::iter::once("bench").chain(line.iter().copied())).map(|c| c.args)
    }

    #[test]
    fn arguments_parse_with_their_defaults() {
        let a = parse(&["m.safetensors"]).unwrap();
        assert_eq!(
            a.file.as_deref(),
            Some(std::path::Path::new("m.safetensors"))
        );
        assert_eq!(a.synthetic, None);
        assert_eq!(a.batches, [1, 4, 16]);
        assert_eq!((a.iters, a.warmup), (200, 20));
        assert_eq!(a.timing, Timing::Graph);
        assert_eq!(
            (a.min_rotation_mib, a.min_elements, a.device),
            (1024, 4096, 0)
        );
        assert_eq!(a.max_graph_calls, 10_000);
        assert!(!a.json && !a.quiet);

        let a = parse(&[
            "--synthetic",
            "llama-7b",
            "--format",
            "ans",
            "--int8-error",
            "0.05",
            "--batches",
            "1,4",
            "--iters",
            "50",
            "--timing",
            "events",
            "--json",
        ])
        .unwrap();
        assert_eq!(a.synthetic, Some(Preset::Llama7b));
        assert_eq!(a.format.as_deref(), Some("ans"));
        assert_eq!(a.int8_error, Some(0.05));
        assert_eq!(a.batches, [1, 4]);
        assert_eq!(a.iters, 50);
        assert_eq!(a.timing, Timing::Events);
        assert!(a.json);
    }

    #[test]
    fn malformed_arguments_are_refused() {
        for line in [
            &[][..],
            &[
                "m.safetensors",
                "--synthetic",
                "llama-7b",
                "--format",
                "spqr",
            ],
            &["--synthetic", "llama-7b"],
            &["--synthetic", "llama-13b", "--format", "spqr"],
            &["m.safetensors", "--format", "spqr"],
            &["m.safetensors", "--batches", "0"],
            &["m.safetensors", "--batches", "17"],
            &["m.safetensors", "--batches", "1,x"],
            &["m.safetensors", "--iters", "0"],
            &[
                "--synthetic",
                "llama-7b",
                "--format",
                "ans",
                "--int8-error",
                "2",
            ],
        ] {
            assert!(parse(line).is_err(), "{line:?} was accepted");
        }
    }

    #[test]
    fn an_unknown_format_or_variant_is_refused_before_any_gpu_work() {
        let a = parse(&["--synthetic", "llama-7b", "--format", "nope"]).unwrap();
        assert_eq!(plan(&a).unwrap_err().exit_code(), 6);
        let a = parse(&[
            "--synthetic",
            "llama-7b",
            "--format",
            "spqr",
            "--variant",
            "nope",
        ])
        .unwrap();
        assert_eq!(plan(&a).unwrap_err().exit_code(), 6);
        let a = parse(&["--synthetic", "llama-7b", "--format", "sbvr"]).unwrap();
        let p = plan(&a).unwrap();
        let s = p.synthetic.as_ref().unwrap();
        assert_eq!((s.format.name(), s.variant), ("sbvr", "n4"));
        assert!(p.jobs.is_empty());
    }
}
