//! `cmv-bench --explore`: times the batch-1 kernel variants (load depth x block size) and the
//! two streaming-read patterns, to choose the defaults. Every output is checked.

use cmv_runtime::{Gpu, rotation_copies, time_launches};
use dense_gemv::{DenseGemv, DeviceMatrix, PTX, cpu, relative_error};
use half::f16;

use crate::{BenchConfig, BenchError, data};

fn rt(e: dense_gemv::DenseError) -> cmv_runtime::RuntimeError {
    match e {
        dense_gemv::DenseError::Runtime(r) => r,
        o => cmv_runtime::RuntimeError::InvalidLaunch {
            kernel: "explore",
            reason: o.to_string(),
        },
    }
}

/// Prints one line per variant: shape, kernel, block, median us, GB/s.
pub fn run(gpu: &Gpu, dense: &DenseGemv, cfg: &BenchConfig) -> Result<(), BenchError> {
    let l2 = gpu.info().l2_bytes;
    // Streaming-read patterns.
    let bytes = (8 * l2).max(1 << 30).next_multiple_of(16);
    let buf = gpu.upload(&data::bytes(bytes, 5))?;
    let mut out = gpu.alloc_zeros::<u32>(dense.stream_read_out_len())?;
    for tiles in [false, true] {
        let t = time_launches(gpu, 5, 50, |_| {
            dense.stream_read_with(tiles, &buf, &mut out).map_err(rt)
        })?;
        println!(
            "explore stream tiles={tiles}: {:.1} us, {:.1} GB/s",
            t.median_ms() * 1e3,
            bytes as f64 / (t.median_ms() * 1e6)
        );
    }
    drop(buf);
    for &(rows, cols) in &cfg.shapes {
        let w = data::f16_uniform(rows * cols, 1.0, 9);
        let x = data::f16_uniform(cols, 1.0, 10);
        let want = cpu::gemv_f16(&w, rows, cols, &x, 1)?;
        let m0 = DeviceMatrix::upload_f16(gpu, &w, rows, cols)?;
        let copies = rotation_copies(m0.bytes(), l2, cfg.min_rotation_bytes);
        let mut mats = vec![m0];
        for _ in 1..copies {
            mats.push(mats[0].try_clone()?);
        }
        let dx = gpu.upload(&x)?;
        let mut y = gpu.alloc_zeros::<f16>(rows)?;
        for name in [
            "cmv_gemv_f16_b1_u2",
            "cmv_gemv_f16_b1_u4",
            "cmv_gemv_f16_b1_u8",
            "cmv_gemv_f16_b1_u16",
        ] {
            let k = gpu.kernel(&PTX, name)?;
            for block in [128u32, 256, 512] {
                let t = time_launches(gpu, 10, 100, |i| {
                    dense
                        .launch_f16_b1_variant(&k, block, &mats[i % copies], &dx, &mut y)
                        .map_err(rt)
                })?;
                let got = gpu.download(&y)?;
                let err = relative_error(got.iter().map(|v| f64::from(v.to_f32())), &want);
                let gbps = (rows * cols * 2) as f64 / (t.median_ms() * 1e6);
                println!(
                    "explore {rows}x{cols} {name} block {block}: {:.2} us, {gbps:.1} GB/s, rel_err {err:.1e}",
                    t.median_ms() * 1e3
                );
            }
        }
        drop(mats);
        let w = data::i8_uniform(rows * cols, 11);
        let x = data::i8_uniform(cols, 12);
        let want = cpu::gemv_i8(&w, rows, cols, &x, 1)?;
        let m0 = DeviceMatrix::upload_i8(gpu, &w, rows, cols)?;
        let copies = rotation_copies(m0.bytes(), l2, cfg.min_rotation_bytes);
        let mut mats = vec![m0];
        for _ in 1..copies {
            mats.push(mats[0].try_clone()?);
        }
        let dx = gpu.upload(&x)?;
        let mut y32 = gpu.alloc_zeros::<i32>(rows)?;
        let mut y8 = gpu.alloc_zeros::<i8>(rows)?;
        for name in [
            "cmv_gemv_i8_b1_u2",
            "cmv_gemv_i8_b1_u4",
            "cmv_gemv_i8_b1_u8",
            "cmv_gemv_i8_b1_u16",
        ] {
            let k = gpu.kernel(&PTX, name)?;
            for block in [128u32, 256, 512] {
                let t = time_launches(gpu, 10, 100, |i| {
                    dense
                        .launch_i8_b1_variant(
                            &k,
                            block,
                            &mats[i % copies],
                            &dx,
                            &mut y32,
                            &mut y8,
                            0.01,
                        )
                        .map_err(rt)
                })?;
                let exact = gpu.download(&y32)? == want;
                let gbps = (rows * cols) as f64 / (t.median_ms() * 1e6);
                println!(
                    "explore {rows}x{cols} {name} block {block}: {:.2} us, {gbps:.1} GB/s, exact {exact}",
                    t.median_ms() * 1e3
                );
            }
        }
    }
    Ok(())
}
