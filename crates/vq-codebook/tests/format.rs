//! The CPU side of VQ: configurations and bits per weight, the encoder's error bounds
//! (exact when a tile has no more vectors than entries, never worse than all-zero weights,
//! residual stages never worse), determinism (seed, thread count), codebooks ordered by
//! access frequency, odd shapes (not multiples of the vector or the tile, 1x1, zeros), the
//! reference against a naive product, the container's checks.

use cmv_format::CompressedMatrix;
use cmv_format::container::Writer;
use cmv_format::testing::{SeededRng, round_trip, seeded_vec};
use proptest::prelude::*;
use vq_codebook::container::{SPEC, VqFields};
use vq_codebook::rtn::relative_error;
use vq_codebook::{
    EncodeOptions, FormatError, Geometry, Limits, Scope, VqConfig, VqError, VqMatrix, f16,
};

fn gaussian(seed: u64, n: usize) -> Vec<f32> {
    let mut rng = SeededRng::new(seed);
    (0..n).map(|_| rng.normal() as f32).collect()
}

fn opts(config: VqConfig) -> EncodeOptions {
    EncodeOptions::with(config)
}

fn small_config() -> impl Strategy<Value = VqConfig> {
    (
        1usize..=5,
        1u32..=6,
        1usize..=2,
        0usize..3,
        1usize..=9,
        1usize..=3,
    )
        .prop_map(|(vec, bits, residuals, scope, tr, tcv)| VqConfig {
            vec,
            bits,
            residuals,
            scope: match scope {
                0 => Scope::Tensor,
                _ => Scope::Tile {
                    rows: tr,
                    cols: tcv * vec,
                },
            },
        })
}

/// The naive product of the decoded weights.
fn naive(w: &[f32], rows: usize, cols: usize, x: &[f16], batch: usize) -> Vec<f64> {
    let mut y = vec![0f64; rows * batch];
    for b in 0..batch {
        for r in 0..rows {
            y[b * rows + r] = (0..cols)
                .map(|c| f64::from(w[r * cols + c]) * f64::from(x[b * cols + c].to_f32()))
                .sum();
        }
    }
    y
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn encode_decode_and_reference(
        config in small_config(), rows in 1usize..=13, cols in 1usize..=29, seed in 0u64..1000,
    ) {
        let w = gaussian(seed, rows * cols);
        let m = VqMatrix::encode(&w, rows, cols, &EncodeOptions { seed, ..opts(config) }).unwrap();
        let d = m.dequantize();
        prop_assert_eq!(d.len(), rows * cols);
        // Never worse than zero weights (Lloyd's means, fp16 rounding aside).
        let err = relative_error(&d, &w);
        prop_assert!(err <= 1.0 + 1e-3, "relative error {}", err);
        // Exact (to fp16) where no tile has more vectors than entries.
        let g = Geometry::new(rows, cols, config).unwrap();
        if g.tile_rows * g.tile_vecs <= config.entries() {
            for (a, b) in d.iter().zip(&w) {
                prop_assert!((a - b).abs() <= b.abs() * 1e-3 + 1e-6, "{} vs {}", a, b);
            }
        }
        // Codes within range, codebooks ordered by use.
        for s in 0..config.residuals {
            let mut count = vec![vec![0usize; config.entries()]; g.tiles()];
            for r in 0..rows {
                for i in 0..g.vecs {
                    let c = m.code(s, r, i) as usize;
                    prop_assert!(c < config.entries());
                    count[g.tile_of(r, i)][c] += 1;
                }
            }
            for c in &count {
                prop_assert!(c.windows(2).all(|p| p[0] >= p[1]), "{:?}", c);
            }
        }
        // The reference is the naive product of the decoded weights.
        let batch = 1 + (seed % 3) as usize;
        let x = seeded_vec::<f16>(seed, batch * cols);
        let y = m.reference(&x, batch).unwrap();
        let z = naive(&d, rows, cols, &x, batch);
        for (a, b) in y.iter().zip(&z) {
            prop_assert!((a - b).abs() <= 1e-6 * (1.0 + b.abs()), "{} vs {}", a, b);
        }
        prop_assert_eq!(m.bits_per_weight(), config.bits_per_weight(rows, cols).unwrap());
        round_trip(&m);
    }

    #[test]
    fn residual_stages_never_hurt(rows in 1usize..=12, cols in 1usize..=40, seed in 0u64..1000) {
        let w = gaussian(seed, rows * cols);
        let one = VqConfig { vec: 2, bits: 3, residuals: 1, scope: Scope::Tensor };
        let two = VqConfig { residuals: 2, ..one };
        let e1 = relative_error(&VqMatrix::encode(&w, rows, cols, &opts(one)).unwrap().dequantize(), &w);
        let e2 = relative_error(&VqMatrix::encode(&w, rows, cols, &opts(two)).unwrap().dequantize(), &w);
        prop_assert!(e2 <= e1 + 1e-3, "{} > {}", e2, e1);
    }
}

#[test]
fn presets_and_bits_per_weight() {
    let (rows, cols) = (4096, 14336);
    let bpw = |c: VqConfig| c.bits_per_weight(rows, cols).unwrap();
    assert_eq!(bpw(VqConfig::gptvq2()), 2.25);
    let codebook = |entries: f64, v: f64, r: f64| entries * v * 16.0 * r / (rows * cols) as f64;
    assert_eq!(bpw(VqConfig::aqlm3()), 3.0 + codebook(4096.0, 8.0, 2.0));
    assert_eq!(bpw(VqConfig::cq4()), 4.0 + codebook(256.0, 2.0, 1.0));
    assert_eq!(bpw(VqConfig::cq2()), 2.0 + codebook(256.0, 4.0, 1.0));
    assert_eq!(VqConfig::default(), VqConfig::gptvq2());
    for c in [
        VqConfig::gptvq2(),
        VqConfig::aqlm3(),
        VqConfig::cq4(),
        VqConfig::cq2(),
    ] {
        c.validate().unwrap();
    }
    // 12-bit codes cost 12 bits: 8 codes of a row take 3 words.
    let g = Geometry::new(3, 64, VqConfig::aqlm3()).unwrap();
    assert_eq!((g.vecs, g.words, g.code_words()), (8, 3, 3 * 2 * 3));
    // The partial tiles of GPTVQ-2 with VQ-LLM's 256 x 256 tiles.
    let g = Geometry::new(300, 260, VqConfig::gptvq2_256()).unwrap();
    assert_eq!((g.tiles_r, g.tiles_c, g.vecs), (2, 2, 65));
    assert_eq!(g.tile_of(255, 63), 0);
    assert_eq!(g.tile_of(256, 64), 3);
    // The default GPTVQ-2 tiles: 512 rows x 128 columns, the same bits per weight.
    let g = Geometry::new(600, 260, VqConfig::gptvq2()).unwrap();
    assert_eq!((g.tiles_r, g.tiles_c, g.tile_vecs), (2, 3, 32));
    assert_eq!(g.tile_of(511, 31), 0);
    assert_eq!(g.tile_of(512, 64), 5);
    let at = |c: VqConfig| c.bits_per_weight(4096, 14336).unwrap();
    assert_eq!(at(VqConfig::gptvq2()), at(VqConfig::gptvq2_256()));
    assert_eq!(at(VqConfig::gptvq2()), 2.25);
}

#[test]
fn bad_configs_and_options_are_refused() {
    let bad = [
        VqConfig {
            vec: 0,
            ..VqConfig::cq2()
        },
        VqConfig {
            vec: 17,
            ..VqConfig::cq2()
        },
        VqConfig {
            bits: 0,
            ..VqConfig::cq2()
        },
        VqConfig {
            bits: 17,
            ..VqConfig::cq2()
        },
        VqConfig {
            residuals: 0,
            ..VqConfig::cq2()
        },
        VqConfig {
            residuals: 5,
            ..VqConfig::cq2()
        },
        VqConfig {
            scope: Scope::Tile { rows: 0, cols: 4 },
            ..VqConfig::cq2()
        },
        VqConfig {
            scope: Scope::Tile { rows: 4, cols: 6 },
            ..VqConfig::cq2()
        },
    ];
    let w = gaussian(1, 16);
    for c in bad {
        assert!(matches!(c.validate(), Err(VqError::Config { .. })), "{c:?}");
        assert!(matches!(
            VqMatrix::encode(&w, 4, 4, &opts(c)),
            Err(VqError::Config { .. })
        ));
    }
    let base = opts(VqConfig::cq2());
    assert!(matches!(
        VqMatrix::encode(&w, 4, 5, &base),
        Err(VqError::Format(FormatError::Length { .. }))
    ));
    assert!(matches!(
        VqMatrix::encode(&[], 0, 0, &base),
        Err(VqError::Format(FormatError::Shape { .. }))
    ));
    let mut nan = w.clone();
    nan[3] = f32::NAN;
    assert!(matches!(
        VqMatrix::encode(&nan, 4, 4, &base),
        Err(VqError::Format(FormatError::NonFinite { .. }))
    ));
    for (imp, ok) in [
        (vec![1.0, 0.0, 2.0, 3.0], true),
        (vec![1.0, -1.0, 2.0, 3.0], false),
        (vec![1.0, f32::NAN, 2.0, 3.0], false),
        (vec![1.0; 3], false),
    ] {
        let o = EncodeOptions {
            importance: Some(imp),
            ..base.clone()
        };
        assert_eq!(VqMatrix::encode(&w, 4, 4, &o).is_ok(), ok);
    }
    // Too many tiles for the codebooks.
    let tiny = VqConfig {
        vec: 1,
        bits: 16,
        residuals: 4,
        scope: Scope::Tile { rows: 1, cols: 1 },
    };
    assert!(matches!(
        tiny.bits_per_weight(1 << 20, 1 << 20),
        Err(VqError::Config { .. })
    ));
}

#[test]
fn odd_shapes_zeros_and_one_by_one() {
    for config in [
        VqConfig::gptvq2(),
        VqConfig::aqlm3(),
        VqConfig::cq4(),
        VqConfig::cq2(),
    ] {
        for (rows, cols) in [(1, 1), (1, 7), (3, 1), (5, 9), (257, 13), (2, 261)] {
            let zeros = vec![0f32; rows * cols];
            let m = VqMatrix::encode(&zeros, rows, cols, &opts(config)).unwrap();
            assert!(
                m.dequantize().iter().all(|&x| x == 0.0),
                "{config:?} {rows}x{cols}"
            );
            assert!(m.codebooks().iter().all(|c| c.to_f32() == 0.0));
            round_trip(&m);
            let w = gaussian(rows as u64 * 1000 + cols as u64, rows * cols);
            let m = VqMatrix::encode(&w, rows, cols, &opts(config)).unwrap();
            assert_eq!(m.dequantize().len(), rows * cols);
            assert!(relative_error(&m.dequantize(), &w) <= 1.0 + 1e-3);
            round_trip(&m);
        }
    }
    // 1x1 is exact to fp16.
    let m = VqMatrix::encode(&[0.3], 1, 1, &opts(VqConfig::cq4())).unwrap();
    assert_eq!(m.dequantize(), vec![f16::from_f32(0.3).to_f32()]);
}

#[test]
fn importance_favours_the_important_columns() {
    let (rows, cols) = (64, 32);
    let w = gaussian(9, rows * cols);
    let config = VqConfig {
        vec: 2,
        bits: 3,
        residuals: 1,
        scope: Scope::Tensor,
    };
    let col_err = |m: &VqMatrix, c: usize| -> f64 {
        let d = m.dequantize();
        (0..rows)
            .map(|r| f64::from(d[r * cols + c] - w[r * cols + c]).powi(2))
            .sum()
    };
    let plain = VqMatrix::encode(&w, rows, cols, &opts(config)).unwrap();
    // Only columns 0 and 1 (one vector) matter: they are fitted alone.
    let mut imp = vec![0f32; cols];
    imp[0] = 1.0;
    imp[1] = 1.0;
    let o = EncodeOptions {
        importance: Some(imp),
        ..opts(config)
    };
    let weighted = VqMatrix::encode(&w, rows, cols, &o).unwrap();
    let (a, b) = (
        col_err(&weighted, 0) + col_err(&weighted, 1),
        col_err(&plain, 0) + col_err(&plain, 1),
    );
    assert!(a < b, "{a} vs {b}");
}

#[test]
fn deterministic_for_a_seed_whatever_the_threads() {
    let (rows, cols) = (70, 300);
    let w = gaussian(5, rows * cols);
    let o = EncodeOptions {
        sample: 300,
        ..opts(VqConfig {
            vec: 4,
            bits: 6,
            residuals: 2,
            scope: Scope::Tile {
                rows: 32,
                cols: 128,
            },
        })
    };
    let tensor = EncodeOptions {
        sample: 700,
        ..EncodeOptions::with(VqConfig::cq4())
    };
    for o in [&o, &tensor] {
        let a = VqMatrix::encode(&w, rows, cols, o).unwrap().to_bytes();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let b = pool.install(|| VqMatrix::encode(&w, rows, cols, o).unwrap().to_bytes());
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let c = pool.install(|| VqMatrix::encode(&w, rows, cols, o).unwrap().to_bytes());
        assert!(a == b && a == c);
    }
    let a = VqMatrix::encode(&w, rows, cols, &o).unwrap().to_bytes();
    let d = VqMatrix::encode(&w, rows, cols, &EncodeOptions { seed: 1, ..o })
        .unwrap()
        .to_bytes();
    assert!(a != d);
}

fn container(f: &VqFields, codes: &[u32], cb: &[u16]) -> Vec<u8> {
    Writer::new(&SPEC, f).part(codes).part(cb).finish()
}

#[test]
fn the_container_checks_everything() {
    let m = VqMatrix::encode(
        &gaussian(2, 5 * 10),
        5,
        10,
        &opts(VqConfig {
            vec: 4,
            bits: 5,
            residuals: 2,
            scope: Scope::Tile { rows: 2, cols: 8 },
        }),
    )
    .unwrap();
    let f = m.fields();
    let cb: Vec<u16> = m.codebooks().iter().map(|c| c.to_bits()).collect();
    let codes = m.codes().to_vec();
    assert_eq!(container(&f, &codes, &cb), m.to_bytes());
    assert_eq!(VqMatrix::from_bytes(&m.to_bytes()).unwrap(), m);
    // 3 vectors of 5 bits: bits 15.. of each row's word are padding.
    let mut bad = codes.clone();
    bad[3] |= 1 << 15;
    assert!(matches!(
        VqMatrix::from_bytes(&container(&f, &bad, &cb)),
        Err(VqError::Padding {
            row: 1,
            stage: 1,
            ..
        })
    ));
    let mut bad = cb.clone();
    bad[7] = f16::INFINITY.to_bits();
    assert!(matches!(
        VqMatrix::from_bytes(&container(&f, &codes, &bad)),
        Err(VqError::Codebook { index: 7, .. })
    ));
    assert!(matches!(
        VqMatrix::from_bytes(&container(&f, &codes[1..], &cb)),
        Err(VqError::Format(FormatError::Header { .. }))
    ));
    assert!(matches!(
        VqMatrix::from_bytes(&container(&f, &codes, &cb[1..])),
        Err(VqError::Format(FormatError::Header { .. }))
    ));
    for g in [
        VqFields { scope: 2, ..f },
        VqFields { vec: 0, ..f },
        VqFields { bits: 17, ..f },
        VqFields { residuals: 5, ..f },
        VqFields { tile_cols: 6, ..f },
        VqFields { scope: 0, ..f },
        VqFields { rows: 0, ..f },
    ] {
        assert!(
            VqMatrix::from_bytes(&container(&g, &codes, &cb)).is_err(),
            "{g:?}"
        );
    }
    let limits = Limits {
        max_elements: 49,
        ..Limits::DEFAULT
    };
    assert!(matches!(
        VqMatrix::from_bytes_with(&m.to_bytes(), &limits),
        Err(VqError::Format(FormatError::Limit { .. }))
    ));
    assert!(m.size_breakdown().bits_per_weight() > m.bits_per_weight());
    assert_eq!(<VqMatrix as CompressedMatrix>::variants().len(), 5);
}
