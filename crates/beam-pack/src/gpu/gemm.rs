//! The paper's GEMM kernels on CUDA cores (guide, tight, slabs, nogaps, flex-out).

use cmv_runtime::Gpu;

use super::{DeviceBeamMatrix, DeviceBeamOut, GemmKernel};
use crate::{BeamError, Overflow};

/// The CUDA-core GEMM kernels.
#[derive(Debug)]
pub struct CudaCoreGemm {}

impl CudaCoreGemm {
    /// Loads the kernels.
    ///
    /// # Errors
    /// Runtime errors.
    pub fn new(_gpu: &Gpu) -> Result<Self, BeamError> {
        Ok(Self {})
    }

    /// Launches `kernel` (validated by [`super::BeamGemm::gemm`]).
    pub(crate) fn launch(
        &self,
        _gpu: &Gpu,
        kernel: GemmKernel,
        _a: &DeviceBeamMatrix,
        _b: &DeviceBeamMatrix,
        _out: &mut DeviceBeamOut,
        _overflow: Overflow,
    ) -> Result<(), BeamError> {
        Err(BeamError::Kernel { kernel: kernel.name(), reason: "WIP".into() })
    }
}
