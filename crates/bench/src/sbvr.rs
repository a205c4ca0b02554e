//! SBVR extras: the GEMV ways other than the default (`--sbvr-ways`: binary tensor cores `mma`,
//! int8 tensor cores `i8`, CUDA cores `popc`) beside the format suite's rows, on the same
//! weights and inputs.

use sbvr_format::SbvrMatrix;
use sbvr_format::gpu::Way;

use crate::dense::Baselines;
use crate::formats::run_gpu_tuned;
use crate::{BenchError, Row};

/// Runs every shape of `shapes` (seeded as in the format suite) at `batches` with each of
/// `ways`; rows are named like `n4/i8`.
///
/// # Errors
/// The format's errors, runtime errors, [`BenchError::Mismatch`].
pub fn run_ways(
    bench: &mut Baselines<'_>,
    shapes: &[(usize, usize)],
    batches: &[usize],
    ways: &[Way],
    progress: &mut dyn FnMut(&Row),
) -> Result<Vec<Row>, BenchError> {
    let mut out = Vec::new();
    for &way in ways {
        for (index, &shape) in shapes.iter().enumerate() {
            out.extend(run_gpu_tuned::<SbvrMatrix>(
                bench,
                index,
                shape,
                batches,
                &format!("/{}", way.name()),
                &|d| {
                    d.set_way(Some(way));
                    Ok(())
                },
                progress,
            )?);
        }
    }
    Ok(out)
}

/// Parses a `--sbvr-ways` item (`mma`, `i8`, `popc`).
///
/// # Errors
/// A message naming the item and the choices.
pub fn parse_way(s: &str) -> Result<Way, String> {
    Way::from_name(s).ok_or_else(|| {
        let names: Vec<_> = Way::ALL.iter().map(|w| w.name()).collect();
        format!("unknown SBVR way {s:?}: one of {}", names.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ways_parse_by_name() {
        assert_eq!(parse_way("i8"), Ok(Way::Int8));
        assert_eq!(parse_way("popc"), Ok(Way::Popc));
        let e = parse_way("int4").unwrap_err();
        assert!(e.contains("int4") && e.contains("mma, i8, popc"), "{e}");
    }
}
