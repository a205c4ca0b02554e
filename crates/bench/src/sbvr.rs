//! SBVR extras: the CUDA-core (AND + popc) GEMV beside the format suite's rows, on the same
//! weights and inputs (`--sbvr-popc`).

use sbvr_format::SbvrMatrix;
use sbvr_format::gpu::Way;

use crate::dense::Baselines;
use crate::formats::run_gpu_tuned;
use crate::{BenchError, Row};

/// Runs every shape of `shapes` (seeded as in the format suite) at `batches` with the
/// CUDA-core way; rows are named like `n4/popc`.
///
/// # Errors
/// The format's errors, runtime errors, [`BenchError::Mismatch`].
pub fn run_popc(
    bench: &mut Baselines<'_>,
    shapes: &[(usize, usize)],
    batches: &[usize],
    progress: &mut dyn FnMut(&Row),
) -> Result<Vec<Row>, BenchError> {
    let mut out = Vec::new();
    for (index, &shape) in shapes.iter().enumerate() {
        out.extend(run_gpu_tuned::<SbvrMatrix>(
            bench,
            index,
            shape,
            batches,
            "/popc",
            &|d| {
                d.set_way(Some(Way::Popc));
                Ok(())
            },
            progress,
        )?);
    }
    Ok(out)
}
