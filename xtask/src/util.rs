//! Errors, paths and process helpers shared by the xtask commands.

use std::ffi::OsStr;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The one command that installs everything the PTX build needs (Debian 12).
pub const INSTALL_CMD: &str = "apt-get update && apt-get install -y rustc-web rust-web-src";

/// Why an xtask command failed.
#[derive(Debug)]
pub enum Error {
    /// A tool the command needs is not installed.
    MissingTool {
        /// What is missing, e.g. `llc (/usr/lib/llvm-22/bin/llc)`.
        tool: String,
        /// The command that installs it.
        install: String,
    },
    /// Committed generated files differ from what the build produces now.
    Stale(String),
    /// Anything else.
    Msg(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::MissingTool { tool, install } => {
                write!(f, "{tool} is not installed; install it with `{install}`")
            }
            Error::Stale(msg) | Error::Msg(msg) => f.write_str(msg),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Builds an [`Error::Msg`] from `format!` arguments.
macro_rules! err {
    ($($arg:tt)*) => { $crate::util::Error::Msg(format!($($arg)*)) };
}
pub(crate) use err;

/// Adds context to I/O errors.
pub trait IoContext<T> {
    fn ctx(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn ctx(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| Error::Msg(format!("{}: {e}", what())))
    }
}

/// The workspace root (the parent of this crate's directory).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

/// The cargo that runs xtask (`$CARGO`), or `cargo` from `PATH`.
pub fn cargo_bin() -> PathBuf {
    std::env::var_os("CARGO").map_or_else(|| PathBuf::from("cargo"), PathBuf::from)
}

/// Finds an executable named `name` on `PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

pub fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Renders a command for messages.
pub fn show(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for arg in cmd.get_args() {
        s.push(' ');
        s.push_str(&arg.to_string_lossy());
    }
    s
}

/// Runs `cmd` with inherited stdio; fails on a non-zero exit.
pub fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd
        .status()
        .map_err(|e| err!("cannot run `{}`: {e}", show(cmd)))?;
    if status.success() {
        Ok(())
    } else {
        Err(err!("`{}` failed ({status})", show(cmd)))
    }
}

/// Runs `cmd` with captured output; fails on a non-zero exit, showing its output.
pub fn run_captured(cmd: &mut Command) -> Result<Output> {
    let out = cmd
        .output()
        .map_err(|e| err!("cannot run `{}`: {e}", show(cmd)))?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(err!(
            "`{}` failed ({})\n{}{}",
            show(cmd),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Stdout of a command that must succeed, trimmed.
pub fn stdout_of(program: impl AsRef<OsStr>, args: &[&str]) -> Result<String> {
    let out = run_captured(Command::new(program).args(args))?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Recursively copies `src` to `dst` (files and directories only).
pub fn copy_dir(src: &Path, dst: &Path) -> Result<()> {
    fs::create_dir_all(dst).ctx(|| format!("create {}", dst.display()))?;
    for entry in fs::read_dir(src).ctx(|| format!("read {}", src.display()))? {
        let entry = entry.ctx(|| format!("read {}", src.display()))?;
        let (from, to) = (entry.path(), dst.join(entry.file_name()));
        let ty = entry
            .file_type()
            .ctx(|| format!("stat {}", from.display()))?;
        if ty.is_dir() {
            copy_dir(&from, &to)?;
        } else {
            fs::copy(&from, &to).ctx(|| format!("copy {} to {}", from.display(), to.display()))?;
        }
    }
    Ok(())
}

/// Total size in bytes of the files under `path`.
pub fn dir_size(path: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(path) else {
        return fs::metadata(path).map_or(0, |m| m.len());
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_size(&e.path()),
            _ => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}

pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Holds an exclusive lock on a file while alive (released on drop).
#[derive(Debug)]
pub struct FileLock(#[allow(dead_code)] fs::File);

impl FileLock {
    pub fn acquire(path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).ctx(|| format!("create {}", dir.display()))?;
        }
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .ctx(|| format!("open {}", path.display()))?;
        file.lock().ctx(|| format!("lock {}", path.display()))?;
        Ok(FileLock(file))
    }
}
