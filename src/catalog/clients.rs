//! Plugins AHP clients publish, one more source for the catalog: a published plugin whose
//! `uri` names a plugin folder on this host is read by the plugin scanner like any other
//! (every dialect, children, ranges, load states, its servers) and shown as the client
//! published it (its id, name, enablement, `clientId`) in the session it was published in;
//! one the host cannot read is shown with `load: error` saying why. Pure but for the reads.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ahp_types::actions::{SessionCustomizationRemovedAction, SessionCustomizationUpdatedAction};
use ahp_types::state::{
    ChildCustomization, ClientPluginCustomization, Customization, CustomizationErrorState,
    CustomizationLoadState, PluginCustomization,
};
use ahp_types::StateAction;

use super::Scanned;
use crate::discovery::{mcp, plugin, uri, Context, DeclaredServer, Scan};
use crate::spec::{effective_enablement, LaunchError, Problem, PublishedPlugin};

/// Why a client plugin's server does not start with `[clients] launch_servers = false`.
pub const NOT_LAUNCHED: &str = "the MCP servers of plugins AHP clients publish are not started by this proxy ([clients] launch_servers = false)";

/// Folders below one published plugin that are watched; a bigger one has only its top
/// folder watched (a client must not make the proxy spend the machine's inotify watches).
pub const WATCH_FOLDERS: usize = 1_000;
/// Folders below all published plugins together that are watched; past it, further plugins
/// have only their top folder watched.
pub const WATCH_FOLDERS_TOTAL: usize = 20_000;

/// One published plugin: the session it was published in, its client, its id there.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientKey {
    /// The session URI.
    pub session: String,
    /// The client's `clientId`.
    pub client: String,
    /// The plugin's id, as published.
    pub id: String,
}

/// A container as one session shows it, by `(session, id)`.
pub type View = BTreeMap<(String, String), Customization>;

/// One published plugin as the catalog keeps it.
struct Entry {
    /// As the client published it.
    published: ClientPluginCustomization,
    /// The folder its `uri` names on this host, when it names one.
    dir: Option<PathBuf>,
    /// Folders in it when it looked like a plugin of at most [`WATCH_FOLDERS`] folders (then
    /// it is watched with everything in it, budget allowing); `None` otherwise.
    folders: Option<usize>,
    /// What the plugin scanner found there, or the error saying why nothing was read.
    scanned: Scanned,
    /// The container its session shows.
    shown: Customization,
    /// Its servers as the supervisor gets them (their container is the published id).
    servers: Vec<Arc<DeclaredServer>>,
}

impl Entry {
    /// Read `published` (keeping what `previous` declared where a file stopped parsing).
    fn read(
        client: &str,
        published: ClientPluginCustomization,
        previous: Option<&Entry>,
        ctx: &Context,
        launch: bool,
    ) -> Self {
        let (dir, folders, scan) = match uri::file_path(&published.uri) {
            Some(dir) => {
                // One folder, one reading: `..`, symbolic links and `%2F` resolved, so a
                // folder the host reads too is recognised (its servers run once).
                let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
                let (folders, scan) = scan_folder(&dir, &published.uri, ctx);
                (Some(dir), folders, scan)
            }
            None => (
                None,
                None,
                unreadable(&published.uri, why_unreadable(&published.uri), Vec::new()),
            ),
        };
        let scan = match previous {
            Some(previous) if previous.dir == dir => previous.scanned.carried_into(scan),
            _ => scan,
        };
        let scanned = Scanned::from(scan);
        let (shown, servers) = dress(&published, client, &scanned, launch);
        Self {
            published,
            dir,
            folders,
            scanned,
            shown,
            servers,
        }
    }

    /// The same reading, dressed as `published` (which changed only in what it says about
    /// itself: name, icons, enablement …) now says.
    fn redressed(
        mut self,
        client: &str,
        published: ClientPluginCustomization,
        launch: bool,
    ) -> Self {
        (self.shown, self.servers) = dress(&published, client, &self.scanned, launch);
        self.published = published;
        self
    }
}

/// Every published plugin, by session, client and id.
pub struct ClientPlugins {
    launch_servers: bool,
    entries: BTreeMap<ClientKey, Entry>,
}

impl ClientPlugins {
    /// No plugin yet; their servers are launched only when `launch_servers`.
    pub fn new(launch_servers: bool) -> Self {
        Self {
            launch_servers,
            entries: BTreeMap::new(),
        }
    }

    /// Whether no client publishes anything.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Take the complete published set: forget what is no longer published, read what is
    /// new or whose `uri` or `nonce` changed (without a nonce, any change), re-dress what
    /// changed otherwise. Returns whether the declared servers changed.
    pub fn publish(&mut self, published: &[PublishedPlugin], ctx: &Context) -> bool {
        let before: Vec<Arc<DeclaredServer>> = self.servers().cloned().collect();
        let mut old = std::mem::take(&mut self.entries);
        for p in published {
            let key = ClientKey {
                session: p.session.clone(),
                client: p.client.clone(),
                id: p.plugin.id.clone(),
            };
            if self.entries.contains_key(&key) {
                continue; // admission refuses repeated ids; the first one counts
            }
            let entry = match old.remove(&key) {
                Some(entry) if entry.published == p.plugin => entry,
                Some(entry) if same_contents(&entry.published, &p.plugin) => {
                    entry.redressed(&p.client, p.plugin.clone(), self.launch_servers)
                }
                previous => Entry::read(
                    &p.client,
                    p.plugin.clone(),
                    previous.as_ref(),
                    ctx,
                    self.launch_servers,
                ),
            };
            self.entries.insert(key, entry);
        }
        !before.iter().eq(self.servers())
    }

    /// Read the plugins `keys` name again (their files changed). Returns whether the
    /// declared servers changed.
    pub fn rescan(&mut self, keys: &BTreeSet<ClientKey>, ctx: &Context) -> bool {
        let mut changed = false;
        for key in keys {
            let Some(entry) = self.entries.get_mut(key) else {
                continue;
            };
            let fresh = Entry::read(
                &key.client,
                entry.published.clone(),
                Some(entry),
                ctx,
                self.launch_servers,
            );
            changed |= entry.servers != fresh.servers;
            *entry = fresh;
        }
        changed
    }

    /// Every published plugin's servers, in key order.
    pub fn servers(&self) -> impl Iterator<Item = &Arc<DeclaredServer>> {
        self.entries.values().flat_map(|e| &e.servers)
    }

    /// Folders to watch: a plugin folder with everything in it; a folder that is not (yet) a
    /// plugin, or is missing, only itself and its parent (a plugin appearing there is seen).
    /// Past [`WATCH_FOLDERS_TOTAL`], plugin folders are watched like the others.
    pub fn watch_targets(&self) -> Vec<(PathBuf, bool)> {
        let mut out = Vec::new();
        let mut budget = WATCH_FOLDERS_TOTAL;
        for entry in self.entries.values() {
            let Some(dir) = &entry.dir else { continue };
            let within = entry.folders.filter(|n| *n <= budget);
            if let Some(folders) = within {
                budget -= folders;
                out.push((dir.clone(), true));
            } else {
                out.push((dir.clone(), false));
                if let Some(parent) = dir.parent() {
                    out.push((parent.to_path_buf(), false));
                }
            }
        }
        out
    }

    /// The published plugins a change to `path` may affect.
    pub fn dirty_for(&self, path: &Path) -> impl Iterator<Item = &ClientKey> + '_ {
        let path = path.to_path_buf();
        self.entries
            .iter()
            .filter(move |(_, e)| e.scanned.watched.iter().any(|w| path.starts_with(w)))
            .map(|(key, _)| key)
    }

    /// Every published plugin.
    pub fn keys(&self) -> impl Iterator<Item = &ClientKey> {
        self.entries.keys()
    }

    /// What each session shows of its clients' plugins: the first plugin to claim an id in
    /// its session, unless the host shows a customization of that id (`host_ids`).
    pub fn view(&self, host_ids: &HashSet<&str>) -> View {
        let mut view = View::new();
        for (key, entry) in &self.entries {
            if host_ids.contains(key.id.as_str()) {
                continue;
            }
            view.entry((key.session.clone(), key.id.clone()))
                .or_insert_with(|| entry.shown.clone());
        }
        view
    }
}

/// The per-session actions that turn `before` into `after`: `customizationUpdated` for each
/// new or changed container; `customizationRemoved` for each gone one, unless the host now
/// shows that id (its own update replaced the client's container already).
pub fn diff(before: &View, after: &View, host_ids: &HashSet<&str>) -> Vec<(String, StateAction)> {
    let mut actions = Vec::new();
    for key @ (session, id) in before.keys() {
        if !after.contains_key(key) && !host_ids.contains(id.as_str()) {
            actions.push((
                session.clone(),
                StateAction::SessionCustomizationRemoved(SessionCustomizationRemovedAction {
                    id: id.clone(),
                }),
            ));
        }
    }
    for (key, container) in after {
        if before.get(key) != Some(container) {
            actions.push((
                key.0.clone(),
                StateAction::SessionCustomizationUpdated(Box::new(
                    SessionCustomizationUpdatedAction {
                        customization: container.clone(),
                    },
                )),
            ));
        }
    }
    actions
}

/// Whether `new` names the same contents as `old`: the same `uri` and the same `nonce` (a
/// plugin published without a nonce is read again whenever anything about it changes).
fn same_contents(old: &ClientPluginCustomization, new: &ClientPluginCustomization) -> bool {
    old.uri == new.uri && new.nonce.is_some() && old.nonce == new.nonce
}

/// Scan `dir` as a plugin folder: how many folders it has when it is a plugin folder small
/// enough to watch whole, and what was found (or why nothing).
fn scan_folder(dir: &Path, uri: &str, ctx: &Context) -> (Option<usize>, Scan) {
    let watched = vec![dir.to_path_buf()];
    if !dir.exists() {
        let message = format!("{}: no such folder on this host", dir.display());
        return (None, unreadable(uri, message, watched));
    }
    if !dir.is_dir() {
        let message = format!("{}: not a folder; a plugin is a folder", dir.display());
        return (None, unreadable(uri, message, watched));
    }
    if !plugin::looks_like_plugin(dir) {
        let message = format!(
            "{}: not a plugin folder (no plugin manifest, skills/, commands/, agents/, rules/, hooks, .mcp.json or SKILL.md in it)",
            dir.display()
        );
        return (None, unreadable(uri, message, watched));
    }
    let mut scan = plugin::scan_plugin(dir, ctx);
    let folders = folders_within(dir, WATCH_FOLDERS + 1);
    if folders > WATCH_FOLDERS {
        let note = format!(
            "{}: more than {WATCH_FOLDERS} folders, so only its top folder is watched; publish it again with a new nonce to have it read again",
            dir.display()
        );
        for customization in &mut scan.customizations {
            super::last_good::degrade(customization, &note);
        }
        scan.problems.push(Problem {
            location: uri.to_string(),
            message: note,
        });
        return (None, scan);
    }
    (Some(folders), scan)
}

/// Folders below `dir` (itself included), counted up to `limit`; symbolic links not followed.
fn folders_within(dir: &Path, limit: usize) -> usize {
    let mut count = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        count += 1;
        if count >= limit {
            return count;
        }
        let Ok(entries) = std::fs::read_dir(&next) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                pending.push(entry.path());
            }
        }
    }
    count
}

/// Why the host cannot read a plugin at `uri` (not a `file:` URI of a local folder).
fn why_unreadable(uri: &str) -> String {
    let scheme = uri.split_once(':').map_or("", |(scheme, _)| scheme);
    match scheme.to_ascii_lowercase().as_str() {
        "virtual" => format!(
            "{uri}: a virtual plugin lives in the client; this host reads plugins only from file: URIs on its own disk (it does not fetch plugin contents from clients)"
        ),
        "file" => format!("{uri}: not a file: URI of a folder on this host (expected file:///absolute/path)"),
        "" => format!("{uri}: not a URI; this host reads plugins from file: URIs"),
        other => format!(
            "{uri}: this host cannot read {other}: URIs; it reads plugins only from file: URIs on its own disk"
        ),
    }
}

/// A plugin at `uri` in `error`, with nothing in it.
fn failed(uri: &str, message: String) -> PluginCustomization {
    PluginCustomization {
        id: uri.to_string(),
        uri: uri.to_string(),
        name: String::new(),
        icons: None,
        range: None,
        meta: None,
        client_id: None,
        load: Some(CustomizationLoadState::Error(CustomizationErrorState {
            message,
        })),
        children: Some(Vec::new()),
        enablement: None,
        version: None,
    }
}

/// A scan that found nothing but the reason: one plugin in `error`.
fn unreadable(uri: &str, message: String, watched: Vec<PathBuf>) -> Scan {
    Scan {
        customizations: vec![Customization::Plugin(failed(uri, message.clone()))],
        problems: vec![Problem {
            location: uri.to_string(),
            message,
        }],
        watched,
        ..Scan::default()
    }
}

/// The container a session shows for `published` and the servers the supervisor gets:
/// what the scan found, with the client's id, URI, name, icons, range, `_meta` and
/// enablement, `clientId` set, and its `childEnablement` applied to the children it names.
/// A disabled plugin's servers do not run; with `launch` off none does (a start request is
/// answered with [`NOT_LAUNCHED`]).
fn dress(
    published: &ClientPluginCustomization,
    client: &str,
    scanned: &Scanned,
    launch: bool,
) -> (Customization, Vec<Arc<DeclaredServer>>) {
    let found = scanned.customizations().into_iter().find_map(|c| match c {
        Customization::Plugin(p) => Some(p),
        _ => None,
    });
    let mut plugin = found.unwrap_or_else(|| failed(&published.uri, "nothing found".into()));
    plugin.id = published.id.clone();
    plugin.uri = published.uri.clone();
    if !published.name.trim().is_empty() || plugin.name.is_empty() {
        plugin.name = published.name.clone();
    }
    plugin.icons = published.icons.clone().or(plugin.icons);
    plugin.range = published.range.clone();
    plugin.meta = published.meta.clone();
    plugin.client_id = Some(client.to_string());
    plugin.enablement = published.enablement.clone();
    plugin.version = plugin.version.or_else(|| published.version.clone());
    let on = published
        .enablement
        .as_deref()
        .and_then(effective_enablement)
        .unwrap_or(true);
    let decision = |name: &str| {
        published
            .child_enablement
            .as_ref()
            .and_then(|decisions| decisions.get(name))
    };
    let container: Arc<str> = Arc::from(published.id.as_str());
    let servers: Vec<Arc<DeclaredServer>> = scanned
        .servers
        .iter()
        .map(|server| {
            let mut server = DeclaredServer::clone(server);
            server.container = Some(container.clone());
            let chosen = decision(&server.name).and_then(|e| effective_enablement(e));
            server.enabled = server.enabled && on && chosen.unwrap_or(true);
            if !launch {
                server.launch = Err(LaunchError::not_launched(NOT_LAUNCHED));
                server.enabled = false;
            }
            Arc::new(server)
        })
        .collect();
    for child in plugin.children.iter_mut().flatten() {
        let (name, enabled) = match child {
            ChildCustomization::McpServer(m) => {
                if let Some(decision) = decision(&m.name) {
                    m.enablement = Some(decision.clone());
                }
                if let Some(server) = servers.iter().find(|s| s.id == m.id) {
                    m.state = mcp::initial_state(&server.launch, server.enabled);
                }
                continue;
            }
            ChildCustomization::Agent(c) => (&c.name, &mut c.enabled),
            ChildCustomization::Skill(c) => (&c.name, &mut c.enabled),
            ChildCustomization::Prompt(c) => (&c.name, &mut c.enabled),
            ChildCustomization::Rule(c) => (&c.name, &mut c.enabled),
            ChildCustomization::Hook(c) => (&c.name, &mut c.enabled),
            ChildCustomization::Unknown(_) => continue,
        };
        if let Some(value) = decision(name).and_then(|e| effective_enablement(e)) {
            *enabled = Some(value);
        }
    }
    (Customization::Plugin(plugin), servers)
}

#[cfg(test)]
mod tests;
