//! cargo-fuzz entry for the `config` target; the body is `ahp_proxy::fuzzing::config`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ahp_proxy::fuzzing::config(data));
