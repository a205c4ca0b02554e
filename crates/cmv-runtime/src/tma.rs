//! Tensor maps for the Hopper copy engine (TMA): [`tensor_map_2d`].

use crate::{Result, RuntimeError, TensorMap};
use cudarc::driver::sys::{
    self, CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapInterleave,
    CUtensorMapL2promotion, CUtensorMapSwizzle,
};
use cudarc::driver::{CudaSlice, DevicePtr, DriverError};

/// Element types of a [`tensor_map_2d`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TmaElem {
    /// 8-bit elements (int8 or uint8: the copy moves bytes).
    U8,
    /// fp16 elements.
    F16,
}

impl TmaElem {
    /// Bytes per element.
    pub const fn bytes(self) -> u64 {
        match self {
            TmaElem::U8 => 1,
            TmaElem::F16 => 2,
        }
    }
}

/// The checks of [`tensor_map_2d`] on a buffer of `buf_bytes` bytes, before any driver call:
/// what the copy engine takes with the 128-byte swizzle.
///
/// # Errors
/// [`RuntimeError::TensorMap`], naming the offending value.
pub fn check_tensor_map_2d(
    buf_bytes: u64,
    elem: TmaElem,
    rows: u64,
    cols: u64,
    box_rows: u32,
    box_cols: u32,
) -> Result<()> {
    let eb = elem.bytes();
    let bad = |reason: String| Err(RuntimeError::TensorMap { reason });
    if rows == 0 || cols == 0 {
        return bad(format!("an empty {rows}x{cols} matrix"));
    }
    if !(cols * eb).is_multiple_of(16) {
        return bad(format!(
            "rows of {cols} {elem:?} elements are {} bytes, not a multiple of 16",
            cols * eb
        ));
    }
    let box_bytes = u64::from(box_cols) * eb;
    if box_bytes == 0 || box_bytes > 128 || !box_bytes.is_multiple_of(16) {
        return bad(format!(
            "box rows of {box_cols} {elem:?} elements are {box_bytes} bytes; the 128-byte \
             swizzle takes 16 to 128 in steps of 16"
        ));
    }
    if box_rows == 0 || box_rows > 256 {
        return bad(format!(
            "{box_rows} box rows; the copy engine takes 1 to 256"
        ));
    }
    if rows.saturating_mul(cols).saturating_mul(eb) > buf_bytes {
        return bad(format!(
            "a {rows}x{cols} {elem:?} matrix does not fit its buffer of {buf_bytes} bytes"
        ));
    }
    Ok(())
}

/// The tensor map of a row-major `rows x cols` matrix of `elem`s at the start of `buf`, copied
/// in boxes of `box_rows x box_cols` elements into shared memory with the 128-byte swizzle
/// (`CU_TENSOR_MAP_SWIZZLE_128B`: in every 1024 bytes, 16-byte chunk `c` of 128-byte row `r`
/// lands at chunk `c ^ (r % 8)`). Elements of a box outside the matrix are written as zeros.
///
/// # Errors
/// [`RuntimeError::TensorMap`] for a shape the copy engine cannot take (rows not a multiple of
/// 16 bytes, a box row other than 16-128 bytes in 16-byte steps, more than 256 box rows, an
/// empty matrix, a buffer shorter than the matrix); [`RuntimeError::Driver`] when the driver
/// refuses the map.
pub fn tensor_map_2d<T>(
    buf: &CudaSlice<T>,
    elem: TmaElem,
    rows: u64,
    cols: u64,
    box_rows: u32,
    box_cols: u32,
) -> Result<TensorMap> {
    check_tensor_map_2d(
        (buf.len() * std::mem::size_of::<T>()) as u64,
        elem,
        rows,
        cols,
        box_rows,
        box_cols,
    )?;
    let eb = elem.bytes();
    let (addr, _guard) = buf.device_ptr(buf.stream());
    let dtype = match elem {
        TmaElem::U8 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT8,
        TmaElem::F16 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
    };
    let dims = [cols, rows];
    let strides = [cols * eb];
    let boxes = [box_cols, box_rows];
    let element_strides = [1u32, 1];
    let mut map = std::mem::MaybeUninit::<sys::CUtensorMap>::zeroed();
    // SAFETY: every pointer argument points at a live array of the length the rank (2) asks
    // for (the strides array has rank - 1 entries); `map` is writable; `addr` is a live device
    // allocation (cudarc's allocations are 256-byte aligned) holding the matrix (checked
    // above). The call only encodes the map on the host.
    let res = unsafe {
        sys::cuTensorMapEncodeTiled(
            map.as_mut_ptr(),
            dtype,
            2,
            addr as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            element_strides.as_ptr(),
            CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    res.result()
        .map_err(|source: DriverError| RuntimeError::Driver {
            op: "cuTensorMapEncodeTiled",
            source,
        })?;
    // SAFETY: the driver wrote the map (the call succeeded; it was zeroed before anyway).
    let map = unsafe { map.assume_init() };
    let mut words = [0u32; 32];
    for (i, q) in map.opaque.iter().enumerate() {
        words[2 * i] = *q as u32;
        words[2 * i + 1] = (*q >> 32) as u32;
    }
    Ok(TensorMap(words))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_the_copy_engine_cannot_take_are_refused_with_the_value() {
        let ok = |b, e, r, c, br, bc| check_tensor_map_2d(b, e, r, c, br, bc).is_ok();
        assert!(ok(4096 * 8192, TmaElem::F16, 4096, 4096, 128, 64));
        assert!(ok(4096 * 4096, TmaElem::U8, 4096, 4096, 16, 128));
        assert!(ok(32, TmaElem::F16, 1, 16, 128, 64));
        let msg = |b, e, r, c, br, bc| match check_tensor_map_2d(b, e, r, c, br, bc) {
            Err(RuntimeError::TensorMap { reason }) => reason,
            other => panic!("{other:?}"),
        };
        assert!(msg(1 << 20, TmaElem::F16, 0, 16, 128, 64).contains("empty 0x16"));
        assert!(msg(1 << 20, TmaElem::F16, 4, 12, 128, 64).contains("24 bytes"));
        assert!(msg(1 << 20, TmaElem::U8, 4, 8, 128, 128).contains("8 bytes"));
        assert!(msg(1 << 20, TmaElem::F16, 4, 64, 128, 128).contains("256 bytes"));
        assert!(msg(1 << 20, TmaElem::U8, 4, 64, 128, 8).contains("8 bytes"));
        assert!(msg(1 << 20, TmaElem::U8, 4, 64, 257, 128).contains("257 box rows"));
        assert!(msg(1 << 20, TmaElem::U8, 4, 64, 0, 128).contains("0 box rows"));
        assert!(msg(255, TmaElem::U8, 4, 64, 4, 64).contains("buffer of 255 bytes"));
        assert!(msg(1 << 40, TmaElem::F16, u64::MAX, 16, 1, 16).contains("does not fit"));
    }
}
