//! BEAM for cmv: the bit layouts and exact arithmetic shared by the host crate `beam-pack`
//! and the GPU ([`layout`]), the kernels' parameter structs, and (on `nvptx64`) the kernels.
//! The format is specified in `docs/BEAM.md`.
//!
//! Kernels (each takes one parameter struct, launched by `beam-pack` through `cmv-runtime`'s
//! typed launch):
//! * GEMM `C = A x B` on CUDA cores, the paper's kernels ([`GemmParams`], module `gemm`);
//! * GEMM on integer tensor cores for operands of at most 8 bits, and for `nogaps` operands
//!   of one width up to 24 bits as byte planes ([`GemmParams`], module `mma`); on Hopper,
//!   `wgmma` for `nogaps` operands of one width up to 8 bits (module [`gemm90`], kernels in
//!   the crate `beam-kernels-sm90`);
//! * GEMV for `B` of 1 to [`MAX_BATCH`] columns, streaming `nogaps` weights (module `gemv`),
//!   on integer tensor cores for widths up to 8 (module `gemv_mma`).
//!
//! Every output is exact: the kernel accumulates in the narrowest [`layout::Acc`] that gives
//! the exact result for the overflow behaviour, then wraps or clamps it to its width
//! ([`layout::finish`]). Outputs are written packed in their width and layout; every layout
//! but `naive` ORs its bits into words the launcher zeroed first.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(abi_ptx, adt_const_params, asm_experimental_arch)
)]
#![cfg_attr(target_arch = "nvptx64", allow(incomplete_features))]

pub mod gemm;
pub mod gemm90;
pub mod gemv;
pub mod gemv_direct;
pub mod gemv_mma;
pub mod gemv_ring;
pub mod gemv_stream;
pub mod layout;
pub mod mma;

#[cfg(test)]
mod testing;

use cmv_device::{DevPtr, DevPtrMut, KernelParams};

#[cfg(target_arch = "nvptx64")]
pub mod access;
#[cfg(target_arch = "nvptx64")]
pub mod direct_kernel;

/// Most columns of `B` (vectors) a GEMV kernel takes.
pub const MAX_BATCH: u32 = 16;

/// A packed operand as a kernel reads it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackedRef {
    /// The packed words.
    pub words: DevPtr<u64>,
    /// Rows.
    pub rows: u32,
    /// Columns.
    pub cols: u32,
    /// Bits per element, 1..=64.
    pub bits: u32,
    /// Layout code ([`layout::NAIVE`], ...).
    pub layout: u32,
    /// [`layout::row_words`] (`naive`: the columns; `tight`: 0).
    pub row_words: u32,
    /// Zero.
    pub pad: u32,
}
const _: () = assert!(core::mem::size_of::<PackedRef>() == 32);

/// A packed output as a kernel writes it (zeroed by the launcher unless `naive`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackedOut {
    /// The packed words.
    pub words: DevPtrMut<u64>,
    /// Rows.
    pub rows: u32,
    /// Columns.
    pub cols: u32,
    /// Bits per element, 1..=64.
    pub bits: u32,
    /// Layout code.
    pub layout: u32,
    /// [`layout::row_words`].
    pub row_words: u32,
    /// Zero.
    pub pad: u32,
}
const _: () = assert!(core::mem::size_of::<PackedOut>() == 32);

impl PackedRef {
    /// What [`layout::place`] needs.
    #[inline(always)]
    pub const fn geometry(&self) -> layout::Geometry {
        layout::Geometry {
            cols: self.cols,
            bits: self.bits,
            layout: self.layout,
            row_words: self.row_words,
        }
    }
}

impl PackedOut {
    /// What [`layout::place`] needs.
    #[inline(always)]
    pub const fn geometry(&self) -> layout::Geometry {
        layout::Geometry {
            cols: self.cols,
            bits: self.bits,
            layout: self.layout,
            row_words: self.row_words,
        }
    }
}

/// Parameters of every GEMM kernel: `C = A x B`, `A` is `m x k`, `B` is `k x n`, `C` is
/// `m x n` (`A.cols == B.rows`, `C` is `A.rows x B.cols`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmParams {
    /// `A`.
    pub a: PackedRef,
    /// `B`.
    pub b: PackedRef,
    /// `C`.
    pub c: PackedOut,
    /// [`layout::OVF`] or [`layout::SAT`].
    pub overflow: u32,
    /// Zero.
    pub pad: u32,
}
const _: () = assert!(core::mem::size_of::<GemmParams>() == 104);
// SAFETY: repr(C), no padding (size asserted), plain data and device pointers only; the one
// parameter of every GEMM kernel.
unsafe impl KernelParams for GemmParams {}
