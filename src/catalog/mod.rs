//! The desired picture: every configured source scanned into units (one plugin folder, one
//! manifest, one directory), flattened into the session's customization list, and re-diffed
//! per unit so a change on disk becomes only the AHP actions it needs; a file that stops
//! parsing keeps the servers it declared (`last_good`); plugins AHP clients publish are one
//! more source, shown in their own session (`clients`). Pure; no watching.

pub mod clients;
mod kept;
mod last_good;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ahp_types::actions::{SessionCustomizationRemovedAction, SessionCustomizationUpdatedAction};
use ahp_types::state::Customization;
use ahp_types::StateAction;

use crate::discovery::directory;
use crate::discovery::{configured, manifest, plugin, Context, DeclaredServer, Scan};
use crate::spec::{DirectorySpec, Problem, PublishedPlugin};
use clients::{ClientKey, ClientPlugins};
use kept::Kept;

/// What proxy.toml says to look at.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// Folders of plugins, or single plugin folders.
    pub plugin_roots: Vec<PathBuf>,
    /// Manifest files.
    pub manifests: Vec<PathBuf>,
    /// Watched directories.
    pub directories: Vec<DirectorySpec>,
    /// Servers declared in proxy.toml itself (never rescanned: the config is read once).
    pub configured: Option<configured::Configured>,
    /// Whether the servers of plugins AHP clients publish are launched.
    pub launch_client_servers: bool,
    /// Which sources' servers wait for the user's trust (`[trust]`).
    pub trust: crate::trust::TrustPolicy,
}

impl Sources {
    /// What proxy.toml asks discovery to look at.
    pub fn of(config: &crate::config::Config) -> Self {
        Self {
            plugin_roots: config.plugin_roots.clone(),
            manifests: config.manifests.clone(),
            directories: config.directories.clone(),
            configured: (!config.servers.is_empty()).then(|| configured::Configured {
                file: config.path.clone(),
                servers: config.servers.clone(),
            }),
            launch_client_servers: config.clients.launches_servers(config.ahp.listen),
            trust: config.trust.clone(),
        }
    }
}

/// The smallest thing that is rescanned on its own.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Unit {
    /// proxy.toml's `[servers]`.
    Configured,
    /// One plugin folder found under plugin root number `root`.
    Plugin { root: usize, dir: PathBuf },
    /// Manifest number `index`.
    Manifest { index: usize, path: PathBuf },
    /// Directory number `index`.
    Directory { index: usize },
}

/// What to rescan after a batch of file-system events.
#[derive(Debug, Default, PartialEq)]
pub struct Dirty {
    /// Units whose files changed.
    pub units: BTreeSet<Unit>,
    /// Plugin roots whose set of plugin folders may have changed.
    pub roots: BTreeSet<usize>,
    /// Plugins AHP clients published whose files changed.
    pub clients: BTreeSet<ClientKey>,
}

impl Dirty {
    /// Nothing to do.
    pub fn is_empty(&self) -> bool {
        self.units.is_empty() && self.roots.is_empty() && self.clients.is_empty()
    }

    /// Everything `other` marks, too.
    pub fn merge(&mut self, other: Dirty) {
        self.units.extend(other.units);
        self.roots.extend(other.roots);
        self.clients.extend(other.clients);
    }
}

/// What a rescan or a client's publication changes: actions for every session, then
/// actions for one session each (client plugins are shown only where they were published).
#[derive(Debug, Default, PartialEq)]
pub struct Changes {
    /// For every session, in order.
    pub every: Vec<StateAction>,
    /// For one session each, in order: `(session URI, action)`.
    pub sessions: Vec<(String, StateAction)>,
}

impl Changes {
    /// `later`'s actions after these.
    pub fn extend(&mut self, later: Changes) {
        self.every.extend(later.every);
        self.sessions.extend(later.sessions);
    }
}

/// One unit's scan as the catalog keeps it: its customizations as text (the host holds the
/// typed tree), each server knowing its container and shared with the supervisor (handing
/// it every declared server copies pointers, not specs).
struct Scanned {
    customizations: Vec<Kept>,
    servers: Vec<Arc<DeclaredServer>>,
    problems: Vec<Problem>,
    watched: Vec<PathBuf>,
}

impl From<Scan> for Scanned {
    fn from(scan: Scan) -> Self {
        let mut containers: HashMap<&str, Arc<str>> = HashMap::new();
        for customization in &scan.customizations {
            let (id, children) = match customization {
                Customization::Plugin(p) => (&p.id, p.children.as_deref()),
                Customization::Directory(d) => (&d.id, d.children.as_deref()),
                _ => continue,
            };
            let id: Arc<str> = Arc::from(id.as_str());
            for child in children.unwrap_or(&[]) {
                if let ahp_types::state::ChildCustomization::McpServer(m) = child {
                    containers.insert(&m.id, id.clone());
                }
            }
        }
        let mut servers: Vec<Arc<DeclaredServer>> = scan
            .servers
            .into_iter()
            .map(|mut server| {
                server.container = containers.get(server.id.as_str()).cloned();
                Arc::new(server)
            })
            .collect();
        // Collected in place: without this it would keep the declarations' whole buffer.
        servers.shrink_to_fit();
        Self {
            servers,
            customizations: scan.customizations.iter().map(Kept::keep).collect(),
            problems: scan.problems,
            watched: scan.watched,
        }
    }
}

impl Scanned {
    /// Its customizations, decoded.
    fn customizations(&self) -> Vec<Customization> {
        self.customizations
            .iter()
            .map(Kept::customization)
            .collect()
    }

    /// `fresh`, with the servers this scan declared that `fresh` could not read again carried
    /// into it (`last_good`): a half-typed save stops nothing.
    fn carried_into(&self, mut fresh: Scan) -> Scan {
        if !fresh.unparsable.is_empty() {
            let old = Scan {
                customizations: self.customizations(),
                servers: self
                    .servers
                    .iter()
                    .map(|s| DeclaredServer::clone(s))
                    .collect(),
                problems: self.problems.clone(),
                watched: self.watched.clone(),
                unparsable: Vec::new(),
            };
            last_good::carry(&old, &mut fresh);
        }
        fresh
    }
}

/// Every unit's latest scan, in a stable order.
pub struct Catalog {
    sources: Sources,
    units: Vec<(Unit, Scanned)>,
    root_problems: Vec<(usize, Problem)>,
    /// Plugins AHP clients publish.
    clients: ClientPlugins,
    /// Whether a rescan since the last [`Catalog::take_servers_changed`] changed what
    /// servers are declared (or how).
    servers_changed: bool,
}

impl Catalog {
    /// Scan everything.
    pub fn scan(sources: Sources, ctx: &Context) -> Self {
        let mut catalog = Self {
            clients: ClientPlugins::new(sources.launch_client_servers),
            sources,
            units: Vec::new(),
            root_problems: Vec::new(),
            servers_changed: false,
        };
        if let Some(configured) = &catalog.sources.configured {
            catalog.units.push((
                Unit::Configured,
                configured::scan_configured(configured, ctx).into(),
            ));
        }
        for index in 0..catalog.sources.plugin_roots.len() {
            catalog.rescan_root(index, &BTreeSet::new(), ctx);
        }
        for (index, path) in catalog.sources.manifests.iter().enumerate() {
            let unit = Unit::Manifest {
                index,
                path: path.clone(),
            };
            catalog
                .units
                .push((unit, manifest::scan_manifest(path, ctx).into()));
        }
        for (index, spec) in catalog.sources.directories.iter().enumerate() {
            catalog.units.push((
                Unit::Directory { index },
                directory::scan_directory(spec).into(),
            ));
        }
        catalog.units.sort_by(|a, b| a.0.cmp(&b.0));
        catalog
    }

    /// The session's customization list: every unit's customizations in order; when two
    /// units produce the same id, the first one wins.
    pub fn customizations(&self) -> Vec<Customization> {
        self.owned().map(|(_, c)| c.customization()).collect()
    }

    /// Every declared server, in catalog order.
    pub fn servers(&self) -> impl Iterator<Item = &DeclaredServer> {
        self.shared_servers().map(|server| &**server)
    }

    fn shared_servers(&self) -> impl Iterator<Item = &Arc<DeclaredServer>> {
        self.units.iter().flat_map(|(_, scan)| &scan.servers)
    }

    /// What the supervisor needs: every declared server (each knows its container), shared;
    /// the host's before the ones of client plugins (the first of an id wins).
    pub fn supervision(&self) -> crate::supervisor::Command {
        crate::supervisor::Command::Sync {
            servers: self
                .shared_servers()
                .chain(self.clients.servers())
                .cloned()
                .collect(),
            asks_trust: self.asks_trust(),
        }
    }

    /// The ids of the declared servers that run only once the user trusted them, by where
    /// each was declared (`[trust]`); the first declaration of an id is the one that counts.
    pub fn asks_trust(&self) -> std::collections::BTreeSet<String> {
        use crate::trust::Source;
        let policy = &self.sources.trust;
        let mut seen = std::collections::HashSet::new();
        let mut asks = std::collections::BTreeSet::new();
        for (unit, scan) in &self.units {
            let (source, at) = match unit {
                Unit::Configured => (Source::Config, None),
                Unit::Plugin { dir, .. } => (Source::Plugin, Some(dir.as_path())),
                Unit::Manifest { path, .. } => (Source::Manifest, Some(path.as_path())),
                Unit::Directory { index } => (
                    Source::Directory,
                    self.sources
                        .directories
                        .get(*index)
                        .map(|d| d.path.as_path()),
                ),
            };
            let asked = policy.asks(source, at);
            for server in &scan.servers {
                if seen.insert(server.id.as_str()) && asked {
                    asks.insert(server.id.clone());
                }
            }
        }
        if policy.asks(Source::ClientPlugin, None) {
            for server in self.clients.servers() {
                if seen.insert(server.id.as_str()) {
                    asks.insert(server.id.clone());
                }
            }
        }
        asks
    }

    /// Whether rescans since the last call changed what servers are declared, or how (a
    /// launch spec, a name, a container): only then does the supervisor need the set again.
    pub fn take_servers_changed(&mut self) -> bool {
        std::mem::take(&mut self.servers_changed)
    }

    /// Whether a configured plugin root could not be listed (missing, not a folder, …).
    pub fn has_unreadable_roots(&self) -> bool {
        !self.root_problems.is_empty()
    }

    /// Every problem: unreadable roots first, then each unit's.
    pub fn problems(&self) -> impl Iterator<Item = &Problem> {
        self.root_problems
            .iter()
            .map(|(_, p)| p)
            .chain(self.units.iter().flat_map(|(_, scan)| &scan.problems))
    }

    /// Every enabled server whose launch spec cannot be used (an unset `${VAR}`, an
    /// unanswered `${input:…}`), as a problem at its declaration. These servers are in
    /// `error` from the start; their containers are not degraded.
    pub fn server_problems(&self) -> impl Iterator<Item = Problem> + '_ {
        self.servers()
            .filter(|s| s.enabled)
            .filter_map(|server| match &server.launch {
                Ok(_) => None,
                Err(message) => Some(Problem {
                    location: server.declared_at.clone(),
                    message: format!("server {:?} cannot start: {message}", server.name),
                }),
            })
    }

    /// Paths to watch: `(path, recursive)`. Manifest files are watched through their
    /// folder (editors replace files by renaming).
    pub fn watch_targets(&self) -> Vec<(PathBuf, bool)> {
        let mut out: Vec<(PathBuf, bool)> = Vec::new();
        for root in &self.sources.plugin_roots {
            out.push((root.clone(), true));
        }
        for path in &self.sources.manifests {
            if let Some(parent) = path.parent() {
                out.push((parent.to_path_buf(), false));
            }
        }
        for spec in &self.sources.directories {
            out.push((spec.path.clone(), true));
        }
        for (unit, scan) in &self.units {
            if let Unit::Manifest { .. } = unit {
                for extra in scan.watched.iter().skip(1) {
                    out.push((extra.clone(), true));
                }
            }
        }
        out.extend(self.clients.watch_targets());
        out.sort();
        out.dedup();
        out
    }

    /// Every unit and root: what to rescan when events were lost.
    pub fn everything(&self) -> Dirty {
        Dirty {
            units: self.units.iter().map(|(u, _)| u.clone()).collect(),
            roots: (0..self.sources.plugin_roots.len()).collect(),
            clients: self.clients.keys().cloned().collect(),
        }
    }

    /// Which units and roots a change to `path` may affect.
    pub fn dirty_for(&self, path: &Path) -> Dirty {
        let mut dirty = Dirty::default();
        for (unit, scan) in &self.units {
            if scan.watched.iter().any(|w| path.starts_with(w)) {
                dirty.units.insert(unit.clone());
            }
        }
        for (index, root) in self.sources.plugin_roots.iter().enumerate() {
            let Ok(relative) = path.strip_prefix(root) else {
                continue;
            };
            let first = relative.components().next();
            let known = first.is_some_and(|first| {
                let dir = root.join(first);
                self.units
                    .iter()
                    .any(|(u, _)| matches!(u, Unit::Plugin { dir: d, .. } if *d == dir))
            });
            let marker = first.is_some_and(|f| plugin::is_marker(&f.as_os_str().to_string_lossy()));
            if first.is_none() || marker || !known {
                dirty.roots.insert(index);
            }
        }
        dirty.clients.extend(self.clients.dirty_for(path).cloned());
        dirty
    }

    /// Rescan what `dirty` names, configured sources and client plugins alike: the actions
    /// for every session ([`Catalog::rescan`]), then each client plugin's own session's.
    pub fn refresh(&mut self, dirty: &Dirty, ctx: &Context) -> Changes {
        let before = self.client_view();
        let every = self.rescan(dirty, ctx);
        self.servers_changed |= self.clients.rescan(&dirty.clients, ctx);
        Changes {
            every,
            sessions: self.client_changes(&before),
        }
    }

    /// Take the complete set of plugins AHP clients publish (see
    /// [`ClientPlugins::publish`]); the actions for the sessions whose plugins changed.
    pub fn publish(&mut self, published: &[PublishedPlugin], ctx: &Context) -> Changes {
        let before = self.client_view();
        self.servers_changed |= self.clients.publish(published, ctx);
        Changes {
            every: Vec::new(),
            sessions: self.client_changes(&before),
        }
    }

    /// What the sessions show of client plugins now.
    fn client_view(&self) -> clients::View {
        if self.clients.is_empty() {
            return clients::View::new();
        }
        self.clients.view(&self.host_ids())
    }

    /// The per-session actions from `before` to what the sessions show now.
    fn client_changes(&self, before: &clients::View) -> Vec<(String, StateAction)> {
        if self.clients.is_empty() && before.is_empty() {
            return Vec::new();
        }
        let host_ids = self.host_ids();
        clients::diff(before, &self.clients.view(&host_ids), &host_ids)
    }

    /// The ids of the containers configured sources show.
    fn host_ids(&self) -> HashSet<&str> {
        self.owned().filter_map(|(_, c)| c.id()).collect()
    }

    /// Rescan what `dirty` names and return the actions that turn the old customization list
    /// into the new one: `customizationUpdated` per changed or new container,
    /// `customizationRemoved` per vanished one, nothing for unchanged ones.
    pub fn rescan(&mut self, dirty: &Dirty, ctx: &Context) -> Vec<StateAction> {
        let mut roots = dirty.roots.clone();
        for unit in &dirty.units {
            if let Unit::Plugin { root, dir } = unit {
                if !plugin::looks_like_plugin(dir) {
                    roots.insert(*root);
                }
            }
        }
        let affected = |unit: &Unit| {
            dirty.units.contains(unit)
                || matches!(unit, Unit::Plugin { root, .. } if roots.contains(root))
        };
        // Only the affected units' servers can change: keep (pointers to) just those.
        let servers_before: Vec<Arc<DeclaredServer>> = self
            .units
            .iter()
            .filter(|(unit, _)| affected(unit))
            .flat_map(|(_, scan)| scan.servers.iter().cloned())
            .collect();
        // Only the affected units' containers can change: clone just those.
        let mut before: HashMap<String, Kept> = HashMap::new();
        for (unit, c) in self.owned() {
            if affected(unit) {
                if let Some(id) = c.id() {
                    before.insert(id.to_string(), c.clone());
                }
            }
        }
        for &root in &roots {
            self.rescan_root(root, &dirty.units, ctx);
        }
        for (unit, scan) in &mut self.units {
            if !dirty.units.contains(unit) {
                continue;
            }
            if let Unit::Plugin { root, .. } = unit {
                if roots.contains(root) {
                    continue; // rescanned with its root
                }
            }
            let fresh = scan_unit(unit, &self.sources, ctx);
            *scan = scan.carried_into(fresh).into();
        }
        self.units.sort_by(|a, b| a.0.cmp(&b.0));
        let servers_after = self
            .units
            .iter()
            .filter(|(unit, _)| affected(unit))
            .flat_map(|(_, scan)| scan.servers.iter());
        self.servers_changed |= !servers_before.iter().eq(servers_after);
        let mut actions = Vec::new();
        let mut present = HashSet::new();
        for (unit, c) in self.owned() {
            let Some(id) = c.id() else { continue };
            present.insert(id);
            // An unaffected unit's container matters only if it now owns an id that an
            // affected unit gave up.
            let same = before.get(id).is_some_and(|old| old.same_as(c));
            if (affected(unit) || before.contains_key(id)) && !same {
                actions.push(StateAction::SessionCustomizationUpdated(Box::new(
                    SessionCustomizationUpdatedAction {
                        customization: c.customization(),
                    },
                )));
            }
        }
        let mut removed: Vec<&String> = before
            .keys()
            .filter(|id| !present.contains(id.as_str()))
            .collect();
        removed.sort();
        for id in removed {
            actions.push(StateAction::SessionCustomizationRemoved(
                SessionCustomizationRemovedAction { id: id.clone() },
            ));
        }
        actions
    }

    /// Each unit's containers whose id no earlier unit has claimed (first one wins).
    fn owned(&self) -> impl Iterator<Item = (&Unit, &Kept)> {
        let mut seen = HashSet::new();
        self.units
            .iter()
            .flat_map(|(unit, scan)| scan.customizations.iter().map(move |c| (unit, c)))
            .filter(move |(_, c)| c.id().is_some_and(|id| seen.insert(id)))
    }

    /// Re-derive the plugin folders of root `index`; rescan new ones and those in `dirty`.
    fn rescan_root(&mut self, index: usize, dirty: &BTreeSet<Unit>, ctx: &Context) {
        let root = self.sources.plugin_roots[index].clone();
        self.root_problems.retain(|(i, _)| *i != index);
        let folders = match plugin::plugin_folders(&root) {
            Ok(folders) => folders,
            Err(problem) => {
                self.root_problems.push((index, problem));
                Vec::new()
            }
        };
        let mut old: HashMap<PathBuf, Scanned> = HashMap::new();
        let mut kept = Vec::with_capacity(self.units.len());
        for (unit, scan) in self.units.drain(..) {
            match unit {
                Unit::Plugin { root: r, dir } if r == index => {
                    old.insert(dir, scan);
                }
                other => kept.push((other, scan)),
            }
        }
        self.units = kept;
        for dir in folders {
            let unit = Unit::Plugin {
                root: index,
                dir: dir.clone(),
            };
            let scan = match old.remove(&dir) {
                Some(scan) if !dirty.contains(&unit) => scan,
                Some(previous) => previous.carried_into(plugin::scan_plugin(&dir, ctx)).into(),
                None => plugin::scan_plugin(&dir, ctx).into(),
            };
            self.units.push((unit, scan));
        }
    }
}

fn scan_unit(unit: &Unit, sources: &Sources, ctx: &Context) -> Scan {
    match unit {
        Unit::Configured => match &sources.configured {
            Some(configured) => configured::scan_configured(configured, ctx),
            None => Scan::default(),
        },
        Unit::Plugin { dir, .. } => plugin::scan_plugin(dir, ctx),
        Unit::Manifest { path, .. } => manifest::scan_manifest(path, ctx),
        Unit::Directory { index } => directory::scan_directory(&sources.directories[*index]),
    }
}

/// The id of a top-level customization (`None` for kinds this version does not know).
pub fn id_of(c: &Customization) -> Option<&str> {
    match c {
        Customization::Plugin(p) => Some(&p.id),
        Customization::Directory(d) => Some(&d.id),
        Customization::McpServer(m) => Some(&m.id),
        Customization::Unknown(_) => None,
    }
}
