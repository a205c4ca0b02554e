use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cmv_device::{DevPtr, DevPtrMut, KernelParams};
use cudarc::cublas::CudaBlas;
use cudarc::driver::sys::CUdevice_attribute as Attr;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, DevicePtrMut,
    DeviceRepr, LaunchArgs, LaunchConfig, PushKernelArg, ValidAsZeroBits,
};

use crate::Result;
use crate::error::{DriverResultExt, RuntimeError};

/// PTX text embedded in a format crate (`include_str!` of its committed, generated file).
#[derive(Debug)]
pub struct PtxModule {
    /// Name used in errors and as the cache key (the device crate's name).
    pub name: &'static str,
    /// The PTX source.
    pub ptx: &'static str,
}

impl PtxModule {
    /// Declares an embedded module.
    pub const fn new(name: &'static str, ptx: &'static str) -> Self {
        Self { name, ptx }
    }

    /// The PTX text of entry `name`, from its `.entry` line up to the next entry (or the end),
    /// if the module defines it: for tests that check what a kernel contains.
    pub fn entry(&self, name: &str) -> Option<&'static str> {
        let ptx = self.ptx;
        let start = ptx.find(&format!(".entry {name}("))?;
        let rest = &ptx[start + 1..];
        Some(&ptx[start..start + 1 + rest.find(".entry ").unwrap_or(rest.len())])
    }
}

/// What a benchmark or a launcher needs to know about the device.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    /// CUDA ordinal.
    pub ordinal: usize,
    /// Marketing name, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// L2 cache bytes.
    pub l2_bytes: usize,
    /// Device memory bytes.
    pub total_mem: usize,
    /// Largest dynamic shared memory a block may opt into, in bytes.
    pub max_smem_per_block_optin: u32,
    /// Peak memory bandwidth in bytes per second from the driver's memory clock and bus width
    /// (two transfers per clock), `None` where the driver does not report them. The nominal
    /// figure, not a measured one (`cmv-bench` measures its read ceiling): for rules that
    /// tell GPU kinds apart by how much data must be in flight.
    pub peak_bandwidth: Option<f64>,
    /// Driver API version, e.g. 13000 for CUDA 13.0.
    pub driver_version: i32,
}

/// Peak bandwidth in bytes per second of a memory clock of `clock_khz` kHz on a bus of
/// `bus_bits` bits, two transfers per clock; `None` when either is missing or not positive.
pub fn peak_bandwidth(clock_khz: Option<i32>, bus_bits: Option<i32>) -> Option<f64> {
    match (clock_khz, bus_bits) {
        (Some(c), Some(b)) if c > 0 && b > 0 => Some(2.0 * f64::from(c) * 1e3 * f64::from(b) / 8.0),
        _ => None,
    }
}

impl DeviceInfo {
    /// Peak memory bandwidth per SM in bytes per second ([`DeviceInfo::peak_bandwidth`] over
    /// the SMs), `None` where it is not known.
    pub fn peak_bandwidth_per_sm(&self) -> Option<f64> {
        self.peak_bandwidth
            .map(|b| b / f64::from(self.sm_count.max(1)))
    }

    /// Driver version as `major.minor`.
    pub fn driver_version_string(&self) -> String {
        format!(
            "{}.{}",
            self.driver_version / 1000,
            (self.driver_version % 1000) / 10
        )
    }
}

/// One CUDA device with its primary context, one stream, and the modules loaded so far.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    info: DeviceInfo,
    modules: Mutex<HashMap<&'static str, Arc<CudaModule>>>,
    blas: OnceLock<Arc<CudaBlas>>,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

/// True when `libcuda` can be loaded.
fn driver_present() -> bool {
    // SAFETY: tries to dlopen the system's CUDA driver library by its usual names; loading it
    // runs only the driver's own initializers.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

impl Gpu {
    /// Opens device `ordinal`.
    ///
    /// # Errors
    /// [`RuntimeError::NoDriver`] without a driver, [`RuntimeError::NoDevice`] when the ordinal
    /// is out of range, [`RuntimeError::Driver`] when the driver refuses.
    pub fn new(ordinal: usize) -> Result<Self> {
        if !driver_present() {
            return Err(RuntimeError::NoDriver);
        }
        cudarc::driver::result::init().op("cuInit")?;
        let count = CudaContext::device_count().op("cuDeviceGetCount")?;
        if ordinal >= count.max(0) as usize {
            return Err(RuntimeError::NoDevice { ordinal, count });
        }
        let ctx = CudaContext::new(ordinal).op("cuDevicePrimaryCtxRetain")?;
        // SAFETY: every buffer, copy and launch of this `Gpu` goes to its one stream, which
        // orders them, so cudarc's per-buffer events across streams are not needed.
        unsafe { ctx.disable_event_tracking() };
        // A stream of our own (not the legacy default stream), so that launches can be
        // captured into CUDA graphs for timing.
        let stream = ctx.new_stream().op("cuStreamCreate")?;
        let attr = |a: Attr, op: &'static str| ctx.attribute(a).op(op);
        let mut driver_version = 0;
        // SAFETY: cuDriverGetVersion writes one int to the pointer we pass.
        let rc = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut driver_version) };
        rc.result().op("cuDriverGetVersion")?;
        let info = DeviceInfo {
            ordinal,
            name: ctx.name().op("cuDeviceGetName")?,
            compute_capability: ctx.compute_capability().op("cuDeviceGetAttribute")?,
            sm_count: attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "SM count")? as u32,
            l2_bytes: attr(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 size")? as usize,
            total_mem: ctx.total_mem().op("cuDeviceTotalMem")?,
            max_smem_per_block_optin: attr(
                Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                "shared memory limit",
            )? as u32,
            peak_bandwidth: peak_bandwidth(
                ctx.attribute(Attr::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)
                    .ok(),
                ctx.attribute(Attr::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)
                    .ok(),
            ),
            driver_version,
        };
        Ok(Self {
            ctx,
            stream,
            info,
            modules: Mutex::new(HashMap::new()),
            blas: OnceLock::new(),
        })
    }

    /// Facts about the device.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// The context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream every launch of this `Gpu` goes to.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Loads `module` on first use (the driver JIT-compiles its PTX) and returns `kernel`.
    /// Where the environment variable `CMV_PTX_DIR` names a folder holding
    /// `<module name>.ptx` (e.g. `spqr-kernels.ptx`), that file is loaded instead of the
    /// embedded PTX: a tuning aid that times a kernel variant without rebuilding the host
    /// binary (the variant must keep the entry points and their parameters).
    ///
    /// # Errors
    /// [`RuntimeError::ModuleLoad`] when the driver rejects the PTX,
    /// [`RuntimeError::MissingKernel`] when the entry point is not in it,
    /// [`RuntimeError::PtxOverride`] when an override file exists but cannot be read.
    pub fn kernel(&self, module: &'static PtxModule, kernel: &'static str) -> Result<Kernel> {
        let m = {
            let mut modules = self.modules.lock().unwrap_or_else(|e| e.into_inner());
            match modules.get(module.name) {
                Some(m) => m.clone(),
                None => {
                    let ptx = cudarc::nvrtc::Ptx::from_src(module_source(module)?);
                    let m =
                        self.ctx
                            .load_module(ptx)
                            .map_err(|source| RuntimeError::ModuleLoad {
                                module: module.name,
                                source,
                            })?;
                    modules.insert(module.name, m.clone());
                    m
                }
            }
        };
        let func = m
            .load_function(kernel)
            .map_err(|_| RuntimeError::MissingKernel {
                module: module.name,
                kernel,
            })?;
        let params = if self.info.driver_version >= 12040 {
            first_param_bytes(&func)
        } else {
            None
        };
        Ok(Kernel {
            func,
            name: kernel,
            max_smem: self.info.max_smem_per_block_optin,
            params,
        })
    }

    /// [`Gpu::kernel`], then [`Kernel::check_config`] for blocks of `block_threads` threads
    /// with `smem` bytes of dynamic shared memory (which lets the kernel use more than 48 KiB):
    /// the kernel and the largest block it will be launched with, checked once at load.
    ///
    /// # Errors
    /// As [`Gpu::kernel`]; [`RuntimeError::InvalidLaunch`] where the block does not fit.
    pub fn kernel_for(
        &self,
        module: &'static PtxModule,
        kernel: &'static str,
        block_threads: u32,
        smem: u32,
    ) -> Result<Kernel> {
        let k = self.kernel(module, kernel)?;
        k.check_config(&LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (block_threads, 1, 1),
            shared_mem_bytes: smem,
        })?;
        Ok(k)
    }

    /// Copies `host` to a new device buffer.
    pub fn upload<T: DeviceRepr>(&self, host: &[T]) -> Result<CudaSlice<T>> {
        self.stream.clone_htod(host).op("cuMemcpyHtoD")
    }

    /// Copies a device buffer back to the host (synchronizes the stream).
    pub fn download<T: DeviceRepr>(&self, dev: &CudaSlice<T>) -> Result<Vec<T>> {
        self.stream.clone_dtoh(dev).op("cuMemcpyDtoH")
    }

    /// A new device buffer of `len` zeroed elements.
    pub fn alloc_zeros<T: DeviceRepr + ValidAsZeroBits>(&self, len: usize) -> Result<CudaSlice<T>> {
        self.stream.alloc_zeros(len).op("cuMemAlloc")
    }

    /// Waits for everything queued on the stream; reports errors of earlier launches.
    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().op("cuStreamSynchronize")
    }

    /// (free, total) device memory in bytes.
    pub fn mem_info(&self) -> Result<(usize, usize)> {
        self.ctx.mem_get_info().op("cuMemGetInfo")
    }

    /// A cuBLAS handle on this `Gpu`'s stream, created on first use.
    ///
    /// # Errors
    /// [`RuntimeError::NoCublas`] when `libcublas` cannot be loaded.
    pub fn cublas(&self) -> Result<Arc<CudaBlas>> {
        if let Some(b) = self.blas.get() {
            return Ok(b.clone());
        }
        // SAFETY: tries to dlopen libcublas by its usual names; loading it runs only the
        // library's own initializers.
        if !unsafe { cudarc::cublas::sys::is_culib_present() } {
            return Err(RuntimeError::NoCublas);
        }
        let b = Arc::new(CudaBlas::new(self.stream.clone()).map_err(|source| {
            RuntimeError::Cublas {
                op: "cublasCreate",
                source,
            }
        })?);
        Ok(self.blas.get_or_init(|| b).clone())
    }
}

/// The device address of `buf`, for a field of a kernel's parameter struct that the kernel
/// only reads. The one way for host code to get a [`DevPtr`].
pub fn dev_ptr<T>(buf: &CudaSlice<T>) -> DevPtr<T> {
    // The guard only records an event when cudarc tracks events, which a `Gpu` turns off.
    let (addr, _guard) = buf.device_ptr(buf.stream());
    // SAFETY: the address of a live device allocation of `T`s.
    unsafe { DevPtr::from_addr(addr) }
}

/// The device address of `buf`, for a field of a kernel's parameter struct that the kernel
/// writes. The one way for host code to get a [`DevPtrMut`]; takes `buf` mutably so that a
/// buffer the kernel writes is not also borrowed elsewhere when the parameters are made.
pub fn dev_ptr_mut<T>(buf: &mut CudaSlice<T>) -> DevPtrMut<T> {
    let stream = buf.stream().clone();
    // The guard only records an event when cudarc tracks events, which a `Gpu` turns off.
    let (addr, _guard) = buf.device_ptr_mut(&stream);
    // SAFETY: the address of a live device allocation of `T`s.
    unsafe { DevPtrMut::from_addr(addr) }
}

/// Bytes of a loaded kernel's first parameter, from the driver (`cuFuncGetParamInfo`, CUDA
/// 12.4 and newer); `None` where the driver does not say.
///
/// Only parameter 0 is asked for: probing for the parameter count would end in a refused call
/// (`CUDA_ERROR_INVALID_VALUE`), which compute-sanitizer reports as an API error. A typed
/// kernel has one parameter, its struct; every argument-by-argument kernel starts with a
/// pointer (8 bytes), smaller than any parameter struct, so the first parameter's size alone
/// tells a mismatch.
fn first_param_bytes(func: &CudaFunction) -> Option<usize> {
    use cudarc::driver::sys::{CUresult, cuFuncGetParamInfo};
    let (mut offset, mut size) = (0usize, 0usize);
    // SAFETY: a loaded function handle and two out-pointers to locals.
    let rc = unsafe { cuFuncGetParamInfo(func.cu_function(), 0, &mut offset, &mut size) };
    (rc == CUresult::CUDA_SUCCESS).then_some(size)
}

/// A kernel's parameter struct as cudarc's one kernel argument: the driver copies its
/// `size_of::<P>()` bytes into the kernel's single `.param` block.
#[repr(transparent)]
struct ParamBlock<P>(P);

// SAFETY: `P: KernelParams` is `repr(C)` plain data without padding, laid out as the kernel's
// one by-value parameter.
unsafe impl<P: KernelParams> DeviceRepr for ParamBlock<P> {}

/// A loaded kernel entry point.
///
/// Kernels whose device crate defines a parameter struct are launched with
/// [`Kernel::launch`]; [`Kernel::builder`] is the older, argument-by-argument path.
#[derive(Debug, Clone)]
pub struct Kernel {
    func: CudaFunction,
    name: &'static str,
    max_smem: u32,
    /// Bytes of the first parameter, where the driver reports them.
    params: Option<usize>,
}

impl Kernel {
    /// The entry point's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Checks `cfg` against the device's limits: a non-empty grid within
    /// (2^31 - 1, 65535, 65535), at most 1024 threads per block, and no more dynamic shared
    /// memory than the device allows (raising the kernel's limit when above 48 KiB).
    pub fn check_config(&self, cfg: &LaunchConfig) -> Result<()> {
        let invalid = |reason: String| RuntimeError::InvalidLaunch {
            kernel: self.name,
            reason,
        };
        let (gx, gy, gz) = cfg.grid_dim;
        let (bx, by, bz) = cfg.block_dim;
        if gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 {
            return Err(invalid(format!(
                "empty grid {:?} or block {:?}",
                cfg.grid_dim, cfg.block_dim
            )));
        }
        if gx > i32::MAX as u32 || gy > 65535 || gz > 65535 {
            return Err(invalid(format!(
                "grid {:?} exceeds (2^31-1, 65535, 65535)",
                cfg.grid_dim
            )));
        }
        let threads = u64::from(bx) * u64::from(by) * u64::from(bz);
        if threads > 1024 {
            return Err(invalid(format!("{threads} threads per block exceeds 1024")));
        }
        if cfg.shared_mem_bytes > self.max_smem {
            return Err(invalid(format!(
                "{} bytes of dynamic shared memory exceeds the device's {}",
                cfg.shared_mem_bytes, self.max_smem
            )));
        }
        if cfg.shared_mem_bytes > 48 * 1024 {
            self.func
                .set_attribute(
                    cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    cfg.shared_mem_bytes as i32,
                )
                .op("cuFuncSetAttribute")?;
        }
        Ok(())
    }

    /// How many blocks of `block_threads` threads with `dyn_smem` bytes of dynamic shared
    /// memory fit on one SM at once (for persistent grids). Call [`Kernel::check_config`] with
    /// that shared-memory size first when it is above 48 KiB.
    ///
    /// # Errors
    /// [`RuntimeError::Driver`] when the driver refuses the query.
    pub fn max_active_blocks_per_sm(&self, block_threads: u32, dyn_smem: u32) -> Result<u32> {
        self.func
            .occupancy_max_active_blocks_per_multiprocessor(block_threads, dyn_smem as usize, None)
            .op("cuOccupancyMaxActiveBlocksPerMultiprocessor")
    }

    /// Launches the kernel on `stream` with `params` as its one parameter, after checking
    /// `cfg` as [`Kernel::check_config`] does.
    ///
    /// `P` is the parameter struct the kernel's device crate defines for it; host and kernel
    /// agree on every field by that type. The pointers in it come from [`dev_ptr`] and
    /// [`dev_ptr_mut`].
    ///
    /// Where the driver reports a kernel's parameters (CUDA 12.4 and newer), it also checks
    /// that the kernel takes one parameter of `size_of::<P>()` bytes.
    ///
    /// # Errors
    /// [`RuntimeError::InvalidLaunch`] for a configuration outside the device's limits or a
    /// kernel whose parameters are not one `P`, [`RuntimeError::Driver`] when the driver refuses the launch (errors of the running
    /// kernel show up at the next synchronization).
    ///
    /// # Safety
    /// As for any kernel launch, the caller guarantees what the kernel's own contract (its
    /// `# Safety` section) asks for: this kernel takes `P` as its single parameter; every
    /// pointer in `params` points to a live device buffer on this kernel's context that holds
    /// everything the kernel reads or writes through it for the sizes in `params`, with the
    /// alignment the kernel needs; buffers the kernel writes are not read or written by other
    /// work while it runs; and `cfg` (grid, block, dynamic shared memory) is what the kernel
    /// expects for those sizes.
    pub unsafe fn launch<P: KernelParams>(
        &self,
        stream: &CudaStream,
        cfg: LaunchConfig,
        params: &P,
    ) -> Result<()> {
        self.check_launch::<P>(&cfg)?;
        let block = ParamBlock(*params);
        let mut l = stream.launch_builder(&self.func);
        l.arg(&block);
        // SAFETY: the caller guarantees the kernel's contract (see above); the driver copies
        // the parameter block before `launch` returns.
        unsafe { l.launch(cfg) }.op("cuLaunchKernel")?;
        Ok(())
    }

    /// As [`Kernel::launch`], with programmatic stream serialization (programmatic dependent
    /// launch, compute capability 9.0 and newer): the kernel may start before the kernel
    /// launched before it on `stream` has finished, as soon as every block of that kernel has
    /// run `griddepcontrol.launch_dependents` (or exited), so that its launch and its first
    /// independent loads overlap the other kernel's end. A kernel that reads what the kernel
    /// before it writes must run `griddepcontrol.wait` first (`cmv_device::griddepcontrol_wait`),
    /// which returns once that kernel has completed and its writes are visible. Stream capture
    /// records the launch as a programmatic edge of the graph.
    ///
    /// # Errors
    /// As [`Kernel::launch`].
    ///
    /// # Safety
    /// As [`Kernel::launch`], and: the kernel runs `griddepcontrol.wait` before it touches
    /// any memory that kernels launched before it on `stream` may still write or read.
    pub unsafe fn launch_programmatic<P: KernelParams>(
        &self,
        stream: &CudaStream,
        cfg: LaunchConfig,
        params: &P,
    ) -> Result<()> {
        use cudarc::driver::sys;
        self.check_launch::<P>(&cfg)?;
        let mut block = ParamBlock(*params);
        let mut args = [(&raw mut block).cast::<std::ffi::c_void>()];
        // SAFETY: a zeroed attribute is a valid `CU_LAUNCH_ATTRIBUTE_IGNORE` (plain data).
        let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        let config = sys::CUlaunchConfig {
            gridDimX: cfg.grid_dim.0,
            gridDimY: cfg.grid_dim.1,
            gridDimZ: cfg.grid_dim.2,
            blockDimX: cfg.block_dim.0,
            blockDimY: cfg.block_dim.1,
            blockDimZ: cfg.block_dim.2,
            sharedMemBytes: cfg.shared_mem_bytes,
            hStream: stream.cu_stream(),
            attrs: &raw mut attr,
            numAttrs: 1,
        };
        stream.context().bind_to_thread().op("cuCtxSetCurrent")?;
        // SAFETY: the caller guarantees the kernel's contract (see above); `config`, its one
        // attribute and the one parameter block live until the call returns, and the driver
        // copies the parameters before it returns.
        unsafe {
            sys::cuLaunchKernelEx(
                &raw const config,
                self.func.cu_function(),
                args.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
        .result()
        .op("cuLaunchKernelEx")?;
        Ok(())
    }

    /// [`Kernel::launch_programmatic`] where `programmatic` is true, else [`Kernel::launch`]:
    /// for launchers that decide per call (a rule, or a switch for comparisons).
    ///
    /// # Errors
    /// As [`Kernel::launch`].
    ///
    /// # Safety
    /// As [`Kernel::launch`], and where `programmatic` is true as
    /// [`Kernel::launch_programmatic`].
    pub unsafe fn launch_maybe_programmatic<P: KernelParams>(
        &self,
        stream: &CudaStream,
        cfg: LaunchConfig,
        params: &P,
        programmatic: bool,
    ) -> Result<()> {
        // SAFETY: the caller's contract, for the launch it asks for.
        unsafe {
            if programmatic {
                self.launch_programmatic(stream, cfg, params)
            } else {
                self.launch(stream, cfg, params)
            }
        }
    }

    /// The checks before a launch of one `P`: the parameter size where the driver reports it,
    /// and [`Kernel::check_config`].
    fn check_launch<P: KernelParams>(&self, cfg: &LaunchConfig) -> Result<()> {
        if let Some(first) = self.params {
            let size = std::mem::size_of::<P>();
            if first != size {
                return Err(RuntimeError::InvalidLaunch {
                    kernel: self.name,
                    reason: format!(
                        "the kernel's first parameter has {first} bytes, not those of one {} \
                         ({size} bytes)",
                        std::any::type_name::<P>()
                    ),
                });
            }
        }
        self.check_config(cfg)
    }

    /// The older launch path, for kernels not yet converted to a parameter struct: a launch
    /// builder on `stream` for this kernel; push the arguments one by one, in the order of the
    /// kernel's signature, then call the unsafe `launch` after [`Kernel::check_config`] and the
    /// checks the kernel's own contract needs. Prefer [`Kernel::launch`].
    pub fn builder<'a>(&'a self, stream: &'a CudaStream) -> LaunchArgs<'a> {
        stream.launch_builder(&self.func)
    }
}

/// The GPU for a test, or `None` (after printing why) where there is none.
///
/// With the environment variable `CMV_REQUIRE_GPU=1` (the GPU bundle's `run.sh` sets it) a
/// missing GPU is a test failure instead of a skip.
///
/// # Panics
/// When `CMV_REQUIRE_GPU=1` and no GPU can be opened, or when a driver is present but fails.
pub fn gpu_for_tests(test: &str) -> Option<Gpu> {
    let required = std::env::var("CMV_REQUIRE_GPU").is_ok_and(|v| v == "1");
    match Gpu::new(0) {
        Ok(gpu) => Some(gpu),
        Err(e @ (RuntimeError::NoDriver | RuntimeError::NoDevice { .. })) if !required => {
            // Written to stderr directly, past the test harness's capture, so a skip is seen.
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: no GPU ({e})");
            None
        }
        Err(e) => panic!("{test}: a GPU is required here but could not be opened: {e}"),
    }
}

/// The PTX of `module`: the file `<CMV_PTX_DIR>/<module name>.ptx` where the variable is set
/// and the file exists, else the embedded source.
fn module_source(module: &PtxModule) -> Result<String> {
    module_source_in(module, std::env::var_os("CMV_PTX_DIR").as_deref())
}

/// [`module_source`] with the folder given (`None`: the variable is not set).
fn module_source_in(module: &PtxModule, dir: Option<&std::ffi::OsStr>) -> Result<String> {
    if let Some(dir) = dir {
        let path = std::path::Path::new(dir).join(format!("{}.ptx", module.name));
        if path.exists() {
            return std::fs::read_to_string(&path).map_err(|source| RuntimeError::PtxOverride {
                path: path.display().to_string(),
                source,
            });
        }
    }
    Ok(module.ptx.to_owned())
}

#[cfg(test)]
mod ptx_override_tests {
    use super::*;

    #[test]
    fn an_entry_runs_to_the_next_one() {
        let m = PtxModule::new(
            "t",
            ".entry a(\n{ x; }\n.entry ab(\n{ y; }\n.entry b(\n{ z; }",
        );
        assert_eq!(m.entry("a"), Some(".entry a(\n{ x; }\n"));
        assert_eq!(m.entry("ab"), Some(".entry ab(\n{ y; }\n"));
        assert_eq!(m.entry("b"), Some(".entry b(\n{ z; }"));
        assert_eq!(m.entry("c"), None);
    }

    #[test]
    fn peak_bandwidth_is_two_transfers_per_clock_over_the_bus() {
        // An H100 SXM's 2619 MHz HBM3 on 5120 bits: its nominal 3.35 TB/s.
        let b = peak_bandwidth(Some(2_619_000), Some(5120)).unwrap();
        assert!((b - 3.352_32e12).abs() < 1e6, "{b}");
        assert_eq!(peak_bandwidth(None, Some(5120)), None);
        assert_eq!(peak_bandwidth(Some(2_619_000), None), None);
        assert_eq!(peak_bandwidth(Some(0), Some(5120)), None);
        assert_eq!(peak_bandwidth(Some(2_619_000), Some(-1)), None);
    }

    #[test]
    fn a_ptx_file_in_the_folder_replaces_the_embedded_source() {
        static M: PtxModule = PtxModule::new("override-test", "// embedded");
        let dir = std::env::temp_dir().join(format!("cmv-ptx-dir-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // No folder, or a folder without the module's file: the embedded source.
        assert_eq!(module_source_in(&M, None).unwrap(), "// embedded");
        assert_eq!(
            module_source_in(&M, Some(dir.as_os_str())).unwrap(),
            "// embedded"
        );
        // The module's file: its contents.
        std::fs::write(dir.join("override-test.ptx"), "// variant").unwrap();
        assert_eq!(
            module_source_in(&M, Some(dir.as_os_str())).unwrap(),
            "// variant"
        );
        // A file that cannot be read (a folder of that name): a typed error naming it.
        std::fs::remove_file(dir.join("override-test.ptx")).unwrap();
        std::fs::create_dir(dir.join("override-test.ptx")).unwrap();
        match module_source_in(&M, Some(dir.as_os_str())) {
            Err(RuntimeError::PtxOverride { path, .. }) => {
                assert!(path.ends_with("override-test.ptx"), "{path}")
            }
            other => panic!("expected PtxOverride, got {other:?}"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
