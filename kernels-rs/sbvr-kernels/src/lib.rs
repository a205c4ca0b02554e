//! SBVR for cmv: the bit layouts and exact arithmetic shared by the host crate `sbvr-format`
//! and the GPU ([`layout`]), the kernels' parameter structs, and (on `nvptx64`) the kernels.
//! The format is described in `docs/SBVR.md`.
//!
//! Kernels (each takes one parameter struct):
//! * `cmv_sbvr_quantize` ([`QuantParams`]): fp16 input vectors to int8 per group of 128 and
//!   their 8 bit-planes plus one f32 scale per group ([`layout::quantize_group`]); one warp per
//!   (vector, group).
//! * `cmv_sbvr_gemv_mma_n{N}_b{B}` ([`GemvParams`], up to `B` of [`KERNEL_BATCHES`] vectors,
//!   `N` = 2, 3, 4 bitvectors or any up to 8): a block per
//!   tile of 16 rows, its [`GEMV_WARPS`] warps striding over the pairs of groups. Per group,
//!   bitvector and vector one binary `mma.m16n8k128.and.popc`: 16 rows x 128 bits of the
//!   bitvector against the 8 bit-planes of the vector (the 8 columns), giving the 16 x 8
//!   popcounts; the epilogue weighs them with the [`layout::PIVOTS`], the row's coefficients
//!   and the group's scale.
//! * `cmv_sbvr_gemv_popc_n8_b{B}`: the same data flow on CUDA cores, the SBVR paper's way: each
//!   lane ANDs its 32-bit words of two rows with the 8 plane words and counts with `popc`.
//!
//! Outputs are fp16 (f32 sums), `y[v * rows + r]`.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]

pub mod layout;

#[cfg(target_arch = "nvptx64")]
mod kernels;

use cmv_device::{DevPtr, DevPtrMut, KernelParams, U32x4};

/// Most vectors a GEMV kernel takes.
pub const MAX_BATCH: u32 = 16;
/// Warps per block of the GEMV kernels.
pub const GEMV_WARPS: u32 = 8;
/// Warps per block of the quantization kernel.
pub const QUANT_WARPS: u32 = 8;

/// Most coefficient-cache entries a GEMV block copies to shared memory (16 KiB); larger
/// caches are read from global memory (through L1).
pub const MAX_SMEM_ENTRIES: u32 = 1024;

/// Bytes of the block's cross-warp sums of a GEMV kernel for `batch` vectors.
pub const fn gemv_red_bytes(batch: u32) -> u32 {
    GEMV_WARPS * batch * layout::TILE_ROWS as u32 * 4
}

/// Bytes of dynamic shared memory a GEMV kernel for `batch` vectors takes: the sums (two
/// buffers, alternate tiles), and the
/// coefficient cache of `entries` when it is copied (`entries <= MAX_SMEM_ENTRIES`).
pub const fn gemv_smem_bytes(batch: u32, entries: u32) -> u32 {
    2 * gemv_red_bytes(batch)
        + if entries <= MAX_SMEM_ENTRIES {
            16 * entries
        } else {
            0
        }
}

/// Parameters of `cmv_sbvr_quantize`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuantParams {
    /// `batch x cols` fp16 inputs.
    pub x: DevPtr<u16>,
    /// [`layout::Geometry::plane_words`] words written.
    pub planes: DevPtrMut<u32>,
    /// [`layout::Geometry::scales_len`] scales written.
    pub scales: DevPtrMut<f32>,
    /// Columns of the inputs.
    pub cols: u32,
    /// [`layout::Geometry::padded_groups`].
    pub padded_groups: u32,
    /// Vectors.
    pub batch: u32,
    /// Zero.
    pub pad: u32,
}
const _: () = assert!(core::mem::size_of::<QuantParams>() == 40);
// SAFETY: #[repr(C)], plain data (device addresses and integers), layout asserted above.
unsafe impl KernelParams for QuantParams {}

/// Parameters of the GEMV kernels.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemvParams {
    /// The bitvectors, [`layout::Geometry::bit_words`] `u64`s read as pairs.
    pub bits: DevPtr<U32x4>,
    /// The index array (`u8` or `u16` entries, [`GemvParams::index_u16`]).
    pub index: DevPtr<u8>,
    /// The coefficient cache, [`layout::COEF_STRIDE`] halves per entry.
    pub coeffs: DevPtr<U32x4>,
    /// The inputs' bit-planes (from `cmv_sbvr_quantize`).
    pub planes: DevPtr<u32>,
    /// The inputs' scales.
    pub scales: DevPtr<f32>,
    /// `batch x rows` fp16 outputs.
    pub y: DevPtrMut<u16>,
    /// Rows.
    pub rows: u32,
    /// Tiles of 16 rows.
    pub tiles: u32,
    /// Pairs of groups.
    pub pairs: u32,
    /// Bitvectors per group, 2..=8.
    pub nbits: u32,
    /// 1 when indices are `u16`, 0 for `u8`.
    pub index_u16: u32,
    /// Vectors, 1 to the kernel's `B`.
    pub batch: u32,
    /// Entries of the coefficient cache.
    pub entries: u32,
    /// 1 when the block copies the cache to shared memory (`entries <= MAX_SMEM_ENTRIES`).
    pub smem_cache: u32,
}
const _: () = assert!(core::mem::size_of::<GemvParams>() == 80);
// SAFETY: #[repr(C)], plain data (device addresses and integers), layout asserted above.
unsafe impl KernelParams for GemvParams {}

/// The vector counts the GEMV kernels are compiled for: a product of `batch` vectors runs the
/// kernel of the smallest of these that is at least `batch`.
pub const KERNEL_BATCHES: [u32; 5] = [1, 2, 4, 8, 16];

/// The GEMV kernel for `batch` vectors and `bits` bitvectors (`mma`: binary tensor cores,
/// else the CUDA-core `popc` way): its entry name and the batch it is compiled for (its shared
/// memory is [`gemv_smem_bytes`] of that). Tensor-core kernels are compiled for 2, 3 and 4
/// bitvectors exactly and for any count up to 8 (`_n8`); the CUDA-core ones for any count.
/// `None` outside `1..=MAX_BATCH` or `MIN_BITS..=MAX_BITS`.
pub fn gemv_kernel(mma: bool, bits: u32, batch: u32) -> Option<(&'static str, u32)> {
    const MMA: [[&str; 5]; 4] = [
        [
            "cmv_sbvr_gemv_mma_n2_b1",
            "cmv_sbvr_gemv_mma_n2_b2",
            "cmv_sbvr_gemv_mma_n2_b4",
            "cmv_sbvr_gemv_mma_n2_b8",
            "cmv_sbvr_gemv_mma_n2_b16",
        ],
        [
            "cmv_sbvr_gemv_mma_n3_b1",
            "cmv_sbvr_gemv_mma_n3_b2",
            "cmv_sbvr_gemv_mma_n3_b4",
            "cmv_sbvr_gemv_mma_n3_b8",
            "cmv_sbvr_gemv_mma_n3_b16",
        ],
        [
            "cmv_sbvr_gemv_mma_n4_b1",
            "cmv_sbvr_gemv_mma_n4_b2",
            "cmv_sbvr_gemv_mma_n4_b4",
            "cmv_sbvr_gemv_mma_n4_b8",
            "cmv_sbvr_gemv_mma_n4_b16",
        ],
        [
            "cmv_sbvr_gemv_mma_n8_b1",
            "cmv_sbvr_gemv_mma_n8_b2",
            "cmv_sbvr_gemv_mma_n8_b4",
            "cmv_sbvr_gemv_mma_n8_b8",
            "cmv_sbvr_gemv_mma_n8_b16",
        ],
    ];
    const POPC: [&str; 5] = [
        "cmv_sbvr_gemv_popc_n8_b1",
        "cmv_sbvr_gemv_popc_n8_b2",
        "cmv_sbvr_gemv_popc_n8_b4",
        "cmv_sbvr_gemv_popc_n8_b8",
        "cmv_sbvr_gemv_popc_n8_b16",
    ];
    if batch == 0 || !(layout::MIN_BITS..=layout::MAX_BITS).contains(&bits) {
        return None;
    }
    let i = KERNEL_BATCHES.iter().position(|&b| b >= batch)?;
    let name = if mma {
        MMA[(bits.min(5) - 2) as usize][i]
    } else {
        POPC[i]
    };
    Some((name, KERNEL_BATCHES[i]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_names_cover_every_batch() {
        assert_eq!(
            gemv_kernel(true, 4, 1),
            Some(("cmv_sbvr_gemv_mma_n4_b1", 1))
        );
        assert_eq!(
            gemv_kernel(true, 2, 3),
            Some(("cmv_sbvr_gemv_mma_n2_b4", 4))
        );
        assert_eq!(
            gemv_kernel(true, 5, 3),
            Some(("cmv_sbvr_gemv_mma_n8_b4", 4))
        );
        assert_eq!(
            gemv_kernel(true, 8, 16),
            Some(("cmv_sbvr_gemv_mma_n8_b16", 16))
        );
        assert_eq!(
            gemv_kernel(false, 2, 16),
            Some(("cmv_sbvr_gemv_popc_n8_b16", 16))
        );
        assert_eq!(
            gemv_kernel(false, 3, 9),
            Some(("cmv_sbvr_gemv_popc_n8_b16", 16))
        );
        assert_eq!(gemv_kernel(true, 4, 0), None);
        assert_eq!(gemv_kernel(true, 4, 17), None);
        assert_eq!(gemv_kernel(true, 1, 1), None);
        assert_eq!(gemv_kernel(true, 9, 1), None);
        for n in layout::MIN_BITS..=layout::MAX_BITS {
            for b in 1..=MAX_BATCH {
                let (name, k) = gemv_kernel(true, n, b).unwrap();
                assert!(k >= b && k < 2 * b && name.ends_with(&format!("_b{k}")));
                let slots: u32 = name[19..20].parse().unwrap();
                assert!(slots >= n && (slots == n || slots == 8), "{name}");
            }
        }
        assert_eq!(gemv_red_bytes(16), GEMV_WARPS * 16 * 16 * 4);
        assert_eq!(gemv_smem_bytes(1, 1024), 2 * gemv_red_bytes(1) + 16384);
        assert_eq!(gemv_smem_bytes(1, 1025), 2 * gemv_red_bytes(1));
    }
}
