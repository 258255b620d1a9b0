//! The terminal's `trust` and `untrust`: the servers of the config's scan that ask for trust,
//! listed with what they would run, and decided into the trust file, which a running proxy
//! reads again within a second (it then starts, or stops, them).

use crate::catalog::Catalog;
use crate::discovery::DeclaredServer;
use crate::trust::fingerprint::{described, fingerprint};
use crate::trust::TrustStore;
use crate::untrusted::Escaped;

/// One server that asks for trust, as the terminal shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asking {
    /// Its declared name.
    pub name: String,
    /// Its customization id.
    pub id: String,
    /// Where it was declared.
    pub declared_at: String,
    /// The fingerprint of what it would run.
    pub fingerprint: String,
    /// What it would run, as people read it.
    pub described: String,
    /// Whether that definition is trusted.
    pub trusted: bool,
    /// Whether it is declared enabled (a disabled one would not run, trusted or not).
    pub enabled: bool,
}

impl Asking {
    /// Whether it waits for trust to run.
    pub fn waits(&self) -> bool {
        self.enabled && !self.trusted
    }
}

/// Every server of `catalog` that asks for trust (whose launch spec can be used), in catalog
/// order, with whether `store` trusts it.
pub fn asking(catalog: &Catalog, store: &TrustStore) -> Vec<Asking> {
    let asks = catalog.asks_trust();
    let mut seen = std::collections::HashSet::new();
    catalog
        .servers()
        .filter(|s| asks.contains(&s.id) && seen.insert(s.id.clone()))
        .filter_map(|server: &DeclaredServer| {
            let launch = server.launch.as_ref().ok()?;
            let fingerprint = fingerprint(launch);
            Some(Asking {
                name: server.name.clone(),
                id: server.id.clone(),
                declared_at: server.declared_at.clone(),
                trusted: store.is_trusted(&fingerprint),
                enabled: server.enabled,
                described: described(launch),
                fingerprint,
            })
        })
        .collect()
}

/// The names of the servers of `catalog` that wait for trust in `store` (logged when some do).
pub fn waiting(catalog: &Catalog, store: &TrustStore) -> Vec<String> {
    let names: Vec<String> = (asking(catalog, store).into_iter())
        .filter(Asking::waits)
        .map(|server| server.name)
        .collect();
    if !names.is_empty() {
        let servers = names.join(", ");
        let servers = crate::untrusted::Untrusted(&servers);
        tracing::info!(%servers, "servers await trust before they run (ahp-proxy trust)");
    }
    names
}

/// The servers `names` pick (by name or id; every one still waiting with `all`): `Err` names
/// the first name that matches none.
pub fn pick<'a>(
    asking: &'a [Asking],
    names: &[String],
    all: bool,
) -> Result<Vec<&'a Asking>, String> {
    if all {
        return Ok(asking.iter().filter(|a| !a.trusted).collect());
    }
    let mut picked = Vec::new();
    for name in names {
        let found: Vec<&Asking> = (asking.iter())
            .filter(|a| &a.name == name || &a.id == name)
            .collect();
        if found.is_empty() {
            let known: Vec<&str> = asking.iter().map(|a| a.name.as_str()).collect();
            return Err(match crate::guess::nearest(name, known.iter().copied()) {
                Some(guess) => format!(
                    "no server asking for trust is named \"{}\" (did you mean \"{}\"?)",
                    Escaped(name),
                    Escaped(guess)
                ),
                None => format!("no server asking for trust is named \"{}\"", Escaped(name)),
            });
        }
        picked.extend(found);
    }
    Ok(picked)
}

/// The listing `trust --list` prints: each server, trusted or waiting, with what it would
/// run.
pub fn render(asking: &[Asking]) -> String {
    if asking.is_empty() {
        return "No server asks for trust: every one runs as declared ([trust] in proxy.toml).\n"
            .into();
    }
    let mut out = String::new();
    for server in asking {
        let state = if server.trusted {
            "trusted"
        } else {
            "awaiting trust"
        };
        out.push_str(&format!(
            "{} ({state}) declared at {}\n",
            Escaped(&server.name),
            Escaped(&server.declared_at)
        ));
        for line in server.described.lines() {
            out.push_str(&format!("  {}\n", Escaped(line)));
        }
    }
    out
}

/// What `check` adds: the servers that wait for trust, and how to trust them; nothing when
/// none waits.
pub fn render_awaiting(asking: &[Asking]) -> String {
    let waiting: Vec<&Asking> = asking.iter().filter(|a| a.waits()).collect();
    if waiting.is_empty() {
        return String::new();
    }
    let mut out = format!("awaiting trust ({})\n", waiting.len());
    for server in waiting {
        out.push_str(&format!(
            "  {}  declared at {}  (ahp-proxy trust {})\n",
            Escaped(&server.name),
            Escaped(&server.declared_at),
            Escaped(&server.name)
        ));
        for line in server.described.lines() {
            out.push_str(&format!("    {}\n", Escaped(line)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asking(name: &str, trusted: bool) -> Asking {
        Asking {
            name: name.into(),
            id: format!("file:///m.json#mcp={name}"),
            declared_at: "/m.json:2:3".into(),
            fingerprint: name.repeat(3),
            described: format!("runs: {name}-server\nwith environment: TOKEN"),
            trusted,
            enabled: true,
        }
    }

    #[test]
    fn names_pick_servers_and_all_picks_those_still_waiting() {
        let list = [asking("notes", false), asking("clock", true)];
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let picked = pick(&list, &names(&["clock"]), false).unwrap();
        assert_eq!(picked[0].name, "clock");
        let by_id = pick(&list, &names(&["file:///m.json#mcp=notes"]), false).unwrap();
        assert_eq!(by_id[0].name, "notes");
        let all = pick(&list, &[], true).unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].name, "notes");
        let wrong = pick(&list, &names(&["note"]), false).unwrap_err();
        assert!(wrong.contains("did you mean \"notes\""), "{wrong}");
    }

    #[test]
    fn the_listing_says_which_wait_and_what_they_would_run() {
        let text = render(&[asking("notes", false), asking("clock", true)]);
        assert_eq!(
            text,
            "notes (awaiting trust) declared at /m.json:2:3\n  runs: notes-server\n  with environment: TOKEN\n\
             clock (trusted) declared at /m.json:2:3\n  runs: clock-server\n  with environment: TOKEN\n"
        );
        assert!(render(&[]).starts_with("No server asks for trust"));
        let check = render_awaiting(&[asking("notes", false), asking("clock", true)]);
        assert_eq!(
            check,
            "awaiting trust (1)\n  notes  declared at /m.json:2:3  (ahp-proxy trust notes)\n    runs: notes-server\n    with environment: TOKEN\n"
        );
        assert_eq!(render_awaiting(&[asking("clock", true)]), "");
        let off = Asking {
            enabled: false,
            ..asking("off", false)
        };
        assert!(
            !off.waits(),
            "a disabled server would not run: it waits for nothing"
        );
        assert_eq!(render_awaiting(&[off]), "");
    }
}
