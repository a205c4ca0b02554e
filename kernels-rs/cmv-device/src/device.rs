//! GPU-only intrinsics: indices, barriers, warp collectives, loads and shared memory.

use crate::U32x4;
use core::arch::{asm, global_asm, nvptx};

// ---------------------------------------------------------------------------------------------
// Indices and barriers

/// `threadIdx.x`.
#[inline(always)]
pub fn thread_idx_x() -> u32 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { nvptx::_thread_idx_x() }
}

/// `blockIdx.x`.
#[inline(always)]
pub fn block_idx_x() -> u32 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { nvptx::_block_idx_x() }
}

/// `blockIdx.y`.
#[inline(always)]
pub fn block_idx_y() -> u32 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { nvptx::_block_idx_y() }
}

/// `blockIdx.z`.
#[inline(always)]
pub fn block_idx_z() -> u32 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { nvptx::_block_idx_z() }
}

/// `blockDim.x`.
#[inline(always)]
pub fn block_dim_x() -> u32 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { nvptx::_block_dim_x() }
}

/// `gridDim.x`.
#[inline(always)]
pub fn grid_dim_x() -> u32 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { nvptx::_grid_dim_x() }
}

/// `gridDim.y`.
#[inline(always)]
pub fn grid_dim_y() -> u32 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { nvptx::_grid_dim_y() }
}

/// The lane of this thread in its warp, for one-dimensional blocks (`threadIdx.x % 32`).
#[inline(always)]
pub fn lane_id() -> u32 {
    thread_idx_x() & (crate::WARP_SIZE - 1)
}

/// The warp of this thread in its block, for one-dimensional blocks (`threadIdx.x / 32`).
#[inline(always)]
pub fn warp_id() -> u32 {
    thread_idx_x() / crate::WARP_SIZE
}

/// `blockIdx.x * blockDim.x + threadIdx.x`, widened to 64 bits.
#[inline(always)]
pub fn global_thread_x() -> u64 {
    u64::from(block_idx_x()) * u64::from(block_dim_x()) + u64::from(thread_idx_x())
}

/// `__syncthreads()`: a barrier for every thread of the block.
///
/// # Safety
/// Every thread of the block must reach the same barrier (no thread may have exited or be on a
/// path that skips it), or the block deadlocks.
#[inline(always)]
pub unsafe fn sync_threads() {
    // SAFETY: the caller guarantees block-uniform control flow.
    unsafe { nvptx::_syncthreads() }
}

/// `__syncthreads_or(pred)`: a barrier for every thread of the block that also returns, to
/// every thread, whether `pred` was true in any of them (`bar.red.or.pred`).
///
/// # Safety
/// As [`sync_threads`].
#[inline(always)]
pub unsafe fn sync_threads_or(pred: bool) -> bool {
    let r: u32;
    // SAFETY: the caller guarantees block-uniform control flow.
    unsafe {
        asm!(
            "{{ .reg .pred p, q;",
            "setp.ne.u32 p, {v}, 0;",
            "bar.red.or.pred q, 0, p;",
            "selp.u32 {r}, 1, 0, q; }}",
            v = in(reg32) u32::from(pred), r = out(reg32) r, options(nostack)
        );
    }
    r != 0
}

/// `__threadfence()`: orders this thread's earlier memory accesses before its later ones for
/// every thread of the GPU (`fence.acq_rel.gpu`).
///
/// # Safety
/// None beyond being device code; `unsafe` to match the accesses it orders.
#[inline(always)]
pub unsafe fn fence_gpu() {
    // SAFETY: no operands.
    unsafe { asm!("fence.acq_rel.gpu;", options(nostack)) };
}

/// `atomicAdd` of a `u32` in global memory that returns the old value (`atom.global.add.u32`,
/// relaxed; pair it with [`fence_gpu`] to publish or observe other writes).
///
/// # Safety
/// `p` must point to a valid, 4-byte-aligned `u32` of global memory that other threads access
/// only atomically while the kernel runs.
#[inline(always)]
pub unsafe fn atomic_add_u32(p: *mut u32, v: u32) -> u32 {
    let r: u32;
    // SAFETY: the caller guarantees a valid address.
    unsafe {
        asm!("atom.global.add.u32 {r}, [{p}], {v};", p = in(reg64) p, v = in(reg32) v,
             r = out(reg32) r, options(nostack));
    }
    r
}

/// A 32-bit load that other blocks' writes are visible to once ordered by [`fence_gpu`]
/// (`ld.relaxed.gpu.global.b32`: served by L2, never a stale L1 line).
///
/// # Safety
/// `p` must point to 4 readable, 4-byte-aligned bytes of global memory.
#[inline(always)]
pub unsafe fn ld_relaxed_u32(p: *const u32) -> u32 {
    let r: u32;
    // SAFETY: the caller guarantees a valid, aligned global address.
    unsafe {
        asm!("ld.relaxed.gpu.global.b32 {r}, [{p}];", p = in(reg64) p, r = out(reg32) r,
             options(nostack, readonly));
    }
    r
}

// ---------------------------------------------------------------------------------------------
// Warp collectives (LLVM's NVVM intrinsics, which LLVM knows to be convergent)

const FULL_MASK: u32 = 0xffff_ffff;
/// Shuffle "c" operand for a whole 32-lane warp: clamp 31, no segment mask.
const SHFL_C: u32 = 0x1f;

#[allow(improper_ctypes)]
unsafe extern "C" {
    #[link_name = "llvm.nvvm.shfl.sync.idx.i32"]
    fn nvvm_shfl_idx(mask: u32, v: u32, lane: u32, c: u32) -> u32;
    #[link_name = "llvm.nvvm.shfl.sync.bfly.i32"]
    fn nvvm_shfl_bfly(mask: u32, v: u32, lane_mask: u32, c: u32) -> u32;
    #[link_name = "llvm.nvvm.shfl.sync.down.i32"]
    fn nvvm_shfl_down(mask: u32, v: u32, delta: u32, c: u32) -> u32;
    #[link_name = "llvm.nvvm.vote.ballot.sync"]
    fn nvvm_ballot(mask: u32, pred: bool) -> u32;
}

/// `__shfl_sync(0xffffffff, v, lane)`: `v` of lane `lane % 32`.
///
/// # Safety
/// All 32 lanes of the warp must execute this call together.
#[inline(always)]
pub unsafe fn shfl_idx(v: u32, lane: u32) -> u32 {
    // SAFETY: the caller guarantees a converged, full warp.
    unsafe { nvvm_shfl_idx(FULL_MASK, v, lane, SHFL_C) }
}

/// `__shfl_xor_sync(0xffffffff, v, mask)`: `v` of lane `lane_id ^ mask`.
///
/// # Safety
/// All 32 lanes of the warp must execute this call together.
#[inline(always)]
pub unsafe fn shfl_xor(v: u32, mask: u32) -> u32 {
    // SAFETY: the caller guarantees a converged, full warp.
    unsafe { nvvm_shfl_bfly(FULL_MASK, v, mask, SHFL_C) }
}

/// `__shfl_down_sync(0xffffffff, v, delta)`: `v` of lane `lane_id + delta` (own value past 31).
///
/// # Safety
/// All 32 lanes of the warp must execute this call together.
#[inline(always)]
pub unsafe fn shfl_down(v: u32, delta: u32) -> u32 {
    // SAFETY: the caller guarantees a converged, full warp.
    unsafe { nvvm_shfl_down(FULL_MASK, v, delta, SHFL_C) }
}

/// `__ballot_sync(0xffffffff, pred)`: bit `i` set when lane `i`'s `pred` is true.
///
/// # Safety
/// All 32 lanes of the warp must execute this call together.
#[inline(always)]
pub unsafe fn ballot(pred: bool) -> u32 {
    // SAFETY: the caller guarantees a converged, full warp.
    unsafe { nvvm_ballot(FULL_MASK, pred) }
}

/// Sum of `v` over the warp by a xor butterfly; every lane gets the sum.
///
/// # Safety
/// All 32 lanes of the warp must execute this call together.
#[inline(always)]
pub unsafe fn warp_sum_f32(mut v: f32) -> f32 {
    let mut m = 16;
    while m > 0 {
        // SAFETY: forwarded from the caller.
        v += f32::from_bits(unsafe { shfl_xor(v.to_bits(), m) });
        m >>= 1;
    }
    v
}

/// Wrapping sum of `v` over the warp by a xor butterfly; every lane gets the sum.
///
/// # Safety
/// All 32 lanes of the warp must execute this call together.
#[inline(always)]
pub unsafe fn warp_sum_i32(mut v: i32) -> i32 {
    let mut m = 16;
    while m > 0 {
        // SAFETY: forwarded from the caller.
        v = v.wrapping_add(unsafe { shfl_xor(v as u32, m) } as i32);
        m >>= 1;
    }
    v
}

/// Xor of `v` over the warp; every lane gets it.
///
/// # Safety
/// All 32 lanes of the warp must execute this call together.
#[inline(always)]
pub unsafe fn warp_xor_u32(mut v: u32) -> u32 {
    let mut m = 16;
    while m > 0 {
        // SAFETY: forwarded from the caller.
        v ^= unsafe { shfl_xor(v, m) };
        m >>= 1;
    }
    v
}

// ---------------------------------------------------------------------------------------------
// Tensor cores

/// `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`: `D = A B + C` for a 16x16 fp16 tile
/// `A`, a 16x8 fp16 tile `B` and 16x8 fp32 accumulators, spread over the warp.
///
/// With `g = lane / 4` and `t = lane % 4`, each register holds two fp16 values (low half first):
/// `a[0]` = A(g, 2t..2t+2), `a[1]` = A(g+8, 2t..), `a[2]` = A(g, 2t+8..), `a[3]` = A(g+8, 2t+8..);
/// `b[0]` = B(2t..2t+2, g), `b[1]` = B(2t+8..2t+10, g); `c[0..2]` = C(g, 2t..2t+2),
/// `c[2..4]` = C(g+8, 2t..2t+2).
///
/// # Safety
/// All 32 lanes of the warp must execute this call together.
#[inline(always)]
pub unsafe fn mma_m16n8k16_f16_f32(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    let (d0, d1, d2, d3): (f32, f32, f32, f32);
    // SAFETY: a register-only warp-collective instruction (sm_80+); the caller guarantees
    // the whole warp executes it. Not `pure`, so it is never moved into divergent code.
    unsafe {
        asm!(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{c0}, {c1}, {c2}, {c3}}};",
            d0 = out(reg32) d0, d1 = out(reg32) d1, d2 = out(reg32) d2, d3 = out(reg32) d3,
            a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
            b0 = in(reg32) b[0], b1 = in(reg32) b[1],
            c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], c3 = in(reg32) c[3],
            options(nomem, nostack)
        );
    }
    [d0, d1, d2, d3]
}

/// `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`: [`mma_m16n8k16_f16_f32`] with
/// bf16 operands (the same fragment layout; each register two bf16 values, low half first).
///
/// # Safety
/// All 32 lanes of the warp must execute this call together.
#[inline(always)]
pub unsafe fn mma_m16n8k16_bf16_f32(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    let (d0, d1, d2, d3): (f32, f32, f32, f32);
    // SAFETY: a register-only warp-collective instruction (sm_80+); the caller guarantees
    // the whole warp executes it. Not `pure`, so it is never moved into divergent code.
    unsafe {
        asm!(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{c0}, {c1}, {c2}, {c3}}};",
            d0 = out(reg32) d0, d1 = out(reg32) d1, d2 = out(reg32) d2, d3 = out(reg32) d3,
            a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
            b0 = in(reg32) b[0], b1 = in(reg32) b[1],
            c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], c3 = in(reg32) c[3],
            options(nomem, nostack)
        );
    }
    [d0, d1, d2, d3]
}

/// `redux.sync.max.u32`: the largest `v` of the warp, in every lane (sm_80+).
///
/// # Safety
/// All 32 lanes of the warp must execute this call together.
#[inline(always)]
pub unsafe fn redux_max_u32(v: u32) -> u32 {
    let r: u32;
    // SAFETY: a register-only warp-collective instruction; the caller guarantees the whole
    // warp executes it. Not `pure`, so it is never moved into divergent code.
    unsafe {
        asm!("redux.sync.max.u32 {r}, {v}, 0xffffffff;", r = out(reg32) r, v = in(reg32) v,
             options(nomem, nostack));
    }
    r
}

/// `redux.sync.add.u32`: the sum of `v` over the warp (modulo 2^32), in every lane (sm_80+).
///
/// # Safety
/// All 32 lanes of the warp must execute this call together.
#[inline(always)]
pub unsafe fn redux_add_u32(v: u32) -> u32 {
    let r: u32;
    // SAFETY: a register-only warp-collective instruction; the caller guarantees the whole
    // warp executes it. Not `pure`, so it is never moved into divergent code.
    unsafe {
        asm!("redux.sync.add.u32 {r}, {v}, 0xffffffff;", r = out(reg32) r, v = in(reg32) v,
             options(nomem, nostack));
    }
    r
}

/// `__syncwarp()`: the lanes of the warp wait for each other, and their shared-memory writes
/// before it are visible to the others after it.
///
/// # Safety
/// All 32 lanes of the warp must execute this call together.
#[inline(always)]
pub unsafe fn sync_warp() {
    // SAFETY: the caller guarantees the whole warp executes it; no `nomem`, so the compiler
    // keeps memory accesses on their side of it.
    unsafe { asm!("bar.warp.sync 0xffffffff;", options(nostack)) }
}

// ---------------------------------------------------------------------------------------------
// Global-memory loads

/// Defines a 128-bit load with the given PTX instruction (`ld.global<qualifiers>.v4.u32`).
macro_rules! ld_v4 {
    ($($(#[$doc:meta])* $name:ident = $insn:literal;)*) => {$(
        $(#[$doc])*
        #[inline(always)]
        pub unsafe fn $name(p: *const U32x4) -> U32x4 {
            let (a, b, c, d): (u32, u32, u32, u32);
            // SAFETY: the caller guarantees a valid, aligned, read-only global address.
            unsafe {
                asm!(
                    concat!($insn, " {{{a}, {b}, {c}, {d}}}, [{p}];"),
                    p = in(reg64) p, a = out(reg32) a, b = out(reg32) b, c = out(reg32) c,
                    d = out(reg32) d,
                    options(pure, readonly, nostack)
                );
            }
            U32x4([a, b, c, d])
        }
    )*};
}

ld_v4! {
    /// 128-bit read-only load through the non-coherent cache (`ld.global.nc.v4.u32`).
    ///
    /// # Safety
    /// `p` must point to 16 readable, 16-byte-aligned bytes of global memory that no thread
    /// writes while the kernel runs.
    ld_nc_v4 = "ld.global.nc.v4.u32";
    /// 128-bit streaming load: read-only, not kept in L1, with a 256-byte L2 prefetch
    /// (`ld.global.nc.L1::no_allocate.L2::256B.v4.u32`). Measured slower than
    /// [`ld_nc_na_v4`] for streaming on an H200 (docs/PERF.md); kept for comparisons.
    ///
    /// # Safety
    /// As [`ld_nc_v4`].
    ld_stream_v4 = "ld.global.nc.L1::no_allocate.L2::256B.v4.u32";
    /// 128-bit read-only load that does not allocate in L1
    /// (`ld.global.nc.L1::no_allocate.v4.u32`): for data each warp reads once, such as weights.
    ///
    /// # Safety
    /// As [`ld_nc_v4`].
    ld_nc_na_v4 = "ld.global.nc.L1::no_allocate.v4.u32";
    /// 128-bit load with the streaming cache hint, likely accessed once (`ld.global.cs.v4.u32`).
    ///
    /// # Safety
    /// As [`ld_nc_v4`].
    ld_cs_v4 = "ld.global.cs.v4.u32";
    /// 128-bit coherent load (`ld.global.v4.u32`): for data an earlier grid writes while
    /// this one may already run (programmatic dependent launch), read after
    /// [`griddepcontrol_wait`], which the non-coherent loads must not read.
    ///
    /// # Safety
    /// `p` must point to 16 readable, 16-byte-aligned bytes of global memory that no thread
    /// of this grid writes while the kernel runs.
    ld_v4 = "ld.global.v4.u32";
}

/// Defines 32-bit global loads: `unsafe fn name(p: *const u32) -> u32` issuing `insn`.
macro_rules! ld_u32 {
    ($($(#[$doc:meta])* $name:ident = $insn:literal;)*) => {$(
        $(#[$doc])*
        #[inline(always)]
        pub unsafe fn $name(p: *const u32) -> u32 {
            let r: u32;
            // SAFETY: the caller guarantees a valid, aligned global address.
            unsafe {
                asm!(concat!($insn, " {r}, [{p}];"), p = in(reg64) p, r = out(reg32) r,
                     options(pure, readonly, nostack));
            }
            r
        }
    )*};
}

ld_u32! {
    /// 32-bit coherent load (`ld.global.u32`), as [`ld_v4`].
    ///
    /// # Safety
    /// `p` must point to 4 readable, 4-byte-aligned bytes of global memory that no thread of
    /// this grid writes while the kernel runs.
    ld_u32 = "ld.global.u32";
    /// 32-bit read-only load (`ld.global.nc.u32`).
    ///
    /// # Safety
    /// `p` must point to 4 readable, 4-byte-aligned bytes of global memory that no thread
    /// writes while the kernel runs.
    ld_nc_u32 = "ld.global.nc.u32";
}

/// 64-bit read-only load that does not allocate in L1 (`ld.global.nc.L1::no_allocate.u64`),
/// for data a warp reads once.
///
/// # Safety
/// `p` must point to 8 readable, 8-byte-aligned bytes of global memory that no thread writes
/// while the kernel runs.
#[inline(always)]
pub unsafe fn ld_stream_u64(p: *const u64) -> u64 {
    let r: u64;
    // SAFETY: the caller guarantees a valid, aligned, read-only global address.
    unsafe {
        asm!("ld.global.nc.L1::no_allocate.u64 {r}, [{p}];", p = in(reg64) p, r = out(reg64) r,
             options(pure, readonly, nostack));
    }
    r
}

/// `atomicAdd` of an `f32` to a location in shared or global memory (generic address,
/// `atom.add.f32`); returns nothing.
///
/// # Safety
/// `p` must point to a valid, 4-byte-aligned `f32` that other threads access only atomically
/// or after a barrier.
#[inline(always)]
pub unsafe fn atomic_add_f32(p: *mut f32, v: f32) {
    // SAFETY: the caller guarantees a valid address.
    unsafe {
        asm!("red.add.f32 [{p}], {v};", p = in(reg64) p, v = in(reg32) v, options(nostack));
    }
}

/// Adds an `f32` to a location in **global** memory without returning anything
/// (`red.global.add.f32`): the thread does not wait for the add, unlike [`atomic_add_f32`],
/// whose generic address compiles to an `ATOM` with a shared-memory fallback that the warp
/// waits on.
///
/// # Safety
/// `p` must point to a valid, 4-byte-aligned `f32` of global memory that other threads access
/// only atomically or after a fence.
#[inline(always)]
pub unsafe fn red_add_f32_global(p: *mut f32, v: f32) {
    // SAFETY: the caller guarantees a valid global address.
    unsafe {
        asm!("red.global.add.f32 [{p}], {v};", p = in(reg64) p, v = in(reg32) v,
             options(nostack));
    }
}

/// Adds `v` to the `u32` at `p` in global memory without returning the old value
/// (`red.global.add.u32`; wrapping, so it also adds two's-complement `i32`s exactly).
///
/// # Safety
/// `p` must point to a valid, 4-byte-aligned `u32` of global memory that other threads access
/// only atomically while the kernel runs.
#[inline(always)]
pub unsafe fn red_add_u32_global(p: *mut u32, v: u32) {
    // SAFETY: the caller guarantees a valid global address.
    unsafe {
        asm!("red.global.add.u32 [{p}], {v};", p = in(reg64) p, v = in(reg32) v,
             options(nostack));
    }
}

/// 16-bit read-only load (`ld.global.nc.u16`).
///
/// # Safety
/// `p` must point to 2 readable, 2-byte-aligned bytes of global memory that no thread writes
/// while the kernel runs.
#[inline(always)]
pub unsafe fn ld_nc_u16(p: *const u16) -> u16 {
    let r: u16;
    // SAFETY: the caller guarantees a valid, aligned, read-only global address.
    unsafe {
        asm!("ld.global.nc.u16 {r}, [{p}];", p = in(reg64) p, r = out(reg16) r,
             options(pure, readonly, nostack));
    }
    r
}

/// 8-bit read-only load (`ld.global.nc.u8`).
///
/// # Safety
/// `p` must point to a readable byte of global memory that no thread writes while the kernel
/// runs.
#[inline(always)]
pub unsafe fn ld_nc_u8(p: *const u8) -> u8 {
    let r: u16;
    // SAFETY: the caller guarantees a valid, read-only global address.
    unsafe {
        asm!("ld.global.nc.u8 {r}, [{p}];", p = in(reg64) p, r = out(reg16) r,
             options(pure, readonly, nostack));
    }
    r as u8
}

/// 8-bit coherent load (`ld.global.u8`): for data an earlier grid writes while this one may
/// already run (programmatic dependent launch), read after [`griddepcontrol_wait`].
///
/// # Safety
/// `p` must point to a readable byte of global memory that no thread of this grid writes while
/// the kernel runs.
#[inline(always)]
pub unsafe fn ld_u8(p: *const u8) -> u8 {
    let r: u16;
    // SAFETY: the caller guarantees a valid global address.
    unsafe {
        asm!("ld.global.u8 {r}, [{p}];", p = in(reg64) p, r = out(reg16) r,
             options(pure, readonly, nostack));
    }
    r as u8
}

// ---------------------------------------------------------------------------------------------
// Shared memory

global_asm!(".extern .shared .align 16 .b8 CMV_DYN_SMEM[];");

/// Generic pointer to the block's dynamic shared memory (the size given at launch).
///
/// Reads and writes through it are ordinary pointer accesses; the launcher must have asked
/// for at least as many bytes as the kernel uses.
#[inline(always)]
pub fn dyn_smem() -> *mut u8 {
    let p: u64;
    // SAFETY: `cvta` of a shared symbol only computes an address.
    unsafe {
        asm!("cvta.shared.u64 {p}, CMV_DYN_SMEM;", p = out(reg64) p,
             options(pure, nomem, nostack));
    }
    p as *mut u8
}

/// The shared-window address (`.shared`, 32 bits) of the block's dynamic shared memory, for
/// [`lds_v4`] and [`sts_v4`].
#[inline(always)]
pub fn dyn_smem_addr() -> u32 {
    let a: u32;
    // SAFETY: `mov` of a shared symbol's address only computes an address.
    unsafe {
        asm!("mov.u32 {a}, CMV_DYN_SMEM;", a = out(reg32) a, options(pure, nomem, nostack));
    }
    a
}

/// 128-bit shared-memory load (`ld.shared.v4.u32`) at shared-window address `a`.
///
/// # Safety
/// `a` is 16-byte aligned and 16 bytes at `a` lie inside the block's shared memory.
#[inline(always)]
pub unsafe fn lds_v4(a: u32) -> U32x4 {
    let (x, y, z, w): (u32, u32, u32, u32);
    // SAFETY: the caller guarantees an aligned address inside shared memory.
    unsafe {
        asm!("ld.shared.v4.u32 {{{x}, {y}, {z}, {w}}}, [{a}];", a = in(reg32) a,
             x = out(reg32) x, y = out(reg32) y, z = out(reg32) z, w = out(reg32) w,
             options(readonly, nostack));
    }
    U32x4([x, y, z, w])
}

/// 64-bit shared-memory load (`ld.shared.v2.u32`) at shared-window address `a`.
///
/// # Safety
/// `a` is 8-byte aligned and 8 bytes at `a` lie inside the block's shared memory.
#[inline(always)]
pub unsafe fn lds_v2(a: u32) -> [u32; 2] {
    let (x, y): (u32, u32);
    // SAFETY: the caller guarantees an aligned address inside shared memory.
    unsafe {
        asm!("ld.shared.v2.u32 {{{x}, {y}}}, [{a}];", a = in(reg32) a,
             x = out(reg32) x, y = out(reg32) y, options(readonly, nostack));
    }
    [x, y]
}

/// 32-bit shared-memory load (`ld.shared.u32`) at shared-window address `a`.
///
/// # Safety
/// `a` is 4-byte aligned and 4 bytes at `a` lie inside the block's shared memory.
#[inline(always)]
pub unsafe fn lds_u32(a: u32) -> u32 {
    let r: u32;
    // SAFETY: the caller guarantees an aligned address inside shared memory.
    unsafe {
        asm!("ld.shared.u32 {r}, [{a}];", a = in(reg32) a, r = out(reg32) r,
             options(readonly, nostack));
    }
    r
}

/// Atomic add of `v` to the `u32` at shared-window address `a`, without the old value
/// (`red.shared.add.u32`; wraps modulo 2^32).
///
/// # Safety
/// `a` is 4-byte aligned and 4 bytes at `a` lie inside the block's shared memory; other
/// threads access that word only atomically until a barrier.
#[inline(always)]
pub unsafe fn red_shared_add_u32(a: u32, v: u32) {
    // SAFETY: the caller guarantees an aligned address inside shared memory.
    unsafe {
        asm!("red.shared.add.u32 [{a}], {v};", a = in(reg32) a, v = in(reg32) v,
             options(nostack));
    }
}

/// 16-bit shared-memory load (`ld.shared.u16`, zero-extended) at shared-window address `a`.
///
/// # Safety
/// `a` is 2-byte aligned and 2 bytes at `a` lie inside the block's shared memory.
#[inline(always)]
pub unsafe fn lds_u16(a: u32) -> u32 {
    let r: u32;
    // SAFETY: the caller guarantees an aligned address inside shared memory.
    unsafe {
        asm!("{{ .reg .b16 h; ld.shared.u16 h, [{a}]; cvt.u32.u16 {r}, h; }}", a = in(reg32) a,
             r = out(reg32) r, options(readonly, nostack));
    }
    r
}

/// 16-bit shared-memory store (`st.shared.u16`, the low half of `v`) at shared-window
/// address `a`.
///
/// # Safety
/// `a` is 2-byte aligned and 2 bytes at `a` lie inside the block's shared memory.
#[inline(always)]
pub unsafe fn sts_u16(a: u32, v: u32) {
    // SAFETY: the caller guarantees an aligned address inside shared memory.
    unsafe {
        asm!("{{ .reg .b16 h; cvt.u16.u32 h, {v}; st.shared.u16 [{a}], h; }}", a = in(reg32) a,
             v = in(reg32) v, options(nostack));
    }
}

/// 32-bit shared-memory store (`st.shared.u32`) at shared-window address `a`.
///
/// # Safety
/// `a` is 4-byte aligned and 4 bytes at `a` lie inside the block's shared memory.
#[inline(always)]
pub unsafe fn sts_u32(a: u32, v: u32) {
    // SAFETY: the caller guarantees an aligned address inside shared memory.
    unsafe {
        asm!("st.shared.u32 [{a}], {v};", a = in(reg32) a, v = in(reg32) v, options(nostack));
    }
}

/// 64-bit shared-memory store (`st.shared.v2.u32`) at shared-window address `a`.
///
/// # Safety
/// `a` is 8-byte aligned and 8 bytes at `a` lie inside the block's shared memory.
#[inline(always)]
pub unsafe fn sts_v2(a: u32, x: u32, y: u32) {
    // SAFETY: the caller guarantees an aligned address inside shared memory.
    unsafe {
        asm!("st.shared.v2.u32 [{a}], {{{x}, {y}}};", a = in(reg32) a, x = in(reg32) x,
             y = in(reg32) y, options(nostack));
    }
}

/// 128-bit shared-memory store (`st.shared.v4.u32`) at shared-window address `a`.
///
/// # Safety
/// `a` is 16-byte aligned and 16 bytes at `a` lie inside the block's shared memory.
#[inline(always)]
pub unsafe fn sts_v4(a: u32, v: U32x4) {
    let [x, y, z, w] = v.0;
    // SAFETY: the caller guarantees an aligned address inside shared memory.
    unsafe {
        asm!("st.shared.v4.u32 [{a}], {{{x}, {y}, {z}, {w}}};", a = in(reg32) a,
             x = in(reg32) x, y = in(reg32) y, z = in(reg32) z, w = in(reg32) w,
             options(nostack));
    }
}

/// Starts an asynchronous 16-byte copy from global memory at `src` to the shared-window
/// address `dst` (`cp.async.cg.shared.global`, sm_80; cached in L2 only). The copy belongs to
/// the calling thread's next commit group ([`cp_async_commit`]); its bytes may be read only
/// after a [`cp_async_wait`] that covers that group.
///
/// # Safety
/// `src` is 16-byte aligned with 16 readable bytes of global memory; `dst` is 16-byte aligned
/// with 16 bytes inside the block's shared memory that nothing else reads or writes until the
/// copy's group has been waited for.
#[inline(always)]
pub unsafe fn cp_async_16(dst: u32, src: *const U32x4) {
    // SAFETY: the caller guarantees both ranges.
    unsafe {
        asm!("cp.async.cg.shared.global [{d}], [{s}], 16;", d = in(reg32) dst, s = in(reg64) src,
             options(nostack));
    }
}

/// [`cp_async_16`] that copies only the first `src_bytes` (0 or 16) bytes of `src` and fills
/// the rest of the 16 destination bytes with zeros (`cp.async.cg.shared.global` with a source
/// size): with `src_bytes == 0` nothing is read and the destination becomes zeros.
///
/// # Safety
/// As [`cp_async_16`], except that `src` needs only `src_bytes` readable bytes (it must still
/// be a 16-byte-aligned global address); `src_bytes <= 16`.
#[inline(always)]
pub unsafe fn cp_async_16_zfill(dst: u32, src: *const U32x4, src_bytes: u32) {
    // SAFETY: the caller guarantees both ranges and the size.
    unsafe {
        asm!("cp.async.cg.shared.global [{d}], [{s}], 16, {n};", d = in(reg32) dst,
             s = in(reg64) src, n = in(reg32) src_bytes, options(nostack));
    }
}

/// [`cp_async_16_zfill`] through L1 (`cp.async.ca.shared.global`): for data that other warps
/// of the SM read again soon.
///
/// # Safety
/// As [`cp_async_16_zfill`].
#[inline(always)]
pub unsafe fn cp_async_16_ca_zfill(dst: u32, src: *const U32x4, src_bytes: u32) {
    // SAFETY: the caller guarantees both ranges and the size.
    unsafe {
        asm!("cp.async.ca.shared.global [{d}], [{s}], 16, {n};", d = in(reg32) dst,
             s = in(reg64) src, n = in(reg32) src_bytes, options(nostack));
    }
}

/// An asynchronous 8-byte copy from global memory at `src` to the shared-window address `dst`
/// (`cp.async.ca.shared.global`, through L1) that copies only the first `src_bytes` (0 or 8)
/// bytes and fills the rest with zeros; as [`cp_async_16_zfill`] otherwise.
///
/// # Safety
/// `src` is an 8-byte-aligned global address with `src_bytes` readable bytes; `dst` is 8-byte
/// aligned with 8 bytes inside the block's shared memory that nothing else reads or writes
/// until the copy's group has been waited for; `src_bytes <= 8`.
#[inline(always)]
pub unsafe fn cp_async_8_zfill(dst: u32, src: *const u64, src_bytes: u32) {
    // SAFETY: the caller guarantees both ranges and the size.
    unsafe {
        asm!("cp.async.ca.shared.global [{d}], [{s}], 8, {n};", d = in(reg32) dst,
             s = in(reg64) src, n = in(reg32) src_bytes, options(nostack));
    }
}

/// The operand list `{d0}, {d1}, .. {d63}` of a `wgmma` tile's 64 accumulators per thread
/// (`m64n128` with 32-bit sums), for [`wgmma_acc_asm64!`] templates.
#[macro_export]
macro_rules! wgmma_acc_regs64 {
    () => {
        "{d0}, {d1}, {d2}, {d3}, {d4}, {d5}, {d6}, {d7}, {d8}, {d9}, {d10}, {d11}, {d12}, {d13}, {d14}, {d15}, {d16}, {d17}, {d18}, {d19}, {d20}, {d21}, {d22}, {d23}, {d24}, {d25}, {d26}, {d27}, {d28}, {d29}, {d30}, {d31}, {d32}, {d33}, {d34}, {d35}, {d36}, {d37}, {d38}, {d39}, {d40}, {d41}, {d42}, {d43}, {d44}, {d45}, {d46}, {d47}, {d48}, {d49}, {d50}, {d51}, {d52}, {d53}, {d54}, {d55}, {d56}, {d57}, {d58}, {d59}, {d60}, {d61}, {d62}, {d63}"
    };
}

/// `asm!` with the 64 accumulators `$acc[$off .. $off + 64]` (32-bit values: `u32` or `f32`)
/// as `inout` operands `d0` .. `d63` (named by [`wgmma_acc_regs64!`]), then the template's
/// other operands. Must be called inside an `unsafe` block.
#[macro_export]
macro_rules! wgmma_acc_asm64 {
    ($acc:expr, $off:expr; $tmpl:expr; $($rest:tt)*) => {
        ::core::arch::asm!(
            $tmpl,
            d0 = inout(reg32) $acc[$off + 0],
            d1 = inout(reg32) $acc[$off + 1],
            d2 = inout(reg32) $acc[$off + 2],
            d3 = inout(reg32) $acc[$off + 3],
            d4 = inout(reg32) $acc[$off + 4],
            d5 = inout(reg32) $acc[$off + 5],
            d6 = inout(reg32) $acc[$off + 6],
            d7 = inout(reg32) $acc[$off + 7],
            d8 = inout(reg32) $acc[$off + 8],
            d9 = inout(reg32) $acc[$off + 9],
            d10 = inout(reg32) $acc[$off + 10],
            d11 = inout(reg32) $acc[$off + 11],
            d12 = inout(reg32) $acc[$off + 12],
            d13 = inout(reg32) $acc[$off + 13],
            d14 = inout(reg32) $acc[$off + 14],
            d15 = inout(reg32) $acc[$off + 15],
            d16 = inout(reg32) $acc[$off + 16],
            d17 = inout(reg32) $acc[$off + 17],
            d18 = inout(reg32) $acc[$off + 18],
            d19 = inout(reg32) $acc[$off + 19],
            d20 = inout(reg32) $acc[$off + 20],
            d21 = inout(reg32) $acc[$off + 21],
            d22 = inout(reg32) $acc[$off + 22],
            d23 = inout(reg32) $acc[$off + 23],
            d24 = inout(reg32) $acc[$off + 24],
            d25 = inout(reg32) $acc[$off + 25],
            d26 = inout(reg32) $acc[$off + 26],
            d27 = inout(reg32) $acc[$off + 27],
            d28 = inout(reg32) $acc[$off + 28],
            d29 = inout(reg32) $acc[$off + 29],
            d30 = inout(reg32) $acc[$off + 30],
            d31 = inout(reg32) $acc[$off + 31],
            d32 = inout(reg32) $acc[$off + 32],
            d33 = inout(reg32) $acc[$off + 33],
            d34 = inout(reg32) $acc[$off + 34],
            d35 = inout(reg32) $acc[$off + 35],
            d36 = inout(reg32) $acc[$off + 36],
            d37 = inout(reg32) $acc[$off + 37],
            d38 = inout(reg32) $acc[$off + 38],
            d39 = inout(reg32) $acc[$off + 39],
            d40 = inout(reg32) $acc[$off + 40],
            d41 = inout(reg32) $acc[$off + 41],
            d42 = inout(reg32) $acc[$off + 42],
            d43 = inout(reg32) $acc[$off + 43],
            d44 = inout(reg32) $acc[$off + 44],
            d45 = inout(reg32) $acc[$off + 45],
            d46 = inout(reg32) $acc[$off + 46],
            d47 = inout(reg32) $acc[$off + 47],
            d48 = inout(reg32) $acc[$off + 48],
            d49 = inout(reg32) $acc[$off + 49],
            d50 = inout(reg32) $acc[$off + 50],
            d51 = inout(reg32) $acc[$off + 51],
            d52 = inout(reg32) $acc[$off + 52],
            d53 = inout(reg32) $acc[$off + 53],
            d54 = inout(reg32) $acc[$off + 54],
            d55 = inout(reg32) $acc[$off + 55],
            d56 = inout(reg32) $acc[$off + 56],
            d57 = inout(reg32) $acc[$off + 57],
            d58 = inout(reg32) $acc[$off + 58],
            d59 = inout(reg32) $acc[$off + 59],
            d60 = inout(reg32) $acc[$off + 60],
            d61 = inout(reg32) $acc[$off + 61],
            d62 = inout(reg32) $acc[$off + 62],
            d63 = inout(reg32) $acc[$off + 63],
            $($rest)*
        )
    };
}

/// `wgmma.fence.sync.aligned` (sm_90a): orders this thread's earlier register accesses (the
/// accumulators, A fragments) before the warpgroup's next `wgmma.mma_async`.
///
/// # Safety
/// All threads of the warpgroup run it together, in code built for sm_90a.
#[inline(always)]
pub unsafe fn wgmma_fence() {
    // SAFETY: warpgroup-collective (the caller's contract), no operands.
    unsafe { asm!("wgmma.fence.sync.aligned;", options(nostack)) };
}

/// `wgmma.commit_group.sync.aligned` (sm_90a): closes the warpgroup's current group of
/// `wgmma.mma_async`s, which `wgmma.wait_group` then counts.
///
/// # Safety
/// All threads of the warpgroup run it together, in code built for sm_90a.
#[inline(always)]
pub unsafe fn wgmma_commit_group() {
    // SAFETY: warpgroup-collective (the caller's contract), no operands.
    unsafe { asm!("wgmma.commit_group.sync.aligned;", options(nostack)) };
}

/// `fence.proxy.async.shared::cta` (sm_90): orders this thread's earlier generic-proxy writes
/// to shared memory (stores, `cp.async` copies once waited for) before later async-proxy reads
/// of it (`wgmma` operands from shared memory), once a barrier passes them on.
///
/// # Safety
/// None beyond being device code for sm_90 or later.
#[inline(always)]
pub unsafe fn fence_proxy_async_shared() {
    // SAFETY: no operands.
    unsafe { asm!("fence.proxy.async.shared::cta;", options(nostack)) };
}

/// `setmaxnreg.dec.sync.aligned.u32 N` (sm_90a): this warpgroup gives registers back, down to
/// `N` per thread (a multiple of 8 in 24..=256), for other warpgroups to take with
/// [`setmaxnreg_inc`]. For the producers of a warp-specialized kernel.
///
/// # Safety
/// All threads of the warpgroup run it together, in code built for sm_90a; the kernel's
/// register count (its launch bound) is at least `N`, and no later code of the warpgroup
/// needs more than `N` (`ptxas` allocates for it).
#[inline(always)]
pub unsafe fn setmaxnreg_dec<const N: u32>() {
    // SAFETY: the caller's contract.
    unsafe { asm!("setmaxnreg.dec.sync.aligned.u32 {n};", n = const N, options(nostack)) };
}

/// `setmaxnreg.inc.sync.aligned.u32 N` (sm_90a): this warpgroup takes registers up to `N` per
/// thread (a multiple of 8 in 24..=256), waiting until other warpgroups gave enough back
/// ([`setmaxnreg_dec`]).
///
/// # Safety
/// As [`setmaxnreg_dec`]; the registers the block's warpgroups ask for in all fit the SM's
/// register file (else this waits for ever).
#[inline(always)]
pub unsafe fn setmaxnreg_inc<const N: u32>() {
    // SAFETY: the caller's contract.
    unsafe { asm!("setmaxnreg.inc.sync.aligned.u32 {n};", n = const N, options(nostack)) };
}

/// `bar.sync id, threads`: waits until `threads` threads (a multiple of 32, whole warps) have
/// arrived at named barrier `id` (1..=15; 0 is [`sync_threads`]'s), and orders their shared-
/// memory accesses like a block barrier. For a subset of the block's warps, e.g. the consumers
/// of a warp-specialized kernel while its producer warp runs on.
///
/// # Safety
/// Exactly `threads` threads, all lanes of their warps, reach every use of barrier `id`, and
/// no other code of the kernel uses that id.
#[inline(always)]
pub unsafe fn named_barrier_sync(id: u32, threads: u32) {
    // SAFETY: the caller guarantees who arrives.
    unsafe {
        asm!("bar.sync {i}, {n};", i = in(reg32) id, n = in(reg32) threads, options(nostack))
    };
}

/// `mbarrier.init.shared::cta.b64 [bar], count` (sm_80): a shared-memory barrier at the
/// 8-byte-aligned shared-window address `bar` whose phases complete after `count` arrivals
/// (and, sm_90, once the bytes announced by [`mbarrier_arrive_expect_tx`] have landed).
///
/// # Safety
/// `bar` is 8-byte aligned inside the block's shared memory, used as nothing else; no thread
/// uses the barrier before the initialization is visible to it ([`fence_mbarrier_init`], then a
/// block barrier).
#[inline(always)]
pub unsafe fn mbarrier_init(bar: u32, count: u32) {
    // SAFETY: the caller guarantees the address.
    unsafe {
        asm!("mbarrier.init.shared::cta.b64 [{b}], {c};", b = in(reg32) bar, c = in(reg32) count,
             options(nostack));
    }
}

/// `fence.mbarrier_init.release.cluster` (sm_90): makes this thread's earlier
/// [`mbarrier_init`]s visible to the async proxy (bulk copies that complete on them) and, with
/// the block barrier that follows, to the other threads.
///
/// # Safety
/// None beyond being device code for sm_90 or later.
#[inline(always)]
pub unsafe fn fence_mbarrier_init() {
    // SAFETY: no operands.
    unsafe { asm!("fence.mbarrier_init.release.cluster;", options(nostack)) };
}

/// `mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], bytes` (sm_90): one arrival on the
/// barrier's current phase, which then also waits for `bytes` more bytes of bulk copies
/// ([`cp_async_bulk_g2s`]) to complete on it.
///
/// # Safety
/// `bar` is an initialized barrier of this block; the phase expects this arrival.
#[inline(always)]
pub unsafe fn mbarrier_arrive_expect_tx(bar: u32, bytes: u32) {
    // SAFETY: the caller guarantees the barrier.
    unsafe {
        asm!("mbarrier.arrive.expect_tx.shared::cta.b64 _, [{b}], {n};", b = in(reg32) bar,
             n = in(reg32) bytes, options(nostack));
    }
}

/// `mbarrier.arrive.shared::cta.b64 _, [bar]` (sm_80): one arrival on the barrier's current
/// phase. Orders this thread's earlier memory accesses (release) before the phase completes.
///
/// # Safety
/// `bar` is an initialized barrier of this block; the phase expects this arrival.
#[inline(always)]
pub unsafe fn mbarrier_arrive(bar: u32) {
    // SAFETY: the caller guarantees the barrier.
    unsafe {
        asm!("mbarrier.arrive.shared::cta.b64 _, [{b}];", b = in(reg32) bar, options(nostack))
    };
}

/// Waits until the phase of parity `parity` (0 or 1) of the barrier has completed
/// (`mbarrier.try_wait.parity.shared::cta.b64` in a loop, sm_90); the writes it covered (bulk
/// copies, the arriving threads' earlier accesses) are then visible to this thread (acquire).
///
/// # Safety
/// `bar` is an initialized barrier of this block; the phase waited for completes eventually
/// (else the thread hangs).
#[inline(always)]
pub unsafe fn mbarrier_wait_parity(bar: u32, parity: u32) {
    // (PTX has no local labels for a loop inside the asm, which is inlined many times.)
    loop {
        let done: u32;
        // SAFETY: the caller guarantees the barrier; not `nomem`: a compiler barrier too.
        unsafe {
            asm!(
                "{{",
                ".reg .pred p;",
                "mbarrier.try_wait.parity.shared::cta.b64 p, [{b}], {q};",
                "selp.u32 {d}, 1, 0, p;",
                "}}",
                b = in(reg32) bar,
                q = in(reg32) parity,
                d = out(reg32) done,
                options(nostack)
            );
        }
        if done != 0 {
            break;
        }
    }
}

/// Starts a bulk copy of `bytes` bytes from global memory at `src` to the shared-window
/// address `dst`, which completes on the barrier `bar` (`cp.async.bulk.shared::cluster.global
/// .mbarrier::complete_tx::bytes`, sm_90; the copy engine moves the bytes, no registers are
/// involved). The bytes may be read once a wait on the barrier's phase returns
/// ([`mbarrier_wait_parity`]), the phase having been told to expect them
/// ([`mbarrier_arrive_expect_tx`]).
///
/// # Safety
/// `src` and `dst` are 16-byte aligned, `bytes` is a non-zero multiple of 16; `src` has `bytes`
/// readable bytes of global memory and `dst` `bytes` of the block's shared memory that nothing
/// reads or writes until the barrier's phase completes; `bar` is an initialized barrier of
/// this block whose current phase counts these bytes.
#[inline(always)]
pub unsafe fn cp_async_bulk_g2s(dst: u32, src: *const u8, bytes: u32, bar: u32) {
    // SAFETY: the caller guarantees the ranges and the barrier.
    unsafe {
        asm!(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [{d}], [{s}], {n}, [{b}];",
            d = in(reg32) dst,
            s = in(reg64) src,
            n = in(reg32) bytes,
            b = in(reg32) bar,
            options(nostack)
        );
    }
}

/// Starts a 2-D tensor copy (TMA) of one box from global memory to the shared-window address
/// `dst`, completing on the barrier `bar` (`cp.async.bulk.tensor.2d.shared::cluster.global
/// .mbarrier::complete_tx::bytes`, sm_90). `map` is the generic address of the tensor map (a
/// `CUtensorMap` made by `cuTensorMapEncodeTiled` on the host: the tensor's address, sizes,
/// strides, box and swizzle), `(c0, c1)` the box's first element (innermost dimension first).
/// Elements of the box outside the tensor are written as zeros; the copy writes the whole box
/// and counts all its bytes on `bar`.
///
/// # Safety
/// `map` points at a valid tensor map in parameter, constant or global memory, 64-byte
/// aligned, whose global memory is readable; `dst` has the box's bytes of the block's shared
/// memory, aligned as the map's swizzle needs (1024 bytes for 128-byte swizzling), that nothing
/// reads or writes until the barrier's phase completes; `bar` is an initialized barrier of
/// this block whose current phase counts the box's bytes.
#[inline(always)]
pub unsafe fn cp_async_bulk_tensor_2d_g2s(dst: u32, map: u64, c0: u32, c1: u32, bar: u32) {
    // SAFETY: the caller guarantees the map, the ranges and the barrier.
    unsafe {
        asm!(
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [{d}], [{m}, {{{c0}, {c1}}}], [{b}];",
            d = in(reg32) dst,
            m = in(reg64) map,
            c0 = in(reg32) c0,
            c1 = in(reg32) c1,
            b = in(reg32) bar,
            options(nostack)
        );
    }
}

/// `prefetch.tensormap` (sm_90): brings the tensor map at the generic address `map` into the
/// copy engine's cache before its first use.
///
/// # Safety
/// `map` is the generic address of a tensor map, as for [`cp_async_bulk_tensor_2d_g2s`].
#[inline(always)]
pub unsafe fn prefetch_tensormap(map: u64) {
    // SAFETY: a hint; the caller guarantees the address.
    unsafe { asm!("prefetch.tensormap [{m}];", m = in(reg64) map, options(nostack)) };
}

/// `ldmatrix.sync.aligned.m8n8.x4.shared.b16` (sm_75+): four 8x8 matrices of 16-bit values
/// from shared memory. Lanes `8 i .. 8 i + 8` give the shared-window addresses of matrix `i`'s
/// 8 rows (16 bytes each, 16-byte aligned); word `i` of the result is, in lane `(g, t) = (lane
/// / 4, lane % 4)`, the 32-bit word `t` of matrix `i`'s row `g`: the fragment layout of the
/// `mma` operands.
///
/// # Safety
/// All 32 lanes of the warp execute it together; every lane's address is 16 bytes of the
/// block's shared memory, 16-byte aligned.
#[inline(always)]
pub unsafe fn ldmatrix_x4(addr: u32) -> [u32; 4] {
    let (r0, r1, r2, r3): (u32, u32, u32, u32);
    // SAFETY: the caller guarantees the addresses and that the whole warp is here.
    unsafe {
        asm!(
            "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{r0}, {r1}, {r2}, {r3}}}, [{a}];",
            r0 = out(reg32) r0, r1 = out(reg32) r1, r2 = out(reg32) r2, r3 = out(reg32) r3,
            a = in(reg32) addr,
            options(nostack, readonly)
        );
    }
    [r0, r1, r2, r3]
}

/// As [`ldmatrix_x4`] for two matrices (`.x2`): lanes 0-15 give the rows' addresses (lanes
/// 16-31 give addresses too, which are ignored but must be valid shared addresses).
///
/// # Safety
/// As [`ldmatrix_x4`].
#[inline(always)]
pub unsafe fn ldmatrix_x2(addr: u32) -> [u32; 2] {
    let (r0, r1): (u32, u32);
    // SAFETY: the caller guarantees the addresses and that the whole warp is here.
    unsafe {
        asm!(
            "ldmatrix.sync.aligned.m8n8.x2.shared.b16 {{{r0}, {r1}}}, [{a}];",
            r0 = out(reg32) r0, r1 = out(reg32) r1,
            a = in(reg32) addr,
            options(nostack, readonly)
        );
    }
    [r0, r1]
}

/// `griddepcontrol.launch_dependents` (sm_90): this block no longer holds back the launch of
/// the grid launched after it with programmatic stream serialization (programmatic dependent
/// launch). That grid starts once every block of this one has called it or exited; it may then
/// run beside this one, and must call [`griddepcontrol_wait`] before it reads anything this
/// grid writes.
///
/// # Safety
/// None beyond being device code for sm_90 or later (the PTX does not assemble for sm_80).
#[inline(always)]
pub unsafe fn griddepcontrol_launch_dependents() {
    // SAFETY: no operands.
    unsafe { asm!("griddepcontrol.launch_dependents;", options(nostack)) };
}

/// `griddepcontrol.wait` (sm_90): blocks until every grid this one depends on (launched before
/// it on the stream) has completed and its memory operations are visible. A no-op when the
/// grid was launched without programmatic stream serialization. Like a memory barrier for the
/// compiler: no access moves across it.
///
/// # Safety
/// None beyond being device code for sm_90 or later (the PTX does not assemble for sm_80).
#[inline(always)]
pub unsafe fn griddepcontrol_wait() {
    // SAFETY: no operands; not `nomem`, so the compiler keeps memory accesses on their side.
    unsafe { asm!("griddepcontrol.wait;", options(nostack)) };
}

/// Closes the calling thread's current group of [`cp_async_16`] copies (`cp.async.commit_group`).
///
/// # Safety
/// None beyond being device code; `unsafe` to match the copies it groups.
#[inline(always)]
pub unsafe fn cp_async_commit() {
    // SAFETY: no operands.
    unsafe { asm!("cp.async.commit_group;", options(nostack)) };
}

/// Waits until at most `N` of the calling thread's most recent commit groups are still in
/// flight (`cp.async.wait_group N`): every older group's bytes are then in shared memory and
/// visible to this thread.
///
/// # Safety
/// None beyond being device code; `unsafe` to match the copies it waits for.
#[inline(always)]
pub unsafe fn cp_async_wait<const N: u32>() {
    // SAFETY: no operands besides the immediate.
    unsafe { asm!("cp.async.wait_group {n};", n = const N, options(nostack)) };
}

/// [`cp_async_wait`] with a count known only after inlining (a const generic argument cannot
/// be computed from another one): at most `n` (0..=6; more count as 6, a stricter wait)
/// groups still in flight. One arm per count, folded to one instruction when `n` is a
/// constant.
///
/// # Safety
/// As [`cp_async_wait`].
#[inline(always)]
pub unsafe fn cp_async_wait_at_most(n: u32) {
    // SAFETY: forwarded.
    unsafe {
        match n {
            0 => cp_async_wait::<0>(),
            1 => cp_async_wait::<1>(),
            2 => cp_async_wait::<2>(),
            3 => cp_async_wait::<3>(),
            4 => cp_async_wait::<4>(),
            5 => cp_async_wait::<5>(),
            _ => cp_async_wait::<6>(),
        }
    }
}

/// Declares per-kernel performance directives as `u32` statics that `cargo xtask ptx` turns
/// into PTX launch bounds (Rust has no attribute for them): `CMV_MAXNTID_<entry> = N`
/// becomes `.maxntid N, 1, 1` and `CMV_MINNCTAPERSM_<entry> = N` `.minnctapersm N` on that
/// entry (xtask's `DIRECTIVES`).
#[macro_export]
macro_rules! launch_bounds {
    ($($sym:ident = $n:expr;)*) => {$(
        #[unsafe(no_mangle)]
        #[allow(non_upper_case_globals)]
        static $sym: u32 = $n;
    )*};
}

/// Declares a block of static shared memory of `$bytes` bytes named `$name`, aligned to 16, and
/// evaluates to a generic `*mut u8` to it.
///
/// Use it once per kernel, in a function that is inlined into that one kernel only (PTX
/// rejects a symbol declared twice). Must be called inside an `unsafe` block.
#[macro_export]
macro_rules! static_shared {
    ($name:ident, $bytes:literal) => {{
        let p: u64;
        core::arch::asm!(
            concat!(".shared .align 16 .b8 ", stringify!($name), "[", stringify!($bytes), "];"),
            concat!("cvta.shared.u64 {p}, ", stringify!($name), ";"),
            p = out(reg64) p,
            options(nostack)
        );
        p as *mut u8
    }};
}

/// 128-bit load served by L2, never by a stale L1 line (`ld.global.cg.v4.u32`): reads data
/// other blocks of the same launch wrote, once ordered by [`fence_gpu`]. Not `pure`, so it is
/// never moved across a fence or barrier.
///
/// # Safety
/// `p` must point to 16 readable, 16-byte-aligned bytes of global memory.
#[inline(always)]
pub unsafe fn ld_cg_v4(p: *const U32x4) -> U32x4 {
    let (a, b, c, d): (u32, u32, u32, u32);
    // SAFETY: the caller guarantees a valid, aligned global address.
    unsafe {
        asm!(
            "ld.global.cg.v4.u32 {{{a}, {b}, {c}, {d}}}, [{p}];",
            p = in(reg64) p, a = out(reg32) a, b = out(reg32) b, c = out(reg32) c,
            d = out(reg32) d, options(readonly, nostack)
        );
    }
    U32x4([a, b, c, d])
}

/// 128-bit store to global memory (`st.global.v4.u32`).
///
/// # Safety
/// `p` must point to 16 writable, 16-byte-aligned bytes of global memory.
#[inline(always)]
pub unsafe fn st_global_v4(p: *mut U32x4, v: U32x4) {
    // SAFETY: the caller guarantees a valid, aligned global address.
    unsafe {
        asm!(
            "st.global.v4.u32 [{p}], {{{a}, {b}, {c}, {d}}};",
            p = in(reg64) p, a = in(reg32) v.0[0], b = in(reg32) v.0[1], c = in(reg32) v.0[2],
            d = in(reg32) v.0[3], options(nostack)
        );
    }
}

/// 64-bit read-only load that does not allocate in L1 (`ld.global.nc.L1::no_allocate.u64`):
/// for data each thread reads once, such as codes streamed past an L1-cached table.
///
/// # Safety
/// As [`ld_nc_u64`].
#[inline(always)]
pub unsafe fn ld_nc_na_u64(p: *const u64) -> u64 {
    let r: u64;
    // SAFETY: the caller guarantees a valid, aligned, read-only global address.
    unsafe {
        asm!("ld.global.nc.L1::no_allocate.u64 {r}, [{p}];", p = in(reg64) p, r = out(reg64) r,
             options(pure, readonly, nostack));
    }
    r
}

/// 32-bit read-only load that does not allocate in L1 (`ld.global.nc.L1::no_allocate.u32`):
/// for data read once.
///
/// # Safety
/// `p` is a valid, 4-byte-aligned global address that no thread writes during the kernel.
#[inline(always)]
pub unsafe fn ld_nc_na_u32(p: *const u32) -> u32 {
    let r: u32;
    // SAFETY: the caller guarantees a valid, aligned, read-only global address.
    unsafe {
        asm!("ld.global.nc.L1::no_allocate.u32 {r}, [{p}];", p = in(reg64) p, r = out(reg32) r,
             options(pure, readonly, nostack));
    }
    r
}

/// 64-bit read-only load (`ld.global.nc.u64`).
///
/// # Safety
/// `p` must point to 8 readable, 8-byte-aligned bytes of global memory that no thread writes
/// while the kernel runs.
#[inline(always)]
pub unsafe fn ld_nc_u64(p: *const u64) -> u64 {
    let r: u64;
    // SAFETY: the caller guarantees a valid, aligned, read-only global address.
    unsafe {
        asm!("ld.global.nc.u64 {r}, [{p}];", p = in(reg64) p, r = out(reg64) r,
             options(pure, readonly, nostack));
    }
    r
}

/// 64-bit coherent load (`ld.global.u64`): for data an earlier grid writes while this one may
/// already run (programmatic dependent launch), read after [`griddepcontrol_wait`].
///
/// # Safety
/// `p` must point to 8 readable, 8-byte-aligned bytes of global memory that no thread of this
/// grid writes while the kernel runs.
#[inline(always)]
pub unsafe fn ld_u64(p: *const u64) -> u64 {
    let r: u64;
    // SAFETY: the caller guarantees a valid, aligned global address.
    unsafe {
        asm!("ld.global.u64 {r}, [{p}];", p = in(reg64) p, r = out(reg64) r,
             options(pure, readonly, nostack));
    }
    r
}

/// `atomicOr` of a `u64` in global memory, result unused (`red.global.or.b64`, relaxed).
///
/// # Safety
/// `p` must point to a valid, 8-byte-aligned `u64` of global memory that other threads access
/// only atomically while the kernel runs.
#[inline(always)]
pub unsafe fn red_or_u64(p: *mut u64, v: u64) {
    // SAFETY: the caller guarantees a valid address.
    unsafe {
        asm!("red.global.or.b64 [{p}], {v};", p = in(reg64) p, v = in(reg64) v, options(nostack))
    };
}

/// 64-bit store to global memory (`st.global.u64`).
///
/// # Safety
/// `p` must point to 8 writable, 8-byte-aligned bytes of global memory that no other thread
/// accesses while the kernel runs.
#[inline(always)]
pub unsafe fn st_u64(p: *mut u64, v: u64) {
    // SAFETY: the caller guarantees a valid address.
    unsafe {
        asm!("st.global.u64 [{p}], {v};", p = in(reg64) p, v = in(reg64) v, options(nostack))
    };
}

/// One `mma.sync.aligned.m16n8k32.row.col.s32.{A}.{B}.s32` wrapper per pair of 8-bit operand
/// types (the instruction differs only in them).
macro_rules! mma_m16n8k32_int8 {
    ($($(#[$doc:meta])* $name:ident = $types:literal;)*) => {$(
        $(#[$doc])*
        ///
        /// # Safety
        /// Called by all 32 lanes of a warp together (sm_80 or newer).
        #[inline(always)]
        pub unsafe fn $name(a: [u32; 4], b: [u32; 2], c: [u32; 4]) -> [u32; 4] {
            let (d0, d1, d2, d3): (u32, u32, u32, u32);
            // SAFETY: a register-only warp-collective instruction (sm_80+); the caller
            // guarantees the whole warp executes it. Not `pure`, so it is never moved into
            // divergent code.
            unsafe {
                asm!(
                    concat!("mma.sync.aligned.m16n8k32.row.col.s32.", $types, ".s32 ",
                        "{{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, ",
                        "{{{b0}, {b1}}}, {{{c0}, {c1}, {c2}, {c3}}};"),
                    d0 = out(reg32) d0, d1 = out(reg32) d1, d2 = out(reg32) d2,
                    d3 = out(reg32) d3,
                    a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2],
                    a3 = in(reg32) a[3],
                    b0 = in(reg32) b[0], b1 = in(reg32) b[1],
                    c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2],
                    c3 = in(reg32) c[3],
                    options(nomem, nostack),
                );
            }
            [d0, d1, d2, d3]
        }
    )*};
}

mma_m16n8k32_int8! {
    /// `mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32`: `D = A B + C` on one warp's
    /// fragments, unsigned 8-bit operands, 32-bit accumulators (wrapping modulo 2^32; every
    /// product of two bytes is below 2^16, so `2^16` of them sum exactly). Fragment layouts as
    /// in the PTX ISA (`A`: 4 registers of 4 bytes, rows `g` and `g + 8`, `B`: 2 registers,
    /// column `g`).
    mma_m16n8k32_u8 = "u8.u8";
    /// `mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32`: `D = A B + C` on one warp's
    /// fragments, signed 8-bit operands, exact 32-bit integer accumulation (wrapping).
    /// Fragments as [`mma_m16n8k32_u8`]; the accumulators are `i32` bit patterns.
    mma_m16n8k32_s8 = "s8.s8";
    /// `mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32`: `D = A B + C` on one warp's
    /// fragments, unsigned 8-bit `A`, signed 8-bit `B`, exact 32-bit integer accumulation
    /// (wrapping). Fragments as [`mma_m16n8k32_u8`]; the accumulators are `i32` bit patterns.
    mma_m16n8k32_u8s8 = "u8.s8";
}

/// `mma.sync.aligned.m16n8k128.row.col.s32.b1.b1.s32.and.popc`: `D = popc(A AND B) + C` on one
/// warp's fragments, single-bit operands, 32-bit counts. `A` is 16 x 128 bits (lane `l` holds
/// row `l / 4` in `a[0]` and row `l / 4 + 8` in `a[1]`, bits `32 (l % 4) ..` of the row),
/// `B` is 128 x 8 bits (lane `l` holds column `l / 4`, bits `32 (l % 4) ..`), `D` is 16 x 8
/// (lane `l`: row `l / 4`, columns `2 (l % 4)` and `+ 1` in `d[0]`, `d[1]`; row `l / 4 + 8` in
/// `d[2]`, `d[3]`), as in the PTX ISA.
///
/// # Safety
/// Called by all 32 lanes of a warp together (sm_80 or newer).
#[inline(always)]
pub unsafe fn mma_m16n8k128_and_popc(a: [u32; 2], b: u32, c: [u32; 4]) -> [u32; 4] {
    let (d0, d1, d2, d3): (u32, u32, u32, u32);
    // SAFETY: a register-only warp-collective instruction (sm_80+); the caller guarantees
    // the whole warp executes it. Not `pure`, so it is never moved into divergent code.
    unsafe {
        asm!(
            "mma.sync.aligned.m16n8k128.row.col.s32.b1.b1.s32.and.popc {{{d0}, {d1}, {d2}, {d3}}}, \
             {{{a0}, {a1}}}, {{{b0}}}, {{{c0}, {c1}, {c2}, {c3}}};",
            d0 = out(reg32) d0, d1 = out(reg32) d1, d2 = out(reg32) d2, d3 = out(reg32) d3,
            a0 = in(reg32) a[0], a1 = in(reg32) a[1],
            b0 = in(reg32) b,
            c0 = in(reg32) c[0], c1 = in(reg32) c[1], c2 = in(reg32) c[2], c3 = in(reg32) c[3],
            options(nomem, nostack),
        );
    }
    [d0, d1, d2, d3]
}
