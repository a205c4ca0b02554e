//! GPU paths: the Rust kernels of `kernels-rs/dense-kernels`, and cuBLAS.

use std::sync::Arc;

use cmv_runtime::cudarc::cublas::sys::cublasOperation_t;
use cmv_runtime::cudarc::cublas::{CudaBlas, Gemm, GemmConfig};
use cmv_runtime::cudarc::driver::PushKernelArg;
use cmv_runtime::{CudaSlice, CudaStream, DeviceRepr, Gpu, Kernel, LaunchConfig, RuntimeError};
use dense_kernels::{
    BLOCK_THREADS, F16_COL_MULTIPLE, I8_COL_MULTIPLE, KERNEL_BATCHES, STREAM_THREADS, kernel_batch,
    rows_per_warp_f16, rows_per_warp_i8,
};
use half::f16;

use crate::{DenseError, PTX, Result, check_batch, check_len, check_shape};

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
    stream_read_tiles: Kernel,
    sm_count: u32,
}

fn rows_grid(rows: u32, rows_per_warp: u32) -> LaunchConfig {
    rows_grid_with(rows, rows_per_warp, BLOCK_THREADS)
}

fn rows_grid_with(rows: u32, rows_per_warp: u32, block_threads: u32) -> LaunchConfig {
    let warps = rows.div_ceil(rows_per_warp);
    LaunchConfig {
        grid_dim: (warps.div_ceil(block_threads / 32), 1, 1),
        block_dim: (block_threads, 1, 1),
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

fn launch_err(e: cmv_runtime::cudarc::driver::DriverError) -> DenseError {
    DenseError::Runtime(RuntimeError::Driver {
        op: "cuLaunchKernel",
        source: e,
    })
}

impl DenseGemv {
    /// Loads the kernels (JIT-compiling the PTX on first use in this process).
    ///
    /// # Errors
    /// Runtime errors: a driver that rejects the PTX, a missing entry point.
    pub fn new(gpu: &Gpu) -> Result<Self> {
        let load = |name: &'static str| gpu.kernel(&PTX, name);
        let f16 = KERNEL_BATCHES
            .iter()
            .map(|&b| load(dense_kernels::f16_kernel_name(b).unwrap_or("cmv_gemv_f16_b16")))
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
            stream_read_tiles: load("cmv_stream_read_tiles")?,
            sm_count: gpu.info().sm_count,
        })
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
        if cols % F16_COL_MULTIPLE == 0 {
            let k = &self.f16[batch_index(b)];
            let cfg = rows_grid(rows, rows_per_warp_f16(kernel_batch(b).unwrap_or(16)));
            k.check_config(&cfg)?;
            let mut l = k.builder(&self.stream);
            l.arg(&w.data).arg(x).arg(y).arg(&rows).arg(&cols).arg(&b);
            // SAFETY: w holds rows * cols values and x, y were checked to hold batch * cols and
            // batch * rows; cols % 8 == 0 and cudarc allocations are 256-byte aligned, so every
            // row and input vector starts on a 16-byte boundary, as the kernel's loads need; the
            // grid covers every row with rows_per_warp rows per warp, as the kernel assumes.
            unsafe { l.launch(cfg) }.map_err(launch_err)?;
        } else {
            let cfg = rows_grid(rows, 1);
            self.f16_any.check_config(&cfg)?;
            let mut l = self.f16_any.builder(&self.stream);
            l.arg(&w.data).arg(x).arg(y).arg(&rows).arg(&cols).arg(&b);
            // SAFETY: buffer sizes checked above; one warp per row, as the kernel assumes.
            unsafe { l.launch(cfg) }.map_err(launch_err)?;
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
        let (k, cfg) = if cols % I8_COL_MULTIPLE == 0 {
            let cfg = rows_grid(rows, rows_per_warp_i8(kernel_batch(b).unwrap_or(16)));
            (&self.i8[batch_index(b)], cfg)
        } else {
            (&self.i8_any, rows_grid(rows, 1))
        };
        k.check_config(&cfg)?;
        let mut l = k.builder(&self.stream);
        l.arg(&w.data)
            .arg(x)
            .arg(y32)
            .arg(y8)
            .arg(&scale)
            .arg(&rows)
            .arg(&cols)
            .arg(&b);
        // SAFETY: buffer sizes checked above; for the vector kernel cols % 16 == 0 and cudarc's
        // 256-byte-aligned allocations make every row and vector 16-byte aligned; the grid
        // gives each warp the rows the kernel expects.
        unsafe { l.launch(cfg) }.map_err(launch_err)?;
        Ok(())
    }

    /// Words [`DenseGemv::stream_read`] writes to its output.
    pub fn stream_read_out_len(&self) -> usize {
        (self.stream_grid() * (STREAM_THREADS / 32)) as usize
    }

    fn stream_grid(&self) -> u32 {
        // Four 512-thread blocks fill an SM's 2048 threads.
        self.sm_count * 4
    }

    /// Reads every byte of `buf` (whose length must be a multiple of 16) once and writes, per
    /// warp, the xor of the 32-bit words it read to `out` (see
    /// [`DenseGemv::stream_read_out_len`]); the xor of `out` equals the xor of `buf`'s words.
    ///
    /// # Errors
    /// [`DenseError::Length`] when `buf` is not whole 16-byte chunks or `out` is short.
    pub fn stream_read(&self, buf: &CudaSlice<u8>, out: &mut CudaSlice<u32>) -> Result<()> {
        self.stream_read_with(false, buf, out)
    }

    /// [`DenseGemv::stream_read`] with the access pattern chosen: `tiles` reads 4 KiB per warp
    /// and step contiguously, otherwise each load of the grid covers one contiguous span.
    ///
    /// # Errors
    /// As [`DenseGemv::stream_read`].
    pub fn stream_read_with(
        &self,
        tiles: bool,
        buf: &CudaSlice<u8>,
        out: &mut CudaSlice<u32>,
    ) -> Result<()> {
        if !buf.len().is_multiple_of(16) {
            return Err(DenseError::Length {
                what: "stream buffer (bytes, a multiple of 16)",
                got: buf.len(),
                expected: buf.len().next_multiple_of(16),
            });
        }
        check_len("stream output", out.len(), self.stream_read_out_len())?;
        let n = (buf.len() / 16) as u64;
        let cfg = LaunchConfig {
            grid_dim: (self.stream_grid(), 1, 1),
            block_dim: (STREAM_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let k = if tiles {
            &self.stream_read_tiles
        } else {
            &self.stream_read
        };
        k.check_config(&cfg)?;
        let mut l = k.builder(&self.stream);
        l.arg(buf).arg(&n).arg(out);
        // SAFETY: buf holds n aligned 16-byte chunks; out holds one word per warp of the grid.
        unsafe { l.launch(cfg) }.map_err(launch_err)?;
        Ok(())
    }
}

/// Batch-1 kernel variants for tuning (`cmv-bench --explore`): not a stable API.
#[doc(hidden)]
impl DenseGemv {
    /// Launches the batch-1 fp16 variant `k` (one row per warp) with `block_threads` threads.
    ///
    /// # Errors
    /// As [`DenseGemv::gemv_f16`]; the matrix must have `cols % 8 == 0`.
    pub fn launch_f16_b1_variant(
        &self,
        k: &Kernel,
        block_threads: u32,
        w: &DeviceMatrix<f16>,
        x: &CudaSlice<f16>,
        y: &mut CudaSlice<f16>,
    ) -> Result<()> {
        check_len("input", x.len(), w.cols())?;
        check_len("output", y.len(), w.rows())?;
        if !w.cols.is_multiple_of(F16_COL_MULTIPLE) || !block_threads.is_multiple_of(32) {
            return Err(DenseError::Shape {
                rows: w.rows(),
                cols: w.cols(),
            });
        }
        let cfg = rows_grid_with(w.rows, 1, block_threads);
        k.check_config(&cfg)?;
        let one = 1u32;
        let mut l = k.builder(&self.stream);
        l.arg(&w.data)
            .arg(x)
            .arg(y)
            .arg(&w.rows)
            .arg(&w.cols)
            .arg(&one);
        // SAFETY: as in `gemv_f16`: sizes checked, 16-byte aligned rows, one row per warp.
        unsafe { l.launch(cfg) }.map_err(launch_err)?;
        Ok(())
    }

    /// Launches the batch-1 int8 variant `k` (one row per warp) with `block_threads` threads.
    ///
    /// # Errors
    /// As [`DenseGemv::gemv_i8`]; the matrix must have `cols % 16 == 0`.
    #[allow(clippy::too_many_arguments)]
    pub fn launch_i8_b1_variant(
        &self,
        k: &Kernel,
        block_threads: u32,
        w: &DeviceMatrix<i8>,
        x: &CudaSlice<i8>,
        y32: &mut CudaSlice<i32>,
        y8: &mut CudaSlice<i8>,
        scale: f32,
    ) -> Result<()> {
        check_len("input", x.len(), w.cols())?;
        check_len("int32 output", y32.len(), w.rows())?;
        check_len("int8 output", y8.len(), w.rows())?;
        if !w.cols.is_multiple_of(I8_COL_MULTIPLE) || !block_threads.is_multiple_of(32) {
            return Err(DenseError::Shape {
                rows: w.rows(),
                cols: w.cols(),
            });
        }
        let cfg = rows_grid_with(w.rows, 1, block_threads);
        k.check_config(&cfg)?;
        let one = 1u32;
        let mut l = k.builder(&self.stream);
        l.arg(&w.data)
            .arg(x)
            .arg(y32)
            .arg(y8)
            .arg(&scale)
            .arg(&w.rows)
            .arg(&w.cols)
            .arg(&one);
        // SAFETY: as in `gemv_i8`: sizes checked, 16-byte aligned rows, one row per warp.
        unsafe { l.launch(cfg) }.map_err(launch_err)?;
        Ok(())
    }
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
