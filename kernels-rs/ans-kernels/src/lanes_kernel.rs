//! `cmv_ans_lanes`, the `ans-lanes` kernel (NVPTX only); the design is in [`crate::lanes`].

use cmv_device::{
    U32x4, ballot, block_dim_x, block_idx_x, cp_async_16_zfill, cp_async_commit, cp_async_wait,
    dp4a, dyn_smem_addr, lane_id, ld_nc_u8, ld_nc_u32, ld_nc_v4, lds_u32, lds_v2, lop3, prmt,
    requantize, sts_u32, sts_v2, sync_threads, sync_warp, thread_idx_x, warp_id,
};

use crate::kernels::raise;
use crate::lanes::{
    CHUNK_BYTES, LANE_COLS, LanesParams, RING_BYTES, SLOTS, STATE_BYTES, TABLE_BYTES, TABLE_COPIES,
};
use crate::{ERR_FINAL_STATE, ERR_STREAM_OVERRUN};

/// A warp's view of its unit's stream: the ring in shared memory and the global bytes behind
/// it.
struct Ring {
    /// Shared-window address of the warp's ring.
    ring: u32,
    /// The unit's first 16-byte word in global memory.
    base: *const U32x4,
    /// 16-byte words of the unit.
    words16: u32,
    /// Stream bytes copied (or zero-filled) into the ring so far; a multiple of
    /// [`CHUNK_BYTES`].
    fill: u32,
}

impl Ring {
    /// Copies the next [`CHUNK_BYTES`] of the stream (zeros past the unit's end) into the ring
    /// as one commit group.
    ///
    /// # Safety
    /// All lanes call it together; nothing reads the ring bytes it overwrites (stream bytes
    /// `fill - RING_BYTES .. fill - RING_BYTES + CHUNK_BYTES`) from now on.
    #[inline(always)]
    unsafe fn issue(&mut self, lane: u32) {
        let i = self.fill / 16 + lane;
        let (src, n) = if i < self.words16 {
            // SAFETY: i < words16: inside the unit.
            (unsafe { self.base.add(i as usize) }, 16)
        } else {
            (self.base, 0)
        };
        let dst = self.ring + ((self.fill + 16 * lane) & (RING_BYTES - 1));
        // SAFETY: dst is 16 bytes of this warp's ring; src holds n readable bytes.
        unsafe {
            cp_async_16_zfill(dst, src, n);
            cp_async_commit();
        }
        self.fill += CHUNK_BYTES;
    }
}

/// Decodes one pair from lane state `x` (lane `l` reads table copy `l % 16`: `tl = 8 * (l %
/// 16)`), refills the lanes that need it in lane order from the warp's ring (`rw`: its offset
/// in the shared block) at stream byte `pos`, and returns the two values in bytes 0 and 1.
///
/// The table addresses are offsets in the kernel's static shared block ORed from disjoint bit
/// fields (slot bits 7..15, copy bits 3..7), so each costs a shift and a `LOP3`; the block's
/// address is added in the load's operand.
///
/// # Safety
/// All lanes call it together; the ring holds stream bytes `pos .. pos + 64`.
#[inline(always)]
unsafe fn pair(x: &mut u32, pos: &mut u32, base: u32, tl: u32, rw: u32, lt: u32) -> u32 {
    // (a & b) | c: the slot's bits and the copy's are disjoint.
    let a0 = lop3::<0xEA>(*x << 7, 0x7f80, tl);
    let a1 = lop3::<0xEA>(*x >> 1, 0x7f80, tl);
    // SAFETY: slots below 256: inside the table copy.
    let (e0, e1) = unsafe { (lds_v2(base + a0), lds_v2(base + a1)) };
    let mut nx = crate::lanes::pair_state(*x, e0, e1);
    // SAFETY: converged warp; the ring address is inside the warp's ring.
    unsafe { refill(&mut nx, pos, base + rw, lt) };
    *x = nx;
    prmt(e0[1], e1[1], 0x0051)
}

/// The refill after a pair, in one PTX block so that one predicate serves the ballot and the
/// update: the lanes whose state `nx` is below `2^16` take, in lane order, the 16-bit words at
/// stream bytes `pos, pos + 2, ..` from the warp's ring at shared address `ring` (every lane
/// loads; the others drop the word), and `pos` moves past them.
///
/// # Safety
/// All lanes call it together; `ring` is the shared address of a ring of [`RING_BYTES`] bytes
/// holding stream bytes `pos .. pos + 64`.
#[inline(always)]
unsafe fn refill(nx: &mut u32, pos: &mut u32, ring: u32, lt: u32) {
    // SAFETY: the address is ring + (byte & 0x7fe): inside the ring.
    unsafe {
        core::arch::asm!(
            "{{",
            ".reg .pred p;",
            ".reg .b32 b, t, w;",
            "setp.lt.u32 p, {nx}, 65536;",
            "vote.sync.ballot.b32 b, p, -1;",
            "and.b32 t, b, {lt};",
            "popc.b32 t, t;",
            "mad.lo.u32 t, t, 2, {pos};",
            "and.b32 t, t, 2046;",
            "add.u32 t, t, {ring};",
            "ld.shared.u16 w, [t];",
            "@p prmt.b32 {nx}, w, {nx}, 0x5410;",
            "popc.b32 b, b;",
            "mad.lo.u32 {pos}, b, 2, {pos};",
            "}}",
            nx = inout(reg32) *nx,
            pos = inout(reg32) *pos,
            ring = in(reg32) ring,
            lt = in(reg32) lt,
            options(nostack, readonly),
        );
    }
}

/// `cmv_ans_lanes`: `y32 = W x`, `y8 = requantize(y32, scale)` for an `ans-lanes` matrix.
///
/// # Safety
/// Launched by `ans-codec` on a validated matrix: one block per group of 32 padded rows, a
/// whole number of warps (at most [`crate::lanes::MAX_WARPS`]), `shared_bytes(warps)` bytes
/// of dynamic shared memory; `offsets` hold `rows_padded / 32 * nseg + 1` increasing
/// multiples of 4 words, at least 32 apart, the last the stream's length; `table` 512 words;
/// `x` `cols` bytes, 16-byte aligned; `y32`, `y8` `rows` values each.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn cmv_ans_lanes(p: LanesParams) {
    let smem = dyn_smem_addr();
    let (tid, threads) = (thread_idx_x(), block_dim_x());
    let (lane, warp, warps) = (lane_id(), warp_id(), block_dim_x() / 32);
    // The table, TABLE_COPIES copies of each entry side by side.
    let table = p.table.as_ptr();
    let mut i = tid;
    while i < SLOTS * TABLE_COPIES {
        let e = i / TABLE_COPIES;
        // SAFETY: e < 256 entries of two words; the store is inside the table's bytes.
        unsafe {
            let (w0, w1) = (
                ld_nc_u32(table.add(2 * e as usize)),
                ld_nc_u32(table.add(2 * e as usize + 1)),
            );
            sts_v2(smem + 8 * i, w0, w1);
        }
        i += threads;
    }
    // SAFETY: every thread reaches it.
    unsafe { sync_threads() };

    let tl = 8 * (lane % TABLE_COPIES);
    let rw = TABLE_BYTES + warp * RING_BYTES;
    let ring_addr = smem + rw;
    // The partial sums reuse the table's bytes once every warp is done with it.
    let sums = smem;
    let lt = (1u32 << lane) - 1;
    let group = block_idx_x();
    let (stream, offsets) = (p.stream.as_ptr(), p.offsets.as_ptr());
    let x8 = p.x.as_ptr();
    let mut acc = 0i32;
    let mut flags = 0u32;
    let mut seg = warp;
    while seg < p.nseg {
        let u = (group * p.nseg + seg) as usize;
        // SAFETY: u + 1 <= units: offsets hold units + 1 words.
        let (o0, o1) = unsafe { (ld_nc_u32(offsets.add(u)), ld_nc_u32(offsets.add(u + 1))) };
        let mut r = Ring {
            ring: ring_addr,
            // SAFETY: o0 is a multiple of 4 words inside the stream.
            base: unsafe { stream.add(o0 as usize / 4) },
            words16: (o1 - o0) / 4,
            fill: 0,
        };
        // SAFETY: converged warp; the ring is unused (the previous unit's reads are done:
        // the warp synchronised at its end).
        unsafe {
            r.issue(lane);
            r.issue(lane);
            r.issue(lane);
            cp_async_wait::<0>();
            sync_warp();
        }
        // SAFETY: the first 128 bytes (the states) are in the ring.
        let w = unsafe { lds_u32(ring_addr + 4 * lane) };
        let mut x = prmt(w, 0, 0x1032);
        let mut pos = STATE_BYTES;
        let c0 = seg * p.segment;
        let c1 = (c0 + p.segment).min(p.padded_cols);
        let mut c = c0;
        while c < c1 {
            if r.fill.wrapping_sub(pos) <= RING_BYTES - CHUNK_BYTES {
                // SAFETY: converged warp; stream bytes below `pos` are read (synchronised
                // by the warp barrier), and `fill - RING_BYTES + CHUNK_BYTES <= pos`.
                unsafe {
                    sync_warp();
                    r.issue(lane);
                    cp_async_wait::<1>();
                    sync_warp();
                }
            }
            let xin = if c as usize + LANE_COLS <= p.cols as usize {
                // SAFETY: 16 bytes of x at a 16-byte-aligned column.
                unsafe { ld_nc_v4(x8.add(c as usize).cast::<U32x4>()) }
            } else {
                let mut v = [0u32; 4];
                for (k, vk) in v.iter_mut().enumerate() {
                    for b in 0..4 {
                        let col = c as usize + 4 * k + b;
                        if col < p.cols as usize {
                            // SAFETY: col < cols.
                            *vk |= u32::from(unsafe { ld_nc_u8(x8.add(col)) }) << (8 * b);
                        }
                    }
                }
                U32x4(v)
            };
            for q in 0..4 {
                // SAFETY: converged warp; the ring holds at least 512 bytes from `pos`
                // (one refill of at most 64 bytes per pair, 8 pairs per iteration).
                let (pa, pb) = unsafe {
                    let pa = pair(&mut x, &mut pos, smem, tl, rw, lt);
                    let pb = pair(&mut x, &mut pos, smem, tl, rw, lt);
                    (pa, pb)
                };
                acc = dp4a(prmt(pa, pb, 0x5410), xin.0[q], acc);
            }
            c += LANE_COLS as u32;
        }
        // SAFETY: converged warp.
        let bad = unsafe { ballot(x != crate::coder32::STATE32_LOWER) } != 0;
        if bad {
            flags |= ERR_FINAL_STATE;
        }
        if pos > 16 * r.words16 {
            flags |= ERR_STREAM_OVERRUN;
        }
        // SAFETY: converged warp: once the last copy has landed and every lane is past its
        // reads, the ring is free for the next unit.
        unsafe {
            cp_async_wait::<0>();
            sync_warp();
        }
        seg += warps;
    }
    // SAFETY: inside the sums (warps x 32 words, in the table's bytes, which no warp reads
    // after the first barrier).
    unsafe {
        sync_threads();
        sts_u32(sums + 4 * (32 * warp + lane), acc as u32);
        sync_threads();
    }
    if warp == 0 {
        let mut total = 0i32;
        for w in 0..warps {
            // SAFETY: inside the sums.
            total = total.wrapping_add(unsafe { lds_u32(sums + 4 * (32 * w + lane)) } as i32);
        }
        let row = 32 * group + lane;
        if row < p.rows {
            // SAFETY: row < rows outputs.
            unsafe {
                *p.y32.as_mut_ptr().add(row as usize) = total;
                *p.y8.as_mut_ptr().add(row as usize) = requantize(total, p.scale);
            }
        }
    }
    if lane == 0 && flags != 0 {
        // SAFETY: err holds one word.
        unsafe { raise(p.err.as_mut_ptr(), flags) };
    }
}
