//! Discovery against the fixture plugins in tests/fixtures/plugins (one per dialect) and
//! scratch folders for every bad-input case: exact ranges, expansion, load states.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ahp_proxy::catalog::{Catalog, Sources};
use ahp_proxy::discovery::directory::scan_directory;
use ahp_proxy::discovery::manifest::scan_manifest;
use ahp_proxy::discovery::plugin::{detect, scan_plugin, Dialect};
use ahp_proxy::discovery::{Context, DeclaredServer, Scan};
use ahp_proxy::spec::{ContentKind, DirectorySpec, Launch};
use ahp_types::state::{
    ChildCustomization, Customization, CustomizationLoadState, PluginCustomization, TextPosition,
    TextRange,
};
use ahp_types::StateAction;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/plugins")
        .join(name)
}

fn ctx(vars: &[(&str, &str)]) -> Context {
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Context {
        data_dir: PathBuf::from("/data"),
        env: Box::new(move |name| vars.get(name).cloned()),
    }
}

fn plugin(scan: &Scan) -> &PluginCustomization {
    match &scan.customizations[0] {
        Customization::Plugin(p) => p,
        other => panic!("expected a plugin, got {other:?}"),
    }
}

fn children(scan: &Scan) -> &[ChildCustomization] {
    plugin(scan).children.as_deref().unwrap_or_default()
}

fn kinds_and_names(scan: &Scan) -> Vec<(String, String)> {
    children(scan)
        .iter()
        .map(|c| {
            let v = serde_json::to_value(c).unwrap();
            (
                v["type"].as_str().unwrap().to_string(),
                v["name"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn child(scan: &Scan, name: &str) -> serde_json::Value {
    let found = children(scan)
        .iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .find(|v| v["name"] == name);
    found.unwrap_or_else(|| panic!("no child named {name}"))
}

fn range(sl: i64, sc: i64, el: i64, ec: i64) -> TextRange {
    TextRange {
        start: TextPosition {
            line: sl,
            character: sc,
        },
        end: TextPosition {
            line: el,
            character: ec,
        },
    }
}

fn server<'a>(scan: &'a Scan, name: &str) -> &'a DeclaredServer {
    scan.servers
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no server {name}"))
}

fn load_message(scan: &Scan) -> (&'static str, String) {
    match plugin(scan).load.clone().expect("load is set") {
        CustomizationLoadState::Loaded(_) => ("loaded", String::new()),
        CustomizationLoadState::Loading(_) => ("loading", String::new()),
        CustomizationLoadState::Degraded(d) => ("degraded", d.message),
        CustomizationLoadState::Error(e) => ("error", e.message),
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("ahp-proxy-discovery-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

// ─── dialects ───────────────────────────────────────────────────────────────

#[test]
fn open_plugins_fixture_projects_every_component_with_exact_ranges() {
    let dir = fixture("inline-mcp-plugin");
    assert_eq!(detect(&dir).0, Dialect::OpenPlugins);
    let scan = scan_plugin(
        &dir,
        &ctx(&[("ACME_TOKEN", "t0k"), ("TICKETS_TOKEN", "tk")]),
    );
    let p = plugin(&scan);
    assert_eq!(p.name, "acme-devtools");
    assert_eq!(p.version.as_deref(), Some("1.4.0"));
    assert_eq!(load_message(&scan).0, "loaded", "{:?}", scan.problems);
    let uri = ahp_proxy::discovery::uri::file_uri(&dir);
    assert_eq!(p.id, uri);
    assert_eq!(
        kinds_and_names(&scan),
        [
            ("agent", "security-reviewer"),
            ("skill", "cut-release"),
            ("skill", "summarize-pr"),
            ("skill", "changelog"),
            ("rule", "house-rules"),
            ("rule", "ts-style"),
            ("hook", "hooks.json"),
            ("mcpServer", "acme-search"),
            ("mcpServer", "acme-tickets"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    let agent = child(&scan, "security-reviewer");
    assert_eq!(agent["model"], "sonnet");
    assert_eq!(agent["tools"], serde_json::json!(["Read", "Grep", "Glob"]));
    assert_eq!(agent["uri"], format!("{uri}/agents/security-reviewer.md"));
    assert_eq!(child(&scan, "cut-release")["disableModelInvocation"], true);
    assert!(child(&scan, "summarize-pr")
        .get("disableModelInvocation")
        .is_none());
    assert_eq!(
        child(&scan, "changelog")["description"],
        "Draft a CHANGELOG entry for the given version"
    );
    let ts = child(&scan, "ts-style");
    assert_eq!(
        ts["globs"],
        serde_json::json!(["src/**/*.ts", "src/**/*.tsx"])
    );
    assert_eq!(ts["alwaysApply"], false);
    assert_eq!(child(&scan, "house-rules")["alwaysApply"], true);

    let search = child(&scan, "acme-search");
    let manifest_uri = format!("{uri}/.plugin/plugin.json");
    assert_eq!(search["uri"], manifest_uri);
    assert_eq!(search["id"], format!("{manifest_uri}#mcp=acme-search"));
    assert_eq!(search["state"]["kind"], "starting");
    let ranged: TextRange = serde_json::from_value(search["range"].clone()).unwrap();
    assert_eq!(ranged, range(8, 4, 13, 5));
    let tickets: TextRange =
        serde_json::from_value(child(&scan, "acme-tickets")["range"].clone()).unwrap();
    assert_eq!(tickets, range(14, 4, 18, 5));
    // The manifest's inline servers win outright: .mcp.json is not read.
    assert!(scan.servers.iter().all(|s| s.name != "stray"));
    assert_eq!(scan.servers.len(), 2);
}

#[test]
fn open_plugins_launch_specs_are_expanded() {
    let dir = fixture("inline-mcp-plugin");
    let root = std::fs::canonicalize(&dir).unwrap();
    let context = ctx(&[("ACME_TOKEN", "t0k"), ("TICKETS_TOKEN", "tk")]);
    let scan = scan_plugin(&dir, &context);
    let data = context.plugin_data("acme-devtools", &root);
    match server(&scan, "acme-search").launch.clone().unwrap() {
        Launch::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            assert_eq!(command, format!("{}/bin/search-server", root.display()));
            assert_eq!(
                args,
                [
                    "--index",
                    &format!("{}/index", data.display()),
                    "--log-level",
                    "info"
                ]
            );
            assert_eq!(env["ACME_TOKEN"], "t0k");
            assert_eq!(cwd.unwrap(), root);
        }
        other => panic!("expected stdio, got {}", other.kind()),
    }
    match server(&scan, "acme-tickets").launch.clone().unwrap() {
        Launch::Http { url, headers, sse } => {
            assert_eq!(url, "https://tickets.example.com/mcp");
            assert_eq!(headers["Authorization"], "Bearer tk");
            assert!(!sse);
        }
        other => panic!("expected http, got {}", other.kind()),
    }
}

#[test]
fn an_unset_variable_puts_that_server_in_error_naming_the_variable() {
    let scan = scan_plugin(
        &fixture("inline-mcp-plugin"),
        &ctx(&[("TICKETS_TOKEN", "tk")]),
    );
    let search = child(&scan, "acme-search");
    assert_eq!(search["state"]["kind"], "error");
    let message = search["state"]["error"]["message"].as_str().unwrap();
    assert!(message.contains("${ACME_TOKEN}"), "{message}");
    assert!(message.contains("not set"), "{message}");
    assert!(server(&scan, "acme-search").launch.is_err());
    // The sibling is unaffected, and the plugin itself still loaded.
    assert_eq!(child(&scan, "acme-tickets")["state"]["kind"], "starting");
    assert_eq!(load_message(&scan).0, "loaded");
}

#[test]
fn claude_fixture_reads_dot_mcp_json_with_defaults_and_sse() {
    let dir = fixture("claude-style-plugin");
    assert_eq!(detect(&dir).0, Dialect::Claude);
    let scan = scan_plugin(&dir, &ctx(&[]));
    assert_eq!(plugin(&scan).name, "db-tools");
    assert_eq!(plugin(&scan).version.as_deref(), Some("0.3.1"));
    assert_eq!(load_message(&scan).0, "loaded", "{:?}", scan.problems);
    assert_eq!(
        kinds_and_names(&scan),
        [
            ("agent", "schema-reviewer"),
            ("skill", "db-migrate"),
            ("hook", "hooks.json"),
            ("mcpServer", "postgres"),
            ("mcpServer", "schema-docs"),
            ("mcpServer", "migrator"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    let agent = child(&scan, "schema-reviewer");
    assert_eq!(agent["tools"], serde_json::json!(["Read", "Grep"]));
    assert!(agent.get("model").is_none());
    for (name, expected) in [
        ("postgres", range(2, 4, 5, 5)),
        ("schema-docs", range(6, 4, 9, 5)),
        ("migrator", range(10, 4, 14, 5)),
    ] {
        let c = child(&scan, name);
        assert!(c["uri"]
            .as_str()
            .unwrap()
            .ends_with("/claude-style-plugin/.mcp.json"));
        let r: TextRange = serde_json::from_value(c["range"].clone()).unwrap();
        assert_eq!(r, expected, "{name}");
    }
    let root = std::fs::canonicalize(&dir).unwrap();
    match server(&scan, "postgres").launch.clone().unwrap() {
        Launch::Stdio { command, args, .. } => {
            assert_eq!(command, "npx");
            assert_eq!(args[2], "postgresql://localhost:5432/dev");
        }
        other => panic!("{}", other.kind()),
    }
    match server(&scan, "schema-docs").launch.clone().unwrap() {
        Launch::Http { url, sse, .. } => {
            assert_eq!(url, "http://localhost:8787/sse");
            assert!(sse);
        }
        other => panic!("{}", other.kind()),
    }
    match server(&scan, "migrator").launch.clone().unwrap() {
        Launch::Stdio { command, env, .. } => {
            assert_eq!(command, format!("{}/scripts/migrator.sh", root.display()));
            assert_eq!(
                env["MIGRATIONS_DIR"],
                format!("{}/migrations", root.display())
            );
        }
        other => panic!("{}", other.kind()),
    }
}

#[test]
fn agent_plugins_fixture_degrades_and_keeps_its_healthy_parts() {
    let dir = fixture("agent-plugins-broken");
    assert_eq!(detect(&dir).0, Dialect::AgentPlugins);
    let scan = scan_plugin(&dir, &ctx(&[]));
    assert_eq!(plugin(&scan).name, "lint-kit");
    let (state, message) = load_message(&scan);
    assert_eq!(state, "degraded");
    assert!(
        message.contains("agent-plugins-broken/mcp.json:1:1: invalid JSON: Unterminated object"),
        "{message}"
    );
    assert!(
        message.contains(
            "agent-plugins-broken/skills/bad-frontmatter/SKILL.md:1:1: invalid YAML frontmatter"
        ),
        "{message}"
    );
    assert_eq!(
        kinds_and_names(&scan),
        [("agent", "fixer"), ("skill", "lint-fix")].map(|(a, b)| (a.to_string(), b.to_string()))
    );
    assert!(
        scan.servers.is_empty(),
        "nothing launches from a broken mcp.json"
    );
}

#[test]
fn a_copilot_and_a_bare_plugin_are_recognised() {
    let dir = scratch("dialects");
    write(
        &dir.join("copilot/plugin.json"),
        "{ \"name\": \"legacy\" }\n",
    );
    write(
        &dir.join("copilot/agents/helper.agent.md"),
        "---\ndescription: helps\ninfer: false\n---\n",
    );
    write(
        &dir.join("copilot/hooks.json"),
        "{ \"version\": 1, \"hooks\": { \"preToolUse\": [] } }\n",
    );
    write(
        &dir.join("bare/skills/solo/SKILL.md"),
        "no frontmatter at all\n",
    );
    assert_eq!(detect(&dir.join("copilot")).0, Dialect::Copilot);
    assert_eq!(detect(&dir.join("bare")).0, Dialect::Bare);
    let copilot = scan_plugin(&dir.join("copilot"), &ctx(&[]));
    assert_eq!(plugin(&copilot).name, "legacy");
    let helper = child(&copilot, "helper");
    assert_eq!(helper["disableModelInvocation"], true);
    assert_eq!(helper["description"], "helps");
    assert_eq!(child(&copilot, "hooks.json")["type"], "hook");
    let bare = scan_plugin(&dir.join("bare"), &ctx(&[]));
    assert_eq!(plugin(&bare).name, "bare");
    assert_eq!(child(&bare, "solo")["type"], "skill");
}

// ─── manifests ──────────────────────────────────────────────────────────────

#[test]
fn plugins_json_declares_inline_plugins_sources_and_servers() {
    let dir = scratch("plugins-json");
    write(
        &dir.join("vendored/.claude-plugin/plugin.json"),
        "{ \"name\": \"vendored\" }\n",
    );
    let text = r#"{
  "plugins": [
    {
      "name": "ops",
      "version": "0.2.0",
      "mcpServers": {
        "a": { "command": "x" }
      }
    },
    { "source": "./vendored" }
  ],
  "mcpServers": {
    "top": { "url": "https://example.com/mcp" }
  }
}
"#;
    let path = dir.join("plugins.json");
    write(&path, text);
    let scan = scan_manifest(&path, &ctx(&[]));
    assert!(scan.problems.is_empty(), "{:?}", scan.problems);
    let names: Vec<String> = scan
        .customizations
        .iter()
        .map(|c| {
            serde_json::to_value(c).unwrap()["name"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(names, ["plugins.json", "ops", "vendored"]);
    let file_uri = ahp_proxy::discovery::uri::file_uri(&path);
    let [file, ops, _] = &scan.customizations[..] else {
        panic!()
    };
    let file = serde_json::to_value(file).unwrap();
    assert_eq!(file["id"], file_uri);
    assert_eq!(file["children"][0]["name"], "top");
    assert_eq!(file["children"][0]["uri"], file_uri);
    let top: TextRange = serde_json::from_value(file["children"][0]["range"].clone()).unwrap();
    assert_eq!(top, range(12, 4, 12, 47));
    let ops = serde_json::to_value(ops).unwrap();
    assert_eq!(ops["id"], format!("{file_uri}#plugin=ops"));
    let ops_range: TextRange = serde_json::from_value(ops["range"].clone()).unwrap();
    assert_eq!(ops_range, range(2, 4, 8, 5));
    let a: TextRange = serde_json::from_value(ops["children"][0]["range"].clone()).unwrap();
    assert_eq!(a, range(6, 8, 6, 31));
    assert_eq!(scan.servers.len(), 2);
    assert!(scan.watched.contains(&dir.join("vendored")));
}

#[test]
fn mcp_json_variants_flat_wrapped_and_vscode() {
    let dir = scratch("mcp-variants");
    let wrapped = dir.join("wrapped.json");
    write(
        &wrapped,
        "{ \"mcpServers\": { \"s\": { \"command\": \"x\" } } }",
    );
    let flat = dir.join("flat.json");
    write(
        &flat,
        "{ \"$schema\": \"x\", \"s\": { \"command\": \"x\" } }",
    );
    let vscode = dir.join(".vscode/mcp.json");
    write(
        &vscode,
        "{\n  \"inputs\": [],\n  \"servers\": {\n    \"s\": { \"type\": \"stdio\", \"command\": \"${workspaceFolder}/bin/s\" },\n    \"k\": { \"type\": \"http\", \"url\": \"https://x\", \"headers\": { \"A\": \"${input:key}\" } }\n  }\n}\n",
    );
    for path in [&wrapped, &flat] {
        let scan = scan_manifest(path, &ctx(&[]));
        assert_eq!(scan.servers.len(), 1, "{path:?}: {:?}", scan.problems);
        assert_eq!(scan.servers[0].name, "s");
        assert!(scan.problems.is_empty(), "{:?}", scan.problems);
    }
    let scan = scan_manifest(&vscode, &ctx(&[]));
    match scan.servers[0].launch.clone().unwrap() {
        Launch::Stdio { command, .. } => assert_eq!(command, format!("{}/bin/s", dir.display())),
        other => panic!("{}", other.kind()),
    }
    let err = scan.servers[1].launch.clone().unwrap_err().to_string();
    assert!(err.contains("${input:key}"), "{err}");
}

#[test]
fn non_ascii_before_a_span_counts_utf16_units() {
    let dir = scratch("utf16");
    let path = dir.join(".mcp.json");
    // "é" is one UTF-16 unit, "😀" is two: the key starts at character 1+2+2+2+2 = …
    let text = "{ \"mcpServers\": {\n\"déjà😀\": { \"command\": \"x\" }, \"b\": { \"command\": \"y\" } } }\n";
    write(&path, text);
    let scan = scan_manifest(&path, &ctx(&[]));
    let children = match &scan.customizations[0] {
        Customization::Plugin(p) => p.children.clone().unwrap(),
        _ => panic!(),
    };
    let b = serde_json::to_value(&children[1]).unwrap();
    let r: TextRange = serde_json::from_value(b["range"].clone()).unwrap();
    // Line 1 is `"déjà😀": { "command": "x" }, "b": …`; in UTF-16, `"déjà😀"` is 8 units,
    // `: { "command": "x" }, ` is 22, so "b" opens at 30 (bytes: 34, chars: 29).
    assert_eq!(
        r.start,
        TextPosition {
            line: 1,
            character: 30
        }
    );
    let a = serde_json::to_value(&children[0]).unwrap();
    let r: TextRange = serde_json::from_value(a["range"].clone()).unwrap();
    assert_eq!(r, range(1, 0, 1, 28));
}

// ─── bad input ──────────────────────────────────────────────────────────────

#[test]
fn an_unparseable_manifest_is_an_error_container_with_a_position() {
    let dir = scratch("bad-manifest");
    write(
        &dir.join("p/.plugin/plugin.json"),
        "{ \"name\": \"broken\",",
    );
    write(&dir.join("p/skills/s/SKILL.md"), "---\nname: s\n---\n");
    let scan = scan_plugin(&dir.join("p"), &ctx(&[]));
    let (state, message) = load_message(&scan);
    assert_eq!(state, "error");
    assert!(message.starts_with("p/.plugin/plugin.json:1:"), "{message}");
    assert_eq!(plugin(&scan).children.as_deref(), Some(&[][..]));
    assert!(scan.servers.is_empty());
}

#[test]
fn duplicate_keys_unknown_types_and_bad_entries_skip_only_themselves() {
    let dir = scratch("bad-entries");
    write(
        &dir.join("p/.mcp.json"),
        r#"{ "mcpServers": {
  "dup": { "command": "first" },
  "ws": { "type": "ws", "url": "ws://x" },
  "noargs": { "command": "x", "args": "not-a-list" },
  "dup": { "command": "second" },
  "ok": { "command": "fine" }
} }
"#,
    );
    let scan = scan_plugin(&dir.join("p"), &ctx(&[]));
    let (state, message) = load_message(&scan);
    assert_eq!(state, "degraded");
    assert!(message.contains("p/.mcp.json:2:3: server \"dup\" is declared twice; the later declaration at p/.mcp.json:5:3 wins"), "{message}");
    assert!(
        message.contains("p/.mcp.json:3:19: server \"ws\": unknown server type \"ws\""),
        "{message}"
    );
    assert!(
        message.contains("p/.mcp.json:4:39: server \"noargs\": `args` must be an array"),
        "{message}"
    );
    let names: Vec<&str> = scan.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["dup", "ok"]);
    match scan.servers[0].launch.clone().unwrap() {
        Launch::Stdio { command, .. } => assert_eq!(command, "second"),
        other => panic!("{}", other.kind()),
    }
}

#[test]
fn dot_mcp_json_wins_over_mcp_json_for_the_same_name() {
    let dir = scratch("two-mcp-files");
    write(
        &dir.join("p/.mcp.json"),
        "{ \"mcpServers\": { \"s\": { \"command\": \"a\" } } }",
    );
    write(
        &dir.join("p/mcp.json"),
        "{ \"mcpServers\": { \"s\": { \"command\": \"b\" }, \"t\": { \"command\": \"c\" } } }",
    );
    let scan = scan_plugin(&dir.join("p"), &ctx(&[]));
    let names: Vec<&str> = scan.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["s", "t"]);
    assert!(scan.servers[0].declared_at.starts_with("p/.mcp.json"));
    let (state, message) = load_message(&scan);
    assert_eq!(state, "degraded");
    assert!(
        message.contains("p/mcp.json:1:19: server \"s\" is already declared at p/.mcp.json:1:19"),
        "{message}"
    );
}

#[test]
fn paths_escaping_the_plugin_and_symlink_tricks_are_refused() {
    let dir = scratch("escapes");
    write(
        &dir.join("outside/skills/evil/SKILL.md"),
        "---\nname: evil\n---\n",
    );
    write(&dir.join("outside/secret.md"), "---\nname: secret\n---\n");
    write(
        &dir.join("p/.plugin/plugin.json"),
        "{ \"name\": \"p\", \"skills\": \"../outside/skills\" }",
    );
    std::fs::create_dir_all(dir.join("p/agents")).unwrap();
    std::os::unix::fs::symlink(
        dir.join("outside/secret.md"),
        dir.join("p/agents/secret.md"),
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("p/rules")).unwrap();
    std::os::unix::fs::symlink("loop-b.md", dir.join("p/rules/loop-a.md")).unwrap();
    std::os::unix::fs::symlink("loop-a.md", dir.join("p/rules/loop-b.md")).unwrap();
    write(&dir.join("p/rules/ok.mdc"), "---\ndescription: fine\n---\n");
    let scan = scan_plugin(&dir.join("p"), &ctx(&[]));
    let (state, message) = load_message(&scan);
    assert_eq!(state, "degraded");
    assert!(
        message.contains("path \"../outside/skills\" escapes the plugin folder"),
        "{message}"
    );
    assert!(
        message.contains("p/agents/secret.md: resolves outside the plugin folder"),
        "{message}"
    );
    assert!(
        message.contains("p/rules/loop-a.md: symbolic link loop"),
        "{message}"
    );
    assert_eq!(
        kinds_and_names(&scan),
        [("rule".to_string(), "ok".to_string())]
    );
}

#[test]
fn unreadable_and_non_utf8_files_are_reported() {
    let dir = scratch("unreadable");
    write(&dir.join("p/skills/bin/SKILL.md"), "");
    std::fs::write(
        dir.join("p/skills/bin/SKILL.md"),
        [0x2d, 0x2d, 0x2d, 0x0a, 0xff, 0xfe],
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("p/skills/dir-not-file/SKILL.md")).unwrap();
    let scan = scan_plugin(&dir.join("p"), &ctx(&[]));
    let (state, message) = load_message(&scan);
    assert_eq!(state, "degraded");
    assert!(
        message.contains("p/skills/bin/SKILL.md: not valid UTF-8 (byte 4)"),
        "{message}"
    );
    assert!(
        message.contains("p/skills/dir-not-file/SKILL.md: cannot read"),
        "{message}"
    );
}

#[test]
fn hooks_with_the_wrong_shape_degrade_the_plugin() {
    let dir = scratch("hooks");
    write(
        &dir.join("p/hooks/hooks.json"),
        "{ \"hooks\": { \"PreToolUse\": {} } }",
    );
    write(&dir.join("p/.plugin/plugin.json"), "{ \"name\": \"p\" }");
    let scan = scan_plugin(&dir.join("p"), &ctx(&[]));
    let (state, message) = load_message(&scan);
    assert_eq!(state, "degraded");
    assert!(
        message.contains("p/hooks/hooks.json:1:28: hook event \"PreToolUse\" must be an array"),
        "{message}"
    );
    assert!(children(&scan).is_empty());
}

#[test]
fn inline_hooks_in_a_manifest_get_a_range() {
    let dir = scratch("inline-hooks");
    write(
        &dir.join("p/.claude-plugin/plugin.json"),
        "{\n  \"name\": \"p\",\n  \"hooks\": { \"hooks\": { \"Stop\": [] } }\n}\n",
    );
    let scan = scan_plugin(&dir.join("p"), &ctx(&[]));
    let hook = child(&scan, "hooks");
    let r: TextRange = serde_json::from_value(hook["range"].clone()).unwrap();
    assert_eq!(r, range(2, 2, 2, 38));
}

#[test]
fn disabled_servers_are_stopped() {
    let dir = scratch("disabled");
    write(
        &dir.join("p/.mcp.json"),
        "{ \"mcpServers\": { \"s\": { \"command\": \"x\", \"disabled\": true } } }",
    );
    let scan = scan_plugin(&dir.join("p"), &ctx(&[]));
    assert_eq!(child(&scan, "s")["state"]["kind"], "stopped");
    assert!(!scan.servers[0].enabled);
}

#[test]
fn launch_specs_never_reach_the_customization_tree() {
    let scan = scan_plugin(
        &fixture("inline-mcp-plugin"),
        &ctx(&[
            ("ACME_TOKEN", "super-secret-token"),
            ("TICKETS_TOKEN", "tickets-secret"),
        ]),
    );
    let tree = serde_json::to_string(&scan.customizations).unwrap();
    for secret in [
        "super-secret-token",
        "tickets-secret",
        "search-server",
        "--index",
        "tickets.example.com",
    ] {
        assert!(!tree.contains(secret), "{secret} leaked into {tree}");
    }
    let debug = format!("{:?}", scan.servers);
    assert!(!debug.contains("super-secret-token"), "{debug}");
}

// ─── directories ────────────────────────────────────────────────────────────

#[test]
fn a_directory_of_prompts_is_a_directory_customization() {
    let dir = scratch("prompts");
    write(
        &dir.join("prompts/review.prompt.md"),
        "---\ndescription: Review the diff\n---\n",
    );
    write(&dir.join("prompts/notes.txt"), "ignored");
    let spec = DirectorySpec {
        path: dir.join("prompts"),
        name: "Prompts".into(),
        contents: ContentKind::Prompt,
        writable: true,
    };
    let scan = scan_directory(&spec);
    let v = serde_json::to_value(&scan.customizations[0]).unwrap();
    assert_eq!(v["type"], "directory");
    assert_eq!(v["contents"], "prompt");
    assert_eq!(v["writable"], true);
    assert_eq!(v["enabled"], true);
    assert_eq!(v["load"]["kind"], "loaded");
    assert_eq!(v["children"][0]["type"], "prompt");
    assert_eq!(v["children"][0]["name"], "review");
    assert_eq!(v["children"][0]["description"], "Review the diff");
    assert_eq!(v["children"].as_array().unwrap().len(), 1);
    let missing = scan_directory(&DirectorySpec {
        path: dir.join("nope"),
        ..spec
    });
    let v = serde_json::to_value(&missing.customizations[0]).unwrap();
    assert_eq!(v["load"]["kind"], "error");
}

// ─── catalog diffs ──────────────────────────────────────────────────────────

fn actions_summary(actions: &[StateAction]) -> Vec<String> {
    actions
        .iter()
        .map(|a| match a {
            StateAction::SessionCustomizationUpdated(u) => {
                let v = serde_json::to_value(&u.customization).unwrap();
                format!("updated {}", v["name"].as_str().unwrap())
            }
            StateAction::SessionCustomizationRemoved(r) => {
                format!("removed {}", r.id.rsplit('/').next().unwrap())
            }
            other => format!("{other:?}"),
        })
        .collect()
}

#[test]
fn rescans_emit_only_what_changed() {
    let dir = scratch("catalog");
    let root = dir.join("plugins");
    write(&root.join("a/.plugin/plugin.json"), "{ \"name\": \"a\" }");
    write(&root.join("b/.plugin/plugin.json"), "{ \"name\": \"b\" }");
    write(&root.join("not-a-plugin/readme.txt"), "x");
    let context = ctx(&[]);
    let mut catalog = Catalog::scan(
        Sources {
            plugin_roots: vec![root.clone()],
            ..Sources::default()
        },
        &context,
    );
    assert_eq!(catalog.customizations().len(), 2);

    // Touching a file without changing the tree: nothing.
    let dirty = catalog.dirty_for(&root.join("a/.plugin/plugin.json"));
    assert_eq!(catalog.rescan(&dirty, &context), vec![]);

    // Editing one plugin: one update for that plugin only.
    write(
        &root.join("a/skills/s/SKILL.md"),
        "---\ndescription: new\n---\n",
    );
    let dirty = catalog.dirty_for(&root.join("a/skills/s/SKILL.md"));
    assert_eq!(
        actions_summary(&catalog.rescan(&dirty, &context)),
        ["updated a"]
    );

    // A new plugin folder: one update for it.
    write(
        &root.join("c/.claude-plugin/plugin.json"),
        "{ \"name\": \"c\" }",
    );
    let dirty = catalog.dirty_for(&root.join("c/.claude-plugin/plugin.json"));
    assert_eq!(
        actions_summary(&catalog.rescan(&dirty, &context)),
        ["updated c"]
    );

    // Deleting a plugin folder: one removal.
    std::fs::remove_dir_all(root.join("b")).unwrap();
    let dirty = catalog.dirty_for(&root.join("b"));
    assert_eq!(
        actions_summary(&catalog.rescan(&dirty, &context)),
        ["removed b"]
    );
    assert_eq!(catalog.customizations().len(), 2);
}

#[test]
fn fifos_bom_and_floods_of_bad_entries_are_handled() {
    let dir = scratch("hostile");
    // A FIFO where a component file belongs must not hang the scan.
    std::fs::create_dir_all(dir.join("p/agents")).unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(dir.join("p/agents/pipe.md"))
        .status()
        .unwrap();
    assert!(status.success());
    // A byte-order mark is not part of the text: ranges count without it.
    write(
        &dir.join("p/.mcp.json"),
        "\u{feff}{ \"mcpServers\": { \"s\": { \"command\": \"x\" } } }",
    );
    let scan = scan_plugin(&dir.join("p"), &ctx(&[]));
    let (state, message) = load_message(&scan);
    assert_eq!(state, "degraded");
    assert!(
        message.contains("p/agents/pipe.md: cannot read: not a regular file"),
        "{message}"
    );
    let s: TextRange = serde_json::from_value(child(&scan, "s")["range"].clone()).unwrap();
    assert_eq!(s, range(0, 18, 0, 41));

    // 20,000 broken entries: each skipped, the message capped, nothing quadratic.
    let mut text = String::from("{ \"mcpServers\": {");
    for i in 0..20_000 {
        text.push_str(&format!("\"e{i}\": 1, \"e{i}\": 2,"));
    }
    text.push_str("\"ok\": { \"command\": \"y\" } } }");
    write(&dir.join("q/.mcp.json"), &text);
    let scan = scan_plugin(&dir.join("q"), &ctx(&[]));
    let (_, message) = load_message(&scan);
    assert_eq!(message.lines().count(), 101, "100 problems and a count");
    assert!(
        message.ends_with("… and 39900 more problems"),
        "{}",
        &message[message.len() - 80..]
    );
    assert_eq!(scan.servers.len(), 1);
}
