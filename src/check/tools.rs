//! What `check` says about each server's tool filters: the tools its declaration hides from
//! the harness (`disabledTools`, `includeTools`, `excludeTools`) and pre-approves.

use serde_json::{json, Value};

use crate::catalog::Catalog;
use crate::spec::ToolFilters;

/// The lines under a server's line (`indent` deep) naming what it hides and pre-approves;
/// none when its declaration filters nothing.
pub fn lines(catalog: &Catalog, id: &str, indent: &str) -> Vec<String> {
    let Some(tools) = filters_of(catalog, id) else {
        return Vec::new();
    };
    let mut hides = Vec::new();
    if !tools.disabled.is_empty() {
        hides.push(format!("disabledTools {}", tools.disabled.join(", ")));
    }
    if let Some(only) = &tools.include {
        hides.push(format!("all but includeTools {}", only.join(", ")));
    }
    if !tools.exclude.is_empty() {
        hides.push(format!("excludeTools {}", tools.exclude.join(", ")));
    }
    let mut out = Vec::new();
    if !hides.is_empty() {
        out.push(format!("{indent}hides {}", hides.join("; ")));
    }
    if !tools.pre_approved.is_empty() {
        out.push(format!(
            "{indent}pre-approves {}",
            tools.pre_approved.join(", ")
        ));
    }
    out
}

/// Every server that filters something, by id: `{name, disabledTools, includeTools,
/// excludeTools, preApproved}` (`includeTools` is `null` when not declared).
pub fn json(catalog: &Catalog) -> Value {
    let servers: serde_json::Map<String, Value> = catalog
        .servers()
        .filter(|s| !s.tools.is_empty())
        .map(|s| {
            let t = &s.tools;
            let value = json!({
                "name": s.name,
                "disabledTools": t.disabled,
                "includeTools": t.include,
                "excludeTools": t.exclude,
                "preApproved": t.pre_approved,
            });
            (s.id.clone(), value)
        })
        .collect();
    Value::Object(servers)
}

fn filters_of<'a>(catalog: &'a Catalog, id: &str) -> Option<&'a ToolFilters> {
    catalog
        .servers()
        .find(|s| s.id == id)
        .map(|s| &s.tools)
        .filter(|t| !t.is_empty())
}
