//! A real browser for the console tests: Debian's headless `chromium`, driven over WebDriver
//! (`chromedriver`, through fantoccini). Missing either is a failure, never a skip: `scripts/test`
//! installs both.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};

use crate::common::{ScratchDir, PATIENCE};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// One headless Chromium with its chromedriver; both end with it.
pub struct Browser {
    pub client: Client,
    driver: Child,
    /// The browser processes chromedriver started (found once the session is up), with their
    /// start times: a number the system has given to another process since is not theirs.
    browsers: Vec<(u32, String)>,
    _profile: ScratchDir,
}

/// When `pid` started (field 22 of its `/proc/<pid>/stat`).
fn started(pid: u32) -> Option<String> {
    crate::common::stat(pid).and_then(|fields| fields.get(19).cloned())
}

/// Where the screenshots of a test run go: `target/tmp/console-screenshots/`.
pub fn screenshot_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots");
    std::fs::create_dir_all(&dir).expect("screenshot folder");
    dir
}

impl Browser {
    /// Start chromedriver and a fresh headless Chromium (flags for running as root on a
    /// closed network; `evil.example` resolves to loopback, for the cross-origin test).
    pub async fn start() -> Self {
        for program in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                std::path::Path::new(program).exists(),
                "{program} is missing: install Debian's chromium and chromium-driver (`scripts/test` does)"
            );
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        // The profile, and the temporary folder of chromedriver and the browser (Chromium's
        // `org.chromium.Chromium.*` socket folders), removed with the scratch folder.
        let profile = ScratchDir::new("chromium");
        let temporary = profile.path().join("tmp");
        std::fs::create_dir_all(&temporary).expect("the browser's temporary folder");
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .env("TMPDIR", &temporary)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let capabilities = json!({
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1400,1000",
                    format!("--user-data-dir={}", profile.path().join("profile").display()),
                    "--host-resolver-rules=MAP evil.example 127.0.0.1",
                ]
            }
        });
        let capabilities = match capabilities {
            Value::Object(map) => map,
            _ => unreachable!(),
        };
        let url = format!("http://127.0.0.1:{port}");
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let client = loop {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            match ClientBuilder::new(connector)
                .capabilities(capabilities.clone())
                .connect(&url)
                .await
            {
                Ok(client) => break client,
                Err(error) if tokio::time::Instant::now() < deadline => {
                    let _ = error;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(error) => panic!("chromedriver did not start a browser: {error}"),
            }
        };
        let browsers = crate::common::child_pids(driver.id())
            .into_iter()
            .filter_map(|pid| Some((pid, started(pid)?)))
            .collect();
        Self {
            client,
            driver,
            browsers,
            _profile: profile,
        }
    }

    /// Run `script` (its `return` value comes back as JSON).
    pub async fn eval(&self, script: &str) -> Value {
        self.client
            .execute(script, vec![])
            .await
            .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    /// Poll `script` until it returns something truthy (within the patience window); returns it.
    pub async fn until(&self, what: &str, script: &str) -> Value {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let value = self
                .client
                .execute(script, vec![])
                .await
                .unwrap_or(Value::Null);
            let truthy = match &value {
                Value::Null => false,
                Value::Bool(b) => *b,
                Value::String(s) => !s.is_empty(),
                Value::Number(n) => n.as_f64() != Some(0.0),
                _ => true,
            };
            if truthy {
                return value;
            }
            if tokio::time::Instant::now() > deadline {
                let page = self
                    .client
                    .execute(
                        "return document.body ? document.body.innerHTML.slice(0, 4000) : ''",
                        vec![],
                    )
                    .await
                    .unwrap_or(Value::Null);
                panic!("{what}: not seen within the patience window; the page shows:\n{page}");
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Click the first element matching `css`. The page redraws as actions arrive, so the
    /// element found may be replaced before the click lands (a stale element); then it is
    /// found again and clicked again, until the patience window runs out.
    pub async fn click(&self, css: &str) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let clicked = match self.client.find(Locator::Css(css)).await {
                Ok(element) => element.click().await,
                Err(e) => Err(e),
            };
            match clicked {
                Ok(()) => return,
                Err(e)
                    if e.is_stale_element_reference() && tokio::time::Instant::now() < deadline =>
                {
                    tokio::task::yield_now().await;
                }
                Err(e) => panic!("cannot click {css}: {e}"),
            }
        }
    }

    /// Save a screenshot as `name`.png in the screenshot folder.
    pub async fn screenshot(&self, name: &str) {
        let png = self.client.screenshot().await.expect("screenshot");
        std::fs::write(screenshot_dir().join(format!("{name}.png")), png).expect("save screenshot");
    }

    pub async fn close(mut self) {
        let client = self.client.clone();
        let _ = client.close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Drop for Browser {
    /// The browser chromedriver started goes with it (after a failed test, with no `close`,
    /// still running), and every process of it is gone before its profile folder is removed:
    /// a renderer or service still writing would leave files behind.
    fn drop(&mut self) {
        // The browsers seen at start that are still those processes, and whatever lives
        // below the driver now: each with everything below it.
        let mut processes: Vec<u32> = (self.browsers.iter())
            .filter(|(pid, start)| started(*pid).as_ref() == Some(start))
            .flat_map(|&(pid, _)| {
                let mut tree = crate::common::descendants(pid);
                tree.push(pid);
                tree
            })
            .chain(crate::common::descendants(self.driver.id()))
            .collect();
        processes.sort_unstable();
        processes.dedup();
        processes.retain(|&pid| crate::common::alive(pid));
        if !processes.is_empty() {
            let _ = Command::new("kill")
                .arg("-9")
                .args(processes.iter().map(u32::to_string))
                .status();
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        let deadline = std::time::Instant::now() + PATIENCE;
        while processes.iter().any(|&pid| crate::common::alive(pid))
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
