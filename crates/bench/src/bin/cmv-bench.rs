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
    /// Time the tensor-core kernels for batch 2-16 (every variant and split-K plan) beside the
    /// default path, the previous kernels and cuBLAS, instead (for tuning); `--batches` and
    /// `--variants` (parts of kernel names) narrow it.
    #[arg(long)]
    explore_tc: bool,
    #[arg(long, value_delimiter = ',', help = suites_help())]
    suites: Vec<String>,
    /// SpQR suite: batches, each 1 to 16 (the GPU SpQR kernels' range; default 1,4,8,16).
    #[arg(long, value_delimiter = ',', default_value = "1,4,8,16")]
    spqr_batches: Vec<usize>,
    /// SpQR suite: blocks per tile row, comma-separated: `auto` (the launcher's choice, the
    /// format suite's rows) and fixed splits to compare with it (rows named like `csr/s4`),
    /// for tuning; without `auto` only the fixed splits run.
    #[arg(long, value_delimiter = ',', default_value = "auto", value_parser = parse_splits)]
    spqr_splits: Vec<Option<u32>>,
    /// SpQR suite: leave out the integer-MMA kernel's batch-1 rows (`csr/i8`, `ptcsr/i8`),
    /// which run by default where the SpQR batches include 1.
    #[arg(long)]
    spqr_no_int8: bool,
    /// SBVR suite: also run these GEMV ways, comma-separated (`mma`: binary tensor cores, `i8`:
    /// int8 tensor cores, `popc`: CUDA cores), rows named like `n4/i8`, beside the default way.
    #[arg(long, value_delimiter = ',', value_parser = bench::sbvr::parse_way)]
    sbvr_ways: Vec<sbvr_format::gpu::Way>,
    /// VQ suite: also run these GEMV kernels, comma-separated (`mma`: tensor cores, row groups
    /// per warp chosen per launch (the default); `mma2`, `mma4`: 2 or 4 row groups per warp;
    /// `table`: the lookup-table kernel; `stream`; `big`: the big-codebook kernels (AQLM-3: the
    /// table kernel for one vector, the tensor-core one for more), `big-mma`: the tensor-core
    /// one for every batch,
    /// `big-gmem`, `big-smem`, `big-r8-gmem`, `big-r8-smem`, `big-1024`: with
    /// its codebook entries in global memory, shared memory, registers or a mix), rows named like
    /// `gptvq2/table`, beside the default choice; a kernel that does not take a matrix leaves
    /// it to the default.
    #[arg(long, value_delimiter = ',', value_parser = bench::vq::parse_kernel)]
    vq_kernels: Vec<vq_codebook::gpu::VqKernel>,
    /// VQ suite: also run the VQ-GEMM (more than 16 inputs; GPTVQ-2, and AQLM-3 where
    /// `--variants` names it) at these input counts, comma-separated (e.g. `128,512`),
    /// against cuBLAS fp16 GEMM on the dequantized weights.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(17..=65536))]
    vq_gemm_tokens: Vec<u32>,
    /// Only these variants of every format suite, comma-separated (e.g. `gptvq2,cq2`; a format
    /// with none of them named runs none). Default: every variant.
    #[arg(long, value_delimiter = ',')]
    variants: Vec<String>,
    /// The weights suite's safetensors model (`cargo xtask fetch-model` writes the default).
    #[arg(long, default_value = bench::weights::DEFAULT_MODEL)]
    model: PathBuf,
    /// MatVANS chain: matrix sizes d (default 2048,4096,8192,16384; 32768 needs ~16 GB).
    #[arg(long, value_delimiter = ',')]
    ans_dims: Vec<usize>,
    /// MatVANS chain: standard deviation of the entries.
    #[arg(long, default_value_t = 4.0)]
    ans_sigma: f64,
    /// MatVANS chain: also measure `ans-lanes` with these segments (columns per unit, each a
    /// multiple of 16), rows named `ans-lanes-s{S}`.
    #[arg(long, value_delimiter = ',')]
    ans_lane_segments: Vec<usize>,
    /// MatVANS chain: only these variants, comma-separated (e.g. `ans-lanes,ans-warp-rows`;
    /// default: all).
    #[arg(long, value_delimiter = ',')]
    ans_variants: Vec<String>,
    /// BEAM GEMM (suite beam-gemm): sizes, comma-separated: the bytes of one operand in the
    /// naive layout (`64MiB`, `1GiB`: square, the largest side whose u64 square fits) or a
    /// side (`1024`).
    #[arg(long, default_value = bench::beam::DEFAULT_SIZES)]
    beam_sizes: String,
    /// BEAM GEMM: widths of A and B, e.g. `1-64` or `1,2,4,7,8,12,16,24,31-33,48,63,64`.
    #[arg(long, default_value = bench::beam::DEFAULT_GEMM_BITS)]
    beam_bits: String,
    /// BEAM GEMM: kernels, `all` or some of guide, tight, slabs, slabs-flex-out, nogaps,
    /// nogaps-flex-out, mma (speedups need guide and tight).
    #[arg(long, default_value = "all")]
    beam_kernels: String,
    /// BEAM GEMM: output modes STRATEGY/OVERFLOW (sai, c2p2, maxv / ovf, sat), or `all`.
    #[arg(long, default_value = bench::beam::DEFAULT_GEMM_OUTPUTS)]
    beam_outputs: String,
    /// BEAM GEMM: untimed calls per kernel (the first checks that it runs).
    #[arg(long, default_value_t = 1)]
    beam_warmup: usize,
    /// BEAM GEMM: timed calls per kernel, the median reported (default: 10 up to a side of
    /// 4096, 3 above).
    #[arg(long)]
    beam_iters: Option<usize>,
    /// BEAM GEMM: output elements checked against exact CPU dot products per kernel (besides
    /// the whole output against the first kernel's).
    #[arg(long, default_value_t = 512)]
    beam_samples: usize,
    /// BEAM GEMM: merge into the beam-gemm.json already in --out-dir (rows this run measures
    /// again are replaced), so that runs over parts of the widths make one report and plot.
    #[arg(long)]
    beam_append: bool,
    /// BEAM GEMV (suite beam-gemv, at --shapes, default the 7 LLM shapes): widths.
    #[arg(long, default_value = bench::beam::DEFAULT_GEMV_BITS)]
    beam_gemv_bits: String,
    /// BEAM GEMV: output modes STRATEGY/OVERFLOW.
    #[arg(long, default_value = bench::beam::DEFAULT_GEMV_OUTPUTS)]
    beam_gemv_outputs: String,
    /// BEAM GEMV: vectors (columns of B), each 1 to 16.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    beam_gemv_batches: Vec<usize>,
    /// BEAM GEMV: kernel choices to time, `auto` (what a user gets: the streaming tensor-core
    /// kernel up to 8 bits), `tc-stream` (that kernel), `tensor-cores` (the first tensor-core
    /// kernel, every width up to 8), `cuda-cores` (the `nogaps` CUDA-core kernels), `any` (the
    /// general kernel).
    #[arg(long, default_value = "auto")]
    beam_gemv_paths: String,
    /// BEAM GEMV: how the fast kernels' vector is prepared, `auto`, `kernel` (a separate
    /// launch writes it once) or `fused` (each block builds it).
    #[arg(long, default_value = "auto")]
    beam_gemv_preps: String,
    /// BEAM GEMV: extra runs of the streaming tensor-core kernel with these shapes, `UxSxW`
    /// (segments per unit, stages per warp's ring, warps per block), comma-separated: for
    /// tuning.
    #[arg(long, default_value = "")]
    beam_gemv_stream: String,
    /// BEAM GEMV: extra runs of the CUDA-core ring kernel with these stages per warp's ring,
    /// comma-separated (2 to 8): for tuning.
    #[arg(long, default_value = "")]
    beam_gemv_ring_stages: String,
    /// BEAM GEMV: how the vectors are given, `row` (an n x k matrix, each vector packed like a
    /// row of A: the direct kernels at 4, 6, 8, 12, 16, 24 and 32 bits, 1 to 16 vectors) and/or
    /// `column` (a k x n matrix), comma-separated.
    #[arg(long, default_value = "row")]
    beam_gemv_vectors: String,
    /// BEAM GEMV: extra runs of the direct kernel (row vectors) with these slices per group of
    /// rows (1, 2, 4, 8), comma-separated: for tuning.
    #[arg(long, default_value = "")]
    beam_gemv_direct_slices: String,
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
const BEAM_GEMM: &str = bench::beam::GEMM_SUITE;
const BEAM_GEMV: &str = bench::beam::GEMV_SUITE;

/// Suites that run only when named: the BEAM GEMM sweep takes hours of GPU time at every
/// width.
const OPT_IN: [&str; 2] = [BEAM_GEMM, BEAM_GEMV];

/// Every suite name, in the order they run: dense, the formats (registered ones, and the
/// suites of formats not yet on the traits), weights, then the opt-in suites.
fn suite_names() -> Vec<&'static str> {
    let mut v = vec![DENSE];
    v.extend(bench::formats::registry().iter().map(|f| f.name()));
    v.push(WEIGHTS);
    v.extend(OPT_IN);
    v
}

fn suites_help() -> String {
    format!(
        "Suites to run, comma-separated: {} (default: all but {}; `weights` runs on the CPU, \
         `ans` adds the MatVANS chain)",
        suite_names().join(", "),
        OPT_IN.join(" and ")
    )
}

/// The BEAM suites' configurations from the arguments.
fn beam_configs(args: &Args) -> Result<(bench::beam::GemmConfig, bench::beam::GemvConfig), String> {
    let gemm = bench::beam::GemmConfig::parse(
        &args.beam_sizes,
        &args.beam_bits,
        &args.beam_kernels,
        &args.beam_outputs,
        args.beam_warmup,
        args.beam_iters,
        args.beam_samples,
    )
    .map_err(|e| format!("BEAM GEMM: {e}"))?;
    let shapes = if !args.shapes.is_empty() {
        args.shapes.clone()
    } else if args.quick {
        bench::CPU_SHAPES.to_vec()
    } else {
        bench::beam::gemv_shapes()
    };
    let gemv = bench::beam::GemvConfig::parse(
        shapes,
        &args.beam_gemv_bits,
        args.beam_gemv_batches.clone(),
        &args.beam_gemv_outputs,
        (&args.beam_gemv_paths, &args.beam_gemv_preps),
    )
    .and_then(|g| g.with_stream_shapes(&args.beam_gemv_stream))
    .and_then(|g| g.with_ring_stages(&args.beam_gemv_ring_stages))
    .and_then(|g| g.with_vectors(&args.beam_gemv_vectors))
    .and_then(|g| g.with_direct_slices(&args.beam_gemv_direct_slices))
    .map_err(|e| format!("BEAM GEMV: {e}"))?;
    Ok((gemm, gemv))
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
    beam_configs(args)?;
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
    if !args.variants.is_empty() {
        bench::formats::select_variants(args.variants.clone());
    }
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
    ) + &r
        .kernel
        .as_ref()
        .map_or(String::new(), |k| format!(", kernel {k}"))
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
        suite_names()
            .into_iter()
            .filter(|s| !OPT_IN.contains(s))
            .map(String::from)
            .collect()
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
        vq_gemm: Vec::new(),
    };
    let mut ans_cfg = bench::ans::ChainConfig {
        sigma: args.ans_sigma,
        lane_segments: args.ans_lane_segments.clone(),
        variants: args.ans_variants.clone(),
        ..Default::default()
    };
    if !args.ans_dims.is_empty() {
        ans_cfg.dims = args.ans_dims.clone();
    }
    if args.quick {
        ans_cfg.dims = vec![2048, 4096];
        ans_cfg.iters = 30;
    }
    let (gemm_cfg, gemv_cfg) = beam_configs(args).map_err(BenchError::Usage)?;
    let mut beam_gemm: Option<bench::beam::GemmReport> = None;
    let mut beam_gemv: Option<bench::beam::GemvReport> = None;
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
                "{} (sm_{}{}, {} SMs, {} MB L2, nominal {}, driver {}), build {}",
                info.name,
                info.compute_capability.0,
                info.compute_capability.1,
                info.sm_count,
                info.l2_bytes >> 20,
                info.peak_bandwidth
                    .map_or("bandwidth unknown".into(), |b| format!(
                        "{:.0} GB/s",
                        b / 1e9
                    )),
                report.driver,
                report.git_revision
            );
            let dense = DenseGemv::new(&gpu)?;
            if args.explore {
                return bench::explore::run(&gpu, &dense, &cfg);
            }
            if args.explore_tc {
                // --batches (those of 2 to 16) and --variants (kernel name parts) narrow it.
                let batches: Vec<usize> = if args.batches.is_empty() {
                    vec![2, 4, 8, 16]
                } else {
                    args.batches
                        .iter()
                        .copied()
                        .filter(|b| (2..=16).contains(b))
                        .collect()
                };
                return bench::explore::run_tc(&gpu, &dense, &cfg, &batches, &args.variants);
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
            if want("spqr")
                && spqr_auto
                && !args.spqr_no_int8
                && cfg.batches_for("spqr").contains(&1)
            {
                let rows = bench::spqr::run_int8(&mut bench, &cfg.shapes, &mut progress)?;
                report.gpu.extend(rows);
            }
            if want("sbvr") && !args.sbvr_ways.is_empty() {
                let (run, _) = bench::formats::split_batches(
                    "sbvr",
                    &cfg.batches_for("sbvr"),
                    max_batch("sbvr"),
                );
                let rows = bench::sbvr::run_ways(
                    &mut bench,
                    &cfg.shapes,
                    &run,
                    &args.sbvr_ways,
                    &mut progress,
                )?;
                report.gpu.extend(rows);
            }
            if want("vq") && !args.vq_kernels.is_empty() {
                let (run, _) =
                    bench::formats::split_batches("vq", &cfg.batches_for("vq"), max_batch("vq"));
                let rows = bench::vq::run_kernels(
                    &mut bench,
                    &cfg.shapes,
                    &run,
                    &args.vq_kernels,
                    &mut progress,
                )?;
                report.gpu.extend(rows);
            }
            if want("vq") && !args.vq_gemm_tokens.is_empty() {
                let tokens: Vec<usize> = args.vq_gemm_tokens.iter().map(|&t| t as usize).collect();
                report.vq_gemm = bench::vq::run_gemm(
                    &gpu,
                    &bench::vq::gemm_configs(&args.variants),
                    &cfg.shapes,
                    &tokens,
                    (cfg.warmup, cfg.iters),
                    &mut |r| eprintln!("  {}", r.line()),
                )?;
            }
            if want(BEAM_GEMV) {
                println!(
                    "BEAM GEMV at {}: widths {:?}, outputs {}, batches {:?}",
                    shapes_list(&gemv_cfg.shapes),
                    gemv_cfg.bits,
                    gemv_cfg.outputs.join(","),
                    gemv_cfg.batches
                );
                beam_gemv = Some(bench::beam::run_gemv(&mut bench, &gemv_cfg, &mut |g| {
                    eprintln!("{}", beam_gemv_line(g))
                })?);
            }
            drop(bench);
            if want(BEAM_GEMM) {
                beam_gemm = Some(run_beam_gemm(args, &gpu, &gemm_cfg, &report)?);
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
            for s in OPT_IN.iter().filter(|s| want(s)) {
                let line = format!("{s}: needs a GPU, not run");
                println!("{line}");
                report.notes.push(line);
            }
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
    if !report.vq_gemm.is_empty() {
        println!(
            "VQ-GEMM (prefill) against cuBLAS fp16 GEMM:\n{}",
            bench::vq::gemm_table(&report.vq_gemm)
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
    if let Some(g) = &beam_gemv {
        println!("\n{}", g.text());
        for p in bench::beam::write_gemv_files(g, &args.out_dir)? {
            println!("wrote {p}");
        }
    }
    if let Some(g) = &beam_gemm {
        println!("\n{}", g.short_text());
        if let Some(f) = g.failures.first() {
            return Err(BenchError::Mismatch {
                what: BEAM_GEMM.into(),
                detail: format!("{} failed checks, the first: {f}", g.failures.len()),
            });
        }
    }
    Ok(())
}

fn beam_gemv_line(g: &bench::beam::GemvRow) -> String {
    let r = &g.row;
    let ratio = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}x"));
    format!(
        "  beam-gemv {}x{} batch {} b{} {} (out {}, {}): {:.2} us, {:.1} GB/s ({:.1}% of the ceiling), \
         same-size read {:.1}%, {} int8, {} fp16, {} cuBLAS, {}",
        r.rows,
        r.cols,
        r.batch,
        g.bits,
        g.output,
        g.out_bits,
        g.kernel,
        r.median_us,
        r.gbps,
        r.pct_of_ceiling,
        r.pct_of_same_size_read,
        ratio(g.speedup_vs_int8),
        ratio(g.speedup_vs_fp16),
        ratio(r.speedup_vs_cublas),
        r.check
    )
}

/// Runs the BEAM GEMM suite, writing its files (merged with the older report under
/// `--beam-append`) after each size and width, so that a run cut short keeps its rows.
fn run_beam_gemm(
    args: &Args,
    gpu: &Gpu,
    cfg: &bench::beam::GemmConfig,
    report: &Report,
) -> Result<bench::beam::GemmReport, BenchError> {
    println!(
        "BEAM GEMM: sizes {}, widths {:?}, kernels {}, outputs {}",
        cfg.sizes
            .iter()
            .map(|s| format!("{} ({}x{})", s.label, s.side, s.side))
            .collect::<Vec<_>>()
            .join(", "),
        cfg.bits,
        cfg.kernels.join(","),
        cfg.outputs.join(",")
    );
    let older = if args.beam_append {
        bench::beam::load_gemm_report(&args.out_dir)?
    } else {
        None
    };
    let merged = |r: &bench::beam::GemmReport| {
        let mut m = r.clone();
        match &older {
            Some(o) => m.merge_older(o.clone()),
            None => m.finish(),
        }
        m
    };
    let run = bench::beam::RunInfo {
        device: report.device.clone(),
        git_revision: report.git_revision.clone(),
        date: report.date.clone(),
        config: cfg.clone(),
    };
    let mut wrote = Vec::new();
    let r = bench::beam::run_gemm(gpu, cfg, run, &mut |l| eprintln!("{l}"), &mut |r| {
        wrote = bench::beam::write_gemm_files(&merged(r), &args.out_dir)?;
        Ok(())
    })?;
    for p in &wrote {
        println!("wrote {p}");
    }
    Ok(merged(&r))
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
        validate(&args(&["--spqr-batches", "9,16"])).unwrap();
        let e = validate(&args(&["--spqr-batches", "17"])).unwrap_err();
        assert!(e.contains("SpQR") && e.contains("1 to 16"), "{e}");
        assert!(validate(&args(&["--spqr-batches", "0"])).is_err());
        let e = validate(&args(&["--suites", "dense,nope"])).unwrap_err();
        assert!(e.contains("nope") && e.contains("dense"), "{e}");
        validate(&args(&["--suites", "fp16-toy,spqr,ans,weights"])).unwrap();
        validate(&args(&["--suites", "beam-gemm,beam-gemv"])).unwrap();
        validate(&args(&[
            "--beam-bits",
            "1,2,4,7-8,63,64",
            "--beam-sizes",
            "64MiB,1024",
            "--beam-kernels",
            "guide,tight,mma",
            "--beam-outputs",
            "all",
            "--beam-gemv-batches",
            "1,16",
        ]))
        .unwrap();
        for bad in [
            &["--beam-bits", "0"][..],
            &["--beam-bits", "65"],
            &["--beam-sizes", "1TB"],
            &["--beam-kernels", "cublas"],
            &["--beam-outputs", "sai/wrap"],
            &["--beam-iters", "0"],
            &["--beam-gemv-bits", "1-99"],
            &["--beam-gemv-batches", "17"],
        ] {
            let e = validate(&args(bad)).unwrap_err();
            assert!(e.contains("BEAM"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn beam_suites_run_only_when_named() {
        let help = suites_help();
        assert!(
            help.contains("beam-gemm") && help.contains("default: all but"),
            "{help}"
        );
        let (gemm, gemv) = beam_configs(&args(&[])).unwrap();
        assert_eq!(gemm.bits.len(), 64);
        assert_eq!(
            gemm.sizes.iter().map(|s| s.side).collect::<Vec<_>>(),
            vec![2896, 11585]
        );
        assert_eq!(gemm.outputs.len(), 6);
        assert_eq!(gemv.shapes.len(), 7);
        assert_eq!(gemv.bits, vec![1, 2, 3, 4, 6, 8, 12, 16, 24, 32]);
        let (_, gemv) = beam_configs(&args(&["--shapes", "64x128"])).unwrap();
        assert_eq!(gemv.shapes, vec![(64, 128)]);
    }
}
