//! The `ans-lanes` kernels of `ans-kernels` (`cmv_ans_lanes`, `cmv_ans_lanes2`) for Hopper
//! (`sm_90a`), with programmatic dependent launch: a product launched after another (the next
//! layer of a chain) starts while that one ends (`griddepcontrol.launch_dependents` at once),
//! builds its table and issues its first stream copies, and waits for it
//! (`griddepcontrol.wait`) before it reads its input or writes its outputs, which it then reads
//! with coherent loads. Same entry names, parameters and results as the `sm_80` module; built
//! to PTX by `cargo xtask ptx` (arch `sm_90a`); nothing here on the host.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]

#[cfg(target_arch = "nvptx64")]
ans_kernels::lanes_entry_points!(true);
