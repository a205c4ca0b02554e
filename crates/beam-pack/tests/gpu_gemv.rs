//! GPU tests: the GEMV kernels (`BeamGemv::gemv`) against `gemv_reference`, bit-exact, for
//! widths 1 to 64, every layout, 1 to 16 vectors, every output width and overflow behaviour;
//! the `DeviceGemv` path against `PackedMatrix::reference` with full-range `u64` inputs; the
//! launcher's refusals. Skipped (with a message) where there is no GPU; `CMV_REQUIRE_GPU=1`
//! makes that a failure. `timing` (ignored) measures the fast kernels on the LLM shapes.

use beam_pack::beam_kernels::gemv_ring::ring_smem_bytes;
use beam_pack::beam_kernels::gemv_stream::{StreamShape, stream_warps};
use beam_pack::beam_kernels::layout;
use beam_pack::cmv_format::{DeviceGemv, FormatError, HeaderCode};
use beam_pack::cmv_runtime::{Gpu, gpu_for_tests, time_launches};
use beam_pack::gpu::{BeamGemm, BeamGemv, DeviceBeamMatrix, DeviceBeamOut, GemvPath, GemvPrep};
use beam_pack::{BeamError, Layout, OutputWidth, Overflow, PackedMatrix, gemv_reference};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn top(bits: u32) -> u64 {
    if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

fn random(
    rng: &mut StdRng,
    (rows, cols): (usize, usize),
    bits: u32,
    layout: Layout,
    max: bool,
) -> PackedMatrix {
    let t = top(bits);
    let v: Vec<u64> = (0..rows * cols)
        .map(|_| if max { t } else { rng.gen_range(0..=t) })
        .collect();
    PackedMatrix::pack(&v, rows, cols, bits, layout).unwrap()
}

/// Panics naming `what` and the first differing output unless `got` equals `want` (values and
/// canonical packing).
fn assert_same(got: &PackedMatrix, want: &PackedMatrix, what: &str) {
    let (g, w) = (got.unpack(), want.unpack());
    let i = g.iter().zip(&w).position(|(p, q)| p != q);
    assert!(
        i.is_none() && got == want,
        "{what}: first difference at output {i:?}: got {:?}, want {:?}",
        i.map(|i| g[i]),
        i.map(|i| w[i]),
    );
}

/// Runs `A x B` on the GPU and compares with `gemv_reference`; returns the kernel's name.
#[allow(clippy::too_many_arguments)]
fn check(
    gpu: &Gpu,
    bg: &BeamGemv,
    a: &PackedMatrix,
    b: &PackedMatrix,
    width: OutputWidth,
    overflow: Overflow,
    out_layout: Layout,
) -> &'static str {
    let want = gemv_reference(a, b, width, overflow, out_layout).unwrap();
    let (da, db) = (
        DeviceBeamMatrix::upload(gpu, a).unwrap(),
        DeviceBeamMatrix::upload(gpu, b).unwrap(),
    );
    let mut out = BeamGemm::alloc_out(gpu, &da, &db, width, out_layout).unwrap();
    assert_eq!(out.bits(), want.bits());
    let name = bg.kernel_name(&da, &db, out.bits(), overflow);
    if std::env::var("BEAM_GEMV_TRACE").is_ok() {
        eprintln!(
            "{name} {}x{} b{} {} n{} b{} {} -> {}",
            a.rows(),
            a.cols(),
            a.bits(),
            a.layout().name(),
            b.cols(),
            b.bits(),
            b.layout().name(),
            out_layout.name()
        );
    }
    bg.gemv(gpu, &da, &db, &mut out, overflow).unwrap();
    let what = format!(
        "{name}: {}x{} (bits {}, {}) x {} vector(s) (bits {}, {}) -> {} bits {} {} {}",
        a.rows(),
        a.cols(),
        a.bits(),
        a.layout().name(),
        b.cols(),
        b.bits(),
        b.layout().name(),
        want.bits(),
        out_layout.name(),
        width.name(),
        overflow.name(),
    );
    assert_same(&out.download(gpu).unwrap(), &want, &what);
    name
}

/// Runs `A x^T` for the `1 x k` vector `x` through `BeamGemv::gemv_row` and compares with
/// `gemv_reference` of the same vector as a column (values and canonical packing); returns the
/// kernel's name.
fn check_row(
    gpu: &Gpu,
    bg: &BeamGemv,
    a: &PackedMatrix,
    x: &PackedMatrix,
    (width, overflow): (OutputWidth, Overflow),
    out_layout: Layout,
) -> &'static str {
    // The vectors as the columns of a k x n matrix.
    let (n, k) = (x.rows(), x.cols());
    let xv = x.unpack();
    let t: Vec<u64> = (0..k * n).map(|i| xv[(i % n) * k + i / n]).collect();
    let column = PackedMatrix::pack(&t, k, n, x.bits(), x.layout()).unwrap();
    let want = gemv_reference(a, &column, width, overflow, out_layout).unwrap();
    let (da, dx) = (
        DeviceBeamMatrix::upload(gpu, a).unwrap(),
        DeviceBeamMatrix::upload(gpu, x).unwrap(),
    );
    let mut out = BeamGemv::alloc_row_out(gpu, &da, &dx, width, out_layout).unwrap();
    assert_eq!(out.bits(), want.bits());
    let name = bg.row_kernel_name(&da, &dx, out.bits(), overflow);
    // Twice: the second run must not depend on what the first left in the output.
    for run in 0..2 {
        bg.gemv_row(gpu, &da, &dx, &mut out, overflow).unwrap();
        let what = format!(
            "{name} run {run}: {}x{} b{} x ({}x{} b{} {}) -> {} bits {} {} {}",
            a.rows(),
            a.cols(),
            a.bits(),
            x.rows(),
            x.cols(),
            x.bits(),
            x.layout().name(),
            want.bits(),
            out_layout.name(),
            width.name(),
            overflow.name(),
        );
        assert_same(&out.download(gpu).unwrap(), &want, &what);
    }
    name
}

/// Products queued back to back without a synchronization, with and without programmatic
/// dependent launch (Hopper): each output equals the CPU product, also where consecutive
/// products write the same output (the later one must win) and where a product's weights are
/// the ones the product before it read.
#[test]
fn programmatic_launch_gives_the_same_bits_in_a_queue() {
    let Some(gpu) = gpu_for_tests("programmatic_launch_gives_the_same_bits_in_a_queue") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(0x9D1_0BEA);
    let hopper = gpu.info().compute_capability == (9, 0);
    let plain = (OutputWidth::Sai, Overflow::Ovf);
    for pdl in [true, false] {
        let bg = BeamGemv::new(&gpu).unwrap().with_pdl(&gpu, pdl).unwrap();
        assert_eq!(bg.uses_pdl(), pdl && hopper);
        for bits in [4, 6, 8, 12, 16, 24, 32] {
            for &(rows, cols) in &[(4096, 4096), (300, 4109), (9000, 2048)] {
                let mats: Vec<_> = (0..3)
                    .map(|_| random(&mut rng, (rows, cols), bits, Layout::Nogaps, false))
                    .collect();
                let xs: Vec<_> = (0..3)
                    .map(|_| random(&mut rng, (1, cols), bits, Layout::Nogaps, false))
                    .collect();
                let da: Vec<_> = mats
                    .iter()
                    .map(|m| DeviceBeamMatrix::upload(&gpu, m).unwrap())
                    .collect();
                let dx: Vec<_> = xs
                    .iter()
                    .map(|m| DeviceBeamMatrix::upload(&gpu, m).unwrap())
                    .collect();
                let alloc = || {
                    BeamGemv::alloc_row_out(&gpu, &da[0], &dx[0], plain.0, Layout::Nogaps).unwrap()
                };
                let (mut o1, mut o2) = (alloc(), alloc());
                // (matrix, vector, output): o1 written three times, o2 twice, interleaved.
                let queue = [
                    (0, 0, 1),
                    (1, 1, 1),
                    (2, 2, 2),
                    (0, 1, 2),
                    (1, 2, 1),
                    (2, 0, 1),
                ];
                // 4096x4096 at 4 bits is one full wave of the direct kernel (512 blocks of 64
                // registers per thread, 4 per SM on 132 SMs): programmatic on Hopper. (At 8
                // bits the split takes 8 slices: 1024 blocks, two waves, an ordinary launch.)
                if (rows, cols) == (4096, 4096) && bits == 4 {
                    let p = bg.row_launch_is_programmatic(&da[0], &dx[0], &o1, plain.1);
                    if !hopper || !pdl {
                        assert!(!p, "{bits} bits");
                    } else if gpu.info().sm_count == 132 {
                        assert!(p, "{bits} bits");
                    }
                }
                for &(m, v, o) in &queue {
                    let out = if o == 1 { &mut o1 } else { &mut o2 };
                    bg.gemv_row(&gpu, &da[m], &dx[v], out, plain.1).unwrap();
                }
                for (o, out) in [(1, &o1), (2, &o2)] {
                    let &(m, v, _) = queue.iter().rev().find(|q| q.2 == o).unwrap();
                    let xv = xs[v].unpack();
                    let column = PackedMatrix::pack(&xv, cols, 1, bits, Layout::Nogaps).unwrap();
                    let want = gemv_reference(&mats[m], &column, plain.0, plain.1, Layout::Nogaps)
                        .unwrap();
                    let what = format!("pdl {pdl}, {bits} bits, {rows}x{cols}, output {o}");
                    assert_same(&out.download(&gpu).unwrap(), &want, &what);
                }
            }
        }
    }
}

/// The direct kernel with blocks of 6, 7 and 8 warps (`direct_block_warps` picks among them
/// by shape and SM count): the same bits, one vector and several, rows that end mid-block.
#[test]
fn direct_kernel_blocks_of_six_to_eight_warps() {
    let Some(gpu) = gpu_for_tests("direct_kernel_blocks_of_six_to_eight_warps") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(0xD1_0C6);
    let plain = (OutputWidth::Sai, Overflow::Ovf);
    for warps in [6, 7, 8] {
        let bg = BeamGemv::new(&gpu)
            .unwrap()
            .with_direct_warps(warps)
            .unwrap();
        for bits in [4, 6, 8, 12, 16, 24, 32] {
            for &(shape, n) in &[
                ((14336, 512), 1),
                ((1001, 2048), 1),
                ((95, 777), 4),
                ((29, 300), 16),
            ] {
                let a = random(&mut rng, shape, bits, Layout::Nogaps, false);
                let x = random(&mut rng, (n, shape.1), bits, Layout::Nogaps, false);
                let name = check_row(&gpu, &bg, &a, &x, plain, Layout::Naive);
                assert!(
                    name.starts_with("cmv_beam_gemv_direct_b"),
                    "{warps} warps: {name}"
                );
            }
        }
    }
    assert!(BeamGemv::new(&gpu).unwrap().with_direct_warps(5).is_err());
    assert!(BeamGemv::new(&gpu).unwrap().with_direct_warps(9).is_err());
}

#[test]
fn row_vectors_run_the_direct_kernel() {
    let Some(gpu) = gpu_for_tests("row_vectors_run_the_direct_kernel") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(0xBEA4_D1EC);
    let bg = BeamGemv::new(&gpu).unwrap();
    let mut shapes = SHAPES.to_vec();
    // Many rows (whole rows per warp), few long rows (slices), 16-byte aligned rows (even
    // words per row) and unaligned ones, a partial last chunk.
    shapes.extend([
        (2000, 256),
        (5, 20000),
        (16, 512),
        (33, 513),
        (700, 3000),
        (9, 4096),
        // Short rows on many warps: split past the warp cap where short rows are split (2
        // slices at 4 bits; an H100), one slice where not (an H200).
        (9000, 2048),
    ]);
    let plain = (OutputWidth::Sai, Overflow::Ovf);
    for bits in [4, 6, 8, 12, 16, 24, 32] {
        for &shape in &shapes {
            for max in [false, true] {
                let a = random(&mut rng, shape, bits, Layout::Nogaps, max);
                let x = random(&mut rng, (1, shape.1), bits, Layout::Nogaps, max);
                let name = check_row(&gpu, &bg, &a, &x, plain, Layout::Naive);
                assert!(
                    name.starts_with("cmv_beam_gemv_direct_b"),
                    "{bits} bits ran {name}"
                );
                // Outputs written in place of their packing (nogaps: a word per row) and by
                // atomic ORs into zeroed words (tight).
                for out_layout in [Layout::Nogaps, Layout::Tight] {
                    check_row(&gpu, &bg, &a, &x, plain, out_layout);
                }
            }
        }
        // Other output widths and saturation: the direct kernel where the sums stay exact
        // modulo 2^32, the general kernel otherwise.
        let a = random(&mut rng, (300, 4109), bits, Layout::Nogaps, false);
        let x = random(&mut rng, (1, 4109), bits, Layout::Nogaps, false);
        for width in [OutputWidth::Sai, OutputWidth::C2p2, OutputWidth::Maxv] {
            for overflow in [Overflow::Ovf, Overflow::Sat] {
                check_row(&gpu, &bg, &a, &x, (width, overflow), Layout::Nogaps);
            }
        }
    }
    // Several vectors: every vector-slot count (2, 4, 8, 16) and counts between them.
    for bits in [4, 6, 8, 12, 16, 24, 32] {
        for n in [2, 3, 4, 5, 8, 9, 16] {
            for &shape in &[(37, 1000), (300, 4109), (5, 20000), (700, 3000)] {
                let a = random(&mut rng, shape, bits, Layout::Nogaps, false);
                let x = random(&mut rng, (n, shape.1), bits, Layout::Nogaps, n == 16);
                let name = check_row(&gpu, &bg, &a, &x, plain, Layout::Naive);
                assert!(
                    name.starts_with("cmv_beam_gemv_direct_b"),
                    "{n} vectors ran {name}"
                );
            }
            let a = random(&mut rng, (33, 513), bits, Layout::Nogaps, true);
            let x = random(&mut rng, (n, 513), bits, Layout::Nogaps, true);
            check_row(&gpu, &bg, &a, &x, plain, Layout::Nogaps);
        }
    }
    // Several vectors on another path: the general kernel with B transposed.
    let a = random(&mut rng, (300, 4109), 8, Layout::Nogaps, false);
    let x = random(&mut rng, (5, 4109), 8, Layout::Nogaps, false);
    let name = check_row(
        &gpu,
        &BeamGemv::new(&gpu).unwrap().with_path(GemvPath::CudaCores),
        &a,
        &x,
        plain,
        Layout::Naive,
    );
    assert_eq!(name, "cmv_beam_gemv_any");
    // Not the direct kernel: widths without one, a vector of another width or layout, other
    // paths. These run the column-vector kernels with the vector read transposed.
    for (bits, x_bits, x_layout) in [
        (5, 5, Layout::Nogaps),
        (3, 3, Layout::Nogaps),
        (8, 7, Layout::Nogaps),
        (8, 8, Layout::Tight),
        (12, 12, Layout::Slabs),
        (20, 20, Layout::Nogaps),
    ] {
        for &shape in &[(37, 1000), (700, 3000)] {
            let a = random(&mut rng, shape, bits, Layout::Nogaps, false);
            let x = random(&mut rng, (1, shape.1), x_bits, x_layout, false);
            let name = check_row(&gpu, &bg, &a, &x, plain, Layout::Naive);
            assert!(!name.contains("direct"), "{bits} bits ran {name}");
        }
    }
    for path in [
        GemvPath::CudaCores,
        GemvPath::CudaRing,
        GemvPath::TensorCores,
        GemvPath::Any,
    ] {
        let bgp = BeamGemv::new(&gpu).unwrap().with_path(path);
        let a = random(&mut rng, (700, 3000), 8, Layout::Nogaps, false);
        let x = random(&mut rng, (1, 3000), 8, Layout::Nogaps, false);
        let name = check_row(&gpu, &bgp, &a, &x, plain, Layout::Naive);
        assert!(!name.contains("direct"), "{path:?} ran {name}");
    }
    // Shapes the product refuses.
    let a = DeviceBeamMatrix::upload(&gpu, &random(&mut rng, (5, 10), 8, Layout::Nogaps, false))
        .unwrap();
    let bad = DeviceBeamMatrix::upload(&gpu, &random(&mut rng, (1, 9), 8, Layout::Nogaps, false))
        .unwrap();
    let col = DeviceBeamMatrix::upload(&gpu, &random(&mut rng, (10, 1), 8, Layout::Nogaps, false))
        .unwrap();
    let mut out = DeviceBeamOut::alloc(&gpu, 5, 1, 8, Layout::Naive).unwrap();
    for x in [&bad, &col] {
        let e = bg
            .gemv_row(&gpu, &a, x, &mut out, Overflow::Ovf)
            .unwrap_err();
        assert!(matches!(e, BeamError::GemmShape { .. }), "{e}");
    }
    let many =
        DeviceBeamMatrix::upload(&gpu, &random(&mut rng, (17, 10), 8, Layout::Nogaps, false))
            .unwrap();
    let mut out17 = DeviceBeamOut::alloc(&gpu, 5, 17, 8, Layout::Naive).unwrap();
    let e = bg
        .gemv_row(&gpu, &a, &many, &mut out17, Overflow::Ovf)
        .unwrap_err();
    assert!(matches!(e, BeamError::GemvColumns { cols: 17 }), "{e}");
    let good = DeviceBeamMatrix::upload(&gpu, &random(&mut rng, (1, 10), 8, Layout::Nogaps, false))
        .unwrap();
    let mut wrong = DeviceBeamOut::alloc(&gpu, 4, 1, 8, Layout::Naive).unwrap();
    let e = bg
        .gemv_row(&gpu, &a, &good, &mut wrong, Overflow::Ovf)
        .unwrap_err();
    assert!(e.to_string().contains("n columns"), "{e}");
}

const SHAPES: [(usize, usize); 4] = [(1, 1), (3, 67), (37, 1000), (300, 4096 + 13)];

#[test]
fn fast_kernels_every_width_up_to_32() {
    let Some(gpu) = gpu_for_tests("fast_kernels_every_width_up_to_32") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(0xBEA4_0001);
    let mut shapes = SHAPES.to_vec();
    // Many rows (tiles looped by the persistent grid), few long rows (slices), whole and
    // partial 256-column segments of the tensor-core kernels.
    // The streaming kernel's tiles split over several warps (and several tiles per warp).
    shapes.extend([(2000, 256), (5, 20000), (16, 512), (33, 513), (700, 3000)]);
    // The kernel families, each with the vector written by the separate prep kernel (the
    // default) and built in the kernel (`Fused`; the streaming kernel always uses the prep
    // kernel).
    let combos = [
        GemvPath::Stream,
        GemvPath::TensorCores,
        GemvPath::CudaCores,
        GemvPath::CudaRing,
    ]
    .into_iter()
    .flat_map(|p| [GemvPrep::Auto, GemvPrep::Fused].map(|q| (p, q)));
    for ((path, prep), bits) in combos.flat_map(|c| (1..=32u32).map(move |b| (c, b))) {
        let cuda = matches!(path, GemvPath::CudaCores | GemvPath::CudaRing);
        if !cuda && bits > 8 {
            continue;
        }
        let bg = BeamGemv::new(&gpu).unwrap().with_path(path).with_prep(prep);
        let fast = if path == GemvPath::Stream {
            format!("cmv_beam_gemv_stream_b{bits}")
        } else if path == GemvPath::TensorCores {
            format!("cmv_beam_gemv_mma_b{bits}")
        } else if path == GemvPath::CudaRing {
            format!("cmv_beam_gemv_ring_b{bits}")
        } else {
            format!("cmv_beam_gemv_nogaps_b{bits}")
        };
        eprintln!(
            "fast kernels ({}, prep {}): {bits} bits",
            path.name(),
            prep.name()
        );
        for (i, &shape) in shapes.iter().enumerate() {
            let max = i == 2;
            let a = random(&mut rng, shape, bits, Layout::Nogaps, max);
            // B as wide as A or narrower, in every layout; the output in every layout.
            let b_bits = if i % 2 == 0 { bits } else { bits.div_ceil(2) };
            let b_layout = Layout::ALL[(bits as usize + i) % 4];
            let b = random(&mut rng, (shape.1, 1), b_bits, b_layout, max);
            let out_layout = Layout::ALL[(bits as usize + 2 * i) % 4];
            let name = check(
                &gpu,
                &bg,
                &a,
                &b,
                OutputWidth::Sai,
                Overflow::Ovf,
                out_layout,
            );
            assert_eq!(name, fast);
            // sat with an exact result below 2^32 also runs the fast kernel.
            let acc = layout::acc_for(bits, b_bits, shape.1 as u64, bits.max(b_bits), layout::SAT);
            if acc == layout::Acc::U32 {
                let name = check(
                    &gpu,
                    &bg,
                    &a,
                    &b,
                    OutputWidth::Sai,
                    Overflow::Sat,
                    out_layout,
                );
                assert_eq!(name, fast);
            }
        }
    }
}

#[test]
fn stream_kernel_every_vector_width() {
    let Some(gpu) = gpu_for_tests("stream_kernel_every_vector_width") else {
        return;
    };
    let bg = BeamGemv::new(&gpu).unwrap().with_path(GemvPath::Stream);
    let mut rng = StdRng::seed_from_u64(0xBEA4_0051);
    // Vectors of 1 to 4 byte planes (their fragments hold only those), 16 or 8 warps per
    // block (28672 columns of a 32-bit vector leave room for 8 rings only), tiles split over
    // warps.
    for (bits, shape) in [
        (3u32, (300, 4109)),
        (4, (37, 28672)),
        (8, (500, 1000)),
        (6, (64, 8192)),
    ] {
        for b_bits in [1u32, 8, 9, 16, 17, 24, 25, 32] {
            let max = b_bits % 2 == 0;
            let a = random(&mut rng, shape, bits, Layout::Nogaps, max);
            let b = random(&mut rng, (shape.1, 1), b_bits, Layout::Tight, max);
            let name = check(
                &gpu,
                &bg,
                &a,
                &b,
                OutputWidth::C2p2,
                Overflow::Ovf,
                Layout::Naive,
            );
            assert_eq!(
                name,
                format!("cmv_beam_gemv_stream_b{bits}"),
                "vector of {b_bits} bits"
            );
        }
    }
}

/// `A` (`dims`, `nogaps`) times a `tight` vector, both of `bits`, all-max values in `A` when
/// `a_max` (else in the vector), `sai/ovf` into a naive output, checked by [`check`]; returns
/// the kernel that ran.
fn check_nogaps_times_tight(
    gpu: &Gpu,
    bg: &BeamGemv,
    rng: &mut StdRng,
    bits: u32,
    dims: (usize, usize),
    a_max: bool,
) -> &'static str {
    let a = random(rng, dims, bits, Layout::Nogaps, a_max);
    let b = random(rng, (dims.1, 1), bits, Layout::Tight, !a_max);
    check(
        gpu,
        bg,
        &a,
        &b,
        OutputWidth::Sai,
        Overflow::Ovf,
        Layout::Naive,
    )
}

#[test]
fn stream_kernel_every_shape() {
    let Some(gpu) = gpu_for_tests("stream_kernel_every_shape") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(0xBEA4_0052);
    let mut ran = 0;
    // Units of 1 to 16 segments (a row's last unit short or past the row), 2 to 8 stages,
    // 4, 8 or 16 warps (16 run as 8 at 7 bits): every shape gives the exact product.
    for (i, (unit_segs, stages, warps)) in [
        (1, 2, 4),
        (3, 3, 16),
        (16, 2, 8),
        (2, 8, 4),
        (5, 3, 4),
        (2, 2, 16),
    ]
    .into_iter()
    .enumerate()
    {
        let shape = StreamShape { unit_segs, stages };
        // Every other shape with the fused preparation (fragments built in the kernel, sums
        // left zero by each launch for the next: three products in a row on one BeamGemv).
        let prep = if i % 2 == 1 {
            GemvPrep::Fused
        } else {
            GemvPrep::Auto
        };
        let bg = BeamGemv::new(&gpu)
            .unwrap()
            .with_path(GemvPath::Stream)
            .with_prep(prep)
            .with_stream_shape(shape, warps)
            .unwrap();
        for (bits, dims) in [(4u32, (300, 4109)), (7, (37, 2000)), (2, (1000, 300))] {
            let name = check_nogaps_times_tight(&gpu, &bg, &mut rng, bits, dims, i % 2 == 0);
            // Where the rings and the fragments do not fit even with 4 warps, another
            // kernel ran (and was checked).
            let max_smem = gpu.info().max_smem_per_block_optin;
            let fits = stream_warps(bits, shape, (dims.1 as u32, 1), warps, max_smem).is_some();
            if fits {
                assert_eq!(name, format!("cmv_beam_gemv_stream_b{bits}"), "{shape:?}");
            } else {
                assert_ne!(name, format!("cmv_beam_gemv_stream_b{bits}"), "{shape:?}");
            }
            ran += u32::from(fits);
        }
    }
    assert!(ran >= 10, "only {ran} runs fit the streaming kernel");
    assert!(
        BeamGemv::new(&gpu)
            .unwrap()
            .with_stream_shape(
                StreamShape {
                    unit_segs: 0,
                    stages: 2
                },
                8
            )
            .is_err()
    );
    assert!(
        BeamGemv::new(&gpu)
            .unwrap()
            .with_stream_shape(
                StreamShape {
                    unit_segs: 1,
                    stages: 2
                },
                6
            )
            .is_err()
    );
}

#[test]
fn ring_kernel_every_stage_count() {
    let Some(gpu) = gpu_for_tests("ring_kernel_every_stage_count") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(0xBEA4_0077);
    let max_smem = gpu.info().max_smem_per_block_optin;
    let mut ran = 0;
    // 2 to 8 stages per warp (8 do not fit with 16 warps: the register kernel runs); rows of
    // an odd number of words (8-byte copies) and even (16-byte), long rows (slices, the last
    // step of a slice short), many rows (several tiles per block: the copies run ahead
    // across tiles), the fused preparation every other count.
    for (i, stages) in [2u32, 3, 5, 8].into_iter().enumerate() {
        let prep = if i % 2 == 1 {
            GemvPrep::Fused
        } else {
            GemvPrep::Auto
        };
        let bg = BeamGemv::new(&gpu)
            .unwrap()
            .with_path(GemvPath::CudaRing)
            .with_prep(prep)
            .with_ring_stages(stages)
            .unwrap();
        assert_eq!(bg.ring_stages(12, 99), stages);
        for (bits, dims) in [
            (12u32, (9, 28672 + 5)),
            (24, (70, 5000)),
            (3, (5000, 333)),
            (32, (130, 2049)),
            (5, (1, 64 * 13)),
            // Many short rows: one slice, many tiles per block.
            (12, (3000, 70)),
        ] {
            let name = check_nogaps_times_tight(&gpu, &bg, &mut rng, bits, dims, i % 2 == 0);
            let rw = layout::row_words(dims.1 as u64, bits, layout::NOGAPS);
            let fits = ring_smem_bytes(bits, rw as u32, stages) <= u64::from(max_smem);
            if fits {
                assert_eq!(
                    name,
                    format!("cmv_beam_gemv_ring_b{bits}"),
                    "{stages} stages"
                );
            } else {
                assert_eq!(
                    name,
                    format!("cmv_beam_gemv_nogaps_b{bits}"),
                    "{stages} stages"
                );
            }
            ran += u32::from(fits);
        }
    }
    assert!(ran >= 12, "only {ran} runs fit the ring kernel");
    for stages in [0, 1, 9] {
        assert!(
            BeamGemv::new(&gpu)
                .unwrap()
                .with_ring_stages(stages)
                .is_err()
        );
    }
}

#[test]
fn tensor_core_sums_past_2_pow_31() {
    let Some(gpu) = gpu_for_tests("tensor_core_sums_past_2_pow_31") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(0xBEA4_0031);
    // All-max 8-bit operands over 33100 columns: every byte-plane sum is 255 * 255 * 33100,
    // past 2^31, so the MMA's 32-bit accumulators wrap as signed values (33100 columns: the
    // streaming kernel's rings and fragments still fit in shared memory).
    let cases = [((40, 33_100), true), ((17, 33_113), false)];
    for ((shape, max), (path, kernel)) in cases.into_iter().flat_map(|c| {
        [
            (GemvPath::TensorCores, "cmv_beam_gemv_mma_b8"),
            (GemvPath::Stream, "cmv_beam_gemv_stream_b8"),
        ]
        .map(move |p| (c, p))
    }) {
        let bg = BeamGemv::new(&gpu).unwrap().with_path(path);
        let a = random(&mut rng, shape, 8, Layout::Nogaps, max);
        // A 32-bit vector: the output (sai) is 32 bits, exact modulo 2^32.
        let b = random(&mut rng, (shape.1, 1), 32, Layout::Tight, max);
        let name = check(
            &gpu,
            &bg,
            &a,
            &b,
            OutputWidth::Sai,
            Overflow::Ovf,
            Layout::Naive,
        );
        assert_eq!(name, kernel);
    }
}

#[test]
fn every_layout_batch_width_and_overflow() {
    let Some(gpu) = gpu_for_tests("every_layout_batch_width_and_overflow") else {
        return;
    };
    let bg = BeamGemv::new(&gpu).unwrap();
    let mut rng = StdRng::seed_from_u64(0xBEA4_0002);
    let widths = [
        1u32, 2, 3, 4, 5, 7, 8, 9, 12, 16, 17, 24, 31, 32, 33, 48, 63, 64,
    ];
    let ns = [1usize, 2, 3, 8, 16];
    let mut any = 0;
    let mut i = 0usize;
    for &bits in &widths {
        for &a_layout in Layout::ALL {
            for max in [false, true] {
                i += 1;
                let shape = SHAPES[i % 4];
                let n = ns[i % 5];
                let width = OutputWidth::ALL[i % 3];
                let overflow = Overflow::ALL[(i / 3) % 2];
                let a = random(&mut rng, shape, bits, a_layout, max);
                let b_bits = widths[(i * 7) % widths.len()];
                let b = random(
                    &mut rng,
                    (shape.1, n),
                    b_bits,
                    Layout::ALL[(i / 4) % 4],
                    max,
                );
                let out_layout = Layout::ALL[(i / 2) % 4];
                let name = check(&gpu, &bg, &a, &b, width, overflow, out_layout);
                any += usize::from(name == "cmv_beam_gemv_any");
            }
        }
    }
    assert!(any > 0);
}

#[test]
fn device_gemv_matches_the_reference() {
    let Some(gpu) = gpu_for_tests("device_gemv_matches_the_reference") else {
        return;
    };
    let kernels = PackedMatrix::load(&gpu).unwrap();
    let mut rng = StdRng::seed_from_u64(0xBEA4_0003);
    for (i, &bits) in [1u32, 7, 32, 33, 64].iter().enumerate() {
        for &layout in Layout::ALL {
            for (j, &batch) in [1usize, 3, 16].iter().enumerate() {
                let shape = SHAPES[1 + (i + j) % 3];
                let m = random(&mut rng, shape, bits, layout, j == 1);
                // Full-range inputs: products and sums wrap modulo 2^64.
                let x: Vec<u64> = (0..batch * shape.1)
                    .map(|k| if k % 5 == 0 { u64::MAX } else { rng.r#gen() })
                    .collect();
                let want = m.reference(&x, batch).unwrap();
                let dev = m.upload(&gpu).unwrap();
                let dx = gpu.upload(&x).unwrap();
                let mut out = PackedMatrix::alloc_out(&gpu, shape.0, batch).unwrap();
                PackedMatrix::gemv(&kernels, &dev, &dx, &mut out, batch).unwrap();
                PackedMatrix::finish(&kernels, &gpu).unwrap();
                let c = PackedMatrix::check(&gpu, &out, &want).unwrap();
                assert!(
                    c.passed(),
                    "bits {bits} {} batch {batch}: {c}",
                    layout.name()
                );
            }
        }
    }
}

#[test]
fn refusals() {
    let Some(gpu) = gpu_for_tests("refusals") else {
        return;
    };
    let bg = BeamGemv::new(&gpu).unwrap();
    let mut rng = StdRng::seed_from_u64(0xBEA4_0004);
    let up = |m: &PackedMatrix| DeviceBeamMatrix::upload(&gpu, m).unwrap();
    let a = up(&random(&mut rng, (4, 10), 5, Layout::Nogaps, false));
    let b = up(&random(&mut rng, (10, 1), 5, Layout::Nogaps, false));
    let b17 = up(&random(&mut rng, (10, 17), 5, Layout::Nogaps, false));
    let b9 = up(&random(&mut rng, (9, 1), 5, Layout::Nogaps, false));
    let mut out = BeamGemm::alloc_out(&gpu, &a, &b, OutputWidth::Sai, Layout::Slabs).unwrap();
    assert!(matches!(
        bg.gemv(&gpu, &a, &b9, &mut out, Overflow::Ovf),
        Err(BeamError::GemmShape { .. })
    ));
    let mut out17 = DeviceBeamOut::alloc(&gpu, 4, 17, 5, Layout::Slabs).unwrap();
    assert!(matches!(
        bg.gemv(&gpu, &a, &b17, &mut out17, Overflow::Ovf),
        Err(BeamError::GemvColumns { cols: 17 })
    ));
    let mut wrong = DeviceBeamOut::alloc(&gpu, 5, 1, 5, Layout::Slabs).unwrap();
    assert!(matches!(
        bg.gemv(&gpu, &a, &b, &mut wrong, Overflow::Ovf),
        Err(BeamError::Format(FormatError::Shape { .. }))
    ));
    bg.gemv(&gpu, &a, &b, &mut out, Overflow::Ovf).unwrap();
    // DeviceGemv: batches outside 1..=16, short inputs and outputs.
    let kernels = PackedMatrix::load(&gpu).unwrap();
    let m = random(&mut rng, (4, 10), 5, Layout::Tight, false);
    let dev = m.upload(&gpu).unwrap();
    let x = gpu.upload(&[1u64; 10 * 17]).unwrap();
    let mut y = PackedMatrix::alloc_out(&gpu, 4, 17).unwrap();
    for batch in [0, 17] {
        assert!(matches!(
            PackedMatrix::gemv(&kernels, &dev, &x, &mut y, batch),
            Err(BeamError::Format(FormatError::Batch { .. }))
        ));
    }
    let short = gpu.upload(&[1u64; 19]).unwrap();
    assert!(matches!(
        PackedMatrix::gemv(&kernels, &dev, &short, &mut y, 2),
        Err(BeamError::Format(FormatError::Length { .. }))
    ));
    let mut small = PackedMatrix::alloc_out(&gpu, 4, 1).unwrap();
    assert!(matches!(
        PackedMatrix::gemv(&kernels, &dev, &x, &mut small, 2),
        Err(BeamError::Format(FormatError::Length { .. }))
    ));
    gpu.synchronize().unwrap();
}

/// Random `nogaps` words of a matrix whose rows fill whole words (every bit is an element).
fn random_nogaps(rows: usize, cols: usize, bits: u32, seed: u64) -> PackedMatrix {
    assert_eq!(cols * bits as usize % 64, 0);
    let n = rows * cols * bits as usize / 64;
    let mut s = seed | 1;
    let words: Vec<u64> = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        })
        .collect();
    PackedMatrix::from_words(rows, cols, bits, Layout::Nogaps, words).unwrap()
}

#[test]
#[ignore = "timing on the LLM shapes: run with --ignored --nocapture on a GPU"]
fn timing() {
    let Some(gpu) = gpu_for_tests("timing") else {
        return;
    };
    println!("device: {}", gpu.info().name);
    for (rows, cols) in [
        (28672usize, 8192usize),
        (8192, 28672),
        (8192, 8192),
        (14336, 4096),
    ] {
        for bits in [4u32, 8, 16, 32] {
            let t0 = std::time::Instant::now();
            let a = random_nogaps(rows, cols, bits, 0x5EED + u64::from(bits));
            let mut rng = StdRng::seed_from_u64(u64::from(bits));
            let b = random(&mut rng, (cols, 1), bits, Layout::Nogaps, false);
            let da = DeviceBeamMatrix::upload(&gpu, &a).unwrap();
            let db = DeviceBeamMatrix::upload(&gpu, &b).unwrap();
            eprintln!(
                "{rows}x{cols} b={bits}: data ready after {:?}",
                t0.elapsed()
            );
            let copies = (600usize << 20).div_ceil(da.bytes()).max(2);
            let mut das = vec![da];
            for _ in 1..copies {
                das.push(das[0].try_clone().unwrap());
            }
            let mut out =
                BeamGemm::alloc_out(&gpu, &das[0], &db, OutputWidth::Sai, Layout::Naive).unwrap();
            for path in [GemvPath::Stream, GemvPath::TensorCores, GemvPath::CudaCores] {
                if path != GemvPath::CudaCores && bits > 8 {
                    continue;
                }
                let bg = BeamGemv::new(&gpu).unwrap().with_path(path);
                let name = bg.kernel_name(&das[0], &db, out.bits(), Overflow::Ovf);
                let t = time_launches(&gpu, 10, 200, |i| {
                    bg.gemv(&gpu, &das[i % copies], &db, &mut out, Overflow::Ovf)
                })
                .unwrap();
                eprintln!("timed after {:?}", t0.elapsed());
                // Check the last output on 64 rows at each end.
                let got = out.download(&gpu).unwrap();
                let m = top(bits);
                for r in (0..64).chain(rows - 64..rows) {
                    let want = (0..cols).fold(0u64, |s, c| {
                        s.wrapping_add(a.get(r, c).unwrap().wrapping_mul(b.get(c, 0).unwrap()))
                    }) & m;
                    assert_eq!(got.get(r, 0).unwrap(), want, "row {r}");
                }
                let us = t.median_ms() * 1e3;
                let gbs = das[0].bytes() as f64 / us / 1e3;
                println!(
                    "{rows}x{cols} b={bits:2} {name}: {us:8.2} us {gbs:7.1} GB/s {:5.1}% of 4540 \
                 ({copies} copies)",
                    gbs / 4540.0 * 100.0
                );
            }
        }
    }
}
