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

/// What the AHP listener serves besides the page.
pub const CONSOLE: &[Asset] = &[
    Asset {
        path: "/console.js",
        content_type: JS,
        bytes: include_bytes!("../../console/console.js"),
    },
    Asset {
        path: "/connection.js",
        content_type: JS,
        bytes: include_bytes!("../../console/connection.js"),
    },
    Asset {
        path: "/mirror.js",
        content_type: JS,
        bytes: include_bytes!("../../console/mirror.js"),
    },
    Asset {
        path: "/tree.js",
        content_type: JS,
        bytes: include_bytes!("../../console/tree.js"),
    },
    Asset {
        path: "/activity.js",
        content_type: JS,
        bytes: include_bytes!("../../console/activity.js"),
    },
    Asset {
        path: "/apps.js",
        content_type: JS,
        bytes: include_bytes!("../../console/apps.js"),
    },
    Asset {
        path: "/dom.js",
        content_type: JS,
        bytes: include_bytes!("../../console/dom.js"),
    },
    Asset {
        path: "/style.css",
        content_type: "text/css; charset=utf-8",
        bytes: include_bytes!("../../console/style.css"),
    },
    Asset {
        path: "/vendor/app-bridge.js",
        content_type: JS,
        bytes: include_bytes!("../../console/vendor/app-bridge.js"),
    },
    Asset {
        path: "/vendor/LICENSES.txt",
        content_type: "text/plain; charset=utf-8",
        bytes: include_bytes!("../../console/vendor/LICENSES.txt"),
    },
];

/// The View origin's relay page (`/sandbox`, served with the View's CSP) and its script.
pub const SANDBOX_HTML: &[u8] = include_bytes!("../../console/sandbox.html");
pub const SANDBOX_JS: Asset = Asset {
    path: "/sandbox.js",
    content_type: JS,
    bytes: include_bytes!("../../console/sandbox.js"),
};
