//! cargo-fuzz entry for the `harness_message` target; the body is
//! `ahp_proxy::fuzzing::harness_message`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ahp_proxy::fuzzing::harness_message(data));
