//! Tests of `cmv_format::testing` itself, over a tiny format (`tiny/mod.rs`: a `u8` matrix
//! with a scale, stored in the container as one part) and deliberately broken variants of it
//! that the harness must catch.

mod tiny;

use cmv_format::testing::{
    HOSTILE_LIMITS, Hostile, Mutation, Outcome, SEED_BYTES, WordValue, check_fuzz_mutation,
    check_hostile_bytes, check_mutated, check_mutations, fix_crc, fuzz_bytes, fuzz_mutate,
    fuzz_mutations, header_sweep, round_trip, seeded_matrix, seeded_vec,
};
use cmv_format::{CompressedMatrix, Limits};
use tiny::*;

fn tiny<const BUG: u8>(rows: usize, cols: usize, scale: u32, seed: u64) -> Tiny<BUG> {
    Tiny::encode_slice(&seeded_vec(seed, rows * cols), rows, cols, &scale).unwrap()
}

const SHAPES: [(usize, usize); 5] = [(1, 1), (1, 13), (9, 1), (37, 150), (4, 4)];

#[test]
fn a_correct_format_round_trips() {
    for (k, &(rows, cols)) in SHAPES.iter().enumerate() {
        for scale in [1, 16] {
            let m = tiny::<OK>(rows, cols, scale, k as u64);
            let blob = round_trip(&m);
            assert_eq!(blob.len(), SPEC.header_bytes() + rows * cols);
            assert_eq!(
                Tiny::<OK>::from_container(&blob, &Limits::DEFAULT).unwrap(),
                m
            );
        }
    }
}

#[test]
fn a_correct_format_survives_mutations() {
    for (k, &(rows, cols)) in SHAPES.iter().enumerate() {
        let m = tiny::<OK>(rows, cols, 2, k as u64);
        let blob = round_trip(&m);
        let report = check_mutations::<Tiny<OK>>(&blob, 42 + k as u64, 2000);
        let sweep = header_sweep(&blob).len();
        assert_eq!(report.checked, 2 * (sweep + 2000));
        // Without the CRC re-fixed every changed blob is refused; with it, some load (a
        // value byte changed: another valid matrix) and some are refused by the checks past
        // the CRC.
        // (A mutation of the CRC field alone is refused as it is and unchanged re-fixed.)
        assert!(report.refused_unfixed * 2 + report.unchanged >= report.checked);
        assert!(report.refused_unfixed * 2 <= report.checked);
        assert!(report.loaded_fixed > 0, "{report:?}");
        assert!(report.refused_fixed > report.loaded_fixed, "{report:?}");
        let reached = |what: &str| report.refusals.keys().any(|k| k.starts_with(what));
        for what in [
            "Header",
            "Truncated",
            "TrailingBytes",
            "Magic",
            "Version",
            "NonZero",
        ] {
            assert!(reached(what), "{what} never refused a mutation: {report:?}");
        }
        assert!(!reached("Checksum"), "{report:?}");
        // Seeded: the same seed, the same report.
        assert_eq!(
            check_mutations::<Tiny<OK>>(&blob, 42 + k as u64, 2000),
            report
        );
    }
}

#[test]
fn hostile_bytes() {
    let blob = round_trip(&tiny::<OK>(3, 5, 1, 9));
    assert_eq!(
        check_hostile_bytes::<Tiny<OK>>(&blob),
        Hostile::Loaded {
            rows: 3,
            cols: 5,
            upgraded: false,
            reference_ok: Some(true)
        }
    );
    for bad in [&[][..], &[0; 7], &blob[..40], &[0xff; 200]] {
        assert!(matches!(
            check_hostile_bytes::<Tiny<OK>>(bad),
            Hostile::Refused(_)
        ));
    }
    let mut bad = blob.clone();
    *bad.last_mut().unwrap() ^= 1;
    let Hostile::Refused(e) = check_hostile_bytes::<Tiny<OK>>(&bad) else {
        panic!("a damaged blob loaded")
    };
    assert!(e.starts_with("Checksum"), "{e}");
    // A shape past the limits is refused before anything is read.
    let mut big = blob.clone();
    big[32..36].copy_from_slice(&(1u32 << 20).to_le_bytes());
    big[36..40].copy_from_slice(&(1u32 << 20).to_le_bytes());
    fix_crc(&mut big);
    let Hostile::Refused(e) = check_hostile_bytes::<Tiny<OK>>(&big) else {
        panic!("a huge shape loaded")
    };
    assert!(e.starts_with("Limit"), "{e}");
    const { assert!(HOSTILE_LIMITS.max_elements < 1 << 40) };
}

#[test]
fn check_mutated_outcomes() {
    let blob = round_trip(&tiny::<OK>(2, 3, 1, 1));
    assert_eq!(
        check_mutated::<Tiny<OK>>(&blob, &blob, false),
        Outcome::Unchanged
    );
    let mut value = blob.clone();
    *value.last_mut().unwrap() ^= 0x10;
    assert_eq!(
        check_mutated::<Tiny<OK>>(&blob, &value, false),
        Outcome::RefusedUnfixed
    );
    fix_crc(&mut value);
    assert_eq!(
        check_mutated::<Tiny<OK>>(&blob, &value, true),
        Outcome::LoadedFixed
    );
    let mut scale = blob.clone();
    scale[40] = 17;
    fix_crc(&mut scale);
    assert_eq!(
        check_mutated::<Tiny<OK>>(&blob, &scale, true),
        Outcome::RefusedFixed
    );
}

#[test]
fn mutations_apply_to_any_blob() {
    let blob: Vec<u8> = (0..64).collect();
    let apply = |m: Mutation| {
        let mut b = blob.clone();
        m.apply(&mut b);
        b
    };
    assert_eq!(apply(Mutation::FlipBit { pos: 65, bit: 7 })[1], 0x81);
    assert_eq!(apply(Mutation::Truncate { len: 70 }).len(), 6);
    assert_eq!(apply(Mutation::Truncate { len: 64 }).len(), 0);
    assert_eq!(
        apply(Mutation::Insert {
            pos: 2,
            bytes: vec![9, 9]
        })[..5],
        [0, 1, 9, 9, 2]
    );
    assert_eq!(apply(Mutation::Delete { pos: 62, len: 10 }).len(), 62);
    let set = apply(Mutation::SetU32 {
        pos: 7,
        value: WordValue::Set(0xdead_beef),
    });
    assert_eq!(set[4..8], 0xdead_beefu32.to_le_bytes());
    let add = apply(Mutation::SetU64 {
        pos: 9,
        value: WordValue::Add(-9),
    });
    let old = u64::from_le_bytes(blob[8..16].try_into().unwrap());
    assert_eq!(add[8..16], (old - 9).to_le_bytes());
    let copy = apply(Mutation::Copy {
        from: 0,
        to: 60,
        len: 10,
    });
    assert_eq!(copy[60..], [0, 1, 2, 3]);
    // Nothing panics on tiny blobs.
    for len in 0..9 {
        for m in header_sweep(&blob) {
            let mut b = vec![1u8; len];
            m.apply(&mut b);
        }
    }
}

#[test]
fn the_header_sweep_covers_the_header() {
    let blob = round_trip(&tiny::<OK>(2, 3, 1, 1));
    let sweep = header_sweep(&blob);
    let header = SPEC.header_bytes();
    for pos in (0..header as u32).step_by(4) {
        assert!(
            sweep
                .iter()
                .any(|m| matches!(m, Mutation::SetU32 { pos: p, .. } if *p == pos))
        );
    }
    assert!(sweep.contains(&Mutation::Truncate { len: 0 }));
    assert!(sweep.contains(&Mutation::Truncate {
        len: header as u32 + 5
    }));
}

#[test]
fn fuzz_entry_points() {
    let mut loaded = 0;
    let mut refused = 0;
    for s in 0..400u32 {
        let mut data = seeded_vec::<u8>(u64::from(s), SEED_BYTES + (s as usize % 40));
        if let Some(flags) = data.get_mut(SEED_BYTES) {
            *flags = (s % 2) as u8;
        }
        match fuzz_mutate::<Tiny<OK>>(&data) {
            Some(Outcome::LoadedFixed) => loaded += 1,
            Some(_) => refused += 1,
            None => {}
        }
        fuzz_bytes::<Tiny<OK>>(&data);
    }
    assert!(loaded > 0 && refused > 0, "{loaded} {refused}");
    let m = seeded_matrix::<Tiny<OK>>(&[200, 0xff, 1, 0]).unwrap(); // 200 % 40 + 1 rows, 0xff % 200 + 1 columns
    assert_eq!((m.rows, m.cols, m.scale), (1, 56, 3));
    let big = seeded_matrix::<Tiny<OK>>(&[39, 199, 0, 0]).unwrap();
    assert_eq!((big.rows, big.cols, big.scale), (40, 4096 / 40, 1));
    // An empty mutation list leaves the blob as it is.
    let blob = m.container_bytes();
    assert_eq!(fuzz_mutations(&blob, &[]), (vec![], true));
    assert_eq!(
        check_fuzz_mutation::<Tiny<OK>>(&blob, &[1]),
        Outcome::Unchanged
    );
    // The CRC re-fixed, a valid blob loads from the bytes target too.
    let mut broken_crc = blob.clone();
    broken_crc[16] ^= 1;
    assert!(matches!(
        fuzz_bytes::<Tiny<OK>>(&broken_crc),
        [Hostile::Refused(_), Hostile::Loaded { .. }]
    ));
}

#[test]
#[should_panic(expected = "not canonical")]
fn a_loader_that_ignores_a_header_word_is_caught() {
    let blob = round_trip(&tiny::<IGNORES_RESERVED>(3, 4, 1, 1));
    check_mutations::<Tiny<IGNORES_RESERVED>>(&blob, 1, 100);
}

#[test]
#[should_panic(expected = "with the CRC as it was loaded")]
fn a_loader_that_skips_the_crc_is_caught() {
    let blob = round_trip(&tiny::<NO_CRC>(3, 4, 1, 1));
    check_mutations::<Tiny<NO_CRC>>(&blob, 1, 100);
}

#[test]
#[should_panic(expected = "index out of bounds")]
fn a_loader_that_trusts_the_header_shape_is_caught() {
    let blob = round_trip(&tiny::<TRUSTS_SHAPE>(3, 4, 1, 1));
    check_mutations::<Tiny<TRUSTS_SHAPE>>(&blob, 1, 100);
}

#[test]
#[should_panic(expected = "size_breakdown().container_bytes is not container_bytes().len()")]
fn sizes_that_do_not_add_up_are_caught() {
    round_trip(&tiny::<BAD_SIZES>(3, 4, 1, 1));
}

#[test]
#[should_panic(expected = "was accepted")]
fn a_reference_that_takes_any_length_is_caught() {
    round_trip(&tiny::<LAX_REFERENCE>(3, 4, 1, 1));
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn arbitrary_bytes_never_break_the_tiny_format(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            fuzz_bytes::<Tiny<OK>>(&data);
        }

        #[test]
        fn arbitrary_mutations_never_break_the_tiny_format(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            fuzz_mutate::<Tiny<OK>>(&data);
        }
    }
}
