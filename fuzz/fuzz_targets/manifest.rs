//! cargo-fuzz entry for the `manifest` target; the body is `ahp_proxy::fuzzing::manifest`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ahp_proxy::fuzzing::manifest(data));
