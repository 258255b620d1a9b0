//! The console's files, embedded at build time from `console/` (no Node at build or run
//! time): the page, its scripts and styles, the View origin's relay, and the vendored App host.

/// One embedded file and the path it is served at.
pub struct Asset {
    pub path: &'static str,
    pub content_type: &'static str,
    pub bytes: &'static [u8],
}

const JS: &str = "text/javascript; charset=utf-8";

/// The page (`/`), a template: `__VIEW_PORT__` and `__TOKEN_REQUIRED__` are filled in.
pub const INDEX: &str = include_str!("../../console/index.html");

/// `asset!("/x.js", "x.js", JS)`: `console/x.js` served at `/x.js`.
macro_rules! asset {
    ($path:literal, $file:literal, $content_type:expr) => {
        Asset {
            path: $path,
            content_type: $content_type,
            bytes: include_bytes!(concat!("../../console/", $file)),
        }
    };
}

const SVG: &str = "image/svg+xml";

/// What the AHP listener serves besides the page.
pub const CONSOLE: &[Asset] = &[
    asset!("/console.js", "console.js", JS),
    asset!("/connection.js", "connection.js", JS),
    asset!("/mirror.js", "mirror.js", JS),
    asset!("/tree.js", "tree.js", JS),
    asset!("/activity.js", "activity.js", JS),
    asset!("/apps.js", "apps.js", JS),
    asset!("/dom.js", "dom.js", JS),
    asset!("/offers.js", "offers.js", JS),
    asset!("/workbench.js", "workbench.js", JS),
    asset!("/schema.js", "schema.js", JS),
    asset!("/form.js", "form.js", JS),
    asset!("/results.js", "results.js", JS),
    asset!("/summary.js", "summary.js", JS),
    asset!("/filter.js", "filter.js", JS),
    asset!("/chart.js", "chart.js", JS),
    asset!("/approvals.js", "approvals.js", JS),
    asset!("/style.css", "style.css", "text/css; charset=utf-8"),
    // The page names the SVG; browsers and tools that ask for `/favicon.ico` get it too.
    asset!("/favicon.svg", "favicon.svg", SVG),
    asset!("/favicon.ico", "favicon.svg", SVG),
    asset!("/vendor/app-bridge.js", "vendor/app-bridge.js", JS),
    asset!(
        "/vendor/LICENSES.txt",
        "vendor/LICENSES.txt",
        "text/plain; charset=utf-8"
    ),
];

/// The View origin's relay page (`/sandbox`, served with the View's CSP) and its script.
pub const SANDBOX_HTML: &[u8] = include_bytes!("../../console/sandbox.html");
pub const SANDBOX_JS: Asset = asset!("/sandbox.js", "sandbox.js", JS);
