//! `fp16-toy`: an uncompressed fp16 "format" written against the `cmv_format` traits alone.
//!
//! It stores the weights rounded to fp16 in a container of one part and multiplies on the GPU
//! through the dense fp16 kernel of `dense-gemv`. It compresses nothing: it shows (and tests)
//! that a format plugs into the bench through [`CompressedMatrix`] and [`DeviceGemv`] and one
//! line in [`crate::formats::registry`], and its rows must match `dense-fp16/cmv`'s.

use bytemuck::{Pod, Zeroable};
use cmv_format::cmv_runtime::{CudaSlice, Gpu};
use cmv_format::container::{ContainerSpec, PartSpec, Reader, Writer};
use cmv_format::{
    Check, CompressedMatrix, DeviceGemv, FormatError, Limits, SizeBreakdown, Weights,
    check_reference_args,
};
use dense_gemv::{DenseError, DenseGemv, DeviceMatrix};
use half::f16;

/// Errors of the toy format: the format core's and the dense kernels'.
#[derive(Debug, thiserror::Error)]
pub enum ToyError {
    /// Shapes, lengths, the container, limits, the runtime.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// The dense fp16 kernel or CPU reference.
    #[error(transparent)]
    Dense(#[from] DenseError),
}

/// The container's header fields.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
struct Fields {
    rows: u64,
    cols: u64,
}

static SPEC: ContainerSpec = ContainerSpec {
    format: Fp16Toy::NAME,
    magic: *b"CMVTOY16",
    version: 1,
    oldest_version: 1,
    fields_bytes: size_of::<Fields>(),
    parts: &[PartSpec::of::<u16>("weights")],
};

/// Tolerance of the GPU product against the fp64 reference (the dense fp16 kernel's).
pub const TOLERANCE: f64 = crate::dense::F16_TOLERANCE;

/// A row-major matrix of fp16 weights.
#[derive(Clone, Debug, PartialEq)]
pub struct Fp16Toy {
    rows: usize,
    cols: usize,
    weights: Vec<f16>,
}

fn check_shape(rows: usize, cols: usize) -> Result<(), FormatError> {
    if dense_gemv::check_shape(rows, cols).is_err() {
        return Err(FormatError::Shape {
            format: Fp16Toy::NAME,
            rows,
            cols,
            rule: "both sides must be in 1..=u32::MAX",
        });
    }
    Ok(())
}

impl Fp16Toy {
    /// The weights, row-major.
    pub fn weights(&self) -> &[f16] {
        &self.weights
    }
}

impl CompressedMatrix for Fp16Toy {
    const NAME: &'static str = "fp16-toy";
    type Weight = f32;
    type Input = f16;
    type Output = f64;
    type Options = ();
    type Error = ToyError;

    /// Rounds every weight to fp16 (to nearest); refuses weights that are not finite in fp16.
    fn encode_weights(weights: Weights<'_, f32>, _options: &()) -> Result<Self, ToyError> {
        check_shape(weights.rows(), weights.cols())?;
        let w: Vec<f16> = weights.data().iter().map(|&v| f16::from_f32(v)).collect();
        cmv_format::check_finite("weight", &w)?;
        Ok(Self {
            rows: weights.rows(),
            cols: weights.cols(),
            weights: w,
        })
    }

    fn rows(&self) -> usize {
        self.rows
    }

    fn cols(&self) -> usize {
        self.cols
    }

    fn size_breakdown(&self) -> SizeBreakdown {
        let bytes = 2 * self.weights.len() as u64;
        SizeBreakdown::new(self.rows, self.cols, SPEC.header_bytes() as u64 + bytes)
            .part("weights", bytes, true)
    }

    fn container_bytes(&self) -> Vec<u8> {
        let bits: Vec<u16> = self.weights.iter().map(|v| v.to_bits()).collect();
        let fields = Fields {
            rows: self.rows as u64,
            cols: self.cols as u64,
        };
        Writer::new(&SPEC, &fields).part(&bits).finish()
    }

    fn from_container(blob: &[u8], limits: &Limits) -> Result<Self, ToyError> {
        let mut r = Reader::open(blob, &SPEC)?;
        let f: Fields = r.fields();
        let elements = f.rows.saturating_mul(f.cols);
        limits.check_elements(elements)?;
        let (rows, cols) = (
            usize::try_from(f.rows).unwrap_or(usize::MAX),
            usize::try_from(f.cols).unwrap_or(usize::MAX),
        );
        check_shape(rows, cols)?;
        // The part's length is bounded by the blob's; the count must match the shape.
        let bits: Vec<u16> = r.part(elements)?;
        let weights: Vec<f16> = bits.into_iter().map(f16::from_bits).collect();
        cmv_format::check_finite("weight", &weights)?;
        Ok(Self {
            rows,
            cols,
            weights,
        })
    }

    /// The fp64 product of the fp16 weights and inputs; non-finite inputs propagate as in
    /// IEEE arithmetic.
    fn reference(&self, x: &[f16], batch: usize) -> Result<Vec<f64>, ToyError> {
        check_reference_args(x, batch, self.cols)?;
        if batch > dense_gemv::MAX_BATCH as usize {
            // The dense CPU reference takes the dense kernels' batches; larger ones in pieces.
            let mut y = vec![0.0; batch * self.rows];
            for (b0, chunk) in x
                .chunks(dense_gemv::MAX_BATCH as usize * self.cols)
                .enumerate()
            {
                let nb = chunk.len() / self.cols;
                let part = self.reference(chunk, nb)?;
                let start = b0 * dense_gemv::MAX_BATCH as usize * self.rows;
                y[start..start + part.len()].copy_from_slice(&part);
            }
            return Ok(y);
        }
        Ok(dense_gemv::cpu::gemv_f16(
            &self.weights,
            self.rows,
            self.cols,
            x,
            batch,
        )?)
    }
}

impl DeviceGemv for Fp16Toy {
    const MAX_GPU_BATCH: usize = dense_gemv::MAX_BATCH as usize;
    type Device = DeviceMatrix<f16>;
    type Kernels = DenseGemv;
    type DeviceOut = CudaSlice<f16>;

    fn load(gpu: &Gpu) -> Result<DenseGemv, ToyError> {
        Ok(DenseGemv::new(gpu)?)
    }

    fn upload(&self, gpu: &Gpu) -> Result<DeviceMatrix<f16>, ToyError> {
        Ok(DeviceMatrix::upload_f16(
            gpu,
            &self.weights,
            self.rows,
            self.cols,
        )?)
    }

    fn clone_device(device: &DeviceMatrix<f16>) -> Result<DeviceMatrix<f16>, ToyError> {
        Ok(device.try_clone()?)
    }

    fn bytes_read(device: &DeviceMatrix<f16>) -> usize {
        device.bytes()
    }

    fn alloc_out(gpu: &Gpu, rows: usize, batch: usize) -> Result<CudaSlice<f16>, ToyError> {
        let n = cmv_format::batch_len(batch, rows)?;
        // NaN, so that an output the kernel never wrote fails the check.
        Ok(gpu
            .upload(&vec![f16::NAN; n.max(1)])
            .map_err(FormatError::from)?)
    }

    fn gemv(
        kernels: &DenseGemv,
        device: &DeviceMatrix<f16>,
        x: &CudaSlice<f16>,
        out: &mut CudaSlice<f16>,
        batch: usize,
    ) -> Result<(), ToyError> {
        cmv_format::check_batch(batch, Self::MAX_GPU_BATCH)?;
        cmv_format::check_len(
            "input",
            x.len(),
            cmv_format::batch_len(batch, device.cols())?,
        )?;
        cmv_format::check_len_at_least(
            "output",
            out.len(),
            cmv_format::batch_len(batch, device.rows())?,
        )?;
        Ok(kernels.gemv_f16(device, x, out, batch)?)
    }

    fn check(gpu: &Gpu, out: &CudaSlice<f16>, want: &[f64]) -> Result<Check, ToyError> {
        let got = gpu.download(out).map_err(FormatError::from)?;
        cmv_format::check_len_at_least("output", got.len(), want.len())?;
        let err = cmv_format::relative_error(
            got[..want.len()].iter().map(|v| f64::from(v.to_f32())),
            want,
        );
        Ok(Check::within(err, TOLERANCE))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_rounds_and_refuses() {
        let w = [0.1f32, -2.0, 3.5, 1e-3, 65504.0, -0.0];
        let m = Fp16Toy::encode_slice(&w, 2, 3, &()).unwrap();
        assert_eq!(m.weights()[0], f16::from_f32(0.1));
        assert_eq!((m.rows(), m.cols()), (2, 3));
        let s = m.size_breakdown();
        assert_eq!(s.kernel_bits_per_weight(), 16.0);
        assert_eq!(s.container_bytes, m.container_bytes().len() as u64);
        assert!(matches!(
            Fp16Toy::encode_slice(&[1e6f32], 1, 1, &()),
            Err(ToyError::Format(FormatError::NonFinite { .. }))
        ));
        assert!(matches!(
            Fp16Toy::encode_slice(&w, 2, 2, &()),
            Err(ToyError::Format(FormatError::Length { .. }))
        ));
        assert!(matches!(
            Fp16Toy::encode_slice(&[], 0, 3, &()),
            Err(ToyError::Format(FormatError::Shape { .. }))
        ));
        let x = [f16::ONE, f16::ONE, f16::from_f32(2.0)];
        let y = m.reference(&x, 1).unwrap();
        assert_eq!(y.len(), 2);
        assert!((y[0] - (f64::from(f16::from_f32(0.1).to_f32()) - 2.0 + 7.0)).abs() < 1e-12);
        assert!(m.reference(&x, 0).is_err());
        assert!(m.reference(&x[..2], 1).is_err());
        // Batches past the dense reference's 16 go in pieces.
        let x40: Vec<f16> = (0..40 * 3)
            .map(|i| f16::from_f32(i as f32 / 64.0))
            .collect();
        let y40 = m.reference(&x40, 40).unwrap();
        assert_eq!(&y40[2 * 39..], &m.reference(&x40[3 * 39..], 1).unwrap()[..]);
    }

    #[test]
    fn containers_are_checked() {
        let m = Fp16Toy::encode_slice(&[1.0, 2.0, 3.0, 4.0], 2, 2, &()).unwrap();
        let b = m.container_bytes();
        assert_eq!(Fp16Toy::from_container(&b, &Limits::DEFAULT).unwrap(), m);
        let tight = Limits {
            max_elements: 3,
            ..Limits::DEFAULT
        };
        assert!(matches!(
            Fp16Toy::from_container(&b, &tight),
            Err(ToyError::Format(FormatError::Limit { .. }))
        ));
        for n in 0..b.len() {
            assert!(Fp16Toy::from_container(&b[..n], &Limits::DEFAULT).is_err());
        }
    }
}
