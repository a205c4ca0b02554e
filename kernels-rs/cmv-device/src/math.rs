//! Pure functions with one meaning on the GPU and the host.
//!
//! On `nvptx64` each is one or two PTX instructions; on the host a bit-exact fallback, tested
//! below against the definition.

/// `dp4a.s32.s32`: the dot product of the four signed bytes of `a` and `b`, plus `c`.
///
/// Wrapping addition, as the hardware does (no saturation).
#[inline(always)]
pub fn dp4a(a: u32, b: u32, c: i32) -> i32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: i32;
        // SAFETY: a pure register-to-register instruction, available from sm_61 on (we build
        // for sm_80).
        unsafe {
            core::arch::asm!(
                "dp4a.s32.s32 {r}, {a}, {b}, {c};",
                r = out(reg32) r, a = in(reg32) a, b = in(reg32) b, c = in(reg32) c,
                options(pure, nomem, nostack)
            );
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let a = a.to_le_bytes();
        let b = b.to_le_bytes();
        let mut acc = c;
        for k in 0..4 {
            acc = acc.wrapping_add(i32::from(a[k] as i8) * i32::from(b[k] as i8));
        }
        acc
    }
}

/// `dp4a.u32.u32`: the dot product of the four unsigned bytes of `a` and `b`, plus `c`,
/// modulo 2^32 (the hardware wraps).
#[inline(always)]
pub fn dp4a_u32(a: u32, b: u32, c: u32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: a pure register-to-register instruction, available from sm_61 on.
        unsafe {
            core::arch::asm!(
                "dp4a.u32.u32 {r}, {a}, {b}, {c};",
                r = out(reg32) r, a = in(reg32) a, b = in(reg32) b, c = in(reg32) c,
                options(pure, nomem, nostack)
            );
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let (a, b) = (a.to_le_bytes(), b.to_le_bytes());
        (0..4).fold(c, |acc, k| {
            acc.wrapping_add(u32::from(a[k]) * u32::from(b[k]))
        })
    }
}

/// `dp2a.lo.u32.u32`: the two unsigned 16-bit halves of `a` times the unsigned bytes 0 and 1
/// of `b`, plus `c`, modulo 2^32.
#[inline(always)]
pub fn dp2a_lo_u32(a: u32, b: u32, c: u32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: a pure register-to-register instruction, available from sm_61 on.
        unsafe {
            core::arch::asm!(
                "dp2a.lo.u32.u32 {r}, {a}, {b}, {c};",
                r = out(reg32) r, a = in(reg32) a, b = in(reg32) b, c = in(reg32) c,
                options(pure, nomem, nostack)
            );
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        c.wrapping_add((a & 0xffff) * (b & 0xff))
            .wrapping_add((a >> 16) * ((b >> 8) & 0xff))
    }
}

/// `dp2a.hi.u32.u32`: the two unsigned 16-bit halves of `a` times the unsigned bytes 2 and 3
/// of `b`, plus `c`, modulo 2^32.
#[inline(always)]
pub fn dp2a_hi_u32(a: u32, b: u32, c: u32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: a pure register-to-register instruction, available from sm_61 on.
        unsafe {
            core::arch::asm!(
                "dp2a.hi.u32.u32 {r}, {a}, {b}, {c};",
                r = out(reg32) r, a = in(reg32) a, b = in(reg32) b, c = in(reg32) c,
                options(pure, nomem, nostack)
            );
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        c.wrapping_add((a & 0xffff) * ((b >> 16) & 0xff))
            .wrapping_add((a >> 16) * (b >> 24))
    }
}

/// Fused multiply-add `a * b + c` with one rounding (`fma.rn.f32`).
#[inline(always)]
pub fn fma_f32(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: f32;
        // SAFETY: a pure register instruction.
        unsafe {
            core::arch::asm!(
                "fma.rn.f32 {r}, {a}, {b}, {c};",
                r = out(reg32) r, a = in(reg32) a, b = in(reg32) b, c = in(reg32) c,
                options(pure, nomem, nostack)
            );
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        a.mul_add(b, c)
    }
}

/// Byte permute (`prmt.b32 d, a, b, sel`, the default mode): byte `i` of the result is byte
/// `sel[4i..4i+2]` (0..=7) of the 8 bytes `b:a` (`a` is bytes 0..=3), or, when bit `4i + 3`
/// of `sel` is set, that byte's top bit replicated (0x00 or 0xFF). Only the low 16 bits of
/// `sel` count.
#[inline(always)]
pub fn prmt(a: u32, b: u32, sel: u32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: a pure register instruction.
        unsafe {
            core::arch::asm!(
                "prmt.b32 {r}, {a}, {b}, {s};",
                r = out(reg32) r, a = in(reg32) a, b = in(reg32) b, s = in(reg32) sel,
                options(pure, nomem, nostack)
            );
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let bytes = (u64::from(b) << 32 | u64::from(a)).to_le_bytes();
        let mut r = 0u32;
        for i in 0..4 {
            let n = (sel >> (4 * i)) & 7;
            let mut byte = bytes[n as usize];
            if (sel >> (4 * i + 3)) & 1 == 1 {
                byte = if byte & 0x80 != 0 { 0xff } else { 0 };
            }
            r |= u32::from(byte) << (8 * i);
        }
        r
    }
}

/// Any bitwise function of three words (`lop3.b32`): bit `i` of the result is bit
/// `(a_i << 2) | (b_i << 1) | c_i` of `LUT` (so `LUT = f(0xf0, 0xcc, 0xaa)`, e.g. `0xea` for
/// `(a & b) | c`). One instruction, and opaque to LLVM, which would otherwise regroup such
/// expressions into two.
#[inline(always)]
pub fn lop3<const LUT: u8>(a: u32, b: u32, c: u32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: a pure register instruction (sm_50+).
        unsafe {
            core::arch::asm!(
                "lop3.b32 {r}, {a}, {b}, {c}, {lut};",
                r = out(reg32) r, a = in(reg32) a, b = in(reg32) b, c = in(reg32) c,
                lut = const LUT,
                options(pure, nomem, nostack)
            );
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let mut r = 0u32;
        for i in 0..32 {
            let k = (((a >> i) & 1) << 2) | (((b >> i) & 1) << 1) | ((c >> i) & 1);
            r |= u32::from((LUT >> k) & 1) << i;
        }
        r
    }
}

/// Population count (`popc.b32`).
#[inline(always)]
pub fn popc(x: u32) -> u32 {
    x.count_ones()
}

/// Population count of a 64-bit word (`popc.b64`).
#[inline(always)]
pub fn popc64(x: u64) -> u32 {
    x.count_ones()
}

/// IEEE binary16 bits to `f32` (`cvt.f32.f16`, exact).
#[inline(always)]
pub fn f16_to_f32(h: u16) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: f32;
        // SAFETY: a pure register conversion.
        unsafe {
            core::arch::asm!(
                "cvt.f32.f16 {r}, {h};",
                r = out(reg32) r, h = in(reg16) h,
                options(pure, nomem, nostack)
            );
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        half::f16::from_bits(h).to_f32()
    }
}

/// `f32` to IEEE binary16 bits, rounding to nearest even (`cvt.rn.f16.f32`).
#[inline(always)]
pub fn f32_to_f16(x: f32) -> u16 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u16;
        // SAFETY: a pure register conversion.
        unsafe {
            core::arch::asm!(
                "cvt.rn.f16.f32 {r}, {x};",
                r = out(reg16) r, x = in(reg32) x,
                options(pure, nomem, nostack)
            );
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        half::f16::from_f32(x).to_bits()
    }
}

/// The lane-wise sum of two `half2` words, each half rounded to nearest even
/// (`add.rn.f16x2`).
#[inline(always)]
pub fn add_f16x2(a: u32, b: u32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: a pure register instruction.
        unsafe {
            core::arch::asm!(
                "add.rn.f16x2 {r}, {a}, {b};",
                r = out(reg32) r, a = in(reg32) a, b = in(reg32) b,
                options(pure, nomem, nostack)
            );
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        // The sum of two fp16 values is exact in f64; one rounding to fp16.
        let h = |w: u32| f64::from(half::f16::from_bits(w as u16).to_f32());
        let lo = half::f16::from_f64(h(a) + h(b)).to_bits();
        let hi = half::f16::from_f64(h(a >> 16) + h(b >> 16)).to_bits();
        u32::from(lo) | u32::from(hi) << 16
    }
}

/// The two halves of a `half2` word as `f32`: (low half, high half).
#[inline(always)]
pub fn half2_to_f32x2(w: u32) -> (f32, f32) {
    (f16_to_f32(w as u16), f16_to_f32((w >> 16) as u16))
}

/// The `half2` word of two `f32` values, each rounded to nearest even: `lo` in the low half
/// (`cvt.rn.f16x2.f32 d, hi, lo`, one instruction on sm_80+).
#[inline(always)]
pub fn f32x2_to_half2(lo: f32, hi: f32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: a pure register conversion (sm_80+).
        unsafe {
            core::arch::asm!(
                "cvt.rn.f16x2.f32 {r}, {h}, {l};",
                r = out(reg32) r, h = in(reg32) hi, l = in(reg32) lo,
                options(pure, nomem, nostack)
            );
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        u32::from(f32_to_f16(lo)) | (u32::from(f32_to_f16(hi)) << 16)
    }
}

/// The `bf16x2` word of two `f32` values, each rounded to nearest even: `lo` in the low half
/// (`cvt.rn.bf16x2.f32 d, hi, lo`, one instruction on sm_80+).
#[inline(always)]
pub fn f32x2_to_bf16x2(lo: f32, hi: f32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: a pure register conversion (sm_80+).
        unsafe {
            core::arch::asm!(
                "cvt.rn.bf16x2.f32 {r}, {h}, {l};",
                r = out(reg32) r, h = in(reg32) hi, l = in(reg32) lo,
                options(pure, nomem, nostack)
            );
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let b = |v: f32| u32::from(half::bf16::from_f32(v).to_bits());
        b(lo) | (b(hi) << 16)
    }
}

/// bf16 bits to `f32` (exact: the bits are the top half of the `f32`).
#[inline(always)]
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

/// Host model of one fp16 lane of `fma.rn.f16x2`: the exact `a * b + c`, rounded once.
#[cfg(not(target_arch = "nvptx64"))]
fn fma_f16_lane(a: u16, b: u16, c: u16) -> u16 {
    use half::f16;
    let (a, b, c) = (f16::from_bits(a), f16::from_bits(b), f16::from_bits(c));
    // The product of two fp16 values (at most 22 significant bits) is exact in f64; the sum
    // is rounded to odd (TwoSum error as a sticky bit), which makes the final rounding to
    // fp16 the single correct rounding of the exact value.
    let (p, c) = (a.to_f64() * b.to_f64(), c.to_f64());
    let s = p + c;
    let bp = s - p;
    let e = (p - (s - bp)) + (c - bp);
    let s = if e != 0.0 && s.is_finite() && s.to_bits() & 1 == 0 {
        if (e > 0.0) == (s > 0.0) {
            f64::from_bits(s.to_bits() + 1)
        } else {
            f64::from_bits(s.to_bits() - 1)
        }
    } else {
        s
    };
    f16::from_f64(s).to_bits()
}

/// Host model of a `half2` instruction: `lane(a, b, c)` on the low halves, then the high ones.
#[cfg(not(target_arch = "nvptx64"))]
fn per_half(a: u32, b: u32, c: u32, lane: impl Fn(u16, u16, u16) -> u16) -> u32 {
    let half = |s: u32| u32::from(lane((a >> s) as u16, (b >> s) as u16, (c >> s) as u16));
    half(0) | (half(16) << 16)
}

/// `fma.rn.f16x2`: `a * b + c` per half of the `half2` words, each rounded once.
#[inline(always)]
pub fn hfma2(a: u32, b: u32, c: u32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: a pure register instruction (sm_53+).
        unsafe {
            core::arch::asm!(
                "fma.rn.f16x2 {r}, {a}, {b}, {c};",
                r = out(reg32) r, a = in(reg32) a, b = in(reg32) b, c = in(reg32) c,
                options(pure, nomem, nostack)
            );
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        per_half(a, b, c, fma_f16_lane)
    }
}

/// `mul.rn.f16x2`: `a * b` per half of the `half2` words, each rounded once.
#[inline(always)]
pub fn hmul2(a: u32, b: u32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: a pure register instruction (sm_53+).
        unsafe {
            core::arch::asm!(
                "mul.rn.f16x2 {r}, {a}, {b};",
                r = out(reg32) r, a = in(reg32) a, b = in(reg32) b,
                options(pure, nomem, nostack)
            );
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        // -0.0 as the addend keeps the sign of a zero product, as a plain multiply does.
        per_half(a, b, 0x8000_8000, fma_f16_lane)
    }
}

/// Host model of one fp16 lane of `max.f16x2`: the larger value; a NaN loses to a number, two
/// NaNs give the canonical NaN (`0x7fff`); `+0` is larger than `-0`.
#[cfg(not(target_arch = "nvptx64"))]
fn max_f16_lane(a: u16, b: u16, _: u16) -> u16 {
    use half::f16;
    let (x, y) = (f16::from_bits(a), f16::from_bits(b));
    match (x.is_nan(), y.is_nan()) {
        (true, true) => 0x7fff,
        (true, false) => b,
        (false, true) => a,
        _ if x == y => {
            if a & 0x8000 == 0 {
                a
            } else {
                b
            }
        }
        _ if x > y => a,
        _ => b,
    }
}

/// One half of [`hmax2_nan`] on the host: NaN (`0x7fff`) if either is NaN.
#[cfg(not(target_arch = "nvptx64"))]
fn max_nan_f16_lane(a: u16, b: u16, _: u16) -> u16 {
    let nan = |v: u16| v & 0x7fff > 0x7c00;
    if nan(a) || nan(b) {
        0x7fff
    } else {
        max_f16_lane(a, b, 0)
    }
}

/// `max.NaN.f16x2`: the larger of `a` and `b` per half, NaN (`0x7fff`) where either is NaN
/// (sm_80+).
#[inline(always)]
pub fn hmax2_nan(a: u32, b: u32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: a pure register instruction (sm_80+).
        unsafe {
            core::arch::asm!(
                "max.NaN.f16x2 {r}, {a}, {b};",
                r = out(reg32) r, a = in(reg32) a, b = in(reg32) b,
                options(pure, nomem, nostack)
            );
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        per_half(a, b, 0, max_nan_f16_lane)
    }
}

/// `max.f16x2`: the larger of `a` and `b` per half (sm_80+).
#[inline(always)]
pub fn hmax2(a: u32, b: u32) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u32;
        // SAFETY: a pure register instruction (sm_80+).
        unsafe {
            core::arch::asm!(
                "max.f16x2 {r}, {a}, {b};",
                r = out(reg32) r, a = in(reg32) a, b = in(reg32) b,
                options(pure, nomem, nostack)
            );
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        per_half(a, b, 0, max_f16_lane)
    }
}

/// Round an `f64` to the nearest `i32`, ties to even, saturating at the `i32` range
/// (`cvt.rni.s32.f64`; NaN gives 0, as on the GPU).
#[inline(always)]
pub fn round_half_even_f64_to_i32(x: f64) -> i32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: i32;
        // SAFETY: a pure register conversion (saturating by definition in PTX).
        unsafe {
            core::arch::asm!(
                "cvt.rni.s32.f64 {r}, {x};",
                r = out(reg32) r, x = in(reg64) x,
                options(pure, nomem, nostack)
            );
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        if x.is_nan() {
            0
        } else {
            // `as` saturates at the i32 range.
            x.round_ties_even() as i32
        }
    }
}

/// Round an `f32` to the nearest `i32`, ties to even, saturating at the `i32` range
/// (`cvt.rni.s32.f32`; NaN gives 0, as on the GPU).
#[inline(always)]
pub fn round_half_even_f32_to_i32(x: f32) -> i32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: i32;
        // SAFETY: a pure register conversion (saturating by definition in PTX).
        unsafe {
            core::arch::asm!(
                "cvt.rni.s32.f32 {r}, {x};",
                r = out(reg32) r, x = in(reg32) x,
                options(pure, nomem, nostack)
            );
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        if x.is_nan() {
            0
        } else {
            // `as` saturates at the i32 range.
            x.round_ties_even() as i32
        }
    }
}

/// Requantization of an int32 accumulator to int8: `round_half_even(acc * scale)` computed in
/// f64 (exact product, one rounding), then saturated to `-128..=127`.
///
/// Every int8 kernel of cmv and its CPU reference use this one function, so results match bit
/// for bit. `scale` must be finite (hosts validate it).
#[inline(always)]
pub fn requantize(acc: i32, scale: f32) -> i8 {
    let q = round_half_even_f64_to_i32(f64::from(acc) * f64::from(scale));
    q.clamp(-128, 127) as i8
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;

    #[test]
    fn dp4a_matches_definition() {
        let cases = [
            (0x7f80_01ffu32, 0x7f80_01ffu32, 0i32),
            (0x8080_8080, 0x8080_8080, -5),
            (0x0102_0304, 0xfffe_fdfc, 100),
            (0xffff_ffff, 0x7f7f_7f7f, i32::MAX),
        ];
        for (a, b, c) in cases {
            let mut want = c as i64;
            for k in 0..4 {
                let x = ((a >> (8 * k)) & 0xff) as u8 as i8 as i64;
                let y = ((b >> (8 * k)) & 0xff) as u8 as i8 as i64;
                want += x * y;
            }
            assert_eq!(dp4a(a, b, c), want as i32, "dp4a({a:#x}, {b:#x}, {c})");
        }
    }

    #[test]
    fn unsigned_dot_products_match_their_definitions() {
        let cases = [
            (0xffff_ffffu32, 0xffff_ffffu32, u32::MAX),
            (0x0102_0304, 0xfffe_fdfc, 7),
            (0x8000_7fff, 0x80ff_01fe, 0x8000_0000),
            (0, 0xdead_beef, 12345),
        ];
        for (a, b, c) in cases {
            let (ab, bb) = (a.to_le_bytes(), b.to_le_bytes());
            let mut want = u64::from(c);
            for k in 0..4 {
                want += u64::from(ab[k]) * u64::from(bb[k]);
            }
            assert_eq!(
                dp4a_u32(a, b, c),
                want as u32,
                "dp4a.u32({a:#x}, {b:#x}, {c})"
            );
            let (a0, a1) = (u64::from(a & 0xffff), u64::from(a >> 16));
            let lo = u64::from(c) + a0 * u64::from(bb[0]) + a1 * u64::from(bb[1]);
            let hi = u64::from(c) + a0 * u64::from(bb[2]) + a1 * u64::from(bb[3]);
            assert_eq!(
                dp2a_lo_u32(a, b, c),
                lo as u32,
                "dp2a.lo({a:#x}, {b:#x}, {c})"
            );
            assert_eq!(
                dp2a_hi_u32(a, b, c),
                hi as u32,
                "dp2a.hi({a:#x}, {b:#x}, {c})"
            );
        }
    }

    #[test]
    fn lop3_evaluates_its_table() {
        let (a, b, c) = (0xdead_beefu32, 0x1234_5678u32, 0x0f0f_00ffu32);
        assert_eq!(lop3::<0xea>(a, b, c), (a & b) | c);
        assert_eq!(lop3::<0x96>(a, b, c), a ^ b ^ c);
        assert_eq!(lop3::<0xf0>(a, b, c), a);
        assert_eq!(lop3::<0xe8>(a, b, c), (a & b) | (b & c) | (a & c));
    }

    #[test]
    fn half2_arithmetic_rounds_once() {
        use half::f16;
        let h = |x: f32| f16::from_f32(x).to_bits();
        let pack = |lo: u16, hi: u16| u32::from(lo) | (u32::from(hi) << 16);
        // 3 * 0.1 (fp16) + 1: exact value 1.29980..., one rounding.
        let (a, b, c) = (
            pack(h(3.0), h(-2.0)),
            pack(h(0.1), h(0.1)),
            pack(h(1.0), h(1.0)),
        );
        let exact = |x: f32, y: f32, z: f32| {
            let v = f64::from(f16::from_f32(x)) * f64::from(f16::from_f32(y))
                + f64::from(f16::from_f32(z));
            f16::from_f64(v).to_bits()
        };
        assert_eq!(
            hfma2(a, b, c),
            pack(exact(3.0, 0.1, 1.0), exact(-2.0, 0.1, 1.0))
        );
        // Exact ties round to even: 2048 + 1 -> 2048, 2048 + 3 -> 2052 (fp16 ulp 2 there).
        let r = hfma2(
            pack(h(1.0), h(3.0)),
            pack(h(1.0), h(1.0)),
            pack(h(2048.0), h(2048.0)),
        );
        assert_eq!(r, pack(h(2048.0), h(2052.0)));
        assert_eq!(
            hmul2(pack(h(1.5), h(-0.0)), pack(h(2.0), h(3.0))),
            pack(h(3.0), 0x8000)
        );
        assert_eq!(f32x2_to_half2(1.0, -2.5), pack(h(1.0), h(-2.5)));
    }

    #[test]
    fn hmax2_takes_the_larger_half_and_skips_nan() {
        let pack = |lo: u16, hi: u16| u32::from(lo) | (u32::from(hi) << 16);
        // 1.0 vs 2.0, -3.0 vs -0.5
        assert_eq!(
            hmax2(pack(0x3c00, 0xc200), pack(0x4000, 0xb800)),
            pack(0x4000, 0xb800)
        );
        // NaN vs 1.0, +0 vs -0
        assert_eq!(
            hmax2(pack(0x7e00, 0x8000), pack(0x3c00, 0x0000)),
            pack(0x3c00, 0x0000)
        );
        assert_eq!(hmax2(pack(0x7e00, 0), pack(0x7e01, 0)) & 0xffff, 0x7fff);
        // Non-negative halves order as their bit patterns (the kernels' use).
        for (a, b) in [(0x0001u16, 0x03ffu16), (0x7bff, 0x7c00), (0x0400, 0x03ff)] {
            assert_eq!(hmax2(pack(a, b), pack(b, a)), pack(a.max(b), a.max(b)));
        }
    }

    #[test]
    fn f16_conversions_round_trip_every_finite_value() {
        for bits in 0u16..=u16::MAX {
            let f = f16_to_f32(bits);
            if f.is_nan() {
                assert!(f32::from(half::f16::from_bits(bits)).is_nan());
                continue;
            }
            assert_eq!(f32_to_f16(f), bits, "bits {bits:#06x}");
        }
    }

    #[test]
    fn f32_to_f16_rounds_half_to_even() {
        // 2049 lies halfway between the binary16 neighbours 2048 and 2050: even wins.
        assert_eq!(f16_to_f32(f32_to_f16(2049.0)), 2048.0);
        assert_eq!(f16_to_f32(f32_to_f16(2051.0)), 2052.0);
    }

    #[test]
    fn f32_to_bf16_rounds_half_to_even_and_converts_back_exactly() {
        // bf16 keeps 8 significant bits: 257 lies halfway between 256 and 258, 259 between
        // 258 and 260; even mantissas win.
        let w = f32x2_to_bf16x2(257.0, 259.0);
        assert_eq!(bf16_to_f32(w as u16), 256.0);
        assert_eq!(bf16_to_f32((w >> 16) as u16), 260.0);
        // Every bf16 value converts to f32 and back unchanged, the range of f32 included.
        for bits in 0..=u16::MAX {
            let f = bf16_to_f32(bits);
            if f.is_nan() {
                continue;
            }
            assert_eq!(
                f32x2_to_bf16x2(f, 0.0) & 0xffff,
                u32::from(bits),
                "{bits:#06x}"
            );
        }
        // Far outside fp16's range, within half a unit (2^-9 relative).
        for v in [1.0e30f32, -3.3e-30, 7.77e5] {
            let r = bf16_to_f32(f32x2_to_bf16x2(v, 0.0) as u16);
            assert!((r - v).abs() <= v.abs() / 512.0, "{v} -> {r}");
        }
    }

    #[test]
    fn round_half_even_ties_and_saturation() {
        assert_eq!(round_half_even_f64_to_i32(2.5), 2);
        assert_eq!(round_half_even_f64_to_i32(3.5), 4);
        assert_eq!(round_half_even_f64_to_i32(-2.5), -2);
        assert_eq!(round_half_even_f64_to_i32(-0.5), 0);
        assert_eq!(round_half_even_f64_to_i32(1e300), i32::MAX);
        assert_eq!(round_half_even_f64_to_i32(-1e300), i32::MIN);
        assert_eq!(round_half_even_f64_to_i32(f64::NAN), 0);
    }

    #[test]
    fn prmt_selects_bytes() {
        let (a, b) = (0x4433_2211u32, 0x8877_6655u32);
        assert_eq!(prmt(a, b, 0x3210), a);
        assert_eq!(prmt(a, b, 0x7654), b);
        assert_eq!(prmt(a, b, 0x0000_4567), 0x5566_7788);
        // Selecting byte k of a into byte 0, zeros (bytes of b = 0) elsewhere.
        assert_eq!(prmt(a, 0, 0x4442), 0x33);
        // Sign replication: bytes 0x88 and 0x44 of b:a become 0xff and 0x00; the upper 16
        // selector bits do not count.
        assert_eq!(prmt(a, b, 0xffff_fbff), 0xff00_ffff);
    }

    #[test]
    fn half2_unpacks_low_then_high() {
        let w = (u32::from(f32_to_f16(-3.0)) << 16) | u32::from(f32_to_f16(0.5));
        assert_eq!(half2_to_f32x2(w), (0.5, -3.0));
    }
}
