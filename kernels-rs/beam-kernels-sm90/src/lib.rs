//! The Hopper BEAM GEMM for `sm_90a` (`wgmma`); the layouts, the unpacking and the work are in
//! `beam_kernels::gemm90`. Also the single-vector direct GEMVs `cmv_beam_gemv_direct_b{bits}`
//! with programmatic dependent launch (`beam_kernels::direct_kernel`). Built to PTX by `cargo xtask ptx` (arch `sm_90a`); nothing here on
//! the host.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]

#[cfg(target_arch = "nvptx64")]
mod kernels;
