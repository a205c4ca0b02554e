//! Criterion benchmarks of cmv's CPU paths: `cargo bench -p benches`.
//!
//! GPU speed is measured by `cargo xtask bench`, never here: these benchmarks time the host
//! code (reference products now; encoders and decoders as the format crates land).
