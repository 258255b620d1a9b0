//! `x-mcp-header` (MCP 2026-07-28, standard headers): the tool arguments a modern HTTP server
//! wants mirrored as `Mcp-Param-{Name}` headers, read from its `tools/list`, checked as the
//! spec says (a tool with an invalid annotation is left out of the list), and their values.

use std::collections::HashMap;

use serde_json::{Map, Value};

/// The schema annotation naming a header, as written (a server may write it with `\u`
/// escapes: a schema holding any is read in full too).
pub const ANNOTATION: &str = "x-mcp-header";

/// One annotated argument: its header's name (after `Mcp-Param-`) and where it is in the
/// arguments (a chain of property names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    /// The `x-mcp-header` value.
    pub header: String,
    /// The property names leading to it.
    pub path: Vec<String>,
}

/// What a `tools/list` result says: the annotated arguments of each tool, and the result
/// without the tools whose annotations are invalid (`None` when every tool is valid).
#[derive(Debug, Default)]
pub struct Listed {
    /// Tool name → its annotated arguments (tools without any are absent).
    pub params: HashMap<String, Vec<Param>>,
    /// The result's text without the invalid tools, if some were dropped.
    pub kept: Option<String>,
    /// The names of the tools dropped, and why.
    pub dropped: Vec<(String, String)>,
}

/// Read a `tools/list` result (`result`: its JSON text).
pub fn read_list(result: &str) -> Listed {
    let mut listed = Listed::default();
    let Ok(Value::Object(mut object)) = serde_json::from_str::<Value>(result) else {
        return listed;
    };
    let Some(Value::Array(tools)) = object.get_mut("tools") else {
        return listed;
    };
    let before = tools.len();
    tools.retain(|tool| {
        let name = tool["name"].as_str().unwrap_or_default().to_string();
        match annotations(&tool["inputSchema"]) {
            Ok(params) => {
                if !params.is_empty() {
                    listed.params.insert(name, params);
                }
                true
            }
            Err(why) => {
                listed.dropped.push((name, why));
                false
            }
        }
    });
    if tools.len() != before {
        listed.kept = serde_json::to_string(&Value::Object(object)).ok();
    }
    listed
}

/// The annotated arguments of `schema`, or why its annotations are invalid: each a
/// non-empty token, unique (ignoring case), on an `integer`, `string` or `boolean` property
/// reached through `properties` alone.
pub fn annotations(schema: &Value) -> Result<Vec<Param>, String> {
    let mut params = Vec::new();
    walk(schema, &mut Vec::new(), true, &mut params)?;
    let mut seen = std::collections::HashSet::new();
    for param in &params {
        if !seen.insert(param.header.to_ascii_lowercase()) {
            return Err(format!("x-mcp-header {:?} is used twice", param.header));
        }
    }
    Ok(params)
}

fn walk(
    schema: &Value,
    path: &mut Vec<String>,
    reachable: bool,
    params: &mut Vec<Param>,
) -> Result<(), String> {
    let Value::Object(object) = schema else {
        if let Value::Array(items) = schema {
            for item in items {
                walk(item, path, false, params)?;
            }
        }
        return Ok(());
    };
    if let Some(header) = object.get("x-mcp-header") {
        let at = path.join(".");
        if !reachable || path.is_empty() {
            return Err(format!("x-mcp-header on {at:?} is not on a plain property"));
        }
        let header = header.as_str().filter(|h| is_token(h)).ok_or_else(|| {
            format!("x-mcp-header on {at:?} is not a header name (an RFC 9110 token)")
        })?;
        if !matches!(
            object.get("type").and_then(Value::as_str),
            Some("integer" | "string" | "boolean")
        ) {
            return Err(format!(
                "x-mcp-header on {at:?} is not on an integer, string or boolean"
            ));
        }
        params.push(Param {
            header: header.to_string(),
            path: path.clone(),
        });
    }
    for (key, value) in object {
        match (key.as_str(), value) {
            ("properties", Value::Object(properties)) => {
                for (name, property) in properties {
                    path.push(name.clone());
                    walk(property, path, reachable, params)?;
                    path.pop();
                }
            }
            ("x-mcp-header" | "type" | "const" | "default" | "enum" | "examples", _) => {}
            (_, Value::Object(_) | Value::Array(_)) => walk(value, path, false, params)?,
            _ => {}
        }
    }
    Ok(())
}

/// An RFC 9110 token: one or more of `!#$%&'*+-.^_`|~`, digits and letters.
fn is_token(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// The `(header name, value)` of each of `params` present (and not null) in `arguments`:
/// strings as they are, integers in decimal, booleans `true`/`false` (values not yet
/// encoded for a header).
pub fn values(params: &[Param], arguments: &Map<String, Value>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for param in params {
        let Some((first, rest)) = param.path.split_first() else {
            continue;
        };
        let mut at = arguments.get(first);
        for name in rest {
            at = at.and_then(|v| v.get(name));
        }
        let value = match at {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Bool(b)) => b.to_string(),
            Some(Value::Number(n)) if n.is_i64() || n.is_u64() => n.to_string(),
            _ => continue,
        };
        out.push((format!("mcp-param-{}", param.header), value));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn annotated_arguments_are_read_along_plain_properties() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "opts": {"type": "object", "properties": {"n": {"type": "integer", "x-mcp-header": "N"}}},
            "plain": {"type": "string"}}});
        let params = annotations(&schema).unwrap();
        assert_eq!(params.len(), 2);
        let args = json!({"region": "us-west1", "opts": {"n": 7}, "plain": "x"});
        let mut got = values(&params, args.as_object().unwrap());
        got.sort();
        assert_eq!(
            got,
            vec![
                ("mcp-param-N".to_string(), "7".to_string()),
                ("mcp-param-Region".to_string(), "us-west1".to_string())
            ]
        );
        let none = json!({"region": null});
        assert!(values(&params, none.as_object().unwrap()).is_empty());
    }

    #[test]
    fn invalid_annotations_are_refused() {
        let bad = [
            json!({"properties": {"a": {"type": "number", "x-mcp-header": "A"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": ""}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "A B"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "X"},
                                  "b": {"type": "string", "x-mcp-header": "x"}}}),
            json!({"properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "I"}}}}),
            json!({"properties": {"a": {"anyOf": [{"type": "string", "x-mcp-header": "Y"}]}}}),
        ];
        for schema in bad {
            assert!(annotations(&schema).is_err(), "{schema}");
        }
    }

    #[test]
    fn a_list_loses_only_its_invalid_tools() {
        let result = json!({"tools": [
            {"name": "ok", "inputSchema": {"properties": {"r": {"type": "string", "x-mcp-header": "R"}}}},
            {"name": "bad", "inputSchema": {"properties": {"r": {"type": "number", "x-mcp-header": "R"}}}},
            {"name": "plain", "inputSchema": {"type": "object"}}], "nextCursor": "c"});
        let listed = read_list(&result.to_string());
        let kept: Value = serde_json::from_str(listed.kept.as_deref().unwrap()).unwrap();
        let names: Vec<&str> = (kept["tools"].as_array().unwrap().iter())
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["ok", "plain"]);
        assert_eq!(kept["nextCursor"], "c");
        assert_eq!(listed.dropped[0].0, "bad");
        assert_eq!(listed.params["ok"][0].header, "R");
        let clean = json!({"tools": [{"name": "plain", "inputSchema": {}}]});
        assert!(read_list(&clean.to_string()).kept.is_none());
    }
}
