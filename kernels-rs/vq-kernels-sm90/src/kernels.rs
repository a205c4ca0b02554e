// The Hopper VQ-GEMM (see `vq_kernels::gemm90`), NVPTX for sm_90a only.

use core::arch::asm;

use cmv_device::{
    U32x4, block_idx_x, block_idx_y, block_idx_z, cp_async_16_zfill, cp_async_commit,
    cp_async_wait_at_most, dyn_smem_addr, f32_to_f16, fence_proxy_async_shared, ld_relaxed_u32,
    lds_v4, red_add_f32_global, sync_threads, thread_idx_x, wgmma_commit_group, wgmma_fence,
};
use vq_kernels::dev::{copy_codes, count_in, frag_regs, load_entry, write_entry};
use vq_kernels::gemm::{GEMM_ROWS, GEMM_TOKENS, VqGemmParams, code_stage_offset};
use vq_kernels::gemm90::{
    GEMM90_THREADS, Segment, b_descriptor, code90_stage_base, code90_stages, gemm90_smem_bytes,
    padded_cols, prefetch, segment_at, stream_units, x90_chunk_offset, x90_stage_base, x90_stages,
};
use vq_kernels::mma::{SLAB_COLS, STEPS, lookup_offset};
use vq_kernels::unroll;

/// `D += A B` for the warpgroup's 64 x 128 tile and one K step of 16
/// (`wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16`): A (this warp's 16 rows) from the
/// registers `a` in the `mma.m16n8k16` A layout, B (16 x 128, K-major) from shared memory by
/// descriptor `desc`; fp32 sums in `acc` (n8 chunk `j`: `acc[4j..4j+2]` row `g`, columns `8j +
/// 2t, +1`; `acc[4j+2..4j+4]` row `g + 8`). Asynchronous: `acc` and `a` must not be touched
/// until [`wgmma_wait`] covers it.
///
/// # Safety
/// All threads of the warpgroup run it together, after [`wgmma_fence`]; `desc` describes 16 x
/// 128 fp16 values of shared memory that nothing writes until the wait.
#[inline(always)]
unsafe fn wgmma_m64n128k16(acc: &mut [f32; 64], a: [u32; 4], desc: u64) {
    // SAFETY: warpgroup-collective; the caller guarantees the operands.
    unsafe {
        cmv_device::wgmma_acc_asm64!(acc, 0;
            concat!(
                "{{ .reg .pred p; setp.ne.b32 p, {sd}, 0; ",
                "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{",
                cmv_device::wgmma_acc_regs64!(),
                "}}, {{{a0}, {a1}, {a2}, {a3}}}, {desc}, p, 1, 1, 0; }}"
            );
            a0 = in(reg32) a[0],
            a1 = in(reg32) a[1],
            a2 = in(reg32) a[2],
            a3 = in(reg32) a[3],
            desc = in(reg64) desc,
            sd = in(reg32) 1u32,
            options(nostack)
        );
    }
}

/// `wgmma.wait_group.sync.aligned N` (`N` = 0 or 1): waits until at most `N` of the
/// warpgroup's `wgmma` groups are in flight. `acc` and the A registers `a` of the groups it
/// covers are operands, so the compiler keeps them (and does not read the sums) until here.
///
/// # Safety
/// All threads of the warpgroup run it together.
#[inline(always)]
unsafe fn wgmma_wait<const N: u32>(acc: &mut [f32; 64], a: &[u32; 4]) {
    // SAFETY: warpgroup-collective; the operands only pin registers.
    unsafe {
        cmv_device::wgmma_acc_asm64!(acc, 0;
            concat!(
                "wgmma.wait_group.sync.aligned {n}; // ",
                cmv_device::wgmma_acc_regs64!(),
                " {a0} {a1} {a2} {a3}"
            );
            n = const N,
            a0 = in(reg32) a[0],
            a1 = in(reg32) a[1],
            a2 = in(reg32) a[2],
            a3 = in(reg32) a[3],
            options(nostack)
        );
    }
}

/// Part `part` (0..4) of the copies of slab `slab` into input stage `stage` and code stage
/// `cstage`: a quarter of
/// its inputs (the block's 128 tokens of the permuted inputs `p.x`, 16-byte chunks that are
/// core-matrix rows, `x90_chunk_offset`); the codes with part 0. No commit. Issued in parts
/// between the `wgmma`s of the current slab.
///
/// # Safety
/// The launcher's contract; `slab < slabs`; parts 0..4 in order; nothing reads the two stages
/// until the group these copies join has been waited for and a barrier passed.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn copy_slab<const V: usize>(
    p: &VqGemmParams,
    base: u32,
    (stage, cstage): (u32, u32),
    rb: u32,
    tb: u32,
    slab: u32,
    tid: u32,
    part: u32,
) {
    // The permuted inputs (`xp`, rows of padded_cols(cols) values): 128 tokens x 16 chunks of
    // 16 bytes, one chunk per thread and part.
    let stride = padded_cols(p.cols) as usize;
    let c = part * GEMM90_THREADS + tid;
    let (tok, j) = (c / 16, c % 16);
    let n = tb * GEMM_TOKENS + tok;
    let col = slab as usize * SLAB_COLS + 8 * j as usize;
    let inside = n < p.tokens && col < stride;
    let at = if inside { n as usize * stride + col } else { 0 };
    // SAFETY: inside: token n < tokens, 8 values col .. col + 8 <= stride of xp (16-byte
    // aligned); outside: nothing is read. The destination is inside input stage `stage`.
    unsafe {
        cp_async_16_zfill(
            base + x90_stage_base(stage) + x90_chunk_offset(tok, j),
            p.x.as_ptr().add(at) as *const U32x4,
            if inside { 16 } else { 0 },
        )
    };
    // SAFETY: the launcher's contract; code stage `cstage` is ours.
    unsafe {
        if part == 0 {
            copy_codes::<V, GEMM90_THREADS>(p, base + code90_stage_base(V, cstage), rb, slab, tid);
        }
    }
}

/// The A registers of K step `s` (rows `g`, `g + 8` of the warp's row group, looked up in the
/// table at `lo` from the lane's codes `w`): `a0` row `g`, K slots `2t, 2t+1`; `a1` row
/// `g + 8`; `a2`, `a3` K slots `2t+8, 2t+9`.
///
/// # Safety
/// The table holds the slab's codebook; `lo` is the lane's copy offset in it.
#[inline(always)]
unsafe fn a_regs<const V: usize>(w: &[u32; 8], s: usize, lo: u32, base: u32) -> [u32; 4] {
    let mut unused = [0u32; 4];
    // SAFETY: the caller's table (V is 2 or 4: no 16-byte entries to keep).
    let e = unsafe {
        [
            frag_regs::<V>(w, s, 0, lo, base, &mut unused),
            frag_regs::<V>(w, s, 1, lo, base, &mut unused),
        ]
    };
    [e[0][0], e[1][0], e[0][1], e[1][1]]
}

/// One slab's `wgmma`s, reading the table and code stage of parity `P` and the input stage at
/// `xs`: per K step one `m64n128k16`, the next step's A registers looked up while it runs,
/// then a wait for the step before (two in flight). `prev` holds the A registers of the
/// warpgroup's last step still in flight (the previous slab's last) and is left holding this
/// slab's last: the next slab's first wait covers it.
///
/// # Safety
/// The stages and table hold the slab (after the barrier and the proxy fence); the whole
/// block runs it (each warpgroup its own part); nothing writes the input stage at `xs` until
/// this slab's last `wgmma` has been waited for.
#[inline(always)]
unsafe fn compute<const V: usize, const P: u32>(
    base: u32,
    (xs, cs): (u32, u32),
    acc: &mut [f32; 64],
    prev: &mut [u32; 4],
    warp: u32,
    lane: u32,
    mut between: impl FnMut(u32),
) {
    let lo = lookup_offset(V, lane) + 128 * P;
    let at = cs + code_stage_offset(V, warp, lane);
    // SAFETY: the lane's codes of its row group, inside the slab's code stage.
    let w: [u32; 8] = unsafe {
        match V {
            2 => {
                let (a, b) = (lds_v4(at).0, lds_v4(at + 16).0);
                [a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]]
            }
            _ => {
                let a = lds_v4(at).0;
                [a[0], a[1], a[2], a[3], 0, 0, 0, 0]
            }
        }
    };
    // SAFETY: the table of parity P (the caller's contract).
    let mut a = unsafe { a_regs::<V>(&w, 0, lo, base) };
    const _: () = assert!(STEPS == 8);
    unroll!(s in [0 1 2 3 4 5 6 7], {
        // SAFETY: the whole warpgroup runs this (block-uniform control flow); B is the input
        // stage at xs (the caller's contract).
        unsafe {
            wgmma_fence();
            wgmma_m64n128k16(acc, a, b_descriptor(xs, s as u32));
            wgmma_commit_group();
        }
        let next = if s + 1 < STEPS {
            // SAFETY: as above.
            unsafe { a_regs::<V>(&w, (s + 1) % STEPS, lo, base) }
        } else {
            a
        };
        // SAFETY: as above. The step before is done after this: its A registers are free.
        unsafe { wgmma_wait::<1>(acc, prev) };
        *prev = a;
        a = next;
        if s < 4 {
            between(s as u32);
        }
    });
}

/// Slab `j` of the block's `start..end` (tables of parity `P = (j - start) % 2`, input and
/// code stages `(j - start)` modulo their counts): waits for its copies, writes its table when
/// its tile differs from the one held, passes the barrier and the proxy fence that makes the
/// copied inputs visible to `wgmma`, then multiplies, issuing the copies of slab
/// `j + prefetch(V)` between its first `wgmma`s.
///
/// # Safety
/// The launcher's contract; every thread of the block runs it with the same `j`; this
/// thread's last `prefetch(V)` commit groups are those of slabs `j ..`, and `entry` holds its
/// table's entry
/// `tid` when `tiles[P] != held[P]` (threads 0..256); `prev` as in `compute`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn slab<const V: usize, const P: u32>(
    p: &VqGemmParams,
    base: u32,
    rb: u32,
    tb: u32,
    (start, end): (u32, u32),
    j: u32,
    tiles: &mut [u32; 2],
    held: &mut [u32; 2],
    entry: &mut [u32; 4],
    acc: &mut [f32; 64],
    prev: &mut [u32; 4],
    tid: u32,
) {
    let slot = P as usize;
    let d = prefetch(V);
    // SAFETY: this thread's groups in flight are those of slabs j .. j + d (one per slab,
    // empty past the end): slab j's is done after this.
    unsafe {
        cp_async_wait_at_most(d - 1);
        fence_proxy_async_shared();
    }
    if tiles[slot] != held[slot] {
        if tid < 256 {
            // SAFETY: table P was last read in slab j - 2, before the previous barrier.
            unsafe { write_entry::<V, P>(base, *entry, tid) };
        }
        held[slot] = tiles[slot];
    }
    // SAFETY: every thread of the block reaches it.
    unsafe { sync_threads() };
    let next = j + 1 < end;
    let ahead = j + d;
    let stages = (
        (ahead - start) % x90_stages(V),
        (ahead - start) % code90_stages(V),
    );
    // The copies of slab j + d, in four parts between the first wgmmas of this one, and their
    // commit (an empty group past the end, so that every slab has one).
    let issue = |part: u32| {
        // SAFETY: slab j + d's input stage was last read by slab j - 2, and its code stage by
        // slab j - 1 (synchronously, before the barrier): every warpgroup waited for slab
        // j - 2's last wgmma in slab j - 1's first step, before the barrier; parts come in
        // order.
        unsafe {
            if ahead < end {
                copy_slab::<V>(p, base, stages, rb, tb, ahead, tid, part);
            }
            if part == 3 {
                cp_async_commit();
            }
        }
    };
    if next {
        let other = 1 - slot;
        tiles[other] = p.tile(rb, j + 1);
        if tiles[other] != held[other] && tid < 256 {
            // SAFETY: a tile of the matrix; tid < 256.
            *entry = unsafe { load_entry::<V>(p.codebooks, tiles[other], tid) };
        }
    }
    let xs = base + x90_stage_base((j - start) % x90_stages(V));
    let cs = base + code90_stage_base(V, (j - start) % code90_stages(V));
    // SAFETY: the slab's stages and table are written (barrier above); its input stage is
    // next written during slab j + 2, after the barrier that follows this slab's last wait.
    unsafe { compute::<V, P>(base, (xs, cs), acc, prev, tid / 32, tid % 32, issue) };
}

/// The Hopper VQ-GEMM (see `vq_kernels::gemm90`): a block per tile (and split), or with
/// `p.stream > 0` the block's stream-K segments (`vq_kernels::gemm90::stream_segments`) one
/// after another.
///
/// # Safety
/// As `vq_kernels::gemm`'s kernel (the same parameters and checks), with `V` 2 or 4,
/// `GEMM90_THREADS` threads per block, `gemm90_smem_bytes(V)` bytes of dynamic shared memory,
/// on an sm_90 GPU, and grid `(ceil(rows / 256), ceil(tokens / 128), splits)` where
/// `p.stream == 0`, `(p.stream, 1, 1)` otherwise (with `splits == 1`). With `splits > 1` or
/// `p.stream > 0`, `acc` holds `tokens * rows` zeros and `counters` `row_blocks *
/// token_blocks` zeros; `tiles * slabs < 2^32`.
#[inline(always)]
unsafe fn vq_gemm90<const V: usize>(p: &VqGemmParams) {
    if p.stream == 0 {
        let (start, end) = p.slab_range(block_idx_z());
        if start < end {
            let seg = Segment {
                rb: block_idx_x(),
                tb: block_idx_y(),
                start,
                end,
            };
            // SAFETY: the launcher's contract; the whole block runs it.
            unsafe { segment::<V>(p, seg) };
        }
        return;
    }
    // The block's share of the units; each segment re-derived from `u` and the parameters
    // (uniform values, so that the bookkeeping takes no registers from the decode loop).
    let b = block_idx_x();
    let (mut u, u1) = stream_units(p, b);
    while u < u1 {
        let seg = segment_at(p, u, u1);
        if u != stream_units(p, b).0 {
            // SAFETY: every thread of the block reaches it (the segments are the block's):
            // every warpgroup has waited for its last wgmma of the segment before, so no
            // thread reads a stage or table the next segment's copies and entries overwrite.
            unsafe { sync_threads() };
        }
        // SAFETY: the launcher's contract; the whole block runs it.
        unsafe { segment::<V>(p, seg) };
        u += seg.end - seg.start;
    }
}

/// Slabs `seg.start..seg.end` of tile `(seg.rb, seg.tb)`: stored as fp16 where the segment is
/// the whole tile, else added to `acc` and counted in (the block that completes the tile's
/// slabs converts it).
///
/// # Safety
/// `vq_gemm90`'s contract; the whole block runs it with the same `seg`, after a barrier that
/// follows any earlier segment; `seg.start < seg.end <= slabs`, the tile inside the grid;
/// where the segment is not the whole tile, `acc` and `counters` as for a split.
#[inline(always)]
unsafe fn segment<const V: usize>(p: &VqGemmParams, seg: Segment) {
    let tid = thread_idx_x();
    let (rb, tb, start, end) = (seg.rb, seg.tb, seg.start, seg.end);
    let base = dyn_smem_addr();
    let mut acc = [0f32; 64];
    let mut tiles = [p.tile(rb, start), u32::MAX];
    let mut held = [u32::MAX; 2];
    let mut entry = [0u32; 4];
    let mut prev = [0u32; 4];
    // SAFETY: slab start < slabs; its table's entry.
    unsafe {
        // The first prefetch(V) slabs' copies, one group each (empty past the end).
        for k in 0..prefetch(V) {
            if start + k < end {
                for part in 0..4 {
                    copy_slab::<V>(p, base, (k, k), rb, tb, start + k, tid, part);
                }
            }
            cp_async_commit();
        }
        if tid < 256 {
            entry = load_entry::<V>(p.codebooks, tiles[0], tid);
        }
    }
    let mut j = start;
    loop {
        // SAFETY: the launcher's contract; block-uniform; slab j's copies are the last group.
        unsafe {
            slab::<V, 0>(
                p,
                base,
                rb,
                tb,
                (start, end),
                j,
                &mut tiles,
                &mut held,
                &mut entry,
                &mut acc,
                &mut prev,
                tid,
            )
        };
        j += 1;
        if j == end {
            break;
        }
        // SAFETY: as above.
        unsafe {
            slab::<V, 1>(
                p,
                base,
                rb,
                tb,
                (start, end),
                j,
                &mut tiles,
                &mut held,
                &mut entry,
                &mut acc,
                &mut prev,
                tid,
            )
        };
        j += 1;
        if j == end {
            break;
        }
    }
    // SAFETY: the whole warpgroup; every wgmma is done after this.
    unsafe { wgmma_wait::<0>(&mut acc, &prev) };
    // acc[4j], acc[4j+1]: row g, tokens 8j + 2t, +1; acc[4j+2], acc[4j+3]: row g + 8.
    let (warp, lane) = (tid / 32, tid % 32);
    let (g, t) = (lane / 4, lane % 4);
    let rows = p.rows as usize;
    let part = !seg.whole(p.slabs);
    unroll!(j < 16, {
        unroll!(q in [0 1 2 3], {
            let n = tb * GEMM_TOKENS + 8 * j as u32 + 2 * t + q as u32 % 2;
            let row = rb * GEMM_ROWS + 16 * warp + g + 8 * (q as u32 / 2);
            if n < p.tokens && row < p.rows {
                let at = n as usize * rows + row as usize;
                // SAFETY: n < tokens, row < rows: inside y, and inside acc for a part.
                unsafe {
                    if part {
                        red_add_f32_global(p.acc.as_mut_ptr().add(at), acc[4 * j + q]);
                    } else {
                        *p.y.as_mut_ptr().add(at) = f32_to_f16(acc[4 * j + q]);
                    }
                }
            }
        });
    });
    if part {
        // SAFETY: every thread of the block calls it; the flag word follows the code stages.
        unsafe { finish_split(p, seg, base + gemm90_smem_bytes(V) - 16, tid) };
    }
}

/// The end of a part of a tile (a split, or a stream-K segment short of the whole tile):
/// counts its slabs into the tile's counter, and when that completes the tile's slabs
/// converts the tile's fp32 sums to fp16 and zeroes them and the counter for the next launch
/// (as the tensor-core GEMV's row blocks end).
///
/// # Safety
/// The launcher's contract with `acc` and `counters`; every thread of the block calls it
/// after adding its sums of `seg`; `flag` is 4 bytes of shared memory no one else uses.
#[inline(always)]
unsafe fn finish_split(p: &VqGemmParams, seg: Segment, flag: u32, tid: u32) {
    let (rb, tb) = (seg.rb, seg.tb);
    let tile = (tb * p.row_blocks() + rb) as usize;
    let count = seg.end - seg.start;
    // SAFETY: every thread calls this; the tile's counter; the flag word is ours.
    if !unsafe { count_in(p.counters.as_mut_ptr().add(tile), count, p.slabs, flag, tid) } {
        return;
    }
    let rows = p.rows as usize;
    // 128 tokens x 256 rows, consecutive threads on consecutive rows; eight loads before the
    // stores (one L2 round trip per eight).
    const TOTAL: u32 = GEMM_TOKENS * GEMM_ROWS;
    let mut first = 0;
    while first < TOTAL {
        let mut v = [0u32; 8];
        let at = |k: usize| {
            let i = first + k as u32 * GEMM90_THREADS + tid;
            let (n, row) = (
                tb * GEMM_TOKENS + i / GEMM_ROWS,
                rb * GEMM_ROWS + i % GEMM_ROWS,
            );
            (n < p.tokens && row < p.rows).then_some(n as usize * rows + row as usize)
        };
        for (k, v) in v.iter_mut().enumerate() {
            if let Some(a) = at(k) {
                // SAFETY: inside acc; every split's sums have arrived (the count).
                *v = unsafe { ld_relaxed_u32(p.acc.as_mut_ptr().add(a) as _) };
            }
        }
        for (k, v) in v.iter().enumerate() {
            if let Some(a) = at(k) {
                // SAFETY: inside acc and y; no block touches this tile again in this launch.
                unsafe {
                    *p.y.as_mut_ptr().add(a) = f32_to_f16(f32::from_bits(*v));
                    *p.acc.as_mut_ptr().add(a) = 0.0;
                }
            }
        }
        first += 8 * GEMM90_THREADS;
    }
    if tid == 0 {
        // SAFETY: the tile's counter; all its splits have counted in.
        unsafe { *p.counters.as_mut_ptr().add(tile) = 0 };
    }
}

macro_rules! gemm90_entries {
    ($($name:ident = $v:literal;)*) => {$(
        /// The Hopper VQ-GEMM for this vector size; see `vq_kernels::gemm90`.
        ///
        /// # Safety
        /// As `vq_gemm90`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: VqGemmParams) {
            // SAFETY: the launcher's checks are this kernel's contract.
            unsafe { vq_gemm90::<$v>(&p) }
        }
    )*};
}

gemm90_entries! {
    cmv_vq_gemm90_v2 = 2;
    cmv_vq_gemm90_v4 = 4;
}

// 512 threads (4 warpgroups), one block per SM: at most 128 registers.
cmv_device::launch_bounds! {
    CMV_MAXNTID = GEMM90_THREADS;
    CMV_MINNCTAPERSM = 1;
}
