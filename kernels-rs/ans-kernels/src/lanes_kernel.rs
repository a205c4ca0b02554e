//! `cmv_ans_lanes`, the `ans-lanes` kernel (NVPTX only); the design is in [`crate::lanes`].

use cmv_device::{
    U32x4, ballot, block_dim_x, block_idx_x, cp_async_8_zfill, cp_async_16_zfill, cp_async_commit,
    cp_async_wait, dp4a, dyn_smem_addr, griddepcontrol_launch_dependents, griddepcontrol_wait,
    lane_id, ld_nc_u8, ld_nc_u32, ld_nc_v4, ld_u8, ld_v4, lds_u32, lds_v2, prmt,
    red_shared_add_u32, redux_add_u32, requantize, sts_u32, sts_v2, sync_threads, sync_warp,
    thread_idx_x, warp_id,
};

use crate::kernels::raise;
use crate::lanes::{
    CHUNK_BYTES, CHUNK2_BYTES, EXC_CHECK_OFFSET, EXC_HEADER_BYTES, EXC_SUM_BYTES, LANE_COLS,
    LanesParams, MAX_EXCEPTIONS, RING_BYTES, RING2_BYTES, SLOT_STRIDE, SLOTS, STATE_BYTES,
    TABLE_BYTES, TABLE_COPIES, WIDE_ENTRIES, exception_mix, narrow_entry, parse_exception,
    parse_exception_header,
};
use crate::{ERR_EXCEPTIONS, ERR_FINAL_STATE, ERR_STREAM_OVERRUN};

/// A unit's stream ring in shared memory and the global bytes behind it: `SIZE` bytes (a power
/// of two, the ring aligned to it), filled `32 PER_LANE` bytes at a time (`PER_LANE` = 8 or 16
/// bytes per lane, zeros past the unit's end, so a damaged stream is never read past its unit).
/// [`Ring`] is `cmv_ans_lanes`' (1 KiB, 8-byte copies), [`Ring2`] `cmv_ans_lanes2`'s (2 KiB,
/// 16-byte copies).
#[derive(Clone, Copy)]
struct StreamRing<const SIZE: u32, const PER_LANE: u32> {
    /// Shared-window address of the ring (aligned to its size).
    ring: u32,
    /// The unit's first 16-byte word in global memory.
    base: *const U32x4,
    /// 16-byte words of the unit.
    words16: u32,
    /// Stream bytes copied (or zero-filled) into the ring so far.
    fill: u32,
}

/// `cmv_ans_lanes`' ring: [`RING_BYTES`], [`CHUNK_BYTES`] a copy.
type Ring = StreamRing<RING_BYTES, { CHUNK_BYTES / 32 }>;
/// `cmv_ans_lanes2`'s ring: [`RING2_BYTES`], [`CHUNK2_BYTES`] a copy.
type Ring2 = StreamRing<RING2_BYTES, { CHUNK2_BYTES / 32 }>;

impl<const SIZE: u32, const PER_LANE: u32> StreamRing<SIZE, PER_LANE> {
    /// The ring of unit `u` at shared address `ring`, nothing copied yet.
    ///
    /// # Safety
    /// `u + 1 <= units`: the offsets hold `units + 1` validated words.
    #[inline(always)]
    unsafe fn open(p: &LanesParams, u: u32, ring: u32) -> Self {
        let (stream, offsets) = (p.stream.as_ptr(), p.offsets.as_ptr());
        // SAFETY: u + 1 <= units.
        let (o0, o1) = unsafe {
            (
                ld_nc_u32(offsets.add(u as usize)),
                ld_nc_u32(offsets.add(u as usize + 1)),
            )
        };
        Self {
            ring,
            // SAFETY: o0 is a multiple of 4 words inside the stream.
            base: unsafe { stream.add(o0 as usize / 4) },
            words16: (o1 - o0) / 4,
            fill: 0,
        }
    }

    /// A ring with no unit behind it (nothing is ever copied: the unit is empty).
    #[inline(always)]
    fn idle(p: &LanesParams, ring: u32) -> Self {
        Self {
            ring,
            base: p.stream.as_ptr(),
            words16: 0,
            fill: 0,
        }
    }

    /// Copies the next `32 PER_LANE` bytes of the stream (zeros past the unit's end) into the
    /// ring as one commit group.
    ///
    /// # Safety
    /// All lanes call it together; nothing reads the ring bytes it overwrites (stream bytes
    /// `fill - SIZE .. fill - SIZE + 32 PER_LANE`) from now on.
    #[inline(always)]
    unsafe fn issue(&mut self, lane: u32) {
        let i = self.fill / PER_LANE + lane;
        let inside = i < self.words16 * (16 / PER_LANE);
        let n = if inside { PER_LANE } else { 0 };
        let dst = self.ring + ((self.fill + PER_LANE * lane) & (SIZE - 1));
        // SAFETY: dst is PER_LANE bytes of this ring; the source holds n readable bytes (the
        // unit's i-th piece, or nothing read at its start).
        unsafe {
            if PER_LANE == 16 {
                let src = if inside {
                    self.base.add(i as usize)
                } else {
                    self.base
                };
                cp_async_16_zfill(dst, src, n);
            } else {
                let base = self.base.cast::<u64>();
                let src = if inside { base.add(i as usize) } else { base };
                cp_async_8_zfill(dst, src, n);
            }
            cp_async_commit();
        }
        self.fill += 32 * PER_LANE;
    }

    /// Whether the ring takes a copy at a check with the decoder at stream byte `pos`: when
    /// at most `SIZE - 32 PER_LANE` bytes lie ahead (so no unread byte is overwritten).
    #[inline(always)]
    fn wants(&self, pos: u32) -> bool {
        self.fill.wrapping_sub(pos) <= SIZE - 32 * PER_LANE
    }
}

const _: () = assert!(CHUNK_BYTES == 32 * 8 && CHUNK2_BYTES == 32 * 16);

/// Decodes one pair from lane state `x`: lane `l`'s entry of slot `s` is at shared offset
/// `256 s + tl` (`tl = 4 l`, or `8 l` with [`WIDE_ENTRIES`]), so one byte permute makes each
/// address. Then refills the lanes
/// that need it in lane order from the warp's ring (shared address `ring`, aligned to its
/// size) at stream byte `pos`, and returns the two values in bytes 0 and 1.
///
/// # Safety
/// All lanes call it together; the ring holds stream bytes `pos .. pos + 64`.
#[inline(always)]
unsafe fn pair(x: &mut u32, pos: &mut u32, table: u32, tl: u32, ring: u32, lt: u32) -> u32 {
    // SAFETY: as this function's.
    unsafe { pair_in::<{ RING_BYTES - 2 }>(x, pos, table, tl, ring, lt) }
}

/// [`pair`] with a ring of `MASK + 2` bytes (`MASK` the mask of an even byte offset in it).
///
/// # Safety
/// As [`pair`], the ring `MASK + 2` bytes, aligned to its size.
#[inline(always)]
unsafe fn pair_in<const MASK: u32>(
    x: &mut u32,
    pos: &mut u32,
    table: u32,
    tl: u32,
    ring: u32,
    lt: u32,
) -> u32 {
    // Bytes: tl, the slot, 0, 0 (bytes 1..4 of tl are zero).
    let a0 = prmt(*x, tl, 0x5504);
    let a1 = prmt(*x, tl, 0x5514);
    let (w0, w1, mut nx);
    if WIDE_ENTRIES {
        // SAFETY: offsets below 64 KiB: inside the table.
        let (e0, e1) = unsafe { (lds_v2(table + a0), lds_v2(table + a1)) };
        (w0, w1) = (e0[1], e1[1]);
        nx = crate::lanes::pair_state_from_high(high_half(*x), e0, e1);
    } else {
        // SAFETY: offsets below 64 KiB: inside the table.
        let (e0, e1) = unsafe { (lds_u32(table + a0), lds_u32(table + a1)) };
        (w0, w1) = (e0, e1);
        nx = crate::lanes::pair_state(*x, e0, e1);
    }
    // SAFETY: converged warp; the ring address is inside the warp's ring.
    unsafe { refill::<MASK>(&mut nx, pos, ring, lt) };
    *x = nx;
    prmt(w0, w1, 0x0051)
}

/// `x >> 16` as a multiply-high (`mul.hi.u32 x, 65536`): on the multiply pipe, not the logic
/// pipe a shift would take.
#[inline(always)]
fn high_half(x: u32) -> u32 {
    let r: u32;
    // SAFETY: a pure register instruction.
    unsafe {
        core::arch::asm!("mul.hi.u32 {r}, {x}, 65536;", r = out(reg32) r, x = in(reg32) x,
                         options(pure, nomem, nostack));
    }
    r
}

/// The refill after a pair, in one PTX block so that one predicate serves the ballot and the
/// update: the lanes whose state `nx` is below `2^16` take, in lane order, the 16-bit words at
/// stream bytes `pos, pos + 2, ..` from the warp's ring at shared address `ring` (every lane
/// loads; the others drop the word), and `pos` moves past them.
///
/// # Safety
/// All lanes call it together; `ring` is the shared address of a ring of [`RING_BYTES`] bytes,
/// aligned to its size,
/// holding stream bytes `pos .. pos + 64` (`MASK + 2` bytes for [`pair_in`]'s rings).
#[inline(always)]
unsafe fn refill<const MASK: u32>(nx: &mut u32, pos: &mut u32, ring: u32, lt: u32) {
    // The rank and the new state by multiplies (`lt` is `lanes::rank_multiplier(lane)`): the
    // kernel's logic pipe is its busiest (ncu), the multiply pipe has room.
    // SAFETY: the address is ring | (byte & 0x3fe): inside the ring (aligned to its size).
    unsafe {
        core::arch::asm!(
            "{{",
            ".reg .pred p;",
            ".reg .b32 b, t, w;",
            "setp.lt.u32 p, {nx}, 65536;",
            "vote.sync.ballot.b32 b, p, -1;",
            "mul.lo.u32 t, b, {lt};",
            "popc.b32 t, t;",
            "mad.lo.u32 t, t, 2, {pos};",
            "and.b32 t, t, {mask};",
            "or.b32 t, t, {ring};",
            "ld.shared.u16 w, [t];",
            "@p mad.lo.u32 {nx}, {nx}, 65536, w;",
            "popc.b32 b, b;",
            "mad.lo.u32 {pos}, b, 2, {pos};",
            "}}",
            nx = inout(reg32) *nx,
            pos = inout(reg32) *pos,
            ring = in(reg32) ring,
            lt = in(reg32) lt,
            mask = const MASK,
            options(nostack, readonly),
        );
    }
}

/// Copies the table into shared memory at `smem`: copy `c` of slot `s` at `256 s + 4 c`
/// (narrow) or `256 s + 8 c` (wide). The caller synchronises the block after it.
///
/// # Safety
/// `p.table` holds 256 two-word entries; `smem` is the block's dynamic shared memory, at least
/// [`TABLE_BYTES`]; thread `tid` of `threads`.
#[inline(always)]
unsafe fn build_table(p: &LanesParams, smem: u32, tid: u32, threads: u32) {
    // Eight copies per thread in flight: their loads first, then their stores.
    const BATCH: u32 = 8;
    let table = p.table.as_ptr();
    let n = SLOTS * TABLE_COPIES;
    let mut i = tid;
    while i < n {
        let mut w = [[0u32; 2]; BATCH as usize];
        for (k, wk) in w.iter_mut().enumerate() {
            let j = i + k as u32 * threads;
            if j < n {
                let e = (j / TABLE_COPIES) as usize;
                // SAFETY: e < 256 entries of two words.
                *wk = unsafe { [ld_nc_u32(table.add(2 * e)), ld_nc_u32(table.add(2 * e + 1))] };
            }
        }
        for (k, wk) in w.iter().enumerate() {
            let j = i + k as u32 * threads;
            if j < n {
                let (e, c) = (j / TABLE_COPIES, j % TABLE_COPIES);
                // SAFETY: the stores are inside the table's bytes.
                unsafe {
                    if WIDE_ENTRIES {
                        sts_v2(smem + SLOT_STRIDE * e + 8 * c, wk[0], wk[1]);
                    } else {
                        sts_u32(smem + SLOT_STRIDE * e + 4 * c, narrow_entry(*wk));
                    }
                }
            }
        }
        i += BATCH * threads;
    }
}

/// Input byte `col` of `x8`, by a coherent load with `COHERENT` ([`load_input`]).
///
/// # Safety
/// `col` is below the input's length.
#[inline(always)]
unsafe fn input_byte<const COHERENT: bool>(x8: *const u8, col: usize) -> u8 {
    // SAFETY: as this function's.
    unsafe {
        if COHERENT {
            ld_u8(x8.add(col))
        } else {
            ld_nc_u8(x8.add(col))
        }
    }
}

/// The 16 input bytes of columns `c .. c + 16` (zeros past `cols`); with `COHERENT`, by
/// coherent loads (the programmatically launched kernels: the grid before may have written
/// `x` while this one already ran, up to its `griddepcontrol.wait`).
///
/// # Safety
/// `x8` holds `cols` bytes, 16-byte aligned; `c` is a multiple of 16.
#[inline(always)]
unsafe fn load_input<const WIDE: bool, const COHERENT: bool>(
    x8: *const u8,
    c: u32,
    cols: u32,
) -> U32x4 {
    // c + 16 <= padded columns, which fit u32 (`WIDE`: compared as usize, as
    // `cmv_ans_lanes` always did: its register allocation is tight).
    let full = if WIDE {
        c as usize + LANE_COLS <= cols as usize
    } else {
        c + LANE_COLS as u32 <= cols
    };
    if full {
        let p = x8.wrapping_add(c as usize).cast::<U32x4>();
        // SAFETY: 16 bytes of x at a 16-byte-aligned column.
        unsafe { if COHERENT { ld_v4(p) } else { ld_nc_v4(p) } }
    } else {
        let mut v = [0u32; 4];
        for (k, vk) in v.iter_mut().enumerate() {
            for b in 0..4 {
                let col = c as usize + 4 * k + b;
                if col < cols as usize {
                    // SAFETY: col < cols.
                    *vk |= u32::from(unsafe { input_byte::<COHERENT>(x8, col) }) << (8 * b);
                }
            }
        }
        U32x4(v)
    }
}

/// An `ans-lanes-esc` unit's exception list, read from its ring (`ring`, holding the unit's
/// first three chunks: at most `MAX_LEAD_BYTES` before the data): lane `i` takes entries `i`
/// and `i + 32` and adds `(value - escape) x[col]` to the row's word of the warp's exception
/// sums `exc`; lane 0 stores the list's check (`lanes::exception_check`) at
/// `exc + EXC_CHECK_OFFSET`. Anything out of place (a damaged unit the load kept) is flagged
/// in `flags`, never read past. Returns the bytes of header and list.
///
/// # Safety
/// All lanes call it together; `exc` is the warp's exception area; the unit covers the padded
/// columns `c0 .. c1`.
#[inline(always)]
unsafe fn unit_exceptions<const COHERENT: bool>(
    p: &LanesParams,
    ring: u32,
    exc: u32,
    c0: u32,
    c1: u32,
    lane: u32,
    flags: &mut u32,
) -> u32 {
    let x8 = p.x.as_ptr();
    // SAFETY: the header word is in the ring (landed).
    let h = unsafe { lds_u32(ring + STATE_BYTES) };
    let (n, escape) = match parse_exception_header(h) {
        Some((n, e)) if n <= MAX_EXCEPTIONS => (n, e),
        _ => {
            *flags |= ERR_EXCEPTIONS;
            (0, 0)
        }
    };
    // The list's check, which lane 0's final state must carry: every word's mix, summed over
    // the warp.
    let mut part = if lane == 0 { exception_mix(h) } else { 0 };
    let mut i = lane;
    while i < n {
        // SAFETY: entry i < MAX_EXCEPTIONS lies in the first three chunks.
        let e = unsafe { lds_u32(ring + STATE_BYTES + EXC_HEADER_BYTES + 4 * i) };
        part = part.wrapping_add(exception_mix(e));
        let (row_lane, dc, value) = parse_exception(e);
        let col = c0 + dc;
        if dc < c1 - c0 && col < p.cols {
            // SAFETY: col < cols; the sums word of lane row_lane < 32.
            unsafe {
                let xv = i32::from(input_byte::<COHERENT>(x8, col as usize) as i8);
                let d = i32::from(value) - i32::from(escape);
                red_shared_add_u32(exc + 4 * row_lane, d.wrapping_mul(xv) as u32);
            }
        } else {
            *flags |= ERR_EXCEPTIONS;
        }
        i += 32;
    }
    // SAFETY: every lane reaches them (converged after the loop); the check word is in the
    // warp's area, read after the unit's decode (warp barriers between).
    unsafe {
        sync_warp();
        let check = redux_add_u32(part) & 0xffff;
        if lane == 0 {
            sts_u32(exc + EXC_CHECK_OFFSET, check);
        }
    }
    EXC_HEADER_BYTES + 4 * n
}

/// `cmv_ans_lanes`: `y32 = W x`, `y8 = requantize(y32, scale)` for an `ans-lanes` matrix.
///
/// # Safety
/// Launched by `ans-codec` on a validated matrix: one block per group of 32 padded rows, a
/// whole number of warps (at most [`crate::lanes::MAX_WARPS`]), `shared_bytes(warps)` bytes
/// of dynamic shared memory; `offsets` hold `rows_padded / 32 * nseg + 1` increasing
/// multiples of 4 words, at least 32 apart, the last the stream's length; `table` 512 words;
/// `x` `cols` bytes, 16-byte aligned; `y32`, `y8` `rows` values each.
#[inline(always)]
pub unsafe fn lanes<const PDL: bool>(p: LanesParams) {
    if PDL {
        // SAFETY: device code for sm_90a (the PDL kernels' module).
        unsafe { griddepcontrol_launch_dependents() };
    }
    let smem = dyn_smem_addr();
    let (lane, warp, warps) = (lane_id(), warp_id(), block_dim_x() / 32);
    // SAFETY: the block's dynamic shared memory holds the table.
    unsafe { build_table(&p, smem, thread_idx_x(), block_dim_x()) };
    // SAFETY: every thread reaches it.
    unsafe { sync_threads() };
    if PDL {
        // The input and the outputs are the grid before's (its output, its input or its
        // outputs): nothing touches them before this.
        // SAFETY: device code for sm_90a.
        unsafe { griddepcontrol_wait() };
    }

    let tl = if WIDE_ENTRIES { 8 * lane } else { 4 * lane };
    // The rings start at the first multiple of their size after the table.
    let rings = (smem + TABLE_BYTES + RING_BYTES - 1) & !(RING_BYTES - 1);
    let ring_addr = rings + warp * RING_BYTES;
    // The warp's exception sums (`ans-lanes-esc`), after the rings.
    let exc_sums = rings + warps * RING_BYTES + warp * EXC_SUM_BYTES;
    if p.exceptions != 0 {
        // SAFETY: inside the warp's sums (shared_bytes counts them); the unit loop's warp
        // barriers order these stores before the first atomic add.
        unsafe { sts_u32(exc_sums + 4 * lane, 0) };
    }
    // The partial sums reuse the table's bytes once every warp is done with it.
    let sums = smem;
    let lt = crate::lanes::rank_multiplier(lane);
    let group = block_idx_x();
    let x8 = p.x.as_ptr();
    let mut acc = 0i32;
    let mut flags = 0u32;
    let mut seg = warp;
    while seg < p.nseg {
        // SAFETY: the unit exists (group < groups, seg < nseg).
        let mut r = unsafe { Ring::open(&p, group * p.nseg + seg, ring_addr) };
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
        if p.exceptions != 0 {
            // SAFETY: converged warp; the ring holds the unit's first three chunks.
            pos += unsafe {
                unit_exceptions::<PDL>(&p, ring_addr, exc_sums, c0, c1, lane, &mut flags)
            };
        }
        let mut c = c0;
        while c < c1 {
            // SAFETY: x holds cols bytes, 16-byte aligned.
            let xin = unsafe { load_input::<true, PDL>(x8, c, p.cols) };
            for q in 0..4 {
                if q % 2 == 0 && r.wants(pos) {
                    // SAFETY: converged warp; stream bytes below `pos` are read (synchronised
                    // by the warp barrier), and `fill - RING_BYTES + CHUNK_BYTES <= pos`
                    // (the schedule is checked in `crate::lanes`).
                    unsafe {
                        sync_warp();
                        r.issue(lane);
                        cp_async_wait::<1>();
                        sync_warp();
                    }
                }
                // SAFETY: converged warp; the ring holds at least CHECK_BYTES from `pos`
                // at the check (one refill of at most 64 bytes per pair, 4 pairs a check).
                let (pa, pb) = unsafe {
                    let pa = pair(&mut x, &mut pos, smem, tl, ring_addr, lt);
                    let pb = pair(&mut x, &mut pos, smem, tl, ring_addr, lt);
                    (pa, pb)
                };
                acc = dp4a(prmt(pa, pb, 0x5410), xin.0[q], acc);
            }
            c += LANE_COLS as u32;
        }
        // Where the coders started: 2^16, and for lane 0 of an `ans-lanes-esc` unit 2^16 plus
        // its exception check.
        let mut expect = crate::coder32::STATE32_LOWER;
        if p.exceptions != 0 && lane == 0 {
            // SAFETY: stored by lane 0 before the unit's decode.
            expect += unsafe { lds_u32(exc_sums + EXC_CHECK_OFFSET) };
        }
        // SAFETY: converged warp.
        let bad = unsafe { ballot(x != expect) } != 0;
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
    if p.exceptions != 0 {
        // SAFETY: converged warp (its atomic adds are ordered before by the barrier); inside
        // the warp's sums.
        unsafe {
            sync_warp();
            acc = acc.wrapping_add(lds_u32(exc_sums + 4 * lane) as i32);
        }
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
    // Exception flags are per lane: gather them for lane 0.
    // SAFETY: converged warp (the branch above is uniform per warp).
    if unsafe { ballot(flags & ERR_EXCEPTIONS != 0) } != 0 {
        flags |= ERR_EXCEPTIONS;
    }
    if lane == 0 && flags != 0 {
        // SAFETY: err holds one word.
        unsafe { raise(p.err.as_mut_ptr(), flags) };
    }
}

/// A unit's first steps once its first chunks landed: lane `lane`'s initial state and the
/// stream byte its data start at (after the exception list for `ans-lanes-esc`).
///
/// # Safety
/// All lanes call it together; the ring holds the unit's first three chunks; `exc` is the
/// unit's exception area.
#[inline(always)]
unsafe fn start_unit<const PDL: bool>(
    p: &LanesParams,
    ring: u32,
    exc: u32,
    c0: u32,
    c1: u32,
    lane: u32,
    flags: &mut u32,
) -> (u32, u32) {
    // SAFETY: the first 128 bytes (the states) are in the ring.
    let w = unsafe { lds_u32(ring + 4 * lane) };
    let mut pos = STATE_BYTES;
    if p.exceptions != 0 {
        // SAFETY: as this function's.
        pos += unsafe { unit_exceptions::<PDL>(p, ring, exc, c0, c1, lane, flags) };
    }
    (prmt(w, 0, 0x1032), pos)
}

/// A unit's end: every coder back in its initial state (lane 0 of an `ans-lanes-esc` unit
/// in `2^16` plus the list's check), the stream (`words16` 16-byte words) not overrun.
///
/// # Safety
/// All lanes call it together; `exc` is the unit's exception area.
#[inline(always)]
unsafe fn end_unit(p: &LanesParams, x: u32, pos: u32, words16: u32, exc: u32, lane: u32) -> u32 {
    let mut flags = 0;
    let mut expect = crate::coder32::STATE32_LOWER;
    if p.exceptions != 0 && lane == 0 {
        // SAFETY: stored by lane 0 before the unit's decode.
        expect += unsafe { lds_u32(exc + EXC_CHECK_OFFSET) };
    }
    // SAFETY: converged warp.
    if unsafe { ballot(x != expect) } != 0 {
        flags |= ERR_FINAL_STATE;
    }
    if pos > 16 * words16 {
        flags |= ERR_STREAM_OVERRUN;
    }
    flags
}

/// The decoding of `cmv_ans_lanes2`: the warp's segments of row groups `group` and (with
/// `TWO`) `group + 1`, two units decoded side by side (two independent chains per lane);
/// `first` are the rings of the first segment, their first chunks issued ([`open_units`]).
/// Returns the two rows' sums and the error flags.
///
/// # Safety
/// As `cmv_ans_lanes2`'s; all lanes call it together; the table is in shared memory.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn decode_units<const TWO: bool, const PDL: bool>(
    p: &LanesParams,
    smem: u32,
    lane: u32,
    warp: u32,
    warps: u32,
    group: u32,
    rings: [u32; 2],
    excs: [u32; 2],
    first: (Ring2, Ring2),
) -> (i32, i32, u32) {
    const MASK: u32 = RING2_BYTES - 2;
    let tl = 8 * lane;
    let lt = crate::lanes::rank_multiplier(lane);
    let x8 = p.x.as_ptr();
    let (mut acc_a, mut acc_b, mut flags) = (0i32, 0i32, 0u32);
    let mut seg = warp;
    let (mut ra, mut rb) = first;
    while seg < p.nseg {
        // SAFETY: converged warp; the rings' first chunks were issued (before the table was
        // built, for the first segment).
        unsafe {
            cp_async_wait::<0>();
            sync_warp();
        }
        let c0 = seg * p.segment;
        let c1 = (c0 + p.segment).min(p.padded_cols);
        // SAFETY: converged warp; the first three chunks landed.
        let (mut xa, mut pos_a) =
            unsafe { start_unit::<PDL>(p, ra.ring, excs[0], c0, c1, lane, &mut flags) };
        let (mut xb, mut pos_b) = if TWO {
            // SAFETY: as above.
            unsafe { start_unit::<PDL>(p, rb.ring, excs[1], c0, c1, lane, &mut flags) }
        } else {
            (0, 0)
        };
        let mut c = c0;
        while c < c1 {
            // SAFETY: x holds cols bytes, 16-byte aligned.
            let xin = unsafe { load_input::<false, PDL>(x8, c, p.cols) };
            // One check per iteration (at most CHECK2_BYTES read per unit until the next);
            // the schedule's conditions are asserted in `crate::lanes`.
            let ia = ra.wants(pos_a);
            let ib = TWO && rb.wants(pos_b);
            if ia || ib {
                // SAFETY: converged warp; stream bytes below each `pos` are read
                // (synchronised by the barrier) and a ring copies only when at most
                // `RING2_BYTES - CHUNK2_BYTES` lie ahead. Waiting for all but the copies just
                // issued leaves every older chunk of both rings landed.
                unsafe {
                    sync_warp();
                    if ia {
                        ra.issue(lane);
                    }
                    if ib {
                        rb.issue(lane);
                    }
                    if ia && ib {
                        cp_async_wait::<2>();
                    } else {
                        cp_async_wait::<1>();
                    }
                    sync_warp();
                }
            }
            for q in 0..4 {
                // SAFETY: converged warp; each ring holds at least CHECK2_BYTES from its
                // `pos` at the check.
                unsafe {
                    let a0 = pair_in::<MASK>(&mut xa, &mut pos_a, smem, tl, ra.ring, lt);
                    let b0 = if TWO {
                        pair_in::<MASK>(&mut xb, &mut pos_b, smem, tl, rb.ring, lt)
                    } else {
                        0
                    };
                    let a1 = pair_in::<MASK>(&mut xa, &mut pos_a, smem, tl, ra.ring, lt);
                    acc_a = dp4a(prmt(a0, a1, 0x5410), xin.0[q], acc_a);
                    if TWO {
                        let b1 = pair_in::<MASK>(&mut xb, &mut pos_b, smem, tl, rb.ring, lt);
                        acc_b = dp4a(prmt(b0, b1, 0x5410), xin.0[q], acc_b);
                    }
                }
            }
            c += LANE_COLS as u32;
        }
        // SAFETY: converged warp.
        unsafe {
            flags |= end_unit(p, xa, pos_a, ra.words16, excs[0], lane);
            if TWO {
                flags |= end_unit(p, xb, pos_b, rb.words16, excs[1], lane);
            }
        }
        // SAFETY: converged warp: once the last copies have landed and every lane is past its
        // reads, the rings are free for the next units.
        unsafe {
            cp_async_wait::<0>();
            sync_warp();
        }
        seg += warps;
        if seg < p.nseg {
            // SAFETY: converged warp; the rings are free; seg is a segment.
            (ra, rb) = unsafe { open_units::<TWO>(p, group, seg, rings, lane) };
        }
    }
    (acc_a, acc_b, flags)
}

/// Opens the units of segment `seg` of row groups `group` and (with `TWO`) `group + 1` in the
/// rings `rings` and issues their first three chunks (the caller waits for them).
///
/// # Safety
/// All lanes call it together; `seg < nseg`, and the groups exist; nothing reads the rings
/// until the copies land.
#[inline(always)]
unsafe fn open_units<const TWO: bool>(
    p: &LanesParams,
    group: u32,
    seg: u32,
    rings: [u32; 2],
    lane: u32,
) -> (Ring2, Ring2) {
    let ua = group * p.nseg + seg;
    // SAFETY: ua (and ua + nseg with TWO: the next group exists) is a unit.
    let mut ra = unsafe { Ring2::open(p, ua, rings[0]) };
    let mut rb = if TWO {
        // SAFETY: as above.
        unsafe { Ring2::open(p, ua + p.nseg, rings[1]) }
    } else {
        Ring2::idle(p, rings[1])
    };
    // SAFETY: converged warp; the rings are free.
    unsafe {
        for _ in 0..3 {
            ra.issue(lane);
            if TWO {
                rb.issue(lane);
            }
        }
    }
    (ra, rb)
}

/// `cmv_ans_lanes2`: as `cmv_ans_lanes`, with one block per *two* groups of 32 rows and each
/// warp decoding the two groups' units of its segments side by side (two independent chains
/// per lane), each unit through a [`RING2_BYTES`] ring checked once per 16 columns. One
/// block per SM (the table and 64 rings), as many chains per SM as `cmv_ans_lanes`' two
/// blocks, fewer ring checks.
///
/// # Safety
/// As `cmv_ans_lanes`, with `rows_padded / 64` blocks rounded up (the last one may hold one
/// group) and [`shared_bytes2`](crate::lanes::shared_bytes2)`(warps)` bytes of dynamic shared memory.
#[inline(always)]
pub unsafe fn lanes2<const PDL: bool>(p: LanesParams) {
    if PDL {
        // SAFETY: device code for sm_90a (the PDL kernels' module).
        unsafe { griddepcontrol_launch_dependents() };
    }
    let smem = dyn_smem_addr();
    let (lane, warp, warps) = (lane_id(), warp_id(), block_dim_x() / 32);
    let rings = (smem + TABLE_BYTES + RING2_BYTES - 1) & !(RING2_BYTES - 1);
    let ring_a = rings + 2 * warp * RING2_BYTES;
    let groups = p.rows.div_ceil(32);
    let group = 2 * block_idx_x();
    let two = group + 1 < groups;
    let ring_pair = [ring_a, ring_a + RING2_BYTES];
    // The first units' streams start coming while the table is built (the rings lie past it).
    // (Loading each warp's part of the table first, one 8-byte word per lane, and copying it
    // before or after these copies ran 2-4% slower on an H200: docs/PERF.md.)
    let first = if warp >= p.nseg {
        (Ring2::idle(&p, ring_pair[0]), Ring2::idle(&p, ring_pair[1]))
    } else if two {
        // SAFETY: converged warp; the rings are unused; warp < nseg.
        unsafe { open_units::<true>(&p, group, warp, ring_pair, lane) }
    } else {
        // SAFETY: as above.
        unsafe { open_units::<false>(&p, group, warp, ring_pair, lane) }
    };
    // SAFETY: the block's dynamic shared memory holds the table.
    unsafe { build_table(&p, smem, thread_idx_x(), block_dim_x()) };
    // SAFETY: every thread reaches it.
    unsafe { sync_threads() };
    if PDL {
        // The input and the outputs are the grid before's (its output, its input or its
        // outputs): nothing touches them before this; the table, offsets and streams are
        // the matrix's, which no kernel writes.
        // SAFETY: device code for sm_90a.
        unsafe { griddepcontrol_wait() };
    }
    let exc_a = rings + 2 * warps * RING2_BYTES + 2 * warp * EXC_SUM_BYTES;
    let excs = [exc_a, exc_a + EXC_SUM_BYTES];
    if p.exceptions != 0 {
        // SAFETY: inside the warp's two exception areas (shared_bytes2 counts them); the
        // unit loop's warp barriers order these stores before the first atomic add.
        unsafe {
            sts_u32(excs[0] + 4 * lane, 0);
            sts_u32(excs[1] + 4 * lane, 0);
        }
    }
    // SAFETY: converged warp; the table is in place.
    let (mut acc_a, mut acc_b, mut flags) = unsafe {
        if two {
            decode_units::<true, PDL>(&p, smem, lane, warp, warps, group, ring_pair, excs, first)
        } else {
            decode_units::<false, PDL>(&p, smem, lane, warp, warps, group, ring_pair, excs, first)
        }
    };
    if p.exceptions != 0 {
        // SAFETY: converged warp (its atomic adds are ordered before by the barrier); inside
        // the warp's areas.
        unsafe {
            sync_warp();
            acc_a = acc_a.wrapping_add(lds_u32(excs[0] + 4 * lane) as i32);
            acc_b = acc_b.wrapping_add(lds_u32(excs[1] + 4 * lane) as i32);
        }
    }
    // The block's partial sums, 64 rows per warp, in the table's bytes (no warp reads the
    // table after the first barrier).
    let sums = smem;
    // SAFETY: inside the sums (warps x 64 words).
    unsafe {
        sync_threads();
        sts_u32(sums + 4 * (64 * warp + lane), acc_a as u32);
        sts_u32(sums + 4 * (64 * warp + 32 + lane), acc_b as u32);
        sync_threads();
    }
    // Warp h (h = 0, 1; warp 0 for both in a one-warp block) writes group + h.
    let mut h = warp;
    while h < 2 {
        let mut total = 0i32;
        for w in 0..warps {
            // SAFETY: inside the sums.
            total =
                total.wrapping_add(unsafe { lds_u32(sums + 4 * (64 * w + 32 * h + lane)) } as i32);
        }
        let row = 32 * (group + h) + lane;
        if row < p.rows {
            // SAFETY: row < rows outputs.
            unsafe {
                *p.y32.as_mut_ptr().add(row as usize) = total;
                *p.y8.as_mut_ptr().add(row as usize) = requantize(total, p.scale);
            }
        }
        h += warps;
    }
    // SAFETY: converged warp.
    if unsafe { ballot(flags & ERR_EXCEPTIONS != 0) } != 0 {
        flags |= ERR_EXCEPTIONS;
    }
    if lane == 0 && flags != 0 {
        // SAFETY: err holds one word.
        unsafe { raise(p.err.as_mut_ptr(), flags) };
    }
}

/// Defines the entry points `cmv_ans_lanes` ([`lanes`]) and `cmv_ans_lanes2` ([`lanes2`]),
/// with programmatic dependent launch when `$pdl` is `true` (`ans-kernels-sm90`; `false` here,
/// with the `entries` feature), and their launch bounds.
#[macro_export]
macro_rules! lanes_entry_points {
    ($pdl:literal) => {
        /// `cmv_ans_lanes`: `y32 = W x`, `y8 = requantize(y32, scale)` for an `ans-lanes`
        /// matrix, one row group per block (`ans_kernels::lanes_kernel::lanes`).
        ///
        /// # Safety
        /// As `lanes`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn cmv_ans_lanes(p: $crate::lanes::LanesParams) {
            // SAFETY: the launcher's checks are this kernel's contract.
            unsafe { $crate::lanes_kernel::lanes::<$pdl>(p) }
        }

        /// `cmv_ans_lanes2`: as `cmv_ans_lanes`, two row groups per block
        /// (`ans_kernels::lanes_kernel::lanes2`).
        ///
        /// # Safety
        /// As `lanes2`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn cmv_ans_lanes2(p: $crate::lanes::LanesParams) {
            // SAFETY: the launcher's checks are this kernel's contract.
            unsafe { $crate::lanes_kernel::lanes2::<$pdl>(p) }
        }

        // Launch bounds (`cargo xtask ptx` turns these into `.maxntid` / `.minnctapersm`):
        // `cmv_ans_lanes2` runs blocks of up to `MAX_WARPS` warps, one per SM (its shared
        // memory allows no more), so it may take up to 64 registers but no more.
        // (`cmv_ans_lanes` keeps its state and exception steps inline: through `start_unit` /
        // `end_unit` ptxas gave it 40 registers, and with a bound of 32, spills.)
        cmv_device::launch_bounds! {
            CMV_MAXNTID_cmv_ans_lanes2 = 32 * $crate::lanes::MAX_WARPS;
            CMV_MINNCTAPERSM_cmv_ans_lanes2 = 1;
        }
    };
}

#[cfg(feature = "entries")]
crate::lanes_entry_points!(false);
