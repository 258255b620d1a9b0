//! cargo-fuzz entry for the `ahp_frames` target; the body is `ahp_proxy::fuzzing::ahp_frames`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ahp_proxy::fuzzing::ahp_frames(data));
