//! GEMV: `B` of 1 to 16 columns, streaming the packed weights (`kernels-rs/beam-kernels`,
//! module `gemv`; design in `docs/BEAM.md`).
//!
//! [`BeamGemv::gemv`] picks the kernel for `nogaps` weights times one vector when the products
//! are exact modulo 2^32 (`ovf` with an output of at most 32 bits, or a bound below 2^32) and
//! the vector fits in shared memory: `cmv_beam_gemv_stream_b{bits}` (integer tensor cores,
//! weights streamed through shared memory) for at most 8 bits, `cmv_beam_gemv_nogaps_b{bits}`
//! for at most 32 (`cmv_beam_gemv_mma_b{bits}`, the first tensor-core kernel, on request);
//! they run after `cmv_beam_gemv_prep`, which writes the vector once into a workspace the
//! `BeamGemv` keeps.
//! `cmv_beam_gemv_any` takes everything else. [`GemvPath`] limits the choice (for
//! comparisons). The [`DeviceGemv`] of [`PackedMatrix`] (`u64`
//! inputs, `(W x) mod 2^64`) runs `cmv_beam_gemv_any`.
//!
//! [`BeamGemv::gemv_row`] takes 1 to 16 vectors as the rows of an `n x k` matrix, each packed
//! like a row of `A`: for `nogaps` of one width among 4, 6, 8, 12, 16, 24 and 32 bits that is
//! one launch of `cmv_beam_gemv_direct_b{bits}[_n{2,4,8,16}]`, which reads the weights and the
//! vectors straight from global memory ([`gemv_row_kernel_name`]); other operands run the
//! kernels above with the vectors read transposed.

use std::sync::{Arc, Mutex};

use beam_kernels::gemv::{
    ACC_U64, ANY_BLOCK_THREADS, BLOCK_THREADS, FAST_MAX_BITS, FLAG_B_TRANSPOSED, FLAG_FUSED_PREP,
    FLAG_OUT_TRANSPOSED, GemvParams, PREP_MMA, PREP_PERM, PREP_STREAM, acc_code, nogaps_smem_bytes,
    nogaps_split, perm_slots,
};
use beam_kernels::gemv_direct::{
    DIRECT_MAX_VECTORS, DIRECT_MIN_WARPS, DIRECT_PDL_WIDTHS, DIRECT_THREADS, DIRECT_WARPS,
    DIRECT_WIDTHS, direct_block_warps, direct_full_wave, direct_grid_of, direct_programmatic,
    direct_slots, direct_smem_bytes, direct_split, direct_split_short, direct_width,
};
use beam_kernels::gemv_mma::{
    MMA_MAX_BITS, frag_words, frag_words_planes, mma_by_default, mma_smem_bytes, mma_split,
    segments, vector_planes,
};
use beam_kernels::gemv_ring::{
    RING_MAX_STAGES, RING_MIN_STAGES, ring_by_default, ring_code, ring_smem_bytes, ring_split,
    ring_stages as ring_stages_auto,
};
use beam_kernels::gemv_stream::{
    STREAM_MAX_WARPS, STREAM_MIN_WARPS, STREAM_WARPS, StreamShape, stream_by_default,
    stream_extra_words, stream_smem_bytes, stream_warps,
};
use beam_kernels::layout::{self, Acc, acc_for};
use beam_kernels::{MAX_BATCH, PackedOut, PackedRef};
use cmv_format::{Check, DeviceGemv, batch_len, check_batch, check_len_at_least};
use cmv_runtime::{
    CudaSlice, CudaStream, DevPtrMut, Gpu, Kernel, LaunchConfig, dev_ptr, dev_ptr_mut,
};

use super::{DeviceBeamMatrix, DeviceBeamOut, PTX, PTX_SM90, check_product};
use crate::{BeamError, GEMV_MAX_COLS, Layout, Overflow, PackedMatrix};

/// The environment variable that turns the direct kernel's programmatic dependent launch off
/// when set to `0` (for comparisons; [`BeamGemv::with_pdl`]).
pub const PDL_ENV: &str = "CMV_BEAM_PDL";

/// Environment variable that fixes the direct kernel's warps per block (6, 7 or 8) for one-slice
/// launches instead of [`beam_kernels::gemv_direct::direct_block_warps`]' choice: for
/// comparisons (every count gives the same result).
pub const DIRECT_WARPS_ENV: &str = "CMV_BEAM_DIRECT_WARPS";

/// The kernel names, `cmv_beam_gemv_ring_b{bits}` at index `bits - 1`.
const RING_NAMES: [&str; FAST_MAX_BITS as usize] = [
    "cmv_beam_gemv_ring_b1",
    "cmv_beam_gemv_ring_b2",
    "cmv_beam_gemv_ring_b3",
    "cmv_beam_gemv_ring_b4",
    "cmv_beam_gemv_ring_b5",
    "cmv_beam_gemv_ring_b6",
    "cmv_beam_gemv_ring_b7",
    "cmv_beam_gemv_ring_b8",
    "cmv_beam_gemv_ring_b9",
    "cmv_beam_gemv_ring_b10",
    "cmv_beam_gemv_ring_b11",
    "cmv_beam_gemv_ring_b12",
    "cmv_beam_gemv_ring_b13",
    "cmv_beam_gemv_ring_b14",
    "cmv_beam_gemv_ring_b15",
    "cmv_beam_gemv_ring_b16",
    "cmv_beam_gemv_ring_b17",
    "cmv_beam_gemv_ring_b18",
    "cmv_beam_gemv_ring_b19",
    "cmv_beam_gemv_ring_b20",
    "cmv_beam_gemv_ring_b21",
    "cmv_beam_gemv_ring_b22",
    "cmv_beam_gemv_ring_b23",
    "cmv_beam_gemv_ring_b24",
    "cmv_beam_gemv_ring_b25",
    "cmv_beam_gemv_ring_b26",
    "cmv_beam_gemv_ring_b27",
    "cmv_beam_gemv_ring_b28",
    "cmv_beam_gemv_ring_b29",
    "cmv_beam_gemv_ring_b30",
    "cmv_beam_gemv_ring_b31",
    "cmv_beam_gemv_ring_b32",
];

/// The kernel names, `cmv_beam_gemv_nogaps_b{bits}` at index `bits - 1`.
const NOGAPS_NAMES: [&str; FAST_MAX_BITS as usize] = [
    "cmv_beam_gemv_nogaps_b1",
    "cmv_beam_gemv_nogaps_b2",
    "cmv_beam_gemv_nogaps_b3",
    "cmv_beam_gemv_nogaps_b4",
    "cmv_beam_gemv_nogaps_b5",
    "cmv_beam_gemv_nogaps_b6",
    "cmv_beam_gemv_nogaps_b7",
    "cmv_beam_gemv_nogaps_b8",
    "cmv_beam_gemv_nogaps_b9",
    "cmv_beam_gemv_nogaps_b10",
    "cmv_beam_gemv_nogaps_b11",
    "cmv_beam_gemv_nogaps_b12",
    "cmv_beam_gemv_nogaps_b13",
    "cmv_beam_gemv_nogaps_b14",
    "cmv_beam_gemv_nogaps_b15",
    "cmv_beam_gemv_nogaps_b16",
    "cmv_beam_gemv_nogaps_b17",
    "cmv_beam_gemv_nogaps_b18",
    "cmv_beam_gemv_nogaps_b19",
    "cmv_beam_gemv_nogaps_b20",
    "cmv_beam_gemv_nogaps_b21",
    "cmv_beam_gemv_nogaps_b22",
    "cmv_beam_gemv_nogaps_b23",
    "cmv_beam_gemv_nogaps_b24",
    "cmv_beam_gemv_nogaps_b25",
    "cmv_beam_gemv_nogaps_b26",
    "cmv_beam_gemv_nogaps_b27",
    "cmv_beam_gemv_nogaps_b28",
    "cmv_beam_gemv_nogaps_b29",
    "cmv_beam_gemv_nogaps_b30",
    "cmv_beam_gemv_nogaps_b31",
    "cmv_beam_gemv_nogaps_b32",
];

/// The direct kernel names: `DIRECT_NAMES[k][i]` is `cmv_beam_gemv_direct_b{bits}` (`k = 0`,
/// one vector) or `..._n{slots}` for `slots = 2^k` vectors, at `bits = DIRECT_WIDTHS[i]`.
const DIRECT_NAMES: [[&str; DIRECT_WIDTHS.len()]; 5] = [
    [
        "cmv_beam_gemv_direct_b4",
        "cmv_beam_gemv_direct_b6",
        "cmv_beam_gemv_direct_b8",
        "cmv_beam_gemv_direct_b12",
        "cmv_beam_gemv_direct_b16",
        "cmv_beam_gemv_direct_b24",
        "cmv_beam_gemv_direct_b32",
    ],
    [
        "cmv_beam_gemv_direct_b4_n2",
        "cmv_beam_gemv_direct_b6_n2",
        "cmv_beam_gemv_direct_b8_n2",
        "cmv_beam_gemv_direct_b12_n2",
        "cmv_beam_gemv_direct_b16_n2",
        "cmv_beam_gemv_direct_b24_n2",
        "cmv_beam_gemv_direct_b32_n2",
    ],
    [
        "cmv_beam_gemv_direct_b4_n4",
        "cmv_beam_gemv_direct_b6_n4",
        "cmv_beam_gemv_direct_b8_n4",
        "cmv_beam_gemv_direct_b12_n4",
        "cmv_beam_gemv_direct_b16_n4",
        "cmv_beam_gemv_direct_b24_n4",
        "cmv_beam_gemv_direct_b32_n4",
    ],
    [
        "cmv_beam_gemv_direct_b4_n8",
        "cmv_beam_gemv_direct_b6_n8",
        "cmv_beam_gemv_direct_b8_n8",
        "cmv_beam_gemv_direct_b12_n8",
        "cmv_beam_gemv_direct_b16_n8",
        "cmv_beam_gemv_direct_b24_n8",
        "cmv_beam_gemv_direct_b32_n8",
    ],
    [
        "cmv_beam_gemv_direct_b4_n16",
        "cmv_beam_gemv_direct_b6_n16",
        "cmv_beam_gemv_direct_b8_n16",
        "cmv_beam_gemv_direct_b12_n16",
        "cmv_beam_gemv_direct_b16_n16",
        "cmv_beam_gemv_direct_b24_n16",
        "cmv_beam_gemv_direct_b32_n16",
    ],
];

/// The row of [`DIRECT_NAMES`] for `n` vectors (1 to 16).
fn direct_slot_index(n: u32) -> usize {
    direct_slots(n).trailing_zeros() as usize
}

/// The index of `bits` in [`DIRECT_WIDTHS`] (a direct width).
fn direct_index(bits: u32) -> Option<usize> {
    DIRECT_WIDTHS.iter().position(|&b| b == bits)
}

/// The tensor-core kernel names, `cmv_beam_gemv_mma_b{bits}` at index `bits - 1`.
const MMA_NAMES: [&str; MMA_MAX_BITS as usize] = [
    "cmv_beam_gemv_mma_b1",
    "cmv_beam_gemv_mma_b2",
    "cmv_beam_gemv_mma_b3",
    "cmv_beam_gemv_mma_b4",
    "cmv_beam_gemv_mma_b5",
    "cmv_beam_gemv_mma_b6",
    "cmv_beam_gemv_mma_b7",
    "cmv_beam_gemv_mma_b8",
];

/// The streaming tensor-core kernel names, `cmv_beam_gemv_stream_b{bits}` at index `bits - 1`.
const STREAM_NAMES: [&str; MMA_MAX_BITS as usize] = [
    "cmv_beam_gemv_stream_b1",
    "cmv_beam_gemv_stream_b2",
    "cmv_beam_gemv_stream_b3",
    "cmv_beam_gemv_stream_b4",
    "cmv_beam_gemv_stream_b5",
    "cmv_beam_gemv_stream_b6",
    "cmv_beam_gemv_stream_b7",
    "cmv_beam_gemv_stream_b8",
];

/// Which GEMV kernels [`BeamGemv`] may pick: the fastest one that takes the operands among
/// those allowed. Every path gives the same (exact) result.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GemvPath {
    /// Any kernel (the default): the streaming tensor-core kernel where
    /// [`stream_by_default`](beam_kernels::gemv_stream::stream_by_default), the first
    /// tensor-core kernel where [`mma_by_default`](beam_kernels::gemv_mma::mma_by_default),
    /// then the `nogaps` CUDA-core kernels, then `cmv_beam_gemv_any`.
    #[default]
    Auto,
    /// The streaming tensor-core kernel (`cmv_beam_gemv_stream_b{bits}`) at every width up to
    /// 8 bits, else as `Auto`.
    Stream,
    /// The first tensor-core kernel (`cmv_beam_gemv_mma_b{bits}`, weights in flight in
    /// registers) at every width up to 8 bits, else as `Auto` without the streaming kernel.
    TensorCores,
    /// Not the tensor-core kernels.
    CudaCores,
    /// The CUDA-core kernel with a copy ring (`cmv_beam_gemv_ring_b{bits}`, weights copied
    /// through shared memory) at every width up to 32 bits where it fits, else as `CudaCores`.
    CudaRing,
    /// Only `cmv_beam_gemv_any`.
    Any,
}

impl GemvPath {
    /// Every path, in the order of [`GemvPath::name`].
    pub const ALL: [GemvPath; 6] = [
        GemvPath::Auto,
        GemvPath::Stream,
        GemvPath::TensorCores,
        GemvPath::CudaCores,
        GemvPath::CudaRing,
        GemvPath::Any,
    ];

    /// `auto`, `tc-stream`, `tensor-cores`, `cuda-cores`, `cuda-ring` or `any`.
    pub fn name(self) -> &'static str {
        match self {
            GemvPath::Auto => "auto",
            GemvPath::Stream => "tc-stream",
            GemvPath::TensorCores => "tensor-cores",
            GemvPath::CudaCores => "cuda-cores",
            GemvPath::CudaRing => "cuda-ring",
            GemvPath::Any => "any",
        }
    }

    /// The path called `name`.
    pub fn parse(name: &str) -> Option<GemvPath> {
        GemvPath::ALL.into_iter().find(|p| p.name() == name.trim())
    }
}

/// Where the fast kernels' vector is prepared. Every choice gives the same (exact) result.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GemvPrep {
    /// The launcher's rule (the default): [`GemvPrep::Kernel`] (measured faster at every LLM
    /// shape, docs/BEAM.md).
    #[default]
    Auto,
    /// `cmv_beam_gemv_prep` writes it once into a workspace, each block copies it: two
    /// launches.
    Kernel,
    /// Each block builds it from `B` itself: one launch.
    Fused,
}

impl GemvPrep {
    /// Every choice, in the order of [`GemvPrep::name`].
    pub const ALL: [GemvPrep; 3] = [GemvPrep::Auto, GemvPrep::Kernel, GemvPrep::Fused];

    /// `auto`, `kernel` or `fused`.
    pub fn name(self) -> &'static str {
        match self {
            GemvPrep::Auto => "auto",
            GemvPrep::Kernel => "kernel",
            GemvPrep::Fused => "fused",
        }
    }

    /// The choice called `name`.
    pub fn parse(name: &str) -> Option<GemvPrep> {
        GemvPrep::ALL.into_iter().find(|p| p.name() == name.trim())
    }
}

/// The name of the kernel that `BeamGemv::gemv` runs on `path` for `A` (`a_rows x a_cols`)
/// of `a_bits` in `a_layout` (`a_row_words` words per row) times `n` vectors of `b_bits`,
/// `out_bits` wide under `overflow`, when the device gives `max_smem` bytes of shared memory
/// to a block.
pub fn gemv_kernel_name(
    a: (u32, Layout, (usize, usize), usize),
    b: (u32, usize),
    out_bits: u32,
    overflow: Overflow,
    (max_smem, path): (u32, GemvPath),
) -> &'static str {
    let shape = a.0.clamp(1, MMA_MAX_BITS);
    kernel_name_with(
        a,
        b,
        (out_bits, overflow),
        (max_smem, path),
        (StreamShape::for_bits(shape), STREAM_WARPS),
        None,
    )
}

/// The name of the kernel that `BeamGemv::gemv_row` runs on `path` for `A` as in
/// [`gemv_kernel_name`] times `n` vectors given as the rows of an `n x k` matrix of `x_bits`
/// in `x_layout`: `cmv_beam_gemv_direct_b{bits}` (`..._n{2,4,8,16}` for more vectors) where
/// `path` is [`GemvPath::Auto`], both are `nogaps` of one direct width (4, 6, 8, 12, 16, 24,
/// 32), `n` is 1 to 16 and the products are exact modulo 2^32; else the kernel
/// [`gemv_kernel_name`] names for the same vectors as columns.
pub fn gemv_row_kernel_name(
    a: (u32, Layout, (usize, usize), usize),
    (x_bits, x_layout, n): (u32, Layout, usize),
    out_bits: u32,
    overflow: Overflow,
    (max_smem, path): (u32, GemvPath),
) -> &'static str {
    match direct_name(a, (x_bits, x_layout, n), out_bits, overflow, path) {
        Some(name) => name,
        None => gemv_kernel_name(a, (x_bits, n), out_bits, overflow, (max_smem, path)),
    }
}

/// The direct kernel for these operands, if it takes them.
fn direct_name(
    (a_bits, a_layout, (a_rows, a_cols), a_row_words): (u32, Layout, (usize, usize), usize),
    (x_bits, x_layout, n): (u32, Layout, usize),
    out_bits: u32,
    overflow: Overflow,
    path: GemvPath,
) -> Option<&'static str> {
    let acc = acc_for(a_bits, x_bits, a_cols as u64, out_bits, overflow.code());
    let fits = u32::try_from(a_rows).is_ok()
        && u32::try_from(a_cols).is_ok()
        && u32::try_from(a_row_words).is_ok();
    let ok = path == GemvPath::Auto
        && a_layout == Layout::Nogaps
        && x_layout == Layout::Nogaps
        && x_bits == a_bits
        && direct_width(a_bits)
        && acc == Acc::U32
        && (1..=DIRECT_MAX_VECTORS as usize).contains(&n)
        && fits;
    if ok {
        direct_index(a_bits).map(|i| DIRECT_NAMES[direct_slot_index(n as u32)][i])
    } else {
        None
    }
}

/// Where a GEMV kernel writes `out` and whether it must be zeroed first: a `rows x 1` output
/// in `nogaps` or `slabs` of at most 64 bits keeps every element in a word of its own, at
/// bit 0, so the kernels write it as the `naive` matrix of the same words (plain stores, no
/// zeroing: the words equal the canonical packing); other outputs are written by atomic ORs
/// into zeroed words unless `naive`.
fn out_target(out: &mut DeviceBeamOut) -> (PackedOut, bool) {
    let mut c = out.packed_out();
    if own_words(out.layout(), c.cols) {
        debug_assert_eq!(c.row_words, 1);
        c.layout = layout::NAIVE;
        c.row_words = 1;
    }
    (c, zeroed(out))
}

/// Whether a GEMV zeroes `out` before it writes it ([`out_target`]).
fn zeroed(out: &DeviceBeamOut) -> bool {
    let cols = u32::try_from(out.cols()).unwrap_or(u32::MAX);
    !own_words(out.layout(), cols) && out.layout() != Layout::Naive
}

/// Whether a `rows x cols` output in `layout` keeps each element alone at bit 0 of a word of
/// its own, so that its words are those of the `naive` matrix of the same values (outputs are
/// at most 64 bits wide): one column in `nogaps` or `slabs`.
fn own_words(layout: Layout, cols: u32) -> bool {
    cols == 1 && matches!(layout, Layout::Nogaps | Layout::Slabs)
}

/// [`gemv_kernel_name`] with the streaming kernel's shape and preferred warps.
fn kernel_name_with(
    (a_bits, a_layout, (a_rows, a_cols), a_row_words): (u32, Layout, (usize, usize), usize),
    (b_bits, n): (u32, usize),
    (out_bits, overflow): (u32, Overflow),
    (max_smem, path): (u32, GemvPath),
    (shape, want): (StreamShape, u32),
    ring_stages: Option<u32>,
) -> &'static str {
    let acc = acc_for(a_bits, b_bits, a_cols as u64, out_bits, overflow.code());
    let fast = a_layout == Layout::Nogaps && n == 1 && acc == Acc::U32 && path != GemvPath::Any;
    let (Ok(cols), Ok(rw)) = (u32::try_from(a_cols), u32::try_from(a_row_words)) else {
        return "cmv_beam_gemv_any";
    };
    let fits = |bytes: u64| bytes <= u64::from(max_smem);
    let stream = match path {
        GemvPath::Auto => stream_by_default(a_bits, a_rows as u64 * a_cols as u64),
        GemvPath::Stream => a_bits <= MMA_MAX_BITS,
        GemvPath::TensorCores | GemvPath::CudaCores | GemvPath::CudaRing | GemvPath::Any => false,
    };
    let mma = match path {
        GemvPath::Auto | GemvPath::Stream => mma_by_default(a_bits),
        GemvPath::TensorCores => a_bits <= MMA_MAX_BITS,
        GemvPath::CudaCores | GemvPath::CudaRing | GemvPath::Any => false,
    };
    let ring = match path {
        GemvPath::Auto | GemvPath::Stream | GemvPath::TensorCores => {
            ring_by_default(a_bits, rw, a_rows as u64 * a_cols as u64, max_smem)
        }
        GemvPath::CudaRing => true,
        GemvPath::CudaCores | GemvPath::Any => false,
    };
    let stream_fits = a_bits <= MMA_MAX_BITS
        && stream_warps(a_bits, shape, (cols, vector_planes(b_bits)), want, max_smem).is_some();
    if fast && stream && stream_fits {
        STREAM_NAMES[a_bits as usize - 1]
    } else if fast && mma && fits(mma_smem_bytes(cols)) {
        MMA_NAMES[a_bits as usize - 1]
    } else if fast
        && ring
        && a_bits <= FAST_MAX_BITS
        && fits(ring_smem_bytes(
            a_bits,
            rw,
            ring_stages.unwrap_or(ring_stages_auto(a_bits, rw)),
        ))
    {
        RING_NAMES[a_bits as usize - 1]
    } else if fast && a_bits <= FAST_MAX_BITS && fits(nogaps_smem_bytes(a_bits, rw)) {
        NOGAPS_NAMES[a_bits as usize - 1]
    } else {
        "cmv_beam_gemv_any"
    }
}

/// The GEMV kernels, loaded once for a [`Gpu`]; launches go to the `Gpu`'s stream.
#[derive(Debug)]
pub struct BeamGemv {
    stream: Arc<CudaStream>,
    any: Kernel,
    nogaps: Vec<Kernel>,
    mma: Vec<Kernel>,
    stream_k: Vec<Kernel>,
    ring: Vec<Kernel>,
    direct: Vec<Kernel>,
    /// The single-vector direct kernels of [`PTX_SM90`] (programmatic dependent launch), at
    /// the index of their width in [`DIRECT_WIDTHS`]: loaded on compute capability 9.0 unless
    /// turned off, `None` for the widths not in [`DIRECT_PDL_WIDTHS`].
    direct_pdl: Vec<Option<Kernel>>,
    /// Blocks of each of those kernels resident on one SM, for 1, 2, 4 and 8 slices (their
    /// shared memory differs) with blocks of `DIRECT_THREADS`, then for one slice with blocks
    /// of 7 and of 6 warps ([`direct_block_warps`]): a programmatic launch only where the grid
    /// is one full wave ([`direct_full_wave`]).
    direct_pdl_resident: Vec<[u32; 6]>,
    prep: Kernel,
    /// The fast kernels' vector, written by `cmv_beam_gemv_prep`; grown on demand. Every
    /// launch that uses it goes to `stream`, so one buffer serves them in order.
    work: Mutex<Option<CudaSlice<u32>>>,
    /// The streaming kernel's sums and tile counters with the fused preparation: zero between
    /// launches.
    stream_work: Mutex<Option<CudaSlice<u32>>>,
    path: GemvPath,
    prep_mode: GemvPrep,
    /// The streaming kernel's shape (`None`: [`StreamShape::for_bits`]) and preferred warps.
    stream_shape: Option<StreamShape>,
    stream_want: u32,
    /// Stages of each warp's ring in the ring kernel (`None`: [`ring_stages_auto`]).
    ring_stages: Option<u32>,
    /// Slices of the direct kernel (`None`: [`direct_split`]).
    direct_slices: Option<u32>,
    /// Warps per block of the direct kernel's one-slice launches (`None`:
    /// [`direct_block_warps`]; [`DIRECT_WARPS_ENV`]).
    direct_warps: Option<u32>,
    sm_count: u32,
    /// Whether the direct kernel splits short rows past the warp cap
    /// (`beam_kernels::direct_split_short` of this GPU's nominal bandwidth per SM).
    split_short: bool,
    max_smem: u32,
}

/// A launch of the direct kernel: warp groups per row group (`slices`), warps per block and
/// blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DirectPlan {
    slices: u32,
    warps: u32,
    grid: u32,
}

impl BeamGemv {
    /// Loads the kernels. On compute capability 9.0 a single-vector direct product
    /// ([`BeamGemv::gemv_row`]) is launched with programmatic dependent launch
    /// ([`BeamGemv::with_pdl`]), unless the environment variable [`PDL_ENV`] is `0`.
    ///
    /// # Errors
    /// Runtime errors (a driver that rejects the PTX, a missing entry point).
    pub fn new(gpu: &Gpu) -> Result<Self, BeamError> {
        let off = std::env::var(PDL_ENV).is_ok_and(|v| v == "0");
        Self::load(gpu)?.with_pdl(gpu, !off)
    }

    /// Loads the kernels, with no programmatic dependent launch.
    fn load(gpu: &Gpu) -> Result<Self, BeamError> {
        let nogaps = NOGAPS_NAMES
            .iter()
            .map(|&name| gpu.kernel(&PTX, name))
            .collect::<Result<Vec<_>, _>>()?;
        let mma = MMA_NAMES
            .iter()
            .map(|&name| gpu.kernel(&PTX, name))
            .collect::<Result<Vec<_>, _>>()?;
        let stream_k = STREAM_NAMES
            .iter()
            .map(|&name| gpu.kernel(&PTX, name))
            .collect::<Result<Vec<_>, _>>()?;
        let ring = RING_NAMES
            .iter()
            .map(|&name| gpu.kernel(&PTX, name))
            .collect::<Result<Vec<_>, _>>()?;
        let direct = DIRECT_NAMES
            .iter()
            .flatten()
            .map(|&name| gpu.kernel(&PTX, name))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            stream: gpu.stream().clone(),
            any: gpu.kernel(&PTX, "cmv_beam_gemv_any")?,
            nogaps,
            mma,
            stream_k,
            ring,
            direct,
            direct_pdl: Vec::new(),
            direct_pdl_resident: Vec::new(),
            prep: gpu.kernel(&PTX, "cmv_beam_gemv_prep")?,
            work: Mutex::new(None),
            stream_work: Mutex::new(None),
            path: GemvPath::Auto,
            prep_mode: GemvPrep::Auto,
            stream_shape: None,
            stream_want: STREAM_WARPS,
            ring_stages: None,
            direct_slices: None,
            direct_warps: std::env::var(DIRECT_WARPS_ENV)
                .ok()
                .and_then(|v| v.parse().ok())
                .filter(|w| (DIRECT_MIN_WARPS..=DIRECT_WARPS).contains(w)),
            sm_count: gpu.info().sm_count,
            split_short: direct_split_short(gpu.info().peak_bandwidth_per_sm()),
            max_smem: gpu.info().max_smem_per_block_optin,
        })
    }

    /// The same kernels, with programmatic dependent launch of the single-vector direct
    /// kernels asked for (`pdl`) or not. It is used only on compute capability 9.0
    /// ([`BeamGemv::uses_pdl`]), for one vector of a width in [`DIRECT_PDL_WIDTHS`] whose
    /// output is written without a zeroing pass ([`direct_programmatic`]): such a product
    /// starts while the kernel before it on the stream ends, issues its first weight loads,
    /// and waits for that kernel before it reads its vector or writes its output; and only
    /// where its grid fills one wave of resident blocks ([`direct_full_wave`]; measured slower
    /// otherwise).
    /// Both give the same bits.
    ///
    /// # Errors
    /// Runtime errors (a driver that rejects the `sm_90a` PTX, a missing entry point).
    pub fn with_pdl(mut self, gpu: &Gpu, pdl: bool) -> Result<Self, BeamError> {
        self.direct_pdl = if pdl && gpu.info().compute_capability == (9, 0) {
            DIRECT_WIDTHS
                .iter()
                .enumerate()
                .map(|(i, bits)| {
                    if DIRECT_PDL_WIDTHS.contains(bits) {
                        gpu.kernel(&PTX_SM90, DIRECT_NAMES[0][i]).map(Some)
                    } else {
                        Ok(None)
                    }
                })
                .collect::<Result<Vec<_>, _>>()?
        } else {
            Vec::new()
        };
        self.direct_pdl_resident = DIRECT_WIDTHS
            .iter()
            .zip(&self.direct_pdl)
            .map(|(&bits, k)| {
                let mut r = [0; 6];
                if let Some(k) = k {
                    for (s, r) in r.iter_mut().take(4).enumerate() {
                        let smem = direct_smem_bytes(1 << s, bits, 1);
                        *r = k.max_active_blocks_per_sm(DIRECT_THREADS, smem)?;
                    }
                    for (i, warps) in [7, 6].into_iter().enumerate() {
                        r[4 + i] = k.max_active_blocks_per_sm(warps * 32, 0)?;
                    }
                }
                Ok(r)
            })
            .collect::<Result<Vec<_>, BeamError>>()?;
        Ok(self)
    }

    /// Whether single-vector direct products are launched with programmatic dependent launch
    /// (compute capability 9.0, not turned off).
    pub fn uses_pdl(&self) -> bool {
        !self.direct_pdl.is_empty()
    }

    /// The same kernels, limited to `path`.
    #[must_use]
    pub fn with_path(mut self, path: GemvPath) -> Self {
        self.path = path;
        self
    }

    /// The kernels this `BeamGemv` may pick.
    pub fn path(&self) -> GemvPath {
        self.path
    }

    /// The same kernels, preparing the vector as `prep` says.
    #[must_use]
    pub fn with_prep(mut self, prep: GemvPrep) -> Self {
        self.prep_mode = prep;
        self
    }

    /// How this `BeamGemv` prepares the fast kernels' vector.
    pub fn prep(&self) -> GemvPrep {
        self.prep_mode
    }

    /// The same kernels, the streaming kernel run with units of `shape` and `warps` warps per
    /// block where they fit (fewer otherwise): for tuning; every shape gives the same result.
    ///
    /// # Errors
    /// [`BeamError::Kernel`] for a shape the kernel does not take (`unit_segs` 1..=16,
    /// `stages` 2..=8) or warps other than 4, 8 and 16 (16 run as 8 at 5-7 bits).
    pub fn with_stream_shape(mut self, shape: StreamShape, warps: u32) -> Result<Self, BeamError> {
        let ok_warps =
            (STREAM_MIN_WARPS..=STREAM_MAX_WARPS).contains(&warps) && warps.is_power_of_two();
        // More warps than a width's launch bound are capped by `stream_warps`.
        if !shape.valid() || !ok_warps {
            return Err(BeamError::Kernel {
                kernel: "cmv_beam_gemv_stream",
                reason: format!(
                    "units of {} segments, {} stages, {warps} warps: use 1 to 16 segments, 2 to \
                     8 stages and 4, 8 or 16 warps",
                    shape.unit_segs, shape.stages
                ),
            });
        }
        self.stream_shape = Some(shape);
        self.stream_want = warps;
        Ok(self)
    }

    /// The same kernels, the ring kernel run with `stages` stages per warp where they fit
    /// (instead of the launcher's rule,
    /// [`ring_stages`](beam_kernels::gemv_ring::ring_stages)): for tuning; every count gives
    /// the same result.
    ///
    /// # Errors
    /// [`BeamError::Kernel`] for a count outside 2..=8.
    pub fn with_ring_stages(mut self, stages: u32) -> Result<Self, BeamError> {
        if !(RING_MIN_STAGES..=RING_MAX_STAGES).contains(&stages) {
            return Err(BeamError::Kernel {
                kernel: "cmv_beam_gemv_ring",
                reason: format!(
                    "{stages} stages per ring: use {RING_MIN_STAGES} to {RING_MAX_STAGES}"
                ),
            });
        }
        self.ring_stages = Some(stages);
        Ok(self)
    }

    /// The same kernels, the direct kernel run with `slices` warps per group of rows (instead
    /// of [`direct_split`]'s rule): for tuning; every count gives the same result.
    ///
    /// # Errors
    /// [`BeamError::Kernel`] for a count other than 1, 2, 4 or 8.
    pub fn with_direct_slices(mut self, slices: u32) -> Result<Self, BeamError> {
        if !matches!(slices, 1 | 2 | 4 | 8) {
            return Err(BeamError::Kernel {
                kernel: "cmv_beam_gemv_direct",
                reason: format!("{slices} slices: use 1, 2, 4 or 8"),
            });
        }
        self.direct_slices = Some(slices);
        Ok(self)
    }

    /// The same kernels, the direct kernel's one-slice launches with blocks of `warps` warps
    /// (instead of [`direct_block_warps`]' choice): for tuning and tests; every count gives the
    /// same result.
    ///
    /// # Errors
    /// [`BeamError::Kernel`] for a count outside 6..=8.
    pub fn with_direct_warps(mut self, warps: u32) -> Result<Self, BeamError> {
        if !(DIRECT_MIN_WARPS..=DIRECT_WARPS).contains(&warps) {
            return Err(BeamError::Kernel {
                kernel: "cmv_beam_gemv_direct",
                reason: format!(
                    "{warps} warps per block: use {DIRECT_MIN_WARPS} to {DIRECT_WARPS}"
                ),
            });
        }
        self.direct_warps = Some(warps);
        Ok(self)
    }

    /// Stages of each warp's ring in the ring kernel for `bits`-bit rows of `row_words` words.
    pub fn ring_stages(&self, bits: u32, row_words: u32) -> u32 {
        self.ring_stages
            .unwrap_or(ring_stages_auto(bits.clamp(1, FAST_MAX_BITS), row_words))
    }

    /// The streaming kernel's shape for `bits`-bit weights and its preferred warps per block.
    pub fn stream_shape(&self, bits: u32) -> (StreamShape, u32) {
        let b = bits.clamp(1, MMA_MAX_BITS);
        (
            self.stream_shape.unwrap_or(StreamShape::for_bits(b)),
            self.stream_want,
        )
    }

    /// The name of the kernel [`BeamGemv::gemv`] runs for these operands and output.
    pub fn kernel_name(
        &self,
        a: &DeviceBeamMatrix,
        b: &DeviceBeamMatrix,
        out_bits: u32,
        overflow: Overflow,
    ) -> &'static str {
        kernel_name_with(
            (
                a.bits(),
                a.layout(),
                (a.rows(), a.cols()),
                a.packed_ref().row_words as usize,
            ),
            (b.bits(), b.cols()),
            (out_bits, overflow),
            (self.max_smem, self.path),
            self.stream_shape(a.bits()),
            self.ring_stages,
        )
    }

    /// Queues `out = A x B` for `B` of 1 to 16 columns, wrapped or clamped to `out`'s width by
    /// `overflow`, bit-exact with [`gemv_reference`](crate::gemv_reference). Allocate `out`
    /// with [`BeamGemm::alloc_out`](super::BeamGemm::alloc_out); its words are zeroed first (on
    /// the stream) unless the layout is `naive`.
    ///
    /// # Errors
    /// [`BeamError::GemmShape`] when `A`'s columns differ from `B`'s rows,
    /// [`BeamError::GemvColumns`] for more than 16 columns, [`FormatError::Shape`](cmv_format::FormatError::Shape) for an
    /// output that is not `A.rows x B.cols`, runtime errors.
    pub fn gemv(
        &self,
        gpu: &Gpu,
        a: &DeviceBeamMatrix,
        b: &DeviceBeamMatrix,
        out: &mut DeviceBeamOut,
        overflow: Overflow,
    ) -> Result<(), BeamError> {
        check_product(a, b, out)?;
        if b.cols() > GEMV_MAX_COLS {
            return Err(BeamError::GemvColumns { cols: b.cols() });
        }
        let (c, zero) = out_target(out);
        if zero {
            out.zero(gpu)?;
        }
        let acc = acc_for(
            a.bits(),
            b.bits(),
            a.cols() as u64,
            out.bits(),
            overflow.code(),
        );
        let name = self.kernel_name(a, b, out.bits(), overflow);
        let params = GemvParams {
            a: a.packed_ref(),
            b: b.packed_ref(),
            c,
            overflow: overflow.code(),
            acc: acc_code(acc),
            slices: 1,
            flags: 0,
            xp: DevPtrMut::null(),
            xp_len: 0,
            prep: 0,
        };
        if name == "cmv_beam_gemv_any" {
            // SAFETY: a, b and out hold the words their geometries imply (DeviceBeamMatrix
            // holds a canonical PackedMatrix's words, DeviceBeamOut was allocated for its
            // own); A's columns equal B's rows, B has at most 16 columns, out is A.rows x
            // B.cols and was zeroed unless naive; acc is acc_for of these operands.
            unsafe { self.launch_any(&params) }
        } else {
            // SAFETY: as above, and kernel_name chose this fast kernel: A is nogaps of
            // a.bits() (at most 8 bits for the tensor-core kernels, 32 otherwise), B has one
            // column, the accumulator is U32, and the kernel's vector, fragments or rings fit
            // in the shared memory a block may have.
            unsafe { self.launch_fast(gpu, FastKernel::of_name(name), params, self.prep_mode) }
        }
    }

    /// The name of the kernel [`BeamGemv::gemv_row`] runs for these operands and output.
    pub fn row_kernel_name(
        &self,
        a: &DeviceBeamMatrix,
        x: &DeviceBeamMatrix,
        out_bits: u32,
        overflow: Overflow,
    ) -> &'static str {
        let ad = (
            a.bits(),
            a.layout(),
            (a.rows(), a.cols()),
            a.packed_ref().row_words as usize,
        );
        let n = x.rows();
        match direct_name(ad, (x.bits(), x.layout(), n), out_bits, overflow, self.path) {
            Some(name) => name,
            None => kernel_name_with(
                ad,
                (x.bits(), n),
                (out_bits, overflow),
                (self.max_smem, self.path),
                self.stream_shape(a.bits()),
                self.ring_stages,
            ),
        }
    }

    /// Queues `out = A x^T` for 1 to 16 vectors given as the rows of an `n x k` matrix `x`
    /// (each packed like a row of `A`, not as `k` rows of `n`), wrapped or clamped to `out`'s
    /// width by `overflow`, bit-exact with [`gemv_reference`](crate::gemv_reference) of the
    /// same vectors as columns. Allocate `out` (`A.rows x n`) with
    /// [`BeamGemv::alloc_row_out`].
    ///
    /// Where `A` and `x` are `nogaps` of one width among 4, 6, 8, 12, 16, 24 and 32 bits and the
    /// sums are exact modulo 2^32, this is one launch of `cmv_beam_gemv_direct_b{bits}` (for
    /// more than one vector `..._n{2,4,8,16}`, [`gemv_row_kernel_name`]), which reads the
    /// weights and the vectors straight from global memory, the weights once for all vectors;
    /// otherwise the kernels of [`BeamGemv::gemv`] run (one vector: with the preparation
    /// kernel; several: `cmv_beam_gemv_any`).
    ///
    /// # Errors
    /// [`BeamError::GemmShape`] when `x` does not have `A.cols` columns,
    /// [`BeamError::GemvColumns`] for more than 16 vectors,
    /// [`FormatError::Shape`](cmv_format::FormatError::Shape) for an output that is not
    /// `A.rows x n`, runtime errors.
    pub fn gemv_row(
        &self,
        gpu: &Gpu,
        a: &DeviceBeamMatrix,
        x: &DeviceBeamMatrix,
        out: &mut DeviceBeamOut,
        overflow: Overflow,
    ) -> Result<(), BeamError> {
        if x.cols() != a.cols() {
            return Err(BeamError::GemmShape {
                a_rows: a.rows(),
                a_cols: a.cols(),
                b_rows: x.cols(),
                b_cols: x.rows(),
            });
        }
        if x.rows() > GEMV_MAX_COLS {
            return Err(BeamError::GemvColumns { cols: x.rows() });
        }
        if out.rows() != a.rows() || out.cols() != x.rows() {
            return Err(cmv_format::FormatError::Shape {
                format: "beam",
                rows: out.rows(),
                cols: out.cols(),
                rule: "the output of A x^T for n vectors as the rows of x must have A's rows and \
                       n columns",
            }
            .into());
        }
        let acc = acc_for(
            a.bits(),
            x.bits(),
            a.cols() as u64,
            out.bits(),
            overflow.code(),
        );
        let (c, zero) = out_target(out);
        if zero {
            out.zero(gpu)?;
        }
        let name = self.row_kernel_name(a, x, out.bits(), overflow);
        let params = GemvParams {
            a: a.packed_ref(),
            b: x.packed_ref(),
            c,
            overflow: overflow.code(),
            acc: acc_code(acc),
            slices: 1,
            flags: FLAG_B_TRANSPOSED,
            xp: DevPtrMut::null(),
            xp_len: 0,
            prep: 0,
        };
        // SAFETY (every branch): a, x and out hold the words their geometries imply
        // (DeviceBeamMatrix holds a canonical PackedMatrix's words, DeviceBeamOut was
        // allocated for its own); x is n x A.cols (n <= 16), given with FLAG_B_TRANSPOSED; out
        // is A.rows x n, zeroed where out_target said so; acc is acc_for of these operands; the
        // kernel name came from row_kernel_name's rules for exactly these operands.
        if name.starts_with("cmv_beam_gemv_direct_b") {
            // SAFETY: as above; direct_name checked: A and x nogaps of one direct width (so
            // each vector has A.row_words words), 1 to 16 vectors, acc U32; `zero` is whether
            // out was zeroed first.
            unsafe { self.launch_direct(params, zero) }
        } else if name == "cmv_beam_gemv_any" {
            // SAFETY: as above.
            unsafe { self.launch_any(&params) }
        } else {
            // SAFETY: as above, and kernel_name_with chose this fast kernel for A and one
            // vector of x's width (what it checks for gemv); the preparation kernel reads x
            // transposed (FLAG_B_TRANSPOSED); the fused preparations do not, so never them.
            unsafe { self.launch_fast(gpu, FastKernel::of_name(name), params, GemvPrep::Kernel) }
        }
    }

    /// An output for [`BeamGemv::gemv_row`] of `A` by the `n x k` vectors `x`: `A.rows x n`,
    /// `width` chosen from both operands' statistics (`x`'s as the columns it stands for).
    ///
    /// # Errors
    /// Runtime errors.
    pub fn alloc_row_out(
        gpu: &Gpu,
        a: &DeviceBeamMatrix,
        x: &DeviceBeamMatrix,
        width: crate::OutputWidth,
        layout: Layout,
    ) -> Result<DeviceBeamOut, BeamError> {
        let bits = crate::output_bits_from(a.stats(), &x.stats().transposed(), width);
        DeviceBeamOut::alloc(gpu, a.rows(), x.rows(), bits, layout)
    }

    /// Whether [`BeamGemv::gemv_row`] launches the product of `a` by the vectors `x` into `out`
    /// with programmatic dependent launch ([`BeamGemv::with_pdl`]).
    pub fn row_launch_is_programmatic(
        &self,
        a: &DeviceBeamMatrix,
        x: &DeviceBeamMatrix,
        out: &DeviceBeamOut,
        overflow: Overflow,
    ) -> bool {
        let name = self.row_kernel_name(a, x, out.bits(), overflow);
        let (r, n) = (a.packed_ref(), u32::try_from(x.rows()).unwrap_or(u32::MAX));
        let bits = a.bits();
        let plan = self.direct_split_of(r.rows, r.row_words, bits, direct_slots(n));
        name.starts_with("cmv_beam_gemv_direct_b")
            && self.direct_is_programmatic(bits, n, zeroed(out), plan)
    }

    /// The direct kernel's slices, warps per block and grid for `rows` rows of `row_words`
    /// words of `bits` and `nb` vector slots: [`direct_split`]'s slices, or the forced count;
    /// with one slice [`direct_block_warps`] (or the forced count) warps per block, else
    /// `DIRECT_WARPS`.
    fn direct_split_of(&self, rows: u32, row_words: u32, bits: u32, nb: u32) -> DirectPlan {
        let slices = match self.direct_slices {
            Some(s) => s,
            None => direct_split(rows, row_words, bits, nb, self.split_short).0,
        };
        let warps = if slices == 1 {
            self.direct_warps
                .unwrap_or_else(|| direct_block_warps(rows, bits, nb, 1, self.sm_count))
        } else {
            DIRECT_WARPS
        };
        DirectPlan {
            slices,
            warps,
            grid: direct_grid_of(rows, bits, nb, slices, warps),
        }
    }

    /// Whether a direct product of `n` vectors by `bits`-bit weights (a direct width), into an
    /// output `zero`ed first or not, launched with `slices` and `grid`, is launched
    /// programmatically: [`direct_programmatic`], the kernel loaded, and its grid one full
    /// wave ([`direct_full_wave`]).
    fn direct_is_programmatic(&self, bits: u32, n: u32, zero: bool, plan: DirectPlan) -> bool {
        let Some(w) = direct_index(bits) else {
            return false;
        };
        if !matches!(self.direct_pdl.get(w), Some(Some(_))) || !direct_programmatic(bits, n, zero) {
            return false;
        }
        let r = &self.direct_pdl_resident[w];
        let resident = match plan.warps {
            7 => r[4],
            6 => r[5],
            _ => r[plan.slices.trailing_zeros() as usize & 3],
        };
        direct_full_wave(plan.grid, resident, self.sm_count)
    }

    /// Launches the direct kernel of `p.a.bits` for `p.b.rows` vectors into an output zeroed
    /// first (`zero`) or not: the `sm_90a` one with programmatic dependent launch where
    /// `direct_is_programmatic` says so.
    ///
    /// # Safety
    /// As [`BeamGemv::launch_any`], and `A` and `B` (`n x A.cols`, `n` in 1..=16,
    /// `FLAG_B_TRANSPOSED`) are `nogaps` of one direct width, `p.acc` is `ACC_U32`; `zero`
    /// tells whether the output was zeroed before this launch.
    unsafe fn launch_direct(&self, mut p: GemvParams, zero: bool) -> Result<(), BeamError> {
        let (bits, n) = (p.a.bits, p.b.rows);
        let Some(i) = direct_index(bits) else {
            return Err(BeamError::Kernel {
                kernel: "cmv_beam_gemv_direct",
                reason: format!("no direct kernel for {bits}-bit weights"),
            });
        };
        let nb = direct_slots(n);
        let plan = self.direct_split_of(p.a.rows, p.a.row_words, bits, nb);
        p.slices = plan.slices;
        let cfg = LaunchConfig {
            grid_dim: (plan.grid, 1, 1),
            block_dim: (plan.warps * 32, 1, 1),
            shared_mem_bytes: direct_smem_bytes(plan.slices, bits, nb),
        };
        if self.direct_is_programmatic(bits, n, zero, plan)
            && let Some(Some(k)) = self.direct_pdl.get(i)
        {
            // SAFETY: as below, for the same kernel built for sm_90a; it runs
            // griddepcontrol.wait before it reads the vector or writes anything, and reads
            // nothing else an earlier kernel may write (the weights only before the wait).
            unsafe { k.launch_programmatic(&self.stream, cfg, &p)? };
            return Ok(());
        }
        let i = direct_slot_index(n) * DIRECT_WIDTHS.len() + i;
        // SAFETY: forwarded from the caller; the kernel for these bits and at least n vector
        // slots; at most DIRECT_THREADS threads, a multiple of the slices in warps (one slice
        // below DIRECT_WARPS), the grid of direct_grid_of for those (every row covered), the
        // shared memory the slices need.
        unsafe { self.direct[i].launch(&self.stream, cfg, &p)? };
        Ok(())
    }

    /// Launches `cmv_beam_gemv_any`.
    ///
    /// # Safety
    /// `p` describes live device buffers of the words their geometries imply, with the shapes
    /// of a GEMV (`A` is `m x k`, `B` is `k x n` or, with `FLAG_B_TRANSPOSED`, `n x k`, `n` in
    /// 1..=16, `C` is `m x n` or `n x m` with `FLAG_OUT_TRANSPOSED`), `C` zeroed unless naive,
    /// and `p.acc` at least as wide as `acc_for` of the operands.
    unsafe fn launch_any(&self, p: &GemvParams) -> Result<(), BeamError> {
        let warps = ANY_BLOCK_THREADS / 32;
        let blocks = p.a.rows.div_ceil(warps).clamp(1, self.sm_count.max(1) * 64);
        let cfg = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (ANY_BLOCK_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: forwarded from the caller; the kernel takes GemvParams, whole warps, any
        // grid (it strides over the rows), no shared memory.
        unsafe { self.any.launch(&self.stream, cfg, p)? };
        Ok(())
    }

    /// Launches `cmv_beam_gemv_prep`, then the fast kernel `which` of the weights' width with
    /// its split and grid, on `gpu`'s stream (the kernels' own).
    ///
    /// # Safety
    /// As [`BeamGemv::launch_any`], and `A` is `nogaps` of `bits = p.a.bits` (at most 8 for
    /// the tensor-core kernels, 32 otherwise), `B` has one column, `p.acc` is `ACC_U32`.
    unsafe fn launch_fast(
        &self,
        gpu: &Gpu,
        which: FastKernel,
        mut p: GemvParams,
        prep_mode: GemvPrep,
    ) -> Result<(), BeamError> {
        let bits = p.a.bits;
        let b = bits as usize - 1;
        let planes = vector_planes(p.b.bits);
        let (kernel, words, extra, smem, threads) = match which {
            FastKernel::Stream => {
                let (shape, want) = self.stream_shape(bits);
                p.slices = shape.code();
                let fit = stream_warps(bits, shape, (p.a.cols, planes), want, self.max_smem);
                let Some(warps) = fit else {
                    return Err(BeamError::Kernel {
                        kernel: STREAM_NAMES[b],
                        reason: format!(
                            "its rings and a vector of {} columns need more than the {} bytes \
                             of shared memory a block may have; use GemvPath::CudaCores",
                            p.a.cols, self.max_smem
                        ),
                    });
                };
                (
                    &self.stream_k[b],
                    frag_words_planes(p.a.cols, planes),
                    stream_extra_words(p.a.rows),
                    stream_smem_bytes(bits, shape, warps, p.a.cols, planes),
                    32 * warps,
                )
            }
            FastKernel::Mma => (
                &self.mma[b],
                frag_words(p.a.cols),
                0,
                mma_smem_bytes(p.a.cols),
                BLOCK_THREADS,
            ),
            FastKernel::Nogaps => (
                &self.nogaps[b],
                perm_slots(bits, p.a.row_words),
                0,
                nogaps_smem_bytes(bits, p.a.row_words),
                BLOCK_THREADS,
            ),
            FastKernel::Ring => (
                &self.ring[b],
                perm_slots(bits, p.a.row_words),
                0,
                ring_smem_bytes(bits, p.a.row_words, self.ring_stages(bits, p.a.row_words)),
                BLOCK_THREADS,
            ),
        };
        let smem = u32::try_from(smem).unwrap_or(u32::MAX);
        let mut cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: smem,
        };
        // Raises the kernel's shared-memory limit above 48 KiB before the occupancy query.
        kernel.check_config(&cfg)?;
        let per_sm = kernel.max_active_blocks_per_sm(threads, smem)?.max(1);
        let resident = per_sm * self.sm_count;
        let (slices, grid) = match which {
            // Every resident block, each warp an equal run of units; `slices` carries the
            // shape.
            FastKernel::Stream => (p.slices, resident),
            FastKernel::Mma => mma_split(p.a.rows, segments(p.a.cols), resident),
            FastKernel::Nogaps => nogaps_split(p.a.rows, p.a.row_words, bits, resident),
            FastKernel::Ring => {
                let (slices, grid) = ring_split(p.a.rows, p.a.row_words, resident);
                (
                    ring_code(slices, self.ring_stages(bits, p.a.row_words)),
                    grid,
                )
            }
        };
        p.slices = slices;
        cfg.grid_dim.0 = grid.max(1);
        p.xp_len = words;
        p.prep = match which {
            FastKernel::Stream => PREP_STREAM,
            FastKernel::Mma => PREP_MMA,
            FastKernel::Nogaps | FastKernel::Ring => PREP_PERM,
        };
        if prep_mode == GemvPrep::Fused && which == FastKernel::Stream {
            // The kernel builds the fragments from B and finds its sums and tile counters
            // zero in a workspace of their own: allocated zeroed, and every launch leaves them
            // zero again (the warp that completes a tile clears its sums and counter).
            p.flags |= FLAG_FUSED_PREP;
            let mut sw = self.stream_work.lock().unwrap_or_else(|e| e.into_inner());
            if sw.as_ref().is_none_or(|w| w.len() < extra as usize) {
                *sw = Some(gpu.alloc_zeros::<u32>(extra as usize)?);
            }
            let Some(buf) = sw.as_mut() else {
                unreachable!("the workspace was allocated above")
            };
            p.xp = dev_ptr_mut(buf);
            // SAFETY: forwarded from the caller; with FLAG_FUSED_PREP the streaming kernel
            // reads xp as `extra` u32 of zeroed sums and counters (this buffer, zero after
            // every launch that used it, all on this stream) and builds the fragments from
            // B; its warps, grid and shared memory as computed above.
            unsafe { kernel.launch(&self.stream, cfg, &p)? };
            return Ok(());
        }
        if prep_mode == GemvPrep::Fused {
            p.flags |= FLAG_FUSED_PREP;
            // SAFETY: forwarded from the caller; with FLAG_FUSED_PREP the kernel builds the
            // vector from B itself (xp is not read); WARPS_PER_BLOCK warps per block, slices
            // a power of two dividing it, the kernel's shared memory.
            unsafe { kernel.launch(&self.stream, cfg, &p)? };
            return Ok(());
        }
        let total = words as usize + extra as usize;
        let mut work = self.work.lock().unwrap_or_else(|e| e.into_inner());
        if work.as_ref().is_none_or(|w| w.len() < total) {
            *work = Some(gpu.alloc_zeros::<u32>(total)?);
        }
        let Some(buf) = work.as_mut() else {
            unreachable!("the workspace was allocated above")
        };
        p.xp = dev_ptr_mut(buf);
        let prep_cfg = LaunchConfig {
            grid_dim: (
                (words + extra)
                    .div_ceil(256)
                    .clamp(1, self.sm_count.max(1) * 8),
                1,
                1,
            ),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: forwarded from the caller (B has one column of A.cols elements); the
        // workspace holds at least `words + extra` u32, which is what `p.prep` asks for.
        unsafe { self.prep.launch(&self.stream, prep_cfg, &p)? };
        // SAFETY: forwarded from the caller; the prep launch above wrote the workspace on the
        // same stream; WARPS_PER_BLOCK warps per block, slices a power of two dividing it
        // (the split functions), the kernel's shared memory.
        unsafe { kernel.launch(&self.stream, cfg, &p)? };
        Ok(())
    }
}

/// The fast kernels [`BeamGemv::launch_fast`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FastKernel {
    /// `cmv_beam_gemv_stream_b{bits}`.
    Stream,
    /// `cmv_beam_gemv_mma_b{bits}`.
    Mma,
    /// `cmv_beam_gemv_nogaps_b{bits}`.
    Nogaps,
    /// `cmv_beam_gemv_ring_b{bits}`.
    Ring,
}

impl FastKernel {
    /// The family of the fast kernel called `name` (a name the kernel choice gave, not
    /// `cmv_beam_gemv_any` or a direct kernel).
    fn of_name(name: &str) -> FastKernel {
        if name.starts_with("cmv_beam_gemv_stream_") {
            FastKernel::Stream
        } else if name.starts_with("cmv_beam_gemv_mma_") {
            FastKernel::Mma
        } else if name.starts_with("cmv_beam_gemv_ring_") {
            FastKernel::Ring
        } else {
            FastKernel::Nogaps
        }
    }
}

/// `x` (`batch` vectors of `len` values, `x[b * len + i]`) as a naive `batch x len` matrix of
/// 64-bit elements.
fn naive_ref(x: &CudaSlice<u64>, batch: u32, len: u32) -> PackedRef {
    PackedRef {
        words: dev_ptr(x),
        rows: batch,
        cols: len,
        bits: 64,
        layout: layout::NAIVE,
        row_words: len,
        pad: 0,
    }
}

impl DeviceGemv for PackedMatrix {
    const MAX_GPU_BATCH: usize = MAX_BATCH as usize;
    type Device = DeviceBeamMatrix;
    type Kernels = BeamGemv;
    type DeviceOut = CudaSlice<u64>;

    fn load(gpu: &Gpu) -> Result<BeamGemv, BeamError> {
        BeamGemv::new(gpu)
    }

    fn upload(&self, gpu: &Gpu) -> Result<DeviceBeamMatrix, BeamError> {
        DeviceBeamMatrix::upload(gpu, self)
    }

    fn clone_device(device: &DeviceBeamMatrix) -> Result<DeviceBeamMatrix, BeamError> {
        device.try_clone()
    }

    fn bytes_read(device: &DeviceBeamMatrix) -> usize {
        device.bytes()
    }

    fn alloc_out(gpu: &Gpu, rows: usize, batch: usize) -> Result<CudaSlice<u64>, BeamError> {
        Ok(gpu.alloc_zeros(batch_len(batch, rows)?.max(1))?)
    }

    /// `y[b * rows + r] = (W x_b)[r] mod 2^64` (`x[b * cols + c]`), wrapping `u64` sums.
    fn gemv(
        kernels: &BeamGemv,
        device: &DeviceBeamMatrix,
        x: &CudaSlice<u64>,
        out: &mut CudaSlice<u64>,
        batch: usize,
    ) -> Result<(), BeamError> {
        check_batch(batch, Self::MAX_GPU_BATCH)?;
        let (rows, cols) = (device.rows(), device.cols());
        check_len_at_least("input vectors", x.len(), batch_len(batch, cols)?)?;
        check_len_at_least("outputs", out.len(), batch_len(batch, rows)?)?;
        // rows and cols fit in u32 (DeviceBeamMatrix checked them); batch <= 16.
        let (b32, r32, c32) = (batch as u32, rows as u32, cols as u32);
        let params = GemvParams {
            a: device.packed_ref(),
            b: naive_ref(x, b32, c32),
            c: PackedOut {
                words: dev_ptr_mut(out),
                rows: b32,
                cols: r32,
                bits: 64,
                layout: layout::NAIVE,
                row_words: r32,
                pad: 0,
            },
            overflow: layout::OVF,
            acc: ACC_U64,
            slices: 1,
            flags: FLAG_B_TRANSPOSED | FLAG_OUT_TRANSPOSED,
            xp: DevPtrMut::null(),
            xp_len: 0,
            prep: 0,
        };
        // SAFETY: A holds a canonical matrix's words; x holds batch * cols u64 (the naive
        // batch x cols B^T) and out batch * rows u64 (the naive batch x rows C^T, written
        // with plain stores, so not zeroed), both checked above; batch is in 1..=16; wrapping
        // u64 sums with a 64-bit output are exactly (W x) mod 2^64.
        unsafe { kernels.launch_any(&params) }
    }

    fn check(gpu: &Gpu, out: &CudaSlice<u64>, want: &[u64]) -> Result<Check, BeamError> {
        let got = gpu.download(out)?;
        Ok(Check::exact(
            got.len() >= want.len() && got[..want.len()] == *want,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sm90_module_defines_the_programmatic_direct_kernels() {
        let run = "run `cargo xtask ptx`";
        assert!(PTX_SM90.ptx.contains(".target sm_90a"));
        for (i, bits) in DIRECT_WIDTHS.iter().enumerate() {
            let name = DIRECT_NAMES[0][i];
            let base = PTX
                .entry(name)
                .unwrap_or_else(|| panic!("{name} missing: {run}"));
            assert!(!base.contains("griddepcontrol"), "{name} (sm_80 module)");
            match PTX_SM90.entry(name) {
                Some(k) => {
                    assert!(
                        DIRECT_PDL_WIDTHS.contains(bits),
                        "{name} in the sm90 module"
                    );
                    assert!(k.contains("griddepcontrol.launch_dependents;"), "{name}");
                    assert!(k.contains("griddepcontrol.wait;"), "{name}");
                    // The vector comes by coherent loads: 16 bytes where the rows are
                    // 16-byte aligned (widths dividing 64), words otherwise; the weights by
                    // non-coherent ones (16 bytes past L1, or words), never the vector's
                    // non-coherent 16-byte load of the sm_80 kernel.
                    assert!(k.contains("ld.global.u64"), "{name}: no coherent word load");
                    if 64 % bits == 0 {
                        assert!(k.contains("ld.global.v4.u32"), "{name}: no coherent load");
                        assert!(k.contains("ld.global.nc.L1::no_allocate.v4.u32"), "{name}");
                        assert!(base.contains("ld.global.nc.v4.u32"), "{name} (sm_80)");
                    }
                    assert!(
                        !k.contains("ld.global.nc.v4.u32"),
                        "{name}: non-coherent vector"
                    );
                }
                None => assert!(!DIRECT_PDL_WIDTHS.contains(bits), "{name} missing: {run}"),
            }
        }
        assert!(PTX_SM90.entry("cmv_beam_gemv_direct_b4_n2").is_none());
    }

    fn name(bits: u32, cols: usize, n: usize, path: GemvPath) -> &'static str {
        name_rc(bits, (4096, cols), n, path)
    }

    fn name_rc(bits: u32, (rows, cols): (usize, usize), n: usize, path: GemvPath) -> &'static str {
        let rw = layout::row_words(cols as u64, bits, layout::NOGAPS) as usize;
        gemv_kernel_name(
            (bits, Layout::Nogaps, (rows, cols), rw),
            (bits, n),
            bits,
            Overflow::Ovf,
            (227 * 1024, path),
        )
    }

    #[test]
    fn one_column_outputs_in_own_words_pack_as_their_naive_words() {
        // What `out_target` relies on: the canonical packing of a rows x 1 matrix in nogaps or
        // slabs is one word per row holding the value, as the naive matrix stores it.
        for bits in [1u32, 3, 4, 8, 12, 17, 31, 32, 33, 63, 64] {
            let top = if bits == 64 {
                u64::MAX
            } else {
                (1u64 << bits) - 1
            };
            let vals: Vec<u64> = (0..37u64)
                .map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 3) & top)
                .chain([top, 0])
                .collect();
            for layout in [Layout::Nogaps, Layout::Slabs, Layout::Tight, Layout::Naive] {
                let m = PackedMatrix::pack(&vals, vals.len(), 1, bits, layout).unwrap();
                let same = m.words() == vals.as_slice();
                if own_words(layout, 1) {
                    assert!(same, "{bits} bits, {}", layout.name());
                }
                assert!(!own_words(layout, 2));
            }
        }
        assert!(!own_words(Layout::Tight, 1) && !own_words(Layout::Naive, 1));
    }

    #[test]
    fn a_row_vector_of_the_weights_width_runs_the_direct_kernel() {
        let row_name = |bits: u32, x: (u32, Layout), out_bits: u32, ovf: Overflow, path| {
            let rw = layout::row_words(4096, bits, layout::NOGAPS) as usize;
            gemv_row_kernel_name(
                (bits, Layout::Nogaps, (14336, 4096), rw),
                (x.0, x.1, 1),
                out_bits,
                ovf,
                (227 * 1024, path),
            )
        };
        for (i, bits) in DIRECT_WIDTHS.into_iter().enumerate() {
            let auto = row_name(
                bits,
                (bits, Layout::Nogaps),
                bits,
                Overflow::Ovf,
                GemvPath::Auto,
            );
            assert_eq!(auto, DIRECT_NAMES[0][i]);
            for (n, k) in [(2, 1), (3, 2), (4, 2), (5, 3), (8, 3), (9, 4), (16, 4)] {
                let rw = layout::row_words(4096, bits, layout::NOGAPS) as usize;
                let name = gemv_row_kernel_name(
                    (bits, Layout::Nogaps, (14336, 4096), rw),
                    (bits, Layout::Nogaps, n),
                    bits,
                    Overflow::Ovf,
                    (227 * 1024, GemvPath::Auto),
                );
                assert_eq!(name, DIRECT_NAMES[k][i], "{n} vectors");
            }
            // Other paths, another width or layout of x, or sums that need more than 32 bits
            // take the kernels of a column vector.
            let column = |x_bits, path| name_rc_x(bits, x_bits, (14336, 4096), path);
            assert_eq!(
                row_name(
                    bits,
                    (bits, Layout::Nogaps),
                    bits,
                    Overflow::Ovf,
                    GemvPath::CudaCores
                ),
                column(bits, GemvPath::CudaCores)
            );
            assert_eq!(
                row_name(
                    bits,
                    (bits, Layout::Tight),
                    bits,
                    Overflow::Ovf,
                    GemvPath::Auto
                ),
                column(bits, GemvPath::Auto)
            );
            let narrower = bits - 1;
            assert_eq!(
                row_name(
                    bits,
                    (narrower, Layout::Nogaps),
                    bits,
                    Overflow::Ovf,
                    GemvPath::Auto
                ),
                column(narrower, GemvPath::Auto)
            );
            // A 64-bit output of sums that may pass 2^32 (16 bits and more over 4096 columns).
            if bits >= 16 {
                assert_eq!(
                    row_name(
                        bits,
                        (bits, Layout::Nogaps),
                        64,
                        Overflow::Ovf,
                        GemvPath::Auto
                    ),
                    "cmv_beam_gemv_any"
                );
            }
        }
        for bits in [1, 2, 3, 5, 7, 9, 20, 31] {
            let n = row_name(
                bits,
                (bits, Layout::Nogaps),
                bits,
                Overflow::Ovf,
                GemvPath::Auto,
            );
            assert!(!n.contains("direct"), "{bits} bits ran {n}");
        }
    }

    fn name_rc_x(
        bits: u32,
        x_bits: u32,
        (rows, cols): (usize, usize),
        path: GemvPath,
    ) -> &'static str {
        let rw = layout::row_words(cols as u64, bits, layout::NOGAPS) as usize;
        gemv_kernel_name(
            (bits, Layout::Nogaps, (rows, cols), rw),
            (x_bits, 1),
            bits,
            Overflow::Ovf,
            (227 * 1024, path),
        )
    }

    #[test]
    fn the_kernel_follows_width_path_and_size() {
        // The default: the streaming kernel at 3, 6 and 7 bits from 2^25 weights, and at 4 and
        // 8 bits from 2^27; the first tensor-core kernel at 1, 2 and 5 bits and on smaller
        // matrices at 3, 6 and 7; the CUDA-core kernel at 4 and 8 bits on smaller matrices.
        for bits in [3, 6, 7] {
            assert_eq!(
                name_rc(bits, (11008, 4096), 1, GemvPath::Auto),
                STREAM_NAMES[bits as usize - 1]
            );
            assert_eq!(
                name_rc(bits, (4096, 4096), 1, GemvPath::Auto),
                MMA_NAMES[bits as usize - 1]
            );
        }
        for bits in [1, 2, 5] {
            assert_eq!(
                name_rc(bits, (28672, 8192), 1, GemvPath::Auto),
                MMA_NAMES[bits as usize - 1]
            );
        }
        for bits in [4, 8] {
            assert_eq!(
                name_rc(bits, (28672, 8192), 1, GemvPath::Auto),
                STREAM_NAMES[bits as usize - 1]
            );
            assert_eq!(
                name_rc(bits, (14336, 4096), 1, GemvPath::Auto),
                NOGAPS_NAMES[bits as usize - 1]
            );
        }
        for bits in 1..=8 {
            assert_eq!(
                name(bits, 4096, 1, GemvPath::Stream),
                STREAM_NAMES[bits as usize - 1]
            );
        }
        for bits in [1, 2, 3, 5, 6, 7] {
            assert_eq!(
                name(bits, 4096, 1, GemvPath::TensorCores),
                MMA_NAMES[bits as usize - 1]
            );
        }
        assert_eq!(
            name(4, 4096, 1, GemvPath::CudaCores),
            "cmv_beam_gemv_nogaps_b4"
        );
        // An 8-bit vector needs one byte plane: 40000 columns fit the streaming kernel.
        assert_eq!(
            name(3, 40_000, 1, GemvPath::Stream),
            "cmv_beam_gemv_stream_b3"
        );
        // Past its shared memory (rings + fragments) and every other fast kernel's.
        assert_eq!(name(3, 200_000, 1, GemvPath::Auto), "cmv_beam_gemv_any");
        assert_eq!(
            name(4, 4096, 1, GemvPath::TensorCores),
            "cmv_beam_gemv_mma_b4"
        );
        assert_eq!(
            name(8, 4096, 1, GemvPath::TensorCores),
            "cmv_beam_gemv_mma_b8"
        );
        assert_eq!(
            name(4, 4096, 1, GemvPath::CudaCores),
            "cmv_beam_gemv_nogaps_b4"
        );
        assert_eq!(name(4, 4096, 1, GemvPath::Any), "cmv_beam_gemv_any");
        // The ring kernel by default at widths that do not divide 64 from 2^25 weights, and at
        // those that do where the register kernel's vector leaves one block per SM.
        assert_eq!(
            name_rc(12, (28672, 8192), 1, GemvPath::Auto),
            RING_NAMES[11]
        );
        assert_eq!(
            name_rc(24, (14336, 4096), 1, GemvPath::Auto),
            RING_NAMES[23]
        );
        assert_eq!(
            name_rc(12, (4096, 4096), 1, GemvPath::Auto),
            NOGAPS_NAMES[11]
        );
        assert_eq!(
            name_rc(16, (8192, 28672), 1, GemvPath::Auto),
            RING_NAMES[15]
        );
        assert_eq!(
            name_rc(16, (28672, 8192), 1, GemvPath::Auto),
            NOGAPS_NAMES[15]
        );
        assert_eq!(
            name_rc(8, (8192, 28672), 1, GemvPath::Auto),
            STREAM_NAMES[7]
        );
        assert_eq!(
            name_rc(12, (28672, 8192), 1, GemvPath::CudaCores),
            NOGAPS_NAMES[11]
        );
        // The ring kernel on request at every width up to 32 bits; where its vector and rings
        // pass the shared memory, the register kernel (whose vector alone fits).
        for bits in [1, 4, 12, 24, 32] {
            assert_eq!(
                name(bits, 4096, 1, GemvPath::CudaRing),
                RING_NAMES[bits as usize - 1]
            );
        }
        let rw = layout::row_words(40_000, 24, layout::NOGAPS) as u32;
        assert!(ring_smem_bytes(24, rw, RING_MIN_STAGES) > 227 * 1024);
        assert!(nogaps_smem_bytes(24, rw) <= 227 * 1024);
        assert_eq!(
            name(24, 40_000, 1, GemvPath::CudaRing),
            "cmv_beam_gemv_nogaps_b24"
        );
        assert_eq!(
            name(16, 4096, 1, GemvPath::Auto),
            "cmv_beam_gemv_nogaps_b16"
        );
        assert_eq!(name(33, 4096, 1, GemvPath::Auto), "cmv_beam_gemv_any");
        // Two vectors, or a vector too long for shared memory: the general kernel.
        assert_eq!(name(4, 4096, 2, GemvPath::Auto), "cmv_beam_gemv_any");
        assert_eq!(name(4, 70_000, 1, GemvPath::CudaCores), "cmv_beam_gemv_any");
        // A 4-bit vector of 70000 columns: one byte plane (69 KiB) and 8 rings (128 KiB).
        assert_eq!(
            name(4, 70_000, 1, GemvPath::Stream),
            "cmv_beam_gemv_stream_b4"
        );
        // 50000 columns: the fragments (196 KiB) and the permuted vector (198 KiB) fit.
        assert_eq!(
            name(8, 50_000, 1, GemvPath::TensorCores),
            "cmv_beam_gemv_mma_b8"
        );
        assert_eq!(
            name(8, 50_000, 1, GemvPath::CudaCores),
            "cmv_beam_gemv_nogaps_b8"
        );
        for p in GemvPath::ALL {
            assert_eq!(GemvPath::parse(p.name()), Some(p));
        }
        for p in GemvPrep::ALL {
            assert_eq!(GemvPrep::parse(p.name()), Some(p));
        }
        assert_eq!(GemvPath::parse("gpu"), None);
    }
}
