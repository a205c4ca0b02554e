//! `cmv-bench --explore`: times the batch-1 kernel variants (rows per warp, loads in flight,
//! load qualifiers, block size) and the streaming-read variants, to choose the defaults.
//! Every GEMV output is checked against the CPU reference.

use cmv_runtime::{Gpu, time_launches};
use dense_gemv::{DenseGemv, DeviceMatrix, PTX, Split, cpu, relative_error};
use half::f16;

use crate::dense::weight_copies;
use crate::{BenchConfig, BenchError, data};

const STREAMS: [&str; 7] = [
    "cmv_stream_read",
    "cmv_stream_x_grid_s",
    "cmv_stream_x_grid_n",
    "cmv_stream_x_grid_a",
    "cmv_stream_x_grid_c",
    "cmv_stream_x_tiles_n",
    "cmv_stream_x_tiles_c",
];

/// Batch-1 variants: name suffix (rows per warp `r`, chunks in flight `u`, load no-`a`llocate
/// or `c`s) and rows per warp.
const VARIANTS: [(&str, u32); 8] = [
    ("r1u2a", 1),
    ("r1u2c", 1),
    ("r1u4a", 1),
    ("r2u1a", 2),
    ("r2u2a", 2),
    ("r4u1a", 4),
    ("r4u1c", 4),
    ("r4u2a", 4),
];

/// Tensor-core kernels tried at batch 4 and 16.
const MMA: [(usize, [&str; 3]); 2] = [
    (
        4,
        [
            "cmv_gemv_f16_mma_x_n8u1",
            "cmv_gemv_f16_mma_n8",
            "cmv_gemv_f16_mma_x_n8u4",
        ],
    ),
    (
        16,
        [
            "cmv_gemv_f16_mma_x_n16u1",
            "cmv_gemv_f16_mma_n16",
            "cmv_gemv_f16_mma_x_n16u4",
        ],
    ),
];

fn dense_kernels_batch(batch: usize) -> u32 {
    if batch <= 8 { 8 } else { 16 }
}

/// Work splits tried for each variant: (slices, block threads).
const SPLITS: [(u32, u32); 5] = [(1, 128), (1, 256), (2, 256), (4, 256), (8, 256)];

fn rt(e: dense_gemv::DenseError) -> cmv_runtime::RuntimeError {
    match e {
        dense_gemv::DenseError::Runtime(r) => r,
        o => cmv_runtime::RuntimeError::InvalidLaunch {
            kernel: "explore",
            reason: o.to_string(),
        },
    }
}

/// Kernel names are `'static`; an explore run loads a handful, once.
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// Prints one line per variant: shape, kernel, block, median us, GB/s, check.
pub fn run(gpu: &Gpu, dense: &DenseGemv, cfg: &BenchConfig) -> Result<(), BenchError> {
    let l2 = gpu.info().l2_bytes;
    let bytes = (8 * l2).max(1 << 30).next_multiple_of(16);
    let buf = gpu.upload(&data::bytes(bytes, 5))?;
    let mut out = gpu.alloc_zeros::<u32>(dense.stream_read_out_len())?;
    for name in STREAMS {
        let k = gpu.kernel(&PTX, name)?;
        let t = time_launches(gpu, 5, 50, |_| {
            dense.launch_stream_variant(&k, &buf, &mut out).map_err(rt)
        })?;
        let ms = t.median_ms();
        println!(
            "explore stream {name}: {:.1} us, {:.1} GB/s",
            ms * 1e3,
            bytes as f64 / (ms * 1e6)
        );
    }
    drop(buf);
    for &(rows, cols) in &cfg.shapes {
        let w = data::f16_uniform(rows * cols, 1.0, 9);
        let x = data::f16_uniform(cols, 1.0, 10);
        let want = cpu::gemv_f16(&w, rows, cols, &x, 1)?;
        let mats = weight_copies(DeviceMatrix::upload_f16(gpu, &w, rows, cols)?, l2, cfg)?;
        let dx = gpu.upload(&x)?;
        let mut y = gpu.alloc_zeros::<f16>(rows)?;
        for (suffix, rpw) in VARIANTS {
            let k = gpu.kernel(&PTX, leak(format!("cmv_gemv_f16_x_{suffix}")))?;
            for (slices, block_threads) in SPLITS {
                let split = Split {
                    rows_per_warp: rpw,
                    slices,
                    block_threads,
                };
                let t = time_launches(gpu, 10, 100, |i| {
                    let m = &mats[i % mats.len()];
                    dense
                        .launch_f16(&k, split, 1, m, &dx, &mut y, 1)
                        .map_err(rt)
                })?;
                let got = gpu.download(&y)?;
                let err = relative_error(got.iter().map(|v| f64::from(v.to_f32())), &want);
                let ms = t.median_ms();
                let gbps = (rows * cols * 2) as f64 / (ms * 1e6);
                println!(
                    "explore {rows}x{cols} f16 {suffix} s{slices} t{block_threads}: {:.2} us, {gbps:.1} GB/s, rel_err {err:.1e}",
                    ms * 1e3
                );
            }
        }
        for (batch, names) in MMA {
            let x = data::f16_uniform(batch * cols, 1.0, 13);
            let want = cpu::gemv_f16(&w, rows, cols, &x, batch)?;
            let dx = gpu.upload(&x)?;
            let mut y = gpu.alloc_zeros::<f16>(batch * rows)?;
            let kb = dense_kernels_batch(batch);
            for name in names {
                let k = gpu.kernel(&PTX, name)?;
                for slices in [2u32, 4, 8] {
                    let split = Split {
                        rows_per_warp: 16,
                        slices,
                        block_threads: 256,
                    };
                    let t = time_launches(gpu, 10, 100, |i| {
                        let m = &mats[i % mats.len()];
                        dense
                            .launch_f16(&k, split, kb, m, &dx, &mut y, batch as u32)
                            .map_err(rt)
                    })?;
                    let got = gpu.download(&y)?;
                    let err = relative_error(got.iter().map(|v| f64::from(v.to_f32())), &want);
                    let ms = t.median_ms();
                    let gbps = (rows * cols * 2) as f64 / (ms * 1e6);
                    println!(
                        "explore {rows}x{cols} f16 b{batch} {name} s{slices}: {:.2} us, {gbps:.1} GB/s, rel_err {err:.1e}",
                        ms * 1e3
                    );
                }
            }
        }
        drop(mats);
        let w = data::i8_uniform(rows * cols, 11);
        let x = data::i8_uniform(cols, 12);
        let want = cpu::gemv_i8(&w, rows, cols, &x, 1)?;
        let mats = weight_copies(DeviceMatrix::upload_i8(gpu, &w, rows, cols)?, l2, cfg)?;
        let dx = gpu.upload(&x)?;
        let mut y32 = gpu.alloc_zeros::<i32>(rows)?;
        let mut y8 = gpu.alloc_zeros::<i8>(rows)?;
        for (suffix, rpw) in VARIANTS {
            let k = gpu.kernel(&PTX, leak(format!("cmv_gemv_i8_x_{suffix}")))?;
            for (slices, block_threads) in SPLITS {
                let split = Split {
                    rows_per_warp: rpw,
                    slices,
                    block_threads,
                };
                let t = time_launches(gpu, 10, 100, |i| {
                    let m = &mats[i % mats.len()];
                    dense
                        .launch_i8(&k, split, 1, m, &dx, (&mut y32, &mut y8), 0.01, 1)
                        .map_err(rt)
                })?;
                let exact = gpu.download(&y32)? == want;
                let ms = t.median_ms();
                let gbps = (rows * cols) as f64 / (ms * 1e6);
                println!(
                    "explore {rows}x{cols} i8 {suffix} s{slices} t{block_threads}: {:.2} us, {gbps:.1} GB/s, exact {exact}",
                    ms * 1e3
                );
            }
        }
    }
    Ok(())
}

/// Splits of the k-blocks the tc explore tries (beside the default plan).
const TC_SPLITS: [u32; 8] = [1, 2, 3, 4, 6, 8, 12, 16];

/// The plans the tc explore times for kernel `k`: grids of 1-4 blocks per SM for a stream-K
/// kernel (`p`), the fixed splits [`TC_SPLITS`] for the others (`s`).
fn tc_explore_plans(
    rows: u32,
    chunks: u32,
    k: dense_gemv::TcKernel,
    sms: u32,
) -> Vec<(&'static str, dense_gemv::TcPlan)> {
    if k.stream {
        (1..=4)
            .map(|m| ("p", dense_gemv::tc_stream_plan(rows, chunks, k, m * sms)))
            .collect()
    } else {
        TC_SPLITS
            .iter()
            .filter_map(|&n| tc_fixed_plan(rows, chunks, k, n))
            .map(|p| ("s", p))
            .collect()
    }
}

/// The plan with `ksplit` splits (fewer where the k-blocks run out), or `None` when the
/// workspace cannot take a split of this many rows.
fn tc_fixed_plan(
    rows: u32,
    chunks: u32,
    k: dense_gemv::TcKernel,
    ksplit: u32,
) -> Option<dense_gemv::TcPlan> {
    let row_blocks = dense_gemv::tc_plan(rows, chunks, k, 1, 1).row_blocks;
    let p = dense_gemv::tc_plan(rows, chunks, k, row_blocks * ksplit, 1);
    (p.ksplit == ksplit || ksplit == 1).then_some(p)
}

/// `cmv-bench --explore-tc`: every tensor-core kernel of `dense_kernels::tc` (fp16 and int8) at
/// batches 2, 4, 8 and 16 with plans for 2, 4 and 8 blocks per SM and no split, beside the
/// default path (`gemv_f16` / `gemv_i8`), the previous kernels (CUDA-core batch 4, the
/// 16-rows-per-warp `mma` kernels) and cuBLAS; graph timing over rotated copies; every output
/// checked against the CPU reference. One line per (shape, type, batch, kernel, plan).
///
/// `batches`: the batches to run (2 to 16); `kernels`: only the tensor-core kernels whose name
/// contains one of these (all when empty; an element type with none of its kernels picked is
/// skipped, baselines included).
pub fn run_tc(
    gpu: &Gpu,
    dense: &DenseGemv,
    cfg: &BenchConfig,
    batches: &[usize],
    kernels: &[String],
) -> Result<(), BenchError> {
    use dense_gemv::{CublasGemv, TC_F16_KERNELS, TC_I8_KERNELS};
    let l2 = gpu.info().l2_bytes;
    let sms = dense.sm_count();
    let blas = CublasGemv::new(gpu).ok();
    let line = |what: &str, bytes: usize, t: &cmv_runtime::Timings, check: &str| {
        let us = t.median_ms() * 1e3;
        println!(
            "tc {what}: {us:.2} us, {:.1} GB/s, {check}",
            bytes as f64 / (us * 1e3)
        );
    };
    let picked = |k: &&dense_gemv::TcKernel| {
        kernels.is_empty() || kernels.iter().any(|s| k.name.contains(s.as_str()))
    };
    let f16_kernels: Vec<_> = TC_F16_KERNELS.iter().filter(picked).collect();
    let i8_kernels: Vec<_> = TC_I8_KERNELS.iter().filter(picked).collect();
    for &(rows, cols) in &cfg.shapes {
        let w = data::f16_uniform(rows * cols, 1.0, 9);
        let mats = weight_copies(DeviceMatrix::upload_f16(gpu, &w, rows, cols)?, l2, cfg)?;
        let bytes = rows * cols * 2;
        for &batch in batches.iter().filter(|_| !f16_kernels.is_empty()) {
            let x = data::f16_uniform(batch * cols, 1.0, 13);
            let want = cpu::gemv_f16(&w, rows, cols, &x, batch)?;
            let dx = gpu.upload(&x)?;
            let mut y = gpu.alloc_zeros::<f16>(batch * rows)?;
            let check = |y: &cmv_runtime::CudaSlice<f16>| -> Result<String, BenchError> {
                let got = gpu.download(y)?;
                let err = relative_error(got.iter().map(|v| f64::from(v.to_f32())), &want);
                Ok(format!(
                    "rel_err {err:.1e}{}",
                    if err < 1e-3 { "" } else { " WRONG" }
                ))
            };
            let shape = format!("{rows}x{cols} f16 b{batch}");
            let t = cfg.timing.time(gpu, cfg, mats.len(), |i| {
                dense.gemv_f16(&mats[i % mats.len()], &dx, &mut y, batch)
            })?;
            line(&format!("{shape} default"), bytes, &t, &check(&y)?);
            if let Some(b) = &blas {
                let t = cfg.timing.time(gpu, cfg, mats.len(), |i| {
                    b.gemv_f16(&mats[i % mats.len()], &dx, &mut y, batch)
                })?;
                line(&format!("{shape} cublas"), bytes, &t, &check(&y)?);
            }
            let old = if batch <= 4 {
                (
                    "cmv_gemv_f16_b4",
                    4,
                    dense_gemv::f16_split(rows as u32, cols as u32, batch as u32),
                )
            } else {
                let kb = dense_kernels_batch(batch);
                let name = if kb == 8 {
                    "cmv_gemv_f16_mma_n8"
                } else {
                    "cmv_gemv_f16_mma_n16"
                };
                (
                    name,
                    kb,
                    dense_gemv::f16_split(rows as u32, cols as u32, batch as u32),
                )
            };
            let k = gpu.kernel(&PTX, old.0)?;
            let t = cfg.timing.time(gpu, cfg, mats.len(), |i| {
                dense.launch_f16(
                    &k,
                    old.2,
                    old.1,
                    &mats[i % mats.len()],
                    &dx,
                    &mut y,
                    batch as u32,
                )
            })?;
            line(&format!("{shape} old {}", old.0), bytes, &t, &check(&y)?);
            for tk in f16_kernels.iter().filter(|k| tc_fits(k.batch, batch)) {
                let k = gpu.kernel(&PTX, tk.name)?;
                let plans = tc_explore_plans(rows as u32, cols as u32 / 8, **tk, sms);
                for (target, plan) in plans {
                    let what = format!(
                        "{shape} {} {target} k{} b{}",
                        tk.name, plan.ksplit, plan.stream_blocks
                    );
                    let t = cfg.timing.time(gpu, cfg, mats.len(), |i| {
                        let m = &mats[i % mats.len()];
                        dense.launch_tc_f16(&k, **tk, plan, m, &dx, &mut y, batch as u32)
                    });
                    match t {
                        Ok(t) => line(&what, bytes, &t, &check(&y)?),
                        Err(e) => println!("tc {what}: not run: {e}"),
                    }
                }
            }
        }
        drop(mats);
        let w = data::i8_uniform(rows * cols, 11);
        let mats = weight_copies(DeviceMatrix::upload_i8(gpu, &w, rows, cols)?, l2, cfg)?;
        let bytes = rows * cols;
        for &batch in batches.iter().filter(|_| !i8_kernels.is_empty()) {
            let x = data::i8_uniform(batch * cols, 12);
            let want = cpu::gemv_i8(&w, rows, cols, &x, batch)?;
            let dx = gpu.upload(&x)?;
            let mut y32 = gpu.alloc_zeros::<i32>(batch * rows)?;
            let mut y8 = gpu.alloc_zeros::<i8>(batch * rows)?;
            let check = |y32: &cmv_runtime::CudaSlice<i32>| -> Result<String, BenchError> {
                let exact = gpu.download(y32)? == want;
                Ok(format!(
                    "exact {exact}{}",
                    if exact { "" } else { " WRONG" }
                ))
            };
            let shape = format!("{rows}x{cols} i8 b{batch}");
            let t = cfg.timing.time(gpu, cfg, mats.len(), |i| {
                dense.gemv_i8(&mats[i % mats.len()], &dx, &mut y32, &mut y8, 0.01, batch)
            })?;
            line(&format!("{shape} default"), bytes, &t, &check(&y32)?);
            let kb = dense_gemv_kernel_batch(batch);
            let name = leak(format!("cmv_gemv_i8_b{kb}"));
            let k = gpu.kernel(&PTX, name)?;
            let split = dense_gemv::i8_split(rows as u32, cols as u32, batch as u32);
            let t = cfg.timing.time(gpu, cfg, mats.len(), |i| {
                let m = &mats[i % mats.len()];
                dense.launch_i8(
                    &k,
                    split,
                    kb,
                    m,
                    &dx,
                    (&mut y32, &mut y8),
                    0.01,
                    batch as u32,
                )
            })?;
            line(&format!("{shape} old {name}"), bytes, &t, &check(&y32)?);
            for tk in i8_kernels.iter().filter(|k| tc_fits(k.batch, batch)) {
                let k = gpu.kernel(&PTX, tk.name)?;
                let plans = tc_explore_plans(rows as u32, cols as u32 / 16, **tk, sms);
                for (target, plan) in plans {
                    let what = format!(
                        "{shape} {} {target} k{} b{}",
                        tk.name, plan.ksplit, plan.stream_blocks
                    );
                    let t = cfg.timing.time(gpu, cfg, mats.len(), |i| {
                        let m = &mats[i % mats.len()];
                        dense.launch_tc_i8(
                            &k,
                            **tk,
                            plan,
                            m,
                            &dx,
                            (&mut y32, &mut y8),
                            0.01,
                            batch as u32,
                        )
                    });
                    match t {
                        Ok(t) => line(&what, bytes, &t, &check(&y32)?),
                        Err(e) => println!("tc {what}: not run: {e}"),
                    }
                }
            }
        }
    }
    Ok(())
}

/// A tensor-core kernel for up to `kernel_batch` vectors runs `batch` in the explore when it
/// is the smallest that holds it.
fn tc_fits(kernel_batch: u32, batch: usize) -> bool {
    kernel_batch as usize == if batch <= 8 { 8 } else { 16 }
}

/// The int8 CUDA-core kernel batch (`KERNEL_BATCHES`) that runs `batch`.
fn dense_gemv_kernel_batch(batch: usize) -> u32 {
    [1u32, 2, 4, 8, 16]
        .into_iter()
        .find(|&b| b as usize >= batch)
        .unwrap_or(16)
}
