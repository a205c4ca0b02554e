//! GPU tests: every kernel of every layout against the CPU reference, bit for bit, and the
//! corruption flag. Skipped (with a message) where there is no GPU; `CMV_REQUIRE_GPU=1` turns a
//! missing GPU into a failure.

use ans_codec::cmv_format::container::{CRC_OFFSET, checksum};
use ans_codec::cmv_format::{CompressedMatrix, DeviceGemv};
use ans_codec::gpu::{AnsGemv, DeviceAnsMatrix, LaneKernel};
use ans_codec::{AnsMatrix, EncodeOptions, Layout, encode};
use cmv_runtime::{Gpu, gpu_for_tests};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal};

fn gaussian(n: usize, sigma: f64, seed: u64) -> Vec<i8> {
    let mut rng = StdRng::seed_from_u64(seed);
    let normal = Normal::new(0.0, sigma).unwrap();
    (0..n)
        .map(|_| normal.sample(&mut rng).round().clamp(-128.0, 127.0) as i8)
        .collect()
}

/// Runs `m` on the GPU and compares with `gemv_reference`; returns the GPU's error check.
fn check_against_cpu(gpu: &Gpu, ans: &AnsGemv, m: &AnsMatrix, seed: u64) -> ans_codec::Result<()> {
    let mut rng = StdRng::seed_from_u64(seed);
    let x: Vec<i8> = (0..m.cols()).map(|_| rng.r#gen()).collect();
    let scale = 1.0 / 1024.0;
    let dm = DeviceAnsMatrix::upload(gpu, m).unwrap();
    let dx = gpu.upload(&x).unwrap();
    let mut y32 = gpu.upload(&vec![i32::MIN; m.rows()]).unwrap();
    let mut y8 = gpu.upload(&vec![0x55i8; m.rows()]).unwrap();
    ans.gemv(&dm, &dx, &mut y32, &mut y8, scale).unwrap();
    let gpu_check = ans.check(gpu);
    match m.gemv_reference(&x, scale) {
        Ok((want32, want8)) => {
            assert!(
                gpu_check.is_ok(),
                "GPU flagged a matrix the CPU decodes: {gpu_check:?}"
            );
            assert_eq!(
                gpu.download(&y32).unwrap(),
                want32,
                "int32, {}x{}",
                m.rows(),
                m.cols()
            );
            assert_eq!(
                gpu.download(&y8).unwrap(),
                want8,
                "int8, {}x{}",
                m.rows(),
                m.cols()
            );
        }
        Err(e) => assert!(gpu_check.is_err(), "the CPU found {e} but the GPU did not"),
    }
    gpu_check
}

#[test]
fn every_kernel_matches_the_cpu_reference() {
    let Some(gpu) = gpu_for_tests("every_kernel_matches_the_cpu_reference") else {
        return;
    };
    let ans = AnsGemv::new(&gpu).unwrap();
    let shapes = [
        (1, 1),
        (1, 130),
        (37, 300),
        (64, 4096),
        (300, 1000),
        (1000, 4096),
        (33, 8192),
    ];
    // (sigma, forced precision): the default (P = 8 for sigma 4), the 7-bit register path,
    // pairs at 10 and 12 bits, and a wide distribution that needs 256 values.
    let models = [
        (4.0, None),
        (4.0, Some(7)),
        (4.0, Some(10)),
        (2.0, Some(12)),
        (60.0, None),
    ];
    let mut seed = 0;
    for (rows, cols) in shapes {
        for &(sigma, precision) in &models {
            seed += 1;
            let w = gaussian(rows * cols, sigma, seed);
            for layout in [Layout::WarpRows, Layout::WarpStripes] {
                let opts = EncodeOptions {
                    layout,
                    precision,
                    ..EncodeOptions::default()
                };
                let m = encode(&w, rows, cols, &opts).unwrap();
                check_against_cpu(&gpu, &ans, &m, seed).unwrap_or_else(|e| {
                    panic!(
                        "{rows}x{cols} sigma {sigma} P {} {layout:?}: {e}",
                        m.precision()
                    )
                });
            }
        }
    }
}

#[test]
fn the_lane_kernel_matches_the_cpu_reference() {
    let Some(gpu) = gpu_for_tests("the_lane_kernel_matches_the_cpu_reference") else {
        return;
    };
    let mut ans = AnsGemv::new(&gpu).unwrap();
    // Shapes with partial row groups and columns not a multiple of 16; segments from one
    // loop iteration to more than the columns (clamped), with a short last segment, and
    // more segments per row group than warps per block (9 and 40).
    // An odd number of row groups (3: the paired kernel's last block holds one).
    let cases: [(usize, usize, &[Option<usize>]); 8] = [
        (1, 1, &[None]),
        (70, 520, &[None, Some(64)]),
        (1, 130, &[None, Some(16), Some(48)]),
        (37, 300, &[None, Some(32), Some(4096)]),
        (64, 4096, &[None, Some(256), Some(448)]),
        (300, 1000, &[None, Some(112)]),
        (33, 8192, &[None, Some(208)]),
        (1000, 4096, &[None, Some(1024)]),
    ];
    let mut seed = 100;
    let mut escaped = 0;
    for (rows, cols, segments) in cases {
        for sigma in [0.3, 4.0, 20.0] {
            seed += 1;
            let w = gaussian(rows * cols, sigma, seed);
            for &segment in segments {
                for layout in [Layout::WarpLanes, Layout::WarpLanesEsc] {
                    let opts = EncodeOptions {
                        layout,
                        lane_segment: segment,
                        ..EncodeOptions::default()
                    };
                    let m = encode(&w, rows, cols, &opts).unwrap();
                    if m.entropy_report().exception_bytes > 4 * m.units() {
                        escaped += 1;
                    }
                    // Both lane kernels: two row groups per block and one.
                    for kernel in [LaneKernel::Paired, LaneKernel::Single] {
                        ans.set_lane_kernel(kernel);
                        check_against_cpu(&gpu, &ans, &m, seed).unwrap_or_else(|e| {
                            panic!(
                                "{rows}x{cols} sigma {sigma} {layout:?} segment {segment:?} \
                                 {kernel:?}: {e}"
                            )
                        });
                    }
                }
            }
        }
    }
    assert!(escaped > 0, "no matrix listed exceptions");
}

/// A chain of products, each reading the output the one before wrote into the buffer the one
/// before read (and all writing the same int32 buffer), as a model's layers run: with
/// programmatic dependent launch (Hopper) a product starts while the one before ends, so its
/// input and outputs must wait for it. Bit-exact against the CPU chain, with and without it,
/// on both lane kernels.
#[test]
fn a_chain_matches_the_cpu_with_and_without_programmatic_launch() {
    let Some(gpu) = gpu_for_tests("a_chain_matches_the_cpu_with_and_without_programmatic_launch")
    else {
        return;
    };
    // 1024: one row group per block; 8192: two per block, one block per SM.
    for (d, layers) in [(1024, 6), (8192, 4)] {
        let mats: Vec<AnsMatrix> = (0..layers)
            .map(|i| {
                let opts = EncodeOptions {
                    layout: Layout::WarpLanesEsc,
                    ..EncodeOptions::default()
                };
                encode(&gaussian(d * d, 4.0, 500 + i as u64), d, d, &opts).unwrap()
            })
            .collect();
        let mut rng = StdRng::seed_from_u64(d as u64);
        let x0: Vec<i8> = (0..d).map(|_| rng.r#gen()).collect();
        // y32 is about sqrt(d) * 4 * 74 wide; a scale that keeps y8 around +-40.
        let scale = 40.0 / (d as f32).sqrt() / 4.0 / 74.0;
        let mut want = x0.clone();
        for m in &mats {
            want = m.gemv_reference(&want, scale).unwrap().1;
        }
        assert!(want.iter().any(|&v| v != 0), "the chain died out");
        let dms: Vec<DeviceAnsMatrix> = mats
            .iter()
            .map(|m| DeviceAnsMatrix::upload(&gpu, m).unwrap())
            .collect();
        for pdl in [true, false] {
            let mut ans = AnsGemv::with_pdl(&gpu, pdl).unwrap();
            for kernel in [LaneKernel::Paired, LaneKernel::Single] {
                ans.set_lane_kernel(kernel);
                let mut bufs = [gpu.upload(&x0).unwrap(), gpu.alloc_zeros::<i8>(d).unwrap()];
                let mut y32 = gpu.alloc_zeros::<i32>(d).unwrap();
                for (i, dm) in dms.iter().enumerate() {
                    let (a, b) = bufs.split_at_mut(1);
                    let (src, dst) = if i % 2 == 0 {
                        (&a[0], &mut b[0])
                    } else {
                        (&b[0], &mut a[0])
                    };
                    ans.gemv(dm, src, &mut y32, dst, scale).unwrap();
                }
                ans.check(&gpu).unwrap();
                let got = gpu.download(&bufs[layers % 2]).unwrap();
                assert_eq!(
                    got,
                    want,
                    "d = {d}, programmatic launch {} (asked {pdl}), {kernel:?}",
                    ans.uses_pdl()
                );
            }
        }
    }
}

#[test]
fn corrupted_streams_are_flagged_not_read_past() {
    let Some(gpu) = gpu_for_tests("corrupted_streams_are_flagged_not_read_past") else {
        return;
    };
    let mut ans = AnsGemv::new(&gpu).unwrap();
    let w = gaussian(96 * 1000, 4.0, 77);
    let mut flagged = 0;
    for layout in [
        Layout::WarpRows,
        Layout::WarpStripes,
        Layout::WarpLanes,
        Layout::WarpLanesEsc,
    ] {
        let precisions: &[Option<u32>] = if layout.is_lanes() {
            &[None]
        } else {
            &[Some(7), None, Some(11)]
        };
        for &precision in precisions {
            let m = encode(
                &w,
                96,
                1000,
                &EncodeOptions {
                    layout,
                    precision,
                    lane_segment: Some(256),
                    ..Default::default()
                },
            )
            .unwrap();
            let blob = m.to_bytes();
            let stream_start = blob.len() - 4 * m.stream().len();
            let mut rng = StdRng::seed_from_u64(5);
            for _ in 0..12 {
                let mut bad = blob.clone();
                // Damage a word of the stream and make the container valid again.
                let at = stream_start + 4 * rng.gen_range(0..m.stream().len());
                bad[at..at + 4].copy_from_slice(&rng.r#gen::<u32>().to_le_bytes());
                let crc = checksum(&bad);
                bad[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_le_bytes());
                let Ok(damaged) = AnsMatrix::from_bytes(&bad) else {
                    continue;
                };
                // Same verdict as the CPU decoder, and the same result when both accept it
                // (both lane kernels).
                for kernel in [LaneKernel::Paired, LaneKernel::Single] {
                    ans.set_lane_kernel(kernel);
                    if check_against_cpu(&gpu, &ans, &damaged, 9).is_err() {
                        flagged += 1;
                    }
                }
            }
        }
    }
    assert!(flagged > 0, "no damaged stream was flagged");
}

#[test]
fn bad_arguments_are_errors() {
    let Some(gpu) = gpu_for_tests("bad_arguments_are_errors") else {
        return;
    };
    let ans = AnsGemv::new(&gpu).unwrap();
    let m = encode(
        &gaussian(64 * 256, 4.0, 1),
        64,
        256,
        &EncodeOptions::default(),
    )
    .unwrap();
    let dm = DeviceAnsMatrix::upload(&gpu, &m).unwrap();
    let short = gpu.upload(&[1i8; 255]).unwrap();
    let x = gpu.upload(&[1i8; 256]).unwrap();
    let mut y32 = gpu.alloc_zeros::<i32>(64).unwrap();
    let mut y8 = gpu.alloc_zeros::<i8>(64).unwrap();
    let mut y8_short = gpu.alloc_zeros::<i8>(63).unwrap();
    assert!(ans.gemv(&dm, &short, &mut y32, &mut y8, 1.0).is_err());
    assert!(ans.gemv(&dm, &x, &mut y32, &mut y8_short, 1.0).is_err());
    assert!(ans.gemv(&dm, &x, &mut y32, &mut y8, f32::NAN).is_err());
    ans.gemv(&dm, &x, &mut y32, &mut y8, 1.0).unwrap();
    ans.check(&gpu).unwrap();
}

#[test]
fn the_device_trait_runs_the_kernels() {
    let Some(gpu) = gpu_for_tests("the_device_trait_runs_the_kernels") else {
        return;
    };
    let kernels = AnsMatrix::load(&gpu).unwrap();
    let (rows, cols) = (100, 700);
    let w = gaussian(rows * cols, 4.0, 3);
    let x: Vec<i8> = (0..cols).map(|i| (i % 251) as u8 as i8).collect();
    for (name, opts) in AnsMatrix::variants() {
        let m = AnsMatrix::encode_slice(&w, rows, cols, &opts).unwrap();
        let dm = m.upload(&gpu).unwrap();
        let copy = AnsMatrix::clone_device(&dm).unwrap();
        assert_eq!(AnsMatrix::bytes_read(&copy), dm.bytes_read());
        let dx = gpu.upload(&x).unwrap();
        let mut out = AnsMatrix::alloc_out(&gpu, rows, 1).unwrap();
        assert!(AnsMatrix::gemv(&kernels, &copy, &dx, &mut out, 2).is_err());
        AnsMatrix::gemv(&kernels, &copy, &dx, &mut out, 1).unwrap();
        AnsMatrix::finish(&kernels, &gpu).unwrap();
        let want = m.reference(&x, 1).unwrap();
        let check = AnsMatrix::check(&gpu, &out, &want).unwrap();
        assert!(check.passed() && check.exact, "{name}: {check}");
        let mut wrong = want.clone();
        wrong[0] = wrong[0].wrapping_add(1);
        assert!(!AnsMatrix::check(&gpu, &out, &wrong).unwrap().passed());
    }
}
