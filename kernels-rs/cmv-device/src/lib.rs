//! Device intrinsics for cmv's kernels.
//!
//! Every device crate of cmv is plain `#![no_std]` Rust compiled for `nvptx64-nvidia-cuda`
//! (see `docs/TOOLCHAIN.md`). This crate is the thin layer between that Rust and the PTX
//! instructions the kernels need: thread indices, barriers, warp shuffles and ballots, wide and
//! read-only loads, `dp4a`, fp16 conversions and shared memory. It also defines the types
//! of kernel parameter structs ([`DevPtr`], [`DevPtrMut`], [`KernelParams`]), shared by the
//! kernels and `cmv-runtime`'s typed launch.
//!
//! The crate also compiles for the host. There, the *pure* functions ([`dp4a`], [`popc`],
//! [`f16_to_f32`], [`f32_to_f16`], [`round_half_even_f64_to_i32`], ...) have bit-exact
//! fallbacks, so kernel math built from them is unit-tested on the CPU. Everything that only
//! means something on a GPU (indices, barriers, warp collectives, memory) exists only on
//! `nvptx64`.
//!
//! # Warp collectives
//! The shuffle and ballot functions use the `.sync` forms with a full member mask
//! (`0xffffffff`): every one of the 32 lanes of the warp must execute the same call, with no
//! lane exited. They are declared `unsafe` for that reason.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(stdarch_nvptx, asm_experimental_arch, link_llvm_intrinsics),
    allow(internal_features)
)]

mod math;
pub use math::*;

mod params;
pub use params::{DevPtr, DevPtrMut, KernelParams, TensorMap};

#[cfg(target_arch = "nvptx64")]
mod device;
#[cfg(target_arch = "nvptx64")]
pub use device::*;

/// Threads in a warp.
pub const WARP_SIZE: u32 = 32;

/// Sixteen bytes as four 32-bit words, aligned for one 128-bit vector load.
///
/// The shared type of every 128-bit load in cmv's kernels (`ld.global.v4.u32`).
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct U32x4(pub [u32; 4]);

const _: () = assert!(core::mem::size_of::<U32x4>() == 16);
const _: () = assert!(core::mem::align_of::<U32x4>() == 16);

#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo<'_>) -> ! {
    // A panic in a kernel is a bug (an index out of range, say): stop the kernel with a trap,
    // which the host sees as `CUDA_ERROR_ILLEGAL_INSTRUCTION` at the next synchronization.
    // SAFETY: `trap` has no preconditions; it aborts the kernel.
    unsafe { core::arch::nvptx::trap() }
}
