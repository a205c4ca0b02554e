//! `cargo xtask ptx`: builds the device crates to PTX with Debian's `rustc-web` (rustc on LLVM 22)
//! and the NVPTX back end, and writes the PTX into the host crates that embed it.
//!
//! See docs/TOOLCHAIN.md for the recipe and the reasons behind each flag.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::util::{self, Error, FileLock, INSTALL_CMD, IoContext, Result};
use crate::workspace::{DeviceCrate, Workspace};

/// The compiler: Debian's `rustc-web`, rustc on LLVM 22.
const RUSTC: &str = "/usr/bin/rustc";
/// The LLVM major version `rustc-web` is built on; its tools must match.
const LLVM_MAJOR: &str = "22";
/// `llvm-link`, `opt` and `llc` of that LLVM, which the bitcode linker calls.
const LLVM_BIN: &str = "/usr/lib/llvm-22/bin";
/// The standard library source that `-Zbuild-std=core` compiles (from `rust-web-src`).
const RUST_SRC: &str = "/usr/lib/rustlib/src/rust/library";
/// Where `rust-web-src` puts the compiler source tree (`rustc-<version>`).
const RUSTC_SRC_PARENT: &str = "/usr/src";
/// The bitcode linker's directory inside that tree.
const LINKER_SUBDIR: &str = "src/tools/llvm-bitcode-linker";
const TARGET: &str = "nvptx64-nvidia-cuda";
/// The Cargo profile of the device build (root Cargo.toml).
const PROFILE: &str = "ptx";
/// Code generation flags besides `-C linker` (docs/TOOLCHAIN.md explains each).
///
/// The PTX ISA version goes to the bitcode linker, which hands it to `llc` (`--mattr=+ptx78`),
/// the one step that writes PTX. Given to rustc as `-C target-feature=+ptx78`, it would produce
/// the same PTX but make every build warn that `ptx78` is an unstable target feature.
fn codegen_flags(arch: &str) -> Vec<String> {
    // sm_90a needs PTX ISA 8.0; sm_80 code stays on 7.8.
    let isa = if arch == "sm_80" { "ptx78" } else { "ptx80" };
    [
        "-C".to_owned(),
        format!("target-cpu={arch}"),
        "-C".to_owned(),
        format!("link-arg=--target-feature=+{isa}"),
        "-C".to_owned(),
        "llvm-args=-unroll-threshold=1000".to_owned(),
    ]
    .into()
}
/// Environment variables the nested builds inherit; everything else is cleared.
const PASS_ENV: &[&str] = &[
    "HOME",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "TERM",
];

/// What `cargo xtask ptx` does.
#[derive(Debug, Clone)]
pub struct Options {
    /// Compare with the committed PTX instead of writing it.
    pub check: bool,
    /// Run ptxas (when found) and print the resource table.
    pub report: bool,
    /// Capture the nested builds' output (shown only on failure).
    pub quiet: bool,
    /// Build only the device crates of these packages (all when empty).
    pub only: Vec<String>,
}

/// The installed PTX toolchain.
#[derive(Debug)]
pub struct Toolchain {
    /// `rustc 1.96.0 (ac68faa20 2026-05-25) ... with LLVM 22.1.2`, as written in the PTX header.
    pub version: String,
    /// The bitcode linker's source directory.
    pub linker_src: PathBuf,
}

fn missing(tool: &str, path: &str) -> Error {
    Error::MissingTool {
        tool: format!("{tool} ({path})"),
        install: INSTALL_CMD.to_owned(),
    }
}

/// Finds every part of the PTX toolchain, or names the first missing one.
pub fn find_toolchain() -> Result<Toolchain> {
    if !util::is_executable(Path::new(RUSTC)) {
        return Err(missing("rustc-web", RUSTC));
    }
    let vv = util::stdout_of(RUSTC, &["-vV"])?;
    let field = |key: &str| {
        vv.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.trim().to_owned())
            .unwrap_or_default()
    };
    let (release, llvm) = (field("release:"), field("LLVM version:"));
    if llvm.split('.').next() != Some(LLVM_MAJOR) {
        return Err(Error::MissingTool {
            tool: format!(
                "rustc-web ({RUSTC} is rustc {release} on LLVM {llvm}, not on LLVM {LLVM_MAJOR})"
            ),
            install: INSTALL_CMD.to_owned(),
        });
    }
    if !Path::new(RUST_SRC).join("core/Cargo.toml").is_file() {
        return Err(missing("rust-web-src", RUST_SRC));
    }
    for tool in ["llvm-link", "opt", "llc"] {
        let path = format!("{LLVM_BIN}/{tool}");
        if !util::is_executable(Path::new(&path)) {
            return Err(missing(tool, &path));
        }
    }
    let linker_src = find_linker_src(&release).ok_or_else(|| {
        missing(
            "llvm-bitcode-linker source",
            &format!("{RUSTC_SRC_PARENT}/rustc-*/{LINKER_SUBDIR}"),
        )
    })?;
    let version_line = util::stdout_of(RUSTC, &["--version"])?;
    Ok(Toolchain {
        version: format!("{version_line} with LLVM {llvm}"),
        linker_src,
    })
}

/// `/usr/src/rustc-<release>/src/tools/llvm-bitcode-linker`, or the newest such tree.
fn find_linker_src(release: &str) -> Option<PathBuf> {
    let exact = Path::new(RUSTC_SRC_PARENT)
        .join(format!("rustc-{release}"))
        .join(LINKER_SUBDIR);
    if exact.join("Cargo.toml").is_file() {
        return Some(exact);
    }
    let mut found: Vec<PathBuf> = fs::read_dir(RUSTC_SRC_PARENT)
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("rustc-"))
        .map(|e| e.path().join(LINKER_SUBDIR))
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    found.sort();
    found.pop()
}

/// A command with a cleared environment: only [`PASS_ENV`] and `PATH` (LLVM 22 first).
fn scrubbed(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_clear();
    for key in PASS_ENV {
        if let Some(val) = std::env::var_os(key) {
            cmd.env(key, val);
        }
    }
    let mut path = vec![PathBuf::from(LLVM_BIN)];
    if let Some(old) = std::env::var_os("PATH") {
        path.extend(std::env::split_paths(&old));
    }
    cmd.env(
        "PATH",
        std::env::join_paths(path).expect("PATH entries contain no ':'"),
    );
    cmd
}

fn run_build(cmd: &mut Command, quiet: bool) -> Result<()> {
    if quiet {
        util::run_captured(cmd).map(drop)
    } else {
        util::run(cmd)
    }
}

/// Builds `llvm-bitcode-linker` into `target/xtask/bin` unless the build there is up to date.
fn build_linker(tc: &Toolchain, ws: &Path, quiet: bool) -> Result<PathBuf> {
    let dir = ws.join("target/xtask");
    let bin = dir.join("bin/llvm-bitcode-linker");
    let stamp_path = dir.join("llvm-bitcode-linker.stamp");
    let stamp = format!(
        "source: {}\nrustc: {}\n",
        tc.linker_src.display(),
        tc.version
    );
    if util::is_executable(&bin) && fs::read_to_string(&stamp_path).is_ok_and(|s| s == stamp) {
        return Ok(bin);
    }
    eprintln!(
        "xtask: building llvm-bitcode-linker from {}",
        tc.linker_src.display()
    );
    // Copy the source out of /usr/src (read-only, and it belongs to the rustc workspace there).
    let src = dir.join("llvm-bitcode-linker-src");
    if src.exists() {
        fs::remove_dir_all(&src).ctx(|| format!("remove {}", src.display()))?;
    }
    util::copy_dir(&tc.linker_src, &src)?;
    let manifest = src.join("Cargo.toml");
    let mut text = fs::read_to_string(&manifest).ctx(|| format!("read {}", manifest.display()))?;
    text.push_str("\n[workspace]\n");
    fs::write(&manifest, text).ctx(|| format!("write {}", manifest.display()))?;
    let mut cmd = scrubbed(util::cargo_bin());
    cmd.current_dir(&src)
        .env("CARGO_TARGET_DIR", dir.join("llvm-bitcode-linker-build"))
        .args(["build", "--release", "--quiet"]);
    run_build(&mut cmd, quiet)?;
    let built = dir.join("llvm-bitcode-linker-build/release/llvm-bitcode-linker");
    fs::create_dir_all(dir.join("bin")).ctx(|| format!("create {}", dir.display()))?;
    fs::copy(&built, &bin).ctx(|| format!("copy {}", built.display()))?;
    fs::write(&stamp_path, stamp).ctx(|| format!("write {}", stamp_path.display()))?;
    Ok(bin)
}

/// The header that starts every generated PTX file.
fn header(krate: &DeviceCrate, tc: &Toolchain) -> String {
    format!(
        "// Generated by `cargo xtask ptx` from {dir}. Do not edit.\n\
         // rustc: {version}\n\
         // flags: --target {TARGET} --profile {PROFILE} -Zbuild-std=core {flags}\n",
        dir = krate.dir,
        version = tc.version,
        flags = codegen_flags(&krate.arch).join(" "),
    )
}

/// The toolchain named in a generated file's header.
fn header_version(ptx: &str) -> Option<&str> {
    ptx.lines()
        .take(5)
        .find_map(|l| l.strip_prefix("// rustc: "))
}

/// Removes what must not depend on the machine: absolute paths of the checkout and `CRLF`s.
fn normalize(raw: &str, ws: &Path) -> String {
    let mut text = raw.replace("\r\n", "\n");
    let ws = ws.to_string_lossy();
    if text.contains(ws.as_ref()) {
        text = text.replace(ws.as_ref(), "<workspace>");
    }
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// Builds one device crate; returns the PTX with its header.
fn build_ptx(
    krate: &DeviceCrate,
    tc: &Toolchain,
    linker: &Path,
    ws: &Path,
    quiet: bool,
) -> Result<String> {
    // One target directory per architecture: the flags differ, and sharing one would rebuild
    // `core` and the shared crates at every switch.
    let target_dir = if krate.arch == "sm_80" {
        ws.join("target/ptx-build")
    } else {
        ws.join(format!("target/ptx-build-{}", krate.arch))
    };
    let mut rustflags = vec!["-C".to_owned(), format!("linker={}", linker.display())];
    rustflags.extend(codegen_flags(&krate.arch));
    let mut cmd = scrubbed(util::cargo_bin());
    cmd.current_dir(ws)
        .env("RUSTC_BOOTSTRAP", "1")
        .env("RUSTC", RUSTC)
        .env("CARGO_ENCODED_RUSTFLAGS", rustflags.join("\x1f"))
        .env("CARGO_TARGET_DIR", &target_dir)
        .args([
            "rustc",
            "-p",
            &krate.package,
            "--profile",
            PROFILE,
            "--target",
            TARGET,
        ])
        .args(["-Zbuild-std=core", "--crate-type", "cdylib"]);
    if quiet {
        cmd.arg("--quiet");
    }
    let start = Instant::now();
    run_build(&mut cmd, quiet)?;
    let out = target_dir
        .join(TARGET)
        .join(PROFILE)
        .join(format!("{}.ptx", krate.package.replace('-', "_")));
    let raw = fs::read_to_string(&out).ctx(|| format!("read {}", out.display()))?;
    if !quiet {
        eprintln!(
            "xtask: built {} in {:.1} s",
            krate.package,
            start.elapsed().as_secs_f64()
        );
    }
    let ptx = apply_param_align(&apply_launch_bounds(&normalize(&raw, ws))?)?;
    Ok(header(krate, tc) + &ptx)
}

/// The symbol prefix that sets the declared alignment of an entry's first parameter:
/// `CMV_PARAMALIGN_cmv_foo = 64` makes `.param .align 4 .b8 cmv_foo_param_0[N]` into `.param
/// .align 64 ...`. Rust's kernel ABI declares a parameter struct with its fields' alignment
/// (4) and cannot declare more (rustc stops at 16), but a tensor map read in place from the
/// parameter space (`cvta.param`, as `nvcc` does for a `__grid_constant__ CUtensorMap`) must
/// be 64-byte aligned; `ptxas` then places the parameter at such an offset and the driver
/// copies the struct there. The bytes and their offsets inside the struct do not change.
const PARAM_ALIGN: &str = "CMV_PARAMALIGN_";

/// Applies every [`PARAM_ALIGN`] symbol of a module (values 4 to 128, powers of two).
fn apply_param_align(ptx: &str) -> Result<String> {
    if !ptx.contains(PARAM_ALIGN) {
        return Ok(ptx.to_owned());
    }
    let mut out = ptx.to_owned();
    for line in ptx.lines() {
        let Some(rest) = line.split_once(&format!(" {PARAM_ALIGN}")).map(|(_, r)| r) else {
            continue;
        };
        let entry = rest.split(['[', ' ', ';']).next().unwrap_or(rest);
        let symbol = format!("{PARAM_ALIGN}{entry}");
        let n = ptx_static_u32(ptx, &symbol)
            .ok_or_else(|| Error::Msg(format!("{symbol}: no u32 value in the PTX")))?;
        if !(4..=128).contains(&n) || !n.is_power_of_two() {
            return Err(Error::Msg(format!(
                "{symbol} = {n}: must be a power of two in 4..=128"
            )));
        }
        let from = format!(".param .align 4 .b8 {entry}_param_0[");
        if !out.contains(&from) {
            return Err(Error::Msg(format!(
                "{symbol}: entry {entry} has no 4-aligned struct parameter `{from}...]`"
            )));
        }
        out = out.replace(&from, &format!(".param .align {n} .b8 {entry}_param_0["));
    }
    Ok(out)
}

/// Symbols a device crate exports to give every kernel of its module a performance directive
/// (Rust has no attribute for them): `#[unsafe(no_mangle)] pub static CMV_MAXNTID: u32 = N;`
/// becomes `.maxntid N, 1, 1`, `CMV_MINNCTAPERSM` becomes `.minnctapersm N`. A symbol with
/// an entry's name appended (`CMV_MINNCTAPERSM_cmv_foo`) sets it for that entry alone.
const DIRECTIVES: [(&str, &str, u32); 2] = [
    ("CMV_MAXNTID", ".maxntid {}, 1, 1", 1024),
    ("CMV_MINNCTAPERSM", ".minnctapersm {}", 32),
];

/// The value of the `u32` static `symbol` in a PTX module: LLVM writes it as
/// `.u32 NAME = N;` or as little-endian bytes, `.b8 NAME[4] = {b0, b1};` (trailing zero bytes
/// left out).
fn ptx_static_u32(ptx: &str, symbol: &str) -> Option<u32> {
    ptx.lines().find_map(|l| {
        let rest = l.split_once(&format!(" {symbol}"))?.1;
        if !(rest.starts_with(' ') || rest.starts_with('[')) {
            return None;
        }
        let value = rest.split_once('=')?.1.trim().trim_end_matches(';').trim();
        if let Some(bytes) = value.strip_prefix('{').and_then(|v| v.strip_suffix('}')) {
            let mut n = 0u32;
            for (i, b) in bytes.split(',').enumerate() {
                let b: u32 = b.trim().parse().ok()?;
                n |= b.checked_shl(8 * i as u32)?;
            }
            Some(n)
        } else {
            value.parse().ok()
        }
    })
}

/// The directive lines of entry `entry` (its own symbols first, then the module's).
fn directive_lines(ptx: &str, entry: &str) -> Result<String> {
    let mut lines = String::new();
    for (symbol, format, max) in DIRECTIVES {
        let own = format!("{symbol}_{entry}");
        let found = ptx_static_u32(ptx, &own)
            .map(|n| (own.clone(), n))
            .or_else(|| ptx_static_u32(ptx, symbol).map(|n| (symbol.to_owned(), n)));
        if let Some((name, n)) = found {
            if n == 0 || n > max {
                return Err(Error::Msg(format!("{name} = {n}: must be 1..={max}")));
            }
            lines.push_str(&format.replace("{}", &n.to_string()));
            lines.push('\n');
        }
    }
    Ok(lines)
}

/// Adds the [`DIRECTIVES`] a module asks for after the parameter list of each of its entries.
/// (Without `.maxntid`, `ptxas` must allow 1024-thread blocks and caps a kernel at 64
/// registers; with `.minnctapersm` it knows how many blocks per SM are enough.)
fn apply_launch_bounds(ptx: &str) -> Result<String> {
    if !ptx.contains(" CMV_MAXNTID") && !ptx.contains(" CMV_MINNCTAPERSM") {
        return Ok(ptx.to_owned());
    }
    // The module's own values are checked even where no entry uses them.
    directive_lines(ptx, "")?;
    let mut out = String::with_capacity(ptx.len() + 64);
    let mut pending: Option<String> = None;
    for line in ptx.lines() {
        out.push_str(line);
        out.push('\n');
        let entry = line
            .strip_prefix(".visible .entry ")
            .or_else(|| line.strip_prefix(".entry "));
        if let Some(rest) = entry {
            let name = rest.split(['(', ' ']).next().unwrap_or(rest);
            let lines = directive_lines(ptx, name)?;
            if line.contains(')') {
                out.push_str(&lines);
            } else {
                pending = Some(lines);
            }
        } else if line.starts_with(')')
            && let Some(lines) = pending.take()
        {
            out.push_str(&lines);
        }
    }
    Ok(out)
}

/// First differing line of two texts, for messages.
fn first_difference(a: &str, b: &str) -> String {
    let (mut la, mut lb) = (a.lines(), b.lines());
    for n in 1.. {
        match (la.next(), lb.next()) {
            (Some(x), Some(y)) if x == y => {}
            (None, None) => return "line endings differ".to_owned(),
            (x, y) => {
                return format!(
                    "line {n}: committed {:?}, built {:?}",
                    x.unwrap_or("<end of file>"),
                    y.unwrap_or("<end of file>")
                );
            }
        }
    }
    unreachable!()
}

/// `cargo xtask ptx [--check]`.
pub fn run(opts: Options) -> Result<()> {
    let ws = util::workspace_root();
    let tc = find_toolchain()?;
    // One build at a time per checkout (e.g. `cargo xtask ptx` next to the xtask test).
    let _lock = FileLock::acquire(&ws.join("target/xtask/ptx.lock"))?;
    let linker = build_linker(&tc, &ws, opts.quiet)?;
    let mut stale = Vec::new();
    let mut reported = Vec::new();
    let mut devices = Workspace::load(&ws)?.device_crates();
    if !opts.only.is_empty() {
        if let Some(bad) = opts
            .only
            .iter()
            .find(|p| !devices.iter().any(|k| &k.package == *p))
        {
            return Err(Error::Msg(format!(
                "--only {bad}: not a device crate (they are: {})",
                devices
                    .iter()
                    .map(|k| k.package.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        devices.retain(|k| opts.only.contains(&k.package));
    }
    for krate in &devices {
        let built = build_ptx(krate, &tc, &linker, &ws, opts.quiet)?;
        let dest = ws.join(&krate.ptx);
        let committed = fs::read_to_string(&dest).ok();
        if opts.check {
            let fresh = ws.join("target/xtask/check").join(krate.ptx_file_name());
            fs::create_dir_all(fresh.parent().unwrap())
                .ctx(|| "create target/xtask/check".into())?;
            fs::write(&fresh, &built).ctx(|| format!("write {}", fresh.display()))?;
            match committed {
                Some(c) if c == built => println!("xtask: {} is up to date", krate.ptx),
                Some(c) => {
                    let mut msg = format!(
                        "{} is stale ({}; the fresh build is {})",
                        krate.ptx,
                        first_difference(&c, &built),
                        fresh.display()
                    );
                    match header_version(&c) {
                        Some(v) if v != tc.version => msg.push_str(&format!(
                            "\n  note: it was generated with {v}, but the installed toolchain is {}",
                            tc.version
                        )),
                        None => msg.push_str("\n  note: its `// rustc:` header line is missing"),
                        Some(_) => {}
                    }
                    stale.push(msg);
                }
                None => stale.push(format!("{} does not exist", krate.ptx)),
            }
            reported.push((krate.arch.as_str(), fresh));
        } else {
            if committed.as_deref() == Some(built.as_str()) {
                println!("xtask: {} unchanged", krate.ptx);
            } else {
                fs::create_dir_all(dest.parent().unwrap())
                    .ctx(|| format!("create dir for {}", krate.ptx))?;
                fs::write(&dest, &built).ctx(|| format!("write {}", dest.display()))?;
                println!("xtask: wrote {}", krate.ptx);
            }
            reported.push((krate.arch.as_str(), dest));
        }
    }
    if opts.report {
        crate::ptxas::report_if_found(&ws, &reported)?;
    }
    if stale.is_empty() {
        Ok(())
    } else {
        Err(Error::Stale(format!(
            "{}\nrun `cargo xtask ptx` and commit the result",
            stale.join("\n")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn param_align_symbols_realign_their_entry_parameter() {
        let ptx = ".visible .global .align 4 .b8 CMV_PARAMALIGN_k[4] = {64};\n\
                   .visible .entry k(\n\t.param .align 4 .b8 k_param_0[312]\n)\n\
                   .visible .entry j(\n\t.param .align 4 .b8 j_param_0[312]\n)\n";
        let out = apply_param_align(ptx).unwrap();
        assert!(out.contains(".param .align 64 .b8 k_param_0[312]"));
        assert!(out.contains(".param .align 4 .b8 j_param_0[312]"));
        assert!(apply_param_align(&ptx.replace("{64}", "{48}")).is_err());
        assert!(apply_param_align(&ptx.replace("k_param_0", "q_param_0")).is_err());
        assert_eq!(apply_param_align("no symbols").unwrap(), "no symbols");
    }

    /// The committed PTX matches the device crates (in the style of rust-analyzer's
    /// generated-file tests). Skips, passing, where the PTX toolchain is not installed.
    #[test]
    fn committed_ptx_is_up_to_date() {
        let opts = Options {
            check: true,
            report: false,
            quiet: true,
            only: Vec::new(),
        };
        match run(opts) {
            Ok(()) => {}
            Err(Error::MissingTool { tool, install }) => {
                // Straight to stderr: libtest captures `println!` of passing tests.
                let msg = format!("SKIPPED: {tool} not installed; {install}\n");
                std::io::Write::write_all(&mut std::io::stderr(), msg.as_bytes()).unwrap();
            }
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn launch_bounds_go_after_every_entry_parameter_list() {
        let ptx = ".visible .global .align 4 .u32 CMV_MAXNTID = 256;\n\
                   .visible .entry a(\n\t.param .u32 a_param_0\n)\n{\n\tret;\n}\n\
                   .visible .entry b()\n{\n\tret;\n}\n\
                   .visible .entry c(\n\t.param .u32 c_param_0\n)  // @c\n{\n\tret;\n}\n";
        let out = apply_launch_bounds(ptx).unwrap();
        assert_eq!(out.matches(".maxntid 256, 1, 1").count(), 3, "{out}");
        assert!(out.contains("b()\n.maxntid 256, 1, 1\n{"));
        assert!(out.contains(")\n.maxntid 256, 1, 1\n{"));
        assert!(out.contains(")  // @c\n.maxntid 256, 1, 1\n{"));
        assert_eq!(
            apply_launch_bounds(".visible .entry a(\n)\n{\n}\n")
                .unwrap()
                .matches("maxntid")
                .count(),
            0
        );
        assert!(apply_launch_bounds(".global .u32 CMV_MAXNTID = 4096;\n").is_err());
        let bytes =
            ".visible .global .align 4 .b8 CMV_MAXNTID[4] = {0, 1};\n.visible .entry a()\n{\n}\n";
        assert!(
            apply_launch_bounds(bytes)
                .unwrap()
                .contains(".maxntid 256, 1, 1")
        );
        let both = ".global .u32 CMV_MINNCTAPERSM = 2;\n.global .u32 CMV_MAXNTID = 128;\n.entry a()\n{\n}\n";
        assert!(
            apply_launch_bounds(both)
                .unwrap()
                .contains("a()\n.maxntid 128, 1, 1\n.minnctapersm 2\n{")
        );
        // An entry's own value wins over the module's.
        let own = ".global .u32 CMV_MINNCTAPERSM = 2;\n.global .u32 CMV_MINNCTAPERSM_b = 8;\n\
                   .entry a()\n{\n}\n.entry b(\n\t.param .u32 b_param_0\n)\n{\n}\n";
        let out = apply_launch_bounds(own).unwrap();
        assert!(out.contains("a()\n.minnctapersm 2\n{"), "{out}");
        assert!(out.contains(")\n.minnctapersm 8\n{"), "{out}");
        assert!(
            apply_launch_bounds(".global .u32 CMV_MINNCTAPERSM_a = 99;\n.entry a()\n{\n}\n")
                .is_err()
        );
    }

    #[test]
    fn header_round_trips() {
        let tc = Toolchain {
            version: "rustc 9.9.9 (x) with LLVM 22.0.0".into(),
            linker_src: PathBuf::new(),
        };
        let krate = DeviceCrate {
            package: "dense-kernels".into(),
            dir: "kernels-rs/dense-kernels".into(),
            ptx: "crates/dense-gemv/ptx/dense_kernels.ptx".into(),
            arch: "sm_80".into(),
        };
        let text = header(&krate, &tc) + "//\n.version 7.8\n";
        assert_eq!(header_version(&text), Some(tc.version.as_str()));
        assert!(first_difference("a\nb\n", "a\nc\n").starts_with("line 2:"));
    }
}
