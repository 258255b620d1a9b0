//! A customization as the catalog keeps it between rescans: its id and its JSON text, about
//! a third of the typed form; a rescan compares texts, and it is decoded only to be shown.

use ahp_types::state::Customization;

/// One top-level customization of a unit's latest scan.
#[derive(Debug, Clone, PartialEq)]
pub struct Kept {
    id: Option<Box<str>>,
    json: Box<str>,
}

impl Kept {
    /// Keep `customization` as text.
    pub fn keep(customization: &Customization) -> Self {
        Self {
            id: super::id_of(customization).map(Box::from),
            // The types encode whatever they hold; `null` would only stand for a bug there.
            json: serde_json::to_string(customization)
                .unwrap_or_else(|_| "null".into())
                .into_boxed_str(),
        }
    }

    /// Its id (`None` for kinds this version does not know).
    pub fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// Whether it shows the same as `other` (the encoding is deterministic: object members
    /// are written in key order).
    pub fn same_as(&self, other: &Kept) -> bool {
        self.json == other.json
    }

    /// The customization again.
    pub fn customization(&self) -> Customization {
        serde_json::from_str(&self.json).unwrap_or(Customization::Unknown(serde_json::Value::Null))
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
            assert_eq!(kept.id(), super::super::id_of(customization));
            assert_eq!(&kept.customization(), customization);
            assert!(kept.same_as(&Kept::keep(&kept.customization())));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
