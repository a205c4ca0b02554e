//! The Hopper tensor-core GEMM (`cmv_beam_gemm90_nogaps_b{1..8}`, crate `beam-kernels-sm90`,
//! PTX for `sm_90a`): what it shares with the host, and the unpacking as plain functions
//! tested on the CPU. Both operands `nogaps` of one width `w` in 1..=8, sums modulo 2^32
//! (the outputs [`crate::mma::needs_wide`] leaves to 32-bit sums).
//!
//! * **A block computes a [`TILE_M`] x [`TILE_N`] tile of `C`** (256 x 128) with two
//!   warpgroups; warpgroup `h` owns rows `128h ..`, as two `m64n128` tiles, each by
//!   `wgmma.mma_async.m64n128k32.s32.u8.u8` with both operands from shared memory: 4 `wgmma`
//!   per warpgroup and step of [`TILE_K`] = 64.
//! * **The packed words** of a step (a row of `A` contributes `w` 8-byte words, a row of `B`
//!   `2w`) go to a ring of [`RAW_STAGES`] raw stages by 8-byte `cp.async`, issued [`LEAD`]
//!   steps ahead ([`a_copy`], [`b_copy`], [`raw_a_offset`], [`raw_b_word`]; a word outside
//!   its matrix is zero-filled, so with the canonical packing every element outside the
//!   matrix unpacks to 0 and nothing needs bounds).
//! * **Unpacking to bytes** in one of [`TILE_BUFFERS`] tile buffers, in the layout `wgmma`
//!   reads (K-major, no swizzle: core matrices of 8 rows x 16 bytes): a thread turns 32
//!   elements of a row of `A` ([`spread32`]) into two core-matrix rows ([`a_offset`]), and a
//!   4 x 8 unit of `B` into 8 columns of 4 bytes (the transpose of [`crate::mma::transpose4x8`],
//!   [`b_offset`]); the strides of `B`'s core matrices are padded so that the transposed
//!   stores of a warp fall in 32 banks.
//! * **One barrier per step**: after it the warpgroups issue step `i`'s `wgmma`s, the copies
//!   of step `i + LEAD`, unpack step `i + 1` while the `wgmma`s run, fence the
//!   writes to the async proxy and wait for step `i - 1`'s `wgmma`s; with three buffers the
//!   one a step writes was last read two steps before.
//! * **K order.** At 1, 2 and 4 bits a step's `K` positions are a permutation of its elements
//!   ([`k_position`]), the same for `A` and `B`, so the products are unchanged: [`spread32`]
//!   then makes each unpacked word of `A` with one shift and one mask, and `B`'s rows go to the
//!   raw-stage slots of their positions ([`raw_b_word`]), whose units of 4 rows x 8 columns
//!   [`narrow_b_columns`] turns into the columns' words by gathering bytes.
//! * **Warp-specialized kernel** (`cmv_beam_gemm90ws_nogaps_b{w}`, [`WS_THREADS`]): two producer
//!   warpgroups issue the copies and unpack (each thread one thread of the kernel above, with
//!   [`WS_PRODUCER_REGS`] registers), two consumer warpgroups only wait for a tile buffer's
//!   `full` barrier, issue its `wgmma`s and release the buffer before on its `empty` barrier
//!   ([`ws_full_wait`], [`ws_empty_wait`]); [`WS_BUFFERS`] tile buffers, no block barrier in
//!   the loop. The launcher runs it up to [`WS_MAX_BITS`] ([`ws_preferred`]).
//! * Outputs as the other tensor-core kernels: wrapped or clamped by `layout::finish`, written
//!   packed in any width and layout. For `nogaps` outputs of at most 8 bits
//!   ([`staged_epilogue`]) the tile's outputs go to shared memory as bytes ([`stage_offset`],
//!   [`acc_position`], [`finish8`]), then a thread per tile row packs them into its words of
//!   `C` ([`pack_row`], [`compress8`]) and stores them: no atomics, no shuffles (the per-quad
//!   atomic ORs before took about a sixth of the time at 2 bits, docs/PERF.md).

use crate::layout::NOGAPS;

/// Rows of `C` per block: two warpgroups of 128.
pub const TILE_M: u32 = 256;
/// Columns of `C` per block.
pub const TILE_N: u32 = 128;
/// `K` per step.
pub const TILE_K: u32 = 64;
/// Threads per block (two warpgroups).
pub const THREADS: u32 = 256;
/// Steps ahead whose copies are issued: during step `i`, those of step `i + LEAD` (two steps
/// before it is unpacked).
pub const LEAD: u32 = 3;
/// Raw stages (packed words, `cp.async`): [`LEAD`] + 1; the stage a step's copies fill was
/// unpacked two steps before. (`LEAD + 2` stages, with `wgmma` reading `A` straight from its
/// raw stage at 8 bits, measured slower on an H100: docs/PERF.md.)
pub const RAW_STAGES: u32 = LEAD + 1;
/// Unpacked tile buffers: step `i` is multiplied from buffer `i % 3` while step `i + 1` is
/// unpacked into the next, and step `i - 1`'s `wgmma`s may still read the third.
pub const TILE_BUFFERS: u32 = 3;
/// Widest operands.
pub const MAX_BITS: u32 = 8;

/// Bytes of one core matrix row (16 `K` bytes); a core matrix is 8 such rows, contiguous.
pub const CORE_ROW: u32 = 16;
/// Byte distance between `A`'s core matrices adjacent in M (8 rows): contiguous.
pub const A_SBO: u32 = 128;
/// Byte distance between `A`'s core matrices adjacent in `K` (16 columns): all 32 row groups
/// and 32 bytes, so that the four `K` core matrices start in different bank quarters: the 8
/// lanes of a 16-byte store phase write 4 rows at two `K` core matrices 2 apart ([`a_unit`]),
/// which without the padding fall in the same 64 bytes of banks (2-way conflicts, seen by
/// Nsight Compute on an H200: docs/PERF.md).
pub const A_LBO: u32 = (TILE_M / 8) * A_SBO + 32;
/// Byte distance between `B`'s core matrices adjacent in N (8 columns): 128 bytes and 64 of
/// padding, so that the 8 core matrices a warp's transposed stores touch start in different
/// bank quarters ([`b_offset`]).
pub const B_SBO: u32 = 192;
/// Byte distance between `B`'s core matrices adjacent in `K`: all 16 column groups and 16
/// bytes (again for the banks).
pub const B_LBO: u32 = (TILE_N / 8) * B_SBO + 16;
/// Bytes of the unpacked `A` tile.
pub const A_TILE_BYTES: u32 = (TILE_K / 16) * A_LBO;
/// Bytes of the unpacked `B` tile (its last core matrix ends 64 bytes before the padding
/// would).
pub const B_TILE_BYTES: u32 = (TILE_K / 16 - 1) * B_LBO + (TILE_N / 8) * B_SBO;
/// Bytes of one tile buffer: `A`, then `B` (16-byte aligned).
pub const BUFFER_BYTES: u32 = A_TILE_BYTES + B_TILE_BYTES.div_ceil(16) * 16;

const _: () = assert!(TILE_K == 64 && TILE_N == 2 * TILE_K && THREADS == 256);
const _: () = assert!(A_LBO.is_multiple_of(16) && B_LBO.is_multiple_of(16));
const _: () = assert!(BUFFER_BYTES.is_multiple_of(16));

/// Byte offset of element `(r, k)` (`r` < [`TILE_M`], `k` < [`TILE_K`]) in the unpacked `A`
/// tile: core matrix `(k / 16, r / 8)`, row `r % 8`, byte `k % 16`.
#[inline(always)]
pub const fn a_offset(r: u32, k: u32) -> u32 {
    (k / 16) * A_LBO + (r / 8) * A_SBO + (r % 8) * CORE_ROW + k % 16
}

/// Byte offset of element `(k, n)` of `B` (`k` < [`TILE_K`], `n` < [`TILE_N`]) in the
/// unpacked `B` tile (K-major: column `n` is a row of the `wgmma` operand): core matrix
/// `(k / 16, n / 8)`, row `n % 8`, byte `k % 16`.
#[inline(always)]
pub const fn b_offset(k: u32, n: u32) -> u32 {
    (k / 16) * B_LBO + (n / 8) * B_SBO + (n % 8) * CORE_ROW + k % 16
}

/// The `wgmma` shared-memory descriptor of a K-major operand without swizzle: start address,
/// `lbo` (K-adjacent core matrices) and `sbo` (M- or N-adjacent) in 16-byte units.
#[inline(always)]
pub const fn descriptor(start: u32, lbo: u32, sbo: u32) -> u64 {
    ((start as u64 >> 4) & 0x3fff) | ((lbo as u64 >> 4) << 16) | ((sbo as u64 >> 4) << 32)
}

/// The descriptor of `A`'s 64 rows `64 * sub ..` (`sub` in 0..4) and `K` slice `s` (0..2, 32
/// columns each) of the buffer at `buf`.
#[inline(always)]
pub const fn a_descriptor(buf: u32, sub: u32, s: u32) -> u64 {
    descriptor(buf + 2 * s * A_LBO + 8 * sub * A_SBO, A_LBO, A_SBO)
}

/// The descriptor of `B`'s 128 columns and `K` slice `s` (0..2) of the buffer at `buf`.
#[inline(always)]
pub const fn b_descriptor(buf: u32, s: u32) -> u64 {
    descriptor(buf + A_TILE_BYTES + 2 * s * B_LBO, B_LBO, B_SBO)
}

/// 8-byte words of one raw stage at width `w`: `w` per row of the `A` tile, then `B`'s 64
/// rows of `2w` in 16 groups of 4 rows, each group followed by one spare word (a chunk's
/// unpacking may read the 32-bit word after its last, which for the last chunk of a group is
/// in the spare), at an odd stride of `8w + 1` words so that the 16 groups a warp reads at
/// once fall in 16 bank pairs.
pub const fn raw_stage_words(w: u32) -> u32 {
    TILE_M * w + (TILE_K / 4) * (8 * w + 1)
}

/// Where 8-byte word `word` of row `k` of the `B` tile's step lies in a raw stage at width
/// `w`: in the slot of the row's `K` position ([`k_position`], [`raw_b_slot_word`]), so that
/// the unpacking reads the rows of 4 consecutive positions from 4 consecutive slots.
pub const fn raw_b_word(w: u32, k: u32, word: u32) -> u32 {
    raw_b_slot_word(w, k_position(w, k), word)
}

/// Word `word` of raw-stage slot `slot` (0..64) of `B` at width `w`: 16 groups of 4 slots of
/// `2w` words and a spare word.
pub const fn raw_b_slot_word(w: u32, slot: u32, word: u32) -> u32 {
    TILE_M * w + (slot / 4) * (8 * w + 1) + (slot % 4) * 2 * w + word
}

/// The group of elements whose order the unpacking permutes at width `w`: a 32-bit word's
/// `32 / w` at 1, 2, 4 bits, 32 (`w` words) at 3, 5, 6, 7; 4 at 8 (no permutation).
const fn k_group(w: u32) -> u32 {
    if w == 1 || w == 2 || w == 4 {
        32 / w
    } else if w < 8 {
        // 3, 5, 6, 7 bits: 32 elements (w words), element m + 8j at position 4m + j
        // (spread32's byte gathers, every 8 elements being w whole bytes).
        32
    } else {
        4
    }
}

/// The `K` position (the byte of the unpacked step's `K`, 0..64, where `wgmma` reads it) of
/// element `k` of a step at width `w`. Below 8 bits the order is permuted within each group
/// of `G` elements (`G = 32 / w` at 1, 2, 4 bits: one 32-bit word; 32 at 3, 5, 6, 7): element
/// `G i + m + g j` (`g = G / 4`, `m < g`, `j < 4`) at position `G i + 4 m + j`, so that
/// [`spread32`] makes each output word with a shift and a mask (`(x >> w m) & 0x0101..` times
/// the mask at 1, 2, 4 bits); at 8 bits the identity. `A` and `B` are permuted alike, so the
/// products are unchanged.
pub const fn k_position(w: u32, k: u32) -> u32 {
    let big = k_group(w);
    let g = big / 4;
    let (i, e) = (k / big, k % big);
    big * i + 4 * (e % g) + e / g
}

/// The element at `K` position `p` of a step at width `w` (the inverse of [`k_position`]).
pub const fn k_element(w: u32, p: u32) -> u32 {
    let big = k_group(w);
    let g = big / 4;
    let (i, e) = (p / big, p % big);
    big * i + (e / 4) + g * (e % 4)
}

/// Byte offset in a raw stage of 8-byte word `word` (0..`w`) of row `r` of the `A` tile's
/// step: the row's `w` words in order.
#[inline(always)]
pub const fn raw_a_offset(w: u32, r: u32, word: u32) -> u32 {
    8 * (r * w + word)
}

/// Bytes of one raw stage at width `w` (rounded up to 16).
pub const fn raw_stage_bytes(w: u32) -> u32 {
    (8 * raw_stage_words(w)).div_ceil(16) * 16
}

/// Dynamic shared memory of the kernel for width `w`: the tile buffers, then the raw ring.
pub const fn smem_bytes(w: u32) -> u32 {
    TILE_BUFFERS * BUFFER_BYTES + RAW_STAGES * raw_stage_bytes(w)
}

/// Threads of the warp-specialized kernel (`cmv_beam_gemm90ws_nogaps_b{w}`): two producer
/// warpgroups that copy and unpack, then two consumer warpgroups that only issue `wgmma`s
/// (the same tile and warpgroup roles as the kernel of [`THREADS`]). One producer warpgroup
/// (384 threads) ran slower than the lockstep kernel: the unpacking bounds both
/// (docs/PERF.md).
pub const WS_THREADS: u32 = 512;
/// The producer threads (the first two warpgroups). Producer `ptid` plays thread `ptid` of the
/// [`THREADS`]-thread kernel: its copies and units are [`a_copy`], [`b_copy`], [`a_unit`] and
/// [`b_unit`] of it.
pub const WS_PRODUCERS: u32 = 256;
/// Registers per thread the producers keep (`setmaxnreg.dec`) and the consumers take
/// (`setmaxnreg.inc`; 128 sums each): together at most 65536 / 256.
pub const WS_PRODUCER_REGS: u32 = 88;
/// See [`WS_PRODUCER_REGS`].
pub const WS_CONSUMER_REGS: u32 = 168;
/// Unpacked tile buffers of the warp-specialized kernel: the producers may unpack up to
/// `WS_BUFFERS - 1` steps ahead of the step the consumers multiply.
pub const WS_BUFFERS: u32 = 4;
/// Steps ahead whose raw copies the producers issue, before they unpack a step.
pub const WS_LEAD: u32 = 3;
/// Raw stages of the warp-specialized kernel: [`WS_LEAD`] + 1, so the stage a step's copies
/// fill is the one unpacked in the step before (free after the producers' barrier).
pub const WS_STAGES: u32 = WS_LEAD + 1;

const _: () = assert!(WS_THREADS == WS_PRODUCERS + THREADS && WS_PRODUCERS == THREADS);
const _: () = assert!(
    WS_PRODUCERS * WS_PRODUCER_REGS + THREADS * WS_CONSUMER_REGS <= 65536
        && WS_PRODUCER_REGS.is_multiple_of(8)
        && WS_CONSUMER_REGS.is_multiple_of(8)
);

/// Byte offset (from the start of the dynamic shared memory) of the warp-specialized kernel's
/// barriers at width `w`: after the tile buffers and the raw stages; `full` barrier `t` at
/// `+ 8 t`, `empty` barrier `t` at `+ 8 (WS_BUFFERS + t)`.
pub const fn ws_barriers(w: u32) -> u32 {
    WS_BUFFERS * BUFFER_BYTES + WS_STAGES * raw_stage_bytes(w)
}

/// Dynamic shared memory of the warp-specialized kernel at width `w`: tile buffers, raw
/// stages, then two barriers (8 bytes each) per tile buffer.
pub const fn ws_smem_bytes(w: u32) -> u32 {
    ws_barriers(w) + 16 * WS_BUFFERS
}

/// What a producer waits for before it unpacks step `i` into tile buffer `i % WS_BUFFERS`:
/// `None` for the first use of each buffer, else `(buffer, parity)` of the `empty` barrier
/// phase that completes when both consumer warpgroups finished reading step `i - WS_BUFFERS`
/// (the buffer's previous use).
pub const fn ws_empty_wait(i: u32) -> Option<(u32, u32)> {
    if i < WS_BUFFERS {
        None
    } else {
        Some((i % WS_BUFFERS, (i / WS_BUFFERS - 1) & 1))
    }
}

/// What a consumer waits for before it multiplies step `i`: `(buffer, parity)` of the `full`
/// barrier phase that completes when every producer unpacked step `i` into that buffer.
pub const fn ws_full_wait(i: u32) -> (u32, u32) {
    (i % WS_BUFFERS, (i / WS_BUFFERS) & 1)
}

/// The widest operands the launcher gives the warp-specialized kernel by default
/// ([`ws_preferred`]).
pub const WS_MAX_BITS: u32 = 5;

/// Whether the launcher runs the warp-specialized kernel at width `w` rather than the
/// lockstep one, where the register-`A` kernel is turned off ([`ra_preferred`] holds at every
/// width): up to [`WS_MAX_BITS`]. Measured on an H200 at 11585^3 (docs/PERF.md, "BEAM GEMM on Hopper: a
/// warp-specialized kernel and a permuted K"): 2-7% faster than the lockstep kernel at 1, 3, 4
/// and 5 bits, level at 2, 4-22% slower at 6-8 (the copies and the unpacking of 6 to 8 bits
/// on two warpgroups alone take longer than on all four in turn).
pub const fn ws_preferred(w: u32) -> bool {
    w >= 1 && w <= WS_MAX_BITS
}

/// The entry points of the warp-specialized kernel for widths 1..=8.
pub const WS_KERNEL_NAMES: [&str; 8] = [
    "cmv_beam_gemm90ws_nogaps_b1",
    "cmv_beam_gemm90ws_nogaps_b2",
    "cmv_beam_gemm90ws_nogaps_b3",
    "cmv_beam_gemm90ws_nogaps_b4",
    "cmv_beam_gemm90ws_nogaps_b5",
    "cmv_beam_gemm90ws_nogaps_b6",
    "cmv_beam_gemm90ws_nogaps_b7",
    "cmv_beam_gemm90ws_nogaps_b8",
];

/// Whether the Hopper kernel multiplies these operands: both `nogaps` of one width in
/// 1..=8, with sums modulo 2^32 (`wide` false: the output needs no more).
pub const fn supports(la: u32, lb: u32, a_bits: u32, b_bits: u32, wide: bool) -> bool {
    la == NOGAPS && lb == NOGAPS && a_bits == b_bits && a_bits >= 1 && a_bits <= MAX_BITS && !wide
}

/// The entry point for width `w` (1..=8).
pub const KERNEL_NAMES: [&str; 8] = [
    "cmv_beam_gemm90_nogaps_b1",
    "cmv_beam_gemm90_nogaps_b2",
    "cmv_beam_gemm90_nogaps_b3",
    "cmv_beam_gemm90_nogaps_b4",
    "cmv_beam_gemm90_nogaps_b5",
    "cmv_beam_gemm90_nogaps_b6",
    "cmv_beam_gemm90_nogaps_b7",
    "cmv_beam_gemm90_nogaps_b8",
];

/// The entry point for width `w`, `None` outside 1..=8.
pub const fn kernel_name(w: u32) -> Option<&'static str> {
    if w >= 1 && w <= MAX_BITS {
        Some(KERNEL_NAMES[w as usize - 1])
    } else {
        None
    }
}

/// Copy `c` (0..`w`) of thread `tid` of a step's `A` words: (row of the tile, word of the
/// row's `w`). Consecutive threads copy consecutive words of a row; where `w` divides 32 a
/// thread's words lie in one column, `256 / w` rows apart.
#[inline(always)]
pub const fn a_copy(w: u32, tid: u32, c: u32) -> (u32, u32) {
    if 32 % w == 0 {
        (tid / w + (THREADS / w) * c, tid % w)
    } else {
        let q = tid + THREADS * c;
        (q / w, q % w)
    }
}

/// Copies of a step's `B` words per thread: `ceil(w / 2)` (the last one on half the threads
/// where `w` is odd).
#[inline(always)]
pub const fn b_copies(w: u32) -> u32 {
    w.div_ceil(2)
}

/// Copy `c` (0..[`b_copies`]) of thread `tid` of a step's `B` words: (row `k` of the step,
/// word of the block's `2w` in it), or `None` past the `128 w` words (whole warps: at `w` = 1
/// and the last copy of odd widths, threads 128..256). Consecutive threads fill consecutive
/// words of the raw stage's `B` slots (slot `s` holds row [`k_element`]`(w, s)`,
/// [`raw_b_slot_word`]), so that a warp's 8-byte copies land in distinct banks; by rows of
/// `B` (the permuted slots) they had up to 5 times the shared-memory wavefronts at 2 bits.
#[inline(always)]
pub const fn b_copy(w: u32, tid: u32, c: u32) -> Option<(u32, u32)> {
    let (s, x) = if 32 % w == 0 {
        (tid / (2 * w) + (THREADS / (2 * w)) * c, tid % (2 * w))
    } else {
        let q = tid + THREADS * c;
        (q / (2 * w), q % (2 * w))
    };
    if s < TILE_K {
        Some((k_element(w, s), x))
    } else {
        None
    }
}

/// This thread's rows of `A` in a step: row `r = tid / 2 + 128 i` (`i` in 0..2), elements
/// `32 q ..` of its 64 with `q = tid % 2`. A warp's lanes then read 16 rows' segments as one
/// contiguous run of the raw stage and write 4 whole core matrices per store.
#[inline(always)]
pub const fn a_unit(tid: u32, i: u32) -> (u32, u32) {
    (tid / 2 + (THREADS / 2) * i, tid % 2)
}

/// This thread's unit of `B` in a step: rows `4 kq ..` and columns `8 nj ..` with
/// `kq = tid % 16`, `nj = tid / 16`.
#[inline(always)]
pub const fn b_unit(tid: u32) -> (u32, u32) {
    (tid % 16, tid / 16)
}

/// 32 elements of `w` (1..=8) bits, element `i` at bits `i * w ..` of the little-endian words
/// `x` (the first `w` used), to 8 words of 4 bytes: the element at [`k_element`]`(w, 4m + j)`
/// (of the 32) in byte `j` of word `m`. For 1, 2 and 4 bits each word is one shift and one
/// mask of an input word; for 3, 5, 6 and 7 bits `w` byte gathers (3 `prmt` each), then one
/// shift and mask per word, or two of each where its elements straddle a byte.
#[inline(always)]
pub fn spread32(x: &[u32; 8], w: u32) -> [u32; 8] {
    if w == 8 {
        return *x;
    }
    let m8 = (crate::layout::mask(w) as u32) * 0x0101_0101;
    if w == 1 || w == 2 || w == 4 {
        // Output word m: input word m / g, shifted by w (m % g), every byte masked to w bits.
        let g = 8 / w;
        return core::array::from_fn(|m| (x[m / g as usize] >> (w * (m as u32 % g))) & m8);
    }
    // 3, 5, 6, 7 bits: every 8 elements are w whole bytes. z[b] gathers byte b of each of the
    // 4 groups of 8 (bytes b, b + w, b + 2w, b + 3w of x); output word m (elements m + 8j, at
    // bit w m of their group) is z[w m / 8] shifted, with the high bits from the next z where
    // the element straddles a byte.
    use cmv_device::prmt;
    let byte_sel = |i: u32| (i / 4, i % 4);
    let z: [u32; 8] = core::array::from_fn(|b| {
        let b = b as u32;
        if b >= w {
            return 0;
        }
        let [(i0, s0), (i1, s1), (i2, s2), (i3, s3)] =
            [b, b + w, b + 2 * w, b + 3 * w].map(byte_sel);
        let lo = prmt(x[i0 as usize], x[i1 as usize], s0 | (4 + s1) << 4);
        let hi = prmt(x[i2 as usize], x[i3 as usize], s2 | (4 + s3) << 4);
        prmt(lo, hi, 0x5410)
    });
    core::array::from_fn(|m| {
        let bit = w * m as u32;
        let (b, k) = ((bit / 8) as usize, bit % 8);
        if k + w <= 8 {
            (z[b] >> k) & m8
        } else {
            // The low 8 - k bits from z[b], the rest from z[b + 1], byte by byte.
            let low = ((1u32 << (8 - k)) - 1) * 0x0101_0101;
            (((z[b] >> k) & low) | ((z[b + 1] << (8 - k)) & !low)) & m8
        }
    })
}

/// A `B` unit of 4 rows x 8 columns at a width `w` that divides 8 below 8 (1, 2, 4), as the
/// 8 columns' words of 4 bytes (byte `i` from row `i`): `r[i]` is the 32-bit word of row `i`
/// that holds the unit's 8 elements at its byte `o` (`o + w <= 4`), element `c` at bit
/// `8 o + w c`. Gathers byte `o + b` of the 4 rows into one word (3 `prmt`), then each column is
/// one shift and one mask of such a word: about 30 instructions where
/// [`crate::mma::spread8`] and [`crate::mma::transpose4x8`] take about 90.
#[inline(always)]
pub fn narrow_b_columns(r: [u32; 4], o: u32, w: u32) -> [u32; 8] {
    use cmv_device::prmt;
    let gather = |b: u32| -> u32 {
        let s = o + b;
        let sel = s | (s + 4) << 4;
        prmt(prmt(r[0], r[1], sel), prmt(r[2], r[3], sel), 0x5410)
    };
    let m8 = (crate::layout::mask(w) as u32) * 0x0101_0101;
    let g = 8 / w;
    core::array::from_fn(|c| (gather(c as u32 / g) >> (w * (c as u32 % g))) & m8)
}

/// Whether the epilogue stages the tile's outputs in shared memory ([`stage_offset`]) and
/// writes whole words ([`pack_row`]): `C` `nogaps` of at most 8 bits, so each output is a byte
/// of the stage, and a tile row's 128 columns are `2 bits` whole words of `C` (a `nogaps`
/// row starts at a word and a tile at column `128 x`), written by this block alone with plain
/// stores. Otherwise each element is its own atomic OR.
pub const fn staged_epilogue(layout: u32, bits: u32) -> bool {
    layout == NOGAPS && bits <= 8
}

/// Bytes between the staged epilogue's rows: 128 outputs of one byte and 16 of padding, so
/// that a quad-row phase of 16-byte loads (8 rows) and a warp's 2-byte stores (8 rows, 8
/// bytes each) fall in distinct banks.
pub const STAGE_ROW: u32 = TILE_N + 16;
/// Bytes of the staged epilogue: the tile's [`TILE_M`] rows, at the start of the dynamic
/// shared memory (the tile buffers, free once every `wgmma` is done).
pub const STAGE_BYTES: u32 = TILE_M * STAGE_ROW;

const _: () = assert!(STAGE_BYTES <= TILE_BUFFERS * BUFFER_BYTES);
const _: () = assert!(STAGE_ROW.is_multiple_of(16));

/// Where output `(r, c)` of the tile (`r` < [`TILE_M`], `c` < [`TILE_N`]) is staged: one byte.
#[inline(always)]
pub const fn stage_offset(r: u32, c: u32) -> u32 {
    r * STAGE_ROW + c
}

/// The tile position `(row, column)` of accumulator `i` (0..128) of lane `lane` of warp
/// `warp` (0..8, warpgroup `warp / 4`) after the `wgmma`s: the warpgroup's rows `128 h ..`,
/// `m64n128` tile `i / 64` (64 rows each), column group `j = i % 64 / 4`, row `+ 8` for
/// `i % 4 >= 2`, column `8 j + 2 (lane % 4) + i % 2`.
#[inline(always)]
pub const fn acc_position(warp: u32, lane: u32, i: u32) -> (u32, u32) {
    let row = 128 * (warp / 4) + 16 * (warp % 4) + lane / 4 + 64 * (i / 64) + 8 * (i % 4 / 2);
    (row, 8 * (i % 64 / 4) + 2 * (lane % 4) + i % 2)
}

/// An output of at most 8 bits from its 32-bit sum (`layout::finish` for sums below 2^32):
/// the low `bits` bits, or with saturation (`sat`) `min(sum, mask)`.
#[inline(always)]
pub const fn finish8(sum: u32, bits: u32, sat: bool) -> u32 {
    let m = (1u32 << bits) - 1;
    if sat && sum > m { m } else { sum & m }
}

/// 8 outputs of `bits` (1..=8) bits, one per byte of `x` (each below `2^bits`), as `8 bits`
/// contiguous bits (byte `e` at bit `bits e`): three steps that halve the number of lanes.
#[inline(always)]
pub const fn compress8(x: u64, bits: u32) -> u64 {
    let y = (x & 0x00ff_00ff_00ff_00ff) | ((x >> 8) & 0x00ff_00ff_00ff_00ff) << bits;
    let y = (y & 0x0000_ffff_0000_ffff) | ((y >> 16) & 0x0000_ffff_0000_ffff) << (2 * bits);
    (y & 0xffff_ffff) | (y >> 32) << (4 * bits)
}

/// A staged tile row's 128 outputs of `bits` (1..=8) bits as its `2 bits` words of `C`
/// (`nogaps`): `pair(q)` gives outputs `16q .. 16q + 16` as bytes (from the stage, one
/// 16-byte load), `emit(i, word)` receives word `i` of the row's part, in order.
#[inline(always)]
pub fn pack_row(mut pair: impl FnMut(u32) -> [u64; 2], bits: u32, mut emit: impl FnMut(u32, u64)) {
    let n = 8 * bits;
    let (mut cur, mut fill, mut i) = (0u64, 0u32, 0u32);
    let mut x = [0u64; 2];
    for c in 0..TILE_N / 8 {
        if c % 2 == 0 {
            x = pair(c / 2);
        }
        let v = compress8(x[c as usize % 2], bits);
        cur |= v << fill;
        fill += n;
        if fill >= 64 {
            emit(i, cur);
            i += 1;
            fill -= 64;
            // The bits of v that did not fit (none when the word ended with it).
            cur = if fill > 0 { v >> (n - fill) } else { 0 };
        }
    }
}

/// A `B` unit of 4 rows x 8 columns at 3, 5, 6 or 7 bits, as the 8 columns' words of 4 bytes
/// (byte `i` from row `i`): `win[i]` holds row `i`'s 8 elements from its bit 0 (element `c`
/// at bit `w c`, [`crate::mma::chunk_window`]). Gathers byte `b` of the 4 rows into one word
/// for each of the `w` bytes (3 `prmt` each), then each column is a shift and a mask of one
/// such word, or of two where its element straddles a byte: about 55 instructions at 7 bits
/// and 35 at 3 where [`crate::mma::spread8`] and [`crate::mma::transpose4x8`] take about 85.
#[inline(always)]
pub fn odd_b_columns(win: [u64; 4], w: u32) -> [u32; 8] {
    use cmv_device::prmt;
    let half = |i: usize, b: u32| {
        if b < 4 {
            win[i] as u32
        } else {
            (win[i] >> 32) as u32
        }
    };
    let z: [u32; 8] = core::array::from_fn(|b| {
        let b = b as u32;
        if b >= w {
            return 0;
        }
        let s = b % 4;
        let sel = s | (s + 4) << 4;
        prmt(
            prmt(half(0, b), half(1, b), sel),
            prmt(half(2, b), half(3, b), sel),
            0x5410,
        )
    });
    let m8 = (crate::layout::mask(w) as u32) * 0x0101_0101;
    core::array::from_fn(|c| {
        let bit = w * c as u32;
        let (b, k) = ((bit / 8) as usize, bit % 8);
        if k + w <= 8 {
            (z[b] >> k) & m8
        } else {
            let low = ((1u32 << (8 - k)) - 1) * 0x0101_0101;
            (((z[b] >> k) & low) | ((z[b + 1] << (8 - k)) & !low)) & m8
        }
    })
}

/// Entry points of the register-`A` kernel for widths 1..=8 (`cmv_beam_gemm90ra_nogaps_b{w}`):
/// the lockstep kernel's block, tile, steps and `B` path, with `A` unpacked by each thread
/// straight into its `wgmma` register fragments (`wgmma ... {a0, a1, a2, a3}, b-desc`), so
/// that `A` never goes to shared memory as bytes: no stores of it, and the `wgmma`s read only
/// `B` there (a third less shared-memory traffic per step at 3 bits).
pub const RA_KERNEL_NAMES: [&str; 8] = [
    "cmv_beam_gemm90ra_nogaps_b1",
    "cmv_beam_gemm90ra_nogaps_b2",
    "cmv_beam_gemm90ra_nogaps_b3",
    "cmv_beam_gemm90ra_nogaps_b4",
    "cmv_beam_gemm90ra_nogaps_b5",
    "cmv_beam_gemm90ra_nogaps_b6",
    "cmv_beam_gemm90ra_nogaps_b7",
    "cmv_beam_gemm90ra_nogaps_b8",
];

/// Whether the launcher runs the register-`A` kernel at width `w` by default (before the
/// choice between the warp-specialized and the lockstep kernels): at every width, 1 to 8
/// bits. Measured on an H200 at 11585^3 (docs/PERF.md, "BEAM GEMM on Hopper: `A` in
/// registers"): 5-34% faster than the kernel the launcher ran before at every width.
pub const fn ra_preferred(w: u32) -> bool {
    w >= 1 && w <= MAX_BITS
}

/// Bytes of one tile buffer of the register-`A` kernel: `B` only.
pub const RA_BUFFER_BYTES: u32 = B_TILE_BYTES.div_ceil(16) * 16;

/// Steps ahead whose raw copies the register-`A` kernel issues (during step `i`, those of
/// step `i + RA_LEAD`). Four (five stages) ran 1-7% slower than three on an H200 at 1-7 bits
/// and level at 8 (docs/PERF.md).
pub const RA_LEAD: u32 = 3;
/// Raw stages of the register-`A` kernel: [`RA_LEAD`] + 1, so the stage a step's copies fill
/// was unpacked two steps before (as in the lockstep kernel).
pub const RA_STAGES: u32 = RA_LEAD + 1;

/// Dynamic shared memory of the register-`A` kernel at width `w`: [`TILE_BUFFERS`] `B`
/// buffers, then the raw ring of [`RA_STAGES`] stages.
pub const fn ra_smem_bytes(w: u32) -> u32 {
    TILE_BUFFERS * RA_BUFFER_BYTES + RA_STAGES * raw_stage_bytes(w)
}

const _: () = assert!(STAGE_BYTES <= TILE_BUFFERS * RA_BUFFER_BYTES);

/// The descriptor of `B`'s 128 columns and `K` slice `s` (0..2) of the register-`A` kernel's
/// buffer at `buf`.
#[inline(always)]
pub const fn ra_b_descriptor(buf: u32, s: u32) -> u64 {
    descriptor(buf + 2 * s * B_LBO, B_LBO, B_SBO)
}

/// The `K` position (0..64 in a step) of byte `v0` of word `m` (0..4) of the row fragments of
/// lane `4g + t` of the register-`A` kernel: `wgmma` slice `s = m / 2` (32 positions), and in
/// it byte `v0` of the register `v1 + 2 (m % 2)` of the `m64n?k32` `A` fragment (CUTLASS's
/// `ALayout_64x32`: position `16 (m % 2) + 4 t + v0` of the slice, row `g + 8 v1`).
pub const fn ra_position(t: u32, m: u32, v0: u32) -> u32 {
    32 * (m / 2) + 16 * (m % 2) + 4 * t + v0
}

/// The element (0..64, of a row's step) that byte `v0` of fragment word `m` of lane `t`
/// (`lane % 4`) holds at width `w`, as [`ra_row_words`] makes the words: where the unpacking is
/// cheapest, the same for every row (so `B`'s rows are permuted alike).
pub const fn ra_fragment_element(w: u32, t: u32, m: u32, v0: u32) -> u32 {
    match w {
        1 => 32 * (m / 2) + 2 * t + m % 2 + 8 * v0,
        2 => 16 * t + m + 4 * v0,
        4 => 16 * t + 8 * (m / 2) + m % 2 + 2 * v0,
        8 => 16 * t + 4 * m + v0,
        _ => 16 * t + 2 * m + 8 * (v0 % 2) + v0 / 2,
    }
}

/// The element at `K` position `p` of a step of the register-`A` kernel at width `w` (the
/// kernel's permutation of `K`; `B`'s row of that element goes to slot `p`).
pub const fn ra_element(w: u32, p: u32) -> u32 {
    let (s, v2, t, v0) = (p / 32, (p / 16) % 2, (p / 4) % 4, p % 4);
    ra_fragment_element(w, t, 2 * s + v2, v0)
}

/// The `K` element at position `p` of a step for the lockstep and warp-specialized kernels
/// ([`k_element`], `ra` false) or the register-`A` kernel ([`ra_element`]).
pub const fn element_at(w: u32, p: u32, ra: bool) -> u32 {
    if ra {
        ra_element(w, p)
    } else {
        k_element(w, p)
    }
}

/// Copy `c` of thread `tid` of a step's `B` words by raw-stage slot, as [`b_copy`]: (slot
/// `s`, word of the block's `2w` in it); the slot's row is [`element_at`]`(w, s, ra)`.
#[inline(always)]
pub const fn b_copy_slot(w: u32, tid: u32, c: u32) -> Option<(u32, u32)> {
    let (s, x) = if 32 % w == 0 {
        (tid / (2 * w) + (THREADS / (2 * w)) * c, tid % (2 * w))
    } else {
        let q = tid + THREADS * c;
        (q / (2 * w), q % (2 * w))
    };
    if s < TILE_K { Some((s, x)) } else { None }
}

/// Where lane `t` (`lane % 4`) of the register-`A` kernel reads a row's step from the raw
/// stage at width `w`: (byte offset from the row's first byte, 4-aligned; 32-bit words, at
/// most 4; right shift in bits that puts the lane's first element at bit 0). At 1 bit every
/// lane reads the whole step (8 bytes); else lane `t` reads its 16 elements `16 t ..` (`2w`
/// bytes from byte `2 w t`), the words that hold them; none past the row's `8w` bytes.
pub const fn ra_load(w: u32, t: u32) -> (u32, u32, u32) {
    match w {
        1 => (0, 2, 0),
        2 | 4 | 8 => (2 * w * t, w / 2, 0),
        6 => (12 * t, 3, 0),
        _ => {
            let b = 2 * w * t;
            (b & !3, (2 * w + 2).div_ceil(4), 8 * (b & 3))
        }
    }
}

/// A funnel shift: the 32 bits of `hi:lo` from bit `s` (0..32).
#[inline(always)]
fn funnel(lo: u32, hi: u32, s: u32) -> u32 {
    ((lo as u64 | (hi as u64) << 32) >> s) as u32
}

/// The fragment words of two rows of lane `t` at width `w` (rows `g` and `g + 8` of a
/// `wgmma` `A` fragment): `l0`, `l1` the rows' words as [`ra_load`] reads them; word `m` of
/// a row holds in byte `v0` the element [`ra_fragment_element`]`(w, t, m, v0)`. At 1, 2, 4
/// bits each word is a shift and a mask, at 8 bits the words as read; at 3, 5, 6 and 7 bits
/// the two rows' 32 elements are one unit of [`spread32`] (row `g`'s two groups of 8, then row
/// `g + 8`'s) whose words `2m`, `2m + 1` give both rows' word `m` by one `prmt` each.
#[inline(always)]
pub fn ra_row_words(l0: [u32; 4], l1: [u32; 4], w: u32, t: u32) -> [[u32; 4]; 2] {
    let m8 = (crate::layout::mask(w) as u32) * 0x0101_0101;
    let simple = |x: [u32; 4]| -> [u32; 4] {
        match w {
            1 => core::array::from_fn(|m| (x[m / 2] >> (2 * t + m as u32 % 2)) & m8),
            2 => core::array::from_fn(|m| (x[0] >> (2 * m as u32)) & m8),
            4 => core::array::from_fn(|m| (x[m / 2] >> (4 * (m as u32 % 2))) & m8),
            _ => x,
        }
    };
    if matches!(w, 1 | 2 | 4 | 8) {
        return [simple(l0), simple(l1)];
    }
    use cmv_device::prmt;
    let (_, n, s) = ra_load(w, t);
    // Each row's 2w bytes from its first element, in words.
    let row = |l: [u32; 4]| -> [u32; 4] {
        core::array::from_fn(|j| {
            if (j as u32) < n {
                funnel(l[j], if j + 1 < 4 { l[j + 1] } else { 0 }, s)
            } else {
                0
            }
        })
    };
    let (r0, r1) = (row(l0), row(l1));
    // The unit: r0's 2w bytes, then r1's (at byte 2w; 2w is 2 mod 4 at odd widths).
    let mut x = [0u32; 8];
    let h = (2 * w / 4) as usize;
    x[..h].copy_from_slice(&r0[..h]);
    if w % 2 == 1 {
        x[h] = prmt(r0[h], r1[0], 0x5410);
        for j in 0..h {
            x[h + 1 + j] = funnel(r1[j], r1[j + 1], 16);
        }
    } else {
        x[h..2 * h].copy_from_slice(&r1[..h]);
    }
    let u = spread32(&x, w);
    // u[k] byte j: element k + 8 j of the unit; rows: bytes 0, 1 (r0) and 2, 3 (r1).
    let words =
        |sel: u32| -> [u32; 4] { core::array::from_fn(|m| prmt(u[2 * m], u[2 * m + 1], sel)) };
    [words(0x5410), words(0x7632)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::mask;
    use crate::mma::{chunk_window, spread8, transpose4x8};

    /// Where `wgmma` reads element (row or column `mn`, `K` slot `k`) of a K-major operand
    /// without swizzle for 8-bit elements, by the PTX ISA: core matrix (`k / 16`, `mn / 8`) at
    /// `start + (k / 16) LBO + (mn / 8) SBO`, row `mn % 8` of 16 bytes, byte `k % 16`.
    fn wgmma_reads(desc: u64, mn: u32, k: u32) -> u32 {
        let start = ((desc & 0x3fff) << 4) as u32;
        let lbo = (((desc >> 16) & 0x3fff) << 4) as u32;
        let sbo = (((desc >> 32) & 0x3fff) << 4) as u32;
        start + (k / 16) * lbo + (mn / 8) * sbo + (mn % 8) * 16 + k % 16
    }

    #[test]
    fn descriptors_read_what_the_unpacking_writes() {
        let buf = 2 * BUFFER_BYTES;
        for s in 0..2 {
            for sub in 0..4 {
                let d = a_descriptor(buf, sub, s);
                for r in [0, 7, 8, 31, 63] {
                    for k in 0..32 {
                        assert_eq!(
                            wgmma_reads(d, r, k),
                            buf + a_offset(64 * sub + r, 32 * s + k),
                            "A sub {sub} s {s} r {r} k {k}"
                        );
                    }
                }
            }
            let d = b_descriptor(buf, s);
            for n in [0, 5, 8, 64, 127] {
                for k in 0..32 {
                    assert_eq!(
                        wgmma_reads(d, n, k),
                        buf + A_TILE_BYTES + b_offset(32 * s + k, n),
                        "B s {s} n {n} k {k}"
                    );
                }
            }
        }
        // The fields hold the largest addresses the kernel uses.
        let last = (TILE_BUFFERS - 1) * BUFFER_BYTES;
        let d = b_descriptor(last, 1);
        assert_eq!(((d & 0x3fff) << 4) as u32, last + A_TILE_BYTES + 2 * B_LBO);
        assert!(smem_bytes(MAX_BITS) < 1 << 18);
    }

    #[test]
    fn tiles_are_bijections_and_everything_fits() {
        let mut seen = vec![0u8; BUFFER_BYTES as usize];
        for r in 0..TILE_M {
            for k in 0..TILE_K {
                seen[a_offset(r, k) as usize] += 1;
            }
        }
        for k in 0..TILE_K {
            for n in 0..TILE_N {
                let at = (A_TILE_BYTES + b_offset(k, n)) as usize;
                assert!(at < BUFFER_BYTES as usize);
                seen[at] += 1;
            }
        }
        assert!(seen.iter().all(|&c| c <= 1));
        assert_eq!(
            seen.iter().map(|&c| c as u32).sum::<u32>(),
            (TILE_M + TILE_N) * TILE_K
        );
        for w in 1..=MAX_BITS {
            assert!(smem_bytes(w) <= 227 * 1024, "w {w}: {}", smem_bytes(w));
            let mut words = vec![0u8; raw_stage_words(w) as usize];
            for q in 0..TILE_M * w {
                words[q as usize] += 1;
            }
            for k in 0..TILE_K {
                for x in 0..2 * w {
                    words[raw_b_word(w, k, x) as usize] += 1;
                }
            }
            // Every word once, except one spare per group of 4 rows.
            assert_eq!(words.iter().filter(|&&c| c == 0).count(), 16);
            assert!(words.iter().all(|&c| c <= 1));
        }
    }

    /// Whether a warp's shared-memory accesses (address, bytes per lane; the same size for
    /// every lane) take the fewest wavefronts: the warp runs in phases of `128 / bytes` lanes
    /// (8 for 16-byte accesses, 16 for 8-byte, all 32 for 4-byte), and within a phase no
    /// 32-bit bank may be touched twice. (`cp.async` of 8 bytes measured as phases of 8
    /// lanes: `phase` overrides.)
    fn conflict_free_phases(addrs: &[(u32, u32)], phase: Option<usize>) -> bool {
        let n = addrs[0].1;
        assert!(addrs.iter().all(|&(_, m)| m == n));
        let lanes = phase.unwrap_or((128 / n) as usize);
        addrs.chunks(lanes).all(|p| {
            let mut banks = [0u32; 32];
            for &(a, n) in p {
                for w in 0..n / 4 {
                    banks[((a / 4 + w) % 32) as usize] += 1;
                }
            }
            banks.iter().all(|&c| c <= 1)
        })
    }

    fn conflict_free(addrs: &[(u32, u32)]) -> bool {
        conflict_free_phases(addrs, None)
    }

    #[test]
    fn a_warps_raw_copies_fall_in_distinct_banks() {
        for w in 1..=MAX_BITS {
            for warp in 0..THREADS / 32 {
                for c in 0..b_copies(w) {
                    let lanes: Vec<(u32, u32)> = (0..32)
                        .filter_map(|l| b_copy(w, 32 * warp + l, c))
                        .map(|(k, x)| (8 * raw_b_word(w, k, x), 8))
                        .collect();
                    if !lanes.is_empty() {
                        assert!(
                            conflict_free_phases(&lanes, Some(8)),
                            "B w {w} warp {warp} c {c}"
                        );
                    }
                }
                for c in 0..w {
                    let lanes: Vec<(u32, u32)> = (0..32)
                        .map(|l| {
                            let (r, x) = a_copy(w, 32 * warp + l, c);
                            (raw_a_offset(w, r, x), 8)
                        })
                        .collect();
                    assert!(
                        conflict_free_phases(&lanes, Some(8)),
                        "A w {w} warp {warp} c {c}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_warps_stores_and_b_warps_transposed_stores_are_conflict_free() {
        for warp in 0..8 {
            for i in 0..2 {
                for h in 0..2 {
                    let lanes: Vec<(u32, u32)> = (0..32)
                        .map(|l| {
                            let (r, q) = a_unit(32 * warp + l, i);
                            (a_offset(r, 32 * q + 16 * h), 16)
                        })
                        .collect();
                    assert!(conflict_free(&lanes), "A warp {warp} i {i} h {h}");
                }
            }
            for c in 0..8 {
                let lanes: Vec<(u32, u32)> = (0..32)
                    .map(|l| {
                        let (kq, nj) = b_unit(32 * warp + l);
                        (b_offset(4 * kq, 8 * nj + c), 4)
                    })
                    .collect();
                assert!(conflict_free(&lanes), "B warp {warp} column {c}");
            }
        }
    }

    #[test]
    fn every_thread_unit_covers_the_tiles_once() {
        let mut a = vec![0u8; (TILE_M * 2) as usize];
        let mut b = vec![0u8; 16 * 16];
        for tid in 0..THREADS {
            for i in 0..2 {
                let (r, q) = a_unit(tid, i);
                a[(2 * r + q) as usize] += 1;
            }
            let (kq, nj) = b_unit(tid);
            b[(16 * nj + kq) as usize] += 1;
        }
        assert!(a.iter().all(|&c| c == 1));
        assert!(b.iter().all(|&c| c == 1));
    }

    /// A small deterministic generator (xorshift64*).
    fn rng(seed: u64) -> impl FnMut() -> u64 {
        let mut s = seed | 1;
        move || {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            s.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
    }

    #[test]
    fn k_positions_permute_each_group_and_only_below_8_bits_dividing_8() {
        for w in 1..=MAX_BITS {
            let mut seen = [false; TILE_K as usize];
            for k in 0..TILE_K {
                let p = k_position(w, k);
                assert!(p < TILE_K && !seen[p as usize], "w {w} k {k}");
                seen[p as usize] = true;
                assert_eq!(k_element(w, p), k, "w {w} k {k}");
                // Within its 32-bit word's group, and within the unit of 32 a thread unpacks.
                assert_eq!(p / 32, k / 32);
                assert_eq!(p / k_group(w), k / k_group(w));
            }
            let identity = (0..TILE_K).all(|k| k_position(w, k) == k);
            assert_eq!(identity, w == 8, "w {w}");
        }
        // 2 bits: word m of a group of 16 holds elements m, m + 4, m + 8, m + 12.
        assert_eq!(
            (0..4).map(|j| k_element(2, 4 + j)).collect::<Vec<_>>(),
            [1, 5, 9, 13]
        );
        assert_eq!(k_position(1, 9), 4 + 1);
        // 4 bits: elements 0, 2, 4, 6 in word 0, 1, 3, 5, 7 in word 1.
        assert_eq!(k_position(4, 2), 1);
        assert_eq!(k_position(4, 1), 4);
    }

    #[test]
    fn narrow_b_columns_equal_the_spread_and_transpose() {
        let mut next = rng(21);
        for w in [1u32, 2, 4] {
            for _ in 0..500 {
                let r = [0; 4].map(|_| next() as u32);
                for o in (0..4).filter(|o| o % w == 0 || w == 1) {
                    if o + w > 4 {
                        continue;
                    }
                    let rows = r.map(|x| spread8(chunk_window([x, 0, 0], o), w));
                    assert_eq!(narrow_b_columns(r, o, w), transpose4x8(rows), "w {w} o {o}");
                }
            }
        }
    }

    #[test]
    fn odd_b_columns_equal_the_spread_and_transpose() {
        let mut next = rng(23);
        for w in [3u32, 5, 6, 7] {
            for _ in 0..500 {
                // Windows with garbage above the 8 elements' 8w bits, as chunk_window gives.
                let win = [0; 4].map(|_| next());
                let rows = win.map(|x| spread8(x, w));
                assert_eq!(odd_b_columns(win, w), transpose4x8(rows), "w {w}");
            }
        }
    }

    #[test]
    fn spread32_puts_every_element_in_its_byte() {
        let mut next = rng(7);
        for w in 1..=MAX_BITS {
            for _ in 0..200 {
                let vals: Vec<u64> = (0..32).map(|_| next() & mask(w)).collect();
                let mut x = [0u32; 8];
                for (i, &v) in vals.iter().enumerate() {
                    let bit = i as u32 * w;
                    x[(bit / 32) as usize] |= (v << (bit % 32)) as u32;
                    if bit % 32 + w > 32 {
                        x[(bit / 32) as usize + 1] |= (v >> (32 - bit % 32)) as u32;
                    }
                }
                let out = spread32(&x, w);
                for (i, &v) in vals.iter().enumerate() {
                    let p = k_position(w, i as u32) as usize;
                    assert_eq!(
                        (out[p / 4] >> (8 * (p % 4))) & 0xff,
                        v as u32,
                        "w {w} i {i}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_copies_cover_every_word_of_a_stage_once() {
        for w in 1..=MAX_BITS {
            let mut a = vec![0u8; (TILE_M * w) as usize];
            let mut b = vec![0u8; (TILE_K * 2 * w) as usize];
            for warp in 0..THREADS / 32 {
                for c in 0..w {
                    for lane in 0..32 {
                        let (r, x) = a_copy(w, 32 * warp + lane, c);
                        assert!(r < TILE_M && x < w, "w {w} tid {} c {c}", 32 * warp + lane);
                        a[(r * w + x) as usize] += 1;
                    }
                }
                for c in 0..b_copies(w) {
                    let some: Vec<bool> = (0..32)
                        .map(|lane| b_copy(w, 32 * warp + lane, c).is_some())
                        .collect();
                    // Whole warps copy or not.
                    assert!(
                        some.iter().all(|&x| x == some[0]),
                        "w {w} warp {warp} c {c}"
                    );
                    for lane in 0..32 {
                        if let Some((k, x)) = b_copy(w, 32 * warp + lane, c) {
                            assert!(x < 2 * w);
                            b[(k * 2 * w + x) as usize] += 1;
                        }
                    }
                }
            }
            assert!(a.iter().all(|&n| n == 1), "w {w}: A");
            assert!(b.iter().all(|&n| n == 1), "w {w}: B");
        }
    }

    /// The whole unpacking of a step on the CPU, as the kernel does it (thread by thread, from
    /// a raw stage of 32-bit words), against the elements themselves.
    #[test]
    fn unpacking_a_step_from_the_raw_stage_gives_every_element() {
        let mut next = rng(11);
        for w in 1..=MAX_BITS {
            // Elements of the step: A 256 x 64, B 64 x 128.
            let av: Vec<u64> = (0..TILE_M * TILE_K).map(|_| next() & mask(w)).collect();
            let bv: Vec<u64> = (0..TILE_K * TILE_N).map(|_| next() & mask(w)).collect();
            let mut raw = vec![0u64; raw_stage_words(w) as usize + 1];
            let pack = |raw: &mut [u64], word0: usize, vals: &[u64]| {
                for (i, &v) in vals.iter().enumerate() {
                    let bit = i * w as usize;
                    raw[word0 + bit / 64] |= v << (bit % 64);
                    if bit % 64 + w as usize > 64 {
                        raw[word0 + bit / 64 + 1] |= v >> (64 - bit % 64);
                    }
                }
            };
            for r in 0..TILE_M {
                let row = &av[(r * 64) as usize..(r * 64 + 64) as usize];
                let mut words = vec![0u64; w as usize + 1];
                pack(&mut words, 0, row);
                for x in 0..w {
                    raw[(raw_a_offset(w, r, x) / 8) as usize] = words[x as usize];
                }
            }
            for k in 0..TILE_K {
                let row = &bv[(k * TILE_N) as usize..((k + 1) * TILE_N) as usize];
                pack(&mut raw, raw_b_word(w, k, 0) as usize, row);
            }
            let raw32: Vec<u32> = raw
                .iter()
                .flat_map(|&x| [x as u32, (x >> 32) as u32])
                .collect();
            let lds = |byte: u32| raw32[(byte / 4) as usize];
            let mut tile = vec![0u8; BUFFER_BYTES as usize];
            for tid in 0..THREADS {
                for i in 0..2 {
                    let (r, q) = a_unit(tid, i);
                    let at = 8 * w * r + 4 * w * q;
                    let mut x = [0u32; 8];
                    for (j, x) in x.iter_mut().enumerate().take(w as usize) {
                        *x = lds(at + 4 * j as u32);
                    }
                    for (m, v) in spread32(&x, w).iter().enumerate() {
                        let o = a_offset(r, 32 * q + 4 * m as u32) as usize;
                        tile[o..o + 4].copy_from_slice(&v.to_le_bytes());
                    }
                }
                let (kq, nj) = b_unit(tid);
                let b_raw = 8 * raw_b_slot_word(w, 4 * kq, 0) + nj * w;
                if matches!(w, 1 | 2 | 4) {
                    let (w0, o) = (b_raw & !3, b_raw & 3);
                    let r = [0, 1, 2, 3].map(|i| lds(w0 + 8 * 2 * w * i));
                    for (c, v) in narrow_b_columns(r, o, w).iter().enumerate() {
                        let o = (A_TILE_BYTES + b_offset(4 * kq, 8 * nj + c as u32)) as usize;
                        tile[o..o + 4].copy_from_slice(&v.to_le_bytes());
                    }
                    continue;
                }
                // The rows' windows, then the columns as the kernel makes them.
                let win = [0, 1, 2, 3].map(|i| {
                    let at = b_raw + 8 * 2 * w * i;
                    if w == 8 {
                        lds(at) as u64 | (lds(at + 4) as u64) << 32
                    } else {
                        let (w0, o) = (at & !3, at & 3);
                        chunk_window([lds(w0), lds(w0 + 4), lds(w0 + 8)], o)
                    }
                });
                let cols = if w == 8 {
                    transpose4x8(win)
                } else {
                    odd_b_columns(win, w)
                };
                for (c, v) in cols.iter().enumerate() {
                    let o = (A_TILE_BYTES + b_offset(4 * kq, 8 * nj + c as u32)) as usize;
                    tile[o..o + 4].copy_from_slice(&v.to_le_bytes());
                }
            }
            // Position p of K holds element k_element(p) of both operands.
            for r in 0..TILE_M {
                for p in 0..TILE_K {
                    let k = k_element(w, p);
                    assert_eq!(
                        tile[a_offset(r, p) as usize] as u64,
                        av[(r * TILE_K + k) as usize],
                        "w {w} A ({r}, {k}) at {p}"
                    );
                }
            }
            for p in 0..TILE_K {
                let k = k_element(w, p);
                for n in 0..TILE_N {
                    assert_eq!(
                        tile[(A_TILE_BYTES + b_offset(p, n)) as usize] as u64,
                        bv[(k * TILE_N + n) as usize],
                        "w {w} B ({k}, {n}) at {p}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_warp_specialized_kernel_fits_and_its_barriers_are_aligned() {
        for w in 1..=MAX_BITS {
            assert!(
                ws_smem_bytes(w) <= 227 * 1024,
                "w {w}: {}",
                ws_smem_bytes(w)
            );
            assert_eq!(ws_barriers(w) % 8, 0);
            assert!(ws_barriers(w) >= WS_BUFFERS * BUFFER_BYTES + WS_STAGES * raw_stage_bytes(w));
        }
    }

    /// A model of the warp-specialized schedule: barrier phases as counters, the producers
    /// and the consumers advancing in every interleaving a seeded walk picks. A producer
    /// unpacks step `i` only when its buffer's last reader is done; a consumer reads step `i`
    /// only when it is unpacked, and never a buffer the producers are writing.
    #[test]
    fn the_barrier_parities_order_producers_and_consumers() {
        let mut next = rng(5);
        for steps in [1u32, 3, 4, 5, 9, 31] {
            for _ in 0..200 {
                // Phases completed per barrier.
                let mut full = [0u32; WS_BUFFERS as usize];
                let mut empty = [0u32; WS_BUFFERS as usize];
                // The step each buffer holds (unpacked), and which steps the consumers are
                // done with.
                let mut holds = [u32::MAX; WS_BUFFERS as usize];
                let (mut p, mut c) = (0u32, 0u32);
                // Consumers: at most one step in flight besides the one being issued
                // (`wgmma_wait<1>`): step c - 1 is released once step c is issued.
                while c < steps {
                    let try_producer = next().is_multiple_of(2);
                    // A phase of parity q completed: the count of completions went past a
                    // phase with that parity, i.e. completions > k for the k-th wait.
                    if try_producer && p < steps {
                        let ok = match ws_empty_wait(p) {
                            None => true,
                            Some((t, q)) => {
                                let k = p / WS_BUFFERS - 1;
                                assert_eq!(q, k & 1);
                                empty[t as usize] > k
                            }
                        };
                        if ok {
                            let t = (p % WS_BUFFERS) as usize;
                            // The buffer's previous step is done being read: released, that
                            // is, the consumers issued the step after it.
                            if holds[t] != u32::MAX {
                                assert!(holds[t] + 2 <= c, "step {p} overwrites {}", holds[t]);
                            }
                            holds[t] = p;
                            full[t] += 1;
                            p += 1;
                        }
                    } else {
                        let (t, q) = ws_full_wait(c);
                        let k = c / WS_BUFFERS;
                        assert_eq!(q, k & 1);
                        if full[t as usize] > k {
                            assert_eq!(holds[t as usize], c, "consumer reads step {c}");
                            // Issue step c; release step c - 1.
                            if c >= 1 {
                                empty[((c - 1) % WS_BUFFERS) as usize] += 1;
                            }
                            c += 1;
                        }
                    }
                    // A waiter never sees a phase two rounds ahead (parity aliasing): a
                    // buffer is filled at most once more than it was released.
                    for t in 0..WS_BUFFERS as usize {
                        assert!(full[t] <= empty[t] + 1 && empty[t] <= full[t]);
                    }
                }
            }
        }
    }

    #[test]
    fn register_a_by_default_else_warp_specialized_up_to_5_bits() {
        let ra: Vec<u32> = (0..=9).filter(|&w| ra_preferred(w)).collect();
        assert_eq!(ra, [1, 2, 3, 4, 5, 6, 7, 8]);
        let ws: Vec<u32> = (0..=9).filter(|&w| ws_preferred(w)).collect();
        assert_eq!(ws, [1, 2, 3, 4, 5]);
        for w in 1..=MAX_BITS {
            let names = [KERNEL_NAMES, WS_KERNEL_NAMES, RA_KERNEL_NAMES].map(|n| n[w as usize - 1]);
            assert!(names[0] != names[1] && names[1] != names[2] && names[0] != names[2]);
            assert!(
                names.iter().all(|n| n.ends_with(&format!("_b{w}"))),
                "{names:?}"
            );
        }
    }

    /// The staged epilogue against one write per element, on whole `nogaps` matrices of
    /// several tiles with ragged last ones: the accumulators of every lane staged as the
    /// kernels do ([`acc_position`], [`finish8`], [`stage_offset`]), then each tile row packed
    /// ([`pack_row`]) and written where it is inside `C`.
    #[test]
    fn staged_epilogue_writes_equal_the_per_element_writes() {
        use crate::layout::{OVF, SAT, finish};
        use crate::testing::pack_nogaps;
        let mut next = rng(33);
        for bits in 1..=8u32 {
            assert!(staged_epilogue(NOGAPS, bits));
            for &(rows, cols) in &[
                (1u32, 1u32),
                (3, 7),
                (300, 8),
                (4, 63),
                (2, 129),
                (257, 300),
            ] {
                let overflow = if bits.is_multiple_of(2) { SAT } else { OVF };
                // Small and large sums, so that saturation matters.
                let sums: Vec<u32> = (0..rows * cols)
                    .map(|_| {
                        let x = next();
                        if x.is_multiple_of(3) {
                            x as u32
                        } else {
                            (x >> 32) as u32 % 300
                        }
                    })
                    .collect();
                let finished: Vec<u64> = sums
                    .iter()
                    .map(|&x| finish(x as u64, bits, overflow))
                    .collect();
                let (want, rw) = pack_nogaps(&finished, rows, cols, bits);
                let mut got = vec![0u64; (rows * rw) as usize];
                for m0 in (0..rows).step_by(TILE_M as usize) {
                    for n0 in (0..cols).step_by(TILE_N as usize) {
                        let mut stage = vec![0xa5u8; STAGE_BYTES as usize];
                        for warp in 0..8 {
                            for lane in 0..32 {
                                for i in (0..128).step_by(2) {
                                    let (r, c) = acc_position(warp, lane, i);
                                    let v = [0, 1].map(|e| {
                                        let (gr, gc) = (m0 + r, n0 + c + e);
                                        // The kernel's sums outside C are whatever; zeroed
                                        // by the column test, the row is never written.
                                        let sum = if gr < rows && gc < cols {
                                            sums[(gr * cols + gc) as usize]
                                        } else {
                                            next() as u32
                                        };
                                        if gc < cols {
                                            finish8(sum, bits, overflow == SAT)
                                        } else {
                                            0
                                        }
                                    });
                                    let at = stage_offset(r, c) as usize;
                                    stage[at] = v[0] as u8;
                                    stage[at + 1] = v[1] as u8;
                                }
                            }
                        }
                        for r in 0..TILE_M {
                            if m0 + r >= rows {
                                continue;
                            }
                            let chunk = |q: u32| {
                                [0, 8].map(|h| {
                                    let at = stage_offset(r, 16 * q) as usize + h;
                                    u64::from_le_bytes(stage[at..at + 8].try_into().unwrap())
                                })
                            };
                            let mut count = 0;
                            pack_row(chunk, bits, |i, word| {
                                assert_eq!(i, count);
                                count += 1;
                                let at = n0 / 64 * bits + i;
                                if at < rw {
                                    got[((m0 + r) * rw + at) as usize] = word;
                                }
                            });
                            assert_eq!(count, 2 * bits);
                        }
                    }
                }
                assert_eq!(got, want, "bits {bits} {rows}x{cols}");
            }
        }
        assert!(!staged_epilogue(NOGAPS, 9));
        assert!(!staged_epilogue(crate::layout::TIGHT, 4));
    }

    #[test]
    fn the_accumulators_cover_the_tile_once_and_finish8_is_finish() {
        let mut seen = vec![0u8; (TILE_M * TILE_N) as usize];
        for warp in 0..8 {
            for lane in 0..32 {
                for i in 0..128 {
                    let (r, c) = acc_position(warp, lane, i);
                    seen[(r * TILE_N + c) as usize] += 1;
                }
            }
        }
        assert!(seen.iter().all(|&n| n == 1));
        let mut next = rng(5);
        for bits in 1..=8 {
            for _ in 0..1000 {
                let sum = next() as u32 >> (next() % 32);
                for (sat, ovf) in [(false, crate::layout::OVF), (true, crate::layout::SAT)] {
                    assert_eq!(
                        finish8(sum, bits, sat) as u64,
                        crate::layout::finish(sum as u64, bits, ovf)
                    );
                }
            }
        }
    }

    #[test]
    fn the_staged_epilogues_shared_accesses_are_conflict_free() {
        for warp in 0..8 {
            // Phase 1: one 2-byte store per lane; the two lanes of a 32-bit word share it.
            for i in (0..128).step_by(2) {
                let mut words = [Vec::new(), Vec::new()];
                for lane in 0..32 {
                    let (r, c) = acc_position(warp, lane, i);
                    let word = stage_offset(r, c) / 4;
                    if !words[0].contains(&word) {
                        words[0].push(word);
                    }
                }
                words[1] = words[0].iter().map(|w| w % 32).collect();
                words[1].sort();
                words[1].dedup();
                assert_eq!(words[0].len(), words[1].len(), "warp {warp} i {i}");
            }
            // Phase 2: lane l reads 16 bytes of row 32 warp + l.
            for q in 0..TILE_N / 16 {
                let lanes: Vec<(u32, u32)> = (0..32)
                    .map(|l| (stage_offset(32 * warp + l, 16 * q), 16))
                    .collect();
                assert!(conflict_free(&lanes), "warp {warp} q {q}");
            }
        }
    }

    #[test]
    fn the_register_a_permutation_is_one_for_every_width() {
        let mut seen = [false; 64];
        for t in 0..4 {
            for m in 0..4 {
                for v0 in 0..4 {
                    let p = ra_position(t, m, v0) as usize;
                    assert!(!seen[p], "position {p} twice");
                    seen[p] = true;
                }
            }
        }
        for w in 1..=MAX_BITS {
            let mut seen = [false; 64];
            for p in 0..TILE_K {
                let e = ra_element(w, p) as usize;
                assert!(e < 64 && !seen[e], "w {w}: element {e} twice");
                seen[e] = true;
                assert_eq!(element_at(w, p, true), e as u32);
                assert_eq!(element_at(w, p, false), k_element(w, p));
            }
        }
    }

    #[test]
    fn b_copies_by_slot_are_the_copies_by_row() {
        for w in 1..=MAX_BITS {
            for tid in 0..THREADS {
                for c in 0..b_copies(w) {
                    let by_slot = b_copy_slot(w, tid, c);
                    assert_eq!(
                        by_slot.map(|(s, x)| (k_element(w, s), x)),
                        b_copy(w, tid, c),
                        "w {w} tid {tid} c {c}"
                    );
                    if let Some((s, x)) = by_slot {
                        assert_eq!(raw_b_slot_word(w, s, x), raw_b_word(w, k_element(w, s), x));
                    }
                }
            }
        }
    }

    /// The register-`A` fragments of random rows, unpacked as the kernel does (its loads from
    /// a raw stage of 32-bit words, then `ra_row_words`), hold in each byte the element
    /// `ra_fragment_element` names; no load leaves the row.
    #[test]
    fn register_a_fragments_hold_their_elements() {
        let mut next = rng(5);
        for w in 1..=MAX_BITS {
            for _ in 0..50 {
                let rows: [Vec<u64>; 2] =
                    core::array::from_fn(|_| (0..64).map(|_| next() & mask(w)).collect());
                // The two rows' raw words (8w bytes each), as 32-bit words.
                let raw: Vec<[u32; 16]> = rows
                    .iter()
                    .map(|row| {
                        let mut words = [0u64; 9];
                        for (i, &v) in row.iter().enumerate() {
                            let bit = i * w as usize;
                            words[bit / 64] |= v << (bit % 64);
                            if bit % 64 + w as usize > 64 {
                                words[bit / 64 + 1] |= v >> (64 - bit % 64);
                            }
                        }
                        core::array::from_fn(|j| (words[j / 2] >> (32 * (j % 2))) as u32)
                    })
                    .collect();
                for t in 0..4 {
                    let (off, n, s) = ra_load(w, t);
                    assert!(
                        off % 4 == 0 && n <= 4 && off + 4 * n <= 8 * w,
                        "w {w} t {t}"
                    );
                    assert!(s == 0 || (s == 16 && w % 2 == 1));
                    let load = |r: usize| -> [u32; 4] {
                        core::array::from_fn(|j| {
                            if (j as u32) < n {
                                raw[r][(off / 4) as usize + j]
                            } else {
                                0
                            }
                        })
                    };
                    let words = ra_row_words(load(0), load(1), w, t);
                    for (r, row_words) in words.iter().enumerate() {
                        for m in 0..4 {
                            for v0 in 0..4 {
                                let e = ra_fragment_element(w, t, m, v0);
                                assert_eq!(
                                    (row_words[m as usize] >> (8 * v0)) & 0xff,
                                    rows[r][e as usize] as u32,
                                    "w {w} t {t} row {r} word {m} byte {v0}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_register_a_kernel_fits() {
        for w in 1..=MAX_BITS {
            assert!(ra_smem_bytes(w) <= 227 * 1024, "w {w}");
            assert!(ra_smem_bytes(w) < smem_bytes(w));
        }
        assert!(RA_BUFFER_BYTES.is_multiple_of(16) && RA_BUFFER_BYTES >= B_TILE_BYTES);
        // The B descriptor of a buffer is the lockstep kernel's with the A tile left out.
        for s in 0..2 {
            assert_eq!(
                ra_b_descriptor(65536, s),
                b_descriptor(65536 - A_TILE_BYTES, s)
            );
        }
    }

    #[test]
    fn kernels_only_for_nogaps_of_one_width_with_32_bit_sums() {
        use crate::layout::{NAIVE, NOGAPS};
        for w in 1..=8 {
            assert!(supports(NOGAPS, NOGAPS, w, w, false));
            assert!(!supports(NOGAPS, NOGAPS, w, w, true));
            assert!(!supports(NAIVE, NOGAPS, w, w, false));
            assert_eq!(kernel_name(w), Some(KERNEL_NAMES[w as usize - 1]));
        }
        assert!(!supports(NOGAPS, NOGAPS, 4, 5, false));
        assert!(!supports(NOGAPS, NOGAPS, 9, 9, false));
        assert_eq!(kernel_name(0), None);
        assert_eq!(kernel_name(9), None);
    }
}
