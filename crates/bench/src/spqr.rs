//! The SpQR extra: fixed splits (blocks per tile row, `--spqr-splits 2,4`) beside the
//! launcher's own choice, for tuning. The SpQR GEMV rows themselves come from the format suite
//! ([`crate::formats`]); these rows are the same [`Row`]s, named like `csr/s4`, measured by the
//! same code on the same weights and inputs. So are the integer-MMA kernel's rows at batch 1
//! (`csr/i8`, [`run_int8`]).

use spqr_format::SpqrMatrix;

use crate::dense::Baselines;
use crate::formats::{format_err, run_gpu_tuned};
use crate::{BenchError, Row};

/// Runs every shape of `shapes` (seeded as in the format suite) at `batches` (each in
/// `1..=MAX_GPU_BATCH`) with each fixed split of `splits`.
///
/// # Errors
/// The format's errors ([`spqr_format::SpqrError::Splits`] for a split past the matrix's
/// steps), runtime errors, [`BenchError::Mismatch`].
pub fn run_splits(
    bench: &mut Baselines<'_>,
    shapes: &[(usize, usize)],
    batches: &[usize],
    splits: &[u32],
    progress: &mut dyn FnMut(&Row),
) -> Result<Vec<Row>, BenchError> {
    let mut out = Vec::new();
    for (index, &shape) in shapes.iter().enumerate() {
        for &s in splits {
            out.extend(run_gpu_tuned::<SpqrMatrix>(
                bench,
                index,
                shape,
                batches,
                &format!("/s{s}"),
                &|d| d.set_splits(Some(s)).map_err(format_err::<SpqrMatrix>),
                progress,
            )?);
        }
    }
    Ok(out)
}

/// Runs every shape of `shapes` at batch 1 with the integer-MMA kernel
/// (`DeviceSpqrMatrix::set_int8`; rows named like `csr/i8`), beside the default kernel's rows.
///
/// # Errors
/// As [`run_splits`].
pub fn run_int8(
    bench: &mut Baselines<'_>,
    shapes: &[(usize, usize)],
    progress: &mut dyn FnMut(&Row),
) -> Result<Vec<Row>, BenchError> {
    let mut out = Vec::new();
    for (index, &shape) in shapes.iter().enumerate() {
        out.extend(run_gpu_tuned::<SpqrMatrix>(
            bench,
            index,
            shape,
            &[1],
            "/i8",
            &|d| d.set_int8(true).map_err(format_err::<SpqrMatrix>),
            progress,
        )?);
    }
    Ok(out)
}
