//! The encoder: per codebook (tile and residual stage), k-means++ on a sample of the tile's
//! vectors, Lloyd iterations, assignment of every vector, then the next stage on what is left;
//! finally each codebook is reordered by access frequency (hottest entry first).
//!
//! Distances are importance-weighted per column (`sum_j w_j (x_j - c_j)^2`, `w_j` = 1 without an
//! importance vector, 0 on the padding past the last column). Deterministic for a seed: each
//! codebook draws from its own [`SplitMix64`] stream, and every parallel step is a map whose
//! results do not depend on the number of threads.

use cmv_format::check_finite;
use half::f16;
use rayon::prelude::*;

use crate::config::{Geometry, VqConfig, put_code};
use crate::error::{Result, VqError};

/// The encoder's options.
#[derive(Clone, Debug, PartialEq)]
pub struct EncodeOptions {
    /// The configuration (default GPTVQ-2).
    pub config: VqConfig,
    /// The seed of every random choice.
    pub seed: u64,
    /// Lloyd iterations per codebook.
    pub iters: usize,
    /// Vectors sampled per codebook for the k-means fit (all are assigned afterwards); at
    /// least 8 x the number of entries are used (all of them in smaller tiles).
    pub sample: usize,
    /// One importance per column (finite, >= 0), e.g. the diagonal of `X^T X`.
    pub importance: Option<Vec<f32>>,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        Self {
            config: VqConfig::gptvq2(),
            seed: 0x5eed,
            iters: 8,
            sample: 4096,
            importance: None,
        }
    }
}

impl EncodeOptions {
    /// The default options with another configuration.
    pub fn with(config: VqConfig) -> Self {
        Self {
            config,
            ..Self::default()
        }
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): the encoder's random numbers.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

/// The largest finite fp16; codebook values are clamped to it.
const F16_MAX: f32 = 65504.0;

fn round16(x: f32) -> f32 {
    f16::from_f32(x.clamp(-F16_MAX, F16_MAX)).to_f32()
}

/// Weighted squared distances from `x` to the entries `e0 .. e0 + d.len()` of a transposed
/// codebook (`cbt[j * k + e]`) into `d`.
#[inline(always)]
fn distances(x: &[f32], w: &[f32], cbt: &[f32], k: usize, e0: usize, d: &mut [f32]) {
    d.fill(0.0);
    for (j, (&xj, &wj)) in x.iter().zip(w).enumerate() {
        if wj == 0.0 {
            continue;
        }
        let row = &cbt[j * k + e0..j * k + e0 + d.len()];
        for (de, &c) in d.iter_mut().zip(row) {
            let t = xj - c;
            *de += wj * t * t;
        }
    }
}

/// The distances of `x` to the entries `e0 .. e0 + d.len()` ([`distances`], into `d`) and the
/// first nearest of them ([`first_min`]). On x86-64 with AVX2 (detected at run time) the same
/// code is compiled for 8 lanes instead of SSE's 4: the same operations per entry in the same
/// order (no FMA contraction: FMA is not enabled), so the same distances bit for bit.
#[inline(always)]
fn block_nearest(
    x: &[f32],
    w: &[f32],
    cbt: &[f32],
    k: usize,
    e0: usize,
    d: &mut [f32],
) -> Option<(usize, f32)> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above), the only requirement of a
        // `target_feature(enable = "avx2")` function beyond its safe signature.
        return unsafe { block_nearest_avx2(x, w, cbt, k, e0, d) };
    }
    distances(x, w, cbt, k, e0, d);
    first_min(d)
}

/// [`block_nearest`] compiled with AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn block_nearest_avx2(
    x: &[f32],
    w: &[f32],
    cbt: &[f32],
    k: usize,
    e0: usize,
    d: &mut [f32],
) -> Option<(usize, f32)> {
    distances(x, w, cbt, k, e0, d);
    first_min(d)
}

/// The index of the first smallest non-NaN value of `d` and that value (`None` when every
/// value is NaN or `d` is empty). Two passes the compiler vectorizes: the minimum in 8 lanes,
/// then the first block of 8 holding it.
#[inline(always)]
fn first_min(d: &[f32]) -> Option<(usize, f32)> {
    let mut lanes = [f32::NAN; 8];
    let mut chunks = d.chunks_exact(8);
    for c in &mut chunks {
        for (m, &x) in lanes.iter_mut().zip(c) {
            // `min` keeps the non-NaN operand.
            *m = m.min(x);
        }
    }
    let min = chunks
        .remainder()
        .iter()
        .chain(&lanes)
        .fold(f32::NAN, |a, &b| a.min(b));
    // The first block of 8 holding it (a vector compare per block), then the lane.
    let block = d
        .chunks(8)
        .position(|c| c.iter().fold(false, |any, &x| any | (x == min)))?;
    let at = 8 * block + d[8 * block..].iter().position(|&x| x == min)?;
    Some((at, min))
}

/// Entries per pass of [`assign`]: 8 dimensions x 512 entries of the transposed codebook are
/// 16 KiB, which stay in L1 while a thread's vectors run through them.
const ENTRY_BLOCK: usize = 512;

/// Assigns every vector (`n x v` values and weights) to its nearest entry (weighted squared
/// distance, the lowest index on ties), in parallel: the same choice as a scan `if d[e] <
/// d[best] { best = e }` from `best = 0` over all distances (so a NaN distance to entry 0
/// keeps entry 0, other NaNs are passed over). Each thread takes 256 vectors through the
/// codebook in blocks of [`ENTRY_BLOCK`] entries, so the block stays in L1 (one vector at a
/// time through all 4096 entries of AQLM-3 read 128 KiB per vector from L2).
fn assign(x: &[f32], w: &[f32], cb: &[f32], k: usize, v: usize) -> Vec<u32> {
    let cbt = transpose(cb, k, v);
    let mut codes = vec![0u32; x.len() / v];
    codes.par_chunks_mut(256).enumerate().for_each(|(c, out)| {
        let mut d = vec![0f32; ENTRY_BLOCK.min(k)];
        // Per vector: the best entry so far and its distance (NaN: entry 0 at a NaN, final).
        let mut best = vec![(0u32, f32::INFINITY); out.len()];
        for e0 in (0..k).step_by(ENTRY_BLOCK) {
            let d = &mut d[..ENTRY_BLOCK.min(k - e0)];
            for (i, b) in best.iter_mut().enumerate() {
                if b.1.is_nan() {
                    continue;
                }
                let p = (c * 256 + i) * v;
                let near = block_nearest(&x[p..p + v], &w[p..p + v], &cbt, k, e0, d);
                if e0 == 0 && d[0].is_nan() {
                    *b = (0, f32::NAN);
                    continue;
                }
                if let Some((j, dj)) = near
                    && (e0 == 0 || dj < b.1)
                {
                    *b = ((e0 + j) as u32, dj);
                }
            }
        }
        for (o, b) in out.iter_mut().zip(&best) {
            *o = b.0;
        }
    });
    codes
}

fn transpose(cb: &[f32], k: usize, v: usize) -> Vec<f32> {
    let mut t = vec![0f32; k * v];
    for e in 0..k {
        for j in 0..v {
            t[j * k + e] = cb[e * v + j];
        }
    }
    t
}

/// Samples per parallel piece of [`lower_d2`].
const D2_CHUNK: usize = 4096;

/// `d[i] = min(d[i], dist(sample i0 + i, c))` for the samples of `d`, from the sample and its
/// weights stored dimension-major (`sxt[j * m + i]`): the same operations per sample in the
/// same order as [`dist`] (so the same values bit for bit), over 8 samples at a time with AVX2
/// where the CPU has it (detected at run time), SSE's 4 otherwise.
fn lower_d2(d: &mut [f32], i0: usize, (sxt, swt, m): (&[f32], &[f32], usize), c: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above), the only requirement of a
        // `target_feature(enable = "avx2")` function beyond its safe signature.
        return unsafe { lower_d2_avx2(d, i0, (sxt, swt, m), c) };
    }
    lower_d2_plain(d, i0, (sxt, swt, m), c);
}

/// [`lower_d2`] compiled with AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn lower_d2_avx2(d: &mut [f32], i0: usize, sample: (&[f32], &[f32], usize), c: &[f32]) {
    lower_d2_plain(d, i0, sample, c);
}

/// The body of [`lower_d2`].
#[inline(always)]
fn lower_d2_plain(d: &mut [f32], i0: usize, (sxt, swt, m): (&[f32], &[f32], usize), c: &[f32]) {
    let n = d.len();
    let mut acc = vec![0f32; n];
    for (j, &cj) in c.iter().enumerate() {
        let xs = &sxt[j * m + i0..j * m + i0 + n];
        let ws = &swt[j * m + i0..j * m + i0 + n];
        for ((a, &x), &wj) in acc.iter_mut().zip(xs).zip(ws) {
            *a += wj * (x - cj) * (x - cj);
        }
    }
    for (dv, &a) in d.iter_mut().zip(&acc) {
        *dv = dv.min(a);
    }
}

fn dist(a: &[f32], b: &[f32], w: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .zip(w)
        .map(|((&x, &c), &wj)| wj * (x - c) * (x - c))
        .sum()
}

/// Fits a codebook of `k` entries (`k x v`, fp16-representable) to `n x v` vectors.
fn fit(
    x: &[f32],
    w: &[f32],
    k: usize,
    v: usize,
    opts: &EncodeOptions,
    rng: &mut SplitMix64,
) -> Vec<f32> {
    let n = x.len() / v;
    // The sample: a partial Fisher-Yates shuffle of the indices.
    let m = n.min(opts.sample.max(8 * k));
    let mut idx: Vec<usize> = (0..n).collect();
    if m < n {
        for i in 0..m {
            let j = i + rng.below(n - i);
            idx.swap(i, j);
        }
        idx.truncate(m);
        idx.sort_unstable();
    }
    let mut sx = Vec::with_capacity(m * v);
    let mut sw = Vec::with_capacity(m * v);
    for &i in &idx {
        sx.extend_from_slice(&x[i * v..(i + 1) * v]);
        sw.extend_from_slice(&w[i * v..(i + 1) * v]);
    }
    let mut cb = vec![0f32; k * v];
    if m <= k {
        cb[..m * v].copy_from_slice(&sx);
        cb.iter_mut().for_each(|c| *c = round16(*c));
        return cb;
    }
    // k-means++ (the sample also dimension-major, for `lower_d2`).
    let (sxt, swt) = (transpose(&sx, m, v), transpose(&sw, m, v));
    let first = rng.below(m);
    cb[..v].copy_from_slice(&sx[first * v..(first + 1) * v]);
    let mut d2: Vec<f32> = (0..m)
        .into_par_iter()
        .map(|i| dist(&sx[i * v..(i + 1) * v], &cb[..v], &sw[i * v..(i + 1) * v]))
        .collect();
    let mut filled = 1;
    while filled < k {
        let total: f64 = d2.iter().map(|&d| f64::from(d)).sum();
        if total <= 0.0 {
            break;
        }
        let target = rng.unit() * total;
        let mut acc = 0f64;
        let mut pick = m - 1;
        for (i, &d) in d2.iter().enumerate() {
            acc += f64::from(d);
            if acc > target && d > 0.0 {
                pick = i;
                break;
            }
        }
        let c: Vec<f32> = sx[pick * v..(pick + 1) * v].to_vec();
        cb[filled * v..(filled + 1) * v].copy_from_slice(&c);
        filled += 1;
        d2.par_chunks_mut(D2_CHUNK)
            .enumerate()
            .for_each(|(ci, ch)| lower_d2(ch, ci * D2_CHUNK, (&sxt, &swt, m), &c));
    }
    // Lloyd.
    for _ in 0..opts.iters {
        let codes = assign(&sx, &sw, &cb, k, v);
        let mut num = vec![0f64; k * v];
        let mut den = vec![0f64; k * v];
        for (i, &c) in codes.iter().enumerate() {
            for j in 0..v {
                let (xv, wv) = (f64::from(sx[i * v + j]), f64::from(sw[i * v + j]));
                num[c as usize * v + j] += wv * xv;
                den[c as usize * v + j] += wv;
            }
        }
        let mut moved = false;
        for ((c, &nu), &de) in cb.iter_mut().zip(&num).zip(&den) {
            if de > 0.0 {
                let new = (nu / de) as f32;
                moved |= new != *c;
                *c = new;
            }
        }
        if !moved {
            break;
        }
    }
    cb.iter_mut().for_each(|c| *c = round16(*c));
    cb
}

/// Reorders a codebook (`k x v`) by how often `codes` use each entry, most used first (ties
/// by index), and remaps the codes.
pub(crate) fn reorder(cb: &mut [f32], codes: &mut [u32], k: usize, v: usize) {
    let mut count = vec![0u64; k];
    codes.iter().for_each(|&c| count[c as usize] += 1);
    let mut order: Vec<usize> = (0..k).collect();
    order.sort_by_key(|&e| (std::cmp::Reverse(count[e]), e));
    let mut new_of = vec![0u32; k];
    let old = cb.to_vec();
    for (new, &e) in order.iter().enumerate() {
        new_of[e] = new as u32;
        cb[new * v..(new + 1) * v].copy_from_slice(&old[e * v..(e + 1) * v]);
    }
    codes.iter_mut().for_each(|c| *c = new_of[*c as usize]);
}

/// The seed of the codebook of stage `s` of tile `t`.
fn stream(seed: u64, t: usize, s: usize) -> u64 {
    let mut g = SplitMix64::new(seed ^ (t as u64).wrapping_mul(0xD1B5_4A32_D192_ED03));
    g.next_u64() ^ (s as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Encodes `rows x cols` row-major weights: the codebooks (fp16) and the packed codes in
/// [`Geometry`]'s layout.
pub(crate) fn encode(
    w: &[f32],
    g: &Geometry,
    opts: &EncodeOptions,
) -> Result<(Vec<f16>, Vec<u32>)> {
    check_finite("weights", w)?;
    let (rows, cols) = (g.rows, g.cols);
    if let Some(imp) = &opts.importance {
        cmv_format::check_len("importance", imp.len(), cols)?;
        if let Some(index) = imp.iter().position(|&x| !(x.is_finite() && x >= 0.0)) {
            return Err(VqError::Importance {
                index,
                value: imp[index],
            });
        }
    }
    let cfg = g.config;
    let (v, k, nres) = (cfg.vec, cfg.entries(), cfg.residuals);
    // Per tile: the codebooks of every stage and the codes of its vectors.
    let tiles: Vec<(Vec<f32>, Vec<Vec<u32>>)> = (0..g.tiles())
        .into_par_iter()
        .map(|t| {
            let (tr, tc) = (t / g.tiles_c, t % g.tiles_c);
            let r0 = tr * g.tile_rows;
            let r1 = (r0 + g.tile_rows).min(rows);
            let v0 = tc * g.tile_vecs;
            let v1 = (v0 + g.tile_vecs).min(g.vecs);
            let n = (r1 - r0) * (v1 - v0);
            let mut x = vec![0f32; n * v];
            let mut wt = vec![0f32; n * v];
            let mut p = 0;
            for r in r0..r1 {
                for i in v0..v1 {
                    for j in 0..v {
                        let c = i * v + j;
                        if c < cols {
                            x[p] = w[r * cols + c];
                            wt[p] = opts.importance.as_ref().map_or(1.0, |imp| imp[c]);
                        }
                        p += 1;
                    }
                }
            }
            let mut cbs = Vec::with_capacity(k * v * nres);
            let mut codes = Vec::with_capacity(nres);
            for s in 0..nres {
                let mut rng = SplitMix64::new(stream(opts.seed, t, s));
                let mut cb = fit(&x, &wt, k, v, opts, &mut rng);
                let mut c = assign(&x, &wt, &cb, k, v);
                reorder(&mut cb, &mut c, k, v);
                for (i, &code) in c.iter().enumerate() {
                    let e = &cb[code as usize * v..(code as usize + 1) * v];
                    x[i * v..(i + 1) * v]
                        .iter_mut()
                        .zip(e)
                        .for_each(|(a, &b)| *a -= b);
                }
                cbs.extend_from_slice(&cb);
                codes.push(c);
            }
            (cbs, codes)
        })
        .collect();
    let codebooks: Vec<f16> = tiles
        .iter()
        .flat_map(|(cb, _)| cb.iter().map(|&c| f16::from_f32(c)))
        .collect();
    let mut words = vec![0u32; g.code_words()];
    words
        .par_chunks_mut(nres * g.words)
        .enumerate()
        .for_each(|(r, out)| {
            let tr = r / g.tile_rows;
            for s in 0..nres {
                let row = &mut out[s * g.words..(s + 1) * g.words];
                for i in 0..g.vecs {
                    let tc = i / g.tile_vecs;
                    let (_, codes) = &tiles[tr * g.tiles_c + tc];
                    let v0 = tc * g.tile_vecs;
                    let width = (v0 + g.tile_vecs).min(g.vecs) - v0;
                    let local = (r - tr * g.tile_rows) * width + (i - v0);
                    put_code(row, cfg.bits, i, codes[s][local]);
                }
            }
        });
    Ok((codebooks, words))
}

#[cfg(test)]
mod tests {
    /// The scan `assign` must agree with: `best = 0`, then `if d[e] < d[best] { best = e }`.
    fn scalar(d: &[f32]) -> usize {
        let mut best = 0;
        for (e, &de) in d.iter().enumerate() {
            if de < d[best] {
                best = e;
            }
        }
        best
    }

    #[test]
    fn blocked_assignment_is_the_scalar_scan() {
        let mut rng = super::SplitMix64::new(7);
        // One dimension, weight 1, entries at few distinct values (ties are common): the
        // distance to entry e is (x - c_e)^2.
        for k in [1usize, 2, 7, 8, 9, 511, 512, 513, 1100, 4096] {
            for round in 0..12 {
                let cb: Vec<f32> = (0..k).map(|_| (rng.below(5) as f32) * 0.5).collect();
                let x: Vec<f32> = (0..300).map(|_| (rng.below(9) as f32) * 0.25).collect();
                let mut x = x;
                if round % 3 == 1 {
                    x[rng.below(300)] = f32::NAN;
                }
                let w = vec![1f32; x.len()];
                let got = super::assign(&x, &w, &cb, k, 1);
                for (i, &xi) in x.iter().enumerate() {
                    let d: Vec<f32> = cb.iter().map(|&c| (xi - c) * (xi - c)).collect();
                    assert_eq!(got[i] as usize, scalar(&d), "k {k} x {xi}");
                }
            }
        }
    }

    use super::*;

    #[test]
    fn reorder_is_a_permutation_that_keeps_the_decoded_vectors() {
        let mut rng = SplitMix64::new(3);
        let (k, v) = (16, 3);
        let mut cb: Vec<f32> = (0..k * v).map(|_| rng.unit() as f32).collect();
        let mut codes: Vec<u32> = (0..500)
            .map(|_| (rng.below(k) * rng.below(k) / k) as u32)
            .collect();
        let before: Vec<Vec<f32>> = codes
            .iter()
            .map(|&c| cb[c as usize * v..(c as usize + 1) * v].to_vec())
            .collect();
        let old = cb.clone();
        reorder(&mut cb, &mut codes, k, v);
        for (i, &c) in codes.iter().enumerate() {
            assert_eq!(&cb[c as usize * v..(c as usize + 1) * v], &before[i][..]);
        }
        let mut a: Vec<u32> = old.iter().map(|x| x.to_bits()).collect();
        let mut b: Vec<u32> = cb.iter().map(|x| x.to_bits()).collect();
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b);
        let mut count = vec![0; k];
        codes.iter().for_each(|&c| count[c as usize] += 1);
        assert!(count.windows(2).all(|w| w[0] >= w[1]), "{count:?}");
    }

    #[test]
    fn splitmix_is_the_reference_sequence() {
        // SplitMix64 seeded with 0: the published first output.
        assert_eq!(SplitMix64::new(0).next_u64(), 0xE220_A839_7B1D_CDAF);
    }
}
