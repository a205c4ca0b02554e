//! Device helpers shared by the tensor-core kernels here and by `dense-kernels-sm90` (NVPTX
//! only): the `mma` of each element type.

use crate::math::requantize;
use crate::tc::{GemvTcF16Params, GemvTcI8Params};
use cmv_device::{f32_to_f16, lane_id, mma_m16n8k16_f16_f32, mma_m16n8k32_s8};

/// The output store of the fp16 tensor-core kernels: `store(i, v)` writes output `i`
/// (`n * rows + row`) as the fp16 of the fp32 sum whose bits are `v`.
///
/// # Safety
/// `p.y` holds `p.batch * p.rows` values and the caller stores only below that.
#[inline(always)]
pub unsafe fn f16_store(p: &GemvTcF16Params) -> impl Fn(usize, u32) {
    let y = p.y.as_mut_ptr();
    move |at: usize, v: u32| {
        // SAFETY: at < batch * rows: inside y (the caller's contract).
        unsafe { *y.add(at) = f32_to_f16(f32::from_bits(v)) };
    }
}

/// The output store of the int8 tensor-core kernels: the int32 sum `v` and its requantization
/// to output `i` of `y32` and `y8`.
///
/// # Safety
/// `p.y32` and `p.y8` hold `p.batch * p.rows` values and the caller stores only below that.
#[inline(always)]
pub unsafe fn i8_store(p: &GemvTcI8Params) -> impl Fn(usize, u32) {
    let (y32, y8, scale) = (p.y32.as_mut_ptr(), p.y8.as_mut_ptr(), p.scale);
    move |at: usize, v: u32| {
        // SAFETY: at < batch * rows: inside y32 and y8 (the caller's contract).
        unsafe {
            *y32.add(at) = v as i32;
            *y8.add(at) = requantize(v as i32, scale);
        }
    }
}

/// Stores a warp's fragment sums of the 16 rows from `row0` (rows below `rows`, vectors
/// below `batch`) through `store(n * rows + row, bits)`.
#[inline(always)]
pub fn store_fragment<E: Tc, const NT: usize>(
    sums: &[[E::Acc; 4]; NT],
    row0: u32,
    rows: u32,
    batch: u32,
    store: &impl Fn(usize, u32),
) {
    let lane = lane_id();
    let (g, t) = (lane >> 2, lane & 3);
    for (nt, a) in sums.iter().enumerate() {
        for (i, &v) in a.iter().enumerate() {
            let row = row0 + g + if i >= 2 { 8 } else { 0 };
            let n = (nt * 8) as u32 + 2 * t + (i as u32 & 1);
            if row < rows && n < batch {
                store(n as usize * rows as usize + row as usize, E::bits(v));
            }
        }
    }
}

/// One `mma` shape: the element type's instruction and its 32-bit accumulators.
pub trait Tc {
    /// Accumulator of one output value.
    type Acc: Copy;
    const ZERO: Self::Acc;
    /// `c + A B` for one 16-row tile and 8 vectors (fragments as in [`crate::tc`]).
    ///
    /// # Safety
    /// All 32 lanes of the warp call it together.
    unsafe fn mma(a: [u32; 4], b: [u32; 2], c: [Self::Acc; 4]) -> [Self::Acc; 4];
    /// The accumulator's 32 bits, as the workspace holds them.
    fn bits(a: Self::Acc) -> u32;
    /// The accumulator from its bits.
    fn from_bits(b: u32) -> Self::Acc;
    /// The sum of two partial sums (fp32 add, or wrapping int32 add: exact).
    fn add(a: Self::Acc, b: Self::Acc) -> Self::Acc;
}

#[derive(Debug)]
pub struct F16;
impl Tc for F16 {
    type Acc = f32;
    const ZERO: f32 = 0.0;
    #[inline(always)]
    unsafe fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        // SAFETY: forwarded from the caller.
        unsafe { mma_m16n8k16_f16_f32(a, b, c) }
    }
    #[inline(always)]
    fn bits(a: f32) -> u32 {
        a.to_bits()
    }
    #[inline(always)]
    fn from_bits(b: u32) -> f32 {
        f32::from_bits(b)
    }
    #[inline(always)]
    fn add(a: f32, b: f32) -> f32 {
        a + b
    }
}

#[derive(Debug)]
pub struct I8;
impl Tc for I8 {
    type Acc = u32;
    const ZERO: u32 = 0;
    #[inline(always)]
    unsafe fn mma(a: [u32; 4], b: [u32; 2], c: [u32; 4]) -> [u32; 4] {
        // SAFETY: forwarded from the caller.
        unsafe { mma_m16n8k32_s8(a, b, c) }
    }
    #[inline(always)]
    fn bits(a: u32) -> u32 {
        a
    }
    #[inline(always)]
    fn from_bits(b: u32) -> u32 {
        b
    }
    #[inline(always)]
    fn add(a: u32, b: u32) -> u32 {
        a.wrapping_add(b)
    }
}
