//! The quick version of the fuzzing (`scripts/fuzz.sh` is the long one): every committed
//! seed in `fuzz/corpus/<target>/` and every fixed crash in `fuzz/regressions/<target>/`
//! goes through its target once, on stable, under plain `cargo test`.

use std::path::{Path, PathBuf};

use ahp_proxy::fuzzing::TARGETS;

fn inputs(target: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut files = Vec::new();
    for kind in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(kind).join(target)) else {
            continue;
        };
        files.extend(entries.filter_map(Result::ok).map(|e| e.path()));
    }
    files.sort();
    files
}

/// Run every input of `target`; name each one that panicked.
fn replay(target: &str) {
    let (_, run) = TARGETS
        .iter()
        .find(|(name, _)| *name == target)
        .unwrap_or_else(|| panic!("no fuzz target {target}"));
    let files = inputs(target);
    assert!(!files.is_empty(), "no corpus for {target}");
    let failed: Vec<String> = files
        .iter()
        .filter(|file| {
            let data = std::fs::read(file).unwrap();
            std::panic::catch_unwind(|| run(&data)).is_err()
        })
        .map(|file| file.display().to_string())
        .collect();
    assert!(failed.is_empty(), "{target} panicked on {failed:#?}");
}

#[test]
fn every_corpus_folder_is_a_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    for kind in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(kind)) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().into_owned();
            assert!(
                TARGETS.iter().any(|(target, _)| *target == name),
                "fuzz/{kind}/{name} is not a target"
            );
        }
    }
    for (target, _) in TARGETS {
        let source = root.join("fuzz_targets").join(format!("{target}.rs"));
        assert!(source.is_file(), "{} is missing", source.display());
    }
}

#[test]
fn json_corpus() {
    replay("json");
}

#[test]
fn frontmatter_corpus() {
    replay("frontmatter");
}

#[test]
fn config_corpus() {
    replay("config");
}

#[test]
fn manifest_corpus() {
    replay("manifest");
}

#[test]
fn plugin_corpus() {
    replay("plugin");
}

#[test]
fn ahp_frames_corpus() {
    replay("ahp_frames");
}

/// `AHP_PROXY_FUZZ_INPUT=<file> AHP_PROXY_FUZZ_TARGET=<name> cargo test --test fuzz_corpora
/// one_input -- --nocapture`: run one file (a crash found by `scripts/fuzz.sh`) in a debugger-
/// friendly way.
#[test]
fn one_input() {
    let (Some(file), Some(target)) = (
        std::env::var_os("AHP_PROXY_FUZZ_INPUT"),
        std::env::var("AHP_PROXY_FUZZ_TARGET").ok(),
    ) else {
        return;
    };
    let (_, run) = TARGETS
        .iter()
        .find(|(name, _)| *name == target)
        .unwrap_or_else(|| panic!("no fuzz target {target}"));
    run(&std::fs::read(file).unwrap());
}
