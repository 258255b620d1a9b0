//! The quick version of the fuzzing (`scripts/fuzz.sh` is the long one): every committed
//! seed in `fuzz/corpus/<target>/` and every fixed crash in `fuzz/regressions/<target>/`
//! goes through its target once, on stable, under plain `cargo test`.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::Once;

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

thread_local! {
    /// Panics on this thread so far, tasks of the target's (current-thread) runtime
    /// included: tokio catches those, so `catch_unwind` alone would not see them.
    static PANICS: Cell<usize> = const { Cell::new(0) };
}

/// Count every panic on its thread (and still print it as usual).
fn count_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let print = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.with(|p| p.set(p.get() + 1));
            print(info);
        }));
    });
}

/// Run every input of `target`; name each one that panicked, in the target or in a task
/// it spawned.
fn replay(target: &str) {
    count_panics();
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
            let before = PANICS.with(Cell::get);
            std::panic::catch_unwind(|| run(&data)).is_err() || PANICS.with(Cell::get) != before
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

/// Seeds that address `mcp://` channels name the app server's as the host derives it, at
/// least once each (were the derivation to change, they would only hit "unknown channel"
/// and pass; some also name a channel that does not exist, on purpose).
#[test]
fn seeds_name_the_app_servers_channel_as_the_host_does() {
    let channel = ahp_proxy::fuzzing::app_channel();
    let mut naming = 0;
    for file in inputs("ahp_frames") {
        let text = String::from_utf8_lossy(&std::fs::read(&file).unwrap()).into_owned();
        if text.contains("mcp://default/") {
            assert!(
                text.contains(&channel),
                "{} names no {channel}",
                file.display()
            );
            naming += 1;
        }
    }
    assert!(naming > 0, "no seed addresses {channel}");
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

#[test]
fn harness_message_corpus() {
    replay("harness_message");
}

/// `AHP_PROXY_FUZZ_INPUT=<file> AHP_PROXY_FUZZ_TARGET=<name> cargo test --test fuzz_corpora
/// one_input -- --ignored --nocapture`: run one file (a crash found by `scripts/fuzz.sh`) in a
/// debugger-friendly way.
#[test]
#[ignore = "a tool for one input, run by hand with AHP_PROXY_FUZZ_INPUT and _TARGET"]
fn one_input() {
    let file = std::env::var_os("AHP_PROXY_FUZZ_INPUT").expect("AHP_PROXY_FUZZ_INPUT=<file>");
    let target = std::env::var("AHP_PROXY_FUZZ_TARGET").expect("AHP_PROXY_FUZZ_TARGET=<name>");
    let (_, run) = TARGETS
        .iter()
        .find(|(name, _)| *name == target)
        .unwrap_or_else(|| panic!("no fuzz target {target}"));
    run(&std::fs::read(file).unwrap());
}
