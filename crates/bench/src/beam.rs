//! The BEAM suites (`docs/BEAM.md`, issue 13): the paper's GEMM experiment (`beam-gemm`) and
//! BEAM GEMV at the LLM shapes (`beam-gemv`).
//!
//! # `beam-gemm`: the paper's Fig. 2 and 3
//!
//! For each matrix size (square, the side chosen so that the naive layout of one operand takes
//! the size: 64 MiB is 2896 x 2896, 1 GiB is 11585 x 11585) and width `b`, `A` and `B` are
//! drawn uniform in `[0, 2^b)` and packed into each kernel's layout (guide: naive, tight:
//! tight, slabs and slabs-flex-out: slabs, nogaps, nogaps-flex-out and mma: nogaps). For each
//! output mode (strategy `sai`/`c2p2`/`maxv` x overflow `ovf`/`sat`), every kernel that takes
//! the combination ([`GemmKernel::accepts`]) runs once untimed (a kernel that refuses the
//! configuration at launch is noted and skipped, as the paper's missing points), then
//! `warmup - 1` more untimed and `iters` timed calls, each between CUDA events, rotating
//! through copies of the operands (at least two, enough for 4 x L2 where the calls are that
//! many). The time includes the launcher's zeroing of a packed output. A run whose kernel,
//! output width and overflow equal those of an earlier mode (`c2p2` = `sai` for a power-of-two
//! width, `maxv` = 64 bits = `sai` at `b = 64`) is not repeated: its row is copied, with
//! `same_run_as`.
//!
//! **Check.** A CPU reference of the whole product is out of reach (11585^3 products), so the
//! output of the last timed call is downloaded (which checks that the packing is canonical)
//! and checked twice: a sample of elements (the four corners and random positions,
//! `--beam-samples`) against exact CPU dot products (`u128` with a carry past 2^128, then the
//! same wrap or clamp as `beam_pack::gemm_reference`), and every element against the first
//! kernel's output of the same output width and overflow (bit-exact on the values, across
//! layouts). A failed check marks the row `FAILED`, leaves it out of the speedups and fails
//! the run after the files are written.
//!
//! **Report.** Per row: time (median, min, max), GB/s of the packed bytes the product touches
//! (`A` + `B` + the output, each in the kernel's layout), GMAC/s, speedup over `guide` and
//! over `tight` at the same size, width and output mode. The summary is the paper's figure:
//! per output mode and width, guide, tight, the best packed CUDA-core kernel (slabs, nogaps
//! and their flex-out versions) and mma, as speedups over guide; [`speedup_svg`] plots it.
//! The `maxv` table compares, per width, the `maxv` output width with the width of the
//! largest exact output (from a whole exact output where one was computed, else from the
//! sample: a lower bound).
//!
//! # `beam-gemv`
//!
//! `A` (`rows x cols`, the LLM shapes) packed `nogaps`, `B` the `cols x batch` inputs of the
//! same width, every output checked against exact CPU dot products before and after timing
//! (timed as every GEMV suite is, [`crate::Timing`], the weights rotated through copies).
//! Rows relate the time to the read ceiling on the packed bytes, to a same-size read, and to
//! the dense baselines where the values fit them: int8 for `b <= 8` (same or fewer bytes per
//! weight), fp16 (ours and cuBLAS) for `b <= 11` (integers up to 2^11 are exact in fp16).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

use beam_pack::cmv_format::{FormatError, HeaderCode};
use beam_pack::gpu::{
    BeamGemm, BeamGemv, DeviceBeamMatrix, DeviceBeamOut, GemmKernel, GemvPath, GemvPrep,
};
use beam_pack::{BeamError, Layout, OperandStats, OutputWidth, Overflow, PackedMatrix};
use cmv_runtime::{Gpu, RuntimeError, rotation_copies, time_launches};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::dense::{Baseline, Baselines};
use crate::{BenchError, Part, Row, RowTimes};

/// The GEMM suite's name.
pub const GEMM_SUITE: &str = "beam-gemm";
/// The GEMV suite's name.
pub const GEMV_SUITE: &str = "beam-gemv";

/// The GEMM sizes of the paper: the naive layout of one operand takes 64 MiB and 1 GiB.
pub const DEFAULT_SIZES: &str = "64MiB,1GiB";
/// The GEMM widths: all of them.
pub const DEFAULT_GEMM_BITS: &str = "1-64";
/// Every output mode (the paper's grid).
pub const DEFAULT_GEMM_OUTPUTS: &str = "sai/ovf,c2p2/ovf,maxv/ovf,sai/sat,c2p2/sat,maxv/sat";
/// The GEMV widths.
pub const DEFAULT_GEMV_BITS: &str = "1,2,3,4,6,8,12,16,24,32";
/// The GEMV output modes.
pub const DEFAULT_GEMV_OUTPUTS: &str = "sai/ovf,sai/sat,c2p2/ovf";

/// The seven LLM shapes (rows, cols) of the GEMV suite: [`crate::SHAPES`] without the
/// 8192 x 8192 square.
pub fn gemv_shapes() -> Vec<(usize, usize)> {
    crate::SHAPES
        .iter()
        .copied()
        .filter(|&s| s != (8192, 8192))
        .collect()
}

/// The layout the GEMV weights and inputs are packed in (the fast GEMV kernels stream
/// `nogaps`).
pub const GEMV_LAYOUT: Layout = Layout::Nogaps;

/// The layout of the GEMV output: `naive`, which the kernels write whole, so that no call pays
/// for the zeroing a packed output needs (the output is `rows x batch` words, small next to
/// the weights).
pub const GEMV_OUT_LAYOUT: Layout = Layout::Naive;

/// Kernels of the "best packed" line: the paper's compressed CUDA-core kernels.
pub const PACKED_FAMILY: [&str; 4] = ["slabs", "slabs-flex-out", "nogaps", "nogaps-flex-out"];

// ---------------------------------------------------------------------------------------------
// Arguments.

/// A GEMM size: the label as given (`64MiB`) and the side of the square matrices.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GemmSize {
    /// As given on the command line.
    pub label: String,
    /// Rows = columns of `A`, `B` and the output.
    pub side: usize,
}

/// The largest `s` with `s * s <= v`.
fn isqrt(v: u64) -> u64 {
    let mut s = (v as f64).sqrt() as u64;
    while s.checked_mul(s).is_none_or(|q| q > v) {
        s -= 1;
    }
    while (s + 1).checked_mul(s + 1).is_some_and(|q| q <= v) {
        s += 1;
    }
    s
}

/// Parses a size: `64MiB`, `1GiB`, `512KiB` (bytes of one operand in the naive layout, 8 per
/// element: the side is the largest whose square fits) or a plain side (`1024`).
///
/// # Errors
/// A message for anything else, or a side of 0.
pub fn parse_size(s: &str) -> Result<GemmSize, String> {
    let t = s.trim();
    let (num, unit) = match t.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => (&t[..i], &t[i..]),
        None => (t, ""),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("size {s:?}: expected a number with KiB, MiB, GiB, or a side"))?;
    let shift = match unit {
        "" => None,
        "KiB" => Some(10),
        "MiB" => Some(20),
        "GiB" => Some(30),
        _ => return Err(format!("size {s:?}: unit must be KiB, MiB or GiB")),
    };
    let side = match shift {
        None => n,
        Some(sh) => isqrt(n.checked_shl(sh).unwrap_or(u64::MAX) / 8),
    };
    if side == 0 {
        return Err(format!("size {s:?} is empty"));
    }
    Ok(GemmSize {
        label: t.to_string(),
        side: side as usize,
    })
}

/// Parses widths: `1-64`, `1,2,4,8`, `1-8,16,32`; each 1 to 64; repeats are dropped.
///
/// # Errors
/// A message for a malformed item or a width outside 1..=64.
pub fn parse_bits(s: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let num = |x: &str| -> Result<u32, String> {
            match x.trim().parse::<u32>() {
                Ok(b) if (1..=64).contains(&b) => Ok(b),
                _ => Err(format!("width {x:?} is not a number from 1 to 64")),
            }
        };
        let (lo, hi) = match item.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(item)?, num(item)?),
        };
        if lo > hi {
            return Err(format!("width range {item:?} is empty"));
        }
        for b in lo..=hi {
            if !out.contains(&b) {
                out.push(b);
            }
        }
    }
    if out.is_empty() {
        return Err("no widths given".into());
    }
    Ok(out)
}

/// An output mode: the output width strategy and the overflow behaviour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OutputMode {
    /// `sai`, `c2p2` or `maxv`.
    pub width: OutputWidth,
    /// `ovf` or `sat`.
    pub overflow: Overflow,
}

impl OutputMode {
    /// `sai/ovf`.
    pub fn name(self) -> String {
        format!("{}/{}", self.width.name(), self.overflow.name())
    }
}

/// Parses output modes: `sai/ovf,maxv/sat`, or `all` (the six).
///
/// # Errors
/// A message naming the unknown strategy or overflow behaviour.
pub fn parse_outputs(s: &str) -> Result<Vec<OutputMode>, String> {
    let s = if s.trim() == "all" {
        DEFAULT_GEMM_OUTPUTS
    } else {
        s
    };
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (w, o) = item
            .split_once('/')
            .ok_or_else(|| format!("output {item:?} is not STRATEGY/OVERFLOW, e.g. sai/ovf"))?;
        let width = OutputWidth::from_name(w)
            .ok_or_else(|| format!("output {item:?}: strategy must be sai, c2p2 or maxv"))?;
        let overflow = Overflow::from_name(o)
            .ok_or_else(|| format!("output {item:?}: overflow must be ovf or sat"))?;
        let m = OutputMode { width, overflow };
        if !out.contains(&m) {
            out.push(m);
        }
    }
    if out.is_empty() {
        return Err("no output modes given".into());
    }
    Ok(out)
}

/// Parses GEMM kernel names (`guide,tight,slabs,...`, or `all`).
///
/// # Errors
/// A message listing the kernels.
pub fn parse_kernels(s: &str) -> Result<Vec<GemmKernel>, String> {
    if s.trim() == "all" {
        return Ok(GemmKernel::ALL.to_vec());
    }
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let k = GemmKernel::from_name(item).ok_or_else(|| {
            format!(
                "kernel {item:?} is unknown; the kernels are {}",
                kernel_names(GemmKernel::ALL).join(", ")
            )
        })?;
        if !out.contains(&k) {
            out.push(k);
        }
    }
    if out.is_empty() {
        return Err("no kernels given".into());
    }
    Ok(out)
}

fn kernel_names(ks: &[GemmKernel]) -> Vec<String> {
    ks.iter().map(|k| k.name().to_string()).collect()
}

/// The layout a kernel's operands and output are packed in, in this suite.
pub fn kernel_layout(k: GemmKernel) -> Layout {
    match k {
        GemmKernel::Guide => Layout::Naive,
        GemmKernel::Tight => Layout::Tight,
        GemmKernel::Slabs | GemmKernel::SlabsFlexOut => Layout::Slabs,
        GemmKernel::Nogaps | GemmKernel::NogapsFlexOut | GemmKernel::Mma => Layout::Nogaps,
    }
}

// ---------------------------------------------------------------------------------------------
// Data and exact arithmetic.

const BLOCK: usize = 1 << 16;

/// `n` values uniform in `[0, 2^bits)`, reproducible from `seed`, generated in parallel.
pub fn uniform_values(n: usize, bits: u32, seed: u64) -> Vec<u64> {
    let shift = 64 - bits.clamp(1, 64);
    let blocks: Vec<Vec<u64>> = (0..n.div_ceil(BLOCK))
        .into_par_iter()
        .map(|blk| {
            let mut rng =
                SmallRng::seed_from_u64(seed ^ (blk as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let len = BLOCK.min(n - blk * BLOCK);
            (0..len).map(|_| rng.r#gen::<u64>() >> shift).collect()
        })
        .collect();
    let mut v = Vec::with_capacity(n);
    for b in blocks {
        v.extend(b);
    }
    v
}

/// The seed of an operand.
fn seed(parts: &[u64]) -> u64 {
    parts.iter().fold(0xBEA4_5EED_u64, |h, &p| {
        (h ^ p).wrapping_mul(0x0100_0000_01B3).rotate_left(17)
    })
}

/// An exact dot product: the sum modulo 2^128 and whether the exact sum reached 2^128.
pub type Exact = (u128, bool);

/// Row `a_row` (`k` values) times column `j` of `b` (`k x n`, row-major), exactly.
pub fn exact_dot(a_row: &[u64], b: &[u64], n: usize, j: usize) -> Exact {
    let mut acc = 0u128;
    let mut huge = false;
    for (t, &x) in a_row.iter().enumerate() {
        let (s, carry) = acc.overflowing_add(u128::from(x) * u128::from(b[t * n + j]));
        acc = s;
        huge |= carry;
    }
    (acc, huge)
}

/// An exact sum wrapped (`ovf`, modulo 2^bits) or clamped (`sat`, at 2^bits - 1) to `bits`:
/// what `beam_pack::gemm_reference` does to each output.
pub fn finish(exact: Exact, bits: u32, overflow: Overflow) -> u64 {
    let (acc, huge) = exact;
    let m = if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    match overflow {
        Overflow::Ovf => (acc as u64) & m,
        Overflow::Sat => {
            if huge || acc > u128::from(m) {
                m
            } else {
                acc as u64
            }
        }
    }
}

/// Bits an exact sum needs (129 when it reached 2^128; at least 1).
pub fn exact_width(exact: Exact) -> u32 {
    match exact {
        (_, true) => 129,
        (0, false) => 1,
        (v, false) => 128 - v.leading_zeros(),
    }
}

/// The bound `maxv` uses (`docs/BEAM.md`): `min(max row sum of A x max of B, max of A x max
/// column sum of B)`, saturating.
pub fn maxv_bound(a: &OperandStats, b: &OperandStats) -> u128 {
    a.max_row_sum
        .saturating_mul(u128::from(b.max))
        .min(u128::from(a.max).saturating_mul(b.max_col_sum))
}

/// Sampled output positions of an `m x n` product: the four corners, then random positions.
pub fn sample_positions(m: usize, n: usize, count: usize, seed: u64) -> Vec<(usize, usize)> {
    let mut v = vec![(0, 0), (0, n - 1), (m - 1, 0), (m - 1, n - 1)];
    v.dedup();
    v.truncate(count);
    let mut rng = SmallRng::seed_from_u64(seed);
    while v.len() < count {
        v.push((rng.gen_range(0..m), rng.gen_range(0..n)));
    }
    v
}

/// Exact CPU values of sampled elements of `A x B`.
#[derive(Clone, Debug)]
pub struct Sample {
    /// `(row, col)` of each sampled element.
    pub positions: Vec<(usize, usize)>,
    /// Its exact value.
    pub exact: Vec<Exact>,
}

impl Sample {
    /// Samples `count` elements of `A x B` (`A` is `m x k`, `B` is `k x n`, row-major values).
    pub fn new(a: &[u64], b: &[u64], (m, k, n): (usize, usize, usize), count: usize) -> Sample {
        let positions = sample_positions(m, n, count, seed(&[m as u64, k as u64, n as u64]));
        let exact = positions
            .par_iter()
            .map(|&(i, j)| exact_dot(&a[i * k..(i + 1) * k], b, n, j))
            .collect();
        Sample { positions, exact }
    }

    /// Checks `get(row, col)` (an output of `bits` bits under `overflow`) at every sampled
    /// position.
    ///
    /// # Errors
    /// The first differing element, with both values.
    pub fn check(
        &self,
        bits: u32,
        overflow: Overflow,
        get: impl Fn(usize, usize) -> Option<u64>,
    ) -> Result<(), String> {
        for (&(i, j), &e) in self.positions.iter().zip(&self.exact) {
            let want = finish(e, bits, overflow);
            match get(i, j) {
                Some(got) if got == want => {}
                got => {
                    return Err(format!(
                        "element ({i}, {j}) is {got:?}, the exact CPU value {} gives {want} \
                         ({bits} bits, {})",
                        e.0,
                        overflow.name()
                    ));
                }
            }
        }
        Ok(())
    }

    /// The largest sampled exact value.
    pub fn max(&self) -> Exact {
        self.exact
            .iter()
            .copied()
            .max_by_key(|&(v, huge)| (huge, v))
            .unwrap_or((0, false))
    }
}

/// All elements of `m`, row-major (in parallel over rows).
pub fn values_of(m: &PackedMatrix) -> Vec<u64> {
    let cols = m.cols();
    let rows: Vec<Vec<u64>> = (0..m.rows())
        .into_par_iter()
        .map(|r| (0..cols).map(|c| m.get(r, c).unwrap_or(0)).collect())
        .collect();
    let mut v = Vec::with_capacity(m.rows() * cols);
    for r in rows {
        v.extend(r);
    }
    v
}

/// The first element where `m` differs from `want` (row-major values): `(row, col, got,
/// want)`.
pub fn first_difference(m: &PackedMatrix, want: &[u64]) -> Option<(usize, usize, u64, u64)> {
    let cols = m.cols();
    if want.len() != m.rows() * cols {
        return Some((0, 0, 0, 0));
    }
    (0..m.rows()).into_par_iter().find_map_first(|r| {
        (0..cols).find_map(|c| {
            let got = m.get(r, c).unwrap_or(0);
            let w = want[r * cols + c];
            (got != w).then_some((r, c, got, w))
        })
    })
}

/// Checks every element of `m` against the exact values `exact` (row-major).
///
/// # Errors
/// The first differing element.
pub fn check_all(m: &PackedMatrix, exact: &[Exact], overflow: Overflow) -> Result<(), String> {
    let (bits, cols) = (m.bits(), m.cols());
    if exact.len() != m.rows() * cols {
        return Err(format!(
            "output has {} elements, the reference {}",
            m.rows() * cols,
            exact.len()
        ));
    }
    let bad = (0..m.rows()).into_par_iter().find_map_first(|r| {
        (0..cols).find_map(|c| {
            let got = m.get(r, c).unwrap_or(0);
            let want = finish(exact[r * cols + c], bits, overflow);
            (got != want).then_some((r, c, got, want))
        })
    });
    match bad {
        None => Ok(()),
        Some((r, c, got, want)) => Err(format!(
            "element ({r}, {c}) is {got}, the exact CPU value gives {want} ({bits} bits, {})",
            overflow.name()
        )),
    }
}

// ---------------------------------------------------------------------------------------------
// GEMM rows, summary, tables.

/// How the GEMM suite runs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GemmConfig {
    /// Matrix sizes.
    pub sizes: Vec<GemmSize>,
    /// Widths.
    pub bits: Vec<u32>,
    /// Kernel names.
    pub kernels: Vec<String>,
    /// Output modes (`sai/ovf`).
    pub outputs: Vec<String>,
    /// Untimed calls per kernel (the first of them checks that it runs), at least 1.
    pub warmup: usize,
    /// Timed calls per kernel; `None`: 10 for sides up to 4096, 3 above.
    pub iters: Option<usize>,
    /// Sampled output elements checked against the CPU.
    pub samples: usize,
}

impl GemmConfig {
    /// Parses the suite's arguments.
    ///
    /// # Errors
    /// A message for the first malformed argument.
    pub fn parse(
        sizes: &str,
        bits: &str,
        kernels: &str,
        outputs: &str,
        warmup: usize,
        iters: Option<usize>,
        samples: usize,
    ) -> Result<GemmConfig, String> {
        let sizes = sizes
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(parse_size)
            .collect::<Result<Vec<_>, _>>()?;
        if sizes.is_empty() {
            return Err("no sizes given".into());
        }
        if iters == Some(0) {
            return Err("at least one timed call is needed".into());
        }
        Ok(GemmConfig {
            sizes,
            bits: parse_bits(bits)?,
            kernels: kernel_names(&parse_kernels(kernels)?),
            outputs: parse_outputs(outputs)?
                .into_iter()
                .map(OutputMode::name)
                .collect(),
            warmup: warmup.max(1),
            iters,
            samples: samples.max(1),
        })
    }

    /// Timed calls at this side.
    pub fn iters_for(&self, side: usize) -> usize {
        self.iters.unwrap_or(if side <= 4096 { 10 } else { 3 })
    }
}

/// One timed GEMM: a kernel at one size, width and output mode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GemmRow {
    /// The size's label.
    pub size: String,
    /// The side of the square matrices.
    pub side: usize,
    /// Width of `A` and `B`.
    pub bits: u32,
    /// Output mode, `strategy/overflow`.
    pub output: String,
    /// Output width the strategy gives.
    pub out_bits: u32,
    /// Kernel.
    pub kernel: String,
    /// Layout of `A`, `B` and the output.
    pub layout: String,
    /// Packed bytes of `A`.
    pub a_bytes: usize,
    /// Packed bytes of `B`.
    pub b_bytes: usize,
    /// Packed bytes of the output.
    pub out_bytes: usize,
    /// Operand copies rotated through.
    pub copies: usize,
    /// Timed calls.
    pub iters: usize,
    /// Median time per call, milliseconds.
    pub median_ms: f64,
    /// Fastest call, milliseconds.
    pub min_ms: f64,
    /// Slowest call, milliseconds.
    pub max_ms: f64,
    /// `(a_bytes + b_bytes + out_bytes) / median`, GB/s.
    pub gbps: f64,
    /// `side^3 / median`, 10^9 multiply-adds per second.
    pub gmacs: f64,
    /// Guide's median over this one (same size, width and output mode).
    pub speedup_vs_guide: Option<f64>,
    /// Tight's median over this one.
    pub speedup_vs_tight: Option<f64>,
    /// How the output was checked, or `FAILED: ...`.
    pub check: String,
    /// Whether the check passed.
    pub ok: bool,
    /// The output mode whose run this row repeats (same kernel, output width and overflow).
    pub same_run_as: Option<String>,
}

impl GemmRow {
    fn key(&self) -> (&str, u32, &str, &str) {
        (&self.size, self.bits, &self.output, &self.kernel)
    }
}

/// Fills every row's speedups over guide and tight (checked rows only).
pub fn fill_speedups(rows: &mut [GemmRow]) {
    let mut times: HashMap<(String, u32, String, String), f64> = HashMap::new();
    for r in rows.iter().filter(|r| r.ok) {
        times.insert(
            (r.size.clone(), r.bits, r.output.clone(), r.kernel.clone()),
            r.median_ms,
        );
    }
    for r in rows.iter_mut() {
        let of = |k: &str| {
            times
                .get(&(r.size.clone(), r.bits, r.output.clone(), k.to_string()))
                .copied()
        };
        let (guide, tight) = (of("guide"), of("tight"));
        let ok = r.ok && r.median_ms > 0.0;
        r.speedup_vs_guide = guide.filter(|_| ok).map(|g| g / r.median_ms);
        r.speedup_vs_tight = tight.filter(|_| ok).map(|t| t / r.median_ms);
    }
}

/// One point of the paper's figure: a size, width and output mode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SummaryPoint {
    /// The size's label.
    pub size: String,
    /// Width.
    pub bits: u32,
    /// Output mode.
    pub output: String,
    /// Guide's median, ms.
    pub guide_ms: Option<f64>,
    /// Tight's median, ms.
    pub tight_ms: Option<f64>,
    /// The fastest of slabs, slabs-flex-out, nogaps and nogaps-flex-out: name and median.
    pub best_packed: Option<(String, f64)>,
    /// Mma's median, ms.
    pub mma_ms: Option<f64>,
}

impl SummaryPoint {
    fn over_guide(&self, ms: Option<f64>) -> Option<f64> {
        Some(self.guide_ms? / ms?)
    }

    /// Tight over guide.
    pub fn tight_speedup(&self) -> Option<f64> {
        self.over_guide(self.tight_ms)
    }

    /// Best packed over guide.
    pub fn best_speedup(&self) -> Option<f64> {
        self.over_guide(self.best_packed.as_ref().map(|b| b.1))
    }

    /// Best packed over tight.
    pub fn best_vs_tight(&self) -> Option<f64> {
        Some(self.tight_ms? / self.best_packed.as_ref()?.1)
    }

    /// Mma over guide.
    pub fn mma_speedup(&self) -> Option<f64> {
        self.over_guide(self.mma_ms)
    }
}

/// The figure's points from the rows (checked rows only), in the rows' order.
pub fn summarize(rows: &[GemmRow]) -> Vec<SummaryPoint> {
    let mut out: Vec<SummaryPoint> = Vec::new();
    for r in rows.iter().filter(|r| r.ok) {
        let i = match out
            .iter()
            .position(|p| p.size == r.size && p.bits == r.bits && p.output == r.output)
        {
            Some(i) => i,
            None => {
                out.push(SummaryPoint {
                    size: r.size.clone(),
                    bits: r.bits,
                    output: r.output.clone(),
                    guide_ms: None,
                    tight_ms: None,
                    best_packed: None,
                    mma_ms: None,
                });
                out.len() - 1
            }
        };
        let p = &mut out[i];
        let t = r.median_ms;
        match r.kernel.as_str() {
            "guide" => p.guide_ms = Some(t),
            "tight" => p.tight_ms = Some(t),
            "mma" => p.mma_ms = Some(t),
            k if PACKED_FAMILY.contains(&k) && p.best_packed.as_ref().is_none_or(|b| t < b.1) => {
                p.best_packed = Some((k.to_string(), t));
            }
            _ => {}
        }
    }
    out
}

/// How tight `maxv` is at one size and width.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MaxvRow {
    /// The size's label.
    pub size: String,
    /// Width of the operands.
    pub bits: u32,
    /// The output width `maxv` gives.
    pub maxv_bits: u32,
    /// The bound it is computed from (decimal; may exceed 2^64).
    pub bound: String,
    /// Bits of the bound.
    pub bound_bits: u32,
    /// The largest exact output found (decimal).
    pub largest: String,
    /// Its bits (129 for a sum past 2^128).
    pub largest_bits: u32,
    /// Whether `largest` is the largest of all outputs (an exact output was downloaded) or of
    /// the sample only (a lower bound).
    pub exact_max: bool,
    /// `maxv_bits - largest_bits`: bits `maxv` spends above the largest output (negative when
    /// outputs need more than 64 bits).
    pub slack_bits: i64,
}

fn ratio(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2}x"))
}

fn opt_ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.3}"))
}

/// The table of every GEMM row.
pub fn gemm_table(rows: &[GemmRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<7} {:>2} {:<9} {:>3} {:<15} {:<6} {:>12} {:>10} {:>9} {:>9} {:>8} {:>8}  check",
        "size",
        "b",
        "output",
        "out",
        "kernel",
        "layout",
        "packed_MiB",
        "median_ms",
        "GB/s",
        "GMAC/s",
        "vs guide",
        "vs tight"
    );
    for r in rows {
        let same = r
            .same_run_as
            .as_ref()
            .map_or(String::new(), |o| format!(" (same run as {o})"));
        let _ = writeln!(
            s,
            "{:<7} {:>2} {:<9} {:>3} {:<15} {:<6} {:>12.2} {:>10.3} {:>9.1} {:>9.1} {:>8} {:>8}  {}{}",
            r.size,
            r.bits,
            r.output,
            r.out_bits,
            r.kernel,
            r.layout,
            (r.a_bytes + r.b_bytes + r.out_bytes) as f64 / (1u64 << 20) as f64,
            r.median_ms,
            r.gbps,
            r.gmacs,
            ratio(r.speedup_vs_guide),
            ratio(r.speedup_vs_tight),
            r.check,
            same
        );
    }
    s
}

/// The figure's data as a table: per size, output mode and width, the times and speedups.
pub fn summary_table(points: &[SummaryPoint]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<7} {:<9} {:>2} {:>10} {:>10} {:>10} {:<15} {:>10} {:>8} {:>8} {:>8} {:>8}",
        "size",
        "output",
        "b",
        "guide_ms",
        "tight_ms",
        "best_ms",
        "best packed",
        "mma_ms",
        "tight/g",
        "best/g",
        "best/t",
        "mma/g"
    );
    for p in points {
        let _ = writeln!(
            s,
            "{:<7} {:<9} {:>2} {:>10} {:>10} {:>10} {:<15} {:>10} {:>8} {:>8} {:>8} {:>8}",
            p.size,
            p.output,
            p.bits,
            opt_ms(p.guide_ms),
            opt_ms(p.tight_ms),
            opt_ms(p.best_packed.as_ref().map(|b| b.1)),
            p.best_packed.as_ref().map_or("-", |b| b.0.as_str()),
            opt_ms(p.mma_ms),
            ratio(p.tight_speedup()),
            ratio(p.best_speedup()),
            ratio(p.best_vs_tight()),
            ratio(p.mma_speedup())
        );
    }
    s
}

/// The `maxv` tightness table.
pub fn maxv_table(rows: &[MaxvRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<7} {:>2} {:>9} {:>10} {:>12} {:>6}  largest output",
        "size", "b", "maxv_bits", "bound_bits", "largest_bits", "slack"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:<7} {:>2} {:>9} {:>10} {:>12} {:>6}  {} ({})",
            r.size,
            r.bits,
            r.maxv_bits,
            r.bound_bits,
            if r.exact_max {
                format!("{}", r.largest_bits)
            } else {
                format!(">={}", r.largest_bits)
            },
            r.slack_bits,
            r.largest,
            if r.exact_max {
                "all outputs"
            } else {
                "sample: a lower bound"
            }
        );
    }
    s
}

// ---------------------------------------------------------------------------------------------
// The plot.

const SERIES: [(&str, &str); 4] = [
    ("guide", "#8c8c8c"),
    ("tight", "#dd8452"),
    ("best packed", "#4c72b0"),
    ("mma", "#55a868"),
];

/// Geometry of one panel's y axis: speedups from `lo` to `hi` on a log scale.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LogAxis {
    /// Smallest speedup shown (a power of two).
    pub lo: f64,
    /// Largest (a power of two above `lo`).
    pub hi: f64,
}

impl LogAxis {
    /// Powers of two around every value and 1.
    pub fn around(values: impl IntoIterator<Item = f64>) -> LogAxis {
        let (mut lo, mut hi) = (1.0f64, 1.0f64);
        for v in values.into_iter().filter(|v| v.is_finite() && *v > 0.0) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        let lo = 2f64.powf(lo.log2().floor());
        let mut hi = 2f64.powf(hi.log2().ceil());
        if hi <= lo {
            hi = 2.0 * lo;
        }
        LogAxis { lo, hi }
    }

    /// The y of `v` in a panel from `top` of height `h` (`hi` at the top).
    pub fn y(&self, v: f64, top: f64, h: f64) -> f64 {
        let f = (v.log2() - self.lo.log2()) / (self.hi.log2() - self.lo.log2());
        top + h * (1.0 - f.clamp(0.0, 1.0))
    }
}

/// The paper's Fig. 2/3 for one size: a grid of panels (columns `sai`, `c2p2`, `maxv`; rows
/// `ovf`, `sat`), x = width 1..=64, y = speedup over guide on a log scale, one line each for
/// guide (1), tight, the best packed CUDA-core kernel and mma.
pub fn speedup_svg(points: &[SummaryPoint], size: &str, side: usize, device: &str) -> String {
    let pts: Vec<&SummaryPoint> = points.iter().filter(|p| p.size == size).collect();
    let series = |p: &SummaryPoint, i: usize| match i {
        0 => p.guide_ms.map(|_| 1.0),
        1 => p.tight_speedup(),
        2 => p.best_speedup(),
        _ => p.mma_speedup(),
    };
    let axis = LogAxis::around(
        pts.iter()
            .flat_map(|p| (0..SERIES.len()).filter_map(move |i| series(p, i))),
    );
    let (pw, ph, left, top, gap) = (300.0, 200.0, 70.0, 60.0, 60.0);
    let width = left + 3.0 * (pw + gap);
    let height = top + 2.0 * (ph + gap) + 30.0;
    let x_of = |b: u32| left + pw * (f64::from(b) - 1.0) / 63.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{left}" y="22" font-size="14">BEAM GEMM {} ({side} x {side}): speedup over guide, log scale ({})</text>"#,
        xml(size),
        xml(device)
    );
    for (row, ovf) in ["ovf", "sat"].iter().enumerate() {
        for (col, strategy) in ["sai", "c2p2", "maxv"].iter().enumerate() {
            let output = format!("{strategy}/{ovf}");
            let x0 = col as f64 * (pw + gap);
            let y0 = top + row as f64 * (ph + gap);
            let _ = writeln!(
                s,
                r#"<g class="panel" data-output="{output}" transform="translate({x0},0)">"#
            );
            let _ = writeln!(
                s,
                r##"<text x="{left}" y="{}" font-weight="bold">{output}</text><rect x="{left}" y="{y0}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>"##,
                y0 - 6.0
            );
            let mut e = axis.lo;
            while e <= axis.hi * 1.0001 {
                let y = axis.y(e, y0, ph);
                let _ = writeln!(
                    s,
                    r##"<line x1="{left}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#e4e4e4"/><text x="{}" y="{:.1}" text-anchor="end">{}x</text>"##,
                    left + pw,
                    left - 4.0,
                    y + 4.0,
                    fmt_tick(e)
                );
                e *= 2.0;
            }
            for b in [1u32, 8, 16, 24, 32, 40, 48, 56, 64] {
                let _ = writeln!(
                    s,
                    r#"<text x="{:.1}" y="{}" text-anchor="middle">{b}</text>"#,
                    x_of(b),
                    y0 + ph + 14.0
                );
            }
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{}" text-anchor="middle">bits per element</text>"#,
                left + pw / 2.0,
                y0 + ph + 30.0
            );
            let mut here: Vec<&&SummaryPoint> = pts.iter().filter(|p| p.output == output).collect();
            here.sort_by_key(|p| p.bits);
            for (i, (name, color)) in SERIES.iter().enumerate() {
                let xy: Vec<(u32, f64)> = here
                    .iter()
                    .filter_map(|p| series(p, i).map(|v| (p.bits, v)))
                    .collect();
                if xy.is_empty() {
                    continue;
                }
                let coords: Vec<String> = xy
                    .iter()
                    .map(|&(b, v)| format!("{:.1},{:.1}", x_of(b), axis.y(v, y0, ph)))
                    .collect();
                let dash = if i == 0 {
                    r#" stroke-dasharray="4 3""#
                } else {
                    ""
                };
                let _ = writeln!(
                    s,
                    r#"<polyline data-series="{name}" points="{}" fill="none" stroke="{color}" stroke-width="1.5"{dash}/>"#,
                    coords.join(" ")
                );
                for &(b, v) in &xy {
                    let _ = writeln!(
                        s,
                        r#"<circle cx="{:.1}" cy="{:.1}" r="2.2" fill="{color}"><title>{name} b={b}: {v:.2}x</title></circle>"#,
                        x_of(b),
                        axis.y(v, y0, ph)
                    );
                }
            }
            s.push_str("</g>\n");
        }
    }
    let ly = top + 2.0 * (ph + gap);
    for (i, (name, color)) in SERIES.iter().enumerate() {
        let x = left + i as f64 * 160.0;
        let _ = writeln!(
            s,
            r#"<rect x="{x}" y="{}" width="12" height="12" fill="{color}"/><text x="{}" y="{}">{name}</text>"#,
            ly,
            x + 16.0,
            ly + 10.0
        );
    }
    s.push_str("</svg>\n");
    s
}

fn fmt_tick(v: f64) -> String {
    if v >= 1.0 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

// ---------------------------------------------------------------------------------------------
// The GEMM run.

/// One invocation of the GEMM suite (a report may merge several).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunInfo {
    /// GPU name.
    pub device: String,
    /// `git describe` of the build.
    pub git_revision: String,
    /// When it started.
    pub date: String,
    /// Its configuration.
    pub config: GemmConfig,
}

/// What the GEMM suite writes to `beam-gemm.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GemmReport {
    /// The runs whose rows it holds (one, or more with `--beam-append`).
    pub runs: Vec<RunInfo>,
    /// Every timed kernel.
    pub rows: Vec<GemmRow>,
    /// The figure's points.
    pub summary: Vec<SummaryPoint>,
    /// How tight `maxv` is.
    pub maxv: Vec<MaxvRow>,
    /// Kernels that refused a configuration, and other remarks.
    pub notes: Vec<String>,
    /// Failed checks (the run fails when there are any).
    pub failures: Vec<String>,
}

impl GemmReport {
    /// Adds `older`'s rows, `maxv` rows and notes that this report does not measure again,
    /// and its runs (for `--beam-append`).
    pub fn merge_older(&mut self, older: GemmReport) {
        let mut rows: Vec<GemmRow> = older
            .rows
            .into_iter()
            .filter(|o| !self.rows.iter().any(|n| n.key() == o.key()))
            .collect();
        rows.append(&mut self.rows);
        rows.sort_by(|a, b| {
            (a.side, a.bits)
                .cmp(&(b.side, b.bits))
                .then_with(|| output_order(&a.output).cmp(&output_order(&b.output)))
        });
        self.rows = rows;
        let mut maxv: Vec<MaxvRow> = older
            .maxv
            .into_iter()
            .filter(|o| {
                !self
                    .maxv
                    .iter()
                    .any(|n| n.size == o.size && n.bits == o.bits)
            })
            .collect();
        maxv.append(&mut self.maxv);
        maxv.sort_by(|a, b| (&a.size, a.bits).cmp(&(&b.size, b.bits)));
        self.maxv = maxv;
        let mut runs = older.runs;
        runs.append(&mut self.runs);
        self.runs = runs;
        let mut notes = older.notes;
        notes.append(&mut self.notes);
        self.notes = notes;
        self.finish();
    }

    /// Recomputes the speedups and the summary from the rows.
    pub fn finish(&mut self) {
        fill_speedups(&mut self.rows);
        self.summary = summarize(&self.rows);
    }

    /// The sizes present (label, side), in row order.
    pub fn sizes(&self) -> Vec<(String, usize)> {
        let mut v: Vec<(String, usize)> = Vec::new();
        for r in &self.rows {
            if !v.iter().any(|(l, _)| l == &r.size) {
                v.push((r.size.clone(), r.side));
            }
        }
        v
    }

    /// Every table: the runs, every row, then [`GemmReport::short_text`].
    pub fn text(&self) -> String {
        let mut s = String::new();
        for r in &self.runs {
            let _ = writeln!(
                s,
                "run: {} on {}, build {}",
                r.date, r.device, r.git_revision
            );
        }
        let _ = writeln!(
            s,
            "\nBEAM GEMM, every kernel (time: median of the timed calls; GB/s: packed A + B + \
             output bytes over it):\n{}",
            gemm_table(&self.rows)
        );
        s.push_str(&self.short_text());
        s
    }

    /// The figure's table, the `maxv` table, the notes and the failures.
    pub fn short_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "BEAM GEMM, the paper's figure (speedups over guide `/g` and tight `/t`; best packed: \
             the fastest of {}):\n{}",
            PACKED_FAMILY.join(", "),
            summary_table(&self.summary)
        );
        let _ = writeln!(
            s,
            "maxv: output width against the largest exact output:\n{}",
            maxv_table(&self.maxv)
        );
        for n in &self.notes {
            let _ = writeln!(s, "note: {n}");
        }
        for f in &self.failures {
            let _ = writeln!(s, "FAILED: {f}");
        }
        s
    }
}

fn output_order(o: &str) -> usize {
    DEFAULT_GEMM_OUTPUTS
        .split(',')
        .position(|x| x == o)
        .unwrap_or(usize::MAX)
}

fn beam_err(e: BeamError) -> BenchError {
    BenchError::Format {
        format: "beam",
        source: Box::new(e),
    }
}

/// Whether a kernel refused a configuration it cannot run (noted and skipped) rather than
/// failed.
fn refused(e: &BeamError) -> bool {
    matches!(
        e,
        BeamError::Kernel { .. }
            | BeamError::Format(FormatError::Runtime(RuntimeError::InvalidLaunch { .. }))
    )
}

/// An operand and its device copies.
struct Copies {
    mats: Vec<DeviceBeamMatrix>,
}

impl Copies {
    fn new(gpu: &Gpu, m: &PackedMatrix, copies: usize) -> Result<Self, BenchError> {
        let first = DeviceBeamMatrix::upload(gpu, m).map_err(beam_err)?;
        let mut mats = vec![first];
        for _ in 1..copies {
            mats.push(mats[0].try_clone().map_err(beam_err)?);
        }
        Ok(Copies { mats })
    }

    fn get(&self, i: usize) -> &DeviceBeamMatrix {
        &self.mats[i % self.mats.len()]
    }
}

/// The reference output values of one output width and overflow at one size and width: the
/// first kernel's checked output.
struct Reference {
    kernel: String,
    values: Vec<u64>,
}

/// Runs the GEMM suite; `progress` gets a line per row and step, `checkpoint` the report so
/// far after each size and width (to write it: a run cut short keeps what it measured).
///
/// # Errors
/// Runtime and packing errors (a kernel that refuses a configuration is noted, a failed check
/// is recorded in the report's `failures`).
pub fn run_gemm(
    gpu: &Gpu,
    cfg: &GemmConfig,
    run: RunInfo,
    progress: &mut dyn FnMut(&str),
    checkpoint: &mut dyn FnMut(&GemmReport) -> Result<(), BenchError>,
) -> Result<GemmReport, BenchError> {
    let kernels = parse_kernels(&cfg.kernels.join(",")).map_err(BenchError::Usage)?;
    let outputs = parse_outputs(&cfg.outputs.join(",")).map_err(BenchError::Usage)?;
    let bg = BeamGemm::new(gpu).map_err(beam_err)?;
    let mut report = GemmReport {
        runs: vec![run],
        rows: Vec::new(),
        summary: Vec::new(),
        maxv: Vec::new(),
        notes: Vec::new(),
        failures: Vec::new(),
    };
    for size in &cfg.sizes {
        for &bits in &cfg.bits {
            run_gemm_point(
                gpu,
                &bg,
                cfg,
                size,
                bits,
                &kernels,
                &outputs,
                &mut report,
                progress,
            )?;
            report.finish();
            checkpoint(&report)?;
        }
    }
    Ok(report)
}

/// One size and width: every layout, output mode and kernel.
#[allow(clippy::too_many_arguments)]
fn run_gemm_point(
    gpu: &Gpu,
    bg: &BeamGemm,
    cfg: &GemmConfig,
    size: &GemmSize,
    bits: u32,
    kernels: &[GemmKernel],
    outputs: &[OutputMode],
    report: &mut GemmReport,
    progress: &mut dyn FnMut(&str),
) -> Result<(), BenchError> {
    let n = size.side;
    let t0 = std::time::Instant::now();
    let a_vals = uniform_values(n * n, bits, seed(&[n as u64, u64::from(bits), 0]));
    let b_vals = uniform_values(n * n, bits, seed(&[n as u64, u64::from(bits), 1]));
    let sample = Sample::new(&a_vals, &b_vals, (n, n, n), cfg.samples);
    progress(&format!(
        "{} ({n} x {n}) b{bits}: operands and {} exact samples in {:.1} s",
        size.label,
        cfg.samples,
        t0.elapsed().as_secs_f64()
    ));
    let (warmup, iters) = (cfg.warmup.max(1), cfg.iters_for(n));
    let mut refs: HashMap<(u32, Overflow), Reference> = HashMap::new();
    let mut done: HashMap<(GemmKernel, u32, Overflow), usize> = HashMap::new();
    let mut stats: Option<(OperandStats, OperandStats)> = None;
    for layout in [Layout::Naive, Layout::Tight, Layout::Slabs, Layout::Nogaps] {
        let here: Vec<GemmKernel> = kernels
            .iter()
            .copied()
            .filter(|&k| kernel_layout(k) == layout)
            .filter(|&k| {
                k != GemmKernel::Mma || bits <= beam_pack::beam_kernels::mma::MAX_PLANE_BITS
            })
            .collect();
        if here.is_empty() {
            continue;
        }
        let pa = PackedMatrix::pack(&a_vals, n, n, bits, layout).map_err(beam_err)?;
        let pb = PackedMatrix::pack(&b_vals, n, n, bits, layout).map_err(beam_err)?;
        let pair_bytes = 8 * (pa.words().len() + pb.words().len());
        let copies = rotation_copies(pair_bytes, gpu.info().l2_bytes, 0)
            .min(warmup + iters)
            .max(2);
        let a = Copies::new(gpu, &pa, copies)?;
        let b = Copies::new(gpu, &pb, copies)?;
        drop((pa, pb));
        let (sa, sb) = (*a.get(0).stats(), *b.get(0).stats());
        stats.get_or_insert((sa, sb));
        for &mode in outputs {
            let out_bits = beam_pack::output_bits_from(&sa, &sb, mode.width);
            for &k in &here {
                if k.accepts((bits, layout), (bits, layout), out_bits, layout)
                    .is_err()
                {
                    continue;
                }
                if let Some(&i) = done.get(&(k, out_bits, mode.overflow)) {
                    let mut r = report.rows[i].clone();
                    r.same_run_as = Some(r.same_run_as.take().unwrap_or(r.output.clone()));
                    r.output = mode.name();
                    progress(&format!(
                        "  {} b{bits} {:<9} {:<15} same run as {}",
                        size.label,
                        r.output,
                        k.name(),
                        r.same_run_as.as_deref().unwrap_or("")
                    ));
                    report.rows.push(r);
                    continue;
                }
                let row = time_gemm(
                    gpu,
                    bg,
                    k,
                    (&a, &b),
                    mode,
                    (warmup, iters),
                    GemmCheck {
                        sample: &sample,
                        refs: &mut refs,
                        values: (&a_vals, &b_vals),
                    },
                );
                let mut row = match row {
                    Ok(r) => r,
                    Err(GemmFail::Refused(e)) => {
                        let note = format!(
                            "{} b{bits} {} {}: the kernel refused the configuration: {e}",
                            size.label,
                            mode.name(),
                            k.name()
                        );
                        progress(&format!("  {note}"));
                        report.notes.push(note);
                        continue;
                    }
                    Err(GemmFail::Error(e)) => return Err(e),
                };
                row.size = size.label.clone();
                row.side = n;
                row.bits = bits;
                row.out_bits = out_bits;
                if !row.ok {
                    report.failures.push(format!(
                        "{} b{bits} {} {}: {}",
                        size.label,
                        mode.name(),
                        k.name(),
                        row.check
                    ));
                }
                progress(&format!(
                    "  {} b{bits} {:<9} out {:>2} {:<15} {:>10.3} ms {:>8.1} GB/s {:>9.1} GMAC/s  {}",
                    size.label,
                    row.output,
                    out_bits,
                    row.kernel,
                    row.median_ms,
                    row.gbps,
                    row.gmacs,
                    row.check
                ));
                done.insert((k, out_bits, mode.overflow), report.rows.len());
                report.rows.push(row);
            }
        }
    }
    if let Some((sa, sb)) = stats {
        report
            .maxv
            .push(maxv_row(&size.label, bits, &sa, &sb, &sample, &refs));
    }
    Ok(())
}

/// The `maxv` tightness at one size and width: the largest of a whole exact output where a
/// checked output is wide enough to be exact (its width at least the bound's), else of the
/// sample.
fn maxv_row(
    size: &str,
    bits: u32,
    sa: &OperandStats,
    sb: &OperandStats,
    sample: &Sample,
    refs: &HashMap<(u32, Overflow), Reference>,
) -> MaxvRow {
    let bound = maxv_bound(sa, sb);
    let bound_bits = exact_width((bound, false));
    let maxv_bits = beam_pack::output_bits_from(sa, sb, OutputWidth::Maxv);
    let full = refs
        .iter()
        .find(|((out_bits, _), _)| *out_bits >= bound_bits)
        .map(|(_, r)| r.values.par_iter().copied().max().unwrap_or(0));
    let (largest, exact_max) = match full {
        Some(v) => ((u128::from(v), false), true),
        None => (sample.max(), false),
    };
    let largest_bits = exact_width(largest);
    MaxvRow {
        size: size.to_string(),
        bits,
        maxv_bits,
        bound: bound.to_string(),
        bound_bits,
        largest: if largest.1 {
            ">= 2^128".into()
        } else {
            largest.0.to_string()
        },
        largest_bits,
        exact_max,
        slack_bits: i64::from(maxv_bits) - i64::from(largest_bits),
    }
}

/// What a timed GEMM is checked against.
struct GemmCheck<'a> {
    sample: &'a Sample,
    refs: &'a mut HashMap<(u32, Overflow), Reference>,
    /// `A` and `B` (square, row-major), to compute an element the outputs disagree on.
    values: (&'a [u64], &'a [u64]),
}

enum GemmFail {
    Refused(BeamError),
    Error(BenchError),
}

impl From<BenchError> for GemmFail {
    fn from(e: BenchError) -> Self {
        GemmFail::Error(e)
    }
}

/// Runs, times and checks one kernel (the row's size fields are filled by the caller).
fn time_gemm(
    gpu: &Gpu,
    bg: &BeamGemm,
    k: GemmKernel,
    (a, b): (&Copies, &Copies),
    mode: OutputMode,
    (warmup, iters): (usize, usize),
    check: GemmCheck<'_>,
) -> Result<GemmRow, GemmFail> {
    let layout = a.get(0).layout();
    let mut out: DeviceBeamOut =
        BeamGemm::alloc_out(gpu, a.get(0), b.get(0), mode.width, layout).map_err(beam_err)?;
    let ovf = mode.overflow;
    match bg.gemm(gpu, k, a.get(0), b.get(0), &mut out, ovf) {
        Ok(()) => {}
        Err(e) if refused(&e) => return Err(GemmFail::Refused(e)),
        Err(e) => return Err(beam_err(e).into()),
    }
    gpu.synchronize().map_err(BenchError::from)?;
    let timings = time_launches(gpu, warmup - 1, iters, |i| -> Result<(), BenchError> {
        let c = i + 1;
        bg.gemm(gpu, k, a.get(c), b.get(c), &mut out, ovf)
            .map_err(beam_err)
    })?;
    let got = out.download(gpu);
    let (ok, text) = match got {
        Err(e) => (false, format!("FAILED: download: {e}")),
        Ok(m) => match check.sample.check(m.bits(), ovf, |i, j| m.get(i, j)) {
            Err(e) => (false, format!("FAILED: sample: {e}")),
            Ok(()) => {
                let s = check.sample.positions.len();
                match check.refs.get(&(m.bits(), ovf)) {
                    Some(r) => match first_difference(&m, &r.values) {
                        None => (
                            true,
                            format!(
                                "sample {s} exact; all {} = {}",
                                m.rows() * m.cols(),
                                r.kernel
                            ),
                        ),
                        Some((i, j, got, want)) => {
                            let (av, bv) = check.values;
                            let n = m.cols();
                            let cpu =
                                finish(exact_dot(&av[i * n..(i + 1) * n], bv, n, j), m.bits(), ovf);
                            (
                                false,
                                format!(
                                    "FAILED: element ({i}, {j}) is {got}, {} gave {want}, the \
                                     exact CPU value {cpu}",
                                    r.kernel
                                ),
                            )
                        }
                    },
                    None => {
                        check.refs.insert(
                            (m.bits(), ovf),
                            Reference {
                                kernel: k.name().to_string(),
                                values: values_of(&m),
                            },
                        );
                        (true, format!("sample {s} exact (first)"))
                    }
                }
            }
        },
    };
    // Which tensor-core entry point ran (the Hopper `wgmma` kernel or an `mma.sync` one).
    let text = match (k, bg.mma_entry_point(a.get(0), b.get(0), &out, ovf)) {
        (GemmKernel::Mma, Some(entry)) => format!("{text}; {entry}"),
        _ => text,
    };
    let median_ms = timings.median_ms();
    let (ab, bb, ob) = (a.get(0).bytes(), b.get(0).bytes(), out.bytes());
    let side = a.get(0).rows() as f64;
    Ok(GemmRow {
        size: String::new(),
        side: 0,
        bits: 0,
        output: mode.name(),
        out_bits: out.bits(),
        kernel: k.name().to_string(),
        layout: layout.name().to_string(),
        a_bytes: ab,
        b_bytes: bb,
        out_bytes: ob,
        copies: a.mats.len(),
        iters,
        median_ms,
        min_ms: timings.min_ms(),
        max_ms: timings.quantile(1.0),
        gbps: (ab + bb + ob) as f64 / (median_ms * 1e6),
        gmacs: side * side * side / (median_ms * 1e6),
        speedup_vs_guide: None,
        speedup_vs_tight: None,
        check: text,
        ok,
        same_run_as: None,
    })
}

/// The report in `dir/beam-gemm.json`, if there is one (for `--beam-append`).
///
/// # Errors
/// [`BenchError::Io`]; [`BenchError::Usage`] for a file that is not a GEMM report.
pub fn load_gemm_report(dir: &Path) -> Result<Option<GemmReport>, BenchError> {
    let json = dir.join("beam-gemm.json");
    if !json.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&json).map_err(|source| BenchError::Io {
        path: json.display().to_string(),
        source,
    })?;
    serde_json::from_str(&text).map(Some).map_err(|e| {
        BenchError::Usage(format!(
            "--beam-append: {} is not a beam-gemm report: {e}",
            json.display()
        ))
    })
}

/// Writes `beam-gemm.json`, `beam-gemm.txt` (every table) and one `beam-gemm-<size>.svg` per
/// size into `dir` (created if needed); returns the paths.
///
/// # Errors
/// [`BenchError::Io`].
pub fn write_gemm_files(report: &GemmReport, dir: &Path) -> Result<Vec<String>, BenchError> {
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| BenchError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let json = dir.join("beam-gemm.json");
    let mut paths = Vec::new();
    let text =
        serde_json::to_string_pretty(report).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    std::fs::write(&json, text).map_err(io(&json))?;
    paths.push(json.display().to_string());
    let txt = dir.join("beam-gemm.txt");
    std::fs::write(&txt, report.text()).map_err(io(&txt))?;
    paths.push(txt.display().to_string());
    let device = report
        .runs
        .last()
        .map_or("unknown device".to_string(), |r| r.device.clone());
    for (label, side) in report.sizes() {
        let svg = dir.join(format!("beam-gemm-{}.svg", file_safe(&label)));
        std::fs::write(&svg, speedup_svg(&report.summary, &label, side, &device))
            .map_err(io(&svg))?;
        paths.push(svg.display().to_string());
    }
    Ok(paths)
}

fn file_safe(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// GEMV.

/// How the GEMV suite runs (timing, iterations and rotation are the [`crate::BenchConfig`]'s).
#[derive(Clone, Debug, Serialize)]
pub struct GemvConfig {
    /// Shapes (rows, cols) of `A`.
    pub shapes: Vec<(usize, usize)>,
    /// Widths.
    pub bits: Vec<u32>,
    /// Columns of `B` (vectors), each 1 to 16.
    pub batches: Vec<usize>,
    /// Output modes.
    pub outputs: Vec<String>,
    /// The kernel choices timed (`GemvPath` names): `auto` is what a user gets.
    pub paths: Vec<String>,
    /// How the fast kernels' vector is prepared (`GemvPrep` names): `auto` is what a user gets.
    pub preps: Vec<String>,
    /// Extra runs of the streaming tensor-core kernel with these shapes: (segments per unit,
    /// stages, warps per block). Empty: none (the paths' own shapes only).
    pub stream_shapes: Vec<(u32, u32, u32)>,
    /// Extra runs of the ring kernel (`cuda-ring`) with these stages per warp's ring.
    pub ring_stages: Vec<u32>,
    /// Extra runs of the direct kernel with these slices per group of rows.
    pub direct_slices: Vec<u32>,
    /// How the vectors are given: `row` (an `n x k` matrix, each vector packed like a row of
    /// `A`, `BeamGemv::gemv_row`: the direct kernels) and `column` (`k x n`,
    /// `BeamGemv::gemv`). Every batch runs each listed form.
    pub vectors: Vec<String>,
}

impl GemvConfig {
    /// Parses the suite's arguments.
    ///
    /// # Errors
    /// A message for the first malformed argument.
    pub fn parse(
        shapes: Vec<(usize, usize)>,
        bits: &str,
        batches: Vec<usize>,
        outputs: &str,
        (paths, preps): (&str, &str),
    ) -> Result<GemvConfig, String> {
        let max = beam_pack::GEMV_MAX_COLS;
        if let Some(b) = batches.iter().find(|&&b| !(1..=max).contains(&b)) {
            return Err(format!(
                "GEMV batch {b}: BEAM GEMV takes 1 to {max} vectors"
            ));
        }
        Ok(GemvConfig {
            shapes,
            bits: parse_bits(bits)?,
            batches: if batches.is_empty() { vec![1] } else { batches },
            outputs: parse_outputs(outputs)?
                .into_iter()
                .map(OutputMode::name)
                .collect(),
            paths: parse_paths(paths)?
                .into_iter()
                .map(|p| p.name().to_string())
                .collect(),
            preps: parse_preps(preps)?
                .into_iter()
                .map(|p| p.name().to_string())
                .collect(),
            stream_shapes: Vec::new(),
            ring_stages: Vec::new(),
            direct_slices: Vec::new(),
            vectors: vec!["row".to_string()],
        })
    }

    /// The same suite with extra runs of the direct kernel: `s` is a comma-separated list of
    /// slice counts (1, 2, 4, 8).
    ///
    /// # Errors
    /// A message for the first malformed item.
    pub fn with_direct_slices(mut self, s: &str) -> Result<GemvConfig, String> {
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let n = part
                .parse::<u32>()
                .ok()
                .filter(|n| matches!(n, 1 | 2 | 4 | 8))
                .ok_or_else(|| format!("direct slices '{part}': use 1, 2, 4 or 8"))?;
            self.direct_slices.push(n);
        }
        Ok(self)
    }

    /// The same suite with the vector forms `s` (comma-separated `row`, `column`).
    ///
    /// # Errors
    /// A message for an unknown form or an empty list.
    pub fn with_vectors(mut self, s: &str) -> Result<GemvConfig, String> {
        let v: Vec<String> = s
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect();
        if let Some(bad) = v.iter().find(|t| !matches!(t.as_str(), "row" | "column")) {
            return Err(format!(
                "vector form {bad:?}: use row (1 x k, packed like a row of A) or column (k x 1)"
            ));
        }
        if v.is_empty() {
            return Err("no vector form given: use row, column or both".to_string());
        }
        self.vectors = v;
        Ok(self)
    }

    /// The same suite with extra runs of the streaming kernel: `s` is a comma-separated list of
    /// `UxSxW` (segments per unit, stages, warps per block), e.g. `4x2x8,2x3x16`.
    ///
    /// # Errors
    /// A message for the first malformed item.
    pub fn with_stream_shapes(mut self, s: &str) -> Result<GemvConfig, String> {
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let v: Vec<u32> = part
                .split('x')
                .map(|n| n.trim().parse::<u32>())
                .collect::<Result<_, _>>()
                .map_err(|_| format!("stream shape '{part}': use UxSxW, e.g. 4x2x8"))?;
            let [u, st, w] = v[..] else {
                return Err(format!("stream shape '{part}': use UxSxW, e.g. 4x2x8"));
            };
            self.stream_shapes.push((u, st, w));
        }
        Ok(self)
    }

    /// The same suite with extra runs of the ring kernel: `s` is a comma-separated list of
    /// stage counts, e.g. `3,4`.
    ///
    /// # Errors
    /// A message for the first malformed item.
    pub fn with_ring_stages(mut self, s: &str) -> Result<GemvConfig, String> {
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let n = part
                .parse::<u32>()
                .map_err(|_| format!("ring stages '{part}': use a count, e.g. 3"))?;
            self.ring_stages.push(n);
        }
        Ok(self)
    }
}

/// A comma-separated list of `what` (at least one, duplicates dropped), each read by `parse`;
/// an unknown item is an error naming it and the `known` names.
fn parse_choices<T: PartialEq>(
    s: &str,
    what: &str,
    known: &[&str],
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Vec<T>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let p = parse(part).ok_or_else(|| format!("{what} '{part}': use {}", known.join(", ")))?;
        if !out.contains(&p) {
            out.push(p);
        }
    }
    if out.is_empty() {
        return Err(format!("no {what} given: use {}", known.join(", ")));
    }
    Ok(out)
}

/// The GEMV kernel choices `auto`, `tensor-cores`, `cuda-cores`, `any` (comma-separated, at
/// least one).
///
/// # Errors
/// A message naming an unknown choice and listing the known ones.
pub fn parse_paths(s: &str) -> Result<Vec<GemvPath>, String> {
    let known: Vec<_> = GemvPath::ALL.iter().map(|p| p.name()).collect();
    parse_choices(s, "GEMV kernel choice", &known, GemvPath::parse)
}

/// The GEMV vector preparations `auto`, `kernel`, `fused` (comma-separated, at least one).
///
/// # Errors
/// A message naming an unknown choice and listing the known ones.
pub fn parse_preps(s: &str) -> Result<Vec<GemvPrep>, String> {
    let known: Vec<_> = GemvPrep::ALL.iter().map(|p| p.name()).collect();
    parse_choices(s, "GEMV vector preparation", &known, GemvPrep::parse)
}

/// One timed BEAM GEMV: the shared [`Row`] (format `beam-gemv`, variant `b<bits>
/// <output>`), plus the width and the dense baselines the values fit.
#[derive(Clone, Debug, Serialize)]
pub struct GemvRow {
    /// Times, rates, % of the ceiling (on the packed bytes: weights and inputs), check.
    #[serde(flatten)]
    pub row: Row,
    /// Width of the weights and inputs.
    pub bits: u32,
    /// Output mode.
    pub output: String,
    /// Output width.
    pub out_bits: u32,
    /// The kernel `BeamGemv::gemv` picked.
    pub kernel: String,
    /// Our int8 GEMV at this shape and batch over this time (`b <= 8`).
    pub speedup_vs_int8: Option<f64>,
    /// Our fp16 GEMV at this shape and batch over this time (`b <= 11`).
    pub speedup_vs_fp16: Option<f64>,
}

/// The GEMV table.
pub fn gemv_table(rows: &[GemvRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>12} {:>3} {:>2} {:<9} {:>3} {:>6} {:>10} {:>8} {:>6} {:>6} {:>8} {:>8} {:>9}  {:<16} check",
        "shape",
        "bat",
        "b",
        "output",
        "out",
        "bits/w",
        "median_us",
        "GB/s",
        "%ceil",
        "%read",
        "vs int8",
        "vs fp16",
        "vs cuBLAS",
        "kernel"
    );
    for g in rows {
        let r = &g.row;
        let _ = writeln!(
            s,
            "{:>12} {:>3} {:>2} {:<9} {:>3} {:>6.2} {:>10.2} {:>8.1} {:>6.1} {:>6.1} {:>8} {:>8} {:>9}  {:<16} {}",
            format!("{}x{}", r.rows, r.cols),
            r.batch,
            g.bits,
            g.output,
            g.out_bits,
            r.bits_per_weight,
            r.median_us,
            r.gbps,
            r.pct_of_ceiling,
            r.pct_of_same_size_read,
            ratio(g.speedup_vs_int8),
            ratio(g.speedup_vs_fp16),
            ratio(r.speedup_vs_cublas),
            g.kernel.strip_prefix("cmv_beam_gemv_").unwrap_or(&g.kernel),
            r.check
        );
    }
    s
}

/// What the GEMV suite writes to `beam-gemv.json`.
#[derive(Clone, Debug, Serialize)]
pub struct GemvReport {
    /// GPU name.
    pub device: String,
    /// Measured read ceiling, GB/s.
    pub ceiling_gbps: f64,
    /// The suite's configuration.
    pub config: GemvConfig,
    /// The timed products.
    pub rows: Vec<GemvRow>,
    /// Configurations a kernel refused.
    pub notes: Vec<String>,
}

impl GemvReport {
    /// The table and notes, as printed.
    pub fn text(&self) -> String {
        let mut s = format!(
            "BEAM GEMV on {} (ceiling {:.1} GB/s; % on the packed weight and input bytes; int8 \
             for b <= 8, fp16 and cuBLAS for b <= 11):\n{}",
            self.device,
            self.ceiling_gbps,
            gemv_table(&self.rows)
        );
        for n in &self.notes {
            let _ = writeln!(s, "note: {n}");
        }
        s
    }
}

/// Writes `beam-gemv.json` and `beam-gemv.txt` into `dir`; returns the paths.
///
/// # Errors
/// [`BenchError::Io`].
pub fn write_gemv_files(report: &GemvReport, dir: &Path) -> Result<Vec<String>, BenchError> {
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| BenchError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let json = dir.join("beam-gemv.json");
    let text =
        serde_json::to_string_pretty(report).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    std::fs::write(&json, text).map_err(io(&json))?;
    let txt = dir.join("beam-gemv.txt");
    std::fs::write(&txt, report.text()).map_err(io(&txt))?;
    Ok(vec![json.display().to_string(), txt.display().to_string()])
}

/// Exact `A x B` for every element (`A` is `m x k`, `B` is `k x n`, row-major values), in
/// parallel over rows.
pub fn exact_product(a: &[u64], b: &[u64], (m, k, n): (usize, usize, usize)) -> Vec<Exact> {
    let rows: Vec<Vec<Exact>> = (0..m)
        .into_par_iter()
        .map(|i| {
            let row = &a[i * k..(i + 1) * k];
            (0..n).map(|j| exact_dot(row, b, n, j)).collect()
        })
        .collect();
    rows.into_iter().flatten().collect()
}

/// Runs the GEMV suite over `bench`'s GPU and configuration; `progress` gets each row.
///
/// # Errors
/// Runtime and packing errors, [`BenchError::Mismatch`] for a failed check.
pub fn run_gemv(
    bench: &mut Baselines<'_>,
    cfg: &GemvConfig,
    progress: &mut dyn FnMut(&GemvRow),
) -> Result<GemvReport, BenchError> {
    let gpu = bench.gpu();
    let bcfg = bench.cfg();
    let outputs = parse_outputs(&cfg.outputs.join(",")).map_err(BenchError::Usage)?;
    let paths = parse_paths(&cfg.paths.join(",")).map_err(BenchError::Usage)?;
    let preps = parse_preps(&cfg.preps.join(",")).map_err(BenchError::Usage)?;
    let mut gvs = paths
        .iter()
        .flat_map(|&p| preps.iter().map(move |&q| (p, q)))
        .map(|(p, q)| BeamGemv::new(gpu).map(|g| (g.with_path(p).with_prep(q), String::new())))
        .collect::<Result<Vec<_>, _>>()
        .map_err(beam_err)?;
    for &(unit_segs, stages, warps) in &cfg.stream_shapes {
        let shape = beam_pack::gpu::StreamShape { unit_segs, stages };
        let g = BeamGemv::new(gpu)
            .map_err(beam_err)?
            .with_path(GemvPath::Stream)
            .with_stream_shape(shape, warps)
            .map_err(beam_err)?;
        gvs.push((g, format!(" {unit_segs}x{stages}x{warps}")));
    }
    for &stages in &cfg.ring_stages {
        let g = BeamGemv::new(gpu)
            .map_err(beam_err)?
            .with_path(GemvPath::CudaRing)
            .with_ring_stages(stages)
            .map_err(beam_err)?;
        gvs.push((g, format!(" ring{stages}")));
    }
    for &slices in &cfg.direct_slices {
        let g = BeamGemv::new(gpu)
            .map_err(beam_err)?
            .with_direct_slices(slices)
            .map_err(beam_err)?;
        gvs.push((g, format!(" direct-s{slices}")));
    }
    let mut report = GemvReport {
        device: gpu.info().name.clone(),
        ceiling_gbps: bench.ceiling_gbps(),
        config: cfg.clone(),
        rows: Vec::new(),
        notes: Vec::new(),
    };
    for &(rows, cols) in &cfg.shapes {
        for &bits in &cfg.bits {
            let a_vals = uniform_values(
                rows * cols,
                bits,
                seed(&[rows as u64, cols as u64, u64::from(bits), 2]),
            );
            let pa =
                PackedMatrix::pack(&a_vals, rows, cols, bits, GEMV_LAYOUT).map_err(beam_err)?;
            let copies = rotation_copies(
                8 * pa.words().len(),
                gpu.info().l2_bytes,
                bcfg.min_rotation_bytes,
            );
            let a = Copies::new(gpu, &pa, copies)?;
            drop(pa);
            for (batch, row_vector) in cfg
                .batches
                .iter()
                .flat_map(|&b| cfg.vectors.iter().map(move |v| (b, v == "row")))
            {
                let x_vals = uniform_values(
                    cols * batch,
                    bits,
                    seed(&[rows as u64, cols as u64, u64::from(bits), batch as u64, 3]),
                );
                let pb = if row_vector {
                    // The vectors as rows: x_vals is the k x n matrix B, row-major.
                    let t: Vec<u64> = (0..cols * batch)
                        .map(|i| x_vals[(i % cols) * batch + i / cols])
                        .collect();
                    PackedMatrix::pack(&t, batch, cols, bits, GEMV_LAYOUT)
                } else {
                    PackedMatrix::pack(&x_vals, cols, batch, bits, GEMV_LAYOUT)
                }
                .map_err(beam_err)?;
                let db = DeviceBeamMatrix::upload(gpu, &pb).map_err(beam_err)?;
                let exact = exact_product(&a_vals, &x_vals, (rows, cols, batch));
                for (&mode, (gv, tag)) in
                    outputs.iter().flat_map(|m| gvs.iter().map(move |g| (m, g)))
                {
                    let mut variant = format!("b{bits} {}", mode.name());
                    if row_vector {
                        variant = format!("{variant} row");
                    }
                    if gv.path() != GemvPath::Auto {
                        variant = format!("{variant} {}{tag}", gv.path().name());
                    } else if !tag.is_empty() {
                        variant = format!("{variant}{tag}");
                    }
                    if gv.prep() != GemvPrep::Auto {
                        variant = format!("{variant} prep-{}", gv.prep().name());
                    }
                    let mut out = if row_vector {
                        BeamGemv::alloc_row_out(gpu, a.get(0), &db, mode.width, GEMV_OUT_LAYOUT)
                    } else {
                        BeamGemm::alloc_out(gpu, a.get(0), &db, mode.width, GEMV_OUT_LAYOUT)
                    }
                    .map_err(beam_err)?;
                    let ovf = mode.overflow;
                    if row_vector && gv.row_launch_is_programmatic(a.get(0), &db, &out, ovf) {
                        // Launched with programmatic dependent launch (Hopper, one full wave).
                        variant = format!("{variant} pdl");
                    }
                    let what = format!("beam-gemv {rows}x{cols} batch {batch} {variant}");
                    let run = |i: usize, out: &mut DeviceBeamOut| {
                        if row_vector {
                            gv.gemv_row(gpu, a.get(i), &db, out, ovf)
                        } else {
                            gv.gemv(gpu, a.get(i), &db, out, ovf)
                        }
                    };
                    match run(0, &mut out) {
                        Ok(()) => {}
                        Err(e) if refused(&e) => {
                            report
                                .notes
                                .push(format!("{what}: the kernel refused the configuration: {e}"));
                            continue;
                        }
                        Err(e) => return Err(beam_err(e)),
                    }
                    let check = |out: &DeviceBeamOut, when: &str| -> Result<(), BenchError> {
                        let m = out.download(gpu).map_err(beam_err)?;
                        check_all(&m, &exact, ovf).map_err(|detail| BenchError::Mismatch {
                            what: format!("{what}{when}"),
                            detail,
                        })
                    };
                    check(&out, "")?;
                    let timings =
                        bcfg.timing
                            .time(gpu, bcfg, copies, |i| -> Result<(), BenchError> {
                                run(i, &mut out).map_err(beam_err)
                            })?;
                    check(&out, " (timed)")?;
                    let (weight_bytes, input_bytes) = (a.get(0).bytes(), db.bytes());
                    let read_us = bench.same_size_read(weight_bytes + input_bytes)?;
                    let fits_fp16 = bits <= 11;
                    let int8_us = if bits <= 8 {
                        bench.median_us(Baseline::CmvInt8, rows, cols, batch)?
                    } else {
                        None
                    };
                    let (fp16_us, cublas_us) = if fits_fp16 {
                        (
                            bench.median_us(Baseline::CmvFp16, rows, cols, batch)?,
                            bench.median_us(Baseline::CublasFp16, rows, cols, batch)?,
                        )
                    } else {
                        (None, None)
                    };
                    let row = Row::derive(RowTimes {
                        name: (GEMV_SUITE, &variant),
                        shape: (rows, cols, batch),
                        bits_per_weight: 8.0 * weight_bytes as f64 / (rows * cols) as f64,
                        parts: vec![Part {
                            name: format!("{} b{bits}", GEMV_LAYOUT.name()),
                            bytes: weight_bytes as u64,
                            read_by_kernel: true,
                        }],
                        weight_bytes,
                        input_bytes,
                        copies,
                        timings: &timings,
                        ceiling_gbps: bench.ceiling_gbps(),
                        read_us,
                        cublas_us,
                        dense_us: None,
                        check: format!("exact (all {})", rows * batch),
                    });
                    let us = row.median_us;
                    let g = GemvRow {
                        row,
                        bits,
                        output: mode.name(),
                        out_bits: out.bits(),
                        kernel: if row_vector {
                            gv.row_kernel_name(a.get(0), &db, out.bits(), ovf)
                        } else {
                            gv.kernel_name(a.get(0), &db, out.bits(), ovf)
                        }
                        .to_string(),
                        speedup_vs_int8: int8_us.map(|t| t / us),
                        speedup_vs_fp16: fp16_us.map(|t| t / us),
                    };
                    progress(&g);
                    report.rows.push(g);
                }
            }
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_the_papers() {
        assert_eq!(parse_size("64MiB").unwrap().side, 2896);
        assert_eq!(parse_size("1GiB").unwrap().side, 11585);
        assert_eq!(parse_size(" 1024 ").unwrap().side, 1024);
        assert_eq!(parse_size("1KiB").unwrap().side, 11);
        assert_eq!(parse_size("1GiB").unwrap().label, "1GiB");
        assert!(parse_size("0").is_err());
        assert!(parse_size("1TB").is_err());
        assert!(parse_size("MiB").is_err());
        for v in [0u64, 1, 3, 4, 15, 16, 1 << 40, u64::MAX] {
            let s = isqrt(v);
            assert!(s * s <= v && (s + 1).checked_mul(s + 1).is_none_or(|q| q > v));
        }
    }

    #[test]
    fn widths_outputs_and_kernels_parse() {
        assert_eq!(parse_bits("1-64").unwrap(), (1..=64).collect::<Vec<_>>());
        assert_eq!(parse_bits("1,2,4-6,2").unwrap(), vec![1, 2, 4, 5, 6]);
        assert!(parse_bits("0").is_err());
        assert!(parse_bits("65").is_err());
        assert!(parse_bits("8-4").is_err());
        assert!(parse_bits("").is_err());
        let o = parse_outputs("sai/ovf,maxv/sat").unwrap();
        assert_eq!(o.len(), 2);
        assert_eq!(o[1].name(), "maxv/sat");
        assert_eq!(parse_outputs("all").unwrap().len(), 6);
        assert!(parse_outputs("sai").is_err());
        assert!(parse_outputs("big/ovf").is_err());
        assert!(parse_outputs("sai/wrap").is_err());
        assert_eq!(parse_kernels("all").unwrap().len(), GemmKernel::ALL.len());
        assert_eq!(
            parse_kernels("guide,mma").unwrap(),
            vec![GemmKernel::Guide, GemmKernel::Mma]
        );
        let e = parse_kernels("guide,fast").unwrap_err();
        assert!(e.contains("fast") && e.contains("nogaps-flex-out"), "{e}");
        let c = GemmConfig::parse(
            DEFAULT_SIZES,
            "1,64",
            "all",
            DEFAULT_GEMM_OUTPUTS,
            0,
            None,
            0,
        )
        .unwrap();
        assert_eq!((c.warmup, c.samples), (1, 1));
        assert_eq!((c.iters_for(2896), c.iters_for(11585)), (10, 3));
        assert!(GemmConfig::parse("64MiB", "1", "all", "all", 1, Some(0), 1).is_err());
        assert!(
            GemvConfig::parse(gemv_shapes(), "1", vec![17], "sai/ovf", ("auto", "auto")).is_err()
        );
        let g = GemvConfig::parse(
            gemv_shapes(),
            "4",
            vec![1],
            "sai/ovf",
            ("auto,cuda-cores,auto", "fused,kernel"),
        )
        .unwrap();
        assert_eq!(g.paths, vec!["auto", "cuda-cores"]);
        assert_eq!(g.preps, vec!["fused", "kernel"]);
        assert!(
            GemvConfig::parse(gemv_shapes(), "4", vec![1], "sai/ovf", ("auto", "gpu")).is_err()
        );
        let e =
            GemvConfig::parse(gemv_shapes(), "4", vec![1], "sai/ovf", ("mma", "auto")).unwrap_err();
        assert!(e.contains("mma") && e.contains("cuda-cores"), "{e}");
        assert!(
            GemvConfig::parse(gemv_shapes(), "4", vec![1], "sai/ovf", (" , ", "auto")).is_err()
        );
        assert_eq!(gemv_shapes().len(), 7);
    }

    #[test]
    fn values_are_uniform_in_range_and_reproducible() {
        for bits in [1, 7, 33, 64] {
            let v = uniform_values(200_000, bits, 9);
            assert_eq!(v, uniform_values(200_000, bits, 9));
            if bits < 64 {
                assert!(v.iter().all(|&x| x < 1u64 << bits));
            }
            // The top bit of the width is set about half the time.
            let top = v.iter().filter(|&&x| x >> (bits - 1) & 1 == 1).count();
            assert!((90_000..110_000).contains(&top), "{bits}: {top}");
        }
    }

    /// `finish` of exact dot products agrees with `beam_pack::gemm_reference` for every
    /// output mode, on values that overflow narrow outputs.
    #[test]
    fn finish_matches_the_reference() {
        for bits in [1u32, 3, 8, 17, 33, 64] {
            let (m, k, n) = (5, 7, 4);
            let a = uniform_values(m * k, bits, 1);
            let b = uniform_values(k * n, bits, 2);
            let pa = PackedMatrix::pack(&a, m, k, bits, Layout::Naive).unwrap();
            let pb = PackedMatrix::pack(&b, k, n, bits, Layout::Naive).unwrap();
            let exact = exact_product(&a, &b, (m, k, n));
            for mode in parse_outputs("all").unwrap() {
                let r =
                    beam_pack::gemm_reference(&pa, &pb, mode.width, mode.overflow, Layout::Slabs)
                        .unwrap();
                let mine: Vec<u64> = exact
                    .iter()
                    .map(|&e| finish(e, r.bits(), mode.overflow))
                    .collect();
                assert_eq!(mine, r.unpack(), "b{bits} {}", mode.name());
                check_all(&r, &exact, mode.overflow).unwrap();
                let s = Sample::new(&a, &b, (m, k, n), 12);
                s.check(r.bits(), mode.overflow, |i, j| r.get(i, j))
                    .unwrap();
                assert_eq!(first_difference(&r, &mine), None);
                assert_eq!(values_of(&r), mine);
            }
        }
    }

    #[test]
    fn the_checks_catch_a_wrong_element() {
        let (m, k, n) = (6, 9, 5);
        let a = uniform_values(m * k, 12, 3);
        let b = uniform_values(k * n, 12, 4);
        let exact = exact_product(&a, &b, (m, k, n));
        let bits = 32;
        let mut vals: Vec<u64> = exact
            .iter()
            .map(|&e| finish(e, bits, Overflow::Ovf))
            .collect();
        let good = PackedMatrix::pack(&vals, m, n, bits, Layout::Nogaps).unwrap();
        let sample = Sample::new(&a, &b, (m, k, n), 64);
        sample
            .check(bits, Overflow::Ovf, |i, j| good.get(i, j))
            .unwrap();
        assert_eq!(sample.positions[..4], [(0, 0), (0, 4), (5, 0), (5, 4)]);
        vals[3 * n + 2] ^= 1;
        let bad = PackedMatrix::pack(&vals, m, n, bits, Layout::Nogaps).unwrap();
        assert!(check_all(&bad, &exact, Overflow::Ovf).is_err());
        assert_eq!(
            first_difference(&bad, &values_of(&good)),
            Some((3, 2, vals[3 * n + 2], vals[3 * n + 2] ^ 1))
        );
        let corner = PackedMatrix::pack(
            &{
                let mut v = values_of(&good);
                v[m * n - 1] += 1;
                v
            },
            m,
            n,
            bits,
            Layout::Naive,
        )
        .unwrap();
        let e = sample
            .check(bits, Overflow::Ovf, |i, j| corner.get(i, j))
            .unwrap_err();
        assert!(e.contains("(5, 4)"), "{e}");
        // Sat clamps, ovf wraps.
        assert_eq!(finish((300, false), 8, Overflow::Sat), 255);
        assert_eq!(finish((300, false), 8, Overflow::Ovf), 44);
        assert_eq!(finish((5, true), 64, Overflow::Sat), u64::MAX);
        assert_eq!(finish((5, true), 64, Overflow::Ovf), 5);
        assert_eq!(exact_width((0, false)), 1);
        assert_eq!(exact_width((255, false)), 8);
        assert_eq!(exact_width((1 << 70, false)), 71);
        assert_eq!(exact_width((0, true)), 129);
    }

    #[test]
    fn maxv_bound_is_what_output_bits_uses() {
        let a = uniform_values(40 * 30, 9, 5);
        let b = uniform_values(30 * 20, 9, 6);
        let pa = PackedMatrix::pack(&a, 40, 30, 9, Layout::Naive).unwrap();
        let pb = PackedMatrix::pack(&b, 30, 20, 9, Layout::Naive).unwrap();
        let bound = maxv_bound(&pa.stats(), &pb.stats());
        assert_eq!(
            exact_width((bound, false)),
            beam_pack::output_bits(&pa, &pb, OutputWidth::Maxv)
        );
        let largest = exact_product(&a, &b, (40, 30, 20))
            .into_iter()
            .max()
            .unwrap();
        assert!(largest.0 <= bound);
        let sample = Sample::new(&a, &b, (40, 30, 20), 50);
        let r = maxv_row("t", 9, &pa.stats(), &pb.stats(), &sample, &HashMap::new());
        assert!(!r.exact_max);
        assert!(r.largest_bits <= r.maxv_bits && r.slack_bits >= 0);
        let mut refs = HashMap::new();
        let vals: Vec<u64> = exact_product(&a, &b, (40, 30, 20))
            .iter()
            .map(|e| e.0 as u64)
            .collect();
        refs.insert(
            (64, Overflow::Ovf),
            Reference {
                kernel: "guide".into(),
                values: vals,
            },
        );
        let r = maxv_row("t", 9, &pa.stats(), &pb.stats(), &sample, &refs);
        assert!(r.exact_max);
        assert_eq!(r.largest, largest.0.to_string());
        assert_eq!(r.largest_bits, exact_width(largest));
        assert_eq!(
            r.slack_bits,
            i64::from(r.maxv_bits) - i64::from(r.largest_bits)
        );
        let t = maxv_table(&[r]);
        assert!(
            t.contains("all outputs") && t.contains(&largest.0.to_string()),
            "{t}"
        );
    }

    fn row(bits: u32, output: &str, kernel: &str, ms: f64) -> GemmRow {
        GemmRow {
            size: "64MiB".into(),
            side: 2896,
            bits,
            output: output.into(),
            out_bits: bits,
            kernel: kernel.into(),
            layout: kernel_layout(GemmKernel::from_name(kernel).unwrap())
                .name()
                .into(),
            a_bytes: 1 << 20,
            b_bytes: 1 << 20,
            out_bytes: 1 << 20,
            copies: 2,
            iters: 3,
            median_ms: ms,
            min_ms: ms,
            max_ms: ms,
            gbps: 1.0,
            gmacs: 1.0,
            speedup_vs_guide: None,
            speedup_vs_tight: None,
            check: "sample 512 exact (first)".into(),
            ok: true,
            same_run_as: None,
        }
    }

    fn rows() -> Vec<GemmRow> {
        vec![
            row(4, "sai/ovf", "guide", 8.0),
            row(4, "sai/ovf", "tight", 4.0),
            row(4, "sai/ovf", "slabs", 2.0),
            row(4, "sai/ovf", "nogaps-flex-out", 1.0),
            row(4, "sai/ovf", "mma", 0.5),
            row(8, "sai/ovf", "guide", 8.0),
            row(8, "sai/ovf", "nogaps", 16.0),
            row(8, "maxv/sat", "guide", 10.0),
            row(8, "maxv/sat", "tight", 5.0),
        ]
    }

    #[test]
    fn speedups_and_summary() {
        let mut r = rows();
        r[3].ok = false;
        r[3].check = "FAILED: x".into();
        fill_speedups(&mut r);
        assert_eq!(r[2].speedup_vs_guide, Some(4.0));
        assert_eq!(r[2].speedup_vs_tight, Some(2.0));
        assert_eq!(r[3].speedup_vs_guide, None, "a failed row has no speedup");
        assert_eq!(r[6].speedup_vs_guide, Some(0.5));
        assert_eq!(r[6].speedup_vs_tight, None, "no tight at b8 sai/ovf");
        assert_eq!(r[8].speedup_vs_guide, Some(2.0));
        let s = summarize(&r);
        assert_eq!(s.len(), 3);
        // The failed nogaps-flex-out (1 ms) is not the best: slabs (2 ms) is.
        assert_eq!(s[0].best_packed, Some(("slabs".into(), 2.0)));
        assert_eq!(s[0].best_speedup(), Some(4.0));
        assert_eq!(s[0].tight_speedup(), Some(2.0));
        assert_eq!(s[0].best_vs_tight(), Some(2.0));
        assert_eq!(s[0].mma_speedup(), Some(16.0));
        assert_eq!(s[1].best_speedup(), Some(0.5));
        assert_eq!(s[2].best_packed, None);
        let t = summary_table(&s);
        assert_eq!(t.lines().count(), 4);
        assert!(t.lines().nth(1).unwrap().contains("4.00x"), "{t}");
        assert!(t.lines().nth(1).unwrap().contains("16.00x"), "{t}");
        let g = gemm_table(&r);
        assert_eq!(g.lines().count(), r.len() + 1);
        assert!(g.contains("FAILED: x") && g.contains("3.00"), "{g}");
    }

    #[test]
    fn merging_keeps_rows_not_measured_again() {
        let run = RunInfo {
            device: "GPU".into(),
            git_revision: "x".into(),
            date: "d".into(),
            config: GemmConfig::parse("64MiB", "4", "all", "all", 1, None, 8).unwrap(),
        };
        let mut old = GemmReport {
            runs: vec![run.clone()],
            rows: rows(),
            summary: Vec::new(),
            maxv: Vec::new(),
            notes: vec!["old".into()],
            failures: Vec::new(),
        };
        old.finish();
        let json = serde_json::to_string(&old).unwrap();
        let old: GemmReport = serde_json::from_str(&json).unwrap();
        let mut new = GemmReport {
            runs: vec![run],
            rows: vec![
                row(4, "sai/ovf", "guide", 4.0),
                row(16, "sai/ovf", "guide", 9.0),
            ],
            summary: Vec::new(),
            maxv: Vec::new(),
            notes: Vec::new(),
            failures: Vec::new(),
        };
        new.merge_older(old);
        assert_eq!(new.rows.len(), rows().len() + 1);
        assert_eq!(new.runs.len(), 2);
        let g: Vec<_> = new
            .rows
            .iter()
            .filter(|r| r.kernel == "guide" && r.bits == 4)
            .collect();
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].median_ms, 4.0, "the new row replaces the old");
        let slabs = new.rows.iter().find(|r| r.kernel == "slabs").unwrap();
        assert_eq!(slabs.speedup_vs_guide, Some(2.0), "speedups recomputed");
        assert!(new.text().contains("note: old"));
        assert_eq!(new.sizes(), vec![("64MiB".to_string(), 2896)]);
    }

    #[test]
    fn log_axis() {
        let ax = LogAxis::around([0.3, 5.0]);
        assert_eq!((ax.lo, ax.hi), (0.25, 8.0));
        assert_eq!(LogAxis::around([]), LogAxis { lo: 1.0, hi: 2.0 });
        let ax = LogAxis { lo: 1.0, hi: 4.0 };
        assert_eq!(ax.y(4.0, 10.0, 100.0), 10.0);
        assert_eq!(ax.y(1.0, 10.0, 100.0), 110.0);
        assert_eq!(ax.y(2.0, 10.0, 100.0), 60.0);
        assert_eq!(ax.y(100.0, 10.0, 100.0), 10.0, "clamped");
    }

    #[test]
    fn the_plot_has_the_papers_grid_and_every_point() {
        let mut r = rows();
        fill_speedups(&mut r);
        let s = summarize(&r);
        let svg = speedup_svg(&s, "64MiB", 2896, "GPU <x>");
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("GPU &lt;x&gt;") && svg.contains("2896 x 2896"));
        assert_eq!(svg.matches(r#"<g class="panel""#).count(), 6);
        for o in [
            "sai/ovf", "c2p2/ovf", "maxv/ovf", "sai/sat", "c2p2/sat", "maxv/sat",
        ] {
            assert!(svg.contains(&format!(r#"data-output="{o}""#)), "{o}");
        }
        // Points: sai/ovf b4 guide, tight, best (nogaps-flex-out, 1 ms), mma; b8 guide, best;
        // maxv/sat b8 guide, tight.
        assert_eq!(svg.matches("<circle").count(), 8);
        assert!(
            svg.contains("<title>best packed b=4: 8.00x</title>"),
            "{svg}"
        );
        assert!(svg.contains("<title>mma b=4: 16.00x</title>"));
        assert!(svg.contains("<title>tight b=8: 2.00x</title>"));
        // The axis spans 0.5x (b8 nogaps) to 16x (mma): 1x lies 1/5 of the way up.
        let ax = LogAxis::around([0.5, 16.0]);
        let y1 = ax.y(1.0, 60.0, 200.0);
        assert_eq!(y1, 60.0 + 200.0 * 0.8);
        assert!(svg.contains(&format!(r#"cy="{y1:.1}""#)));
        // Another size has no points.
        assert_eq!(
            speedup_svg(&s, "1GiB", 11585, "g")
                .matches("<circle")
                .count(),
            0
        );
    }

    #[test]
    fn gemv_table_has_the_baselines() {
        let row = Row::derive(RowTimes {
            name: (GEMV_SUITE, "b4 sai/ovf"),
            shape: (4096, 4096, 1),
            bits_per_weight: 4.0,
            parts: Vec::new(),
            weight_bytes: 4096 * 4096 / 2,
            input_bytes: 4096 / 2,
            copies: 2,
            timings: &cmv_runtime::Timings {
                samples_ms: vec![0.004],
            },
            ceiling_gbps: 4000.0,
            read_us: 2.0,
            cublas_us: Some(12.0),
            dense_us: None,
            check: "exact (all 4096)".into(),
        });
        let g = GemvRow {
            row,
            bits: 4,
            output: "sai/ovf".into(),
            out_bits: 4,
            kernel: "cmv_beam_gemv_nogaps_b4".into(),
            speedup_vs_int8: Some(1.5),
            speedup_vs_fp16: None,
        };
        let t = gemv_table(std::slice::from_ref(&g));
        assert!(t.contains("4096x4096") && t.contains("1.50x") && t.contains("3.00x"));
        assert!(
            t.contains("exact (all 4096)") && t.contains("nogaps_b4"),
            "{t}"
        );
        let json = serde_json::to_value(&g).unwrap();
        assert_eq!(json["format"], "beam-gemv");
        assert_eq!(json["bits"], 4);
    }
}
