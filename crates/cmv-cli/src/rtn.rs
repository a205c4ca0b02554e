//! Round-to-nearest (RTN) baselines for `cmv eval --rtn BITS:GROUP`: asymmetric min/max
//! quantization of each group of `GROUP` consecutive weights of a row to `BITS` bits, one fp16
//! scale and one fp16 zero point per group, as GPTQ's quantizer does it without the error
//! feedback. Simulated in memory (quantize, then dequantize): what a format at the same bits
//! per weight has to beat.

use std::str::FromStr;

use half::f16;

/// An RTN configuration: bits per weight and weights per group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtnSpec {
    /// Bits per code (1 to 8).
    pub bits: u32,
    /// Weights per group (at least 1).
    pub group: usize,
}

impl FromStr for RtnSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let usage = || format!("{s:?} is not BITS:GROUP (for instance 4:128; BITS in 1..=8)");
        let (b, g) = s.split_once(':').ok_or_else(usage)?;
        let bits: u32 = b.trim().parse().map_err(|_| usage())?;
        let group: usize = g.trim().parse().map_err(|_| usage())?;
        if !(1..=8).contains(&bits) || group == 0 {
            return Err(usage());
        }
        Ok(Self { bits, group })
    }
}

impl std::fmt::Display for RtnSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rtn{} g{}", self.bits, self.group)
    }
}

impl RtnSpec {
    /// Bits an RTN matrix of `rows x cols` takes: the codes, and 32 bits (fp16 scale and
    /// zero) per group.
    pub fn stored_bits(&self, rows: usize, cols: usize) -> u64 {
        let groups = cols.div_ceil(self.group) as u64;
        rows as u64 * (cols as u64 * u64::from(self.bits) + groups * 32)
    }

    /// `w` (`rows x cols`, row-major) quantized and dequantized. Non-finite weights come back
    /// as they are (the group's other weights are quantized without them).
    pub fn fake_quantize(&self, w: &[f32], cols: usize) -> Vec<f32> {
        let maxq = ((1u32 << self.bits) - 1) as f32;
        let mut out = Vec::with_capacity(w.len());
        for row in w.chunks(cols.max(1)) {
            for g in row.chunks(self.group) {
                let finite = g.iter().copied().filter(|v| v.is_finite());
                let (mut lo, mut hi) =
                    finite.fold((0f32, 0f32), |(lo, hi), v| (lo.min(v), hi.max(v)));
                if lo == 0.0 && hi == 0.0 {
                    (lo, hi) = (-1.0, 1.0);
                }
                let scale = f16::from_f32((hi - lo) / maxq).to_f32();
                let scale = if scale > 0.0 {
                    scale
                } else {
                    f32::MIN_POSITIVE
                };
                let zero = f16::from_f32((-lo / scale).round().clamp(0.0, maxq)).to_f32();
                out.extend(g.iter().map(|&v| {
                    if v.is_finite() {
                        let q = (v / scale + zero).round().clamp(0.0, maxq);
                        scale * (q - zero)
                    } else {
                        v
                    }
                }));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse() {
        assert_eq!(
            "4:128".parse::<RtnSpec>(),
            Ok(RtnSpec {
                bits: 4,
                group: 128
            })
        );
        for bad in ["4", "0:128", "9:128", "4:0", "a:b"] {
            assert!(bad.parse::<RtnSpec>().is_err(), "{bad}");
        }
        assert_eq!(
            RtnSpec {
                bits: 4,
                group: 128
            }
            .stored_bits(2, 256),
            2 * (256 * 4 + 64)
        );
    }

    #[test]
    fn levels_are_exact_and_error_is_bounded() {
        let spec = RtnSpec { bits: 2, group: 4 };
        // Levels 0, 1, 2, 3 times 1.0 shifted by -1: exact.
        let w = [-1.0f32, 0.0, 1.0, 2.0, 0.0, 0.0, 0.0, 0.0];
        assert_eq!(spec.fake_quantize(&w, 8), w);
        let w: Vec<f32> = (0..256)
            .map(|i| ((i * 37) % 101) as f32 / 50.0 - 1.0)
            .collect();
        let q = RtnSpec {
            bits: 4,
            group: 128,
        }
        .fake_quantize(&w, 128);
        let step = 2.0 / 15.0;
        for (a, b) in w.iter().zip(&q) {
            assert!((a - b).abs() <= step / 2.0 + 1e-3, "{a} {b}");
        }
    }
}
