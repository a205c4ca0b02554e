//! GPU tests: the CUDA-core GEMM kernels (guide, tight, slabs, nogaps and the flex-out
//! variants) against `gemm_reference`, bit-exact, for widths 1 to 64 (equal and mixed), every
//! output width (`sai`, `c2p2`, `maxv`) and overflow behaviour, on shapes that are and are not
//! multiples of the tiles, with random values of full width and all-max matrices. Skipped
//! (with a message) where there is no GPU; `CMV_REQUIRE_GPU=1` makes that a failure.
//!
//! `timing_probe` (ignored) prints kernel times on 64 MiB and 1 GiB square products:
//! `cargo test --release -p beam-pack --test gpu_gemm -- --ignored --nocapture`.

use beam_pack::cmv_runtime::{Gpu, gpu_for_tests};
use beam_pack::gpu::{BeamGemm, CudaCoreGemm, DeviceBeamMatrix, GemmKernel, PTX};
use beam_pack::{Layout, OutputWidth, Overflow, PackedMatrix, gemm_reference};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const KERNELS: [GemmKernel; 6] = [
    GemmKernel::Guide,
    GemmKernel::Tight,
    GemmKernel::Slabs,
    GemmKernel::SlabsFlexOut,
    GemmKernel::Nogaps,
    GemmKernel::NogapsFlexOut,
];

const LAYOUTS: [Layout; 4] = [Layout::Naive, Layout::Tight, Layout::Slabs, Layout::Nogaps];

fn layout_of(kernel: GemmKernel) -> Layout {
    match kernel {
        GemmKernel::Guide => Layout::Naive,
        GemmKernel::Tight => Layout::Tight,
        GemmKernel::Slabs | GemmKernel::SlabsFlexOut => Layout::Slabs,
        _ => Layout::Nogaps,
    }
}

fn values(rng: &mut StdRng, n: usize, bits: u32, max: bool) -> Vec<u64> {
    let top = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let mut v: Vec<u64> = (0..n)
        .map(|_| if max { top } else { rng.gen_range(0..=top) })
        .collect();
    // Full width: the top value appears at least once.
    v[n / 2] = top;
    v
}

/// One operand pair in every layout, on the host and the device.
struct Operands {
    host: Vec<(PackedMatrix, PackedMatrix)>,
    dev: Vec<(DeviceBeamMatrix, DeviceBeamMatrix)>,
}

fn operands(
    gpu: &Gpu,
    av: &[u64],
    bv: &[u64],
    (m, k, n): (usize, usize, usize),
    bits: (u32, u32),
) -> Operands {
    let host: Vec<_> = LAYOUTS
        .iter()
        .map(|&l| {
            (
                PackedMatrix::pack(av, m, k, bits.0, l).unwrap(),
                PackedMatrix::pack(bv, k, n, bits.1, l).unwrap(),
            )
        })
        .collect();
    let dev = host
        .iter()
        .map(|(a, b)| {
            (
                DeviceBeamMatrix::upload(gpu, a).unwrap(),
                DeviceBeamMatrix::upload(gpu, b).unwrap(),
            )
        })
        .collect();
    Operands { host, dev }
}

/// Runs every kernel that takes the operands with `width` and `overflow` and compares with the
/// reference. Returns the launches made.
fn check_all(
    gpu: &Gpu,
    bg: &BeamGemm,
    ops: &Operands,
    width: OutputWidth,
    overflow: Overflow,
) -> usize {
    let (a0, b0) = &ops.host[0];
    let want = gemm_reference(a0, b0, width, overflow, Layout::Naive).unwrap();
    let want_values = want.unpack();
    let mut launches = 0;
    for kernel in KERNELS {
        let l = layout_of(kernel);
        let li = LAYOUTS.iter().position(|&x| x == l).unwrap();
        let (da, db) = &ops.dev[li];
        let out_bits = want.bits();
        if kernel
            .accepts((da.bits(), l), (db.bits(), l), out_bits, l)
            .is_err()
        {
            continue;
        }
        let mut out = BeamGemm::alloc_out(gpu, da, db, width, l).unwrap();
        assert_eq!(out.bits(), out_bits);
        bg.gemm(gpu, kernel, da, db, &mut out, overflow).unwrap();
        // `download` checks the canonical packing.
        let got = out.download(gpu).unwrap_or_else(|e| {
            panic!(
                "{} {}x{}x{} bits {}/{} {width:?} {overflow:?}: {e}",
                kernel.name(),
                da.rows(),
                da.cols(),
                db.cols(),
                da.bits(),
                db.bits()
            )
        });
        let got_values = got.unpack();
        if got_values != want_values {
            let i = got_values
                .iter()
                .zip(&want_values)
                .position(|(g, w)| g != w)
                .unwrap();
            panic!(
                "{} ({}) {}x{}x{} bits {}/{} -> {out_bits} {width:?} {overflow:?}: first difference \
                 at ({}, {}): got {:#x}, want {:#x}",
                kernel.name(),
                CudaCoreGemm::entry_point(kernel, da, db, out_bits, overflow).unwrap(),
                da.rows(),
                da.cols(),
                db.cols(),
                da.bits(),
                db.bits(),
                i / db.cols(),
                i % db.cols(),
                got_values[i],
                want_values[i]
            );
        }
        launches += 1;
    }
    launches
}

fn run_cases(test: &str, shapes: &[(usize, usize, usize)], pairs: &[(u32, u32)], seed: u64) {
    let Some(gpu) = gpu_for_tests(test) else {
        return;
    };
    let bg = BeamGemm::new(&gpu).unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut launches = 0;
    for &(m, k, n) in shapes {
        for &(ab, bb) in pairs {
            for max in [false, true] {
                let av = values(&mut rng, m * k, ab, max);
                let bv = values(&mut rng, k * n, bb, max);
                let ops = operands(&gpu, &av, &bv, (m, k, n), (ab, bb));
                for width in [OutputWidth::Sai, OutputWidth::C2p2, OutputWidth::Maxv] {
                    for overflow in [Overflow::Ovf, Overflow::Sat] {
                        launches += check_all(&gpu, &bg, &ops, width, overflow);
                    }
                }
            }
        }
    }
    eprintln!("{test}: {launches} launches matched the reference");
}

const WIDTHS: [u32; 15] = [1, 2, 3, 7, 8, 9, 16, 17, 25, 31, 32, 33, 48, 63, 64];

/// Equal widths: every kernel, small shapes.
#[test]
fn equal_widths_small_shapes() {
    let pairs: Vec<(u32, u32)> = WIDTHS.iter().map(|&b| (b, b)).collect();
    run_cases(
        "equal_widths_small_shapes",
        &[(1, 1, 1), (3, 67, 5), (33, 70, 17)],
        &pairs,
        1,
    );
}

/// Equal widths: every kernel, shapes of whole tiles and beyond.
#[test]
fn equal_widths_larger_shapes() {
    let pairs: Vec<(u32, u32)> = WIDTHS.iter().map(|&b| (b, b)).collect();
    run_cases(
        "equal_widths_larger_shapes",
        &[(64, 64, 64), (100, 300, 90)],
        &pairs,
        2,
    );
}

/// A and B of different widths: guide, tight and the flex-out kernels (the others need the
/// output as wide as the input, which `sai` gives).
#[test]
fn mixed_widths() {
    let pairs = [
        (1, 64),
        (64, 1),
        (3, 17),
        (9, 33),
        (25, 8),
        (32, 33),
        (48, 7),
        (2, 31),
        (16, 63),
    ];
    run_cases(
        "mixed_widths",
        &[(1, 1, 1), (3, 67, 5), (33, 70, 17), (100, 300, 90)],
        &pairs,
        3,
    );
}

/// A long inner dimension: sums that pass 2^32 and 2^64 (all-max operands), wrapping and
/// saturating in every arithmetic.
#[test]
fn long_inner_dimension() {
    run_cases(
        "long_inner_dimension",
        &[(5, 4099, 7)],
        &[
            (8, 8),
            (16, 16),
            (17, 16),
            (31, 32),
            (32, 32),
            (33, 33),
            (64, 64),
        ],
        4,
    );
}

/// Sums at and around 2^64 with 64-bit operands (`satu64`: exactly `2^64 - 2`, `2^64 - 1`,
/// `2^64`, `2^64 + 1`, sums of 67 terms just below and above 2^64), next to sums far from it,
/// in `ovf` and `sat`.
#[test]
fn saturation_near_2_64() {
    let Some(gpu) = gpu_for_tests("saturation_near_2_64") else {
        return;
    };
    let bg = BeamGemm::new(&gpu).unwrap();
    let (k, n) = (67usize, 3usize);
    let h = 1u64 << 63;
    let x = u64::MAX / 67; // 67 x < 2^64 < 67 (x + 1)
    let mut rows: Vec<Vec<u64>> = vec![
        vec![h, h - 2],
        vec![h, h - 1],
        vec![h, h],
        vec![h, h + 1],
        vec![u64::MAX, 0],
        vec![u64::MAX, 1],
        vec![x; k],
        vec![x + 1; k],
        vec![5, 7],
        vec![u64::MAX; k],
    ];
    for r in &mut rows {
        r.resize(k, 0);
    }
    let m = rows.len();
    let av: Vec<u64> = rows.concat();
    // B: column 0 all ones, column 1 ones on even rows, column 2 a single one.
    let bv: Vec<u64> = (0..k)
        .flat_map(|t| [1, u64::from(t % 2 == 0), u64::from(t == 1)])
        .collect();
    let ops = operands(&gpu, &av, &bv, (m, k, n), (64, 1));
    let mut launches = 0;
    for width in [OutputWidth::Sai, OutputWidth::Maxv] {
        for overflow in [Overflow::Ovf, Overflow::Sat] {
            launches += check_all(&gpu, &bg, &ops, width, overflow);
        }
    }
    assert!(launches >= 24, "{launches}");
}

/// Every entry point the launcher may pick is in the committed PTX (no GPU needed).
#[test]
fn entry_points_are_in_the_ptx() {
    use beam_pack::beam_kernels::gemm::{Kernel, MODES, PACKED, entry};
    for k in PACKED.into_iter().chain([Kernel::Guide]) {
        for m in MODES {
            let name = entry(k, m);
            assert!(
                PTX.ptx.contains(&format!(".entry {name}(")),
                "{name} is not in the PTX"
            );
        }
    }
}

/// Kernel times on square products of 64 MiB and 1 GiB (as naive `u64` matrices: sides 2896
/// and 11585) for a few widths, `ovf` and `sat` with `sai`; every timed output is checked
/// against exact dot products on a sample of elements. Prints
/// `T side bits kernel overflow entry microseconds`.
#[test]
#[ignore = "timing probe: run with --ignored --nocapture on a GPU"]
fn timing_probe() {
    let Some(gpu) = gpu_for_tests("timing_probe") else {
        return;
    };
    let bg = BeamGemm::new(&gpu).unwrap();
    let sides: Vec<usize> = std::env::var("CMV_BEAM_SIDES")
        .ok()
        .map(|s| s.split(',').map(|x| x.parse().unwrap()).collect())
        .unwrap_or_else(|| vec![2896, 11585]);
    let widths: Vec<u32> = std::env::var("CMV_BEAM_WIDTHS")
        .ok()
        .map(|s| s.split(',').map(|x| x.parse().unwrap()).collect())
        .unwrap_or_else(|| vec![1, 4, 8, 16, 25, 32, 48, 64]);
    let mut rng = StdRng::seed_from_u64(7);
    for &side in &sides {
        for &bits in &widths {
            let n = side * side;
            let v = values(&mut rng, n, bits, false);
            for kernel in KERNELS {
                if matches!(kernel, GemmKernel::SlabsFlexOut | GemmKernel::NogapsFlexOut) {
                    continue;
                }
                let l = layout_of(kernel);
                let a = PackedMatrix::pack(&v, side, side, bits, l).unwrap();
                let da = DeviceBeamMatrix::upload(&gpu, &a).unwrap();
                for overflow in [Overflow::Ovf, Overflow::Sat] {
                    let mut out = BeamGemm::alloc_out(&gpu, &da, &da, OutputWidth::Sai, l).unwrap();
                    let reps = if side > 4000 { 1 } else { 3 };
                    bg.gemm(&gpu, kernel, &da, &da, &mut out, overflow).unwrap();
                    gpu.synchronize().unwrap();
                    let t = std::time::Instant::now();
                    for _ in 0..reps {
                        bg.gemm(&gpu, kernel, &da, &da, &mut out, overflow).unwrap();
                    }
                    gpu.synchronize().unwrap();
                    let us = t.elapsed().as_secs_f64() * 1e6 / reps as f64;
                    let got = out.download(&gpu).unwrap();
                    // Spot check 64 outputs against an exact dot product.
                    let mask = if out.bits() == 64 {
                        u64::MAX
                    } else {
                        (1u64 << out.bits()) - 1
                    };
                    for _ in 0..64 {
                        let (i, j) = (rng.gen_range(0..side), rng.gen_range(0..side));
                        let (mut s, mut huge) = (0u128, false);
                        for t in 0..side {
                            let (x, c) = s.overflowing_add(
                                u128::from(v[i * side + t]) * u128::from(v[t * side + j]),
                            );
                            s = x;
                            huge |= c;
                        }
                        let want = match overflow {
                            Overflow::Ovf => s as u64 & mask,
                            Overflow::Sat => {
                                if huge || s > u128::from(mask) {
                                    mask
                                } else {
                                    s as u64
                                }
                            }
                        };
                        assert_eq!(
                            got.get(i, j),
                            Some(want),
                            "{} {side} {bits} {overflow:?} ({i},{j})",
                            kernel.name()
                        );
                    }
                    println!(
                        "T {side} {bits} {} {} {} {us:.0}",
                        kernel.name(),
                        overflow.name(),
                        CudaCoreGemm::entry_point(kernel, &da, &da, out.bits(), overflow)
                            .unwrap()
                            .trim_start_matches("cmv_beam_gemm_"),
                    );
                }
            }
        }
    }
}
