//! Unit tests of `Config::parse`: defaults, every kind of problem with its position, path
//! resolution, server declarations and their ranges, and secrets kept out of `Debug`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;
use crate::spec::{Launch, NamePrefix};

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, "proxy.toml", Path::new("/base"))
}

fn error(text: &str) -> String {
    match parse(text) {
        Ok(_) => panic!("expected an error for {text:?}"),
        Err(error) => error.to_string(),
    }
}

#[test]
fn empty_file_gives_defaults() {
    let config = parse("").expect("empty config is valid");
    assert_eq!(config.ahp.listen.to_string(), keys::AHP_LISTEN.default);
    assert_eq!(config.agent.provider, "ahp-proxy");
    assert_eq!(config.session.title, "MCP harness (ahp-proxy)");
    assert_eq!(config.limits, Limits::default());
    assert!(config.servers.is_empty());
}

#[test]
fn unknown_top_level_key_names_key_line_and_column() {
    let message = error("\n\nlisten = \"x\"\n");
    assert!(message.starts_with("proxy.toml:3:1: "), "{message}");
    assert!(message.contains("unknown field `listen`"), "{message}");
}

#[test]
fn unknown_nested_key_points_at_the_key() {
    let message = error("[ahp]\nlisten = \"127.0.0.1:1\"\n  lisen = 3\n");
    assert!(message.starts_with("proxy.toml:3:3: "), "{message}");
    assert!(message.contains("unknown field `lisen`"), "{message}");
    assert!(message.contains("; did you mean `listen`?"), "{message}");
    // No guess for a key that resembles nothing.
    assert!(!error("[ahp]\nzzzzzz = 1\n").contains("did you mean"));
}

#[test]
fn the_view_origins_port_is_a_port() {
    assert_eq!(parse("").unwrap().ahp.views_port, 0);
    assert_eq!(
        parse("[ahp]\nviews_port = 8767\n").unwrap().ahp.views_port,
        8767
    );
    assert!(error("[ahp]\nviews_port = 70000\n").contains("ahp.views_port = 70000 is out of range"));
}

#[test]
fn endpoint_security_keys_are_checked_and_the_token_never_printed() {
    let config = parse(
        "[ahp]\ntoken = \"0123456789abcdef\"\nallowed_origins = [\"HTTPS://App.Example/\", \"*\"]\nallowed_hosts = [\"ahp.lan\"]\n[limits]\nidle_timeout_ms = 5000\nhandshake_timeout_ms = 700\n",
    )
    .unwrap();
    assert_eq!(config.ahp.allowed_origins, ["https://app.example", "*"]);
    assert_eq!(config.ahp.allowed_hosts, ["ahp.lan"]);
    assert_eq!(config.limits.idle_timeout, Duration::from_secs(5));
    assert_eq!(config.limits.handshake_timeout, Duration::from_millis(700));
    assert!(!format!("{config:?}").contains("0123456789abcdef"));
    let message = error("[ahp]\ntoken = \"short\"\nallowed_origins = [\"example.com\"]\n");
    assert!(
        message.contains("proxy.toml:2:9: ahp.token must be at least 16"),
        "{message}"
    );
    assert!(
        message.contains("proxy.toml:3:20: ahp.allowed_origins: \"example.com\""),
        "{message}"
    );
    assert!(error("[limits]\nidle_timeout_ms = 10\n").contains("limits.idle_timeout_ms"));
}

#[test]
fn the_mcp_token_is_checked_like_the_ahp_one_and_never_printed() {
    let config = parse("[mcp]\ntoken = \"fedcba9876543210\"\n").unwrap();
    assert_eq!(
        config.mcp.token.as_ref().map(|t| t.0.as_str()),
        Some("fedcba9876543210")
    );
    assert!(!format!("{config:?}").contains("fedcba9876543210"));
    let message = error("[mcp]\ntoken = \"too short\"\n");
    assert!(
        message.contains("proxy.toml:2:9: mcp.token must be at least 16"),
        "{message}"
    );
    assert!(message.contains("AHP_PROXY_MCP_TOKEN"), "{message}");
    assert!(!message.contains("too short"), "{message}");
}

/// The provider is the scheme of the session URIs (`<provider>:/default`): a URI scheme, not
/// one of the host's other channels.
#[test]
fn the_provider_must_be_a_uri_scheme() {
    for good in ["ahp-proxy", "my.agent+2-x", "A1", "ahp-session"] {
        let config = parse(&format!("[agent]\nprovider = {good:?}\n")).expect(good);
        assert_eq!(config.agent.provider, good);
    }
    for bad in [
        "",
        "ahp proxy",
        "ahp_proxy",
        "1agent",
        "-agent",
        "a:b",
        "a/b",
        "agént",
    ] {
        let message = error(&format!("[agent]\nprovider = {bad:?}\n"));
        assert!(message.starts_with("proxy.toml:2:12: "), "{message}");
        assert!(
            message.contains("agent.provider") && message.contains("expected a URI scheme"),
            "{message}"
        );
    }
    for taken in ["ahp-chat", "AHP-ROOT", "mcp"] {
        let message = error(&format!("[agent]\nprovider = {taken:?}\n"));
        assert!(message.contains("other channels"), "{message}");
    }
}

#[test]
fn bad_listen_address_points_at_the_value() {
    let message = error("[ahp]\nlisten = \"localhost\"\n");
    assert!(message.starts_with("proxy.toml:2:10: "), "{message}");
    assert!(message.contains("ahp.listen"), "{message}");
}

#[test]
fn wrong_value_type_is_reported_with_position() {
    let message = error("[limits]\nclient_queue = \"many\"\n");
    assert!(message.starts_with("proxy.toml:2:16: "), "{message}");
}

#[test]
fn out_of_range_limit_names_the_key_and_range() {
    let message = error("[limits]\nclient_queue = 0\n");
    assert!(message.starts_with("proxy.toml:2:16: "), "{message}");
    assert!(
        message.contains("limits.client_queue = 0 is out of range"),
        "{message}"
    );
}

#[test]
fn the_mcp_front_is_configurable_and_checked() {
    let config = parse(
        "[mcp]\nlisten = \"127.0.0.1:9000\"\nprefix = \"always\"\nseparator = \".\"\nrequest_timeout_ms = 1000\nallowed_hosts = [\"mcp.lan\"]\n",
    )
    .expect("valid");
    assert_eq!(config.mcp.listen.map(|a| a.port()), Some(9000));
    assert_eq!(config.mcp.prefix, NamePrefix::Always);
    assert_eq!(config.mcp.separator, ".");
    assert_eq!(config.mcp.request_timeout, Duration::from_secs(1));
    assert_eq!(config.mcp.allowed_hosts, ["mcp.lan"]);
    assert_eq!(parse("[mcp]\nhttp = false\n").unwrap().mcp.listen, None);
    let message = error("[mcp]\nprefix = \"sometimes\"\nseparator = \"::\"\n");
    assert!(
        message.starts_with("proxy.toml:2:10: mcp.prefix"),
        "{message}"
    );
    assert!(
        message.contains("proxy.toml:3:13: mcp.separator"),
        "{message}"
    );
}

#[test]
fn every_problem_is_reported_in_file_order() {
    let message = error("[limits]\nclient_queue = 0\nreplay_log = -1\n[ahp]\nlisten = \"nope\"\n");
    let lines: Vec<&str> = message.lines().collect();
    assert_eq!(lines.len(), 3, "{message}");
    assert!(lines[0].starts_with("proxy.toml:2:"));
    assert!(lines[1].starts_with("proxy.toml:3:"));
    assert!(lines[2].starts_with("proxy.toml:5:"));
}

#[test]
fn servers_are_validated_and_paths_resolved() {
    let config = parse(
        "plugin_roots = [\"plugins\"]\n[servers.echo]\ncommand = \"echo-server\"\nargs = [\"--fast\"]\ncwd = \"work\"\n[servers.remote]\nurl = \"https://example.com/mcp\"\nenabled = false\n",
    )
    .expect("valid");
    assert_eq!(config.plugin_roots, vec![PathBuf::from("/base/plugins")]);
    let odd = parse("plugin_roots = [\"./a/../b/.\", \"../up\"]\n").expect("valid");
    assert_eq!(
        odd.plugin_roots,
        [PathBuf::from("/base/b"), PathBuf::from("/up")]
    );
    assert_eq!(config.servers.len(), 2);
    assert_eq!(config.servers[0].name, "echo");
    assert_eq!(config.servers[0].declared_at, "proxy.toml:2:10");
    match &config.servers[0].transport {
        Launch::Stdio { cwd, args, .. } => {
            assert_eq!(cwd.as_deref(), Some(Path::new("/base/work")));
            assert_eq!(args, &["--fast"]);
        }
        other => panic!("expected stdio, got {}", other.kind()),
    }
    assert!(!config.servers[1].enabled);
    assert_eq!(config.servers[1].transport.kind(), "http");
}

#[test]
fn server_ranges_cover_the_whole_table() {
    let text = "[servers.a]\ncommand = \"x\"\nargs = [\"y\"]  # note\n\n# comment\n[servers.b]\nurl = \"http://h\"\n";
    let config = parse(text).expect("valid");
    let a = &config.servers[0].range;
    assert_eq!((a.start.line, a.start.character), (0, 9));
    assert_eq!((a.end.line, a.end.character), (2, 20));
    let b = &config.servers[1].range;
    assert_eq!((b.start.line, b.end.line, b.end.character), (5, 6, 16));
    let inline = parse("[servers]\nc = { command = \"x\" }\n").expect("valid");
    let c = &inline.servers[0].range;
    assert_eq!(
        (c.start.line, c.start.character, c.end.line, c.end.character),
        (1, 0, 1, 21)
    );
}

#[test]
fn server_needs_exactly_one_of_command_and_url() {
    assert!(error("[servers.a]\nargs = []\n").contains("missing `command`"));
    assert!(error("[servers.a]\ncommand = \"x\"\nurl = \"http://x\"\n").contains("not both"));
    assert!(error("[servers.a]\nurl = \"ftp://x\"\n").contains("must start with http"));
    assert!(
        error("[servers.a]\ntype = \"carrier-pigeon\"\ncommand = \"x\"\n")
            .contains("not a server type")
    );
}

#[test]
fn server_debug_output_hides_the_launch_spec() {
    let config = parse("[servers.a]\ncommand = \"secret-binary\"\nenv = { TOKEN = \"hunter2\" }\n")
        .expect("valid");
    let debug = format!("{:?}", config.servers[0]);
    assert!(!debug.contains("secret-binary"), "{debug}");
    assert!(!debug.contains("hunter2"), "{debug}");
    assert!(debug.contains("stdio"), "{debug}");
}

#[test]
fn bundled_proxy_toml_is_valid() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("proxy.toml");
    Config::load(&path).expect("the bundled proxy.toml must stay valid");
}

#[test]
fn every_mistake_of_a_file_is_reported_in_one_run() {
    let text = "\
lisen = 1
[ahp]
listen = \"localhost\"
tokn = \"x\"
[limits]
client_queue = \"many\"
replay_log = -5
[[directories]]
path = \"d\"
contents = \"skil\"
[servers.a]
comand = \"x\"
[servers.b]
args = \"--flag\"
command = \"y\"
";
    let error = parse(text).expect_err("six mistakes");
    let lines: Vec<String> = error.problems.iter().map(|p| p.to_string()).collect();
    for expected in [
        "proxy.toml:1:1: unknown field `lisen`",
        "proxy.toml:3:10: ahp.listen",
        "proxy.toml:4:1: unknown field `tokn`",
        "proxy.toml:6:16: ",
        "proxy.toml:7:14: limits.replay_log = -5 is out of range",
        "proxy.toml:10:12: ",
        "proxy.toml:12:1: unknown field `comand`",
        "proxy.toml:14:8: ",
    ] {
        assert!(
            lines.iter().any(|l| l.starts_with(expected)),
            "missing {expected:?} in\n{}",
            lines.join("\n")
        );
    }
}

#[test]
fn syntax_errors_are_all_reported_too() {
    let error = parse("a = \nb = [1,\n[ahp]\nlisten = 3\n").expect_err("broken");
    assert!(error.problems.len() >= 2, "{error}");
}

#[test]
fn approval_defaults_to_never_and_reads_its_overrides() {
    use crate::approval::{Mode, OnTimeout};
    let empty = parse("").unwrap().approval;
    assert!(empty.is_inert());
    assert_eq!(empty, crate::approval::Policy::default());
    let config = parse(
        "[approval]\nmode = \"destructive\"\ntimeout_ms = 5000\non_timeout = \"allow\"\n\
         [approval.servers.notes]\nmode = \"always\"\n\
         [approval.servers.notes.tools.list_notes]\nmode = \"never\"\nreview_result = true\n",
    )
    .unwrap()
    .approval;
    assert_eq!(config.mode, Mode::Destructive);
    assert_eq!(config.timeout, Duration::from_millis(5000));
    assert_eq!(config.on_timeout, OnTimeout::Allow);
    assert_eq!(config.mode_of("notes", "add_note"), Mode::Always);
    assert_eq!(config.mode_of("notes", "list_notes"), Mode::Never);
    assert_eq!(config.mode_of("clock", "now"), Mode::Destructive);
    let facts = crate::approval::Facts::default();
    assert!(config.judge("notes", "list_notes", facts).review_result);
}

#[test]
fn approval_mistakes_name_the_key_and_where() {
    let message = error("[approval]\nmode = \"sometimes\"\n");
    assert!(message.starts_with("proxy.toml:2:8: "), "{message}");
    assert!(
        message.contains("approval.mode = \"sometimes\""),
        "{message}"
    );
    let message = error("[approval.servers.notes.tools.x]\n\nmode = \"maybe\"\n");
    assert!(message.starts_with("proxy.toml:3:8: "), "{message}");
    assert!(
        message.contains("approval.servers.notes.tools.x.mode = \"maybe\""),
        "{message}"
    );
    let message = error("[approval]\non_timeout = \"shrug\"\ntimeout_ms = 5\n");
    assert!(
        message.contains("proxy.toml:2:14: approval.on_timeout"),
        "{message}"
    );
    assert!(
        message.contains("proxy.toml:3:14: approval.timeout_ms = 5 is out of range"),
        "{message}"
    );
    let message = error("[approval.servers.notes]\nmod = \"always\"\n");
    assert!(message.contains("did you mean `mode`?"), "{message}");
}

#[test]
fn the_sessions_working_directories_are_the_plugin_folders_unless_chosen() {
    let derived = parse(
        "plugin_roots = [\"plugins\", \"team\"]\nmanifests = [\"team/plugins.json\", \"m/x.json\"]\n",
    )
    .expect("valid");
    assert_eq!(
        derived.working_directories(),
        ["/base/plugins", "/base/team", "/base/m"].map(PathBuf::from)
    );
    let chosen =
        parse("plugin_roots = [\"plugins\"]\n[session]\nworking_directories = [\"work\"]\n")
            .expect("valid");
    assert_eq!(chosen.working_directories(), [PathBuf::from("/base/work")]);
    let none = parse("plugin_roots = [\"plugins\"]\n[session]\nworking_directories = []\n")
        .expect("valid");
    assert!(none.working_directories().is_empty());
    assert!(parse("").expect("valid").working_directories().is_empty());
    assert!(error("[session]\nworking_directories = [\"\"]\n").contains("empty path"));
}
