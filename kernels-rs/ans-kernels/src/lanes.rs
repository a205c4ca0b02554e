//! The `ans-lanes` kernel's constants, parameters, table entries and decode step, shared by
//! the host (which builds the table and launches) and the kernel (`docs/ANS.md`, "ans-lanes").
//!
//! A block decodes one group of 32 rows (lane `l` of every warp owns row `32 group + l`);
//! its warps share the group's column segments (warp `w` takes segments `w, w + warps, ..`),
//! and the block adds their partial sums in shared memory before it requantizes. A unit's
//! stream is copied into a per-warp ring of [`RING_BYTES`] in shared memory, [`CHUNK_BYTES`] at
//! a time with `cp.async` (one 16-byte copy per lane), ahead of the decode; the refills read
//! their 16-bit words from the ring. The 256-entry table lives in shared memory as
//! [`TABLE_COPIES`] copies of 4-byte entries ([`narrow_entry`]; 8-byte ones with
//! [`WIDE_ENTRIES`]), one per lane, so that the lanes read distinct banks whatever their
//! slots; a slot's copies start every [`SLOT_STRIDE`] bytes, so that one byte permute builds
//! a lane's address from a state byte.

use cmv_device::{DevPtr, DevPtrMut, KernelParams, U32x4};

use crate::coder::Slot;

/// Columns a loop iteration decodes (4 quads of 2 pairs); padded columns and segments are
/// multiples of it.
pub const LANE_COLS: usize = 16;
/// Bytes of a warp's stream ring in shared memory (a power of two).
pub const RING_BYTES: u32 = 1024;
/// Bytes one ring refill copies (8 per lane).
pub const CHUNK_BYTES: u32 = 256;
/// Most stream bytes a warp consumes between two checks of its ring (2 quads: 4 pairs of at
/// most one 16-bit word per lane).
pub const CHECK_BYTES: u32 = 4 * 32 * 2;
/// Copies of the table in shared memory: lane `l` reads copy `l`.
pub const TABLE_COPIES: u32 = 32;
/// Whether the kernel keeps two-word entries in shared memory (8 bytes a copy: no field to
/// shift out, twice the shared-memory traffic) or narrow ones ([`narrow_entry`], 4 bytes).
pub const WIDE_ENTRIES: bool = true;
/// Slots of the 8-bit model.
pub const SLOTS: u32 = 256;
/// Bytes between the copies of one slot and the next (the slot in byte 1 of the address,
/// the copy's offset `4 l` in byte 0).
pub const SLOT_STRIDE: u32 = 256;
/// Shared-memory bytes of the replicated table.
pub const TABLE_BYTES: u32 = SLOTS * SLOT_STRIDE;
/// Most warps of a block.
pub const MAX_WARPS: u32 = 32;
/// Bytes of a unit's stream before its data: 32 states of two 16-bit words.
pub const STATE_BYTES: u32 = 128;

/// Bytes of the exception header word of an `ans-lanes-esc` unit, after its states.
pub const EXC_HEADER_BYTES: u32 = 4;
/// The most exceptions one `ans-lanes-esc` unit may list (the header's count field holds up
/// to 255; the load refuses more than this, so that the exception list and the first data
/// words fit the kernel's first ring copies).
pub const MAX_EXCEPTIONS: u32 = 64;
/// Exception columns are offsets inside the unit below `2^EXC_COL_BITS` (the encoder escapes
/// nothing in wider segments).
pub const EXC_COL_BITS: u32 = 19;
/// Bytes of a warp's exception area in shared memory: the sums (one word per lane) at 0, the
/// unit's exception check at [`EXC_CHECK_OFFSET`], 16-byte aligned.
pub const EXC_SUM_BYTES: u32 = 4 * 32 + 16;
/// Where a warp's exception area keeps the current unit's exception check.
pub const EXC_CHECK_OFFSET: u32 = 4 * 32;
/// The most stream bytes before a unit's data: states, exception header and list.
pub const MAX_LEAD_BYTES: u32 = STATE_BYTES + EXC_HEADER_BYTES + 4 * MAX_EXCEPTIONS;

/// An `ans-lanes-esc` unit's exception header word: `count` exceptions (bits 0-7) and the
/// escape value `escape` (bits 8-15, as a byte); bits 16-31 are zero.
#[inline(always)]
pub const fn exception_header(count: u32, escape: i8) -> u32 {
    (count & 0xff) | ((escape as u8 as u32) << 8)
}

/// The count and escape value of an exception header word, or `None` when its bits 16-31 are
/// not zero.
#[inline(always)]
pub const fn parse_exception_header(h: u32) -> Option<(u32, i8)> {
    if h >> 16 != 0 {
        None
    } else {
        Some((h & 0xff, (h >> 8) as u8 as i8))
    }
}

/// The order of element (`lane`, `col`) of a unit (`col` the offset of its column in the
/// unit) in the decoding order: pair by pair, lane by lane, the pair's two columns in order.
/// Exceptions are listed in increasing order of it. `None` when `col` does not fit
/// [`EXC_COL_BITS`].
#[inline(always)]
pub const fn exception_key(lane: u32, col: u32) -> Option<u32> {
    if col >= 1 << EXC_COL_BITS || lane >= 32 {
        None
    } else {
        Some(((col >> 1) << 6) | (lane << 1) | (col & 1))
    }
}

/// An exception entry: the element at `key` ([`exception_key`]) holds `value`, where the
/// stream decodes the unit's escape value.
#[inline(always)]
pub const fn exception_entry(key: u32, value: i8) -> u32 {
    (key << 8) | value as u8 as u32
}

/// The lane, column offset and value of an exception entry (the inverse of
/// [`exception_entry`] and [`exception_key`]).
#[inline(always)]
pub const fn parse_exception(e: u32) -> (u32, u32, i8) {
    let key = e >> 8;
    (
        (key >> 1) & 31,
        ((key >> 6) << 1) | (key & 1),
        e as u8 as i8,
    )
}

/// One word's share of an exception list's check ([`exception_check`]): a multiply-xorshift
/// mix of `w`.
#[inline(always)]
pub const fn exception_mix(w: u32) -> u32 {
    let h = w.wrapping_mul(0x9e37_79b1);
    (h ^ (h >> 15)).wrapping_mul(0x2c1b_3c6d) >> 16
}

/// The 16-bit check of an `ans-lanes-esc` unit's exception header `header` and list, which
/// the encoder adds to lane 0's initial state (`2^16 + check`): a decoder that finds the
/// state it ends in matching the list it read knows the list was not damaged. The sum of
/// [`exception_mix`] of every word, modulo 2^16 (any order gives the same).
pub fn exception_check(header: u32, list: &[u32]) -> u32 {
    list.iter().fold(exception_mix(header), |h, &e| {
        h.wrapping_add(exception_mix(e))
    }) & 0xffff
}

/// `cmv_ans_lanes2` (two row groups per block, two units per warp): bytes of each unit's
/// stream ring (a power of two).
pub const RING2_BYTES: u32 = 2048;
/// `cmv_ans_lanes2`: bytes one ring refill copies (16 per lane).
pub const CHUNK2_BYTES: u32 = 512;
/// `cmv_ans_lanes2`: most stream bytes a unit consumes between two checks of its ring (one
/// loop iteration: 8 pairs of at most one 16-bit word per lane).
pub const CHECK2_BYTES: u32 = 8 * 32 * 2;

/// Dynamic shared memory of a `cmv_ans_lanes2` block of `warps` warps: the table, two rings
/// per warp aligned to [`RING2_BYTES`] (one ring's worth of slack), then two exception areas
/// per warp; the block's partial sums (64 rows a warp) reuse the table's bytes at the end.
pub const fn shared_bytes2(warps: u32) -> u32 {
    TABLE_BYTES + (2 * warps + 1) * RING2_BYTES + 2 * warps * EXC_SUM_BYTES
}

/// Dynamic shared memory of a block of `warps` warps: the table, one ring per warp, the
/// rings aligned to [`RING_BYTES`] (one ring's worth of slack), then each warp's exception
/// sums ([`EXC_SUM_BYTES`]); the block's partial sums reuse the table's bytes at the end.
pub const fn shared_bytes(warps: u32) -> u32 {
    TABLE_BYTES + (warps + 1) * RING_BYTES + warps * EXC_SUM_BYTES
}

/// The table entry of `slot` for the packed entry `packed` of that slot
/// ([`crate::layout::pack_entry`]), as the host uploads it: word 0 the frequency (1 to 256),
/// word 1 the rank `slot - cdf` in byte 0 and the value in byte 1.
pub const fn lane_entry(slot: u32, packed: u32) -> [u32; 2] {
    let s = Slot::from_packed(packed);
    [
        s.freq,
        (slot.wrapping_sub(s.cdf) & 0xff) | ((s.value as u8 as u32) << 8),
    ]
}

/// The entry in one word, as the kernel keeps it in shared memory: rank, value, and the
/// frequency in the high half.
#[inline(always)]
pub const fn narrow_entry(e: [u32; 2]) -> u32 {
    e[1] | (e[0] << 16)
}

/// The value of an entry's word 1 (or of a narrow entry).
#[inline(always)]
pub const fn entry_value(w: u32) -> i8 {
    (w >> 8) as u8 as i8
}

/// One pair decoded from state `x` with the narrow entries `e0` (slot `x & 0xff`) and `e1`
/// (slot `(x >> 8) & 0xff`): `f0 ((x >> 16) f1 + r1) + r0`, the state before refilling
/// ([`crate::coder32::decode_pair32`]'s state, in two multiply-adds).
#[inline(always)]
pub fn pair_state(x: u32, e0: u32, e1: u32) -> u32 {
    let inner = (x >> 16).wrapping_mul(e1 >> 16).wrapping_add(e1 & 0xff);
    inner.wrapping_mul(e0 >> 16).wrapping_add(e0 & 0xff)
}

/// [`pair_state`] with two-word entries ([`lane_entry`]): no field to shift out.
#[inline(always)]
pub fn pair_state_wide(x: u32, e0: [u32; 2], e1: [u32; 2]) -> u32 {
    pair_state_from_high(x >> 16, e0, e1)
}

/// [`pair_state_wide`] from the state's high half `hi = x >> 16` (the kernel computes it with
/// a multiply, to spare its logic pipe).
#[inline(always)]
pub fn pair_state_from_high(hi: u32, e0: [u32; 2], e1: [u32; 2]) -> u32 {
    let inner = hi.wrapping_mul(e1[0]).wrapping_add(e1[1] & 0xff);
    inner.wrapping_mul(e0[0]).wrapping_add(e0[1] & 0xff)
}

/// The multiplier that moves a ballot's bits below lane `lane` to its top: `b * m` keeps
/// `b & ((1 << lane) - 1)` shifted left by `32 - lane` (mod 2^32), so its population count is
/// the lane's rank among the lanes below it (0 for lane 0, whose multiplier is 0).
#[inline(always)]
pub const fn rank_multiplier(lane: u32) -> u32 {
    if lane == 0 { 0 } else { 1u32 << (32 - lane) }
}

/// Parameters of `cmv_ans_lanes`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LanesParams {
    /// The units' streams, back to back (16-byte aligned; every unit starts at a multiple of
    /// 4 words).
    pub stream: DevPtr<U32x4>,
    /// `units + 1` word offsets (validated on the host).
    pub offsets: DevPtr<u32>,
    /// The 256 entries ([`lane_entry`]), two words each.
    pub table: DevPtr<u32>,
    /// The input vector, `cols` int8 values (16-byte aligned).
    pub x: DevPtr<u8>,
    /// The int32 accumulators, `rows`.
    pub y32: DevPtrMut<i32>,
    /// Their int8 requantization, `rows`.
    pub y8: DevPtrMut<i8>,
    /// The error word ([`crate::ERR_STREAM_OVERRUN`], [`crate::ERR_FINAL_STATE`]).
    pub err: DevPtrMut<u32>,
    /// Requantization scale (finite).
    pub scale: f32,
    /// Rows of the matrix.
    pub rows: u32,
    /// Columns of the matrix.
    pub cols: u32,
    /// Padded columns (a multiple of [`LANE_COLS`]).
    pub padded_cols: u32,
    /// Columns per segment (a multiple of [`LANE_COLS`]).
    pub segment: u32,
    /// Segments per row group.
    pub nseg: u32,
    /// 1 when every unit carries an exception header and list after its states
    /// (`ans-lanes-esc`), 0 when its data follow the states (`ans-lanes`).
    pub exceptions: u32,
}
const _: () = assert!(core::mem::size_of::<LanesParams>() == 84);
const _: () = assert!(core::mem::align_of::<LanesParams>() == 4);
// SAFETY: repr(C), no padding (seven 8-byte pointers at alignment 4 and seven 32-bit fields,
// size asserted), plain data and device pointers only; the one parameter of `cmv_ans_lanes`.
unsafe impl KernelParams for LanesParams {}

// The table is 64 KiB (a slot's copies fill its stride); a block of the most warps fits the
// SM's shared memory; the partial sums fit the table's bytes; a refill chunk is one 16-byte
// copy per lane; the ring holds at least four chunks (the kernel keeps up to three ahead).
const _: () = assert!(TABLE_BYTES == 64 * 1024 && TABLE_COPIES * 8 <= SLOT_STRIDE);
const _: () = assert!(shared_bytes(MAX_WARPS) <= 227 * 1024);
const _: () = assert!(4 * 32 * MAX_WARPS <= TABLE_BYTES);
const _: () = assert!(CHUNK_BYTES == 32 * 8);
// The ring schedule (the kernel's loop): a chunk is copied when at most
// `RING_BYTES - CHUNK_BYTES` bytes lie ahead of the decoder, so no unread byte is
// overwritten; with more than `CHECK_BYTES + CHUNK_BYTES` ahead before a copy and every
// chunk but the newest landed, at least `CHECK_BYTES` have landed.
const _: () = assert!(RING_BYTES.is_power_of_two() && RING_BYTES >= 4 * CHUNK_BYTES);
const _: () =
    assert!(CHUNK_BYTES >= CHECK_BYTES && RING_BYTES - CHUNK_BYTES >= CHECK_BYTES + CHUNK_BYTES);
// The first check finds the three first chunks landed and at most `MAX_LEAD_BYTES` read, so
// `D = fill - pos >= 3 CHUNK_BYTES - MAX_LEAD_BYTES`. At a check with `D <= RING_BYTES -
// CHUNK_BYTES` a chunk is copied and every older one has landed: `D` bytes ahead, at least
// `CHECK_BYTES`, and `D` does not shrink by the next check (a chunk in, at most `CHECK_BYTES`
// read); with a larger `D` no copy is made and all but the newest chunk have landed: more than
// `RING_BYTES - 2 CHUNK_BYTES >= CHECK_BYTES` ahead.
const _: () = assert!(3 * CHUNK_BYTES - MAX_LEAD_BYTES >= CHECK_BYTES);
const _: () = assert!(MAX_EXCEPTIONS <= 2 * 32 && MAX_EXCEPTIONS <= 0xff);
// The same schedule for `cmv_ans_lanes2`'s rings, checked once per loop iteration.
const _: () = assert!(RING2_BYTES.is_power_of_two() && RING2_BYTES >= 4 * CHUNK2_BYTES);
const _: () = assert!(CHUNK2_BYTES == 32 * 16 && CHUNK2_BYTES >= CHECK2_BYTES);
const _: () = assert!(RING2_BYTES - 2 * CHUNK2_BYTES >= CHECK2_BYTES);
const _: () = assert!(3 * CHUNK2_BYTES - MAX_LEAD_BYTES >= CHECK2_BYTES);
const _: () = assert!(shared_bytes2(MAX_WARPS) <= 227 * 1024);
const _: () = assert!(4 * 64 * MAX_WARPS <= TABLE_BYTES);
// The largest key (the last column a key holds, lane 31) leaves 8 bits for the value.
const _: () = assert!(match exception_key(31, (1 << EXC_COL_BITS) - 1) {
    Some(k) => k < 1 << 24,
    None => false,
});

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;
    use crate::coder32::{STATE32_LOWER, decode_pair32, encode_pair32};

    /// An uneven 8-bit model over -3..=3 (and a certain-symbol model): the kernel's step with
    /// its entries gives `decode_pair32`'s state and values at every state tried.
    #[test]
    fn rank_multipliers_count_the_lanes_below() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..1000 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            let b = (seed >> 32) as u32;
            for lane in 0..32 {
                let below = b & ((1u64 << lane) - 1) as u32;
                assert_eq!(
                    b.wrapping_mul(rank_multiplier(lane)).count_ones(),
                    below.count_ones(),
                    "ballot {b:#x} lane {lane}"
                );
            }
        }
    }

    #[test]
    fn the_kernel_step_matches_the_coder() {
        for weights in [vec![1u32, 3, 10, 40, 12, 5, 1], vec![0, 0, 0, 1, 0, 0, 0]] {
            let (freqs, cdfs, packed) = crate::coder32::test_model(&weights);
            let entries: Vec<[u32; 2]> = (0..256u32)
                .map(|s| lane_entry(s, packed[s as usize]))
                .collect();
            let model = |v: i8| (cdfs[(v + 3) as usize], freqs[(v + 3) as usize]);
            let mut seed = 0x2545_f491_4f6c_dd1du64;
            for _ in 0..20_000 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let x = STATE32_LOWER + (seed as u32 % (u32::MAX - STATE32_LOWER));
                let (vals, want) = decode_pair32(x, |s| Slot::from_packed(packed[s as usize]));
                let (e0, e1) = (
                    entries[(x & 0xff) as usize],
                    entries[((x >> 8) & 0xff) as usize],
                );
                assert_eq!(pair_state_wide(x, e0, e1), want, "state {x:#x}");
                let (n0, n1) = (narrow_entry(e0), narrow_entry(e1));
                assert_eq!(pair_state(x, n0, n1), want, "state {x:#x}");
                assert_eq!([entry_value(e0[1]), entry_value(e1[1])], vals);
                assert_eq!([entry_value(n0), entry_value(n1)], vals);
                // And the encoder's states decode back through the kernel's step.
                let (nx, _) = encode_pair32(STATE32_LOWER + (seed >> 40) as u32, model, vals);
                let (f0, f1) = (
                    entries[(nx & 0xff) as usize],
                    entries[((nx >> 8) & 0xff) as usize],
                );
                assert_eq!([entry_value(f0[1]), entry_value(f1[1])], vals);
            }
        }
    }
}
