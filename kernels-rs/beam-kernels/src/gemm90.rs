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
//! * Outputs as the other tensor-core kernels: wrapped or clamped by `layout::finish`, written
//!   packed in any width and layout.

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
/// Byte distance between `A`'s core matrices adjacent in `K` (16 columns): all 32 row groups.
pub const A_LBO: u32 = (TILE_M / 8) * A_SBO;
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
/// `w`.
pub const fn raw_b_word(w: u32, k: u32, word: u32) -> u32 {
    TILE_M * w + (k / 4) * (8 * w + 1) + (k % 4) * 2 * w + word
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
/// and the last copy of odd widths, threads 128..256).
#[inline(always)]
pub const fn b_copy(w: u32, tid: u32, c: u32) -> Option<(u32, u32)> {
    let (k, x) = if 32 % w == 0 {
        (tid / (2 * w) + (THREADS / (2 * w)) * c, tid % (2 * w))
    } else {
        let q = tid + THREADS * c;
        (q / (2 * w), q % (2 * w))
    };
    if k < TILE_K { Some((k, x)) } else { None }
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
/// `x` (the first `w` used), to 8 words of 4 bytes (element `4m + j` in byte `j` of word `m`).
/// Each word is one funnel shift of a constant amount and [`crate::mma::spread4`].
#[inline(always)]
pub fn spread32(x: &[u32; 8], w: u32) -> [u32; 8] {
    if w == 8 {
        return *x;
    }
    core::array::from_fn(|m| {
        let bit = 4 * m as u32 * w;
        let (i, s) = ((bit / 32) as usize, bit % 32);
        let win = if s == 0 {
            x[i]
        } else {
            (x[i] >> s) | (x[i + 1] << (32 - s))
        };
        crate::mma::spread4(win, w)
    })
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

    /// The 32-bit banks a warp's stores touch, each at most `limit` times per 128 bytes of
    /// data (the least the hardware can do).
    fn conflict_free(addrs: &[(u32, u32)]) -> bool {
        // (address, bytes) per lane; count words per bank.
        let mut banks = [0u32; 32];
        let mut bytes = 0;
        for &(a, n) in addrs {
            for w in 0..n / 4 {
                banks[((a / 4 + w) % 32) as usize] += 1;
            }
            bytes += n;
        }
        let wavefronts = bytes.div_ceil(128);
        banks.iter().all(|&c| c <= wavefronts)
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
                    assert_eq!(
                        (out[i / 4] >> (8 * (i % 4))) & 0xff,
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
                let chunk = |at: u32| -> u64 {
                    let (w0, o) = (at & !3, at & 3);
                    spread8(chunk_window([lds(w0), lds(w0 + 4), lds(w0 + 8)], o), w)
                };
                let b_raw = 8 * raw_b_word(w, 4 * kq, 0) + nj * w;
                let r = [0, 1, 2, 3].map(|i| {
                    if w == 8 {
                        let at = b_raw + 8 * 2 * w * i;
                        lds(at) as u64 | (lds(at + 4) as u64) << 32
                    } else {
                        chunk(b_raw + 8 * 2 * w * i)
                    }
                });
                for (c, v) in transpose4x8(r).iter().enumerate() {
                    let o = (A_TILE_BYTES + b_offset(4 * kq, 8 * nj + c as u32)) as usize;
                    tile[o..o + 4].copy_from_slice(&v.to_le_bytes());
                }
            }
            for r in 0..TILE_M {
                for k in 0..TILE_K {
                    assert_eq!(
                        tile[a_offset(r, k) as usize] as u64,
                        av[(r * TILE_K + k) as usize],
                        "w {w} A ({r}, {k})"
                    );
                }
            }
            for k in 0..TILE_K {
                for n in 0..TILE_N {
                    assert_eq!(
                        tile[(A_TILE_BYTES + b_offset(k, n)) as usize] as u64,
                        bv[(k * TILE_N + n) as usize],
                        "w {w} B ({k}, {n})"
                    );
                }
            }
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
