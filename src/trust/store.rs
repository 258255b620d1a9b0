//! The trust decisions, kept in `<data_dir>/trusted.json` (0600 in a 0700 folder): the
//! fingerprints the user trusted, each with the name it had and when. Read at start and
//! again when the file changes (`ahp-proxy trust` and `untrust` write it), written whole
//! through a temporary file. A file that cannot be read trusts nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

/// One trusted definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trusted {
    /// The server's name when it was trusted (for people; the fingerprint is the key).
    pub name: String,
    /// When (RFC 3339).
    pub at: String,
}

/// The file's contents.
#[derive(Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct File {
    #[serde(default)]
    trusted: BTreeMap<String, Trusted>,
}

/// The decisions, shared by the supervisor (which runs what is trusted) and whoever decides.
#[derive(Debug)]
pub struct TrustStore {
    path: PathBuf,
    state: Mutex<(File, Option<SystemTime>)>,
    changed: watch::Sender<u64>,
}

impl TrustStore {
    /// The store kept in `data_dir`, read now.
    pub fn open(data_dir: &Path) -> Self {
        let store = Self {
            path: data_dir.join("trusted.json"),
            state: Mutex::new((File::default(), None)),
            changed: watch::channel(0).0,
        };
        store.refresh();
        store
    }

    /// Where it is kept.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the definition with fingerprint `fingerprint` is trusted.
    pub fn is_trusted(&self, fingerprint: &str) -> bool {
        self.lock().0.trusted.contains_key(fingerprint)
    }

    /// Every trusted fingerprint, with what is kept of it.
    pub fn entries(&self) -> Vec<(String, Trusted)> {
        let state = self.lock();
        state
            .0
            .trusted
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Trust `fingerprint` (a server named `name`), and keep the decision.
    pub fn trust(&self, fingerprint: &str, name: &str) -> std::io::Result<()> {
        let entry = Trusted {
            name: name.to_string(),
            at: jiff::Timestamp::now().to_string(),
        };
        self.change(|file| {
            file.trusted.insert(fingerprint.to_string(), entry);
        })
    }

    /// Trust `fingerprint` no more; `false` when it was not trusted.
    pub fn untrust(&self, fingerprint: &str) -> std::io::Result<bool> {
        let mut removed = false;
        self.change(|file| removed = file.trusted.remove(fingerprint).is_some())?;
        Ok(removed)
    }

    /// Read the file again when it changed since it was last read; `true` when what it
    /// trusts changed (those watching are told).
    pub fn refresh(&self) -> bool {
        let modified = std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .ok();
        let mut state = self.lock();
        if modified.is_some() && modified == state.1 {
            return false;
        }
        let file = match crate::file_read::read_text(&self.path, 16 * 1024 * 1024) {
            Ok(text) => parse(&text).unwrap_or_else(|why| {
                tracing::warn!(file = %self.path.display(), %why, "trust decisions cannot be read; nothing is trusted until they can");
                File::default()
            }),
            Err(_) => File::default(),
        };
        state.1 = modified;
        if state.0 == file {
            return false;
        }
        state.0 = file;
        drop(state);
        self.changed.send_modify(|n| *n += 1);
        true
    }

    /// Told of every change of what is trusted.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn change(&self, edit: impl FnOnce(&mut File)) -> std::io::Result<()> {
        let mut state = self.lock();
        edit(&mut state.0);
        write(&self.path, &state.0)?;
        state.1 = std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .ok();
        drop(state);
        self.changed.send_modify(|n| *n += 1);
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (File, Option<SystemTime>)> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn parse(text: &str) -> Result<File, String> {
    serde_json::from_str(text).map_err(|e| e.to_string())
}

/// Write `file` to `path` whole: a temporary file (0600) in a 0700 folder, renamed over it.
fn write(path: &Path, file: &File) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    let folder = path.parent().unwrap_or(Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(folder)?;
    let text = serde_json::to_string_pretty(file).map_err(std::io::Error::other)?;
    let temporary = folder.join(format!(".trusted.json.{}", std::process::id()));
    {
        use std::io::Write;
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temporary)?;
        out.write_all(text.as_bytes())?;
        out.write_all(b"\n")?;
        out.sync_all()?;
    }
    std::fs::set_permissions(&temporary, std::fs::Permissions::from_mode(0o600))?;
    std::fs::rename(&temporary, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ahp-trust-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn decisions_are_kept_on_disk_read_back_and_changes_announced() {
        let dir = scratch("keep");
        let store = TrustStore::open(&dir);
        assert!(!store.is_trusted("f1"));
        let mut changes = store.changes();
        store.trust("f1", "notes").unwrap();
        assert!(store.is_trusted("f1"));
        assert!(changes.has_changed().unwrap());
        changes.mark_unchanged();
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(store.path()), 0o600);
        assert_eq!(mode(&dir), 0o700);
        // Another process (the CLI) reads and changes the same file.
        let other = TrustStore::open(&dir);
        assert!(other.is_trusted("f1"));
        assert_eq!(other.entries()[0].1.name, "notes");
        assert!(other.untrust("f1").unwrap());
        assert!(!other.untrust("f1").unwrap());
        // The first sees it once it reads the file again (its time may not have moved on
        // a coarse clock: forget when it was read).
        store.lock().1 = None;
        assert!(store.refresh());
        assert!(!store.is_trusted("f1"));
        assert!(changes.has_changed().unwrap());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_that_cannot_be_read_trusts_nothing() {
        let dir = scratch("bad");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("trusted.json"), "{\"trusted\": [").unwrap();
        let store = TrustStore::open(&dir);
        assert!(store.entries().is_empty());
        assert_eq!(
            parse(r#"{"trusted":{"f":{"name":"n","at":"t"}}}"#)
                .unwrap()
                .trusted
                .len(),
            1
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
