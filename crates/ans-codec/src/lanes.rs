//! A model of a planned layout for a fast decoder, `ans-lanes` (issue 16; `docs/ANS.md`,
//! "Planned: a lane layout"): it codes a matrix exactly as that layout would and decodes it
//! back, to measure its size before a kernel exists. It is not a container layout, no GPU
//! kernel reads it, and [`crate::encode`] never writes it.
//!
//! A *unit* is 32 rows (one per lane of a warp; rows padded to 32) by a *segment* of columns
//! (columns padded to an even count; the last segment may be shorter). Lane `l` codes row
//! `32 u + l` of its unit's segment with one 32-bit coder ([`ans_kernels::coder32`]), one
//! pair of columns per step. Decoding order: for each pair in increasing column order, every
//! lane decodes its pair, then the lanes whose state fell below `2^16` refill, in increasing
//! lane order, from the unit's stream of 16-bit words. The stream starts with the 32 initial
//! states (high then low half each). A unit costs its data words and 32 states.

use ans_kernels::coder32::{STATE32_LOWER, decode_pair32, encode_pair32, needs_refill32, refill32};
use ans_kernels::layout::LANES;
use rayon::prelude::*;

use crate::error::{AnsError, Result};
use crate::model::{Model, index};

/// A matrix coded in the planned lane layout: one stream of 16-bit words per unit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaneStreams {
    rows: usize,
    cols: usize,
    segment: usize,
    padding: i8,
    units: Vec<Vec<u16>>,
}

/// The padded columns and segments of a matrix of `cols` columns cut in `segment`-column
/// segments.
fn segments(cols: usize, segment: usize) -> (usize, usize) {
    let padded = cols.next_multiple_of(2);
    (padded, padded.div_ceil(segment))
}

/// Codes the row-major `rows x cols` matrix in the lane layout with `segment` columns per
/// unit (even, at least 2) and `model` (8-bit precision: [`Model::quantize`] at 8), padding
/// with the model's padding value.
///
/// # Errors
/// [`AnsError::Precision`] for a model of another precision, a shape or length error
/// ([`cmv_format::FormatError`]) for bad dimensions or an odd or zero segment.
pub fn encode_lanes(
    matrix: &[i8],
    rows: usize,
    cols: usize,
    segment: usize,
    model: &Model,
) -> Result<LaneStreams> {
    if model.precision() != ans_kernels::coder32::PAIR_PRECISION {
        return Err(AnsError::Precision {
            precision: model.precision(),
        });
    }
    cmv_format::Weights::new(matrix, rows, cols)?;
    if segment < 2 || !segment.is_multiple_of(2) || rows == 0 || cols == 0 {
        return Err(cmv_format::FormatError::Shape {
            format: "MatVANS lane model",
            rows,
            cols,
            rule: "rows and cols must be positive and the segment even (at least 2)",
        }
        .into());
    }
    let (padded_cols, nseg) = segments(cols, segment);
    let groups = rows.div_ceil(LANES);
    let (cdf, freq) = (model.cdfs(), model.freqs().map(u32::from));
    let padding = model.padding_value();
    let at = |r: usize, c: usize| {
        if r < rows && c < cols {
            matrix[r * cols + c]
        } else {
            padding
        }
    };
    let cf = |v: i8| (cdf[index(v)], freq[index(v)]);
    let units = (0..groups * nseg)
        .into_par_iter()
        .map(|u| {
            let (group, seg) = (u / nseg, u % nseg);
            let (c0, c1) = (seg * segment, ((seg + 1) * segment).min(padded_cols));
            let mut x = [STATE32_LOWER; LANES];
            let mut emitted: Vec<u16> = Vec::new();
            for c in (c0..c1).step_by(2).rev() {
                for l in (0..LANES).rev() {
                    let r = group * LANES + l;
                    let (nx, w) = encode_pair32(x[l], cf, [at(r, c), at(r, c + 1)]);
                    emitted.extend(w);
                    x[l] = nx;
                }
            }
            // Flushed lanes 31 down to 0, low half then high half: reversed, the stream starts
            // with hi(x_0), lo(x_0), ..., hi(x_31), lo(x_31).
            for &s in x.iter().rev() {
                emitted.push(s as u16);
                emitted.push((s >> 16) as u16);
            }
            emitted.reverse();
            emitted
        })
        .collect();
    Ok(LaneStreams {
        rows,
        cols,
        segment,
        padding,
        units,
    })
}

impl LaneStreams {
    /// Bits of the units' streams (states and data words), without the frequency table and
    /// the units' offsets.
    pub fn stream_bits(&self) -> u64 {
        16 * self.units.iter().map(|u| u.len() as u64).sum::<u64>()
    }

    /// [`LaneStreams::stream_bits`] plus a 32-bit offset per unit and the 512-byte frequency
    /// table of the container, per element of the unpadded matrix.
    pub fn bits_per_element(&self) -> f64 {
        let extra = 32 * self.units.len() as u64 + 8 * crate::model::FREQ_BYTES as u64;
        (self.stream_bits() + extra) as f64 / (self.rows * self.cols) as f64
    }

    /// Units of the layout.
    pub fn units(&self) -> usize {
        self.units.len()
    }

    /// Decodes the matrix (row-major, unpadded) with `model`, the one it was coded with.
    ///
    /// # Errors
    /// [`AnsError::Corrupted`] when a unit's stream runs dry, has words left over or does not
    /// end in the coders' initial states.
    pub fn decode(&self, model: &Model) -> Result<Vec<i8>> {
        let table: Vec<u32> = model.table();
        let lookup = |s: u32| ans_kernels::coder::Slot::from_packed(table[s as usize]);
        let (padded_cols, nseg) = segments(self.cols, self.segment);
        let mut out = vec![self.padding; self.rows * self.cols];
        for (u, stream) in self.units.iter().enumerate() {
            let corrupt = |reason: &str| AnsError::Corrupted {
                unit: "lane unit",
                index: u,
                reason: reason.into(),
            };
            let (group, seg) = (u / nseg, u % nseg);
            let (c0, c1) = (
                seg * self.segment,
                ((seg + 1) * self.segment).min(padded_cols),
            );
            if stream.len() < 2 * LANES {
                return Err(corrupt("shorter than its 32 states"));
            }
            let mut x: [u32; LANES] = core::array::from_fn(|l| {
                (u32::from(stream[2 * l]) << 16) | u32::from(stream[2 * l + 1])
            });
            let mut next = 2 * LANES;
            for c in (c0..c1).step_by(2) {
                for (l, xl) in x.iter_mut().enumerate() {
                    let ([v0, v1], nx) = decode_pair32(*xl, lookup);
                    *xl = nx;
                    let r = group * LANES + l;
                    for (col, v) in [(c, v0), (c + 1, v1)] {
                        if r < self.rows && col < self.cols {
                            out[r * self.cols + col] = v;
                        }
                    }
                }
                for xl in x.iter_mut() {
                    if needs_refill32(*xl) {
                        let w = *stream.get(next).ok_or_else(|| corrupt("stream ran dry"))?;
                        *xl = refill32(*xl, w);
                        next += 1;
                    }
                }
            }
            if next != stream.len() {
                return Err(corrupt("words left over"));
            }
            if x.iter().any(|&s| s != STATE32_LOWER) {
                return Err(corrupt("a coder did not end in its initial state"));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng, rngs::StdRng};

    use super::*;
    use crate::model::{counts, entropy_bits};

    fn gaussian_int8(n: usize, sigma: f64, seed: u64) -> Vec<i8> {
        let mut rng = StdRng::seed_from_u64(seed);
        (0..n)
            .map(|_| {
                // Box-Muller.
                let (u1, u2): (f64, f64) = (rng.gen_range(1e-12..1.0), rng.gen_range(0.0..1.0));
                let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                (z * sigma).round().clamp(-128.0, 127.0) as i8
            })
            .collect()
    }

    #[test]
    fn lane_units_round_trip_on_odd_shapes() {
        for (rows, cols, segment) in [(1, 1, 2), (33, 7, 4), (64, 300, 64), (5, 1000, 256)] {
            let w = gaussian_int8(rows * cols, 3.0, (rows * cols) as u64);
            let model = Model::quantize(&counts(&w), 8).unwrap();
            let l = encode_lanes(&w, rows, cols, segment, &model).unwrap();
            assert_eq!(
                l.units(),
                rows.div_ceil(32) * cols.next_multiple_of(2).div_ceil(segment)
            );
            assert_eq!(
                l.decode(&model).unwrap(),
                w,
                "{rows}x{cols} segment {segment}"
            );
        }
    }

    #[test]
    fn a_damaged_stream_is_reported_not_decoded_wrongly() {
        let (rows, cols) = (32, 512);
        let w = gaussian_int8(rows * cols, 4.0, 7);
        let model = Model::quantize(&counts(&w), 8).unwrap();
        let good = encode_lanes(&w, rows, cols, 512, &model).unwrap();
        let mut short = good.clone();
        short.units[0].pop();
        assert!(matches!(
            short.decode(&model),
            Err(AnsError::Corrupted { .. })
        ));
        let mut flipped = good.clone();
        flipped.units[0][100] ^= 0x0100;
        assert!(flipped.decode(&model).is_err());
        let mut long = good;
        long.units[0].push(0);
        assert!(matches!(
            long.decode(&model),
            Err(AnsError::Corrupted { .. })
        ));
    }

    #[test]
    fn sizes_at_sigma_4_stay_within_the_issue_budget() {
        // Issue 16's size goal: within 0.15 bits per element of the entropy at sigma = 4 for
        // d >= 8192; a 2048 x 8192 matrix with 1024-column segments (512 units).
        let (rows, cols) = (2048, 8192);
        let w = gaussian_int8(rows * cols, 4.0, 42);
        let c = counts(&w);
        let entropy = entropy_bits(&c) / w.len() as f64;
        let model = Model::quantize(&c, 8).unwrap();
        let model_overhead = (model.cross_entropy_bits(&c) - entropy_bits(&c)) / w.len() as f64;
        let l = encode_lanes(&w, rows, cols, 1024, &model).unwrap();
        let bits = l.bits_per_element();
        // The states' share: 32 x 32 bits per 32 x 1024 elements.
        let states = 32.0 / 1024.0;
        assert!(
            bits <= entropy + model_overhead + states + 0.01,
            "bits {bits}, entropy {entropy}, model {model_overhead}"
        );
        assert!(
            bits - entropy < 0.15,
            "{bits} bits against entropy {entropy}"
        );
        assert_eq!(l.decode(&model).unwrap(), w);
    }
}
