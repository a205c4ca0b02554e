//! The per-chunk arithmetic of the dense kernels, shared with the host so it is unit-tested.

use cmv_device::{U32x4, dp4a, f16_to_f32, fma_f32, half2_to_f32x2};

/// `acc + sum_k w[k] * x[k]` over the eight fp16 values of two 16-byte chunks, in fp32, in
/// order k = 0..8 (low half of word 0 first).
#[inline(always)]
pub fn fma_f16x8(mut acc: f32, w: U32x4, x: U32x4) -> f32 {
    for k in 0..4 {
        let (w0, w1) = half2_to_f32x2(w.0[k]);
        let (x0, x1) = half2_to_f32x2(x.0[k]);
        acc = fma_f32(w0, x0, acc);
        acc = fma_f32(w1, x1, acc);
    }
    acc
}

/// One fp16 product term, for the scalar fallback kernel.
#[inline(always)]
pub fn fma_f16(acc: f32, w: u16, x: u16) -> f32 {
    fma_f32(f16_to_f32(w), f16_to_f32(x), acc)
}

/// `acc + sum_k w[k] * x[k]` over the sixteen int8 values of two 16-byte chunks (4 x `dp4a`).
#[inline(always)]
pub fn dot_i8x16(mut acc: i32, w: U32x4, x: U32x4) -> i32 {
    for k in 0..4 {
        acc = dp4a(w.0[k], x.0[k], acc);
    }
    acc
}

pub use cmv_device::requantize;

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;
    use cmv_device::f32_to_f16;

    fn pack_f16(v: [f32; 8]) -> U32x4 {
        let h: Vec<u32> = v.iter().map(|&f| u32::from(f32_to_f16(f))).collect();
        U32x4([
            h[0] | h[1] << 16,
            h[2] | h[3] << 16,
            h[4] | h[5] << 16,
            h[6] | h[7] << 16,
        ])
    }

    #[test]
    fn fma_f16x8_is_the_dot_product() {
        let w = [1.0, -2.0, 0.5, 4.0, -0.25, 8.0, 3.0, -1.5];
        let x = [2.0, 0.5, -4.0, 1.0, 16.0, 0.125, -1.0, 2.0];
        let want: f32 = w.iter().zip(&x).map(|(a, b)| a * b).sum::<f32>() + 10.0;
        assert_eq!(fma_f16x8(10.0, pack_f16(w), pack_f16(x)), want);
    }

    #[test]
    fn dot_i8x16_is_the_dot_product() {
        let w: [i8; 16] = [127, -128, 1, -1, 5, 6, -7, 8, 0, 100, -100, 3, 2, 1, -2, 64];
        let x: [i8; 16] = [-128, -128, 127, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, -64];
        let pack = |v: [i8; 16]| {
            let b: Vec<u8> = v.iter().map(|&e| e as u8).collect();
            U32x4(core::array::from_fn(|k| {
                u32::from_le_bytes([b[4 * k], b[4 * k + 1], b[4 * k + 2], b[4 * k + 3]])
            }))
        };
        let want: i32 = w
            .iter()
            .zip(&x)
            .map(|(&a, &b)| i32::from(a) * i32::from(b))
            .sum();
        assert_eq!(dot_i8x16(-7, pack(w), pack(x)), want - 7);
    }

    #[test]
    fn requantize_rounds_half_to_even_and_saturates() {
        assert_eq!(requantize(5, 0.5), 2); // 2.5 -> 2
        assert_eq!(requantize(7, 0.5), 4); // 3.5 -> 4
        assert_eq!(requantize(-5, 0.5), -2);
        assert_eq!(requantize(1_000_000, 1.0), 127);
        assert_eq!(requantize(-1_000_000, 1.0), -128);
        assert_eq!(requantize(i32::MIN, 1.0), -128);
        // The product is formed in f64: 16777217 * 1.0 is exact there, not in f32.
        assert_eq!(requantize(16_777_217, 1.0 / 16_777_216.0), 1);
    }

    #[test]
    fn every_batch_has_a_kernel_that_holds_it() {
        for b in 1..=crate::MAX_BATCH {
            let k = crate::kernel_batch(b).unwrap();
            assert!(k >= b && k < 2 * b, "batch {b} runs on kernel batch {k}");
            let kf = crate::f16_kernel_batch(b).unwrap();
            assert!(
                kf >= b && kf <= 16,
                "batch {b} runs on fp16 kernel batch {kf}"
            );
            assert!(crate::f16_kernel_name(b).is_some());
            assert_eq!(
                crate::i8_kernel_name(b),
                Some(format!("cmv_gemv_i8_b{k}").as_str())
            );
            assert!(crate::rows_per_warp_f16(k) >= 1 && crate::unroll_f16(k) >= 1);
            assert!(crate::rows_per_warp_i8(k) >= 1 && crate::unroll_i8(k) >= 1);
        }
        assert_eq!(crate::f16_kernel_name(0), None);
        assert_eq!(crate::f16_kernel_name(17), None);
        assert_eq!(crate::kernel_batch(17), None);
    }
}
