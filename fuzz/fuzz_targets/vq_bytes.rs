//! Arbitrary bytes into `vq_codebook::VqMatrix`'s `from_container`, as they are and with the CRC re-fixed:
//! no panic; whatever loads round-trips canonically and multiplies.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    cmv_format::testing::fuzz_bytes::<vq_codebook::VqMatrix>(data);
});
