//! Arbitrary bytes into `bench::toy::Fp16Toy`'s `from_container` (the toy format written against
//! the `cmv_format` traits alone), as they are and with the CRC re-fixed: no panic; whatever
//! loads round-trips canonically and multiplies.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    cmv_format::testing::fuzz_bytes::<bench::toy::Fp16Toy>(data);
});
