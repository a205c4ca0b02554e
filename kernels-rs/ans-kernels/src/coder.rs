//! One ANS step over a group of elements, and its inverse (`docs/ANS.md`).
//!
//! A coder's state `x` lives in `[2^32, 2^64)` between steps. A group of `G` elements is one
//! symbol of the product model: with `precision = P`, element `k`'s quantile `q_k` is bits
//! `P*k .. P*k + P` of the state's low `G*P` bits (`G*P <= 32`). Its frequency is the product
//! of the elements' frequencies and its rank the mixed-radix number
//! `r_0 + f_0 (r_1 + f_1 (r_2 + f_2 r_3))`, where `r_k = q_k - cdf(v_k)`.

use crate::layout::STATE_LOWER;

/// What a table lookup gives for one slot: the symbol's value, cumulative frequency and
/// frequency.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// The value.
    pub value: i8,
    /// Its cumulative frequency.
    pub cdf: u32,
    /// Its frequency.
    pub freq: u32,
}

impl Slot {
    /// Unpacks a table entry ([`crate::layout::pack_entry`]).
    #[inline(always)]
    pub const fn from_packed(e: u32) -> Self {
        Slot {
            value: crate::layout::entry_value(e),
            cdf: crate::layout::entry_cdf(e),
            freq: crate::layout::entry_freq(e),
        }
    }
}

/// Decodes `G` elements from state `x` with a table lookup `lookup(slot)`; returns the values
/// and the state before refilling.
///
/// After the step, a state below `2^32` ([`needs_refill`]) takes the next stream word as its
/// low half: `x = x << 32 | word`. When the group's precision `G * precision` is below 32
/// bits (the 7-bit quads), the product frequency and the rank fit in 32 bits and are computed
/// so; otherwise in 64.
#[inline(always)]
pub fn decode_group<const G: usize>(
    x: u64,
    precision: u32,
    lookup: impl Fn(u32) -> Slot,
) -> ([i8; G], u64) {
    let m = precision * G as u32;
    // The quantiles are in the low word (m <= 32).
    let q = if m >= 32 {
        x as u32
    } else {
        (x as u32) & ((1u32 << m) - 1)
    };
    let hi = if m >= 64 { 0 } else { x >> m };
    let slot_mask = (1u32 << precision) - 1;
    let mut values = [0i8; G];
    if m < 32 {
        let mut f = 1u32;
        let mut rank = 0u32;
        let mut k = G;
        while k > 0 {
            k -= 1;
            let slot = (q >> (precision * k as u32)) & slot_mask;
            let e = lookup(slot);
            values[k] = e.value;
            rank = rank * e.freq + (slot - e.cdf);
            f *= e.freq;
        }
        (values, hi * u64::from(f) + u64::from(rank))
    } else {
        let mut f = 1u64;
        let mut rank = 0u64;
        let mut k = G;
        while k > 0 {
            k -= 1;
            let slot = (q >> (precision * k as u32)) & slot_mask;
            let e = lookup(slot);
            values[k] = e.value;
            rank = rank * u64::from(e.freq) + u64::from(slot - e.cdf);
            f *= u64::from(e.freq);
        }
        (values, hi * f + rank)
    }
}

/// True when a state must take the next stream word after a step.
#[inline(always)]
pub const fn needs_refill(x: u64) -> bool {
    x < STATE_LOWER
}

/// The refill: the next word becomes the state's low half.
#[inline(always)]
pub const fn refill(x: u64, word: u32) -> u64 {
    (x << 32) | word as u64
}

/// Encodes the `G` values `values` onto state `x` (the inverse of [`decode_group`]), with
/// `model(v) -> (cdf, freq)` at `precision` bits. Returns the new state and the word the
/// step emitted before encoding, if any (the low half of the old state). `x` must be in
/// `[2^32, 2^64)`; so is the result.
pub fn encode_group<const G: usize>(
    x: u64,
    precision: u32,
    model: impl Fn(i8) -> (u32, u32),
    values: [i8; G],
) -> (u64, Option<u32>) {
    let m = precision * G as u32;
    let cf: [(u32, u32); G] = core::array::from_fn(|k| model(values[k]));
    let f: u64 = cf.iter().map(|&(_, fk)| u64::from(fk)).product();
    // Emit when encoding would leave 64 bits: x >= f * 2^(64 - m) (in 128 bits: f may be 2^m).
    let (x, emitted) = if u128::from(x) >= u128::from(f) << (64 - m) {
        (x >> 32, Some(x as u32))
    } else {
        (x, None)
    };
    let hi = x / f;
    let mut rank = x % f;
    let mut q = 0u64;
    for (k, &(c, fk)) in cf.iter().enumerate() {
        let fk = u64::from(fk);
        q |= (u64::from(c) + rank % fk) << (precision * k as u32);
        rank /= fk;
    }
    ((hi << m) | q, emitted)
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;
    use crate::layout::pack_entry;

    /// A small model at `precision` over values -3..=3 with uneven frequencies summing to
    /// 2^precision.
    fn model(precision: u32) -> (Vec<u32>, impl Fn(i8) -> (u32, u32)) {
        let total = 1u32 << precision;
        let weights = [1u32, 3, 10, 40, 12, 5, 1];
        let wsum: u32 = weights.iter().sum();
        let mut freqs: Vec<u32> = weights.iter().map(|w| (w * total / wsum).max(1)).collect();
        let diff = total as i64 - freqs.iter().sum::<u32>() as i64;
        freqs[3] = (freqs[3] as i64 + diff) as u32;
        let mut cdfs = [0u32; 7];
        for i in 1..7 {
            cdfs[i] = cdfs[i - 1] + freqs[i - 1];
        }
        let mut table = vec![0u32; total as usize];
        for (i, (&c, &f)) in cdfs.iter().zip(&freqs).enumerate() {
            for s in c..c + f {
                table[s as usize] = pack_entry(i as i8 - 3, c, f);
            }
        }
        let lookup = move |v: i8| {
            let i = (v + 3) as usize;
            (cdfs[i], freqs[i])
        };
        (table, lookup)
    }

    fn round_trip<const G: usize>(precision: u32) {
        let (table, cf) = model(precision);
        // A deterministic pseudo-random sequence of groups.
        let mut seed = 0x1234_5678u64;
        let groups: Vec<[i8; G]> = (0..500)
            .map(|_| {
                core::array::from_fn(|_| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((seed >> 33) % 7) as i8 - 3
                })
            })
            .collect();
        let mut x = STATE_LOWER;
        let mut words = Vec::new();
        for g in groups.iter().rev() {
            let (nx, w) = encode_group(x, precision, &cf, *g);
            assert!(nx >= STATE_LOWER, "state left its range");
            words.extend(w);
            x = nx;
        }
        // Decode forward, reading the emitted words in reverse.
        for g in &groups {
            let (vals, mut nx) =
                decode_group::<G>(x, precision, |s| Slot::from_packed(table[s as usize]));
            assert_eq!(&vals, g);
            if needs_refill(nx) {
                nx = refill(nx, words.pop().expect("stream ran dry"));
            }
            x = nx;
        }
        assert!(words.is_empty(), "words left over");
        assert_eq!(
            x, STATE_LOWER,
            "the decoder must end in the encoder's initial state"
        );
    }

    #[test]
    fn quads_round_trip_at_7_and_8_bits() {
        round_trip::<4>(7);
        round_trip::<4>(8);
    }

    #[test]
    fn pairs_round_trip_from_9_to_12_bits() {
        for p in 9..=12 {
            round_trip::<2>(p);
        }
    }

    #[test]
    fn a_certain_symbol_costs_nothing() {
        // One symbol with all the probability: the state never changes and nothing is emitted.
        let table = vec![pack_entry(5, 0, 128); 128];
        let x = STATE_LOWER + 12345;
        let (nx, w) = encode_group(x, 7, |_| (0, 128), [5i8; 4]);
        assert_eq!((nx, w), (x, None));
        let (vals, dx) = decode_group::<4>(x, 7, |s| Slot::from_packed(table[s as usize]));
        assert_eq!((vals, dx), ([5; 4], x));
        // The same at 8 bits, where the product frequency is exactly 2^32.
        let (nx, w) = encode_group(x, 8, |_| (0, 256), [5i8; 4]);
        assert_eq!((nx, w), (x, None));
    }
}
