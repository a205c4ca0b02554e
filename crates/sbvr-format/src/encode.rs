//! The SBVR encoder: a `rows x cols` matrix as sums of coefficient-weighted bitvectors.
//!
//! # The representation
//! Each row is cut into groups of [`GROUP`] = 128 consecutive columns (the last group of a row
//! is shorter when `cols % 128 != 0`; the columns past `cols` are padding, multiply zero inputs,
//! are ignored by the fit and are given code 0 by whoever packs the codes). With `n = bits`
//! bitvectors, a group is approximated as `w_hat[k] = sum_j c_j b_j[k]`, `b_j[k]` in `{0, 1}`,
//! where `c = (c_0, .., c_{n-1})` is one entry of a shared cache of fp16 coefficient vectors,
//! picked per (row, group) by an index. The values a group can take are the `2^n` subset sums
//! of its entry; each element takes the nearest one, and its `n`-bit code (bit `j` = `b_j[k]`)
//! says which. The subset sum of a code is summed in f64 in increasing `j` (see
//! [`Encoded::value`]); for fp16 coefficients it is exact, and so is the choice of the nearest
//! (ties go to the smaller code; see [`nearest_code`]).
//!
//! # The encoder
//! The public SBVR code (MaverickJune/sbvr, `sbvr/core.py`) searches, group by group, a grid of
//! candidate coefficient vectors (alternating geometric series `s r^j` plus a bias, and a grid
//! between the data's min and max), keeps the one with the smallest MSE, and grows a cache of
//! vectors that later groups reuse when the cached MSE is within about 1% of the recent
//! average. This encoder reaches the same kind of result in three deterministic stages:
//!
//! 1. **Per-group fit** (parallel over rows). Each group is sorted once (its permutation is
//!    kept), with prefix sums of `x` and `x^2`: a candidate vector is then scored by locating
//!    its `2^n - 1` midpoints among the sorted elements (binary searches), each level's squared
//!    error and code histogram following from the prefix sums, in `O(2^n log 128)` rather
//!    than a search per element. The starts: a two's-complement grid (`c_j = s 2^j` for
//!    `j < n-1`, `c_{n-1} = -s 2^(n-1)`) covering the group's extremes, and its mirror image;
//!    the same grids at 0.8, 1 and 1.25 times the step of the MSE-optimal uniform quantizer of
//!    a Gaussian of the group's standard deviation (they clip the tails, which the absmax grid
//!    spends levels on: on Gaussian weights these starts win most groups and cut the 3-bit
//!    error by 5%); an unsigned binary grid for a one-sided group; two alternating geometric
//!    series `g r^j` (`r` = -0.6, -0.85) spanning the group's range, in the spirit of the
//!    original's grid; and, for a group of at most `n` elements, its own values. From the best
//!    start, Lloyd iterations (at most [`EncodeOptions::fit_iters`]): every element takes its
//!    nearest subset sum, then `c` is the least-squares solution for those bits (the `n x n`
//!    normal equations, read off the code histogram by a superset-sum transform, with a tiny
//!    ridge; an unused bitvector keeps its coefficient; a failed solve keeps the old vector),
//!    until the squared error stops falling. The vector is then sorted ascending (the order of
//!    the coefficients does not change the subset sums: this is the canonical form).
//! 2. **Cache** (k-means). The canonical vectors of a seeded random sample of at most
//!    [`EncodeOptions::sample`] non-zero groups are clustered into at most `entries` centres:
//!    k-means++ seeding and Lloyd iterations, Euclidean in coefficient space (absolute
//!    coefficient differences are what the absolute error of the matrix sees). Above 256
//!    centres the clustering is hierarchical (`ceil(sqrt(L))` coarse clusters, each split into
//!    its share of the centres), so that 4096 or 65536 entries stay affordable.
//! 3. **Assignment**. Each group takes, among the centres nearest its own vector (a shortlist of
//!    [`SHORTLIST`]: an exact search of the centres sorted by norm up to 256 centres, through
//!    the 3 nearest of `ceil(sqrt(L))` coarse cells above) and the centre it had in the
//!    previous round, the one with the smallest true squared error over its real elements,
//!    each element taking its nearest subset sum (scored as in stage 1, from the centres'
//!    precomputed sorted sums). Then
//!    `cluster_iters` rounds: every centre becomes the least-squares vector over all the elements
//!    of its groups given their codes, and the groups are reassigned (the error never rises:
//!    each step is optimal given the other). The centres are then rounded to fp16 (clamped to
//!    ±65504; identical ones merged), the groups reassigned a last time against exactly the
//!    stored values, and unused entries dropped (`entries_used <= entries`).
//!
//! Every random choice comes from a SplitMix64 stream seeded by [`EncodeOptions::seed`], and
//! every parallel step computes per-item results that are combined in a fixed order, so the
//! output depends on the weights and the options only, not on the number of threads.

use std::collections::HashMap;

use half::f16;
use rayon::prelude::*;

use cmv_format::{FormatError, Weights, check_finite};

use crate::{Result, SbvrError};

/// Columns per group: one coefficient-cache index per 128 consecutive weights of a row.
pub const GROUP: usize = 128;
/// The fewest bitvectors per group.
pub const MIN_BITS: u32 = 2;
/// The most bitvectors per group.
pub const MAX_BITS: u32 = 8;
/// The largest coefficient cache (indices are u16 above 256 entries).
pub const MAX_ENTRIES: usize = 65536;
/// The default cache size: u8 indices (8 bits per 128 weights). Measured on 4096 x 14336
/// Gaussian weights (std 0.02; the ignored test `accuracy_table`), relative Frobenius error
/// at bits per weight counting indices and cache:
///
/// | bits | L = 256        | L = 4096       | L = 65536      | RTN sym g128   | RTN asym g128  |
/// |------|----------------|----------------|----------------|----------------|----------------|
/// | 2    | 0.3502 @ 2.063 | 0.3502 @ 2.127 | 0.3502 @ 2.158 | 0.7666 @ 2.125 | 0.5004 @ 2.250 |
/// | 3    | 0.1819 @ 3.063 | 0.1816 @ 3.128 | 0.1815 @ 3.179 | 0.2737 @ 3.125 | 0.2138 @ 3.250 |
/// | 4    | 0.0961 @ 4.063 | 0.0954 @ 4.130 | 0.0951 @ 4.196 | 0.1173 @ 4.125 | 0.0997 @ 4.250 |
///
/// Larger caches gain at most 1% of error for 0.07 to 0.13 more bits per weight (a bit halves
/// the error), and rows of scales spread over 4x give the same picture (4 bits: 0.0965,
/// 0.0956, 0.0952).
pub const DEFAULT_ENTRIES: usize = 256;
/// Centres evaluated per group in the assignment (besides its previous one).
pub const SHORTLIST: usize = 6;

/// The most subset sums (`2^MAX_BITS`).
const MAX_POINTS: usize = 1 << MAX_BITS;
/// The largest finite fp16.
const F16_MAX: f64 = 65504.0;
/// Flat k-means and brute-force shortlists up to this many centres; hierarchical above.
const FLAT_MAX: usize = 256;
/// Lloyd iterations of the k-means (it stops earlier once no point moves).
const KMEANS_ITERS: u32 = 12;
/// Coarse cells searched per shortlist when the centres are indexed hierarchically.
const PROBE: usize = 3;
/// The step of the MSE-optimal uniform quantizer with `2^n` levels of a unit Gaussian, for
/// `n` = 2..=8 (Max 1960; Gray and Neuhoff 1998).
const UNIFORM_STEP: [f64; 7] = [0.9957, 0.5860, 0.3352, 0.1881, 0.1041, 0.0569, 0.0308];
/// Relative drop of the squared error under which the per-group fit stops.
const FIT_TOL: f64 = 1e-6;

/// How to encode.
#[derive(Clone, Debug, PartialEq)]
pub struct EncodeOptions {
    /// Bitvectors per group (`n`): bits per weight before indices and cache, 2 to 8.
    pub bits: u32,
    /// Coefficient-cache entries, 1 to 65536 (at most this many are used).
    pub entries: usize,
    /// Seed of the k-means sampling and seeding.
    pub seed: u64,
    /// Lloyd iterations of the per-group fit (0: the best starting grid as is).
    pub fit_iters: u32,
    /// Refinement rounds of the cache (least squares per entry, then reassignment).
    pub cluster_iters: u32,
    /// Groups the k-means clusters at most (a seeded random sample; 0 is taken as 1).
    pub sample: usize,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        Self {
            bits: 4,
            entries: DEFAULT_ENTRIES,
            seed: 0,
            fit_iters: 8,
            cluster_iters: 1,
            sample: 1 << 16,
        }
    }
}

impl EncodeOptions {
    /// Checks the options.
    ///
    /// # Errors
    /// [`SbvrError::Bits`] for `bits` outside `2..=8`, [`SbvrError::Entries`] for `entries`
    /// outside `1..=65536`.
    pub fn validate(&self) -> Result<()> {
        if !(MIN_BITS..=MAX_BITS).contains(&self.bits) {
            return Err(SbvrError::Bits { bits: self.bits });
        }
        if !(1..=MAX_ENTRIES).contains(&self.entries) {
            return Err(SbvrError::Entries {
                entries: self.entries,
            });
        }
        Ok(())
    }
}

/// An encoded matrix: the coefficient cache, the per-group indices and the per-element codes.
#[derive(Clone, Debug, PartialEq)]
pub struct Encoded {
    /// Bitvectors per group.
    pub bits: u32,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// `entries_used x bits` coefficients, row-major (`1 <= entries_used <= options.entries`).
    pub coeffs: Vec<f16>,
    /// `rows x groups` (`groups = cols.div_ceil(128)`), row-major: the cache entry of each
    /// group, `< entries_used`.
    pub index: Vec<u32>,
    /// `rows x cols`, row-major: each element's `bits`-bit code (bit `j` = `b_j`); only the low
    /// `bits` bits are ever set.
    pub codes: Vec<u8>,
}

impl Encoded {
    /// Cache entries (`coeffs.len() / bits`).
    pub fn entries(&self) -> usize {
        self.coeffs.len() / (self.bits as usize).max(1)
    }

    /// Groups per row (`cols.div_ceil(128)`).
    pub fn groups(&self) -> usize {
        self.cols.div_ceil(GROUP)
    }

    /// The coefficients of cache entry `e`.
    ///
    /// # Panics
    /// When `e >= self.entries()`.
    pub fn entry(&self, e: usize) -> &[f16] {
        let n = self.bits as usize;
        &self.coeffs[e * n..(e + 1) * n]
    }

    /// The decoded weight at (`row`, `col`): the sum, in f64 and in increasing `j`, of the
    /// coefficients `coeffs[e * bits + j]` of the set bits `j` of its code, `e` the entry of its
    /// group (`index[row * groups + col / 128]`).
    ///
    /// # Panics
    /// When (`row`, `col`) is outside the matrix or the index is past the cache.
    pub fn value(&self, row: usize, col: usize) -> f64 {
        assert!(
            row < self.rows && col < self.cols,
            "({row}, {col}) is outside the matrix"
        );
        let e = self.index[row * self.groups() + col / GROUP] as usize;
        code_value(self.entry(e), self.codes[row * self.cols + col])
    }

    /// Every decoded weight, `rows x cols` row-major, as f32 (rounded from the f64 sums of
    /// [`value`](Self::value)).
    ///
    /// # Panics
    /// When `bits` is outside 1..=8, an index is past the cache or a buffer is shorter than the
    /// shape says.
    pub fn dequantize(&self) -> Vec<f32> {
        let n = self.bits as usize;
        let groups = self.groups();
        // Each entry's 2^n subset sums, in the same order of additions as `value`.
        let tables: Vec<f64> = self
            .coeffs
            .chunks(n.max(1))
            .flat_map(|c| {
                let c: Vec<f64> = c.iter().map(|&v| f64::from(v)).collect();
                subset_sums(&c)
            })
            .collect();
        let size = 1usize << n;
        let mut out = vec![0f32; self.rows * self.cols];
        if self.cols == 0 {
            return out;
        }
        out.par_chunks_mut(self.cols)
            .zip(self.codes.par_chunks(self.cols))
            .zip(self.index.par_chunks(groups))
            .for_each(|((o, codes), idx)| {
                for ((og, cg), &e) in o.chunks_mut(GROUP).zip(codes.chunks(GROUP)).zip(idx) {
                    let t = &tables[e as usize * size..(e as usize + 1) * size];
                    for (v, &c) in og.iter_mut().zip(cg) {
                        *v = t[usize::from(c) & (size - 1)] as f32;
                    }
                }
            });
        out
    }
}

/// The value of `code` under `coeffs`: the f64 sum of the set bits' coefficients, in increasing
/// bit order (starting from 0.0).
fn code_value(coeffs: &[f16], code: u8) -> f64 {
    let mut acc = 0.0f64;
    for (j, &c) in coeffs.iter().enumerate().take(8) {
        if code >> j & 1 == 1 {
            acc += f64::from(c);
        }
    }
    acc
}

/// The `2^n` subset sums of `coeffs` (`n = coeffs.len()`, at most 8; extra ones are ignored),
/// indexed by code: `sums[code]` adds, in f64 and in increasing `j`, the `coeffs[j]` of the set
/// bits `j` of `code` (the order [`Encoded::value`] adds them in).
pub fn subset_sums(coeffs: &[f64]) -> Vec<f64> {
    let n = coeffs.len().min(MAX_BITS as usize);
    let mut sums = vec![0.0f64; 1 << n];
    for code in 1..sums.len() {
        let top = usize::BITS - 1 - code.leading_zeros();
        sums[code] = sums[code & !(1 << top)] + coeffs[top as usize];
    }
    sums
}

/// The code (index into `points`, the subset sums indexed by code) of the point nearest `x`;
/// among equally near points, the smallest code. A linear scan: the reference the encoder's
/// fast [`SortedSums::nearest`] agrees with.
///
/// Nearness is decided by comparing `2x` with the sum of two candidates (their midpoint), so it
/// is exact whenever those sums are exact, as they are for subset sums of fp16 coefficients
/// and an f32 `x`. `points` holds at most 256 values (codes are `u8`); an empty slice or a NaN
/// `x` gives code 0.
pub fn nearest_code(points: &[f64], x: f64) -> u8 {
    let y = 2.0 * x;
    let mut best = 0usize;
    for (code, &p) in points.iter().enumerate().skip(1) {
        let q = points[best];
        if p == q {
            continue;
        }
        let (lo, hi) = if p < q { (p, q) } else { (q, p) };
        let mid = lo + hi;
        let p_closer = if y < mid {
            p == lo
        } else if y > mid {
            p == hi
        } else {
            false // equally near: keep the smaller code
        };
        if p_closer {
            best = code;
        }
    }
    best as u8
}

/// The subset sums of one coefficient vector, distinct and sorted, each with the smallest code
/// that sums to it, ready for nearest-point queries by binary search.
///
/// Built by merging: the sorted sums of `c_0..c_j` and the same shifted by `c_{j+1}` merge into
/// the sums of `c_0..c_{j+1}` (`2^(n+1)` steps in all, no sort), each sum computed in the order
/// of [`subset_sums`].
#[derive(Clone, Debug)]
pub struct SortedSums {
    vals: [[f64; MAX_POINTS]; 2],
    codes: [[u8; MAX_POINTS]; 2],
    cur: usize,
    /// `thr[i] = vals[i] + vals[i + 1]` (twice the midpoints), padded with +inf to `span`.
    thr: [f64; MAX_POINTS],
    len: usize,
    span: usize,
}

impl Default for SortedSums {
    fn default() -> Self {
        Self::new(&[])
    }
}

impl SortedSums {
    /// The sorted subset sums of `coeffs` (at most 8; extra ones are ignored).
    pub fn new(coeffs: &[f64]) -> Self {
        let mut s = Self {
            vals: [[0.0; MAX_POINTS]; 2],
            codes: [[0; MAX_POINTS]; 2],
            cur: 0,
            thr: [f64::INFINITY; MAX_POINTS],
            len: 1,
            span: 1,
        };
        s.rebuild(coeffs);
        s
    }

    /// Rebuilds for `coeffs` (at most 8; extra ones are ignored), reusing the storage.
    pub fn rebuild(&mut self, coeffs: &[f64]) {
        let n = coeffs.len().min(MAX_BITS as usize);
        let [v0, v1] = &mut self.vals;
        let [c0, c1] = &mut self.codes;
        v0[0] = 0.0;
        c0[0] = 0;
        let mut len = 1;
        for (j, &cj) in coeffs[..n].iter().enumerate() {
            let bit = 1u8 << j;
            len = if j % 2 == 0 {
                merge_shifted(&v0[..len], &c0[..len], cj, bit, v1, c1)
            } else {
                merge_shifted(&v1[..len], &c1[..len], cj, bit, v0, c0)
            };
        }
        self.cur = n % 2;
        self.len = len;
        self.span = len.next_power_of_two();
        let vals = &self.vals[self.cur];
        for i in 0..len - 1 {
            self.thr[i] = vals[i] + vals[i + 1];
        }
        for t in &mut self.thr[len - 1..self.span] {
            *t = f64::INFINITY;
        }
    }

    /// Distinct subset sums.
    pub fn distinct(&self) -> usize {
        self.len
    }

    /// The distinct sums, ascending.
    pub fn values(&self) -> &[f64] {
        &self.vals[self.cur][..self.len]
    }

    /// The smallest code of each of [`values`](Self::values).
    pub fn codes(&self) -> &[u8] {
        &self.codes[self.cur][..self.len]
    }

    /// The nearest sum to `x` and its code, as [`nearest_code`] picks it (ties: smaller code).
    #[inline]
    pub fn nearest(&self, x: f64) -> (u8, f64) {
        let y = 2.0 * x;
        let mut pos = 0;
        let mut step = self.span >> 1;
        while step > 0 {
            if self.thr[pos + step - 1] < y {
                pos += step;
            }
            step >>= 1;
        }
        let vals = &self.vals[self.cur];
        let codes = &self.codes[self.cur];
        if pos + 1 < self.len && self.thr[pos] == y && codes[pos + 1] < codes[pos] {
            return (codes[pos + 1], vals[pos + 1]);
        }
        (codes[pos], vals[pos])
    }
}

/// A borrowed view of one vector's sorted distinct sums (from a [`SortedSums`] or a table).
#[derive(Clone, Copy, Debug)]
struct SumsRef<'a> {
    vals: &'a [f64],
    codes: &'a [u8],
    /// `thr[k] = vals[k] + vals[k + 1]`, `k < len - 1`.
    thr: &'a [f64],
    len: usize,
}

impl SortedSums {
    fn view(&self) -> SumsRef<'_> {
        SumsRef {
            vals: &self.vals[self.cur][..self.len],
            codes: &self.codes[self.cur][..self.len],
            thr: &self.thr[..self.len],
            len: self.len,
        }
    }
}

/// Merges the sorted distinct sums `av` (codes `ac`) with the same shifted by `cj` (codes with
/// `bit` set) into `dv`/`dc`, equal sums merged into the smallest code. Returns the length.
fn merge_shifted(av: &[f64], ac: &[u8], cj: f64, bit: u8, dv: &mut [f64], dc: &mut [u8]) -> usize {
    #[inline]
    fn push(dv: &mut [f64], dc: &mut [u8], o: &mut usize, v: f64, code: u8) {
        if *o > 0 && dv[*o - 1] == v {
            if code < dc[*o - 1] {
                dc[*o - 1] = code;
            }
        } else {
            dv[*o] = v;
            dc[*o] = code;
            *o += 1;
        }
    }
    let len = av.len();
    let (mut i, mut k, mut o) = (0, 0, 0);
    while i < len && k < len {
        let s = av[k] + cj;
        if av[i] <= s {
            push(dv, dc, &mut o, av[i], ac[i]);
            i += 1;
        } else {
            push(dv, dc, &mut o, s, ac[k] | bit);
            k += 1;
        }
    }
    while i < len {
        push(dv, dc, &mut o, av[i], ac[i]);
        i += 1;
    }
    while k < len {
        push(dv, dc, &mut o, av[k] + cj, ac[k] | bit);
        k += 1;
    }
    o
}

/// Encodes a `rows x cols` row-major matrix (see the module docs for the algorithm).
///
/// # Errors
/// [`EncodeOptions::validate`]'s errors; [`FormatError::Shape`] when `rows` or `cols` is 0;
/// [`FormatError::Length`] when `w.len() != rows * cols`; [`FormatError::NonFinite`] (what
/// `"weight"`, the flat index of the first one) for a NaN or infinite weight. Never panics.
pub fn encode(w: &[f32], rows: usize, cols: usize, options: &EncodeOptions) -> Result<Encoded> {
    options.validate()?;
    if rows == 0 || cols == 0 {
        return Err(FormatError::Shape {
            format: "sbvr",
            rows,
            cols,
            rule: "both sides must be at least 1",
        }
        .into());
    }
    Weights::new(w, rows, cols)?;
    check_finite("weight", w)?;

    let ctx = Ctx {
        w,
        cols,
        groups: cols.div_ceil(GROUP),
        n: options.bits as usize,
    };
    let total = rows * ctx.groups;
    let mut rng = SplitMix(options.seed);

    // 1. Each group's own coefficients, canonical (ascending).
    let (vecs, perms) = fit_all(&ctx, rows, options.fit_iters);

    // 2. The cache: k-means on a sample of the non-zero groups' vectors.
    let n = ctx.n;
    let nonzero: Vec<usize> = (0..total)
        .filter(|&g| vecs[g * n..(g + 1) * n].iter().any(|&c| c != 0.0))
        .collect();
    let chosen = sample_indices(nonzero.len(), options.sample.max(1), &mut rng);
    let mut points = Vec::with_capacity(chosen.len() * n);
    for &i in &chosen {
        let g = nonzero[i];
        points.extend_from_slice(&vecs[g * n..(g + 1) * n]);
    }
    let mut centres = cluster(&points, n, options.entries, &mut rng);
    drop(points);
    if centres.is_empty() {
        centres = vec![0.0; n];
    }

    // 3. Assignment and refinement.
    let mut codes = vec![0u8; rows * cols];
    let mut index = vec![0u32; total];
    let mut current: Option<Vec<u32>> = None;
    for _ in 0..options.cluster_iters {
        let ci = CentreIndex::new(&centres, n, &mut rng);
        assign_all(
            &ctx,
            &vecs,
            &perms,
            &centres,
            &ci,
            current.as_deref(),
            &mut codes,
            &mut index,
        );
        refine_centres(&ctx, &codes, &index, &mut centres);
        current = Some(index.clone());
    }

    // Round to fp16, merge duplicates, reassign against the stored values.
    let mut unique: Vec<f16> = Vec::with_capacity(centres.len());
    let mut remap = Vec::with_capacity(centres.len() / n);
    let mut seen: HashMap<Vec<u16>, u32> = HashMap::new();
    for c in centres.chunks(n) {
        let h: Vec<f16> = c.iter().map(|&v| to_f16(v)).collect();
        let key: Vec<u16> = h.iter().map(|v| v.to_bits()).collect();
        let next = seen.len() as u32;
        let id = *seen.entry(key).or_insert(next);
        if id == next {
            unique.extend_from_slice(&h);
        }
        remap.push(id);
    }
    let rounded: Vec<f64> = unique.iter().map(|&v| f64::from(v)).collect();
    if let Some(cur) = current.as_mut() {
        for e in cur.iter_mut() {
            *e = remap[*e as usize];
        }
    }
    let ci = CentreIndex::new(&rounded, n, &mut rng);
    assign_all(
        &ctx,
        &vecs,
        &perms,
        &rounded,
        &ci,
        current.as_deref(),
        &mut codes,
        &mut index,
    );

    // Drop unused entries.
    let mut new_id = vec![u32::MAX; rounded.len() / n];
    let mut coeffs = Vec::new();
    for e in &mut index {
        let old = *e as usize;
        if new_id[old] == u32::MAX {
            new_id[old] = (coeffs.len() / n) as u32;
            coeffs.extend_from_slice(&unique[old * n..(old + 1) * n]);
        }
        *e = new_id[old];
    }
    Ok(Encoded {
        bits: options.bits,
        rows,
        cols,
        coeffs,
        index,
        codes,
    })
}

/// What every stage needs to know about the matrix.
struct Ctx<'a> {
    w: &'a [f32],
    cols: usize,
    groups: usize,
    n: usize,
}

impl Ctx<'_> {
    /// The real elements of group `g` (row-major group number).
    fn group(&self, g: usize) -> &[f32] {
        let (row, gi) = (g / self.groups, g % self.groups);
        let start = row * self.cols + gi * GROUP;
        let end = row * self.cols + ((gi + 1) * GROUP).min(self.cols);
        &self.w[start..end]
    }
}

/// fp16 nearest to `v`, clamped to the finite range.
fn to_f16(v: f64) -> f16 {
    f16::from_f64(v.clamp(-F16_MAX, F16_MAX))
}

/// SplitMix64: a small portable generator (the output must not depend on a crate's version).
#[derive(Clone, Debug)]
struct SplitMix(u64);

impl SplitMix {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

/// `k` of `0..m` chosen at random (all of them when `m <= k`), ascending.
fn sample_indices(m: usize, k: usize, rng: &mut SplitMix) -> Vec<usize> {
    let mut all: Vec<usize> = (0..m).collect();
    if m <= k {
        return all;
    }
    for i in 0..k {
        let j = i + rng.below(m - i);
        all.swap(i, j);
    }
    all.truncate(k);
    all.sort_unstable();
    all
}

/// Per-thread work space.
struct Scratch {
    ss: SortedSums,
    grp: GroupSorted,
    bounds: [usize; MAX_POINTS + 1],
    cnt: [f64; MAX_POINTS],
    sw: [f64; MAX_POINTS],
    top: TopK,
    cells: TopK,
}

impl Scratch {
    fn new() -> Box<Self> {
        Box::new(Self {
            ss: SortedSums::default(),
            grp: GroupSorted::default(),
            bounds: [0; MAX_POINTS + 1],
            cnt: [0.0; MAX_POINTS],
            sw: [0.0; MAX_POINTS],
            top: TopK::default(),
            cells: TopK::default(),
        })
    }
}

/// One group's elements in ascending order, with prefix sums: a candidate coefficient vector
/// is scored by locating its `m - 1` midpoints among the sorted elements (`O(m log 128)`), the
/// squared error and the code histogram of each level coming from the prefix sums, instead of
/// a nearest-sum search per element.
#[derive(Clone, Debug)]
struct GroupSorted {
    len: usize,
    /// `2 x`, ascending, padded with +inf to [`GROUP`].
    y: [f64; GROUP],
    /// `perm[i]`: the position in the group of the `i`-th smallest element.
    perm: [u8; GROUP],
    /// Prefix sums of `x` and `x^2` in ascending order.
    s1: [f64; GROUP + 1],
    s2: [f64; GROUP + 1],
    keys: [u64; GROUP],
}

impl Default for GroupSorted {
    fn default() -> Self {
        Self {
            len: 0,
            y: [f64::INFINITY; GROUP],
            perm: [0; GROUP],
            s1: [0.0; GROUP + 1],
            s2: [0.0; GROUP + 1],
            keys: [0; GROUP],
        }
    }
}

impl GroupSorted {
    /// Sorts the group `x` (at most [`GROUP`] elements), writing its permutation to `perm_out`.
    fn sort(&mut self, x: &[f32], perm_out: &mut [u8]) {
        let len = x.len();
        for (k, (key, &v)) in self.keys.iter_mut().zip(x).enumerate() {
            // An order-preserving map of the f32 bits, the position in the low byte.
            let b = v.to_bits();
            let ord = if b >> 31 == 1 { !b } else { b | 0x8000_0000 };
            *key = u64::from(ord) << 8 | k as u64;
        }
        self.keys[..len].sort_unstable();
        for (p, &key) in perm_out.iter_mut().zip(&self.keys[..len]) {
            *p = key as u8;
        }
        self.gather(x, perm_out);
    }

    /// Loads the group `x` in the order `perm` (from [`sort`](Self::sort)).
    fn gather(&mut self, x: &[f32], perm: &[u8]) {
        let len = x.len();
        self.len = len;
        self.perm[..len].copy_from_slice(&perm[..len]);
        let (mut a, mut b) = (0.0f64, 0.0f64);
        for (i, &p) in perm[..len].iter().enumerate() {
            let v = f64::from(x[usize::from(p)]);
            self.y[i] = 2.0 * v;
            a += v;
            b += v * v;
            self.s1[i + 1] = a;
            self.s2[i + 1] = b;
        }
        self.y[len..].fill(f64::INFINITY);
    }

    fn min(&self) -> f64 {
        self.y[0] / 2.0
    }

    fn max(&self) -> f64 {
        self.y[self.len - 1] / 2.0
    }

    /// The sorted range of every level of `ss`: level `k` (the `k`-th smallest distinct sum)
    /// holds the elements `bounds[k]..bounds[k + 1]`, those with
    /// `thr[k-1] < 2x <= thr[k]`, exactly the ones [`SortedSums::nearest`] sends to it (an
    /// element on `thr[k]` may go to level `k + 1` instead if its code is smaller: see
    /// [`scatter_codes`](Self::scatter_codes)).
    fn levels(&self, ss: &SumsRef, bounds: &mut [usize]) {
        let m = ss.len;
        bounds[0] = 0;
        if m <= 16 {
            // The m - 1 searches side by side, a step of each per round (independent loads).
            let mut pos = [0usize; 16];
            let mut step = GROUP / 2;
            while step > 0 {
                for (p, &t) in pos.iter_mut().zip(&ss.thr[..m - 1]) {
                    *p += step * usize::from(self.y[*p + step - 1] <= t);
                }
                step >>= 1;
            }
            for (k, (&p, &t)) in pos.iter().zip(&ss.thr[..m - 1]).enumerate() {
                bounds[k + 1] = p + usize::from(self.y[p] <= t);
            }
        } else {
            let mut i = 0;
            for k in 0..m - 1 {
                let t = ss.thr[k];
                while i < self.len && self.y[i] <= t {
                    i += 1;
                }
                bounds[k + 1] = i;
            }
        }
        bounds[m] = self.len;
    }

    /// The squared error of the levels (from the prefix sums).
    fn score(&self, ss: &SumsRef, bounds: &[usize]) -> f64 {
        let vals = ss.vals;
        let mut sse = 0.0;
        for (k, &v) in vals.iter().enumerate() {
            let (a, b) = (bounds[k], bounds[k + 1]);
            if b > a {
                let e = (self.s2[b] - self.s2[a]) - 2.0 * v * (self.s1[b] - self.s1[a])
                    + (b - a) as f64 * v * v;
                sse += e.max(0.0);
            }
        }
        sse
    }

    /// The code histogram of the levels (counts and sums of `x`), into `cnt` and `sw`
    /// (cleared first, `2^n` entries).
    fn hist(&self, ss: &SumsRef, bounds: &[usize], n: usize, cnt: &mut [f64], sw: &mut [f64]) {
        cnt[..1 << n].fill(0.0);
        sw[..1 << n].fill(0.0);
        for (k, &code) in ss.codes.iter().enumerate() {
            let (a, b) = (bounds[k], bounds[k + 1]);
            cnt[usize::from(code)] += (b - a) as f64;
            sw[usize::from(code)] += self.s1[b] - self.s1[a];
        }
    }

    /// Every element's code, at its position in the group: its level's code, or, for an
    /// element exactly between two levels, the smaller of their codes (as
    /// [`SortedSums::nearest`] and [`nearest_code`] pick it).
    fn scatter_codes(&self, ss: &SumsRef, bounds: &[usize], out: &mut [u8]) {
        let codes = ss.codes;
        for (k, &code) in codes.iter().enumerate() {
            for &p in &self.perm[bounds[k]..bounds[k + 1]] {
                out[usize::from(p)] = code;
            }
        }
        for k in 0..codes.len() - 1 {
            if codes[k + 1] < codes[k] {
                let t = ss.thr[k];
                let mut i = bounds[k + 1];
                while i > bounds[k] && self.y[i - 1] == t {
                    i -= 1;
                    out[usize::from(self.perm[i])] = codes[k + 1];
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Stage 1: per-group fit.

/// Every group's canonical coefficient vector (`rows * groups * n`) and every group's sort
/// permutation (`rows * cols`, positions within the group).
fn fit_all(ctx: &Ctx, rows: usize, iters: u32) -> (Vec<f64>, Vec<u8>) {
    let n = ctx.n;
    let mut vecs = vec![0.0f64; rows * ctx.groups * n];
    let mut perms = vec![0u8; rows * ctx.cols];
    vecs.par_chunks_mut(ctx.groups * n)
        .zip(perms.par_chunks_mut(ctx.cols))
        .enumerate()
        .for_each_init(Scratch::new, |sc, (row, (out, prow))| {
            for ((gi, c), pg) in out.chunks_mut(n).enumerate().zip(prow.chunks_mut(GROUP)) {
                sc.grp.sort(ctx.group(row * ctx.groups + gi), pg);
                fit_group(n, iters, sc, c);
            }
        });
    (vecs, perms)
}

/// Scores `c` on the loaded group: rebuilds the sums, locates the levels, returns the squared
/// error.
fn score(sc: &mut Scratch, c: &[f64]) -> f64 {
    sc.ss.rebuild(c);
    let v = sc.ss.view();
    sc.grp.levels(&v, &mut sc.bounds);
    sc.grp.score(&v, &sc.bounds)
}

/// Scores entry `e` of `centres` (`n` each) on the loaded group, from `table` when there is
/// one; leaves the levels in `sc.bounds` and returns the squared error.
fn score_entry(
    sc: &mut Scratch,
    table: Option<&SumsTable>,
    centres: &[f64],
    n: usize,
    e: usize,
) -> f64 {
    match table {
        Some(t) => {
            let v = t.view(e);
            sc.grp.levels(&v, &mut sc.bounds);
            sc.grp.score(&v, &sc.bounds)
        }
        None => score(sc, &centres[e * n..(e + 1) * n]),
    }
}

/// Fits the loaded group's coefficients into `out` (ascending).
fn fit_group(n: usize, iters: u32, sc: &mut Scratch, out: &mut [f64]) {
    let (lo, hi) = (sc.grp.min(), sc.grp.max());
    out.fill(0.0);
    if lo == 0.0 && hi == 0.0 {
        return;
    }
    let len = sc.grp.len;
    let size = 1usize << n;
    let half = (1u64 << (n - 1)) as f64;
    let mut starts = [[0.0f64; 8]; 12];
    let mut count = 0;
    // A group of at most n elements: its own values (exact).
    if len <= n {
        for (i, cj) in starts[0].iter_mut().enumerate().take(len) {
            *cj = sc.grp.y[i] / 2.0;
        }
        count += 1;
    }
    // Two's complement grid and its mirror: levels s * (-2^(n-1) ..= 2^(n-1) - 1).
    for sign in [1.0, -1.0] {
        let (top, bottom) = if sign > 0.0 { (hi, -lo) } else { (-lo, hi) };
        let s = (top / (half - 1.0)).max(bottom / half);
        if s > 0.0 {
            let c = &mut starts[count];
            for (j, cj) in c.iter_mut().enumerate().take(n - 1) {
                *cj = sign * s * (1u64 << j) as f64;
            }
            c[n - 1] = -sign * s * half;
            count += 1;
        }
    }
    // The same grids at the step of the MSE-optimal uniform quantizer of a Gaussian of the
    // group's standard deviation (clipping the tails, which an absmax-wide grid wastes levels on).
    let mean = sc.grp.s1[len] / len as f64;
    let var = (sc.grp.s2[len] / len as f64 - mean * mean).max(0.0);
    let step = UNIFORM_STEP[n - 2] * var.sqrt();
    if step > 0.0 {
        for scale in [0.8, 1.0, 1.25] {
            for sign in [1.0, -1.0] {
                let c = &mut starts[count];
                for (j, cj) in c.iter_mut().enumerate().take(n - 1) {
                    *cj = sign * scale * step * (1u64 << j) as f64;
                }
                c[n - 1] = -sign * scale * step * half;
                count += 1;
            }
        }
    }
    // Unsigned binary grid for a one-sided group: levels s * (0 ..= 2^n - 1).
    if lo >= 0.0 || hi <= 0.0 {
        let s = if lo >= 0.0 { hi } else { lo } / (size - 1) as f64;
        let c = &mut starts[count];
        for (j, cj) in c.iter_mut().enumerate().take(n) {
            *cj = s * (1u64 << j) as f64;
        }
        count += 1;
    }
    // Alternating geometric series g r^j, scaled so that the sums span [lo, hi].
    for r in [-0.6f64, -0.85] {
        let c = &mut starts[count];
        let (mut pos, mut neg) = (0.0, 0.0);
        for (j, cj) in c.iter_mut().enumerate().take(n) {
            *cj = r.powi(j as i32);
            if *cj > 0.0 {
                pos += *cj;
            } else {
                neg += *cj;
            }
        }
        // The larger side of the data goes with the positive terms' side.
        let flip = if hi >= -lo { 1.0 } else { -1.0 };
        let g = (hi - lo) / (pos - neg);
        for cj in c.iter_mut().take(n) {
            *cj *= flip * g;
        }
        count += 1;
    }

    // Score the starts; keep the best.
    let mut best = [0.0f64; 8];
    let mut best_sse = f64::INFINITY;
    for start in starts.iter_mut().take(count) {
        for v in start.iter_mut() {
            *v = v.clamp(-F16_MAX, F16_MAX);
        }
        let sse = score(sc, &start[..n]);
        if sse < best_sse {
            best_sse = sse;
            best = *start;
        }
    }

    // Lloyd iterations from the best start.
    if iters > 0 && best_sse > 0.0 {
        score(sc, &best[..n]);
        for _ in 0..iters {
            sc.grp
                .hist(&sc.ss.view(), &sc.bounds, n, &mut sc.cnt, &mut sc.sw);
            let mut next = best;
            least_squares(n, &mut sc.cnt, &mut sc.sw, &best[..n], &mut next[..n]);
            let sse = score(sc, &next[..n]);
            if sse < best_sse {
                let drop = best_sse - sse;
                best_sse = sse;
                best = next;
                if drop <= FIT_TOL * best_sse || best_sse == 0.0 {
                    break;
                }
            } else {
                break;
            }
        }
    }
    out.copy_from_slice(&best[..n]);
    out.sort_by(f64::total_cmp);
}

/// The least-squares coefficients for a code histogram (`cnt[code]` elements summing to
/// `sw[code]`), into `out`: the normal equations `A c = r` with `A_ij` = elements whose codes
/// have bits `i` and `j`, `r_i` = sum of the elements whose codes have bit `i`, read off a
/// superset-sum transform of the histogram (which is left transformed). A bitvector no element
/// uses keeps its `old` coefficient; a tiny ridge (1e-8 of the largest diagonal) keeps the
/// system positive definite when bitvectors coincide; a failed solve keeps `old`. The result is
/// clamped to the fp16 range.
#[allow(clippy::needless_range_loop)] // matrix code reads clearer with indices
fn least_squares(n: usize, cnt: &mut [f64], sw: &mut [f64], old: &[f64], out: &mut [f64]) {
    let size = 1usize << n;
    for i in 0..n {
        let b = 1usize << i;
        for m in 0..size {
            if m & b == 0 {
                cnt[m] += cnt[m | b];
                sw[m] += sw[m | b];
            }
        }
    }
    out[..n].copy_from_slice(&old[..n]);
    let mut act = [0usize; 8];
    let mut na = 0;
    let mut maxd = 0.0f64;
    for i in 0..n {
        let d = cnt[1 << i];
        if d > 0.0 {
            act[na] = i;
            na += 1;
            maxd = maxd.max(d);
        }
    }
    if na == 0 {
        return;
    }
    let ridge = maxd * 1e-8;
    let mut a = [[0.0f64; 8]; 8];
    let mut r = [0.0f64; 8];
    for p in 0..na {
        for q in 0..na {
            a[p][q] = cnt[(1 << act[p]) | (1 << act[q])];
        }
        a[p][p] += ridge;
        r[p] = sw[1 << act[p]];
    }
    // Cholesky, in place in the lower triangle.
    for p in 0..na {
        for q in 0..=p {
            let mut s = a[p][q];
            for k in 0..q {
                s -= a[p][k] * a[q][k];
            }
            if p == q {
                if s.is_nan() || s <= maxd * 1e-14 {
                    return;
                }
                a[p][p] = s.sqrt();
            } else {
                a[p][q] = s / a[q][q];
            }
        }
    }
    let mut y = [0.0f64; 8];
    for p in 0..na {
        let mut s = r[p];
        for k in 0..p {
            s -= a[p][k] * y[k];
        }
        y[p] = s / a[p][p];
    }
    let mut c = [0.0f64; 8];
    for p in (0..na).rev() {
        let mut s = y[p];
        for k in p + 1..na {
            s -= a[k][p] * c[k];
        }
        c[p] = s / a[p][p];
    }
    if c[..na].iter().all(|v| v.is_finite()) {
        for p in 0..na {
            out[act[p]] = c[p].clamp(-F16_MAX, F16_MAX);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Stage 2: k-means.

#[inline]
fn dist2(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

/// The nearest of `centres` (`dim` each) to each of `points`; ties: the first.
fn nearest_each(points: &[f64], centres: &[f64], dim: usize) -> Vec<u32> {
    let scan = NormScan::new(centres, dim, 0..(centres.len() / dim) as u32);
    points
        .par_chunks(dim)
        .with_min_len(256)
        .map_init(TopK::default, |top, p| {
            top.reset(1);
            let q = pad(p);
            scan.query(&q, norm(&q), top);
            top.items[0].1
        })
        .collect()
}

/// k-means (k-means++ seeding, then Lloyd) of `points` (`dim` each) into at most `k` centres
/// (fewer when the points hold fewer distinct ones). Deterministic for `rng`'s state.
fn kmeans(points: &[f64], dim: usize, k: usize, iters: u32, rng: &mut SplitMix) -> Vec<f64> {
    let m = points.len() / dim;
    if m == 0 || k == 0 {
        return Vec::new();
    }
    let pt = |i: usize| &points[i * dim..(i + 1) * dim];
    if m <= k {
        // Every distinct point is a centre.
        let mut order: Vec<usize> = (0..m).collect();
        order.sort_by(|&a, &b| {
            pt(a)
                .iter()
                .zip(pt(b))
                .map(|(x, y)| x.total_cmp(y))
                .find(|o| o.is_ne())
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        order.dedup_by(|a, b| pt(*a) == pt(*b));
        return order.iter().flat_map(|&i| pt(i).iter().copied()).collect();
    }
    let first = rng.below(m);
    let mut centres: Vec<f64> = pt(first).to_vec();
    let mut d2: Vec<f64> = points
        .par_chunks(dim)
        .with_min_len(1024)
        .map(|p| dist2(p, pt(first)))
        .collect();
    while centres.len() / dim < k {
        let total: f64 = d2.iter().sum();
        if total.is_nan() || total <= 0.0 {
            break;
        }
        let r = rng.unit() * total;
        let mut acc = 0.0;
        let mut pick = None;
        let mut last = 0;
        for (i, &d) in d2.iter().enumerate() {
            if d > 0.0 {
                acc += d;
                last = i;
                if acc > r {
                    pick = Some(i);
                    break;
                }
            }
        }
        let c = pt(pick.unwrap_or(last)).to_vec();
        centres.extend_from_slice(&c);
        d2.par_iter_mut()
            .zip(points.par_chunks(dim))
            .with_min_len(1024)
            .for_each(|(d, p)| {
                let e = dist2(p, &c);
                if e < *d {
                    *d = e;
                }
            });
    }
    let kk = centres.len() / dim;
    let mut assign: Vec<u32> = Vec::new();
    for _ in 0..iters {
        let next = nearest_each(points, &centres, dim);
        if next == assign {
            break;
        }
        assign = next;
        let mut sums = vec![0.0f64; kk * dim];
        let mut cnt = vec![0usize; kk];
        for (p, &a) in points.chunks(dim).zip(&assign) {
            let a = a as usize;
            cnt[a] += 1;
            for (s, &v) in sums[a * dim..(a + 1) * dim].iter_mut().zip(p) {
                *s += v;
            }
        }
        for (a, &c) in cnt.iter().enumerate() {
            if c > 0 {
                for t in 0..dim {
                    centres[a * dim + t] = sums[a * dim + t] / c as f64;
                }
            }
        }
    }
    centres
}

/// At most `k` centres for `points`: flat k-means up to [`FLAT_MAX`] centres, else
/// hierarchical (coarse k-means into `ceil(sqrt(k))`, each coarse cluster split into its share
/// of `k`, recursively).
fn cluster(points: &[f64], dim: usize, k: usize, rng: &mut SplitMix) -> Vec<f64> {
    let m = points.len() / dim;
    if k <= FLAT_MAX || m <= k {
        return kmeans(points, dim, k, KMEANS_ITERS, rng);
    }
    let k1 = (k as f64).sqrt().ceil() as usize;
    let coarse = kmeans(points, dim, k1, KMEANS_ITERS, rng);
    let kc = coarse.len() / dim;
    let assign = nearest_each(points, &coarse, dim);
    let mut parts: Vec<Vec<f64>> = vec![Vec::new(); kc];
    for (p, &a) in points.chunks(dim).zip(&assign) {
        parts[a as usize].extend_from_slice(p);
    }
    // Shares proportional to the parts' sizes (largest remainders; k < m so each share stays
    // below its part's size).
    let sizes: Vec<usize> = parts.iter().map(|p| p.len() / dim).collect();
    let mut quota: Vec<usize> = sizes.iter().map(|&s| k * s / m).collect();
    let mut rest = k - quota.iter().sum::<usize>();
    let mut order: Vec<usize> = (0..kc).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse((k * sizes[i]) % m), i));
    for &i in order.iter().cycle().take(kc * 2) {
        if rest == 0 {
            break;
        }
        if quota[i] < sizes[i] {
            quota[i] += 1;
            rest -= 1;
        }
    }
    let seeds: Vec<u64> = (0..kc).map(|_| rng.next_u64()).collect();
    let res: Vec<Vec<f64>> = parts
        .par_iter()
        .zip(quota.par_iter())
        .zip(seeds.par_iter())
        .map(|((p, &q), &s)| cluster(p, dim, q, &mut SplitMix(s)))
        .collect();
    res.concat()
}

// ---------------------------------------------------------------------------------------------
// Stage 3: assignment.

/// The `k` smallest (distance, centre) pairs seen, ascending (ties: smaller centre).
#[derive(Clone, Debug, Default)]
struct TopK {
    items: [(f64, u32); 16],
    len: usize,
    cap: usize,
}

impl TopK {
    fn reset(&mut self, cap: usize) {
        self.len = 0;
        self.cap = cap.min(16);
    }

    /// The largest distance kept once full (+inf before).
    #[inline]
    fn bound(&self) -> f64 {
        if self.len == self.cap && self.cap > 0 {
            self.items[self.len - 1].0
        } else {
            f64::INFINITY
        }
    }

    #[inline]
    fn offer(&mut self, d: f64, i: u32) {
        let less = |a: (f64, u32), b: (f64, u32)| a.0 < b.0 || (a.0 == b.0 && a.1 < b.1);
        if self.len == self.cap {
            if self.cap == 0 || !less((d, i), self.items[self.len - 1]) {
                return;
            }
            self.len -= 1;
        }
        let mut p = self.len;
        while p > 0 && less((d, i), self.items[p - 1]) {
            self.items[p] = self.items[p - 1];
            p -= 1;
        }
        self.items[p] = (d, i);
        self.len += 1;
    }

    fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.items[..self.len].iter().map(|&(_, i)| i)
    }
}

/// A vector padded to 8 coordinates (zeros past `dim`), so distances unroll.
type Pad = [f64; 8];

fn pad(v: &[f64]) -> Pad {
    let mut p = [0.0; 8];
    p[..v.len()].copy_from_slice(v);
    p
}

#[inline]
fn dist2_pad(a: &Pad, b: &Pad) -> f64 {
    let mut s = 0.0;
    for t in 0..8 {
        let d = a[t] - b[t];
        s += d * d;
    }
    s
}

fn norm(p: &Pad) -> f64 {
    p.iter().map(|v| v * v).sum::<f64>().sqrt()
}

/// Points sorted by Euclidean norm: a k-nearest query scans outward from the query's norm
/// and stops once the norm gap alone (a lower bound of the distance) exceeds the k-th best.
/// The result is the exact k nearest (up to rounding), whatever the order of the scan.
#[derive(Clone, Debug, Default)]
struct NormScan {
    ids: Vec<u32>,
    norms: Vec<f64>,
    pts: Vec<Pad>,
}

impl NormScan {
    /// The points `ids` of `points` (`dim` each).
    fn new(points: &[f64], dim: usize, ids: impl Iterator<Item = u32>) -> Self {
        let mut v: Vec<(f64, u32, Pad)> = ids
            .map(|i| {
                let p = pad(&points[i as usize * dim..(i as usize + 1) * dim]);
                (norm(&p), i, p)
            })
            .collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        Self {
            ids: v.iter().map(|e| e.1).collect(),
            norms: v.iter().map(|e| e.0).collect(),
            pts: v.iter().map(|e| e.2).collect(),
        }
    }

    /// Offers the points nearest `q` (norm `qn`) to `top`.
    fn query(&self, q: &Pad, qn: f64, top: &mut TopK) {
        let len = self.norms.len();
        let start = self.norms.partition_point(|&x| x < qn);
        let (mut lo, mut hi) = (start, start);
        loop {
            let gl = if lo > 0 {
                qn - self.norms[lo - 1]
            } else {
                f64::INFINITY
            };
            let gh = if hi < len {
                self.norms[hi] - qn
            } else {
                f64::INFINITY
            };
            let (gap, i) = if gl <= gh {
                (gl, lo.wrapping_sub(1))
            } else {
                (gh, hi)
            };
            if gap == f64::INFINITY || gap * gap > top.bound() {
                break;
            }
            top.offer(dist2_pad(q, &self.pts[i]), self.ids[i]);
            if gl <= gh {
                lo -= 1;
            } else {
                hi += 1;
            }
        }
    }
}

/// Nearest-centre shortlists: one [`NormScan`] of all the centres up to [`FLAT_MAX`], else
/// coarse cells (`ceil(sqrt(L))` k-means cells of the centres, the [`PROBE`] nearest searched).
struct CentreIndex {
    coarse: NormScan,
    cells: Vec<NormScan>,
}

impl CentreIndex {
    fn new(centres: &[f64], dim: usize, rng: &mut SplitMix) -> Self {
        let l = centres.len() / dim;
        if l <= FLAT_MAX {
            return Self {
                coarse: NormScan::default(),
                cells: vec![NormScan::new(centres, dim, 0..l as u32)],
            };
        }
        let k1 = (l as f64).sqrt().ceil() as usize;
        let coarse = kmeans(centres, dim, k1, 6, rng);
        let kc = coarse.len() / dim;
        let assign = nearest_each(centres, &coarse, dim);
        let mut lists = vec![Vec::new(); kc];
        for (i, &a) in assign.iter().enumerate() {
            lists[a as usize].push(i as u32);
        }
        Self {
            coarse: NormScan::new(&coarse, dim, 0..kc as u32),
            cells: lists
                .into_par_iter()
                .map(|ids| NormScan::new(centres, dim, ids.into_iter()))
                .collect(),
        }
    }

    /// The (about) `top.cap` centres nearest `q`, into `top` (`cells` is work space).
    fn shortlist(&self, q: &[f64], top: &mut TopK, cells: &mut TopK) {
        let q = pad(q);
        let qn = norm(&q);
        if self.cells.len() == 1 {
            self.cells[0].query(&q, qn, top);
            return;
        }
        cells.reset(PROBE);
        self.coarse.query(&q, qn, cells);
        for c in cells.ids() {
            self.cells[c as usize].query(&q, qn, top);
        }
    }
}

/// The sorted subset sums of many coefficient vectors at once (when they fit in memory; else
/// each is rebuilt when needed).
struct SumsTable {
    stride: usize,
    vals: Vec<f64>,
    codes: Vec<u8>,
    thr: Vec<f64>,
    lens: Vec<usize>,
}

impl SumsTable {
    /// The table of `centres` (`n` each), or `None` above 2^22 sums.
    fn new(centres: &[f64], n: usize) -> Option<Self> {
        let stride = 1usize << n;
        let l = centres.len() / n;
        if l * stride > 1 << 22 {
            return None;
        }
        let mut t = Self {
            stride,
            vals: vec![0.0; l * stride],
            codes: vec![0; l * stride],
            thr: vec![0.0; l * stride],
            lens: vec![0; l],
        };
        t.vals
            .par_chunks_mut(stride)
            .zip(t.codes.par_chunks_mut(stride))
            .zip(t.thr.par_chunks_mut(stride))
            .zip(t.lens.par_iter_mut())
            .zip(centres.par_chunks(n))
            .for_each_init(SortedSums::default, |ss, ((((v, c), th), len), coeffs)| {
                ss.rebuild(coeffs);
                let r = ss.view();
                v[..r.len].copy_from_slice(r.vals);
                c[..r.len].copy_from_slice(r.codes);
                th[..r.len - 1].copy_from_slice(&r.thr[..r.len - 1]);
                *len = r.len;
            });
        Some(t)
    }

    fn view(&self, e: usize) -> SumsRef<'_> {
        let (a, len) = (e * self.stride, self.lens[e]);
        SumsRef {
            vals: &self.vals[a..a + len],
            codes: &self.codes[a..a + len],
            thr: &self.thr[a..a + len],
            len,
        }
    }
}

/// Assigns every group its best entry among its shortlist and its `current` one (evaluated
/// first, so the error never rises), writing `codes` and `index`. Returns the squared error.
#[allow(clippy::too_many_arguments)]
fn assign_all(
    ctx: &Ctx,
    vecs: &[f64],
    perms: &[u8],
    centres: &[f64],
    ci: &CentreIndex,
    current: Option<&[u32]>,
    codes: &mut [u8],
    index: &mut [u32],
) -> f64 {
    let (n, groups, cols) = (ctx.n, ctx.groups, ctx.cols);
    let table = SumsTable::new(centres, n);
    let table = table.as_ref();
    let sses: Vec<f64> = codes
        .par_chunks_mut(cols)
        .zip(index.par_chunks_mut(groups))
        .enumerate()
        .map_init(Scratch::new, |sc, (row, (crow, irow))| {
            let mut total = 0.0;
            for (gi, slot) in irow.iter_mut().enumerate() {
                let g = row * groups + gi;
                let x = ctx.group(g);
                let off = gi * GROUP;
                sc.grp
                    .gather(x, &perms[row * cols + off..row * cols + off + x.len()]);
                sc.top.reset(SHORTLIST);
                ci.shortlist(&vecs[g * n..(g + 1) * n], &mut sc.top, &mut sc.cells);
                let mut cands = [0u32; 17];
                let mut nc = 0;
                let cur = current.map(|c| c[g]);
                if let Some(e) = cur {
                    cands[0] = e;
                    nc = 1;
                }
                for e in sc.top.ids() {
                    if Some(e) != cur {
                        cands[nc] = e;
                        nc += 1;
                    }
                }
                let mut best = f64::INFINITY;
                let mut best_e = cands[0];
                let mut last = u32::MAX;
                for &e in &cands[..nc] {
                    let sse = score_entry(sc, table, centres, n, e as usize);
                    last = e;
                    if sse < best {
                        best = sse;
                        best_e = e;
                        if best == 0.0 {
                            break;
                        }
                    }
                }
                if last != best_e {
                    score_entry(sc, table, centres, n, best_e as usize);
                }
                let v = match table {
                    Some(t) => t.view(best_e as usize),
                    None => sc.ss.view(),
                };
                sc.grp
                    .scatter_codes(&v, &sc.bounds, &mut crow[off..off + x.len()]);
                *slot = best_e;
                total += best;
            }
            total
        })
        .collect();
    sses.iter().sum()
}

/// Moves every used centre to the least-squares vector over all the elements of its groups
/// given their codes (then sorts it ascending; the codes are recomputed by the next
/// assignment).
fn refine_centres(ctx: &Ctx, codes: &[u8], index: &[u32], centres: &mut [f64]) {
    let n = ctx.n;
    let l = centres.len() / n;
    let mut start = vec![0usize; l + 1];
    for &e in index {
        start[e as usize + 1] += 1;
    }
    for e in 0..l {
        start[e + 1] += start[e];
    }
    let mut fill = start.clone();
    let mut members = vec![0u32; index.len()];
    for (g, &e) in index.iter().enumerate() {
        members[fill[e as usize]] = g as u32;
        fill[e as usize] += 1;
    }
    let size = 1usize << n;
    centres.par_chunks_mut(n).enumerate().for_each_init(
        || (vec![0.0f64; MAX_POINTS], vec![0.0f64; MAX_POINTS]),
        |(cnt, sw), (e, c)| {
            let list = &members[start[e]..start[e + 1]];
            if list.is_empty() {
                return;
            }
            cnt[..size].fill(0.0);
            sw[..size].fill(0.0);
            for &g in list {
                let g = g as usize;
                let (row, gi) = (g / ctx.groups, g % ctx.groups);
                let x = ctx.group(g);
                let off = row * ctx.cols + gi * GROUP;
                for (&code, &xi) in codes[off..off + x.len()].iter().zip(x) {
                    cnt[usize::from(code)] += 1.0;
                    sw[usize::from(code)] += f64::from(xi);
                }
            }
            let old = [c.to_vec(), vec![0.0; 8 - n]].concat();
            least_squares(n, cnt, sw, &old, c);
            c.sort_by(f64::total_cmp);
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rtn::{relative_error, rtn_symmetric};
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use rand_distr::{Distribution, Normal};

    fn gaussian(rows: usize, cols: usize, std: f32, seed: u64) -> Vec<f32> {
        let mut rng = SmallRng::seed_from_u64(seed);
        let d = Normal::new(0.0f32, std).unwrap();
        (0..rows * cols).map(|_| d.sample(&mut rng)).collect()
    }

    fn opts(bits: u32, entries: usize) -> EncodeOptions {
        EncodeOptions {
            bits,
            entries,
            ..EncodeOptions::default()
        }
    }

    /// The invariants every encoding keeps.
    fn check_invariants(e: &Encoded, o: &EncodeOptions) {
        let n = e.bits as usize;
        assert_eq!(e.bits, o.bits);
        assert_eq!(e.codes.len(), e.rows * e.cols);
        assert_eq!(e.index.len(), e.rows * e.groups());
        assert_eq!(e.coeffs.len() % n, 0);
        let used = e.entries();
        assert!(used >= 1 && used <= o.entries, "{used} entries");
        assert!(e.index.iter().all(|&i| (i as usize) < used));
        assert!(e.codes.iter().all(|&c| u32::from(c) >> e.bits == 0));
        assert!(e.coeffs.iter().all(|c| c.is_finite()));
        // Every entry is used.
        let mut seen = vec![false; used];
        for &i in &e.index {
            seen[i as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }

    /// Each code is the nearest subset sum of its entry (ties: smaller code).
    fn check_nearest(w: &[f32], e: &Encoded) {
        let n = e.bits as usize;
        let groups = e.groups();
        for r in 0..e.rows {
            for c in 0..e.cols {
                let ent = e.index[r * groups + c / GROUP] as usize;
                let coeffs: Vec<f64> = e.coeffs[ent * n..(ent + 1) * n]
                    .iter()
                    .map(|&v| f64::from(v))
                    .collect();
                let sums = subset_sums(&coeffs);
                let want = nearest_code(&sums, f64::from(w[r * e.cols + c]));
                assert_eq!(e.codes[r * e.cols + c], want, "({r}, {c})");
            }
        }
    }

    #[test]
    fn subset_sums_and_nearest() {
        let c = [1.0, -2.0, 0.5];
        let s = subset_sums(&c);
        assert_eq!(s, vec![0.0, 1.0, -2.0, -1.0, 0.5, 1.5, -1.5, -0.5]);
        assert_eq!(nearest_code(&s, 0.1), 0);
        assert_eq!(nearest_code(&s, 0.3), 4);
        assert_eq!(nearest_code(&s, 100.0), 5);
        assert_eq!(nearest_code(&s, -100.0), 2);
        // Midway between 0 (code 0) and 0.5 (code 4): the smaller code.
        assert_eq!(nearest_code(&s, 0.25), 0);
        // Midway between -0.5 (code 7) and -1.0 (code 3).
        assert_eq!(nearest_code(&s, -0.75), 3);
        // Duplicated sums: 1 + (-1) = 0 = code 0; 1 = codes 1 and 4 (c = [1, -1, 1]).
        let s = subset_sums(&[1.0, -1.0, 1.0]);
        assert_eq!(nearest_code(&s, 0.01), 0);
        assert_eq!(nearest_code(&s, 0.9), 1);
        assert_eq!(nearest_code(&s, 2.2), 5);
        assert_eq!(nearest_code(&[], 1.0), 0);
        let ss = SortedSums::new(&[1.0, -1.0, 1.0]);
        assert_eq!(ss.values(), &[-1.0, 0.0, 1.0, 2.0]);
        assert_eq!(ss.codes(), &[2, 0, 1, 5]);
    }

    #[test]
    fn sorted_sums_agree_with_the_linear_scan() {
        let mut rng = SmallRng::seed_from_u64(7);
        let mut ss = SortedSums::default();
        for trial in 0..300 {
            let n = 2 + trial % 7;
            // fp16 coefficients, sometimes repeated or zero, so sums collide and midpoints
            // are hit exactly.
            let pool: Vec<f64> = (0..4)
                .map(|_| f64::from(f16::from_f32(rng.gen_range(-2.0..2.0))))
                .collect();
            let c: Vec<f64> = (0..n)
                .map(|_| match rng.gen_range(0..6) {
                    0 => 0.0,
                    1..=2 => pool[rng.gen_range(0..pool.len())],
                    _ => f64::from(f16::from_f32(rng.gen_range(-2.0..2.0))),
                })
                .collect();
            ss.rebuild(&c);
            let sums = subset_sums(&c);
            // Sums are distinct and ascending, with the smallest code.
            assert!(ss.values().windows(2).all(|p| p[0] < p[1]));
            for (&v, &code) in ss.values().iter().zip(ss.codes()) {
                assert_eq!(sums[usize::from(code)], v);
                let min = sums.iter().position(|&s| s == v).unwrap();
                assert_eq!(usize::from(code), min);
            }
            let mids: Vec<f64> = ss
                .values()
                .windows(2)
                .map(|p| (p[0] + p[1]) / 2.0)
                .collect();
            for k in 0..64 {
                let x = if k % 3 == 0 && !mids.is_empty() {
                    mids[rng.gen_range(0..mids.len())]
                } else {
                    f64::from(rng.gen_range(-8.0f32..8.0))
                };
                let (code, v) = ss.nearest(x);
                assert_eq!(code, nearest_code(&sums, x), "c {c:?} x {x}");
                assert_eq!(v, sums[usize::from(code)]);
            }
        }
    }

    #[test]
    fn least_squares_solves_and_keeps_unused() {
        // Elements with codes 1 (value 3), 2 (value 5) and 3 (value 8.2): c = (3.1, 5.1)-ish.
        let mut cnt = vec![0.0; 4];
        let mut sw = vec![0.0; 4];
        for (code, x) in [(1, 3.0), (2, 5.0), (3, 8.2), (1, 3.0), (2, 5.0)] {
            cnt[code] += 1.0;
            sw[code] += x;
        }
        let mut out = [0.0; 2];
        least_squares(2, &mut cnt, &mut sw, &[1.0, 1.0], &mut out);
        // Normal equations: [[3,1],[1,3]] c = [14.2, 18.2].
        assert!(
            (out[0] - 3.05).abs() < 1e-6 && (out[1] - 5.05).abs() < 1e-6,
            "{out:?}"
        );
        // Bit 1 unused: it keeps its old value; bit 0 is the mean of its elements.
        let mut cnt = vec![0.0, 2.0, 0.0, 0.0];
        let mut sw = vec![0.0, 7.0, 0.0, 0.0];
        least_squares(2, &mut cnt, &mut sw, &[1.0, -9.0], &mut out);
        assert!((out[0] - 3.5).abs() < 1e-6 && out[1] == -9.0, "{out:?}");
        // Bits always together: the sum splits, the total is fitted.
        let mut cnt = vec![0.0, 0.0, 0.0, 4.0];
        let mut sw = vec![0.0, 0.0, 0.0, 10.0];
        least_squares(2, &mut cnt, &mut sw, &[0.0, 0.0], &mut out);
        assert!((out[0] + out[1] - 2.5).abs() < 1e-6, "{out:?}");
    }

    #[test]
    fn options_are_validated() {
        assert!(EncodeOptions::default().validate().is_ok());
        for bits in [0, 1, 9, 32] {
            let e = opts(bits, 256).validate().unwrap_err();
            assert!(matches!(e, SbvrError::Bits { bits: b } if b == bits), "{e}");
            let e = encode(&[1.0], 1, 1, &opts(bits, 256)).unwrap_err();
            assert!(matches!(e, SbvrError::Bits { .. }), "{e}");
        }
        for entries in [0, 65537, usize::MAX] {
            let e = opts(4, entries).validate().unwrap_err();
            assert!(
                matches!(e, SbvrError::Entries { entries: x } if x == entries),
                "{e}"
            );
        }
        assert!(opts(2, 1).validate().is_ok() && opts(8, 65536).validate().is_ok());
    }

    #[test]
    fn bad_inputs_are_errors() {
        let o = EncodeOptions::default();
        let e = encode(&[], 0, 4, &o).unwrap_err();
        assert!(
            matches!(
                e,
                SbvrError::Format(FormatError::Shape {
                    rows: 0,
                    cols: 4,
                    ..
                })
            ),
            "{e}"
        );
        let e = encode(&[], 3, 0, &o).unwrap_err();
        assert!(
            matches!(e, SbvrError::Format(FormatError::Shape { .. })),
            "{e}"
        );
        let e = encode(&[0.0; 5], 2, 3, &o).unwrap_err();
        assert!(
            matches!(
                e,
                SbvrError::Format(FormatError::Length {
                    got: 5,
                    expected: 6,
                    ..
                })
            ),
            "{e}"
        );
        let e = encode(&[0.0; 5], usize::MAX, 3, &o).unwrap_err();
        assert!(
            matches!(e, SbvrError::Format(FormatError::Length { .. })),
            "{e}"
        );
        let mut w = gaussian(4, 40, 1.0, 1);
        w[77] = f32::NAN;
        w[100] = f32::INFINITY;
        let e = encode(&w, 4, 40, &o).unwrap_err();
        assert!(
            matches!(
                e,
                SbvrError::Format(FormatError::NonFinite {
                    what: "weight",
                    index: 77,
                    ..
                })
            ),
            "{e}"
        );
        w[77] = 0.5;
        let e = encode(&w, 4, 40, &o).unwrap_err();
        assert!(
            matches!(e, SbvrError::Format(FormatError::NonFinite { index: 100, value, .. }) if value == f64::INFINITY),
            "{e}"
        );
    }

    #[test]
    fn round_trip_all_bits() {
        let (rows, cols) = (16, 384);
        let w = gaussian(rows, cols, 0.02, 3);
        let mut last = f64::INFINITY;
        for bits in MIN_BITS..=MAX_BITS {
            let o = opts(bits, 16);
            let e = encode(&w, rows, cols, &o).unwrap();
            check_invariants(&e, &o);
            let d = e.dequantize();
            for (i, &v) in d.iter().enumerate() {
                assert_eq!(v, e.value(i / cols, i % cols) as f32);
            }
            let err = relative_error(&w, &d);
            // Generous bounds (the uniform-grid error of 2^bits levels over +-3 sigma, times 2).
            let bound = 2.0 * 6.0 / ((1u64 << bits) as f64 * 12f64.sqrt());
            assert!(err < bound, "bits {bits}: {err} >= {bound}");
            assert!(err < last, "bits {bits}: {err} not below {last}");
            last = err;
            if bits == 4 {
                check_nearest(&w, &e);
            }
        }
    }

    #[test]
    fn deterministic_for_a_seed_and_any_thread_count() {
        let (rows, cols) = (24, 300);
        let w = gaussian(rows, cols, 1.0, 5);
        let o = EncodeOptions {
            entries: 8,
            sample: 40,
            ..EncodeOptions::default()
        };
        let run = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| encode(&w, rows, cols, &o).unwrap())
        };
        let a = run(1);
        assert_eq!(a, run(3));
        assert_eq!(a, encode(&w, rows, cols, &o).unwrap());
        // Another seed samples other groups: some other cache.
        let b = encode(
            &w,
            rows,
            cols,
            &EncodeOptions {
                seed: 99,
                ..o.clone()
            },
        )
        .unwrap();
        check_invariants(&b, &o);
        assert_ne!(a.coeffs, b.coeffs);
    }

    #[test]
    fn hierarchical_cache() {
        // More than FLAT_MAX entries: the hierarchical k-means and index.
        let (rows, cols) = (80, 512);
        let w = gaussian(rows, cols, 1.0, 11);
        let o = EncodeOptions {
            entries: 300,
            cluster_iters: 1,
            ..EncodeOptions::default()
        };
        let e = encode(&w, rows, cols, &o).unwrap();
        check_invariants(&e, &o);
        assert!(e.entries() > FLAT_MAX, "{}", e.entries());
        let small = encode(&w, rows, cols, &opts(4, 4)).unwrap();
        assert!(relative_error(&w, &e.dequantize()) < relative_error(&w, &small.dequantize()));
    }

    #[test]
    fn padding_is_ignored() {
        let mut rng = SmallRng::seed_from_u64(13);
        for cols in [1usize, 2, 130, 200] {
            let rows = 6;
            let w: Vec<f32> = (0..rows * cols).map(|_| rng.gen_range(-3.0..3.0)).collect();
            // As many entries as groups: every group may keep its own fit.
            let o = EncodeOptions {
                entries: 64,
                ..EncodeOptions::default()
            };
            let e = encode(&w, rows, cols, &o).unwrap();
            check_invariants(&e, &o);
            check_nearest(&w, &e);
            let d = e.dequantize();
            assert_eq!(d.len(), rows * cols);
            // The short last groups (1, 2, 2, 72 elements) are fitted on their real elements
            // alone: groups of at most 2 are exact up to fp16 rounding.
            for r in 0..rows {
                for c in (cols / GROUP) * GROUP..cols {
                    let (x, y) = (w[r * cols + c], d[r * cols + c]);
                    if cols % GROUP <= 2 {
                        assert!(
                            (x - y).abs() <= 3e-3 * x.abs().max(1e-3),
                            "cols {cols}: {x} vs {y}"
                        );
                    }
                }
            }
            if cols == 200 {
                // The 72-element tail is no worse than a full group fitted alike.
                let tail: f64 = (0..rows)
                    .flat_map(|r| (128..200).map(move |c| r * 200 + c))
                    .map(|i| f64::from(w[i] - d[i]).powi(2))
                    .sum::<f64>()
                    / (rows * 72) as f64;
                assert!(tail.sqrt() < 0.3, "tail rms {}", tail.sqrt());
            }
        }
    }

    #[test]
    fn zero_rows_and_constant_groups() {
        let (rows, cols) = (6, 256);
        let mut w = gaussian(rows, cols, 0.5, 17);
        w[2 * cols..3 * cols].fill(0.0); // a zero row
        w[4 * cols..4 * cols + 128].fill(0.37); // constant groups
        w[4 * cols + 128..5 * cols].fill(-1234.5);
        w[5 * cols..5 * cols + 128].fill(1e-3);
        let o = opts(4, 64);
        let e = encode(&w, rows, cols, &o).unwrap();
        check_invariants(&e, &o);
        let d = e.dequantize();
        assert!(d[2 * cols..3 * cols].iter().all(|&v| v == 0.0));
        assert!(e.codes[2 * cols..3 * cols].iter().all(|&c| c == 0));
        for (range, v) in [
            (4 * cols..4 * cols + 128, 0.37f32),
            (4 * cols + 128..5 * cols, -1234.5),
            (5 * cols..5 * cols + 128, 1e-3),
        ] {
            for &y in &d[range] {
                assert!((y - v).abs() <= 1e-3 * v.abs(), "{y} vs {v}");
            }
        }
        // An all-zero matrix: one entry, every code 0, exact.
        let z = vec![0.0f32; 3 * 300];
        let e = encode(&z, 3, 300, &o).unwrap();
        check_invariants(&e, &o);
        assert_eq!(e.entries(), 1);
        assert!(e.codes.iter().all(|&c| c == 0) && e.dequantize() == z);
        // One entry for a whole matrix.
        let e = encode(&w, rows, cols, &opts(3, 1)).unwrap();
        check_invariants(&e, &opts(3, 1));
        assert_eq!(e.entries(), 1);
        // Huge and tiny weights stay finite.
        let big: Vec<f32> = (0..256)
            .map(|i| if i % 2 == 0 { 3e38 } else { -1e-30 })
            .collect();
        let e = encode(&big, 2, 128, &o).unwrap();
        check_invariants(&e, &o);
        assert!(e.dequantize().iter().all(|v| v.is_finite()));
    }

    #[test]
    fn beats_rtn4_g128_on_gaussian() {
        let (rows, cols) = (256, 1024);
        let w = gaussian(rows, cols, 0.02, 21);
        let e = encode(&w, rows, cols, &EncodeOptions::default()).unwrap();
        let sbvr = relative_error(&w, &e.dequantize());
        let rtn = relative_error(&w, &rtn_symmetric(&w, rows, cols, 4).unwrap());
        assert!(sbvr <= rtn, "SBVR-4 {sbvr} > RTN-4 g128 {rtn}");
    }

    /// `cargo test --release -p sbvr-format --lib -- --ignored --nocapture encode_time`
    /// `cargo test --release -p sbvr-format --lib -- --ignored --nocapture accuracy_table`
    #[test]
    #[ignore]
    fn accuracy_table() {
        use crate::rtn::{
            bits_per_weight_rtn_asymmetric, bits_per_weight_rtn_symmetric, bits_per_weight_sbvr,
            rtn_asymmetric,
        };
        let (rows, cols) = (4096, 14336);
        let g = gaussian(rows, cols, 0.02, 1);
        let mut rng = SmallRng::seed_from_u64(2);
        let mut scaled = g.clone();
        for row in scaled.chunks_mut(cols) {
            let s = 4f32.powf(rng.gen_range(0.0..1.0));
            row.iter_mut().for_each(|v| *v *= s);
        }
        let sample: usize = std::env::var("SBVR_SAMPLE")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1 << 16);
        for (name, w) in [("gaussian", &g), ("row-scaled", &scaled)] {
            for bits in [2u32, 3, 4] {
                let sym = relative_error(w, &rtn_symmetric(w, rows, cols, bits).unwrap());
                let asym = relative_error(w, &rtn_asymmetric(w, rows, cols, bits).unwrap());
                println!(
                    "| {name} | RTN-{bits} sym g128 | {:.4} | {sym:.5} | |",
                    bits_per_weight_rtn_symmetric(bits)
                );
                println!(
                    "| {name} | RTN-{bits} asym g128 | {:.4} | {asym:.5} | |",
                    bits_per_weight_rtn_asymmetric(bits)
                );
                for entries in [256usize, 4096, 65536] {
                    let o = EncodeOptions {
                        bits,
                        entries,
                        sample,
                        ..EncodeOptions::default()
                    };
                    let t = std::time::Instant::now();
                    let e = encode(w, rows, cols, &o).unwrap();
                    let secs = t.elapsed().as_secs_f64();
                    let err = relative_error(w, &e.dequantize());
                    let bpw = bits_per_weight_sbvr(bits, e.entries(), rows, cols);
                    println!(
                        "| {name} | SBVR-{bits} L={entries} (used {}) | {bpw:.4} | {err:.5} | {secs:.1} s |",
                        e.entries()
                    );
                }
            }
        }
    }

    #[test]
    #[ignore]
    fn encode_time_4096x14336() {
        let (rows, cols) = (4096, 14336);
        let w = gaussian(rows, cols, 0.02, 1);
        let o = EncodeOptions::default();
        let t = std::time::Instant::now();
        let e = encode(&w, rows, cols, &o).unwrap();
        let secs = t.elapsed().as_secs_f64();
        let err = relative_error(&w, &e.dequantize());
        println!(
            "{rows}x{cols} {o:?}: {secs:.2} s, {} entries, error {err:.5}",
            e.entries()
        );
    }
}
