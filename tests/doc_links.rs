//! Every relative link in README.md, ARCHITECTURE.md and docs/*.md leads somewhere: the file
//! exists, and a `#anchor` names a heading of that page (GitHub's slugs); and the README's
//! first lines give the two commands, the second being what `.ci/run` runs.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The Markdown pages whose links are checked.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md"), root().join("ARCHITECTURE.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ is readable")
        .map(|entry| entry.expect("a docs/ entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The lines of `text` outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|line| {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// The targets of `[text](target)` and `![alt](target)` links in `text`.
fn links(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in prose(text) {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let end = rest.find(')').unwrap_or(rest.len());
            found.push(rest[..end].to_string());
            rest = &rest[end..];
        }
    }
    found
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every anchor of a page: its headings' slugs, repeats numbered as GitHub does.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    for line in prose(text) {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let heading = heading.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        let base = slug(heading);
        let mut anchor = base.clone();
        let mut n = 0;
        while anchors.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        anchors.insert(anchor);
    }
    anchors
}

/// What is wrong with `target` linked from `page`, if anything.
fn broken(page: &Path, target: &str) -> Option<String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (file, anchor) = match target.split_once('#') {
        Some((file, anchor)) => (file, Some(anchor)),
        None => (target, None),
    };
    let file = if file.is_empty() {
        page.to_path_buf()
    } else {
        page.parent().expect("a page's folder").join(file)
    };
    let relative = normalised(&file);
    if !file.exists() {
        return Some(format!("{relative} does not exist"));
    }
    let anchor = anchor?;
    let text = std::fs::read_to_string(&file).ok()?;
    (!anchors(&text).contains(anchor)).then(|| format!("{relative} has no heading #{anchor}"))
}

/// `path` relative to the repository, without `..` or `.`.
fn normalised(path: &Path) -> String {
    let mut parts: Vec<String> = Vec::new();
    let relative = path.strip_prefix(root()).unwrap_or(path);
    for part in relative.components() {
        match part {
            std::path::Component::ParentDir => {
                parts.pop();
            }
            std::path::Component::Normal(name) => parts.push(name.to_string_lossy().into()),
            _ => {}
        }
    }
    parts.join("/")
}

#[test]
fn every_relative_link_resolves() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("read a page");
        for target in links(&text) {
            checked += 1;
            if let Some(problem) = broken(&page, &target) {
                problems.push(format!("{}: ({target}): {problem}", normalised(&page)));
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} links found: is the link reader broken?"
    );
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

#[test]
fn slugs_and_links_are_read_as_github_does() {
    assert_eq!(
        slug("Configuration (`proxy.toml`)"),
        "configuration-proxytoml"
    );
    assert_eq!(
        slug("MCP Apps and the `mcp://` channel (for AHP clients)"),
        "mcp-apps-and-the-mcp-channel-for-ahp-clients"
    );
    let page =
        "# A\n## B\n## B\n```\n## not a heading [x](nowhere.md)\n```\n[y](#b-1) ![z](p.png)\n";
    assert_eq!(
        anchors(page).into_iter().collect::<Vec<_>>(),
        ["a", "b", "b-1"]
    );
    assert_eq!(links(page), ["#b-1", "p.png"]);
    let readme = root().join("README.md");
    assert!(broken(&readme, "docs/nowhere.md").is_some());
    assert!(broken(&readme, "docs/configuration.md#no-such-heading").is_some());
    assert!(broken(&readme, "docs/configuration.md").is_none());
}

/// The README's first lines: a shell block with the command that runs the proxy, then the one
/// that runs the whole test suite; `.ci/run` runs exactly that test command.
#[test]
fn ci_runs_the_readme_test_command() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let first_block = readme
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a ```sh block in the README");
    assert!(
        readme.find("```sh\n") < readme.find("\n\n```\n"),
        "the two commands come before anything else in the README"
    );
    let commands: Vec<&str> = first_block
        .lines()
        .map(|line| line.split(" #").next().unwrap_or_default().trim())
        .filter(|line| !line.is_empty())
        .collect();
    assert_eq!(commands.len(), 2, "run, then test: {commands:?}");
    assert!(
        commands[0].contains("target/release/ahp-proxy"),
        "{commands:?}"
    );
    let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    assert!(
        ci.lines().any(|line| line.trim() == commands[1]),
        ".ci/run does not run the README's test command `{}`",
        commands[1]
    );
}
