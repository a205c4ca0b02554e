//! `cmv-bench`: the benchmark behind `cargo xtask bench`.

use std::path::PathBuf;
use std::process::ExitCode;

use bench::report::{self, Report};
use bench::{BenchConfig, BenchError, Timing, dense};
use clap::Parser;
use cmv_runtime::{Gpu, RuntimeError};
use dense_gemv::DenseGemv;

/// Benchmarks every cmv format against the dense baselines.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Folder for bench.json and speedup.svg.
    #[arg(long, default_value = "target/bench")]
    out_dir: PathBuf,
    /// Shapes as ROWSxCOLS, comma-separated (default: the seven LLM shapes).
    #[arg(long, value_delimiter = ',', value_parser = parse_shape)]
    shapes: Vec<(usize, usize)>,
    /// Batches, comma-separated (default: 1,4,16).
    #[arg(long, value_delimiter = ',')]
    batches: Vec<usize>,
    /// Timed calls per configuration (the median is reported; at least 100 for results).
    #[arg(long, default_value_t = 200)]
    iters: usize,
    /// Untimed warm-up calls per configuration.
    #[arg(long, default_value_t = 20)]
    warmup: usize,
    /// How calls are timed: replays of a CUDA graph of back-to-back calls, or an event pair
    /// around each call launched from the host.
    #[arg(long, value_enum, default_value_t = Timing::Graph)]
    timing: Timing,
    /// A quick run: the two smallest shapes, batch 1 and 4, 100 calls.
    #[arg(long)]
    quick: bool,
    /// Skip the GPU even if there is one.
    #[arg(long)]
    cpu_only: bool,
    /// Time the batch-1 kernel variants and streaming-read patterns instead (for tuning).
    #[arg(long)]
    explore: bool,
    /// Suites to run, comma-separated: dense, spqr, ans, weights (the last on the CPU).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "dense,spqr,ans,weights",
        value_parser = ["dense", "spqr", "ans", "weights"]
    )]
    suites: Vec<String>,
    /// SpQR suite: batches (kernels exist for 1, 2, 4 and 8 vectors).
    #[arg(long, value_delimiter = ',', default_value = "1,4,8")]
    spqr_batches: Vec<usize>,
    /// SpQR suite: blocks per tile row, comma-separated: `auto` (the launcher's choice) and
    /// fixed splits to compare with it (rows named like `csr/s4`), for tuning.
    #[arg(long, value_delimiter = ',', default_value = "auto", value_parser = parse_splits)]
    spqr_splits: Vec<Option<u32>>,
    /// The weights suite's safetensors model (`cargo xtask fetch-model` writes the default).
    #[arg(long, default_value = bench::weights::DEFAULT_MODEL)]
    model: PathBuf,
    /// MatVANS chain: matrix sizes d (default 2048,4096,8192,16384; 32768 needs ~16 GB).
    #[arg(long, value_delimiter = ',')]
    ans_dims: Vec<usize>,
    /// MatVANS chain: standard deviation of the entries.
    #[arg(long, default_value_t = 4.0)]
    ans_sigma: f64,
}

fn parse_splits(s: &str) -> Result<Option<u32>, String> {
    if s == "auto" {
        return Ok(None);
    }
    match s.parse::<u32>() {
        Ok(n) if n >= 1 => Ok(Some(n)),
        _ => Err(format!("split {s:?} is neither `auto` nor a number from 1")),
    }
}

fn parse_shape(s: &str) -> Result<(usize, usize), String> {
    let (r, c) = s
        .split_once('x')
        .ok_or_else(|| format!("shape {s:?} is not ROWSxCOLS"))?;
    let r = r
        .trim()
        .parse()
        .map_err(|e| format!("rows of {s:?}: {e}"))?;
    let c = c
        .trim()
        .parse()
        .map_err(|e| format!("cols of {s:?}: {e}"))?;
    if r == 0 || c == 0 {
        return Err(format!("shape {s:?} is empty"));
    }
    Ok((r, c))
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cmv-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), BenchError> {
    let mut cfg = BenchConfig::default();
    if args.quick {
        cfg.shapes = vec![(4096, 4096), (11008, 4096)];
        cfg.batches = vec![1, 4];
        cfg.iters = 100;
    }
    if !args.shapes.is_empty() {
        cfg.shapes = args.shapes.clone();
    }
    if !args.batches.is_empty() {
        cfg.batches = args.batches.clone();
    }
    if !args.quick {
        cfg.iters = args.iters;
    }
    cfg.warmup = args.warmup;
    cfg.timing = args.timing;
    let date = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let mut report = Report {
        device: "none".into(),
        driver: "none".into(),
        git_revision: env!("CMV_GIT_REV").into(),
        date,
        config: cfg.clone(),
        ceiling_gbps: None,
        gpu: Vec::new(),
        cpu: Vec::new(),
        gpu_skipped: None,
        ans_config: None,
        ans_sizes: Vec::new(),
        ans_chain: Vec::new(),
        spqr: Vec::new(),
        weights: None,
        weights_skipped: None,
    };
    let want = |suite: &str| args.suites.iter().any(|s| s == suite);
    let mut ans_cfg = bench::ans::ChainConfig {
        sigma: args.ans_sigma,
        ..Default::default()
    };
    if !args.ans_dims.is_empty() {
        ans_cfg.dims = args.ans_dims.clone();
    }
    if args.quick {
        ans_cfg.dims = vec![2048, 4096];
        ans_cfg.iters = 30;
    }
    let gpu = if args.cpu_only {
        Err(RuntimeError::NoDevice {
            ordinal: 0,
            count: 0,
        })
    } else {
        Gpu::new(0)
    };
    match gpu {
        Ok(gpu) => {
            let info = gpu.info().clone();
            report.device = info.name.clone();
            report.driver = info.driver_version_string();
            println!(
                "{} (sm_{}{}, {} SMs, {} MB L2, driver {}), build {}",
                info.name,
                info.compute_capability.0,
                info.compute_capability.1,
                info.sm_count,
                info.l2_bytes >> 20,
                report.driver,
                report.git_revision
            );
            let dense = DenseGemv::new(&gpu)?;
            if args.explore {
                return bench::explore::run(&gpu, &dense, &cfg);
            }
            let ceiling = dense::measure_ceiling(&gpu, &dense, &cfg)?;
            println!(
                "read ceiling: {:.1} GB/s (streaming read of {} MiB, median {:.1} us)",
                ceiling.gbps,
                ceiling.bytes >> 20,
                ceiling.median_us
            );
            report.ceiling_gbps = Some(ceiling.gbps);
            if want("dense") {
                let mut ms = dense::run_gpu(&gpu, &dense, &cfg, ceiling.gbps, |m| {
                    eprintln!(
                        "  {}/{} {}x{} b{}: {:.2} us, {:.1} GB/s ({:.1}%)",
                        m.format,
                        m.kernel,
                        m.rows,
                        m.cols,
                        m.batch,
                        m.median_us,
                        m.gbps,
                        m.pct_of_ceiling
                    );
                })?;
                report::fill_speedups(&mut ms);
                report.gpu = ms;
            }
            if want("spqr") {
                let rows = bench::spqr::run_gpu(
                    &gpu,
                    &cfg,
                    &args.spqr_batches,
                    &args.spqr_splits,
                    ceiling.gbps,
                    |r| {
                        eprintln!(
                            "  spqr/{} {}x{} b{} ({} splits): {:.2} us, {:.1} GB/s ({:.1}%), same-size read {:.2} us ({:.1}%), {:.2}x cuBLAS, {:.2}x dense, {:.2} bits/w",
                            r.kernel,
                            r.rows,
                            r.cols,
                            r.batch,
                            r.splits,
                            r.median_us,
                            r.gbps,
                            r.pct_of_ceiling,
                            r.read_us,
                            r.pct_of_same_size_read,
                            r.speedup_vs_cublas,
                            r.speedup_vs_dense,
                            r.bits_per_weight
                        );
                    },
                )?;
                println!("SpQR (fused 3-bit GEMV):\n{}", report::spqr_table(&rows));
                report.spqr = rows;
            }
            if want("ans") {
                let (sizes, chain) =
                    bench::ans::run_gpu(&gpu, &ans_cfg, |line| eprintln!("  {line}"))?;
                report.ans_sizes = sizes;
                report.ans_chain = chain;
                report.ans_config = Some(ans_cfg.clone());
            }
        }
        Err(e) => {
            println!(
                "no GPU ({e}): running the CPU side only (sizes, bits per weight, CPU reference timings)"
            );
            report.gpu_skipped = Some(e.to_string());
            if want("ans") {
                report.ans_sizes = bench::ans::run_cpu(&ans_cfg)?;
                report.ans_config = Some(ans_cfg.clone());
            }
        }
    }
    if want("weights") {
        if args.model.exists() {
            println!(
                "weights: int8-quantizing and encoding the 2-D tensors of {}",
                args.model.display()
            );
        }
        match bench::weights::run(&args.model, |_| {})? {
            Some(w) => report.weights = Some(w),
            None => {
                let line = bench::weights::missing_line(&args.model);
                println!("{line}");
                report.weights_skipped = Some(line);
            }
        }
    }
    if want("dense") {
        report.cpu = dense::run_cpu(&cfg)?;
        println!("\nCPU side:\n{}", report::cpu_table(&report.cpu));
    }
    if !report.gpu.is_empty() {
        println!(
            "GPU ({}, ceiling {:.1} GB/s):\n{}",
            report.device,
            report.ceiling_gbps.unwrap_or(0.0),
            report::gpu_table(&report.gpu)
        );
    }
    if !report.ans_sizes.is_empty() {
        println!(
            "MatVANS sizes, bits per element (sigma {}):\n{}",
            ans_cfg.sigma,
            report::ans_size_table(&report.ans_sizes)
        );
    }
    if !report.ans_chain.is_empty() {
        println!(
            "MatVANS chain of {} products d x d, to v_10 downloaded:\n{}",
            bench::ans::CHAIN,
            report::ans_chain_table(&report.ans_chain)
        );
    }
    if let Some(w) = &report.weights {
        println!(
            "Real weights, int8 per-row absmax, bits per element ({}):\n{}",
            w.model,
            bench::weights::table(w)
        );
    }
    for p in report::write_files(&report, &args.out_dir)? {
        println!("wrote {p}");
    }
    Ok(())
}
