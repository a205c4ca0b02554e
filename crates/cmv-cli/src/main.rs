//! `cmv`: compress a safetensors model's weights into any registered format, inspect the
//! result, decompress it, and measure the weight error (CPU), and time the compressed
//! products on a GPU (`cmv bench`, feature `gpu`, on by default). docs/CLI.md has the usage,
//! the output file's layout and the exit codes.

mod benchmark;
mod bert;
mod compress;
mod decompress;
mod error;
mod eval;
mod formats;
mod gguf;
mod inspect;
mod rtn;
mod stored;
mod tensors;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::error::CliError;

/// Compressed matrix formats for model weights: compress, inspect, decompress, evaluate.
#[derive(Debug, Parser)]
#[command(
    name = "cmv",
    version,
    after_help = "Examples:
  cmv formats
  cmv compress model.safetensors --format spqr -o model.spqr.safetensors
  cmv inspect model.spqr.safetensors
  cmv eval model.safetensors model.spqr.safetensors --rtn 4:128
  cmv eval model.safetensors model.spqr.safetensors --tokenizer tokenizer.json
  cmv compress model.safetensors --format spqr --calibrate tokenizer.json -o model.gptq.safetensors
  cmv decompress model.spqr.safetensors -o model.dequantized.safetensors
  cmv embed model.safetensors --tokenizer tokenizer.json \"a sentence\" \"another one\"
  cmv bench model.spqr.safetensors                         # on a GPU
  cmv bench --synthetic llama-7b --format sbvr              # on a GPU

Exit codes: 0 ok, 1 internal error, 2 bad command line, 3 unreadable input, 4 not a (valid)
safetensors or GGUF model, 5 damaged compressed tensor, 6 unknown format or variant, 7 tensor missing
or not compressible, 8 output exists, 9 output not writable, 10 files do not match (eval),
11 tokenizer, sentences or model unusable for the embedding evaluation, 12 no GPU (bench),
13 a GPU product failed or did not match its reference (bench)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Compress every 2-D weight tensor a format can take; keep the others as they are.
    Compress(compress::Args),
    /// Tensors, formats, shapes, bits per weight, sizes and totals of a file.
    Inspect(inspect::Args),
    /// Decode a compressed file back to a plain safetensors file.
    Decompress(decompress::Args),
    /// The relative weight error of each tensor of a compressed model against the original;
    /// with --tokenizer the sentence-embedding cosine, with --rtn round-to-nearest baselines.
    Eval(eval::Args),
    /// Sentence embeddings of a BERT model (plain or compressed) and their cosine
    /// similarities.
    Embed(eval::EmbedArgs),
    /// The registered formats, their variants and what they take.
    Formats,
    /// Time each compressed tensor's GPU product against dense fp16 and cuBLAS, and the sum
    /// over the linear layers (needs a GPU).
    Bench(benchmark::Args),
}

fn list_formats() {
    for f in formats::registry() {
        println!("{}", f.name());
        println!(
            "  variants: {} (default {})",
            f.variants().join(", "),
            f.variants()[0]
        );
        println!("  takes: {}", f.takes());
        println!(
            "  compress --calibrate: {}",
            if f.calibrates() {
                "used"
            } else {
                "not used (data-free encoder)"
            }
        );
    }
}

fn run(cli: &Cli) -> Result<(), CliError> {
    match &cli.command {
        Command::Compress(a) => compress::run(a),
        Command::Inspect(a) => inspect::run(a),
        Command::Decompress(a) => decompress::run(a),
        Command::Eval(a) => eval::run(a),
        Command::Embed(a) => eval::run_embed(a),
        Command::Bench(a) => benchmark::run(a),
        Command::Formats => {
            list_formats();
            Ok(())
        }
    }
}

/// A malformed command line: clap's message on one line, exit code 2 (help and version go
/// out as clap prints them).
fn usage_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        // Prints to stdout (help, version) or stderr (help for a bare `cmv`) as clap does.
        let _ = e.print();
        return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
    }
    let text = e.render().to_string();
    let message: Vec<&str> = text
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    let message = message.join(" ");
    let message = message.strip_prefix("error: ").unwrap_or(&message);
    eprintln!("cmv: error: {message}; see `cmv --help` (or `cmv <command> --help`)");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    // A panic is a bug: one line, no backtrace, exit code 1.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("cmv: internal error (a bug; please report it with the command line): {info}");
    }));
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    match std::panic::catch_unwind(|| run(&cli)) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("cmv: error: {e}");
            ExitCode::from(e.exit_code())
        }
        Err(_) => ExitCode::from(1),
    }
}
