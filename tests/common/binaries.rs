//! The programs under test: the proxy, which cargo builds for these tests, and the example
//! servers, a crate of their own, which the first test to ask for them builds beside it.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

/// The `ahp-proxy` binary cargo built for these tests.
const PROXY: &str = env!("CARGO_BIN_EXE_ahp-proxy");

/// The proxy, with the example servers built beside it: the configs it is started on, its
/// bundled `proxy.toml` included (`${AHP_PROXY_EXAMPLES}`), run them.
pub fn proxy() -> &'static str {
    examples();
    PROXY
}

/// The bundled example MCP servers (`ahp-proxy-example-server <kind>`), beside [`PROXY`]
/// (where the proxy finds them for `${AHP_PROXY_EXAMPLES}`). They are another package of the
/// workspace, and cargo builds a program for the tests of its own package only; so the first
/// call in a test process runs `cargo build` for them, with the proxy's profile and target
/// folder: a plain `cargo test`, one `--test`, and a change to `example-servers/` all get the
/// current program. A failed build fails the test.
pub fn examples() -> &'static str {
    static BUILT: OnceLock<String> = OnceLock::new();
    BUILT.get_or_init(build_examples)
}

fn build_examples() -> String {
    let proxy = Path::new(PROXY);
    let profile_dir = proxy.parent().expect("the proxy's folder");
    let binary = profile_dir.join(format!(
        "ahp-proxy-example-server{}",
        std::env::consts::EXE_SUFFIX
    ));
    let profile = profile_dir
        .file_name()
        .and_then(|n| n.to_str())
        .expect("a profile folder");
    // `<target>/<profile>/`, or `<target>/<triple>/<profile>/` when built with `--target`;
    // cargo marks the target folder itself with a CACHEDIR.TAG.
    let above = profile_dir.parent().expect("a target folder");
    let (target_dir, triple) = if above.join("CACHEDIR.TAG").is_file() {
        (above, None)
    } else {
        let triple = above.file_name().and_then(|n| n.to_str());
        (above.parent().expect("a target folder"), triple)
    };
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into()));
    cargo
        .args(["build", "--quiet", "--package", "ahp-proxy-example-server"])
        .arg("--manifest-path")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir);
    match profile {
        "debug" => {}
        "release" => {
            cargo.arg("--release");
        }
        custom => {
            cargo.args(["--profile", custom]);
        }
    }
    if let Some(triple) = triple {
        cargo.args(["--target", triple]);
    }
    let output = cargo.output().expect("run cargo");
    assert!(
        output.status.success() && binary.is_file(),
        "cargo build --package ahp-proxy-example-server failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    binary.to_str().expect("a UTF-8 path").to_string()
}
