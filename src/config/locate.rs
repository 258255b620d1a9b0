//! Which `proxy.toml` a command reads without `--config`: the nearest one from the working
//! directory upward, as cargo and git find theirs; one above it only when it is the user's.

use std::path::{Path, PathBuf};

/// The file name looked for.
pub const FILE_NAME: &str = "proxy.toml";

/// What the search found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// The nearest `proxy.toml` (absolute when `start` is).
    File(PathBuf),
    /// None in `start` or above it.
    Nothing,
    /// The nearest one above `start` belongs to another user: not read (it could name any
    /// command as a server); `start` has none.
    NotOwned(PathBuf),
}

/// The nearest `proxy.toml` in `start` or a folder above it. One in `start` itself is taken
/// as it is; one above must belong to `owner` (the user running the proxy), so a file
/// someone else left in a shared parent (`/tmp/proxy.toml`) is never read by accident.
pub fn nearest(start: &Path, owner: Option<u32>) -> Found {
    use std::os::unix::fs::MetadataExt;
    let here = start.join(FILE_NAME);
    if here.is_file() {
        return Found::File(here);
    }
    for folder in start.ancestors().skip(1) {
        let candidate = folder.join(FILE_NAME);
        let Ok(meta) = std::fs::metadata(&candidate) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        return match owner {
            Some(uid) if meta.uid() == uid => Found::File(candidate),
            _ => Found::NotOwned(candidate),
        };
    }
    Found::Nothing
}

/// The user this process runs as (the owner of `/proc/self`), if it can be told.
pub fn current_user() -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").ok().map(|m| m.uid())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_file_upward_wins_and_a_strangers_is_not_read() {
        let root = std::env::temp_dir().join(format!("ahp-proxy-locate-{}", std::process::id()));
        let deep = root.join("a/b");
        std::fs::create_dir_all(&deep).unwrap();
        let me = current_user();
        assert!(me.is_some(), "/proc/self tells who runs the tests");
        // Nothing in the test's folders: whatever is above them (usually nothing).
        assert_eq!(nearest(&deep, me), nearest(&root, me));
        std::fs::write(root.join(FILE_NAME), "").unwrap();
        assert_eq!(nearest(&deep, me), Found::File(root.join(FILE_NAME)));
        std::fs::write(root.join("a").join(FILE_NAME), "").unwrap();
        assert_eq!(
            nearest(&deep, me),
            Found::File(root.join("a").join(FILE_NAME))
        );
        // Another owner's file above is reported, not read; one in the folder itself is read.
        let stranger = me.map(|uid| uid + 1);
        assert_eq!(
            nearest(&deep, stranger),
            Found::NotOwned(root.join("a").join(FILE_NAME))
        );
        assert_eq!(
            nearest(&root.join("a"), stranger),
            Found::File(root.join("a").join(FILE_NAME))
        );
        let _ = std::fs::remove_dir_all(&root);
    }
}
