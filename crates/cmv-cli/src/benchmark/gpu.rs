//! The GPU side of `cmv bench`, over the bench crate: the read ceiling, the dense baselines
//! ([`Baselines`]: our fp16 kernel and cuBLAS, each measured once per shape and batch), and
//! every compressed tensor through `bench::formats::run_matrix` (rotation, CUDA-graph or event
//! timing, outputs checked against the CPU reference before and after timing).

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use bench::dense::{self, Baseline, Baselines};
use bench::{BenchConfig, BenchError, Row};
use cmv_runtime::{Gpu, RuntimeError};
use dense_gemv::DenseGemv;

use super::report::{BatchResult, Config, Device, Measured, Parts, Report, Role, TensorReport};
use super::{Args, Job, Plan, Timing, make_synthetic};
use crate::error::{CliError, Result};

// The batches `cmv bench` accepts are those the dense baselines run.
const _: () = assert!(super::MAX_BATCH == dense_gemv::MAX_BATCH as usize);

/// A failure while measuring `tensor`.
fn failed(tensor: &str) -> impl Fn(BenchError) -> CliError + '_ {
    move |e| CliError::GpuFailed {
        tensor: tensor.to_owned(),
        reason: e.to_string(),
    }
}

/// Measures `plan` on the GPU (`args.device`) and builds the report.
///
/// # Errors
/// [`CliError::NoGpu`] without a driver or device; [`CliError::CannotTake`] when a synthetic
/// tensor cannot be compressed; [`CliError::GpuFailed`] when a product fails or does not
/// match its CPU reference.
pub fn run(args: &Args, mut plan: Plan) -> Result<Report> {
    let gpu = Gpu::new(args.device).map_err(|e| CliError::NoGpu {
        reason: match e {
            RuntimeError::NoDevice { .. } => format!("{e}; choose one with --device"),
            e => e.to_string(),
        },
    })?;
    let info = gpu.info().clone();
    let driver = info.driver_version_string();
    let say = |line: String| {
        if !args.quiet {
            eprintln!("{line}");
        }
    };
    say(format!(
        "{} (sm_{}{}, {} SMs, {} MiB L2, driver {driver})",
        info.name,
        info.compute_capability.0,
        info.compute_capability.1,
        info.sm_count,
        info.l2_bytes >> 20
    ));
    let layers = match &plan.synthetic {
        Some(s) => {
            plan.jobs = make_synthetic(s, args.quiet)?;
            Some(s.preset.layers())
        }
        None => None,
    };
    let mut batches: Vec<usize> = Vec::new();
    for &b in &args.batches {
        if !batches.contains(&b) {
            batches.push(b);
        }
    }
    let cfg = BenchConfig {
        shapes: plan.jobs.iter().map(|j| (j.rows, j.cols)).collect(),
        batches: batches.clone(),
        warmup: args.warmup as usize,
        iters: args.iters as usize,
        min_rotation_bytes: args.min_rotation_mib.saturating_mul(1 << 20),
        timing: match args.timing {
            Timing::Graph => bench::Timing::Graph,
            Timing::Events => bench::Timing::Events,
        },
        format_batches: BTreeMap::new(),
    };
    let dense_kernels = DenseGemv::new(&gpu).map_err(|e| failed("-")(e.into()))?;
    let ceiling = dense::measure_ceiling(&gpu, &dense_kernels, &cfg).map_err(failed("-"))?;
    drop(dense_kernels);
    say(format!(
        "read ceiling {:.1} GB/s; timing {} tensors at batch {batches:?}",
        ceiling.gbps,
        plan.jobs.len()
    ));
    let mut bench = Baselines::new(&gpu, &cfg, ceiling.gbps).map_err(failed("-"))?;
    let mut notes = plan.notes;
    let cublas = bench.has_cublas();
    if !cublas {
        notes.push("cuBLAS could not be loaded: its columns and speedups are empty".into());
    }
    // By shape, so that the dense operands of a shape are uploaded once; reported in the
    // file's order.
    let mut order: Vec<usize> = (0..plan.jobs.len()).collect();
    order.sort_by_key(|&i| (plan.jobs[i].rows, plan.jobs[i].cols));
    let mut done: Vec<Option<TensorReport>> = vec![None; plan.jobs.len()];
    let start = Instant::now();
    for (k, &i) in order.iter().enumerate() {
        let job = &plan.jobs[i];
        let t0 = Instant::now();
        let seed = 1000 * (i as u64 + 1);
        let t = measure(
            &mut bench,
            job,
            &batches,
            seed,
            args.max_graph_calls,
            &mut notes,
        )
        .map_err(failed(&job.name))?;
        say(progress_line(
            k + 1,
            order.len(),
            &t,
            t0.elapsed().as_secs_f64(),
        ));
        done[i] = Some(t);
    }
    drop(bench);
    say(format!(
        "measured in {:.1} s",
        start.elapsed().as_secs_f64()
    ));
    let report = Report::build(Parts {
        source: plan.source,
        device: Device {
            name: info.name.clone(),
            compute_capability: format!(
                "{}.{}",
                info.compute_capability.0, info.compute_capability.1
            ),
            sm_count: info.sm_count,
            l2_bytes: info.l2_bytes,
            driver,
            ceiling_gbps: ceiling.gbps,
            cublas,
        },
        date: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        config: Config {
            batches,
            iters: cfg.iters,
            warmup: cfg.warmup,
            timing: args.timing.name().into(),
            max_graph_calls: args.max_graph_calls,
            min_rotation_bytes: cfg.min_rotation_bytes,
            min_elements: args.min_elements,
        },
        tensors: done.into_iter().flatten().collect(),
        not_timed: plan.not_timed,
        notes,
        layers,
    });
    Ok(report)
}

/// One tensor at every batch: the compressed product where its kernels take the batch, our
/// dense fp16 kernel and cuBLAS at its shape.
fn measure(
    bench: &mut Baselines<'_>,
    job: &Job,
    batches: &[usize],
    seed: u64,
    max_graph_calls: usize,
    notes: &mut Vec<String>,
) -> std::result::Result<TensorReport, BenchError> {
    let (rows, cols) = (job.rows, job.cols);
    let mut timed: HashMap<usize, Row> = HashMap::new();
    let mut skip_reason = None;
    let bits_per_weight = match &job.compressed {
        Some(c) => {
            let max = c.loaded.max_gpu_batch();
            let (run, note) = bench::formats::split_batches(&c.format, batches, max);
            if let Some(note) = note {
                if !notes.contains(&note) {
                    notes.push(note);
                }
                skip_reason = Some(if max == 1 {
                    "its GPU kernels take 1 vector".to_owned()
                } else {
                    format!("its GPU kernels take 1 to {max} vectors")
                });
            }
            if !run.is_empty() {
                let (gpu, cfg) = (bench.gpu(), bench.cfg());
                let time = |copies: usize, launch: &mut dyn FnMut(usize) -> BenchResult<()>| {
                    time_capped(gpu, cfg, max_graph_calls, copies, launch)
                };
                for r in c
                    .loaded
                    .bench_gpu(bench, &c.variant, &run, seed, Some(&time))?
                {
                    timed.insert(r.batch, r);
                }
            }
            c.loaded.size_breakdown().kernel_bits_per_weight()
        }
        None => 16.0,
    };
    let mut out = Vec::new();
    for &batch in batches {
        let dense_us = bench.median_us(Baseline::CmvFp16, rows, cols, batch)?;
        let cublas_us = bench.median_us(Baseline::CublasFp16, rows, cols, batch)?;
        let compressed = timed.remove(&batch).map(measured);
        let skipped = match (&job.compressed, &compressed) {
            (Some(_), None) => Some(skip_reason.clone().unwrap_or_else(|| "not measured".into())),
            _ => None,
        };
        out.push(BatchResult::new(
            batch, compressed, skipped, dense_us, cublas_us,
        ));
    }
    Ok(TensorReport {
        name: job.name.clone(),
        rows,
        cols,
        format: job.compressed.as_ref().map(|c| c.format.clone()),
        variant: job.compressed.as_ref().map(|c| c.variant.clone()),
        bits_per_weight,
        role: job.role,
        in_sum: job.role == Role::Linear,
        batches: out,
    })
}

type BenchResult<T> = std::result::Result<T, BenchError>;

/// The calls per graph and the timed replays of graph timing over `copies` weight copies:
/// as the bench's `Timing::time` (a graph of one call per copy, at least 16; at least 20
/// replays, enough for `cfg.iters` calls), unless that times more than `max_calls` calls;
/// then as many replays as fit in `max_calls`, at least 3 (and enough for `cfg.iters`).
/// `None`: the bench's own.
pub fn capped_replays(iters: usize, copies: usize, max_calls: usize) -> (usize, Option<usize>) {
    let copies = copies.max(1);
    let calls = 16usize.div_ceil(copies) * copies;
    let reps = iters.div_ceil(calls).max(20);
    if reps.saturating_mul(calls) <= max_calls {
        return (calls, None);
    }
    (
        calls,
        Some((max_calls / calls).max(iters.div_ceil(calls)).max(3)),
    )
}

/// Times `launch` as the bench does (`cfg.timing`), with graph timing capped by
/// [`capped_replays`] (one untimed replay instead of three where capped).
fn time_capped(
    gpu: &Gpu,
    cfg: &BenchConfig,
    max_calls: usize,
    copies: usize,
    launch: &mut dyn FnMut(usize) -> BenchResult<()>,
) -> BenchResult<cmv_runtime::Timings> {
    match capped_replays(cfg.iters, copies, max_calls) {
        (calls, Some(reps)) if cfg.timing == bench::Timing::Graph => {
            cmv_runtime::time_graph(gpu, calls, 1, reps, launch)
        }
        _ => cfg.timing.time(gpu, cfg, copies, launch),
    }
}

/// A bench row's measurements.
fn measured(r: Row) -> Measured {
    Measured {
        median_us: r.median_us,
        p10_us: r.p10_us,
        p90_us: r.p90_us,
        bytes_read: r.bytes_read,
        gbps: r.gbps,
        pct_of_ceiling: r.pct_of_ceiling,
        read_us: r.read_us,
        pct_of_same_size_read: r.pct_of_same_size_read,
        copies: r.copies,
        check: r.check,
    }
}

/// `[k/n] name RxC format: b1 cmv / fp16 / cuBLAS us, ...`.
fn progress_line(k: usize, n: usize, t: &TensorReport, secs: f64) -> String {
    let format = match (&t.format, &t.variant) {
        (Some(f), Some(v)) => format!("{f}/{v}"),
        _ => "kept".into(),
    };
    let num = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
    let per_batch: Vec<String> = t
        .batches
        .iter()
        .map(|b| {
            format!(
                "b{} {} / {} / {} us",
                b.batch,
                num(b.compressed.as_ref().map(|m| m.median_us)),
                num(b.dense_fp16_us),
                num(b.cublas_fp16_us)
            )
        })
        .collect();
    format!(
        "[{k}/{n}] {} {}x{} {format} (cmv / fp16 / cuBLAS): {} ({secs:.1} s)",
        t.name,
        t.rows,
        t.cols,
        per_batch.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::capped_replays;

    #[test]
    fn graph_replays_are_the_benchs_unless_capped() {
        // Large matrices (few copies): the bench's 20 replays.
        assert_eq!(capped_replays(200, 128, 10_000), (128, None));
        assert_eq!(capped_replays(200, 1, 10_000), (16, None));
        assert_eq!(capped_replays(200, 3, 10_000), (18, None));
        // Thousands of small copies: as many replays as fit, at least 3.
        assert_eq!(capped_replays(200, 4900, 10_000), (4900, Some(3)));
        assert_eq!(capped_replays(200, 600, 10_000), (600, Some(16)));
        // Never fewer calls than --iters asks for.
        assert_eq!(capped_replays(50_000, 4900, 10_000), (4900, Some(11)));
        // No cap to speak of: the bench's.
        assert_eq!(capped_replays(200, 4900, usize::MAX), (4900, None));
    }
}
