//! MatVANS (entropy-coded int8 matrices) for cmv: the coder core that the host encoder and CPU
//! decoder share with the GPU kernels, the layout constants, and (on `nvptx64`) the kernels.
//!
//! The format is specified in `docs/ANS.md`; [`coder`] holds the one decode step and its
//! inverse, [`layout`] the constants and the word interleaving every layout uses.
//!
//! Every kernel takes its parameters as one struct, [`AnsParams`], launched by `ans-codec`
//! through `cmv-runtime`'s typed launch.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(asm_experimental_arch))]
#![cfg_attr(all(target_arch = "nvptx64", feature = "entries"), feature(abi_ptx))]

pub mod coder;
pub mod coder32;
pub mod lanes;
pub mod layout;

use cmv_device::{DevPtr, DevPtrMut, KernelParams, U32x4};

/// The warp layouts' kernels; their entry points come with the `entries` feature (off in
/// `ans-kernels-sm90`, which uses only `raise` of it).
#[cfg(target_arch = "nvptx64")]
#[cfg_attr(
    not(feature = "entries"),
    allow(dead_code, unused_imports, unused_macros)
)]
pub mod kernels;
/// The `ans-lanes` kernels' bodies ([`lanes_entry_points!`] defines their entry points).
#[cfg(target_arch = "nvptx64")]
pub mod lanes_kernel;

/// The most input vectors one launch multiplies: the kernels take one.
pub const MAX_BATCH: usize = 1;

/// Error flag bits a kernel ORs into its error word: a unit's stream ran out (or its offsets
/// were inconsistent).
pub const ERR_STREAM_OVERRUN: u32 = 1;
/// Error flag: a coder did not end in its initial state.
pub const ERR_FINAL_STATE: u32 = 2;
/// Error flag (`cmv_ans_lanes` on `ans-lanes-esc`): a unit's exception header or an entry was
/// out of place (a count past the limit, set reserved bits, a column outside the unit or the
/// matrix); the entry was skipped.
pub const ERR_EXCEPTIONS: u32 = 4;

/// Parameters of every ANS kernel (`cmv_ans_rows_p7`, `cmv_ans_rows_smem`,
/// `cmv_ans_stripes_p7`, `cmv_ans_stripes_smem`), in the order of their former arguments.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AnsParams {
    /// The units' streams, back to back, read as 16-byte units (16-byte aligned).
    pub stream: DevPtr<U32x4>,
    /// `units + 1` word offsets of the units' streams (validated on the host).
    pub offsets: DevPtr<u32>,
    /// The 3 x 32 register-table words (the `_p7` kernels) or the `2^precision` packed
    /// entries (the `_smem` kernels).
    pub table: DevPtr<u32>,
    /// The input vector, `cols` int8 values (as bytes).
    pub x: DevPtr<u8>,
    /// The int32 accumulators, `rows`.
    pub y32: DevPtrMut<i32>,
    /// Their int8 requantization (`cmv_device::requantize`), `rows`.
    pub y8: DevPtrMut<i8>,
    /// One word the kernel ORs its error flags into ([`ERR_STREAM_OVERRUN`],
    /// [`ERR_FINAL_STATE`]).
    pub err: DevPtrMut<u32>,
    /// Requantization scale (finite).
    pub scale: f32,
    /// Rows of the matrix.
    pub rows: u32,
    /// Columns of the matrix.
    pub cols: u32,
    /// Columns padded as the layout pads them (a multiple of 128 for rows, of 4 for stripes).
    pub padded_cols: u32,
    /// The model's precision `P` (7 to 12; the `_p7` kernels ignore it).
    pub precision: u32,
}
const _: () = assert!(core::mem::size_of::<AnsParams>() == 76);
const _: () = assert!(core::mem::align_of::<AnsParams>() == 4);
// SAFETY: repr(C), no padding (seven 8-byte pointers at alignment 4 and five 32-bit fields,
// size asserted), plain data and device pointers only; the one parameter of the kernels named
// above.
unsafe impl KernelParams for AnsParams {}
