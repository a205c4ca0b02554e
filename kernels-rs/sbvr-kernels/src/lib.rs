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

/// The kernels' bodies; the entry points are [`entry_points!`] (here with the `entries`
/// feature, and in `sbvr-kernels-sm90` with programmatic dependent launch).
#[cfg(target_arch = "nvptx64")]
#[doc(hidden)]
pub mod kernels;

use cmv_device::{DevPtr, DevPtrMut, KernelParams, U32x4};

/// Most vectors a GEMV kernel takes.
pub const MAX_BATCH: u32 = 16;
/// Warps per block of the GEMV kernels.
pub const GEMV_WARPS: u32 = 8;
/// Warps per block of the quantization kernel.
pub const QUANT_WARPS: u32 = 8;
// One launch bound (`.maxntid`) covers every kernel of the module.
const _: () = assert!(QUANT_WARPS == GEMV_WARPS);

/// Most coefficient-cache entries a GEMV block copies to shared memory (16 KiB); larger
/// caches are read from global memory (through L1).
pub const MAX_SMEM_ENTRIES: u32 = 1024;

/// Bytes of the block's cross-warp sums of a GEMV kernel for `batch` vectors.
pub const fn gemv_red_bytes(batch: u32) -> u32 {
    GEMV_WARPS * batch * layout::TILE_ROWS as u32 * 4
}

/// Blocks of a GEMV launch for `tiles` tiles when `slots` blocks fit on the GPU at once: the
/// fewest rounds that cover the tiles (`ceil(tiles / slots)`), and as few blocks as give every
/// block that many tiles or one fewer. Blocks walk the tiles `block, block + grid, ...`, so a
/// grid of every slot would leave the last round to a few blocks (896 tiles on 396 slots: 104
/// blocks walk a third tile while the other 292 are done); this one ends all blocks together.
pub const fn gemv_grid(tiles: u32, slots: u32) -> u32 {
    let slots = if slots == 0 { 1 } else { slots };
    let rounds = tiles.div_ceil(slots);
    if rounds == 0 {
        1
    } else {
        tiles.div_ceil(rounds)
    }
}

/// Slots of the int8 kernels' per-warp ring of quantized inputs in shared memory.
pub const INT8_STAGES: u32 = 2;

/// Bytes of one warp's ring of an int8 kernel for `batch` (8 or 16) vectors: per slot, both
/// groups of a pair and each half of the vectors, 32 lanes x 32 bytes.
pub const fn int8_ring_bytes(batch: u32) -> u32 {
    INT8_STAGES * 2 * batch.div_ceil(8) * 32 * 32
}

/// Bytes of dynamic shared memory the GEMV kernel of `way` for `batch` vectors takes: the sums
/// (two buffers, alternate tiles), the coefficient cache of `entries` when it is copied
/// (`entries <= MAX_SMEM_ENTRIES`), and for [`Way::Int8`] the warps' rings.
pub const fn gemv_smem_bytes(way: Way, batch: u32, entries: u32) -> u32 {
    2 * gemv_red_bytes(batch)
        + if entries <= MAX_SMEM_ENTRIES {
            16 * entries
        } else {
            0
        }
        + match way {
            Way::Int8 => GEMV_WARPS * int8_ring_bytes(batch),
            Way::Mma | Way::Popc => 0,
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
    /// What is written to `planes`: [`QUANT_PLANES`] (bit-planes, the binary and CUDA-core
    /// ways) or [`QUANT_BYTES`] (the int8 way's bytes, [`layout::q8_offset`]).
    pub output: u32,
}

/// [`QuantParams::output`]: the 8 bit-planes.
pub const QUANT_PLANES: u32 = 0;
/// [`QuantParams::output`]: the quantized bytes in the int8 way's order.
pub const QUANT_BYTES: u32 = 1;
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
    /// The coefficient cache, [`layout::COEF_STRIDE`] halves per entry; for the kernels of at
    /// most 4 bitvector slots ([`f32_coefficients`]) the first four of each entry as f32
    /// instead (16 bytes per entry either way).
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

/// The vector counts the binary and CUDA-core GEMV kernels are compiled for: a product of
/// `batch` vectors runs the kernel of the smallest of these that is at least `batch`.
pub const KERNEL_BATCHES: [u32; 5] = [1, 2, 4, 8, 16];

/// The vector counts the int8 GEMV kernels are compiled for (8 per `mma` half).
pub const INT8_BATCHES: [u32; 2] = [8, 16];

/// How a GEMV kernel computes the inner products of bitvectors and quantized inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Way {
    /// Binary `mma.m16n8k128.and.popc` on tensor cores against the 8 bit-planes of a vector
    /// (one MMA per vector, group and bitvector).
    Mma,
    /// Integer `mma.m16n8k32` (u8 x s8) on tensor cores: the bitvectors expanded to bytes
    /// against the int8 inputs of 8 vectors at once.
    Int8,
    /// AND + `popc` on CUDA cores (the SBVR paper's kernel).
    Popc,
}

impl Way {
    /// Every way.
    pub const ALL: [Way; 3] = [Way::Mma, Way::Int8, Way::Popc];

    /// The way `SbvrGemv::gemv` takes for `batch` vectors: the faster one measured
    /// (`docs/PERF.md`, "SBVR: int8 tensor cores for batch 3-16"): binary tensor cores for
    /// one or two vectors (one MMA per vector uses all 8 columns on the bit-planes), int8
    /// tensor cores from three on (8 vectors per MMA, the bit expansion shared by all).
    pub fn for_batch(batch: usize) -> Way {
        if batch <= 2 { Way::Mma } else { Way::Int8 }
    }

    /// Its name in kernel names and on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Way::Mma => "mma",
            Way::Int8 => "i8",
            Way::Popc => "popc",
        }
    }

    /// The way of a name ([`Way::name`]).
    pub fn from_name(name: &str) -> Option<Way> {
        Way::ALL.into_iter().find(|w| w.name() == name)
    }

    /// The quantized inputs this way's kernels read ([`QUANT_PLANES`] or [`QUANT_BYTES`]).
    pub const fn quant_output(self) -> u32 {
        match self {
            Way::Int8 => QUANT_BYTES,
            Way::Mma | Way::Popc => QUANT_PLANES,
        }
    }

    /// The batches its kernels are compiled for.
    pub const fn batches(self) -> &'static [u32] {
        match self {
            Way::Int8 => &INT8_BATCHES,
            Way::Mma | Way::Popc => &KERNEL_BATCHES,
        }
    }

    /// The bitvector slots its kernels are compiled for: exactly 2, 3 or 4, or any count up
    /// to 8 (`_n8`); the CUDA-core kernels only `_n8`.
    const fn slots(self) -> &'static [u32] {
        match self {
            Way::Mma | Way::Int8 => &[2, 3, 4, 8],
            Way::Popc => &[8],
        }
    }
}

/// Whether the GEMV kernel of `way` for `bits` bitvectors ([`gemv_kernel`]) reads the
/// coefficient cache as four f32 per entry ([`GemvParams::coeffs`]): the kernels of exactly
/// 2, 3 or 4 slots, which then convert nothing in their loops. The others (8 slots) read the
/// 8 halves.
pub const fn f32_coefficients(way: Way, bits: u32) -> bool {
    !matches!(way, Way::Popc) && bits >= 2 && bits <= 4
}

/// The name of the GEMV kernel of `way` with `slots` bitvector slots for up to `batch`
/// vectors.
fn kernel_name(way: Way, slots: u32, batch: u32) -> &'static str {
    macro_rules! names {
        ($($w:ident $n:literal $b:literal)*) => {
            match (way, slots, batch) {
                $((Way::$w, $n, $b) => concat!("cmv_sbvr_gemv_", names!(@ $w), "_n", $n, "_b", $b),)*
                _ => "",
            }
        };
        (@ Mma) => { "mma" };
        (@ Int8) => { "i8" };
        (@ Popc) => { "popc" };
    }
    names! {
        Mma 2 1 Mma 2 2 Mma 2 4 Mma 2 8 Mma 2 16
        Mma 3 1 Mma 3 2 Mma 3 4 Mma 3 8 Mma 3 16
        Mma 4 1 Mma 4 2 Mma 4 4 Mma 4 8 Mma 4 16
        Mma 8 1 Mma 8 2 Mma 8 4 Mma 8 8 Mma 8 16
        Popc 8 1 Popc 8 2 Popc 8 4 Popc 8 8 Popc 8 16
        Int8 2 8 Int8 2 16 Int8 3 8 Int8 3 16 Int8 4 8 Int8 4 16 Int8 8 8 Int8 8 16
    }
}

/// The GEMV kernel of `way` for `batch` vectors and `bits` bitvectors: its entry name and the
/// batch it is compiled for (its shared memory is [`gemv_smem_bytes`] of that): the smallest
/// of [`Way::batches`] that is at least `batch`, with exactly `bits` slots or the `_n8` kernel.
/// `None` outside `1..=MAX_BATCH` or `MIN_BITS..=MAX_BITS`.
pub fn gemv_kernel(way: Way, bits: u32, batch: u32) -> Option<(&'static str, u32)> {
    if batch == 0 || !(layout::MIN_BITS..=layout::MAX_BITS).contains(&bits) {
        return None;
    }
    let kb = *way.batches().iter().find(|&&b| b >= batch)?;
    let slots = *way.slots().iter().find(|&&n| n == bits || n == 8)?;
    Some((kernel_name(way, slots, kb), kb))
}

/// Every GEMV kernel's entry name (with the [`deep_kernel`]s).
pub fn gemv_kernel_names() -> impl Iterator<Item = &'static str> {
    Way::ALL
        .into_iter()
        .flat_map(|w| {
            w.slots()
                .iter()
                .flat_map(move |&n| w.batches().iter().map(move |&b| kernel_name(w, n, b)))
        })
        .chain((2..=4).filter_map(deep_kernel))
}

/// The binary kernel for one vector and exactly `bits` (2, 3 or 4) bitvectors that keeps the
/// loads of two items in flight per warp instead of one (`cmv_sbvr_gemv_mma_n{bits}_b1_deep`):
/// more bytes in flight per warp, more registers, fewer resident blocks. `None` for other
/// counts.
pub fn deep_kernel(bits: u32) -> Option<&'static str> {
    match bits {
        2 => Some("cmv_sbvr_gemv_mma_n2_b1_deep"),
        3 => Some("cmv_sbvr_gemv_mma_n3_b1_deep"),
        4 => Some("cmv_sbvr_gemv_mma_n4_b1_deep"),
        _ => None,
    }
}

/// Whether the [`deep_kernel`] serves `tiles` tiles: when it walks them in no more rounds of
/// resident blocks (`slots_deep` fit on the GPU at once) than the kernel with one item in
/// flight (`slots`). On an H100 this picked the faster of the two at every LLM shape but one
/// (within 1.3%) at 2, 3 and 4 bitvectors (docs/SBVR.md).
pub const fn prefer_deep(tiles: u32, slots: u32, slots_deep: u32) -> bool {
    let s = if slots == 0 { 1 } else { slots };
    let d = if slots_deep == 0 { 1 } else { slots_deep };
    tiles.div_ceil(d) <= tiles.div_ceil(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The grid never exceeds the slots or the tiles, covers every tile, and every block walks
    /// the fewest rounds or one tile fewer.
    #[test]
    fn the_gemv_grid_gives_every_block_the_same_tiles_within_one() {
        for tiles in 1..3000u32 {
            for slots in [1, 2, 7, 132, 264, 396, 528, 1056] {
                let g = gemv_grid(tiles, slots);
                assert!(
                    g >= 1 && g <= slots.min(tiles),
                    "{tiles} tiles, {slots} slots: {g}"
                );
                let rounds = tiles.div_ceil(slots);
                // Block b walks tiles b, b + g, ...: ceil((tiles - b) / g) of them.
                let most = tiles.div_ceil(g);
                let fewest = (tiles - (g - 1)).div_ceil(g);
                assert_eq!(most, rounds, "{tiles} tiles, {slots} slots: grid {g}");
                assert!(most - fewest <= 1, "{tiles} tiles, {slots} slots: grid {g}");
            }
        }
        assert_eq!(gemv_grid(896, 396), 299);
        assert_eq!(gemv_grid(688, 396), 344);
        assert_eq!(gemv_grid(256, 396), 256);
        assert_eq!(gemv_grid(5, 0), 1);
    }

    #[test]
    fn deep_kernels_and_their_rule() {
        for bits in 2..=4 {
            let name = deep_kernel(bits).unwrap();
            assert!(name.ends_with(&format!("_n{bits}_b1_deep")), "{name}");
            assert!(gemv_kernel_names().any(|n| n == name));
        }
        assert_eq!(deep_kernel(1), None);
        assert_eq!(deep_kernel(5), None);
        assert_eq!(deep_kernel(8), None);
        // 4 bitvectors on an H100: 396 slots with one item in flight, 264 with two.
        assert!(prefer_deep(256, 396, 264)); // 4096 rows: one round either way
        assert!(prefer_deep(512, 396, 264)); // 8192 rows: two rounds either way
        assert!(!prefer_deep(688, 396, 264)); // 11008 rows: 2 against 3 rounds
        assert!(!prefer_deep(1792, 396, 264));
        assert!(prefer_deep(5, 0, 0));
    }

    #[test]
    fn kernel_names_cover_every_batch() {
        assert_eq!(
            gemv_kernel(Way::Mma, 4, 1),
            Some(("cmv_sbvr_gemv_mma_n4_b1", 1))
        );
        assert_eq!(
            gemv_kernel(Way::Mma, 2, 3),
            Some(("cmv_sbvr_gemv_mma_n2_b4", 4))
        );
        assert_eq!(
            gemv_kernel(Way::Mma, 5, 3),
            Some(("cmv_sbvr_gemv_mma_n8_b4", 4))
        );
        assert_eq!(
            gemv_kernel(Way::Mma, 8, 16),
            Some(("cmv_sbvr_gemv_mma_n8_b16", 16))
        );
        assert_eq!(
            gemv_kernel(Way::Popc, 2, 16),
            Some(("cmv_sbvr_gemv_popc_n8_b16", 16))
        );
        assert_eq!(
            gemv_kernel(Way::Popc, 3, 9),
            Some(("cmv_sbvr_gemv_popc_n8_b16", 16))
        );
        assert_eq!(
            gemv_kernel(Way::Int8, 3, 1),
            Some(("cmv_sbvr_gemv_i8_n3_b8", 8))
        );
        assert_eq!(
            gemv_kernel(Way::Int8, 7, 9),
            Some(("cmv_sbvr_gemv_i8_n8_b16", 16))
        );
        for way in Way::ALL {
            assert_eq!(gemv_kernel(way, 4, 0), None);
            assert_eq!(gemv_kernel(way, 4, 17), None);
            assert_eq!(gemv_kernel(way, 1, 1), None);
            assert_eq!(gemv_kernel(way, 9, 1), None);
            assert_eq!(Way::from_name(way.name()), Some(way));
            for n in layout::MIN_BITS..=layout::MAX_BITS {
                for b in 1..=MAX_BATCH {
                    let (name, k) = gemv_kernel(way, n, b).unwrap();
                    assert!(k >= b && name.ends_with(&format!("_b{k}")), "{name}");
                    assert!(way == Way::Int8 || k < 2 * b, "{name}");
                    assert!(name.starts_with(&format!("cmv_sbvr_gemv_{}_n", way.name())));
                    let slots: u32 = name.split("_n").nth(1).unwrap()[..1].parse().unwrap();
                    assert!(slots >= n && (slots == n || slots == 8), "{name}");
                    // The kernels of at most 4 slots read f32 coefficients, the others halves.
                    assert_eq!(f32_coefficients(way, n), slots <= 4, "{name}");
                }
            }
        }
        assert_eq!(Way::for_batch(1), Way::Mma);
        assert_eq!(Way::for_batch(2), Way::Mma);
        assert_eq!(Way::for_batch(3), Way::Int8);
        assert_eq!(Way::for_batch(16), Way::Int8);
        let names: Vec<_> = gemv_kernel_names().collect();
        assert_eq!(names.len(), 4 * 5 + 5 + 4 * 2 + 3);
        assert!(names.iter().all(|n| !n.is_empty()));
        assert_eq!(Way::from_name("int8"), None);
        assert_eq!(gemv_red_bytes(16), GEMV_WARPS * 16 * 16 * 4);
        assert_eq!(
            gemv_smem_bytes(Way::Mma, 1, 1024),
            2 * gemv_red_bytes(1) + 16384
        );
        assert_eq!(gemv_smem_bytes(Way::Popc, 1, 1025), 2 * gemv_red_bytes(1));
        // Two 8 KiB slots per warp at 16 vectors: 2 blocks fit an SM's 228 KiB at 256 entries.
        assert_eq!(int8_ring_bytes(16), 8192);
        assert_eq!(int8_ring_bytes(8), 4096);
        let b16 = gemv_smem_bytes(Way::Int8, 16, 256);
        assert_eq!(b16, 2 * gemv_red_bytes(16) + 4096 + GEMV_WARPS * 8192);
        assert!(2 * b16 <= 228 * 1024, "{b16}");
    }
}
