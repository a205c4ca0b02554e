//! Kernels that exercise the warp, shared-memory and index intrinsics of `cmv-device`, so that
//! `cmv-runtime`'s GPU tests check them against their definitions on real hardware.
//!
//! `cmv_selftest_warp(`[`SelftestWarpParams`]` { input, out })`: for every thread `i` of a
//! one-dimensional grid of blocks of at most 256 threads, with `v = input[i]`, writes
//! [`OUTPUTS`] words to `out[OUTPUTS * i ..]`, in the order of [`Output`].
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]

use cmv_device::{DevPtr, DevPtrMut, KernelParams};

/// Parameters of `cmv_selftest_warp`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SelftestWarpParams {
    /// One word per thread of the grid.
    pub input: DevPtr<u32>,
    /// [`OUTPUTS`] words per thread of the grid.
    pub out: DevPtrMut<u32>,
}
const _: () = assert!(core::mem::size_of::<SelftestWarpParams>() == 16);
// SAFETY: repr(C), no padding (size asserted), device pointers only; the one parameter of
// `cmv_selftest_warp`.
unsafe impl KernelParams for SelftestWarpParams {}

/// Words each thread writes.
pub const OUTPUTS: usize = 8;

/// Largest block the self-test kernel supports (its static shared tile holds one word per
/// thread).
pub const MAX_BLOCK: u32 = 256;

/// What each output word of a thread holds (`lane` is the thread's lane, `v` its input).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Output {
    /// `shfl_idx(v, (7 * lane + 3) % 32)`.
    ShflIdx = 0,
    /// `shfl_xor(v, 5)`.
    ShflXor = 1,
    /// `shfl_down(v, 3)` (own value for lanes 29..32).
    ShflDown = 2,
    /// `ballot(v is odd)`.
    Ballot = 3,
    /// `popc(v)`.
    Popc = 4,
    /// `v` of thread `(tid + 1) % block_dim` of the same block, through static shared memory and
    /// a barrier.
    SharedNext = 5,
    /// Wrapping sum of `v` over the warp.
    WarpSum = 6,
    /// `block_idx_x`.
    Block = 7,
}

#[cfg(target_arch = "nvptx64")]
mod kernels {
    use cmv_device::{
        ballot, block_dim_x, block_idx_x, global_thread_x, lane_id, popc, shfl_down, shfl_idx,
        shfl_xor, static_shared, sync_threads, thread_idx_x, warp_sum_i32,
    };

    use crate::{OUTPUTS, SelftestWarpParams};

    /// See the crate documentation.
    ///
    /// # Safety
    /// `p.input` holds one word and `p.out` [`OUTPUTS`] words per thread of the grid; blocks
    /// have a multiple of 32 threads, at most [`crate::MAX_BLOCK`].
    #[unsafe(no_mangle)]
    pub unsafe extern "ptx-kernel" fn cmv_selftest_warp(p: SelftestWarpParams) {
        let (input, out) = (p.input.as_ptr(), p.out.as_mut_ptr());
        let i = global_thread_x() as usize;
        let lane = lane_id();
        // SAFETY: one input word per thread.
        let v = unsafe { *input.add(i) };
        // SAFETY: blocks are whole warps and every thread runs every collective below.
        let (idx, xor, down, bal, sum) = unsafe {
            (
                shfl_idx(v, (7 * lane + 3) % 32),
                shfl_xor(v, 5),
                shfl_down(v, 3),
                ballot(v & 1 == 1),
                warp_sum_i32(v as i32) as u32,
            )
        };
        // SAFETY: declared once, in this kernel only; 1 KiB = 256 words, one per thread.
        let tile = unsafe { static_shared!(CMV_SELFTEST_TILE, 1024) } as *mut u32;
        let tid = thread_idx_x();
        // SAFETY: tid < 256.
        unsafe { *tile.add(tid as usize) = v };
        // SAFETY: every thread of the block reaches this barrier.
        unsafe { sync_threads() };
        // SAFETY: the neighbour index is below block_dim <= 256.
        let next = unsafe { *tile.add(((tid + 1) % block_dim_x()) as usize) };
        let words = [idx, xor, down, bal, popc(v), next, sum, block_idx_x()];
        const _: () = assert!(OUTPUTS == 8);
        for (k, w) in words.into_iter().enumerate() {
            // SAFETY: OUTPUTS words per thread, in the order of `Output`.
            unsafe { *out.add(i * OUTPUTS + k) = w };
        }
    }
}
