//! The `cmv` binary end to end: compress / inspect / decompress / eval for every registered
//! format on a small safetensors file made here, and every error case with its message and
//! exit code.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use half::{bf16, f16};
use predicates::prelude::*;
use safetensors::SafeTensors;
use safetensors::tensor::{Dtype, TensorView};
use tempfile::TempDir;

/// A seeded stream of roughly Gaussian values (sum of 4 uniforms), scaled like weights.
fn weights(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut uniform = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    (0..n)
        .map(|_| {
            let g = (0..4).map(|_| uniform()).sum::<f64>() - 2.0;
            (g * 0.08) as f32
        })
        .collect()
}

struct Model {
    dir: TempDir,
    path: PathBuf,
}

/// The test model: 2-D F32, F16 and BF16 tensors of odd shapes, an I8 and a U16 matrix, a
/// 1-D bias and a tiny 2-D tensor.
fn model() -> Model {
    let dir = TempDir::new().expect("temp dir");
    let path = dir.path().join("model.safetensors");
    let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let q = weights(1, 67 * 130);
    let k = weights(2, 40 * 200);
    let v = weights(3, 33 * 150);
    let tensors: Vec<(&str, Dtype, Vec<usize>, Vec<u8>)> = vec![
        ("layer.0.q.weight", Dtype::F32, vec![67, 130], f32s(&q)),
        (
            "layer.0.k.weight",
            Dtype::F16,
            vec![40, 200],
            k.iter()
                .flat_map(|&x| f16::from_f32(x).to_le_bytes())
                .collect(),
        ),
        (
            "layer.0.v.weight",
            Dtype::BF16,
            vec![33, 150],
            v.iter()
                .flat_map(|&x| bf16::from_f32(x).to_le_bytes())
                .collect(),
        ),
        ("layer.0.bias", Dtype::F32, vec![67], f32s(&weights(4, 67))),
        ("tiny.weight", Dtype::F32, vec![2, 3], f32s(&weights(5, 6))),
        (
            "codes.int8",
            Dtype::I8,
            vec![50, 100],
            weights(6, 5000)
                .iter()
                .map(|&x| ((x * 300.0).clamp(-127.0, 127.0) as i8) as u8)
                .collect(),
        ),
        (
            "codes.u16",
            Dtype::U16,
            vec![50, 100],
            weights(7, 5000)
                .iter()
                .flat_map(|&x| ((x.abs() * 2000.0) as u16).to_le_bytes())
                .collect(),
        ),
    ];
    let views: Vec<(&str, TensorView<'_>)> = tensors
        .iter()
        .map(|(n, d, s, b)| (*n, TensorView::new(*d, s.clone(), b).expect("view")))
        .collect();
    let meta = HashMap::from([("format".to_string(), "pt".to_string())]);
    safetensors::serialize_to_file(views, Some(meta), &path).expect("write model");
    Model { dir, path }
}

fn cmv() -> Command {
    Command::cargo_bin("cmv").expect("the cmv binary")
}

/// The registered formats, from `cmv formats` (unindented lines are names).
fn formats() -> Vec<String> {
    let out = cmv().arg("formats").output().expect("run cmv formats");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with(' ') && !l.is_empty())
        .map(String::from)
        .collect()
}

/// `(dtype, shape, bytes)` of every tensor of a file.
fn read(path: &Path) -> HashMap<String, (Dtype, Vec<usize>, Vec<u8>)> {
    let bytes = std::fs::read(path).expect("read");
    let st = SafeTensors::deserialize(&bytes).expect("safetensors");
    st.tensors()
        .into_iter()
        .map(|(n, v)| (n, (v.dtype(), v.shape().to_vec(), v.data().to_vec())))
        .collect()
}

fn json(cmd: &mut Command) -> serde_json::Value {
    let out = cmd.output().expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

fn compress(m: &Model, format: &str, out: &Path) {
    cmv()
        .arg("compress")
        .arg(&m.path)
        .args(["--format", format, "--min-elements", "64", "-q", "-o"])
        .arg(out)
        .assert()
        .success()
        .stdout(predicate::str::contains("layer.0.bias: 1-D"))
        .stdout(predicate::str::contains("tiny.weight: 6 weights"));
}

const LOSSY_BOUND: f64 = 0.5;

#[test]
fn every_format_round_trips() {
    let m = model();
    let names = formats();
    assert!(names.len() >= 5, "{names:?}");
    let original = read(&m.path);
    for format in &names {
        let out = m.dir.path().join(format!("model.{format}.safetensors"));
        compress(&m, format, &out);

        let report = json(cmv().arg("inspect").arg(&out).arg("--json"));
        let rows = report["tensors"].as_array().expect("rows");
        assert_eq!(rows.len(), original.len(), "{format}: scales are not rows");
        let compressed: Vec<&serde_json::Value> =
            rows.iter().filter(|r| !r["format"].is_null()).collect();
        assert!(!compressed.is_empty(), "{format} compressed nothing");
        for r in &compressed {
            assert_eq!(r["format"], format.as_str());
            assert!(r["bits_per_weight"].as_f64().expect("bits") > 0.0);
            assert!(r["stored_bytes"].as_u64().expect("bytes") > 0);
        }
        cmv()
            .arg("inspect")
            .arg(&out)
            .assert()
            .success()
            .stdout(predicate::str::contains("bits/w").and(predicate::str::contains("tensors, ")));

        let dec = m.dir.path().join(format!("model.{format}.dec.safetensors"));
        cmv()
            .arg("decompress")
            .arg(&out)
            .arg("-o")
            .arg(&dec)
            .assert()
            .success();
        let back = read(&dec);
        assert_eq!(back.len(), original.len(), "{format}");
        for (name, (dtype, shape, bytes)) in &original {
            let (d2, s2, b2) = &back[name];
            assert_eq!((d2, s2), (dtype, shape), "{format} {name}");
            let row = rows
                .iter()
                .find(|r| r["name"] == name.as_str())
                .expect("row");
            let exact = row["format"].is_null() || row["input"] == "exact";
            if exact {
                assert_eq!(
                    b2, bytes,
                    "{format} {name}: lossless must give back the bytes"
                );
            }
        }

        let e = json(cmv().arg("eval").arg(&m.path).arg(&out).arg("--json"));
        assert_eq!(e["counted_tensors"].as_u64(), Some(compressed.len() as u64));
        for t in e["tensors"].as_array().expect("rows") {
            let err = t["relative_error"].as_f64().expect("finite error");
            let row = rows.iter().find(|r| r["name"] == t["name"]).expect("row");
            if row["format"].is_null() || row["input"] == "exact" {
                assert_eq!(err, 0.0, "{format} {}", t["name"]);
            } else {
                assert!(
                    err > 0.0 && err < LOSSY_BOUND,
                    "{format} {}: {err}",
                    t["name"]
                );
            }
        }
        let mean = e["mean_relative_error"].as_f64().expect("mean");
        assert!(mean < LOSSY_BOUND, "{format}: {mean}");
        assert!(e["bits_per_weight"].as_f64().expect("bits") > 0.0);

        // The decompressed file evaluates the same (up to the fp16/bf16 rounding of the
        // output), and `--dtype f32` writes float tensors in f32.
        let e2 = json(cmv().arg("eval").arg(&m.path).arg(&dec).arg("--json"));
        assert!(e2["mean_relative_error"].as_f64().expect("mean") < LOSSY_BOUND);
        let dec32 = m.dir.path().join(format!("model.{format}.f32.safetensors"));
        cmv()
            .arg("decompress")
            .arg(&out)
            .args(["--dtype", "f32", "-o"])
            .arg(&dec32)
            .assert()
            .success();
        for r in &compressed {
            if r["input"] != "exact" {
                let name = r["name"].as_str().expect("name");
                assert_eq!(read(&dec32)[name].0, Dtype::F32, "{format} {name}");
            }
        }
    }
    // Nothing half-written is left beside the outputs.
    for entry in std::fs::read_dir(m.dir.path()).expect("dir") {
        let name = entry.expect("entry").file_name();
        assert!(
            !name.to_string_lossy().starts_with('.'),
            "left over: {name:?}"
        );
    }
}

#[test]
fn lossless_integer_formats_give_back_identical_values() {
    let m = model();
    let original = read(&m.path);
    for (format, tensor) in [("ans", "codes.int8"), ("beam", "codes.u16")] {
        let out = m.dir.path().join(format!("{format}.safetensors"));
        cmv()
            .arg("compress")
            .arg(&m.path)
            .args(["-f", format, "--tensor", tensor, "-q", "-o"])
            .arg(&out)
            .assert()
            .success()
            .stdout(predicate::str::contains("compressed 1 tensors"));
        let dec = m.dir.path().join(format!("{format}.dec.safetensors"));
        cmv()
            .arg("decompress")
            .arg(&out)
            .arg("-o")
            .arg(&dec)
            .assert()
            .success();
        assert_eq!(read(&dec), original, "{format}");
        let e = json(cmv().arg("eval").arg(&m.path).arg(&out).arg("--json"));
        assert_eq!(e["mean_relative_error"].as_f64(), Some(0.0));
    }
}

/// Runs `cmv` with `args`, expects exit code `code` and a one-line message containing each of
/// `needles` on stderr, and no panic.
fn fails(args: &[OsString], code: i32, needles: &[&str]) {
    let out = cmv().args(args).output().expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    assert!(stderr.starts_with("cmv: error: "), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    for n in needles {
        assert!(stderr.contains(n), "{args:?}: {stderr} lacks {n:?}");
    }
}

/// Command-line arguments of mixed types.
macro_rules! a {
    ($($x:expr),* $(,)?) => {
        [$(OsString::from(AsRef::<std::ffi::OsStr>::as_ref(&$x))),*]
    };
}

/// Flips a byte in the middle of tensor `name`'s data, in place.
fn corrupt(path: &Path, name: &str) {
    let mut bytes = std::fs::read(path).expect("read");
    let (start, len) = {
        let st = SafeTensors::deserialize(&bytes).expect("safetensors");
        let data = st.tensor(name).expect("tensor").data();
        (data.as_ptr() as usize - bytes.as_ptr() as usize, data.len())
    };
    bytes[start + len / 2] ^= 0x5a;
    std::fs::write(path, bytes).expect("write");
}

/// A copy of `path` whose tensor `name` lost its last `cut` bytes (a valid safetensors file
/// holding a truncated container).
fn truncate_tensor(path: &Path, name: &str, cut: usize, to: &Path) {
    let bytes = std::fs::read(path).expect("read");
    let (_, meta) = SafeTensors::read_metadata(&bytes).expect("metadata");
    let st = SafeTensors::deserialize(&bytes).expect("safetensors");
    let tensors: Vec<(String, TensorView<'_>)> = st
        .tensors()
        .into_iter()
        .map(|(n, v)| {
            if n == name {
                let data = &v.data()[..v.data().len() - cut];
                (
                    n,
                    TensorView::new(Dtype::U8, vec![data.len()], data).expect("view"),
                )
            } else {
                (n, v)
            }
        })
        .collect();
    safetensors::serialize_to_file(tensors, meta.metadata().clone(), to).expect("write");
}

#[test]
fn damaged_containers_name_the_tensor() {
    let m = model();
    for format in formats() {
        let out = m.dir.path().join(format!("{format}.safetensors"));
        compress(&m, &format, &out);
        let tensor = "layer.0.q.weight";

        let cut = m.dir.path().join(format!("{format}.cut.safetensors"));
        truncate_tensor(&out, tensor, 16, &cut);
        let dec = m.dir.path().join("dec.safetensors");
        for sub in ["inspect", "decompress", "eval"] {
            let args = match sub {
                "inspect" => a!["inspect", cut].to_vec(),
                "decompress" => a!["decompress", cut, "-o", dec].to_vec(),
                _ => a!["eval", m.path, cut].to_vec(),
            };
            fails(&args, 5, &[tensor, "damaged", format.as_str()]);
        }
        assert!(!dec.exists());

        corrupt(&out, tensor);
        fails(&a!["inspect", out], 5, &[tensor, "damaged"]);
        fails(&a!["eval", m.path, out], 5, &[tensor, "damaged"]);
    }
}

#[test]
fn file_errors_have_their_exit_codes() {
    let m = model();
    let d = m.dir.path();
    let missing = d.join("missing.safetensors");
    let out = d.join("out.safetensors");
    fails(
        &a!["compress", missing, "-f", "spqr", "-o", out],
        3,
        &["cannot read", "missing.safetensors"],
    );
    fails(&a!["inspect", missing], 3, &["cannot read"]);
    fails(&a!["inspect", d], 3, &["cannot read", "directory"]);
    let empty = d.join("empty.safetensors");
    std::fs::write(&empty, "").expect("write");
    fails(&a!["inspect", empty], 4, &["not a valid safetensors file"]);

    let text = d.join("text.safetensors");
    std::fs::write(&text, "this is not a model\n").expect("write");
    fails(&a!["inspect", text], 4, &["not a valid safetensors file"]);

    let bytes = std::fs::read(&m.path).expect("read");
    let short = d.join("short.safetensors");
    std::fs::write(&short, &bytes[..bytes.len() - 100]).expect("write");
    fails(&a!["inspect", short], 4, &["truncated"]);
    fails(
        &a!["compress", short, "-f", "spqr", "-o", out],
        4,
        &["truncated"],
    );
    let header_cut = d.join("header-cut.safetensors");
    std::fs::write(&header_cut, &bytes[..40]).expect("write");
    fails(&a!["inspect", header_cut], 4, &["truncated"]);

    let cmp = d.join("spqr.safetensors");
    compress(&m, "spqr", &cmp);
    fails(
        &a!["compress", cmp, "-f", "spqr", "-o", out],
        4,
        &["already compressed"],
    );

    // The output exists: refused without --force, replaced with it.
    fails(
        &a!["compress", m.path, "-f", "spqr", "-o", cmp],
        8,
        &["exists", "--force"],
    );
    fails(&a!["decompress", cmp, "-o", m.path], 8, &["--force"]);
    cmv()
        .arg("compress")
        .arg(&m.path)
        .args(["-f", "vq", "-q", "--force", "-o"])
        .arg(&cmp)
        .assert()
        .success();
    let report = json(cmv().arg("inspect").arg(&cmp).arg("--json"));
    let q = report["tensors"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|r| r["name"] == "layer.0.q.weight")
        .expect("row");
    assert_eq!(q["format"], "vq", "--force replaced the file");

    let nowhere = d.join("no-such-dir").join("out.safetensors");
    fails(
        &a!["compress", m.path, "-f", "spqr", "-o", nowhere],
        9,
        &["cannot write"],
    );

    // eval: the compressed file of another model.
    let other = d.join("other.safetensors");
    let t = TensorView::new(Dtype::F32, vec![1, 1], &[0u8; 4]).expect("view");
    safetensors::serialize_to_file(vec![("x", t)], None, &other).expect("write");
    fails(&a!["eval", m.path, other], 10, &["do not match"]);
    fails(&a!["eval", cmp, m.path], 10, &["itself compressed"]);
}

#[test]
fn format_and_tensor_errors_have_their_exit_codes() {
    let m = model();
    let out = m.dir.path().join("out.safetensors");
    let with = |extra: &[&str]| {
        let mut v = a!["compress", m.path, "-o", out].to_vec();
        v.extend(extra.iter().map(OsString::from));
        v
    };
    fails(
        &with(&["-f", "zip"]),
        6,
        &["unknown format \"zip\"", "spqr"],
    );
    fails(
        &with(&["-f", "sbvr", "--variant", "n9"]),
        6,
        &["no variant \"n9\"", "n4"],
    );
    fails(
        &with(&["-f", "spqr", "--tensor", "codes.int8"]),
        7,
        &["codes.int8", "cannot be compressed with spqr", "I8"],
    );
    fails(
        &with(&["-f", "spqr", "--tensor", "layer.0.bias"]),
        7,
        &["layer.0.bias", "1-D"],
    );
    fails(
        &with(&["-f", "beam", "--strict", "--min-elements", "64"]),
        7,
        &["codes.int8", "beam"],
    );
    fails(
        &with(&["-f", "spqr", "--tensor", "no.such"]),
        7,
        &["no tensor \"no.such\""],
    );
    assert!(!out.exists(), "a failed compress writes nothing");
    // A malformed command line: clap's message on one line, exit code 2.
    fails(
        &a!["compress", "--format"],
        2,
        &["--format <FORMAT>", "--help"],
    );
    fails(
        &with(&["-f", "spqr", "--frobnicate"]),
        2,
        &["unexpected argument '--frobnicate'"],
    );
    fails(
        &a!["compress", m.path],
        2,
        &["required arguments were not provided"],
    );
    fails(&a!["zip"], 2, &["unrecognized subcommand"]);
}

#[test]
fn help_has_examples() {
    for sub in [
        None,
        Some("compress"),
        Some("inspect"),
        Some("decompress"),
        Some("eval"),
    ] {
        let mut c = cmv();
        if let Some(s) = sub {
            c.arg(s);
        }
        c.arg("--help")
            .assert()
            .success()
            .stdout(predicate::str::contains("Examples:"));
    }
    cmv().arg("formats").assert().success().stdout(
        predicate::str::contains("takes: I8 tensors and GGUF Q8_0 tensors")
            .and(predicate::str::contains("compress --calibrate: used")),
    );
}

const TOKENS: &[&str] = &[
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "sat", "on", "mat", "dog", "ran", "a", "##s",
    ".", "!", "weather", "is", "lovely", "today",
];

/// A tiny BERT (hidden 32, 2 heads, 2 layers, intermediate 64, 16 positions) with seeded
/// weights, its `tokenizer.json` and a sentences file.
fn bert(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let (h, inter, vocab, pos) = (32usize, 64usize, 24usize, 16usize);
    let mut tensors: Vec<(String, Vec<usize>, Vec<f32>)> = Vec::new();
    let mut seed = 100;
    let mut add = |name: String, shape: Vec<usize>, offset: f32| {
        seed += 1;
        let n = shape.iter().product();
        let v = weights(seed, n).iter().map(|x| x + offset).collect();
        tensors.push((name, shape, v));
    };
    add(
        "embeddings.word_embeddings.weight".into(),
        vec![vocab, h],
        0.0,
    );
    add(
        "embeddings.position_embeddings.weight".into(),
        vec![pos, h],
        0.0,
    );
    add(
        "embeddings.token_type_embeddings.weight".into(),
        vec![2, h],
        0.0,
    );
    add("embeddings.LayerNorm.weight".into(), vec![h], 1.0);
    add("embeddings.LayerNorm.bias".into(), vec![h], 0.0);
    for l in 0..2 {
        let p = format!("encoder.layer.{l}");
        for (name, out, inp) in [
            ("attention.self.query", h, h),
            ("attention.self.key", h, h),
            ("attention.self.value", h, h),
            ("attention.output.dense", h, h),
            ("intermediate.dense", inter, h),
            ("output.dense", h, inter),
        ] {
            add(format!("{p}.{name}.weight"), vec![out, inp], 0.0);
            add(format!("{p}.{name}.bias"), vec![out], 0.0);
        }
        for name in ["attention.output.LayerNorm", "output.LayerNorm"] {
            add(format!("{p}.{name}.weight"), vec![h], 1.0);
            add(format!("{p}.{name}.bias"), vec![h], 0.0);
        }
    }
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .into_iter()
        .map(|(n, s, v)| (n, s, v.iter().flat_map(|x| x.to_le_bytes()).collect()))
        .collect();
    let views: Vec<(&str, TensorView<'_>)> = bytes
        .iter()
        .map(|(n, s, b)| {
            let v = TensorView::new(Dtype::F32, s.clone(), b).expect("view");
            (n.as_str(), v)
        })
        .collect();
    let model = dir.join("bert.safetensors");
    safetensors::serialize_to_file(views, None, &model).expect("write bert");
    let vocab: serde_json::Map<String, serde_json::Value> = TOKENS
        .iter()
        .enumerate()
        .map(|(i, t)| ((*t).to_owned(), serde_json::Value::from(i)))
        .collect();
    let tok = serde_json::json!({
        "normalizer": {"type": "BertNormalizer", "lowercase": true},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab},
    });
    let tok_path = dir.join("tokenizer.json");
    std::fs::write(&tok_path, tok.to_string()).expect("write tokenizer");
    let sentences = dir.join("sentences.txt");
    std::fs::write(
        &sentences,
        "The cat sat on the mat.\nThe dog ran!\n\nThe weather is lovely today.\nCats sat on a dog.\n",
    )
    .expect("write sentences");
    (model, tok_path, sentences)
}

#[test]
fn sentence_embeddings_are_compared() {
    let dir = TempDir::new().expect("temp dir");
    let (model, tok, sentences) = bert(dir.path());
    let eval = |compressed: &Path| {
        json(
            cmv()
                .arg("eval")
                .arg(&model)
                .arg(compressed)
                .arg("--tokenizer")
                .arg(&tok)
                .arg("--sentences")
                .arg(&sentences)
                .args(["--heads", "2", "--json"]),
        )
    };
    // RTN baselines on the tensors the compressed file holds, with embeddings.
    let out = dir.path().join("bert.rtn-test.safetensors");
    cmv()
        .arg("compress")
        .arg(&model)
        .args(["-f", "sbvr", "--min-elements", "512", "-q", "-o"])
        .arg(&out)
        .assert()
        .success();
    let r = json(
        cmv()
            .arg("eval")
            .arg(&model)
            .arg(&out)
            .arg("--tokenizer")
            .arg(&tok)
            .args(["--heads", "2", "--json", "--rtn", "8:32", "--rtn", "2:16"]),
    );
    let b = r["baselines"].as_array().expect("baselines");
    assert_eq!(b.len(), 2);
    assert_eq!(b[0]["name"], "rtn8 g32");
    // 32 columns or 64: whole groups, 8 + 32 / 32 bits.
    assert_eq!(b[0]["bits_per_weight"].as_f64(), Some(9.0));
    assert_eq!(b[0]["tensors"], r["counted_tensors"]);
    let (e8, e2) = (
        b[0]["mean_relative_error"].as_f64().expect("err"),
        b[1]["mean_relative_error"].as_f64().expect("err"),
    );
    assert!(0.0 < e8 && e8 < 0.02 && e8 < e2 && e2 < 1.0, "{e8} {e2}");
    let c8 = b[0]["embeddings"]["mean_cosine"].as_f64().expect("cos");
    assert!(c8 > 0.99 && c8 <= 1.0 + 1e-9, "{c8}");
    cmv()
        .arg("eval")
        .arg(&model)
        .arg(&out)
        .args(["--rtn", "4:128"])
        .assert()
        .success()
        .stdout(predicate::str::contains("rtn4 g128"));
    cmv()
        .arg("eval")
        .arg(&model)
        .arg(&out)
        .args(["--rtn", "9:128"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("BITS:GROUP"));

    // The model against itself: every embedding identical.
    let same = eval(&model);
    let e = &same["embeddings"];
    assert_eq!(e["sentences"].as_array().expect("rows").len(), 4);
    assert_eq!(e["mean_cosine"].as_f64(), Some(1.0));
    assert_eq!(e["sentences"][0]["tokens"].as_u64(), Some(9));

    for format in formats() {
        let out = dir.path().join(format!("bert.{format}.safetensors"));
        cmv()
            .arg("compress")
            .arg(&model)
            .args(["-f", &format, "--min-elements", "512", "-q", "-o"])
            .arg(&out)
            .assert()
            .success();
        let r = eval(&out);
        let mean = r["embeddings"]["mean_cosine"].as_f64().expect("mean");
        assert!(mean > 0.5 && mean <= 1.0 + 1e-9, "{format}: {mean}");
        // Compressed models embed too; a sentence is most similar to itself.
        let v = json(
            cmv()
                .arg("embed")
                .arg(&out)
                .arg("--tokenizer")
                .arg(&tok)
                .args(["--heads", "2", "--json", "the cat sat", "a dog ran"]),
        );
        let sim = &v["similarities"];
        assert!(
            (sim[0][0].as_f64().expect("sim") - 1.0).abs() < 1e-6,
            "{format}"
        );
        assert!(sim[0][1].as_f64().expect("sim") < 1.0 - 1e-6, "{format}");
    }
    cmv()
        .arg("embed")
        .arg(&model)
        .arg("--tokenizer")
        .arg(&tok)
        .args(["--heads", "2", "the cat sat", "a dog ran"])
        .assert()
        .success()
        .stdout(predicate::str::contains("[1] a dog ran").and(predicate::str::contains("1.0000")));
}

#[test]
fn embedding_errors_have_their_exit_codes() {
    let dir = TempDir::new().expect("temp dir");
    let d = dir.path();
    let (model, tok, _) = bert(d);
    let missing = d.join("missing.json");
    fails(
        &a!["eval", model, model, "--heads", "2", "--tokenizer", missing],
        3,
        &["cannot read", "missing.json"],
    );
    let text = d.join("text.json");
    std::fs::write(&text, "not json").expect("write");
    fails(
        &a!["eval", model, model, "--heads", "2", "--tokenizer", text],
        11,
        &["not JSON"],
    );
    let bpe = d.join("bpe.json");
    std::fs::write(&bpe, r#"{"model": {"type": "BPE"}}"#).expect("write");
    fails(
        &a!["eval", model, model, "--heads", "2", "--tokenizer", bpe],
        11,
        &["not WordPiece"],
    );
    let m = super_model(d);
    fails(
        &a!["eval", m, m, "--tokenizer", tok],
        11,
        &["not a BERT sentence encoder", "word_embeddings"],
    );
    fails(
        &a!["eval", model, model, "--heads", "5", "--tokenizer", tok],
        11,
        &["heads do not divide"],
    );
    fails(
        &a![
            "eval",
            model,
            model,
            "--heads",
            "2",
            "--tokenizer",
            tok,
            "--max-tokens",
            "1"
        ],
        11,
        &["no room for [CLS] and [SEP]"],
    );
    let empty = d.join("empty.txt");
    std::fs::write(&empty, "\n\n").expect("write");
    fails(
        &a![
            "eval",
            model,
            model,
            "--heads",
            "2",
            "--tokenizer",
            tok,
            "--sentences",
            empty
        ],
        11,
        &["holds no sentence"],
    );
}

/// The weights-only test model, in `dir`.
fn super_model(dir: &Path) -> PathBuf {
    let m = model();
    let to = dir.join("plain.safetensors");
    std::fs::copy(&m.path, &to).expect("copy");
    to
}

/// A GGUF (version 3) file: metadata of several value types, then `tensors` as
/// `(name, ggml type, dims with ne0 first, data)`, aligned to 32 bytes.
fn write_gguf(path: &Path, tensors: &[(&str, u32, Vec<u64>, Vec<u8>)]) {
    fn string(out: &mut Vec<u8>, s: &str) {
        out.extend((s.len() as u64).to_le_bytes());
        out.extend(s.as_bytes());
    }
    let mut out = b"GGUF".to_vec();
    out.extend(3u32.to_le_bytes());
    out.extend((tensors.len() as u64).to_le_bytes());
    out.extend(4u64.to_le_bytes());
    string(&mut out, "general.architecture");
    out.extend(8u32.to_le_bytes());
    string(&mut out, "test");
    string(&mut out, "general.alignment");
    out.extend(4u32.to_le_bytes());
    out.extend(32u32.to_le_bytes());
    string(&mut out, "test.numbers");
    out.extend(9u32.to_le_bytes());
    out.extend(4u32.to_le_bytes());
    out.extend(3u64.to_le_bytes());
    for v in [1u32, 2, 3] {
        out.extend(v.to_le_bytes());
    }
    string(&mut out, "tokenizer.ggml.tokens");
    out.extend(9u32.to_le_bytes());
    out.extend(8u32.to_le_bytes());
    out.extend(2u64.to_le_bytes());
    string(&mut out, "a");
    string(&mut out, "bb");
    let mut offset = 0u64;
    let mut offsets = Vec::new();
    for (name, ty, dims, data) in tensors {
        string(&mut out, name);
        out.extend((dims.len() as u32).to_le_bytes());
        for d in dims {
            out.extend(d.to_le_bytes());
        }
        out.extend(ty.to_le_bytes());
        out.extend(offset.to_le_bytes());
        offsets.push(offset);
        offset = (offset + data.len() as u64).div_ceil(32) * 32;
    }
    let start = out.len().div_ceil(32) * 32;
    out.resize(start, 0);
    for ((_, _, _, data), off) in tensors.iter().zip(offsets) {
        out.resize(start + off as usize, 0);
        out.extend(data);
    }
    std::fs::write(path, out).expect("write gguf");
}

/// Q8_0 blocks of `w` (a multiple of 32 values): fp16 `d = max|w| / 127`, int8 values.
fn q8_0(w: &[f32]) -> Vec<u8> {
    let mut out = Vec::new();
    for block in w.chunks(32) {
        let max = block.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = f16::from_f32(max / 127.0);
        out.extend(d.to_le_bytes());
        for v in block {
            let q = if d.to_f32() == 0.0 {
                0
            } else {
                (v / d.to_f32()).round().clamp(-127.0, 127.0) as i8
            };
            out.push(q as u8);
        }
    }
    out
}

fn gguf_model(dir: &Path) -> PathBuf {
    let path = dir.join("model.gguf");
    let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    write_gguf(
        &path,
        &[
            (
                "blk.0.attn_q.weight",
                0,
                vec![130, 67],
                f32s(&weights(11, 67 * 130)),
            ),
            (
                "blk.0.ffn_up.weight",
                1,
                vec![96, 40],
                weights(12, 40 * 96)
                    .iter()
                    .flat_map(|&x| f16::from_f32(x).to_le_bytes())
                    .collect(),
            ),
            (
                "blk.0.ffn_down.weight",
                8,
                vec![128, 48],
                q8_0(&weights(13, 48 * 128)),
            ),
            (
                "blk.0.attn_norm.weight",
                0,
                vec![67],
                f32s(&weights(14, 67)),
            ),
        ],
    );
    path
}

#[test]
fn gguf_models_compress_and_q8_0_stays_exact_in_int8_formats() {
    let dir = TempDir::new().expect("temp dir");
    let model = gguf_model(dir.path());
    let report = json(cmv().arg("inspect").arg(&model).arg("--json"));
    let rows = report["tensors"].as_array().expect("rows");
    let row = |name: &str| {
        rows.iter()
            .find(|r| r["name"] == name)
            .expect("row")
            .clone()
    };
    assert_eq!(
        row("blk.0.attn_q.weight")["shape"],
        serde_json::json!([67, 130])
    );
    assert_eq!(row("blk.0.ffn_down.weight")["dtype"], "F32");
    assert_eq!(row("blk.0.ffn_up.weight")["dtype"], "F16");

    for format in formats() {
        let out = dir.path().join(format!("gguf.{format}.safetensors"));
        cmv()
            .arg("compress")
            .arg(&model)
            .args(["-f", &format, "--min-elements", "64", "-q", "-o"])
            .arg(&out)
            .assert()
            .success()
            .stdout(predicate::str::contains("blk.0.attn_norm.weight: 1-D"));
        let inspect = json(cmv().arg("inspect").arg(&out).arg("--json"));
        let q8_row = inspect["tensors"]
            .as_array()
            .expect("rows")
            .iter()
            .find(|r| r["name"] == "blk.0.ffn_down.weight")
            .expect("row")
            .clone();
        let e = json(cmv().arg("eval").arg(&model).arg(&out).arg("--json"));
        let err = |name: &str| {
            e["tensors"]
                .as_array()
                .expect("rows")
                .iter()
                .find(|r| r["name"] == name)
                .expect("row")["relative_error"]
                .as_f64()
                .expect("err")
        };
        if q8_row["input"] == "int8-blocks" {
            assert_eq!(err("blk.0.ffn_down.weight"), 0.0, "{format}");
            let dec = dir.path().join(format!("gguf.{format}.dec.safetensors"));
            cmv()
                .arg("decompress")
                .arg(&out)
                .arg("-o")
                .arg(&dec)
                .assert()
                .success();
            let e2 = json(cmv().arg("eval").arg(&model).arg(&dec).arg("--json"));
            let d = e2["tensors"]
                .as_array()
                .expect("rows")
                .iter()
                .find(|r| r["name"] == "blk.0.ffn_down.weight")
                .expect("row")["relative_error"]
                .as_f64();
            assert_eq!(d, Some(0.0), "{format}");
        } else {
            assert_eq!(q8_row["input"], "float", "{format}");
            let x = err("blk.0.ffn_down.weight");
            assert!(x > 0.0 && x < LOSSY_BOUND, "{format}: {x}");
        }
        let x = err("blk.0.attn_q.weight");
        assert!(x > 0.0 && x < LOSSY_BOUND, "{format}: {x}");
    }
    // The int8 formats do take the Q8_0 tensor exactly.
    for format in ["ans", "beam"] {
        let inspect = json(
            cmv()
                .arg("inspect")
                .arg(dir.path().join(format!("gguf.{format}.safetensors")))
                .arg("--json"),
        );
        assert!(
            inspect["tensors"]
                .as_array()
                .expect("rows")
                .iter()
                .any(|r| r["input"] == "int8-blocks"),
            "{format}"
        );
    }
}

#[test]
fn unreadable_gguf_files_have_exit_code_4() {
    let dir = TempDir::new().expect("temp dir");
    let model = gguf_model(dir.path());
    let bytes = std::fs::read(&model).expect("read");
    let cut = dir.path().join("cut.gguf");
    std::fs::write(&cut, &bytes[..bytes.len() - 50]).expect("write");
    fails(&a!["inspect", cut], 4, &["not a GGUF file", "truncated"]);
    let head = dir.path().join("head.gguf");
    std::fs::write(&head, &bytes[..60]).expect("write");
    fails(&a!["inspect", head], 4, &["not a GGUF file", "truncated"]);
    let k_quant = dir.path().join("q4k.gguf");
    write_gguf(&k_quant, &[("blk.0.w", 12, vec![256, 2], vec![0u8; 288])]);
    fails(&a!["inspect", k_quant], 4, &["ggml type 12", "Q8_0"]);
    let v1 = dir.path().join("v1.gguf");
    let mut old = bytes.clone();
    old[4..8].copy_from_slice(&1u32.to_le_bytes());
    std::fs::write(&v1, old).expect("write");
    fails(&a!["inspect", v1], 4, &["version 1"]);
}

#[test]
fn calibration_records_the_layers_inputs() {
    let dir = TempDir::new().expect("temp dir");
    let (model, tok, sentences) = bert(dir.path());
    for format in formats() {
        let out = dir.path().join(format!("bert.{format}.cal.safetensors"));
        let assert = cmv()
            .arg("compress")
            .arg(&model)
            .args(["-f", &format, "--min-elements", "512", "-q", "--heads", "2"])
            .arg("--calibrate")
            .arg(&tok)
            .arg("--calibration-sentences")
            .arg(&sentences)
            .arg("-o")
            .arg(&out)
            .assert()
            .success();
        let stdout = String::from_utf8_lossy(&assert.get_output().stdout).into_owned();
        let report = json(cmv().arg("inspect").arg(&out).arg("--json"));
        let rows = report["tensors"].as_array().expect("rows");
        let calibrated: Vec<&str> = rows
            .iter()
            .filter(|r| r["calibrated"] == true)
            .map(|r| r["name"].as_str().expect("name"))
            .collect();
        if format == "spqr" || format == "vq" {
            // Every linear layer (2 layers x 6), not the embedding tables.
            assert!(
                stdout.contains("calibrated 12 of them"),
                "{format}: {stdout}"
            );
            assert_eq!(calibrated.len(), 12, "{format}: {calibrated:?}");
            assert!(calibrated.iter().all(|n| n.starts_with("encoder.layer.")));
        } else {
            assert!(
                stdout.contains("takes no calibration"),
                "{format}: {stdout}"
            );
            assert!(calibrated.is_empty());
        }
        let e = json(
            cmv()
                .arg("eval")
                .arg(&model)
                .arg(&out)
                .arg("--tokenizer")
                .arg(&tok)
                .args(["--heads", "2", "--json"]),
        );
        let mean = e["embeddings"]["mean_cosine"].as_f64().expect("mean");
        assert!(mean > 0.5 && mean <= 1.0 + 1e-9, "{format}: {mean}");
    }
    // The weights-only test model is no BERT.
    let plain = super_model(dir.path());
    let out = dir.path().join("x.safetensors");
    fails(
        &a![
            "compress",
            plain,
            "-f",
            "spqr",
            "--calibrate",
            tok,
            "-o",
            out
        ],
        11,
        &["not a BERT sentence encoder"],
    );
    assert!(!out.exists());
}

/// Flips bytes over compressed files (header, metadata, containers, scales, plain tensors): `inspect` and `decompress` either succeed or fail with exit code 4 or 5 and one
/// line, never a panic. A flip inside a container or a scales tensor is always caught.
#[test]
fn mutated_files_never_panic() {
    let m = model();
    for format in formats() {
        let out = m.dir.path().join(format!("{format}.safetensors"));
        compress(&m, &format, &out);
        let good = std::fs::read(&out).expect("read");
        let (header_len, checked): (usize, Vec<(usize, usize)>) = {
            let st = SafeTensors::deserialize(&good).expect("safetensors");
            let n = u64::from_le_bytes(good[..8].try_into().expect("8 bytes")) as usize + 8;
            let report = json(cmv().arg("inspect").arg(&out).arg("--json"));
            let mut ranges = Vec::new();
            for r in report["tensors"].as_array().expect("rows") {
                if r["format"].is_null() {
                    continue;
                }
                let name = r["name"].as_str().expect("name");
                for t in [name.to_owned(), format!("{name}.cmv_scales")] {
                    if let Ok(v) = st.tensor(&t) {
                        let start = v.data().as_ptr() as usize - good.as_ptr() as usize;
                        ranges.push((start, start + v.data().len()));
                    }
                }
            }
            (n, ranges)
        };
        let bad = m.dir.path().join(format!("{format}.bad.safetensors"));
        let dec = m.dir.path().join(format!("{format}.bad.dec.safetensors"));
        // The header's first bytes, 40 bytes spread over the file, and the first, a middle
        // and the last byte of every container and scales tensor.
        let step = (good.len() / 40).max(1);
        let positions: Vec<usize> = (0..16)
            .chain((16..good.len()).step_by(step))
            .chain(checked.iter().flat_map(|&(s, e)| [s, (s + e) / 2, e - 1]))
            .collect();
        for &i in &positions {
            let mut b = good.clone();
            b[i] ^= 0x24;
            std::fs::write(&bad, &b).expect("write");
            let _ = std::fs::remove_file(&dec);
            for args in [
                a!["inspect", bad].to_vec(),
                a!["decompress", bad, "-o", dec, "--force"].to_vec(),
            ] {
                let o = cmv().args(&args).output().expect("run");
                let stderr = String::from_utf8_lossy(&o.stderr);
                let code = o.status.code();
                assert!(
                    matches!(code, Some(0 | 4 | 5)),
                    "{format} byte {i}: {code:?} {stderr}"
                );
                assert!(!stderr.contains("panicked") && !stderr.contains("internal error"));
                if code != Some(0) {
                    assert_eq!(stderr.lines().count(), 1, "{stderr}");
                }
                let in_checked = checked.iter().any(|&(s, e)| (s..e).contains(&i));
                if in_checked {
                    assert_eq!(code, Some(5), "{format} byte {i} (header {header_len})");
                }
            }
        }
    }
}

/// The same model and options give the same file, byte for byte.
#[test]
fn compression_is_reproducible() {
    let m = model();
    for format in formats() {
        let (p1, p2) = (
            m.dir.path().join(format!("{format}.1.safetensors")),
            m.dir.path().join(format!("{format}.2.safetensors")),
        );
        compress(&m, &format, &p1);
        compress(&m, &format, &p2);
        assert!(
            std::fs::read(&p1).expect("read") == std::fs::read(&p2).expect("read"),
            "{format}"
        );
    }
}

#[test]
fn int8_error_sets_the_step_of_the_int8_formats() {
    let m = model();
    for (format, target) in [("ans", 0.05), ("beam", 0.1)] {
        let out = m.dir.path().join(format!("model.{format}.err.safetensors"));
        cmv()
            .arg("compress")
            .arg(&m.path)
            .args(["--format", format, "--min-elements", "64", "-q"])
            .args(["--int8-error", &target.to_string(), "-o"])
            .arg(&out)
            .assert()
            .success();
        let e = json(cmv().arg("eval").arg(&m.path).arg(&out).arg("--json"));
        let mut float_rows = 0;
        for t in e["tensors"].as_array().expect("rows") {
            let err = t["relative_error"].as_f64().expect("finite error");
            // Each row meets the target, so each tensor does; absmax scales would give about
            // 0.01 on these weights, so the error shows the target was used.
            assert!(err <= target * 1.0001, "{format} {}: {err}", t["name"]);
            if err > target * 0.5 {
                float_rows += 1;
            }
        }
        assert!(float_rows >= 2, "{format}: {e}");
    }
    // Targets outside (0, 1) are command-line errors.
    for bad in ["0", "1.5", "x"] {
        cmv()
            .arg("compress")
            .arg(&m.path)
            .args(["--format", "ans", "--int8-error", bad, "-o"])
            .arg(m.dir.path().join("never.safetensors"))
            .assert()
            .code(2)
            .stderr(predicate::str::contains("relative error"));
    }
}
