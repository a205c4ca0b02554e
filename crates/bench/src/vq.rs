//! VQ extras: the GEMV kernels other than the default (`--vq-kernels`: `mma` (the default
//! choice), `mma2`, `mma4`, `table`, `stream`) beside the format suite's rows, on the same
//! weights and inputs.

use vq_codebook::VqMatrix;
use vq_codebook::gpu::{VqKernel, set_kernel_preference};

use crate::dense::Baselines;
use crate::formats::run_gpu_tuned;
use crate::{BenchError, Row};

/// Runs every shape of `shapes` (seeded as in the format suite) at `batches` with each of
/// `kernels` where it takes the matrix (the default choice where it does not); rows are named
/// like `gptvq2/table`.
///
/// # Errors
/// The format's errors, runtime errors, [`BenchError::Mismatch`].
pub fn run_kernels(
    bench: &mut Baselines<'_>,
    shapes: &[(usize, usize)],
    batches: &[usize],
    kernels: &[VqKernel],
    progress: &mut dyn FnMut(&Row),
) -> Result<Vec<Row>, BenchError> {
    let mut out = Vec::new();
    for &kernel in kernels {
        set_kernel_preference(Some(kernel));
        let rows = shapes
            .iter()
            .enumerate()
            .try_fold(Vec::new(), |mut acc, (index, &shape)| {
                acc.extend(run_gpu_tuned::<VqMatrix>(
                    bench,
                    index,
                    shape,
                    batches,
                    &format!("/{}", kernel.name()),
                    &|_| Ok(()),
                    progress,
                )?);
                Ok::<_, BenchError>(acc)
            });
        set_kernel_preference(None);
        out.extend(rows?);
    }
    Ok(out)
}

/// Parses a `--vq-kernels` item (`mma`, `mma2`, `mma4`, `table`, `stream`).
///
/// # Errors
/// A message naming the item and the choices.
pub fn parse_kernel(s: &str) -> Result<VqKernel, String> {
    VqKernel::from_name(s)
        .ok_or_else(|| format!("unknown VQ kernel {s:?}: one of mma, mma2, mma4, table, stream"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_parse_by_name() {
        assert_eq!(parse_kernel("table"), Ok(VqKernel::Table));
        assert_eq!(
            parse_kernel("mma4"),
            Ok(VqKernel::Mma {
                row_groups: Some(4)
            })
        );
        for k in ["mma", "mma2", "mma4", "table", "stream"] {
            assert_eq!(parse_kernel(k).map(VqKernel::name), Ok(k));
        }
        let e = parse_kernel("lut").unwrap_err();
        assert!(
            e.contains("lut") && e.contains("mma, mma2, mma4, table, stream"),
            "{e}"
        );
    }
}
