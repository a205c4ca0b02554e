//! The paper's GEMM kernels on CUDA cores (guide, tight, slabs, nogaps, flex-out).
//!
//! Each kernel has one entry point per arithmetic ([`Mode`]): the launch picks the narrowest
//! exact one from the operands' widths, the inner dimension, the output width and the
//! overflow behaviour, so that, for example, 8-bit operands with `ovf` run on 32-bit
//! multiply-adds. The guide keeps the programming guide's 64-bit arithmetic (wrapping, or
//! saturating where the exact result may reach 2^64).

use beam_kernels::GemmParams;
use beam_kernels::gemm::{self as kern, GUIDE_TILE, Kernel as Entry, MODES, Mode, THREADS};
use cmv_runtime::{Gpu, Kernel, LaunchConfig, RuntimeError};

use super::{DeviceBeamMatrix, DeviceBeamOut, GemmKernel, PTX};
use crate::{BeamError, Overflow};

/// The kernel crate's name for a CUDA-core kernel (`None` for `mma`).
fn entry_kernel(kernel: GemmKernel) -> Option<Entry> {
    Some(match kernel {
        GemmKernel::Guide => Entry::Guide,
        GemmKernel::Tight => Entry::Tight,
        GemmKernel::Slabs => Entry::Slabs,
        GemmKernel::SlabsFlexOut => Entry::SlabsFlexOut,
        GemmKernel::Nogaps => Entry::Nogaps,
        GemmKernel::NogapsFlexOut => Entry::NogapsFlexOut,
        GemmKernel::Mma => return None,
    })
}

/// The CUDA-core kernels a launch may pick.
const KERNELS: [GemmKernel; 6] = [
    GemmKernel::Guide,
    GemmKernel::Tight,
    GemmKernel::Slabs,
    GemmKernel::SlabsFlexOut,
    GemmKernel::Nogaps,
    GemmKernel::NogapsFlexOut,
];

/// The CUDA-core GEMM kernels, every entry point loaded.
#[derive(Debug)]
pub struct CudaCoreGemm {
    /// `(entry point, kernel)`.
    loaded: Vec<(&'static str, Kernel)>,
}

impl CudaCoreGemm {
    /// Loads the kernels.
    ///
    /// # Errors
    /// Runtime errors (a driver that rejects the PTX, a missing entry point).
    pub fn new(gpu: &Gpu) -> Result<Self, BeamError> {
        let mut loaded = Vec::new();
        for k in KERNELS.iter().filter_map(|&k| entry_kernel(k)) {
            for m in MODES {
                let name = kern::entry(k, m);
                if !loaded.iter().any(|(n, _)| *n == name) {
                    loaded.push((name, gpu.kernel(&PTX, name)?));
                }
            }
        }
        Ok(Self { loaded })
    }

    /// The arithmetic a launch of `A x B` into `out` with `overflow` runs.
    pub fn mode(
        a: &DeviceBeamMatrix,
        b: &DeviceBeamMatrix,
        out_bits: u32,
        overflow: Overflow,
    ) -> Mode {
        Mode::select(
            a.bits(),
            b.bits(),
            a.cols() as u64,
            out_bits,
            overflow_code(overflow),
        )
    }

    /// The entry point `kernel` runs for these operands (what `CudaCoreGemm::launch`
    /// launches), `None` for `mma`.
    pub fn entry_point(
        kernel: GemmKernel,
        a: &DeviceBeamMatrix,
        b: &DeviceBeamMatrix,
        out_bits: u32,
        overflow: Overflow,
    ) -> Option<&'static str> {
        let k = entry_kernel(kernel)?;
        Some(kern::entry(k, Self::mode(a, b, out_bits, overflow)))
    }

    /// Launches `kernel` (validated by [`super::BeamGemm::gemm`]: `A x B` shapes agree, `out`
    /// is `A.rows x B.cols`, the layouts and widths are the kernel's, `out` is zeroed unless
    /// naive).
    pub(crate) fn launch(
        &self,
        gpu: &Gpu,
        kernel: GemmKernel,
        a: &DeviceBeamMatrix,
        b: &DeviceBeamMatrix,
        out: &mut DeviceBeamOut,
        overflow: Overflow,
    ) -> Result<(), BeamError> {
        let fail = |reason: String| BeamError::Kernel {
            kernel: kernel.name(),
            reason,
        };
        let entry = entry_kernel(kernel).ok_or_else(|| fail("not a CUDA-core kernel".into()))?;
        // What the kernel's safety rests on, checked again here (cheap): the shapes, and one
        // layout for A, B and the output, the kernel's own.
        let layout = kern::kernel_layout(entry);
        if a.cols() != b.rows()
            || out.rows() != a.rows()
            || out.cols() != b.cols()
            || [a.layout(), b.layout(), out.layout()]
                .iter()
                .any(|l| l.code() != layout)
        {
            return Err(fail(format!(
                "operands {}x{} ({}), {}x{} ({}), output {}x{} ({}) do not fit the kernel",
                a.rows(),
                a.cols(),
                a.layout().name(),
                b.rows(),
                b.cols(),
                b.layout().name(),
                out.rows(),
                out.cols(),
                out.layout().name()
            )));
        }
        let mode = Self::mode(a, b, out.bits(), overflow);
        let name = kern::entry(entry, mode);
        let k = self
            .loaded
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, k)| k)
            .ok_or(RuntimeError::MissingKernel {
                module: PTX.name,
                kernel: name,
            })?;
        let (m, n) = (a.packed_ref().rows, b.packed_ref().cols);
        let cfg = if entry == Entry::Guide {
            let (gx, gy) = kern::grid(m, n, GUIDE_TILE, GUIDE_TILE);
            LaunchConfig {
                grid_dim: (gx, gy, 1),
                block_dim: (GUIDE_TILE * GUIDE_TILE, 1, 1),
                shared_mem_bytes: 2 * GUIDE_TILE * GUIDE_TILE * 8,
            }
        } else {
            let (gx, gy) = kern::grid(m, n, mode.block_rows(), mode.block_cols());
            LaunchConfig {
                grid_dim: (gx, gy, 1),
                block_dim: (THREADS, 1, 1),
                shared_mem_bytes: mode.smem_bytes(),
            }
        };
        let params = GemmParams {
            a: a.packed_ref(),
            b: b.packed_ref(),
            c: out.packed_out(),
            overflow: overflow_code(overflow),
            pad: 0,
        };
        // SAFETY: `a`, `b` and `out` are live device buffers of `gpu` holding exactly the
        // words of their (validated, canonical) geometry, which `params` describes; all three
        // are in the kernel's layout (checked above) and `a.cols == b.rows`, `out` is
        // `a.rows x b.cols` (checked above); `out` is borrowed mutably, so nothing else uses it
        // while the kernel runs, and `BeamGemm::gemm` zeroed it on this stream unless naive;
        // the grid covers the output with the block tile the entry point was built for
        // (`Mode::tile` of `mode`, or the guide's 16 x 16), with `THREADS` (256) threads and
        // the shared memory the kernel indexes (`Mode::smem_bytes`, or the guide's two tiles).
        unsafe { k.launch(gpu.stream(), cfg, &params)? };
        Ok(())
    }
}

/// The kernels' overflow code.
fn overflow_code(o: Overflow) -> u32 {
    match o {
        Overflow::Ovf => beam_kernels::layout::OVF,
        Overflow::Sat => beam_kernels::layout::SAT,
    }
}
