//! cargo-fuzz entry for the `json` target; the body is `ahp_proxy::fuzzing::json`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ahp_proxy::fuzzing::json(data));
