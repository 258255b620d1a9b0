//! Fuzz targets, shared by the cargo-fuzz crate in `fuzz/` and by `tests/fuzz_corpora.rs`:
//! each takes arbitrary bytes and drives one parser, or the AHP host, panicking only on a bug.
//!
//! Not part of the proxy's API: built only with the `fuzzing` feature, which the fuzz crate
//! and (through a dev-dependency) the tests turn on.

mod client_view;
mod frames;
mod judged;
mod parsers;
mod scratch;

pub use frames::{ahp_frames, app_channel};
pub use judged::harness_message;
pub use parsers::{config, frontmatter, json, manifest, plugin};

/// A target: any bytes in, a panic only on a bug.
pub type Target = fn(&[u8]);

/// Every target by name (the names of `fuzz/fuzz_targets/*.rs` and `fuzz/corpus/*`).
pub const TARGETS: &[(&str, Target)] = &[
    ("json", json),
    ("frontmatter", frontmatter),
    ("config", config),
    ("manifest", manifest),
    ("plugin", plugin),
    ("ahp_frames", ahp_frames),
    ("harness_message", harness_message),
];

/// `data` split at `separator` into at most `max` parts (the last keeps the rest).
fn split_parts(data: &[u8], separator: u8, max: usize) -> Vec<&[u8]> {
    data.splitn(max, |&b| b == separator).collect()
}

/// A leading `"<digit>\n"` picks a variant (`digit % variants`); without one, variant 0.
/// Returns the variant and the rest of the input.
fn variant(data: &[u8], variants: u8) -> (u8, &[u8]) {
    match data {
        [d @ b'0'..=b'9', b'\n', rest @ ..] => ((d - b'0') % variants, rest),
        _ => (0, data),
    }
}
