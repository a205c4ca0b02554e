//! The fixed-point probability model of a matrix's values (`docs/ANS.md`, "Model").
//!
//! A [`Model`] gives each of the 256 int8 values a frequency; the frequencies sum to `2^P`
//! (the *precision*, 7 to 12 bits) and are at least 1 for every value that occurs. Frequencies
//! are indexed by [`index`]: index 0 is `-128`, index 255 is `127`, so indices follow the values
//! in increasing order and so do the cumulative frequencies (`cdf`).

use ans_kernels::layout::{self, LANES, MAX_PRECISION, MIN_PRECISION, REGISTER_PRECISION};

use cmv_format::FormatError;

use crate::error::{AnsError, Result};
use crate::options::EncodeOptions;

/// Number of int8 values.
pub const VALUES: usize = 256;
/// Bytes of the stored frequency table: one `u16` per value.
pub const FREQ_BYTES: usize = 2 * VALUES;

/// Index of value `v` in a frequency or count table: `v + 128` (computed as `v as u8 ^ 0x80`),
/// so index 0 is `-128` and indices increase with the values.
#[inline(always)]
pub const fn index(v: i8) -> usize {
    (v as u8 ^ 0x80) as usize
}

/// The value at index `i` of a frequency or count table (the inverse of [`index`]).
#[inline(always)]
pub const fn value(i: usize) -> i8 {
    (i as u8 ^ 0x80) as i8
}

/// Occurrences of each value in `values`, indexed by [`index`].
pub fn counts(values: &[i8]) -> [u64; VALUES] {
    use rayon::prelude::*;
    const PIECE: usize = 1 << 20;
    let count = |piece: &[i8]| {
        let mut c = [0u64; VALUES];
        for &v in piece {
            c[index(v)] += 1;
        }
        c
    };
    if values.len() <= PIECE {
        return count(values);
    }
    values.par_chunks(PIECE).map(count).reduce(
        || [0u64; VALUES],
        |mut a, b| {
            for (x, y) in a.iter_mut().zip(b) {
                *x += y;
            }
            a
        },
    )
}

/// Empirical entropy of `counts`, in bits for all of them together (divide by their sum for
/// bits per element): `-sum c log2(c / n)`. Zero for no counts.
pub fn entropy_bits(counts: &[u64; VALUES]) -> f64 {
    // A u128 sum: 256 counts below 2^64 cannot overflow it.
    let n: u128 = counts.iter().map(|&c| u128::from(c)).sum();
    if n == 0 {
        return 0.0;
    }
    let n = n as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let c = c as f64;
            -c * (c / n).log2()
        })
        .sum()
}

/// The fixed-point model of a matrix: a frequency per value summing to `2^precision`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Model {
    precision: u32,
    freqs: [u16; VALUES],
}

impl Model {
    /// A model from its frequencies (indexed by [`index`]), as stored in a container.
    ///
    /// # Errors
    /// [`AnsError::Precision`] outside `7..=12`, [`AnsError::FrequencySum`] when the
    /// frequencies do not sum to `2^precision`.
    pub fn new(precision: u32, freqs: [u16; VALUES]) -> Result<Self> {
        check_precision(precision)?;
        let sum: u64 = freqs.iter().map(|&f| u64::from(f)).sum();
        let expected = 1u64 << precision;
        if sum != expected {
            return Err(AnsError::FrequencySum {
                sum,
                precision,
                expected,
            });
        }
        // A sum of 2^P > 0 means some frequency is positive, so the padding value (the most
        // frequent one) is present, and every frequency is at most 2^P.
        Ok(Self { precision, freqs })
    }

    /// Fits a model to `values` as the encoder does (`docs/ANS.md`): the precision
    /// `opts.precision` if given, else the smallest of `7..=12` that holds the distinct values
    /// and whose cross-entropy is within `opts.max_overhead_bits` bits per element of the
    /// empirical entropy (12 if none is). `opts.layout` is ignored.
    ///
    /// # Errors
    /// No values ([`FormatError::Length`]), a forced precision out of range or too small for
    /// the distinct values, or a bad `max_overhead_bits`.
    pub fn fit(values: &[i8], opts: &EncodeOptions) -> Result<Self> {
        Self::fit_counts(&counts(values), opts)
    }

    /// [`Model::fit`] from the values' counts (indexed by [`index`]).
    ///
    /// # Errors
    /// As [`Model::fit`]; [`AnsError::CountOverflow`] when the counts sum past `u64::MAX`.
    pub fn fit_counts(counts: &[u64; VALUES], opts: &EncodeOptions) -> Result<Self> {
        let overhead = opts.max_overhead_bits;
        if !(overhead.is_finite() && overhead >= 0.0) {
            return Err(AnsError::Overhead { value: overhead });
        }
        let n = total(counts)?;
        if let Some(p) = opts.precision {
            return Self::quantize(counts, p);
        }
        let distinct = counts.iter().filter(|&&c| c > 0).count();
        let entropy = entropy_bits(counts);
        for p in MIN_PRECISION..MAX_PRECISION {
            if (1usize << p) < distinct {
                continue;
            }
            let model = Self::quantize(counts, p)?;
            if (model.cross_entropy_bits(counts) - entropy) / n as f64 <= overhead {
                return Ok(model);
            }
        }
        Self::quantize(counts, MAX_PRECISION)
    }

    /// The frequencies at `precision` that minimize the cross-entropy of `counts`: they start
    /// proportional to the counts (at least 1 for each occurring value), then the remainder to
    /// `2^precision` is given or taken one unit at a time where it changes the cross-entropy
    /// least, and finally units move between values while a move lowers it.
    ///
    /// # Errors
    /// [`AnsError::Precision`] out of range, [`AnsError::TooManyValues`] when `2^precision` is
    /// below the number of distinct values, [`FormatError::Length`] for no counts,
    /// [`AnsError::CountOverflow`] when the counts sum past `u64::MAX`.
    pub fn quantize(counts: &[u64; VALUES], precision: u32) -> Result<Self> {
        check_precision(precision)?;
        let total = total(counts)?;
        let distinct = counts.iter().filter(|&&c| c > 0).count();
        let slots = 1u32 << precision;
        if distinct > slots as usize {
            return Err(AnsError::TooManyValues {
                precision,
                slots,
                distinct,
            });
        }
        let mut f = [0u32; VALUES];
        for (fi, &c) in f.iter_mut().zip(counts) {
            if c > 0 {
                let prop = u128::from(c) * u128::from(slots) / u128::from(total);
                *fi = (prop as u32).max(1);
            }
        }
        // Gain in bits of one more unit for value i, and cost of one unit less.
        let gain = |f: &[u32; VALUES], i: usize| counts[i] as f64 * (1.0 / f[i] as f64).ln_1p();
        let loss = |f: &[u32; VALUES], i: usize| {
            if f[i] <= 1 {
                f64::INFINITY
            } else {
                -(counts[i] as f64) * (-1.0 / f[i] as f64).ln_1p()
            }
        };
        let best_gain = |f: &[u32; VALUES]| {
            let mut best: Option<(usize, f64)> = None;
            for i in (0..VALUES).filter(|&i| counts[i] > 0) {
                let g = gain(f, i);
                if best.is_none_or(|(_, b)| g > b) {
                    best = Some((i, g));
                }
            }
            best
        };
        let least_loss = |f: &[u32; VALUES]| {
            let mut best: Option<(usize, f64)> = None;
            for i in (0..VALUES).filter(|&i| f[i] > 1) {
                let l = loss(f, i);
                if best.is_none_or(|(_, b)| l < b) {
                    best = Some((i, l));
                }
            }
            best
        };
        let mut sum: u32 = f.iter().sum();
        while sum < slots {
            let (i, _) = best_gain(&f).expect("some value occurs");
            f[i] += 1;
            sum += 1;
        }
        while sum > slots {
            // sum > slots >= distinct, so some frequency is above 1.
            let (i, _) = least_loss(&f).expect("a frequency above 1");
            f[i] -= 1;
            sum -= 1;
        }
        // The cross-entropy is separable and convex in each frequency: moving single units
        // while that helps reaches the optimum. The bound only guards against float noise.
        for _ in 0..4 * slots {
            let (Some((i, g)), Some((j, l))) = (best_gain(&f), least_loss(&f)) else {
                break;
            };
            if i == j || g <= l * (1.0 + 1e-12) + 1e-12 {
                break;
            }
            f[i] += 1;
            f[j] -= 1;
        }
        let mut freqs = [0u16; VALUES];
        for (q, &fi) in freqs.iter_mut().zip(&f) {
            *q = fi as u16;
        }
        Self::new(precision, freqs)
    }

    /// The precision `P`: frequencies sum to `2^P`.
    pub fn precision(&self) -> u32 {
        self.precision
    }

    /// Elements coded per ANS step: 4 up to 8 bits of precision, else 2
    /// (`layout::group_size`).
    pub fn group(&self) -> usize {
        layout::group_size(self.precision)
    }

    /// The frequencies, indexed by [`index`] (index 0 is `-128`).
    pub fn freqs(&self) -> &[u16; VALUES] {
        &self.freqs
    }

    /// The frequency of value `v` (0 if the model cannot code it).
    pub fn freq(&self, v: i8) -> u32 {
        u32::from(self.freqs[index(v)])
    }

    /// The cumulative frequency of value `v`: the sum of the frequencies of the values below it.
    pub fn cdf(&self, v: i8) -> u32 {
        self.freqs[..index(v)].iter().map(|&f| u32::from(f)).sum()
    }

    /// Every value's cumulative frequency, indexed by [`index`].
    pub fn cdfs(&self) -> [u32; VALUES] {
        let mut c = [0u32; VALUES];
        let mut acc = 0u32;
        for (ci, &f) in c.iter_mut().zip(&self.freqs) {
            *ci = acc;
            acc += u32::from(f);
        }
        c
    }

    /// Number of values with a nonzero frequency.
    pub fn distinct(&self) -> usize {
        self.freqs.iter().filter(|&&f| f > 0).count()
    }

    /// The value padding is coded with: the one with the largest frequency, the smallest such
    /// value on ties.
    pub fn padding_value(&self) -> i8 {
        let mut best = 0;
        for i in 1..VALUES {
            if self.freqs[i] > self.freqs[best] {
                best = i;
            }
        }
        value(best)
    }

    /// Cross-entropy of `counts` (indexed by [`index`]) under this model, in bits for all of
    /// them together: `-sum c log2(freq / 2^P)`. Infinite if a counted value has frequency 0.
    pub fn cross_entropy_bits(&self, counts: &[u64; VALUES]) -> f64 {
        let p = f64::from(self.precision);
        let mut bits = 0.0;
        for (&c, &f) in counts.iter().zip(&self.freqs) {
            if c == 0 {
                continue;
            }
            if f == 0 {
                return f64::INFINITY;
            }
            bits += c as f64 * (p - f64::from(f).log2());
        }
        bits
    }

    /// The lookup table: `2^P` packed entries (`layout::pack_entry`); slot `s` holds the value
    /// `v` with `cdf(v) <= s < cdf(v) + freq(v)`.
    pub fn table(&self) -> Vec<u32> {
        let mut t = Vec::with_capacity(1 << self.precision);
        let mut cdf = 0u32;
        for (i, &f) in self.freqs.iter().enumerate() {
            let f = u32::from(f);
            if f > 0 {
                let e = layout::pack_entry(value(i), cdf, f);
                t.extend(std::iter::repeat_n(e, f as usize));
            }
            cdf += f;
        }
        t
    }

    /// The three 128-byte tables of the 7-bit register path (values, cdf, freq - 1;
    /// `layout::register_tables`), or `None` when the precision is not 7.
    pub fn register_tables(&self) -> Option<[[u32; LANES]; 3]> {
        if self.precision != REGISTER_PRECISION {
            return None;
        }
        let table = self.table();
        let packed: &[u32; 128] = table.as_slice().try_into().ok()?;
        Some(layout::register_tables(packed))
    }
}

/// The sum of `counts`: at least 1 and at most `u64::MAX`.
fn total(counts: &[u64; VALUES]) -> Result<u64> {
    let mut sum = 0u64;
    for (index, &c) in counts.iter().enumerate() {
        sum = sum
            .checked_add(c)
            .ok_or(AnsError::CountOverflow { index: index + 1 })?;
    }
    if sum == 0 {
        return Err(FormatError::Length {
            what: "values to model",
            got: 0,
            expected: 1,
        }
        .into());
    }
    Ok(sum)
}

/// Checks that a precision is in `7..=12`.
pub(crate) fn check_precision(precision: u32) -> Result<()> {
    if (MIN_PRECISION..=MAX_PRECISION).contains(&precision) {
        Ok(())
    } else {
        Err(AnsError::Precision { precision })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> EncodeOptions {
        EncodeOptions::default()
    }

    fn brute_force_best(counts: &[u64; VALUES], precision: u32) -> f64 {
        // Exhaustive over 3 occurring values: the optimum of the quantization.
        let occ: Vec<usize> = (0..VALUES).filter(|&i| counts[i] > 0).collect();
        assert_eq!(occ.len(), 3);
        let slots = 1u32 << precision;
        let mut best = f64::INFINITY;
        for a in 1..slots {
            for b in 1..slots - a {
                let c = slots - a - b;
                let mut freqs = [0u16; VALUES];
                freqs[occ[0]] = a as u16;
                freqs[occ[1]] = b as u16;
                freqs[occ[2]] = c as u16;
                let m = Model::new(precision, freqs).unwrap();
                best = best.min(m.cross_entropy_bits(counts));
            }
        }
        best
    }

    #[test]
    fn index_maps_values_in_increasing_order() {
        assert_eq!(index(-128), 0);
        assert_eq!(index(-1), 127);
        assert_eq!(index(0), 128);
        assert_eq!(index(127), 255);
        for i in 0..VALUES {
            assert_eq!(index(value(i)), i);
            if i > 0 {
                assert!(value(i) > value(i - 1));
            }
        }
    }

    #[test]
    fn quantization_is_optimal_on_small_cases() {
        for (a, b, c) in [(1000u64, 10, 1), (5, 5, 5), (1, 1, 100000), (300, 200, 7)] {
            let mut counts = [0u64; VALUES];
            counts[index(-3)] = a;
            counts[index(0)] = b;
            counts[index(90)] = c;
            let m = Model::quantize(&counts, 7).unwrap();
            let best = brute_force_best(&counts, 7);
            let got = m.cross_entropy_bits(&counts);
            assert!(got <= best + 1e-9, "{a} {b} {c}: {got} vs optimum {best}");
            assert_eq!(m.freqs().iter().map(|&f| u32::from(f)).sum::<u32>(), 128);
        }
    }

    #[test]
    fn every_occurring_value_gets_a_frequency() {
        let mut counts = [1u64; VALUES];
        counts[index(0)] = 1 << 40;
        for p in 8..=12 {
            let m = Model::quantize(&counts, p).unwrap();
            assert!(m.freqs().iter().all(|&f| f >= 1));
            // At 8 bits every value has frequency 1: the tie goes to -128.
            assert_eq!(m.padding_value(), if p == 8 { -128 } else { 0 });
        }
        assert!(matches!(
            Model::quantize(&counts, 7),
            Err(AnsError::TooManyValues {
                precision: 7,
                slots: 128,
                distinct: 256
            })
        ));
    }

    #[test]
    fn precision_choice_follows_the_rule() {
        // One value: P = 7, all probability on it.
        let m = Model::fit(&[5; 100], &opts()).unwrap();
        assert_eq!((m.precision(), m.freq(5), m.distinct()), (7, 128, 1));
        assert_eq!(m.padding_value(), 5);
        // 200 distinct values: at least 8 bits.
        let v: Vec<i8> = (0..200).map(|i| (i - 100) as i8).collect();
        assert!(Model::fit(&v, &opts()).unwrap().precision() >= 8);
        // Strong skew needs fine frequencies: 1 in 10^5 is far below 1/128.
        let mut v = vec![0i8; 100_000];
        v[7] = 1;
        v[8] = -1;
        // (At the default 0.1 bits the 7-bit model's 0.023 bits of overhead would do.)
        let tight = EncodeOptions {
            max_overhead_bits: 0.02,
            ..opts()
        };
        let m = Model::fit(&v, &tight).unwrap();
        let c = counts(&v);
        let over = (m.cross_entropy_bits(&c) - entropy_bits(&c)) / v.len() as f64;
        assert!(
            m.precision() == 12 || over <= 0.02,
            "P {} over {over}",
            m.precision()
        );
        assert!(m.precision() > 7);
        // A forced precision is kept.
        let forced = EncodeOptions {
            precision: Some(10),
            ..opts()
        };
        assert_eq!(Model::fit(&v, &forced).unwrap().precision(), 10);
        let bad = EncodeOptions {
            precision: Some(13),
            ..opts()
        };
        assert!(matches!(
            Model::fit(&v, &bad),
            Err(AnsError::Precision { precision: 13 })
        ));
        let nan = EncodeOptions {
            max_overhead_bits: f64::NAN,
            ..opts()
        };
        assert!(matches!(
            Model::fit(&v, &nan),
            Err(AnsError::Overhead { .. })
        ));
        assert!(matches!(
            Model::fit(&[], &opts()),
            Err(AnsError::Format(FormatError::Length { .. }))
        ));
    }

    #[test]
    fn table_and_cdf_agree() {
        let v: Vec<i8> = (0..1000).map(|i| ((i * 7919) % 23) as i8 - 11).collect();
        for p in 7..=12 {
            let m = Model::quantize(&counts(&v), p).unwrap();
            let t = m.table();
            assert_eq!(t.len(), 1 << p);
            let cdfs = m.cdfs();
            for (i, &c) in cdfs.iter().enumerate() {
                let v = value(i);
                assert_eq!(c, m.cdf(v));
                for s in m.cdf(v)..m.cdf(v) + m.freq(v) {
                    let e = t[s as usize];
                    assert_eq!(layout::entry_value(e), v);
                    assert_eq!(layout::entry_cdf(e), m.cdf(v));
                    assert_eq!(layout::entry_freq(e), m.freq(v));
                }
            }
            assert_eq!(m.register_tables().is_some(), p == 7);
        }
    }

    #[test]
    fn padding_value_breaks_ties_towards_the_smallest() {
        let mut freqs = [0u16; VALUES];
        freqs[index(3)] = 64;
        freqs[index(-2)] = 64;
        let m = Model::new(7, freqs).unwrap();
        assert_eq!(m.padding_value(), -2);
        freqs[index(3)] = 65;
        assert!(matches!(
            Model::new(7, freqs),
            Err(AnsError::FrequencySum { sum: 129, .. })
        ));
    }

    #[test]
    fn counts_past_u64_are_an_error_not_a_panic() {
        let mut counts = [0u64; VALUES];
        counts[index(0)] = u64::MAX;
        counts[index(1)] = 1;
        for p in 7..=12 {
            assert!(matches!(
                Model::quantize(&counts, p),
                Err(AnsError::CountOverflow { index: 130 })
            ));
        }
        assert!(matches!(
            Model::fit_counts(&counts, &opts()),
            Err(AnsError::CountOverflow { .. })
        ));
        let e = Model::fit_counts(&[u64::MAX; VALUES], &opts()).unwrap_err();
        assert!(e.to_string().contains("u64::MAX"), "{e}");
        assert!(entropy_bits(&[u64::MAX; VALUES]).is_finite());
        // u64::MAX values in all still work.
        counts[index(1)] = 0;
        counts[index(0)] = u64::MAX - 1;
        counts[index(5)] = 1;
        let m = Model::quantize(&counts, 7).unwrap();
        assert_eq!(m.distinct(), 2);
    }

    #[test]
    fn entropy_of_known_distributions() {
        let mut c = [0u64; VALUES];
        assert_eq!(entropy_bits(&c), 0.0);
        c[0] = 4;
        c[1] = 4;
        assert!((entropy_bits(&c) - 8.0).abs() < 1e-12);
        let big: Vec<i8> = (0..3_000_000).map(|i| (i % 3) as i8).collect();
        let c = counts(&big);
        assert_eq!(c[index(0)] + c[index(1)] + c[index(2)], 3_000_000);
    }
}
