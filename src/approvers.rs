//! Who may decide held tool calls: the approval key. With an AHP token in effect the token
//! is the key (every connection past the gate presented it); otherwise the proxy draws 128
//! bits from the system's CSPRNG at start, and refuses to start without them. The key goes
//! to the user's console tab and VS Code URL (the banner, on a terminal) and to the
//! terminal's commands through a file only the user can read: `approval-<AHP port>.key`,
//! 0600, in a 0700 folder `ahp-proxy` under `$XDG_RUNTIME_DIR` (else `$HOME/.local/state`),
//! removed on ordered shutdown. Never logged, never in a server's environment, never sent
//! over MCP. Drawing, parsing and naming are pure; `KeyFile` and `read` do the I/O.

use std::ffi::OsString;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use ring::rand::SecureRandom;

/// The key's length in bytes (128 bits), written as 32 lowercase hex digits.
pub const KEY_BYTES: usize = 16;

/// The most a key file may hold (a key is 32 bytes and a newline).
const MAX_FILE_BYTES: u64 = 256;

/// A drawn approval key (its `Debug` form never shows it).
#[derive(Clone, PartialEq, Eq)]
pub struct ApprovalKey(String);

impl std::fmt::Debug for ApprovalKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApprovalKey(…)")
    }
}

impl ApprovalKey {
    /// 128 bits from `random`, as hex; `Err` when the source fails (then the proxy does not
    /// start: there is no guessable fallback).
    pub fn draw(random: &dyn SecureRandom) -> Result<Self, String> {
        let mut bytes = [0u8; KEY_BYTES];
        Self::from_drawn(random.fill(&mut bytes).map(|()| bytes))
    }

    /// The key from what the random source gave (or its failure).
    fn from_drawn(
        drawn: Result<[u8; KEY_BYTES], ring::error::Unspecified>,
    ) -> Result<Self, String> {
        crate::unguessable::hex(drawn.ok())
            .map(Self)
            .ok_or_else(|| "cannot draw the approval key: the system's random source failed".into())
    }

    /// A key as written in its file: 32 hex digits (surrounding white space ignored).
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        (text.len() == 2 * KEY_BYTES && text.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| Self(text.to_ascii_lowercase()))
    }

    /// The key's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The folder key files live in: `$XDG_RUNTIME_DIR/ahp-proxy` when that is an absolute
/// path, else `$HOME/.local/state/ahp-proxy`; `None` without either (pure).
pub fn folder(runtime_dir: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    let absolute = |dir: Option<OsString>| dir.map(PathBuf::from).filter(|d| d.is_absolute());
    match (absolute(runtime_dir), absolute(home)) {
        (Some(runtime), _) => Some(runtime.join("ahp-proxy")),
        (None, Some(home)) => Some(home.join(".local/state/ahp-proxy")),
        (None, None) => None,
    }
}

/// The key file of the proxy whose AHP endpoint is on `port`, where this process's
/// environment puts it.
pub fn path_for(port: u16) -> Option<PathBuf> {
    let folder = folder(
        std::env::var_os("XDG_RUNTIME_DIR"),
        std::env::var_os("HOME"),
    )?;
    Some(folder.join(format!("approval-{port}.key")))
}

/// The key written for the proxy on `port`, if its file is there, ours and well formed.
pub fn read(port: u16) -> Option<ApprovalKey> {
    let path = path_for(port)?;
    let bytes = crate::file_read::read(&path, MAX_FILE_BYTES).ok()?;
    ApprovalKey::parse(std::str::from_utf8(&bytes).ok()?)
}

/// The key's file while the proxy runs: removed when dropped (ordered shutdown).
#[derive(Debug)]
pub struct KeyFile {
    path: PathBuf,
}

impl KeyFile {
    /// Write `key` for the proxy on `port`: the folder made (or narrowed to) 0700 and checked
    /// to be the user's, the file written 0600 beside it and renamed into place, so it is
    /// never readable by others, even for a moment.
    pub fn write(port: u16, key: &ApprovalKey) -> Result<Self, String> {
        let path = path_for(port).ok_or("neither XDG_RUNTIME_DIR nor HOME is set")?;
        let folder = path.parent().ok_or("the key file has no folder")?;
        Self::write_in(folder, port, key)
    }

    /// Write `key` for the proxy on `port` in `folder` (see [`KeyFile::write`]).
    pub fn write_in(folder: &Path, port: u16, key: &ApprovalKey) -> Result<Self, String> {
        let path = folder.join(format!("approval-{port}.key"));
        private_folder(folder).map_err(|e| format!("{}: {e}", folder.display()))?;
        let partial = folder.join(format!(".approval-{port}.key.{}", std::process::id()));
        let written = (|| {
            let _ = std::fs::remove_file(&partial);
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&partial)?;
            file.write_all(format!("{}\n", key.as_str()).as_bytes())?;
            file.sync_all()?;
            std::fs::rename(&partial, &path)
        })();
        if let Err(error) = written {
            let _ = std::fs::remove_file(&partial);
            return Err(format!("{}: {error}", path.display()));
        }
        Ok(Self { path })
    }

    /// Where it was written.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for KeyFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// `folder` exists, is a folder of this user's (not a link) and only they may enter it.
fn private_folder(folder: &Path) -> std::io::Result<()> {
    if let Some(parent) = folder.parent() {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(folder) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = std::fs::symlink_metadata(folder)?;
    let mine = meta.uid() == rustix::process::geteuid().as_raw();
    if !meta.is_dir() || !mine {
        return Err(std::io::Error::other(
            "not a folder of this user's: the approval key is not written there",
        ));
    }
    if meta.permissions().mode() & 0o777 != 0o700 {
        std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_128_random_bits_in_hex_and_nothing_else_parses() {
        let random = ring::rand::SystemRandom::new();
        let key = ApprovalKey::draw(&random).unwrap();
        assert_eq!(key.as_str().len(), 32);
        assert!(key.as_str().bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(key, ApprovalKey::draw(&random).unwrap());
        assert_eq!(
            ApprovalKey::parse(&format!(" {}\n", key.as_str())),
            Some(key.clone())
        );
        assert!(!format!("{key:?}").contains(key.as_str()));
        for bad in [
            "",
            "abc",
            &"g".repeat(32),
            &"a".repeat(31),
            &"a".repeat(33),
            "0x0123456789abcdef0123456789abcd",
        ] {
            assert_eq!(ApprovalKey::parse(bad), None, "{bad:?}");
        }
        // No randomness, no key (and no guessable stand-in).
        assert!(ApprovalKey::from_drawn(Err(ring::error::Unspecified)).is_err());
    }

    #[test]
    fn the_folder_is_the_runtime_dir_else_the_users_state_folder() {
        let os = |s: &str| Some(OsString::from(s));
        assert_eq!(
            folder(os("/run/user/1000"), os("/home/me")),
            Some(PathBuf::from("/run/user/1000/ahp-proxy"))
        );
        assert_eq!(
            folder(None, os("/home/me")),
            Some(PathBuf::from("/home/me/.local/state/ahp-proxy"))
        );
        assert_eq!(
            folder(os("relative"), os("/home/me")),
            Some(PathBuf::from("/home/me/.local/state/ahp-proxy"))
        );
        assert_eq!(folder(os(""), None), None);
    }

    #[test]
    fn the_file_is_the_users_alone_and_goes_with_the_proxy() {
        let base = std::env::temp_dir().join(format!("ahp-proxy-key-{}", std::process::id()));
        let folder = base.join("ahp-proxy");
        std::fs::create_dir_all(&folder).unwrap();
        // A folder others could enter is narrowed first.
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755)).unwrap();
        let key = ApprovalKey::draw(&ring::rand::SystemRandom::new()).unwrap();
        let file = KeyFile::write_in(&folder, 8765, &key).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&folder), 0o700);
        assert_eq!(mode(file.path()), 0o600);
        let text = std::fs::read_to_string(file.path()).unwrap();
        assert_eq!(ApprovalKey::parse(&text), Some(key));
        assert_eq!(
            std::fs::read_dir(&folder).unwrap().count(),
            1,
            "no partial file left"
        );
        let path = file.path().to_path_buf();
        drop(file);
        assert!(!path.exists());
        // A link where the folder should be is not written through.
        let link = base.join("link");
        std::os::unix::fs::symlink(&folder, &link).unwrap();
        let key = ApprovalKey::draw(&ring::rand::SystemRandom::new()).unwrap();
        assert!(KeyFile::write_in(&link, 1, &key).is_err());
        std::fs::remove_dir_all(&base).unwrap();
    }
}
