//! `cmv-bench`: the benchmark behind `cargo xtask bench`.

use std::path::PathBuf;
use std::process::ExitCode;

use bench::dense::{self, Baselines};
use bench::report::{self, Report};
use bench::{BenchConfig, BenchError, Row, Timing};
use clap::{CommandFactory, Parser};
use cmv_runtime::{Gpu, RuntimeError};
use dense_gemv::DenseGemv;

/// Benchmarks every cmv format against the dense baselines.
#[derive(Parser, Debug)]
#[command(name = "cmv-bench", version, about)]
struct Args {
    /// Folder for bench.json and speedup.svg.
    #[arg(long, default_value = "target/bench")]
    out_dir: PathBuf,
    #[arg(long, value_delimiter = ',', value_parser = parse_shape, help = shapes_help())]
    shapes: Vec<(usize, usize)>,
    /// Batches, comma-separated, each 1 to 16 (default: 1,4,16). A format whose GPU kernels
    /// take fewer vectors skips the larger batches, with a note.
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
    #[arg(long, value_delimiter = ',', help = suites_help())]
    suites: Vec<String>,
    /// SpQR suite: batches, each 1 to 8 (the GPU SpQR kernels' range; default 1,4,8).
    #[arg(long, value_delimiter = ',', default_value = "1,4,8")]
    spqr_batches: Vec<usize>,
    /// SpQR suite: blocks per tile row, comma-separated: `auto` (the launcher's choice, the
    /// format suite's rows) and fixed splits to compare with it (rows named like `csr/s4`),
    /// for tuning; without `auto` only the fixed splits run.
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

fn shapes_list(shapes: &[(usize, usize)]) -> String {
    shapes
        .iter()
        .map(|(r, c)| format!("{r}x{c}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn shapes_help() -> String {
    format!(
        "Shapes as ROWSxCOLS, comma-separated (default: the {} LLM shapes {}; with --quick, and \
         on the CPU side, which encodes every format on the host: {})",
        bench::SHAPES.len(),
        shapes_list(&bench::SHAPES),
        shapes_list(&bench::CPU_SHAPES)
    )
}

/// Suites besides the registered formats.
const DENSE: &str = "dense";
const WEIGHTS: &str = "weights";

/// Every suite name, in the order they run: dense, the formats (registered ones, and the
/// suites of formats not yet on the traits), weights.
fn suite_names() -> Vec<&'static str> {
    let mut v = vec![DENSE];
    v.extend(bench::formats::registry().iter().map(|f| f.name()));
    v.push(WEIGHTS);
    v
}

fn suites_help() -> String {
    format!(
        "Suites to run, comma-separated: {} (default: all; `weights` runs on the CPU, `ans` \
         adds the MatVANS chain)",
        suite_names().join(", ")
    )
}

/// The largest batch suite `name`'s GPU kernels take.
fn max_batch(name: &str) -> usize {
    match bench::formats::find(name) {
        Some(f) => f.max_gpu_batch(),
        None => dense_gemv::MAX_BATCH as usize,
    }
}

/// Checks what clap cannot: batches each suite can run, known suite names.
fn validate(args: &Args) -> Result<(), String> {
    let dense_max = dense_gemv::MAX_BATCH as usize;
    if let Some(b) = args
        .batches
        .iter()
        .find(|&&b| !(1..=dense_max).contains(&b))
    {
        return Err(format!(
            "--batches {b}: batches must be 1 to {dense_max} (the dense baselines run at every \
             batch and take 1 to {dense_max} vectors)"
        ));
    }
    let spqr_max = max_batch("spqr");
    if let Some(b) = args
        .spqr_batches
        .iter()
        .find(|&&b| !(1..=spqr_max).contains(&b))
    {
        return Err(format!(
            "--spqr-batches {b}: the GPU SpQR kernels take 1 to {spqr_max} vectors"
        ));
    }
    let known = suite_names();
    if let Some(s) = args.suites.iter().find(|s| !known.contains(&s.as_str())) {
        return Err(format!(
            "--suites {s}: unknown suite; the suites are {}",
            known.join(", ")
        ));
    }
    if args.ans_dims.contains(&0) {
        return Err("--ans-dims 0: matrix sizes must be at least 1".into());
    }
    Ok(())
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
    if let Err(msg) = validate(&args) {
        Args::command()
            .error(clap::error::ErrorKind::ValueValidation, msg)
            .exit();
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cmv-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn progress_line(r: &Row) -> String {
    let ratio = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}x"));
    format!(
        "  {}/{} {}x{} b{}: {:.2} us, {:.1} GB/s ({:.1}%), same-size read {:.2} us ({:.1}%), {} cuBLAS, {} dense, {:.2} bits/w, {}",
        r.format,
        r.variant,
        r.rows,
        r.cols,
        r.batch,
        r.median_us,
        r.gbps,
        r.pct_of_ceiling,
        r.read_us,
        r.pct_of_same_size_read,
        ratio(r.speedup_vs_cublas),
        ratio(r.speedup_vs_dense),
        r.bits_per_weight,
        r.check
    )
}

fn run(args: &Args) -> Result<(), BenchError> {
    let mut cfg = BenchConfig::default();
    if args.quick {
        cfg.shapes = bench::CPU_SHAPES.to_vec();
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
    cfg.format_batches
        .insert("spqr".into(), args.spqr_batches.clone());
    // The CPU side encodes every format at every shape on the host: the two quick shapes
    // unless shapes are given.
    let cpu_shapes = if args.shapes.is_empty() {
        bench::CPU_SHAPES.to_vec()
    } else {
        args.shapes.clone()
    };
    let suites: Vec<String> = if args.suites.is_empty() {
        suite_names().into_iter().map(String::from).collect()
    } else {
        args.suites.clone()
    };
    let want = |suite: &str| suites.iter().any(|s| s == suite);
    // `--spqr-splits` without `auto` runs the fixed splits only.
    let spqr_auto = args.spqr_splits.contains(&None);
    let formats: Vec<_> = bench::formats::registry()
        .into_iter()
        .filter(|f| want(f.name()) && (f.name() != "spqr" || spqr_auto))
        .collect();
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
        notes: Vec::new(),
        ans_config: None,
        ans_sizes: Vec::new(),
        ans_chain: Vec::new(),
        weights: None,
        weights_skipped: None,
    };
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
            let mut bench = Baselines::new(&gpu, &cfg, ceiling.gbps)?;
            let mut progress = |r: &Row| eprintln!("{}", progress_line(r));
            if want(DENSE) {
                report.gpu = dense::run_gpu(&mut bench, &mut progress)?;
            }
            let rows = bench::formats::run_gpu_all(
                &mut bench,
                &formats,
                &cfg.shapes,
                &|name| cfg.batches_for(name),
                &mut report.notes,
                &mut progress,
            )?;
            report.gpu.extend(rows);
            let fixed: Vec<u32> = args.spqr_splits.iter().flatten().copied().collect();
            if want("spqr") && !fixed.is_empty() {
                let (run, _) = bench::formats::split_batches(
                    "spqr",
                    &cfg.batches_for("spqr"),
                    max_batch("spqr"),
                );
                let rows =
                    bench::spqr::run_splits(&mut bench, &cfg.shapes, &run, &fixed, &mut progress)?;
                report.gpu.extend(rows);
            }
            drop(bench);
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
                if args.ans_dims.is_empty() && !args.quick {
                    // Encoding the chain's larger matrices takes minutes on a few cores.
                    ans_cfg.dims = vec![2048, 4096];
                    println!(
                        "MatVANS sizes at d = 2048, 4096 on the CPU side (--ans-dims for others)"
                    );
                }
                report.ans_sizes = bench::ans::run_cpu(&ans_cfg)?;
                report.ans_config = Some(ans_cfg.clone());
            }
        }
    }
    if want(WEIGHTS) {
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
    if want(DENSE) {
        report.cpu = dense::run_cpu(&cpu_shapes)?;
    }
    if !formats.is_empty() {
        println!(
            "CPU side of {} at {}: encoding and batch-1 references",
            formats
                .iter()
                .map(|f| f.name())
                .collect::<Vec<_>>()
                .join(", "),
            shapes_list(&cpu_shapes)
        );
    }
    let rows = bench::formats::run_cpu_all(&formats, &cpu_shapes, &mut |r| {
        eprintln!(
            "  {}/{} {}x{}: {:.3} bits/w, encoded in {:.0} ms, reference {:.1} ms",
            r.format, r.variant, r.rows, r.cols, r.bits_per_weight, r.encode_ms, r.reference_ms
        );
    })?;
    report.cpu.extend(rows);
    if !report.cpu.is_empty() {
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
    for n in &report.notes {
        println!("note: {n}");
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
    if let Some(why) = report::no_plot_reason(&report) {
        println!("{why}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> Args {
        Args::try_parse_from(std::iter::once("cmv-bench").chain(extra.iter().copied())).unwrap()
    }

    #[test]
    fn help_names_every_default_shape() {
        let help = shapes_help();
        assert!(help.contains(&format!("the {} LLM shapes", bench::SHAPES.len())));
        for (r, c) in bench::SHAPES {
            assert!(help.contains(&format!("{r}x{c}")), "{help}");
        }
    }

    #[test]
    fn batches_suites_cannot_run_are_refused() {
        validate(&args(&[])).unwrap();
        validate(&args(&["--batches", "1,16", "--spqr-batches", "1,3,8"])).unwrap();
        let e = validate(&args(&["--batches", "0"])).unwrap_err();
        assert!(e.contains("--batches 0") && e.contains("1 to 16"), "{e}");
        assert!(validate(&args(&["--batches", "17"])).is_err());
        let e = validate(&args(&["--spqr-batches", "9"])).unwrap_err();
        assert!(e.contains("SpQR") && e.contains("1 to 8"), "{e}");
        assert!(validate(&args(&["--spqr-batches", "0"])).is_err());
        let e = validate(&args(&["--suites", "dense,nope"])).unwrap_err();
        assert!(e.contains("nope") && e.contains("dense"), "{e}");
        validate(&args(&["--suites", "fp16-toy,spqr,ans,weights"])).unwrap();
    }
}
