//! The Hopper VQ-GEMM for `sm_90a` (`wgmma`; the layouts and the work are in
//! `vq_kernels::gemm90`) and the GEMV kernels with programmatic dependent launch (the
//! tensor-core one and the two big-codebook ones). Built to PTX by `cargo xtask ptx` (arch
//! `sm_90a`); nothing here on the host.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]

#[cfg(target_arch = "nvptx64")]
mod kernels;

// The tensor-core GEMV of `vq-kernels` with programmatic dependent launch: each block lets the
// next launch start at once and waits for the one before after its first code and codebook
// loads (`vq_kernels::mma_gpu::mma_gemv`).
#[cfg(target_arch = "nvptx64")]
vq_kernels::mma_entry_points!(true);

// The big-codebook kernels (AQLM-3) likewise: the next launch at once, the wait after the
// codebook copies are issued (`vq_kernels::big_gpu::big`, `vq_kernels::bigmma_gpu::
// big_mma_gemv`).
#[cfg(target_arch = "nvptx64")]
vq_kernels::big_entry_points!(true);
#[cfg(target_arch = "nvptx64")]
vq_kernels::big_mma_entry_points!(true);
