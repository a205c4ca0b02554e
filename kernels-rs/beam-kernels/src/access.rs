//! Reading and writing single elements of packed matrices in global memory (NVPTX only).

use crate::layout::{Place, extract, mask, place};
use crate::{PackedOut, PackedRef};
use cmv_device::{ld_nc_u64, red_or_u64, st_u64};

/// Element `(r, c)` of `m`.
///
/// # Safety
/// `r < m.rows`, `c < m.cols`, and `m` describes a live buffer of the words its geometry
/// implies (the launcher checked it).
#[inline(always)]
pub unsafe fn load(m: &PackedRef, r: u32, c: u32) -> u64 {
    let Place {
        word,
        shift,
        straddles,
    } = place(m.geometry(), r, c);
    let p = m.words.as_ptr();
    // SAFETY: the element lies in these words (and the next one when it straddles).
    unsafe {
        let lo = ld_nc_u64(p.add(word as usize));
        let hi = if straddles {
            ld_nc_u64(p.add(word as usize + 1))
        } else {
            0
        };
        extract(lo, hi, shift, m.bits)
    }
}

/// Writes `v` (already at most `out.bits` wide) as element `(r, c)` of `out`: a plain store
/// for `naive`, an atomic OR into the zeroed words otherwise (words are shared by elements).
///
/// # Safety
/// `r < out.rows`, `c < out.cols`, `out` describes a live buffer of the words its geometry
/// implies, zeroed unless `naive`, and each element is written once.
#[inline(always)]
pub unsafe fn store(out: &PackedOut, r: u32, c: u32, v: u64) {
    let Place {
        word,
        shift,
        straddles,
    } = place(out.geometry(), r, c);
    let p = out.words.as_mut_ptr();
    let v = v & mask(out.bits);
    // SAFETY: the element lies in these words; concurrent writers only OR.
    unsafe {
        if out.layout == crate::layout::NAIVE {
            st_u64(p.add(word as usize), v);
        } else {
            red_or_u64(p.add(word as usize), v << shift);
            if straddles {
                red_or_u64(p.add(word as usize + 1), v >> (64 - shift));
            }
        }
    }
}
