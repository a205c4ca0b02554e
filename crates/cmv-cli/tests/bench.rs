//! `cmv bench` from the outside: its input errors (before any GPU work) and, on a machine
//! without a GPU (or a build without GPU support), its no-GPU message and exit code 12. Where
//! a GPU is present the no-GPU assertions are skipped with a printed reason (`cmv bench` runs
//! there; its measuring is the bench crate's, tested by its own GPU tests).

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;
use safetensors::tensor::{Dtype, TensorView};
use tempfile::TempDir;

fn cmv() -> Command {
    Command::cargo_bin("cmv").expect("the cmv binary")
}

/// Why `cmv bench` would find a GPU here, or `None` where it would not.
fn gpu_present() -> Option<String> {
    #[cfg(feature = "gpu")]
    {
        if let Ok(gpu) = cmv_runtime::Gpu::new(0) {
            return Some(gpu.info().name.clone());
        }
    }
    None
}

/// A model of one 64 x 128 F32 matrix and a bias, and its spqr compression.
struct Files {
    _dir: TempDir,
    compressed: PathBuf,
    plain: PathBuf,
}

fn files() -> Files {
    let dir = TempDir::new().expect("temp dir");
    let plain = dir.path().join("model.safetensors");
    let w: Vec<u8> = (0..64 * 128)
        .flat_map(|i| (((i * 37 % 101) as f32 - 50.0) / 500.0).to_le_bytes())
        .collect();
    let b: Vec<u8> = (0..64).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let views = [
        (
            "layer.weight",
            TensorView::new(Dtype::F32, vec![64, 128], &w).expect("view"),
        ),
        (
            "layer.bias",
            TensorView::new(Dtype::F32, vec![64], &b).expect("view"),
        ),
    ];
    safetensors::serialize_to_file(views, None, &plain).expect("write the model");
    let compressed = dir.path().join("model.spqr.safetensors");
    cmv()
        .args(["compress", "--quiet", "--format", "spqr", "-o"])
        .arg(&compressed)
        .arg(&plain)
        .assert()
        .success();
    Files {
        _dir: dir,
        compressed,
        plain,
    }
}

/// Runs `cmv bench` with `args` and checks the no-GPU error: exit code 12, one line that says
/// a GPU is needed.
fn assert_no_gpu(args: &[&str], file: Option<&Path>) {
    let mut c = cmv();
    c.arg("bench");
    if let Some(f) = file {
        c.arg(f);
    }
    let out = c.args(args).assert().code(12).stdout("");
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        err.starts_with("cmv: error: cmv bench needs an NVIDIA GPU: "),
        "stderr: {err}"
    );
    assert_eq!(err.lines().count(), 1, "stderr: {err}");
    assert!(!err.contains("panicked"), "stderr: {err}");
    if cfg!(feature = "gpu") {
        assert!(
            err.contains("CUDA") || err.contains("cuda"),
            "names the driver or device: {err}"
        );
    } else {
        assert!(err.contains("built without GPU support"), "stderr: {err}");
    }
}

#[test]
fn without_a_gpu_bench_says_so_with_exit_code_12() {
    if let Some(name) = gpu_present() {
        eprintln!(
            "SKIPPED without_a_gpu_bench_says_so_with_exit_code_12: a GPU is present ({name}), so \
             `cmv bench` runs instead of refusing"
        );
        return;
    }
    let f = files();
    assert_no_gpu(&[], Some(&f.compressed));
    assert_no_gpu(&["--json", "--batches", "1,4"], Some(&f.compressed));
    // A plain model (every 2-D tensor timed as dense) gets as far.
    assert_no_gpu(&[], Some(&f.plain));
    // The synthetic set is made only once a GPU is found: this returns at once.
    let start = std::time::Instant::now();
    assert_no_gpu(
        &["--synthetic", "llama-7b", "--format", "spqr", "--json"],
        None,
    );
    assert!(start.elapsed().as_secs() < 30, "{:?}", start.elapsed());
}

#[test]
fn input_errors_come_before_the_gpu() {
    let f = files();
    let dir = f.compressed.parent().expect("its directory").to_owned();
    // A missing file: 3.
    cmv()
        .arg("bench")
        .arg(dir.join("missing.safetensors"))
        .assert()
        .code(3)
        .stderr(predicate::str::contains("cannot read"));
    // Not a safetensors file: 4.
    let junk = dir.join("junk.safetensors");
    std::fs::write(&junk, b"not a model").expect("write");
    cmv()
        .arg("bench")
        .arg(&junk)
        .assert()
        .code(4)
        .stderr(predicate::str::contains("is not a valid safetensors file"));
    // A damaged container: 5, naming the tensor.
    let mut bytes = std::fs::read(&f.compressed).expect("read");
    let (header, meta) = safetensors::SafeTensors::read_metadata(&bytes).expect("header");
    let (start, end) = meta
        .info("layer.weight")
        .expect("the container")
        .data_offsets;
    bytes[8 + header + (start + end) / 2] ^= 0x5A;
    let damaged = dir.join("damaged.safetensors");
    std::fs::write(&damaged, &bytes).expect("write");
    cmv()
        .arg("bench")
        .arg(&damaged)
        .assert()
        .code(5)
        .stderr(predicate::str::contains("layer.weight"));
    // Unknown format or variant: 6.
    cmv()
        .args(["bench", "--synthetic", "llama-7b", "--format", "nope"])
        .assert()
        .code(6)
        .stderr(predicate::str::contains("unknown format \"nope\""));
    cmv()
        .args([
            "bench",
            "--synthetic",
            "llama-7b",
            "--format",
            "vq",
            "--variant",
            "nope",
        ])
        .assert()
        .code(6)
        .stderr(predicate::str::contains("has no variant \"nope\""));
    // Malformed command lines: 2.
    for args in [
        &["bench"][..],
        &["bench", "--synthetic", "llama-7b"],
        &["bench", "x.safetensors", "--batches", "32"],
        &["bench", "x.safetensors", "--format", "spqr"],
        &[
            "bench",
            "x.safetensors",
            "--synthetic",
            "llama-7b",
            "--format",
            "spqr",
        ],
    ] {
        cmv()
            .args(args)
            .assert()
            .code(2)
            .stderr(predicate::str::starts_with("cmv: error: "));
    }
}

#[test]
fn bench_is_in_the_help() {
    cmv()
        .arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("bench"))
        .stdout(predicate::str::contains("12 no GPU"));
    cmv()
        .args(["bench", "--help"])
        .assert()
        .success()
        .stdout(predicate::str::contains("--synthetic"))
        .stdout(predicate::str::contains("llama-7b"));
}
