//! Arbitrary bytes into the tiny test format of `crates/cmv-format/tests/tiny` (the harness's
//! own reference format): a check of the harness and the container reader under the fuzzer.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/cmv-format/tests/tiny/mod.rs"]
mod tiny;

fuzz_target!(|data: &[u8]| {
    cmv_format::testing::fuzz_bytes::<tiny::Tiny<{ tiny::OK }>>(data);
});
