//! Dense GEMV for Hopper (`sm_90a`): the copy-engine tensor-core kernels
//! `cmv_gemv_{f16,i8}_bulk_n{8,16}` for up to 8 or 16 vectors (2-D tensor copies into a
//! shared-memory ring, `ldmatrix` fragments, `mma`). The design, the shared-memory layout, the
//! fragment addresses, the work plan and the parameters are in `dense_kernels::bulk`; the
//! `mma`s and output stores are `dense_kernels::tc_dev`'s. Built to PTX by `cargo xtask ptx`
//! (arch `sm_90a`; the parameter declared 64-byte aligned by `CMV_PARAMALIGN_*`, for the
//! tensor maps in it); nothing here on the host.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]

#[cfg(target_arch = "nvptx64")]
mod kernels;
