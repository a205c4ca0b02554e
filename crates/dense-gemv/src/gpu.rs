//! GPU paths: the Rust kernels of `kernels-rs/dense-kernels`, and cuBLAS.

use std::sync::{Arc, Mutex, PoisonError};

use cmv_runtime::cudarc::cublas::sys::cublasOperation_t;
use cmv_runtime::cudarc::cublas::{CudaBlas, Gemm, GemmConfig};
use cmv_runtime::{
    CudaSlice, CudaStream, DeviceRepr, Gpu, Kernel, LaunchConfig, RuntimeError, TensorMap, TmaElem,
    dev_ptr, dev_ptr_mut, tensor_map_2d,
};
use dense_kernels::bulk::{
    BULK_F16_KERNELS, BULK_I8_KERNELS, BULK_ROW_BYTES, BULK_T64, BULK_T112, BULK_T128, BulkGeom,
    BulkKernel, BulkPlan, GemvBulkF16Params, GemvBulkI8Params, bulk_geom_preferred, bulk_kernel,
    bulk_pdl_preferred, bulk_plan, bulk_plan_fits, bulk_plan_for, bulk_preferred,
};
use dense_kernels::tc::{
    GemvTcF16Params, GemvTcI8Params, TC_COUNTERS, TC_DEFAULTS, TC_F16_KERNELS, TC_I8_KERNELS,
    TC_THREADS, TC_WORKSPACE_WORDS, TC_XS_MAX_KBLOCKS, TcKernel, TcPlan, tc_choice, tc_kblocks,
    tc_many_rows, tc_rows_per_block, tc_sliced, tc_smem_bytes, tc_split_words, tc_stream_words,
};
use dense_kernels::{
    BLOCK_THREADS, F16_COL_MULTIPLE, F16_KERNEL_BATCHES, GemvF16AnyParams, GemvF16Params,
    GemvI8AnyParams, GemvI8Params, I8_COL_MULTIPLE, KERNEL_BATCHES, STREAM_THREADS,
    StreamReadParams, f16_kernel_batch, kernel_batch, rows_per_warp_f16, rows_per_warp_i8,
};
use half::f16;

use crate::{DenseError, PTX, PTX_SM90, Result, check_batch, check_len, check_shape};

/// A row-major matrix on the GPU.
#[derive(Debug)]
pub struct DeviceMatrix<T> {
    data: CudaSlice<T>,
    rows: u32,
    cols: u32,
}

impl<T: DeviceRepr> DeviceMatrix<T> {
    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows as usize
    }

    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols as usize
    }

    /// Bytes of the matrix, what one product must read.
    pub fn bytes(&self) -> usize {
        self.rows() * self.cols() * std::mem::size_of::<T>()
    }

    /// The device buffer.
    pub fn data(&self) -> &CudaSlice<T> {
        &self.data
    }

    /// A second copy on the device (a device-to-device copy), e.g. to rotate through copies
    /// larger than L2 when timing.
    ///
    /// # Errors
    /// Runtime errors (out of memory).
    pub fn try_clone(&self) -> Result<Self> {
        let data = self.data.try_clone().map_err(|source| {
            DenseError::Runtime(RuntimeError::Driver {
                op: "cuMemcpyDtoD",
                source,
            })
        })?;
        Ok(Self {
            data,
            rows: self.rows,
            cols: self.cols,
        })
    }
}

impl DeviceMatrix<f16> {
    /// Uploads a row-major fp16 matrix.
    ///
    /// # Errors
    /// [`DenseError::NonFinite`] for a NaN or infinite weight, shape and length errors, and
    /// runtime errors.
    pub fn upload_f16(gpu: &Gpu, w: &[f16], rows: usize, cols: usize) -> Result<Self> {
        let (r, c) = check_shape(rows, cols)?;
        check_len("weights", w.len(), rows * cols)?;
        if let Some(index) = w[..rows * cols].iter().position(|v| !v.is_finite()) {
            return Err(DenseError::NonFinite {
                index,
                value: w[index].to_f32(),
            });
        }
        Ok(Self {
            data: gpu.upload(&w[..rows * cols])?,
            rows: r,
            cols: c,
        })
    }
}

impl DeviceMatrix<i8> {
    /// Uploads a row-major int8 matrix.
    ///
    /// # Errors
    /// Shape, length and runtime errors.
    pub fn upload_i8(gpu: &Gpu, w: &[i8], rows: usize, cols: usize) -> Result<Self> {
        let (r, c) = check_shape(rows, cols)?;
        check_len("weights", w.len(), rows * cols)?;
        Ok(Self {
            data: gpu.upload(&w[..rows * cols])?,
            rows: r,
            cols: c,
        })
    }
}

/// The dense Rust kernels, loaded once for a [`Gpu`].
#[derive(Debug)]
pub struct DenseGemv {
    stream: Arc<CudaStream>,
    f16: Vec<Kernel>,
    i8: Vec<Kernel>,
    f16_any: Kernel,
    i8_any: Kernel,
    stream_read: Kernel,
    /// The default tensor-core kernels (the first `TC_DEFAULTS` of each table): fp16, int8.
    tc_f16: Vec<Kernel>,
    tc_i8: Vec<Kernel>,
    /// The split-K workspace and zeroed counters of the tensor-core kernels (each launch
    /// leaves the counters zero); the lock keeps two launches from sharing them at once.
    tc_ws: Mutex<TcWorkspace>,
    /// The copy-engine kernels (`dense_kernels::bulk`, [`PTX_SM90`]) on compute capability 9.0,
    /// in table order: fp16, int8.
    bulk: Option<(Vec<Kernel>, Vec<Kernel>)>,
    /// The smallest batch the default path runs on them at every shape ([`BULK_ENV`]; `None`:
    /// where `bulk_preferred` says).
    bulk_from: Option<u32>,
    /// The grid the default path gives them ([`BULK_GRID_ENV`]; `bulk_plan`'s without it).
    bulk_grid: Option<u32>,
    /// The tile the default path takes ([`BULK_TILE_ENV`]; `None`: where
    /// `bulk_geom_preferred` says).
    bulk_tile: Option<BulkGeom>,
    /// Whether the copy-engine kernels are launched with programmatic dependent launch
    /// ([`DenseGemv::with_pdl`], [`PDL_ENV`]).
    bulk_pdl: bool,
    sm_count: u32,
}

/// The environment variable that overrides where the default path of [`DenseGemv::gemv_f16`]
/// and [`DenseGemv::gemv_i8`] runs the copy-engine kernels (`dense_kernels::bulk`; compute
/// capability 9.0 only), for comparisons: `CMV_DENSE_BULK=N` runs them from `N` vectors on at
/// every shape, `CMV_DENSE_BULK=0` never. Without it the default path follows
/// `dense_kernels::bulk::bulk_preferred` (the shapes where they were measured faster).
pub const BULK_ENV: &str = "CMV_DENSE_BULK";

/// The environment variable that sets the grid of the bulk kernels in the default path
/// (`CMV_DENSE_BULK_GRID=N` blocks instead of one per SM; for experiments with the schedule).
pub const BULK_GRID_ENV: &str = "CMV_DENSE_BULK_GRID";

/// The environment variable that sets the tile of the bulk kernels in the default path
/// (`CMV_DENSE_BULK_TILE=64`, `112` or `128` rows at every shape; without it, where
/// `dense_kernels::bulk::bulk_geom_preferred` says; for comparisons).
pub const BULK_TILE_ENV: &str = "CMV_DENSE_BULK_TILE";

/// The environment variable that turns off programmatic dependent launch of the copy-engine
/// kernels when set to `0` (for comparisons; [`DenseGemv::with_pdl`]).
pub const PDL_ENV: &str = "CMV_DENSE_PDL";

/// Split-K workspace of the tensor-core kernels: partial sums and one counter per row block.
/// The counters are zero between launches: a launch that completes leaves them so, and one that
/// faults leaves the CUDA context unusable (a sticky error), so a new context, with a new
/// `DenseGemv` and zeroed counters, is needed anyway.
#[derive(Debug)]
struct TcWorkspace {
    acc: CudaSlice<u32>,
    counters: CudaSlice<u32>,
}

/// The launch of tensor-core kernel `k` with `plan` for `batch` vectors: a grid of
/// `(stream_blocks, 1, 1)` for a stream-K kernel, else `(row_blocks, ksplit, 1)`, and the
/// shared memory of a shared-input kernel.
fn tc_config(k: TcKernel, plan: TcPlan, batch: u32) -> LaunchConfig {
    let grid_dim = if k.stream {
        (plan.stream_blocks, 1, 1)
    } else {
        (plan.row_blocks, plan.ksplit, 1)
    };
    LaunchConfig {
        grid_dim,
        block_dim: (TC_THREADS, 1, 1),
        shared_mem_bytes: tc_smem_bytes(k, plan.kblocks_per_split, batch),
    }
}

/// The buffers of an fp16 launch for `batch` vectors hold `batch` rows of `w`'s columns (`x`)
/// and of its rows (`y`).
fn check_io_f16(
    w: &DeviceMatrix<f16>,
    x: &CudaSlice<f16>,
    y: &CudaSlice<f16>,
    batch: u32,
) -> Result<()> {
    check_len("input", x.len(), batch as usize * w.cols())?;
    check_len("output", y.len(), batch as usize * w.rows())
}

/// As [`check_io_f16`] for an int8 launch and its two outputs.
fn check_io_i8(
    w: &DeviceMatrix<i8>,
    x: &CudaSlice<i8>,
    (y32, y8): (&CudaSlice<i32>, &CudaSlice<i8>),
    batch: u32,
) -> Result<()> {
    check_len("input", x.len(), batch as usize * w.cols())?;
    check_len("int32 output", y32.len(), batch as usize * w.rows())?;
    check_len("int8 output", y8.len(), batch as usize * w.rows())
}

/// The parameters of an fp16 tensor-core or copy-engine launch (`per`: the plan's k-blocks
/// per split; unused by the copy-engine kernels).
fn f16_params(
    w: &DeviceMatrix<f16>,
    x: &CudaSlice<f16>,
    y: &mut CudaSlice<f16>,
    ws: &mut TcWorkspace,
    batch: u32,
    per: u32,
) -> GemvTcF16Params {
    GemvTcF16Params {
        w: dev_ptr(&w.data).cast(),
        x: dev_ptr(x).cast(),
        y: dev_ptr_mut(y).cast(),
        acc: dev_ptr_mut(&mut ws.acc),
        counters: dev_ptr_mut(&mut ws.counters),
        rows: w.rows,
        cols: w.cols,
        batch,
        kblocks_per_split: per,
    }
}

/// The parameters of an int8 tensor-core or copy-engine launch; see [`f16_params`].
fn i8_params(
    w: &DeviceMatrix<i8>,
    x: &CudaSlice<i8>,
    (y32, y8): (&mut CudaSlice<i32>, &mut CudaSlice<i8>),
    scale: f32,
    ws: &mut TcWorkspace,
    batch: u32,
    per: u32,
) -> GemvTcI8Params {
    GemvTcI8Params {
        w: dev_ptr(&w.data).cast(),
        x: dev_ptr(x).cast(),
        y32: dev_ptr_mut(y32),
        y8: dev_ptr_mut(y8),
        acc: dev_ptr_mut(&mut ws.acc),
        counters: dev_ptr_mut(&mut ws.counters),
        scale,
        rows: w.rows,
        cols: w.cols,
        batch,
        kblocks_per_split: per,
        pad: 0,
    }
}

/// A matrix whose columns are whole 16-byte chunks (`col_multiple` elements) and a batch of
/// `1..=k.batch` vectors, as tensor-core kernel `k` needs.
fn check_tc_shape(
    k: TcKernel,
    rows: usize,
    cols: usize,
    col_multiple: u32,
    batch: u32,
) -> Result<()> {
    if !cols.is_multiple_of(col_multiple as usize) {
        return Err(DenseError::Shape { rows, cols });
    }
    if batch == 0 || batch > k.batch {
        return Err(DenseError::Batch {
            batch: batch as usize,
        });
    }
    Ok(())
}

/// Whether the tensor-core kernels' column slices beat the CUDA-core kernel for 2 to 4 fp16
/// (or 2 int8) vectors on a `rows x cols` matrix of `chunks` chunks per row: where the slices
/// are the tensor-core default ([`tc_sliced`]) and the matrix is not much wider than tall. On
/// wide ones (`cols > 2 rows`: 4096x11008, 4096x14336, 8192x28672) and few long rows the
/// CUDA-core kernel, whose blocks own 2 rows each, was faster on an H100 (docs/PERF.md).
fn few_vectors_on_tensor_cores(rows: u32, cols: u32, chunks: u32, sm_count: u32) -> bool {
    tc_sliced(rows, chunks, sm_count) && u64::from(cols) <= 2 * u64::from(rows)
}

/// Whether `gemv_f16` runs `batch` vectors on a `rows x cols` matrix on the tensor cores
/// (`dense_kernels::tc`) rather than the CUDA-core kernels: from 5 vectors on always; 2 to 4
/// where the column-slice kernels were faster (see `few_vectors_on_tensor_cores`).
pub fn f16_on_tensor_cores(batch: u32, rows: u32, cols: u32, sm_count: u32) -> bool {
    batch > 4 || (batch >= 2 && few_vectors_on_tensor_cores(rows, cols, cols / 8, sm_count))
}

/// Whether `gemv_i8` runs `batch` vectors on the tensor cores: from 3 on always; 2 on large
/// matrices ([`tc_many_rows`]) that are not much wider than tall, where the column-slice
/// kernels were faster than the `dp4a` kernel (on MiniLM's small ones it was the other way).
pub fn i8_on_tensor_cores(batch: u32, rows: u32, cols: u32, sm_count: u32) -> bool {
    batch >= 3
        || (batch == 2
            && tc_many_rows(rows, sm_count)
            && few_vectors_on_tensor_cores(rows, cols, cols / 16, sm_count))
}

/// Checks that `plan` covers `rows` rows of `chunks` chunks with kernel `k` exactly as the
/// kernel assumes, and that a split plan fits the workspace and the counters.
fn check_tc_plan(k: TcKernel, plan: TcPlan, rows: u32, chunks: u32) -> Result<()> {
    let kblocks = tc_kblocks(chunks);
    let per = plan.kblocks_per_split;
    let rows_ok = plan.row_blocks == rows.div_ceil(tc_rows_per_block(k));
    let ok = if k.stream {
        let units = u64::from(plan.row_blocks) * u64::from(kblocks);
        rows_ok
            && plan.ksplit == 1
            && per == kblocks
            && plan.stream_blocks >= 1
            && u64::from(plan.stream_blocks) <= units.max(1)
            && plan.row_blocks as usize <= TC_COUNTERS
            && tc_stream_words(k, plan.stream_blocks) <= TC_WORKSPACE_WORDS
    } else {
        rows_ok
            && plan.stream_blocks == 0
            && plan.ksplit >= 1
            && plan.ksplit <= 65535
            && per >= 1
            && (!k.xs || per <= TC_XS_MAX_KBLOCKS)
            && u64::from(plan.ksplit) * u64::from(per) >= u64::from(kblocks)
            && u64::from(plan.ksplit - 1) * u64::from(per) < u64::from(kblocks.max(1))
            && (plan.ksplit == 1
                || (plan.row_blocks as usize <= TC_COUNTERS
                    && plan.ksplit as usize * tc_split_words(k, plan.row_blocks)
                        <= TC_WORKSPACE_WORDS))
    };
    if ok {
        Ok(())
    } else {
        Err(DenseError::Runtime(RuntimeError::InvalidLaunch {
            kernel: k.name,
            reason: format!(
                "plan {plan:?} does not cover {rows} rows of {kblocks} k-blocks with {} row \
                 tiles per warp within the split-K workspace; use dense_gemv::tc_choice, \
                 tc_plan or tc_stream_plan",
                k.mt
            ),
        }))
    }
}

/// Work split of one launch of a fast GEMV kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    /// Rows per warp (fixed by the kernel).
    pub rows_per_warp: u32,
    /// Warps that share each group of rows, splitting its columns (1, 2, 4 or 8).
    pub slices: u32,
    /// Threads per block (a multiple of `32 * slices`, at most 1024).
    pub block_threads: u32,
}

impl Split {
    /// The launch configuration for `rows` rows and `batch_slots` accumulators per row (the
    /// kernel's batch), with the shared memory the cross-warp reduction needs.
    fn config(&self, rows: u32, batch_slots: u32) -> Result<LaunchConfig> {
        let warps_per_block = self.block_threads / 32;
        let valid = matches!(self.slices, 1 | 2 | 4 | 8)
            && self.block_threads.is_multiple_of(32)
            && (32..=1024).contains(&self.block_threads)
            && warps_per_block.is_multiple_of(self.slices)
            && self.rows_per_warp > 0;
        if !valid {
            return Err(DenseError::Runtime(RuntimeError::InvalidLaunch {
                kernel: "dense GEMV",
                reason: format!("invalid work split {self:?}"),
            }));
        }
        let rows_per_block = warps_per_block / self.slices * self.rows_per_warp;
        let smem = if self.slices > 1 {
            warps_per_block * self.rows_per_warp * batch_slots * 4
        } else {
            0
        };
        Ok(LaunchConfig {
            grid_dim: (rows.div_ceil(rows_per_block), 1, 1),
            block_dim: (self.block_threads, 1, 1),
            shared_mem_bytes: smem,
        })
    }
}

/// Slices for a row group: `preferred`, halved while a slice would hold fewer than 32 chunks
/// (one 16-byte load per lane).
fn slices_for(chunks_per_row: u32, preferred: u32) -> u32 {
    let mut slices = preferred;
    while slices > 1 && chunks_per_row / slices < 32 {
        slices /= 2;
    }
    slices
}

/// The work split `gemv_f16` uses for a `rows x cols` matrix (cols a multiple of 8) and
/// `batch` vectors. Chosen from `cmv-bench --explore` on an H200 (docs/PERF.md): the columns
/// are split 8 ways for tall matrices (8192 rows or more) and 4 ways otherwise.
/// The tensor-core kernels (batch 5 to 16) split the columns 8 ways: a group of warps owns 16
/// rows, so only splitting the columns gives the GPU enough warps.
pub fn f16_split(rows: u32, cols: u32, batch: u32) -> Split {
    let kb = f16_kernel_batch(batch).unwrap_or(dense_kernels::MAX_BATCH);
    let preferred = if kb > 4 || rows >= 8192 { 8 } else { 4 };
    Split {
        rows_per_warp: rows_per_warp_f16(kb),
        slices: slices_for(cols / 8, preferred),
        block_threads: BLOCK_THREADS,
    }
}

/// The work split `gemv_i8` uses (cols a multiple of 16). At batch 1 (4 rows per warp) the
/// columns are split into the most slices (up to 8) that keep the grid at or under 4096 warps:
/// from `cmv-bench --explore` on an H200 (docs/PERF.md), more warps than that only added
/// cross-warp reductions; other batches split 4 ways.
pub fn i8_split(rows: u32, cols: u32, batch: u32) -> Split {
    let kb = kernel_batch(batch).unwrap_or(dense_kernels::MAX_BATCH);
    let rows_per_warp = rows_per_warp_i8(kb);
    let preferred = if kb == 1 {
        let warps = rows.div_ceil(rows_per_warp);
        let mut s = 1;
        while s < 8 && warps * s * 2 <= 4096 {
            s *= 2;
        }
        s
    } else {
        4
    };
    Split {
        rows_per_warp,
        slices: slices_for(cols / 16, preferred),
        block_threads: BLOCK_THREADS,
    }
}

fn scalar_grid(rows: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (rows.div_ceil(BLOCK_THREADS / 32), 1, 1),
        block_dim: (BLOCK_THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

fn batch_index(batch: u32) -> usize {
    let kb = kernel_batch(batch).unwrap_or(dense_kernels::MAX_BATCH);
    KERNEL_BATCHES
        .iter()
        .position(|&b| b == kb)
        .unwrap_or(KERNEL_BATCHES.len() - 1)
}

/// The kernel family the default path of [`DenseGemv::gemv_f16`] / [`DenseGemv::gemv_i8`]
/// runs for one shape and batch ([`DenseGemv::f16_path`], [`DenseGemv::i8_path`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DensePath {
    /// The copy-engine kernel at this index of `BULK_F16_KERNELS` / `BULK_I8_KERNELS`
    /// (compute capability 9.0, where `dense_kernels::bulk::bulk_preferred` says).
    Bulk(usize),
    /// The tensor-core kernel at this index of `TC_F16_KERNELS` / `TC_I8_KERNELS`, with its plan.
    Tc(usize, TcPlan),
    /// The CUDA-core kernel at this index of the loaded fast kernels (one per kernel batch).
    Cuda(usize),
    /// The scalar fallback, for columns that are not whole 16-byte chunks.
    Any,
}

impl DenseGemv {
    /// Loads the kernels (JIT-compiling the PTX on first use in this process).
    ///
    /// # Errors
    /// Runtime errors: a driver that rejects the PTX, a missing entry point.
    pub fn new(gpu: &Gpu) -> Result<Self> {
        let load = |name: &'static str| gpu.kernel(&PTX, name);
        let f16 = F16_KERNEL_BATCHES
            .iter()
            .map(|&b| load(dense_kernels::f16_kernel_name(b).unwrap_or("cmv_gemv_f16_mma_n16")))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let i8 = KERNEL_BATCHES
            .iter()
            .map(|&b| load(dense_kernels::i8_kernel_name(b).unwrap_or("cmv_gemv_i8_b16")))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(Self {
            stream: gpu.stream().clone(),
            f16,
            i8,
            f16_any: load("cmv_gemv_f16_any")?,
            i8_any: load("cmv_gemv_i8_any")?,
            stream_read: load("cmv_stream_read")?,
            tc_f16: TC_F16_KERNELS[..TC_DEFAULTS]
                .iter()
                .map(|k| load(k.name))
                .collect::<std::result::Result<_, _>>()?,
            tc_i8: TC_I8_KERNELS[..TC_DEFAULTS]
                .iter()
                .map(|k| load(k.name))
                .collect::<std::result::Result<_, _>>()?,
            tc_ws: Mutex::new(TcWorkspace {
                acc: gpu.alloc_zeros::<u32>(TC_WORKSPACE_WORDS)?,
                counters: gpu.alloc_zeros::<u32>(TC_COUNTERS)?,
            }),
            bulk: if gpu.info().compute_capability == (9, 0) {
                let load = |k: &BulkKernel| gpu.kernel(&PTX_SM90, k.name);
                Some((
                    BULK_F16_KERNELS
                        .iter()
                        .map(load)
                        .collect::<std::result::Result<_, _>>()?,
                    BULK_I8_KERNELS
                        .iter()
                        .map(load)
                        .collect::<std::result::Result<_, _>>()?,
                ))
            } else {
                None
            },
            bulk_grid: match std::env::var(BULK_GRID_ENV).map(|v| v.trim().parse::<u32>()) {
                Ok(Ok(n)) if n > 0 => Some(n),
                _ => None,
            },
            bulk_from: match std::env::var(BULK_ENV).map(|v| v.trim().parse::<u32>()) {
                Ok(Ok(0)) => Some(u32::MAX),
                Ok(Ok(n)) => Some(n),
                _ => None,
            },
            bulk_tile: match std::env::var(BULK_TILE_ENV).map(|v| v.trim().parse::<u32>()) {
                Ok(Ok(64)) => Some(BULK_T64),
                Ok(Ok(112)) => Some(BULK_T112),
                Ok(Ok(128)) => Some(BULK_T128),
                _ => None,
            },
            bulk_pdl: std::env::var(PDL_ENV).map_or(true, |v| v.trim() != "0"),
            sm_count: gpu.info().sm_count,
        })
    }

    /// Launches the copy-engine kernels with programmatic dependent launch where it pays
    /// (`pdl`, the default unless [`PDL_ENV`] is `0`; plans whose grid is one full wave,
    /// `dense_kernels::bulk::bulk_pdl_preferred`) or always the ordinary way. With it, a
    /// launch may start while the kernel before it on the stream ends: its blocks stream their
    /// first weights at once and wait for that kernel (`griddepcontrol.wait`) before they read
    /// the inputs or write anything, so a chain of products where each reads what the one
    /// before wrote stays exact. The weights themselves are read before the wait: a kernel
    /// launched right before that *writes the matrix* must be followed by an ordinary launch
    /// (`with_pdl(false)`) or a synchronization. Uploads and copies are not kernels and are
    /// always waited for.
    #[must_use]
    pub fn with_pdl(mut self, pdl: bool) -> Self {
        self.bulk_pdl = pdl;
        self
    }

    /// Whether the copy-engine kernels are launched with programmatic dependent launch (they
    /// are loaded, and [`DenseGemv::with_pdl`] did not turn it off).
    pub fn uses_pdl(&self) -> bool {
        self.bulk.is_some() && self.bulk_pdl
    }

    /// Whether a launch of a copy-engine kernel with `plan` is programmatic
    /// ([`DenseGemv::uses_pdl`], and `dense_kernels::bulk::bulk_pdl_preferred` on this GPU's
    /// SMs).
    pub fn bulk_launch_is_programmatic(&self, plan: &BulkPlan) -> bool {
        self.uses_pdl() && bulk_pdl_preferred(plan, self.sm_count)
    }

    /// Launches a copy-engine kernel with `plan`, programmatically where
    /// [`DenseGemv::bulk_launch_is_programmatic`].
    ///
    /// # Safety
    /// As [`Kernel::launch`] for `k` with `params`; the kernel runs `griddepcontrol.wait`
    /// before it touches memory other than the weights (the bulk kernels do).
    unsafe fn launch_bulk<P: cmv_runtime::KernelParams>(
        &self,
        k: &Kernel,
        plan: &BulkPlan,
        cfg: LaunchConfig,
        params: &P,
    ) -> Result<()> {
        if self.bulk_launch_is_programmatic(plan) {
            // SAFETY: the caller's contract; the bulk kernels wait before every access but
            // the weights' (`dense_kernels_sm90`), and no kernel of ours writes a matrix.
            unsafe { k.launch_programmatic(&self.stream, cfg, params)? };
        } else {
            // SAFETY: the caller's contract.
            unsafe { k.launch(&self.stream, cfg, params)? };
        }
        Ok(())
    }

    /// Whether the default path runs `batch` vectors of a `rows x cols` matrix (int8 or fp16)
    /// on the copy-engine kernels: on compute capability 9.0, where
    /// `dense_kernels::bulk::bulk_preferred` says, or from the batch [`BULK_ENV`] names on.
    pub fn uses_bulk(&self, rows: u32, cols: u32, batch: u32, int8: bool) -> bool {
        self.bulk.is_some()
            && batch <= dense_kernels::MAX_BATCH
            && match self.bulk_from {
                Some(n) => batch >= n,
                None => bulk_preferred(rows, cols, batch, int8),
            }
    }

    /// The tile of the default path's bulk kernel for this shape and batch
    /// (`dense_kernels::bulk::bulk_geom_preferred` on this GPU's SMs, or [`BULK_TILE_ENV`]).
    fn bulk_geom(&self, rows: u32, cols: u32, batch: u32, int8: bool) -> BulkGeom {
        self.bulk_tile
            .unwrap_or_else(|| bulk_geom_preferred(rows, cols, batch, int8, self.sm_count))
    }

    /// The default path's plan for the bulk kernel `tk`: [`bulk_plan`], or the grid of
    /// [`BULK_GRID_ENV`] where it fits the workspace.
    fn bulk_default_plan(&self, tk: BulkKernel, rows: u32, row_bytes: u32) -> BulkPlan {
        let groups = tk.batch / 8;
        let p = bulk_plan(tk.geom, rows, row_bytes, groups, self.sm_count);
        match self.bulk_grid {
            Some(g) => {
                let q = bulk_plan_for(tk.geom, rows, row_bytes, g);
                if bulk_plan_fits(&q, groups) { q } else { p }
            }
            None => p,
        }
    }

    /// The copy-engine kernels, fp16 and int8, in the order of [`BULK_F16_KERNELS`]; `None`
    /// off compute capability 9.0.
    pub fn bulk_kernels(&self) -> Option<(&[Kernel], &[Kernel])> {
        self.bulk
            .as_ref()
            .map(|(f, i)| (f.as_slice(), i.as_slice()))
    }

    /// `y = x W^T` for `batch` fp16 vectors `x` (`batch * cols`), writing `batch * rows` fp16
    /// values to `y`; fp32 accumulation. Columns that are a multiple of 8 take the vectorized
    /// kernel, others a scalar fallback.
    ///
    /// # Errors
    /// [`DenseError::Batch`], [`DenseError::Length`] for short buffers, runtime errors.
    pub fn gemv_f16(
        &self,
        w: &DeviceMatrix<f16>,
        x: &CudaSlice<f16>,
        y: &mut CudaSlice<f16>,
        batch: usize,
    ) -> Result<()> {
        let b = check_batch(batch)?;
        check_len("input", x.len(), batch * w.cols())?;
        check_len("output", y.len(), batch * w.rows())?;
        let (rows, cols) = (w.rows, w.cols);
        match self.f16_path(rows, cols, b) {
            DensePath::Bulk(i) => {
                let kf = &self.bulk_loaded(BULK_F16_KERNELS[i])?.0;
                let plan = self.bulk_default_plan(BULK_F16_KERNELS[i], rows, 2 * cols);
                self.launch_bulk_f16(&kf[i], BULK_F16_KERNELS[i], plan, w, x, y, b)?;
            }
            DensePath::Tc(i, plan) => {
                self.launch_tc_f16(&self.tc_f16[i], TC_F16_KERNELS[i], plan, w, x, y, b)?;
            }
            DensePath::Cuda(k) => {
                let kb = f16_kernel_batch(b).unwrap_or(16);
                let split = f16_split(rows, cols, b);
                self.launch_f16(&self.f16[k], split, kb, w, x, y, b)?;
            }
            DensePath::Any => {
                let params = GemvF16AnyParams {
                    w: dev_ptr(&w.data).cast(),
                    x: dev_ptr(x).cast(),
                    y: dev_ptr_mut(y).cast(),
                    rows,
                    cols,
                    batch: b,
                    pad: 0,
                };
                // SAFETY: w holds rows * cols values and x, y hold batch * cols and batch *
                // rows (checked above); one warp per row, as the kernel assumes.
                unsafe {
                    self.f16_any
                        .launch(&self.stream, scalar_grid(rows), &params)?;
                }
            }
        }
        Ok(())
    }

    /// `y32 = x W^T` over int8 with int32 accumulation, and `y8 = requantize(y32, scale)`, for
    /// `batch` vectors. Columns that are a multiple of 16 take the `dp4a` kernel, others a
    /// scalar fallback.
    ///
    /// # Errors
    /// [`DenseError::Scale`] for a non-finite scale, batch and length errors, runtime errors.
    pub fn gemv_i8(
        &self,
        w: &DeviceMatrix<i8>,
        x: &CudaSlice<i8>,
        y32: &mut CudaSlice<i32>,
        y8: &mut CudaSlice<i8>,
        scale: f32,
        batch: usize,
    ) -> Result<()> {
        let b = check_batch(batch)?;
        if !scale.is_finite() {
            return Err(DenseError::Scale { scale });
        }
        check_len("input", x.len(), batch * w.cols())?;
        check_len("int32 output", y32.len(), batch * w.rows())?;
        check_len("int8 output", y8.len(), batch * w.rows())?;
        let (rows, cols) = (w.rows, w.cols);
        match self.i8_path(rows, cols, b) {
            DensePath::Bulk(i) => {
                let ki = &self.bulk_loaded(BULK_I8_KERNELS[i])?.1;
                let plan = self.bulk_default_plan(BULK_I8_KERNELS[i], rows, cols);
                self.launch_bulk_i8(&ki[i], BULK_I8_KERNELS[i], plan, w, x, (y32, y8), scale, b)?;
            }
            DensePath::Tc(i, plan) => {
                self.launch_tc_i8(
                    &self.tc_i8[i],
                    TC_I8_KERNELS[i],
                    plan,
                    w,
                    x,
                    (y32, y8),
                    scale,
                    b,
                )?;
            }
            DensePath::Cuda(k) => {
                let kb = kernel_batch(b).unwrap_or(16);
                let split = i8_split(rows, cols, b);
                self.launch_i8(&self.i8[k], split, kb, w, x, (y32, y8), scale, b)?;
            }
            DensePath::Any => {
                let params = GemvI8AnyParams {
                    w: dev_ptr(&w.data).cast(),
                    x: dev_ptr(x).cast(),
                    y32: dev_ptr_mut(y32),
                    y8: dev_ptr_mut(y8),
                    scale,
                    rows,
                    cols,
                    batch: b,
                };
                // SAFETY: w holds rows * cols values, x batch * cols and y32, y8 batch * rows
                // (checked above); one warp per row, as the kernel assumes.
                unsafe {
                    self.i8_any
                        .launch(&self.stream, scalar_grid(rows), &params)?;
                }
            }
        }
        Ok(())
    }

    /// The copy-engine kernels (present wherever a path is `DensePath::Bulk`).
    fn bulk_loaded(&self, tk: BulkKernel) -> Result<&(Vec<Kernel>, Vec<Kernel>)> {
        self.bulk.as_ref().ok_or_else(|| {
            DenseError::Runtime(RuntimeError::InvalidLaunch {
                kernel: tk.name,
                reason: "the copy-engine kernels are not loaded (compute capability 9.0 only)"
                    .into(),
            })
        })
    }

    /// The path [`DenseGemv::gemv_f16`] takes for `batch` (`1..=16`) vectors of a `rows x
    /// cols` matrix.
    pub fn f16_path(&self, rows: u32, cols: u32, batch: u32) -> DensePath {
        if !cols.is_multiple_of(F16_COL_MULTIPLE) {
            DensePath::Any
        } else if self.uses_bulk(rows, cols, batch, false) {
            DensePath::Bulk(bulk_kernel(batch, self.bulk_geom(rows, cols, batch, false)))
        } else if f16_on_tensor_cores(batch, rows, cols, self.sm_count) {
            let (i, plan) = tc_choice(batch, rows, cols, cols / 8, self.sm_count);
            DensePath::Tc(i, plan)
        } else {
            let kb = f16_kernel_batch(batch).unwrap_or(16);
            DensePath::Cuda(
                F16_KERNEL_BATCHES
                    .iter()
                    .position(|&v| v == kb)
                    .unwrap_or(F16_KERNEL_BATCHES.len() - 1),
            )
        }
    }

    /// The path [`DenseGemv::gemv_i8`] takes for `batch` (`1..=16`) vectors of a `rows x cols`
    /// matrix.
    pub fn i8_path(&self, rows: u32, cols: u32, batch: u32) -> DensePath {
        if !cols.is_multiple_of(I8_COL_MULTIPLE) {
            DensePath::Any
        } else if self.uses_bulk(rows, cols, batch, true) {
            DensePath::Bulk(bulk_kernel(batch, self.bulk_geom(rows, cols, batch, true)))
        } else if i8_on_tensor_cores(batch, rows, cols, self.sm_count) {
            let (i, plan) = tc_choice(batch, rows, cols, cols / 16, self.sm_count);
            DensePath::Tc(i, plan)
        } else {
            DensePath::Cuda(batch_index(batch))
        }
    }

    /// The PTX name of the kernel [`DenseGemv::gemv_f16`] runs for this shape and batch (what
    /// the bench reports next to its time).
    pub fn f16_kernel(&self, rows: u32, cols: u32, batch: u32) -> &'static str {
        match self.f16_path(rows, cols, batch) {
            DensePath::Bulk(i) => BULK_F16_KERNELS[i].name,
            DensePath::Tc(i, _) => TC_F16_KERNELS[i].name,
            DensePath::Cuda(k) => self.f16[k].name(),
            DensePath::Any => self.f16_any.name(),
        }
    }

    /// The PTX name of the kernel [`DenseGemv::gemv_i8`] runs for this shape and batch.
    pub fn i8_kernel(&self, rows: u32, cols: u32, batch: u32) -> &'static str {
        match self.i8_path(rows, cols, batch) {
            DensePath::Bulk(i) => BULK_I8_KERNELS[i].name,
            DensePath::Tc(i, _) => TC_I8_KERNELS[i].name,
            DensePath::Cuda(k) => self.i8[k].name(),
            DensePath::Any => self.i8_any.name(),
        }
    }

    /// Words [`DenseGemv::stream_read`] writes to its output.
    pub fn stream_read_out_len(&self) -> usize {
        (self.stream_grid() * (STREAM_THREADS / 32)) as usize
    }

    fn stream_grid(&self) -> u32 {
        // Four 512-thread blocks fill an SM's 2048 threads.
        self.sm_count * 4
    }

    /// Reads every byte of `buf` (whose size must be a multiple of 16 bytes) once and writes, per
    /// warp, the xor of the 32-bit words it read to `out` (see
    /// [`DenseGemv::stream_read_out_len`]); the xor of `out` equals the xor of `buf`'s words.
    ///
    /// # Errors
    /// [`DenseError::Length`] when `buf` is not whole 16-byte chunks or `out` is short.
    pub fn stream_read<T: DeviceRepr>(
        &self,
        buf: &CudaSlice<T>,
        out: &mut CudaSlice<u32>,
    ) -> Result<()> {
        self.launch_stream_variant(&self.stream_read, buf, out)
    }
}

/// Lower-level launches: an explicit kernel and work split, as the tuning run
/// (`cmv-bench --explore`) uses them. Kernel names are in `dense_kernels`.
impl DenseGemv {
    /// Launches the streaming-read variant `k` (see `stream_read`).
    ///
    /// # Errors
    /// As [`DenseGemv::stream_read`].
    pub fn launch_stream_variant<T: DeviceRepr>(
        &self,
        k: &Kernel,
        buf: &CudaSlice<T>,
        out: &mut CudaSlice<u32>,
    ) -> Result<()> {
        check_len("stream output", out.len(), self.stream_read_out_len())?;
        let bytes = buf.len() * std::mem::size_of::<T>();
        if !bytes.is_multiple_of(16) {
            return Err(DenseError::Length {
                what: "stream buffer (bytes)",
                got: bytes,
                expected: bytes.next_multiple_of(16),
            });
        }
        let n = (bytes / 16) as u64;
        let cfg = LaunchConfig {
            grid_dim: (self.stream_grid(), 1, 1),
            block_dim: (STREAM_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let params = StreamReadParams {
            p: dev_ptr(buf).cast(),
            n,
            out: dev_ptr_mut(out),
        };
        // SAFETY: buf holds n 16-byte chunks, 16-byte aligned (cudarc allocations are 256-byte
        // aligned); out holds one word per warp of the grid (checked above).
        unsafe { k.launch(&self.stream, cfg, &params)? };
        Ok(())
    }

    /// Launches fast fp16 kernel `k` (compiled for `kernel_batch` vectors and
    /// `split.rows_per_warp` rows per warp) for `batch` vectors with the work split `split`.
    ///
    /// # Errors
    /// As [`DenseGemv::gemv_f16`], and an invalid split; the matrix needs `cols % 8 == 0`.
    #[allow(clippy::too_many_arguments)]
    pub fn launch_f16(
        &self,
        k: &Kernel,
        split: Split,
        kernel_batch: u32,
        w: &DeviceMatrix<f16>,
        x: &CudaSlice<f16>,
        y: &mut CudaSlice<f16>,
        batch: u32,
    ) -> Result<()> {
        check_io_f16(w, x, y, batch)?;
        if !w.cols.is_multiple_of(F16_COL_MULTIPLE) || batch == 0 || batch > kernel_batch {
            return Err(DenseError::Shape {
                rows: w.rows(),
                cols: w.cols(),
            });
        }
        let cfg = split.config(w.rows, kernel_batch)?;
        let params = GemvF16Params {
            w: dev_ptr(&w.data).cast(),
            x: dev_ptr(x).cast(),
            y: dev_ptr_mut(y).cast(),
            rows: w.rows,
            cols: w.cols,
            batch,
            slices: split.slices,
        };
        // SAFETY: w holds rows * cols values and x, y hold batch * cols and batch * rows (checked
        // above); cols % 8 == 0 and cudarc allocations are 256-byte aligned, so every row and
        // vector starts on a 16-byte boundary, as the kernel's loads need; the split was
        // validated and its grid covers every row with the kernel's rows per warp; the shared
        // memory holds one accumulator per warp, row and kernel batch slot. `k` is one of the
        // fast fp16 kernels, which take `GemvF16Params` (the caller's contract).
        unsafe { k.launch(&self.stream, cfg, &params)? };
        Ok(())
    }

    /// Launches fast int8 kernel `k`; see [`DenseGemv::launch_f16`].
    ///
    /// # Errors
    /// As [`DenseGemv::gemv_i8`], and an invalid split; the matrix needs `cols % 16 == 0`.
    #[allow(clippy::too_many_arguments)]
    pub fn launch_i8(
        &self,
        k: &Kernel,
        split: Split,
        kernel_batch: u32,
        w: &DeviceMatrix<i8>,
        x: &CudaSlice<i8>,
        (y32, y8): (&mut CudaSlice<i32>, &mut CudaSlice<i8>),
        scale: f32,
        batch: u32,
    ) -> Result<()> {
        check_io_i8(w, x, (y32, y8), batch)?;
        if !w.cols.is_multiple_of(I8_COL_MULTIPLE) || batch == 0 || batch > kernel_batch {
            return Err(DenseError::Shape {
                rows: w.rows(),
                cols: w.cols(),
            });
        }
        if !scale.is_finite() {
            return Err(DenseError::Scale { scale });
        }
        let cfg = split.config(w.rows, kernel_batch)?;
        let params = GemvI8Params {
            w: dev_ptr(&w.data).cast(),
            x: dev_ptr(x).cast(),
            y32: dev_ptr_mut(y32),
            y8: dev_ptr_mut(y8),
            scale,
            rows: w.rows,
            cols: w.cols,
            batch,
            slices: split.slices,
            pad: 0,
        };
        // SAFETY: as in `launch_f16`, with cols % 16 == 0 for the 16-byte int8 chunks; `k` is
        // one of the fast int8 kernels, which take `GemvI8Params`.
        unsafe { k.launch(&self.stream, cfg, &params)? };
        Ok(())
    }
}

/// Tensor-core launches (batch 2 to 16): an explicit kernel of `dense_kernels::tc` and plan.
impl DenseGemv {
    /// SMs of the GPU (what the default plans are sized for).
    pub fn sm_count(&self) -> u32 {
        self.sm_count
    }

    /// Launches the fp16 tensor-core kernel `k` (loaded from [`PTX`] by the name `tk.name`,
    /// whose shape `tk` describes) with the work plan `plan` (see [`crate::tc_choice`] and [`crate::tc_plan`]).
    ///
    /// # Errors
    /// As [`DenseGemv::gemv_f16`], and a plan that does not fit the shape or the workspace; the
    /// matrix needs `cols % 8 == 0` and `batch <= tk.batch`.
    #[allow(clippy::too_many_arguments)]
    pub fn launch_tc_f16(
        &self,
        k: &Kernel,
        tk: TcKernel,
        plan: TcPlan,
        w: &DeviceMatrix<f16>,
        x: &CudaSlice<f16>,
        y: &mut CudaSlice<f16>,
        batch: u32,
    ) -> Result<()> {
        check_io_f16(w, x, y, batch)?;
        check_tc_shape(tk, w.rows(), w.cols(), F16_COL_MULTIPLE, batch)?;
        check_tc_plan(tk, plan, w.rows, w.cols / 8)?;
        let mut ws = self.tc_ws.lock().unwrap_or_else(PoisonError::into_inner);
        let ws = &mut *ws;
        let params = f16_params(w, x, y, ws, batch, plan.kblocks_per_split);
        let cfg = tc_config(tk, plan, batch);
        // SAFETY: w holds rows * cols values and x, y hold batch * cols and batch * rows (checked
        // above); cols % 8 == 0 and cudarc allocations are 256-byte aligned, so every row and
        // vector starts on a 16-byte boundary; the plan covers every row and k-block exactly
        // once (split or stream-K as `tk` says), a split plan's partial slots fit the
        // workspace and its row blocks the counters, which are zero (allocated zeroed, every
        // launch leaves them so) and used by one launch at a time on this stream (the lock);
        // a shared-input or ring kernel gets `tc_smem_bytes` of shared memory. `k` is a tensor-core
        // fp16 kernel of shape `tk`, which takes `GemvTcF16Params` (the caller's contract).
        unsafe { k.launch(&self.stream, cfg, &params)? };
        Ok(())
    }

    /// Launches the int8 tensor-core kernel `k`; see [`DenseGemv::launch_tc_f16`].
    ///
    /// # Errors
    /// As [`DenseGemv::gemv_i8`], and a plan that does not fit; the matrix needs
    /// `cols % 16 == 0`.
    #[allow(clippy::too_many_arguments)]
    pub fn launch_tc_i8(
        &self,
        k: &Kernel,
        tk: TcKernel,
        plan: TcPlan,
        w: &DeviceMatrix<i8>,
        x: &CudaSlice<i8>,
        (y32, y8): (&mut CudaSlice<i32>, &mut CudaSlice<i8>),
        scale: f32,
        batch: u32,
    ) -> Result<()> {
        check_io_i8(w, x, (y32, y8), batch)?;
        check_tc_shape(tk, w.rows(), w.cols(), I8_COL_MULTIPLE, batch)?;
        if !scale.is_finite() {
            return Err(DenseError::Scale { scale });
        }
        check_tc_plan(tk, plan, w.rows, w.cols / 16)?;
        let mut ws = self.tc_ws.lock().unwrap_or_else(PoisonError::into_inner);
        let ws = &mut *ws;
        let params = i8_params(w, x, (y32, y8), scale, ws, batch, plan.kblocks_per_split);
        let cfg = tc_config(tk, plan, batch);
        // SAFETY: as in `launch_tc_f16`, with cols % 16 == 0 for the 16-byte int8 chunks; `k`
        // is a tensor-core int8 kernel of shape `tk`, which takes `GemvTcI8Params`.
        unsafe { k.launch(&self.stream, cfg, &params)? };
        Ok(())
    }

    /// Checks a copy-engine launch of kernel `tk` with `plan` for `batch` vectors on a matrix
    /// of `rows` rows of `row_bytes` bytes and returns its configuration.
    fn bulk_config(
        &self,
        tk: BulkKernel,
        plan: BulkPlan,
        rows: u32,
        row_bytes: u32,
        batch: u32,
    ) -> Result<LaunchConfig> {
        if plan != bulk_plan_for(tk.geom, rows, row_bytes, plan.grid)
            || !bulk_plan_fits(&plan, tk.batch / 8)
            || batch == 0
            || batch > tk.batch
        {
            return Err(DenseError::Runtime(RuntimeError::InvalidLaunch {
                kernel: tk.name,
                reason: format!(
                    "plan {plan:?} is not one for {rows} rows of {row_bytes} bytes within the \
                     split-K workspace, or {batch} vectors are not 1..={}; use \
                     dense_gemv::bulk_plan with the kernel's geometry",
                    tk.batch
                ),
            }));
        }
        Ok(LaunchConfig {
            grid_dim: (plan.grid, 1, 1),
            block_dim: (tk.geom.threads(), 1, 1),
            shared_mem_bytes: tk.geom.smem_bytes(),
        })
    }

    /// Launches the fp16 copy-engine kernel `k` (loaded from [`PTX_SM90`] by the name
    /// `tk.name`) with `plan` ([`bulk_plan`]; other grids for comparisons).
    ///
    /// # Errors
    /// As [`DenseGemv::gemv_f16`], and a plan that does not fit the shape or the workspace;
    /// the matrix needs `cols % 8 == 0` and `batch <= tk.batch`.
    #[allow(clippy::too_many_arguments)]
    pub fn launch_bulk_f16(
        &self,
        k: &Kernel,
        tk: BulkKernel,
        plan: BulkPlan,
        w: &DeviceMatrix<f16>,
        x: &CudaSlice<f16>,
        y: &mut CudaSlice<f16>,
        batch: u32,
    ) -> Result<()> {
        check_io_f16(w, x, y, batch)?;
        if !w.cols().is_multiple_of(F16_COL_MULTIPLE as usize) {
            return Err(DenseError::Shape {
                rows: w.rows(),
                cols: w.cols(),
            });
        }
        let cfg = self.bulk_config(tk, plan, w.rows, 2 * w.cols, batch)?;
        let (wmap, xmap) = bulk_maps(&w.data, x, TmaElem::F16, w.rows, w.cols, batch, tk)?;
        let mut ws = self.tc_ws.lock().unwrap_or_else(PoisonError::into_inner);
        let ws = &mut *ws;
        let params = GemvBulkF16Params {
            wmap,
            xmap,
            p: f16_params(w, x, y, ws, batch, 0),
        };
        // SAFETY: the maps describe w (rows x cols) and x (batch x cols), which hold those
        // values (checked above), with the boxes the kernel copies (its tile's rows or tk.batch
        // vectors by 128 bytes, 128-byte swizzle: bulk_maps); y holds batch * rows values;
        // 1 <= batch <= tk.batch; the grid is the plan's for this shape, within the split-K
        // workspace and counters (bulk_config), with the geometry's threads and shared memory
        // of shared memory. `k` is a bulk fp16 kernel of shape `tk`, which takes
        // `GemvBulkF16Params`.
        unsafe { self.launch_bulk(k, &plan, cfg, &params)? };
        Ok(())
    }

    /// Launches the int8 copy-engine kernel `k`; see [`DenseGemv::launch_bulk_f16`].
    ///
    /// # Errors
    /// As [`DenseGemv::gemv_i8`], and a plan that does not fit; the matrix needs
    /// `cols % 16 == 0`.
    #[allow(clippy::too_many_arguments)]
    pub fn launch_bulk_i8(
        &self,
        k: &Kernel,
        tk: BulkKernel,
        plan: BulkPlan,
        w: &DeviceMatrix<i8>,
        x: &CudaSlice<i8>,
        (y32, y8): (&mut CudaSlice<i32>, &mut CudaSlice<i8>),
        scale: f32,
        batch: u32,
    ) -> Result<()> {
        check_io_i8(w, x, (y32, y8), batch)?;
        if !w.cols().is_multiple_of(I8_COL_MULTIPLE as usize) {
            return Err(DenseError::Shape {
                rows: w.rows(),
                cols: w.cols(),
            });
        }
        if !scale.is_finite() {
            return Err(DenseError::Scale { scale });
        }
        let cfg = self.bulk_config(tk, plan, w.rows, w.cols, batch)?;
        let (wmap, xmap) = bulk_maps(&w.data, x, TmaElem::U8, w.rows, w.cols, batch, tk)?;
        let mut ws = self.tc_ws.lock().unwrap_or_else(PoisonError::into_inner);
        let ws = &mut *ws;
        let params = GemvBulkI8Params {
            wmap,
            xmap,
            p: i8_params(w, x, (y32, y8), scale, ws, batch, 0),
        };
        // SAFETY: as in `launch_bulk_f16`, with int8 values; `k` is a bulk int8 kernel of
        // shape `tk`, which takes `GemvBulkI8Params`.
        unsafe { self.launch_bulk(k, &plan, cfg, &params)? };
        Ok(())
    }
}

/// The tensor maps of a copy-engine launch: `w` (`rows x cols`) in boxes of the kernel's tile
/// rows and `x` (`batch x cols`) in boxes of `tk.batch` vectors, both 128 bytes wide with the
/// 128-byte swizzle (`dense_kernels::bulk`).
fn bulk_maps<T, U>(
    w: &CudaSlice<T>,
    x: &CudaSlice<U>,
    elem: TmaElem,
    rows: u32,
    cols: u32,
    batch: u32,
    tk: BulkKernel,
) -> Result<(TensorMap, TensorMap)> {
    let box_cols = BULK_ROW_BYTES / elem.bytes() as u32;
    Ok((
        tensor_map_2d(
            w,
            elem,
            rows.into(),
            cols.into(),
            tk.geom.tile_rows(),
            box_cols,
        )?,
        tensor_map_2d(x, elem, batch.into(), cols.into(), tk.batch, box_cols)?,
    ))
}

/// cuBLAS fp16 GEMV (`cublasGemmEx`, fp16 in and out, fp32 compute), for reference.
#[derive(Debug)]
pub struct CublasGemv {
    blas: Arc<CudaBlas>,
}

impl CublasGemv {
    /// A cuBLAS handle on `gpu`'s stream.
    ///
    /// # Errors
    /// [`RuntimeError::NoCublas`] when libcublas cannot be loaded.
    pub fn new(gpu: &Gpu) -> Result<Self> {
        Ok(Self {
            blas: gpu.cublas()?,
        })
    }

    /// The same product as [`DenseGemv::gemv_f16`], through cuBLAS.
    ///
    /// # Errors
    /// Batch and length errors, cuBLAS errors.
    pub fn gemv_f16(
        &self,
        w: &DeviceMatrix<f16>,
        x: &CudaSlice<f16>,
        y: &mut CudaSlice<f16>,
        batch: usize,
    ) -> Result<()> {
        check_batch(batch)?;
        check_len("input", x.len(), batch * w.cols())?;
        check_len("output", y.len(), batch * w.rows())?;
        let to_i32 = |v: usize| {
            i32::try_from(v).map_err(|_| DenseError::Shape {
                rows: w.rows(),
                cols: w.cols(),
            })
        };
        let (m, k, n) = (to_i32(w.rows())?, to_i32(w.cols())?, to_i32(batch)?);
        // Column-major view: W^T is cols x rows (lda = cols), X is cols x batch, Y rows x batch.
        let cfg = GemmConfig {
            transa: cublasOperation_t::CUBLAS_OP_T,
            transb: cublasOperation_t::CUBLAS_OP_N,
            m,
            n,
            k,
            alpha: f16::ONE,
            lda: k,
            ldb: k,
            beta: f16::ZERO,
            ldc: m,
        };
        // SAFETY: A (W, k x m), B (x, k x n) and C (y, m x n) hold the elements the config
        // addresses, as checked above.
        unsafe { self.blas.gemm(cfg, &w.data, x, y) }.map_err(|source| RuntimeError::Cublas {
            op: "cublasGemmEx",
            source,
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_config_covers_every_row_and_sizes_the_reduction() {
        let s = Split {
            rows_per_warp: 4,
            slices: 2,
            block_threads: 256,
        };
        // 8 warps per block, 4 groups of 2 slices, 4 rows each: 16 rows per block.
        let cfg = s.config(100, 1).unwrap();
        assert_eq!(cfg.grid_dim.0, 7);
        assert_eq!(cfg.block_dim.0, 256);
        assert_eq!(cfg.shared_mem_bytes, 8 * 4 * 4);
        let one = Split {
            rows_per_warp: 1,
            slices: 1,
            block_threads: 128,
        };
        let cfg = one.config(5, 16).unwrap();
        assert_eq!((cfg.grid_dim.0, cfg.shared_mem_bytes), (2, 0));
    }

    #[test]
    fn invalid_splits_are_refused() {
        for s in [
            Split {
                rows_per_warp: 4,
                slices: 3,
                block_threads: 256,
            },
            Split {
                rows_per_warp: 4,
                slices: 8,
                block_threads: 128,
            },
            Split {
                rows_per_warp: 4,
                slices: 1,
                block_threads: 100,
            },
            Split {
                rows_per_warp: 4,
                slices: 1,
                block_threads: 2048,
            },
            Split {
                rows_per_warp: 0,
                slices: 1,
                block_threads: 256,
            },
        ] {
            assert!(s.config(64, 1).is_err(), "{s:?}");
        }
    }

    #[test]
    fn every_tensor_core_kernel_is_an_entry_of_the_committed_ptx() {
        let ptx = include_str!("../ptx/dense_kernels.ptx");
        for k in TC_F16_KERNELS.iter().chain(&TC_I8_KERNELS) {
            let entry = format!(".entry {}(", k.name);
            assert!(
                ptx.contains(&entry),
                "{} is not in the PTX: run `cargo xtask ptx`",
                k.name
            );
        }
        let sm90 = include_str!("../ptx/dense_kernels_sm90.ptx");
        assert!(sm90.contains(".target sm_90a"));
        for k in BULK_F16_KERNELS.iter().chain(&BULK_I8_KERNELS) {
            let entry = format!(".entry {}(", k.name);
            assert!(
                sm90.contains(&entry) && !ptx.contains(&entry),
                "{} is not in the sm_90a PTX only: run `cargo xtask ptx`",
                k.name
            );
        }
        // The sm_90a module holds the bulk kernels only (the sm_80 entries are off there).
        assert_eq!(
            sm90.matches(".entry ").count(),
            BULK_F16_KERNELS.len() + BULK_I8_KERNELS.len()
        );
        // Each declares its geometry's threads as its launch bound.
        for k in BULK_F16_KERNELS.iter().chain(&BULK_I8_KERNELS) {
            let at = sm90.find(&format!(".entry {}(", k.name)).unwrap();
            let body = &sm90[at..];
            let head = &body[..body.find('{').unwrap()];
            assert!(
                head.contains(&format!(".maxntid {}, 1, 1", k.geom.threads())),
                "{}: no .maxntid {} in {head}",
                k.name,
                k.geom.threads()
            );
            // They are launched programmatically (`DenseGemv::with_pdl`): the producer and the
            // consumers wait for the kernel before (`griddepcontrol.wait`) before they read the
            // inputs or write anything, and the next kernel is let go at once.
            let end = body[1..].find(".entry ").map_or(body.len(), |e| e + 1);
            let body = &body[..end];
            assert!(
                body.matches("griddepcontrol.wait;").count() >= 2
                    && body.contains("griddepcontrol.launch_dependents;"),
                "{}: no programmatic-launch control in the PTX: run `cargo xtask ptx`",
                k.name
            );
        }
    }

    #[test]
    fn default_tc_plans_are_valid_and_bad_plans_are_refused() {
        for (rows, cols) in [(1, 16), (7, 48), (4096, 4096), (11008, 4096), (28672, 8192)] {
            for b in 2..=16 {
                for sms in [1, 132] {
                    let (i, p) = tc_choice(b, rows, cols, cols / 8, sms);
                    check_tc_plan(TC_F16_KERNELS[i], p, rows, cols / 8).unwrap();
                    let (i, p) = tc_choice(b, rows, cols, cols / 16, sms);
                    check_tc_plan(TC_I8_KERNELS[i], p, rows, cols / 16).unwrap();
                }
            }
        }
        // The CUDA-core kernels keep 2-4 fp16 vectors (2 int8) on small and wide matrices.
        assert!(f16_on_tensor_cores(4, 4096, 4096, 132));
        assert!(!f16_on_tensor_cores(4, 2048, 2048, 132));
        assert!(f16_on_tensor_cores(2, 384, 384, 132) && f16_on_tensor_cores(2, 1536, 384, 132));
        assert!(!f16_on_tensor_cores(2, 384, 1536, 132));
        assert!(!f16_on_tensor_cores(4, 4096, 11008, 132));
        assert!(f16_on_tensor_cores(4, 11008, 4096, 132));
        assert!(f16_on_tensor_cores(5, 4096, 14336, 132));
        assert!(!f16_on_tensor_cores(1, 28672, 8192, 132));
        assert!(i8_on_tensor_cores(2, 8192, 8192, 132));
        assert!(!i8_on_tensor_cores(2, 8192, 28672, 132));
        assert!(i8_on_tensor_cores(3, 1024, 1024, 132));
        assert!(!i8_on_tensor_cores(2, 384, 384, 132));
        assert!(!i8_on_tensor_cores(1, 8192, 8192, 132));
        let k = TC_F16_KERNELS[1];
        let good = tc_choice(16, 2048, 4096, 512, 132).1;
        assert!(good.ksplit > 1);
        for bad in [
            TcPlan {
                row_blocks: good.row_blocks - 1,
                ..good
            },
            TcPlan {
                ksplit: good.ksplit - 1,
                ..good
            },
            TcPlan {
                ksplit: good.ksplit + 1,
                ..good
            },
            TcPlan {
                kblocks_per_split: 0,
                ..good
            },
            TcPlan { ksplit: 0, ..good },
        ] {
            let e = check_tc_plan(k, bad, 2048, 512).unwrap_err();
            assert!(
                e.to_string()
                    .contains("tc_choice, tc_plan or tc_stream_plan"),
                "{e}"
            );
        }
        // A split plan past the workspace's rows is refused.
        // A split plan past the counters, or past the workspace, is refused.
        let rows = (TC_COUNTERS as u32 + 1) * 128;
        let tall = TcPlan {
            row_blocks: TC_COUNTERS as u32 + 1,
            ksplit: 2,
            kblocks_per_split: 64,
            stream_blocks: 0,
        };
        assert!(check_tc_plan(k, tall, rows, 512).is_err());
        // 1024 row blocks of 256 threads x 8 words: 2 splits fill the workspace.
        let wide = TcPlan {
            row_blocks: 1024,
            ksplit: 4,
            kblocks_per_split: 32,
            stream_blocks: 0,
        };
        assert!(check_tc_plan(k, wide, 1024 * 128, 512).is_err());
        assert!(
            check_tc_plan(
                k,
                TcPlan {
                    ksplit: 2,
                    kblocks_per_split: 64,
                    ..wide
                },
                1024 * 128,
                512
            )
            .is_ok()
        );
    }

    #[test]
    fn default_splits_follow_the_measured_rules() {
        // fp16 batch 1: 8 slices from 8192 rows on, 4 below; tensor-core batches: 8.
        assert_eq!(f16_split(11008, 4096, 1).slices, 8);
        assert_eq!(f16_split(4096, 14336, 1).slices, 4);
        assert_eq!(f16_split(4096, 4096, 16).rows_per_warp, 16);
        assert_eq!(f16_split(4096, 4096, 16).slices, 8);
        // Narrow matrices keep at least 32 chunks per slice.
        assert_eq!(f16_split(11008, 256, 1).slices, 1);
        assert_eq!(f16_split(11008, 512, 1).slices, 2);
        // int8 batch 1: the most slices (<= 8) that keep the grid at or under 4096 warps.
        assert_eq!(i8_split(4096, 4096, 1).slices, 4);
        assert_eq!(i8_split(8192, 8192, 1).slices, 2);
        assert_eq!(i8_split(11008, 4096, 1).slices, 1);
        assert_eq!(i8_split(64, 8192, 1).slices, 8);
        // Every default split is a valid launch.
        for (r, c) in [(1, 16), (7, 48), (4096, 4096), (28672, 8192)] {
            for b in 1..=16 {
                f16_split(r, c, b).config(r, 16).unwrap();
                i8_split(r, c, b).config(r, 16).unwrap();
            }
        }
    }
}
