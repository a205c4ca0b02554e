use cudarc::driver::DriverError;

/// Everything that can go wrong between the host and the GPU.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// `libcuda` could not be loaded: no NVIDIA driver on this machine.
    #[error(
        "no CUDA driver: libcuda.so could not be loaded on this machine; run on a machine with \
         an NVIDIA GPU and driver (CPU-only functions work without one)"
    )]
    NoDriver,
    /// The driver loaded but has no device with this ordinal.
    #[error("no CUDA device {ordinal}: the driver reports {count} device(s)")]
    NoDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// Devices the driver sees.
        count: i32,
    },
    /// A driver call failed.
    #[error("CUDA driver call {op} failed: {source}")]
    Driver {
        /// What was being done.
        op: &'static str,
        /// The driver's error.
        #[source]
        source: DriverError,
    },
    /// `libcublas` could not be loaded.
    #[error(
        "cuBLAS could not be loaded (libcublas.so.13 not found); add the CUDA toolkit's lib64 \
         folder to LD_LIBRARY_PATH"
    )]
    NoCublas,
    /// A cuBLAS call failed.
    #[error("cuBLAS call {op} failed: {source}")]
    Cublas {
        /// What was being done.
        op: &'static str,
        /// cuBLAS's error.
        #[source]
        source: cudarc::cublas::result::CublasError,
    },
    /// The driver rejected an embedded PTX module.
    #[error(
        "PTX module {module} failed to load: {source}; the driver may be older than the PTX \
         (ISA 7.8 needs CUDA 11.8 or newer), or the PTX is damaged: regenerate it with \
         `cargo xtask ptx`"
    )]
    ModuleLoad {
        /// The module's name.
        module: &'static str,
        /// The driver's error.
        #[source]
        source: DriverError,
    },
    /// `CMV_PTX_DIR` names a folder whose PTX file for a module could not be read.
    #[error(
        "PTX override {path} (from CMV_PTX_DIR) could not be read: {source}; fix the file or \
         unset CMV_PTX_DIR to use the embedded PTX"
    )]
    PtxOverride {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A kernel is missing from its module.
    #[error(
        "kernel {kernel} not found in PTX module {module}; the committed PTX is stale: run \
         `cargo xtask ptx`"
    )]
    MissingKernel {
        /// The module's name.
        module: &'static str,
        /// The entry point asked for.
        kernel: &'static str,
    },
    /// A tensor map the copy engine cannot take ([`crate::tensor_map_2d`]).
    #[error("tensor map refused: {reason}")]
    TensorMap {
        /// What is wrong, with the values.
        reason: String,
    },
    /// A launch configuration outside the device's limits.
    #[error("launch of {kernel} refused: {reason}")]
    InvalidLaunch {
        /// The entry point.
        kernel: &'static str,
        /// Which limit was broken, with the values.
        reason: String,
    },
}

/// Attaches the name of the driver call to a [`DriverError`].
pub trait DriverResultExt<T> {
    /// Maps the error to [`RuntimeError::Driver`] with `op` as the call's name.
    fn op(self, op: &'static str) -> Result<T, RuntimeError>;
}

impl<T> DriverResultExt<T> for Result<T, DriverError> {
    fn op(self, op: &'static str) -> Result<T, RuntimeError> {
        self.map_err(|source| RuntimeError::Driver { op, source })
    }
}
