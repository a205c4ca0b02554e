//! SpQR (3-bit 16x16 tiles with bi-level statistics, fp16 outliers) for cmv: the packing that
//! the host encoder and CPU decoder share with the GPU kernel ([`layout`]), and (on `nvptx64`)
//! the kernel. The format is specified in `docs/SPQR.md`.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]

pub mod layout;

#[cfg(target_arch = "nvptx64")]
mod kernels;

/// Threads per block of the kernel (one block per tile row).
pub const BLOCK_THREADS: u32 = 256;
/// Largest batch a kernel runs (kernels exist for 1, 2, 4 and 8).
pub const MAX_BATCH: u32 = 8;
/// Input columns staged in shared memory per chunk, for all vectors together.
pub const STAGE_FLOATS: u32 = 4096;

/// The kernel batch (accumulators per row) that runs `batch` vectors.
pub const fn kernel_batch(batch: u32) -> Option<u32> {
    match batch {
        1 => Some(1),
        2 => Some(2),
        3..=4 => Some(4),
        5..=8 => Some(8),
        _ => None,
    }
}

/// Columns per staged chunk for a kernel batch: a multiple of 256 (16 tiles of 16).
pub const fn chunk_cols(kernel_batch: u32) -> u32 {
    let c = STAGE_FLOATS / kernel_batch;
    if c < 256 { 256 } else { c - c % 256 }
}

/// Floats of dynamic shared memory the kernel uses: the staged vectors, their group sums, the
/// per-warp partial sums, the tile row's results, and 17 offsets.
pub const fn smem_floats(kernel_batch: u32, kc: u32, warps: u32) -> u32 {
    let b = kernel_batch;
    b * kc + b * kc / 16 + warps * 16 * b + 16 * b + 17
}

/// PTX name of the kernel for `batch` vectors and the outlier format.
pub fn kernel_name(batch: u32, ptcsr: bool) -> Option<&'static str> {
    Some(match (kernel_batch(batch)?, ptcsr) {
        (1, false) => "cmv_spqr_csr_b1",
        (2, false) => "cmv_spqr_csr_b2",
        (4, false) => "cmv_spqr_csr_b4",
        (8, false) => "cmv_spqr_csr_b8",
        (1, true) => "cmv_spqr_ptcsr_b1",
        (2, true) => "cmv_spqr_ptcsr_b2",
        (4, true) => "cmv_spqr_ptcsr_b4",
        _ => "cmv_spqr_ptcsr_b8",
    })
}
