//! Kernel parameter blocks: device pointers that host and kernel share by type.
//!
//! A kernel takes all its parameters as one `#[repr(C)]` struct, by value, defined in its
//! device crate (which also builds for the host):
//!
//! ```ignore
//! #[repr(C)]
//! #[derive(Clone, Copy, Debug)]
//! pub struct ScaleParams { pub x: DevPtr<f32>, pub y: DevPtrMut<f32>, pub n: u32, pub pad: u32 }
//! const _: () = assert!(core::mem::size_of::<ScaleParams>() == 24);
//! // SAFETY: repr(C), no padding bytes (asserted above), plain data and device pointers only.
//! unsafe impl KernelParams for ScaleParams {}
//!
//! #[unsafe(no_mangle)]
//! pub unsafe extern "ptx-kernel" fn scale(p: ScaleParams) { /* p.x.as_ptr(), ... */ }
//! ```
//!
//! The host fills the same struct with pointers that only `cmv-runtime` makes from its device
//! buffers (`cmv_runtime::dev_ptr`) and launches with `Kernel::launch`, which passes the struct
//! as the kernel's one parameter.
//!
//! Rust's `extern "ptx-kernel"` ABI passes such a struct as one `.param .align A .b8 name[N]`
//! (LLVM sees `[N/A x iA]`) that the kernel reads with `ld.param`, never copied to local
//! memory. Pointers read from it are generic addresses (LLVM cannot tell they are global, as it
//! can for a kernel's pointer parameters), so plain stores through them are `st` rather than
//! `st.global`; the loads of `cmv-device` name their state space in PTX and are unaffected.
//! `docs/TOOLCHAIN.md` ("Device-code facts") has the details.

use core::fmt;
use core::marker::PhantomData;

/// Marks a kernel's parameter struct, which `cmv-runtime`'s typed launch passes to the kernel
/// as its single parameter.
///
/// # Safety
/// The type is `#[repr(C)]` with no padding bytes (an explicit `pad` field fills any gap, and a
/// `size_of` assert next to the type pins the size), every field is plain data (integers,
/// floats, [`DevPtr`], [`DevPtrMut`], arrays of these), and it is the one by-value parameter of
/// every kernel it is launched with.
pub unsafe trait KernelParams: Copy + 'static {}

/// The address of device memory a kernel reads, as it travels in a parameter struct: 64 bits
/// as two 32-bit words, low word first (the bytes of a little-endian `u64`), aligned to 4.
///
/// The alignment of 4 keeps a struct of device pointers and 32-bit fields at alignment 4, which
/// Rust's kernel ABI passes as 32-bit words, every `u32` field its own word (see the module
/// documentation).
///
/// The host gets one only from `cmv-runtime` (`cmv_runtime::dev_ptr`, from a device buffer);
/// the kernel turns it into a `*const T` with `DevPtr::as_ptr` (on the device).
#[repr(C)]
pub struct DevPtr<T>([u32; 2], PhantomData<*const T>);

/// The address of device memory a kernel writes (and may read), laid out as [`DevPtr`].
///
/// The host gets one only from `cmv-runtime` (`cmv_runtime::dev_ptr_mut`, from a device buffer
/// borrowed mutably); the kernel turns it into a `*mut T` with `DevPtrMut::as_mut_ptr`.
#[repr(C)]
pub struct DevPtrMut<T>([u32; 2], PhantomData<*mut T>);

macro_rules! dev_ptr_common {
    ($ty:ident) => {
        impl<T> $ty<T> {
            /// Wraps a device address.
            ///
            /// # Safety
            /// Not for use outside `cmv-runtime`, which makes these from its device buffers:
            /// `addr` must be the address of device memory that holds the `T`s the kernels
            /// launched with it access.
            #[doc(hidden)]
            #[inline(always)]
            pub const unsafe fn from_addr(addr: u64) -> Self {
                Self([addr as u32, (addr >> 32) as u32], PhantomData)
            }

            /// Address zero, for a field the launched kernel does not use (it must not
            /// access memory through it).
            #[inline(always)]
            pub const fn null() -> Self {
                Self([0, 0], PhantomData)
            }

            /// The device address.
            #[inline(always)]
            pub const fn addr(self) -> u64 {
                self.0[0] as u64 | (self.0[1] as u64) << 32
            }

            /// The same address, read as `U`s (what a kernel that loads 16-byte chunks of a
            /// buffer of `u16`s takes, say).
            #[inline(always)]
            pub const fn cast<U>(self) -> $ty<U> {
                $ty(self.0, PhantomData)
            }
        }

        impl<T> Clone for $ty<T> {
            #[inline(always)]
            fn clone(&self) -> Self {
                *self
            }
        }

        impl<T> Copy for $ty<T> {}

        impl<T> PartialEq for $ty<T> {
            fn eq(&self, other: &Self) -> bool {
                self.addr() == other.addr()
            }
        }

        impl<T> Eq for $ty<T> {}

        impl<T> fmt::Debug for $ty<T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($ty), "({:#x})"), self.addr())
            }
        }

        // SAFETY: an address is plain data; what may be done through it is decided by the
        // (unsafe) launch.
        unsafe impl<T> Send for $ty<T> {}
        // SAFETY: as above.
        unsafe impl<T> Sync for $ty<T> {}

        const _: () = assert!(core::mem::size_of::<$ty<u8>>() == 8);
        const _: () = assert!(core::mem::align_of::<$ty<u8>>() == 4);
    };
}

dev_ptr_common!(DevPtr);
dev_ptr_common!(DevPtrMut);

#[cfg(target_arch = "nvptx64")]
impl<T> DevPtr<T> {
    /// The pointer, for the kernel's loads.
    #[inline(always)]
    pub fn as_ptr(self) -> *const T {
        self.addr() as *const T
    }
}

#[cfg(target_arch = "nvptx64")]
impl<T> DevPtrMut<T> {
    /// The pointer, for the kernel's stores and loads.
    #[inline(always)]
    pub fn as_mut_ptr(self) -> *mut T {
        self.addr() as *mut T
    }
}

impl<T> DevPtrMut<T> {
    /// The same address, for reading only.
    #[inline(always)]
    pub const fn as_const(self) -> DevPtr<T> {
        DevPtr(self.0, PhantomData)
    }
}

/// A CUDA tensor map (`CUtensorMap`: 128 opaque bytes saying where a tensor is, its sizes and
/// strides, the box one copy moves and how the box is laid out in shared memory), as it
/// travels in a parameter struct: 32 words, aligned to 4 like the rest of the struct.
///
/// The host makes one with `cmv_runtime::tensor_map_2d` (`cuTensorMapEncodeTiled`). A kernel
/// uses it in place, in its parameter space, by the generic address of its parameter struct
/// (`cvta.param` of the parameter's symbol, as `nvcc` does for a `__grid_constant__`
/// parameter): the tensor copy needs the map 64-byte aligned, which holds for maps at offsets
/// that are multiples of 64 from the start of a kernel's first parameter (parameter space
/// starts 64-byte aligned, as `nvcc`'s `.align 64` tensor-map parameters at offset 0 rely on).
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TensorMap(pub [u32; 32]);

const _: () = assert!(core::mem::size_of::<TensorMap>() == 128);
const _: () = assert!(core::mem::align_of::<TensorMap>() == 4);

impl TensorMap {
    /// All zero: not a valid map, for a field the launched kernel does not use.
    pub const ZERO: Self = Self([0; 32]);
}

impl fmt::Debug for TensorMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The first 8 bytes hold the tensor's address on every driver seen so far, but the
        // layout is opaque: print a digest, not fields.
        let sum = self.0.iter().fold(0u32, |a, &w| a.rotate_left(5) ^ w);
        write!(f, "TensorMap({sum:#010x})")
    }
}
