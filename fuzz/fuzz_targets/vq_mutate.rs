//! A valid `vq_codebook::VqMatrix` container (a small matrix seeded by the input's first bytes, one of the
//! format's variants) mutated as the rest of the input says, with or without the CRC re-fixed:
//! refused, or loaded as a different valid matrix whose container is the mutated blob.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    cmv_format::testing::fuzz_mutate::<vq_codebook::VqMatrix>(data);
});
