// The Hopper BEAM GEMM (see `beam_kernels::gemm90`), NVPTX for sm_90a only.

use core::arch::asm;

use beam_kernels::access::store;
use beam_kernels::gemm90::{
    A_TILE_BYTES, BUFFER_BYTES, LEAD, RA_BUFFER_BYTES, RA_LEAD, RA_STAGES, RAW_STAGES, THREADS,
    TILE_BUFFERS, TILE_K, TILE_M, TILE_N, WS_BUFFERS, WS_CONSUMER_REGS, WS_LEAD, WS_PRODUCER_REGS,
    WS_PRODUCERS, WS_STAGES, WS_THREADS, a_copy, a_descriptor, a_offset, a_unit, acc_position,
    b_copies, b_copy, b_copy_slot, b_descriptor, b_offset, b_unit, element_at, finish8,
    narrow_b_columns, odd_b_columns, pack_row, ra_b_descriptor, ra_load, ra_row_words,
    raw_a_offset, raw_b_slot_word, raw_b_word, raw_stage_bytes, spread32, stage_offset,
    staged_epilogue, ws_barriers, ws_empty_wait, ws_full_wait,
};
use beam_kernels::layout;
use beam_kernels::mma::{chunk_window, chunk_words, transpose4x8};
use beam_kernels::{GemmParams, PackedOut, PackedRef};
use cmv_device::{
    U32x4, block_idx_x, block_idx_y, cp_async_8_zfill, cp_async_commit, cp_async_wait_at_most,
    dyn_smem_addr, fence_mbarrier_init, fence_proxy_async_shared, lds_u32, lds_v2, lds_v4,
    mbarrier_arrive, mbarrier_init, mbarrier_wait_parity, named_barrier_sync, setmaxnreg_dec,
    setmaxnreg_inc, st_u64, sts_u16, sts_u32, sts_v4, sync_threads, thread_idx_x,
    wgmma_commit_group, wgmma_fence,
};

/// The register list `{d0}, .. {d127}` of a warpgroup's two tiles.
macro_rules! acc_regs128 {
    () => {
        "{d0}, {d1}, {d2}, {d3}, {d4}, {d5}, {d6}, {d7}, {d8}, {d9}, {d10}, {d11}, {d12}, {d13}, {d14}, {d15}, {d16}, {d17}, {d18}, {d19}, {d20}, {d21}, {d22}, {d23}, {d24}, {d25}, {d26}, {d27}, {d28}, {d29}, {d30}, {d31}, {d32}, {d33}, {d34}, {d35}, {d36}, {d37}, {d38}, {d39}, {d40}, {d41}, {d42}, {d43}, {d44}, {d45}, {d46}, {d47}, {d48}, {d49}, {d50}, {d51}, {d52}, {d53}, {d54}, {d55}, {d56}, {d57}, {d58}, {d59}, {d60}, {d61}, {d62}, {d63}, {d64}, {d65}, {d66}, {d67}, {d68}, {d69}, {d70}, {d71}, {d72}, {d73}, {d74}, {d75}, {d76}, {d77}, {d78}, {d79}, {d80}, {d81}, {d82}, {d83}, {d84}, {d85}, {d86}, {d87}, {d88}, {d89}, {d90}, {d91}, {d92}, {d93}, {d94}, {d95}, {d96}, {d97}, {d98}, {d99}, {d100}, {d101}, {d102}, {d103}, {d104}, {d105}, {d106}, {d107}, {d108}, {d109}, {d110}, {d111}, {d112}, {d113}, {d114}, {d115}, {d116}, {d117}, {d118}, {d119}, {d120}, {d121}, {d122}, {d123}, {d124}, {d125}, {d126}, {d127}"
    };
}

/// `asm!` with the 128 accumulators `$acc[0..128]` as operands `d0` .. `d127`.
macro_rules! acc_asm128 {
    ($acc:expr; $tmpl:expr; $($rest:tt)*) => {
        asm!(
            $tmpl,
            d0 = inout(reg32) $acc[0],
            d1 = inout(reg32) $acc[1],
            d2 = inout(reg32) $acc[2],
            d3 = inout(reg32) $acc[3],
            d4 = inout(reg32) $acc[4],
            d5 = inout(reg32) $acc[5],
            d6 = inout(reg32) $acc[6],
            d7 = inout(reg32) $acc[7],
            d8 = inout(reg32) $acc[8],
            d9 = inout(reg32) $acc[9],
            d10 = inout(reg32) $acc[10],
            d11 = inout(reg32) $acc[11],
            d12 = inout(reg32) $acc[12],
            d13 = inout(reg32) $acc[13],
            d14 = inout(reg32) $acc[14],
            d15 = inout(reg32) $acc[15],
            d16 = inout(reg32) $acc[16],
            d17 = inout(reg32) $acc[17],
            d18 = inout(reg32) $acc[18],
            d19 = inout(reg32) $acc[19],
            d20 = inout(reg32) $acc[20],
            d21 = inout(reg32) $acc[21],
            d22 = inout(reg32) $acc[22],
            d23 = inout(reg32) $acc[23],
            d24 = inout(reg32) $acc[24],
            d25 = inout(reg32) $acc[25],
            d26 = inout(reg32) $acc[26],
            d27 = inout(reg32) $acc[27],
            d28 = inout(reg32) $acc[28],
            d29 = inout(reg32) $acc[29],
            d30 = inout(reg32) $acc[30],
            d31 = inout(reg32) $acc[31],
            d32 = inout(reg32) $acc[32],
            d33 = inout(reg32) $acc[33],
            d34 = inout(reg32) $acc[34],
            d35 = inout(reg32) $acc[35],
            d36 = inout(reg32) $acc[36],
            d37 = inout(reg32) $acc[37],
            d38 = inout(reg32) $acc[38],
            d39 = inout(reg32) $acc[39],
            d40 = inout(reg32) $acc[40],
            d41 = inout(reg32) $acc[41],
            d42 = inout(reg32) $acc[42],
            d43 = inout(reg32) $acc[43],
            d44 = inout(reg32) $acc[44],
            d45 = inout(reg32) $acc[45],
            d46 = inout(reg32) $acc[46],
            d47 = inout(reg32) $acc[47],
            d48 = inout(reg32) $acc[48],
            d49 = inout(reg32) $acc[49],
            d50 = inout(reg32) $acc[50],
            d51 = inout(reg32) $acc[51],
            d52 = inout(reg32) $acc[52],
            d53 = inout(reg32) $acc[53],
            d54 = inout(reg32) $acc[54],
            d55 = inout(reg32) $acc[55],
            d56 = inout(reg32) $acc[56],
            d57 = inout(reg32) $acc[57],
            d58 = inout(reg32) $acc[58],
            d59 = inout(reg32) $acc[59],
            d60 = inout(reg32) $acc[60],
            d61 = inout(reg32) $acc[61],
            d62 = inout(reg32) $acc[62],
            d63 = inout(reg32) $acc[63],
            d64 = inout(reg32) $acc[64],
            d65 = inout(reg32) $acc[65],
            d66 = inout(reg32) $acc[66],
            d67 = inout(reg32) $acc[67],
            d68 = inout(reg32) $acc[68],
            d69 = inout(reg32) $acc[69],
            d70 = inout(reg32) $acc[70],
            d71 = inout(reg32) $acc[71],
            d72 = inout(reg32) $acc[72],
            d73 = inout(reg32) $acc[73],
            d74 = inout(reg32) $acc[74],
            d75 = inout(reg32) $acc[75],
            d76 = inout(reg32) $acc[76],
            d77 = inout(reg32) $acc[77],
            d78 = inout(reg32) $acc[78],
            d79 = inout(reg32) $acc[79],
            d80 = inout(reg32) $acc[80],
            d81 = inout(reg32) $acc[81],
            d82 = inout(reg32) $acc[82],
            d83 = inout(reg32) $acc[83],
            d84 = inout(reg32) $acc[84],
            d85 = inout(reg32) $acc[85],
            d86 = inout(reg32) $acc[86],
            d87 = inout(reg32) $acc[87],
            d88 = inout(reg32) $acc[88],
            d89 = inout(reg32) $acc[89],
            d90 = inout(reg32) $acc[90],
            d91 = inout(reg32) $acc[91],
            d92 = inout(reg32) $acc[92],
            d93 = inout(reg32) $acc[93],
            d94 = inout(reg32) $acc[94],
            d95 = inout(reg32) $acc[95],
            d96 = inout(reg32) $acc[96],
            d97 = inout(reg32) $acc[97],
            d98 = inout(reg32) $acc[98],
            d99 = inout(reg32) $acc[99],
            d100 = inout(reg32) $acc[100],
            d101 = inout(reg32) $acc[101],
            d102 = inout(reg32) $acc[102],
            d103 = inout(reg32) $acc[103],
            d104 = inout(reg32) $acc[104],
            d105 = inout(reg32) $acc[105],
            d106 = inout(reg32) $acc[106],
            d107 = inout(reg32) $acc[107],
            d108 = inout(reg32) $acc[108],
            d109 = inout(reg32) $acc[109],
            d110 = inout(reg32) $acc[110],
            d111 = inout(reg32) $acc[111],
            d112 = inout(reg32) $acc[112],
            d113 = inout(reg32) $acc[113],
            d114 = inout(reg32) $acc[114],
            d115 = inout(reg32) $acc[115],
            d116 = inout(reg32) $acc[116],
            d117 = inout(reg32) $acc[117],
            d118 = inout(reg32) $acc[118],
            d119 = inout(reg32) $acc[119],
            d120 = inout(reg32) $acc[120],
            d121 = inout(reg32) $acc[121],
            d122 = inout(reg32) $acc[122],
            d123 = inout(reg32) $acc[123],
            d124 = inout(reg32) $acc[124],
            d125 = inout(reg32) $acc[125],
            d126 = inout(reg32) $acc[126],
            d127 = inout(reg32) $acc[127],
            $($rest)*
        )
    };
}

/// `D += A B` for the 64 x 128 tile whose sums are `acc[off..off + 64]` and 32 of `K`
/// (`wgmma.mma_async.sync.aligned.m64n128k32.s32.u8.u8`, sums modulo 2^32): A (64 x 32) and
/// B (32 x 128) K-major from shared memory by the descriptors `da`, `db`. Lane `(g, t)` of
/// warp `q` of the warpgroup holds, for column group `j`, `acc[off + 4j ..][0..2]` at row
/// `16q + g`, columns `8j + 2t, +1`, and `[2..4]` at row `16q + g + 8`. Asynchronous: `acc`
/// must not be touched until [`wgmma_wait`] covers it.
///
/// # Safety
/// All threads of the warpgroup run it together, after [`wgmma_fence`]; the descriptors
/// describe shared memory that nothing writes until the wait.
#[inline(always)]
unsafe fn wgmma_m64n128k32(acc: &mut [u32; 128], off: usize, da: u64, db: u64) {
    // SAFETY: warpgroup-collective; the caller guarantees the operands.
    unsafe {
        cmv_device::wgmma_acc_asm64!(acc, off;
            concat!(
                "wgmma.mma_async.sync.aligned.m64n128k32.s32.u8.u8 {{",
                cmv_device::wgmma_acc_regs64!(),
                "}}, {da}, {db}, 1;"
            );
            da = in(reg64) da,
            db = in(reg64) db,
            options(nostack)
        );
    }
}

/// `wgmma.wait_group.sync.aligned N`: waits until at most `N` of the warpgroup's `wgmma`
/// groups are in flight. The accumulators are operands, so the compiler keeps them (and does
/// not read the sums) until here.
///
/// # Safety
/// All threads of the warpgroup run it together.
#[inline(always)]
unsafe fn wgmma_wait<const N: u32>(acc: &mut [u32; 128]) {
    // SAFETY: warpgroup-collective; the operands only pin registers.
    unsafe {
        acc_asm128!(acc;
            concat!("wgmma.wait_group.sync.aligned {n}; // ", acc_regs128!());
            n = const N,
            options(nostack)
        );
    }
}

/// `W` (1..=8) 32-bit words of shared memory at `at`, in the widest loads its alignment
/// allows (`at = 8W r + 4W q`: 16-byte aligned at 4 and 8 bits, 8-byte at 2 and 6).
///
/// # Safety
/// The `W` words lie in shared memory.
#[inline(always)]
unsafe fn load_words<const W: u32>(at: u32) -> [u32; 8] {
    let mut x = [0u32; 8];
    // SAFETY: the caller's words; the alignments above.
    unsafe {
        match W {
            2 => {
                let v = lds_v2(at);
                x[0] = v[0];
                x[1] = v[1];
            }
            4 | 8 => {
                for h in 0..(W / 4) as usize {
                    let v = lds_v4(at + 16 * h as u32).0;
                    x[4 * h..4 * h + 4].copy_from_slice(&v);
                }
            }
            6 => {
                for h in 0..3 {
                    let v = lds_v2(at + 8 * h as u32);
                    x[2 * h] = v[0];
                    x[2 * h + 1] = v[1];
                }
            }
            _ => {
                for (j, x) in x.iter_mut().enumerate().take(W as usize) {
                    *x = lds_u32(at + 4 * j as u32);
                }
            }
        }
    }
    x
}

/// Issues this thread's copies of step `k0`'s packed words (both operands `nogaps` of `W`
/// bits) to the raw stage at `dst`: A's words [`a_copy`] (placed by [`raw_a_offset`]), B's
/// [`b_copy`] (placed by [`raw_b_word`]); a word outside its matrix is not read and its
/// destination becomes zero.
///
/// # Safety
/// `a` and `b` describe live buffers of the words their geometries imply; `dst` is a raw
/// stage in the block's shared memory.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn issue_raw<const W: u32, const RA: bool>(
    a: PackedRef,
    b: PackedRef,
    tid: u32,
    m0: u32,
    n0: u32,
    k0: u32,
    dst: u32,
) {
    // The register-A kernel tests once whether every word of the step lies inside both
    // matrices (all tiles but the last row, column and step of K), and then copies without
    // a test per word.
    if !RA {
        // SAFETY: forwarded.
        unsafe { issue_raw_words::<W, false, true>(a, b, tid, m0, n0, k0, dst) };
        return;
    }
    let inside = m0 + TILE_M <= a.rows
        && (k0 / 64 + 1) * W <= a.row_words
        && k0 + TILE_K <= b.rows
        && (n0 / 64 + 2) * W <= b.row_words;
    // SAFETY: forwarded; `inside` says every word the copies name is inside its matrix.
    unsafe {
        if inside {
            issue_raw_words::<W, true, false>(a, b, tid, m0, n0, k0, dst)
        } else {
            issue_raw_words::<W, true, true>(a, b, tid, m0, n0, k0, dst)
        }
    }
}

/// [`issue_raw`]'s copies, each tested against the matrices' bounds where `CHECK`.
///
/// # Safety
/// As [`issue_raw`]; without `CHECK`, every word the copies name lies inside its matrix.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn issue_raw_words<const W: u32, const RA: bool, const CHECK: bool>(
    a: PackedRef,
    b: PackedRef,
    tid: u32,
    m0: u32,
    n0: u32,
    k0: u32,
    dst: u32,
) {
    let (aw, bw) = (a.words.as_ptr(), b.words.as_ptr());
    // Word offsets of the step in a row of A and of the block's columns in a row of B.
    let (ka, nb) = (k0 / 64 * W, n0 / 64 * W);
    // SAFETY (every copy below): `src` is a word of its matrix when `ok` (row and word inside
    // it, or every word of the step inside both matrices without CHECK); else nothing is
    // read. The destination is inside the stage, 8-byte aligned.
    let copy = |to: u32, src: *const u64, ok: bool| unsafe {
        let ok = ok || !CHECK;
        cp_async_8_zfill(dst + to, if ok { src } else { aw }, if ok { 8 } else { 0 })
    };
    if W == 8 && !RA {
        // One loop over both operands' words `q = tid + THREADS c` (the same places as
        // a_copy and b_copy at 8 bits), written as in the first build of this kernel: the
        // two loops below compile to a slower kernel at 8 bits (9.30 against 8.27 ms at
        // 11585^3, docs/PERF.md) though they are faster at 4.
        let total = (TILE_M + TILE_N) * W;
        for c in 0..total.div_ceil(THREADS) {
            let q = tid + THREADS * c;
            if q >= total {
                break;
            }
            // Warp-uniform: TILE_M * W is a multiple of 256.
            let (src, ok, at) = if q < TILE_M * W {
                let (r, w) = (q / W, ka + q % W);
                let row = m0 + r;
                let i = row as usize * a.row_words as usize + w as usize;
                (aw.wrapping_add(i), row < a.rows && w < a.row_words, 8 * q)
            } else if RA {
                // By slot: slot s holds the step's row ra_element(8, s).
                let q = q - TILE_M * W;
                let (s, w) = (q / (2 * W), q % (2 * W));
                let row = k0 + element_at(W, s, true);
                let i = row as usize * b.row_words as usize + (nb + w) as usize;
                (
                    bw.wrapping_add(i),
                    row < b.rows && nb + w < b.row_words,
                    8 * raw_b_slot_word(W, s, w),
                )
            } else {
                let q = q - TILE_M * W;
                let (k, w) = (q / (2 * W), q % (2 * W));
                let row = k0 + k;
                let i = row as usize * b.row_words as usize + (nb + w) as usize;
                (
                    bw.wrapping_add(i),
                    row < b.rows && nb + w < b.row_words,
                    8 * raw_b_word(W, k, w),
                )
            };
            // SAFETY: `src` is a word of its matrix when `ok`; else nothing is read. The
            // destination is inside the stage, 8-byte aligned.
            unsafe {
                cp_async_8_zfill(dst + at, if ok { src } else { aw }, if ok { 8 } else { 0 })
            };
        }
        return;
    }
    for c in 0..W {
        let (r, x) = a_copy(W, tid, c);
        let row = m0 + r;
        let i = row as usize * a.row_words as usize + (ka + x) as usize;
        copy(
            raw_a_offset(W, r, x),
            aw.wrapping_add(i),
            row < a.rows && ka + x < a.row_words,
        );
    }
    for c in 0..b_copies(W) {
        if RA {
            // Warp-uniform (b_copy_slot).
            if let Some((s, x)) = b_copy_slot(W, tid, c) {
                let row = k0 + element_at(W, s, true);
                let i = row as usize * b.row_words as usize + (nb + x) as usize;
                copy(
                    8 * raw_b_slot_word(W, s, x),
                    bw.wrapping_add(i),
                    row < b.rows && nb + x < b.row_words,
                );
            }
            continue;
        }
        // Warp-uniform (b_copy).
        if let Some((k, x)) = b_copy(W, tid, c) {
            let row = k0 + k;
            let i = row as usize * b.row_words as usize + (nb + x) as usize;
            copy(
                8 * raw_b_word(W, k, x),
                bw.wrapping_add(i),
                row < b.rows && nb + x < b.row_words,
            );
        }
    }
}

/// Unpacks a step from the raw stage at `raw` into the tile buffer at `buf`: this thread's two
/// units of 32 elements of a row of A ([`a_unit`], [`spread32`]) and its 4 x 8 unit of B
/// ([`b_unit`], transposed). No bounds: the stage holds zeros for every word outside the
/// matrices and a canonical packing zeros in every other bit outside them.
///
/// # Safety
/// The stage holds the step's words, visible to this thread; nothing reads the buffer until
/// the next barrier (and, for `wgmma`, the proxy fence).
#[inline(always)]
unsafe fn unpack<const W: u32>(tid: u32, raw: u32, buf: u32) {
    // SAFETY: forwarded.
    unsafe {
        unpack_a::<W>(tid, raw, buf);
        unpack_b::<W>(tid, raw, buf + A_TILE_BYTES);
    }
}

/// The `A` part of [`unpack`]: this thread's two units of a row of `A` into the `A` tile at
/// `buf`.
///
/// # Safety
/// As [`unpack`].
#[inline(always)]
unsafe fn unpack_a<const W: u32>(tid: u32, raw: u32, buf: u32) {
    for i in 0..2 {
        let (r, q) = a_unit(tid, i);
        // SAFETY: the unit's W words lie in the stage's A part.
        let x = unsafe { load_words::<W>(raw + 8 * W * r + 4 * W * q) };
        let v = spread32(&x, W);
        let at = buf + a_offset(r, 32 * q);
        // SAFETY: two core-matrix rows of the A tile, 16-byte aligned.
        unsafe {
            sts_v4(at, U32x4([v[0], v[1], v[2], v[3]]));
            sts_v4(at + a_offset(0, 16), U32x4([v[4], v[5], v[6], v[7]]));
        }
    }
}

/// The `B` part of [`unpack`]: this thread's 4 x 8 unit of `B` into the `B` tile at `bt`
/// (raw-stage slot `p` to `K` position `p`, whatever the kernel's permutation).
///
/// # Safety
/// As [`unpack`].
#[inline(always)]
unsafe fn unpack_b<const W: u32>(tid: u32, raw: u32, bt: u32) {
    let (kq, nj) = b_unit(tid);
    // The rows of K positions 4 kq .. 4 kq + 4, in consecutive slots (gemm90::raw_b_word).
    let b_raw = raw + 8 * raw_b_slot_word(W, 4 * kq, 0) + nj * W;
    if W == 1 || W == 2 || W == 4 {
        // The unit's 8 elements of each row lie in one 32-bit word, at its byte o.
        let (w0, o) = (b_raw & !3, b_raw & 3);
        // SAFETY: the words of the unit's rows, inside the stage; aligned.
        let r = [0, 1, 2, 3].map(|i| unsafe { lds_u32(w0 + 8 * 2 * W * i) });
        for (c, &v) in narrow_b_columns(r, o, W).iter().enumerate() {
            // SAFETY: inside the B tile (b_offset), 4-byte aligned.
            unsafe { sts_u32(bt + b_offset(4 * kq, 8 * nj + c as u32), v) };
        }
        return;
    }
    // The chunk of 8 elements at shared byte `at` (byte nj * W of a row of the B step).
    // SAFETY (all): the words of a chunk lie in its row, or (the last chunk's last word) in
    // its group's spare word; aligned.
    // The chunk's bytes from its first, in the low 8W bits.
    let window = |at: u32| -> u64 {
        if W == 8 {
            let v = unsafe { lds_v2(at) };
            return v[0] as u64 | (v[1] as u64) << 32;
        }
        let (w0, o) = (at & !3, at & 3);
        let n = chunk_words(W);
        let x = unsafe {
            [
                lds_u32(w0),
                if n > 1 { lds_u32(w0 + 4) } else { 0 },
                if n > 2 { lds_u32(w0 + 8) } else { 0 },
            ]
        };
        chunk_window(x, o)
    };
    let wins = [0, 1, 2, 3].map(|i| window(b_raw + 8 * 2 * W * i));
    let cols = if W == 8 {
        transpose4x8(wins)
    } else {
        // 3, 5, 6, 7 bits (1, 2, 4 returned above).
        odd_b_columns(wins, W)
    };
    for (c, &v) in cols.iter().enumerate() {
        // SAFETY: inside the B tile (b_offset), 4-byte aligned.
        unsafe { sts_u32(bt + b_offset(4 * kq, 8 * nj + c as u32), v) };
    }
}

/// Writes one lane's four outputs of a column group: `(row, col)`, `(row, col + 1)`,
/// `(row + 8, col)`, `(row + 8, col + 1)`, those inside `C`. Not inlined, so that the
/// epilogue stays a loop and the sums stay in registers.
///
/// # Safety
/// As the kernel; no other thread writes these elements.
#[inline(never)]
unsafe fn store4(out: PackedOut, overflow: u32, row: u32, col: u32, sums: [u32; 4]) {
    for (e, &sum) in sums.iter().enumerate() {
        let (r, c) = (row + 8 * (e as u32 / 2), col + e as u32 % 2);
        if r < out.rows && c < out.cols {
            let v = layout::finish(sum as u64, out.bits, overflow);
            // SAFETY: inside C, written once.
            unsafe { store(&out, r, c, v) };
        }
    }
}

/// The steps of `gemm90` after the first copies were issued: unpacks step 0, then per step
/// one barrier, the step's `wgmma`s, the copies of step `i + LEAD` and the next step's
/// unpacking; returns with every `wgmma` done. Only called with `steps > 0`, so that no path
/// reaches the final wait without a `wgmma` (ptxas serializes the `wgmma`s of a function
/// where one does).
///
/// # Safety
/// As `gemm90`; the whole block runs it; the copies of steps `0 .. LEAD` were issued, one
/// commit group each.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn main_loop<const W: u32>(
    p: &GemmParams,
    acc: &mut [u32; 128],
    (m0, n0): (u32, u32),
    steps: u32,
    smem: u32,
    tid: u32,
    h: u32,
) {
    let buffer = |i: u32| smem + (i % TILE_BUFFERS) * BUFFER_BYTES;
    let ring = smem + TILE_BUFFERS * BUFFER_BYTES;
    let stage = |i: u32| ring + (i % RAW_STAGES) * raw_stage_bytes(W);
    let (a, b) = (p.a, p.b);
    // SAFETY: step 0's copies (the oldest group) are done, then visible to all after the
    // barrier; buffer 0 is ours.
    unsafe {
        cp_async_wait_at_most(LEAD - 1);
        sync_threads();
        unpack::<W>(tid, stage(0), buffer(0));
        fence_proxy_async_shared();
    }
    let mut i = 0u32;
    while i < steps {
        // Groups committed: steps 0 ..= i + LEAD - 1; step i + 1's are done when at most
        // LEAD - 2 remain.
        // After the barrier: step i + 1's words are visible to all; step i's tiles are
        // complete (unpacked and fenced in step i - 1); both warpgroups have waited for
        // their step i - 2 `wgmma`s, so buffer i + 1 is free; raw stage i - 1 (= i + LEAD)
        // was unpacked in step i - 2, so it is free.
        // SAFETY: all threads reach it.
        unsafe {
            cp_async_wait_at_most(LEAD - 2);
            sync_threads();
        }
        let buf = buffer(i);
        // SAFETY: the whole warpgroup runs these (block-uniform control flow); the buffer
        // holds step i and nothing writes it until every warpgroup has waited for this group
        // (two barriers on).
        unsafe {
            wgmma_fence();
            for s in 0..2 {
                for sub in 0..2 {
                    wgmma_m64n128k32(
                        acc,
                        64 * sub as usize,
                        a_descriptor(buf, 2 * h + sub, s),
                        b_descriptor(buf, s),
                    );
                }
            }
            wgmma_commit_group();
        }
        let next = i + LEAD;
        if next < steps {
            // SAFETY: forwarded; stage `next` is free (above).
            unsafe { issue_raw::<W, false>(a, b, tid, m0, n0, TILE_K * next, stage(next)) };
        }
        // SAFETY: closes this thread's copies (an empty group past the last step).
        unsafe { cp_async_commit() };
        if i + 1 < steps {
            // SAFETY: step i + 1's stage is visible and its buffer free (above).
            unsafe {
                unpack::<W>(tid, stage(i + 1), buffer(i + 1));
                fence_proxy_async_shared();
            }
        }
        // SAFETY: warpgroup-collective; step i - 1's group is done after it.
        unsafe { wgmma_wait::<1>(acc) };
        i += 1;
    }
    // SAFETY: as above; every group done.
    unsafe { wgmma_wait::<0>(acc) };
}

/// The kernel body for both operands `nogaps` of `W` bits (see `beam_kernels::gemm90`).
///
/// # Safety
/// The launcher's contract: `a`, `b`, `c` describe live buffers of the words their
/// geometries imply, both operands `nogaps` of `W` bits, `a.cols == b.rows`, `c` is
/// `a.rows x b.cols` (zeroed unless naive), the output needs only sums modulo 2^32; the grid
/// covers `C` in `TILE_M x TILE_N` tiles (x: columns, y: rows), `THREADS` threads, and
/// `gemm90::smem_bytes(W)` bytes of dynamic shared memory.
#[inline(always)]
unsafe fn gemm90<const W: u32>(p: &GemmParams) {
    let tid = thread_idx_x();
    let (warp, lane) = (tid / 32, tid % 32);
    let h = warp / 4;
    let m0 = block_idx_y() * TILE_M;
    let n0 = block_idx_x() * TILE_N;
    let steps = p.a.cols.div_ceil(TILE_K);
    let smem = dyn_smem_addr();
    let ring = smem + TILE_BUFFERS * BUFFER_BYTES;
    let stage = |i: u32| ring + (i % RAW_STAGES) * raw_stage_bytes(W);
    let (a, b) = (p.a, p.b);
    let mut acc = [0u32; 128];

    // One commit group per step, empty past the last, so that the waits' counts hold.
    for i in 0..LEAD {
        if i < steps {
            // SAFETY: forwarded; stage i of the ring.
            unsafe { issue_raw::<W, false>(a, b, tid, m0, n0, TILE_K * i, stage(i)) };
        }
        // SAFETY: closes this thread's copies.
        unsafe { cp_async_commit() };
    }
    if steps > 0 {
        // SAFETY: forwarded (the whole block runs it).
        unsafe { main_loop::<W>(p, &mut acc, (m0, n0), steps, smem, tid, h) };
    }

    // SAFETY: forwarded; each element of C belongs to one lane of one warp; the whole
    // block (both warpgroups) runs it, and no copy is in flight (the last wait above).
    unsafe { epilogue(p, &acc, (m0, n0), (warp, lane), smem, || sync_threads()) };
}

/// The epilogue of a warpgroup `h` (0 or 1) of either kernel: warp `warp` (0..8, the
/// warpgroup's warps `4h ..`) writes its lanes' sums of the two `m64n128` tiles. Where
/// [`staged_epilogue`] holds, the 256 threads of both warpgroups (`sync`: their barrier)
/// stage the tile's outputs as bytes in shared memory from `smem` (the tile buffers, free
/// once every `wgmma` is done), then thread `32 warp + lane` packs tile row `32 warp + lane`
/// into its `2 bits` words of `C` ([`pack_row`]) and stores them; otherwise each element is
/// an atomic OR ([`store4`]).
///
/// # Safety
/// As the kernels; each element of `C` belongs to one lane of one warp; all 256 threads of
/// the two warpgroups call it, after their last `wgmma` wait, and nothing else uses the
/// first `gemm90::STAGE_BYTES` of shared memory from then on.
#[inline(always)]
unsafe fn epilogue(
    p: &GemmParams,
    acc: &[u32; 128],
    (m0, n0): (u32, u32),
    (warp, lane): (u32, u32),
    smem: u32,
    sync: impl Fn(),
) {
    let c = p.c;
    if staged_epilogue(c.layout, c.bits) {
        let sat = p.overflow == layout::SAT;
        // Every wgmma of both warpgroups is done: the tile buffers are free.
        sync();
        let put = |i: u32, sums: [u32; 2]| {
            let (r, col) = acc_position(warp, lane, i);
            let v = [0, 1].map(|e| {
                if n0 + col + e < c.cols {
                    finish8(sums[e as usize], c.bits, sat)
                } else {
                    0
                }
            });
            // SAFETY: inside the stage (gemm90's asserts), 2-byte aligned (even column).
            unsafe { sts_u16(smem + stage_offset(r, col), v[0] | v[1] << 8) };
        };
        // Written out, so that every sum is a constant index (a loop left `acc` in local
        // memory).
        macro_rules! put_pairs {
            ($($i:literal)*) => {$( put(2 * $i, [acc[2 * $i], acc[2 * $i + 1]]); )*};
        }
        put_pairs!(
            0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30
            31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58
            59 60 61 62 63
        );
        // Every output is staged.
        sync();
        let r = 32 * warp + lane;
        if m0 + r < c.rows {
            let first = n0 / 64 * c.bits;
            // SAFETY: row m0 + r of C; its words from `first` (the tile's part of the row).
            let words = unsafe {
                c.words
                    .as_mut_ptr()
                    .add(((m0 + r) as usize) * c.row_words as usize + first as usize)
            };
            let pair = |q: u32| {
                // SAFETY: 16 bytes of the row's stage, 16-byte aligned (STAGE_ROW).
                let v = unsafe { lds_v4(smem + stage_offset(r, 16 * q)) }.0;
                [0, 2].map(|h| v[h] as u64 | (v[h + 1] as u64) << 32)
            };
            pack_row(pair, c.bits, |i, word| {
                if first + i < c.row_words {
                    // SAFETY: a word of row m0 + r of C, which only this thread writes
                    // (the tile's columns; past the matrix the stage holds zeros).
                    unsafe { st_u64(words.wrapping_add(i as usize), word) };
                }
            });
        }
        return;
    }
    let (g, t) = (lane / 4, lane % 4);
    let row0 = m0 + 128 * (warp / 4) + 16 * (warp % 4) + g;
    let col0 = n0 + 2 * t;
    for sub in 0..2 {
        for j in 0..16 {
            let o = 64 * sub + 4 * j;
            // SAFETY: forwarded.
            unsafe {
                store4(
                    p.c,
                    p.overflow,
                    row0 + 64 * sub as u32,
                    col0 + 8 * j as u32,
                    [acc[o], acc[o + 1], acc[o + 2], acc[o + 3]],
                )
            };
        }
    }
}

/// The producer warpgroups of `gemm90ws`: for every step, the raw copies [`WS_LEAD`] steps
/// ahead, then (once the tile buffer's last readers are done) the step's unpacking, fenced
/// for the async proxy and announced on the buffer's `full` barrier. Thread `ptid` plays
/// thread `ptid` of the 256-thread kernel.
///
/// # Safety
/// As `gemm90ws`; all [`WS_PRODUCERS`] producer threads run it, and no other thread uses
/// named barrier 1.
#[inline(always)]
unsafe fn producer<const W: u32>(
    p: &GemmParams,
    (m0, n0): (u32, u32),
    steps: u32,
    smem: u32,
    ptid: u32,
) {
    let ring = smem + WS_BUFFERS * BUFFER_BYTES;
    let stage = |i: u32| ring + (i % WS_STAGES) * raw_stage_bytes(W);
    let buffer = |i: u32| smem + (i % WS_BUFFERS) * BUFFER_BYTES;
    let bars = smem + ws_barriers(W);
    let (a, b) = (p.a, p.b);
    let copies = |i: u32| {
        // SAFETY: forwarded; stage i of the ring, free (the callers below).
        unsafe { issue_raw::<W, false>(a, b, ptid, m0, n0, TILE_K * i, stage(i)) };
    };
    // One commit group per step, empty past the last, so that the waits' counts hold.
    for i in 0..WS_LEAD {
        if i < steps {
            copies(i);
        }
        // SAFETY: closes this thread's copies.
        unsafe { cp_async_commit() };
    }
    let mut i = 0;
    while i < steps {
        // Groups committed: steps 0 ..= i + WS_LEAD - 1, so step i's are done when at most
        // WS_LEAD - 1 remain. After the producers' barrier step i's words are visible to
        // every producer, and every producer is done unpacking step i - 1, whose stage
        // (that of step i + WS_LEAD) is then free.
        // SAFETY: every producer thread reaches it, nothing else uses barrier 1.
        unsafe {
            cp_async_wait_at_most(WS_LEAD - 1);
            named_barrier_sync(1, WS_PRODUCERS);
        }
        if i + WS_LEAD < steps {
            copies(i + WS_LEAD);
        }
        // SAFETY: closes this thread's copies (an empty group past the last step).
        unsafe { cp_async_commit() };
        if let Some((t, parity)) = ws_empty_wait(i) {
            // SAFETY: an initialized barrier; the consumers complete that phase once they
            // are done with step i - WS_BUFFERS (gemm90::ws_empty_wait).
            unsafe { mbarrier_wait_parity(bars + 8 * (WS_BUFFERS + t), parity) };
        }
        // SAFETY: step i's stage is visible, its buffer free; the fence makes the stores
        // visible to `wgmma` (async proxy) once the consumers acquire the `full` barrier.
        unsafe {
            unpack::<W>(ptid, stage(i), buffer(i));
            fence_proxy_async_shared();
            mbarrier_arrive(bars + 8 * (i % WS_BUFFERS));
        }
        i += 1;
    }
}

/// The consumer warpgroups of `gemm90ws`: per step, wait for the buffer's `full` phase, issue
/// the step's `wgmma`s, wait for the step before's and release its buffer on the `empty`
/// barrier. Returns with every `wgmma` done. Only called with `steps > 0` (as `main_loop`).
///
/// # Safety
/// As `gemm90ws`; all threads of both consumer warpgroups run it, `h` their warpgroup (0, 1).
#[inline(always)]
unsafe fn consumer(acc: &mut [u32; 128], steps: u32, smem: u32, bars: u32, h: u32) {
    let mut i = 0;
    while i < steps {
        let (t, parity) = ws_full_wait(i);
        let buf = smem + t * BUFFER_BYTES;
        // SAFETY: an initialized barrier the producers complete once step i is unpacked into
        // buffer t (and fenced); nothing writes the buffer until both warpgroups release it.
        unsafe {
            mbarrier_wait_parity(bars + 8 * t, parity);
            wgmma_fence();
            for s in 0..2 {
                for sub in 0..2 {
                    wgmma_m64n128k32(
                        acc,
                        64 * sub as usize,
                        a_descriptor(buf, 2 * h + sub, s),
                        b_descriptor(buf, s),
                    );
                }
            }
            wgmma_commit_group();
            // Step i - 1's group is done after it: its buffer may be overwritten.
            wgmma_wait::<1>(acc);
            if i >= 1 {
                mbarrier_arrive(bars + 8 * (WS_BUFFERS + (i - 1) % WS_BUFFERS));
            }
        }
        i += 1;
    }
    // SAFETY: warpgroup-collective; every group done.
    unsafe { wgmma_wait::<0>(acc) };
}

/// The warp-specialized kernel body (`beam_kernels::gemm90`, `WS_*`): the first two
/// warpgroups copy and unpack, the other two multiply, synchronized per tile buffer by `mbarrier`s
/// (`full`: 256 producer arrivals, `empty`: 256 consumer arrivals), no block barrier in the
/// loop.
///
/// # Safety
/// As `gemm90`, with [`WS_THREADS`] threads and `gemm90::ws_smem_bytes(W)` bytes of dynamic
/// shared memory.
#[inline(always)]
unsafe fn gemm90ws<const W: u32>(p: &GemmParams) {
    let tid = thread_idx_x();
    let m0 = block_idx_y() * TILE_M;
    let n0 = block_idx_x() * TILE_N;
    let steps = p.a.cols.div_ceil(TILE_K);
    let smem = dyn_smem_addr();
    let bars = smem + ws_barriers(W);
    if tid == 0 {
        for t in 0..WS_BUFFERS {
            // SAFETY: 8-byte aligned barriers inside the dynamic shared memory (gemm90's
            // tests), used as nothing else; visible to all after the fence and the barrier.
            unsafe {
                mbarrier_init(bars + 8 * t, WS_PRODUCERS);
                mbarrier_init(bars + 8 * (WS_BUFFERS + t), THREADS);
            }
        }
        // SAFETY: sm_90 code.
        unsafe { fence_mbarrier_init() };
    }
    // SAFETY: every thread reaches it (the only block barrier of the kernel).
    unsafe { sync_threads() };
    if tid < WS_PRODUCERS {
        // SAFETY: forwarded; warp-uniform (whole warpgroups); the producers need few
        // registers (the launch bound gives every thread 65536 / WS_THREADS first).
        unsafe {
            setmaxnreg_dec::<WS_PRODUCER_REGS>();
            producer::<W>(p, (m0, n0), steps, smem, tid);
        }
        return;
    }
    // SAFETY: whole warpgroups; the producers gave back what this takes (gemm90's assert).
    unsafe { setmaxnreg_inc::<WS_CONSUMER_REGS>() };
    let ctid = tid - WS_PRODUCERS;
    let (warp, lane) = (ctid / 32, ctid % 32);
    let mut acc = [0u32; 128];
    if steps > 0 {
        // SAFETY: forwarded; both consumer warpgroups run it.
        unsafe { consumer(&mut acc, steps, smem, bars, warp / 4) };
    }
    // SAFETY: forwarded; both consumer warpgroups run it; the producers wrote their last
    // tile buffer before the last `full` phase the consumers waited for, and use neither the
    // buffers nor named barrier 2 after.
    unsafe {
        epilogue(p, &acc, (m0, n0), (warp, lane), smem, || {
            named_barrier_sync(2, WS_THREADS - WS_PRODUCERS)
        })
    };
}

/// `D += A B` as [`wgmma_m64n128k32`], with `A` from this thread's registers: the fragment
/// `a` (`gemm90::ra_position`: byte `v0` of `a[v1 + 2 v2]` at row `16q + g + 8 v1`, `K`
/// position `16 v2 + 4 t + v0`).
///
/// # Safety
/// As [`wgmma_m64n128k32`]; the registers of `a` are not written until [`wgmma_wait`] covers
/// it (the kernel writes a step's fragments only after the wait for the step before's).
#[inline(always)]
unsafe fn wgmma_m64n128k32_ra(acc: &mut [u32; 128], off: usize, a: [u32; 4], db: u64) {
    // SAFETY: warpgroup-collective; the caller guarantees the operands.
    unsafe {
        cmv_device::wgmma_acc_asm64!(acc, off;
            concat!(
                "wgmma.mma_async.sync.aligned.m64n128k32.s32.u8.u8 {{",
                cmv_device::wgmma_acc_regs64!(),
                "}}, {{{a0}, {a1}, {a2}, {a3}}}, {db}, 1;"
            );
            a0 = in(reg32) a[0],
            a1 = in(reg32) a[1],
            a2 = in(reg32) a[2],
            a3 = in(reg32) a[3],
            db = in(reg64) db,
            options(nostack)
        );
    }
}

/// This thread's `A` fragments of a step of the register-`A` kernel, from the raw stage at
/// `raw`: `rows` is the thread's first row (`128 h + 16 q + g`), the others `+ 8`, `+ 64`,
/// `+ 72`; fragment `2 sub + s` feeds the `wgmma` of rows `64 sub ..` and `K` slice `s`
/// (`gemm90::ra_row_words`, `ra_load`).
///
/// # Safety
/// The stage holds the step's words, visible to this thread.
#[inline(always)]
unsafe fn ra_fragments<const W: u32>(raw: u32, rows: u32, t: u32) -> [[u32; 4]; 4] {
    let (off, n, _) = ra_load(W, t);
    let load = |r: u32| -> [u32; 4] {
        let at = raw + raw_a_offset(W, r, 0) + off;
        // SAFETY: the row's words in the stage's A part (ra_load stays in the row's 8W
        // bytes); aligned as ra_load says (8-byte rows; 16t at 8 bits, 8t at 4 bits).
        unsafe {
            match W {
                1 | 4 => {
                    let v = lds_v2(at);
                    [v[0], v[1], 0, 0]
                }
                8 => lds_v4(at).0,
                _ => {
                    let mut x = [0u32; 4];
                    for (j, x) in x.iter_mut().enumerate().take(n as usize) {
                        *x = lds_u32(at + 4 * j as u32);
                    }
                    x
                }
            }
        }
    };
    let mut f = [[0u32; 4]; 4];
    for sub in 0..2 {
        let r = rows + 64 * sub as u32;
        let [w0, w1] = ra_row_words(load(r), load(r + 8), W, t);
        for s in 0..2 {
            f[2 * sub + s] = [w0[2 * s], w1[2 * s], w0[2 * s + 1], w1[2 * s + 1]];
        }
    }
    f
}

/// The register-`A` kernel body (`beam_kernels::gemm90`, `RA_*`): the lockstep kernel with
/// `A` unpacked into registers. Per step: one barrier, the step's `wgmma`s (fragments of the
/// step, `B` from its buffer), the copies of step `i + RA_LEAD`, the wait for step `i - 1`'s
/// `wgmma`s, then step `i + 1`'s fragments (into the registers step `i - 1` read: two sets,
/// the loop unrolled by two) and `B` unpacking. (`B`'s unpacking before the wait, while
/// two steps are in flight, ran 5-10% slower on an H200, and the copies after the unpacking
/// 3-6% slower; three sets of fragments and a wait for step `i - 2` make `ptxas` serialize
/// the `wgmma`s: docs/PERF.md.)
///
/// # Safety
/// As `gemm90`, with `gemm90::ra_smem_bytes(W)` bytes of dynamic shared memory.
#[inline(always)]
unsafe fn gemm90ra<const W: u32>(p: &GemmParams) {
    let tid = thread_idx_x();
    let (warp, lane) = (tid / 32, tid % 32);
    let h = warp / 4;
    let (g, t) = (lane / 4, lane % 4);
    let rows = 128 * h + 16 * (warp % 4) + g;
    let m0 = block_idx_y() * TILE_M;
    let n0 = block_idx_x() * TILE_N;
    let steps = p.a.cols.div_ceil(TILE_K);
    let smem = dyn_smem_addr();
    let buffer = |i: u32| smem + (i % TILE_BUFFERS) * RA_BUFFER_BYTES;
    let ring = smem + TILE_BUFFERS * RA_BUFFER_BYTES;
    let stage = |i: u32| ring + (i % RA_STAGES) * raw_stage_bytes(W);
    let (a, b) = (p.a, p.b);
    let mut acc = [0u32; 128];

    // One commit group per step, empty past the last, so that the waits' counts hold.
    for i in 0..RA_LEAD {
        if i < steps {
            // SAFETY: forwarded; stage i of the ring.
            unsafe { issue_raw::<W, true>(a, b, tid, m0, n0, TILE_K * i, stage(i)) };
        }
        // SAFETY: closes this thread's copies.
        unsafe { cp_async_commit() };
    }
    if steps > 0 {
        // SAFETY: step 0's copies (the oldest group) are done, then visible to all after
        // the barrier; buffer 0 is ours.
        let mut x = unsafe {
            cp_async_wait_at_most(RA_LEAD - 1);
            sync_threads();
            let f = ra_fragments::<W>(stage(0), rows, t);
            unpack_b::<W>(tid, stage(0), buffer(0));
            fence_proxy_async_shared();
            f
        };
        let mut y = [[0u32; 4]; 4];
        let mut i = 0u32;
        // Step i from the fragments `$cur`; step i + 1's into `$next`.
        macro_rules! step {
            ($cur:ident, $next:ident) => {
                // After the barrier: step i + 1's words are visible to all; step i's B
                // buffer is complete (unpacked and fenced in step i - 1).
                // SAFETY: all threads reach it.
                unsafe {
                    cp_async_wait_at_most(RA_LEAD - 2);
                    sync_threads();
                }
                // SAFETY: block-uniform control flow; buffer i holds step i's B and nothing
                // writes it until two barriers on; the fragments stay until the wait below
                // of the next step.
                unsafe {
                    wgmma_fence();
                    for s in 0..2 {
                        for sub in 0..2 {
                            wgmma_m64n128k32_ra(
                                &mut acc,
                                64 * sub,
                                $cur[2 * sub + s],
                                ra_b_descriptor(buffer(i), s as u32),
                            );
                        }
                    }
                    wgmma_commit_group();
                }
                let next = i + RA_LEAD;
                if next < steps {
                    // SAFETY: stage `next` (that of step i - 1) was read in step i - 2.
                    unsafe { issue_raw::<W, true>(a, b, tid, m0, n0, TILE_K * next, stage(next)) };
                }
                // SAFETY: closes this thread's copies; step i - 1's wgmmas are done after
                // the wait (warpgroup-collective), so `$next` and buffer i + 1 (that of step
                // i - 2, done in both warpgroups before this step's barrier) are free.
                unsafe {
                    cp_async_commit();
                    wgmma_wait::<1>(&mut acc);
                }
                if i + 1 < steps {
                    // SAFETY: step i + 1's stage is visible (the barrier above).
                    unsafe {
                        $next = ra_fragments::<W>(stage(i + 1), rows, t);
                        unpack_b::<W>(tid, stage(i + 1), buffer(i + 1));
                        fence_proxy_async_shared();
                    }
                }
                i += 1;
            };
        }
        while i < steps {
            step!(x, y);
            if i >= steps {
                break;
            }
            step!(y, x);
        }
        // SAFETY: as above; every group done.
        unsafe { wgmma_wait::<0>(&mut acc) };
    }

    // SAFETY: forwarded; each element of C belongs to one lane of one warp; the whole block
    // runs it, and no copy is in flight (every step's copies were waited for).
    unsafe { epilogue(p, &acc, (m0, n0), (warp, lane), smem, || sync_threads()) };
}

/// The entry points of one kernel body (`gemm90`, the lockstep kernel, `gemm90ws`, the
/// warp-specialized one, or `gemm90ra`, the register-`A` one), one per width.
macro_rules! entries {
    ($body:ident; $($name:ident: $w:expr;)*) => {$(
        /// `C = A x B` for `nogaps` operands of the name's width, sums modulo 2^32
        /// (`beam_kernels::gemm90`), by the kernel body of the macro call.
        ///
        /// # Safety
        /// As that body (`gemm90`, `gemm90ws` or `gemm90ra`).
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: GemmParams) {
            // SAFETY: forwarded.
            unsafe { $body::<{ $w }>(&p) }
        }
    )*};
}

entries! {
    gemm90ws;
    cmv_beam_gemm90ws_nogaps_b1: 1;
    cmv_beam_gemm90ws_nogaps_b2: 2;
    cmv_beam_gemm90ws_nogaps_b3: 3;
    cmv_beam_gemm90ws_nogaps_b4: 4;
    cmv_beam_gemm90ws_nogaps_b5: 5;
    cmv_beam_gemm90ws_nogaps_b6: 6;
    cmv_beam_gemm90ws_nogaps_b7: 7;
    cmv_beam_gemm90ws_nogaps_b8: 8;
}

// One block of four warpgroups per SM: 128 registers per thread (65536 / 512) at the start,
// then 88 for the producers and 168 for the consumers (setmaxnreg).
cmv_device::launch_bounds! {
    CMV_MAXNTID_cmv_beam_gemm90ws_nogaps_b1 = WS_THREADS;
    CMV_MAXNTID_cmv_beam_gemm90ws_nogaps_b2 = WS_THREADS;
    CMV_MAXNTID_cmv_beam_gemm90ws_nogaps_b3 = WS_THREADS;
    CMV_MAXNTID_cmv_beam_gemm90ws_nogaps_b4 = WS_THREADS;
    CMV_MAXNTID_cmv_beam_gemm90ws_nogaps_b5 = WS_THREADS;
    CMV_MAXNTID_cmv_beam_gemm90ws_nogaps_b6 = WS_THREADS;
    CMV_MAXNTID_cmv_beam_gemm90ws_nogaps_b7 = WS_THREADS;
    CMV_MAXNTID_cmv_beam_gemm90ws_nogaps_b8 = WS_THREADS;
}

entries! {
    gemm90;
    cmv_beam_gemm90_nogaps_b1: 1;
    cmv_beam_gemm90_nogaps_b2: 2;
    cmv_beam_gemm90_nogaps_b3: 3;
    cmv_beam_gemm90_nogaps_b4: 4;
    cmv_beam_gemm90_nogaps_b5: 5;
    cmv_beam_gemm90_nogaps_b6: 6;
    cmv_beam_gemm90_nogaps_b7: 7;
    cmv_beam_gemm90_nogaps_b8: 8;
}

// One block of two warpgroups per SM (128 sums per thread): up to 255 registers.
cmv_device::launch_bounds! {
    CMV_MAXNTID_cmv_beam_gemm90_nogaps_b1 = THREADS;
    CMV_MAXNTID_cmv_beam_gemm90_nogaps_b2 = THREADS;
    CMV_MAXNTID_cmv_beam_gemm90_nogaps_b3 = THREADS;
    CMV_MAXNTID_cmv_beam_gemm90_nogaps_b4 = THREADS;
    CMV_MAXNTID_cmv_beam_gemm90_nogaps_b5 = THREADS;
    CMV_MAXNTID_cmv_beam_gemm90_nogaps_b6 = THREADS;
    CMV_MAXNTID_cmv_beam_gemm90_nogaps_b7 = THREADS;
    CMV_MAXNTID_cmv_beam_gemm90_nogaps_b8 = THREADS;
}

entries! {
    gemm90ra;
    cmv_beam_gemm90ra_nogaps_b1: 1;
    cmv_beam_gemm90ra_nogaps_b2: 2;
    cmv_beam_gemm90ra_nogaps_b3: 3;
    cmv_beam_gemm90ra_nogaps_b4: 4;
    cmv_beam_gemm90ra_nogaps_b5: 5;
    cmv_beam_gemm90ra_nogaps_b6: 6;
    cmv_beam_gemm90ra_nogaps_b7: 7;
    cmv_beam_gemm90ra_nogaps_b8: 8;
}

// One block of two warpgroups per SM (128 sums and two steps' fragments per thread).
cmv_device::launch_bounds! {
    CMV_MAXNTID_cmv_beam_gemm90ra_nogaps_b1 = THREADS;
    CMV_MAXNTID_cmv_beam_gemm90ra_nogaps_b2 = THREADS;
    CMV_MAXNTID_cmv_beam_gemm90ra_nogaps_b3 = THREADS;
    CMV_MAXNTID_cmv_beam_gemm90ra_nogaps_b4 = THREADS;
    CMV_MAXNTID_cmv_beam_gemm90ra_nogaps_b5 = THREADS;
    CMV_MAXNTID_cmv_beam_gemm90ra_nogaps_b6 = THREADS;
    CMV_MAXNTID_cmv_beam_gemm90ra_nogaps_b7 = THREADS;
    CMV_MAXNTID_cmv_beam_gemm90ra_nogaps_b8 = THREADS;
}

// The single-vector direct GEMVs with programmatic dependent launch (`beam_kernels::direct_kernel`):
// same names and parameters as in the `sm_80` module. Not 24 bits: there ptxas put 8 bytes on
// the stack (the other widths: none), so 24 bits keeps the ordinary launch.
beam_kernels::direct_entry_points! {
    true;
    cmv_beam_gemv_direct_b4 / CMV_MAXNTID_cmv_beam_gemv_direct_b4 = 4, 1;
    cmv_beam_gemv_direct_b6 / CMV_MAXNTID_cmv_beam_gemv_direct_b6 = 6, 1;
    cmv_beam_gemv_direct_b8 / CMV_MAXNTID_cmv_beam_gemv_direct_b8 = 8, 1;
    cmv_beam_gemv_direct_b12 / CMV_MAXNTID_cmv_beam_gemv_direct_b12 = 12, 1;
    cmv_beam_gemv_direct_b16 / CMV_MAXNTID_cmv_beam_gemv_direct_b16 = 16, 1;
    cmv_beam_gemv_direct_b32 / CMV_MAXNTID_cmv_beam_gemv_direct_b32 = 32, 1;
}
