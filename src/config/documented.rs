//! Tests that hold the key table to what it describes: the parser's schema (same keys), the
//! configuration table in docs/configuration.md (same keys, defaults, ranges) and the bundled
//! proxy.toml.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::keys::{Key, ALL};
use super::Config;

/// The tables of proxy.toml as the key table names them, with how to open each in TOML.
fn tables() -> BTreeMap<&'static str, &'static str> {
    let mut tables = BTreeMap::new();
    for key in ALL {
        let table = key.name().rsplit_once('.').map_or("", |(table, _)| table);
        let header = match table {
            "" => "",
            "directories" => "[[directories]]\n",
            "servers.<name>" => "[servers.a]\n",
            "ahp" => "[ahp]\n",
            "mcp" => "[mcp]\n",
            "agent" => "[agent]\n",
            "session" => "[session]\n",
            "limits" => "[limits]\n",
            "supervisor" => "[supervisor]\n",
            "clients" => "[clients]\n",
            "approval" => "[approval]\n",
            "trust" => "[trust]\n",
            "approval.servers.<name>" => "[approval.servers.a]\n",
            "approval.servers.<name>.tools.<tool>" => "[approval.servers.a.tools.t]\n",
            other => panic!("a table the test does not know: {other}"),
        };
        tables.insert(table, header);
    }
    tables
}

/// The keys the parser accepts in a table: an unknown key's error lists them.
fn schema_keys(header: &str) -> BTreeSet<String> {
    let text = format!("{header}zz_not_a_key = 0\n");
    let message = Config::parse(&text, "proxy.toml", Path::new("/base"))
        .expect_err("an unknown key is an error")
        .to_string();
    let (_, expected) = message
        .split_once("expected")
        .unwrap_or_else(|| panic!("no list of keys in {message:?}"));
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

#[test]
fn the_table_and_the_parser_know_the_same_keys() {
    for (table, header) in tables() {
        let mut expected: BTreeSet<String> = ALL
            .iter()
            .filter_map(|key| match key.name().rsplit_once('.') {
                Some((t, name)) if t == table => Some(name.to_string()),
                None if table.is_empty() => Some(key.name().to_string()),
                _ => None,
            })
            .collect();
        // The tables inside a table are keys of it too.
        let inside = |t: &str| match table {
            "" => Some(t.to_string()),
            table => t.strip_prefix(table)?.strip_prefix('.').map(str::to_string),
        };
        expected.extend(
            tables()
                .keys()
                .filter(|t| !t.is_empty())
                .filter_map(|t| inside(t))
                .map(|t| t.split('.').next().unwrap_or_default().to_string()),
        );
        assert_eq!(schema_keys(header), expected, "keys of [{table}]");
    }
}

/// `[limits] client_queue` → `limits.client_queue`, `[[directories]] path` →
/// `directories.path`, `plugin_roots` → `plugin_roots`.
fn dotted(readme_key: &str) -> String {
    match readme_key.rsplit_once(' ') {
        Some((table, key)) => format!("{}.{key}", table.trim_matches(['[', ']'])),
        None => readme_key.to_string(),
    }
}

/// The rows of docs/configuration.md's key table: dotted key → (default, range) cells.
fn documented_rows() -> BTreeMap<String, (String, String)> {
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/configuration.md");
    let page = std::fs::read_to_string(page).expect("docs/configuration.md is readable");
    let (_, section) = page
        .split_once("# Configuration (`proxy.toml`)")
        .expect("docs/configuration.md has its title");
    let section = section.split("\n## ").next().unwrap_or_default();
    let mut rows = BTreeMap::new();
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split(" | ").map(str::trim).collect();
        assert_eq!(cells.len(), 4, "key | default | range | meaning: {line}");
        let key = dotted(cells[0].trim_start_matches("| ").trim_matches('`'));
        let previous = rows.insert(key.clone(), (cells[1].to_string(), cells[2].to_string()));
        assert!(previous.is_none(), "{key} is documented twice");
    }
    rows
}

#[test]
fn the_configuration_page_documents_every_key_with_its_default_and_range() {
    let mut rows = documented_rows();
    for key in ALL {
        let Some((default, range)) = rows.remove(key.name()) else {
            panic!("{} is not in docs/configuration.md's key table", key.name());
        };
        assert_eq!(
            default,
            key.documented_default(),
            "default of {}",
            key.name()
        );
        assert_eq!(range, key.documented_range(), "range of {}", key.name());
    }
    assert!(
        rows.is_empty(),
        "docs/configuration.md documents keys that do not exist: {:?}",
        rows.keys()
    );
}

/// A key of one server or one directory entry (whose examples are not defaults).
fn per_entry(name: &str) -> bool {
    name.starts_with("servers.") || name.starts_with("directories.")
}

/// Every key with one literal default, written out as TOML (per-entry keys left out).
fn defaults_written_out() -> String {
    let mut text = String::new();
    let mut table = "";
    for key in ALL {
        let (section, name) = key.name().rsplit_once('.').unwrap_or(("", key.name()));
        let value = match key {
            Key::Number(k) => k.default.to_string(),
            Key::Text(k) => format!("{:?}", k.default),
            Key::Flag(k) => k.default.to_string(),
            Key::Other(_) => continue,
        };
        if per_entry(key.name()) {
            continue;
        }
        if section != table {
            text.push_str(&format!("[{section}]\n"));
            table = section;
        }
        text.push_str(&format!("{name} = {value}\n"));
    }
    text
}

#[test]
fn the_table_defaults_are_the_defaults_the_parser_gives() {
    let parse = |text: &str| Config::parse(text, "proxy.toml", Path::new("/base"));
    let written = defaults_written_out();
    assert_eq!(
        parse(&written).expect("the table's defaults are valid"),
        parse("").expect("an empty file is valid"),
        "{written}"
    );
    let empty = parse("").expect("an empty file is valid");
    assert_eq!(empty.mcp, super::McpConfig::default());
    assert_eq!(empty.limits, super::Limits::default());
    assert_eq!(empty.supervisor, super::SupervisorConfig::default());
}

/// proxy.toml's `key = value` lines, per-entry ones left out: dotted key → (value as written, the comment lines above it).
fn proxy_toml_settings() -> BTreeMap<String, (String, String)> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("proxy.toml"))
        .expect("proxy.toml is readable");
    let lines: Vec<&str> = text.lines().collect();
    let mut settings = BTreeMap::new();
    let mut table = "";
    for (n, line) in lines.iter().enumerate() {
        if line.starts_with('[') {
            let header = line.split('#').next().unwrap_or_default();
            table = header.trim().trim_matches(['[', ']']);
            continue;
        }
        let Some((name, value)) = line.split_once(" = ") else {
            continue;
        };
        let dotted = match table {
            "" => name.to_string(),
            table => format!("{table}.{name}"),
        };
        if per_entry(&dotted) {
            continue;
        }
        let value = value.split(" #").next().unwrap_or_default().trim();
        let comment: Vec<&str> = lines[..n]
            .iter()
            .rev()
            .take_while(|l| l.starts_with('#'))
            .copied()
            .collect();
        settings.insert(dotted, (value.to_string(), comment.join("\n")));
    }
    settings
}

#[test]
fn the_bundled_proxy_toml_shows_each_default_and_range() {
    let settings = proxy_toml_settings();
    for key in ALL {
        let shown = settings.get(key.name());
        let (value, comment) = match (key, shown) {
            (Key::Other(_), _) => continue,
            _ if per_entry(key.name()) => continue,
            (_, Some(shown)) => shown,
            (_, None) => panic!("proxy.toml does not show {}", key.name()),
        };
        let name = key.name();
        match key {
            Key::Number(k) => {
                assert_eq!(*value, k.default.to_string(), "{name}");
                assert_eq!(ranges_in(comment), [(k.min, k.max)], "range above {name}");
            }
            Key::Text(k) => assert_eq!(*value, format!("{:?}", k.default), "{name}"),
            Key::Flag(k) => assert_eq!(*value, k.default.to_string(), "{name}"),
            Key::Other(_) => {}
        }
    }
}

/// Every `min..=max` in a text.
fn ranges_in(text: &str) -> Vec<(i64, i64)> {
    let not_digit = |c: char| !c.is_ascii_digit();
    text.match_indices("..=")
        .filter_map(|(at, _)| {
            let before = &text[..at];
            let min = &before[before.rfind(not_digit).map_or(0, |i| i + 1)..];
            let after = &text[at + 3..];
            let max = &after[..after.find(not_digit).unwrap_or(after.len())];
            Some((min.parse().ok()?, max.parse().ok()?))
        })
        .collect()
}
