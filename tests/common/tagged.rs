//! The fault tests' proxy: every example server it runs carries one tag in its environment
//! (so whatever a server starts is found, wherever it is reparented), beside `steady`.

use std::sync::atomic::{AtomicU64, Ordering};

use super::{server, Proxy, Watcher};

/// Every tool in `/mcp` is `<server>__<tool>`, whoever is up: names never shift under a
/// test while servers crash and come back.
pub const ALWAYS_PREFIX: &str = "[mcp]\nprefix = \"always\"\n";

/// A tag no other test (or test run) uses: every server of a test carries it in its
/// environment, and so do its children, even after they are reparented.
pub fn tag(test: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    format!(
        "{test}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// `[servers.<name>]` for an example server, tagged.
pub fn tagged(name: &str, kind: &str, extra: &[&str], tag: &str) -> String {
    format!(
        "{}env = {{ AHP_FAULT_TAG = \"{tag}\" }}\n",
        server(name, kind, extra)
    )
}

/// Every live process whose environment carries a tag starting with `tag`, wherever it is
/// in the process tree now.
pub fn carrying(tag: &str) -> Vec<u32> {
    let needle = format!("AHP_FAULT_TAG={tag}");
    super::pids()
        .into_iter()
        .filter(|pid| super::alive(*pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                env.split(|b| *b == 0)
                    .any(|var| var.starts_with(needle.as_bytes()))
            })
        })
        .collect()
}

/// A running proxy whose servers are tagged, one of them `steady` (an echo server that
/// behaves: what must keep working while the others misbehave), and a watcher of it.
pub struct Tagged {
    pub tag: String,
    pub proxy: Proxy,
    pub w: Watcher,
    /// Every state change the watcher saw (`name kind`).
    pub seen: Vec<String>,
}

impl Tagged {
    /// Start the proxy on `head` (e.g. `[supervisor]` timings), the servers `servers` writes
    /// for the tag (with [`tagged`]) and `steady`, tools always prefixed; returns once
    /// `steady` is ready. `test` names the tag.
    pub async fn start(test: &str, head: &str, servers: impl FnOnce(&str) -> String) -> Self {
        let tag = tag(test);
        assert!(carrying(&tag).is_empty());
        let config = format!(
            "{head}{ALWAYS_PREFIX}{}{}",
            servers(&tag),
            tagged("steady", "echo", &[], &tag)
        );
        let proxy = Proxy::start(&config);
        let mut w = Watcher::open(&proxy).await;
        let mut seen = Vec::new();
        w.until("steady", "ready", &mut seen).await;
        Self {
            tag,
            proxy,
            w,
            seen,
        }
    }
}
