//! VQ-LLM for cmv: the code-stream arithmetic shared by the host crate `vq-codebook` and the
//! GPU ([`code_from_pair`]), the GEMV kernel's parameter struct, and (on `nvptx64`) the kernel.
//! The format is described in `docs/VQ.md`.
//!
//! `cmv_vq_gemv_b{B}` ([`VqGemvParams`], up to `B` of [`KERNEL_BATCHES`] vectors): the first,
//! plain fused kernel. One warp per row; lane `l` takes vectors `l, l + 32, ...` of the row,
//! reads each one's `bits`-bit code from the row's bit stream (one or two words), looks the
//! entry up in its tile's codebook (global memory, through L1) for every residual stage, and
//! multiplies it with the inputs; fp32 sums, a warp reduction, fp16 out. No codebook cache, no
//! codebook-centric dataflow yet (`docs/VQ.md`, "Not built yet").
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]

pub mod gemm;
pub mod gemm90;
/// `unroll!(i < N, { body })`: the body once for each `i` in `0..N` (`N <= 16`, a constant),
/// as straight-line code with `i` a constant in each copy, so arrays indexed by `i` stay in
/// registers. `unroll!(i in [0 1 2], { body })`: once for each listed value (no dead copies).
#[macro_export]
macro_rules! unroll {
    ($i:ident < $n:expr, $body:block) => {
        $crate::unroll!(@ $i, $n, $body, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
    };
    ($i:ident in [$($k:literal)*], $body:block) => {
        $({
            let $i: usize = $k;
            $body
        })*
    };
    (@ $i:ident, $n:expr, $body:block, $($k:literal)*) => {
        $({
            const K: usize = $k;
            if K < $n {
                let $i = K;
                $body
            }
        })*
    };
}

pub mod big;
/// The big-codebook table GEMV's device code (NVPTX only; entry points by
/// [`big_entry_points!`]).
#[cfg(target_arch = "nvptx64")]
#[doc(hidden)]
pub mod big_gpu;
pub mod bigmma;
/// The big-codebook tensor-core GEMV's device code (NVPTX only; entry points by
/// [`big_mma_entry_points!`]).
#[cfg(target_arch = "nvptx64")]
#[doc(hidden)]
pub mod bigmma_gpu;
/// Device helpers shared by the kernels here and by `vq-kernels-sm90` (the table lookup, the
/// codebook entry's load and replicated store).
#[cfg(target_arch = "nvptx64")]
pub mod dev;
#[cfg(all(target_arch = "nvptx64", feature = "entries"))]
mod kernels;
pub mod lut;
pub mod mma;
/// The tensor-core GEMV's device code (NVPTX only; entry points by [`mma_entry_points!`]).
#[cfg(target_arch = "nvptx64")]
#[doc(hidden)]
pub mod mma_gpu;

use cmv_device::{DevPtr, DevPtrMut, KernelParams};

/// The device pointers of a model launch's parameters (the table and tensor-core kernels'
/// CPU models, and the GEMM's unused split-K pointers): all null, never dereferenced on the
/// CPU, nor by a kernel that does not split. Codes, codebooks, inputs, outputs, fp32
/// workspace, counters.
/// Block `block` of `grid`'s equal contiguous share of `n` work items, `start..end` (the
/// shares of all blocks tile `0..n` in order): the split of the tensor-core GEMVs
/// (`crate::mma`, `crate::bigmma`).
#[inline(always)]
pub fn block_share(block: u32, grid: u32, n: u32) -> (u32, u32) {
    let share = |b: u32| ((b as u64 * n as u64) / grid as u64) as u32;
    (share(block), share(block + 1))
}

#[allow(clippy::type_complexity)]
pub(crate) fn null_ptrs() -> (
    DevPtr<u32>,
    DevPtr<u16>,
    DevPtr<u16>,
    DevPtrMut<u16>,
    DevPtrMut<f32>,
    DevPtrMut<u32>,
) {
    // SAFETY: null addresses, never dereferenced on the CPU, nor where they stand for unused
    // pointers.
    unsafe {
        (
            DevPtr::from_addr(0),
            DevPtr::from_addr(0),
            DevPtr::from_addr(0),
            DevPtrMut::from_addr(0),
            DevPtrMut::from_addr(0),
            DevPtrMut::from_addr(0),
        )
    }
}

/// Most vectors a GEMV kernel takes.
pub const MAX_BATCH: u32 = 16;
/// Warps (rows) per block.
pub const GEMV_WARPS: u32 = 8;
/// The vector counts the kernels are compiled for; a product runs the smallest that fits.
pub const KERNEL_BATCHES: [u32; 5] = [1, 2, 4, 8, 16];

/// Code `i` of a little-endian bit stream of `bits`-bit codes (`bits` in 1..=16), given the
/// word that holds its first bit (`lo`, word `i * bits / 32`) and the next one (`hi`, 0 past
/// the stream).
#[inline(always)]
pub const fn code_from_pair(lo: u32, hi: u32, bits: u32, i: usize) -> u32 {
    let sh = (i * bits as usize) % 32;
    let both = (hi as u64) << 32 | lo as u64;
    ((both >> sh) & ((1u64 << bits) - 1)) as u32
}

/// Parameters of `cmv_vq_gemv_b{B}`: `y = W x` for `batch` fp16 vectors.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VqGemvParams {
    /// The code streams, `rows * residuals * words` words.
    pub codes: DevPtr<u32>,
    /// The codebooks (fp16 bits), `tiles * residuals * 2^bits * vec` values.
    pub codebooks: DevPtr<u16>,
    /// `batch x cols` fp16 inputs.
    pub x: DevPtr<u16>,
    /// `batch x rows` fp16 outputs.
    pub y: DevPtrMut<u16>,
    /// Rows.
    pub rows: u32,
    /// Columns.
    pub cols: u32,
    /// Vector size `v` (1..=16).
    pub vec: u32,
    /// Code bits `b` (1..=16).
    pub bits: u32,
    /// Residual stages (1..=4).
    pub residuals: u32,
    /// Vectors per row.
    pub vecs: u32,
    /// Words per row and stage.
    pub words: u32,
    /// Rows per tile.
    pub tile_rows: u32,
    /// Vectors per tile row.
    pub tile_vecs: u32,
    /// Tiles across.
    pub tiles_c: u32,
    /// Vectors (1 to the kernel's `B`).
    pub batch: u32,
    /// Zero.
    pub pad: u32,
}
const _: () = assert!(core::mem::size_of::<VqGemvParams>() == 80);
// SAFETY: #[repr(C)], plain data (device addresses and integers), layout asserted above.
unsafe impl KernelParams for VqGemvParams {}

/// The kernel for `batch` vectors and the batch it is compiled for; `None` outside
/// `1..=MAX_BATCH`.
pub fn gemv_kernel(batch: u32) -> Option<(&'static str, u32)> {
    const NAMES: [&str; 5] = [
        "cmv_vq_gemv_b1",
        "cmv_vq_gemv_b2",
        "cmv_vq_gemv_b4",
        "cmv_vq_gemv_b8",
        "cmv_vq_gemv_b16",
    ];
    if batch == 0 {
        return None;
    }
    let i = KERNEL_BATCHES.iter().position(|&b| b >= batch)?;
    Some((NAMES[i], KERNEL_BATCHES[i]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_straddle_words_and_kernels_cover_every_batch() {
        // Codes 0..8 of 12 bits: i * 0x111.
        let mut words = [0u32; 4];
        for i in 0..8usize {
            let v = (i as u64 * 0x111) << ((i * 12) % 32);
            let w = i * 12 / 32;
            words[w] |= v as u32;
            if w + 1 < words.len() {
                words[w + 1] |= (v >> 32) as u32;
            }
        }
        for i in 0..8usize {
            let w = i * 12 / 32;
            let hi = words.get(w + 1).copied().unwrap_or(0);
            assert_eq!(code_from_pair(words[w], hi, 12, i), i as u32 * 0x111);
        }
        assert_eq!(code_from_pair(0xffff_ffff, 0, 16, 1), 0xffff);
        assert_eq!(code_from_pair(0, 1, 1, 32 + 32), 0);
        assert_eq!(gemv_kernel(3), Some(("cmv_vq_gemv_b4", 4)));
        assert_eq!(gemv_kernel(16), Some(("cmv_vq_gemv_b16", 16)));
        assert_eq!(gemv_kernel(0), None);
        assert_eq!(gemv_kernel(17), None);
    }
}
