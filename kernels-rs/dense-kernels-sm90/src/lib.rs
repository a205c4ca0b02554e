//! Dense GEMV for Hopper (`sm_90a`): the bulk-copy tensor-core kernels
//! `cmv_gemv_{f16,i8}_bulk_n{8,16}` for up to 8 or 16 vectors. The design, the shared-memory
//! layout and the work plan are in `dense_kernels::bulk`; the fragments and `mma`s are those of
//! `dense_kernels::tc`. Built to PTX by `cargo xtask ptx` (arch `sm_90a`); nothing here on the
//! host.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]

#[cfg(target_arch = "nvptx64")]
mod kernels;
