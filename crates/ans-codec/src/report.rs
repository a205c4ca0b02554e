//! [`EntropyReport`]: what a compressed matrix's stream carries, against the entropy of its
//! values. Unlike [`AnsMatrix::size_breakdown`], it needs the matrix decoded.

use ans_kernels::layout::{BLOCK_WORDS, LANES, interleave};

use crate::lanes;
use crate::matrix::{AnsMatrix, STATE_WORDS};
use crate::model::{FREQ_BYTES, VALUES, entropy_bits, index};

impl AnsMatrix {
    /// The stream's payload, flushed states and padding and the entropy figures of the
    /// values, beside the container's parts.
    ///
    /// This needs the matrix decoded: the encoder and a load (which decodes every unit to
    /// check it) keep what it needs; for any other matrix the first call decodes it once (a
    /// unit that does not decode counts all its non-state words as payload). For sizes alone
    /// use [`AnsMatrix::size_breakdown`], which never decodes.
    pub fn entropy_report(&self) -> EntropyReport {
        let stats = self.stats();
        let data: usize = stats.data_words.iter().map(|&w| w as usize).sum();
        let stream = self.stream.len() * 4;
        // Data and state words are 16-bit for ans-lanes, 32-bit otherwise.
        let word = self.layout.word_bytes();
        // ans-lanes-esc: the units' exception headers and lists, counted among the data words.
        let exception_bytes = if self.layout.has_exceptions() {
            2 * self
                .offsets
                .windows(2)
                .filter_map(|w| self.stream.get(w[0] as usize..w[1] as usize))
                .map(lanes::exception_halfwords)
                .sum::<usize>()
        } else {
            0
        };
        let payload_bytes = (data * word).saturating_sub(exception_bytes);
        let flushed_state_bytes = self.units() * STATE_WORDS * word;
        let table_bytes = FREQ_BYTES;
        let offset_bytes = self.offsets.len() * 4;
        let total = self.size_breakdown().container_bytes as usize;
        let n: u64 = stats.counts.iter().sum();
        let per = |bits: f64| if n == 0 { 0.0 } else { bits / n as f64 };
        EntropyReport {
            elements: self.shape.rows() * self.shape.cols(),
            padded_elements: self.shape.padded_rows() * self.shape.padded_cols(),
            precision: self.precision(),
            payload_bytes,
            exception_bytes,
            flushed_state_bytes,
            padding_bytes: stream
                .saturating_sub(payload_bytes + exception_bytes + flushed_state_bytes),
            table_bytes,
            offset_bytes,
            header_bytes: total.saturating_sub(stream + table_bytes + offset_bytes),
            coded_bits: per(payload_bytes as f64 * 8.0 + self.state_information_bits()),
            entropy_bits: per(entropy_bits(&stats.counts)),
            cross_entropy_bits: per(self
                .model
                .cross_entropy_bits(&self.coded_counts(&stats.counts))),
        }
    }

    /// The counts of the values as coded: for `ans-lanes-esc`, the values the model does not
    /// code (escaped ones) counted as the escape value.
    fn coded_counts(&self, counts: &[u64; VALUES]) -> [u64; VALUES] {
        let Some(escape) = self.escape_value() else {
            return *counts;
        };
        let mut merged = *counts;
        for i in 0..VALUES {
            if self.model.freqs()[i] == 0 && merged[i] > 0 {
                merged[index(escape)] += merged[i];
                merged[i] = 0;
            }
        }
        merged
    }

    /// Bits of information in the flushed states: `log2(state / 2^32)` summed over every
    /// coder (`log2(state / 2^16)` for `ans-lanes`; a state below that, only possible in a
    /// damaged stream, counts 0).
    fn state_information_bits(&self) -> f64 {
        let mut bits = 0.0;
        if self.layout.is_lanes() {
            for w in self.offsets.windows(2) {
                let Some(unit) = self.stream.get(w[0] as usize..w[1] as usize) else {
                    continue;
                };
                for l in 0..LANES {
                    if let Some(x) = lanes::initial_state(unit, l) {
                        bits += f64::from(x).log2().max(16.0) - 16.0;
                    }
                }
            }
            return bits;
        }
        for &start in &self.offsets[..self.offsets.len() - 1] {
            let Some(unit) = self
                .stream
                .get(start as usize..start as usize + BLOCK_WORDS)
            else {
                continue;
            };
            for l in 0..LANES {
                let hi = u64::from(unit[interleave(2 * l)]);
                let lo = u64::from(unit[interleave(2 * l + 1)]);
                bits += ((hi << 32 | lo) as f64).log2().max(32.0) - 32.0;
            }
        }
        bits
    }

    /// Bits per element of the whole container (`to_bytes().len() * 8 / (rows * cols)`), from
    /// [`AnsMatrix::size_breakdown`] (no decode).
    pub fn bits_per_element(&self) -> f64 {
        self.size_breakdown().bits_per_weight()
    }

    /// Bits per element of the payload alone (the data words the coders emitted), from
    /// [`AnsMatrix::entropy_report`] (which may decode).
    pub fn payload_bits_per_element(&self) -> f64 {
        self.entropy_report().payload_bits_per_element()
    }
}

/// The size of a compressed matrix, part by part, in bytes, and the entropy figures of its
/// values (per real element). The parts add up to the container's length.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EntropyReport {
    /// Real elements, `rows * cols`.
    pub elements: usize,
    /// Elements coded, padding included.
    pub padded_elements: usize,
    /// The model's precision.
    pub precision: u32,
    /// Data words the coders emitted (the cost of the real elements and the padding).
    pub payload_bytes: usize,
    /// `ans-lanes-esc`: the units' exception headers and lists (0 for the other layouts).
    pub exception_bytes: usize,
    /// The coders' flushed final states: 64 words per row, stripe or lane unit (256 bytes, or
    /// 128 for `ans-lanes`' 16-bit words).
    pub flushed_state_bytes: usize,
    /// Zero words padding each stream to a multiple of 128 words (`ans-lanes`: of 8 16-bit
    /// words).
    pub padding_bytes: usize,
    /// The frequency table as stored (256 `u16`).
    pub table_bytes: usize,
    /// The offsets.
    pub offset_bytes: usize,
    /// The container's header, part table and alignment padding.
    pub header_bytes: usize,
    /// Information the stream carries, bits per real element: the payload plus what the
    /// flushed states hold beyond their starting value (`log2(state / 2^32)` per coder,
    /// `log2(state / 2^16)` for `ans-lanes`). It
    /// equals the model's cross-entropy of the coded elements, padding included, up to the
    /// coder's renormalization loss; the payload alone is lower by the states' share.
    pub coded_bits: f64,
    /// Empirical entropy of the real elements, bits per element.
    pub entropy_bits: f64,
    /// Cross-entropy of the real elements under the model, bits per element (for
    /// `ans-lanes-esc`, of the values as coded, escaped ones as the escape value; their
    /// exceptions cost `exception_bytes` more).
    pub cross_entropy_bits: f64,
}

impl EntropyReport {
    /// Bytes of the stream: payload, exceptions, states and padding.
    pub fn stream_bytes(&self) -> usize {
        self.payload_bytes + self.exception_bytes + self.flushed_state_bytes + self.padding_bytes
    }

    /// Bytes of the whole container.
    pub fn total_bytes(&self) -> usize {
        self.stream_bytes() + self.table_bytes + self.offset_bytes + self.header_bytes
    }

    /// `bytes` in bits per real element.
    pub fn per_element(&self, bytes: usize) -> f64 {
        bytes as f64 * 8.0 / self.elements.max(1) as f64
    }

    /// Bits per real element of the whole container.
    pub fn bits_per_element(&self) -> f64 {
        self.per_element(self.total_bytes())
    }

    /// Bits per real element of the payload.
    pub fn payload_bits_per_element(&self) -> f64 {
        self.per_element(self.payload_bytes)
    }
}

impl std::fmt::Display for EntropyReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "P={} entropy {:.4} cross-entropy {:.4} coded {:.4} | bits/element: payload {:.4} \
             exceptions {:.4} states {:.4} padding {:.4} table {:.5} offsets {:.5} header {:.5} \
             total {:.4}",
            self.precision,
            self.entropy_bits,
            self.cross_entropy_bits,
            self.coded_bits,
            self.payload_bits_per_element(),
            self.per_element(self.exception_bytes),
            self.per_element(self.flushed_state_bytes),
            self.per_element(self.padding_bytes),
            self.per_element(self.table_bytes),
            self.per_element(self.offset_bytes),
            self.per_element(self.header_bytes),
            self.bits_per_element(),
        )
    }
}
