//! Encode → decode is exact, the reference product is the dense one, and the compressed size
//! is close to the entropy (CPU only: CI has no GPU).

mod common;

use ans_codec::model::{self, Model};
use ans_codec::{AnsError, AnsMatrix, EncodeOptions, Layout, encode};
use common::{Dist, LAYOUTS, dense_gemv, sample};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

fn config(cases: u32, seed: u64) -> Config {
    Config {
        cases,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(seed),
        ..Config::default()
    }
}

fn dist() -> impl Strategy<Value = Dist> {
    prop_oneof![
        3 => (0.3f64..40.0).prop_map(Dist::Normal),
        1 => Just(Dist::Uniform),
        1 => (0.5f64..20.0).prop_map(Dist::Laplace),
        1 => (0.3f64..10.0).prop_map(Dist::Cauchy),
        1 => Just(Dist::Zeros),
        1 => any::<i8>().prop_filter("non-zero", |&v| v != 0).prop_map(Dist::Single),
        1 => (any::<i8>(), any::<i8>()).prop_map(|(a, b)| Dist::Skew(a, b)),
    ]
}

fn layout() -> impl Strategy<Value = Layout> {
    prop_oneof![
        Just(Layout::WarpRows),
        Just(Layout::WarpStripes),
        Just(Layout::WarpLanes),
        Just(Layout::WarpLanesEsc)
    ]
}

/// The units of a `rows x cols` matrix in `m`'s layout.
fn units_of(m: &AnsMatrix, rows: usize, cols: usize) -> usize {
    match m.layout() {
        Layout::WarpRows => rows,
        Layout::WarpStripes => rows.div_ceil(32),
        Layout::WarpLanes | Layout::WarpLanesEsc => {
            let segment = m.segment().unwrap();
            rows.div_ceil(32) * cols.next_multiple_of(16).div_ceil(segment)
        }
    }
}

/// Encodes, checks the decode, the product and the size report, and returns the matrix.
fn check_round_trip(w: &[i8], rows: usize, cols: usize, opts: &EncodeOptions) -> AnsMatrix {
    let m = encode(w, rows, cols, opts).unwrap();
    m.validate().unwrap();
    assert_eq!((m.rows(), m.cols(), m.layout()), (rows, cols, opts.layout));
    let decoded = m.decode().unwrap();
    assert!(decoded == w, "decode differs for {rows}x{cols} {opts:?}");
    let x = sample(Dist::Uniform, cols, (rows * 31 + cols) as u64);
    let (acc, y) = m.gemv_reference(&x, 1.0 / 1024.0).unwrap();
    assert_eq!(acc, dense_gemv(w, rows, cols, &x));
    let want: Vec<i8> = acc
        .iter()
        .map(|&a| cmv_device::requantize(a, 1.0 / 1024.0))
        .collect();
    assert_eq!(y, want);
    // Structure the GPU side relies on.
    let units = units_of(&m, rows, cols);
    assert_eq!(m.offsets().len(), units + 1);
    assert_eq!(*m.offsets().last().unwrap() as usize, m.stream().len());
    assert_eq!(m.table().len(), 1 << m.precision());
    if m.layout().is_lanes() {
        let segment = m.segment().unwrap();
        let padded_cols = cols.next_multiple_of(16);
        assert_eq!(
            (m.padded_rows(), m.padded_cols()),
            (rows.next_multiple_of(32), padded_cols)
        );
        let want = match opts.lane_segment {
            None => ans_codec::default_lane_segment(rows, cols),
            Some(s) => s.min(padded_cols),
        };
        assert_eq!(segment, want);
        assert!(segment.is_multiple_of(16) && segment <= padded_cols);
        assert_eq!(m.segments(), padded_cols.div_ceil(segment));
        assert_eq!((m.precision(), m.group()), (8, 2));
        assert_eq!(m.fields().segment as usize, segment);
        for w in m.offsets().windows(2) {
            assert!(w[0] % 4 == 0 && w[1] - w[0] >= 32, "{w:?}");
        }
    } else {
        assert_eq!(m.segment(), None);
        assert_eq!(m.segments(), 1);
        assert_eq!(m.group(), if m.precision() <= 8 { 4 } else { 2 });
    }
    assert_eq!(m.register_tables().is_some(), m.precision() == 7);
    assert!(m.model().freq(m.padding_value()) > 0);
    let s = m.entropy_report();
    assert_eq!(s.total_bytes(), m.to_bytes().len());
    assert_eq!(
        m.size_breakdown().container_bytes,
        m.to_bytes().len() as u64
    );
    let state_bytes = if m.layout().is_lanes() { 128 } else { 256 };
    assert_eq!(s.flushed_state_bytes, units * state_bytes);
    assert_eq!(
        s.stream_bytes(),
        4 * m.stream().len(),
        "payload, states and padding make the stream"
    );
    m
}

proptest! {
    #![proptest_config(config(128, 0x5eed_0001))]

    #[test]
    fn encode_then_decode_is_exact(
        rows in 1usize..=300,
        cols in 1usize..=600,
        dist in dist(),
        layout in layout(),
        seed in any::<u64>(),
    ) {
        let w = sample(dist, rows * cols, seed);
        check_round_trip(&w, rows, cols, &EncodeOptions { layout, ..Default::default() });
    }
}

proptest! {
    #![proptest_config(config(96, 0x5eed_0003))]

    #[test]
    fn lanes_round_trip_with_any_segment(
        rows in 1usize..=100,
        cols in 1usize..=700,
        sixteens in 1usize..=50,
        dist in dist(),
        seed in any::<u64>(),
    ) {
        let w = sample(dist, rows * cols, seed);
        let opts = EncodeOptions {
            layout: Layout::WarpLanes,
            lane_segment: Some(16 * sixteens),
            ..Default::default()
        };
        check_round_trip(&w, rows, cols, &opts);
    }
}

proptest! {
    #![proptest_config(config(64, 0x5eed_0002))]

    #[test]
    fn forced_precisions_round_trip_or_refuse(
        rows in 1usize..=70,
        cols in 1usize..=300,
        precision in 7u32..=12,
        dist in dist(),
        layout in layout(),
        seed in any::<u64>(),
    ) {
        let w = sample(dist, rows * cols, seed);
        let opts = EncodeOptions { layout, precision: Some(precision), ..Default::default() };
        let distinct = model::counts(&w).iter().filter(|&&c| c > 0).count();
        if layout.is_lanes() && precision != 8 {
            let refused = matches!(
                encode(&w, rows, cols, &opts),
                Err(AnsError::LanePrecision { precision: p }) if p == precision
            );
            prop_assert!(refused);
        } else if distinct > 1 << precision {
            let refused = matches!(
                encode(&w, rows, cols, &opts),
                Err(AnsError::TooManyValues { .. })
            );
            prop_assert!(refused);
        } else {
            let m = check_round_trip(&w, rows, cols, &opts);
            prop_assert_eq!(m.precision(), precision);
        }
    }
}

#[test]
fn edge_shapes_round_trip() {
    let shapes = [
        (1, 1),
        (1, 1000),
        (1000, 1),
        (32, 128),
        (33, 129),
        (31, 127),
        (2, 4),
    ];
    for (i, &(rows, cols)) in shapes.iter().enumerate() {
        for dist in [
            Dist::Normal(3.0),
            Dist::Uniform,
            Dist::Single(-128),
            Dist::Single(127),
        ] {
            let w = sample(dist, rows * cols, i as u64);
            for layout in LAYOUTS {
                check_round_trip(
                    &w,
                    rows,
                    cols,
                    &EncodeOptions {
                        layout,
                        ..Default::default()
                    },
                );
            }
        }
    }
    for v in [-128i8, -1, 0, 1, 127] {
        for layout in LAYOUTS {
            let m = check_round_trip(
                &[v],
                1,
                1,
                &EncodeOptions {
                    layout,
                    ..Default::default()
                },
            );
            let precision = if layout.is_lanes() { 8 } else { 7 };
            assert_eq!((m.precision(), m.padding_value()), (precision, v));
            assert_eq!(
                m.entropy_report().payload_bytes,
                0,
                "a certain value costs nothing"
            );
        }
    }
}

#[test]
fn every_value_present_forces_at_least_eight_bits() {
    let mut w = sample(Dist::Normal(2.0), 64 * 200, 7);
    for (i, v) in (-128..=127i8).enumerate() {
        w[i * 50] = v;
    }
    for layout in LAYOUTS {
        let m = check_round_trip(
            &w,
            64,
            200,
            &EncodeOptions {
                layout,
                ..Default::default()
            },
        );
        assert!(m.precision() >= 8, "P = {}", m.precision());
        // ans-lanes-esc may merge the rarest values into its escape value.
        if !layout.has_exceptions() {
            assert_eq!(m.model().distinct(), 256);
        }
        assert!(m.register_tables().is_none());
    }
}

#[test]
fn every_precision_round_trips_on_a_wide_distribution() {
    let w = sample(Dist::Laplace(6.0), 40 * 333, 11);
    let distinct = model::counts(&w).iter().filter(|&&c| c > 0).count();
    assert!(distinct <= 128, "{distinct}");
    for p in 7..=12 {
        // ans-lanes codes at 8 bits only (the other precisions: forced_precisions_round_trip_or_refuse).
        for layout in LAYOUTS.into_iter().filter(|&l| !l.is_lanes() || p == 8) {
            let opts = EncodeOptions {
                layout,
                precision: Some(p),
                ..Default::default()
            };
            assert_eq!(check_round_trip(&w, 40, 333, &opts).precision(), p);
        }
    }
}

#[test]
fn lanes_cover_odd_shapes_segments_and_extreme_values() {
    // (rows, cols, segment): single rows and columns, sides off 16 and 32, several segments
    // with a short last one, a segment past the padded columns (clamped).
    let cases = [
        (1, 1, None),
        (1, 1, Some(16)),
        (1, 1000, None),
        (1, 1000, Some(48)),
        (1000, 1, None),
        (33, 7, None),
        (64, 300, None),
        (64, 300, Some(64)),
        (31, 17, Some(16)),
        (65, 129, Some(32)),
        (40, 250, Some(96)),
        (7, 33, Some(4096)),
    ];
    for (i, &(rows, cols, segment)) in cases.iter().enumerate() {
        for dist in [
            Dist::Normal(3.0),
            Dist::Uniform,
            Dist::Zeros,
            Dist::Single(-128),
            Dist::Single(127),
            Dist::Skew(-128, 127),
        ] {
            let w = sample(dist, rows * cols, 50 + i as u64);
            let opts = EncodeOptions {
                layout: Layout::WarpLanes,
                lane_segment: segment,
                ..Default::default()
            };
            let m = check_round_trip(&w, rows, cols, &opts);
            let padded_cols = cols.next_multiple_of(16);
            if let Some(s) = segment {
                assert_eq!(m.segment(), Some(s.min(padded_cols)));
            }
            if matches!(dist, Dist::Zeros | Dist::Single(_)) {
                // A constant matrix costs only its states: 64 16-bit words per unit.
                assert_eq!(m.entropy_report().payload_bytes, 0);
                assert_eq!(m.stream().len(), 32 * m.units());
            }
        }
    }
    // Values at both ends, every other element.
    let w: Vec<i8> = (0..45 * 77)
        .map(|i| if i % 2 == 0 { -128 } else { 127 })
        .collect();
    let opts = EncodeOptions {
        layout: Layout::WarpLanes,
        lane_segment: Some(32),
        ..Default::default()
    };
    let m = check_round_trip(&w, 45, 77, &opts);
    assert_eq!((m.segment(), m.segments(), m.units()), (Some(32), 3, 6));
}

#[test]
fn lane_options_are_checked() {
    let w = sample(Dist::Normal(2.0), 40 * 70, 1);
    for segment in [0, 8, 20, 1000, usize::MAX] {
        let opts = EncodeOptions {
            layout: Layout::WarpLanes,
            lane_segment: Some(segment),
            ..Default::default()
        };
        let e = encode(&w, 40, 70, &opts).unwrap_err();
        assert!(
            matches!(e, AnsError::LaneSegment { segment: s } if s == segment),
            "{segment}: {e}"
        );
        assert!(e.to_string().contains(&segment.to_string()), "{e}");
        // The other layouts ignore it.
        let rows = EncodeOptions {
            layout: Layout::WarpRows,
            ..opts
        };
        assert!(encode(&w, 40, 70, &rows).is_ok());
    }
    for precision in [7, 9, 12] {
        let opts = EncodeOptions {
            layout: Layout::WarpLanes,
            precision: Some(precision),
            ..Default::default()
        };
        let e = encode(&w, 40, 70, &opts).unwrap_err();
        assert!(
            matches!(e, AnsError::LanePrecision { precision: p } if p == precision),
            "{e}"
        );
        assert!(e.to_string().contains("ans-lanes"), "{e}");
    }
    let opts = EncodeOptions {
        layout: Layout::WarpLanes,
        precision: Some(8),
        lane_segment: Some(1 << 20),
        ..Default::default()
    };
    let m = encode(&w, 40, 70, &opts).unwrap();
    assert_eq!((m.precision(), m.segment(), m.units()), (8, Some(80), 2));
    // Every value present: the 8-bit model still holds them (frequency at least 1 each).
    let all: Vec<i8> = (0..32 * 64).map(|i| (i % 256) as u8 as i8).collect();
    let m = check_round_trip(
        &all,
        32,
        64,
        &EncodeOptions {
            layout: Layout::WarpLanes,
            ..Default::default()
        },
    );
    assert_eq!(m.model().distinct(), 256);
}

#[test]
fn accumulators_wrap_like_dp4a() {
    // 140000 * (-128 * -128) = 2293760000 > i32::MAX: the accumulator wraps.
    let cols = 140_000;
    let w = vec![-128i8; cols];
    let x = vec![-128i8; cols];
    for layout in LAYOUTS {
        let m = encode(
            &w,
            1,
            cols,
            &EncodeOptions {
                layout,
                ..Default::default()
            },
        )
        .unwrap();
        let (acc, y) = m.gemv_reference(&x, 1e-9).unwrap();
        assert_eq!(acc, dense_gemv(&w, 1, cols, &x));
        assert!(acc[0] < 0, "{}", acc[0]);
        assert_eq!(y[0], cmv_device::requantize(acc[0], 1e-9));
    }
}

#[test]
fn the_model_codes_real_elements_and_padding() {
    // Padding dominates a 1x1 matrix; the padding value is the most frequent one.
    let w = sample(Dist::Skew(3, -7), 5 * 130, 3);
    let m = encode(&w, 5, 130, &EncodeOptions::default()).unwrap();
    assert_eq!(m.padding_value(), 3);
    let fitted = Model::fit(&w, &EncodeOptions::default()).unwrap();
    assert_eq!(fitted.padding_value(), 3);
}

/// Payload, in bits per element, of a `rows x cols` sigma-4 matrix; prints the report.
fn sigma4_report(rows: usize, cols: usize, layout: Layout) -> ans_codec::EntropyReport {
    let w = sample(Dist::Normal(4.0), rows * cols, 42);
    let m = encode(
        &w,
        rows,
        cols,
        &EncodeOptions {
            layout,
            ..Default::default()
        },
    )
    .unwrap();
    let s = m.entropy_report();
    println!("sigma=4 {rows}x{cols} {}: {s}", layout.name());
    s
}

#[test]
fn sigma_4_payload_is_within_a_tenth_of_a_bit_of_the_entropy() {
    for layout in LAYOUTS {
        let s = sigma4_report(512, 4096, layout);
        let payload = s.payload_bits_per_element();
        // The model costs at most the default 0.1 bits (P = 8 here: about 0.084).
        assert!(s.cross_entropy_bits - s.entropy_bits <= 0.1, "{s}");
        // Payload plus the flushed states' information is the cross-entropy (no padding here),
        // up to the coder's renormalization loss.
        assert!((s.coded_bits - s.cross_entropy_bits).abs() <= 0.005, "{s}");
        assert!((s.coded_bits - s.entropy_bits).abs() <= 0.1, "{s}");
        assert!(payload <= s.entropy_bits + 0.1, "{s}");
        match layout {
            // One coder per row of 4096 elements: its final state's ~16 bits are 0.004 bits
            // per element.
            Layout::WarpStripes => assert!((payload - s.entropy_bits).abs() <= 0.1, "{s}"),
            // 32 coders per row of 4096 elements (128 each): their final states carry about
            // 32 * 16 / 4096 = 0.125 bits per element that the payload does not, so the payload
            // alone sits ~0.1 bit *below* the entropy; the states are counted separately.
            Layout::WarpRows => {
                let share = s.coded_bits - payload;
                assert!((0.05..=0.2).contains(&share), "{s}");
            }
            // 32 coders per unit of 32 rows x 256 columns (the default segment here): about 16
            // bits per coder, 0.06 bits per element.
            Layout::WarpLanes | Layout::WarpLanesEsc => {
                let share = s.coded_bits - payload;
                assert!((0.02..=0.1).contains(&share), "{s}");
            }
        }
    }
}

#[test]
fn payload_is_at_most_the_cross_entropy_plus_a_small_margin() {
    // Shapes without padding, >= 64k elements, several distributions.
    let cases = [
        (Dist::Normal(0.3), 64, 1024),
        (Dist::Normal(1.0), 128, 512),
        (Dist::Normal(12.0), 64, 1024),
        (Dist::Normal(40.0), 64, 1024),
        (Dist::Uniform, 64, 1024),
        (Dist::Laplace(3.0), 96, 1024),
        (Dist::Cauchy(2.0), 64, 1024),
        (Dist::Skew(0, 5), 64, 1024),
    ];
    for (i, &(dist, rows, cols)) in cases.iter().enumerate() {
        let w = sample(dist, rows * cols, 100 + i as u64);
        for layout in LAYOUTS {
            let m = encode(
                &w,
                rows,
                cols,
                &EncodeOptions {
                    layout,
                    ..Default::default()
                },
            )
            .unwrap();
            let s = m.entropy_report();
            println!("{dist:?} {rows}x{cols} {}: {s}", layout.name());
            assert_eq!(s.padded_elements, s.elements);
            assert!(
                s.payload_bits_per_element() <= s.cross_entropy_bits + 0.05,
                "{dist:?} {}: {s}",
                layout.name()
            );
            // ans-lanes-esc: the model codes the escaped values as one, their exceptions carry
            // the rest (32 bits each, more than the information merged away).
            assert!(
                s.cross_entropy_bits + s.per_element(s.exception_bytes) >= s.entropy_bits - 1e-9
            );
            // No padding: what the stream carries is the cross-entropy, up to a bit or so per
            // coder (at most 0.02 bits per element here: a uniform 8-bit model leaves its last
            // word in a state just above 2^32, where it counts for under 1.5 bits).
            assert!((s.coded_bits - s.cross_entropy_bits).abs() <= 0.03, "{s}");
        }
    }
}

/// The sizes and the encode/decode times of large sigma-4 matrices (release:
/// `cargo test -p ans-codec --release --test roundtrip -- --ignored --nocapture`).
#[test]
#[ignore = "large; run: cargo test -p ans-codec --release --test roundtrip -- --ignored --nocapture sigma_4_large_report"]
fn sigma_4_large_report() {
    for (rows, cols) in [(512, 4096), (4096, 4096), (4096, 11008), (11008, 4096)] {
        let w = sample(Dist::Normal(4.0), rows * cols, 42);
        let counts = model::counts(&w);
        let entropy = model::entropy_bits(&counts) / w.len() as f64;
        for p in 7..=12 {
            let m = Model::quantize(&counts, p).unwrap();
            let over = m.cross_entropy_bits(&counts) / w.len() as f64 - entropy;
            println!("sigma=4 {rows}x{cols} P={p}: cross-entropy overhead {over:.4} bits/element");
        }
        for layout in LAYOUTS {
            let t = std::time::Instant::now();
            let m = encode(
                &w,
                rows,
                cols,
                &EncodeOptions {
                    layout,
                    ..Default::default()
                },
            )
            .unwrap();
            let enc = t.elapsed();
            let t = std::time::Instant::now();
            let d = m.decode().unwrap();
            let dec = t.elapsed();
            assert!(d == w);
            println!(
                "sigma=4 {rows}x{cols} {}: encode {enc:.2?} decode {dec:.2?}\n  {}",
                layout.name(),
                m.entropy_report()
            );
        }
    }
}
