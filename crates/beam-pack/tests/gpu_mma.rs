//! GPU tests: the tensor-core GEMM (`GemmKernel::Mma`) against `gemm_reference`, bit-exact,
//! for every width up to 8 bits (and 9-24 bits through the byte-plane kernels), every layout
//! of A, B and C, every output width and overflow behaviour. Skipped (with a message) where there is no GPU; `CMV_REQUIRE_GPU=1`
//! makes that a failure.

use beam_pack::cmv_format::HeaderCode;
use beam_pack::cmv_runtime::{Gpu, gpu_for_tests};
use beam_pack::gpu::{BeamGemm, DeviceBeamMatrix, GemmKernel};
use beam_pack::{BeamError, Layout, OutputWidth, Overflow, PackedMatrix, gemm_reference};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn random(
    rng: &mut StdRng,
    rows: usize,
    cols: usize,
    bits: u32,
    layout: Layout,
    max: bool,
) -> PackedMatrix {
    let top = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let v: Vec<u64> = (0..rows * cols)
        .map(|_| if max { top } else { rng.gen_range(0..=top) })
        .collect();
    PackedMatrix::pack(&v, rows, cols, bits, layout).unwrap()
}

fn check(
    gpu: &Gpu,
    bg: &BeamGemm,
    a: &PackedMatrix,
    b: &PackedMatrix,
    width: OutputWidth,
    overflow: Overflow,
    out_layout: Layout,
) {
    let want = gemm_reference(a, b, width, overflow, out_layout).unwrap();
    let (da, db) = (
        DeviceBeamMatrix::upload(gpu, a).unwrap(),
        DeviceBeamMatrix::upload(gpu, b).unwrap(),
    );
    let mut out = BeamGemm::alloc_out(gpu, &da, &db, width, out_layout).unwrap();
    assert_eq!(out.bits(), want.bits());
    bg.gemm(gpu, GemmKernel::Mma, &da, &db, &mut out, overflow)
        .unwrap();
    let got = out.download(gpu).unwrap();
    assert!(
        got == want,
        "mma {}x{}x{} bits {}/{} layouts {:?}/{:?} -> {:?} {width:?} {overflow:?}: first \
         difference at {:?}",
        a.rows(),
        a.cols(),
        b.cols(),
        a.bits(),
        b.bits(),
        a.layout(),
        b.layout(),
        out_layout,
        got.unpack()
            .iter()
            .zip(want.unpack())
            .position(|(g, w)| *g != w)
    );
}

#[test]
fn mma_matches_the_reference_for_every_width_and_layout() {
    let Some(gpu) = gpu_for_tests("mma_matches_the_reference_for_every_width_and_layout") else {
        return;
    };
    let bg = BeamGemm::new(&gpu).unwrap();
    let mut rng = StdRng::seed_from_u64(13);
    let shapes = [(1, 1, 1), (3, 67, 5), (130, 70, 129), (129, 200, 257)];
    for bits in 1..=8 {
        for (i, &la) in Layout::ALL.iter().enumerate() {
            let lb = Layout::ALL[(i + bits as usize) % 4];
            let lc = Layout::ALL[(i + 2 * bits as usize) % 4];
            for &(m, k, n) in &shapes {
                let max = rng.gen_bool(0.25);
                let a = random(&mut rng, m, k, bits, la, max);
                let b = random(&mut rng, k, n, 9 - bits, lb, max);
                for &width in OutputWidth::ALL {
                    for overflow in [Overflow::Ovf, Overflow::Sat] {
                        check(&gpu, &bg, &a, &b, width, overflow, lc);
                    }
                }
            }
        }
    }
}

/// Both operands `nogaps` of one width: the kernels compiled for that width
/// (`cmv_beam_gemm_mma_nogaps_b{bits}`, and `_wide` for `sat` and `maxv` past 32 bits), and on
/// compute capability 9.0 the `wgmma` kernels (`cmv_beam_gemm90_nogaps_b{bits}`) where 32-bit
/// sums suffice: both paths, each checked to be the one launched.
#[test]
fn mma_per_width_nogaps_kernels() {
    let Some(gpu) = gpu_for_tests("mma_per_width_nogaps_kernels") else {
        return;
    };
    let mut bg = BeamGemm::new(&gpu).unwrap();
    let hopper_gpu = gpu.info().compute_capability == (9, 0);
    if !hopper_gpu {
        eprintln!(
            "mma_per_width_nogaps_kernels: not compute capability 9.0, the wgmma kernels are not tested"
        );
    }
    let mut rng = StdRng::seed_from_u64(16);
    let shapes = [
        (1, 1, 1),
        (5, 67, 3),
        (130, 300, 129),
        (257, 64, 200),
        (300, 400, 136),
    ];
    // The default wgmma kernels, the warp-specialized ones, the lockstep ones, the mma.sync
    // kernels.
    let modes = [
        (true, None),
        (true, Some(true)),
        (true, Some(false)),
        (false, None),
    ];
    for (hopper, ws) in modes {
        bg.set_hopper(hopper);
        bg.set_hopper_ws(ws);
        // The default path takes the register-A kernels where gemm90::ra_preferred says; a
        // forced choice of the other two leaves them out.
        bg.set_hopper_ra(ws.map(|_| false));
        for bits in 1..=8u32 {
            let (narrow, wide) =
                beam_pack::beam_kernels::mma::NOGAPS_WIDTH_NAMES[bits as usize - 1];
            let ra = ws.is_none() && beam_pack::beam_kernels::gemm90::ra_preferred(bits);
            let ws = ws.unwrap_or(beam_pack::beam_kernels::gemm90::ws_preferred(bits));
            let hopper_name = if ra {
                beam_pack::beam_kernels::gemm90::RA_KERNEL_NAMES[bits as usize - 1]
            } else if ws {
                beam_pack::beam_kernels::gemm90::WS_KERNEL_NAMES[bits as usize - 1]
            } else {
                beam_pack::beam_kernels::gemm90::KERNEL_NAMES[bits as usize - 1]
            };
            assert_eq!(
                beam_pack::beam_kernels::mma::kernel_name(3, 3, bits, bits, false),
                narrow
            );
            for (i, &(m, k, n)) in shapes.iter().enumerate() {
                let max = i % 2 == 1;
                let a = random(&mut rng, m, k, bits, Layout::Nogaps, max);
                let b = random(&mut rng, k, n, bits, Layout::Nogaps, max);
                let (da, db) = (
                    DeviceBeamMatrix::upload(&gpu, &a).unwrap(),
                    DeviceBeamMatrix::upload(&gpu, &b).unwrap(),
                );
                let lc = Layout::ALL[(i + bits as usize) % 4];
                for &width in OutputWidth::ALL {
                    for overflow in [Overflow::Ovf, Overflow::Sat] {
                        // The largest shape (two row tiles of the wgmma kernel, 7 steps of
                        // K, so its raw ring wraps) in two modes only, to keep the CPU
                        // reference quick.
                        if i == 4 && (width == OutputWidth::Sai) != (overflow == Overflow::Ovf) {
                            continue;
                        }
                        let out = BeamGemm::alloc_out(&gpu, &da, &db, width, lc).unwrap();
                        let entry = bg.mma_entry_point(&da, &db, &out, overflow).unwrap();
                        let needs_wide = beam_pack::beam_kernels::mma::needs_wide(
                            bits,
                            bits,
                            k as u64,
                            out.bits(),
                            overflow.code(),
                        );
                        let expect = match (needs_wide, hopper && hopper_gpu) {
                            (true, _) => wide,
                            (false, true) => hopper_name,
                            (false, false) => narrow,
                        };
                        assert_eq!(entry, expect, "bits {bits} {width:?} {overflow:?}");
                        check(&gpu, &bg, &a, &b, width, overflow, lc);
                    }
                }
            }
        }
    }
}

/// The `wgmma` kernels alone at every width, both kinds (warp-specialized and not), on few
/// shapes (one element; tails in every dimension; two row tiles and a raw ring and tile
/// buffers that wrap: 11 steps of `K` at 700), for runs under compute-sanitizer.
#[test]
fn mma_hopper_kernels() {
    let Some(gpu) = gpu_for_tests("mma_hopper_kernels") else {
        return;
    };
    if gpu.info().compute_capability != (9, 0) {
        eprintln!("SKIPPED mma_hopper_kernels: the wgmma kernels need compute capability 9.0");
        return;
    }
    let mut bg = BeamGemm::new(&gpu).unwrap();
    let mut rng = StdRng::seed_from_u64(90);
    // The warp-specialized, lockstep and register-A kernels (prefixes of their names).
    let kernels = [
        (Some(true), Some(false), "cmv_beam_gemm90ws_"),
        (Some(false), Some(false), "cmv_beam_gemm90_"),
        (Some(false), Some(true), "cmv_beam_gemm90ra_"),
    ];
    for ((ws, ra, prefix), bits) in kernels
        .into_iter()
        .flat_map(|k| (1..=8u32).map(move |b| (k, b)))
    {
        bg.set_hopper_ws(ws);
        bg.set_hopper_ra(ra);
        let shapes = [(1, 1, 1), (5, 67, 3), (300, 400, 136), (260, 700, 130)];
        for (i, &(m, k, n)) in shapes.iter().enumerate() {
            let a = random(&mut rng, m, k, bits, Layout::Nogaps, i == 1);
            let b = random(&mut rng, k, n, bits, Layout::Nogaps, i == 1);
            let (da, db) = (
                DeviceBeamMatrix::upload(&gpu, &a).unwrap(),
                DeviceBeamMatrix::upload(&gpu, &b).unwrap(),
            );
            for (width, overflow, lc) in [
                (OutputWidth::Sai, Overflow::Ovf, Layout::Nogaps),
                (
                    OutputWidth::Maxv,
                    Overflow::Sat,
                    Layout::ALL[(i + bits as usize) % 4],
                ),
            ] {
                let out = BeamGemm::alloc_out(&gpu, &da, &db, width, lc).unwrap();
                let entry = bg.mma_entry_point(&da, &db, &out, overflow).unwrap();
                if entry.starts_with("cmv_beam_gemm90") {
                    assert!(entry.starts_with(prefix), "{entry}");
                    check(&gpu, &bg, &a, &b, width, overflow, lc);
                }
            }
        }
    }
}

#[test]
fn mma_byte_plane_kernels_for_9_to_24_bits() {
    let Some(gpu) = gpu_for_tests("mma_byte_plane_kernels_for_9_to_24_bits") else {
        return;
    };
    let bg = BeamGemm::new(&gpu).unwrap();
    let mut rng = StdRng::seed_from_u64(17);
    // K of 1, 3, 129 and 300 (a step of 64, a ring of 3 stages), tails in M and N; all-max
    // operands at odd shapes (every high byte full).
    let shapes = [(1, 1, 1), (5, 3, 67), (130, 129, 300), (257, 300, 129)];
    for bits in 9..=beam_pack::beam_kernels::mma::MAX_PLANE_BITS {
        let name = beam_pack::beam_kernels::mma::NOGAPS_PLANE_NAMES[bits as usize - 9];
        assert_eq!(
            beam_pack::beam_kernels::mma::kernel_name(3, 3, bits, bits, false),
            name
        );
        for (i, &(m, k, n)) in shapes.iter().enumerate() {
            let max = i % 2 == 1;
            let a = random(&mut rng, m, k, bits, Layout::Nogaps, max);
            let b = random(&mut rng, k, n, bits, Layout::Nogaps, max);
            let lc = Layout::ALL[(i + bits as usize) % 4];
            // Outputs the sums modulo 2^32 determine: wrapped at the input's width (sai) or
            // at 16 / 32 bits (c2p2).
            for width in [OutputWidth::Sai, OutputWidth::C2p2] {
                check(&gpu, &bg, &a, &b, width, Overflow::Ovf, lc);
            }
            // Saturation needs the exact sum: run where 32 bits hold it, refused (not
            // computed wrongly) where they may not.
            let sat = beam_pack::beam_kernels::layout::SAT;
            if !beam_pack::beam_kernels::mma::needs_wide(bits, bits, k as u64, bits, sat) {
                check(&gpu, &bg, &a, &b, OutputWidth::Sai, Overflow::Sat, lc);
                continue;
            }
            let (da, db) = (
                DeviceBeamMatrix::upload(&gpu, &a).unwrap(),
                DeviceBeamMatrix::upload(&gpu, &b).unwrap(),
            );
            let mut out =
                BeamGemm::alloc_out(&gpu, &da, &db, OutputWidth::Sai, Layout::Naive).unwrap();
            let e = bg
                .gemm(&gpu, GemmKernel::Mma, &da, &db, &mut out, Overflow::Sat)
                .unwrap_err();
            assert!(matches!(e, BeamError::Kernel { kernel: "mma", .. }), "{e}");
        }
    }
}

#[test]
fn mma_sums_past_2_pow_32_exactly() {
    let Some(gpu) = gpu_for_tests("mma_sums_past_2_pow_32_exactly") else {
        return;
    };
    let bg = BeamGemm::new(&gpu).unwrap();
    let mut rng = StdRng::seed_from_u64(14);
    // 70000 x 255 x 255 > 2^32: the 64-bit sums (sat, maxv) and the wrap modulo 2^out.
    let k = 70_000;
    // B in slabs runs the mixed-layout kernel, B in nogaps the per-width one (raw ring).
    for (max, lb) in [
        (true, Layout::Slabs),
        (false, Layout::Slabs),
        (true, Layout::Nogaps),
        (false, Layout::Nogaps),
    ] {
        let a = random(&mut rng, 3, k, 8, Layout::Nogaps, max);
        let b = random(&mut rng, k, 2, 8, lb, max);
        for &width in OutputWidth::ALL {
            for overflow in [Overflow::Ovf, Overflow::Sat] {
                check(&gpu, &bg, &a, &b, width, overflow, Layout::Naive);
            }
        }
    }
}

#[test]
fn mma_refuses_wide_operands() {
    let Some(gpu) = gpu_for_tests("mma_refuses_wide_operands") else {
        return;
    };
    let bg = BeamGemm::new(&gpu).unwrap();
    let mut rng = StdRng::seed_from_u64(15);
    let a = random(&mut rng, 4, 4, 9, Layout::Naive, false);
    let b = random(&mut rng, 4, 4, 8, Layout::Naive, false);
    let (da, db) = (
        DeviceBeamMatrix::upload(&gpu, &a).unwrap(),
        DeviceBeamMatrix::upload(&gpu, &b).unwrap(),
    );
    let mut out = BeamGemm::alloc_out(&gpu, &da, &db, OutputWidth::Sai, Layout::Naive).unwrap();
    let e = bg
        .gemm(&gpu, GemmKernel::Mma, &da, &db, &mut out, Overflow::Ovf)
        .unwrap_err();
    assert!(matches!(e, BeamError::Kernel { kernel: "mma", .. }), "{e}");
}

/// A timing probe (not a test of speed: `cargo xtask bench --suites beam` measures): the
/// 1 GiB-class square product at 1, 4 and 8 bits, nogaps operands. Run with `--ignored
/// --nocapture`.
#[test]
#[ignore = "timing probe"]
fn mma_timing_probe() {
    let Some(gpu) = gpu_for_tests("mma_timing_probe") else {
        return;
    };
    let bg = BeamGemm::new(&gpu).unwrap();
    let mut rng = StdRng::seed_from_u64(16);
    let n = 11585;
    for bits in [1, 4, 8] {
        let a = random(&mut rng, n, n, bits, Layout::Nogaps, false);
        let b = random(&mut rng, n, n, bits, Layout::Nogaps, false);
        let (da, db) = (
            DeviceBeamMatrix::upload(&gpu, &a).unwrap(),
            DeviceBeamMatrix::upload(&gpu, &b).unwrap(),
        );
        for out_layout in [Layout::Naive, Layout::Nogaps] {
            let mut out =
                BeamGemm::alloc_out(&gpu, &da, &db, OutputWidth::C2p2, out_layout).unwrap();
            let mut times = Vec::new();
            for _ in 0..4 {
                gpu.synchronize().unwrap();
                let t = std::time::Instant::now();
                bg.gemm(&gpu, GemmKernel::Mma, &da, &db, &mut out, Overflow::Ovf)
                    .unwrap();
                gpu.synchronize().unwrap();
                times.push(t.elapsed().as_secs_f64());
            }
            times.sort_by(f64::total_cmp);
            let t = times[1];
            let ops = 2.0 * (n as f64).powi(3);
            println!(
                "mma {n}^3 bits {bits} out {out_layout:?}: {:.3} ms, {:.0} TOPS",
                t * 1e3,
                ops / t / 1e12
            );
        }
    }
}
