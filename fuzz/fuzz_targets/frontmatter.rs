//! cargo-fuzz entry for the `frontmatter` target; the body is `ahp_proxy::fuzzing::frontmatter`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ahp_proxy::fuzzing::frontmatter(data));
