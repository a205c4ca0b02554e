//! SBVR accuracy on a real model's weights (`docs/SBVR-ACCURACY.md`). CPU only.

use std::path::PathBuf;
use std::process::ExitCode;

use bench::sbvr_accuracy::{aggregate_table, kind_tables, run, tensor_table};
use bench::weights::{DEFAULT_MODEL, missing_line};
use clap::Parser;

/// Relative errors of SBVR (n = 2, 3, 4), RTN 2-/3-/4-bit (groups of 128) and SpQR on every
/// 2-D tensor.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// The safetensors model (`cargo xtask fetch-model` writes the default).
    #[arg(long, default_value = DEFAULT_MODEL)]
    model: PathBuf,
    /// Where to write the JSON report.
    #[arg(long, default_value = "target/bench/sbvr-accuracy.json")]
    out: PathBuf,
    /// Also print the per-tensor table.
    #[arg(long)]
    per_tensor: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if !args.model.exists() {
        eprintln!("{}", missing_line(&args.model));
        return ExitCode::FAILURE;
    }
    let report = match run(&args.model, |line| eprintln!("{line}")) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("model: {}\ninputs: {}\n", report.model, report.inputs);
    for (name, what) in &report.methods {
        println!("- {name}: {what}");
    }
    println!();
    println!("{}", aggregate_table(&report.aggregate));
    if let Some(a) = &report.aggregate_without_embeddings {
        println!("{}", aggregate_table(a));
    }
    println!("{}", kind_tables(&report));
    if args.per_tensor {
        println!(
            "per tensor: weights rel. err / outputs rel. err (correlated inputs; SBVR and \
             SpQR: the GPU arithmetic)\n\n{}",
            tensor_table(&report)
        );
    }
    println!("{:.1} s", report.seconds);
    if let Some(dir) = args.out.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let json = serde_json::to_string_pretty(&report).expect("serializable");
    if let Err(e) = std::fs::write(&args.out, json) {
        eprintln!("writing {}: {e}", args.out.display());
        return ExitCode::FAILURE;
    }
    eprintln!("wrote {}", args.out.display());
    ExitCode::SUCCESS
}
