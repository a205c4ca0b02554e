//! ptxas resource reports for the generated PTX, and `cargo xtask ptxas-install`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{self, IoContext, Result, err};

/// Architectures the report assembles for (the PTX targets sm_80; the H100/H200 are sm_90).
const ARCHES: &[&str] = &["sm_80", "sm_90"];
/// The PyPI package whose wheel holds ptxas, pinned to one CUDA major.
const NVCC_REQUIREMENT: &str = "nvidia-cuda-nvcc>=13,<14";
/// `target/xtask/nvcc`: where `ptxas-install` unpacks ptxas (as `nvidia/cu13/bin/ptxas`).
const NVCC_DIR: &str = "target/xtask/nvcc";

const HOW_TO_GET: &str = "run `cargo xtask ptxas-install` (pip download --no-deps nvidia-cuda-nvcc, \
    then unzip nvidia/cu13/bin/ptxas from the wheel), or set PTXAS=/path/to/ptxas";

/// ptxas from `$PTXAS`, then `PATH`, then `target/xtask/nvcc/nvidia/*/bin/ptxas`.
pub fn find(ws: &Path) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PTXAS") {
        return Some(PathBuf::from(p));
    }
    util::which("ptxas").or_else(|| installed(ws))
}

fn installed(ws: &Path) -> Option<PathBuf> {
    let nvidia = ws.join(NVCC_DIR).join("nvidia");
    let mut found: Vec<PathBuf> = fs::read_dir(nvidia)
        .ok()?
        .flatten()
        .map(|e| e.path().join("bin/ptxas"))
        .filter(|p| util::is_executable(p))
        .collect();
    found.sort();
    found.pop()
}

/// One kernel's resources for one architecture, from `ptxas -v`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct KernelUsage {
    pub kernel: String,
    pub arch: String,
    pub registers: u32,
    pub stack: u32,
    pub spill_stores: u32,
    pub spill_loads: u32,
    pub smem: u32,
}

/// The number before `suffix` in a comma-separated `ptxas info` clause list.
fn number_before(text: &str, suffix: &str) -> Option<u32> {
    text.split(',')
        .map(str::trim)
        .find_map(|c| c.strip_suffix(suffix))
        .and_then(|n| n.split_whitespace().last()?.parse().ok())
}

/// Parses `ptxas -v` output (entry functions only).
pub fn parse(output: &str, arch: &str) -> Vec<KernelUsage> {
    let mut kernels: Vec<KernelUsage> = Vec::new();
    let mut current: Option<usize> = None;
    let mut properties_for: Option<String> = None;
    for line in output.lines() {
        let info = line
            .trim_start_matches("ptxas info")
            .trim_start()
            .trim_start_matches(':')
            .trim();
        if let Some(rest) = info.strip_prefix("Compiling entry function '") {
            let name = rest.split('\'').next().unwrap_or_default().to_owned();
            kernels.push(KernelUsage {
                kernel: name,
                arch: arch.to_owned(),
                ..Default::default()
            });
            current = Some(kernels.len() - 1);
        } else if let Some(name) = info.strip_prefix("Function properties for ") {
            properties_for = Some(name.trim().to_owned());
        } else if info.contains("bytes stack frame") {
            // `N bytes stack frame, S bytes spill stores, L bytes spill loads`
            let name = properties_for.take();
            if let Some(k) = kernels
                .iter_mut()
                .find(|k| Some(&k.kernel) == name.as_ref())
            {
                k.spill_stores = number_before(info, "bytes spill stores").unwrap_or(0);
                k.spill_loads = number_before(info, "bytes spill loads").unwrap_or(0);
            }
        } else if info.starts_with("Used ") {
            // `Used R registers, used B barriers, K bytes cumulative stack size, X bytes smem`
            if let Some(k) = current.take().map(|i| &mut kernels[i]) {
                k.registers = number_before(info, "registers").unwrap_or(0);
                k.stack = number_before(info, "bytes cumulative stack size")
                    .or_else(|| number_before(info, "bytes stack frame"))
                    .unwrap_or(0);
                k.smem = number_before(info, "bytes smem").unwrap_or(0);
            }
        }
    }
    kernels
}

/// Assembles every file (with the architecture its device crate targets) for every arch in
/// [`ARCHES`], or only for its own when that is not `sm_80` (`sm_90a` code runs on Hopper
/// only), and prints the resource table; fails when ptxas rejects a file. Prints how to get
/// ptxas when there is none.
pub fn report_if_found(ws: &Path, files: &[(&str, PathBuf)]) -> Result<()> {
    let Some(ptxas) = find(ws) else {
        println!(
            "xtask: ptxas not found, skipping the register/spill report; to get it, {HOW_TO_GET}"
        );
        return Ok(());
    };
    let mut rows = Vec::new();
    for (target, file) in files {
        let arches: &[&str] = if *target == "sm_80" {
            ARCHES
        } else {
            std::slice::from_ref(target)
        };
        for arch in arches {
            let mut cmd = Command::new(&ptxas);
            cmd.arg(format!("-arch={arch}"))
                .arg("-v")
                .arg(file)
                .args(["-o", "/dev/null"]);
            let out = util::run_captured(&mut cmd)
                .map_err(|e| err!("ptxas rejected {} for {arch}:\n{e}", file.display()))?;
            let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
            rows.extend(parse(&text, arch));
        }
    }
    rows.sort_by(|a, b| (&a.kernel, &a.arch).cmp(&(&b.kernel, &b.arch)));
    print_table(&ptxas, &rows);
    Ok(())
}

fn print_table(ptxas: &Path, rows: &[KernelUsage]) {
    let width = rows
        .iter()
        .map(|r| r.kernel.len())
        .max()
        .unwrap_or(0)
        .max("kernel".len());
    println!("\nptxas report ({}):", ptxas.display());
    println!(
        "{:<width$}  {:<6}  {:>4}  {:>5}  {:>12}  {:>6}",
        "kernel", "arch", "regs", "stack", "spill st/ld", "smem"
    );
    for r in rows {
        println!(
            "{:<width$}  {:<6}  {:>4}  {:>5}  {:>12}  {:>6}",
            r.kernel,
            r.arch,
            r.registers,
            r.stack,
            format!("{}/{}", r.spill_stores, r.spill_loads),
            r.smem
        );
    }
    let local: Vec<String> = rows
        .iter()
        .filter(|r| r.stack > 0 || r.spill_stores > 0 || r.spill_loads > 0)
        .map(|r| format!("{} ({})", r.kernel, r.arch))
        .collect();
    if local.is_empty() {
        println!("(stack and spills in bytes; no kernel uses local memory)");
    } else {
        println!(
            "warning: these kernels use local memory (stack or spills): {}",
            local.join(", ")
        );
    }
}

/// `cargo xtask ptxas-install`: downloads the nvcc wheel with pip (or takes `wheel`) and unpacks
/// its `bin/ptxas` under `target/xtask/nvcc`.
pub fn install(wheel: Option<PathBuf>, force: bool) -> Result<()> {
    let ws = util::workspace_root();
    let dir = ws.join(NVCC_DIR);
    if !force && let Some(p) = installed(&ws) {
        println!("xtask: ptxas already installed: {}", p.display());
        return Ok(());
    }
    let (wheel, downloaded) = match wheel {
        Some(w) => (w, false),
        None => (download(&dir)?, true),
    };
    let wheel = fs::canonicalize(&wheel).ctx(|| format!("find {}", wheel.display()))?;
    extract_ptxas(&wheel, &dir)?;
    if downloaded {
        // Only ptxas is needed; the wheel is ~50 MB.
        fs::remove_dir_all(dir.join("wheel")).ctx(|| "remove the downloaded wheel".into())?;
    }
    let ptxas =
        installed(&ws).ok_or_else(|| err!("{} holds no nvidia/*/bin/ptxas", wheel.display()))?;
    let version = util::stdout_of(&ptxas, &["--version"])?;
    println!(
        "xtask: installed {}\n{}",
        ptxas.display(),
        version.lines().last().unwrap_or_default()
    );
    Ok(())
}

fn download(dir: &Path) -> Result<PathBuf> {
    let wheels = dir.join("wheel");
    if wheels.exists() {
        fs::remove_dir_all(&wheels).ctx(|| format!("remove {}", wheels.display()))?;
    }
    let python = ["python3", "python"].into_iter().find_map(util::which);
    let pip_works = |py: &Path| {
        Command::new(py)
            .args(["-m", "pip", "--version"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let mut cmd = match python {
        Some(py) if pip_works(&py) => {
            let mut c = Command::new(py);
            c.args(["-m", "pip"]);
            c
        }
        _ => match ["pip3", "pip"].into_iter().find_map(util::which) {
            Some(pip) => Command::new(pip),
            None => {
                return Err(err!(
                    "pip not found (tried python3 -m pip, pip3, pip); install it (Debian: \
                     apt-get install -y python3-pip) or download the {NVCC_REQUIREMENT} wheel \
                     yourself and run `cargo xtask ptxas-install --wheel <file.whl>`"
                ));
            }
        },
    };
    cmd.args(["download", "--no-deps", "--only-binary=:all:", "--dest"])
        .arg(&wheels)
        .arg(NVCC_REQUIREMENT);
    util::run(&mut cmd)?;
    fs::read_dir(&wheels)
        .ctx(|| format!("read {}", wheels.display()))?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| err!("pip downloaded no wheel into {}", wheels.display()))
}

/// Unpacks `nvidia/*/bin/ptxas` from the wheel into `dir`, with `unzip` or python3's zipfile.
fn extract_ptxas(wheel: &Path, dir: &Path) -> Result<()> {
    let nvidia = dir.join("nvidia");
    if nvidia.exists() {
        fs::remove_dir_all(&nvidia).ctx(|| format!("remove {}", nvidia.display()))?;
    }
    fs::create_dir_all(dir).ctx(|| format!("create {}", dir.display()))?;
    if let Some(unzip) = util::which("unzip") {
        let mut cmd = Command::new(unzip);
        cmd.args(["-o", "-q"])
            .arg(wheel)
            .arg("nvidia/*/bin/ptxas")
            .arg("-d")
            .arg(dir);
        util::run(&mut cmd)?;
    } else if let Some(py) = util::which("python3") {
        const SCRIPT: &str = "import sys, zipfile\n\
            z = zipfile.ZipFile(sys.argv[1])\n\
            names = [n for n in z.namelist() if n.startswith('nvidia/') and n.endswith('/bin/ptxas')]\n\
            assert names, 'no nvidia/*/bin/ptxas in the wheel'\n\
            for n in names: z.extract(n, sys.argv[2])\n";
        let mut cmd = Command::new(py);
        cmd.args(["-c", SCRIPT]).arg(wheel).arg(dir);
        util::run(&mut cmd)?;
    } else {
        return Err(err!(
            "neither `unzip` nor `python3` is installed to unpack {}",
            wheel.display()
        ));
    }
    for entry in fs::read_dir(&nvidia)
        .ctx(|| format!("read {}", nvidia.display()))?
        .flatten()
    {
        let ptxas = entry.path().join("bin/ptxas");
        if ptxas.is_file() {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&ptxas, fs::Permissions::from_mode(0o755))
                .ctx(|| format!("chmod {}", ptxas.display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ptxas_v() {
        let out = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'cmv_gemv_f16_b4' for 'sm_90'
ptxas info    : Function properties for cmv_gemv_f16_b4
    16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 72 registers, used 1 barriers, 16 bytes cumulative stack size, 2048 bytes smem
ptxas info    : Compiling entry function 'cmv_stream_read' for 'sm_90'
ptxas info    : Function properties for cmv_stream_read
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 30 registers, used 0 barriers, 0 bytes cumulative stack size
";
        let k = parse(out, "sm_90");
        assert_eq!(k.len(), 2);
        assert_eq!(
            k[0],
            KernelUsage {
                kernel: "cmv_gemv_f16_b4".into(),
                arch: "sm_90".into(),
                registers: 72,
                stack: 16,
                spill_stores: 8,
                spill_loads: 12,
                smem: 2048
            }
        );
        assert_eq!((k[1].registers, k[1].stack, k[1].smem), (30, 0, 0));
    }
}
