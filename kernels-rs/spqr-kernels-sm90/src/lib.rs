//! The kernels of `spqr-kernels` for Hopper
//! (`sm_90a`), with programmatic dependent launch: `cmv_spqr_prep_inputs` lets the product
//! launched after it start once each of its blocks has started or written its values
//! (`griddepcontrol.launch_dependents`, `spqr_kernels::early_dependents`), and the product's
//! weight warps start their first weight copies before they wait for the prep's inputs and
//! tile sums (`griddepcontrol.wait`), so that the second launch overlaps the first. The routed
//! kernels (1 and 2 vectors) and the integer-MMA kernels of one vector let the next launch
//! start at once and wait for the one before after their first weight copies
//! (`spqr_kernels::routed_entry_points!`), so that a call overlaps the end of the one before. Same entry
//! names, parameters and results as the `sm_80` module; built to PTX by `cargo xtask ptx`
//! (arch `sm_90a`); nothing here on the host.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]

#[cfg(target_arch = "nvptx64")]
spqr_kernels::scaled_entry_points!(true);

#[cfg(target_arch = "nvptx64")]
spqr_kernels::routed_entry_points!(true);
