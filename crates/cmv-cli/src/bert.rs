//! A CPU forward pass of a BERT sentence encoder (all-MiniLM-L6-v2 and its kind): a BERT
//! WordPiece tokenizer read from a Hugging Face `tokenizer.json`, the encoder, mean pooling and
//! L2 normalization, as sentence-transformers computes the embedding.
//!
//! Written here rather than taken from a crate (candle-transformers' BERT would bring candle
//! and the `tokenizers` crate, hundreds of crates for a 6-layer encoder): the whole model is a
//! few matrix products, softmax, GELU and LayerNorm. It is checked against the similarities
//! sentence-transformers publishes for all-MiniLM-L6-v2 (docs/CLI.md).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

use crate::error::{CliError, Result};

/// A BERT WordPiece tokenizer (lowercasing, accents stripped, punctuation split, `[CLS] ...
/// [SEP]`), from a `tokenizer.json`.
#[derive(Debug)]
pub struct Tokenizer {
    vocab: HashMap<String, u32>,
    unk: u32,
    cls: u32,
    sep: u32,
    prefix: String,
    max_chars: usize,
    lowercase: bool,
}

impl Tokenizer {
    /// Reads a Hugging Face `tokenizer.json` with a WordPiece model.
    ///
    /// # Errors
    /// [`CliError::Read`], [`CliError::Tokenizer`].
    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| CliError::Read {
            path: path.to_owned(),
            source,
        })?;
        let bad = |reason: String| CliError::Tokenizer {
            path: path.to_owned(),
            reason,
        };
        let json: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| bad(format!("it is not JSON ({e})")))?;
        let model = &json["model"];
        if model["type"] != "WordPiece" {
            return Err(bad(format!(
                "its model type is {}, not WordPiece (a BERT tokenizer)",
                model["type"]
            )));
        }
        let vocab: HashMap<String, u32> = model["vocab"]
            .as_object()
            .ok_or_else(|| bad("it has no model.vocab object".into()))?
            .iter()
            .map(|(k, v)| {
                v.as_u64()
                    .and_then(|id| u32::try_from(id).ok())
                    .map(|id| (k.clone(), id))
                    .ok_or_else(|| bad(format!("vocabulary entry {k:?} has no integer id")))
            })
            .collect::<Result<_>>()?;
        let id = |token: &str| {
            vocab
                .get(token)
                .copied()
                .ok_or_else(|| bad(format!("its vocabulary has no {token}")))
        };
        let unk_token = model["unk_token"].as_str().unwrap_or("[UNK]");
        Ok(Self {
            unk: id(unk_token)?,
            cls: id("[CLS]")?,
            sep: id("[SEP]")?,
            prefix: model["continuing_subword_prefix"]
                .as_str()
                .unwrap_or("##")
                .to_owned(),
            max_chars: model["max_input_chars_per_word"].as_u64().unwrap_or(100) as usize,
            lowercase: json["normalizer"]["lowercase"].as_bool().unwrap_or(true),
            vocab,
        })
    }

    /// The largest token id.
    pub fn max_id(&self) -> u32 {
        self.vocab.values().copied().max().unwrap_or(0)
    }

    /// The token ids of `text`: `[CLS]`, at most `max_tokens - 2` word pieces, `[SEP]`.
    pub fn encode(&self, text: &str, max_tokens: usize) -> Vec<u32> {
        let mut ids = vec![self.cls];
        for word in self.words(text) {
            self.word_pieces(&word, &mut ids);
        }
        ids.truncate(max_tokens.max(2) - 1);
        ids.push(self.sep);
        ids
    }

    /// BERT's normalizer and pre-tokenizer: control characters dropped, CJK characters and
    /// punctuation split off, lowercased with accents stripped, split at whitespace.
    fn words(&self, text: &str) -> Vec<String> {
        let mut spaced = String::with_capacity(text.len());
        for c in text.chars() {
            if c == '\0' || c == '\u{fffd}' || (c.is_control() && !c.is_whitespace()) {
                continue;
            }
            if c.is_whitespace() {
                spaced.push(' ');
            } else if is_cjk(c) || is_punctuation(c) {
                spaced.push(' ');
                spaced.push(c);
                spaced.push(' ');
            } else {
                spaced.push(c);
            }
        }
        let normalized: String = if self.lowercase {
            spaced
                .to_lowercase()
                .nfd()
                .filter(|&c| !is_combining_mark(c))
                .collect()
        } else {
            spaced
        };
        normalized.split_whitespace().map(String::from).collect()
    }

    /// Greedy longest-match-first WordPiece.
    fn word_pieces(&self, word: &str, out: &mut Vec<u32>) {
        let chars: Vec<char> = word.chars().collect();
        if chars.len() > self.max_chars {
            out.push(self.unk);
            return;
        }
        let mut pieces = Vec::new();
        let mut start = 0;
        while start < chars.len() {
            let mut end = chars.len();
            let mut found = None;
            while start < end {
                let mut piece: String = chars[start..end].iter().collect();
                if start > 0 {
                    piece.insert_str(0, &self.prefix);
                }
                if let Some(&id) = self.vocab.get(&piece) {
                    found = Some(id);
                    break;
                }
                end -= 1;
            }
            match found {
                Some(id) => pieces.push(id),
                None => {
                    out.push(self.unk);
                    return;
                }
            }
            start = end;
        }
        out.extend(pieces);
    }
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

/// BERT's punctuation: the ASCII non-alphanumeric symbols, and the general and CJK
/// punctuation blocks (an approximation of Unicode category P for the rest).
fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation()
        || matches!(c as u32, 0x00A1..=0x00BF | 0x2010..=0x2027 | 0x2030..=0x205E | 0x3000..=0x303F | 0xFF01..=0xFF0F)
}

/// A dense `out x in` weight and its bias.
#[derive(Debug)]
struct Linear {
    /// The weight tensor's name.
    name: String,
    w: Vec<f32>,
    b: Vec<f32>,
    out: usize,
    inp: usize,
}

impl Linear {
    /// `y = W x + b` for each of the `n` rows of `x`.
    fn apply(&self, x: &[f32]) -> Vec<f32> {
        let mut y = Vec::with_capacity(x.len() / self.inp * self.out);
        for row in x.chunks_exact(self.inp) {
            for (o, w) in self.w.chunks_exact(self.inp).enumerate() {
                let dot: f32 = w.iter().zip(row).map(|(a, b)| a * b).sum();
                y.push(dot + self.b[o]);
            }
        }
        y
    }
}

#[derive(Debug)]
struct LayerNorm {
    g: Vec<f32>,
    b: Vec<f32>,
}

impl LayerNorm {
    fn apply(&self, x: &mut [f32], eps: f64) {
        for row in x.chunks_exact_mut(self.g.len()) {
            let n = row.len() as f64;
            let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
            let var = row
                .iter()
                .map(|&v| (f64::from(v) - mean).powi(2))
                .sum::<f64>()
                / n;
            let inv = 1.0 / (var + eps).sqrt();
            for ((v, g), b) in row.iter_mut().zip(&self.g).zip(&self.b) {
                *v = ((f64::from(*v) - mean) * inv) as f32 * g + b;
            }
        }
    }
}

#[derive(Debug)]
struct Layer {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    ln1: LayerNorm,
    up: Linear,
    down: Linear,
    ln2: LayerNorm,
}

/// A BERT encoder with mean pooling: the sentence-transformers embedding.
#[derive(Debug)]
pub struct Bert {
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    ln: LayerNorm,
    layers: Vec<Layer>,
    hidden: usize,
    vocab: usize,
    max_positions: usize,
    heads: usize,
    eps: f64,
}

/// The floats of a parsed (plain) file's tensors, for [`Bert::load`].
pub fn plain_source<'a>(
    p: &'a crate::tensors::Parsed<'a>,
) -> impl Fn(&str) -> Option<(Vec<usize>, Vec<f32>)> + 'a {
    move |name| {
        let t = p.tensor(name).ok()?;
        Some((t.shape.clone(), t.floats()?))
    }
}

/// Where a model's weights come from: a tensor's shape and values by name.
pub type Source<'a> = dyn Fn(&str) -> Option<(Vec<usize>, Vec<f32>)> + 'a;

impl Bert {
    /// The encoder of a BERT model's tensors (Hugging Face names, with or without a `bert.`
    /// prefix), with `heads` attention heads and LayerNorm epsilon `eps`.
    ///
    /// # Errors
    /// [`CliError::NotBert`] for a missing tensor or a shape that does not fit.
    pub fn load(path: &Path, get: &Source<'_>, heads: usize, eps: f64) -> Result<Self> {
        let bad = |reason: String| CliError::NotBert {
            path: path.to_owned(),
            reason,
        };
        let prefix = if get("bert.embeddings.word_embeddings.weight").is_some() {
            "bert."
        } else {
            ""
        };
        let tensor = |name: &str, shape: &[usize]| -> Result<Vec<f32>> {
            let full = format!("{prefix}{name}");
            let (s, v) = get(&full).ok_or_else(|| bad(format!("it has no float tensor {full}")))?;
            if s != shape {
                return Err(bad(format!("{full} has shape {s:?}, expected {shape:?}")));
            }
            Ok(v)
        };
        let (word_shape, _) = get(&format!("{prefix}embeddings.word_embeddings.weight"))
            .ok_or_else(|| bad("it has no embeddings.word_embeddings.weight".into()))?;
        let [vocab, hidden] = word_shape[..] else {
            return Err(bad(format!("word embeddings of shape {word_shape:?}")));
        };
        if vocab == 0 || hidden == 0 {
            return Err(bad(format!("word embeddings of shape {word_shape:?}")));
        }
        if heads == 0 || hidden % heads != 0 {
            return Err(bad(format!(
                "{heads} heads do not divide hidden size {hidden}"
            )));
        }
        let (pos_shape, _) = get(&format!("{prefix}embeddings.position_embeddings.weight"))
            .ok_or_else(|| bad("it has no embeddings.position_embeddings.weight".into()))?;
        let max_positions = pos_shape.first().copied().unwrap_or(0);
        let linear = |name: &str, out: usize, inp: usize| -> Result<Linear> {
            Ok(Linear {
                name: format!("{prefix}{name}.weight"),
                w: tensor(&format!("{name}.weight"), &[out, inp])?,
                b: tensor(&format!("{name}.bias"), &[out])?,
                out,
                inp,
            })
        };
        let norm = |name: &str| -> Result<LayerNorm> {
            Ok(LayerNorm {
                g: tensor(&format!("{name}.weight"), &[hidden])?,
                b: tensor(&format!("{name}.bias"), &[hidden])?,
            })
        };
        let mut layers = Vec::new();
        while get(&format!(
            "{prefix}encoder.layer.{}.attention.self.query.weight",
            layers.len()
        ))
        .is_some()
        {
            let p = format!("encoder.layer.{}", layers.len());
            let (up_shape, _) = get(&format!("{prefix}{p}.intermediate.dense.weight"))
                .ok_or_else(|| bad(format!("it has no {p}.intermediate.dense.weight")))?;
            let inter = up_shape.first().copied().unwrap_or(0);
            if inter == 0 {
                return Err(bad(format!(
                    "{p}.intermediate.dense.weight has shape {up_shape:?}"
                )));
            }
            layers.push(Layer {
                q: linear(&format!("{p}.attention.self.query"), hidden, hidden)?,
                k: linear(&format!("{p}.attention.self.key"), hidden, hidden)?,
                v: linear(&format!("{p}.attention.self.value"), hidden, hidden)?,
                o: linear(&format!("{p}.attention.output.dense"), hidden, hidden)?,
                ln1: norm(&format!("{p}.attention.output.LayerNorm"))?,
                up: linear(&format!("{p}.intermediate.dense"), inter, hidden)?,
                down: linear(&format!("{p}.output.dense"), hidden, inter)?,
                ln2: norm(&format!("{p}.output.LayerNorm"))?,
            });
        }
        if layers.is_empty() {
            return Err(bad("it has no encoder.layer.0".into()));
        }
        Ok(Self {
            word: tensor("embeddings.word_embeddings.weight", &[vocab, hidden])?,
            position: tensor(
                "embeddings.position_embeddings.weight",
                &[max_positions, hidden],
            )?,
            token_type: tensor("embeddings.token_type_embeddings.weight", &[2, hidden])
                .or_else(|_| tensor("embeddings.token_type_embeddings.weight", &[1, hidden]))?,
            ln: norm("embeddings.LayerNorm")?,
            layers,
            hidden,
            vocab,
            max_positions,
            heads,
            eps,
        })
    }

    /// The input width of the linear layer whose weight tensor is `name` (0 for none).
    pub fn input_width(&self, name: &str) -> usize {
        self.layers
            .iter()
            .flat_map(|l| [&l.q, &l.k, &l.v, &l.o, &l.up, &l.down])
            .find(|lin| lin.name == name)
            .map_or(0, |lin| lin.inp)
    }

    /// The vocabulary size.
    pub fn vocab(&self) -> usize {
        self.vocab
    }

    /// The longest input it takes.
    pub fn max_positions(&self) -> usize {
        self.max_positions
    }

    /// The embedding of one tokenized sentence: the encoder's last hidden states averaged
    /// over the tokens, L2-normalized. `ids` must be non-empty, below [`Bert::vocab`], and at
    /// most [`Bert::max_positions`] long (the caller checks).
    pub fn embed(&self, ids: &[u32]) -> Vec<f32> {
        self.forward(ids, &mut |_, _| {})
    }

    /// [`Bert::embed`], passing each linear layer's input (`tokens x in`, row-major) to
    /// `record` with the name of the layer's weight tensor.
    pub fn forward(&self, ids: &[u32], record: &mut dyn FnMut(&str, &[f32])) -> Vec<f32> {
        let h = self.hidden;
        let n = ids.len();
        let mut x = vec![0f32; n * h];
        for (t, &id) in ids.iter().enumerate() {
            let w = &self.word[id as usize * h..(id as usize + 1) * h];
            let p = &self.position[t * h..(t + 1) * h];
            for (j, v) in x[t * h..(t + 1) * h].iter_mut().enumerate() {
                *v = w[j] + p[j] + self.token_type[j];
            }
        }
        self.ln.apply(&mut x, self.eps);
        let d = h / self.heads;
        let scale = 1.0 / (d as f32).sqrt();
        for l in &self.layers {
            for lin in [&l.q, &l.k, &l.v] {
                record(&lin.name, &x);
            }
            let (q, k, v) = (l.q.apply(&x), l.k.apply(&x), l.v.apply(&x));
            let mut ctx = vec![0f32; n * h];
            let mut p = vec![0f32; n];
            for hd in 0..self.heads {
                let cols = hd * d..(hd + 1) * d;
                for i in 0..n {
                    let qi = &q[i * h..][cols.clone()];
                    for (j, pj) in p.iter_mut().enumerate() {
                        let kj = &k[j * h..][cols.clone()];
                        *pj = qi.iter().zip(kj).map(|(a, b)| a * b).sum::<f32>() * scale;
                    }
                    let max = p.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                    let mut sum = 0f32;
                    for pj in p.iter_mut() {
                        *pj = (*pj - max).exp();
                        sum += *pj;
                    }
                    let out = &mut ctx[i * h..][cols.clone()];
                    for (j, &pj) in p.iter().enumerate() {
                        let vj = &v[j * h..][cols.clone()];
                        for (o, &vv) in out.iter_mut().zip(vj) {
                            *o += pj / sum * vv;
                        }
                    }
                }
            }
            record(&l.o.name, &ctx);
            let a = l.o.apply(&ctx);
            x.iter_mut().zip(&a).for_each(|(x, a)| *x += a);
            l.ln1.apply(&mut x, self.eps);
            record(&l.up.name, &x);
            let mut m = l.up.apply(&x);
            m.iter_mut().for_each(|v| *v = gelu(*v));
            record(&l.down.name, &m);
            let o = l.down.apply(&m);
            x.iter_mut().zip(&o).for_each(|(x, o)| *x += o);
            l.ln2.apply(&mut x, self.eps);
        }
        let mut e = vec![0f64; h];
        for row in x.chunks_exact(h) {
            e.iter_mut().zip(row).for_each(|(e, &v)| *e += f64::from(v));
        }
        let norm = e.iter().map(|v| v * v).sum::<f64>().sqrt().max(1e-12);
        e.iter().map(|v| (v / norm) as f32).collect()
    }
}

/// GELU with the exact erf, as BERT's `gelu`.
fn gelu(x: f32) -> f32 {
    let x = f64::from(x);
    (0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2))) as f32
}

/// erf(x) from the Chebyshev-fitted erfc of Numerical Recipes (`erfcc`): fractional error
/// below 1.2e-7 everywhere, well below what the f32 activations carry.
fn erf(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * poly.exp();
    if x >= 0.0 { 1.0 - erfc } else { erfc - 1.0 }
}

/// Cosine similarity of two vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    let na: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na * nb)
    }
}

/// The options of the sentence-embedding forward pass, shared by `eval` and `embed`.
#[derive(Debug, Clone, clap::Args)]
pub struct ModelOpts {
    /// Sentences, one per line (default: the 32 shipped in crates/cmv-cli/data/sentences.txt).
    #[arg(long, value_name = "FILE")]
    pub sentences: Option<PathBuf>,
    /// Attention heads (all-MiniLM-L6-v2: 12).
    #[arg(long, default_value_t = 12)]
    pub heads: usize,
    /// Tokens per sentence at most, `[CLS]` and `[SEP]` included (sentence-transformers uses
    /// 256 for all-MiniLM-L6-v2).
    #[arg(long, default_value_t = 256)]
    pub max_tokens: usize,
    /// LayerNorm epsilon (BERT: 1e-12).
    #[arg(long, default_value_t = 1e-12)]
    pub layer_norm_eps: f64,
}

/// The sentences shipped with the CLI (the evaluation set).
pub const SENTENCES: &str = include_str!("../data/sentences.txt");

/// The calibration sentences shipped with the CLI (disjoint from [`SENTENCES`]).
pub const CALIBRATION: &str = include_str!("../data/calibration.txt");

/// The Gram matrices `H = sum x x^T` (f64, `in x in` row-major) of every linear layer's
/// inputs over the tokens of `ids`, by weight tensor name, and the token count.
pub fn grams(bert: &Bert, ids: &[Vec<u32>]) -> (HashMap<String, Gram>, usize) {
    use rayon::prelude::*;
    let partial = ids
        .par_iter()
        .fold(HashMap::<String, Gram>::new, |mut acc, ids| {
            bert.forward(ids, &mut |name, x| {
                let g = acc.entry(name.to_owned()).or_insert_with(|| {
                    let cols = bert.input_width(name);
                    Gram {
                        cols,
                        h: vec![0.0; cols * cols],
                    }
                });
                g.add(x);
            });
            acc
        })
        .reduce(HashMap::new, |mut a, b| {
            for (k, g) in b {
                match a.get_mut(&k) {
                    Some(x) => x.h.iter_mut().zip(&g.h).for_each(|(x, y)| *x += y),
                    None => {
                        a.insert(k, g);
                    }
                }
            }
            a
        });
    (partial, ids.iter().map(Vec::len).sum())
}

/// A Gram matrix of a layer's inputs.
#[derive(Clone, Debug)]
pub struct Gram {
    /// Its side: the layer's inputs.
    pub cols: usize,
    /// `sum x x^T`, row-major.
    pub h: Vec<f64>,
}

impl Gram {
    /// Adds the rows of `x` (`n x cols`).
    fn add(&mut self, x: &[f32]) {
        for row in x.chunks_exact(self.cols) {
            let r: Vec<f64> = row.iter().map(|&v| f64::from(v)).collect();
            for (i, &ri) in r.iter().enumerate() {
                let line = &mut self.h[i * self.cols..(i + 1) * self.cols];
                line.iter_mut().zip(&r).for_each(|(h, &rj)| *h += ri * rj);
            }
        }
    }

    /// `diag(H)`.
    pub fn diagonal(&self) -> Vec<f64> {
        (0..self.cols).map(|i| self.h[i * self.cols + i]).collect()
    }
}

/// The sentences of `file`, or the shipped ones.
///
/// # Errors
/// [`CliError::Read`], [`CliError::NoSentences`].
pub fn sentences(file: Option<&Path>) -> Result<Vec<String>> {
    let text = match file {
        None => SENTENCES.to_owned(),
        Some(p) => std::fs::read_to_string(p).map_err(|source| CliError::Read {
            path: p.to_owned(),
            source,
        })?,
    };
    let lines: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    if lines.is_empty() {
        return Err(CliError::NoSentences {
            path: file.map_or_else(|| PathBuf::from("data/sentences.txt"), Path::to_owned),
        });
    }
    Ok(lines)
}

/// Tokenizes `sentences` for `bert`.
///
/// # Errors
/// [`CliError::Tokenizer`] for a token id past the model's vocabulary, [`CliError::NotBert`]
/// when fewer than 2 tokens fit.
pub fn tokenize(
    tok: &Tokenizer,
    tok_path: &Path,
    bert: &Bert,
    sentences: &[String],
    max_tokens: usize,
) -> Result<Vec<Vec<u32>>> {
    if tok.max_id() as usize >= bert.vocab() {
        return Err(CliError::Tokenizer {
            path: tok_path.to_owned(),
            reason: format!(
                "its ids go up to {} but the model has {} word embeddings: use the model's own \
                 tokenizer.json",
                tok.max_id(),
                bert.vocab()
            ),
        });
    }
    let max = max_tokens.min(bert.max_positions());
    if max < 2 {
        return Err(CliError::NotBert {
            path: tok_path.to_owned(),
            reason: format!(
                "{max} positions leave no room for [CLS] and [SEP]: pass --max-tokens 2 or more \
                 (the model has {} position embeddings)",
                bert.max_positions()
            ),
        });
    }
    Ok(sentences.iter().map(|s| tok.encode(s, max)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_is_accurate() {
        for (x, want) in [
            (0.0, 0.0),
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (-2.0, -0.995_322_265_018_952_7),
        ] {
            assert!((erf(x) - want).abs() < 2e-7, "{x}: {}", erf(x));
        }
    }

    #[test]
    fn word_pieces_match_bert() {
        let vocab: HashMap<String, u32> = [
            "[PAD]", "[UNK]", "[CLS]", "[SEP]", "it", "'", "s", "so", "sunny", "out", "##side",
            "!", "cafe",
        ]
        .iter()
        .enumerate()
        .map(|(i, t)| ((*t).to_owned(), i as u32))
        .collect();
        let tok = Tokenizer {
            unk: vocab["[UNK]"],
            cls: vocab["[CLS]"],
            sep: vocab["[SEP]"],
            prefix: "##".into(),
            max_chars: 100,
            lowercase: true,
            vocab,
        };
        assert_eq!(
            tok.encode("It's so SUNNY outside!", 64),
            [2, 4, 5, 6, 7, 8, 9, 10, 11, 3]
        );
        assert_eq!(tok.encode("Café zzz", 64), [2, 12, 1, 3]);
        assert_eq!(tok.encode("so so so so", 4), [2, 7, 7, 3]);
    }
}
