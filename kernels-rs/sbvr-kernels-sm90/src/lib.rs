//! The SBVR kernels of `sbvr-kernels` for Hopper (`sm_90a`), with programmatic dependent
//! launch: `cmv_sbvr_quantize` lets the GEMV launched after it start at once
//! (`griddepcontrol.launch_dependents`), and the GEMV issues its first weight loads and copies
//! the coefficient cache before it waits for the quantized inputs (`griddepcontrol.wait`), so
//! that the second launch overlaps the first. Same entry names, parameters and results as the
//! `sm_80` module; built to PTX by `cargo xtask ptx` (arch `sm_90a`); nothing here on the host.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]

#[cfg(target_arch = "nvptx64")]
sbvr_kernels::entry_points!(true);
