//! The Hopper VQ-GEMM for `sm_90a` (`wgmma`; the layouts and the work are in
//! `vq_kernels::gemm90`) and the tensor-core GEMV with programmatic dependent launch. Built to PTX by `cargo xtask ptx` (arch `sm_90a`); nothing here on the
//! host.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]

#[cfg(target_arch = "nvptx64")]
mod kernels;

// The tensor-core GEMV of `vq-kernels` with programmatic dependent launch: each block lets the
// next launch start at once and waits for the one before after its first code and codebook
// loads (`vq_kernels::mma_gpu::mma_gemv`).
#[cfg(target_arch = "nvptx64")]
vq_kernels::mma_entry_points!(true);
