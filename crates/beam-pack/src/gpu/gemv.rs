//! GEMV: `B` of 1 to 16 columns, streaming the packed weights.

use cmv_runtime::Gpu;

use crate::BeamError;

/// The GEMV kernels.
#[derive(Debug)]
pub struct BeamGemv {}

impl BeamGemv {
    /// Loads the kernels.
    ///
    /// # Errors
    /// Runtime errors.
    pub fn new(_gpu: &Gpu) -> Result<Self, BeamError> {
        Ok(Self {})
    }
}

/// Input vectors on the device.
#[derive(Debug)]
pub struct DeviceVectors {}
