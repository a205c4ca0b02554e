//! The encoder's layout choice (`EncodeOptions::auto`): `ans-lanes`, then `ans-warp-rows`,
//! where they are within the budget, the smaller of the warp layouts where they are not, and
//! never a container larger than the plain int8 matrix plus `INT8_ALLOWANCE_BYTES` (issue 16,
//! item 4: a 49152 x 576 matrix of real weights took 14.3 bits per element in
//! `ans-warp-rows`).

use ans_codec::{
    AnsError, AnsMatrix, EncodeOptions, INT8_ALLOWANCE_BYTES, Layout, encode, model::Model,
};

/// Seeded values: `spread` distinct values around 0, roughly Gaussian when `gauss`, else
/// uniform.
fn values(n: usize, seed: u64, spread: u32, gauss: bool) -> Vec<i8> {
    let mut s = seed;
    let mut next = move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 33) as u32
    };
    (0..n)
        .map(|_| {
            if gauss {
                let sum: i32 = (0..4).map(|_| (next() % spread) as i32).sum();
                (sum / 2 - spread as i32) as i8
            } else {
                (next() % spread) as i32 as u8 as i8
            }
        })
        .collect()
}

fn bytes(m: &AnsMatrix) -> u64 {
    m.size_breakdown().container_bytes
}

fn fixed(layout: Layout) -> EncodeOptions {
    EncodeOptions {
        layout,
        ..EncodeOptions::default()
    }
}

#[test]
fn narrow_rows_go_to_stripes_and_never_past_int8() {
    // 2048 x 576 with about 7 bits of entropy: ans-warp-rows pays 32 flushed 64-bit states and
    // a 128-word block per row, more than the values themselves.
    let (rows, cols) = (2048, 576);
    let w = values(rows * cols, 1, 80, true);
    let r = encode(&w, rows, cols, &fixed(Layout::WarpRows)).unwrap();
    assert!(
        bytes(&r) > (rows * cols) as u64,
        "rows layout: {} bytes",
        bytes(&r)
    );
    let m = encode(&w, rows, cols, &EncodeOptions::auto(0.1)).unwrap();
    assert_eq!(m.layout(), Layout::WarpStripes);
    assert!(bytes(&m) <= (rows * cols + INT8_ALLOWANCE_BYTES) as u64);
    assert!(bytes(&m) < bytes(&r));
    assert_eq!(m.decode().unwrap(), w);
    // The container records the layout: a load gives it back.
    let back = AnsMatrix::from_bytes(&m.to_bytes()).unwrap();
    assert_eq!(back.layout(), Layout::WarpStripes);
}

#[test]
fn the_budget_decides_between_fast_and_small() {
    // Wide rows of low entropy: every layout is a fraction of a bit over the entropy.
    let (rows, cols) = (64, 16384);
    let w = values(rows * cols, 2, 16, true);
    let entropy = ans_codec::model::entropy_bits(&ans_codec::model::counts(&w)) / w.len() as f64;
    let over = |m: &AnsMatrix| m.bits_per_element() - entropy;
    // ans-lanes with 16-column segments: 32 bits of state per 16 elements, far past the rows'
    // overhead, so the choice goes on to ans-warp-rows.
    let narrow = |o: EncodeOptions| EncodeOptions {
        lane_segment: Some(16),
        ..o
    };
    let l16 = encode(&w, rows, cols, &narrow(fixed(Layout::WarpLanes))).unwrap();
    let r = encode(&w, rows, cols, &fixed(Layout::WarpRows)).unwrap();
    let s = encode(&w, rows, cols, &fixed(Layout::WarpStripes)).unwrap();
    let rows_over = over(&r);
    println!(
        "overheads: lanes/16 {:.4} rows {rows_over:.4} stripes {:.4}",
        over(&l16),
        over(&s)
    );
    assert!(
        rows_over > 0.01 && rows_over < 1.0,
        "rows overhead {rows_over}"
    );
    assert!(over(&l16) > rows_over + 0.5);
    let loose = encode(
        &w,
        rows,
        cols,
        &narrow(EncodeOptions::auto(rows_over + 0.01)),
    )
    .unwrap();
    assert_eq!(loose.layout(), Layout::WarpRows);
    assert_eq!(loose.to_bytes(), r.to_bytes());
    let tight = encode(
        &w,
        rows,
        cols,
        &narrow(EncodeOptions::auto(rows_over - 0.01)),
    )
    .unwrap();
    // Past the budget: the smaller of ans-warp-rows and ans-warp-stripes.
    let want = if bytes(&s) < bytes(&r) {
        Layout::WarpStripes
    } else {
        Layout::WarpRows
    };
    assert_eq!(tight.layout(), want);
    assert_eq!(tight.decode().unwrap(), w);
    // ans-lanes-esc comes first: within its overhead it is kept, even where the rows would fit
    // too.
    let lanes = encode(&w, rows, cols, &fixed(Layout::WarpLanesEsc)).unwrap();
    let lanes_over = over(&lanes);
    println!("overhead: lanes/{:?} {lanes_over:.4}", lanes.segment());
    let budget = lanes_over.max(rows_over) + 0.01;
    let first = encode(&w, rows, cols, &EncodeOptions::auto(budget)).unwrap();
    assert_eq!(first.layout(), Layout::WarpLanesEsc);
    assert_eq!(first.to_bytes(), lanes.to_bytes());
    assert_eq!(first.decode().unwrap(), w);
    let back = AnsMatrix::from_bytes(&first.to_bytes()).unwrap();
    assert_eq!(back.layout(), Layout::WarpLanesEsc);
    // Just under its overhead: ans-lanes with a longer segment (fewer flushed states) if one
    // fits, else another layout.
    let under = encode(&w, rows, cols, &EncodeOptions::auto(lanes_over - 0.001)).unwrap();
    if under.layout().is_lanes() {
        assert!(under.segment() > lanes.segment());
        assert!(over(&under) <= lanes_over - 0.001);
    }
    assert_eq!(under.decode().unwrap(), w);
    // Under the overhead of every segment (the longest, one per row, is the smallest): not
    // ans-lanes.
    let whole = EncodeOptions {
        lane_segment: Some(cols.next_multiple_of(16)),
        ..fixed(Layout::WarpLanesEsc)
    };
    let longest = encode(&w, rows, cols, &whole).unwrap();
    let least = over(&longest).min(lanes_over);
    let none = encode(&w, rows, cols, &EncodeOptions::auto(least - 0.001)).unwrap();
    assert!(!none.layout().is_lanes());
    // The option's segment is the one tried.
    let long = EncodeOptions {
        lane_segment: Some(16384),
        ..EncodeOptions::auto(budget)
    };
    let m = encode(&w, rows, cols, &long).unwrap();
    assert_eq!(
        (m.layout(), m.segment()),
        (Layout::WarpLanesEsc, Some(16384))
    );
}

#[test]
fn lanes_are_skipped_where_they_cannot_code() {
    let (rows, cols) = (64, 4096);
    let w = values(rows * cols, 5, 16, true);
    let all_in = EncodeOptions::auto(10.0);
    assert_eq!(
        encode(&w, rows, cols, &all_in).unwrap().layout(),
        Layout::WarpLanesEsc
    );
    // A forced precision other than 8 bits: ans-lanes cannot honour it, the others can.
    for precision in [7, 10] {
        let forced = EncodeOptions {
            precision: Some(precision),
            ..all_in
        };
        let m = encode(&w, rows, cols, &forced).unwrap();
        assert_eq!((m.layout(), m.precision()), (Layout::WarpRows, precision));
    }
    let eight = EncodeOptions {
        precision: Some(8),
        ..all_in
    };
    assert_eq!(
        encode(&w, rows, cols, &eight).unwrap().layout(),
        Layout::WarpLanesEsc
    );
    // A bad segment is an error, not a reason to pick another layout.
    let bad = EncodeOptions {
        lane_segment: Some(24),
        ..all_in
    };
    assert!(matches!(
        encode(&w, rows, cols, &bad),
        Err(AnsError::LaneSegment { segment: 24 })
    ));
}

#[test]
fn incompressible_matrices_are_refused_with_the_numbers() {
    // Uniform over all 256 values: 8 bits of entropy, so every layout is the int8 matrix plus
    // the coders' states (32 stripes x 256 bytes alone exceed the allowance).
    let (rows, cols) = (1024, 1024);
    let w = values(rows * cols, 3, 256, false);
    let e = encode(&w, rows, cols, &EncodeOptions::auto(0.1)).unwrap_err();
    match e {
        AnsError::Incompressible {
            bytes,
            limit,
            entropy_bits,
            ..
        } => {
            assert!(bytes > limit);
            assert_eq!(limit, (rows * cols + INT8_ALLOWANCE_BYTES) as u64);
            assert!(entropy_bits > 7.99, "{entropy_bits}");
        }
        other => panic!("{other}"),
    }
    assert!(e.to_string().contains("keep it as int8"), "{e}");
    // A fixed layout still encodes it (the caller asked for that layout).
    assert!(encode(&w, rows, cols, &fixed(Layout::WarpStripes)).is_ok());
}

#[test]
fn small_matrices_fit_the_allowance_and_bad_budgets_are_errors() {
    for (rows, cols) in [(1, 1), (3, 5), (33, 7), (1, 300)] {
        let w = values(rows * cols, 4, 9, true);
        let m = encode(&w, rows, cols, &EncodeOptions::auto(0.1)).unwrap();
        assert!(
            bytes(&m) <= (rows * cols + INT8_ALLOWANCE_BYTES) as u64,
            "{rows}x{cols}"
        );
        assert_eq!(m.decode().unwrap(), w);
    }
    for bad in [-0.5, f64::NAN, f64::INFINITY] {
        let e = encode(&[1, 2, 3], 1, 3, &EncodeOptions::auto(bad)).unwrap_err();
        assert!(matches!(e, AnsError::LayoutBudget { .. }), "{e}");
    }
    let _ = Model::fit(&[0i8; 4], &EncodeOptions::default()).unwrap();
}
