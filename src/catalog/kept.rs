//! A customization as the catalog keeps it between rescans: its id and its JSON text, about
//! a third of the typed form; a rescan compares texts, and it is decoded only to be shown.

use ahp_types::state::Customization;

/// What stands for the container's `uri` in the kept text: a byte JSON text never holds raw
/// (control characters inside strings are always escaped).
const URI_MARK: &str = "\u{1}";

/// One top-level customization of a unit's latest scan.
#[derive(Debug, Clone, PartialEq)]
pub struct Kept {
    id: Option<Box<str>>,
    /// The container's `uri` as written in JSON (escaped, unquoted), which every child's
    /// `uri` and id repeat: kept once, [`URI_MARK`] in the text stands for it.
    uri: Box<str>,
    json: Box<str>,
}

impl Kept {
    /// Keep `customization` as text.
    pub fn keep(customization: &Customization) -> Self {
        // The types encode whatever they hold; `null` would only stand for a bug there.
        let json = serde_json::to_string(customization).unwrap_or_else(|_| "null".into());
        let uri = uri_of(customization)
            .and_then(|uri| serde_json::to_string(uri).ok())
            .map(|quoted| quoted[1..quoted.len() - 1].to_string())
            .unwrap_or_default();
        let json = if uri.is_empty() {
            json
        } else {
            json.replace(&uri, URI_MARK)
        };
        Self {
            id: super::id_of(customization).map(Box::from),
            uri: uri.into_boxed_str(),
            json: json.into_boxed_str(),
        }
    }

    /// Its id (`None` for kinds this version does not know).
    pub fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// Whether it shows the same as `other` (the encoding is deterministic: object members
    /// are written in key order).
    pub fn same_as(&self, other: &Kept) -> bool {
        self.uri == other.uri && self.json == other.json
    }

    /// The customization again.
    pub fn customization(&self) -> Customization {
        let decoded = if self.uri.is_empty() {
            serde_json::from_str(&self.json)
        } else {
            serde_json::from_str(&self.json.replace(URI_MARK, &self.uri))
        };
        decoded.unwrap_or(Customization::Unknown(serde_json::Value::Null))
    }
}

/// The `uri` of a top-level customization.
fn uri_of(c: &Customization) -> Option<&str> {
    match c {
        Customization::Plugin(p) => Some(&p.uri),
        Customization::Directory(d) => Some(&d.uri),
        Customization::McpServer(m) => Some(&m.uri),
        Customization::Unknown(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::{manifest, plugin, Context};

    fn context(dir: &std::path::Path) -> Context {
        Context {
            data_dir: dir.join("data"),
            env: Box::new(|_| None),
        }
    }

    #[test]
    fn what_is_kept_decodes_to_what_was_scanned() {
        let dir = std::env::temp_dir().join(format!("ahp-proxy-kept-{}", std::process::id()));
        let plugin_dir = dir.join("p");
        std::fs::create_dir_all(plugin_dir.join("skills/s")).unwrap();
        std::fs::write(
            plugin_dir.join("skills/s/SKILL.md"),
            "---\nname: s\ndescription: \"déjà vu\"\n---\n",
        )
        .unwrap();
        std::fs::write(
            plugin_dir.join(".mcp.json"),
            r#"{"mcpServers": {"a": {"command": "x", "disabled": true}, "b": {"url": "http://h/"}}}"#,
        )
        .unwrap();
        let manifest_path = dir.join("servers.mcp.json");
        std::fs::write(
            &manifest_path,
            r#"{"mcpServers": {"m": {"command": "y"}, "bad": 3}}"#,
        )
        .unwrap();
        let ctx = context(&dir);
        let mut scanned = plugin::scan_plugin(&plugin_dir, &ctx).customizations;
        scanned.extend(manifest::scan_manifest(&manifest_path, &ctx).customizations);
        assert!(scanned.len() >= 2);
        for customization in &scanned {
            let kept = Kept::keep(customization);
            assert!(kept.json.contains(URI_MARK), "{}", kept.json);
            assert_eq!(kept.id(), super::super::id_of(customization));
            assert_eq!(&kept.customization(), customization);
            assert!(kept.same_as(&Kept::keep(&kept.customization())));
        }
        // The same container elsewhere is not the same, and one whose uri JSON escapes
        // comes back as it was.
        let Customization::Plugin(mut moved) = scanned[0].clone() else {
            panic!("a plugin first")
        };
        moved.uri = format!("{}\"\\\u{7f}/é", moved.uri);
        let moved = Customization::Plugin(moved);
        let kept = Kept::keep(&moved);
        assert!(!kept.same_as(&Kept::keep(&scanned[0])));
        assert_eq!(kept.customization(), moved);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
