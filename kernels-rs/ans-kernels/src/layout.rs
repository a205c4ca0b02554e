//! Constants of the compressed layouts and the interleaving of stream words (`docs/ANS.md`).

/// ANS coders a warp runs (one per lane).
pub const LANES: usize = 32;
/// Elements in a quad, the unit each coder handles per step.
pub const QUAD: usize = 4;
/// Elements of a row per chunk in `ans-warp-rows` (one quad per lane).
pub const CHUNK: usize = LANES * QUAD;
/// Words in one block of a stream: one 16-byte load per lane.
pub const BLOCK_WORDS: usize = LANES * 4;
/// Rows per stripe in `ans-warp-stripes` (one row per lane).
pub const STRIPE_ROWS: usize = LANES;
/// Lower bound of a coder's state between steps: states live in `[2^32, 2^64)`.
pub const STATE_LOWER: u64 = 1 << 32;
/// Smallest model precision (bits per element): the register-table fast path.
pub const MIN_PRECISION: u32 = 7;
/// Largest model precision: a 4096-entry table in shared memory.
pub const MAX_PRECISION: u32 = 12;
/// Precision whose lookup tables live in registers (three 128-byte tables, 4 bytes per lane).
pub const REGISTER_PRECISION: u32 = 7;

/// Elements coded per ANS step at `precision` bits per element: the product model of a group
/// must fit in 32 bits of the state, so 4 (a quad) up to 8 bits, else 2.
pub const fn group_size(precision: u32) -> usize {
    if precision <= 8 { 4 } else { 2 }
}

/// Physical position, inside its 128-word block, of the stream word at logical position `p`
/// (`p < 128`): logical words `l, l + 32, l + 64, l + 96` are the four words lane `l` loads
/// with one 16-byte load, so logical word `p` is word `p / 32` of lane `p % 32`.
pub const fn interleave(p: usize) -> usize {
    4 * (p % LANES) + p / LANES
}

/// Inverse of [`interleave`].
pub const fn deinterleave(phys: usize) -> usize {
    (phys % 4) * LANES + phys / 4
}

/// Packs one slot of a lookup table: the symbol's value, its cumulative frequency and its
/// frequency (`1..=4096`), each field 12 bits wide above the value's 8.
pub const fn pack_entry(value: i8, cdf: u32, freq: u32) -> u32 {
    (value as u8 as u32) | ((cdf & 0xfff) << 8) | (((freq - 1) & 0xfff) << 20)
}

/// The value of a packed entry.
#[inline(always)]
pub const fn entry_value(e: u32) -> i8 {
    e as u8 as i8
}

/// The cumulative frequency of a packed entry's symbol.
#[inline(always)]
pub const fn entry_cdf(e: u32) -> u32 {
    (e >> 8) & 0xfff
}

/// The frequency of a packed entry's symbol.
#[inline(always)]
pub const fn entry_freq(e: u32) -> u32 {
    (e >> 20) + 1
}

/// The three 128-byte tables of the 7-bit register path, 32 words each (word `l` for lane
/// `l` holds slots `4l..4l+4`, low byte first): values, cumulative frequencies, frequencies
/// minus one.
pub fn register_tables(packed: &[u32; 128]) -> [[u32; LANES]; 3] {
    let mut t = [[0u32; LANES]; 3];
    for (slot, &e) in packed.iter().enumerate() {
        let bytes = [entry_value(e) as u8 as u32, entry_cdf(e), entry_freq(e) - 1];
        for (table, b) in t.iter_mut().zip(bytes) {
            table[slot / 4] |= (b & 0xff) << (8 * (slot % 4));
        }
    }
    t
}

/// Slot `slot` of a 128-byte register table held as 32 words (the host view of the lookup
/// the kernel does with one shuffle).
#[inline(always)]
pub const fn register_byte(table: &[u32; LANES], slot: u32) -> u32 {
    (table[(slot >> 2) as usize] >> (8 * (slot & 3))) & 0xff
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;

    #[test]
    fn interleaving_is_a_permutation_matching_the_loads() {
        let mut seen = [false; BLOCK_WORDS];
        for p in 0..BLOCK_WORDS {
            let phys = interleave(p);
            assert!(!seen[phys]);
            seen[phys] = true;
            assert_eq!(deinterleave(phys), p);
            // Lane p % 32 loads physical words 4 * lane .. 4 * lane + 4.
            assert_eq!(phys / 4, p % LANES);
        }
    }

    #[test]
    fn entries_pack_every_field() {
        for (v, c, f) in [
            (-128i8, 0u32, 1u32),
            (127, 4095, 1),
            (0, 17, 4096),
            (-1, 100, 28),
        ] {
            let e = pack_entry(v, c, f);
            assert_eq!((entry_value(e), entry_cdf(e), entry_freq(e)), (v, c, f));
        }
    }

    #[test]
    fn register_tables_read_back_every_slot() {
        let packed: [u32; 128] =
            core::array::from_fn(|s| pack_entry(s as i8 - 64, s as u32, 128 - s as u32));
        let t = register_tables(&packed);
        for s in 0..128u32 {
            assert_eq!(register_byte(&t[0], s) as u8 as i8, s as i8 - 64);
            assert_eq!(register_byte(&t[1], s), s);
            assert_eq!(register_byte(&t[2], s), 127 - s);
        }
    }
}
