//! Device helpers shared by the tensor-core kernels (`crate::mma`, `crate::gemm`) and by the
//! Hopper crate `vq-kernels-sm90`: the table lookup that lands a lane's MMA registers, and the
//! load and replicated store of a codebook entry into the tables (`crate::mma`'s layout).

use cmv_device::{DevPtr, U32x4, cp_async_16_zfill, ld_nc_u32, ld_nc_u64, ld_nc_v4, sts_v4};

use crate::gemm::{GEMM_ROW_GROUPS, VqGemmParams, code_stage_offset};
use crate::mma::{MMA_ENTRIES, entry_offset, lane_code_bytes, lookup_selector};

/// Looks up code byte `k` of `w` for this lane: `N` words at `tb + prmt(w, lo, sel(k))`
/// (`crate::mma::entry_offset` of the code plus `lo`, the lane's copy in table `P`). One asm
/// block, so that the table address folds into the load.
///
/// # Safety
/// `tb` is the tables in shared memory (`MMA_TABLES_BYTES` bytes); `lo < 256`.
#[inline(always)]
pub unsafe fn lookup<const N: usize>(w: u32, k: usize, lo: u32, tb: u32) -> [u32; 4] {
    let sel = lookup_selector(k as u32);
    macro_rules! go {
        ($ld:literal, $($o:ident)*) => {{
            $(let $o: u32;)*
            // SAFETY: the caller's tables; the address is below 64 KiB.
            unsafe {
                core::arch::asm!(
                    concat!("{{ .reg .b32 t; prmt.b32 t, {w}, {lo}, {sel}; add.u32 t, t, {tb}; ",
                            $ld, " }}"),
                    w = in(reg32) w, lo = in(reg32) lo, sel = in(reg32) sel, tb = in(reg32) tb,
                    $($o = out(reg32) $o,)*
                    options(readonly, nostack)
                );
            }
            [$($o,)*]
        }};
    }
    match N {
        1 => {
            let [a] = go!("ld.shared.u32 {a}, [t];", a);
            [a, 0, 0, 0]
        }
        2 => {
            let [a, b] = go!("ld.shared.v2.u32 {{{a}, {b}}}, [t];", a b);
            [a, b, 0, 0]
        }
        _ => go!("ld.shared.v4.u32 {{{a}, {b}, {c}, {d}}}, [t];", a b c d),
    }
}

/// Entry `tid` of codebook `tile` (`2 V` bytes).
///
/// # Safety
/// `codebooks` holds the matrix's codebooks (16-byte aligned, 256 entries of `V` values per
/// tile); `tile` a tile of the matrix; `tid < 256`.
#[inline(always)]
pub unsafe fn load_entry<const V: usize>(codebooks: DevPtr<u16>, tile: u32, tid: u32) -> [u32; 4] {
    let at = (tile as usize * MMA_ENTRIES + tid as usize) * V;
    // SAFETY: tile < tiles, tid < 256: entry tid of the codebook, aligned to 2 V bytes (the
    // codebooks are 16-byte aligned).
    unsafe {
        let e = codebooks.as_ptr().add(at);
        match V {
            2 => [ld_nc_u32(e as *const u32), 0, 0, 0],
            4 => {
                let w = ld_nc_u64(e as *const u64);
                [w as u32, (w >> 32) as u32, 0, 0]
            }
            _ => ld_nc_v4(e as *const U32x4).0,
        }
    }
}

/// Writes entry `tid` into table `P` (8 rotated stores of 16 bytes, as the GEMV does).
///
/// # Safety
/// `base` is the dynamic shared memory; no thread reads table `P` until the next barrier.
#[inline(always)]
pub unsafe fn write_entry<const V: usize, const P: u32>(base: u32, c: [u32; 4], tid: u32) {
    let val = match V {
        2 => U32x4([c[0]; 4]),
        4 => U32x4([c[0], c[1], c[0], c[1]]),
        _ => U32x4(c),
    };
    let tb = base + entry_offset(tid) + 128 * P;
    for k in 0..8 {
        // SAFETY: inside entry tid of table P.
        unsafe { sts_v4(tb + ((16 * (k as u32 + tid)) & 127), val) };
    }
}

/// Copies (`cp.async`, 16-byte chunks, no commit) the codes of slab `slab` of the 16 row groups
/// of 256-row block `rb` into the code stage at `stage` ([`crate::gemm::code_stage_offset`]);
/// thread `tid` of `T` takes every `T`-th chunk.
///
/// # Safety
/// `p` is a GEMM launch's parameters under its launcher's contract; `rb < row_blocks`,
/// `slab < slabs`; `stage` is `code_stage_bytes(V)` bytes of shared memory, 16-byte aligned,
/// that nothing reads until the copies have been waited for.
#[inline(always)]
pub unsafe fn copy_codes<const V: usize, const T: u32>(
    p: &VqGemmParams,
    stage: u32,
    rb: u32,
    slab: u32,
    tid: u32,
) {
    let lcb = lane_code_bytes(V) as u32;
    let chunks = GEMM_ROW_GROUPS * 32 * lcb / 16;
    let per_group = 32 * lcb / 16;
    let mut c = tid;
    while c < chunks {
        let (rg, q) = (c / per_group, c % per_group);
        let grg = (rb * GEMM_ROW_GROUPS + rg) as usize;
        let at = (grg * p.slabs as usize + slab as usize) * 32 * lcb as usize + 16 * q as usize;
        // SAFETY: grg < 16 * row_blocks <= code_groups, slab < slabs: inside the codes, 16-byte
        // aligned; the destination is inside the stage.
        unsafe {
            cp_async_16_zfill(
                stage + code_stage_offset(V, rg, 0) + 16 * q,
                (p.codes.as_ptr() as *const u8).add(at) as *const U32x4,
                16,
            )
        };
        c += T;
    }
}
