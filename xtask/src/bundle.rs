//! `cargo xtask gpu-bundle`: release test binaries, the benchmark binary, the PTX and a `run.sh`
//! that runs them on a GPU machine with no Rust installed.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::Deserialize;

use crate::util::{self, IoContext, Result, err};
use crate::workspace::Workspace;

/// The bundle directory, at the workspace root (ignored by git).
const BUNDLE_DIR: &str = "gpu-bundle";
const BENCH_BIN: &str = "cmv-bench";
/// Bundles larger than this get a warning (they are copied to the GPU machines).
const SIZE_WARN_MIB: f64 = 60.0;

/// The part of a `cargo --message-format=json` line that is used here.
#[derive(Debug, Deserialize)]
struct Message {
    reason: String,
    #[serde(default)]
    profile: Option<Profile>,
    #[serde(default)]
    executable: Option<PathBuf>,
    #[serde(default)]
    target: Option<Target>,
    #[serde(default)]
    manifest_path: Option<PathBuf>,
}

#[derive(Debug, Deserialize)]
struct Profile {
    test: bool,
}

#[derive(Debug, Deserialize)]
struct Target {
    name: String,
    #[serde(default)]
    kind: Vec<String>,
}

impl Message {
    /// A readable, unique-per-target name for a test executable: `<crate dir>-lib` for unit
    /// tests of a library, else `<crate dir>-<kind>-<target>` (e.g. `dense-gemv-test-gpu`).
    fn test_name(&self) -> Option<String> {
        let dir = self
            .manifest_path
            .as_ref()?
            .parent()?
            .file_name()?
            .to_string_lossy();
        let target = self.target.as_ref()?;
        let kind = target.kind.first().map_or("test", String::as_str);
        Some(match kind {
            "lib" | "rlib" | "cdylib" | "staticlib" | "dylib" => format!("{dir}-lib"),
            _ => format!("{dir}-{kind}-{}", target.name),
        })
    }
}

/// Runs a cargo command with `--message-format=json` and returns its artifact messages.
fn cargo_artifacts(ws: &Path, args: &[&str]) -> Result<Vec<Message>> {
    let mut cmd = Command::new(util::cargo_bin());
    cmd.current_dir(ws)
        .args(args)
        .arg("--message-format=json")
        .stdout(Stdio::piped());
    let shown = util::show(&cmd);
    eprintln!("xtask: {shown}");
    let mut child = cmd.spawn().map_err(|e| err!("cannot run `{shown}`: {e}"))?;
    let mut artifacts = Vec::new();
    let stdout = child.stdout.take().expect("stdout is piped");
    for line in BufReader::new(stdout).lines() {
        let line = line.ctx(|| format!("read the output of `{shown}`"))?;
        // Lines that are not JSON (e.g. from build scripts) are not artifacts.
        if let Ok(msg) = serde_json::from_str::<Message>(&line)
            && msg.reason == "compiler-artifact"
            && msg.executable.is_some()
        {
            artifacts.push(msg);
        }
    }
    let status = child.wait().ctx(|| format!("wait for `{shown}`"))?;
    if !status.success() {
        return Err(err!("`{shown}` failed ({status})"));
    }
    Ok(artifacts)
}

/// `cargo xtask gpu-bundle`.
pub fn run() -> Result<()> {
    let ws = util::workspace_root();
    let workspace = Workspace::load(&ws)?;
    let devices = workspace.device_crates();
    // (name in the bundle, executable), sorted by name.
    let mut tests: BTreeMap<String, PathBuf> = BTreeMap::new();
    // The test binaries that launch kernels (of a package that depends on a device crate):
    // `run.sh --sanitize` runs these under racecheck too.
    let mut racecheck: BTreeSet<String> = BTreeSet::new();
    let test_args = [
        "test",
        "--workspace",
        "--exclude",
        "xtask",
        "--release",
        "--no-run",
    ];
    for msg in cargo_artifacts(&ws, &test_args)? {
        if !msg.profile.as_ref().is_some_and(|p| p.test) {
            continue;
        }
        let Some(exe) = msg.executable.clone() else {
            continue;
        };
        let mut name = msg.test_name().unwrap_or_else(|| "test".to_owned());
        if tests.get(&name).is_some_and(|e| *e != exe) {
            // Same crate directory name twice: fall back to cargo's hashed file name.
            name = exe
                .file_name()
                .map_or(name, |f| f.to_string_lossy().into_owned());
        }
        let package = msg
            .manifest_path
            .as_deref()
            .and_then(Path::parent)
            .and_then(|dir| workspace.package_in(dir));
        if package.is_some_and(|p| workspace.uses_device_crate(p)) {
            racecheck.insert(name.clone());
        }
        tests.insert(name, exe);
    }
    let bench = cargo_artifacts(
        &ws,
        &["build", "--release", "-p", "bench", "--bin", BENCH_BIN],
    )?
    .into_iter()
    .find(|m| m.target.as_ref().is_some_and(|t| t.name == BENCH_BIN))
    .and_then(|m| m.executable)
    .ok_or_else(|| err!("cargo built no `{BENCH_BIN}` executable"))?;

    let bundle = ws.join(BUNDLE_DIR);
    if bundle.exists() {
        fs::remove_dir_all(&bundle).ctx(|| format!("remove {}", bundle.display()))?;
    }
    let bin = bundle.join("bin");
    fs::create_dir_all(&bin).ctx(|| format!("create {}", bin.display()))?;

    let strip = util::which("strip");
    if strip.is_none() {
        eprintln!("xtask: warning: `strip` not found; the binaries keep their debug info");
    }
    let copy_bin = |src: &Path, name: &str| -> Result<()> {
        let dst = bin.join(name);
        fs::copy(src, &dst).ctx(|| format!("copy {} to {}", src.display(), dst.display()))?;
        if let Some(strip) = &strip {
            // Keep the symbol table: panics on the GPU machine then still name functions.
            util::run(Command::new(strip).arg("--strip-debug").arg(&dst))?;
        }
        Ok(())
    };
    for (name, exe) in &tests {
        copy_bin(exe, name)?;
    }
    let test_names: Vec<String> = tests.into_keys().collect();
    copy_bin(&bench, BENCH_BIN)?;

    let ptx_dir = bundle.join("ptx");
    fs::create_dir_all(&ptx_dir).ctx(|| format!("create {}", ptx_dir.display()))?;
    for krate in &devices {
        let src = ws.join(&krate.ptx);
        let dst = ptx_dir.join(krate.ptx_file_name());
        fs::copy(&src, &dst)
            .ctx(|| format!("copy {} (run `cargo xtask ptx` first?)", src.display()))?;
    }

    let script = bundle.join("run.sh");
    let racecheck: Vec<String> = racecheck.into_iter().collect();
    fs::write(&script, run_sh(&test_names, &racecheck))
        .ctx(|| format!("write {}", script.display()))?;
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755))
            .ctx(|| format!("chmod {}", script.display()))?;
    }

    let size = util::dir_size(&bundle);
    println!(
        "xtask: wrote {} ({} test binaries, {} of them also racechecked with --sanitize; \
         {BENCH_BIN}; {} PTX files): {:.1} MiB",
        bundle.display(),
        test_names.len(),
        racecheck.len(),
        devices.len(),
        util::mib(size)
    );
    if util::mib(size) > SIZE_WARN_MIB {
        println!("xtask: warning: the bundle is larger than {SIZE_WARN_MIB} MiB");
    }
    println!(
        "xtask: on the GPU machine: ./run.sh [--tests-only | --sanitize] [{BENCH_BIN} args...]"
    );
    Ok(())
}

/// The bundle's `run.sh`: `run.sh.in` with the test binaries filled in (`racecheck`: those
/// that also run under compute-sanitizer's racecheck with `--sanitize`).
fn run_sh(tests: &[String], racecheck: &[String]) -> String {
    let list =
        |names: &[String]| -> String { names.iter().map(|t| format!("    {t}\n")).collect() };
    include_str!("run.sh.in")
        .replace("@TESTS@", &list(tests))
        .replace("@RACECHECK_TESTS@", &list(racecheck))
        .replace("@BENCH_BIN@", BENCH_BIN)
}

#[cfg(test)]
mod tests {
    #[test]
    fn run_sh_lists_the_tests() {
        let s = super::run_sh(&["a-0123".into(), "b-4567".into()], &["b-4567".into()]);
        assert!(s.contains("\nTESTS=(\n    a-0123\n    b-4567\n)"));
        assert!(s.contains("\nRACECHECK_TESTS=(\n    b-4567\n)"));
        assert!(s.contains("${LD_LIBRARY_PATH:-}"));
        for placeholder in ["@TESTS@", "@RACECHECK_TESTS@", "@BENCH_BIN@"] {
            assert!(!s.contains(placeholder), "{placeholder} is left");
        }
    }
}
