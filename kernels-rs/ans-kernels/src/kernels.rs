//! The fused decode + GEMV kernels (NVPTX only); the format is `docs/ANS.md`.
//!
//! Every kernel is persistent: a block loads the input vector (and, for the shared-memory
//! path, the lookup table) into shared memory once, then its warps loop over rows (or
//! stripes) with a grid stride. A warp keeps two 128-word blocks of its stream in registers
//! (the one being consumed and [`AHEAD`] more, loaded ahead), so every global read is one coalesced
//! 16-byte load per lane.

use cmv_device::{
    U32x4, ballot, block_dim_x, block_idx_x, dp4a, dyn_smem, grid_dim_x, lane_id, ld_nc_na_v4,
    ld_nc_u8, ld_nc_u32, popc, prmt, requantize, shfl_idx, sync_threads, thread_idx_x, warp_id,
    warp_sum_i32,
};

use core::arch::asm;

use crate::coder::{Slot, decode_group, needs_refill, refill};
use crate::layout::{BLOCK_WORDS, LANES, STATE_LOWER};

use crate::{AnsParams, ERR_FINAL_STATE, ERR_STREAM_OVERRUN};

/// ORs `flags` into the error word at `err`, in inline PTX: `ld.global`, `or`, `st.global`
/// (not atomic, as before: racing warps only ever set bits, so the word is non-zero once a
/// flag was raised).
///
/// `err` comes from the kernel's parameter struct as two 32-bit words. Rebuilt once at the
/// kernel's start, the 64-bit address would stay in a register pair across the decode loops
/// (ptxas does not reload a rebuilt pair from the parameter bank as it does a 64-bit
/// parameter: `cmv_ans_stripes_*` took 2 more registers on sm_80); here it is put together
/// from the two words where the flags are written, on the rare error path, and the two words
/// are parameter values ptxas can reload there.
///
/// # Safety
/// `err` points to a writable, 4-byte-aligned word of global memory.
#[inline(always)]
pub(crate) unsafe fn raise(err: *mut u32, flags: u32) {
    let addr = err as u64;
    // SAFETY: the caller guarantees a valid, aligned global address.
    unsafe {
        asm!(
            "\t{{",
            "\t.reg .b64 a;",
            "\t.reg .b32 v;",
            "\tmov.b64 a, {{{lo}, {hi}}};",
            "\tld.global.u32 v, [a];",
            "\tor.b32 v, v, {flags};",
            "\tst.global.u32 [a], v;",
            "\t}}",
            lo = in(reg32) addr as u32,
            hi = in(reg32) (addr >> 32) as u32,
            flags = in(reg32) flags,
            options(nostack, preserves_flags),
        );
    }
}

/// Where table lookups go: three byte tables in registers (7-bit path) or packed entries in
/// shared memory.
#[derive(Clone, Copy)]
enum Tables {
    /// Word `lane` of the value, cdf and freq-minus-one byte tables.
    Registers([u32; 3]),
    /// Packed entries in shared memory.
    Shared(*const u32),
}

impl Tables {
    /// The table's entry for `slot`.
    ///
    /// # Safety
    /// All lanes of the warp call it together (the register path shuffles); for the shared
    /// path `slot` is below the table's size.
    #[inline(always)]
    unsafe fn lookup(self, slot: u32) -> Slot {
        match self {
            Tables::Registers(t) => {
                // Byte `slot % 4` of the word of lane `slot / 4`, zero-extended (byte 4 of
                // `b:a` is a zero byte of `b = 0`).
                let sel = (slot & 3) | 0x4440;
                // SAFETY: the caller guarantees a converged warp.
                let (v, c, f) = unsafe {
                    (
                        prmt(shfl_idx(t[0], slot >> 2), 0, sel),
                        prmt(shfl_idx(t[1], slot >> 2), 0, sel),
                        prmt(shfl_idx(t[2], slot >> 2), 0, sel),
                    )
                };
                Slot {
                    value: v as u8 as i8,
                    cdf: c,
                    freq: f + 1,
                }
            }
            // SAFETY: slot < 2^precision, the table's size.
            Tables::Shared(p) => Slot::from_packed(unsafe { *p.add(slot as usize) }),
        }
    }
}

/// Blocks of 128 words a warp loads ahead of the one it consumes (a block lasts about 8 steps
/// at 4 bits per element). Three blocks ahead measured no faster than one on an H200: the
/// kernels are bound by instruction issue, not by memory latency (docs/PERF.md), and every
/// block ahead costs registers and moves.
pub const AHEAD: usize = 1;

/// A warp's view of one row's (or stripe's) stream: a queue of logical words.
struct Queue {
    /// The stream's first 16-byte unit for this lane (`base / 4 + lane`).
    base: *const U32x4,
    /// 128-word blocks in the stream.
    blocks: u32,
    /// Index of the block in `cur`.
    blk: u32,
    /// Logical position of the next word inside `cur` (0..128).
    off: u32,
    cur: U32x4,
    /// The next [`AHEAD`] blocks (zeros past the end of the stream).
    ahead: [U32x4; AHEAD],
    /// Set when the decoder asked for words past the end of the stream.
    overrun: bool,
}

impl Queue {
    /// # Safety
    /// `stream` points to `blocks * 128` readable words (16-byte aligned); `blocks >= 1`.
    #[inline(always)]
    unsafe fn new(stream: *const U32x4, blocks: u32) -> Self {
        let lane = lane_id() as usize;
        // SAFETY: block 0 exists; block 1 only when blocks > 1.
        let base = unsafe { stream.add(lane) };
        let cur = unsafe { ld_nc_na_v4(base) };
        let ahead: [U32x4; AHEAD] = core::array::from_fn(|k| {
            if (k as u32 + 1) < blocks {
                // SAFETY: block k + 1 exists.
                unsafe { ld_nc_na_v4(base.add(32 * (k + 1))) }
            } else {
                U32x4([0; 4])
            }
        });
        Queue {
            base,
            blocks,
            blk: 0,
            off: 0,
            cur,
            ahead,
            overrun: false,
        }
    }

    /// Registers `w` and `w + 1` of `cur` (0..4), where register 4 is word 0 of the next
    /// block; `w < 4` is warp-uniform. Selects, not branches: this runs every step.
    #[inline(always)]
    fn windows(&self, w: u32) -> (u32, u32) {
        use core::hint::select_unpredictable as sel;
        let [c0, c1, c2, c3] = self.cur.0;
        let n0 = self.ahead[0].0[0];
        let (odd, high) = (w & 1 != 0, w & 2 != 0);
        let a = sel(high, sel(odd, c3, c2), sel(odd, c1, c0));
        let b = sel(high, sel(odd, n0, c3), sel(odd, c2, c1));
        (a, b)
    }

    /// The logical words at positions `off + rank` for the lanes that ask (`rank < 32`), then
    /// advances by `count`. All lanes call it together.
    ///
    /// # Safety
    /// A converged warp; `count <= 32`.
    #[inline(always)]
    unsafe fn take(&mut self, rank: u32, count: u32) -> u32 {
        let w0 = self.off >> 5;
        let pos = self.off + rank;
        let (wa, wb) = self.windows(w0);
        // SAFETY: converged warp (the caller's guarantee); source lanes are below 32.
        let (a, b) = unsafe { (shfl_idx(wa, pos & 31), shfl_idx(wb, pos & 31)) };
        let word = if pos >> 5 == w0 { a } else { b };
        // Words asked for past the end of the stream read as zeros (the registers beyond the
        // last block are zero) and mark the unit corrupted.
        let end = u64::from(self.blk) * BLOCK_WORDS as u64 + u64::from(self.off + count);
        if end > u64::from(self.blocks) * BLOCK_WORDS as u64 {
            self.overrun = true;
        }
        self.off += count;
        if self.off >= BLOCK_WORDS as u32 {
            self.off -= BLOCK_WORDS as u32;
            self.blk += 1;
            self.cur = self.ahead[0];
            for k in 0..AHEAD - 1 {
                self.ahead[k] = self.ahead[k + 1];
            }
            let load = self.blk + AHEAD as u32;
            self.ahead[AHEAD - 1] = if load < self.blocks {
                // SAFETY: block `load` exists.
                unsafe { ld_nc_na_v4(self.base.add(32 * load as usize)) }
            } else {
                U32x4([0; 4])
            };
        }
        word
    }

    /// Lane `lane`'s initial state: logical words `2 lane` (high half) and `2 lane + 1`.
    ///
    /// # Safety
    /// A converged warp, before any `take`.
    #[inline(always)]
    unsafe fn initial_state(&mut self) -> u64 {
        let lane = lane_id();
        let (p_hi, p_lo) = (2 * lane, 2 * lane + 1);
        // Words 0..64 are in registers 0 and 1 of `cur`.
        // SAFETY: converged warp.
        let (h0, h1, l0, l1) = unsafe {
            (
                shfl_idx(self.cur.0[0], p_hi & 31),
                shfl_idx(self.cur.0[1], p_hi & 31),
                shfl_idx(self.cur.0[0], p_lo & 31),
                shfl_idx(self.cur.0[1], p_lo & 31),
            )
        };
        let hi = if p_hi < 32 { h0 } else { h1 };
        let lo = if p_lo < 32 { l0 } else { l1 };
        self.off = 2 * LANES as u32;
        (u64::from(hi) << 32) | u64::from(lo)
    }
}

/// Decodes one group on every lane and refills the lanes that need it.
///
/// # Safety
/// A converged warp.
#[inline(always)]
unsafe fn step<const G: usize>(
    state: &mut u64,
    q: &mut Queue,
    tables: Tables,
    precision: u32,
) -> [i8; G] {
    // SAFETY: converged warp; slots are below 2^precision.
    let (vals, x) = decode_group::<G>(*state, precision, |s| unsafe { tables.lookup(s) });
    let need = needs_refill(x);
    // SAFETY: converged warp.
    let mask = unsafe { ballot(need) };
    let below = mask & ((1u32 << lane_id()) - 1);
    // SAFETY: converged warp; popc(mask) <= 32.
    let word = unsafe { q.take(popc(below), popc(mask)) };
    *state = if need { refill(x, word) } else { x };
    vals
}

/// Four int8 values as one `dp4a` operand (element 0 in the low byte).
#[inline(always)]
fn pack4(v: [i8; 4]) -> u32 {
    u32::from_le_bytes([v[0] as u8, v[1] as u8, v[2] as u8, v[3] as u8])
}

/// Decodes one quad (one step of 4, or two steps of 2).
///
/// # Safety
/// A converged warp.
#[inline(always)]
unsafe fn quad<const G: usize>(
    state: &mut u64,
    q: &mut Queue,
    tables: Tables,
    precision: u32,
) -> u32 {
    // SAFETY: forwarded.
    unsafe {
        if G == 4 {
            let v = step::<4>(state, q, tables, precision);
            pack4(v)
        } else {
            let a = step::<2>(state, q, tables, precision);
            let b = step::<2>(state, q, tables, precision);
            pack4([a[0], a[1], b[0], b[1]])
        }
    }
}

/// Copies the input vector (as words of 4 int8, zero past `cols`) into shared memory, and the
/// packed table when there is one; returns the words of the vector.
///
/// # Safety
/// Every thread of the block calls it (it ends with a barrier); the launch gave
/// `padded_cols + 4 * table_len` bytes of dynamic shared memory.
#[inline(always)]
unsafe fn stage(
    x: *const u8,
    cols: u32,
    padded_cols: u32,
    table: *const u32,
    table_len: u32,
) -> (*const u32, *const u32) {
    let smem = dyn_smem() as *mut u32;
    let xw = padded_cols / 4;
    let mut i = thread_idx_x();
    while i < xw {
        let mut b = [0u8; 4];
        for (k, bk) in b.iter_mut().enumerate() {
            let c = 4 * i + k as u32;
            if c < cols {
                // SAFETY: c < cols, inside the input.
                *bk = unsafe { ld_nc_u8(x.add(c as usize)) };
            }
        }
        // SAFETY: i < padded_cols / 4 words of shared memory.
        unsafe { *smem.add(i as usize) = u32::from_le_bytes(b) };
        i += block_dim_x();
    }
    let mut i = thread_idx_x();
    while i < table_len {
        // SAFETY: i < table_len entries, after the vector's words.
        unsafe { *smem.add((xw + i) as usize) = ld_nc_u32(table.add(i as usize)) };
        i += block_dim_x();
    }
    // SAFETY: every thread of the block reaches this barrier (the caller's guarantee).
    unsafe { sync_threads() };
    // SAFETY: both regions lie inside the dynamic shared memory.
    (smem as *const u32, unsafe { smem.add(xw as usize) }
        as *const u32)
}

/// The stream of unit `u`: its first 16-byte unit and its block count, if the offsets are
/// sane (checked on the host too).
///
/// # Safety
/// `offsets` holds `u + 2` words.
#[inline(always)]
unsafe fn unit_stream(
    stream: *const U32x4,
    offsets: *const u32,
    u: u32,
) -> Option<(*const U32x4, u32)> {
    // SAFETY: u + 1 < units + 1 offsets.
    let (a, b) = unsafe {
        (
            ld_nc_u32(offsets.add(u as usize)),
            ld_nc_u32(offsets.add(u as usize + 1)),
        )
    };
    let words = b.checked_sub(a)?;
    let blocks = words / BLOCK_WORDS as u32;
    if blocks == 0 || words % BLOCK_WORDS as u32 != 0 || a % 4 != 0 {
        return None;
    }
    // SAFETY: the host validated that every offset is inside the stream.
    Some((unsafe { stream.add((a / 4) as usize) }, blocks))
}

/// `ans-warp-rows`: a warp per row, lane `l` decoding the quads at `128 j + 4 l`.
///
/// # Safety
/// See [`cmv_ans_rows_p7`].
#[inline(always)]
unsafe fn rows_kernel<const G: usize>(a: Args, tables: Tables) {
    let Args {
        stream,
        offsets,
        xs,
        y32,
        y8,
        err,
        scale,
        rows,
        padded_cols,
        precision,
    } = a;
    let lane = lane_id();
    let warps = block_dim_x() / 32;
    let mut row = block_idx_x() * warps + warp_id();
    let stride = grid_dim_x() * warps;
    let chunks = padded_cols / 128;
    while row < rows {
        // SAFETY: row < rows, so offsets[row + 1] exists.
        let Some((s, blocks)) = (unsafe { unit_stream(stream, offsets, row) }) else {
            if lane == 0 {
                // SAFETY: err holds one word.
                unsafe { raise(err, ERR_STREAM_OVERRUN) };
            }
            row += stride;
            continue;
        };
        // SAFETY: the stream holds `blocks` blocks; the warp is converged here.
        let mut q = unsafe { Queue::new(s, blocks) };
        let mut state = unsafe { q.initial_state() };
        let mut acc = 0i32;
        for j in 0..chunks {
            // SAFETY: converged warp (the loop bound is uniform).
            let w = unsafe { quad::<G>(&mut state, &mut q, tables, precision) };
            // SAFETY: 32 j + lane < padded_cols / 4 words of the staged vector.
            let xv = unsafe { *xs.add((32 * j + lane) as usize) };
            acc = dp4a(w, xv, acc);
        }
        // SAFETY: converged warp.
        let sum = unsafe { warp_sum_i32(acc) };
        let bad = unsafe { ballot(state != STATE_LOWER) } != 0;
        if lane == 0 {
            // SAFETY: row < rows outputs; err holds one word.
            unsafe {
                *y32.add(row as usize) = sum;
                *y8.add(row as usize) = requantize(sum, scale);
                if q.overrun {
                    raise(err, ERR_STREAM_OVERRUN);
                }
                if bad {
                    raise(err, ERR_FINAL_STATE);
                }
            }
        }
        row += stride;
    }
}

/// `ans-warp-stripes`: a warp per stripe of 32 rows, lane `l` decoding row `32 t + l`.
///
/// # Safety
/// See [`cmv_ans_stripes_p7`].
#[inline(always)]
unsafe fn stripes_kernel<const G: usize>(a: Args, tables: Tables) {
    let Args {
        stream,
        offsets,
        xs,
        y32,
        y8,
        err,
        scale,
        rows,
        padded_cols,
        precision,
    } = a;
    let lane = lane_id();
    let warps = block_dim_x() / 32;
    let stripes = rows.div_ceil(32);
    let mut t = block_idx_x() * warps + warp_id();
    let stride = grid_dim_x() * warps;
    let quads = padded_cols / 4;
    while t < stripes {
        // SAFETY: t < stripes, so offsets[t + 1] exists.
        let Some((s, blocks)) = (unsafe { unit_stream(stream, offsets, t) }) else {
            if lane == 0 {
                // SAFETY: err holds one word.
                unsafe { raise(err, ERR_STREAM_OVERRUN) };
            }
            t += stride;
            continue;
        };
        // SAFETY: the stream holds `blocks` blocks; the warp is converged here.
        let mut q = unsafe { Queue::new(s, blocks) };
        let mut state = unsafe { q.initial_state() };
        let mut acc = 0i32;
        for j in 0..quads {
            // SAFETY: converged warp (the loop bound is uniform).
            let w = unsafe { quad::<G>(&mut state, &mut q, tables, precision) };
            // SAFETY: j < padded_cols / 4 words of the staged vector (a broadcast read).
            let xv = unsafe { *xs.add(j as usize) };
            acc = dp4a(w, xv, acc);
        }
        // SAFETY: converged warp.
        let bad = unsafe { ballot(state != STATE_LOWER) } != 0;
        let row = 32 * t + lane;
        if row < rows {
            // SAFETY: row < rows outputs.
            unsafe {
                *y32.add(row as usize) = acc;
                *y8.add(row as usize) = requantize(acc, scale);
            }
        }
        if lane == 0 && (q.overrun || bad) {
            let flag = if q.overrun { ERR_STREAM_OVERRUN } else { 0 }
                | if bad { ERR_FINAL_STATE } else { 0 };
            // SAFETY: err holds one word.
            unsafe { raise(err, flag) };
        }
        t += stride;
    }
}

/// What every kernel gets besides its tables (the launch's arguments, with the input vector
/// already staged in shared memory).
#[derive(Clone, Copy)]
struct Args {
    stream: *const U32x4,
    offsets: *const u32,
    xs: *const u32,
    y32: *mut i32,
    y8: *mut i8,
    err: *mut u32,
    scale: f32,
    rows: u32,
    padded_cols: u32,
    precision: u32,
}

/// Stages the input (and the packed table unless `REGISTER`), builds the tables and runs the
/// layout's kernel with the group size the precision needs.
///
/// # Safety
/// See [`cmv_ans_rows_p7`] and [`cmv_ans_rows_smem`]; `table` is the 3 x 32 register-table
/// words when `REGISTER` (precision 7), else `2^precision` packed entries.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn entry<const STRIPES: bool, const REGISTER: bool>(
    stream: *const U32x4,
    offsets: *const u32,
    table: *const u32,
    x: *const u8,
    y32: *mut i32,
    y8: *mut i8,
    err: *mut u32,
    scale: f32,
    rows: u32,
    cols: u32,
    padded_cols: u32,
    precision: u32,
) {
    let (tables, xs, precision) = if REGISTER {
        let lane = lane_id() as usize;
        // SAFETY: the register tables are 3 x 32 words.
        let t = unsafe {
            [
                ld_nc_u32(table.add(lane)),
                ld_nc_u32(table.add(32 + lane)),
                ld_nc_u32(table.add(64 + lane)),
            ]
        };
        // SAFETY: every thread stages; the launcher sized the shared memory.
        let (xs, _) = unsafe { stage(x, cols, padded_cols, table, 0) };
        (Tables::Registers(t), xs, 7)
    } else {
        // SAFETY: every thread stages; the launcher sized the shared memory.
        let (xs, ts) = unsafe { stage(x, cols, padded_cols, table, 1 << precision) };
        (Tables::Shared(ts), xs, precision)
    };
    let a = Args {
        stream,
        offsets,
        xs,
        y32,
        y8,
        err,
        scale,
        rows,
        padded_cols,
        precision,
    };
    // SAFETY: forwarded from the launcher's checks; the branches are uniform.
    unsafe {
        match (STRIPES, precision <= 8) {
            (false, true) => rows_kernel::<4>(a, tables),
            (false, false) => rows_kernel::<2>(a, tables),
            (true, true) => stripes_kernel::<4>(a, tables),
            (true, false) => stripes_kernel::<2>(a, tables),
        }
    }
}

macro_rules! ans_entries {
    ($($(#[$doc:meta])* $name:ident = $stripes:literal, $register:literal;)*) => {$(
        $(#[$doc])*
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: AnsParams) {
            let (stream, offsets, table, x) =
                (p.stream.as_ptr(), p.offsets.as_ptr(), p.table.as_ptr(), p.x.as_ptr());
            let (y32, y8, err) = (p.y32.as_mut_ptr(), p.y8.as_mut_ptr(), p.err.as_mut_ptr());
            let (scale, rows, cols, padded_cols, precision) =
                (p.scale, p.rows, p.cols, p.padded_cols, p.precision);
            // SAFETY: forwarded from the launcher's checks.
            unsafe {
                entry::<$stripes, $register>(
                    stream, offsets, table, x, y32, y8, err, scale, rows, cols, padded_cols,
                    precision,
                )
            }
        }
    )*};
}

// The entry points (the `entries` feature: `ans-kernels-sm90` defines only the lane kernels).
#[cfg(feature = "entries")]
ans_entries! {
    /// `ans-warp-rows` with the 7-bit model's tables in registers (`table`: 3 x 32 words,
    /// `layout::register_tables`; `precision` is ignored).
    ///
    /// # Safety
    /// Launched by `ans-codec`, which validated the matrix (offsets start at 0, increase, are
    /// multiples of 128 words and end at the stream's length, so the stream pointer plus an
    /// offset stays 16-byte aligned), sized the buffers (`x`: `cols` bytes, `y32`/`y8`:
    /// `rows`), launched whole warps, and gave `padded_cols` bytes of dynamic shared memory.
    cmv_ans_rows_p7 = false, true;
    /// `ans-warp-rows` with the packed table (`2^precision` entries) in shared memory, any
    /// precision from 7 to 12.
    ///
    /// # Safety
    /// As [`cmv_ans_rows_p7`], with `padded_cols + 4 * 2^precision` bytes of dynamic shared
    /// memory.
    cmv_ans_rows_smem = false, false;
    /// `ans-warp-stripes` with the 7-bit tables in registers.
    ///
    /// # Safety
    /// As [`cmv_ans_rows_p7`] (offsets per stripe).
    cmv_ans_stripes_p7 = true, true;
    /// `ans-warp-stripes` with the packed table in shared memory.
    ///
    /// # Safety
    /// As [`cmv_ans_rows_smem`] (offsets per stripe).
    cmv_ans_stripes_smem = true, false;
}
