//! Dense matrix-vector kernels: the baselines every cmv format is measured against.
//!
//! * `cmv_gemv_f16_b1`, `_b4`: `Y = X W^T` for a row-major fp16 `W` (`rows x cols`) and 1 or
//!   up to 4 fp16 input vectors on the CUDA cores, fp32 accumulation, fp16 output. Needs
//!   `cols % 8 == 0` and 16-byte-aligned `W` and `X`.
//! * `cmv_gemv_i8_b{B}` (B in [`KERNEL_BATCHES`]): the same with int8 `W` and `X`, `dp4a` and int32 accumulation; writes
//!   the int32 accumulators and their int8 requantization ([`requantize`]). Needs
//!   `cols % 16 == 0`.
//! * [`tc`]: the tensor-core kernels for 2 to 16 vectors (`cmv_gemv_{f16,i8}_tc_*`, fp16
//!   `mma.m16n8k16` and int8 `mma.m16n8k32.s8`, with split-K), which `dense-gemv` runs from 5
//!   fp16 vectors (2 on tall matrices) and 3 int8 vectors on; the older 16-rows-per-group
//!   `cmv_gemv_f16_mma_n8` / `_n16` remain for comparison (`cmv-bench --explore-tc`).
//! * [`bulk`]: the layout, plan and parameters of the Hopper kernels for 1 to 16 vectors
//!   (`cmv_gemv_{f16,i8}_bulk_*`, crate `dense-kernels-sm90`), which stream 2-D boxes of
//!   weights and inputs through shared memory with the copy engine (TMA); `dense-gemv` runs
//!   them from 2 vectors on the shapes where they were measured faster
//!   ([`bulk::bulk_preferred`]).
//! * `cmv_gemv_f16_any`, `cmv_gemv_i8_any`: any `cols`, any batch; slower fallbacks.
//! * `cmv_stream_read`: reads a buffer once with 128-bit loads; the bandwidth ceiling.
//!
//! Layouts (all row-major, no padding): `W[row * cols + col]`, `X[b * cols + col]`,
//! `Y[b * rows + row]`.
//!
//! Each warp owns [`rows_per_warp_f16`]`(B)` (or `_i8`) consecutive rows; a block has
//! [`BLOCK_THREADS`] threads. The host computes the grid from these constants.
//!
//! Every kernel takes its parameters as one struct ([`GemvF16Params`], [`GemvI8Params`],
//! [`GemvF16AnyParams`], [`GemvI8AnyParams`], [`StreamReadParams`]), launched by `dense-gemv`
//! through `cmv-runtime`'s typed launch.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, adt_const_params))]
#![cfg_attr(target_arch = "nvptx64", allow(incomplete_features))]

mod math;
pub use math::*;
pub mod bulk;
pub mod tc;

use cmv_device::{DevPtr, DevPtrMut, KernelParams, U32x4};

#[cfg(all(target_arch = "nvptx64", feature = "entries"))]
mod kernels;
#[cfg(target_arch = "nvptx64")]
pub mod tc_dev;
#[cfg(all(target_arch = "nvptx64", feature = "entries"))]
mod tc_kernels;

/// Threads per block of every dense GEMV kernel.
pub const BLOCK_THREADS: u32 = 256;
/// Warps per block of every dense GEMV kernel.
pub const WARPS_PER_BLOCK: u32 = BLOCK_THREADS / cmv_device::WARP_SIZE;
/// Largest batch with a specialized kernel.
pub const MAX_BATCH: u32 = 16;
/// Column multiple the fp16 fast kernels need (one 16-byte chunk).
pub const F16_COL_MULTIPLE: u32 = 8;
/// Column multiple the int8 fast kernels need (one 16-byte chunk).
pub const I8_COL_MULTIPLE: u32 = 16;
/// Threads per block of the streaming-read kernel.
pub const STREAM_THREADS: u32 = 512;
/// 16-byte loads each streaming-read thread keeps in flight.
pub const STREAM_UNROLL: u32 = 4;

/// Batch sizes with a specialized kernel; a batch runs on the smallest one that holds it.
pub const KERNEL_BATCHES: [u32; 5] = [1, 2, 4, 8, 16];

/// The specialized batch size that runs `batch` input vectors, if any (`1..=MAX_BATCH`).
pub const fn kernel_batch(batch: u32) -> Option<u32> {
    let mut i = 0;
    while i < KERNEL_BATCHES.len() {
        if batch >= 1 && batch <= KERNEL_BATCHES[i] {
            return Some(KERNEL_BATCHES[i]);
        }
        i += 1;
    }
    None
}

// The work shapes below were chosen by `cmv-bench --explore` on an H200 (docs/PERF.md): more
// rows per warp reuse each input chunk for more weight chunks; a few 16-byte loads per lane in
// flight suffice when the columns are also split across warps (see `dense-gemv`'s split).

/// Rows each warp (group of warps, for the tensor-core kernels) of the fp16 kernel for
/// `kernel_batch` computes: 4 at batch 1, 2 at batch 4 (CUDA cores), 16 (the `mma` tile) for 8
/// and 16.
pub const fn rows_per_warp_f16(kernel_batch: u32) -> u32 {
    match kernel_batch {
        0..=1 => 4,
        2..=4 => 2,
        _ => 16,
    }
}

/// 16-byte chunks of each row a lane of the CUDA-core fp16 kernels loads before using any.
pub const fn unroll_f16(kernel_batch: u32) -> usize {
    match kernel_batch {
        0..=1 => 2,
        _ => 1,
    }
}

/// Rows each warp of `cmv_gemv_i8_b{kernel_batch}` computes.
pub const fn rows_per_warp_i8(kernel_batch: u32) -> u32 {
    match kernel_batch {
        0..=1 => 4,
        _ => 2,
    }
}

/// 16-byte chunks of each row a lane of `cmv_gemv_i8_b{kernel_batch}` loads before using any.
pub const fn unroll_i8(kernel_batch: u32) -> usize {
    match kernel_batch {
        0..=1 => 2,
        _ => 1,
    }
}

/// fp16 kernels: batch 1 and up to 4 on the CUDA cores, up to 8 and up to 16 on tensor
/// cores (measured faster from 5 vectors on; docs/PERF.md).
pub const F16_KERNEL_BATCHES: [u32; 4] = [1, 4, 8, 16];

/// The fp16 kernel batch (accumulator slots per row) that runs `batch` vectors (1..=16).
pub const fn f16_kernel_batch(batch: u32) -> Option<u32> {
    match batch {
        1 => Some(1),
        2..=4 => Some(4),
        5..=8 => Some(8),
        9..=16 => Some(16),
        _ => None,
    }
}

/// PTX name of the fp16 fast kernel that runs `batch` input vectors (1..=16).
pub fn f16_kernel_name(batch: u32) -> Option<&'static str> {
    Some(match f16_kernel_batch(batch)? {
        1 => "cmv_gemv_f16_b1",
        4 => "cmv_gemv_f16_b4",
        8 => "cmv_gemv_f16_mma_n8",
        _ => "cmv_gemv_f16_mma_n16",
    })
}

/// PTX name of the int8 fast kernel that runs `batch` input vectors (1..=16).
pub fn i8_kernel_name(batch: u32) -> Option<&'static str> {
    Some(match kernel_batch(batch)? {
        1 => "cmv_gemv_i8_b1",
        2 => "cmv_gemv_i8_b2",
        4 => "cmv_gemv_i8_b4",
        8 => "cmv_gemv_i8_b8",
        _ => "cmv_gemv_i8_b16",
    })
}

/// Parameters of the fast fp16 kernels (`cmv_gemv_f16_b1`, `_b4`, `cmv_gemv_f16_mma_n8`,
/// `_n16` and their `_x_` variants).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemvF16Params {
    /// `W`, `rows * cols` fp16 values, read as 16-byte chunks (16-byte aligned).
    pub w: DevPtr<U32x4>,
    /// `X`, `batch * cols` fp16 values, read as 16-byte chunks (16-byte aligned).
    pub x: DevPtr<U32x4>,
    /// `Y`, `batch * rows` fp16 values (as bits).
    pub y: DevPtrMut<u16>,
    /// Rows of `W`.
    pub rows: u32,
    /// Columns of `W`, a multiple of [`F16_COL_MULTIPLE`].
    pub cols: u32,
    /// Input vectors, `1..=` the kernel's batch.
    pub batch: u32,
    /// Warps that split each row group's columns (the launch's work split).
    pub slices: u32,
}
const _: () = assert!(core::mem::size_of::<GemvF16Params>() == 40);
// SAFETY: repr(C), no padding (size asserted), plain data and device pointers only; the
// one parameter of the kernels named above.
unsafe impl KernelParams for GemvF16Params {}

/// Parameters of the fast int8 kernels (`cmv_gemv_i8_b{B}` and their `_x_` variants).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemvI8Params {
    /// `W`, `rows * cols` int8 values, read as 16-byte chunks (16-byte aligned).
    pub w: DevPtr<U32x4>,
    /// `X`, `batch * cols` int8 values, read as 16-byte chunks (16-byte aligned).
    pub x: DevPtr<U32x4>,
    /// The int32 accumulators, `batch * rows`.
    pub y32: DevPtrMut<i32>,
    /// Their int8 requantization ([`requantize`]), `batch * rows`.
    pub y8: DevPtrMut<i8>,
    /// Requantization scale (finite).
    pub scale: f32,
    /// Rows of `W`.
    pub rows: u32,
    /// Columns of `W`, a multiple of [`I8_COL_MULTIPLE`].
    pub cols: u32,
    /// Input vectors, `1..=` the kernel's batch.
    pub batch: u32,
    /// Warps that split each row group's columns (the launch's work split).
    pub slices: u32,
    /// Zero; makes the struct's tail explicit, so it has no padding bytes.
    pub pad: u32,
}
const _: () = assert!(core::mem::size_of::<GemvI8Params>() == 56);
// SAFETY: repr(C), no padding (size asserted), plain data and device pointers only; the
// one parameter of the kernels named above.
unsafe impl KernelParams for GemvI8Params {}

/// Parameters of `cmv_gemv_f16_any` (any `cols`, any batch).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemvF16AnyParams {
    /// `W`, `rows * cols` fp16 values (as bits).
    pub w: DevPtr<u16>,
    /// `X`, `batch * cols` fp16 values (as bits).
    pub x: DevPtr<u16>,
    /// `Y`, `batch * rows` fp16 values (as bits).
    pub y: DevPtrMut<u16>,
    /// Rows of `W`.
    pub rows: u32,
    /// Columns of `W`.
    pub cols: u32,
    /// Input vectors.
    pub batch: u32,
    /// Zero; makes the struct's tail explicit, so it has no padding bytes.
    pub pad: u32,
}
const _: () = assert!(core::mem::size_of::<GemvF16AnyParams>() == 40);
// SAFETY: repr(C), no padding (size asserted), plain data and device pointers only; the
// one parameter of `cmv_gemv_f16_any`.
unsafe impl KernelParams for GemvF16AnyParams {}

/// Parameters of `cmv_gemv_i8_any` (any `cols`, any batch).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemvI8AnyParams {
    /// `W`, `rows * cols` int8 values (as bytes).
    pub w: DevPtr<u8>,
    /// `X`, `batch * cols` int8 values (as bytes).
    pub x: DevPtr<u8>,
    /// The int32 accumulators, `batch * rows`.
    pub y32: DevPtrMut<i32>,
    /// Their int8 requantization ([`requantize`]), `batch * rows`.
    pub y8: DevPtrMut<i8>,
    /// Requantization scale (finite).
    pub scale: f32,
    /// Rows of `W`.
    pub rows: u32,
    /// Columns of `W`.
    pub cols: u32,
    /// Input vectors.
    pub batch: u32,
}
const _: () = assert!(core::mem::size_of::<GemvI8AnyParams>() == 48);
// SAFETY: repr(C), no padding (size asserted), plain data and device pointers only; the
// one parameter of `cmv_gemv_i8_any`.
unsafe impl KernelParams for GemvI8AnyParams {}

/// Parameters of the streaming-read kernels (`cmv_stream_read` and `cmv_stream_x_*`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamReadParams {
    /// The buffer, `n` 16-byte chunks (16-byte aligned).
    pub p: DevPtr<U32x4>,
    /// Chunks in the buffer.
    pub n: u64,
    /// One word per warp of the grid (`grid * STREAM_THREADS / 32`).
    pub out: DevPtrMut<u32>,
}
const _: () = assert!(core::mem::size_of::<StreamReadParams>() == 24);
// SAFETY: repr(C), no padding (size asserted), plain data and device pointers only; the
// one parameter of the kernels named above.
unsafe impl KernelParams for StreamReadParams {}
