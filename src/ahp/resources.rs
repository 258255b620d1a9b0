//! `resource*` commands on host files, confined to writable `directory` customizations (every
//! URI resolved, lexically and through symlinks, and refused unless inside); etags for `ifMatch`.

use std::io::Write;
use std::path::{Component, Path, PathBuf};

use ahp_types::commands::{
    ContentEncoding, DirectoryEntry, ResourceCopyParams, ResourceDeleteParams, ResourceListParams,
    ResourceListResult, ResourceMkdirParams, ResourceMoveParams, ResourceReadParams,
    ResourceReadResult, ResourceResolveParams, ResourceResolveResult, ResourceType,
    ResourceWriteMode, ResourceWriteParams,
};
use base64::Engine as _;

use crate::discovery::uri;
use crate::jsonrpc::{ahp_codes, RpcError};
use crate::spec::DirectorySpec;

/// Largest file `resourceRead` returns.
pub const MAX_READ_BYTES: u64 = 16 * 1024 * 1024;

/// The writable folders and the operations allowed inside them.
#[derive(Debug, Default, Clone)]
pub struct Files {
    /// `(as configured, canonical)` for every writable directory that exists.
    roots: Vec<(PathBuf, PathBuf)>,
}

fn denied(message: String) -> RpcError {
    RpcError::new(ahp_codes::PERMISSION_DENIED, message)
}

fn not_found(path: &Path) -> RpcError {
    RpcError::new(
        ahp_codes::NOT_FOUND,
        format!("{} does not exist", path.display()),
    )
}

fn io_error(path: &Path, error: std::io::Error) -> RpcError {
    match error.kind() {
        std::io::ErrorKind::NotFound => not_found(path),
        std::io::ErrorKind::AlreadyExists => RpcError::new(
            ahp_codes::ALREADY_EXISTS,
            format!("{} already exists", path.display()),
        ),
        std::io::ErrorKind::PermissionDenied => denied(format!("{}: {error}", path.display())),
        _ => RpcError::new(
            crate::jsonrpc::codes::INTERNAL_ERROR,
            format!("{}: {error}", path.display()),
        ),
    }
}

impl Files {
    /// Files inside the writable ones of `dirs`.
    pub fn new(dirs: &[DirectorySpec]) -> Self {
        let roots = dirs
            .iter()
            .filter(|d| d.writable)
            .filter_map(|d| Some((d.path.clone(), std::fs::canonicalize(&d.path).ok()?)))
            .collect();
        Self { roots }
    }

    /// The path `uri` names, if it is inside a writable directory (the directory itself
    /// counts only when `allow_root`).
    fn locate(&self, uri_text: &str, allow_root: bool) -> Result<PathBuf, RpcError> {
        let path = uri::file_path(uri_text).ok_or_else(|| {
            RpcError::invalid_params(format!(
                "{uri_text:?} is not a file: URI; resources are host files inside writable directories"
            ))
        })?;
        let path =
            normalize(&path).ok_or_else(|| denied(format!("{uri_text:?} climbs above /")))?;
        for (configured, canonical) in &self.roots {
            let Ok(relative) = path.strip_prefix(configured) else {
                continue;
            };
            if relative.as_os_str().is_empty() && !allow_root {
                return Err(denied(format!(
                    "{} is the writable directory itself; name a file inside it",
                    path.display()
                )));
            }
            // Symlinks inside the folder must not lead out of it: resolve the deepest part
            // that exists and check it is still under the canonical root.
            let target = canonical.join(relative);
            if std::fs::symlink_metadata(&target).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(denied(format!(
                    "{} is a symbolic link; resource commands do not follow links",
                    path.display()
                )));
            }
            // `symlink_metadata`, not `exists`: a dangling link must count as present.
            let mut existing = target.clone();
            while std::fs::symlink_metadata(&existing).is_err() {
                match existing.parent() {
                    Some(parent) => existing = parent.to_path_buf(),
                    None => break,
                }
            }
            let real = std::fs::canonicalize(&existing).map_err(|e| io_error(&existing, e))?;
            if !real.starts_with(canonical) {
                return Err(denied(format!(
                    "{} leads outside the writable directory {} through a symbolic link",
                    path.display(),
                    configured.display()
                )));
            }
            return Ok(target);
        }
        Err(denied(format!(
            "{} is outside every writable directory; writable: {}",
            path.display(),
            if self.roots.is_empty() {
                "none configured".to_string()
            } else {
                self.roots
                    .iter()
                    .map(|(p, _)| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        )))
    }

    /// `resourceRead`.
    pub fn read(&self, params: ResourceReadParams) -> Result<ResourceReadResult, RpcError> {
        let path = self.locate(&params.uri, false)?;
        let bytes = read_regular(&path)?;
        let (data, encoding) = match (params.encoding, String::from_utf8(bytes)) {
            (Some(ContentEncoding::Base64), Ok(text)) => (
                base64::engine::general_purpose::STANDARD.encode(text),
                ContentEncoding::Base64,
            ),
            (_, Ok(text)) => (text, ContentEncoding::Utf8),
            (_, Err(e)) => (
                base64::engine::general_purpose::STANDARD.encode(e.into_bytes()),
                ContentEncoding::Base64,
            ),
        };
        Ok(ResourceReadResult {
            data,
            encoding,
            content_type: content_type(&path).map(str::to_string),
        })
    }

    /// `resourceWrite`: truncate (atomic replace) or append; parents are created.
    pub fn write(&self, params: ResourceWriteParams) -> Result<(), RpcError> {
        let path = self.locate(&params.uri, false)?;
        if let Some(expected) = &params.if_match {
            let current = std::fs::symlink_metadata(&path)
                .ok()
                .filter(|m| m.is_file())
                .map(|m| etag(&m));
            if current.as_deref() != Some(expected.as_str()) {
                return Err(RpcError::new(
                    ahp_codes::CONFLICT,
                    format!(
                        "{} is no longer what etag {expected:?} named ({}): resolve it again",
                        path.display(),
                        match &current {
                            Some(now) => format!("it is {now:?} now"),
                            None => "it is gone".to_string(),
                        }
                    ),
                ));
            }
        }
        let data = match params.encoding {
            ContentEncoding::Utf8 => params.data.into_bytes(),
            ContentEncoding::Base64 => base64::engine::general_purpose::STANDARD
                .decode(params.data.as_bytes())
                .map_err(|e| RpcError::invalid_params(format!("data is not valid base64: {e}")))?,
        };
        if path.is_dir() {
            return Err(RpcError::invalid_params(format!(
                "{} is a directory",
                path.display()
            )));
        }
        if params.create_only == Some(true) && path.exists() {
            return Err(io_error(&path, std::io::ErrorKind::AlreadyExists.into()));
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io_error(parent, e))?;
        }
        match params.mode.unwrap_or(ResourceWriteMode::Truncate) {
            ResourceWriteMode::Truncate => replace_atomically(&path, &data)?,
            ResourceWriteMode::Append => {
                let mut file =
                    open_no_follow(&path, std::fs::OpenOptions::new().create(true).append(true))?;
                file.write_all(&data).map_err(|e| io_error(&path, e))?;
            }
            ResourceWriteMode::Insert => {
                return Err(RpcError::invalid_params(
                    "mode \"insert\" is not supported; use truncate or append",
                ))
            }
        }
        Ok(())
    }

    /// `resourceList`.
    pub fn list(&self, params: ResourceListParams) -> Result<ResourceListResult, RpcError> {
        let path = self.locate(&params.uri, true)?;
        let entries = std::fs::read_dir(&path).map_err(|e| io_error(&path, e))?;
        let mut out: Vec<DirectoryEntry> = entries
            .filter_map(Result::ok)
            .map(|entry| {
                let kind = match entry.file_type() {
                    Ok(t) if t.is_dir() => "directory",
                    Ok(t) if t.is_symlink() => "symlink",
                    _ => "file",
                };
                DirectoryEntry {
                    name: entry.file_name().to_string_lossy().into_owned(),
                    r#type: kind.to_string(),
                }
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(ResourceListResult { entries: out })
    }

    /// `resourceDelete`: files, empty folders, and folders with something in them when
    /// `recursive` (never the directory itself).
    pub fn delete(&self, params: ResourceDeleteParams) -> Result<(), RpcError> {
        let path = self.locate(&params.uri, false)?;
        let meta = std::fs::symlink_metadata(&path).map_err(|e| io_error(&path, e))?;
        if !meta.is_dir() {
            return std::fs::remove_file(&path).map_err(|e| io_error(&path, e));
        }
        if params.recursive == Some(true) {
            return std::fs::remove_dir_all(&path).map_err(|e| io_error(&path, e));
        }
        std::fs::remove_dir(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::DirectoryNotEmpty => RpcError::invalid_params(format!(
                "{} is a folder that is not empty: send recursive: true to delete it with everything in it",
                path.display()
            )),
            _ => io_error(&path, e),
        })
    }

    /// `resourceMkdir`.
    pub fn mkdir(&self, params: ResourceMkdirParams) -> Result<(), RpcError> {
        let path = self.locate(&params.uri, false)?;
        std::fs::create_dir_all(&path).map_err(|e| io_error(&path, e))
    }

    /// `resourceResolve`: type, size and, for a file, the etag `resourceWrite` checks
    /// `ifMatch` against.
    pub fn resolve(
        &self,
        params: ResourceResolveParams,
    ) -> Result<ResourceResolveResult, RpcError> {
        let path = self.locate(&params.uri, true)?;
        let meta = std::fs::symlink_metadata(&path).map_err(|e| io_error(&path, e))?;
        let r#type = if meta.is_dir() {
            ResourceType::Directory
        } else if meta.file_type().is_symlink() {
            ResourceType::Symlink
        } else {
            ResourceType::File
        };
        Ok(ResourceResolveResult {
            uri: params.uri,
            r#type,
            size: i64::try_from(meta.len()).ok(),
            mtime: None,
            ctime: None,
            content_type: content_type(&path).map(str::to_string),
            etag: meta.is_file().then(|| etag(&meta)),
        })
    }

    /// `resourceCopy` (files only): read the source without following links, then replace
    /// the destination atomically (a link there is replaced, never followed).
    pub fn copy(&self, params: ResourceCopyParams) -> Result<(), RpcError> {
        let (from, to) = self.pair(&params.source, &params.destination, params.fail_if_exists)?;
        let data = read_regular(&from)?;
        replace_atomically(&to, &data)
    }

    /// `resourceMove`.
    pub fn rename(&self, params: ResourceMoveParams) -> Result<(), RpcError> {
        let (from, to) = self.pair(&params.source, &params.destination, params.fail_if_exists)?;
        std::fs::rename(&from, &to).map_err(|e| io_error(&from, e))
    }

    fn pair(
        &self,
        source: &str,
        destination: &str,
        fail_if_exists: Option<bool>,
    ) -> Result<(PathBuf, PathBuf), RpcError> {
        let from = self.locate(source, false)?;
        let to = self.locate(destination, false)?;
        if !from.exists() {
            return Err(not_found(&from));
        }
        if fail_if_exists == Some(true) && to.exists() {
            return Err(io_error(&to, std::io::ErrorKind::AlreadyExists.into()));
        }
        Ok((from, to))
    }
}

/// The bytes of the regular file at `path` (at most [`MAX_READ_BYTES`]), without following a
/// symbolic link in its last component and without blocking on a FIFO.
fn read_regular(path: &Path) -> Result<Vec<u8>, RpcError> {
    use crate::file_read::ReadError;
    crate::file_read::read_no_follow(path, MAX_READ_BYTES).map_err(|e| match e {
        e if e.is_link_loop() => link_refused(path),
        ReadError::Io(e) => io_error(path, e),
        ReadError::NotRegular => {
            RpcError::invalid_params(format!("{} is not a regular file", path.display()))
        }
        ReadError::TooLarge(max) => {
            RpcError::invalid_params(format!("{} is larger than {max} bytes", path.display()))
        }
    })
}

fn link_refused(path: &Path) -> RpcError {
    denied(format!(
        "{} is a symbolic link; resource commands do not follow links",
        path.display()
    ))
}

/// Open `path` without following a symbolic link in its last component (and without
/// blocking on a FIFO).
fn open_no_follow(
    path: &Path,
    options: &mut std::fs::OpenOptions,
) -> Result<std::fs::File, RpcError> {
    use std::os::unix::fs::OpenOptionsExt;
    options
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => link_refused(path),
            _ => io_error(path, e),
        })
}

/// Write `data` to a fresh, exclusively created temp file next to `path`, then rename it
/// over `path`: readers and the watcher never see a half-written file, and nothing already
/// sitting at the temp name (a planted link) is ever opened.
fn replace_atomically(path: &Path, data: &[u8]) -> Result<(), RpcError> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let temp = path.with_file_name(format!(
        ".{}.ahp-proxy-{}-{}-{nanos}.tmp",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
    ));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)
        .and_then(|mut file| file.write_all(data))
        .and_then(|()| std::fs::rename(&temp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(io_error(path, e));
    }
    Ok(())
}

/// A file's version token for `ifMatch`: its size, inode and modification time. Every
/// write here replaces the file (a new inode) or appends (a new size and time).
fn etag(meta: &std::fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    format!(
        "{:x}-{:x}-{:x}.{:x}",
        meta.len(),
        meta.ino(),
        meta.mtime(),
        meta.mtime_nsec()
    )
}

/// Resolve `.` and `..` without touching the disk; `None` if it climbs above `/`.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::from("/");
    for part in path.components() {
        match part {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(name) => out.push(name),
        }
    }
    Some(out)
}

fn content_type(path: &Path) -> Option<&'static str> {
    Some(match path.extension()?.to_str()? {
        "md" | "mdc" => "text/markdown",
        "json" => "application/json",
        "txt" => "text/plain",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::ContentKind;

    fn files(dir: &Path) -> Files {
        Files::new(&[DirectorySpec {
            path: dir.join("w"),
            name: "w".into(),
            contents: ContentKind::Prompt,
            writable: true,
        }])
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ahp-proxy-res-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("w")).unwrap();
        dir
    }

    #[test]
    fn inside_is_allowed_and_escapes_are_refused() {
        let dir = scratch("locate");
        std::fs::write(dir.join("secret"), "x").unwrap();
        std::os::unix::fs::symlink(&dir, dir.join("w/link")).unwrap();
        let f = files(&dir);
        let inside = uri::file_uri(&dir.join("w/a/b.md"));
        assert!(f.locate(&inside, false).is_ok());
        for escape in [
            format!("{}/../secret", uri::file_uri(&dir.join("w"))),
            uri::file_uri(&dir.join("secret")),
            uri::file_uri(&dir.join("w/link/secret")),
            uri::file_uri(&dir.join("w/link/new-file")),
        ] {
            let error = f.locate(&escape, false).unwrap_err();
            assert_eq!(
                error.code,
                ahp_codes::PERMISSION_DENIED,
                "{escape}: {}",
                error.message
            );
        }
        assert_eq!(f.locate("https://x/y", false).unwrap_err().code, -32602);
        let root = uri::file_uri(&dir.join("w"));
        assert!(f.locate(&root, true).is_ok());
        assert_eq!(
            f.locate(&root, false).unwrap_err().code,
            ahp_codes::PERMISSION_DENIED
        );
    }

    #[test]
    fn dangling_links_never_lead_outside() {
        let dir = scratch("links");
        std::fs::create_dir_all(dir.join("out")).unwrap();
        std::os::unix::fs::symlink(dir.join("out/created.txt"), dir.join("w/evil.md")).unwrap();
        let f = files(&dir);
        let evil = uri::file_uri(&dir.join("w/evil.md"));
        let error = f.locate(&evil, false).unwrap_err();
        assert_eq!(
            error.code,
            ahp_codes::PERMISSION_DENIED,
            "{}",
            error.message
        );
        let write = |mode| ResourceWriteParams {
            channel: String::new(),
            meta: None,
            uri: evil.clone(),
            data: "x".into(),
            encoding: ContentEncoding::Utf8,
            content_type: None,
            create_only: None,
            mode: Some(mode),
            if_match: None,
            position: None,
        };
        assert!(f.write(write(ResourceWriteMode::Append)).is_err());
        assert!(f.write(write(ResourceWriteMode::Truncate)).is_err());
        std::fs::write(dir.join("w/source.md"), "data").unwrap();
        let copy = ResourceCopyParams {
            channel: String::new(),
            meta: None,
            source: uri::file_uri(&dir.join("w/source.md")),
            destination: evil.clone(),
            fail_if_exists: None,
        };
        assert!(f.copy(copy).is_err());
        assert!(!dir.join("out/created.txt").exists());
    }

    #[test]
    fn nothing_is_writable_without_writable_directories() {
        let f = Files::new(&[]);
        let error = f.locate("file:///tmp/x", false).unwrap_err();
        assert!(
            error.message.contains("none configured"),
            "{}",
            error.message
        );
    }
}
