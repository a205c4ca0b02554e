//! `cargo xtask fuzz [--seconds N] [--target NAME]`: runs the cargo-fuzz targets of `fuzz/`
//! (`cargo +nightly fuzz run <target> -- -max_total_time=N ...`), one after the other.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::util::{self, Error, IoContext, Result, err};

/// The cargo-fuzz crate, relative to the workspace root (outside the workspace: it builds on
/// nightly only).
pub const FUZZ_DIR: &str = "fuzz";
/// libFuzzer's memory limits, in MiB: a run past them is reported as a failure (an input that
/// makes a decoder allocate gigabytes is a bug), and the machine stays usable.
const RSS_LIMIT_MB: u32 = 4096;
const MALLOC_LIMIT_MB: u32 = 4096;
/// One input running longer than this (seconds) is reported as a failure (a hang).
const INPUT_TIMEOUT_S: u32 = 60;

/// What `cargo xtask fuzz` does.
#[derive(Debug, Clone)]
pub struct Options {
    /// How long each target runs.
    pub seconds: u32,
    /// Only this target.
    pub target: Option<String>,
}

/// The result of one target's run.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    /// It ran for the time given and found nothing (`runs`: libFuzzer's count, when printed).
    Ok { runs: Option<u64> },
    /// libFuzzer (or a sanitizer, or a panic) reported a failing input.
    Crash { artifact: Option<String> },
    /// It did not get to fuzzing (a build error, say).
    Failed { code: Option<i32> },
}

/// `cargo +nightly` (through rustup's `cargo` proxy, not the `$CARGO` running xtask), with the
/// environment of the outer cargo taken out so that the nightly toolchain's own tools are used.
fn nightly_cargo() -> Command {
    let mut cmd = Command::new("cargo");
    cmd.arg("+nightly");
    for key in [
        "RUSTUP_TOOLCHAIN",
        "RUSTC",
        "RUSTDOC",
        "RUSTC_WRAPPER",
        "RUSTFLAGS",
        "CARGO",
        "CARGO_TARGET_DIR",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
    ] {
        cmd.env_remove(key);
    }
    cmd
}

/// Checks that the nightly toolchain and cargo-fuzz are installed, naming what to install.
fn check_tools() -> Result<()> {
    let quiet = |cmd: &mut Command| {
        cmd.stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !quiet(nightly_cargo().arg("--version")) {
        return Err(Error::MissingTool {
            tool: "the nightly Rust toolchain (`cargo +nightly`)".into(),
            install: "rustup toolchain install nightly".into(),
        });
    }
    if !quiet(nightly_cargo().args(["fuzz", "--version"])) {
        return Err(Error::MissingTool {
            tool: "cargo-fuzz (`cargo fuzz`)".into(),
            install: "cargo install cargo-fuzz".into(),
        });
    }
    Ok(())
}

/// The fuzz targets: the `.rs` files of `fuzz/fuzz_targets/` (cargo-fuzz's layout, one `[[bin]]`
/// per file, named after it), sorted.
fn targets(fuzz_dir: &Path) -> Result<Vec<String>> {
    let dir = fuzz_dir.join("fuzz_targets");
    let mut names: Vec<String> = fs::read_dir(&dir)
        .ctx(|| format!("read {}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "rs"))
        .filter_map(|p| Some(p.file_stem()?.to_string_lossy().into_owned()))
        .collect();
    names.sort();
    Ok(names)
}

/// The arguments after `cargo +nightly`: `fuzz build` (`target`: `None` for all) or `fuzz run`.
fn fuzz_args(sub: &str, target: Option<&str>, seconds: u32) -> Vec<String> {
    let mut args = vec!["fuzz".to_owned(), sub.to_owned()];
    args.extend(target.map(str::to_owned));
    if sub == "run" {
        args.extend([
            "--".to_owned(),
            format!("-max_total_time={seconds}"),
            format!("-rss_limit_mb={RSS_LIMIT_MB}"),
            format!("-malloc_limit_mb={MALLOC_LIMIT_MB}"),
            format!("-timeout={INPUT_TIMEOUT_S}"),
            // One fuzzing process (no -jobs/-workers/-fork): the CI machines have 2 cores.
            "-print_final_stats=1".to_owned(),
        ]);
    }
    args
}

/// What a run's output says happened.
fn outcome(success: bool, code: Option<i32>, log: &str) -> Outcome {
    let runs = log.lines().rev().find_map(|l| {
        // libFuzzer: "Done 123456 runs in 20 second(s)".
        let rest = l.trim().strip_prefix("Done ")?;
        rest.split_whitespace().next()?.parse().ok()
    });
    if success {
        return Outcome::Ok { runs };
    }
    // "Test unit written to fuzz/artifacts/t/crash-..." (cargo-fuzz also prints the path).
    let artifact = log.lines().find_map(|l| {
        let (_, path) = l.split_once("Test unit written to ")?;
        Some(path.trim().to_owned())
    });
    let crashed = artifact.is_some()
        || [
            "ERROR: libFuzzer",
            "ERROR: AddressSanitizer",
            "SUMMARY: libFuzzer",
            "panicked at",
        ]
        .iter()
        .any(|m| log.contains(m));
    if crashed {
        Outcome::Crash { artifact }
    } else {
        Outcome::Failed { code }
    }
}

/// Runs `cmd` with its stdout and stderr written to `log`; returns (success, exit code, log text).
fn run_logged(cmd: &mut Command, log: &Path) -> Result<(bool, Option<i32>, String)> {
    let file = fs::File::create(log).ctx(|| format!("create {}", log.display()))?;
    let err_file = file.try_clone().ctx(|| format!("open {}", log.display()))?;
    let status = cmd
        .stdout(file)
        .stderr(err_file)
        .status()
        .map_err(|e| err!("cannot run `{}`: {e}", util::show(cmd)))?;
    let text = String::from_utf8_lossy(&fs::read(log).unwrap_or_default()).into_owned();
    Ok((status.success(), status.code(), text))
}

/// The last `n` lines of a text, for messages.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// `cargo xtask fuzz`.
pub fn run(opts: &Options) -> Result<()> {
    let ws = util::workspace_root();
    let fuzz_dir = ws.join(FUZZ_DIR);
    if !fuzz_dir.join("Cargo.toml").is_file() {
        return Err(err!(
            "no cargo-fuzz crate in {} (expected {FUZZ_DIR}/Cargo.toml and {FUZZ_DIR}/fuzz_targets/)",
            fuzz_dir.display()
        ));
    }
    check_tools()?;
    let all = targets(&fuzz_dir)?;
    let chosen: Vec<String> = match &opts.target {
        Some(t) if all.contains(t) => vec![t.clone()],
        Some(t) => {
            return Err(err!(
                "no fuzz target `{t}`; the targets are: {}",
                all.join(", ")
            ));
        }
        None if all.is_empty() => {
            return Err(err!("no fuzz targets in {FUZZ_DIR}/fuzz_targets/"));
        }
        None => all,
    };
    let logs = ws.join("target/xtask/fuzz");
    fs::create_dir_all(&logs).ctx(|| format!("create {}", logs.display()))?;

    // Build first (every chosen target at once), so that each run below is only fuzzing.
    let build_log = logs.join("build.log");
    let mut build = nightly_cargo();
    build
        .current_dir(&ws)
        .args(fuzz_args("build", opts.target.as_deref(), opts.seconds));
    eprintln!(
        "xtask: {} (log: {})",
        util::show(&build),
        build_log.display()
    );
    let start = Instant::now();
    let (ok, _, text) = run_logged(&mut build, &build_log)?;
    if !ok {
        return Err(err!(
            "building the fuzz targets failed (log: {}):\n{}",
            build_log.display(),
            tail(&text, 30)
        ));
    }
    eprintln!(
        "xtask: built {} fuzz targets in {:.0} s",
        chosen.len(),
        start.elapsed().as_secs_f64()
    );

    let mut bad = Vec::new();
    for target in &chosen {
        let log = logs.join(format!("{target}.log"));
        let mut cmd = nightly_cargo();
        cmd.current_dir(&ws)
            .args(fuzz_args("run", Some(target), opts.seconds));
        let start = Instant::now();
        let (ok, code, text) = run_logged(&mut cmd, &log)?;
        let took = start.elapsed().as_secs_f64();
        match outcome(ok, code, &text) {
            Outcome::Ok { runs } => {
                let runs = runs.map_or_else(String::new, |r| format!(", {r} runs"));
                println!("fuzz {target}: ok ({took:.0} s{runs})");
            }
            Outcome::Crash { artifact } => {
                let at = artifact.map_or_else(String::new, |a| format!(", input: {a}"));
                println!(
                    "fuzz {target}: CRASH ({took:.0} s{at}; log: {})",
                    log.display()
                );
                eprintln!("{}", tail(&text, 40));
                bad.push(target.clone());
            }
            Outcome::Failed { code } => {
                let code = code.map_or_else(|| "killed".to_owned(), |c| format!("exit {c}"));
                println!(
                    "fuzz {target}: FAILED ({code}, {took:.0} s; log: {})",
                    log.display()
                );
                eprintln!("{}", tail(&text, 30));
                bad.push(target.clone());
            }
        }
    }
    if bad.is_empty() {
        println!(
            "xtask: {} fuzz targets ran {} s each and found nothing",
            chosen.len(),
            opts.seconds
        );
        Ok(())
    } else {
        Err(err!(
            "fuzz targets failed: {} (reproduce with `cargo +nightly fuzz run <target> <input>`)",
            bad.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_arguments_bound_time_and_memory() {
        let args = fuzz_args("run", Some("decode"), 20);
        assert_eq!(args[..4], ["fuzz", "run", "decode", "--"]);
        assert!(args.contains(&"-max_total_time=20".to_owned()));
        assert!(args.iter().any(|a| a.starts_with("-rss_limit_mb=")));
        assert!(args.iter().any(|a| a.starts_with("-malloc_limit_mb=")));
        assert!(!args.iter().any(|a| a.starts_with("-jobs")
            || a.starts_with("-workers")
            || a.starts_with("-fork")));
        assert_eq!(fuzz_args("build", None, 20), ["fuzz", "build"]);
    }

    #[test]
    fn outcomes_are_read_from_the_log() {
        let done = "#123\tDONE   cov: 10\nDone 4567 runs in 20 second(s)\n";
        assert_eq!(
            outcome(true, Some(0), done),
            Outcome::Ok { runs: Some(4567) }
        );
        let crash = "thread '<unnamed>' panicked at src/lib.rs:1:1:\n==1== ERROR: libFuzzer: deadly signal\n\
                     artifact_prefix='/ws/fuzz/artifacts/decode/'; Test unit written to /ws/fuzz/artifacts/decode/crash-ab12\n";
        assert_eq!(
            outcome(false, Some(77), crash),
            Outcome::Crash {
                artifact: Some("/ws/fuzz/artifacts/decode/crash-ab12".into())
            }
        );
        let oom = "==9== ERROR: libFuzzer: out-of-memory (malloc(8589934592))\n";
        assert_eq!(
            outcome(false, Some(1), oom),
            Outcome::Crash { artifact: None }
        );
        assert_eq!(
            outcome(false, Some(101), "error[E0425]: cannot find value `x`\n"),
            Outcome::Failed { code: Some(101) }
        );
    }

    #[test]
    fn targets_are_the_files_of_fuzz_targets() {
        let dir = std::env::temp_dir().join(format!("xtask-fuzz-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("fuzz_targets")).unwrap();
        for f in ["spqr_decode.rs", "ans_decode.rs", "notes.txt"] {
            fs::write(dir.join("fuzz_targets").join(f), "").unwrap();
        }
        assert_eq!(targets(&dir).unwrap(), ["ans_decode", "spqr_decode"]);
        fs::remove_dir_all(&dir).unwrap();
    }
}
