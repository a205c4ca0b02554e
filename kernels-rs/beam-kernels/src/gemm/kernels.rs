//! The CUDA-core GEMM entry points (NVPTX only). The geometry and arithmetic they share with
//! the host are in the parent module.

use super::{A_PAD, BK, Col, ColStep, GUIDE_TILE, Mode, RowGeometry, THREADS, locate};
use crate::GemmParams;
use crate::access::store;
use crate::layout::{NOGAPS, SLABS, TIGHT, extract, finish, sat_mul};
use cmv_device::{
    U32x4, block_idx_x, block_idx_y, dyn_smem, dyn_smem_addr, ld_nc_u64, lds_v4, sync_threads,
    thread_idx_x,
};

/// The arithmetic of a [`Mode`]: operand and accumulator types, how an operand is kept in
/// shared memory (32-bit planes), the multiply-add and the result.
trait Arith {
    /// 32-bit planes per operand in shared memory ([`Mode::planes`]).
    const PLANES: usize;
    type Op: Copy;
    type Acc: Copy;
    const OP0: Self::Op;
    const ACC0: Self::Acc;
    /// The operand `v` as its planes (the first [`Arith::PLANES`] words are stored).
    fn encode(v: u64) -> [u32; 4];
    /// The operand from its planes (words past [`Arith::PLANES`] are 0).
    fn op(w: [u32; 4]) -> Self::Op;
    /// `acc + a * b`, as [`Mode::mac`].
    fn mac(acc: Self::Acc, a: Self::Op, b: Self::Op) -> Self::Acc;
    /// The sum for [`finish`]: exact modulo 2^64 for the wrapping modes, clamped at
    /// `2^64 - 1` for the saturating ones.
    fn sum(acc: Self::Acc) -> u64;
}

/// The planes of a 32-bit operand.
#[inline(always)]
fn narrow(v: u64) -> [u32; 4] {
    [v as u32, 0, 0, 0]
}

/// The planes of a 64-bit operand: low and high halves.
#[inline(always)]
fn wide(v: u64) -> [u32; 4] {
    [v as u32, (v >> 32) as u32, 0, 0]
}

/// [`Mode::U32`].
struct U32;
impl Arith for U32 {
    const PLANES: usize = 1;
    type Op = u32;
    type Acc = u32;
    const OP0: u32 = 0;
    const ACC0: u32 = 0;
    #[inline(always)]
    fn encode(v: u64) -> [u32; 4] {
        narrow(v)
    }
    #[inline(always)]
    fn op(w: [u32; 4]) -> u32 {
        w[0]
    }
    #[inline(always)]
    fn mac(acc: u32, a: u32, b: u32) -> u32 {
        acc.wrapping_add(a.wrapping_mul(b))
    }
    #[inline(always)]
    fn sum(acc: u32) -> u64 {
        acc as u64
    }
}

/// [`Mode::U64n`].
struct U64n;
impl Arith for U64n {
    const PLANES: usize = 1;
    type Op = u32;
    type Acc = u64;
    const OP0: u32 = 0;
    const ACC0: u64 = 0;
    #[inline(always)]
    fn encode(v: u64) -> [u32; 4] {
        narrow(v)
    }
    #[inline(always)]
    fn op(w: [u32; 4]) -> u32 {
        w[0]
    }
    #[inline(always)]
    fn mac(acc: u64, a: u32, b: u32) -> u64 {
        acc.wrapping_add(a as u64 * b as u64)
    }
    #[inline(always)]
    fn sum(acc: u64) -> u64 {
        acc
    }
}

/// [`Mode::U64`].
struct U64;
impl Arith for U64 {
    const PLANES: usize = 2;
    type Op = u64;
    type Acc = u64;
    const OP0: u64 = 0;
    const ACC0: u64 = 0;
    #[inline(always)]
    fn encode(v: u64) -> [u32; 4] {
        wide(v)
    }
    #[inline(always)]
    fn op(w: [u32; 4]) -> u64 {
        w[0] as u64 | (w[1] as u64) << 32
    }
    #[inline(always)]
    fn mac(acc: u64, a: u64, b: u64) -> u64 {
        acc.wrapping_add(a.wrapping_mul(b))
    }
    #[inline(always)]
    fn sum(acc: u64) -> u64 {
        acc
    }
}

/// [`Mode::SatU64n`].
struct SatU64n;
impl Arith for SatU64n {
    const PLANES: usize = 1;
    type Op = u32;
    type Acc = u64;
    const OP0: u32 = 0;
    const ACC0: u64 = 0;
    #[inline(always)]
    fn encode(v: u64) -> [u32; 4] {
        narrow(v)
    }
    #[inline(always)]
    fn op(w: [u32; 4]) -> u32 {
        w[0]
    }
    #[inline(always)]
    fn mac(acc: u64, a: u32, b: u32) -> u64 {
        acc.saturating_add(a as u64 * b as u64)
    }
    #[inline(always)]
    fn sum(acc: u64) -> u64 {
        acc
    }
}

/// [`Mode::SatU64`].
struct SatU64;
impl Arith for SatU64 {
    const PLANES: usize = 2;
    type Op = u64;
    type Acc = u64;
    const OP0: u64 = 0;
    const ACC0: u64 = 0;
    #[inline(always)]
    fn encode(v: u64) -> [u32; 4] {
        wide(v)
    }
    #[inline(always)]
    fn op(w: [u32; 4]) -> u64 {
        w[0] as u64 | (w[1] as u64) << 32
    }
    #[inline(always)]
    fn mac(acc: u64, a: u64, b: u64) -> u64 {
        acc.saturating_add(sat_mul(a, b))
    }
    #[inline(always)]
    fn sum(acc: u64) -> u64 {
        acc
    }
}

/// One element of a tile read from global memory and not yet cut out: its word, the next
/// word when it straddles (else 0), its shift.
#[derive(Clone, Copy)]
struct Raw {
    lo: u64,
    hi: u64,
    shift: u32,
}

const RAW0: Raw = Raw {
    lo: 0,
    hi: 0,
    shift: 0,
};

/// Reads the words of element `(row, col)` of the matrix at `words`.
///
/// # Safety
/// The element is inside the matrix, whose words are live and read-only during the kernel.
#[inline(always)]
unsafe fn fetch(words: *const u64, g: RowGeometry, row: u32, col: Col) -> Raw {
    let pl = locate(g, row, col);
    // SAFETY: the element lies in word `pl.word` (and the next when it straddles).
    unsafe {
        let p = words.add(pl.word as usize);
        let lo = ld_nc_u64(p);
        let hi = if pl.straddles { ld_nc_u64(p.add(1)) } else { 0 };
        Raw {
            lo,
            hi,
            shift: pl.shift,
        }
    }
}

/// The packed kernels' engine: `C = A x B` with `A`, `B`, `C` in layout `L` (`tight`,
/// `slabs` or `nogaps`), arithmetic `M`, `TM x TN` outputs per thread (`LA = TM / 2` and
/// `LB = TN / 2` tile elements of `A` and `B` read per thread and tile). See the module docs
/// of `gemm`.
///
/// # Safety
/// Launched by `beam-pack` with [`THREADS`] threads per block, the grid
/// [`super::grid`] for the mode's block tile, [`Mode::smem_bytes`] of dynamic shared memory;
/// `p.a`, `p.b` describe live packed matrices in layout `L` (`a.cols == b.rows`), `p.c` a
/// live zeroed output of `a.rows x b.cols` in layout `L`.
#[inline(always)]
unsafe fn packed<
    const L: u32,
    M: Arith,
    const TM: usize,
    const TN: usize,
    const LA: usize,
    const LB: usize,
>(
    p: &GemmParams,
) {
    let (a, b, c) = (&p.a, &p.b, &p.c);
    let bm = 16 * TM as u32;
    let bn = 16 * TN as u32;
    let planes = M::PLANES as u32;
    // Shared memory (32-bit words): per buffer, the A planes (`BK` rows of `bm + A_PAD`,
    // indexed [k][m]) then the B planes (`BK` rows of `bn`, indexed [k][n]).
    let a_stride = bm + A_PAD;
    let a_plane = BK * a_stride;
    let b_plane = BK * bn;
    let b_base = planes * a_plane;
    let buf_words = planes * (a_plane + b_plane);
    let smem = dyn_smem() as *mut u32;
    let smem_addr = dyn_smem_addr();

    let tid = thread_idx_x();
    let (tx, ty) = (tid % 16, tid / 16);
    let m0 = block_idx_y() * bm;
    let n0 = block_idx_x() * bn;
    let k_dim = a.cols;

    // Tile loads: A element (m0 + a_r0 + 32 j, k0 + a_kc), B element (k0 + b_r0 + b_rstep j,
    // n0 + b_nc).
    let a_kc = tid % BK;
    let a_r0 = tid / BK;
    let a_rstep = THREADS / BK;
    let b_nc = tid % bn;
    let b_r0 = tid / bn;
    let b_rstep = THREADS / bn;
    let ag = RowGeometry::new(L, a.bits, a.cols, a.row_words);
    let bg = RowGeometry::new(L, b.bits, b.cols, b.row_words);
    let a_words = a.words.as_ptr();
    let b_words = b.words.as_ptr();
    let a_step = ColStep::new(L, a.bits, BK);
    let mut a_col = Col::new(L, a.bits, a_kc);
    let mut a_c = a_kc;
    let b_c = n0 + b_nc;
    let b_col = Col::new(L, b.bits, if b_c < b.cols { b_c } else { 0 });

    let mut ra = [RAW0; LA];
    let mut rb = [RAW0; LB];
    // Reads tile `kt`'s elements into `ra`, `rb` (0 outside the matrices).
    let fetch_tile = |kt: u32, a_col: Col, a_c: u32, ra: &mut [Raw; LA], rb: &mut [Raw; LB]| {
        for (j, r) in ra.iter_mut().enumerate() {
            let row = m0 + a_r0 + a_rstep * j as u32;
            *r = if a_c < a.cols && row < a.rows {
                // SAFETY: (row, a_c) is inside A.
                unsafe { fetch(a_words, ag, row, a_col) }
            } else {
                RAW0
            };
        }
        for (j, r) in rb.iter_mut().enumerate() {
            let row = kt * BK + b_r0 + b_rstep * j as u32;
            *r = if b_c < b.cols && row < b.rows {
                // SAFETY: (row, b_c) is inside B.
                unsafe { fetch(b_words, bg, row, b_col) }
            } else {
                RAW0
            };
        }
    };
    // Cuts the elements out of `ra`, `rb` and writes them into buffer `buf`.
    let put_tile = |buf: u32, ra: &[Raw; LA], rb: &[Raw; LB]| {
        let base = buf * buf_words;
        for (j, r) in ra.iter().enumerate() {
            let w = M::encode(extract(r.lo, r.hi, r.shift, a.bits));
            let at = base + a_kc * a_stride + a_r0 + a_rstep * j as u32;
            for (q, &x) in w.iter().enumerate().take(M::PLANES) {
                // SAFETY: `at + q a_plane` lies in plane `q` of the A tile of buffer `buf`,
                // inside the `smem_bytes` the launcher gave.
                unsafe { *smem.add((at + q as u32 * a_plane) as usize) = x };
            }
        }
        for (j, r) in rb.iter().enumerate() {
            let w = M::encode(extract(r.lo, r.hi, r.shift, b.bits));
            let at = base + b_base + (b_r0 + b_rstep * j as u32) * bn + b_nc;
            for (q, &x) in w.iter().enumerate().take(M::PLANES) {
                // SAFETY: as above, in the B tile.
                unsafe { *smem.add((at + q as u32 * b_plane) as usize) = x };
            }
        }
    };

    let mut acc = [[M::ACC0; TN]; TM];
    let tiles = k_dim.div_ceil(BK);
    fetch_tile(0, a_col, a_c, &mut ra, &mut rb);
    put_tile(0, &ra, &rb);
    // SAFETY: every thread of the block reaches every barrier of this loop (the trip count
    // is uniform).
    unsafe { sync_threads() };
    for kt in 0..tiles {
        let more = kt + 1 < tiles;
        if more {
            a_col = a_col.advance(a_step);
            a_c += BK;
            fetch_tile(kt + 1, a_col, a_c, &mut ra, &mut rb);
        }
        let base = smem_addr + 4 * (kt % 2) * buf_words;
        for k in 0..BK {
            let mut av = [M::OP0; TM];
            let mut bv = [M::OP0; TN];
            let a_at = base + 4 * (k * a_stride + 4 * ty);
            let b_at = base + 4 * (b_base + k * bn + 4 * tx);
            for g in 0..TM / 4 {
                let at = a_at + 4 * 64 * g as u32;
                let mut w = [U32x4([0; 4]); 4];
                for (q, x) in w.iter_mut().enumerate().take(M::PLANES) {
                    // SAFETY: 16-byte aligned (strides and offsets are multiples of 4 words),
                    // inside plane `q` of the A tile of this buffer.
                    *x = unsafe { lds_v4(at + 4 * q as u32 * a_plane) };
                }
                for v in 0..4 {
                    av[4 * g + v] = M::op([w[0].0[v], w[1].0[v], w[2].0[v], w[3].0[v]]);
                }
            }
            for g in 0..TN / 4 {
                let at = b_at + 4 * 64 * g as u32;
                let mut w = [U32x4([0; 4]); 4];
                for (q, x) in w.iter_mut().enumerate().take(M::PLANES) {
                    // SAFETY: 16-byte aligned (strides and offsets are multiples of 4 words),
                    // inside plane `q` of the B tile of this buffer.
                    *x = unsafe { lds_v4(at + 4 * q as u32 * b_plane) };
                }
                for v in 0..4 {
                    bv[4 * g + v] = M::op([w[0].0[v], w[1].0[v], w[2].0[v], w[3].0[v]]);
                }
            }
            for i in 0..TM {
                for j in 0..TN {
                    acc[i][j] = M::mac(acc[i][j], av[i], bv[j]);
                }
            }
        }
        if more {
            put_tile((kt + 1) % 2, &ra, &rb);
        }
        // SAFETY: uniform, as above.
        unsafe { sync_threads() };
    }

    // The rows leave through `acc[0]` (shifted up one per step): a loop over the rows that
    // stays rolled indexes the accumulators with constants only, so they stay in registers.
    for i in 0..TM as u32 {
        let row_acc = acc[0];
        for ii in 0..TM - 1 {
            acc[ii] = acc[ii + 1];
        }
        let r = m0 + 4 * ty + (i % 4) + 64 * (i / 4);
        if r >= c.rows {
            continue;
        }
        for (j, &s) in row_acc.iter().enumerate() {
            let col = n0 + 4 * tx + (j as u32 % 4) + 64 * (j as u32 / 4);
            if col < c.cols {
                let sum = M::sum(s);
                // SAFETY: (r, col) is inside C, written once (by this thread); C was zeroed.
                unsafe { store(c, r, col, finish(sum, c.bits, p.overflow)) };
            }
        }
    }
}

/// The programming guide's shared-memory matrix product on the naive layout: 16 x 16 threads,
/// one output each, 16 x 16 tiles of `u64` in shared memory, 64-bit multiply-adds, wrapping
/// or (`SAT`) saturating.
///
/// # Safety
/// Launched with 256 threads per block, the grid [`super::grid`] for 16 x 16 blocks and
/// `2 * 16 * 16 * 8` bytes of dynamic shared memory; `p.a`, `p.b` live naive matrices
/// (`a.cols == b.rows`), `p.c` a live naive output of `a.rows x b.cols`.
#[inline(always)]
unsafe fn guide<const SAT: bool>(p: &GemmParams) {
    let (a, b, c) = (&p.a, &p.b, &p.c);
    let t = GUIDE_TILE;
    let tid = thread_idx_x();
    let (tx, ty) = (tid % t, tid / t);
    let row = block_idx_y() * t + ty;
    let col = block_idx_x() * t + tx;
    let a_s = dyn_smem() as *mut u64;
    // SAFETY: the second tile follows the first inside the 4 KiB of shared memory.
    let b_s = unsafe { a_s.add((t * t) as usize) };
    let (aw, bw) = (a.words.as_ptr(), b.words.as_ptr());
    let mut sum = 0u64;
    for kt in 0..a.cols.div_ceil(t) {
        let (ac, br) = (kt * t + tx, kt * t + ty);
        // SAFETY: the naive word of an element inside the matrix; slots inside the tiles.
        unsafe {
            *a_s.add((ty * t + tx) as usize) = if row < a.rows && ac < a.cols {
                ld_nc_u64(aw.add(row as usize * a.cols as usize + ac as usize))
            } else {
                0
            };
            *b_s.add((ty * t + tx) as usize) = if br < b.rows && col < b.cols {
                ld_nc_u64(bw.add(br as usize * b.cols as usize + col as usize))
            } else {
                0
            };
            sync_threads();
        }
        for k in 0..t {
            // SAFETY: inside the tiles, written before the barrier above.
            let (x, y) = unsafe {
                (
                    *a_s.add((ty * t + k) as usize),
                    *b_s.add((k * t + tx) as usize),
                )
            };
            sum = if SAT {
                sum.saturating_add(sat_mul(x, y))
            } else {
                sum.wrapping_add(x.wrapping_mul(y))
            };
        }
        // SAFETY: uniform trip count: every thread reaches the barrier.
        unsafe { sync_threads() };
    }
    if row < c.rows && col < c.cols {
        // SAFETY: inside C, written once.
        unsafe { store(c, row, col, finish(sum, c.bits, p.overflow)) };
    }
}

macro_rules! guide_entry {
    ($name:ident, $sat:literal) => {
        /// The guide (see `guide`).
        ///
        /// # Safety
        /// As `guide`: the launch `beam-pack` makes after validating the operands.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: GemmParams) {
            // SAFETY: forwarded from the launcher.
            unsafe { guide::<$sat>(&p) }
        }
    };
}

guide_entry!(cmv_beam_gemm_guide_u64, false);
guide_entry!(cmv_beam_gemm_guide_satu64, true);

macro_rules! packed_entry {
    ($name:ident, $layout:expr, $arith:ty, $mode:expr) => {
        /// A packed kernel (see `packed`).
        ///
        /// # Safety
        /// As `packed`: the launch `beam-pack` makes after validating the operands.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: GemmParams) {
            // SAFETY: forwarded from the launcher.
            unsafe {
                packed::<
                    { $layout },
                    $arith,
                    { $mode.tile().0 as usize },
                    { $mode.tile().1 as usize },
                    { $mode.tile().0 as usize / 2 },
                    { $mode.tile().1 as usize / 2 },
                >(&p)
            }
        }
    };
}

macro_rules! packed_entries {
    ($layout:expr, $u32:ident, $u64n:ident, $u64:ident, $satu64n:ident, $satu64:ident) => {
        packed_entry!($u32, $layout, U32, Mode::U32);
        packed_entry!($u64n, $layout, U64n, Mode::U64n);
        packed_entry!($u64, $layout, U64, Mode::U64);
        packed_entry!($satu64n, $layout, SatU64n, Mode::SatU64n);
        packed_entry!($satu64, $layout, SatU64, Mode::SatU64);
    };
}

packed_entries!(
    TIGHT,
    cmv_beam_gemm_tight_u32,
    cmv_beam_gemm_tight_u64n,
    cmv_beam_gemm_tight_u64,
    cmv_beam_gemm_tight_satu64n,
    cmv_beam_gemm_tight_satu64
);
packed_entries!(
    SLABS,
    cmv_beam_gemm_slabs_u32,
    cmv_beam_gemm_slabs_u64n,
    cmv_beam_gemm_slabs_u64,
    cmv_beam_gemm_slabs_satu64n,
    cmv_beam_gemm_slabs_satu64
);
packed_entries!(
    SLABS,
    cmv_beam_gemm_slabs_flex_out_u32,
    cmv_beam_gemm_slabs_flex_out_u64n,
    cmv_beam_gemm_slabs_flex_out_u64,
    cmv_beam_gemm_slabs_flex_out_satu64n,
    cmv_beam_gemm_slabs_flex_out_satu64
);
packed_entries!(
    NOGAPS,
    cmv_beam_gemm_nogaps_u32,
    cmv_beam_gemm_nogaps_u64n,
    cmv_beam_gemm_nogaps_u64,
    cmv_beam_gemm_nogaps_satu64n,
    cmv_beam_gemm_nogaps_satu64
);
packed_entries!(
    NOGAPS,
    cmv_beam_gemm_nogaps_flex_out_u32,
    cmv_beam_gemm_nogaps_flex_out_u64n,
    cmv_beam_gemm_nogaps_flex_out_u64,
    cmv_beam_gemm_nogaps_flex_out_satu64n,
    cmv_beam_gemm_nogaps_flex_out_satu64
);
