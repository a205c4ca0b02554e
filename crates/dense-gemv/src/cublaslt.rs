//! cuBLASLt fp16 GEMV: the product of [`CublasGemv`](crate::CublasGemv) through
//! `cublasLtMatmul` with the algorithm cuBLASLt's heuristic ranks first, a second vendor
//! baseline independent of cuBLAS's own choice of kernel.
//!
//! The product is `Y[b * rows + row] = sum_col W[row * cols + col] X[b * cols + col]`, fp16 in
//! and out, fp32 accumulation and scale, mapped to one column-major GEMM exactly as
//! [`CublasGemv`](crate::CublasGemv) maps it ([`lt_gemm`]). The heuristic runs once per
//! (rows, cols, batch), on the first call at that shape or in [`CublasLtGemv::plan`]; later
//! calls reuse the chosen algorithm and the descriptors, and allocate nothing (the workspace is
//! allocated once, in [`CublasLtGemv::new`]), so a call after the first at its shape can be
//! captured into a CUDA graph. [`CublasLtGemv::algorithm`] says which algorithm was chosen.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::sync::{Arc, Mutex, PoisonError};

use cmv_runtime::cudarc::cublas::sys::cublasOperation_t;
use cmv_runtime::cudarc::cublaslt::result::{self as lt, CublasError};
use cmv_runtime::cudarc::cublaslt::sys;
use cmv_runtime::{CudaSlice, CudaStream, Gpu, RuntimeError, dev_ptr, dev_ptr_mut};
use half::f16;

use crate::{DenseError, DeviceMatrix, check_batch, check_len, check_shape};

/// Workspace on Hopper and newer (compute capability 9 and up), as NVIDIA recommends.
pub const WORKSPACE_BYTES_SM90: usize = 32 << 20;
/// Workspace on older GPUs.
pub const WORKSPACE_BYTES_OLDER: usize = 4 << 20;
/// Algorithms asked of the heuristic; the first that it reports usable is taken.
pub const HEURISTIC_REQUEST: usize = 4;
/// Alignment of every buffer the heuristic assumes (its default minimum alignment preference,
/// which cudarc's allocations meet).
pub const ALIGNMENT: u64 = 256;

/// Errors of the cuBLASLt baseline.
#[derive(Debug, thiserror::Error)]
pub enum CublasLtError {
    /// `libcublasLt` could not be loaded.
    #[error(
        "cuBLASLt could not be loaded (libcublasLt.so.13 not found); add the CUDA toolkit's \
         lib64 folder to LD_LIBRARY_PATH"
    )]
    NotLoaded,
    /// A cuBLASLt call failed.
    #[error("cuBLASLt call {op} failed: {source}")]
    Call {
        /// The call.
        op: &'static str,
        /// cuBLASLt's status.
        #[source]
        source: CublasError,
    },
    /// The heuristic returned no usable algorithm for this product.
    #[error(
        "cuBLASLt's heuristic offered no usable algorithm for {rows}x{cols} at batch {batch} \
         (fp16 in and out, fp32 compute, {workspace_bytes}-byte workspace; {returned} returned): \
         this cuBLASLt or GPU cannot run the product, leave this baseline out"
    )]
    NoAlgorithm {
        /// Matrix rows.
        rows: usize,
        /// Matrix columns.
        cols: usize,
        /// Batch.
        batch: usize,
        /// The workspace offered.
        workspace_bytes: usize,
        /// Algorithms the heuristic returned (none of them usable).
        returned: usize,
    },
    /// A buffer that does not start on the alignment the chosen algorithms assume.
    #[error(
        "{what} starts at device address {addr:#x}, not a multiple of {align} bytes as the \
         cuBLASLt algorithms assume: pass a whole allocation (cudarc's are {align}-byte aligned)"
    )]
    Misaligned {
        /// Which buffer.
        what: &'static str,
        /// Its device address.
        addr: u64,
        /// The alignment needed.
        align: u64,
    },
    /// A shape, batch, length or runtime error.
    #[error(transparent)]
    Dense(#[from] DenseError),
}

impl From<RuntimeError> for CublasLtError {
    fn from(e: RuntimeError) -> Self {
        CublasLtError::Dense(DenseError::Runtime(e))
    }
}

fn call(op: &'static str) -> impl FnOnce(CublasError) -> CublasLtError {
    move |source| CublasLtError::Call { op, source }
}

/// One operand of the column-major GEMM as stored: rows, columns, leading dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LtLayout {
    /// Rows of the stored (untransposed) matrix.
    pub rows: u64,
    /// Columns of the stored matrix.
    pub cols: u64,
    /// Leading dimension (elements between consecutive columns).
    pub ld: i64,
}

/// The column-major GEMM `D = op(A) op(B)` (`m x n`, inner dimension `k`) that computes the
/// GEMV, with the layouts of A (the weights), B (the inputs) and C = D (the outputs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LtGemm {
    /// Rows of `D`: the matrix's rows.
    pub m: u64,
    /// Columns of `D`: the batch.
    pub n: u64,
    /// Inner dimension: the matrix's columns.
    pub k: u64,
    /// Whether `op(A)` is `A` transposed.
    pub transa: bool,
    /// Whether `op(B)` is `B` transposed.
    pub transb: bool,
    /// A: the row-major `rows x cols` weights seen column-major, `cols x rows`.
    pub a: LtLayout,
    /// B: the `batch` input vectors, `cols x batch`.
    pub b: LtLayout,
    /// C and D: the `batch` output vectors, `rows x batch`.
    pub c: LtLayout,
}

/// The GEMM of `Y = X W^T` for a row-major `rows x cols` matrix and `batch` vectors, as
/// [`CublasGemv`](crate::CublasGemv) runs it: the row-major weights are a column-major
/// `cols x rows` matrix A (`lda = cols`) used transposed, the inputs a column-major
/// `cols x batch` matrix B (`ldb = cols`), the outputs a column-major `rows x batch` matrix
/// (`ldc = rows`), so `Y[b * rows + row]` is `D(row, b)`.
///
/// # Errors
/// [`DenseError::Shape`] and [`DenseError::Batch`].
pub fn lt_gemm(rows: usize, cols: usize, batch: usize) -> Result<LtGemm, DenseError> {
    let (r, c) = check_shape(rows, cols)?;
    let b = check_batch(batch)?;
    let (m, n, k) = (u64::from(r), u64::from(b), u64::from(c));
    Ok(LtGemm {
        m,
        n,
        k,
        transa: true,
        transb: false,
        a: LtLayout {
            rows: k,
            cols: m,
            ld: i64::from(c),
        },
        b: LtLayout {
            rows: k,
            cols: n,
            ld: i64::from(c),
        },
        c: LtLayout {
            rows: m,
            cols: n,
            ld: i64::from(r),
        },
    })
}

/// The names of `cublasLtMatmulTile_t` (`CUBLASLT_MATMUL_TILE_<name>`) by value, from CUDA
/// 13.3's `cublasLt.h` (earlier releases' values are a prefix); `-` where no tile has the value.
const TILE_NAMES: &str = concat!(
    "UNDEFINED 8x8 8x16 16x8 8x32 16x16 32x8 8x64 16x32 32x16 64x8 32x32 32x64 64x32 32x128 ",
    "64x64 128x32 64x128 128x64 64x256 128x128 256x64 64x512 128x256 256x128 512x64 64x96 ",
    "96x64 96x128 128x160 160x128 192x128 128x192 128x96 32x256 256x32 8x128 8x192 8x256 ",
    "8x320 8x384 8x448 8x512 8x576 8x640 8x704 8x768 16x64 16x128 16x192 16x256 16x320 ",
    "16x384 16x448 16x512 16x576 16x640 16x704 16x768 24x64 24x128 24x192 24x256 24x320 ",
    "24x384 24x448 24x512 24x576 24x640 24x704 24x768 32x192 32x320 32x384 32x448 32x512 ",
    "32x576 32x640 32x704 32x768 40x64 40x128 40x192 40x256 40x320 40x384 40x448 40x512 ",
    "40x576 40x640 40x704 40x768 48x64 48x128 48x192 48x256 48x320 48x384 48x448 48x512 ",
    "48x576 48x640 48x704 48x768 56x64 56x128 56x192 56x256 56x320 56x384 56x448 56x512 ",
    "56x576 56x640 56x704 56x768 64x192 64x320 64x384 64x448 64x576 64x640 64x704 64x768 ",
    "72x64 72x128 72x192 72x256 72x320 72x384 72x448 72x512 72x576 72x640 80x64 80x128 ",
    "80x192 80x256 80x320 80x384 80x448 80x512 80x576 88x64 88x128 88x192 88x256 88x320 ",
    "88x384 88x448 88x512 96x192 96x256 96x320 96x384 96x448 96x512 104x64 104x128 104x192 ",
    "104x256 104x320 104x384 104x448 112x64 112x128 112x192 112x256 112x320 112x384 120x64 ",
    "120x128 120x192 120x256 120x320 120x384 128x320 128x384 136x64 136x128 136x192 136x256 ",
    "136x320 144x64 144x128 144x192 144x256 144x320 152x64 152x128 152x192 152x256 152x320 ",
    "160x64 160x192 160x256 168x64 168x128 168x192 168x256 176x64 176x128 176x192 176x256 ",
    "184x64 184x128 184x192 184x256 192x64 192x192 192x256 200x64 200x128 200x192 208x64 ",
    "208x128 208x192 216x64 216x128 216x192 224x64 224x128 224x192 232x64 232x128 232x192 ",
    "240x64 240x128 240x192 248x64 248x128 248x192 256x192 264x64 264x128 272x64 272x128 ",
    "280x64 280x128 288x64 288x128 296x64 296x128 304x64 304x128 312x64 312x128 320x64 ",
    "320x128 328x64 328x128 336x64 336x128 344x64 344x128 352x64 352x128 360x64 360x128 ",
    "368x64 368x128 376x64 376x128 384x64 384x128 392x64 400x64 408x64 416x64 424x64 432x64 ",
    "440x64 448x64 456x64 464x64 472x64 480x64 488x64 496x64 504x64 520x64 528x64 536x64 ",
    "544x64 552x64 560x64 568x64 576x64 584x64 592x64 600x64 608x64 616x64 624x64 632x64 ",
    "640x64 648x64 656x64 664x64 672x64 680x64 688x64 696x64 704x64 712x64 720x64 728x64 ",
    "736x64 744x64 752x64 760x64 768x64 64x16 64x24 64x40 64x48 64x56 64x72 64x80 64x88 ",
    "64x104 64x112 64x120 64x136 64x144 64x152 64x160 64x168 64x176 64x184 64x200 64x208 ",
    "64x216 64x224 64x232 64x240 64x248 64x264 64x272 64x280 64x288 64x296 64x304 64x312 ",
    "64x328 64x336 64x344 64x352 64x360 64x368 64x376 64x392 64x400 64x408 64x416 64x424 ",
    "64x432 64x440 64x456 64x464 64x472 64x480 64x488 64x496 64x504 64x520 64x528 64x536 ",
    "64x544 64x552 64x560 64x568 64x584 64x592 64x600 64x608 64x616 64x624 64x632 64x648 ",
    "64x656 64x664 64x672 64x680 64x688 64x696 64x712 64x720 64x728 64x736 64x744 64x752 ",
    "64x760 128x8 128x16 128x24 128x40 128x48 128x56 128x72 128x80 128x88 128x104 128x112 ",
    "128x120 128x136 128x144 128x152 128x168 128x176 128x184 128x200 128x208 128x216 128x224 ",
    "128x232 128x240 128x248 128x264 128x272 128x280 128x288 128x296 128x304 128x312 128x328 ",
    "128x336 128x344 128x352 128x360 128x368 128x376 128x392 128x400 128x408 128x416 128x424 ",
    "128x432 128x440 128x448 128x456 128x464 128x472 128x480 128x488 128x496 128x504 128x512 ",
    "192x8 192x16 192x24 192x32 192x40 192x48 192x56 192x72 192x80 192x88 192x96 192x104 ",
    "192x112 192x120 192x136 192x144 192x152 192x160 192x168 192x176 192x184 192x200 192x208 ",
    "192x216 192x224 192x232 192x240 192x248 192x264 192x272 192x280 192x288 192x296 192x304 ",
    "192x312 192x320 192x328 192x336 256x8 256x16 256x24 256x40 256x48 256x56 256x72 256x80 ",
    "256x88 256x96 256x104 256x112 256x120 256x136 256x144 256x152 256x160 256x168 256x176 ",
    "256x184 256x200 256x208 256x216 256x224 256x232 256x240 256x248 256x256 320x8 320x16 ",
    "320x24 320x32 320x40 320x48 320x56 320x72 320x80 320x88 320x96 320x104 320x112 320x120 ",
    "320x136 320x144 320x152 320x160 320x168 320x176 320x184 320x192 320x200 384x8 384x16 ",
    "384x24 384x32 384x40 384x48 384x56 384x72 384x80 384x88 384x96 384x104 384x112 384x120 ",
    "384x136 384x144 384x152 384x160 384x168 448x8 448x16 448x24 448x32 448x40 448x48 448x56 ",
    "448x72 448x80 448x88 448x96 448x104 448x112 448x120 448x128 448x136 448x144 512x8 ",
    "512x16 512x24 512x32 512x40 512x48 512x56 512x72 512x80 512x88 512x96 512x104 512x112 ",
    "512x120 512x128 576x8 576x16 576x24 576x32 576x40 576x48 576x56 576x72 576x80 576x88 ",
    "576x96 576x104 576x112 640x8 640x16 640x24 640x32 640x40 640x48 640x56 640x72 640x80 ",
    "640x88 640x96 704x8 704x16 704x24 704x32 704x40 704x48 704x56 704x72 704x80 704x88 ",
    "768x8 768x16 768x24 768x32 768x40 768x48 768x56 768x72 768x80 256x512 256x1024 512x512 ",
    "512x1024 4x1 8x1 16x1 24x1 32x1 40x1 48x1 64x1 128x1 192x1 256x1 ",
);

/// The names of `cublasLtMatmulStages_t` by value (CUDA 13).
const STAGES_NAMES: &str = concat!(
    "UNDEFINED 16x1 16x2 16x3 16x4 16x5 16x6 32x1 32x2 32x3 32x4 32x5 32x6 64x1 64x2 64x3 ",
    "64x4 64x5 64x6 128x1 128x2 128x3 128x4 128x5 128x6 32x10 8x4 16x10 8x5 - - 8x3 8xAUTO ",
    "16xAUTO 32xAUTO 64xAUTO 128xAUTO 256xAUTO 768xAUTO ",
);

/// The names of `cublasLtClusterShape_t` by value (CUDA 13).
const CLUSTER_NAMES: &str = concat!(
    "AUTO - 1x1x1 2x1x1 4x1x1 1x2x1 2x2x1 4x2x1 1x4x1 2x4x1 4x4x1 8x1x1 1x8x1 8x2x1 2x8x1 ",
    "16x1x1 1x16x1 3x1x1 5x1x1 6x1x1 7x1x1 9x1x1 10x1x1 11x1x1 12x1x1 13x1x1 14x1x1 15x1x1 ",
    "3x2x1 5x2x1 6x2x1 7x2x1 1x3x1 2x3x1 3x3x1 4x3x1 5x3x1 3x4x1 1x5x1 2x5x1 3x5x1 1x6x1 ",
    "2x6x1 1x7x1 2x7x1 1x9x1 1x10x1 1x11x1 1x12x1 1x13x1 1x14x1 1x15x1 ",
);

/// The names of `cublasLtMatmulInnerShape_t` by value.
const INNER_SHAPE_NAMES: &str = "UNDEFINED MMA884 MMA1684 MMA1688 MMA16816";

/// The name of value `id` in `table`, or `id <id>` where the table has none.
fn name_of(table: &str, id: Option<u32>) -> String {
    let Some(id) = id else {
        return "?".into();
    };
    match table.split_whitespace().nth(id as usize) {
        Some(name) if name != "-" => name.into(),
        _ => format!("id {id}"),
    }
}

/// Which algorithm cuBLASLt's heuristic chose for one shape and batch, as
/// `cublasLtMatmulAlgoConfigGetAttribute` and the heuristic's result describe it. A
/// configuration attribute this cuBLASLt does not report is `None`.
#[derive(Clone, Debug, PartialEq)]
pub struct LtAlgo {
    /// `CUBLASLT_ALGO_CONFIG_ID`: the algorithm (a family of kernels).
    pub algo_id: Option<i32>,
    /// `CUBLASLT_ALGO_CONFIG_TILE_ID` (`cublasLtMatmulTile_t`; see [`LtAlgo::tile`]).
    pub tile_id: Option<u32>,
    /// `CUBLASLT_ALGO_CONFIG_STAGES_ID` (`cublasLtMatmulStages_t`; see [`LtAlgo::stages`]).
    pub stages_id: Option<u32>,
    /// `CUBLASLT_ALGO_CONFIG_SPLITK_NUM`: how many slices the inner dimension is split into.
    pub split_k: Option<u32>,
    /// `CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME` (`cublasLtReductionScheme_t`): how split-K
    /// slices are summed (see [`LtAlgo::reduction`]).
    pub reduction_scheme: Option<u32>,
    /// `CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING`: whether thread blocks are swizzled.
    pub cta_swizzling: Option<u32>,
    /// `CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION`: the algorithm's own option.
    pub custom_option: Option<u32>,
    /// `CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID` (`cublasLtMatmulInnerShape_t`).
    pub inner_shape_id: Option<u32>,
    /// `CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID` (`cublasLtClusterShape_t`).
    pub cluster_shape_id: Option<u32>,
    /// Workspace the algorithm needs, bytes (the heuristic's `workspaceSize`).
    pub workspace_bytes: usize,
    /// The heuristic's `wavesCount`: the algorithm's thread blocks over what the GPU runs at
    /// once (under 1: part of the GPU idles).
    pub waves_count: f32,
    /// Algorithms the heuristic returned (at most [`HEURISTIC_REQUEST`]).
    pub returned: usize,
    /// This algorithm's place among them (0: the heuristic's first choice).
    pub rank: usize,
    /// cuBLASLt's version (`cublasLtGetVersion`, e.g. 130000 for 13.0.0).
    pub version: usize,
}

impl LtAlgo {
    /// The tile, e.g. `128x64`.
    pub fn tile(&self) -> String {
        name_of(TILE_NAMES, self.tile_id)
    }

    /// The stages, e.g. `64x4`.
    pub fn stages(&self) -> String {
        name_of(STAGES_NAMES, self.stages_id)
    }

    /// The inner (MMA) shape, e.g. `MMA16816`.
    pub fn inner_shape(&self) -> String {
        name_of(INNER_SHAPE_NAMES, self.inner_shape_id)
    }

    /// The thread-block cluster shape, e.g. `1x1x1`.
    pub fn cluster_shape(&self) -> String {
        name_of(CLUSTER_NAMES, self.cluster_shape_id)
    }

    /// The split-K reduction scheme: `none`, `in-place`, `compute-type` or `output-type`.
    pub fn reduction(&self) -> String {
        match self.reduction_scheme {
            None => "?".into(),
            Some(0) => "none".into(),
            Some(1) => "in-place".into(),
            Some(2) => "compute-type".into(),
            Some(4) => "output-type".into(),
            Some(v) => format!("id {v}"),
        }
    }

    /// One line: `algo 21, tile 64x128, stages 64x4, split-K 1 (reduction none), swizzle 0,
    /// custom 0, inner MMA16816, cluster 1x1x1, workspace 0 B, waves 0.53, choice 1 of 4,
    /// cuBLASLt 130000`.
    pub fn summary(&self) -> String {
        let num = |v: Option<u32>| v.map_or("?".into(), |v| v.to_string());
        format!(
            "algo {}, tile {}, stages {}, split-K {} (reduction {}), swizzle {}, custom {}, \
             inner {}, cluster {}, workspace {} B, waves {:.2}, choice {} of {}, cuBLASLt {}",
            self.algo_id.map_or("?".into(), |v| v.to_string()),
            self.tile(),
            self.stages(),
            num(self.split_k),
            self.reduction(),
            num(self.cta_swizzling),
            num(self.custom_option),
            self.inner_shape(),
            self.cluster_shape(),
            self.workspace_bytes,
            self.waves_count,
            self.rank + 1,
            self.returned,
            self.version
        )
    }
}

/// Reads one configuration attribute of `algo` (an integer of 1 to 8 bytes); `None` where
/// this cuBLASLt does not report it.
fn config_attr(
    algo: &sys::cublasLtMatmulAlgo_t,
    attr: sys::cublasLtMatmulAlgoConfigAttributes_t,
) -> Option<u64> {
    let mut size = 0usize;
    // SAFETY: `algo` is a live algorithm; with a size of 0 cuBLASLt writes only the size the
    // attribute needs, to `size`, and reads no buffer.
    let st = unsafe {
        sys::cublasLtMatmulAlgoConfigGetAttribute(algo, attr, std::ptr::null_mut(), 0, &mut size)
    };
    if st.result().is_err() || !matches!(size, 1 | 2 | 4 | 8) {
        return None;
    }
    let mut buf = [0u8; 8];
    let mut written = 0usize;
    // SAFETY: `buf` holds 8 >= `size` bytes and cuBLASLt writes at most `size` of them.
    let st = unsafe {
        sys::cublasLtMatmulAlgoConfigGetAttribute(
            algo,
            attr,
            buf.as_mut_ptr().cast(),
            size,
            &mut written,
        )
    };
    if st.result().is_err() || written != size {
        return None;
    }
    Some(match size {
        1 => u64::from(buf[0]),
        2 => u64::from(u16::from_ne_bytes([buf[0], buf[1]])),
        4 => u64::from(u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]])),
        _ => u64::from_ne_bytes(buf),
    })
}

fn describe(
    algo: &sys::cublasLtMatmulAlgo_t,
    workspace_bytes: usize,
    waves_count: f32,
    (rank, returned): (usize, usize),
    version: usize,
) -> LtAlgo {
    use sys::cublasLtMatmulAlgoConfigAttributes_t as A;
    // Every attribute but the id is unsigned and at most 32 bits wide.
    let u = |attr| config_attr(algo, attr).and_then(|v| u32::try_from(v).ok());
    LtAlgo {
        // An int32_t, read as its bits.
        algo_id: config_attr(algo, A::CUBLASLT_ALGO_CONFIG_ID).map(|v| v as u32 as i32),
        tile_id: u(A::CUBLASLT_ALGO_CONFIG_TILE_ID),
        stages_id: u(A::CUBLASLT_ALGO_CONFIG_STAGES_ID),
        split_k: u(A::CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
        reduction_scheme: u(A::CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
        cta_swizzling: u(A::CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
        custom_option: u(A::CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION),
        inner_shape_id: u(A::CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID),
        cluster_shape_id: u(A::CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID),
        workspace_bytes,
        waves_count,
        returned,
        rank,
        version,
    }
}

/// The cuBLASLt handle; destroyed on drop.
struct Handle(sys::cublasLtHandle_t);

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: created by `cublasLtCreate` and destroyed only here; every plan made with it
        // was dropped before (field order of `State`).
        let _ = unsafe { lt::destroy_handle(self.0) };
    }
}

/// A matrix layout descriptor; destroyed on drop.
struct Layout(sys::cublasLtMatrixLayout_t);

impl Drop for Layout {
    fn drop(&mut self) {
        // SAFETY: created by `cublasLtMatrixLayoutCreate` and destroyed only here.
        let _ = unsafe { lt::destroy_matrix_layout(self.0) };
    }
}

/// A matmul descriptor; destroyed on drop.
struct Desc(sys::cublasLtMatmulDesc_t);

impl Drop for Desc {
    fn drop(&mut self) {
        // SAFETY: created by `cublasLtMatmulDescCreate` and destroyed only here.
        let _ = unsafe { lt::destroy_matmul_desc(self.0) };
    }
}

/// A heuristic preference descriptor; destroyed on drop.
struct Pref(sys::cublasLtMatmulPreference_t);

impl Drop for Pref {
    fn drop(&mut self) {
        // SAFETY: created by `cublasLtMatmulPreferenceCreate` and destroyed only here.
        let _ = unsafe { lt::destroy_matmul_pref(self.0) };
    }
}

/// Everything one `cublasLtMatmul` call at one shape and batch needs, made once.
struct Plan {
    desc: Desc,
    a: Layout,
    b: Layout,
    c: Layout,
    algo: sys::cublasLtMatmulAlgo_t,
    info: LtAlgo,
}

impl Plan {
    /// Makes the descriptors of `g` and asks the heuristic for its best algorithm.
    fn new(
        handle: &Handle,
        g: &LtGemm,
        shape: (usize, usize, usize),
        workspace_bytes: usize,
        version: usize,
    ) -> Result<Plan, CublasLtError> {
        use sys::cublasLtMatmulDescAttributes_t as D;
        let layout = |l: LtLayout| {
            lt::create_matrix_layout(sys::cudaDataType_t::CUDA_R_16F, l.rows, l.cols, l.ld)
                .map(Layout)
                .map_err(call("cublasLtMatrixLayoutCreate"))
        };
        let (a, b, c) = (layout(g.a)?, layout(g.b)?, layout(g.c)?);
        let desc = Desc(
            lt::create_matmul_desc(
                sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                sys::cudaDataType_t::CUDA_R_32F,
            )
            .map_err(call("cublasLtMatmulDescCreate"))?,
        );
        for (attr, trans) in [
            (D::CUBLASLT_MATMUL_DESC_TRANSA, g.transa),
            (D::CUBLASLT_MATMUL_DESC_TRANSB, g.transb),
        ] {
            let op = if trans {
                cublasOperation_t::CUBLAS_OP_T
            } else {
                cublasOperation_t::CUBLAS_OP_N
            } as i32;
            // SAFETY: `desc` is live; the attribute is an int32_t (a cublasOperation_t), read
            // from `op`.
            unsafe {
                lt::set_matmul_desc_attribute(
                    desc.0,
                    attr,
                    (&raw const op).cast(),
                    std::mem::size_of::<i32>(),
                )
            }
            .map_err(call("cublasLtMatmulDescSetAttribute"))?;
        }
        let pref = Pref(lt::create_matmul_pref().map_err(call("cublasLtMatmulPreferenceCreate"))?);
        let max_workspace = workspace_bytes as u64;
        // SAFETY: `pref` is live; the attribute is a uint64_t, read from `max_workspace`.
        unsafe {
            lt::set_matmul_pref_attribute(
                pref.0,
                sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                (&raw const max_workspace).cast(),
                std::mem::size_of::<u64>(),
            )
        }
        .map_err(call("cublasLtMatmulPreferenceSetAttribute"))?;
        let mut results = [const { MaybeUninit::<sys::cublasLtMatmulHeuristicResult_t>::uninit() };
            HEURISTIC_REQUEST];
        let mut returned: std::ffi::c_int = 0;
        // SAFETY: every descriptor is live; `results` has room for the HEURISTIC_REQUEST
        // results asked for and `returned` receives how many were written.
        unsafe {
            sys::cublasLtMatmulAlgoGetHeuristic(
                handle.0,
                desc.0,
                a.0,
                b.0,
                c.0,
                c.0,
                pref.0,
                HEURISTIC_REQUEST as std::ffi::c_int,
                results.as_mut_ptr().cast(),
                &mut returned,
            )
        }
        .result()
        .map_err(call("cublasLtMatmulAlgoGetHeuristic"))?;
        let returned = usize::try_from(returned)
            .unwrap_or(0)
            .min(HEURISTIC_REQUEST);
        let usable = results[..returned]
            .iter()
            .enumerate()
            .find_map(|(rank, r)| {
                let p = r.as_ptr();
                // SAFETY: cuBLASLt wrote the first `returned` results; the status is read as its
                // raw integer before the result is read as a whole.
                let state = unsafe { (&raw const (*p).state).cast::<u32>().read() };
                if state != sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS as u32 {
                    return None;
                }
                // SAFETY: as above; a result with a success status is fully written.
                let result = unsafe { p.read() };
                Some((rank, result))
            });
        let Some((rank, best)) = usable else {
            return Err(CublasLtError::NoAlgorithm {
                rows: shape.0,
                cols: shape.1,
                batch: shape.2,
                workspace_bytes,
                returned,
            });
        };
        let info = describe(
            &best.algo,
            best.workspaceSize,
            best.wavesCount,
            (rank, returned),
            version,
        );
        Ok(Plan {
            desc,
            a,
            b,
            c,
            algo: best.algo,
            info,
        })
    }
}

/// The mutable side of [`CublasLtGemv`], behind its lock.
struct State {
    // Dropped in this order: the plans' descriptors, the handle, then the workspace.
    plans: HashMap<(usize, usize, usize), Plan>,
    handle: Handle,
    workspace: CudaSlice<u8>,
}

// SAFETY: the raw pointers are cuBLASLt's host-side handle and descriptors, which belong to no
// thread; `State` is only reached through `CublasLtGemv`'s mutex, so one thread at a time uses
// them.
unsafe impl Send for State {}

/// The plan of `key` (rows, cols, batch) in `plans`, made first if there is none.
fn plan_for<'p>(
    plans: &'p mut HashMap<(usize, usize, usize), Plan>,
    handle: &Handle,
    key: (usize, usize, usize),
    workspace_bytes: usize,
    version: usize,
) -> Result<&'p Plan, CublasLtError> {
    Ok(match plans.entry(key) {
        Entry::Occupied(e) => e.into_mut(),
        Entry::Vacant(e) => {
            let g = lt_gemm(key.0, key.1, key.2)?;
            e.insert(Plan::new(handle, &g, key, workspace_bytes, version)?)
        }
    })
}

/// cuBLASLt fp16 GEMV (`cublasLtMatmul`, fp16 in and out, fp32 compute) with the heuristic's
/// best algorithm per shape and batch, for reference beside [`CublasGemv`](crate::CublasGemv).
pub struct CublasLtGemv {
    stream: Arc<CudaStream>,
    state: Mutex<State>,
    workspace_bytes: usize,
    version: usize,
}

impl std::fmt::Debug for CublasLtGemv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CublasLtGemv")
            .field("workspace_bytes", &self.workspace_bytes)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl CublasLtGemv {
    /// A cuBLASLt handle for `gpu`'s stream and a workspace of [`WORKSPACE_BYTES_SM90`] on
    /// Hopper and newer, [`WORKSPACE_BYTES_OLDER`] before.
    ///
    /// # Errors
    /// [`CublasLtError::NotLoaded`] when libcublasLt cannot be loaded, cuBLASLt and runtime
    /// errors (out of memory for the workspace).
    pub fn new(gpu: &Gpu) -> Result<Self, CublasLtError> {
        // SAFETY: tries to dlopen libcublasLt by its usual names; loading it runs only the
        // library's own initializers.
        if !unsafe { sys::is_culib_present() } {
            return Err(CublasLtError::NotLoaded);
        }
        gpu.context()
            .bind_to_thread()
            .map_err(|source| RuntimeError::Driver {
                op: "cuCtxSetCurrent",
                source,
            })?;
        let handle = Handle(lt::create_handle().map_err(call("cublasLtCreate"))?);
        let workspace_bytes = if gpu.info().compute_capability.0 >= 9 {
            WORKSPACE_BYTES_SM90
        } else {
            WORKSPACE_BYTES_OLDER
        };
        let workspace = gpu.alloc_zeros::<u8>(workspace_bytes)?;
        // SAFETY: a plain query of the loaded library.
        let version = unsafe { sys::cublasLtGetVersion() };
        Ok(Self {
            stream: gpu.stream().clone(),
            state: Mutex::new(State {
                plans: HashMap::new(),
                handle,
                workspace,
            }),
            workspace_bytes,
            version,
        })
    }

    /// Bytes of the workspace every call may use.
    pub fn workspace_bytes(&self) -> usize {
        self.workspace_bytes
    }

    /// cuBLASLt's version (`cublasLtGetVersion`, e.g. 130000 for 13.0.0).
    pub fn version(&self) -> usize {
        self.version
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs the heuristic for a `rows x cols` matrix and `batch` vectors unless it ran for
    /// them already, and says which algorithm it chose. [`CublasLtGemv::gemv_f16`] does the
    /// same on its first call at a shape; calling this first keeps the heuristic out of a
    /// timed or captured call.
    ///
    /// # Errors
    /// Shape and batch errors, [`CublasLtError::NoAlgorithm`], cuBLASLt errors.
    pub fn plan(&self, rows: usize, cols: usize, batch: usize) -> Result<LtAlgo, CublasLtError> {
        let (ws, v) = (self.workspace_bytes, self.version);
        let mut guard = self.state();
        let State { plans, handle, .. } = &mut *guard;
        Ok(plan_for(plans, handle, (rows, cols, batch), ws, v)?
            .info
            .clone())
    }

    /// The algorithm chosen for this shape and batch, if a call or [`CublasLtGemv::plan`]
    /// chose one already.
    pub fn algorithm(&self, rows: usize, cols: usize, batch: usize) -> Option<LtAlgo> {
        self.state()
            .plans
            .get(&(rows, cols, batch))
            .map(|p| p.info.clone())
    }

    /// The same product as [`DenseGemv::gemv_f16`](crate::DenseGemv::gemv_f16), through
    /// cuBLASLt: `y = x W^T` for `batch` fp16 vectors, fp32 accumulation. The first call at a
    /// shape and batch runs the heuristic (see [`CublasLtGemv::plan`]); later ones only
    /// enqueue the matmul on the `Gpu`'s stream, allocating nothing, and can be captured into
    /// a CUDA graph.
    ///
    /// # Errors
    /// Batch and length errors, [`CublasLtError::Misaligned`] for a buffer that is not
    /// [`ALIGNMENT`]-byte aligned, [`CublasLtError::NoAlgorithm`], cuBLASLt errors.
    pub fn gemv_f16(
        &self,
        w: &DeviceMatrix<f16>,
        x: &CudaSlice<f16>,
        y: &mut CudaSlice<f16>,
        batch: usize,
    ) -> Result<(), CublasLtError> {
        check_batch(batch)?;
        check_len("input", x.len(), batch * w.cols())?;
        check_len("output", y.len(), batch * w.rows())?;
        let a = dev_ptr(w.data()).addr();
        let b = dev_ptr(x).addr();
        let c = dev_ptr_mut(y).addr();
        for (what, addr) in [("weights", a), ("input", b), ("output", c)] {
            if !addr.is_multiple_of(ALIGNMENT) {
                return Err(CublasLtError::Misaligned {
                    what,
                    addr,
                    align: ALIGNMENT,
                });
            }
        }
        let (ws_bytes, version) = (self.workspace_bytes, self.version);
        let mut guard = self.state();
        let State {
            plans,
            handle,
            workspace,
        } = &mut *guard;
        let ws = dev_ptr_mut(workspace).addr();
        let key = (w.rows(), w.cols(), batch);
        let plan = plan_for(plans, handle, key, ws_bytes, version)?;
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: A (the weights) holds rows * cols values (a `DeviceMatrix`), B (x) at least
        // batch * cols and C = D (y) at least batch * rows (checked above), as the plan's
        // layouts (`lt_gemm` of these sides) address; every buffer is ALIGNMENT-byte aligned
        // (checked above), as the heuristic assumed; C and D are the same buffer with the same
        // layout, which cuBLASLt allows, and beta is 0; alpha and beta are host f32 values,
        // as the fp32 scale type and the default host pointer mode need; the workspace holds
        // `ws_bytes` bytes, at least what the algorithm asked for (the heuristic's limit). All
        // buffers outlive the call's work: they are freed in stream order on this stream.
        unsafe {
            lt::matmul(
                handle.0,
                plan.desc.0,
                (&raw const alpha).cast::<c_void>(),
                (&raw const beta).cast::<c_void>(),
                a as *const c_void,
                plan.a.0,
                b as *const c_void,
                plan.b.0,
                c as *const c_void,
                plan.c.0,
                c as *mut c_void,
                plan.c.0,
                &plan.algo,
                ws as *mut c_void,
                ws_bytes,
                self.stream.cu_stream() as sys::cudaStream_t,
            )
        }
        .map_err(call("cublasLtMatmul"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu;

    #[test]
    fn the_gemm_is_the_one_cublas_runs() {
        let g = lt_gemm(3, 5, 2).unwrap();
        assert_eq!((g.m, g.n, g.k), (3, 2, 5));
        assert!(g.transa && !g.transb);
        assert_eq!(
            g.a,
            LtLayout {
                rows: 5,
                cols: 3,
                ld: 5
            }
        );
        assert_eq!(
            g.b,
            LtLayout {
                rows: 5,
                cols: 2,
                ld: 5
            }
        );
        assert_eq!(
            g.c,
            LtLayout {
                rows: 3,
                cols: 2,
                ld: 3
            }
        );
        let big = lt_gemm(u32::MAX as usize, u32::MAX as usize, 16).unwrap();
        assert_eq!(big.a.ld, i64::from(u32::MAX));
    }

    #[test]
    fn shapes_and_batches_out_of_range_are_refused() {
        assert!(matches!(
            lt_gemm(0, 4, 1),
            Err(DenseError::Shape { rows: 0, cols: 4 })
        ));
        assert!(matches!(
            lt_gemm(4, 1 << 33, 1),
            Err(DenseError::Shape { .. })
        ));
        assert!(matches!(
            lt_gemm(4, 4, 0),
            Err(DenseError::Batch { batch: 0 })
        ));
        assert!(matches!(
            lt_gemm(4, 4, 17),
            Err(DenseError::Batch { batch: 17 })
        ));
    }

    /// `D = op(A) op(B)` in column-major storage, as cuBLASLt defines it, over the row-major
    /// buffers the GEMV passes.
    fn column_major_gemm(g: &LtGemm, a: &[f16], b: &[f16]) -> Vec<f64> {
        let at = |i: u64, j: u64, l: LtLayout, m: &[f16]| {
            assert!(i < l.rows && j < l.cols);
            f64::from(m[(i + j * l.ld as u64) as usize].to_f32())
        };
        let mut d = vec![f64::NAN; (g.c.ld as u64 * g.n) as usize];
        for col in 0..g.n {
            for row in 0..g.m {
                let mut s = 0.0;
                for p in 0..g.k {
                    let x = if g.transa {
                        at(p, row, g.a, a)
                    } else {
                        at(row, p, g.a, a)
                    };
                    let y = if g.transb {
                        at(col, p, g.b, b)
                    } else {
                        at(p, col, g.b, b)
                    };
                    s += x * y;
                }
                d[(row + col * g.c.ld as u64) as usize] = s;
            }
        }
        d
    }

    #[test]
    fn the_gemm_computes_the_gemv_of_the_cpu_reference() {
        for (rows, cols, batch) in [(1, 1, 1), (3, 5, 2), (7, 24, 4), (16, 9, 16), (33, 8, 3)] {
            let w: Vec<f16> = (0..rows * cols)
                .map(|i| f16::from_f32(((i * 7 % 13) as f32 - 6.0) / 8.0))
                .collect();
            let x: Vec<f16> = (0..batch * cols)
                .map(|i| f16::from_f32(((i * 5 % 11) as f32 - 5.0) / 4.0))
                .collect();
            let g = lt_gemm(rows, cols, batch).unwrap();
            let got = column_major_gemm(&g, &w, &x);
            let want = cpu::gemv_f16(&w, rows, cols, &x, batch).unwrap();
            assert_eq!(got.len(), want.len(), "{rows}x{cols} batch {batch}");
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() < 1e-9,
                    "{rows}x{cols} b{batch} [{i}]: {g} vs {w}"
                );
            }
        }
    }

    #[test]
    fn name_tables_follow_the_headers() {
        use sys::cublasLtClusterShape_t as C;
        use sys::cublasLtMatmulInnerShape_t as I;
        use sys::cublasLtMatmulStages_t as S;
        use sys::cublasLtMatmulTile_t as T;
        let n = |table: &str, v: u32| name_of(table, Some(v));
        // Every value of this cudarc's enums has a slot in the tables (newer tiles beyond).
        assert!(TILE_NAMES.split_whitespace().count() >= T::CUBLASLT_MATMUL_TILE_END as usize);
        assert_eq!(
            STAGES_NAMES.split_whitespace().count(),
            S::CUBLASLT_MATMUL_STAGES_END as usize
        );
        assert_eq!(
            CLUSTER_NAMES.split_whitespace().count(),
            C::CUBLASLT_CLUSTER_SHAPE_END as usize
        );
        assert_eq!(
            INNER_SHAPE_NAMES.split_whitespace().count(),
            I::CUBLASLT_MATMUL_INNER_SHAPE_END as usize
        );
        for (v, name) in [
            (T::CUBLASLT_MATMUL_TILE_UNDEFINED, "UNDEFINED"),
            (T::CUBLASLT_MATMUL_TILE_8x8, "8x8"),
            (T::CUBLASLT_MATMUL_TILE_128x64, "128x64"),
            (T::CUBLASLT_MATMUL_TILE_64x128, "64x128"),
            (T::CUBLASLT_MATMUL_TILE_256x128, "256x128"),
            (T::CUBLASLT_MATMUL_TILE_768x80, "768x80"),
            (T::CUBLASLT_MATMUL_TILE_512x1024, "512x1024"),
        ] {
            assert_eq!(n(TILE_NAMES, v as u32), name);
        }
        for (v, name) in [
            (S::CUBLASLT_MATMUL_STAGES_16x1, "16x1"),
            (S::CUBLASLT_MATMUL_STAGES_64x4, "64x4"),
            (S::CUBLASLT_MATMUL_STAGES_8x5, "8x5"),
            (S::CUBLASLT_MATMUL_STAGES_8x3, "8x3"),
            (S::CUBLASLT_MATMUL_STAGES_768xAUTO, "768xAUTO"),
        ] {
            assert_eq!(n(STAGES_NAMES, v as u32), name);
        }
        for (v, name) in [
            (C::CUBLASLT_CLUSTER_SHAPE_AUTO, "AUTO"),
            (C::CUBLASLT_CLUSTER_SHAPE_1x1x1, "1x1x1"),
            (C::CUBLASLT_CLUSTER_SHAPE_2x1x1, "2x1x1"),
            (C::CUBLASLT_CLUSTER_SHAPE_16x1x1, "16x1x1"),
            (C::CUBLASLT_CLUSTER_SHAPE_1x15x1, "1x15x1"),
        ] {
            assert_eq!(n(CLUSTER_NAMES, v as u32), name);
        }
        assert_eq!(
            n(
                INNER_SHAPE_NAMES,
                I::CUBLASLT_MATMUL_INNER_SHAPE_MMA16816 as u32
            ),
            "MMA16816"
        );
        // Values without a name.
        assert_eq!(n(STAGES_NAMES, 29), "id 29");
        assert_eq!(n(TILE_NAMES, 100_000), "id 100000");
        assert_eq!(name_of(TILE_NAMES, None), "?");
    }

    #[test]
    fn the_summary_names_the_algorithm() {
        let mut a = LtAlgo {
            algo_id: Some(66),
            tile_id: Some(sys::cublasLtMatmulTile_t::CUBLASLT_MATMUL_TILE_64x128 as u32),
            stages_id: Some(sys::cublasLtMatmulStages_t::CUBLASLT_MATMUL_STAGES_64x4 as u32),
            split_k: Some(4),
            reduction_scheme: Some(2),
            cta_swizzling: Some(0),
            custom_option: Some(1),
            inner_shape_id: Some(4),
            cluster_shape_id: Some(2),
            workspace_bytes: 1 << 20,
            waves_count: 0.53,
            returned: 4,
            rank: 0,
            version: 130000,
        };
        assert_eq!(
            a.summary(),
            "algo 66, tile 64x128, stages 64x4, split-K 4 (reduction compute-type), swizzle 0, \
             custom 1, inner MMA16816, cluster 1x1x1, workspace 1048576 B, waves 0.53, \
             choice 1 of 4, cuBLASLt 130000"
        );
        a.algo_id = None;
        a.reduction_scheme = Some(9);
        a.cluster_shape_id = None;
        let s = a.summary();
        assert!(
            s.starts_with("algo ?,") && s.contains("(reduction id 9)") && s.contains("cluster ?"),
            "{s}"
        );
    }

    #[test]
    fn errors_say_what_to_do() {
        let msg = CublasLtError::NotLoaded.to_string();
        assert!(msg.contains("LD_LIBRARY_PATH"), "{msg}");
        let msg = CublasLtError::NoAlgorithm {
            rows: 4096,
            cols: 11008,
            batch: 16,
            workspace_bytes: WORKSPACE_BYTES_SM90,
            returned: 0,
        }
        .to_string();
        assert!(
            msg.contains("4096x11008") && msg.contains("batch 16") && msg.contains("leave"),
            "{msg}"
        );
        let msg = CublasLtError::Misaligned {
            what: "input",
            addr: 0x1002,
            align: ALIGNMENT,
        }
        .to_string();
        assert!(msg.contains("0x1002") && msg.contains("256"), "{msg}");
        let e: CublasLtError = RuntimeError::NoCublas.into();
        assert!(matches!(
            e,
            CublasLtError::Dense(DenseError::Runtime(RuntimeError::NoCublas))
        ));
    }
}
