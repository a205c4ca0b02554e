//! MatVANS (entropy-coded int8 matrices) for cmv: the coder core that the host encoder and CPU
//! decoder share with the GPU kernels, the layout constants, and (on `nvptx64`) the kernels.
//!
//! The format is specified in `docs/ANS.md`; [`coder`] holds the one decode step and its
//! inverse, [`layout`] the constants and the word interleaving every layout uses.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx))]

pub mod coder;
pub mod layout;

#[cfg(target_arch = "nvptx64")]
pub mod kernels;

/// The most input vectors one launch multiplies: the kernels take one.
pub const MAX_BATCH: usize = 1;

/// Error flag bits a kernel ORs into its error word: a unit's stream ran out (or its offsets
/// were inconsistent).
pub const ERR_STREAM_OVERRUN: u32 = 1;
/// Error flag: a coder did not end in its initial state.
pub const ERR_FINAL_STATE: u32 = 2;
