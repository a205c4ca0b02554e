//! GEMM on integer tensor cores for operands of at most 8 bits, and for `nogaps` operands of
//! one width up to 24 bits as byte planes (`kernels-rs/beam-kernels`, module `mma`).

use beam_kernels::GemmParams;
use beam_kernels::mma::{
    NOGAPS_PLANE_NAMES, THREADS, TILE_M, TILE_N, kernel_name, needs_wide, smem_bytes, supports,
};
use cmv_runtime::{Gpu, Kernel, LaunchConfig};
use std::collections::HashMap;

use super::{DeviceBeamMatrix, DeviceBeamOut, PTX};
use crate::{BeamError, Overflow};

/// The tensor-core GEMM kernels: one per width for `nogaps` operands of one width, one per
/// layout shared by A and B and one for mixed layouts, each with 32-bit sums and with exact
/// 64-bit sums; and for `nogaps` operands of one width in 9..=24 bits, one per width as two
/// or three byte planes with 32-bit sums.
#[derive(Debug)]
pub struct MmaGemm {
    kernels: HashMap<&'static str, Kernel>,
}

impl MmaGemm {
    /// Loads the kernels.
    ///
    /// # Errors
    /// Runtime errors (a driver that rejects the PTX, a missing entry point).
    pub fn new(gpu: &Gpu) -> Result<Self, BeamError> {
        let mut kernels = HashMap::new();
        for la in 0..4 {
            for lb in 0..4 {
                // Width 0 names the per-layout kernels (operands of different widths).
                for bits in 0..=8 {
                    for wide in [false, true] {
                        let name = kernel_name(la, lb, bits, bits, wide);
                        if !kernels.contains_key(name) {
                            kernels.insert(name, gpu.kernel(&PTX, name)?);
                        }
                    }
                }
            }
        }
        for name in NOGAPS_PLANE_NAMES {
            kernels.insert(name, gpu.kernel(&PTX, name)?);
        }
        Ok(Self { kernels })
    }

    /// Launches `out = A x B` (validated by [`super::BeamGemm::gemm`]: shapes, operands
    /// [`GemmKernel::Mma`](super::GemmKernel::Mma) accepts, `out` zeroed unless naive; here
    /// also whether the output needs sums the kernels can give).
    pub(crate) fn launch(
        &self,
        gpu: &Gpu,
        a: &DeviceBeamMatrix,
        b: &DeviceBeamMatrix,
        out: &mut DeviceBeamOut,
        overflow: Overflow,
    ) -> Result<(), BeamError> {
        let wide = needs_wide(
            a.bits(),
            b.bits(),
            a.cols() as u64,
            out.bits(),
            overflow.code(),
        );
        let (la, lb) = (a.layout().code(), b.layout().code());
        if !supports(la, lb, a.bits(), b.bits(), wide) || a.cols() != b.rows() {
            return Err(BeamError::Kernel {
                kernel: "mma",
                reason: format!(
                    "needs operands of at most 8 bits, or both nogaps of one width up to 24 \
                     bits with an output the sums modulo 2^32 determine (ovf, at most 32 \
                     bits: use a CUDA-core kernel otherwise), and A's columns equal to B's \
                     rows (got {} bits {}, {} bits {}, output {} bits {:?}, {} and {})",
                    a.bits(),
                    a.layout().name(),
                    b.bits(),
                    b.layout().name(),
                    out.bits(),
                    overflow,
                    a.cols(),
                    b.rows()
                ),
            });
        }
        let name = kernel_name(la, lb, a.bits(), b.bits(), wide);
        let k = self.kernels.get(name).ok_or_else(|| BeamError::Kernel {
            kernel: "mma",
            reason: format!("entry point {name} was not loaded"),
        })?;
        let grid_y = u32::try_from(a.rows().div_ceil(TILE_M as usize)).unwrap_or(u32::MAX);
        let grid_x = u32::try_from(b.cols().div_ceil(TILE_N as usize)).unwrap_or(u32::MAX);
        let cfg = LaunchConfig {
            grid_dim: (grid_x, grid_y, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: smem_bytes(la, lb, a.bits(), b.bits()),
        };
        let params = GemmParams {
            a: a.packed_ref(),
            b: b.packed_ref(),
            c: out.packed_out(),
            overflow: overflow.code(),
            pad: 0,
        };
        // SAFETY: a, b and out are device buffers whose word counts match their geometries
        // (DeviceBeamMatrix holds a canonical PackedMatrix's words, DeviceBeamOut was
        // allocated for its own); `supports` holds for the operands and the sums the
        // output needs (the kernel name's layouts and widths); A's columns equal B's rows,
        // and BeamGemm::gemm checked that out is A.rows x B.cols and zeroed it unless naive;
        // the grid covers C in TILE_M x TILE_N tiles with THREADS threads and smem_bytes of
        // shared memory for its operands, as the kernel expects (check_config in launch
        // refuses a grid beyond the device's limits); every kernel takes GemmParams.
        unsafe { k.launch(gpu.stream(), cfg, &params)? };
        Ok(())
    }
}
