//! [`DeviceGemv`], the GPU side of a format, and the helpers its launchers share.

use std::fmt::Debug;

use cmv_runtime::{CudaSlice, DeviceRepr, Gpu, RuntimeError};

use crate::CompressedMatrix;

/// How a GPU product compared with the CPU reference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Check {
    /// Bit-exact (integer formats).
    pub exact: bool,
    /// Relative error `||got - want|| / ||want||` (0 for exact results).
    pub rel_err: f64,
    /// The tolerance the format states (0 for exact formats).
    pub tolerance: f64,
}

impl Check {
    /// An exact comparison: `exact` when every value matches.
    pub fn exact(matches: bool) -> Self {
        Self {
            exact: matches,
            rel_err: if matches { 0.0 } else { f64::INFINITY },
            tolerance: 0.0,
        }
    }

    /// A comparison within `tolerance` relative error.
    pub fn within(rel_err: f64, tolerance: f64) -> Self {
        Self {
            exact: false,
            rel_err,
            tolerance,
        }
    }

    /// Whether the result is acceptable: exact, or a finite error below the tolerance.
    pub fn passed(&self) -> bool {
        self.exact || (self.rel_err.is_finite() && self.rel_err < self.tolerance)
    }
}

impl std::fmt::Display for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.exact {
            write!(f, "exact")
        } else if self.tolerance == 0.0 {
            write!(f, "MISMATCH")
        } else {
            write!(f, "rel_err={:.1e}", self.rel_err)
        }
    }
}

/// Relative error `||got - want||_2 / ||want||_2` (`||got - want||` when `want` is zero; NaN
/// when a value is not finite or the lengths differ).
pub fn relative_error(got: impl IntoIterator<Item = f64>, want: &[f64]) -> f64 {
    let (mut num, mut den, mut n) = (0.0f64, 0.0f64, 0usize);
    for (g, &w) in got.into_iter().zip(want) {
        num += (g - w) * (g - w);
        den += w * w;
        n += 1;
    }
    if n != want.len() || !num.is_finite() {
        return f64::NAN;
    }
    if den == 0.0 {
        num.sqrt()
    } else {
        (num / den).sqrt()
    }
}

/// The GPU side of a format: upload, kernels, the product of a batch of vectors on the device,
/// and its comparison with [`CompressedMatrix::reference`].
///
/// Launchers validate every size before they launch (a wrong length is an error, never an
/// out-of-bounds access) and queue their work on the [`Gpu`]'s stream; errors the kernels
/// flag while running (a corrupted stream) come out of [`DeviceGemv::finish`].
pub trait DeviceGemv: CompressedMatrix<Input: DeviceRepr> {
    /// The largest batch the GPU kernels take: the kernel crate's constant.
    const MAX_GPU_BATCH: usize;
    /// The matrix on the device.
    type Device: Send + Sync + Debug;
    /// The loaded kernels (and any workspace they keep).
    type Kernels: Send + Sync + Debug;
    /// What a product writes on the device (one or more output buffers).
    type DeviceOut: Send + Debug;

    /// Loads the kernels.
    ///
    /// # Errors
    /// Runtime errors (a driver that rejects the PTX, a missing entry point).
    fn load(gpu: &Gpu) -> Result<Self::Kernels, Self::Error>;

    /// Validates the matrix and uploads it.
    ///
    /// # Errors
    /// The format's validation errors; runtime errors.
    fn upload(&self, gpu: &Gpu) -> Result<Self::Device, Self::Error>;

    /// A second copy on the device (the bench rotates through copies larger than L2).
    ///
    /// # Errors
    /// Runtime errors.
    fn clone_device(device: &Self::Device) -> Result<Self::Device, Self::Error>;

    /// Bytes one product reads from device memory for the matrix (not the inputs).
    fn bytes_read(device: &Self::Device) -> usize;

    /// Output buffers for `batch` vectors of `rows` values.
    ///
    /// # Errors
    /// Runtime errors.
    fn alloc_out(gpu: &Gpu, rows: usize, batch: usize) -> Result<Self::DeviceOut, Self::Error>;

    /// Queues `y = W x` for `batch` vectors (`1..=MAX_GPU_BATCH`).
    ///
    /// # Errors
    /// [`FormatError::Batch`](crate::FormatError::Batch),
    /// [`FormatError::Length`](crate::FormatError::Length), runtime errors.
    fn gemv(
        kernels: &Self::Kernels,
        device: &Self::Device,
        x: &CudaSlice<Self::Input>,
        out: &mut Self::DeviceOut,
        batch: usize,
    ) -> Result<(), Self::Error>;

    /// Waits for the queued products and reports what their kernels flagged.
    ///
    /// # Errors
    /// The format's (a corrupted matrix found while decoding), runtime errors.
    fn finish(kernels: &Self::Kernels, gpu: &Gpu) -> Result<(), Self::Error> {
        let _ = kernels;
        gpu.synchronize().map_err(crate::FormatError::from)?;
        Ok(())
    }

    /// Downloads `out` and compares it with `want`, the reference product of the same
    /// inputs.
    ///
    /// # Errors
    /// Runtime errors.
    fn check(gpu: &Gpu, out: &Self::DeviceOut, want: &[Self::Output])
    -> Result<Check, Self::Error>;
}

/// Downloads fp16 outputs and compares the first `want.len()` with `want`, an f64 reference,
/// within `tolerance` relative error: [`DeviceGemv::check`] of every format with fp16 outputs.
///
/// # Errors
/// Runtime errors (the download).
pub fn check_f16(
    gpu: &Gpu,
    out: &CudaSlice<half::f16>,
    want: &[f64],
    tolerance: f64,
) -> Result<Check, RuntimeError> {
    let got = gpu.download(out)?;
    let got = got.iter().take(want.len()).map(|v| f64::from(v.to_f32()));
    Ok(Check::within(relative_error(got, want), tolerance))
}

/// A device-to-device copy of `s` (for [`DeviceGemv::clone_device`]).
///
/// # Errors
/// [`RuntimeError::Driver`] (out of memory).
pub fn clone_slice<T: DeviceRepr>(s: &CudaSlice<T>) -> Result<CudaSlice<T>, RuntimeError> {
    s.try_clone().map_err(|source| RuntimeError::Driver {
        op: "cuMemcpyDtoD",
        source,
    })
}

/// Writes `try_clone` for a device matrix: `pub fn try_clone(&self) -> Result<Self, Error>`,
/// a second copy with each listed `CudaSlice` field copied on the device ([`clone_slice`]) and
/// every other field copied as it is (they must be `Copy`). Invoked inside the type's `impl`
/// block with the format's error type (which converts from
/// [`RuntimeError`](cmv_runtime::RuntimeError)) and the buffer fields; the format's
/// [`DeviceGemv::clone_device`] calls it.
#[macro_export]
macro_rules! device_try_clone {
    ($err:ty; $($buffer:ident),+ $(,)?) => {
        /// A second copy on the device (to rotate through copies larger than L2 when timing).
        ///
        /// # Errors
        /// Runtime errors (out of memory).
        pub fn try_clone(&self) -> ::core::result::Result<Self, $err> {
            Ok(Self {
                $($buffer: $crate::clone_slice(&self.$buffer)?,)+
                ..*self
            })
        }
    };
}

/// Uploads `v`, or one zero element when it is empty: a launch needs a valid pointer even
/// where the kernel reads no element.
///
/// # Errors
/// Runtime errors.
pub fn upload_nonempty<T: DeviceRepr + Copy + Default>(
    gpu: &Gpu,
    v: &[T],
) -> Result<CudaSlice<T>, RuntimeError> {
    if v.is_empty() {
        gpu.upload(&[T::default()])
    } else {
        gpu.upload(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_pass_when_exact_or_within_tolerance() {
        assert!(Check::exact(true).passed());
        assert!(!Check::exact(false).passed());
        assert_eq!(Check::exact(false).to_string(), "MISMATCH");
        assert!(Check::within(1e-4, 1e-3).passed());
        assert!(!Check::within(1e-2, 1e-3).passed());
        assert!(!Check::within(f64::NAN, 1e-3).passed());
        assert_eq!(Check::within(2.1e-4, 1e-3).to_string(), "rel_err=2.1e-4");
    }

    #[test]
    fn relative_errors() {
        assert_eq!(relative_error([1.0, 2.0], &[1.0, 2.0]), 0.0);
        assert!((relative_error([3.0, 4.0], &[0.0, 0.0]) - 5.0).abs() < 1e-12);
        assert!((relative_error([1.1], &[1.0]) - 0.1).abs() < 1e-12);
        assert!(relative_error([1.0], &[1.0, 2.0]).is_nan());
        assert!(relative_error([f64::NAN], &[1.0]).is_nan());
    }
}
