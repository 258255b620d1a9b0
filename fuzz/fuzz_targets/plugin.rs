//! cargo-fuzz entry for the `plugin` target; the body is `ahp_proxy::fuzzing::plugin`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ahp_proxy::fuzzing::plugin(data));
