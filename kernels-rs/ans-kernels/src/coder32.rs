//! A 32-bit-state coder for pairs of elements at 8 bits: the coder of the `ans-lanes` layout
//! (`ans_codec`'s encoder and CPU decoder, and `cmv_ans_lanes`, whose step with its table
//! entries is [`crate::lanes::pair_state`]).
//!
//! The state `x` lives in `[2^16, 2^32)` between steps. A step codes a pair `(v0, v1)` as one
//! symbol of the product model at `2 * 8` bits, as [`crate::coder`] codes groups: the low 16
//! bits of the state are the two 8-bit quantiles `q0 = x & 0xff`, `q1 = (x >> 8) & 0xff`;
//! `r_k = q_k - cdf(v_k)`, `f = f0 f1`, and the decode is `x = (x >> 16) f + r0 + f0 r1`.
//! Then a state below `2^16` takes the next 16-bit word: `x = x << 16 | word` (one is always
//! enough: the decoded state is at least `(x >> 16) f >= 1`). Every product fits 32 bits:
//! `(x >> 16) f + f - 1 < 2^16 f <= 2^32`.
//!
//! Against the 64-bit quads of [`crate::coder`]: 32-bit arithmetic only (one `IMAD` for the
//! state), two lookups and one renormalisation check per two elements.

use crate::coder::Slot;

/// Lower bound of a state between steps.
pub const STATE32_LOWER: u32 = 1 << 16;
/// Bits per element of the model (`2^8` slots).
pub const PAIR_PRECISION: u32 = 8;

/// Decodes a pair from state `x` with the table lookup `lookup(slot)`; returns the values and
/// the state before refilling.
#[inline(always)]
pub fn decode_pair32(x: u32, lookup: impl Fn(u32) -> Slot) -> ([i8; 2], u32) {
    let (s0, s1) = (lookup(x & 0xff), lookup((x >> 8) & 0xff));
    let rank = ((x & 0xff) - s0.cdf) + s0.freq * (((x >> 8) & 0xff) - s1.cdf);
    ([s0.value, s1.value], (x >> 16) * (s0.freq * s1.freq) + rank)
}

/// True when a state must take the next 16-bit word after a step.
#[inline(always)]
pub const fn needs_refill32(x: u32) -> bool {
    x < STATE32_LOWER
}

/// The refill: the next word becomes the state's low 16 bits.
#[inline(always)]
pub const fn refill32(x: u32, word: u16) -> u32 {
    (x << 16) | word as u32
}

/// Encodes the pair `values` onto state `x` in `[2^16, 2^32)` (the inverse of
/// [`decode_pair32`]), with `model(v) -> (cdf, freq)` at 8 bits. Returns the new state (in the
/// same range) and the 16-bit word emitted before encoding, if any (the old state's low half).
pub fn encode_pair32(
    x: u32,
    model: impl Fn(i8) -> (u32, u32),
    values: [i8; 2],
) -> (u32, Option<u16>) {
    let ((c0, f0), (c1, f1)) = (model(values[0]), model(values[1]));
    let f = f0 * f1;
    let (x, emitted) = if u64::from(x) >= u64::from(f) << 16 {
        (x >> 16, Some(x as u16))
    } else {
        (x, None)
    };
    let (hi, rank) = (x / f, x % f);
    let q = (c0 + rank % f0) | ((c1 + rank / f0) << 8);
    ((hi << 16) | q, emitted)
}

/// An 8-bit test model over the values `-3..=3` with the given weights (zero weights stay
/// absent): its frequencies, cumulative frequencies and 256 packed entries.
#[cfg(all(test, not(target_arch = "nvptx64")))]
pub(crate) fn test_model(weights: &[u32]) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    use crate::layout::pack_entry;
    let wsum: u32 = weights.iter().sum();
    let mut freqs: Vec<u32> = weights
        .iter()
        .map(|&w| if w == 0 { 0 } else { (w * 256 / wsum).max(1) })
        .collect();
    let diff = 256 - freqs.iter().sum::<u32>() as i64;
    freqs[3] = (freqs[3] as i64 + diff) as u32;
    let cdfs: Vec<u32> = (0..7).map(|i| freqs[..i].iter().sum()).collect();
    let mut table = vec![0u32; 256];
    for i in 0..7 {
        for s in cdfs[i]..cdfs[i] + freqs[i] {
            table[s as usize] = pack_entry(i as i8 - 3, cdfs[i], freqs[i]);
        }
    }
    (freqs, cdfs, table)
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;

    #[test]
    fn pairs_round_trip_with_uneven_and_extreme_models() {
        // Uneven frequencies over -3..=3, a model with one value of frequency 255, and the
        // certain symbol (frequency 256: nothing is emitted, the state does not change).
        for weights in [
            vec![1u32, 3, 10, 40, 12, 5, 1],
            vec![0, 0, 0, 1, 0, 0, 0],
            vec![0, 0, 1, 1000, 0, 0, 0],
        ] {
            let (freqs, cdfs, table) = test_model(&weights);
            let model = |v: i8| (cdfs[(v + 3) as usize], freqs[(v + 3) as usize]);
            let present: Vec<i8> = (0..7)
                .filter(|&i| freqs[i] > 0)
                .map(|i| i as i8 - 3)
                .collect();
            let mut seed = 0x9e37_79b9u64;
            let pairs: Vec<[i8; 2]> = (0..2000)
                .map(|_| {
                    core::array::from_fn(|_| {
                        seed = seed
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        present[(seed >> 33) as usize % present.len()]
                    })
                })
                .collect();
            let mut x = STATE32_LOWER;
            let mut words = Vec::new();
            for p in pairs.iter().rev() {
                let (nx, w) = encode_pair32(x, model, *p);
                assert!(nx >= STATE32_LOWER, "state left its range");
                words.extend(w);
                x = nx;
            }
            for p in &pairs {
                let (vals, mut nx) = decode_pair32(x, |s| Slot::from_packed(table[s as usize]));
                assert_eq!(&vals, p);
                if needs_refill32(nx) {
                    nx = refill32(nx, words.pop().expect("stream ran dry"));
                }
                assert!(nx >= STATE32_LOWER);
                x = nx;
            }
            assert!(words.is_empty(), "words left over");
            assert_eq!(x, STATE32_LOWER);
        }
    }
}
