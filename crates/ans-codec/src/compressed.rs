//! [`CompressedMatrix`] for [`AnsMatrix`]: MatVANS as one of cmv's formats.

use cmv_format::{CompressedMatrix, Limits, SizeBreakdown, Weights, check_reference_args};

use crate::encode::encode_weights;
use crate::error::AnsError;
use crate::layout::Layout;
use crate::matrix::AnsMatrix;
use crate::options::EncodeOptions;

impl CompressedMatrix for AnsMatrix {
    const NAME: &'static str = "ans";
    type Weight = i8;
    type Input = i8;
    /// The int32 accumulators, wrapping as `dp4a` does ([`AnsMatrix::gemv_reference`]).
    type Output = i32;
    type Options = EncodeOptions;
    type Error = AnsError;

    fn encode_weights(weights: Weights<'_, i8>, options: &EncodeOptions) -> Result<Self, AnsError> {
        encode_weights(weights, options)
    }

    /// One warp per row, one thread per row, one thread per row and segment (`ans-lanes` and
    /// `ans-lanes-esc`, the default segment), and the encoder's choice ([`EncodeOptions::auto`] with the
    /// format's 0.1-bit budget: never larger than the int8 matrix).
    fn variants() -> Vec<(&'static str, EncodeOptions)> {
        [
            ("rows", Layout::WarpRows),
            ("stripes", Layout::WarpStripes),
            ("lanes", Layout::WarpLanes),
            ("lanes-esc", Layout::WarpLanesEsc),
        ]
        .into_iter()
        .map(|(name, layout)| {
            let options = EncodeOptions {
                layout,
                ..EncodeOptions::default()
            };
            (name, options)
        })
        .chain([("auto", EncodeOptions::auto(0.1))])
        .collect()
    }

    fn from_container(blob: &[u8], limits: &Limits) -> Result<Self, AnsError> {
        Self::from_bytes_with(blob, limits)
    }

    fn container_bytes(&self) -> Vec<u8> {
        self.to_bytes()
    }

    fn size_breakdown(&self) -> SizeBreakdown {
        AnsMatrix::size_breakdown(self)
    }

    fn cols(&self) -> usize {
        self.shape.cols()
    }

    fn rows(&self) -> usize {
        self.shape.rows()
    }

    /// The int32 products of the vectors one after another, exact (wrapping as `dp4a`).
    fn reference(&self, x: &[i8], batch: usize) -> Result<Vec<i32>, AnsError> {
        check_reference_args(x, batch, self.shape.cols())?;
        let mut y = Vec::with_capacity(batch * self.shape.rows());
        for v in x.chunks_exact(self.shape.cols()) {
            y.extend(self.accumulate(v)?);
        }
        Ok(y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trait_is_the_inherent_api() {
        let (rows, cols) = (37, 150);
        let w: Vec<i8> = (0..rows * cols).map(|i| ((i * 7) % 13) as i8 - 6).collect();
        let x: Vec<i8> = (0..2 * cols).map(|i| (i % 251) as u8 as i8).collect();
        for (name, opts) in AnsMatrix::variants() {
            let m = AnsMatrix::encode_slice(&w, rows, cols, &opts).unwrap();
            if opts.layout_budget_bits.is_none() {
                assert_eq!(m.layout(), opts.layout, "{name}");
            }
            assert_eq!(CompressedMatrix::rows(&m), rows);
            let blob = m.container_bytes();
            assert_eq!(blob.len() as u64, m.size_breakdown().container_bytes);
            assert_eq!(
                AnsMatrix::from_container(&blob, &Limits::default()).unwrap(),
                m
            );
            let y = m.reference(&x, 2).unwrap();
            assert_eq!(&y[..rows], m.gemv_reference(&x[..cols], 1.0).unwrap().0);
            assert_eq!(&y[rows..], m.gemv_reference(&x[cols..], 1.0).unwrap().0);
            assert!(m.reference(&x, 0).is_err());
            assert!(m.reference(&x[1..], 2).is_err());
            assert!(AnsMatrix::encode_slice(&w[1..], rows, cols, &opts).is_err());
        }
    }
}
