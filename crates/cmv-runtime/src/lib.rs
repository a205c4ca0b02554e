//! The host runtime every cmv format crate launches its kernels through.
//!
//! * [`Gpu`]: one device, its context and stream, lazily loaded [`PtxModule`]s and the facts
//!   a benchmark needs ([`DeviceInfo`]: name, SM count, L2 size, driver version).
//! * [`Kernel`]: a loaded entry point whose launch configuration is validated before launch.
//!   [`Kernel::launch`] passes the kernel's parameter struct (defined in its device crate,
//!   marked [`KernelParams`]) as its one parameter; [`dev_ptr`] and [`dev_ptr_mut`] make the
//!   [`DevPtr`] / [`DevPtrMut`] fields from device buffers.
//! * [`time_launches`]: CUDA-event timing with warm-up, and [`time_graph`], the same over
//!   replays of a captured CUDA graph; [`Timings`] gives median and spread.
//! * [`tensor_map_2d`]: the tensor map a Hopper kernel's copy engine reads a matrix by.
//! * [`rotation_copies`]: how many weight copies make every timed call read from HBM.
//!
//! Nothing CUDA is needed to build or to run the CPU tests: `libcuda` is loaded at run time,
//! and a machine without it gets [`RuntimeError::NoDriver`], never a panic.
//!
//! GPU tests call [`gpu_for_tests`], which skips (with a message) where there is no GPU and
//! fails where `CMV_REQUIRE_GPU=1` says one must be there.

mod device;
mod error;
mod timing;
mod tma;

pub use cmv_device::{DevPtr, DevPtrMut, KernelParams, TensorMap};
pub use cudarc;
pub use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, LaunchConfig};
pub use device::{
    DeviceInfo, Gpu, Kernel, PtxModule, dev_ptr, dev_ptr_mut, gpu_for_tests, peak_bandwidth,
};
pub use error::{DriverResultExt, RuntimeError};
pub use timing::{Timings, rotation_copies, time_graph, time_launches};
pub use tma::{TmaElem, check_tensor_map_2d, tensor_map_2d};

/// Result alias of this crate.
pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;
