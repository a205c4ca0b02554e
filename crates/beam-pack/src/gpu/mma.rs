//! GEMM on integer tensor cores for operands of at most 8 bits.

use cmv_runtime::Gpu;

use super::{DeviceBeamMatrix, DeviceBeamOut};
use crate::{BeamError, Overflow};

/// The tensor-core GEMM kernel.
#[derive(Debug)]
pub struct MmaGemm {}

impl MmaGemm {
    /// Loads the kernels.
    ///
    /// # Errors
    /// Runtime errors.
    pub fn new(_gpu: &Gpu) -> Result<Self, BeamError> {
        Ok(Self {})
    }

    /// Launches the kernel (validated by [`super::BeamGemm::gemm`]).
    pub(crate) fn launch(
        &self,
        _gpu: &Gpu,
        _a: &DeviceBeamMatrix,
        _b: &DeviceBeamMatrix,
        _out: &mut DeviceBeamOut,
        _overflow: Overflow,
    ) -> Result<(), BeamError> {
        Err(BeamError::Kernel { kernel: "mma", reason: "WIP".into() })
    }
}
