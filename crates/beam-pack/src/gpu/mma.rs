//! GEMM on integer tensor cores for operands of at most 8 bits, and for `nogaps` operands of
//! one width up to 24 bits as byte planes (`kernels-rs/beam-kernels`, module `mma`); on
//! Hopper, `nogaps` operands of one width up to 8 bits run the `wgmma` kernel
//! (`beam_kernels::gemm90`, crate `beam-kernels-sm90`).

use beam_kernels::GemmParams;
use beam_kernels::gemm90;
use beam_kernels::mma::{
    NOGAPS_PLANE_NAMES, THREADS, TILE_M, TILE_N, kernel_name, needs_wide, smem_bytes, supports,
};
use cmv_runtime::{Gpu, Kernel, LaunchConfig};
use std::collections::HashMap;

use super::{DeviceBeamMatrix, DeviceBeamOut, PTX, PTX_SM90};
use crate::{BeamError, Overflow};

/// The tensor-core GEMM kernels: one per width for `nogaps` operands of one width, one per
/// layout shared by A and B and one for mixed layouts, each with 32-bit sums and with exact
/// 64-bit sums; and for `nogaps` operands of one width in 9..=24 bits, one per width as two
/// or three byte planes with 32-bit sums. On compute capability 9.0 also the `wgmma` kernels
/// (`nogaps` of one width up to 8 bits, 32-bit sums), used where they apply unless turned off
/// ([`MmaGemm::set_hopper`], `CMV_BEAM_GEMM90=0`); of those, the warp-specialized kernels up
/// to [`gemm90::WS_MAX_BITS`] bits and the lockstep ones above, unless set otherwise
/// ([`MmaGemm::set_hopper_ws`], `CMV_BEAM_GEMM90_WS=1|0`); the register-`A` kernels where
/// [`gemm90::ra_preferred`] says or where set ([`MmaGemm::set_hopper_ra`],
/// `CMV_BEAM_GEMM90_RA=1|0`).
#[derive(Debug)]
pub struct MmaGemm {
    kernels: HashMap<&'static str, Kernel>,
    /// The `wgmma` kernels by width - 1 (empty below compute capability 9.0).
    hopper: Vec<Kernel>,
    /// The warp-specialized `wgmma` kernels by width - 1 (the same).
    hopper_ws: Vec<Kernel>,
    /// The register-`A` `wgmma` kernels by width - 1 (the same).
    hopper_ra: Vec<Kernel>,
    use_hopper: bool,
    /// `Some(on)` runs the warp-specialized kernels at every width (or never), `None` where
    /// [`gemm90::ws_preferred`] says.
    ws: Option<bool>,
    /// `Some(on)` runs the register-`A` kernels at every width (or never), `None` where
    /// [`gemm90::ra_preferred`] says; where they run, they take precedence over `ws`.
    ra: Option<bool>,
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
        // One kernel per width from the sm_90a module, with its threads and shared memory.
        let per_width = |names: [&'static str; 8], threads: u32, smem: fn(u32) -> u32| {
            (1..)
                .zip(names)
                .map(|(w, name)| gpu.kernel_for(&PTX_SM90, name, threads, smem(w)))
                .collect::<Result<Vec<_>, _>>()
        };
        let (mut hopper, mut hopper_ws, mut hopper_ra) = (Vec::new(), Vec::new(), Vec::new());
        if gpu.info().compute_capability == (9, 0) {
            hopper = per_width(gemm90::KERNEL_NAMES, gemm90::THREADS, gemm90::smem_bytes)?;
            hopper_ws = per_width(
                gemm90::WS_KERNEL_NAMES,
                gemm90::WS_THREADS,
                gemm90::ws_smem_bytes,
            )?;
            hopper_ra = per_width(
                gemm90::RA_KERNEL_NAMES,
                gemm90::THREADS,
                gemm90::ra_smem_bytes,
            )?;
        }
        let use_hopper = std::env::var("CMV_BEAM_GEMM90").map_or(true, |v| v != "0");
        let flag = |name: &str| {
            std::env::var(name).ok().and_then(|v| match v.as_str() {
                "0" => Some(false),
                "1" => Some(true),
                _ => None,
            })
        };
        let (ws, ra) = (flag("CMV_BEAM_GEMM90_WS"), flag("CMV_BEAM_GEMM90_RA"));
        Ok(Self {
            kernels,
            hopper,
            hopper_ws,
            hopper_ra,
            use_hopper,
            ws,
            ra,
        })
    }

    /// Which `wgmma` kernels run: `Some(true)` the warp-specialized ones at every width,
    /// `Some(false)` the lockstep ones, `None` (the default; `CMV_BEAM_GEMM90_WS=1|0` sets the
    /// others at load) the warp-specialized ones up to [`gemm90::WS_MAX_BITS`].
    pub fn set_hopper_ws(&mut self, ws: Option<bool>) {
        self.ws = ws;
    }

    /// Which `wgmma` kernels run with `A` in registers: `Some(true)` the register-`A` ones at
    /// every width (before the choice of [`Self::set_hopper_ws`]), `Some(false)` never, `None`
    /// (the default; `CMV_BEAM_GEMM90_RA=1|0` sets the others at load) where
    /// [`gemm90::ra_preferred`] says.
    pub fn set_hopper_ra(&mut self, ra: Option<bool>) {
        self.ra = ra;
    }

    /// Whether a product at width `w` runs the register-`A` `wgmma` kernel (where the `wgmma`
    /// kernels run at all).
    fn uses_ra(&self, w: u32) -> bool {
        self.ra.unwrap_or(gemm90::ra_preferred(w))
    }

    /// Whether a product at width `w` runs the warp-specialized `wgmma` kernel (where the
    /// `wgmma` kernels run at all and the register-`A` one does not).
    fn uses_ws(&self, w: u32) -> bool {
        !self.uses_ra(w) && self.ws.unwrap_or(gemm90::ws_preferred(w))
    }

    /// The threads and dynamic shared memory of the `wgmma` kernel that runs at width `w`.
    fn hopper_launch(&self, w: u32) -> (u32, u32) {
        if self.uses_ra(w) {
            (gemm90::THREADS, gemm90::ra_smem_bytes(w))
        } else if self.uses_ws(w) {
            (gemm90::WS_THREADS, gemm90::ws_smem_bytes(w))
        } else {
            (gemm90::THREADS, gemm90::smem_bytes(w))
        }
    }

    /// Whether the `wgmma` kernels run where they apply (they load only on compute capability
    /// 9.0; elsewhere this changes nothing).
    pub fn set_hopper(&mut self, on: bool) {
        self.use_hopper = on;
    }

    /// The `wgmma` kernel for these operands, where it is loaded, turned on and applies.
    fn hopper_kernel(
        &self,
        la: u32,
        lb: u32,
        a_bits: u32,
        b_bits: u32,
        wide: bool,
    ) -> Option<&Kernel> {
        if self.use_hopper && gemm90::supports(la, lb, a_bits, b_bits, wide) {
            let kernels = if self.uses_ra(a_bits) {
                &self.hopper_ra
            } else if self.uses_ws(a_bits) {
                &self.hopper_ws
            } else {
                &self.hopper
            };
            kernels.get(a_bits as usize - 1)
        } else {
            None
        }
    }

    /// What a launch of these operands and output runs: the `wgmma` kernel, or the name of
    /// an `mma.sync` entry point; `None` where the sums the output needs are beyond every
    /// tensor-core kernel (or the operands are).
    fn choose(
        &self,
        a: &DeviceBeamMatrix,
        b: &DeviceBeamMatrix,
        out_bits: u32,
        overflow: Overflow,
    ) -> Option<Result<&Kernel, &'static str>> {
        let wide = needs_wide(
            a.bits(),
            b.bits(),
            a.cols() as u64,
            out_bits,
            overflow.code(),
        );
        let (la, lb) = (a.layout().code(), b.layout().code());
        if let Some(k) = self.hopper_kernel(la, lb, a.bits(), b.bits(), wide) {
            return Some(Ok(k));
        }
        supports(la, lb, a.bits(), b.bits(), wide)
            .then(|| Err(kernel_name(la, lb, a.bits(), b.bits(), wide)))
    }

    /// The entry point a tensor-core product of these operands into `out` launches
    /// ([`BeamGemm::gemm`](super::BeamGemm::gemm) with `GemmKernel::Mma`), `None` where it
    /// refuses them.
    pub fn entry_point(
        &self,
        a: &DeviceBeamMatrix,
        b: &DeviceBeamMatrix,
        out: &DeviceBeamOut,
        overflow: Overflow,
    ) -> Option<&'static str> {
        self.choose(a, b, out.bits(), overflow)
            .map(|c| c.map_or_else(|name| name, Kernel::name))
    }

    /// Launches `out = A x B` (validated by [`super::BeamGemm::gemm`]: shapes, operands
    /// [`GemmKernel::Mma`](super::GemmKernel::Mma) accepts, `out` zeroed unless naive; here
    /// also whether the output needs sums the kernels can give). Returns the entry point
    /// launched.
    pub(crate) fn launch(
        &self,
        gpu: &Gpu,
        a: &DeviceBeamMatrix,
        b: &DeviceBeamMatrix,
        out: &mut DeviceBeamOut,
        overflow: Overflow,
    ) -> Result<&'static str, BeamError> {
        let choice = self.choose(a, b, out.bits(), overflow);
        let Some(choice) = choice.filter(|_| a.cols() == b.rows()) else {
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
        };
        let params = GemmParams {
            a: a.packed_ref(),
            b: b.packed_ref(),
            c: out.packed_out(),
            overflow: overflow.code(),
            pad: 0,
        };
        let name = match choice {
            Ok(k) => {
                let (threads, smem) = self.hopper_launch(a.bits());
                let cfg = LaunchConfig {
                    grid_dim: grid(a, b, gemm90::TILE_M, gemm90::TILE_N),
                    block_dim: (threads, 1, 1),
                    shared_mem_bytes: smem,
                };
                // SAFETY: as below, for the wgmma kernel of a.bits() (loaded on compute
                // capability 9.0 only; the register-A one when uses_ra, else the
                // warp-specialized one when uses_ws, as hopper_kernel picked by the same
                // rules, and hopper_launch gives its threads and shared memory):
                // gemm90::supports holds (both operands nogaps of that width, sums modulo
                // 2^32 suffice for the output); the grid covers C in gemm90::TILE_M x TILE_N
                // tiles with the kernel's threads (THREADS or WS_THREADS) and shared memory
                // (ra_smem_bytes, ws_smem_bytes or smem_bytes), as it expects.
                unsafe { k.launch(gpu.stream(), cfg, &params)? };
                return Ok(k.name());
            }
            Err(name) => name,
        };
        let (la, lb) = (a.layout().code(), b.layout().code());
        let k = self.kernels.get(name).ok_or_else(|| BeamError::Kernel {
            kernel: "mma",
            reason: format!("entry point {name} was not loaded"),
        })?;
        let cfg = LaunchConfig {
            grid_dim: grid(a, b, TILE_M, TILE_N),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: smem_bytes(la, lb, a.bits(), b.bits()),
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
        Ok(name)
    }
}

/// The grid of `tile_m x tile_n` tiles covering `C = A x B` (x: columns, y: rows); a side past
/// `u32` becomes `u32::MAX`, which the launch's configuration check refuses.
fn grid(a: &DeviceBeamMatrix, b: &DeviceBeamMatrix, tile_m: u32, tile_n: u32) -> (u32, u32, u32) {
    let tiles = |n: usize, t: u32| u32::try_from(n.div_ceil(t as usize)).unwrap_or(u32::MAX);
    (tiles(b.cols(), tile_n), tiles(a.rows(), tile_m), 1)
}
